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
from collections.abc import Sequence
from typing import NamedTuple

from .._version import __version__
from .app import AppImportError
from .arguments import UsageError

__all__ = ["COMMANDS", "Command", "build_parser", "main"]


class Command(NamedTuple):
    """Where a subcommand of ``mrtr`` lives, and the line ``mrtr --help`` shows for it."""

    module: str
    """The module of :mod:`mrtr.cli` that holds it."""
    adder: str
    """The function of that module that adds it (and the commands beside it) to the subcommands."""
    summary: str
    """Its one line in ``mrtr --help``: the ``help=`` its own parser is added with."""


COMMANDS: dict[str, Command] = {
    "serve": Command("serve", "add_serve_command", "serve an mrtr Server over Streamable HTTP or stdio"),
    "proxy": Command("proxy", "add_proxy_command",
                     "serve another MCP server (a URL, or a command over stdio) to clients of either era"),
    "call": Command("call", "add_client_commands",
                    "call a tool, prompt or resource and answer the server's questions in the terminal"),
    "list": Command("call", "add_client_commands",
                    "list a server's tools (with their arguments), prompts and resources"),
    "logout": Command("call", "add_client_commands",
                      "forget the tokens kept for a server (they are kept per server, owner-only)"),
    "check-tasks": Command("check", "add_check_command",
                           "replay the tasks in flight in a store against the code about to be deployed"),
    "install": Command("install", "add_install_commands",
                       "put a server into an MCP host's configuration (Claude, Cursor, VS Code, ...)"),
    "uninstall": Command("install", "add_install_commands", "remove a server from an MCP host's configuration"),
    "dev": Command("dev", "add_dev_command",
                   "serve with reload and debug errors, and start the MCP Inspector connected to the server"),
}
"""The subcommands in the order ``mrtr --help`` lists them; a module's commands stand together."""


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of the ``mrtr`` command and its subcommands.

    Given the words it is to parse, it imports the module of the command they name alone and
    builds that command's parser in full; every other command is there by its name and summary
    only (enough for ``mrtr --help`` and for argparse to refuse an unknown one), so ``mrtr
    serve`` does not pay for the imports of ``mrtr install`` or ``mrtr dev``. The command is the
    first word not starting with ``-``: the options of ``mrtr`` itself take no value. Without
    ``argv``, every command is built in full.
    """
    parser = argparse.ArgumentParser(
        prog="mrtr",
        description="Run MCP 2026-07-28 servers whose handlers ask the user mid-execution.",
        epilog="Run 'mrtr COMMAND --help' for the options of a command.",
    )
    parser.add_argument("--version", action="version", version=f"mrtr {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    named = None if argv is None else COMMANDS.get(next((word for word in argv if not word.startswith("-")), ""))
    built: set[str] = set()
    for name, command in COMMANDS.items():
        if argv is not None and (named is None or command.module != named.module):
            commands.add_parser(name, help=command.summary, add_help=False)
        elif command.module not in built:
            built.add(command.module)
            # __import__, not importlib.import_module: the import statement's path, which -X importtime reports.
            module = __import__(f"{__package__}.{command.module}", fromlist=[command.adder])
            getattr(module, command.adder)(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the ``mrtr`` command with ``argv`` (default: ``sys.argv[1:]``) and return its exit code."""
    parser = build_parser(sys.argv[1:] if argv is None else argv)
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
