"""Everything `ai_service` is given, checked and resolved once into a `ServiceContext`.

Models are kept as the protocols they implement (`ChatModel`, `AsyncChatModel`,
`StreamingChatModel`, `AsyncStreamingChatModel`): a model is async because it implements the
async protocol, and every method is checked at creation to have a model that serves it, so a
call never guesses. The memories, tools, retrieval, recall, working memory and titles are
resolved here too, with one message per mistake that says how to fix it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

from .._errors import ConfigurationError
from .._messages import ToolExecutionRequest
from .._prompts import Clock
from ..models import (
    AsyncChatModel,
    AsyncModerationModel,
    AsyncStreamingChatModel,
    Capability,
    ChatModel,
    ChatParameters,
    ChatRequest,
    ModerationModel,
    StreamingChatModel,
)
from ..models._values import ToolChoice, check_tool_choice
from ..rag import ContentRetriever, DefaultRetrievalAugmentor, RetrievalAugmentor
from ..recall import SemanticRecall
from ..titles import ConversationTitles
from ..tools import AsyncToolProvider, Tool, ToolLimits, ToolProvider
from ..tools._collect import collect_tools
from ..working import InMemoryRecordStore, RecordStore, WorkingMemory
from ._declaration import Declaration, MethodPlan
from ._invocation import InvocationContext
from ._memories import AnyMemory, ChatMemoryProvider, Memories
from ._results import ToolExecution
from ._tooling import ArgumentsHandler, ErrorHandler, ToolOptions, UnknownToolHandler
from ._turn import InputGuardrail, OutputGuardrail, Retrieval

__all__ = ["DEFAULT_MEMORY_ID", "ChatMemoryAccess", "Models", "ServiceContext", "resolve"]

DEFAULT_MEMORY_ID = "default"


@runtime_checkable
class ChatMemoryAccess(Protocol):
    """What every service object offers beside its declared methods; derive a declaration from
    it to have mypy know them too."""

    def get_chat_memory(self, memory_id: str = DEFAULT_MEMORY_ID) -> Any:
        """The memory of `memory_id` (made by the provider if it was not yet)."""
        ...

    def evict_chat_memory(self, memory_id: str) -> bool:
        """Forget the memory object of `memory_id` (its stored messages stay); True if it was
        cached."""
        ...


@dataclass(frozen=True, slots=True)
class Models:
    """The service's models by what they implement (None where they do not)."""

    chat: ChatModel | None
    achat: AsyncChatModel | None
    stream: StreamingChatModel | None
    astream: AsyncStreamingChatModel | None
    moderate: ModerationModel | None
    amoderate: AsyncModerationModel | None

    @classmethod
    def of(cls, chat_model: object, streaming: object, moderation: object) -> Models:
        return cls(
            chat_model if isinstance(chat_model, ChatModel) else None,
            chat_model if isinstance(chat_model, AsyncChatModel) else None,
            streaming if isinstance(streaming, StreamingChatModel) else None,
            streaming if isinstance(streaming, AsyncStreamingChatModel) else None,
            moderation if isinstance(moderation, ModerationModel) else None,
            moderation if isinstance(moderation, AsyncModerationModel) else None,
        )

    def streams(self, plan: MethodPlan) -> bool:
        """Whether a call of `plan` asks the model for a stream: a streaming method does, and
        so does a method whose service has only a streaming model."""
        if plan.returns.streams:
            return True
        if plan.asynchronous:
            return self.achat is None and self.chat is None
        return self.chat is None

    def answering(self, plan: MethodPlan) -> object:
        """The model that answers a call of `plan` (its capabilities decide the request)."""
        if self.streams(plan):
            return self.astream if plan.asynchronous else self.stream
        return (self.achat or self.chat) if plan.asynchronous else self.chat


@dataclass(frozen=True, slots=True)
class ServiceContext:
    """A service, resolved: what every call of it uses."""

    declaration: Declaration
    models: Models
    memories: Memories
    system_message_provider: Callable[[str], str | None] | None
    parameters: ChatParameters | None
    output_retries: int
    keep_user_message_on_error: bool
    clock: Clock | None
    tools: tuple[Tool, ...]
    tool_providers: tuple[ToolProvider | AsyncToolProvider, ...]
    tool_options: ToolOptions
    augmentor: RetrievalAugmentor | None
    retrieval: Retrieval | None
    working_memory: WorkingMemory[Any] | None
    titles: ConversationTitles | None
    semantic_recall: SemanticRecall | None
    input_guardrails: tuple[InputGuardrail, ...] = ()
    output_guardrails: tuple[OutputGuardrail, ...] = ()
    guardrail_retries: int = 2
    tool_choice: ToolChoice | None = None
    approvals: RecordStore | None = None
    """Where calls stopped for approval are kept (None: no tool needs approval)."""
    requires_approval: Callable[[ToolExecutionRequest], bool] | None = None
    chat_request_transformer: Callable[[ChatRequest, InvocationContext], ChatRequest] | None = None
    system_message_transformer: Callable[[str, InvocationContext], str] | None = None
    instrument: bool = True
    """Whether the service's calls are traced while `chatmemory.instrument()` is on."""

    def needs_approval(self, request: ToolExecutionRequest, tool: Tool | None) -> bool:
        """Whether a tool call waits for approval: the tool says so, or the service does."""
        if tool is not None and getattr(tool, "requires_approval", False) is True:
            return True
        return self.requires_approval is not None and bool(self.requires_approval(request))

    @property
    def unstored_tools(self) -> frozenset[str]:
        memory = self.working_memory
        return frozenset([memory.tool_name] if memory is not None else [])


def resolve(
    declaration: Declaration,
    *,
    chat_model: object | None,
    streaming_chat_model: object | None,
    chat_memory: AnyMemory | None,
    chat_memory_provider: ChatMemoryProvider | None,
    system_message_provider: Callable[[str], str | None] | None,
    moderation_model: object | None,
    parameters: ChatParameters | None,
    output_retries: int,
    keep_user_message_on_error: bool,
    max_cached_memories: int,
    clock: Clock | None,
    tools: Iterable[object],
    tool_providers: Iterable[ToolProvider | AsyncToolProvider],
    max_tool_calling_round_trips: int,
    execute_tools_concurrently: bool,
    on_invalid_arguments: ArgumentsHandler | None,
    on_tool_error: ErrorHandler | None,
    on_unknown_tool: UnknownToolHandler | Literal["raise"] | None,
    before_tool_execution: Callable[[ToolExecutionRequest], None] | None,
    after_tool_execution: Callable[[ToolExecution], None] | None,
    retrieval_augmentor: RetrievalAugmentor | None,
    content_retriever: ContentRetriever | None,
    store_retrieved_content_in_memory: bool,
    answer_when_nothing_retrieved: str | Callable[[str], str] | None,
    working_memory: WorkingMemory[Any] | None,
    titles: ConversationTitles | None,
    semantic_recall: SemanticRecall | None,
    input_guardrails: Iterable[InputGuardrail] = (),
    output_guardrails: Iterable[OutputGuardrail] = (),
    guardrail_retries: int = 2,
    tool_retries: int | None = None,
    tool_timeout: float | None = None,
    tool_choice: ToolChoice | None = None,
    requires_approval: Callable[[ToolExecutionRequest], bool] | None = None,
    approvals: RecordStore | None = None,
    chat_request_transformer: Callable[[ChatRequest, InvocationContext], ChatRequest] | None = None,
    system_message_transformer: Callable[[str, InvocationContext], str] | None = None,
    instrument: bool = True,
) -> ServiceContext:
    """`ai_service`'s arguments checked and resolved (see its docstring for each)."""
    if titles is not None and not isinstance(titles, ConversationTitles):
        raise ConfigurationError(f"`titles` must be ConversationTitles, got {titles!r}")
    check_tool_choice(tool_choice)
    if semantic_recall is not None and not isinstance(semantic_recall, SemanticRecall):
        raise ConfigurationError(
            f"`semantic_recall` must be a SemanticRecall, got {semantic_recall!r}"
        )
    if chat_model is None and streaming_chat_model is None:
        raise ConfigurationError(
            "ai_service() needs a model: pass chat_model=... (e.g. OpenAiChatModel(model=...)) "
            "or streaming_chat_model=..."
        )
    if chat_memory is not None and chat_memory_provider is not None:
        raise ConfigurationError(
            "pass chat_memory (one memory for every call) or chat_memory_provider (one per "
            "memory id), not both"
        )
    guards = _guardrails(input_guardrails, output_guardrails, guardrail_retries)
    if not _count(output_retries, minimum=0):
        raise ConfigurationError(f"`output_retries` must be an int >= 0, got {output_retries!r}")
    if not _count(max_cached_memories, minimum=1):
        raise ConfigurationError(
            f"`max_cached_memories` must be a positive int, got {max_cached_memories!r}"
        )
    if parameters is not None and not isinstance(parameters, ChatParameters):
        raise ConfigurationError(f"`parameters` must be ChatParameters, got {parameters!r}")
    if not _count(max_tool_calling_round_trips, minimum=1):
        raise ConfigurationError(
            f"`max_tool_calling_round_trips` must be a positive int, got "
            f"{max_tool_calling_round_trips!r}"
        )
    if on_unknown_tool is not None and on_unknown_tool != "raise" and not callable(on_unknown_tool):
        raise ConfigurationError(
            f"`on_unknown_tool` is a function of (request, tool names) or 'raise', got "
            f"{on_unknown_tool!r}"
        )
    augmentor = _augmentor(retrieval_augmentor, content_retriever)
    retrieval = None
    if augmentor is not None:
        retrieval = Retrieval(
            store_in_memory=bool(store_retrieved_content_in_memory),
            when_nothing=_when_nothing(answer_when_nothing_retrieved),
        )
    elif answer_when_nothing_retrieved is not None:
        raise ConfigurationError(
            "`answer_when_nothing_retrieved` needs retrieval: pass content_retriever=... or "
            "retrieval_augmentor=..."
        )
    tools_ = tuple(_with_working_memory(collect_tools(tools), working_memory))
    memories = Memories(
        memory=chat_memory, provider=chat_memory_provider, limit=max_cached_memories
    )
    context = ServiceContext(
        declaration=declaration,
        models=Models.of(chat_model, streaming_chat_model or chat_model, moderation_model),
        memories=memories,
        system_message_provider=system_message_provider,
        parameters=parameters,
        output_retries=output_retries,
        keep_user_message_on_error=bool(keep_user_message_on_error),
        clock=clock,
        tools=tools_,
        tool_providers=_providers(tool_providers),
        tool_options=ToolOptions(
            max_round_trips=max_tool_calling_round_trips,
            concurrent=bool(execute_tools_concurrently),
            on_invalid_arguments=on_invalid_arguments,
            on_tool_error=on_tool_error,
            on_unknown_tool=on_unknown_tool,
            before=before_tool_execution,
            after=after_tool_execution,
            retries=ToolLimits(tool_retries, tool_timeout).retries,
            timeout=tool_timeout,
        ),
        augmentor=augmentor,
        retrieval=retrieval,
        working_memory=working_memory,
        titles=titles,
        semantic_recall=semantic_recall,
        approvals=_approvals(tools_, requires_approval, approvals),
        requires_approval=requires_approval,
        chat_request_transformer=_hook("chat_request_transformer", chat_request_transformer),
        system_message_transformer=_hook("system_message_transformer", system_message_transformer),
        input_guardrails=guards[0],
        output_guardrails=guards[1],
        guardrail_retries=guardrail_retries,
        tool_choice=tool_choice,
        instrument=_instrumented(instrument),
    )
    _check(context, chat_model, moderation_model)
    return context


def _instrumented(instrument: object) -> bool:
    if not isinstance(instrument, bool):
        raise ConfigurationError(
            f"`instrument` is True (traced while chatmemory.instrument() is on, the default) or "
            f"False (never traced), got {instrument!r}"
        )
    return instrument


H = TypeVar("H")


def _hook(name: str, hook: H) -> H:
    if hook is not None and not callable(hook):
        raise ConfigurationError(
            f"`{name}` is a function of (value, InvocationContext), got {hook!r}"
        )
    return hook


def _approvals(
    tools: tuple[Tool, ...],
    requires_approval: Callable[[ToolExecutionRequest], bool] | None,
    approvals: RecordStore | None,
) -> RecordStore | None:
    """Where stopped calls are kept: the store given, else one in this process's memory when a
    tool (or the service) asks for approval."""
    if requires_approval is not None and not callable(requires_approval):
        raise ConfigurationError(
            f"`requires_approval` is a function of a tool call (True: it waits for "
            f"approval), got {requires_approval!r}"
        )
    if approvals is not None:
        if not isinstance(approvals, RecordStore):
            raise ConfigurationError(
                f"`approvals` is a RecordStore (chatmemory.working), got {approvals!r}"
            )
        return approvals
    asked = requires_approval is not None or any(
        getattr(t, "requires_approval", False) is True for t in tools
    )
    return InMemoryRecordStore() if asked else None


def _guardrails(
    given_input: Iterable[InputGuardrail], given_output: Iterable[OutputGuardrail], retries: int
) -> tuple[tuple[InputGuardrail, ...], tuple[OutputGuardrail, ...]]:
    if not _count(retries, minimum=0):
        raise ConfigurationError(f"`guardrail_retries` must be an int >= 0, got {retries!r}")
    found = (tuple(given_input), tuple(given_output))
    for name, guardrails in zip(("input_guardrails", "output_guardrails"), found, strict=True):
        for guardrail in guardrails:
            if not callable(guardrail):
                raise ConfigurationError(
                    f"`{name}` holds functions (of the user message, or of the answer), got "
                    f"{guardrail!r}"
                )
    return found


def _check(context: ServiceContext, chat_model: object, moderation_model: object) -> None:
    """What a service's declaration needs of its settings, checked once for every method."""
    declaration, memories, models = context.declaration, context.memories, context.models
    name = declaration.cls.__name__
    if declaration.uses_memory_id and memories.provider is None:
        where = next(p.where for p in declaration.methods.values() if p.memory_param)
        raise ConfigurationError(
            f"{where} marks a parameter MemoryId, but the service has "
            + (
                "one shared chat_memory, so every user would share one conversation"
                if memories.shared is not None
                else "no memory"
            )
            + f": pass chat_memory_provider=lambda memory_id: ...(id=memory_id, ...) to "
            f"ai_service({name}, ...)"
        )
    if issubclass(declaration.cls, ChatMemoryAccess) and not memories.configured:
        raise ConfigurationError(
            f"{name} derives from ChatMemoryAccess, but the service has no memory: pass "
            f"chat_memory_provider=... (or chat_memory=...) to ai_service({name}, ...)"
        )
    if (context.tools or context.tool_providers) and chat_model is not None:
        capabilities = capabilities_of(chat_model)
        if capabilities and Capability.TOOLS not in capabilities:
            raise ConfigurationError(
                f"the service has tools, but {chat_model!r} does not declare "
                f"Capability.TOOLS: use a model that calls tools"
            )
    for plan in declaration.methods.values():
        _check_models(plan, models)
        if context.working_memory is not None and context.working_memory.scope == "user":
            _check_user_id(plan)
        if plan.moderated:
            _check_moderation(plan, models, moderation_model)
        if not plan.asynchronous:
            for provider in context.tool_providers:
                if not isinstance(provider, ToolProvider):
                    raise ConfigurationError(
                        f"{plan.where} is a sync method, but the tool provider {provider!r} is "
                        f"async only: declare the method `async def`, or give it a provider "
                        f"with provide()"
                    )


def _check_models(plan: MethodPlan, models: Models) -> None:
    if plan.returns.streams:
        needed = "astream" if plan.asynchronous else "stream"
        ok = (models.astream if plan.asynchronous else models.stream) is not None
    elif plan.asynchronous:
        needed = "achat, astream or chat"
        ok = models.achat is not None or models.chat is not None or models.astream is not None
    else:
        needed = "chat or stream"
        ok = models.chat is not None or models.stream is not None
    if not ok:
        raise ConfigurationError(
            f"{plan.where} needs a model with {needed}(): pass one as "
            + ("streaming_chat_model" if plan.returns.streams else "chat_model")
        )


def _check_moderation(plan: MethodPlan, models: Models, moderation_model: object) -> None:
    if moderation_model is None:
        raise ConfigurationError(
            f"{plan.where} is marked @moderate, but the service has no moderation "
            f"model: pass moderation_model=... (e.g. OpenAiModerationModel())"
        )
    if models.moderate is None and models.amoderate is None:
        raise ConfigurationError(
            f"{moderation_model!r} is not a moderation model: it needs "
            f"moderate(messages) or amoderate(messages)"
        )
    if models.moderate is None and not plan.asynchronous:
        raise ConfigurationError(
            f"{plan.where} is a sync @moderate method, but {moderation_model!r} "
            f"only has amoderate: declare the method `async def`, or give a "
            f"moderation model with moderate(messages)"
        )


def _check_user_id(plan: MethodPlan) -> None:
    """A method of a service whose working memory is per user says whose it is."""
    if plan.user_id_param is None:
        raise ConfigurationError(
            f"{plan.where} has no parameter marked UserId, but the working memory is per user "
            f"(scope='user', the default: one record shared by all of a user's conversations): "
            f"add one, e.g. `user: Annotated[str, UserId]`, or keep one record per conversation "
            f"with WorkingMemory(..., scope='memory')"
        )


def _augmentor(
    augmentor: RetrievalAugmentor | None, retriever: ContentRetriever | None
) -> RetrievalAugmentor | None:
    if augmentor is not None and retriever is not None:
        raise ConfigurationError(
            "pass retrieval_augmentor or content_retriever, not both (a content retriever is "
            "the simple case of an augmentor: DefaultRetrievalAugmentor(content_retriever=...))"
        )
    if retriever is not None:
        if not isinstance(retriever, ContentRetriever):
            raise ConfigurationError(f"{retriever!r} is not a content retriever (retrieve)")
        return DefaultRetrievalAugmentor(content_retriever=retriever)
    if augmentor is not None and not isinstance(augmentor, RetrievalAugmentor):
        raise ConfigurationError(f"{augmentor!r} is not a retrieval augmentor (augment)")
    return augmentor


def _when_nothing(answer: str | Callable[[str], str] | None) -> Callable[[str], str] | None:
    if answer is None or callable(answer):
        return answer
    if not isinstance(answer, str):
        raise ConfigurationError(
            f"`answer_when_nothing_retrieved` is a text or a function of the user's text, got "
            f"{answer!r}"
        )
    return lambda _text: answer


def _with_working_memory(tools: list[Tool], memory: WorkingMemory[Any] | None) -> list[Tool]:
    if memory is None:
        return tools
    if not isinstance(memory, WorkingMemory):
        raise ConfigurationError(f"`working_memory` must be a WorkingMemory, got {memory!r}")
    return collect_tools([*tools, memory.tool()])


def _providers(
    providers: Iterable[ToolProvider | AsyncToolProvider],
) -> tuple[ToolProvider | AsyncToolProvider, ...]:
    found = tuple(providers)
    for provider in found:
        if not isinstance(provider, (ToolProvider, AsyncToolProvider)):
            raise ConfigurationError(
                f"{provider!r} is not a tool provider: it needs `dynamic` and provide(context) "
                f"or aprovide(context)"
            )
    return found


def _count(value: object, *, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def capabilities_of(model: object) -> frozenset[Capability]:
    value: object = getattr(model, "capabilities", frozenset())
    return value if isinstance(value, frozenset) else frozenset()
