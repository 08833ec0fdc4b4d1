"""In-process costs: per `add` and per `messages()` of both windows as the conversation grows,
and the cost of counting a 4,000-token window the first and the second time."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator

from chatmemory import (
    ChatMessage,
    MessageWindowChatMemory,
    OpenAiTokenCountEstimator,
    TokenWindowChatMemory,
    message_from_json,
    message_to_json,
)

from .common import conversation, micros, per_op, table

CHECKPOINTS = (100, 1_000, 10_000, 100_000)
SAMPLES = 300


def _windows() -> dict[str, Callable[[], object]]:
    estimator = OpenAiTokenCountEstimator("gpt-4o-mini")
    return {
        "message window (50)": lambda: MessageWindowChatMemory(max_messages=50),
        "token window (4,000)": lambda: TokenWindowChatMemory(
            max_tokens=4_000, estimator=estimator
        ),
    }


def growth(checkpoints: tuple[int, ...] = CHECKPOINTS) -> str:
    rows = []
    for name, build in _windows().items():
        memory = build()
        source = conversation()
        added = 0
        results = []
        for checkpoint in checkpoints:
            for message in itertools.islice(source, checkpoint - added):
                memory.add(message)  # type: ignore[attr-defined]
            added = checkpoint
            add = per_op(lambda m=memory, s=source: m.add(next(s)), SAMPLES)  # type: ignore[misc]
            added += SAMPLES
            read = per_op(memory.messages, SAMPLES)  # type: ignore[attr-defined]
            results.append((checkpoint, add, read))
        base_add, base_read = results[0][1], results[0][2]
        for checkpoint, add, read in results:
            rows.append(
                [
                    name,
                    f"{checkpoint:,}",
                    micros(add),
                    f"{add / base_add:.2f}×",
                    micros(read),
                    f"{read / base_read:.2f}×",
                ]
            )
    return table(
        "Window memories, default store: cost per operation after N messages added (median of 300)",
        ["memory", "N added", "add", "vs first", "messages()", "vs first"],
        rows,
    )


def counting(repeat: int = 20) -> str:
    estimator = OpenAiTokenCountEstimator("gpt-4o-mini")
    estimator.count_text("warm up the encoder")
    firsts, seconds, sizes = [], [], []
    for round_ in range(repeat):
        window, total = [], 3
        for message in conversation(start=10_000 * (round_ + 1)):
            cost = estimator.count_message(message)
            if total + cost > 4_000:
                break
            window.append(message)
            total += cost
        # fresh objects: the counts cached while choosing the window must not help
        fresh = [_clone(m) for m in window]
        start = time.perf_counter()
        first_total = estimator.count_messages(fresh)
        firsts.append(time.perf_counter() - start)
        start = time.perf_counter()
        second_total = estimator.count_messages(fresh)
        seconds.append(time.perf_counter() - start)
        assert first_total == second_total == total
        sizes.append((len(fresh), total))
    first, second = min(firsts), min(seconds)
    messages, tokens = sizes[0]
    return table(
        "Counting one 4,000-token window (OpenAiTokenCountEstimator, o200k_base; best of 20)",
        ["window", "first count", "second count", "second / first"],
        [
            [
                f"{messages} messages, {tokens:,} tokens",
                micros(first),
                micros(second),
                f"{second / first:.1%}",
            ]
        ],
    )


def _clone(message: ChatMessage) -> ChatMessage:
    return message_from_json(message_to_json(message))


def run(quick: bool = False) -> Iterator[str]:
    """The core's tables: window growth and token counting."""
    yield growth((100, 1_000) if quick else CHECKPOINTS)
    yield counting()
