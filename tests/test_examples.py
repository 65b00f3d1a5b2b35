"""The bundled example server behaves as its documentation says."""

from __future__ import annotations

import pytest
import trio

from mrtr.examples import onboarding
from mrtr.examples.server import server
from mrtr.testing import accept, decline, run

from .conftest import meta
from .wire_schema import validate_message

META = meta({"elicitation": {}})


def test_the_wizard_asks_in_sequence_then_one_group_round_and_reports_progress():
    progress = []
    outcome = run(
        onboarding.onboard, {"company": "Acme"},
        answers=[accept(name="Ada", email="ada@example.com"), accept(plan="team"),
                 accept(region="us"), accept(newsletter=False, channels=["sms"])],
        check_determinism=True,
        notify=lambda method, params: progress.append(params["progress"]),
    )
    assert outcome.result == {"company": "Acme", "admin": "Ada", "email": "ada@example.com", "plan": "team",
                              "region": "us", "channels": ["sms"]}
    assert outcome.asked == [["elicit-2"], ["elicit-3"], ["elicit-4", "elicit-5"]]
    # Each value reaches the client once, in the round that first ran it, so it only moves forward.
    assert progress == [1, 2, 3, 4]
    assert outcome.progress == [(1, 4, "loading plans"), (2, 4, "admin known"), (3, 4, "plan chosen"), (4, 4, "done")]
    assert [n.execution for n in outcome.notifications] == [1, 2, 3, 4]


def test_the_wizard_reads_the_plans_once_and_handles_decline(monkeypatch):
    reads = []
    original = onboarding.load_plans
    monkeypatch.setattr(onboarding, "load_plans", lambda: reads.append(1) or original())
    outcome = run(onboarding.onboard, {"company": "Acme"}, answers=[accept(name="A", email="a@b.io"), decline()])
    assert outcome.result == "Onboarding of Acme stopped before choosing a plan."
    assert len(reads) == 1
    assert "no admin given (cancel)" in run(onboarding.onboard, {"company": "Acme"}, answers=[{"action": "cancel"}]).result


@pytest.mark.filterwarnings("ignore::mrtr.core.codec.EphemeralKeyWarning")  # the example runs without MRTR_SECRET
def test_the_example_prompt_and_resource_elicit_through_the_server():
    async def main():
        prompt = await server.handle({"jsonrpc": "2.0", "id": 1, "method": "prompts/get",
                                      "params": {"name": "review", "arguments": {"language": "Rust"}, "_meta": META}})
        validate_message(prompt, result_def="InputRequiredResult")
        state = prompt["result"]["requestState"]
        done = await server.handle({"jsonrpc": "2.0", "id": 2, "method": "prompts/get", "params": {
            "name": "review", "arguments": {"language": "Rust"}, "_meta": META, "requestState": state,
            "inputResponses": {"elicit-1": accept(focus="performance")}}})
        validate_message(done, result_def="GetPromptResult")
        assert "focusing on performance" in done["result"]["messages"][0]["content"]["text"]
        note = await server.handle({"jsonrpc": "2.0", "id": 3, "method": "resources/read",
                                    "params": {"uri": "notes://welcome", "_meta": META}})
        validate_message(note, result_def="InputRequiredResult")

    trio.run(main)
