"""MCP servers as tool providers: a real server written with the SDK, over stdio and over
streamable HTTP on 127.0.0.1, through the sync, async and streaming service paths."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Annotated, Protocol
from urllib.parse import urlsplit

import pytest

from chatmemory import (
    AiMessage,
    ConfigurationError,
    ImageContent,
    MessageWindowChatMemory,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    ToolServerError,
    UserMessage,
)
from chatmemory.services import MemoryId, Result, TokenStream, ai_service
from chatmemory.testing import ScriptedChatModel
from chatmemory.tools import Tool, ToolContext
from chatmemory.tools.mcp import McpToolProvider

SERVER = str(Path(__file__).with_name("mcp_server.py"))
CONTEXT = ToolContext("u")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, SERVER, "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                pytest.fail("the MCP test server did not start")
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/mcp"
    process.terminate()
    process.wait(timeout=10)


@pytest.fixture(params=["stdio", "http"])
def provider(request: pytest.FixtureRequest) -> Iterator[McpToolProvider]:
    if request.param == "stdio":
        made = McpToolProvider.stdio(sys.executable, SERVER, "stdio", timeout=10)
    else:
        made = McpToolProvider.http(request.getfixturevalue("http_url"), timeout=10)
    with made:
        yield made


def tools(provider: McpToolProvider) -> dict[str, Tool]:
    return {t.specification.name: t for t in provider.provide(CONTEXT)}


def gone(pid: int, within: float = 10.0) -> bool:
    """Whether process `pid` has ended (and been reaped) within `within` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)
    return False


def test_the_servers_tools_and_schemas_pass_through(provider: McpToolProvider) -> None:
    found = {t.specification.name: t.specification for t in provider.provide(CONTEXT)}
    assert set(found) == {"add", "whoami", "pixel", "refuse", "crash", "leave", "sleep"}
    assert found["add"].description == "Add two integers."
    assert list(found["add"].parameters["required"]) == ["a", "b"]
    assert found["add"].parameters["properties"]["a"]["type"] == "integer"


def test_text_image_and_error_results(provider: McpToolProvider) -> None:
    found = {t.specification.name: t for t in provider.provide(CONTEXT)}
    assert found["add"].execute('{"a": 2, "b": 40}', CONTEXT).text == "42"
    image = found["pixel"].execute("{}", CONTEXT)
    assert image.text == "[image image/png, 70 bytes]"
    assert isinstance(image.value, list)
    assert isinstance(image.value[0], ImageContent)
    assert image.value[0].mime_type == "image/png"
    assert image.contents == (image.value[0],)  # the model sees the image itself
    refused = found["refuse"].execute('{"reason": "not today"}', CONTEXT)
    assert refused.is_error
    assert "refuse" in refused.text


def test_async_calls_from_any_loop(provider: McpToolProvider) -> None:
    async def main() -> str:
        found = {t.specification.name: t for t in await provider.aprovide(CONTEXT)}
        return (await found["add"].aexecute('{"a": 1, "b": 1}', CONTEXT)).text

    assert asyncio.run(main()) == "2"
    assert asyncio.run(main()) == "2"  # a second loop: the connection lives on the provider's


def test_one_server_process_serves_every_call() -> None:
    with McpToolProvider.stdio(sys.executable, SERVER, "stdio", timeout=10) as provider:
        whoami = next(t for t in provider.provide(CONTEXT) if t.specification.name == "whoami")
        assert len({whoami.execute("{}", CONTEXT).text for _ in range(3)}) == 1


def test_a_server_that_dies_mid_call_is_an_error_result_then_restarts() -> None:
    with McpToolProvider.stdio(sys.executable, SERVER, "stdio", timeout=10) as provider:
        found = {t.specification.name: t for t in provider.provide(CONTEXT)}
        before = found["whoami"].execute("{}", CONTEXT).text
        crashed = found["crash"].execute("{}", CONTEXT)
        assert crashed.is_error
        assert "failed during crash" in crashed.text
        after = found["whoami"].execute("{}", CONTEXT).text
        assert after.isdigit()
        assert after != before


@pytest.mark.parametrize("death", ["killed", "exits"])
def test_a_server_that_died_between_calls_is_started_again(death: str) -> None:
    def die(found: dict[str, Tool]) -> str:
        pid = found["whoami"].execute("{}", CONTEXT).text
        if death == "killed":
            os.kill(int(pid), signal.SIGKILL)
        else:
            assert found["leave"].execute("{}", CONTEXT).text == "bye"
        assert gone(int(pid))
        return pid

    with McpToolProvider.stdio(sys.executable, SERVER, "stdio", timeout=10) as provider:
        found = tools(provider)
        dead = die(found)
        found = tools(provider)  # listing after the death
        assert found["whoami"].execute("{}", CONTEXT).text not in {dead, ""}
        dead = die(found)
        time.sleep(0.5)  # the provider learns of the exit from the closed pipe, as any reader would
        called = found["whoami"].execute("{}", CONTEXT)  # a call after the death
        assert not called.is_error
        assert called.text != dead


@pytest.mark.parametrize("timeout", [0.5, 1, 2])
def test_a_hung_call_ends_in_its_timeout_and_its_server_is_stopped(timeout: float) -> None:
    with McpToolProvider.stdio(sys.executable, SERVER, "stdio", timeout=timeout) as provider:
        found = tools(provider)
        hung = found["whoami"].execute("{}", CONTEXT).text
        started = time.monotonic()
        late = found["sleep"].execute('{"seconds": 60}', CONTEXT)
        elapsed = time.monotonic() - started
        assert late.is_error
        assert "failed during sleep" in late.text
        assert f"no answer within {timeout:g} s" in late.text  # the SDK's bound or ours alike
        assert elapsed < timeout + 2
        after = found["whoami"].execute("{}", CONTEXT)  # a new server
        assert not after.is_error
        assert after.text != hung
        assert gone(int(hung))
    assert gone(int(after.text), within=1)  # `close` waited for it


def test_a_call_the_sdk_cannot_even_send_ends_in_its_timeout() -> None:
    """A stopped server reads nothing: a request larger than the pipe's buffer never leaves."""
    with McpToolProvider.stdio(sys.executable, SERVER, "stdio", timeout=1) as provider:
        found = tools(provider)
        frozen = int(found["whoami"].execute("{}", CONTEXT).text)
        os.kill(frozen, signal.SIGSTOP)
        try:
            started = time.monotonic()
            late = found["refuse"].execute(json.dumps({"reason": "x" * 300_000}), CONTEXT)
            assert late.is_error
            assert "no answer within 1 s" in late.text
            assert time.monotonic() - started < 1 + 3  # the SDK gets a second, then the provider
        finally:
            if not gone(frozen, within=8):  # pragma: no cover - the SDK kills it
                os.kill(frozen, signal.SIGKILL)
                pytest.fail("the stopped server was left behind")


def test_a_server_that_never_answers_is_given_up_and_stopped(tmp_path: Path) -> None:
    pid = tmp_path / "pid"
    silent = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(60)"
    with McpToolProvider.stdio(
        sys.executable, "-c", silent, str(pid), timeout=5, connect_timeout=1
    ) as provider:
        started = time.monotonic()
        with pytest.raises(ToolServerError, match="no answer within 1 s of connecting"):
            provider.provide(CONTEXT)
        assert time.monotonic() - started < 1 + 2
    assert gone(int(pid.read_text()), within=1)  # `close` waited for it


def test_calls_at_once_after_a_failure_share_one_new_server() -> None:
    with McpToolProvider.stdio(sys.executable, SERVER, "stdio", timeout=10) as provider:
        found = tools(provider)
        assert found["crash"].execute("{}", CONTEXT).is_error

        async def at_once() -> set[str]:
            calls = [found["whoami"].aexecute("{}", CONTEXT) for _ in range(3)]
            return {output.text for output in await asyncio.gather(*calls)}

        (pid,) = asyncio.run(at_once())
    assert gone(int(pid), within=1)


def test_a_call_its_caller_gives_up_on_leaves_the_server_usable() -> None:
    with McpToolProvider.stdio(sys.executable, SERVER, "stdio", timeout=10) as provider:
        found = tools(provider)
        pid = found["whoami"].execute("{}", CONTEXT).text

        async def give_up() -> None:
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(found["sleep"].aexecute('{"seconds": 30}', CONTEXT), 0.5)

        asyncio.run(give_up())
        assert found["whoami"].execute("{}", CONTEXT).text == pid
    assert gone(int(pid), within=1)


def test_a_server_that_does_not_answer_in_time_is_an_error_result(http_url: str) -> None:
    with McpToolProvider.http(http_url, timeout=1) as provider:
        sleep = next(t for t in provider.provide(CONTEXT) if t.specification.name == "sleep")
        started = time.monotonic()
        late = sleep.execute('{"seconds": 5}', CONTEXT)
        assert late.is_error
        assert "no answer within 1 s" in late.text
        assert time.monotonic() - started < 4


def test_bad_arguments_go_back_to_the_model(provider: McpToolProvider) -> None:
    from chatmemory.tools import ToolArgumentsError

    add = tools(provider)["add"]
    with pytest.raises(ToolArgumentsError, match="not valid JSON"):
        add.execute("{nope", CONTEXT)
    with pytest.raises(ToolArgumentsError, match="must be a JSON object"):
        add.execute("[1, 2]", CONTEXT)


def test_only_keeps_the_named_tools() -> None:
    with McpToolProvider.stdio(sys.executable, SERVER, "stdio", only=["add"]) as provider:
        assert [t.specification.name for t in provider.provide(CONTEXT)] == ["add"]


def test_bad_settings_and_unreachable_servers_say_what_to_do() -> None:
    with pytest.raises(ConfigurationError, match=r"McpToolProvider.stdio\('my-server'"):
        McpToolProvider("my-server")
    with pytest.raises(ConfigurationError, match="non-empty list of strings"):
        McpToolProvider([])
    with pytest.raises(ConfigurationError, match="URL or a command with its arguments in a list"):
        McpToolProvider(None)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="URL needs a host"):
        McpToolProvider("http:///mcp")
    with pytest.raises(ConfigurationError, match="`name` must be a non-empty string"):
        McpToolProvider("http://127.0.0.1:1/mcp", name=" ")
    with pytest.raises(ConfigurationError, match="`timeout` must be a positive number"):
        McpToolProvider("http://127.0.0.1:1/mcp", timeout=0)
    with pytest.raises(ConfigurationError, match="`connect_timeout` must be a positive number"):
        McpToolProvider("http://127.0.0.1:1/mcp", connect_timeout=float("nan"))
    nobody = McpToolProvider.http(f"http://127.0.0.1:{free_port()}/mcp", timeout=3)
    with nobody, pytest.raises(ToolServerError, match="cannot list the tools of the MCP") as e:
        nobody.provide(CONTEXT)
    assert "TaskGroup" not in str(e.value)  # what went wrong, not that a task group gathered it
    assert repr(nobody) == f"McpToolProvider({nobody.name!r})"


def messages(error: BaseException) -> list[str]:
    """The message of `error` and of every exception chained to it or grouped in it."""
    found: list[str] = []
    todo, seen = [error], set()
    while todo:
        e = todo.pop()
        if id(e) not in seen:
            seen.add(id(e))
            found.append(str(e))
            todo += [x for x in (e.__cause__, e.__context__) if x is not None]
            todo += list(getattr(e, "exceptions", ()))
    return found


@contextmanager
def echoing() -> Iterator[int]:
    """The port of an HTTP server that answers every message with an error quoting its URL."""

    class Echo(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            sent = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            error = {"code": -32600, "message": f"no access to {self.path}#SECRET4"}
            body = json.dumps({"jsonrpc": "2.0", "id": sent.get("id"), "error": error}).encode()
            self.send_response(403)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    with ThreadingHTTPServer(("127.0.0.1", 0), Echo) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield server.server_address[1]
        finally:
            server.shutdown()
            thread.join()


def test_errors_and_reprs_name_the_server_never_its_secrets(http_url: str) -> None:
    seen: list[str] = []

    def fails(make: Callable[[], object]) -> str:
        with pytest.raises((ConfigurationError, ToolServerError)) as raised:
            make()
        seen.extend(messages(raised.value))
        return str(raised.value)

    keyed = McpToolProvider.stdio(sys.executable, SERVER, "stdio", "--api-key=SECRET1", timeout=1)
    with keyed:
        found = tools(keyed)
        late = found["sleep"].execute('{"seconds": 30}', CONTEXT)
        seen += [repr(keyed), *map(repr, found.values()), late.text]
    assert repr(keyed) == f"McpToolProvider({Path(sys.executable).name!r})"
    assert late.text.startswith(f"The MCP server {Path(sys.executable).name!r} failed during sleep")
    missing = McpToolProvider.stdio("/nowhere/mcp-server", "--api-key=SECRET1", name="files")
    with missing:
        assert "the MCP server 'files'" in fails(lambda: missing.provide(CONTEXT))

    port = urlsplit(http_url).port
    secrets = "//user:SECRET2@127.0.0.1:{}/mcp?token=SECRET3#SECRET4"
    tokened = McpToolProvider.http("http:" + secrets.format(port), timeout=1)
    with tokened:
        found = tools(tokened)
        late = found["sleep"].execute('{"seconds": 5}', CONTEXT)
        seen += [repr(tokened), *map(repr, found.values()), late.text]
    assert repr(tokened) == f"McpToolProvider('http://127.0.0.1:{port}/mcp')"
    nobody = McpToolProvider.http("http:" + secrets.format(free_port()), timeout=3)
    with nobody:
        fails(lambda: nobody.provide(CONTEXT))
    with echoing() as port:
        echoed = McpToolProvider.http("http:" + secrets.format(port), timeout=3)
        with echoed:
            assert "no access to /mcp?…#…" in fails(lambda: echoed.provide(CONTEXT))

    fails(lambda: McpToolProvider("npx server --api-key=SECRET1"))
    fails(lambda: McpToolProvider.stdio("npx server --api-key=SECRET1"))
    fails(lambda: McpToolProvider(["npx", "--api-key=SECRET1", ""]))
    fails(lambda: McpToolProvider("ws:" + secrets.format(1)))
    fails(lambda: McpToolProvider("http:" + secrets.format("99999")))
    assert len(seen) > 10
    assert [text for text in seen if "SECRET" in text] == []


class Agent(Protocol):
    def chat(self, user: Annotated[str, MemoryId], text: str) -> Result[str]: ...

    async def achat(self, user: Annotated[str, MemoryId], text: str) -> Result[str]: ...

    def events(self, user: Annotated[str, MemoryId], text: str) -> TokenStream: ...


@pytest.mark.parametrize("mode", ["sync", "async", "stream"])
def test_a_service_calls_mcp_tools(provider: McpToolProvider, mode: str) -> None:
    call = AiMessage(
        tool_execution_requests=[
            ToolExecutionRequest("c1", "add", '{"a": 20, "b": 22}'),
            ToolExecutionRequest("c2", "refuse", '{"reason": "no"}'),
        ]
    )
    model = ScriptedChatModel([call, "The sum is 42."])
    memories: dict[str, MessageWindowChatMemory] = {}
    service = ai_service(
        Agent,
        chat_model=model,
        chat_memory_provider=lambda mid: memories.setdefault(
            mid, MessageWindowChatMemory(id=mid, max_messages=20)
        ),
        tool_providers=[provider],
    )
    if mode == "sync":
        result = service.chat("ann", "add 20 and 22")
    elif mode == "async":
        result = asyncio.run(service.achat("ann", "add 20 and 22"))
    else:
        stream = service.events("ann", "add 20 and 22")
        for _ in stream:
            pass
        result = stream.result
    assert result.content == "The sum is 42."
    first, second = result.tool_executions
    assert (first.result, first.is_error, second.is_error) == ("42", False, True)
    assert memories["ann"].messages()[:3] == [
        UserMessage("add 20 and 22"),
        call,
        ToolExecutionResultMessage("c1", "add", "42"),
    ]
    assert model.requests[0].tools[0].name == "add"
