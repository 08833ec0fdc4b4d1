"""Every Python snippet of README.md runs as written, each in a fresh directory and process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
SRC = README.parent / "src"
SNIPPETS = re.findall(r"^```python\n(.*?)^```", README.read_text(encoding="utf-8"), re.M | re.S)


def test_the_readme_has_snippets() -> None:
    assert len(SNIPPETS) >= 2


@pytest.mark.parametrize("code", SNIPPETS, ids=[f"snippet{i}" for i in range(len(SNIPPETS))])
def test_snippet_runs(code: str, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=_this_checkout(),
    )
    assert result.returncode == 0, f"{code}\n---\n{result.stderr}"


def _this_checkout() -> dict[str, str]:
    """The environment with this checkout's sources first on the path, so a snippet runs against
    the code under test even when the installed package is another checkout (a worktree) and a
    relative PYTHONPATH means nothing in the snippet's directory."""
    given = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(SRC), given) if p)}
