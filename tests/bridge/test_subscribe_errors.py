"""An upstream's refusal of a resource subscription reaches the downstream client in its own era.

The upstream (an mrtr server on loopback HTTP in this process) serves one resource and
refuses a subscription to any other as "not found": a 2025 session says it ``-32002``,
the modern era ``-32602``, both with ``data.uri``. Through the proxy, each downstream
client hears it in its own era's code, whichever era the upstream said it in, as it does
for the read of a missing resource (``test_unlisted_resources.py``). Every downstream
message is checked against the schema of its era.
"""

from __future__ import annotations

import pytest

import mrtr
from mrtr.server.catalog import ResourceNotFound

from .test_directions import DIRECTIONS


class OnlyListed:
    """The upstream's resource watcher: a subscription to a resource it does not serve is refused."""

    def __init__(self, served: set[str]) -> None:
        self.served = served

    async def watch(self, uri: str, holder: str | None) -> None:
        if uri not in self.served:
            raise ResourceNotFound(uri)

    def unwatch(self, uri: str, holder: str | None) -> None:
        pass


@pytest.mark.parametrize("downstream, upstream", DIRECTIONS)
async def test_a_subscription_the_upstream_refuses_as_not_found_is_refused_in_the_downstream_era(
        bridge, downstream, upstream):
    origin = mrtr.Server("origin", secret=b"o" * 32)

    @origin.resource("notes://listed", mime_type="text/plain")
    def listed() -> str:
        """The one resource the upstream serves."""
        return "listed"

    origin.watch_resources(OnlyListed({"notes://listed"}))
    served = await bridge(upstream, upstream=origin)
    async with served.client(downstream, on_resource_updated=lambda uri: None) as client:
        with pytest.raises(mrtr.ClientError) as missing:
            await client.subscribe("notes://nowhere")
        await client.subscribe("notes://listed")  # the refusal left nothing behind
        assert client.subscribed == ["notes://listed"]
    assert missing.value.code == (-32002 if downstream == "legacy" else -32602)
    assert missing.value.data == {"uri": "notes://nowhere"}
