"""The `openai` SDK clients an OpenAI adapter uses: made on first use from the adapter's
settings (or injected), closed only when the adapter made them, errors mapped to ours.

Every OpenAI adapter (chat, moderation, embeddings) holds one; none repeats this.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .._errors import ConfigurationError
from ._refusals import is_a_refusal
from ._sdk import SdkErrors, mapped_errors, missing_sdk

try:
    import openai
except ImportError:  # the optional extra is not installed: the adapter says so when constructed
    _openai_missing = True
else:
    _openai_missing = False

    import httpx2

    _LIMITS = httpx2.Limits(max_connections=1000, max_keepalive_connections=100)  # the SDK's

    class _NoResend(httpx2.HTTPTransport):
        """A transport that turns a read timeout (the server took the request and said nothing)
        into the SDK's final timeout error, which it does not retry: a server that is slow to
        answer is not sent the same work again (and again) while it may still be busy with it."""

        def handle_request(self, request: httpx2.Request) -> httpx2.Response:
            try:
                return super().handle_request(request)
            except httpx2.ReadTimeout as error:
                raise openai.APITimeoutError(request=request) from error

    class _AsyncNoResend(httpx2.AsyncHTTPTransport):
        """`_NoResend` for the async client."""

        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            try:
                return await super().handle_async_request(request)
            except httpx2.ReadTimeout as error:
                raise openai.APITimeoutError(request=request) from error

    class _HttpClient(openai.DefaultHttpxClient):
        """The SDK's HTTP client with its defaults, closed when dropped (as the SDK's own)."""

        def __del__(self) -> None:
            if not self.is_closed:
                with contextlib.suppress(Exception):
                    self.close()

    class _AsyncHttpClient(openai.DefaultAsyncHttpxClient):
        """The SDK's async HTTP client with its defaults, closed when dropped in a loop."""

        def __del__(self) -> None:
            if not self.is_closed:
                with contextlib.suppress(Exception):
                    asyncio.get_running_loop().create_task(self.aclose())


if TYPE_CHECKING:
    from openai import AsyncOpenAI, OpenAI

__all__ = ["OpenAiClients", "require_openai"]


def require_openai(cls: str) -> None:
    """An ImportError naming the `pip install` line when the `openai` package is absent."""
    if _openai_missing:
        raise missing_sdk(cls, "openai", "openai")


class OpenAiClients:
    """The sync and async SDK clients of one adapter; `model` names it in error messages."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None,
        api_key: str | None,
        organization: str | None,
        timeout: float,
        max_retries: int,
        client: OpenAI | None,
        async_client: AsyncOpenAI | None,
    ) -> None:
        if base_url is not None and "://" not in base_url:
            raise ConfigurationError(
                f"base_url {base_url!r} has no scheme: add http:// (or https://), e.g. "
                f"http://{base_url}"
            )
        self.model = model
        self.settings: dict[str, Any] = {
            "base_url": base_url,
            "api_key": api_key,
            "organization": organization,
            "timeout": timeout,
            "max_retries": max_retries,
        }
        self.errors = SdkErrors(
            "OpenAI",
            openai.OpenAIError,
            openai.APIStatusError,
            openai.APIConnectionError,
            openai.APITimeoutError,
            server=_server(base_url),
        )
        self._client = client
        self._async_client = async_client
        self._owns_client = client is None
        self._owns_async_client = async_client is None
        if client is None and async_client is None:
            self.sync()  # a missing API key is reported now, not at the first call

    @property
    def base_url(self) -> str | None:
        value: str | None = self.settings["base_url"]
        return value

    def sync(self) -> OpenAI:
        if self._client is None:
            with mapped_errors(self.errors, self.model):
                http = _HttpClient(
                    transport=_NoResend(limits=_LIMITS),
                    event_hooks={"response": [_refusal_final]},
                )
                self._client = openai.OpenAI(**self.settings, http_client=http)
        return self._client

    def async_(self) -> AsyncOpenAI:
        if self._async_client is None:
            with mapped_errors(self.errors, self.model):
                http = _AsyncHttpClient(
                    transport=_AsyncNoResend(limits=_LIMITS),
                    event_hooks={"response": [_async_refusal_final]},
                )
                self._async_client = openai.AsyncOpenAI(**self.settings, http_client=http)
        return self._async_client

    def close(self) -> None:
        """Closes the sync client, if it was made here."""
        if self._owns_client and self._client is not None:
            self._client.close()
            self._client = None

    async def aclose(self) -> None:
        """Closes both clients, where they were made here."""
        self.close()
        if self._owns_async_client and self._async_client is not None:
            await self._async_client.close()
            self._async_client = None


def _server(base_url: str | None) -> str | None:
    """The base URL when it is not OpenAI's own API (errors then name the server)."""
    if base_url is None or urlsplit(base_url).hostname == "api.openai.com":
        return None
    return base_url.rstrip("/")


# A server error that names a feature of the request (llama.cpp answers HTTP 500 to a response
# format it does not take) comes again when the request is sent again: the SDK is told not to
# retry it (its `x-should-retry` header), and the adapter sends the request without the feature.


def _refusal_final(response: Any) -> None:
    if response.status_code >= 500 and "x-should-retry" not in response.headers:
        response.read()
        if is_a_refusal(response.text):
            response.headers["x-should-retry"] = "false"


async def _async_refusal_final(response: Any) -> None:
    if response.status_code >= 500 and "x-should-retry" not in response.headers:
        await response.aread()
        if is_a_refusal(response.text):
            response.headers["x-should-retry"] = "false"
