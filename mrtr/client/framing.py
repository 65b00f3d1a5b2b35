"""A server's bytes into messages, with memory bounded by what is held, not by what is sent.

The client holds at most one message from a server (``limit`` bytes, after any content
coding is undone) and never more than that of a line not yet ended: a line, body or
event that outgrows the limit fails as soon as it does, not when (if ever) it ends.

- :class:`Decoded` undoes a response's ``Content-Encoding`` (identity, gzip, deflate)
  at most :data:`STEP` bytes at a time, so a small compressed chunk cannot expand into
  a large allocation in one call.
- :class:`Lines` splits a byte stream into lines: on LF for newline-delimited JSON
  (stdio), on CR, LF or CRLF for server-sent events.
- :class:`Events` reads server-sent events and returns the ``data`` of each.

Every limit breach raises :class:`~mrtr.client.errors.ClientError` (``-32603``). This
module does no I/O.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator

from ..core.errors import INTERNAL_ERROR, INVALID_REQUEST
from .errors import Unreadable

__all__ = ["ACCEPT_ENCODING", "STEP", "Decoded", "Events", "Lines", "too_large"]

STEP = 64 * 1024
"""The most decoded bytes one step of :class:`Decoded` produces."""

ACCEPT_ENCODING = "gzip, deflate"
"""The codings the client offers, and the only ones it decodes."""

_EOL = re.compile(rb"\r\n|\r|\n")
_BOM = b"\xef\xbb\xbf"


def too_large(limit: int) -> Unreadable:
    """The error for a message from the server longer than ``limit`` bytes."""
    return Unreadable(INTERNAL_ERROR, f"the server sent a message larger than {limit} bytes")


class Decoded:
    """Undoes one ``Content-Encoding``, yielding the decoded bytes in pieces of at most :data:`STEP`.

    ``identity`` (or none), ``gzip`` (``x-gzip``) and ``deflate`` (zlib format, or raw
    deflate as some servers send it) are read; anything else, a chain of codings
    included, is a ClientError naming it: those are not what the client offered.
    """

    def __init__(self, content_encoding: str) -> None:
        codings = [coding.strip().lower() for coding in content_encoding.split(",")]
        codings = [coding for coding in codings if coding and coding != "identity"]
        self._coding = codings[0] if codings else None
        if len(codings) > 1 or self._coding not in (None, "gzip", "x-gzip", "deflate"):
            raise Unreadable(INVALID_REQUEST, f"the server answered with Content-Encoding {content_encoding!r}; "
                                               f"the client offers only {ACCEPT_ENCODING}")
        self._inflate: zlib._Decompress | None = None
        if self._coding in ("gzip", "x-gzip"):
            self._inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif self._coding == "deflate":
            self._inflate = zlib.decompressobj()
        self._started = False

    def feed(self, data: bytes) -> Iterator[bytes]:
        """The decoded pieces of the next raw ``data``, each at most :data:`STEP` bytes.

        Lazily: a consumer that stops (its limit reached) stops the decoding with it, so a
        small chunk that would decode to gigabytes never does.
        """
        if self._inflate is None:
            for start in range(0, len(data), STEP):
                yield data[start:start + STEP]
            return
        while not self._inflate.eof:
            try:
                piece = self._inflate.decompress(data, STEP)
            except zlib.error as exc:
                if self._coding == "deflate" and not self._started:
                    # 'deflate' sent as raw deflate, without the zlib header: read it that way.
                    self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)
                    self._started = True
                    continue
                raise Unreadable(INVALID_REQUEST, f"the server's {self._coding} body does not decode: {exc}") \
                    from None
            self._started = True
            if piece:
                yield piece
            data = self._inflate.unconsumed_tail
            if not data and len(piece) < STEP:  # a full piece may leave output inside zlib: drain it
                break

    def end(self) -> None:
        """Check that a compressed body was complete when the response ended."""
        if self._inflate is not None and self._started and not self._inflate.eof:
            raise Unreadable(INVALID_REQUEST, f"the server's {self._coding} body ended before its end")


class Lines:
    """Splits a byte stream into lines, holding at most ``limit`` bytes of the one not yet ended.

    With ``cr``, a line ends at CR, LF or CRLF (server-sent events, a CRLF split across
    two reads included); without, at LF only (newline-delimited JSON).
    """

    def __init__(self, limit: int, *, cr: bool = False) -> None:
        self.limit = limit
        self._cr = cr
        self._parts: list[bytes] = []
        self._held = 0
        self._after_cr = False

    def feed(self, data: bytes) -> list[bytes]:
        """The lines ``data`` ends (without their line ends); raises once a line passes the limit."""
        if self._cr:
            if self._after_cr and data.startswith(b"\n"):
                data = data[1:]  # the LF of a CRLF whose CR ended the previous read
                self._after_cr = False  # taken: an LF in the next read ends a line of its own
            if not data:
                return []
            self._after_cr = data.endswith(b"\r")
            pieces = _EOL.split(data)
        else:
            pieces = data.split(b"\n")
        lines: list[bytes] = []
        if len(pieces) > 1:
            lines.append(b"".join([*self._parts, pieces[0]]))
            lines.extend(pieces[1:-1])
            self._parts, self._held = [], 0
        for line in lines:
            if len(line) > self.limit:
                raise too_large(self.limit)
        rest = pieces[-1] if len(pieces) > 1 else pieces[0]
        if rest:
            self._held += len(rest)
            if self._held > self.limit:
                raise too_large(self.limit)
            self._parts.append(rest)
        return lines

    def end(self) -> bytes | None:
        """What was left without a line end when the stream ended, if anything."""
        rest = b"".join(self._parts) if self._parts else None
        self._parts, self._held = [], 0
        return rest


class Events:
    """The ``data`` of each server-sent event, an event held up to ``limit`` bytes.

    Comments (keep-alives) and event names are skipped, and take no memory; a leading
    byte order mark is dropped. The last ``id`` and ``retry`` fields are kept
    (:attr:`last_id`, :attr:`retry`): a legacy server's stream is resumed from them.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lines = Lines(limit, cr=True)
        self._data: list[bytes] = []
        self._size = 0
        self._first = True
        self.last_id: str | None = None
        """The last event ``id`` seen (a legacy stream is resumed from it), or ``None``."""
        self.retry: float | None = None
        """The last ``retry`` field, in seconds: how long to wait before resuming, or ``None``."""

    def feed(self, data: bytes) -> list[bytes]:
        """The data of every event ``data`` completes."""
        return [event for line in self._lines.feed(data) if (event := self._line(line)) is not None]

    def end(self) -> list[bytes]:
        """The data of an event left unterminated when the stream ended (read, as a lenient reader would)."""
        rest = self._lines.end()
        events = [event] if rest is not None and (event := self._line(rest)) is not None else []
        if self._data:
            events.append(b"\n".join(self._data))
            self._data, self._size = [], 0
        return events

    def _line(self, line: bytes) -> bytes | None:
        if self._first:
            self._first = False
            if line.startswith(_BOM):
                line = line[len(_BOM):]
        if not line:
            if not self._data:
                return None
            event = b"\n".join(self._data)
            self._data, self._size = [], 0
            return event
        if line.startswith(b":"):
            return None
        name, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if name == b"id" and b"\0" not in value:
            self.last_id = value[:256].decode("utf-8", "replace")  # an id is echoed in a header: kept short
            return None
        if name == b"retry":
            if value.isdigit() and len(value) < 10:
                self.retry = int(value) / 1000
            return None
        if name != b"data":
            return None
        self._size += len(value) + 1  # an empty data line still costs its place in the event
        if self._size > self.limit:
            raise too_large(self.limit)
        self._data.append(value)
        return None
