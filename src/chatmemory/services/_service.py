"""`ai_service`: an object implementing a declared Protocol (or ABC) by calling a chat model with
per-user memory."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import inspect
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar, cast, runtime_checkable

from .._errors import ConfigurationError
from .._messages import (
    ChatMessage,
    Content,
    SystemMessage,
    TextContent,
    ToolExecutionRequest,
    UserMessage,
)
from .._prompts import Clock, PromptTemplate
from ..models import (
    Capability,
    ChatParameters,
    ChatRequest,
    ChatResponse,
    PartialText,
    ResponseFormat,
    ToolSpecification,
)
from ..rag import ContentRetriever, DefaultRetrievalAugmentor, RetrievalAugmentor
from ..recall import SemanticRecall
from ..tools import AsyncToolProvider, Tool, ToolContext, ToolProvider
from ..tools._collect import collect_tools
from ..working import WorkingMemory
from ._declaration import (
    CONTENT_TYPES,
    Declaration,
    MethodPlan,
    Returns,
    memory_id_of,
    read_declaration,
)
from ._memories import AnyMemory, ChatMemoryProvider, Memories, is_async_memory
from ._recalling import RecallStep
from ._results import AsyncTokenStream, Result, ServiceEvent, TokenStream, ToolExecution
from ._titles import ConversationTitles
from ._tooling import ArgumentsHandler, ErrorHandler, Toolbox, ToolOptions, UnknownToolHandler
from ._turn import (
    AsyncPort,
    Outcome,
    Retrieval,
    SyncPort,
    TurnInput,
    TurnTools,
    adrive,
    drive,
    turn,
)
from ._working import WorkingStep

__all__ = ["ChatMemoryAccess", "ai_service"]

S = TypeVar("S")

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


_RESERVED = frozenset({"get_chat_memory", "evict_chat_memory"})


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
    """
    if titles is not None and not isinstance(titles, ConversationTitles):
        raise ConfigurationError(f"`titles` must be ConversationTitles, got {titles!r}")
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
    tool_options = ToolOptions(
        max_round_trips=max_tool_calling_round_trips,
        concurrent=bool(execute_tools_concurrently),
        on_invalid_arguments=on_invalid_arguments,
        on_tool_error=on_tool_error,
        on_unknown_tool=on_unknown_tool,
        before=before_tool_execution,
        after=after_tool_execution,
    )
    declaration = read_declaration(
        cls,
        has_system_provider=system_message_provider is not None,
        reserved=_RESERVED,
        clock=clock,
    )
    runtime = _Runtime(
        declaration,
        chat_model=chat_model,
        streaming_chat_model=streaming_chat_model,
        memories=Memories(
            memory=chat_memory, provider=chat_memory_provider, limit=max_cached_memories
        ),
        system_message_provider=system_message_provider,
        moderation_model=moderation_model,
        parameters=parameters,
        output_retries=output_retries,
        keep_user_message_on_error=keep_user_message_on_error,
        clock=clock,
        tools=_with_working_memory(collect_tools(tools), working_memory),
        tool_providers=_providers(tool_providers),
        tool_options=tool_options,
        augmentor=augmentor,
        retrieval=retrieval,
        working_memory=working_memory,
        titles=titles,
        semantic_recall=semantic_recall,
    )
    return cast(S, runtime.build())


@dataclass(frozen=True, slots=True)
class _Call:
    """One call's arguments, read: whose memory, and the turn's input."""

    memory_id: str
    system: SystemMessage | None
    user: UserMessage
    parameters: ChatParameters | None
    user_id: str | None = None


class _Runtime:
    def __init__(
        self,
        declaration: Declaration,
        *,
        chat_model: object | None,
        streaming_chat_model: object | None,
        memories: Memories,
        system_message_provider: Callable[[str], str | None] | None,
        moderation_model: object | None,
        parameters: ChatParameters | None,
        output_retries: int,
        keep_user_message_on_error: bool,
        clock: Clock | None,
        tools: list[Tool],
        tool_providers: tuple[ToolProvider | AsyncToolProvider, ...],
        tool_options: ToolOptions,
        augmentor: RetrievalAugmentor | None,
        retrieval: Retrieval | None,
        working_memory: WorkingMemory[Any] | None = None,
        titles: ConversationTitles | None = None,
        semantic_recall: SemanticRecall | None = None,
    ) -> None:
        self.declaration = declaration
        self.semantic_recall = semantic_recall
        self.augmentor = augmentor
        self.retrieval = retrieval
        self.working_memory = working_memory
        self.unstored_tools = frozenset(
            [working_memory.tool_name] if working_memory is not None else []
        )
        self.titles = titles
        self.tools = tuple(tools)
        self.tool_providers = tool_providers
        self.tool_options = tool_options
        self.chat_model = chat_model
        self.streaming_chat_model = streaming_chat_model or chat_model
        self.memories = memories
        self.system_message_provider = system_message_provider
        self.moderation_model = moderation_model
        self.parameters = parameters
        self.output_retries = output_retries
        self.keep_user = keep_user_message_on_error
        self.clock = clock
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()
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
        if (self.tools or tool_providers) and chat_model is not None:
            capabilities = _capabilities(chat_model)
            if capabilities and Capability.TOOLS not in capabilities:
                raise ConfigurationError(
                    f"the service has tools, but {chat_model!r} does not declare "
                    f"Capability.TOOLS: use a model that calls tools"
                )
        for plan in declaration.methods.values():
            self._check_models(plan)
            if working_memory is not None and working_memory.scope == "user":
                _check_user_id(plan)
            if plan.moderated and moderation_model is None:
                raise ConfigurationError(
                    f"{plan.where} is marked @moderate, but the service has no moderation "
                    f"model: pass moderation_model=... (e.g. OpenAiModerationModel())"
                )
            if plan.moderated and not _has(moderation_model, "moderate"):
                if not _has(moderation_model, "amoderate"):
                    raise ConfigurationError(
                        f"{moderation_model!r} is not a moderation model: it needs "
                        f"moderate(messages) or amoderate(messages)"
                    )
                if not plan.asynchronous:
                    raise ConfigurationError(
                        f"{plan.where} is a sync @moderate method, but {moderation_model!r} "
                        f"only has amoderate: declare the method `async def`, or give a "
                        f"moderation model with moderate(messages)"
                    )

    # -- building --------------------------------------------------------------------------

    def build(self) -> Any:
        cls = self.declaration.cls
        namespace: dict[str, object] = {
            name: self._method(plan) for name, plan in self.declaration.methods.items()
        }
        runtime = self

        def get_chat_memory(_self: object, memory_id: str = DEFAULT_MEMORY_ID) -> AnyMemory:
            return runtime.get_chat_memory(memory_id)

        def evict_chat_memory(_self: object, memory_id: str) -> bool:
            return runtime.memories.evict(memory_id)

        get_chat_memory.__doc__ = ChatMemoryAccess.get_chat_memory.__doc__
        evict_chat_memory.__doc__ = ChatMemoryAccess.evict_chat_memory.__doc__
        namespace["get_chat_memory"] = get_chat_memory
        namespace["evict_chat_memory"] = evict_chat_memory
        namespace["__repr__"] = lambda _self: f"<{cls.__name__} AI service>"
        namespace["__module__"] = cls.__module__
        namespace["__doc__"] = cls.__doc__
        implementation = type(cls.__name__, (cls,), namespace)
        return object.__new__(implementation)

    def _method(self, plan: MethodPlan) -> Callable[..., Any]:
        function = getattr(self.declaration.cls, plan.name)
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

    def _check_models(self, plan: MethodPlan) -> None:
        chat, stream = self.chat_model, self.streaming_chat_model
        if plan.returns.streams:
            needed = "astream" if plan.asynchronous else "stream"
            ok = _has(stream, needed)
        elif plan.asynchronous:
            needed = "achat, astream or chat"
            ok = _has(chat, "achat") or _has(chat, "chat") or _has(stream, "astream")
        else:
            needed = "chat or stream"
            ok = _has(chat, "chat") or _has(stream, "stream")
        if not ok:
            raise ConfigurationError(
                f"{plan.where} needs a model with {needed}(): pass one as "
                + ("streaming_chat_model" if plan.returns.streams else "chat_model")
            )

    # -- reading a call --------------------------------------------------------------------

    def _read(self, plan: MethodPlan, args: tuple[object, ...], kwargs: dict[str, object]) -> _Call:
        try:
            bound = plan.signature.bind(None, *args, **kwargs)
        except TypeError as error:
            raise ConfigurationError(f"{plan.where}(...): {error}") from None
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        extra = arguments.pop(_var_keyword(plan.signature) or "", {})
        values: dict[str, object] = dict(cast(Mapping[str, object], extra))
        for param in plan.params:
            if param.name != plan.parameters_param:
                values[param.variable] = arguments[param.name]
        if plan.it_param is not None:
            values["it"] = arguments[plan.it_param]
        memory_id = (
            memory_id_of(arguments[plan.memory_param], plan)
            if plan.memory_param is not None
            else DEFAULT_MEMORY_ID
        )
        user_id = arguments[plan.user_id_param] if plan.user_id_param is not None else None
        if user_id is None and plan.user_id_param is not None and self.working_memory is not None:
            raise ConfigurationError(
                f"{plan.where}: the UserId ({plan.user_id_param!r}) is None, but the working "
                f"memory is per user: pass the user's id"
            )
        system = self._system(plan, memory_id, values)
        user = self._user(plan, arguments, values)
        return _Call(
            memory_id,
            system,
            user,
            self._parameters(plan, arguments),
            None if user_id is None else str(user_id),
        )

    def _parameters(self, plan: MethodPlan, arguments: dict[str, object]) -> ChatParameters | None:
        """The service's parameters, overridden field by field by a ChatParameters argument."""
        given = arguments[plan.parameters_param] if plan.parameters_param else None
        if given is None:
            return self.parameters
        if not isinstance(given, ChatParameters):
            raise ConfigurationError(
                f"{plan.where}: {plan.parameters_param!r} must be ChatParameters, got {given!r}"
            )
        return given if self.parameters is None else self.parameters.merged(given)

    def _system(
        self, plan: MethodPlan, memory_id: str, values: dict[str, object]
    ) -> SystemMessage | None:
        template = plan.system
        if template is None and self.system_message_provider is not None:
            text = self.system_message_provider(memory_id)
            if text is None or not text.strip():
                return None
            template = PromptTemplate(text, clock=self.clock)
        text = template.apply(values).text if template is not None else ""
        return SystemMessage(text) if text else None

    def _user(
        self, plan: MethodPlan, arguments: dict[str, object], values: dict[str, object]
    ) -> UserMessage:
        if plan.user is not None:
            text: str | None = plan.user.apply(values).text
        elif plan.user_param is not None:
            value = arguments[plan.user_param]
            if value is None:
                raise ConfigurationError(
                    f"{plan.where}: the user message ({plan.user_param!r}) is None; pass text"
                )
            text = value if isinstance(value, str) else str(value)
        else:
            text = None
        contents: list[Content] = [TextContent(text)] if text is not None else []
        for name in plan.content_params:
            value = arguments[name]
            if value is None:
                continue
            contents.extend(_contents(plan, name, value))
        if not contents:
            raise ConfigurationError(f"{plan.where}: the call has no user message content")
        name_value = arguments[plan.user_name_param] if plan.user_name_param else None
        return UserMessage(contents=contents, name=None if name_value is None else str(name_value))

    # -- running a turn --------------------------------------------------------------------

    def _input(self, plan: MethodPlan, call: _Call, model: object) -> TurnInput:
        schema = (
            plan.output is not None
            and not plan.output.is_text
            and Capability.RESPONSE_FORMAT_JSON_SCHEMA in _capabilities(model)
        )
        parameters = call.parameters

        def build(
            messages: list[ChatMessage],
            response_format: ResponseFormat | None,
            tools: tuple[ToolSpecification, ...],
        ) -> ChatRequest:
            return ChatRequest(
                messages, tools=tools, response_format=response_format, parameters=parameters
            )

        return TurnInput(
            system=call.system,
            user=call.user,
            output=plan.output if plan.returns in (Returns.VALUE, Returns.RESULT) else None,
            schema=schema,
            moderated=plan.moderated,
            output_retries=self.output_retries,
            keep_user_message_on_error=self.keep_user,
            build_request=build,
            tools=self.tool_options,
            retrieval=self.retrieval,
            memory_id=call.memory_id,
            unstored_tools=self.unstored_tools,
        )

    def _tools(self, call: _Call) -> TurnTools:
        toolbox = None
        if self.tools or self.tool_providers:
            context = ToolContext(call.memory_id, call.user_id)
            toolbox = Toolbox(self.tools, self.tool_providers, context)
        return TurnTools(toolbox, self.tool_options)

    def _sync_port(self, plan: MethodPlan, call: _Call) -> SyncPort:
        memory = self.memories.get(call.memory_id)
        if memory is not None and is_async_memory(memory):
            raise ConfigurationError(
                f"{plan.where} is a sync method but the memory of this call is async "
                f"({memory!r}): declare the method `async def`, or give it a sync memory"
            )
        chat = getattr(self.chat_model, "chat", None)
        stream = getattr(self.streaming_chat_model, "stream", None)
        moderate = getattr(self.moderation_model, "moderate", None)
        return SyncPort(
            memory,
            chat,
            stream,
            moderate,
            self._pool,
            self._tools(call),
            self.augmentor,
            self._recall(call),
            self._working(call),
        )

    def _async_port(self, call: _Call) -> AsyncPort:
        memory = self.memories.get(call.memory_id)
        achat = getattr(self.chat_model, "achat", None)
        chat = achat or getattr(self.chat_model, "chat", None)
        astream = getattr(self.streaming_chat_model, "astream", None)
        amoderate = getattr(self.moderation_model, "amoderate", None)
        moderate = amoderate or getattr(self.moderation_model, "moderate", None)
        return AsyncPort(
            memory,
            memory is not None and is_async_memory(memory),
            chat if achat is not None or astream is None else None,
            achat is not None,
            astream,
            moderate,
            amoderate is not None,
            self._tools(call),
            self.augmentor,
            self._recall(call),
            self._working(call),
        )

    def _working(self, call: _Call) -> WorkingStep | None:
        if self.working_memory is None:
            return None
        key = self.working_memory.key_of(call.memory_id, call.user_id)
        return WorkingStep(self.working_memory, key)

    def _recall(self, call: _Call) -> RecallStep | None:
        if self.semantic_recall is None:
            return None
        query = " ".join(c.text for c in call.user.contents if isinstance(c, TextContent))
        return RecallStep(self.semantic_recall, call.memory_id, call.user_id, query)

    def _title_input(self, call: _Call, outcome: Outcome) -> tuple[str, str] | None:
        if self.titles is None or not outcome.responses:
            return None
        user = "\n".join(c.text for c in call.user.contents if isinstance(c, TextContent))
        return user, outcome.responses[-1].ai_message.text or ""

    def _title(self, call: _Call, outcome: Outcome) -> None:
        given = self._title_input(call, outcome)
        if self.titles is not None and given is not None:
            self.titles.after_turn(call.memory_id, *given)

    async def _atitle(self, call: _Call, outcome: Outcome) -> None:
        given = self._title_input(call, outcome)
        if self.titles is not None and given is not None:
            await self.titles.aafter_turn(call.memory_id, *given)

    def _pool(self) -> concurrent.futures.Executor:
        with self._executor_lock:
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(
                    max_workers=32, thread_name_prefix="chatmemory-service"
                )
            return self._executor

    def _call(self, plan: MethodPlan, call: _Call) -> object:
        if plan.asynchronous:  # a plain def returning an async stream
            aholder: list[Result[str]] = []
            if plan.returns is Returns.TOKEN_STREAM:
                return AsyncTokenStream(lambda: self._aevents(plan, call, aholder), aholder)
            return _atexts(self._aevents(plan, call, aholder))
        if plan.returns is Returns.TOKEN_STREAM:
            holder: list[Result[str]] = []
            return TokenStream(lambda: self._events(plan, call, holder), holder)
        if plan.returns is Returns.TEXT_STREAM:
            return _texts(self._events(plan, call, []))
        with self.memories.hold(call.memory_id):
            port = self._sync_port(plan, call)
            model = self.chat_model if port.chat is not None else self.streaming_chat_model
            events = drive(turn(self._input(plan, call, model)), port, forward=False)
            outcome = _finish(events)
        self._title(call, outcome)
        return _shape(plan, outcome)

    def _events(
        self, plan: MethodPlan, call: _Call, holder: list[Result[str]]
    ) -> Iterator[ServiceEvent]:
        with self.memories.hold(call.memory_id):
            port = self._sync_port(plan, call)
            port.chat = None
            given = self._input(plan, call, self.streaming_chat_model)
            outcome = yield from drive(turn(given), port, forward=True)
            holder.append(_text_result(outcome))
        self._title(call, outcome)

    async def _acall(self, plan: MethodPlan, call: _Call) -> object:
        async with self.memories.ahold(call.memory_id):
            port = self._async_port(call)
            model = self.chat_model if port.chat is not None else self.streaming_chat_model
            done: list[Outcome] = []
            given = self._input(plan, call, model)
            async for _ in adrive(turn(given), port, forward=False, done=done):
                pass  # pragma: no cover - nothing is forwarded
        await self._atitle(call, done[0])
        return _shape(plan, done[0])

    async def _aevents(
        self, plan: MethodPlan, call: _Call, holder: list[Result[str]]
    ) -> AsyncIterator[ServiceEvent]:
        async with self.memories.ahold(call.memory_id):
            port = self._async_port(call)
            port.chat = None
            given = self._input(plan, call, self.streaming_chat_model)
            done: list[Outcome] = []
            async for event in adrive(turn(given), port, forward=True, done=done):
                yield event
            holder.append(_text_result(done[0]))
        await self._atitle(call, done[0])


def _finish(events: Iterator[ServiceEvent]) -> Outcome:
    while True:
        try:
            next(events)
        except StopIteration as stop:
            return cast(Outcome, stop.value)


def _texts(events: Iterator[ServiceEvent]) -> Iterator[str]:
    for event in events:
        if isinstance(event, PartialText):
            yield event.text


async def _atexts(events: AsyncIterator[ServiceEvent]) -> AsyncIterator[str]:
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


def _contents(plan: MethodPlan, name: str, value: object) -> list[Content]:
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    for item in items:
        if not isinstance(item, CONTENT_TYPES):
            raise ConfigurationError(
                f"{plan.where}: parameter {name!r} holds contents (images, audio...), got {item!r}"
            )
    return cast(list[Content], items)


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


def _check_user_id(plan: MethodPlan) -> None:
    """A method of a service whose working memory is per user says whose it is."""
    if plan.user_id_param is None:
        raise ConfigurationError(
            f"{plan.where} has no parameter marked UserId, but the working memory is per user "
            f"(scope='user', the default: one record shared by all of a user's conversations): "
            f"add one, e.g. `user: Annotated[str, UserId]`, or keep one record per conversation "
            f"with WorkingMemory(..., scope='memory')"
        )


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


def _capabilities(model: object) -> frozenset[Capability]:
    value: object = getattr(model, "capabilities", frozenset())
    return value if isinstance(value, frozenset) else frozenset()


def _has(model: object, name: str) -> bool:
    return model is not None and callable(getattr(model, name, None))


def _var_keyword(signature: inspect.Signature) -> str | None:
    return next(
        (p.name for p in signature.parameters.values() if p.kind is inspect.Parameter.VAR_KEYWORD),
        None,
    )
