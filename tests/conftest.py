"""Helpers every test package shares: the request ``_meta`` envelope, polling, a clock, processes.

Import them relatively (``from .conftest import meta``, ``from ..conftest import until``);
pytest loads this module once as ``tests.conftest``, so both spellings are the same module.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
import trio

from mrtr.core.wire import META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, PROTOCOL_VERSION


@pytest.fixture(autouse=True)
def _forget_probed_eras() -> Iterator[None]:
    """Each test starts with a client that has probed nothing.

    The client remembers the era of every HTTP endpoint it probed, for the life of the
    process. Test servers listen on ports the OS hands out, and a port freed by one test
    is handed to the next: without this, a scripted 2025 server could inherit the era a
    modern server left on the same URL.
    """
    from mrtr.client import session

    session._ERAS.clear()
    yield
    session._ERAS.clear()

T = TypeVar("T")


def meta(capabilities: Mapping[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """A request ``_meta`` for this protocol version declaring ``capabilities`` (none by default).

    ``extra`` adds or overrides members by their full key:
    ``meta({"elicitation": {}}, **{META_LOG_LEVEL: "info"})``.
    """
    return {
        META_PROTOCOL_VERSION: PROTOCOL_VERSION,
        META_CLIENT_CAPABILITIES: dict(capabilities or {}),
        **extra,
    }


async def until(
    probe: Callable[[], T | Awaitable[T]],
    done: Callable[[T], Any] = bool,
    *,
    timeout: float = 10.0,
    every: float = 0.02,
) -> T:
    """Call ``probe`` (sync or async) until ``done`` holds for what it returns, and return that.

    Fails the test with ``trio.TooSlowError`` after ``timeout`` seconds; ``every`` is
    the pause between two calls. For conditions another task or process brings about:
    the test waits exactly as long as it takes, never a fixed time.
    """
    with trio.fail_after(timeout):
        while True:
            value = probe()
            if inspect.isawaitable(value):
                value = await value
            if done(value):  # type: ignore[arg-type]
                return value  # type: ignore[return-value]
            await trio.sleep(every)


class FakeClock:
    """A wall clock for code that takes ``clock=``: it stands still until the test moves it."""

    def __init__(self, now: float | None = None) -> None:
        self.now = time.time() if now is None else now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the clock ``seconds`` forward."""
        self.now += seconds


def line_of(fn: Callable[..., Any], text: str) -> int:
    """The line number, in its file, of the first line of ``fn``'s source containing ``text``."""
    lines, start = inspect.getsourcelines(fn)
    for offset, line in enumerate(lines):
        if text in line:
            return start + offset
    raise AssertionError(f"{text!r} not in {fn.__name__}")


def stop(process: subprocess.Popen[Any], timeout: float = 10) -> None:
    """End a subprocess: SIGTERM, and SIGKILL if it is still there after ``timeout`` seconds."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on (the OS picked it; a server may take it next)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def http_server(argv: Sequence[str], url: str, *, env: Mapping[str, str] | None = None,
                cwd: Path | str | None = None, timeout: float = 30) -> Iterator[subprocess.Popen[bytes]]:
    """Start ``argv`` (a server listening on ``url``), wait until it answers HTTP at all, stop it at the end.

    Any HTTP answer counts (a 405 to a GET, a 401): the server is serving. A process that
    exits, or does not answer within ``timeout`` seconds, fails the test with its stderr.
    """
    import urllib.error
    import urllib.request

    process = subprocess.Popen(list(argv), env=None if env is None else dict(env), cwd=cwd,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                urllib.request.urlopen(url, timeout=1)
                break
            except urllib.error.HTTPError:
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    process.kill()
                    stderr = process.communicate()[1].decode(errors="replace")
                    raise AssertionError(f"{argv[0]} did not start serving {url}:\n{stderr[-3000:]}") from None
                time.sleep(0.05)
        yield process
    finally:
        stop(process)
        if process.stderr is not None:
            process.stderr.close()


@asynccontextmanager
async def mrtr_process(args: Sequence[str], *, cwd: Path | str, env: Mapping[str, str]
                       ) -> AsyncIterator[tuple[trio.Process, bytearray]]:
    """``python -m mrtr *args`` with its stderr gathered into a bytearray as it comes.

    Yields the process and that bytearray; a process still running when the block ends
    is killed.
    """
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "mrtr", *args], cwd=cwd, env=dict(env),
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    stderr = bytearray()

    async def collect() -> None:
        assert process.stderr is not None
        while data := await process.stderr.receive_some(65536):
            stderr.extend(data)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(collect)
        try:
            yield process, stderr
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()


class StaticDispatcher:
    """The transport-facing half of a test dispatcher that answers from a script, not a Server.

    A subclass gives ``serves``, ``header_parameters`` and ``handle``; this adds what a
    transport also drives (``respond`` with the message's status, and a lifecycle with
    nothing to run, no key ring and no listen streams), so a fake server keeps up with
    :class:`mrtr.core.jsonrpc.Dispatcher` in one place.
    """

    auth = None
    legacy = None  # the modern era only

    async def handle(self, message: Mapping[str, Any], **options: Any) -> dict[str, Any]:
        raise NotImplementedError

    async def respond(self, message: Mapping[str, Any], **options: Any) -> Any:
        from mrtr.core.jsonrpc import Response

        return Response(await self.handle(message, **options))

    def running(self) -> contextlib.nullcontext[None]:
        return contextlib.nullcontext()

    def settle_key(self) -> None:
        pass

    def listen_through(self, hub: Any) -> Callable[[], None]:
        return lambda: None


def clean_env() -> dict[str, str]:
    """This process's environment without what points at our virtualenv: for processes of another one."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def pinned_venv(venv: Path, requirements: Path, package: str, version: str) -> Path:
    """The python of ``venv`` with ``package==version`` in it, created from ``requirements`` on first use.

    A peer pinned exactly, in its own virtualenv so its dependencies never mix with ours.
    When it cannot be made (no package registry), the calling test fails under
    ``CI=true`` and is skipped elsewhere, saying why.
    """
    python = venv / "bin" / "python"

    def ready() -> bool:
        if not python.exists():
            return False
        probe = subprocess.run(
            [str(python), "-c", f"import importlib.metadata as m; assert m.version({package!r}) == {version!r}"],
            capture_output=True, env=clean_env(), timeout=120, check=False)
        return probe.returncode == 0

    def unavailable(reason: str) -> None:
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)

    if ready():
        return python
    if not python.exists():
        created = subprocess.run([shutil.which("python3") or sys.executable, "-m", "venv", str(venv)],
                                 capture_output=True, text=True, timeout=300, check=False)
        if created.returncode != 0:
            unavailable(f"could not create {venv}: {created.stderr[-2000:]}")
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q", "-r", str(requirements)],
        capture_output=True, text=True, env=clean_env(), timeout=900, check=False)
    if installed.returncode != 0 or not ready():
        unavailable(f"could not install {package}=={version} into {venv} (is the package registry reachable?): "
                    f"{installed.stderr[-2000:]}")
    return python


def module_from_file(path: Path) -> Any:
    """The module in ``path``, a script of the repository outside any package (docs/, .ci/)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
