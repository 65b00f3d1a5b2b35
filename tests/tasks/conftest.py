"""Fixtures for the tasks carrier: one parametrized store per kind, all of them real."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from mrtr.carriers.tasks import TaskStore, open_store

from ..conftest import FakeClock
from .redis_server import redis_server


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """One redis-server for the session; tests use fresh task ids, so they never collide."""
    with redis_server() as (url, _process):
        yield url


# The Redis store starts a redis-server: that parameter belongs to the slow tier.
REDIS = pytest.param("redis", marks=pytest.mark.slow)


@pytest.fixture(params=["memory", "sqlite", REDIS])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL for each kind of store."""
    if request.param == "memory":
        return "memory:"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'tasks.sqlite3'}"
    return str(request.getfixturevalue("redis_url"))


@pytest.fixture(params=["sqlite", REDIS])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL for each store that several nodes can share."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'tasks.sqlite3'}"
    return str(request.getfixturevalue("redis_url"))


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[TaskStore]:
    """An open store of each kind."""
    async with open_store(store_url) as opened:
        yield opened


@pytest.fixture
def clock() -> FakeClock:
    """The wall clock of a :func:`clocked_store` and of the carriers a test builds on it.

    It starts years before the real time, so code that reads the real clock instead shows.
    """
    return FakeClock(1_600_000_000.0)


@pytest.fixture(params=["memory", "sqlite"])
async def clocked_store(request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock) -> AsyncIterator[TaskStore]:
    """An open store of each kind that expires records by ``clock`` (Redis keeps its own time)."""
    url = "memory:" if request.param == "memory" else f"sqlite:///{tmp_path / 'tasks.sqlite3'}"
    async with open_store(url, clock=clock) as opened:
        yield opened
