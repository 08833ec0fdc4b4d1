"""Retrieval inside a service call: what memory keeps, what every model call of the turn sees,
sources, the answer without a model call, streams and async (research §5:
AiServicesRagChatMemoryBehaviorTest, and LangChain4j #3498/#4714, #1851, #660)."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Protocol

import pytest

from chatmemory import (
    AiMessage,
    ConfigurationError,
    MessageWindowChatMemory,
    ToolExecutionRequest,
    UserMessage,
)
from chatmemory.models import ChatRequest
from chatmemory.rag import Content, DefaultRetrievalAugmentor, Query, TextSegment
from chatmemory.services import (
    ChatMemoryAccess,
    MemoryId,
    Result,
    Retrieved,
    TokenStream,
    ai_service,
)
from chatmemory.testing import ScriptedChatModel
from tests.rag.doubles import Fixed
from tests.services.tooling import FnTool

AUGMENTED = "What is RRF?\n\nAnswer using the following information:\nRRF fuses ranks."


class Helpdesk(ChatMemoryAccess, Protocol):
    def ask(self, user: Annotated[str, MemoryId], text: str) -> Result[str]: ...

    async def aask(self, user: Annotated[str, MemoryId], text: str) -> str: ...

    def events(self, user: Annotated[str, MemoryId], text: str) -> TokenStream: ...


def service(model: ScriptedChatModel, **options: Any) -> Helpdesk:
    options.setdefault("content_retriever", Fixed("RRF fuses ranks."))
    return ai_service(
        Helpdesk,
        chat_model=model,
        chat_memory_provider=lambda mid: MessageWindowChatMemory(id=mid, max_messages=20),
        **options,
    )


def test_the_augmented_message_is_sent_and_stored_by_default() -> None:
    model = ScriptedChatModel(["By rank."])
    helpdesk = service(model)
    result = helpdesk.ask("u", "What is RRF?")
    assert result.content == "By rank."
    assert [s.text for s in result.sources] == ["RRF fuses ranks."]
    assert model.requests[0].messages == (UserMessage(AUGMENTED),)
    assert helpdesk.get_chat_memory("u").messages() == [
        UserMessage(AUGMENTED),
        AiMessage("By rank."),
    ]


def test_memory_can_keep_the_original_while_every_call_of_the_turn_sees_the_augmented() -> None:
    call = ToolExecutionRequest("c1", "lookup", "{}")
    model = ScriptedChatModel([AiMessage(tool_execution_requests=[call]), "By rank."])
    helpdesk = service(
        model, store_retrieved_content_in_memory=False, tools=[FnTool("lookup", lambda: "k=60")]
    )
    helpdesk.ask("u", "What is RRF?")
    for request in model.requests:  # the first call and the one after the tool
        assert request.messages[0] == UserMessage(AUGMENTED)
    stored = helpdesk.get_chat_memory("u").messages()
    assert stored[0] == UserMessage("What is RRF?")
    assert stored[-1] == AiMessage("By rank.")


def test_the_retriever_sees_the_memory_before_this_turn() -> None:
    retriever = Fixed("fact")
    helpdesk = service(ScriptedChatModel(["one", "two"]), content_retriever=retriever)
    helpdesk.ask("u", "first")
    helpdesk.ask("u", "second")
    first, second = retriever.queries
    assert first.metadata is not None
    assert first.metadata.chat_memory == ()
    assert first.metadata.memory_id == "u"
    assert second.metadata is not None
    assert second.metadata.chat_memory is not None
    assert [m.text for m in second.metadata.chat_memory] == [  # type: ignore[union-attr]
        "first\n\nAnswer using the following information:\nfact",
        "one",
    ]
    assert second.text == "second"


def test_nothing_retrieved_can_be_answered_without_the_model() -> None:
    model = ScriptedChatModel([])
    helpdesk = service(
        model,
        content_retriever=Fixed(),
        answer_when_nothing_retrieved=lambda text: f"I know nothing about {text!r}.",
    )
    result = helpdesk.ask("u", "quasars")
    assert result.content == "I know nothing about 'quasars'."
    assert result.sources == ()
    assert model.requests == []
    assert helpdesk.get_chat_memory("u").messages() == [
        UserMessage("quasars"),
        AiMessage("I know nothing about 'quasars'."),
    ]
    fixed = service(
        ScriptedChatModel([]), content_retriever=Fixed(), answer_when_nothing_retrieved="No."
    )
    assert fixed.ask("u", "x").content == "No."


def test_when_something_is_retrieved_the_model_answers() -> None:
    model = ScriptedChatModel(["model answer"])
    helpdesk = service(model, answer_when_nothing_retrieved="No.")
    assert helpdesk.ask("u", "What is RRF?").content == "model answer"


def test_streams_report_the_sources_first() -> None:
    helpdesk = service(ScriptedChatModel(["By rank."]))
    stream = helpdesk.events("u", "What is RRF?")
    events = list(stream)
    assert isinstance(events[0], Retrieved)
    assert [c.text for c in events[0].contents] == ["RRF fuses ranks."]
    assert [s.text for s in stream.result.sources] == ["RRF fuses ranks."]


def test_async_calls_retrieve_with_the_async_pipeline() -> None:
    class AsyncRetriever:
        def __init__(self) -> None:
            self.queries: list[Query] = []

        def retrieve(self, query: Query) -> list[Content]:
            raise AssertionError("the async path uses aretrieve")

        async def aretrieve(self, query: Query) -> list[Content]:
            self.queries.append(query)
            return [Content(TextSegment("async fact"))]

    retriever = AsyncRetriever()
    model = ScriptedChatModel(["ok"])
    helpdesk = service(model, content_retriever=retriever)
    assert asyncio.run(helpdesk.aask("u", "q")) == "ok"
    assert retriever.queries[0].text == "q"
    first = model.requests[0].messages[0]
    assert isinstance(first, UserMessage)
    assert first.text.endswith("async fact")


def test_a_sync_only_augmentor_serves_async_calls_on_a_thread() -> None:
    class SyncOnly:
        def __init__(self) -> None:
            self.inner = DefaultRetrievalAugmentor(content_retriever=Fixed("thread fact"))

        def augment(self, request: Any) -> Any:
            return self.inner.augment(request)

    model = ScriptedChatModel(["ok"])
    helpdesk = service(model, content_retriever=None, retrieval_augmentor=SyncOnly())
    assert asyncio.run(helpdesk.aask("u", "q")) == "ok"
    first = model.requests[0].messages[0]
    assert isinstance(first, UserMessage)
    assert first.text.endswith("thread fact")


def test_retrieval_options_are_checked() -> None:
    model = ScriptedChatModel([])
    augmentor = DefaultRetrievalAugmentor(content_retriever=Fixed())
    with pytest.raises(ConfigurationError, match="not both"):
        service(model, retrieval_augmentor=augmentor)
    with pytest.raises(ConfigurationError, match="not a content retriever"):
        service(model, content_retriever=object())
    with pytest.raises(ConfigurationError, match="not a retrieval augmentor"):
        service(model, content_retriever=None, retrieval_augmentor=object())
    with pytest.raises(ConfigurationError, match="needs retrieval"):
        service(model, content_retriever=None, answer_when_nothing_retrieved="No.")
    with pytest.raises(ConfigurationError, match="a text or a function"):
        service(model, answer_when_nothing_retrieved=3)


def test_retrieval_without_memory_has_no_history() -> None:
    class Plain(Protocol):
        def ask(self, text: str) -> str: ...

    retriever = Fixed("fact")
    model = ScriptedChatModel(lambda request: "ok")
    plain = ai_service(Plain, chat_model=model, content_retriever=retriever)
    assert plain.ask("q") == "ok"
    metadata = retriever.queries[0].metadata
    assert metadata is not None
    assert metadata.chat_memory is None
    assert isinstance(model.requests[0], ChatRequest)
