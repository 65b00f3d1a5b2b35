"""A server for the tests of what the defaults cost: access lines, slow sync handlers, thread mode.

Served as ``tests.perf_app:server``. With ``ACCESS_COPY`` set, the deployment also
attaches a handler of its own to the ``mrtr.access`` logger, writing to that file.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from mrtr.server import Server

server = Server("perf-test", "1.0.0", secret=b"p" * 32)
napping = threading.Event()  # set while nap_in_thread sleeps (for tests serving this server in process)


def _where() -> str:
    return "main thread" if threading.current_thread() is threading.main_thread() else "worker thread"


@server.tool
def echo(text: str) -> str:
    """Answers at once."""
    return text


@server.tool
def nap(seconds: float) -> str:
    """Blocks the event loop (a sync call to a slow service, say)."""
    time.sleep(seconds)
    return _where()


@server.tool
def doze(seconds: float) -> str:
    """Blocks the event loop too: a second handler, warned about on its own."""
    time.sleep(seconds)
    return _where()


@server.tool(thread=True)
def nap_in_thread(seconds: float) -> str:
    """Blocks, in a worker thread of its own: the loop goes on."""
    napping.set()
    try:
        time.sleep(seconds)
    finally:
        napping.clear()
    return _where()


@server.prompt(thread=True)
def slow_prompt(seconds: str) -> str:
    """A prompt in a worker thread."""
    time.sleep(float(seconds))
    return _where()


@server.prompt
def stuck_prompt(seconds: str) -> str:
    """A prompt that blocks the loop."""
    time.sleep(float(seconds))
    return _where()


@server.resource("perf://where", thread=True)
def where_resource() -> str:
    """A resource read in a worker thread."""
    return _where()


if os.environ.get("ACCESS_COPY"):
    _copy = logging.FileHandler(os.environ["ACCESS_COPY"])
    _copy.setFormatter(logging.Formatter("%(name)s|%(message)s"))
    logging.getLogger("mrtr.access").addHandler(_copy)
