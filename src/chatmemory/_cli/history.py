"""`chatmemory history ...`: list, show, search, export, import and clear stored
conversations."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import IO, Any, Literal

import click
from rich.table import Table
from rich.text import Text

from .._codec.langchain4j import messages_to_json
from .._contracts import HistoryEntry, NewMessage
from .._errors import StoreError
from .base import F, console, read_input
from .render import (
    Row,
    format_time,
    full_text,
    message_lines,
    message_table,
    n_messages,
    printable,
    role,
)
from .stores import Store, StoreSpec, store_options
from .transcript import find, json_records, markdown_lines, snippet, terms_of
from .transfer import export_jsonl, parse_import

__all__ = ["history"]

_Errors = Literal["raise", "skip"]
_ONE_TABLE = 2_000
"""Rows up to which `show` lays out one table; longer outputs stream line by line."""

_skip_option = click.option(
    "--skip-unreadable",
    is_flag=True,
    help="Leave out stored rows that cannot be read instead of failing.",
)


@click.group()
@store_options
@click.pass_context
def history(ctx: click.Context, /, **options: Any) -> None:
    """Inspect, export, import and delete stored conversations.

    The store is the SQLite default unless --db, --redis-url or --postgres-dsn picks another.
    """
    ctx.obj = StoreSpec.take(options)


def _here(command: F) -> F:
    """Accept the store options after the subcommand too (`history list --db X`)."""

    @store_options
    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        given = StoreSpec.take(kwargs)
        spec = click.get_current_context().find_object(StoreSpec) or StoreSpec()
        return command(spec.merged(given), *args[1:], **kwargs)

    return wrapper  # type: ignore[return-value]


@history.command("list")
@click.pass_obj
@_here
def list_(spec: StoreSpec) -> None:
    """List the memory ids, their sizes and last activity (counted, nothing is decoded)."""
    with spec.open("read") as store:
        summaries = store.summaries()
    if not summaries:
        console().print(f"no conversations stored in {spec.describe()}")
        return
    table = Table(box=None, pad_edge=False, show_edge=False)
    table.add_column("memory id")
    for column in ("messages", "window", "last activity"):
        table.add_column(column, justify="right", no_wrap=True)
    for summary in summaries:
        table.add_row(
            Text(summary.memory_id),
            str(summary.messages),
            str(summary.in_window),
            format_time(summary.updated_at),
        )
    console().print(table)


@history.command()
@click.argument("memory_id")
@click.option(
    "--all", "show_all", is_flag=True, help="Show the whole history, not just the window."
)
@_skip_option
@click.option(
    "--recall",
    "recall_query",
    metavar="QUERY",
    help="Show what semantic recall brings back for QUERY (the hashing model; nothing is written).",
)
@click.option("--top-k", type=click.IntRange(min=1), default=2, show_default=True)
@click.option("--full", is_flag=True, help="Print each message whole, not cut to one line.")
@click.option(
    "--format",
    "format_",
    type=click.Choice(["table", "markdown", "json"]),
    default="table",
    show_default=True,
    help="markdown: a heading and the whole text per message; json: an array of records "
    "(seq, created_at, in_window, role, text, message).",
)
@click.pass_obj
@_here
def show(
    spec: StoreSpec,
    memory_id: str,
    show_all: bool,
    skip_unreadable: bool,
    recall_query: str | None,
    top_k: int,
    full: bool,
    format_: str,
) -> None:
    """Show a conversation's window, or its whole history.

    The window of MEMORY_ID is what a memory sends the model; --all shows every message ever
    added, with ● on those still in the window. The table cuts each message to one line unless
    --full; --format markdown or json print them whole. --recall QUERY shows the past messages
    out of the window that semantic recall would bring back, with their scores.
    """
    if recall_query is not None:
        with spec.open("read") as store:
            _show_recall(store, memory_id, recall_query, top_k)
        return
    with spec.open("read") as store:
        entries = _entries(store, spec, memory_id, "skip")
        unreadable = _count(store, memory_id) - len(entries)
        if unreadable and not skip_unreadable:
            if show_all:
                store.history(memory_id)  # raises, naming the first unreadable row
            else:
                store.load_window(memory_id)  # raises if one is in the window
    window = entries if show_all else [e for e in entries if e.in_window]
    if format_ == "json":
        click.echo(json_records((memory_id, e) for e in window))
        return
    if format_ == "markdown":
        _echo_lines(markdown_lines(memory_id, window, marked=show_all))
        return
    in_window = sum(e.in_window for e in entries) if show_all else len(window)
    out = console()
    skipped = f" ({unreadable} unreadable, not shown)" if unreadable else ""
    out.print(
        f"{memory_id}: {n_messages(in_window)} in the window, {len(entries) + unreadable} in "
        f"the history{skipped}"
    )
    rows = (
        Row(e.message, e.seq, e.created_at, in_window=e.in_window if show_all else None)
        for e in window
    )
    if len(window) <= _ONE_TABLE:
        out.print(message_table(list(rows), full=full))
    else:  # streamed: lines show as they are made, none waits for the widest one
        _echo_lines(message_lines(rows, out.width, full=full))


@history.command()
@click.argument("query")
@click.option(
    "--memory-id",
    "memory_ids",
    multiple=True,
    metavar="ID",
    help="Search this conversation only (repeat for several).",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=50,
    show_default=True,
    help="Show this many hits, the newest.",
)
@click.option(
    "--format",
    "format_",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="json: an array of records, the messages whole (as `history show --format json`).",
)
@click.pass_obj
@_here
def search(
    spec: StoreSpec, query: str, memory_ids: tuple[str, ...], limit: int, format_: str
) -> None:
    """Find the stored messages that hold every word of QUERY (any case; "quoted words" as
    one phrase), in every conversation, newest first, with the conversation and date of each.

    Every message of the history is searched, in the window or not, as `history show --full`
    prints it (tool calls and results too). The stores keep no full-text index of chat
    messages, so this reads them all; rows that cannot be read are passed over.
    """
    terms = terms_of(query)
    if not terms:
        raise click.BadParameter("is empty", param_hint="QUERY")
    with spec.open("read") as store:
        ids = list(memory_ids) or store.memory_ids()
        hits = find(((i, store.history(i, errors="skip")) for i in ids), terms)
    shown = hits[:limit]
    if format_ == "json":
        click.echo(json_records((hit.memory_id, hit.entry) for hit in shown))
        return
    if not hits:
        click.echo(f"no stored message holds {query!r} in {spec.describe()}")
        return
    out = console()
    more = f", the newest {limit} shown (--limit)" if len(hits) > limit else ""
    out.print(f"{len(hits)} message(s) hold {query!r}{more}", soft_wrap=True)
    table = Table(box=None, pad_edge=False, show_edge=False)
    for column in ("memory id", "seq", "time", "role"):
        table.add_column(column, no_wrap=True, justify="right" if column == "seq" else "left")
    table.add_column("message", no_wrap=True, overflow="ellipsis")
    room = max(20, out.width - 45)
    for hit in shown:
        text = full_text(hit.entry.message)
        table.add_row(
            Text(printable(hit.memory_id)),
            str(hit.entry.seq),
            Text(format_time(hit.entry.created_at), style="dim"),
            role(hit.entry.message),
            snippet(text, terms, room),
        )
    out.print(table)


def _show_recall(store: Any, memory_id: str, query: str, top_k: int) -> None:
    from ..inspector._views import preview_recall

    found = preview_recall(store, memory_id, query, top_k=top_k)  # a read never writes
    if not found:
        click.echo(f"nothing out of the window of {memory_id} matches {query!r}")
        return
    for rank, run in enumerate(found, 1):
        click.echo(f"[{rank}] score {run.score:.3f}, messages {run.seqs[0]}–{run.seqs[-1]}")
        _echo_lines(
            message_lines(Row(m, seq) for seq, m in zip(run.seqs, run.messages, strict=True))
        )


def _echo_lines(lines: Iterable[str], batch: int = 512) -> None:
    """Print `lines` a few hundred at a time: each write flushes stdout, so one per line would
    cost more than making the lines."""
    chunk: list[str] = []
    for line in lines:
        chunk.append(line)
        if len(chunk) == batch:
            click.echo("\n".join(chunk))
            chunk.clear()
    if chunk:
        click.echo("\n".join(chunk))


@history.command()
@click.argument("memory_id")
@click.option(
    "--format",
    "format_",
    type=click.Choice(["json", "jsonl"]),
    default="json",
    show_default=True,
    help="json: LangChain4j's message array; jsonl: one record per message with seq, "
    "created_at and in_window.",
)
@click.option(
    "-o",
    "--output",
    type=click.File("w", encoding="utf-8", lazy=True),
    default="-",
    help="Write to this file instead of stdout.",
)
@_skip_option
@click.pass_obj
@_here
def export(
    spec: StoreSpec, memory_id: str, format_: str, output: IO[str], skip_unreadable: bool
) -> None:
    """Export the whole history of MEMORY_ID.

    --format json writes a JSON array that LangChain4j's ChatMessageDeserializer.messagesFromJson
    reads. --format jsonl writes one object per line: memory_id, seq, created_at, in_window and
    message (LangChain4j's JSON of the message); `history import` restores it, window included.
    """
    with spec.open("read") as store:
        entries = _entries(store, spec, memory_id, "skip" if skip_unreadable else "raise")
    if format_ == "json":
        text = messages_to_json(e.message for e in entries) + "\n"
    else:
        text = export_jsonl(memory_id, entries)
    output.write(text)


@history.command("import")
@click.argument("file", type=click.File("rb"))
@click.option("--id", "memory_id", help="Import into this memory id (required for a JSON array).")
@click.option("--append", is_flag=True, help="Add after the messages the memory id already has.")
@click.pass_obj
@_here
def import_(spec: StoreSpec, file: IO[bytes], memory_id: str | None, append: bool) -> None:
    """Import messages from a JSON or JSON lines FILE (- for stdin).

    A JSON array (LangChain4j's format) needs --id; all its messages join the window. JSON lines
    as `history export --format jsonl` writes them keep their window membership (in_window) and
    their memory ids unless --id is given; seq and created_at are assigned anew. The messages are
    appended as they are: the next memory that loads the window applies its own limit. Nothing
    is written unless the whole input is valid, and a memory id that already has messages is
    refused unless --append is given.
    """
    if memory_id == "":
        raise click.BadParameter("must not be empty", param_hint="--id")
    text, source = read_input(file)
    batches = parse_import(text, source=source, memory_id=memory_id)
    with spec.open() as store:
        versions: dict[str, int] = {}
        for target in batches:
            versions[target] = version = store.load_window(target).version
            if version and not append and store.history(target, errors="skip"):
                raise click.ClickException(
                    f"memory id {target!r} already has messages in {spec.describe()}; pass "
                    f"--append to add these after them, or delete it first with "
                    f"`chatmemory history clear {target}`"
                )
        for target, news in batches.items():
            _commit(store, target, versions[target], news)
            click.echo(f"imported {n_messages(len(news))} into {target}")


@history.command()
@click.argument("memory_id")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.pass_obj
@_here
def clear(spec: StoreSpec, memory_id: str, yes: bool) -> None:
    """Delete MEMORY_ID: its window and its whole history."""
    with spec.open("change") as store:
        count = _count(store, memory_id)
        if not count and memory_id not in store.memory_ids():
            click.echo(f"nothing stored for {memory_id!r} in {spec.describe()}", err=True)
            return
        if not yes:
            click.confirm(
                f"Delete {memory_id!r}: its window and its whole history ({n_messages(count)})?",
                abort=True,
            )
        store.delete_messages(memory_id)
    click.echo(f"deleted {memory_id} ({n_messages(count)})")


@history.command()
@click.argument("memory_id")
@click.pass_obj
@_here
def repair(spec: StoreSpec, memory_id: str) -> None:
    """Take the rows of MEMORY_ID's window that cannot be read out of the window.

    A damaged row (a disk error, a hand edit) in the window makes every add and read of that
    memory fail. Repair evicts such rows; they stay in the history (`history show --all
    --skip-unreadable` reads past them, `history export` names them).
    """
    with spec.open("change") as store:
        if memory_id not in store.memory_ids():
            raise click.ClickException(f"no conversation {memory_id!r} in {spec.describe()}")
        evicted = store.repair_window(memory_id)
    if evicted:
        rows = ", ".join(map(str, evicted))
        click.echo(f"took {n_messages(len(evicted))} out of the window of {memory_id}: row {rows}")
    else:
        click.echo(f"the window of {memory_id} reads fine: nothing to repair")


def _count(store: Store, memory_id: str) -> int:
    """How many rows the history of `memory_id` holds, readable or not."""
    return next((s.messages for s in store.summaries() if s.memory_id == memory_id), 0)


def _entries(
    store: Store,
    spec: StoreSpec,
    memory_id: str,
    errors: _Errors,
) -> list[HistoryEntry]:
    entries = store.history(memory_id, errors=errors)
    if not entries:
        raise click.ClickException(f"no conversation {memory_id!r} in {spec.describe()}")
    return entries


def _commit(store: Store, memory_id: str, version: int, news: list[NewMessage]) -> None:
    if not store.commit_window(memory_id, version=version, append=news, evict=()):
        raise StoreError(
            "another writer changed this memory during the import; nothing was imported into "
            "it, try again",
            store=store,
            memory_id=memory_id,
        )
