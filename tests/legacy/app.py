"""Ordinary generator handlers, served to both eras: ``tests.legacy.app:server``.

Nothing here knows which era calls it. The in-process tests, the stdio tests and the
official SDK 1.x client (``sdk_checks.py``) drive these same handlers in 2025-era
sessions, and ``test_one_handler_both_eras`` drives them through the modern path too.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec
import trio

from mrtr import Context, Elicit, ElicitURL, Form, ListRoots, PublicError, Sample, Step
from mrtr.core import content, wire
from mrtr.server import Server

server = Server("legacy-fixture", "1.2.3", title="Legacy fixture", instructions="Both eras, one set of handlers.",
                secret=b"k" * 32)

MARKERS = Path(os.environ.get("MRTR_TEST_MARKERS", "/tmp"))
"""Where handlers leave files saying what ran (a test in another process reads them)."""


def _mark(name: str, text: str) -> None:
    """Leave ``text`` in the marker file ``name``, appended, when the test set a markers folder."""
    if os.environ.get("MRTR_TEST_MARKERS"):
        with (MARKERS / name).open("a") as marker:
            marker.write(text + "\n")


def _plan_options() -> list[str]:
    _mark("plan-options", "read")  # a Step: one line per run
    return ["free", "team", "enterprise"]


class Contact(msgspec.Struct):
    email: str
    newsletter: bool = False


@server.tool
def onboard(ctx: Context, company: str):
    """Several questions, a Step between them, a group: a conversation."""
    name = yield Elicit(f"Welcome to {company}! Your name?", Form().string("name", min_length=1))
    plans = yield Step(_plan_options)
    plan = yield Elicit("Which plan?", Form().choice("plan", plans, titles=[p.title() for p in plans]))
    contact, confirm = yield (
        Elicit("How do we reach you?", Contact),
        Elicit("Shall we start?", Form().boolean("go", default=True)),
    )
    if not confirm.accepted or not confirm.content["go"]:
        return f"{name.content['name']}: not started"
    email = contact.value.email if contact.accepted else "no email"
    return f"{name.content['name']} on {plan.content['plan']} ({email}) at {company}"


@server.tool
def ask_model(ctx: Context, topic: str):
    """Ask the client's model for a line about a topic."""
    said = yield Sample(f"One line about {topic}", max_tokens=50, system_prompt="Be brief.")
    return f"model {said.model} said: {said.content.text}"


@server.tool
def where(ctx: Context):
    """List the client's roots."""
    found = yield ListRoots()
    return ", ".join(f"{root.name or '?'}={root.uri}" for root in found.roots)


@server.tool
async def count(ctx: Context, steps: int = 3) -> str:
    """Report progress once a step, then ask whether to go on."""
    for step in range(1, steps + 1):
        ctx.progress(step, total=steps, message=f"step {step}")
        await trio.sleep(0.01)
    go = yield Elicit("Counted. Report?", Form().boolean("report"))
    yield f"counted {steps}, report {go.action}"


@server.tool
def hold(ctx: Context, marker: str):
    """Ask a question and wait; its finally says it ran (a cancellation test reads that)."""
    _mark(marker, "waiting")
    try:
        answer = yield Elicit("Still there?", Form().boolean("here"))
        return f"answered {answer.action}"
    finally:
        _mark(marker, "finally ran")


@server.tool
def secret_code(ctx: Context, nonce: str):
    """Ask for the code that belongs to ``nonce``: a load test checks every answer reached the call that asked."""
    answer = yield Elicit(f"Code for {nonce}?", Form().string("code"))
    return f"{nonce}={answer.content['code']}" if answer.accepted else f"{nonce}: {answer.action}"


@server.tool
def polite(ctx: Context):
    """Take no for an answer."""
    answer = yield Elicit("May I store your name?", Form().string("name"))
    if answer.action == "decline":
        return "declined: nothing stored"
    if answer.action == "cancel":
        return "cancelled: ask me later"
    return f"stored {answer.content['name']}"


@server.tool
def sign_in(ctx: Context):
    """Send the user to a web page, then go on."""
    consent = yield ElicitURL("Sign in to Example", "https://auth.example.com/sign-in?flow=42")
    if not consent.accepted:
        return "not signed in"
    name = yield Elicit("Signed in. Display name?", Form().string("name"))
    return f"signed in as {name.content['name']}"


@server.tool
def chatty(ctx: Context) -> str:
    """Log at three levels."""
    ctx.log("debug", "debug detail")
    ctx.log("info", {"step": "working"}, logger="chatty")
    ctx.log("error", "something went wrong, but the tool goes on")
    return "logged"


@server.tool
def profile(ctx: Context) -> dict:
    """Structured output: an object."""
    return {"name": "Ada", "languages": ["en", "fr"]}


@server.tool
def numbers(ctx: Context):
    """Structured output that is not an object (2026 allows it, 2025 does not)."""
    return wire.CallToolResult(content=[content.text("[1, 2, 3]")], structured_content=[1, 2, 3])


@server.tool
def linked(ctx: Context) -> list:
    """A resource link next to text."""
    return [content.text("see"), content.resource_link("test://static", "static")]


@server.tool
def broken(ctx: Context):
    """Fail after the first answer."""
    yield Elicit("Ready?", Form().boolean("ready"))
    raise RuntimeError("the database is down")


@server.tool
def refuse(ctx: Context, expense: int):
    """Fail with words meant for the caller."""
    yield Elicit(f"Delete expense {expense}?", Form().boolean("sure"))
    raise PublicError(f"No expense {expense} in your account")


@server.tool(task="required")
async def batch(ctx: Context) -> str:
    """Runs only as a task (the modern tasks extension)."""
    return "done"


@server.prompt
def interview(ctx: Context, role: str):
    """A prompt that asks before it answers."""
    level = yield Elicit(f"Seniority for the {role} interview?", Form().choice("level", ["junior", "senior"]))
    return f"Interview a {level.content['level'] if level.accepted else 'any'} {role}."


@server.resource("test://static", mime_type="text/plain")
def static() -> str:
    """A plain resource."""
    return "static text"


@server.resource_template("test://notes/{id}", mime_type="text/plain")
def note(ctx: Context, id: str):
    """A resource whose read asks first."""
    answer = yield Elicit(f"Show note {id}?", Form().boolean("show"))
    return f"note {id}" if answer.accepted and answer.content["show"] else "hidden"


@server.completion
def complete(ref, argument, context):
    """Complete a prompt's role."""
    return [role for role in ("engineer", "editor", "designer") if role.startswith(argument.get("value", ""))]
