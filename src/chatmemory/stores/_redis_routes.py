"""Where the Redis stores send a memory id's commands, and on which connections.

A *route* sends a few commands, pipelined on one connection, for the keys of one memory id
(`send(key, commands)`: the replies, or the first error reply raised once all are read):

- `Direct` / `AsyncDirect`: one server. Connections of the client's pool kept checked out.
- `ClusterRoute` / `AsyncClusterRoute`: a Redis Cluster. The primary serving the key's slot,
  found in redis-py's own slot map (`client.nodes_manager`), on connections kept per node
  (a `Direct` over each node's pool). A MOVED, an ASK, a dead node or a failover is handled
  by one flow, `rerouted`, written once for both: it follows the redirect (updating redis-py's
  map) or refreshes the map and backs off until the slot has a primary again, for at most
  `patience` seconds.

Why not redis-py's own command path: it costs about 50 µs per command (about 65 µs more on a
cluster), more than the round trip to a local server; and `WAIT` must follow its write on the
same connection, which only a route that holds the connection can promise.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from typing import Any

from .._flow import Flow, arun, call, run, sleep
from ._idle import Idle

try:
    from redis.crc import key_slot
    from redis.exceptions import (
        AskError,
        ClusterDownError,
        ConnectionError,
        MovedError,
        RedisClusterException,
        ResponseError,
        TimeoutError,
        TryAgainError,
    )
except ImportError:  # pragma: no cover - the stores say so when constructed
    pass

__all__ = ["AsyncClusterRoute", "AsyncDirect", "ClusterRoute", "Direct", "rerouted"]

Command = Sequence[Any]

MOVES = 16
"""MOVED redirects followed for one send before giving up (redis-py's number)."""


def rerouting() -> tuple[type[Exception], ...]:
    """The errors after which a cluster route looks for the slot's primary again."""
    return (
        AskError,  # and MovedError, its subclass
        ConnectionError,
        TimeoutError,
        ClusterDownError,
        TryAgainError,
        RedisClusterException,  # and SlotNotCoveredError: no node known for the slot
    )


# --- one server -----------------------------------------------------------------------------------


class Direct:
    """Connections of the client's pool, kept checked out for the commands of a chat turn.

    A window read (HGET of the version, or the load script) and a commit (the commit script)
    go straight to a connection: redis-py's command path (a checkout from the pool and back,
    the retry wrapper, observability hooks) costs about 50 µs per command in redis-py 8, more
    than the round trip to a local server. The connections come from the client's own pool,
    so its settings and limits hold; each is used by one caller at a time (idle ones wait in
    a list, whose pop and append are atomic), and all go back to the pool on `close`. At most
    a quarter of the pool's `max_connections` wait idle here, so the client's other commands
    always find one (a pool of 1 to 3 gets every connection back after each call). After a
    fork the parent's connections are left alone and new ones are taken.
    """

    __slots__ = ("_idle", "_pid", "_pool")

    # Any: much of redis-py's connection API has no annotations
    def __init__(self, pool: Any) -> None:
        self._pool = pool
        self._idle: Idle[Any] = Idle(getattr(pool, "max_connections", None))
        self._pid = os.getpid()

    def send(self, key: bytes, commands: Sequence[Command]) -> list[Any]:
        """The replies to `commands` (one server: `key` does not choose where), retried after
        connection errors as the client retries (a retried commit is recognized by its token
        and not applied twice)."""
        if self._pid != os.getpid():
            self._idle.forget()
            self._pid = os.getpid()
        connection = self._idle.take()
        if connection is None:
            connection = self._pool.get_connection()

        def once() -> list[Any]:
            if len(commands) == 1:  # the usual case, the quick way
                connection.send_packed_command(connection.pack_command(*commands[0]))
                return [connection.read_response()]
            connection.send_packed_command(connection.pack_commands(commands))
            replies: list[Any] = []
            for _ in commands:
                try:
                    replies.append(connection.read_response())
                except ResponseError as error:
                    replies.append(error)
            return _raise_first_error(replies)

        try:
            return connection.retry.call_with_retry(  # type: ignore[no-any-return]
                once, lambda _: connection.disconnect()
            )
        finally:  # a failed connection reconnects when next used
            if not self._idle.keep(connection):
                self._pool.release(connection)

    def close(self) -> None:
        idle = self._idle.close()
        if self._pid == os.getpid():
            for connection in idle:
                self._pool.release(connection)


class AsyncDirect:
    """`Direct` for redis.asyncio: one task at a time per connection, the same way."""

    __slots__ = ("_idle", "_pool")

    def __init__(self, pool: Any) -> None:
        self._pool = pool
        self._idle: Idle[Any] = Idle(getattr(pool, "max_connections", None))

    async def send(self, key: bytes, commands: Sequence[Command]) -> list[Any]:
        """`Direct.send`, awaited; a cancelled call leaves its connection disconnected."""
        connection = self._idle.take()
        if connection is None:
            connection = await self._pool.get_connection()

        async def once() -> list[Any]:
            if len(commands) == 1:
                await connection.send_packed_command(connection.pack_command(*commands[0]))
                return [await connection.read_response()]
            await connection.send_packed_command(connection.pack_commands(commands))
            replies: list[Any] = []
            for _ in commands:
                try:
                    replies.append(await connection.read_response())
                except ResponseError as error:
                    replies.append(error)
            return _raise_first_error(replies)

        async def failed(_: Exception) -> None:
            await connection.disconnect()

        try:
            return await connection.retry.call_with_retry(once, failed)  # type: ignore[no-any-return]
        finally:
            if not self._idle.keep(connection):
                await self._pool.release(connection)

    async def close(self) -> None:
        for connection in self._idle.close():
            await self._pool.release(connection)


def _raise_first_error(replies: list[Any]) -> list[Any]:
    """`replies` to pipelined commands, or the first error among them raised (every reply was
    read first, so the connection stays in step)."""
    for reply in replies:
        if isinstance(reply, ResponseError):
            raise reply
    return replies


# --- a cluster ------------------------------------------------------------------------------------


def rerouted(
    slot: int, commands: Sequence[Command], error: Exception, patience: float
) -> Flow[Any]:
    """The replies to `commands` for `slot` after they failed on its primary with `error`.

    A MOVED updates redis-py's slot map (`moved`) and sends again; an ASK sends to the node
    named, after ASKING. A dead node, a cluster that is down, a slot without a primary (a
    failover under way) or a TRYAGAIN (a memory id's keys split by a slot migration, until it
    ends) refreshes the slot map and backs off until the slot's primary answers. All this for
    at most `patience` seconds; then the last error is raised. The flow's target is a
    `ClusterRoute` or an `AsyncClusterRoute`.
    """
    deadline = time.monotonic() + patience
    delays = _delays()
    moves = 0
    while True:
        if isinstance(error, MovedError):  # the slot lives elsewhere now
            moves += 1
            if moves > MOVES:
                raise error
            yield from call(ClusterRoute.moved, error)
            reply = yield from call(ClusterRoute.to_slot, slot, commands)
        elif time.monotonic() >= deadline:
            raise error
        elif isinstance(error, AskError):  # the slot is migrating and our keys are not here
            asked = [("ASKING",), *commands]
            reply = yield from call(ClusterRoute.to_node, error.host, error.port, asked)
            reply = reply[1:] if isinstance(reply, list) else reply
        else:
            yield from sleep(next(delays))
            failed = yield from call(ClusterRoute.refresh)
            reply = failed or (yield from call(ClusterRoute.to_slot, slot, commands))
        if not isinstance(reply, Exception):
            return reply
        error = reply


def _delays() -> Iterator[float]:
    """10 ms, doubling, then every 200 ms: a failover takes about twice the cluster's node
    timeout, so the wait is mostly spent at the cap."""
    delay = 0.01
    while True:
        yield delay
        delay = min(delay * 2, 0.2)


class ClusterRoute:
    """Each key's commands to the primary serving its slot, on connections kept per node."""

    __slots__ = ("_client", "_nodes", "_patience", "_rerouting")

    def __init__(self, client: Any, patience: float) -> None:
        self._client = client
        self._nodes: dict[str, Direct] = {}
        self._patience = patience
        self._rerouting = rerouting()

    def send(self, key: bytes, commands: Sequence[Command]) -> list[Any]:
        slot = key_slot(key)
        try:
            node = self._client.nodes_manager.get_node_from_slot(slot)
            return self._direct(node).send(key, commands)
        except self._rerouting as error:
            return run(rerouted(slot, commands, error, self._patience), self)

    def _direct(self, node: Any) -> Direct:
        pool = self._client.get_redis_connection(node).connection_pool
        direct = self._nodes.get(node.name)
        if direct is None or direct._pool is not pool:
            direct = self._nodes[node.name] = Direct(pool)
        return direct

    # the steps of `rerouted`: an error is returned, not raised, for the flow to weigh

    def to_slot(self, slot: int, commands: Sequence[Command]) -> list[Any] | Exception:
        try:
            node = self._client.nodes_manager.get_node_from_slot(slot)
            return self._direct(node).send(b"", commands)
        except self._rerouting as error:
            return error

    def to_node(self, host: str, port: int, commands: Sequence[Command]) -> list[Any] | Exception:
        try:
            node = self._client.nodes_manager.get_node(host=host, port=port)
            if node is None:
                return ClusterDownError(f"the cluster names {host}:{port}, an unknown node")
            return self._direct(node).send(b"", commands)
        except self._rerouting as error:
            return error

    def moved(self, error: MovedError) -> None:
        self._client.nodes_manager.move_slot(error)

    def refresh(self) -> Exception | None:
        try:
            self._client.nodes_manager.initialize()
        except self._rerouting as error:
            return error
        return None

    def close(self) -> None:
        for direct in self._nodes.values():
            direct.close()


class _NodePool:
    """An async `ClusterNode`'s connections seen as the pool `AsyncDirect` takes from."""

    __slots__ = ("_node", "max_connections")

    def __init__(self, node: Any) -> None:
        self._node = node
        self.max_connections: int = node.max_connections

    async def get_connection(self) -> Any:
        return self._node.acquire_connection()  # it connects when first used

    async def release(self, connection: Any) -> None:
        self._node.release(connection)


class AsyncClusterRoute:
    """`ClusterRoute` for redis.asyncio's `RedisCluster`."""

    __slots__ = ("_client", "_nodes", "_patience", "_ready", "_rerouting")

    def __init__(self, client: Any, patience: float) -> None:
        self._client = client
        self._nodes: dict[str, tuple[Any, AsyncDirect]] = {}
        self._patience = patience
        self._rerouting = rerouting()
        self._ready = False

    async def send(self, key: bytes, commands: Sequence[Command]) -> list[Any]:
        slot = key_slot(key)
        try:
            if not self._ready:
                await self._client.initialize()
                self._ready = True
            node = self._client.nodes_manager.get_node_from_slot(slot)
            return await self._direct(node).send(key, commands)
        except self._rerouting as error:
            return await arun(rerouted(slot, commands, error, self._patience), self)

    def _direct(self, node: Any) -> AsyncDirect:
        known = self._nodes.get(node.name)
        if known is None or known[0] is not node:
            known = self._nodes[node.name] = (node, AsyncDirect(_NodePool(node)))
        return known[1]

    async def to_slot(self, slot: int, commands: Sequence[Command]) -> list[Any] | Exception:
        try:
            node = self._client.nodes_manager.get_node_from_slot(slot)
            return await self._direct(node).send(b"", commands)
        except self._rerouting as error:
            return error

    async def to_node(
        self, host: str, port: int, commands: Sequence[Command]
    ) -> list[Any] | Exception:
        try:
            node = self._client.nodes_manager.get_node(host=host, port=port)
            if node is None:
                return ClusterDownError(f"the cluster names {host}:{port}, an unknown node")
            return await self._direct(node).send(b"", commands)
        except self._rerouting as error:
            return error

    async def moved(self, error: MovedError) -> None:
        await self._client.nodes_manager.move_slot(error)

    async def refresh(self) -> Exception | None:
        try:
            await self._client.nodes_manager.initialize()
            self._ready = True
        except self._rerouting as error:
            return error
        return None

    async def close(self) -> None:
        for _, direct in self._nodes.values():
            await direct.close()
