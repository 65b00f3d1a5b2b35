"""Access lines of a real ``mrtr serve``: every answer has its line, a listener of your own gets every record.

The lines wait for the event loop's idle moments (:mod:`mrtr.transports.logs`); these
tests hold the server to never losing one: not when SIGTERM arrives in the middle of a
load, and not for a handler an operator attached to ``mrtr.access`` themselves.
"""

from __future__ import annotations

import os
import re

import pytest
import httpx
import trio

from ..conftest import mrtr_process, until
from ..test_stdio import REPO
from .conftest import BASE_HEADERS, mcp_headers, rpc
from .test_operations import served_port

pytestmark = pytest.mark.slow  # starts processes (tests/conftest.py: the tiers)

ACCESS = re.compile(r"^\S+ \S+ INFO mrtr\.access: POST /mcp tools/call \"echo\" complete 200 [\d.]+ms round=1$")


def echo(number: int) -> dict:
    return rpc("tools/call", {"name": "echo", "arguments": {"text": f"n{number}"}}, id=number)


async def test_every_answer_of_a_load_cut_by_sigterm_has_its_line():
    args = ["serve", "tests.perf_app:server", "--port", "0"]
    answered = 0
    async with mrtr_process(args, cwd=REPO, env=os.environ) as (process, stderr):
        port = await until(lambda: served_port(process, stderr), timeout=20)
        sent = trio.Event()

        async def client(first: int) -> None:
            nonlocal answered
            async with httpx.AsyncClient(timeout=5.0) as http:
                for number in range(first, first + 10_000):
                    message = echo(number)
                    try:
                        reply = await http.post(f"http://127.0.0.1:{port}/mcp", json=message,
                                                headers={**BASE_HEADERS, **mcp_headers(message)})
                    except httpx.HTTPError:
                        return  # the server is shutting down
                    if reply.status_code != 200:
                        return
                    assert reply.json()["result"]["content"][0]["text"] == f"n{number}"
                    answered += 1
                    if answered >= 200:
                        sent.set()

        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                for worker in range(8):
                    nursery.start_soon(client, worker * 10_000)
                await sent.wait()  # under load: lines are waiting for an idle moment right now
                process.terminate()
                assert await process.wait() == 0
    lines = [line for line in stderr.decode().splitlines() if " mrtr.access: " in line]
    assert all(ACCESS.match(line) for line in lines), [line for line in lines if not ACCESS.match(line)][:3]
    # Every answer a client received was logged; requests finished during the shutdown are logged too.
    assert len(lines) >= answered >= 200


async def test_a_handler_of_your_own_on_the_access_logger_gets_every_record(tmp_path):
    copy = tmp_path / "access.log"
    env = {**os.environ, "ACCESS_COPY": str(copy)}
    async with mrtr_process(["serve", "tests.perf_app:server", "--port", "0"], cwd=REPO, env=env) as (process,
                                                                                                     stderr):
        port = await until(lambda: served_port(process, stderr), timeout=20)
        async with httpx.AsyncClient(timeout=5.0) as http:
            for number in range(25):
                message = echo(number)
                reply = await http.post(f"http://127.0.0.1:{port}/mcp", json=message,
                                        headers={**BASE_HEADERS, **mcp_headers(message)})
                assert reply.status_code == 200
        await until(lambda: copy.exists() and len(copy.read_text().splitlines()) == 25, timeout=10)
        process.terminate()
        assert await process.wait() == 0
    copied = copy.read_text().splitlines()
    assert all(line.startswith('mrtr.access|POST /mcp tools/call "echo" complete 200 ') for line in copied)
    # ... and stderr, through logging to the handler mrtr serve installed, still has every line.
    assert len([line for line in stderr.decode().splitlines() if ACCESS.match(line)]) == 25
