"""A lost signing key is a contract, not a sentence: the server says ``data.reason``, the client reads it.

The codec puts ``requestState-unreadable`` (a token no key opens) and ``requestState-expired``
in the error's ``data``; the client turns the first into :class:`~mrtr.client.errors.StateLost`
whatever the message says, and still understands a server of an earlier release that only
said it in words.
"""

from __future__ import annotations

from typing import Any

import pytest

import mrtr
from mrtr.client.errors import StateLost
from mrtr.core.codec import RequestStateCodec
from mrtr.core.errors import STATE_EXPIRED, STATE_UNREADABLE, ExpiredRequestState, InvalidRequestState

from ..conftest import FakeClock
from .test_fuzz_responses import Generated

KEY, OTHER = b"k" * 32, b"o" * 32
DISCOVER = {"resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
            "ttlMs": 0, "cacheScope": "private"}


def test_the_codec_names_why_a_token_does_not_open():
    clock = FakeClock()
    token = RequestStateCodec([KEY], ttl=60, clock=clock).mint(method="tools/call", target="t", arguments={},
                                                                  principal=None, ledger=())
    with pytest.raises(InvalidRequestState) as unreadable:
        RequestStateCodec([OTHER]).decode(token)
    assert unreadable.value.data == {"reason": STATE_UNREADABLE}
    clock.advance(61)
    with pytest.raises(ExpiredRequestState) as expired:
        RequestStateCodec([KEY], ttl=60, clock=clock).decode(token)
    assert expired.value.data == {"reason": STATE_EXPIRED}


def conversation(refusal: dict[str, Any]) -> Generated:
    def answer(method: str, params: dict[str, Any]) -> Any:
        if method == "server/discover":
            return DISCOVER
        if "requestState" not in params:
            return {"resultType": "input_required", "requestState": "sealed-1",
                    "inputRequests": {"elicit-1": {"method": "elicitation/create", "params": {
                        "mode": "form", "message": "Name?",
                        "requestedSchema": {"type": "object", "properties": {"n": {"type": "string"}}}}}}}
        return ("error", refusal)
    return Generated(answer)


@pytest.mark.parametrize("refusal", [
    {"code": -32602, "message": "the key that sealed your state is gone", "data": {"reason": STATE_UNREADABLE}},
    {"code": -32602, "message": "Invalid requestState: requestState failed authentication (tampered, ...)"},
])
async def test_the_client_reads_the_reason_and_understands_an_older_server(refusal):
    async with mrtr.Client(conversation(refusal), era="modern", on_elicit=lambda request: mrtr.accept(n="x")) as client:
        with pytest.raises(StateLost):
            await client.call_tool("t")


async def test_another_reason_is_not_a_lost_key_whatever_its_words():
    refusal = {"code": -32602, "message": "requestState failed authentication, they say",
               "data": {"reason": STATE_EXPIRED}}
    async with mrtr.Client(conversation(refusal), era="modern", on_elicit=lambda request: mrtr.accept(n="x")) as client:
        with pytest.raises(mrtr.ClientError) as raised:
            await client.call_tool("t")
    assert not isinstance(raised.value, StateLost)
