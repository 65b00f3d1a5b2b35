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
