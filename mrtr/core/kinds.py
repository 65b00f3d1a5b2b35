"""The kinds of request a handler can put to a client, the Step and the patch marker, in one table.

Every place that needs to know something about a kind reads it here: the effects a
handler yields (their method and capability), the ledger (the code a slot stores, the
default wire key, the answer type it decodes), the replay core (how diagnostics name a
kind), the testing helpers (what a client able to answer everything declares) and the
client (which capability an answerer declares, what answer it must give). A new kind is
a row in :data:`KINDS`, its wire types in :mod:`mrtr.core.wire`, its effect in
:mod:`mrtr.core.effects` and its request object in :mod:`mrtr.client.requests`; the
test that walks every row through all of them says what is missing.

Elicitation's two modes, form and URL, are one kind: they share a method, a capability
(with one member per mode), a default key and an answer type, and the ledger tells
them apart by fingerprint. The Step and the patch marker (:class:`~mrtr.core.effects.Patched`)
are never sent to a client: they have no method. This module does no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

import msgspec

from . import wire

__all__ = ["Kind", "RequestKind", "KINDS", "REQUEST_KINDS", "ASKED", "kind_of", "decode_input_response"]


class Kind(IntEnum):
    """What a ledger slot holds; the value is what a sealed token stores, so it never changes."""

    ELICIT = 0
    SAMPLE = 1
    ROOTS = 2
    STEP = 3
    PATCH = 4


@dataclass(frozen=True)
class RequestKind:
    """One row of the table: everything the runtime knows about a kind.

    ``method``, ``capability``, ``request``, ``answer`` and ``answer_label`` are ``None``
    for the Step and the patch marker, which are never sent to a client.
    """

    kind: Kind
    """The code a ledger slot stores."""
    label: str
    """How diagnostics name the kind: its method, or ``"Step"``."""
    key_prefix: str
    """The default wire key is this prefix and the ordinal: ``elicit-3``."""
    method: str | None = None
    """The method of the embedded request in ``inputRequests``."""
    capability: str | None = None
    """The ``clientCapabilities`` member a client declares to be asked this kind."""
    features: tuple[str, ...] = ()
    """The members of that capability object this runtime knows (modes, optional abilities)."""
    request: type[wire.InputRequest] | None = None
    """The wire type of the embedded request."""
    answer: type[wire.InputResponse] | None = None
    """The wire type of the client's answer in ``inputResponses``."""
    answer_label: str | None = None
    """How errors name a well-formed answer: ``"sampling result (CreateMessageResult)"``.

    Elicitation answers are checked member by member, with errors that name the member.
    """


KINDS: Mapping[Kind, RequestKind] = {
    row.kind: row
    for row in (
        RequestKind(
            Kind.ELICIT, "elicitation/create", "elicit-", method="elicitation/create", capability="elicitation",
            features=("form", "url"), request=wire.ElicitRequest, answer=wire.ElicitResult,
            answer_label="elicitation result",
        ),
        RequestKind(
            Kind.SAMPLE, "sampling/createMessage", "sample-", method="sampling/createMessage", capability="sampling",
            features=("tools", "context"), request=wire.CreateMessageRequest, answer=wire.CreateMessageResult,
            answer_label="sampling result (CreateMessageResult)",
        ),
        RequestKind(
            Kind.ROOTS, "roots/list", "roots-", method="roots/list", capability="roots",
            request=wire.ListRootsRequest, answer=wire.ListRootsResult, answer_label="roots result (ListRootsResult)",
        ),
        RequestKind(Kind.STEP, "Step", "step-"),
        RequestKind(Kind.PATCH, "Patched", "patch-"),
    )
}
"""Every kind by its code."""

REQUEST_KINDS: tuple[RequestKind, ...] = tuple(row for row in KINDS.values() if row.method is not None)
"""The kinds a client can be asked, in code order."""

_BY_METHOD: Mapping[str, RequestKind] = {row.method: row for row in REQUEST_KINDS if row.method is not None}

ASKED: frozenset[int] = frozenset(int(row.kind) for row in REQUEST_KINDS)
"""The codes of the kinds a client answers: a ledger slot of one of them travels under a wire key."""


def kind_of(method: str) -> RequestKind:
    """The kind whose embedded request has ``method``; ``KeyError`` for any other method."""
    return _BY_METHOD[method]


def decode_input_response(request: wire.InputRequest | RequestKind | str, value: Any) -> wire.InputResponse:
    """Decode one ``inputResponses`` value as the answer to ``request`` (a request, a kind or a method).

    Raises ``msgspec.ValidationError`` when the value is no such answer, or no kind has
    that method.
    """
    if isinstance(request, RequestKind):
        row: RequestKind | None = request
    else:
        row = _BY_METHOD.get(request if isinstance(request, str) else request.method)
    answer = row.answer if row is not None else None
    if answer is None:
        raise msgspec.ValidationError(f"No input response type for {request!r}")
    if isinstance(value, answer):
        return value
    return msgspec.convert(value, answer)
