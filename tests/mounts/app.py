"""A shop that mounts its billing server, for the served mount tests: ``mrtr serve tests.mounts.app:server``.

Both servers have a middleware that writes one line per request it sees to the file named
by ``MRTR_TEST_MOUNT_LOG`` (if set), so a test reads what each layer saw and in which order.
"""

from __future__ import annotations

import os
from typing import Any

from mrtr import Elicit, Form, Server, Step
from mrtr.middleware import Incoming
from mrtr.testing import TEST_SECRET


def _seen(layer: str) -> Any:
    async def record(request: Incoming, call_next: Any) -> Any:
        path = os.environ.get("MRTR_TEST_MOUNT_LOG")
        if path:
            with open(path, "a") as log:
                log.write(f"{layer} {request.era} {request.method} {request.name} {request.round}\n")
        return await call_next(request)
    return record


def invoice_total(invoice: str) -> int:
    return 40 + len(invoice)


billing = Server("billing", "1.0.0", secret=TEST_SECRET)
billing.middleware(_seen("billing"))


@billing.tool
def refund(invoice: str) -> Any:
    """Refund an invoice, after two questions."""
    amount = yield Step(invoice_total, invoice)
    why = yield Elicit(f"Why refund {invoice}?", Form().string("reason"))
    sure = yield Elicit(f"Refund {amount}?", Form().boolean("ok"))
    if not sure.content["ok"]:
        return "kept"
    return f"refunded {amount} for {why.content['reason']}"


server = Server("shop", "1.0.0", secret=TEST_SECRET)
server.middleware(_seen("shop"))


@server.tool
def ping() -> str:
    """Answer pong."""
    return "pong"


server.mount(billing, "billing")
