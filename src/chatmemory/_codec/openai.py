"""OpenAI chat-completions messages (the `messages=[...]` of `chat.completions.create`), both ways.

- `SystemMessage` is `{"role": "system", "content": str}` ("developer" is read as system too);
- `UserMessage` is `{"role": "user", "content": str or [parts], "name"?: str}`;
- `AiMessage` is `{"role": "assistant", "content": str or None, "tool_calls"?: [...]}`: tool
  calls without text have `content` "" (OpenAI also takes null or no `content`, but llama.cpp's
  server refuses null and its tool-calling chat template fails without the key), read back as
  no text;
- `ToolExecutionResultMessage` is `{"role": "tool", "tool_call_id": str, "content": ...}`.

A user message with a single text is sent as a plain string, otherwise as parts: `text`,
`image_url` (a URL, or the base64 data as a `data:` URL; LOW/HIGH/AUTO become "low"/"high"/"auto"),
`input_audio` (base64 wav or mp3) and `file` (a base64 PDF). What both sides can hold survives a
round trip unchanged: `from_openai(to_openai(messages)) == messages`.

What OpenAI cannot hold is handled explicitly:

- dropped on write: `attributes`, AI `thinking` (chat completions has no standard field for it;
  `reasoning_content`, which some compatible servers send, is read back into `thinking`),
  `is_error` of a tool result, an image's `revised_prompt` (and its base64 data when it also has
  a URL, which is sent instead); ULTRA_HIGH detail is sent as "high", the closest OpenAI level;
- refused with `SerializationError`, never dropped silently: `CustomMessage`, video, audio or
  PDF given only by URL, audio other than wav/mp3, base64 images without a mime type, tool calls
  and results without an id (a result without a `tool_name` is fine: OpenAI's tool messages
  carry no name);
- sent another way: a tool result holding media (an image a tool returned) keeps its text in the
  tool message, with a note, and its media follow the turn's tool messages in a user message
  naming the call (OpenAI's tool messages hold text only); read back, that is a text result and
  a user message;
- recovered on read: OpenAI's tool messages do not name their tool, so `tool_name` comes from the
  assistant tool call with the same id earlier in the list (an error when there is none).

PDFs are sent with the file name "document.pdf": OpenAI rejects inline file data without one, and
chatmemory's PDF content has no name to send.

Reading is lenient where it costs nothing: unknown keys are ignored; system content given as text
parts is joined into one text (and an assistant's refusal parts count as text); an image without
`detail` gets AUTO, which is what OpenAI assumes; `image_url` may be a bare URL string; a PDF's
`file_data` may be bare base64.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeAlias

from .._errors import ConfigurationError, SerializationError
from .._messages import (
    AiMessage,
    AudioContent,
    ChatMessage,
    Content,
    CustomMessage,
    DetailLevel,
    ImageContent,
    PdfFileContent,
    SystemMessage,
    TextContent,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
    VideoContent,
)
from .invalid import Invalid, describe, optional_str, quote, required_str, writer_for

__all__ = ["from_openai", "to_openai"]

OpenAiMessage: TypeAlias = dict[str, Any]
_Part: TypeAlias = dict[str, Any]

PDF_FILENAME = "document.pdf"
"""The file name sent with every PDF (OpenAI requires one with inline file data)."""


# --- writing ------------------------------------------------------------------------------------


def to_openai(messages: Iterable[ChatMessage]) -> list[OpenAiMessage]:
    """`messages` as OpenAI chat-completions message dicts, ready to send.

    Raises `SerializationError` for a message OpenAI cannot hold (see the module documentation),
    naming its index.
    """
    result: list[OpenAiMessage] = []
    media: list[OpenAiMessage] = []  # tool results' media, sent after the run of tool messages
    for index, message in enumerate(messages):
        try:
            if isinstance(message, ToolExecutionResultMessage):
                written, shown = _write_tool_result(message)
                result.append(written)
                media.extend([shown] if shown is not None else [])
                continue
            result.extend(media)
            media = []
            result.append(writer_for(_WRITERS, message, "chat message")(message))
        except Invalid as invalid:
            context = f"cannot convert the message at index {index} to OpenAI"
            raise invalid.error(context, message) from None
    result.extend(media)
    return result


def _write_system(message: SystemMessage) -> OpenAiMessage:
    return {"role": "system", "content": message.text}


def _write_user(message: UserMessage) -> OpenAiMessage:
    contents = message.contents
    obj: OpenAiMessage = {"role": "user", "content": _single_text(contents)}
    if obj["content"] is None:
        parts: list[_Part] = []
        for index, content in enumerate(contents):
            try:
                parts.append(_write_part(content))
            except Invalid as invalid:
                invalid.inside("contents", index)
                raise
        obj["content"] = parts
    if message.name is not None:
        obj["name"] = message.name
    return obj


def _write_ai(message: AiMessage) -> OpenAiMessage:
    text = message.text
    if text is None and message.tool_execution_requests:
        text = ""
    obj: OpenAiMessage = {"role": "assistant", "content": text}
    if message.tool_execution_requests:
        calls: list[_Part] = []
        for index, request in enumerate(message.tool_execution_requests):
            if request.id is None:
                raise Invalid(
                    "has no id, and OpenAI matches tool results to calls by id; give every "
                    "ToolExecutionRequest an id",
                    request,
                    "tool_execution_requests",
                    index,
                )
            function = {"name": request.name, "arguments": request.arguments}
            calls.append({"id": request.id, "type": "function", "function": function})
        obj["tool_calls"] = calls
    return obj


def _write_tool_result(
    message: ToolExecutionResultMessage,
) -> tuple[OpenAiMessage, OpenAiMessage | None]:
    """The tool message, and the user message that shows the result's media (images, audio,
    PDFs): OpenAI's tool messages hold text only, so what else a result holds follows the tool
    messages of the turn in a user message that names the call, and the tool message says so."""
    if message.id is None:
        raise Invalid(
            "is missing: OpenAI tool messages answer a tool call by its id; give the result the "
            "id of the ToolExecutionRequest it answers",
            None,
            "id",
        )
    content: str | list[_Part] | None = _single_text(message.contents)
    if content is not None:
        return {"role": "tool", "tool_call_id": message.id, "content": content}, None
    texts: list[_Part] = []
    parts: list[_Part] = []
    for index, item in enumerate(message.contents):
        try:
            part = _write_part(item)
        except Invalid as invalid:
            invalid.inside("contents", index)
            raise
        (texts if isinstance(item, TextContent) else parts).append(part)
    if not parts:
        return {"role": "tool", "tool_call_id": message.id, "content": texts}, None
    note = f"(what else the tool returned follows in a user message naming the call {message.id})"
    texts.append({"type": "text", "text": note})
    intro = {"type": "text", "text": f"What the tool call {message.id} returned:"}
    shown = {"role": "user", "content": [intro, *parts]}
    return {"role": "tool", "tool_call_id": message.id, "content": texts}, shown


def _write_custom(message: CustomMessage) -> OpenAiMessage:
    raise Invalid(
        "a CustomMessage has no OpenAI form; filter it out, or turn it into a system or user "
        "message, before calling `to_openai`"
    )


_WRITERS: dict[type, Callable[[Any], OpenAiMessage]] = {
    SystemMessage: _write_system,
    UserMessage: _write_user,
    AiMessage: _write_ai,
    CustomMessage: _write_custom,
}


def _single_text(contents: tuple[Content, ...]) -> str | None:
    if len(contents) == 1 and isinstance(contents[0], TextContent):
        return contents[0].text
    return None


_DETAILS = {
    DetailLevel.LOW: "low",
    DetailLevel.HIGH: "high",
    DetailLevel.ULTRA_HIGH: "high",
    DetailLevel.AUTO: "auto",
}
_AUDIO_FORMATS = {
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/vnd.wave": "wav",
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
    "audio/mpeg3": "mp3",
    "audio/x-mpeg-3": "mp3",
}


def _write_part(content: Content) -> _Part:
    if isinstance(content, TextContent):
        return {"type": "text", "text": content.text}
    if isinstance(content, ImageContent):
        url = content.url
        if url is None:
            if content.mime_type is None:
                raise Invalid(
                    "has base64 data but no mime type, which OpenAI needs; set `mime_type` "
                    "(e.g. 'image/png')",
                    content,
                )
            url = f"data:{content.mime_type};base64,{content.base64_data}"
        return {
            "type": "image_url",
            "image_url": {"url": url, "detail": _DETAILS[content.detail_level]},
        }
    if isinstance(content, AudioContent):
        fmt = _AUDIO_FORMATS.get((content.mime_type or "").lower())
        if content.base64_data is None or fmt is None:
            raise Invalid(
                "cannot be sent: OpenAI takes audio as base64 data in wav or mp3 format; give it "
                "`base64_data` and `mime_type` 'audio/wav' or 'audio/mpeg'",
                content,
            )
        return {"type": "input_audio", "input_audio": {"data": content.base64_data, "format": fmt}}
    if isinstance(content, PdfFileContent):
        if content.base64_data is None:
            raise Invalid(
                "has no base64 data, and OpenAI chat completions take PDFs only inline; download "
                "it and give it `base64_data`",
                content,
            )
        mime = content.mime_type or "application/pdf"
        data_url = f"data:{mime};base64,{content.base64_data}"
        return {"type": "file", "file": {"filename": PDF_FILENAME, "file_data": data_url}}
    assert isinstance(content, VideoContent), content
    raise Invalid(
        "is a video, which OpenAI chat completions cannot take; leave it out or describe it in "
        "text",
        content,
    )


# --- reading ------------------------------------------------------------------------------------


def from_openai(messages: Iterable[Mapping[str, Any]]) -> list[ChatMessage]:
    """The chat messages that the OpenAI chat-completions message dicts `messages` describe.

    A tool message takes its `tool_name` from the assistant tool call it answers, which must come
    earlier in `messages`. Raises `SerializationError` naming the index of the first message that
    cannot be read.
    """
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Iterable):
        hint = "; wrap a single message in a list" if isinstance(messages, Mapping) else ""
        raise SerializationError(
            f"`from_openai` takes a list of OpenAI message dicts, got {describe(messages)}{hint}",
            fragment=quote(messages),
        )
    tool_names: dict[str, str] = {}
    result: list[ChatMessage] = []
    for index, item in enumerate(messages):
        try:
            result.append(_read_message(item, tool_names))
        except Invalid as invalid:
            raise invalid.error(f"cannot read the OpenAI message at index {index}") from None
    return result


def _read_message(item: object, tool_names: dict[str, str]) -> ChatMessage:
    if not isinstance(item, Mapping):
        raise Invalid(f"an OpenAI message must be an object, got {describe(item)}", item)
    role = item.get("role")
    reader = _READERS.get(role) if isinstance(role, str) else None
    if reader is None:
        expected = "expected system, developer, user, assistant or tool"
        if role is None:
            raise Invalid(f"is missing: every OpenAI message has a role ({expected})", item, "role")
        raise Invalid(f"is {describe(role)}, {expected}", item, "role")
    try:
        return reader(item, tool_names)
    except ConfigurationError as error:  # the message's own invariants, e.g. a blank system text
        raise Invalid(str(error), item) from None


def _read_system(item: Mapping[str, Any], tool_names: dict[str, str]) -> SystemMessage:
    return SystemMessage(_joined_text(item, refusals=False))


def _read_user(item: Mapping[str, Any], tool_names: dict[str, str]) -> UserMessage:
    content = item.get("content")
    name = optional_str(item, "name")
    if isinstance(content, str):
        return UserMessage(content, name=name)
    if not isinstance(content, list):
        raise Invalid(
            f"must be a string or an array of parts, got {describe(content)}", item, "content"
        )
    contents: list[Content] = []
    for index, part in enumerate(content):
        try:
            contents.append(_read_part(part))
        except Invalid as invalid:
            invalid.inside("content", index)
            raise
    return UserMessage(contents=contents, name=name)


def _read_assistant(item: Mapping[str, Any], tool_names: dict[str, str]) -> AiMessage:
    text = None if item.get("content") is None else _joined_text(item, refusals=True)
    raw = item.get("tool_calls")
    if text == "" and raw:  # how a message with tool calls and no text is written
        text = None
    requests: list[ToolExecutionRequest] = []
    if raw is not None:
        if not isinstance(raw, list):
            raise Invalid(f"must be an array, got {describe(raw)}", item, "tool_calls")
        for index, call in enumerate(raw):
            try:
                request = _read_tool_call(call)
            except Invalid as invalid:
                invalid.inside("tool_calls", index)
                raise
            requests.append(request)
    for request in requests:  # only once the whole message is known to be valid
        if request.id is not None:
            tool_names[request.id] = request.name
    return AiMessage(
        text,
        thinking=optional_str(item, "reasoning_content"),
        tool_execution_requests=requests,
    )


def _read_tool_call(call: object) -> ToolExecutionRequest:
    if not isinstance(call, Mapping):
        raise Invalid(f"must be an object, got {describe(call)}", call)
    kind = call.get("type")
    if kind is not None and kind != "function":
        raise Invalid(f'is {describe(kind)}; only "function" tool calls can be held', call, "type")
    function = call.get("function")
    if not isinstance(function, Mapping):
        got = "is missing" if function is None else f"must be an object, got {describe(function)}"
        raise Invalid(f"{got}: it names the function and its arguments", call, "function")
    try:
        name = required_str(function, "name", "a tool call names the function to call")
        arguments = optional_str(function, "arguments")
    except Invalid as invalid:
        invalid.inside("function")
        raise
    return ToolExecutionRequest(
        optional_str(call, "id"), name, "{}" if arguments is None else arguments
    )


def _read_tool(item: Mapping[str, Any], tool_names: dict[str, str]) -> ToolExecutionResultMessage:
    call_id = required_str(item, "tool_call_id", "a tool message answers a tool call by its id")
    tool_name = tool_names.get(call_id)
    if tool_name is None:
        raise Invalid(
            f"is {call_id!r}, but no earlier assistant message made a tool call with that id, so "
            f"the tool's name is unknown; keep the assistant message that called the tool",
            item,
            "tool_call_id",
        )
    content = item.get("content")
    if isinstance(content, str):
        return ToolExecutionResultMessage(call_id, tool_name, content)
    texts = _text_parts(item, refusals=False)
    return ToolExecutionResultMessage(call_id, tool_name, contents=[TextContent(t) for t in texts])


_READERS: dict[str, Callable[[Mapping[str, Any], dict[str, str]], ChatMessage]] = {
    "system": _read_system,
    "developer": _read_system,
    "user": _read_user,
    "assistant": _read_assistant,
    "tool": _read_tool,
}


def _joined_text(item: Mapping[str, Any], *, refusals: bool) -> str:
    """`content` as one text: a string, or the concatenated text of an array of text parts."""
    content = item.get("content")
    if isinstance(content, str):
        return content
    return "".join(_text_parts(item, refusals=refusals))


def _text_parts(item: Mapping[str, Any], *, refusals: bool) -> list[str]:
    content = item.get("content")
    if not isinstance(content, list):
        raise Invalid(
            f"must be a string or an array of text parts, got {describe(content)}", item, "content"
        )
    texts: list[str] = []
    for index, part in enumerate(content):
        if not isinstance(part, Mapping):
            raise Invalid(f"must be an object, got {describe(part)}", part, "content", index)
        kind = part.get("type")
        if kind == "text":
            key = "text"
        elif kind == "refusal" and refusals:
            key = "refusal"
        else:
            allowed = "text and refusal parts" if refusals else "text parts"
            got = "has no `type`" if kind is None else f"is a {quote(kind, 40)} part"
            raise Invalid(f"{got}, but this message holds only {allowed}", part, "content", index)
        try:
            texts.append(required_str(part, key, f"a {kind} part holds a text"))
        except Invalid as invalid:
            invalid.inside("content", index)
            raise
    return texts


_DETAIL_LEVELS = {"low": DetailLevel.LOW, "high": DetailLevel.HIGH, "auto": DetailLevel.AUTO}
_AUDIO_MIME_TYPES = {"wav": "audio/wav", "mp3": "audio/mpeg"}
_PART_TYPES = "text, image_url, input_audio or file"


def _read_part(part: object) -> Content:
    if not isinstance(part, Mapping):
        raise Invalid(f"must be an object, got {describe(part)}", part)
    kind = part.get("type")
    reader = _PART_READERS.get(kind) if isinstance(kind, str) else None
    if reader is None:
        got = "is missing" if kind is None else f"is {describe(kind)}"
        raise Invalid(f"{got}: expected {_PART_TYPES}", part, "type")
    return reader(part)


def _inner(part: Mapping[str, Any], key: str, inner: object, why: str) -> Mapping[str, Any]:
    if isinstance(inner, Mapping):
        return inner
    got = "is missing" if inner is None else f"must be an object, got {describe(inner)}"
    raise Invalid(f"{got}: {why}", part, key)


def _split_data_url(url: str) -> tuple[str | None, str] | None:
    """`(mime type, base64 data)` of a `data:<mime>;base64,<data>` URL; None for other URLs."""
    if not url.startswith("data:"):
        return None
    head, comma, data = url.partition(",")
    if not comma or not head.endswith(";base64"):
        return None
    return head[5:-7] or None, data


def _read_text_part(part: Mapping[str, Any]) -> TextContent:
    return TextContent(required_str(part, "text", "a text part holds a text"))


def _read_image_part(part: Mapping[str, Any]) -> ImageContent:
    image = part.get("image_url")
    if isinstance(image, str):  # an older shorthand some clients still send
        image = {"url": image}
    image = _inner(part, "image_url", image, "it holds the image's `url`")
    try:
        url = required_str(image, "url", "an image part holds the image's URL or data URL")
        level = _detail_level(image)
    except Invalid as invalid:
        invalid.inside("image_url")
        raise
    inline = _split_data_url(url)
    if inline is None:
        return ImageContent(url=url, detail_level=level)
    mime, data = inline
    return ImageContent(base64_data=data, mime_type=mime, detail_level=level)


def _detail_level(image: Mapping[str, Any]) -> DetailLevel:
    detail = image.get("detail")
    if detail is None:
        return DetailLevel.AUTO  # what OpenAI assumes
    level = _DETAIL_LEVELS.get(detail) if isinstance(detail, str) else None
    if level is None:
        raise Invalid(f"is {describe(detail)}, expected low, high, auto or null", image, "detail")
    return level


def _read_audio_part(part: Mapping[str, Any]) -> AudioContent:
    audio = _inner(part, "input_audio", part.get("input_audio"), "it holds `data` and `format`")
    try:
        data = required_str(audio, "data", "input audio holds base64 data")
        fmt = required_str(audio, "format", "input audio names its format (wav or mp3)")
    except Invalid as invalid:
        invalid.inside("input_audio")
        raise
    return AudioContent(base64_data=data, mime_type=_AUDIO_MIME_TYPES.get(fmt, f"audio/{fmt}"))


def _read_file_part(part: Mapping[str, Any]) -> PdfFileContent:
    file = _inner(part, "file", part.get("file"), "it holds the PDF as `file_data`")
    file_data = file.get("file_data")
    if not isinstance(file_data, str):
        if file_data is None and file.get("file_id") is not None:
            raise Invalid(
                "refers to an uploaded file, which chatmemory cannot hold; send the PDF inline "
                "as `file_data`",
                file,
                "file",
                "file_id",
            )
        got = "is missing" if file_data is None else f"must be a string, got {describe(file_data)}"
        why = "a file part holds the PDF as a base64 data URL"
        raise Invalid(f"{got}: {why}", file, "file", "file_data")
    inline = _split_data_url(file_data)
    mime, data = inline if inline is not None else (None, file_data)
    return PdfFileContent(base64_data=data, mime_type=mime or "application/pdf")


_PART_READERS: dict[str, Callable[[Mapping[str, Any]], Content]] = {
    "text": _read_text_part,
    "image_url": _read_image_part,
    "input_audio": _read_audio_part,
    "file": _read_file_part,
}
