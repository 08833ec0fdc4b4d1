"""What an AI-service call costs beyond the memory and the model (issue 8 §6).

`overhead`: one call of a declared method (`ai_service`, a system template with a variable, a
memory id, `str` result) on a SQLite file memory that has seen N messages, with
`ScriptedChatModel` answering at once, beside the floor: the same turn written by hand with the
same memory and model (add the user message, read the window, call the model, add the answer).
The service renders the templates, previews the window and commits the turn once, so it may beat
the floor, which commits twice.

`sdk_share`: the same call through `OpenAiChatModel` (the official SDK) against a local server
speaking OpenAI's wire protocol, to show where the time of a real call goes.

`tool_round`: a call whose model asks for one tool, then answers (two model calls, one
commit), on SQLite, Redis and PostgreSQL (when they answer): µs per call and how many times
the store is asked for the window. The turn reads the window once; later model calls of the
turn plan on it, and the versioned commit checks it (before, each model call read it: one round
trip more per tool round on a network store).
"""

from __future__ import annotations

import itertools
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Protocol

from chatmemory import (
    ChatMemoryAccess,
    MemoryId,
    OpenAiTokenCountEstimator,
    SqliteChatMemoryStore,
    SystemMessage,
    TokenWindowChatMemory,
    UserMessage,
    ai_service,
    system_message,
)
from chatmemory.models import ChatRequest
from chatmemory.testing import ScriptedChatModel

from .common import conversation, table

ESTIMATOR = OpenAiTokenCountEstimator("gpt-4o-mini")
ANSWER = "Here is a short answer, with the key facts first and where to read more."
CHECKPOINTS = (100, 10_000)
CALLS = 300
COMPLETION = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 0,
    "model": "gpt-4o-mini",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": ANSWER},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
}
"""What the local OpenAI-compatible server answers every call with."""
WARMUP = 20


class Assistant(ChatMemoryAccess, Protocol):
    @system_message("You are the support assistant of {{company}}. Be brief.")
    def chat(
        self, user: Annotated[str, MemoryId], text: Annotated[str, UserMessage], company: str
    ) -> str: ...


def _median_us(op: Callable[[int], object], calls: int) -> float:
    for i in range(WARMUP):
        op(-1 - i)
    samples = []
    for i in range(calls):
        start = time.perf_counter()
        op(i)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


@contextmanager
def _store() -> Iterator[SqliteChatMemoryStore]:
    with tempfile.TemporaryDirectory() as tmp, SqliteChatMemoryStore(Path(tmp) / "b.db") as store:
        yield store


def _memory(store: SqliteChatMemoryStore, memory_id: str) -> TokenWindowChatMemory:
    return TokenWindowChatMemory(id=memory_id, max_tokens=4_000, estimator=ESTIMATOR, store=store)


def _prefill(store: SqliteChatMemoryStore, memory_id: str, count: int) -> None:
    memory = _memory(store, memory_id)
    messages = conversation()
    memory.add(SystemMessage("You are the support assistant of ACME. Be brief."))
    done = 0
    while done < count:
        chunk = [next(messages) for _ in range(min(5_000, count - done))]
        memory.add(chunk)
        done += len(chunk)


def _service_call(store: SqliteChatMemoryStore, model: Any, memory_id: str) -> Callable[[int], Any]:
    service = ai_service(
        Assistant, chat_model=model, chat_memory_provider=lambda mid: _memory(store, mid)
    )
    return lambda i: service.chat(
        memory_id, f"Question {i}: what about the weather?", company="ACME"
    )


def _by_hand(store: SqliteChatMemoryStore, model: Any, memory_id: str) -> Callable[[int], Any]:
    memory = _memory(store, memory_id)
    system = SystemMessage("You are the support assistant of ACME. Be brief.")

    def turn(i: int) -> Any:
        memory.add(system, UserMessage(f"Question {i}: what about the weather?"))
        response = model.chat(ChatRequest(memory.messages()))
        memory.add(response.ai_message)
        return response.ai_message.text

    return turn


def overhead(quick: bool = False) -> str:
    calls = 100 if quick else CALLS
    rows = []
    for n in CHECKPOINTS:
        with _store() as store:
            _prefill(store, "floor", n)
            _prefill(store, "ours", n)
            model = ScriptedChatModel(lambda request: ANSWER)
            floor = _median_us(_by_hand(store, model, "floor"), calls)
            ours = _median_us(_service_call(store, model, "ours"), calls)
        rows.append([f"{n:,}", f"{floor:,.0f}", f"{ours:,.0f}", f"{ours / floor:.2f}x"])
    flat = float(rows[-1][2].replace(",", "")) / float(rows[0][2].replace(",", ""))
    return table(
        f"Service call on SQLite, ScriptedChatModel (µs per call, median of {calls}); "
        f"{CHECKPOINTS[-1]:,} vs {CHECKPOINTS[0]:,}: {flat:.2f}x",
        ["N", "floor: by hand", "ai_service", "ratio"],
        rows,
    )


def sdk_share(quick: bool = False) -> str:
    from tests.models.fake_server import FakeServer, Reply

    from chatmemory.models import OpenAiChatModel

    calls = 50 if quick else 200
    body = COMPLETION
    with _store() as store, FakeServer() as server:
        server.reply(*[Reply(body=body)] * (calls + WARMUP))
        model = OpenAiChatModel(model="gpt-4o-mini", base_url=server.url + "/v1", api_key="k")
        _prefill(store, "sdk", 100)
        _prefill(store, "scripted", 100)
        sdk = _median_us(_service_call(store, model, "sdk"), calls)
        scripted = _median_us(
            _service_call(store, ScriptedChatModel(lambda r: ANSWER), "scripted"), calls
        )
        model.close()
    return table(
        f"Service call at N=100: ScriptedChatModel vs OpenAiChatModel on a local server "
        f"(µs, median of {calls})",
        ["model", "µs per call", "share of the call"],
        [
            ["ScriptedChatModel", f"{scripted:,.0f}", "—"],
            [
                "OpenAiChatModel (SDK + HTTP)",
                f"{sdk:,.0f}",
                f"{(sdk - scripted) / sdk:.0%} SDK+HTTP",
            ],
        ],
    )


class Agent(Protocol):
    def chat(self, user: Annotated[str, MemoryId], text: Annotated[str, UserMessage]) -> str: ...


def _lookup(topic: str) -> str:
    """What is known about a topic."""
    return f"three short paragraphs about {topic}"


def _tool_round_call(store: Any, memory_id: str) -> tuple[Callable[[int], Any], list[int]]:
    from chatmemory import ToolExecutionRequest, ToolExecutionResultMessage
    from chatmemory.models import ChatResponse
    from chatmemory.tools import tool

    reads = [0]
    load = store.load_window

    def counted(*args: Any, **kwargs: Any) -> Any:
        reads[0] += 1
        return load(*args, **kwargs)

    store.load_window = counted
    calls = itertools.count()

    def answer(request: ChatRequest) -> Any:
        from chatmemory import AiMessage

        if not isinstance(request.messages[-1], ToolExecutionResultMessage):
            call = ToolExecutionRequest(f"call_{next(calls)}", "lookup", '{"topic": "tides"}')
            return ChatResponse(ai_message=AiMessage(tool_execution_requests=[call]))
        return ANSWER

    service = ai_service(
        Agent,
        chat_model=ScriptedChatModel(answer),
        chat_memory_provider=lambda mid: _memory(store, mid),
        tools=[tool(_lookup)],
    )
    return lambda i: service.chat(memory_id, f"Question {i}: how do tides work?"), reads


def tool_round(quick: bool = False) -> str:
    from . import turn

    calls = 50 if quick else 200
    rows = []
    for name, away, make in (
        ("SQLite", turn._sqlite_away, turn._sqlite_store),
        ("Redis", turn._redis_away, turn._redis_store),
        ("PostgreSQL", turn._postgres_away, turn._postgres_store),
    ):
        reason = away()
        if reason is not None:
            rows.append([name, "—", "—", f"skipped: {reason}"])
            continue
        with tempfile.TemporaryDirectory() as tmp, make(Path(tmp)) as store:
            _prefill(store, "tools", 100)
            call, reads = _tool_round_call(store, "tools")
            micros = _median_us(call, calls)
            per_call = reads[0] / (calls + WARMUP)
        rows.append([name, f"{micros:,.0f}", f"{per_call:.2f}", "2 model calls, 1 commit"])
    return table(
        f"Service call with one tool round at N=100 (µs, median of {calls}; window reads per "
        f"call: the store asked for the window, before this turn design 2)",
        ["store", "µs per call", "window reads per call", "what the call does"],
        rows,
    )


def run(quick: bool = False) -> Iterator[str]:
    yield overhead(quick)
    yield sdk_share(quick)
    yield tool_round(quick)
