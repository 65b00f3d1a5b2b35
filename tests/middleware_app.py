"""The server the built-in middleware are tested through in real processes (``mrtr serve tests.middleware_app:server``).

The caller is the ``x-tenant`` header (the principal; none over stdio). In order:
``Timing()``, ``RateLimit`` (``MW_RATE`` tokens a second, ``MW_BURST`` at once: 0.05 and
6 unless the environment says otherwise), ``Authorize`` (tools and prompts named
``admin_*`` and the ``secret://`` resources for the tenant ``root`` alone) and
``Cache(ttl=60)``. What the tests need of the handlers:

- ``signup(plan)``: a conversation of two questions;
- ``rates(currency)``: read only, so cached; its answer counts how often it ran in this
  process, so a cached answer shows;
- ``report(n)``: read only but a task tool: a task is never cached, and its ``tasks/get``
  polls never count against the rate;
- ``admin_reset()``, ``admin_job(n)`` (a task tool), ``admin_prompt``, ``secret://{key}``:
  what ``Authorize`` keeps from everyone but ``root``.
"""

from __future__ import annotations

import base64
import os
from typing import Any

from mrtr import Elicit, Form, Server
from mrtr.middleware import Authorize, Cache, Component, Incoming, RateLimit, Timing

_ran: dict[str, int] = {}


def _count(name: str) -> int:
    _ran[name] = _ran.get(name, 0) + 1
    return _ran[name]


def _tenant(info: Any) -> str | None:
    return info.headers.get("x-tenant")


def _may_use(request: Incoming, component: Component) -> bool:
    guarded = component.name.startswith(("admin_", "secret://"))
    return not guarded or request.principal == "root"


secret = None if os.environ.get("MRTR_SECRET") else base64.b64encode(b"m" * 32).decode()
server = Server("middleware-test", "1.0.0", secret=secret, principal=_tenant)
server.middleware(Timing())
server.middleware(RateLimit(per_second=float(os.environ.get("MW_RATE", "0.05")),
                            burst=float(os.environ.get("MW_BURST", "6")), name="general"))
server.middleware(Authorize(_may_use))
server.middleware(Cache(ttl=60))


@server.tool
def signup(plan: str) -> Any:
    """Two questions: a name, then an email."""
    name = yield Elicit("Your name?", Form().string("name"))
    email = yield Elicit("Your email?", Form().string("email"))
    return f"{name.content['name']} <{email.content['email']}> on {plan}"


@server.tool(annotations={"readOnlyHint": True})
def rates(currency: str) -> str:
    """Read only: the cache answers a second call."""
    return f"{currency} run {_count('rates:' + currency)}"


@server.tool(task="optional", annotations={"readOnlyHint": True})
def report(n: int) -> str:
    """A task tool (read only, yet never cached: a task is not)."""
    return f"report {n} run {_count('report')}"


@server.tool
def admin_reset() -> str:
    """For root alone."""
    return "reset"


@server.tool(task="optional")
def admin_job(n: int) -> str:
    """A task tool for root alone."""
    return f"job {n}"


@server.prompt
def summary(topic: str) -> str:
    """A prompt anyone may get."""
    return f"Summarize {topic}"


@server.prompt
def admin_prompt() -> str:
    """For root alone."""
    return "the admin prompt"


@server.resource_template("secret://{key}")
def secret_value(key: str) -> str:
    """For root alone."""
    return f"secret {key}"
