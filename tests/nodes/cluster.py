"""Several ``mrtr serve`` nodes on one real redis-server behind a real haproxy, all on loopback.

:func:`nodes` starts them (each node a subprocess serving :mod:`tests.nodes.app`, all
sharing ``MRTR_SECRET`` and the store, haproxy in front with the configuration of
:mod:`tests.nodes.balancer`), waits until the balancer reaches every node, and stops
everything at the end. :class:`Nodes` kills and restarts nodes and Redis mid-run.
:class:`Caller` speaks raw 2026-07-28 JSON-RPC through the balancer and checks every
message against the schema; it reads ``X-Mrtr-Node`` to know which node answered.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from ..conftest import meta, stop
from ..tasks.redis_server import free_port, redis_server
from ..tasks.tasks_schema import validate_task
from ..wire_schema import validate_message
from .balancer import haproxy_config, nginx_config

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.nodes.app:server"
TASKS = "io.modelcontextprotocol/tasks"
CAPABILITIES = {"elicitation": {"form": {}}, "extensions": {TASKS: {}}}


def require(binary: str, package: str) -> str:
    """The path of ``binary``; without it the test is skipped, or fails under ``CI=true``."""
    found = shutil.which(binary) or (f"/usr/sbin/{binary}" if os.path.exists(f"/usr/sbin/{binary}") else None)
    if found is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{binary} is not installed; .ci/run installs it (apt-get install {package})")
        pytest.skip(f"{binary} is not installed (apt-get install {package})")
    return found


@dataclass
class Node:
    """One ``mrtr serve`` subprocess, by its port and its log."""

    name: str
    port: int
    log: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid


@dataclass
class Nodes:
    """The nodes, the balancer in front of them and the Redis behind them."""

    url: str  # the balancer's MCP endpoint
    store: str
    secret: str
    nodes: list[Node]
    workdir: Path
    redis_port: int
    stack: ExitStack
    redis_process: subprocess.Popen[bytes] | None = None
    environment: dict[str, str] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)  # what the balancer calls a node, by node name
    app: str = APP  # what every node serves

    def name_of(self, header: str) -> str:
        """The node a balancer's ``X-Mrtr-Node`` names."""
        return self.aliases.get(header, header)

    def start(self, node: Node) -> None:
        """Start ``node`` (again) on its port."""
        handle = open(node.log, "ab")
        node.process = subprocess.Popen(
            [sys.executable, "-m", "mrtr", "serve", self.app, "--port", str(node.port), "--store", self.store,
             "--allowed-host", self.url.split("/")[2], "--task-lease", "1", "--log-level",
             os.environ.get("NODES_LOG_LEVEL", "warning"),
             "--no-access-log"],
            cwd=ROOT, env=self.environment, stdout=subprocess.DEVNULL, stderr=handle)
        handle.close()

    def kill(self, node: Node) -> None:
        """SIGKILL: the node dies at once, its requests in flight with it."""
        assert node.process is not None
        os.kill(node.process.pid, signal.SIGKILL)
        node.process.wait()

    def restart(self, node: Node) -> None:
        """A graceful stop (SIGTERM: requests in flight finish), then a start on the same port."""
        assert node.process is not None
        stop(node.process)
        self.start(node)

    def stop_redis(self) -> None:
        """Stop Redis (it keeps every acknowledged write on disk)."""
        assert self.redis_process is not None
        self.redis_process.terminate()
        self.redis_process.wait()

    def start_redis(self) -> None:
        """Start Redis again, on the same port and data."""
        _, self.redis_process = self.stack.enter_context(
            redis_server(self.redis_port, str(self.workdir / "redis"), persist=True))

    def logs(self) -> str:
        """Every node's log so far."""
        return "\n".join(f"--- {node.name}\n{node.log.read_text(errors='replace')}" for node in self.nodes
                         if node.log.exists())

    async def ready(self, node: Node, timeout: float = 30) -> None:
        """Wait until ``node`` answers its health check directly."""
        with trio.fail_after(timeout):
            async with httpx.AsyncClient(timeout=1) as http:
                while True:
                    assert node.alive, f"{node.name} exited:\n{self.logs()}"
                    try:
                        if (await http.get(f"http://127.0.0.1:{node.port}/healthz")).status_code == 200:
                            return
                    except httpx.TransportError:
                        pass
                    await trio.sleep(0.05)

    async def in_rotation(self, names: set[str], timeout: float = 30) -> None:
        """Wait until the balancer sends requests to every node of ``names`` (its checks saw them up)."""
        seen: set[str] = set()
        with trio.fail_after(timeout):
            async with httpx.AsyncClient(timeout=2) as http:
                while not names <= seen:
                    balancer = getattr(self, "balancer", None)
                    assert balancer is None or balancer.poll() is None, "the balancer exited:\n" + "\n".join(
                        path.read_text(errors="replace") for path in self.workdir.glob("*.log")
                        if path.name.startswith(("haproxy", "nginx")))
                    try:
                        response = await http.get(self.url.replace("/mcp", "/healthz"))
                    except httpx.TransportError:
                        await trio.sleep(0.05)
                        continue
                    if response.status_code == 200:
                        seen.add(self.name_of(response.headers.get("x-mrtr-node", "")))
                    else:
                        await trio.sleep(0.05)


@contextmanager
def _nginx(workdir: Path, listen: tuple[str, int], addresses: list[tuple[str, int]]) -> Iterator[subprocess.Popen[bytes]]:
    """nginx in the foreground with the ``http`` part of docs/deployment.md, and a main file around it."""
    binary = require("nginx", "nginx")
    (workdir / "mrtr.conf").write_text(nginx_config(listen, addresses))
    (workdir / "nginx.conf").write_text(
        f"daemon off;\npid {workdir}/nginx.pid;\nerror_log {workdir}/nginx.log;\nevents {{}}\n"
        f"http {{\n    access_log off;\n    include {workdir}/mrtr.conf;\n}}\n")
    with open(workdir / "nginx.out", "wb") as errors:
        process = subprocess.Popen([binary, "-p", str(workdir), "-c", str(workdir / "nginx.conf")],
                                   stdout=subprocess.DEVNULL, stderr=errors)
    try:
        yield process
    finally:
        stop(process)


@asynccontextmanager
async def nodes(tmp_path: Path, count: int = 3, *, check_every: str = "300ms",
                balancer_kind: str = "haproxy", env: dict[str, str] | None = None, app: str = APP
                ) -> AsyncIterator[Nodes]:
    """``count`` nodes on one Redis behind haproxy (or nginx), round robin, every node in rotation.

    ``env`` adds to every node's environment; ``app`` is what they serve (:mod:`tests.nodes.app` by default).
    """
    with _started(tmp_path, count, check_every=check_every, balancer_kind=balancer_kind, env=env,
                  app=app) as cluster:
        for node in cluster.nodes:
            await cluster.ready(node)
        await cluster.in_rotation({node.name for node in cluster.nodes})
        yield cluster


@contextmanager
def started(tmp_path: Path, count: int = 2, *, env: dict[str, str] | None = None) -> Iterator[Nodes]:
    """:func:`nodes` for a module's tests to share (a sync context, for a module-scoped fixture)."""
    with _started(tmp_path, count, check_every="300ms", balancer_kind="haproxy", env=env) as cluster:

        async def up() -> None:
            for node in cluster.nodes:
                await cluster.ready(node)
            await cluster.in_rotation({node.name for node in cluster.nodes})

        trio.run(up)
        yield cluster


@contextmanager
def _started(tmp_path: Path, count: int, *, check_every: str, balancer_kind: str,
             env: dict[str, str] | None, app: str = APP) -> Iterator[Nodes]:
    haproxy = require("haproxy", "haproxy") if balancer_kind == "haproxy" else ""
    workdir = Path(tempfile.mkdtemp(prefix="mrtr-nodes-", dir=tmp_path))
    (workdir / "redis").mkdir()
    with ExitStack() as stack:
        redis_port = free_port()
        store, redis_process = stack.enter_context(redis_server(redis_port, str(workdir / "redis"), persist=True))
        secret = base64.b64encode(os.urandom(32)).decode()
        listen = free_port()
        cluster = Nodes(
            url=f"http://127.0.0.1:{listen}/mcp", store=store, secret=secret, workdir=workdir, redis_port=redis_port,
            stack=stack, redis_process=redis_process,
            nodes=[Node(f"node{number}", free_port(), workdir / f"node{number}.log") for number in range(1, count + 1)],
            environment={**os.environ, "MRTR_SECRET": secret, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1",
                         **(env or {})},
            app=app,
        )
        for node in cluster.nodes:
            cluster.start(node)
        for node in cluster.nodes:
            stack.callback(lambda node=node: node.process is not None and node.process.poll() is None
                           and stop(node.process))
        addresses = [("127.0.0.1", node.port) for node in cluster.nodes]
        if balancer_kind == "nginx":
            # nginx names the node that answered by its address: the tests speak of node names.
            cluster.aliases = {f"127.0.0.1:{node.port}": node.name for node in cluster.nodes}
            balancer = stack.enter_context(_nginx(workdir, ("127.0.0.1", listen), addresses))
        else:
            config = workdir / "haproxy.cfg"
            config.write_text(haproxy_config(("127.0.0.1", listen), addresses, check_every=check_every))
            check = subprocess.run([haproxy, "-c", "-q", "-f", str(config)], capture_output=True, text=True,
                                   check=False)
            assert check.returncode == 0, check.stdout + check.stderr
            with open(workdir / "haproxy.log", "wb") as errors:
                balancer = subprocess.Popen([haproxy, "-db", "-f", str(config)], stdout=subprocess.DEVNULL,
                                            stderr=errors)
            stack.callback(stop, balancer)
        cluster.balancer = balancer  # type: ignore[attr-defined]
        yield cluster


class Caller:
    """Raw JSON-RPC through the balancer, one HTTP client (a pool of keep-alive connections) per caller."""

    def __init__(self, http: httpx.AsyncClient, url: str) -> None:
        self.http = http
        self.url = url
        self.ids = iter(range(1, 1 << 30))

    async def request(self, method: str, params: dict[str, Any]) -> tuple[int, dict[str, Any], str]:
        """One request: the HTTP status, the response message (schema-checked) and the node that answered."""
        params = {**params, "_meta": meta(CAPABILITIES)}
        body = {"jsonrpc": "2.0", "id": next(self.ids), "method": method, "params": params}
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
        name = params.get("name") or params.get("taskId") or params.get("uri")
        if isinstance(name, str):
            headers["Mcp-Name"] = name
        response = await self.http.post(self.url, headers=headers, content=json.dumps(body))
        node = response.headers.get("x-mrtr-node", "")
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            lines = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
            message = json.loads(lines[-1])
        else:
            message = json.loads(response.content)
        check(method, message)
        return response.status_code, message, node


def check(method: str, message: dict[str, Any]) -> None:
    """Validate a server message against the schema of the core or of the tasks extension."""
    result = message.get("result")
    if method.startswith("tasks/") and result is not None:
        validate_task({"tasks/get": "GetTaskResult", "tasks/update": "UpdateTaskResult",
                       "tasks/cancel": "CancelTaskResult"}[method], result)
    elif isinstance(result, dict) and result.get("resultType") == "task":
        validate_task("CreateTaskResult", result)
    elif message.get("method") == "notifications/tasks":
        validate_task("TaskStatusNotification", message)
    else:
        validate_message(message)


@contextmanager
def timed(label: str, numbers: dict[str, Any]) -> Iterator[None]:
    """Record how long the block took under ``label`` in ``numbers``."""
    started = time.monotonic()
    try:
        yield
    finally:
        numbers[label] = round(time.monotonic() - started, 2)
