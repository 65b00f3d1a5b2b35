"""Writing a host's file: atomic, with a backup, the permission bits kept, a symbolic link followed."""

from __future__ import annotations

import os
import stat

import pytest

from mrtr.cli.config_files import ConfigFileError, backup_path, read_text, replace_file


def test_the_old_text_is_the_backup_and_the_mode_is_kept(tmp_path):
    path = tmp_path / "mcp.json"
    path.write_text('{"old": true}')
    os.chmod(path, 0o640)
    backup = replace_file(path, '{"new": true}\n')
    assert backup == backup_path(path) == tmp_path / "mcp.json.bak"
    assert path.read_text() == '{"new": true}\n' and backup.read_text() == '{"old": true}'
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mcp.json", "mcp.json.bak"]  # no temporary file left


def test_a_new_file_holding_secrets_is_its_owner_s_alone(tmp_path):
    assert replace_file(tmp_path / "a.json", "{}", secret=True) is None
    assert stat.S_IMODE((tmp_path / "a.json").stat().st_mode) == 0o600


def test_a_symbolic_link_stays_and_its_target_changes(tmp_path):
    target = tmp_path / "dotfiles" / "settings.json"
    target.parent.mkdir()
    target.write_text("{}")
    link = tmp_path / "settings.json"
    link.symlink_to(target)
    replace_file(link, '{"a": 1}')
    assert link.is_symlink() and target.read_text() == '{"a": 1}'


def test_a_failed_write_leaves_the_file_as_it_was(tmp_path, monkeypatch):
    path = tmp_path / "mcp.json"
    path.write_text("{}")

    def full(source, target):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(ConfigFileError, match="No space left on device; it was left as it is"):
        replace_file(path, '{"a": 1}')
    assert path.read_text() == "{}" and [p.name for p in tmp_path.iterdir()] == ["mcp.json"]


def test_text_that_is_not_utf8_is_refused(tmp_path):
    path = tmp_path / "x.json"
    path.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(ConfigFileError, match="not UTF-8"):
        read_text(path)
    assert read_text(tmp_path / "missing.json") is None


def test_a_read_only_file_is_refused_not_renamed_over(tmp_path):
    path = tmp_path / "mcp.json"
    path.write_text("{}")
    os.chmod(path, 0o444)
    with pytest.raises(ConfigFileError, match="is read-only \\(mode 444\\); it was left as it is"):
        replace_file(path, '{"a": 1}')
    assert path.read_text() == "{}" and not backup_path(path).exists()
