"""Run the benchmarks and print their tables: `python benchmarks/run.py [core] [stores] [--quick]`.

Not part of the test suite. `core` needs nothing; `stores` uses the SQLite file store and, when
they answer, the Redis and PostgreSQL servers named by CHATMEMORY_TEST_REDIS_URL /
CHATMEMORY_TEST_POSTGRES_DSN (defaults: 127.0.0.1, see tests/conftest.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import core


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("parts", nargs="*", metavar="core|stores", help="default: both")
    parser.add_argument("--quick", action="store_true", help="smaller N, for a smoke run")
    args = parser.parse_args()
    parts = args.parts or ["core", "stores"]
    for part in parts:
        if part not in ("core", "stores"):
            parser.error(f"unknown part {part!r}: choose core and/or stores")
    if "core" in parts:
        checkpoints = (100, 1_000) if args.quick else core.CHECKPOINTS
        print(core.growth(checkpoints), flush=True)
        print(core.counting(), flush=True)
    if "stores" in parts:
        from benchmarks import stores

        for report in stores.run(quick=args.quick):
            print(report, flush=True)


if __name__ == "__main__":
    main()
