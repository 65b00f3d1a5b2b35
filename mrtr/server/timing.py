"""``Timing``: how long each request took below it, on its access line and its trace span.

The access line already names the method and the target (the tool, the prompt, the
resource) and its whole duration, from the first byte read to the last written.
``Timing`` adds the part spent below it in the pipeline: the middleware after it and the
method, the handler's own work included, without the transport's. Registered first, it
measures everything the server did; registered last, the method alone. The duration
goes on the request's access line as ``timing_ms=`` (a member of the JSON line) and on
its OpenTelemetry span as ``mrtr.timing_ms``, beside the method and target they already
carry, so a log query or a trace view breaks it down per method and per target.

In the modern era each round of a conversation is a request and is timed alone (the
line says which ``round`` it was); a 2025-era call is one request, the time its client
took to answer the questions asked inside it included.
"""

from __future__ import annotations

import time
from typing import Any

from .pipeline import CallNext, Incoming, checked_note_name

__all__ = ["Timing"]


class Timing:
    """A middleware noting how long the rest of the pipeline and the method took (see the module).

    ``field`` is the name the duration goes by, in milliseconds: ``timing_ms`` on the
    access line, ``mrtr.timing_ms`` on the span. Two ``Timing`` (one first, one last) need
    two names::

        server.middleware(Timing())                        # everything the server did
        ...
        server.middleware(Timing(field="handler_ms"))     # the method alone
    """

    def __init__(self, *, field: str = "timing_ms") -> None:
        self.field = checked_note_name(field)

    async def __call__(self, request: Incoming, call_next: CallNext) -> Any:
        """Run the rest of the pipeline and note how long it took, whether it answered or failed."""
        started = time.perf_counter()
        try:
            return await call_next(request)
        finally:
            request.note(self.field, round((time.perf_counter() - started) * 1000.0, 3))

    def __repr__(self) -> str:
        return f"Timing(field={self.field!r})"
