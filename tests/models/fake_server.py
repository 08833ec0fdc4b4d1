"""A local HTTP server that answers what each test scripts, in a provider's wire format, and
`answer`, which asks a model each of the four ways.

It runs on 127.0.0.1 (port 0, so any free port) in a thread, records every request it receives
(method, path, headers, JSON body) so tests can assert what the SDK sent, and answers with the
scripted replies in order: JSON bodies with any status and headers, or server-sent events.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from chatmemory import ModelError, UserMessage
from chatmemory.models import AnthropicChatModel, ChatRequest, OpenAiChatModel

__all__ = [
    "DEEP",
    "FakeServer",
    "Recorded",
    "Reply",
    "answer",
    "assert_unreadable",
    "llama_cpp_refusal",
    "not_json_objects",
]

DEEP = "[" * 100_000 + "]" * 100_000
"""JSON nested 100k deep: more than any JSON parser in Python follows."""


@dataclass(frozen=True)
class Reply:
    """One scripted answer: a JSON `body` with `status`, `events` sent as SSE, or `text`.

    `events` are ``(event name or None, data)``; data that is not a str is sent as JSON.
    """

    status: int = 200
    body: Any = None
    events: Sequence[tuple[str | None, Any]] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    text: str | None = None
    """A body sent as it is: text/html (an HTML error page) unless `content_type` says."""
    content_type: str = "text/html"

    def encode(self) -> tuple[bytes, str]:
        if self.text is not None:
            return self.text.encode(), self.content_type
        if self.events is None:
            return json.dumps(self.body).encode(), "application/json"
        lines: list[str] = []
        for name, data in self.events:
            if name is not None:
                lines.append(f"event: {name}\n")
            text = data if isinstance(data, str) else json.dumps(data)
            lines.append(f"data: {text}\n\n")
        return "".join(lines).encode(), "text/event-stream"


@dataclass(frozen=True)
class Recorded:
    """A request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


class FakeServer:
    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.models: list[str] | None = ["gpt-4o-mini"]
        """The models `GET .../models` lists, unscripted and unrecorded (None: scripted)."""
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # else headers and body wait on delayed ACKs (~40 ms)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                self._answer("POST", json.loads(raw) if raw else None)

            def do_GET(self) -> None:
                if self.path.endswith("/models") and server.models is not None:
                    listed = [{"id": m, "object": "model", "owned_by": "me"} for m in server.models]
                    payload = json.dumps({"object": "list", "data": listed}).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                self._answer("GET", None)

            def _answer(self, method: str, body: Any) -> None:
                headers = {k.lower(): v for k, v in self.headers.items()}
                with server._lock:
                    server.requests.append(Recorded(method, self.path, headers, body))
                    reply = server._replies.popleft() if server._replies else _UNSCRIPTED
                payload, content_type = reply.encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(payload)))
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client gave up (a timeout test)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep test output clean

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._http.daemon_threads = True
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}"

    def reply(self, *replies: Reply) -> None:
        with self._lock:
            self._replies.extend(replies)

    @property
    def unused(self) -> int:
        return len(self._replies)

    def __enter__(self) -> FakeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join()


def llama_cpp_refusal(field: str, said: str, given: Any) -> Reply:
    """llama.cpp's server (llama-cpp-python's) refusing a request field it does not take: HTTP
    500 with pydantic's validation error as the message, as the real server answers a
    `response_format` of type json_schema (`field` "response_format.type", `said` "Input should
    be 'text' or 'json_object'")."""
    loc = ("body", *field.split("."))
    message = (
        f"1 validation error:\n  {{'type': 'literal_error', 'loc': {loc!r}, 'msg': {said!r}, "
        f"'input': {given!r}}}\n\n  File \"llama_cpp/server/app.py\", line 376, in "
        f"create_chat_completion\n    POST /v1/chat/completions"
    )
    error = {"message": message, "type": "internal_server_error", "param": None, "code": None}
    return Reply(500, {"error": error})


_UNSCRIPTED = Reply(
    500,
    {"error": {"message": "the fake server has no reply scripted for this request"}},
    headers={"x-should-retry": "false"},
)


def serve() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server
        assert server.unused == 0, f"{server.unused} scripted replies were never requested"


def answer(model: OpenAiChatModel | AnthropicChatModel, way: str) -> object:
    """The model's answer to "hi" by `way` (chat, achat, stream or astream); the async ways
    close the model's async client inside their event loop."""
    request = ChatRequest([UserMessage("hi")])
    if way == "chat":
        return model.chat(request)
    if way == "stream":
        return list(model.stream(request))

    async def run() -> object:
        try:
            if way == "achat":
                return await model.achat(request)
            return [event async for event in model.astream(request)]
        finally:
            await model.aclose()

    return asyncio.run(run())


def not_json_objects(broken: str, array_item: Any) -> dict[str, tuple[Reply, str]]:
    """HTTP 200 answers that are not a JSON object (a proxy's page, broken JSON with the
    protocol's `broken` text, an array of a valid `array_item`, JSON too deep to read), each with
    what the `ModelError` says."""
    return {
        "an HTML page": (Reply(text="<html><body>Log in to the proxy</body></html>"), "not JSON"),
        "broken JSON": (Reply(text=broken, content_type="application/json"), "not JSON"),
        "a JSON array": (Reply(body=[array_item]), "not a JSON object"),
        "JSON nested 100k deep": (
            Reply(text=DEEP, content_type="application/json"),
            "nested too deeply",
        ),
    }


def assert_unreadable(call: Callable[[], object], said: str, provider: str) -> None:
    """`call` raises a `ModelError` matching `said`, not retriable (what sent it sends it again),
    that says to check base_url and quotes what came back instead of copying it."""
    with pytest.raises(ModelError, match=said) as caught:
        call()
    error = caught.value
    assert (error.retriable, error.provider) == (False, provider)
    assert "check base_url" in str(error)
    assert len(str(error)) < 400  # what the server sent is quoted, not copied
