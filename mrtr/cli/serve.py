"""``mrtr serve``: serve a :class:`~mrtr.server.Server` over Streamable HTTP or stdio."""

from __future__ import annotations

import argparse
import contextlib
import logging
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import msgspec

from ..core import wire
from ..core.jsonrpc import Broadcast, Dispatcher, Notify, Response, RunSync, SessionDispatcher, request
from ..core.mirroring import InvalidHeaderSchema, mirrored_parameters
from ..core.wire import PROTOCOL_VERSION
from .app import DEFAULT_APP, load_server
from .arguments import UsageError, lease, port, positive_int, seconds, store_url, ttl
from .commands import COMMANDS

if TYPE_CHECKING:
    from ..server.dispatch import Server

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "ENDPOINT", "add_serve_command", "add_serving_options", "add_store_option",
           "banner", "check_serving_options", "configure_logging", "curl_example", "example_arguments", "inventory",
           "serve_server"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
ENDPOINT = "/mcp"

log = logging.getLogger("mrtr.cli")


def _url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{shown}:{port}{ENDPOINT}"


def _example_value(name: str, schema: Any) -> Any:
    if not isinstance(schema, dict):
        return "example"
    if "default" in schema:
        return schema["default"]
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for union in ("anyOf", "oneOf"):
        options = schema.get(union)
        if isinstance(options, list):
            concrete = [option for option in options if isinstance(option, dict) and option.get("type") != "null"]
            if concrete:
                return _example_value(name, concrete[0])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((item for item in kind if item != "null"), None)
    if kind == "integer":
        return schema.get("minimum", 1)
    if kind == "number":
        return schema.get("minimum", 1.5)
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        return {}
    if schema.get("format") == "email":
        return "user@example.com"
    if schema.get("format") == "uri":
        return "https://example.com"
    return "example"


def example_arguments(input_schema: Any) -> dict[str, Any]:
    """Placeholder values for the required properties of a tool's ``inputSchema``."""
    if not isinstance(input_schema, dict):
        return {}
    properties = input_schema.get("properties") or {}
    required = input_schema.get("required") or []
    return {name: _example_value(name, properties.get(name)) for name in required if isinstance(name, str)}


def curl_example(server: Any, url: str) -> str:
    """A ready-to-paste ``curl`` command calling the server's first tool (or ``server/discover``).

    Its MCP headers are the ones :class:`mrtr.Client` would send for the same body,
    Base64 form included where a value needs it.
    """
    from ..client.headers import request_headers  # loaded here, so serving loads no client

    meta = {
        wire.META_PROTOCOL_VERSION: PROTOCOL_VERSION,
        wire.META_CLIENT_CAPABILITIES: {"elicitation": {}},
    }
    tools = server.tool_definitions()
    parameters = None
    if tools:
        definition = tools[0]
        arguments = example_arguments(definition.get("inputSchema"))
        body = request(1, "tools/call", {"name": definition["name"], "arguments": arguments, "_meta": meta})
        try:
            parameters = mirrored_parameters(definition)
        except InvalidHeaderSchema:
            pass  # a client leaves such a tool out; the example still shows the call
    else:
        body = request(1, "server/discover", {"_meta": meta})
    headers = [
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
        *(f"{name}: {value}" for name, value in request_headers(body, parameters).items()),
    ]
    lines = [f"  curl -sS -X POST {shlex.quote(url)}"]
    lines += [f"    -H {shlex.quote(header)}" for header in headers]
    lines.append(f"    -d {shlex.quote(msgspec.json.encode(body).decode())}")
    return " \\\n".join(lines)


def banner(server: Any, host: str, port: int, workers: int) -> str:
    """What ``mrtr serve`` prints to stderr when it starts serving HTTP.

    With ``port`` 0 the system picks the port only when the socket is bound, after the
    banner: the URL then shows ``PORT``, and the ``serving MCP on`` log line names it.
    """
    url = _url(host, port) if port else _url(host, 0).replace(":0/", ":PORT/", 1)
    name = getattr(server, "name", "server")
    version = getattr(server, "version", "")
    plural = "s" if workers != 1 else ""
    tools = [tool["name"] for tool in server.tool_definitions()]
    what = f'tool "{tools[0]}"' if tools else "server/discover"
    return "\n".join([
        f"mrtr: serving {name} {version} at {url} ({workers} worker{plural}); press Ctrl+C to stop",
        *(["The system picks PORT: the \"serving MCP on\" line below names it."] if not port else []),
        f"Try it ({what}):",
        curl_example(server, url),
        (
            'If the answer has "resultType":"input_required", send the same call again with a new "id", '
            'adding to "params" the "requestState" copied verbatim from the result and "inputResponses" '
            'with one answer per key of "inputRequests", e.g. '
            '"inputResponses":{"elicit-1":{"action":"accept","content":{...}}}; '
            'repeat until "resultType" is "complete".'
        ),
    ])


def inventory(server: Any, store: str | None = None, *, http: bool = False) -> str:
    """What ``mrtr serve`` lists at start: the registered tools, prompts and resources, and the task store.

    ``store`` is the store URL the command line chose (``--store``), if any; the line about
    the store appears only for a server with task tools, which is what opens it. Served over
    HTTP (``http``) with the 2025 era, a line says where its calls live: recorded in a shared
    store (they survive this process), or in this process only.
    """

    def names(kind: str, items: list[dict[str, Any]], member: str) -> str:
        shown = ", ".join(str(item.get(member) or item.get("uriTemplate") or item.get("name")) for item in items)
        return f"  {kind} ({len(items)}): {shown or '-'}"

    lines = [
        "mrtr: registered",
        names("tools", server.tool_definitions(), "name"),
        names("prompts", server.prompt_definitions(), "name"),
        names("resources", server.resource_definitions(), "uri"),
    ]
    if getattr(server, "has_task_tools", False):
        lines.append(f"  task store: {_store_shown(server, store)}")
    if http and getattr(server, "legacy", None) is not None:
        lines.append(f"  2025 calls: {_calls_shown(server, store)}")
    return "\n".join(lines)


def _calls_shown(server: Any, store: str | None) -> str:
    """Where a server's 2025-era calls live, as the banner says it."""
    from ..carriers.tasks.redis_url import is_redis_url
    from ..carriers.tasks.store import masked
    from ..carriers.tasks.urls import chosen_url

    url = chosen_url(store or server.store_url)
    if url is not None and (url.startswith("sqlite://") or is_redis_url(url)):
        return f"recorded in {masked(url)} (another process adopts a call whose own stops)"
    return "in this process only (--store sqlite:///... or redis://... lets them survive it)"


def _store_shown(server: Any, store: str | None) -> str:
    """The task store a server with task tools opens, as the banner names it (a password masked)."""
    from ..carriers.tasks.store import masked
    from ..carriers.tasks.urls import chosen_url, default_path

    url = chosen_url(store or server.store_url)
    if url is not None:
        return masked(url)
    return f"{default_path(server.name)} (the default for this server; --store or MRTR_STORE chooses another)"


def add_serve_command(commands: Any) -> None:
    """Add ``mrtr serve`` and its options to the command parser's subcommands."""
    serve = commands.add_parser(
        "serve",
        help=COMMANDS["serve"].summary,
        description=(
            "Serve an mrtr Server over Streamable HTTP (the MCP endpoint is /mcp) or, with\n"
            "--stdio, over newline-delimited JSON-RPC on stdin/stdout. Logs go to stderr."
        ),
        epilog=(
            "examples:\n"
            "  mrtr serve                                  # the bundled example server on http://127.0.0.1:8000/mcp\n"
            "  mrtr serve myapp.main:server --port 9000\n"
            "  mrtr serve myapp.main:server --host 0.0.0.0 --workers 4\n"
            "  mrtr serve myapp.main:server --stdio        # for clients that spawn the server\n"
            "  mrtr serve myapp.main:server --era modern   # MCP 2026-07-28 only, no 2025 sessions\n"
            "\n"
            "  MRTR_STORE=redis://redis.internal:6379/0 mrtr serve myapp.main:server --host 0.0.0.0\n"
            "                                              # one node of several sharing one Redis\n"
            "\n"
            "Set MRTR_SECRET (Base64 of 32 random bytes) so requestState tokens survive restarts and\n"
            "work across workers; without it an ephemeral key is generated. A Redis password goes in\n"
            "MRTR_REDIS_PASSWORD (or in the URL in MRTR_STORE), never on the command line."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve.add_argument(
        "app", nargs="?", default=None, metavar="MODULE:ATTRIBUTE",
        help=f"the Server to serve, e.g. myapp.main:server (default: the bundled example, {DEFAULT_APP})",
    )
    add_serving_options(serve)
    serve.add_argument(
        "--reload", action="store_true",
        help="development: restart the server when a .py file under the current directory changes "
             "(needs the dev extra: pip install 'mrtr[dev]')",
    )
    serve.set_defaults(run=_serve)


def add_serving_options(command: Any) -> None:
    """The options of serving a server (HTTP or ``--stdio``, eras, store, logs), on ``command``.

    ``mrtr serve`` and ``mrtr proxy`` take the same ones; :func:`serve_server` reads them.
    """
    command.add_argument("--host", default=None, help=f"address to bind for HTTP (default: {DEFAULT_HOST})")
    command.add_argument(
        "--port", type=port, default=None,
        help=f"port to bind for HTTP; 0 lets the system pick a free one, named in the log (default: {DEFAULT_PORT})",
    )
    command.add_argument(
        "--workers", type=positive_int, default=None, metavar="N",
        help="HTTP worker processes sharing the port (default: 1)",
    )
    command.add_argument(
        "--allowed-host", action="append", default=None, metavar="HOST[:PORT]", dest="allowed_hosts",
        help="a Host the server answers (repeat for several; '*' for any); by default a loopback bind answers "
             "only localhost, 127.0.0.1 and [::1] at its port. Set it behind a reverse proxy to the public name",
    )
    command.add_argument(
        "--sse-poll-after", type=seconds, default=None, metavar="SECONDS",
        help="close a 2025-11-25 session's SSE connection after SECONDS with a retry: field, the stream going on "
             "(the client resumes it with Last-Event-ID); for proxies that cut long responses (default: never)",
    )
    command.add_argument(
        "--stdio", action="store_true",
        help="serve on stdin/stdout instead of HTTP (stdout then carries protocol messages only)",
    )
    command.add_argument(
        "--era", default="both", choices=["both", "modern"],
        help="protocol eras served: both (2026-07-28, and 2025-era clients in sessions opened by initialize), "
             "or modern (2026-07-28 only; initialize is refused naming the versions served) (default: both)",
    )
    add_store_option(command, "the store for what is not stateless: task records, the rounds of once=True "
                            "handlers and, on Redis, the notifications every node hears")
    command.add_argument(
        "--task-lease", type=lease, default=None, metavar="SECONDS",
        help="how long a task runner's lease lasts without renewal (default: MRTR_TASK_LEASE or 30)",
    )
    command.add_argument(
        "--task-ttl", type=ttl, default=None, metavar="SECONDS",
        help="how long a task is kept after its last activity (a running task is kept while it runs); "
             "none: until deleted (default: MRTR_TASK_TTL or 3600)",
    )
    command.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error"],
        help="log level for messages on stderr (default: info)",
    )
    command.add_argument(
        "--log-format", default="text", choices=["text", "json"],
        help="text lines, or one JSON object per line for log shippers (default: text)",
    )
    command.add_argument(
        "--no-access-log", dest="access_log", action="store_false",
        help="no line per request on the mrtr.access logger (each costs tens of microseconds)",
    )


def add_store_option(command: Any, what: str) -> None:
    """``--store URL`` (and its older name ``--tasks``) on ``command``, read into ``args.store``."""
    command.add_argument(
        "--store", "--tasks", dest="store", default=None, metavar="URL", type=store_url,
        help=f"{what}: memory:, sqlite:///path, redis://host:port/db, rediss://..., redis+cluster://host:port,..., "
             "redis+sentinel://host:port,.../service (default: MRTR_STORE, MRTR_TASKS, else the server's own "
             "SQLite file, $XDG_STATE_HOME/mrtr/stores/NAME.sqlite3); --tasks is its older name",
    )


def configure_logging(level: str, fmt: str = "text", access_log: bool = True) -> None:
    """Log to stderr at ``level``, as text or JSON lines, with or without the access lines."""
    from ..transports.logs import ACCESS_LOGGER, configure

    configure(level, fmt)
    if not access_log:
        ACCESS_LOGGER.setLevel(logging.WARNING)


# -- the commands ------------------------------------------------------------------------------


def _announce(server: Any, log_format: str, text: str | None = None, store: str | None = None, *,
              http: bool = False) -> None:
    """Say what is served: plain lines on stderr, or one JSON record each with ``--log-format json``.

    ``store`` is the ``--store`` of the command line, if given (see :func:`inventory`).
    """
    if log_format == "json":
        fields: dict[str, Any] = {
            "tools": [item["name"] for item in server.tool_definitions()],
            "prompts": [item["name"] for item in server.prompt_definitions()],
            "resources": [item.get("uri") or item.get("uriTemplate") for item in server.resource_definitions()],
        }
        counts = [len(items) for items in fields.values()]
        if getattr(server, "has_task_tools", False):
            fields["taskStore"] = _store_shown(server, store)
        if http and getattr(server, "legacy", None) is not None:
            fields["calls2025"] = _calls_shown(server, store)
        log.info("registered %d tools, %d prompts, %d resources", *counts, extra={"mrtr": fields})
        if text is not None:
            log.info("%s", text.splitlines()[0])
        return
    print(inventory(server, store, http=http), file=sys.stderr, flush=True)
    if text is not None:
        print(text, file=sys.stderr, flush=True)


def _without_reload(argv: list[str]) -> list[str]:
    return [arg for arg in argv if arg != "--reload"]


def _serve(args: argparse.Namespace) -> int:
    argv: list[str] | None = getattr(args, "argv", None)  # the command line, for --reload to restart with
    check_serving_options(args)
    if args.reload:
        if args.stdio:
            raise UsageError("--reload cannot be combined with --stdio (a restart would cut the client's session)")
        if (args.workers or 1) > 1:
            raise UsageError("--reload serves one worker; drop --workers")
        from .reload import run_with_reload

        return run_with_reload(_without_reload(sys.argv[1:] if argv is None else argv))
    configure_logging(args.log_level, args.log_format, args.access_log)
    if args.stdio:
        # Keep anything the application prints while importing off the protocol stream.
        with contextlib.redirect_stdout(sys.stderr):
            server = load_server(args.app or DEFAULT_APP)
    else:
        server = load_server(args.app or DEFAULT_APP)
    return serve_server(server, args)


def check_serving_options(args: argparse.Namespace) -> None:
    """Refuse HTTP options given with ``--stdio`` (a :class:`UsageError` naming them)."""
    if args.stdio:
        given = [flag for flag, value in (("--host", args.host), ("--port", args.port), ("--workers", args.workers),
                                          ("--allowed-host", args.allowed_hosts),
                                          ("--sse-poll-after", args.sse_poll_after)) if value is not None]
        if given:
            raise UsageError(f"--stdio cannot be combined with {', '.join(given)} (those are HTTP options)")


def serve_server(server: Server, args: argparse.Namespace, text: str | None = None) -> int:
    """Serve ``server`` as the options of :func:`add_serving_options` say; the command's exit code.

    Logging is configured already. ``text`` replaces the banner's first lines (what is served).
    """
    if args.stdio:
        from ..transports.stdio import run_stdio

        _announce(server, args.log_format, text, store=args.store)
        run_stdio(_with_settings(server, args))
        return 0
    served = _with_settings(server, args)
    host = args.host or DEFAULT_HOST
    port = DEFAULT_PORT if args.port is None else args.port
    workers = args.workers or 1
    try:
        from ..transports.http import run_http as run
    except ImportError as exc:
        print(f"mrtr: the HTTP transport is not available: {exc}", file=sys.stderr)
        return 1
    if workers == 1:  # with more, run() shares one generated key among the workers and says so
        server.settle_key()
    elif not server.has_task_tools and _chosen_store(args.store or server.store_url) is None:
        if server.has_once_handlers:
            print("mrtr serve: warning: the rounds of handlers declared once=True are recorded in memory, one record "
                  "per worker: a retry that reaches another worker runs the round again; give --store "
                  "sqlite:///rounds.sqlite3 (one host) or --store redis://... (several)", file=sys.stderr, flush=True)
        if server.catalog.stored_middleware:
            print(f"mrtr serve: warning: a RateLimit counts in memory, one bucket per worker: {workers} workers "
                  f"admit up to {workers} times its rate; give --store sqlite:///mrtr.sqlite3 (one host) or "
                  "--store redis://... (several)", file=sys.stderr, flush=True)
    shown = banner(server, host, port, workers)
    _announce(server, args.log_format, shown if text is None else f"{text}\n{shown}", store=args.store, http=True)
    try:
        options: dict[str, Any] = {} if args.allowed_hosts is None else {"allowed_hosts": tuple(args.allowed_hosts)}
        if args.sse_poll_after is not None:
            options["sse_poll_after"] = args.sse_poll_after
        run(served, host, port, workers=workers, **options)
    except KeyboardInterrupt:  # a Ctrl+C before the server installed its signal handlers
        pass
    except ValueError as exc:  # an option the HTTP server refuses, e.g. a malformed --allowed-host
        raise UsageError(str(exc)) from None
    except OSError as exc:  # typically: the address is in use or cannot be bound
        print(f"mrtr serve: cannot serve on {_url(host, port)}: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:
        from ..carriers.tasks import StoreUnavailable

        cause: BaseException = exc
        while isinstance(cause, BaseExceptionGroup) and len(cause.exceptions) == 1:
            cause = cause.exceptions[0]  # trio reports it from inside the serving nursery
        if isinstance(cause, StoreUnavailable):
            print(f"mrtr serve: {cause}", file=sys.stderr)
            return 1
        raise
    return 0


def _chosen_store(url: str | None) -> str | None:
    from ..carriers.tasks.urls import chosen_url  # loaded here: mrtr call needs no carrier

    return chosen_url(url)


def _with_settings(server: Server, args: argparse.Namespace) -> Dispatcher:
    """The loaded server, or the server with the command line's task and era settings when any is given."""
    era = getattr(args, "era", "both")
    if args.store is None and args.task_lease is None and args.task_ttl is None and era == "both":
        return server
    return _WithSettings(server, args.store, args.task_lease, args.task_ttl, legacy=era == "both")


class _WithSettings:
    """The loaded server as the transports run it, with the task and era settings of the command line.

    ``--store``, ``--task-lease`` and ``--task-ttl`` are arguments of
    ``Server.running()``, which the transports enter (in each worker, after the fork);
    ``--era modern`` leaves out the server's legacy era, so the transports serve the
    modern era alone; every other part of the dispatcher protocol is the server's own.
    """

    def __init__(self, server: Server, store_url: str | None, task_lease: float | None,
                 task_ttl: float | None, *, legacy: bool = True) -> None:
        self.server = server
        self.store_url = store_url
        self.task_lease = task_lease
        self.task_ttl = task_ttl
        self._legacy = legacy

    @property
    def legacy(self) -> SessionDispatcher | None:
        """The server's legacy era, or ``None`` under ``--era modern``."""
        return self.server.legacy if self._legacy else None

    def running(self) -> AbstractAsyncContextManager[Any]:
        """The server's ``running()`` with the command line's store, task lease and TTL."""
        return self.server.running(store_url=self.store_url, task_lease=self.task_lease, task_ttl=self.task_ttl)

    def serves(self, method: str) -> bool:
        """The server's."""
        return self.server.serves(method)

    def header_parameters(self, tool_name: str) -> Mapping[str, str]:
        """The server's."""
        return self.server.header_parameters(tool_name)

    @property
    def auth(self) -> Any:
        """The server's."""
        return self.server.auth

    async def required_scopes(self, message: Mapping[str, Any], *, headers: Mapping[str, str] | None = None,
                              auth: Any = None) -> Sequence[str]:
        """The server's."""
        return await self.server.required_scopes(message, headers=headers, auth=auth)

    async def handle(self, message: Mapping[str, Any], *, headers: Mapping[str, str] | None = None,
                     notify: Notify | None = None, run_sync: RunSync | None = None, auth: Any = None,
                     client: str | None = None) -> dict[str, Any]:
        """The server's."""
        return await self.server.handle(message, headers=headers, notify=notify, run_sync=run_sync, auth=auth,
                                        client=client)

    async def respond(self, message: Mapping[str, Any], *, headers: Mapping[str, str] | None = None,
                      notify: Notify | None = None, run_sync: RunSync | None = None, auth: Any = None,
                      client: str | None = None) -> Response:
        """The server's."""
        return await self.server.respond(message, headers=headers, notify=notify, run_sync=run_sync, auth=auth,
                                         client=client)

    def settle_key(self, *, alone: bool = False) -> None:
        """The server's."""
        self.server.settle_key(alone=alone)

    def holder_of(self, message: Mapping[str, Any]) -> str | None:
        """The server's."""
        return self.server.holder_of(message)

    def listen_through(self, hub: Broadcast) -> Callable[[], None]:
        """The server's."""
        return self.server.listen_through(hub)
