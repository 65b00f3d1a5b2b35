"""The package's public face and its layers, pinned.

The public names test fails when a name is added to or dropped from ``mrtr`` without
updating this list: a change of the public face must be a decision, not an accident.
The import contract keeps the layers of docs/adr/0009-packages-by-layer.md: the core does no
I/O and imports nothing above it; carriers sit on the core; the server imports no
transport, CLI or client; transports depend on the dispatcher protocol, not the server.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import inspect
import pkgutil
import subprocess
import sys
import typing
from pathlib import Path

import pytest

import mrtr

PUBLIC = {
    "Context", "Elicit", "ElicitResult", "ElicitURL", "Form", "HandlerError", "Header", "InvalidParams",
    "ListRoots", "MissingRequiredClientCapability", "Patched", "ProtocolError", "ReplayMismatch", "Request",
    # the error a handler raises on purpose to tell the caller why; its message is never masked
    "PublicError",
    "RequestInfo", "Sample", "Server", "Step",
    # MCP Apps: the origins an interface may reach (server.ui_resource(csp=...))
    "Csp",
    # the client side, loaded on first use, and the answer helpers it shares with mrtr.testing
    "Client", "ClientError", "RoundLimitExceeded", "accept", "decline", "cancel",
    # the proxy: a server whose catalogue is another server's (mrtr.bridge), loaded on first use
    "proxy",
}

PACKAGE = Path(mrtr.__file__).parent

# Layers from the bottom up, one package each (docs/adr/0009-packages-by-layer.md). A module
# may import its own layer and those below it.
LAYERS = ["core", "carrier", "server", "auth", "transport", "client", "proxy", "face"]
LAYER_OF = {
    "mrtr.core": "core", "mrtr._version": "core",
    "mrtr.carriers": "carrier",
    "mrtr.server": "server",
    "mrtr.auth": "auth",
    "mrtr.transports": "transport",
    "mrtr.client": "client",
    "mrtr.bridge": "proxy",
    "mrtr.cli": "face", "mrtr.__main__": "face", "mrtr.testing": "face", "mrtr.examples": "face",
    # documented import paths kept when their modules moved: thin re-exports
    "mrtr.http": "face", "mrtr.stdio": "face", "mrtr.tasks": "face", "mrtr.middleware": "face",
}
# Third-party packages that mean I/O or an event loop: never below the transports, except in
# the tasks carrier, whose stores are I/O by nature (SQLite, Redis) and whose runner owns a nursery.
EVENT_LOOP = {"trio", "anyio", "httpx", "h11", "httptools", "coredis", "sqlite3", "socket"}
IO_ALLOWED = ("mrtr.carriers.tasks",)
# What a layer may not import even though it sits above: transports and the server meet only
# through the Dispatcher protocol; the client talks to servers, it is not one (it may run a
# server object it is handed, through the transports' shared helpers, never by importing one).
FORBIDDEN = {
    "transport": ("mrtr.server", "mrtr.carriers"),
    "client": ("mrtr.server", "mrtr.carriers", "mrtr.auth", "mrtr.cli", "mrtr.testing", "mrtr.examples",
               "mrtr.http", "mrtr.stdio", "mrtr.tasks"),
}


def _modules() -> list[tuple[str, Path]]:
    found = [("mrtr", PACKAGE / "__init__.py")]
    for info in pkgutil.walk_packages([str(PACKAGE)], prefix="mrtr."):
        module = importlib.util.find_spec(info.name)
        assert module is not None and module.origin is not None
        found.append((info.name, Path(module.origin)))
    return found


def _layer(name: str) -> str | None:
    parts = name.split(".")
    for end in range(len(parts), 1, -1):
        layer = LAYER_OF.get(".".join(parts[:end]))
        if layer is not None:
            return layer
    return None


def _is_module(name: str) -> bool:
    try:
        return name.startswith("mrtr.") and importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def _imports(name: str, path: Path) -> set[str]:
    """Absolute names of everything a module imports (at any depth: a function-local import counts)."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                prefix = ".".join(base)
                module = f"{prefix}.{node.module}" if node.module else prefix
            else:
                module = node.module or ""
            submodules = {f"{module}.{alias.name}" for alias in node.names if _is_module(f"{module}.{alias.name}")}
            names.update(submodules)  # "from . import wire" names a module, not an attribute
            if len(submodules) < len(node.names):
                names.add(module)
    return names


def test_the_public_names_are_exactly_these():
    assert set(mrtr.__all__) == PUBLIC
    for name in PUBLIC:
        value = getattr(mrtr, name)
        assert inspect.getdoc(value), f"mrtr.{name} has no docstring"


def test_machinery_stays_out_of_the_top_level():
    for name in ("replay", "replay_async", "Completed", "InputRequired", "TokenCarrier", "parse_message"):
        assert name not in mrtr.__all__


@pytest.mark.parametrize("name, path", _modules(), ids=lambda value: str(value) if isinstance(value, str) else "")
def test_every_module_keeps_to_its_layer(name, path):
    if name == "mrtr":
        return  # the face re-exports from every layer it presents
    layer = _layer(name)
    assert layer is not None, f"{name} belongs to no layer: add it to LAYER_OF (and to docs/adr/0009-packages-by-layer.md)"
    rank = LAYERS.index(layer)
    for imported in sorted(_imports(name, path)):
        root = imported.split(".")[0]
        if root == "mrtr":
            if imported == "mrtr" and layer != "face":
                raise AssertionError(f"{name} imports the package face; import from the module that holds the name")
            other = "face" if imported == "mrtr" else _layer(imported)
            assert other is not None, f"{name} imports {imported}, which belongs to no layer"
            assert LAYERS.index(other) <= rank, f"{name} ({layer}) imports {imported} ({other}), a layer above it"
            forbidden = FORBIDDEN.get(layer, ())
            assert not any(imported == f or imported.startswith(f + ".") for f in forbidden), \
                f"{name} ({layer}) must not import {imported}"
        elif layer in ("core", "carrier", "server") and root in EVENT_LOOP and not name.startswith(IO_ALLOWED):
            raise AssertionError(f"{name} ({layer}) imports {root}: the {layer} layer does no I/O")


def test_every_public_module_name_is_documented():
    for name, _ in _modules():
        module = importlib.import_module(name)
        assert inspect.getdoc(module), f"{name} has no module docstring"
        for exported in getattr(module, "__all__", ()):
            value = getattr(module, exported)
            if inspect.isclass(value) or inspect.isfunction(value):
                assert inspect.getdoc(value), f"{name}.{exported} has no docstring"


@pytest.mark.slow
def test_the_client_loads_no_server():
    """``import mrtr.client`` (which imports the package first) loads no server, carrier or token codec."""
    code = ("import sys, mrtr.client; "
            "print(sorted(m for m in sys.modules if m.startswith(('mrtr.server', 'mrtr.carriers', 'mrtr.core.codec', "
            "'mrtr.auth', 'cryptography'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out


TEST_ONLY = ("pytest", "_pytest", "hypothesis", "trio.testing")
"""Modules made for test suites: ``trio.testing`` pulls in pytest wherever it is installed."""


def test_no_module_of_the_package_imports_a_test_only_module():
    """Not ``mrtr``, not ``mrtr.cli``, not what ``mrtr serve --stdio`` runs: no module of the package, at any depth.

    Read from the source (a function-local import counts), so nothing is started; the
    slow test in tests/test_cold_start.py checks a real ``mrtr serve --stdio`` process.
    """
    found = sorted((name, imported) for name, path in _modules() for imported in _imports(name, path)
                   if any(imported == banned or imported.startswith(banned + ".") for banned in TEST_ONLY))
    assert not found, f"production modules import test-only modules: {found}"


class _Refuse:
    """A finder first on ``sys.meta_path`` that refuses the test-only modules and notes who asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if any(name == banned or name.startswith(banned + ".") for banned in TEST_ONLY):
            self.asked.append(name)
            raise ImportError(f"{name} is a test-only module")


@contextlib.contextmanager
def _test_only_modules_out_of_reach() -> typing.Iterator[_Refuse]:
    """The test-only modules gone from ``sys.modules`` (and ``trio.testing`` from ``trio``), any new import refused.

    Put back on the way out, before pytest needs them again.
    """
    import trio

    hidden = {name: module for name, module in sys.modules.items()
              if any(name == banned or name.startswith(banned + ".") for banned in TEST_ONLY)}
    trio_testing = trio.__dict__.pop("testing", None)
    refuse = _Refuse()
    for name in hidden:
        del sys.modules[name]
    sys.meta_path.insert(0, refuse)
    try:
        yield refuse
    finally:
        sys.meta_path.remove(refuse)
        sys.modules.update(hidden)
        if trio_testing is not None:
            trio.testing = trio_testing  # type: ignore[attr-defined]


@pytest.mark.filterwarnings("ignore::mrtr.core.codec.EphemeralKeyWarning")  # the example runs without MRTR_SECRET
def test_serving_over_stdio_needs_no_test_only_module_at_run_time():
    """What ``mrtr serve --stdio`` runs, in this process: the bundled example served over a socket pair.

    The check above reads import statements; this one runs the serve path (its lifespan, the
    deferred access lines, their write) with the test-only modules out of reach, so an import
    by name or one a dependency makes on the way fails it too. No process is started.
    """
    import io
    import json
    import logging

    import trio

    from mrtr.cli.app import DEFAULT_APP, load_server
    from mrtr.transports.logs import ACCESS_LOGGER, TEXT_FORMAT, LineHandler
    from mrtr.transports.stdio import serve_stdio

    from .conftest import meta
    from .wire_schema import validate_message

    server = load_server(DEFAULT_APP)
    asked = [
        {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta()}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "add", "arguments": {"a": 2, "b": 3}, "_meta": meta()}},
    ]
    stream = io.StringIO()
    handler = LineHandler(stream)
    handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], ACCESS_LOGGER.level

    async def main() -> bytes:
        a, b = trio.socket.socketpair()
        server_side, client_side = trio.SocketStream(a), trio.SocketStream(b)
        await client_side.send_all(b"".join(json.dumps(message).encode() + b"\n" for message in asked))
        await client_side.send_eof()
        with trio.fail_after(10):
            await serve_stdio(server, stdin=server_side, stdout=server_side)
        await server_side.aclose()
        received = b""
        while chunk := await client_side.receive_some():
            received += chunk
        await client_side.aclose()
        return received

    root.handlers[:] = [handler]
    ACCESS_LOGGER.setLevel(logging.INFO)
    try:
        with _test_only_modules_out_of_reach() as refuse:
            received = trio.run(main)
    finally:
        root.handlers[:] = saved_handlers
        ACCESS_LOGGER.setLevel(saved_level)
    assert not refuse.asked, f"serving imported test-only modules: {refuse.asked}"
    answers = {answer["id"]: answer for answer in map(json.loads, received.splitlines())}
    validate_message(answers[1], "DiscoverResult")
    validate_message(answers[2], "CallToolResult")
    assert answers[2]["result"]["content"][0]["text"] == "5", answers[2]
    access = [line for line in stream.getvalue().splitlines() if " mrtr.access: " in line]
    assert len(access) == 2 and "server/discover" in access[0] and '"add"' in access[1], access


def _string_constants(path: Path, value: str) -> list[int]:
    tree = ast.parse(path.read_text(), str(path))
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Constant) and node.value == value]


def test_the_jsonrpc_version_is_written_once():
    """``"2.0"`` stands in the framing's constant and in the wire type that spells it, nowhere else."""
    from mrtr.core import jsonrpc, wire

    found = {name: lines for name, path in _modules() if (lines := _string_constants(path, "2.0"))}
    assert set(found) == {"mrtr.core.jsonrpc", "mrtr.core.wire"}, found
    assert len(found["mrtr.core.jsonrpc"]) == 1 and len(found["mrtr.core.wire"]) == 1, found
    assert typing.get_args(wire.JSONRPCVersion) == (jsonrpc.JSONRPC_VERSION,)
    assert wire.JSONRPC_VERSION is jsonrpc.JSONRPC_VERSION and wire.RequestId is jsonrpc.RequestId


# Names exported by two modules for two different things, each with its reason. Any other
# name a module exports means one thing wherever it is exported (re-exports are the same object).
HOMONYMS = {
    "ElicitResult": "what a handler receives (mrtr.ElicitResult) and the message a client sends (wire)",
    "InputRequest": "the client's answerer-facing request objects and the wire union they are decoded from",
    "encode": "the task record's own codec (mrtr.carriers.tasks.record) and the JSON encoder",
    "decode": "the task record's own codec and wire.decode",
    "run": "mrtr.testing.run (drive a handler) and the HTTP worker supervisor's entry point",
}


def test_an_exported_name_means_one_thing():
    meanings: dict[str, set[int]] = {}
    for name, _ in _modules():
        module = importlib.import_module(name)
        for exported in getattr(module, "__all__", ()):
            meanings.setdefault(exported, set()).add(id(getattr(module, exported)))
    assert {name for name, objects in meanings.items() if len(objects) > 1} == set(HOMONYMS)


# -- seams: no circles, no private names across modules, the server's members its own ------------


def _import_graph() -> dict[str, set[str]]:
    """Which modules of the package each one imports, type-only imports and function-local ones included."""
    modules = dict(_modules())
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges = set()
        for imported in _imports(name, path):
            while imported and imported not in modules:
                imported = imported.rpartition(".")[0]
            # A package's own __init__ imports its modules; a module importing its package is not an edge back.
            if imported and imported != name and not name.startswith(imported + "."):
                edges.add(imported)
        graph[name] = edges
    return graph


def test_no_two_files_of_the_package_import_each_other_even_for_types():
    graph = _import_graph()
    cycles = []

    def visit(node: str, path: list[str], seen: set[str]) -> None:
        for other in sorted(graph[node]):
            if other == path[0]:
                cycles.append(" -> ".join([*path, other]))
            elif other not in seen and other > path[0]:  # each cycle once, from its smallest module
                seen.add(other)
                visit(other, [*path, other], seen)

    for start in sorted(graph):
        visit(start, [start], {start})
    assert not cycles, "import circles:\n" + "\n".join(cycles[:20])


def test_no_module_imports_another_modules_private_name():
    found = []
    for name, path in _modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                found += [f"{name}: from {'.' * node.level}{node.module or ''} import {alias.name}"
                          for alias in node.names if alias.name.startswith("_") and not alias.name.startswith("__")]
    assert not found, "private names imported across modules:\n" + "\n".join(found)


def test_only_the_servers_own_module_touches_its_private_members():
    """The eras, the transports and everything else read a server through public names (server/shell.py)."""
    found = []
    for name, path in _modules():
        if name == "mrtr.server.dispatch":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                base = ast.unparse(node.value)
                if base.split(".")[-1] in ("server", "shell", "_server"):
                    found.append(f"{name}:{node.lineno}: {base}.{node.attr}")
    assert not found, "\n".join(found)
