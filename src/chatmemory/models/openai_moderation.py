"""`OpenAiModerationModel`: the moderations endpoint of the official `openai` SDK.

All texts of a call go in one request (`input` as a list); the verdict names the first text the
endpoint flagged, with its categories and scores. An answer that does not judge every text (a
result missing, `flagged` not a bool) is a `ModelError`, never a clean verdict.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._codec.invalid import describe
from .._errors import ConfigurationError, SerializationError
from .._messages import ChatMessage
from ._moderation import Moderation, moderation_texts
from ._openai_clients import OpenAiClients, require_openai
from ._sdk import mapped_errors
from ._wire import answer_object, json_array, json_object

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
            return _verdict(texts, answer_object(self._clients.errors, self.model, answer))

    async def amoderate(self, messages: str | Sequence[ChatMessage], /) -> Moderation:
        """The endpoint's verdict on `messages`, without blocking the event loop."""
        texts = moderation_texts(messages)
        if not texts:
            return Moderation.not_flagged()
        with mapped_errors(self._clients.errors, self.model):
            answer = await self._clients.async_().moderations.create(model=self.model, input=texts)
            return _verdict(texts, answer_object(self._clients.errors, self.model, answer))


def _verdict(texts: list[str], answer: Mapping[str, Any]) -> Moderation:
    """The verdict of the endpoint's `answer` on `texts` (one result per text, in order)."""
    results = json_array(answer.get("results"), "results")
    if len(results) != len(texts):
        raise SerializationError(
            f"`results` holds {len(results)} verdicts for {len(texts)} texts; the endpoint "
            f"answers one result per text"
        )
    for position, (text, given) in enumerate(zip(texts, results, strict=True)):
        where = f"results[{position}]"
        result = json_object(given, where, required=True)
        flagged = result.get("flagged")
        if not isinstance(flagged, bool):
            raise SerializationError(
                f"`{where}.flagged` must be true or false, got {describe(flagged)}"
            )
        if flagged:
            categories = json_object(result.get("categories"), f"{where}.categories")
            scores = json_object(result.get("category_scores"), f"{where}.category_scores")
            return Moderation(
                text,
                tuple(sorted(name for name, hit in categories.items() if hit)),
                {
                    name: _score(score, f"{where}.category_scores.{name}")
                    for name, score in scores.items()
                    if score is not None
                },
            )
    return Moderation.not_flagged()


def _score(value: object, where: str) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise SerializationError(f"`{where}` must be a number, got {describe(value)}")
