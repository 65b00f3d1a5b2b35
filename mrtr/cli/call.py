"""``mrtr call`` and ``mrtr list``: a client for people at a terminal (the ``client`` extra)."""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

from .arguments import UsageError, positive_int, seconds
from .arguments import port as port_number
from .commands import COMMANDS

__all__ = ["add_client_commands"]


def add_client_commands(commands: Any) -> None:
    """Add ``mrtr call`` and ``mrtr list`` and their options to the command parser's subcommands."""
    target_help = "the server: its URL (http://host:port/mcp), or use --stdio COMMAND instead"
    stdio_help = 'start the server with this command and talk to it over stdio (e.g. "mrtr serve app:server --stdio")'
    from ..client.client import DEFAULT_DEADLINE

    timeout_help = (f"give up on the server when one request and its answer take longer than this (default: "
                    f"{DEFAULT_DEADLINE:g}); the time you take to answer is not counted")
    call = commands.add_parser(
        "call",
        help=COMMANDS["call"].summary,
        usage="mrtr call [options] (URL | --stdio COMMAND) (TOOL [name=value ...] | --prompt NAME [name=value ...] "
              "| --resource URI)",
        description=(
            "Call a tool (or get a prompt, or read a resource) and answer the questions the server\n"
            "asks on the way. Arguments are name=value, typed by the tool's input schema (JSON for\n"
            "objects and arrays). When standard input is not a terminal, each question's field is\n"
            "read as one line, in order. Type !decline or !cancel at any question."
        ),
        epilog=(
            "examples:\n"
            "  mrtr call http://127.0.0.1:8000/mcp book_table restaurant=Luigi people=4\n"
            "  mrtr call --stdio 'mrtr serve myapp:server --stdio' book_table restaurant=Luigi\n"
            "  mrtr call http://127.0.0.1:8000/mcp --prompt onboarding\n"
            "  printf 'a@b.c\\nred\\n' | mrtr call http://127.0.0.1:8000/mcp two_questions plan=pro"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    call.add_argument("words", nargs="*", metavar="URL/TOOL/name=value", help=target_help)
    call.add_argument("--stdio", metavar="COMMAND", help=stdio_help)
    what = call.add_mutually_exclusive_group()
    what.add_argument("--prompt", metavar="NAME", help="get this prompt instead of calling a tool")
    what.add_argument("--resource", metavar="URI", help="read this resource instead of calling a tool")
    call.add_argument("--root", action="append", default=[], metavar="PATH",
                      help="answer roots requests with this directory (repeatable)")
    call.add_argument("--sample-reply", metavar="TEXT", help="answer sampling requests with this text")
    call.add_argument("--max-rounds", type=positive_int, default=10, metavar="N",
                      help="give up after N rounds of questions (default: 10)")
    call.add_argument("--timeout", type=seconds, default=None, metavar="SECONDS", help=timeout_help)
    call.add_argument("--task", metavar="ID", help="pick up a task started before (its id was printed) and wait for it")
    call.add_argument("--era", choices=("auto", "modern", "legacy"), default="auto",
                      help="the protocol era to speak: probe the server (auto, the default), 2026-07-28 only "
                           "(modern), or the 2025 initialize session (legacy)")
    call.add_argument("--save-ui", metavar="PATH",
                      help="write the tool's interface (MCP Apps: the HTML a host renders for it) to this file")
    call.add_argument("--server-log", metavar="FILE",
                      help="with --stdio, where the server's own log goes (default: kept aside, and its last lines "
                           "shown if the call fails)")
    _add_auth_options(call)
    call.set_defaults(run=_call)
    listing = commands.add_parser(
        "list", help=COMMANDS["list"].summary,
        usage="mrtr list [--timeout SECONDS] (URL | --stdio COMMAND)",
    )
    listing.add_argument("words", nargs="*", metavar="URL", help=target_help)
    listing.add_argument("--stdio", metavar="COMMAND", help=stdio_help)
    listing.add_argument("--timeout", type=seconds, default=None, metavar="SECONDS", help=timeout_help)
    listing.add_argument("--era", choices=("auto", "modern", "legacy"), default="auto",
                         help="the protocol era to speak (default: probe the server)")
    _add_auth_options(listing)
    listing.set_defaults(run=_list)
    logout = commands.add_parser(
        "logout", help=COMMANDS["logout"].summary,
        usage="mrtr logout URL",
        description="Forget the OAuth tokens and client registrations mrtr call and mrtr list keep for the server "
                    "at URL (in $MRTR_TOKENS, else $XDG_STATE_HOME/mrtr/oauth).")
    logout.add_argument("url", metavar="URL", help="the server's URL, as given to mrtr call")
    logout.set_defaults(run=_logout)


def _add_auth_options(parser: Any) -> None:
    auth = parser.add_argument_group("authorization (servers that answer 401)")
    auth.add_argument("--client-id", metavar="ID", help="a client id registered with the authorization server "
                                                        "(else the client registers itself where it can)")
    auth.add_argument("--client-secret", metavar="SECRET",
                      help="that client's secret (better: the MRTR_CLIENT_SECRET environment variable); needs "
                           "--issuer")
    auth.add_argument("--issuer", metavar="URL",
                      help="the one authorization server to use (its https issuer URL), the one the client id is "
                           "registered with: the id and its secret go to that server only, whatever the MCP "
                           "server names")
    auth.add_argument("--client-metadata-url", metavar="URL",
                      help="the https URL of this client's metadata document, used as its client id where the "
                           "authorization server supports client ID metadata documents")
    auth.add_argument("--scope", action="append", default=[], metavar="SCOPE",
                      help="ask for this scope too (repeatable)")
    auth.add_argument("--redirect-port", type=port_number, default=0, metavar="PORT",
                      help="the loopback port the browser comes back to (default: any free one)")


def _auth(args: argparse.Namespace, target: str | list[str]) -> dict[str, Any]:
    """The ``auth=`` option of the Client: the authorization code flow, tokens kept per server."""
    if not isinstance(target, str):
        return {}
    import os

    secret = args.client_secret or os.environ.get("MRTR_CLIENT_SECRET") or None
    if args.client_secret and args.client_id is None:
        raise UsageError("--client-secret is the secret of a client id: give --client-id (and --issuer) too")
    if args.client_id is None:
        secret = None  # MRTR_CLIENT_SECRET set for another use: without a client id it has no part here
    if secret is not None and args.issuer is None:
        given = "--client-secret" if args.client_secret else "MRTR_CLIENT_SECRET"
        raise UsageError(f"{given} needs --issuer URL, the authorization server the client id is registered "
                         "with: without it the secret would go to whichever authorization server the MCP server "
                         "names")
    from ..client.oauth import AuthorizationCode

    try:
        return {"auth": AuthorizationCode(client_id=args.client_id, client_secret=secret, issuer=args.issuer,
                                          client_metadata_url=args.client_metadata_url, scopes=args.scope,
                                          redirect_port=args.redirect_port, client_name="mrtr call")}
    except ValueError as exc:  # an issuer that is no https URL
        raise UsageError(str(exc).replace("issuer=", "--issuer ", 1)) from None


def _logout(args: argparse.Namespace) -> int:
    from ..client.tokens import FileTokenStore

    store = FileTokenStore()
    try:
        forgot = store.delete(args.url)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    print(f"mrtr logout: {'forgot the tokens of' if forgot else 'no tokens were kept for'} {args.url}",
          file=sys.stderr)
    return 0


def _client_target(args: argparse.Namespace) -> tuple[str | list[str], list[str]]:
    words = list(args.words)
    if args.stdio is not None:
        command = shlex.split(args.stdio)
        if not command:
            raise UsageError("--stdio needs a command")
        return command, words
    if not words:
        raise UsageError("give the server's URL (http://host:port/mcp) or --stdio COMMAND")
    url = words.pop(0)
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"{url!r} is not an http(s) URL; to start a server yourself use --stdio COMMAND")
    try:
        from ..client.targets import HTTPTarget

        HTTPTarget(url)  # the client's own URL check, said as a usage error before anything starts
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    except ImportError:
        pass  # the missing extra is reported where the client is built
    return url, words


def _call(args: argparse.Namespace) -> int:
    import trio

    try:
        from ..client.terminal import ArgumentError, Terminal, output_console, run_call
    except ImportError as exc:
        print(f"mrtr call: {exc}", file=sys.stderr)
        return 1
    target, words = _client_target(args)
    terminal = Terminal(sample_reply=args.sample_reply, roots=args.root)
    out = output_console(terminal.interactive and sys.stdout.isatty())
    resume = "mrtr call " + (f"--stdio {shlex.quote(args.stdio)}" if args.stdio is not None else str(target))
    options: dict[str, Any] = {"era": args.era, **_auth(args, target)}
    server_log = None
    if isinstance(target, list):
        # The server's own log (access lines, warnings) must not land among the questions.
        server_log = open(args.server_log or tempfile.mkstemp(prefix="mrtr-server-", suffix=".log")[1], "wb")
        options["stderr"] = server_log.fileno()
    try:
        code = trio.run(partial(run_call, target, words, prompt=args.prompt, resource=args.resource,
                                terminal=terminal, out=out, max_rounds=args.max_rounds, deadline=args.timeout,
                                task_id=args.task, resume=resume, save_ui=args.save_ui, **options))
    except ArgumentError as exc:
        raise UsageError(str(exc)) from None
    except KeyboardInterrupt:
        terminal.pause()
        print("mrtr call: interrupted", file=sys.stderr)
        code = 130
    finally:
        if server_log is not None:
            server_log.close()
    if server_log is not None:
        _server_log_after(Path(server_log.name), failed=code != 0, keep=args.server_log is not None)
    return code


def _server_log_after(path: Path, *, failed: bool, keep: bool) -> None:
    """Show the last lines of a stdio server's log when the call failed; drop a log nobody asked to keep."""
    try:
        if failed:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()[-20:]
            if lines:
                from ..client.display import printable

                print("mrtr call: the server's log ended with:", file=sys.stderr)
                for line in lines:
                    print(f"  {printable(line, multiline=False)}", file=sys.stderr)
        if not keep:
            path.unlink()
    except OSError:
        pass


def _list(args: argparse.Namespace) -> int:
    import trio

    try:
        from ..client.terminal import output_console, run_list
    except ImportError as exc:
        print(f"mrtr list: {exc}", file=sys.stderr)
        return 1
    target, words = _client_target(args)
    if words:
        raise UsageError(f"unexpected arguments: {' '.join(words)}")
    interactive = sys.stdout.isatty()
    try:
        return trio.run(partial(run_list, target, out=output_console(interactive),
                                errors=output_console(interactive and sys.stderr.isatty(), stderr=True),
                                deadline=args.timeout, era=args.era, **_auth(args, target)))
    except KeyboardInterrupt:
        return 130
