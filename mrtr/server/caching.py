"""``Cache``: answers of listings and of tools safe to cache, kept in memory for ``ttl`` seconds.

What is cached:

- **listings**: ``tools/list``, ``prompts/list``, ``resources/list`` and
  ``resources/templates/list`` (``listings=False`` leaves them out);
- **tools marked safe to cache**: a tool whose annotations say ``readOnlyHint: true``
  (``@server.tool(annotations={"readOnlyHint": True})``; ``read_only=False`` ignores the
  hint), and the tools named in ``tools=``. ``idempotentHint`` alone is not enough: a
  call of an idempotent tool changes the world the first time, and a second call after
  someone else changed it back must change it again. Only a complete result is kept,
  never a tool's error result.

Whose answer is reused: an entry is keyed by the caller's principal, the request's
``params`` (its ``_meta`` aside: progress tokens and trace context differ per request),
the era and protocol version (a 2025 session's result has that version's shape) and the
client's capabilities. Callers without a principal share entries: put ``Cache`` inside
(after) any middleware whose answer depends on more than the principal.

Never cached, neither read nor written: a request carrying the client's answers or a
token (a later round of a modern conversation: ``requestState``, ``inputResponses``), a
2025-era call whose handler asked the client (its result depends on what the user said;
known once it returned), a task (creating one, or a task method), and a first round
that asks a question (its result is ``input_required``, not complete).

Bounded: at most ``max_entries`` entries and ``max_bytes`` of encoded results (the least
recently used go first), none larger than ``max_item_bytes``; expired entries are
dropped as they are met. The cache is this process's: nodes and workers each keep
their own. After a change of what a listing holds (``notify_tools_changed``...) call
:meth:`Cache.clear`, or keep ``ttl`` short. A hit or a miss is noted on the access line
(``cache=hit``, ``cache=miss``).
"""

from __future__ import annotations

import hashlib
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Collection
from typing import Any

import msgspec

from ..core.jsonrpc import canonical
from .pipeline import CallNext, Incoming

__all__ = ["Cache"]

_LISTINGS = frozenset({"tools/list", "prompts/list", "resources/list", "resources/templates/list"})
_decode = msgspec.json.Decoder().decode


class Cache:
    """A middleware answering listings and tools safe to cache from memory for ``ttl`` seconds (see the module).

    ``tools`` names tools to cache beyond those annotated ``readOnlyHint: true``
    (``read_only=False``: only those named); ``listings`` caches the four listings.
    ``max_entries``, ``max_bytes`` and ``max_item_bytes`` bound the memory it holds;
    ``clock`` (monotonic seconds) is for tests::

        server.middleware(Cache(ttl=30))
        server.middleware(Cache(ttl=300, tools=["exchange_rates"], listings=False))
    """

    def __init__(self, ttl: float, *, tools: Collection[str] = (), read_only: bool = True, listings: bool = True,
                 max_entries: int = 1000, max_bytes: int = 16 * 1024 * 1024, max_item_bytes: int = 1024 * 1024,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not math.isfinite(ttl) or ttl <= 0:
            raise ValueError(f"Cache ttl must be a positive number of seconds, got {ttl!r}")
        if isinstance(tools, str):
            raise TypeError("Cache tools is a collection of tool names, not one string")
        for label, bound in (("max_entries", max_entries), ("max_bytes", max_bytes),
                             ("max_item_bytes", max_item_bytes)):
            if isinstance(bound, bool) or not isinstance(bound, int) or bound < 1:
                raise ValueError(f"Cache {label} must be a positive integer, got {bound!r}")
        self.ttl = float(ttl)
        self.tools = frozenset(tools)
        self.read_only = read_only
        self.listings = listings
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.max_item_bytes = min(max_item_bytes, max_bytes)
        self._clock = clock
        self._entries: OrderedDict[bytes, tuple[float, bytes]] = OrderedDict()  # key -> (expiry, encoded result)
        self._bytes = 0

    @property
    def size(self) -> tuple[int, int]:
        """How many entries the cache holds, and their encoded bytes."""
        return len(self._entries), self._bytes

    def clear(self) -> None:
        """Forget every entry (after a change of what a listing holds, or of a cached tool's data)."""
        self._entries.clear()
        self._bytes = 0

    def cacheable(self, request: Incoming) -> bool:
        """Whether ``request`` may be answered from the cache, and its answer kept (see the module)."""
        method = request.method
        if method in _LISTINGS:
            if not self.listings:
                return False
        elif method == "tools/call":
            component = request.component
            if component is None:
                return False
            annotations = component.definition.get("annotations")
            marked = self.read_only and isinstance(annotations, dict) and annotations.get("readOnlyHint") is True
            if not marked and component.name not in self.tools:
                return False
        else:
            return False
        return not (request.is_task or request.is_notification or request.carries_answers)

    async def __call__(self, request: Incoming, call_next: CallNext) -> Any:
        """The cached answer of ``request`` when there is one; else the pipeline's, kept when it may be."""
        if not self.cacheable(request):
            return await call_next(request)
        key = self._key(request)
        now = self._clock()
        found = self._entries.get(key)
        if found is not None:
            if found[0] > now:
                self._entries.move_to_end(key)
                request.note("cache", "hit")
                return _decode(found[1])  # a fresh copy: the era adds to the result it is given
            self._drop(key)
        result = await call_next(request)
        request.note("cache", "miss")
        if _complete(result) and not request.carries_answers:  # a 2025 call that asked: its answers are in it
            self._keep(key, result, now)
        return result

    def _key(self, request: Incoming) -> bytes:
        params = {name: value for name, value in request.params.items() if name != "_meta"}
        material = canonical([request.era, request.version, request.method, request.principal, params,
                              dict(request.client_capabilities)])
        return hashlib.sha256(material).digest()

    def _keep(self, key: bytes, result: Any, now: float) -> None:
        try:
            encoded = msgspec.json.encode(result)
        except (TypeError, ValueError, OverflowError):
            return  # the transport will say it cannot be sent; nothing to keep
        if len(encoded) > self.max_item_bytes:
            return
        if key in self._entries:
            self._drop(key)
        self._entries[key] = (now + self.ttl, encoded)
        self._bytes += len(encoded)
        while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
            self._drop(next(iter(self._entries)))

    def _drop(self, key: bytes) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._bytes -= len(entry[1])

    def __repr__(self) -> str:
        return f"Cache(ttl={self.ttl:g}, entries={len(self._entries)})"


def _complete(result: Any) -> bool:
    """Whether a result is a final answer worth keeping: complete (modern) or plain (legacy), not a tool's error."""
    if not isinstance(result, dict) or result.get("isError") is True:
        return False
    kind = result.get("resultType")
    return kind is None or kind == "complete"
