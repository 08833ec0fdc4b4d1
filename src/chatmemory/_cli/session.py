"""A stored conversation with a chat model, as `chat` and `prompt` hold it: an AI service whose
streaming method answers each turn with the memory of the conversation's id, and the slash
commands that look at that memory."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Protocol, cast

import click

from .._errors import ConfigurationError
from .._memory.window import TokenWindowChatMemory
from .._messages import SystemMessage, UserMessage
from .._tokens.estimator import TokenCountEstimator
from ..models import PartialText, StreamingChatModel
from ..services import ChatMemoryAccess, MemoryId, TokenStream, ai_service
from .render import Row, message_lines, role, summary
from .stores import Store

__all__ = ["HELP", "Session", "one_shot_text"]

HELP = """\
/history        every message of this conversation, the window's marked with ●
/window         what the model sees next, with token counts
/clear          forget this conversation (window and history)
/system TEXT    set the system message
/edit [TEXT]    write the message in $EDITOR (starting from TEXT), then send it
/exit           leave (Ctrl-D too)
At the prompt: Alt-Enter (or Esc then Enter) starts a new line, ↑/↓ recall earlier lines,
Ctrl-C clears the line."""


class Conversation(ChatMemoryAccess, Protocol):
    """The service `chat` and `prompt` talk through: one streamed answer per user message, with
    the memory of `memory_id` (its system message is the memory's own)."""

    def reply(
        self, memory_id: Annotated[str, MemoryId], text: Annotated[str, UserMessage]
    ) -> TokenStream: ...


@dataclass
class Session:
    service: Conversation
    memory_id: str
    store: Store
    estimator: TokenCountEstimator
    max_tokens: int
    echo: Callable[..., None]

    @classmethod
    def start(
        cls,
        model: StreamingChatModel,
        store: Store,
        memory_id: str,
        estimator: TokenCountEstimator,
        max_tokens: int,
        echo: Callable[..., None] = click.echo,
    ) -> Session:
        """A session whose memories are token windows of `max_tokens` over `store`."""
        service = ai_service(
            Conversation,
            streaming_chat_model=model,
            chat_memory_provider=lambda mid: TokenWindowChatMemory(
                max_tokens=max_tokens, estimator=estimator, id=mid, store=store
            ),
        )
        return cls(service, memory_id, store, estimator, max_tokens, echo)

    @property
    def memory(self) -> TokenWindowChatMemory:
        return cast(TokenWindowChatMemory, self.service.get_chat_memory(self.memory_id))

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
            "/edit": self.edit,
        }.get(name)
        if handler is None:
            self.echo(f"unknown command {name}: /help lists them")
        else:
            handler(argument)
        return True

    def history(self, _: str) -> None:
        entries = self.store.history(self.memory_id)
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

    def edit(self, start: str) -> None:
        """Compose the message in the user's editor ($VISUAL, $EDITOR, else a usual one) and
        send it; nothing is sent when the editor is left without saving or the text is empty."""
        try:
            text = click.edit(start + "\n" if start else "", extension=".md")
        except click.ClickException as error:  # no editor could be started
            self.echo(f"/edit: {error.format_message()}")
            return
        if text is None or not text.strip():
            self.echo("nothing written: nothing sent")
            return
        text = text.strip()
        self.echo(f"you (from the editor, {len(text)} characters)> {text}")
        self.turn(text)

    def turn(self, text: str) -> None:
        """Ask the service with the user's text and print the answer as it streams. The
        service stores the exchange only once the answer is complete: a failed or interrupted
        turn leaves the conversation as it was."""
        size = self.estimator.count_message(UserMessage(text))
        if size > self.max_tokens:  # the window would leave it out: the model would get nothing
            raise ConfigurationError(
                f"this message is {size:,} tokens, more than the window holds (--max-tokens "
                f"{self.max_tokens}): raise --max-tokens, or send less"
            )
        stream = self.service.reply(self.memory_id, text)
        events = iter(stream)
        try:
            for event in events:
                if isinstance(event, PartialText):
                    self.echo(event.text, nl=False)
        except KeyboardInterrupt:
            self.echo("\n(interrupted: this exchange is not kept)")
            return
        finally:  # a stream left before its end (Ctrl-C) stores nothing
            getattr(events, "close", lambda: None)()
        if not stream.result.content:
            self.echo("(the model answered with no text)", nl=False)
        self.echo("")


def one_shot_text(*parts: str | None) -> str:
    """The text of a one-shot prompt: what is piped on stdin, then each of `parts` given,
    blank-line separated (`cat notes.md | chatmemory prompt "summarize"`)."""
    piped = "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()
    return "\n\n".join(part.strip() for part in (piped, *parts) if part and part.strip())
