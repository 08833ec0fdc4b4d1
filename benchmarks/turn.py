"""A chat turn against the least the database can do: chatmemory beside the raw driver (issue 7).

One turn is what a chat application does per user message: `add` the user message, read the
4,000-token window for the model call (`messages()`), `add` the answer; exact o200k counts.
Before timing, N messages are stored for the memory id. The floor is the least work any memory
could do with the same driver, in the same process, on the same prefilled data: two inserts, each
its own commit (RPUSHes on Redis), and one read of the window's tail rows, fetched but not
decoded (as many rows as fit the 4,000 tokens then: the floor knows the count), with the JSON and
the token counts computed beforehand. Floor and chatmemory run one after the other, in
alternating blocks of turns, so drift on the machine hits both alike.

Only the public API is used (`from chatmemory import ...`, store constructors), so the benchmark
keeps measuring while the internals change.
"""

from __future__ import annotations

import cProfile
import io
import itertools
import os
import pstats
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, closing, contextmanager
from pathlib import Path
from typing import Any

from chatmemory import (
    AiMessage,
    ChatMessage,
    OpenAiTokenCountEstimator,
    TokenWindowChatMemory,
    UserMessage,
    message_to_json,
)

from .common import against, conversation, table

# As in tests/conftest.py (not imported from benchmarks/stores.py, which reaches into store
# internals for its fill and may break while they change).
REDIS_URL = os.environ.get("CHATMEMORY_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
POSTGRES_DSN = os.environ.get(
    "CHATMEMORY_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test"
)

CHECKPOINTS = (100, 1_000, 10_000, 100_000)
QUICK_CHECKPOINTS = (100, 1_000)
PROFILE_N = 10_000
TURNS = 300
"""Timed turns per side and N (after `WARMUP` untimed ones)."""
WARMUP = 20
BLOCK = 20
"""Turns in a row on one side before the other side takes over."""
PREFILL_CHUNK = 5_000
"""Messages per `memory.add(*chunk)` while prefilling: one commit each."""
MAX_TOKENS = 4_000
MEMORY_ID = "turn"
ESTIMATOR = OpenAiTokenCountEstimator("gpt-4o-mini")

Turn = Callable[[int], None]
"""One turn, given its number (fresh text each time)."""
Row = tuple[str, int]
"""A message as the floor stores it: its JSON and its precomputed token count."""
Payload = tuple[str, int, str, int]
"""A turn for the floor: the user message's JSON and tokens, then the answer's."""


def _turn_messages(count: int) -> list[tuple[UserMessage, AiMessage]]:
    """The messages of `count` turns, each with text of its own."""
    return [
        (
            UserMessage(f"Turn {number}: could you tell me a little about the tides, briefly?"),
            AiMessage(
                f"Answer {number}: tides come from the moon's pull and the sun's; here are the "
                f"key facts first, then where to read more."
            ),
        )
        for number in range(count)
    ]


def _row(message: ChatMessage) -> Row:
    return message_to_json(message), ESTIMATOR.count_message(message)


# -- chatmemory ------------------------------------------------------------------------------


def _ours(store: Any, prefill: Sequence[ChatMessage], count: int) -> tuple[Turn, int]:
    """Our turn on `store` with `prefill` stored first, and the rows in the window then."""
    memory = TokenWindowChatMemory(
        id=MEMORY_ID, max_tokens=MAX_TOKENS, estimator=ESTIMATOR, store=store
    )
    for start in range(0, len(prefill), PREFILL_CHUNK):
        memory.add(*prefill[start : start + PREFILL_CHUNK])
    window = len(memory.messages())
    messages = _turn_messages(count)

    def turn(number: int) -> None:
        user, answer = messages[number]
        memory.add(user)
        memory.messages()
        memory.add(answer)

    return turn, window


@contextmanager
def _sqlite_store(tmp: Path) -> Iterator[Any]:
    from chatmemory import SqliteChatMemoryStore

    store = SqliteChatMemoryStore(tmp / "ours.db")
    try:
        yield store
    finally:
        store.close()


@contextmanager
def _redis_store(tmp: Path) -> Iterator[Any]:
    from chatmemory import RedisChatMemoryStore

    prefix = f"chatmemory-bench-turn-{uuid.uuid4().hex[:8]}:"
    try:
        store = RedisChatMemoryStore(url=REDIS_URL, prefix=prefix)
        try:
            yield store
        finally:
            store.close()
    finally:
        _redis_delete(prefix + "*")


@contextmanager
def _postgres_store(tmp: Path) -> Iterator[Any]:
    from chatmemory import PostgresChatMemoryStore

    schema = f"chatmemory_bench_turn_{uuid.uuid4().hex[:8]}"
    try:
        store = PostgresChatMemoryStore(POSTGRES_DSN, schema=schema)
        try:
            yield store
        finally:
            store.close()
    finally:
        _postgres_drop(schema)


# -- the floors ------------------------------------------------------------------------------


@contextmanager
def _sqlite_floor(
    tmp: Path, prefill: Sequence[Row], payloads: Sequence[Payload], tails: Sequence[int]
) -> Iterator[Turn]:
    db = sqlite3.connect(tmp / "floor.db", isolation_level=None)  # autocommit: one txn each
    try:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        db.execute(
            "CREATE TABLE m (memory_id TEXT NOT NULL, seq INTEGER NOT NULL, message TEXT NOT NULL,"
            " tokens INTEGER NOT NULL, PRIMARY KEY (memory_id, seq))"
        )
        insert = "INSERT INTO m VALUES (?, ?, ?, ?)"
        with closing(db.cursor()) as cursor:
            cursor.execute("BEGIN")
            cursor.executemany(insert, ((MEMORY_ID, s, j, t) for s, (j, t) in enumerate(prefill)))
            cursor.execute("COMMIT")
        read = "SELECT seq, message, tokens FROM m WHERE memory_id = ? ORDER BY seq DESC LIMIT ?"
        seqs = itertools.count(len(prefill))

        def turn(number: int) -> None:
            user, user_tokens, answer, answer_tokens = payloads[number]
            db.execute(insert, (MEMORY_ID, next(seqs), user, user_tokens))
            db.execute(read, (MEMORY_ID, tails[number])).fetchall()
            db.execute(insert, (MEMORY_ID, next(seqs), answer, answer_tokens))

        yield turn
    finally:
        db.close()


@contextmanager
def _redis_floor(
    tmp: Path, prefill: Sequence[Row], payloads: Sequence[Payload], tails: Sequence[int]
) -> Iterator[Turn]:
    import redis

    key = f"chatmemory-bench-turn-floor-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(REDIS_URL)
    try:
        for start in range(0, len(prefill), PREFILL_CHUNK):
            client.rpush(key, *(json for json, _ in prefill[start : start + PREFILL_CHUNK]))

        def turn(number: int) -> None:
            user, _, answer, _ = payloads[number]
            client.rpush(key, user)
            client.lrange(key, -tails[number], -1)
            client.rpush(key, answer)

        yield turn
    finally:
        client.delete(key)
        client.close()


@contextmanager
def _postgres_floor(
    tmp: Path, prefill: Sequence[Row], payloads: Sequence[Payload], tails: Sequence[int]
) -> Iterator[Turn]:
    import psycopg
    from psycopg import sql

    schema = f"chatmemory_bench_turn_floor_{uuid.uuid4().hex[:8]}"
    name = sql.Identifier(schema, "m")
    try:
        with psycopg.connect(POSTGRES_DSN, autocommit=True) as connection:
            connection.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
            connection.execute(
                sql.SQL(
                    'CREATE TABLE {} (memory_id text COLLATE "C" NOT NULL, seq bigint NOT NULL,'
                    " message jsonb NOT NULL, tokens integer NOT NULL,"
                    " PRIMARY KEY (memory_id, seq))"
                ).format(name)
            )
            with (
                connection.cursor() as cursor,
                cursor.copy(sql.SQL("COPY {} FROM STDIN").format(name)) as copy,
            ):
                for seq, (json, tokens) in enumerate(prefill):
                    copy.write_row((MEMORY_ID, seq, json, tokens))
            connection.execute(sql.SQL("ANALYZE {}").format(name))
            insert = sql.SQL("INSERT INTO {} VALUES (%s, %s, %s, %s)").format(name)
            # ::text: the rows come back as the database holds them, not decoded into Python.
            read = sql.SQL(
                "SELECT seq, message::text, tokens FROM {} WHERE memory_id = %s"
                " ORDER BY seq DESC LIMIT %s"
            ).format(name)
            seqs = itertools.count(len(prefill))

            def turn(number: int) -> None:
                user, user_tokens, answer, answer_tokens = payloads[number]
                connection.execute(insert, (MEMORY_ID, next(seqs), user, user_tokens), prepare=True)
                connection.execute(read, (MEMORY_ID, tails[number]), prepare=True).fetchall()
                connection.execute(
                    insert, (MEMORY_ID, next(seqs), answer, answer_tokens), prepare=True
                )

            yield turn
    finally:
        _postgres_drop(schema)


# -- servers ---------------------------------------------------------------------------------


def _sqlite_away() -> str | None:
    return None


def _redis_away() -> str | None:
    try:
        import redis

        client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=5)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as error:  # no driver, no server: say which
        return f"{REDIS_URL}: {type(error).__name__}: {error}"
    return None


def _postgres_away() -> str | None:
    try:
        import psycopg

        psycopg.connect(POSTGRES_DSN, connect_timeout=2).close()
    except Exception as error:  # no driver, no server: say which
        return f"{POSTGRES_DSN}: {type(error).__name__}: {error}"
    return None


def _redis_delete(pattern: str) -> None:
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    try:
        keys = list(client.scan_iter(match=pattern, count=1_000))
        for start in range(0, len(keys), 1_000):
            client.delete(*keys[start : start + 1_000])
    finally:
        client.close()


def _postgres_drop(schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(POSTGRES_DSN, autocommit=True) as connection:
        connection.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
        )


StoreFactory = Callable[[Path], AbstractContextManager[Any]]
FloorFactory = Callable[
    [Path, Sequence[Row], Sequence[Payload], Sequence[int]], AbstractContextManager[Turn]
]
STORES: dict[str, tuple[Callable[[], str | None], StoreFactory, FloorFactory, str]] = {
    "sqlite": (
        _sqlite_away,
        _sqlite_store,
        _sqlite_floor,
        "file in WAL, synchronous=NORMAL: 2 INSERT commits + SELECT of the tail by seq",
    ),
    "redis": (_redis_away, _redis_store, _redis_floor, "RPUSH ×2 + LRANGE of the tail"),
    "postgres": (
        _postgres_away,
        _postgres_store,
        _postgres_floor,
        "autocommit, prepared: 2 INSERTs + SELECT of the tail by seq",
    ),
}


# -- running -----------------------------------------------------------------------------------


def _data(n: int, turns: int) -> tuple[list[ChatMessage], list[Row], list[Payload]]:
    """The N messages to prefill, the same as the floor's rows, and the floor's turns."""
    messages = list(itertools.islice(conversation(), n))
    payloads = []
    for user, answer in _turn_messages(turns):
        (user_json, user_tokens), (answer_json, answer_tokens) = _row(user), _row(answer)
        payloads.append((user_json, user_tokens, answer_json, answer_tokens))
    return messages, [_row(m) for m in messages], payloads


def _tails(prefill: Sequence[Row], payloads: Sequence[Payload]) -> list[int]:
    """For each turn, how many of the newest rows fit `MAX_TOKENS` when the floor reads them
    (after the turn's user message): the count a memory would know without asking."""
    tokens = [t for _, t in prefill]
    for _, user_tokens, _, answer_tokens in payloads:
        tokens += (user_tokens, answer_tokens)
    tails: list[int] = []
    first = total = 0
    for end, count in enumerate(tokens, start=1):
        total += count
        while total > MAX_TOKENS:
            total -= tokens[first]
            first += 1
        if end > len(prefill) and (end - len(prefill)) % 2 == 1:  # just after a user message
            tails.append(end - first)
    return tails


@contextmanager
def _sides(name: str, n: int, turns: int) -> Iterator[tuple[Turn, Turn, int]]:
    """(the floor's turn, our turn, rows in our window) at N=`n`, for turns numbered below
    `turns`; all cleaned up after."""
    _, store_factory, floor_factory, _ = STORES[name]
    messages, rows, payloads = _data(n, turns)
    with tempfile.TemporaryDirectory() as tmp, store_factory(Path(tmp)) as store:
        ours, window = _ours(store, messages, turns)
        with floor_factory(Path(tmp), rows, payloads, _tails(rows, payloads)) as floor:
            yield floor, ours, window


def _timed(floor: Turn, ours: Turn) -> tuple[list[float], list[float]]:
    """Seconds per turn of each side: alternating blocks, the first `WARMUP` turns untimed."""
    samples: tuple[list[float], list[float]] = ([], [])
    for start in range(0, WARMUP + TURNS, BLOCK):
        for side, turn in zip(samples, (floor, ours), strict=True):
            for number in range(start, min(start + BLOCK, WARMUP + TURNS)):
                began = time.perf_counter()
                turn(number)
                if number >= WARMUP:
                    side.append(time.perf_counter() - began)
    return samples


def _p90(samples: Sequence[float]) -> float:
    return statistics.quantiles(samples, n=10)[-1]


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:,.0f} µs"


def run(quick: bool = False) -> Iterator[str]:
    checkpoints = QUICK_CHECKPOINTS if quick else CHECKPOINTS
    for name, (away, _, _, floor_work) in STORES.items():
        reason = away()
        if reason is not None:
            yield f"\n(skipping the chat turn on {name}: its server does not answer: {reason})"
            continue
        rows = []
        first: float | None = None
        for n in checkpoints:
            with _sides(name, n, WARMUP + TURNS) as (floor, ours, window):
                floor_s, ours_s = _timed(floor, ours)
            median = statistics.median(ours_s)
            first = median if first is None else first
            rows.append(
                [
                    f"{n:,}",
                    window,
                    _us(statistics.median(floor_s)),
                    _us(_p90(floor_s)),
                    _us(median),
                    _us(_p90(ours_s)),
                    against(median / statistics.median(floor_s), 1.5),
                    against(median / first, 1.3),
                ]
            )
        yield table(
            f"Chat turn on {name}: add + messages() + add, {MAX_TOKENS:,}-token window, "
            f"median and p90 of {TURNS} turns per side\n(floor: {floor_work})",
            [
                "N stored",
                "window rows",
                "floor",
                "floor p90",
                "chatmemory",
                "p90",
                "vs floor",
                f"vs N={checkpoints[0]:,}",
            ],
            rows,
        )


def profile(name: str, n: int = PROFILE_N, top: int = 25) -> str:
    """cProfile of our turns on `name` at N=`n`: where the gap to the floor goes."""
    reason = STORES[name][0]()
    if reason is not None:
        return f"(cannot profile the chat turn on {name}: its server does not answer: {reason})"
    with _sides(name, n, 2 * (WARMUP + TURNS)) as (floor, ours, window):
        floor_s, ours_s = _timed(floor, ours)
        profiler = cProfile.Profile()
        profiler.enable()
        for number in range(WARMUP + TURNS, 2 * (WARMUP + TURNS)):
            ours(number)
        profiler.disable()
    out = io.StringIO()
    out.write(
        f"\nProfile of {WARMUP + TURNS} more chat turns on {name} at N={n:,}"
        f" ({window} window rows); unprofiled median: floor {_us(statistics.median(floor_s))},"
        f" chatmemory {_us(statistics.median(ours_s))}\n"
    )
    stats = pstats.Stats(profiler, stream=out)
    for order in ("cumulative", "tottime"):
        out.write(f"\n-- top {top} by {order} --\n")
        stats.sort_stats(order).print_stats(top)
    return out.getvalue()
