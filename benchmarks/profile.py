"""Where a request's time goes in ``mrtr serve`` with its defaults: py-spy samples under wrk load.

Usage: ``python -m benchmarks.profile [--flow plain|ask|legacy] [--seconds S] [--before PATH] [--raw DIR]``
(needs wrk and the ``bench`` extra's py-spy; py-spy reads another process's memory, which
takes root or ``ptrace`` rights)

``mrtr serve benchmarks.apps:server`` runs as a user starts it (one worker, access
lines on, text, to a file) while wrk drives it on 8 keep-alive connections: the plain
``tools/call`` of a tool that asks nothing, or the one-question conversation. ``legacy``
profiles part 8's server instead (:func:`benchmarks.legacy_http.serve`, one worker) under
part 8's load generator: whole one-question conversations of 2025 sessions (wrk cannot hold
a session). py-spy
samples the server's Python stacks (pausing it for each sample, so every stack is
whole) and each sample is put in the first group its stack matches:

- the socket system calls (``send``, ``recv``, ``epoll_wait``): the Python frame that
  made the call is the one sampled, so its own time is the kernel's;
- the access line (everything under ``AccessRecord.finish``), tracing spans;
- the HTTP parser (llhttp and its callbacks), the header rules and the response head;
- the MCP server (dispatch, the token carrier, the replay core, result shaping) and the
  JSON of the message;
- trio's scheduling (the run loop, cancel scopes, checkpoints), and the rest of the
  exchange and the connection loop.

Shares are of the samples taken while the server ran, so they are comparable between a
before and an after only as shares; the instruction counts of
:mod:`benchmarks.instructions` are the absolute measure.
"""

from __future__ import annotations

import argparse
import collections
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from . import wrk
from .common import ROOT, free_port, log, stop, wait_for_port
from .instructions import _LAUNCH
from .loadgen import META

# (group, pattern a frame of the stack must match); the first group matching a stack takes the sample.
# The system-call groups look at the leaf frame only: its own time is the call.
_LEAF_GROUPS = [
    ("socket system calls (send, recv, epoll)",
     re.compile(r"^(_Connection\.(write|_recv|_wait_idle|watch_disconnect|fail|linger)|EpollIOManager\.(get_events|"
                r"_epoll_wait)|_accept_loop) ")),
]
_STACK_GROUPS = [
    ("access line (mrtr.access)", re.compile(r"^AccessRecord\.finish |^_?AccessLog|^AccessSink|^_flusher")),
    ("tracing spans (otel extra installed, no provider)", re.compile(r"^(start_span|end_span) ")),
    ("HTTP parser (llhttp and its callbacks)", re.compile(r"^_Connection\.(feed|on_[a-z_]+) ")),
    ("header rules and response head", re.compile(
        r"^(RequestHeaders\.|HostPolicy\.|check_headers |is_json |accepts_json_and_sse |identity_encoded |_head |"
        r"_json_headers |_Tracked\.respond |_Connection\.respond |_Connection\._headers_out )")),
    ("JSON of the message (parse, encode)", re.compile(r"^(parse_message|encode_response|encode) ")),
    ("MCP server (dispatch, carrier, replay, results)", re.compile(r"^(Server|LegacyEra)\.respond ")),
]
# The 2025 session machinery is judged like the rest: by the innermost frame of this project's code,
# once trio's own frames (below it) have taken theirs, so trio's scheduling is not counted as sessions.
_SESSIONS = "2025 sessions and their event streams"
_SESSION_FRAME = re.compile(r"^(HttpSessions\.|EventStream\.|_Session\.|SessionRegistry\.|(pump|_write|_watch) "
                            r"\((.*/)?mrtr/transports/http/streams\.py:)")
_TRIO = "trio scheduling (run loop, cancel scopes, checkpoints)"
_REST = "exchange and connection loop (the rest)"
_OURS = re.compile(r"\((.*/)?(mrtr|benchmarks)/[^:]*\.py:")  # py-spy names files by their path under sys.path
_THEIRS = re.compile(r"\((.*/)?(trio|outcome)/|\(.*contextlib\.py:")


def group(stack: list[str]) -> str:
    """The group one sampled stack (outermost frame first) counts for."""
    for name, pattern in _LEAF_GROUPS:
        if pattern.match(stack[-1]):
            return name
    for name, pattern in _STACK_GROUPS:
        if any(pattern.match(frame) for frame in stack):
            return name
    # Past the last frame of this project's code, whatever runs is trio's (or the run loop itself).
    ours = [index for index, frame in enumerate(stack) if _OURS.search(frame)]
    if not ours or any(_THEIRS.search(frame) for frame in stack[ours[-1] + 1:]):
        return _TRIO
    if _SESSION_FRAME.match(stack[ours[-1]]):
        return _SESSIONS
    return _REST


def shares(raw: str) -> dict[str, float]:
    """The share of samples per group, from py-spy's ``raw`` (collapsed stacks) output."""
    counts: collections.Counter[str] = collections.Counter()
    for line in raw.splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = [frame.strip() for frame in stack.split(";") if frame.strip()]
        if frames:
            counts[group(frames)] += int(count)
    total = sum(counts.values()) or 1
    return {name: counts[name] / total
            for name, _ in [*_LEAF_GROUPS, *_STACK_GROUPS, (_SESSIONS, None), (_TRIO, None), (_REST, None)]}


def profile(mrtr_root: Path, flow: str, seconds: float, raw_out: Path | None) -> tuple[dict[str, float], float]:
    """Group shares and the load's rate (wrk's; the Python generator's for ``legacy``) for the checkout at ``mrtr_root``."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="mrtr-profile-") as tmp:
        errors = open(Path(tmp) / "stderr.log", "wb")  # the access lines go to a file, as under a supervisor
        if flow == "legacy":
            command = [sys.executable, "-c", _LAUNCH_LEGACY, str(mrtr_root), str(port)]
        else:
            command = [sys.executable, "-c", _LAUNCH, str(mrtr_root), "serve", "benchmarks.apps:server", "--port",
                       str(port)]
        server = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=errors)
        try:
            wait_for_port(port, server)
            load_command, rate_of = _load(flow, port, seconds, Path(tmp), server.pid)
            load = subprocess.Popen(load_command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
            raw_path = Path(tmp) / "samples.txt"
            try:
                subprocess.run([str(_tool("py-spy")), "record", "-p", str(server.pid), "-r", "250", "-d",
                                str(round(seconds)), "-f", "raw", "-o", str(raw_path)], check=True,
                               capture_output=True)
            except BaseException:
                load.kill()
                load.wait()
                raise
            output, _ = load.communicate(timeout=60)
        finally:
            stop(server)
            errors.close()
        raw = raw_path.read_text()
        if raw_out is not None:
            raw_out.mkdir(parents=True, exist_ok=True)
            (raw_out / f"{flow}-{mrtr_root.name}.txt").write_text(raw)
    return shares(raw), rate_of(output)


_LAUNCH_LEGACY = ("import sys; sys.path.insert(0, sys.argv.pop(1)); from benchmarks.legacy_http import serve; "
                  "serve(int(sys.argv[1]), 1)")
_LEGACY_LOAD = ("import sys, trio; from benchmarks.legacy_http import load; "
                "print(trio.run(lambda: load(int(sys.argv[1]), 'ask', concurrency=8, "
                "seconds=float(sys.argv[2])))['per_second'])")


def _load(flow: str, port: int, seconds: float, tmp: Path, pid: int) -> tuple[list[str], Callable[[str], float]]:
    """The server warmed up with ``flow``; the command that loads it while py-spy samples, and how its rate reads.

    ``legacy`` is part 8's Python load generator holding 2025 sessions, 8 at a time (wrk cannot
    hold a session); the others are wrk on 8 keep-alive connections.
    """
    duration = round(seconds) + 2
    if flow == "legacy":
        subprocess.run([sys.executable, "-c", _LEGACY_LOAD, str(port), "2"], cwd=ROOT, check=True,
                       capture_output=True)
        return ([sys.executable, "-c", _LEGACY_LOAD, str(port), str(duration)],
                lambda output: float(output.strip() or "nan"))
    if flow == "plain":
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "ok"}, "_meta": META}}
        script = wrk.plain_script(call, "echo")
    else:
        script = wrk.conversation_script("ask", 1)
    wrk.run(port, script, 2.0, 8, [pid])
    script_path = tmp / "flow.lua"
    script_path.write_text(script)

    def rate_of(output: str) -> float:
        found = re.search(r"Requests/sec:\s+([\d.]+)", output)
        return float(found.group(1)) if found else float("nan")

    return (["wrk", "-t", "1", "-c", "8", "-d", f"{duration}s", "-s", str(script_path),
             f"http://127.0.0.1:{port}/mcp"], rate_of)


def _tool(name: str) -> Path | None:
    """A command on the PATH or beside this interpreter (a virtualenv's ``bin``, where pip puts py-spy)."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return beside
    found = shutil.which(name)
    return Path(found) if found else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.profile", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--flow", choices=("plain", "ask", "legacy"), default="plain")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--before", type=Path, metavar="PATH", help="also profile another checkout's mrtr")
    parser.add_argument("--raw", type=Path, metavar="DIR", help="keep py-spy's collapsed stacks there")
    args = parser.parse_args(argv)
    for tool in ("wrk", "py-spy"):
        if _tool(tool) is None:
            print(f"{tool} is needed (wrk: apt-get install wrk; py-spy: pip install -e '.[bench]')", file=sys.stderr)
            return 1
    columns = [("this checkout", ROOT)] + ([(f"before ({args.before.name})", args.before.resolve())]
                                           if args.before else [])
    results = {}
    for label, root in columns:
        log(f"profile: {label}, {args.flow}, {args.seconds:g} s")
        results[label] = profile(root, args.flow, args.seconds, args.raw)
    labels = list(results)
    print("| where the time goes | " + " | ".join(labels) + " |")
    print("|---|" + "---|" * len(labels))
    for name in results[labels[0]][0]:
        print(f"| {name} | " + " | ".join(f"{results[label][0][name]:.0%}" for label in labels) + " |")
    rate = "conversations/s under the profiler (Python)" if args.flow == "legacy" else \
        "requests/s under the profiler (wrk)"
    print(f"| {rate} | " + " | ".join(f"{results[label][1]:,.0f}" for label in labels) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
