"""The tool loop inside a service call (issue 9): sync, async and streaming, every failure path
leaving the memory well-formed (no tool call without its results) and the next call working."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Protocol

import pytest

from chatmemory import (
    AiMessage,
    AsyncMessageWindowChatMemory,
    ChatMessage,
    ConfigurationError,
    InMemoryChatMemoryStore,
    MessageWindowChatMemory,
    ModelBehaviourError,
    ModelError,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    ToolLoopError,
    UserMessage,
)
from chatmemory.models import (
    Capability,
    ChatRequest,
    ChatResponse,
    CompleteToolCall,
    FinishReason,
    TokenUsage,
)
from chatmemory.services import (
    ChatMemoryAccess,
    MemoryId,
    Result,
    TokenStream,
    ToolExecuted,
    ai_service,
)
from chatmemory.testing import ScriptedChatModel
from chatmemory.tools import ReturnBehavior, Tool, ToolArgumentsError, ToolContext, tool, tool_from
from tests.services.tooling import FnTool


def calls(*pairs: tuple[str, str], prefix: str = "c") -> AiMessage:
    return AiMessage(
        tool_execution_requests=[
            ToolExecutionRequest(f"{prefix}{i}", name, arguments)
            for i, (name, arguments) in enumerate(pairs)
        ]
    )


class Agent(ChatMemoryAccess, Protocol):
    def chat(self, user: Annotated[str, MemoryId], text: str) -> str: ...

    async def achat(self, user: Annotated[str, MemoryId], text: str) -> str: ...

    def result(self, user: Annotated[str, MemoryId], text: str) -> Result[str]: ...

    def events(self, user: Annotated[str, MemoryId], text: str) -> TokenStream: ...


MODES = ("sync", "async", "stream")


def ask(service: Agent, mode: str, user: str, text: str) -> str:
    """One call of `service` through the sync, async or streaming path."""
    if mode == "sync":
        return service.chat(user, text)
    if mode == "async":
        return asyncio.run(service.achat(user, text))
    stream = service.events(user, text)
    for _ in stream:
        pass
    return stream.result.content


def make(
    script: Sequence[Any] | Callable[[ChatRequest], Any], *tools: Tool, **options: Any
) -> tuple[Agent, ScriptedChatModel, InMemoryChatMemoryStore]:
    store = InMemoryChatMemoryStore()
    model = ScriptedChatModel(script)
    service = ai_service(
        Agent,
        chat_model=model,
        chat_memory_provider=lambda mid: MessageWindowChatMemory(
            id=mid, max_messages=100, store=store
        ),
        tools=tools,
        **options,
    )
    return service, model, store


def well_formed(messages: Sequence[ChatMessage]) -> bool:
    """Every tool call is answered by its results right after it, and no result is alone."""
    index = 0
    while index < len(messages):
        message = messages[index]
        if isinstance(message, ToolExecutionResultMessage):
            return False
        if isinstance(message, AiMessage) and message.tool_execution_requests:
            ids = [r.id for r in message.tool_execution_requests]
            following = messages[index + 1 : index + 1 + len(ids)]
            if [getattr(m, "id", None) for m in following] != ids:
                return False
            index += len(ids)
        index += 1
    return True


@pytest.mark.parametrize("mode", MODES)
def test_a_tool_call_runs_and_the_model_answers_with_its_result(mode: str) -> None:
    weather = FnTool("weather", lambda city: f"snow in {city}", "city")
    service, model, store = make(
        [calls(("weather", '{"city": "Oslo"}')), "It snows in Oslo."], weather
    )
    assert ask(service, mode, "u", "Weather in Oslo?") == "It snows in Oslo."
    second = model.requests[1]
    assert [spec.name for spec in second.tools] == ["weather"]
    assert second.messages[-1] == ToolExecutionResultMessage("c0", "weather", "snow in Oslo")
    assert [e.message for e in store.history("u")] == [
        UserMessage("Weather in Oslo?"),
        calls(("weather", '{"city": "Oslo"}')),
        ToolExecutionResultMessage("c0", "weather", "snow in Oslo"),
        AiMessage("It snows in Oslo."),
    ]
    assert weather.contexts[0] == ToolContext("u", user_message=UserMessage("Weather in Oslo?"))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_two_calls_run_concurrently_and_their_results_keep_request_order(mode: str) -> None:
    both = threading.Barrier(2, timeout=5)

    def slow(name: str) -> str:
        both.wait()  # only passes when the two calls run at the same time
        time.sleep(0.01 if name == "first" else 0)
        return f"{name} done"

    async def aslow(name: str) -> str:
        await asyncio.to_thread(both.wait)
        return f"{name} done"

    tool = FnTool("work", slow if mode == "sync" else aslow, "name")
    service, model, _ = make(
        [calls(("work", '{"name": "first"}'), ("work", '{"name": "second"}')), "ok"],
        tool,
        execute_tools_concurrently=True,
    )
    assert ask(service, mode, "u", "go") == "ok"
    results = model.requests[1].messages[-2:]
    assert [m.text for m in results] == ["first done", "second done"]  # type: ignore[union-attr]
    assert well_formed(service.get_chat_memory("u").messages())


@pytest.mark.parametrize("mode", MODES)
def test_a_raising_tool_sends_its_message_and_a_bare_exception_its_class_name(mode: str) -> None:
    def boom(kind: str) -> str:
        if kind == "bare":
            raise KeyError
        raise RuntimeError("the database is down")

    service, model, _ = make(
        [calls(("boom", '{"kind": "said"}'), ("boom", '{"kind": "bare"}')), "sorry"],
        FnTool("boom", boom, "kind"),
    )
    assert ask(service, mode, "u", "go") == "sorry"
    said, bare = model.requests[1].messages[-2:]
    assert said == ToolExecutionResultMessage("c0", "boom", "the database is down", is_error=True)
    assert bare == ToolExecutionResultMessage("c1", "boom", "KeyError", is_error=True)
    assert well_formed(service.get_chat_memory("u").messages())


@pytest.mark.parametrize("mode", MODES)
def test_a_made_up_tool_name_gets_an_error_naming_the_tools_and_the_model_retries(
    mode: str,
) -> None:
    weather = FnTool("weather", lambda city: "sun", "city")
    service, model, _ = make(
        [calls(("forecast", "{}")), calls(("weather", '{"city": "Rome"}'), prefix="d"), "Sun."],
        weather,
    )
    assert ask(service, mode, "u", "Weather?") == "Sun."
    error = model.requests[1].messages[-1]
    assert isinstance(error, ToolExecutionResultMessage)
    assert error.is_error is True
    assert '"forecast"' in error.text
    assert "The tools are: weather." in error.text


@pytest.mark.parametrize("mode", MODES)
def test_unknown_tools_can_raise_and_then_nothing_is_stored(mode: str) -> None:
    service, _, store = make(
        [calls(("forecast", "{}")), "next call works"],
        FnTool("weather", lambda city: "sun", "city"),
        on_unknown_tool="raise",
    )
    with pytest.raises(ModelBehaviourError, match="no such tool"):
        ask(service, mode, "u", "Weather?")
    assert store.history("u") == []
    assert ask(service, mode, "u", "hello") == "next call works"


@pytest.mark.parametrize("mode", MODES)
def test_invalid_arguments_go_back_and_the_next_round_corrects_them(mode: str) -> None:
    weather = FnTool("weather", lambda city: f"rain in {city}", "city")
    service, model, _ = make(
        [
            calls(("weather", '{"town": "Bergen"}')),
            calls(("weather", '{"city": "Bergen"}'), prefix="d"),
            "Rain.",
        ],
        weather,
    )
    assert ask(service, mode, "u", "Weather?") == "Rain."
    error = model.requests[1].messages[-1]
    assert isinstance(error, ToolExecutionResultMessage)
    assert error.is_error is True
    assert "missing city" in error.text
    assert model.requests[2].messages[-1] == ToolExecutionResultMessage(
        "d0", "weather", "rain in Bergen"
    )


@pytest.mark.parametrize("mode", MODES)
def test_the_round_trip_limit_ends_the_call_and_stores_nothing(mode: str) -> None:
    forever = FnTool("again", lambda: "more", return_behavior="to_model")

    def answer(request: ChatRequest) -> AiMessage | str:
        if request.messages[-1] == UserMessage("after"):
            return "fine"
        return calls(("again", "{}"), prefix=f"r{len(request.messages)}-")

    service, model, store = make(answer, forever, max_tool_calling_round_trips=3)
    with pytest.raises(ToolLoopError, match="more than 3 times"):
        ask(service, mode, "u", "loop")
    assert len(model.requests) == 4
    assert store.history("u") == []
    assert ask(service, mode, "u", "after") == "fine"


@pytest.mark.parametrize("mode", MODES)
def test_handlers_choose_what_the_model_hears_or_abort(mode: str) -> None:
    def fail() -> str:
        raise ValueError("secret internals")

    service, model, _ = make(
        [calls(("fail", "{}")), "handled"],
        FnTool("fail", fail),
        on_tool_error=lambda error, request: f"{request.name} is unavailable",
    )
    assert ask(service, mode, "u", "go") == "handled"
    assert model.requests[1].messages[-1].text == "fail is unavailable"  # type: ignore[union-attr]

    def refuse(error: Exception, request: ToolExecutionRequest) -> str:
        raise PermissionError("stop here")

    aborting, _, store = make([calls(("fail", "{}"))], FnTool("fail", fail), on_tool_error=refuse)
    with pytest.raises(PermissionError, match="stop here"):
        ask(aborting, mode, "u", "go")
    assert store.history("u") == []

    custom, model, _ = make(
        [calls(("weather", "{}")), "ok"],
        FnTool("weather", lambda city: city, "city"),
        on_invalid_arguments=lambda error, request: "give a city",
    )
    assert ask(custom, mode, "u", "go") == "ok"
    assert model.requests[1].messages[-1].text == "give a city"  # type: ignore[union-attr]


def test_tool_executions_and_hooks() -> None:
    seen: list[str] = []
    weather = FnTool("weather", lambda city: f"sun in {city}", "city")
    usage = TokenUsage(5, 1)
    service, _, _ = make(
        [
            ChatResponse(
                ai_message=calls(("weather", '{"city": "Nice"}')),
                token_usage=usage,
                finish_reason=FinishReason.TOOL_EXECUTION,
            ),
            ChatResponse(ai_message=AiMessage("Sunny."), token_usage=usage),
        ],
        weather,
        before_tool_execution=lambda request: seen.append(f"before {request.name}"),
        after_tool_execution=lambda execution: seen.append(f"after {execution.result}"),
    )
    result = service.result("u", "Weather?")
    assert result.content == "Sunny."
    assert result.token_usage == TokenUsage(10, 2)
    [execution] = result.tool_executions
    assert execution.request == ToolExecutionRequest("c0", "weather", '{"city": "Nice"}')
    assert (execution.result, execution.result_object, execution.is_error) == (
        "sun in Nice",
        "sun in Nice",
        False,
    )
    assert execution.started_at <= execution.finished_at
    assert len(result.intermediate_responses) == 1
    assert seen == ["before weather", "after sun in Nice"]


# -- immediate return -------------------------------------------------------------------------


class Direct(Protocol):
    def result(self, text: str) -> Result[str]: ...

    def text(self, text: str) -> str: ...

    def number(self, text: str) -> int: ...

    def nothing(self, text: str) -> None: ...


@pytest.mark.parametrize(
    ("behaviors", "immediate"),
    [
        (("immediate",), True),
        (("immediate_if_last",), True),
        (("to_model",), False),
        (("immediate", "immediate"), True),
        (("immediate", "to_model"), False),
        (("to_model", "immediate_if_last"), True),
        (("immediate_if_last", "to_model"), False),
        (("immediate", "immediate_if_last"), True),
    ],
)
def test_the_immediate_return_matrix(
    behaviors: tuple[ReturnBehavior, ...], immediate: bool
) -> None:
    tools = [
        FnTool(f"t{i}", lambda i=i: f"value {i}", return_behavior=b)
        for i, b in enumerate(behaviors)
    ]
    model = ScriptedChatModel([calls(*((f"t{i}", "{}") for i in range(len(tools)))), "answer"])
    memory = MessageWindowChatMemory(max_messages=20)
    service = ai_service(Direct, chat_model=model, chat_memory=memory, tools=tools)
    result = service.result("go")
    if immediate:
        assert result.content is None
        assert result.finish_reason is FinishReason.TOOL_EXECUTION
        assert len(model.requests) == 1
        assert [e.result for e in result.tool_executions] == [
            f"value {i}" for i in range(len(tools))
        ]
    else:
        assert result.content == "answer"
    assert well_formed(memory.messages())


def test_immediate_return_resolves_plain_return_types() -> None:
    def build(value: object) -> tuple[Direct, Any]:
        tool = FnTool("get", lambda: value, return_behavior="immediate")
        model = ScriptedChatModel(lambda request: calls(("get", "{}")))
        return ai_service(Direct, chat_model=model, tools=[tool]), model

    service, _ = build("from the tool")
    assert service.text("x") == "from the tool"
    service.nothing("x")
    with pytest.raises(ConfigurationError, match=r"declare it `-> Result\[...\]`"):
        service.number("x")  # a str cannot be an int
    assert build(None)[0].text("x") is None


def test_an_erroring_immediate_tool_goes_back_to_the_model() -> None:
    def fail() -> str:
        raise RuntimeError("nope")

    model = ScriptedChatModel([calls(("get", "{}")), "recovered"])
    service = ai_service(
        Direct, chat_model=model, tools=[FnTool("get", fail, return_behavior="immediate")]
    )
    assert service.text("x") == "recovered"


# -- providers --------------------------------------------------------------------------------


class Provider:
    def __init__(self, dynamic: bool, tools: Callable[[ToolContext], list[Tool]]) -> None:
        self.dynamic = dynamic
        self.make = tools
        self.asked: list[str] = []

    def provide(self, context: ToolContext) -> list[Tool]:
        self.asked.append(context.memory_id)
        return self.make(context)


def test_providers_are_asked_once_per_call_or_before_every_model_call() -> None:
    fixed = Provider(False, lambda c: [FnTool("clock", lambda: "noon")])
    per_user = Provider(True, lambda c: [FnTool(f"files_of_{c.memory_id}", lambda: "a.txt")])
    model = ScriptedChatModel([calls(("clock", "{}")), "It is noon."])
    service = ai_service(
        Agent,
        chat_model=model,
        chat_memory_provider=lambda mid: MessageWindowChatMemory(id=mid, max_messages=10),
        tool_providers=[fixed, per_user],
    )
    assert service.chat("ann", "time?") == "It is noon."
    assert fixed.asked == ["ann"]
    assert per_user.asked == ["ann", "ann"]
    assert [t.name for t in model.requests[0].tools] == ["clock", "files_of_ann"]


def test_a_provided_tool_may_not_reuse_a_name() -> None:
    clash = Provider(False, lambda c: [FnTool("clock", lambda: "noon")])
    service, _, store = make(["never"], FnTool("clock", lambda: "x"), tool_providers=[clash])
    with pytest.raises(ConfigurationError, match="two tools are named 'clock'"):
        service.chat("u", "time?")
    assert store.history("u") == []


def test_async_providers_serve_async_calls_and_sync_calls_say_what_to_do() -> None:
    class AsyncProvider:
        dynamic = False

        async def aprovide(self, context: ToolContext) -> list[Tool]:
            return [FnTool("clock", lambda: "noon")]

    class AsyncAgent(Protocol):
        async def achat(self, user: Annotated[str, MemoryId], text: str) -> str: ...

    service = ai_service(
        AsyncAgent,
        chat_model=ScriptedChatModel([calls(("clock", "{}")), "noon"]),
        chat_memory_provider=lambda mid: MessageWindowChatMemory(id=mid, max_messages=100),
        tool_providers=[AsyncProvider()],
    )
    assert asyncio.run(service.achat("u", "time?")) == "noon"
    # a sync method could not ask it: said when the service is made, not at a call
    with pytest.raises(ConfigurationError, match=r"Agent\.chat is a sync method.*async only"):
        make([], tool_providers=[AsyncProvider()])


def test_sync_providers_serve_async_calls_on_a_thread() -> None:
    provider = Provider(False, lambda c: [FnTool("clock", lambda: "noon")])
    service, _, _ = make([calls(("clock", "{}")), "noon"], tool_providers=[provider])
    assert asyncio.run(service.achat("u", "time?")) == "noon"


# -- registration checks ------------------------------------------------------------------------


def test_tool_registration_checks() -> None:
    with pytest.raises(ConfigurationError, match="is not a tool"):
        make([], "weather")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="appears several times"):
        make([], FnTool("a", lambda: 1), FnTool("a", lambda: 2))
    with pytest.raises(ConfigurationError, match="is not a tool provider"):
        make([], tool_providers=[object()])
    with pytest.raises(ConfigurationError, match="`max_tool_calling_round_trips` must be"):
        make([], max_tool_calling_round_trips=0)
    with pytest.raises(ConfigurationError, match="`on_unknown_tool` is a function"):
        make([], on_unknown_tool="ignore")
    with pytest.raises(ConfigurationError, match=r"does not declare Capability\.TOOLS"):
        ai_service(
            Agent,
            chat_model=ScriptedChatModel([], capabilities={Capability.STREAMING}),
            chat_memory_provider=lambda mid: MessageWindowChatMemory(id=mid, max_messages=5),
            tools=[FnTool("a", lambda: 1)],
        )


# -- streaming ------------------------------------------------------------------------------


def test_a_streamed_tool_starts_when_its_call_is_complete_and_events_follow() -> None:
    ran = threading.Event()

    def work() -> str:
        ran.set()
        return "done"

    tool = FnTool("work", work)
    service, _, _ = make([calls(("work", "{}")), "all done"], tool)
    stream = service.events("u", "go")
    kinds = []
    for event in stream:
        kinds.append(type(event).__name__)
        if isinstance(event, CompleteToolCall):
            assert ran.is_set()  # started before the rest of the answer was read
        if isinstance(event, ToolExecuted):
            assert event.execution.result == "done"
    assert kinds[:4] == ["PartialToolCall", "CompleteToolCall", "ChatResponse", "ToolExecuted"]
    assert kinds[-1] == "ChatResponse"
    assert stream.result.content == "all done"
    assert [e.result for e in stream.result.tool_executions] == ["done"]


def test_a_stream_abandoned_mid_loop_stores_nothing_and_the_next_call_works() -> None:
    service, _, store = make([calls(("work", "{}")), "next"], FnTool("work", lambda: "done"))
    stream = iter(service.events("u", "go"))
    while not isinstance(next(stream), ToolExecuted):
        pass
    stream.close()  # type: ignore[attr-defined]
    assert store.history("u") == []
    assert ask(service, "sync", "u", "again") == "next"


def test_streamed_concurrent_calls_start_early_on_threads() -> None:
    both = threading.Barrier(2, timeout=5)
    tool = FnTool("work", lambda n: (both.wait(), f"done {n}")[1], "n")
    service, model, _ = make(
        [calls(("work", '{"n": "1"}'), ("work", '{"n": "2"}')), "ok"],
        tool,
        execute_tools_concurrently=True,
    )
    assert ask(service, "stream", "u", "go") == "ok"
    assert [m.text for m in model.requests[1].messages[-2:]] == ["done 1", "done 2"]  # type: ignore[union-attr]


# -- async cancellation -----------------------------------------------------------------------


def test_cancelling_an_async_call_inside_a_tool_stores_nothing() -> None:
    async def main() -> None:
        inside = asyncio.Event()

        async def hang() -> str:
            inside.set()
            await asyncio.sleep(30)
            return "never"

        store = InMemoryChatMemoryStore()
        service = ai_service(
            Agent,
            chat_model=ScriptedChatModel([calls(("hang", "{}")), "after"]),
            chat_memory_provider=lambda mid: AsyncMessageWindowChatMemory(id=mid, max_messages=10),
            tools=[FnTool("hang", hang)],
        )
        task = asyncio.ensure_future(service.achat("u", "go"))
        await asyncio.wait_for(inside.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        memory = service.get_chat_memory("u")
        assert await memory.messages() == []
        assert await asyncio.wait_for(service.achat("u", "again"), 5) == "after"
        assert store.history("u") == []

    asyncio.run(main())


@pytest.mark.parametrize("mode", MODES)
def test_a_tool_call_without_an_id_gets_one_when_it_arrives(mode: str) -> None:
    weather = FnTool("weather", lambda city: f"snow in {city}", "city")
    unnamed = AiMessage(
        tool_execution_requests=[
            ToolExecutionRequest(None, "weather", '{"city": "Oslo"}'),
            ToolExecutionRequest(None, "weather", '{"city": "Bergen"}'),
        ]
    )
    service, model, store = make([unnamed, "It snows."], weather)
    assert ask(service, mode, "u", "Weather?") == "It snows."
    call, *results = model.requests[1].messages[-3:]
    assert isinstance(call, AiMessage)
    ids = [r.id for r in call.tool_execution_requests]
    assert all(isinstance(i, str) and i for i in ids)
    assert len(set(ids)) == 2
    assert all(isinstance(m, ToolExecutionResultMessage) for m in results)
    assert [(m.id, m.text) for m in results] == [  # type: ignore[union-attr]
        (ids[0], "snow in Oslo"),
        (ids[1], "snow in Bergen"),
    ]
    stored = [e.message for e in store.history("u")]
    assert stored[1] == call
    assert well_formed(stored)


@pytest.mark.parametrize("mode", MODES)
def test_a_tool_call_cut_by_the_output_limit_says_to_raise_it(mode: str) -> None:
    ran: list[str] = []

    def forecast(city: str) -> str:
        ran.append(city)
        return f"snow in {city}"

    weather = FnTool("weather", forecast, "city")
    cut = ChatResponse(
        ai_message=calls(("weather", '{"city": "Os')), finish_reason=FinishReason.LENGTH
    )
    service, model, store = make([cut, "never"], weather)
    with pytest.raises(ModelError, match=r"cut off .*max_output_tokens") as caught:
        ask(service, mode, "u", "Weather?")
    assert not caught.value.retriable
    assert len(model.requests) == 1  # not retried at the same limit
    assert ran == []  # a stream may start it early: it fails on its arguments, never runs
    assert store.history("u") == []
    whole = ChatResponse(
        ai_message=calls(("weather", '{"city": "Oslo"}')), finish_reason=FinishReason.LENGTH
    )
    service, _, _ = make([whole, "It snows."], weather)  # complete calls still run
    assert ask(service, mode, "u", "Weather?") == "It snows."


@pytest.mark.parametrize("mode", MODES)
def test_huge_invalid_arguments_are_not_echoed_whole(mode: str) -> None:
    class Echoing(FnTool):
        def _arguments(self, arguments: str) -> dict[str, Any]:
            raise ToolArgumentsError(f"cannot read {arguments}", tool="echo", arguments=arguments)

    @tool
    def weather(city: str) -> str:
        return f"snow in {city}"

    huge = '{"city": ' + "[1, " * 250_000 + "]"
    service, model, store = make(
        [calls(("weather", huge), ("echo", huge), ("weather", '{"city": "' + "x" * 10**6)), "ok"],
        tool_from(weather),
        Echoing("echo", lambda: "never"),
    )
    assert ask(service, mode, "u", "go") == "ok"
    results = [m for m in model.requests[1].messages if isinstance(m, ToolExecutionResultMessage)]
    assert [r.is_error for r in results] == [True] * 3
    assert all(len(r.text) < 1500 for r in results), [len(r.text) for r in results]
    assert well_formed([e.message for e in store.history("u")])
