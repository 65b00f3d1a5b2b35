"""Part 1 taken apart by layer: what each layer of the replay costs inside the running round.

Usage: ``python -m benchmarks.replay_layers [--k 1] [--pairs 7] [--batch 0.2]``

The round is part 1's ``(a) mrtr`` at one k (:mod:`benchmarks.replay_overhead`): the token
carrier's round that carries the k-th answer. The carrier replays a sync handler through
:func:`mrtr.core.replay.replay` (from :mod:`mrtr.carriers.contract`); here that one call is
swapped, in turn, for the same work written with fewer layers, from one loop up to the
real function, and the whole round is timed with each, interleaved with part 1's ``(b)``
(seed-shaped) and ``(b0)`` (the minimal stand-in the figures in docs/performance.md were
taken against).

``one loop`` does the work every replay of this handler does, with the same data: the
token's ``Slot``s, the capability gate, each request's default key and its claim with the
yield's position, fingerprints and the comparison with the recorded slot, the fresh
answer validated against its form, the ``InputRequired`` with the new pending slot. It
leaves out what this round never reaches (groups, Steps, explicit keys, the lenient
policy's answers, every error path and diagnostic). Each next variant puts one real layer
back: the execution object, answers through ``delivered``, each request through
``_member`` and ``_answer``, each yield through ``interpret``, the driver's loop
``advance``, then ``drive`` and ``start_handler``; the last is the real ``replay``.

It measures what flattening would buy, not a design: the variants copy rules the replay
core holds once, and they are kept here only so the figures in docs/performance.md
("Why (b) wins the first rounds") can be measured again. tests/test_benchmark_record.py
checks that every variant gives the real replay's outcome, so they cannot drift from it
unnoticed.
"""

from __future__ import annotations

import argparse
from functools import partial
from collections.abc import Callable, Mapping
from typing import Any

from mrtr.carriers import contract
from mrtr.core.context import Context
from mrtr.core.effects import ElicitResult, Request
from mrtr.core.ledger import KEY_PREFIX, Ledger, Slot
from mrtr.core.driving import advance, start_handler
from mrtr.core.interpretation import PENDING, SEND, delivered
from mrtr.core.replay import Execution, InputRequired, drive, handler_spec, replay

from .common import Local, interleave
from .replay_overhead import MrtrRounds, exception_rounds, seed_rounds

Replay = Callable[..., Any]


def one_loop(handler: Any, arguments: Mapping[str, Any] | None, ctx: Context, ledger: Ledger,
             unmatched: Mapping[str, Any] | None = None, *, until_step: bool = False) -> InputRequired:
    """The replay of part 1's handler as one loop, with the data and checks of the real one."""
    slots = list(ledger.slots)
    key, request = _loop(handler_spec(handler), ctx, arguments, slots, set(ledger.fresh), through_delivered=False)
    return InputRequired({key: request}, Ledger(tuple(slots)))


def with_execution(handler: Any, arguments: Mapping[str, Any] | None, ctx: Context, ledger: Ledger,
                   unmatched: Mapping[str, Any] | None = None, *, until_step: bool = False,
                   through_delivered: bool = False) -> InputRequired:
    """``one_loop`` with its state in an ``Execution``, as the real replay keeps it (and, with
    ``through_delivered``, each answer turned into what the handler receives by ``delivered``)."""
    spec = handler_spec(handler)
    execution = Execution(spec, ctx, ledger, unmatched)
    key, request = _loop(spec, ctx, arguments, execution.slots, execution.fresh, through_delivered=through_delivered)
    return InputRequired({key: request}, execution.ledger())


def _loop(spec: Any, ctx: Context, arguments: Mapping[str, Any] | None, slots: list[Slot], fresh: set[int], *,
          through_delivered: bool) -> tuple[str, Request]:
    """Replay into ``slots`` up to the pending request: its key and the request (the generator closed)."""
    gen = spec.invoke(ctx, arguments or {})
    send: Any = None
    cursor = 0
    keys: dict[str, Any] = {}
    capabilities = ctx.client_capabilities
    while True:
        request = gen.send(send)
        assert isinstance(request, Request) and request.key is None, "part 1's handler asks one request at a time"
        if request.missing_capability(capabilities) is not None:
            raise AssertionError("part 1's client has the capability")
        cursor += 1
        key = KEY_PREFIX[request.kind] + str(cursor)
        if key in keys:
            raise AssertionError("default keys are unique")
        frame = gen.gi_frame
        keys[key] = (cursor, (frame, frame.f_lasti))
        fingerprint = request.fingerprint()
        if cursor > len(slots):
            slots.append(Slot(request.kind, fingerprint))
            break
        slot = slots[cursor - 1]
        if slot.kind != request.kind or slot.fingerprint != fingerprint or slot.key is not None:
            raise AssertionError("the recorded slot matches")
        if not slot.answered:
            break
        check = cursor - 1 in fresh
        if through_delivered:
            send = delivered(slot.kind, slot.answer, request, key, check=check)
        else:
            _, content = slot.answer
            if check:
                content = request._compiled.validate(content)  # type: ignore[attr-defined]
            send = ElicitResult("accept", content, content)
        if check:
            fresh.discard(cursor - 1)
    gen.close()
    return key, request


def with_member(handler: Any, arguments: Mapping[str, Any] | None, ctx: Context, ledger: Ledger,
                unmatched: Mapping[str, Any] | None = None, *, until_step: bool = False) -> InputRequired:
    """... and each request through the execution's ``_member`` (its key, claim and ``_answer``)."""
    spec = handler_spec(handler)
    execution = Execution(spec, ctx, ledger, unmatched)
    gen = spec.invoke(ctx, arguments or {})
    send: Any = None
    capabilities = ctx.client_capabilities
    while True:
        request = gen.send(send)
        if request.missing_capability(capabilities) is not None:
            raise AssertionError("part 1's client has the capability")
        key, answer = execution._member(request.key, request, gen)
        if answer is PENDING:
            break
        send = answer
    gen.close()
    return InputRequired({key: request}, execution.ledger())


def with_interpret(handler: Any, arguments: Mapping[str, Any] | None, ctx: Context, ledger: Ledger,
                   unmatched: Mapping[str, Any] | None = None, *, until_step: bool = False) -> InputRequired:
    """... and each yield through ``interpret`` (which gates it and calls ``_member``)."""
    spec = handler_spec(handler)
    execution = Execution(spec, ctx, ledger, unmatched)
    gen = spec.invoke(ctx, arguments or {})
    send: Any = None
    while True:
        operation, payload = execution.interpret(gen.send(send), gen, False)
        if operation != SEND:
            break
        send = payload
    gen.close()
    return InputRequired(payload, execution.ledger())


def with_advance(handler: Any, arguments: Mapping[str, Any] | None, ctx: Context, ledger: Ledger,
                 unmatched: Mapping[str, Any] | None = None, *, until_step: bool = False) -> InputRequired:
    """... and the driver's loop, ``advance`` (the generator's errors, Steps, results)."""
    spec = handler_spec(handler)
    execution = Execution(spec, ctx, ledger, unmatched)
    gen = spec.invoke(ctx, arguments or {})
    _, payload = advance(gen, execution, None, None)
    gen.close()
    return InputRequired(payload, execution.ledger())


def with_drive(handler: Any, arguments: Mapping[str, Any] | None, ctx: Context, ledger: Ledger,
               unmatched: Mapping[str, Any] | None = None, *, until_step: bool = False) -> Any:
    """... and ``start_handler`` and ``drive`` (the handler's start, the close and its checks)."""
    spec = handler_spec(handler)
    execution = Execution(spec, ctx, ledger, unmatched)
    return drive(start_handler(spec, ctx, arguments or {}), execution)


VARIANTS: dict[str, Replay] = {
    "one loop": one_loop,
    "+ the execution object": with_execution,
    "+ answers through delivered": partial(with_execution, through_delivered=True),
    "+ requests through _member and _answer": with_member,
    "+ yields through interpret": with_interpret,
    "+ the driver's loop (advance)": with_advance,
    "+ drive and start_handler": with_drive,
    "the real replay": replay,
}
"""The replay written with more and more of its real layers, in order."""


class Swapped:
    """The token carrier's round, timed with ``replay`` swapped for ``variant`` during its batches."""

    def __init__(self, round_: Callable[[], Any], variant: Replay) -> None:
        self.local = Local(round_)
        self.variant = variant

    def _with(self, run: Callable[[], Any]) -> Any:
        saved = contract.replay
        contract.replay = self.variant
        try:
            return run()
        finally:
            contract.replay = saved

    def calibrate(self, target_s: float) -> int:
        return self._with(lambda: self.local.calibrate(target_s))  # type: ignore[no-any-return]

    def batch(self, n: int) -> float:
        return self._with(lambda: self.local.batch(n))  # type: ignore[no-any-return]

    def once(self) -> Any:
        """One round with the variant (what the test compares with the real round)."""
        return self._with(self.local.fn)


def candidates(k: int) -> dict[str, Any]:
    """Part 1's ``(b)`` and ``(b0)`` and the ``(a)`` round with each variant, for the round that carries the k-th answer."""
    rounds = MrtrRounds(k)
    found: dict[str, Any] = {"(b) seed-shaped": seed_rounds(k, rounds.codec),
                             "(b0) minimal stand-in": exception_rounds(k, rounds.codec)}
    for name, variant in VARIANTS.items():
        found[f"(a), replay as {name}"] = Swapped(lambda: rounds.wire_round(rounds.params), variant)
    return found


def main() -> None:
    """Print each variant's round time and its ratios to ``(b)``'s and ``(b0)``'s, fastest layers first."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.replay_layers", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--k", type=int, default=1)
    parser.add_argument("--pairs", type=int, default=7)
    parser.add_argument("--batch", type=float, default=0.2, help="seconds per batch")
    args = parser.parse_args()
    timings = interleave(candidates(args.k), pairs=args.pairs, batch_s=args.batch)
    base, minimal = timings["(b) seed-shaped"]["median"], timings["(b0) minimal stand-in"]["median"]
    for name, timing in timings.items():
        print(f"k={args.k} {name:<58} {timing['median'] * 1e6:7.1f} us  {timing['median'] / base:5.2f}x (b)"
              f"  {timing['median'] / minimal:5.2f}x (b0)  spread {timing['spread']:.2f}")


if __name__ == "__main__":
    main()
