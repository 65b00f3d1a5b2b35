"""The handler every forwarded tool, prompt and resource runs: one generator, for both eras on both sides.

The proxy's catalogue entries all run :func:`forwarding_handler`'s generator. It speaks to
the upstream in the upstream's era and asks the downstream in the downstream's, with
the machinery every mrtr handler has:

- **a modern upstream**: each upstream round trip is a :class:`~mrtr.core.effects.RoundStep`
  (its result, an ``InputRequiredResult`` with the upstream's ``requestState``, is
  recorded in the ledger; a task tool's call runs it in its round, so the proxy's task
  begins at the first poll of the upstream's task, once the upstream made one), and
  each question in it becomes a request the generator
  yields (:func:`asked`: ``Elicit``, ``ElicitURL``, ``Sample``, ``ListRoots``), its
  answer sent back upstream in the next round (:func:`answered`). For a modern
  downstream the proxy's own sealed token then carries the upstream's ``requestState``,
  bound to the downstream caller: the proxy keeps nothing. For a 2025 downstream the
  same generator waits live at each yield.
- **a 2025 upstream** (its questions arrive as requests during one call): the call is
  held in this process (:mod:`mrtr.bridge.held`); a Step starts it and returns its first
  event, and each answer is delivered by a Step that returns the next event. The
  events are recorded, so a modern downstream's retries replay them and the token names
  the held call (:data:`~mrtr.core.holding.HELD_BY`); a 2025 downstream relays live.

A question the upstream asks that the downstream cannot be asked (a form outside the
elicitation vocabulary, a URL that is not https) fails the call with a clear error and
ends the upstream call, never a hang. A 2025 downstream that cancels while it is being
asked cancels the held upstream call at once.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any

import msgspec
import trio

from ..core.context import Context
from ..core.eras import LEGACY
from ..core.effects import Elicit, ElicitResult, ElicitURL, ListRoots, Request, RoundStep, Sample, Step
from ..core.errors import InternalError, ProtocolError
from ..core.forms import RequestedSchema
from ..core.holding import HELD_BY
from .upstream import Relay, Upstream, UpstreamUnavailable, resource_error

__all__ = ["UnrelayableQuestion", "answered", "asked", "forwarding_handler", "upstream_result"]

_SERVER_META = "io.modelcontextprotocol/"  # what the upstream says of itself in a result's _meta: not the proxy's


class UnrelayableQuestion(InternalError):
    """The upstream asked something the proxy cannot put to its downstream client (``-32603``)."""

    def __init__(self, method: Any, why: str) -> None:
        super().__init__(f"The upstream server asked a question the proxy cannot pass on ({method}: {why})",
                         data={"reason": "unrelayable-question", "method": method})


def asked(question: Mapping[str, Any], key: str | None = None) -> Request:
    """The request a handler yields for an upstream question (``{method, params}``, in wire shape), under ``key``."""
    method = question.get("method")
    params = question.get("params")
    params = params if isinstance(params, Mapping) else {}
    try:
        if method == "elicitation/create":
            message = params.get("message")
            if not isinstance(message, str):
                raise ValueError("an elicitation needs a string message")
            if params.get("mode") == "url":
                return ElicitURL(message, params.get("url"), key=key)  # type: ignore[arg-type]
            return Elicit(message, RequestedSchema(_form_schema(params.get("requestedSchema"))), key=key)
        if method == "sampling/createMessage":
            extra = {name: value for name, value in params.items() if name not in ("messages", "maxTokens", "_meta")}
            return Sample(list(params.get("messages") or []), max_tokens=params.get("maxTokens"), key=key,  # type: ignore[arg-type]
                          **extra)
        if method == "roots/list":
            return ListRoots(key=key)
    except (ValueError, TypeError) as error:
        raise UnrelayableQuestion(method, str(error)) from None
    raise UnrelayableQuestion(method, "not a question MCP defines")


_FORM_ROOT = ("$schema", "type", "properties", "required")


def _form_schema(schema: Any) -> Any:
    """An upstream's ``requestedSchema`` as a form reads it: what its root says of the object only.

    Servers send a title or a description at the root (pydantic's model title, as the
    Python SDK does), which the form vocabulary does not hold and which ask nothing.
    """
    if schema is None:
        return {"type": "object", "properties": {}}
    if isinstance(schema, Mapping):
        return {key: value for key, value in schema.items() if key in _FORM_ROOT}
    return schema


def answered(request: Request, value: Any) -> dict[str, Any]:
    """The downstream's answer to ``request`` as the upstream reads it (wire shape)."""
    if isinstance(value, ElicitResult):
        answer: dict[str, Any] = {"action": value.action}
        if value.action == "accept" and value.content is not None and isinstance(request, Elicit):
            answer["content"] = value.content
        return answer
    built = msgspec.to_builtins(value)
    return built if isinstance(built, dict) else {"value": built}


def upstream_result(result: Mapping[str, Any]) -> dict[str, Any]:
    """An upstream's final result as the proxy answers it: without what the upstream says of itself.

    ``resultType`` is the proxy's to set, and ``_meta`` keys of the protocol's own
    namespace (the upstream's ``serverInfo``) are the upstream's, not the proxy's.
    """
    shaped = dict(result)
    shaped.pop("resultType", None)
    meta = shaped.get("_meta")
    if isinstance(meta, dict):
        kept = {key: value for key, value in meta.items() if not str(key).startswith(_SERVER_META)}
        if kept:
            shaped["_meta"] = kept
        else:
            shaped.pop("_meta")
    return shaped


def _params(ctx: Context, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The params of the upstream request serving ``ctx``'s request."""
    if ctx.method == "resources/read":
        return {"uri": ctx.target}
    return {"name": ctx.target, "arguments": dict(arguments)}


def _round_of(result: Mapping[str, Any], where: str) -> dict[str, Any]:
    """What the ledger keeps of a modern upstream's ``InputRequiredResult``: what the next round needs.

    An ``inputRequests`` that is no object of ``{method, params}`` objects, or a
    ``requestState`` that is no string, cannot be answered: :class:`UpstreamUnavailable`.
    """
    requests = result.get("inputRequests") or {}
    state = result.get("requestState")
    if not isinstance(requests, Mapping) or not all(isinstance(value, Mapping) for value in requests.values()) \
            or (state is not None and not isinstance(state, str)) or (not requests and state is None):
        raise UpstreamUnavailable(f"The upstream server {where} answered with what cannot be used: an "
                                  "InputRequiredResult needs inputRequests of {method, params} objects or a "
                                  "string requestState")
    kept: dict[str, Any] = {"resultType": result.get("resultType"), "inputRequests": dict(requests)}
    if state is not None:
        kept["requestState"] = state
    return kept


# -- the Steps (module functions: a Step's identity is its function's name) --------------------


async def modern_round(upstream: Upstream, ctx: Context, method: str, params: dict[str, Any],
                       responses: dict[str, Any] | None, state: str | None) -> Any:
    """One round trip to a modern upstream: its final result, or the part of its ``InputRequiredResult`` kept."""
    sent = dict(params)
    if responses is not None:
        sent["inputResponses"] = responses
    if state is not None:
        sent["requestState"] = state
    try:
        result = await upstream.call(Relay(ctx), method, sent)
    except ProtocolError as error:
        raise _in_era(ctx, error) from None
    if result.get("resultType") == "task":  # the upstream made the call a task: its rounds come next
        task_id = result.get("taskId")
        if not isinstance(task_id, str) or not task_id:
            raise UpstreamUnavailable(f"The upstream server {upstream.where} made a task without a taskId")
        return {"resultType": "task", "taskId": task_id}
    if result.get("resultType") == "input_required":
        return _round_of(result, upstream.where)
    return {"resultType": "complete", "result": upstream_result(result)}


async def task_round(upstream: Upstream, ctx: Context, task_id: str, responses: dict[str, Any] | None,
                     answered: list[str]) -> Any:
    """One round of a modern upstream's task: its result, or the questions it waits on."""
    return await upstream.task_round(Relay(ctx), task_id, responses, answered)


async def held_start(upstream: Upstream, ctx: Context, method: str, params: dict[str, Any]) -> Any:
    """Start a call to a 2025 upstream, held in this process; its first event, naming the held call."""
    call = upstream.held.start(functools.partial(upstream.live, method, params), ctx.principal,
                               ctx.client_capabilities)
    event = await call.next_event(Relay(ctx))
    return {HELD_BY: call.id, **event}


async def held_answer(upstream: Upstream, ctx: Context, call_id: str, number: int, answer: dict[str, Any]) -> Any:
    """Deliver the answer to question ``number`` of a held call; its next event."""
    call = upstream.held.get(call_id)
    call.answer(number, answer)
    return await call.next_event(Relay(ctx))


def _unused(key: str, used: set[str]) -> str:
    """``key``, or ``key-2``, ``key-3``... if an earlier round of the conversation asked under it (keys are unique)."""
    chosen, number = key or "input", 1
    while chosen in used:
        number += 1
        chosen = f"{key}-{number}"
    used.add(chosen)
    return chosen


def _being_cancelled() -> bool:
    """Whether the running task is being cancelled (a 2025 downstream's call), as opposed to a round pausing."""
    try:
        return trio.current_effective_deadline() == -math.inf
    except RuntimeError:  # not in trio
        return False


def _raised(ctx: Context, error: Mapping[str, Any]) -> ProtocolError:
    code = error.get("code")
    return _in_era(ctx, ProtocolError(str(error.get("message") or "The upstream call failed"),
                                      code=code if isinstance(code, int) else None, data=error.get("data")))


def _in_era(ctx: Context, error: ProtocolError) -> ProtocolError:
    """``error`` as the downstream's era says it: a read's "resource not found" in its code (:func:`resource_error`)."""
    return resource_error(error, ctx.target) if ctx.method == "resources/read" else error


def forwarding_handler(upstream: Upstream) -> Any:
    """The handler the proxy's entries run, forwarding to ``upstream`` (see the module)."""

    async def forward(ctx: Context, /, **arguments: Any) -> Any:
        method = ctx.method
        params = _params(ctx, arguments)
        if upstream.era == LEGACY:
            event = yield Step(functools.partial(held_start, upstream, ctx), method, params)
            call_id = event[HELD_BY]
            while "question" in event:
                try:
                    request = asked(event["question"])
                except UnrelayableQuestion:
                    upstream.held.cancel(call_id)
                    raise
                if request.missing_capability(ctx.client_capabilities) is not None:
                    upstream.held.cancel(call_id)  # the yield below fails the call: the upstream's ends with it
                try:
                    answer = yield request
                except GeneratorExit:
                    if _being_cancelled():
                        upstream.held.cancel(call_id)  # a 2025 downstream cancelled while it was being asked
                    raise
                event = yield Step(functools.partial(held_answer, upstream, ctx), call_id, event["n"],
                                   answered(request, answer))
            if "error" in event:
                raise _raised(ctx, event["error"])
            yield upstream_result(event["result"])
            return
        outcome = yield RoundStep(functools.partial(modern_round, upstream, ctx), method, params, None, None)
        used: set[str] = set()  # the keys asked so far: each is asked under the upstream's key, once
        while outcome.get("resultType") == "input_required":
            requests: dict[str, Any] = outcome.get("inputRequests") or {}
            responses = None
            if requests:
                keys = list(requests)
                questions = tuple(asked(requests[key], _unused(str(key), used)) for key in keys)
                answers = yield questions
                responses = {key: answered(question, answer)
                             for key, question, answer in zip(keys, questions, answers, strict=True)}
            outcome = yield RoundStep(functools.partial(modern_round, upstream, ctx), method, params, responses,
                                 outcome.get("requestState"))
        if outcome.get("resultType") == "task":
            # An upstream task: driven round by round, its questions asked like any other.
            task_id, responses = outcome["taskId"], None
            outcome = yield Step(functools.partial(task_round, upstream, ctx), task_id, None, sorted(used))
            while outcome.get("resultType") == "input_required":
                requests = outcome["inputRequests"]
                keys = list(requests)
                questions = tuple(asked(requests[key], _unused(str(key), used)) for key in keys)
                answers = yield questions
                responses = {key: answered(question, answer)
                             for key, question, answer in zip(keys, questions, answers, strict=True)}
                outcome = yield Step(functools.partial(task_round, upstream, ctx), task_id, responses, sorted(used))
        yield outcome["result"]

    return forward
