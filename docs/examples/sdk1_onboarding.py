import sys

import anyio
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client

URL = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000/mcp"  # where mrtr serve listens
ANSWERS = {"name": {"name": "Ada Lovelace", "email": "ada@example.com"}, "plan": {"plan": "team"},
           "region": {"region": "eu"}, "newsletter": {"newsletter": False, "channels": ["email"]}}

async def on_elicit(context, params):  # one call per question, the generator waiting at its yield
    return types.ElicitResult(action="accept", content=ANSWERS[next(iter(params.requestedSchema["properties"]))])

async def main():
    async with streamable_http_client(URL) as (read, write, _):
        async with ClientSession(read, write, elicitation_callback=on_elicit) as session:
            await session.initialize()
            result = await session.call_tool("onboard", {"company": "Acme"})
            print(result.structuredContent)

anyio.run(main)
