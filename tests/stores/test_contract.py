"""The one contract every store keeps, run against each backend, through the sync and async API."""

from __future__ import annotations

import asyncio
import threading
from datetime import timezone
from typing import Any

import pytest

from chatmemory import (
    AiMessage,
    AsyncMessageWindowChatMemory,
    AudioContent,
    ChatMessage,
    ConfigurationError,
    CustomMessage,
    DetailLevel,
    ImageContent,
    MessageWindowChatMemory,
    PdfFileContent,
    SystemMessage,
    TextContent,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
    VideoContent,
)
from chatmemory.stores import NewMessage

from .backends import Context, drive, memory_for, store_params

pytestmark = pytest.mark.parametrize("backend", store_params())


@pytest.fixture
def context(tmp_path: Any, request: pytest.FixtureRequest) -> Context:
    import uuid

    return Context(tmp_path=tmp_path, unique=f"t{uuid.uuid4().hex[:12]}")


EVERY_KIND: list[ChatMessage] = [
    SystemMessage("You are terse. Ünïcödé ✓ 漢字"),
    UserMessage("How much is 2+2?", name="Klaus", attributes={"tenant": "acme", "n": [1, 2]}),
    UserMessage(
        contents=[
            TextContent("What is on this picture?"),
            ImageContent(url="https://example.com/cat.png"),
            ImageContent(
                base64_data="iVBORw0K", mime_type="image/png", detail_level=DetailLevel.HIGH
            ),
            AudioContent(base64_data="SUQz", mime_type="audio/mp3"),
            VideoContent(url="https://example.com/v.mp4"),
            PdfFileContent(base64_data="JVBERi0", mime_type="application/pdf"),
        ]
    ),
    AiMessage(
        "Let me check.",
        thinking="user wants math",
        tool_execution_requests=[ToolExecutionRequest("call_1", "calculator", '{"a": 2, "b": 2}')],
    ),
    ToolExecutionResultMessage("call_1", "calculator", "4", is_error=False),
    AiMessage("4"),
    CustomMessage({"role": "context", "payload": {"k": [1, None, True]}}),
]


def test_unknown_id_is_empty(backend: Any, context: Context) -> None:
    async def scenario(store: Any, raw: Any, mode: str) -> None:
        assert await store.get_messages("nobody") == []
        assert await store.history("nobody") == []
        snapshot = await store.load_window("nobody")
        assert (snapshot.version, snapshot.rows) == (0, ())
        assert "nobody" not in await store.memory_ids()
        await store.delete_messages("nobody")  # deleting what is not there is fine

    drive(backend, context, scenario)


def test_update_then_get_returns_every_kind_of_message(backend: Any, context: Context) -> None:
    async def scenario(store: Any, raw: Any, mode: str) -> None:
        await store.update_messages("alice", EVERY_KIND)
        assert await store.get_messages("alice") == EVERY_KIND
        assert [h.message for h in await store.history("alice")] == EVERY_KIND

    drive(backend, context, scenario)


def test_update_replaces_and_keeps_history_without_duplicates(
    backend: Any, context: Context
) -> None:
    a, b, c, d = (UserMessage(x) for x in "abcd")

    async def scenario(store: Any, raw: Any, mode: str) -> None:
        await store.update_messages("m", [a, b, c])
        await store.update_messages("m", [b, c, d])  # what a LangChain4j window writes
        assert await store.get_messages("m") == [b, c, d]
        history = await store.history("m")
        assert [h.message for h in history] == [a, b, c, d]
        assert [h.in_window for h in history] == [False, True, True, True]
        assert [h.seq for h in history] == [0, 1, 2, 3]

    drive(backend, context, scenario)


def test_empty_window_is_legal(backend: Any, context: Context) -> None:
    async def scenario(store: Any, raw: Any, mode: str) -> None:
        await store.update_messages("m", [UserMessage("x")])
        await store.update_messages("m", [])
        assert await store.get_messages("m") == []
        assert [h.in_window for h in await store.history("m")] == [False]
        assert "m" in await store.memory_ids()

    drive(backend, context, scenario)


def test_delete_removes_window_and_history(backend: Any, context: Context) -> None:
    async def scenario(store: Any, raw: Any, mode: str) -> None:
        await store.update_messages("gone", [UserMessage("x"), AiMessage("y")])
        await store.update_messages("kept", [UserMessage("z")])
        await store.delete_messages("gone")
        await store.delete_messages("gone")
        assert await store.get_messages("gone") == []
        assert await store.history("gone") == []
        assert "gone" not in await store.memory_ids()
        assert await store.get_messages("kept") == [UserMessage("z")]
        snapshot = await store.load_window("gone")
        assert snapshot.rows == ()
        # a deleted id starts again from scratch
        await store.update_messages("gone", [UserMessage("again")])
        assert [h.seq for h in await store.history("gone")] == [0]

    drive(backend, context, scenario)


def test_memory_ids_are_isolated_and_listed(backend: Any, context: Context) -> None:
    ids = ["alice", "bob", "user:42", "{tag}", "x}y{z", "spaced id", "漢字-✓"]

    async def scenario(store: Any, raw: Any, mode: str) -> None:
        for memory_id in ids:
            await store.update_messages(memory_id, [UserMessage(f"I am {memory_id}")])
        for memory_id in ids:
            assert await store.get_messages(memory_id) == [UserMessage(f"I am {memory_id}")]
        listed = await store.memory_ids()
        assert [i for i in listed if i in ids] == sorted(ids)

    drive(backend, context, scenario)


def test_commit_checks_the_version(backend: Any, context: Context) -> None:
    async def scenario(store: Any, raw: Any, mode: str) -> None:
        assert await store.commit_window(
            "v", version=0, append=[NewMessage(UserMessage("1"))], evict=[]
        )
        first = await store.load_window("v")
        assert first.version > 0
        assert not await store.commit_window(
            "v", version=0, append=[NewMessage(UserMessage("lost"))], evict=[0]
        )
        again = await store.load_window("v")
        assert again == first
        assert await store.commit_window(
            "v", version=first.version, append=[NewMessage(UserMessage("2"))], evict=[0]
        )
        final = await store.load_window("v")
        assert final.version > first.version
        assert [r.message for r in final.rows] == [UserMessage("2")]
        assert [r.seq for r in final.rows] == [1]

    drive(backend, context, scenario)


def test_rows_keep_token_counts_and_out_of_window_appends(backend: Any, context: Context) -> None:
    async def scenario(store: Any, raw: Any, mode: str) -> None:
        append = [
            NewMessage(UserMessage("counted"), token_count=7, counted_by="openai:o200k_base:x"),
            NewMessage(UserMessage("too big"), in_window=False, token_count=9000, counted_by="k"),
            NewMessage(AiMessage("uncounted")),
        ]
        assert await store.commit_window("t", version=0, append=append, evict=[])
        rows = (await store.load_window("t")).rows
        assert [(r.seq, r.token_count, r.counted_by) for r in rows] == [
            (0, 7, "openai:o200k_base:x"),
            (2, None, None),
        ]
        history = await store.history("t")
        assert [h.in_window for h in history] == [True, False, True]

    drive(backend, context, scenario)


def test_history_has_utc_timestamps_in_order(backend: Any, context: Context) -> None:
    async def scenario(store: Any, raw: Any, mode: str) -> None:
        for i in range(3):
            await store.update_messages("h", [UserMessage(str(j)) for j in range(i + 1)])
        history = await store.history("h")
        assert [h.seq for h in history] == [0, 1, 2]
        stamps = [h.created_at for h in history]
        assert all(
            s.tzinfo is not None and s.utcoffset() == timezone.utc.utcoffset(s) for s in stamps
        )
        assert stamps == sorted(stamps)

    drive(backend, context, scenario)


async def _twelve_rows(store: Any, memory_id: str) -> list[Any]:
    """A history of 12 rows from 3 commits (3 creation times), rows 0-3, 7 and 8 out of the
    window (7 from the start): the whole history, read."""
    new = [NewMessage(UserMessage(f"m{i}")) for i in range(12)]
    new[7] = NewMessage(UserMessage("m7"), in_window=False)
    first = await store.commit_window(memory_id, version=0, append=new[:6], evict=[])
    second = await store.commit_window(
        memory_id, version=first.version, append=new[6:10], evict=[1, 2, 3]
    )
    await store.commit_window(memory_id, version=second.version, append=new[10:], evict=[0, 8])
    history = await store.history(memory_id)
    assert [h.seq for h in history if h.in_window] == [4, 5, 6, 9, 10, 11]
    return list(history)


def test_history_of_some_seqs_is_the_whole_history_filtered(backend: Any, context: Context) -> None:
    async def scenario(store: Any, raw: Any, mode: str) -> None:
        whole = await _twelve_rows(store, "h")

        def only(*seqs: int) -> list[Any]:
            return [entry for entry in whole if entry.seq in seqs]

        # message, created_at and in_window as the whole read gives them: evicted rows (0, 3),
        # one never in the window (7), window rows (4, 10), from each of the three commits
        assert await store.history("h", seqs=[0, 3, 4, 7, 10]) == only(0, 3, 4, 7, 10)
        # oldest first and each once, however they are asked; any iterable of ints
        assert await store.history("h", seqs=[10, 3, 7, 10, 3]) == only(3, 7, 10)
        assert await store.history("h", seqs=(seq for seq in (11, 0))) == only(0, 11)
        assert await store.history("h", seqs=range(12)) == whole
        assert await store.history("h", seqs=[5], errors="skip") == only(5)

    drive(backend, context, scenario)


def test_history_skips_seqs_that_are_not_there(backend: Any, context: Context) -> None:
    async def scenario(store: Any, raw: Any, mode: str) -> None:
        whole = await _twelve_rows(store, "h")
        assert await store.history("h", seqs=[-1, 2, 12, 500, 2**64]) == [whole[2]]
        assert await store.history("h", seqs=[12]) == []
        assert await store.history("h", seqs=[]) == []
        assert await store.history("h", seqs=set()) == []
        assert await store.history("nobody", seqs=[0, 1]) == []
        await store.delete_messages("h")
        assert await store.history("h", seqs=[0, 1]) == []

    drive(backend, context, scenario)


def test_history_seqs_must_be_ints(backend: Any, context: Context) -> None:
    async def scenario(store: Any, raw: Any, mode: str) -> None:
        await store.update_messages("h", [UserMessage("x")])
        for bad in ("12", b"12", 12, 1.0, [True], [0, 1.0], ["1"], [None]):
            with pytest.raises(ConfigurationError, match=r"`seqs` must be an iterable of"):
                await store.history("h", seqs=bad)
        assert [h.message for h in await store.history("h", seqs=[0])] == [UserMessage("x")]

    drive(backend, context, scenario)


def test_large_and_unusual_text_round_trips(backend: Any, context: Context) -> None:
    big = "x" * 1_000_000
    odd = "quotes \" ' \\ nul-free control \t\n\r emoji 🧠 zero-width \u200b end"

    async def scenario(store: Any, raw: Any, mode: str) -> None:
        messages = [UserMessage(big), AiMessage(odd), UserMessage("<|endoftext|>")]
        await store.update_messages("big", messages)
        assert await store.get_messages("big") == messages

    drive(backend, context, scenario)


def test_message_window_memory_keeps_evicted_messages_as_history(
    backend: Any, context: Context
) -> None:
    async def scenario(store: Any, raw: Any, mode: str) -> None:
        memory = memory_for(raw, mode, "chat", max_messages=3)
        await memory.add(SystemMessage("be brief"))
        for i in range(6):
            await memory.add(UserMessage(f"q{i}"), AiMessage(f"a{i}"))
        assert await memory.messages() == [
            SystemMessage("be brief"),
            UserMessage("q5"),
            AiMessage("a5"),
        ]
        assert await store.get_messages("chat") == await memory.messages()
        history = await store.history("chat")
        assert len(history) == 13
        assert [h.message for h in history if h.in_window] == await memory.messages()
        await memory.clear()
        assert await memory.messages() == []
        assert await store.history("chat") == []

    drive(backend, context, scenario)


def test_token_window_memory_stores_counts_with_rows(backend: Any, context: Context) -> None:
    from chatmemory._tokens.estimator import cached_count

    class WordEstimator:
        cache_key = "words:v1"
        calls = 0

        def count_text(self, text: str) -> int:
            return len(text.split())

        def count_message(self, message: ChatMessage) -> int:
            return cached_count(self.cache_key, message, self._count)

        def _count(self, message: ChatMessage) -> int:
            WordEstimator.calls += 1
            return 1 + self.count_text(getattr(message, "text", None) or "")

        def count_messages(self, messages: Any) -> int:
            return 2 + sum(self.count_message(m) for m in messages)

    async def scenario(store: Any, raw: Any, mode: str) -> None:
        memory = memory_for(raw, mode, "tok", max_tokens=12, estimator=WordEstimator())
        await memory.add(UserMessage("one two three"), AiMessage("four five"))
        await memory.add(UserMessage("six seven eight nine"))
        assert await memory.messages() == [
            AiMessage("four five"),
            UserMessage("six seven eight nine"),
        ]
        rows = (await store.load_window("tok")).rows
        assert [(r.token_count, r.counted_by) for r in rows] == [(3, "words:v1"), (5, "words:v1")]
        # a fresh process reads the counts instead of counting again
        WordEstimator.calls = 0
        fresh = memory_for(raw, mode, "tok", max_tokens=12, estimator=WordEstimator())
        reloaded = await fresh.messages()
        assert reloaded == [AiMessage("four five"), UserMessage("six seven eight nine")]
        assert WordEstimator.calls == 0

    drive(backend, context, scenario)


def test_concurrent_writers_lose_nothing(backend: Any, context: Context) -> None:
    writers, per_writer = 4, 25

    async def scenario(store: Any, raw: Any, mode: str) -> None:
        if mode == "sync":

            def write(w: int) -> None:
                memory = MessageWindowChatMemory(id="shared", store=raw, max_messages=10)
                for i in range(per_writer):
                    memory.add(UserMessage(f"w{w}-{i}"))

            threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        else:

            async def awrite(w: int) -> None:
                memory = AsyncMessageWindowChatMemory(id="shared", store=raw, max_messages=10)
                for i in range(per_writer):
                    await memory.add(UserMessage(f"w{w}-{i}"))

            await asyncio.gather(*(awrite(w) for w in range(writers)))
        history = await store.history("shared")
        texts = [h.message.text for h in history]
        assert sorted(texts) == sorted(
            f"w{w}-{i}" for w in range(writers) for i in range(per_writer)
        )
        for w in range(writers):  # each writer's messages in its own order
            own = [t for t in texts if t.startswith(f"w{w}-")]
            assert own == [f"w{w}-{i}" for i in range(per_writer)]
        window = await store.get_messages("shared")
        assert [m.text for m in window] == texts[-10:]

    drive(backend, context, scenario)
