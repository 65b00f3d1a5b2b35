"""``mrtr proxy``: serve :func:`mrtr.proxy` of an upstream MCP server, over Streamable HTTP or stdio.

``mrtr proxy URL`` forwards to the server at ``URL``; ``mrtr proxy -- COMMAND ARGS...``
starts ``COMMAND`` and speaks to it over stdio (restarted with a backoff when it exits).
The proxy is served with every option of ``mrtr serve`` that applies
(:func:`mrtr.cli.serve.add_serving_options`), to clients of both eras. The proxy's own
credentials upstream come from the environment (``--upstream-header NAME=VARIABLE``),
never from the command line, where other users of the machine could read them.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from .arguments import UsageError, seconds
from .commands import COMMANDS
from .serve import add_serving_options, check_serving_options, configure_logging, serve_server

__all__ = ["add_proxy_command"]


def add_proxy_command(commands: Any) -> None:
    """Add ``mrtr proxy`` and its options to the command parser's subcommands."""
    proxy = commands.add_parser(
        "proxy",
        help=COMMANDS["proxy"].summary,
        description=(
            "Serve an upstream MCP server, of either protocol era, to clients of either era: its tools,\n"
            "prompts, resources and completion, its questions translated between the eras (a 2025\n"
            "session's live requests, a 2026-07-28 client's rounds). Over Streamable HTTP (the MCP\n"
            "endpoint is /mcp) or, with --stdio, over stdin/stdout. Logs go to stderr."
        ),
        epilog=(
            "examples:\n"
            "  mrtr proxy https://mcp.example.com/mcp --port 9000\n"
            "  mrtr proxy --stdio -- python my_2025_server.py       # a stdio server, to a host over stdio\n"
            "  mrtr proxy --port 9000 -- npx my-server              # a stdio server, over HTTP\n"
            "  UPSTREAM_AUTH='Bearer ...' mrtr proxy https://mcp.example.com/mcp \\\n"
            "      --upstream-header Authorization=UPSTREAM_AUTH  # the proxy's own credentials\n"
            "\n"
            "Set MRTR_SECRET (Base64 of 32 random bytes) so requestState tokens survive restarts and\n"
            "work across workers."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    proxy.add_argument("target", nargs="+", metavar="URL | -- COMMAND ARGS",
                       help="the upstream: an http(s):// URL, or, after --, a command and its arguments")
    proxy.add_argument("--name", default="mrtr-proxy", help="the proxy's server name (default: mrtr-proxy)")
    proxy.add_argument("--upstream-era", default="auto", choices=["auto", "modern", "legacy"],
                       help="the era spoken to the upstream: auto probes it (default: auto)")
    proxy.add_argument("--upstream-header", action="append", default=[], metavar="NAME=VARIABLE",
                       dest="upstream_headers",
                       help="send header NAME upstream with the value of environment variable VARIABLE "
                            "(repeat for several); the downstream caller's token is never passed on")
    proxy.add_argument("--upstream-timeout", type=seconds, default=300.0, metavar="SECONDS",
                       help="how long one read from the upstream may wait (default: 300)")
    proxy.add_argument("--connect-timeout", type=seconds, default=10.0, metavar="SECONDS",
                       help="how long start, and a request during a reconnect, wait for the upstream (default: 10)")
    proxy.add_argument("--held-answer-timeout", type=seconds, default=None, metavar="SECONDS",
                       help="how long a 2025 upstream's call waits for a 2026-07-28 client's answer to one question "
                            "(default: the requestState TTL)")
    add_serving_options(proxy)
    proxy.set_defaults(run=_proxy)


def _headers(specs: list[str]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for spec in specs:
        name, sep, variable = spec.partition("=")
        if not sep or not name.strip() or not variable.strip():
            raise UsageError(f"--upstream-header takes NAME=VARIABLE (an environment variable), got {spec!r}")
        value = os.environ.get(variable.strip())
        if value is None:
            raise UsageError(f"--upstream-header {name.strip()}: the environment variable {variable.strip()} is not set")
        headers[name.strip()] = value
    return headers


def _proxy(args: argparse.Namespace) -> int:
    check_serving_options(args)
    words: list[str] = list(args.target)
    if len(words) == 1 and words[0].startswith(("http://", "https://")):
        target: str | list[str] = words[0]
        shown = words[0]
    elif words[0].startswith(("http://", "https://")):
        raise UsageError(f"mrtr proxy takes one URL, or a command after --; got {' '.join(words)!r}")
    else:
        target = words
        shown = " ".join(words)
    headers = _headers(args.upstream_headers)
    if headers and not isinstance(target, str):
        raise UsageError("--upstream-header is for an HTTP upstream; a stdio upstream takes its credentials from "
                         "its environment")
    configure_logging(args.log_level, args.log_format, args.access_log)
    from ..bridge import proxy

    server = proxy(target, name=args.name, upstream_era=args.upstream_era, upstream_headers=headers or None,
                   upstream_timeout=args.upstream_timeout, connect_timeout=args.connect_timeout,
                   held_answer_timeout=args.held_answer_timeout, eras=args.era)
    text = f"mrtr: proxying {shown} (upstream era: {args.upstream_era}); its catalogue is read when serving starts"
    try:
        return serve_server(server, args, text)
    except Exception as exc:
        from ..bridge.upstream import UpstreamUnavailable

        cause: BaseException = exc
        while isinstance(cause, BaseExceptionGroup) and len(cause.exceptions) == 1:
            cause = cause.exceptions[0]
        if isinstance(cause, UpstreamUnavailable):
            print(f"mrtr proxy: {cause.message}", file=sys.stderr)
            return 1
        raise
