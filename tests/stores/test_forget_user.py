"""`forget_user` on every built-in store: the user's conversations (named, owned by id, or known
to the recall index), their recall entries and working memory go; other users' stay."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from chatmemory import ConfigurationError, MessageWindowChatMemory, UserMessage
from chatmemory.forget import forget_user
from chatmemory.rag import HashingEmbeddingModel, InMemoryEmbeddingStore, key
from chatmemory.recall import SemanticRecall
from chatmemory.working import InMemoryRecordStore, WorkingMemory
from tests.conftest import POSTGRES_DSN, REDIS_URL

from .backends import Context, drive, store_params


@pytest.fixture
def context(tmp_path: Any) -> Context:
    return Context(tmp_path=tmp_path, unique=f"t{uuid.uuid4().hex[:12]}")


@pytest.mark.parametrize("backend", store_params(modes=("sync",)))
def test_forget_user_removes_everything_of_one_user_only(backend: Any, context: Context) -> None:
    async def scenario(_: Any, store: Any, mode: str) -> None:
        recall = SemanticRecall(HashingEmbeddingModel(), InMemoryEmbeddingStore(), scope="user")
        profiles: WorkingMemory[Any] = WorkingMemory(InMemoryRecordStore())
        for memory_id, user in [("ann:1", "ann"), ("ann:2", "ann"), ("bob:1", "bob"), ("x", "ann")]:
            memory = MessageWindowChatMemory(id=memory_id, max_messages=1, store=store)
            memory.add(UserMessage(f"{user} says my locker code is 4711"))
            memory.add(UserMessage("and more"))
            recall.index(store, memory_id, user_id=user if memory_id != "ann:2" else None)
        profiles.set("ann", "# Ann\n")
        profiles.set("bob", "# Bob\n")
        report = forget_user(
            "ann",
            store=store,
            owns=lambda mid: mid.startswith("ann:"),
            recall=recall,
            working_memory=profiles,
        )
        assert sorted(report.conversations) == ["ann:1", "ann:2", "x"]
        assert report.messages == 6
        assert report.recall_entries == 9  # each conversation: two messages and a mark
        assert report.working_memory == ["ann"]
        assert str(report) == (
            "forgot ann: 3 conversation(s) with 6 message(s), 9 recall index entries, "
            "1 working-memory record(s), 0 title(s)"
        )
        assert sorted(store.memory_ids()) == ["bob:1"]
        assert recall.recall(store, "ann:9", "locker code", user_id="ann") == []
        kept = recall.recall(store, "bob:9", "locker code", user_id="bob")
        assert kept
        assert {run.memory_id for run in kept} == {"bob:1"}
        assert recall.memory_ids_of("bob") == ["bob:1"]
        assert profiles.get("ann") is None
        assert profiles.get("bob") == "# Bob\n"
        again = forget_user(
            "ann",
            store=store,
            owns=lambda mid: mid.startswith("ann:"),
            recall=recall,
            working_memory=profiles,
            memory_ids=["x"],
        )
        assert not again
        assert (again.conversations, again.messages, again.recall_entries) == ([], 0, 0)

    drive(backend, context, scenario)


def test_named_conversations_are_forgotten_without_recall_or_working_memory() -> None:
    from chatmemory import InMemoryChatMemoryStore

    store = InMemoryChatMemoryStore()
    for memory_id in ("a", "b", "c"):
        MessageWindowChatMemory(id=memory_id, max_messages=5, store=store).add(UserMessage("hi"))
    report = forget_user("ann", store=store, memory_ids=["a", "b", "a", "never-used"])
    assert (report.conversations, report.recall_entries, report.working_memory) == (
        ["a", "b"],
        0,
        [],
    )
    assert store.memory_ids() == ["c"]
    assert str(report) == (
        "forgot ann: 2 conversation(s) with 2 message(s), 0 recall index entries, "
        "0 working-memory record(s), 0 title(s)"
    )


def test_bad_input_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="non-empty user id"):
        forget_user("", store=object())
    with pytest.raises(ConfigurationError, match="is not a chat-memory store"):
        forget_user("ann", store=object())


GYM = [
    "Hi there.",
    "Gym opening times?",
    "What about weekends?",
    "My locker code is 4711.",
    "Thanks.",
    "Bye.",
]


@pytest.mark.parametrize("backend", store_params(modes=("sync",)))
def test_a_forgotten_conversation_never_comes_back_from_another_process(
    backend: Any, context: Context
) -> None:
    """Process A recalls from ann:gym (and keeps its history); process B forgets ann; the id
    is used again, longer than before. A's next recall holds none of the old words: what A kept
    was for the conversation's earlier life."""

    async def scenario(_: Any, store: Any, mode: str) -> None:
        vectors = InMemoryEmbeddingStore()  # shared, as a file or a server is between processes
        a = SemanticRecall(HashingEmbeddingModel(), vectors, top_k=2, message_range=3)
        b = SemanticRecall(HashingEmbeddingModel(), vectors)
        memory = MessageWindowChatMemory(id="ann:gym", max_messages=2, store=store)
        for text in GYM:
            memory.add(UserMessage(text))
        a.index(store, "ann:gym", user_id="ann")
        [before] = a.recall(store, "ann:gym", "what is my locker code", user_id="ann")[:1]
        assert "4711" in a.block([before])

        report = forget_user("ann", store=store, recall=b)
        assert report.conversations == ["ann:gym"]
        assert a.recall(store, "ann:gym", "what is my locker code") == []

        again = MessageWindowChatMemory(id="ann:gym", max_messages=2, store=store)
        for n in range(len(GYM) + 2):
            again.add(UserMessage(f"New message {n} about the pool."))
        a.index(store, "ann:gym", user_id="ann")
        found = a.recall(store, "ann:gym", "what is my locker code")
        block = a.block(found)
        assert "4711" not in block
        assert "Gym opening" not in block
        assert found
        recalled = [m for f in found for m in f.messages]
        assert all(isinstance(m, UserMessage) and "New message" in m.text for m in recalled)
        assert sorted(s for f in found for s in f.seqs) == sorted(
            {s for f in found for s in f.seqs}
        )

    drive(backend, context, scenario)


@pytest.mark.parametrize("backend", store_params(modes=("sync",)))
def test_clearing_a_conversation_leaves_nothing_of_it_to_recall(
    backend: Any, context: Context
) -> None:
    """`clear()` starts a new life of the id: the first index after it removes what the index
    held of the earlier one, and until then a recall never shows it."""

    async def scenario(_: Any, store: Any, mode: str) -> None:
        vectors = InMemoryEmbeddingStore()
        recall = SemanticRecall(HashingEmbeddingModel(), vectors, top_k=3, message_range=0)
        memory = MessageWindowChatMemory(id="c", max_messages=2, store=store)
        for text in GYM:
            memory.add(UserMessage(text))
        recall.index(store, "c")
        memory.clear()
        other = SemanticRecall(HashingEmbeddingModel(), vectors, top_k=3, message_range=0)
        for n in range(4):
            memory.add(UserMessage(f"Something else {n}."))
        for reader in (recall, other):  # one that kept the old life, one that never saw it
            assert "4711" not in reader.block(reader.recall(store, "c", "my locker code"))
        recall.index(store, "c")
        texts = [s.text for s in vectors.select(key("memory_id").eq("c")).values() if s]
        assert texts
        assert not any("4711" in text or "Gym" in text for text in texts)

    drive(backend, context, scenario)


def test_titles_go_with_the_conversations_even_one_being_made() -> None:
    from chatmemory import InMemoryChatMemoryStore
    from chatmemory.services import ConversationTitles
    from chatmemory.testing import ScriptedChatModel

    release = threading.Event()

    def slow_title(request: Any) -> str:
        release.wait(10)
        return "Ann's locker code"

    records = InMemoryRecordStore()
    titles = ConversationTitles(records, chat_model=ScriptedChatModel(slow_title))
    titles.set("ann:1", "Ann at the gym")
    store = InMemoryChatMemoryStore()
    for memory_id in ("ann:1", "ann:2", "bob:1"):
        MessageWindowChatMemory(id=memory_id, max_messages=5, store=store).add(UserMessage("hi"))
    titles.set("bob:1", "Bob")
    titles.after_turn("ann:2", "My locker code is 4711", "Noted.")  # made on a thread, slowly
    report = forget_user("ann", store=store, owns=lambda m: m.startswith("ann:"), titles=titles)
    release.set()
    titles.wait(10)
    assert report.titles == ["ann:1"]
    assert (titles.get("ann:1"), titles.get("ann:2"), titles.get("bob:1")) == (None, None, "Bob")
    assert "1 title(s)" in str(report)
    with pytest.raises(ConfigurationError, match="must be ConversationTitles"):
        forget_user("ann", store=store, titles=object())  # type: ignore[arg-type]


def _two_users(
    store: Any, records: Any, recall: SemanticRecall | None = None
) -> tuple[WorkingMemory[Any], Any]:
    """Ann and Bob, two conversations each, a profile and titles, all naming their secret."""
    from chatmemory.services import ConversationTitles
    from chatmemory.testing import ScriptedChatModel

    profiles: WorkingMemory[Any] = WorkingMemory(records)
    titles = ConversationTitles(records, chat_model=ScriptedChatModel(lambda r: "t"))
    secrets = {"ann": "zebracode4711", "bob": "walruscode5822"}
    for user in ("ann", "bob"):
        for chat in ("gym", "trip"):
            memory_id = f"{user}-conversation-{chat}"
            memory = MessageWindowChatMemory(id=memory_id, max_messages=2, store=store)
            for n in range(6):
                memory.add(UserMessage(f"{user} note {n}: my secret is {secrets[user]}"))
            if recall is not None:
                recall.index(store, memory_id, user_id=user)
            titles.set(memory_id, f"{user} {chat} {secrets[user]}")
        profiles.set(f"{user}-profile-key", f"# {user}\n{secrets[user]}\n")
    return profiles, titles


def test_on_sqlite_no_forgotten_word_or_id_is_left_in_the_files(tmp_path: Path) -> None:
    """Chat messages, recall index (with its full-text index), working memory and titles in
    one SQLite file: after the forget, neither the file nor its -wal holds the user's words or
    conversation ids, while the other user's are still there."""
    from chatmemory import SqliteChatMemoryStore
    from chatmemory.rag import SqliteEmbeddingStore
    from chatmemory.working import SqliteRecordStore

    path = tmp_path / "app.db"
    store = SqliteChatMemoryStore(path)
    vectors = SqliteEmbeddingStore(path)
    records = SqliteRecordStore(path)
    recall = SemanticRecall(HashingEmbeddingModel(), vectors, scope="user")
    profiles, titles = _two_users(store, records, recall)
    report = forget_user(
        "ann",
        store=store,
        recall=recall,
        working_memory=profiles,
        titles=titles,
        memory_ids=["ann-profile-key"],
    )
    assert (len(report.conversations), report.messages, report.unscrubbed) == (2, 12, [])
    assert report.working_memory == ["ann-profile-key"]
    data = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("app.db"))
    for gone in (b"zebracode4711", b"ann-conversation", b"ann-profile-key"):
        assert gone not in data
    for kept in (b"walruscode5822", b"bob-conversation"):
        assert kept in data
    assert not forget_user("ann", store=store, recall=recall, working_memory=profiles)
    for closing in (store, vectors, records):
        closing.close()


def _server_dump(backend_name: str, context: Context) -> str:
    """Every key and value (Redis) or every row of every table (PostgreSQL) the test wrote."""
    if backend_name.startswith("redis"):
        import redis

        from chatmemory.stores.redis import close_client
        from tests.redis_cluster import client as cluster_client

        from .backend_redis import key_prefix

        client = (
            cluster_client() if backend_name == "redis-cluster" else redis.Redis.from_url(REDIS_URL)
        )
        try:
            parts = []
            for name in client.scan_iter(match=key_prefix(context.unique) + "*", count=1000):
                parts.append(repr(name))
                parts.append(repr(client.dump(name)))
            return "\n".join(parts)
        finally:
            close_client(client)
    from psycopg import sql

    from .backend_postgres import admin

    schema = f"chatmemory_test_{context.unique}"
    tables = admin("SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,))
    rows = []
    for (table,) in tables:
        statement = sql.SQL("SELECT t::text FROM {} t").format(sql.Identifier(schema, table))
        rows += [row[0] for row in admin(statement)]
    return "\n".join(rows)


def _record_store(backend_name: str, context: Context) -> Any:
    if backend_name.startswith("redis"):
        from chatmemory.working.redis import RedisRecordStore
        from tests.redis_cluster import cluster_url

        from .backend_redis import key_prefix

        prefix = key_prefix(context.unique) + "working:"
        if backend_name == "redis-cluster":
            return RedisRecordStore(cluster_url(), prefix=prefix, cluster=True)
        return RedisRecordStore(REDIS_URL, prefix=prefix)
    from chatmemory.working.postgres import PostgresRecordStore

    return PostgresRecordStore(POSTGRES_DSN, schema=f"chatmemory_test_{context.unique}")


@pytest.mark.parametrize(
    "backend",
    store_params(lambda b: b.name in ("redis", "redis-cluster", "postgres"), modes=("sync",)),
)
def test_on_redis_and_postgres_no_key_or_row_holds_the_forgotten_user(
    backend: Any, context: Context
) -> None:
    """Chat messages, working memory and titles on the server: after the forget, no key, value
    or row holds the user's words or conversation ids; the other user's are all there."""

    async def scenario(_: Any, store: Any, mode: str) -> None:
        records = _record_store(backend[0].name, context)
        profiles, titles = _two_users(store, records)
        before = _server_dump(backend[0].name, context)
        assert "zebracode4711" in before
        report = forget_user(
            "ann",
            store=store,
            owns=lambda mid: mid.startswith("ann-"),
            working_memory=profiles,
            titles=titles,
            memory_ids=["ann-profile-key"],
        )
        assert (len(report.conversations), report.messages, len(report.titles)) == (2, 12, 2)
        after = _server_dump(backend[0].name, context)
        for gone in ("zebracode4711", "ann-conversation", "ann-profile-key"):
            assert gone not in after
        for kept in ("walruscode5822", "bob-conversation", "bob-profile-key"):
            assert kept in after
        close = getattr(records, "close", None)
        if close is not None:
            close()

    drive(backend, context, scenario)


@pytest.mark.parametrize("backend", store_params(modes=("async",)))
def test_aforget_user_forgets_on_async_stores_alike(backend: Any, context: Context) -> None:
    from chatmemory import AsyncMessageWindowChatMemory
    from chatmemory.forget import aforget_user
    from chatmemory.services import ConversationTitles
    from chatmemory.testing import ScriptedChatModel

    async def scenario(_: Any, store: Any, mode: str) -> None:
        recall = SemanticRecall(HashingEmbeddingModel(), InMemoryEmbeddingStore(), scope="user")
        records = InMemoryRecordStore()
        profiles: WorkingMemory[Any] = WorkingMemory(records)
        titles = ConversationTitles(records, chat_model=ScriptedChatModel(lambda r: "t"))
        for memory_id, user in [("ann:1", "ann"), ("ann:2", "ann"), ("bob:1", "bob")]:
            memory = AsyncMessageWindowChatMemory(id=memory_id, max_messages=1, store=store)
            await memory.add(UserMessage(f"{user} says my locker code is 4711"))
            await memory.add(UserMessage("and more"))
            await recall.aindex(store, memory_id, user_id=user)
            titles.set(memory_id, f"{user}'s chat")
        profiles.set("ann", "# Ann\n")
        report = await aforget_user(
            "ann", store=store, recall=recall, working_memory=profiles, titles=titles
        )
        assert (sorted(report.conversations), report.messages, report.recall_entries) == (
            ["ann:1", "ann:2"],
            4,
            6,
        )
        assert (report.working_memory, sorted(report.titles)) == (["ann"], ["ann:1", "ann:2"])
        assert await store.memory_ids() == ["bob:1"]
        assert (titles.get("bob:1"), profiles.get("ann")) == ("bob's chat", None)
        again = await aforget_user("ann", store=store, recall=recall, memory_ids=["ann:1"])
        assert not again
        with pytest.raises(ConfigurationError, match="non-empty user id"):
            await aforget_user("", store=store)

    drive(backend, context, scenario)


def test_aforget_user_takes_a_sync_store_too() -> None:
    import asyncio

    from chatmemory import InMemoryChatMemoryStore
    from chatmemory.forget import aforget_user

    store = InMemoryChatMemoryStore()
    MessageWindowChatMemory(id="ann:1", max_messages=5, store=store).add(UserMessage("hi"))
    report = asyncio.run(aforget_user("ann", store=store, owns=lambda m: m.startswith("ann:")))
    assert (report.conversations, store.memory_ids()) == (["ann:1"], [])
