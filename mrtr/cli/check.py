"""``mrtr check-tasks``: would the tasks in flight survive a deploy of this code?

``mrtr check-tasks myapp.main:server --store URL`` loads the server the deploy would
serve, opens the task store the running nodes share, and replays every task still
working or waiting for input against the new handlers, without running a Step that has
not run yet and without writing anything (:mod:`mrtr.carriers.tasks.check`). It lists
each task that would fail, with the diagnostic a node would give it, and exits 1 when
any would, so a deploy can be gated on it.

Exit codes: 0 every task in flight replays cleanly (or none is in flight), 1 some would
fail (or the application failed to import), 2 usage errors, 3 the store could not be
read. The report goes to stdout; the store's URL is shown with its password masked.
"""

from __future__ import annotations

import argparse
import logging
import sys
import warnings
from typing import Any

from .app import load_server
from .commands import COMMANDS
from .serve import add_store_option

__all__ = ["add_check_command"]


def add_check_command(commands: Any) -> None:
    """Add ``mrtr check-tasks`` and its options to the command parser's subcommands."""
    check = commands.add_parser(
        "check-tasks",
        help=COMMANDS["check-tasks"].summary,
        description=(
            "Replay every task still working or waiting for input in the task store against the\n"
            "handlers of MODULE:ATTRIBUTE, up to each task's next Step (no Step runs, nothing is\n"
            "written), and list the tasks that would fail after a deploy of that code."
        ),
        epilog=(
            "exit status: 0 no task would fail, 1 some would, 2 usage error, 3 the store could not be read\n"
            "\n"
            "example (gate a deploy on it):\n"
            "  mrtr check-tasks myapp.main:server --store redis://redis.internal:6379/0 && ./deploy.sh"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument("app", metavar="MODULE:ATTRIBUTE", help="the Server the deploy would serve")
    add_store_option(check, "the store the nodes share")
    check.set_defaults(run=_check)


def _check(args: argparse.Namespace) -> int:
    import trio

    from ..carriers.tasks.urls import chosen_url, default_url
    from ..core.errors import EphemeralKeyWarning
    from ..transports.logs import configure

    logger = logging.getLogger("mrtr")
    level = logger.level
    configure("error")  # the report is the output; what a serving node would log is not
    try:
        server = load_server(args.app)
        url = chosen_url(args.store) or default_url(server.name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", EphemeralKeyWarning)  # the check opens no token
            return trio.run(_run, server, args.app, url)
    finally:
        logger.setLevel(level)  # as it was, for a caller that runs the command in its own process


async def _run(server: Any, app: str, url: str) -> int:
    from ..carriers.tasks.check import check_tasks
    from ..carriers.tasks.store import StoreUnavailable, masked
    from ..carriers.tasks.urls import open_store

    shown = masked(url)
    try:
        try:
            # The lifespan runs, so handlers find ctx.lifespan as on a node; its own task store is a
            # throwaway one, so nothing this process starts can take a real task over.
            async with open_store(url) as store, server.running(store_url="memory:") as lifespan:
                checks = await check_tasks(store, server.task_binding, lifespan=lifespan)
        except BaseExceptionGroup as group:  # raised from inside a nursery of the store or the lifespan
            cause: BaseException = group
            while isinstance(cause, BaseExceptionGroup) and len(cause.exceptions) == 1:
                cause = cause.exceptions[0]
            raise cause from None
    except StoreUnavailable as error:
        print(f"mrtr check-tasks: {error}", file=sys.stderr)
        return 3
    except ValueError as error:  # a URL of no known kind
        print(f"mrtr check-tasks: {error}", file=sys.stderr)
        return 2
    failing = [check for check in checks if check.problem is not None]
    print(f"mrtr check-tasks: {len(checks)} task{'s' if len(checks) != 1 else ''} in flight in {shown}; "
          f"{len(failing)} would fail under {app}")
    for check in failing:
        versions = f"started by version {check.started_by or 'unknown'}"
        if check.running is not None:
            versions += f", this code has version {check.running}"
        print(f"\ntask {check.task_id} (tool {check.tool}, {check.status}, {versions}) would fail:")
        for line in str(check.problem).splitlines():
            print(f"  {line}")
    return 1 if failing else 0
