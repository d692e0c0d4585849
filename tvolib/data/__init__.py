"""Datasets of the paper (App. C.3) as float32 binary-image tensors.

Public API: :func:`data_root`, :func:`load_dataset`, :data:`DATASETS`, :class:`BinaryImageData`;
:class:`DatasetNotFoundError`, :class:`CorruptFileError` and its subclass :class:`ChecksumError`
for missing or damaged files; :func:`cache_dir` for parsed arrays. Every file is verified by
content on first use in each process (see :mod:`tvolib.data.files`) and every parsed-array cache
against a record of its source and arrays (see :mod:`tvolib.data.cache`).
``python -m tvolib.data`` checks (and with ``--download`` fetches) every dataset.
"""
from .dataset import DATASETS, LABELS, BinaryImageData, load_dataset
from .files import SHA256, ChecksumError, CorruptFileError, DatasetNotFoundError, cache_dir, data_root

__all__ = ["DATASETS", "LABELS", "BinaryImageData", "load_dataset", "data_root", "cache_dir",
           "DatasetNotFoundError", "CorruptFileError", "ChecksumError", "SHA256"]
