"""The server the client tests talk to, in process, over loopback HTTP and over stdio.

Served as ``tests.client.app:server`` (``mrtr serve ... --stdio``), so module state such
as ``SLOW`` is only visible to tests that run the server in their own process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import trio

from mrtr import Context, Elicit, ElicitURL, Form, ListRoots, PublicError, Sample
from mrtr.server import Header, Server

server = Server("client-test", "1.0.0", secret=b"c" * 32)

# tag -> "started" | "finished" | "cancelled"
SLOW: dict[str, str] = {}


@server.tool
def ask_name(tag: str = "") -> str:
    """One question; the message names the tag so an answerer can tell calls apart."""
    answer = yield Elicit(f"What is your name? [{tag}]", Form().string("name", min_length=1))
    if not answer.accepted:
        return f"{answer.action} [{tag}]"
    return f"Hello, {answer.content['name']}! [{tag}]"


@server.tool
def interview(topic: str = "pets"):
    """Three questions in three rounds."""
    first = yield Elicit(f"Your name ({topic})?", Form().string("name"))
    second = yield Elicit("Your favourite colour?", Form().choice("colour", ["red", "green", "blue"]))
    third = yield Elicit("Your age?", Form().integer("age", minimum=0))
    return f"{first.content['name']}/{second.content['colour']}/{third.content['age']}/{topic}"


@server.tool
def pair():
    """Two questions in one round (a group)."""
    email, plan = yield (
        Elicit("Your email?", Form().string("email", format="email"), key="email"),
        Elicit("Your plan?", Form().choice("plan", ["free", "pro"]), key="plan"),
    )
    return f"{email.content['email']} on {plan.content['plan']}"


@server.tool
def endless():
    """Never satisfied: asks one more question every round."""
    number = 0
    while True:
        yield Elicit(f"Question {number}?", Form().string("answer"))
        number += 1


@server.tool
def visit():
    """URL-mode elicitation: asks the user to open a page."""
    answer = yield ElicitURL("Sign in to continue", "https://example.com/login")
    return f"url {answer.action}"


@server.tool
def think():
    """Sampling and roots in one round."""
    reply, roots = yield (Sample("Say hi", max_tokens=10), ListRoots())
    return f"{reply.content.text} / {', '.join(root.uri for root in roots.roots)}"


@server.tool
async def count(ctx: Context, steps: int = 3) -> str:
    """Report progress once per step, then return."""
    for step in range(1, steps + 1):
        ctx.progress(step, total=steps, message=f"step {step}")
        await trio.sleep(0)
    return f"counted {steps}"


@server.tool
async def slow(ctx: Context, tag: str, seconds: float = 30, marker: str = "") -> str:
    """Sleep unless cancelled; record what happened in SLOW and, if given, the ``marker`` file."""
    SLOW[tag] = "started"
    if marker:
        Path(marker).write_text("started")
    ctx.progress(0, message="sleeping")
    try:
        await trio.sleep(seconds)
    except trio.Cancelled:
        SLOW[tag] = "cancelled"
        if marker:
            Path(marker).write_text("cancelled")
        raise
    SLOW[tag] = "finished"
    return f"slept {seconds}"


@server.tool
def regional(
    region: Annotated[str, Header("Region")],
    people: Annotated[int, Header("People")] = 1,
    dry_run: Annotated[bool, Header("Dry-Run")] = False,
) -> dict:
    """Arguments mirrored in Mcp-Param-* headers; returns structured content."""
    return {"region": region, "people": people, "dry_run": dry_run}


@server.tool
def fail() -> str:
    """A tool whose handler raises: an isError result."""
    raise PublicError("the kitchen is closed")


@server.prompt
def menu(course: str):
    """A prompt that asks a question first."""
    answer = yield Elicit("Vegetarian?", Form().boolean("veggie"))
    return f"Suggest a {'vegetarian ' if answer.content['veggie'] else ''}{course}."


@server.resource("notes://secret", mime_type="text/plain")
def secret():
    """A resource behind a question."""
    answer = yield Elicit("Password?", Form().string("password"))
    return "the secret" if answer.content["password"] == "open" else "nope"
