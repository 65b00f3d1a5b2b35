#!/usr/bin/env bash
# Runs the official MCP conformance suite's client scenarios against mrtr.Client, through
# tests/conformance/client.py: every client scenario the 2026-07-28 and 2025-11-25
# requirement lists name (authorization included), each at its own spec version, and the
# client-credentials extension scenarios. Expects the suite and Node in .cache/node, which
# .ci/conformance.sh installs (run that first). Results go to .cache/conformance/client/.
#
# Usage: .ci/conformance-client.sh [--write-report]
#   --write-report   also rewrite the client section of docs/conformance.md
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE="${MRTR_CONFORMANCE_CACHE:-.cache/node}"
RESULTS="${MRTR_CONFORMANCE_RESULTS:-.cache/conformance}"
if [ ! -f "$CACHE/node_modules/@modelcontextprotocol/conformance/package.json" ]; then
    echo "conformance-client.sh: the suite is not installed in $CACHE; run .ci/conformance.sh first" >&2
    exit 1
fi
args=(--out "$RESULTS/client" --cache "$CACHE")
if [ "${1:-}" = "--write-report" ]; then
    args+=(--write docs/conformance.md)
fi
started=$(date +%s)
.venv/bin/python tests/conformance/client_run.py "${args[@]}"
echo "== client conformance finished in $(( $(date +%s) - started )) s"
