"""Part 1: the cost of one round in process, no HTTP, against k answered slots.

The measured round is the one that carries the k-th answer: the token holds k - 1
answered slots and one pending, the retry answers it, the handler is replayed past k
answered slots to its next question, and a new token holding k answers is sealed. So
every candidate does: unseal, validate the fresh answer, replay (or resume), seal.

Candidates, timed in turns (A B C D, D C B A, ...), the median of the batches:

- ``(a) mrtr``: the token carrier (``TokenCarrier.execute``: restore,
  :func:`mrtr.core.replay.replay`, seal), which is what the server calls.
- ``(a) mrtr, full dispatch``: the same round through ``Server.handle`` (JSON-RPC
  message in, response message out: envelope, argument decoding, result shaping), the
  level the SDK's in-process entry works at.
- ``(b) seed-shaped``: the replayer this project started from, re-implemented for the
  benchmark from its described behaviour (:mod:`benchmarks.seed_replayer`, whose docstring
  lists what it does per round): the token's age, the principal, the method and the
  target checked, each answer merged with the seed's refusals, the handler re-run with a
  SHA-256 fingerprint of each question's message and schema compared with its slot's, the
  capability checked at every question, an exception to pause, a new token sealed; the
  same codec as mrtr (AES-256-GCM, MessagePack by msgspec). The goal's ``(b)``.
- ``(b0) minimal``: the stand-in earlier records used, labelled as such: ``ctx.elicit()``
  fingerprints the question with sorted JSON, looks the ordinal up in the ledger and
  raises to pause; the ledger is sealed with the same codec and the fresh answer is
  validated with the same compiled form, but it checks neither the token's age, nor the
  principal, nor the capability. Kept to explain the earlier figures.
- ``(c) park-and-relay``: the lower bound. The suspended generator is kept in memory
  under a conversation id and resumed with the validated answer; no token, no replay.
  ``(a) / (c)`` is what statelessness costs.
- ``(d) SDK Resolve``: the official SDK ``mcp==2.3.0`` in its own virtualenv, through its
  single-request entry (``serve_one``): a tool whose last ``Resolve`` dependency needs k
  answered ones; its second round unseals, validates k answers, re-runs the resolvers,
  asks the last question and seals k outcomes. Compare it with the full dispatch row.

At k = 1 two more rows give the runtime's own overhead: ``direct`` (the handler's work
with the answer handed to it) and ``mrtr replay only`` (the replay core with the answer
trusted from the token, no codec).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from typing import Any

import msgspec

from mrtr import Context, Elicit, ElicitResult, Form, Server
from mrtr.carriers.sealed import TokenCarrier
from mrtr.core.ledger import Ledger, merge_answers
from mrtr.core.replay import replay
from mrtr.core.codec import RequestStateCodec, arguments_digest

from .common import ROOT, clean_env, drive, interleave, log, sdk_missing, sdk_python, sized
from .seed_replayer import SeedContext, SeedReplayer

SCHEMA = Form().string("email", format="email")
COMPILED = Elicit("x", SCHEMA).requested
_SCHEMA_DICT = SCHEMA.to_schema()
CAPS = {"elicitation": {}}
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": CAPS}
KS_FULL = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 20, 50, 100)
KS_QUICK = (1, 10, 50)

A, A_FULL = "(a) mrtr", "(a) mrtr, full dispatch"
SEED = "(b) seed-shaped"
"""The goal's (b): :mod:`benchmarks.seed_replayer`."""
MINIMAL = "(b0) minimal stand-in"
"""The minimal exception-based replayer of the earlier records."""
PARK, SDK = "(c) park-and-relay", "(d) SDK mcp 2.3.0 Resolve"


def answer(i: int) -> dict[str, Any]:
    """The i-th answer of a conversation (distinct per question, so a mix-up shows)."""
    return {"action": "accept", "content": {"email": f"user{i}@example.com"}}


def questions(n: int):
    """The handler of part 1: n questions in sequence, then the list of answers."""
    emails = []
    for i in range(n):
        reply = yield Elicit(f"Question {i}?", SCHEMA)
        emails.append(reply.content["email"])
    return emails


# -- (b) the seed's replayer (benchmarks.seed_replayer), and its handler -----------------------


def seed_questions(ctx: SeedContext, n: int) -> list[str]:
    """The handler of part 1 as the seed's handlers are written: n questions through ``ctx.elicit``."""
    emails = []
    for i in range(n):
        reply = ctx.elicit(f"Question {i}?", _SCHEMA_DICT)
        emails.append(reply.content["email"])  # type: ignore[index]
    return emails


def seed_rounds(k: int, codec: RequestStateCodec) -> SeedRound:
    """The seed-shaped round that carries the k-th answer (one call), after playing rounds 1..k."""
    replayer = SeedReplayer(codec, seed_questions)
    arguments = {"n": k + 1}
    params: dict[str, Any] = {"name": "questions", "arguments": arguments, "_meta": META}
    for i in range(k):
        reply = replayer.round("tools/call", params, None, CAPS)
        params = {"name": "questions", "arguments": arguments, "_meta": META, "requestState": reply["requestState"],
                  "inputResponses": {f"elicit-{i + 1}": answer(i)}}
    reply = replayer.round("tools/call", params, None, CAPS)
    assert reply["resultType"] == "input_required" and f"elicit-{k + 1}" in reply["inputRequests"], reply
    return SeedRound(replayer, params)


class SeedRound:
    """One call is the seed-shaped round; ``replayer`` and ``params`` are what it runs (for the profile)."""

    __slots__ = ("replayer", "params")

    def __init__(self, replayer: SeedReplayer, params: dict[str, Any]) -> None:
        self.replayer = replayer
        self.params = params

    def __call__(self) -> dict[str, Any]:
        return self.replayer.round("tools/call", self.params, None, CAPS)


# -- (b0) a minimal exception-based replayer, the stand-in of the earlier records --------------
# Written for this benchmark: the design's shape without the seed's checks (see the module's docs).


class _Pending(Exception):
    pass


class _ExceptionContext:
    def __init__(self, ledger: list[dict[str, Any]]) -> None:
        self.ledger = ledger
        self.cursor = 0

    def elicit(self, message: str, schema: dict[str, Any]) -> dict[str, Any]:
        params = {"mode": "form", "message": message, "requestedSchema": schema}
        fingerprint = "sha256:" + hashlib.sha256(
            json.dumps(params, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
        self.cursor += 1
        if self.cursor <= len(self.ledger):
            entry = self.ledger[self.cursor - 1]
            if entry["fingerprint"] != fingerprint:
                raise ValueError("mismatch")
            if "response" in entry:
                return entry["response"]
            raise _Pending(params)
        self.ledger.append({"key": f"elicit-{self.cursor}", "fingerprint": fingerprint})
        raise _Pending(params)



def exception_handler(ctx: _ExceptionContext, n: int) -> list[str]:
    emails = []
    for i in range(n):
        reply = ctx.elicit(f"Question {i}?", _SCHEMA_DICT)
        emails.append(reply["content"]["email"])
    return emails


class ExceptionServer:
    """The seed-shaped round: unseal, check the binding, merge, validate, re-run, seal."""

    def __init__(self, codec: RequestStateCodec) -> None:
        self.codec = codec

    def round(self, params: dict[str, Any]) -> dict[str, Any]:
        arguments = params["arguments"]
        token = params.get("requestState")
        if token is None:
            ledger: list[dict[str, Any]] = []
        else:
            method, target, digest, ledger = msgspec.msgpack.decode(self.codec.unseal(token))
            if (method, target, digest) != ("tools/call", params["name"], arguments_digest(arguments)):
                raise ValueError("token bound to another request")
        for key, raw in (params.get("inputResponses") or {}).items():
            for entry in ledger:
                if entry["key"] == key and "response" not in entry:
                    COMPILED.validate(raw.get("content"))
                    entry["response"] = raw
                    break
            else:
                raise ValueError(f"unknown key {key}")
        ctx = _ExceptionContext(ledger)
        try:
            return {"resultType": "complete", "result": exception_handler(ctx, **arguments)}
        except _Pending as pending:
            key = ledger[ctx.cursor - 1]["key"]
            state = msgspec.msgpack.encode(["tools/call", params["name"], arguments_digest(arguments), ledger])
            return {"resultType": "input_required",
                    "inputRequests": {key: {"method": "elicitation/create", "params": pending.args[0]}},
                    "requestState": self.codec.seal(state)}


# -- (c) park-and-relay: the suspended generator kept in memory ----------------------------


class ParkServer:
    """Conversations parked as live generators under an id; a round resumes one."""

    def __init__(self) -> None:
        self.parked: dict[str, Any] = {}

    def start(self, conversation: str, n: int) -> dict[str, Any]:
        gen = questions(n)
        request = next(gen)
        self.parked[conversation] = gen
        return {"resultType": "input_required", "inputRequests": {"elicit": request.to_wire()}}

    def round(self, conversation: str, raw: dict[str, Any]) -> dict[str, Any]:
        gen = self.parked.pop(conversation)
        content = COMPILED.validate(raw.get("content"))
        try:
            request = gen.send(ElicitResult("accept", content, COMPILED.convert(content)))
        except StopIteration as done:
            return {"resultType": "complete", "result": done.value}
        self.parked[conversation] = gen
        return {"resultType": "input_required", "inputRequests": {"elicit": request.to_wire()}}


# -- (d) the official SDK, timed in its own process ----------------------------------------


class SdkRounds:
    """The SDK's in-process round for one k, driven in ``sdk_peer.py inproc``."""

    def __init__(self, process: subprocess.Popen[str], k: int) -> None:
        self.process = process
        self.k = k
        self.token_chars = self._ask({"cmd": "prepare", "k": k})["token_chars"]

    def _ask(self, command: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("the SDK process exited")
        return json.loads(line)

    def calibrate(self, target_s: float) -> int:
        """How many rounds make a batch of about ``target_s`` seconds of the SDK process's CPU."""
        return sized(self.batch, target_s, most=1 << 20)

    def batch(self, n: int) -> float:
        """Seconds of the SDK process's CPU per round over ``n`` rounds."""
        return self._ask({"cmd": "run", "k": self.k, "n": n})["seconds"]


def start_sdk(install: bool) -> tuple[subprocess.Popen[str] | None, str | None]:
    """The SDK's in-process round server, or ``None`` and why not."""
    python = sdk_python(install=install)
    if python is None:
        return None, sdk_missing(install)
    process = subprocess.Popen([str(python), str(ROOT / "benchmarks" / "sdk_peer.py"), "inproc"], text=True,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=clean_env(), cwd=ROOT)
    assert process.stdout is not None
    if json.loads(process.stdout.readline() or "{}").get("ready") is not True:
        process.kill()
        process.wait()
        return None, "the SDK's in-process round did not start"
    return process, None


# -- the mrtr candidates ---------------------------------------------------------------------


class MrtrRounds:
    """Tokens and messages for the round with k answered slots, built by playing rounds 1..k."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.codec = RequestStateCodec([b"k" * 32])
        self.carrier = TokenCarrier(self.codec)
        self.server = Server("bench", codec=self.codec)
        self.server.tool(name="questions")(questions)
        self.arguments = {"n": k + 1}
        params: dict[str, Any] = {"name": "questions", "arguments": self.arguments}
        for i in range(k):
            outcome = self.wire_round(params)
            token = outcome.result["requestState"]
            params = {"name": "questions", "arguments": self.arguments, "requestState": token,
                      "inputResponses": {f"elicit-{i + 1}": answer(i)}}
        self.params = params
        self.message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {**params, "_meta": META}}
        check = self.wire_round(params)
        self.token_chars = len(check.result["requestState"])
        sealed = self.codec.decode(check.result["requestState"]).ledger
        assert len(sealed) == k + 1 and all(slot.answered for slot in sealed[:k]), sealed
        result = drive(self.server.handle(self.message))["result"]
        assert result["resultType"] == "input_required" and f"elicit-{k + 1}" in result["inputRequests"], result

    def wire_round(self, params: dict[str, Any]) -> Any:
        # The token carrier's own entry point (unseal, check, merge, replay, seal), as the
        # server calls it, with the context built as the server builds it; a sync handler
        # never suspends, so no event loop is needed.
        ctx = Context.of_request(self.arguments, None, CAPS, None, "tools/call", "questions", 1, None, None, None,
                                 None, None)
        return drive(self.carrier.execute("tools/call", params, questions, self.arguments, ctx))

    def full_round(self) -> Any:
        return drive(self.server.handle(self.message))


def exception_rounds(k: int, codec: RequestStateCodec) -> Any:
    server = ExceptionServer(codec)
    arguments = {"n": k + 1}
    params: dict[str, Any] = {"name": "questions", "arguments": arguments}
    for i in range(k):
        reply = server.round(params)
        params = {"name": "questions", "arguments": arguments, "requestState": reply["requestState"],
                  "inputResponses": {f"elicit-{i + 1}": answer(i)}}
    reply = server.round(params)
    assert reply["resultType"] == "input_required" and f"elicit-{k + 1}" in reply["inputRequests"], reply
    return lambda: server.round(params)


def park_round(k: int) -> Any:
    # Parked far from its end, so each timed round resumes and parks again at once:
    # the cost of a resume does not depend on how many answers came before.
    server = ParkServer()
    server.start("c", 1 << 30)
    raw = answer(k)
    assert server.round("c", raw)["resultType"] == "input_required"
    return lambda: server.round("c", raw)


def baseline_k1() -> dict[str, Any]:
    """At k = 1: the handler's own work and the replay core alone (the runtime's overhead)."""
    first = replay(questions, {"n": 1}, Context(client_capabilities=CAPS))
    fresh, _ = merge_answers(first.ledger, {"elicit-1": answer(0)})
    trusted = Ledger(fresh.slots)
    content = answer(0)["content"]

    def direct() -> list[str]:
        return [content["email"]]

    def replay_only() -> Any:
        return replay(questions, {"n": 1}, Context(client_capabilities=CAPS), trusted)

    assert replay_only().result == direct()
    return {"direct": direct, "mrtr replay only": replay_only}


def allocated(fn: Any, rounds: int) -> tuple[float, float]:
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


def run(*, quick: bool, install_sdk: bool) -> dict[str, Any]:
    """Part 1's results: per k, seconds per round of each candidate and their ratios."""
    ks = KS_QUICK if quick else KS_FULL
    pairs, batch_s = (3, 0.04) if quick else (7, 0.2)
    sdk, sdk_skipped = start_sdk(install_sdk)
    if sdk_skipped:
        log(f"part 1: SKIPPED (d) the official SDK: {sdk_skipped}")
    rows = []
    try:
        for k in ks:
            mrtr = MrtrRounds(k)
            candidates: dict[str, Any] = {
                A: lambda m=mrtr: m.wire_round(m.params),
                A_FULL: mrtr.full_round,
                SEED: seed_rounds(k, mrtr.codec),
                MINIMAL: exception_rounds(k, mrtr.codec),
                PARK: park_round(k),
            }
            sdk_tokens = None
            if sdk is not None:
                rounds = SdkRounds(sdk, k)
                sdk_tokens = rounds.token_chars
                candidates[SDK] = rounds
            if k == 1:
                candidates.update(baseline_k1())
            log(f"part 1: k={k}")
            timings = interleave(candidates, pairs=pairs, batch_s=batch_s)
            rows.append({"k": k, "timings": timings, "token_chars": {"mrtr": mrtr.token_chars, "sdk": sdk_tokens}})
    finally:
        if sdk is not None:
            assert sdk.stdin is not None
            sdk.stdin.close()
            sdk.wait(timeout=30)
    mrtr = MrtrRounds(1)
    memory_rounds = 200 if quick else 2000
    peak, retained = allocated(lambda: mrtr.wire_round(mrtr.params), memory_rounds)
    return {"ks": list(ks), "pairs": pairs, "rows": rows, "skipped": {"sdk": sdk_skipped} if sdk_skipped else {},
            "memory": {"k": 1, "rounds": memory_rounds, "peak_kib": peak / 1024, "retained_bytes_per_round": retained}}


def main() -> None:
    """``python -m benchmarks.replay_overhead [--quick]``: part 1 alone, printed."""
    quick = "--quick" in sys.argv
    result = run(quick=quick, install_sdk=True)
    for row in result["rows"]:
        park = row["timings"][PARK]["median"]
        for name, timing in row["timings"].items():
            print(f"k={row['k']:<3} {name:<50} {timing['median'] * 1e6:9.1f} us  {timing['median'] / park:6.2f}x (c)"
                  f"  spread {timing['spread']:.2f}")


if __name__ == "__main__":
    main()
