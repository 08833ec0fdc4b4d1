"""Anthropic Messages API messages (the `system=` and `messages=[...]` of `messages.create`),
both ways.

`to_anthropic(messages)` returns ``(system, messages)``: Anthropic takes the system prompt
apart, so every `SystemMessage`, wherever it stands, goes into `system` (several are joined
with a blank line; None when there is none). The rest become alternating turns:

- `UserMessage` is `{"role": "user", "content": str or [blocks]}`: `text`, `image` (base64
  with its media type, or a URL) and `document` (a PDF, base64 or URL) blocks;
- `AiMessage` is `{"role": "assistant", "content": [blocks]}`: its thinking first (a
  `thinking` block with its signature, then `redacted_thinking` blocks), then a `text` block,
  then one `tool_use` block per tool call (`input` is the parsed JSON arguments);
- consecutive `ToolExecutionResultMessage`s become one user turn of `tool_result` blocks
  (`tool_use_id`, `content`, `is_error`), as Anthropic wants the results of parallel calls.

`from_anthropic(system, messages)` reads them back, so `from_anthropic(*to_anthropic(m)) == m`
for what both sides hold. Anthropic's thinking signature and redacted thinking are kept in the
AI message's attributes under LangChain4j's keys, "thinking_signature" (a str) and
"redacted_thinking" (a list of str), so a later turn can send the thinking back and a Java
service sharing the store reads them.

What Anthropic cannot hold is handled explicitly:

- dropped on write: `UserMessage.name`, other `attributes`, image detail levels and revised
  prompts, and an AI message's thinking that has no signature (Anthropic refuses thinking it
  did not sign: thinking read from OpenAI-compatible servers stays in memory, unsent); a base64
  PDF without a mime type is sent as "application/pdf";
- refused with `SerializationError`: `CustomMessage`, audio, video, base64 images without a
  mime type, tool calls and results without an id (Anthropic pairs them by id), tool
  call arguments that are not a JSON object, and tool results holding audio, video or PDFs;
- recovered on read: a `tool_result` names no tool, so `tool_name` comes from the `tool_use`
  with the same id earlier in the list (None when there is none); several text blocks of one
  turn are joined with a newline (as LangChain4j does), several thinking blocks likewise.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeAlias

from .._errors import ConfigurationError, SerializationError
from .._messages import (
    AiMessage,
    ChatMessage,
    Content,
    CustomMessage,
    ImageContent,
    PdfFileContent,
    SystemMessage,
    TextContent,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from .invalid import Invalid, describe, optional_str, quote, required_str, writer_for

__all__ = ["REDACTED_THINKING", "THINKING_SIGNATURE", "from_anthropic", "to_anthropic"]

AnthropicMessage: TypeAlias = dict[str, Any]
_Block: TypeAlias = dict[str, Any]

THINKING_SIGNATURE = "thinking_signature"
"""The AI message attribute holding Anthropic's thinking signature (LangChain4j's key)."""
REDACTED_THINKING = "redacted_thinking"
"""The AI message attribute holding Anthropic's redacted thinking data (LangChain4j's key)."""


# --- writing ------------------------------------------------------------------------------------


def to_anthropic(messages: Iterable[ChatMessage]) -> tuple[str | None, list[AnthropicMessage]]:
    """`(system, messages)` for Anthropic's `messages.create(system=..., messages=...)`.

    Raises `SerializationError` for a message Anthropic cannot hold (see the module
    documentation), naming its index.
    """
    system: list[str] = []
    result: list[AnthropicMessage] = []
    results: list[_Block] = []  # tool results waiting to form one user turn
    for index, message in enumerate(messages):
        try:
            if isinstance(message, SystemMessage):
                system.append(message.text)
            elif isinstance(message, ToolExecutionResultMessage):
                results.append(_write_tool_result(message))
            else:
                if results:
                    result.append({"role": "user", "content": results})
                    results = []
                result.append(writer_for(_WRITERS, message, "chat message")(message))
        except Invalid as invalid:
            context = f"cannot convert the message at index {index} to Anthropic"
            raise invalid.error(context, message) from None
    if results:
        result.append({"role": "user", "content": results})
    return ("\n\n".join(system) if system else None), result


def _write_user(message: UserMessage) -> AnthropicMessage:
    if message.has_single_text():
        return {"role": "user", "content": message.text}
    return {"role": "user", "content": _write_contents(message.contents, documents=True)}


def _write_ai(message: AiMessage) -> AnthropicMessage:
    blocks: list[_Block] = []
    signature = message.attributes.get(THINKING_SIGNATURE)
    if message.thinking is not None and isinstance(signature, str):
        blocks.append({"type": "thinking", "thinking": message.thinking, "signature": signature})
    redacted = message.attributes.get(REDACTED_THINKING)
    if isinstance(redacted, (list, tuple)):
        blocks.extend({"type": "redacted_thinking", "data": str(data)} for data in redacted)
    if message.text:
        blocks.append({"type": "text", "text": message.text})
    for index, request in enumerate(message.tool_execution_requests):
        if request.id is None:
            raise Invalid(
                "has no id, and Anthropic matches tool results to calls by id; give every "
                "ToolExecutionRequest an id",
                request,
                "tool_execution_requests",
                index,
            )
        blocks.append(
            {
                "type": "tool_use",
                "id": request.id,
                "name": request.name,
                "input": _arguments(request, index),
            }
        )
    return {"role": "assistant", "content": blocks}


def _arguments(request: ToolExecutionRequest, index: int) -> Any:
    if not request.arguments.strip():
        return {}
    try:
        value = json.loads(request.arguments)
    except ValueError:
        value = None
    except RecursionError:
        raise Invalid(
            "are JSON nested too deeply to read, but Anthropic takes tool input as a JSON object",
            request.arguments,
            "tool_execution_requests",
            index,
            "arguments",
        ) from None
    if not isinstance(value, dict):
        raise Invalid(
            "are not a JSON object, but Anthropic takes tool input as one",
            request.arguments,
            "tool_execution_requests",
            index,
            "arguments",
        )
    return value


def _write_tool_result(message: ToolExecutionResultMessage) -> _Block:
    if message.id is None:
        raise Invalid(
            "is missing: Anthropic tool results answer a tool_use block by its id; give the "
            "result the id of the ToolExecutionRequest it answers",
            None,
            "id",
        )
    block: _Block = {"type": "tool_result", "tool_use_id": message.id}
    if message.has_single_text():
        block["content"] = message.text
    else:
        block["content"] = _write_contents(message.contents, documents=False)
    if message.is_error is not None:
        block["is_error"] = message.is_error
    return block


def _write_custom(message: CustomMessage) -> AnthropicMessage:
    raise Invalid(
        "a CustomMessage has no Anthropic form; filter it out, or turn it into a system or "
        "user message, before calling `to_anthropic`"
    )


_WRITERS: dict[type, Callable[[Any], AnthropicMessage]] = {
    UserMessage: _write_user,
    AiMessage: _write_ai,
    CustomMessage: _write_custom,
}


def _write_contents(contents: tuple[Content, ...], *, documents: bool) -> list[_Block]:
    blocks: list[_Block] = []
    for index, content in enumerate(contents):
        try:
            blocks.append(_write_content(content, documents=documents))
        except Invalid as invalid:
            invalid.inside("contents", index)
            raise
    return blocks


def _write_content(content: Content, *, documents: bool) -> _Block:
    if isinstance(content, TextContent):
        return {"type": "text", "text": content.text}
    if isinstance(content, ImageContent):
        return {"type": "image", "source": _source(content, "image", "'image/png'")}
    if isinstance(content, PdfFileContent) and documents:
        if content.url is None and content.mime_type is None:
            content = PdfFileContent(base64_data=content.base64_data, mime_type="application/pdf")
        return {"type": "document", "source": _source(content, "PDF", "'application/pdf'")}
    where = "a user message" if documents else "a tool result"
    raise Invalid(
        f"is {type(content).__name__}, which Anthropic does not take in {where}; leave it out "
        f"or describe it in text",
        content,
    )


def _source(content: ImageContent | PdfFileContent, kind: str, example: str) -> _Block:
    if content.url is not None:
        return {"type": "url", "url": content.url}
    if content.mime_type is None:
        raise Invalid(
            f"has base64 data but no mime type, which Anthropic needs; set `mime_type` "
            f"(e.g. {example})",
            content,
        )
    return {"type": "base64", "media_type": content.mime_type, "data": content.base64_data}


# --- reading ------------------------------------------------------------------------------------


def from_anthropic(
    system: str | Iterable[Mapping[str, Any]] | None, messages: Iterable[Mapping[str, Any]]
) -> list[ChatMessage]:
    """The chat messages that Anthropic's `system` and `messages` describe.

    `system` is a string, a list of text blocks (each becomes a `SystemMessage`) or None. A
    user turn of tool results gives one `ToolExecutionResultMessage` per block (then a
    `UserMessage` for any other blocks of that turn). Raises `SerializationError` naming the
    index of the first message that cannot be read.
    """
    result: list[ChatMessage] = []
    try:
        result.extend(_read_system(system))
    except Invalid as invalid:
        raise invalid.error("cannot read the Anthropic system prompt") from None
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Iterable):
        raise SerializationError(
            f"`from_anthropic` takes a list of Anthropic message dicts, got {describe(messages)}",
            fragment=quote(messages),
        )
    tool_names: dict[str, str] = {}
    for index, item in enumerate(messages):
        try:
            result.extend(_read_message(item, tool_names))
        except Invalid as invalid:
            raise invalid.error(f"cannot read the Anthropic message at index {index}") from None
        except ConfigurationError as error:  # a message's own invariants
            raise SerializationError(
                f"cannot read the Anthropic message at index {index}: {error}", fragment=quote(item)
            ) from None
    return result


def _read_system(system: object) -> list[ChatMessage]:
    if system is None:
        return []
    if isinstance(system, str):
        return [SystemMessage(system)] if system.strip() else []
    if isinstance(system, (bytes, Mapping)) or not isinstance(system, Iterable):
        raise Invalid(f"must be a string or a list of text blocks, got {describe(system)}", system)
    return [SystemMessage(text) for text in _texts(list(system)) if text.strip()]


def _texts(blocks: list[Any]) -> list[str]:
    texts: list[str] = []
    for index, block in enumerate(blocks):
        if not isinstance(block, Mapping) or block.get("type") != "text":
            raise Invalid(f"must be a text block, got {quote(block, 60)}", block, index)
        texts.append(required_str(block, "text", "a text block holds a text"))
    return texts


def _read_message(item: object, tool_names: dict[str, str]) -> list[ChatMessage]:
    if not isinstance(item, Mapping):
        raise Invalid(f"an Anthropic message must be an object, got {describe(item)}", item)
    role = item.get("role")
    content = item.get("content")
    if role not in ("user", "assistant"):
        got = "is missing" if role is None else f"is {describe(role)}"
        raise Invalid(f"{got}: expected user or assistant", item, "role")
    if isinstance(content, str):
        return [UserMessage(content) if role == "user" else AiMessage(content)]
    if not isinstance(content, list):
        raise Invalid(
            f"must be a string or an array of blocks, got {describe(content)}", item, "content"
        )
    for index, block in enumerate(content):
        if not isinstance(block, Mapping):
            raise Invalid(f"must be an object, got {describe(block)}", block, "content", index)
    if role == "assistant":
        return [read_assistant(content, tool_names)]
    return _read_user(content, tool_names)


def read_assistant(blocks: list[Mapping[str, Any]], tool_names: dict[str, str]) -> AiMessage:
    """The AI message of an assistant turn's content blocks (also how a response is read)."""
    texts: list[str] = []
    thinking: list[str] = []
    signatures: list[str] = []
    redacted: list[str] = []
    requests: list[ToolExecutionRequest] = []
    for index, block in enumerate(blocks):
        try:
            kind = block.get("type")
            if kind == "text":
                texts.append(required_str(block, "text", "a text block holds a text"))
            elif kind == "thinking":
                thinking.append(required_str(block, "thinking", "a thinking block holds text"))
                signature = optional_str(block, "signature")
                if signature:
                    signatures.append(signature)
            elif kind == "redacted_thinking":
                redacted.append(required_str(block, "data", "redacted thinking holds data"))
            elif kind == "tool_use":
                requests.append(_read_tool_use(block))
            # server tool blocks and others are not chat messages: skipped
        except Invalid as invalid:
            invalid.inside("content", index)
            raise
    for request in requests:
        if request.id is not None:
            tool_names[request.id] = request.name
    attributes: dict[str, Any] = {}
    if signatures:
        attributes[THINKING_SIGNATURE] = "\n".join(signatures)
    if redacted:
        attributes[REDACTED_THINKING] = redacted
    return AiMessage(
        "\n".join(texts) if texts else None,
        thinking="\n".join(thinking) if thinking else None,
        tool_execution_requests=requests,
        attributes=attributes,
    )


def _read_tool_use(block: Mapping[str, Any]) -> ToolExecutionRequest:
    call_id = required_str(block, "id", "a tool_use block has an id")
    name = required_str(block, "name", "a tool_use block names its tool")
    value = block.get("input")
    arguments = (
        "{}" if value is None else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    )
    return ToolExecutionRequest(call_id, name, arguments)


def _read_user(blocks: list[Mapping[str, Any]], tool_names: dict[str, str]) -> list[ChatMessage]:
    result: list[ChatMessage] = []
    contents: list[Content] = []
    for index, block in enumerate(blocks):
        try:
            if block.get("type") == "tool_result":
                result.append(_read_tool_result(block, tool_names))
            else:
                contents.append(_read_content(block))
        except Invalid as invalid:
            invalid.inside("content", index)
            raise
    if contents:
        if len(contents) == 1 and isinstance(contents[0], TextContent):
            result.append(UserMessage(contents[0].text))
        else:
            result.append(UserMessage(contents=contents))
    return result


def _read_tool_result(
    block: Mapping[str, Any], tool_names: dict[str, str]
) -> ToolExecutionResultMessage:
    call_id = required_str(block, "tool_use_id", "a tool_result answers a tool_use by its id")
    is_error = block.get("is_error")
    if is_error is not None and not isinstance(is_error, bool):
        raise Invalid(f"must be a boolean, got {describe(is_error)}", block, "is_error")
    content = block.get("content")
    name = tool_names.get(call_id)
    if isinstance(content, str):
        return ToolExecutionResultMessage(call_id, name, content, is_error=is_error)
    if content is None:
        return ToolExecutionResultMessage(call_id, name, "", is_error=is_error)
    if not isinstance(content, list) or not content:
        raise Invalid(
            f"must be a string or a non-empty array of blocks, got {describe(content)}",
            block,
            "content",
        )
    contents: list[Content] = []
    for index, part in enumerate(content):
        try:
            contents.append(_read_content(part))
        except Invalid as invalid:
            invalid.inside("content", index)
            raise
    return ToolExecutionResultMessage(call_id, name, contents=contents, is_error=is_error)


def _read_content(block: object) -> Content:
    if not isinstance(block, Mapping):
        raise Invalid(f"must be an object, got {describe(block)}", block)
    kind = block.get("type")
    if kind == "text":
        return TextContent(required_str(block, "text", "a text block holds a text"))
    if kind in ("image", "document"):
        source = block.get("source")
        if not isinstance(source, Mapping):
            raise Invalid("is missing: it says where the data is", block, "source")
        try:
            url, data, mime = _read_source(source)
        except Invalid as invalid:
            invalid.inside("source")
            raise
        if kind == "image":
            return ImageContent(url=url, base64_data=data, mime_type=mime)
        return PdfFileContent(url=url, base64_data=data, mime_type=mime)
    got = "is missing" if kind is None else f"is {describe(kind)}"
    raise Invalid(f"{got}: expected text, image or document", block, "type")


def _read_source(source: Mapping[str, Any]) -> tuple[str | None, str | None, str | None]:
    kind = source.get("type")
    if kind == "url":
        return required_str(source, "url", "a url source holds the URL"), None, None
    if kind == "base64":
        data = required_str(source, "data", "a base64 source holds the data")
        return None, data, optional_str(source, "media_type")
    raise Invalid(f"is {describe(kind)}: expected base64 or url", source, "type")
