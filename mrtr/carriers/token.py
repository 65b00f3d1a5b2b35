"""The wire carrier: the replay core behind a sealed ``requestState`` token.

For ``tools/call``, ``prompts/get`` and ``resources/read`` (the only methods that may
answer ``input_required``), the engine checks everything a retry carries before any
handler code runs, in this order:

1. ``inputResponses`` without ``requestState`` (strict policy only);
2. the token itself (Base64URL, length, authentication, payload, expiry);
3. the principal it was issued for;
4. the method;
5. the target (tool or prompt name, or resource uri);
6. the arguments (a digest sealed in the token);
7. each answer, merged into the ledger.

Then it replays the handler. A completed handler's result goes back unchanged; a
handler that needs more input gets a fresh token (new nonce, new ``issuedAt``, the
current request's binding) inside an ``InputRequiredResult``.

Two answer policies: ``"strict"`` (the default) refuses answers to keys the server
never issued or already recorded, and answers without a token; ``"lenient"`` follows
the spec's SHOULDs and ignores what it does not need, accepting a token-less answer for
a key the handler asks in this very execution. Malformed answers and every token or
binding failure are errors under both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from ..core import wire
from ..core.context import Context
from ..core.jsonrpc import RunSync
from ..core.errors import InvalidParams
from ..core.ledger import Ledger, merge_answers
from ..core.replay import Completed, InputRequired, handler_spec, replay, replay_async
from ..core.codec import RequestStateCodec, arguments_digest

__all__ = ["MRTR_METHODS", "AnswerPolicy", "Engine", "target_of", "arguments_of"]

MRTR_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})
"""The methods whose result may be an ``InputRequiredResult``."""

AnswerPolicy = Literal["strict", "lenient"]


def target_of(method: str, params: Mapping[str, Any]) -> str:
    """The name (tools, prompts) or uri (resources) a request addresses."""
    value = params.get("uri" if method == "resources/read" else "name")
    return value if isinstance(value, str) else ""


def arguments_of(method: str, params: Mapping[str, Any]) -> Any:
    """The arguments a token is bound to: ``arguments`` for tools and prompts, none for resources."""
    if method == "resources/read":
        return None
    return params.get("arguments")


def _present(value: Any) -> bool:
    """An ``inputResponses`` member counts as present unless absent, null or ``{}``."""
    return value is not None and not (isinstance(value, dict) and not value)


class Engine:
    """The wire carrier: runs handlers for the three MRTR methods against the ledger a token carries.

    Implements :class:`mrtr.carriers.contract.Carrier`.
    """

    __slots__ = ("codec", "policy")

    def __init__(self, codec: RequestStateCodec, *, answers: AnswerPolicy = "strict") -> None:
        if answers not in ("strict", "lenient"):
            raise ValueError(f'answers must be "strict" or "lenient", got {answers!r}')
        self.codec = codec
        self.policy: AnswerPolicy = answers

    def restore(self, method: str, params: Mapping[str, Any], principal: str | None, *,
                digest: bytes | None = None) -> tuple[Ledger, dict[str, Any]]:
        """Checks 1-7: the ledger to replay against and the answers that matched no slot.

        ``digest`` is the request's :func:`~mrtr.core.codec.arguments_digest` when the caller
        already has it. Raises :class:`~mrtr.core.errors.InvalidParams` (``-32602``) for
        anything that cannot be trusted. Runs no handler code.
        """
        if method not in MRTR_METHODS:
            raise ValueError(f"{method} cannot carry input responses")
        responses = params.get("inputResponses")
        token = params.get("requestState")
        lenient = self.policy == "lenient"
        if token is None:
            if _present(responses) and not lenient:
                raise InvalidParams(
                    "inputResponses present without requestState; retries must echo the requestState "
                    "from the InputRequiredResult"
                )
            return merge_answers(Ledger(), responses, lenient=True)
        state = self.codec.decode(token)
        if state.principal != principal:
            raise InvalidParams("requestState was issued for a different principal; it cannot be replayed by another caller")
        if state.method != method:
            raise InvalidParams(f"requestState was issued for {state.method} but the retry arrived on {method}")
        if state.target != target_of(method, params):
            raise InvalidParams(
                "requestState was issued for a different target; retries must re-send the original request parameters"
            )
        if digest is None:
            digest = arguments_digest(arguments_of(method, params))
        if state.arguments_digest != digest:
            raise InvalidParams(
                "requestState was issued for different arguments; retries must re-send the original arguments unchanged"
            )
        return merge_answers(Ledger(tuple(state.ledger)), responses, lenient=lenient)

    def seal(self, method: str, params: Mapping[str, Any], principal: str | None, outcome: InputRequired, *,
             digest: bytes | None = None) -> wire.InputRequiredResult:
        """The ``InputRequiredResult`` for a paused round, with a freshly minted token."""
        token = self.codec.mint(
            method=method,
            target=target_of(method, params),
            arguments=arguments_of(method, params),
            principal=principal,
            ledger=outcome.ledger.slots,
            digest=digest,
        )
        # The requests are already in wire shape; msgspec encodes the dicts as they are.
        requests: Any = outcome.to_wire()
        return wire.InputRequiredResult(input_requests=requests, request_state=token)

    async def execute(
        self,
        method: str,
        params: Mapping[str, Any],
        handler: Any,
        arguments: Mapping[str, Any] | None,
        ctx: Context,
        *,
        run_sync: RunSync | None = None,
    ) -> Completed | wire.InputRequiredResult:
        """Validate the retry, replay ``handler`` and shape the outcome.

        ``params`` are the request's raw params (with ``inputResponses`` and
        ``requestState``); ``arguments`` are the decoded arguments the handler is called
        with. The principal is ``ctx.principal``. ``run_sync``, when given, runs the
        replay of a sync handler (for example in a worker thread, so blocking handler
        code does not stall the event loop); async handlers always run in the caller.
        """
        # A retry checks its arguments against the token and a pause seals them again: hash them once.
        digest = None if params.get("requestState") is None else arguments_digest(arguments_of(method, params))
        ledger, unmatched = self.restore(method, params, ctx.principal, digest=digest)
        if run_sync is not None and not handler_spec(handler).is_async:
            outcome = await run_sync(lambda: replay(handler, arguments, ctx, ledger, unmatched))
        else:
            outcome = await replay_async(handler, arguments, ctx, ledger, unmatched)
        if isinstance(outcome, Completed):
            return outcome
        return self.seal(method, params, ctx.principal, outcome, digest=digest)
