"""Tests for mrtr.core.codec: the sealed requestState token."""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import string
import time

import msgspec
import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mrtr.core.errors import INVALID_PARAMS, ExpiredRequestState, HandlerError, InvalidRequestState
from mrtr.core.kinds import Kind
from mrtr.core.ledger import Slot
from mrtr.core.codec import (
    DEFAULT_TTL,
    FORMAT_VERSION,
    MARK_SIZE,
    EphemeralKeyWarning,
    RequestState,
    RequestStateCodec,
    StateTooLarge,
    arguments_digest,
    generate_secret,
)

from .conftest import FakeClock, examples

K1 = b"0123456789abcdef0123456789abcdef"
K2 = bytes(range(32))
K3 = bytes(range(100, 132))
T0 = 1_781_524_800.0  # seconds
T0_MS = 1_781_524_800_000

AUTH = "Invalid requestState: requestState failed authentication (tampered, or issued under a different key)"
NOT_B64 = "Invalid requestState: requestState is not valid Base64URL"
TOO_SHORT = "Invalid requestState: requestState is too short to be a valid token"
MALFORMED = "Invalid requestState: requestState payload is malformed"
EXPIRED = "Invalid requestState: requestState has expired; restart the original request"
B64URL_ALPHABET = string.ascii_uppercase + string.ascii_lowercase + string.digits + "-_"


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def fp(n: int) -> bytes:
    return bytes([n]) * 16


LEDGER = (
    Slot(Kind.ELICIT, fp(1), None, True, [0, {"email": "user@example.com"}]),
    Slot(Kind.SAMPLE, fp(2), "summary", True, {"role": "assistant", "content": {"type": "text", "text": "hi"}}),
    Slot(Kind.STEP, fp(3), None, True, None),  # a Step that returned None
    Slot(
        Kind.STEP,
        fp(4),
        "compute",
        True,
        {
            "n": -(2**63),
            "big": 2**64 - 1,
            "f": 1.5,
            "t": True,
            "none": None,
            "l": [1, "two", [3.0]],
            "b": b"\x00\xff",
        },
    ),
    Slot(Kind.ELICIT, fp(5)),  # pending
)


def make_state(**changes: object) -> RequestState:
    fields: dict[str, object] = dict(
        version=FORMAT_VERSION,
        method="tools/call",
        target="onboard",
        arguments_digest=arguments_digest({"plan": "pro"}),
        issued_at=T0_MS,
        principal="user-123",
        ledger=LEDGER,
    )
    fields.update(changes)
    return RequestState(**fields)  # type: ignore[arg-type]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def codec(clock: FakeClock) -> RequestStateCodec:
    return RequestStateCodec([K1], clock=clock)


@pytest.fixture
def token(codec: RequestStateCodec) -> str:
    return codec.encode(make_state())


def assert_invalid(codec: RequestStateCodec, token: object, message: str | None = None) -> InvalidRequestState:
    with pytest.raises(InvalidRequestState) as info:
        codec.decode(token)
    err = info.value
    assert err.code == INVALID_PARAMS == -32602
    assert err.message.startswith("Invalid requestState: ")
    if message is not None:
        assert err.message == message
    return err


# -- round trip ----------------------------------------------------------------------------


@pytest.mark.parametrize("principal", [None, "user-123"])
def test_round_trip_preserves_every_field(codec: RequestStateCodec, principal: str | None) -> None:
    state = make_state(principal=principal)
    decoded = codec.decode(codec.encode(state))
    assert decoded == state
    assert decoded.principal == principal
    assert decoded.ledger[0].answer == [0, {"email": "user@example.com"}]
    assert decoded.ledger[1].key == "summary"
    assert decoded.ledger[2].answered is True and decoded.ledger[2].answer is None
    assert decoded.ledger[3].answer["b"] == b"\x00\xff"
    assert decoded.ledger[3].answer["big"] == 2**64 - 1
    assert decoded.ledger[4].answered is False and decoded.ledger[4].answer is None
    assert [s.fingerprint for s in decoded.ledger] == [fp(i) for i in range(1, 6)]


def test_round_trip_of_an_empty_ledger_with_resource_target(codec: RequestStateCodec) -> None:
    state = make_state(method="resources/read", target="file:///readme", ledger=(), principal=None)
    assert codec.decode(codec.encode(state)) == state


def test_mint_fills_in_version_time_and_digest(codec: RequestStateCodec, clock: FakeClock) -> None:
    clock.now = T0 + 0.123
    token = codec.mint(
        method="prompts/get", target="greet", arguments={"b": 1, "a": [2]}, principal="alice", ledger=list(LEDGER[:1])
    )
    state = codec.decode(token)
    assert state.version == FORMAT_VERSION
    assert state.method == "prompts/get"
    assert state.target == "greet"
    assert state.issued_at == T0_MS + 123
    assert state.principal == "alice"
    assert state.arguments_digest == arguments_digest({"a": [2], "b": 1})
    assert state.ledger == LEDGER[:1]


def test_arguments_digest() -> None:
    d = arguments_digest({"plan": "pro", "seats": 3})
    assert len(d) == 16
    assert d == arguments_digest({"seats": 3, "plan": "pro"})  # key order does not matter
    assert d != arguments_digest({"plan": "pro", "seats": 4})
    assert arguments_digest(None) == arguments_digest({})
    assert arguments_digest({}) != arguments_digest({"a": None})
    assert arguments_digest({"b": 1, "a": 2}) == hashlib.sha256(b'{"a":2,"b":1}').digest()[:16]


def test_two_encodes_of_the_same_payload_differ(codec: RequestStateCodec) -> None:
    state = make_state()
    a, b = codec.encode(state), codec.encode(state)
    assert a != b
    assert unb64url(a)[:12] != unb64url(b)[:12]  # fresh nonce
    assert codec.decode(a) == codec.decode(b) == state


def test_token_is_canonical_unpadded_base64url(token: str) -> None:
    assert set(token) <= set(B64URL_ALPHABET)
    assert b64url(unb64url(token)) == token


def test_ephemeral_codec_round_trips() -> None:
    with pytest.warns(EphemeralKeyWarning):
        codec = RequestStateCodec.ephemeral()
    state = make_state(method="prompts/get", target="greet", issued_at=int(time.time() * 1000))
    assert codec.decode(codec.encode(state)) == state


# -- opacity -------------------------------------------------------------------------------


def test_token_is_opaque(codec: RequestStateCodec) -> None:
    secrets = ["tools/call", "onboard", "user-123", "user@example.com", "assistant", "compute", "summary"]
    token = codec.encode(make_state())
    raw = unb64url(token)
    for secret in secrets:
        assert secret not in token
        assert secret.encode() not in raw


# -- tampering -----------------------------------------------------------------------------


def test_every_single_bit_flip_is_rejected(codec: RequestStateCodec, token: str) -> None:
    raw = bytearray(unb64url(token))
    checked = 0
    for i in range(len(raw)):
        for bit in range(8):
            raw[i] ^= 1 << bit
            assert_invalid(codec, b64url(bytes(raw)), AUTH)
            raw[i] ^= 1 << bit
            checked += 1
    assert checked == 8 * len(raw) > 8 * (12 + 16)
    assert codec.decode(b64url(bytes(raw))) == make_state()  # the loop restored every bit


def test_every_character_substitution_is_rejected(codec: RequestStateCodec, token: str) -> None:
    # every position, every other character of the alphabet: either the text is no
    # longer canonical Base64URL or it decodes to different bytes
    for i, original in enumerate(token):
        for c in B64URL_ALPHABET:
            if c == original:
                continue
            err = assert_invalid(codec, token[:i] + c + token[i + 1 :])
            assert err.message in (AUTH, NOT_B64)


def test_non_canonical_last_character_is_rejected(codec: RequestStateCodec) -> None:
    # Find a token whose length leaves a partial quad; its last character has spare bits.
    for k in range(3):
        token = codec.encode(make_state(principal="u" * k))
        if len(token) % 4:
            break
    assert len(token) % 4 in (2, 3)
    last = B64URL_ALPHABET.index(token[-1])
    spare = 0b1111 if len(token) % 4 == 2 else 0b11
    assert last & spare == 0  # we only mint canonical tokens
    sibling = B64URL_ALPHABET[last | spare]
    forged = token[:-1] + sibling
    assert unb64url(forged) == unb64url(token)  # Python's decoder alone would accept it
    assert_invalid(codec, forged, NOT_B64)


def test_every_truncation_is_rejected(codec: RequestStateCodec, token: str) -> None:
    for n in range(len(token)):
        assert_invalid(codec, token[:n])
    raw = unb64url(token)
    for n in range(len(raw)):
        err = assert_invalid(codec, b64url(raw[:n]))
        assert err.message == (TOO_SHORT if n <= 12 else AUTH)


@pytest.mark.parametrize("suffix", [b"\x00", b"\x01", b"\x00" * 16, os.urandom(3), os.urandom(40)])
def test_extensions_are_rejected(codec: RequestStateCodec, token: str, suffix: bytes) -> None:
    assert_invalid(codec, b64url(unb64url(token) + suffix), AUTH)
    assert_invalid(codec, b64url(suffix + unb64url(token)), AUTH)


@pytest.mark.parametrize("suffix", ["A", "AA", "AAAA", "-_-_"])
def test_text_extensions_are_rejected(codec: RequestStateCodec, token: str, suffix: str) -> None:
    assert_invalid(codec, token + suffix)


def test_token_under_another_key_is_rejected(codec: RequestStateCodec, clock: FakeClock) -> None:
    other = RequestStateCodec([K2], clock=clock)
    assert_invalid(codec, other.encode(make_state()), AUTH)


def test_ciphertext_without_the_associated_data_is_rejected(codec: RequestStateCodec) -> None:
    plaintext = msgspec.msgpack.encode(make_state())
    nonce = os.urandom(12)
    assert_invalid(codec, b64url(nonce + AESGCM(K1).encrypt(nonce, plaintext, None)), AUTH)


def test_key_rotation(clock: FakeClock) -> None:
    a = RequestStateCodec([K1], clock=clock)
    b = RequestStateCodec([K2, K1], clock=clock)
    c = RequestStateCodec([K2], clock=clock)
    old = a.encode(make_state())
    assert b.decode(old) == make_state()
    assert_invalid(c, old, AUTH)
    new = b.encode(make_state())
    assert c.decode(new) == make_state()  # b seals with its first key
    assert_invalid(a, new, AUTH)
    three = RequestStateCodec([K3, K2, K1], clock=clock)
    assert three.decode(old) == three.decode(new) == make_state()


# -- malformed input -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "not/base64+url!",
        "abc=",
        "AAAAAAAAAAAAAAAAAAAA==",
        "a",
        "AAAAA",
        " AAAAAAAAAAAAAAAAAAAA",
        "AAAA AAAAAAAAAAAAAAAA",
        "AAAAAAAAAAAAAAAAAAAA\n",
        "AAAAAAAAAAAAAAAAAAAA\t",
        "AAAAAAAAAAAAAAAAAAAé",
        "ＡＡＡＡＡＡＡＡＡＡＡＡＡＡＡＡＡＡＡＡ",
        "AAAAAAAAAAAAAAAAAAA٣",
        "AAAAAAAAAAAAAAAAAAA\x00",
        "+/+/+/+/+/+/+/+/+/+/",
    ],
)
def test_non_base64url_is_rejected(codec: RequestStateCodec, text: str) -> None:
    assert_invalid(codec, text, NOT_B64)


@pytest.mark.parametrize("text", ["", "AA", "AAAA", b64url(b"\0" * 4), b64url(b"\0" * 12)])
def test_too_short_is_rejected(codec: RequestStateCodec, text: str) -> None:
    assert_invalid(codec, text, TOO_SHORT)


@pytest.mark.parametrize("n", [13, 20, 27, 28, 29, 64])
def test_short_garbage_fails_authentication(codec: RequestStateCodec, n: int) -> None:
    assert_invalid(codec, b64url(b"\0" * n), AUTH)


@pytest.mark.parametrize("token", [None, 5, 5.0, b"x", b"AAAA", bytearray(b"AAAA"), {}, [], ("a",), True])
def test_non_string_token_is_rejected(codec: RequestStateCodec, token: object) -> None:
    assert_invalid(codec, token, "Invalid requestState: requestState must be a string")


@pytest.mark.parametrize(
    "plaintext",
    [
        b"not a msgpack payload",
        b"",
        b"\xc1",
        msgspec.msgpack.encode({"method": "tools/call"}),
        msgspec.msgpack.encode([1, "tools/call", "onboard", b"\0" * 16, T0_MS, None]),  # too short
        msgspec.msgpack.encode([1, "tools/call", 7, b"\0" * 16, T0_MS, None, []]),  # wrong type
        msgspec.msgpack.encode([1, "tools/call", "onboard", b"\0" * 16, T0_MS, None, [[0]]]),  # bad slot
        msgspec.msgpack.encode(make_state()) + b"\x00",  # trailing data
    ],
)
def test_sealed_garbage_is_malformed(codec: RequestStateCodec, plaintext: bytes) -> None:
    assert_invalid(codec, codec.seal(plaintext), MALFORMED)


@pytest.mark.parametrize("version", [0, 2, -1])
def test_other_payload_versions_are_malformed(codec: RequestStateCodec, version: int) -> None:
    assert_invalid(codec, codec.encode(make_state(version=version)), MALFORMED)


def test_seal_and_unseal_are_inverse(codec: RequestStateCodec) -> None:
    for plaintext in (b"", b"x", os.urandom(1000)):
        assert codec.unseal(codec.seal(plaintext)) == plaintext


# -- expiry --------------------------------------------------------------------------------


def test_expiry_boundary(codec: RequestStateCodec, clock: FakeClock) -> None:
    token = codec.mint(method="tools/call", target="onboard", arguments={}, principal=None, ledger=())
    clock.now = T0 + DEFAULT_TTL
    assert codec.decode(token).issued_at == T0_MS  # exactly issued_at + ttl: accepted
    clock.now = T0 + DEFAULT_TTL + 0.001
    with pytest.raises(ExpiredRequestState) as info:
        codec.decode(token)
    assert isinstance(info.value, InvalidRequestState)
    assert info.value.code == -32602
    assert "expired" in info.value.message
    assert info.value.message == EXPIRED


def test_custom_ttl(clock: FakeClock) -> None:
    codec = RequestStateCodec([K1], ttl=0.5, clock=clock)
    assert codec.ttl == 0.5
    token = codec.encode(make_state())
    clock.now = T0 + 0.5
    codec.decode(token)
    clock.now = T0 + 0.501
    with pytest.raises(ExpiredRequestState):
        codec.decode(token)


def test_authentication_is_checked_before_expiry(codec: RequestStateCodec, clock: FakeClock) -> None:
    raw = bytearray(unb64url(codec.encode(make_state())))
    raw[-1] ^= 1
    clock.now = T0 + 10 * DEFAULT_TTL
    assert_invalid(codec, b64url(bytes(raw)), AUTH)


def test_token_from_the_future_is_accepted(codec: RequestStateCodec, clock: FakeClock) -> None:
    # small clock skew between workers must not break conversations
    token = codec.encode(make_state(issued_at=T0_MS + 5_000))
    assert codec.decode(token).issued_at == T0_MS + 5_000


# -- size limits ---------------------------------------------------------------------------


def test_overlong_token_is_refused_before_decoding(clock: FakeClock) -> None:
    codec = RequestStateCodec([K1], max_token_length=100, clock=clock)
    # garbage that would otherwise fail as Base64URL reports the length instead
    assert_invalid(codec, "!" * 101, "Invalid requestState: requestState is longer than 100 characters")
    big = RequestStateCodec([K1], clock=clock)
    valid = big.encode(make_state())
    assert len(valid) > 100
    assert_invalid(codec, valid, "Invalid requestState: requestState is longer than 100 characters")


def test_token_at_exactly_the_limit_is_minted_and_accepted(clock: FakeClock) -> None:
    probe = RequestStateCodec([K1], clock=clock).encode(make_state())
    exact = RequestStateCodec([K1], max_token_length=len(probe), clock=clock)
    token = exact.encode(make_state())
    assert len(token) == len(probe) == exact.max_token_length
    assert exact.decode(token) == make_state()
    tight = RequestStateCodec([K1], max_token_length=len(probe) - 1, clock=clock)
    with pytest.raises(StateTooLarge):
        tight.encode(make_state())


def test_encode_refuses_an_oversized_ledger(clock: FakeClock) -> None:
    codec = RequestStateCodec([K1], max_token_length=2000, clock=clock)
    ledger = tuple(Slot(Kind.STEP, fp(i), None, True, "x" * 100) for i in range(30))
    with pytest.raises(StateTooLarge) as info:
        codec.encode(make_state(ledger=ledger))
    err = info.value
    assert isinstance(err, HandlerError)
    assert err.limit == 2000 and err.size > 2000
    assert str(err.size) in err.message and "2000" in err.message
    assert "small" in err.message
    # the size it reports is the size the token would have had
    assert err.size == len(RequestStateCodec([K1], clock=clock).encode(make_state(ledger=ledger)))


def test_growth_per_recorded_answer(codec: RequestStateCodec) -> None:
    answer = [0, {"v": "x"}]
    content = len(msgspec.msgpack.encode({"v": "x"}))
    content_chars = content * 4 / 3
    sizes = {}
    for n in (0, 1, 10, 50, 200):
        ledger = tuple(Slot(Kind.ELICIT, fp(i % 256), None, True, answer) for i in range(n))
        sizes[n] = len(codec.encode(make_state(ledger=ledger)))
    for n in (1, 10, 50, 200):
        per_slot = (sizes[n] - sizes[0]) / n
        overhead = per_slot - content_chars
        assert overhead <= 64, (
            f"{n} slots: {per_slot:.2f} chars per slot, {overhead:.2f} beyond the answer's "
            f"content ({content_chars:.2f} chars)"
        )
    per_slot = (sizes[200] - sizes[0]) / 200
    print(f"token growth: {per_slot:.2f} chars per recorded answer ({per_slot - content_chars:.2f} overhead)")


# -- construction and configuration --------------------------------------------------------


@pytest.mark.parametrize("bad", [b"", b"x" * 16, b"x" * 31, b"x" * 33, b"x" * 64])
def test_keys_must_be_32_bytes(bad: bytes) -> None:
    with pytest.raises(ValueError, match=r"32 bytes \(256 bits\)"):
        RequestStateCodec([bad])
    with pytest.raises(ValueError, match=r"32 bytes \(256 bits\)"):
        RequestStateCodec([K1, bad])


def test_key_ring_shape() -> None:
    with pytest.raises(ValueError, match="at least one key"):
        RequestStateCodec([])
    with pytest.raises(TypeError):
        RequestStateCodec(K1)  # a single key, not a ring
    with pytest.raises(TypeError):
        RequestStateCodec(["0123456789abcdef0123456789abcdef"])  # type: ignore[list-item]


@pytest.mark.parametrize("ttl", [0, -1, float("nan"), float("inf")])
def test_ttl_must_be_positive(ttl: float) -> None:
    with pytest.raises(ValueError, match="ttl"):
        RequestStateCodec([K1], ttl=ttl)


@pytest.mark.parametrize("limit", [0, -5, 1.5])
def test_max_token_length_must_be_positive(limit: int) -> None:
    with pytest.raises(ValueError, match="max_token_length"):
        RequestStateCodec([K1], max_token_length=limit)


def test_configure_from_env_single_key(clock: FakeClock) -> None:
    codec = RequestStateCodec.configure(environ={"MRTR_SECRET": base64.b64encode(K1).decode()}, clock=clock)
    assert codec.ttl == DEFAULT_TTL
    assert codec.max_token_length == 65536
    assert RequestStateCodec([K1], clock=clock).decode(codec.encode(make_state())) == make_state()


def test_configure_from_env_key_ring(clock: FakeClock) -> None:
    secret = f" {base64.b64encode(K2).decode()} ,, {base64.b64encode(K1).decode()}\n,"
    codec = RequestStateCodec.configure(environ={"MRTR_SECRET": secret}, clock=clock)
    old = RequestStateCodec([K1], clock=clock).encode(make_state())
    assert codec.decode(old) == make_state()
    new = codec.encode(make_state())
    assert RequestStateCodec([K2], clock=clock).decode(new) == make_state()


@pytest.mark.parametrize(
    "secret",
    ["///not-base64!", base64.urlsafe_b64encode(b"\xfb" * 32).decode(), base64.b64encode(K1).decode().rstrip("=")],
)
def test_configure_from_env_rejects_non_base64(secret: str) -> None:
    with pytest.raises(ValueError, match="MRTR_SECRET entry #1 is not valid standard Base64"):
        RequestStateCodec.configure(environ={"MRTR_SECRET": secret})


def test_configure_from_env_numbers_the_faulty_entry() -> None:
    good = base64.b64encode(K1).decode()
    with pytest.raises(ValueError, match="entry #3 is not valid standard Base64"):
        RequestStateCodec.configure(environ={"MRTR_SECRET": f"{good},{good},%%%"})
    with pytest.raises(ValueError, match=r"entry #2 must decode to exactly 32 bytes \(256 bits\), got 9"):
        RequestStateCodec.configure(environ={"MRTR_SECRET": f"{good},{base64.b64encode(b'too-short').decode()}"})


@pytest.mark.parametrize("n", [1, 9, 16, 31, 33, 48])
def test_configure_from_env_rejects_wrong_length(n: int) -> None:
    secret = base64.b64encode(b"k" * n).decode()
    expected = rf"MRTR_SECRET entry #1 must decode to exactly 32 bytes \(256 bits\), got {n}$"
    with pytest.raises(ValueError, match=expected):
        RequestStateCodec.configure(environ={"MRTR_SECRET": secret})


@pytest.mark.parametrize("env", [{}, {"MRTR_SECRET": ""}, {"MRTR_SECRET": "   "}, {"MRTR_SECRET": " , ,"}])
def test_configure_from_env_blank_falls_back_to_an_ephemeral_key(env: dict[str, str], caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="mrtr"):
        with pytest.warns(EphemeralKeyWarning, match="MRTR_SECRET") as record:
            codec = RequestStateCodec.configure(environ=env)
    text = str(record[0].message)
    assert "restart" in text and "instances" in text and "base64.b64encode(os.urandom(32))" in text
    assert record[0].filename == __file__  # attributed to the caller
    assert any("MRTR_SECRET" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)
    token = codec.mint(method="tools/call", target="t", arguments=None, principal=None, ledger=())
    assert codec.decode(token).target == "t"
    with pytest.warns(EphemeralKeyWarning):
        other = RequestStateCodec.configure(environ=env)
    assert_invalid(other, token, AUTH)  # a fresh key each time


def test_a_throwaway_key_of_a_process_alone_says_only_what_a_restart_costs(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="mrtr"):
        with pytest.warns(EphemeralKeyWarning) as record:
            RequestStateCodec.configure(environ={}, alone=True)
    text = str(record[0].message)
    assert "restarts" in text and "instances" not in text and "base64.b64encode(os.urandom(32))" in text
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [(logging.INFO, text)]


def test_ephemeral_warns_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="mrtr"):
        with pytest.warns(EphemeralKeyWarning) as record:
            RequestStateCodec.ephemeral(ttl=10)
    assert record[0].filename == __file__
    assert [r.name for r in caplog.records] == ["mrtr"]


def test_configure_from_env_reads_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MRTR_SECRET", base64.b64encode(K1).decode())
    monkeypatch.setenv("MRTR_TTL", "42")
    codec = RequestStateCodec.configure()
    assert codec.ttl == 42.0
    assert RequestStateCodec([K1]).unseal(codec.seal(b"hi")) == b"hi"


@pytest.mark.parametrize(
    ("value", "expected"),
    [("60", 60.0), ("0.25", 0.25), (" 900 ", 900.0), ("1e3", 1000.0), ("", DEFAULT_TTL), ("  ", DEFAULT_TTL)],
)
def test_configure_from_env_ttl(value: str, expected: float) -> None:
    env = {"MRTR_SECRET": base64.b64encode(K1).decode(), "MRTR_TTL": value}
    assert RequestStateCodec.configure(environ=env).ttl == expected


@pytest.mark.parametrize("value", ["abc", "0", "-5", "nan", "inf", "-inf", "5s", "PT5M"])
def test_configure_from_env_rejects_bad_ttl(value: str) -> None:
    env = {"MRTR_SECRET": base64.b64encode(K1).decode(), "MRTR_TTL": value}
    with pytest.raises(ValueError, match="MRTR_TTL"):
        RequestStateCodec.configure(environ=env)


def test_configure_from_env_keyword_arguments_override(clock: FakeClock) -> None:
    env = {"MRTR_SECRET": base64.b64encode(K1).decode(), "MRTR_TTL": "60"}
    codec = RequestStateCodec.configure(environ=env, ttl=5.0, clock=clock, max_token_length=1000)
    assert codec.ttl == 5.0 and codec.max_token_length == 1000
    token = codec.mint(method="tools/call", target="t", arguments=None, principal=None, ledger=())
    assert codec.decode(token).issued_at == T0_MS  # the injected clock was used


def test_generate_secret_is_a_usable_key() -> None:
    secret = generate_secret()
    assert len(base64.b64decode(secret, validate=True)) == 32
    assert secret != generate_secret()
    RequestStateCodec.configure(environ={"MRTR_SECRET": secret})


# -- property-based ------------------------------------------------------------------------

_hyp = settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@_hyp
@given(text=st.one_of(st.text(), st.text(alphabet=B64URL_ALPHABET), st.text(alphabet=B64URL_ALPHABET + "=+/ \n")))
def test_arbitrary_text_never_escapes_as_another_error(codec: RequestStateCodec, text: str) -> None:
    try:
        result = codec.decode(text)
    except InvalidRequestState as err:
        assert err.message.startswith("Invalid requestState: ")
    else:
        assert isinstance(result, RequestState)


def _builtins_strategy(allow_nan: bool) -> st.SearchStrategy[object]:
    scalars = (
        st.none()
        | st.booleans()
        | st.integers(-(2**63), 2**64 - 1)
        | st.floats(allow_nan=allow_nan)
        | st.text(max_size=8)
        | st.binary(max_size=8)
    )
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
        max_leaves=12,
    )


_builtins = _builtins_strategy(allow_nan=True)
_arrays_of_seven = st.lists(_builtins, min_size=7, max_size=7)


@_hyp
@given(
    blob=st.one_of(
        st.binary(max_size=200),
        _builtins.map(msgspec.msgpack.encode),
        _arrays_of_seven.map(msgspec.msgpack.encode),
    ),
    sealed=st.booleans(),
)
def test_arbitrary_blobs_never_escape_as_another_error(codec: RequestStateCodec, blob: bytes, sealed: bool) -> None:
    token = codec.seal(blob) if sealed else b64url(blob)
    try:
        result = codec.decode(token)
    except InvalidRequestState as err:
        if sealed:
            assert err.message in (MALFORMED, EXPIRED)
        else:
            assert err.message in (TOO_SHORT, AUTH)
    else:
        assert sealed and isinstance(result, RequestState)


_slots = st.builds(
    Slot,
    kind=st.sampled_from(list(Kind)).map(int),
    fingerprint=st.binary(min_size=16, max_size=16),
    key=st.none() | st.text(max_size=10),
    answered=st.booleans(),
    answer=_builtins_strategy(allow_nan=False),  # NaN != NaN would spoil the equality check
)


@_hyp
@given(
    method=st.sampled_from(["tools/call", "prompts/get", "resources/read"]),
    target=st.text(),
    arguments=st.none() | st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=4),
    principal=st.none() | st.text(),
    ledger=st.lists(_slots, max_size=5),
)
def test_arbitrary_states_round_trip(
    codec: RequestStateCodec,
    method: str,
    target: str,
    arguments: dict[str, object] | None,
    principal: str | None,
    ledger: list[Slot],
) -> None:
    token = codec.mint(method=method, target=target, arguments=arguments, principal=principal, ledger=ledger)
    state = codec.decode(token)
    assert (state.method, state.target, state.principal) == (method, target, principal)
    assert state.arguments_digest == arguments_digest(arguments)
    assert state.ledger == tuple(ledger)


def test_a_mark_is_made_only_with_the_key_ring_and_for_its_purpose() -> None:
    codec, other = RequestStateCodec([K1]), RequestStateCodec([K2])
    mark = codec.mark(b"event", b"session\nnode\nMQ")
    assert len(mark) == MARK_SIZE and codec.mark(b"event", b"session\nnode\nMQ") == mark  # the same on every instance
    assert codec.marked(b"event", b"session\nnode\nMQ", mark)
    assert not codec.marked(b"event", b"session\nnode\nMg", mark)  # another request
    assert not codec.marked(b"other", b"session\nnode\nMQ", mark)  # another purpose
    assert not other.marked(b"event", b"session\nnode\nMQ", mark)  # another key
    assert not codec.marked(b"event", b"session\nnode\nMQ", mark[:-1])
    assert RequestStateCodec([K2, K1]).marked(b"event", b"session\nnode\nMQ", mark)  # rotation: every key checks
