"""The official Python SDK 1.x client (``mcp==1.30.0``, a 2025-11-25 client) against an mrtr server.

Run with the python of the legacy virtualenv, never imported by the project's own test
process::

    .cache/legacy-venv/bin/python tests/legacy/sdk_checks.py --mrtr .venv/bin/mrtr --out DIR
    .cache/legacy-venv/bin/python tests/legacy/sdk_checks.py --url http://127.0.0.1:PORT/mcp --out DIR

Over stdio it starts ``mrtr serve tests.legacy.app:server --stdio`` through
``ClientSession`` and ``stdio_client``, with everything the server writes to stdout also
copied (by ``tee``) to ``DIR/stdout-<n>.jsonl``. With ``--url`` it talks Streamable HTTP
(``streamable_http_client``) to a server the caller started with
``MRTR_TEST_MARKERS=DIR/markers``, and its HTTP client copies every JSON-RPC message the
server sends (JSON bodies and SSE events) to the same files as they are read. Either
way the test process validates every message against the 2025-11-25 schema. Handlers
leave marker files in ``DIR/markers``. Each scenario prints one JSON line:
``{"scenario": ..., "ok": bool, "detail": ...}``; the exit status is 0 even when
scenarios fail, so the test names the one that did.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import sys
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
from mcp import ClientSession, McpError, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.context import RequestContext

SERVER_SPEC = "tests.legacy.app:server"
REPO_ROOT = Path(__file__).resolve().parents[2]

SCENARIOS: list[str] = []
"""Every scenario, in the order they run."""


class Client:
    """What one session's callbacks answer and record."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.elicited: list[types.ElicitRequestParams] = []
        self.sampled: list[types.CreateMessageRequestParams] = []
        self.logs: list[types.LoggingMessageNotificationParams] = []
        self.notifications: list[Any] = []
        self.roots_asked = 0
        self.answer: Callable[[types.ElicitRequestParams], Awaitable[types.ElicitResult]] | None = None

    async def on_elicit(self, context: RequestContext[ClientSession, Any],
                        params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
        self.elicited.append(params)
        assert self.answer is not None, f"an unexpected question: {params.message}"
        return await self.answer(params)

    async def on_sample(self, context: RequestContext[ClientSession, Any],
                        params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        self.sampled.append(params)
        return types.CreateMessageResult(role="assistant", model="legacy-model",
                                         content=types.TextContent(type="text", text="tea is calm"),
                                         stopReason="endTurn")

    async def on_roots(self, context: RequestContext[ClientSession, Any]) -> types.ListRootsResult:
        self.roots_asked += 1
        return types.ListRootsResult(roots=[types.Root(uri="file:///work/project", name="project")])

    async def on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(params)

    async def on_message(self, message: Any) -> None:
        if isinstance(message, types.ServerNotification):
            self.notifications.append(message.root)


_sessions = 0
URL: str | None = None
"""The server's MCP endpoint when the checks run over Streamable HTTP (``--url``); over stdio, ``None``."""


class _Copied(httpx.AsyncByteStream):
    """A response body passed on as read, every JSON-RPC message in it also written to a file, one a line."""

    def __init__(self, inner: Any, raw: Path, sse: bool) -> None:
        self.inner = inner
        self.raw = raw
        self.sse = sse
        self.pending = b""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.inner:
            self.pending += chunk
            self._copy()
            yield chunk
        self._copy(final=True)

    def _copy(self, final: bool = False) -> None:
        if not self.sse:
            if final and self.pending.strip():
                self._write(self.pending)
            return
        *events, self.pending = self.pending.replace(b"\r\n", b"\n").split(b"\n\n")
        for event in events:
            data = b"\n".join(line[5:].lstrip(b" ") for line in event.split(b"\n") if line.startswith(b"data:"))
            if data.strip():
                self._write(data)

    def _write(self, data: bytes) -> None:
        with self.raw.open("ab") as copy:
            copy.write(json.dumps(json.loads(data)).encode() + b"\n")

    async def aclose(self) -> None:
        await self.inner.aclose()


class _Copying(httpx.AsyncBaseTransport):
    """The default transport, every server message also copied to ``raw`` (see :class:`_Copied`)."""

    def __init__(self, raw: Path) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.raw = raw
        raw.touch()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        kind = response.headers.get("content-type", "")
        if kind.startswith(("application/json", "text/event-stream")):
            response.stream = _Copied(response.stream, self.raw, kind.startswith("text/event-stream"))
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


@contextlib.asynccontextmanager
async def session(mrtr: str, out: Path, *, sampling: bool = True) -> AsyncIterator[tuple[ClientSession, Client]]:
    """A ClientSession over stdio to ``mrtr serve --stdio`` (or over HTTP to ``URL``), what the server
    sends also copied to a file."""
    global _sessions
    _sessions += 1
    raw = out / f"stdout-{_sessions}.jsonl"
    client = Client(out)
    options: dict[str, Any] = dict(sampling_callback=client.on_sample if sampling else None,
                                   elicitation_callback=client.on_elicit, list_roots_callback=client.on_roots,
                                   logging_callback=client.on_log, message_handler=client.on_message,
                                   client_info=types.Implementation(name="sdk-checks", version="1.0"))
    if URL is not None:
        http = httpx.AsyncClient(transport=_Copying(raw), timeout=httpx.Timeout(30.0, read=300.0))
        async with http, streamable_http_client(URL, http_client=http) as (read, write, _):
            async with ClientSession(read, write, **options) as opened:
                yield opened, client
        return
    command = f"{shlex.quote(mrtr)} serve {SERVER_SPEC} --stdio | tee {shlex.quote(str(raw))}"
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["MRTR_TEST_MARKERS"] = str(out / "markers")
    parameters = StdioServerParameters(command="/bin/sh", args=["-c", command], env=env, cwd=str(REPO_ROOT))
    async with stdio_client(parameters) as (read, write):
        async with ClientSession(read, write, **options) as opened:
            yield opened, client


def report(scenario: str, ok: bool, detail: Any = None) -> None:
    print(json.dumps({"scenario": scenario, "ok": ok, "detail": detail}, default=str), flush=True)


def text_of(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent), block
    return block.text


def accept(**content: Any) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content=content)


def marker(out: Path, name: str) -> str:
    path = out / "markers" / name
    return path.read_text() if path.exists() else ""


# -- scenarios ------------------------------------------------------------------------------------


async def connect(opened: ClientSession, client: Client, init: types.InitializeResult) -> Any:
    assert init.protocolVersion == "2025-11-25", init.protocolVersion
    assert init.serverInfo.name == "legacy-fixture" and init.serverInfo.version == "1.2.3"
    capabilities = init.capabilities
    assert capabilities.tools and capabilities.tools.listChanged
    assert capabilities.resources and capabilities.resources.subscribe
    assert capabilities.logging is not None and capabilities.completions is not None
    assert capabilities.tasks is None
    tools = await opened.list_tools()
    assert {"onboard", "ask_model", "where", "count", "hold", "polite", "sign_in"} <= {t.name for t in tools.tools}
    assert (await opened.send_ping()) is not None
    return {"version": init.protocolVersion, "tools": len(tools.tools)}


async def conversation(opened: ClientSession, client: Client, out: Path) -> Any:
    """Several questions, a Step, then a group whose two requests are both out before either is answered."""
    raw = sorted(out.glob("stdout-*.jsonl"))[-1]
    group_seen: list[bool] = []

    async def answer(params: types.ElicitRequestParams) -> types.ElicitResult:
        message = params.message
        if "Your name" in message:
            return accept(name="Ada")
        if message == "Which plan?":
            return accept(plan="enterprise")
        if message.startswith("How do we reach"):
            # Answering the first member of the group: the second must already be on the wire. (Over HTTP
            # the copy is made as the SDK reads, one request at a time: the raw HTTP tests check the wire.)
            if URL is None:
                with anyio.move_on_after(5):
                    while "Shall we start?" not in raw.read_text():
                        await anyio.sleep(0.02)
            group_seen.append(URL is not None or "Shall we start?" in raw.read_text())
            return accept(email="ada@example.com", newsletter=True)
        return accept(go=True)

    client.answer = answer
    client.elicited.clear()
    result = await opened.call_tool("onboard", {"company": "acme"})
    assert not result.isError, result
    assert text_of(result) == "Ada on enterprise (ada@example.com) at acme", text_of(result)
    asked = [params.message for params in client.elicited]
    assert asked == ["Welcome to acme! Your name?", "Which plan?", "How do we reach you?", "Shall we start?"], asked
    assert group_seen == [True], group_seen
    assert marker(out, "plan-options") == "read\n", marker(out, "plan-options")  # the Step ran once
    return {"asked": asked, "result": text_of(result)}


async def sampling(opened: ClientSession, client: Client, out: Path) -> Any:
    result = await opened.call_tool("ask_model", {"topic": "tea"})
    assert text_of(result) == "model legacy-model said: tea is calm", text_of(result)
    [asked] = client.sampled
    assert asked.maxTokens == 50 and asked.systemPrompt == "Be brief."
    return text_of(result)


async def roots(opened: ClientSession, client: Client, out: Path) -> Any:
    result = await opened.call_tool("where", {})
    assert text_of(result) == "project=file:///work/project", text_of(result)
    assert client.roots_asked == 1
    return text_of(result)


async def progress(opened: ClientSession, client: Client, out: Path) -> Any:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total, message))

    async def answer(params: types.ElicitRequestParams) -> types.ElicitResult:
        return accept(report=True)

    client.answer = answer
    result = await opened.call_tool("count", {"steps": 3}, progress_callback=on_progress)
    assert text_of(result) == "counted 3, report accept", text_of(result)
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")], seen
    return seen


async def cancellation(opened: ClientSession, client: Client, out: Path) -> Any:
    """Cancel a call whose handler waits for an answer: no response, the handler's finally runs, the question is withdrawn."""
    raw = sorted(out.glob("stdout-*.jsonl"))[-1]
    asked = anyio.Event()

    async def answer(params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.set()
        # The SDK answers one server request at a time: hold this one until the server's finally ran.
        with anyio.move_on_after(10):
            while "finally ran" not in marker(out, "held"):
                await anyio.sleep(0.02)
        return types.ElicitResult(action="decline")

    client.answer = answer
    call_id = opened._request_id  # the id the next request gets
    outcome: list[Any] = []
    async with anyio.create_task_group() as group:
        async def call() -> None:
            outcome.append(await opened.call_tool("hold", {"marker": "held"}))

        group.start_soon(call)
        with anyio.fail_after(10):
            await asked.wait()
        await opened.send_notification(types.ClientNotification(types.CancelledNotification(
            params=types.CancelledNotificationParams(requestId=call_id, reason="the user pressed stop"))))
        with anyio.fail_after(10):
            while "finally ran" not in marker(out, "held"):
                await anyio.sleep(0.02)
        await anyio.sleep(0.5)  # the cancelled call must stay unanswered
        group.cancel_scope.cancel()
    assert outcome == [], outcome
    lines = [json.loads(line) for line in raw.read_text().splitlines() if line.strip()]
    [question] = [m for m in lines if m.get("method") == "elicitation/create" and m["params"]["message"] == "Still there?"]
    withdrawn = [m["params"]["requestId"] for m in lines if m.get("method") == "notifications/cancelled"]
    assert withdrawn == [question["id"]], withdrawn
    assert not [m for m in lines if m.get("id") == call_id and "method" not in m], "a cancelled call was answered"
    assert (await opened.send_ping()) is not None  # the session goes on
    return {"withdrawn": withdrawn, "marker": marker(out, "held")}


async def decline(opened: ClientSession, client: Client, out: Path) -> Any:
    async def no(params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async def later(params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="cancel")

    client.answer = no
    declined = text_of(await opened.call_tool("polite", {}))
    client.answer = later
    cancelled = text_of(await opened.call_tool("polite", {}))
    assert declined == "declined: nothing stored" and cancelled == "cancelled: ask me later", (declined, cancelled)
    return [declined, cancelled]


async def url_elicitation(opened: ClientSession, client: Client, out: Path) -> Any:
    async def answer(params: types.ElicitRequestParams) -> types.ElicitResult:
        if isinstance(params, types.ElicitRequestURLParams):
            return types.ElicitResult(action="accept")
        return accept(name="Grace")

    client.answer = answer
    client.elicited.clear()
    client.notifications.clear()
    result = await opened.call_tool("sign_in", {})
    assert text_of(result) == "signed in as Grace", text_of(result)
    url = client.elicited[0]
    assert isinstance(url, types.ElicitRequestURLParams), url
    assert url.url == "https://auth.example.com/sign-in?flow=42" and url.elicitationId
    completed = [n for n in client.notifications if isinstance(n, types.ElicitCompleteNotification)]
    assert [n.params.elicitationId for n in completed] == [url.elicitationId], completed
    return {"elicitationId": url.elicitationId}


async def logging(opened: ClientSession, client: Client, out: Path) -> Any:
    await opened.set_logging_level("info")
    client.logs.clear()
    assert text_of(await opened.call_tool("chatty", {})) == "logged"
    with anyio.fail_after(5):
        while len(client.logs) < 2:
            await anyio.sleep(0.01)
    levels = [log.level for log in client.logs]
    assert levels == ["info", "error"], levels
    return levels


async def results(opened: ClientSession, client: Client, out: Path) -> Any:
    profile = await opened.call_tool("profile", {})
    assert profile.structuredContent == {"name": "Ada", "languages": ["en", "fr"]}, profile
    numbers = await opened.call_tool("numbers", {})
    assert numbers.structuredContent is None and text_of(numbers) == "[1, 2, 3]"
    async def ready(params: types.ElicitRequestParams) -> types.ElicitResult:
        return accept(ready=True)

    client.answer = ready
    broken = await opened.call_tool("broken", {})
    assert broken.isError and "tool broken failed with an internal error" in text_of(broken), broken
    assert "database" not in text_of(broken)  # masked, as in the modern era

    async def sure(params: types.ElicitRequestParams) -> types.ElicitResult:
        return accept(sure=True)

    client.answer = sure
    refused = await opened.call_tool("refuse", {"expense": 42})
    assert refused.isError and text_of(refused) == "No expense 42 in your account", refused
    try:
        await opened.read_resource("test://missing")  # type: ignore[arg-type]
    except McpError as error:
        assert error.error.code == -32002, error.error
        missing = error.error.code
    else:
        raise AssertionError("reading a missing resource succeeded")
    return {"structured": profile.structuredContent, "missing": missing, "refused": text_of(refused)}


async def prompt_and_resource(opened: ClientSession, client: Client, out: Path) -> Any:
    async def answer(params: types.ElicitRequestParams) -> types.ElicitResult:
        return accept(level="junior") if "Seniority" in params.message else accept(show=True)

    client.answer = answer
    prompt = await opened.get_prompt("interview", {"role": "engineer"})
    content = prompt.messages[0].content
    assert isinstance(content, types.TextContent) and content.text == "Interview a junior engineer.", content
    read = await opened.read_resource("test://notes/42")  # type: ignore[arg-type]
    assert read.contents[0].text == "note 42", read  # type: ignore[union-attr]
    completion = await opened.complete(types.PromptReference(type="ref/prompt", name="interview"),
                                       {"name": "role", "value": "d"})
    assert completion.completion.values == ["designer"], completion
    assert (await opened.subscribe_resource("test://static")) is not None  # type: ignore[arg-type]
    return {"prompt": content.text, "resource": read.contents[0].text}  # type: ignore[union-attr]


async def missing_capability(mrtr: str, out: Path) -> Any:
    async with session(mrtr, out, sampling=False) as (opened, client):
        init = await opened.initialize()
        assert init.protocolVersion == "2025-11-25"
        result = await opened.call_tool("ask_model", {"topic": "tea"})
        assert result.isError and "sampling" in text_of(result), result
        return text_of(result)


ORDER: list[tuple[str, Callable[..., Awaitable[Any]]]] = [
    ("conversation", conversation), ("sampling", sampling), ("roots", roots), ("progress", progress),
    ("cancellation", cancellation), ("decline", decline), ("url_elicitation", url_elicitation),
    ("logging", logging), ("results", results), ("prompt_and_resource", prompt_and_resource),
]
SCENARIOS[:] = ["_connect", *[name for name, _ in ORDER], "missing_capability"]


async def main(mrtr: str, out: Path) -> None:
    (out / "markers").mkdir(parents=True, exist_ok=True)
    try:
        async with session(mrtr, out) as (opened, client):
            init = await opened.initialize()
            report("_connect", True, await connect(opened, client, init))
            for name, scenario in ORDER:
                try:
                    with anyio.fail_after(60):
                        report(name, True, await scenario(opened, client, out))
                except Exception:
                    report(name, False, traceback.format_exc())
    except Exception:
        report("_connect", False, traceback.format_exc())
    try:
        with anyio.fail_after(60):
            report("missing_capability", True, await missing_capability(mrtr, out))
    except Exception:
        report("missing_capability", False, traceback.format_exc())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mrtr", default="mrtr")
    parser.add_argument("--url", default=None, help="talk Streamable HTTP to this endpoint instead of stdio")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()
    if args.list:
        print("\n".join(SCENARIOS))
        sys.exit(0)
    URL = args.url
    anyio.run(main, args.mrtr, args.out)
