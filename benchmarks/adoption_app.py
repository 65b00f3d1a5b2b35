"""The server of part 11 (2025 calls that survive): ``mrtr serve benchmarks.adoption_app:server --store ...``.

- ``ask2(plan)``: two questions, one per round, answered with an email; the result is made of
  the call's own answers and plan (an answer that reached another call shows);
- ``store_operations()``: what this process asked of the store of recorded calls so far,
  by operation: how many times, and the bytes of the payloads it wrote (states, events,
  answers, session copies), counted by wrapping every operation of the SQLite and Redis
  stores of calls (:mod:`mrtr.carriers.tasks.calls_sqlite`, :mod:`mrtr.carriers.tasks.calls_redis`).

Its key is ``MRTR_SECRET``, shared by the nodes; its lease ``--task-lease``.
"""

from __future__ import annotations

import functools
import json
import os
from collections import Counter
from typing import Any

from mrtr import Elicit, Form, Server
from mrtr.carriers.tasks.calls import Created
from mrtr.carriers.tasks.calls_redis import RedisCalls
from mrtr.carriers.tasks.calls_sqlite import SQLiteCalls

FORM = Form().string("email", format="email")

OPERATIONS: Counter[str] = Counter()
BYTES: Counter[str] = Counter()


def _payload(value: Any) -> int:
    """The bytes a store operation writes of its arguments (JSON bodies and events), not its keys."""
    if isinstance(value, (bytes, bytearray)):
        return len(value)
    if isinstance(value, Created):
        return len(value.request) + len(value.meta)
    if isinstance(value, list):
        return sum(_payload(item) for item in value)
    if isinstance(value, tuple):
        return sum(_payload(item) for item in value)
    return 0


def _counted(cls: type, name: str) -> None:
    original = getattr(cls, name)

    @functools.wraps(original)
    async def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        OPERATIONS[name] += 1
        BYTES[name] += sum(_payload(value) for value in (*args, *kwargs.values()))
        return await original(self, *args, **kwargs)

    setattr(cls, name, counted)


for _cls in (SQLiteCalls, RedisCalls):
    for _name in ("write", "claim", "release", "read", "answer", "find", "forget", "hold_lease", "end_lease",
                  "save_session", "load_session", "delete_session"):
        if hasattr(_cls, _name):
            _counted(_cls, _name)

_timeout = os.environ.get("BENCH_ANSWER_TIMEOUT")
server = Server("bench-adoption", "1.0.0", answer_timeout=float(_timeout) if _timeout else None)


@server.tool
def ask2(plan: str) -> Any:
    """Two questions, one per round."""
    first = yield Elicit("Question 1?", FORM)
    second = yield Elicit("Question 2?", FORM)
    return f"{first.content['email']},{second.content['email']}:{plan}"


@server.tool
def store_operations() -> str:
    """What this process asked of the store of recorded calls: operations and bytes written, by operation."""
    return json.dumps({"operations": dict(OPERATIONS), "bytes": dict(BYTES), "pid": os.getpid()})
