"""Rounds that run once, on every store: claims, outcomes, waiting retries, dead claimants, expiry.

Each test drives :class:`FinalRounds` (or the store under it) on a real store of each
kind: memory, a SQLite file, a redis-server. The round's side effect is a counter the
test reads; ``run`` is what the server would pass (the shaped result, or the error the
round ended with).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
import trio

from mrtr.carriers.contract import RoundKey
from mrtr.carriers.tasks import FinalRounds, OtherAnswers, RoundInterrupted, RoundRecord, TaskStore, open_store
from mrtr.core.errors import InternalError, InvalidParams, ProtocolError

from ..conftest import FakeClock, until
from .redis_server import redis_cli

def result(text: str) -> dict[str, Any]:
    return {"resultType": "complete", "content": [{"type": "text", "text": text}]}


class Reads:
    """A store that counts the looks at round records (claims and reads): how a test knows retries wait."""

    def __init__(self, store: TaskStore) -> None:
        self.store = store
        self.reads = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def claim_round(self, record: RoundRecord) -> RoundRecord | None:
        found = await self.store.claim_round(record)
        self.reads += 1
        return found

    async def get_round(self, key: str) -> RoundRecord | None:
        found = await self.store.get_round(key)
        self.reads += 1
        return found


@pytest.fixture
async def rounds(store: TaskStore) -> AsyncIterator[FinalRounds]:
    recorder = FinalRounds(Reads(store), lease=30)  # type: ignore[arg-type]
    async with trio.open_nursery() as nursery:
        await nursery.start(recorder.serve)
        yield recorder
        nursery.cancel_scope.cancel()


def reads(recorder: FinalRounds) -> int:
    return recorder.store.reads  # type: ignore[attr-defined, no-any-return]


def real_key(answers: str = "a") -> RoundKey:
    """A key that lives five minutes from now by the real clock (Redis expires by its own)."""
    import time

    return RoundKey(f"k-{id(object())}-{time.monotonic_ns()}", answers, time.time() + 300)


async def test_a_claim_is_stored_once_and_only_its_attempt_settles_or_releases_it(store: TaskStore):
    import time

    mine = RoundRecord(key=f"r-{time.monotonic_ns()}", answers="a", claim="c1", lease_expiry=time.time() + 30,
                       expires_at=time.time() + 300)
    theirs = msgspec.structs.replace(mine, claim="c2")
    assert await store.claim_round(mine) is None
    assert await store.claim_round(theirs) == mine  # the live claim, not stored over
    assert not await store.settle_round(msgspec.structs.replace(theirs, result=result("no")))
    await store.release_round(mine.key, "c2")  # not that attempt's: stays
    assert await store.get_round(mine.key) == mine
    renewed = msgspec.structs.replace(mine, lease_expiry=mine.lease_expiry + 10)
    assert await store.settle_round(renewed)
    settled = msgspec.structs.replace(mine, result=result("yes"))
    assert await store.settle_round(settled)
    assert await store.get_round(mine.key) == settled
    assert not await store.settle_round(msgspec.structs.replace(mine, result=result("again")))  # settled stays
    await store.release_round(mine.key, "c1")  # a settled round is no claim: stays
    assert await store.claim_round(theirs) == settled
    other = msgspec.structs.replace(mine, key=mine.key + "-2")
    assert await store.claim_round(other) is None
    await store.release_round(other.key, "c1")
    assert await store.get_round(other.key) is None
    assert await store.claim_round(msgspec.structs.replace(other, claim="c3")) is None  # released: claimable again


async def test_twenty_concurrent_attempts_run_the_round_once_and_get_one_result(rounds: FinalRounds):
    runs: list[int] = []
    released = trio.Event()

    async def run() -> dict[str, Any]:
        runs.append(1)
        await released.wait()
        return result("charged once")

    k = real_key()
    results: list[dict[str, Any]] = []

    async def retry() -> None:
        results.append(await rounds.once(k, run))

    async with trio.open_nursery() as nursery:
        for _ in range(20):
            nursery.start_soon(retry)
        await until(lambda: runs and reads(rounds) >= 20)  # every other retry found the claim
        released.set()
    assert runs == [1]
    assert results == [result("charged once")] * 20
    assert await rounds.once(k, run) == result("charged once") and runs == [1]


async def test_a_retry_with_other_answers_is_refused(rounds: FinalRounds):
    k = real_key("first answers")
    assert await rounds.once(k, lambda: _value(result("done"))) == result("done")
    with pytest.raises(OtherAnswers) as refused:
        await rounds.once(k._replace(answers="other answers"), lambda: _value(result("twice")))
    assert refused.value.code == -32602 and refused.value.status_hint == 400
    assert "other inputResponses" in refused.value.message


async def test_an_error_the_round_ended_with_is_recorded_and_raised_again(rounds: FinalRounds):
    k = real_key()
    runs: list[int] = []

    async def run() -> ProtocolError:
        runs.append(1)
        return InternalError("Internal error: the prompt failed", data={"why": "kaput"})

    for _ in range(2):
        with pytest.raises(ProtocolError) as raised:
            await rounds.once(k, run)
        assert raised.value.to_error_object() == {"code": -32603, "message": "Internal error: the prompt failed",
                                                  "data": {"why": "kaput"}}
    assert runs == [1]


async def test_a_round_that_asks_again_or_fails_before_its_end_records_nothing(rounds: FinalRounds):
    k = real_key()
    runs: list[str] = []

    async def asks() -> dict[str, Any]:
        runs.append("asked")
        return {"resultType": "input_required", "inputRequests": {}, "requestState": "next"}

    async def refuses() -> dict[str, Any]:
        runs.append("refused")
        raise InvalidParams('inputResponses key "elicit-1": malformed')

    assert (await rounds.once(k, asks))["resultType"] == "input_required"
    assert await rounds.store.get_round(k.token) is None
    with pytest.raises(InvalidParams):
        await rounds.once(k, refuses)
    assert await rounds.store.get_round(k.token) is None
    assert await rounds.once(k, lambda: _value(result("now"))) == result("now")
    assert runs == ["asked", "refused"]


async def test_a_caller_that_goes_away_leaves_the_round_running_for_its_retry(rounds: FinalRounds):
    k = real_key()
    runs: list[int] = []
    released = trio.Event()

    async def run() -> dict[str, Any]:
        runs.append(1)
        await released.wait()
        return result("finished without its caller")

    with trio.move_on_after(0.2) as gone:  # a client that timed out: its request is cancelled
        await rounds.once(k, run)
    assert gone.cancelled_caught and runs == [1]
    async with trio.open_nursery() as nursery:
        got: list[dict[str, Any]] = []

        async def retry() -> None:
            got.append(await rounds.once(k, run))

        before = reads(rounds)
        nursery.start_soon(retry)
        await until(lambda: reads(rounds) > before)  # it found the claim and waits
        released.set()
    assert got == [result("finished without its caller")] and runs == [1]


async def test_a_claim_whose_claimant_died_is_interrupted_never_run_again(store: TaskStore):
    import time

    k = real_key()
    dead = RoundRecord(key=k.token, answers=k.answers, claim="dead", lease_expiry=time.time() - 1,
                       expires_at=k.expires_at)
    assert await store.claim_round(dead) is None  # what a killed node leaves behind
    recorder = FinalRounds(store, lease=30)
    runs: list[int] = []

    async def run() -> dict[str, Any]:
        runs.append(1)
        return result("twice")

    async with trio.open_nursery() as nursery:
        await nursery.start(recorder.serve)
        with pytest.raises(RoundInterrupted) as interrupted:
            await recorder.once(k, run)
        nursery.cancel_scope.cancel()
    assert runs == []
    assert interrupted.value.code == -32603 and "is not run again" in interrupted.value.message


async def test_a_waiting_retry_sees_the_claimant_die(store: TaskStore):
    import time

    clock = FakeClock(time.time())
    k = real_key()
    alive = RoundRecord(key=k.token, answers=k.answers, claim="other node", lease_expiry=clock() + 30,
                        expires_at=k.expires_at)
    assert await store.claim_round(alive) is None
    counted = Reads(store)
    recorder = FinalRounds(counted, lease=30, clock=clock)  # type: ignore[arg-type]
    async with trio.open_nursery() as nursery:
        await nursery.start(recorder.serve)
        outcome: list[BaseException] = []

        async def retry() -> None:
            try:
                await recorder.once(k, lambda: _value(result("no")))
            except RoundInterrupted as error:
                outcome.append(error)

        nursery.start_soon(retry)
        await until(lambda: counted.reads >= 3)
        assert not outcome  # still waiting: the claim's lease is alive
        clock.advance(31)  # the other node stopped renewing
        await until(lambda: outcome)
        nursery.cancel_scope.cancel()


async def test_a_long_round_renews_its_claim(store: TaskStore):
    import time

    recorder = FinalRounds(store, lease=0.3)
    k = real_key()
    seen: list[float] = []

    async def run() -> dict[str, Any]:
        with trio.fail_after(10):
            while len(seen) < 3:
                record = await store.get_round(k.token)
                assert record is not None and not record.settled
                if not seen or record.lease_expiry > seen[-1]:
                    seen.append(record.lease_expiry)
                await trio.sleep(0.02)
        return result("long")

    async with trio.open_nursery() as nursery:
        await nursery.start(recorder.serve)
        assert await recorder.once(k, run) == result("long")
        nursery.cancel_scope.cancel()
    assert seen == sorted(seen) and len(seen) == 3
    assert all(expiry > time.time() - 1 for expiry in seen)


async def test_a_result_too_large_to_record_is_given_once_and_its_retries_are_told(tmp_path):
    async with open_store("memory:", max_record_bytes=2000) as store:
        recorder = FinalRounds(store)
        k = real_key()
        big = result("x" * 5000)
        runs: list[int] = []

        async def run() -> dict[str, Any]:
            runs.append(1)
            return big

        async with trio.open_nursery() as nursery:
            await nursery.start(recorder.serve)
            assert await recorder.once(k, run) == big
            with pytest.raises(ProtocolError) as told:
                await recorder.once(k, run)
            nursery.cancel_scope.cancel()
    assert runs == [1]
    assert told.value.code == -32603 and "too large to record" in told.value.message
    assert told.value.data["limit"] == 2000


async def test_a_record_expires_with_its_token(clocked_store: TaskStore, clock: FakeClock):
    recorder = FinalRounds(clocked_store, clock=clock)
    k = RoundKey(f"expiring-{id(object())}", "a", clock() + 300)
    async with trio.open_nursery() as nursery:
        await nursery.start(recorder.serve)
        assert await recorder.once(k, lambda: _value(result("first"))) == result("first")
        clock.advance(299)
        assert (await clocked_store.get_round(k.token)) is not None
        clock.advance(2)
        assert await clocked_store.get_round(k.token) is None
        nursery.cancel_scope.cancel()


@pytest.mark.slow
async def test_redis_expires_a_record_when_its_token_expires(redis_url: str):
    import time

    async with open_store(redis_url) as store:
        recorder = FinalRounds(store)
        expires = time.time() + 120
        k = RoundKey(f"redis-{time.monotonic_ns()}", "a", expires)
        async with trio.open_nursery() as nursery:
            await nursery.start(recorder.serve)
            await recorder.once(k, lambda: _value(result("kept")))
            nursery.cancel_scope.cancel()
    ttl_ms = int(redis_cli(redis_url, "PTTL", f"mrtr:round:{k.token}"))
    assert 115_000 < ttl_ms <= 120_000
    assert redis_cli(redis_url, "PEXPIRETIME", f"mrtr:round:{k.token}") == str(int(expires * 1000))


async def _value(value: Any) -> Any:
    return value


async def test_a_round_is_kept_as_long_as_its_token_opens_and_no_longer(clocked_store: TaskStore, clock: FakeClock):
    from mrtr.carriers.sealed import TokenCarrier
    from mrtr.core.codec import RequestStateCodec
    from mrtr.core.errors import ExpiredRequestState

    codec = RequestStateCodec([b"r" * 32], ttl=60, clock=clock)
    carrier = TokenCarrier(codec)
    token = codec.mint(method="tools/call", target="charge", arguments={}, principal=None, ledger=())
    params = {"name": "charge", "arguments": {}, "requestState": token, "inputResponses": {}}
    key = carrier.round_key("tools/call", params, None)
    assert key is not None and key.expires_at == pytest.approx(clock() + 60, abs=0.001)
    assert token not in key.token and len(key.token) == 32  # a digest, never the token
    recorder = FinalRounds(clocked_store, clock=clock)
    async with trio.open_nursery() as nursery:
        await nursery.start(recorder.serve)
        assert await recorder.once(key, lambda: _value(result("once"))) == result("once")
        clock.advance(60)  # the token's last accepted moment: the record is still there
        assert carrier.round_key("tools/call", params, None) == key
        assert await recorder.once(key, lambda: _value(result("twice"))) == result("once")
        clock.advance(0.002)
        with pytest.raises(ExpiredRequestState):
            carrier.round_key("tools/call", params, None)
        assert await clocked_store.get_round(key.token) is None
        nursery.cancel_scope.cancel()
