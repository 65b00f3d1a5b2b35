"""``mrtr install HOST MODULE:ATTRIBUTE`` and ``mrtr uninstall HOST NAME``: a server into the user's host.

The entry runs this environment's own ``mrtr`` by its absolute path (``mrtr serve
MODULE:ATTRIBUTE --stdio``), with ``PYTHONPATH`` (and, for hosts that take one, a working
directory) that make the module importable, so a desktop application that does not
inherit the shell's ``PATH`` still starts it. ``--url`` registers a remote Streamable HTTP
server instead. Before anything is written the entry is started once and asked
``initialize`` (``--no-check`` skips this). The host's file is changed by
:mod:`~mrtr.cli.jsonc` or :mod:`~mrtr.cli.goose_yaml` (one entry; every other byte kept)
and written by :mod:`~mrtr.cli.config_files` (atomic, with a backup); the hosts and
their files are in :mod:`~mrtr.cli.hosts`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from importlib.machinery import PathFinder
from pathlib import Path
from typing import Any

from .._version import __version__
from ..core.eras import LATEST_LEGACY_VERSION
from ..core.jsonrpc import request
from ..core.wire import META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, META_SERVER_INFO, PROTOCOL_VERSION
from .arguments import UsageError
from .commands import COMMANDS
from .config_files import ConfigFileError, read_text, replace_file
from .goose_yaml import GooseConfigRefused, extension_names, remove_extension, set_extension
from .hosts import HOSTS, Host, HostPathError, Remote, Stdio
from .jsonc import JSONSyntaxError, parse, remove_member, set_member, to_python

__all__ = ["InstallError", "add_install_commands", "check_server", "mrtr_command", "read_env_file"]

HIDDEN = "<hidden>"
"""What ``--dry-run`` shows in place of a value given with ``--env``, ``--env-file`` or ``--header``."""

CHECK_TIMEOUT = 30.0
"""Seconds the configured server gets to answer ``initialize`` before ``mrtr install`` gives up."""

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\- ]{0,63}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class InstallError(Exception):
    """What stops ``mrtr install`` or ``mrtr uninstall`` after the command line was understood (exit code 1)."""


def add_install_commands(commands: Any) -> None:
    """Add ``mrtr install`` and ``mrtr uninstall`` to the command parser's subcommands."""
    hosts = ", ".join(HOSTS)
    install = commands.add_parser(
        "install",
        help=COMMANDS["install"].summary,
        description=(
            "Add a server to an MCP host's configuration file: this environment's mrtr, by its absolute\n"
            "path, serving MODULE:ATTRIBUTE over stdio; or, with --url, a remote Streamable HTTP server.\n"
            "The file is parsed and only that entry changes (comments kept where the host allows them);\n"
            "the write is atomic and the previous file is kept as FILE.bak. The entry is started once\n"
            "and asked initialize before anything is written, unless --no-check.\n"
            f"Hosts: {hosts}."
        ),
        epilog=(
            "examples:\n"
            "  mrtr install claude-desktop myapp.main:server\n"
            "  mrtr install vscode myapp.main:server --scope project --env API_KEY=...\n"
            "  mrtr install cursor --url https://mcp.example.com/mcp --name example --header 'Authorization=Bearer ...'\n"
            "  mrtr install json myapp.main:server          # print the mcpServers entry\n"
            "  mrtr install zed myapp.main:server --dry-run # show what would be written"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    install.add_argument("host", choices=list(HOSTS), metavar="HOST", help=f"one of: {hosts}")
    install.add_argument("app", nargs="?", default=None, metavar="MODULE:ATTRIBUTE",
                         help="the Server to run, e.g. myapp.main:server (importable from the current directory "
                              "or this environment)")
    install.add_argument("--name", default=None, help="the entry's name in the host (default: the module's "
                                                      "top-level package, or the URL's host)")
    install.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                         help="an environment variable for the server (repeat for several; never printed)")
    install.add_argument("--env-file", default=None, metavar="FILE",
                         help="environment variables from a .env file (KEY=VALUE lines); --env wins over it")
    install.add_argument("--url", default=None, help="register a remote Streamable HTTP server at URL instead")
    install.add_argument("--header", action="append", default=[], metavar="KEY=VALUE",
                         help="an HTTP header the host sends to --url (repeat for several; never printed)")
    _add_location_options(install)
    install.add_argument("--dry-run", action="store_true",
                         help="print the file and the entry that would be written (secrets hidden); change nothing")
    install.add_argument("--no-check", dest="check", action="store_false",
                         help="write without starting the server and asking it initialize first")
    install.set_defaults(run=_install)

    uninstall = commands.add_parser(
        "uninstall", help=COMMANDS["uninstall"].summary,
        description="Remove the entry NAME from an MCP host's configuration file (atomic; the previous "
                    "file kept as FILE.bak).",
    )
    uninstall.add_argument("host", choices=list(HOSTS), metavar="HOST", help=f"one of: {hosts}")
    uninstall.add_argument("name", metavar="NAME", help="the entry's name")
    _add_location_options(uninstall)
    uninstall.set_defaults(run=_uninstall)


def _add_location_options(command: Any) -> None:
    command.add_argument("--config", default=None, metavar="PATH",
                         help="the configuration file to change (default: the host's own for --scope on this system)")
    command.add_argument("--scope", default=None, choices=["user", "project"],
                         help="user: the host's file for all your projects; project: the one in the current "
                              "directory (default: user; the hosts without one of them say so)")


# -- what the entry runs -----------------------------------------------------------------------------


def mrtr_command() -> tuple[str, list[str]]:
    """This environment's ``mrtr`` by absolute path, or its Python with ``-m mrtr`` when it has no script.

    The interpreter's folder is not resolved through symbolic links: a virtualenv's
    ``bin/python`` is a link out of it, and its ``mrtr`` script lives beside the link.
    """
    scripts = Path(os.path.abspath(sys.executable)).parent
    for name in ("mrtr", "mrtr.exe"):
        candidate = scripts / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate), []
    return os.path.abspath(sys.executable), ["-m", "mrtr"]


def _import_root(app: str, cwd: Path) -> Path | None:
    """The folder to put on ``PYTHONPATH`` for ``app``'s module, or ``None`` when this environment has it.

    Found without importing (nothing of the user's code runs here): first in ``cwd``, as
    ``mrtr serve`` looks, then on this interpreter's path.
    """
    module, separator, attribute = app.partition(":")
    if not separator or not module or not attribute or not all(part.isidentifier() for part in module.split(".")):
        raise UsageError(f'application "{app}" must be given as "<module>:<attribute>", e.g. "myapp.main:server"')
    top = module.split(".")[0]
    if PathFinder.find_spec(top, [str(cwd)]) is not None:
        return cwd
    if PathFinder.find_spec(top) is not None:
        return None
    raise UsageError(f'could not find module "{top}" in the current directory {cwd} or in this environment '
                     f"({sys.executable})")


def _pairs(values: list[str], what: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for value in values:
        if what == "--header" and ":" in value and ("=" not in value or value.index(":") < value.index("=")):
            key, _, item = value.partition(":")
            item = item.strip()
        else:
            key, separator, item = value.partition("=")
            if not separator:
                raise UsageError(f"{what} {value.split('=')[0]!r}: give it as KEY=VALUE")
        key = key.strip()
        if not key or (what == "--env" and not _ENV_NAME.match(key)):
            raise UsageError(f"{what}: {key!r} is not a valid name")
        pairs[key] = item
    return pairs


def read_env_file(path: Path) -> dict[str, str]:
    """The ``KEY=VALUE`` lines of a ``.env`` file (``#`` comments, blank lines, ``export``, quotes allowed)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--env-file {path}: {exc.strerror or exc}") from None
    values: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("export "):
            stripped = stripped[len("export "):].lstrip()
        key, separator, value = stripped.partition("=")
        key = key.strip()
        if not separator or not _ENV_NAME.match(key):
            raise UsageError(f"--env-file {path}, line {number}: expected KEY=VALUE")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        values[key] = value
    return values


def _server(args: argparse.Namespace, cwd: Path) -> tuple[str, Stdio | Remote, set[str]]:
    """The entry's name, what it runs or reaches, and the names of the values to keep off the terminal."""
    if (args.app is None) == (args.url is None):
        raise UsageError("give either MODULE:ATTRIBUTE (a server this environment runs) or --url URL (a remote one)")
    secret_env = {**(read_env_file(Path(args.env_file)) if args.env_file else {}), **_pairs(args.env, "--env")}
    if args.url is not None:
        parsed = urllib.parse.urlsplit(args.url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise UsageError(f"--url {args.url!r}: give an http:// or https:// URL")
        if secret_env:
            raise UsageError("--env and --env-file set the environment of a server the host starts; "
                             "a --url server is reached, not started (send values with --header)")
        headers = _pairs(args.header, "--header")
        name = args.name or parsed.hostname
        return _valid_name(name), Remote(args.url, headers), set(headers)
    if args.header:
        raise UsageError("--header is for a --url server")
    root = _import_root(args.app, cwd)
    command, prefix = mrtr_command()
    env = {"PYTHONPATH": str(root)} if root is not None else {}
    env.update(secret_env)
    name = args.name or args.app.partition(":")[0].split(".")[0]
    return _valid_name(name), Stdio(command, [*prefix, "serve", args.app, "--stdio"], env, str(cwd)), set(secret_env)


def _valid_name(name: str) -> str:
    if not _NAME.match(name):
        raise UsageError(f"--name {name!r}: use letters, digits, '-', '_', '.' and spaces (at most 64), "
                         "starting with a letter or digit")
    return name


def _hidden(entry: Any, secrets: set[str]) -> Any:
    """``entry`` with the values of ``secrets`` (env and header names) replaced by :data:`HIDDEN`."""
    if isinstance(entry, dict):
        return {key: (HIDDEN if key in secrets and isinstance(value, str) else _hidden(value, secrets))
                for key, value in entry.items()}
    if isinstance(entry, list):
        return [_hidden(item, secrets) for item in entry]
    return entry


# -- the check ---------------------------------------------------------------------------------------


def _initialize() -> dict[str, Any]:
    return request(1, "initialize", {"protocolVersion": LATEST_LEGACY_VERSION, "capabilities": {},
                                     "clientInfo": {"name": "mrtr-install", "version": __version__}})


def check_server(server: Stdio | Remote, *, timeout: float = CHECK_TIMEOUT) -> str:
    """Start (or reach) ``server`` as its host would, ask it ``initialize``, and say who answered.

    A stdio server starts in a folder of its own with only ``PATH``, ``HOME`` and the
    entry's environment, as a desktop host starts it. Raises :class:`InstallError`
    with what went wrong (and the end of the server's stderr).
    """
    if isinstance(server, Remote):
        return _check_remote(server, timeout)
    return _check_stdio(server, timeout)


def _answered(message: dict[str, Any]) -> str:
    result = message.get("result")
    if isinstance(result, dict):
        info = result.get("serverInfo") or {}
        return (f"{info.get('name', '?')} {info.get('version', '')}".rstrip()
                + f" answered initialize ({result.get('protocolVersion', '?')})")
    error = message.get("error") or {}
    return f"the server answered initialize with error {error.get('code')}: {error.get('message')}"


def _check_stdio(server: Stdio, timeout: float) -> str:
    env = {key: os.environ[key] for key in ("PATH", "HOME", "USERPROFILE", "SYSTEMROOT", "TEMP", "TMP")
           if key in os.environ}
    env.update(server.env)
    with tempfile.TemporaryDirectory(prefix="mrtr-install-check-") as folder:
        try:
            process = subprocess.Popen([server.command, *server.args], cwd=folder, env=env, stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as exc:
            raise InstallError(f"could not start {server.command}: {exc.strerror or exc}") from None
        lines: queue.Queue[bytes] = queue.Queue()
        stderr = bytearray()

        def read_stdout() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                lines.put(line)
            lines.put(b"")

        def read_stderr() -> None:
            assert process.stderr is not None
            while chunk := os.read(process.stderr.fileno(), 65536):
                stderr.extend(chunk[: max(0, 65536 - len(stderr))])

        readers = [threading.Thread(target=read_stdout, daemon=True), threading.Thread(target=read_stderr, daemon=True)]
        for reader in readers:
            reader.start()
        try:
            assert process.stdin is not None
            process.stdin.write(json.dumps(_initialize()).encode() + b"\n")
            process.stdin.flush()
            deadline = time.monotonic() + timeout
            while True:
                try:
                    line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    raise InstallError(f"the server did not answer initialize within {timeout:g} s"
                                       + _tail(stderr)) from None
                if not line:
                    process.wait(timeout=5)
                    raise InstallError(f"the server exited with code {process.returncode} before answering "
                                       "initialize" + _tail(stderr))
                try:
                    message = json.loads(line)
                except ValueError:
                    raise InstallError(f"the server wrote something that is not JSON-RPC on stdout: "
                                       f"{line[:200]!r}" + _tail(stderr)) from None
                if isinstance(message, dict) and message.get("id") == 1:
                    return _answered(message)
        except BrokenPipeError:
            process.wait(timeout=5)
            raise InstallError(f"the server exited with code {process.returncode} before reading initialize"
                               + _tail(stderr)) from None
        finally:
            _end(process)
            for reader in readers:
                reader.join(timeout=5)


def _end(process: subprocess.Popen[bytes]) -> None:
    """Close the server's input (a stdio server's signal to stop), then terminate it if it stays."""
    for stream in (process.stdin,):
        try:
            if stream is not None:
                stream.close()
        except OSError:
            pass
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _tail(stderr: bytearray | bytes) -> str:
    text = bytes(stderr).decode(errors="replace").strip()
    if not text:
        return ""
    return "; its stderr ended with:\n" + "\n".join(text.splitlines()[-15:])


def _post(server: Remote, message: dict[str, Any], headers: dict[str, str], timeout: float
          ) -> tuple[Any, str | None, str]:
    """POST ``message`` to the server; its JSON-RPC answer (from JSON or an event stream), session id and type."""
    sent = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers,
            **server.headers}
    request_ = urllib.request.Request(server.url, data=json.dumps(message).encode(), headers=sent, method="POST")
    with urllib.request.urlopen(request_, timeout=timeout) as response:  # noqa: S310 (http and https only)
        body = response.read(1 << 20).decode(errors="replace")
        kind = response.headers.get("Content-Type", "")
        session = response.headers.get("Mcp-Session-Id")
    if "text/event-stream" in kind:
        for line in body.splitlines():
            if line.startswith("data:"):
                try:
                    candidate = json.loads(line[5:])
                except ValueError:
                    continue
                if isinstance(candidate, dict) and candidate.get("id") == message["id"]:
                    return candidate, session, kind
        return None, session, kind
    try:
        return json.loads(body), session, kind
    except ValueError:
        return None, session, kind


def _discover() -> dict[str, Any]:
    return request(1, "server/discover", {"_meta": {META_PROTOCOL_VERSION: PROTOCOL_VERSION,
                                                    META_CLIENT_CAPABILITIES: {}}})


def _check_remote(server: Remote, timeout: float) -> str:
    """``initialize`` at the URL; a server of the 2026-07-28 era alone is asked ``server/discover`` instead."""
    try:
        try:
            message, session, kind = _post(server, _initialize(), {}, timeout)
        except urllib.error.HTTPError as exc:
            if exc.code not in (400, 404, 405):
                raise
            from ..client.headers import request_headers  # loaded here: installing loads no client otherwise

            discover = _discover()
            answer, _, kind = _post(server, discover, request_headers(discover), timeout)
            result = answer.get("result") if isinstance(answer, dict) else None
            if not isinstance(result, dict):
                raise InstallError(f"{server.url} answered initialize with HTTP {exc.code} {exc.reason}, and "
                                   "server/discover with no result") from None
            info = (result.get("_meta") or {}).get(META_SERVER_INFO) or {}
            return (f"{info.get('name', '?')} {info.get('version', '')}".rstrip()
                    + f" answered server/discover (it serves {', '.join(result.get('supportedVersions') or [])})")
    except urllib.error.HTTPError as exc:
        raise InstallError(f"{server.url} answered with HTTP {exc.code} {exc.reason}") from None
    except (OSError, ValueError) as exc:
        raise InstallError(f"could not reach {server.url}: {getattr(exc, 'reason', None) or exc}") from None
    if session:  # the session the check opened is closed again
        ending = urllib.request.Request(server.url, headers={**server.headers, "Mcp-Session-Id": session},
                                        method="DELETE")
        with contextlib.suppress(OSError, ValueError):
            urllib.request.urlopen(ending, timeout=timeout).close()  # noqa: S310
    if not isinstance(message, dict) or message.get("id") != 1:
        raise InstallError(f"{server.url} did not answer initialize with JSON-RPC ({kind or 'no content type'})")
    return _answered(message)


# -- the file ----------------------------------------------------------------------------------------


def _location(host: Host, args: argparse.Namespace) -> Path | None:
    """The file to change; ``None`` for the json host without ``--config`` (it prints)."""
    if args.config is not None:
        if args.scope is not None:
            raise UsageError("--config names the file; --scope chooses one of the host's own: give one of them")
        return Path(args.config).expanduser().absolute()
    if host.name == "json":
        return None
    try:
        return Path(host.path(args.scope, sys.platform, os.environ, Path.cwd()))
    except HostPathError as exc:
        raise UsageError(str(exc)) from None


def _refusal(path: Path, exc: Exception) -> InstallError:
    if isinstance(exc, JSONSyntaxError):
        return InstallError(f"{path} is not valid JSON at line {exc.line} column {exc.column}: {exc.reason}; "
                            "it was left as it is")
    if isinstance(exc, GooseConfigRefused):
        return InstallError(f"{path}, line {exc.line}: {str(exc).partition(': ')[2]}: mrtr edits a Goose "
                            "config.yaml only where it can keep every other line exactly; it was left as it is "
                            "(add the entry by hand, or with goose configure)")
    return InstallError(f"{path}: {exc}; it was left as it is")


def _changed(host: Host, path: Path, text: str, name: str, entry: dict[str, Any] | None) -> str:
    """The file's new text with ``entry`` set (or, for ``None``, removed), checked by reading it back."""
    try:
        if host.yaml:
            if entry is None:
                return remove_extension(text, name)
            return set_extension(text, name, entry)
        before = parse(text, comments=host.comments)
        new = (remove_member(text, host.key, name, comments=host.comments) if entry is None
               else set_member(text, host.key, name, entry, comments=host.comments))
        expected = to_python(before) if before.start >= 0 else {}
        target = expected
        for key in host.key:
            target = target.setdefault(key, {}) if entry is not None else target.get(key, {})
        if entry is None:
            target.pop(name, None)
        else:
            target[name] = entry
        if to_python(parse(new, comments=host.comments)) != expected:  # one entry changed, nothing else
            raise InstallError(f"{path}: the edited file did not read back as expected; it was left as it is "
                               "(please report this with the file)")
        return new
    except KeyError:
        raise
    except (JSONSyntaxError, GooseConfigRefused, ValueError) as exc:
        raise _refusal(path, exc) from None


def _existing_env(host: Host, text: str | None, name: str) -> dict[str, str]:
    """The environment the entry already has (kept, and overridden by what is given now)."""
    if text is None or host.yaml:
        return {}
    try:
        data = to_python(parse(text, comments=host.comments))
    except JSONSyntaxError:
        return {}
    for key in host.key:
        data = data.get(key) if isinstance(data, dict) else None
    entry = data.get(name) if isinstance(data, dict) else None
    env = entry.get("env") if isinstance(entry, dict) else None
    return {str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {}


def _install(args: argparse.Namespace) -> int:
    host = HOSTS[args.host]
    cwd = Path.cwd()
    name, server, secrets = _server(args, cwd)
    if isinstance(server, Remote) and not host.remote:
        raise UsageError(f"{host.title} takes only servers it starts (stdio) in its file; add a remote server in "
                         "its settings (Connectors), or install a stdio server")
    path = _location(host, args)
    try:
        return _write_entry(args, host, name, server, secrets, path)
    except (InstallError, ConfigFileError) as exc:
        print(f"mrtr install: {exc}", file=sys.stderr)
        return 1


def _write_entry(args: argparse.Namespace, host: Host, name: str, server: Stdio | Remote, secrets: set[str],
                 path: Path | None) -> int:
    text = read_text(path) if path is not None else None
    if isinstance(server, Stdio) and text is not None:
        kept = _existing_env(host, text, name)
        if kept:
            server = Stdio(server.command, server.args, {**kept, **server.env}, server.cwd)
            secrets |= set(kept) - {"PYTHONPATH"}
    entry = host.build(name, server)
    if args.dry_run:
        shown = _hidden(entry, secrets)
        where = str(path) if path is not None else "standard output"
        print(f"mrtr install: would write {host.title}'s entry {name!r} into {where} "
              f"(at {'.'.join(host.key)}.{name}):", file=sys.stderr)
        print(json.dumps({host.key[-1]: {name: shown}}, indent=2, ensure_ascii=False))
        return 0
    if path is not None and host.must_exist and not path.parent.is_dir():
        raise InstallError(f"{path.parent} does not exist: is {host.title} installed? Start it once, "
                           "or give the file with --config")
    if path is not None and text is not None:
        _changed(host, path, text, name, entry)  # refused before the check if it cannot be edited
    if args.check:
        print(f"mrtr install: checking {name}: " + (f"starting {server.command} {' '.join(server.args)}"
              if isinstance(server, Stdio) else f"asking {server.url}"), file=sys.stderr, flush=True)
        said = check_server(server)
        print(f"mrtr install: {said}", file=sys.stderr)
    if path is None:
        print(json.dumps({host.key[-1]: {name: entry}}, indent=2, ensure_ascii=False))
        return 0
    new = _changed(host, path, text or "", name, entry)
    if not path.parent.exists():
        path.parent.mkdir(parents=True)
    backup = replace_file(path, new, secret=bool(secrets))
    print(f"mrtr install: {'replaced' if text is not None and _had(host, text, name) else 'added'} {name!r} in "
          f"{path}" + (f" (the previous file is {backup})" if backup else ""), file=sys.stderr)
    for note in host.notes:
        print(f"mrtr install: {note}", file=sys.stderr)
    return 0


def _had(host: Host, text: str, name: str) -> bool:
    return name in _names(host, text)


def _names(host: Host, text: str) -> list[str]:
    if host.yaml:
        return extension_names(text)
    data: Any = to_python(parse(text, comments=host.comments))
    for key in host.key:
        data = data.get(key) if isinstance(data, dict) else None
    return list(data) if isinstance(data, dict) else []


def _uninstall(args: argparse.Namespace) -> int:
    host = HOSTS[args.host]
    path = _location(host, args)
    if path is None:
        raise UsageError("the json host has no file of its own: give the file with --config")
    try:
        text = read_text(path)
        if text is None:
            raise InstallError(f"{path} does not exist: nothing to remove")
        try:
            new = _changed(host, path, text, args.name, None)
        except KeyError:
            try:
                present = _names(host, text)
            except (JSONSyntaxError, GooseConfigRefused):
                present = []
            raise InstallError(f"{path} has no entry {args.name!r}"
                               + (f" (it has: {', '.join(present)})" if present else "")) from None
        backup = replace_file(path, new)
    except (InstallError, ConfigFileError) as exc:
        print(f"mrtr uninstall: {exc}", file=sys.stderr)
        return 1
    print(f"mrtr uninstall: removed {args.name!r} from {path} (the previous file is {backup})", file=sys.stderr)
    return 0
