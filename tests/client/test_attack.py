"""Hostile-server regressions for mrtr.Client (found by attacking the client)."""

from __future__ import annotations

import sys

import pytest
import trio

import mrtr
from mrtr.client import ClientError

# A "server" that reads its input and never writes a line.
SILENT = [sys.executable, "-c", "import sys\nfor _ in sys.stdin: pass"]


async def test_attack_a_stdio_server_that_never_answers_is_bounded_by_timeout() -> None:
    """Client.stdio took timeout= and ignored it: a silent server hung the call (and `mrtr call --stdio`)
    forever. The call must fail with a ClientError once `timeout` passes without a word from the server."""
    with trio.fail_after(20):  # the guard for the old behaviour, not the bound under test
        async with mrtr.Client.stdio(SILENT, timeout=0.5) as client:
            with pytest.raises(ClientError, match="no answer"):
                await client.call_tool("add", {"a": 1, "b": 2})
