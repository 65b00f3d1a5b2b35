"""The proxy's connection to its upstream server: one :class:`mrtr.Client`, kept open, restarted when it breaks.

:class:`Upstream` owns the client the proxy forwards through (a URL, or a command line
spoken to over stdio) and keeps it open while the proxy runs (:meth:`Upstream.running`):

- the era is the upstream's (the client probes it: ``server/discover``, else a 2025
  session); the proxy speaks to it in that era whatever era its own clients speak;
- the client answers a 2025 upstream's questions through the call they belong to: the
  :data:`~mrtr.bridge.held.CURRENT` context of the task that makes the call, or, where a
  question carries no sign of its call (a 2025 stdio server cannot say), the one call in
  flight; so calls that may ask are sent to a 2025 stdio upstream one at a time;
- the capabilities declared upstream in the modern era are the downstream caller's
  (what the proxy can relay to that caller), per request;
- progress and log messages go to the relay of the call they belong to (its
  downstream request), at every level: the downstream's own level filters them;
- a client that breaks (the connection refused, a stdio child that exited) is closed
  and opened again, after a pause that doubles up to :data:`MAX_BACKOFF` while it keeps
  failing; meanwhile a request gets :class:`UpstreamUnavailable` at once, or after
  ``connect_timeout`` while a restart is under way, never a hang.

The proxy's own credentials authorize it upstream (``auth=``, ``headers=``): never the
downstream caller's token.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import trio

from ..client.client import Client
from ..client.errors import ClientError, ConnectionFailed, RoundLimitExceeded, Unreadable
from ..client.requests import ElicitationRequest, InputRequest, SamplingRequest
from ..core.errors import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, InternalError, ProtocolError
from ..server.catalog import ResourceNotFound
from ..server.legacy import RESOURCE_NOT_FOUND
from .held import CURRENT, HeldCall, HeldCalls

__all__ = ["MAX_BACKOFF", "Relay", "Upstream", "UpstreamUnavailable", "failure_of", "resource_error"]

log = logging.getLogger("mrtr.bridge")

MAX_BACKOFF = 30.0
"""The longest pause, in seconds, between two attempts to reach a failing upstream."""

_FIRST_BACKOFF = 0.5
_HEALTHY_AFTER = 30.0  # a connection that lived this long starts the backoff again from the first pause


class UpstreamUnavailable(InternalError):
    """The upstream server cannot be reached or read now (``-32603``, ``data.reason``: ``upstream-unavailable``)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, data={"reason": "upstream-unavailable"})


def failure_of(error: ClientError, where: str) -> ProtocolError:
    """What a downstream client is told of an upstream request that failed with ``error``.

    The upstream's own JSON-RPC errors pass through as they were (code, message, data);
    a connection that failed, and answers the client could not read, are
    :class:`UpstreamUnavailable` naming the upstream.
    """
    if isinstance(error, ConnectionFailed):
        return UpstreamUnavailable(f"The upstream server {where} is unreachable: {error.message}")
    if isinstance(error, Unreadable) or error.code in (PARSE_ERROR, INVALID_REQUEST):
        return UpstreamUnavailable(f"The upstream server {where} answered with what cannot be used: {error.message}")
    if isinstance(error, RoundLimitExceeded):
        return InternalError(f"The upstream server {where} kept asking: {error.message}", data=error.data)
    return ProtocolError(error.message, code=error.code, data=error.data)


def resource_error(error: ProtocolError, uri: Any) -> ProtocolError:
    """An upstream's ``error`` to a request about resource ``uri``, as the downstream's era says it.

    An upstream says "resource not found" ``-32002`` (a 2025 server) or ``-32602`` (a
    2026-07-28 one), both with ``data.uri``; as :class:`~mrtr.server.catalog.ResourceNotFound`
    each downstream era answers its own code. Any other error passes as it was.
    """
    data = error.data
    if error.code in (INVALID_PARAMS, RESOURCE_NOT_FOUND) and isinstance(data, Mapping) and data.get("uri") == uri:
        return ResourceNotFound(str(uri))
    return error


class Relay:
    """Where one forwarded request's progress and log messages go: its downstream ``ctx``."""

    __slots__ = ("ctx",)

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx

    @property
    def capabilities(self) -> Mapping[str, Any]:
        """The downstream caller's capabilities."""
        return self.ctx.client_capabilities  # type: ignore[no-any-return]

    def progress(self, progress: float, total: float | None, message: str | None) -> None:
        """Report upstream progress downstream (a value that does not move forward is dropped)."""
        try:
            self.ctx.progress(progress, total, message)
        except (ValueError, TypeError):
            pass

    def progress_message(self, message: str) -> None:
        """An upstream task's status message, passed on as progress when it reads as such (``3/10 ...``)."""
        from ..client.tasks import progress_of

        progress, total, text = progress_of(message)
        self.progress(progress, total, text)

    def log(self, level: str, logger: str | None, data: Any) -> None:
        """Pass an upstream log message on, if the downstream asked for its level."""
        try:
            self.ctx.log(level, data, logger)
        except ValueError:
            pass


def _relay_of(current: Any) -> Relay | None:
    if isinstance(current, HeldCall):
        listener = current.listener
        return listener if isinstance(listener, Relay) else None
    return current if isinstance(current, Relay) else None


class _UpstreamClient(Client):
    """The proxy's client: in the modern era it declares, per request, what the downstream caller can answer."""

    def capabilities(self) -> dict[str, Any]:
        declared = super().capabilities()
        current = CURRENT.get(None)
        downstream = getattr(current, "capabilities", None)
        if not isinstance(downstream, Mapping):
            return declared
        kept: dict[str, Any] = {}
        asked = downstream.get("elicitation")
        if isinstance(asked, Mapping) and "elicitation" in declared:
            modes: dict[str, Any] = {mode: {} for mode in declared["elicitation"]
                     if mode in asked or (mode == "form" and "url" not in asked)}  # {} declares form
            if modes:
                kept["elicitation"] = modes
        for name in ("sampling", "roots"):
            if isinstance(downstream.get(name), Mapping) and name in declared:
                kept[name] = {key: value for key, value in downstream[name].items() if key != "listChanged"} \
                    if name == "sampling" else {}
        extensions = dict(declared.get("extensions") or {})
        theirs = downstream.get("extensions")
        if isinstance(theirs, Mapping):
            for name, value in theirs.items():
                if name == "io.modelcontextprotocol/ui":  # MCP Apps: the downstream host renders the interfaces
                    extensions[name] = value
        if extensions:
            kept["extensions"] = extensions
        return kept


class Upstream:
    """The proxy's client to ``target`` (a URL, or a command line and its arguments), kept open (see the module).

    ``held`` keeps the calls that wait live (a 2025 upstream); ``on_connect`` is awaited
    with each new client before it serves (the catalogue is read there);
    ``on_list_changed(what)`` when the upstream says a list changed, ``on_resource_updated(uri)``
    when it says a resource the client subscribed to changed. ``headers`` and
    ``auth`` (an :class:`mrtr.client.oauth.OAuth`) authorize the proxy at an HTTP
    upstream; ``env`` and ``cwd`` are a stdio child's. ``era`` is the client's (``"auto"``
    probes). ``timeout`` bounds connecting and each read from the upstream;
    ``connect_timeout`` how long a request waits for a connection being made.
    """

    def __init__(self, target: str | Sequence[str], held: HeldCalls, *,
                 on_connect: Callable[[Client], Awaitable[None]],
                 on_list_changed: Callable[[str], Awaitable[None]],
                 on_resource_updated: Callable[[str], Any] | None = None,
                 headers: Mapping[str, str] | None = None, auth: Any = None, env: Mapping[str, str] | None = None,
                 cwd: str | None = None, era: str = "auto", timeout: float = 300.0,
                 connect_timeout: float = 10.0) -> None:
        if isinstance(target, str):
            self.where = target
            self.argv: list[str] | None = None
        else:
            self.argv = list(target)
            if not self.argv:
                raise ValueError("a stdio upstream needs a command to run")
            self.where = f"started as {' '.join(self.argv)!r}"
        self.target = target
        self.held = held
        self._on_connect = on_connect
        self._on_list_changed = on_list_changed
        self._on_resource_updated = on_resource_updated
        self._headers = dict(headers or {})
        self._auth = auth
        self._env = env
        self._cwd = cwd
        self._era = era
        self._timeout = timeout
        self.connect_timeout = connect_timeout
        self._client: Client | None = None
        self._ready = trio.Event()
        self._broken = trio.Event()
        self._failure: str | None = None
        self._serial = trio.Lock()  # calls to a 2025 stdio upstream, one at a time (see the module)
        self._in_flight: list[HeldCall] = []
        self.connections = 0
        """How many times a client to the upstream was opened (a restart adds one)."""

    @property
    def era(self) -> str | None:
        """The era the upstream speaks (``"modern"`` or ``"legacy"``), once connected."""
        client = self._client
        return None if client is None else client.era

    @property
    def server(self) -> Any:
        """What a 2025 upstream answered to ``initialize`` (``None`` in the modern era or before connecting)."""
        client = self._client
        return None if client is None else client.server

    def _make_client(self) -> Client:
        options: dict[str, Any] = dict(
            on_elicit=self._asked, on_sample=self._asked, on_roots=self._asked, on_progress=self._progress,
            on_log=self._log, log_level="debug", on_list_changed=self._on_list_changed,
            on_resource_updated=self._on_resource_updated,
            elicitation_modes=("form", "url"), max_rounds=32, timeout=self._timeout, deadline=None,
            era=self._era, tasks=True, client_info={"name": "mrtr-proxy", "version": _version()})
        if self.argv is not None:
            return _UpstreamClient.stdio(self.argv, env=self._env, cwd=self._cwd, **options)
        return _UpstreamClient(str(self.target), headers=self._headers, auth=self._auth, **options)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Upstream]:
        """Keep a client open for the block, the first one made before it starts.

        Raises :class:`UpstreamUnavailable` when the first connection fails within
        ``connect_timeout`` (the proxy then does not start), naming why.
        """
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._supervise)
            with trio.move_on_after(self.connect_timeout):
                await self._ready.wait()
            if self._client is None:
                nursery.cancel_scope.cancel()
                raise UpstreamUnavailable(f"The upstream server {self.where} could not be reached within "
                                          f"{self.connect_timeout:g} s: {self._failure or 'no answer'}")
            try:
                yield self
            finally:
                nursery.cancel_scope.cancel()

    async def _supervise(self) -> None:
        pause = _FIRST_BACKOFF
        while True:
            started = trio.current_time()
            try:
                async with self._make_client() as client:
                    await client.discover()  # the era settles here: a probe, or a 2025 session
                    await self._on_connect(client)
                    self.connections += 1
                    self._broken = trio.Event()
                    self._client = client
                    self._failure = None
                    self._ready.set()
                    log.info("connected to the upstream server %s (%s era)", self.where, client.era)
                    await self._broken.wait()
            except Exception as error:  # whatever broke the client, the supervisor goes on and tries again
                cause = _cause(error)
                self._failure = getattr(cause, "message", None) or str(cause) or type(cause).__name__
                log.warning("the upstream server %s failed: %s", self.where, self._failure,
                            exc_info=not isinstance(cause, (ClientError, OSError)))
            finally:
                self._client = None
                self._ready = trio.Event()
            if trio.current_time() - started > _HEALTHY_AFTER:
                pause = _FIRST_BACKOFF
            log.info("reconnecting to the upstream server %s in %g s", self.where, pause)
            await trio.sleep(pause)
            pause = min(pause * 2, MAX_BACKOFF)

    async def client(self) -> Client:
        """The open client, waiting up to ``connect_timeout`` for one being made; else :class:`UpstreamUnavailable`."""
        client = self._client
        if client is not None:
            return client
        with trio.move_on_after(self.connect_timeout):
            await self._ready.wait()
        if self._client is None:
            raise UpstreamUnavailable(f"The upstream server {self.where} is unreachable: "
                                      f"{self._failure or 'reconnecting'}")
        return self._client

    def failed(self, client: Client, error: ClientError) -> ProtocolError:
        """What ``error`` of a request through ``client`` tells the downstream; a broken client is restarted."""
        if isinstance(error, ConnectionFailed) and client is self._client:
            self._failure = error.message
            self._client = None  # no request starts on it while it closes
            self._broken.set()
        return failure_of(error, self.where)

    def closing(self, client: Client, error: Exception) -> ProtocolError:
        """A request through a client being closed (a restart under way) failed with ``error``: what to raise."""
        if client is self._client:
            raise error  # not a closing client: a failure of the proxy's own, reported as one
        log.debug("a request through a closing client failed: %r", error)
        return UpstreamUnavailable(f"The upstream server {self.where} is unreachable: reconnecting")

    async def request(self, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """One request upstream (a listing, completion), its raw result; failures as :func:`failure_of` says."""
        client = await self.client()
        try:
            return await client.call_once(method, params)
        except ClientError as error:
            raise self.failed(client, error) from None
        except (RuntimeError, trio.ClosedResourceError, trio.BrokenResourceError) as error:
            raise self.closing(client, error) from None

    async def call(self, relay: Relay, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """One round of a call to a modern upstream, on behalf of ``relay``: its raw result (``input_required`` too)."""
        client = await self.client()
        token = CURRENT.set(relay)
        try:
            return await client.call_once(method, params)
        except ClientError as error:
            raise self.failed(client, error) from None
        except (RuntimeError, trio.ClosedResourceError, trio.BrokenResourceError) as error:
            raise self.closing(client, error) from None
        finally:
            CURRENT.reset(token)

    async def task_round(self, relay: Relay, task_id: str, responses: Mapping[str, Any] | None,
                         answered: Sequence[str]) -> dict[str, Any]:
        """One round of an upstream task, on behalf of ``relay``: answers sent, then its status once it moves on.

        ``responses`` go with ``tasks/update``; then the task is polled until it ends
        (``{"resultType": "complete", "result"}``, or its error raised) or asks what
        ``answered`` does not hold yet (``{"resultType": "input_required", "inputRequests"}``).
        Cancelled, the task is cancelled upstream too.
        """
        client = await self.client()
        handle = client.task(task_id)
        token = CURRENT.set(relay)
        try:
            if responses:
                await handle.update(responses)
            while True:
                status = await handle.get()
                if status.status_message:
                    relay.progress_message(status.status_message)
                if status.status == "completed":
                    return {"resultType": "complete", "result": status.result or {"content": []}}
                if status.status == "failed":
                    raise ClientError.from_error(status.error or {"code": INTERNAL_ERROR,
                                                                  "message": "the upstream task failed"})
                if status.status == "cancelled":
                    raise ClientError(INTERNAL_ERROR, f"the upstream task {task_id} was cancelled")
                waiting = {key: value for key, value in status.input_requests.items() if key not in answered}
                if status.status == "input_required" and waiting:
                    return {"resultType": "input_required", "inputRequests": waiting}
                await trio.sleep(status.poll_interval)
        except ClientError as error:
            raise self.failed(client, error) from None
        except trio.Cancelled:
            with trio.CancelScope(shield=True), trio.move_on_after(5):
                try:
                    await handle.cancel()
                except ClientError as error:
                    log.info("could not cancel the upstream task %s: %s", task_id, error.message)
            raise
        finally:
            CURRENT.reset(token)

    async def live(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """A whole call to a 2025 upstream, in a held call's task (its questions go to that call)."""
        client = await self.client()
        call = CURRENT.get(None)
        serial = self._serial if self.argv is not None else None
        if serial is not None:
            await serial.acquire()
        if isinstance(call, HeldCall):
            self._in_flight.append(call)
        try:
            return await client.call_once(method, params)
        except ClientError as error:
            raise self.failed(client, error) from None
        except (RuntimeError, trio.ClosedResourceError, trio.BrokenResourceError) as error:
            raise self.closing(client, error) from None
        finally:
            if isinstance(call, HeldCall):
                self._in_flight.remove(call)
            if serial is not None:
                serial.release()

    # -- what the client hands over ---------------------------------------------------------

    async def _asked(self, item: InputRequest) -> Any:
        """A 2025 upstream's question: to the held call it belongs to, which asks its downstream."""
        call = CURRENT.get(None)
        method = ("elicitation/create" if isinstance(item, ElicitationRequest) else
                  "sampling/createMessage" if isinstance(item, SamplingRequest) else "roots/list")
        if isinstance(call, Relay):  # an upstream task's question, met while the proxy waits for the task
            raise ClientError(INTERNAL_ERROR, f"the upstream task asked {method} while it ran; the proxy can pass on "
                                              "only the questions asked before a task starts")
        if not isinstance(call, HeldCall):
            call = self._in_flight[0] if len(self._in_flight) == 1 else None
        method = ("elicitation/create" if isinstance(item, ElicitationRequest) else
                  "sampling/createMessage" if isinstance(item, SamplingRequest) else "roots/list")
        if call is None:
            log.warning("the upstream server asked %s outside any call the proxy can tell; refused", method)
            if isinstance(item, ElicitationRequest):
                return {"action": "cancel"}
            raise ClientError(INVALID_REQUEST, f"{method} outside a call: nobody to ask")
        return await call.ask({"method": method, "params": dict(item.raw)}, self.held.answer_timeout)

    def _current_relay(self) -> Relay | None:
        relay = _relay_of(CURRENT.get(None))
        if relay is None and len(self._in_flight) == 1:
            relay = _relay_of(self._in_flight[0])
        return relay

    def _progress(self, progress: float, total: float | None, message: str | None) -> None:
        relay = self._current_relay()
        if relay is not None:
            relay.progress(progress, total, message)

    def _log(self, level: str, logger: str | None, data: Any) -> None:
        relay = self._current_relay()
        if relay is not None:
            relay.log(level, logger, data)
        else:
            log.debug("upstream log (%s, no call to relay it to): %r", level, data)


def _cause(error: BaseException) -> BaseException:
    """What broke a client: the first :class:`ClientError` (or ``OSError``) among what its tasks raised."""
    if isinstance(error, BaseExceptionGroup):
        leaves = [_cause(inner) for inner in error.exceptions]
        return next((leaf for leaf in leaves if isinstance(leaf, (ClientError, OSError))), leaves[0])
    return error


def _version() -> str:
    from .._version import __version__

    return __version__

