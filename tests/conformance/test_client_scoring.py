"""How the client conformance run scores a scenario: a client that did not finish has failed it."""

from __future__ import annotations

from .client_run import score

PASSED = [{"status": "SUCCESS"}, {"status": "SUCCESS"}, {"status": "INFO"}, {"status": "WARNING"}]


def test_a_finished_client_is_scored_by_its_checks() -> None:
    assert score(PASSED, "Test Results:\nPassed: 2/2, 0 failed, 1 warnings\n") == \
        {"SUCCESS": 2, "FAILURE": 0, "WARNING": 1, "SKIPPED": 0}
    assert score([*PASSED, {"status": "FAILURE"}], "")["FAILURE"] == 1


def test_a_client_that_timed_out_or_failed_fails_even_with_every_check_passed() -> None:
    for said in ("⚠️  CLIENT TIMED OUT - Test incomplete", "⚠️  CLIENT EXITED WITH ERROR (code 1)"):
        counts = score(PASSED, f"Passed: 2/2, 0 failed\n{said}\n")
        assert counts["SUCCESS"] == 2 and counts["FAILURE"] == 1, said


def test_a_scenario_without_results_fails() -> None:
    assert score(None, "")["FAILURE"] == 1
