"""The blocking entry point: signals, graceful shutdown and supervised worker processes.

:func:`run` owns the trio loop. With one worker it serves in this process and turns
SIGINT/SIGTERM into a graceful shutdown of :func:`mrtr.transports.http.native.serve_socket`.

With ``workers=N`` this process becomes a supervisor that serves nothing itself: it
forks ``N`` workers, each binding the same port with ``SO_REUSEPORT`` (the kernel
spreads the connections), and watches them:

- a worker that dies is logged at once (pid, exit code or signal) and replaced, after
  a delay that doubles for a worker dying again soon after its start (0.5 s up to
  30 s), so a crash loop does not spin;
- SIGINT/SIGTERM is passed on to the workers as SIGTERM, each shuts down gracefully,
  and :func:`run` returns once they all exited (those still running after
  ``shutdown_grace`` plus a margin are killed);
- a worker never outlives the supervisor: on Linux it asks the kernel for SIGTERM when
  its parent dies (``PR_SET_PDEATHSIG``), and everywhere it also checks its parent pid
  every second, so a SIGKILLed supervisor leaves no orphan holding the port and an old key.

The supervisor holds no client connection, so forking a replacement never copies one.
The ``requestState`` key ring is built before the first fork, so every worker,
replacements included, receives the very same codec with the server object; no key
travels through the environment.

A 2025-era session lives in the worker that opened it (a suspended generator cannot
move); its id names that worker, and each worker also listens on a Unix socket of its
own, in a directory the supervisor makes before the first fork (only this user may
enter it), so the others forward that session's requests to it
(:mod:`mrtr.transports.http.forwarding`). A replacement takes its slot's socket and
name; the sessions of the worker it replaces are gone, and their ids answer ``404``.
With a Redis store none of this is used: each worker is a node of its own, the sessions'
records are in Redis, and any worker serves any session (``mrtr.transports.http.sessions``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import logging
import os
import select
import shutil
import signal
import socket
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any

import trio

from ...core.jsonrpc import Dispatcher
from .config import ServerConfig
from .forwarding import Forwarder
from .native import bind, serve_socket

__all__ = ["run"]

log = logging.getLogger("mrtr.http")

_RESTART_DELAY = 0.5  # seconds before replacing a dead worker; doubles while workers die young
_RESTART_DELAY_MAX = 30.0
_HEALTHY_AFTER = 30.0  # a worker that lived this long resets the delay
_READY_TIMEOUT = 10.0  # seconds a new worker gets to bind before the supervisor stops waiting for it
_PARENT_CHECK = 1.0  # seconds between a worker's checks that its parent is alive
_PR_SET_PDEATHSIG = 1


async def _serve_until_signal(server: Dispatcher, sock: socket.socket, config: ServerConfig,
                              parent: int | None = None, local: socket.socket | None = None,
                              forwarder: Forwarder | None = None) -> None:
    shutdown = trio.Event()
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:

            async def on_signal() -> None:
                async for signum in signals:
                    if shutdown.is_set():
                        log.info("received %s while already shutting down", signal.Signals(signum).name)
                        continue
                    log.info("received %s: shutting down gracefully", signal.Signals(signum).name)
                    shutdown.set()

            async def watch_parent(pid: int) -> None:
                while os.getppid() == pid:
                    await trio.sleep(_PARENT_CHECK)
                log.error("the supervisor (pid %d) is gone; shutting down this worker", pid)
                shutdown.set()

            nursery.start_soon(on_signal)
            if parent is not None:
                nursery.start_soon(watch_parent, parent)
            await serve_socket(server, sock, config, shutdown_event=shutdown, local=local, forwarder=forwarder)
            nursery.cancel_scope.cancel()


def _die_with_parent() -> None:
    """Ask the kernel (Linux) to send SIGTERM when the parent process dies."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
            log.debug("prctl(PR_SET_PDEATHSIG) failed: %s", os.strerror(ctypes.get_errno()))
    except (OSError, AttributeError) as exc:  # no libc to load: the parent-pid check still runs
        log.debug("prctl unavailable: %s", exc)


def _worker(server: Dispatcher, host: str, port: int, config: ServerConfig, parent: int, ready: int,
            index: int, forwarder: Forwarder) -> None:
    """The body of a forked worker; never returns (``os._exit``)."""
    code = 0
    try:
        _die_with_parent()
        if os.getppid() != parent:  # the parent died before the request above took effect
            os._exit(0)
        local = None
        if server.legacy is not None:
            server.legacy.serve_as(str(index))  # this worker's session ids name it
            local = forwarder.listen(str(index), config.backlog)
        sock = bind(host, port, config, reuse_port=True)
        try:
            os.write(ready, b"r")  # the supervisor may have stopped listening (a replacement): fine
        except OSError:
            pass
        os.close(ready)
        trio.run(_serve_until_signal, server, sock, config, parent, local, forwarder)
    except BaseException:  # noqa: BLE001 - a worker must report and exit, never unwind into the parent's code
        log.exception("worker pid %d failed", os.getpid())
        code = 1
    finally:
        logging.shutdown()
        os._exit(code)


@dataclass
class _Slot:
    """One worker position: the process serving it now and its restart delay."""

    index: int
    pid: int = 0
    started: float = 0.0
    delay: float = _RESTART_DELAY
    restart_at: float | None = None


class _Supervisor:
    def __init__(self, server: Dispatcher, host: str, port: int, config: ServerConfig, workers: int) -> None:
        self.server = server
        self.host = host
        self.port = port
        self.config = config
        self.slots = [_Slot(index) for index in range(1, workers + 1)]
        self.stopping = False
        self.signals: list[int] = []
        self.inherited: list[Any] = []  # what a forked worker must close: the supervisor's socket and pipes
        self.forwarder = Forwarder(tempfile.mkdtemp(prefix="mrtr-workers-"))  # 0700: only this user enters

    def spawn(self, slot: _Slot) -> int:
        """Fork the worker of ``slot``; return the read end of its readiness pipe."""
        ready_r, ready_w = os.pipe()
        parent = os.getpid()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child
            os.close(ready_r)
            signal.set_wakeup_fd(-1)
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
                signal.signal(signum, signal.SIG_DFL)
            for item in self.inherited:
                try:
                    item.close() if hasattr(item, "close") else os.close(item)
                except OSError:
                    pass
            _worker(self.server, self.host, self.port, self.config, parent, ready_w, slot.index, self.forwarder)
        os.close(ready_w)
        slot.pid, slot.started, slot.restart_at = pid, time.monotonic(), None
        return ready_r

    def wait_ready(self, pipes: list[int]) -> None:
        deadline = time.monotonic() + _READY_TIMEOUT
        pending = list(pipes)
        while pending and time.monotonic() < deadline:
            readable, _, _ = _select(pending, deadline - time.monotonic())
            for fd in readable:
                pending.remove(fd)
        for fd in pipes:
            os.close(fd)

    def reap(self) -> None:
        """Collect exited workers: log each at once and schedule its replacement."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            slot = next((slot for slot in self.slots if slot.pid == pid), None)
            if slot is None:
                continue
            slot.pid = 0
            if self.stopping:
                if os.waitstatus_to_exitcode(status) not in (0, -signal.SIGTERM):
                    log.error("worker %d (pid %d) exited with %s", slot.index, pid, _describe(status))
                continue
            lived = time.monotonic() - slot.started
            slot.delay = _RESTART_DELAY if lived >= _HEALTHY_AFTER else min(slot.delay * 2, _RESTART_DELAY_MAX)
            delay = _RESTART_DELAY if lived >= _HEALTHY_AFTER else slot.delay / 2
            slot.restart_at = time.monotonic() + delay
            log.error("worker %d (pid %d) exited unexpectedly with %s after %.1f s; restarting it in %.1f s",
                      slot.index, pid, _describe(status), lived, delay)

    def run(self, sock: socket.socket) -> None:
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        previous = {signum: signal.signal(signum, self.on_signal)
                    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD)}
        old_wakeup = signal.set_wakeup_fd(wake_w)
        self.inherited = [sock, wake_r, wake_w]
        try:
            self.wait_ready([self.spawn(slot) for slot in self.slots])
            sock.close()  # the workers listen on their own sockets now; a listening one given in would only queue
            log.info("supervising %d workers: %s", len(self.slots), ", ".join(str(slot.pid) for slot in self.slots))
            while not self.stopping:
                now = time.monotonic()
                due = [slot.restart_at for slot in self.slots if slot.restart_at is not None]
                timeout = max(0.0, min(due) - now) if due else None
                _select([wake_r], timeout)
                _drain(wake_r)
                self.handle_signals()
                self.reap()
                if self.stopping:
                    break
                for slot in self.slots:
                    if slot.restart_at is not None and slot.restart_at <= time.monotonic():
                        os.close(self.spawn(slot))
                        log.info("worker %d restarted as pid %d", slot.index, slot.pid)
        finally:
            self.stopping = True
            self.stop_all(wake_r)
            signal.set_wakeup_fd(old_wakeup)
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            os.close(wake_r)
            os.close(wake_w)
            shutil.rmtree(self.forwarder.directory, ignore_errors=True)

    def on_signal(self, signum: int, frame: Any) -> None:
        self.signals.append(signum)

    def handle_signals(self) -> None:
        while self.signals:
            signum = self.signals.pop(0)
            if signum in (signal.SIGINT, signal.SIGTERM):
                log.info("received %s: shutting the workers down gracefully", signal.Signals(signum).name)
                self.stopping = True

    def stop_all(self, wake_r: int) -> None:
        for slot in self.slots:
            slot.restart_at = None
            if slot.pid:
                _kill(slot.pid, signal.SIGTERM)
        deadline = time.monotonic() + self.config.shutdown_grace + 5.0
        while any(slot.pid for slot in self.slots) and time.monotonic() < deadline:
            _select([wake_r], min(0.5, deadline - time.monotonic()))
            _drain(wake_r)
            self.reap()
        for slot in self.slots:
            if slot.pid:
                log.error("worker %d (pid %d) did not stop in time; killing it", slot.index, slot.pid)
                _kill(slot.pid, signal.SIGKILL)
                try:
                    os.waitpid(slot.pid, 0)
                except ChildProcessError:
                    pass
                slot.pid = 0


def _select(fds: list[int], timeout: float | None) -> tuple[list[int], list[int], list[int]]:
    try:
        return select.select(fds, [], [], timeout)
    except InterruptedError:  # pragma: no cover - PEP 475 retries, but be safe
        return [], [], []


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass


def _kill(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass
    except OSError as exc:  # pragma: no cover
        if exc.errno != errno.ESRCH:
            raise


def _describe(status: int) -> str:
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


def run(server: Dispatcher, host: str = "127.0.0.1", port: int = 8000, *, workers: int = 1,
        sock: socket.socket | None = None, **options: Any) -> None:
    """Serve ``server`` until SIGINT or SIGTERM, then shut down gracefully and return.

    Blocks; starts its own trio loop (from inside trio, use :func:`mrtr.http.serve_http`).
    With ``workers=N`` the process forks ``N`` workers and supervises them; each binds
    the same port with ``SO_REUSEPORT`` and the kernel spreads connections among them. Signals
    are forwarded to the workers, and ``run`` returns once they all exited; a worker
    that dies is replaced, and workers exit when this process dies (see the module
    docs). The key ring is built before the fork, so a retry can land on any worker. ``sock``, when
    given, is an already listening socket to serve on (with ``workers > 1`` it must
    have ``SO_REUSEPORT`` set); ``host``/``port`` then only name it for the workers.
    ``options``: see :class:`~mrtr.transports.http.config.ServerConfig`.
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        pass
    else:
        raise RuntimeError("run() starts its own trio loop; inside trio, use mrtr.http.serve_http()")
    config = ServerConfig.from_options(options)
    server.settle_key()  # before any fork: every worker gets this key ring; a missing key is said once
    if sock is None:
        # With workers the supervisor only holds the port; the workers listen and accept.
        sock = bind(host, port, config, reuse_port=True if workers > 1 else None, listen=workers == 1)
    else:
        sock.setblocking(False)
    if workers == 1:
        trio.run(_serve_until_signal, server, sock, config)
        return
    bound_host, bound_port = sock.getsockname()[:2]
    _Supervisor(server, bound_host, bound_port, config, workers).run(sock)
