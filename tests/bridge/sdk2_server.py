"""An official Python SDK 2.x server (``mcp`` 2.3.0 ``MCPServer``) put behind ``mrtr proxy``.

Runs in ``.cache/interop-venv`` (not in mrtr's virtualenv): ``python sdk2_server.py PORT``
serves stateless Streamable HTTP (2026-07-28) on 127.0.0.1:PORT/mcp, where questions are
``InputRequiredResult`` rounds (``Resolve``/``Elicit``). ``interview`` asks two questions in
two rounds (the second depends on the first, and its refusal is a result); ``confirm``
one whose refusal is a result; ``count`` reports progress; ``sleepy`` sleeps until cancelled.
"""

from __future__ import annotations

import sys
from typing import Annotated

import anyio
from pydantic import BaseModel

from mcp.server.mcpserver import Context, Elicit, ElicitationResult, MCPServer, Resolve


class Name(BaseModel):
    name: str


class Colour(BaseModel):
    colour: str


def ask_name() -> Elicit[Name]:
    return Elicit("Your name?", Name)


def ask_colour(name: Annotated[Name, Resolve(ask_name)]) -> Elicit[Colour]:
    return Elicit(f"Favourite colour, {name.name}?", Colour)


def ask_confirm() -> Elicit[Name]:
    return Elicit("Confirm your name?", Name)


app = MCPServer("sdk2-upstream")


@app.tool()
def interview(name: Annotated[Name, Resolve(ask_name)],
              colour: Annotated[ElicitationResult[Colour], Resolve(ask_colour)]) -> str:
    """Two questions in two rounds."""
    if colour.action != "accept":
        return f"{name.name}/no colour ({colour.action})"
    return f"{name.name}/{colour.data.colour}"


@app.tool()
def confirm(answer: Annotated[ElicitationResult[Name], Resolve(ask_confirm)]) -> str:
    """One question whose refusal is a result."""
    return f"action={answer.action}"


@app.tool()
async def count(steps: int, ctx: Context) -> str:
    """Report progress ``steps`` times."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step}")
    return f"counted {steps}"


@app.tool()
async def sleepy(seconds: float) -> str:
    """Sleep (a call to cancel)."""
    await anyio.sleep(seconds)
    return "slept"


if __name__ == "__main__":
    app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]), stateless_http=True)
