"""Readers for each dataset's files: find them, verify them, parse them into numpy arrays.

Each reader returns full splits as arrays (images flattened to 784 values, row-major 28x28);
subsets, binarization of grey levels and tensors are the job of :mod:`tvolib.data.dataset`.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import torch

from .cache import cache_load, cache_save
from .files import (
    SHA256,
    CorruptFileError,
    DatasetNotFoundError,
    download_enabled,
    download_file,
    read_bytes,
    verify_content,
    verify_file,
)

__all__ = ["read_mnist_like", "read_binarized_mnist", "locate_binarized_mnist", "read_omniglot", "seeded_generator",
           "parse_amat", "parse_idx", "area_resize_28", "BINARIZED_MNIST_URL", "CHARDATA_URL", "BINARIZED_MNIST_SIZES",
           "OMNIGLOT_SIZES"]

BINARIZED_MNIST_URL = "http://www.cs.toronto.edu/~larocheh/public/datasets/binarized_mnist/binarized_mnist_{split}.amat"
CHARDATA_URL = "https://raw.githubusercontent.com/yburda/iwae/master/datasets/OMNIGLOT/chardata.mat"

#: Images per split of Larochelle & Murray's binarized MNIST.
BINARIZED_MNIST_SIZES = {"train": 50_000, "valid": 10_000, "test": 10_000}
#: Omniglot split of the paper (App. C.3, following Burda et al.): 24,345 training images of which
#: 1,345 are held out (seeded), leaving 23,000 train; 8,070 test.
OMNIGLOT_SIZES = {"pool": 24_345, "train": 23_000, "test": 8_070}

_TORCHVISION = {"mnist": ("MNIST", "MNIST"), "fashion_mnist": ("FashionMNIST", "FashionMNIST")}
_IDX_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
              "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
# Bump when a derivation below changes, so that stale cached arrays are not reused.
_DERIVATION_VERSION = 1


def seeded_generator(seed: int, stream: int) -> torch.Generator:
    """A CPU generator for one independent random stream of ``seed`` (via numpy's SeedSequence)."""
    state = int(np.random.SeedSequence([seed, stream]).generate_state(1, dtype=np.uint64)[0])
    return torch.Generator().manual_seed(state)


def _missing(dataset: str, root: Path, expected: list, how: str) -> DatasetNotFoundError:
    listing = "\n".join(f"  - {path}" for path in expected)
    return DatasetNotFoundError(
        f"dataset {dataset!r} not found under data root {root}. Expected files:\n{listing}\n"
        f"To provide them: point the data root (the `root` argument or TVOLIB_DATA) at a folder "
        f"that holds them (e.g. an offline mirror), or {how}."
    )


def _allow_download_hint(source: str) -> str:
    return f"allow a download from {source} with download=True or TVOLIB_DOWNLOAD=1"


# --------------------------------------------------------------------------------- MNIST, Fashion
def parse_idx(content: bytes) -> np.ndarray:
    """An IDX file's uint8 array (LeCun's format: images ``(N, 28, 28)``, labels ``(N,)``), a writable copy.

    Raises:
        ValueError: the bytes are not an unsigned-byte IDX file of the size its header announces.
    """
    if len(content) < 4 or content[:3] != b"\x00\x00\x08":
        raise ValueError("not an IDX file of unsigned bytes (magic number 0x0000080N expected)")
    ndim = content[3]
    header = 4 + 4 * ndim
    shape = tuple(int.from_bytes(content[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim))
    if ndim == 0 or len(content) != header + int(np.prod(shape)):
        raise ValueError(f"IDX header announces shape {shape} but the file holds {len(content) - header} values")
    return np.frombuffer(content, dtype=np.uint8, offset=header).reshape(shape).copy()


def _idx_path(folder: Path, name: str) -> Path | None:
    """``folder/name`` or its ``.gz`` copy (as the mirrors serve it), whichever exists."""
    return next((p for p in (folder / name, folder / f"{name}.gz") if p.exists()), None)


def _download_idx(name: str, folder: Path, dataset: str, cls_name: str) -> Path:
    """Fetch ``<name>.gz`` from torchvision's mirrors into ``folder`` and verify its content."""
    import torchvision.datasets as tvd

    expected = SHA256[f"{folder.parent.name}/raw/{name}"]
    error: DatasetNotFoundError | None = None
    for mirror in getattr(tvd, cls_name).mirrors:
        try:
            return download_file(f"{mirror}{name}.gz", folder / f"{name}.gz", expected, dataset=dataset)
        except DatasetNotFoundError as err:
            error = err
    assert error is not None
    raise error


def read_mnist_like(name: str, root: Path, download: bool | None = None):
    """MNIST / Fashion-MNIST from the canonical IDX files (``<root>/MNIST/raw``, plain or ``.gz``).

    Only these files are read, each verified against its canonical SHA256 right before parsing
    (never torchvision's ``processed/*.pt`` files, which carry no checksum). With a download
    allowed, only the missing files are fetched (from torchvision's mirrors).

    Returns ``(train, train_labels, test, test_labels)``: uint8 images ``(N, 784)`` and int64 labels.
    """
    folder_name, cls_name = _TORCHVISION[name]
    folder = root / folder_name / "raw"
    found = {f: _idx_path(folder, f) for f in _IDX_FILES}
    missing = [f for f, path in found.items() if path is None]
    if missing and not download_enabled(download):
        raise _missing(name, root, [folder / f for f in missing],
                       _allow_download_hint(f"torchvision's {cls_name} mirrors"))
    for f in missing:
        found[f] = _download_idx(f, folder, name, cls_name)
    arrays = []
    for f, path in found.items():
        content = read_bytes(path)
        verify_content(path, SHA256[f"{folder_name}/raw/{f}"], content)  # the very bytes parsed below
        arrays.append(parse_idx(content))
    train, train_labels, test, test_labels = arrays
    return train.reshape(len(train), -1), train_labels.astype(np.int64), test.reshape(len(test), -1), \
        test_labels.astype(np.int64)


# --------------------------------------------------------------------------------- binarized MNIST
def parse_amat(content: bytes) -> np.ndarray:
    """Parse Larochelle's ``.amat`` text (one image per line, 784 space-separated 0/1) with numpy.

    Vectorised over the raw bytes instead of splitting lines in Python: ~50x faster.
    """
    buf = np.frombuffer(content, dtype=np.uint8)
    bits = buf[(buf == ord("0")) | (buf == ord("1"))] - ord("0")
    lines = sum(1 for line in content.split(b"\n") if line.strip())
    if lines == 0 or bits.size != lines * 784:
        raise ValueError(f"malformed .amat content: {lines} non-empty lines but {bits.size} 0/1 "
                         f"values (expected 784 per line)")
    return bits.reshape(lines, 784)


def locate_binarized_mnist(root: Path, splits: tuple[str, ...], download: bool | None = None) -> dict[str, Path]:
    """Paths of the ``.amat`` (or ``.amat.gz``) files of ``splits``, downloading missing ones if allowed.

    Missing files without a download raise one :class:`DatasetNotFoundError` listing all of them.
    """
    found: dict[str, Path] = {}
    missing: list[str] = []
    for split in splits:
        key = f"binarized_mnist/binarized_mnist_{split}.amat"
        path = next((p for p in (root / key, root / f"{key}.gz") if p.exists()), None)
        if path is None and download_enabled(download):
            path = download_file(BINARIZED_MNIST_URL.format(split=split), root / key, SHA256[key],
                                 dataset="binarized_mnist")
        if path is None:
            missing.append(split)
        else:
            found[split] = path
    if missing:
        raise _missing("binarized_mnist", root,
                       [f"{root / f'binarized_mnist/binarized_mnist_{s}.amat'} (or .amat.gz)" for s in missing],
                       _allow_download_hint(BINARIZED_MNIST_URL.format(split="{" + ",".join(missing) + "}")))
    return found


def read_binarized_mnist(split: str, root: Path, download: bool | None = None) -> np.ndarray:
    """One split (``train``/``valid``/``test``) of binarized MNIST as uint8 ``(N, 784)`` in {0, 1}.

    Accepts ``binarized_mnist_<split>.amat`` (as served by the canonical URL) or ``.amat.gz``;
    the parsed array is cached (bit-packed) keyed by the file's canonical checksum.
    """
    expected = SHA256[f"binarized_mnist/binarized_mnist_{split}.amat"]
    path = locate_binarized_mnist(root, (split,), download)[split]
    verify_file(path, expected)

    cache_name, rows = f"binarized_mnist_{split}_{expected[:16]}", BINARIZED_MNIST_SIZES[split]
    cached = cache_load(cache_name, source=expected, shapes={"bits": (rows, 98)})
    if cached is not None:
        return np.unpackbits(cached["bits"], axis=1, count=784)
    content = read_bytes(path)
    verify_content(path, expected, content)  # the very bytes parsed below
    images = parse_amat(content)
    cache_save(cache_name, source=expected, bits=np.packbits(images, axis=1))
    return images


# --------------------------------------------------------------------------------- Omniglot
def _chardata_images(matrix: np.ndarray) -> np.ndarray:
    """chardata stores one image per column in MATLAB (column-major) order: make rows row-major."""
    n = matrix.shape[1]
    return np.ascontiguousarray(matrix.T.reshape(n, 28, 28).transpose(0, 2, 1).reshape(n, 784))


def _read_chardata(path: Path):
    """Burda et al.'s 28x28 Omniglot: grey levels in [0, 1], alphabet labels."""
    # scipy.io takes ~0.5 s to import and only this optional file needs it.
    from scipy.io import loadmat
    from scipy.io.matlab import MatReadError

    try:
        mat = loadmat(path)
        train, test = _chardata_images(mat["data"]), _chardata_images(mat["testdata"])
    except (MatReadError, ValueError, OSError, EOFError, KeyError) as err:
        raise CorruptFileError(path, f"not readable as Burda et al.'s chardata.mat ({type(err).__name__}: {err})") from err
    if (len(train), len(test)) != (OMNIGLOT_SIZES["pool"], OMNIGLOT_SIZES["test"]):
        raise CorruptFileError(path, f"expected {OMNIGLOT_SIZES['pool']} training and {OMNIGLOT_SIZES['test']} "
                                     f"test images, found {len(train)} and {len(test)}")
    if not all(np.isfinite(x).all() and x.min() >= 0 and x.max() <= 1 for x in (train, test)):
        raise CorruptFileError(path, "grey levels outside [0, 1] (not Burda et al.'s chardata.mat)")
    labels = [mat[k].argmax(axis=0).astype(np.int64) if k in mat else np.full(n, -1, np.int64)
              for k, n in (("target", len(train)), ("testtarget", len(test)))]
    return train.astype(np.float32), labels[0], test.astype(np.float32), labels[1]


def area_resize_28(ink: np.ndarray, chunk: int = 2048) -> np.ndarray:
    """Downsample ``(N, H, W)`` ink maps to 28x28 by area averaging (``interpolate(mode="area")``).

    Each output pixel is the mean of the input pixels its area covers (adaptive average pooling;
    for 105 -> 28 the windows are 4-5 pixels wide), so a stroke's grey level is the fraction of
    the window it inks. Returns float32 ``(N, 784)`` in [0, 1]. Done in chunks to bound memory.
    """
    out = np.empty((len(ink), 784), dtype=np.float32)
    for start in range(0, len(ink), chunk):
        block = torch.from_numpy(ink[start:start + chunk]).float().unsqueeze(1)
        small = torch.nn.functional.interpolate(block, size=(28, 28), mode="area")
        out[start:start + chunk] = small.reshape(len(block), 784).numpy()
    return out


def _read_derived(background: Path, evaluation: Path):
    """All 32,460 original 105x105 images, inverted (ink = 1) and area-resized to 28x28."""
    images, labels, offset = [], [], 0
    for path in (background, evaluation):
        with np.load(path, allow_pickle=False) as stored:
            imgs, labs = stored["images"], stored["labels"]
        images.append(~imgs.reshape(-1, 105, 105))  # True = white paper: invert to get strokes
        labels.append(labs.reshape(-1).astype(np.int64) + offset)  # one id per character
        offset += int(labs.max()) + 1
    return area_resize_28(np.concatenate(images)), np.concatenate(labels)


def _split_and_binarize(grey_pool, labels_pool, grey_test, labels_test, seed: int):
    """Seeded hold-out of the training pool and one seeded Bernoulli binarization (App. C.3)."""
    keep = torch.randperm(len(grey_pool), generator=seeded_generator(seed, 10))[:OMNIGLOT_SIZES["train"]]
    keep = keep.sort().values.numpy()
    grey_train, labels_train = grey_pool[keep], labels_pool[keep]
    gen = seeded_generator(seed, 11)
    train = torch.bernoulli(torch.from_numpy(grey_train), generator=gen).to(torch.uint8).numpy()
    test = torch.bernoulli(torch.from_numpy(grey_test), generator=gen).to(torch.uint8).numpy()
    return train, labels_train, test, labels_test


def _omniglot_files(root: Path, download: bool | None) -> tuple[bool, list[Path], list[str]]:
    """Which Omniglot files to use: ``(derived, paths, sha256s)``, downloading chardata.mat if allowed.

    The SHA256s are of the files' content: verified against :data:`SHA256`, or only computed for
    ``chardata.mat``, which has no published checksum.
    """
    chardata = root / "omniglot" / "chardata.mat"
    npz = [root / "omniglot" / "images_background.npz", root / "omniglot" / "images_evaluation.npz"]
    if not chardata.exists() and download_enabled(download):
        try:
            download_file(CHARDATA_URL, chardata, None, dataset="omniglot")
        except DatasetNotFoundError as err:
            if not all(p.exists() for p in npz):
                raise
            warnings.warn(f"{err}; falling back to the derived 28x28 Omniglot", stacklevel=4)
    if chardata.exists():
        return False, [chardata], [verify_file(chardata, None)]
    if all(p.exists() for p in npz):
        return True, npz, [verify_file(path, SHA256[f"omniglot/{path.name}"]) for path in npz]
    raise _missing("omniglot", root, [chardata, *npz],
                   "provide chardata.mat (or both .npz files), or " + _allow_download_hint(CHARDATA_URL))


def read_omniglot(root: Path, seed: int, download: bool | None = None):
    """Binarized 28x28 Omniglot: ``(train, train_labels, test, test_labels, derived, source)``.

    Uses ``<root>/omniglot/chardata.mat`` (Burda et al.; downloaded from the IWAE repository when
    allowed) with its 24,345 / 8,070 split, holding out 1,345 training images (seeded) to leave
    23,000. Otherwise derives 28x28 images from ``omniglot/images_{background,evaluation}.npz``
    (the original 105x105 images): inverted, area-resized (:func:`area_resize_28`), then a seeded
    permutation of all 32,460 images gives 23,000 train, 1,345 held out, 8,070 test (the remaining
    45 are unused), so sizes match the paper. Either way the images are binarized once by a seeded
    Bernoulli draw (as Burda et al. did), and the result is cached per ``seed``. ``source`` names
    the variant and the SHA256 of the files read (``chardata:<sha256>:seed=0:v1`` or
    ``derived28:<sha256>+<sha256>:...``): ``chardata.mat`` has no published checksum, so a run
    records it and refuses to resume on other files (:meth:`tvolib.training.loop.Task.data_source`).
    """
    derived, paths, hashes = _omniglot_files(root, download)
    stem = "derived28_" + "".join(h[:8] for h in hashes) if derived else f"chardata_{hashes[0][:16]}"
    cache_name = f"omniglot_{stem}_seed{seed}_v{_DERIVATION_VERSION}"
    source = f"{stem.split('_')[0]}:{'+'.join(hashes)}:seed={seed}:v{_DERIVATION_VERSION}"
    n_train, n_test = OMNIGLOT_SIZES["train"], OMNIGLOT_SIZES["test"]
    shapes = {"train": (n_train, 98), "train_labels": (n_train,), "test": (n_test, 98), "test_labels": (n_test,)}
    cached = cache_load(cache_name, source=source, shapes=shapes)
    if cached is not None:
        unpack = lambda bits: np.unpackbits(bits, axis=1, count=784)  # noqa: E731
        return (unpack(cached["train"]), cached["train_labels"], unpack(cached["test"]),
                cached["test_labels"], derived, source)
    if derived:
        grey, labels = _read_derived(*paths)
        order = torch.randperm(len(grey), generator=seeded_generator(seed, 12)).numpy()
        pool = np.sort(order[:OMNIGLOT_SIZES["pool"]])
        test = np.sort(order[OMNIGLOT_SIZES["pool"]:OMNIGLOT_SIZES["pool"] + n_test])
        parts = (grey[pool], labels[pool], grey[test], labels[test])
    else:
        parts = _read_chardata(paths[0])
    train, train_labels, test, test_labels = _split_and_binarize(*parts, seed)
    cache_save(cache_name, source=source, train=np.packbits(train, axis=1), train_labels=train_labels,
               test=np.packbits(test, axis=1), test_labels=test_labels)
    return train, train_labels, test, test_labels, derived, source
