"""Handler versions, and what a replay mismatch says when a deploy caused it.

A ledger outlives the code that recorded it: a token comes back after a deploy, a task
waits days for an answer. Each carrier records the version of the handler that wrote
its ledger (the token carrier in the token, the tasks carrier in the task record), so a
replay mismatch can tell a changed handler from a non-deterministic one and say which
:class:`~mrtr.core.effects.Patched` gate would let the old conversations finish.

A handler's version is the one its author gave (``@server.tool(version="2")``) or, by
default, a short digest of its code: bytecode, constants and names, without file names
or line numbers, so moving a function does not change it and editing it does. Code the
handler calls (helpers, ``yield from`` delegates) is not part of the digest; give a
``version=`` when the behaviour lives there. This module does no I/O.
"""

from __future__ import annotations

import hashlib
import inspect
import types
import weakref
from typing import Any

from .errors import ReplayMismatch

__all__ = ["MAX_VERSION", "handler_version", "set_handler_version", "deploy_hint"]

MAX_VERSION = 64
"""The longest version an author may give, in characters: it rides in every token."""

# The version each handler function goes by: the one its author gave, or its code's digest
# once computed (a paused round seals it in its token, so it is read every such round).
_versions: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()

# The handler asked about last (weakly) and its version, replaced whole: the rounds of one
# server mostly seal for the handler they sealed for before, and a weak table's lookup
# makes a weak reference every time. Emptied when an author's version is recorded.
_last: tuple[Any, str] = (None, "")


def set_handler_version(fn: Any, version: str) -> None:
    """Record the version an author gave ``fn`` (the registry's ``version=``)."""
    if not isinstance(version, str) or not version or len(version) > MAX_VERSION:
        raise ValueError(f"a handler version must be a non-empty string of at most {MAX_VERSION} characters, "
                         f"got {version!r}")
    global _last
    _versions[fn] = version
    _last = (None, "")


def handler_version(fn: Any) -> str:
    """The version of handler ``fn``: the one its author gave, or 8 hex digits of its code's digest."""
    global _last
    last, last_version = _last
    if last is not None and last() is fn:
        return last_version
    try:
        version = _versions.get(fn)
    except TypeError:  # not weak-referenceable: computed each time
        return _digest(fn)
    if version is None:
        version = _versions[fn] = _digest(fn)
    _last = (weakref.ref(fn), version)
    return version


def _digest(fn: Any) -> str:
    target = inspect.unwrap(fn)
    code = getattr(target, "__code__", None) or getattr(getattr(target, "__call__", None), "__code__", None)
    if code is None:
        return hashlib.sha256(repr(target).encode()).hexdigest()[:8]
    digest = hashlib.sha256()
    _feed(digest, code)
    return digest.hexdigest()[:8]


def _feed(digest: Any, code: types.CodeType) -> None:
    digest.update(code.co_code)
    digest.update(repr((code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars)).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _feed(digest, const)
        else:
            digest.update(_constant(const).encode())


def _constant(value: Any) -> str:
    # A frozenset's repr follows string hashing, which differs between processes.
    if isinstance(value, frozenset):
        return "frozenset(" + ",".join(sorted(_constant(item) for item in value)) + ")"
    if isinstance(value, tuple):
        return "(" + ",".join(_constant(item) for item in value) + ")"
    return repr(value)


def deploy_hint(mismatch: ReplayMismatch, fn: Any, recorded: str | None) -> ReplayMismatch:
    """``mismatch`` with a line saying a deploy caused it, when ``recorded`` is not ``fn``'s version.

    ``recorded`` is the version of the handler that wrote the ledger (``None`` or empty
    when the ledger predates versions: the mismatch is returned as it is, as it is when
    the versions agree and the handler itself is not deterministic). The line names the
    handler, both versions, the ordinal, what changed, and the gate to add there;
    ``data["deploy"]`` holds the versions and the suggested change id.
    """
    running = handler_version(fn)
    if not recorded or recorded == running:
        return mismatch
    data = mismatch.data if isinstance(mismatch.data, dict) else {}
    name = getattr(inspect.unwrap(fn), "__name__", None) or "handler"
    ordinal = data.get("ordinal", "?")
    changed = ", ".join(data.get("changed") or ()) or "the effect"
    patch = data.get("patch")
    versions = (f"  deploy: handler {name} runs version {running} here and this ledger was recorded by version "
                f"{recorded}")
    if patch is not None:
        line = (f'{versions}, which has the gate `Patched("{patch}")` at ordinal #{ordinal}: serve a version that '
                "keeps the gate until no conversation or task recorded with its marker is in flight")
    else:
        patch = f"{name}-{running}"
        line = (f"{versions}; the edit changed {changed} at ordinal #{ordinal}, so the change, not a "
                "non-deterministic handler, broke the replay: to let conversations and tasks in flight finish on "
                f"the code they were recorded with, gate the change at ordinal #{ordinal}: "
                f'`if (yield Patched("{patch}")): <the new code> else: <the old code>`')
    # The line names versions, an ordinal and a gate, nothing of the handler's files or values: the
    # brief form a client of a masking server sees keeps it too.
    hinted = ReplayMismatch(f"{mismatch.message}\n{line}",
                            data={**data, "deploy": {"recorded": recorded, "running": running, "patch": patch}},
                            brief=None if mismatch.brief is None else f"{mismatch.brief}\n{line}")
    hinted.__cause__ = mismatch.__cause__
    return hinted
