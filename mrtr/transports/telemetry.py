"""OpenTelemetry tracing: a span per request, when the ``otel`` extra is installed.

``pip install 'mrtr[otel]'`` brings ``opentelemetry-api``; configure a tracer provider
and exporter the usual way (``opentelemetry-sdk``, or ``opentelemetry-instrument``) and
every request a transport answers becomes a ``SERVER`` span named
``"{method} {target}"`` with these attributes:

- ``mcp.method.name``: the JSON-RPC method;
- ``gen_ai.tool.name`` / ``gen_ai.prompt.name`` / ``mcp.resource.uri``: the target;
- ``mrtr.round``: the round number when the request shows it (1 for a first request);
- ``mrtr.result_type``: ``complete``, ``input_required``, ``tool_error``, ``error``,
  ``cancelled`` or ``aborted``;
- ``rpc.jsonrpc.error_code`` and an error status for a JSON-RPC error;
- ``http.response.status_code`` on HTTP;
- ``mrtr.<name>`` for each field a middleware noted on the request (``Timing``'s
  ``mrtr.timing_ms``: see :meth:`mrtr.server.pipeline.Incoming.note`).

A client that sends W3C trace context in the request's ``params._meta``
(``traceparent``, ``tracestate``, ``baggage``) gets the span as a child of its own.

Without the extra, :data:`ENABLED` is false and transports skip every call here: no
import, no allocation per request. With the extra but no tracer provider configured, no
span is built either.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

try:
    import opentelemetry.propagate as _propagate
    import opentelemetry.trace as _trace
    from opentelemetry.environment_variables import OTEL_PYTHON_TRACER_PROVIDER
except ImportError:  # the extra is not installed
    ENABLED = False
else:
    ENABLED = True
    # A provider named in the environment is loaded by the API's first get_tracer_provider().
    _PROVIDER_FROM_ENVIRONMENT = OTEL_PYTHON_TRACER_PROVIDER in os.environ

__all__ = ["ENABLED", "end_span", "start_span"]

_TARGET_ATTRIBUTE = {"tools/call": "gen_ai.tool.name", "prompts/get": "gen_ai.prompt.name",
                     "resources/read": "mcp.resource.uri"}
_CONTEXT_KEYS = ("traceparent", "tracestate", "baggage")


def _tracer() -> Any:
    return _trace.get_tracer("mrtr")


def _unconfigured() -> bool:
    """Whether no tracer provider is configured, so a span would be the API's stand-in.

    While none is set, ``get_tracer_provider()`` looks the environment up on every call
    (a few percent of what a plain request costs the server); the API's own global says the
    same without that, when this version of the API has it.
    """
    if getattr(_trace, "_TRACER_PROVIDER", _trace) is None and not _PROVIDER_FROM_ENVIRONMENT:
        return True
    return isinstance(_trace.get_tracer_provider(), (_trace.ProxyTracerProvider, _trace.NoOpTracerProvider))


def start_span(method: str, target: str | None, round_number: int | None, meta: Any) -> Any:
    """Start the span of one request; the parent comes from ``meta`` when it carries trace context.

    ``None`` while no tracer provider is configured: the API's stand-in would only
    build spans nobody records.
    """
    if _unconfigured():
        return None
    carrier = {key: meta[key] for key in _CONTEXT_KEYS if isinstance(meta, Mapping) and isinstance(meta.get(key), str)}
    parent = _propagate.extract(carrier) if carrier else None
    attributes: dict[str, Any] = {"mcp.method.name": method}
    if target is not None:
        attributes[_TARGET_ATTRIBUTE.get(method, "mcp.target")] = target
    if round_number is not None:
        attributes["mrtr.round"] = round_number
    name = f"{method} {target}" if target is not None else method
    return _tracer().start_span(name, context=parent, kind=_trace.SpanKind.SERVER, attributes=attributes)


def end_span(span: Any, result: str | None, code: int | None, status: int | None,
             notes: Mapping[str, Any] | None = None) -> None:
    """Record how the request ended (and the fields its middleware noted, as ``mrtr.<name>``) and end its span."""
    if notes:
        for name, value in notes.items():
            span.set_attribute(f"mrtr.{name}", value)
    if result is not None:
        span.set_attribute("mrtr.result_type", result)
    if status is not None:
        span.set_attribute("http.response.status_code", status)
    if code is not None:
        span.set_attribute("rpc.jsonrpc.error_code", code)
        span.set_attribute("error.type", str(code))
        span.set_status(_trace.Status(_trace.StatusCode.ERROR, f"JSON-RPC error {code}"))
    elif result in ("tool_error", "aborted"):
        span.set_status(_trace.Status(_trace.StatusCode.ERROR, result))
    span.end()
