"""The server the MCP Apps checks of the official TypeScript client talk to: every field of the extension.

``mrtr serve tests.apps.app:server`` (HTTP or ``--stdio``). ``dashboard`` has an interface
whose resource declares a CSP of every kind, permissions, a domain and a border preference;
it says in its result whether the caller declared the extension. ``refresh`` is called by
interfaces only and asks a question; ``plain`` is a tool without an interface.
"""

from __future__ import annotations

from typing import Any

from mrtr import Context, Csp, Elicit, Form, Server

DASHBOARD = "ui://tests-apps/dashboard.html"
HTML = ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Dashboard</title></head>"
        "<body><p id=\"region\">…</p></body></html>\n")

server = Server("apps-checks", "1.0.0")
server.ui_resource(
    DASHBOARD, html=HTML, name="dashboard", title="Dashboard", description="Sales by region",
    csp=Csp(connect=["https://api.example.com", "wss://live.example.com"], resources=["https://*.cdn.example.com"],
            frames=["https://player.example.com"], base_uri=["https://example.com"]),
    permissions=["camera", "microphone", "geolocation", "clipboardWrite"], domain="a1b2c3d4.example-content.com",
    prefers_border=False)


@server.tool(ui=DASHBOARD)
def dashboard(ctx: Context, region: str) -> Any:
    """Sales of a region; hosts that render apps show them on the dashboard."""
    return {"content": [{"type": "text", "text": f"Sales in {region}: 42 (interface rendered: {ctx.supports_ui})"}],
            "structuredContent": {"region": region, "sales": 42, "ui": ctx.supports_ui}}


@server.tool(visibility=("app",))
def refresh(ctx: Context, region: str) -> Any:
    """Refresh a region's figures (the dashboard calls it); asks first."""
    sure = yield Elicit(f"Refresh {region} now?", Form().boolean("go"))
    return f"refreshed {region}" if sure.accepted and sure.content["go"] else f"left {region} alone"


@server.tool
def plain(text: str) -> str:
    """A tool without an interface."""
    return text
