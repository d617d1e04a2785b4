"""Every module the tests import is declared in pyproject.toml.

The first wave's `.ci/run` passed on the development machine while a fresh virtual
environment failed at collection: a test imported `yaml`, which only the machine's own
Python had. `.ci/run` now builds its own virtual environment; this test is the fast
guard that says which import is undeclared, wherever the suite runs.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# Modules that live in this repository (tests import each other and their harness).
_LOCAL_ROOTS = {"mimir", "tests", "harness", "support", "conftest", "zoo"}


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> set[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    specs = list(project["dependencies"])
    for extra in ("test", "gpu"):
        specs += project["optional-dependencies"].get(extra, [])
    return {_canonical(re.split(r"[<>=!~\[; ]", s, maxsplit=1)[0]) for s in specs}


def _local_modules() -> set[str]:
    names = set(_LOCAL_ROOTS)
    for path in (REPO / "tests").rglob("*.py"):
        names.add(path.stem)
    for path in (REPO / "tests").rglob("__init__.py"):
        names.add(path.parent.name)
    return names


def _imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def _test_sources() -> list[Path]:
    skip = ("fixtures", "kernels", "projects", "torch_programs")
    return [
        p
        for p in sorted((REPO / "tests").rglob("*.py"))
        if not any(part in skip for part in p.relative_to(REPO / "tests").parts)
    ]


def test_every_third_party_import_of_the_tests_is_declared() -> None:
    declared = _declared()
    local = _local_modules()
    providers = metadata.packages_distributions()
    undeclared: dict[str, list[str]] = {}
    for path in _test_sources():
        for root in _imported_roots(path):
            if root in sys.stdlib_module_names or root in local or root == "__future__":
                continue
            dists = {_canonical(d) for d in providers.get(root, [root])}
            if not dists & declared:
                undeclared.setdefault(root, []).append(str(path.relative_to(REPO)))
    assert not undeclared, (
        "imported by the tests but not declared in pyproject.toml's dependencies or the "
        f"`test`/`gpu` extras: {undeclared}"
    )


def test_the_guard_sees_an_undeclared_import(tmp_path: Path) -> None:
    # The guard itself must bite: `yaml` is what the first wave forgot.
    probe = tmp_path / "probe.py"
    probe.write_text("import yaml\nfrom pathlib import Path\nimport os.path\n")
    assert _imported_roots(probe) == {"yaml", "pathlib", "os"}
    assert "pyyaml" in _declared()
    assert "not-a-declared-distribution" not in _declared()
