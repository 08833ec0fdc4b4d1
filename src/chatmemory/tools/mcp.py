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
server's JSON schemas reach the model unchanged. Text results come back as text; a result with
an image comes back as contents (text and images, in the server's order: the model sees the
image, see `ToolOutput.contents`), as a note in the text (`ToolExecution.result`) and as an
`ImageContent` in the execution's value. A call that fails on the server's side, a server that
dies mid-call or does not answer within `timeout` seconds (a second more at most) becomes an error
result the model reads, never a hang. The connection is then left in the background (a stdio
server is stopped, killed if it must be; `close` waits for that) and the next call connects again,
as it does after a server went away between calls (a stdio server that exited). Connecting, which
includes starting a stdio server, gets `connect_timeout` seconds: 30, or `timeout` if longer.
Error texts and `repr` call the server by its `name`: by default the program of a command (its file
name, without the arguments) or the URL without credentials, query or fragment, so a key passed in
them never reaches the model or the chat memory. Name a server whose URL path holds a key.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
import json
import math
import os
import re
import shutil
import threading
from collections.abc import (
    AsyncIterator,
    Callable,
    Coroutine,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote, urlsplit

from .._errors import ConfigurationError, ToolServerError
from .._messages import Content, ImageContent, TextContent
from .._threads import in_thread
from ..models import ToolSpecification
from ._contracts import ReturnBehavior, Tool, ToolContext, ToolOutput
from ._declare import parse_arguments

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
    arguments in a sequence); `name` is what error texts and `repr` call the server (by default
    the program of a command, or the URL without credentials, query or fragment: never a secret
    they may hold); `only` keeps the named tools; `dynamic` lists the server's tools again before
    every model call instead of once per service call. `timeout` bounds each request,
    `connect_timeout` connecting (and starting a stdio server)."""

    def __init__(
        self,
        target: str | Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        name: str | None = None,
        timeout: float = 30.0,
        connect_timeout: float | None = None,
        only: Iterable[str] | None = None,
        dynamic: bool = False,
    ) -> None:
        mcp = _mcp()
        if isinstance(target, str):
            label, self._secrets = _url(target)
            self._transport: Callable[[], Any] = functools.partial(_http_client(), target)
        else:
            command = _command(target, cwd)
            label = re.split(r"[\\/]", command[0])[-1] or command[0]  # the program's file name
            self._secrets = ()  # no error about a command quotes its arguments: only ours could
            server = mcp.StdioServerParameters(
                command=command[0], args=command[1:], env=dict(env) if env else None, cwd=cwd
            )
            self._transport = functools.partial(mcp.stdio_client, server)
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise ConfigurationError(f"`name` must be a non-empty string, got {name!r}")
        self.name: str = label if name is None else name
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
        return f"McpToolProvider({self.name!r})"

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
        await in_thread(self.close)

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
        if not task.done() or _timed_out(task):
            # the SDK's own bound (the same `timeout`) or, when the request never left, ours
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
        failure = None
        for attempt in range(2):
            connection, kept = None, False
            try:
                connection, kept = await self._connected()
                return await self._answer(connection.client.list_tools())
            except Exception as error:
                self._drop(connection)
                failure = error
                if not (kept and attempt == 0):
                    break
        assert failure is not None
        # raised here, not in `except`, so an error that quotes a secret is not even its context
        raise ToolServerError(
            f"cannot list the tools of the MCP server {self.name!r}: "
            f"{_describe(failure, self._secrets)}"
        ) from (None if _mentions(failure, self._secrets) else failure)

    async def _call(self, name: str, arguments: dict[str, Any]) -> ToolOutput:
        connection = None
        try:
            connection, _ = await self._connected()
            call = connection.client.call_tool(name, arguments, read_timeout_seconds=self.timeout)
            result = await self._answer(call)
        except Exception as error:  # the server failed or went away: the model hears it
            self._drop(connection)  # the next call connects again
            return ToolOutput(
                f"The MCP server {self.name!r} failed during {name}: "
                f"{_describe(error, self._secrets)}",
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
        return f"McpTool({self._specification.name!r} of {self._provider.name!r})"

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
        return parse_arguments(arguments, self._specification.name)


def _output(result: Any) -> ToolOutput:
    """The text the model reads and the value the caller gets, from a `CallToolResult`."""
    mcp = _mcp()
    texts: list[str] = []
    images: list[ImageContent] = []
    parts: list[Content] = []  # what the model gets when there are images
    for block in result.content:
        if isinstance(block, mcp.types.ImageContent):
            image = ImageContent(base64_data=block.data, mime_type=block.mime_type)
            images.append(image)
            parts.append(image)
            texts.append(f"[image {block.mime_type}, {_size(block.data)}]")
            continue
        if isinstance(block, mcp.types.TextContent):
            texts.append(block.text)
        elif isinstance(block, mcp.types.EmbeddedResource) and hasattr(block.resource, "text"):
            texts.append(block.resource.text)
        else:
            texts.append(f"[{getattr(block, 'type', type(block).__name__)} content]")
        parts.append(TextContent(texts[-1]))
    if not texts and result.structured_content is not None:
        texts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = "\n".join(texts) if texts else "Success"
    value: object = result.structured_content if not images else [*images]
    contents = tuple(parts) if images else ()
    return ToolOutput(text, value, is_error=bool(result.is_error), contents=contents)


def _size(data: str) -> str:
    try:
        return f"{len(base64.b64decode(data, validate=True))} bytes"
    except (binascii.Error, ValueError):
        return "unreadable base64"


def _url(target: str) -> tuple[str, tuple[str, ...]]:
    """The label of a server's URL (scheme://host[:port]/path) and the parts of it that may hold
    a secret (credentials, query, fragment; as written and decoded), which no text repeats."""
    parts = urlsplit(target)
    if parts.scheme not in ("http", "https"):
        if parts.scheme and parts.netloc:
            raise ConfigurationError(
                f"an MCP server's URL is http:// or https://, got a {parts.scheme}:// URL"
            )
        if not target.strip():
            raise ConfigurationError(
                "an MCP server is an http(s) URL or a command, got a blank string"
            )
        raise ConfigurationError(
            f"an MCP server is an http(s) URL or a command with its arguments in a list: for a "
            f"command use McpToolProvider.stdio({target.split()[0]!r}, ...), each argument a "
            f"string"
        )
    host = parts.hostname
    if not host:
        raise ConfigurationError(f"an MCP server's {parts.scheme}:// URL needs a host")
    try:
        port = parts.port
    except ValueError:
        raise ConfigurationError(
            f"the port of an MCP server's {parts.scheme}:// URL must be a number below 65536"
        ) from None
    secrets = [parts.netloc.rpartition("@")[0], parts.password, parts.query, parts.fragment]
    secrets += [unquote(secret) for secret in secrets if secret]
    host = f"[{host}]" if ":" in host else host
    label = f"{parts.scheme}://{host}{'' if port is None else f':{port}'}{parts.path}"
    return label, tuple(sorted({secret for secret in secrets if secret}, key=len, reverse=True))


def _command(target: object, cwd: str | None) -> list[str]:
    """A stdio command as a list, or a `ConfigurationError` that quotes none of it."""
    if not isinstance(target, Iterable):
        raise ConfigurationError(
            f"an MCP server is an http(s) URL or a command with its arguments in a list, "
            f"got {type(target).__name__}"
        )
    command = list(target)
    if not command:
        raise ConfigurationError("an MCP stdio command is a non-empty list of strings, got []")
    for index, part in enumerate(command):
        if not isinstance(part, str) or not (part.strip() if index == 0 else part):
            what = f"{part!r}" if isinstance(part, str) else f"of type {type(part).__name__}"
            raise ConfigurationError(
                f"an MCP stdio command is a non-empty list of strings, and its item {index} is "
                f"{what}"
            )
    program = command[0].split()[0]
    if program != command[0] and not _exists(command[0], cwd):
        raise ConfigurationError(
            f"an MCP stdio command's program is one word, and each argument a string of its "
            f"own: McpToolProvider.stdio({program!r}, ...), not one string for them all"
        )
    return command


def _exists(program: str, cwd: str | None) -> bool:
    return shutil.which(program) is not None or os.path.exists(os.path.join(cwd or "", program))


def _seconds(name: str, value: object) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value < math.inf:
        raise ConfigurationError(f"`{name}` must be a positive number of seconds, got {value!r}")
    return float(value)


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Mark the outcome of a future nobody may wait for as seen (asyncio logs it otherwise)."""
    if not future.cancelled():
        future.exception()


def _timed_out(task: asyncio.Future[Any]) -> bool:
    """Whether `task` (a request) failed with the SDK's request timeout."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import REQUEST_TIMEOUT

    error = None if task.cancelled() else task.exception()
    return isinstance(error, MCPError) and error.code == REQUEST_TIMEOUT


def _describe(error: BaseException, secrets: Sequence[str]) -> str:
    """What went wrong, for the model or the application: the messages of the errors a task
    group gathered rather than its own, without `secrets`."""
    texts = (str(e).strip() or f"{type(e).__name__} (no answer)" for e in _leaves(error))
    text = "; ".join(dict.fromkeys(texts))
    for secret in secrets:
        text = text.replace(secret, "…")
    return text


def _leaves(error: BaseException) -> Iterator[BaseException]:
    grouped = getattr(error, "exceptions", None)
    if isinstance(grouped, tuple) and grouped:
        for member in grouped:
            yield from _leaves(member)
    else:
        yield error


def _mentions(error: BaseException, secrets: Sequence[str]) -> bool:
    """Whether `error`, an error chained to it or one it groups says one of `secrets` (then it
    is not chained to the error the application sees)."""
    todo, seen = [error], set()
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if any(secret in str(e) for secret in secrets):
            return True
        todo += [x for x in (e.__cause__, e.__context__) if x is not None]
        todo += getattr(e, "exceptions", ())
    return False
