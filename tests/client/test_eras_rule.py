"""The client's half of ``mrtr.core.eras``: which answers prove a server modern, and the handshake's result.

(Which era a request speaks, the server's half, is tested with the server's legacy era in tests/legacy/.)"""

from __future__ import annotations

import msgspec
import pytest

from mrtr.core.eras import LATEST_LEGACY_VERSION, LEGACY_VERSIONS, MODERN_VERSIONS, InitializeResult, is_modern_error


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
