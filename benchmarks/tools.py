"""What tools cost (issue 9).

`schema`: the parameters schema of a tool taking a 50-field pydantic model, on first use
(pydantic builds the model and its schema) and after (computed once per function, so a lookup),
beside pydantic's own `model_json_schema()` of the same model.

`round trip`: one service call whose model asks for one trivial tool, then answers
(`ScriptedChatModel`, an in-memory memory): lookup, argument validation, the call, the result
message, the second model call and the memory commit. The floor is the same call with no tool
(one model call); the difference is what a tool round trip adds. Sync and async.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Annotated, Any, Protocol

import pydantic

from chatmemory import (
    AiMessage,
    MemoryId,
    MessageWindowChatMemory,
    ToolExecutionRequest,
    ai_service,
)
from chatmemory.testing import ScriptedChatModel
from chatmemory.tools import tool
from chatmemory.tools._collect import collect_tools

from .common import table

CALLS = 2_000

Wide = pydantic.create_model(  # type: ignore[call-overload]
    "Wide", **{f"field_{i}": (int if i % 2 else str, ...) for i in range(50)}
)


class Agent(Protocol):
    def chat(self, user: Annotated[str, MemoryId], text: str) -> str: ...

    async def achat(self, user: Annotated[str, MemoryId], text: str) -> str: ...


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _schema_rows() -> list[list[object]]:
    def wide_tool(record: Wide) -> str:  # type: ignore[valid-type]
        return "ok"

    first = time.perf_counter()
    [made] = collect_tools([tool(wide_tool)])
    first_use = time.perf_counter() - first
    samples = []
    for _ in range(1_000):
        start = time.perf_counter()
        collect_tools([wide_tool])[0].specification  # noqa: B018
        samples.append(time.perf_counter() - start)
    floor = []
    for _ in range(200):
        start = time.perf_counter()
        Wide.model_json_schema()
        floor.append(time.perf_counter() - start)
    assert made.specification.parameters
    return [
        ["first use (pydantic builds the model)", f"{first_use * 1e6:,.0f} µs", "—"],
        [
            "cached (every later service)",
            f"{statistics.median(samples) * 1e6:,.1f} µs",
            f"{statistics.median(floor) * 1e6:,.0f} µs (model_json_schema)",
        ],
    ]


def _service(with_tool: bool) -> Agent:
    call = AiMessage(tool_execution_requests=[ToolExecutionRequest("1", "add", '{"a": 1, "b": 2}')])

    def script(request: Any) -> AiMessage | str:
        last = request.messages[-1]
        asks = (
            with_tool
            and not isinstance(last, type(call))
            and last.__class__.__name__ == "UserMessage"
        )
        return call if asks else "3"

    return ai_service(
        Agent,
        chat_model=ScriptedChatModel(script),
        chat_memory_provider=lambda mid: MessageWindowChatMemory(id=mid, max_messages=20),
        tools=[add] if with_tool else [],
    )


def _median_us(call: Callable[[int], object]) -> float:
    for i in range(100):
        call(-i - 1)
    samples = []
    for i in range(CALLS):
        start = time.perf_counter()
        call(i)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


def _amedian_us(service: Agent) -> float:
    async def main() -> float:
        for i in range(100):
            await service.achat(f"w{i}", "1 + 2?")
        samples = []
        for i in range(CALLS):
            start = time.perf_counter()
            await service.achat(f"u{i}", "1 + 2?")
            samples.append(time.perf_counter() - start)
        return statistics.median(samples) * 1e6

    return asyncio.run(main())


def run(quick: bool = False) -> Iterator[str]:
    yield table(
        "Tool schema of a 50-field pydantic parameter",
        ["when", "ours", "floor"],
        _schema_rows(),
    )
    rows: list[list[object]] = []
    with_tool, without = _service(True), _service(False)
    sync_tool = _median_us(lambda i: with_tool.chat(f"u{i}", "1 + 2?"))
    sync_plain = _median_us(lambda i: without.chat(f"u{i}", "1 + 2?"))
    rows.append(
        [
            "sync",
            f"{sync_tool:,.0f} µs",
            f"{sync_plain:,.0f} µs",
            f"{sync_tool - sync_plain:,.0f} µs",
        ]
    )
    async_tool, async_plain = _amedian_us(with_tool), _amedian_us(without)
    rows.append(
        [
            "async",
            f"{async_tool:,.0f} µs",
            f"{async_plain:,.0f} µs",
            f"{async_tool - async_plain:,.0f} µs",
        ]
    )
    yield table(
        "A service call with one tool round trip (ScriptedChatModel, in-memory memory; floor: "
        "the same call answered without a tool)",
        ["path", "with a tool", "floor (no tool)", "a round trip adds"],
        rows,
    )
