"""Fixtures for the tasks carrier: one parametrized store per kind, all of them real."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from mrtr.carriers.tasks import TaskStore, open_store

from .redis_server import redis_server


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """One redis-server for the session; tests use fresh task ids, so they never collide."""
    with redis_server() as (url, _process):
        yield url


@pytest.fixture(params=["memory", "sqlite", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL for each kind of store."""
    if request.param == "memory":
        return "memory:"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'tasks.sqlite3'}"
    return str(request.getfixturevalue("redis_url"))


@pytest.fixture(params=["sqlite", "redis"])
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
