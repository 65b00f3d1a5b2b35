"""Tables for ``docs/performance.md`` and the PNG plots, from one result file.

The document keeps its prose; each table sits between ``<!-- bench:NAME -->`` and
``<!-- /bench:NAME -->`` and is replaced on every full run, so the figures and the text
around them cannot drift apart silently (a table the results lack says so).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

US = 1e6


def _n(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.{digits}f}"


def _x(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def replay_fit(ns: list[float], ys: list[float]) -> tuple[float, float]:
    """Least squares of a conversation's cost as rounds that each cost ``r`` plus ``s`` per recorded answer.

    N questions take N + 1 rounds and round j replays j - 1 answers, so the total is
    ``r (N + 1) + s N (N + 1) / 2``: ``r`` is the fixed cost of a round, ``s`` the cost of
    replaying one recorded answer once (the N² term). Errors are weighed relative to
    each point, so the short conversations count as much as the long ones.
    """
    import numpy

    n = numpy.array(ns, dtype=float)
    y = numpy.array(ys, dtype=float)
    basis = numpy.stack([n + 1, n * (n + 1) / 2], axis=1) / y[:, None]
    (r, s), *_ = numpy.linalg.lstsq(basis, numpy.ones_like(y), rcond=None)
    return float(r), float(s)


# -- tables ------------------------------------------------------------------------------------

TABLE_ROW = "mrtr serve, defaults, calls answered from a table"
"""Part 3's measuring device (:data:`benchmarks.http_throughput.TABLE`), by name: no import of the part."""
SEED = "(b) seed-shaped"
"""Part 1's (b), the seed's replayer re-implemented (:mod:`benchmarks.seed_replayer`)."""
MINIMAL_NAMES = ("(b0) minimal stand-in", "(b) exception-based (minimal re-implementation)")
"""The minimal stand-in, under its name now and in the records made before the seed-shaped (b)."""


def _minimal(timings: dict[str, Any]) -> str | None:
    return next((name for name in MINIMAL_NAMES if name in timings), None)


def goal_b(timings: dict[str, Any]) -> str:
    """The (b) the goal compares (a) with: the seed-shaped one, or the minimal one in a record made before it."""
    return SEED if SEED in timings else MINIMAL_NAMES[1]


def table_rounds(part: dict[str, Any]) -> str:
    first = part["rows"][0]["timings"]
    names = [n for n in first if n.startswith("(")]
    minimal = _minimal(first) if SEED in first else None
    head = "| k | " + " | ".join(names) + " | (a)/(b) | " + ("(a)/(b0) | " if minimal else "") \
        + "(a)/(c) | (d)/(a) full |"
    lines = [head, "|" + "---|" * (len(names) + (5 if minimal else 4))]
    for row in part["rows"]:
        t = {name: v["median"] for name, v in row["timings"].items()}
        cells = [f"{t[n] * US:,.1f} µs" for n in names]
        a, b, c = t["(a) mrtr"], t[goal_b(t)], t["(c) park-and-relay"]
        d = t.get("(d) SDK mcp 2.3.0 Resolve")
        full = t["(a) mrtr, full dispatch"]
        lines.append(f"| {row['k']} | " + " | ".join(cells) + f" | {_x(a / b)} | "
                     + (f"{_x(a / t[minimal])} | " if minimal else "") + f"{_x(a / c)} | "
                     f"{_x(d / full) if d else 'n/a'} |")
    k1 = part["rows"][0]["timings"]
    if "direct" in k1:
        overhead = (k1["mrtr replay only"]["median"] - k1["direct"]["median"]) * US
        lines.append("")
        lines.append(f"At k = {part['rows'][0]['k']}: the handler's own work alone (`direct`) "
                     f"{k1['direct']['median'] * US:.2f} µs, the replay core alone (answer trusted from the token, "
                     f"no codec) {k1['mrtr replay only']['median'] * US:.2f} µs: runtime overhead "
                     f"**{overhead:.1f} µs per round** (goal: at most 25 µs).")
    memory = part.get("memory")
    if memory:
        lines.append("")
        lines.append(f"Memory (`tracemalloc`, (a) at k = {memory['k']}): a round peaks at "
                     f"{memory['peak_kib']:.1f} KiB above where it started and retains "
                     f"{memory['retained_bytes_per_round']:.1f} B per round over {memory['rounds']:,} rounds "
                     f"(noise: the server keeps nothing between rounds).")
    if part.get("skipped"):
        lines.append("")
        lines.extend(f"Not measured: {why}" for why in part["skipped"].values())
    return "\n".join(lines)


def table_conversations(part: dict[str, Any]) -> str:
    names = list(part["curves"][0]["timings"])
    lines = ["| N questions | rounds | " + " | ".join(f"{n} (ms CPU)" for n in names) + " | inline / Step |",
             "|" + "---|" * (len(names) + 3)]
    for curve in part["curves"]:
        t = {name: v["median"] for name, v in curve["timings"].items()}
        lines.append(f"| {curve['n']} | {curve['n'] + 1} | " + " | ".join(f"{t[n] * 1e3:,.2f}" for n in names)
                     + f" | {_x(t['work inline'] / t['work in Step'])} |")
    ns = [c["n"] for c in part["curves"]]
    if len(ns) >= 3:
        r, s = replay_fit(ns, [cu["timings"]["plain"]["median"] * US for cu in part["curves"]])
        lines.append("")
        lines.append(f"Fit of the `plain` column as N + 1 rounds, round j replaying j - 1 answers: "
                     f"**{r:,.1f} µs per round + {s:,.2f} µs per recorded answer replayed**, so "
                     f"{r:,.0f} µs × (N + 1) + {s / 2:,.2f} µs × N (N + 1). At N = {ns[-1]} the replay term is "
                     f"{s * ns[-1] * (ns[-1] + 1) / 2 / 1000:,.1f} ms of the "
                     f"{part['curves'][-1]['timings']['plain']['median'] * 1e3:,.1f} ms measured.")
    return "\n".join(lines)


def table_tokens(part: dict[str, Any], rounds: dict[str, Any] | None) -> str:
    tokens = part["tokens"]
    chars = tokens["chars_after_round"]
    lines = [f"A token carrying one pending question is {chars[0]} characters; each recorded answer adds "
             f"**{tokens['chars_per_answer']:.1f} characters**, of which the answer's own content "
             f"(`{{\"email\": \"user10@example.com\"}}`, {tokens['answer_content_msgpack_bytes']} bytes of "
             f"MessagePack, Base64URL) is {tokens['answer_content_msgpack_bytes'] * 4 / 3:.1f}: "
             f"**{tokens['overhead_chars_per_answer']:.1f} characters of overhead per answer** (goal: at most 64). "
             f"After {tokens['n']} answers: {chars[-1]:,} characters."]
    if rounds:
        sdk = [(row["k"], row["token_chars"]["mrtr"], row["token_chars"]["sdk"]) for row in rounds["rows"]]
        if any(s for _, _, s in sdk):
            lines += ["", "| answers recorded (k) | mrtr token (chars) | SDK token (chars) |", "|---|---|---|"]
            lines += [f"| {k} | {m:,} | {_n(s, 0) if s else 'n/a'} |" for k, m, s in sdk]
    return "\n".join(lines)


def table_groups(part: dict[str, Any]) -> str:
    lines = ["| N questions | one group round: CPU (ms), token chars sent | one by one: CPU (ms), token chars sent | "
             "one by one / group (CPU) |", "|---|---|---|---|"]
    for g in part["groups"]:
        t = {name: v["median"] for name, v in g["timings"].items()}
        tc = g["token_chars_total"]
        lines.append(f"| {g['n']} | {t['one group round'] * 1e3:,.2f}, {tc['one group round']:,} | "
                     f"{t['one by one'] * 1e3:,.2f}, {tc['one by one']:,} | "
                     f"{_x(t['one by one'] / t['one group round'])} |")
    return "\n".join(lines)


def table_http(part: dict[str, Any]) -> str:
    lines = []
    for tool, rows in part["flows"].items():
        label = {"ask": "one-question flow (2 requests)", "ask3": "three-question flow (4 requests)"}[tool]
        with_wrk = any(row.get("wrk_per_second") for row in rows.values())
        sdk_cpu = rows.get("SDK MCPServer (uvicorn)", {}).get("server_cpu_us_per_conversation")
        lines += [f"**{label}**", ""]
        if with_wrk:
            lines += ["| server | conversations/s (wrk) | vs SDK | vs SDK, defaults | vs h11 floor | "
                      "request p50 / p99 ms (wrk) | conversations/s (Python) | conversation p50 / p99 ms (Python) | "
                      "server CPU µs/conv | SDK CPU / this CPU | checked, errors, misrouted |",
                      "|---|---|---|---|---|---|---|---|---|---|---|"]
        else:
            lines += ["| server | conversations/s (Python) | vs SDK | vs h11 floor | conversation p50 / p99 ms | "
                      "server CPU µs/conv | SDK CPU / this CPU | checked, errors, misrouted |",
                      "|---|---|---|---|---|---|---|---|"]
        for name, row in rows.items():
            checked = "not checked (fixed bytes)" if name.startswith("floor") else \
                f"{row['conversations'] + row.get('wrk_completed', 0):,}, {row['errors']}, {row['misrouted']}"
            cpu = row["server_cpu_us_per_conversation"]
            cpu_ratio = _x(sdk_cpu / cpu) if sdk_cpu else "n/a"
            if with_wrk:
                lines.append(
                    f"| {name} | {_n(row.get('wrk_per_second'), 0)} | {_x(row.get('vs_sdk_wrk'))} | "
                    f"{_x(row.get('vs_sdk_defaults_wrk'))} | "
                    f"{_x(row.get('vs_floor_wrk'))} | {_n(row.get('wrk_p50_request_ms'))} / "
                    f"{_n(row.get('wrk_p99_request_ms'))} | {row['per_second']:,.0f} | {row['p50_ms']:.1f} / "
                    f"{row['p99_ms']:.1f} | {cpu:,.0f} | {cpu_ratio} | {checked} |")
            else:
                lines.append(f"| {name} | {row['per_second']:,.0f} | {_x(row['vs_sdk'])} | {_x(row['vs_floor'])} | "
                             f"{row['p50_ms']:.1f} / {row['p99_ms']:.1f} | {cpu:,.0f} | {cpu_ratio} | {checked} |")
        if with_wrk:
            limited = [f"{name} {row['per_second'] / row['wrk_per_second']:.2f}" for name, row in rows.items()
                       if row.get("wrk_per_second")]
            lines += ["", "Python generator's rate / wrk's rate, per server: " + ", ".join(limited) + ". Where it "
                      "is well below 1 the Python generator was the bottleneck, and the wrk columns are the ones "
                      "to read; it stays the check that each conversation got its own answers."]
        table = part.get("table", {}).get(tool)
        if table and table.get("wrk_per_second"):
            lines += ["", f"With its calls answered from a table (`mrtr serve`, defaults; "
                      f"`benchmarks.apps.TableAnswered`, wrk only): {table['wrk_per_second']:,.0f} conversations/s, "
                      f"{_x(table.get('vs_sdk_defaults_wrk'))} the SDK at its defaults, "
                      f"{table['wrk_server_cpu_us_per_conversation']:,.0f} µs of server CPU per conversation, "
                      f"{table['wrk_failed']} failed. What a conversation costs around the MCP layer: the most a "
                      f"per-tool plan confined to the MCP layer could reach."]
        client = [row["client_cpu_us_per_conversation"] for row in rows.values()]
        wrk_share = [row["wrk_cpu_share"] for row in rows.values() if row.get("wrk_cpu_share") is not None]
        lines += [f"Load generators' own CPU: the Python generator {min(client):,.0f} to {max(client):,.0f} µs "
                  f"per conversation" + (f"; wrk {min(wrk_share):.0%} to {max(wrk_share):.0%} of one core"
                                         if wrk_share else "") + ".", ""]
    requests = part.get("requests")
    if requests:
        lines += ["**plain request rate** (wrk, `tools/call` of a tool that asks nothing; the floors answer fixed "
                  "bytes)", "", "| server | requests/s | vs h11 floor | vs httptools floor | wrk CPU (share of a core) |",
                  "|---|---|---|---|---|"]
        for name, row in requests.items():
            lines.append(f"| {name} | {row['per_second']:,.0f} | {_x(row['vs_floor'])} | "
                         f"{_x(row['vs_floor_httptools'])} | {row['wrk_cpu_share']:.0%} |")
        lines.append("")
    idle = part.get("idle_connections")
    if idle:
        lines += [f"**memory**: {idle['connections']} idle keep-alive connections to `mrtr serve` with its defaults "
                  f"(each after one plain `tools/call`) took the server from {idle['rss_before_kib'] / 1024:.1f} to "
                  f"{idle['rss_idle_kib'] / 1024:.1f} MiB resident: **{idle['kib_per_connection']:.1f} KiB per idle "
                  "connection**.", ""]
    for name, why in part.get("skipped", {}).items():
        lines.append(f"Not measured: {name}: {why}")
    return "\n".join(lines).rstrip()


def table_soak(part: dict[str, Any]) -> str:
    pids = list(part["memory"][0]["rss_kib"])
    duration = f"{part['seconds'] / 60:.0f} minutes" if part.get("seconds", 0) >= 120 else f"{part.get('seconds', 0)} s"
    legacy = part.get("legacy")
    lines = [f"{duration} of conversations ({part['flow']}) at concurrency {part['concurrency']} against "
             f"`--workers 2`: {part['conversations']:,} conversations, {part['per_second']:,.0f} conversations/s, "
             f"p50 {part['p50_ms']:.0f} ms, p99 {part['p99_ms']:.0f} ms"
             + (f"; beside them {legacy['conversations']:,} whole 2025-era sessions at concurrency "
                f"{legacy['concurrency']} ({legacy['per_second']:,.0f}/s, p50 {legacy['p50_ms']:.0f} ms)"
                if legacy else "")
             + f". Both together: **{part['errors']} errors, {part['misrouted']} misrouted**.",
             "", "| after | conversations | " + ("2025 sessions | " if legacy else "")
             + " | ".join(f"worker {i + 1} RSS (MiB)" for i in range(len(pids))) + " |",
             "|---|---|" + ("---|" if legacy else "") + "---|" * len(pids)]
    for sample in part["memory"]:
        after = f"{sample['seconds']:.0f} s" if "seconds" in sample else "-"
        lines.append(f"| {after} | {sample['conversations']:,} | "
                     + (f"{sample.get('sessions', 0):,} | " if legacy else "")
                     + " | ".join(f"{sample['rss_kib'][pid] / 1024:.1f}" for pid in pids) + " |")
    growth = ", ".join(f"{kib:+,} KiB" for kib in part["rss_growth_kib_after_first_mark"].values())
    lines += ["", f"Growth from the first mark to the last: {growth}. Both workers served to the end "
              f"({'same pids, none replaced' if part.get('workers_alive') else 'a worker was replaced or died'})"
              + (f"; the supervisor, which serves nothing, held {part['supervisor_rss_kib'] / 1024:.1f} MiB"
                 if "supervisor_rss_kib" in part else "") + "."]
    units = part.get("per_unit")
    if units and len(units) == 2:
        start, end = units
        lines += ["", "What one of each costs the two workers (resident memory, summed), at the start of the soak "
                  "and at its end:", "",
                  "| held | at the start | at the end |", "|---|---|---|",
                  f"| an idle keep-alive connection (100 held) | {start['keepalive']['kib_per_connection']:.1f} KiB | "
                  f"{end['keepalive']['kib_per_connection']:.1f} KiB |",
                  f"| an idle 2025 session ({start['sessions']:,} held) | {start['idle_session_bytes'] / 1024:.1f} KiB | "
                  f"{end['idle_session_bytes'] / 1024:.1f} KiB |",
                  f"| a call suspended at its question, with its session and stream ({start['waiting']:,} held) | "
                  f"{start['waiting_call_bytes'] / 1024:.1f} KiB | {end['waiting_call_bytes'] / 1024:.1f} KiB |"]
    elif part.get("idle_connections"):
        lines += ["", "Idle keep-alive connections (100, over both workers): "
                  + ", then ".join(f"{mark['kib_per_connection']:.1f} KiB each" for mark in part["idle_connections"])
                  + " (at the start of the soak, then at its end)."]
    return "\n".join(lines)


def table_tasks(part: dict[str, Any]) -> str:
    if not part.get("measured"):
        return f"**Not measured**: {part['reason']}."
    lines = [f"Native server, one worker, {part['concurrency']} connections, the stores taken in turns "
             f"({part['pairs']} turns of {part['seconds']:g} s each).", "",
             "| store | tasks completed/s | p50 ms | p99 ms | tasks/get polls per task | completed, errors, misrouted |",
             "|---|---|---|---|---|---|"]
    for name, row in part["stores"].items():
        lines.append(f"| {name} | {row['per_second']:,.1f} | {row['p50_ms']:.1f} | {row['p99_ms']:.1f} | "
                     f"{row['polls_per_task']:.1f} | {row['completed']:,}, {row['errors']}, {row['misrouted']} |")
    for name, why in part.get("skipped", {}).items():
        lines += ["", f"Not measured: {name}: {why}"]
    return "\n".join(lines)


def table_once(part: dict[str, Any]) -> str:
    lines = [f"In process through `Server.handle`, wall time, the candidates taken in turns ({part['pairs']} turns of "
             f"{part['batch']} final rounds each; median spread of a candidate's batches {part['spread']:.2f}).", "",
             "| store | final round without once (µs) | with once=True (µs) | ratio | added (µs) | "
             "retry of a recorded round (µs) | ratio | record (bytes) |",
             "|---|---|---|---|---|---|---|---|"]
    for name, row in part["stores"].items():
        plain, once, retry = (row["timings"][key]["median"] * US for key in ("plain", "once", "retry"))
        size = f"{row['record_bytes']}"
        if row.get("redis_memory_bytes"):
            size += f" ({row['redis_memory_bytes']} in Redis, `MEMORY USAGE`)"
        lines.append(f"| {name} | {plain:.0f} | {once:.0f} | {row['once_ratio']:.1f}x | {once - plain:.0f} | "
                     f"{retry:.0f} | {row['retry_ratio']:.1f}x | {size} |")
    for name, why in part.get("skipped", {}).items():
        lines += ["", f"Not measured: {name}: {why}"]
    return "\n".join(lines)


def table_sessions(part: dict[str, Any]) -> str:
    """Part 7: the memory of an idle 2025-era session and of a suspended handler, beside a bare trio task."""
    baseline = part["baseline_task"]["bytes_per_task"]
    rows = [
        ("an idle session (after `initialize`)", part["idle_session"]["n"], part["idle_session"]["bytes_per_session"]),
        ("a suspended handler, sync generator", part["suspended_sync"]["n"], part["suspended_sync"]["bytes_per_handler"]),
        ("a suspended handler, async generator", part["suspended_async"]["n"],
         part["suspended_async"]["bytes_per_handler"]),
        ("baseline: a bare trio task waiting on an Event", part["baseline_task"]["n"], baseline),
    ]
    lines = ["| held | N | bytes each (tracemalloc) | vs the baseline task |", "|---|---|---|---|"]
    for what, n, size in rows:
        lines.append(f"| {what} | {n:,} | {size:,.0f} | {size / baseline:.1f}x |")
    return "\n".join(lines)


def table_legacy_http(part: dict[str, Any]) -> str:
    """Part 8: 2025-era sessions over HTTP, beside the SDK's stateful server, and their resident memory."""
    with_cpu = all("server_cpu_us_per_conversation" in row for row in part["flows"].values())
    lines = ["| server | conversations/s | vs the SDK | p50 ms | p99 ms | conversations | errors | misrouted |"
             + (" server CPU µs/conv | SDK CPU / this CPU | load generator CPU µs/conv |" if with_cpu else ""),
             "|---|---|---|---|---|---|---|---|" + ("---|---|---|" if with_cpu else "")]
    for name, row in part["flows"].items():
        versus = f"{row['vs_sdk']:.2f}x" if row.get("vs_sdk") else "n/a"
        cpu = (f" {row['server_cpu_us_per_conversation']:,.0f} | {_x(row.get('vs_sdk_cpu'))} | "
               f"{row['client_cpu_us_per_conversation']:,.0f} |" if with_cpu else "")
        lines.append(f"| {name} | {row['per_second']:,.0f} | {versus} | {row['p50_ms']:.1f} | {row['p99_ms']:.1f} | "
                     f"{row['conversations']:,} | {row['errors']} | {row['misrouted']} |{cpu}")
    for what, reason in part.get("skipped", {}).items():
        lines.append(f"| {what} | skipped: {reason} | | | | | | |" + (" | | |" if with_cpu else ""))
    if part.get("rss"):
        lines += ["", "| server | RSS before | per idle session | vs the SDK | per waiting call | vs the SDK |",
                  "|---|---|---|---|---|---|"]
        for name, row in part["rss"].items():
            idle = f"{row['idle_vs_sdk']:.2f}x" if row.get("idle_vs_sdk") else "n/a"
            waiting = f"{row['waiting_vs_sdk']:.2f}x" if row.get("waiting_vs_sdk") else "n/a"
            lines.append(f"| {name} | {row['rss_base_mib']:.1f} MiB | {row['idle_session_bytes'] / 1024:,.1f} KiB "
                         f"(N = {row['sessions']:,}) | {idle} | {row['waiting_call_bytes'] / 1024:,.1f} KiB "
                         f"(N = {row['waiting']:,}) | {waiting} |")
    return "\n".join(lines)


def table_nodes(part: dict[str, Any]) -> str:
    """Part 9: nodes behind haproxy, notification latency across nodes, and what Redis pays per unit of work."""
    if not part.get("measured"):
        return f"**Not measured**: {part['reason']}."
    lines = [f"Two-question conversations through haproxy (round robin), {part['concurrency']} connections, "
             f"the node counts taken in turns ({part['turns']} turns of {part['seconds']:g} s each); CPU is the "
             "share of one core each used during the turn.", "",
             "| nodes | conversations/s | vs one node | p50 ms | p99 ms | CPU: nodes | haproxy | Redis | "
             "load generator | errors, misrouted |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for count, row in part["scaling"].items():
        share = row["cpu_share"]
        lines.append(f"| {count} | {row['per_second']:,.0f} | {row['ratio']:.2f}x | {row['p50_ms']:.1f} | "
                     f"{row['p99_ms']:.1f} | {share['nodes']:.2f} | {share['haproxy']:.2f} | {share['redis']:.2f} | "
                     f"{row['client_cpu_share']:.2f} | {row['errors']}, {row['misrouted']} |")
    latency = part["latency"]
    lines += ["", f"A notification published on one node and delivered to a listen stream on another: median "
                  f"{latency['median_ms']:.1f} ms, p99 {latency['p99_ms']:.1f} ms ({latency['samples']:,} samples, "
                  "from the handler's publish to the client's receipt).", "",
              f"What Redis does per unit of work (one node, {part['costs']['count']} of each, less the "
              f"{part['costs']['idle_commands_per_second']:.1f} commands/s the nodes send idle):", "",
              "| work | Redis commands | bytes to Redis | bytes from Redis | stored (bytes, `MEMORY USAGE`) |",
              "|---|---|---|---|---|"]
    for name, row in part["costs"]["rows"].items():
        if row is None:  # a run recorded before 2025-era sessions moved to Redis
            lines.append(f"| {name} | (not measured in this run) | | | |")
            continue
        label = {"conversation": "a two-question conversation (no `once`, no task)",
                 "task": "a task of three Steps (created, run, completed; its polls not counted)",
                 "final round": "a final round recorded by `once=True` (a one-question conversation)",
                 "tasks/get": "one `tasks/get` (a poll)",
                 "session (2025 era)": "a 2025-era session, each request on another node (initialize, "
                                       "initialized, a two-question call answered on another node, tools/list, "
                                       "DELETE)"}.get(name, name)
        stored = "-" if not row.get("stored_bytes") else f"{row['stored_bytes']:,}"
        lines.append(f"| {label} | {row['commands']:.1f} | {row['bytes_in']:,.0f} | {row['bytes_out']:,.0f} | "
                     f"{stored} |")
    rows = part["costs"]["rows"]
    lines += ["", "Sizing on paper: Redis commands per second a deployment needs at the measured rates, if every "
                  "conversation ended in a `once=True` final round, or started a task polled once a second for "
                  "a ten-second life:", "",
              "| nodes | conversations/s | Redis commands/s: plain | with once=True | with a task each |",
              "|---|---|---|---|---|"]
    for count, row in part["scaling"].items():
        rate = row["per_second"]
        task = rows["task"]["commands"] + 10 * rows["tasks/get"]["commands"]
        lines.append(f"| {count} | {rate:,.0f} | {rate * rows['conversation']['commands']:,.0f} | "
                     f"{rate * rows['final round']['commands']:,.0f} | {rate * task:,.0f} |")
    return "\n".join(lines)


def table_middleware(part: dict[str, Any]) -> str:
    """Part 10: what the middleware pipeline costs a plain ``tools/call``, in process and over HTTP, against none."""
    lines = [f"In process, CPU time per request, {part['pairs']} interleaved turns:", "",
             "| candidate | µs per request | vs no middleware | spread |", "|---|---|---|---|"]
    for name, row in part["in_process"].items():
        lines.append(f"| {name} | {row['us']:.2f} | {row['ratio']:.2f}x | {row['spread']:.2f} |")
    http = part.get("http")
    if http:
        lines += ["", f"Over HTTP (one worker, wrk), {part['http_turns']} interleaved turns; each server against its "
                  "own baseline (the SDK's rows against the SDK with no middleware):", "",
                  "| candidate | server CPU µs per request | vs no middleware | requests/s | vs no middleware | "
                  "spread of the CPU figure |", "|---|---|---|---|---|---|"]
        for name, row in http.items():
            lines.append(f"| {name} | {row['cpu_us']:.1f} | {row['cpu_ratio']:.2f}x | {row['per_second']:,.0f} | "
                         f"{row['rate_ratio']:.2f}x | {row['spread']:.2f} |")
    buckets = part.get("buckets")
    if buckets:
        lines += ["", f"What a `RateLimit` adds to each request it counts: one take of a token from its store, "
                  f"wall time, mean of {part['bucket_takes']:,}:", "",
                  "| store | µs per take |", "|---|---|"]
        lines += [f"| {name} | {value:.1f} |" for name, value in buckets.items()]
    for name, why in part.get("skipped", {}).items():
        lines += ["", f"Not measured: {name}: {why}"]
    return "\n".join(lines)


def table_coldstart(part: dict[str, Any]) -> str:
    """Part 12: a stdio server's start to its first answer, beside the SDK's, and where its imports go."""
    load = part.get("load", {})
    lines = [f"Wall time from the process's start to the first answer, median of {part['turns']} starts each taken in "
             f"turns (load average {load.get('before', '?')} at the start of the part, {load.get('after', '?')} at its "
             "end); CPU: the process's whole life (start, answer, exit at the end of stdin).", "",
             "| started | first request | to the first answer | min / max | CPU | the SDK's time / this |",
             "|---|---|---|---|---|---|"]
    for name, row in part["rows"].items():
        started, _, first = name.rpartition(", ")
        if not started:
            started, first = name, "(none: to its exit)"
        ratio = _x(row.get("sdk_over_this")) if row.get("sdk_over_this") else ""
        lines.append(f"| {started} | {first} | {row['ms']:.1f} ms | {row['min_ms']:.1f} / {row['max_ms']:.1f} | "
                     f"{row['cpu_ms']:.1f} ms | {ratio} |")
    if part.get("imports"):
        lines += ["", "`python -X importtime` of one start each (import times under that flag run above the "
                  "figures above; read them against each other):", "",
                  "| started | modules | imports | the top-level imports that cost most |", "|---|---|---|---|"]
        for name, profile in part["imports"].items():
            started = name.rpartition(", ")[0] or name
            top = ", ".join(f"`{item['module']}` {item['ms']:.0f}" for item in profile["top"][:6])
            lines.append(f"| {started} | {profile['modules']} | {profile['imports_ms']:.0f} ms | {top} |")
    for name, why in part.get("skipped", {}).items():
        lines += ["", f"Not measured: {name}: {why}"]
    return "\n".join(lines)


def goal_empty_pipeline(part: dict[str, Any]) -> str:
    """The goals row of part 10: a server with no middleware against the commit before the pipeline.

    Not measurable means the two differ by less than the run's own spread (the largest
    max/min ratio of either's turns): in process by CPU time per call, over HTTP by server CPU
    per request.
    """
    rows = []
    for where, table, key in (("in process", part.get("in_process", {}), "us"),
                              ("over HTTP", part.get("http", {}), "cpu_us")):
        now, before = table.get("no middleware"), table.get("no middleware, before")
        if not now or not before:
            continue
        ratio = now[key] / before[key]
        spread = max(now["spread"], before["spread"])
        rows.append((where, ratio, spread, max(ratio, 1 / ratio) <= spread))
    if not rows:
        return "| an empty middleware pipeline not measurable | not measured (no `--before` run) | no |"
    measured = "; ".join(f"{where} {ratio:.3f}x the commit before the pipeline (spread {spread:.2f}x)"
                         for where, ratio, spread, _ in rows)
    return (f"| an empty middleware pipeline not measurable (within the run's spread) | {measured} | "
            f"{'yes' if all(quiet for *_, quiet in rows) else 'no'} |")


def table_goals(results: dict[str, Any]) -> str:
    lines = ["| goal | measured | met |", "|---|---|---|"]
    rounds = results.get("rounds")
    if rounds:
        k1 = rounds["rows"][0]["timings"]
        if "direct" in k1:
            overhead = (k1["mrtr replay only"]["median"] - k1["direct"]["median"]) * US
            lines.append(f"| runtime overhead ≤ 25 µs per round at k = 1 | {overhead:.1f} µs | "
                         f"{'yes' if overhead <= 25 else 'no'} |")
        ratios = [(row["k"], row["timings"]["(a) mrtr"]["median"] / row["timings"][goal_b(row["timings"])]["median"])
                  for row in rounds["rows"]]
        worst = max(ratios, key=lambda item: item[1])
        slower = [str(k) for k, ratio in ratios if ratio > 1.0]
        where = "" if not slower else "; slower at every k" if len(slower) == len(ratios) else \
            f"; slower at k = {', '.join(slower)}, faster at the other k"
        which = "the seed-shaped (b)" if SEED in rounds["rows"][0]["timings"] else "(b)"
        lines.append(f"| (a) no slower than {which} at every k | worst (a)/(b) = {worst[1]:.2f}x at k = {worst[0]}"
                     f"{where} | {'yes' if worst[1] <= 1.0 else 'no'} |")
    conversations = results.get("conversations")
    if conversations:
        overhead = conversations["tokens"]["overhead_chars_per_answer"]
        lines.append(f"| token growth ≤ 64 per answer beyond its content | {overhead:.1f} characters | "
                     f"{'yes' if overhead <= 64 else 'no'} |")
    http = results.get("http")
    if http and "ask" in http["flows"]:
        row = http["flows"]["ask"].get("mrtr native, 1 worker")
        sdk = http["flows"]["ask"].get("SDK MCPServer (uvicorn)")
        if row and sdk:
            cpu = sdk["server_cpu_us_per_conversation"] / row["server_cpu_us_per_conversation"]
            ratio, by = (row["vs_sdk_wrk"], "wrk") if row.get("vs_sdk_wrk") else (row["vs_sdk"], "Python generator")
            lines.append(f"| HTTP ≥ 5x the SDK's conversations/s, one-question flow, one process | "
                         f"{ratio:.2f}x by rate ({by}), {cpu:.2f}x by server CPU per conversation | "
                         f"{'yes' if ratio >= 5 else 'no'} |")
    if http:
        requests = http.get("requests", {})
        plain = requests.get("mrtr serve, defaults", {}).get("vs_floor_httptools")
        if plain:
            tabled = requests.get(TABLE_ROW, {}).get("vs_floor_httptools")
            ceiling = f" (its calls answered from a table: {tabled:.2f}x)" if tabled else ""
            lines.append(f"| plain `tools/call`, `mrtr serve` with its defaults ≥ 0.5x the bare trio + httptools "
                         f"server | {plain:.2f}x{ceiling} | {'yes' if plain >= 0.5 else 'no'} |")
        ask = http["flows"].get("ask", {})
        both = ask.get("mrtr serve, defaults", {}).get("vs_sdk_defaults_wrk")
        if both:
            tabled = http.get("table", {}).get("ask", {}).get("vs_sdk_defaults_wrk")
            ceiling = f" (its calls answered from a table: {tabled:.2f}x)" if tabled else ""
            lines.append(f"| one-question flow, both at their defaults (access lines on) ≥ 10x the SDK | {both:.2f}x"
                         f"{ceiling} | {'yes' if both >= 10 else 'no'} |")
        off = ask.get("mrtr native, 1 worker", {}).get("vs_sdk_wrk")
        if off:
            lines.append(f"| one-question flow, access lines off in both ≥ 7x the SDK | {off:.2f}x | "
                         f"{'yes' if off >= 7 else 'no'} |")
    legacy = results.get("legacy")
    if legacy and legacy["flows"].get("mrtr native, 1 worker", {}).get("vs_sdk"):
        row = legacy["flows"]["mrtr native, 1 worker"]
        ratio = row["vs_sdk"]
        cpu = (f", {row['vs_sdk_cpu']:.2f}x by server CPU per conversation (the load generator spent "
               f"{row['client_cpu_us_per_conversation']:,.0f} µs per conversation, the server "
               f"{row['server_cpu_us_per_conversation']:,.0f})" if row.get("vs_sdk_cpu") else "")
        lines.append(f"| 2025 sessions over HTTP ≥ 8x the SDK's stateful server, one-question conversation, one "
                     f"process | {ratio:.2f}x by rate{cpu} | {'yes' if ratio >= 8 else 'no'} |")
    middleware = results.get("middleware")
    if middleware:
        lines.append(goal_empty_pipeline(middleware))
    coldstart = results.get("coldstart")
    if coldstart:
        # The rows named "mrtr serve --stdio, <first request>": this checkout's, each with the SDK's time over it.
        ours = {name.rpartition(", ")[2]: row for name, row in coldstart["rows"].items()
                if name.startswith("mrtr serve --stdio, ") and name.count(", ") == 1 and row.get("sdk_over_this")}
        if ours:
            lines.append("| cold start: `mrtr serve --stdio` to its first answer lower than the SDK's stdio server | "
                         + ", ".join(f"{first} {row['ms']:.0f} ms, the SDK's {row['sdk_over_this']:.2f}x that"
                                     for first, row in ours.items())
                         + f" | {'yes' if all(row['sdk_over_this'] > 1 for row in ours.values()) else 'no'} |")
    soak = results.get("soak")
    if soak:
        growth = max(soak["rss_growth_kib_after_first_mark"].values())
        flat = growth <= 2048
        eras = " (both eras)" if soak.get("legacy") else ""
        lines.append(f"| soak{eras}: 0 errors, 0 misrouted, memory flat | {soak['errors']} errors, {soak['misrouted']} "
                     f"misrouted, largest worker RSS growth after the first mark {growth:+,} KiB (flat: under 2 MiB) | "
                     f"{'yes' if soak['errors'] == 0 and soak['misrouted'] == 0 and flat else 'no'} |")
        units = soak.get("per_unit")
        if units and len(units) == 2:
            start, end = units
            pairs = [("idle connection", start["keepalive"]["kib_per_connection"] * 1024,
                      end["keepalive"]["kib_per_connection"] * 1024),
                     ("idle 2025 session", start["idle_session_bytes"], end["idle_session_bytes"]),
                     ("suspended call", start["waiting_call_bytes"], end["waiting_call_bytes"])]
            # Flat: holding as many again after ten minutes of load costs no more than at the start (a
            # quarter and a KiB of slack: RSS moves in pages, and the heap's reuse differs between marks).
            held = all(after <= before * 1.25 + 1024 for _, before, after in pairs)
            lines.append("| RSS per idle keep-alive connection, idle 2025 session and suspended call, flat over the "
                         "soak | " + ", ".join(f"{what} {before / 1024:.1f} -> {after / 1024:.1f} KiB"
                                              for what, before, after in pairs)
                         + f" | {'yes' if held else 'no'} |")
    return "\n".join(lines)


def table_machine(results: dict[str, Any]) -> str:
    """Where and when the recorded figures were taken."""
    ran = [part for part in results.get("parts", []) if part not in results.get("earlier", {})]
    which = f" of {', '.join(ran)}" if ran and results.get("earlier") else ""
    return (f"{results.get('machine', '')}; {'quick' if results.get('quick') else 'full'} run{which} started "
            f"{results.get('started', '?')}, {results.get('seconds', '?')} s; load average "
            f"{results.get('load_before', '?')} at the start and {results.get('load_after', '?')} at the end "
            f"(the suite shares the cores with whatever else runs)." + _earlier(results))


def _earlier(results: dict[str, Any]) -> str:
    """Which parts a merged record kept from an earlier run, and that run's start and load."""
    runs: dict[tuple[Any, ...], list[str]] = {}
    for part, run in results.get("earlier", {}).items():
        key = (run.get("started", "?"), run.get("load_before", "?"), run.get("load_after", "?"))
        runs.setdefault(key, []).append(part)
    return "".join(f" Part{'s' if len(parts) > 1 else ''} {', '.join(parts)}: from the run started {started} "
                   f"(load average {before} at the "
                   f"start, {after} at the end)." for (started, before, after), parts in runs.items())


def table_noise(results: dict[str, Any]) -> str:
    """How far apart the interleaved batches of one candidate were (max / min)."""
    spreads: list[float] = []
    for row in results.get("rounds", {}).get("rows", []):
        spreads += [v["spread"] for v in row["timings"].values()]
    for curve in results.get("conversations", {}).get("curves", []):
        spreads += [v["spread"] for v in curve["timings"].values()]
    http: list[float] = []
    for rows in results.get("http", {}).get("flows", {}).values():
        http += [row["spread"] for row in rows.values()]
    spreads.sort()
    http.sort()
    lines = []
    if spreads:
        lines.append(f"In-process batches (CPU time): max/min of one candidate's batches, median "
                     f"{spreads[len(spreads) // 2]:.2f}, worst {spreads[-1]:.2f}.")
    if http:
        lines.append(f"HTTP turns (wall time): max/min of one server's turns, median {http[len(http) // 2]:.2f}, "
                     f"worst {http[-1]:.2f}.")
    return " ".join(lines)


def table_adoption(part: dict[str, Any]) -> str:
    """Part 11: what recording 2025 calls costs per answer and per round, and the soak with node kills."""
    lines = [f"{part['calls']} two-question 2025 calls per store and turn, {part['turns']} turns interleaved; "
             "latency is the median from an answer's POST to what follows it on the stream, as a ratio to "
             "the same calls with nothing recorded (`memory:`) in the same run:", "",
             "| store | first question ms | each answer, ms | ratio per answer | ratio to the first question | "
             "store operations per answer | bytes written per answer |",
             "|---|---|---|---|---|---|---|"]
    for name, row in part["latency"].items():
        cost = part["costs"].get(name)
        medians = row["median_ms"]
        per_answer = (medians["second question"] + medians["result"]) / 2
        lines.append(f"| {name} | {medians['first question']:.2f} | {per_answer:.2f} | {row['ratio_per_answer']:.2f} "
                     f"| {row['ratio_first_question']:.2f} | "
                     + (f"{cost['operations_per_answer']:.1f} | {cost['bytes_per_answer']:.0f} |" if cost else "- | - |"))
    redis = part["costs"].get("Redis", {}).get("redis_per_call")
    if redis:
        lines += ["", f"Redis counted per whole call (initialize, the call, two answers, DELETE; sessions included): "
                      f"{redis['commands']:.1f} commands, {redis['bytes_in']:.0f} bytes in, "
                      f"{redis['bytes_out']:.0f} bytes out."]
    soak = part.get("soak", {})
    if soak.get("measured"):
        kills = soak["kills"]
        seconds = soak["call_seconds"]
        lines += ["", f"Soak: {soak['seconds']:.0f} s at concurrency {soak['concurrency']} through haproxy over three "
                      f"nodes, a node stopped every {soak['kill_every_s']:.0f} s ({kills['SIGKILL']} SIGKILL, "
                      f"{kills['SIGTERM']} SIGTERM) and started again:", "",
                  "| calls completed | calls lost | misrouted | resumptions | not started (refused before asking) "
                  "| call p50 s | call p99 s |", "|---|---|---|---|---|---|---|",
                  f"| {soak['completed']} | **{soak['lost']}** | {soak['misrouted']} | {soak['resumptions']} | "
                  f"{soak['not_started']} | {seconds['p50'] or 0:.2f} | {seconds['p99'] or 0:.2f} |"]
    elif soak:
        lines += ["", f"Soak: not measured ({soak.get('reason')})."]
    return "\n".join(lines)


def summary_adoption(part: dict[str, Any]) -> str:
    """Part 11's headline, for the terminal."""
    ratios = ", ".join(f"{name} {row['ratio_per_answer']:.2f}x" for name, row in part["latency"].items()
                       if name != "memory:")
    costs = ", ".join(f"{name} {row['operations_per_answer']:.1f} ops/{row['bytes_per_answer']:.0f} B"
                      for name, row in part["costs"].items())
    soak = part.get("soak", {})
    soaked = (f"; soak: {soak['completed']} completed, {soak['lost']} lost, {soak['misrouted']} misrouted, "
              f"{soak['kills']['SIGKILL']}+{soak['kills']['SIGTERM']} kills") if soak.get("measured") else ""
    return f"2025 calls recorded: per answer {costs}; latency per answer vs memory: {ratios}{soaked}"


def update_document(path: Path, results: dict[str, Any]) -> None:
    """Replace every ``<!-- bench:NAME -->`` block of ``path`` with the table for NAME."""
    builders = {
        "goals": lambda: table_goals(results),
        "noise": lambda: table_noise(results),
        "rounds": lambda: table_rounds(results["rounds"]),
        "conversations": lambda: table_conversations(results["conversations"]),
        "tokens": lambda: table_tokens(results["conversations"], results.get("rounds")),
        "groups": lambda: table_groups(results["conversations"]),
        "http": lambda: table_http(results["http"]),
        "soak": lambda: table_soak(results["soak"]),
        "tasks": lambda: table_tasks(results["tasks"]),
        "once": lambda: table_once(results["once"]),
        "sessions": lambda: table_sessions(results["sessions"]),
        "legacy": lambda: table_legacy_http(results["legacy"]),
        "nodes": lambda: table_nodes(results["nodes"]),
        "middleware": lambda: table_middleware(results["middleware"]),
        "adoption": lambda: table_adoption(results["adoption"]),
        "coldstart": lambda: table_coldstart(results["coldstart"]),
        "machine": lambda: table_machine(results),
    }
    text = path.read_text()

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        try:
            body = builders[name]()
        except KeyError:
            body = "_This part was not run in the recorded results._"
        return f"<!-- bench:{name} -->\n{body}\n<!-- /bench:{name} -->"

    path.write_text(re.sub(r"<!-- bench:(\w+) -->.*?<!-- /bench:\1 -->", replace, text, flags=re.S))


# -- plots -----------------------------------------------------------------------------------------

def plots(results: dict[str, Any], out: Path) -> list[Path]:
    """Write one PNG per part that ran; return their paths."""
    try:
        import matplotlib
    except ImportError:
        raise SystemExit("the plots need matplotlib: pip install -e '.[bench]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    written = []

    def save(fig: Any, name: str) -> None:
        path = out / name
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

    rounds = results.get("rounds")
    if rounds:
        fig, ax = plt.subplots(figsize=(7.5, 4.8))
        ks = [row["k"] for row in rounds["rows"]]
        for name, style in (("(a) mrtr", "o-"), ("(a) mrtr, full dispatch", "o--"), (SEED, "s-"),
                            *((minimal, "s:") for minimal in MINIMAL_NAMES),
                            ("(c) park-and-relay", "^-"), ("(d) SDK mcp 2.3.0 Resolve", "d-")):
            if name in rounds["rows"][0]["timings"]:
                ax.plot(ks, [row["timings"][name]["median"] * US for row in rounds["rows"]], style, label=name)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("answered slots replayed in the round, k")
        ax.set_ylabel("CPU time per round (µs)")
        ax.set_title("Cost of one round against answers already recorded")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        save(fig, "round_cost.png")

    conversations = results.get("conversations")
    if conversations:
        fig, ax = plt.subplots(figsize=(7.5, 4.8))
        ns = [c["n"] for c in conversations["curves"]]
        for name, style in (("plain", "o-"), ("work inline", "s-"), ("work in Step", "^-")):
            ax.plot(ns, [c["timings"][name]["median"] * 1e3 for c in conversations["curves"]], style,
                    label={"plain": "N questions only", "work inline": "+ 1 ms work re-run every round",
                           "work in Step": "+ 1 ms work in a Step (run once)"}[name])
        ax.set_xlabel("questions asked one by one, N (N + 1 rounds)")
        ax.set_ylabel("server CPU for the whole conversation (ms)")
        ax.set_title("Whole-conversation CPU: replay grows as N², a Step pays its work once")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        save(fig, "conversation_cpu.png")

        fig, ax = plt.subplots(figsize=(7.5, 4.8))
        chars = conversations["tokens"]["chars_after_round"]
        ax.plot(range(len(chars)), chars, "-", label="mrtr (part 2 conversation)")
        if rounds and any(row["token_chars"]["sdk"] for row in rounds["rows"]):
            ax.plot([row["k"] for row in rounds["rows"]], [row["token_chars"]["sdk"] for row in rounds["rows"]], "d",
                    label="SDK mcp 2.3.0 (Resolve state after k answers)")
            ax.plot([row["k"] for row in rounds["rows"]], [row["token_chars"]["mrtr"] for row in rounds["rows"]], "o",
                    label="mrtr (part 1, after k answers)")
        ax.set_xlabel("answers recorded in the token")
        ax.set_ylabel("requestState size (characters)")
        ax.set_title("Token size against recorded answers")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        save(fig, "token_size.png")

    http = results.get("http")
    if http:
        import numpy

        names = list(next(iter(http["flows"].values())))
        fig, ax = plt.subplots(figsize=(8.5, 4.8))
        width = 0.8 / len(http["flows"])
        x = numpy.arange(len(names))
        for i, (tool, rows) in enumerate(http["flows"].items()):
            label = {"ask": "one question (2 requests)", "ask3": "three questions (4 requests)"}[tool]
            key = "wrk_per_second" if all(rows[n].get("wrk_per_second") for n in names) else "per_second"
            bars = ax.bar(x + i * width, [rows[n][key] for n in names], width,
                          label=label + (" (wrk)" if key == "wrk_per_second" else " (Python generator)"))
            ax.bar_label(bars, fmt="{:,.0f}", fontsize=7)
        ax.set_xticks(x + width * (len(http["flows"]) - 1) / 2)
        ax.set_xticklabels([n.replace(" (", "\n(").replace(", ", "\n") for n in names], fontsize=7)
        ax.set_ylabel("completed conversations per second")
        ax.set_title(f"End to end over HTTP, {http['concurrency']} connections, load generator on the same 2 cores")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=8)
        save(fig, "http_conversations.png")

    requests = (http or {}).get("requests")
    if requests:
        fig, ax = plt.subplots(figsize=(8.5, 4.8))
        names = list(requests)
        bars = ax.bar(range(len(names)), [requests[n]["per_second"] for n in names],
                      color=["tab:orange" if "defaults" in n else "tab:gray" if n.startswith("floor") else "tab:blue"
                             for n in names])
        ax.bar_label(bars, fmt="{:,.0f}", fontsize=7)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels([n.replace(" (", "\n(").replace(", ", "\n") for n in names], fontsize=7)
        ax.set_ylabel("requests per second (wrk)")
        ax.set_title("Plain tools/call; orange: as started by default (access lines on); grey: fixed bytes")
        ax.grid(True, axis="y", alpha=0.3)
        save(fig, "http_requests.png")

    soak = results.get("soak")
    if soak:
        units = soak.get("per_unit") if len(soak.get("per_unit") or ()) == 2 else None
        fig, axes = plt.subplots(1, 2 if units else 1, figsize=(11 if units else 7.5, 4.8),
                                 gridspec_kw={"width_ratios": [3, 2]} if units else None)
        ax = axes[0] if units else axes
        marks = [s.get("seconds", 0) / 60 for s in soak["memory"]]
        for i, pid in enumerate(soak["memory"][0]["rss_kib"]):
            ax.plot(marks, [s["rss_kib"][pid] / 1024 for s in soak["memory"]], "o-", label=f"worker {i + 1}")
        ax.set_xlabel("minutes of load")
        ax.set_ylabel("resident memory (MiB)")
        ax.set_ylim(bottom=0)
        sessions = f" and {soak['legacy']['conversations']:,} 2025 sessions" if soak.get("legacy") else ""
        ax.set_title(f"Soak: worker memory over {soak['conversations']:,} conversations{sessions} (--workers 2)",
                     fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        if units:
            import numpy

            start, end = units
            labels = ["idle keep-alive\nconnection", "idle 2025\nsession", "suspended call\n(+ session, stream)"]
            before = [start["keepalive"]["kib_per_connection"], start["idle_session_bytes"] / 1024,
                      start["waiting_call_bytes"] / 1024]
            after = [end["keepalive"]["kib_per_connection"], end["idle_session_bytes"] / 1024,
                     end["waiting_call_bytes"] / 1024]
            x = numpy.arange(len(labels))
            side = axes[1]
            for offset, values, label in ((-0.2, before, "at the start"), (0.2, after, "at the end")):
                bars = side.bar(x + offset, values, 0.4, label=label)
                side.bar_label(bars, fmt="{:,.1f}", fontsize=7)
            side.set_xticks(x)
            side.set_xticklabels(labels, fontsize=8)
            side.set_ylabel("KiB of resident memory each (both workers)")
            side.set_title("What one of each costs", fontsize=9)
            side.grid(True, axis="y", alpha=0.3)
            side.legend(fontsize=8)
        save(fig, "soak_memory.png")

    legacy = results.get("legacy")
    if legacy and legacy.get("flows"):
        names = list(legacy["flows"])
        fig, axes = plt.subplots(1, 2 if legacy.get("rss") else 1, figsize=(11 if legacy.get("rss") else 6.5, 4.8))
        ax = axes[0] if legacy.get("rss") else axes
        bars = ax.bar(range(len(names)), [legacy["flows"][n]["per_second"] for n in names],
                      color=["tab:gray" if n.startswith("SDK") else "tab:blue" for n in names])
        ax.bar_label(bars, fmt="{:,.0f}", fontsize=7)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels([n.replace(" (", "\n(").replace(", ", "\n") for n in names], fontsize=7)
        ax.set_ylabel("whole 2025 sessions per second")
        ax.set_title("2025-era one-question conversations over HTTP; grey: the SDK's stateful server", fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
        if legacy.get("rss"):
            import numpy

            rows = legacy["rss"]
            servers = list(rows)
            x = numpy.arange(2)
            side = axes[1]
            width = 0.8 / len(servers)
            for i, name in enumerate(servers):
                bars = side.bar(x + i * width, [rows[name]["idle_session_bytes"] / 1024,
                                                rows[name]["waiting_call_bytes"] / 1024], width, label=name)
                side.bar_label(bars, fmt="{:,.1f}", fontsize=7)
            side.set_xticks(x + width * (len(servers) - 1) / 2)
            side.set_xticklabels(["an idle session", "a waiting call"], fontsize=8)
            side.set_ylabel("KiB of resident memory each")
            side.set_title("What one of each costs the server", fontsize=9)
            side.grid(True, axis="y", alpha=0.3)
            side.legend(fontsize=7)
        save(fig, "legacy_sessions.png")
    return written
