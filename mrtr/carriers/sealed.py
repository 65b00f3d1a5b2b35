"""The token carrier: the replay core behind a sealed ``requestState`` token.

For ``tools/call``, ``prompts/get`` and ``resources/read`` (the only methods that may
answer ``input_required``), the token carrier checks everything a retry carries before
any handler code runs, in this order:

1. ``inputResponses`` without ``requestState`` (strict policy only);
2. the token itself (Base64URL, length, authentication, payload, expiry);
3. the principal it was issued for;
4. the method;
5. the target (tool or prompt name, or resource uri);
6. the arguments (a digest sealed in the token);
7. each answer, merged into the ledger.

Then it replays the handler. A completed handler's value goes back to the server,
which shapes it; a handler that needs more input gets a fresh token (new nonce, new
``issuedAt``, the current request's binding, the handler's version) inside an
``InputRequiredResult``. What a request binds a token to is read from it once
(:class:`TokenBinding`) and serves both the checks and the sealing. A replay mismatch
against a token sealed by another version of the handler says that a deploy caused it
(:func:`~mrtr.core.versions.deploy_hint`).

:meth:`TokenCarrier.round_key` names a retry for the store that records rounds which
must run once: checks 1-6 first, so only a token this server sealed can name one.

The tasks carrier (:mod:`mrtr.carriers.tasks`) uses the same rounds for a task call's
questions before its first Step (:meth:`TokenCarrier.until_step`).

Two answer policies: ``"strict"`` (the default) refuses answers to keys the server
never issued or already recorded, and answers without a token; ``"lenient"`` follows
the spec's SHOULDs and ignores what it does not need, accepting a token-less answer for
a key the handler asks in this very execution. Malformed answers and every token or
binding failure are errors under both.
"""

from __future__ import annotations

import hashlib
from collections.abc import Coroutine, Mapping
from typing import Any, Literal, overload

from ..core import wire
from ..core.codec import RequestState, RequestStateCodec, arguments_digest
from ..core.context import Context
from ..core.errors import InvalidParams, ReplayMismatch
from ..core.jsonrpc import RunSync, canonical
from ..core.ledger import Ledger, merge_answers
from ..core.replay import Completed, Detached, InputRequired, handler_spec
from ..core.versions import deploy_hint, handler_version
from .contract import Interim, Placement, RoundKey, run_handler, run_on_loop

__all__ = ["MRTR_METHODS", "AnswerPolicy", "CheckedToken", "TokenBinding", "TokenCarrier", "target_of", "arguments_of"]

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


class TokenBinding:
    """What a request binds a ``requestState`` token to, besides the principal: read once per request.

    ``method``, ``target`` (:func:`target_of`), ``arguments`` (:func:`arguments_of`) and
    their ``digest`` (:func:`~mrtr.core.codec.arguments_digest`): a retry checks it against
    its token and a pause seals it again, from one hash. A binding is built only for a
    request that has a token or pauses, and both need the digest, so it is computed at once.
    """

    __slots__ = ("method", "target", "arguments", "digest")

    def __init__(self, method: str, params: Mapping[str, Any]) -> None:
        if method not in MRTR_METHODS:
            raise ValueError(f"{method} cannot carry input responses")
        self.method = method
        self.target = target_of(method, params)
        self.arguments = arguments = arguments_of(method, params)
        self.digest: bytes = arguments_digest(arguments)


class CheckedToken:
    """A request's token after checks 1-6, read once: its binding, its state, and the key naming its round.

    ``state`` is ``None`` for a request without a token. The carrier's rounds take one
    (:meth:`TokenCarrier.execute`'s ``checked``) so a caller that needed the key first
    (:meth:`key`, for a round that runs once) does not make the request decode its token twice.
    """

    __slots__ = ("binding", "params", "principal", "state", "_codec")

    def __init__(self, binding: TokenBinding, params: Mapping[str, Any], principal: str | None,
                 state: RequestState | None, codec: RequestStateCodec) -> None:
        self.binding = binding
        self.params = params
        self.principal = principal
        self.state = state
        self._codec = codec

    def key(self) -> RoundKey | None:
        """What names this retry in the store of rounds that run once; ``None`` without a token.

        The token as a digest, never the token; the answers digested as sent (canonical
        JSON: key order does not count); kept until the token expires.
        """
        if self.state is None:
            return None
        return RoundKey(
            token=hashlib.sha256(self.params["requestState"].encode()).hexdigest()[:32],
            answers=hashlib.sha256(canonical(self.params.get("inputResponses") or {})).hexdigest()[:32],
            expires_at=self._codec.expires_at(self.state),
        )


_NO_LEDGER = Ledger()  # a first call's: nothing recorded (immutable, so one serves every call)


class TokenCarrier:
    """The token carrier: runs handlers for the three MRTR methods against the ledger a token carries.

    Implements :class:`mrtr.carriers.contract.Carrier`.
    """

    __slots__ = ("codec", "policy")

    def __init__(self, codec: RequestStateCodec, *, answers: AnswerPolicy = "strict") -> None:
        if answers not in ("strict", "lenient"):
            raise ValueError(f'answers must be "strict" or "lenient", got {answers!r}')
        self.codec = codec
        self.policy: AnswerPolicy = answers

    def restore(self, binding: TokenBinding, params: Mapping[str, Any],
                principal: str | None) -> tuple[Ledger, dict[str, Any]]:
        """Checks 1-7: the ledger to replay against and the answers that matched no slot.

        ``binding`` is what the request binds a token to (read from the same ``params``).
        Raises :class:`~mrtr.core.errors.InvalidParams` (``-32602``) for anything that
        cannot be trusted. Runs no handler code.
        """
        return self._merge(self._checked(binding, params, principal), params)

    def check(self, method: str, params: Mapping[str, Any], principal: str | None) -> CheckedToken:
        """Checks 1-6 of a request, once (see :class:`CheckedToken`); raises as :meth:`restore` would."""
        binding = TokenBinding(method, params)
        return CheckedToken(binding, params, principal, self._checked(binding, params, principal), self.codec)

    def round_key(self, method: str, params: Mapping[str, Any], principal: str | None) -> RoundKey | None:
        """What names this retry for the rounds that run once (:meth:`CheckedToken.key`), after checks 1-6.

        So a key always names a token this server sealed, for this caller and this call.
        """
        return self.check(method, params, principal).key()

    def _merge(self, state: RequestState | None, params: Mapping[str, Any]) -> tuple[Ledger, dict[str, Any]]:
        """Check 7: the retry's answers merged into the ledger of its token (``state``, after checks 1-6)."""
        responses = params.get("inputResponses")
        if state is None:
            return merge_answers(_NO_LEDGER, responses, lenient=True)
        # the decoder makes the ledger a tuple already (RequestState.ledger)
        return merge_answers(Ledger(state.ledger), responses, lenient=self.policy == "lenient")

    def _checked(self, binding: TokenBinding, params: Mapping[str, Any], principal: str | None) -> RequestState | None:
        """Checks 1-6: the state of the request's token, or ``None`` for a request without one."""
        token = params.get("requestState")
        if token is None:
            if _present(params.get("inputResponses")) and self.policy != "lenient":
                raise InvalidParams(
                    "inputResponses present without requestState; retries must echo the requestState "
                    "from the InputRequiredResult"
                )
            return None
        state = self.codec.decode(token)
        if state.principal != principal:
            raise InvalidParams("requestState was issued for a different principal; it cannot be replayed by another caller")
        if state.method != binding.method:
            raise InvalidParams(f"requestState was issued for {state.method} but the retry arrived on {binding.method}")
        if state.target != binding.target:
            raise InvalidParams(
                "requestState was issued for a different target; retries must re-send the original request parameters"
            )
        if state.arguments_digest != binding.digest:
            raise InvalidParams(
                "requestState was issued for different arguments; retries must re-send the original arguments unchanged"
            )
        return state

    def seal(self, binding: TokenBinding, principal: str | None, outcome: InputRequired,
             version: str = "", rounds: int = 1) -> dict[str, Any]:
        """The ``InputRequiredResult`` object for a paused round, with a freshly minted token.

        In wire shape (what ``msgspec.to_builtins`` makes of a
        :class:`~mrtr.core.wire.InputRequiredResult`), built as such: every paused round
        returns one. ``version`` is the version of the handler that recorded the ledger;
        ``rounds`` the rounds of the conversation paused so far, this one included.
        """
        token = self.codec.mint(
            method=binding.method,
            target=binding.target,
            arguments=binding.arguments,
            principal=principal,
            ledger=outcome.ledger.slots,
            digest=binding.digest,
            handler_version=version,
            rounds=rounds,
        )
        return {"resultType": wire.RESULT_TYPE_INPUT_REQUIRED, "inputRequests": outcome.to_wire(),
                "requestState": token}

    def execute(
        self,
        method: str,
        params: Mapping[str, Any],
        handler: Any,
        arguments: Mapping[str, Any] | None,
        ctx: Context,
        *,
        run_sync: RunSync | None = None,
        checked: CheckedToken | None = None,
        placement: Placement | None = None,
    ) -> Coroutine[Any, Any, Completed | Interim]:
        """Validate the retry, replay ``handler`` and return its value or the ``InputRequiredResult``.

        ``params`` are the request's raw params (with ``inputResponses`` and
        ``requestState``); ``arguments`` are the decoded arguments the handler is called
        with. The principal is ``ctx.principal``. ``run_sync`` and ``placement`` are passed to
        :func:`~mrtr.carriers.contract.run_handler`. ``checked`` is the request's token
        when :meth:`check` has already read it. (A coroutine to await: the round's own, handed
        over rather than awaited in one more, since every request of the server comes through here.)
        """
        return self._round(method, params, handler, arguments, ctx, run_sync, checked, until_step=False,
                           placement=placement)

    async def until_step(
        self,
        method: str,
        params: Mapping[str, Any],
        handler: Any,
        arguments: Mapping[str, Any] | None,
        ctx: Context,
        *,
        run_sync: RunSync | None = None,
        checked: CheckedToken | None = None,
        placement: Placement | None = None,
    ) -> Completed | Detached | Interim:
        """Like :meth:`execute`, but stop before the handler's first Step that has not run yet.

        A :class:`~mrtr.core.effects.RoundStep` is no such Step: it runs in the round and
        its result is sealed in the token with the answers.

        The tasks carrier answers a task call's questions before that Step in rounds on
        the call, and runs the rest as a task from the :class:`~mrtr.core.replay.Detached`
        ledger.
        """
        return await self._round(method, params, handler, arguments, ctx, run_sync, checked, until_step=True,
                                 placement=placement)

    @overload
    async def _round(self, method: str, params: Mapping[str, Any], handler: Any, arguments: Mapping[str, Any] | None,
                     ctx: Context, run_sync: RunSync | None, checked: CheckedToken | None, *,
                     until_step: Literal[False], placement: Placement | None = None) -> Completed | Interim: ...
    @overload
    async def _round(self, method: str, params: Mapping[str, Any], handler: Any, arguments: Mapping[str, Any] | None,
                     ctx: Context, run_sync: RunSync | None, checked: CheckedToken | None, *,
                     until_step: bool, placement: Placement | None = None) -> Completed | Detached | Interim: ...

    async def _round(self, method: str, params: Mapping[str, Any], handler: Any, arguments: Mapping[str, Any] | None,
                     ctx: Context, run_sync: RunSync | None, checked: CheckedToken | None, *,
                     until_step: bool, placement: Placement | None = None) -> Completed | Detached | Interim:
        binding: TokenBinding | None
        if checked is None and params.get("requestState") is None and params.get("inputResponses") is None \
                and method in MRTR_METHODS:
            # A first call (no token, no answers): checks 1-7 have nothing to check and the ledger is
            # empty, so none of their objects is built. A handler that can pause is bound now, before it
            # runs: it may change what it was given (values typed Any reach it as the very objects in
            # params), and the token must bind the arguments the client sent, which its retry re-sends.
            binding = TokenBinding(method, params) if handler_spec(handler).can_pause else None
            state = None
            ledger, unmatched = _NO_LEDGER, None
        elif checked is None:
            # The usual retry: checks 1-7 with no CheckedToken around them (only a round key needs one).
            binding = TokenBinding(method, params)
            state = self._checked(binding, params, ctx.principal)
            ledger, unmatched = self._merge(state, params)
        else:
            binding, state = checked.binding, checked.state
            ledger, unmatched = self._merge(state, checked.params)
        try:
            outcome = run_on_loop(handler, arguments, ctx, ledger, unmatched, run_sync=run_sync, until_step=until_step,
                                  placement=placement)
            if outcome is None:
                outcome = await run_handler(handler, arguments, ctx, ledger, unmatched, run_sync=run_sync,
                                            until_step=until_step, placement=placement)
        except ReplayMismatch as mismatch:
            raise deploy_hint(mismatch, handler, None if state is None else state.handler_version) from None
        if isinstance(outcome, InputRequired):
            assert binding is not None  # only a generator pauses, and one is bound before it runs
            rounds = 1 if state is None else state.rounds + 1
            return Interim(self.seal(binding, ctx.principal, outcome, handler_version(handler), rounds))
        return outcome
