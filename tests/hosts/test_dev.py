"""``mrtr dev``'s parts that start nothing: its link to the Inspector, its advice without Node, its usage errors.

The loop itself (the server, the Inspector, the browser) is in ``tests/legacy/test_inspector_web.py``.
"""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path

from mrtr.cli import main
from mrtr.cli.dev import INSPECTOR_PACKAGE, inspector_link, missing_node_advice

PINNED = Path(__file__).resolve().parents[1] / "legacy" / "inspector" / "package.json"


def test_the_inspector_started_is_the_one_the_suite_drives():
    version = json.loads(PINNED.read_text())["dependencies"]["@modelcontextprotocol/inspector"]
    assert INSPECTOR_PACKAGE == f"@modelcontextprotocol/inspector@{version}"


def test_the_link_connects_with_the_session_token():
    link = inspector_link(6274, "http://127.0.0.1:8000/mcp", "t0k")
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(link).query))
    assert link.startswith("http://127.0.0.1:6274/?")
    assert query == {"MCP_INSPECTOR_API_TOKEN": "t0k", "serverUrl": "http://127.0.0.1:8000/mcp", "transport": "http",
                     "autoConnect": "t0k"}


def test_without_node_the_one_command_is_printed():
    advice = missing_node_advice("http://127.0.0.1:8000/mcp")
    assert advice.splitlines()[-1] == (f"  npx -y {INSPECTOR_PACKAGE} --web --transport http "
                                       "--server-url http://127.0.0.1:8000/mcp")
    assert "Node.js >= 22.19" in advice


def test_usage_mistakes(capsys):
    assert main(["dev", "hostapp"]) == 2
    assert "must be given as" in capsys.readouterr().err
    assert main(["dev", "hostapp:server", "--inspector-port", "0"]) == 2
    assert "--inspector-port needs a fixed port" in capsys.readouterr().err
