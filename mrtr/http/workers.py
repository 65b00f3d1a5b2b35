"""The blocking entry point: signals, graceful shutdown and worker processes.

:func:`run` owns the trio loop. It turns SIGINT/SIGTERM into a graceful shutdown of
:func:`mrtr.http.native.serve_socket` and, with ``workers=N``, forks ``N - 1`` more
processes that bind the same port with ``SO_REUSEPORT`` (the kernel spreads the
connections). The ``requestState`` key ring is built in the parent before the fork, so
every worker receives the very same codec with the server object it is handed; no key
travels through the environment.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import socket
from collections.abc import Sequence
from typing import Any

import trio

from ..jsonrpc import Dispatcher
from .config import ServerConfig
from .native import bind, serve_socket

__all__ = ["run"]

log = logging.getLogger("mrtr.http")


async def _serve_until_signal(server: Dispatcher, sock: socket.socket, config: ServerConfig,
                              children: Sequence[Any] = ()) -> None:
    shutdown = trio.Event()
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:

            async def on_signal() -> None:
                async for signum in signals:
                    if shutdown.is_set():
                        log.info("received %s while already shutting down", signal.Signals(signum).name)
                        continue
                    log.info("received %s: shutting down gracefully", signal.Signals(signum).name)
                    for child in children:
                        if child.is_alive():
                            try:
                                os.kill(child.pid, signal.SIGTERM)
                            except ProcessLookupError:
                                pass
                    shutdown.set()

            async def watch_children() -> None:
                reported: set[int] = set()
                while True:
                    await trio.sleep(1.0)
                    for child in children:
                        if not child.is_alive() and child.pid not in reported and not shutdown.is_set():
                            reported.add(child.pid)
                            log.error("worker pid %d exited unexpectedly (exit code %s)", child.pid, child.exitcode)

            nursery.start_soon(on_signal)
            if children:
                nursery.start_soon(watch_children)
            await serve_socket(server, sock, config, shutdown_event=shutdown)
            nursery.cancel_scope.cancel()


def _worker(server: Dispatcher, host: str, port: int, config: ServerConfig, inherited: socket.socket) -> None:
    inherited.close()  # the parent's socket; this worker listens on its own
    sock = bind(host, port, config, reuse_port=True)
    trio.run(_serve_until_signal, server, sock, config)


def _settle_key_ring(server: Any) -> None:
    """Build the server's codec now, in the parent, so forked workers inherit one key ring.

    Building it also reports a missing ``MRTR_SECRET`` at start rather than at the first
    conversation; the ephemeral key it then generates is shared by this run's workers.
    """
    _ = server.engine


def run(server: Any, host: str = "127.0.0.1", port: int = 8000, *, workers: int = 1,
        sock: socket.socket | None = None, **options: Any) -> None:
    """Serve ``server`` until SIGINT or SIGTERM, then shut down gracefully and return.

    Blocks; starts its own trio loop (from inside trio, use :func:`mrtr.http.serve`).
    With ``workers=N`` the process forks ``N - 1`` more workers; each binds the same
    port with ``SO_REUSEPORT`` and the kernel spreads connections among them. Signals
    are forwarded to the workers, and ``run`` returns once they all exited. The key
    ring is built before the fork, so a retry can land on any worker. ``sock``, when
    given, is an already listening socket to serve on (with ``workers > 1`` it must
    have ``SO_REUSEPORT`` set); ``host``/``port`` then only name it for the workers.
    ``options``: see :class:`~mrtr.http.config.ServerConfig`.
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        pass
    else:
        raise RuntimeError("run() starts its own trio loop; inside trio, use mrtr.http.serve()")
    config = ServerConfig.from_options(options)
    _settle_key_ring(server)
    if sock is None:
        sock = bind(host, port, config, reuse_port=True if workers > 1 else None)
    else:
        sock.setblocking(False)
    if workers == 1:
        trio.run(_serve_until_signal, server, sock, config)
        return
    bound_host, bound_port = sock.getsockname()[:2]
    context = multiprocessing.get_context("fork")
    children = []
    try:
        for index in range(1, workers):
            child = context.Process(target=_worker, args=(server, bound_host, bound_port, config, sock),
                                    name=f"mrtr-http-worker-{index}")
            child.start()
            children.append(child)
        log.info("started %d worker processes: %s", workers, ", ".join(str(p) for p in [os.getpid()] +
                                                                          [c.pid for c in children]))
        trio.run(_serve_until_signal, server, sock, config, children)
    finally:
        for child in children:
            if child.is_alive() and child.pid is not None:
                try:
                    os.kill(child.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for child in children:
            child.join(config.shutdown_grace + 5.0)
            if child.is_alive():
                log.error("worker pid %d did not stop in time; killing it", child.pid)
                child.kill()
                child.join()
            elif child.exitcode:
                log.error("worker pid %d exited with code %s", child.pid, child.exitcode)
