"""What a handler can yield: descriptions of work for the runtime to interpret.

A handler never performs a round trip itself. It yields a *request* (:class:`Elicit`,
:class:`Sample`, :class:`ListRoots`), a group of them, or a memoized :class:`Step`,
and the runtime decides what happens: send a recorded answer back, run the step once,
or pause the conversation and ask the client.

Every effect knows three things the runtime needs: its ledger kind, its fingerprint
(what was asked, so a replay can prove it asks the same), and, for requests, the wire
form it takes inside ``inputRequests``.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar
from urllib.parse import urlsplit

import msgspec

from .jsonrpc import canonical
from .ledger import Kind
from .schema import Form, RequestedSchema, requested_schema

__all__ = ["Request", "Elicit", "ElicitURL", "Sample", "ListRoots", "Step", "ElicitResult"]

def _digest8(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()[:8]


class Request:
    """Base class of the requests a handler can put to the client.

    Subclasses define ``kind``, ``method``, :meth:`params`, :meth:`fingerprint` and the
    capability check. ``key`` is the wire key chosen by the handler, or ``None`` for
    the default (``elicit-<N>``, ``sample-<N>``, ``roots-<N>``).
    """

    __slots__ = ("key",)

    kind: ClassVar[Kind]
    method: ClassVar[str]

    key: str | None

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
        return type(self).missing_for(capabilities)

    @classmethod
    def missing_for(cls, capabilities: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """Like :meth:`missing_capability`, for the plainest request of this kind."""
        raise NotImplementedError

    # The names of the two halves of the fingerprint, for mismatch diagnostics.
    parts: ClassVar[tuple[str, str]] = ("request", "parameters")

    def describe(self) -> str:
        """A short human description for diagnostics."""
        return self.method


class Elicit(Request):
    """Ask the user to fill a form (a form-mode ``elicitation/create`` request).

    ``schema`` is a :class:`mrtr.Form` or a flat ``msgspec.Struct`` subclass. The handler
    receives an :class:`ElicitResult`; when a Struct was given and the user accepted,
    ``result.value`` is an instance of it.
    """

    __slots__ = ("message", "schema", "_compiled")

    kind = Kind.ELICIT
    method = "elicitation/create"
    parts = ("message", "requestedSchema")

    def __init__(self, message: str, schema: Form | type[msgspec.Struct] | RequestedSchema, *, key: str | None = None) -> None:
        if not isinstance(message, str):
            raise TypeError(f"Elicit message must be a str, got {type(message).__name__}")
        self.message = message
        self.schema = schema
        self.key = key
        self._compiled = requested_schema(schema)

    @property
    def requested(self) -> RequestedSchema:
        """The compiled schema this elicitation asks with."""
        return self._compiled

    def params(self) -> dict[str, Any]:
        return {"mode": "form", "message": self.message, "requestedSchema": self._compiled.schema}

    def fingerprint(self) -> bytes:
        return _digest8(self.message.encode()) + self._compiled.digest[:8]

    @classmethod
    def missing_for(cls, capabilities: Mapping[str, Any] | None) -> dict[str, Any] | None:
        elicitation = capabilities.get("elicitation") if capabilities else None
        # {} means form (backward compatibility); a client naming only "url" cannot render forms.
        if isinstance(elicitation, dict) and ("form" in elicitation or "url" not in elicitation):
            return None
        return {"elicitation": {"form": {}}}

    def describe(self) -> str:
        return f"elicitation/create {self.message!r}"

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
    without content.
    """

    __slots__ = ("message", "url")

    kind = Kind.ELICIT
    method = "elicitation/create"
    parts = ("message", "url")

    def __init__(self, message: str, url: str, *, key: str | None = None) -> None:
        if not isinstance(message, str):
            raise TypeError(f"ElicitURL message must be a str, got {type(message).__name__}")
        parsed = urlsplit(url) if isinstance(url, str) else None
        if parsed is None or parsed.scheme not in ("https", "http") or not parsed.netloc:
            raise ValueError(f"ElicitURL needs an absolute http(s) URL, got {url!r}")
        self.message = message
        self.url = url
        self.key = key

    def params(self) -> dict[str, Any]:
        return {"mode": "url", "message": self.message, "url": self.url}

    def fingerprint(self) -> bytes:
        return _digest8(self.message.encode()) + _digest8(b"url\0" + self.url.encode())

    @classmethod
    def missing_for(cls, capabilities: Mapping[str, Any] | None) -> dict[str, Any] | None:
        elicitation = capabilities.get("elicitation") if capabilities else None
        if isinstance(elicitation, dict) and "url" in elicitation:
            return None
        return {"elicitation": {"url": {}}}

    def describe(self) -> str:
        return f"elicitation/create (url) {self.message!r}"

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
    plain strings (user text), dicts in the wire shape, or ``mrtr.wire.SamplingMessage``.
    Extra keyword parameters (``system_prompt``, ``temperature``, ``stop_sequences``,
    ``model_preferences``, ``tools``, ``tool_choice``, ``include_context``, ``metadata``)
    go into the request's params in camelCase. The handler receives the client's
    ``mrtr.wire.CreateMessageResult``.
    """

    __slots__ = ("messages", "max_tokens", "extra")

    kind = Kind.SAMPLE
    method = "sampling/createMessage"
    parts = ("messages", "parameters")

    def __init__(self, messages: Sequence[Any] | str, *, max_tokens: int, key: str | None = None, **params: Any) -> None:
        if isinstance(messages, str):
            messages = [messages]
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"Sample max_tokens must be a positive int, got {max_tokens!r}")
        self.messages = [_sampling_message(m) for m in messages]
        self.max_tokens = max_tokens
        self.extra = {_camel(name): value for name, value in params.items() if value is not None}
        self.key = key

    def params(self) -> dict[str, Any]:
        return {"messages": self.messages, "maxTokens": self.max_tokens, **self.extra}

    def fingerprint(self) -> bytes:
        rest = dict(self.extra, maxTokens=self.max_tokens)
        return _digest8(canonical(self.messages)) + _digest8(canonical(rest))

    @classmethod
    def missing_for(cls, capabilities: Mapping[str, Any] | None) -> dict[str, Any] | None:
        sampling = capabilities.get("sampling") if capabilities else None
        return None if isinstance(sampling, dict) else {"sampling": {}}

    def missing_capability(self, capabilities: Mapping[str, Any] | None) -> dict[str, Any] | None:
        sampling = capabilities.get("sampling") if capabilities else None
        needed: dict[str, Any] = {}
        if self.extra.get("tools") or self.extra.get("toolChoice"):
            needed["tools"] = {}
        if self.extra.get("includeContext") in ("thisServer", "allServers"):
            needed["context"] = {}
        if not isinstance(sampling, dict):
            return {"sampling": needed}
        if any(name not in sampling for name in needed):
            return {"sampling": needed}
        return None

    def __repr__(self) -> str:
        return f"Sample({len(self.messages)} messages, max_tokens={self.max_tokens}, key={self.key!r})"


_ROOTS_FINGERPRINT = _digest8(b"roots/list") * 2


class ListRoots(Request):
    """Ask the client for its filesystem roots (``roots/list``; deprecated, still functional).

    The handler receives the client's ``mrtr.wire.ListRootsResult``.
    """

    __slots__ = ()

    kind = Kind.ROOTS
    method = "roots/list"

    def __init__(self, *, key: str | None = None) -> None:
        self.key = key

    def params(self) -> dict[str, Any]:
        return {}

    def fingerprint(self) -> bytes:
        return _ROOTS_FINGERPRINT

    @classmethod
    def missing_for(cls, capabilities: Mapping[str, Any] | None) -> dict[str, Any] | None:
        roots = capabilities.get("roots") if capabilities else None
        return None if isinstance(roots, dict) else {"roots": {}}

    def __repr__(self) -> str:
        return f"ListRoots(key={self.key!r})"


class Step:
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
        """16 bytes: SHA-256 prefixes of the qualified name and of the arguments."""
        arguments = [list(self.args), self.kwargs] if self.kwargs else list(self.args)
        return _digest8(self.name.encode()) + _digest8(canonical(arguments))

    def describe(self) -> str:
        """A short human description for diagnostics."""
        return f"Step({self.name})"

    def is_async(self) -> bool:
        """Whether ``fn`` is a coroutine function."""
        return inspect.iscoroutinefunction(self.fn)

    def __repr__(self) -> str:
        return f"Step({self.name}, args={self.args!r}, kwargs={self.kwargs!r})"


class ElicitResult:
    """The user's answer to an :class:`Elicit`, as the handler receives it.

    ``action`` is ``"accept"``, ``"decline"`` or ``"cancel"``. ``content`` is the
    submitted form (a dict) on accept and ``None`` otherwise. ``value`` is the content
    converted to the Struct the question was asked with, or the dict for a Form, or
    ``None`` when the user did not accept. Decline and cancel are answers too: they are
    recorded and never asked again.
    """

    __slots__ = ("action", "content", "value")

    def __init__(self, action: str, content: dict[str, Any] | None = None, value: Any = None) -> None:
        self.action = action
        self.content = content
        self.value = value

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
