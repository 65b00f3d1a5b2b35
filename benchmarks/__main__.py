"""``python -m benchmarks``: run the suite, write the results, the tables and the plots.

A full run writes ``docs/performance/results.json`` and the PNG plots next to it, and
regenerates the tables of ``docs/performance.md``. ``--quick`` runs a reduced version
(under a minute) into ``.cache/bench-quick/`` and leaves the documents alone, so a
quick run never replaces the recorded figures; CI runs it so the suite cannot rot. It
leaves out the parts of :data:`NOT_QUICK` unless ``--only`` names them.
No part asserts a speed: thresholds are read off the report, never enforced here.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from .common import ROOT

PARTS = ("rounds", "conversations", "http", "soak", "tasks", "once", "sessions", "legacy", "nodes", "middleware",
         "proxy", "adoption", "coldstart")

NOT_QUICK = ("middleware", "coldstart")
"""Parts ``--quick`` leaves out unless ``--only`` names them: the quick run is already past its minute
(``--quick --only middleware`` runs that part alone, in about 12 s; ``--quick --only coldstart`` in about 15 s)."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a reduced run, under a minute; documents untouched")
    parser.add_argument("--only", default=None, help=f"comma-separated parts of {', '.join(PARTS)} (default: all; "
                                                     f"with --quick, all but {', '.join(NOT_QUICK)})")
    parser.add_argument("--out", type=Path, help="where results.json and the plots go")
    parser.add_argument("--no-sdk-install", action="store_true",
                        help="use the official SDK only if .cache/interop-venv already has it (never reach a registry)")
    parser.add_argument("--before", type=Path, metavar="PATH",
                        help="also serve another checkout's mrtr (native, 1 worker) in the HTTP turns, time it "
                             "without middleware in the middleware part and start it in the cold-start part, "
                             "for an A/B")
    parser.add_argument("--merge", action="store_true",
                        help="keep the parts of the recorded results.json this run leaves out (each noted with its run)")
    parser.add_argument("--docs", action=argparse.BooleanOptionalAction, default=None,
                        help="regenerate the tables of docs/performance.md (default: on for a full run)")
    args = parser.parse_args(argv)
    if args.only is None:
        parts = [part for part in PARTS if not (args.quick and part in NOT_QUICK)]
    else:
        parts = [part.strip() for part in args.only.split(",") if part.strip()]
    unknown = set(parts) - set(PARTS)
    if unknown:
        parser.error(f"unknown part(s): {', '.join(sorted(unknown))}")
    out = args.out or (ROOT / ".cache" / "bench-quick" if args.quick else ROOT / "docs" / "performance")
    write_docs = (not args.quick) if args.docs is None else args.docs
    install = not args.no_sdk_install

    results: dict[str, Any] = {
        "quick": args.quick,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": f"{platform.python_implementation()} {platform.python_version()} on {platform.machine()}, "
                   f"{os.cpu_count()} cores",
        "load_before": " ".join(f"{x:.1f}" for x in os.getloadavg()),
        "parts": parts,
    }
    started = time.monotonic()
    if "rounds" in parts:
        from . import replay_overhead
        results["rounds"] = replay_overhead.run(quick=args.quick, install_sdk=install)
    if "conversations" in parts:
        from . import conversations
        results["conversations"] = conversations.run(quick=args.quick)
    if "http" in parts:
        from . import http_throughput
        results["http"] = http_throughput.run(quick=args.quick, install_sdk=install, before=args.before)
    if "soak" in parts:
        from . import soak
        results["soak"] = soak.run(quick=args.quick)
    if "tasks" in parts:
        from . import tasks
        results["tasks"] = tasks.run(quick=args.quick)
    if "once" in parts:
        from . import once
        results["once"] = once.run(quick=args.quick)
    if "sessions" in parts:
        from . import sessions
        results["sessions"] = sessions.run(quick=args.quick)
    if "proxy" in parts:
        from . import proxy_overhead
        results["proxy"] = proxy_overhead.run(quick=args.quick)
    if "legacy" in parts:
        from . import legacy_http
        results["legacy"] = legacy_http.run(quick=args.quick, install_sdk=install)
    if "nodes" in parts:
        from . import nodes
        results["nodes"] = nodes.run(quick=args.quick)
    if "middleware" in parts:
        from . import middleware
        results["middleware"] = middleware.run(quick=args.quick, before=args.before, install_sdk=install)
    if "adoption" in parts:
        from . import adoption
        results["adoption"] = adoption.run(quick=args.quick)
    if "coldstart" in parts:
        from . import coldstart
        results["coldstart"] = coldstart.run(quick=args.quick, install_sdk=install, before=args.before)
    results["load_after"] = " ".join(f"{x:.1f}" for x in os.getloadavg())
    results["seconds"] = round(time.monotonic() - started, 1)

    out.mkdir(parents=True, exist_ok=True)
    if args.merge and (out / "results.json").exists():
        results = merge(json.loads((out / "results.json").read_text()), results)
    (out / "results.json").write_text(json.dumps(results, indent=1, sort_keys=False) + "\n")
    from . import report

    written = report.plots(results, out)
    if write_docs:
        report.update_document(ROOT / "docs" / "performance.md", results)
    print(summary(results))
    print(f"results: {out / 'results.json'}; plots: {', '.join(p.name for p in written)}"
          + ("; docs/performance.md regenerated" if write_docs else ""))
    misrouted = misrouted_answers(results)
    if misrouted:
        # Never noise: a conversation's result carried another conversation's answers.
        print(f"FAILED: {misrouted} conversation(s) got answers that were not their own", file=sys.stderr)
        return 1
    return 0


def merge(recorded: dict[str, Any], results: dict[str, Any]) -> dict[str, Any]:
    """``results`` with the parts only ``recorded`` has, each noted under ``earlier`` with the run that measured it.

    So one part can be measured again (``--only http --merge``) without losing the rest of
    the record, and the report still says when and under what load each figure was taken.
    """
    merged = dict(results)
    earlier = dict(recorded.get("earlier", {}))
    for part in PARTS:
        if part in results or part not in recorded:
            continue
        merged[part] = recorded[part]
        earlier[part] = earlier.get(part) or {key: recorded.get(key) for key in ("started", "load_before",
                                                                                "load_after", "quick")}
    merged["earlier"] = {part: run for part, run in earlier.items() if part not in results}
    return merged


def misrouted_answers(results: dict[str, Any]) -> int:
    """Conversations whose final result was not made of their own answers, over all parts."""
    count = results.get("soak", {}).get("misrouted", 0)
    count += sum(row["misrouted"] for row in results.get("tasks", {}).get("stores", {}).values())
    count += sum(row["misrouted"] for row in results.get("nodes", {}).get("scaling", {}).values())
    for rows in results.get("http", {}).get("flows", {}).values():
        count += sum(row["misrouted"] for row in rows.values())
    count += sum(row["misrouted"] for row in results.get("legacy", {}).get("flows", {}).values())
    count += results.get("adoption", {}).get("soak", {}).get("misrouted", 0)
    return count


def summary(results: dict[str, Any]) -> str:
    """The headline figures, for the terminal (and CI's log)."""
    from . import report

    lines = [f"benchmarks ({'quick' if results['quick'] else 'full'} run, {results['seconds']} s, "
             f"{results['machine']})"]
    lines.append(report.table_goals(results))
    for part in ("rounds", "http", "tasks", "once", "legacy", "coldstart"):
        for what, why in results.get(part, {}).get("skipped", {}).items():
            lines.append(f"SKIPPED in {part}: {what}: {why}")
    nodes = results.get("nodes")
    if nodes and not nodes["measured"]:
        lines.append(f"nodes: not measured: {nodes['reason']}")
    elif nodes:
        scaling = nodes["scaling"]
        lines.append("nodes behind haproxy: " + ", ".join(
            f"{count} {row['per_second']:.0f}/s ({row['ratio']:.2f}x)" for count, row in scaling.items())
            + f"; notification across nodes median {nodes['latency']['median_ms']:.1f} ms, "
              f"p99 {nodes['latency']['p99_ms']:.1f} ms")
    adopted = results.get("adoption")
    if adopted:
        lines.append(report.summary_adoption(adopted))
    tasks = results.get("tasks")
    if tasks and not tasks["measured"]:
        lines.append(f"tasks: not measured: {tasks['reason']}")
    for store, row in results.get("once", {}).get("stores", {}).items():
        lines.append(f"once=True on {store}: a final round {row['once_ratio']:.1f}x the same round without it "
                     f"(+{(row['timings']['once']['median'] - row['timings']['plain']['median']) * 1e6:.0f} µs), "
                     f"a retry {row['retry_ratio']:.1f}x; a record {row['record_bytes']} bytes")
    middleware = results.get("middleware")
    if middleware:
        rows = middleware["in_process"]
        line = ("middleware, a plain tools/call in process: " + ", ".join(
            f"{name} {row['us']:.1f} µs ({row['ratio']:.2f}x)" for name, row in rows.items()))
        if middleware.get("http"):
            line += "; over HTTP, server CPU: " + ", ".join(
                f"{name} {row['cpu_us']:.0f} µs ({row['cpu_ratio']:.2f}x)" for name, row in middleware["http"].items())
        lines.append(line)
    coldstart = results.get("coldstart")
    if coldstart:
        lines.append("cold start to the first answer (median wall): " + ", ".join(
            f"{name} {row['ms']:.0f} ms" for name, row in coldstart["rows"].items()))
    lines.append((report.table_noise(results) + f" Load average {results['load_before']} -> "
                  f"{results['load_after']}.").strip())
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
