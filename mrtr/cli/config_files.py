"""Reading and replacing a host's configuration file safely.

:func:`replace_file` never leaves a half-written file: the new text goes to a temporary
file beside the old one (same folder, so the same file system), is flushed to disk, given
the old file's permission bits (``0600`` for a new file, which may hold secrets), and
renamed over it in one step (:func:`os.replace`). The previous text is kept as
``NAME.bak`` first. A read-only file (no write bit for its owner) is refused, not replaced:
a rename would go round its mode. A path that is a symbolic link (a dotfiles folder) is followed, so the
link stays and its target is what changes.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

__all__ = ["ConfigFileError", "backup_path", "read_text", "replace_file"]


class ConfigFileError(Exception):
    """A configuration file that cannot be read, parsed or written; the message says which and why."""


def backup_path(path: Path) -> Path:
    """Where the text a file had before ``mrtr install`` or ``mrtr uninstall`` changed it is kept."""
    return path.with_name(path.name + ".bak")


def read_text(path: Path) -> str | None:
    """The file's text, or ``None`` when it does not exist yet."""
    try:
        return path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        raise ConfigFileError(f"{path} is not UTF-8 text (byte {exc.start}); it was left as it is") from None
    except OSError as exc:
        raise ConfigFileError(f"cannot read {path}: {exc.strerror or exc}") from None


def replace_file(path: Path, text: str, *, secret: bool = False) -> Path | None:
    """Write ``text`` to ``path`` atomically; return the backup of the previous file, if there was one.

    ``secret``: the text holds values such as tokens, so a new file is readable by its
    owner alone (an existing file keeps its own permission bits either way).
    """
    target = Path(os.path.realpath(path))
    folder = target.parent
    try:
        old = target.stat()
    except FileNotFoundError:
        old = None
    if old is not None and not stat.S_ISREG(old.st_mode):
        raise ConfigFileError(f"{path} is not a regular file; it was left as it is")
    if old is not None and not old.st_mode & stat.S_IWUSR:
        raise ConfigFileError(f"{path} is read-only (mode {stat.S_IMODE(old.st_mode):o}); it was left as it is")
    mode = stat.S_IMODE(old.st_mode) if old is not None else (0o600 if secret else 0o666 & ~_umask())
    backup = None
    try:
        if old is not None:
            backup = backup_path(target)
            data = target.read_bytes()
            _write_new(backup, data, stat.S_IMODE(old.st_mode))
        _write_new(target, text.encode("utf-8"), mode)
    except OSError as exc:
        raise ConfigFileError(f"cannot write {path}: {exc.strerror or exc}; it was left as it is") from None
    _sync_folder(folder)
    return backup


def _write_new(target: Path, data: bytes, mode: int) -> None:
    """``data`` into ``target`` by a temporary file and a rename: readers see the old file or the new one."""
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _umask() -> int:
    current = os.umask(0o022)
    os.umask(current)
    return current


def _sync_folder(folder: Path) -> None:
    """The rename itself made durable (POSIX); a platform that cannot open a folder skips it."""
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)

