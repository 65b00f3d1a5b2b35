"""``mrtr call`` and ``mrtr list`` end to end: a real pseudo-terminal, piped input, real servers."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from mrtr.client.terminal import ArgumentError, parse_arguments

pytestmark = pytest.mark.slow  # starts processes (tests/conftest.py: the tiers)

REPO = Path(__file__).resolve().parents[2]
MRTR = [sys.executable, "-m", "mrtr"]
SERVER = f"{sys.executable} -m mrtr serve tests.client.app:server --stdio --log-level warning"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")
TIMEOUT = 30


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR")}
    env.update(extra)
    return env


def piped(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MRTR, *args], input=stdin, capture_output=True, text=True, cwd=REPO,
                          env=_env(), timeout=TIMEOUT, check=False)


# -- name=value ----------------------------------------------------------------------------------


def test_arguments_are_typed_by_the_input_schema():
    schema = {"properties": {"people": {"type": "integer"}, "ratio": {"type": "number"}, "vip": {"type": "boolean"},
                             "name": {"type": "string"}, "tags": {"type": "array"}, "when": {"type": ["string", "null"]}}}
    assert parse_arguments(["people=4", "ratio=0.5", "vip=yes", "name=42", "tags=[\"a\"]", "when=7"],
                           schema) == {"people": 4, "ratio": 0.5, "vip": True, "name": "42", "tags": ["a"],
                                       "when": "7"}
    open_schema = {**schema, "additionalProperties": True}  # names beyond the listed ones are welcome
    assert parse_arguments(["extra=3", "free=hello world"], open_schema) == {"extra": 3, "free": "hello world"}
    for bad in (["people=four"], ["vip=perhaps"], ["tags=[1"], ["novalue"]):
        with pytest.raises(ArgumentError):
            parse_arguments(bad, schema)


def test_an_unknown_argument_is_refused_with_the_tools_parameters():
    schema = {"type": "object", "properties": {"people": {"type": "integer", "description": "how many"}},
              "required": ["people"]}
    with pytest.raises(ArgumentError) as refused:
        parse_arguments(["people=2", "peple=3"], schema)
    assert "no argument 'peple'" in str(refused.value) and "people=<integer, required>: how many" in str(refused.value)
    done = piped("call", "--stdio", SERVER, "pair", "nonsense=1", stdin="")  # a tool without parameters
    assert done.returncode == 2 and "no argument 'nonsense'" in done.stderr and "(none)" in done.stderr


# -- piped standard input ------------------------------------------------------------------------


def test_piped_answers_fill_one_field_per_line():
    done = piped("call", "--stdio", SERVER, "pair", stdin="a@b.c\n2\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "a@b.c on pro\n"
    assert "\x1b[" not in done.stdout + done.stderr  # no colour, no bar
    assert "Your email?" in done.stderr and "1) free" in done.stderr


def test_piped_wrong_values_are_asked_again():
    done = piped("call", "--stdio", SERVER, "interview", "topic=owls", stdin="Ada\n7\ngreen\n4.5\n-1\n36\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Ada/green/36/owls"
    lines = done.stderr.splitlines()
    assert "  \"colour\": '7' is not one of the choices: enter a number from 1 to 3" in lines
    assert '  "age": expected a whole number, got "4.5"' in lines
    assert '  "age": expected at least 0, got -1' in lines


def test_piped_decline_and_end_of_input():
    declined = piped("call", "--stdio", SERVER, "ask_name", "tag=p", stdin="!decline\n")
    assert declined.stdout.strip() == "decline [p]"
    ended = piped("call", "--stdio", SERVER, "ask_name", "tag=q", stdin="")
    assert ended.stdout.strip() == "cancel [q]"


def test_structured_result_prints_as_json_and_errors_exit_1():
    done = piped("call", "--stdio", SERVER, "regional", "region=eu", "people=4", "dry_run=true")
    assert done.returncode == 0, done.stderr
    assert done.stdout == '{\n  "region": "eu",\n  "people": 4,\n  "dry_run": true\n}\n'
    failed = piped("call", "--stdio", SERVER, "fail")
    assert failed.returncode == 1 and "the kitchen is closed" in failed.stdout
    missing = piped("call", "--stdio", SERVER, "think")
    assert missing.returncode == 1 and "error -32021" in missing.stderr and "--sample-reply" in missing.stderr
    usage = piped("call", "--stdio", SERVER, "regional", "people=many")
    assert usage.returncode == 2 and "expected a whole number" in usage.stderr


def test_sampling_and_roots_from_flags():
    done = piped("call", "--stdio", SERVER, "--sample-reply", "hi", "--root", str(REPO), "think")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"hi / {REPO.as_uri()}"


def test_prompt_and_resource():
    prompt = piped("call", "--stdio", SERVER, "--prompt", "menu", "course=soup", stdin="yes\n")
    assert prompt.returncode == 0, prompt.stderr
    assert prompt.stdout == "A prompt that asks a question first.\nuser:\nSuggest a vegetarian soup.\n"
    resource = piped("call", "--stdio", SERVER, "--resource", "notes://secret", stdin="open\n")
    assert resource.stdout == "the secret\n"


@pytest.fixture
def http_server() -> Iterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([*MRTR, "serve", "tests.client.app:server", "--port", str(port)], cwd=REPO,
                               env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + TIMEOUT
    try:
        while True:
            try:
                urllib.request.urlopen(url, timeout=1)
            except urllib.error.HTTPError:
                break  # it answers
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the server did not start: {process.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
                time.sleep(0.05)
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stderr.close()  # type: ignore[union-attr]


def test_call_and_list_over_http(http_server):
    done = piped("call", http_server, "interview", "topic=http", stdin="Bo\n3\n40\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Bo/blue/40/http"
    listed = piped("list", http_server)
    assert listed.returncode == 0, listed.stderr
    assert "client-test 1.0.0" in listed.stdout
    assert "  regional - Arguments mirrored in Mcp-Param-* headers; returns structured content." in listed.stdout
    assert "    people=<integer, optional, default 1>" in listed.stdout
    assert "  menu - A prompt that asks a question first." in listed.stdout and "    course=<string, required>" in listed.stdout
    assert "  notes://secret - A resource behind a question." in listed.stdout


def test_usage_errors():
    assert piped("call").returncode == 2
    not_url = piped("call", "localhost:8000", "x")
    assert not_url.returncode == 2 and "--stdio" in not_url.stderr
    bad_port = piped("call", "http://127.0.0.1:99999mcp", "x")
    assert bad_port.returncode == 2 and "not a usable MCP endpoint URL" in bad_port.stderr
    assert "Traceback" not in bad_port.stderr
    refused = piped("list", "http://127.0.0.1:9/mcp")
    assert refused.returncode == 1 and "error -32603" in refused.stderr


# -- a real pseudo-terminal ------------------------------------------------------------------


class Terminal:
    """``mrtr call`` on a pseudo-terminal: read what it shows, type answers."""

    def __init__(self, *args: str) -> None:
        self.master, slave = pty.openpty()
        self.process = subprocess.Popen([*MRTR, *args], stdin=slave, stdout=slave, stderr=slave, cwd=REPO,
                                        env=_env(TERM="xterm-256color", COLUMNS="120"), close_fds=True)
        os.close(slave)
        self.raw = b""
        self.seen = 0  # how much of the plain text has been matched already

    @property
    def text(self) -> str:
        return ANSI.sub("", self.raw.decode("utf-8", "replace"))

    def _pump(self, deadline: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            return False
        try:
            chunk = os.read(self.master, 65536)
        except OSError:  # the other side closed
            return False
        self.raw += chunk
        return bool(chunk)

    def expect(self, wanted: str) -> None:
        deadline = time.monotonic() + TIMEOUT
        while True:
            found = self.text.find(wanted, self.seen)
            if found >= 0:
                self.seen = found + len(wanted)
                return
            if time.monotonic() > deadline or (not self._pump(deadline) and self.process.poll() is not None):
                raise AssertionError(f"never saw {wanted!r}; the terminal showed:\n{self.text}")

    def type(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\r")

    def finish(self) -> int:
        deadline = time.monotonic() + TIMEOUT
        while self.process.poll() is None and time.monotonic() < deadline:
            self._pump(deadline)
        while self._pump(time.monotonic() + 0.2):
            pass
        os.close(self.master)
        return self.process.wait(timeout=TIMEOUT)


def test_terminal_form_with_a_wrong_value_asked_again():
    term = Terminal("call", "--stdio", SERVER, "interview", "topic=tty")
    term.expect("Your name (tty)?")
    term.expect("!decline to decline")
    term.expect("name>")
    term.type("Ada")
    term.expect("1) red")
    term.expect("colour>")
    term.type("9")
    term.expect("\"colour\": '9' is not one of the choices")
    term.expect("colour>")
    term.type("1")
    term.expect("age (integer, required, at least 0)")
    term.expect("age>")
    term.type("old")
    term.expect('"age": expected a whole number, got "old"')  # the field named, as in the schema's own checks
    term.expect("age>")
    term.type("36")
    term.expect("Ada/red/36/tty")
    assert term.finish() == 0
    assert b"\x1b[" in term.raw  # a terminal gets colour


def test_terminal_decline():
    term = Terminal("call", "--stdio", SERVER, "ask_name", "tag=tty")
    term.expect("name>")
    term.type("!decline")
    term.expect("decline [tty]")
    assert term.finish() == 0


def test_terminal_progress_bar():
    term = Terminal("call", "--stdio", SERVER, "count", "steps=3")
    term.expect("counted 3")
    assert term.finish() == 0
    assert "step" in term.text  # the bar's description, drawn (and then removed) on the terminal


@pytest.mark.parametrize(("progress", "total"), [
    (1.0, 2.6e306), (1e308, 1e308), (2.6e306, 1.0), (1.0, 1e-320), (-1e308, 5.0), (1.0, 0.0), (3.0, -2.0),
    (1e300, None), (float("nan"), 4.0), (2.0, float("inf")),
])
def test_any_progress_value_is_drawn(progress, total):
    from io import StringIO

    from rich.console import Console

    from mrtr.client.terminal import Terminal as Answerers
    from mrtr.client.terminal import bar_values

    terminal = Answerers(stdin=StringIO(), console=Console(file=StringIO(), force_terminal=True, width=80),
                         interactive=True)
    try:
        terminal.progress(progress, total, "working")
        assert terminal._progress is not None
        terminal._progress.refresh()  # draws the bar: it raised OverflowError on such values
    finally:
        terminal.pause()
    completed, shown = bar_values(progress, total)
    assert shown is None or 0 < shown <= 1e15
    assert 0 <= completed <= (shown if shown is not None else 1e15)


def test_url_mode_prints_the_address_and_waits():
    done = piped("call", "--stdio", SERVER, "visit", stdin="\n")
    assert done.returncode == 0, done.stderr
    assert "Open this address: https://example.com/login" in done.stderr
    assert done.stdout.strip() == "url accept"
    refused = piped("call", "--stdio", SERVER, "visit", stdin="!decline\n")
    assert refused.stdout.strip() == "url decline"


# -- what surrounds the questions ----------------------------------------------------------------


def test_a_stdio_servers_log_stays_off_the_questions(tmp_path):
    chatty = f"{sys.executable} -m mrtr serve tests.client.app:server --stdio"  # logs every request at info
    done = piped("call", "--stdio", chatty, "ask_name", "tag=x", stdin="Ada\n")
    assert done.returncode == 0, done.stderr
    assert "mrtr.access" not in done.stderr and "registered" not in done.stderr
    kept = tmp_path / "server.log"
    done = piped("call", "--server-log", str(kept), "--stdio", chatty, "ask_name", "tag=x", stdin="Ada\n")
    assert done.returncode == 0 and "mrtr.access: tools/call" in kept.read_text()
    failing = piped("call", "--stdio", f"{sys.executable} -m mrtr serve no.such.module:app --stdio", "x")
    assert failing.returncode == 1
    assert "the server's log ended with:" in failing.stderr and "no.such" in failing.stderr


def test_a_404_names_the_usual_path():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    import threading

    def not_found() -> None:
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return  # the test closed the socket: done
            with connection:
                connection.recv(65536)
                connection.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\nConnection: close\r\n\r\nnot found")

    threading.Thread(target=not_found, daemon=True).start()
    done = piped("list", f"http://127.0.0.1:{port}/")
    server.close()
    assert done.returncode == 1
    assert f"MCP servers usually answer on the path /mcp: try http://127.0.0.1:{port}/mcp" in done.stderr
