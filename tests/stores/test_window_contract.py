"""The window contract's reads and commits as a memory uses them, on every backend, sync and async:
`load_window(since=...)` answers "unchanged" with the same snapshot, commits say what they did,
unreadable rows can be skipped and repaired, summaries count without decoding."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from chatmemory import (
    AiMessage,
    ChatMessage,
    ConfigurationError,
    OpenAiTokenCountEstimator,
    SerializationError,
    StoreError,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from chatmemory.stores import Committed, NewMessage

from .backends import AwaitableFacade, Context, drive, memory_for, store_params

ESTIMATOR = OpenAiTokenCountEstimator("gpt-4o-mini")

every_store = pytest.mark.parametrize("backend", store_params())


@pytest.fixture
def context(tmp_path: Any) -> Context:
    import uuid

    return Context(tmp_path=tmp_path, unique=f"t{uuid.uuid4().hex[:12]}")


def _new(*texts: str) -> list[NewMessage]:
    return [NewMessage(UserMessage(text)) for text in texts]


@every_store
def test_commit_says_the_new_version_and_first_seq(backend: Any, context: Context) -> None:
    async def scenario(store: Any, raw: Any, mode: str) -> None:
        first = await store.commit_window("m", version=0, append=_new("a", "b"), evict=[])
        assert isinstance(first, Committed)
        assert first.first_seq == 0
        loaded = await store.load_window("m")
        assert loaded.version == first.version
        second = await store.commit_window("m", version=first.version, append=_new("c"), evict=[0])
        assert isinstance(second, Committed)
        assert (second.first_seq, second.version != first.version) == (2, True)
        assert (
            await store.commit_window("m", version=first.version, append=_new("x"), evict=[])
            is None
        )
        rows = (await store.load_window("m")).rows
        assert [(r.seq, r.message.text) for r in rows] == [(1, "b"), (2, "c")]

    drive(backend, context, scenario)


@every_store
def test_since_returns_the_same_snapshot_while_nothing_changed(
    backend: Any, context: Context
) -> None:
    async def scenario(store: Any, raw: Any, mode: str) -> None:
        empty = await store.load_window("s")
        assert await store.load_window("s", since=empty) is empty
        await store.commit_window("s", version=0, append=_new("a", "b"), evict=[])
        first = await store.load_window("s")
        assert first is not empty
        assert [r.message.text for r in first.rows] == ["a", "b"]
        assert await store.load_window("s", since=first) is first
        # another memory id changing does not change this one's window
        await store.commit_window("other", version=0, append=_new("z"), evict=[])
        again = await store.load_window("s", since=first)
        assert (again.version, again.rows) == (first.version, first.rows)
        await store.commit_window("s", version=first.version, append=_new("c"), evict=[0])
        later = await store.load_window("s", since=first)
        assert [(r.seq, r.message.text) for r in later.rows] == [(1, "b"), (2, "c")]
        assert later.rows[0] == first.rows[1]

    drive(backend, context, scenario)


@every_store
def test_a_deleted_and_recreated_id_never_looks_unchanged(backend: Any, context: Context) -> None:
    async def scenario(store: Any, raw: Any, mode: str) -> None:
        await store.commit_window("r", version=0, append=_new("old"), evict=[])
        seen = await store.load_window("r")
        await store.delete_messages("r")
        assert (await store.load_window("r", since=seen)).rows == ()
        version = 0
        for text in ("new1", "new2", "new3"):  # as many commits as before, and more
            committed = await store.commit_window("r", version=version, append=_new(text), evict=[])
            version = committed.version
        now = await store.load_window("r", since=seen)
        assert now is not seen
        assert [r.message.text for r in now.rows] == ["new1", "new2", "new3"]

    drive(backend, context, scenario)


@every_store
def test_a_memory_ids_life_is_kept_by_commits_and_renewed_by_a_delete(
    backend: Any, context: Context
) -> None:
    """`life` tells a cache that rows of the same seqs are not the same rows: what recall keeps
    per conversation must not outlive a delete (a forgotten message would come back)."""

    async def scenario(store: Any, raw: Any, mode: str) -> None:
        assert (await store.load_window("l")).life == ""
        first = await store.commit_window("l", version=0, append=_new("a"), evict=[])
        assert first.life != ""
        second = await store.commit_window("l", version=first.version, append=_new("b"), evict=[])
        loaded = await store.load_window("l")
        assert first.life == second.life == loaded.life
        await store.delete_messages("l")
        assert (await store.load_window("l", since=loaded)).life == ""
        again = await store.commit_window("l", version=0, append=_new("a"), evict=[])
        reloaded = await store.load_window("l", since=loaded)
        assert again.life == reloaded.life
        assert reloaded.life not in ("", first.life)

    drive(backend, context, scenario)


@every_store
def test_summaries_count_rows_without_decoding(backend: Any, context: Context) -> None:
    async def scenario(store: Any, raw: Any, mode: str) -> None:
        assert await store.summaries() == []
        done = await store.commit_window("b", version=0, append=_new("1", "2", "3"), evict=[])
        await store.commit_window("b", version=done.version, append=[], evict=[0, 1])
        await store.commit_window("a", version=0, append=_new("x"), evict=[])
        summaries = await store.summaries()
        assert [(s.memory_id, s.messages, s.in_window) for s in summaries] == [
            ("a", 1, 1),
            ("b", 3, 1),
        ]
        if backend[0].corrupt is not None:
            await backend[0].corrupt(raw, "b", 2)
            counted = {s.memory_id: s.messages for s in await store.summaries()}
            assert counted["b"] == 3  # an unreadable row is still counted

    drive(backend, context, scenario)


@pytest.mark.parametrize("backend", store_params(lambda b: b.corrupt))
def test_an_unreadable_window_row_is_named_skipped_and_repaired(
    backend: Any, context: Context
) -> None:
    corrupt = backend[0].corrupt

    async def scenario(store: Any, raw: Any, mode: str) -> None:
        await store.commit_window("c", version=0, append=_new("a", "b", "c"), evict=[])
        await corrupt(raw, "c", 1)
        with pytest.raises(SerializationError, match="repair_window") as caught:
            await store.load_window("c")
        assert (caught.value.memory_id, caught.value.row) == ("c", 1)
        skipped = await store.load_window("c", errors="skip")
        assert [r.seq for r in skipped.rows] == [0, 2]
        assert skipped.unreadable == (1,)
        assert await store.repair_window("c") == [1]
        assert [r.message.text for r in (await store.load_window("c")).rows] == ["a", "c"]
        assert await store.repair_window("c") == []
        history = await store.history("c", errors="skip")
        assert [h.seq for h in history] == [0, 2]  # the row is kept, out of the window

    drive(backend, context, scenario)


@pytest.mark.parametrize("backend", store_params(lambda b: b.corrupt))
def test_a_partial_history_read_names_or_skips_an_unreadable_row_it_asks_for(
    backend: Any, context: Context
) -> None:
    corrupt = backend[0].corrupt

    async def scenario(store: Any, raw: Any, mode: str) -> None:
        done = await store.commit_window("p", version=0, append=_new(*"abcde"), evict=[])
        await store.commit_window("p", version=done.version, append=[], evict=[0, 1])
        await corrupt(raw, "p", 1)  # out of the window
        await corrupt(raw, "p", 3)  # in it
        with pytest.raises(SerializationError, match="repair_window") as caught:
            await store.history("p", seqs=[4, 3, 0])
        assert (caught.value.memory_id, caught.value.row) == ("p", 3)
        with pytest.raises(SerializationError) as caught:
            await store.history("p", seqs=[4, 3, 1])
        assert caught.value.row == 1  # the first unreadable row, as the whole read names it
        skipped = await store.history("p", seqs=[4, 3, 1, 0], errors="skip")
        assert skipped == [h for h in await store.history("p", errors="skip") if h.seq in (0, 4)]
        assert [(h.seq, h.message.text, h.in_window) for h in skipped] == [
            (0, "a", False),
            (4, "e", True),
        ]
        # rows not asked for are not read: around the damage, "raise" raises nothing
        assert [h.message.text for h in await store.history("p", seqs=[0, 2, 4])] == [
            "a",
            "c",
            "e",
        ]

    drive(backend, context, scenario)


@every_store
def test_memories_sharing_an_id_always_return_what_the_store_holds(
    backend: Any, context: Context
) -> None:
    """Two memories on one id, each keeping its window between operations, interleaved with
    writes behind their backs: after every step both return what a new memory reads."""
    rng = random.Random(7)
    call = AiMessage(tool_execution_requests=[ToolExecutionRequest("c", "weather", "{}")])
    choices: list[ChatMessage] = [
        UserMessage("hello there"),
        AiMessage("a somewhat longer answer " * 3),
        SystemMessage("be brief"),
        SystemMessage("be verbose"),
        call,
        ToolExecutionResultMessage("c", "weather", "sunny"),
    ]

    async def scenario(store: Any, raw: Any, mode: str) -> None:
        one = memory_for(raw, mode, "shared", max_tokens=60, estimator=ESTIMATOR)
        two = memory_for(raw, mode, "shared", max_tokens=60, estimator=ESTIMATOR)
        for step in range(60):
            writer = rng.choice([one, two])
            roll = rng.random()
            if roll < 0.7:
                await writer.add(*rng.sample(choices, rng.randint(1, 2)))
            elif roll < 0.8:
                await writer.set(rng.sample(choices, rng.randint(0, 3)))
            elif roll < 0.9:
                await store.update_messages("shared", [UserMessage(f"behind {step}")])
            else:
                await writer.clear()
            fresh = memory_for(raw, mode, "shared", max_tokens=60, estimator=ESTIMATOR)
            expected = await fresh.messages()
            assert await one.messages() == expected, step
            assert await two.messages() == expected, step

    drive(backend, context, scenario)


@every_store
def test_an_add_on_a_kept_window_is_one_commit(backend: Any, context: Context) -> None:
    async def scenario(store: Any, raw: Any, mode: str) -> None:
        calls: list[str] = []
        counted = _Counting(raw, calls)
        memory = memory_for(counted, mode, "one", max_messages=3)
        await memory.add(UserMessage("first"))  # reads once: nothing kept yet
        calls.clear()
        await memory.add(UserMessage("second"))
        await memory.add(UserMessage("third"), UserMessage("fourth"))
        assert calls == ["commit_window", "commit_window"]
        calls.clear()
        assert [m.text for m in await memory.messages()] == ["second", "third", "fourth"]
        assert calls == ["load_window"]

    drive(backend, context, scenario)


class _Counting:
    """`store` with its window calls recorded (sync or async, as the store is)."""

    def __init__(self, store: Any, calls: list[str]) -> None:
        self._store = store
        self._calls = calls

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if name in ("load_window", "commit_window"):
            self._calls.append(name)
        return attr


@pytest.mark.parametrize("backend", store_params(lambda b: b.name != "memory"))
def test_a_closed_store_says_so(backend: Any, context: Context) -> None:
    async def scenario(store: Any, raw: Any, mode: str) -> None:
        await store.commit_window("c", version=0, append=_new("a"), evict=[])
        if mode == "sync":
            raw.close()
        else:
            await raw.aclose()
        for call in (
            lambda: store.load_window("c"),
            lambda: store.commit_window("c", version=0, append=_new("b"), evict=[]),
            lambda: store.history("c"),
            lambda: store.summaries(),
        ):
            with pytest.raises(StoreError, match="closed"):
                await call()  # type: ignore[no-untyped-call]

    drive(backend, context, scenario)


@pytest.mark.parametrize("backend", store_params(lambda b: b.unreachable, ("sync",)))
def test_an_unreachable_server_is_a_store_error_naming_the_memory_id(
    backend: Any, context: Context
) -> None:
    opener = backend[0].unreachable

    async def main() -> None:
        async with opener(context) as store:
            with pytest.raises(StoreError, match="memory id 'far'") as caught:
                store.load_window("far")
            assert caught.value.memory_id == "far"

    asyncio.run(main())


@pytest.mark.parametrize("backend", store_params(lambda b: b.shared))
def test_a_kept_window_sees_commits_made_through_another_store(
    backend: Any, context: Context
) -> None:
    """Two store objects on the same data (two connections, as two processes have): what one
    commits shows in the next read of a memory that keeps its window on the other, and an add
    on that stale window lands after it, each message stored once."""
    owner, mode = backend

    def texts(messages: list[ChatMessage]) -> list[str | None]:
        return [getattr(m, "text", None) for m in messages]

    async def main() -> None:
        opener = owner.open_sync if mode == "sync" else owner.open_async
        async with opener(context) as first, opener(context) as second:
            mine = memory_for(first, mode, "both", max_messages=4)
            theirs = memory_for(second, mode, "both", max_messages=4)
            await mine.add(UserMessage("a"))
            assert texts(await mine.messages()) == ["a"]
            await theirs.add(UserMessage("b"))
            assert texts(await mine.messages()) == ["a", "b"]
            await theirs.add(UserMessage("c"))
            await mine.add(UserMessage("d"))  # on a stale kept window: retried on a fresh read
            await theirs.add(UserMessage("e"), UserMessage("f"))
            assert texts(await mine.messages()) == ["c", "d", "e", "f"]
            assert texts(await theirs.messages()) == ["c", "d", "e", "f"]
            reader = AwaitableFacade(second) if mode == "sync" else second
            history = await reader.history("both")
            assert [h.message.text for h in history] == ["a", "b", "c", "d", "e", "f"]
            await theirs.clear()
            assert await mine.messages() == []
            await mine.add(UserMessage("g"))
            assert texts(await theirs.messages()) == ["g"]

    asyncio.run(main())


@pytest.mark.parametrize("backend", store_params(lambda b: b.shared, ("sync",)))
def test_sync_and_async_stores_see_the_same_data(backend: Any, context: Context) -> None:
    sync_backend = backend[0]

    async def main() -> None:
        async with (
            sync_backend.open_sync(context) as sync,
            sync_backend.open_async(context) as asynchronous,
        ):
            writer = memory_for(sync, "sync", "both", max_messages=3)
            await writer.add(UserMessage("from sync"))
            reader = memory_for(asynchronous, "async", "both", max_messages=3)
            assert [m.text for m in await reader.messages()] == ["from sync"]
            await reader.add(AiMessage("from async"))
            assert [m.text for m in await writer.messages()] == ["from sync", "from async"]
            assert [s.messages for s in await asynchronous.summaries()] == [2]

    asyncio.run(main())


@every_store
def test_tampered_token_counts_are_not_trusted(backend: Any, context: Context) -> None:
    """A stored count of -5000 made a 30-token window return 13 messages: counts that are not
    positive ints are recounted, so the window holds what fits."""

    async def scenario(store: Any, raw: Any, mode: str) -> None:
        key = ESTIMATOR.cache_key
        messages = [UserMessage(f"message number {i} of the tampered memory") for i in range(13)]
        append = [NewMessage(m, token_count=-5000, counted_by=key) for m in messages]
        await store.commit_window("t", version=0, append=append, evict=[])
        memory = memory_for(raw, mode, "t", max_tokens=30, estimator=ESTIMATOR)
        window = await memory.messages()
        assert 0 < len(window) < 13
        assert ESTIMATOR.count_messages(window) <= 30

    drive(backend, context, scenario)


@every_store
def test_a_memory_id_with_a_lone_surrogate_is_a_configuration_error(
    backend: Any, context: Context
) -> None:
    async def scenario(store: Any, raw: Any, mode: str) -> None:
        for call in (
            lambda: store.load_window("bad \ud800 id"),
            lambda: store.commit_window("bad \ud800 id", version=0, append=_new("x"), evict=[]),
            lambda: store.delete_messages("bad \ud800 id"),
        ):
            with pytest.raises(ConfigurationError, match="lone surrogate"):
                await call()  # type: ignore[no-untyped-call]

    drive(backend, context, scenario)
