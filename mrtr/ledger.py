"""The ledger: what one conversation has asked and been answered so far.

A ledger is an ordered list of slots, one per ordinal (the Nth request or Step reached
during one execution, 1-based). A slot records the kind of request, its wire key when
the handler chose one, the fingerprint of what was asked, and the answer, or nothing
while the answer is pending.

Slots are msgspec Structs encoded as compact arrays: the ledger rides inside the
``requestState`` token on every retry, so every byte counts.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

import msgspec

__all__ = ["Kind", "Slot", "Ledger", "default_key", "ACTIONS", "ACTION_CODES"]


class Kind(IntEnum):
    """What a slot holds."""

    ELICIT = 0
    SAMPLE = 1
    ROOTS = 2
    STEP = 3


_KEY_PREFIX = {Kind.ELICIT: "elicit-", Kind.SAMPLE: "sample-", Kind.ROOTS: "roots-", Kind.STEP: "step-"}

# Elicitation answers are stored as [action code, content] to keep tokens small.
ACTIONS = ("accept", "decline", "cancel")
ACTION_CODES = {name: code for code, name in enumerate(ACTIONS)}


def default_key(kind: Kind, ordinal: int) -> str:
    """The wire key of a request that did not choose one: ``elicit-3``, ``sample-1``..."""
    return _KEY_PREFIX[kind] + str(ordinal)


class Slot(msgspec.Struct, array_like=True, frozen=True, omit_defaults=True):
    """One ledger position.

    ``key`` is ``None`` when the handler used the default key for the slot's kind and
    ordinal. ``answer`` is ``None`` while pending; otherwise its shape depends on
    ``kind``: ``[action code, content]`` for elicitation, the builtins form of the
    client's result for sampling and roots, the builtins form of the step's value for
    a Step. ``answered`` distinguishes a Step that returned ``None`` from a pending slot.
    """

    kind: int
    fingerprint: bytes
    key: str | None = None
    answered: bool = False
    answer: Any = None

    def wire_key(self, ordinal: int) -> str:
        """The key this slot travels under in ``inputRequests``/``inputResponses``."""
        return self.key if self.key is not None else default_key(Kind(self.kind), ordinal)


class Ledger:
    """An immutable sequence of slots plus the positions answered in this very round.

    ``fresh`` holds the 0-based indexes of slots whose answers arrived with the current
    request: they have not been checked against the schema that was asked yet. Answers
    that come back inside a sealed token were checked when they were first used.
    """

    __slots__ = ("slots", "fresh")

    def __init__(self, slots: tuple[Slot, ...] = (), fresh: frozenset[int] = frozenset()) -> None:
        self.slots = slots
        self.fresh = fresh

    def __len__(self) -> int:
        return len(self.slots)

    def __repr__(self) -> str:
        return f"Ledger({list(self.slots)!r}, fresh={sorted(self.fresh)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Ledger) and self.slots == other.slots and self.fresh == other.fresh

    def index_of_key(self) -> dict[str, int]:
        """Map each slot's wire key to its 0-based index."""
        return {slot.wire_key(i + 1): i for i, slot in enumerate(self.slots)}
