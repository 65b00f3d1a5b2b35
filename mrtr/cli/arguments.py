"""Argument types and the usage error shared by the ``mrtr`` commands."""

from __future__ import annotations

import argparse

__all__ = ["UsageError", "port", "positive_int", "seconds", "lease", "ttl", "store_url"]


class UsageError(Exception):
    """A mistake on the command line (exit code 2)."""


def port(text: str) -> int:
    """A TCP port, 0 to 65535 (0: the system picks a free one)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid port {text!r}: not an integer") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"invalid port {value}: must be between 0 and 65535")
    return value


def positive_int(text: str) -> int:
    """A count of at least 1 (``--workers``, ``--max-rounds``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid count {text!r}: not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"invalid count {value}: must be at least 1")
    return value


def seconds(text: str) -> float:
    """A finite number of seconds above 0 (``--timeout``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of seconds above 0")
    return value


def lease(text: str) -> float:
    """A task lease: a positive number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text!r}")
    return value


def ttl(text: str) -> float:
    """A task TTL: seconds, or ``none`` for no limit."""
    from ..carriers.tasks.host import parse_ttl

    try:
        return parse_ttl(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def store_url(text: str) -> str:
    """A store URL as ``--store`` takes it: any URL but one carrying a password.

    A command line is readable by every user of the machine (``ps``), so a password
    goes in ``MRTR_REDIS_PASSWORD``, or in the URL given in ``MRTR_STORE``.
    """
    import urllib.parse

    scheme, separator, rest = text.partition("://")
    authority = rest.split("/", 1)[0].split("?", 1)[0] if separator else ""
    userinfo = authority.rpartition("@")[0]
    query = urllib.parse.parse_qsl(rest.partition("?")[2]) if separator else []
    if ":" in userinfo or any(name.lower() == "password" for name, _ in query):
        raise argparse.ArgumentTypeError(
            f"the {scheme} URL carries a password, which every user of this machine can read on the command line; "
            "give it in MRTR_REDIS_PASSWORD (or the whole URL in MRTR_STORE) instead")
    return text
