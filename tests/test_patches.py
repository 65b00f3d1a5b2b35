"""Patches: new code for new conversations, the old branch for conversations recorded before it.

A conversation's ledger is recorded by one version of a handler and may be replayed by
the next one (a deploy between two rounds). ``yield Patched("id")`` is the gate: ``True``
where the conversation reaches it for the first time under the patched code (a marker
is recorded), ``False`` where the ledger was recorded past it by the old code. Each test
runs the rounds through a real server and the real token codec: round one on a server
serving one version of the handler, the retry on another server (the same key) serving
the next.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any

import msgspec
import pytest

from mrtr import Elicit, Form, HandlerError, Patched, Step
from mrtr.core.codec import RequestState, RequestStateCodec
from mrtr.core.context import Context
from mrtr.core.errors import ReplayMismatch
from mrtr.core.kinds import Kind
from mrtr.core.ledger import Ledger, Slot
from mrtr.core.replay import Completed, InputRequired, replay
from mrtr.core.versions import deploy_hint, handler_version
from mrtr.server import Server
from mrtr.testing import ALL_CAPABILITIES, accept, run

from .conftest import meta
from .wire_schema import validate_message

KEY = b"p" * 32
META = meta({"elicitation": {}})
FORM = Form().string("slot")


def serving(handler: Any, **options: Any) -> Server:
    """A server whose tool ``book`` is ``handler`` (one version of it), sealing with the shared key."""
    server = Server("patches", secret=KEY)
    server.tool(name="book", **options)(handler)
    return server


async def call(server: Server, params: dict[str, Any]) -> dict[str, Any]:
    message = await server.handle({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                   "params": {"name": "book", "arguments": {}, **params, "_meta": META}})
    validate_message(message)
    return message


def answered(asked: dict[str, Any], **answers: Any) -> dict[str, Any]:
    """The retry of an ``input_required`` result with one accepted answer per key."""
    result = asked["result"]
    assert result["resultType"] == "input_required", result
    return {"requestState": result["requestState"],
            "inputResponses": {key: accept(slot=value) for key, value in answers.items()}}


def text(message: dict[str, Any]) -> str:
    assert message["result"]["resultType"] == "complete", message
    return str(message["result"]["content"][0]["text"])


# Three versions of one handler, as three deploys would serve it.

def book_v1():
    first = yield Elicit("Which day?", FORM)
    second = yield Elicit("Which time?", FORM)
    return f"v1 {first.value['slot']} {second.value['slot']}"


def book_v2():
    first = yield Elicit("Which day?", FORM)
    if (yield Patched("ask-room")):
        room = yield Elicit("Which room?", FORM)
        second = yield Elicit("Which time?", FORM)
        return f"v2 {first.value['slot']} {room.value['slot']} {second.value['slot']}"
    second = yield Elicit("Which time?", FORM)
    return f"v2-old {first.value['slot']} {second.value['slot']}"


def book_v3():  # the same change without the gate
    first = yield Elicit("Which day?", FORM)
    room = yield Elicit("Which room?", FORM)
    second = yield Elicit("Which time?", FORM)
    return f"v3 {first.value['slot']} {room.value['slot']} {second.value['slot']}"


async def test_a_conversation_recorded_past_the_gate_takes_the_old_branch():
    v1, v2 = serving(book_v1), serving(book_v2)
    first = await call(v1, {})
    second = await call(v1, answered(first, **{"elicit-1": "mon"}))  # recorded past the gate's point
    done = await call(v2, answered(second, **{"elicit-2": "10:00"}))  # the deploy happened here
    assert text(done) == "v2-old mon 10:00"


async def test_a_conversation_that_reaches_the_gate_under_the_patch_takes_the_new_branch():
    v1, v2 = serving(book_v1), serving(book_v2)
    first = await call(v1, {})  # started on the old code, but not recorded past the gate's point yet
    second = await call(v2, answered(first, **{"elicit-1": "mon"}))
    assert list(second["result"]["inputRequests"]) == ["elicit-3"]  # the marker took ordinal 2
    third = await call(v2, answered(second, **{"elicit-3": "blue"}))
    done = await call(v2, answered(third, **{"elicit-4": "10:00"}))
    assert text(done) == "v2 mon blue 10:00"
    new = await call(v2, {})
    assert text(await call(v2, answered(await call(v2, answered(await call(v2, answered(
        new, **{"elicit-1": "tue"})), **{"elicit-3": "red"})), **{"elicit-4": "9:00"}))) == "v2 tue red 9:00"


async def test_without_the_gate_the_same_deploy_breaks_the_conversation_and_says_so():
    v1, v3 = serving(book_v1), serving(book_v3)
    second = await call(v1, answered(await call(v1, {}), **{"elicit-1": "mon"}))
    broken = await call(v3, answered(second, **{"elicit-2": "10:00"}))
    error = broken["error"]
    assert error["code"] == -32602
    message = error["message"]
    assert message.startswith("MRTR replay mismatch at ordinal #2")
    assert "changed: message" in message
    deploy = message.splitlines()[-1]
    assert deploy.startswith(f"  deploy: handler book_v3 runs version {handler_version(book_v3)} here and this "
                             f"ledger was recorded by version {handler_version(book_v1)}; the edit changed message "
                             "at ordinal #2")
    assert f'`if (yield Patched("book_v3-{handler_version(book_v3)}")): ' in deploy
    assert error["data"]["deploy"] == {"recorded": handler_version(book_v1), "running": handler_version(book_v3),
                                       "patch": f"book_v3-{handler_version(book_v3)}"}
    assert error["data"]["ordinal"] == 2 and error["data"]["changed"] == ["message"]


async def test_a_node_still_running_the_old_code_refuses_a_ledger_with_the_marker_naming_the_patch():
    v1, v2 = serving(book_v1), serving(book_v2)
    second = await call(v2, answered(await call(v2, {}), **{"elicit-1": "mon"}))
    old = await call(v1, answered(second, **{"elicit-3": "blue"}))
    error = old["error"]
    assert error["code"] == -32602
    first_line = error["message"].splitlines()[0]
    assert first_line == ('MRTR replay mismatch at ordinal #2: this ledger position holds the patch marker '
                          '"ask-room", recorded by code that has `yield Patched("ask-room")` here, and this code asks '
                          "elicitation/create instead.")  # what it asks, not the text it built: errors are masked
    assert error["data"]["patch"] == "ask-room" and error["data"]["changed"] == ["patch"]
    assert "finish the deploy" in error["message"] and "test_patches.py" not in error["message"]
    # It says a deploy did it, and that the fix is the version with the gate, not a new patch.
    assert error["data"]["deploy"]["recorded"] == handler_version(book_v2)
    assert error["message"].splitlines()[-1] == (
        f"  deploy: handler book_v1 runs version {handler_version(book_v1)} here and this ledger was recorded by "
        f'version {handler_version(book_v2)}, which has the gate `Patched("ask-room")` at ordinal #2: serve a version '
        "that keeps the gate until no conversation or task recorded with its marker is in flight")


def test_the_marker_costs_a_few_bytes_in_the_ledger():
    asked = replay(book_v2, {}, Context({}, client_capabilities=ALL_CAPABILITIES),
                   Ledger((Slot(int(Kind.ELICIT), Elicit("Which day?", FORM).fingerprint(), None, True,
                                [0, {"slot": "mon"}]),)))
    assert isinstance(asked, InputRequired)
    marker = asked.ledger.slots[1]
    assert (marker.kind, marker.answer, marker.fingerprint) == (Kind.PATCH, "ask-room", b"")
    encoded = msgspec.msgpack.encode(marker)
    assert len(encoded) == len("ask-room") + 7, encoded


def test_the_gate_replays_without_running_anything_again():
    runs: list[str] = []

    def counted() -> str:
        runs.append("ran")
        return "id-1"

    def handler():
        if (yield Patched("steps")):
            ident = yield Step(counted)
        else:
            ident = "old"
        answer = yield Elicit("Sure?", FORM)
        return f"{ident} {answer.value['slot']}"

    outcome = run(handler, answers=[accept(slot="yes")], check_determinism=True)
    assert outcome.result == "id-1 yes" and runs == ["ran"]


def test_a_deprecated_gate_replays_its_marker_and_writes_none():
    def patched():
        if (yield Patched("p")):
            answer = yield Elicit("New?", FORM)
        else:
            answer = yield Elicit("Old?", FORM)
        return answer.value["slot"]

    def deprecated():
        yield Patched("p", deprecated=True)
        answer = yield Elicit("New?", FORM)
        return answer.value["slot"]

    ctx = Context({}, client_capabilities=ALL_CAPABILITIES)
    recorded = replay(patched, {}, ctx, Ledger())
    assert isinstance(recorded, InputRequired) and list(recorded.requests) == ["elicit-2"]
    fresh = replay(deprecated, {}, ctx, Ledger())
    assert isinstance(fresh, InputRequired) and list(fresh.requests) == ["elicit-1"]
    assert [slot.kind for slot in fresh.ledger.slots] == [Kind.ELICIT]  # no marker
    ledger = Ledger(tuple(Slot(s.kind, s.fingerprint, s.key, True, [0, {"slot": "x"}]) if s.kind == Kind.ELICIT
                          else s for s in recorded.ledger.slots), frozenset({1}))
    done = replay(deprecated, {}, ctx, ledger)  # a conversation recorded with the marker still finishes
    assert isinstance(done, Completed) and done.result == "x"


def test_a_gate_without_yield_is_reported_where_it_is_tested():
    def handler():
        if Patched("forgot"):
            return "new"
        return "old"  # pragma: no cover

    with pytest.raises(HandlerError, match=r"tested the truth of Patched\('forgot'\) at .*did you forget `yield`"):
        run(handler)


def test_a_gate_cannot_be_a_group_member_and_needs_a_short_id():
    def handler():
        yield (Patched("p"), Elicit("Name?", FORM))

    with pytest.raises(HandlerError, match=r"member #1 is Patched\('p'\): a Patched gate cannot be a group member"):
        run(handler)
    for bad in ("", " padded", "x" * 65, 7):
        with pytest.raises(ValueError):
            Patched(bad)  # type: ignore[arg-type]


@pytest.mark.slow
def test_a_version_stays_when_the_function_moves_and_changes_with_its_code():
    source = textwrap.dedent("""
        def book():
            answer = yield Elicit({text!r}, FORM)
            return {{"slots": frozenset({{"a", "b", "c"}}), "answer": answer}}
    """)

    def compiled(text: str, padding: int) -> Any:
        namespace: dict[str, Any] = {"Elicit": Elicit, "FORM": FORM}
        exec(compile("\n" * padding + source.format(text=text), "app.py", "exec"), namespace)
        return namespace["book"]

    assert handler_version(compiled("Day?", 0)) == handler_version(compiled("Day?", 40))
    assert handler_version(compiled("Day?", 0)) != handler_version(compiled("Which day?", 0))
    # Set constants hash by string, which differs between processes: the version must not.
    script = ("import sys; sys.path.insert(0, '.'); from mrtr.core.versions import handler_version\n"
              "def f():\n    return 'x' in {'a', 'b', 'c', 'd', 'e'}\nprint(handler_version(f))")
    versions = {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                               env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2", "3")}
    assert len(versions) == 1


async def test_an_author_version_is_recorded_and_named():
    v1 = serving(book_v1, version="2024-06")
    v3 = serving(book_v3, version="2024-07")
    second = await call(v1, answered(await call(v1, {}), **{"elicit-1": "mon"}))
    state = RequestStateCodec([KEY]).decode(second["result"]["requestState"])
    assert state.handler_version == "2024-06"
    error = (await call(v3, answered(second, **{"elicit-2": "10:00"})))["error"]
    assert "handler book_v3 runs version 2024-07 here and this ledger was recorded by version 2024-06" in \
        error["message"]
    with pytest.raises(ValueError):
        Server("x").tool(version="")(book_v1)


def test_a_mismatch_of_one_version_is_the_handler_not_a_deploy():
    mismatch = ReplayMismatch("MRTR replay mismatch at ordinal #1 ...", data={"ordinal": 1, "changed": ["message"]})
    assert deploy_hint(mismatch, book_v1, handler_version(book_v1)) is mismatch
    assert deploy_hint(mismatch, book_v1, None) is mismatch and deploy_hint(mismatch, book_v1, "") is mismatch


async def test_a_token_from_before_versions_still_opens():
    codec = RequestStateCodec([KEY])
    v1 = serving(book_v1)
    asked = (await call(v1, {}))["result"]
    state = codec.decode(asked["requestState"])
    # The earlier seven-member payload: what a node of the previous release minted.
    older = msgspec.msgpack.encode([state.version, state.method, state.target, state.arguments_digest,
                                    state.issued_at, state.principal, state.ledger])
    token = codec.seal(older)
    assert codec.decode(token).handler_version == ""
    done = await call(v1, answered(await call(v1, {"requestState": token,
                                                     "inputResponses": {"elicit-1": accept(slot="mon")}}),
                                   **{"elicit-2": "9:00"}))
    assert text(done) == "v1 mon 9:00"
    # The eight-member payload (before rounds were counted) opens too, as a conversation's first round.
    eight = msgspec.msgpack.encode([*msgspec.msgpack.decode(older, type=list), state.handler_version])
    assert codec.decode(codec.seal(eight)).rounds == 0
    # And the old decoder ignores the new trailing members.
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(state), type=list)[-2:] == [handler_version(book_v1), 1]
    assert isinstance(msgspec.msgpack.decode(msgspec.msgpack.encode(state), type=RequestState), RequestState)
