"""The onboarding wizard with an interface (MCP Apps): ``mrtr serve mrtr.examples.apps:server``.

- tool ``onboard``: the wizard of :mod:`mrtr.examples.onboarding` (four rounds of
  questions), linked to the interface ``ui://mrtr-example/workspace.html``. A host that
  renders apps shows the workspace page with the summary (``structuredContent``); every
  host, and the model, gets the summary as a sentence (the text ``content``);
- tool ``invite``: called by the page only (``visibility=("app",)``); it asks whom to
  invite, so the page's own call goes through the same rounds (2026-07-28) or live
  questions (2025 sessions) as any call;
- resource ``ui://mrtr-example/workspace.html``: the page, ``workspace.html`` beside
  this module, with every script and style inline (it declares no origin to reach).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mrtr import Context, Elicit, Form, Server
from mrtr.examples.onboarding import onboard as wizard

WORKSPACE = "ui://mrtr-example/workspace.html"

server = Server(
    "mrtr-apps-example",
    "0.1.0",
    instructions="Call the onboard tool to set up a workspace; hosts that render apps show the workspace page.",
)

server.ui_resource(WORKSPACE, path=Path(__file__).with_name("workspace.html"), name="workspace",
                   title="Workspace", description="A workspace's summary and team, after onboarding",
                   prefers_border=True)


@server.tool(ui=WORKSPACE)
def onboard(ctx: Context, company: str) -> Any:
    """Set up a workspace for ``company``, asking the user what is needed; the workspace page shows the result."""
    summary = yield from wizard(ctx, company)
    if isinstance(summary, str):  # stopped early: the sentence says why
        return summary
    text = (f"{summary['company']} is set up: {summary['admin']} ({summary['email']}) administers it on the "
            f"{summary['plan']} plan, with its data in {summary['region']}.")
    return {"content": [{"type": "text", "text": text}], "structuredContent": summary}


@server.tool(visibility=("app",))
def invite(ctx: Context, company: str) -> Any:
    """Invite a teammate to ``company``'s workspace (the workspace page calls it)."""
    who = yield Elicit(f"Who should join {company}'s workspace?", Form().string("email", format="email"))
    if not who.accepted:
        return {"content": [{"type": "text", "text": "No one was invited."}], "structuredContent": {"invited": None}}
    email = who.content["email"]
    return {"content": [{"type": "text", "text": f"Invited {email} to {company}."}],
            "structuredContent": {"invited": email}}
