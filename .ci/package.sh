#!/usr/bin/env bash
# The package as users get it, not the checkout: builds the sdist and the wheel, checks them
# (twine, the same wheel again from the sdist, every package file in the wheel), installs the
# wheel (never editable) into fresh virtualenvs, bare and with each extra, and runs the test
# suite and the commands against that installed copy. Called by .ci/run; about 12 minutes on
# two cores, most of it the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WORK=$(mktemp -d "${TMPDIR:-/tmp}/mrtr-package.XXXXXX")
SERVER_PID=""
cleanup() {
    if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT
step() { printf '\n== package: %s (%ss)\n' "$1" "$SECONDS"; }

# build and twine at the versions the `package` extra pins (read from pyproject, written once).
step "build tools"
python3 -m venv "$WORK/tools"
PINS=$(python3 -c 'import tomllib; print(" ".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["package"]))')
# shellcheck disable=SC2086
"$WORK/tools/bin/pip" install -q --disable-pip-version-check $PINS

# The build's file-by-file listing goes to a log, shown when it fails.
quietly() { "$@" >"$WORK/log" 2>&1 || { cat "$WORK/log"; return 1; }; }

step "sdist and wheel"
# setuptools reuses build/: a file deleted from mrtr/ could otherwise reach the wheel.
rm -rf dist build
quietly "$WORK/tools/bin/python" -m build --outdir dist .
SDIST=$(ls dist/mrtr-*.tar.gz)
WHEEL=$(ls dist/mrtr-*.whl)
"$WORK/tools/bin/twine" check --strict "$SDIST" "$WHEEL"

step "the wheel again, from the sdist"
mkdir "$WORK/sdist"
tar -xzf "$SDIST" -C "$WORK/sdist"
quietly "$WORK/tools/bin/python" -m build --wheel --outdir "$WORK/rebuilt" "$WORK"/sdist/mrtr-*
python3 .ci/check_dist.py "$SDIST" "$WHEEL" "$(ls "$WORK"/rebuilt/mrtr-*.whl)"

VERSION=$(python3 -c 'import re; print(re.search(r"__version__ = \"(.+)\"", open("mrtr/_version.py").read())[1])')
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# A fresh virtualenv with the wheel and the given extras; prints nothing, fails loudly.
install() {  # install NAME EXTRAS
    python3 -m venv "$WORK/$1"
    "$WORK/$1/bin/pip" install -q --disable-pip-version-check "$ROOT/$WHEEL${2:+[$2]}"
}

# Checks run from $WORK (no mrtr/ there), so `mrtr` can only be the installed copy.
installed_copy() {  # installed_copy VENV: the import resolves to site-packages, the version is ours
    (cd "$WORK" && "$1/bin/python" -c "
import mrtr, sys
assert '/site-packages/mrtr/' in mrtr.__file__, mrtr.__file__
assert mrtr.__version__ == sys.argv[1], (mrtr.__version__, sys.argv[1])
" "$VERSION")
    [ "$(cd "$WORK" && "$1/bin/mrtr" --version)" = "mrtr $VERSION" ]
    [ "$(cd "$WORK" && "$1/bin/python" -m mrtr --version)" = "mrtr $VERSION" ]
}

# Start `mrtr serve` (the bundled example server) from VENV on a free port; sets URL.
serve() {
    local port
    port=$(free_port)
    URL="http://127.0.0.1:$port/mcp"
    (cd "$WORK" && exec "$1/bin/mrtr" serve --port "$port" --no-access-log >"$WORK/serve.log") &
    SERVER_PID=$!
    "$1/bin/python" - "$URL" <<'EOF'
import sys, time, urllib.error, urllib.request
deadline = time.monotonic() + 30
while True:
    try:
        urllib.request.urlopen(sys.argv[1], timeout=1)
        break
    except urllib.error.HTTPError:
        break  # any HTTP answer: it is serving
    except OSError:
        if time.monotonic() > deadline:
            sys.exit(f"mrtr serve did not answer on {sys.argv[1]}")
        time.sleep(0.1)
EOF
}
stop_serving() { kill "$SERVER_PID"; wait "$SERVER_PID" || true; SERVER_PID=""; }

step "bare install: python -m mrtr, mrtr serve answering a raw call"
install bare ""
installed_copy "$WORK/bare"
(cd "$WORK" && "$WORK/bare/bin/python" -m mrtr.examples.onboarding >/dev/null)
serve "$WORK/bare"
"$WORK/bare/bin/python" - "$URL" <<'EOF'
import json, sys, urllib.request
body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
    "name": "onboard", "arguments": {"company": "Acme"},
    "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
              "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}}}
request = urllib.request.Request(sys.argv[1], json.dumps(body).encode(), headers={
    "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "onboard"})
answer = json.load(urllib.request.urlopen(request, timeout=30))
assert answer["result"]["resultType"] == "input_required", answer
EOF
stop_serving

# Each extra alone: it installs, and what it powers imports and works.
step "each extra alone"
install x-client client
installed_copy "$WORK/x-client"
serve "$WORK/x-client"
# mrtr call answers the wizard's questions from a pipe, as the README's terminal session does.
OUT=$(cd "$WORK" && printf 'Ada Lovelace\nada@example.com\n2\n1\n\n1\n' | "$WORK/x-client/bin/mrtr" call "$URL" onboard company=Acme)
stop_serving
echo "$OUT" | "$WORK/x-client/bin/python" -c '
import json, sys
text = sys.stdin.read()
result = json.loads(text[text.index("{"):])
assert result == {"company": "Acme", "admin": "Ada Lovelace", "email": "ada@example.com", "plan": "team",
                  "region": "eu", "channels": ["email"]}, text'
for pair in "auth:import mrtr.auth, joserfc; mrtr.auth.JWTVerifier" \
            "redis:import coredis, mrtr.carriers.tasks.redis" \
            "dev:import watchfiles, mrtr.cli.reload" \
            "otel:import opentelemetry.trace, mrtr.transports.telemetry" \
            "pydantic:import pydantic, mrtr.core.models"; do
    extra=${pair%%:*}
    install "x-$extra" "$extra"
    (cd "$WORK" && "$WORK/x-$extra/bin/python" -c "${pair#*:}")
    rm -rf "${WORK:?}/x-$extra"
done

step "every extra and the test suite, against the installed copy"
install full "client,auth,redis,dev,otel,pydantic,test"
installed_copy "$WORK/full"
# The tests, docs, benchmarks and CI files of the checkout, without the package itself.
mkdir "$WORK/tree"
git ls-files -z | grep -zv '^mrtr/' | xargs -0 cp --parents -t "$WORK/tree"
# The pinned peers' virtualenvs (SDK 1.x, FastMCP) are reused from the checkout's cache.
if [ -d "$ROOT/.cache" ]; then ln -s "$ROOT/.cache" "$WORK/tree/.cache"; fi
serve "$WORK/full"
OUT=$(cd "$WORK" && printf 'Ada Lovelace\nada@example.com\n2\n1\n\n1\n' | "$WORK/full/bin/mrtr" call "$URL" onboard company=Acme)
stop_serving
echo "$OUT" | grep -q '"admin": "Ada Lovelace"'
cd "$WORK/tree"
MRTR_INSTALLED_COPY=1 "$WORK/full/bin/python" -m pytest -p no:cacheprovider
cd "$ROOT"
step "done"
