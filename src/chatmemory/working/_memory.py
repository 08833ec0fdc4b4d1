"""`WorkingMemory`: a record the model keeps about a user (or a conversation) and sees in its
system message, changed only by patches through a built-in tool.

Markdown records change one section at a time (`update_section`); structured records (a
pydantic model, or a JSON object a JSON Schema describes) by JSON merge-patch (`patch`). Either
way what the model did not mention stays: Mastra's full replace, which lost fields, is not
offered. Each change is a compare-and-set on the store, retried on a fresh read when another
writer got there first, so concurrent updates for one key all land. An update that would lose
or shadow what is stored (the template's placeholder, headings inside a section, a field the
record does not have) or does not validate is refused with a sentence the model reads as the
tool's error result; nothing is stored.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Generic, Literal, TypeAlias, TypeVar, cast, overload

from pydantic_core import PydanticSerializationError

from .._codec.invalid import quote
from .._errors import ConcurrentUpdateError, ConfigurationError
from .._flow import retry_optimistically
from .._threads import in_thread
from ..models import ToolSpecification
from ..tools import (
    ReturnBehavior,
    ToolArgumentsError,
    ToolContext,
    ToolOutput,
    parse_arguments,
)
from ._patch import headings, merge_patch, normalised, replace_section, section_title, sections
from ._records import RecordStore, check_key
from ._schema import Invalid, RecordSchema, record_schema

__all__ = ["DEFAULT_TEMPLATE", "Scope", "WorkingMemory"]

T = TypeVar("T")

Scope: TypeAlias = Literal["user", "memory"]
"""Whose record a service call reads and changes: the user's, shared by all of their
conversations (``"user"``, Mastra's ``resource`` scope), or the conversation's (``"memory"``,
keyed by memory id; Mastra's ``thread``)."""

PATCH = "patch"
"""The name of the JSON tool's one parameter, the patch (a call may also send the patch alone)."""

DEFAULT_TEMPLATE = """# User Information
## Name
## Location
## Occupation
## Interests
## Goals
## Facts
"""

_MARKDOWN_RULES = (
    "This is your working memory: what you know about the user, {kept}. When you learn "
    "something worth keeping, call {tool} with the section to change and its complete new "
    "content; other sections stay as they are. Do not mention this memory to the user."
)
_JSON_RULES = (
    "This is your working memory: what you know about the user, {kept}, as JSON. When you "
    "learn something worth keeping, call {tool} with a JSON merge patch of only the fields to "
    "change (null removes a field); other fields stay as they are. Do not mention this memory "
    "to the user."
)
_KEPT = {
    "user": "kept across all of the user's conversations",
    "memory": "kept for this conversation",
}


class WorkingMemory(Generic[T]):
    """Working memory on a `RecordStore`: records by key, a user's id or a memory id.

    `scope` says which a service uses. ``"user"``, the default as in Mastra, keeps one record
    per user, shared by all of that user's conversations: what the user said about themselves
    in one chat is known in the next, and the service reads the user's id from the parameter
    marked ``Annotated[str, UserId]`` (a service without one is refused when it is made).
    ``"memory"`` keeps one record per conversation, keyed by its memory id.

    ``WorkingMemory(store)`` keeps Markdown from `DEFAULT_TEMPLATE` (or `template=`);
    ``WorkingMemory(store, schema=Profile)`` keeps a pydantic model as JSON, and
    ``WorkingMemory(store, schema={"type": "object", ...})`` a JSON object its JSON Schema
    validates (``pip install 'chatmemory[jsonschema]'``). Give it to
    ``ai_service(..., working_memory=...)``, and the service shows it in the system message and
    offers the model its tool. The application reads and edits it with `get` / `set`, and
    `forget` removes it.
    """

    @overload
    def __init__(
        self: WorkingMemory[dict[str, Any]],
        store: RecordStore,
        *,
        schema: Mapping[str, Any],
        template: None = None,
        scope: Scope = "user",
        tool_name: str = "update_working_memory",
        max_attempts: int = 50,
    ) -> None: ...

    @overload
    def __init__(
        self,
        store: RecordStore,
        *,
        template: str | None = None,
        schema: type[T] | None = None,
        scope: Scope = "user",
        tool_name: str = "update_working_memory",
        max_attempts: int = 50,
    ) -> None: ...

    def __init__(
        self,
        store: RecordStore,
        *,
        template: str | None = None,
        schema: type[T] | Mapping[str, Any] | None = None,
        scope: Scope = "user",
        tool_name: str = "update_working_memory",
        max_attempts: int = 50,
    ) -> None:
        for method in ("load", "save", "delete"):
            if not callable(getattr(store, method, None)):
                raise ConfigurationError(
                    f"{store!r} is not a working-memory record store (load, save, delete)"
                )
        if template is not None and schema is not None:
            raise ConfigurationError(
                "WorkingMemory takes a Markdown template or a schema, not both"
            )
        if template is not None and (not isinstance(template, str) or not template.strip()):
            raise ConfigurationError(f"`template` must be non-empty Markdown, got {template!r}")
        if scope not in _KEPT:
            raise ConfigurationError(f"`scope` is 'user' or 'memory', got {scope!r}")
        self.store = store
        self.scope: Scope = scope
        self.schema = schema
        self.template = (template or DEFAULT_TEMPLATE) if schema is None else None
        self._record: RecordSchema | None = record_schema(schema) if schema is not None else None
        self.tool_name = tool_name
        self.max_attempts = max_attempts

    def __repr__(self) -> str:
        kind = f"schema={self._record.name}" if self._record else "markdown"
        return f"WorkingMemory({self.store!r}, {kind}, scope={self.scope!r})"

    # -- the application's view --------------------------------------------------------------

    def text(self, key: str) -> str:
        """The record as the model sees it: its text, or the template (`{}` for JSON) when
        nothing is stored yet."""
        record = self.store.load(check_key(key))
        if record is not None:
            return record.text
        return self.template if self.template is not None else "{}"

    def get(self, key: str) -> str | T | None:
        """The stored record (Markdown text, the validated model, or the JSON object a JSON
        Schema describes), None when there is none."""
        record = self.store.load(check_key(key))
        if record is None:
            return None
        if self._record is None:
            return record.text
        return cast(T, self._record.load(record.text))

    def set(self, key: str, value: str | T | Mapping[str, Any]) -> None:
        """Replace the whole record (the application may; the model only patches)."""
        text = self._encode(value)
        self._change(key, lambda _current: text)

    def forget(self, key: str) -> bool:
        """Remove the record; whether there was one."""
        return self.store.delete(check_key(key))

    # -- changes -------------------------------------------------------------------------------

    def update_section(self, key: str, section: str, content: str) -> str:
        """Replace one section of a Markdown record (added when missing); the new text.

        Refused, storing nothing: a `section` that is not one heading's title (``"## Goals"``
        names Goals), `content` holding headings (it would shadow the stored sections of those
        names, or duplicate every section when it is the template), and `content` that is the
        template's placeholder for the section however its whitespace or case differ (it would
        wipe what was learned).
        """
        if self.template is None:
            raise ConfigurationError(f"{self!r} keeps JSON: change it with patch(key, {{...}})")
        title = section_title(section) if isinstance(section, str) else ""
        if not title:
            raise self._refused("`section` must name a section, e.g. Goals")
        if "\n" in title:
            raise self._refused(
                f"`section` is one heading, on one line, e.g. Goals; got {section!r}"
            )
        if not isinstance(content, str):
            raise self._refused("`content` must be the section's text")
        found = headings(content)
        if found:
            raise self._refused(
                f"the content of section {title!r} holds headings ({', '.join(found)}); send "
                f"the text of {title!r} alone, without headings, and change any other section "
                f"with its own call of {self.tool_name}"
            )
        placeholder = sections(self.template).get(title.lower())
        if placeholder and normalised(content) == normalised(placeholder):
            raise self._refused(
                f"that is the template's placeholder for {title!r}, not something learned; "
                f"write what you know, or leave the section alone"
            )
        return self._change(key, lambda current: replace_section(current, title, content))

    def _refused(self, reason: str, arguments: str = "") -> ToolArgumentsError:
        return ToolArgumentsError(reason, tool=self.tool_name, arguments=arguments)

    def patch(self, key: str, patch: Mapping[str, Any]) -> T:
        """Apply a JSON merge-patch to a structured record; the validated result.

        Refused, storing nothing: an empty patch, a result that does not fit the schema, and a
        patch naming a field the record does not have (it would be dropped without a word).
        """
        schema = self._record
        if schema is None:
            raise ConfigurationError(
                f"{self!r} keeps Markdown: change it with update_section(key, section, content)"
            )
        arguments = _written(patch)
        if not isinstance(patch, Mapping) or not patch:
            raise self._refused(
                "the patch must be a JSON object naming at least one field to change", arguments
            )

        def apply(current: str) -> str:
            try:
                text = schema.dump(schema.validate(merge_patch(json.loads(current), patch)))
            except Invalid as error:
                raise self._refused(
                    f"the patched working memory does not fit its schema: {error}; nothing was "
                    f"stored",
                    arguments,
                ) from None
            except (RecursionError, PydanticSerializationError):  # pydantic's depth limit
                raise self._refused(
                    "the patched working memory is nested too deeply to store; send a flatter "
                    "patch; nothing was stored",
                    arguments,
                ) from None
            kept = json.loads(text)
            dropped = [
                name for name, value in patch.items() if value is not None and name not in kept
            ]
            if dropped:
                fields = schema.fields()
                example = (
                    f"{{{json.dumps(PATCH)}: {{{json.dumps(fields[0])}: ...}}}}" if fields else ""
                )
                raise self._refused(
                    f"the record has no field {', '.join(map(repr, dropped))}; send a JSON merge "
                    f"patch of its fields ({', '.join(fields)})"
                    + (f", e.g. {example}" if example else "")
                    + "; nothing was stored",
                    arguments,
                )
            return text

        return cast(T, schema.load(self._change(key, apply)))

    def _change(self, key: str, change: Callable[[str], str]) -> str:
        check_key(key)
        done: list[str] = []

        def attempt() -> bool:
            record = self.store.load(key)
            new = change(record.text if record else self.text(key))
            try:
                self.store.save(key, new, expected=record.version if record else 0)
            except ConcurrentUpdateError:
                return False  # another writer won: re-read and re-apply the change
            done.append(new)
            return True

        retry_optimistically(
            attempt,
            store=self.store,
            memory_id=key,
            attempts=self.max_attempts,
            what=f"the working memory of {key!r}",
        )
        return done[0]

    def _encode(self, value: str | T | Mapping[str, Any]) -> str:
        schema = self._record
        if schema is None:
            if not isinstance(value, str):
                raise ConfigurationError(f"{self!r} keeps Markdown text, got {value!r}")
            return value
        try:
            return schema.dump(
                schema.validate(json.loads(value) if isinstance(value, str) else value)
            )
        except (Invalid, ValueError) as error:
            raise ConfigurationError(f"the value does not fit {schema.name}: {error}") from None
        except RecursionError:
            raise ConfigurationError(
                f"the value does not fit {schema.name}: it is JSON nested too deeply to read"
            ) from None

    # -- what the model sees -------------------------------------------------------------------

    def instructions(self, key: str) -> str:
        """The block a service puts at the end of the first system message of each model call
        (never stored): the rules and the record."""
        rules = (_MARKDOWN_RULES if self.template is not None else _JSON_RULES).format(
            tool=self.tool_name, kept=_KEPT[self.scope]
        )
        return f"<working_memory>\n{rules}\n\n{self.text(key)}\n</working_memory>"

    def tool(self) -> WorkingMemoryTool:
        """The built-in tool the model updates the record with."""
        return WorkingMemoryTool(self)

    def key_of(self, memory_id: str, user_id: str | None) -> str:
        """The key of the record a call of `memory_id` by `user_id` uses, as `scope` says."""
        if self.scope == "memory":
            return memory_id
        if user_id is None:
            raise ConfigurationError(
                f"{self!r} is per user (scope='user'): a call needs the user's id (a service "
                f"parameter marked UserId, or ToolContext(memory_id, user_id=...))"
            )
        return user_id


class WorkingMemoryTool:
    """The model's way to change working memory: a section (Markdown) or a merge patch (JSON)
    of the record of the call's user or memory id (as the memory's `scope` says)."""

    return_behavior: ReturnBehavior = "to_model"

    def __init__(self, memory: WorkingMemory[Any]) -> None:
        self.memory = memory
        if memory._record is None:
            parameters: dict[str, Any] = {
                "type": "object",
                "properties": {
                    "section": {
                        "type": "string",
                        "description": "The heading of the section to change, e.g. Goals",
                    },
                    "content": {
                        "type": "string",
                        "description": "The section's complete new content, in Markdown",
                    },
                },
                "required": ["section", "content"],
                "additionalProperties": False,
            }
        else:
            schema = json.dumps(memory._record.json_schema())
            parameters = {
                "type": "object",
                "properties": {
                    PATCH: {
                        "type": "object",
                        "description": f"A JSON merge patch of the record; its schema: {schema}",
                    }
                },
                "required": [PATCH],
            }
        self.specification = ToolSpecification(
            name=memory.tool_name,
            description="Change your working memory about the user.",
            parameters=parameters,
        )

    def execute(self, arguments: str, context: ToolContext) -> ToolOutput:
        given = parse_arguments(arguments, self.memory.tool_name)
        key = self.memory.key_of(context.memory_id, context.user_id)
        if self.memory.template is not None:
            text = self.memory.update_section(
                key, cast(str, given.get("section")), cast(str, given.get("content"))
            )
            return ToolOutput("Working memory updated.", text)
        record = self.memory.patch(key, self._patch_of(given))
        return ToolOutput("Working memory updated.", record)

    def _patch_of(self, given: dict[str, Any]) -> dict[str, Any]:
        """The patch the arguments hold: ``{"patch": {...}}`` as the schema asks, or the patch
        itself, sent without the wrapper (models do). An object whose one key is ``patch`` with
        an object value is the wrapper, even when the record has a field of that name."""
        inner = given.get(PATCH)
        if len(given) == 1 and isinstance(inner, dict):
            return inner
        return given

    async def aexecute(self, arguments: str, context: ToolContext) -> ToolOutput:
        return await in_thread(self.execute, arguments, context)


def _written(patch: object) -> str:
    """The patch as JSON, for the `arguments` of an error; a shortened quote of it when it
    cannot be written whole (nested too deeply)."""
    try:
        return json.dumps(patch, default=str)
    except (ValueError, RecursionError):
        return quote(patch)
