"""`ai_service`: an object implementing a declared Protocol (or ABC) by calling a chat model with
per-user memory.

`ai_service` resolves its settings once (`_context.resolve`); a call of a declared method is read
into a `_Call` (whose memory, the messages) and run as one turn (`_turn.turn`) by the driver of
its mode (`_drivers`) against a port (`_ports`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import inspect
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, cast

from .. import telemetry
from .._errors import ConfigurationError
from .._messages import (
    SystemMessage,
    TextContent,
    ToolExecutionRequest,
    UserMessage,
)
from .._prompts import Clock, PromptTemplate
from .._threads import in_thread
from ..models import Capability, ChatParameters, ChatRequest, ChatResponse, PartialText
from ..models._values import ToolChoice
from ..models.listeners import provider_of
from ..rag import ContentRetriever, RetrievalAugmentor
from ..recall import SemanticRecall
from ..titles import ConversationTitles
from ..tools import AsyncToolProvider, ToolContext, ToolProvider
from ..working import RecordStore, WorkingMemory
from ._approval import (
    ApprovalAccess,
    Decisions,
    PendingApproval,
    Resumed,
    Suspension,
    key_of,
)
from ._context import (
    DEFAULT_MEMORY_ID,
    ChatMemoryAccess,
    ServiceContext,
    capabilities_of,
    resolve,
)
from ._declaration import (
    MethodPlan,
    Returns,
    memory_id_of,
    read_declaration,
    user_message_of,
)
from ._drivers import arun, astream, run, stream
from ._invocation import InvocationContext, InvocationParameters
from ._memories import AnyMemory, ChatMemoryProvider, is_async_memory
from ._ports import AsyncPort, SyncPort
from ._recalling import RecallStep
from ._results import (
    AsyncTokenStream,
    Finished,
    Result,
    ServiceEvent,
    TokenStream,
    ToolExecution,
)
from ._tooling import ArgumentsHandler, ErrorHandler, UnknownToolHandler
from ._turn import InputGuardrail, Outcome, OutputGuardrail, TurnInput, turn
from ._working import WorkingStep

__all__ = ["ChatMemoryAccess", "ai_service"]

S = TypeVar("S")

log = logging.getLogger("chatmemory.services")

_RESERVED = frozenset({"get_chat_memory", "evict_chat_memory", "resume", "aresume"})


def ai_service(
    cls: Callable[..., S],
    *,
    chat_model: object | None = None,
    streaming_chat_model: object | None = None,
    chat_memory: AnyMemory | None = None,
    chat_memory_provider: ChatMemoryProvider | None = None,
    system_message_provider: Callable[[str], str | None] | None = None,
    moderation_model: object | None = None,
    parameters: ChatParameters | None = None,
    output_retries: int = 0,
    keep_user_message_on_error: bool = False,
    max_cached_memories: int = 10_000,
    clock: Clock | None = None,
    tools: Iterable[object] = (),
    tool_providers: Iterable[ToolProvider | AsyncToolProvider] = (),
    max_tool_calling_round_trips: int = 100,
    execute_tools_concurrently: bool = False,
    on_invalid_arguments: ArgumentsHandler | None = None,
    on_tool_error: ErrorHandler | None = None,
    on_unknown_tool: UnknownToolHandler | Literal["raise"] | None = None,
    before_tool_execution: Callable[[ToolExecutionRequest], None] | None = None,
    after_tool_execution: Callable[[ToolExecution], None] | None = None,
    retrieval_augmentor: RetrievalAugmentor | None = None,
    content_retriever: ContentRetriever | None = None,
    store_retrieved_content_in_memory: bool = True,
    answer_when_nothing_retrieved: str | Callable[[str], str] | None = None,
    working_memory: WorkingMemory[Any] | None = None,
    titles: ConversationTitles | None = None,
    semantic_recall: SemanticRecall | None = None,
    input_guardrails: Iterable[InputGuardrail] = (),
    output_guardrails: Iterable[OutputGuardrail] = (),
    guardrail_retries: int = 2,
    tool_choice: ToolChoice | None = None,
    tool_retries: int | None = None,
    tool_timeout: float | None = None,
    requires_approval: Callable[[ToolExecutionRequest], bool] | None = None,
    approvals: RecordStore | None = None,
    chat_request_transformer: Callable[[ChatRequest, InvocationContext], ChatRequest] | None = None,
    system_message_transformer: Callable[[str, InvocationContext], str] | None = None,
    instrument: bool = True,
) -> S:
    """An object implementing the methods `cls` declares by calling the model.

    `cls` is a `typing.Protocol` (its methods whose body is ``...``) or an abstract class (its
    abstract methods); its other methods run as written. Each call renders the system and user
    messages from the method's templates and arguments, sends the memory's window with them,
    and returns the answer as the method's return type says. A call is one *turn*: the turn's
    messages reach the memory in one commit when it completes, and turns of one memory id run
    one at a time in this process.

    * `chat_model`: a `ChatModel` and/or `AsyncChatModel` (`OpenAiChatModel` is both, and streams
      too); `streaming_chat_model` serves methods that return streams, if it is another object.
    * `chat_memory_provider(memory_id)`: the memory of a user (called once per id; at most
      `max_cached_memories` are kept, least recently used dropped). `chat_memory`: one memory for
      a service without memory ids.
    * `system_message_provider(memory_id)`: the system message template for methods without
      `@system_message`.
    * `moderation_model`: checks the input of `@moderate` methods.
    * `parameters`: model parameters for every request (temperature, max output tokens...).
    * `output_retries`: how many times to ask again, with the error, when an answer does not
      parse as the declared type (the retries are not stored in memory).
    * `keep_user_message_on_error`: when a call fails, store its user message (by default the
      memory stays exactly as it was).
    * `tools`: `@tool` functions, objects with `@tool` methods, or `Tool`s; `tool_providers`:
      tools decided per call (an MCP server's, for instance). The model's tool calls run and their
      results go back to it until it answers, at most `max_tool_calling_round_trips` times;
      several calls of one answer run at once with `execute_tools_concurrently=True`.
      `tool_retries`: how many times one call may send the model back to a tool (the tool
      raised `ModelRetry("what to fix")`, whose message the model gets, or its arguments did not
      fit) before the call fails with `ModelBehaviourError`; `tool_timeout`: the seconds a tool
      call may take before the model is told it did not finish. A tool's own
      `@tool(retries=..., timeout=...)` wins; both are unlimited by default.
    * Extension hooks (LangChain4j's): `chat_request_transformer(request, context)` returns
      the `ChatRequest` the model gets (each model call of the turn; the memory is untouched);
      `system_message_transformer(text, context)` returns the system message's text (blank:
      none). `context` is an `InvocationContext`: memory id, user id, user message and the
      call's `InvocationParameters` (per-call values: type a method parameter with it; they
      also reach tools and providers as `ToolContext.parameters`, never the model).
    * Tool approval: a call whose model calls a tool marked `@tool(requires_approval=True)` (or
      one `requires_approval(request)` says True of) stops before any tool of that round runs,
      raising `ApprovalRequired` (nothing stored). Its `pending.requests` wait for a decision;
      ``service.resume(pending, {call_id: True | False | "why not"})`` (``await
      service.aresume(...)`` for an async method) runs the round (a denied call's result tells
      the model so) and the call goes on, returning what the method returns. The stopped call
      is kept in `approvals` (a `RecordStore`; by default in this process's memory), so
      another process with the same store can resume it; each is resumed once.
      `tool_choice`: ``"auto"`` (the default), ``"required"``, ``"none"`` or a tool's name, for
      every method without `@tool_choice(...)`; ``"required"`` and a name hold for a turn's
      first model call only.
    * What the model hears when a call goes wrong: `on_invalid_arguments(error, request)`,
      `on_tool_error(error, request)` and `on_unknown_tool(request, tool_names)` return the text
      (or raise to end the call; `on_unknown_tool="raise"` does). By default the error's text
      goes back, so the model can correct itself. `before_tool_execution(request)` and
      `after_tool_execution(execution)` see every call.
    * `retrieval_augmentor` (or just a `content_retriever`): what to retrieve for the user
      message and put into it (`chatmemory.rag`); `Result.sources` says what was found. With
      `store_retrieved_content_in_memory=False` memory keeps the user's own words while every
      model call of the turn sees the augmented message. `answer_when_nothing_retrieved` (a text,
      or a function of the user's text) answers without calling the model when nothing is found.
    * `working_memory` (`chatmemory.working.WorkingMemory`): a record per user (the parameter
      marked ``Annotated[str, UserId]``, shared by all of the user's conversations; the default
      ``scope="user"``) or per memory id (``scope="memory"``) the model sees at the end of the
      first system message of each model call (read before each one, so an update is seen
      within the turn; never stored) and changes through its built-in tool. The tool's calls
      and results are seen by the model within the turn but not stored: the stored turn keeps
      the rest of an AI message that made one (its text, other calls), and the record is what
      remains of them.
    * `titles` (`ConversationTitles`): after a call whose conversation has no title, one is
      made by a model, in the background unless the titles object says otherwise.
    * `semantic_recall` (`chatmemory.recall.SemanticRecall`): past messages like the user's text
      that left the window come back at the end of the system message of the turn's model calls
      (never stored); the turn's messages are indexed once it is stored. With ``scope="user"``
      a parameter marked ``Annotated[str, UserId]`` says whose conversations are searched.
    * `input_guardrails`: functions of the call's `UserMessage`, run in order before anything
      else: None passes it, a text or a `UserMessage` replaces it (stored and sent), raising
      `GuardrailError` refuses the call. `output_guardrails`: functions of the answer as the
      method returns it (its text for a method returning the message itself): None passes it,
      another value replaces it, raising `ModelRetry("what to fix")` asks the model again with
      that message (at most `guardrail_retries` times, then `GuardrailError`), raising
      `GuardrailError` refuses. A refused call stores nothing. In a streaming method the output
      guardrails see the complete answer; an answer sent back is followed by the new one.
    * Tracing (`chatmemory.instrument()`): each call is an ``invoke_agent`` span over its model
      calls, tools, retrieval, recall and commit (a stream's ends with the stream).
      `instrument=False` keeps this service's calls out of traces and metrics even while it is
      on (an internal classifier, a health check).
    """
    declaration = read_declaration(
        cls,
        reserved=_RESERVED,
        clock=clock,
    )
    context = resolve(
        declaration,
        chat_model=chat_model,
        streaming_chat_model=streaming_chat_model,
        chat_memory=chat_memory,
        chat_memory_provider=chat_memory_provider,
        system_message_provider=system_message_provider,
        moderation_model=moderation_model,
        parameters=parameters,
        output_retries=output_retries,
        keep_user_message_on_error=keep_user_message_on_error,
        max_cached_memories=max_cached_memories,
        clock=clock,
        tools=tools,
        tool_providers=tool_providers,
        max_tool_calling_round_trips=max_tool_calling_round_trips,
        execute_tools_concurrently=execute_tools_concurrently,
        on_invalid_arguments=on_invalid_arguments,
        on_tool_error=on_tool_error,
        on_unknown_tool=on_unknown_tool,
        before_tool_execution=before_tool_execution,
        after_tool_execution=after_tool_execution,
        retrieval_augmentor=retrieval_augmentor,
        content_retriever=content_retriever,
        store_retrieved_content_in_memory=store_retrieved_content_in_memory,
        answer_when_nothing_retrieved=answer_when_nothing_retrieved,
        working_memory=working_memory,
        titles=titles,
        semantic_recall=semantic_recall,
        input_guardrails=input_guardrails,
        output_guardrails=output_guardrails,
        guardrail_retries=guardrail_retries,
        tool_choice=tool_choice,
        tool_retries=tool_retries,
        tool_timeout=tool_timeout,
        requires_approval=requires_approval,
        approvals=approvals,
        chat_request_transformer=chat_request_transformer,
        system_message_transformer=system_message_transformer,
        instrument=instrument,
    )
    return cast(S, _Service(context).build())


@dataclass(frozen=True, slots=True)
class _Call:
    """One call's arguments, read: whose memory, and the turn's input."""

    memory_id: str
    system: SystemMessage | None
    user: UserMessage
    parameters: ChatParameters | None
    user_id: str | None = None
    invocation: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """The call's `InvocationParameters`."""

    def context(self) -> InvocationContext:
        return InvocationContext(self.memory_id, self.user_id, self.user, self.invocation)


class _Service:
    """The running service: builds the implementing object, reads calls, runs turns."""

    def __init__(self, context: ServiceContext) -> None:
        self.context = context
        self.memories = context.memories
        self._agents = {
            name: _agent(plan, context) for name, plan in context.declaration.methods.items()
        }
        """Each method as an agent of its calls' spans and metrics (their fixed attributes)."""

    # -- building --------------------------------------------------------------------------

    def build(self) -> Any:
        cls = self.context.declaration.cls
        namespace: dict[str, object] = {
            name: self._method(plan) for name, plan in self.context.declaration.methods.items()
        }
        service = self

        def get_chat_memory(_self: object, memory_id: str = DEFAULT_MEMORY_ID) -> AnyMemory:
            return service.get_chat_memory(memory_id)

        def evict_chat_memory(_self: object, memory_id: str) -> bool:
            return service.memories.evict(memory_id)

        get_chat_memory.__doc__ = ChatMemoryAccess.get_chat_memory.__doc__
        evict_chat_memory.__doc__ = ChatMemoryAccess.evict_chat_memory.__doc__
        namespace["get_chat_memory"] = get_chat_memory
        namespace["evict_chat_memory"] = evict_chat_memory

        def resume(_self: object, pending: PendingApproval | str, decisions: Decisions) -> Any:
            return service.resume(pending, decisions)

        async def aresume(
            _self: object, pending: PendingApproval | str, decisions: Decisions
        ) -> Any:
            return await service.aresume(pending, decisions)

        resume.__doc__ = ApprovalAccess.resume.__doc__
        aresume.__doc__ = ApprovalAccess.aresume.__doc__
        namespace["resume"] = resume
        namespace["aresume"] = aresume
        namespace["__repr__"] = lambda _self: f"<{cls.__name__} AI service>"
        namespace["__module__"] = cls.__module__
        namespace["__doc__"] = cls.__doc__
        implementation = type(cls.__name__, (cls,), namespace)
        return object.__new__(implementation)

    def _method(self, plan: MethodPlan) -> Callable[..., Any]:
        function = getattr(self.context.declaration.cls, plan.name)
        if plan.is_async:

            async def call_async(_self: object, *args: object, **kwargs: object) -> object:
                return await self._acall(plan, self._read(plan, args, kwargs))

            method: Callable[..., Any] = call_async
        else:

            def call_sync(_self: object, *args: object, **kwargs: object) -> object:
                return self._call(plan, self._read(plan, args, kwargs))

            method = call_sync
        method = functools.wraps(function)(method)
        method.__isabstractmethod__ = False  # type: ignore[attr-defined]
        return method

    def get_chat_memory(self, memory_id: str) -> AnyMemory:
        if not self.memories.configured:
            raise ConfigurationError(
                "this service has no memory: pass chat_memory_provider=... (or chat_memory=...) "
                "to ai_service()"
            )
        with self.memories.hold(memory_id):
            memory = self.memories.get(memory_id)
        assert memory is not None
        return memory

    # -- resuming a call stopped for approval ----------------------------------------------

    def resume(self, pending: PendingApproval | str, decisions: Decisions) -> object:
        plan, call, resumed = self._taken(pending, decisions, asynchronous=False)
        return self._call(plan, call, resumed)

    async def aresume(self, pending: PendingApproval | str, decisions: Decisions) -> object:
        plan, call, resumed = await in_thread(self._taken, pending, decisions, asynchronous=True)
        return await self._acall(plan, call, resumed)

    def _taken(
        self, pending: PendingApproval | str, decisions: Decisions, *, asynchronous: bool
    ) -> tuple[MethodPlan, _Call, Resumed]:
        """The stopped call, its decisions checked, taken from the approvals store (so no other
        resume runs it)."""
        pending_id = pending.id if isinstance(pending, PendingApproval) else pending
        store = self.context.approvals
        record = store.load(key_of(pending_id)) if store is not None else None
        if store is None or record is None:
            raise ConfigurationError(
                f"no call {pending_id!r} waits for approval here: it was resumed already, or "
                f"stopped in a service with another approvals store"
            )
        suspension = Suspension.loads(pending_id, record.text)
        plan = self.context.declaration.methods.get(suspension.method)
        if plan is None:
            raise ConfigurationError(
                f"the call {pending_id!r} stopped in a method {suspension.method!r} this "
                f"service does not declare"
            )
        if plan.is_async != asynchronous:
            verb = "await service.aresume(...)" if plan.is_async else "service.resume(...)"
            raise ConfigurationError(f"{plan.where} stopped for approval: resume it with {verb}")
        resumed = suspension.resumed(decisions)
        if not store.delete(suspension.key):
            raise ConfigurationError(f"the call {pending_id!r} was resumed already")
        call = _Call(
            suspension.memory_id,
            suspension.system,
            suspension.stored,
            self.context.parameters,
            suspension.user_id,
        )
        return plan, call, resumed

    # -- reading a call --------------------------------------------------------------------

    def _read(self, plan: MethodPlan, args: tuple[object, ...], kwargs: dict[str, object]) -> _Call:
        try:
            bound = plan.signature.bind(None, *args, **kwargs)
        except TypeError as error:
            raise TypeError(f"{plan.where}(...): {error}") from None
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        extra = arguments.pop(_var_keyword(plan.signature) or "", {})
        values: dict[str, object] = dict(cast(Mapping[str, object], extra))
        for param in plan.params:
            if param.name not in (plan.parameters_param, plan.invocation_param):
                values[param.variable] = arguments[param.name]
        if plan.it_param is not None:
            values["it"] = arguments[plan.it_param]
        memory_id = (
            memory_id_of(arguments[plan.memory_param], plan)
            if plan.memory_param is not None
            else DEFAULT_MEMORY_ID
        )
        user_id = arguments[plan.user_id_param] if plan.user_id_param is not None else None
        if (
            user_id is None
            and plan.user_id_param is not None
            and self.context.working_memory is not None
        ):
            raise ConfigurationError(
                f"{plan.where}: the UserId ({plan.user_id_param!r}) is None, but the working "
                f"memory is per user: pass the user's id"
            )
        if (
            user_id is None
            and self.context.semantic_recall is not None
            and self.context.semantic_recall.scope == "user"
        ):
            raise ConfigurationError(
                f"{plan.where}: semantic recall searches the user's conversations "
                f"(scope='user'), but the call names no user: mark a parameter "
                f"Annotated[str, UserId] and pass the user's id"
            )
        user = self._user(plan, arguments, values, cast(Mapping[str, object], extra))
        invocation = InvocationContext(
            memory_id,
            None if user_id is None else str(user_id),
            user,
            self._invocation(plan, arguments),
        )
        return _Call(
            memory_id,
            self._system(plan, values, invocation),
            user,
            self._parameters(plan, arguments),
            invocation.user_id,
            invocation.parameters,
        )

    def _invocation(self, plan: MethodPlan, arguments: dict[str, object]) -> Mapping[str, Any]:
        given = arguments[plan.invocation_param] if plan.invocation_param else None
        if given is None:
            return InvocationParameters()
        if not isinstance(given, Mapping):
            raise ConfigurationError(
                f"{plan.where}: {plan.invocation_param!r} must be InvocationParameters (a "
                f"dict), got {given!r}"
            )
        return given

    def _parameters(self, plan: MethodPlan, arguments: dict[str, object]) -> ChatParameters | None:
        """The service's parameters, overridden field by field by a ChatParameters argument."""
        given = arguments[plan.parameters_param] if plan.parameters_param else None
        if given is None:
            return self.context.parameters
        if not isinstance(given, ChatParameters):
            raise ConfigurationError(
                f"{plan.where}: {plan.parameters_param!r} must be ChatParameters, got {given!r}"
            )
        return given if self.context.parameters is None else self.context.parameters.merged(given)

    def _system(
        self, plan: MethodPlan, values: dict[str, object], invocation: InvocationContext
    ) -> SystemMessage | None:
        template = plan.system
        provider = self.context.system_message_provider
        if template is None and provider is not None:
            given = provider(invocation.memory_id)
            if given is None or not given.strip():
                return None
            template = PromptTemplate(given, clock=self.context.clock)
        text = template.apply(values).text if template is not None else ""
        transform = self.context.system_message_transformer
        if transform is not None:
            changed = transform(text, invocation)
            if not isinstance(changed, str):
                raise ConfigurationError(
                    f"system_message_transformer returns the system message's text (a str), "
                    f"got {changed!r}"
                )
            text = changed
        return SystemMessage(text) if text.strip() else None

    def _user(
        self,
        plan: MethodPlan,
        arguments: dict[str, object],
        values: dict[str, object],
        extra: Mapping[str, object],
    ) -> UserMessage:
        text = plan.user.apply(values).text if plan.user is not None else None
        return user_message_of(plan, arguments, extra, text)

    # -- running a turn --------------------------------------------------------------------

    def _input(
        self,
        plan: MethodPlan,
        call: _Call,
        memory: AnyMemory | None,
        *,
        forward: bool,
        resumed: Resumed | None = None,
    ) -> TurnInput:
        """The turn of a call: everything it decides by, in one value."""
        context = self.context
        models = context.models
        output = plan.output
        recalling = context.semantic_recall is not None and memory is not None
        return TurnInput(
            system=call.system,
            user=call.user,
            memory_id=call.memory_id,
            output=output if plan.returns in (Returns.VALUE, Returns.RESULT) else None,
            schema=output is not None
            and not output.is_text
            and Capability.RESPONSE_FORMAT_JSON_SCHEMA in capabilities_of(models.answering(plan)),
            parameters=call.parameters,
            streaming=models.streams(plan),
            forward=forward,
            moderated=plan.moderated,
            output_retries=context.output_retries,
            keep_user_message_on_error=context.keep_user_message_on_error,
            memory=memory is not None,
            fits=getattr(memory, "fits", None),
            window_of=memory,
            tools=context.tools,
            providers=context.tool_providers,
            tool_context=ToolContext(call.memory_id, call.user_id, call.user, call.invocation),
            tool_options=context.tool_options,
            unstored_tools=context.unstored_tools,
            retrieval=context.retrieval,
            working=context.working_memory is not None,
            recall=context.semantic_recall.block if recalling and context.semantic_recall else None,
            input_guardrails=context.input_guardrails,
            output_guardrails=context.output_guardrails,
            guardrail_retries=context.guardrail_retries,
            method=plan.name,
            transform_request=context.chat_request_transformer,
            invocation=call.context(),
            user_id=call.user_id,
            needs_approval=context.needs_approval,
            resumed=resumed,
            tool_choice=plan.tool_choice or context.tool_choice,
        )

    def _working(self, call: _Call) -> WorkingStep | None:
        memory = self.context.working_memory
        if memory is None:
            return None
        return WorkingStep(memory, memory.key_of(call.memory_id, call.user_id))

    def _recalling(self, call: _Call, memory: AnyMemory | None) -> RecallStep | None:
        recall = self.context.semantic_recall
        if recall is None or memory is None:
            return None
        query = " ".join(c.text for c in call.user.contents if isinstance(c, TextContent))
        store = memory.store  # type: ignore[union-attr]
        return RecallStep(
            recall, store, is_async_memory(memory), call.memory_id, call.user_id, query
        )

    def _sync_port(self, plan: MethodPlan, call: _Call, memory: AnyMemory | None) -> SyncPort:
        if memory is not None and is_async_memory(memory):
            raise ConfigurationError(
                f"{plan.where} is a sync method but the memory of this call is async "
                f"({memory!r}): declare the method `async def`, or give it a sync memory"
            )
        models = self.context.models
        return SyncPort(
            cast("Any", memory),
            models.chat,
            models.stream,
            models.moderate,
            self.context.augmentor,
            self._recalling(call, memory),
            self._working(call),
            self.context.approvals,
        )

    def _async_port(self, call: _Call, memory: AnyMemory | None) -> AsyncPort:
        models = self.context.models
        return AsyncPort(
            memory,
            models.achat or models.chat,
            models.astream,
            models.amoderate or models.moderate,
            self.context.augmentor,
            self._recalling(call, memory),
            self._working(call),
            self.context.approvals,
        )

    def _call(self, plan: MethodPlan, call: _Call, resumed: Resumed | None = None) -> object:
        if plan.asynchronous or plan.returns in (Returns.TOKEN_STREAM, Returns.TEXT_STREAM):
            return self._stream(plan, call, resumed)
        with self._agent(plan, call) or _UNTRACED:
            with self.memories.hold(call.memory_id):
                memory = self.memories.get(call.memory_id)
                port = self._sync_port(plan, call, memory)
                given = self._input(plan, call, memory, forward=False, resumed=resumed)
                outcome = run(turn(given), port)
            self._title(call, outcome)
        return _shape(plan, outcome)

    def _stream(self, plan: MethodPlan, call: _Call, resumed: Resumed | None) -> object:
        """A streaming call's stream; nothing runs before it is read. Traced, its
        ``invoke_agent`` span is a child of the span current now, starts at the first item and
        ends with the stream (`telemetry.stepped`)."""
        agent = self._agent(plan, call, deferred=True)
        if plan.asynchronous:  # a plain def returning an async stream

            def aevents() -> AsyncGenerator[ServiceEvent | Finished[Result[str]], None]:
                events = self._aevents(plan, call, resumed)
                return events if agent is None else telemetry.astepped(agent, events)

            if plan.returns is Returns.TOKEN_STREAM:
                return AsyncTokenStream(aevents)
            return _atexts(aevents())

        def events() -> Generator[ServiceEvent, None, Result[str]]:
            made = self._events(plan, call, resumed)
            return made if agent is None else telemetry.stepped(agent, made)

        if plan.returns is Returns.TOKEN_STREAM:
            return TokenStream(events)
        return _texts(events())

    def _events(
        self, plan: MethodPlan, call: _Call, resumed: Resumed | None = None
    ) -> Generator[ServiceEvent, None, Result[str]]:
        """A streaming call's events. The turn's lock is let go, and the turn stored, before
        the last text and the final response are handed on (`Outcome.tail`)."""
        with self.memories.hold(call.memory_id):
            memory = self.memories.get(call.memory_id)
            port = self._sync_port(plan, call, memory)
            outcome = yield from stream(
                turn(self._input(plan, call, memory, forward=True, resumed=resumed)), port
            )
        self._title(call, outcome)
        yield from outcome.tail
        return _text_result(outcome)

    async def _acall(self, plan: MethodPlan, call: _Call, resumed: Resumed | None = None) -> object:
        with self._agent(plan, call) or _UNTRACED:
            async with self.memories.ahold(call.memory_id):
                memory = self.memories.get(call.memory_id)
                port = self._async_port(call, memory)
                given = self._input(plan, call, memory, forward=False, resumed=resumed)
                outcome = await arun(turn(given), port)
            await self._atitle(call, outcome)
        return _shape(plan, outcome)

    async def _aevents(
        self, plan: MethodPlan, call: _Call, resumed: Resumed | None = None
    ) -> AsyncGenerator[ServiceEvent | Finished[Result[str]], None]:
        """`_events` for asyncio; the last item is the call's `Result`."""
        async with self.memories.ahold(call.memory_id):
            memory = self.memories.get(call.memory_id)
            port = self._async_port(call, memory)
            given = self._input(plan, call, memory, forward=True, resumed=resumed)
            outcome: Outcome | None = None
            async for item in astream(turn(given), port):
                if isinstance(item, Finished):
                    outcome = item.value
                else:
                    yield item
        assert outcome is not None
        await self._atitle(call, outcome)
        for event in outcome.tail:
            yield event
        yield Finished(_text_result(outcome))

    def _agent(
        self, plan: MethodPlan, call: _Call, *, deferred: bool = False
    ) -> telemetry.AgentCall | None:
        """The ``invoke_agent`` span of a call while tracing is on (`chatmemory.instrument`):
        its model calls, tools, retrieval, recall, commit and title are its children. None
        while it is off (a global read); a muted one for a service made with
        ``instrument=False``."""
        return self._agents[plan.name].call(
            call.memory_id, muted=not self.context.instrument, deferred=deferred
        )

    # -- titles ----------------------------------------------------------------------------

    def _title_input(self, call: _Call, outcome: Outcome) -> tuple[str, str] | None:
        if self.context.titles is None or not outcome.responses:
            return None
        user = "\n".join(c.text for c in call.user.contents if isinstance(c, TextContent))
        return user, outcome.responses[-1].ai_message.text or ""

    def _title(self, call: _Call, outcome: Outcome) -> None:
        given = self._title_input(call, outcome)
        if self.context.titles is not None and given is not None:
            self.context.titles.after_turn(call.memory_id, *given)

    async def _atitle(self, call: _Call, outcome: Outcome) -> None:
        """The turn is stored: a cancel while a title is made in the foreground leaves it to
        finish beside the caller, and the call returns."""
        given = self._title_input(call, outcome)
        if self.context.titles is None or given is None:
            return
        making = asyncio.ensure_future(self.context.titles.aafter_turn(call.memory_id, *given))
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(making)


_UNTRACED: contextlib.nullcontext[None] = contextlib.nullcontext()


def _agent(plan: MethodPlan, context: ServiceContext) -> telemetry.Agent:
    attributes = {"gen_ai.agent.id": plan.where}
    provider = provider_of(context.models.answering(plan))
    if provider is not None:
        attributes["gen_ai.provider.name"] = provider
    return telemetry.Agent(context.declaration.cls.__name__, attributes)


def _texts(events: Generator[ServiceEvent, None, Result[str]]) -> Generator[str, None, None]:
    for event in events:
        if isinstance(event, PartialText):
            yield event.text


async def _atexts(
    events: AsyncIterator[ServiceEvent | Finished[Result[str]]],
) -> AsyncIterator[str]:
    async for event in events:
        if isinstance(event, PartialText):
            yield event.text


def _text_result(outcome: Outcome) -> Result[str]:
    result = outcome.result()
    text = None if outcome.immediate else (result.final_response.ai_message.text or "")
    return dataclasses.replace(result, content=text)


def _shape(plan: MethodPlan, outcome: Outcome) -> object:
    final: ChatResponse = outcome.responses[-1]
    returns = plan.returns
    if returns is Returns.RESULT:
        return outcome.result()
    if outcome.immediate:
        return _immediate(plan, outcome)
    if returns is Returns.NONE:
        return None
    if returns is Returns.AI_MESSAGE:
        return final.ai_message
    if returns is Returns.RESPONSE:
        return final
    return outcome.content


def _immediate(plan: MethodPlan, outcome: Outcome) -> object:
    """What a method returns when a tool's result ended the call (§3.6): None, or the one
    result the return type can hold."""
    if plan.returns is Returns.NONE:
        return None
    values = [e.result_object for e in outcome.executions if e.result_object is not None]
    if not values:
        return None
    target = plan.output.annotation if plan.output is not None else None
    if len(values) == 1 and isinstance(target, type) and isinstance(values[0], target):
        return values[0]
    raise ConfigurationError(
        f"{plan.where} ended with a tool's result (return_behavior 'immediate'), which cannot be "
        f"returned as its declared type: declare it `-> Result[...]` to get the tool executions"
    )


def _var_keyword(signature: inspect.Signature) -> str | None:
    return next(
        (p.name for p in signature.parameters.values() if p.kind is inspect.Parameter.VAR_KEYWORD),
        None,
    )
