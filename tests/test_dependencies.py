"""Every third-party package flux_chroma imports is declared in pyproject.toml.

The imports are read with ``ast`` (module level and inside functions alike), mapped from
import name to distribution with ``importlib.metadata.packages_distributions()``, and checked
against ``[project] dependencies`` and the optional extras (except ``test``, which users do
not install). A package that only arrives as a dependency of another one breaks the day that
other one drops it.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Import names that are not installed here, so packages_distributions() cannot name them.
KNOWN = {"yaml": "PyYAML"}


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(spec: str) -> str:
    return _canonical(re.split(r"[\s\[<>=!~;]", spec.strip(), maxsplit=1)[0])


def imported_modules(package: Path, root: Path = ROOT) -> dict[str, list[str]]:
    """``{top-level module: [file:line, ...]}`` of every absolute import under ``package``."""
    found: dict[str, list[str]] = {}
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                where = f"{path.relative_to(root)}:{node.lineno}"
                found.setdefault(name.split(".")[0], []).append(where)
    return found


def declared() -> set[str]:
    """Canonical names of the distributions pyproject.toml declares (dependencies and extras)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = list(project["dependencies"])
    for extra, extra_specs in project.get("optional-dependencies", {}).items():
        if extra != "test":
            specs += extra_specs
    return {_requirement_name(spec) for spec in specs}


def test_every_imported_package_is_declared() -> None:
    modules = imported_modules(ROOT / "flux_chroma")
    assert "chromadb" in modules and "flux" in modules  # the walk sees the package's imports
    distributions = packages_distributions()
    wanted = declared()
    missing = []
    for module, where in sorted(modules.items()):
        if module in sys.stdlib_module_names or module in ("__future__", "flux_chroma"):
            continue
        candidates = distributions.get(module) or [KNOWN.get(module, "")]
        if not any(_canonical(dist) in wanted for dist in candidates if dist):
            missing.append(f"{module} (distribution {' or '.join(candidates) or '?'}; {where[0]})")
    assert not missing, (
        "flux_chroma imports packages pyproject.toml does not declare: "
        + "; ".join(missing)
        + ". Add each to [project] dependencies (or the extra whose feature imports it) with a "
        "pinned major version, e.g. 'name>=X,<X+1'."
    )


def test_the_check_sees_an_undeclared_import(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "m.py").write_text("def f():\n    import yaml\n    from httpcore import SyncBackend\n")
    modules = imported_modules(package, tmp_path)
    assert modules == {"yaml": ["pkg/m.py:2"], "httpcore": ["pkg/m.py:3"]}
    assert _canonical(KNOWN["yaml"]) not in declared()  # so an `import yaml` would be reported

