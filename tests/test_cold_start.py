"""What ``mrtr serve --stdio`` loads before it answers a host's first request, in a real process.

A stdio host starts the server once per session, so everything imported on the way to the
first answer is paid by every session: no module made for test suites (``trio.testing``
pulls in pytest wherever it is installed), and none of the other commands' machinery.
tests/test_structure.py checks the first from the source without starting anything.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import meta
from .legacy_schema import validate_legacy_message
from .wire_schema import validate_message

pytestmark = pytest.mark.slow

TEST_ONLY = ("pytest", "_pytest", "hypothesis", "trio.testing")
OTHER_COMMANDS = ("mrtr.cli.call", "mrtr.cli.check", "mrtr.cli.dev", "mrtr.cli.install", "mrtr.client")
"""What ``mrtr call``/``list``, ``check-tasks``, ``dev`` and ``install`` need, which serving does not."""

FIRST = {
    "initialize": {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                   "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                              "clientInfo": {"name": "host", "version": "1"}}},
    "server/discover": {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta()}},
}


def _imported(stderr: str) -> set[str]:
    """The modules ``-X importtime`` says the process imported."""
    return {line.rsplit("|", 1)[1].strip() for line in stderr.splitlines()
            if line.startswith("import time:") and not line.startswith("import time: self")}


@pytest.mark.parametrize("first", list(FIRST))
def test_serving_over_stdio_loads_no_test_only_module_and_no_other_command(first: str, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "mrtr", "serve", "--stdio"],
                          input=json.dumps(FIRST[first]) + "\n", capture_output=True, text=True, cwd=tmp_path,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    answer = json.loads(done.stdout.splitlines()[0])
    if first == "initialize":
        validate_legacy_message(answer, "initialize")
        assert answer["result"]["serverInfo"]["name"] == "mrtr-example"
    else:
        validate_message(answer, "DiscoverResult")
        assert answer["result"]["supportedVersions"] == ["2026-07-28"]
    imported = _imported(done.stderr)
    assert "mrtr.transports.stdio" in imported  # the listing is read, and it is this server's
    assert not sorted(name for name in imported if name.split(".")[0] in TEST_ONLY or name.startswith(TEST_ONLY))
    assert not sorted(name for name in imported if name.startswith(OTHER_COMMANDS))


def test_the_command_line_loads_only_the_command_it_runs(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "mrtr", "serve", "--help"], capture_output=True,
                          text=True, cwd=tmp_path, timeout=60, check=False)
    assert done.returncode == 0 and "--stdio" in done.stdout
    imported = _imported(done.stderr)
    assert "mrtr.cli.serve" in imported
    assert not sorted(name for name in imported if name.startswith(OTHER_COMMANDS))
