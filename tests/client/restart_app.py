"""A server with no fixed secret (each start makes a new key), for the tests of a restart mid-conversation."""

from __future__ import annotations

from mrtr import Elicit, Form, Server

server = Server("no-fixed-secret", "1.0.0")


@server.tool
def interview(topic: str = "pets"):
    """Three questions in three rounds."""
    first = yield Elicit(f"Your name ({topic})?", Form().string("name"))
    second = yield Elicit("Your favourite colour?", Form().choice("colour", ["red", "green", "blue"]))
    third = yield Elicit("Your age?", Form().integer("age", minimum=0))
    return f"{first.content['name']}/{second.content['colour']}/{third.content['age']}/{topic}"
