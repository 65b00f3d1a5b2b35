"""The docs cannot drift from the API: every Python block is checked, every example program runs.

The rule (docs/index.md, "How these pages are checked"): a whole program, one that defines
or imports every name it uses and starts something (``trio.run``, ``anyio.run``,
``asyncio.run`` or an ``if __name__ == "__main__":`` guard), is a file in docs/examples/
that the page includes, and the README carries a verbatim copy of one. Every other block is
a fragment: it compiles, each name it takes from ``mrtr`` exists, and one that is
self-contained and imports only what is installed runs in a fresh interpreter. Each example
file is run against a real server here or in the test named for it. And every public name
of the documented modules has a docstring (docs/public_names.py, also the site's build hook).
"""

from __future__ import annotations

import ast
import builtins
import importlib
import importlib.util
import os
import subprocess
import sys
import symtable
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import clean_env, free_port, http_server, module_from_file, pinned_venv

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "docs" / "examples"
PAGES = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]
INCLUDE_PREFIX = '--8<-- "docs/examples/'
LOOPS = {("trio", "run"), ("anyio", "run"), ("asyncio", "run")}
# What the example client prints: the onboarding wizard's result for the README's answers.
ONBOARDED = {"company": "Acme", "admin": "Ada Lovelace", "email": "ada@example.com", "plan": "team",
             "region": "eu", "channels": ["email"]}


def python_blocks(text: str) -> Iterator[tuple[int, str]]:
    """Each ```python block of a Markdown text: the line its fence opens on, and its body."""
    lines = text.splitlines(keepends=True)
    index = 0
    while index < len(lines):
        if lines[index].rstrip("\n") == "```python":
            start, body = index + 1, []
            index += 1
            while index < len(lines) and lines[index].rstrip("\n") != "```":
                body.append(lines[index])
                index += 1
            yield start, "".join(body)
        index += 1


def all_blocks() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for line, body in python_blocks(page.read_text()):
            found.append((f"{page.relative_to(ROOT)}:{line}", body))
    return found


BLOCKS = all_blocks()


def included(body: str) -> str | None:
    """The docs/examples file a block includes, or None for a block written out on the page."""
    stripped = body.strip()
    if stripped.startswith(INCLUDE_PREFIX) and stripped.endswith('"') and "\n" not in stripped:
        return stripped[len('--8<-- "'):-1]
    return None


def free_names(code: str) -> set[str]:
    """Names a block uses that it neither defines nor imports, builtins aside."""
    table = symtable.symtable(code, "<block>", "exec")
    bound = {symbol.get_name() for symbol in table.get_symbols()
             if symbol.is_assigned() or symbol.is_imported() or symbol.is_namespace()}
    free: set[str] = set()

    def walk(scope: symtable.SymbolTable) -> None:
        for symbol in scope.get_symbols():
            name = symbol.get_name()
            if (symbol.is_referenced() and (scope is table or symbol.is_global())
                    and name not in bound and not hasattr(builtins, name)):
                free.add(name)
        for child in scope.get_children():
            walk(child)

    walk(table)
    return free


def parse(code: str) -> ast.Module:
    tree = compile(code, "<block>", "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    assert isinstance(tree, ast.Module)
    return tree


def starts_something(tree: ast.Module) -> bool:
    for node in tree.body:
        if isinstance(node, ast.If) and "__name__" in ast.unparse(node.test):
            return True
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            func = node.value.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
                    (func.value.id, func.attr) in LOOPS:
                return True
    return False


def has_top_level_await(code: str) -> bool:
    """Whether a block awaits outside any function, as a fragment of a trio program may."""
    def visit(node: ast.AST) -> bool:
        if isinstance(node, (ast.AsyncFunctionDef, ast.FunctionDef, ast.Lambda)):
            return False
        if isinstance(node, (ast.Await, ast.AsyncWith, ast.AsyncFor)):
            return True
        return any(visit(child) for child in ast.iter_child_nodes(node))
    return visit(parse(code))


def is_whole_program(code: str) -> bool:
    return not has_top_level_await(code) and not free_names(code) and starts_something(parse(code))


def resolve(dotted: str) -> object:
    """The object ``mrtr.a.b`` names, importing submodules on the way; AssertionError if it is gone."""
    parts = dotted.split(".")
    obj: object = importlib.import_module(parts[0])
    for index, part in enumerate(parts[1:], start=1):
        if hasattr(obj, part):
            obj = getattr(obj, part)
            continue
        try:
            obj = importlib.import_module(".".join(parts[:index + 1]))
        except ModuleNotFoundError:
            raise AssertionError(f"{dotted}: {'.'.join(parts[:index])} has no {part!r}") from None
    return obj


def mrtr_names(tree: ast.Module) -> set[str]:
    """Every dotted name a block takes from mrtr: its imports and its ``mrtr.x.y`` attribute chains."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and \
                node.module.split(".")[0] == "mrtr":
            names.update(f"{node.module}.{alias.name}" for alias in node.names if alias.name != "*")
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names if alias.name.split(".")[0] == "mrtr")
        elif isinstance(node, ast.Attribute):
            chain, inner = [node.attr], node.value
            while isinstance(inner, ast.Attribute):
                chain.append(inner.attr)
                inner = inner.value
            if isinstance(inner, ast.Name) and inner.id == "mrtr":
                names.add(".".join(["mrtr", *reversed(chain)]))
    return names


def imports_installed(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots = [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots = [node.module.split(".")[0]]
        else:
            continue
        if any(importlib.util.find_spec(root) is None for root in roots):
            return False
    return True


# ------------------------------------------------------------------ the blocks on the pages

def test_the_pages_have_python_blocks_to_check():
    assert len(BLOCKS) > 30
    assert sum(included(body) is not None for _, body in BLOCKS) >= 3


@pytest.mark.parametrize(("where", "body"), BLOCKS, ids=[where for where, _ in BLOCKS])
def test_each_block_follows_the_rule(where: str, body: str):
    name = included(body)
    if name is not None:
        assert where.startswith("docs/"), f"{where}: the README is shown without includes; copy the file"
        assert (ROOT / name).is_file(), f"{where} includes {name}, which does not exist"
        return
    tree = parse(body)  # a SyntaxError fails here, naming the block
    if is_whole_program(body):
        copies = [path for path in EXAMPLES.glob("*.py") if path.read_text() == body]
        assert where.startswith("README.md"), (
            f"{where} is a whole program: move it to docs/examples/ and include it (--8<--)")
        assert copies, f"{where} is a whole program but no docs/examples/ file has exactly its text"
        return
    for dotted in sorted(mrtr_names(tree)):
        resolve(dotted)


def runnable(body: str) -> bool:
    """A fragment that needs nothing from elsewhere: it is run as it stands."""
    return included(body) is None and not is_whole_program(body) and not has_top_level_await(body) \
        and not free_names(body)


@pytest.mark.slow  # each block runs in a python of its own
@pytest.mark.parametrize(("where", "body"), [(where, body) for where, body in BLOCKS if runnable(body)],
                         ids=[where for where, body in BLOCKS if runnable(body)])
def test_each_self_contained_block_runs(where: str, body: str):
    if not imports_installed(parse(body)):
        pytest.skip(f"{where} imports a package this environment does not have")
    done = subprocess.run([sys.executable, "-c", body], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert done.returncode == 0, f"{where} fails when run:\n{done.stderr[-3000:]}"


def test_the_rule_tells_programs_from_fragments():
    program = "import trio\n\nasync def main():\n    print(1)\n\ntrio.run(main)\n"
    assert is_whole_program(program)
    assert is_whole_program("import x\n\nif __name__ == '__main__':\n    x.go()\n")
    assert not is_whole_program("import trio\ntrio.run(serve_http, server)\n")  # uses a name from elsewhere
    assert not is_whole_program("from mrtr import Server\nserver = Server('x')\n")  # starts nothing
    assert has_top_level_await("await serve_stdio(server)\n")
    assert not has_top_level_await("async def f():\n    await g()\n")
    assert mrtr_names(parse("import mrtr\nfrom mrtr.http import run_http\nmrtr.testing.run(f)\n")) == {
        "mrtr", "mrtr.http.run_http", "mrtr.testing", "mrtr.testing.run"}
    with pytest.raises(AssertionError, match="no 'run_forever'"):
        resolve("mrtr.http.run_forever")
    assert included('--8<-- "docs/examples/asgi_app.py"\n') == "docs/examples/asgi_app.py"


def test_every_example_file_is_shown_and_run():
    shown = {included(body) for _, body in BLOCKS} | {
        f"docs/examples/{path.name}" for path in EXAMPLES.glob("*.py")
        if any(body == path.read_text() for _, body in BLOCKS)}
    tests = "".join(path.read_text() for path in (ROOT / "tests").rglob("test_*.py") if path.name != "test_docs.py")
    for path in sorted(EXAMPLES.glob("*.py")):
        assert f"docs/examples/{path.name}" in shown, f"no page shows docs/examples/{path.name}"
        assert path.name in tests or path.name in RUN_HERE, f"no test runs docs/examples/{path.name}"


# ------------------------------------------------------------------ the example programs, run

RUN_HERE = {"client_onboarding.py", "sdk1_onboarding.py", "asgi_app.py"}


@pytest.fixture(scope="module")
def example_server() -> Iterator[str]:
    """``mrtr serve`` with the bundled example server, as the README starts it, on a free port."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with http_server([sys.executable, "-m", "mrtr", "serve", "--port", str(port), "--no-access-log"], url, cwd=ROOT):
        yield url


def run_example(python: str | Path, name: str, url: str, env: dict[str, str] | None = None) -> object:
    done = subprocess.run([str(python), str(EXAMPLES / name), url], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return ast.literal_eval(done.stdout.strip())


@pytest.mark.slow
def test_the_readme_client_example_runs_the_wizard(example_server: str):
    assert run_example(sys.executable, "client_onboarding.py", example_server) == ONBOARDED


@pytest.mark.slow
def test_the_readme_sdk1_example_runs_the_wizard(example_server: str):
    python = pinned_venv(ROOT / ".cache" / "legacy-venv", ROOT / "tests" / "legacy" / "requirements.txt",
                         "mcp", "1.30.0")
    assert run_example(python, "sdk1_onboarding.py", example_server, env=clean_env()) == ONBOARDED


@pytest.mark.slow
def test_the_asgi_example_serves_the_wizard_under_hypercorn():
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with http_server([sys.executable, str(EXAMPLES / "asgi_app.py")], url, cwd=ROOT,
                     env={**os.environ, "PORT": str(port)}):
        assert run_example(sys.executable, "client_onboarding.py", url) == ONBOARDED


# ------------------------------------------------------------------ docstrings

def _public_names():
    return module_from_file(ROOT / "docs" / "public_names.py")


@pytest.mark.slow
def test_every_public_name_has_a_docstring():
    public_names = _public_names()
    assert public_names.undocumented() == []
    # The site's build runs the same check.
    assert "- docs/public_names.py" in (ROOT / "mkdocs.yml").read_text()


@pytest.mark.slow
def test_the_docstring_check_names_what_is_missing(tmp_path: Path):
    package = tmp_path / "undocumented_pkg"
    package.mkdir()
    (package / "__init__.py").write_text(
        '"""A package."""\n'
        'from ._impl import Base, Thing, helper\n'
        '__all__ = ["Base", "Thing", "helper", "gone"]\n')
    (package / "_impl.py").write_text(
        'class Base:\n'
        '    """Documented."""\n'
        '    def run(self):\n'
        '        """Run it."""\n'
        'class Thing(Base):\n'
        '    """Documented."""\n'
        '    def run(self):\n'  # inherits the base's docstring
        '        pass\n'
        '    def stop(self):\n'
        '        pass\n'
        '    def _private(self):\n'
        '        pass\n'
        'def helper():\n'
        '    pass\n')
    gaps = _public_names().undocumented(["undocumented_pkg"], search_paths=[str(tmp_path)])
    assert gaps == ["undocumented_pkg.Thing.stop", "undocumented_pkg.helper",
                    "undocumented_pkg.gone (named in __all__ but not found)"]
