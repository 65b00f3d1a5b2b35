"""Host configuration files as users have them: other servers, other settings and, where allowed, comments."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from mrtr.cli.hosts import HOSTS
from mrtr.cli.jsonc import parse, to_python

APP_SOURCE = '''"""A server of the user's project, importable only from its folder."""

from mrtr import Context, Elicit, Form, Server

server = Server("host-app", "1.0.0")


@server.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool
def greet(ctx: Context):
    """Two questions: a name, then whether to subscribe; a decline is taken as no."""
    name = yield Elicit("Your name?", Form().string("name", min_length=1))
    if not name.accepted:
        return f"no name ({name.action})"
    news = yield Elicit(f"Subscribe to the newsletter, {name.content['name']}?", Form().boolean("subscribe"))
    if news.action != "accept":
        return f"hello {name.content['name']}, no newsletter ({news.action})"
    return f"hello {name.content['name']}, subscribed={news.content['subscribe']}"
'''

OTHER = {"command": "node", "args": ["/opt/other/server.js"], "env": {"OTHER_TOKEN": "keep-me"}}


def project(folder: Path) -> Path:
    """A user's project folder holding ``hostapp.py`` (``hostapp:server``)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "hostapp.py").write_text(APP_SOURCE)
    return folder


def fixture_text(host: str) -> str:
    """The file ``host`` has before ``mrtr install``: another server and another setting, and comments where the
    host reads them."""
    rule = HOSTS[host]
    if rule.yaml:
        return ("# my goose\nGOOSE_PROVIDER: openai\nextensions:\n  # the built-in one\n  developer:\n"
                "    bundled: true\n    enabled: true\n    name: developer\n    type: builtin\n  other:\n"
                "    cmd: node\n    args: [/opt/other/server.js]\n    enabled: true\n    envs: {OTHER_TOKEN: keep-me}\n"
                "    type: stdio\n\n# the end\nGOOSE_MODE: smart_approve\n")
    key = rule.key[0]
    if rule.comments:
        return ('{\n  // settings of mine\n  "theme": "dark",\n  "%s": {\n    /* another server */\n'
                '    "other": %s, // keep it\n  },\n}\n') % (key, json.dumps(OTHER))
    return json.dumps({"theme": "dark", key: {"other": OTHER}, "numStartups": 3}, indent=2) + "\n"


COMMENTS = {"vscode": ["// settings of mine", "/* another server */", "// keep it"],
            "zed": ["// settings of mine", "/* another server */", "// keep it"],
            "gemini-cli": ["// settings of mine", "/* another server */", "// keep it"],
            "goose": ["# my goose", "# the built-in one", "# the end"]}


def read_back(host: str, text: str) -> Any:
    """The file's data as the host reads it (a YAML reader for Goose, strict JSON where the host wants it)."""
    rule = HOSTS[host]
    if rule.yaml:
        return yaml.safe_load(text)
    if rule.comments:
        return to_python(parse(text, comments=True))
    return json.loads(text)


def servers_of(host: str, data: Any) -> dict[str, Any]:
    for key in HOSTS[host].key:
        data = data[key]
    return data  # type: ignore[no-any-return]


def assert_others_kept(host: str, text: str) -> None:
    """The other server, the other settings and every comment of :func:`fixture_text` are still in ``text``."""
    data = read_back(host, text)
    other = servers_of(host, data)["other"]
    if HOSTS[host].yaml:
        assert other["cmd"] == "node" and other["envs"] == {"OTHER_TOKEN": "keep-me"}
        assert data["GOOSE_PROVIDER"] == "openai" and data["GOOSE_MODE"] == "smart_approve"
        assert servers_of(host, data)["developer"]["type"] == "builtin"
    else:
        assert other == OTHER and data["theme"] == "dark"
    for comment in COMMENTS.get(host, []):
        assert comment in text
