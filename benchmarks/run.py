"""Run the benchmarks and print their tables:
`python benchmarks/run.py [core] [stores] [turn] [services] [--quick] [--profile STORE]`.

Not part of the test suite. `core` needs nothing; `stores` and `turn` (a chat turn beside the
raw driver's floor, issue 7) use the SQLite file store and, when they answer, the Redis and
PostgreSQL servers named by CHATMEMORY_TEST_REDIS_URL / CHATMEMORY_TEST_POSTGRES_DSN (defaults:
127.0.0.1, see tests/conftest.py). `services` times an AI-service call beside the same turn
written by hand, and through the OpenAI SDK against a local server. `--profile STORE` prints
cProfile's top functions over chat turns on that store at N=10,000.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import core

PARTS = ("core", "stores", "turn", "services")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "parts", nargs="*", metavar="core|stores|turn|services", help="default: all"
    )
    parser.add_argument("--quick", action="store_true", help="smaller N, for a smoke run")
    parser.add_argument(
        "--profile",
        choices=("sqlite", "redis", "postgres"),
        help="profile chat turns at N=10,000 instead",
    )
    args = parser.parse_args()
    if args.profile:
        from benchmarks import turn

        print(turn.profile(args.profile), flush=True)
        return
    parts = args.parts or list(PARTS)
    for part in parts:
        if part not in PARTS:
            parser.error(f"unknown part {part!r}: choose {', '.join(PARTS)}")
    if "core" in parts:
        checkpoints = (100, 1_000) if args.quick else core.CHECKPOINTS
        print(core.growth(checkpoints), flush=True)
        print(core.counting(), flush=True)
    if "stores" in parts:
        from benchmarks import stores

        for report in stores.run(quick=args.quick):
            print(report, flush=True)
    if "turn" in parts:
        from benchmarks import turn

        for report in turn.run(quick=args.quick):
            print(report, flush=True)
    if "services" in parts:
        from benchmarks import services

        for report in services.run(quick=args.quick):
            print(report, flush=True)


if __name__ == "__main__":
    main()
