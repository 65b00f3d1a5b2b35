"""A server with task tools for the client's task tests, in process and behind ``mrtr serve``.

``export`` asks a question on the call (an MRTR round), works in a Step reporting
progress, then asks another question from inside the task; ``slow`` only runs as a task
and works until the file it names exists (a test creates it, or cancels the task first).
"""

from __future__ import annotations

import base64
import os
import time
from pathlib import Path
from typing import Any

from mrtr import Context, Elicit, Form, Server, Step


def build(tasks_url: str | None = "memory:") -> Server:
    """A fresh server keeping its tasks at ``tasks_url`` (``None``: where ``mrtr serve --tasks`` says)."""
    secret = None if os.environ.get("MRTR_SECRET") else base64.b64encode(b"c" * 32).decode()
    app = Server("client-tasks", "1.0.0", secret=secret, tasks_url=tasks_url)

    @app.tool(task="optional", annotations={"title": "Export a dataset", "readOnlyHint": True})
    def export(ctx: Context, dataset: str) -> Any:
        """Asks a format, counts rows with progress, then asks whether to write them."""
        fmt = yield Elicit("Which format?", Form().choice("format", ["csv", "json"]))
        rows = yield Step(_rows, dataset)
        ctx.progress(1, 2, "counted")
        ok = yield Elicit(f"Write {rows} rows as {fmt.value['format']}?", Form().boolean("ok"))
        ctx.progress(2, 2, "written")
        return f"wrote {rows} rows of {dataset} as {fmt.value['format']}" if ok.value["ok"] else "not written"

    @app.tool(task="required")
    def slow(ctx: Context, path: str) -> Any:
        """Works until the file ``path`` exists, reporting progress as it starts."""
        yield Step(_begin, path)
        ctx.progress(1, 3, "waiting for the file")
        seen = yield Step(_wait_for, path)
        return f"found {seen}"

    @app.tool
    def plain(x: int) -> int:
        """Not a task tool."""
        return x * 2

    return app


def _rows(dataset: str) -> int:
    return len(dataset) * 10


def _begin(path: str) -> str:
    Path(path + ".started").write_text("started")
    return "started"


def _wait_for(path: str) -> str:
    deadline = time.monotonic() + 60
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.02)
    return Path(path).read_text()


server = build(None)
