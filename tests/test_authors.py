"""The mistakes handler authors make, and the models they already have: each reported where it happens.

A declined answer's content, a form a Struct cannot express, a group holding a
non-request, a schema that changed between rounds, a name registered twice, a bare
``except:`` around a yield; pydantic models as forms, tool arguments and results; the
test helpers (a fixed key, questions found by key or message); what a server shows a
client by default, with ``debug`` and with ``mask_errors=False``.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Annotated, Literal

import msgspec
import pydantic
import pytest

import mrtr
from mrtr import Elicit, Form, PublicError, Step
from mrtr.core import forms as schema_module
from mrtr.core.errors import HandlerError, ReplayMismatch
from mrtr.server import Server
from mrtr.testing import TEST_SECRET, NotDeterministic, ScriptExhausted, accept, cancel, decline, run

from .conftest import line_of

HERE = __file__


# -- a declined answer's content -----------------------------------------------------------


def register(plan: str):
    email = yield Elicit("Your email?", Form().string("email"))
    return f"Registered {email.content['email']} on {plan}"


def register_checked(plan: str):
    email = yield Elicit("Your email?", Form().string("email"))
    if not email.accepted:
        return "Registration cancelled"
    return f"Registered {email.content['email']} on {plan}"


@pytest.mark.parametrize("answer, word", [(decline(), "declined"), (cancel(), "cancelled")])
def test_reading_the_content_of_a_declined_answer_names_the_question_the_line_and_the_fix(answer, word):
    with pytest.raises(HandlerError) as caught:
        run(register, {"plan": "pro"}, answers=[answer])
    line = line_of(register, "email.content")
    assert caught.value.message == (
        f"handler register used `.content` of the answer to Elicit('Your email?', ...) (key \"elicit-1\"), which "
        f"the user {word}, at {HERE}:{line} (TypeError: 'NoneType' object is not subscriptable): a declined or "
        "cancelled answer has no content (`.content` and `.value` are None); check `email.accepted` first and "
        "handle decline and cancel, which are answers too and are never asked again"
    )
    assert caught.value.location == f"{HERE}:{line}"
    assert isinstance(caught.value.__cause__, TypeError)


def test_a_handler_that_checks_accepted_works_unchanged():
    assert run(register_checked, {"plan": "pro"}, answers=[decline()]).result == "Registration cancelled"
    assert run(register_checked, {"plan": "pro"}, answers=[accept(email="a@b.c")]).result == "Registered a@b.c on pro"


class Shipping(msgspec.Struct):
    street: str


def group_of_answers():
    answers = yield {"who": Elicit("Who?", Form().string("name")), "where": Elicit("Where?", Shipping)}
    return f"{answers['who'].content['name']} at {answers['where'].value.street}"


def test_in_a_group_the_member_whose_value_was_used_is_named():
    with pytest.raises(HandlerError) as caught:
        run(group_of_answers, answers={"who": accept(name="Ada"), "where": decline()})
    message = caught.value.message
    assert message.startswith("handler group_of_answers used `.value` of the answer to Elicit('Where?', ...) "
                              '(key "where"), which the user declined, at ')
    assert "check `answers['where'].accepted` first" in message


def test_a_none_error_that_is_no_answer_keeps_its_own_message():
    def handler():
        answer = yield Elicit("Name?", Form().string("name"))
        missing = None
        return answer.content["name"] + missing["x"]

    with pytest.raises(HandlerError) as caught:
        run(handler, answers=[accept(name="Ada")])
    assert caught.value.message == "TypeError: 'NoneType' object is not subscriptable"


# -- a form a Struct cannot express ---------------------------------------------------------


class Expense(msgspec.Struct):
    amount: Annotated[float, msgspec.Meta(gt=0)]


def ask_expense():
    expense = yield Elicit("How much?", Expense)
    return expense.value.amount


def test_a_struct_the_form_cannot_express_points_at_the_handlers_yield():
    with pytest.raises(HandlerError) as caught:
        run(ask_expense)
    line = line_of(ask_expense, "yield Elicit")
    assert caught.value.location == f"{HERE}:{line}"
    assert caught.value.message == (
        f"handler ask_expense asked at {HERE}:{line} with a form that cannot be expressed: Expense.amount: gt, lt "
        "and multiple_of cannot be expressed in an elicitation form (only inclusive ge/le bounds); an elicitation "
        "form is flat (see docs/handlers.md, Schemas)"
    )
    assert isinstance(caught.value.__cause__, schema_module.FormTypeError)


class Odd(msgspec.Struct):
    when: dt.tzinfo


def test_a_tool_whose_return_type_has_no_schema_is_refused_at_registration_naming_it():
    server = Server("x", secret=b"k" * 32)

    def report() -> Odd:
        return Odd(dt.timezone.utc)

    with pytest.raises(TypeError) as caught:
        server.tool(report)
    assert str(caught.value).startswith(f"tool report ({HERE}:{line_of(report, 'def report')}): its return type ")
    assert "has no JSON Schema" in str(caught.value)


# -- groups and registrations -----------------------------------------------------------------


def test_a_group_holding_a_non_request_names_what_it_holds_and_the_line():
    def handler():
        answers = yield (Elicit("Name?", Form().string("name")), "and your age?")
        return answers

    with pytest.raises(HandlerError) as caught:
        run(handler)
    line = line_of(handler, "yield (")
    assert caught.value.message == (
        f"handler test_a_group_holding_a_non_request_names_what_it_holds_and_the_line.<locals>.handler at "
        f"{HERE}:{line}: a group yield (tuple of 2) may only hold requests, and its member #2 is str "
        "'and your age?', which is not a request; build each member with Elicit, ElicitURL, Sample or ListRoots"
    )
    assert caught.value.location == f"{HERE}:{line}"


def test_a_step_in_a_group_is_named_as_what_it_is():
    def handler():
        yield {"name": Elicit("Name?", Form().string("name")), "now": Step(dt.datetime.now)}

    with pytest.raises(HandlerError) as caught:
        run(handler)
    assert "its member 'now' is Step(now, ...): a Step cannot be a group member; yield it on its own" \
        in caught.value.message


@pytest.mark.parametrize("kind", ["tool", "prompt", "resource"])
def test_a_name_registered_twice_names_both_registrations(kind):
    server = Server("x", secret=b"k" * 32)

    def first() -> str:
        return "a"

    def second() -> str:
        return "b"

    register_as = {"tool": lambda fn: server.tool(name="same")(fn), "prompt": lambda fn: server.prompt("same")(fn),
                   "resource": lambda fn: server.resource("notes://same")(fn)}[kind]
    register_as(first)
    with pytest.raises(ValueError) as caught:
        register_as(second)
    what = "at 'notes://same'" if kind == "resource" else "named 'same'"
    prefix = "test_a_name_registered_twice_names_both_registrations.<locals>."
    assert str(caught.value).startswith(
        f"a {kind} {what} is already registered, by {prefix}first ({HERE}:{line_of(first, 'def first')}); "
        f"{prefix}second ({HERE}:{line_of(second, 'def second')}) registers it again. Give one of them another name")


# -- a replay mismatch on the schema ----------------------------------------------------------


def test_a_schema_mismatch_says_which_property_and_keyword_changed_old_and_new():
    rounds = iter([["mon 10:00", "mon 11:00"], ["mon 10:00"]])

    def book():
        slots = next(rounds)
        choice = yield Elicit("Which slot?", Form().choice("slot", slots).integer("people", maximum=len(slots) * 4))
        return choice.content["slot"]

    with pytest.raises(ReplayMismatch) as caught:
        run(book, answers=[accept(slot="mon 10:00", people=2)])
    lines = caught.value.message.splitlines()
    assert "  changed: requestedSchema" in lines
    assert '  requestedSchema: property "slot", enum: ["mon 10:00","mon 11:00"] -> ["mon 10:00"]' in lines
    assert '  requestedSchema: property "people", maximum: 8 -> 4' in lines
    assert ("  why: the request's requestedSchema differs from the recorded run; build it from the arguments, "
            "answers or Step values, not from data that changes between rounds (a choice list read outside a "
            "Step, say)") in lines
    assert "differ from" not in caught.value.message.replace("differs from", "")


def test_a_schema_compiled_in_another_process_is_shown_as_it_is_now(monkeypatch):
    monkeypatch.setattr(schema_module, "_SEEN", {})
    monkeypatch.setattr(schema_module, "_remember", lambda digest, canonical: None)
    rounds = iter([["a", "b"], ["a"]])

    def pick():
        yield Elicit("Pick", Form().choice("x", next(rounds)))

    with pytest.raises(ReplayMismatch) as caught:
        run(pick, answers=[accept(x="a")])
    assert ('  requestedSchema now: {"properties":{"x":{"enum":["a"],"type":"string"}},"required":["x"],'
            '"type":"object"} (the recorded one was compiled in another process, and a token keeps only its '
            'fingerprint)') in caught.value.message.splitlines()


def test_a_masked_mismatch_keeps_its_code_data_and_contract_and_drops_the_handlers_files():
    counter = iter(range(10))

    def handler():
        yield Elicit(f"Question {next(counter)}?", Form().string("a"))

    with pytest.raises(ReplayMismatch) as caught:
        run(handler, answers=[accept(a="x")])
    full, brief = caught.value, caught.value.masked()
    assert isinstance(brief, ReplayMismatch) and brief.code == full.code == -32602 and brief.data == full.data
    assert HERE in full.message and HERE not in brief.message and "Question" not in brief.message
    assert brief.message.splitlines() == [full.message.splitlines()[0], "  changed: message",
                                          full.message.splitlines()[-1]]
    assert brief.masked() is brief


# -- a bare except around a yield ---------------------------------------------------------------


@pytest.mark.slow
def test_a_handler_that_swallows_generator_exit_gets_only_our_message_on_stderr(tmp_path):
    script = tmp_path / "swallow.py"
    script.write_text(textwrap.dedent("""
        import gc
        from mrtr import Elicit, Form
        from mrtr.core.errors import HandlerError
        from mrtr.testing import run

        def retrying():
            while True:
                try:
                    answer = yield Elicit("Your email?", Form().string("email"))
                    return answer.content["email"]
                except:
                    continue

        async def aretrying():
            while True:
                try:
                    answer = yield Elicit("Your email?", Form().string("email"))
                    yield answer.content["email"]
                except:
                    continue

        for handler in (retrying, aretrying):
            try:
                run(handler)
            except HandlerError as error:
                print(error.message)
            gc.collect()
    """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert [line.split(" ignored GeneratorExit")[0] for line in done.stdout.splitlines()] == [
        "handler retrying", "handler aretrying"]


# -- pydantic models --------------------------------------------------------------------------------


class Address(pydantic.BaseModel):
    street: str = pydantic.Field(min_length=1, title="Street")
    city: str = pydantic.Field(description="The city")
    express: bool = False
    kind: Literal["home", "work"] = "home"


class Receipt(pydantic.BaseModel):
    id: int
    total: float


class Claim(pydantic.BaseModel):
    amount: float = pydantic.Field(ge=0)
    note: str | None = None


def test_a_pydantic_model_is_a_form_like_the_struct_it_is_equivalent_to():
    class AddressStruct(msgspec.Struct, kw_only=True):
        street: Annotated[str, msgspec.Meta(min_length=1, title="Street")]
        city: Annotated[str, msgspec.Meta(description="The city")]
        express: bool = False
        kind: Literal["home", "work"] = "home"

    assert Elicit("Where?", Address).requested.schema == Elicit("Where?", AddressStruct).requested.schema

    def ship():
        answer = yield Elicit("Where?", Address)
        return answer.value

    value = run(ship, answers=[accept(street="1 Main St", city="Oslo")]).result
    assert isinstance(value, Address) and value == Address(street="1 Main St", city="Oslo")


def test_a_pydantic_form_refuses_what_a_struct_form_refuses_with_the_same_words():
    class Nested(pydantic.BaseModel):
        home: Address

    class NestedStruct(msgspec.Struct):
        home: Shipping

    class Positive(pydantic.BaseModel):
        amount: float = pydantic.Field(gt=0)

    for model, struct in ((Nested, NestedStruct), (Positive, Expense)):
        with pytest.raises(TypeError) as from_model:
            Elicit("?", model)
        with pytest.raises(TypeError) as from_struct:
            Elicit("?", struct)
        assert str(from_model.value).split(":", 1)[1] == str(from_struct.value).split(":", 1)[1]
        assert str(from_model.value).startswith(f"{model.__name__}.")


def test_a_pydantic_validator_runs_on_the_answer_and_its_refusal_is_invalid_params():
    class Upper(pydantic.BaseModel):
        code: str

        @pydantic.field_validator("code")
        @classmethod
        def upper(cls, value: str) -> str:
            if value != value.upper():
                raise ValueError("must be upper case")
            return value

    def handler():
        answer = yield Elicit("Code?", Upper)
        return answer.value.code

    assert run(handler, answers=[accept(code="AB")]).result == "AB"
    with pytest.raises(mrtr.InvalidParams) as caught:
        run(handler, answers=[accept(code="ab")])
    assert "does not convert to Upper: code: Value error, must be upper case" in caught.value.message


async def test_pydantic_tool_arguments_and_results_go_through_a_server():
    server = Server("models", secret=b"k" * 32)

    @server.tool
    def claim(claim: Claim, who: str = "me") -> Receipt:
        """File a ``claim``."""
        return Receipt(id=7, total=claim.amount)

    (definition,) = server.tool_definitions()
    assert definition["description"] == "File a claim."
    assert definition["inputSchema"]["properties"]["claim"] == Claim.model_json_schema()
    assert definition["inputSchema"]["required"] == ["claim"]
    assert definition["outputSchema"]["properties"] == Receipt.model_json_schema(mode="serialization")["properties"]
    async with mrtr.Client(server) as client:
        result = await client.call_tool("claim", {"claim": {"amount": 12.5}})
        assert result.structured == {"id": 7, "total": 12.5} and json.loads(result.text) == result.structured
        with pytest.raises(mrtr.ClientError) as caught:
            await client.call_tool("claim", {"claim": {"amount": -1}})
    assert caught.value.code == -32602
    assert caught.value.message == ("Invalid arguments for tool claim: `claim`: amount: Input should be greater "
                                    "than or equal to 0")


def test_a_step_may_return_a_pydantic_model():
    def make() -> Receipt:
        return Receipt(id=1, total=2.0)

    def handler():
        receipt = yield Step(make)
        answer = yield Elicit(f"Keep receipt {receipt.id}?", Form().boolean("ok"))
        return (receipt, answer.content["ok"])

    receipt, ok = run(handler, answers=[accept(ok=True)]).result
    assert receipt == Receipt(id=1, total=2.0) and ok is True


@pytest.mark.slow
def test_a_pydantic_1_model_and_a_missing_pydantic_name_the_extra(tmp_path):
    from pydantic import v1

    class Old(v1.BaseModel):
        x: int

    with pytest.raises(TypeError, match=r"pydantic 1 model .*pip install 'mrtr\[pydantic\]'"):
        Elicit("?", Old)
    script = tmp_path / "missing.py"
    script.write_text(textwrap.dedent("""
        import sys
        sys.modules["pydantic"] = None  # as if it were not installed
        BaseModel = type("BaseModel", (), {"__module__": "pydantic.main"})
        class Model(BaseModel):
            pass
        from mrtr import Elicit
        try:
            Elicit("?", Model)
        except ImportError as error:
            print(error)
    """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False)
    assert done.stdout.startswith("pydantic models need pydantic 2: pip install 'mrtr[pydantic]' (pydantic 2)")


@pytest.mark.slow
def test_pydantic_is_not_imported_until_a_model_is_used():
    probe = "import sys, mrtr, mrtr.server, mrtr.testing; print('pydantic' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "False"


# -- test helpers ---------------------------------------------------------------------------------


def onboard(company: str):
    plans = yield Step(lambda: ["free", "pro"])
    plan = yield Elicit("Which plan?", Form().choice("plan", plans))
    admin = yield Elicit("Admin email?", Form().string("email"), key="admin")
    return f"{company}: {plan.content['plan']} for {admin.content['email']}"


def test_answers_can_name_questions_by_message_or_key():
    outcome = run(onboard, {"company": "Acme"}, answers={"Which plan?": accept(plan="pro"),
                                                         "admin": accept(email="a@acme.test")})
    assert outcome.result == "Acme: pro for a@acme.test"
    assert outcome.request("Which plan?").key is None and outcome.asked == [["elicit-2"], ["admin"]]
    assert outcome.request("admin").message == "Admin email?"
    assert outcome.answer("Which plan?") == {"action": "accept", "content": {"plan": "pro"}}
    assert outcome.rounds[0].request("elicit-2") is outcome.request("Which plan?")
    with pytest.raises(KeyError) as caught:
        outcome.request("Plan?")
    assert caught.value.args[0] == ("no request with the key or message 'Plan?' was asked; asked: "
                                    "elicit-2 ('Which plan?'), admin ('Admin email?')")


def test_a_question_the_answers_do_not_name_and_a_name_never_asked_fail_the_run():
    with pytest.raises(ScriptExhausted, match=r"the answers name no question asked in round 2: admin \('Admin "
                                              r"email\?'\); they answer \['Which plan\?'\]"):
        run(onboard, {"company": "Acme"}, answers={"Which plan?": accept(plan="pro")})
    with pytest.raises(AssertionError, match=r"completed without asking \['Wich plan\?'\]"):
        run(onboard, {"company": "Acme"}, answers={"Which plan?": accept(plan="pro"), "Wich plan?": decline(),
                                                   "admin": accept(email="a@acme.test")})


def test_determinism_checks_still_name_the_cause_with_answers_by_message():
    def clocked():
        yield Elicit(f"Now {dt.datetime.now().isoformat()}?", Form().string("a"))

    with pytest.raises(NotDeterministic):
        run(clocked, answers=lambda request: accept(a="x"), check_determinism=True)


@pytest.mark.slow
def test_use_test_key_makes_a_server_test_run_silent(tmp_path):
    script = tmp_path / "quiet.py"
    script.write_text(textwrap.dedent("""
        import os, warnings, trio, mrtr
        from mrtr.testing import TEST_SECRET, use_test_key
        warnings.simplefilter("error")
        use_test_key()
        assert os.environ["MRTR_SECRET"] == TEST_SECRET
        server = mrtr.Server("quiet")

        @server.tool
        def greet():
            answer = yield mrtr.Elicit("Name?", mrtr.Form().string("name"))
            return "hi " + answer.content["name"]

        async def main():
            async with mrtr.Client(server, on_elicit=lambda request: mrtr.accept(name="Ada")) as client:
                print((await client.call_tool("greet")).text)

        trio.run(main)
    """))
    env = {key: value for key, value in __import__("os").environ.items() if key != "MRTR_SECRET"}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False,
                          env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hi Ada\n" and "EphemeralKeyWarning" not in done.stderr and "MRTR_SECRET" not in done.stderr


def test_use_test_key_keeps_a_key_already_configured(monkeypatch):
    monkeypatch.setenv("MRTR_SECRET", "a" * 43 + "=")
    mrtr.testing.use_test_key()
    import os

    assert os.environ["MRTR_SECRET"] == "a" * 43 + "=" != TEST_SECRET


# -- what a server shows its clients ------------------------------------------------------------------


def _failing_server(**options) -> Server:
    server = Server("shown", secret=b"k" * 32, **options)

    @server.tool
    def crash() -> str:
        raise OSError("/etc/expenses.conf: permission denied")

    @server.tool
    def deny() -> str:
        raise PublicError("You may not file expenses for another team")

    @server.prompt
    def brief() -> str:
        raise PublicError("No briefing today")

    return server


@pytest.mark.parametrize("options, shown", [
    ({}, False), ({"debug": True}, True), ({"mask_errors": False}, True), ({"debug": True, "mask_errors": True}, False),
])
async def test_what_reaches_the_client_depends_on_masking_and_debug(options, shown, monkeypatch):
    monkeypatch.delenv("MRTR_DEBUG", raising=False)
    async with mrtr.Client(_failing_server(**options)) as client:
        crashed = await client.call_tool("crash")
        denied = await client.call_tool("deny")
        with pytest.raises(mrtr.ClientError) as prompt:
            await client.get_prompt("brief")
    assert ("OSError: /etc/expenses.conf: permission denied" == crashed.text) is shown
    assert ("/etc" in crashed.text) is shown
    assert denied.text == "You may not file expenses for another team"
    assert prompt.value.code == -32603 and prompt.value.message == "No briefing today"


async def test_mrtr_debug_in_the_environment_shows_everything(monkeypatch):
    monkeypatch.setenv("MRTR_DEBUG", "1")
    server = _failing_server()
    assert server.debug is True and server.mask_errors is False
    monkeypatch.setenv("MRTR_DEBUG", "0")
    assert _failing_server().mask_errors is True


def test_public_error_needs_a_message():
    with pytest.raises(TypeError):
        PublicError("")


def test_the_docs_name_every_new_mistake():
    text = (Path(__file__).resolve().parents[1] / "docs" / "handlers.md").read_text()
    for phrase in ("which the user declined", "a form that cannot be expressed", "may only hold requests",
                   "is already registered, by", "requestedSchema: property", "PublicError", "use_test_key",
                   "key="):
        assert phrase in text, phrase


def test_a_task_that_meets_a_replay_mismatch_fails_with_its_masked_form():
    def drifting():
        yield Elicit(f"Question {next(counter)}?", Form().string("a"))

    counter = iter(range(10))
    with pytest.raises(ReplayMismatch) as caught:
        run(drifting, answers=[accept(a="x")])
    for options, full in (({}, False), ({"debug": True}, True)):
        server = Server("tasks", secret=b"k" * 32, tasks_url="memory:", **options)

        @server.tool(task="optional")
        def background() -> str:
            return "done"

        error = server.task_binding("background", {}).refused(caught.value)
        assert error["code"] == -32602 and error["data"] == caught.value.data
        assert (HERE in error["message"]) is full and error["message"].startswith("MRTR replay mismatch at ordinal #1")
