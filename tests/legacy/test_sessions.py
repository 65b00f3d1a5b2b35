"""The session registry: ids, bounds, idle expiry, principals, waiting handlers; sans-IO, on a fake clock."""

from __future__ import annotations

import gc
import math
import re
import weakref

import pytest

from mrtr.core.errors import InvalidParams
from mrtr.core.peer import TooManySuspended
from mrtr.server.sessions import (
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_SESSIONS,
    MAX_SUBSCRIPTIONS,
    SessionLimit,
    SessionRegistry,
    owner_of,
)

from ..conftest import FakeClock


def opened(registry: SessionRegistry, principal: str | None = None, client: str | None = None, **options):
    return registry.open(version="2025-11-25", client_capabilities={}, client_info=None, principal=principal,
                         client=client, **options)


def test_session_ids_are_unguessable_visible_ascii_and_name_their_owner():
    registry = SessionRegistry(owner="w3")
    ids = [opened(registry).id for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for session_id in ids:
        assert re.fullmatch(r"[\x21-\x7e]+", session_id)
        owner, random = session_id.split(".")
        assert owner == "w3" and owner_of(session_id) == "w3"
        assert len(random) * 6 >= 128  # Base64URL: six bits a character
    assert owner_of("no-owner") is None and owner_of(".x") is None and owner_of("a b.c") is None


@pytest.mark.parametrize("owner", ["", "a.b", "x" * 17, "sp ace", 3])
def test_an_owner_that_would_break_the_id_is_refused(owner):
    with pytest.raises(ValueError, match="owner"):
        SessionRegistry(owner=owner)


@pytest.mark.parametrize("option", ["max_sessions", "max_per_client", "max_suspended", "max_suspended_per_client",
                                    "max_suspended_per_session"])
@pytest.mark.parametrize("value", [0, -1, 1.5, True])
def test_bounds_must_be_positive_integers(option, value):
    with pytest.raises(ValueError, match=option):
        SessionRegistry(**{option: value})


@pytest.mark.parametrize("value", [0, -5, math.nan])
def test_the_idle_timeout_must_be_positive(value):
    with pytest.raises(ValueError, match="idle_timeout"):
        SessionRegistry(idle_timeout=value)


def test_a_session_is_found_only_by_the_principal_that_opened_it():
    registry = SessionRegistry()
    alice = opened(registry, principal="alice")
    anonymous = opened(registry)
    assert registry.get(alice.id, "alice") is alice
    assert registry.get(alice.id, "mallory") is None
    assert registry.get(alice.id, None) is None
    assert registry.get(anonymous.id, None) is anonymous
    assert registry.get(anonymous.id, "alice") is None
    assert registry.get("0.unknown", None) is None and registry.get(7, None) is None


def test_an_idle_session_expires_and_a_busy_one_never_does():
    clock = FakeClock(1000.0)
    registry = SessionRegistry(idle_timeout=60, clock=clock)
    idle, busy, lasting = opened(registry), opened(registry), opened(registry, lasting=True)
    ended: list[str] = []
    idle.on_end(ended.append)
    registry.begin(busy)
    clock.advance(59)
    assert registry.get(idle.id, None) is idle
    registry.touch(idle)
    clock.advance(59)
    assert registry.get(idle.id, None) is idle  # touched a minute ago at most
    clock.advance(61)
    assert registry.get(idle.id, None) is None and ended == ["expired"]
    assert registry.get(busy.id, None) is busy and registry.get(lasting.id, None) is lasting
    registry.finish(busy)
    clock.advance(60)
    opened(registry)  # opening sweeps the expired ones
    assert registry.get(busy.id, None) is None and lasting.ended is None
    assert DEFAULT_IDLE_TIMEOUT == 1800


def test_a_shared_registry_holds_copies_the_store_bounds_and_expires():
    """With sessions in Redis the store decides for every node: a copy is never ended here to make room or for
    idleness on this node's clock (the session may be in use on another), only when told."""
    clock = FakeClock(1000.0)
    registry = SessionRegistry(max_sessions=2, max_per_client=1, idle_timeout=60, clock=clock)
    registry.shared = True
    first, second, third = (opened(registry, client="10.0.0.1") for _ in range(3))
    assert len(registry) == 3 and first.ended is None  # past both bounds: the store said there was room
    clock.advance(600)
    assert registry.get(first.id, None) is first and first.ended is None
    assert registry.end(second.id, "ended to make room for a newer session of the same client")
    assert second.ended == "ended to make room for a newer session of the same client"
    registry.shared = False  # without the store, its own bounds and clock again
    assert registry.get(third.id, None) is None and third.ended == "expired"


def test_at_the_process_bound_the_session_idle_longest_makes_room():
    clock = FakeClock()
    registry = SessionRegistry(max_sessions=3, clock=clock)
    oldest, middle, newest = opened(registry), opened(registry), opened(registry)
    clock.advance(1)
    registry.touch(oldest)  # now the most recent
    reasons: list[str] = []
    middle.on_end(reasons.append)
    fourth = opened(registry)
    assert len(registry) == 3 and middle.ended and reasons == ["ended to make room for a newer session"]
    assert {session.id for session in registry.sessions()} == {oldest.id, newest.id, fourth.id}


def test_when_every_session_is_busy_initialize_is_refused_as_busy():
    registry = SessionRegistry(max_sessions=2)
    for session in (opened(registry), opened(registry)):
        registry.begin(session)
    with pytest.raises(SessionLimit) as refused:
        opened(registry)
    assert refused.value.code == -32603 and refused.value.status_hint == 503
    assert "2 sessions, all of them busy" in refused.value.message and len(registry) == 2


def test_a_client_that_floods_initialize_ends_its_own_sessions_never_anothers():
    clock = FakeClock()
    registry = SessionRegistry(max_sessions=1000, max_per_client=5, clock=clock)
    others = [opened(registry, client="10.0.0.2") for _ in range(5)]
    flood = []
    for _ in range(500):
        clock.advance(0.01)
        flood.append(opened(registry, client="10.0.0.1"))
    assert all(registry.get(session.id, None) is session for session in others)
    assert [session for session in flood if session.ended is None] == flood[-5:]
    assert len(registry) == 10


def test_a_principals_sessions_count_against_the_principal_whatever_the_address():
    registry = SessionRegistry(max_per_client=2)
    first = opened(registry, principal="alice", client="10.0.0.1")
    opened(registry, principal="alice", client="10.0.0.2")
    registry.begin(first)
    opened(registry, principal="alice", client="10.0.0.3")  # ends the idle one, not the busy one
    registry.begin(registry.sessions()[-1])
    with pytest.raises(SessionLimit, match="this client holds 2 sessions"):
        opened(registry, principal="alice")
    assert opened(registry, principal="bob") is not None


def test_ten_thousand_idle_sessions_stay_ten_thousand_and_the_ended_ones_are_freed():
    registry = SessionRegistry()
    first = opened(registry)
    watch = weakref.ref(first)
    for _ in range(DEFAULT_MAX_SESSIONS - 1):
        opened(registry)
    assert len(registry) == DEFAULT_MAX_SESSIONS
    for _ in range(100):
        opened(registry)
    assert len(registry) == DEFAULT_MAX_SESSIONS and first.ended
    del first
    gc.collect()
    assert watch() is None  # nothing keeps an ended session alive


def test_a_session_subscribes_to_a_bounded_set_of_resources():
    session = opened(SessionRegistry())
    assert session.subscriptions is None  # nothing allocated until the first subscribe
    for index in range(MAX_SUBSCRIPTIONS):
        session.subscribe(f"test://{index}")
    session.subscribe("test://0")  # again: no error
    with pytest.raises(InvalidParams, match=str(MAX_SUBSCRIPTIONS)):
        session.subscribe("test://one-more")
    session.unsubscribe("test://0")
    session.unsubscribe("test://never")
    session.subscribe("test://one-more")
    assert len(session.subscriptions or ()) == MAX_SUBSCRIPTIONS


def test_waiting_handlers_are_counted_against_the_process_limit():
    registry = SessionRegistry(max_suspended=2)
    one, two, three = (opened(registry, client=f"10.0.0.{number}") for number in range(3))
    registry.hold(one, "m")
    registry.hold(two, "m")
    with pytest.raises(TooManySuspended) as refused:
        registry.hold(three, "elicitation/create")
    assert refused.value.bound == "process" and refused.value.option == "max_suspended"
    assert registry.suspended == 2 and three.waiting == 0 and registry.waiting_of("10.0.0.2") == 0
    registry.let_go(one)
    registry.hold(three, "m")
    assert registry.suspended == 2


def test_waiting_handlers_get_fair_shares_per_session_and_per_client():
    """The narrowest bound reached is named; one client's share is its own, whoever else waits."""
    registry = SessionRegistry(max_suspended=10, max_suspended_per_client=4, max_suspended_per_session=3)
    alice_1, alice_2 = opened(registry, principal="alice", client="10.0.0.1"), opened(registry, principal="alice")
    bob = opened(registry, principal="bob", client="10.0.0.1")  # same address, another principal: another client
    for _ in range(3):
        registry.hold(alice_1, "m")
    with pytest.raises(TooManySuspended) as refused:
        registry.hold(alice_1, "elicitation/create")
    assert (refused.value.bound, refused.value.limit, refused.value.option) == (
        "session", 3, "max_suspended_per_session")
    assert "This session holds 3 calls waiting" in refused.value.message and "max_suspended_per_session" in \
        refused.value.message
    registry.hold(alice_2, "m")  # alice's fourth, in her other session
    with pytest.raises(TooManySuspended) as refused:
        registry.hold(alice_2, "sampling/createMessage")
    assert (refused.value.bound, refused.value.limit) == ("client", 4)
    assert "This client holds 4 calls waiting" in refused.value.message and "max_suspended_per_client" in \
        refused.value.message
    assert registry.waiting_of("alice") == 4 and registry.suspended == 4
    for _ in range(3):
        registry.hold(bob, "m")  # bob's share is his own
    assert registry.waiting_of("bob") == 3 and registry.suspended == 7
    registry.let_go(alice_1)
    registry.hold(alice_2, "m")
    assert registry.waiting_of("alice") == 4 and alice_1.waiting == 2 and alice_2.waiting == 2


def test_a_session_without_a_client_is_held_to_its_own_and_the_process_share():
    registry = SessionRegistry(max_suspended=3, max_suspended_per_client=1, max_suspended_per_session=2)
    stdio = opened(registry, lasting=True)  # no principal, no address
    registry.hold(stdio, "m")
    registry.hold(stdio, "m")
    with pytest.raises(TooManySuspended, match="max_suspended_per_session"):
        registry.hold(stdio, "m")


def test_ending_runs_each_callback_once_and_late_callbacks_at_once():
    registry = SessionRegistry()
    session = opened(registry)
    reasons: list[str] = []
    session.on_end(reasons.append)
    assert registry.end(session.id, "closed by the client")
    assert not registry.end(session.id)
    session.on_end(reasons.append)
    assert reasons == ["closed by the client", "closed by the client"]
    registry.close()
    assert len(registry) == 0
