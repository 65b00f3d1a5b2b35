"""The sans-IO core: what every carrier, the server, the transports and the client share.

Nothing here does I/O or imports an event loop. It holds the replay core
(:mod:`~mrtr.core.replay`) that runs a generator handler against a ledger
(:mod:`~mrtr.core.ledger`) of recorded answers, the table of request kinds every layer
reads (:mod:`~mrtr.core.kinds`), the effects a handler yields
(:mod:`~mrtr.core.effects`), forms and their schemas (:mod:`~mrtr.core.schema`), pydantic
models where msgspec types are accepted (:mod:`~mrtr.core.models`), docstrings as plain
text (:mod:`~mrtr.core.docstrings`), the
sealed ``requestState`` codec (:mod:`~mrtr.core.codec`), the wire types
(:mod:`~mrtr.core.wire`), JSON-RPC framing (:mod:`~mrtr.core.jsonrpc`), the rules for
body values mirrored in HTTP headers (:mod:`~mrtr.core.mirroring`), errors as data
with status hints (:mod:`~mrtr.core.errors`), the handler's context
(:mod:`~mrtr.core.context`), content helpers and answers in wire shape. For the legacy
(2025) era it holds the live driver (:mod:`~mrtr.core.live`) that drives the same
handlers without replay, the protocol of a client reached live
(:mod:`~mrtr.core.peer`), and what differs between the eras (:mod:`~mrtr.core.eras`:
which era a message speaks, version negotiation, requests per version). See
docs/adr/0009-packages-by-layer.md for the map and docs/adr/0012-two-eras.md for the eras.
"""
