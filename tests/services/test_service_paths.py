"""AI services: option checks, structured output through the turn, streams' text views, mixed
sync and async turns on one id, user-written memories without `preview`."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Annotated, Any, Protocol

import pytest
from pydantic import BaseModel

from chatmemory import (
    AiMessage,
    AsyncMessageWindowChatMemory,
    ChatMessage,
    ConfigurationError,
    ImageContent,
    InMemoryChatMemoryStore,
    MessageWindowChatMemory,
    OutputParsingError,
    SystemMessage,
    TextContent,
    UserMessage,
)
from chatmemory.models import Capability, ChatRequest, ChatResponse
from chatmemory.services import (
    AsyncTokenStream,
    ChatMemoryAccess,
    MemoryId,
    Result,
    TokenStream,
    V,
    ai_service,
    moderate,
    system_message,
    user_message,
)
from chatmemory.testing import ScriptedChatModel


class Plain(Protocol):
    def chat(self, text: str) -> str: ...


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"output_retries": -1}, "`output_retries` must be an int >= 0"),
        ({"output_retries": True}, "`output_retries` must be an int >= 0"),
        ({"max_cached_memories": 0}, "`max_cached_memories` must be a positive int"),
        ({"parameters": {"temperature": 0}}, "`parameters` must be ChatParameters"),
    ],
)
def test_bad_options_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        ai_service(Plain, chat_model=ScriptedChatModel([]), **options)


def test_template_sources_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="a text or from_resource=, not both"):
        system_message("x", from_resource="tests.services:prompt.txt")
    with pytest.raises(ConfigurationError, match=r"must be 'package:path/to/file\.txt'"):
        system_message(from_resource="prompt.txt")
    with pytest.raises(ConfigurationError, match="takes a text, a list of lines"):
        user_message([1, 2])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="takes a text, a list of lines"):
        user_message()
    with pytest.raises(ConfigurationError, match="non-blank variable name"):
        V(" ")

    class FromTuple(Protocol):
        @user_message(from_resource=("tests.services", "prompt.txt"))
        def chat(self, topic: str) -> str: ...

    model = ScriptedChatModel(lambda r: "ok")
    ai_service(FromTuple, chat_model=model).chat("bees")
    assert model.requests[0].messages == (UserMessage("Tell me about bees.\n"),)

    class Missing(Protocol):
        @user_message(from_resource="tests.services:nope.txt")
        def chat(self, topic: str) -> str: ...

    with pytest.raises(ConfigurationError, match=r"cannot read the prompt template 'nope\.txt'"):
        ai_service(Missing, chat_model=model)


def test_a_class_user_template_serves_methods_without_one() -> None:
    @user_message("Summarize: {{text}}")
    class Summarizer(Protocol):
        def summary(self, text: str, style: str) -> str: ...

        @user_message("Title for: {{text}}")
        def title(self, text: str) -> str: ...

    model = ScriptedChatModel(lambda r: "ok")
    service = ai_service(Summarizer, chat_model=model)
    service.summary("long text", "brief")
    service.title("long text")
    assert [r.messages for r in model.requests] == [
        (UserMessage("Summarize: long text"),),
        (UserMessage("Title for: long text"),),
    ]


def test_content_only_methods_and_bad_content_values() -> None:
    class Vision(Protocol):
        def look(self, images: list[ImageContent]) -> str: ...

        def maybe(self, text: str, image: ImageContent | None = None) -> str: ...

    model = ScriptedChatModel(lambda r: "ok")
    service = ai_service(Vision, chat_model=model)
    a, b = ImageContent(url="https://x/a.png"), ImageContent(url="https://x/b.png")
    service.look([a, b])
    assert model.requests[-1].messages == (UserMessage(contents=[a, b]),)
    service.maybe("no image")
    assert model.requests[-1].messages == (UserMessage("no image"),)
    with pytest.raises(ConfigurationError, match="holds contents"):
        service.look(["not an image"])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="has no user message content"):
        service.look([])
    with pytest.raises(ConfigurationError, match=r"the user message \('text'\) is None"):
        service.maybe(None)  # type: ignore[arg-type]


def test_a_non_str_user_argument_is_sent_as_its_text() -> None:
    class Numbers(Protocol):
        def square(self, n: int) -> str: ...

    model = ScriptedChatModel(lambda r: "49")
    assert ai_service(Numbers, chat_model=model).square(7) == "49"
    assert model.requests[0].messages == (UserMessage("7"),)


def test_a_parameter_with_two_markers_or_two_fills_of_a_variable_is_refused() -> None:
    class Two(Protocol):
        def chat(self, a: Annotated[str, V("x"), V("y")]) -> str: ...

    with pytest.raises(ConfigurationError, match="carries more than one marker"):
        ai_service(Two, chat_model=ScriptedChatModel([]))

    class Clash(Protocol):
        @user_message("{{a}}")
        def chat(self, a: str, b: Annotated[str, V("a")]) -> str: ...

    with pytest.raises(ConfigurationError, match="both fill the template variable 'a'"):
        ai_service(Clash, chat_model=ScriptedChatModel([]))


def test_unresolvable_annotations_say_what_to_import() -> None:
    namespace: dict[str, Any] = {"Protocol": Protocol}
    exec("class Broken(Protocol):\n    def chat(self, text: 'Nowhere') -> str: ...\n", namespace)
    with pytest.raises(ConfigurationError, match=r"cannot read the annotations of Broken\.chat"):
        ai_service(namespace["Broken"], chat_model=ScriptedChatModel([]))


def test_static_and_class_methods_are_left_alone() -> None:
    class WithStatic(Protocol):
        def chat(self, text: str) -> str: ...

        @staticmethod
        def version() -> str:
            return "1"

    assert ai_service(WithStatic, chat_model=ScriptedChatModel([])).version() == "1"


def test_a_streaming_method_must_yield_text() -> None:
    class Numbers(Protocol):
        def stream(self, text: str) -> Iterator[int]: ...

    with pytest.raises(ConfigurationError, match="a streaming method yields text"):
        ai_service(Numbers, chat_model=ScriptedChatModel([]))


# -- structured output through the turn ------------------------------------------------------


class Person(BaseModel):
    name: str
    age: int


class Extractor(Protocol):
    def person(self, text: str) -> Person: ...

    def result(self, text: str) -> Result[Person]: ...


def test_a_model_with_json_schema_gets_the_response_format() -> None:
    model = ScriptedChatModel(['{"name": "Ann", "age": 31}'])
    assert ai_service(Extractor, chat_model=model).person("Ann is 31") == Person(name="Ann", age=31)
    request = model.requests[0]
    assert request.response_format is not None
    assert request.response_format.schema is not None
    assert request.messages == (UserMessage("Ann is 31"),)


def test_a_model_without_json_schema_gets_instructions_and_memory_keeps_the_text() -> None:
    model = ScriptedChatModel(
        ['{"name": "Ann", "age": 31}'], capabilities={Capability.STREAMING, Capability.TOOLS}
    )
    memory = MessageWindowChatMemory(max_messages=10)
    service = ai_service(Extractor, chat_model=model, chat_memory=memory)
    assert service.person("Ann is 31") == Person(name="Ann", age=31)
    sent = model.requests[0]
    assert sent.response_format is None
    [user] = sent.messages
    assert isinstance(user, UserMessage)
    assert user.text.startswith("Ann is 31\n")
    assert len(user.text) > len("Ann is 31\n")
    assert memory.messages()[0] == UserMessage("Ann is 31")  # stored as the user wrote it


def test_instructions_go_after_the_last_text_or_in_a_new_one() -> None:
    class Looker(Protocol):
        def who(self, image: ImageContent) -> Person: ...

    model = ScriptedChatModel(['{"name": "Bo", "age": 2}'], capabilities=set())
    image = ImageContent(url="https://x/bo.png")
    assert ai_service(Looker, chat_model=model).who(image) == Person(name="Bo", age=2)
    [user] = model.requests[0].messages
    assert isinstance(user, UserMessage)
    assert user.contents[0] == image
    assert isinstance(user.contents[1], TextContent)


def test_output_retries_ask_again_with_the_error_and_sum_the_usage() -> None:
    from chatmemory.models import TokenUsage

    answers = [
        ChatResponse(ai_message=AiMessage("Ann, 31"), token_usage=TokenUsage(10, 3)),
        ChatResponse(
            ai_message=AiMessage('{"name": "Ann", "age": 31}'), token_usage=TokenUsage(20, 5)
        ),
    ]
    model = ScriptedChatModel(answers)
    memory = MessageWindowChatMemory(max_messages=10)
    service = ai_service(Extractor, chat_model=model, chat_memory=memory, output_retries=1)
    result = service.result("Ann is 31")
    assert result.content == Person(name="Ann", age=31)
    assert result.token_usage == TokenUsage(30, 8, 38)
    assert result.intermediate_responses == (answers[0],)
    retry = model.requests[1].messages
    assert retry[:2] == (UserMessage("Ann is 31"), AiMessage("Ann, 31"))
    assert isinstance(retry[2], UserMessage)
    assert retry[2].text.startswith("Your answer could not be read")
    # the failed attempt and the correction are not stored
    assert memory.messages() == [UserMessage("Ann is 31"), AiMessage('{"name": "Ann", "age": 31}')]


def test_an_answer_that_does_not_parse_raises_and_stores_nothing() -> None:
    model = ScriptedChatModel(["not json", "still not"])
    memory = MessageWindowChatMemory(max_messages=10)
    service = ai_service(Extractor, chat_model=model, chat_memory=memory, output_retries=1)
    with pytest.raises(OutputParsingError) as caught:
        service.person("Ann is 31")
    assert caught.value.text == "still not"
    assert memory.messages() == []


# -- streams ----------------------------------------------------------------------------------


class Streams(Protocol):
    def events(self, text: str) -> TokenStream: ...

    def aevents(self, text: str) -> AsyncTokenStream: ...


def test_token_stream_text_views() -> None:
    service = ai_service(Streams, chat_model=ScriptedChatModel(["a b", "c d"]))
    stream = service.events("x")
    assert list(stream.text()) == ["a ", "b"]
    assert stream.result.content == "a b"

    async def main() -> None:
        stream = service.aevents("y")
        with pytest.raises(RuntimeError, match="has not completed"):
            _ = stream.result
        assert [t async for t in stream.text()] == ["c ", "d"]
        assert stream.result.content == "c d"
        with pytest.raises(RuntimeError, match="iterated once"):
            stream.__aiter__()

    asyncio.run(main())


def test_an_async_method_with_a_streaming_model_only() -> None:
    class StreamOnly:
        capabilities = frozenset(Capability)

        def __init__(self) -> None:
            self.inner = ScriptedChatModel(["streamed"])

        def astream(self, request: ChatRequest) -> AsyncIterator[Any]:
            return self.inner.astream(request)

    class AsyncPlain(Protocol):
        async def chat(self, text: str) -> str: ...

    assert asyncio.run(ai_service(AsyncPlain, chat_model=StreamOnly()).chat("x")) == "streamed"


# -- one id, sync and async turns at once -----------------------------------------------------


def test_sync_and_async_turns_on_one_id_take_turns() -> None:
    inside = threading.Event()
    release = threading.Event()
    order: list[str] = []

    class Gate:
        capabilities: frozenset[Capability] = frozenset()

        def chat(self, request: ChatRequest) -> ChatResponse:
            order.append("sync in")
            inside.set()
            release.wait(5)
            order.append("sync out")
            return ChatResponse(ai_message=AiMessage("sync"))

        async def achat(self, request: ChatRequest) -> ChatResponse:
            order.append("async")
            return ChatResponse(ai_message=AiMessage("async"))

    class Both(ChatMemoryAccess, Protocol):
        def chat(self, user: Annotated[str, MemoryId], text: str) -> str: ...

        async def achat(self, user: Annotated[str, MemoryId], text: str) -> str: ...

    store = InMemoryChatMemoryStore()
    service = ai_service(
        Both,
        chat_model=Gate(),
        chat_memory_provider=lambda mid: MessageWindowChatMemory(
            id=mid, max_messages=10, store=store
        ),
    )
    worker = threading.Thread(target=service.chat, args=("u", "first"))
    worker.start()
    assert inside.wait(5)

    async def main() -> str:
        task = asyncio.ensure_future(service.achat("u", "second"))
        await asyncio.sleep(0.05)
        assert not task.done()  # waiting for the sync turn of the same id
        release.set()
        return await task

    assert asyncio.run(main()) == "async"
    worker.join()
    assert order == ["sync in", "sync out", "async"]
    assert [m.text for m in service.get_chat_memory("u").messages()] == [
        "first",
        "sync",
        "second",
        "async",
    ]


def test_a_cancelled_async_wait_gives_the_lock_back() -> None:
    holding = threading.Event()
    release = threading.Event()

    class Gate:
        capabilities: frozenset[Capability] = frozenset()

        def chat(self, request: ChatRequest) -> ChatResponse:
            holding.set()
            release.wait(5)
            return ChatResponse(ai_message=AiMessage("ok"))

        async def achat(self, request: ChatRequest) -> ChatResponse:
            return ChatResponse(ai_message=AiMessage("ok"))

    class Both(Protocol):
        def chat(self, user: Annotated[str, MemoryId], text: str) -> str: ...

        async def achat(self, user: Annotated[str, MemoryId], text: str) -> str: ...

    service = ai_service(
        Both,
        chat_model=Gate(),
        chat_memory_provider=lambda mid: MessageWindowChatMemory(id=mid, max_messages=10),
    )
    worker = threading.Thread(target=service.chat, args=("u", "first"))
    worker.start()
    assert holding.wait(5)

    async def main() -> None:
        task = asyncio.ensure_future(service.achat("u", "cancelled"))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        release.set()
        await asyncio.to_thread(worker.join)
        assert await asyncio.wait_for(service.achat("u", "after"), 5) == "ok"

    asyncio.run(main())


# -- a user-written memory without preview ----------------------------------------------------


class ListMemory:
    """A ChatMemory written by a user: no preview, no eviction."""

    def __init__(self, memory_id: str) -> None:
        self.id = memory_id
        self.items: list[ChatMessage] = []

    def add(self, *messages: ChatMessage | Sequence[ChatMessage]) -> None:
        for m in messages:
            if isinstance(m, Sequence):
                self.items.extend(m)
            else:
                self.items.append(m)

    def messages(self) -> list[ChatMessage]:
        return list(self.items)

    def set(self, *messages: ChatMessage) -> None:
        self.items = list(messages)

    def clear(self) -> None:
        self.items = []


class AsyncListMemory(ListMemory):
    async def add(self, *messages: ChatMessage | Sequence[ChatMessage]) -> None:  # type: ignore[override]
        ListMemory.add(self, *messages)

    async def messages(self) -> list[ChatMessage]:  # type: ignore[override]
        return list(self.items)


def test_user_written_memories_without_preview_get_their_messages_plus_the_turn() -> None:
    class Users(Protocol):
        @system_message("sys")
        def chat(self, user: Annotated[str, MemoryId], text: str) -> str: ...

        @system_message("sys")
        async def achat(self, user: Annotated[str, MemoryId], text: str) -> str: ...

    memories: dict[str, ListMemory] = {}
    model = ScriptedChatModel(lambda r: "ok")

    def provider(mid: str) -> Any:
        memories[mid] = ListMemory(mid) if mid == "sync" else AsyncListMemory(mid)
        return memories[mid]

    service = ai_service(Users, chat_model=model, chat_memory_provider=provider)
    service.chat("sync", "hi")
    asyncio.run(service.achat("async", "hi"))
    assert model.requests[0].messages == (SystemMessage("sys"), UserMessage("hi"))
    assert (
        memories["sync"].items
        == memories["async"].items
        == [SystemMessage("sys"), UserMessage("hi"), AiMessage("ok")]
    )


def test_async_moderation_of_a_sync_moderation_model_runs_on_a_thread() -> None:
    class Verdict:
        flagged = False
        flagged_text = None

    class SyncModerator:
        def moderate(self, messages: list[ChatMessage]) -> Verdict:
            return Verdict()

    class AsyncModerated(Protocol):
        @moderate
        async def chat(self, text: str) -> str: ...

    service = ai_service(
        AsyncModerated,
        chat_model=ScriptedChatModel(["ok"]),
        moderation_model=SyncModerator(),
    )
    assert asyncio.run(service.chat("fine")) == "ok"


def test_a_failing_async_call_before_the_verdict_cancels_moderation() -> None:
    from chatmemory import ModelError

    class Slow:
        async def amoderate(self, messages: list[ChatMessage]) -> Any:
            await asyncio.sleep(10)

    class AsyncModerated(Protocol):
        @moderate
        async def chat(self, text: str) -> str: ...

    service = ai_service(
        AsyncModerated,
        chat_model=ScriptedChatModel([ModelError("down", retriable=True)]),
        moderation_model=Slow(),
    )

    async def main() -> None:
        with pytest.raises(ModelError):
            await asyncio.wait_for(service.chat("x"), 5)

    asyncio.run(main())


def test_async_memories_with_a_sync_only_model_in_async_methods() -> None:
    class ChatOnly:
        capabilities: frozenset[Capability] = frozenset()

        def chat(self, request: ChatRequest) -> ChatResponse:
            return ChatResponse(ai_message=AiMessage("ok"))

    class AsyncPlain(ChatMemoryAccess, Protocol):
        async def chat(self, user: Annotated[str, MemoryId], text: str) -> str: ...

    service = ai_service(
        AsyncPlain,
        chat_model=ChatOnly(),
        chat_memory_provider=lambda mid: AsyncMessageWindowChatMemory(id=mid, max_messages=4),
    )

    async def main() -> list[ChatMessage]:
        await service.chat("u", "hi")
        memory = service.get_chat_memory("u")
        return await memory.messages()  # type: ignore[no-any-return]

    assert asyncio.run(main()) == [UserMessage("hi"), AiMessage("ok")]
