"""``mrtr serve --reload``: restart the server when a source file changes (development only).

The reloading process serves nothing itself: it runs ``python -m mrtr serve ...`` (the
same arguments, without ``--reload``) as a child, watches the current directory for
changed ``.py`` files with ``watchfiles`` (its async watcher runs on trio through
anyio), and on a change stops the child with SIGTERM (graceful shutdown; SIGKILL
after a grace period) and starts a new one. A child that fails at start, say with a
syntax error in the module being edited, is reported and restarted at the next change.
SIGINT or SIGTERM stops the child and then the reloader. The child runs with
``MRTR_DEBUG=1`` (unless set otherwise), so its server shows clients every error in full.

``watchfiles`` comes with the ``dev`` extra (``pip install 'mrtr[dev]'``).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

import trio

__all__ = ["run_with_reload"]

log = logging.getLogger("mrtr.reload")

_STOP_GRACE = 10.0  # seconds a child gets to shut down before it is killed


def run_with_reload(argv: list[str], *, root: str | None = None) -> int:
    """Serve ``mrtr <argv>`` in a child process restarted on every ``.py`` change under
    ``root`` (default: the current directory); return the exit code."""
    try:
        import watchfiles  # noqa: F401
    except ImportError:
        print("mrtr serve: --reload needs the dev extra: pip install 'mrtr[dev]' (it brings watchfiles)",
              file=sys.stderr)
        return 1
    if not logging.getLogger().handlers:
        logging.basicConfig(stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("mrtr.reload").setLevel(logging.INFO)
    return trio.run(_supervise, [sys.executable, "-m", "mrtr", *argv], Path(root or os.getcwd()))


def _development_env() -> dict[str, str]:
    """The child's environment: this one, with ``MRTR_DEBUG=1`` unless it was set.

    A server being developed shows its clients every error in full (see
    ``Server(debug=...)``); ``MRTR_DEBUG=0`` keeps the production masking while reloading.
    """
    env = dict(os.environ)
    env.setdefault("MRTR_DEBUG", "1")
    return env


async def _supervise(command: list[str], root: Path) -> int:
    from watchfiles import PythonFilter, awatch

    changed = trio.Event()
    stop = trio.Event()

    async def watch() -> None:
        nonlocal changed
        async for changes in awatch(root, watch_filter=PythonFilter()):
            paths = sorted({Path(path).relative_to(root).as_posix() if Path(path).is_relative_to(root) else path
                            for _, path in changes})
            log.info("change in %s; restarting", ", ".join(paths[:5]) + (" ..." if len(paths) > 5 else ""))
            changed.set()

    async def on_signal() -> None:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for signum in signals:
                log.info("received %s; stopping", signal.Signals(signum).name)
                stop.set()
                changed.set()
                return

    log.info("watching %s for changes to .py files", root)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch)
        nursery.start_soon(on_signal)
        while not stop.is_set():
            changed = trio.Event()
            process = await trio.lowlevel.open_process(command, cwd=root, env=_development_env())
            exited = trio.Event()

            async def reap(process: Any = process, exited: trio.Event = exited) -> None:
                await process.wait()
                exited.set()

            nursery.start_soon(reap)
            async with trio.open_nursery() as race:
                async def until(event: trio.Event) -> None:
                    await event.wait()
                    race.cancel_scope.cancel()

                race.start_soon(until, changed)
                race.start_soon(until, exited)
            if exited.is_set() and not changed.is_set():
                log.warning("the server exited with code %s; waiting for a change to restart it", process.returncode)
                await changed.wait()
                continue
            await _stop(process)
        nursery.cancel_scope.cancel()
    return 0


async def _stop(process: Any) -> None:
    if process.returncode is not None:
        return
    process.send_signal(signal.SIGTERM)
    with trio.move_on_after(_STOP_GRACE):
        await process.wait()
        return
    log.warning("the server did not stop within %gs; killing it", _STOP_GRACE)
    process.kill()
    await process.wait()
