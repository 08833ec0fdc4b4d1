"""The `chatmemory` command line.

This module imports nothing but the standard library, so the console script can tell a user
whose install lacks the `cli` extra what to do instead of showing a traceback. The commands live
in `app` and the modules beside it, which import click, rich and platformdirs freely.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["main"]

_CLI_DEPENDENCIES = frozenset({"click", "rich", "platformdirs"})
_MISSING_EXTRA = "chatmemory's command line needs: pip install 'chatmemory[cli]'"


def main(args: Sequence[str] | None = None) -> None:
    """Run the `chatmemory` command (the console script and `python -m chatmemory`)."""
    try:
        from .app import cli
    except ImportError as error:
        if (error.name or "").partition(".")[0] not in _CLI_DEPENDENCIES:
            raise
        print(_MISSING_EXTRA, file=sys.stderr)
        raise SystemExit(1) from None
    for stream in (sys.stdout, sys.stderr):  # stored text may hold what no encoding can write
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="replace")
    cli.main(args=list(args) if args is not None else None)
