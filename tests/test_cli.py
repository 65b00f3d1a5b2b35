"""The ``mrtr`` command line: loading the application, usage errors, help, the HTTP banner."""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import httpx
import pytest
import trio

from mrtr.cli import main
from mrtr.cli.app import load_server
from mrtr.cli.commands import COMMANDS, build_parser
from mrtr.cli.serve import banner, curl_example
from mrtr.core.mirroring import encode_value
from mrtr.server import Header, Server

from .conftest import meta
from .stdio_server import server as fixture_server
from .test_stdio import REPO, request, stdio_server
from .wire_schema import validate_message


@pytest.fixture
def isolated_imports(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Run in an empty temporary directory, restoring sys.path and sys.modules afterwards."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if name.startswith("cli_app_"):
            del sys.modules[name]


def test_unknown_module_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "nosuchmodule:x"]) == 2
    err = capsys.readouterr().err
    assert 'could not import module "nosuchmodule"' in err
    assert "Traceback" not in err


def test_unknown_attribute_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "tests.stdio_server:notthere"]) == 2
    assert 'module "tests.stdio_server" has no attribute "notthere"' in capsys.readouterr().err
    assert main(["serve", "tests.stdio_server:server.nested.deeper"]) == 2
    assert '"tests.stdio_server:server" has no attribute "nested"' in capsys.readouterr().err


@pytest.mark.parametrize("attribute", ["not_a_server", "echo"])
def test_an_attribute_that_is_not_a_server_is_a_usage_error(attribute: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", f"tests.stdio_server:{attribute}"]) == 2
    assert "not a mrtr.server.Server" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["serve", "tests.stdio_server"],  # no attribute
    ["serve", "--stdio", "--port", "9000"],  # HTTP options with --stdio
    ["serve", "--port", "70000"],
    ["serve", "--port", "-1"],
    ["serve", "--workers", "0"],
    ["serve", "--task-ttl", "0"],
    ["serve", "--task-ttl", "soon"],
    ["serve", "--no-such-option"],
    [],  # no command
])
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err.strip()
    assert captured.out == ""


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "serve" in capsys.readouterr().out
    assert main(["serve", "--help"]) == 0
    out = capsys.readouterr().out
    for expected in ("MODULE:ATTRIBUTE", "--host", "--port", "--workers", "--stdio", "/mcp",
                     "mrtr.examples.server:server"):
        assert expected in out


def test_the_current_directory_is_importable(isolated_imports: Path) -> None:
    (isolated_imports / "cli_app_ok.py").write_text(
        "from mrtr.server import Server\n"
        "class Holder:\n"
        "    server = Server('from-cwd', secret=b'k' * 32)\n"
    )
    loaded = load_server("cli_app_ok:Holder.server")
    assert isinstance(loaded, Server) and loaded.name == "from-cwd"


def test_an_app_that_fails_to_import_exits_1_with_its_traceback(
    isolated_imports: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (isolated_imports / "cli_app_broken.py").write_text("raise RuntimeError('boom at import')\n")
    assert main(["serve", "cli_app_broken:server"]) == 1
    err = capsys.readouterr().err
    assert "RuntimeError: boom at import" in err and "Traceback" in err
    # A missing dependency inside the app is its failure, not an unknown app module.
    (isolated_imports / "cli_app_needs.py").write_text("import cli_app_nowhere_to_be_found\n")
    assert main(["serve", "cli_app_needs:server"]) == 1
    assert "cli_app_nowhere_to_be_found" in capsys.readouterr().err


def test_banner_shows_the_url_and_a_complete_curl_call() -> None:
    text = banner(fixture_server, "127.0.0.1", 8123, 2)
    assert "http://127.0.0.1:8123/mcp" in text
    assert "2 workers" in text
    assert "requestState" in text and "inputResponses" in text
    command = text[text.index("curl"):text.index("\nIf the answer")]
    words = shlex.split(command.replace("\\\n", " "))
    assert words[0] == "curl" and "http://127.0.0.1:8123/mcp" in words
    headers = {words[i + 1].split(":", 1)[0].lower(): words[i + 1].split(":", 1)[1].strip()
               for i, word in enumerate(words) if word == "-H"}
    assert headers == {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "echo",
    }
    body = json.loads(words[words.index("-d") + 1])
    assert body["method"] == "tools/call"
    assert body["params"]["name"] == "echo"
    assert body["params"]["arguments"] == {"text": "example"}
    assert body["params"]["_meta"] == meta({"elicitation": {}})


def test_curl_example_mirrors_header_parameters_and_handles_no_tools() -> None:
    server = Server("headers", secret=b"k" * 32)

    @server.tool
    def forecast(region: Annotated[str, Header("Region")], days: int) -> str:
        return f"{region}:{days}"

    words = shlex.split(curl_example(server, "http://[::1]:9/mcp").replace("\\\n", " "))
    assert "Mcp-Param-Region: example" in words
    assert json.loads(words[words.index("-d") + 1])["params"]["arguments"] == {"region": "example", "days": 1}
    empty = curl_example(Server("empty", secret=b"k" * 32), "http://127.0.0.1:9/mcp")
    assert "Mcp-Method: server/discover" in empty and '"method":"server/discover"' in empty


def test_curl_example_sends_values_a_header_cannot_carry_plain_in_the_base64_form() -> None:
    server = Server("headers", secret=b"k" * 32)

    @server.tool(input_schema={"type": "object", "required": ["city"], "properties": {
        "city": {"type": "string", "default": "Zürich", "x-mcp-header": "City"}}})
    def météo(city: str) -> str:
        return city

    words = shlex.split(curl_example(server, "http://127.0.0.1:9/mcp").replace("\\\n", " "))
    headers = dict(words[i + 1].split(": ", 1) for i, word in enumerate(words) if word == "-H")
    assert headers["Mcp-Name"] == encode_value("météo") != "météo"
    assert headers["Mcp-Param-City"] == encode_value("Zürich") == "=?base64?WsO8cmljaA==?="


@pytest.mark.slow
async def test_python_dash_m_mrtr_help() -> None:
    with trio.fail_after(15):
        done = await trio.run_process([sys.executable, "-m", "mrtr", "serve", "--help"], cwd=REPO,
                                      capture_stdout=True, capture_stderr=True)
    assert done.returncode == 0
    assert b"--stdio" in done.stdout


@pytest.mark.slow
async def test_without_an_app_the_example_server_is_served() -> None:
    with trio.fail_after(15):
        async with stdio_server(app=None) as server:
            listed = await server.ask(request(1, "tools/list"), "ListToolsResult")
            assert "onboard" in {tool["name"] for tool in listed["result"]["tools"]}
            assert await server.finish() == 0


@pytest.mark.slow
async def test_stdio_usage_error_in_a_subprocess_writes_nothing_to_stdout() -> None:
    with trio.fail_after(15):
        done = await trio.run_process(
            [sys.executable, "-m", "mrtr", "serve", "--stdio", "nosuchmodule:x"], cwd=REPO,
            stdin=subprocess.DEVNULL, capture_stdout=True, capture_stderr=True, check=False,
        )
    assert done.returncode == 2
    assert done.stdout == b""
    assert b'could not import module "nosuchmodule"' in done.stderr


SERVING = re.compile(rb"serving MCP on http://127\.0\.0\.1:(\d+)/mcp")


@pytest.mark.slow
async def test_http_serve_on_port_0_names_the_bound_port_answers_and_stops_on_sigint() -> None:
    # Port 0: the system picks a free port when the server binds, and the server names it in
    # its log line, which it writes once the socket is listening; no port is probed first.
    command = [sys.executable, "-m", "mrtr", "serve", "tests.stdio_server:server", "--port", "0"]
    stderr, stdout = bytearray(), bytearray()
    serving = trio.Event()
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            process = await trio.lowlevel.open_process(
                command, cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )

            async def collect(stream: trio.abc.ReceiveStream, into: bytearray) -> None:
                while data := await stream.receive_some(65536):
                    into += data
                    if SERVING.search(stderr):
                        serving.set()
                serving.set()  # the stream ended: wake the test so it can report why

            nursery.start_soon(collect, process.stderr, stderr)
            nursery.start_soon(collect, process.stdout, stdout)
            try:
                await serving.wait()
                found = SERVING.search(stderr)
                assert found, stderr.decode()
                port = int(found.group(1))
                assert port != 0
                body = request("d1", "server/discover")
                headers = {
                    "Content-Type": "application/json",
                    "Accept": "application/json, text/event-stream",
                    "MCP-Protocol-Version": "2026-07-28",
                    "Mcp-Method": "server/discover",
                }
                async with httpx.AsyncClient() as client:
                    answer = await client.post(f"http://127.0.0.1:{port}/mcp", json=body, headers=headers)
                assert answer.status_code == 200, answer.text
                message = answer.json()
                validate_message(message, result_def="DiscoverResult")
                assert message["id"] == "d1"
                process.send_signal(signal.SIGINT)
                assert await process.wait() == 0, stderr.decode()
            finally:
                if process.returncode is None:
                    process.kill()
                    with trio.CancelScope(shield=True):
                        await process.wait()
    text = stderr.decode()
    assert "curl" in text and "Mcp-Name: echo" in text
    assert "at http://127.0.0.1:PORT/mcp" in text and "http://127.0.0.1:0/" not in text
    assert stdout == b""  # HTTP mode keeps stdout free for other tools


def test_no_access_log_silences_the_access_logger_only():
    import logging

    from mrtr.cli import serve
    from mrtr.cli.commands import build_parser
    from mrtr.transports.logs import ACCESS_LOGGER

    assert build_parser().parse_args(["serve"]).access_log is True
    args = build_parser().parse_args(["serve", "--no-access-log"])
    assert args.access_log is False
    root_handlers, level = list(logging.getLogger().handlers), ACCESS_LOGGER.level
    try:
        serve.configure_logging("info", "text", args.access_log)
        assert not ACCESS_LOGGER.isEnabledFor(logging.INFO)
        assert logging.getLogger("mrtr.http").isEnabledFor(logging.INFO)
    finally:
        ACCESS_LOGGER.setLevel(level)
        for handler in logging.getLogger().handlers:
            if handler not in root_handlers:
                logging.getLogger().removeHandler(handler)


def test_task_flags_go_to_the_servers_running_and_win_over_its_constructor(
        monkeypatch: pytest.MonkeyPatch, isolated_imports: Path, caplog: pytest.LogCaptureFixture) -> None:
    import logging

    import mrtr.transports.http as http

    (isolated_imports / "cli_app_tasks.py").write_text(
        "from mrtr import Step\n"
        "from mrtr.server import Server\n"
        "server = Server('tasks-cli', secret=b'c' * 32, tasks_url='sqlite:///never-opened.sqlite3', task_lease=9)\n"
        "@server.tool(task='required')\n"
        "def job():\n"
        "    yield Step(str, 'x')\n"
        "    return 'done'\n"
    )
    served: list = []
    monkeypatch.setattr(http, "run_http", lambda dispatcher, *args, **options: served.append(dispatcher))
    root_handlers = list(logging.getLogger().handlers)
    try:
        assert main(["serve", "cli_app_tasks:server", "--tasks", "memory:", "--task-lease", "2", "--task-ttl", "none"]) == 0
    finally:
        for handler in logging.getLogger().handlers:
            if handler not in root_handlers:
                logging.getLogger().removeHandler(handler)
    (dispatcher,) = served
    server = sys.modules["cli_app_tasks"].server
    assert dispatcher.serves("tools/call") and dispatcher.header_parameters("job") == server.header_parameters("job")

    async def check() -> None:
        async with dispatcher.running():
            assert server.tasks.store.url == "memory:" and server.tasks.lease == 2.0 and server.tasks.ttl_ms is None
        assert server.tasks is None

    trio.run(check)
    assert not (isolated_imports / "never-opened.sqlite3").exists()


def test_the_listing_says_where_2025_calls_live(monkeypatch: pytest.MonkeyPatch) -> None:
    """Over HTTP, with the 2025 era: recorded in a shared store (they survive the process), or in it only."""
    from mrtr.cli.serve import inventory

    for name in ("MRTR_STORE", "MRTR_TASKS"):
        monkeypatch.delenv(name, raising=False)
    server = Server("listed", secret=b"k" * 32)
    lines = inventory(server, http=True).splitlines()
    assert lines[-1] == "  2025 calls: in this process only (--store sqlite:///... or redis://... lets them survive it)"
    assert inventory(server, "memory:", http=True).splitlines()[-1] == lines[-1]
    shared = inventory(server, "redis://:secret@redis.internal:6379/0", http=True).splitlines()[-1]
    assert shared == ("  2025 calls: recorded in redis://:***@redis.internal:6379/0 (another process adopts a call "
                      "whose own stops)")
    assert "2025 calls" not in inventory(server, "sqlite:///calls.sqlite3")  # stdio: no line
    assert "2025 calls" not in inventory(Server("modern", secret=b"k" * 32, eras="modern"), http=True)


# -- each command loads its own module alone -------------------------------------------------

COMMAND_MODULES = ("call", "check", "config_files", "dev", "goose_yaml", "hosts", "install", "jsonc", "proxy", "reload",
                   "serve")
"""The modules of mrtr.cli that hold a command or what one command alone needs."""

LOADS = {
    "--help": set(),
    "serve": {"serve"},
    "proxy": {"proxy", "serve"},  # it serves as mrtr serve does
    "call": {"call"}, "list": {"call"}, "logout": {"call"},
    "check-tasks": {"check", "serve"},  # it takes serve's --store option
    "install": {"install", "config_files", "goose_yaml", "hosts", "jsonc"},
    "uninstall": {"install", "config_files", "goose_yaml", "hosts", "jsonc"},
    "dev": {"dev", "serve"},  # its defaults are serve's
}


@contextlib.contextmanager
def command_modules_unloaded() -> Iterator[None]:
    """The command modules out of ``sys.modules`` (and off ``mrtr.cli``), put back on the way out."""
    import mrtr.cli as package

    names = [f"mrtr.cli.{module}" for module in COMMAND_MODULES]
    saved = {name: sys.modules.pop(name) for name in names if name in sys.modules}
    attributes = {module: package.__dict__.pop(module) for module in COMMAND_MODULES if module in package.__dict__}
    try:
        yield
    finally:
        for name in names:
            sys.modules.pop(name, None)
            package.__dict__.pop(name.rpartition(".")[2], None)
        sys.modules.update(saved)
        package.__dict__.update(attributes)


@pytest.mark.parametrize("command", list(LOADS))
def test_a_command_loads_its_own_module_alone(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    words = [command] if command.startswith("-") else [command, "--help"]
    with command_modules_unloaded():
        assert main(words) == 0
        loaded = {module for module in COMMAND_MODULES if f"mrtr.cli.{module}" in sys.modules}
    assert "usage: mrtr" in capsys.readouterr().out
    assert loaded == LOADS[command]


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return next(action.choices for action in parser._actions if isinstance(action, argparse._SubParsersAction))


@pytest.mark.parametrize("words", [["--help"], [], ["bogus"], *([name] for name in COMMANDS)])
def test_the_parser_built_for_one_command_is_the_full_one_for_it(words: list[str]) -> None:
    full, lazy = build_parser(), build_parser(words)
    assert lazy.format_help() == full.format_help()  # every command listed, with its summary
    assert list(_subcommands(lazy)) == list(COMMANDS) == list(_subcommands(full))
    for name in words:
        if name in COMMANDS:
            assert _subcommands(lazy)[name].format_help() == _subcommands(full)[name].format_help()
            assert COMMANDS[name].summary in " ".join(full.format_help().split())
