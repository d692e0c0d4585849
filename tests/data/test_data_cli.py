"""``python -m tvolib.data``: every dataset checked and reported, whatever fails (tvolib.data.__main__)."""
from __future__ import annotations

import pytest

import tvolib.data.__main__ as cli

FASHION = [f"FashionMNIST/raw/{name}" for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                                   "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")]
AMAT = ["binarized_mnist/binarized_mnist_train.amat.gz", "binarized_mnist/binarized_mnist_test.amat.gz"]
OMNIGLOT = ["omniglot/images_background.npz", "omniglot/images_evaluation.npz"]


def _lines(output: str) -> dict[str, str]:
    """The report line of each dataset, by name."""
    return {line.split()[1].rstrip(":"): line for line in output.splitlines()
            if line and line.split()[0] in {"ok", "missing", "corrupt", "error"}}


def test_good_root(data_root, tmp_cache, offline, capsys):
    assert cli.main(["--root", str(data_root), "binarized_mnist"]) == 0
    out = capsys.readouterr().out
    assert "ok      binarized_mnist: BinaryImageData('binarized MNIST'" in out and "1 of 1 datasets ok" in out


def test_every_dataset_is_checked_and_reported(copy_files, tmp_cache, offline, capsys):
    """One missing, two corrupt (a file changed, a file replaced by garbage), one fine: all reported."""
    root = copy_files(*FASHION, *AMAT, *OMNIGLOT)
    labels = root / FASHION[3]
    labels.write_bytes(labels.read_bytes()[:-1] + b"\x00")
    npz = root / OMNIGLOT[0]
    npz.write_bytes(b"not an npz")
    assert cli.main(["--root", str(root)]) == 1
    captured = capsys.readouterr()
    lines = _lines(captured.out + captured.err)
    assert set(lines) == {"mnist", "fashion_mnist", "binarized_mnist", "omniglot"}
    assert lines["binarized_mnist"].startswith("ok ")
    assert lines["mnist"].startswith("missing ")
    assert f"\n          - {root / 'MNIST/raw/train-images-idx3-ubyte'}\n" in captured.err  # indented under it
    assert lines["fashion_mnist"].startswith(f"corrupt fashion_mnist: {labels} is corrupt: checksum mismatch")
    assert lines["omniglot"].startswith(f"corrupt omniglot: {npz} is corrupt: checksum mismatch")
    assert "1 of 4 datasets ok" in captured.out


def test_an_unexpected_failure_is_reported_and_the_rest_still_checked(data_root, tmp_cache, monkeypatch, capsys):
    real = cli.load_dataset

    def flaky(name, *args, **kwargs):
        if name == "mnist":
            raise RuntimeError("disk on fire")
        return real(name, *args, n_train=1, n_test=1, **kwargs)

    monkeypatch.setattr(cli, "load_dataset", flaky)
    assert cli.main(["--root", str(data_root), "mnist", "binarized_mnist"]) == 1
    captured = capsys.readouterr()
    lines = _lines(captured.out + captured.err)
    assert lines["mnist"] == "error   mnist: RuntimeError: disk on fire"
    assert lines["binarized_mnist"].startswith("ok ")


def test_unknown_name_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["cifar10"])
    assert info.value.code == 2
    assert "unknown dataset name(s) 'cifar10'; accepted: mnist, fashion_mnist" in capsys.readouterr().err
