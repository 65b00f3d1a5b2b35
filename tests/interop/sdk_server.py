"""An official Python SDK server (``mcp`` 2.3.0 ``MCPServer``) for mrtr.Client to talk to.

Runs in ``.cache/interop-venv`` (not in mrtr's virtualenv): ``python sdk_server.py PORT``
serves stateless Streamable HTTP on 127.0.0.1:PORT/mcp. ``three_questions`` asks three
questions in three rounds (each resolver depends on the previous answer);
``two_at_once`` asks two in one round; ``count`` reports progress.
"""

from __future__ import annotations

import sys
from typing import Annotated

from pydantic import BaseModel

from mcp.server.mcpserver import Context, Elicit, ElicitationResult, MCPServer, Resolve


class Name(BaseModel):
    name: str


class Colour(BaseModel):
    colour: str


class Age(BaseModel):
    age: int


def ask_name() -> Elicit[Name]:
    return Elicit("Your name?", Name)


def ask_colour(name: Annotated[Name, Resolve(ask_name)]) -> Elicit[Colour]:
    return Elicit(f"Favourite colour, {name.name}?", Colour)


def ask_age(colour: Annotated[Colour, Resolve(ask_colour)]) -> Elicit[Age]:
    return Elicit(f"Your age (you like {colour.colour})?", Age)


def ask_confirm() -> Elicit[Name]:
    return Elicit("Confirm your name?", Name)


app = MCPServer("sdk-interop")


@app.tool()
def three_questions(
    name: Annotated[Name, Resolve(ask_name)],
    colour: Annotated[Colour, Resolve(ask_colour)],
    age: Annotated[Age, Resolve(ask_age)],
) -> str:
    """Three questions in three rounds."""
    return f"{name.name}/{colour.colour}/{age.age}"


@app.tool()
def maybe(answer: Annotated[ElicitationResult[Name], Resolve(ask_confirm)]) -> str:
    """One question whose refusal is a result, not an error."""
    return f"action={answer.action}"


@app.tool()
async def count(steps: int, ctx: Context) -> str:
    """Report progress ``steps`` times."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step}")
    return f"counted {steps}"


if __name__ == "__main__":
    app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]), stateless_http=True)
