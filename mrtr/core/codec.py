"""The ``requestState`` token: a conversation's memory, carried by the client.

An mrtr server keeps nothing between round trips. When a handler needs input from the
client (an elicitation, a sampling call, a roots listing) or checkpoints a Step, the
server answers with an ``InputRequiredResult`` and forgets the request. Everything it
needs to resume, above all the ledger of what was asked and answered so far, travels in
``requestState``, which the client must echo unchanged on its retry. Any worker of any
instance can therefore serve any retry, and a restart loses nothing in flight as long as
the key survives.

The client is not trusted with that memory: the spec calls an incoming ``requestState``
attacker-controlled input. The token is therefore sealed with AES-256-GCM, an AEAD
cipher, which gives two properties at once:

* **opacity**: the client cannot read the method, target, principal or any answer;
* **integrity**: any change to a single bit, a token cut short or extended, or a token
  sealed under another key fails authentication and is rejected.

Layout of a token, before Base64URL (no padding)::

    nonce (12 random bytes) || ciphertext || GCM tag (16 bytes)

The plaintext is a :class:`RequestState` encoded as a compact MessagePack array. The
constant ``b"mrtr/requestState/v1"`` is bound as associated data, so a ciphertext made
with the same key for any other purpose does not pass as a token.

What the token cannot do on its own, and the key-rotation procedure, are described in
``docs/security.md``. Checking that a token matches the request it arrives with
(principal, method, target, arguments) is the engine's job; this module only seals,
unseals and times tokens out.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import math
import os
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .errors import (STATE_EXPIRED, STATE_UNREADABLE, EphemeralKeyWarning, ExpiredRequestState, HandlerError,
                     InvalidParams, InvalidRequestState)
from .jsonrpc import canonical
from .ledger import Slot

__all__ = [
    "FORMAT_VERSION",
    "KEY_SIZE",
    "MARK_SIZE",
    "DEFAULT_TTL",
    "DEFAULT_MAX_TOKEN_LENGTH",
    "RequestState",
    "RequestStateCodec",
    "StateTooLarge",
    "EphemeralKeyWarning",
    "arguments_digest",
    "generate_secret",
]

FORMAT_VERSION = 1
"""Version of the :class:`RequestState` payload format written by this module."""

KEY_SIZE = 32
"""Length of an AES-256 key in bytes."""

DEFAULT_TTL = 300.0
"""Default lifetime of a token in seconds (per round trip)."""

DEFAULT_MAX_TOKEN_LENGTH = 65536
"""Default upper bound on a token's length in characters, in both directions."""

NONCE_SIZE = 12
TAG_SIZE = 16
_AAD = b"mrtr/requestState/v1"
_MAC_KEY_LABEL = b"mrtr/mark-key/v1"
MARK_SIZE = 12
"""Bytes of a mark (:meth:`RequestStateCodec.mark`): 96 bits, 16 characters of Base64URL."""
_DIGEST_SIZE = 16

_log = logging.getLogger("mrtr")

# Only canonical unpadded Base64URL is a token: the URL-safe alphabet, whole quads, then
# optionally two characters (one byte) or three (two bytes), and in a partial quad the
# bits past the last byte zero (a length of 1 mod 4 encodes nothing). Accepting only the
# canonical form makes text and bytes correspond one to one, so no two different strings
# decode to the same token ("AB" and "AA" both decode to b"\0" with Python's decoder).
# RequestStateCodec.unseal checks it in C calls; a regular expression over every character
# of every token cost more than the AES-GCM that authenticates it.
_B64URL_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
# The zero bits past the last byte all sit in the last character: it is one of the 4
# characters whose low 4 bits are zero after 2 characters of a quad (one byte), one of
# the 16 whose low 2 bits are zero after 3 (two bytes). Looking it up replaces encoding
# the decoded bytes again to compare the text.
_CANONICAL_LAST = {2: frozenset(_B64URL_ALPHABET[::16]), 3: frozenset(_B64URL_ALPHABET[::4])}
_TO_URLSAFE = bytes.maketrans(b"+/", b"-_")
_FROM_URLSAFE = bytes.maketrans(b"-_", b"+/")

_MSG_PREFIX = "Invalid requestState: "
_MSG_NOT_STR = _MSG_PREFIX + "requestState must be a string"
_MSG_NOT_B64 = _MSG_PREFIX + "requestState is not valid Base64URL"
_MSG_TOO_SHORT = _MSG_PREFIX + "requestState is too short to be a valid token"
_MSG_AUTH = _MSG_PREFIX + "requestState failed authentication (tampered, or issued under a different key)"
_MSG_MALFORMED = _MSG_PREFIX + "requestState payload is malformed"
_MSG_EXPIRED = _MSG_PREFIX + "requestState has expired; restart the original request"

_GENERATE = 'python -c "import os,base64;print(base64.b64encode(os.urandom(32)).decode())"'

_SECRET_HINT = (
    "set MRTR_SECRET to the standard Base64 of 32 random bytes, the same value on every "
    'instance and worker; generate one with: python -c "import os,base64;'
    'print(base64.b64encode(os.urandom(32)).decode())"'
)


class RequestState(msgspec.Struct, array_like=True, frozen=True):
    """What a token carries.

    ``version`` is the payload format (:data:`FORMAT_VERSION`); ``method`` the JSON-RPC
    method the token was minted for (``tools/call``, ``prompts/get`` or
    ``resources/read``); ``target`` the tool or prompt name or the resource URI;
    ``arguments_digest`` the 16-byte :func:`arguments_digest` of the original arguments;
    ``issued_at`` the mint time in epoch milliseconds; ``principal`` the authenticated
    principal at mint time, ``None`` when unauthenticated; ``ledger`` the conversation's
    slots, answered and pending; ``handler_version`` the version of the handler that
    recorded the ledger (:func:`mrtr.core.versions.handler_version`; empty in tokens from
    before it was kept, which still open: a trailing member with a default, which older
    decoders ignore); ``rounds`` how many rounds of the conversation have paused so far,
    this one included (0 in tokens from before it was kept), so the next request is round
    ``rounds + 1``.
    """

    version: int
    method: str
    target: str
    arguments_digest: bytes
    issued_at: int
    principal: str | None
    ledger: tuple[Slot, ...]
    handler_version: str = ""
    rounds: int = 0


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(RequestState)


def arguments_digest(arguments: dict[str, Any] | None) -> bytes:
    """The 16-byte digest binding a token to the request's arguments.

    The first 16 bytes of SHA-256 over the arguments as JSON with sorted keys, so key
    order does not matter. ``None`` and ``{}`` give the same digest.
    """
    return hashlib.sha256(canonical(arguments or {})).digest()[:_DIGEST_SIZE]


def generate_secret() -> str:
    """A fresh random key as standard Base64, ready to be used as ``MRTR_SECRET``."""
    return base64.b64encode(os.urandom(KEY_SIZE)).decode("ascii")


class StateTooLarge(HandlerError):
    """The conversation's state no longer fits in a token of the allowed length.

    Raised by :meth:`RequestStateCodec.encode` instead of truncating. ``size`` is the
    length the token would have had and ``limit`` the configured maximum, in characters.
    """

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(
            f"requestState would be {size} characters long, more than the limit of {limit}; "
            "keep Step values and answers small (store large data elsewhere and carry a "
            "reference), or raise max_token_length"
        )
        self.size = size
        self.limit = limit


class RequestStateCodec:
    """Seals :class:`RequestState` payloads into tokens and opens them again.

    ``keys`` is a key ring of 32-byte AES-256 keys: ``keys[0]`` seals every new token,
    and a token is accepted if any key of the ring authenticates it, which is what makes
    rotation possible. ``ttl`` (seconds) bounds how long after minting a token is
    accepted; ``max_token_length`` (characters) bounds tokens in both directions;
    ``clock`` returns the current time in epoch seconds.

    An instance is immutable after construction and safe to share between tasks and
    threads.
    """

    __slots__ = ("_aeads", "_sealer", "_mac_keys", "_ttl", "_ttl_ms", "_max_token_length", "_clock")

    def __init__(
        self,
        keys: Sequence[bytes],
        *,
        ttl: float = DEFAULT_TTL,
        max_token_length: int = DEFAULT_MAX_TOKEN_LENGTH,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if isinstance(keys, (bytes, bytearray, memoryview, str)):
            raise TypeError("keys must be a sequence of keys (e.g. [key]), not a single key")
        keys = list(keys)
        if not keys:
            raise ValueError("the key ring needs at least one key")
        for number, key in enumerate(keys, 1):
            if not isinstance(key, (bytes, bytearray)):
                raise TypeError(f"key #{number} must be bytes, not {type(key).__name__}")
            if len(key) != KEY_SIZE:
                raise ValueError(f"key #{number} must be exactly 32 bytes (256 bits), got {len(key)}")
        if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not math.isfinite(ttl) or ttl <= 0:
            raise ValueError(f"ttl must be a finite number of seconds > 0, got {ttl!r}")
        if isinstance(max_token_length, bool) or not isinstance(max_token_length, int) or max_token_length <= 0:
            raise ValueError(f"max_token_length must be a positive int, got {max_token_length!r}")
        self._aeads = tuple(AESGCM(bytes(key)) for key in keys)
        self._sealer = self._aeads[0]
        # Keys of their own for marks (HMAC-SHA256), derived from the ring's: never the AES keys themselves.
        self._mac_keys = tuple(hmac.new(bytes(key), _MAC_KEY_LABEL, hashlib.sha256).digest() for key in keys)
        self._ttl = float(ttl)
        self._ttl_ms = round(ttl * 1000)
        self._max_token_length = max_token_length
        self._clock = clock

    # -- construction -------------------------------------------------------------------

    @classmethod
    def configure(
        cls,
        secret: str | bytes | Sequence[bytes] | None = None,
        *,
        ttl: float | None = None,
        environ: Mapping[str, str] | None = None,
        max_token_length: int = DEFAULT_MAX_TOKEN_LENGTH,
        clock: Callable[[], float] = time.time,
        alone: bool = False,
    ) -> RequestStateCodec:
        """The codec a server uses: explicit values first, then the environment.

        ``secret`` is the key ring: a string in ``MRTR_SECRET`` form (one key, or several
        separated by commas for rotation, each the standard Base64 of exactly 32 bytes;
        the first seals, all unseal), one raw 32-byte key, or a sequence of raw keys.
        Without it, ``MRTR_SECRET`` is read from ``environ`` (``os.environ`` by
        default); when that is unset or blank too, the codec falls back to
        :meth:`ephemeral`, with a warning. ``ttl`` is the token lifetime in seconds;
        without it, ``MRTR_TTL`` (default 300). ``alone`` says this process is the only
        one its clients reach (stdio: one client, one process): a throwaway key then only
        costs what a restart does, and the note says that instead, at ``INFO``.

        Raises :class:`ValueError` naming the variable (and the entry) at fault.
        """
        env = os.environ if environ is None else environ
        if ttl is None:
            ttl = _parse_ttl(env.get("MRTR_TTL"))
        if secret is None:
            keys = _parse_secret(env.get("MRTR_SECRET"))
        elif isinstance(secret, str):
            keys = _parse_secret(secret)
            if not keys:
                raise ValueError("secret is blank; " + _SECRET_HINT)
        elif isinstance(secret, (bytes, bytearray)):
            keys = [bytes(secret)]
        else:
            keys = list(secret)
        if not keys:
            return cls._ephemeral(ttl=ttl, max_token_length=max_token_length, clock=clock, stacklevel=3, alone=alone)
        return cls(keys, ttl=ttl, max_token_length=max_token_length, clock=clock)

    @classmethod
    def ephemeral(
        cls,
        *,
        ttl: float = DEFAULT_TTL,
        max_token_length: int = DEFAULT_MAX_TOKEN_LENGTH,
        clock: Callable[[], float] = time.time,
    ) -> RequestStateCodec:
        """A codec with a fresh random key that lives only as long as this process.

        Emits :class:`EphemeralKeyWarning` and logs a warning on the ``mrtr`` logger:
        tokens minted by this codec are rejected after a restart and by every other
        instance or worker. Fine for tests and single-process development only.
        """
        return cls._ephemeral(ttl=ttl, max_token_length=max_token_length, clock=clock, stacklevel=3)

    @classmethod
    def _ephemeral(
        cls, *, ttl: float, max_token_length: int, clock: Callable[[], float], stacklevel: int, alone: bool = False
    ) -> RequestStateCodec:
        # One line each: it is what an operator sees first.
        if alone:
            message = (
                "MRTR_SECRET is not set: requestState tokens use a key of this process alone, so a conversation "
                "waiting for its client's answers when the server restarts starts over; to keep it across "
                "restarts, set MRTR_SECRET to the output of: " + _GENERATE
            )
        else:
            message = (
                "MRTR_SECRET is not set: requestState tokens use a throwaway key, so they die with a restart and "
                "fail on other instances; set MRTR_SECRET to the output of: " + _GENERATE
            )
        warnings.warn(message, EphemeralKeyWarning, stacklevel=stacklevel)
        _log.log(logging.INFO if alone else logging.WARNING, "%s", message)
        return cls([os.urandom(KEY_SIZE)], ttl=ttl, max_token_length=max_token_length, clock=clock)

    # -- properties ---------------------------------------------------------------------

    @property
    def ttl(self) -> float:
        """How long a token is accepted after it was minted, in seconds."""
        return self._ttl

    @property
    def max_token_length(self) -> int:
        """The longest token, in characters, that is minted or accepted."""
        return self._max_token_length

    # -- sealing ------------------------------------------------------------------------

    def seal(self, plaintext: bytes) -> str:
        """Encrypt and authenticate ``plaintext`` under the first key of the ring.

        Returns Base64URL without padding of ``nonce || ciphertext || tag``, with a fresh
        random nonce on every call, so sealing the same bytes twice gives two tokens.
        """
        nonce = os.urandom(NONCE_SIZE)
        sealed = nonce + self._sealer.encrypt(nonce, plaintext, _AAD)
        # base64.urlsafe_b64encode, without its layers of Python calls (a token per round)
        return binascii.b2a_base64(sealed, newline=False).translate(_TO_URLSAFE).rstrip(b"=").decode("ascii")

    def unseal(self, token: object) -> bytes:
        """Check a token's form and authenticity and return its plaintext.

        Raises :class:`~mrtr.core.errors.InvalidRequestState` when ``token`` is not a string,
        is too long, is not canonical unpadded Base64URL, is too short, or is not
        authenticated by any key of the ring.
        """
        if not isinstance(token, str):
            raise InvalidRequestState(_MSG_NOT_STR)
        if len(token) > self._max_token_length:
            raise InvalidRequestState(
                f"{_MSG_PREFIX}requestState is longer than {self._max_token_length} characters"
            )
        # Canonical unpadded Base64URL only (see _B64URL_ALPHABET), checked here in C calls
        # rather than in a helper of its own: every retry's token passes.
        if not token.isascii():
            raise InvalidRequestState(_MSG_NOT_B64)
        text = token.encode("ascii")
        partial = len(text) % 4
        if text.translate(None, _B64URL_ALPHABET) or partial == 1 or (
                partial and text[-1] not in _CANONICAL_LAST[partial]):  # bits past the last byte set
            raise InvalidRequestState(_MSG_NOT_B64)
        try:
            raw = binascii.a2b_base64(text.translate(_FROM_URLSAFE) + b"=" * (-partial % 4))
        except (binascii.Error, ValueError):  # pragma: no cover - the alphabet, the length and the last character vouched
            raise InvalidRequestState(_MSG_NOT_B64) from None
        if len(raw) <= NONCE_SIZE:
            raise InvalidRequestState(_MSG_TOO_SHORT)
        if len(raw) < NONCE_SIZE + TAG_SIZE:
            raise InvalidRequestState(_MSG_AUTH, data={"reason": STATE_UNREADABLE})
        nonce = raw[:NONCE_SIZE]
        body = raw[NONCE_SIZE:]
        for aead in self._aeads:
            try:
                return aead.decrypt(nonce, body, _AAD)
            except InvalidTag:
                continue
        raise InvalidRequestState(_MSG_AUTH, data={"reason": STATE_UNREADABLE})

    # -- marks --------------------------------------------------------------------------

    def mark(self, purpose: bytes, data: bytes) -> bytes:
        """A :data:`MARK_SIZE`-byte mark of ``data`` that only a holder of the key ring can make.

        For what the server hands a client in the clear and must later know it made (an
        SSE event id): an HMAC-SHA256 under a key derived from the ring's first key, over
        ``purpose`` (so a mark made for one use passes for no other) and ``data``. Every
        instance with the same ``MRTR_SECRET`` makes the same mark.
        """
        return hmac.new(self._mac_keys[0], purpose + b"\0" + data, hashlib.sha256).digest()[:MARK_SIZE]

    def marked(self, purpose: bytes, data: bytes, mark: bytes) -> bool:
        """Whether ``mark`` is :meth:`mark` of ``purpose`` and ``data`` under any key of the ring (rotation)."""
        message = purpose + b"\0" + data
        return any(hmac.compare_digest(hmac.new(key, message, hashlib.sha256).digest()[:MARK_SIZE], mark)
                   for key in self._mac_keys)

    # -- payloads -----------------------------------------------------------------------

    def encode(self, state: RequestState) -> str:
        """Seal ``state`` into a token.

        Raises :class:`StateTooLarge` when the token would be longer than
        :attr:`max_token_length`; the state is never truncated.
        """
        try:
            plaintext = _encoder.encode(state)
        except OverflowError:
            # Step values are checked when recorded and form answers when merged, so what is left is
            # another answer the client sent (a sampling result's _meta, say) with an integer past 64 bits.
            raise InvalidParams("an answer in inputResponses holds an integer outside the 64-bit range a "
                                "requestState can carry") from None
        # the characters of the unpadded Base64URL of nonce, ciphertext and tag
        size = (4 * (NONCE_SIZE + len(plaintext) + TAG_SIZE) + 2) // 3
        if size > self._max_token_length:
            raise StateTooLarge(size, self._max_token_length)
        return self.seal(plaintext)

    def decode(self, token: object) -> RequestState:
        """Open a token and return the state it carries.

        Every failure is an :class:`~mrtr.core.errors.InvalidRequestState` (JSON-RPC -32602)
        whose message starts with ``"Invalid requestState: "``; a token that is
        authentic but older than :attr:`ttl` raises its subclass
        :class:`~mrtr.core.errors.ExpiredRequestState`. A token is still accepted at exactly
        ``issued_at + ttl``.
        """
        plaintext = self.unseal(token)
        try:
            state = _decoder.decode(plaintext)
        except msgspec.DecodeError:
            raise InvalidRequestState(_MSG_MALFORMED) from None
        if state.version != FORMAT_VERSION:
            raise InvalidRequestState(_MSG_MALFORMED)
        if state.issued_at + self._ttl_ms < int(self._clock() * 1000):
            raise ExpiredRequestState(_MSG_EXPIRED, data={"reason": STATE_EXPIRED})
        return state

    def expires_at(self, state: RequestState) -> float:
        """When a token carrying ``state`` stops being accepted, in epoch seconds."""
        return (state.issued_at + self._ttl_ms) / 1000

    def mint(
        self,
        *,
        method: str,
        target: str,
        arguments: dict[str, Any] | None,
        principal: str | None,
        ledger: Sequence[Slot],
        digest: bytes | None = None,
        handler_version: str = "",
        rounds: int = 1,
    ) -> str:
        """Build a :class:`RequestState` issued now for this request and seal it.

        ``digest``, when the caller already computed it, is ``arguments_digest(arguments)``;
        ``handler_version`` the version of the handler that recorded ``ledger``; ``rounds``
        the rounds paused so far, this one included.
        """
        state = RequestState(
            version=FORMAT_VERSION,
            method=method,
            target=target,
            arguments_digest=arguments_digest(arguments) if digest is None else digest,
            issued_at=int(self._clock() * 1000),
            principal=principal,
            ledger=tuple(ledger),
            handler_version=handler_version,
            rounds=rounds,
        )
        return self.encode(state)

    def __repr__(self) -> str:
        return (
            f"RequestStateCodec(<{len(self._aeads)} key(s)>, ttl={self._ttl!r}, "
            f"max_token_length={self._max_token_length!r})"
        )


def _parse_secret(value: str | None) -> list[bytes]:
    """The keys in an ``MRTR_SECRET`` value; empty when unset or blank."""
    if value is None:
        return []
    keys: list[bytes] = []
    for number, entry in enumerate(value.split(","), 1):
        entry = entry.strip()
        if not entry:
            continue
        try:
            key = base64.b64decode(entry, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(
                f"MRTR_SECRET entry #{number} is not valid standard Base64; {_SECRET_HINT}"
            ) from None
        if len(key) != KEY_SIZE:
            raise ValueError(
                f"MRTR_SECRET entry #{number} must decode to exactly 32 bytes (256 bits), got {len(key)}"
            )
        keys.append(key)
    return keys


def _parse_ttl(value: str | None) -> float:
    """The ``MRTR_TTL`` value in seconds, or the default when unset or blank."""
    if value is None or not value.strip():
        return DEFAULT_TTL
    try:
        ttl = float(value)
    except ValueError:
        ttl = math.nan
    if not math.isfinite(ttl) or ttl <= 0:
        raise ValueError(f"MRTR_TTL must be a positive, finite number of seconds, got {value!r}")
    return ttl
