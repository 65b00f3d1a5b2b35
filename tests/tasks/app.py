"""Task tools for the tasks tests, served in process and by ``mrtr serve`` in subprocesses."""

from __future__ import annotations

import base64
import os
import threading
import time
from pathlib import Path
from typing import Any

from mrtr import Context, Elicit, Form, RequestInfo, Server, Step


GATES: dict[str, threading.Event] = {}
"""Where a test holds a ``report`` task's Step (in process only): it runs once the test sets the event."""


def _user(info: RequestInfo) -> str | None:
    return info.headers.get("x-user")


def build(tasks_url: str | None = None) -> Server:
    """A fresh server keeping its tasks at ``tasks_url`` (by default where ``mrtr serve --tasks`` or ``MRTR_TASKS`` says)."""
    # Every process of the multi-process tests gets the same MRTR_SECRET; in process, a fixed test key.
    secret = None if os.environ.get("MRTR_SECRET") else base64.b64encode(b"k" * 32).decode()
    app = Server("tasks-test", "1.0.0", principal=_user, secret=secret, tasks_url=tasks_url)

    @app.tool(task="optional")
    def onboard(ctx: Context, plan: str) -> Any:
        """Asks a name on the call (MRTR), then works, then asks a city in the task."""
        name = yield Elicit("Your name?", Form().string("name"))
        ticket = yield Step(lambda: f"T-{plan}")
        city = yield Elicit("Your city?", Form().string("city"))
        return f"{name.value['name']} ({ticket}) from {city.value['city']}"

    @app.tool(task="required")
    def report(ctx: Context, gate: str = "") -> Any:
        """Only runs as a task: counts, reports progress, then (given a ``gate``) waits for the test."""
        rows = yield Step(_count)
        # After the first Step, so the task's own run reaches it first (a replayed part is quiet).
        ctx.progress(1, 2, "collecting")
        yield Step(_hold, gate)
        return f"{rows} rows"

    @app.tool(task="required")
    def journal(path: str) -> Any:
        """Appends to a file in each Step; the second Step blocks on its first attempt (the process dies there)."""
        journal = Path(path)
        yield Step(_append, str(journal), "prepare")
        yield Step(_long, str(journal))
        return "journal done"

    @app.tool(task="required")
    def gated(path: str) -> Any:
        """Works until the file ``path`` exists (the test creates it when it wants the task to end)."""
        opened = yield Step(_wait_for, path)
        return f"gated {opened}"

    @app.tool
    def plain(x: int) -> int:
        """Not a task tool."""
        return x * 2

    return app


def _count() -> int:
    return 42


def _hold(gate: str) -> None:
    if gate and not GATES[gate].wait(timeout=10):
        raise TimeoutError(f"gate {gate!r} was never opened")


def _append(path: str, line: str) -> str:
    with open(path, "a") as file:
        file.write(line + "\n")
        file.flush()
        os.fsync(file.fileno())
    return line


def _wait_for(path: str) -> str:
    while not Path(path).exists():
        time.sleep(0.02)
    return "open"


def _long(path: str) -> str:
    _append(path, f"long {os.getpid()}")
    if Path(path).read_text().count("long") == 1:
        while True:  # the first attempt never ends: the test kills this process here
            time.sleep(0.05)
    return "long"


server = build()
