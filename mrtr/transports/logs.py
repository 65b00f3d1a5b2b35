"""Logs an operator can use: one access line per request, as text or as JSON.

Every transport reports each request it answered through :class:`AccessRecord` on the
``mrtr.access`` logger: the MCP method, the target (tool or prompt name, resource URI),
what came of it (``complete``, ``input_required``, ``error`` with its JSON-RPC code,
``cancelled``), the HTTP status on HTTP, the duration, and the round number when the
request shows it. Arguments, answers and ``requestState`` tokens are never logged:
they carry what users typed.

The fields ride on each record as ``record.mrtr`` (a dict), so :class:`JsonFormatter`
writes them as JSON members for log shippers while the text format keeps one short
readable line. :func:`configure` installs either on stderr; ``mrtr serve
--log-format json`` uses it.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from . import telemetry as otel

__all__ = ["ACCESS_LOGGER", "AccessRecord", "JsonFormatter", "TEXT_FORMAT", "configure"]

ACCESS_LOGGER = logging.getLogger("mrtr.access")
"""Where access lines go (``INFO``); silence it with ``logging.getLogger("mrtr.access").setLevel(...)``."""

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
"""The text log format ``mrtr serve`` uses on stderr."""

# The methods whose target a request names, and the params member naming it.
_TARGET_MEMBER = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
_TARGET_LIMIT = 200  # a target is client input: keep a hostile one from flooding the log


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``time``, ``level``, ``logger``, ``message``, the record's
    ``mrtr`` fields, and ``traceback`` when the record carries an exception."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "mrtr", None)
        if isinstance(fields, Mapping):
            data.update(fields)
        if record.exc_info:
            data["traceback"] = self.formatException(record.exc_info)
        elif record.exc_text:
            data["traceback"] = record.exc_text
        return json.dumps(data, ensure_ascii=False, default=str)


def configure(level: str = "info", fmt: str = "text") -> None:
    """Log to stderr at ``level`` (for the ``mrtr`` loggers) in ``fmt``: ``"text"`` or ``"json"``.

    Installs a stderr handler on the root logger unless one is there already; with
    ``"json"`` every root handler gets a :class:`JsonFormatter`, so third-party
    records come out as JSON too.
    """
    if fmt not in ("text", "json"):
        raise ValueError(f'log format must be "text" or "json", got {fmt!r}')
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(logging.StreamHandler(sys.stderr))
        if fmt == "text":
            root.handlers[-1].setFormatter(logging.Formatter(TEXT_FORMAT))
    if fmt == "json":
        for handler in root.handlers:
            handler.setFormatter(JsonFormatter())
    logging.getLogger("mrtr").setLevel(level.upper())


def _printable(text: str) -> str:
    """A client-chosen string fit for one log line: bounded, no control characters."""
    if len(text) > _TARGET_LIMIT:
        text = text[:_TARGET_LIMIT] + "..."
    return "".join(ch if ch.isprintable() else "?" for ch in text)


def _target(method: str, params: Any) -> str | None:
    member = _TARGET_MEMBER.get(method)
    if member is None or not isinstance(params, Mapping):
        return None
    value = params.get(member)
    if not isinstance(value, str):
        return None
    return value if len(value) <= _TARGET_LIMIT else value[:_TARGET_LIMIT] + "..."


class AccessRecord:
    """What one request did, filled in as it is answered, logged once by :meth:`finish`.

    A transport creates it when a request arrives, calls :meth:`request` with the parsed
    JSON-RPC message, :meth:`response` with the message it answers, and :meth:`finish`
    once the answer was written (or the request was abandoned). It also carries the
    request's trace span when the ``otel`` extra is installed (see :mod:`mrtr.transports.telemetry`).
    """

    __slots__ = ("transport", "http_method", "path", "method", "target", "round", "result", "code", "status",
                 "started", "span", "_done")

    def __init__(self, transport: str, http_method: str | None = None, path: str | None = None) -> None:
        self.transport = transport
        self.http_method = http_method
        self.path = path
        self.method: str | None = None
        self.target: str | None = None
        self.round: int | None = None
        self.result: str | None = None
        self.code: int | None = None
        self.status: int | None = None
        self.started = time.perf_counter()
        self.span: Any = None
        self._done = False

    def request(self, message: Mapping[str, Any]) -> None:
        """Note what the request asks for (and start its span)."""
        method = message.get("method")
        if not isinstance(method, str):
            return
        self.method = method
        params = message.get("params")
        self.target = _target(method, params)
        if method in _TARGET_MEMBER and isinstance(params, Mapping) and params.get("requestState") is None:
            # A first request is round 1. A retry's round is inside the sealed token,
            # which the transport does not open, so it stays unknown here.
            self.round = 1
        if otel.ENABLED:
            meta = params.get("_meta") if isinstance(params, Mapping) else None
            self.span = otel.start_span(method, self.target, self.round, meta)

    def response(self, message: Mapping[str, Any]) -> None:
        """Note how the request was answered: its result type or its error code."""
        error = message.get("error")
        if isinstance(error, Mapping):
            self.error(error.get("code"))
            return
        result = message.get("result")
        kind = result.get("resultType") if isinstance(result, Mapping) else None
        self.result = kind if isinstance(kind, str) else "complete"
        if self.result == "complete" and isinstance(result, Mapping) and result.get("isError") is True:
            self.result = "tool_error"

    def error(self, code: Any) -> None:
        """Note a JSON-RPC error answer (also for requests refused before dispatch)."""
        self.result = "error"
        self.code = code if isinstance(code, int) and not isinstance(code, bool) else None

    def finish(self, status: int | None = None, *, outcome: str | None = None) -> None:
        """Log the access line (once). ``outcome`` overrides the result, e.g. ``"aborted"``
        when the client went away before the answer was written whole."""
        if self._done:
            return
        self._done = True
        if status is not None:
            self.status = status
        if outcome is not None:
            self.result = outcome
        duration_ms = round((time.perf_counter() - self.started) * 1000.0, 3)
        if self.span is not None:
            otel.end_span(self.span, self.result, self.code, self.status)
        if not ACCESS_LOGGER.isEnabledFor(logging.INFO):
            return
        fields: dict[str, Any] = {"transport": self.transport, "method": self.method, "target": self.target,
                                  "result": self.result, "duration_ms": duration_ms}
        if self.http_method is not None:
            fields["http_method"] = self.http_method
            fields["path"] = self.path
        if self.code is not None:
            fields["code"] = self.code
        if self.status is not None:
            fields["status"] = self.status
        if self.round is not None:
            fields["round"] = self.round
        result = self.result or "-"
        if self.code is not None:
            result = f"{result} {self.code}"
        parts = [] if self.http_method is None else [self.http_method, _printable(self.path or "")]
        parts.append(self.method or "-")
        if self.target is not None:
            parts.append(json.dumps(self.target, ensure_ascii=False))
        parts.append(result)
        if self.status is not None:
            parts.append(str(self.status))
        parts.append(f"{duration_ms:.1f}ms")
        if self.round is not None:
            parts.append(f"round={self.round}")
        ACCESS_LOGGER.info("%s", " ".join(parts), extra={"mrtr": fields})
