"""The official Python SDK 1.x client (``mcp==1.30.0``) against ``tests.middleware_app:server``: the built-ins, 2025 era.

Run with the python of the legacy virtualenv, never imported by the project's own test
process::

    .cache/legacy-venv/bin/python tests/legacy/middleware_checks.py --mrtr .venv/bin/mrtr --out DIR
    .cache/legacy-venv/bin/python tests/legacy/middleware_checks.py --url http://127.0.0.1:PORT/mcp --tenant T --out DIR

Over stdio it starts ``mrtr serve tests.middleware_app:server --stdio`` (the session is the
caller: stdio has no headers), everything the server writes copied to
``DIR/stdout-1.jsonl``; over HTTP it sends ``x-tenant: T`` (the principal) and copies every
message it reads to the same file, for the test to validate against the 2025-11-25
schema. Each scenario prints one JSON line, ``{"scenario", "ok", "detail"}``; ``flood``,
which spends the caller's tokens, runs last.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import sys
import traceback
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx
from mcp import ClientSession, McpError, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sdk_checks import _Copying  # noqa: E402  (the same copy of every message read, as the SDK checks make)

APP = "tests.middleware_app:server"
REPO_ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ["listing", "refused", "cached", "conversation", "flood"]


@contextlib.asynccontextmanager
async def session(mrtr: str, out: Path, url: str | None, tenant: str | None) -> AsyncIterator[ClientSession]:
    raw = out / "stdout-1.jsonl"
    answers = {"Your name?": {"name": "Ada"}, "Your email?": {"email": "ada@example.com"}}

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content=answers[params.message])

    options: dict[str, Any] = dict(elicitation_callback=on_elicit,
                                   client_info=types.Implementation(name="middleware-checks", version="1.0"))
    if url is not None:
        headers = {"x-tenant": tenant} if tenant else {}
        http = httpx.AsyncClient(transport=_Copying(raw), headers=headers, timeout=httpx.Timeout(30.0, read=120.0))
        async with http, streamable_http_client(url, http_client=http) as (read, write, _):
            async with ClientSession(read, write, **options) as opened:
                yield opened
        return
    command = f"{shlex.quote(mrtr)} serve {APP} --stdio | tee {shlex.quote(str(raw))}"
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    parameters = StdioServerParameters(command="/bin/sh", args=["-c", command], env=env, cwd=str(REPO_ROOT))
    async with stdio_client(parameters) as (read, write):
        async with ClientSession(read, write, **options) as opened:
            yield opened


def report(scenario: str, ok: bool, detail: Any = None) -> None:
    print(json.dumps({"scenario": scenario, "ok": ok, "detail": detail}, default=str), flush=True)


def text_of(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent), block
    return block.text


async def listing(opened: ClientSession) -> Any:
    tools = {tool.name for tool in (await opened.list_tools()).tools}
    assert {"signup", "rates", "report"} <= tools and not {name for name in tools if name.startswith("admin_")}, tools
    prompts = {prompt.name for prompt in (await opened.list_prompts()).prompts}
    assert prompts == {"summary"}, prompts
    templates = (await opened.list_resource_templates()).resourceTemplates
    assert templates == [], templates
    return sorted(tools)


async def refused(opened: ClientSession) -> Any:
    tool = await opened.call_tool("admin_reset", {})
    assert tool.isError and text_of(tool) == 'Tool "admin_reset" is not available', tool
    unknown = await opened.call_tool("admin_nosuch", {})
    assert unknown.isError and text_of(unknown) == 'Tool "admin_nosuch" is not available', unknown
    errors = []
    for attempt in (lambda: opened.get_prompt("admin_prompt"), lambda: opened.read_resource("secret://1")):
        try:
            await attempt()
        except McpError as error:
            errors.append((error.error.code, error.error.message))
        else:
            raise AssertionError("a refused request was answered")
    assert errors == [(-32603, 'Prompt "admin_prompt" is not available'),
                      (-32603, "Resource secret://1 is not available")], errors
    return [text_of(tool), errors]


async def cached(opened: ClientSession) -> Any:
    first = text_of(await opened.call_tool("rates", {"currency": "CHF"}))
    second = text_of(await opened.call_tool("rates", {"currency": "CHF"}))
    assert first == second and first.startswith("CHF run "), (first, second)
    return first


async def conversation(opened: ClientSession) -> Any:
    result = await opened.call_tool("signup", {"plan": "pro"})
    assert not result.isError and text_of(result) == "Ada <ada@example.com> on pro", result
    return text_of(result)


async def flood(opened: ClientSession) -> Any:
    admitted = 0
    for _ in range(100):
        try:
            await opened.list_prompts()
        except McpError as error:
            assert error.error.code == -32000, error.error
            data = error.error.data
            assert isinstance(data, dict) and data["retryAfter"] > 0, data
            assert error.error.message.startswith("Too many requests"), error.error.message
            return {"admitted": admitted, "retryAfter": data["retryAfter"]}
        admitted += 1
    raise AssertionError("100 requests and no refusal")


async def main(mrtr: str, out: Path, url: str | None, tenant: str | None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    try:
        async with session(mrtr, out, url, tenant) as opened:
            await opened.initialize()
            for name, scenario in (("listing", listing), ("refused", refused), ("cached", cached),
                                   ("conversation", conversation), ("flood", flood)):
                try:
                    with anyio.fail_after(60):
                        report(name, True, await scenario(opened))
                except Exception:
                    report(name, False, traceback.format_exc())
    except Exception:
        report("listing", False, traceback.format_exc())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mrtr", default="mrtr")
    parser.add_argument("--url", default=None)
    parser.add_argument("--tenant", default=None)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    anyio.run(main, args.mrtr, args.out, args.url, args.tenant)
