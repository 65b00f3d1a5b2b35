"""Replay overhead per round, against baselines measured in the same run.

Usage: ``python benchmarks/replay_overhead.py [--rounds N]``

What is measured (median of several repeats, microseconds per round):

- ``direct``: the handler's own work with the answer handed to it, no runtime at all.
- ``exception``: a minimal re-implementation of the exception-based design we started
  from (``ctx.elicit()`` fingerprints with sorted JSON, looks the ordinal up in a
  ledger, and raises to pause), so "no slower than the seed" is a same-run ratio.
- ``mrtr replay``: :func:`mrtr.replay` with one answered slot (the final round of a
  one-question conversation, answer trusted from the token).
- ``mrtr fresh``: the same, but the answer arrived in this round and is validated
  against the schema first.
- ``mrtr wire round``: the whole wire carrier for that round: unseal and check the
  token, merge the answer, replay and complete.
- ``mrtr wire pause``: a first round that pauses: replay to the question and mint a
  token.

The runtime's overhead is ``mrtr replay - direct``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mrtr import Context, Elicit, Form  # noqa: E402
from mrtr.engine import Engine  # noqa: E402
from mrtr.ledger import Ledger, merge_answers  # noqa: E402
from mrtr.replay import replay  # noqa: E402
from mrtr.state import RequestStateCodec  # noqa: E402

SCHEMA = Form().string("email", format="email")
CAPS = {"elicitation": {}}
ANSWER = {"action": "accept", "content": {"email": "ada@example.com"}}


def handler(plan: str):
    answer = yield Elicit("Your email?", SCHEMA)
    return f"{answer.content['email']}:{plan}"


def direct(plan: str, answer: dict) -> str:
    return f"{answer['content']['email']}:{plan}"


# -- a minimal exception-based replayer, the shape of the design we started from --------


class _Pending(Exception):
    pass


class _ExceptionContext:
    def __init__(self, ledger: list[dict]) -> None:
        self.ledger = ledger
        self.cursor = 0

    def elicit(self, message: str, schema: dict) -> dict:
        params = {"mode": "form", "message": message, "requestedSchema": schema}
        fingerprint = "sha256:" + hashlib.sha256(json.dumps(params, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
        self.cursor += 1
        if self.cursor <= len(self.ledger):
            entry = self.ledger[self.cursor - 1]
            if entry["fingerprint"] != fingerprint:
                raise ValueError("mismatch")
            if "response" in entry:
                return entry["response"]
            raise _Pending(entry["key"])
        self.ledger.append({"key": f"elicit-{self.cursor}", "fingerprint": fingerprint})
        raise _Pending(f"elicit-{self.cursor}")


def exception_handler(ctx: _ExceptionContext, plan: str) -> str:
    answer = ctx.elicit("Your email?", SCHEMA.to_schema())
    return f"{answer['content']['email']}:{plan}"


def exception_round(ledger: list[dict]) -> str:
    ctx = _ExceptionContext(ledger)
    try:
        return exception_handler(ctx, "pro")
    except _Pending as pending:
        return str(pending)


# -- timing ----------------------------------------------------------------------------


def per_call_us(fn, rounds: int, repeats: int = 7) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(rounds):
            fn()
        samples.append((time.perf_counter() - start) / rounds * 1e6)
    return statistics.median(samples)


def allocated_bytes(fn, rounds: int = 2000) -> tuple[float, float]:
    """Peak traced memory above the start while calling ``fn``, and bytes retained per call."""
    import tracemalloc

    fn()  # warm caches so they are not counted
    tracemalloc.start()
    start = tracemalloc.get_traced_memory()[0]
    peak = 0
    for _ in range(rounds):
        fn()
        peak = max(peak, tracemalloc.get_traced_memory()[1])
    retained = tracemalloc.get_traced_memory()[0] - start
    tracemalloc.stop()
    return peak - start, retained / rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20000)
    args = parser.parse_args()
    rounds = args.rounds

    first = replay(handler, {"plan": "pro"}, Context(client_capabilities=CAPS))
    fresh_ledger, _ = merge_answers(first.ledger, {"elicit-1": ANSWER})
    trusted_ledger = Ledger(fresh_ledger.slots)

    exception_ledger: list[dict] = []
    exception_round(exception_ledger)
    exception_ledger[0]["response"] = ANSWER

    codec = RequestStateCodec([b"k" * 32])
    engine = Engine(codec)
    token = codec.mint(method="tools/call", target="t", arguments={"plan": "pro"}, principal=None, ledger=first.ledger.slots)
    wire_params = {"name": "t", "arguments": {"plan": "pro"}, "requestState": token, "inputResponses": {"elicit-1": ANSWER}}
    fresh_params = {"name": "t", "arguments": {"plan": "pro"}}

    def wire_round():
        ctx = Context({"plan": "pro"}, client_capabilities=CAPS)
        ledger, unmatched = engine.restore("tools/call", wire_params, None)
        return replay(handler, {"plan": "pro"}, ctx, ledger, unmatched)

    def wire_pause():
        ctx = Context({"plan": "pro"}, client_capabilities=CAPS)
        ledger, unmatched = engine.restore("tools/call", fresh_params, None)
        outcome = replay(handler, {"plan": "pro"}, ctx, ledger, unmatched)
        return engine.seal("tools/call", fresh_params, None, outcome)

    assert wire_round().result == "ada@example.com:pro"
    assert exception_round(exception_ledger) == "ada@example.com:pro"

    results = {
        "direct": per_call_us(lambda: direct("pro", ANSWER), rounds),
        "exception": per_call_us(lambda: exception_round(exception_ledger), rounds),
        "mrtr replay": per_call_us(
            lambda: replay(handler, {"plan": "pro"}, Context(client_capabilities=CAPS), trusted_ledger), rounds),
        "mrtr fresh": per_call_us(
            lambda: replay(handler, {"plan": "pro"}, Context(client_capabilities=CAPS), fresh_ledger), rounds),
        "mrtr wire round": per_call_us(wire_round, rounds // 4),
        "mrtr wire pause": per_call_us(wire_pause, rounds // 4),
    }
    width = max(map(len, results))
    for name, value in results.items():
        print(f"{name:<{width}}  {value:8.2f} us/round")
    peak, retained = allocated_bytes(wire_round)
    print(f"wire round memory: peak {peak / 1024:.1f} KiB above the start, {retained:.1f} B retained per round")
    overhead = results["mrtr replay"] - results["direct"]
    print(f"runtime overhead per round, one answered slot: {overhead:.2f} us (goal <= 25 us)")
    print(f"mrtr replay / exception-based replay: {results['mrtr replay'] / results['exception']:.2f}x (goal <= 1.00x)")
    print(f"wire round / exception-based replay: {results['mrtr wire round'] / results['exception']:.2f}x")


if __name__ == "__main__":
    main()
