"""How an upstream's questions become requests for the downstream, and its answers go back (no I/O)."""

from __future__ import annotations

import pytest

from mrtr import Elicit, ElicitResult, ElicitURL, ListRoots, Sample
from mrtr.bridge.forwarded import UnrelayableQuestion, answered, asked, upstream_result


def test_a_form_with_a_title_at_its_root_is_asked():
    # The official Python SDK 1.x sends pydantic's model title at the schema's root.
    question = asked({"method": "elicitation/create", "params": {
        "message": "Your name?", "requestedSchema": {"title": "Name", "type": "object",
                                                     "properties": {"name": {"type": "string", "title": "Name"}},
                                                     "required": ["name"]}}})
    assert isinstance(question, Elicit)
    assert question.requested.schema["properties"]["name"]["type"] == "string"


def test_each_kind_of_question():
    assert isinstance(asked({"method": "elicitation/create",
                             "params": {"mode": "url", "message": "Sign in", "url": "https://example.com/a"}}),
                      ElicitURL)
    sample = asked({"method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 5,
        "systemPrompt": "be brief", "_meta": {"x": 1}}})
    assert isinstance(sample, Sample) and sample.params()["systemPrompt"] == "be brief"
    assert "_meta" not in sample.params()
    assert isinstance(asked({"method": "roots/list", "params": {}}), ListRoots)


@pytest.mark.parametrize("question, why", [
    ({"method": "elicitation/create", "params": {"mode": "url", "message": "Go", "url": "javascript:alert(1)"}},
     "https"),
    ({"method": "elicitation/create", "params": {"message": "Nested?", "requestedSchema": {
        "type": "object", "properties": {"a": {"type": "object"}}}}}, "a"),
    ({"method": "elicitation/create", "params": {"requestedSchema": {"type": "object", "properties": {}}}},
     "message"),
    ({"method": "tools/call", "params": {}}, "not a question"),
    ({"method": "sampling/createMessage", "params": {"messages": []}}, "max_tokens"),
])
def test_a_question_the_downstream_cannot_be_asked_is_a_clear_error(question, why):
    with pytest.raises(UnrelayableQuestion) as error:
        asked(question)
    assert error.value.code == -32603
    assert why in error.value.message
    assert error.value.data["reason"] == "unrelayable-question"


def test_answers_go_back_in_wire_shape():
    form = asked({"method": "elicitation/create", "params": {"message": "Name?", "requestedSchema": {
        "type": "object", "properties": {"name": {"type": "string"}}}}})
    assert answered(form, ElicitResult("accept", {"name": "Ada"})) == {"action": "accept", "content": {"name": "Ada"}}
    assert answered(form, ElicitResult("decline")) == {"action": "decline"}
    url = asked({"method": "elicitation/create", "params": {"mode": "url", "message": "Go",
                                                             "url": "https://example.com"}})
    assert answered(url, ElicitResult("accept")) == {"action": "accept"}


def test_the_upstreams_own_meta_stays_upstream():
    result = upstream_result({"resultType": "complete", "content": [],
                              "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "up"}, "app/x": 1}})
    assert result == {"content": [], "_meta": {"app/x": 1}}
    assert "_meta" not in upstream_result({"content": [], "_meta": {"io.modelcontextprotocol/serverInfo": {}}})


def test_a_ledger_names_the_worker_holding_its_call():
    from mrtr.core.holding import HELD_BY, holder
    from mrtr.core.kinds import Kind
    from mrtr.core.ledger import Slot

    step = int(Kind.STEP)
    assert holder([Slot(step, b"f" * 16, answered=True, answer={HELD_BY: "3.abc", "question": {}})]) == "3"
    assert holder([Slot(step, b"f" * 16, answered=True, answer={"other": 1})]) is None
    assert holder([Slot(int(Kind.ELICIT), b"f" * 16, answered=True, answer={HELD_BY: "3.abc"})]) is None
    assert holder([Slot(step, b"f" * 16, answered=True, answer={HELD_BY: "no-dot"})]) is None
