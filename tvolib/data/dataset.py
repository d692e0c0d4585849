"""The datasets of the paper as binary-image tensors: :func:`load_dataset` and :class:`BinaryImageData`.

Binarization follows App. C.3 of the paper:

* ``mnist`` / ``fashion_mnist`` (continuous VAE): 60k / 10k grey levels in [0, 1]; the training
  set is binarized **dynamically** (Burda et al. 2016, footnote 2 p. 6: a fresh Bernoulli draw with
  the grey level as mean every epoch, :meth:`BinaryImageData.train_epoch`); the test set is
  binarized **once**, seeded by ``dataset_seed`` (not by the run's ``seed``), so that test numbers
  are comparable across runs and epochs.
* ``binarized_mnist`` (SBN): Larochelle & Murray's fixed binarization, 50k train / 10k test
  (the 10k validation images are not used, as in the paper).
* ``omniglot`` (SBN): 23,000 train / 8,070 test, binarized once (seeded); see
  :func:`tvolib.data.sources.read_omniglot` for the derived 28x28 fallback and its label.

Subsets (small profiles) are seeded random draws by ``seed``, never the first N rows (the
binarized MNIST test file is sorted by class). Test binarization happens on the full test set
before subsetting, so a subset's images are exactly the corresponding full-set images.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field

import numpy as np
import torch

from .files import data_root, download_enabled
from .sources import locate_binarized_mnist, read_binarized_mnist, read_mnist_like, read_omniglot, seeded_generator

__all__ = ["DATASETS", "SIZES", "LABELS", "BinaryImageData", "load_dataset"]

DATASETS = ("mnist", "fashion_mnist", "binarized_mnist", "omniglot")
#: Full (train, test) sizes of each dataset (App. C.3).
SIZES = {"mnist": (60_000, 10_000), "fashion_mnist": (60_000, 10_000), "binarized_mnist": (50_000, 10_000),
         "omniglot": (23_000, 8_070)}
#: Names shown in figures and tables.
LABELS = {
    "mnist": "MNIST",
    "fashion_mnist": "Fashion MNIST",
    "binarized_mnist": "binarized MNIST",
    "omniglot": "omniglot",
    "omniglot_derived": "omniglot (derived 28x28)",
}


@dataclass(frozen=True, eq=False)
class BinaryImageData:
    """One dataset, ready for training: float32 ``(N, 784)`` tensors on CPU.

    ``train`` holds grey levels in [0, 1] when ``dynamic_binarization`` (draw a binary epoch with
    :meth:`train_epoch`), else the fixed {0, 1} images. ``test`` is always fixed {0, 1}.
    ``train_index`` / ``test_index`` are the rows of the full splits that were kept (a subset);
    labels are class ids (digit, or Omniglot alphabet/character), ``None`` where the files have none.
    ``source`` says which files the data come from: the dataset's name for the canonical
    (checksum-verified) files, Omniglot's variant and file hashes otherwise (see
    :func:`~tvolib.data.sources.read_omniglot`).
    """

    name: str
    label: str
    train: torch.Tensor
    test: torch.Tensor
    dynamic_binarization: bool
    train_mean: torch.Tensor
    train_index: torch.Tensor | None = None
    test_index: torch.Tensor | None = None
    train_labels: torch.Tensor | None = None
    test_labels: torch.Tensor | None = None
    seed: int = 0
    dataset_seed: int = 0
    n_train_full: int = field(default=0)
    n_test_full: int = field(default=0)
    source: str = ""

    def train_epoch(self, generator: torch.Generator | None = None) -> torch.Tensor:
        """The training set for one epoch: a fresh Bernoulli draw if dynamic, else the fixed images.

        The draw happens on ``generator``'s device (so a CUDA generator gives a CUDA tensor).
        """
        if not self.dynamic_binarization:
            return self.train
        probs = self.train if generator is None else self.train.to(generator.device)
        return torch.bernoulli(probs, generator=generator)

    def to(self, device: torch.device | str) -> "BinaryImageData":
        """A copy with ``train``, ``test`` and ``train_mean`` on ``device`` (indices stay on CPU)."""
        return dataclasses.replace(self, train=self.train.to(device), test=self.test.to(device),
                                   train_mean=self.train_mean.to(device))

    def __repr__(self) -> str:
        kind = "dynamic" if self.dynamic_binarization else "fixed"
        return (f"BinaryImageData({self.label!r}: train {tuple(self.train.shape)}, "
                f"test {tuple(self.test.shape)}, {kind} binarization)")


def _check_int(value, what: str, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what} must be an int, got {type(value).__name__} {value!r}")
    if value < low or (high is not None and value > high):
        accepted = f"{low}..{high}" if high is not None else f">= {low}"
        raise ValueError(f"{what} = {value} is out of range; accepted: {accepted}")
    return int(value)


def _subset(total: int, n: int | None, seed: int, stream: int, what: str) -> np.ndarray:
    """Sorted indices of a seeded random subset of size ``n`` (all rows when ``n`` is None)."""
    if n is None:
        return np.arange(total)
    n = _check_int(n, f"{what} (subset size)", 1, total)
    perm = torch.randperm(total, generator=seeded_generator(seed, stream))
    return np.sort(perm[:n].numpy())


def _float(array: np.ndarray, scale: float = 1.0) -> torch.Tensor:
    tensor = torch.from_numpy(np.ascontiguousarray(array)).to(torch.float32)
    return tensor / scale if scale != 1.0 else tensor


def load_dataset(
    name: str,
    root: str | os.PathLike[str] | None = None,
    *,
    n_train: int | None = None,
    n_test: int | None = None,
    seed: int = 0,
    dataset_seed: int = 0,
    download: bool | None = None,
) -> BinaryImageData:
    """Load dataset ``name`` from the data root as :class:`BinaryImageData`.

    Args:
        name: one of :data:`DATASETS`.
        root: the data root (default: ``$TVOLIB_DATA``, else ``~/.cache/tvolib/data``).
        n_train, n_test: sizes of seeded random subsets (1..full size; ``None`` = all), drawn
            with ``seed``.
        seed: the subset draw's seed (>= 0).
        dataset_seed: fixes what belongs to the dataset itself (test binarization, Omniglot's
            split and one-off binarization); keep the default to compare runs.
        download: fetch missing files from the canonical URLs (default: ``TVOLIB_DOWNLOAD=1``).

    Returns:
        The dataset as float32 CPU tensors.

    Raises:
        DatasetNotFoundError: files are missing (the message lists them and how to provide them).
        CorruptFileError: a file is damaged; :class:`ChecksumError` if its content is not the
            canonical one. The message names the file and what to do.
        ValueError, TypeError: a bad argument (the message names it and what is accepted).

    Example:
        >>> data = load_dataset("binarized_mnist", n_train=1000, n_test=500)  # doctest: +SKIP
        >>> data.train.shape, data.dynamic_binarization  # doctest: +SKIP
        (torch.Size([1000, 784]), False)
    """
    if not isinstance(name, str) or name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; accepted names: {', '.join(DATASETS)}")
    seed = _check_int(seed, "seed", 0)
    dataset_seed = _check_int(dataset_seed, "dataset_seed", 0)
    download_enabled(download)  # rejects a non-bool early
    for value, what, full in zip((n_train, n_test), ("n_train", "n_test"), SIZES[name]):
        if value is not None:  # before any file is read
            _check_int(value, f"{what} (subset size)", 1, full)
    base = data_root(root)

    # Raw arrays first; the training subset is taken before the float conversion (run start-up cost).
    train_labels = test_labels = None
    source = name
    if name in ("mnist", "fashion_mnist"):
        train_raw, train_labels, test_u8, test_labels = read_mnist_like(name, base, download)
        train_scale = 255.0
        # The whole test set is binarised before subsetting, so a subset's rows equal the full set's.
        test = torch.bernoulli(_float(test_u8, 255.0), generator=seeded_generator(dataset_seed, 1))
        dynamic, label = True, LABELS[name]
    elif name == "binarized_mnist":
        locate_binarized_mnist(base, ("train", "test"), download)  # one error naming all missing files
        train_raw, train_scale = read_binarized_mnist("train", base, download), 1.0
        test = _float(read_binarized_mnist("test", base, download))
        dynamic, label = False, LABELS[name]
    else:
        train_raw, train_labels, test_u8, test_labels, derived, source = read_omniglot(base, dataset_seed, download)
        train_scale, test = 1.0, _float(test_u8)
        dynamic, label = False, LABELS["omniglot_derived" if derived else "omniglot"]

    n_train_full, n_test_full = len(train_raw), len(test)
    train_index = _subset(n_train_full, n_train, seed, 2, "n_train")
    test_index = _subset(n_test_full, n_test, seed, 3, "n_test")
    train = _float(train_raw[train_index] if n_train is not None else train_raw, train_scale)
    if n_test is not None:
        test = test[torch.from_numpy(test_index)]
    as_labels = lambda labels, index: None if labels is None else torch.from_numpy(  # noqa: E731
        np.ascontiguousarray(np.asarray(labels)[index])).long()
    return BinaryImageData(
        name=name, label=label, train=train.contiguous(), test=test.contiguous(),
        dynamic_binarization=dynamic, train_mean=train.mean(dim=0),
        train_index=torch.from_numpy(train_index), test_index=torch.from_numpy(test_index),
        train_labels=as_labels(train_labels, train_index), test_labels=as_labels(test_labels, test_index),
        seed=seed, dataset_seed=dataset_seed, n_train_full=n_train_full, n_test_full=n_test_full, source=source,
    )
