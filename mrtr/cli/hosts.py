"""The MCP hosts ``mrtr install`` knows: where each keeps its servers, and the entry it reads.

Each :class:`Host` says which file holds its servers for each scope (``user``: all your
projects; ``project``: the folder you are in) on Linux, macOS and Windows, which key of
that file holds them, whether the file may have comments (JSONC), and how a stdio
command or a remote Streamable HTTP server is written for it. The shapes differ where
the hosts differ: VS Code's key is ``servers`` and Zed's ``context_servers``; Gemini CLI
names a Streamable HTTP URL ``httpUrl`` and Windsurf ``serverUrl``; Goose's file is YAML,
its entries under ``extensions`` with ``cmd`` and ``envs``.

Paths are computed from a platform name and an environment mapping, never from the
process's own, so every platform's paths are tested on any machine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePath, PurePosixPath, PureWindowsPath
from typing import Any

__all__ = ["HOSTS", "Host", "HostPathError", "Stdio", "Remote", "platform_name"]


class HostPathError(Exception):
    """The host's file cannot be located here (a scope it does not have, or no home folder)."""


@dataclass(frozen=True)
class Stdio:
    """A server the host starts: ``command`` with ``args``, in ``cwd``, with ``env`` added to its environment."""

    command: str
    args: list[str]
    env: dict[str, str]
    cwd: str


@dataclass(frozen=True)
class Remote:
    """A server the host reaches over Streamable HTTP at ``url``, sending ``headers``."""

    url: str
    headers: dict[str, str]


def platform_name(platform: str) -> str:
    """``linux``, ``macos`` or ``windows`` for a :data:`sys.platform` value (others count as Linux)."""
    if platform == "darwin":
        return "macos"
    if platform in ("win32", "cygwin"):
        return "windows"
    return "linux"


PathRule = Callable[[str, Mapping[str, str], PurePath], PurePath]


def _path_type(system: str) -> type[PurePath]:
    return PureWindowsPath if system == "windows" else PurePosixPath


def _home(system: str, env: Mapping[str, str]) -> PurePath:
    home = env.get("USERPROFILE") if system == "windows" else env.get("HOME")
    if not home and system == "windows" and env.get("HOMEDRIVE"):
        home = env["HOMEDRIVE"] + env.get("HOMEPATH", "")
    if not home:
        raise HostPathError("no home folder: set " + ("USERPROFILE" if system == "windows" else "HOME")
                            + ", or give the file with --config")
    return _path_type(system)(home)


def _appdata(system: str, env: Mapping[str, str]) -> PurePath:
    if env.get("APPDATA"):
        return PureWindowsPath(env["APPDATA"])
    return _home(system, env) / "AppData" / "Roaming"


def _xdg_config(system: str, env: Mapping[str, str]) -> PurePath:
    value = env.get("XDG_CONFIG_HOME")
    if value and PurePosixPath(value).is_absolute():
        return PurePosixPath(value)
    return _home(system, env) / ".config"


def _app_config(linux: str, macos: str, windows: str) -> PathRule:
    """A desktop application's settings folder: XDG on Linux, Application Support on macOS, %APPDATA% on Windows."""

    def rule(system: str, env: Mapping[str, str], cwd: PurePath) -> PurePath:
        if system == "windows":
            return _appdata(system, env) / windows
        if system == "macos":
            return _home(system, env) / "Library" / "Application Support" / macos
        return _xdg_config(system, env) / linux

    return rule


def _in_home(*parts: str) -> PathRule:
    return lambda system, env, cwd: _home(system, env).joinpath(*parts)


def _in_project(*parts: str) -> PathRule:
    return lambda system, env, cwd: cwd.joinpath(*parts)


def _then(rule: PathRule, *parts: str) -> PathRule:
    return lambda system, env, cwd: rule(system, env, cwd).joinpath(*parts)


def _mcp_servers_entry(server: Stdio | Remote, *, typed: bool, cwd: bool, url_key: str = "url",
                       remote_type: str | None = None) -> dict[str, Any]:
    """The de-facto ``mcpServers`` entry, with the variations hosts make to it."""
    if isinstance(server, Remote):
        entry: dict[str, Any] = {"type": remote_type} if remote_type else {}
        entry[url_key] = server.url
        if server.headers:
            entry["headers"] = dict(server.headers)
        return entry
    entry = {"type": "stdio"} if typed else {}
    entry.update({"command": server.command, "args": list(server.args)})
    if server.env:
        entry["env"] = dict(server.env)
    if cwd:
        entry["cwd"] = server.cwd
    return entry


def _zed_entry(server: Stdio | Remote) -> dict[str, Any]:
    if isinstance(server, Remote):
        entry: dict[str, Any] = {"source": "custom", "url": server.url}
        if server.headers:
            entry["headers"] = dict(server.headers)
        return entry
    entry = {"source": "custom", "command": server.command, "args": list(server.args)}
    if server.env:
        entry["env"] = dict(server.env)
    return entry


def _goose_entry(name: str, server: Stdio | Remote) -> dict[str, Any]:
    entry: dict[str, Any] = {"enabled": True, "name": name}
    if isinstance(server, Remote):
        entry.update({"type": "streamable_http", "uri": server.url, "headers": dict(server.headers)})
    else:
        entry.update({"type": "stdio", "cmd": server.command, "args": list(server.args), "envs": dict(server.env)})
    entry.update({"timeout": 300, "description": f"{name} (mrtr)"})
    return entry


@dataclass(frozen=True)
class Host:
    """One host: its files per scope, the key holding its servers, and the entry it reads."""

    name: str
    title: str
    paths: Mapping[str, PathRule]  # scope -> the file
    key: tuple[str, ...]  # where the servers are, from the top of the file
    build: Callable[[str, Stdio | Remote], dict[str, Any]]
    comments: bool = False  # the host reads JSONC
    yaml: bool = False
    remote: bool = True  # the file can hold a remote server
    must_exist: bool = False  # the folder is the installed application's: refuse when it is missing
    notes: tuple[str, ...] = field(default=())

    @property
    def scopes(self) -> tuple[str, ...]:
        """The scopes this host has a file for, the default first."""
        return tuple(self.paths)

    def path(self, scope: str | None, platform: str, env: Mapping[str, str], cwd: PurePath) -> PurePath:
        """The file for ``scope`` (default: the first this host has) on ``platform`` with ``env``."""
        scope = scope or self.scopes[0]
        rule = self.paths.get(scope)
        if rule is None:
            raise HostPathError(f"{self.title} has no {scope} configuration file (it has: {', '.join(self.scopes)})")
        return rule(platform_name(platform), env, cwd)

    def stdio_command(self, entry: Mapping[str, Any]) -> Stdio | None:
        """The command an entry of this host's shape starts, read back from it (``None`` for a remote one)."""
        if self.yaml:
            if "cmd" not in entry:
                return None
            return Stdio(entry["cmd"], list(entry.get("args") or []), dict(entry.get("envs") or {}), "")
        if "command" not in entry:
            return None
        return Stdio(entry["command"], list(entry.get("args") or []), dict(entry.get("env") or {}),
                     str(entry.get("cwd") or ""))


def _given_only(system: str, env: Mapping[str, str], cwd: PurePath) -> PurePath:
    raise HostPathError("the json host has no file of its own: it prints the entry, or writes it into --config FILE")


def _claude_desktop() -> Host:
    return Host(
        "claude-desktop", "Claude Desktop",
        {"user": _then(_app_config("Claude", "Claude", "Claude"), "claude_desktop_config.json")},
        ("mcpServers",), lambda name, server: _mcp_servers_entry(server, typed=False, cwd=False),
        remote=False, must_exist=True,
        notes=("restart Claude Desktop to load it",),
    )


HOSTS: dict[str, Host] = {host.name: host for host in [
    _claude_desktop(),
    Host("claude-code", "Claude Code",
         {"user": _in_home(".claude.json"), "project": _in_project(".mcp.json")},
         ("mcpServers",),
         lambda name, server: _mcp_servers_entry(server, typed=True, cwd=False, remote_type="http")),
    Host("cursor", "Cursor",
         {"user": _in_home(".cursor", "mcp.json"), "project": _in_project(".cursor", "mcp.json")},
         ("mcpServers",), lambda name, server: _mcp_servers_entry(server, typed=False, cwd=False)),
    Host("vscode", "VS Code",
         {"user": _then(_app_config("Code/User", "Code/User", "Code/User"), "mcp.json"),
          "project": _in_project(".vscode", "mcp.json")},
         ("servers",),
         lambda name, server: _mcp_servers_entry(server, typed=True, cwd=True, remote_type="http"),
         comments=True),
    Host("gemini-cli", "Gemini CLI",
         {"user": _in_home(".gemini", "settings.json"), "project": _in_project(".gemini", "settings.json")},
         ("mcpServers",), lambda name, server: _mcp_servers_entry(server, typed=False, cwd=True, url_key="httpUrl"),
         comments=True),
    Host("goose", "Goose",
         {"user": lambda system, env, cwd: (_appdata(system, env) / "Block" / "goose" / "config" / "config.yaml"
                                            if system == "windows" else
                                            _xdg_config(system, env) / "goose" / "config.yaml")},
         ("extensions",), _goose_entry, yaml=True),
    Host("windsurf", "Windsurf",
         {"user": _in_home(".codeium", "windsurf", "mcp_config.json")},
         ("mcpServers",),
         lambda name, server: _mcp_servers_entry(server, typed=False, cwd=False, url_key="serverUrl")),
    Host("zed", "Zed",
         {"user": lambda system, env, cwd: (_appdata(system, env) / "Zed" / "settings.json" if system == "windows"
                                            else _xdg_config(system, env) / "zed" / "settings.json"),
          "project": _in_project(".zed", "settings.json")},
         ("context_servers",), lambda name, server: _zed_entry(server), comments=True),
    Host("json", "a generic mcpServers file", {"user": _given_only, "project": _given_only}, ("mcpServers",),
         lambda name, server: _mcp_servers_entry(server, typed=False, cwd=False, remote_type="http")),
]}
"""Every host ``mrtr install`` writes for, by the name the command takes."""
