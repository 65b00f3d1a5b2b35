"""A URL-mode elicitation as a person meets it in ``mrtr call``: refused, or shown with its host and warnings.

A hostile server (real HTTP on loopback, ``tests/client/hostile.py``) asks for a group of
URLs in one round; ``mrtr call`` runs in a process with piped answers, and the server
records what the client answered for each. ``javascript:``, ``file:``, ``data:`` and
plain http to another machine are never offered (declined); an address that is offered
shows its host on a line of its own, in Unicode and punycode for an international name,
and says what may deceive: a user name before ``@``, a look-alike in Cyrillic letters,
an invisible character.
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from rich.console import Console

from mrtr import ElicitURL
from mrtr.client import ElicitationRequest
from mrtr.client.addresses import inspect_address
from mrtr.client.terminal import Terminal

from ..wire_schema import RESULT_DEFS, validate_message
from .conftest import check_sent
from .hostile import result, send_json, serve_http

REPO = Path(__file__).resolve().parents[2]

REFUSED = {
    "script": "javascript:alert(document.cookie)",
    "file": "file:///etc/passwd",
    "data": "data:text/html,<script>alert(1)</script>",
    "plain": "http://evil.example/login",
    "relative": "/login",
    "backslash": "https://evil.example\\@accounts.example.com/",
    "newline": "https://accounts.exa\nmple.com/",
}
OFFERED = {
    "fine": "https://accounts.example.com/login",
    "userinfo": "https://accounts.example.com@evil.example/login",
    "cyrillic": "https://аррӏе.com/signin",  # а р р ӏ е: Cyrillic
    "mixed": "https://аpple.com/signin",  # a Cyrillic а, then Latin
    "invisible": "https://goo\u200bgle.com/",
    "loopback": "http://127.0.0.1:8765/callback",
}


# -- the rule and what it reads --------------------------------------------------------------------


@pytest.mark.parametrize("name", list(REFUSED))
def test_what_is_not_https_is_refused(name):
    assert inspect_address(REFUSED[name]).refused is not None


def test_what_is_offered_is_read_for_what_may_deceive():
    fine = inspect_address(OFFERED["fine"])
    assert fine.refused is None and fine.host_line == "accounts.example.com" and fine.warnings == ()
    userinfo = inspect_address(OFFERED["userinfo"])
    assert userinfo.host_line == "evil.example"
    assert userinfo.warnings == ("'accounts.example.com@' before the host is a user name, not the site: this "
                                 "address opens evil.example",)
    cyrillic = inspect_address(OFFERED["cyrillic"])
    assert cyrillic.host_line == "аррӏе.com (xn--80ak6aa92e.com)"
    assert any("Cyrillic letters that look like the ASCII 'apple'" in warning for warning in cyrillic.warnings)
    mixed = inspect_address(OFFERED["mixed"])
    assert mixed.host_line == "аpple.com (xn--pple-43d.com)"
    assert any("Cyrillic and Latin letters" in warning for warning in mixed.warnings)
    invisible = inspect_address(OFFERED["invisible"])
    assert invisible.shown == "https://goo<U+200B>gle.com/" and invisible.host_line == "goo<U+200B>gle.com (google.com)"
    assert any("U+200B ZERO WIDTH SPACE" in warning for warning in invisible.warnings)
    assert inspect_address("https://xn--80ak6aa92e.com/").host_line == "аррӏе.com (xn--80ak6aa92e.com)"
    german = inspect_address("https://bücher.example/")  # an international name, no look-alike
    assert german.host_line == "bücher.example (xn--bcher-kva.example)" and len(german.warnings) == 1
    japanese = inspect_address("https://例え.jp/")  # scripts that belong together
    assert not any("mixes" in warning for warning in japanese.warnings)
    assert inspect_address(OFFERED["loopback"]).warnings == ()


@pytest.mark.parametrize("url", [*REFUSED.values(), "http://bank.example/connect"])
def test_a_handler_cannot_ask_for_what_the_client_refuses(url):
    """One rule (mrtr.core.web_urls): ElicitURL refuses what the terminal would."""
    with pytest.raises(ValueError, match="absolute https"):
        ElicitURL("Sign in", url)
    ElicitURL("Sign in", "http://localhost:8000/connect")  # plain http to this machine: development


def _visit(url: str, typed: str = "\n") -> tuple[dict[str, Any], str]:
    shown = io.StringIO()
    terminal = Terminal(stdin=io.StringIO(typed), console=Console(file=shown, color_system=None, width=200),
                        interactive=False)
    answer = terminal.elicit(ElicitationRequest("k", "Sign in to continue", "url", url=url))
    return answer, shown.getvalue()


def test_the_terminal_refuses_without_asking():
    answer, shown = _visit("javascript:alert(1)", typed="")
    assert answer == {"action": "decline"}
    assert "Not opened: the server asked to open javascript:alert(1), which uses the javascript: scheme" in shown
    assert "Open this address" not in shown and "Press Enter" not in shown
    huge, shown = _visit("data:text/html," + "A" * 1_000_000, typed="")
    assert huge == {"action": "decline"} and len(shown) < 1000


# -- mrtr call, as a person meets it -----------------------------------------------------------------------


def _tool(name: str) -> dict[str, Any]:
    return {"name": name, "inputSchema": {"type": "object"}}


async def _asking_server(nursery: trio.Nursery, urls: dict[str, str], answers: list[dict[str, Any]]) -> str:
    """A server whose tool ``visit`` asks for every URL of ``urls`` in one round; the answers land in ``answers``."""
    requests = {key: {"method": "elicitation/create", "params": {"mode": "url", "message": f"Please open ({key})",
                                                                 "url": url}}
                for key, url in urls.items()}

    async def respond(message: dict[str, Any], stream: trio.SocketStream) -> None:
        method = message.get("method")
        if method in ("server/discover", "tools/list", "tools/call"):
            check_sent(message)  # what the client sends, against the 2026-07-28 schema
        if method == "server/discover":
            value = {"resultType": "complete", "supportedVersions": ["2026-07-28"], "ttlMs": 0,
                     "cacheScope": "public", "capabilities": {"tools": {}}}
        elif method == "tools/list":
            value = {"resultType": "complete", "tools": [_tool("visit")], "ttlMs": 0, "cacheScope": "public"}
        elif method == "tools/call" and not message["params"].get("inputResponses"):
            value = {"resultType": "input_required", "requestState": "s", "inputRequests": requests}
        elif method == "tools/call":
            answers.append(message["params"]["inputResponses"])
            value = {"resultType": "complete", "content": [{"type": "text", "text": "done"}]}
        else:
            await send_json(stream, {"jsonrpc": "2.0", "id": message.get("id"),
                                     "error": {"code": -32601, "message": "no such method"}})
            return
        validate_message(result(message, value), result_def="InputRequiredResult"
                         if value["resultType"] == "input_required" else RESULT_DEFS[method])
        await send_json(stream, result(message, value))

    return await serve_http(nursery, respond)


@pytest.mark.slow
async def test_mrtr_call_refuses_what_is_not_https_and_flags_what_may_deceive(nursery):
    answers: list[dict[str, Any]] = []
    url = await _asking_server(nursery, {**REFUSED, **OFFERED}, answers)
    typed = "\n" * len(OFFERED)  # Enter for each address offered; a refused one reads no line
    with trio.fail_after(60):
        done = await trio.run_process([sys.executable, "-m", "mrtr", "call", url, "visit"], cwd=REPO,
                                      stdin=typed.encode(), capture_stdout=True, capture_stderr=True, check=False,
                                      env={**os.environ})
    shown = done.stderr.decode()
    assert done.returncode == 0, shown
    assert done.stdout.decode() == "done\n"
    (sent,) = answers
    assert {key: answer["action"] for key, answer in sent.items()} == {
        **{key: "decline" for key in REFUSED}, **{key: "accept" for key in OFFERED}}
    lines = shown.splitlines()
    for key, address in REFUSED.items():
        assert f"Open this address: {address}" not in shown
    assert "Not opened: the server asked to open javascript:alert(document.cookie), which uses the javascript: " \
           "scheme, not https." in lines
    assert "Not opened: the server asked to open http://evil.example/login, which is plain http to another " \
           "machine (only https, or plain http to this machine)." in lines

    def block(key: str) -> list[str]:
        """The lines shown for one offered address: from its question to the Enter that answered it."""
        start = lines.index(f"Please open ({key})")
        end = next(index for index in range(start, len(lines)) if lines[index].startswith("Press Enter"))
        return lines[start:end + 1]

    assert block("fine")[2:] == ["Open this address: https://accounts.example.com/login",
                                 "  host: accounts.example.com", "Press Enter once done: "]
    assert block("userinfo")[3:5] == [
        "  host: evil.example", "  warning: 'accounts.example.com@' before the host is a user name, not the site: "
                                "this address opens evil.example"]
    assert block("cyrillic")[3] == "  host: аррӏе.com (xn--80ak6aa92e.com)"
    assert any("Cyrillic letters that look like the ASCII 'apple'" in line for line in block("cyrillic"))
    assert block("mixed")[3] == "  host: аpple.com (xn--pple-43d.com)"
    assert block("invisible")[2:4] == ["Open this address: https://goo<U+200B>gle.com/",
                                       "  host: goo<U+200B>gle.com (google.com)"]
    assert any("U+200B ZERO WIDTH SPACE" in line for line in block("invisible"))
    assert block("loopback")[2:] == ["Open this address: http://127.0.0.1:8765/callback", "  host: 127.0.0.1",
                                     "Press Enter once done: "]
    assert "\u200b" not in shown  # an invisible character never reaches the terminal as itself
