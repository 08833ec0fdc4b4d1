"""`chatmemory prompt`: one question, one streamed answer, both stored (as `llm "..."` does)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import click

from .._messages import SystemMessage
from .chat_model import estimator_for, make_model, model_call_options
from .session import Session, one_shot_text
from .stores import StoreSpec, store_options

__all__ = ["prompt"]

PREFIX = "prompt:"
"""The memory ids of one-shot conversations: `prompt:` and the time they began (UTC)."""


def _last_conversation(ids: list[str]) -> str | None:
    started = sorted(i for i in ids if i.startswith(PREFIX))
    return started[-1] if started else None


def _new_conversation() -> str:
    return PREFIX + datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%f")


@click.command()
@click.argument("text", required=False)
@click.option(
    "-c", "--continue", "continue_", is_flag=True, help="Continue the last prompt's conversation."
)
@click.option("--memory-id", help="Continue this conversation (a `chat` one too).")
@click.option(
    "--model", help="Model name [default: the first a --base-url server lists, else gpt-4o-mini]."
)
@click.option("--base-url", help="An OpenAI-compatible server (Ollama, vLLM, llama.cpp...).")
@click.option("--provider", type=click.Choice(["openai", "anthropic"]), help="Whose API to speak.")
@click.option("--system", "system_text", help="The system message of a new conversation.")
@click.option(
    "--max-tokens",
    type=click.IntRange(min=100),
    default=4000,
    show_default=True,
    help="Tokens of conversation sent to the model.",
)
@model_call_options
@store_options
def prompt(
    text: str | None,
    continue_: bool,
    memory_id: str | None,
    model: str | None,
    base_url: str | None,
    provider: str | None,
    system_text: str | None,
    max_tokens: int,
    timeout: float,
    max_retries: int,
    **options: Any,
) -> None:  # fmt: skip
    """Ask TEXT once and print the answer as it streams; the exchange is stored. Text piped on
    stdin comes before TEXT (`cat notes.md | chatmemory prompt "summarize"`); -c continues the
    last conversation started here."""
    question = one_shot_text(text)
    if not question:
        raise click.UsageError("nothing to ask: give TEXT, or pipe text on stdin")
    chat_model, _, name = make_model(provider, model, base_url, timeout, max_retries)
    spec = StoreSpec.take(options)
    estimator = estimator_for(name)
    with spec.open("create") as store:
        if memory_id is None:
            last = _last_conversation(store.memory_ids()) if continue_ else None
            memory_id = last or _new_conversation()
        session = Session.start(chat_model, store, memory_id, estimator, max_tokens)
        if system_text:
            session.memory.add(SystemMessage(system_text))
        session.turn(question)
