"""A server with no fixed secret (each start makes a new key), for the tests of a restart mid-conversation.

It serves the client tests' ``interview`` (three questions in three rounds).
"""

from __future__ import annotations

from mrtr import Server

from .app import interview

server = Server("no-fixed-secret", "1.0.0")
server.tool(interview)
