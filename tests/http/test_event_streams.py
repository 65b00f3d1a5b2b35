"""A session's event stream as one connection writes it: no event waits for a wake-up that was missed,
a recorded call's events go out only once the store has them, and a call handed over ends its
connections with ``retry:`` while its stream goes on elsewhere."""

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


async def test_a_held_stream_sends_only_what_the_store_has_and_ends_once_the_store_has_the_end() -> None:
    stream = EventStream(1)
    stream.hold()
    stream.push(b'{"progress":1}')
    stream.push(b'{"question":1}', keep=True)
    out = Written()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pump, stream, out, 0, QUIET)
        await trio.sleep(0.05)
        assert out.data() == []  # nothing recorded yet: nothing out
        events, last, ended = stream.unstored()
        assert [position for position, _ in events] == [1, 2] and last == 2 and not ended
        stream.stored_to(1, False)
        await trio.sleep(0.05)
        assert out.data() == [b'{"progress":1}']
        stream.finish(b'{"response":1}')
        stream.stored_to(2, False)
        await trio.sleep(0.05)
        assert out.data() == [b'{"progress":1}', b'{"question":1}'] and not out.ended.is_set()
        stream.stored_to(3, True)
        with trio.fail_after(2):
            await out.ended.wait()
    assert out.data()[-1] == b'{"response":1}'


async def test_a_stream_handed_over_ends_its_connection_with_retry_after_what_was_recorded() -> None:
    stream = EventStream(4, b"123.x.mark.")
    stream.load([(7, b'{"question":2}')], 7)  # adopted: the store's events, at their positions
    assert stream.count == 7 and stream.after(6) == [(7, b'{"question":2}')]
    stream.hold()
    out = Written()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pump, stream, out, 6, Pacing(priming=False, keepalive=None, retry=1500))
        await trio.sleep(0.05)
        stream.hand_over()
        with trio.fail_after(2):
            await out.ended.wait()
    assert out.chunks[0] == b"id: 123.x.mark.4-7\ndata: {\"question\":2}\n\n"
    assert out.chunks[-1] == b"retry: 1500\n\n"
    assert not stream.written  # the stream did not end: the client resumes it elsewhere
