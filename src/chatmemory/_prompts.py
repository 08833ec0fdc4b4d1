"""Prompt templates: ``{{name}}`` variables, rendered in one pass.

The rules are LangChain4j's `PromptTemplate`:

* a variable is ``{{name}}``, inner spaces allowed (``{{ name }}``); a name may repeat;
* `apply(mapping)` binds by name, `apply(value)` binds the one value to ``{{it}}``;
* built-ins ``current_date``, ``current_time`` and ``current_date_time`` (ISO 8601) come from
  an injectable clock, read once per `apply`;
* a missing or None value is an error naming the variable; extra values are ignored; a template
  without variables renders unchanged.

Two departures, both deliberate: a value the caller passes wins over a built-in of the same
name (LangChain4j silently overrides it), and rendering is one pass, so text that a value
inserts is never scanned again: a user typing ``{{secret}}`` cannot pull in another variable.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from os import PathLike
from pathlib import Path

from ._errors import ConfigurationError, shorten
from ._messages import SystemMessage, UserMessage

__all__ = ["Prompt", "PromptTemplate"]

_VARIABLE = re.compile(r"\{\{\s*(.+?)\s*\}\}")

Clock = Callable[[], datetime]


def _local_now() -> datetime:
    return datetime.now().astimezone()


@dataclass(frozen=True, slots=True)
class Prompt:
    """Rendered text, ready to become a message."""

    text: str

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not self.text.strip():
            raise ConfigurationError(f"a prompt must be non-blank text, got {self.text!r}")

    def to_user_message(self, name: str | None = None) -> UserMessage:
        return UserMessage(self.text, name=name)

    def to_system_message(self) -> SystemMessage:
        return SystemMessage(self.text)


class PromptTemplate:
    """A text with ``{{variables}}``; `apply` renders it into a `Prompt`.

    `clock` returns the current time for the date and time built-ins (default: the local time
    of this machine, with its zone).
    """

    __slots__ = ("_clock", "_names", "template")

    def __init__(self, template: str, *, clock: Clock | None = None) -> None:
        if not isinstance(template, str) or not template.strip():
            raise ConfigurationError(f"a prompt template must be non-blank text, got {template!r}")
        self.template = template
        self._clock = clock or _local_now
        self._names = frozenset(match.group(1) for match in _VARIABLE.finditer(template))

    @classmethod
    def from_file(cls, path: str | PathLike[str], *, clock: Clock | None = None) -> PromptTemplate:
        """The template in a UTF-8 text file."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as error:
            raise ConfigurationError(
                f"cannot read the prompt template {str(path)!r}: {error.strerror or error}"
            ) from error
        return cls(text, clock=clock)

    @classmethod
    def from_resource(
        cls, package: str, name: str, *, clock: Clock | None = None
    ) -> PromptTemplate:
        """The template in a file shipped inside `package` (``importlib.resources``)."""
        try:
            text = resources.files(package).joinpath(name).read_text(encoding="utf-8")
        except (OSError, ModuleNotFoundError) as error:
            raise ConfigurationError(
                f"cannot read the prompt template {name!r} of package {package!r}: {error}"
            ) from error
        return cls(text, clock=clock)

    @property
    def variables(self) -> frozenset[str]:
        """The names the template uses."""
        return self._names

    def apply(self, values: object = None) -> Prompt:
        """Render with `values`: a mapping of names to values, or one value for ``{{it}}``."""
        bound = self._bind(values)
        text = _VARIABLE.sub(lambda match: bound[match.group(1)], self.template)
        if not text.strip():
            raise ConfigurationError(
                f"the template {shorten(self.template)!r} renders to blank text with these "
                f"values; give its variables text"
            )
        return Prompt(text)

    def _bind(self, values: object) -> dict[str, str]:
        given: Mapping[object, object] = (
            values if isinstance(values, Mapping) else ({} if values is None else {"it": values})
        )
        if not self._names:
            return {}
        now = self._clock() if self._names & _BUILT_INS.keys() else None
        bound: dict[str, str] = {}
        for name in self._names:
            if name in given:
                value = given[name]
                if value is None:
                    raise ConfigurationError(
                        f"Value for the variable '{name}' is None: pass a value, or remove "
                        f"{{{{{name}}}}} from the template"
                    )
                bound[name] = str(value)
            elif now is not None and name in _BUILT_INS:
                bound[name] = _BUILT_INS[name](now)
            else:
                raise ConfigurationError(
                    f"Value for the variable '{name}' is missing: pass it to apply()"
                    + (" (one value binds {{it}} only)" if "it" in given else "")
                )
        return bound

    def __repr__(self) -> str:
        return f"PromptTemplate({self.template!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PromptTemplate) and other.template == self.template

    def __hash__(self) -> int:
        return hash(self.template)


_BUILT_INS: dict[str, Callable[[datetime], str]] = {
    "current_date": lambda now: now.date().isoformat(),
    "current_time": lambda now: now.time().replace(tzinfo=None).isoformat(timespec="seconds"),
    "current_date_time": lambda now: now.replace(tzinfo=None).isoformat(timespec="seconds"),
}
