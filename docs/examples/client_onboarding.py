import sys

import mrtr
import trio

URL = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000/mcp"  # where mrtr serve listens

async def main():
    answers = {"name": mrtr.accept(name="Ada Lovelace", email="ada@example.com"),
               "plan": mrtr.accept(plan="team"), "region": mrtr.accept(region="eu"),
               "newsletter": mrtr.accept(newsletter=False, channels=["email"])}

    def answer(request):  # called with each question the server asks
        return answers[next(iter(request.requested_schema["properties"]))]

    async with mrtr.Client(URL, on_elicit=answer) as client:
        result = await client.call_tool("onboard", {"company": "Acme"})
        print(result.structured)

trio.run(main)
