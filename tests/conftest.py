"""Helpers every test package shares: the request ``_meta`` envelope, polling, a clock, processes.

Import them relatively (``from .conftest import meta``, ``from ..conftest import until``);
pytest loads this module once as ``tests.conftest``, so both spellings are the same module.

It also keeps the suite's house rules, for every run:

- **Two tiers.** ``python -m pytest`` runs everything; ``python -m pytest -m "not slow"`` is the
  everyday loop. A test that starts a process (a server, nodes, Redis, a peer, a browser,
  a ``python -c``) is marked ``slow`` (``pytestmark = pytest.mark.slow`` for a module,
  ``@pytest.mark.slow`` for one test, ``pytest.param(..., marks=pytest.mark.slow)`` for one
  parameter); one that is not fails at the moment it starts one, saying so.
- **Hypothesis at two strengths.** The profile ``full`` (the whole suite, CI) runs each
  property the number of examples its test asks for; ``quick`` (chosen by ``-m "not slow"``)
  a tenth of it. A test asks with ``@settings(max_examples=examples(300))``;
  ``HYPOTHESIS_PROFILE`` chooses a profile by name.
- **Nothing written where it does not belong.** ``XDG_STATE_HOME`` points into a temporary
  folder for the whole run (servers keep their default task store and OAuth tokens there,
  never in the user's home), and a run that leaves a new file in the checkout fails, naming it.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
import trio
from hypothesis import settings as hypothesis_settings

from mrtr.core.wire import META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, PROTOCOL_VERSION

CHECKOUT = Path(__file__).resolve().parents[1]
"""The folder holding ``tests/``: the checkout (or, in the package check, the copy of its files)."""

# -- the suite's house rules (module docstring) -------------------------------------------------

hypothesis_settings.register_profile("full", max_examples=100)
hypothesis_settings.register_profile("quick", max_examples=10)


def examples(count: int) -> int:
    """``count`` examples under the ``full`` profile, proportionally fewer under ``quick`` (at least 5)."""
    return max(5, math.ceil(count * hypothesis_settings.default.max_examples / 100))


# Every process a test starts, and what it keeps, lives under this run's own state folder.
_STATE = tempfile.mkdtemp(prefix="mrtr-tests-state-")
os.environ["XDG_STATE_HOME"] = _STATE

# Folders of the checkout that a run may write (caches, virtualenvs, build output), by name.
_WRITABLE = {".git", ".venv", ".cache", "__pycache__", ".pytest_cache", ".hypothesis", ".mypy_cache",
             "site", "build", "dist"}
_checkout_before: set[str] = set()
_running: list[pytest.Item] = []


def _checkout_files() -> set[str]:
    found = set()
    for folder, subfolders, files in os.walk(CHECKOUT):
        subfolders[:] = [name for name in subfolders if name not in _WRITABLE and not name.endswith(".egg-info")]
        found.update(os.path.relpath(os.path.join(folder, name), CHECKOUT) for name in files)
    return found


def pytest_configure(config: pytest.Config) -> None:
    chosen = os.environ.get("HYPOTHESIS_PROFILE")
    quick = "not slow" in (config.option.markexpr or "")
    hypothesis_settings.load_profile(chosen or ("quick" if quick else "full"))


def pytest_sessionstart(session: pytest.Session) -> None:
    _checkout_before.update(_checkout_files())


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    shutil.rmtree(_STATE, ignore_errors=True)
    written = sorted(_checkout_files() - _checkout_before)
    if written:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        text = "the run left files in the checkout (write them under tmp_path): " + ", ".join(written)
        if reporter is not None:
            reporter.write_line(text, red=True)
        else:
            print(text, file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    _running.append(item)
    try:
        yield
    finally:
        _running.pop()


_execute_child = subprocess.Popen._execute_child  # type: ignore[attr-defined]


def _only_in_slow_tests(self: subprocess.Popen[Any], args: Any, *rest: Any, **options: Any) -> Any:
    if _running and _running[-1].get_closest_marker("slow") is None:
        pytest.fail(f"{_running[-1].nodeid} starts a process ({str(args)[:120]}): mark it slow "
                    "(see tests/conftest.py), so the everyday loop stays quick", pytrace=False)
    return _execute_child(self, args, *rest, **options)


subprocess.Popen._execute_child = _only_in_slow_tests  # type: ignore[attr-defined]


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

    def settle_key(self, *, alone: bool = False) -> None:
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
