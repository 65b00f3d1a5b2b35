"""mrtr.Client in the 2025 era against mrtr's own dual-era stdio server: the same handlers, the same answers.

``mrtr serve --stdio`` serves both eras; ``era="legacy"`` makes the client open an
``initialize`` session, where the server's questions come as live requests, while
``era="auto"`` finds the modern era first. Every message of the session is checked
against the 2025-11-25 schema.
"""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

import mrtr
from mrtr.core.eras import LEGACY, MODERN

from .conftest import REPO, Checked, stdio_command

pytestmark = pytest.mark.slow  # starts processes (tests/conftest.py: the tiers)


def answer(request: Any) -> dict[str, Any]:
    fields = request.requested_schema["properties"]
    if "name" in fields:
        return mrtr.accept(name="Ada")
    return mrtr.accept(colour="red") if "colour" in fields else mrtr.accept(age=36)


@pytest.mark.parametrize("era, expected", [("legacy", LEGACY), ("auto", MODERN)])
async def test_the_same_conversation_in_either_era(era, expected):
    client = mrtr.Client.stdio(stdio_command(), cwd=str(REPO), stderr=subprocess.DEVNULL, on_elicit=answer,
                               era=era)
    client.target = Checked(client.target)
    async with client:
        result = await client.call_tool("interview", {"topic": "eras"})
        assert client.era == expected
    assert result.text == "Ada/red/36/eras"
    methods = [message["method"] for message, _ in client.target.exchanges]
    assert ("initialize" in methods) == (expected == LEGACY)
