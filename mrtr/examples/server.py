"""The example server that ``mrtr serve`` runs when given no application.

- tool ``onboard``: an onboarding wizard (sequential questions, one group round, a
  Step reading from a store, decline handling, progress);
- tool ``add``: a plain tool that never asks;
- prompt ``review``: asks which aspect to focus on before writing the prompt;
- resource ``notes://welcome``: asks for consent before revealing its text.
"""

from __future__ import annotations

from mrtr import Elicit, Form, Server
from mrtr.examples.onboarding import onboard

server = Server(
    "mrtr-example",
    "0.1.0",
    instructions="Call the onboard tool to set up a workspace; it will ask a few questions.",
)

server.tool(onboard)


@server.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.prompt
def review(ctx, language: str):
    """A code review prompt that first asks what to focus on."""
    focus = yield Elicit(
        f"What should the {language} review focus on?",
        Form().choice("focus", ["correctness", "performance", "style"]),
    )
    aspect = focus.content["focus"] if focus.accepted else "everything"
    return f"Review the following {language} code, focusing on {aspect}."


@server.resource("notes://welcome", mime_type="text/plain")
def welcome():
    """A welcome note, shown after the reader agrees to the terms."""
    consent = yield Elicit("Do you accept the terms to read this note?", Form().boolean("agree"))
    if consent.accepted and consent.content["agree"]:
        return "Welcome aboard! Start with the onboard tool."
    return "You need to accept the terms to read this note."
