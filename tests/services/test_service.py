"""AI services: declarations, the call flow, per-user memory, return types (LangChain4j's
AiServices checklist, research §5, each line a test here)."""

from __future__ import annotations

import abc
import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timezone
from typing import Annotated, Any, Protocol

import pytest

from chatmemory import (
    AiMessage,
    AsyncMessageWindowChatMemory,
    ChatMessage,
    ConfigurationError,
    ImageContent,
    InMemoryChatMemoryStore,
    MessageWindowChatMemory,
    ModelError,
    ModerationError,
    SqliteChatMemoryStore,
    SystemMessage,
    TextContent,
    UserMessage,
)
from chatmemory.models import Capability, ChatParameters, ChatRequest, ChatResponse, TokenUsage
from chatmemory.services import (
    AsyncTokenStream,
    ChatMemoryAccess,
    MemoryId,
    Result,
    TokenStream,
    UserName,
    V,
    ai_service,
    moderate,
    system_message,
    user_message,
)
from chatmemory.testing import ScriptedChatModel


def windows(store: Any = None, size: int = 50) -> Any:
    store = store if store is not None else InMemoryChatMemoryStore()
    return lambda memory_id: MessageWindowChatMemory(id=memory_id, max_messages=size, store=store)


def sent(model: ScriptedChatModel, index: int = -1) -> list[ChatMessage]:
    return list(model.requests[index].messages)


class Assistant(ChatMemoryAccess, Protocol):
    @system_message("You are the assistant of {{company}}.")
    def chat(
        self, user: Annotated[str, MemoryId], text: Annotated[str, UserMessage], company: str
    ) -> str: ...


# -- the example of the issue ------------------------------------------------------------------


def test_a_service_keeps_one_conversation_per_user() -> None:
    model = ScriptedChatModel(["hi alice", "hi bob", "again alice"])
    assistant = ai_service(Assistant, chat_model=model, chat_memory_provider=windows())

    assert assistant.chat("alice", "Hi", company="ACME") == "hi alice"
    assert assistant.chat("bob", "Hello", company="ACME") == "hi bob"
    assert assistant.chat("alice", "Still there?", company="ACME") == "again alice"

    system = SystemMessage("You are the assistant of ACME.")
    assert sent(model) == [
        system,
        UserMessage("Hi"),
        AiMessage("hi alice"),
        UserMessage("Still there?"),
    ]
    assert sent(model, 1) == [system, UserMessage("Hello")]
    assert assistant.get_chat_memory("bob").messages() == [
        system,
        UserMessage("Hello"),
        AiMessage("hi bob"),
    ]


def test_the_same_id_persists_across_service_objects_on_one_store(tmp_path: Any) -> None:
    with SqliteChatMemoryStore(tmp_path / "m.db") as store:
        first = ai_service(
            Assistant, chat_model=ScriptedChatModel(["one"]), chat_memory_provider=windows(store)
        )
        first.chat("alice", "Hi", company="ACME")
        model = ScriptedChatModel(["two"])
        second = ai_service(Assistant, chat_model=model, chat_memory_provider=windows(store))
        second.chat("alice", "And now?", company="ACME")
    assert sent(model)[1:] == [UserMessage("Hi"), AiMessage("one"), UserMessage("And now?")]


def test_blank_memory_ids_are_ids_and_none_is_refused() -> None:
    model = ScriptedChatModel(lambda request: "ok")
    assistant = ai_service(Assistant, chat_model=model, chat_memory_provider=windows())
    assistant.chat("   ", "b", company="X")
    assert assistant.get_chat_memory("   ").messages()[-2] == UserMessage("b")
    with pytest.raises(ConfigurationError, match=r"'user' marked MemoryId in Assistant\.chat must"):
        assistant.chat(None, "c", company="X")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="memory id must be a non-empty str"):
        assistant.chat("", "c", company="X")  # the memories' own rule
    assert len(model.requests) == 1


def test_int_and_uuid_memory_ids_become_str_and_other_types_are_refused() -> None:
    class Numbered(ChatMemoryAccess, Protocol):
        def chat(self, user: Annotated[int, MemoryId], text: str) -> str: ...

    service = ai_service(
        Numbered, chat_model=ScriptedChatModel(lambda r: "ok"), chat_memory_provider=windows()
    )
    service.chat(7, "hi")
    assert service.get_chat_memory("7").messages()[0] == UserMessage("hi")
    with pytest.raises(ConfigurationError, match="must be a str, an int or a UUID"):
        service.chat(1.5, "hi")  # type: ignore[arg-type]


# -- creation-time validation ------------------------------------------------------------------


def test_a_model_is_required() -> None:
    with pytest.raises(ConfigurationError, match="needs a model: pass chat_model"):
        ai_service(Assistant)


def test_the_declaration_must_be_a_protocol_or_an_abc() -> None:
    class Plain:
        def chat(self, text: str) -> str:
            return text

    with pytest.raises(ConfigurationError, match=r"typing\.Protocol or an abstract class"):
        ai_service(Plain, chat_model=ScriptedChatModel([]))
    with pytest.raises(ConfigurationError, match=r"typing\.Protocol or an abstract class"):
        ai_service("Assistant", chat_model=ScriptedChatModel([]))  # type: ignore[arg-type]


def test_memory_id_needs_a_memory_provider() -> None:
    with pytest.raises(
        ConfigurationError, match="marks a parameter MemoryId, but the service has no memory"
    ):
        ai_service(Assistant, chat_model=ScriptedChatModel([]))
    shared = MessageWindowChatMemory(max_messages=5)
    with pytest.raises(ConfigurationError, match="one shared chat_memory"):
        ai_service(Assistant, chat_model=ScriptedChatModel([]), chat_memory=shared)
    with pytest.raises(ConfigurationError, match="not both"):
        ai_service(
            Assistant,
            chat_model=ScriptedChatModel([]),
            chat_memory=shared,
            chat_memory_provider=windows(),
        )


def test_unknown_template_variables_are_found_when_the_service_is_created() -> None:
    class Typo(Protocol):
        @system_message("You work for {{compnay}}.")
        def chat(self, text: Annotated[str, UserMessage], company: str) -> str: ...

    with pytest.raises(
        ConfigurationError,
        match=r"system message of Typo.chat uses \{\{compnay\}\}.*V\('compnay'\)",
    ):
        ai_service(Typo, chat_model=ScriptedChatModel([]))


def test_a_method_without_a_user_message_is_refused_with_the_fix() -> None:
    class Ambiguous(Protocol):
        def chat(self, a: str, b: str) -> str: ...

    with pytest.raises(
        ConfigurationError, match=r"no user message: it has 2 parameters .*\(a, b\)"
    ):
        ai_service(Ambiguous, chat_model=ScriptedChatModel([]))

    class Nothing(Protocol):
        def chat(self) -> str: ...

    with pytest.raises(ConfigurationError, match="it has no parameter for it"):
        ai_service(Nothing, chat_model=ScriptedChatModel([]))


def test_two_user_messages_or_two_memory_ids_are_refused() -> None:
    class Twice(Protocol):
        @user_message("Tell me about {{topic}}")
        def chat(self, topic: Annotated[str, UserMessage]) -> str: ...

    with pytest.raises(ConfigurationError, match="use one"):
        ai_service(Twice, chat_model=ScriptedChatModel([]))

    class TwoIds(Protocol):
        def chat(
            self, a: Annotated[str, MemoryId], b: Annotated[str, MemoryId], text: str
        ) -> str: ...

    with pytest.raises(ConfigurationError, match="marks 2 parameters MemoryId"):
        ai_service(TwoIds, chat_model=ScriptedChatModel([]), chat_memory_provider=windows())


def test_result_must_be_parameterized() -> None:
    class Bare(Protocol):
        def chat(self, text: str) -> Result: ...  # type: ignore[type-arg]

    with pytest.raises(ConfigurationError, match=r"must be parameterized with a concrete type"):
        ai_service(Bare, chat_model=ScriptedChatModel([]))


def test_star_args_and_missing_return_annotations_are_refused() -> None:
    class Star(Protocol):
        def chat(self, *texts: str) -> str: ...

    with pytest.raises(ConfigurationError, match=r"takes \*texts"):
        ai_service(Star, chat_model=ScriptedChatModel([]))

    class Unannotated(Protocol):
        def chat(self, text: str): ...  # type: ignore[no-untyped-def]

    with pytest.raises(ConfigurationError, match="no return annotation"):
        ai_service(Unannotated, chat_model=ScriptedChatModel([]))


def test_a_declaration_without_methods_is_refused() -> None:
    class Empty(Protocol):
        def helper(self) -> str:
            return "not a stub"

    with pytest.raises(ConfigurationError, match="declares no method"):
        ai_service(Empty, chat_model=ScriptedChatModel([]))


def test_an_empty_template_is_refused() -> None:
    class Blank(Protocol):
        @system_message("  ")
        def chat(self, text: str) -> str: ...

    with pytest.raises(ConfigurationError, match="template is empty"):
        ai_service(Blank, chat_model=ScriptedChatModel([]))


# -- system and user messages -----------------------------------------------------------------


def test_the_method_system_message_beats_the_class_one_which_beats_the_provider() -> None:
    @system_message("class level")
    class Both(Protocol):
        @system_message("method level")
        def first(self, text: str) -> str: ...

        def second(self, text: str) -> str: ...

    model = ScriptedChatModel(lambda r: "ok")
    service = ai_service(Both, chat_model=model, system_message_provider=lambda mid: "provided")
    service.first("a")
    service.second("b")
    assert sent(model, 0)[0] == SystemMessage("method level")
    assert sent(model, 1)[0] == SystemMessage("class level")


def test_a_base_class_system_message_is_not_inherited_and_the_provider_fills_in() -> None:
    @system_message("base")
    class Base(Protocol):
        def chat(self, text: str) -> str: ...

    class Child(Base, Protocol):
        pass

    model = ScriptedChatModel(lambda r: "ok")
    seen: list[str] = []

    def provider(memory_id: str) -> str | None:
        seen.append(memory_id)
        return "provided {{text}}"

    ai_service(Child, chat_model=model, system_message_provider=provider).chat("x")
    assert sent(model)[0] == SystemMessage("provided x")
    assert seen == ["default"]
    ai_service(Child, chat_model=model, system_message_provider=lambda mid: None).chat("y")
    assert sent(model) == [UserMessage("y")]


def test_lines_are_joined_and_resources_load() -> None:
    class Lines(Protocol):
        @system_message(["one", "two"], delimiter=" | ")
        @user_message(from_resource="tests.services:prompt.txt")
        def chat(self, topic: str) -> str: ...

    model = ScriptedChatModel(lambda r: "ok")
    ai_service(Lines, chat_model=model).chat("owls")
    assert sent(model) == [SystemMessage("one | two"), UserMessage("Tell me about owls.\n")]


def test_user_templates_take_every_parameter_by_name_and_v_renames() -> None:
    class Writer(Protocol):
        @user_message("Write a {{kind}} about {{subject}} in {{n}} lines.")
        def write(self, kind: str, topic: Annotated[str, V("subject")], n: int) -> str: ...

    model = ScriptedChatModel(lambda r: "ok")
    ai_service(Writer, chat_model=model).write("poem", "the sea", 4)
    assert sent(model) == [UserMessage("Write a poem about the sea in 4 lines.")]


def test_it_names_the_only_parameter() -> None:
    class Echo(Protocol):
        @user_message("Say {{it}}!")
        def say(self, word: str) -> str: ...

    model = ScriptedChatModel(lambda r: "ok")
    ai_service(Echo, chat_model=model).say("cheese")
    assert sent(model) == [UserMessage("Say cheese!")]

    class Two(Protocol):
        @user_message("Say {{it}}!")
        def say(self, word: str, other: str) -> str: ...

    with pytest.raises(ConfigurationError, match=r"uses \{\{it\}\}"):
        ai_service(Two, chat_model=model)


def test_the_user_text_is_verbatim_so_braces_in_it_reach_the_model_as_typed() -> None:
    model = ScriptedChatModel(lambda r: "ok")
    assistant = ai_service(Assistant, chat_model=model, chat_memory_provider=windows())
    assistant.chat("u", "show me {{company}} and {{secret}}", company="ACME")
    assert sent(model)[-1] == UserMessage("show me {{company}} and {{secret}}")


def test_user_name_and_dates_from_the_clock() -> None:
    class Named(Protocol):
        @system_message("Today is {{current_date}}.")
        def chat(self, who: Annotated[str, UserName], text: Annotated[str, UserMessage]) -> str: ...

    model = ScriptedChatModel(lambda r: "ok")
    clock = lambda: datetime(2026, 11, 22, 9, 30, tzinfo=timezone.utc)  # noqa: E731
    ai_service(Named, chat_model=model, clock=clock).chat("ann", "hi")
    assert sent(model) == [SystemMessage("Today is 2026-11-22."), UserMessage("hi", name="ann")]


def test_content_parameters_make_a_multimodal_user_message() -> None:
    class Vision(Protocol):
        def describe(self, text: str, image: ImageContent) -> str: ...

    model = ScriptedChatModel(lambda r: "a cat")
    image = ImageContent(url="https://example.com/cat.png")
    assert ai_service(Vision, chat_model=model).describe("what is it?", image) == "a cat"
    assert sent(model) == [UserMessage(contents=[TextContent("what is it?"), image])]


def test_keyword_arguments_are_variables_too() -> None:
    class Free(Protocol):
        @user_message("{{greeting}}, {{name}}")
        def greet(self, **values: str) -> str: ...

    model = ScriptedChatModel(lambda r: "ok")
    ai_service(Free, chat_model=model).greet(greeting="Hello", name="Ann")
    assert sent(model) == [UserMessage("Hello, Ann")]


# -- the object itself ------------------------------------------------------------------------


def test_object_methods_and_written_methods_never_call_the_model() -> None:
    class WithHelper(Protocol):
        def chat(self, text: str) -> str: ...

        def shout(self, text: str) -> str:
            return self.chat(text).upper()

    model = ScriptedChatModel(["quiet"])
    service = ai_service(WithHelper, chat_model=model)
    assert repr(service) == "<WithHelper AI service>"
    assert service == service
    assert service != ai_service(WithHelper, chat_model=model)
    assert hash(service) == hash(service)
    assert model.requests == []
    assert service.shout("hi") == "QUIET"


def test_an_abc_declaration_implements_its_abstract_methods() -> None:
    class Base(abc.ABC):
        @abc.abstractmethod
        def chat(self, text: str) -> str: ...

        def twice(self, text: str) -> str:
            return self.chat(text) + self.chat(text)

    service = ai_service(Base, chat_model=ScriptedChatModel(["a", "b"]))
    assert service.twice("x") == "ab"


def test_wrong_arguments_say_what_the_method_takes() -> None:
    assistant = ai_service(
        Assistant, chat_model=ScriptedChatModel([]), chat_memory_provider=windows()
    )
    with pytest.raises(TypeError, match=r"Assistant.chat\(...\): missing a required"):
        assistant.chat("alice", "hi")  # type: ignore[call-arg]


# -- memory per id ----------------------------------------------------------------------------


def test_get_and_evict_chat_memory() -> None:
    class Access(ChatMemoryAccess, Protocol):
        def chat(self, user: Annotated[str, MemoryId], text: str) -> str: ...

    made: list[str] = []
    store = InMemoryChatMemoryStore()

    def provider(memory_id: str) -> MessageWindowChatMemory:
        made.append(memory_id)
        return MessageWindowChatMemory(id=memory_id, max_messages=10, store=store)

    service = ai_service(
        Access, chat_model=ScriptedChatModel(["ok"]), chat_memory_provider=provider
    )
    service.chat("alice", "hi")
    memory = service.get_chat_memory("alice")
    assert memory.messages() == [UserMessage("hi"), AiMessage("ok")]
    assert service.evict_chat_memory("alice") is True
    assert service.evict_chat_memory("alice") is False
    assert service.get_chat_memory("alice").messages() == [UserMessage("hi"), AiMessage("ok")]
    assert made == ["alice", "alice"]  # evicting drops the object, not the stored messages


def test_get_chat_memory_without_memory_says_how_to_add_one() -> None:
    class Plain(Protocol):
        def chat(self, text: str) -> str: ...

    service = ai_service(Plain, chat_model=ScriptedChatModel([]))
    with pytest.raises(ConfigurationError, match="has no memory: pass chat_memory_provider"):
        service.get_chat_memory()  # type: ignore[attr-defined]


def test_a_provider_memory_with_another_id_is_an_error_naming_both() -> None:
    service = ai_service(
        Assistant,
        chat_model=ScriptedChatModel(["never"]),
        chat_memory_provider=lambda memory_id: MessageWindowChatMemory(max_messages=5),
    )
    with pytest.raises(ConfigurationError, match="id 'default' for memory id 'alice'"):
        service.chat("alice", "hi", company="X")


def test_a_provider_returning_no_memory_is_an_error() -> None:
    service = ai_service(
        Assistant,
        chat_model=ScriptedChatModel(["never"]),
        chat_memory_provider=lambda memory_id: "memory",  # type: ignore[arg-type,return-value]
    )
    with pytest.raises(ConfigurationError, match="must return a chat memory"):
        service.chat("alice", "hi", company="X")


def test_cached_memories_are_bounded_least_recently_used_first() -> None:
    made: list[str] = []
    store = InMemoryChatMemoryStore()

    def provider(memory_id: str) -> MessageWindowChatMemory:
        made.append(memory_id)
        return MessageWindowChatMemory(id=memory_id, max_messages=10, store=store)

    service = ai_service(
        Assistant,
        chat_model=ScriptedChatModel(lambda r: "ok"),
        chat_memory_provider=provider,
        max_cached_memories=2,
    )
    for user in ("a", "b", "a", "c", "a", "b"):
        service.chat(user, "hi", company="X")
    assert made == ["a", "b", "c", "b"]  # "b" was the least recently used when "c" came


def test_the_provider_runs_once_per_id_under_concurrent_first_calls() -> None:
    made: list[str] = []
    store = InMemoryChatMemoryStore()

    def provider(memory_id: str) -> MessageWindowChatMemory:
        made.append(memory_id)
        time.sleep(0.01)
        return MessageWindowChatMemory(id=memory_id, max_messages=100, store=store)

    service = ai_service(
        Assistant, chat_model=ScriptedChatModel(lambda r: "ok"), chat_memory_provider=provider
    )
    threads = [
        threading.Thread(target=service.chat, args=(f"user{i % 4}", "hi"), kwargs={"company": "X"})
        for i in range(32)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(made) == ["user0", "user1", "user2", "user3"]


def test_one_memory_ids_turns_run_one_at_a_time_and_other_ids_in_parallel() -> None:
    active: dict[str, int] = {}
    overlap: list[str] = []
    lock = threading.Lock()
    both_in = threading.Barrier(2, timeout=5)
    first: set[str] = set()

    def answer(request: ChatRequest) -> str:
        last = request.messages[-1]
        assert isinstance(last, UserMessage)
        text = last.text
        user = text.split(":")[0]
        with lock:
            active[user] = active.get(user, 0) + 1
            if active[user] > 1:
                overlap.append(user)
        if text.endswith(":0") and user not in first:
            first.add(user)
            both_in.wait()  # alice's and bob's first turns are in the model together
        time.sleep(0.002)
        with lock:
            active[user] -= 1
        return f"re {text}"

    store = InMemoryChatMemoryStore()
    service = ai_service(
        Assistant, chat_model=ScriptedChatModel(answer), chat_memory_provider=windows(store, 1000)
    )

    def talk(user: str) -> None:
        for i in range(10):
            service.chat(user, f"{user}:{i}", company="X")

    threads = [threading.Thread(target=talk, args=(u,)) for u in ("alice", "alice", "bob")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert overlap == []
    alice = service.get_chat_memory("alice").messages()[1:]
    assert len(alice) == 40  # two threads x 10 whole turns
    for asked, answered in zip(alice[::2], alice[1::2], strict=True):
        assert isinstance(asked, UserMessage)
        assert answered == AiMessage(f"re {asked.text}")


def test_a_shared_memory_serves_a_service_without_memory_ids() -> None:
    class Plain(Protocol):
        def chat(self, text: str) -> str: ...

    shared = MessageWindowChatMemory(max_messages=10)
    service = ai_service(Plain, chat_model=ScriptedChatModel(["a", "b"]), chat_memory=shared)
    service.chat("one")
    service.chat("two")
    assert [m.text for m in shared.messages()] == ["one", "a", "two", "b"]  # type: ignore[union-attr]
    assert service.get_chat_memory() is shared  # type: ignore[attr-defined]


# -- the system message in memory ------------------------------------------------------------


def test_the_system_message_is_stored_once_and_a_new_one_replaces_it() -> None:
    class Moody(ChatMemoryAccess, Protocol):
        @system_message("Be {{mood}}.")
        def chat(
            self, user: Annotated[str, MemoryId], text: Annotated[str, UserMessage], mood: str
        ) -> str: ...

    service = ai_service(
        Moody, chat_model=ScriptedChatModel(lambda r: "ok"), chat_memory_provider=windows()
    )
    service.chat("u", "one", mood="kind")
    service.chat("u", "two", mood="kind")
    assert [type(m).__name__ for m in service.get_chat_memory("u").messages()] == [
        "SystemMessage",
        "UserMessage",
        "AiMessage",
        "UserMessage",
        "AiMessage",
    ]
    service.chat("u", "three", mood="brief")
    window = service.get_chat_memory("u").messages()
    assert [m for m in window if isinstance(m, SystemMessage)] == [SystemMessage("Be brief.")]


def test_without_memory_the_request_is_the_system_and_user_message() -> None:
    class Plain(Protocol):
        @system_message("sys")
        def chat(self, text: str) -> str: ...

    model = ScriptedChatModel(["a", "b"])
    service = ai_service(Plain, chat_model=model)
    service.chat("one")
    service.chat("two")
    assert sent(model) == [SystemMessage("sys"), UserMessage("two")]


def test_the_request_is_the_window_with_the_turn_added() -> None:
    model = ScriptedChatModel(lambda r: "ok")
    service = ai_service(Assistant, chat_model=model, chat_memory_provider=windows(size=3))
    for text in ("one", "two", "three"):
        service.chat("u", text, company="X")
    assert sent(model) == [
        SystemMessage("You are the assistant of X."),
        AiMessage("ok"),
        UserMessage("three"),
    ]


# -- atomic turns -----------------------------------------------------------------------------


def test_a_failed_call_leaves_the_memory_as_it_was() -> None:
    model = ScriptedChatModel(["ok", ModelError("busy", retriable=True)])
    service = ai_service(Assistant, chat_model=model, chat_memory_provider=windows())
    service.chat("u", "one", company="X")
    before = service.get_chat_memory("u").messages()
    with pytest.raises(ModelError, match="busy"):
        service.chat("u", "two", company="X")
    assert service.get_chat_memory("u").messages() == before


def test_keep_user_message_on_error_stores_the_user_message_alone() -> None:
    model = ScriptedChatModel([ModelError("busy", retriable=True)])
    service = ai_service(
        Assistant, chat_model=model, chat_memory_provider=windows(), keep_user_message_on_error=True
    )
    with pytest.raises(ModelError):
        service.chat("u", "one", company="X")
    assert service.get_chat_memory("u").messages() == [
        SystemMessage("You are the assistant of X."),
        UserMessage("one"),
    ]


def test_a_turn_is_one_commit() -> None:
    store = InMemoryChatMemoryStore()
    commits: list[int] = []
    original = store.commit_window

    def counting(*args: Any, **kwargs: Any) -> Any:
        commits.append(len(kwargs["append"]))
        return original(*args, **kwargs)

    store.commit_window = counting  # type: ignore[method-assign]
    service = ai_service(
        Assistant, chat_model=ScriptedChatModel(lambda r: "ok"), chat_memory_provider=windows(store)
    )
    service.chat("u", "one", company="X")
    service.chat("u", "two", company="X")
    assert commits == [3, 2]  # system + user + answer, then user + answer


# -- return types -----------------------------------------------------------------------------


class Kinds(Protocol):
    def text(self, text: str) -> str: ...

    def message(self, text: str) -> AiMessage: ...

    def response(self, text: str) -> ChatResponse: ...

    def nothing(self, text: str) -> None: ...

    def result(self, text: str) -> Result[str]: ...


def test_return_kinds() -> None:
    usage = TokenUsage(10, 5)
    answer = ChatResponse(ai_message=AiMessage("hey"), token_usage=usage, model_name="m")
    service = ai_service(Kinds, chat_model=ScriptedChatModel(lambda r: answer))
    assert service.text("x") == "hey"
    assert service.message("x") == AiMessage("hey")
    assert service.response("x") is answer
    service.nothing("x")
    result = service.result("x")
    assert result.content == "hey"
    assert result.token_usage == TokenUsage(10, 5, 15)
    assert result.final_response is answer
    assert result.intermediate_responses == ()
    assert result.tool_executions == ()
    assert result.sources == ()


def test_parameters_reach_every_request() -> None:
    model = ScriptedChatModel(lambda r: "ok")
    parameters = ChatParameters(temperature=0.0, max_output_tokens=20)
    ai_service(Kinds, chat_model=model, parameters=parameters).text("x")
    assert model.requests[0].parameters == parameters


def test_a_model_with_only_stream_serves_plain_methods() -> None:
    class StreamOnly:
        capabilities = ScriptedChatModel([]).capabilities

        def __init__(self) -> None:
            self.inner = ScriptedChatModel(["streamed answer"])

        def stream(self, request: ChatRequest) -> Iterator[Any]:
            return self.inner.stream(request)

    assert ai_service(Kinds, chat_model=StreamOnly()).text("x") == "streamed answer"


def test_methods_that_need_a_missing_model_method_are_refused() -> None:
    class ChatOnly:
        capabilities: frozenset[Capability] = frozenset()

        def chat(self, request: ChatRequest) -> ChatResponse:
            raise AssertionError

    class Streams(Protocol):
        def stream(self, text: str) -> Iterator[str]: ...

    with pytest.raises(ConfigurationError, match=r"Streams.stream needs a model with stream\(\)"):
        ai_service(Streams, chat_model=ChatOnly())


# -- streaming --------------------------------------------------------------------------------


class Streamer(ChatMemoryAccess, Protocol):
    def words(self, user: Annotated[str, MemoryId], text: str) -> Iterator[str]: ...

    def events(self, user: Annotated[str, MemoryId], text: str) -> TokenStream: ...


def test_a_text_stream_yields_the_answer_and_stores_the_turn_before_its_last_piece() -> None:
    service = ai_service(
        Streamer,
        chat_model=ScriptedChatModel(["one two three"]),
        chat_memory_provider=windows(),
    )
    stream = service.words("u", "count")
    memory = service.get_chat_memory("u")
    pieces = []
    stored = []
    for piece in stream:
        pieces.append(piece)
        stored.append(memory.messages())
    assert "".join(pieces) == "one two three"
    assert len(pieces) > 1
    # nothing is stored before the answer is complete; its last piece comes once it is stored
    assert all(seen == [] for seen in stored[:-1])
    assert stored[-1] == [UserMessage("count"), AiMessage("one two three")]


def test_an_abandoned_stream_stores_nothing() -> None:
    service = ai_service(
        Streamer,
        chat_model=ScriptedChatModel(["one two three", "next"]),
        chat_memory_provider=windows(),
    )
    stream = service.words("u", "count")
    assert next(stream) == "one "
    stream.close()  # type: ignore[attr-defined]
    assert service.get_chat_memory("u").messages() == []
    assert list(service.words("u", "again")) == ["next"]  # the id's turn lock was released


def test_a_token_stream_gives_events_and_then_the_result() -> None:
    answer = ChatResponse(
        ai_message=AiMessage("fine thanks", thinking="be nice"), token_usage=TokenUsage(3, 2)
    )
    service = ai_service(
        Streamer, chat_model=ScriptedChatModel([answer]), chat_memory_provider=windows()
    )
    stream = service.events("u", "how are you")
    with pytest.raises(RuntimeError, match="has not completed"):
        _ = stream.result
    kinds = [type(event).__name__ for event in stream]
    assert kinds == [
        "PartialThinking",
        "PartialThinking",
        "PartialText",
        "PartialText",
        "ChatResponse",
    ]
    assert stream.result.content == "fine thanks"
    assert stream.result.token_usage == TokenUsage(3, 2)
    with pytest.raises(RuntimeError, match="iterated once"):
        iter(stream)


# -- async ------------------------------------------------------------------------------------


class AsyncAssistant(Protocol):
    @system_message("sys")
    async def chat(self, user: Annotated[str, MemoryId], text: str) -> str: ...

    def words(self, user: Annotated[str, MemoryId], text: str) -> AsyncIterator[str]: ...

    def events(self, user: Annotated[str, MemoryId], text: str) -> AsyncTokenStream: ...


def test_async_methods_run_on_async_memories() -> None:
    store = InMemoryChatMemoryStore()

    def provider(memory_id: str) -> AsyncMessageWindowChatMemory:
        from chatmemory import AsyncInMemoryChatMemoryStore

        return AsyncMessageWindowChatMemory(
            id=memory_id, max_messages=10, store=AsyncInMemoryChatMemoryStore(store=store)
        )

    model = ScriptedChatModel(["hello", "one two", "three four"])
    service = ai_service(AsyncAssistant, chat_model=model, chat_memory_provider=provider)

    async def main() -> None:
        assert await service.chat("u", "hi") == "hello"
        assert [p async for p in service.words("u", "count")] == ["one ", "two"]
        stream = service.events("u", "more")
        events = [e async for e in stream]
        assert isinstance(events[-1], ChatResponse)
        assert stream.result.content == "three four"

    asyncio.run(main())
    assert [e.message.text for e in store.history("u")][1:] == [  # type: ignore[union-attr]
        "hi",
        "hello",
        "count",
        "one two",
        "more",
        "three four",
    ]


def test_async_methods_run_a_sync_memory_and_a_sync_model_on_threads(tmp_path: Any) -> None:
    class ChatOnly:
        capabilities: frozenset[Capability] = frozenset()

        def __init__(self) -> None:
            self.threads: set[int] = set()

        def chat(self, request: ChatRequest) -> ChatResponse:
            self.threads.add(threading.get_ident())
            return ChatResponse(ai_message=AiMessage("from a thread"))

    class AsyncOnly(Protocol):
        async def chat(self, user: Annotated[str, MemoryId], text: str) -> str: ...

    model = ChatOnly()
    with SqliteChatMemoryStore(tmp_path / "m.db") as store:
        service = ai_service(AsyncOnly, chat_model=model, chat_memory_provider=windows(store))
        assert asyncio.run(service.chat("u", "hi")) == "from a thread"
        assert store.get_messages("u") == [UserMessage("hi"), AiMessage("from a thread")]
    assert threading.get_ident() not in model.threads


def test_async_calls_for_one_id_run_one_at_a_time() -> None:
    active = 0
    peak = 0

    class Slow:
        capabilities: frozenset[Capability] = frozenset()

        async def achat(self, request: ChatRequest) -> ChatResponse:
            nonlocal active, peak
            active += 1
            peak = max(peak, active)
            await asyncio.sleep(0.005)
            active -= 1
            return ChatResponse(ai_message=AiMessage("ok"))

    class AsyncOnly(ChatMemoryAccess, Protocol):
        async def chat(self, user: Annotated[str, MemoryId], text: str) -> str: ...

    service = ai_service(AsyncOnly, chat_model=Slow(), chat_memory_provider=windows())

    async def main() -> None:
        await asyncio.gather(*(service.chat("same", str(i)) for i in range(8)))
        assert peak == 1
        await asyncio.gather(*(service.chat(f"user{i}", "x") for i in range(8)))

    asyncio.run(main())
    assert peak == 8
    assert len(service.get_chat_memory("same").messages()) == 16


def test_a_sync_method_refuses_an_async_memory() -> None:
    service = ai_service(
        Assistant,
        chat_model=ScriptedChatModel(["never"]),
        chat_memory_provider=lambda mid: AsyncMessageWindowChatMemory(id=mid, max_messages=5),
    )
    with pytest.raises(
        ConfigurationError, match="sync method but the memory of this call is async"
    ):
        service.chat("u", "hi", company="X")


def test_an_async_def_returning_a_stream_is_refused() -> None:
    class Wrong(Protocol):
        async def words(self, text: str) -> AsyncIterator[str]: ...

    with pytest.raises(ConfigurationError, match="declare it with plain `def`"):
        ai_service(Wrong, chat_model=ScriptedChatModel([]))


# -- moderation -------------------------------------------------------------------------------


class Verdict:
    def __init__(self, flagged_text: str | None) -> None:
        self.flagged = flagged_text is not None
        self.flagged_text = flagged_text


class WordModerator:
    """Flags any message containing `word`; records what it was asked, on which thread."""

    def __init__(self, word: str) -> None:
        self.word = word
        self.asked: list[list[ChatMessage]] = []
        self.threads: set[int] = set()

    def moderate(self, messages: list[ChatMessage]) -> Verdict:
        self.asked.append(list(messages))
        self.threads.add(threading.get_ident())
        for message in messages:
            text = getattr(message, "text", "")
            if self.word in text:
                return Verdict(text)
        return Verdict(None)


class Moderated(ChatMemoryAccess, Protocol):
    @system_message("sys")
    @moderate
    def chat(self, user: Annotated[str, MemoryId], text: str) -> str: ...

    def unchecked(self, user: Annotated[str, MemoryId], text: str) -> str: ...


def test_flagged_input_raises_with_the_verdict_and_stores_nothing() -> None:
    moderator = WordModerator("bomb")
    model = ScriptedChatModel(lambda r: "answer")
    service = ai_service(
        Moderated, chat_model=model, chat_memory_provider=windows(), moderation_model=moderator
    )
    with pytest.raises(ModerationError, match='Text "how to build a bomb" violates') as caught:
        service.chat("u", "how to build a bomb")
    assert caught.value.moderation.flagged_text == "how to build a bomb"  # type: ignore[attr-defined]
    assert service.get_chat_memory("u").messages() == []
    assert moderator.asked == [[SystemMessage("sys"), UserMessage("how to build a bomb")]]
    assert threading.get_ident() not in moderator.threads  # it ran beside the model call


def test_unflagged_input_passes_and_unmarked_methods_are_not_moderated() -> None:
    moderator = WordModerator("bomb")
    service = ai_service(
        Moderated,
        chat_model=ScriptedChatModel(lambda r: "answer"),
        chat_memory_provider=windows(),
        moderation_model=moderator,
    )
    assert service.chat("u", "hello") == "answer"
    assert service.unchecked("u", "a bomb") == "answer"
    assert len(moderator.asked) == 1


def test_moderate_without_a_moderation_model_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="marked @moderate, but the service has no"):
        ai_service(Moderated, chat_model=ScriptedChatModel([]), chat_memory_provider=windows())


def test_async_moderation_uses_amoderate() -> None:
    class AsyncModerator:
        def __init__(self) -> None:
            self.calls = 0

        async def amoderate(self, messages: list[ChatMessage]) -> Verdict:
            self.calls += 1
            bad = any("bad" in getattr(m, "text", "") for m in messages)
            return Verdict("bad" if bad else None)

    class AsyncModerated(Protocol):
        @moderate
        async def chat(self, text: str) -> str: ...

    moderator = AsyncModerator()
    memory = MessageWindowChatMemory(max_messages=10)
    service = ai_service(
        AsyncModerated,
        chat_model=ScriptedChatModel(lambda r: "ok"),
        chat_memory=memory,
        moderation_model=moderator,
    )
    assert asyncio.run(service.chat("fine")) == "ok"
    with pytest.raises(ModerationError):
        asyncio.run(service.chat("bad"))
    assert moderator.calls == 2
    assert memory.messages() == [UserMessage("fine"), AiMessage("ok")]


def test_a_streamed_flagged_answer_stores_nothing() -> None:
    class StreamModerated(ChatMemoryAccess, Protocol):
        @moderate
        def words(self, user: Annotated[str, MemoryId], text: str) -> Iterator[str]: ...

    service = ai_service(
        StreamModerated,
        chat_model=ScriptedChatModel(["some words"]),
        chat_memory_provider=windows(),
        moderation_model=WordModerator("bomb"),
    )
    with pytest.raises(ModerationError):
        list(service.words("u", "bomb please"))
    assert service.get_chat_memory("u").messages() == []


def test_chat_memory_access_without_memory_is_refused_at_creation() -> None:
    class Access(ChatMemoryAccess, Protocol):
        def chat(self, text: str) -> str: ...

    with pytest.raises(ConfigurationError, match="derives from ChatMemoryAccess, but the service"):
        ai_service(Access, chat_model=ScriptedChatModel([]))


def test_a_chat_parameters_argument_overrides_the_service_parameters_per_call() -> None:
    class Tunable(Protocol):
        def chat(self, text: str, parameters: ChatParameters | None = None) -> str: ...

    model = ScriptedChatModel(lambda r: "ok")
    service = ai_service(
        Tunable, chat_model=model, parameters=ChatParameters(temperature=0.5, max_output_tokens=9)
    )
    service.chat("a")
    service.chat("b", ChatParameters(temperature=0.0))
    assert [r.parameters for r in model.requests] == [
        ChatParameters(temperature=0.5, max_output_tokens=9),
        ChatParameters(temperature=0.0, max_output_tokens=9),
    ]
    assert sent(model) == [UserMessage("b")]  # not a template variable, not the user message
    with pytest.raises(ConfigurationError, match="'parameters' must be ChatParameters"):
        service.chat("c", {"temperature": 1})  # type: ignore[arg-type]
    alone = ScriptedChatModel(lambda r: "ok")
    ai_service(Tunable, chat_model=alone).chat("d", ChatParameters(seed=3))
    assert alone.requests[0].parameters == ChatParameters(seed=3)
