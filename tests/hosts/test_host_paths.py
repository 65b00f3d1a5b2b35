"""Where each host keeps its servers, on Linux, macOS and Windows, from the environment alone."""

from __future__ import annotations

from pathlib import PurePosixPath, PureWindowsPath

import pytest

from mrtr.cli.hosts import HOSTS, HostPathError

LINUX = {"HOME": "/home/ada"}
LINUX_XDG = {"HOME": "/home/ada", "XDG_CONFIG_HOME": "/home/ada/.xdg"}
MACOS = {"HOME": "/Users/ada"}
WINDOWS = {"USERPROFILE": r"C:\Users\ada", "APPDATA": r"C:\Users\ada\AppData\Roaming"}
PROJECT = PurePosixPath("/work/project")

USER_FILES = {
    "claude-desktop": ("/home/ada/.config/Claude/claude_desktop_config.json",
                       "/home/ada/.xdg/Claude/claude_desktop_config.json",
                       "/Users/ada/Library/Application Support/Claude/claude_desktop_config.json",
                       r"C:\Users\ada\AppData\Roaming\Claude\claude_desktop_config.json"),
    "claude-code": ("/home/ada/.claude.json", "/home/ada/.claude.json", "/Users/ada/.claude.json",
                    r"C:\Users\ada\.claude.json"),
    "cursor": ("/home/ada/.cursor/mcp.json", "/home/ada/.cursor/mcp.json", "/Users/ada/.cursor/mcp.json",
               r"C:\Users\ada\.cursor\mcp.json"),
    "vscode": ("/home/ada/.config/Code/User/mcp.json", "/home/ada/.xdg/Code/User/mcp.json",
               "/Users/ada/Library/Application Support/Code/User/mcp.json",
               r"C:\Users\ada\AppData\Roaming\Code\User\mcp.json"),
    "gemini-cli": ("/home/ada/.gemini/settings.json", "/home/ada/.gemini/settings.json",
                   "/Users/ada/.gemini/settings.json", r"C:\Users\ada\.gemini\settings.json"),
    "goose": ("/home/ada/.config/goose/config.yaml", "/home/ada/.xdg/goose/config.yaml",
              "/Users/ada/.config/goose/config.yaml", r"C:\Users\ada\AppData\Roaming\Block\goose\config\config.yaml"),
    "windsurf": ("/home/ada/.codeium/windsurf/mcp_config.json", "/home/ada/.codeium/windsurf/mcp_config.json",
                 "/Users/ada/.codeium/windsurf/mcp_config.json", r"C:\Users\ada\.codeium\windsurf\mcp_config.json"),
    "zed": ("/home/ada/.config/zed/settings.json", "/home/ada/.xdg/zed/settings.json",
            "/Users/ada/.config/zed/settings.json", r"C:\Users\ada\AppData\Roaming\Zed\settings.json"),
}

PROJECT_FILES = {"claude-code": ".mcp.json", "cursor": ".cursor/mcp.json", "vscode": ".vscode/mcp.json",
                 "gemini-cli": ".gemini/settings.json", "zed": ".zed/settings.json"}


@pytest.mark.parametrize("host", sorted(USER_FILES))
def test_the_user_file_on_each_platform(host):
    linux, xdg, macos, windows = USER_FILES[host]
    rule = HOSTS[host]
    assert rule.path("user", "linux", LINUX, PROJECT) == PurePosixPath(linux)
    assert rule.path(None, "linux", LINUX_XDG, PROJECT) == PurePosixPath(xdg)
    assert rule.path("user", "darwin", MACOS, PROJECT) == PurePosixPath(macos)
    assert rule.path("user", "win32", WINDOWS, PureWindowsPath(r"C:\work")) == PureWindowsPath(windows)


@pytest.mark.parametrize("host", sorted(HOSTS))
def test_the_project_file_or_a_clear_refusal(host):
    if host in PROJECT_FILES:
        assert HOSTS[host].path("project", "linux", LINUX, PROJECT) == PROJECT / PROJECT_FILES[host]
    else:
        with pytest.raises(HostPathError, match="no project configuration file|json host"):
            HOSTS[host].path("project", "linux", LINUX, PROJECT)


def test_appdata_falls_back_to_the_profile_and_no_home_is_a_clear_error():
    assert HOSTS["vscode"].path("user", "win32", {"USERPROFILE": r"D:\u"}, PROJECT) == PureWindowsPath(
        r"D:\u\AppData\Roaming\Code\User\mcp.json")
    with pytest.raises(HostPathError, match="no home folder: set HOME"):
        HOSTS["cursor"].path("user", "linux", {}, PROJECT)
    # A relative XDG_CONFIG_HOME is ignored, as the XDG specification says.
    assert HOSTS["zed"].path("user", "linux", {"HOME": "/h", "XDG_CONFIG_HOME": "rel"}, PROJECT) == PurePosixPath(
        "/h/.config/zed/settings.json")
