"""Tools for the tests of rounds that run once and of patches, served by ``mrtr serve`` in subprocesses.

Side effects are lines appended to a file the test names in the arguments (with the
process id that wrote them), so the test counts them across processes. ``ONCE_APP_VERSION``
picks which version of ``book`` and ``deploy`` this process serves, as three deploys
would: ``1`` the original, ``2`` a change behind ``Patched("add-region")``, ``3`` the
same change without the gate.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from mrtr import Elicit, Form, Patched, Server, Step

VERSION = os.environ.get("ONCE_APP_VERSION", "1")
CONFIRM = Form().boolean("ok")
CHOICE = Form().string("value")

server = Server("once-test", "1.0.0")  # MRTR_SECRET comes from the environment, shared by every process


def _append(path: str, line: str) -> None:
    with open(path, "a") as file:
        file.write(f"{line} {os.getpid()}\n")
        file.flush()
        os.fsync(file.fileno())


@server.tool(once=True)
def charge(amount: int, ledger: str) -> Any:
    """Confirms, then writes one charge to the ledger file: it must be written once per conversation."""
    answer = yield Elicit(f"Charge {amount}?", CONFIRM)
    if not answer.value["ok"]:
        return "not charged"
    _append(ledger, f"charged {amount}")
    return f"charged {amount} by {os.getpid()}"


@server.tool(once=True)
def slow_charge(amount: int, ledger: str, gate: str) -> Any:
    """Like charge, but its final round waits for the file ``gate`` first (the test kills the process there)."""
    yield Elicit(f"Charge {amount}?", CONFIRM)
    _append(ledger, "started")
    while not Path(gate).exists():
        time.sleep(0.02)
    _append(ledger, f"charged {amount}")
    return f"charged {amount} by {os.getpid()}"


@server.tool(task="optional")
def ship(item: str, ledger: str) -> Any:
    """A question on the call, then the task: its creating round is the one retried."""
    yield Elicit(f"Ship {item}?", CONFIRM)
    label = yield Step(_label, item, ledger)
    return f"shipped {label}"


def _label(item: str, ledger: str) -> str:
    _append(ledger, f"label {item}")
    return f"L-{item}"


if VERSION == "1":
    @server.tool
    def book() -> Any:
        day = yield Elicit("Which day?", CHOICE)
        hour = yield Elicit("Which hour?", CHOICE)
        return f"v1 {day.value['value']} {hour.value['value']}"

    @server.tool(task="required")
    def deploy(service: str) -> Any:
        build = yield Step(_build, service)
        ok = yield Elicit(f"Deploy {build}?", CONFIRM)
        return f"v1 deployed {build}" if ok.value["ok"] else "cancelled"

elif VERSION == "2":
    @server.tool
    def book() -> Any:
        day = yield Elicit("Which day?", CHOICE)
        if (yield Patched("add-region")):
            region = yield Elicit("Which region?", CHOICE)
            hour = yield Elicit("Which hour?", CHOICE)
            return f"v2 {day.value['value']} {region.value['value']} {hour.value['value']}"
        hour = yield Elicit("Which hour?", CHOICE)
        return f"v2-old {day.value['value']} {hour.value['value']}"

    @server.tool(task="required")
    def deploy(service: str) -> Any:
        build = yield Step(_build, service)
        if (yield Patched("add-region")):
            region = yield Elicit("Which region?", CHOICE)
            ok = yield Elicit(f"Deploy {build} to {region.value['value']}?", CONFIRM)
            return f"v2 deployed {build} to {region.value['value']}" if ok.value["ok"] else "cancelled"
        ok = yield Elicit(f"Deploy {build}?", CONFIRM)
        return f"v2-old deployed {build}" if ok.value["ok"] else "cancelled"

else:
    @server.tool
    def book() -> Any:
        day = yield Elicit("Which day?", CHOICE)
        region = yield Elicit("Which region?", CHOICE)
        hour = yield Elicit("Which hour?", CHOICE)
        return f"v3 {day.value['value']} {region.value['value']} {hour.value['value']}"

    @server.tool(task="required")
    def deploy(service: str) -> Any:
        build = yield Step(_build, service)
        region = yield Elicit("Which region?", CHOICE)
        ok = yield Elicit(f"Deploy {build} to {region.value['value']}?", CONFIRM)
        return f"v3 deployed {build} to {region.value['value']}" if ok.value["ok"] else "cancelled"


def _build(service: str) -> str:
    return f"{service}-build-7"
