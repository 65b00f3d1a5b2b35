"""A resource the upstream serves but does not list is read through the proxy, in all four directions.

The upstream (an mrtr server on loopback HTTP in this process) gains a resource after the
proxy read its catalogue, without saying its list changed: the proxy lists nothing of it,
and still forwards its read. A uri the upstream does not serve either is its "not found",
in the downstream's era. Every downstream message is checked against the schema of its era.
"""

from __future__ import annotations

import pytest

import mrtr

from .test_directions import DIRECTIONS


@pytest.mark.parametrize("downstream, upstream", DIRECTIONS)
async def test_a_resource_the_upstream_does_not_list_is_forwarded(bridge, downstream, upstream):
    origin = mrtr.Server("origin", secret=b"o" * 32)

    @origin.resource("notes://listed", mime_type="text/plain")
    def listed() -> str:
        """Listed when the proxy reads the catalogue."""
        return "listed"

    served = await bridge(upstream, upstream=origin)

    @origin.resource("notes://late", mime_type="text/plain")
    def late() -> str:
        """Registered after the proxy read the catalogue, and never announced."""
        return "late but served"

    async with served.client(downstream) as client:
        assert [item["uri"] for item in await client.list_resources()] == ["notes://listed"]
        assert (await client.read_resource("notes://late")).text == "late but served"
        with pytest.raises(mrtr.ClientError) as missing:
            await client.read_resource("notes://nowhere")
    assert missing.value.code == (-32002 if downstream == "legacy" else -32602)
    assert missing.value.data == {"uri": "notes://nowhere"}
