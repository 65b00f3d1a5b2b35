"""mrtr.Client and ``mrtr call`` against a 2025-era server nobody here wrote: the official Python SDK 1.x.

``sdk1_server.py`` runs in ``.cache/legacy-venv`` with ``mcp==1.30.0`` (pinned in
``tests/legacy/requirements.txt``, shared with the server side's 2025 tests; created on
first use, and under ``CI=true`` a failed install fails the tests instead of skipping them). It speaks 2025-11-25 only: Streamable HTTP with
``Mcp-Session-Id``, or stdio; its questions are live ``elicitation/create`` requests.
The client probes, falls back to ``initialize`` and answers with the same answerers it
uses for MRTR rounds; every message either way is checked against the 2025-11-25 schema
(``tests.client.conftest.Checked``).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import mrtr
from mrtr.client import ElicitationRequest, EraMemory
from mrtr.core.eras import LEGACY

from ..client.conftest import Checked
from ..conftest import clean_env, free_port, http_server, pinned_venv

pytestmark = pytest.mark.slow  # starts processes (tests/conftest.py: the tiers)

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SERVER = HERE / "sdk1_server.py"
VERSION = "1.30.0"


@pytest.fixture(scope="session")
def sdk1_python() -> Path:
    """The python of ``.cache/legacy-venv``, with ``mcp==1.30.0``: the one the server side's 2025 tests use too."""
    return pinned_venv(REPO / ".cache" / "legacy-venv", REPO / "tests" / "legacy" / "requirements.txt", "mcp",
                       VERSION)


@pytest.fixture(scope="module")
def sdk1_url(sdk1_python: Path) -> Iterator[str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with http_server([str(sdk1_python), str(SERVER), "http", str(port)], url, env=clean_env()):
        yield url


def answer(request: ElicitationRequest) -> dict[str, Any]:
    fields = (request.requested_schema or {}).get("properties", {})
    if "name" in fields:
        return mrtr.accept(name="Ada")
    if "colour" in fields:
        return mrtr.accept(colour="red")
    return mrtr.decline()


@pytest.fixture(params=["http", "stdio"])
def reach(request: Any, sdk1_python: Path) -> Callable[..., mrtr.Client]:
    kind = request.param

    def make(**options: Any) -> mrtr.Client:
        if kind == "http":
            client = mrtr.Client(request.getfixturevalue("sdk1_url"), **options)
        else:
            client = mrtr.Client.stdio([str(sdk1_python), str(SERVER), "stdio"], env=clean_env(),
                                       stderr=subprocess.DEVNULL, **options)
        client.target = Checked(client.target)
        return client

    make.kind = kind  # type: ignore[attr-defined]
    return make


async def test_a_conversation_with_two_questions(reach):
    asked: list[ElicitationRequest] = []

    def person(request: ElicitationRequest) -> dict[str, Any]:
        asked.append(request)
        return answer(request)

    async with reach(on_elicit=person) as client:
        result = await client.call_tool("interview", {"topic": "owls"})
        assert client.era == LEGACY and client.server is not None
        assert client.server.protocol_version == "2025-11-25" and client.server.server_info.name == "sdk1-interop"
    assert result.text == "Ada/red/owls" and not result.is_error
    assert [request.message for request in asked] == ["Your name, for owls?", "Favourite colour, Ada?"]
    assert all(request.mode == "form" for request in asked)
    sent = [message["method"] for message, _ in client.target.exchanges]
    assert sent[:2] == ["server/discover", "initialize"]  # the probe, refused, then the 2025 handshake


async def test_a_decline_reaches_the_tool_as_a_decline(reach):
    async with reach(on_elicit=lambda request: mrtr.decline()) as client:
        assert (await client.call_tool("confirm")).text == "action=decline"
    async with reach(on_elicit=lambda request: mrtr.accept(sure=True)) as client:
        assert (await client.call_tool("confirm")).text == "action=accept sure=True"


async def test_sampling_and_roots_are_answered_by_the_same_answerers(reach):
    seen: list[Any] = []

    def sample(request: Any) -> str:
        seen.append(request)
        return "Paris"

    async with reach(on_sample=sample, on_roots=lambda request: ["file:///srv/project"]) as client:
        assert (await client.call_tool("think", {"question": "Capital of France?"})).text == "model said: Paris"
        assert (await client.call_tool("where")).text == "file:///srv/project"
    assert seen[0].max_tokens == 20 and seen[0].messages[0]["content"]["text"] == "Capital of France?"


async def test_progress_and_log_messages_reach_the_callbacks(reach):
    progress: list[tuple[Any, ...]] = []
    logged: list[tuple[Any, ...]] = []
    async with reach(on_progress=lambda *update: progress.append(update),
                     on_log=lambda *message: logged.append(message)) as client:
        assert (await client.call_tool("count", {"steps": 3})).text == "counted 3"
        assert (await client.call_tool("chatty")).text == "said it"
    assert progress == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
    assert [(level, data) for level, _, data in logged] == [("info", "starting"), ("warning", "almost done")]


async def test_an_undeclared_request_is_refused_to_the_server_and_the_call_goes_on(reach):
    # No on_sample: the client declared no sampling, and the server asks anyway.
    async with reach() as client:
        result = await client.call_tool("think", {"question": "?"})
    assert result.is_error and "sampling" in result.text.lower()


async def test_listings_prompts_resources_and_discover(reach):
    async with reach() as client:
        tools = {tool["name"] for tool in await client.list_tools()}
        assert {"interview", "confirm", "think", "where", "count", "chatty"} <= tools
        assert (await client.get_prompt("greet", {"who": "Bob"})).text == "Say hello to Bob."
        assert (await client.read_resource("notes://welcome")).text == "welcome to the SDK server"
        discovered = await client.discover()
    assert discovered["supportedVersions"] == ["2025-11-25"]
    assert discovered["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "sdk1-interop"


async def test_era_modern_is_refused_by_a_legacy_server(reach):
    async with reach(era="modern") as client:
        with pytest.raises(mrtr.ClientError):
            await client.call_tool("confirm")


async def test_the_era_is_remembered_per_endpoint_by_clients_sharing_a_memory(sdk1_url):
    eras = EraMemory()
    async with mrtr.Client(sdk1_url, on_elicit=answer, eras=eras) as first:
        await first.call_tool("confirm")
    second = mrtr.Client(sdk1_url, on_elicit=answer, eras=eras)
    second.target = Checked(second.target)
    async with second:
        assert (await second.call_tool("confirm")).text == "action=decline"
    assert second.target.exchanges[0][0]["method"] == "initialize"  # no probe: the era was known
    # A client with a memory of its own probes again (one client's knowledge is not every client's).
    third = mrtr.Client(sdk1_url, on_elicit=answer)
    third.target = Checked(third.target)
    async with third:
        assert (await third.call_tool("confirm")).text == "action=decline"
    assert third.target.exchanges[0][0]["method"] == "server/discover"


def _mrtr(*args: str, stdin: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mrtr", "call", *args], input=stdin, capture_output=True,
                          text=True, timeout=120, cwd=REPO)


def test_mrtr_call_with_piped_answers_over_http(sdk1_url):
    done = _mrtr(sdk1_url, "interview", "topic=owls", stdin="Ada\nred\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Ada/red/owls"
    assert "Your name, for owls?" in done.stderr and "Favourite colour, Ada?" in done.stderr


def test_mrtr_call_with_piped_answers_over_stdio(sdk1_python):
    command = f"{sdk1_python} {SERVER} stdio"
    done = _mrtr("--stdio", command, "interview", "topic=owls", stdin="Ada\nred\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Ada/red/owls"
    declined = _mrtr("--stdio", command, "confirm", stdin="!decline\n")
    assert declined.returncode == 0 and declined.stdout.strip() == "action=decline", declined.stderr
    sampled = _mrtr("--stdio", command, "--sample-reply", "Paris", "--root", "/srv", "think", "question=where?",
                    stdin="")
    assert sampled.stdout.strip() == "model said: Paris", sampled.stderr
    rooted = _mrtr("--stdio", command, "--root", "/srv/project", "where", stdin="")
    assert rooted.stdout.strip() == "file:///srv/project", rooted.stderr
    counted = _mrtr("--stdio", command, "count", "steps=3", stdin="")
    assert counted.returncode == 0 and counted.stdout.strip() == "counted 3", counted.stderr
    refused = _mrtr("--stdio", command, "think", "question=where?", stdin="")  # no --sample-reply: not declared
    assert refused.returncode == 1 and "sampling" in refused.stdout.lower() + refused.stderr.lower()
