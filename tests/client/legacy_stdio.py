"""A 2025-era stdio "server" that misbehaves on purpose: ``python legacy_stdio.py MODE``.

It refuses ``server/discover`` as a legacy server does (``-32601``), then, by MODE
(a second argument names a file where the ``notifications/cancelled`` it gets are written):

- ``silent``: never answers ``initialize``;
- ``undeclared``: on ``tools/call``, asks ``sampling/createMessage`` and ``roots/list``
  (which the test's client does not declare) and reports what the client answered;
- ``endless``: on ``tools/call``, asks a question again after every answer, forever;
- ``malformed``: on ``tools/call``, sends an ``elicitation/create`` whose schema is no
  schema, then reports what the client answered.
"""

from __future__ import annotations

import json
import sys

MODE = sys.argv[1]
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}}


def send(message: dict) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def receive() -> dict | None:
    line = sys.stdin.readline()
    return json.loads(line) if line else None


LOG = sys.argv[2] if len(sys.argv) > 2 else None


def answer_of(request_id: int) -> dict:
    while True:
        message = receive()
        if message is None:
            sys.exit(0)
        if message.get("method") == "notifications/cancelled":
            if LOG:
                with open(LOG, "a") as log:
                    log.write(json.dumps(message) + "\n")
            return {"cancelled": True}
        if message.get("id") == request_id and "method" not in message:
            return message


def main() -> None:
    asked = 1000
    while (message := receive()) is not None:
        method, request_id = message.get("method"), message.get("id")
        if request_id is None:
            continue  # notifications/initialized, notifications/cancelled
        if method == "server/discover":
            send({"id": request_id, "error": {"code": -32601, "message": "Method not found"}})
        elif method == "initialize":
            if MODE == "silent":
                continue
            send({"id": request_id, "result": {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                                               "serverInfo": {"name": "liar", "version": "1"}}})
        elif method == "tools/list":
            send({"id": request_id, "result": {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}})
        elif method == "tools/call":
            replies = []
            if MODE == "undeclared":
                for kind, params in (("sampling/createMessage", {"messages": [], "maxTokens": 5}),
                                     ("roots/list", {})):
                    asked += 1
                    send({"id": asked, "method": kind, "params": params})
                    replies.append(answer_of(asked).get("error", {}).get("code"))
            elif MODE == "malformed":
                asked += 1
                send({"id": asked, "method": "elicitation/create", "params": {"message": "?", "requestedSchema": 7}})
                replies.append(answer_of(asked).get("error", {}).get("code"))
            elif MODE == "endless":
                while True:
                    asked += 1
                    send({"id": asked, "method": "elicitation/create",
                          "params": {"message": f"Again ({asked})?", "requestedSchema": SCHEMA}})
                    if answer_of(asked).get("cancelled"):
                        break  # the client gave up on the call: so does this server
            send({"id": request_id, "result": {"content": [{"type": "text", "text": json.dumps(replies)}]}})
        else:
            send({"id": request_id, "error": {"code": -32601, "message": "Method not found"}})


if __name__ == "__main__":
    main()
