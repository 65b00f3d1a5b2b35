"""``mrtr proxy`` as a command: over stdio and HTTP, a stdio upstream that crashes, an upstream that is not there.

Real processes: ``mrtr proxy`` started as a user would, its upstream ``mrtr serve
tests.bridge.upstream_app:server --stdio`` started by the proxy. Every message the
downstream client exchanges is checked against the schema of its era.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
import trio

import mrtr

from ..client.conftest import REPO, Checked
from ..conftest import clean_env, free_port, http_server

pytestmark = pytest.mark.slow  # starts processes (tests/conftest.py: the tiers)

UPSTREAM = [sys.executable, "-m", "mrtr", "serve", "tests.bridge.upstream_app:server", "--stdio",
            "--log-level", "warning"]


def proxy_command(*options: str) -> list[str]:
    return [sys.executable, "-m", "mrtr", "proxy", "--log-level", "warning", "--store", "memory:", *options, "--",
            *UPSTREAM]


def stdio_client(options: list[str], era: str, **answerers: Any) -> mrtr.Client:
    client = mrtr.Client.stdio(proxy_command("--stdio", *options), cwd=str(REPO), stderr=subprocess.DEVNULL,
                               era=era, env=clean_env(), **answerers)
    client.target = Checked(client.target)
    return client


def interview_answers(*values: Any) -> Any:
    queue = list(values)
    return lambda request: queue.pop(0)


@pytest.mark.parametrize("downstream", ["modern", "legacy"])
@pytest.mark.parametrize("upstream", ["modern", "legacy"])
async def test_over_stdio_both_ways(downstream, upstream):
    progress: list[float] = []
    client = stdio_client(["--upstream-era", upstream], downstream,
                          on_elicit=interview_answers(mrtr.accept(name="Ada"), mrtr.accept(colour="red")),
                          on_progress=lambda p, t, m: progress.append(p))
    async with client:
        result = await client.call_tool("interview", {"topic": "stdio"})
        declined = None
        client.on_elicit = interview_answers(mrtr.decline())
        declined = await client.call_tool("interview", {"topic": "stdio"})
    assert result.text == "Ada/red/stdio"
    assert progress == [1, 2]
    assert declined.text == "no name (decline)"


async def test_a_stdio_upstream_that_exits_is_started_again():
    async with stdio_client([], "modern", on_elicit=interview_answers(mrtr.accept(name="Ada"),
                                                                      mrtr.accept(colour="blue"))) as client:
        with pytest.raises(mrtr.ClientError) as crashed:
            await client.call_tool("crash")
        assert crashed.value.data == {"reason": "upstream-unavailable"}
        assert "unreachable" in crashed.value.message
        with trio.fail_after(30):
            while True:  # the proxy starts the child again after its pause
                try:
                    result = await client.call_tool("interview", {"topic": "again"})
                    break
                except mrtr.ClientError as error:
                    assert error.data == {"reason": "upstream-unavailable"}, error
                    await trio.sleep(0.2)
    assert result.text == "Ada/blue/again"


async def test_over_http_with_the_proxys_own_credentials():
    upstream_port, port = free_port(), free_port()
    upstream_url = f"http://127.0.0.1:{upstream_port}/mcp"
    url = f"http://127.0.0.1:{port}/mcp"
    env = {**clean_env(), "UPSTREAM_TOKEN": "proxy-secret"}
    upstream = [sys.executable, "-m", "mrtr", "serve", "tests.bridge.upstream_app:server", "--port",
                str(upstream_port), "--log-level", "warning"]
    command = [sys.executable, "-m", "mrtr", "proxy", upstream_url, "--port", str(port), "--log-level", "warning",
               "--store", "memory:", "--upstream-header", "X-Upstream-Key=UPSTREAM_TOKEN"]
    with http_server(upstream, upstream_url, env=clean_env(), cwd=REPO), \
            http_server(command, url, env=env, cwd=REPO):
        for era in ("modern", "legacy"):
            # The downstream's own key is its own: the upstream sees the proxy's.
            client = mrtr.Client(url, era=era, headers={"X-Upstream-Key": "downstream-key"},
                                 on_elicit=interview_answers(mrtr.accept(name="Bo"), mrtr.accept(colour="red")))
            client.target = Checked(client.target)
            async with client:
                result = await client.call_tool("interview", {"topic": era})
                seen = await client.call_tool("whoami")
            assert result.text == f"Bo/red/{era}"
            assert seen.text == "principal=proxy-secret"


def test_an_upstream_that_is_not_there_stops_the_proxy_at_start_saying_why():
    closed = free_port()
    completed = subprocess.run(
        [sys.executable, "-m", "mrtr", "proxy", f"http://127.0.0.1:{closed}/mcp", "--port", str(free_port()),
         "--connect-timeout", "2"], cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=60)
    assert completed.returncode == 1
    assert f"The upstream server http://127.0.0.1:{closed}/mcp could not be reached" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_usage_errors():
    completed = subprocess.run([sys.executable, "-m", "mrtr", "proxy", "https://a.example/mcp",
                                "--upstream-header", "Authorization=NOT_SET_ANYWHERE"], cwd=REPO,
                               env={k: v for k, v in clean_env().items() if k != "NOT_SET_ANYWHERE"},
                               capture_output=True, text=True, timeout=60)
    assert completed.returncode == 2
    assert "NOT_SET_ANYWHERE is not set" in completed.stderr


async def test_a_retry_reaching_another_worker_is_forwarded_to_the_one_holding_the_call(tmp_path):
    # Each round on a fresh connection: the kernel spreads them over the two workers, so about
    # half the retries reach the worker that does not hold the upstream call.
    upstream_port, port = free_port(), free_port()
    upstream_url = f"http://127.0.0.1:{upstream_port}/mcp"
    url = f"http://127.0.0.1:{port}/mcp"
    upstream = [sys.executable, "-m", "mrtr", "serve", "tests.bridge.upstream_app:server", "--port",
                str(upstream_port), "--log-level", "warning"]
    command = [sys.executable, "-m", "mrtr", "proxy", upstream_url, "--port", str(port), "--workers", "2",
               "--upstream-era", "legacy", "--log-level", "warning", "--store", "sqlite:///" + str(tmp_path / "tasks.db")]
    with http_server(upstream, upstream_url, env=clean_env(), cwd=REPO), http_server(command, url, env=clean_env(),
                                                                                      cwd=REPO):
        for number in range(8):
            params = {"name": "interview", "arguments": {"topic": f"worker{number}"}}
            answers = iter([{"name": "Ada"}, {"colour": "red"}])
            result: dict[str, Any] = {}
            while True:
                async with mrtr.Client(url, era="modern", on_elicit=lambda request: None) as client:
                    result = await client.call_once("tools/call", params)
                if result.get("resultType") != "input_required":
                    break
                params = {**params, "requestState": result["requestState"],
                          "inputResponses": {key: mrtr.accept(**next(answers)) for key in result["inputRequests"]}}
            assert result["content"][0]["text"] == f"Ada/red/worker{number}"
