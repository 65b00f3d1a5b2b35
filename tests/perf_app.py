"""A server for the tests of what the defaults cost: access lines, slow sync handlers, thread mode.

Served as ``tests.perf_app:server``. With ``ACCESS_COPY`` set, the deployment also
attaches a handler of its own to the ``mrtr.access`` logger, writing to that file.
"""

from __future__ import annotations

import logging
import os

from mrtr.server import Server

server = Server("perf-test", "1.0.0", secret=b"p" * 32)


@server.tool
def echo(text: str) -> str:
    """Answers at once."""
    return text


if os.environ.get("ACCESS_COPY"):
    _copy = logging.FileHandler(os.environ["ACCESS_COPY"])
    _copy.setFormatter(logging.Formatter("%(name)s|%(message)s"))
    logging.getLogger("mrtr.access").addHandler(_copy)
