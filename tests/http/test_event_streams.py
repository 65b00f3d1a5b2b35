"""A session's event stream as one connection writes it: no event waits for a wake-up that was missed."""

from __future__ import annotations

from typing import Any

import trio

from mrtr.transports.http.streams import EventStream, Pacing, pump

QUIET = Pacing(priming=False, keepalive=None)


class Written:
    """A responder that keeps what a connection wrote; ``on_send`` runs at each write, before it completes."""

    def __init__(self, on_send: Any = None) -> None:
        self.chunks: list[bytes] = []
        self.ended = trio.Event()
        self.on_send = on_send

    async def respond(self, status: int, headers: Any, body: bytes) -> None:
        raise AssertionError("a stream is written in pieces")

    async def start(self, status: int, headers: Any) -> None:
        assert status == 200

    async def send(self, chunk: bytes) -> None:
        if self.on_send is not None:
            self.on_send(chunk)
        await trio.sleep(0)  # a write lets the loop run: what happens meanwhile must not be missed
        self.chunks.append(chunk)

    async def end(self) -> None:
        self.ended.set()

    def data(self) -> list[bytes]:
        return [chunk.split(b"\ndata: ", 1)[1].rstrip(b"\n") for chunk in self.chunks if b"\ndata: " in chunk]


async def test_an_event_pushed_while_another_is_written_goes_out_without_waiting_for_a_keepalive() -> None:
    """A response that arrived while the question before it was being written was left until the next
    keep-alive (15 s): the connection looked for news only after its write, and the news had come during it."""
    stream = EventStream(1)
    stream.push(b'{"question":1}', keep=True)

    def meanwhile(chunk: bytes) -> None:
        if b"question" in chunk:
            stream.finish(b'{"response":1}')

    out = Written(meanwhile)
    with trio.fail_after(2):
        assert await pump(stream, out, 0, QUIET)
    assert out.data() == [b'{"question":1}', b'{"response":1}']
