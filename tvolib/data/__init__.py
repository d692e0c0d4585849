"""Datasets of the paper (App. C.3) as float32 binary-image tensors.

Public API (see ARCHITECTURE.md, ``tvolib.data``): :func:`data_root`, :func:`load_dataset`,
:data:`DATASETS`, :class:`BinaryImageData`, plus :class:`DatasetNotFoundError` and
:class:`ChecksumError` for missing or corrupt files and :func:`cache_dir` for parsed arrays.
``python -m tvolib.data`` verifies (and with ``--download`` fetches) the files.
"""
from .dataset import DATASETS, LABELS, BinaryImageData, load_dataset
from .files import SHA256, ChecksumError, DatasetNotFoundError, cache_dir, data_root

__all__ = ["DATASETS", "LABELS", "BinaryImageData", "load_dataset", "data_root", "cache_dir",
           "DatasetNotFoundError", "ChecksumError", "SHA256"]
