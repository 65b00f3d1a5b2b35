"""``mrtr install`` and ``mrtr uninstall`` in process, writing into files under a temporary home.

Nothing is started here (``--no-check``; the check and the SDK 1.x client starting each
entry are in ``test_install_started.py``). HOME, XDG_CONFIG_HOME and APPDATA point into
tmp_path, so the user's own files are never read or written.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from mrtr.cli import main
from mrtr.cli.hosts import HOSTS
from mrtr.cli.install import mrtr_command

from .fixtures import assert_others_kept, fixture_text, project, read_back, servers_of

WRITERS = [host for host in HOSTS if host != "json"]


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A home folder of its own, the user's project as the current directory."""
    home = tmp_path / "home"
    (home / ".config" / "Claude").mkdir(parents=True)  # Claude Desktop has run once
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("APPDATA", str(tmp_path / "appdata-unused-on-linux"))
    monkeypatch.chdir(project(tmp_path / "project"))
    monkeypatch.setattr(sys, "platform", "linux")
    return home


def install(*args: str) -> int:
    return main(["install", *args])


def path_of(host: str, home: Path) -> Path:
    return Path(HOSTS[host].path(None, "linux", {"HOME": str(home)}, Path.cwd()))


@pytest.mark.parametrize("host", WRITERS)
def test_the_entry_joins_the_others_and_the_rest_of_the_file_stays(host, home, capsys):
    path = path_of(host, home)
    path.parent.mkdir(parents=True, exist_ok=True)
    before = fixture_text(host)
    path.write_text(before)
    os.chmod(path, 0o640)
    assert install(host, "hostapp:server", "--env", "API_KEY=s3cret", "--no-check") == 0
    text = path.read_text()
    assert_others_kept(host, text)
    entry = servers_of(host, read_back(host, text))["hostapp"]
    command, prefix = mrtr_command()
    started = HOSTS[host].stdio_command(entry)
    assert started is not None and started.command == command == str(Path(sys.executable).parent / "mrtr")
    assert started.args == [*prefix, "serve", "hostapp:server", "--stdio"]
    assert started.env == {"PYTHONPATH": str(Path.cwd()), "API_KEY": "s3cret"}
    assert path.with_name(path.name + ".bak").read_text() == before
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert "s3cret" not in "".join(capsys.readouterr())


def test_each_host_s_own_shape(home):
    shapes = {}
    for host in WRITERS:
        assert install(host, "hostapp:server", "--no-check") == 0
        shapes[host] = servers_of(host, read_back(host, path_of(host, home).read_text()))["hostapp"]
    assert shapes["vscode"]["type"] == "stdio" and shapes["vscode"]["cwd"] == str(Path.cwd())
    assert shapes["claude-code"]["type"] == "stdio" and "type" not in shapes["cursor"]
    assert shapes["gemini-cli"]["cwd"] == str(Path.cwd())
    assert shapes["zed"]["source"] == "custom"
    assert shapes["goose"]["type"] == "stdio" and shapes["goose"]["enabled"] is True and "cmd" in shapes["goose"]


@pytest.mark.parametrize(("host", "expected"), [
    ("cursor", {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer t0ken"}}),
    ("claude-code", {"type": "http", "url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer t0ken"}}),
    ("vscode", {"type": "http", "url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer t0ken"}}),
    ("gemini-cli", {"httpUrl": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer t0ken"}}),
    ("windsurf", {"serverUrl": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer t0ken"}}),
    ("zed", {"source": "custom", "url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer t0ken"}}),
    ("goose", {"enabled": True, "name": "example", "type": "streamable_http", "uri": "https://mcp.example.com/mcp",
               "headers": {"Authorization": "Bearer t0ken"}, "timeout": 300, "description": "example (mrtr)"}),
])
def test_a_remote_server_in_each_host_s_words(host, expected, home, capsys):
    assert install(host, "--url", "https://mcp.example.com/mcp", "--name", "example",
                   "--header", "Authorization: Bearer t0ken", "--no-check") == 0
    assert servers_of(host, read_back(host, path_of(host, home).read_text()))["example"] == expected
    assert "t0ken" not in "".join(capsys.readouterr())


def test_claude_desktop_takes_no_remote_server_and_needs_its_folder(home, capsys):
    assert install("claude-desktop", "--url", "https://mcp.example.com/mcp", "--no-check") == 2
    assert "Connectors" in capsys.readouterr().err
    (home / ".config" / "Claude").rmdir()
    assert install("claude-desktop", "hostapp:server", "--no-check") == 1
    assert "is Claude Desktop installed?" in capsys.readouterr().err
    given = home / "elsewhere.json"
    assert install("claude-desktop", "hostapp:server", "--no-check", "--config", str(given)) == 0
    assert "hostapp" in json.loads(given.read_text())["mcpServers"]


def test_dry_run_shows_the_entry_with_secrets_hidden_and_writes_nothing(home, tmp_path, capsys):
    env_file = tmp_path / "secrets.env"
    env_file.write_text("# tokens\nexport FROM_FILE='f1le-secret'\nBOTH=from-file\n")
    assert install("vscode", "hostapp:server", "--env", "API_KEY=s3cret", "--env", "BOTH=from-flag",
                   "--env-file", str(env_file), "--dry-run") == 0
    out, err = capsys.readouterr()
    for secret in ("s3cret", "f1le-secret", "from-flag", "from-file"):
        assert secret not in out + err
    shown = json.loads(out)["servers"]["hostapp"]
    assert shown["env"] == {"PYTHONPATH": str(Path.cwd()), "FROM_FILE": "<hidden>", "BOTH": "<hidden>",
                            "API_KEY": "<hidden>"}
    assert str(path_of("vscode", home)) in err and not path_of("vscode", home).exists()
    assert install("cursor", "--url", "https://x.example/mcp", "--header", "Authorization=Bearer t0ken",
                   "--dry-run") == 0
    out, err = capsys.readouterr()
    assert "t0ken" not in out + err and json.loads(out)["mcpServers"]["x.example"]["headers"] == {
        "Authorization": "<hidden>"}


def test_an_existing_entry_keeps_its_environment_and_new_values_win(home):
    path = path_of("cursor", home)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"mcpServers": {"hostapp": {"command": "old", "env": {"KEEP": "1", "API_KEY": "old"}}}}))
    assert install("cursor", "hostapp:server", "--env", "API_KEY=new", "--no-check") == 0
    entry = json.loads(path.read_text())["mcpServers"]["hostapp"]
    assert entry["env"] == {"KEEP": "1", "API_KEY": "new", "PYTHONPATH": str(Path.cwd())}
    assert entry["command"] == mrtr_command()[0]


@pytest.mark.parametrize("host", ["claude-desktop", "cursor", "claude-code", "windsurf"])
def test_a_comment_in_a_strict_json_file_is_refused_at_its_line_and_nothing_changes(host, home, capsys):
    path = path_of(host, home)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = '{\n  "mcpServers": {\n    // mine\n    "a": {"command": "x"}\n  }\n}\n'
    path.write_text(text)
    assert install(host, "hostapp:server", "--no-check") == 1
    err = capsys.readouterr().err
    assert f"{path} is not valid JSON at line 3 column 5: a comment" in err and "left as it is" in err
    assert path.read_text() == text and not path.with_name(path.name + ".bak").exists()


def test_a_broken_jsonc_file_is_refused_too(home, capsys):
    path = path_of("vscode", home)
    path.parent.mkdir(parents=True)
    path.write_text('{\n  // fine\n  "servers": {\n    "a": {"command": "x"}\n    "b": {}\n  }\n}\n')
    assert install("vscode", "hostapp:server", "--no-check") == 1
    assert "line 5 column 5: expected ','" in capsys.readouterr().err


def test_a_goose_file_it_cannot_edit_safely_is_refused(home, capsys):
    path = path_of("goose", home)
    path.parent.mkdir(parents=True)
    path.write_text("extensions: {developer: {enabled: true}}\n")
    assert install("goose", "hostapp:server", "--no-check") == 1
    err = capsys.readouterr().err
    assert "line 1: 'extensions' is not written as a block mapping" in err and "left as it is" in err


def test_the_project_scope_writes_into_the_project(home):
    assert install("vscode", "hostapp:server", "--scope", "project", "--no-check") == 0
    assert "hostapp" in read_back("vscode", (Path.cwd() / ".vscode" / "mcp.json").read_text())["servers"]
    assert install("claude-code", "hostapp:server", "--scope", "project", "--no-check") == 0
    assert json.loads((Path.cwd() / ".mcp.json").read_text())["mcpServers"]["hostapp"]["type"] == "stdio"
    assert install("windsurf", "hostapp:server", "--scope", "project", "--no-check") == 2


def test_the_platform_s_folders_come_from_the_environment(home, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert install("zed", "hostapp:server", "--no-check") == 0
    assert (tmp_path / "xdg" / "zed" / "settings.json").exists()
    monkeypatch.setattr(sys, "platform", "darwin")
    (home / "Library" / "Application Support" / "Claude").mkdir(parents=True)
    assert install("claude-desktop", "hostapp:server", "--no-check") == 0
    assert (home / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json").exists()


def test_the_json_host_prints_the_entry_or_writes_the_file_given(home, tmp_path, capsys):
    assert install("json", "hostapp:server", "--env", "K=V", "--no-check") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mcpServers"]["hostapp"]["env"] == {"PYTHONPATH": str(Path.cwd()), "K": "V"}
    target = tmp_path / "any.json"
    assert install("json", "hostapp:server", "--config", str(target), "--no-check") == 0
    assert "hostapp" in json.loads(target.read_text())["mcpServers"]


def test_uninstall_removes_the_entry_and_names_what_is_there_otherwise(home, capsys):
    for host in WRITERS:
        path = path_of(host, home)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(fixture_text(host))
        assert install(host, "hostapp:server", "--no-check") == 0
        assert main(["uninstall", host, "hostapp"]) == 0
        assert read_back(host, path.read_text()) == read_back(host, fixture_text(host)), host
        assert_others_kept(host, path.read_text())
        capsys.readouterr()
        assert main(["uninstall", host, "hostapp"]) == 1
        assert "has no entry 'hostapp' (it has: " in capsys.readouterr().err


@pytest.mark.parametrize(("args", "message"), [
    (["cursor"], "give either MODULE:ATTRIBUTE"),
    (["cursor", "hostapp:server", "--url", "https://x/mcp"], "give either"),
    (["cursor", "hostapp"], "must be given as"),
    (["cursor", "nosuchmodule:server"], 'could not find module "nosuchmodule"'),
    (["cursor", "hostapp:server", "--name", "bad/name"], "--name 'bad/name'"),
    (["cursor", "hostapp:server", "--env", "NOEQUALS"], "KEY=VALUE"),
    (["cursor", "--url", "ftp://x/mcp"], "http:// or https://"),
    (["cursor", "--url", "https://x/mcp", "--env", "A=1"], "--header"),
    (["cursor", "hostapp:server", "--config", "x.json", "--scope", "user"], "give one of them"),
])
def test_usage_mistakes_exit_2_saying_what_to_do(args, message, home, capsys):
    assert install(*args, "--no-check") == 2
    assert message in capsys.readouterr().err


def test_without_a_mrtr_script_the_entry_runs_python_dash_m_mrtr(tmp_path, monkeypatch):
    python = tmp_path / "bin" / "python3"
    python.parent.mkdir()
    python.write_text("")
    monkeypatch.setattr(sys, "executable", str(python))
    assert mrtr_command() == (str(python), ["-m", "mrtr"])
