"""The server the HTTP tests talk to (module level, so a worker subprocess can import it)."""

from __future__ import annotations

import os
from typing import Annotated

import trio

from mrtr import Elicit, Form, PublicError, Sample
from mrtr.server import Header, Server

# tag -> "started" | "finished" | "cancelled": what the slow tool went through.
SLOW: dict[str, str] = {}
# tag -> the event the gated tool waits for (set by the test).
GATES: dict[str, trio.Event] = {}


def build_server(**options) -> Server:
    """The test server; ``options`` go to :class:`Server` (the tests pass ``secret``)."""
    server = Server("http-test", "1.0.0", **options)
    for tool in (ask_name, interview, count, chatty, slow, gated, regional, pid, ask_model):
        server.tool(tool)
    for prompt in (greeting, broken):
        server.prompt(prompt)
    server.resource("notes://welcome", mime_type="text/plain")(welcome)
    server.resource("notes://caf\u00e9", mime_type="text/plain")(cafe)
    return server


def ask_name(ctx):
    """Ask the user's name, then greet them."""
    answer = yield Elicit("What is your name?", Form().string("name"))
    if not answer.accepted:
        return "No name given."
    return f"Hello, {answer.content['name']}!"


def interview(ctx, topic: str = "pets"):
    """Three questions in three rounds."""
    first = yield Elicit(f"Your name ({topic})?", Form().string("name"))
    second = yield Elicit("Your favourite colour?", Form().string("colour"))
    third = yield Elicit("Your age?", Form().integer("age", minimum=0))
    return f"{first.content['name']}/{second.content['colour']}/{third.content['age']}/{topic}"


async def count(ctx, steps: int = 3):
    """Report progress ``steps`` times, then finish."""
    for step in range(1, steps + 1):
        ctx.progress(step, total=steps, message=f"step {step}")
        await trio.sleep(0.01)
    return f"counted to {steps}"


def chatty(ctx):
    """Log one message at info level, then finish."""
    ctx.log("info", {"said": "hello"}, logger="chatty")
    ctx.log("debug", "a debug line")
    return "logged"


async def slow(ctx, tag: str, seconds: float = 5.0):
    """Sleep, recording whether the sleep was cancelled."""
    SLOW[tag] = "started"
    try:
        await trio.sleep(seconds)
    except trio.Cancelled:
        SLOW[tag] = "cancelled"
        raise
    SLOW[tag] = "finished"
    return f"slept {seconds}"


async def gated(ctx, tag: str):
    """Report progress, wait for the test to open the gate, report again, finish."""
    ctx.progress(1, message="waiting at the gate")
    await GATES[tag].wait()
    ctx.progress(2, message="through")
    return "opened"


def regional(
    region: Annotated[str, Header("Region")],
    count: Annotated[int, Header("Count")] = 1,
    dry_run: Annotated[bool, Header("Dry-Run")] = False,
    note: str = "",
):
    """A tool whose arguments are mirrored in Mcp-Param-* headers."""
    return f"{region}:{count}:{dry_run}:{note}"


def pid() -> int:
    """The id of the worker process that answers."""
    return os.getpid()


def ask_model(ctx):
    """Needs sampling: called without the capability it fails with -32021."""
    reply = yield Sample("Say hi", max_tokens=10)
    return str(reply)


def greeting(ctx, name: str):
    """A greeting prompt."""
    return f"Say hello to {name}."


def broken(ctx):
    """A prompt whose handler fails (-32603)."""
    raise PublicError("the prompt store is down")


def welcome():
    """A welcome note."""
    return "Welcome!"


def cafe():
    """A note whose URI is not ASCII (its Mcp-Name travels Base64-encoded)."""
    return "Coffee."


server = build_server(secret=b"s" * 32)
"""The test server, serving both eras (the default)."""

modern_server = build_server(secret=b"s" * 32, eras="modern")
"""The same tools on a server that serves MCP 2026-07-28 only: the transport as it was before 2025 sessions."""
