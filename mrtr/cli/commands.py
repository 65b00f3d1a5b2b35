"""The ``mrtr`` command line: ``mrtr serve``, ``mrtr proxy``, ``mrtr call``, ``mrtr list``, ``mrtr check-tasks``, ``mrtr install``, ``mrtr dev``.

``mrtr serve [module:attribute] [options]`` serves a Server; ``mrtr proxy URL`` (or
``mrtr proxy -- COMMAND ARGS``) serves another MCP server to clients of either era
(``mrtr.cli.proxy``); ``mrtr call`` and
``mrtr list`` are a client for people at a terminal (``mrtr.client.terminal``, which
needs the ``client`` extra); ``mrtr logout URL`` forgets the tokens kept for a server;
``mrtr check-tasks module:attribute`` replays the tasks in flight in a store against that
code before it is deployed (``mrtr.cli.check``); ``mrtr install HOST module:attribute`` puts
a server into an MCP host's configuration and ``mrtr uninstall HOST NAME`` takes it out
(``mrtr.cli.install``); ``mrtr dev module:attribute`` serves with reload and starts the
MCP Inspector connected to it (``mrtr.cli.dev``).

``module:attribute`` names a :class:`mrtr.server.Server` the way uvicorn names an ASGI
app (``myapp.main:server``; the attribute may be dotted). The current directory is put
on ``sys.path`` first, so a module next to you imports. Without it, the bundled example
server (``mrtr.examples.server:server``) is served.

Exit codes: 0 after a clean shutdown, 1 when the application fails to import or the
server fails, 2 for usage errors (bad arguments, unknown module or attribute, an
attribute that is not a Server). Everything the command says goes to stderr; with
``--stdio``, stdout carries protocol messages only.
"""

from __future__ import annotations

import argparse
import sys

from .._version import __version__
from .app import AppImportError
from .arguments import UsageError
from .call import add_client_commands
from .check import add_check_command
from .dev import add_dev_command
from .install import add_install_commands
from .proxy import add_proxy_command
from .serve import add_serve_command

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The parser of the ``mrtr`` command and its subcommands."""
    parser = argparse.ArgumentParser(
        prog="mrtr",
        description="Run MCP 2026-07-28 servers whose handlers ask the user mid-execution.",
        epilog="Run 'mrtr COMMAND --help' for the options of a command.",
    )
    parser.add_argument("--version", action="version", version=f"mrtr {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_serve_command(commands)
    add_proxy_command(commands)
    add_client_commands(commands)
    add_check_command(commands)
    add_install_commands(commands)
    add_dev_command(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the ``mrtr`` command with ``argv`` (default: ``sys.argv[1:]``) and return its exit code."""
    parser = build_parser()
    try:
        args, extras = parser.parse_known_args(argv)
        # ``mrtr call URL --prompt p a=1``: words after an option are still the command's words.
        if extras and getattr(args, "words", None) is not None and not any(e.startswith("-") for e in extras):
            args.words += extras
        elif extras:
            parser.error(f"unrecognized arguments: {' '.join(extras)}")
    except SystemExit as exc:  # --help, --version, or an argparse error (code 2)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        args.argv = argv
        return int(args.run(args))
    except UsageError as exc:
        message = str(exc)
        if args.command in ("call", "list", "logout"):  # may name what a server sent (its tools): shown inert
            from ..client.display import printable

            message = printable(message)
        print(f"mrtr {args.command}: error: {message}", file=sys.stderr)
        return 2
    except AppImportError as exc:
        print(f"mrtr {args.command}: {exc}", file=sys.stderr)
        return 1
