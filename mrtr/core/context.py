"""The per-request context a handler receives when it declares a first parameter ``ctx``.

Everything in it comes from the request being served: MCP 2026-07-28 is stateless,
so there is no session to remember capabilities or log levels between requests.
Notifications (progress, log messages) go to a ``notify`` callable that the transport
supplies; without one they are validated and dropped, which is what a handler stepped
in a unit test wants.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .apps import declares_ui
from .effects import Request
from .jsonrpc import Notify

__all__ = ["Context", "LOG_LEVELS", "LifespanNotRunning", "Notify"]

# RFC 5424 severities in increasing order, as MCP names them.
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
_LOG_RANK = {name: rank for rank, name in enumerate(LOG_LEVELS)}


class LifespanNotRunning:
    """Stands in for the lifespan value while the server's lifespan is not running."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def __str__(self) -> str:
        return self.reason


class Context:
    """What a handler knows about the request it serves.

    Attributes: ``arguments`` (the call arguments), ``principal`` (the authenticated
    caller or ``None``), ``auth`` (the caller's verified token, an
    ``mrtr.auth.AccessToken`` with ``subject``, ``client_id``, ``issuer``, ``scopes`` and
    ``claims``, on a server protected with ``auth=``; ``None`` otherwise), ``client_capabilities`` and ``client_info`` (from the request's
    ``_meta``), ``method`` and ``target`` (tool or prompt name, or resource uri),
    ``request_id``, ``progress_token``, ``log_level``, ``lifespan`` (what the server's
    lifespan yielded) and ``is_replaying`` (true while
    the handler re-runs the part of its ledger that earlier rounds already ran; progress
    and log notifications stay quiet then, so the client sees each one once).
    """

    __slots__ = (
        "arguments",
        "principal",
        "auth",
        "client_capabilities",
        "client_info",
        "method",
        "target",
        "request_id",
        "progress_token",
        "log_level",
        "is_replaying",
        "_notify",
        "_last_progress",
        "_lifespan",
    )

    def __init__(
        self,
        arguments: Mapping[str, Any] | None = None,
        *,
        principal: str | None = None,
        client_capabilities: Mapping[str, Any] | None = None,
        client_info: Mapping[str, Any] | None = None,
        method: str = "tools/call",
        target: str | None = None,
        request_id: str | int | None = None,
        progress_token: str | int | None = None,
        log_level: str | None = None,
        notify: Notify | None = None,
        auth: Any = None,
        lifespan: Any = None,
    ) -> None:
        if log_level is not None and log_level not in _LOG_RANK:
            raise ValueError(f"unknown log level {log_level!r}; expected one of {', '.join(LOG_LEVELS)}")
        self.arguments: Mapping[str, Any] = arguments if arguments is not None else {}
        self.principal = principal
        self.auth = auth
        self.client_capabilities: Mapping[str, Any] = client_capabilities if client_capabilities is not None else {}
        self.client_info = client_info
        self.method = method
        self.target = target
        self.request_id = request_id
        self.progress_token = progress_token
        self.log_level = log_level
        self.is_replaying = False
        self._notify = notify
        self._last_progress: float | None = None
        self._lifespan = lifespan

    @classmethod
    def of_request(cls, arguments: Mapping[str, Any], principal: str | None, client_capabilities: Mapping[str, Any],
                   client_info: Mapping[str, Any] | None, method: str, target: str | None, request_id: str | int | None,
                   progress_token: str | int | None, log_level: str | None, notify: Notify | None, auth: Any,
                   lifespan: Any) -> Context:
        """The context of one request as a server builds it: every member given, in order.

        The same object the keyword constructor makes (a test compares them), without
        keyword matching or defaults, which every request would pay for. ``log_level``
        must already be a known level (the server checked the request's ``_meta``).
        """
        self = object.__new__(cls)
        self.arguments = arguments
        self.principal = principal
        self.auth = auth
        self.client_capabilities = client_capabilities
        self.client_info = client_info
        self.method = method
        self.target = target
        self.request_id = request_id
        self.progress_token = progress_token
        self.log_level = log_level
        self.is_replaying = False
        self._notify = notify
        self._last_progress = None
        self._lifespan = lifespan
        return self

    @property
    def lifespan(self) -> Any:
        """What the server's ``@server.lifespan`` yielded: pools and clients handlers share.

        ``None`` when the server has no lifespan. Raises ``RuntimeError`` when it has one
        that is not running (the server was called without a transport that starts it,
        and outside ``async with server.running()``).
        """
        value = self._lifespan
        if isinstance(value, LifespanNotRunning):
            raise RuntimeError(str(value))
        return value

    @property
    def supports_ui(self) -> bool:
        """Whether the client renders MCP Apps: it declared ``io.modelcontextprotocol/ui`` with its MIME type.

        Read from this request's capabilities in the modern era and from the session's
        ``initialize`` in the legacy one. A tool with an interface returns text content
        either way (the fallback); this says whether the interface will be seen too.
        """
        return declares_ui(self.client_capabilities)

    def supports(self, request: Request | type[Request]) -> bool:
        """Can the client answer this kind of request? Lets a handler degrade instead of failing.

        Pass an instance (``ctx.supports(Sample(..., tools=[...]))`` also checks
        ``sampling.tools``) or a class (``ctx.supports(Elicit)``).
        """
        if isinstance(request, type):
            if not issubclass(request, Request):
                raise TypeError(f"supports() takes a request or a request class, got {request!r}")
            return request.missing_for(self.client_capabilities) is None
        if not isinstance(request, Request):
            raise TypeError(f"supports() takes a request or a request class, got {type(request).__name__}")
        return request.missing_capability(self.client_capabilities) is None

    def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Report progress on this request.

        Values must strictly increase within one execution (``ValueError`` otherwise).
        A notification goes out only when the request carried a ``progressToken``, and
        not while :attr:`is_replaying`: the part of the handler that earlier rounds
        already ran reported its progress then, so each value reaches the client once
        and progress only moves forward across rounds.
        """
        if isinstance(progress, bool) or not isinstance(progress, (int, float)):
            raise TypeError(f"progress must be a number, got {type(progress).__name__}")
        if self._last_progress is not None and not progress > self._last_progress:
            raise ValueError(
                f"progress must strictly increase with each notification: previous={self._last_progress}, got={progress}"
            )
        self._last_progress = progress
        if self.progress_token is None or self._notify is None or self.is_replaying:
            return
        params: dict[str, Any] = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        self._notify("notifications/progress", params)

    def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """Send a ``notifications/message`` log entry to the client.

        Only when the request's ``_meta`` asked for logs (``io.modelcontextprotocol/logLevel``),
        ``level`` is at least that severity and the handler is not replaying the part an
        earlier round already ran (which logged it then); otherwise nothing is sent.
        """
        rank = _LOG_RANK.get(level)
        if rank is None:
            raise ValueError(f"unknown log level {level!r}; expected one of {', '.join(LOG_LEVELS)}")
        if self.log_level is None or self._notify is None or rank < _LOG_RANK[self.log_level] or self.is_replaying:
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        self._notify("notifications/message", params)

    def __repr__(self) -> str:
        return f"Context(method={self.method!r}, target={self.target!r}, principal={self.principal!r})"
