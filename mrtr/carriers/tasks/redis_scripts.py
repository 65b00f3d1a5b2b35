"""What the records kept in Redis beside the tasks share: the client, the key layout, the URL, scripts by digest.

The 2025 era's session records (:mod:`~mrtr.carriers.tasks.sessions`) and its recorded
calls (:mod:`~mrtr.carriers.tasks.calls_redis`) each change their keys in Lua scripts,
one script a change, and say a Redis that failed them as the store's failure.
"""

from __future__ import annotations

import math
from typing import Any

from .redis_url import KeyLayout
from .store import store_failed

__all__ = ["RedisScripts", "milliseconds"]


def milliseconds(seconds: float) -> int:
    """``seconds`` as the whole milliseconds a Redis expiry takes: rounded up, so nothing expires early, and at
    least 1 (Redis refuses 0); ``math.inf`` is as long as Redis allows (NaN raises ``ValueError``).

    The product is rounded to the nanosecond first: ``2.007 * 1000`` is ``2007.0000000000002``
    in floating point, which is 2,007 milliseconds, not 2,008.
    """
    if seconds == math.inf:
        return 2**62
    return max(1, math.ceil(round(seconds * 1000, 6)))


class RedisScripts:
    """A Redis ``client`` reached at ``url``, its keys laid out by ``layout``, and the scripts run there."""

    def __init__(self, client: Any, layout: KeyLayout, url: str) -> None:
        self._client = client
        self.layout = layout
        self.url = url
        self._scripts: dict[str, Any] = {}

    def _script(self, text: str, keys: list[str], arguments: list[Any]) -> Any:
        """Run a script by its digest (``EVALSHA``, loading it once): its text does not cross the network each time."""
        script = self._scripts.get(text)
        if script is None:
            script = self._scripts[text] = self._client.register_script(text)
        return script(keys, arguments)

    async def _call(self, request: Any) -> Any:
        """Await ``request``; a failure of Redis is the store's (:func:`~mrtr.carriers.tasks.store.store_failed`)."""
        try:
            return await request
        except Exception as exc:
            raise store_failed(self.url, exc) from None
