"""What the HTTP adapters of the retrieval pipeline share (SearXNG, `/rerank` servers): an
`httpx2` client made on first use, and the mapping of its errors to `ModelError`.

`httpx2`, the HTTP client of the `openai` and `anthropic` SDKs, comes with the `rag` extra;
without it, constructing an adapter raises an ImportError naming the `pip install` line.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from .._errors import ModelError
from ..models._sdk import provider_message

try:
    import httpx2 as httpx
except ImportError:  # pragma: no cover - httpx2 comes with the rag extra and the SDKs
    _httpx_missing = True
else:
    _httpx_missing = False

if TYPE_CHECKING:
    from httpx2 import AsyncClient, Client

__all__ = ["HttpEndpoint"]


class HttpEndpoint:
    """One HTTP service: its base URL, headers and timeout, sync and async clients made on
    first use, and errors that say what failed (`provider` names it in messages)."""

    def __init__(
        self,
        provider: str,
        base_url: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = 30.0,
        owner: str,
    ) -> None:
        if _httpx_missing:  # pragma: no cover - see the module docstring
            raise ImportError(f"{owner} needs httpx2: pip install 'chatmemory[rag]'")
        self.provider = provider
        self.base_url = base_url.rstrip("/")
        self._settings: dict[str, Any] = {
            "base_url": self.base_url,
            "headers": dict(headers or {}),
            "timeout": timeout,
        }
        self._client: Client | None = None
        self._async_client: AsyncClient | None = None

    def get(self, path: str, params: Mapping[str, Any]) -> Any:
        with self._errors():
            if self._client is None:
                self._client = httpx.Client(**self._settings)
            response = self._client.get(path, params=dict(params))
            return self._json(response)

    async def aget(self, path: str, params: Mapping[str, Any]) -> Any:
        with self._errors():
            response = await self._async().get(path, params=dict(params))
            return self._json(response)

    def post(self, path: str, body: Mapping[str, Any]) -> Any:
        with self._errors():
            if self._client is None:
                self._client = httpx.Client(**self._settings)
            response = self._client.post(path, json=dict(body))
            return self._json(response)

    async def apost(self, path: str, body: Mapping[str, Any]) -> Any:
        with self._errors():
            response = await self._async().post(path, json=dict(body))
            return self._json(response)

    def close(self) -> None:
        """Closes the sync client."""
        if self._client is not None:
            self._client.close()
            self._client = None

    async def aclose(self) -> None:
        """Closes both clients."""
        self.close()
        if self._async_client is not None:
            await self._async_client.aclose()
            self._async_client = None

    def _async(self) -> AsyncClient:
        if self._async_client is None:
            self._async_client = httpx.AsyncClient(**self._settings)
        return self._async_client

    def _json(self, response: httpx.Response) -> Any:
        if response.is_error:
            status = response.status_code
            try:
                said = provider_message(response.json()) or response.text
            except ValueError:
                said = response.text
            retriable = status in (408, 409, 429) or status >= 500
            raise ModelError(
                f"{self.provider} answered HTTP {status} at {response.request.url}: "
                f"{said or response.reason_phrase}",
                retriable=retriable,
                status=status,
                provider=self.provider.lower(),
                provider_message=said or None,
            )
        try:
            return response.json()
        except ValueError as error:
            raise ModelError(
                f"{self.provider} sent something other than JSON from {response.request.url}: "
                f"{response.text[:200]!r}",
                retriable=False,
                provider=self.provider.lower(),
            ) from error

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except httpx.TimeoutException as error:
            raise ModelError(
                f"{self.provider} at {self.base_url} did not answer in time; try again, or "
                f"raise `timeout`",
                retriable=True,
                provider=self.provider.lower(),
            ) from error
        except httpx.TransportError as error:
            raise ModelError(
                f"cannot reach {self.provider} at {self.base_url}: {error}; check the URL and "
                f"that the server runs",
                retriable=True,
                provider=self.provider.lower(),
            ) from error
