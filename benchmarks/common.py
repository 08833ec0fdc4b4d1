"""Shared pieces of the benchmarks: a realistic conversation, timing, and table printing."""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from chatmemory import (
    AiMessage,
    ChatMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)

_TOPICS = [
    "the weather in Munich",
    "a recipe for ramen",
    "the history of Rome",
    "sorting algorithms",
    "how tides work",
    "the best hiking trails",
    "tax deadlines",
    "learning Japanese",
]


def conversation(start: int = 0) -> Iterator[ChatMessage]:
    """An endless, varied chat: questions, answers, and a tool call every fourth turn.

    Every message is a new object with new text, so nothing is cached across messages.
    """
    for turn in itertools.count(start):
        topic = _TOPICS[turn % len(_TOPICS)]
        yield UserMessage(f"Turn {turn}: could you tell me a little about {topic}, briefly?")
        if turn % 4 == 3:
            call_id = f"call_{turn}"
            yield AiMessage(
                tool_execution_requests=[
                    ToolExecutionRequest(call_id, "search", f'{{"query": "{topic}", "n": {turn}}}')
                ]
            )
            yield ToolExecutionResultMessage(
                call_id, "search", f"Result {turn}: three short paragraphs about {topic}."
            )
        yield AiMessage(
            f"Answer {turn}: here is a short overview of {topic}, with the key facts first "
            f"and a suggestion for where to read more."
        )


def per_op(op: Callable[[], object], repeat: int) -> float:
    """Median seconds of one call of `op`, measured over `repeat` calls."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        op()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def micros(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f} µs"


def against(ratio: float, limit: float) -> str:
    """`ratio` beside its `limit`, marked ✗ when over it (`run.py` then exits with 1)."""
    return f"{ratio:.2f}× (≤ {limit}×{'' if ratio <= limit else ' ✗'})"


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [list(map(str, header))] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = [f"\n{title}", ""]
    for n, row in enumerate(cells):
        lines.append("| " + " | ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) + " |")
        if n == 0:
            lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def unit_vectors(count: int, seed: int, dimension: int = 384) -> Any:
    """`count` unit vectors around the same 64 centers whatever the seed (queries too): clustered
    like text embeddings, not uniform noise, which no index handles well."""
    import numpy as np

    centers = np.random.default_rng(0).normal(size=(64, dimension))
    rng = np.random.default_rng(seed)
    points = centers[rng.integers(0, 64, size=count)] + 0.3 * rng.normal(size=(count, dimension))
    return (points / np.linalg.norm(points, axis=1, keepdims=True)).astype(np.float32)


def percentile(samples: list[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def exact_top(vectors: Any, query: Any, top: int, keep: Any = None) -> tuple[set[int], float]:
    """The exact `top` rows nearest `query` (numpy brute force) and the seconds it took."""
    import numpy as np

    start = time.perf_counter()
    scores = vectors @ query
    if keep is not None:
        scores = np.where(keep, scores, -np.inf)
    best = np.argpartition(-scores, top)[:top]
    return {int(i) for i in best}, time.perf_counter() - start


def measure_search(
    name: str, store: Any, vectors: Any, filtered: bool, top: int = 10, queries: int = 200
) -> list[object]:
    """One row: the search latency p50/p95 of `store` over `vectors` (the top `top`; a filter
    keeps half the rows when `filtered`), the numpy brute-force floor, and recall against it."""
    import numpy as np

    from chatmemory.rag import Embedding, EmbeddingSearchRequest, key

    probes = unit_vectors(queries, seed=99)
    keep = (np.arange(len(vectors)) % 2 == 0) if filtered else None
    condition = key("half").eq(0) if filtered else None
    ours: list[float] = []
    floor: list[float] = []
    recalls: list[float] = []
    for query in probes:
        request = EmbeddingSearchRequest(
            query_embedding=Embedding(tuple(query.tolist())), max_results=top, filter=condition
        )
        start = time.perf_counter()
        matches = store.search(request).matches
        ours.append(time.perf_counter() - start)
        found = {int(m.embedded.text.split()[1]) for m in matches if m.embedded}
        truth, seconds = exact_top(vectors, query, top, keep)
        floor.append(seconds)
        recalls.append(len(found & truth) / top)
    return [
        name,
        f"{len(vectors):,}",
        "half the rows" if filtered else "none",
        f"{statistics.median(ours) * 1e3:,.2f} ms",
        f"{percentile(ours, 0.95) * 1e3:,.2f} ms",
        f"{statistics.median(floor) * 1e3:,.2f} ms",
        f"{statistics.median(ours) / statistics.median(floor):.1f}×",
        f"{statistics.mean(recalls):.3f}",
    ]
