"""The chat model of `chat`, `prompt` and `ask`: the options that name it and the model itself."""

from __future__ import annotations

import os
from typing import Any

import click

from .._errors import ConfigurationError
from .._tokens import ApproximateTokenCountEstimator, OpenAiTokenCountEstimator
from .._tokens.estimator import TokenCountEstimator
from ..models import StreamingChatModel
from .base import F

__all__ = ["estimator_for", "make_model", "model_call_options", "served_model"]

DEFAULT_MODELS = {"openai": "gpt-4o-mini", "anthropic": "claude-3-5-haiku-latest"}
KEY_VARIABLES = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


def model_call_options(command: F) -> F:
    """Add --timeout and --max-retries, the chat model's call settings."""
    command = click.option(
        "--max-retries",
        type=click.IntRange(min=0),
        default=2,
        show_default=True,
        help="Retries of a failed call (rate limits, server errors; never a timed-out one).",
    )(command)
    return click.option(
        "--timeout",
        type=click.FloatRange(min=0, min_open=True),
        default=120.0,
        show_default=True,
        help="Seconds to wait for the model's answer (a slow local server needs more).",
    )(command)


def make_model(
    provider: str | None,
    model: str | None,
    base_url: str | None,
    timeout: float = 120.0,
    max_retries: int = 2,
) -> tuple[StreamingChatModel, str, str]:
    """The streaming model the options name, its provider and model name; a clear error when
    none is configured (no API key variable, no local server URL). Without a model name, a
    server at `base_url` is asked which it serves."""
    if provider is None:
        anthropic_only = os.environ.get("ANTHROPIC_API_KEY") and not os.environ.get(
            "OPENAI_API_KEY"
        )
        provider = "anthropic" if anthropic_only and base_url is None else "openai"
    variable = KEY_VARIABLES[provider]
    api_key = os.environ.get(variable)
    if not api_key and base_url is None:
        raise click.ClickException(
            f"no chat model configured: set {variable} to use {provider}"
            + (" (or ANTHROPIC_API_KEY with --provider anthropic)" if provider == "openai" else "")
            + ", or point --base-url at an OpenAI-compatible server, e.g. Ollama's "
            "http://localhost:11434/v1 with --model llama3.2"
        )
    api_key = api_key or "not-needed"  # local servers ignore it, the SDKs want one
    settings: dict[str, Any] = {
        "api_key": api_key,
        "base_url": base_url,
        "timeout": timeout,
        "max_retries": max_retries,
    }
    if provider == "anthropic":
        from ..models.anthropic import AnthropicChatModel

        name = model or DEFAULT_MODELS[provider]
        return AnthropicChatModel(model=name, **settings), provider, name
    from ..models.openai import OpenAiChatModel

    name = model or served_model(base_url, api_key) or DEFAULT_MODELS[provider]
    return OpenAiChatModel(model=name, **settings), provider, name


def served_model(base_url: str | None, api_key: str) -> str | None:
    """The first model an OpenAI-compatible server at `base_url` lists (None for OpenAI, or
    when the server cannot say: the first call then reports what is wrong)."""
    if base_url is None or "://" not in base_url:
        return None
    import openai

    try:
        with openai.OpenAI(base_url=base_url, api_key=api_key, timeout=10, max_retries=0) as sdk:
            for served in sdk.models.list():
                return served.id
    except openai.OpenAIError:
        return None
    return None


def estimator_for(model: str) -> TokenCountEstimator:
    """Exact counts for an OpenAI model, approximate ones for any other."""
    try:
        return OpenAiTokenCountEstimator(model)
    except ConfigurationError:  # not an OpenAI model: counted approximately
        return ApproximateTokenCountEstimator()
