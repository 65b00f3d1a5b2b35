"""A stdio MCP "server" whose answers are scripted: ``python hostile_stdio.py REPLIES.json``.

REPLIES maps a method to a list of replies, used in order with the last one repeated. A
reply is ``{"result": ...}``, ``{"error": ...}`` (``"id"`` overrides the request's id) or
``{"raw": "..."}``: that text written as it is, a newline after it. A reply's ``"notes"``
(progress notification params) are sent first, with the request's progress token.
``server/discover`` and ``tools/list`` have default answers; any other method without
replies gets -32601.
"""

from __future__ import annotations

import json
import sys

DISCOVER = {"resultType": "complete", "supportedVersions": ["2026-07-28"], "ttlMs": 0, "cacheScope": "public",
            "capabilities": {"tools": {}, "prompts": {}, "resources": {}}}
DEFAULTS = {"server/discover": {"result": DISCOVER},
            "tools/list": {"result": {"resultType": "complete", "tools": [], "ttlMs": 0, "cacheScope": "public"}}}


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as file:
        replies = json.load(file)
    used: dict[str, int] = {}
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message or "method" not in message:
            continue  # notifications (cancelled) and responses need no answer
        method = message["method"]
        unknown = {"error": {"code": -32601, "message": "no such method"}}
        options = replies.get(method) or [DEFAULTS.get(method, unknown)]
        reply = options[min(used.get(method, 0), len(options) - 1)]
        used[method] = used.get(method, 0) + 1
        token = ((message.get("params") or {}).get("_meta") or {}).get("progressToken")
        for note in reply.get("notes") or []:
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/progress",
                                         "params": {"progressToken": token, **note}}) + "\n")
        if "raw" in reply:
            sys.stdout.write(reply["raw"] + "\n")
        else:
            answer = {"jsonrpc": "2.0", "id": reply.get("id", message["id"]),
                      **{key: value for key, value in reply.items() if key not in ("id", "notes")}}
            sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
