"""What a handler can yield: descriptions of work for the runtime to interpret.

A handler never performs a round trip itself. It yields a *request* (:class:`Elicit`,
:class:`Sample`, :class:`ListRoots`), a group of them, a memoized :class:`Step`, or a
version gate (:class:`Patched`), and the runtime decides what happens: send a recorded
answer back, run the step once, say which side of a code change a conversation is on,
or pause the conversation and ask the client.

Every effect knows three things the runtime needs: its ledger kind, its fingerprint
(what was asked, so a replay can prove it asks the same), and, for requests, the wire
form it takes inside ``inputRequests``. What a kind's method and capability are is
:mod:`mrtr.core.kinds`' table; a request class names its kind and reads the rest there.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from .jsonrpc import canonical
from .kinds import KINDS, Kind
from .schema import Form, RequestedSchema, requested_schema
from .web_urls import web_url_problem

__all__ = ["Request", "Elicit", "ElicitURL", "Sample", "ListRoots", "Step", "RoundStep", "Patched", "ElicitResult", "NotYielded",
           "MAX_CHANGE_ID"]


class NotYielded(AttributeError):
    """An effect was used as if it were its answer: the handler forgot to ``yield`` it.

    ``location`` is ``"file:line"`` of the handler code that touched the effect and
    ``function`` the qualified name of the function it is in.
    """

    def __init__(self, message: str, *, location: str | None = None, function: str | None = None) -> None:
        super().__init__(message)
        self.location = location
        self.function = function


class NotYieldedUse(TypeError):
    """Like :class:`NotYielded`, for iterating, indexing or measuring an un-yielded effect."""

    def __init__(self, message: str, *, location: str | None = None, function: str | None = None) -> None:
        super().__init__(message)
        self.location = location
        self.function = function


def _forgot_yield(effect: Any, use: str, error: type[NotYielded] | type[NotYieldedUse]) -> Exception:
    # Two frames up: the dunder that caught the use, then the handler code that made it.
    frame = sys._getframe(2)
    code = frame.f_code
    function = getattr(code, "co_qualname", code.co_name)
    location = f"{code.co_filename}:{frame.f_lineno}"
    shown = effect.describe_call()
    return error(
        f"{function} {use} {shown} at {location}: did you forget `yield`? {shown} only describes the "
        f"work; the runtime performs it when the handler yields it, and `yield` gives back the answer: "
        f"`answer = yield {shown}`",
        location=location,
        function=function,
    )


class _Effect:
    """What every effect shares: using it in place of its answer is reported as a missing ``yield``."""

    __slots__ = ()

    def describe_call(self) -> str:
        """How the effect reads in source, for diagnostics: ``Elicit('Your email?', ...)``."""
        return type(self).__name__ + "(...)"

    def __getattr__(self, name: str) -> Any:
        # Only reached for attributes the effect does not have; dunder and private lookups
        # (copy, pickle, introspection) keep the plain error.
        if name.startswith("_"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        raise _forgot_yield(self, f"read `.{name}` of", NotYielded)

    def __iter__(self) -> Any:
        raise _forgot_yield(self, "iterated over", NotYieldedUse)

    def __getitem__(self, item: Any) -> Any:
        raise _forgot_yield(self, f"indexed `[{item!r}]` into", NotYieldedUse)


def _needed(request: type[Request], *features: str) -> dict[str, Any]:
    """The ``requiredCapabilities`` object naming ``request``'s capability and ``features`` of it."""
    return {request._capability: {feature: {} for feature in features}}


def _clip(text: str) -> str:
    shown = repr(text)
    return shown if len(shown) <= 40 else shown[:37] + "...'"


def _digest8(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()[:8]


# A replay fingerprints every question it reaches, each round, and most questions are
# the same text round after round (and conversation after conversation): their digests
# are remembered, so a replayed question costs a dictionary lookup instead of a SHA-256.
# The digest of a text never changes, so nothing is ever stale; the table is bounded (it
# is emptied when full, and long texts are never kept).
_MESSAGE_DIGESTS: dict[str, bytes] = {}
MESSAGE_DIGESTS_MAX = 1024
"""How many question texts the fingerprint cache holds before it starts again empty."""
MESSAGE_DIGEST_LONGEST = 512
"""The longest question text, in characters, whose digest is remembered."""


def _message_digest(message: str) -> bytes:
    """The fingerprint half of a question's text: 8 bytes of SHA-256 over its UTF-8."""
    digest = _MESSAGE_DIGESTS.get(message)
    if digest is None:
        digest = _digest8(message.encode())
        if len(message) <= MESSAGE_DIGEST_LONGEST:
            if len(_MESSAGE_DIGESTS) >= MESSAGE_DIGESTS_MAX:
                _MESSAGE_DIGESTS.clear()
            _MESSAGE_DIGESTS[message] = digest
    return digest


class Request(_Effect):
    """Base class of the requests a handler can put to the client.

    Subclasses define ``kind``, :meth:`params`, :meth:`fingerprint` and the capability
    check; ``method`` comes from the kind's row in :data:`mrtr.core.kinds.KINDS`. ``key``
    is the wire key chosen by the handler, or ``None`` for the default (the kind's prefix
    and the ordinal: ``elicit-<N>``, ``sample-<N>``, ``roots-<N>``).
    """

    __slots__ = ("key",)

    kind: ClassVar[Kind]
    method: ClassVar[str]
    # The ``clientCapabilities`` member a client declares to be asked this kind (the gate
    # reads it at every yield). Private, so a handler that forgot `yield` and reads
    # `.capability` of what it thinks is the answer is still told so.
    _capability: ClassVar[str]

    key: str | None

    def __init_subclass__(cls, **options: Any) -> None:
        super().__init_subclass__(**options)
        if "kind" in cls.__dict__:
            row = KINDS[cls.kind]
            assert row.method is not None and row.capability is not None, (
                f"{cls.__name__}: {cls.kind!r} is not a kind a client can be asked")
            cls.method = row.method
            cls._capability = row.capability

    def params(self) -> dict[str, Any]:
        """The ``params`` member of this request as it goes on the wire."""
        raise NotImplementedError

    def to_wire(self) -> dict[str, Any]:
        """The ``{method, params}`` object that goes into ``inputRequests``."""
        return {"method": self.method, "params": self.params()}

    def fingerprint(self) -> bytes:
        """16 bytes identifying what is asked: two 8-byte SHA-256 prefixes (see ``parts``)."""
        raise NotImplementedError

    def missing_capability(self, capabilities: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """The ``requiredCapabilities`` object if the client cannot answer, else ``None``."""
        return self.missing_for(capabilities)

    @classmethod
    def missing_for(cls, capabilities: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """Like :meth:`missing_capability`, for the plainest request of this kind."""
        raise NotImplementedError

    # The names of the two halves of the fingerprint, for mismatch diagnostics.
    parts: ClassVar[tuple[str, str]] = ("request", "parameters")

    def describe(self) -> str:
        """A short human description for diagnostics."""
        return self.method


def _checked_key(key: object) -> str:
    # A key names the request on the wire (inputRequests, inputResponses) and in the ledger a
    # token carries: a non-empty string, as a keyed group's keys must be too.
    if not isinstance(key, str) or not key:
        raise TypeError(f"a request's key must be a non-empty string, got {key!r}")
    return key


class Elicit(Request):
    """Ask the user to fill a form (a form-mode ``elicitation/create`` request).

    ``schema`` is a :class:`mrtr.Form`, a flat ``msgspec.Struct`` subclass or a flat
    pydantic ``BaseModel`` subclass. The handler receives an :class:`ElicitResult`; when a
    Struct or model was given and the user accepted, ``result.value`` is an instance of it.
    """

    __slots__ = ("message", "schema", "_compiled")

    kind = Kind.ELICIT
    parts = ("message", "requestedSchema")

    def __init__(self, message: str, schema: Form | type | RequestedSchema, *, key: str | None = None) -> None:
        if not isinstance(message, str):
            raise TypeError(f"Elicit message must be a str, got {type(message).__name__}")
        self.message = message
        self.schema = schema
        self.key = key if key is None else _checked_key(key)
        # A Form compiled already is the common case, met on every yield of every replay.
        compiled = schema._compiled if type(schema) is Form else None
        self._compiled = compiled if compiled is not None else requested_schema(schema)

    @property
    def requested(self) -> RequestedSchema:
        """The compiled schema this elicitation asks with."""
        return self._compiled

    def params(self) -> dict[str, Any]:
        return {"mode": "form", "message": self.message, "requestedSchema": self._compiled.schema}

    def fingerprint(self) -> bytes:
        digest = _MESSAGE_DIGESTS.get(self.message)  # _message_digest's lookup, without its call
        if digest is None:
            digest = _message_digest(self.message)
        return digest + self._compiled.digest[:8]

    @classmethod
    def missing_for(cls, capabilities: Mapping[str, Any] | None) -> dict[str, Any] | None:
        elicitation = capabilities.get(cls._capability) if capabilities else None
        # {} means form (backward compatibility); a client naming only "url" cannot render forms.
        if isinstance(elicitation, dict) and ("form" in elicitation or "url" not in elicitation):
            return None
        return _needed(cls, "form")

    def describe(self) -> str:
        return f"elicitation/create {self.message!r}"

    def describe_call(self) -> str:
        return f"Elicit({_clip(self.message)}, ...)"

    def __repr__(self) -> str:
        return f"Elicit({self.message!r}, key={self.key!r})"


class ElicitURL(Request):
    """Send the user to a web page (a URL-mode ``elicitation/create`` request).

    For input that must not pass through the client or the model: credentials, API
    keys, payments, third-party sign-in. The client shows ``message`` and the URL's
    host and asks the user for consent before opening it. An ``accept`` answer means
    the user agreed to go there, not that the out-of-band step is finished: check that
    yourself (your web page records it, keyed by something you put in the URL) and, if
    it is not done yet, ask again with another ``ElicitURL``. Needs the client's
    ``elicitation.url`` capability. The handler receives an :class:`ElicitResult`
    without content. ``url`` must be https (plain http only to this machine), as
    :func:`mrtr.core.web_urls.web_url_problem` says: the rule clients apply before they
    offer it; anything else raises ``ValueError``.
    """

    __slots__ = ("message", "url")

    kind = Kind.ELICIT
    parts = ("message", "url")

    def __init__(self, message: str, url: str, *, key: str | None = None) -> None:
        if not isinstance(message, str):
            raise TypeError(f"ElicitURL message must be a str, got {type(message).__name__}")
        problem = web_url_problem(url)
        if problem is not None:  # the rule the terminal client applies before showing it (mrtr.core.web_urls)
            raise ValueError(f"ElicitURL needs an absolute https URL (plain http only to this machine): "
                             f"{url!r} {problem}")
        self.message = message
        self.url = url
        self.key = key if key is None else _checked_key(key)

    def params(self) -> dict[str, Any]:
        return {"mode": "url", "message": self.message, "url": self.url}

    def fingerprint(self) -> bytes:
        return _message_digest(self.message) + _digest8(b"url\0" + self.url.encode())

    @classmethod
    def missing_for(cls, capabilities: Mapping[str, Any] | None) -> dict[str, Any] | None:
        elicitation = capabilities.get(cls._capability) if capabilities else None
        if isinstance(elicitation, dict) and "url" in elicitation:
            return None
        return _needed(cls, "url")

    def describe(self) -> str:
        return f"elicitation/create (url) {self.message!r}"

    def describe_call(self) -> str:
        return f"ElicitURL({_clip(self.message)}, ...)"

    def __repr__(self) -> str:
        return f"ElicitURL({self.message!r}, {self.url!r}, key={self.key!r})"


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _sampling_message(message: Any) -> Any:
    if isinstance(message, str):
        return {"role": "user", "content": {"type": "text", "text": message}}
    return message


class Sample(Request):
    """Ask the client's LLM for a completion (``sampling/createMessage``).

    Sampling is deprecated in MCP 2026-07-28 but fully functional. ``messages`` may be
    plain strings (user text), dicts in the wire shape, or ``mrtr.core.wire.SamplingMessage``.
    Extra keyword parameters (``system_prompt``, ``temperature``, ``stop_sequences``,
    ``model_preferences``, ``tools``, ``tool_choice``, ``include_context``, ``metadata``)
    go into the request's params in camelCase. The handler receives the client's
    ``mrtr.core.wire.CreateMessageResult``.
    """

    __slots__ = ("messages", "max_tokens", "extra")

    kind = Kind.SAMPLE
    parts = ("messages", "parameters")

    def __init__(self, messages: Sequence[Any] | str, *, max_tokens: int, key: str | None = None, **params: Any) -> None:
        if isinstance(messages, str):
            messages = [messages]
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"Sample max_tokens must be a positive int, got {max_tokens!r}")
        self.messages = [_sampling_message(m) for m in messages]
        self.max_tokens = max_tokens
        self.extra = {_camel(name): value for name, value in params.items() if value is not None}
        self.key = key if key is None else _checked_key(key)

    def params(self) -> dict[str, Any]:
        return {"messages": self.messages, "maxTokens": self.max_tokens, **self.extra}

    def fingerprint(self) -> bytes:
        rest = dict(self.extra, maxTokens=self.max_tokens)
        return _digest8(canonical(self.messages)) + _digest8(canonical(rest))

    @classmethod
    def missing_for(cls, capabilities: Mapping[str, Any] | None) -> dict[str, Any] | None:
        declared = capabilities.get(cls._capability) if capabilities else None
        return None if isinstance(declared, dict) else _needed(cls)

    def missing_capability(self, capabilities: Mapping[str, Any] | None) -> dict[str, Any] | None:
        sampling = capabilities.get(self._capability) if capabilities else None
        needed = []
        if self.extra.get("tools") or self.extra.get("toolChoice"):
            needed.append("tools")
        if self.extra.get("includeContext") in ("thisServer", "allServers"):
            needed.append("context")
        if not isinstance(sampling, dict) or any(name not in sampling for name in needed):
            return _needed(type(self), *needed)
        return None

    def __repr__(self) -> str:
        return f"Sample({len(self.messages)} messages, max_tokens={self.max_tokens}, key={self.key!r})"


_ROOTS_FINGERPRINT = _digest8(b"roots/list") * 2


class ListRoots(Request):
    """Ask the client for its filesystem roots (``roots/list``; deprecated, still functional).

    The handler receives the client's ``mrtr.core.wire.ListRootsResult``.
    """

    __slots__ = ()

    kind = Kind.ROOTS

    def __init__(self, *, key: str | None = None) -> None:
        self.key = key if key is None else _checked_key(key)

    def params(self) -> dict[str, Any]:
        return {}

    def fingerprint(self) -> bytes:
        return _ROOTS_FINGERPRINT

    @classmethod
    def missing_for(cls, capabilities: Mapping[str, Any] | None) -> dict[str, Any] | None:
        declared = capabilities.get(cls._capability) if capabilities else None
        return None if isinstance(declared, dict) else _needed(cls)

    def __repr__(self) -> str:
        return f"ListRoots(key={self.key!r})"


class Step(_Effect):
    """A memoized step: ``value = yield Step(fn, *args, **kwargs)``.

    The first execution that reaches the step runs ``fn`` (a plain function, or in an
    async handler also a coroutine function), records its msgspec-encodable result in
    the ledger and sends it back. Later executions get the recorded value without
    running ``fn``. Use it for work that is expensive or must not change between
    rounds: options read from a database, a generated id, the current time.

    An exception raised by ``fn`` is thrown into the handler at the ``yield`` and is not
    recorded, so the next round runs ``fn`` again.
    """

    __slots__ = ("fn", "args", "kwargs")

    kind: ClassVar[Kind] = Kind.STEP
    parts: ClassVar[tuple[str, str]] = ("function", "arguments")
    # Whether a task tool's call runs it in the round on the call (see RoundStep) rather than
    # becoming its task there.
    in_round: ClassVar[bool] = False

    def __init__(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> None:
        if not callable(fn):
            raise TypeError(f"Step needs a callable, got {type(fn).__name__}")
        self.fn = fn
        self.args = args
        self.kwargs = kwargs

    @property
    def name(self) -> str:
        """The step function's qualified name."""
        fn = self.fn
        name = getattr(fn, "__qualname__", None) or getattr(getattr(fn, "func", None), "__qualname__", None)
        module = getattr(fn, "__module__", None) or ""
        return f"{module}.{name}" if name else repr(fn)

    def fingerprint(self) -> bytes:
        """16 bytes: SHA-256 prefixes of the function's identity and of its inputs.

        The identity is the qualified name, plus the line for a lambda (two lambdas in
        one handler share a name). The inputs are the arguments, plus, when there are
        any, the immutable data a ``functools.partial`` binds or a closure captures: those
        are arguments in disguise, and a replay that feeds them something else must
        not silently get the recorded value.
        """
        arguments: Any = [list(self.args), self.kwargs] if self.kwargs else list(self.args)
        identity, binds = self._identity()
        if binds:
            bound = self.bound()
            if bound:
                arguments = [arguments, bound]
        return identity + _digest8(canonical(arguments))

    def _identity(self) -> tuple[bytes, bool]:
        # Every replay fingerprints every Step it reaches: the function's half is cached
        # per code object (a lambda is a new function each run, its code is not).
        fn = self.fn
        if isinstance(fn, functools.partial):
            return self._compute_identity(), True
        code = getattr(fn, "__code__", None)
        key = code if code is not None else fn
        try:
            cached = _IDENTITIES.get(key)
        except TypeError:  # unhashable callable
            return self._compute_identity(), False
        if cached is None or cached[0] != getattr(fn, "__qualname__", None):
            cached = (getattr(fn, "__qualname__", None), self._compute_identity())
            if len(_IDENTITIES) < 4096:
                _IDENTITIES[key] = cached
        return cached[1], bool(getattr(fn, "__closure__", None))

    def _compute_identity(self) -> bytes:
        identity = self.name
        code = _code_of(self.fn)
        if code is not None and code.co_name == "<lambda>":
            identity += f":{code.co_firstlineno}"
        return _digest8(identity.encode())

    def bound(self) -> dict[str, Any]:
        """The immutable data bound to the function: partial arguments and captured variables."""
        fn = self.fn
        bound: dict[str, Any] = {}
        if isinstance(fn, functools.partial):
            args = [value for value in fn.args if _plain(value)]
            if args:
                bound["partial args"] = args
            keywords = {name: value for name, value in fn.keywords.items() if _plain(value)}
            if keywords:
                bound["partial keywords"] = keywords
            fn = fn.func
        code = getattr(fn, "__code__", None)
        cells = getattr(fn, "__closure__", None)
        if code is not None and cells:
            for name, cell in zip(code.co_freevars, cells):
                try:
                    value = cell.cell_contents
                except ValueError:  # not assigned yet
                    continue
                if _plain(value):
                    bound[name] = value
        return bound

    def where(self) -> str | None:
        """``file:line`` where the step function is defined, when it is Python code."""
        code = _code_of(self.fn)
        return None if code is None else f"{code.co_filename}:{code.co_firstlineno}"

    def describe(self) -> str:
        """A short human description for diagnostics."""
        return f"Step({self.name})"

    def describe_call(self) -> str:
        return f"Step({getattr(self.fn, '__name__', None) or type(self.fn).__name__}, ...)"

    def is_async(self) -> bool:
        """Whether ``fn`` is a coroutine function."""
        return inspect.iscoroutinefunction(self.fn)

    def __repr__(self) -> str:
        return f"Step({self.name}, args={self.args!r}, kwargs={self.kwargs!r})"


class RoundStep(Step):
    """A Step that a task tool's call runs in its round, before its task exists.

    A task tool's call (the tasks extension) asks its questions in rounds on the call
    until it reaches its first Step; there the task is created, and that Step and
    everything after it run in the task. A ``RoundStep`` does not make the call a task:
    it runs in the round, its result recorded in the round's ledger (the sealed
    ``requestState``) as any Step's is, and the questions after it are still rounds on
    the call. The task is created at the first plain Step, or with the result when the
    handler finishes first. Outside that first stretch of a task tool's call it is a
    Step like any other.

    For a Step whose result decides whether there is a task yet: the proxy's round trip
    to an upstream server, which may ask in rounds of its own before it makes its task.
    """

    __slots__ = ()

    in_round: ClassVar[bool] = True


MAX_CHANGE_ID = 64
"""The longest change id a :class:`Patched` takes, in characters: its marker rides in every token."""


class Patched(_Effect):
    """A version gate for a handler changed while conversations and tasks are in flight.

    ``if (yield Patched("change-id")):`` gives ``True`` in a conversation (or task) that
    reaches this point for the first time under code that has the patch, and records a
    marker there (the change id and a few bytes); it gives ``False`` in one whose ledger
    was recorded past this point by code from before the patch, so that conversation
    keeps taking the old branch and replays the answers it recorded there. The marker
    takes an ordinal; in an old ledger the gate takes none, so the old branch's yields
    meet the positions they recorded.

    ``deprecated=True`` is for the step after the old branch is removed: the gate gives
    ``True`` everywhere, replays a marker recorded under it, and writes none, so once no
    conversation recorded with the marker is in flight the line can go. See the patch
    life cycle in ``docs/handlers.md``.
    """

    __slots__ = ("change_id", "deprecated")

    kind: ClassVar[Kind] = Kind.PATCH

    def __init__(self, change_id: str, *, deprecated: bool = False) -> None:
        if not isinstance(change_id, str) or not change_id or change_id != change_id.strip():
            raise ValueError(f"Patched needs a non-empty change id without surrounding spaces, got {change_id!r}")
        if len(change_id) > MAX_CHANGE_ID:
            raise ValueError(f"Patched change id {change_id[:20]!r}... is longer than {MAX_CHANGE_ID} characters; "
                             "it is recorded in every ledger that passes the gate")
        self.change_id = change_id
        self.deprecated = deprecated

    def describe(self) -> str:
        """A short human description for diagnostics."""
        return f"Patched({self.change_id!r})"

    def describe_call(self) -> str:
        return f"Patched({self.change_id!r})"

    def __bool__(self) -> bool:
        # `if Patched("x"):` without yield would always take the new branch, old conversations included.
        raise _forgot_yield(self, "tested the truth of", NotYieldedUse)

    def __repr__(self) -> str:
        extra = ", deprecated=True" if self.deprecated else ""
        return f"Patched({self.change_id!r}{extra})"


_IDENTITIES: dict[Any, tuple[str | None, bytes]] = {}


def _code_of(fn: Any) -> Any:
    if isinstance(fn, functools.partial):
        fn = fn.func
    return getattr(fn, "__code__", None)


def _plain(value: Any, depth: int = 0) -> bool:
    """Is ``value`` immutable data whose identity survives a process restart?

    Only immutable values count: a closure over a list or dict the step itself fills
    (a cache, a call log) must not change the fingerprint when it mutates them.
    """
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return True
    if isinstance(value, tuple) and depth < 4:
        return len(value) <= 256 and all(_plain(item, depth + 1) for item in value)
    return False


class ElicitResult:
    """The user's answer to an :class:`Elicit`, as the handler receives it.

    ``action`` is ``"accept"``, ``"decline"`` or ``"cancel"``. ``content`` is the
    submitted form (a dict) on accept and ``None`` otherwise. ``value`` is the content
    converted to the Struct (or pydantic model) the question was asked with, or the dict
    for a Form, or ``None`` when the user did not accept. Decline and cancel are answers
    too: they are recorded and never asked again. ``question`` is the wire key and the
    question it answers, as the runtime delivered it (``None`` for one built by hand).
    """

    __slots__ = ("action", "content", "value", "question")

    def __init__(self, action: str, content: dict[str, Any] | None = None, value: Any = None) -> None:
        self.action = action
        self.content = content
        self.value = value
        # (wire key, the question as it reads in source), set by the runtime when it delivers
        # the answer: a handler that reads the content of a declined answer is told which.
        self.question: tuple[str, str] | None = None

    @property
    def accepted(self) -> bool:
        """True when the user submitted the form."""
        return self.action == "accept"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ElicitResult)
            and self.action == other.action
            and self.content == other.content
        )

    def __repr__(self) -> str:
        return f"ElicitResult(action={self.action!r}, content={self.content!r})"
