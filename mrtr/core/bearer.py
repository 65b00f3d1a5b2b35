"""The shape of a bearer token (RFC 6750 §2.1 ``b64token``), one rule for both ends.

The resource server refuses an ``Authorization: Bearer`` credential of any other shape
(:mod:`mrtr.auth.resource`), and the OAuth client refuses to keep or send one
(:mod:`mrtr.client.oauth`): a space, a CR or LF, a quote or a non-ASCII character would
break the header the token travels in, or start another. No I/O.
"""

from __future__ import annotations

import re

__all__ = ["is_bearer_token"]

_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")


def is_bearer_token(text: object) -> bool:
    """Whether ``text`` is a ``b64token``: letters, digits, ``-._~+/``, then any ``=`` padding."""
    return isinstance(text, str) and _B64TOKEN.fullmatch(text) is not None
