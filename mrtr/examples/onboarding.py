"""An onboarding wizard: sequential questions, one group round, a Step, decline handling.

Run ``python -m mrtr.examples.onboarding`` to watch a scripted conversation round by
round, with no server involved.
"""

from __future__ import annotations

import json
from typing import Any

from mrtr import Context, Elicit, Form, Step
from mrtr.testing import accept, run

# Stands in for a database: the Step below reads it once per conversation.
PLANS_IN_STORE = {"free": "Free (1 project)", "team": "Team (10 projects)", "scale": "Scale (unlimited)"}


def load_plans() -> dict[str, str]:
    """Read the plans on offer from the store."""
    return dict(PLANS_IN_STORE)


def onboard(ctx: Context, company: str) -> Any:
    """Set up a workspace for ``company``, asking the user what is needed."""
    ctx.progress(1, total=4, message="loading plans")
    plans = yield Step(load_plans)

    who = yield Elicit(
        f"Who is the admin of {company}'s workspace?",
        Form().string("name", title="Full name", min_length=1).string("email", format="email"),
    )
    if not who.accepted:
        return f"Onboarding of {company} stopped: no admin given ({who.action})."
    ctx.progress(2, total=4, message="admin known")

    plan = yield Elicit(
        "Which plan?",
        Form().choice("plan", list(plans), titles=plans),
    )
    if not plan.accepted:
        return f"Onboarding of {company} stopped before choosing a plan."
    ctx.progress(3, total=4, message="plan chosen")

    # One round, two questions.
    region, notify = yield (
        Elicit("Where should your data live?", Form().choice("region", ["eu", "us"])),
        Elicit("How should we reach you?", Form().boolean("newsletter", default=False).choices("channels", ["email", "sms"], min_items=1)),
    )
    ctx.progress(4, total=4, message="done")
    summary = {
        "company": company,
        "admin": who.content["name"],
        "email": who.content["email"],
        "plan": plan.content["plan"],
        "region": region.content["region"] if region.accepted else "eu",
        "channels": notify.content["channels"] if notify.accepted else [],
    }
    return summary


def main() -> None:
    """Run a scripted conversation and print it round by round."""
    script = [
        accept(name="Ada Lovelace", email="ada@example.com"),
        accept(plan="team"),
        accept(region="eu"),
        accept(newsletter=True, channels=["email"]),
    ]
    outcome = run(onboard, {"company": "Analytical Engines"}, answers=script)
    for round_ in outcome.rounds:
        print(f"round {round_.number}: the server asks")
        for key, request in round_.wire().items():
            print(f"  {key}: {request['params']['message']}")
        print("  the client answers")
        for key, answer in round_.answers.items():
            print(f"  {key}: {json.dumps(answer)}")
    print(f"round {len(outcome.rounds) + 1}: complete after {outcome.executions} executions")
    print(json.dumps(outcome.result, indent=2))


if __name__ == "__main__":
    main()
