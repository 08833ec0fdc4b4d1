"""The `chatmemory` click group and its commands."""

from __future__ import annotations

import click
import platformdirs

from .ask import ask
from .base import HOME_ENV, ErrorHandlingGroup
from .chat import chat
from .demo import demo
from .history import history
from .ingest import ingest
from .inspect import inspect
from .prompt import prompt
from .tokens import tokens

__all__ = ["cli"]


@click.group(
    "chatmemory",
    cls=ErrorHandlingGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=f"Data directory: ${HOME_ENV}, else {platformdirs.user_data_dir('chatmemory')}",
)
@click.version_option(package_name="chatmemory", prog_name="chatmemory")
def cli() -> None:
    """Conversation memory for LLM apps: chat, one-shot prompts, demo, history, ingest and ask,
    inspect, token counts."""


cli.add_command(ask)
cli.add_command(chat)
cli.add_command(demo)
cli.add_command(history)
cli.add_command(ingest)
cli.add_command(inspect)
cli.add_command(prompt)
cli.add_command(tokens)
