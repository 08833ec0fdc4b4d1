"""`python benchmarks/run.py` exits with status 1 when a table it prints holds a ✗."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# benchmarks/run.py with one part, `fake`, whose table is the given line.
DRIVER = """
import sys, types
table = sys.argv[1]
part = types.ModuleType("benchmarks.fake")
part.run = lambda quick=False: iter([table])
sys.modules["benchmarks.fake"] = part
import benchmarks.run as run
run.parts = lambda: ["fake"]
sys.argv = ["run.py"]
sys.exit(run.main())
"""


@pytest.mark.parametrize(("table", "status"), [("turn 1.10× (≤ 1.5×)", 0), ("2.00× (≤ 1.5× ✗)", 1)])
def test_the_exit_status_says_whether_a_limit_was_exceeded(table: str, status: int) -> None:
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    result = subprocess.run(
        [sys.executable, "-c", DRIVER, table],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert result.returncode == status, result.stderr
    assert table in result.stdout
    assert ("over their limit" in result.stderr) == bool(status)
