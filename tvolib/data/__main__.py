"""``python -m tvolib.data [--root DIR] [--download] [NAME ...]``: fetch/verify datasets, warm caches."""
from __future__ import annotations

import argparse
import sys
import time

from . import DATASETS, ChecksumError, DatasetNotFoundError, data_root, load_dataset


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tvolib.data", description=__doc__)
    parser.add_argument("names", nargs="*", default=list(DATASETS), help=f"any of {', '.join(DATASETS)}")
    parser.add_argument("--root", default=None, help="data root (default: $TVOLIB_DATA or ~/.cache/tvolib/data)")
    parser.add_argument("--download", action="store_true", help="fetch missing files from canonical URLs")
    args = parser.parse_args(argv)
    print(f"data root: {data_root(args.root)}")
    failed = 0
    for name in args.names:
        start = time.perf_counter()
        try:
            data = load_dataset(name, args.root, download=args.download or None)
        except (DatasetNotFoundError, ChecksumError, ValueError) as err:
            print(f"FAIL {name}: {err}", file=sys.stderr)
            failed += 1
            continue
        print(f"ok   {name}: {data!r} ({time.perf_counter() - start:.1f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
