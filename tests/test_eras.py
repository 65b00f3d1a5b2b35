"""The rule that tells a modern message from a legacy one (``mrtr.core.eras``), which both sides of the wire use."""

from __future__ import annotations

import msgspec
import pytest

from mrtr.core.eras import LATEST_LEGACY_VERSION, LEGACY_VERSIONS, MODERN_VERSIONS, InitializeResult, \
    is_modern_error, modern_claim

from .conftest import meta


def test_a_request_is_modern_when_its_meta_claims_a_version():
    assert modern_claim({"method": "tools/list", "params": {"_meta": meta()}}) == MODERN_VERSIONS[0]
    # Legacy requests carry _meta too (a progress token): that proves nothing.
    assert modern_claim({"method": "tools/call", "params": {"_meta": {"progressToken": 1}}}) is None
    assert modern_claim({"method": "initialize", "params": {"protocolVersion": "2025-11-25"}}) is None
    assert modern_claim({"method": "ping"}) is None
    assert modern_claim({"method": "x", "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": 5}}}) is None
    assert modern_claim({"method": "x", "params": []}) is None


@pytest.mark.parametrize("code, method, modern", [
    (-32020, "server/discover", True), (-32021, "tools/call", True), (-32022, "server/discover", True),
    (-32601, "tools/call", True),       # an unknown tool method on a modern server is still a modern answer
    (-32601, "server/discover", False),  # every modern server serves it: refusing it is the legacy mark
    (-32601, "initialize", False), (-32602, "server/discover", False), (-32600, "server/discover", False),
    (-32000, "server/discover", False), (None, "server/discover", False),
])
def test_which_errors_prove_a_modern_server(code, method, modern):
    assert is_modern_error(code, method) is modern


def test_versions_and_the_handshake_result():
    assert LATEST_LEGACY_VERSION == "2025-11-25" and LATEST_LEGACY_VERSION in LEGACY_VERSIONS
    assert not set(LEGACY_VERSIONS) & set(MODERN_VERSIONS)
    answered = msgspec.convert({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                                "serverInfo": {"name": "s", "version": "1"}, "extra": 1}, InitializeResult)
    assert answered.server_info.name == "s"
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"protocolVersion": "2025-11-25", "capabilities": {}}, InitializeResult)
