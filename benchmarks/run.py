"""Run the benchmarks and print their tables:
`python benchmarks/run.py [PART ...] [--quick] [--profile STORE]`.

Not part of the test suite. It exits with status 1 when a table marks a result over its limit
(✗), after printing every table. A part is a module of this folder with a `run(quick)` function
that yields tables (`core`, `stores`, `turn`, `services`, and whatever a later issue adds); with
no part named, all of them run. `stores` and `turn` (a chat turn beside the raw driver's floor,
issue 7) use the SQLite file store and, when they answer, the Redis and PostgreSQL servers named
by CHATMEMORY_TEST_REDIS_URL / CHATMEMORY_TEST_POSTGRES_DSN (defaults: 127.0.0.1, see
tests/conftest.py). `--profile STORE` prints cProfile's top functions over chat turns on that
store at N=10,000.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol, cast

HERE = Path(__file__).resolve().parent
# The project, not this folder, goes first on the path: a part named like a package
# (`pgvector`) must not shadow it.
sys.path[0] = str(HERE.parent)

NOT_PARTS = frozenset({"__init__", "common", "run"})


class Part(Protocol):
    def run(self, quick: bool = False) -> Iterator[str]: ...


def parts() -> list[str]:
    """Every benchmark module here, `core` first, then by name."""
    names = sorted(path.stem for path in HERE.glob("*.py") if path.stem not in NOT_PARTS)
    return sorted(names, key=lambda name: name != "core")


FAILED = "✗"
"""What a table prints beside a result over its limit."""


def main() -> int:
    """Print the tables; 1 when any of them holds a ✗, else 0."""
    available = parts()
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("parts", nargs="*", metavar="|".join(available), help="default: all")
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
        return 0
    chosen = args.parts or available
    for name in chosen:
        if name not in available:
            parser.error(f"unknown part {name!r}: choose {', '.join(available)}")
    failed = 0
    for name in chosen:
        part = cast(Part, importlib.import_module(f"benchmarks.{name}"))
        for report in part.run(quick=args.quick):
            print(report, flush=True)
            failed += report.count(FAILED)
    if failed:
        print(f"{failed} result(s) over their limit ({FAILED})", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
