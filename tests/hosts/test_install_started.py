"""Done means: each host's entry, written by ``mrtr install`` into a file with other entries and comments
around it, read back and started by the official SDK 1.x stdio client, completes a call.

``mrtr install`` runs as a user runs it (a process, its check on: the entry is started and
asked ``initialize`` before anything is written), with HOME and XDG_CONFIG_HOME in
tmp_path. Then the SDK 1.x client (``.cache/legacy-venv``, ``mcp==1.30.0``) starts what
each file says with a bare ``PATH`` (no virtualenv on it) from the root folder, as a
desktop host does, and calls ``add``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mrtr.cli.hosts import HOSTS

from ..conftest import clean_env, pinned_venv
from ..interop.test_interop import served
from .fixtures import assert_others_kept, fixture_text, project, read_back, servers_of

pytestmark = pytest.mark.slow  # starts processes (tests/conftest.py: the tiers)

REPO = Path(__file__).resolve().parents[2]
MRTR = str(Path(sys.executable).parent / "mrtr")
WRITERS = [host for host in HOSTS if host != "json"]


@pytest.fixture(scope="module")
def sdk1_python() -> Path:
    return pinned_venv(REPO / ".cache" / "legacy-venv", REPO / "tests" / "legacy" / "requirements.txt", "mcp",
                       "1.30.0")


@pytest.fixture(scope="module")
def user(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a user whose home and project are temporary folders."""
    root = tmp_path_factory.mktemp("user")
    home = root / "home"
    (home / ".config" / "Claude").mkdir(parents=True)
    project(root / "project")
    env = {**clean_env(), "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "PROJECT": str(root / "project")}
    env.pop("APPDATA", None)
    return env


def mrtr(user: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([MRTR, *args], cwd=user["PROJECT"], env=user, capture_output=True, text=True,
                          timeout=120, check=False)


def host_file(host: str, user: dict[str, str]) -> Path:
    return Path(HOSTS[host].path(None, "linux", user, Path(user["PROJECT"])))


@pytest.fixture(scope="module")
def installed(user: dict[str, str]) -> dict[str, dict]:
    """Every host's file after ``mrtr install HOST hostapp:server --env API_KEY=...``, read back as the host reads it."""
    entries = {}
    for host in WRITERS:
        path = host_file(host, user)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(fixture_text(host))
        done = mrtr(user, "install", host, "hostapp:server", "--name", "hostapp", "--env", "API_KEY=s3cret")
        assert done.returncode == 0, done.stderr
        assert "host-app 1.0.0 answered initialize (2025-11-25)" in done.stderr and "s3cret" not in done.stderr
        text = path.read_text()
        assert_others_kept(host, text)
        entries[host] = servers_of(host, read_back(host, text))["hostapp"]
    return entries


def test_every_host_s_entry_starts_under_the_sdk1_client_and_completes_a_call(installed, user, sdk1_python,
                                                                               tmp_path):
    started = {}
    for host, entry in installed.items():
        command = HOSTS[host].stdio_command(entry)
        assert command is not None and command.command == MRTR
        started[host] = {"command": command.command, "args": command.args, "env": command.env,
                         "cwd": command.cwd or "/"}
    listing = tmp_path / "entries.json"
    listing.write_text(json.dumps(started))
    bare = {"PATH": "/usr/bin:/bin", "HOME": user["HOME"]}  # a desktop session's: no virtualenv, no PYTHONPATH
    done = subprocess.run([str(sdk1_python), str(Path(__file__).with_name("sdk1_host.py")), str(listing)],
                          env=bare, cwd="/", capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert [result["name"] for result in results] == WRITERS
    assert all(result == {"name": result["name"], "server": "host-app", "text": "5", "error": False}
               for result in results), results


def test_a_server_that_fails_to_start_is_not_written(user, tmp_path):
    (Path(user["PROJECT"]) / "brokenapp.py").write_text("raise RuntimeError('broken on import')\n")
    path = host_file("cursor", user)
    before = path.read_text()
    done = mrtr(user, "install", "cursor", "brokenapp:server")
    assert done.returncode == 1
    assert "exited with code 1 before answering initialize" in done.stderr and "broken on import" in done.stderr
    assert path.read_text() == before
    wrong = mrtr(user, "install", "cursor", "hostapp:nothing")
    assert wrong.returncode == 1 and 'has no attribute "nothing"' in wrong.stderr


def test_a_remote_server_is_asked_initialize_at_its_url(user, tmp_path):
    with served("tests.legacy.app:server", tmp_path / "server.log") as url:
        done = subprocess.run([MRTR, "install", "cursor", "--url", url, "--name", "remote",
                               "--header", "X-Api-Key=k3y"], cwd=user["PROJECT"], env=user, capture_output=True,
                              text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "legacy-fixture 1.2.3 answered initialize (2025-11-25)" in done.stderr and "k3y" not in done.stderr
    assert json.loads(host_file("cursor", user).read_text())["mcpServers"]["remote"] == {
        "url": url, "headers": {"X-Api-Key": "k3y"}}
    refused = mrtr(user, "install", "cursor", "--url", "http://127.0.0.1:9/mcp", "--name", "nowhere")
    assert refused.returncode == 1 and "could not reach http://127.0.0.1:9/mcp" in refused.stderr
    assert os.path.exists(host_file("cursor", user))


def test_a_remote_server_of_the_2026_era_alone_is_asked_server_discover(user, tmp_path):
    with served("tests.legacy.app:server", tmp_path / "server.log", "--era", "modern") as url:
        done = mrtr(user, "install", "cursor", "--url", url, "--name", "modern-only")
    assert done.returncode == 0, done.stderr
    assert "legacy-fixture 1.2.3 answered server/discover (it serves 2026-07-28)" in done.stderr
    assert json.loads(host_file("cursor", user).read_text())["mcpServers"]["modern-only"] == {"url": url}
