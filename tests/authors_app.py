"""A server with the mistakes and refusals handler authors meet, served as ``tests.authors_app:server``.

Its servers keep the defaults: what reaches a client is what a production server shows
(``mrtr serve --reload`` shows everything), and its task tool uses the default store.
"""

from __future__ import annotations

import itertools

from mrtr import Elicit, Form, PublicError, Step
from mrtr.server import Server

server = Server("authors", "1.0.0")

_asked = itertools.count(1)


@server.tool
def explode() -> str:
    """Fails the way a database driver does: with a URL and its password in the message."""
    raise ValueError("could not connect to postgres://expenses:hunter2@db.internal:5432/expenses")


@server.tool
def refuse(expense: int) -> str:
    """Refuses on purpose, in words meant for the caller."""
    raise PublicError(f"No expense {expense} in your account")


@server.tool
def drifting():
    """Asks a question whose text changes every time it is asked (a replay mismatch)."""
    answer = yield Elicit(f"Question number {next(_asked)}?", Form().string("reply"))
    return answer.content["reply"]


@server.tool
def confirm(description: str):
    """Files ``description`` after a confirmation, reading the answer's :attr:`content` unchecked."""
    answer = yield Elicit(f"File {description!r}?", Form().boolean("ok"))
    return "filed" if answer.content["ok"] else "not filed"


def _noop() -> int:
    return 1


@server.tool(task="required")
def background(ctx):
    """Runs as a task and fails in it."""
    yield Step(_noop)
    raise ValueError("the task read /srv/secrets/expenses.key and failed")
