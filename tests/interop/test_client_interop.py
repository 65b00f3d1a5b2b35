"""mrtr.Client against the official Python SDK's server (``mcp`` 2.3.0 ``MCPServer``).

``sdk_server.py`` runs in ``.cache/interop-venv`` (built by ``test_interop.py``'s
fixture) and serves stateless Streamable HTTP; the client runs here, on trio, with every
message it sends checked against the official schema.
"""

from __future__ import annotations

import contextvars
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

import mrtr
from mrtr.client import ElicitationRequest

from ..client.conftest import Checked
from ..conftest import free_port, http_server
from .test_interop import _clean_env, _tail, interop_python  # noqa: F401 - the fixture is used by name

pytestmark = pytest.mark.slow  # starts processes (tests/conftest.py: the tiers)

HERE = Path(__file__).resolve().parent
START_TIMEOUT = 30

who: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="Ada")


@pytest.fixture(scope="module")
def sdk_url(interop_python: Path) -> Iterator[str]:  # noqa: F811
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with http_server([str(interop_python), str(HERE / "sdk_server.py"), str(port)], url, env=_clean_env(),
                     timeout=START_TIMEOUT):
        yield url


def answer(request: ElicitationRequest) -> dict[str, Any]:
    if request.message == "Your name?":
        return mrtr.accept(name=who.get())
    if request.message.startswith("Favourite colour"):
        return mrtr.accept(colour="red" if "Ada" in request.message else "blue")
    if request.message.startswith("Your age"):
        return mrtr.accept(age=36)
    return mrtr.decline()


def client(url: str, **options: Any) -> mrtr.Client:
    made = mrtr.Client(url, **options)
    made.target = Checked(made.target)
    return made


async def test_three_rounds(sdk_url):
    async with client(sdk_url, on_elicit=answer) as c:
        result = await c.call_tool("three_questions")
    assert result.text == "Ada/red/36" and not result.is_error
    sent = c.target.sent()
    assert len(sent) == 4
    results = [result for _, result in c.target.calls()]
    for number in (1, 2, 3):
        assert list(sent[number]["inputResponses"]) == list(results[number - 1]["inputRequests"])
        if "requestState" in results[number - 1]:
            assert sent[number]["requestState"] == results[number - 1]["requestState"]
        else:
            assert "requestState" not in sent[number]


async def test_decline_is_a_result(sdk_url):
    async with client(sdk_url, on_elicit=lambda request: mrtr.decline()) as c:
        assert (await c.call_tool("maybe")).text == "action=decline"
    async with client(sdk_url, on_elicit=lambda request: mrtr.cancel()) as c:
        assert (await c.call_tool("maybe")).text == "action=cancel"


async def test_progress(sdk_url):
    seen: list[tuple[Any, ...]] = []
    async with client(sdk_url, on_progress=lambda *update: seen.append(update)) as c:
        assert (await c.call_tool("count", {"steps": 3})).text == "counted 3"
    assert [update[0] for update in seen] == [1, 2, 3]


async def test_round_cap(sdk_url):
    async with client(sdk_url, on_elicit=answer, max_rounds=2) as c:
        with pytest.raises(mrtr.RoundLimitExceeded):
            await c.call_tool("three_questions")


async def test_parallel_calls_keep_their_own_state(sdk_url):
    results: dict[str, str] = {}
    async with client(sdk_url, on_elicit=answer) as c:
        async def call(name: str) -> None:
            who.set(name)  # each call runs in its own task, with its own context
            results[name] = (await c.call_tool("three_questions")).text

        async with trio.open_nursery() as nursery:
            for name in ("Ada", "Bob", "Cy"):
                nursery.start_soon(call, name)
    assert results == {"Ada": "Ada/red/36", "Bob": "Bob/blue/36", "Cy": "Cy/blue/36"}
