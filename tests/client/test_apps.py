"""MCP Apps on the client: the declaration in both eras, ``ToolInfo``, ``read_ui``, and ``mrtr list``/``mrtr call``.

The client talks to the example server with an interface (``mrtr.examples.apps``) in
process and over HTTP on loopback (the native server in the test's nursery), in both eras;
every message is checked against its era's schema (``conftest.Checked``). The commands run
as processes, in the slow tier.
"""

from __future__ import annotations

import base64
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

import mrtr
from mrtr import Csp
from mrtr.client.apps import ToolInfo
from mrtr.core.apps import UI_EXTENSION, UI_MIME_TYPE, UiResourceMeta, ui_declaration
from mrtr.examples.apps import WORKSPACE
from mrtr.server import Server
from mrtr.transports.http.native import serve

from ..apps_schema import validate as validate_apps
from .conftest import Checked

REPO = Path(__file__).resolve().parents[2]
WORKSPACE_PAGE = Path(mrtr.__file__).resolve().parent / "examples" / "workspace.html"
"""The example's interface where the package is (the checkout, or an installed copy)."""
ANSWERS = {"name": mrtr.accept(name="Ada Lovelace", email="ada@example.com"), "plan": mrtr.accept(plan="team"),
           "region": mrtr.accept(region="eu"), "newsletter": mrtr.accept(newsletter=False, channels=["email"]),
           "email": mrtr.accept(email="grace@example.com")}


def answer(request: Any) -> Any:
    return ANSWERS[next(iter(request.requested_schema["properties"]))]


def secret() -> str:
    return base64.b64encode(bytes(32)).decode()


def probe_server() -> Server:
    """A tool that says whether its caller renders apps, and links that are not what they claim."""
    server = Server("probe", secret=secret())
    server.ui_resource("ui://probe/view.html", html="<!doctype html><p>probe", csp=Csp(connect=["https://api.example"]))

    @server.tool(ui="ui://probe/view.html")
    def renders(ctx) -> str:
        return "yes" if ctx.supports_ui else "no"

    @server.resource("ui://probe/plain.html", mime_type="text/html")
    def plain_page() -> str:
        return "<!doctype html><p>plain"

    @server.resource("ui://probe/blob.html", mime_type=UI_MIME_TYPE)
    def blob_page() -> bytes:
        return "<!doctype html><p>blöb".encode()

    @server.resource("ui://probe/broken.html", mime_type=UI_MIME_TYPE)
    def broken_page() -> dict[str, Any]:
        return {"blob": "not base64 at all!", "mimeType": UI_MIME_TYPE, "_meta": {"ui": {"csp": "everything"}}}

    server.tool(lambda: "x", name="flat_only")
    server.tool(lambda: "x", name="not_an_app")
    server.tool(lambda: "x", name="broken", ui="ui://probe/broken.html")
    return server


def hand_written(server: Server) -> None:
    """Links as a server of another runtime might write them once serving (mrtr refuses the second at start):
    the flat key alone, and one to a page that is not an app."""
    server.catalog.tools["flat_only"].definition["_meta"] = {"ui/resourceUri": "ui://probe/blob.html"}
    server.catalog.tools["not_an_app"].definition["_meta"] = {"ui/resourceUri": "ui://probe/plain.html"}


@pytest.fixture(params=["inprocess-modern", "http-modern", "http-legacy"])
async def reach(request: Any, nursery: trio.Nursery) -> Any:
    """``reach(server, **options)``: a Client (not entered) for ``server`` the way this parameter says."""
    how, era = request.param.split("-")

    async def make(server: Server, **options: Any) -> mrtr.Client:
        if how == "inprocess":
            client = mrtr.Client(server, **options)
        else:
            port = await nursery.start(partial(serve, server, "127.0.0.1", 0))
            client = mrtr.Client(f"http://127.0.0.1:{port}/mcp", era=era, **options)
        client.target = Checked(client.target)  # type: ignore[assignment]
        return client

    make.era = era  # type: ignore[attr-defined]
    return make


def declared(client: mrtr.Client) -> dict[str, Any]:
    """The client capabilities the server was told: the initialize of a session, else the last request's _meta."""
    exchanges = client.target.exchanges  # type: ignore[attr-defined]
    if client.era == "legacy":
        return next(message["params"]["capabilities"] for message, _ in exchanges if message["method"] == "initialize")
    return exchanges[-1][0]["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]  # type: ignore[no-any-return]


async def test_ui_true_declares_the_extension_in_both_eras_and_the_server_sees_it(reach: Any):
    for ui, said in ((True, "yes"), (False, "no")):
        async with await reach(probe_server(), ui=ui) as client:
            result = await client.call_tool("renders")
            assert result.text == said
            extensions = declared(client).get("extensions", {})
            if ui:
                assert extensions[UI_EXTENSION] == ui_declaration()
                validate_apps(extensions[UI_EXTENSION], "McpUiClientCapabilities")
            else:
                assert UI_EXTENSION not in extensions
            if client.era == "modern":  # the tasks extension is still declared beside it
                assert "io.modelcontextprotocol/tasks" in extensions


async def test_tools_are_listed_with_their_interface_and_visibility(reach: Any):
    async with await reach(mrtr.examples.apps.server) as client:
        tools = {tool.name: tool for tool in await client.list_tools()}
    assert all(isinstance(tool, ToolInfo) and isinstance(tool, dict) for tool in tools.values())
    assert tools["onboard"].ui == WORKSPACE and tools["onboard"].visibility == ("model", "app")
    assert tools["invite"].ui is None and tools["invite"].visibility == ("app",)
    assert tools["onboard"]["_meta"]["ui/resourceUri"] == WORKSPACE  # still the wire dict


def test_a_tool_info_reads_malformed_links_as_none_and_visibility_as_the_default():
    for meta in ({"ui": "ui://x"}, {"ui": {"resourceUri": 7}}, {"ui/resourceUri": "https://x"}, {"ui": None}, []):
        assert ToolInfo({"name": "t", "_meta": meta}).ui is None
    assert ToolInfo({"name": "t", "_meta": {"ui": {"resourceUri": "https://x"}, "ui/resourceUri": "ui://y"}}).ui == \
        "ui://y"  # the nested key is not a ui:// URI: the flat one is read
    for visibility in ("app", [], ["app", "agent"], None):
        assert ToolInfo({"name": "t", "_meta": {"ui": {"visibility": visibility}}}).visibility == ("model", "app")
    assert ToolInfo({"name": "t", "_meta": {"ui": {"visibility": ["app", "app"]}}}).visibility == ("app",)


async def test_read_ui_returns_the_html_and_its_meta_by_name_or_by_tool(reach: Any):
    async with await reach(mrtr.examples.apps.server) as client:
        by_name = await client.read_ui("onboard")
        tool = next(tool for tool in await client.list_tools() if tool.name == "onboard")
        by_tool = await client.read_ui(tool)
    page = WORKSPACE_PAGE.read_text(encoding="utf-8")
    assert by_name.uri == by_tool.uri == WORKSPACE and by_name.html == by_tool.html == page
    assert by_name.meta == UiResourceMeta(prefers_border=True)


async def test_read_ui_checks_what_the_server_claims(reach: Any):
    server = probe_server()
    async with await reach(server) as client:
        hand_written(server)
        flat = await client.read_ui("flat_only")  # the flat key alone links too; a base64 blob is decoded
        assert flat.uri == "ui://probe/blob.html" and flat.html == "<!doctype html><p>blöb"
        with pytest.raises(mrtr.ClientError, match="not an MCP App interface: its MIME type is 'text/html'"):
            await client.read_ui("not_an_app")
        with pytest.raises(mrtr.ClientError, match="has no interface"):
            await client.read_ui({"name": "bare"})
        with pytest.raises(mrtr.ClientError, match="no tool 'missing'"):
            await client.read_ui("missing")
        with pytest.raises(mrtr.ClientError, match="neither text nor UTF-8 HTML in base64"):
            await client.read_ui("broken")
        probe = await client.read_ui("renders")
        assert probe.meta.csp is not None and probe.meta.csp.connect_domains == ["https://api.example"]


async def test_read_ui_falls_back_to_the_listing_entry_when_the_content_has_no_meta(reach: Any):
    server = probe_server()
    server.catalog.resources["ui://probe/blob.html"].definition["_meta"] = {"ui": {"domain": "listed.example"}}
    async with await reach(server) as client:
        hand_written(server)
        assert (await client.read_ui("flat_only")).meta == UiResourceMeta(domain="listed.example")


# -- the commands (processes) --------------------------------------------------------------------------

SERVE = f"{sys.executable} -m mrtr serve mrtr.examples.apps:server --stdio --log-level warning"


def mrtr_command(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mrtr", *args], input=stdin, capture_output=True, text=True,
                          cwd=REPO, timeout=60, check=False)


@pytest.mark.slow
def test_mrtr_list_marks_the_tools_with_an_interface():
    done = mrtr_command("list", "--stdio", SERVE)
    assert done.returncode == 0, done.stderr
    assert f"  onboard [interface {WORKSPACE}]" in done.stdout
    assert "  invite [called by its interface only]" in done.stdout
    assert f"  {WORKSPACE} - A workspace's summary and team, after onboarding" in done.stdout


@pytest.mark.slow
def test_mrtr_call_mentions_the_interface_and_saves_it(tmp_path: Path):
    answers = "Ada Lovelace\nada@example.com\n2\n1\n\n1\n"
    said = mrtr_command("call", "--stdio", SERVE, "onboard", "company=Acme", stdin=answers)
    assert said.returncode == 0, said.stderr
    assert "Acme is set up: Ada Lovelace (ada@example.com)" in said.stdout
    assert f"onboard has an interface ({WORKSPACE}) that a host renders; --save-ui PATH writes it" in said.stderr

    target = tmp_path / "workspace.html"
    saved = mrtr_command("call", "--stdio", SERVE, "--save-ui", str(target), "onboard", "company=Acme", stdin=answers)
    assert saved.returncode == 0, saved.stderr
    assert f"wrote the interface {WORKSPACE} of onboard to {target}" in saved.stderr
    assert target.read_text(encoding="utf-8") == WORKSPACE_PAGE.read_text(encoding="utf-8")


@pytest.mark.slow
def test_mrtr_call_refuses_save_ui_for_a_tool_without_an_interface_before_calling_it(tmp_path: Path):
    target = tmp_path / "nothing.html"
    refused = mrtr_command("call", "--stdio", SERVE, "--save-ui", str(target), "invite", "company=Acme")
    assert refused.returncode == 2
    assert "--save-ui: tool 'invite' has no interface" in refused.stderr
    assert "Who should join" not in refused.stderr and not target.exists()
    refused = mrtr_command("call", "--stdio", SERVE, "--save-ui", str(target), "--resource", WORKSPACE)
    assert refused.returncode == 2 and "--save-ui writes the interface of the tool called" in refused.stderr
