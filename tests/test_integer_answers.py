"""A form's integer field hands the handler an ``int``, whatever number the client wrote.

JSON has one number type: a client may write ``5.0`` for five. The docs promise the handler
an ``int`` for ``Form().integer``, so an integral float becomes the int, in every round (the
first, which checks the answer, and the later ones, which read it back from the token) and
in both eras; any other number (``5.5``, ``1e308``: no integer a ``requestState`` can carry)
is ``-32602`` naming the field.
"""

from __future__ import annotations

import msgspec
import pytest
import trio

from mrtr import Elicit, Form
from mrtr.core.errors import INVALID_PARAMS, InvalidParams
from mrtr.core.schema import requested_schema
from mrtr.server import Server
from mrtr.testing import TEST_SECRET, accept, run

from .legacy.conftest import answering
from .legacy.test_legacy_server import Session, text


def asks_a_number_then_confirms(ctx):
    count = yield Elicit("How many?", Form().integer("n", minimum=0))
    yield Elicit("Sure?", Form().boolean("ok"))  # a second round: the first answer is read back from the token
    value = count.content["n"]
    return f"{type(value).__name__} {value!r}"


class Order(msgspec.Struct):
    n: int


def asks_with_a_struct(ctx):
    order = yield Elicit("How many?", Order)
    yield Elicit("Sure?", Form().boolean("ok"))
    return f"{type(order.value.n).__name__} {order.value.n!r}"


@pytest.mark.parametrize("written", [5.0, 5, -0.0])
def test_an_integral_number_reaches_the_handler_as_an_int_in_every_round(written):
    outcome = run(asks_a_number_then_confirms, answers=[accept(n=written), accept(ok=True)])
    assert outcome.result == f"int {int(written)!r}"
    assert len(outcome.rounds) == 2


def test_a_struct_field_typed_int_gets_the_int_too():
    outcome = run(asks_with_a_struct, answers=[accept(n=7.0), accept(ok=True)])
    assert outcome.result == "int 7"


@pytest.mark.parametrize("written, said", [
    (5.5, "expected an integer, got 5.5"),
    (1e308, "expected an integer within 64 bits, got 1e308"),
    (2.0 ** 64, "expected an integer within 64 bits"),
    # An int a token cannot carry is refused before the handler runs, by the same field name.
    (-(2 ** 63) - 1, "holds an integer outside the 64-bit range a requestState can carry"),
])
def test_any_other_number_is_invalid_params_naming_the_field(written, said):
    with pytest.raises(InvalidParams, match='field "n"') as raised:
        run(asks_a_number_then_confirms, answers=[accept(n=written), accept(ok=True)])
    assert said in raised.value.message and raised.value.code == INVALID_PARAMS


def test_the_schema_gives_back_ints_and_leaves_number_fields_as_written():
    compiled = requested_schema(Form().integer("n").number("x"))
    answer = compiled.validate({"n": 3.0, "x": 3.0})
    assert answer == {"n": 3, "x": 3.0} and type(answer["n"]) is int and type(answer["x"]) is float
    unchanged = {"n": 3, "x": 1.5}
    assert compiled.validate(unchanged) is unchanged  # nothing to turn: the same object, no copy


# -- the 2025 era: the handler waits live, the answer comes in a response -----------------------

legacy_server = Server("integers", "1.0.0", secret=TEST_SECRET)
legacy_server.tool(asks_a_number_then_confirms)


def answers(first):
    def answer(request):
        if request["params"]["message"] == "How many?":
            return {"action": "accept", "content": {"n": first}}
        return {"action": "accept", "content": {"ok": True}}
    return answer


async def test_a_legacy_session_hands_the_handler_an_int():
    session = Session(legacy_server)
    await session.open()
    result = await session.call("asks_a_number_then_confirms", answer=answers(5.0))
    assert text(result) == "int 5"


async def test_a_legacy_session_refuses_any_other_number_naming_the_field():
    session = Session(legacy_server)
    await session.open()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(answering, session.wire, answers(1e308))
        error = await session.error("tools/call", {"name": "asks_a_number_then_confirms", "arguments": {}})
        nursery.cancel_scope.cancel()
    assert error["code"] == INVALID_PARAMS
    assert 'field "n": expected an integer within 64 bits, got 1e308' in error["message"]
