"""Logs an operator can use: one access line per request, as text or as JSON, at little cost.

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

**What a line costs.** Through Python's ``logging`` a line is a ``LogRecord``, a
formatter, a lock and a flush of the stream, once per request: a fifth of what a
plain request costs the server. So when an access record would reach nothing but the
:class:`LineHandler` that :func:`configure` installs, with the formatter it installs,
the line skips ``logging`` and is written the way that handler would write it, byte
for byte, from fields prepared per request (the time's text is made once per second).
Anything else (a handler of your own on ``mrtr.access``, ``mrtr`` or the root logger,
a filter, another formatter or record factory) sends every record through ``logging``
as before, so whoever listens gets every one.

**When a line is written.** While a transport serves, :func:`write_behind` watches its
event loop (a trio instrument, no task): access lines wait in the handler until the loop
has nothing else to run and is about to wait for I/O (or :data:`FLUSH_INTERVAL` has
passed, or :data:`FLUSH_BYTES` are waiting) and go out in one write. Any other record
is written at once, after the lines waiting before it, so the order of the log is the
order of events. The lines waiting are written when the transport stops (a graceful
shutdown on SIGTERM or SIGINT included), when the trio run ends and when the
interpreter exits (``logging.shutdown``); only a process killed outright (SIGKILL, the
OOM killer) loses them, at most what accumulated since the loop was last idle.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from json.encoder import encode_basestring as _encode_basestring  # json.dumps(str, ensure_ascii=False)
from typing import IO, Any

import trio

from . import telemetry as otel

__all__ = ["ACCESS_LOGGER", "AccessRecord", "FLUSH_BYTES", "FLUSH_INTERVAL", "JsonFormatter", "LineHandler",
           "TEXT_FORMAT", "configure", "write_behind"]

ACCESS_LOGGER = logging.getLogger("mrtr.access")
"""Where access lines go (``INFO``); silence it with ``logging.getLogger("mrtr.access").setLevel(...)``."""

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
"""The text log format ``mrtr serve`` uses on stderr."""

FLUSH_INTERVAL = 0.05
"""Seconds an access line may wait for the event loop to be idle before it is written anyway."""

FLUSH_BYTES = 64 * 1024
"""Characters of waiting access lines that are written at once, idle loop or not."""

_ROOT = logging.getLogger()

# The methods whose target a request names, and the params member naming it.
_TARGET_MEMBER = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
_TARGET_LIMIT = 200  # a target is client input: keep a hostile one from flooding the log

# LogRecord's clock: time.time() before 3.13, time.time_ns() from 3.13 on (gh-102402).
_NS_CLOCK = sys.version_info >= (3, 13)


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
        return _one_line(json.dumps(data, ensure_ascii=False, default=str))


# The line boundaries str.splitlines knows beyond the control characters JSON escapes already.
_SEPARATORS = {ord(char): f"\\u{ord(char):04x}" for char in "\x85\u2028\u2029"}


def _one_line(encoded: str) -> str:
    """JSON text with U+0085, U+2028 and U+2029 escaped: JSON allows them raw, but a reader that
    splits on every line boundary (``str.splitlines``, JavaScript) would cut the line there."""
    if "\x85" in encoded or "\u2028" in encoded or "\u2029" in encoded:
        return encoded.translate(_SEPARATORS)
    return encoded


def _json_string(value: str) -> str:
    """``value`` as a JSON string on one line (see :func:`_one_line`)."""
    return _one_line(_encode_basestring(value))


class LineHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The stream handler :func:`configure` installs: ``logging.StreamHandler`` with deferred access lines.

    A record that comes through ``logging`` is formatted and written at once, as
    ``StreamHandler`` writes it. Access lines that skip ``logging`` (see the module
    docs) are kept until :func:`write_behind` writes them, when one runs on the loop
    writing them, or written at once otherwise. :meth:`flush` writes what waits.
    """

    def __init__(self, stream: IO[str] | None = None) -> None:
        super().__init__(stream)
        self._waiting: list[str] = []
        self._waiting_size = 0
        self._waiting_since = 0.0  # time.monotonic() of the oldest line waiting

    def emit(self, record: logging.LogRecord) -> None:
        """Write ``record`` now, after the access lines waiting before it."""
        try:
            line = self.format(record) + self.terminator
            self.acquire()
            try:
                self._waiting.append(line)
                self._write_waiting()
            finally:
                self.release()
        except RecursionError:  # as StreamHandler: never swallow a recursion
            raise
        except Exception:
            self.handleError(record)

    def flush(self) -> None:
        """Write the access lines that wait, then flush the stream."""
        self.acquire()
        try:
            self._write_waiting()
        finally:
            self.release()

    def access_line(self, line: str) -> None:
        """An access line formatted as :meth:`format` would: kept for :func:`write_behind`, or written now."""
        deferral = _deferral
        # The handler's lock as a context manager: Handler.acquire and release are two calls more a line.
        with self.lock:  # type: ignore[union-attr]  # createLock made it in __init__
            try:
                waiting = self._waiting
                waiting.append(line)
                self._waiting_size += len(line)
                if deferral is None or deferral.thread != threading.get_ident() or self._waiting_size >= FLUSH_BYTES:
                    self._write_waiting()
                elif len(waiting) == 1:
                    self._waiting_since = time.monotonic()
                    deferral.wake(self)
                elif time.monotonic() - self._waiting_since >= FLUSH_INTERVAL:
                    self._write_waiting()  # a loop that never idles still writes its lines this often
            except Exception:  # as a failed emit: a stream that cannot be written loses the line, not the request
                pass

    def _write_waiting(self) -> None:
        # Called with the handler's lock held: one write and one flush for everything waiting.
        waiting = self._waiting
        if waiting:
            self._waiting = []
            self._waiting_size = 0
            stream = self.stream
            stream.write(waiting[0] if len(waiting) == 1 else "".join(waiting))
        if self.stream and hasattr(self.stream, "flush"):
            self.stream.flush()


class _Deferral(trio.abc.Instrument):
    """The one :func:`write_behind` of this process: its loop's thread, the handlers with lines waiting.

    An instrument of that loop: trio calls :meth:`before_io_wait` each time round the loop,
    before it waits for I/O, and that is when the lines waiting go out, if nothing is left to
    run. It is what ``trio.testing.wait_all_tasks_blocked`` would tell a task, without a task
    woken for every batch of lines, and without a module made for test suites (it pulls in
    pytest wherever that is installed) on the way to serving.
    """

    __slots__ = ("thread", "handlers")

    def __init__(self) -> None:
        self.thread = threading.get_ident()
        self.handlers: list[LineHandler] = []

    def wake(self, handler: LineHandler) -> None:
        # On the loop's thread (the caller checked), where before_io_wait runs too.
        if handler not in self.handlers:
            self.handlers.append(handler)

    def before_io_wait(self, timeout: float) -> None:
        """Write the lines waiting when the loop has nothing to run (its wait for I/O has a timeout then)."""
        if not self.handlers:
            return
        # trio waits with no timeout (0) while a task is runnable; a 0 with nothing runnable (a
        # deadline due, an autojumping test clock) is idle too. Only read when lines wait.
        if timeout > 0 or trio.lowlevel.current_statistics().tasks_runnable == 0:
            self.flush()

    def after_run(self) -> None:
        """The trio run ends: write what waits, and defer no more."""
        self.stop()

    def flush(self) -> None:
        handlers, self.handlers = self.handlers, []
        for handler in handlers:
            try:
                handler.flush()
            except Exception:  # a broken stream loses its lines, never the transport
                pass

    def stop(self) -> None:
        global _deferral
        if _deferral is self:
            _deferral = None
            try:
                trio.lowlevel.remove_instrument(self)
            except (RuntimeError, KeyError):  # outside its run (after it ended), or trio removed it already
                pass
        self.flush()


_deferral: _Deferral | None = None


def write_behind() -> Callable[[], None]:
    """Defer this loop's access lines to its idle moments, while a transport serves; returns what stops it.

    Call it inside trio, on the loop's thread. The function returned writes what
    waits and ends the deferral (the end of the trio run does too). One loop per
    process defers; a second one's lines are written at once. The transports call it
    from :func:`mrtr.transports.shared.lifespan`.
    """
    global _deferral
    if _deferral is not None:
        return _nothing
    deferral = _deferral = _Deferral()
    trio.lowlevel.add_instrument(deferral)
    return deferral.stop


def _nothing() -> None:
    pass


def configure(level: str = "info", fmt: str = "text") -> None:
    """Log to stderr at ``level`` (for the ``mrtr`` loggers) in ``fmt``: ``"text"`` or ``"json"``.

    Installs a :class:`LineHandler` on stderr on the root logger unless it has a
    handler already; with ``"json"`` every root handler gets a :class:`JsonFormatter`,
    so third-party records come out as JSON too.
    """
    if fmt not in ("text", "json"):
        raise ValueError(f'log format must be "text" or "json", got {fmt!r}')
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(LineHandler(sys.stderr))
        if fmt == "text":
            root.handlers[-1].setFormatter(logging.Formatter(TEXT_FORMAT))
    if fmt == "json":
        for handler in root.handlers:
            handler.setFormatter(JsonFormatter())
    logging.getLogger("mrtr").setLevel(level.upper())


# -- the line without logging ----------------------------------------------------------------


def _sole_handler() -> tuple[LineHandler, bool] | None:
    """The handler an access record would reach alone, and whether it formats JSON; else ``None``.

    ``None`` whenever ``logging`` could do anything else with the record: a handler on
    ``mrtr.access`` or an ancestor below the root, propagation turned off, a filter, a
    root with another handler, a formatter or a record factory of someone else's.
    """
    logger: Any = ACCESS_LOGGER
    if logger.filters:
        return None
    while logger is not _ROOT:
        if logger.handlers or not logger.propagate:
            return None
        logger = logger.parent
    handlers = _ROOT.handlers
    if len(handlers) != 1:
        return None
    handler = handlers[0]
    if type(handler) is not LineHandler or handler.filters or handler.level > logging.INFO \
            or logging.getLogRecordFactory() is not logging.LogRecord:
        return None
    # Read for every request, not remembered: a formatter's attributes (its converter, its formats) may
    # be changed in place, and a line must then go through logging as any other record.
    formatter: Any = handler.formatter
    kind = type(formatter)
    if kind is JsonFormatter:
        return handler, True
    if kind is logging.Formatter and formatter._fmt == TEXT_FORMAT and formatter.datefmt is None \
            and formatter.converter is time.localtime and formatter.default_time_format == "%Y-%m-%d %H:%M:%S" \
            and formatter.default_msec_format == "%s,%03d" and type(formatter._style) is logging.PercentStyle:
        return handler, False
    return None


def _clock() -> tuple[float, float]:
    """``(created, msecs)`` read as a ``LogRecord`` of this Python reads them."""
    if _NS_CLOCK:
        ns = time.time_ns()
        created = ns / 1e9
        msecs = (ns % 1_000_000_000) // 1_000_000 + 0.0
        if msecs == 999.0 and int(created) != ns // 1_000_000_000:
            msecs = 0.0
        return created, msecs
    created = time.time()
    return created, int((created - int(created)) * 1000) + 0.0


class _SecondText:
    """The text of one second, made once: ``logging``'s local ``asctime`` and the JSON formatter's UTC time.

    Each cache is one ``(second, text)`` tuple, replaced whole, so loops in several
    threads never pair one second with another's text.
    """

    __slots__ = ("local", "utc")

    def __init__(self) -> None:
        self.local: tuple[int, str] = (-1, "")
        self.utc: tuple[int, str] = (-1, "")

    def local_second(self, created: float) -> str:
        """The local time of ``created``'s second as ``logging`` writes it, without the milliseconds."""
        second = int(created)
        cached = self.local  # read once: another thread may replace it meanwhile, never half of it
        if cached[0] != second:
            cached = self.local = (second, time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(created)))
        return cached[1]

    def asctime(self, created: float, msecs: float) -> str:
        return "%s,%03d" % (self.local_second(created), msecs)

    def iso_utc(self, created: float) -> str:
        # datetime.fromtimestamp rounds to the microsecond (half to even), isoformat then cuts to milliseconds.
        whole = int(created)  # a log's time is after 1970: int() is floor()
        micros = round((created - whole) * 1e6)
        if micros >= 1_000_000:
            whole += 1
            micros -= 1_000_000
        cached = self.utc
        if cached[0] != whole:
            cached = self.utc = (whole, datetime.fromtimestamp(whole, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S"))
        return "%s.%03d+00:00" % (cached[1], micros // 1000)


_SECOND = _SecondText()


_KNOWN_TEXT: dict[str, str] = {}  # the JSON of strings that repeat (methods, results, paths), bounded
_KNOWN_LIMIT = 512
_KNOWN_LENGTH = 256


def _json_text(value: str | None) -> str:
    """``value`` as ``json.dumps(value, ensure_ascii=False)`` writes it, from a cache for strings met before."""
    if value is None:
        return "null"
    found = _KNOWN_TEXT.get(value)
    if found is None:
        found = _json_string(value)
        if len(_KNOWN_TEXT) < _KNOWN_LIMIT and len(value) <= _KNOWN_LENGTH:  # client input: else encoded each time
            _KNOWN_TEXT[value] = found
    return found  # type: ignore[no-any-return]


def text_line(created: float, msecs: float, message: str) -> str:
    """An ``INFO`` record of ``mrtr.access`` as ``logging.Formatter(TEXT_FORMAT)`` formats it."""
    return f"{_SECOND.asctime(created, msecs)} INFO mrtr.access: {message}"


# -- the record ------------------------------------------------------------------------------


def _printable(text: str) -> str:
    """A client-chosen string fit for one log line: bounded, no control characters."""
    if len(text) > _TARGET_LIMIT:
        text = text[:_TARGET_LIMIT] + "..."
    return text if text.isprintable() else "".join(ch if ch.isprintable() else "?" for ch in text)


def _noted_text(notes: Mapping[str, Any]) -> str:
    """Noted fields as the text line ends with them: `` name=value`` each, a string quoted when it must be."""
    shown = []
    for name, value in notes.items():
        if value.__class__ is str:
            text = value if value and value.isprintable() and value.replace("_", "").replace("-", "").replace(
                ".", "").replace(":", "").replace("/", "").isalnum() else json.dumps(value)
        elif value is True or value is False:
            text = "true" if value else "false"
        else:
            text = repr(value)
        shown.append(f" {name}={text}")
    return "".join(shown)


def _json_value(value: Any) -> str:
    """A noted value as :class:`JsonFormatter` writes it (``json.dumps``, one line)."""
    if value.__class__ is str:
        return _json_string(value)
    if value is True or value is False:
        return "true" if value else "false"
    return float.__repr__(value) if value.__class__ is float else str(int(value))


_LINE_PARTS: dict[tuple[Any, ...], tuple[str, str]] = {}  # AccessRecord.message's table, emptied when full
_LINE_PARTS_LIMIT = 1024


class AccessRecord:
    """What one request did, filled in as it is answered, logged once by :meth:`finish`.

    A transport creates it when a request arrives, calls :meth:`request` with the parsed
    JSON-RPC message, :meth:`response` with the message it answers, and :meth:`finish`
    once the answer was written (or the request was abandoned). It also carries the
    request's trace span when the ``otel`` extra is installed (see :mod:`mrtr.transports.telemetry`).
    """

    __slots__ = ("transport", "http_method", "path", "method", "target", "round", "result", "code", "status",
                 "started", "span", "notes", "_done")

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
        self.notes: dict[str, Any] | None = None
        self._done = False

    def request(self, message: Mapping[str, Any]) -> None:
        """Note what the request asks for (and start its span)."""
        method = message.get("method")
        if not isinstance(method, str):
            return
        # Client input, like the target: bounded (the body may be megabytes of method name).
        self.method = method if len(method) <= _TARGET_LIMIT else method[:_TARGET_LIMIT] + "..."
        params = message.get("params")
        # Parsed messages hold dicts; the abstract check is for other callers, and costs more.
        is_mapping = params.__class__ is dict or isinstance(params, Mapping)
        member = _TARGET_MEMBER.get(method)
        if member is not None and is_mapping:
            value = params.get(member)  # type: ignore[union-attr]
            if isinstance(value, str):
                self.target = value if len(value) <= _TARGET_LIMIT else value[:_TARGET_LIMIT] + "..."
            if params.get("requestState") is None:  # type: ignore[union-attr]
                # A first request is round 1. A retry's round is inside the sealed token,
                # which the transport does not open, so it stays unknown here.
                self.round = 1
        if otel.ENABLED:
            meta = params.get("_meta") if is_mapping else None  # type: ignore[union-attr]
            self.span = otel.start_span(method, self.target, self.round, meta)

    def response(self, message: Mapping[str, Any]) -> None:
        """Note how the request was answered: its result type or its error code."""
        # Messages the server builds hold dicts: the exact type check spares ABCMeta a call per request.
        error = message.get("error")
        if error is not None and (error.__class__ is dict or isinstance(error, Mapping)):
            self.error(error.get("code"))
            return
        result = message.get("result")
        if result.__class__ is not dict and not isinstance(result, Mapping):
            self.result = "complete"
            return
        kind = result.get("resultType")
        if not isinstance(kind, str):
            kind = "complete"
        self.result = "tool_error" if kind == "complete" and result.get("isError") is True else kind

    def note(self, fields: Mapping[str, Any]) -> None:
        """Add fields a middleware noted for this request (:meth:`mrtr.server.pipeline.Incoming.note`).

        They follow the record's own fields, in the text line as ``name=value``, in the
        JSON line as members, and on the span as ``mrtr.<name>`` attributes. Names are
        lower-case identifiers none of the record's own fields use; values are strings,
        booleans or finite numbers (the pipeline checks both).
        """
        if self.notes is None:
            self.notes = dict(fields)
        else:
            self.notes.update(fields)

    def error(self, code: Any) -> None:
        """Note a JSON-RPC error answer (also for requests refused before dispatch)."""
        self.result = "error"
        self.code = code if isinstance(code, int) and not isinstance(code, bool) else None

    def fields(self, duration_ms: float) -> dict[str, Any]:
        """The record's fields as the JSON format writes them (``record.mrtr``), in their order."""
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
        if self.notes:
            fields.update(self.notes)
        return fields

    def message(self, duration_ms: float) -> str:
        """The access line's text: ``POST /mcp tools/call "onboard" input_required 200 3.1ms round=1``."""
        # Requests alike give lines alike but for the duration: the text around it is made once per
        # kind of line (a bounded table: the method, target and path are client input).
        key = (self.http_method, self.path, self.method, self.target, self.result, self.code, self.status, self.round)
        parts = _LINE_PARTS.get(key)
        if parts is None:
            parts = self._parts()
            # Path, method and target are client input (and callers may set them directly): a line with a
            # long one is made each time, never kept. Checked on a miss only.
            if all(part.__class__ is not str or len(part) <= _KNOWN_LENGTH for part in key):
                if len(_LINE_PARTS) >= _LINE_PARTS_LIMIT:
                    _LINE_PARTS.clear()
                _LINE_PARTS[key] = parts
        tenths = int(duration_ms * 10.0 + 0.5)  # one decimal, in integers (see finish)
        if self.notes:
            return f"{parts[0]}{tenths // 10}.{tenths % 10}{parts[1]}{_noted_text(self.notes)}"
        return f"{parts[0]}{tenths // 10}.{tenths % 10}{parts[1]}"

    def _parts(self) -> tuple[str, str]:
        """The line's text before and after its duration."""
        # Client input never breaks the line: no control characters, no line or paragraph separators.
        method = self.method
        if not method:
            method = "-"
        elif not method.isprintable():
            method = _printable(method)
        target = self.target
        if target is None:
            target = ""
        else:
            target = f" {_json_text(target) if target.isprintable() else json.dumps(target)}"
        code = "" if self.code is None else f" {self.code}"
        status = "" if self.status is None else f" {self.status}"
        round_ = "" if self.round is None else f" round={self.round}"
        if self.http_method is None:
            return f"{method}{target} {self.result or '-'}{code}{status} ", f"ms{round_}"
        path = self.path or ""
        if len(path) > _TARGET_LIMIT or not path.isprintable():
            path = _printable(path)
        return f"{self.http_method} {path} {method}{target} {self.result or '-'}{code}{status} ", f"ms{round_}"

    def json_line(self, created: float, message: str, duration_ms: float) -> str:
        """The record as :class:`JsonFormatter` formats it with :meth:`fields` (the same members, in order)."""
        target = self.target
        line = (f'{{"time": "{_SECOND.iso_utc(created)}", "level": "info", "logger": "mrtr.access", '
                f'"message": {_json_string(message)}, "transport": {_json_text(self.transport)}, '
                f'"method": {_json_text(self.method)}, '
                f'"target": {"null" if target is None else _json_string(target)}, '
                f'"result": {_json_text(self.result)}, "duration_ms": {float.__repr__(duration_ms)}')
        if self.http_method is not None:
            line += f', "http_method": {_json_text(self.http_method)}, "path": {_json_text(self.path)}'
        if self.code is not None:
            line += f', "code": {self.code:d}'
        if self.status is not None:
            line += f', "status": {self.status:d}'
        if self.round is not None:
            line += f', "round": {self.round:d}'
        if self.notes:
            line += "".join(f', "{name}": {_json_value(value)}' for name, value in self.notes.items())
        return line + "}"

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
        # Milliseconds to the microsecond by integer rounding: round(x, 3) and a float's "%.1f" each cost
        # more than the rest of the line (both go through the decimal conversion of a double).
        duration_ms = int((time.perf_counter() - self.started) * 1e6 + 0.5) / 1000.0
        if self.span is not None:
            otel.end_span(self.span, self.result, self.code, self.status, self.notes)
        if not ACCESS_LOGGER.isEnabledFor(logging.INFO):
            return
        sole = _sole_handler()
        if sole is None:
            ACCESS_LOGGER.info("%s", self.message(duration_ms), extra={"mrtr": self.fields(duration_ms)})
            return
        handler, as_json = sole
        created, msecs = _clock()
        message = self.message(duration_ms)
        if as_json:
            line = self.json_line(created, message, duration_ms) + handler.terminator
        else:
            # text_line, without its asctime call: the second's text, the milliseconds, the message
            line = "%s,%03d INFO mrtr.access: %s%s" % (_SECOND.local_second(created), msecs, message,
                                                       handler.terminator)
        handler.access_line(line)
