"""Where the OAuth client keeps what it got for each server: tokens and client registrations.

One record per MCP server, keyed by the server's canonical URL: the access token, its
expiry, the refresh token, the scopes asked for, and the client registration made with
each authorization server (registrations are bound to the issuer that made them and are
never shown to another). :class:`FileTokenStore` keeps records as files readable and
writable by their owner only, in a directory only its owner can enter; it writes each
file whole (a new file renamed over the old), so a crash never leaves half a record.
:class:`MemoryTokenStore` keeps them for the life of the object.

Nothing here logs a record or puts one in an exception: a record's ``repr`` names its
server only.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from ..core.resource_urls import canonical_url

__all__ = ["FileTokenStore", "MemoryTokenStore", "TokenStore", "default_directory"]


class TokenStore(Protocol):
    """What :class:`mrtr.client.oauth.OAuth` needs to remember a server's tokens across runs."""

    def load(self, server: str) -> dict[str, Any] | None:
        """The record for ``server`` (an MCP endpoint URL), or ``None``."""
        ...

    def save(self, server: str, record: Mapping[str, Any]) -> None:
        """Replace the record for ``server``."""
        ...

    def delete(self, server: str) -> bool:
        """Forget ``server``; whether there was anything to forget."""
        ...


def _key(server: str) -> str:
    return hashlib.sha256(canonical_url(server).encode()).hexdigest()[:40]


class MemoryTokenStore:
    """Records in a dict, for one process (tests, programs that authorize at every start)."""

    def __init__(self) -> None:
        self._records: dict[str, dict[str, Any]] = {}

    def __repr__(self) -> str:
        return f"<MemoryTokenStore of {len(self._records)} server(s)>"

    def load(self, server: str) -> dict[str, Any] | None:
        """The record for ``server``, or ``None``."""
        record = self._records.get(_key(server))
        return json.loads(json.dumps(record)) if record is not None else None

    def save(self, server: str, record: Mapping[str, Any]) -> None:
        """Replace the record for ``server``."""
        self._records[_key(server)] = json.loads(json.dumps(dict(record)))

    def delete(self, server: str) -> bool:
        """Forget ``server``."""
        return self._records.pop(_key(server), None) is not None


def default_directory() -> Path:
    """``$MRTR_TOKENS`` if set, else ``$XDG_STATE_HOME/mrtr/oauth`` (``~/.local/state/mrtr/oauth``)."""
    explicit = os.environ.get("MRTR_TOKENS")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "mrtr" / "oauth"


class FileTokenStore:
    """One JSON file per server in ``directory`` (default :func:`default_directory`), owner-only.

    The directory is created with mode 0700 and each file with mode 0600; an existing
    directory or file that others may read is refused (``PermissionError``) rather than
    used, since whoever can read it holds the user's access to the server.
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_directory()

    def __repr__(self) -> str:
        return f"<FileTokenStore {self.directory}>"

    def _path(self, server: str) -> Path:
        return self.directory / f"{_key(server)}.json"

    def _checked_directory(self) -> None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        mode = self.directory.stat().st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise PermissionError(f"{self.directory} is open to other users (mode {oct(mode & 0o777)}); "
                                  "tokens are kept only where the owner alone can reach them: chmod 700 it")

    def load(self, server: str) -> dict[str, Any] | None:
        """The record for ``server``, or ``None`` (also for a file that is no record)."""
        path = self._path(server)
        try:
            mode = path.stat().st_mode
        except FileNotFoundError:
            return None
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise PermissionError(f"{path} is readable by other users (mode {oct(mode & 0o777)}); chmod 600 it")
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return record if isinstance(record, dict) else None

    def save(self, server: str, record: Mapping[str, Any]) -> None:
        """Write the record for ``server`` whole, owner-only."""
        self._checked_directory()
        descriptor, temporary = tempfile.mkstemp(prefix=".tokens-", dir=self.directory)
        try:
            os.fchmod(descriptor, 0o600)
            with os.fdopen(descriptor, "w", encoding="utf-8") as file:
                json.dump(dict(record), file)
            os.replace(temporary, self._path(server))
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    def delete(self, server: str) -> bool:
        """Forget ``server``: remove its file."""
        try:
            self._path(server).unlink()
        except FileNotFoundError:
            return False
        return True
