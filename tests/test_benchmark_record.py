"""``python -m benchmarks --merge``: a part measured again replaces its record, the others stay with their run."""

from benchmarks import report
from benchmarks.__main__ import merge


def _run(started: str, load: str, **parts: object) -> dict[str, object]:
    return {"quick": False, "started": started, "machine": "m", "load_before": load, "load_after": load,
            "seconds": 1.0, "parts": sorted(parts), **parts}


def test_a_merged_record_keeps_the_other_parts_and_says_which_run_measured_them():
    first = _run("2026-01-01T00:00:00Z", "0.5", rounds={"r": 1}, http={"h": 1}, soak={"s": 1})
    second = merge(first, _run("2026-01-02T00:00:00Z", "3.0", http={"h": 2}))
    assert second["http"] == {"h": 2}
    assert second["rounds"] == {"r": 1} and second["soak"] == {"s": 1}
    assert set(second["earlier"]) == {"rounds", "soak"}
    assert second["earlier"]["rounds"]["started"] == "2026-01-01T00:00:00Z"
    line = report.table_machine(second)
    assert "run of http started 2026-01-02" in line
    assert "Parts rounds, soak: from the run started 2026-01-01T00:00:00Z (load average 0.5" in line

    # measuring a kept part again drops its note; the other kept part keeps the run it came from
    third = merge(second, _run("2026-01-03T00:00:00Z", "1.0", soak={"s": 3}))
    assert third["soak"] == {"s": 3} and third["http"] == {"h": 2}
    assert third["earlier"]["rounds"]["started"] == "2026-01-01T00:00:00Z"
    assert third["earlier"]["http"]["started"] == "2026-01-02T00:00:00Z"
    assert "soak" not in third["earlier"]
    assert "Part rounds: from" in report.table_machine(third)


def test_an_unmerged_record_names_no_earlier_run():
    assert "Parts" not in report.table_machine(_run("2026-01-01T00:00:00Z", "0.5", http={}))


def test_every_layer_variant_of_the_replay_gives_the_real_rounds_outcome():
    """benchmarks.replay_layers times the round with the replay rewritten; each rewrite must still be that round."""
    from benchmarks.replay_layers import VARIANTS, Swapped
    from benchmarks.replay_overhead import MrtrRounds

    for k in (1, 3):
        rounds = MrtrRounds(k)
        real = rounds.wire_round(rounds.params).result
        sealed = rounds.codec.decode(real["requestState"]).ledger
        assert len(sealed) == k + 1
        for name, variant in VARIANTS.items():
            called = []

            def counted(*args, variant=variant, **kwargs):
                called.append(True)
                return variant(*args, **kwargs)

            swapped = Swapped(lambda r=rounds: r.wire_round(r.params), counted)
            result = swapped.once().result
            assert called == [True], name  # the round ran the variant, not the real replay
            assert result["resultType"] == "input_required", name
            assert result["inputRequests"] == real["inputRequests"], name
            assert result["requestState"] != real["requestState"], name  # a fresh token each round
            assert rounds.codec.decode(result["requestState"]).ledger == sealed, name


def test_every_piece_the_instruction_profile_counts_still_runs():
    """benchmarks.replay_profile calls the round's pieces by their private names: a rename must fail here, not there."""
    from benchmarks.replay_profile import _pieces

    pieces = _pieces(2)
    assert {"(a) round", "(b) round", "open", "checks 1-6", "merge", "replay core", "seal"} <= set(pieces)
    for name, (piece, calls) in pieces.items():
        assert calls >= (0 if name == "nothing" else 1), name  # "nothing" is the loop's own cost
        piece()


def test_the_middleware_part_renders_and_stays_out_of_the_quick_run():
    from benchmarks.__main__ import NOT_QUICK, PARTS

    part = {"pairs": 3, "in_process": {"no middleware": {"us": 5.0, "ratio": 1.0, "spread": 1.02},
                                       "five pass-through": {"us": 8.5, "ratio": 1.7, "spread": 1.03}},
            "http_turns": 2, "http": {"no middleware": {"cpu_us": 40.0, "cpu_ratio": 1.0, "per_second": 15000.0,
                                                        "rate_ratio": 1.0, "spread": 1.1}},
            "buckets": {"memory": 0.61, "Redis": 165.6}, "bucket_takes": 300, "skipped": {"SDK": "not installed"}}
    table = report.table_middleware(part)
    assert "| five pass-through | 8.50 | 1.70x | 1.03 |" in table
    assert "| no middleware | 40.0 | 1.00x | 15,000 | 1.00x | 1.10 |" in table
    assert "Not measured: SDK: not installed" in table
    assert "| memory | 0.6 |" in table and "| Redis | 165.6 |" in table
    assert "middleware" in PARTS and "middleware" in NOT_QUICK


def test_the_cold_start_goal_reads_this_checkouts_rows_against_the_sdks():
    def row(ms: float, sdk_over_this: float | None) -> dict[str, object]:
        return {"ms": ms, "sdk_over_this": sdk_over_this}

    rows = {"mrtr serve --stdio, initialize": row(200, 3.0), "mrtr serve --stdio, server/discover": row(210, 0.9),
            "mrtr serve --stdio, before (x), initialize": row(400, 1.5), "mrtr --help": row(60, None),
            "SDK mcp 2.3.0 MCPServer stdio, initialize": row(600, None), "python -c pass": row(20, None)}
    goal = [line for line in report.table_goals({"coldstart": {"rows": rows}}).splitlines() if "cold start" in line]
    assert goal == ["| cold start: `mrtr serve --stdio` to its first answer lower than the SDK's stdio server | "
                    "initialize 200 ms, the SDK's 3.00x that, server/discover 210 ms, the SDK's 0.90x that | no |"]
    rows["mrtr serve --stdio, server/discover"] = row(210, 2.9)
    assert report.table_goals({"coldstart": {"rows": rows}}).splitlines()[-1].endswith("| yes |")


def test_the_empty_pipeline_goal_is_met_only_within_the_runs_own_spread():
    def row(value: float, spread: float, key: str = "us") -> dict[str, float]:
        return {key: value, "spread": spread}

    part = {"in_process": {"no middleware": row(5.0, 1.03), "no middleware, before": row(4.95, 1.02)},
            "http": {"no middleware": row(41.0, 1.1, "cpu_us"), "no middleware, before": row(40.0, 1.2, "cpu_us")}}
    goal = [line for line in report.table_goals({"middleware": part}).splitlines() if "pipeline" in line]
    assert goal == ["| an empty middleware pipeline not measurable (within the run's spread) | in process 1.010x the "
                    "commit before the pipeline (spread 1.03x); over HTTP 1.025x the commit before the pipeline "
                    "(spread 1.20x) | yes |"]
    part["in_process"]["no middleware"] = row(5.5, 1.03)  # 11% slower, past a 3% spread: measurable
    assert report.table_goals({"middleware": part}).splitlines()[-1].endswith("| no |")
    assert report.table_goals({"middleware": {"in_process": {}, "http": {}}}).splitlines()[-1].endswith("| no |")

def test_the_goals_name_the_table_answered_ceiling_and_the_legacy_cpu_when_measured():
    """The rows that say "no" carry the measurement that says why, when the run took it (and old records render)."""
    floor = {"per_second": 60_000.0}
    http = {"flows": {"ask": {"mrtr serve, defaults": {"vs_sdk_defaults_wrk": 7.0}}},
            "requests": {"mrtr serve, defaults": {"vs_floor_httptools": 0.28, **floor},
                         report.TABLE_ROW: {"vs_floor_httptools": 0.35, **floor}},
            "table": {"ask": {"vs_sdk_defaults_wrk": 8.5}}}
    legacy = {"flows": {"mrtr native, 1 worker": {"vs_sdk": 6.4, "vs_sdk_cpu": 9.1, "server_cpu_us_per_conversation": 330.0,
                                                  "client_cpu_us_per_conversation": 410.0}}}
    lines = report.table_goals({"http": http, "legacy": legacy}).splitlines()
    assert any("0.28x (its calls answered from a table: 0.35x) | no |" in line for line in lines)
    assert any("7.00x (its calls answered from a table: 8.50x) | no |" in line for line in lines)
    assert any("6.40x by rate, 9.10x by server CPU per conversation (the load generator spent 410 µs per "
               "conversation, the server 330) | no |" in line for line in lines)
    del http["table"], http["requests"][report.TABLE_ROW]
    for key in ("vs_sdk_cpu", "server_cpu_us_per_conversation", "client_cpu_us_per_conversation"):
        del legacy["flows"]["mrtr native, 1 worker"][key]
    lines = report.table_goals({"http": http, "legacy": legacy}).splitlines()
    assert any(line.endswith("| 0.28x | no |") for line in lines)
    assert any(line.endswith("| 6.40x by rate | no |") for line in lines)


def test_the_profile_counts_trio_under_a_session_frame_as_trio_and_the_sessions_own_time_as_theirs():
    from benchmarks.profile import group

    def frame(name: str, path: str) -> str:
        return f"{name} ({path}:1)"

    run = [frame("run", "trio/_core/_run.py"), frame("_Connection.serve", "mrtr/transports/http/native.py")]
    stream = [*run, frame("HttpSessions._call", "mrtr/transports/http/sessions.py"),
              frame("pump", "mrtr/transports/http/streams.py")]
    assert group(stream).startswith("2025 sessions")
    assert group([*stream, frame("CancelScope.__exit__", "trio/_core/_run.py")]).startswith("trio scheduling")
    assert group([*stream, frame("_Connection.write", "mrtr/transports/http/native.py")]).startswith("socket")
    assert group([*stream, frame("LegacyEra.respond", "mrtr/server/legacy.py")]).startswith("MCP server")
    exchange_watch = [*run, frame("_watch", "mrtr/transports/http/exchange.py")]
    assert group(exchange_watch).startswith("exchange and connection loop")


def test_the_compiled_benchmarks_adjustments_still_apply(tmp_path):
    """benchmarks.compiled edits a copy of the package before mypyc builds it: a moved anchor must fail here, not there."""
    import shutil

    from benchmarks.compiled import PACKAGE, adjust

    shutil.copytree(PACKAGE, tmp_path / "mrtr", ignore=shutil.ignore_patterns("__pycache__"))
    adjust(tmp_path)
    structs = (tmp_path / "mrtr" / "core" / "_structs.py").read_text()
    compile(structs, "_structs.py", "exec")
    assert "class Slot(msgspec.Struct" in structs and "class RequestState(msgspec.Struct" in structs
    assert "from ._structs import Slot" in (tmp_path / "mrtr" / "core" / "ledger.py").read_text()
    assert "from ._structs import RequestState" in (tmp_path / "mrtr" / "core" / "codec.py").read_text()
    assert (tmp_path / "mrtr" / "core" / "effects.py").read_text().count("@_mypyc_attr(native_class=False)") == 2
