"""OpenTelemetry: a span per request through the real HTTP server, parented on the client's trace context."""

from __future__ import annotations

from functools import partial

import httpx
import pytest
import trio

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from mrtr.transports import telemetry as otel  # noqa: E402
from mrtr.transports.http.native import serve  # noqa: E402

from .http.app import server as app_server  # noqa: E402
from .http.conftest import BASE_HEADERS, mcp_headers, rpc  # noqa: E402

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"

_exporter = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def _provider():
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_exporter))
    trace.set_tracer_provider(provider)  # once per process: the global provider cannot be replaced
    yield


@pytest.fixture
def spans():
    _exporter.clear()
    yield _exporter
    _exporter.clear()


async def test_a_span_per_request_with_the_client_trace_context(nursery, spans):
    assert otel.ENABLED
    port = await nursery.start(partial(serve, app_server, "127.0.0.1", 0))
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5.0) as client:
        async def post(message):
            return await client.post("/mcp", json=message, headers={**BASE_HEADERS, **mcp_headers(message)})

        first = await post(rpc("tools/call", {"name": "ask_name"},
                               traceparent=f"00-{TRACE_ID}-{PARENT_ID}-01"))
        assert first.json()["result"]["resultType"] == "input_required"
        await post(rpc("prompts/get", {"name": "broken"}, id=2))
    with trio.fail_after(5):  # a span ends just after its answer is written
        while len(spans.get_finished_spans()) < 2:
            await trio.sleep(0.01)
    (asked, broken) = spans.get_finished_spans()
    assert asked.name == "tools/call ask_name"
    assert asked.kind == trace.SpanKind.SERVER
    assert asked.attributes["mcp.method.name"] == "tools/call"
    assert asked.attributes["gen_ai.tool.name"] == "ask_name"
    assert asked.attributes["mrtr.round"] == 1
    assert asked.attributes["mrtr.result_type"] == "input_required"
    assert asked.attributes["http.response.status_code"] == 200
    assert format(asked.context.trace_id, "032x") == TRACE_ID  # continues the client's trace
    assert format(asked.parent.span_id, "016x") == PARENT_ID
    assert broken.attributes["rpc.jsonrpc.error_code"] == -32603
    assert broken.status.status_code == trace.StatusCode.ERROR
    assert broken.parent is None  # no trace context sent: a new trace


async def test_what_the_middleware_noted_goes_on_the_span(nursery, spans):
    from mrtr import Server
    from mrtr.middleware import Cache, Timing
    from mrtr.testing import TEST_SECRET

    server = Server("timed", secret=TEST_SECRET)

    @server.tool(annotations={"readOnlyHint": True})
    def rates(currency: str) -> str:
        return f"{currency}: 1.08"

    server.middleware(Timing())
    server.middleware(Cache(ttl=30))
    port = await nursery.start(partial(serve, server, "127.0.0.1", 0))
    message = rpc("tools/call", {"name": "rates", "arguments": {"currency": "EUR"}})
    headers = {**BASE_HEADERS, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "rates"}
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5.0) as client:
        for _ in range(2):
            assert (await client.post("/mcp", json=message, headers=headers)).status_code == 200
    with trio.fail_after(5):
        while len(spans.get_finished_spans()) < 2:
            await trio.sleep(0.01)
    first, second = spans.get_finished_spans()
    assert first.attributes["mrtr.cache"] == "miss" and second.attributes["mrtr.cache"] == "hit"
    assert first.attributes["mrtr.timing_ms"] >= 0 and isinstance(second.attributes["mrtr.timing_ms"], float)
