"""Part 1's profile: where the instructions of one round go, counted by callgrind.

Usage: ``python -m benchmarks.replay_profile [--ks 1,2,...,10] [--rounds N] [--json PATH]``
(needs ``valgrind``; about 20 s per k, two k at a time); ``--calls`` counts instead the Python
function calls of a round of ``(a)``, ``(b)`` and ``(b0)`` with ``cProfile`` (no valgrind).

The round is part 1's: the one that carries the k-th answer (:mod:`benchmarks.replay_overhead`).
Timing its pieces would measure the machine's load as much as the pieces; the number of
instructions a piece executes does not move with the load, so a before/after of a change
is read here, and the suite's interleaved CPU times stay the measure of speed (an
instruction of the interpreter's dispatch loop and one of OpenSSL's AES do not cost the
same time).

Each k runs in its own process under ``valgrind --tool=callgrind``, which writes a dump
every time the process enters ``os.getppid`` (the marker between pieces): a piece is
called ``N`` times between two markers, and its figure is that dump's instruction count
divided by ``N``, less the count of a call of an empty function (the loop's own cost).
The pieces are the token carrier's round taken apart, each called with the inputs that
round gives it and as many times as the round calls it:

- ``open``: :meth:`~mrtr.core.codec.RequestStateCodec.decode` (Base64URL check, AES-GCM,
  MessagePack, the version and TTL checks), and within it ``TTL``, the expiry check;
- ``binding``: checks 1-6 of :mod:`mrtr.carriers.sealed` less ``open``: what the request
  binds the token to (the arguments' digest) and the principal, method, target and
  arguments compared with the token's;
- ``merge``: check 7, the retry's answer merged into the ledger;
- ``replay core``: :func:`~mrtr.carriers.contract.run_handler` (the replay of k answers
  to the next question), and within it, per yield: ``capabilities`` (the gate),
  ``keys`` (the default key and its uniqueness), ``yield positions`` (what a duplicate
  key's diagnostic names), ``fingerprints``, and ``answers`` (each recorded answer turned
  into what the handler receives; the fresh one checked against its form); ``handler``
  is the handler's own code fed the same answers with no runtime at all;
- ``seal``: the ``InputRequiredResult`` with a new token (the handler's version, the
  ledger in MessagePack, AES-GCM, Base64URL);
- the rest of the round (the carrier's coroutines, the context) is the round less the
  pieces.

The seed-shaped replayer's round (``(b)``, :mod:`benchmarks.seed_replayer`) and the minimal
stand-in's (``(b0)``, :class:`benchmarks.replay_overhead.ExceptionServer`) are counted in the
same process, so the table gives ``(a) / (b)`` in instructions per k.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from .common import ROOT, log

def _pieces(k: int) -> dict[str, tuple[Any, int]]:
    """Each piece as (one call, calls per round) for the round that carries the k-th answer."""
    from mrtr import Context, ElicitResult
    from mrtr.carriers.contract import run_handler
    from mrtr.carriers.sealed import TokenBinding
    from mrtr.core.kinds import Kind
    from mrtr.core.ledger import default_key
    from mrtr.core import replay as core
    from mrtr.core.diagnostics import here
    from mrtr.core.interpretation import delivered
    from mrtr.core.versions import handler_version
    import msgspec

    from .replay_overhead import CAPS, MrtrRounds, answer, drive, exception_rounds, questions, seed_rounds

    rounds = MrtrRounds(k)
    carrier, codec, params = rounds.carrier, rounds.codec, rounds.params
    token = params["requestState"]
    state = codec.decode(token)
    checked = carrier.check("tools/call", params, None)
    ledger, unmatched = carrier._merge(checked.state, params)
    arguments = rounds.arguments

    ctx = Context(arguments, client_capabilities=CAPS)

    def replay_core() -> Any:
        return drive(run_handler(questions, arguments, ctx, ledger, unmatched, run_sync=None))

    outcome = replay_core()
    assert isinstance(outcome, core.InputRequired), outcome
    requests = []
    handler = questions(k + 1)
    request = next(handler)
    requests.append(request)
    for i in range(k):
        request = handler.send(ElicitResult("accept", answer(i)["content"]))
        requests.append(request)
    suspended = handler  # a generator suspended at its (k + 1)-th yield
    capabilities = CAPS
    execution = core.Execution(core.handler_spec(questions), Context(arguments, client_capabilities=CAPS), ledger,
                                unmatched)
    slots = ledger.slots
    contents = [answer(i)["content"] for i in range(k)]

    def ttl() -> bool:
        return state.issued_at + codec._ttl_ms < int(codec._clock() * 1000)

    def binding() -> Any:
        return carrier._checked(TokenBinding("tools/call", params), params, None)

    def capability_gate() -> None:
        for request in requests:
            request.missing_capability(capabilities)

    def keys() -> None:
        execution.keys = {}
        for ordinal in range(1, k + 2):
            execution._claim(default_key(Kind.ELICIT, ordinal), ordinal, None)

    # What a claim records of where the yield is (read as a line only for a diagnostic): diagnostics.here.
    def positions() -> None:
        for _ in requests:
            here(suspended)

    def fingerprints() -> None:
        for request in requests:
            request.fingerprint()

    def answers() -> None:
        for index in range(k):
            delivered(slots[index].kind, slots[index].answer, requests[index], f"elicit-{index + 1}",
                           check=index == k - 1)

    def handler_alone() -> None:
        gen = questions(k + 1)
        next(gen)
        for content in contents:
            gen.send(ElicitResult("accept", content))
        gen.close()

    def seal() -> Any:
        sealed = carrier.seal(checked.binding, None, outcome, handler_version(questions))
        # What the carrier returns is the result in wire shape (code before it sealed a Struct and converted it).
        return sealed if isinstance(sealed, dict) else msgspec.to_builtins(sealed)

    # (b)'s round in the same pieces: open (Base64URL, AES-GCM, MessagePack, TTL), merge, the handler
    # re-run (the capability, the fingerprints, the handler), seal; its binding checks are the rest.
    from . import seed_replayer as seed

    b_round = seed_rounds(k, codec)
    b_replayer, b_params = b_round.replayer, b_round.params
    b_token = b_params["requestState"]
    b_state = b_replayer._open(b_token)
    b_merged = list(b_state.ledger)
    seed._merge(b_merged, b_params["inputResponses"])

    def b_merge() -> None:
        seed._merge(list(b_state.ledger), b_params["inputResponses"])

    def b_rerun() -> Any:
        try:
            b_replayer.handler(seed.SeedContext(list(b_merged), CAPS), **b_params["arguments"])
        except seed._Unwind as pending:
            return pending
        raise AssertionError("(b)'s handler did not pause")

    b_pending = b_rerun()

    def b_seal() -> Any:
        original = {name: value for name, value in b_params.items() if name not in seed._STRIPPED}
        state = seed.SeedState("tools/call", original, b_merged, 0, None)
        return {"resultType": "input_required",
                "inputRequests": {b_pending.key: {"method": "elicitation/create", "params": b_pending.params}},
                "requestState": codec.seal(seed._encoder.encode(state))}

    return {
        "nothing": (lambda: None, 0),
        "(a) round": (lambda: rounds.wire_round(params), 1),
        "(b) round": (b_round, 1),
        "(b) open": (lambda: b_replayer._open(b_token), 1),
        "(b) merge": (b_merge, 1),
        "(b) re-run": (b_rerun, 1),
        "(b) seal": (b_seal, 1),
        "(b0) round": (exception_rounds(k, codec), 1),
        "open": (lambda: codec.decode(token), 1),
        "TTL": (ttl, 1),
        "checks 1-6": (binding, 1),
        "merge": (lambda: carrier._merge(checked.state, params), 1),
        "replay core": (replay_core, 1),
        "capabilities": (capability_gate, 1),
        "keys": (keys, 1),
        "yield positions": (positions, 1),
        "fingerprints": (fingerprints, 1),
        "answers": (answers, 1),
        "handler": (handler_alone, 1),
        "seal": (seal, 1),
    }


def inside(k: int, n: int) -> None:
    """Run in the process callgrind watches: every piece ``n`` times between two markers."""
    pieces = _pieces(k)
    for fn, _ in pieces.values():  # warm: first-use paths and caches are not part of a round
        for _ in range(20):
            fn()
    os.getppid()
    for fn, _ in pieces.values():
        for _ in range(n):
            fn()
        os.getppid()
    print(json.dumps(list(pieces)))


def count(k: int, n: int, workdir: Path) -> dict[str, float]:
    """Instructions per round of each piece at ``k`` (the empty call's subtracted)."""
    out = workdir / f"k{k}.callgrind"
    command = ["valgrind", "--tool=callgrind", "--dump-before=os_getppid", f"--callgrind-out-file={out}",
               "--dump-instr=no", sys.executable, "-m", "benchmarks.replay_profile", "--inside", str(k), str(n)]
    done = subprocess.run(command, cwd=ROOT, env={**os.environ, "PYTHONHASHSEED": "0"}, capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"callgrind at k={k} failed: {done.stderr[-2000:]}")
    names = json.loads(done.stdout.strip().splitlines()[-1])
    # Dump 1 runs from the start to the first marker; dump i + 2 is piece i.
    totals = [_total(workdir / f"{out.name}.{i + 2}") for i in range(len(names))]
    per_call = {name: total / n for name, total in zip(names, totals)}
    empty = per_call.pop("nothing")
    return {name: value - empty for name, value in per_call.items()}


def _total(path: Path) -> int:
    for line in path.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise RuntimeError(f"no totals in {path}")


def table(rows: dict[int, dict[str, float]], ks: list[int]) -> str:
    """The breakdown as markdown: pieces down, k across, thousands of instructions per round."""
    shown = [k for k in ks if k in rows]
    lines = ["| per round (thousands of instructions) | " + " | ".join(f"k = {k}" for k in shown) + " |",
             "|---|" + "---|" * len(shown)]

    def line(label: str, values: list[float]) -> None:
        lines.append(f"| {label} | " + " | ".join(f"{v / 1000:,.1f}" for v in values) + " |")

    for name in ("(a) round", "(b) round", "(b0) round"):
        if all(name in rows[k] for k in shown):
            line(name, [rows[k][name] for k in shown])
    lines.append("| (a) / (b) | " + " | ".join(f"{rows[k]['(a) round'] / rows[k]['(b) round']:.2f}x"
                                             for k in shown) + " |")
    line("open (Base64URL, AES-GCM, MessagePack, TTL)", [rows[k]["open"] for k in shown])
    line("  of which TTL", [rows[k]["TTL"] for k in shown])
    line("binding: principal, method, target, arguments", [rows[k]["checks 1-6"] - rows[k]["open"] for k in shown])
    line("merge (check 7)", [rows[k]["merge"] for k in shown])
    line("replay core", [rows[k]["replay core"] for k in shown])
    parts = ("capabilities", "keys", "yield positions", "fingerprints", "answers", "handler")
    for name in parts:
        line(f"  {name}", [rows[k][name] for k in shown])
    line("  the rest of the replay core (driver, interpretation)",
         [rows[k]["replay core"] - sum(rows[k][name] for name in parts) for k in shown])
    line("seal (version, MessagePack, AES-GCM, Base64URL, result)", [rows[k]["seal"] for k in shown])
    line("the rest of the round (carrier, context)",
         [rows[k]["(a) round"] - rows[k]["checks 1-6"] - rows[k]["merge"] - rows[k]["replay core"] - rows[k]["seal"]
          for k in shown])
    if all("(b) open" in rows[k] for k in shown):
        b_parts = ("(b) open", "(b) merge", "(b) re-run", "(b) seal")
        for name, label in zip(b_parts, ("(b) open (Base64URL, AES-GCM, MessagePack, TTL)", "(b) merge",
                                         "(b) re-run (capability, fingerprints, handler)",
                                         "(b) seal (MessagePack, AES-GCM, Base64URL, result)")):
            line(label, [rows[k][name] for k in shown])
        line("(b) the rest (principal, method, target, the round's frame)",
             [rows[k]["(b) round"] - sum(rows[k][name] for name in b_parts) for k in shown])
    return "\n".join(lines)


def calls(k: int, rounds: int = 1000) -> dict[str, float]:
    """Python function calls per round of (a), (b) and (b0) at ``k``, counted by ``cProfile`` (C calls included)."""
    import cProfile
    import pstats

    pieces = _pieces(k)
    counted = {}
    for name in ("(a) round", "(b) round", "(b0) round"):
        fn = pieces[name][0]
        for _ in range(20):
            fn()
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(rounds):
            fn()
        profile.disable()
        stats = pstats.Stats(profile)
        counted[name] = (stats.total_calls - 1) / rounds  # type: ignore[attr-defined]  # less disable()
    return counted


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.replay_profile", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ks", default="1,2,3,4,5,6,7,8,9,10", help="comma-separated k")
    parser.add_argument("--rounds", type=int, default=200, help="calls of each piece counted per k")
    parser.add_argument("--show", default="1,2,5,10", help="the k the table shows (the ratio line shows all)")
    parser.add_argument("--json", type=Path, help="also write the counts here")
    parser.add_argument("--calls", action="store_true",
                        help="count the function calls of a round of (a), (b) and (b0) instead (no valgrind)")
    parser.add_argument("--inside", nargs=2, type=int, metavar=("K", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.inside:
        inside(*args.inside)
        return 0
    if args.calls:
        for k in [int(k) for k in args.ks.split(",") if k.strip()]:
            print(f"k = {k}: function calls per round: "
                  + ", ".join(f"{name} {count:.0f}" for name, count in calls(k).items()))
        return 0
    if shutil.which("valgrind") is None:
        print("valgrind is needed: apt-get install valgrind", file=sys.stderr)
        return 1
    ks = [int(k) for k in args.ks.split(",") if k.strip()]
    with tempfile.TemporaryDirectory(prefix="mrtr-replay-profile-") as tmp:
        def one(k: int) -> tuple[int, dict[str, float]]:
            log(f"callgrind: part 1's round at k={k}, {args.rounds} calls of each piece")
            return k, count(k, args.rounds, Path(tmp))

        with ThreadPoolExecutor(max_workers=2) as pool:
            rows = dict(pool.map(one, ks))
    print(table(rows, [int(k) for k in args.show.split(",")]))
    print()
    print("(a) / (b) in instructions: " + ", ".join(
        f"k = {k} {rows[k]['(a) round'] / rows[k]['(b) round']:.2f}x" for k in ks))
    if args.json:
        args.json.write_text(json.dumps({str(k): row for k, row in rows.items()}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
