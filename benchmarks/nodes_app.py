"""The server the several-nodes benchmark (part 9) runs on each node: ``mrtr serve benchmarks.nodes_app:server``.

Its store is what ``--store`` says; its key is ``MRTR_SECRET``, shared by the nodes.

- ``ask2(plan)``: two questions, one per round, answered with an email (the load
  generator's conversation, checked for answers of another conversation);
- ``once1(plan)``: one question, declared ``once=True``: its final round is recorded;
- ``job(steps)``: a task of ``steps`` Steps;
- ``touch(uri)``: publishes ``resources/updated`` for ``uri`` and answers the wall
  clock just before it did (the latency figure starts there).
"""

from __future__ import annotations

import time
from typing import Any

from mrtr import Elicit, Form, Server, Step

FORM = Form().string("email", format="email")

server = Server("bench-nodes", "1.0.0")


@server.tool
def ask2(plan: str) -> Any:
    """Two questions, one per round."""
    first = yield Elicit("Question 1?", FORM)
    second = yield Elicit("Question 2?", FORM)
    return f"{first.content['email']},{second.content['email']}:{plan}"


@server.tool(once=True)
def once1(plan: str) -> Any:
    """One question; the final round runs once and is recorded."""
    reply = yield Elicit("Question 1?", FORM)
    return f"{reply.content['email']}:{plan}"


@server.tool(task="required")
def job(steps: int) -> Any:
    """A task of ``steps`` Steps."""
    for number in range(steps):
        yield Step(_step, number)
    return f"job of {steps}"


def _step(number: int) -> int:
    return number


@server.tool
def touch(uri: str) -> str:
    """Publish ``resources/updated`` for ``uri``; the wall clock (epoch seconds) just before."""
    published = time.time()
    server.notify_resource_updated(uri)
    return repr(published)


@server.resource("bench://touched")
def touched() -> str:
    """The resource ``touch`` says was updated (a listen stream subscribes to a resource the server has)."""
    return "touched"
