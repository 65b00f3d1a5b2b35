"""The request context: the server's positional constructor makes what the keyword one makes."""

from __future__ import annotations

from mrtr.core.context import Context


def _members(ctx: Context) -> dict[str, object]:
    return {name: getattr(ctx, name) for name in Context.__slots__}


def test_of_request_sets_every_member_as_the_keyword_constructor_does():
    def notify(method: str, params: dict) -> None:
        return None

    auth, lifespan = object(), object()
    given = dict(principal="alice", client_capabilities={"elicitation": {}}, client_info={"name": "c", "version": "1"},
                 method="prompts/get", target="greet", request_id="r-7", progress_token=3, log_level="debug",
                 notify=notify, auth=auth, lifespan=lifespan)
    by_keywords = Context({"who": "bob"}, **given)
    positional = Context.of_request({"who": "bob"}, given["principal"], given["client_capabilities"],
                                    given["client_info"], given["method"], given["target"], given["request_id"],
                                    given["progress_token"], given["log_level"], given["notify"], given["auth"],
                                    given["lifespan"])
    assert _members(positional) == _members(by_keywords)
    assert type(positional) is Context


def test_of_request_leaves_no_member_unset():
    ctx = Context.of_request({}, None, {}, None, "tools/call", "t", 1, None, None, None, None, None)
    for name in Context.__slots__:
        getattr(ctx, name)  # an unset slot would raise AttributeError
    assert ctx.is_replaying is False
