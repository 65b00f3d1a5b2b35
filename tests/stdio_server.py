"""A small server for the stdio and CLI tests, served as ``tests.stdio_server:server``."""

from __future__ import annotations

import sys
from pathlib import Path

import trio

from mrtr import Context, Elicit, Form
from mrtr.server import Server

server = Server("stdio-test", "1.0.0", secret=b"s" * 32)

not_a_server = {"name": "stdio-test"}
"""An attribute that is not a Server, for the CLI tests."""


@server.tool
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool
def greet(greeting: str = "Hello"):
    """Ask for a name once, then greet."""
    answer = yield Elicit("What is your name?", Form().string("name", min_length=1))
    if not answer.accepted:
        return f"{greeting}, stranger"
    return f"{greeting}, {answer.content['name']}"


@server.tool
async def count(ctx: Context, steps: int = 3) -> str:
    """Report progress once per step, then return."""
    for step in range(1, steps + 1):
        ctx.progress(step, total=steps, message=f"step {step}")
        await trio.sleep(0.01)
    return f"counted {steps}"


@server.tool
async def slow(ctx: Context, seconds: float = 30, marker: str = "") -> str:
    """Sleep, unless cancelled; write "started" and then "cancelled" to ``marker`` if given."""
    if marker:
        Path(marker).write_text("started")
    ctx.progress(0, message="sleeping")
    try:
        await trio.sleep(seconds)
    except trio.Cancelled:
        if marker:
            Path(marker).write_text("cancelled")
        print(f"slow: cancelled after starting a {seconds}s sleep", file=sys.stderr, flush=True)
        raise
    return f"slept {seconds}"


@server.tool
def shout(text: str) -> str:
    """Print to stdout (which must not reach the protocol stream), then return."""
    print(f"stray output: {text}")
    sys.stdout.flush()
    return text.upper()
