"""What a service declaration is written with: parameter markers and message decorators.

Parameters are marked through `typing.Annotated`::

    def chat(self, user: Annotated[str, MemoryId], text: Annotated[str, UserMessage]) -> str: ...

`MemoryId`, `UserName` and the message class `UserMessage` mark by themselves; `V("name")`
renames a template variable (every parameter is a variable under its own name already).
`system_message(...)` and `user_message(...)` decorate a method or the class; `moderate` and
`tool_choice(...)` a method.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from .._errors import ConfigurationError
from .._prompts import _BUILT_INS, Clock, PromptTemplate
from ..models._values import ToolChoice, check_tool_choice

__all__ = [
    "MemoryId",
    "TemplateSource",
    "UserId",
    "UserName",
    "V",
    "describe_members",
    "moderate",
    "structured_prompt",
    "system_message",
    "tool_choice",
    "user_message",
]

F = TypeVar("F", bound=Callable[..., Any])


class MemoryId:
    """Marks the parameter whose value says whose memory a call uses (``Annotated[str, MemoryId]``).

    Without one, every call uses the memory id ``"default"``.
    """

    def __init__(self) -> None:  # pragma: no cover - a marker, never instantiated
        raise TypeError("MemoryId marks a parameter: write Annotated[str, MemoryId]")


class UserId:
    """Marks the parameter whose value says which user a call is for (Mastra's resource id):
    semantic recall with ``scope="user"`` searches that user's conversations, and only theirs."""

    def __init__(self) -> None:  # pragma: no cover - a marker, never instantiated
        raise TypeError("UserId marks a parameter: write Annotated[str, UserId]")


class UserName:
    """Marks the parameter whose value becomes the user message's `name`."""

    def __init__(self) -> None:  # pragma: no cover - a marker, never instantiated
        raise TypeError("UserName marks a parameter: write Annotated[str, UserName]")


@dataclass(frozen=True, slots=True)
class V:
    """Names the template variable a parameter fills: ``Annotated[str, V("topic")]``."""

    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigurationError(f"V(...) needs a non-blank variable name, got {self.name!r}")


@dataclass(frozen=True, slots=True)
class TemplateSource:
    """A message template as declared: its text, or the package resource it lives in."""

    kind: str
    """"System" or "User", for error messages."""
    text: str | None = None
    resource: tuple[str, str] | None = None

    def load(self, clock: Clock | None) -> PromptTemplate:
        if self.resource is not None:
            package, name = self.resource
            template = PromptTemplate.from_resource(package, name, clock=clock)
            return template
        assert self.text is not None
        if not self.text.strip():
            raise ConfigurationError(
                f"the {self.kind.lower()}_message(...) template is empty: give it text"
            )
        return PromptTemplate(self.text, clock=clock)


SYSTEM: Final = "__chatmemory_system_message__"
USER: Final = "__chatmemory_user_message__"
MODERATE: Final = "__chatmemory_moderate__"
TOOL_CHOICE: Final = "__chatmemory_tool_choice__"
STRUCTURED: Final = "__chatmemory_structured_prompt__"
MEMBERS: Final = "__chatmemory_member_descriptions__"


def _source(
    kind: str,
    text: str | Sequence[str] | None,
    delimiter: str,
    from_resource: str | tuple[str, str] | None,
) -> TemplateSource:
    if from_resource is not None:
        if text is not None:
            raise ConfigurationError(
                f"{kind.lower()}_message(...) takes a text or from_resource=, not both"
            )
        if isinstance(from_resource, str):
            package, _, name = from_resource.partition(":")
            if not name:
                raise ConfigurationError(
                    f"from_resource={from_resource!r} must be 'package:path/to/file.txt' or a "
                    f"(package, name) tuple"
                )
            return TemplateSource(kind, resource=(package, name))
        return TemplateSource(kind, resource=(from_resource[0], from_resource[1]))
    if isinstance(text, str):
        return TemplateSource(kind, text=text)
    if text is None or not all(isinstance(line, str) for line in text):
        raise ConfigurationError(
            f"{kind.lower()}_message(...) takes a text, a list of lines, or from_resource=; "
            f"got {text!r}"
        )
    return TemplateSource(kind, text=delimiter.join(text))


def _mark(name: str, value: object) -> Callable[[F], F]:
    def decorate(target: F) -> F:
        setattr(target, name, value)
        return target

    return decorate


def system_message(
    text: str | Sequence[str] | None = None,
    *,
    delimiter: str = "\n",
    from_resource: str | tuple[str, str] | None = None,
) -> Callable[[F], F]:
    """The system message of a method (or of every method, on the class): a template.

    `text` is the template, or a list of lines joined with `delimiter`; `from_resource`
    (``"package:file.txt"``) loads it from a file shipped in a package. A method's own beats the
    class's; a base class's is not inherited.
    """
    return _mark(SYSTEM, _source("System", text, delimiter, from_resource))


def user_message(
    text: str | Sequence[str] | None = None,
    *,
    delimiter: str = "\n",
    from_resource: str | tuple[str, str] | None = None,
) -> Callable[[F], F]:
    """The user message of a method (or of every method without one, on the class): a template
    whose ``{{variables}}`` are the method's parameters."""
    return _mark(USER, _source("User", text, delimiter, from_resource))


def moderate(method: F) -> F:
    """Check the input of each call of `method` with the service's moderation model, alongside
    the model call; flagged input raises `ModerationError` and nothing of the turn is stored."""
    setattr(method, MODERATE, True)
    return method


def tool_choice(choice: ToolChoice) -> Callable[[F], F]:
    """Whether the model may call tools in calls of this method: ``"auto"``, ``"required"`` (it
    must call one), ``"none"`` (it must not), or a tool's name (it must call that tool). Beats
    the service's ``ai_service(..., tool_choice=...)``.

    ``"required"`` and a tool's name hold for the turn's first model call only: once tools have
    run, the model may answer (else it could only call tools, round trip after round trip).
    """
    check_tool_choice(choice)
    return _mark(TOOL_CHOICE, choice)


C = TypeVar("C", bound=type)


def structured_prompt(
    text: str | Sequence[str], *, delimiter: str = "\n", clock: Clock | None = None
) -> Callable[[C], C]:
    """Make a dataclass or pydantic model a prompt (LangChain4j's ``@StructuredPrompt``): passed
    as a method's user message, an instance renders the template with its fields.

    ```python
    @structured_prompt("Create a recipe of a {{dish}} using only {{ingredients}}")
    @dataclass
    class RecipePrompt:
        dish: str
        ingredients: list[str]
    ```

    The template's variables are checked against the fields when the class is decorated.
    """
    template = _source("User", text, delimiter, None).load(clock)

    def decorate(cls: C) -> C:
        fields = _fields_of(cls)
        unknown = sorted(template.variables - set(fields) - set(_BUILT_INS))
        if unknown:
            raise ConfigurationError(
                f"@structured_prompt on {cls.__name__}: the template uses "
                f"{', '.join(unknown)}, which {cls.__name__} has no field for"
            )
        setattr(cls, STRUCTURED, template)
        return cls

    return decorate


def _fields_of(cls: type) -> list[str]:
    if dataclasses.is_dataclass(cls):
        return [f.name for f in dataclasses.fields(cls)]
    model_fields = getattr(cls, "model_fields", None)
    if isinstance(model_fields, dict):
        return list(model_fields)
    raise ConfigurationError(
        f"@structured_prompt goes on a dataclass or a pydantic model, got {cls!r}"
    )


def structured_text(value: object) -> str | None:
    """The user message text a structured prompt renders, None for any other value."""
    template = getattr(type(value), STRUCTURED, None)
    if not isinstance(template, PromptTemplate):
        return None
    fields = {name: getattr(value, name) for name in _fields_of(type(value))}
    return template.apply(fields).text


E = TypeVar("E", bound=type)


def describe_members(descriptions: dict[str, str]) -> Callable[[E], E]:
    """Describe an enum's members to the model (LangChain4j's ``@Description`` on enum
    constants): the descriptions go into the format instructions (``HAPPY - the user is glad``)
    and the JSON schema of every answer that holds the enum.

    ```python
    @describe_members({"HAPPY": "the user is glad", "SAD": "the user is down"})
    class Mood(enum.Enum):
        HAPPY = "happy"
        SAD = "sad"
    ```
    """

    def decorate(cls: E) -> E:
        if not (isinstance(cls, type) and issubclass(cls, enum.Enum)):
            raise ConfigurationError(f"@describe_members goes on an Enum, got {cls!r}")
        names = [m.name for m in cls]
        unknown = [n for n in descriptions if n not in names]
        wrong = [n for n, d in descriptions.items() if not isinstance(d, str) or not d.strip()]
        if unknown or wrong:
            raise ConfigurationError(
                f"@describe_members on {cls.__name__}: "
                + (f"no member named {', '.join(unknown)}" if unknown else "")
                + ("; " if unknown and wrong else "")
                + (f"describe {', '.join(wrong)} with text" if wrong else "")
            )
        setattr(cls, MEMBERS, dict(descriptions))
        return cls

    return decorate


def member_descriptions(cls: type) -> dict[str, str]:
    """What `describe_members` said of an enum's members (none: empty)."""
    found = getattr(cls, MEMBERS, None)
    return found if isinstance(found, dict) else {}
