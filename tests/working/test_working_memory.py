"""Working memory: the record stores' compare-and-set on every backend, patches that never lose
what they do not name, concurrent updates that all land, and the model's tool through a service."""

from __future__ import annotations

import asyncio
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, Protocol

import pytest
from pydantic import BaseModel

from chatmemory import (
    AiMessage,
    AsyncMessageWindowChatMemory,
    ChatMessage,
    ConcurrentUpdateError,
    ConfigurationError,
    MemoryId,
    MessageWindowChatMemory,
    StoreError,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserId,
    UserMessage,
    ai_service,
    system_message,
)
from chatmemory.models import ChatRequest
from chatmemory.services import ChatMemoryAccess, ChatMemoryProvider
from chatmemory.testing import ScriptedChatModel
from chatmemory.tools import ToolArgumentsError, ToolContext, tool
from chatmemory.working import (
    DEFAULT_TEMPLATE,
    InMemoryRecordStore,
    RecordStore,
    SqliteRecordStore,
    WorkingMemory,
    merge_patch,
    replace_section,
)
from chatmemory.working.postgres import PostgresRecordStore
from chatmemory.working.redis import RedisRecordStore
from tests.conftest import POSTGRES_DSN, REDIS_URL, server_unavailable
from tests.redis_cluster import cluster_url

BACKENDS = ["memory", "sqlite", "redis", "redis-cluster", "postgres"]


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RecordStore]:
    unique = uuid.uuid4().hex[:10]
    if request.param == "memory":
        yield InMemoryRecordStore()
    elif request.param == "sqlite":
        opened = SqliteRecordStore(tmp_path / "records.db")
        yield opened
        opened.close()
    elif request.param.startswith("redis"):
        cluster = request.param == "redis-cluster"
        url = cluster_url() if cluster else REDIS_URL
        client = RedisRecordStore(url, prefix=f"chatmemory-test:{unique}:", cluster=cluster)
        try:
            client._redis.ping()
        except Exception as error:
            client.close()
            server_unavailable("Redis", str(error))
        yield client
        keys = client._redis.keys(f"{client.prefix}*")
        if keys:
            client._redis.delete(*keys)
        client.close()
    else:
        schema = f"chatmemory_test_{unique}"
        try:
            pg = PostgresRecordStore(POSTGRES_DSN, schema=schema, timeout=5)
        except StoreError as error:
            server_unavailable("PostgreSQL", str(error))
        yield pg
        with pg._pool.connection() as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
        pg.close()


def test_a_save_succeeds_only_on_the_version_it_read(store: RecordStore) -> None:
    assert type(store).__name__ in repr(store)
    assert store.load("alice") is None
    assert store.save("alice", "one", expected=0) == 1
    with pytest.raises(ConcurrentUpdateError, match="changed since version 0"):
        store.save("alice", "again", expected=0)
    with pytest.raises(ConcurrentUpdateError, match="changed since version 5"):
        store.save("alice", "stale", expected=5)
    assert store.save("alice", "two", expected=1) == 2
    record = store.load("alice")
    assert record is not None
    assert (record.text, record.version) == ("two", 2)
    assert store.load("bob") is None
    assert store.delete("alice")
    assert not store.delete("alice")
    assert store.load("alice") is None
    with pytest.raises(ConfigurationError, match="non-empty str"):
        store.load("")


class Profile(BaseModel):
    name: str | None = None
    city: str | None = None
    likes: list[str] = []
    visits: int = 0


def test_concurrent_patches_of_one_user_all_land(store: RecordStore) -> None:
    memory = WorkingMemory(store, schema=Profile)
    fields: list[Callable[[int], dict[str, object]]] = [
        lambda i: {"name": f"Alice {i}"},
        lambda i: {"city": f"City {i}"},
        lambda i: {"likes": [f"thing {i}"]},
        lambda i: {"visits": i},
    ]
    errors: list[BaseException] = []

    def work(change: Callable[[int], dict[str, object]]) -> None:
        try:
            for i in range(1, 6):
                memory.patch("alice", change(i))
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(f,)) for f in fields]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert memory.get("alice") == Profile(
        name="Alice 5", city="City 5", likes=["thing 5"], visits=5
    )
    record = store.load("alice")
    assert record is not None
    assert record.version == 20  # every patch, once


def test_concurrent_section_updates_all_land(store: RecordStore) -> None:
    memory: WorkingMemory[BaseModel] = WorkingMemory(store)
    titles = ["Name", "Location", "Goals", "Pets"]
    threads = [
        threading.Thread(
            target=lambda t=title: [memory.update_section("bob", t, f"{t} {i}") for i in range(5)]
        )
        for title in titles
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    text = memory.get("bob")
    assert isinstance(text, str)
    for title in titles:
        assert f"## {title}\n{title} 4\n" in text
    assert "## Occupation" in text  # untouched sections stay


# -- the patches ---------------------------------------------------------------------------------


def test_merge_patch_follows_rfc_7386() -> None:
    target = {"a": "b", "c": {"d": "e", "f": "g"}}
    assert merge_patch(target, {"a": "z", "c": {"f": None}}) == {"a": "z", "c": {"d": "e"}}
    assert merge_patch({"a": [1, 2]}, {"a": [3]}) == {"a": [3]}
    assert merge_patch({"a": 1}, {"b": {"c": None}}) == {"a": 1, "b": {}}
    assert merge_patch([1], {"a": 1}) == {"a": 1}
    assert merge_patch({"a": 1}, ["x"]) == ["x"]


def test_a_section_is_replaced_alone_or_added() -> None:
    text = "# User\n## Name\nAl\n## Goals\n- run\n### Soon\nswim\n"
    assert replace_section(text, "name", "Alice") == (
        "# User\n## Name\nAlice\n\n## Goals\n- run\n### Soon\nswim\n"
    )
    assert replace_section(text, "Goals", "- fly") == (
        "# User\n## Name\nAl\n## Goals\n- fly\n\n### Soon\nswim\n"
    )
    assert replace_section(text, "Pets", "a cat").endswith("swim\n\n## Pets\na cat\n")
    assert replace_section("", "Pets", "") == "## Pets\n"
    assert replace_section(text, "Goals", "").startswith("# User\n## Name\nAl\n## Goals\n\n")


def test_markdown_memory_reads_sets_and_forgets() -> None:
    memory: WorkingMemory[BaseModel] = WorkingMemory(
        InMemoryRecordStore(), template="# About\n## Name\n(unknown)\n## Mood\n"
    )
    assert memory.get("u") is None
    assert memory.text("u") == "# About\n## Name\n(unknown)\n## Mood\n"
    with pytest.raises(ToolArgumentsError, match="the template's placeholder for 'Name'"):
        memory.update_section("u", "Name", "(unknown)")
    with pytest.raises(ToolArgumentsError, match="`section` must name a section"):
        memory.update_section("u", " ", "x")
    with pytest.raises(ToolArgumentsError, match="`content` must be the section's text"):
        memory.update_section("u", "Mood", 3)  # type: ignore[arg-type]
    assert memory.get("u") is None  # refused updates store nothing
    memory.update_section("u", "Mood", "cheerful")
    assert memory.get("u") == "# About\n## Name\n(unknown)\n## Mood\ncheerful\n"
    memory.set("u", "# About\n## Name\nUma\n")
    assert memory.text("u") == "# About\n## Name\nUma\n"
    with pytest.raises(ConfigurationError, match="keeps Markdown text"):
        memory.set("u", {"name": "x"})
    with pytest.raises(ConfigurationError, match="keeps Markdown: change it with update_section"):
        memory.patch("u", {"a": 1})
    assert memory.forget("u")
    assert memory.get("u") is None
    assert "## Occupation" in WorkingMemory(InMemoryRecordStore()).text("x")
    assert DEFAULT_TEMPLATE.startswith("# User Information")


def test_structured_memory_patches_validates_and_refuses() -> None:
    memory = WorkingMemory(InMemoryRecordStore(), schema=Profile)
    assert memory.text("u") == "{}"
    assert memory.patch("u", {"name": "Uma", "likes": ["tea"]}) == Profile(
        name="Uma", likes=["tea"]
    )
    assert memory.patch("u", {"city": "Oslo", "name": None}) == Profile(city="Oslo", likes=["tea"])
    with pytest.raises(ToolArgumentsError, match=r"does not fit its schema: visits: .*nothing was"):
        memory.patch("u", {"visits": "many"})
    with pytest.raises(ToolArgumentsError, match="at least one field"):
        memory.patch("u", {})
    assert memory.get("u") == Profile(city="Oslo", likes=["tea"])
    memory.set("u", Profile(name="Ann"))
    memory.set("v", {"visits": 2})
    memory.set("w", '{"city": "Rome"}')
    assert memory.get("v") == Profile(visits=2)
    assert memory.get("w") == Profile(city="Rome")
    with pytest.raises(ConfigurationError, match="does not fit Profile"):
        memory.set("u", {"visits": "x"})
    with pytest.raises(ConfigurationError, match=r"does not fit Profile: .*nested too deeply"):
        memory.set("u", '{"likes": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(ConfigurationError, match="keeps JSON: change it with patch"):
        memory.update_section("u", "Name", "x")


def test_settings_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="a Markdown template or a schema, not both"):
        WorkingMemory(InMemoryRecordStore(), template="# x", schema=Profile)
    with pytest.raises(
        ConfigurationError, match=r"a pydantic model class or a JSON Schema \(a dict\)"
    ):
        WorkingMemory(InMemoryRecordStore(), schema=dict)
    with pytest.raises(ConfigurationError, match="non-empty Markdown"):
        WorkingMemory(InMemoryRecordStore(), template="  ")
    with pytest.raises(ConfigurationError, match="not a working-memory record store"):
        WorkingMemory(object())  # type: ignore[call-overload]
    with pytest.raises(ConfigurationError, match="`working_memory` must be a WorkingMemory"):
        ai_service(Assistant, chat_model=ScriptedChatModel([]), working_memory=object())  # type: ignore[arg-type]


def test_a_memory_that_always_loses_the_race_gives_up_with_a_clear_error() -> None:
    class Busy(InMemoryRecordStore):
        def save(self, key: str, text: str, *, expected: int) -> int:
            raise ConcurrentUpdateError("busy", store=self, memory_id=key)

    memory = WorkingMemory(Busy(), schema=Profile, max_attempts=3)
    with pytest.raises(
        ConcurrentUpdateError, match=r"changed the working memory of .* on every one of 3 tries"
    ):
        memory.patch("u", {"name": "x"})


# -- through a service ---------------------------------------------------------------------------


class Assistant(Protocol):
    @system_message("You help {{user}}.")
    def chat(self, user: Annotated[str, MemoryId], text: str) -> str: ...


def windows(memory_id: str) -> MessageWindowChatMemory:
    return MessageWindowChatMemory(id=memory_id, max_messages=20)


def call(arguments: str, name: str = "update_working_memory") -> AiMessage:
    return AiMessage(tool_execution_requests=[ToolExecutionRequest("w1", name, arguments)])


def test_the_model_sees_its_memory_and_patches_it_through_the_tool(tmp_path: Path) -> None:
    records = SqliteRecordStore(tmp_path / "chat.db")
    memory = WorkingMemory(records, schema=Profile, scope="memory")
    memory.set("alice", {"city": "Oslo"})
    model = ScriptedChatModel(
        [call('{"patch": {"name": "Alice", "likes": ["{{secret}}"]}}'), "Noted!", "Hi Alice."]
    )
    service = ai_service(
        Assistant,
        chat_model=model,
        chat_memory_provider=windows,
        working_memory=memory,
    )
    assert service.chat("alice", "I'm Alice and I like {{secret}}") == "Noted!"
    first = model.requests[0]
    assert isinstance(first.messages[0], SystemMessage)
    system = first.messages[0].text
    assert system.startswith("You help alice.\n\n<working_memory>\n")
    assert '{"name":null,"city":"Oslo","likes":[],"visits":0}' in system
    assert [t.name for t in first.tools] == ["update_working_memory"]
    assert memory.get("alice") == Profile(name="Alice", city="Oslo", likes=["{{secret}}"])
    assert service.chat("alice", "Who am I?") == "Hi Alice."
    (shown,) = [m for m in model.requests[2].messages if isinstance(m, SystemMessage)]
    assert shown is model.requests[2].messages[0]
    assert '"likes":["{{secret}}"]' in shown.text  # data, never rendered as a template
    records.close()


def test_a_refused_update_is_an_error_result_and_stores_nothing() -> None:
    memory = WorkingMemory(InMemoryRecordStore(), schema=Profile, scope="memory")
    model = ScriptedChatModel([call('{"patch": {"visits": "lots"}}'), "Sorry.", call("[1]"), "ok"])
    service = ai_service(
        Assistant, chat_model=model, chat_memory_provider=windows, working_memory=memory
    )
    assert service.chat("bob", "remember I visit lots") == "Sorry."
    result = model.requests[1].messages[-1]
    assert isinstance(result, ToolExecutionResultMessage)
    assert "does not fit its schema" in result.text
    assert memory.get("bob") is None
    assert service.chat("bob", "again") == "ok"
    result = model.requests[3].messages[-1]
    assert isinstance(result, ToolExecutionResultMessage)
    assert "must be a JSON object" in result.text


class DeepNotes(BaseModel):
    notes: dict[str, Any] = {}


def nested(depth: int) -> str:
    return '{"patch": {"notes": ' + '{"a": ' * depth + "1" + "}" * depth + "}}"


@pytest.mark.parametrize(
    "arguments",
    ["[" * 100_000 + "]" * 100_000, nested(100_000), nested(500)],
    ids=["an array 100k deep", "a patch 100k deep", "a patch 500 deep"],
)
def test_a_patch_nested_too_deeply_is_an_invalid_update_told_in_a_sentence(arguments: str) -> None:
    """Not the tool failing (RecursionError, pydantic's serialization depth), nothing stored."""
    memory = WorkingMemory(InMemoryRecordStore(), schema=DeepNotes, scope="memory")
    model = ScriptedChatModel([call(arguments), "Sorry."])
    service = ai_service(
        Assistant, chat_model=model, chat_memory_provider=windows, working_memory=memory
    )
    assert service.chat("deb", "remember this") == "Sorry."
    result = model.requests[1].messages[-1]
    assert isinstance(result, ToolExecutionResultMessage)
    assert result.is_error
    assert result.text.startswith('Invalid arguments for the tool "update_working_memory": ')
    assert "nested too deeply" in result.text
    assert len(result.text) < 400
    assert memory.get("deb") is None


def test_markdown_memory_through_an_async_service() -> None:
    import asyncio

    class AsyncAssistant(Protocol):
        async def chat(self, user: Annotated[str, MemoryId], text: str) -> str: ...

    memory: WorkingMemory[BaseModel] = WorkingMemory(InMemoryRecordStore(), scope="memory")
    model = ScriptedChatModel(
        [
            call('{"section": "Goals", "content": "- learn Rust"}'),
            "Good luck!",
            call("not json"),
            "?",
        ]
    )
    service = ai_service(
        AsyncAssistant,
        chat_model=model,
        chat_memory_provider=lambda mid: AsyncMessageWindowChatMemory(id=mid, max_messages=20),
        working_memory=memory,
    )
    assert asyncio.run(service.chat("carol", "I want to learn Rust")) == "Good luck!"
    system = model.requests[0].messages[0]
    assert isinstance(system, SystemMessage)
    assert system.text.startswith("<working_memory>\nThis is your working memory")
    text = memory.get("carol")
    assert isinstance(text, str)
    assert "## Goals\n- learn Rust\n" in text
    assert asyncio.run(service.chat("carol", "x")) == "?"
    result = model.requests[3].messages[-1]
    assert isinstance(result, ToolExecutionResultMessage)
    assert "the arguments are not valid JSON" in result.text


def test_record_stores_check_their_settings_and_report_failures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(StoreError, match="cannot open"):
        SqliteRecordStore(tmp_path / "missing" / "dir" / "x.db")
    opened = SqliteRecordStore()
    assert repr(opened) == "SqliteRecordStore(':memory:')"
    opened.close()
    with pytest.raises(ConfigurationError, match="a url or a client"):
        RedisRecordStore()
    import redis

    dead = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)
    given = RedisRecordStore(client=dead, prefix="p:")
    assert repr(given) == "RedisRecordStore(prefix='p:')"
    with pytest.raises(StoreError, match="cannot read the working memory of 'u'"):
        given.load("u")
    given.close()  # the application's client stays the application's
    dead.close()
    with pytest.raises(StoreError, match="cannot reach the working memory of 'p:'"):
        RedisRecordStore("redis://127.0.0.1:1/0", prefix="p:", cluster=True)
    with pytest.raises(ConfigurationError, match="`schema` is a SQL name"):
        PostgresRecordStore(POSTGRES_DSN, schema="no; drop")
    with pytest.raises(StoreError, match=r"cannot open public\.chatmemory_working_memory"):
        PostgresRecordStore("postgresql://nobody@127.0.0.1:1/none", timeout=0.5)
    monkeypatch.setitem(sys.modules, "redis", None)
    with pytest.raises(ImportError, match=r"pip install 'chatmemory\[redis\]'"):
        RedisRecordStore(REDIS_URL)
    monkeypatch.setitem(sys.modules, "psycopg_pool", None)
    with pytest.raises(ImportError, match=r"pip install 'chatmemory\[postgres\]'"):
        PostgresRecordStore(POSTGRES_DSN)


# -- the guard: updates that would wipe or shadow what is stored ----------------------------------

NAMED = "# User\n## Name\n- First:\n- Last:\n## Location\n"


def test_a_placeholder_with_other_whitespace_is_still_the_placeholder() -> None:
    memory: WorkingMemory[BaseModel] = WorkingMemory(InMemoryRecordStore(), template=NAMED)
    memory.update_section("u", "Name", "- First: Alice\n- Last:")
    for blank in ("-  First:\n-  Last:", "- First:  \n\n- Last:\t", "  -\tFirst:\n- Last:  "):
        with pytest.raises(ToolArgumentsError, match="the template's placeholder for 'Name'"):
            memory.update_section("u", "Name", blank)
    assert memory.get("u") == "# User\n## Name\n- First: Alice\n- Last:\n\n## Location\n"


def test_template_headings_sent_as_section_content_are_refused() -> None:
    memory: WorkingMemory[BaseModel] = WorkingMemory(InMemoryRecordStore())
    with pytest.raises(ToolArgumentsError) as refused:
        memory.update_section("u", "Name", DEFAULT_TEMPLATE)
    assert str(refused.value) == (
        "the content of section 'Name' holds headings (# User Information, ## Name, "
        "## Location, ## Occupation, ## Interests, ## Goals, ## Facts); send the text of "
        "'Name' alone, without headings, and change any other section with its own call of "
        "update_working_memory"
    )
    assert memory.get("u") is None


def test_a_heading_inside_section_content_does_not_shadow_the_stored_section() -> None:
    memory: WorkingMemory[BaseModel] = WorkingMemory(InMemoryRecordStore())
    memory.update_section("u", "Location", "Paris")
    with pytest.raises(ToolArgumentsError, match=r"holds headings \(## Location\)"):
        memory.update_section("u", "Name", "Alice\n## Location\nLyon")
    text = memory.get("u")
    assert isinstance(text, str)
    assert text.count("## Location") == 1
    assert "## Location\nParis\n" in text
    assert "Alice" not in text


def test_a_section_named_with_its_hashes_is_that_section() -> None:
    memory: WorkingMemory[BaseModel] = WorkingMemory(InMemoryRecordStore())
    memory.update_section("u", "## Goals", "- run")
    text = memory.get("u")
    assert isinstance(text, str)
    assert text.count("Goals") == 1
    assert "## Goals\n- run\n" in text
    with pytest.raises(ToolArgumentsError, match="`section` must name a section"):
        memory.update_section("u", "##", "x")
    with pytest.raises(ToolArgumentsError, match="one heading, on one line"):
        memory.update_section("u", "Goals\nFacts", "x")


# -- what the model sends, and what a record may be ----------------------------------------------


AS_U = ToolContext("chat", "u")
"""A tool call in conversation "chat" of user "u"."""


def test_a_patch_sent_without_its_wrapper_is_the_patch() -> None:
    memory = WorkingMemory(InMemoryRecordStore(), schema=Profile)
    tool = memory.tool()
    assert tool.specification.parameters["required"] == ("patch",)
    assert tool.execute('{"name": "Alice", "likes": ["tea"]}', AS_U).value == Profile(
        name="Alice", likes=["tea"]
    )
    tool.execute('{"patch": {"city": "Oslo"}}', AS_U)
    assert memory.get("u") == Profile(name="Alice", city="Oslo", likes=["tea"])
    with pytest.raises(ToolArgumentsError) as refused:
        tool.execute('{"memory": "Alice lives in Oslo"}', AS_U)
    assert str(refused.value) == (
        "the record has no field 'memory'; send a JSON merge patch of its fields (name, city, "
        'likes, visits), e.g. {"patch": {"name": ...}}; nothing was stored'
    )
    assert memory.get("u") == Profile(name="Alice", city="Oslo", likes=["tea"])


class Notes(BaseModel):
    patch: str | None = None
    topic: str | None = None


def test_a_record_with_a_field_named_like_the_wrapper_reads_both_forms() -> None:
    memory = WorkingMemory(InMemoryRecordStore(), schema=Notes)
    memory.tool().execute('{"patch": "v2"}', AS_U)  # not an object: the field
    memory.tool().execute('{"patch": {"topic": "tea"}}', AS_U)  # the wrapper
    assert memory.get("u") == Notes(patch="v2", topic="tea")


PROFILE_SCHEMA = {
    "title": "Profile",
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "city": {"type": "string"},
        "visits": {"type": "integer", "minimum": 0},
    },
    "additionalProperties": False,
}


def test_a_json_schema_dict_is_a_record_schema() -> None:
    memory = WorkingMemory(InMemoryRecordStore(), schema=PROFILE_SCHEMA)
    assert repr(memory).endswith(", schema=Profile, scope='user')")
    assert memory.text("u") == "{}"
    assert memory.patch("u", {"name": "Uma", "visits": 1}) == {"name": "Uma", "visits": 1}
    assert memory.patch("u", {"visits": None, "city": "Oslo"}) == {"name": "Uma", "city": "Oslo"}
    with pytest.raises(
        ToolArgumentsError,
        match=r"does not fit its schema: visits: -1 is less than the minimum of 0; nothing was",
    ):
        memory.patch("u", {"visits": -1})
    with pytest.raises(ToolArgumentsError, match=r"the record: Additional properties"):
        memory.patch("u", {"mood": "calm"})
    assert memory.get("u") == {"name": "Uma", "city": "Oslo"}
    memory.set("v", {"name": "Vi"})
    memory.set("w", '{"city": "Rome"}')
    assert (memory.get("v"), memory.get("w"), memory.get("x")) == (
        {"name": "Vi"},
        {"city": "Rome"},
        None,
    )
    with pytest.raises(ConfigurationError, match="does not fit Profile: visits: 'x' is not"):
        memory.set("v", {"visits": "x"})
    assert (
        '"minimum": 0'
        in memory.tool().specification.parameters["properties"]["patch"]["description"]
    )
    result = memory.tool().execute('{"name": "Wu"}', ToolContext("chat", "w"))
    assert result.value == {"name": "Wu", "city": "Rome"}
    assert "## " not in memory.instructions("w")


def test_a_json_schema_is_checked_when_the_memory_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigurationError, match=r"is not a valid JSON Schema: 12 is not valid"):
        WorkingMemory(InMemoryRecordStore(), schema={"type": 12})
    with pytest.raises(ConfigurationError, match="describes a JSON object"):
        WorkingMemory(InMemoryRecordStore(), schema={"type": "string"})
    monkeypatch.setitem(sys.modules, "jsonschema", None)
    with pytest.raises(ImportError, match=r"pip install 'chatmemory\[jsonschema\]'"):
        WorkingMemory(InMemoryRecordStore(), schema=PROFILE_SCHEMA)


# -- where the record goes: the request's first system message, never the stored one --------------


@system_message("You help {{user}}.")
class Modes(Protocol):
    def chat(self, user: Annotated[str, MemoryId], text: str) -> str: ...

    async def achat(self, user: Annotated[str, MemoryId], text: str) -> str: ...

    def words(self, user: Annotated[str, MemoryId], text: str) -> Iterator[str]: ...

    def awords(self, user: Annotated[str, MemoryId], text: str) -> AsyncIterator[str]: ...


MODES = ["sync", "async", "stream", "async stream"]


def ask(service: Modes, mode: str, user: str, text: str) -> str:
    """One call of `service` the way `mode` says."""

    async def joined(words: AsyncIterator[str]) -> str:
        return "".join([word async for word in words])

    if mode == "sync":
        return service.chat(user, text)
    if mode == "async":
        return asyncio.run(service.achat(user, text))
    if mode == "stream":
        return "".join(service.words(user, text))
    return asyncio.run(joined(service.awords(user, text)))


def modes_service(mode: str, model: ScriptedChatModel, memory: WorkingMemory[BaseModel]) -> Modes:
    provider: ChatMemoryProvider = windows
    if mode.startswith("async"):
        provider = lambda mid: AsyncMessageWindowChatMemory(id=mid, max_messages=20)  # noqa: E731
    return ai_service(Modes, chat_model=model, chat_memory_provider=provider, working_memory=memory)


def systems(request: ChatRequest) -> list[int]:
    """Where the request's system messages are."""
    return [i for i, m in enumerate(request.messages) if isinstance(m, SystemMessage)]


def first_text(request: ChatRequest) -> str:
    first = request.messages[0]
    assert isinstance(first, SystemMessage)
    return first.text


@pytest.mark.parametrize("mode", MODES)
def test_the_record_stays_in_the_first_system_message_as_it_changes(mode: str) -> None:
    memory: WorkingMemory[BaseModel] = WorkingMemory(InMemoryRecordStore(), scope="memory")
    model = ScriptedChatModel(
        [
            call('{"section": "Name", "content": "Alice"}'),
            "Hi Alice.",
            call('{"section": "Location", "content": "Oslo"}'),
            "Noted.",
            "You live in Oslo.",
        ]
    )
    service = modes_service(mode, model, memory)
    assert ask(service, mode, "alice", "I'm Alice") == "Hi Alice."
    assert ask(service, mode, "alice", "I live in Oslo") == "Noted."
    assert ask(service, mode, "alice", "Where do I live?") == "You live in Oslo."
    assert [systems(r) for r in model.requests] == [[0]] * 5
    texts = [first_text(r) for r in model.requests]
    assert all(t.startswith("You help alice.\n\n<working_memory>\n") for t in texts)
    assert "## Name\n## Location\n" in texts[0]  # the template, before anything was learned
    assert "## Name\nAlice\n" in texts[1]  # the model's next call in the turn sees its update
    assert "## Location\nOslo\n" in texts[3]
    assert "## Name\nAlice\n" in texts[4]
    assert "## Location\nOslo\n" in texts[4]
    # within a turn the model sees its call and the result; the stored turn holds neither
    assert kinds(model.requests[1]) == ["system", "user", "ai", "tool"]
    assert kinds(model.requests[3]) == ["system", "user", "ai", "user", "ai", "tool"]
    assert kinds(model.requests[4]) == ["system", "user", "ai", "user", "ai", "user"]
    assert memory_messages(service, mode, "alice") == [
        SystemMessage("You help alice."),
        UserMessage("I'm Alice"),
        AiMessage("Hi Alice."),
        UserMessage("I live in Oslo"),
        AiMessage("Noted."),
        UserMessage("Where do I live?"),
        AiMessage("You live in Oslo."),
    ]


def kinds(request: ChatRequest) -> list[str]:
    names = {
        "SystemMessage": "system",
        "UserMessage": "user",
        "AiMessage": "ai",
        "ToolExecutionResultMessage": "tool",
    }
    return [names[type(m).__name__] for m in request.messages]


def memory_messages(service: object, mode: str, memory_id: str) -> list[ChatMessage]:
    memory = service.get_chat_memory(memory_id)  # type: ignore[attr-defined]
    if mode.startswith("async"):
        return asyncio.run(memory.messages())
    return memory.messages()  # type: ignore[no-any-return]


def test_without_a_system_message_the_record_is_one_of_its_own_first() -> None:
    class Bare(ChatMemoryAccess, Protocol):
        def chat(self, user: Annotated[str, MemoryId], text: str) -> str: ...

    memory: WorkingMemory[BaseModel] = WorkingMemory(InMemoryRecordStore(), scope="memory")
    memory.update_section("bo", "Name", "Bo")
    model = ScriptedChatModel(["one", "two", "three"])
    service = ai_service(
        Bare,
        chat_model=model,
        chat_memory_provider=lambda mid: MessageWindowChatMemory(id=mid, max_messages=4),
        working_memory=memory,
    )
    for text in ("a", "b", "c"):
        service.chat("bo", text)
    last = model.requests[-1]
    # the block takes a place in the window: the oldest message makes room, in the request only
    assert [type(m).__name__ for m in last.messages] == [
        "SystemMessage",
        "UserMessage",
        "AiMessage",
        "UserMessage",
    ]
    assert first_text(last).startswith("<working_memory>\n")
    assert "## Name\nBo\n" in first_text(last)
    assert last.messages[1] == UserMessage("b")
    assert all(not isinstance(m, SystemMessage) for m in service.get_chat_memory("bo").messages())


def test_an_ordinary_changed_system_message_still_follows_the_window_rule() -> None:
    class Plain(ChatMemoryAccess, Protocol):
        def chat(self, user: Annotated[str, MemoryId], text: str) -> str: ...

    prompts = iter(["Be brief.", "Be verbose."])
    memory: WorkingMemory[BaseModel] = WorkingMemory(InMemoryRecordStore(), scope="memory")
    model = ScriptedChatModel(["ok", "okay"])
    service = ai_service(
        Plain,
        chat_model=model,
        chat_memory_provider=windows,
        system_message_provider=lambda _mid: next(prompts),
        working_memory=memory,
    )
    service.chat("cy", "hi")
    service.chat("cy", "again")
    # LangChain4j's rule: a changed system message is placed at the end of the window
    assert service.get_chat_memory("cy").messages() == [
        UserMessage("hi"),
        AiMessage("ok"),
        SystemMessage("Be verbose."),
        UserMessage("again"),
        AiMessage("okay"),
    ]
    second = model.requests[1]
    assert systems(second) == [2]
    system = second.messages[2]
    assert isinstance(system, SystemMessage)
    assert system.text.startswith("Be verbose.\n\n<working_memory>\n")


def test_a_service_without_chat_memory_still_shows_the_record() -> None:
    class Once(Protocol):
        @system_message("Answer.")
        def ask(self, text: str) -> str: ...

    memory: WorkingMemory[BaseModel] = WorkingMemory(InMemoryRecordStore(), scope="memory")
    memory.update_section("default", "Name", "Dee")
    model = ScriptedChatModel(["Hi Dee."])
    service = ai_service(Once, chat_model=model, working_memory=memory)
    assert service.ask("who am I?") == "Hi Dee."
    assert systems(model.requests[0]) == [0]
    assert first_text(model.requests[0]).startswith("Answer.\n\n<working_memory>\n")
    assert "## Name\nDee\n" in first_text(model.requests[0])


def test_the_stored_turn_keeps_other_tools_and_the_text_said_beside_a_record_update() -> None:
    @tool
    def weather(city: str) -> str:
        """The weather in `city`."""
        return f"sunny in {city}"

    memory: WorkingMemory[BaseModel] = WorkingMemory(InMemoryRecordStore(), scope="memory")
    both = AiMessage(
        "Let me check.",
        tool_execution_requests=[
            ToolExecutionRequest(
                "w1", "update_working_memory", '{"section": "Location", "content": "Oslo"}'
            ),
            ToolExecutionRequest("t1", "weather", '{"city": "Oslo"}'),
        ],
    )
    said = AiMessage(
        "Noted that.",
        tool_execution_requests=[
            ToolExecutionRequest(
                "w2", "update_working_memory", '{"section": "Name", "content": "Dan"}'
            )
        ],
    )
    model = ScriptedChatModel([both, said, "Sunny, Dan."])
    service = ai_service(
        Assistant,
        chat_model=model,
        chat_memory_provider=windows,
        working_memory=memory,
        tools=[weather],
    )
    assert service.chat("dan", "I'm Dan in Oslo: weather?") == "Sunny, Dan."
    assert kinds(model.requests[2])[-5:] == ["ai", "tool", "tool", "ai", "tool"]
    stored = service.get_chat_memory("dan").messages()  # type: ignore[attr-defined]
    assert stored[1:] == [
        UserMessage("I'm Dan in Oslo: weather?"),
        AiMessage(
            "Let me check.",
            tool_execution_requests=[ToolExecutionRequest("t1", "weather", '{"city": "Oslo"}')],
        ),
        ToolExecutionResultMessage("t1", "weather", "sunny in Oslo"),
        AiMessage("Noted that."),
        AiMessage("Sunny, Dan."),
    ]


# -- whose record: a user's, shared by their conversations (the default), or a conversation's -----


class Chats(Protocol):
    @system_message("You help {{user}}.")
    def chat(
        self, user: Annotated[str, UserId], chat: Annotated[str, MemoryId], text: str
    ) -> str: ...

    @system_message("You help {{user}}.")
    async def achat(
        self, user: Annotated[str, UserId], chat: Annotated[str, MemoryId], text: str
    ) -> str: ...


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_users_record_is_shared_by_all_their_conversations(mode: str) -> None:
    memory: WorkingMemory[BaseModel] = WorkingMemory(InMemoryRecordStore())
    assert memory.scope == "user"
    model = ScriptedChatModel(
        [call('{"section": "Name", "content": "Alice"}'), "Hi Alice.", "You are Alice.", "Who?"]
    )
    service = ai_service(
        Chats, chat_model=model, chat_memory_provider=windows, working_memory=memory
    )

    def chat(user: str, conversation: str, text: str) -> str:
        if mode == "sync":
            return service.chat(user, conversation, text)
        return asyncio.run(service.achat(user, conversation, text))

    assert chat("alice", "alice:1", "I'm Alice") == "Hi Alice."
    assert chat("alice", "alice:2", "Who am I?") == "You are Alice."
    second = model.requests[2]
    assert kinds(second) == ["system", "user"]  # another conversation, the same record
    assert "## Name\nAlice\n" in first_text(second)
    assert "kept across all of the user's conversations" in first_text(second)
    assert chat("bob", "bob:1", "Who am I?") == "Who?"
    assert "Alice" not in first_text(model.requests[3])
    text = memory.get("alice")
    assert isinstance(text, str)
    assert "## Name\nAlice\n" in text
    assert memory.get("alice:1") is None


def test_a_record_per_conversation_is_kept_by_memory_id() -> None:
    memory: WorkingMemory[BaseModel] = WorkingMemory(InMemoryRecordStore(), scope="memory")
    model = ScriptedChatModel([call('{"section": "Goals", "content": "- ski"}'), "Ok.", "?"])
    service = ai_service(
        Chats, chat_model=model, chat_memory_provider=windows, working_memory=memory
    )
    service.chat("alice", "alice:1", "I want to ski")
    service.chat("alice", "alice:2", "What do I want?")
    assert "- ski" not in first_text(model.requests[2])
    assert "kept for this conversation" in first_text(model.requests[2])
    assert memory.get("alice") is None
    assert "## Goals\n- ski\n" in str(memory.get("alice:1"))


def test_user_scope_without_a_user_id_is_refused_with_a_sentence() -> None:
    with pytest.raises(ConfigurationError) as refused:
        ai_service(
            Assistant,
            chat_model=ScriptedChatModel([]),
            chat_memory_provider=windows,
            working_memory=WorkingMemory(InMemoryRecordStore()),
        )
    assert str(refused.value) == (
        "Assistant.chat has no parameter marked UserId, but the working memory is per user "
        "(scope='user', the default: one record shared by all of a user's conversations): add "
        "one, e.g. `user: Annotated[str, UserId]`, or keep one record per conversation with "
        "WorkingMemory(..., scope='memory')"
    )
    memory: WorkingMemory[BaseModel] = WorkingMemory(InMemoryRecordStore())
    service = ai_service(
        Chats, chat_model=ScriptedChatModel([]), chat_memory_provider=windows, working_memory=memory
    )
    with pytest.raises(ConfigurationError, match=r"Chats.chat: the UserId \('user'\) is None"):
        service.chat(None, "c", "hi")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="`scope` is 'user' or 'memory', got 'thread'"):
        WorkingMemory(InMemoryRecordStore(), scope="thread")  # type: ignore[call-overload]
    with pytest.raises(ConfigurationError, match=r"per user \(scope='user'\).*user_id"):
        memory.tool().execute('{"section": "Name", "content": "x"}', ToolContext("c"))


def test_with_recall_the_record_comes_before_what_is_recalled_and_both_fit() -> None:
    from chatmemory import InMemoryChatMemoryStore, OpenAiTokenCountEstimator, TokenWindowChatMemory
    from chatmemory.rag import HashingEmbeddingModel, InMemoryEmbeddingStore
    from chatmemory.recall import SemanticRecall

    estimator = OpenAiTokenCountEstimator("gpt-4o-mini")
    memory: WorkingMemory[BaseModel] = WorkingMemory(InMemoryRecordStore())
    memory.update_section("ann", "Name", "Ann")
    store = InMemoryChatMemoryStore()

    def window(mid: str) -> TokenWindowChatMemory:
        return TokenWindowChatMemory(id=mid, max_tokens=250, estimator=estimator, store=store)

    model = ScriptedChatModel(lambda request: "OK.")
    service = ai_service(
        Chats,
        chat_model=model,
        chat_memory_provider=window,
        working_memory=memory,
        semantic_recall=SemanticRecall(HashingEmbeddingModel(), InMemoryEmbeddingStore()),
    )
    service.chat("ann", "ann:1", "My locker code is 4711.")
    for text in ["Clouds?", "Rain?", "Snow?", "Wind?", "Fog?", "Hail?", "Sleet?", "Sun?"] * 4:
        service.chat("ann", "ann:1", text)
    service.chat("ann", "ann:1", "What was my locker code?")
    last = model.requests[-1]
    assert systems(last) == [0]
    text = first_text(last)
    assert text.index("You help ann.") < text.index("<working_memory>") < text.index("<recalled>")
    assert "## Name\nAnn\n" in text
    assert "4711" in text
    assert window("ann:1").fits(last.messages)  # the window gave up its oldest messages for both
    assert last.messages[-1] == UserMessage("What was my locker code?")
