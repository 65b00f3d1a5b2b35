"""The server the interoperability tests drive with the official ``mcp`` client.

Served as ``tests.interop.fixture_server:server`` by ``mrtr serve`` (over HTTP and
over ``--stdio``). Every tool's questions carry fixed messages so the client can answer
them from a scripted table; the messages are part of the contract with
``tests/interop/client_checks.py``.
"""

from __future__ import annotations

import uuid
from collections import Counter

from mrtr import Context, Elicit, Form, ListRoots, Sample, Step
from mrtr.server import Server

server = Server("interop-fixture", "1.0.0", secret=b"interop-fixture-secret-32-bytes!")

_step_runs: Counter[str] = Counter()
"""How many times :func:`new_run_id` ran, per ``label``, in this process."""


def new_run_id(label: str) -> str:
    """A fresh random id; counts its own calls so a test can prove it ran once."""
    _step_runs[label] += 1
    return uuid.uuid4().hex[:12]


def _text(content: object) -> str:
    blocks = content if isinstance(content, list) else [content]
    return "".join(getattr(block, "text", "") or "" for block in blocks)


@server.tool
def plain(text: str) -> str:
    """Echo the text; never asks."""
    return f"plain:{text}"


@server.tool
def two_questions():
    """Two sequential questions: three round trips."""
    name = yield Elicit("What is your name?", Form().string("name", min_length=1))
    colour = yield Elicit("What is your favourite colour?", Form().choice("colour", ["red", "green", "blue"]))
    return f"name={name.content['name']} colour={colour.content['colour']}"


@server.tool
def group_tuple():
    """Two questions asked together in one round (a tuple group)."""
    name, age = yield (
        Elicit("Group: your name?", Form().string("name")),
        Elicit("Group: your age?", Form().integer("age", minimum=0)),
    )
    return f"name={name.content['name']} age={age.content['age']}"


@server.tool
def group_dict():
    """Two questions asked together in one round, under handler-chosen wire keys."""
    answers = yield {
        "city": Elicit("Which city?", Form().string("city")),
        "days": Elicit("How many days?", Form().integer("days", minimum=1, maximum=30)),
    }
    return f"city={answers['city'].content['city']} days={answers['days'].content['days']}"


@server.tool
def step_backed(label: str):
    """A Step-generated id that must stay the same across all rounds."""
    run_id = yield Step(new_run_id, label)
    size = yield Elicit(f"Run {run_id}: which size?", Form().choice("size", ["S", "M", "L"]))
    ok = yield Elicit(f"Run {run_id}: confirm?", Form().boolean("ok"))
    return f"run={run_id} size={size.content['size']} ok={ok.content['ok']} step_runs={_step_runs[label]}"


@server.tool
def dangerous(target: str):
    """Asks for a confirmation that the client declines (or cancels)."""
    answer = yield Elicit(f"Really delete {target}? [{target}]", Form().boolean("confirm"))
    if answer.action == "decline":
        return f"declined: {target} kept"
    if answer.action == "cancel":
        return f"cancelled: {target} kept"
    return f"deleted {target}"


@server.tool
def progress_then_ask(ctx: Context):
    """Reports progress, asks, then reports more progress."""
    ctx.progress(1, total=3, message="preparing")
    answer = yield Elicit("Proceed after progress?", Form().boolean("go"))
    ctx.progress(2, total=3, message="answered")
    ctx.progress(3, total=3, message="done")
    return f"progress go={answer.content['go']}"


@server.tool
def ask_sampling():
    """Asks the client's model a question."""
    reply = yield Sample("What is the capital of France?", max_tokens=50, system_prompt="Answer in one word.")
    return f"model={reply.model} said={_text(reply.content)} role={reply.role}"


@server.tool
def ask_roots():
    """Asks the client for its roots."""
    listed = yield ListRoots()
    return "roots=" + ",".join(f"{root.uri}|{root.name}" for root in listed.roots)


@server.tool
def mixed_group():
    """An elicitation, a sampling request and a roots request in one round."""
    name, reply, listed = yield (
        Elicit("Group: your name?", Form().string("name")),
        Sample("Say hi", max_tokens=10),
        ListRoots(),
    )
    return f"name={name.content['name']} said={_text(reply.content)} roots={len(listed.roots)}"


@server.tool
def confirm(item: str):
    """One yes/no question about ``item``; used by the manual-loop checks."""
    answer = yield Elicit(f"Confirm {item}?", Form().boolean("ok"))
    return f"confirmed {item}: {answer.content['ok']}" if answer.accepted else f"not confirmed {item}"


@server.tool
def confirm_other(item: str):
    """Same signature and question as :func:`confirm`, under another name."""
    answer = yield Elicit(f"Confirm {item}?", Form().boolean("ok"))
    return f"other confirmed {item}: {answer.content['ok']}" if answer.accepted else f"other not confirmed {item}"
