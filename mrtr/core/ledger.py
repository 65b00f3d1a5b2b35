"""The ledger: what one conversation has asked and been answered so far.

A ledger is an ordered list of slots, one per ordinal (the Nth request or Step reached
during one execution, 1-based). A slot records the kind of request, its wire key when
the handler chose one, the fingerprint of what was asked, and the answer, or nothing
while the answer is pending.

Slots are msgspec Structs encoded as compact arrays: the ledger rides inside the
``requestState`` token on every retry, so every byte counts.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .errors import InvalidParams
from .kinds import ASKED, KINDS, Kind, RequestKind, decode_input_response
from .schema import INTEGER_MAX, INTEGER_MIN

__all__ = ["Slot", "Ledger", "default_key", "decode_answer", "merge_answers", "ACTIONS", "ACTION_CODES", "KEY_PREFIX"]

# The table's prefixes keyed by the plain int a slot stores: wire_key runs for every slot
# every round, and building a Kind from it first would cost more than the lookup.
KEY_PREFIX: dict[int, str] = {int(kind): row.key_prefix for kind, row in KINDS.items()}
"""The prefix of each kind's default key, by the code a ledger stores (``elicit-`` for an elicitation)."""

# The kinds by the plain int a slot stores: building a Kind from it calls into enum.
_KINDS: dict[int, Kind] = {int(kind): kind for kind in Kind}
# Reading a member off the enum class (Kind.ELICIT) costs a call into enum on Python 3.11;
# the answers of every round compare against these.
_ELICIT = Kind.ELICIT
_ROOTS = Kind.ROOTS

# Elicitation answers are stored as [action code, content] to keep tokens small.
ACTIONS = ("accept", "decline", "cancel")
ACTION_CODES = {name: code for code, name in enumerate(ACTIONS)}


def default_key(kind: Kind, ordinal: int) -> str:
    """The wire key of a request that did not choose one: ``elicit-3``, ``sample-1``..."""
    return KEY_PREFIX[kind] + str(ordinal)


class Slot(msgspec.Struct, array_like=True, frozen=True, omit_defaults=True):
    """One ledger position.

    ``key`` is ``None`` when the handler used the default key for the slot's kind and
    ordinal. ``answer`` is ``None`` while pending; otherwise its shape depends on
    ``kind``: ``[action code, content]`` for elicitation, the builtins form of the
    client's result for sampling and roots, the JSON data model of the step's value for
    a Step, the change id for a patch marker (whose fingerprint is empty: the marker is
    a few bytes). ``answered`` distinguishes a Step that returned ``None`` from a pending slot.
    """

    kind: int
    fingerprint: bytes
    key: str | None = None
    answered: bool = False
    answer: Any = None

    def wire_key(self, ordinal: int) -> str:
        """The key this slot travels under in ``inputRequests``/``inputResponses``."""
        return self.key if self.key is not None else KEY_PREFIX[self.kind] + str(ordinal)


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
        """Map the wire key of each client request slot to its 0-based index (Steps and patch markers are never issued)."""
        # Slot.wire_key, inlined: every retry maps every slot of its ledger.
        return {(KEY_PREFIX[slot.kind] + str(i + 1) if slot.key is None else slot.key): i
                for i, slot in enumerate(self.slots) if slot.kind in ASKED}


def decode_answer(kind: Kind, key: str, value: Any, *, named: str | None = None) -> Any:
    """Check one ``inputResponses`` value against the kind of request issued under ``key``.

    Returns the form stored in a slot. Only the shape is checked here; an accepted
    form's content is validated against the schema that was asked when the handler
    reaches the question, because only the replay knows that schema. ``named`` is how an
    error names the answer (default: its ``inputResponses`` key; a 2025 session, which
    has no such keys, names the request it answers).
    """
    named = named or f'inputResponses key "{key}"'
    if not isinstance(value, dict):
        raise InvalidParams(f'{named} must be an object, got {_json_type(value)}')
    if kind is _ELICIT:
        action = value.get("action")
        code = ACTION_CODES.get(action) if isinstance(action, str) else None
        if code is None:
            if "action" not in value:
                raise _wrong_kind(named, KINDS[kind], "")
            raise InvalidParams(f'{named}: "action" must be one of {", ".join(ACTIONS)}')
        if code:  # decline and cancel carry no content worth keeping
            return [code, None]
        content = value.get("content")
        if content is not None and not _is_form_content(content):
            raise InvalidParams(
                f'{named}: "content" must be an object of strings, numbers, booleans '
                "and string arrays"
            )
        if content:
            for name, item in content.items():
                if item.__class__ is int and not INTEGER_MIN <= item <= INTEGER_MAX:
                    raise InvalidParams(f'{named}: field "{name}" holds an integer outside the '
                                        "64-bit range a requestState can carry")
        return [code, content]
    row = KINDS[kind]
    try:
        result: Any = decode_input_response(row, value)
    except msgspec.ValidationError as exc:
        raise _wrong_kind(named, row, f" ({exc})") from None
    if kind is _ROOTS:
        for root in result.roots:
            if not root.uri.startswith("file://"):
                raise InvalidParams(f'{named}: root uri {root.uri!r} is not a file:// URI')
    return result


def merge_answers(
    ledger: Ledger, responses: Any, *, lenient: bool = False
) -> tuple[Ledger, dict[str, Any]]:
    """Merge a retry's ``inputResponses`` into the ledger.

    Returns the new ledger and the answers that match no slot. Strict policy: a key
    never issued or already answered is an error. Lenient policy: such answers are
    set aside (a key the handler asks in this very execution may still use them) or
    ignored. A malformed value for an issued key is an error under both policies.
    """
    if responses is None:
        return ledger, {}
    if not isinstance(responses, dict):
        raise InvalidParams(f"inputResponses must be an object mapping keys to answers, got {_json_type(responses)}")
    if not responses:
        return ledger, {}
    # The usual retry answers the one question asked last: its key is looked up from the
    # end (the map's last-wins is the scan's first hit) rather than every slot mapped.
    index = None if len(responses) == 1 else ledger.index_of_key()
    # Copied when the first answer lands, not before: a round then builds one new ledger.
    slots: Any = ledger.slots
    fresh: Any = ledger.fresh
    unmatched: dict[str, Any] = {}
    for key, value in responses.items():
        if index is None:
            # ledger.index_of_key().get(key), by a scan from the last slot, where the usual retry's key is
            # (Slot.wire_key inlined: every round scans)
            for position in range(len(slots) - 1, -1, -1):
                slot = slots[position]
                if slot.kind in ASKED and (slot.key if slot.key is not None
                                           else KEY_PREFIX[slot.kind] + str(position + 1)) == key:
                    break
            else:
                position = None
        else:
            position = index.get(key)
        if position is None:
            if lenient:
                unmatched[key] = value
                continue
            raise InvalidParams(
                f'Unknown inputResponses key "{key}"; the server never issued an input request with that key'
            )
        slot = slots[position]
        if slot.answered:
            if lenient:
                continue
            raise InvalidParams(f'inputResponses key "{key}" was already answered in a previous round trip')
        # either lookup finds slots of asked kinds only, all of them in the table
        answer = decode_answer(_KINDS[slot.kind], key, value)
        if slots is ledger.slots:
            slots = list(slots)
            fresh = set(fresh)
        slots[position] = Slot(slot.kind, slot.fingerprint, slot.key, True, answer)
        fresh.add(position)
    if slots is ledger.slots:
        return ledger, unmatched  # nothing landed (a ledger is immutable: the same one serves)
    return Ledger(tuple(slots), frozenset(fresh)), unmatched


def _wrong_kind(named: str, row: RequestKind, detail: str) -> InvalidParams:
    return InvalidParams(
        f"{named} must carry {_article(row.answer_label)} {row.answer_label}; "
        f"the server issued {_article(row.method)} {row.method} request for it{detail}"
    )


def _article(noun: str | None) -> str:
    return "an" if noun and noun[0] in "aeiou" else "a"



def _is_form_content(content: Any) -> bool:
    if not isinstance(content, dict):
        return False
    for name, item in content.items():
        if not isinstance(name, str):
            return False
        if isinstance(item, list):
            if not all(isinstance(member, str) for member in item):
                return False
        elif not isinstance(item, (str, int, float, bool)):
            return False
    return True


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__

