"""The server every node of the several-nodes tests serves, in process and as ``mrtr serve`` subprocesses.

Its store is where ``mrtr serve --store`` or ``MRTR_STORE`` says (in process: the
``build`` argument); the bounds of 2025 sessions are the defaults unless
``NODES_MAX_SESSIONS``, ``NODES_MAX_PER_CLIENT`` or ``NODES_IDLE_TIMEOUT`` name others. What the tests need of it:

- ``signup(plan)``: a modern conversation of two rounds, one question each; the result
  is made of that conversation's own answers, so an answer that reached another
  conversation shows;
- ``counted(steps, gate)``: a task that waits for the file ``gate`` to exist, then runs
  ``steps`` Steps, reporting progress after each (each report a status message that
  every listener of the task hears);
- ``journal(path)``: a task whose second Step never ends on its first attempt (the
  test kills that node there); each Step appends the pid that ran it to ``path``;
- ``touch(uri)`` and ``change_tools()``: publish ``resources/updated`` and a tool list
  change from whichever node serves the call;
- the resource ``node://pid``, answering the pid of the node that read it;
- ``secret_code(nonce)`` (a 2025-era session's question: the load of
  ``tests/legacy/sdk_load.py``) and ``whoami()``, which names the node (its
  ``Server.node_id``) that ran the call;
- ``interview(nonce, path)``: two questions with a Step after each, each Step appending
  a line to ``path`` (how many times each ran shows), the result made of the nonce and
  both answers: a 2025 call that survives its node's death; ``held_open(nonce, path)``,
  one question, noting each start and each ``finally`` with its pid (where a cancelled,
  deleted or timed-out adopted call ends).

``NODES_ANSWER_TIMEOUT`` sets how long a 2025 question waits for its answer.
"""

from __future__ import annotations

import base64
import os
import time
from pathlib import Path
from typing import Any

from mrtr import Context, Elicit, Form, Server, Step
from mrtr.server.sessions import (
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_SESSIONS,
    DEFAULT_MAX_SESSIONS_PER_CLIENT,
    SessionRegistry,
)


def build(store_url: str | None = None) -> Server:
    """A fresh server on ``store_url`` (by default what ``mrtr serve --store`` or ``MRTR_STORE`` says)."""
    secret = None if os.environ.get("MRTR_SECRET") else base64.b64encode(b"n" * 32).decode()
    # The bounds of 2025 sessions: the defaults, unless a test names smaller ones for every node.
    sessions = SessionRegistry(max_sessions=int(os.environ.get("NODES_MAX_SESSIONS", DEFAULT_MAX_SESSIONS)),
                               max_per_client=int(os.environ.get("NODES_MAX_PER_CLIENT",
                                                                 DEFAULT_MAX_SESSIONS_PER_CLIENT)),
                               idle_timeout=float(os.environ.get("NODES_IDLE_TIMEOUT", DEFAULT_IDLE_TIMEOUT)))
    timeout = os.environ.get("NODES_ANSWER_TIMEOUT")  # how long a 2025 question waits, if a test says
    app = Server("nodes-test", "1.0.0", secret=secret, store_url=store_url, sessions=sessions,
                 answer_timeout=float(timeout) if timeout else None)

    @app.tool
    def signup(plan: str) -> Any:
        """Two rounds: an email, then a name."""
        email = yield Elicit("Your email?", Form().string("email"))
        name = yield Elicit("Your name?", Form().string("name"))
        return f"{plan}:{email.content['email']}:{name.content['name']}"

    @app.tool(task="required")
    def counted(ctx: Context, steps: int, gate: str) -> Any:
        """Waits for ``gate``, then reports progress after each of ``steps`` Steps."""
        yield Step(_wait_for, gate)
        for number in range(1, steps + 1):
            yield Step(_tick, number)
            ctx.progress(number, steps)
            yield Step(_pause)  # a report is published by the run's next lease write: give it one
        return f"counted {steps}"

    @app.tool(task="required")
    def journal(path: str) -> Any:
        """Appends to ``path`` in each Step; the second one never ends on its first attempt."""
        yield Step(_append, path, "prepare")
        yield Step(_long, path)
        return "journal done"

    @app.tool
    def touch(uri: str) -> str:
        """Tells every listener subscribed to ``uri`` that it changed."""
        app.notify_resource_updated(uri)
        return "touched"

    @app.tool
    def change_tools() -> str:
        """Tells every listener that the tool list changed."""
        app.notify_tools_changed()
        return "changed"

    @app.tool
    def secret_code(nonce: str) -> Any:
        """Asks for the code of ``nonce``: an answer that reached another session's call shows."""
        answer = yield Elicit(f"Code for {nonce}?", Form().string("code"))
        return f"{nonce}={answer.content['code']}" if answer.accepted else f"{nonce}: {answer.action}"

    @app.tool
    def interview(nonce: str, path: str) -> Any:
        """Two questions, a Step after each (each appends a line to ``path``: how many times it ran shows)."""
        name = yield Elicit(f"{nonce}: your name?", Form().string("name"))
        yield Step(_append, path, f"{nonce} first")
        city = yield Elicit(f"{nonce}: your city?", Form().string("city"))
        yield Step(_append, path, f"{nonce} second")
        return f"{nonce}:{name.content['name']}:{city.content['city']}"

    @app.tool
    def held_open(nonce: str, path: str) -> Any:
        """One question; notes in ``path`` each start and each ``finally``, with the pid that ran it."""
        _append(path, f"{nonce} start")
        try:
            answer = yield Elicit(f"{nonce}: go on?", Form().boolean("go"))
            return f"{nonce}:{answer.action}"
        finally:
            _append(path, f"{nonce} finally")

    @app.tool
    def whoami() -> str:
        """The node that ran this call."""
        return str(app.node_id)

    @app.resource("node://pid")
    def pid() -> str:
        """The pid of the process that read it."""
        return str(os.getpid())

    return app


def _wait_for(path: str) -> bool:
    while not Path(path).exists():
        time.sleep(0.01)
    return True


def _tick(number: int) -> int:
    return number


def _pause() -> None:
    time.sleep(0.02)


def _append(path: str, line: str) -> str:
    with open(path, "a") as file:
        file.write(f"{line} {os.getpid()}\n")
        file.flush()
        os.fsync(file.fileno())
    return line


def _long(path: str) -> str:
    _append(path, "long")
    if Path(path).read_text().count("long") == 1:
        while True:  # the first attempt never ends: the test kills this node here
            time.sleep(0.05)
    return "long"


server = build()
