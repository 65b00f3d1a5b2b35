"""MCP Apps on the server, in process: interfaces, tool links, the extension in both eras, ``ctx.supports_ui``.

Every result is checked against the schema of its era and the ``_meta.ui`` objects against
the extension's own schema (``tests/apps_schema.py``). Both eras are served by the same
registry: the modern one through ``Server.handle``, the legacy one through a session opened
with ``Server.legacy.initialize`` (``tests/legacy/test_legacy_server.py``'s ``Session``).
"""

from __future__ import annotations

import base64
import string
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from mrtr import Csp, Elicit, Form
from mrtr.auth import AccessToken, InvalidToken, ResourceServer
from mrtr.core.apps import UI_EXTENSION, UI_MIME_TYPE, declares_ui, tool_ui, ui_declaration
from mrtr.server import Server
from mrtr.testing import accept

from .apps_schema import validate as validate_apps
from .apps_schema import validate_resource_meta, validate_tool
from .conftest import examples, meta
from .legacy.test_legacy_server import Session
from .legacy_schema import validate_server_message
from .wire_schema import RESULT_DEFS, validate, validate_message

VIEW = "ui://tests/view.html"
HTML = "<!doctype html><html><body><p>hello</p></body></html>"
UI = {"extensions": {UI_EXTENSION: ui_declaration()}}
FULL = dict(csp=Csp(connect=["https://api.example.com"], resources=["https://*.cdn.example.com"],
                    frames=["https://player.example.com"], base_uri=["https://example.com"]),
            permissions=["camera", "clipboardWrite"], domain="a1b2.example-content.com", prefers_border=False)


def secret() -> str:
    return base64.b64encode(bytes(32)).decode()


def app(**resource: Any) -> Server:
    server = Server("apps", secret=secret())
    server.ui_resource(VIEW, html=HTML, title="View", **resource)

    @server.tool(ui=VIEW)
    def show(ctx, name: str) -> Any:
        """Show a greeting, in the interface where the client renders it."""
        return {"content": [{"type": "text", "text": f"hello {name} (ui: {ctx.supports_ui})"}],
                "structuredContent": {"name": name, "ui": ctx.supports_ui}}

    @server.tool(visibility=["app"])
    def bump(ctx, n: int) -> str:
        """Called by the interface only."""
        return str(n + 1)

    @server.tool
    def plain() -> str:
        return "plain"

    return server


async def modern(server: Server, method: str, params: dict[str, Any] | None = None,
                 capabilities: dict[str, Any] | None = None, **options: Any) -> dict[str, Any]:
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**(params or {}), "_meta": meta(capabilities)}}
    response = await server.handle(message, **options)
    interim = response.get("result", {}).get("resultType") == "input_required"
    validate_message(response, "InputRequiredResult" if interim else RESULT_DEFS.get(method))
    return response


# -- registering an interface ----------------------------------------------------------------------


async def test_the_same_ui_meta_is_on_the_listing_entry_and_the_content_item_in_both_eras():
    server = app(**FULL)
    listed = (await modern(server, "resources/list"))["result"]["resources"]
    entry = next(item for item in listed if item["uri"] == VIEW)
    assert entry["mimeType"] == UI_MIME_TYPE and entry["title"] == "View"
    expected = {"csp": {"connectDomains": ["https://api.example.com"], "resourceDomains": ["https://*.cdn.example.com"],
                        "frameDomains": ["https://player.example.com"], "baseUriDomains": ["https://example.com"]},
                "permissions": {"camera": {}, "clipboardWrite": {}}, "domain": "a1b2.example-content.com",
                "prefersBorder": False}
    assert validate_resource_meta(entry) == expected
    read = (await modern(server, "resources/read", {"uri": VIEW}))["result"]
    [item] = read["contents"]
    assert item == {"uri": VIEW, "mimeType": UI_MIME_TYPE, "text": HTML, "_meta": {"ui": expected}}
    validate_resource_meta(item)

    for version in ("2025-11-25", "2025-06-18", "2025-03-26"):
        session = Session(server, version)
        await session.open()
        listed = (await session.result("resources/list"))["resources"]
        assert next(item for item in listed if item["uri"] == VIEW)["_meta"] == {"ui": expected}
        [item] = (await session.result("resources/read", {"uri": VIEW}))["contents"]
        assert item == {"uri": VIEW, "mimeType": UI_MIME_TYPE, "text": HTML, "_meta": {"ui": expected}}


async def test_an_interface_without_options_carries_no_meta_and_reads_from_a_file(tmp_path: Path):
    page = tmp_path / "view.html"
    page.write_text("<!doctype html><p>héllo</p>", encoding="utf-8")
    server = Server("apps", secret=secret())
    server.ui_resource("ui://tests/file.html", path=page)
    page.write_text("changed after registration", encoding="utf-8")  # read once, when registered
    [entry] = (await modern(server, "resources/list"))["result"]["resources"]
    assert entry == {"uri": "ui://tests/file.html", "name": "ui://tests/file.html", "mimeType": UI_MIME_TYPE}
    [item] = (await modern(server, "resources/read", {"uri": "ui://tests/file.html"}))["result"]["contents"]
    assert item == {"uri": "ui://tests/file.html", "mimeType": UI_MIME_TYPE, "text": "<!doctype html><p>héllo</p>"}


@pytest.mark.parametrize("uri", ["https://example.com/view.html", "ui://", "ui:/x", "UI://x", "ui://a b",
                                 "ui://x/{id}.html", "ui://x\n", 42, None])
def test_an_interface_outside_ui_uris_is_refused_at_registration(uri: Any):
    server = Server("apps", secret=secret())
    with pytest.raises(ValueError, match="ui://"):
        server.ui_resource(uri, html=HTML)
    assert not server.catalog.resources


@pytest.mark.parametrize("options, error, words", [
    ({}, TypeError, "exactly one of them"),
    ({"html": HTML, "path": "x.html"}, TypeError, "exactly one of them"),
    ({"html": b"<!doctype html>"}, TypeError, "as a str"),
    ({"html": "  \n"}, ValueError, "empty document"),
    ({"path": "/nonexistent/view.html"}, ValueError, "cannot read the interface"),
    ({"html": HTML, "csp": {"connectDomains": ["https://a.example"]}}, TypeError, "mrtr.Csp"),
    ({"html": HTML, "permissions": "camera"}, TypeError, "list of names"),
    ({"html": HTML, "permissions": ["camera", "usb"]}, ValueError, "unknown permission 'usb'"),
    ({"html": HTML, "domain": ""}, ValueError, "not a domain"),
    ({"html": HTML, "domain": "a.example; script-src *"}, ValueError, "not a domain"),
    ({"html": HTML, "prefers_border": "yes"}, TypeError, "True, False or None"),
])
def test_what_an_interface_cannot_be_is_refused_at_registration(options: dict[str, Any], error: type, words: str):
    server = Server("apps", secret=secret())
    with pytest.raises(error, match=words):
        server.ui_resource(VIEW, **options)
    assert not server.catalog.resources


def test_a_file_that_is_not_utf8_is_refused(tmp_path: Path):
    page = tmp_path / "latin1.html"
    page.write_bytes("<!doctype html><p>caf\xe9</p>".encode("latin-1"))
    with pytest.raises(ValueError, match="cannot read the interface"):
        Server("apps", secret=secret()).ui_resource(VIEW, path=page)


def test_an_interface_registered_twice_is_refused():
    server = app()
    with pytest.raises(ValueError, match="already registered"):
        server.ui_resource(VIEW, html=HTML)


# -- the content security policy ---------------------------------------------------------------


def test_csp_entries_are_origins_normalised():
    csp = Csp(connect=["HTTPS://API.Example.com/", "https://api.example.com", "wss://live.example.com:8443"],
              resources=["https://*.cdn.example.com"], frames=[], base_uri=("http://[::1]:8000",))
    assert csp.connect == ("https://api.example.com", "wss://live.example.com:8443")
    assert csp.to_wire().connect_domains == ["https://api.example.com", "wss://live.example.com:8443"]
    assert csp.base_uri == ("http://[::1]:8000",) and csp.frames == ()
    validate_apps({"csp": {"connectDomains": list(csp.connect)}}, "McpUiResourceMeta")


@pytest.mark.parametrize("entry", [
    "'self'", "*", "'unsafe-inline'", "https:", "data:", "blob:", "api.example.com", "https://api.example.com/v1",
    "https://api.example.com/*", "ftp://files.example.com", "https://*", "https://*.com", "https://a.*.example.com",
    "https://api.example.com:0", "https://api.example.com:70000", "https://api.example.com:*",
    "https://api.example.com; script-src *", "https://a.example.com https://b.example.com", "", "javascript:alert(1)",
])
def test_a_csp_entry_a_host_would_refuse_is_refused(entry: str):
    with pytest.raises(ValueError, match=r"Csp\(connect=\.\.\.\)"):
        Csp(connect=[entry])


def test_a_csp_list_given_as_one_string_or_with_a_non_string_is_refused():
    with pytest.raises(TypeError, match="not one string"):
        Csp(resources="https://cdn.example.com")
    with pytest.raises(TypeError, match="origin string"):
        Csp(frames=[b"https://player.example.com"])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        Csp("https://a.example")  # type: ignore[misc]


_ORIGIN_TEXT = st.text(alphabet=string.ascii_letters + string.digits + ":/.*-[]';, \t\"\\@?#%", max_size=40)


@settings(max_examples=examples(400))
@given(st.one_of(
    _ORIGIN_TEXT,
    st.builds(lambda s, h: f"{s}://{h}", st.sampled_from(["https", "wss", "http", "x"]), _ORIGIN_TEXT),
    # near misses: an origin with a wildcard, a port, a slash or a separator where a host would cut
    st.from_regex(r"\A(https?|wss?)://(\*\.)?[a-z0-9.*-]{1,20}(:[0-9]{1,6})?/?[ ;,'\"/a-z]{0,2}\Z"),
))
def test_an_accepted_csp_entry_cannot_reach_outside_its_directive(entry: str):
    try:
        [origin] = Csp(connect=[entry]).connect
    except ValueError:
        return
    # What a host pastes into a policy: one source expression, no separator, quote or path.
    assert origin.split("://")[0] in ("http", "https", "ws", "wss")
    assert not any(character in origin for character in " \t;,'\"\\@?#%") and origin.count("/") == 2
    assert "*" not in origin or origin.split("://")[1].startswith("*.")


# -- linking tools -------------------------------------------------------------------------------


async def test_a_linked_tool_carries_both_keys_with_one_value_and_an_app_only_tool_its_visibility():
    server = app()
    tools = {tool["name"]: tool for tool in (await modern(server, "tools/list"))["result"]["tools"]}
    assert validate_tool(tools["show"]) == VIEW
    assert tools["show"]["_meta"] == {"ui": {"resourceUri": VIEW}, "ui/resourceUri": VIEW}
    assert validate_tool(tools["bump"]) is None
    assert tools["bump"]["_meta"] == {"ui": {"visibility": ["app"]}}
    assert "_meta" not in tools["plain"]
    assert tool_ui(tools["bump"]).visibility == ("app",) and tool_ui(tools["plain"]) is None

    session = Session(server)
    await session.open()
    listed = {tool["name"]: tool for tool in (await session.result("tools/list"))["tools"]}
    assert listed["show"]["_meta"] == tools["show"]["_meta"] and listed["bump"]["_meta"] == tools["bump"]["_meta"]


def test_a_link_keeps_the_tools_other_meta_and_refuses_to_be_said_twice():
    server = app()

    @server.tool(ui=VIEW, visibility=("model", "app"), meta={"vendor/tag": 1})
    def both() -> str:
        return "x"

    assert server.catalog.tools["both"].definition["_meta"] == {
        "vendor/tag": 1, "ui": {"resourceUri": VIEW, "visibility": ["model", "app"]}, "ui/resourceUri": VIEW}
    for meta_given in ({"ui": {"resourceUri": VIEW}}, {"ui/resourceUri": VIEW}):
        with pytest.raises(ValueError, match="both say what the tool links to"):
            server.tool(lambda: "x", name="twice", ui=VIEW, meta=meta_given)
    assert "twice" not in server.catalog.tools


@pytest.mark.parametrize("options, error, words", [
    ({"ui": "https://example.com/view.html"}, ValueError, "ui://"),
    ({"ui": "ui://"}, ValueError, "ui://"),
    ({"visibility": "app"}, TypeError, "takes a list"),
    ({"visibility": []}, ValueError, "one or both of 'model', 'app'"),
    ({"visibility": ["agent"]}, ValueError, "one or both of 'model', 'app'"),
])
def test_a_malformed_link_is_refused_at_registration(options: dict[str, Any], error: type, words: str):
    server = app()
    with pytest.raises(error, match=words):
        server.tool(lambda: "x", name="bad", **options)
    assert "bad" not in server.catalog.tools


def test_a_link_to_a_resource_that_is_not_an_interface_is_refused_at_registration():
    server = app()

    @server.resource("ui://tests/plain.html", mime_type="text/html")
    def plain_page() -> str:
        return HTML

    with pytest.raises(ValueError, match="whose MIME type is 'text/html', not 'text/html;profile=mcp-app'"):
        server.tool(lambda: "x", name="wrong", ui="ui://tests/plain.html")


async def test_a_link_to_an_interface_registered_later_is_checked_when_the_server_starts():
    server = Server("apps", secret=secret())

    @server.tool(ui=VIEW)
    def early() -> str:
        return "x"

    @server.tool(ui="ui://tests/never.html")
    def dangling() -> str:
        return "x"

    server.ui_resource(VIEW, html=HTML)
    with pytest.raises(ValueError, match=r"tool dangling links to the interface 'ui://tests/never.html', which no "
                                         r"resource serves; register it with server.ui_resource"):
        server.running()
    del server.catalog.tools["dangling"]
    async with server.running():
        pass


# -- the extension, advertised and declared ----------------------------------------------------------


async def test_the_extension_is_advertised_in_both_eras_only_by_a_server_that_has_some_of_it():
    server = app()
    discovered = (await modern(server, "server/discover"))["result"]
    assert discovered["capabilities"]["extensions"] == {UI_EXTENSION: {}}
    for version in ("2025-11-25", "2025-06-18", "2025-03-26"):
        opened = (await Session(server, version).open())["result"]
        assert opened["capabilities"]["extensions"] == {UI_EXTENSION: {}}

    bare = Server("bare", secret=secret())
    bare.tool(lambda: "x", name="only")
    assert "extensions" not in (await modern(bare, "server/discover"))["result"]["capabilities"]
    assert "extensions" not in (await Session(bare).open())["result"]["capabilities"]

    helper = Server("helper", secret=secret())  # an app-only tool alone is some of it too
    helper.tool(lambda: "x", name="only", visibility=["app"])
    assert (await modern(helper, "server/discover"))["result"]["capabilities"]["extensions"] == {UI_EXTENSION: {}}


async def test_a_legacy_session_is_told_of_the_apps_extension_and_never_of_tasks():
    server = app()

    @server.tool(task="optional")
    def slow() -> str:
        return "done"

    extensions = (await modern(server, "server/discover"))["result"]["capabilities"]["extensions"]
    assert set(extensions) == {UI_EXTENSION, "io.modelcontextprotocol/tasks"}
    opened = (await Session(server).open())["result"]
    assert opened["capabilities"]["extensions"] == {UI_EXTENSION: {}}


@pytest.mark.parametrize("capabilities, renders", [
    (UI, True),
    ({"extensions": {UI_EXTENSION: {"mimeTypes": ["text/html+mcp", UI_MIME_TYPE]}}}, True),
    ({"extensions": {UI_EXTENSION: {}}}, False),
    ({"extensions": {UI_EXTENSION: {"mimeTypes": ["text/html+mcp"]}}}, False),
    ({"extensions": {UI_EXTENSION: {"mimeTypes": UI_MIME_TYPE}}}, False),
    ({"extensions": {"io.modelcontextprotocol/tasks": {}}}, False),
    ({}, False),
])
async def test_ctx_supports_ui_reads_this_requests_declaration_in_the_modern_era(capabilities: dict[str, Any],
                                                                                 renders: bool):
    assert declares_ui(capabilities) is renders
    result = (await modern(app(), "tools/call", {"name": "show", "arguments": {"name": "Ada"}}, capabilities))["result"]
    assert result["structuredContent"] == {"name": "Ada", "ui": renders}
    assert result["content"] == [{"type": "text", "text": f"hello Ada (ui: {renders})"}]  # the fallback, always


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2025-03-26"])
@pytest.mark.parametrize("capabilities, renders", [(UI, True), ({"extensions": {UI_EXTENSION: {}}}, False), ({}, False)])
async def test_ctx_supports_ui_reads_the_sessions_declaration_under_every_2025_version(
        version: str, capabilities: dict[str, Any], renders: bool):
    session = Session(app(), version, capabilities={**capabilities, "elicitation": {}})
    await session.open()
    result = await session.call("show", {"name": "Ada"})
    assert result["content"] == [{"type": "text", "text": f"hello Ada (ui: {renders})"}]
    if version != "2025-03-26":
        assert result["structuredContent"] == {"name": "Ada", "ui": renders}


# -- visibility is advice ----------------------------------------------------------------------------


class _Keys:
    async def verify(self, token: str) -> AccessToken:
        raise InvalidToken("unknown key")


async def test_an_app_only_tool_is_authorized_like_any_other():
    rs = ResourceServer(_Keys(), resource="https://mcp.example.com/mcp", authorization_servers=["https://as.example"])
    server = Server("protected", auth=rs, secret=secret())
    server.ui_resource(VIEW, html=HTML)

    @server.tool(visibility=["app"], scopes=["tickets:write"])
    def close_ticket(ticket: int) -> str:
        return f"closed {ticket}"

    reader = AccessToken(subject="ada", client_id="host", issuer="https://as.example", scopes=frozenset())
    writer = AccessToken(subject="ada", client_id="host", issuer="https://as.example",
                         scopes=frozenset({"tickets:write"}))
    call = {"name": "close_ticket", "arguments": {"ticket": 7}}
    refused = await modern(server, "tools/call", call, UI, auth=reader)
    assert refused["error"]["code"] == -32600 and "tickets:write" in refused["error"]["message"]
    assert [tool["name"] for tool in (await modern(server, "tools/list", auth=reader))["result"]["tools"]] == []
    allowed = await modern(server, "tools/call", call, UI, auth=writer)
    assert allowed["result"]["content"] == [{"type": "text", "text": "closed 7"}]


async def test_an_app_only_tool_that_asks_gets_the_rounds_of_any_call():
    server = app()

    @server.tool(visibility=["app"])
    def rename(ctx) -> Any:
        answer = yield Elicit("New name?", Form().string("name"))
        return f"renamed to {answer.content['name']}"

    first = (await modern(server, "tools/call", {"name": "rename"}, {**UI, "elicitation": {}}))["result"]
    assert first["resultType"] == "input_required"
    [key] = first["inputRequests"]
    retry = {"name": "rename", "inputResponses": {key: accept(name="Grace")}, "requestState": first["requestState"]}
    done = (await modern(server, "tools/call", retry, {**UI, "elicitation": {}}))["result"]
    assert done["content"] == [{"type": "text", "text": "renamed to Grace"}]

    session = Session(server, capabilities={**UI, "elicitation": {}})
    await session.open()
    result = await session.call("rename", answer=lambda request: accept(name="Ada"))
    assert result["content"] == [{"type": "text", "text": "renamed to Ada"}]
    assert [request["method"] for request in session.wire.requests] == ["elicitation/create"]
    for message in session.wire.sent:
        validate_server_message(message)


def test_the_2026_schema_names_the_declaration_this_client_side_sends():
    validate(UI, "ClientCapabilities")
    validate_apps(ui_declaration(), "McpUiClientCapabilities")


async def test_several_reads_of_an_interface_share_no_object():
    server = app(**FULL)
    first = (await modern(server, "resources/read", {"uri": VIEW}))["result"]["contents"][0]
    first["_meta"]["ui"]["csp"]["connectDomains"].append("https://evil.example")
    second = (await modern(server, "resources/read", {"uri": VIEW}))["result"]["contents"][0]
    assert second["_meta"]["ui"]["csp"]["connectDomains"] == ["https://api.example.com"]
    listed = (await modern(server, "resources/list"))["result"]["resources"][0]
    assert listed["_meta"]["ui"]["csp"]["connectDomains"] == ["https://api.example.com"]
    await trio.lowlevel.checkpoint()


# -- the example ------------------------------------------------------------------------------------


def test_the_example_wizard_returns_a_sentence_for_everyone_and_the_summary_for_the_page():
    from mrtr.examples import apps as example
    from mrtr.testing import decline, run

    outcome = run(example.onboard, {"company": "Acme"}, check_determinism=True,
                  answers=[accept(name="Ada", email="ada@example.com"), accept(plan="team"), accept(region="eu"),
                           accept(newsletter=False, channels=["email"])])
    assert outcome.result == {
        "content": [{"type": "text", "text": "Acme is set up: Ada (ada@example.com) administers it on the team plan, "
                                             "with its data in eu."}],
        "structuredContent": {"company": "Acme", "admin": "Ada", "email": "ada@example.com", "plan": "team",
                              "region": "eu", "channels": ["email"]}}
    stopped = run(example.onboard, {"company": "Acme"}, answers=[decline()])
    assert stopped.result == "Onboarding of Acme stopped: no admin given (decline)."
    invited = run(example.invite, {"company": "Acme"}, answers=[accept(email="grace@example.com")])
    assert invited.result["structuredContent"] == {"invited": "grace@example.com"}
    assert run(example.invite, {"company": "Acme"}, answers=[decline()]).result["structuredContent"] == {"invited": None}
    tools = {name: entry.definition for name, entry in example.server.catalog.tools.items()}
    assert validate_tool(tools["onboard"]) == example.WORKSPACE and tools["invite"]["_meta"]["ui"] == {
        "visibility": ["app"]}


@pytest.mark.slow
def test_mrtr_serve_refuses_a_dangling_link_in_one_line_before_serving(tmp_path: Path):
    import subprocess
    import sys

    (tmp_path / "dangling.py").write_text(
        "from mrtr import Server\n"
        "server = Server('dangling')\n"
        "@server.tool(ui='ui://dangling/missing.html')\n"
        "def show() -> str:\n"
        "    return 'text'\n")
    done = subprocess.run([sys.executable, "-m", "mrtr", "serve", "dangling:server", "--stdio"], cwd=tmp_path,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines() == [
        "mrtr serve: dangling:server: tool show links to the interface 'ui://dangling/missing.html', which no "
        "resource serves; register it with server.ui_resource('ui://dangling/missing.html', html=...)"]
