"""`chatmemory demo`: two scripted conversations through token windows on the SQLite default.

Offline and deterministic: the assistant is the script in `script`, the token counts are exact
(tiktoken ranks shipped with chatmemory). Every turn shows the window the model would be sent,
its token count against the budget, and what the turn evicted; the history keeps everything, so
a second run continues where the first stopped.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path

import click
from rich.console import Console
from rich.text import Text

from .._contracts import HistoryEntry
from .._memory.window import TokenWindowChatMemory
from .._messages import (
    AiMessage,
    ChatMessage,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from .._tokens.openai import OpenAiTokenCountEstimator
from .base import console, default_db, estimator_options, make_estimator
from .demo_rag import play_rag_scene
from .demo_recall import play_recall_scene
from .render import Row, message_table, n_messages
from .script import CONVERSATIONS, Conversation, run_tool
from .stores import Store, db_option, open_sqlite

__all__ = ["demo"]


@dataclass
class _Player:
    conversation: Conversation
    memory: TokenWindowChatMemory
    turns_done: int
    history: list[HistoryEntry]
    """The stored history as of the end of the last turn."""


@click.command()
@db_option
@click.option(
    "--max-tokens",
    type=click.IntRange(min=1),
    default=300,
    show_default=True,
    help="Token budget of each window.",
)
@estimator_options
@click.option(
    "--turns",
    type=click.IntRange(min=0),
    default=4,
    show_default=True,
    help="Turns to play per user.",
)
def demo(db: Path | None, max_tokens: int, model: str, encoding: str | None, turns: int) -> None:
    """Watch token windows evict, offline.

    Plays scripted chats with tool calls for alice and bob through token-window memories on the
    SQLite default. Each turn shows the window that would be sent to the model, its exact token
    count and what the turn evicted from it. Everything said stays in the history: run the demo
    again and the conversations continue.
    """
    estimator = make_estimator(model, encoding)
    path = db if db is not None else default_db()
    out = console()
    with open_sqlite(db) as store:
        out.print(
            f"Scripted chats with tool calls (get_weather, calculator) for "
            f"{' and '.join(c.name for c in CONVERSATIONS)}.\n"
            f"Each window holds at most {max_tokens} tokens, counted exactly for {model} "
            f"({estimator.encoding_name}).\nEvicted messages leave the window; the history "
            f"keeps them.\nStore: SQLite {click.format_filename(path)}\n",
            soft_wrap=True,
        )
        players = [_start(out, store, estimator, max_tokens, c) for c in CONVERSATIONS]
        for _ in range(turns):
            for player in players:
                player.turns_done += 1
                _play(out, store, estimator, max_tokens, player)
        for player in players:
            _show_history(out, player)
    play_rag_scene(out, path)
    play_recall_scene(out)
    where = "" if db is None else f" --db {shlex.quote(click.format_filename(path))}"
    out.print(
        f"Continue these conversations: chatmemory demo{where}\n"
        f"Inspect one:                  chatmemory history{where} show demo:alice --all",
        soft_wrap=True,
    )


def _start(
    out: Console,
    store: Store,
    estimator: OpenAiTokenCountEstimator,
    max_tokens: int,
    conversation: Conversation,
) -> _Player:
    history = store.history(conversation.memory_id)
    asked = sum(isinstance(e.message, UserMessage) for e in history)
    name = conversation.name
    if history:
        out.print(
            f"continuing {name}'s conversation: {n_messages(len(history))} stored, "
            f"next is turn {asked + 1}"
        )
    else:
        out.print(f"starting {name}'s conversation (memory id {conversation.memory_id})")
    memory = TokenWindowChatMemory(
        max_tokens=max_tokens,
        estimator=estimator,
        store=store,
        id=conversation.memory_id,
        always_keep_system_message_first=True,
    )
    return _Player(conversation, memory, asked, history)


def _play(
    out: Console,
    store: Store,
    estimator: OpenAiTokenCountEstimator,
    max_tokens: int,
    player: _Player,
) -> None:
    conversation, memory, n = player.conversation, player.memory, player.turns_done
    before = player.history
    was_in_window = {e.seq for e in before if e.in_window}
    last_seq = before[-1].seq if before else -1

    turn = conversation.turn(n)
    memory.add(SystemMessage(conversation.system), UserMessage(turn.user))
    results: list[str] = []
    if turn.calls:
        requests = [
            ToolExecutionRequest(f"call_{n}_{i}", name, json.dumps(arguments))
            for i, (name, arguments) in enumerate(turn.calls, start=1)
        ]
        memory.add(AiMessage(tool_execution_requests=requests))
        for request in requests:
            result = run_tool(request, n)
            results.append(result)
            memory.add(ToolExecutionResultMessage(request.id, request.name, result))
    memory.add(AiMessage(turn.answer(results, memory.messages())))

    after = player.history = store.history(memory.id)
    window = memory.messages()
    total = estimator.count_messages(window)
    out.rule(Text(f"{conversation.name} · turn {n}", style="bold"))
    rows = _window_rows(window, after, last_seq, estimator)
    out.print(message_table(rows))
    in_messages = sum(row.tokens or 0 for row in rows)
    out.print(
        Text.assemble(
            f"{conversation.name}'s window: ",
            (f"{total} / {max_tokens} tokens", "bold red" if total > max_tokens else "bold"),
            f" ({in_messages} in its messages + {total - in_messages} per request)",
            f" · {n_messages(len(window))}",
        )
    )
    evicted = [
        Row(e.message, seq=e.seq)
        for e in after
        if not e.in_window and (e.seq in was_in_window or e.seq > last_seq)
    ]
    if evicted:
        out.print(f"evicted by this turn ({n_messages(len(evicted))}, kept in the history):")
        out.print(message_table(evicted), style="dim")
    else:
        out.print("evicted by this turn: nothing")
    out.print()


def _window_rows(
    window: list[ChatMessage],
    history: list[HistoryEntry],
    last_seq: int,
    estimator: OpenAiTokenCountEstimator,
) -> list[Row]:
    """The window as table rows; seq numbers come from the store's window rows, which the
    memory's window equals after a write (if it ever did not, the rows show no seq)."""
    stored = [e for e in history if e.in_window]
    if [e.message for e in stored] != window:
        return [Row(m, tokens=estimator.count_message(m)) for m in window]
    return [
        Row(
            e.message,
            seq=e.seq,
            tokens=estimator.count_message(e.message),
            mark="+" if e.seq > last_seq else "",
        )
        for e in stored
    ]


def _show_history(out: Console, player: _Player) -> None:
    conversation, history = player.conversation, player.history
    in_window = sum(e.in_window for e in history)
    out.rule(Text(f"{conversation.name}'s history", style="bold"))
    out.print(
        f"{conversation.memory_id}: {n_messages(len(history))}, {in_window} in the window (●)"
    )
    rows = [
        Row(e.message, seq=e.seq, created_at=e.created_at, in_window=e.in_window) for e in history
    ]
    out.print(message_table(rows))
    out.print()
