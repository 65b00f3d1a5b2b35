"""The upstream server the proxy tests put behind ``mrtr.proxy``: every kind of question, progress, logs.

Served in process (loopback HTTP, or as a Server object) and as
``tests.bridge.upstream_app:server`` (``mrtr serve ... --stdio``). ``SLOW`` records what
became of each ``slow`` call in this process.
"""

from __future__ import annotations

from typing import Annotated, Any

import trio

from mrtr import Context, Elicit, ElicitURL, Form, ListRoots, PublicError, Sample, Step
from mrtr.server import Header, RequestInfo, Server

def _key(info: RequestInfo) -> str | None:
    """Who calls: the ``X-Upstream-Key`` header a proxy in front sends with its own credentials.

    A bearer token that reaches this server is named too, so a test sees it if a proxy
    passed its caller's token on (it must not).
    """
    key = info.headers.get("x-upstream-key")
    bearer = info.headers.get("authorization")
    return f"{key}+{bearer}" if bearer else key


server = Server("upstream", "2.0.0", secret=b"u" * 32, instructions="Ask me about your pets.", principal=_key,
                store_url="memory:")

# tag -> "started" | "finished" | "cancelled"
SLOW: dict[str, str] = {}


@server.tool(annotations={"readOnlyHint": True}, meta={"example.com/owner": "pets-team"}, title="Interview")
async def interview(ctx: Context, topic: str = "pets"):
    """Two questions in two rounds, with progress and a log line between them."""
    name = yield Elicit(f"Your name, for {topic}?", Form().string("name", min_length=1))
    if not name.accepted:
        yield f"no name ({name.action})"
        return
    ctx.progress(1, total=2, message="got the name")
    ctx.log("info", f"{name.content['name']} answered")
    colour = yield Elicit(f"Favourite colour, {name.content['name']}?", Form().choice("colour", ["red", "blue"]))
    if not colour.accepted:
        yield f"{name.content['name']}/no colour ({colour.action})"
        return
    ctx.progress(2, total=2, message="got the colour")
    yield f"{name.content['name']}/{colour.content['colour']}/{topic}"


@server.tool
def pair():
    """Two questions in one round (a group)."""
    email, plan = yield (
        Elicit("Your email?", Form().string("email", format="email"), key="email"),
        Elicit("Your plan?", Form().choice("plan", ["free", "pro"]), key="plan"),
    )
    return f"{email.content['email']} on {plan.content['plan']}"


@server.tool
def think():
    """Sampling, then roots."""
    reply = yield Sample("Say hi", max_tokens=10)
    roots = yield ListRoots()
    return f"{reply.content.text} / {', '.join(root.uri for root in roots.roots)}"


@server.tool
def visit():
    """URL-mode elicitation."""
    answer = yield ElicitURL("Sign in to continue", "https://example.com/login")
    return f"url {answer.action}"


@server.tool
async def count(ctx: Context, steps: int = 3) -> str:
    """Report progress once per step."""
    for step in range(1, steps + 1):
        ctx.progress(step, total=steps, message=f"step {step}")
        await trio.sleep(0.01)
    return f"counted {steps}"


@server.tool
async def slow(ctx: Context, tag: str, seconds: float = 30) -> str:
    """Sleep unless cancelled; SLOW records what happened."""
    SLOW[tag] = "started"
    ctx.progress(0, message="sleeping")
    try:
        await trio.sleep(seconds)
    except trio.Cancelled:
        SLOW[tag] = "cancelled"
        raise
    SLOW[tag] = "finished"
    return f"slept {seconds}"


@server.tool
def forecast(city: Annotated[str, Header("City")], days: int = 1) -> dict[str, Any]:
    """Structured content, with an outputSchema and a mirrored header."""
    return {"city": city, "days": days, "sky": "clear"}


def _pause(seconds: float) -> float:
    return seconds


@server.tool(task="optional")
async def adopt(pet: str):
    """A task that asks a question once it runs."""
    yield Step(_pause, 0)
    answer = yield Elicit(f"Adopt {pet}?", Form().boolean("sure"))
    yield f"adopted {pet}" if answer.accepted and answer.content["sure"] else f"kept looking ({answer.action})"


@server.tool(task="required")
async def greet():
    """Asks a name in a round on the call, then becomes a task that greets (the tasks and rounds composition)."""
    answer = yield Elicit("What is your name?", Form().string("name"), key="user_name")
    name = (answer.content or {}).get("name", "stranger")
    greeting = yield Step(_greeting, name)
    yield greeting


def _greeting(name: str) -> str:
    return f"Hello, {name}!"


@server.tool(task="required")
async def audit():
    """A tool that runs only as a task; its handler fails, so the task completes with an error result."""
    yield Step(_pause, 0)
    raise PublicError("the audit found problems")


@server.tool
def whoami(ctx: Context) -> str:
    """Who this server sees calling."""
    return f"principal={ctx.principal}"


@server.tool
def crash() -> str:
    """End this process at once, as a crashing stdio server does."""
    import os

    os._exit(3)


@server.tool
def fail() -> str:
    """A tool whose handler raises on purpose: an isError result."""
    raise PublicError("the kitchen is closed")


@server.prompt
def menu(course: str):
    """A prompt that asks a question first."""
    answer = yield Elicit("Vegetarian?", Form().boolean("veggie"))
    return f"Suggest a {'vegetarian ' if answer.content['veggie'] else ''}{course}."


@server.resource("notes://welcome", mime_type="text/plain")
def welcome() -> str:
    """A plain resource."""
    return "welcome, friend"


@server.resource_template("notes://{id}/text", mime_type="text/plain")
def note(id: str):  # noqa: A002 - the template's variable
    """A templated resource behind a question."""
    answer = yield Elicit(f"Password for note {id}?", Form().string("password"))
    return f"note {id}" if answer.content["password"] == "open" else "nope"


@server.completion
def complete(ref, argument, context):
    """Courses for the menu prompt."""
    return [course for course in ("starter", "soup", "main", "dessert") if course.startswith(argument["value"])]
