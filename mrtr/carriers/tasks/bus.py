"""Messages between the nodes that share one Redis: Redis pub/sub, one channel every node hears.

What crosses nodes is notifications: list changes and ``resources/updated`` that an
author's ``Server.notify_*`` publishes on one node, and task status changes, which the
Redis store publishes itself, inside the script that writes the change (see
:mod:`mrtr.carriers.tasks.redis`), so a change and its notification are one atomic
step and reach every node in the order Redis applied the writes. Each node delivers
what it receives to the listen streams it holds, the node that made the change
included: one path, so a listener never hears a change twice, nor two changes of one
task out of order.

Every message is an envelope (:func:`envelope`): a version, a ``kind`` and its body. A
node hands each kind to the handler registered for it (:meth:`NodeBus.handle`) and
drops kinds it does not know, so a node of a newer release can send a kind an older one
ignores during a rolling restart. ``notification`` goes to every node; so do the
messages of 2025-era sessions that concern whichever node holds something of a session
(its end, a change of its record, a cancellation). A message meant for one node alone
(the answer to a question whose 2025-era handler waits there) goes to that node's own
channel (:meth:`~mrtr.carriers.tasks.redis_url.KeyLayout.node`), which each node
subscribes to beside the shared one, on the same connection. Each node names itself
with a fresh random :attr:`NodeBus.node_id` when it starts, so a node that restarted is
a new node, and :meth:`NodeBus.send_to` tells from the count ``PUBLISH`` returns whether
anyone heard: nobody listening on a node's channel means that node is gone (or, in a
Redis Cluster, on another shard, which is why the count only counts there: see
:attr:`NodeBus.counts_receivers`). Envelopes are bounded
(:data:`MAX_ENVELOPE_BYTES`) both ways.

Pub/sub keeps no history. A node that loses its subscription (Redis restarted, a
failover, the connection cut) tells its listeners at once (``lost``: the server ends
every listen stream it holds, and clients listen again and re-read what they watch),
refuses new listen streams until it is subscribed again (``connected``), and subscribes
again by itself. So a listen stream that is open has heard everything published since
it was acknowledged, or it ends. What a node publishes while Redis is away waits in a
bounded queue (:data:`PUBLISH_BACKLOG`) and goes out once Redis is back.
"""

from __future__ import annotations

import logging
import secrets
from collections import deque
from collections.abc import Callable
from typing import Any

import msgspec
import trio

from .store import StoreUnavailable, masked, reason

__all__ = ["ENVELOPE_VERSION", "MAX_ENVELOPE_BYTES", "NodeBus", "PUBLISH_BACKLOG", "envelope", "new_node_id"]

log = logging.getLogger("mrtr.tasks")

ENVELOPE_VERSION = 1
"""The envelope's format; a node drops envelopes of another format."""

PUBLISH_BACKLOG = 10_000
"""Messages a node keeps for Redis while it cannot publish; past it the oldest are dropped."""

MAX_ENVELOPE_BYTES = 8 * 1024 * 1024
"""The largest envelope a node sends or accepts (an answer carries what a client POSTed, itself bounded)."""

_encoder = msgspec.json.Encoder()


def new_node_id() -> str:
    """A fresh id for a node: 12 decimal digits, random (a restarted node is a new one)."""
    return str(10**11 + secrets.randbelow(9 * 10**11))


class _Envelope(msgspec.Struct, frozen=True):
    v: int
    kind: str
    body: Any = None


_decoder = msgspec.json.Decoder(_Envelope)


def envelope(kind: str, body: Any) -> bytes:
    """The bytes of one message on the bus: ``kind`` (``"notification"``: ``[method, params]``) and its body."""
    return _encoder.encode(_Envelope(ENVELOPE_VERSION, kind, body))


def notification(method: str, params: dict[str, Any]) -> bytes:
    """The envelope of one notification for every listener of every node."""
    return envelope("notification", [method, params])


class NodeBus:
    """This node's end of the bus: it publishes, and delivers what it hears.

    ``client`` is a connected ``coredis`` client (standalone, cluster or Sentinel);
    ``channel`` the channel every node hears (``KeyLayout.notifications``);
    ``layout`` names this node's own channel (``KeyLayout.node(node_id)``), subscribed
    to beside it; ``node_id`` defaults to a fresh :func:`new_node_id`.
    ``deliver(method, params)`` is called on the event loop for each notification heard;
    ``lost()`` when the subscription was lost (what was published meanwhile is gone).
    Run :meth:`serve` in a nursery.
    """

    def __init__(self, client: Any, channel: str, *, url: str, deliver: Callable[[str, dict[str, Any]], None],
                 lost: Callable[[], None], backlog: int = PUBLISH_BACKLOG, layout: Any = None,
                 node_id: str | None = None, counts_receivers: bool = True) -> None:
        self._client = client
        self.channel = channel
        self.url = url
        self.layout = layout
        self.node_id = node_id or new_node_id()
        self.own_channel = self._channel_of(self.node_id)
        self.counts_receivers = counts_receivers
        self.connected = False
        self._lost = lost
        self._handlers: dict[str, Callable[[Any], None]] = {}
        self.handle("notification", lambda body: deliver(str(body[0]), dict(body[1])))
        self.handle("probe", lambda body: None)  # send_to's count is the answer: is this node there
        self._pending: deque[bytes] = deque()
        self._backlog = backlog
        self._dropped = 0
        self._token: trio.lowlevel.TrioToken | None = None
        self._wake = trio.Event()

    def handle(self, kind: str, handler: Callable[[Any], None]) -> None:
        """Give envelopes of ``kind`` to ``handler`` (their body), on the event loop."""
        self._handlers[kind] = handler

    @property
    def client(self) -> Any:
        """The ``coredis`` client this bus publishes with (other per-node records share it)."""
        return self._client

    def publish(self, method: str, params: dict[str, Any]) -> None:
        """Send a notification to every node (this one included); callable from any thread, never waits."""
        self.send(notification(method, params))

    def _channel_of(self, node_id: str) -> str:
        """The channel only node ``node_id`` subscribes to."""
        return self.layout.node(node_id) if self.layout is not None else f"{self.channel}:node:{node_id}"

    def send_all(self, kind: str, body: Any) -> None:
        """Queue an envelope of ``kind`` for every node (this one included); callable from any thread."""
        self.send(envelope(kind, body))

    async def send_to(self, node_id: str, kind: str, body: Any) -> bool:
        """Publish an envelope on node ``node_id``'s own channel now; whether that node can have heard it.

        ``False`` when nobody listens there (the node is gone) and the count tells
        (:attr:`counts_receivers`); raises :class:`~mrtr.carriers.tasks.store.StoreUnavailable`
        when Redis cannot take it, and ``ValueError`` past :data:`MAX_ENVELOPE_BYTES`.
        """
        message = envelope(kind, body)
        if len(message) > MAX_ENVELOPE_BYTES:
            raise ValueError(f"a {kind} message of {len(message)} bytes is over {MAX_ENVELOPE_BYTES}")
        channel = self._channel_of(node_id)
        try:
            receivers = await self._client.publish(channel, message)
        except Exception as exc:
            raise StoreUnavailable(f"task store {masked(self.url)} failed: {reason(exc)}") from None
        return bool(receivers) or not self.counts_receivers

    def send(self, message: bytes) -> None:
        """Queue one envelope for the channel every node hears; callable from any thread."""
        if len(self._pending) >= self._backlog:
            self._pending.popleft()
            self._dropped += 1
            if self._dropped == 1 or self._dropped % 1000 == 0:
                log.warning("notifications between nodes: %d dropped, Redis has not taken them for too long",
                            self._dropped)
        self._pending.append(message)  # deque appends and pops are atomic: no lock across threads
        token = self._token
        if token is not None:
            try:
                token.run_sync_soon(self._wake.set)
            except trio.RunFinishedError:  # the node has stopped: nobody would hear it
                pass

    @property
    def backlog(self) -> int:
        """Messages waiting for Redis."""
        return len(self._pending)

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Subscribe, then deliver and publish until cancelled; a first subscription that fails raises here.

        Raises :class:`~mrtr.carriers.tasks.store.StoreUnavailable` when Redis cannot be
        reached at start, as the store does; later losses are waited out.
        """
        self._token = trio.lowlevel.current_trio_token()
        async with trio.open_nursery() as nursery:
            await nursery.start(self._listen)
            nursery.start_soon(self._publish)
            task_status.started()

    async def _listen(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        from coredis.retry import NoRetryPolicy

        started = False
        pause = 0.05
        while True:
            failure: BaseException | None = None
            try:
                # No retries inside the client: a reconnection must be seen here, since what was
                # published while the connection was down is lost and the listeners must know.
                channels = [self.channel, self.own_channel]
                async with self._client.pubsub(channels=channels, ignore_subscribe_messages=True,
                                               retry_policy=NoRetryPolicy(), max_idle_seconds=5) as pubsub:
                    self.connected = True
                    pause = 0.05
                    if not started:
                        started = True
                        task_status.started()
                    else:
                        log.warning("notifications between nodes: subscribed to %s again", masked(self.url))
                    async for message in pubsub:
                        self._receive(message.get("data"))
            except BaseExceptionGroup as group:
                cancelled, rest = group.split(trio.Cancelled)
                if cancelled is not None:
                    # Shutting down. The client's clean-up may fail on a connection its pool has
                    # closed already: of no interest to anyone now.
                    raise cancelled from None
                failure = rest
            except Exception as exc:
                failure = exc
            if not started:
                raise StoreUnavailable(f"task store {masked(self.url)} cannot be reached: "
                                       f"{reason(failure) if failure else 'the subscription ended'}") from None
            if self.connected:
                self.connected = False
                log.warning("notifications between nodes: lost the subscription to %s (%s); the listen streams "
                            "of this node end, and new ones are refused until it is back", masked(self.url),
                            reason(failure) if failure else "the subscription ended")
                self._lost()
            await trio.sleep(pause)
            pause = min(pause * 2, 1.0)

    def _receive(self, data: Any) -> None:
        if isinstance(data, (bytes, str)) and len(data) > MAX_ENVELOPE_BYTES:
            log.warning("notifications between nodes: dropped a message of %d bytes", len(data))
            return
        try:
            message = _decoder.decode(data)
        except (msgspec.DecodeError, TypeError):
            log.debug("notifications between nodes: a message that is no envelope was dropped")
            return
        handler = self._handlers.get(message.kind)
        if message.v != ENVELOPE_VERSION or handler is None:
            log.debug("notifications between nodes: dropped a message of kind %r (format %r)", message.kind, message.v)
            return
        try:
            handler(message.body)
        except Exception:  # a malformed body of a known kind: nobody sent it through this code
            log.warning("notifications between nodes: dropped a malformed %s message", message.kind, exc_info=True)

    async def _publish(self) -> None:
        failing = False
        pause = 0.05
        while True:
            if not self._pending:
                await self._wake.wait()
                self._wake = trio.Event()
                continue
            message = self._pending[0]
            try:
                await self._client.publish(self.channel, message)
            except Exception as exc:
                if not failing:
                    failing = True
                    log.warning("notifications between nodes: cannot publish to %s (%s); %d waiting",
                                masked(self.url), reason(exc), len(self._pending))
                await trio.sleep(pause)
                pause = min(pause * 2, 1.0)
                continue
            if self._pending and self._pending[0] is message:
                self._pending.popleft()
            if failing:
                failing = False
                pause = 0.05
                log.warning("notifications between nodes: publishing to %s again", masked(self.url))
