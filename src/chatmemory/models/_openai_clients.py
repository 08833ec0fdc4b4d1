"""The `openai` SDK clients an OpenAI adapter uses: made on first use from the adapter's
settings (or injected), closed only when the adapter made them, errors mapped to ours.

Every OpenAI adapter (chat, moderation, embeddings) holds one; none repeats this.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._sdk import SdkErrors, mapped_errors, missing_sdk

try:
    import openai
except ImportError:  # the optional extra is not installed: the adapter says so when constructed
    _openai_missing = True
else:
    _openai_missing = False

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
                self._client = openai.OpenAI(**self.settings)
        return self._client

    def async_(self) -> AsyncOpenAI:
        if self._async_client is None:
            with mapped_errors(self.errors, self.model):
                self._async_client = openai.AsyncOpenAI(**self.settings)
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
