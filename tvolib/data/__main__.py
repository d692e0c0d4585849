"""``python -m tvolib.data [--root DIR] [--download] [NAME ...]``: check (and fetch) every dataset.

Each dataset is loaded in full (files verified, parsed caches checked or rebuilt) and reported on
one line: ``ok``, ``missing`` (files absent), ``corrupt`` (damaged file, with the reason) or
``error`` (anything else). All are checked even when one fails. Exit code 0 if all are ok, 1 if
any is not, 2 for a bad command line.
"""
from __future__ import annotations

import argparse
import sys
import time

from . import DATASETS, CorruptFileError, DatasetNotFoundError, data_root, load_dataset

__all__ = ["check_dataset", "main"]


def check_dataset(name: str, root: str | None, download: bool) -> tuple[str, str]:
    """Load dataset ``name`` and return ``(status, detail)``; never raises for a bad dataset.

    ``status`` is ``"ok"``, ``"missing"``, ``"corrupt"`` or ``"error"``; ``detail`` describes the
    data, or the error with what to do.
    """
    start = time.perf_counter()
    try:
        data = load_dataset(name, root, download=download or None)
    except DatasetNotFoundError as err:
        return "missing", str(err)
    except CorruptFileError as err:
        return "corrupt", str(err)
    except Exception as err:  # noqa: BLE001 - reported, and the remaining datasets still checked
        return "error", f"{type(err).__name__}: {err}"
    return "ok", f"{data!r} ({time.perf_counter() - start:.1f} s)"


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m tvolib.data", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"any of {', '.join(DATASETS)} (default: all)")
    parser.add_argument("--root", default=None, help="data root (default: $TVOLIB_DATA or ~/.cache/tvolib/data)")
    parser.add_argument("--download", action="store_true", help="fetch missing files from canonical URLs")
    args = parser.parse_args(argv)
    unknown = [name for name in args.names if name not in DATASETS]
    if unknown:
        parser.error(f"unknown dataset name(s) {', '.join(map(repr, unknown))}; accepted: {', '.join(DATASETS)}")
    print(f"data root: {data_root(args.root)}")
    bad = 0
    for name in args.names or DATASETS:
        status, detail = check_dataset(name, args.root, args.download)
        bad += status != "ok"
        detail = detail.replace("\n", "\n" + " " * 8)  # a multi-line message stays under its dataset
        print(f"{status:<8}{name}: {detail}", file=sys.stdout if status == "ok" else sys.stderr, flush=True)
    total = len(args.names or DATASETS)
    print(f"{total - bad} of {total} datasets ok")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
