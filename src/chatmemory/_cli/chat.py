"""`chatmemory chat`: an interactive chat whose conversation is stored and continued next time."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click

from .._errors import ChatMemoryError, ConfigurationError
from .._memory.window import TokenWindowChatMemory
from .._messages import AiMessage, SystemMessage, UserMessage
from .._tokens import ApproximateTokenCountEstimator, OpenAiTokenCountEstimator
from .._tokens.estimator import TokenCountEstimator
from ..models import ChatRequest, ChatResponse, PartialText, StreamingChatModel
from .base import F
from .render import Row, message_lines, role, summary
from .stores import Store, StoreSpec, store_options

__all__ = [
    "Session",
    "chat",
    "estimator_for",
    "make_model",
    "model_call_options",
    "served_model",
]

DEFAULT_MODELS = {"openai": "gpt-4o-mini", "anthropic": "claude-3-5-haiku-latest"}
KEY_VARIABLES = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}

HELP = """\
/history        every message of this conversation, the window's marked with ●
/window         what the model sees next, with token counts
/clear          forget this conversation (window and history)
/system TEXT    set the system message
/exit           leave (Ctrl-D too)"""


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
    try:
        return OpenAiTokenCountEstimator(model)
    except ConfigurationError:  # not an OpenAI model: counted approximately
        return ApproximateTokenCountEstimator()


@dataclass
class Session:
    memory: TokenWindowChatMemory
    store: Store
    model: StreamingChatModel
    estimator: TokenCountEstimator
    max_tokens: int
    echo: Callable[..., None]

    def command(self, line: str) -> bool:
        """Run a slash command; False to leave."""
        name, _, argument = line.partition(" ")
        argument = argument.strip()
        if name in ("/exit", "/quit"):
            return False
        handler = {
            "/history": self.history,
            "/window": self.window,
            "/clear": self.clear,
            "/help": lambda _: self.echo(HELP),
            "/system": self.system,
        }.get(name)
        if handler is None:
            self.echo(f"unknown command {name}: /help lists them")
        else:
            handler(argument)
        return True

    def history(self, _: str) -> None:
        entries = self.store.history(self.memory.id)
        if not entries:
            self.echo("nothing said yet")
        for line in message_lines(
            Row(e.message, seq=e.seq, in_window=e.in_window) for e in entries
        ):
            self.echo(line)

    def window(self, _: str) -> None:
        messages = self.memory.messages()
        for message in messages:
            count = self.estimator.count_message(message)
            self.echo(f"{count:>6}  {role(message):<6}  {summary(message)}")
        total = self.estimator.count_messages(messages) if messages else 0
        self.echo(f"{len(messages)} message(s): {total} of {self.max_tokens} tokens")

    def clear(self, _: str) -> None:
        self.memory.clear()
        self.echo("conversation cleared")

    def system(self, text: str) -> None:
        if not text:
            self.echo("/system needs the text: /system You are terse.")
            return
        self.memory.add(SystemMessage(text))
        self.echo("system message set")

    def turn(self, text: str) -> None:
        """Ask the model with the window and the user's text, print the answer as it streams,
        and store both only once the answer is complete: a failed or interrupted turn leaves
        the conversation as it was."""
        user = UserMessage(text)
        request = ChatRequest(self.memory.preview(user))
        response: ChatResponse | None = None
        stream = self.model.stream(request)
        try:
            for event in stream:
                if isinstance(event, PartialText):
                    self.echo(event.text, nl=False)
                elif isinstance(event, ChatResponse):
                    response = event
        except KeyboardInterrupt:
            self.echo("\n(interrupted: this exchange is not kept)")
            return
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
        if response is None:  # pragma: no cover - every model ends with its response
            return
        answer = response.ai_message
        if answer.text is None:
            self.echo("(the model answered with no text: this exchange is not kept)")
            return
        self.echo("")
        self.memory.add(user, AiMessage(answer.text))


@click.command()
@click.option(
    "--model",
    help="Model name [default: the first a --base-url server lists, else gpt-4o-mini, or a "
    "Claude model].",
)
@click.option("--base-url", help="An OpenAI-compatible server (Ollama, vLLM, llama.cpp...).")
@click.option(
    "--provider",
    type=click.Choice(["openai", "anthropic"]),
    help="Whose API to speak [default: openai, or anthropic when only its key is set].",
)
@click.option("--memory-id", default="chat", show_default=True, help="The conversation.")
@click.option(
    "--max-tokens",
    type=click.IntRange(min=100),
    default=4000,
    show_default=True,
    help="Tokens of conversation sent to the model; older messages leave the window.",
)
@click.option("--system", "system_text", help="Set the system message before chatting.")
@model_call_options
@store_options
def chat(
    model: str | None,
    base_url: str | None,
    provider: str | None,
    timeout: float,
    max_retries: int,
    memory_id: str,
    max_tokens: int,
    system_text: str | None,
    **options: Any,
) -> None:
    """Chat with a model; the conversation is stored and continues on the next start.

    The model is OpenAI's unless --provider says otherwise; its key comes from OPENAI_API_KEY
    (or ANTHROPIC_API_KEY), or --base-url points at a local server that needs none.
    """
    chat_model, provider, name = make_model(provider, model, base_url, timeout, max_retries)
    spec = StoreSpec.take(options)
    estimator = estimator_for(name)
    with spec.open("create") as store:
        memory = TokenWindowChatMemory(
            max_tokens=max_tokens, estimator=estimator, id=memory_id, store=store
        )
        session = Session(memory, store, chat_model, estimator, max_tokens, click.echo)
        if system_text:
            memory.add(SystemMessage(system_text))
        kept = len(memory.messages())
        click.echo(
            f"chatting with {name} ({provider}) as {memory_id!r} in {spec.describe()}"
            + (f"; {kept} message(s) in the window" if kept else "")
            + "; /help for commands"
        )
        while True:
            try:
                line = input("you> ").strip()
            except (EOFError, KeyboardInterrupt):
                click.echo("")
                return
            if not line:
                continue
            if line.startswith("/"):
                if not session.command(line):
                    return
                continue
            try:
                session.turn(line)
            except ChatMemoryError as error:  # the model failed: say so, keep chatting
                click.echo(f"\nerror: {error}", err=True)
