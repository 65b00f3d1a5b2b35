"""Fixtures for the client tests: one server, three ways to reach it.

``connect`` is parametrized over ``inprocess`` (the Server object), ``http`` (the
native server in the test's nursery on a port chosen by the OS) and ``stdio``
(``mrtr serve tests.client.app:server --stdio`` as a subprocess). Every message the
client sends and every result it gets is checked against the official schema by
:class:`Checked`, which wraps the client's target.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

import mrtr
from mrtr.client.targets import OnNotification, Target
from mrtr.transports.http.native import serve

from ..legacy_schema import validate_legacy_message
from ..tasks.tasks_schema import validate_task
from ..wire_schema import RESULT_DEFS, validate, validate_message
from .app import server as app_server

REPO = Path(__file__).resolve().parents[2]

_REQUEST_DEFS = {
    "tools/call": "CallToolRequest",
    "prompts/get": "GetPromptRequest",
    "resources/read": "ReadResourceRequest",
    "tools/list": "ListToolsRequest",
    "prompts/list": "ListPromptsRequest",
    "resources/list": "ListResourcesRequest",
    "resources/templates/list": "ListResourceTemplatesRequest",
    "server/discover": "DiscoverRequest",
    "completion/complete": "CompleteRequest",
    "subscriptions/listen": "SubscriptionsListenRequest",
}


def check_sent(message: Mapping[str, Any]) -> None:
    """Validate a request the client sends, including every answer in ``inputResponses``."""
    validate(message, "JSONRPCRequest")
    if message["method"].startswith("tasks/"):
        validate_task({"tasks/get": "GetTaskRequest", "tasks/update": "UpdateTaskRequest",
                       "tasks/cancel": "CancelTaskRequest"}[message["method"]], dict(message))
    else:
        validate(message, _REQUEST_DEFS[message["method"]])
    for value in (message["params"].get("inputResponses") or {}).values():
        validate(value, "InputResponse")


class Checked:
    """A target wrapper that validates traffic and records ``(message, result)`` pairs.

    Messages of a legacy session are checked against the 2025-11-25 schema, a task
    against the tasks extension's; anything else the client asks of the target (the
    legacy session's attributes) reaches the wrapped one.
    """

    def __init__(self, inner: Target) -> None:
        self.inner = inner
        self.mirrors_headers = inner.mirrors_headers
        self.exchanges: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
        if callable(getattr(inner, "on_notification", None)):
            self.on_notification = inner.on_notification  # the client set it before this wrapper: checked from now on

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("inner", "mirrors_headers", "exchanges"):
            object.__setattr__(self, name, value)
        elif name == "on_notification" and callable(value):
            # A legacy session's notifications that belong to no request (list changes, resource updates).
            def checked(note: dict[str, Any], deliver: Any = value) -> None:
                validate_legacy_message(note)
                deliver(note)

            setattr(self.inner, name, checked)
        else:
            setattr(self.inner, name, value)

    async def open(self, nursery: trio.Nursery) -> None:
        await self.inner.open(nursery)

    def _legacy(self) -> bool:
        return getattr(self.inner, "era", "modern") == "legacy"

    async def send(self, message: dict[str, Any], on_notification: OnNotification,
                   parameters: Any = None, **extra: Any) -> dict[str, Any]:
        legacy = self._legacy()
        if legacy:
            validate_legacy_message(message)
        else:
            check_sent(message)
        entry: tuple[dict[str, Any], dict[str, Any] | None] = (message, None)
        self.exchanges.append(entry)

        def notified(note: dict[str, Any]) -> None:
            validate_legacy_message(note) if legacy else validate_message(note)
            on_notification(note)

        if "on_request" in extra:
            answer = extra["on_request"]

            async def on_request(server_request: dict[str, Any]) -> dict[str, Any]:
                validate_legacy_message(server_request)
                response = await answer(server_request)
                validate_legacy_message(response, server_request["method"])
                return response

            extra["on_request"] = on_request
        result = await self.inner.send(message, notified, parameters, **extra)
        if legacy:
            validate_legacy_message({"jsonrpc": "2.0", "id": message["id"], "result": result}, message["method"])
        elif result.get("resultType") == "task" or message["method"].startswith("tasks/"):
            kind = {"tools/call": "CreateTaskResult", "tasks/get": "GetTaskResult", "tasks/update": "UpdateTaskResult",
                    "tasks/cancel": "CancelTaskResult"}[message["method"]]
            validate_task(kind, result)
        else:
            kind = "InputRequiredResult" if result.get("resultType") == "input_required" else \
                RESULT_DEFS.get(message["method"])
            validate_message({"jsonrpc": "2.0", "id": message["id"], "result": result}, result_def=kind)
        self.exchanges[self.exchanges.index(entry)] = (message, result)
        return result

    async def aclose(self) -> None:
        await self.inner.aclose()

    def calls(self, method: str = "tools/call") -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
        """The ``(message, result)`` pairs of ``method``, in order (``tools/list`` may come between)."""
        return [(message, result) for message, result in self.exchanges if message["method"] == method]

    def sent(self, method: str = "tools/call") -> list[dict[str, Any]]:
        """The params of every request of ``method``, in order."""
        return [message["params"] for message, _ in self.exchanges if message["method"] == method]


def stdio_command() -> list[str]:
    return [sys.executable, "-m", "mrtr", "serve", "tests.client.app:server", "--stdio", "--log-level", "warning"]


# Over stdio the client starts `mrtr serve --stdio`: that parameter belongs to the slow tier.
@pytest.fixture(params=["inprocess", "http", pytest.param("stdio", marks=pytest.mark.slow)])
async def connect(request: Any, nursery: trio.Nursery) -> Callable[..., mrtr.Client]:
    """``connect(**options)``: a (not yet entered) Client for the test server, traffic checked."""
    kind = request.param
    url = None
    if kind == "http":
        port = await nursery.start(partial(serve, app_server, "127.0.0.1", 0))
        url = f"http://127.0.0.1:{port}/mcp"

    def make(**options: Any) -> mrtr.Client:
        if kind == "inprocess":
            client = mrtr.Client(app_server, **options)
        elif kind == "http":
            client = mrtr.Client(url, **options)  # type: ignore[arg-type]
        else:
            client = mrtr.Client.stdio(stdio_command(), cwd=str(REPO), stderr=subprocess.DEVNULL, **options)
        client.target = Checked(client.target)
        return client

    make.kind = kind  # type: ignore[attr-defined]
    return make
