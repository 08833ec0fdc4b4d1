"""`PgVectorEmbeddingStore`: embeddings in PostgreSQL with the pgvector extension
(``pip install 'chatmemory[pgvector]'``: psycopg 3, psycopg_pool and the `pgvector` adapter).

One table: the id, the vector (`vector(dimension)`, an HNSW index for cosine distance), the
segment's text and its metadata (`jsonb`, a GIN index, `jsonb_path_ops`), and a generated
`tsvector` of the text with a GIN index, so full-text and hybrid retrieval need nothing more.
Metadata filters become SQL with bound parameters and mean what they mean on every store (see
`chatmemory.rag.key`); their equalities (`eq`, `in_`) are served by the metadata index, so
`select`, `remove_all(filter)` and a filtered search find one user's rows without reading the
table. A table made before that index gains it when a store opens it with `create=True`.

Search without a filter is approximate, as HNSW is: `ef_search` (default 40, pgvector's own) is
how many candidates the index keeps per search; raise it for recall. A search for more rows
than that keeps as many candidates as it asks for (pgvector returns no more rows than it
keeps), set on the connection in the same round trip as the search. Search with a filter is
exact: the distance of every row that passes is computed and the nearest are kept (the index
would filter its nearest candidates afterwards and lose the rows that pass behind nearer ones),
so its cost grows with the rows that pass: a filter on one user's rows is cheap, one that passes
most of a large table costs a scan of it (in parallel when the server allows; only ids and
distances are sorted). With `approximate_filters=True` a filtered search asks the HNSW index
first (see the class). A hybrid request (with its query text) has the server compute both
rankings at once, on two connections of the pool. `min_score` only drops the tail of the
nearest rows. The relevance score is LangChain4j's, ``(cosine + 1) / 2``.

Full-text search ranks (`ts_rank_cd`) the rows holding any of the query's rarest words, up to
2,000 rows in all (see `_selective`): a word found in most rows would cost a read of each of
them and tells little; a query of such words alone finds nothing by its words, and a hybrid
request is then answered by its vectors. Each word's rows are counted on the GIN index once per
store, again when the table's statistics say it grew by a quarter.
"""

from __future__ import annotations

import re
import uuid
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .._errors import ConfigurationError, StoreError
from ._embeddings import (
    UNSET,
    Embedding,
    EmbeddingMatch,
    EmbeddingSearchRequest,
    EmbeddingSearchResult,
    SingleWrites,
    _Unset,
    check_filter,
    check_finite,
    check_metadata,
    check_text_search,
    removal,
)
from ._filters import Filter
from ._hybrid import fused_result, vector_half
from ._selective import ROWS, selective
from ._values import TextSegment
from ._vectors import as_matrix

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg_pool import ConnectionPool

__all__ = ["PgVectorEmbeddingStore"]

_INSTALL = "pip install 'chatmemory[pgvector]'"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,40}")
_CONFIG = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


_SPARE_WAIT = 0.001
"""Seconds a hybrid search waits for a second connection (see `_spare`)."""
_COPY_FROM = 64
"""From this many rows, `add_all` sends them with COPY (below, one statement of the rows as
arrays costs less than the staging table)."""


def _modules() -> tuple[Any, Any, Any, Any]:
    try:
        import numpy
        import psycopg
        import psycopg_pool
        from pgvector.psycopg import register_vector
    except ImportError as error:
        raise ImportError(
            f"PgVectorEmbeddingStore needs psycopg 3, psycopg_pool, pgvector and numpy, which "
            f"are not installed or do not load ({error}); install them with: {_INSTALL}"
        ) from error
    return numpy, psycopg, psycopg_pool, register_vector


class PgVectorEmbeddingStore(SingleWrites):
    """Embeddings in a PostgreSQL table, searched with pgvector.

    ``PgVectorEmbeddingStore("postgresql://localhost/app", dimension=384)`` keeps its own
    connection pool (closed by `close()`), creates the extension, table and indexes when
    missing (`create=True`), and checks that an existing table has the same dimension.
    `table` is a plain SQL name, optionally ``schema.table``; `text_search_config` is the
    PostgreSQL text-search configuration of the full-text column ("english", "simple"...).
    Failures of the server raise `StoreError`.

    `add_all` of a few rows upserts them in one statement (their columns as arrays); of many
    (64 or more) sends them with ``COPY`` in binary into a staging table, then upserts them in
    one statement; a write of at least `rebuild_index_from` rows,
    and at least as many as the table held, drops the HNSW index and builds it again once the
    rows are in (building it at once is much faster than maintaining it row by row; searches
    wait for that transaction), with ``maintenance_work_mem`` raised for that transaction to what
    the graph needs, so that it is built in memory (4x faster at 100,000 rows of 384 dimensions).

    A search with a filter is exact by default: it scans every row that passes, so a filter
    passing most of a large table (semantic recall's ``memory_id`` in a store holding one long
    conversation) costs a scan of it. `approximate_filters=True` asks the HNSW index first: its
    `ef_search` nearest candidates, those passing the filter, the nearest `max_results` of them
    (ties by id), approximate as a search without a filter is. That answer is kept only when it
    holds `max_results` rows; a selective filter (fewer came back: its rows lie behind nearer
    ones that do not pass) gets the exact query instead, in the same connection. Turn it on
    when filtered searches are on the hot path and most filters pass many rows (recall per
    turn); leave it off where a filtered search must be complete. `select`, `remove_all(filter)`
    (forgetting) and full-text search are exact either way; a hybrid request's vector side gets
    the same treatment as `search`.
    """

    def __init__(
        self,
        dsn: str,
        *,
        dimension: int,
        table: str = "chatmemory_embeddings",
        text_search_config: str = "english",
        create: bool = True,
        ef_search: int = 40,
        rebuild_index_from: int = 10_000,
        min_size: int = 1,
        max_size: int = 4,
        timeout: float = 30.0,
        approximate_filters: bool = False,
    ) -> None:
        numpy, psycopg, psycopg_pool, register_vector = _modules()
        if isinstance(dimension, bool) or not isinstance(dimension, int) or dimension < 1:
            raise ConfigurationError(f"`dimension` must be a positive int, got {dimension!r}")
        parts = table.split(".") if isinstance(table, str) else [repr(table)]
        if not 1 <= len(parts) <= 2 or not all(_NAME.fullmatch(p) for p in parts):
            raise ConfigurationError(
                f"`table` is a SQL name of letters, digits and underscores (up to 41), "
                f"optionally schema.table, got {table!r}"
            )
        if not isinstance(text_search_config, str) or not _CONFIG.fullmatch(text_search_config):
            raise ConfigurationError(
                f"`text_search_config` names a text-search configuration such as 'english' or "
                f"'simple', got {text_search_config!r}"
            )
        if isinstance(ef_search, bool) or not isinstance(ef_search, int) or ef_search < 1:
            raise ConfigurationError(f"`ef_search` must be a positive int, got {ef_search!r}")
        if (
            isinstance(rebuild_index_from, bool)
            or not isinstance(rebuild_index_from, int)
            or rebuild_index_from < 1
        ):
            raise ConfigurationError(
                f"`rebuild_index_from` must be a positive int, got {rebuild_index_from!r}"
            )
        if not isinstance(approximate_filters, bool):
            raise ConfigurationError(
                f"`approximate_filters` is True (a filtered search asks the HNSW index first) "
                f"or False (always exact), got {approximate_filters!r}"
            )
        self._rebuild_from = rebuild_index_from
        self._approximate_filters = approximate_filters
        self.dimension = dimension
        self.table = table
        self._numpy = numpy
        self._psycopg = psycopg
        self._sql = _Statements(psycopg.sql, parts, text_search_config, dimension)
        self._config = text_search_config
        self._word_rows: dict[str, tuple[int, int]] = {}  # see _selective
        self._ef_search = ef_search
        self._efs: weakref.WeakKeyDictionary[Connection[Any], int] = weakref.WeakKeyDictionary()
        """`hnsw.ef_search` as each pooled connection has it (see `_nearest`)."""

        def configure(conn: Connection[Any]) -> None:
            if create:  # the type must exist before the adapter can register it
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            register_vector(conn)
            conn.execute(f"SET hnsw.ef_search = {int(ef_search)}")
            self._efs[conn] = ef_search

        self._pool: ConnectionPool[Any] = psycopg_pool.ConnectionPool(
            dsn,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            open=False,
            kwargs={"autocommit": True},
            configure=configure,
            name=f"chatmemory-{table}",
        )
        with self._errors("open"):
            self._pool.open(wait=True, timeout=timeout)
        try:
            with self._errors("create the table"), self._pool.connection() as conn:
                if create:
                    for statement in self._sql.create:
                        conn.execute(statement)
                self._check_dimension(conn)
        except BaseException:
            self._pool.close()
            raise

    def __repr__(self) -> str:
        return f"PgVectorEmbeddingStore(table={self.table!r}, dimension={self.dimension})"

    def close(self) -> None:
        """Closes the connection pool."""
        self._pool.close()

    def __enter__(self) -> PgVectorEmbeddingStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing -----------------------------------------------------------------------------

    def add_all(
        self,
        embeddings: Sequence[Embedding] | npt.NDArray[Any],
        segments: Sequence[TextSegment] | None = None,
        *,
        ids: Sequence[str] | None = None,
    ) -> list[str]:
        """Store several (a list of Embeddings, or an `(n, dimension)` array) in one
        transaction; an id already stored is replaced."""
        if isinstance(embeddings, np.ndarray):
            embeddings = [Embedding.trusted(row) for row in as_matrix(embeddings)]
        embeddings = list(embeddings)
        for embedding in embeddings:
            self._check_embedding(embedding)
        if segments is not None and len(segments) != len(embeddings):
            raise ConfigurationError(
                f"add_all got {len(embeddings)} embeddings but {len(segments)} segments"
            )
        if ids is not None and len(ids) != len(embeddings):
            raise ConfigurationError(f"add_all got {len(embeddings)} embeddings but {len(ids)} ids")
        chosen = [str(uuid.uuid4()) for _ in embeddings] if ids is None else list(ids)
        if not all(isinstance(i, str) and i for i in chosen):
            raise ConfigurationError(f"ids are non-empty str, got {chosen!r}")
        given: list[TextSegment | None] = (
            list(segments) if segments is not None else [None] * len(embeddings)
        )
        check_metadata(given, chosen)
        check_finite(embeddings)
        from ._pg_filters import jsonb

        last = {row_id: n for n, row_id in enumerate(chosen)}  # a repeated id: the last wins
        rows = [
            (
                chosen[n],
                self._numpy.asarray(embeddings[n].array, dtype=self._numpy.float32),
                None if given[n] is None else given[n].text,  # type: ignore[union-attr]
                jsonb(given[n].metadata if given[n] is not None else {}),  # type: ignore[union-attr]
            )
            for n in sorted(last.values())
        ]
        if rows:
            with self._errors("add embeddings"), self._pool.connection() as conn:
                if len(rows) < _COPY_FROM:  # one statement (its own transaction): one round trip
                    columns = [list(column) for column in zip(*rows, strict=True)]
                    conn.execute(self._sql.upsert, columns)
                else:
                    with conn.transaction(), conn.cursor() as cursor:
                        self._copy(cursor, rows)
        return chosen

    def _copy(self, cursor: Any, rows: list[tuple[Any, ...]]) -> None:
        """Many rows: COPY in binary to a staging table, one upsert from it, and the HNSW index
        built again after a bulk load (see the class)."""
        rebuild = len(rows) >= self._rebuild_from
        if rebuild:
            cursor.execute(self._sql.estimated_count)
            rebuild = len(rows) >= (cursor.fetchone() or (0,))[0]
        cursor.execute(self._sql.stage)
        with cursor.copy(self._sql.copy) as copy:
            copy.set_types(["text", "vector", "text", "jsonb"])
            for row in rows:
                copy.write_row(row)
        if rebuild:
            cursor.execute(self._sql.drop_index)
        cursor.execute(self._sql.upsert_staged)
        if rebuild:
            # The graph built in memory: one that outgrows maintenance_work_mem (64 MB by
            # default, about 30,000 rows of 384 dimensions) is finished on disk, several times
            # slower. The rows in the table are at most twice those loaded (see above).
            cursor.execute(self._sql.build_memory(2 * len(rows)))
            cursor.execute(self._sql.hnsw)

    def remove_all(
        self, ids: Sequence[str] | Filter | _Unset = UNSET, *, filter: Filter | _Unset = UNSET
    ) -> None:
        """Remove these ids, or what passes `filter`, or (called with no argument) everything."""
        chosen = removal(ids, filter)
        if isinstance(chosen, list):
            statement, params = self._sql.delete_ids, [chosen]
        else:
            statement, params = self._sql.delete_where(chosen)
        with self._errors("remove embeddings"), self._pool.connection() as conn:
            conn.execute(statement, params, prepare=False)  # planned for its filter: see _sql

    def select(self, filter: Filter) -> dict[str, TextSegment | None]:
        """Every entry whose metadata passes `filter`: its segment, by id (an exact ``WHERE``,
        which the metadata index serves for `eq` and `in_`)."""
        statement, params = self._sql.select_where(check_filter(filter))
        with self._errors("select embeddings"), self._pool.connection() as conn:
            rows = conn.execute(statement, params, prepare=False).fetchall()
        return {str(id): _segment(text, metadata) for id, text, metadata in rows}

    # -- reading -----------------------------------------------------------------------------

    def search(self, request: EmbeddingSearchRequest) -> EmbeddingSearchResult:
        """The nearest embeddings by cosine, best first, at or above `min_score`: approximate
        (the HNSW index) without a filter, exact with one (unless `approximate_filters` and the
        index finds `max_results` rows that pass: see the class)."""
        if not isinstance(request, EmbeddingSearchRequest):
            raise ConfigurationError(f"search() takes an EmbeddingSearchRequest, got {request!r}")
        self._check_embedding(request.query_embedding)
        if request.query is not None:  # hybrid: see _hybrid and `_hybrid` below
            return self._hybrid(request)
        with self._errors("search"), self._pool.connection() as conn:
            with conn.pipeline():
                nearest = self._nearest(conn, request)
            rows = nearest()
        return EmbeddingSearchResult(self._by_distance(rows, request.min_score))

    def _hybrid(self, request: EmbeddingSearchRequest) -> EmbeddingSearchResult:
        """Both rankings, fused (see `_hybrid.fused_search`), the server computing them at
        once: the vector query is sent on one connection (a pipeline, not waited for), the
        full-text search runs on a second one meanwhile, then the vectors' rows are read. On
        a pool with no second connection free, one after the other on the first."""
        assert request.query is not None
        vectors = vector_half(request)
        depth = vectors.max_results
        with self._errors("search"), self._pool.connection() as conn:
            with conn.pipeline():
                nearest = self._nearest(conn, vectors)
                with self._spare() as other:
                    texts = (
                        None
                        if other is None
                        else self._words(other, request.query, depth, request.filter)
                    )
            rows = nearest()
            if texts is None:
                texts = self._words(conn, request.query, depth, request.filter)
        return fused_result(request, self._by_distance(rows, request.min_score), texts)

    @contextmanager
    def _spare(self) -> Iterator[Connection[Any] | None]:
        """A second connection of the pool when one is free at once (or could be opened);
        None when every other one is in use (a thread waiting for it while holding one could
        wait for ever)."""
        try:
            conn = self._pool.getconn(timeout=_SPARE_WAIT)
        except _pool_errors():
            yield None
            return
        try:
            yield conn
        finally:
            self._pool.putconn(conn)

    def _nearest(
        self, conn: Connection[Any], request: EmbeddingSearchRequest
    ) -> Callable[[], list[Any]]:
        """Send the search for the `max_results` rows nearest `request`'s embedding (among
        those passing its filter) on `conn`, in a pipeline; the function returned reads them
        (after the pipeline ends). `approximate_filters`: the HNSW index's nearest candidates
        that pass the filter, the nearest `max_results` of them; when fewer came back (a
        selective filter: rows that pass may be behind nearer ones that do not), the exact
        query runs then, on the same connection."""
        query = self._numpy.asarray(request.query_embedding.array, dtype=self._numpy.float32)
        condition, top = request.filter, request.max_results
        indexed = condition is not None and self._approximate_filters
        candidates = max(self._ef_search, top) if condition is None or indexed else None
        if candidates is not None and self._efs.get(conn) != candidates:
            # pgvector returns no more rows than its scans keep (`hnsw.ef_search`): raised for
            # a search asking for more, in the same round trip
            self._efs.pop(conn, None)  # (known again once the search ran)
            conn.execute(self._sql.set_ef(candidates))
        if indexed:
            assert condition is not None
            assert candidates is not None
            statement, params = self._sql.nearest_indexed(query, condition, top, candidates)
        else:
            statement, params = self._sql.nearest(query, condition, top)
        cursor = conn.execute(statement, params, prepare=False, binary=True)

        def rows() -> list[Any]:
            found = cursor.fetchall()
            if candidates is not None:
                self._efs[conn] = candidates
            if indexed and len(found) < top:
                statement, params = self._sql.nearest(query, condition, top)
                found = conn.execute(statement, params, prepare=False, binary=True).fetchall()
            return found

        return rows

    def _by_distance(self, rows: list[Any], min_score: float) -> tuple[EmbeddingMatch, ...]:
        """The matches of rows found by distance, nearest first, ties by id (the HNSW index
        orders by distance alone), at or above `min_score` (applied to the nearest rows, never
        before: it cuts only the tail)."""
        rows.sort(key=lambda row: (row[4], row[0]))
        return tuple(
            self._match(row, score=1 - float(row[4]) / 2)
            for row in rows
            if 1 - float(row[4]) / 2 >= min_score
        )

    def search_text(
        self, text: str, *, max_results: int = 3, filter: Filter | None = None
    ) -> list[EmbeddingMatch]:
        """The segments whose words best match `text` (any of its rare words, see the module;
        ranked by `ts_rank_cd`), best first."""
        check_text_search(text, max_results, filter)
        with self._errors("search the text"), self._pool.connection() as conn:
            return self._words(conn, text, max_results, filter)

    def _words(
        self, conn: Connection[Any], text: str, max_results: int, filter: Filter | None
    ) -> list[EmbeddingMatch]:
        """`search_text` on `conn`."""
        statement, params = self._sql.full_text(filter)
        row = conn.execute(self._sql.lexemes, [text]).fetchone()
        terms, size = (row[0], row[1] or 0) if row else ([], 0)

        def count(words: list[str]) -> dict[str, int]:
            found = conn.execute(self._sql.word_rows, [words], prepare=False).fetchall()
            return {word: int(number) for word, number in found if number}

        # the words worth ranking by: see _selective
        chosen = selective(list(dict.fromkeys(terms)), self._word_rows, size, count)
        if not chosen:
            return []
        query = " | ".join(chosen)
        found = conn.execute(
            statement, [query, query, *params, max_results], prepare=False, binary=True
        )
        return [self._match(row, score=float(row[4])) for row in found.fetchall()]

    def count(self) -> int:
        """How many embeddings are stored."""
        with self._errors("count"), self._pool.connection() as conn:
            row = conn.execute(self._sql.count).fetchone()
        return int(row[0]) if row else 0

    # -- helpers -----------------------------------------------------------------------------

    def _match(self, row: Sequence[Any], *, score: float) -> EmbeddingMatch:
        id, vector, text, metadata = row[:4]
        return EmbeddingMatch(
            score, id, Embedding.trusted(vector.to_numpy()), _segment(text, metadata)
        )

    def _check_embedding(self, embedding: object) -> None:
        if not isinstance(embedding, Embedding):
            raise ConfigurationError(f"expected an Embedding, got {embedding!r}")
        if embedding.dimension != self.dimension:
            raise ConfigurationError(
                f"{self!r} holds embeddings of dimension {self.dimension}, got one of "
                f"{embedding.dimension}: use the embedding model the store was made for"
            )

    def _check_dimension(self, conn: Connection[Any]) -> None:
        row = conn.execute(self._sql.column_type).fetchone()
        if row is None:
            raise StoreError(
                f"the table {self.table} does not exist; create it with create=True", store=self
            )
        expected = f"vector({self.dimension})"
        if row[0] != expected:
            raise ConfigurationError(
                f"the table {self.table} holds {row[0]}, not {expected}: open it with the "
                f"dimension it was made with, or use another table"
            )

    @contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        psycopg = self._psycopg
        try:
            yield
        except (psycopg.Error, _pool_errors()) as error:
            raise StoreError(f"could not {doing} in {self.table}: {error}", store=self) from error


def _pool_errors() -> type[Exception]:
    from psycopg_pool import PoolTimeout

    return PoolTimeout


class _Statements:
    """Every statement of one table, composed once.

    Those whose plan depends on their parameters (a filter: the metadata index for one user's
    rows, a scan for most rows; a tsquery: the GIN index for rare words) run unprepared
    (`prepare=False`): psycopg prepares a statement run five times, and PostgreSQL may then
    plan it once for any parameters (a generic plan, chosen without knowing how many rows
    pass)."""

    def __init__(self, sql: Any, parts: list[str], config: str, dimension: int) -> None:
        self.sql = sql
        name = sql.Identifier(*parts)
        base = parts[-1]
        self.name = name
        schema = [sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(parts[0]))]
        self.hnsw = sql.SQL(
            "CREATE INDEX IF NOT EXISTS {i} ON {t} USING hnsw (embedding vector_cosine_ops)"
        ).format(i=sql.Identifier(f"{base}_hnsw"), t=name)
        self.create = [
            *(schema if len(parts) == 2 else []),
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {t} (id text PRIMARY KEY, embedding vector({d}) "
                "NOT NULL, text text, metadata jsonb NOT NULL DEFAULT '{{}}', "
                "tsv tsvector GENERATED ALWAYS AS (to_tsvector({c}, coalesce(text, ''))) STORED)"
            ).format(t=name, d=sql.Literal(dimension), c=sql.Literal(config)),
            self.hnsw,
            sql.SQL("CREATE INDEX IF NOT EXISTS {i} ON {t} USING gin (tsv)").format(
                i=sql.Identifier(f"{base}_tsv"), t=name
            ),
            # serves the filters' equalities (`metadata @> ...`, see _pg_filters)
            sql.SQL(
                "CREATE INDEX IF NOT EXISTS {i} ON {t} USING gin (metadata jsonb_path_ops)"
            ).format(i=sql.Identifier(f"{base}_metadata"), t=name),
        ]
        self.column_type = sql.SQL(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = to_regclass({t}) AND attname = 'embedding'"
        ).format(t=sql.Literal(".".join(parts)))
        replace = sql.SQL(
            "ON CONFLICT (id) DO UPDATE SET embedding = excluded.embedding, "
            "text = excluded.text, metadata = excluded.metadata"
        )
        # The rows as four arrays, one per column (their ids distinct: see `add_all`), sent in
        # binary (`%b`: psycopg would write a list of vectors as text, float by float).
        self.upsert = sql.SQL(
            "INSERT INTO {t} (id, embedding, text, metadata) "
            "SELECT * FROM unnest(%b::text[], %b::vector[], %b::text[], %b::jsonb[]) {r}"
        ).format(t=name, r=replace)
        self.stage = sql.SQL(
            "CREATE TEMP TABLE chatmemory_staging (id text, embedding vector({d}), text text, "
            "metadata jsonb) ON COMMIT DROP"
        ).format(d=sql.Literal(dimension))
        self.copy = sql.SQL(
            "COPY chatmemory_staging (id, embedding, text, metadata) FROM STDIN (FORMAT BINARY)"
        )
        self.upsert_staged = sql.SQL(
            "INSERT INTO {t} (id, embedding, text, metadata) "
            "SELECT id, embedding, text, metadata FROM chatmemory_staging {r}"
        ).format(t=name, r=replace)
        self.estimated_count = sql.SQL(
            "SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = to_regclass({t})"
        ).format(t=sql.Literal(".".join(parts)))
        self.dimension = dimension
        self.drop_index = sql.SQL("DROP INDEX IF EXISTS {i}").format(
            i=sql.Identifier(*parts[:-1], f"{base}_hnsw")
        )
        self.delete_ids = sql.SQL("DELETE FROM {t} WHERE id = ANY(%s)").format(t=name)
        self.count = sql.SQL("SELECT count(*) FROM {t}").format(t=name)
        self.config = config
        # Ordered by the distance alone, which the HNSW index serves: approximate.
        self.approximate = sql.SQL(
            "SELECT id, embedding, text, metadata, embedding <=> %s AS distance FROM {t} "
            "ORDER BY embedding <=> %s LIMIT %s"
        ).format(t=name)
        # Every row that passes the filter, with its distance, then the nearest: exact. Only
        # the id and the distance are sorted (sorting whole rows, vectors and text, copied each
        # row that passes); the nearest are joined back for the rest. The distance is sorted
        # as `(embedding <=> q) + 0`, an expression the HNSW index cannot order by: the index
        # would keep its nearest candidates and filter them afterwards, losing the rows that
        # pass behind nearer ones. (Unlike an `OFFSET 0` fence, this lets the planner scan
        # in parallel.) The filter itself may use the metadata index.
        self.exact = sql.SQL(
            "SELECT r.id, r.embedding, r.text, r.metadata, n.distance FROM "
            "(SELECT id, (embedding <=> %s) + 0 AS distance FROM {t} WHERE {w} "
            'ORDER BY distance, id COLLATE "C" LIMIT %s) AS n JOIN {t} AS r ON r.id = n.id'
        )
        # A query's words, as the text-search configuration makes them (each a quoted tsquery
        # operand), and the table's estimated size (for `_selective`'s counts).
        self.lexemes = sql.SQL(
            "SELECT array(SELECT m[1] FROM regexp_matches(plainto_tsquery({c}, %s)::text, "
            "$$'(?:[^']|'')*'$$, 'g') AS m), (SELECT greatest(reltuples::bigint, "
            "pg_stat_get_live_tuples(oid)) FROM pg_class WHERE oid = to_regclass({n}))"
        ).format(c=sql.Literal(config), n=sql.Literal(".".join(parts)))
        # How many rows hold each word, from the GIN index, counted up to ROWS + 1 (a plan for
        # any limit may read the table instead).
        self.word_rows = sql.SQL(
            "SELECT w, (SELECT count(*) FROM (SELECT FROM {t} WHERE tsv @@ w::tsquery LIMIT {n}) "
            "AS s) FROM unnest(%s::text[]) AS w"
        ).format(t=name, n=sql.Literal(ROWS + 1))

    def delete_where(self, condition: Filter | None) -> tuple[Any, list[Any]]:
        where, params = _filter(condition)
        return self.sql.SQL("DELETE FROM {t} WHERE {w}").format(t=self.name, w=where), params

    def select_where(self, condition: Filter) -> tuple[Any, list[Any]]:
        where, params = _filter(condition)
        statement = self.sql.SQL("SELECT id, text, metadata FROM {t} WHERE {w}")
        return statement.format(t=self.name, w=where), params

    def build_memory(self, rows: int) -> Any:
        """``SET LOCAL maintenance_work_mem`` to what an HNSW graph of `rows` rows needs (the
        vectors, their links, a half more), never below the server's setting."""
        needed = rows * (4 * self.dimension + 320) * 3 // 2 // 2**20 + 64
        return self.sql.SQL(
            "SELECT set_config('maintenance_work_mem', greatest({m}, "
            "pg_size_bytes(current_setting('maintenance_work_mem')) / 1048576)::text || 'MB', "
            "true)"
        ).format(m=self.sql.Literal(needed))

    def nearest(self, query: Any, condition: Filter | None, top: int) -> tuple[Any, list[Any]]:
        """The `top` rows nearest `query` that pass `condition`, and the parameters."""
        if condition is None:
            return self.approximate, [query, query, top]
        where, params = _filter(condition)
        return self.exact.format(t=self.name, w=where), [query, *params, top]

    def nearest_indexed(
        self, query: Any, condition: Filter, top: int, candidates: int
    ) -> tuple[Any, list[Any]]:
        """The `top` rows nearest `query` among the HNSW index's `candidates` nearest (its
        `hnsw.ef_search`) that pass `condition` (approximate), and the parameters. The
        candidates are the unfiltered search's, which the planner reads from the index as it
        does for `approximate`; the filter is outside their `LIMIT`, so it cannot be pushed
        under it (to a scan of the rows that pass, or the metadata index's bitmap): one
        statement, no planner settings."""
        where, params = _filter(condition)
        statement = self.sql.SQL(
            "SELECT id, embedding, text, metadata, distance FROM "
            "(SELECT id, embedding, text, metadata, embedding <=> %s AS distance FROM {t} "
            "ORDER BY distance LIMIT %s) AS c WHERE {w} ORDER BY distance LIMIT %s"
        ).format(t=self.name, w=where)
        return statement, [query, candidates, *params, top]

    def set_ef(self, candidates: int) -> Any:
        """``SET hnsw.ef_search`` to `candidates`."""
        return self.sql.SQL("SET hnsw.ef_search = {}").format(self.sql.Literal(candidates))

    def full_text(self, condition: Filter | None) -> tuple[Any, list[Any]]:
        """The rows matching a tsquery (its parameter, twice) that pass `condition`, best ranked
        first, up to a limit (the last parameter): ranked by id and rank alone, the best joined
        back for the rest."""
        where, params = _filter(condition)
        statement = self.sql.SQL(
            "SELECT r.id, r.embedding, r.text, r.metadata, n.rank FROM "
            "(SELECT id, ts_rank_cd(tsv, %s::tsquery) AS rank FROM {t} "
            "WHERE tsv @@ %s::tsquery AND {w} ORDER BY rank DESC, id LIMIT %s) AS n "
            "JOIN {t} AS r ON r.id = n.id ORDER BY n.rank DESC, n.id"
        ).format(t=self.name, w=where)
        return statement, params


def _segment(text: str | None, metadata: dict[str, Any] | None) -> TextSegment | None:
    return None if text is None else TextSegment(text, metadata or {})


def _filter(condition: Filter | None) -> tuple[Any, list[Any]]:
    from ._pg_filters import filter_sql

    if condition is not None and not isinstance(condition, Filter):
        raise ConfigurationError(f"`filter` must be a Filter, got {condition!r}")
    where, params = filter_sql(condition)
    if condition is None:
        return where, params
    from psycopg import sql

    # An embedding stored without a segment has no metadata to test: no filter passes it.
    return sql.SQL("text IS NOT NULL AND ({})").format(where), params
