"""Access lines that skip ``logging``: the same bytes, written in batches, never lost, never hidden.

The line :class:`mrtr.transports.logs.AccessRecord` writes without ``logging`` (when the
handler ``configure`` installs is the only one listening) must be the line ``logging``
would have written through that handler, for any record; lines wait for an idle loop
and are written when the transport stops; anyone else listening sends every record back
through ``logging``.
"""

from __future__ import annotations

import io
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from unittest import mock

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mrtr.transports import logs
from mrtr.transports.logs import ACCESS_LOGGER, AccessRecord, JsonFormatter, LineHandler, TEXT_FORMAT

from .conftest import examples, until


@contextmanager
def only_handler(fmt: str = "text") -> Iterator[tuple[LineHandler, io.StringIO]]:
    """The root logger with nothing but a LineHandler on a StringIO (pytest's own handlers set aside)."""
    stream = io.StringIO()
    handler = LineHandler(stream)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], ACCESS_LOGGER.level
    root.handlers[:] = [handler]
    ACCESS_LOGGER.setLevel(logging.INFO)
    try:
        yield handler, stream
    finally:
        root.handlers[:] = saved_handlers
        ACCESS_LOGGER.setLevel(saved_level)


def record(transport: str = "http", *, method: str | None = "tools/call", target: str | None = "echo",
           path: str | None = "/mcp", result: str | None = "complete", code: int | None = None,
           status: int | None = 200, round_: int | None = 1) -> AccessRecord:
    entry = AccessRecord(transport, "POST" if transport == "http" else None, path if transport == "http" else None)
    entry.method, entry.target, entry.result, entry.code, entry.status, entry.round = (
        method, target, result, code, None if transport != "http" else status, round_)
    return entry


def lines(stream: io.StringIO) -> list[str]:
    return stream.getvalue().split("\n")[:-1]


class PassAll(logging.Filter):
    """A filter that keeps every record: its presence alone sends records through ``logging``."""


@contextmanager
def frozen_clock(created: float, elapsed: float) -> Iterator[None]:
    """``time.time()`` (and ``time_ns``) fixed at ``created``; ``perf_counter`` advancing ``elapsed`` per call."""
    ticks = iter(range(1_000_000))
    with mock.patch.object(time, "time", lambda: created), \
            mock.patch.object(time, "time_ns", lambda: int(created * 1e9)), \
            mock.patch.object(time, "perf_counter", lambda: next(ticks) * elapsed):
        yield


texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fmt=st.sampled_from(["text", "json"]), transport=st.sampled_from(["http", "stdio"]),
       method=st.none() | st.sampled_from(["tools/call", "prompts/get", "tools/list"]) | texts,
       target=st.none() | texts | st.text(min_size=190, max_size=260),
       path=st.none() | texts,
       result=st.none() | st.sampled_from(["complete", "input_required", "tool_error", "error", "aborted", "accepted"]),
       code=st.none() | st.integers(-40000, 40000), status=st.none() | st.integers(100, 599),
       round_=st.none() | st.just(1), created=st.floats(1e9, 4e9), elapsed=st.floats(0, 100))
def test_the_line_without_logging_is_the_line_logging_writes(fmt, transport, method, target, path, result, code,
                                                             status, round_, created, elapsed):
    with only_handler(fmt) as (handler, stream), frozen_clock(created, elapsed):
        fields = dict(method=method, target=target, path=path, result=result, code=code, status=status,
                      round_=round_)
        with mock.patch.object(logging.Logger, "makeRecord", side_effect=AssertionError("a LogRecord was made")):
            record(transport, **fields).finish()  # no LogRecord: written by the handler directly
        ACCESS_LOGGER.addFilter(PassAll())
        try:
            record(transport, **fields).finish()  # through logging
        finally:
            ACCESS_LOGGER.filters.clear()
    direct, logged = lines(stream)
    assert direct == logged
    if fmt == "json":
        assert logs.json.loads(direct)["logger"] == "mrtr.access"
        assert len(direct.splitlines()) == 1  # a line separator the client sent is escaped too
    else:  # whatever the client sent, one line of printable text
        assert direct.isprintable()


@pytest.mark.parametrize("through_logging", [False, True])
def test_a_json_line_holds_no_line_separator_whatever_the_client_named(through_logging):
    name = 'x\u2028{"level": "error"}\u2029y\x85z'
    with only_handler("json") as (handler, stream):
        if through_logging:
            ACCESS_LOGGER.addFilter(PassAll())
        try:
            record(target=name, path="/mcp\u2028").finish()
        finally:
            ACCESS_LOGGER.filters.clear()
        logging.getLogger("mrtr.test").warning("a message with %s", name)
    written = stream.getvalue()
    assert not {"\x85", "\u2028", "\u2029"} & set(written)
    access, other = written.splitlines()
    assert logs.json.loads(access)["target"] == name and name in logs.json.loads(other)["message"]


@given(st.floats(1e9, 4e9) | st.sampled_from([1_700_000_000.9999996, 1_700_000_000.9995, 1_700_000_000.0005]))
def test_the_time_of_a_line_is_the_formatters_time(created):
    formatted = logging.Formatter(TEXT_FORMAT)
    entry = logging.LogRecord("mrtr.access", logging.INFO, __file__, 1, "m", (), None)
    entry.created, entry.msecs = created, int((created - int(created)) * 1000) + 0.0
    assert logs.text_line(created, entry.msecs, "m") == formatted.format(entry)
    iso = datetime.fromtimestamp(created, timezone.utc).isoformat(timespec="milliseconds")
    assert logs._SECOND.iso_utc(created) == iso


def test_a_lines_clock_is_the_log_records_clock():
    for created in (1_700_000_000.25, 1_700_000_000.9999996, 1_700_000_001.0):
        with mock.patch.object(time, "time", lambda: created), \
                mock.patch.object(time, "time_ns", lambda: int(created * 1e9)):
            entry = logging.LogRecord("mrtr.access", logging.INFO, __file__, 1, "m", (), None)
            assert logs._clock() == (entry.created, entry.msecs)


@pytest.mark.parametrize("listener", ["access logger", "mrtr logger", "root logger"])
def test_a_handler_of_your_own_gets_every_record(listener):
    mine: list[logging.LogRecord] = []

    class Mine(logging.Handler):
        def emit(self, entry: logging.LogRecord) -> None:
            mine.append(entry)

    target = {"access logger": ACCESS_LOGGER, "mrtr logger": logging.getLogger("mrtr"),
              "root logger": logging.getLogger()}[listener]
    with only_handler() as (_, stream):
        handler = Mine()
        target.addHandler(handler)
        try:
            for number in range(5):
                record(target=f"tool-{number}").finish()
        finally:
            target.removeHandler(handler)
    assert [entry.mrtr["target"] for entry in mine] == [f"tool-{n}" for n in range(5)]  # type: ignore[attr-defined]
    assert len(lines(stream)) == 5  # and the stderr handler still writes each


def test_another_formatter_is_used_as_it_is():
    with only_handler() as (handler, stream):
        handler.setFormatter(logging.Formatter("%(levelname)s|%(message)s"))
        record().finish()
    (line,) = lines(stream)
    assert line.startswith("INFO|POST /mcp tools/call \"echo\" complete 200 ")


def test_a_formatter_changed_in_place_is_used_from_the_next_line():
    # The same formatter object, its clock changed after a first line: the next line is logging's own.
    with only_handler() as (handler, stream):
        record(target="first").finish()
        handler.formatter.converter = lambda *_: time.gmtime(0)  # type: ignore[union-attr]
        record(target="second").finish()
    first, second = lines(stream)
    assert '"first"' in first and not first.startswith("1970-01-01 00:00:00,")
    assert '"second"' in second and second.startswith("1970-01-01 00:00:00,")


async def test_lines_wait_for_the_idle_loop_and_none_is_lost_when_it_stops():
    with only_handler() as (_, stream):
        stop = logs.write_behind()
        try:
            for number in range(3):
                record(target=f"t{number}").finish()
            assert stream.getvalue() == ""  # no checkpoint yet: the lines wait
            await until(lambda: len(lines(stream)) == 3)  # the loop went idle: one write
            for number in range(3, 6):
                record(target=f"t{number}").finish()
            assert len(lines(stream)) == 3
        finally:
            stop()  # the transport stops: what waits is written at once
        assert [line.split('"')[1] for line in lines(stream)] == [f"t{n}" for n in range(6)]
        record(target="after").finish()  # nothing defers now: written at once
        assert lines(stream)[-1].split('"')[1] == "after"


async def test_a_record_through_logging_comes_after_the_lines_before_it():
    with only_handler() as (_, stream):
        stop = logs.write_behind()
        try:
            record(target="first").finish()
            logging.getLogger("mrtr").warning("something happened")
            record(target="third").finish()
        finally:
            stop()
    first, warning, third = lines(stream)
    assert '"first"' in first and warning.endswith("WARNING mrtr: something happened") and '"third"' in third


async def test_many_waiting_lines_are_written_without_waiting_for_the_loop(monkeypatch):
    monkeypatch.setattr(logs, "FLUSH_BYTES", 2000)
    with only_handler() as (_, stream):
        stop = logs.write_behind()
        try:
            for _ in range(40):  # about 80 characters each, never a checkpoint
                record().finish()
            assert 2000 <= len(stream.getvalue()) < 2000 + 200
        finally:
            stop()
        assert len(lines(stream)) == 40


async def test_a_loop_that_never_idles_still_writes_its_lines(monkeypatch):
    monkeypatch.setattr(logs, "FLUSH_INTERVAL", 0.05)
    with only_handler() as (_, stream):
        stop = logs.write_behind()
        try:
            record(target="early").finish()
            started = time.monotonic()
            while time.monotonic() - started < 0.06:
                await trio.lowlevel.cancel_shielded_checkpoint()  # busy, never idle
            assert stream.getvalue() == ""
            record(target="late").finish()  # the first line waited past the interval: both go
            assert len(lines(stream)) == 2
        finally:
            stop()


def test_lines_still_waiting_when_the_run_ends_are_written():
    with only_handler() as (_, stream):
        async def main() -> None:
            logs.write_behind()  # never stopped: the end of the run is the end of the deferral
            record(target="last").finish()
            assert stream.getvalue() == ""

        trio.run(main)
        assert '"last"' in lines(stream)[0]
        record(target="after").finish()  # the next run's loop, or none: nothing defers now
        assert '"after"' in lines(stream)[1]


def test_a_loop_with_an_autojumping_clock_is_idle_when_nothing_runs():
    # The loop's wait for I/O has no timeout there (the clock jumps instead), yet nothing is left to run.
    with only_handler() as (_, stream):
        async def main() -> None:
            stop = logs.write_behind()
            try:
                record(target="t").finish()
                assert stream.getvalue() == ""
                await trio.sleep(3600)  # the clock jumps once the loop is idle: the line went out before
                assert len(lines(stream)) == 1
            finally:
                stop()

        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_another_threads_loop_writes_at_once():
    with only_handler() as (_, stream):
        async def main() -> None:
            stop = logs.write_behind()
            try:
                await trio.to_thread.run_sync(lambda: record(target="thread").finish())
                assert len(lines(stream)) == 1  # not this loop's line: never left waiting
            finally:
                stop()

        trio.run(main)


def test_a_broken_stream_loses_lines_not_the_server():
    class Broken(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError("stderr is gone")

    with only_handler() as (handler, _):
        handler.setStream(Broken())
        record().finish()  # written at once: the failure stays in the handler

        async def main() -> None:
            stop = logs.write_behind()
            record().finish()
            await until(lambda: not handler._waiting)  # the deferred write failed, the loop went on
            stop()

        trio.run(main)
