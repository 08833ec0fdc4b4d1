"""The tools a service is given: `@tool` functions, objects with `@tool` methods and `Tool`s,
checked once when the service is made."""

from __future__ import annotations

import inspect
from collections.abc import Iterable

from .._errors import ConfigurationError
from ._contracts import Tool
from ._declare import FunctionTool, declaration_of, tools_of

__all__ = ["collect_tools"]


def collect_tools(items: Iterable[object]) -> list[Tool]:
    """Every tool of `items`, each name once, or a sentence saying what to pass instead."""
    if isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
        raise ConfigurationError(f"`tools` is a list of tools, got {items!r}")
    found: list[Tool] = []
    for item in items:
        found.extend(_tools(item))
    names: set[str] = set()
    for each in found:
        name = each.specification.name
        if name in names:
            raise ConfigurationError(
                f"Tool names must be unique: the tool {name!r} appears several times"
            )
        names.add(name)
    return found


def _tools(item: object) -> list[Tool]:
    if isinstance(item, Tool):
        return [item]
    if inspect.isclass(item):
        raise ConfigurationError(
            f"Tool {item.__name__!r} must be an object, not a class: pass {item.__name__}()"
        )
    if declaration_of(item) is not None and callable(item):
        return [FunctionTool(item, declaration_of(item))]  # type: ignore[arg-type]
    if item is None or isinstance(item, (str, bytes, int, float)):
        raise ConfigurationError(
            f"{item!r} is not a tool: pass @tool functions, objects with @tool methods, or Tools"
        )
    if isinstance(item, (list, tuple, set, frozenset, dict)):
        raise ConfigurationError(
            f"{item!r} is a collection: pass tool objects and functions directly, not wrapped "
            f"in collections"
        )
    if inspect.isfunction(item) or inspect.ismethod(item) or inspect.isbuiltin(item):
        name = getattr(item, "__name__", repr(item))
        raise ConfigurationError(
            f"the function {name!r} is not a tool: decorate it with @tool, or pass "
            f"tool_from({name})"
        )
    methods = tools_of(item)
    if not methods:
        raise ConfigurationError(f"Object {item!r} does not have any methods decorated with @tool")
    return list(methods)
