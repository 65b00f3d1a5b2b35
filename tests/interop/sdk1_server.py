"""A server on the official Python SDK 1.x (``mcp`` 1.30.0, FastMCP): a 2025-era server mrtr.Client must reach.

Runs in ``.cache/legacy-venv`` (not in mrtr's virtualenv): ``python sdk1_server.py http PORT``
serves Streamable HTTP with sessions on 127.0.0.1:PORT/mcp; ``python sdk1_server.py stdio``
speaks over stdin/stdout. Its tools ask through live server-to-client requests, the only
way this era has: ``interview`` asks two questions, ``confirm`` one whose refusal is a
result, ``think`` samples, ``where`` lists roots, ``count`` reports progress and
``chatty`` logs.
"""

from __future__ import annotations

import sys

from pydantic import BaseModel

from mcp.server.fastmcp import Context, FastMCP


class Name(BaseModel):
    name: str


class Colour(BaseModel):
    colour: str


class Sure(BaseModel):
    sure: bool


def build(port: int = 8000) -> FastMCP:
    app = FastMCP("sdk1-interop", host="127.0.0.1", port=port)

    @app.tool()
    async def interview(topic: str, ctx: Context) -> str:
        """Two questions, one after the other."""
        name = await ctx.elicit(f"Your name, for {topic}?", Name)
        if name.action != "accept" or name.data is None:
            return f"no name ({name.action})"
        colour = await ctx.elicit(f"Favourite colour, {name.data.name}?", Colour)
        if colour.action != "accept" or colour.data is None:
            return f"{name.data.name}/no colour ({colour.action})"
        return f"{name.data.name}/{colour.data.colour}/{topic}"

    @app.tool()
    async def confirm(ctx: Context) -> str:
        """One question whose refusal is a result."""
        answer = await ctx.elicit("Are you sure?", Sure)
        data = getattr(answer, "data", None)  # only an accepted answer has data
        return f"action={answer.action}" + (f" sure={data.sure}" if data is not None else "")

    @app.tool()
    async def think(question: str, ctx: Context) -> str:
        """Ask the client's model."""
        from mcp.types import SamplingMessage, TextContent

        reply = await ctx.session.create_message(
            [SamplingMessage(role="user", content=TextContent(type="text", text=question))], max_tokens=20)
        return f"model said: {reply.content.text}" if reply.content.type == "text" else "no text"

    @app.tool()
    async def where(ctx: Context) -> str:
        """The client's roots."""
        roots = await ctx.session.list_roots()
        return " ".join(str(root.uri) for root in roots.roots)

    @app.tool()
    async def count(steps: int, ctx: Context) -> str:
        """Report progress ``steps`` times."""
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps, f"step {step}")
        return f"counted {steps}"

    @app.tool()
    async def chatty(ctx: Context) -> str:
        """Log two messages."""
        await ctx.info("starting")
        await ctx.warning("almost done")
        return "said it"

    @app.prompt()
    def greet(who: str) -> str:
        """A greeting prompt."""
        return f"Say hello to {who}."

    @app.resource("notes://welcome")
    def welcome() -> str:
        """A welcome note."""
        return "welcome to the SDK server"

    return app


if __name__ == "__main__":
    if sys.argv[1] == "http":
        build(int(sys.argv[2])).run("streamable-http")
    else:
        build().run("stdio")
