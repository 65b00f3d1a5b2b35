"""A mounted server conducting a two-question conversation through a real ``mrtr serve``, in both eras.

The modern era with :class:`mrtr.Client` over Streamable HTTP (each round a request the
parent's middleware, then the child's, see), the 2025 era with the official Python SDK 1.x
client (one request whose questions arrive live).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

import mrtr

from .conftest import clean_env
from .interop.test_interop import served
from .legacy.test_sdk_client import legacy_python  # noqa: F401 - the pinned SDK 1.x virtualenv, a fixture

pytestmark = pytest.mark.slow  # starts processes (tests/conftest.py: the tiers)

APP = "tests.mounts.app:server"
SDK_CALL = Path(__file__).resolve().parent / "mounts" / "sdk1_call.py"


@pytest.fixture
def serving(tmp_path: Path) -> Any:
    layers = tmp_path / "layers.log"
    with served(APP, tmp_path / "server.log", env={"MRTR_TEST_MOUNT_LOG": str(layers)}) as url:
        yield url, layers


async def test_mrtr_client_conducts_the_mounted_conversation_in_rounds(serving: Any) -> None:
    url, layers = serving

    def answer(request: Any) -> Any:
        return mrtr.accept(reason="late") if request.message.startswith("Why") else mrtr.accept(ok=True)

    async with mrtr.Client(url, era="modern", on_elicit=answer) as client:
        tools = [tool["name"] for tool in await client.list_tools()]
        result = await client.call_tool("billing_refund", {"invoice": "INV-9"})
    assert tools == ["ping", "billing_refund"]
    assert result.text == "refunded 45 for late"
    calls = [line.split() for line in layers.read_text().splitlines() if "tools/call" in line]
    assert calls == [["shop", "modern", "tools/call", "billing_refund", "1"],
                     ["billing", "modern", "tools/call", "refund", "1"],
                     ["shop", "modern", "tools/call", "billing_refund", "2"],
                     ["billing", "modern", "tools/call", "refund", "2"],
                     ["shop", "modern", "tools/call", "billing_refund", "3"],
                     ["billing", "modern", "tools/call", "refund", "3"]]


def test_the_official_sdk_1_client_conducts_it_live(serving: Any, legacy_python: Path) -> None:  # noqa: F811
    url, layers = serving
    done = subprocess.run([str(legacy_python), str(SDK_CALL), url], capture_output=True, text=True, timeout=120,
                          env=clean_env(), check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["tools"] == ["ping", "billing_refund"]
    assert outcome["asked"] == ["Why refund INV-9?", "Refund 45?"]
    assert outcome["result"]["content"] == [{"type": "text", "text": "refunded 45 for damaged"}]
    assert not outcome["result"].get("isError")
    calls = [line.split() for line in layers.read_text().splitlines() if "tools/call" in line]
    assert calls == [["shop", "legacy", "tools/call", "billing_refund", "1"],
                     ["billing", "legacy", "tools/call", "refund", "1"]]
