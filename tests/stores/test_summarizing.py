"""`SummarizingChatMemory` on every store, sync and async: what would be evicted is folded into
one running summary after the system message, the history keeps the originals, tool groups are
never split, a restart does not summarize again, and a failing model loses nothing."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from chatmemory import (
    AiMessage,
    AsyncSummarizingChatMemory,
    ChatMessage,
    ConfigurationError,
    ModelError,
    OpenAiTokenCountEstimator,
    PromptTemplate,
    SummarizingChatMemory,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from chatmemory.models import ChatRequest
from chatmemory.testing import ScriptedChatModel

from .backends import AwaitableFacade, Context, drive, store_params

ESTIMATOR = OpenAiTokenCountEstimator("gpt-4o-mini")
every_store = pytest.mark.parametrize("backend", store_params())


@pytest.fixture
def context(tmp_path: Any) -> Context:
    return Context(tmp_path=tmp_path, unique=f"t{uuid.uuid4().hex[:12]}")


def summarizer(mode: str, raw: Any, model: Any, memory_id: str = "m", **options: Any) -> Any:
    options.setdefault("max_tokens", 120)
    options.setdefault("estimator", ESTIMATOR)
    if mode == "sync":
        return AwaitableFacade(
            SummarizingChatMemory(chat_model=model, id=memory_id, store=raw, **options)
        )
    return AsyncSummarizingChatMemory(chat_model=model, id=memory_id, store=raw, **options)


def numbered(count: int, start: int = 0) -> list[ChatMessage]:
    return [
        UserMessage(f"fact {i}: the code is {i * 7}") if i % 2 == 0 else AiMessage(f"noted {i}")
        for i in range(start, start + count)
    ]


def summaries(model: ScriptedChatModel) -> list[str]:
    return [str(getattr(r.messages[0], "text", "")) for r in model.requests]


@every_store
def test_what_would_be_evicted_is_folded_into_one_running_summary(
    backend: Any, context: Context
) -> None:
    async def scenario(store: Any, raw: Any, mode: str) -> None:
        model = ScriptedChatModel(lambda request: f"S{len(model.requests)}: the codes so far.")
        memory = summarizer(mode, raw, model, keep_last=2)
        await memory.add(SystemMessage("Be brief."))
        for message in numbered(24):
            await memory.add(message)
        folds = len(model.requests)
        assert folds >= 2
        window = await memory.messages()
        assert window[0] == SystemMessage("Be brief.")
        assert (
            window[1].text == f"Summary of the earlier conversation:\nS{folds}: the codes so far."
        )
        assert sum(1 for m in window if "Summary of the earlier" in getattr(m, "text", "")) == 1
        assert window[-2:] == numbered(2, start=22)
        assert ESTIMATOR.count_messages(window) <= 120
        first, second = summaries(model)[:2]
        assert "Previous summary:\n(none)" in first
        assert "user: fact 0: the code is 0" in first
        assert "Previous summary:\nS1: the codes so far." in second
        assert "fact 0:" not in second  # folded once, then carried by the summary
        history = [e.message for e in await store.history("m")]
        assert all(m in history for m in numbered(24))  # the originals stay in history

    drive(backend, context, scenario)


@every_store
def test_a_restart_finds_the_summary_and_does_not_summarize_again(
    backend: Any, context: Context
) -> None:
    async def scenario(store: Any, raw: Any, mode: str) -> None:
        model = ScriptedChatModel(lambda request: "Earlier: codes 0 to 21.")
        memory = summarizer(mode, raw, model, keep_last=2)
        for message in numbered(16):
            await memory.add(message)
        assert len(model.requests) >= 1
        again = ScriptedChatModel([])
        restarted = summarizer(mode, raw, again, keep_last=2)
        window = await restarted.messages()
        assert window == await memory.messages()
        assert await restarted.summary() == "Earlier: codes 0 to 21."
        await restarted.add(UserMessage("ok"))  # fits: no new summary
        assert again.requests == []

    drive(backend, context, scenario)


@every_store
def test_tool_groups_are_folded_whole_and_keep_last_is_never_folded(
    backend: Any, context: Context
) -> None:
    async def scenario(store: Any, raw: Any, mode: str) -> None:
        model = ScriptedChatModel(lambda request: "The weather in Oslo was looked up.")
        memory = summarizer(mode, raw, model, keep_last=3, max_tokens=150)
        call = AiMessage(
            tool_execution_requests=[
                ToolExecutionRequest("1", "weather", '{"city": "Oslo"}'),
                ToolExecutionRequest("2", "weather", '{"city": "Bergen"}'),
            ]
        )
        await memory.add(UserMessage("weather in Oslo and Bergen?"))
        await memory.add(call)
        await memory.add(ToolExecutionResultMessage("1", "weather", "snow"))
        await memory.add(ToolExecutionResultMessage("2", "weather", "rain"))
        await memory.add(AiMessage("Snow in Oslo, rain in Bergen."))
        for message in numbered(6, start=20):
            await memory.add(message)
        window = await memory.messages()
        calls = [m for m in window if isinstance(m, AiMessage) and m.tool_execution_requests]
        results = [m for m in window if isinstance(m, ToolExecutionResultMessage)]
        assert (len(calls), len(results)) in ((0, 0), (1, 2))
        assert window[-3:] == numbered(3, start=23)
        if model.requests:
            text = summaries(model)[0]
            assert 'assistant called weather({"city": "Oslo"})' in text
            assert "tool weather returned: snow" in text

    drive(backend, context, scenario)


@every_store
def test_a_failing_model_falls_back_to_eviction_or_raises_and_writes_nothing(
    backend: Any, context: Context
) -> None:
    async def scenario(store: Any, raw: Any, mode: str) -> None:
        down = ModelError("the model is down", retriable=True)
        evicting = summarizer(mode, raw, ScriptedChatModel([down] * 10), memory_id="e")
        for message in numbered(12):
            await evicting.add(message)
        window = await evicting.messages()
        assert window[-1] == numbered(12)[-1]
        assert not any("Summary" in getattr(m, "text", "") for m in window)
        assert len(await store.history("e")) == 12  # nothing lost

        raising = summarizer(
            mode, raw, ScriptedChatModel([down] * 10), memory_id="r", on_summary_error="raise"
        )
        added = 0
        failed: ModelError | None = None
        for message in numbered(12):
            try:
                await raising.add(message)
            except ModelError as error:
                failed = error
                break
            added += 1
        assert failed is not None
        assert str(failed) == "the model is down"
        assert len(await store.history("r")) == added  # the failed add wrote nothing

    drive(backend, context, scenario)


def test_the_prompt_is_a_template_the_user_replaces() -> None:
    model = ScriptedChatModel(lambda request: "short")
    memory = SummarizingChatMemory(
        chat_model=model,
        max_tokens=80,
        estimator=ESTIMATOR,
        keep_last=1,
        prompt=PromptTemplate("Résume en {{max_words}} mots: {{summary}} | {{messages}}"),
        max_summary_tokens=20,
    )
    for message in numbered(8):
        memory.add(message)
    request: ChatRequest = model.requests[0]
    assert request.messages[0].text.startswith("Résume en 20 mots: (none) | user: fact 0")  # type: ignore[union-attr]
    assert memory.summary() == "short"
    assert memory.preview(UserMessage("next"))[-1] == UserMessage("next")
    assert repr(memory).startswith("SummarizingChatMemory(id='default', max_tokens=80")
    memory.clear()
    assert memory.messages() == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_tokens": 0}, "`max_tokens` must be a positive int"),
        ({"keep_last": -1}, "`keep_last` must be an int >= 0"),
        ({"prompt": "text"}, "`prompt` must be a PromptTemplate"),
        ({"on_summary_error": "ignore"}, "`on_summary_error` is 'evict' or 'raise'"),
        ({"max_summary_tokens": 500}, "`max_summary_tokens` must be a positive int below"),
        ({"chat_model": object()}, "`chat_model` must answer chat"),
    ],
)
def test_bad_settings_are_refused(options: dict[str, Any], message: str) -> None:
    settings: dict[str, Any] = {
        "chat_model": ScriptedChatModel([]),
        "max_tokens": 100,
        "estimator": ESTIMATOR,
    }
    settings.update(options)
    with pytest.raises(ConfigurationError, match=message):
        SummarizingChatMemory(**settings)


def test_folded_messages_count_as_evicted_and_a_preview_tells_its_tokens() -> None:
    model = ScriptedChatModel(lambda request: "Earlier: some codes.")
    memory = SummarizingChatMemory(chat_model=model, max_tokens=120, estimator=ESTIMATOR)
    for message in numbered(16):
        memory.add(message)
        if model.requests:
            break
    assert memory.last_evicted > 0  # the fold took them out of the window
    window = memory.preview(UserMessage("and now?"))
    assert memory.last_window_tokens == ESTIMATOR.count_messages(window)
