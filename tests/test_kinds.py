"""The table of request kinds (mrtr.core.kinds) is what every layer reads.

Each kind in the table is walked through everything that handles it: the effect a
handler yields, the wire types, the ledger's default key and answer decoding, the
replay core's delivery, the testing helpers' capabilities and the client's request
objects, capabilities and answer parsing. A kind added to the table without one of
those, or an effect, wire type or client request object without a row, fails here.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

import mrtr
from mrtr import Context, Elicit, ElicitResult, ElicitURL, Form, ListRoots, Request, Sample
from mrtr.client import InputRequest as ClientRequest
from mrtr.core import wire
from mrtr.core.effects import Patched, Step
from mrtr.core.kinds import ASKED, KINDS, REQUEST_KINDS, Kind, decode_input_response, kind_of
from mrtr.core.ledger import Ledger, decode_answer, default_key, merge_answers
from mrtr.core.replay import Completed, InputRequired, replay
from mrtr.server import Server
from mrtr.testing import ALL_CAPABILITIES


class Example:
    """One effect of a kind, how a client answers it, and what the handler must then receive."""

    def __init__(self, effect: Callable[[], Request], reply: Any, received: Callable[[Any], bool]) -> None:
        self.effect = effect
        self.reply = reply  # what the client's answerer returns (shorthands included)
        self.received = received


EXAMPLES = {
    "form": Example(lambda: Elicit("Name?", Form().string("name")), mrtr.accept(name="Ada"),
                    lambda got: isinstance(got, ElicitResult) and got.value == {"name": "Ada"}),
    "url": Example(lambda: ElicitURL("Sign in", "https://example.com/login"), mrtr.accept(),
                   lambda got: isinstance(got, ElicitResult) and got.accepted and got.content is None),
    "sampling": Example(lambda: Sample("Say hi", max_tokens=5), "hi",
                        lambda got: isinstance(got, wire.CreateMessageResult) and got.content.text == "hi"),
    "roots": Example(lambda: ListRoots(), ["file:///srv"],
                     lambda got: isinstance(got, wire.ListRootsResult) and got.roots[0].uri == "file:///srv"),
}


def test_the_table_has_a_row_per_kind_and_its_codes_never_change():
    assert set(KINDS) == set(Kind)
    assert {kind: int(kind) for kind in Kind} == {Kind.ELICIT: 0, Kind.SAMPLE: 1, Kind.ROOTS: 2, Kind.STEP: 3,
                                                  Kind.PATCH: 4}
    assert all(row.kind is kind for kind, row in KINDS.items())
    prefixes = [row.key_prefix for row in KINDS.values()]
    assert len(set(prefixes)) == len(prefixes)
    assert [row.kind for row in REQUEST_KINDS] == [Kind.ELICIT, Kind.SAMPLE, Kind.ROOTS]
    assert ASKED == {int(row.kind) for row in REQUEST_KINDS}
    assert KINDS[Kind.STEP].method is None and default_key(Kind.STEP, 2) == "step-2"
    assert KINDS[Kind.PATCH].method is None and KINDS[Kind.PATCH].label == "Patched"


def test_the_kinds_no_client_answers_are_never_issued_under_a_wire_key():
    def handler(ctx: Context) -> Any:
        yield Patched("p1")
        yield Step(lambda: 1)
        answer = yield Elicit("Name?", Form().string("name"))
        return answer.value

    asked = replay(handler, {}, Context({}, client_capabilities=ALL_CAPABILITIES), Ledger())
    assert isinstance(asked, InputRequired)
    assert [Kind(slot.kind) for slot in asked.ledger.slots] == [Kind.PATCH, Kind.STEP, Kind.ELICIT]
    assert asked.ledger.index_of_key() == {"elicit-3": 2}


def test_every_kind_has_its_wire_types_and_the_unions_hold_no_other():
    assert {row.request for row in REQUEST_KINDS} == set(typing.get_args(wire.InputRequest))
    assert {row.answer for row in REQUEST_KINDS} == set(typing.get_args(wire.InputResponse))
    for row in REQUEST_KINDS:
        assert row.request is not None and row.request.method == row.method
        assert kind_of(row.method) is row  # type: ignore[arg-type]
    with pytest.raises(msgspec.ValidationError):
        decode_input_response("tools/call", {})


def test_every_effect_client_request_and_example_names_a_kind_of_the_table():
    effects = {cls for cls in _subclasses(Request) if "kind" in cls.__dict__ and cls.__module__.startswith("mrtr.")}
    examples = [example.effect() for example in EXAMPLES.values()]
    assert effects == {type(effect) for effect in examples}, "every Request subclass needs an example here"
    assert {effect.kind for effect in examples} == {row.kind for row in REQUEST_KINDS}
    assert {cls.kind for cls in typing.get_args(ClientRequest)} == {row.kind for row in REQUEST_KINDS}
    assert set(ALL_CAPABILITIES) == {row.capability for row in REQUEST_KINDS}


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_a_kind_goes_from_the_effect_through_the_ledger_and_back(name):
    example = EXAMPLES[name]
    effect = example.effect()
    row = KINDS[effect.kind]
    assert effect.method == row.method
    assert msgspec.convert(effect.to_wire(), row.request).method == row.method  # type: ignore[arg-type]
    missing = effect.missing_capability({})
    assert missing is not None and set(missing) == {row.capability}
    assert effect.missing_capability(ALL_CAPABILITIES) is None

    def handler(ctx: Context) -> Any:
        got = yield effect
        return example.received(got)

    ctx = Context({}, client_capabilities=ALL_CAPABILITIES)
    asked = replay(handler, {}, ctx, Ledger())
    assert isinstance(asked, InputRequired) and list(asked.requests) == [default_key(row.kind, 1)]
    assert list(asked.to_wire()) == [row.key_prefix + "1"]
    answer = _wire_answer(example.reply, row.kind)
    ledger, _ = merge_answers(asked.ledger, {row.key_prefix + "1": answer})
    assert ledger.slots[0].kind == row.kind and ledger.slots[0].answered
    assert decode_answer(row.kind, "k", answer) == ledger.slots[0].answer
    done = replay(handler, {}, Context({}, client_capabilities=ALL_CAPABILITIES), ledger)
    assert isinstance(done, Completed) and done.result is True


@pytest.mark.parametrize("name", list(EXAMPLES))
async def test_a_kind_is_declared_answered_and_parsed_by_the_client(name):
    example = EXAMPLES[name]
    row = KINDS[example.effect().kind]
    server = Server("kinds", secret=b"k" * 32)
    asked: list[Any] = []

    @server.tool
    def ask(ctx: Context) -> Any:
        got = yield example.effect()
        return "yes" if example.received(got) else f"no: {got!r}"

    def answer(item: Any) -> Any:
        asked.append(item)
        return example.reply

    answerers = {Kind.ELICIT: "on_elicit", Kind.SAMPLE: "on_sample", Kind.ROOTS: "on_roots"}
    client = mrtr.Client(server, elicitation_modes=("form", "url"), tasks=False, **{answerers[row.kind]: answer})
    assert set(client.capabilities()) == {row.capability}
    async with client:
        result = await client.call_tool("ask")
    assert result.text == "yes"
    assert [(item.kind, item.key) for item in asked] == [(row.kind, row.key_prefix + "1")]


def _wire_answer(reply: Any, kind: Kind) -> Any:
    """The answer in wire shape, as the client makes it from an answerer's shorthand."""
    if kind is Kind.SAMPLE and isinstance(reply, str):
        return mrtr.client.sampled(reply, model="m")
    if kind is Kind.ROOTS and isinstance(reply, list):
        return mrtr.client.roots(*reply)
    return reply


def _subclasses(cls: type) -> set[type]:
    found = set()
    for sub in cls.__subclasses__():
        found |= {sub, *_subclasses(sub)}
    return found
