"""Part 1's ``(b)``: the replayer this project started from, re-implemented for the benchmark.

Written from the described behaviour of the seed's wire carrier and replay executor (its
design document and the behavioural notes on it), not from its code, so that part 1
compares mrtr's round with a round that does what the seed's does. The codec is mrtr's
(:class:`mrtr.core.codec.RequestStateCodec`'s ``seal``/``unseal``: AES-256-GCM from
``cryptography``, canonical Base64URL) and the payload is MessagePack by ``msgspec`` into
typed Structs, as mrtr's is, so what differs between ``(a)`` and ``(b)`` is the replay
design, not the serializer or the cipher.

What :meth:`SeedReplayer.round` does per round, in the seed's order:

1. ``inputResponses`` without ``requestState``: refused.
2. The token opened: its form and authenticity (``unseal``), its payload decoded
   (method, original params, the ledger, ``issuedAt`` in epoch milliseconds, the
   principal), then its age: ``issuedAt + ttl < now`` is refused.
3. The principal it was issued for must be the caller's.
4. The method it was issued for must be the request's.
5. The target (``name``, or ``uri`` for ``resources/read``) of its original params must be
   the request's. The arguments are not bound: the seed re-runs the handler with the
   retry's own.
6. Each answer merged into its slot: a key already answered, a value that is not an
   elicitation result, or a key the ledger does not hold, is refused. The answer's content
   is not checked against the requested schema (the seed does not).
7. The handler re-run from the top. Each ``ctx.elicit(message, schema)`` checks that the
   client declared the elicitation capability, advances the ordinal, and fingerprints the
   request's params (``{"mode": "form", "message": ..., "requestedSchema": ...}``) as
   ``"sha256:"`` and the hex SHA-256 of their compact JSON; at an ordinal the ledger holds
   it compares that fingerprint with the slot's (a mismatch is refused, the pending slot's
   too) and returns the recorded answer, or unwinds with an exception at the pending one;
   past the end of the ledger it appends a pending slot ``elicit-N`` and unwinds.
8. On the unwind, a new token: the method, the request's params less ``_meta``,
   ``inputResponses`` and ``requestState``, the whole ledger, ``issuedAt`` now, the
   principal; sealed with a fresh nonce. The result is an ``InputRequiredResult`` with the
   one pending request. A handler that returns gives ``{"resultType": "complete", ...}``.

Every refusal is a :class:`SeedRefusal` carrying the seed's message (JSON-RPC ``-32602``;
``-32021`` for the missing capability). tests/test_benchmark_seed.py checks that it
refuses what the seed refuses and completes a conversation with the right answers, so
the row cannot silently become a no-op.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from typing import Any, Literal

import msgspec

from mrtr.core.codec import RequestStateCodec
from mrtr.core.errors import InvalidRequestState

__all__ = ["KEY_PREFIX", "SeedAnswer", "SeedContext", "SeedRefusal", "SeedReplayer", "SeedSlot", "SeedState",
           "fingerprint"]

KEY_PREFIX = "elicit-"
"""The seed's keys: ``elicit-`` and the 1-based ordinal of the question in one execution."""

_STRIPPED = frozenset({"_meta", "inputResponses", "requestState"})


class SeedRefusal(ValueError):
    """A round the seed refuses, with its message and JSON-RPC code."""

    def __init__(self, message: str, code: int = -32602) -> None:
        super().__init__(message)
        self.code = code


class SeedAnswer(msgspec.Struct, omit_defaults=True):
    """An elicitation result as the seed binds it: its action and, when accepted, its content."""

    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None


class SeedSlot(msgspec.Struct, array_like=True, omit_defaults=True):
    """One slot of the ledger: its key, the fingerprint of the question it was issued for, its answer once given."""

    key: str
    fingerprint: str
    response: SeedAnswer | None = None


class SeedState(msgspec.Struct, array_like=True):
    """What the seed's token carries."""

    method: str
    original_params: dict[str, Any]
    ledger: list[SeedSlot]
    issued_at: int
    principal: str | None


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(SeedState)
_json = msgspec.json.Encoder()


def fingerprint(params: Mapping[str, Any]) -> str:
    """``"sha256:"`` and the hex SHA-256 of an elicitation request's params as compact JSON."""
    return "sha256:" + hashlib.sha256(_json.encode(params)).hexdigest()


class _Unwind(Exception):
    """The pending question: unwinds the handler to the replayer (control flow, never an error)."""

    def __init__(self, key: str, params: dict[str, Any]) -> None:
        self.key = key
        self.params = params


class SeedContext:
    """What the seed's handler elicits through: the ledger by ordinal, for one execution."""

    __slots__ = ("ledger", "cursor", "capabilities")

    def __init__(self, ledger: list[SeedSlot], capabilities: Mapping[str, Any] | None) -> None:
        self.ledger = ledger
        self.cursor = 0
        self.capabilities = capabilities

    def elicit(self, message: str, schema: Mapping[str, Any] | None = None) -> SeedAnswer:
        """The recorded answer to the question at this ordinal; unwinds when it has none yet."""
        capabilities = self.capabilities
        if not capabilities or capabilities.get("elicitation") is None:
            raise SeedRefusal("Client did not declare the elicitation capability in clientCapabilities", -32021)
        params: dict[str, Any] = {"mode": "form", "message": message}
        if schema is not None:
            params["requestedSchema"] = schema
        mark = fingerprint(params)
        self.cursor = cursor = self.cursor + 1
        ledger = self.ledger
        if cursor <= len(ledger):
            slot = ledger[cursor - 1]
            if slot.fingerprint != mark:
                raise SeedRefusal(
                    f'MRTR replay mismatch at elicitation #{cursor} (key "{slot.key}"): the handler asked a different '
                    "question than the one this ledger position answers. Handlers must honor the MRTR idempotency "
                    "contract: code before the last elicit() re-executes once per round trip, and the Nth elicit() "
                    "reached during a replay must issue the same message and schema as the original execution.")
            if slot.response is not None:
                return slot.response
            raise _Unwind(slot.key, params)
        key = f"{KEY_PREFIX}{cursor}"
        ledger.append(SeedSlot(key, mark))
        raise _Unwind(key, params)


class SeedReplayer:
    """The seed's wire carrier around one handler: ``handler(ctx, **arguments)`` with ``ctx`` a :class:`SeedContext`.

    ``codec`` seals and opens the tokens (only its cipher and Base64URL are used); ``ttl``
    is the tokens' lifetime in seconds and ``clock`` the time in epoch seconds.
    """

    def __init__(self, codec: RequestStateCodec, handler: Callable[..., Any], *, ttl: float = 300.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.codec = codec
        self.handler = handler
        self.ttl_ms = round(ttl * 1000)
        self.clock = clock

    def round(self, method: str, params: Mapping[str, Any], principal: str | None = None,
              capabilities: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """One round of ``method`` with ``params`` (the request's, with its answers and token)."""
        responses = params.get("inputResponses")
        token = params.get("requestState")
        target_member = "uri" if method == "resources/read" else "name"
        if token is None:
            if responses:
                raise SeedRefusal("inputResponses present without requestState; retries must echo the requestState "
                                  "from the InputRequiredResult")
            ledger: list[SeedSlot] = []
        else:
            state = self._open(token)
            if state.principal != principal:
                raise SeedRefusal("requestState was issued for a different principal; it cannot be replayed by "
                                  "another caller")
            if state.method != method:
                raise SeedRefusal(f"requestState was issued for {state.method} but the retry arrived on {method}")
            if state.original_params.get(target_member) != params.get(target_member):
                raise SeedRefusal("requestState was issued for a different target; retries must re-send the "
                                  "original request parameters")
            ledger = list(state.ledger)
            if responses:
                _merge(ledger, responses)
        ctx = SeedContext(ledger, capabilities)
        try:
            result = self.handler(ctx, **(params.get("arguments") or {}))
        except _Unwind as pending:
            original = {name: value for name, value in params.items() if name not in _STRIPPED}
            state = SeedState(method, original, ledger, int(self.clock() * 1000), principal)
            return {"resultType": "input_required",
                    "inputRequests": {pending.key: {"method": "elicitation/create", "params": pending.params}},
                    "requestState": self.codec.seal(_encoder.encode(state))}
        return {"resultType": "complete", "result": result}

    def _open(self, token: object) -> SeedState:
        try:
            plaintext = self.codec.unseal(token)  # form and authenticity, with the seed's messages
        except InvalidRequestState as refused:
            raise SeedRefusal(str(refused)) from None
        try:
            state = _decoder.decode(plaintext)
        except msgspec.DecodeError:
            raise SeedRefusal("Invalid requestState: requestState payload is malformed") from None
        if state.issued_at + self.ttl_ms < int(self.clock() * 1000):
            raise SeedRefusal("Invalid requestState: requestState has expired; restart the original request")
        return state


def _merge(ledger: list[SeedSlot], responses: Mapping[str, Any]) -> None:
    """The retry's answers into their slots of ``ledger`` (a copy of the token's), or a refusal."""
    for key, value in responses.items():
        for index, slot in enumerate(ledger):
            if slot.key != key:
                continue
            if slot.response is not None:
                raise SeedRefusal(f'inputResponses key "{key}" was already answered in a previous round trip')
            if not isinstance(value, dict) or "action" not in value:
                raise SeedRefusal(f'inputResponses key "{key}" must carry an elicitation result; the server '
                                  "issued an elicitation/create request for it")
            try:
                answer = msgspec.convert(value, SeedAnswer)
            except msgspec.ValidationError:
                raise SeedRefusal(f'inputResponses key "{key}" must carry an elicitation result; the server '
                                  "issued an elicitation/create request for it") from None
            ledger[index] = SeedSlot(slot.key, slot.fingerprint, answer)
            break
        else:
            raise SeedRefusal(f'Unknown inputResponses key "{key}"; the server never issued an input request with '
                              "that key")
