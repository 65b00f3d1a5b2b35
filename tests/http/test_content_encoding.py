"""Request bodies are read as they were sent: only ``Content-Encoding: identity`` is accepted.

A compressed body used to reach the JSON parser and come back as -32700 "Invalid JSON",
which tells the client its JSON is wrong when the encoding is the problem; a body that
claimed an encoding it did not have was read as JSON anyway. Both front ends, real
loopback HTTP.
"""

from __future__ import annotations

import gzip
import json
import zlib

import pytest

from .conftest import Endpoint, mcp_headers, rpc

MESSAGE = rpc("tools/list")
PLAIN = json.dumps(MESSAGE).encode()


def assert_refused(reply, request_id_kept: bool = False) -> None:
    assert reply.status == 415, reply.body
    assert reply.headers["accept-encoding"] == "identity"
    assert reply.error["code"] == -32600
    assert "Content-Encoding" in reply.error["message"] and "identity" in reply.error["message"]
    assert ("id" in reply.message) is request_id_kept


async def test_a_gzip_body_is_415_not_a_parse_error(endpoint: Endpoint) -> None:
    reply = await endpoint.post(gzip.compress(PLAIN), headers={**mcp_headers(MESSAGE), "Content-Encoding": "gzip"})
    assert_refused(reply)
    assert reply.error["message"] == ("Unsupported Media Type: Content-Encoding must be identity "
                                      "(compressed request bodies are not accepted)")


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br", "zstd", "x-custom", "identity, gzip", "GZIP"])
async def test_a_body_claiming_an_encoding_is_not_read_as_json(endpoint: Endpoint, encoding: str) -> None:
    # valid JSON, so the claim is false: reading it anyway would trust the one header that is wrong
    reply = await endpoint.post(MESSAGE, headers={"Content-Encoding": encoding})
    assert_refused(reply)


async def test_every_repeated_content_encoding_counts(endpoint: Endpoint) -> None:
    sent = {"content-type": "application/json", "accept": "application/json, text/event-stream",
            **{k.lower(): v for k, v in mcp_headers(MESSAGE).items()}}
    headers = [*sent.items(), ("content-encoding", "identity"), ("content-encoding", "deflate")]
    response = await endpoint.client.post("/mcp", content=zlib.compress(PLAIN), headers=headers)
    assert response.status_code == 415
    assert json.loads(response.content)["error"]["code"] == -32600


async def test_a_notification_with_an_encoding_is_refused_too(endpoint: Endpoint) -> None:
    note = rpc("notifications/cancelled", {"requestId": 1}, id=None)
    reply = await endpoint.post(gzip.compress(json.dumps(note).encode()),
                                headers={**mcp_headers(note), "Content-Encoding": "gzip"})
    assert_refused(reply)  # not 202: nothing in the body was read


@pytest.mark.parametrize("encoding", ["identity", "Identity", "identity,identity"])
async def test_identity_is_accepted(endpoint: Endpoint, encoding: str) -> None:
    reply = await endpoint.post(MESSAGE, headers={"Content-Encoding": encoding})
    assert reply.status == 200
    assert "tools" in reply.result
