"""The package's shape: the typing marker ships, no module passes the ceiling, no import cycle.

ruff and mypy --strict are not run from here: `bash scripts/test.sh` (and so CI) runs them as
their own step (ruff before the suite, mypy beside it).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).parents[1]


def test_py_typed_marker_ships() -> None:
    assert (ROOT / "flux_chroma" / "py.typed").exists()


MAX_MODULE_LINES = 600
"""The hard ceiling, against 1,300-line files. About 400 lines is a guideline (house style), not a
rule: a cohesive module may pass it; splitting one into 30-line pieces to stay under it is worse."""
PACKAGE = ROOT / "flux_chroma"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(tree: ast.Module, name: str, is_package: bool, modules: frozenset[str] = frozenset()) -> set[str]:
    """Every module the code imports: module level AND inside functions and classes.

    A function-level import still ties the two modules together (it only moves the cycle from
    import time to call time), so it counts. Only ``if TYPE_CHECKING:`` blocks are left out:
    they never run. ``from package import submodule`` (every name a module in ``modules``)
    names the submodules, not the package's ``__init__``.
    """
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names = {f"{base}.{alias.name}" for alias in node.names}
            found.update(names)
            if not names <= modules:
                found.add(base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph() -> dict[str, set[str]]:
    """``module -> flux_chroma modules it imports`` (anywhere in its code, see :func:`imports_of`),
    with the packages those imports run first (see :func:`with_packages`)."""
    files = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        imported = imports_of(tree, name, path.name == "__init__.py", frozenset(files))
        graph[name] = {m for m in imported if m in files and m != name}
    packages = {_module_name(p) for p in files.values() if p.name == "__init__.py"}
    return with_packages(graph, packages - {"flux_chroma"})


def with_packages(graph: dict[str, set[str]], packages: set[str]) -> dict[str, set[str]]:
    """Add the implicit edges: importing ``pkg.sub.mod`` runs ``pkg/__init__`` and ``pkg/sub/__init__``
    first, so a module outside ``pkg`` that imports ``pkg.sub.mod`` imports ``pkg`` too.

    (A module inside ``pkg`` does not: ``pkg/__init__`` is already running when it loads.) Leave
    out a facade package that re-exports everything, such as the root ``flux_chroma``.
    """
    result: dict[str, set[str]] = {}
    for module, imported in graph.items():
        result[module] = set(imported)
        for target in imported:
            parts = target.split(".")
            for end in range(1, len(parts)):
                package = ".".join(parts[:end])
                if package in packages and package != module and not module.startswith(package + "."):
                    result[module].add(package)
    return result


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as ``[a, b, ..., a]``, or None."""
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    stack: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state:
                cycle = dfs(nxt)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = dfs(node)
            if cycle:
                return cycle
    return None


def test_no_module_is_over_the_ceiling() -> None:
    too_long = {
        str(p.relative_to(ROOT)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not too_long, (
        f"over the hard ceiling of {MAX_MODULE_LINES} lines: {too_long}. Split each along a cohesive seam "
        "(about 400 lines is a guideline, not a target: keep what belongs together in one module)"
    )


def test_no_import_cycle_among_package_modules() -> None:
    graph = import_graph()
    assert graph.get("flux_chroma.tasks.builtin")  # the graph is built
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_an_import_of_a_submodule_runs_its_package_first() -> None:
    # ingest/__init__ -> migrate -> quality.metrics -> ingest.chunking ran ingest/__init__ while it was
    # still running: a cycle that only the root's import order kept harmless.
    graph = {
        "p": {"p.migrate"},
        "p.migrate": {"q.metrics"},
        "q": set(),
        "q.metrics": {"p.chunking"},
        "p.chunking": set(),
    }
    assert find_cycle(graph) is None
    assert find_cycle(with_packages(graph, {"p", "q"})) == ["p", "p.migrate", "q.metrics", "p"]


def test_imports_inside_functions_count_and_type_checking_ones_do_not() -> None:
    code = """
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from flux_chroma.errors import FluxChromaError
def f():
    from flux_chroma.embedding import identity
class C:
    def g(self):
        import flux_chroma.chroma.naming
"""
    found = imports_of(ast.parse(code), "flux_chroma.x", False, frozenset({"flux_chroma.embedding.identity"}))
    assert {"flux_chroma.embedding.identity", "flux_chroma.chroma.naming"} <= found
    assert "flux_chroma.errors" not in found
    assert "flux_chroma.embedding" not in found  # a submodule taken from its package
