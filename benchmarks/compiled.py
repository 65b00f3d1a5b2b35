"""The hot modules compiled with mypyc against the same modules in pure Python (ADR 0019).

Usage: ``python -m benchmarks.compiled [--pairs N] [--batch SECONDS] [--json PATH]``
(needs mypy, which ships mypyc: the ``test`` extra; and a C compiler with the Python
headers; the build and the timing take about a minute and a half together on two cores)

Not a part of ``python -m benchmarks``: it builds C extensions, which no quick run should.
It never writes into the checkout: two copies of ``mrtr/`` go into a temporary directory,
the same :data:`ADJUSTMENTS` are made to both (so the only difference between them is the
compilation), :data:`MODULES` are compiled in one of them, and each copy is timed in a child
process of its own (``sys.path`` starts with the copy; the child refuses to time a copy whose
modules are not what it expects, compiled or not, whose Structs lost their annotations, or in
which a class left as Python subclasses a compiled one).

The figures, in CPU time of the child's thread, the candidates in interleaved batches
(A B C ..., ... C B A) so a burst of load from elsewhere lands on both copies alike:

- part 1's round at k = 1, 5, 10, 100 (:mod:`benchmarks.replay_overhead`): ``(a) mrtr``,
  the token carrier's round, and ``(a) mrtr, full dispatch``, the same round through
  ``Server.handle``;
- the plain ``tools/call`` in process (:mod:`benchmarks.middleware`'s request, no middleware):
  a first-round call of a sync ``echo`` through ``Server.handle``.

The ratio is pure / compiled per call (above 1 is a gain); the spread is the largest batch
over the smallest of each candidate.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import mrtr

from .common import ROOT, BatchChild, interleave, log

PACKAGE = Path(mrtr.__file__).resolve().parent
"""The package copied and compiled: the one imported, the checkout's or an installed copy."""

MODULES = (
    "mrtr/core/codec.py",
    "mrtr/core/interpretation.py",
    "mrtr/core/live.py",  # not hot, but it subclasses interpretation's Interpretation: see the child's check
    "mrtr/core/replay.py",
    "mrtr/core/driving.py",
    "mrtr/core/ledger.py",
    "mrtr/core/effects.py",
    "mrtr/core/handlers.py",
    "mrtr/core/checks.py",
    "mrtr/core/outcomes.py",
    "mrtr/carriers/sealed.py",
    "mrtr/carriers/contract.py",
    "mrtr/server/modern.py",
    "mrtr/server/results.py",
)
"""The modules compiled: where part 1's round and the plain call spend their time (cProfile), less
those mypyc refuses or miscompiles (:data:`LEFT_OUT`)."""

LEFT_OUT = {
    "mrtr/core/forms.py": "mypyc's internal error on RequestedSchema.from_form (cls.__new__ of a __slots__ class)",
    "mrtr/core/context.py": "compiles, then Context.of_request fails: object.__new__(Context) is not safe",
    "mrtr/server/dispatch.py": "async generators are unimplemented in mypyc",
    "mrtr/server/catalog.py": "MountedCatalog overrides Catalog's attributes with properties, refused in native classes",
}
"""Hot modules not compiled, and why."""

_STRUCTS = '''"""The msgspec Structs of ledger and codec, kept out of the compiled modules."""

from __future__ import annotations

from typing import Any

import msgspec

from .kinds import KINDS

KEY_PREFIX: dict[int, str] = {int(kind): row.key_prefix for kind, row in KINDS.items()}


'''

ADJUSTMENTS: tuple[tuple[str, str, str], ...] = (
    # A msgspec Struct defined in a compiled module loses its annotations: mypyc turns
    # ``str | None`` into ``type`` and ``tuple[Slot, ...]`` into ``tuple``, so the token's
    # decoder refuses every token (or, worse, would stop checking its slots). The two
    # Structs move to a module that stays Python.
    ("mrtr/core/ledger.py", "move", "class Slot(msgspec.Struct|class Ledger:"),
    ("mrtr/core/codec.py", "move", "class RequestState(msgspec.Struct|_encoder = msgspec"),
    # A native class cannot inherit from an exception other than Exception itself.
    ("mrtr/core/effects.py", "non-native", "class NotYielded(AttributeError):"),
    ("mrtr/core/effects.py", "non-native", "class NotYieldedUse(TypeError):"),
    # A native class has no ``__dict__``; ``vars(cls)`` is the same mapping in Python.
    ("mrtr/core/effects.py", "replace", '"kind" in cls.__dict__|"kind" in vars(cls)'),
)
"""What the compiled copy needs changed, made to both copies: ``(file, how, what)``."""


def adjust(package: Path) -> None:
    """Make :data:`ADJUSTMENTS` to the copy of ``mrtr`` at ``package`` (its parent holds ``mrtr/``)."""
    structs = _STRUCTS
    decorated: set[str] = set()
    for name, how, what in ADJUSTMENTS:
        path = package / name
        text = path.read_text()
        if how == "move":
            start, end = what.split("|")
            i = text.index(start)
            j = text.index(end, i)
            structs += text[i:j]
            text = text[:i] + "from ._structs import " + start.split()[1].split("(")[0] + "\n\n\n" + text[j:]
        elif how == "non-native":
            assert text.count(f"\n{what}\n") == 1, (name, what)
            text = text.replace(f"\n{what}\n", f"\n@_mypyc_attr(native_class=False)\n{what}\n")
            if name not in decorated:
                anchor = "\nfrom __future__ import annotations\n"
                assert anchor in text, name
                text = text.replace(anchor, anchor + "\nfrom mypy_extensions import mypyc_attr as _mypyc_attr\n", 1)
                decorated.add(name)
        else:
            old, new = what.split("|")
            assert text.count(old) == 1, (name, old)
            text = text.replace(old, new)
        path.write_text(text)
    (package / "mrtr" / "core" / "_structs.py").write_text(structs)


def build(where: Path) -> tuple[Path, Path]:
    """The pure and the compiled copy of ``mrtr`` under ``where``: ``(pure, compiled)``, each holding ``mrtr/``."""
    copies = where / "pure", where / "compiled"
    for copy in copies:
        shutil.copytree(PACKAGE, copy / "mrtr", ignore=shutil.ignore_patterns("__pycache__"))
        adjust(copy)
    compiled = copies[1]
    (compiled / "mypy.ini").write_text("[mypy]\npython_version = 3.11\n\n"
                                       "[mypy-opentelemetry.*,watchfiles.*,jsonschema,jsonschema.*]\n"
                                       "ignore_missing_imports = True\n")
    log(f"mypyc: compiling {len(MODULES)} modules (under a minute on two cores)")
    done = subprocess.run([sys.executable, "-m", "mypyc", *MODULES], cwd=compiled, capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"mypyc failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    return copies


_CHILD = r'''
import json, sys
sys.path.insert(0, sys.argv[1])
sys.path.insert(1, sys.argv[2])
import mrtr
assert mrtr.__file__.startswith(sys.argv[1]), mrtr.__file__
compiled = sys.argv[3] == "compiled"
import importlib
for name in json.loads(sys.argv[4]):
    module = importlib.import_module(name[:-3].replace("/", "."))
    assert module.__file__.endswith(".so") == compiled, module.__file__
from mrtr.core.codec import RequestState
assert RequestState.__annotations__["principal"] == "str | None", RequestState.__annotations__
# A class in a module left as Python cannot subclass a compiled one: it fails when first
# instantiated ("interpreted classes cannot inherit from compiled"), not when imported.
import inspect, pkgutil
modules = [importlib.import_module(info.name) for info in pkgutil.walk_packages(mrtr.__path__, "mrtr.")]
native = {m.__name__ for m in modules if compiled and m.__file__.endswith(".so")}
for module in modules:
    for cls in vars(module).values():
        if inspect.isclass(cls) and cls.__module__ == module.__name__ and module.__name__ not in native:
            assert not [b for b in cls.__mro__[1:] if b.__module__ in native], cls

from mrtr import Server
from benchmarks.common import drive, serve_batches
from benchmarks.replay_overhead import MrtrRounds

MESSAGE = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
    "name": "echo", "arguments": {"text": "ok"},
    "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
              "io.modelcontextprotocol/clientCapabilities": {}}}}
server = Server("bench-compiled", secret=b"w" * 32)


@server.tool
def echo(text: str) -> str:
    return text


assert drive(server.handle(MESSAGE))["result"]["content"][0]["text"] == "ok"
calls = {"plain tools/call": lambda: drive(server.handle(MESSAGE))}
for k in json.loads(sys.argv[5]):
    rounds = MrtrRounds(k)
    calls[f"round k={k}"] = lambda r=rounds: r.wire_round(r.params)
    calls[f"full dispatch k={k}"] = rounds.full_round
serve_batches(calls)
'''


def _child(copy: Path, compiled: bool, ks: list[int]) -> BatchChild:
    """One copy of ``mrtr`` in a child process, timing batches of one call on demand."""
    return BatchChild([sys.executable, "-c", _CHILD, str(copy), str(ROOT), "compiled" if compiled else "pure",
                       json.dumps(MODULES), json.dumps(ks)], copy, f"the {'compiled' if compiled else 'pure'} copy")


def measure(pure: Path, compiled: Path, *, ks: list[int], pairs: int, batch_s: float) -> dict[str, Any]:
    """Per call: each copy's median, spread and samples, and the ratio pure / compiled."""
    children = {"pure": _child(pure, False, ks), "compiled": _child(compiled, True, ks)}
    try:
        names = children["pure"].calls
        candidates = {f"{name} | {copy}": child.candidate(name) for name in names
                      for copy, child in children.items()}
        timings = interleave(candidates, pairs=pairs, batch_s=batch_s)
    finally:
        for child in children.values():
            child.close()
    rows = {}
    for name in names:
        one, other = timings[f"{name} | pure"], timings[f"{name} | compiled"]
        rows[name] = {"pure_us": one["median"] * 1e6, "compiled_us": other["median"] * 1e6,
                      "ratio": one["median"] / other["median"], "spread_pure": one["spread"],
                      "spread_compiled": other["spread"],
                      # the ratio's range over the batches: worst and best pairing of the two
                      "ratio_low": one["min"] / other["max"], "ratio_high": one["max"] / other["min"]}
    return rows


def table(rows: dict[str, Any]) -> str:
    """The figures as markdown."""
    lines = ["| per call | pure Python (µs) | compiled (µs) | pure / compiled | range over batches | spread pure, compiled |",
             "|---|---|---|---|---|---|"]
    for name, row in rows.items():
        lines.append(f"| {name} | {row['pure_us']:.1f} | {row['compiled_us']:.1f} | {row['ratio']:.2f}x | "
                     f"{row['ratio_low']:.2f}-{row['ratio_high']:.2f}x | "
                     f"{row['spread_pure']:.2f}, {row['spread_compiled']:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compiled", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ks", default="1,5,10,100", help="the k of part 1's round, comma-separated")
    parser.add_argument("--pairs", type=int, default=7, help="batches of each candidate, in interleaved turns")
    parser.add_argument("--batch", type=float, default=0.1, help="seconds of CPU per batch")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    try:
        import mypyc  # noqa: F401
    except ImportError:
        print("mypyc is needed: pip install -e '.[test]' (mypy ships it)", file=sys.stderr)
        return 1
    ks = [int(k) for k in args.ks.split(",") if k.strip()]
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    with tempfile.TemporaryDirectory(prefix="mrtr-compiled-") as tmp:
        pure, compiled = build(Path(tmp))
        log(f"timing {len(ks) * 2 + 1} calls in each copy, {args.pairs} interleaved batches each")
        load_timing = " ".join(f"{x:.2f}" for x in os.getloadavg())
        rows = measure(pure, compiled, ks=ks, pairs=args.pairs, batch_s=args.batch)
    load_after = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(table(rows))
    print(f"\nload average: {load_before} before the build, {load_timing} before the timing, {load_after} after; "
          f"compiled: {', '.join(MODULES)}")
    if args.json:
        args.json.write_text(json.dumps({"load": [load_before, load_timing, load_after], "pairs": args.pairs,
                                         "batch_s": args.batch, "modules": list(MODULES), "rows": rows},
                                        indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
