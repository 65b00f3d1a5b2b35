"""What every part of the suite shares: interleaved timing, ratios, processes and ports.

In-process timings are CPU time of the thread that does the work
(``time.thread_time``): on a machine whose cores other processes share, wall-clock time
of a tight loop mostly measures the scheduler. Timings are never compared across runs. Each comparison takes its candidates in turns
(A B C, C B A, ...), one batch of calls per turn, so a burst of load from elsewhere on
the machine lands on all of them alike; the figure reported is the median per call of
each candidate's batches, and the spread between batches says how noisy the run was.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SDK_VENV = ROOT / ".cache" / "interop-venv"
SDK_PYTHON = SDK_VENV / "bin" / "python"
SDK_REQUIREMENTS = ROOT / "tests" / "interop" / "requirements.txt"
SDK_VERSION = "2.3.0"


CLOCK = time.thread_time


def calibrate(fn: Callable[[], Any], target_s: float) -> int:
    """How many calls of ``fn`` take about ``target_s`` seconds of CPU (at least one)."""
    return sized(Local(fn).batch, target_s)


def sized(per_call: Callable[[int], float], target_s: float, *, first: int = 1, most: int = 1 << 22) -> int:
    """How many calls make a batch of about ``target_s`` seconds, ``per_call(count)`` timing ``count`` of them.

    Batches grow fourfold from ``first`` calls until one takes a quarter of the target (or
    holds ``most``): timing that batch is the estimate.
    """
    count = first
    while True:
        seconds = per_call(count)
        if seconds * count >= target_s / 4 or count >= most:
            return max(1, int(target_s / max(seconds, 1e-9)))
        count *= 4


def summary(samples: list[float]) -> dict[str, float]:
    """Median, spread (max/min of the batch medians) and the samples themselves."""
    ordered = sorted(samples)
    return {
        "median": statistics.median(ordered),
        "min": ordered[0],
        "max": ordered[-1],
        "spread": ordered[-1] / ordered[0] if ordered[0] > 0 else float("inf"),
        "samples": ordered,
    }


class Local:
    """A candidate timed in this process: ``fn`` is one call."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn

    def calibrate(self, target_s: float) -> int:
        """How many calls make a batch of about ``target_s`` seconds of CPU."""
        return sized(self.batch, target_s)

    def batch(self, n: int) -> float:
        """Seconds of CPU per call over ``n`` calls."""
        fn = self.fn
        start = CLOCK()
        for _ in range(n):
            fn()
        return (CLOCK() - start) / n


def interleave(candidates: Mapping[str, Any], *, pairs: int, batch_s: float) -> dict[str, dict[str, Any]]:
    """Seconds per call of each candidate, from ``pairs`` interleaved batches each.

    A candidate is a callable (one call) or an object with ``calibrate(target_s) -> n``
    and ``batch(n) -> seconds per call`` (for one timed in another process). Each
    candidate's batch size is calibrated once so that a batch takes about ``batch_s``;
    the turns then go A B C, C B A, A B C, ... ``pairs`` times (reversing every other
    turn so no candidate always runs right after the same neighbour).
    """
    runners = {name: c if hasattr(c, "batch") else Local(c) for name, c in candidates.items()}
    sizes = {name: runner.calibrate(batch_s) for name, runner in runners.items()}
    samples: dict[str, list[float]] = {name: [] for name in runners}
    for turn in range(pairs):
        for name in turn_order(list(runners), turn):
            samples[name].append(runners[name].batch(sizes[name]))
    return {name: summary(values) for name, values in samples.items()}


def drive(coro: Any) -> Any:
    """Run a coroutine that never suspends (an inline sync handler) without an event loop."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError("the coroutine suspended; it needs an event loop")


def serve_batches(calls: Mapping[str, Callable[[], Any]]) -> None:
    """A child process's side of :class:`BatchChild`: name ``calls``, then time batches of one on demand.

    Each call is warmed up first. Then every line read from stdin, ``[name, count]``,
    runs that call ``count`` times and prints its CPU time per call in seconds. Imports
    nothing of ``mrtr``, so a child can import it before the copy of ``mrtr`` it times.
    """
    for call in calls.values():
        for _ in range(20):
            call()
    print(json.dumps(list(calls)), flush=True)
    for line in sys.stdin:
        name, count = json.loads(line)
        call = calls[name]
        started = CLOCK()
        for _ in range(count):
            call()
        print(repr((CLOCK() - started) / count), flush=True)


class BatchChild:
    """A child process (``argv`` run in ``cwd``) whose script ends in :func:`serve_batches`: its calls, timed there."""

    def __init__(self, argv: list[str], cwd: Path, label: str) -> None:
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=cwd)
        assert self.process.stdout is not None
        ready = self.process.stdout.readline()
        if not ready:
            stop(self.process)
            raise RuntimeError(f"the timing child for {label} did not start")
        self.calls: list[str] = json.loads(ready)

    def batch(self, name: str, count: int) -> float:
        """Seconds of CPU per call of ``name`` over ``count`` calls, in the child."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps([name, count]) + "\n")
        self.process.stdin.flush()
        return float(self.process.stdout.readline())

    def candidate(self, name: str) -> BatchCandidate:
        """The call ``name`` as a candidate for :func:`interleave`."""
        return BatchCandidate(self, name)

    def close(self) -> None:
        """End the child (its stdin closed, then stopped)."""
        if self.process.stdin is not None:
            self.process.stdin.close()
        stop(self.process)


class BatchCandidate:
    """One call of a :class:`BatchChild`, for :func:`interleave`."""

    def __init__(self, child: BatchChild, name: str) -> None:
        self.child = child
        self.name = name

    def calibrate(self, target_s: float) -> int:
        """How many calls make a batch of about ``target_s`` seconds of the child's CPU."""
        return sized(self.batch, target_s, first=16, most=1 << 20)

    def batch(self, count: int) -> float:
        """Seconds of the child's CPU per call over ``count`` calls."""
        return self.child.batch(self.name, count)


def turn_order(names: list[str], turn: int) -> list[str]:
    """The candidates in the order of one turn: as given, reversed every other turn."""
    return names if turn % 2 == 0 else names[::-1]


def free_port() -> int:
    """A port nobody listens on right now (the kernel picks it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen[Any] | None = None, timeout: float = 30.0) -> None:
    """Poll until something accepts connections on ``port``; fail early if ``process`` died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode} before listening on {port}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listening on {port} after {timeout} s")


def stop(process: subprocess.Popen[Any], timeout: float = 10) -> None:
    """Terminate one process we started, by its handle, and reap it (killed after ``timeout`` seconds)."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def rss_kib(pid: int) -> int:
    """Resident set size of ``pid`` in KiB (Linux /proc)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (Linux /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry))
    return sorted(found)


def cpu_seconds(pids: list[int]) -> float:
    """User plus system CPU seconds used so far by ``pids`` (Linux /proc)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / ticks


def sdk_python(*, install: bool) -> Path | None:
    """The python of the official SDK's virtualenv (``.cache/interop-venv``), or ``None``.

    The same virtualenv the interop tests use. With ``install`` it is created from
    ``tests/interop/requirements.txt`` when missing (this needs the package registry);
    without it, or when that fails, the caller skips the SDK and says so.
    """
    def ready() -> bool:
        if not SDK_PYTHON.exists():
            return False
        probe = subprocess.run(
            [str(SDK_PYTHON), "-c", f"import importlib.metadata as m; assert m.version('mcp') == {SDK_VERSION!r}"],
            capture_output=True, env=clean_env(), timeout=120, check=False)
        return probe.returncode == 0

    if ready():
        return SDK_PYTHON
    if not install:
        return None
    if not SDK_PYTHON.exists():
        made = subprocess.run([sys.executable, "-m", "venv", str(SDK_VENV)], capture_output=True, check=False)
        if made.returncode != 0:
            return None
    subprocess.run([str(SDK_PYTHON), "-m", "pip", "install", "-q", "--disable-pip-version-check", "-r",
                    str(SDK_REQUIREMENTS)], capture_output=True, env=clean_env(), timeout=900, check=False)
    return SDK_PYTHON if ready() else None


def sdk_missing(install: bool) -> str:
    """Why the official SDK's rows are skipped."""
    if install:
        return "mcp==2.3.0 could not be installed into .cache/interop-venv (is the package registry reachable?)"
    return "mcp==2.3.0 is not in .cache/interop-venv and --no-sdk-install forbids installing it"


def clean_env() -> dict[str, str]:
    """The environment without anything pointing at our virtualenv (for the SDK's)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def log(message: str) -> None:
    """Progress on stderr, so stdout stays the report."""
    print(message, file=sys.stderr, flush=True)
