"""The inspector's web app: a few GET pages rendered on the server (Starlette and Jinja2).

Safe by default: every stored text reaches the page through Jinja2's autoescaping (messages are
untrusted input), the Content-Security-Policy lets only the app's own script and style run (so
even text that escaped escaping could not execute), only GET is routed (nothing on the page can
change a store), and requests must name a loopback host (a page elsewhere cannot reach the
inspector by DNS rebinding).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from .._errors import ChatMemoryError
from .._tokens import OpenAiTokenCountEstimator, TokenCountEstimator
from . import _views
from ._views import Inspectable

__all__ = ["LOOPBACK_HOSTS", "create_app"]

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]", "::1")

_HERE = Path(__file__).parent
_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
_MAX_TOP_K = 20

Lookup = Callable[[], Mapping[str, str]]
"""A function giving a value per memory id (a title, a user), called once per page."""


def _templates() -> Jinja2Templates:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_HERE / "templates"),
        autoescape=True,  # every template, whatever its name
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["memory_url"] = lambda memory_id: "/c/" + quote(memory_id, safe="")
    env.filters["time"] = lambda t: t.strftime("%Y-%m-%d %H:%M:%S") if t else "—"
    return Jinja2Templates(env=env)


def create_app(
    store: Inspectable,
    *,
    estimator: TokenCountEstimator | None = None,
    titles: Lookup | None = None,
    users: Lookup | None = None,
    source: str = "",
    allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS,
) -> Starlette:
    """The inspector of `store` as an ASGI app (serve it with uvicorn, or `chatmemory inspect`).

    `estimator` counts each message's tokens (OpenAI's gpt-4o-mini counts by default);
    `titles` and `users` return each conversation's title and user by memory id, when the
    application keeps them (called once per page); `source` says on each page where the data
    is. The store is only read.
    """
    counter = estimator if estimator is not None else OpenAiTokenCountEstimator("gpt-4o-mini")
    templates = _templates()

    def lookups() -> dict[str, Mapping[str, str] | None]:
        return {"titles": titles() if titles else None, "users": users() if users else None}

    def page(request: Request, name: str, status: int = 200, **context: Any) -> Response:
        return templates.TemplateResponse(
            request, name, {"source": source, **context}, status_code=status, headers=_HEADERS
        )

    def index(request: Request) -> Response:
        user = request.query_params.get("user") or None
        rows = _views.conversations(store, **lookups(), user=user)
        return page(request, "index.html", rows=rows, user=user)

    def show(request: Request) -> Response:
        memory_id = request.path_params["memory_id"]
        query = request.query_params.get("recall", "").strip() or None
        found = _views.conversation(
            store,
            memory_id,
            counter,
            **lookups(),
            recall_query=query,
            top_k=_top_k(request),
        )
        if found is None:
            return page(
                request, "error.html", 404, message=f"no conversation {memory_id!r} is stored"
            )
        return page(request, "conversation.html", c=found, top_k=_top_k(request))

    def search(request: Request) -> Response:
        query = request.query_params.get("q", "").strip()
        hits = _views.search(store, query, counter) if query else []
        return page(request, "search.html", q=query, hits=hits)

    async def failed(request: Request, error: Exception) -> Response:
        return page(request, "error.html", 500, message=str(error))

    async def not_found(request: Request, error: Exception) -> Response:
        assert isinstance(error, HTTPException)
        return page(request, "error.html", error.status_code, message=str(error.detail))

    handlers: dict[Any, Callable[[Request, Exception], Awaitable[Response]]] = {
        ChatMemoryError: failed,
        HTTPException: not_found,
    }
    return Starlette(
        routes=[
            Route("/", index),
            Route("/search", search),
            Route("/c/{memory_id:path}", show),
            Mount("/static", StaticFiles(directory=_HERE / "static"), name="static"),
        ],
        middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))],
        exception_handlers=handlers,
    )


def _top_k(request: Request) -> int:
    raw = request.query_params.get("top_k", "3")
    try:
        return min(max(int(raw), 1), _MAX_TOP_K)
    except ValueError:
        return 3
