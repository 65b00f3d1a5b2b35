"""Replay-aware notifications: each progress value and log line reaches the client once.

A retry re-runs the handler from the top; the part an earlier round already ran stays
quiet, so progress only moves forward across rounds (the spec requires it to increase).
"""

from __future__ import annotations

from mrtr import Context, Elicit, Form, Step
from mrtr.server import Server
from mrtr.testing import accept, arun, run

from .conftest import meta
from .wire_schema import validate, validate_message

META = meta({"elicitation": {}})


def wizard(ctx: Context):
    ctx.progress(1, total=3, message="start")
    ctx.log("info", "asking for a name")
    name = yield Elicit("Name?", Form().string("name"))
    ctx.progress(2, total=3, message="named")
    ctx.log("info", {"name": name.content["name"]})
    code = yield Step(lambda: 7)
    ctx.log("warning", {"code": code}, logger="wizard")
    ctx.progress(2.5, total=3, message="coded")
    ok = yield Elicit("Sure?", Form().boolean("ok"))
    ctx.progress(3, total=3, message="done")
    return f"{name.content['name']}:{code}:{ok.content['ok']}"


def test_progress_and_logs_are_sent_once_each_and_only_move_forward():
    outcome = run(wizard, answers=[accept(name="Ada"), accept(ok=True)])
    assert outcome.result == "Ada:7:True"
    assert outcome.progress == [(1, 3, "start"), (2, 3, "named"), (2.5, 3, "coded"), (3, 3, "done")]
    assert outcome.logs == [("info", "asking for a name"), ("info", {"name": "Ada"}), ("warning", {"code": 7})]
    # Which execution sent each: the one that first ran the code.
    assert [(n.execution, n.method) for n in outcome.notifications] == [
        (1, "notifications/progress"), (1, "notifications/message"),
        (2, "notifications/progress"), (2, "notifications/message"), (2, "notifications/message"),
        (2, "notifications/progress"),
        (3, "notifications/progress"),
    ]
    assert all(n.params.get("progressToken", "progress") == "progress" for n in outcome.notifications)


def test_is_replaying_is_true_exactly_before_the_last_recorded_position():
    seen: list[tuple[str, bool]] = []

    def handler(ctx: Context):
        seen.append(("top", ctx.is_replaying))
        a = yield Elicit("A?", Form().string("a"))
        seen.append(("after a", ctx.is_replaying))
        b = yield Elicit("B?", Form().string("b"))
        seen.append(("after b", ctx.is_replaying))
        return a.content["a"] + b.content["b"]

    run(handler, answers=[accept(a="x"), accept(b="y")])
    assert seen == [("top", False),
                    ("top", True), ("after a", False),
                    ("top", True), ("after a", True), ("after b", False)]


def test_without_a_token_or_level_nothing_is_captured():
    outcome = run(wizard, answers=[accept(name="Ada"), accept(ok=True)], progress_token=None, log_level=None)
    assert outcome.notifications == []
    assert run(wizard, answers=[accept(name="Ada"), accept(ok=True)]).notifications  # the same run, asked for


def test_a_log_level_filters_what_is_captured():
    outcome = run(wizard, answers=[accept(name="Ada"), accept(ok=True)], log_level="warning")
    assert outcome.logs == [("warning", {"code": 7})] and len(outcome.progress) == 4
    outcome = run(wizard, answers=[accept(name="Ada"), accept(ok=True)], log_level="error")
    assert outcome.logs == []


async def test_async_handlers_are_quiet_while_replaying_too():
    async def handler(ctx: Context):
        ctx.progress(1)
        answer = yield Elicit("A?", Form().string("a"))
        ctx.progress(2)
        yield answer.content["a"]

    outcome = await arun(handler, answers=[accept(a="x")])
    assert outcome.progress == [(1, None, None), (2, None, None)]


def test_progress_still_must_increase_within_one_execution_even_while_quiet():
    def handler(ctx: Context):
        ctx.progress(5)
        answer = yield Elicit("A?", Form().string("a"))
        ctx.progress(4)
        return answer

    from mrtr.core.errors import HandlerError
    import pytest

    with pytest.raises(HandlerError, match="strictly increase"):
        run(handler, answers=[accept(a="x")])


async def test_through_the_server_each_round_sends_only_what_it_ran_first():
    server = Server("notes", "1", secret=b"s" * 32)
    server.tool(wizard)
    sent: list[tuple[str, dict]] = []

    def notify(method, params):
        sent.append((method, params))

    async def call(round_, extra):
        meta = {**META, "progressToken": f"round-{round_}", "io.modelcontextprotocol/logLevel": "debug"}
        params = {"name": "wizard", "arguments": {}, "_meta": meta, **extra}
        message = await server.handle({"jsonrpc": "2.0", "id": round_, "method": "tools/call", "params": params},
                                      notify=notify)
        validate_message(message)
        return message["result"]

    first = await call(1, {})
    second = await call(2, {"requestState": first["requestState"], "inputResponses": {"elicit-1": accept(name="Ada")}})
    third = await call(3, {"requestState": second["requestState"], "inputResponses": {"elicit-3": accept(ok=True)}})
    assert third["content"][0]["text"] == "Ada:7:True"
    progress = [(p["progressToken"], p["progress"]) for m, p in sent if m == "notifications/progress"]
    assert progress == [("round-1", 1), ("round-2", 2), ("round-2", 2.5), ("round-3", 3)]
    logs = [(p["level"], p.get("logger"), p["data"]) for m, p in sent if m == "notifications/message"]
    assert logs == [("info", None, "asking for a name"), ("info", None, {"name": "Ada"}),
                    ("warning", "wizard", {"code": 7})]
    for method, params in sent:
        kind = "ProgressNotification" if method == "notifications/progress" else "LoggingMessageNotification"
        validate({"jsonrpc": "2.0", "method": method, "params": params}, kind)
