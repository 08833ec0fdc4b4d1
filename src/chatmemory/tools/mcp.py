"""The tools of a Model Context Protocol server, offered to a service (the `mcp` extra:
``pip install 'chatmemory[mcp]'``).

```python
from chatmemory.tools.mcp import McpToolProvider
files = McpToolProvider.stdio("uvx", "mcp-server-filesystem", "/srv/docs")
search = McpToolProvider.http("http://127.0.0.1:8000/mcp")
assistant = ai_service(Assistant, chat_model=model, tool_providers=[files, search])
```

One connection per provider, opened on first use and kept: a stdio server is started once, not
per call. The connection lives on a background event loop of the provider's own, so the same code
serves sync services (which wait on it) and async ones (which await it from any loop). The
server's JSON schemas reach the model unchanged. Text results come back as text; an image comes
back as a note in the text the model reads (OpenAI's tool messages hold text only) and as an
`ImageContent` in the execution's value. A call that fails on the server's side, a server that
dies mid-call or does not answer within `timeout` seconds (a second more at most) becomes an error
result the model reads, never a hang. The connection is then left in the background (a stdio
server is stopped, killed if it must be; `close` waits for that) and the next call connects again,
as it does after a server went away between calls (a stdio server that exited). Connecting, which
includes starting a stdio server, gets `connect_timeout` seconds: 30, or `timeout` if longer.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
import json
import math
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from .._errors import ConfigurationError
from .._messages import ImageContent
from ..models import ToolSpecification
from ._contracts import ReturnBehavior, Tool, ToolArgumentsError, ToolContext, ToolOutput

if TYPE_CHECKING:
    from mcp import Client

__all__ = ["McpTool", "McpToolProvider"]

T = TypeVar("T")


def _mcp() -> Any:
    try:
        import mcp
    except ImportError:  # pragma: no cover - the test extra installs it
        raise ConfigurationError(
            "MCP servers need the official SDK: pip install 'chatmemory[mcp]'"
        ) from None
    return mcp


def _http_client() -> Any:
    from mcp.client.streamable_http import streamable_http_client

    return streamable_http_client


@asynccontextmanager
async def _watched(transport: Any, lost: Callable[[], None]) -> AsyncIterator[tuple[Any, Any]]:
    """`transport` (an SDK transport), calling `lost` once the server's side of it ends."""
    async with transport as (read, write):
        yield _Reading(read, lost), write


class _Reading:
    """The server's messages as the SDK reads them: the stream it is given, that calls `lost`
    when the stream ends (a stdio server exited, or its stdout closed)."""

    def __init__(self, stream: Any, lost: Callable[[], None]) -> None:
        import anyio

        self._stream = stream
        self._lost = lost
        self._end = anyio.EndOfStream
        self._ends = (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError)

    @property
    def last_context(self) -> Any:  # the SDK copies the sender's context from a stream that has it
        return getattr(self._stream, "last_context", None)

    async def receive(self) -> Any:
        try:
            return await self._stream.receive()
        except self._ends:
            self._lost()
            raise

    def __aiter__(self) -> _Reading:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except self._end:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def __aenter__(self) -> _Reading:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


_LATE = 1.0
"""Seconds past `timeout` the provider waits for a request. The SDK ends a call itself at
`timeout` and tells the server; what it has not ended by then (a listing, a request it could not
even send to a server that reads nothing) is left to end with its connection, which is dropped."""

_STOP = 10.0
"""Seconds the SDK may take to stop a stdio server once the connection is left (close its stdin,
wait 2 s, terminate it, wait 2 s, kill it): beyond them `close` stops waiting."""


class _Connection:
    """One connection to the server, held open by a task of its own: the SDK's client is entered
    and left in one task, as it requires. It is left when `end` says so or when the server's side
    of it ends (a stdio server exited)."""

    def __init__(self, transport: Any, read_timeout: float) -> None:
        import anyio

        self.ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        self.ready.add_done_callback(_retrieve)
        self.dropped = False
        self._leave = asyncio.Event()
        self._scope = anyio.CancelScope()
        self._task = asyncio.create_task(self._hold(transport, read_timeout))

    @property
    def usable(self) -> bool:
        ready = self.ready
        answered = ready.done() and not ready.cancelled() and ready.exception() is None
        return answered and not self._leave.is_set() and not self._task.done()

    @property
    def client(self) -> Client:
        return self.ready.result()

    async def _hold(self, transport: Any, read_timeout: float) -> None:
        try:
            with self._scope:
                watched = _watched(transport, self._leave.set)
                async with _mcp().Client(watched, read_timeout_seconds=read_timeout) as client:
                    self.ready.set_result(client)
                    await self._leave.wait()
        except Exception as error:  # connecting failed, or leaving did: the server is gone
            if not self.ready.done():
                self.ready.set_exception(error)
        finally:
            if not self.ready.done():  # left before it answered
                self.ready.cancel()

    async def end(self, polite: float) -> None:
        """Leave the connection: politely within `polite` seconds (a stdio server's stdin
        closes, an HTTP session is deleted), else by cancelling it through anyio, which lets the
        SDK finish stopping a stdio server (its shutdown is shielded and bounded). Never by
        cancelling the task itself: that interrupts the shutdown before it kills the server, and
        the SDK then waits for the server's output to end, that is for a hung tool to finish."""
        self._leave.set()
        if not self.ready.done():  # still connecting: there is nothing polite to do
            self._scope.cancel()
        if not (await asyncio.wait({self._task}, timeout=polite))[0]:
            self._scope.cancel()
            await asyncio.wait({self._task}, timeout=_STOP)


class _Loop:
    """An event loop on a daemon thread: the one place the MCP connection lives."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="mcp")
        self.thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    async def arun(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coroutine, self.loop))

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


class McpToolProvider:
    """The tools of one MCP server. `target` is a streamable HTTP URL or a stdio command (its
    arguments in a sequence); `only` keeps the named tools; `dynamic` lists the server's tools
    again before every model call instead of once per service call. `timeout` bounds each
    request, `connect_timeout` connecting (and starting a stdio server)."""

    def __init__(
        self,
        target: str | Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout: float = 30.0,
        connect_timeout: float | None = None,
        only: Iterable[str] | None = None,
        dynamic: bool = False,
    ) -> None:
        mcp = _mcp()
        if isinstance(target, str):
            if not target.startswith(("http://", "https://")):
                raise ConfigurationError(
                    f"an MCP server is an http(s) URL or a command with its arguments in a list, "
                    f"got {target!r}: for a command use McpToolProvider.stdio({target!r}, ...)"
                )
            self._transport: Callable[[], Any] = functools.partial(_http_client(), target)
            self.description = target
        else:
            command = list(target)
            if not command or not all(isinstance(part, str) and part for part in command):
                raise ConfigurationError(
                    f"an MCP stdio command is a non-empty list of strings, got {target!r}"
                )
            server = mcp.StdioServerParameters(
                command=command[0], args=command[1:], env=dict(env) if env else None, cwd=cwd
            )
            self._transport = functools.partial(mcp.stdio_client, server)
            self.description = " ".join(command)
        self.timeout = _seconds("timeout", timeout)
        self.connect_timeout = (
            max(self.timeout, 30.0)
            if connect_timeout is None
            else _seconds("connect_timeout", connect_timeout)
        )
        self.only = None if only is None else frozenset(only)
        self._dynamic = bool(dynamic)
        self._loop: _Loop | None = None
        self._connection: _Connection | None = None  # on the loop, as are the two below
        self._pending: set[asyncio.Future[Any]] = set()
        self._lock = threading.Lock()

    @classmethod
    def stdio(
        cls,
        command: str,
        *args: str,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        **options: Any,
    ) -> McpToolProvider:
        """A server the provider starts as `command args...` and speaks to over stdio."""
        return cls([command, *args], env=env, cwd=cwd, **options)

    @classmethod
    def http(cls, url: str, **options: Any) -> McpToolProvider:
        """A server that speaks streamable HTTP at `url`."""
        return cls(url, **options)

    def __repr__(self) -> str:
        return f"McpToolProvider({self.description!r})"

    @property
    def dynamic(self) -> bool:
        return self._dynamic

    # -- the provider contract: both sides run the same coroutine on the provider's loop

    def provide(self, context: ToolContext) -> list[Tool]:
        return self._on_loop().run(self._tools())

    async def aprovide(self, context: ToolContext) -> list[Tool]:
        return await self._on_loop().arun(self._tools())

    def close(self) -> None:
        """Close the connection (a stdio server stops) and the provider's loop."""
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is not None:
            loop.run(self._close())
            loop.stop()

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    def __enter__(self) -> McpToolProvider:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> McpToolProvider:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- on the provider's loop

    def _on_loop(self) -> _Loop:
        with self._lock:
            if self._loop is None:
                self._loop = _Loop()
            return self._loop

    async def _connected(self) -> tuple[_Connection, bool]:
        """The kept connection, or a new one once it answers, and whether it was kept. A
        connection whose server went away (a stdio server that exited) is not kept."""
        connection = self._connection
        if connection is not None and connection.usable:
            return connection, True
        if connection is None or connection.ready.done():  # else wait for it with its opener
            self._drop(connection)
            connection = _Connection(self._transport(), self.connect_timeout)
            self._connection = connection
        await asyncio.wait({connection.ready}, timeout=self.connect_timeout)
        if not connection.ready.done():
            self._drop(connection)
            raise TimeoutError(f"no answer within {self.connect_timeout:g} s of connecting")
        if connection.ready.cancelled():  # another call gave up on it, or `close` ended it
            raise ConnectionError("the connection was closed while it opened")
        if connection.ready.exception() is not None:
            self._drop(connection)
            connection.ready.result()
        return connection, False

    def _drop(self, connection: _Connection | None) -> None:
        """Leave `connection` in the background (a stdio server stops within a few seconds,
        killed if it must be): the call that failed returns now, the next one connects again,
        and `close` waits for it to be gone."""
        if connection is None:
            return
        if self._connection is connection:
            self._connection = None
        if not connection.dropped:
            connection.dropped = True
            self._watch(asyncio.ensure_future(connection.end(self.timeout)))

    def _watch(self, task: asyncio.Future[Any]) -> None:
        """Keep `task` (an ending connection, a request left behind) until it is done."""
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
        task.add_done_callback(_retrieve)

    async def _answer(self, request: Coroutine[Any, Any, T]) -> T:
        """The answer to `request`, or `TimeoutError` after `timeout` seconds and `_LATE` more
        (the caller then drops the connection, which ends the request)."""
        task = asyncio.ensure_future(request)
        try:
            await asyncio.wait({task}, timeout=self.timeout + _LATE)
        except asyncio.CancelledError:
            task.cancel()
            raise
        finally:
            if not task.done():
                self._watch(task)
        if not task.done():
            raise TimeoutError(f"no answer within {self.timeout:g} s")
        return task.result()

    async def _close(self) -> None:
        self._drop(self._connection)
        if self._pending:
            await asyncio.wait(set(self._pending), timeout=self.timeout + _STOP)
        for task in list(self._pending):  # pragma: no cover - the SDK's own bounds end them
            task.cancel()

    async def _tools(self) -> list[Tool]:
        listed = await self._list()
        return [
            McpTool(
                self,
                ToolSpecification(
                    name=t.name, description=t.description, parameters=t.input_schema
                ),
            )
            for t in listed.tools
            if self.only is None or t.name in self.only
        ]

    async def _list(self) -> Any:
        """The server's `ListToolsResult`, asked again on a new connection when the kept one
        fails (its server went away between calls: listing is safe to repeat)."""
        for attempt in range(2):
            connection, kept = None, False
            try:
                connection, kept = await self._connected()
                return await self._answer(connection.client.list_tools())
            except Exception as error:
                self._drop(connection)
                if not (kept and attempt == 0):
                    raise ConfigurationError(
                        f"cannot list the tools of the MCP server {self.description!r}: "
                        f"{_describe(error)}"
                    ) from error
        raise AssertionError("unreachable")  # pragma: no cover

    async def _call(self, name: str, arguments: dict[str, Any]) -> ToolOutput:
        connection = None
        try:
            connection, _ = await self._connected()
            call = connection.client.call_tool(name, arguments, read_timeout_seconds=self.timeout)
            result = await self._answer(call)
        except Exception as error:  # the server failed or went away: the model hears it
            self._drop(connection)  # the next call connects again
            return ToolOutput(
                f"The MCP server {self.description!r} failed during {name}: {_describe(error)}",
                None,
                is_error=True,
            )
        return _output(result)


class McpTool:
    """One tool of an MCP server."""

    def __init__(self, provider: McpToolProvider, specification: ToolSpecification) -> None:
        self._provider = provider
        self._specification = specification

    def __repr__(self) -> str:
        return f"McpTool({self._specification.name!r} of {self._provider.description!r})"

    @property
    def specification(self) -> ToolSpecification:
        return self._specification

    @property
    def return_behavior(self) -> ReturnBehavior:
        return "to_model"

    def execute(self, arguments: str, context: ToolContext) -> ToolOutput:
        parsed = self._arguments(arguments)
        return self._provider._on_loop().run(self._provider._call(self._specification.name, parsed))

    async def aexecute(self, arguments: str, context: ToolContext) -> ToolOutput:
        parsed = self._arguments(arguments)
        call = self._provider._call(self._specification.name, parsed)
        return await self._provider._on_loop().arun(call)

    def _arguments(self, arguments: str) -> dict[str, Any]:
        name = self._specification.name
        try:
            parsed = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as error:
            raise ToolArgumentsError(
                f"the arguments of {name} are not valid JSON ({error.msg} at position "
                f"{error.pos}); send a JSON object",
                tool=name,
                arguments=arguments,
            ) from None
        if not isinstance(parsed, dict):
            raise ToolArgumentsError(
                f"the arguments of {name} must be a JSON object, got {arguments}",
                tool=name,
                arguments=arguments,
            )
        return parsed


def _output(result: Any) -> ToolOutput:
    """The text the model reads and the value the caller gets, from a `CallToolResult`."""
    mcp = _mcp()
    texts: list[str] = []
    images: list[ImageContent] = []
    for block in result.content:
        if isinstance(block, mcp.types.TextContent):
            texts.append(block.text)
        elif isinstance(block, mcp.types.ImageContent):
            images.append(ImageContent(base64_data=block.data, mime_type=block.mime_type))
            texts.append(
                f"[image {block.mime_type}, {_size(block.data)}: given to the application]"
            )
        elif isinstance(block, mcp.types.EmbeddedResource) and hasattr(block.resource, "text"):
            texts.append(block.resource.text)
        else:
            texts.append(f"[{getattr(block, 'type', type(block).__name__)} content]")
    if not texts and result.structured_content is not None:
        texts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = "\n".join(texts) if texts else "Success"
    value: object = result.structured_content if not images else [*images]
    return ToolOutput(text, value, is_error=bool(result.is_error))


def _size(data: str) -> str:
    try:
        return f"{len(base64.b64decode(data, validate=True))} bytes"
    except (binascii.Error, ValueError):
        return "unreadable base64"


def _seconds(name: str, value: object) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value < math.inf:
        raise ConfigurationError(f"`{name}` must be a positive number of seconds, got {value!r}")
    return float(value)


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Mark the outcome of a future nobody may wait for as seen (asyncio logs it otherwise)."""
    if not future.cancelled():
        future.exception()


def _describe(error: BaseException) -> str:
    return str(error).strip() or f"{type(error).__name__} (no answer)"
