"""Fixtures of the several-nodes tests: one real redis-server for the session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ..tasks.redis_server import redis_server


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """One redis-server for the session; each test uses fresh task ids, or a prefix of its own."""
    with redis_server() as (url, _process):
        yield url
