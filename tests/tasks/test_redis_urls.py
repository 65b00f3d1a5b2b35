"""Redis store URLs: the three deployments, TLS, the password from the environment, the key prefix; expiries."""

from __future__ import annotations

import ssl
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrtr.carriers.tasks.redis_scripts import milliseconds
from mrtr.carriers.tasks.redis_url import CLUSTER_SHARDS, KeyLayout, is_redis_url, parse_redis_url
from mrtr.carriers.tasks.store import masked
from mrtr.carriers.tasks.urls import chosen_url

from ..conftest import examples


def test_one_redis_keeps_the_keys_of_earlier_versions():
    target = parse_redis_url("redis://cache.internal:6380/2", {})
    assert (target.kind, target.addresses, target.db, target.password, target.tls) == (
        "standalone", (("cache.internal", 6380),), 2, None, None)
    layout = target.layout
    assert layout.task("abc") == "mrtr:task:abc" and layout.leases_of("abc") == "mrtr:leases"
    assert layout.lease_sets() == ["mrtr:leases"] and layout.task_pattern() == "mrtr:task:*"
    assert layout.round("k") == "mrtr:round:k" and layout.notifications == "mrtr:notifications"
    assert layout.task_id_of(layout.task("abc")) == "abc"


def test_a_cluster_puts_a_task_and_its_lease_set_under_one_hash_tag():
    target = parse_redis_url("redis+cluster://10.0.0.1:7000,10.0.0.2,[::1]:7002/?prefix=app:", {})
    assert target.kind == "cluster"
    assert target.addresses == (("10.0.0.1", 7000), ("10.0.0.2", 6379), ("::1", 7002))
    layout = target.layout
    shard = zlib.crc32(b"abc") % CLUSTER_SHARDS
    assert layout.task("abc") == "{app:%d}task:abc" % shard and layout.leases_of("abc") == "{app:%d}leases" % shard
    assert len(set(layout.lease_sets())) == CLUSTER_SHARDS and layout.leases_of("abc") in layout.lease_sets()
    assert layout.task_id_of(layout.task("abc")) == "abc"
    assert layout.round("k") == "app:round:k"  # one key per script: no tag needed
    spread = {layout.leases_of(f"task-{i}") for i in range(400)}
    assert len(spread) == CLUSTER_SHARDS


def test_a_sentinel_url_names_its_service_and_database():
    target = parse_redis_url("rediss+sentinel://s1:26379,s2/mymaster/3?ssl_check_hostname=false", {})
    assert (target.kind, target.service, target.db, target.addresses) == (
        "sentinel", "mymaster", 3, (("s1", 26379), ("s2", 26379)))
    assert target.tls == {"ssl_check_hostname": "false"}
    assert not target.layout.sharded and target.layout.task("x") == "mrtr:task:x"
    with pytest.raises(ValueError, match="names the service"):
        parse_redis_url("redis+sentinel://s1:26379", {})


def test_the_password_comes_from_the_url_or_else_from_the_environment():
    environ = {"MRTR_REDIS_PASSWORD": "from-env", "MRTR_REDIS_SENTINEL_PASSWORD": "sentinel-pw"}
    assert parse_redis_url("redis://:in%20url@h/0", environ).password == "in url"
    assert parse_redis_url("redis://h/0", environ).password == "from-env"
    assert parse_redis_url("redis://alice@h/0", environ).username == "alice"
    assert parse_redis_url("redis://h/0", {}).password is None
    assert parse_redis_url("redis+sentinel://h/m", environ).sentinel_password == "sentinel-pw"
    assert "from-env" not in repr(parse_redis_url("redis://h/0", environ))


def test_tls_parameters_build_the_context_they_describe(tmp_path):
    assert parse_redis_url("rediss://h/0", {}).ssl_context().verify_mode == ssl.CERT_REQUIRED
    loose = parse_redis_url("rediss://h/0?ssl_cert_reqs=none", {}).ssl_context()
    assert loose.verify_mode == ssl.CERT_NONE and not loose.check_hostname
    assert not parse_redis_url("rediss://h/0?ssl_check_hostname=false", {}).ssl_context().check_hostname
    with pytest.raises(ValueError, match="ssl_cert_reqs"):
        parse_redis_url("rediss://h/0?ssl_cert_reqs=maybe", {})
    with pytest.raises(ValueError, match="need a rediss scheme"):
        parse_redis_url("redis://h/0?ssl_ca_certs=/etc/ca.pem", {})
    with pytest.raises(ValueError, match="cannot be used"):
        parse_redis_url(f"rediss://h/0?ssl_ca_certs={tmp_path / 'missing.pem'}", {})


@pytest.mark.parametrize("url, message", [
    ("redis://h/0?prefx=typo:", "unknown query parameter prefx"),
    ("redis://h/0?prefix=has space", "prefix must be"),
    ("redis://h/0?prefix=tag{1}", "prefix must be"),
    ("redis://h/0?prefix=glob*", "prefix must be"),
    ("redis://h/0?prefix=a&prefix=b", "given twice"),
    ("redis://h1,h2/0", "names one host"),
    ("redis://h:99999/0", "invalid port"),
    ("redis://h:x/0", "invalid port"),
    ("redis://h/zero", "must be a number"),
    ("redis+cluster://h/1", "database 0 only"),
    ("redis://h/0/1", "unexpected path"),
    ("unix://", "names the socket"),
    ("memcached://h", "not a Redis URL"),
])
def test_a_malformed_url_is_refused_saying_why(url, message):
    with pytest.raises(ValueError, match=message):
        parse_redis_url(url, {})


def test_a_unix_socket_url():
    target = parse_redis_url("unix:///run/redis/redis.sock?db=2", {})
    assert (target.kind, target.path, target.db) == ("unix", "/run/redis/redis.sock", 2)


def test_store_urls_of_every_shape_are_masked():
    assert masked("redis+cluster://u:hunter2@h1:7000,h2:7001/") == "redis+cluster://u:***@h1:7000,h2:7001/"
    assert masked("rediss+sentinel://:hunter2@s1,s2/mymaster/0") == "rediss+sentinel://:***@s1,s2/mymaster/0"


def test_the_store_is_chosen_by_argument_then_mrtr_store_then_mrtr_tasks():
    assert chosen_url("memory:", {"MRTR_STORE": "redis://a/0", "MRTR_TASKS": "redis://b/0"}) == "memory:"
    assert chosen_url(None, {"MRTR_STORE": "redis://a/0", "MRTR_TASKS": "redis://b/0"}) == "redis://a/0"
    assert chosen_url(None, {"MRTR_TASKS": "redis://b/0"}) == "redis://b/0"
    assert chosen_url(None, {"MRTR_STORE": ""}) is None


def test_which_urls_are_redis():
    for url in ("redis://h", "rediss://h", "unix:///s", "redis+cluster://h", "REDISS+SENTINEL://h/m"):
        assert is_redis_url(url)
    for url in ("memory:", "sqlite:///x", "redis:h", "http://h"):
        assert not is_redis_url(url)


@settings(max_examples=examples(100), deadline=None)
@given(st.text(max_size=80), st.text(alphabet="abc:/@?=&,[]%{}*", max_size=40))
def test_any_url_parses_or_is_refused_with_a_value_error_that_keeps_the_password(tail, noise):
    for scheme in ("redis", "rediss+cluster", "redis+sentinel", "unix"):
        url = f"{scheme}://user:pw-S3CRET@{noise}{tail}"
        try:
            target = parse_redis_url(url, {})
        except ValueError as error:
            assert "pw-S3CRET" not in str(error)
        else:
            assert isinstance(target.layout, KeyLayout)


@pytest.mark.parametrize(("seconds", "expected"), [(0.0, 1), (0.0001, 1), (0.25, 250), (1.0001, 1001), (2.9999, 3000),
                                                    (2.007, 2007), (0.3, 300), (float("inf"), 2**62)])
def test_a_redis_expiry_is_whole_milliseconds_rounded_up_and_never_zero(seconds, expected):
    # Sessions, recorded calls and their leases all use this one rounding: truncating would let
    # a lease of 1.0001 s lapse a fraction of a millisecond before its holder expects, and a
    # float's last bit (2.007 * 1000 is 2007.0000000000002) must not add a millisecond.
    assert milliseconds(seconds) == expected


@given(st.integers(min_value=1, max_value=10**9))
@settings(max_examples=examples(200))
def test_a_whole_number_of_milliseconds_is_kept_exactly(count):
    assert milliseconds(count / 1000) == count


def test_a_nan_expiry_is_refused():
    with pytest.raises(ValueError):
        milliseconds(float("nan"))
