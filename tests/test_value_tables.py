"""The tables that keep what a request's values decided (paths, Host verdicts, header names,
decoded Mcp-Name values, access-line texts): client input fills them, so each holds a bounded
number of short values and never a long one, whatever a client sends."""

from __future__ import annotations

import pytest

from mrtr.core import mirroring
from mrtr.transports import logs
from mrtr.transports.http import headers, hosts, native
from mrtr.transports.http.headers import RequestHeaders
from mrtr.transports.http.hosts import HostPolicy
from mrtr.transports.logs import AccessRecord

LONG = "a" * 10_000
BOUND = ("127.0.0.1", 8000)


def _longest_key(table: dict) -> int:
    def size(key: object) -> int:
        if isinstance(key, (str, bytes)):
            return len(key)
        if isinstance(key, tuple):
            return max((size(part) for part in key), default=0)
        return 0

    return max((size(key) for key in table), default=0)


def test_a_long_value_is_decided_but_never_kept():
    assert native._path_of(b"/" + LONG.encode() + b"?q=1") == "/" + LONG
    assert HostPolicy.parse(None).allows(LONG, BOUND) is False
    assert mirroring.decode_value(LONG, "Mcp-Name") == LONG
    view = RequestHeaders([(b"X-" + LONG.encode(), b"v"), (b"Host", b"h")])
    assert view["x-" + LONG.lower()] == "v"
    record = AccessRecord("http", "POST", "/" + LONG)
    record.request({"method": "tools/call", "params": {"name": "t"}})
    assert record.message(1.25).startswith("POST " + ("/" + LONG)[:200] + "... tools/call")
    assert logs._json_text(LONG) == '"' + LONG + '"'
    for member in ("method", "target", "path"):  # a caller may set a record's members as it likes
        record = AccessRecord("http", "POST", "/mcp")
        setattr(record, member, LONG)
        assert LONG[:200] in record.message(1.0)
    for table in (native._PATHS, hosts._ALLOWED, mirroring._DECODED, headers._NAMES, logs._LINE_PARTS,
                  logs._KNOWN_TEXT):
        assert _longest_key(table) <= 256, table


def test_many_short_values_stay_within_each_tables_bound():
    policy = HostPolicy.parse(None)
    for i in range(3_000):
        native._path_of(b"/p%d" % i)
        policy.allows(f"h{i}:8000", BOUND)
        mirroring.decode_value(f"tool-{i}", "Mcp-Name")
        RequestHeaders([(b"X-F%d" % i, b"v")])
        record = AccessRecord("http", "POST", f"/p{i}")
        record.request({"method": "tools/call", "params": {"name": f"t{i}"}})
        record.message(0.1)
        logs._json_text(f"v{i}")
    assert len(native._PATHS) <= native._PATHS_LIMIT
    assert len(hosts._ALLOWED) <= hosts._ALLOWED_LIMIT
    assert len(mirroring._DECODED) <= mirroring._DECODED_LIMIT
    assert len(headers._NAMES) <= headers._NAMES_LIMIT
    assert len(logs._LINE_PARTS) <= logs._LINE_PARTS_LIMIT
    assert len(logs._KNOWN_TEXT) <= logs._KNOWN_LIMIT


def test_a_kept_verdict_is_the_verdict_of_the_policy_asked():
    # Two servers in one process with different allowed hosts share the table: each gets its own answer.
    default, listed = HostPolicy.parse(None), HostPolicy.parse(["api.example.com"])
    for _ in range(2):
        assert default.allows("api.example.com", BOUND) is False
        assert listed.allows("api.example.com", BOUND) is True
        assert default.allows(f"127.0.0.1:{BOUND[1]}", BOUND) is True
        assert listed.allows(f"127.0.0.1:{BOUND[1]}", BOUND) is False


def test_a_kept_mcp_name_still_refuses_what_it_refused():
    # Only values that passed the rules are kept: a refused one is refused again, every time.
    import pytest

    from mrtr.core.errors import HeaderMismatch

    for _ in range(2):
        with pytest.raises(HeaderMismatch):
            mirroring.decode_value("caf\u00e9", "Mcp-Name")
        with pytest.raises(HeaderMismatch):
            mirroring.decode_value("=?base64?%%%?=", "Mcp-Name")
    assert mirroring.decode_value("=?base64?Y2Fmw6k=?=", "Mcp-Name") == "caf\u00e9"
    assert mirroring.decode_value("=?base64?Y2Fmw6k=?=", "Mcp-Name") == "caf\u00e9"


def test_a_header_views_repr_names_fields_but_shows_no_value():
    view = RequestHeaders([(b"Authorization", b"Bearer s3cret-token"), (b"Cookie", b"sid=abc"), (b"Host", b"h")])
    assert "s3cret" not in repr(view) and "sid=abc" not in repr(view) and "s3cret" not in str(view)
    assert "authorization" in repr(view) and "host" in repr(view)


@pytest.mark.slow
def test_str_and_bytes_names_are_never_compared_in_the_name_table():
    # Under python -bb, comparing bytes with str is an error: a view built from str names (an embedding
    # front end's) must not look them up among the parsed bytes names, nor add them there.
    import subprocess
    import sys

    code = ("from mrtr.transports.http.headers import RequestHeaders, _NAMES\n"
            "RequestHeaders([(b'X-A', b'1'), (b'Host', b'h')])\n"
            "view = RequestHeaders([('X-A', '2'), ('Host', 'h'), ('X-B', '3')])\n"
            "assert view['x-a'] == '2' and view['x-b'] == '3'\n"
            "assert all(type(name) is bytes for name in _NAMES)\n")
    done = subprocess.run([sys.executable, "-bb", "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("bound", [("127.0.0.2", 8000), ("[::1]", 8000), ("app.localhost", 8000)])
def test_a_loopback_bound_server_answers_to_its_own_name_and_the_loopback_ones_only(bound):
    # What is loopback is the rule ElicitURL and the client use (mrtr.core.web_urls), and a
    # server bound to one answers to that name too: 127.0.0.2 refused its own Host before.
    default = HostPolicy.parse(None)
    own = bound[0].strip("[]")
    assert default.allows(f"{bound[0]}:8000" if own != "::1" else "[::1]:8000", bound) is True
    assert default.allows("localhost:8000", bound) is True
    assert default.allows("evil.example:8000", bound) is False  # a rebinding name is refused
    assert HostPolicy.parse(None).allows("evil.example:8000", ("192.0.2.1", 8000)) is True  # not loopback: no check
