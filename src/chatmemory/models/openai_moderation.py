"""`OpenAiModerationModel`: the moderations endpoint of the official `openai` SDK.

All texts of a call go in one request (`input` as a list); the verdict names the first text the
endpoint flagged, with its categories and scores.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._errors import ConfigurationError
from .._messages import ChatMessage
from ._moderation import Moderation, moderation_texts
from ._openai_clients import OpenAiClients, require_openai
from ._sdk import mapped_errors

if TYPE_CHECKING:
    from openai import AsyncOpenAI, OpenAI

__all__ = ["OpenAiModerationModel"]


class OpenAiModerationModel:
    """A moderation model behind OpenAI's `/moderations` endpoint.

    ``OpenAiModerationModel()`` reads the key from ``OPENAI_API_KEY`` and uses
    ``omni-moderation-latest``. `moderate` and `amoderate` take a text or chat messages (the
    texts of system, user and AI messages are judged) and return a `Moderation`. `timeout`,
    `max_retries`, `client` and `async_client` work as in `OpenAiChatModel`; what fails
    raises `ModelError`.
    """

    def __init__(
        self,
        *,
        model: str = "omni-moderation-latest",
        base_url: str | None = None,
        api_key: str | None = None,
        organization: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        client: OpenAI | None = None,
        async_client: AsyncOpenAI | None = None,
    ) -> None:
        require_openai("OpenAiModerationModel")
        if not isinstance(model, str) or not model:
            raise ConfigurationError(f"`model` must be a non-empty str, got {model!r}")
        self.model = model
        self._clients = OpenAiClients(
            model,
            base_url=base_url,
            api_key=api_key,
            organization=organization,
            timeout=timeout,
            max_retries=max_retries,
            client=client,
            async_client=async_client,
        )

    def __repr__(self) -> str:
        base_url = self._clients.base_url
        where = f", base_url={base_url!r}" if base_url else ""
        return f"OpenAiModerationModel(model={self.model!r}{where})"

    def close(self) -> None:
        """Closes the sync SDK client this model made (an injected one stays open)."""
        self._clients.close()

    async def aclose(self) -> None:
        """Closes the SDK clients this model made (injected ones stay open)."""
        await self._clients.aclose()

    def moderate(self, messages: str | Sequence[ChatMessage], /) -> Moderation:
        """The endpoint's verdict on `messages` (a text, or chat messages)."""
        texts = moderation_texts(messages)
        if not texts:
            return Moderation.not_flagged()
        with mapped_errors(self._clients.errors, self.model):
            answer = self._clients.sync().moderations.create(model=self.model, input=texts)
            return _verdict(texts, answer.to_dict())

    async def amoderate(self, messages: str | Sequence[ChatMessage], /) -> Moderation:
        """The endpoint's verdict on `messages`, without blocking the event loop."""
        texts = moderation_texts(messages)
        if not texts:
            return Moderation.not_flagged()
        with mapped_errors(self._clients.errors, self.model):
            answer = await self._clients.async_().moderations.create(model=self.model, input=texts)
            return _verdict(texts, answer.to_dict())


def _verdict(texts: list[str], answer: Mapping[str, Any]) -> Moderation:
    results: list[Any] = answer.get("results") or []
    for text, result in zip(texts, results, strict=False):
        if result.get("flagged"):
            categories: Mapping[str, Any] = result.get("categories") or {}
            scores: Mapping[str, Any] = result.get("category_scores") or {}
            return Moderation(
                text,
                tuple(sorted(name for name, hit in categories.items() if hit)),
                {name: float(score) for name, score in scores.items() if score is not None},
            )
    return Moderation.not_flagged()
