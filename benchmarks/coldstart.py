"""Part 12: cold start, from a stdio server's process start to its first answer.

A stdio host starts the server once per session and waits for the answer to its first
request before it can list a tool, so that wait is what every session pays first. Each
candidate is a fresh process started the way a host starts it, with the first request
written at once on its stdin; the figure is the wall time from just before the process is
created to the first line on its stdout (checked: the answer to that request), and beside
it the CPU the process used in its whole life (start, answer, exit at the end of stdin).

- ``mrtr serve --stdio``: the virtualenv's ``mrtr`` script serving the bundled example
  server (what ``mrtr install`` writes into a host's configuration);
- the official SDK ``mcp==2.3.0``: ``MCPServer.run("stdio")`` of the suite's SDK peer
  (``benchmarks/sdk_peer.py stdio``), in its own virtualenv;
- ``python -c pass``: the interpreter alone, to its exit: the floor under both;
- ``mrtr --help`` and ``mrtr serve --help``, to their exit: what the command line costs
  before it serves (it imports the module of the command it runs alone);
- with ``--before PATH``: the same script with another checkout's ``mrtr`` first on
  ``PYTHONPATH``, for a before/after in the same run.

Each server is timed with the two first requests a host sends, by era: ``initialize``
(a 2025-era host) and ``server/discover`` (a 2026-07-28 host). After one start of each
candidate that is not counted (byte-code caches written, files in the page cache), the
candidates take their turns A B C, C B A, ...; the figures are the medians.

Then, once per server, ``python -X importtime`` of the same start: the time its imports
took (the sum of each module's own time) and the ten top-level imports that cost most,
which is where a cold start's time goes.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .common import ROOT, clean_env, log, sdk_missing, sdk_python, turn_order

CLIENT = {"name": "bench-coldstart", "version": "1"}
FIRST = {
    "initialize": {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                   "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": CLIENT}},
    "server/discover": {"jsonrpc": "2.0", "id": 1, "method": "server/discover",
                        "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                             "io.modelcontextprotocol/clientInfo": CLIENT,
                                             "io.modelcontextprotocol/clientCapabilities": {}}}},
}
"""The first request of a host of each era."""

MRTR, SDK, FLOOR = "mrtr serve --stdio", "SDK mcp 2.3.0 MCPServer stdio", "python -c pass"
HELP = (("--help",), ("serve", "--help"))
"""The command line alone: its help, and a command's, to the process's exit."""


def mrtr_command(*words: str) -> list[str]:
    """How a host starts ``mrtr serve --stdio`` (or ``mrtr WORDS``): the virtualenv's ``mrtr`` script."""
    words = words or ("serve", "--stdio")
    script = Path(sys.executable).parent / "mrtr"
    if script.exists():
        return [str(script), *words]
    return [sys.executable, "-m", "mrtr", *words]


class Candidate:
    """One way to start a server: its command, environment and the request it answers first (``None``: the floor).

    ``profiled`` is the same start under ``python -X importtime`` (a script's interpreter
    needs the flag, so the ``mrtr`` script is profiled as ``python -m mrtr``).
    """

    def __init__(self, command: list[str], env: dict[str, str], first: str | None, profiled: list[str]) -> None:
        self.command = command
        self.env = env
        self.first = first
        self.profiled = profiled

    def start(self, workdir: str) -> tuple[float, float]:
        """One cold start: seconds to the first answer (to the exit for the floor) and CPU seconds of the process."""
        line = b"" if self.first is None else json.dumps(FIRST[self.first]).encode() + b"\n"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        process = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL, env=self.env, cwd=workdir)
        assert process.stdin is not None and process.stdout is not None
        try:
            if self.first is None:
                process.stdin.close()
                process.wait(timeout=60)
                elapsed = time.perf_counter() - started
            else:
                process.stdin.write(line)
                process.stdin.flush()
                answer = process.stdout.readline()
                elapsed = time.perf_counter() - started
                _check(self.first, answer, self.command)
                process.stdin.close()
                process.wait(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
            process.stdout.close()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return elapsed, cpu


def _check(first: str, answer: bytes, command: list[str]) -> None:
    """The first line must be the answer to the first request, a result of its kind."""
    try:
        message = json.loads(answer)
    except ValueError:
        raise RuntimeError(f"{' '.join(command)} answered {first} with {answer[:200]!r}") from None
    result = message.get("result") if isinstance(message, dict) else None
    if message.get("id") != 1 or not isinstance(result, dict) or \
            ("serverInfo" not in result if first == "initialize" else "supportedVersions" not in result):
        raise RuntimeError(f"{' '.join(command)} answered {first} with {answer[:300]!r}")


def candidates(install_sdk: bool, before: Path | None) -> tuple[dict[str, Candidate], dict[str, str]]:
    """Every candidate of this run, and what was skipped and why."""
    # Without PYTHONDONTWRITEBYTECODE, so the start not counted writes the byte-code caches an
    # installed package has (pip writes them), whatever the environment of this run says.
    env = {key: value for key, value in clean_env().items() if key != "PYTHONDONTWRITEBYTECODE"}
    here = [sys.executable, "-X", "importtime", "-m", "mrtr", "serve", "--stdio"]
    earlier = {} if before is None else {**env, "PYTHONPATH": str(before.resolve())}
    found: dict[str, Candidate] = {}
    skipped: dict[str, str] = {}
    for first in FIRST:
        found[f"{MRTR}, {first}"] = Candidate(mrtr_command(), env, first, here)
        if before is not None:
            found[f"{MRTR}, before ({before.name}), {first}"] = Candidate(mrtr_command(), earlier, first, here)
    for words in HELP:
        profiled = [sys.executable, "-X", "importtime", "-m", "mrtr", *words]
        found[f"mrtr {' '.join(words)}"] = Candidate(mrtr_command(*words), env, None, profiled)
        if before is not None:
            found[f"mrtr {' '.join(words)} (before: {before.name})"] = Candidate(
                mrtr_command(*words), earlier, None, profiled)
    python = sdk_python(install=install_sdk)
    if python is None:
        skipped["sdk"] = sdk_missing(install_sdk)
        log(f"part 12: SKIPPED the official SDK: {skipped['sdk']}")
    else:
        peer = [str(ROOT / "benchmarks" / "sdk_peer.py"), "stdio"]
        for first in FIRST:
            found[f"{SDK}, {first}"] = Candidate([str(python), *peer], env, first,
                                                 [str(python), "-X", "importtime", *peer])
    found[FLOOR] = Candidate([sys.executable, "-c", "pass"], env, None,
                             [sys.executable, "-X", "importtime", "-c", "pass"])
    return found, skipped


def import_profile(candidate: Candidate, workdir: str, top: int = 10) -> dict[str, Any]:
    """``python -X importtime`` of one start to the first answer: total import time and the top-level imports."""
    line = b"" if candidate.first is None else json.dumps(FIRST[candidate.first]).encode() + b"\n"
    done = subprocess.run(candidate.profiled, input=line, capture_output=True, env=candidate.env, cwd=workdir,
                          timeout=120, check=False)
    own, modules = 0, 0
    tops: list[tuple[str, int]] = []
    for text in done.stderr.decode(errors="replace").splitlines():
        # "import time: <self us> | <cumulative us> | <name, indented two spaces per level of nesting>"
        if not text.startswith("import time:") or text.startswith("import time: self"):
            continue
        self_us, cumulative_us, name = text[len("import time:"):].split("|", 2)
        own += int(self_us)
        modules += 1
        if not name.startswith("  "):
            tops.append((name.strip(), int(cumulative_us)))
    tops.sort(key=lambda item: -item[1])
    return {"imports_ms": own / 1000, "modules": modules,
            "top": [{"module": name, "ms": us / 1000} for name, us in tops[:top]]}


def run(*, quick: bool, install_sdk: bool = True, before: Path | None = None) -> dict[str, Any]:
    """Part 12's results: per candidate, the median wall time to the first answer and the process's CPU."""
    turns = 3 if quick else 15
    load_before = " ".join(f"{x:.1f}" for x in os.getloadavg())
    found, skipped = candidates(install_sdk, before)
    rows: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="mrtr-bench-coldstart-") as workdir:
        log(f"part 12: cold start of {len(found)} candidates, one start each not counted, then {turns} turns")
        for candidate in found.values():
            candidate.start(workdir)
        walls: dict[str, list[float]] = {name: [] for name in found}
        cpus: dict[str, list[float]] = {name: [] for name in found}
        for turn in range(turns):
            for name in turn_order(list(found), turn):
                wall, cpu = found[name].start(workdir)
                walls[name].append(wall)
                cpus[name].append(cpu)
        for name in found:
            ordered = sorted(walls[name])
            rows[name] = {"ms": statistics.median(ordered) * 1e3, "min_ms": ordered[0] * 1e3,
                          "max_ms": ordered[-1] * 1e3, "spread": ordered[-1] / ordered[0],
                          "cpu_ms": statistics.median(cpus[name]) * 1e3}
        log("part 12: -X importtime of each start")
        imports = {name: import_profile(candidate, workdir) for name, candidate in found.items()
                   if candidate.first in ("server/discover", None)}
    for name, row in rows.items():
        sdk = rows.get(f"{SDK}, {name.rsplit(', ', 1)[-1]}")
        row["sdk_over_this"] = sdk["ms"] / row["ms"] if sdk and name != FLOOR and not name.startswith(SDK) else None
    return {"turns": turns, "rows": rows, "imports": imports, "skipped": skipped,
            "load": {"before": load_before, "after": " ".join(f"{x:.1f}" for x in os.getloadavg())}}


def main() -> None:
    """``python -m benchmarks.coldstart [--quick]``: part 12 alone, printed."""
    result = run(quick="--quick" in sys.argv)
    for name, row in result["rows"].items():
        ratio = f"  SDK / this {row['sdk_over_this']:.2f}x" if row["sdk_over_this"] else ""
        print(f"{name:<60} {row['ms']:7.1f} ms (CPU {row['cpu_ms']:6.1f} ms, spread {row['spread']:.2f}){ratio}")
    for name, profile in result["imports"].items():
        print(f"{name}: imports {profile['imports_ms']:.1f} ms in {profile['modules']} modules; "
              + ", ".join(f"{top['module']} {top['ms']:.1f}" for top in profile["top"][:6]))


if __name__ == "__main__":
    main()
