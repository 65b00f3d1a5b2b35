"""The fixtures the official MCP conformance suite calls, for both revisions it judges a server by.

Serve it with ``mrtr serve tests.conformance.server:server --port 3001 --sse-poll-after 0.5``
(strict answer policy) or ``...:lenient_server`` (lenient), then point
``@modelcontextprotocol/conformance server --url http://127.0.0.1:3001/mcp`` at it with
``--requirements 2026-07-28`` and with ``--requirements 2025-11-25``, against the same
running server; ``.ci/conformance.sh`` does all of it. The 2025 scenarios open sessions
with ``initialize`` and get the same handlers' questions live, as server-to-client
requests; ``--sse-poll-after`` lets ``server-sse-polling`` see a stream closed for
polling and resumed.

Names, keys, messages and schemas follow what the suite's scenarios send and check
(``@modelcontextprotocol/conformance`` 0.2.0-alpha.12). The Multi Round-Trip fixtures are
ordinary generator handlers: each ``yield`` is a question, the runtime answers the call
with an ``InputRequiredResult`` and replays the handler when the client retries. The
``requestState`` they rely on is the runtime's sealed token; no fixture reads or writes
state itself.

A fixed secret lets several workers (or a restarted server) accept each other's tokens.
It is a test key: a real deployment reads its keys from ``MRTR_SECRET``.
"""

from __future__ import annotations

import io
import json
import struct
import wave
import zlib
from typing import Annotated, Any, Literal

import msgspec
import trio

from mrtr import Elicit, Form, ListRoots, PublicError, Sample
from mrtr.core import content, wire
from mrtr.server import Header, Server

from .tasks_tools import TASKS_URL
from .tasks_tools import register as register_task_tools

__all__ = ["SECRET", "lenient_server", "make_server", "server"]

SECRET = b"mrtr-conformance-fixture-key-32b"
"""The 32-byte AES-256-GCM key the fixture servers seal ``requestState`` with."""

assert len(SECRET) == 32


# -- media --------------------------------------------------------------------------------


def _png_pixel(rgb: tuple[int, int, int] = (255, 0, 0)) -> bytes:
    """A 1x1 PNG of one colour."""

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00" + bytes(rgb))) \
        + chunk(b"IEND", b"")


def _wav_silence(milliseconds: int = 10, rate: int = 8000) -> bytes:
    """A short mono 16-bit WAV of silence."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(b"\x00\x00" * (rate * milliseconds // 1000))
    return buffer.getvalue()


RED_PIXEL = _png_pixel()
SILENCE = _wav_silence()

_COMPLETIONS = {
    "arg1": ["paris", "park", "party", "test-alpha", "test-beta"],
    "arg2": ["world", "wonder", "test-gamma"],
    "resourceUri": ["test://static-text", "test://static-binary", "test://template/123/data"],
    "id": ["123", "124", "200"],
}


# -- the server -----------------------------------------------------------------------------


def make_server(answers: Literal["strict", "lenient"] = "strict") -> Server:
    """A fixture server with the given answer policy.

    ``"strict"`` (the runtime's default) rejects ``inputResponses`` sent without the
    ``requestState`` they answer, and answers to keys that were never asked or were
    already answered; ``"lenient"`` ignores what it does not need.
    """
    server = Server(
        "mrtr-conformance-fixtures",
        "0.1.0",
        title="mrtr conformance fixtures",
        instructions="Fixtures for the MCP conformance suite; every tool takes no arguments unless stated.",
        secret=SECRET,
        answers=answers,
        tasks_url=TASKS_URL,
    )

    # -- plain tools (listed first: some scenarios call the first listed tool) ------------

    @server.tool
    def test_simple_text() -> str:
        """Returns a simple text response."""
        return "This is a simple text response for testing."

    @server.tool
    def test_image_content() -> list:
        """Returns an image (a 1x1 red PNG)."""
        return [content.image(RED_PIXEL, "image/png")]

    @server.tool
    def test_audio_content() -> list:
        """Returns a short clip of silence as WAV audio."""
        return [content.audio(SILENCE, "audio/wav")]

    @server.tool
    def test_embedded_resource() -> list:
        """Returns an embedded text resource."""
        text = "This is an embedded resource content."
        return [content.embedded_text("test://embedded-resource", text, "text/plain")]

    @server.tool
    def test_multiple_content_types() -> list:
        """Returns text, an image and an embedded JSON resource in one result."""
        return [
            content.text("Multiple content types test:"),
            content.image(RED_PIXEL, "image/png"),
            content.embedded_text("test://mixed-content-resource", json.dumps({"test": "data", "value": 123}),
                                  "application/json"),
        ]

    @server.tool
    async def test_tool_with_progress(ctx) -> str:
        """Reports progress 0, 50 and 100 out of 100, about 50 ms apart."""
        ctx.progress(0, total=100)
        await trio.sleep(0.05)
        ctx.progress(50, total=100)
        await trio.sleep(0.05)
        ctx.progress(100, total=100)
        return "Progress test completed."

    @server.tool
    def test_error_handling() -> str:
        """Always fails; the failure comes back as an isError result."""
        raise PublicError("This tool intentionally returns an error for testing")

    @server.tool
    def test_logging_tool(ctx) -> str:
        """Logs at info level; the log reaches the client only if the request asked for a log level."""
        ctx.log("info", {"event": "test_logging_tool ran"}, logger="conformance")
        return "Logged (if the request asked for logs)."

    @server.tool
    def test_x_mcp_header(region: Annotated[str, Header("Region")], note: str = "") -> str:
        """Echoes a parameter that HTTP clients mirror in the Mcp-Param-Region header."""
        return f"region={region} note={note}"

    # -- what the 2025-11-25 scenarios call (in 2025 sessions the questions go out live) -------

    @server.tool
    async def test_tool_with_logging(ctx) -> str:
        """Logs three info messages about 50 ms apart (in a 2025 session, at the session's log level)."""
        ctx.log("info", "Tool execution started", logger="conformance")
        await trio.sleep(0.05)
        ctx.log("info", "Tool processing data", logger="conformance")
        await trio.sleep(0.05)
        ctx.log("info", "Tool execution completed", logger="conformance")
        return "Logging test completed."

    @server.tool
    def test_sampling(prompt: Annotated[str, msgspec.Meta(description="What to ask the client's model")]):
        """Asks the client's model to answer a prompt (sampling) and returns its answer."""
        reply = yield Sample(prompt, max_tokens=100)
        return f"LLM response: {_text_of(reply.content)}"

    @server.tool
    def test_elicitation(message: Annotated[str, msgspec.Meta(description="What to tell the user")]):
        """Asks the user for a username and an email address (an elicitation)."""
        answer = yield Elicit(message, Form().string("username", description="Your username")
                              .string("email", description="Your email address", format="email"))
        if not answer.accepted:
            return f"User response: action={answer.action}"
        return f"User response: action=accept, content={json.dumps(answer.content, sort_keys=True)}"

    @server.tool
    def test_elicitation_sep1034_defaults():
        """Asks a form whose every field has a default (SEP-1034)."""
        form = (Form().string("name", default="John Doe").integer("age", default=30).number("score", default=95.5)
                .choice("status", ["active", "inactive", "pending"], default="active")
                .boolean("verified", default=True))
        answer = yield Elicit("Please review and update the form fields with defaults", form)
        return f"Elicitation completed: action={answer.action}, content={json.dumps(answer.content, sort_keys=True)}"

    @server.tool
    def test_elicitation_sep1330_enums():
        """Asks a form with every kind of choice: untitled, titled and legacy single-selects, two multi-selects."""
        form = (Form().choice("untitledSingle", ["option1", "option2", "option3"])
                .choice("titledSingle", ["value1", "value2", "value3"],
                        titles=["First Option", "Second Option", "Third Option"])
                .choice("legacyEnum", ["opt1", "opt2", "opt3"], titles=["Option One", "Option Two", "Option Three"],
                        enum_names=True)
                .choices("untitledMulti", ["option1", "option2", "option3"])
                .choices("titledMulti", ["value1", "value2", "value3"],
                         titles=["First Choice", "Second Choice", "Third Choice"]))
        answer = yield Elicit("Please select options from the enum fields", form)
        return f"Elicitation completed: action={answer.action}, content={json.dumps(answer.content, sort_keys=True)}"

    @server.tool
    async def test_reconnection() -> str:
        """Runs 0.8 s; a server that polls 2025-11-25 streams (sse_poll_after) closes the stream meanwhile.

        Past the 0.5 s after which the runs close a stream for polling, and short of the 0.5 s
        the suite waits for the result once it has reconnected (at about 0.5 s): at a whole
        second the result came 2 ms before that wait ended, and a proxy's hop missed it.
        """
        await trio.sleep(0.8)
        return "Reconnection test completed."

    # -- Multi Round-Trip Requests ------------------------------------------------------------

    # A schema type hints cannot express, published as written (JSON Schema 2020-12).
    contact_schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "$anchor": "addressDef",
                "type": "object",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
            }
        },
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"},
            "email": {"type": "string"},
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": False,
    }

    @server.tool(input_schema=contact_schema)
    def json_schema_2020_12_tool(
        name: str | None = None,
        address: dict[str, str] | None = None,
        contactMethod: str | None = None,  # noqa: N803 - the wire name
        phone: str | None = None,
        email: str | None = None,
    ) -> str:
        """Record how to reach someone."""
        return f"{name or 'someone'} via {contactMethod or 'email'}: {phone or email}"

    @server.tool
    def test_input_required_result_elicitation():
        """Asks the user's name (an elicitation), then greets them."""
        answer = yield Elicit("What is your name?", Form().string("name"), key="user_name")
        if not answer.accepted:
            return f"No name given ({answer.action})."
        return f"Hello, {answer.content['name']}!"

    @server.tool
    def test_input_required_result_sampling():
        """Asks the client's model a question (sampling) and returns its answer."""
        reply = yield Sample("What is the capital of France?", max_tokens=100, key="capital_question")
        return f"The model said: {_text_of(reply.content)}"

    @server.tool
    def test_input_required_result_list_roots():
        """Asks the client for its roots and lists them."""
        listing = yield ListRoots(key="client_roots")
        uris = ", ".join(root.uri for root in listing.roots) or "none"
        return f"Client roots: {uris}"

    @server.tool
    def test_input_required_result_request_state():
        """Asks for a confirmation; the answer only counts with the requestState the first round issued."""
        answer = yield Elicit("Please confirm", Form().boolean("ok"), key="confirm")
        confirmed = answer.accepted and answer.content["ok"]
        # Reaching this line means the runtime opened and authenticated the echoed requestState.
        return f"state-ok: confirmed={str(confirmed).lower()}"

    @server.tool
    def test_input_required_result_multiple_inputs():
        """Asks three things in one round: the user's name, a greeting from the model, the client's roots."""
        answers = yield {
            "user_name": Elicit("What is your name?", Form().string("name")),
            "greeting": Sample("Generate a greeting", max_tokens=50),
            "client_roots": ListRoots(),
        }
        name = answers["user_name"].content["name"] if answers["user_name"].accepted else "stranger"
        greeting = _text_of(answers["greeting"].content)
        roots = len(answers["client_roots"].roots)
        return f"{greeting} {name} ({roots} root{'s' if roots != 1 else ''})"

    @server.tool
    def test_input_required_result_multi_round():
        """Asks two questions in two rounds: a name, then a favourite colour."""
        name = yield Elicit("Step 1: What is your name?", Form().string("name"), key="step1")
        color = yield Elicit("Step 2: What is your favorite color?", Form().string("color"), key="step2")
        who = name.content["name"] if name.accepted else "someone"
        favourite = color.content["color"] if color.accepted else "no colour"
        return f"{who} likes {favourite}."

    @server.tool
    def test_input_required_result_tampered_state():
        """Asks for a confirmation; a retry whose requestState was altered is refused."""
        answer = yield Elicit("Please confirm", Form().boolean("ok"), key="confirm")
        return f"confirmed={answer.accepted and answer.content['ok']}"

    @server.tool
    def test_input_required_result_capabilities(ctx):
        """Asks the user's name by form if the client can show one, else asks the client's model."""
        if ctx.supports(Elicit):
            answer = yield Elicit("What is your name?", Form().string("name"), key="user_name")
            return f"Hello, {answer.content['name']}!" if answer.accepted else "No name given."
        reply = yield Sample("Suggest a name for a new user.", max_tokens=20, key="suggested_name")
        return f"Hello, {_text_of(reply.content)}!"

    @server.tool
    def test_missing_capability():
        """Needs sampling; a client that did not declare it gets -32021 MissingRequiredClientCapability."""
        reply = yield Sample("Say something.", max_tokens=10)
        return _text_of(reply.content)

    @server.tool
    def test_streaming_elicitation():
        """Asks for input the 2026-07-28 way: an InputRequiredResult, never a request on the response stream."""
        answer = yield Elicit("Anything to add?", Form().string("note"), key="note")
        return f"Noted: {answer.content['note']}" if answer.accepted else "Nothing noted."

    # -- prompts ------------------------------------------------------------------------------

    @server.prompt
    def test_simple_prompt():
        """A simple prompt without arguments."""
        return "This is a simple prompt for testing."

    @server.prompt
    def test_prompt_with_arguments(
        arg1: Annotated[str, msgspec.Meta(description="First test argument")],
        arg2: Annotated[str, msgspec.Meta(description="Second test argument")],
    ):
        """A prompt that substitutes two arguments."""
        return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"

    @server.prompt
    def test_prompt_with_embedded_resource(
        resourceUri: Annotated[str, msgspec.Meta(description="URI of the resource to embed")],
    ):
        """A prompt that embeds a resource."""
        return [
            {"role": "user", "content": content.embedded_text(resourceUri, "Embedded resource content for testing.")},
            "Please process the embedded resource above.",
        ]

    @server.prompt
    def test_prompt_with_image():
        """A prompt that carries an image."""
        return [
            {"role": "user", "content": content.image(RED_PIXEL, "image/png")},
            "Please analyze the image above.",
        ]

    @server.prompt
    def test_input_required_result_prompt():
        """A prompt that first asks what context to use."""
        answer = yield Elicit("What context should the prompt use?", Form().string("context"), key="user_context")
        context = answer.content["context"] if answer.accepted else "no particular context"
        return f"Answer the next question using this context: {context}"

    # -- resources (the first listed one is read by the caching scenario) ---------------------

    @server.resource("test://static-text", name="static-text", mime_type="text/plain")
    def static_text() -> str:
        """A static text resource."""
        return "This is the content of the static text resource."

    @server.resource("test://static-binary", name="static-binary", mime_type="image/png")
    def static_binary() -> bytes:
        """A static binary resource (a 1x1 PNG)."""
        return RED_PIXEL

    @server.resource_template("test://template/{id}/data", name="template-data", mime_type="application/json")
    def template_data(id: str) -> str:
        """JSON data for an id."""
        return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})

    @server.resource("test://watched-resource", name="watched-resource", mime_type="text/plain")
    def watched_resource() -> str:
        """A resource a 2025 session may subscribe to."""
        return "Watched resource content."

    # -- diagnostic hooks the suite calls to change the lists under an open listen stream --

    def dynamic_tool() -> str:
        """A tool that comes and goes with test_trigger_tool_change."""
        return "dynamic"

    def dynamic_prompt() -> str:
        """A prompt that comes and goes with test_trigger_prompt_change."""
        return "dynamic"

    @server.tool
    def test_trigger_tool_change() -> str:
        """Adds or removes test_dynamic_tool, then tells subscriptions/listen streams."""
        if server.catalog.tools.pop("test_dynamic_tool", None) is None:
            server.tool(dynamic_tool, name="test_dynamic_tool")
        server.notify_tools_changed()
        return "tool list changed"

    @server.tool
    def test_trigger_prompt_change() -> str:
        """Adds or removes test_dynamic_prompt, then tells subscriptions/listen streams."""
        if server.catalog.prompts.pop("test_dynamic_prompt", None) is None:
            server.prompt(dynamic_prompt, name="test_dynamic_prompt")
        server.notify_prompts_changed()
        return "prompt list changed"

    @server.completion
    def complete(ref: dict[str, Any], argument: dict[str, Any], context: Any) -> dict[str, Any]:
        prefix = str(argument.get("value", ""))
        candidates = _COMPLETIONS.get(str(argument.get("name")), [])
        values = [value for value in candidates if value.startswith(prefix)]
        return {"values": values, "total": len(values), "hasMore": False}

    register_task_tools(server)
    return server


def _text_of(block: Any) -> str:
    """The text of a sampling reply's content (one block or a list of blocks)."""
    blocks = block if isinstance(block, list) else [block]
    return " ".join(item.text for item in blocks if isinstance(item, wire.TextContent)) or "(no text)"


server = make_server("strict")
"""The fixture server under the strict answer policy (the runtime's default)."""

lenient_server = make_server("lenient")
"""The fixture server under the lenient answer policy."""
