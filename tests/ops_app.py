"""A server without a configured key, for the operability tests (served as ``tests.ops_app:server``)."""

from __future__ import annotations

from mrtr import Elicit, Form
from mrtr.server import Server

server = Server("ops-test", "1.0.0", mask_errors=False)  # shows the client what failed, as in development
masked = Server("ops-masked", "1.0.0", secret=b"m" * 32)  # the default: errors masked


def _register(target: Server) -> None:
    @target.tool
    def greet():
        """Ask a name, then greet."""
        answer = yield Elicit("What is your name?", Form().string("name", min_length=1))
        return f"Hello, {answer.content['name']}"

    @target.tool
    def explode(detail: str = "disk on fire") -> str:
        """Always raises."""
        raise ValueError(detail)

    @target.prompt
    def briefing(topic: str) -> str:
        """A prompt that fails for the topic "boom"."""
        if topic == "boom":
            raise RuntimeError("prompt broke: secret-internal-detail")
        return f"Brief me on {topic}"

    @target.resource("config://app", mime_type="text/plain")
    def config() -> str:
        """A fixed resource."""
        return "debug=false"


_register(server)
_register(masked)
