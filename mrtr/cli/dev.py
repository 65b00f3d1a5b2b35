"""``mrtr dev MODULE:ATTRIBUTE``: an author's loop, the server reloading and the MCP Inspector connected to it.

It runs ``mrtr serve MODULE:ATTRIBUTE --reload`` (restarted on every ``.py`` change,
errors shown to clients in full: :mod:`~mrtr.cli.reload`) and, once the server answers,
the MCP Inspector's web interface (the npm package :data:`INSPECTOR_PACKAGE`, a pinned
version, through ``npx``). The Inspector is opened on a link that connects it to the
server by itself: its ``serverUrl`` and ``autoConnect`` parameters, the latter the
Inspector's API token, which ``mrtr dev`` makes for the session. When Node's ``npx`` is
missing the server runs alone and the one command that starts the Inspector is printed.
``--inspector COMMAND`` starts another copy of the Inspector (a global install, or a
pinned one in a cache) instead of ``npx``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import urllib.parse
from typing import Any

import trio

from .arguments import UsageError, port
from .commands import COMMANDS
from .serve import DEFAULT_HOST, DEFAULT_PORT, ENDPOINT

__all__ = ["INSPECTOR_NODE", "INSPECTOR_PACKAGE", "INSPECTOR_PORT", "add_dev_command", "inspector_link",
           "missing_node_advice"]

INSPECTOR_PACKAGE = "@modelcontextprotocol/inspector@2.12.0"
"""The MCP Inspector ``mrtr dev`` starts, pinned (the suite drives this version)."""

INSPECTOR_NODE = (22, 19)
"""The Node.js version the Inspector's package asks for (its ``engines``: ``>=22.19.0``)."""

INSPECTOR_PORT = 6274
"""The Inspector's own default port for its web interface (``CLIENT_PORT``)."""

_STARTUP = 30.0  # seconds the server gets to answer before the Inspector starts anyway


def add_dev_command(commands: Any) -> None:
    """Add ``mrtr dev`` and its options to the command parser's subcommands."""
    dev = commands.add_parser(
        "dev",
        help=COMMANDS["dev"].summary,
        description=(
            "Serve MODULE:ATTRIBUTE on loopback, restarting on every .py change under the current directory\n"
            "with errors shown to clients in full (MRTR_DEBUG=1), and start the MCP Inspector's web\n"
            f"interface ({INSPECTOR_PACKAGE}, through npx) connected to it. Without Node's npx, the\n"
            "server runs alone and the command that starts the Inspector is printed."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    dev.add_argument("app", metavar="MODULE:ATTRIBUTE", help="the Server to serve, e.g. myapp.main:server")
    dev.add_argument("--host", default=DEFAULT_HOST, help=f"address to bind (default: {DEFAULT_HOST})")
    dev.add_argument("--port", type=port, default=DEFAULT_PORT, help=f"the server's port (default: {DEFAULT_PORT})")
    dev.add_argument("--inspector-port", type=port, default=INSPECTOR_PORT,
                     help=f"the Inspector's web interface port (default: {INSPECTOR_PORT})")
    dev.add_argument("--inspector", default=None, metavar="COMMAND",
                     help=f"the command that starts the Inspector (default: npx -y {INSPECTOR_PACKAGE})")
    dev.add_argument("--no-inspector", dest="inspector_wanted", action="store_false",
                     help="serve with reload alone")
    dev.add_argument("--no-browser", dest="browser", action="store_false",
                     help="print the Inspector's address instead of opening it in a browser")
    dev.set_defaults(run=_dev)


def _url(host: str, number: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{number}{ENDPOINT}"


def inspector_link(inspector_port: int, server_url: str, token: str) -> str:
    """The Inspector's address that connects it to ``server_url`` on opening (its deep link)."""
    query = urllib.parse.urlencode({"MCP_INSPECTOR_API_TOKEN": token, "serverUrl": server_url,
                                    "transport": "http", "autoConnect": token})
    return f"http://127.0.0.1:{inspector_port}/?{query}"


def missing_node_advice(server_url: str) -> str:
    """What ``mrtr dev`` says when Node's ``npx`` is not found: the one command that starts the Inspector."""
    need = ".".join(map(str, INSPECTOR_NODE))
    return (f"mrtr dev: the MCP Inspector needs Node.js >= {need} with npx, which was not found; "
            f"with it installed, this starts the Inspector with the server in its list:\n"
            f"  npx -y {INSPECTOR_PACKAGE} --web --transport http --server-url {server_url}")


def _node_version(npx: str) -> tuple[int, ...] | None:
    node = shutil.which("node", path=os.path.dirname(npx) + os.pathsep + os.environ.get("PATH", ""))
    if node is None:
        return None
    try:
        said = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.match(r"v(\d+)\.(\d+)", said.strip())
    return (int(found.group(1)), int(found.group(2))) if found else None


def _dev(args: argparse.Namespace) -> int:
    module, separator, attribute = args.app.partition(":")
    if not separator or not module or not attribute:
        raise UsageError(f'application "{args.app}" must be given as "<module>:<attribute>", e.g. "myapp.main:server"')
    if args.inspector_port == 0:
        raise UsageError("--inspector-port needs a fixed port: the Inspector derives its allowed origins from it")
    server_url = _url(args.host, args.port)
    serve = [sys.executable, "-m", "mrtr", "serve", args.app, "--host", args.host, "--port", str(args.port),
             "--reload"]
    inspector: list[str] | None = None
    if args.inspector_wanted:
        if args.inspector is not None:
            inspector = shlex.split(args.inspector)
        else:
            npx = shutil.which("npx")
            if npx is None:
                print(missing_node_advice(server_url), file=sys.stderr, flush=True)
            else:
                version = _node_version(npx)
                if version is not None and version < INSPECTOR_NODE:
                    print(f"mrtr dev: warning: the MCP Inspector asks for Node.js >= "
                          f"{'.'.join(map(str, INSPECTOR_NODE))}; this is {'.'.join(map(str, version))}",
                          file=sys.stderr, flush=True)
                inspector = [npx, "-y", INSPECTOR_PACKAGE]
    return trio.run(_run, args, serve, inspector, server_url)


async def _answering(host: str, number: int) -> bool:
    try:
        with trio.move_on_after(1):
            stream = await trio.open_tcp_stream(host, number)
            await stream.aclose()
            return True
    except OSError:
        pass
    return False


async def _run(args: argparse.Namespace, serve: list[str], inspector: list[str] | None, server_url: str) -> int:
    token = secrets.token_urlsafe(24)
    async with trio.open_nursery() as nursery:
        server = await trio.lowlevel.open_process(serve, stdin=subprocess.DEVNULL)
        children: list[Any] = [server]
        done = trio.Event()

        async def reap(process: Any) -> None:
            await process.wait()
            done.set()

        async def on_signal() -> None:
            with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for _ in signals:
                    done.set()
                    return

        nursery.start_soon(reap, server)
        nursery.start_soon(on_signal)
        with trio.move_on_after(_STARTUP):
            while not await _answering(args.host, args.port) and not done.is_set():
                await trio.sleep(0.1)
        lines = [f"mrtr dev: serving {args.app} at {server_url}, restarting on every change, errors shown in full"]
        if inspector is not None and not done.is_set():
            link = inspector_link(args.inspector_port, server_url, token)
            env = {**os.environ, "HOST": "127.0.0.1", "CLIENT_PORT": str(args.inspector_port),
                   "MCP_INSPECTOR_API_TOKEN": token, "MCP_AUTO_OPEN_ENABLED": "false"}
            env.pop("DANGEROUSLY_OMIT_AUTH", None)  # the link's autoConnect is the token: the Inspector needs it
            try:
                # A group of its own: npx runs the Inspector under npm, which does not pass a SIGTERM on,
                # so stopping it means signalling the whole group (and a Ctrl+C reaches it through us).
                process = await trio.lowlevel.open_process([*inspector, "--web"], env=env, stdin=subprocess.DEVNULL,
                                                           stdout=sys.stderr.fileno(), start_new_session=True)
            except OSError as exc:
                print(f"mrtr dev: could not start the MCP Inspector ({shlex.join(inspector)}): {exc}",
                      file=sys.stderr)
            else:
                children.append(process)
                nursery.start_soon(reap, process)
                lines.append(f"mrtr dev: the MCP Inspector, connected to it: {link}")
                if args.browser:
                    nursery.start_soon(_open_when_up, link, args.inspector_port)
        print("\n".join(lines), file=sys.stderr, flush=True)
        await done.wait()
        ended = [child for child in children if child.returncode is not None]
        for child in reversed(children):
            await _stop(child, group=child is not server)
        nursery.cancel_scope.cancel()
    for child in ended:  # a child that stopped on its own stops the loop, saying so
        what = "the server" if child is server else "the MCP Inspector"
        print(f"mrtr dev: {what} exited with code {child.returncode}; stopping", file=sys.stderr)
        return 1
    return 0


async def _open_when_up(link: str, inspector_port: int) -> None:
    with trio.move_on_after(_STARTUP):
        while not await _answering("127.0.0.1", inspector_port):
            await trio.sleep(0.2)
        import webbrowser

        await trio.to_thread.run_sync(webbrowser.open, link)


async def _stop(process: Any, *, group: bool = False) -> None:
    """SIGTERM, then SIGKILL after a grace period; with ``group``, to every process of its group."""

    def send(signum: int) -> None:
        if group:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signum)
        elif process.returncode is None:
            process.send_signal(signum)

    if process.returncode is not None and not group:
        return
    send(signal.SIGTERM)
    with trio.move_on_after(10):
        await process.wait()
        if not group:
            return
        while _group_alive(process.pid):  # the leader is gone; its children may still be stopping
            await trio.sleep(0.05)
        return
    send(signal.SIGKILL)
    await process.wait()


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

