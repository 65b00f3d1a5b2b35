"""Splitting a server's bytes: the same lines and events however the reads fall, and the cap held."""

from __future__ import annotations

import gzip
import re
import zlib

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mrtr.client import ClientError
from mrtr.client.framing import STEP, Decoded, Events, Lines

from ..conftest import examples

STREAM = st.lists(st.sampled_from([b"a", b"bc", b"\r", b"\n", b"\r\n", b":", b" ", b"data", b"data: x", b""]),
                  max_size=40).map(b"".join)


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({cut % (len(data) + 1) for cut in cuts})
    return [data[start:end] for start, end in zip([0, *points], [*points, len(data)], strict=True)]


@settings(max_examples=examples(300), deadline=None)
@given(data=STREAM, cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=8), cr=st.booleans())
@example(data=b"\r\n\n", cuts=[1, 2], cr=True)  # a CRLF split across reads, then an LF read alone
def test_lines_do_not_depend_on_where_reads_end(data: bytes, cuts: list[int], cr: bool) -> None:
    lines = Lines(1 << 20, cr=cr)
    got = [line for chunk in chunked(data, cuts) for line in lines.feed(chunk)]
    rest = lines.end()
    expected = re.split(rb"\r\n|\r|\n" if cr else rb"\n", data)
    assert got == expected[:-1]
    assert rest == (expected[-1] or None)


@settings(max_examples=examples(300), deadline=None)
@given(data=STREAM, cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=8))
def test_events_do_not_depend_on_where_reads_end(data: bytes, cuts: list[int]) -> None:
    whole = Events(1 << 20)
    expected = [*whole.feed(data), *whole.end()]
    split = Events(1 << 20)
    assert [event for chunk in chunked(data, cuts) for event in split.feed(chunk)] + split.end() == expected


def test_events_skip_comments_and_other_fields() -> None:
    events = Events(1 << 20)
    assert events.feed(b"\xef\xbb\xbf: keep-alive\n\nid: 1\nevent: message\ndata: {\ndata:}\nretry: 5\n\n") \
        == [b"{\n}"]


def test_a_line_is_refused_once_it_passes_the_limit_not_when_it_ends() -> None:
    lines = Lines(10)
    assert lines.feed(b"0123456789\n01234") == [b"0123456789"]
    with pytest.raises(ClientError, match="larger than 10 bytes"):
        lines.feed(b"567890")


def test_an_event_of_many_short_lines_is_counted() -> None:
    """Empty data lines hold nothing each but a place in the event: they count."""
    events = Events(100)
    with pytest.raises(ClientError, match="larger than"):
        events.feed(b"data:\n" * 101)


def test_decoding_is_lazy_and_stepped() -> None:
    """A small gzip chunk that decodes to 64 MiB gives pieces of STEP bytes, one at a time."""
    bomb = gzip.compress(b"\0" * (64 << 20), 9)
    pieces = Decoded("gzip").feed(bomb)
    first = next(pieces)
    assert len(first) == STEP
    assert len(bomb) < 100_000


@pytest.mark.parametrize("coding, compress", [
    ("gzip", gzip.compress), ("x-gzip", gzip.compress), ("deflate", zlib.compress),
    ("deflate", lambda data: zlib.compress(data)[2:-4]), ("identity", lambda data: data), ("", lambda data: data),
])
def test_decoded_bodies(coding: str, compress) -> None:
    body = b'{"hello": "world"}' * 10000
    decoded = Decoded(coding)
    wire = compress(body)
    got = b"".join(piece for start in range(0, len(wire), 1000) for piece in decoded.feed(wire[start:start + 1000]))
    decoded.end()
    assert got == body


def test_a_truncated_gzip_body_is_refused() -> None:
    decoded = Decoded("gzip")
    list(decoded.feed(gzip.compress(b"x" * 1000)[:-10]))
    with pytest.raises(ClientError, match="ended before its end"):
        decoded.end()
