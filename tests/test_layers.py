"""The shape of the code: imports between Mimir's modules run one way, and no module grows
past what a reader holds in mind.

A cycle means neither side can be read, tested or replaced on its own, so every import
counts here: at the top of a module, inside a function, under `TYPE_CHECKING`. The
boundaries checked are the "Architecture Invariant" lines of ARCHITECTURE.md about
imports. Static: the modules are parsed, never imported.
"""

from __future__ import annotations

import ast
import sys
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MIMIR = REPO / "mimir"

MAX_LINES = 1500

# Cycles still allowed, each to go.
ALLOWED_CYCLES: list[set[str]] = []

# Modules allowed past MAX_LINES, each with its reason.
ALLOWED_LONG: dict[str, str] = {}

# The kernel builders of mimir/codegen/kernels/ that are a kind of launch; the others
# there are what the kinds share.
KERNEL_KINDS = {
    "elementwise",
    "matmul",
    "narrow",
    "attention",
    "reduce",
    "moments",
    "argreduce",
    "softmax",
    "rows",
    "scan",
    "index_level",
}


@cache
def _modules() -> dict[str, Path]:
    """Every module of the `mimir` package, by dotted name."""
    found = {}
    for path in sorted(MIMIR.rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _named(target: str) -> str | None:
    """The module of `mimir` that an import of `target` names (a module, or a name in
    one), or None outside `mimir`."""
    modules = _modules()
    while target not in modules and "." in target:
        target = target.rpartition(".")[0]
    return target if target in modules else None


def _imports(module: str, top_level_only: bool = False) -> tuple[set[str], set[str]]:
    """(the `mimir` modules `module` imports, the other top-level packages it imports)."""
    path = _modules()[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    inside: set[str] = set()
    outside: set[str] = set()
    for node in nodes:
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*parts, base] if base else parts)
            targets = [f"{base}.{alias.name}" for alias in node.names]
        for target in targets:
            if target.split(".")[0] != "mimir":
                outside.add(target.split(".")[0])
            elif (named := _named(target)) is not None and named != module:
                inside.add(named)
    return inside, outside


@cache
def _graph() -> dict[str, set[str]]:
    return {m: _imports(m)[0] for m in _modules()}


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[set[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def _under(prefix: str) -> list[str]:
    return [m for m in _modules() if m == prefix or m.startswith(prefix + ".")]


def test_no_import_cycle_between_mimir_modules() -> None:
    cycles = _cycles(_graph())
    unexpected = [sorted(c) for c in cycles if c not in ALLOWED_CYCLES]
    assert not unexpected, f"import cycles (every import counts, in functions too): {unexpected}"
    gone = [sorted(c) for c in ALLOWED_CYCLES if c not in cycles]
    assert not gone, f"these cycles are gone: take them off ALLOWED_CYCLES: {gone}"


def test_no_module_is_longer_than_a_reader_holds() -> None:
    long = {
        m: n
        for m, path in _modules().items()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    unexpected = {m: n for m, n in long.items() if m not in ALLOWED_LONG}
    assert not unexpected, f"modules over {MAX_LINES} lines: {unexpected}"


def test_the_ir_imports_nothing_from_mimir() -> None:
    assert _graph()["mimir.codegen.ir"] == set()


def test_a_backend_imports_only_the_ir_side_of_codegen_and_never_another_backend() -> None:
    shared = {
        "mimir.codegen.ir",
        "mimir.codegen.lower",
        "mimir.codegen.helpers",
        "mimir.codegen.refusal",
        "mimir.codegen.mathlib",
        "mimir.codegen.backends.base",
    }
    targets = ["msl", "wgsl", "ptx", "spirv"]
    wrong = {}
    for module in _under("mimir.codegen.backends"):
        if module in ("mimir.codegen.backends", "mimir.codegen.backends.base"):
            continue
        own = next(t for t in targets if module.startswith(f"mimir.codegen.backends.{t}"))
        allowed = shared | set(_under(f"mimir.codegen.backends.{own}"))
        codegen = {m for m in _graph()[module] if m.startswith("mimir.codegen")}
        if codegen - allowed:
            wrong[module] = sorted(codegen - allowed)
    assert not wrong, f"backends importing past the IR: {wrong}"


def test_the_scheduler_plans_and_never_builds() -> None:
    builders = ("mimir.codegen.kernels", "mimir.codegen.passes", "mimir.codegen.backends")
    wrong = {
        m: sorted(d for d in _graph()[m] if d.startswith(builders) or d == "mimir.codegen")
        for m in _under("mimir.codegen.schedule")
    }
    assert not {m: d for m, d in wrong.items() if d}


def test_kernel_kinds_never_import_each_other() -> None:
    kinds = {f"mimir.codegen.kernels.{k}" for k in KERNEL_KINDS}
    assert kinds <= set(_modules()), "KERNEL_KINDS names a module that is not there"
    wrong = {}
    for module in _under("mimir.codegen.kernels"):
        if module == "mimir.codegen.kernels":
            continue  # the registry imports every kind
        imported = _graph()[module] & (kinds - {module})
        if imported:
            wrong[module] = sorted(imported)
        later = {
            d
            for d in _graph()[module]
            if d.startswith(("mimir.codegen.passes", "mimir.codegen.backends"))
        }
        if later:
            wrong[module] = sorted(later)
    assert not wrong, f"kernel modules importing a kind, a pass or a backend: {wrong}"


def test_only_the_language_server_knows_the_protocol() -> None:
    speakers = {m for m in _modules() if {"lsprotocol", "pygls"} & _imports(m)[1]}
    assert speakers <= set(_under("mimir.lsp")), sorted(speakers)


def test_the_shim_imports_only_the_standard_library() -> None:
    """What `import mimir.array` runs: the top-level imports of its modules, their parent
    packages, and so on; none outside the standard library."""
    seen: set[str] = set()
    todo = ["mimir.array"]
    third_party: dict[str, set[str]] = {}
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        inside, outside = _imports(module, top_level_only=True)
        outside -= set(sys.stdlib_module_names) | {"__future__"}
        if outside:
            third_party[module] = outside
        parts = module.split(".")
        todo += [".".join(parts[:k]) for k in range(1, len(parts))]
        todo += sorted(inside)
    assert not third_party, third_party


def test_every_kind_of_launch_has_a_builder() -> None:
    from mimir.codegen.kernels import BUILDERS
    from mimir.codegen.schedule.plan import PlanKind

    # an index-level function is built with its own schedule (`kernels.index_level`)
    assert set(BUILDERS) == set(PlanKind) - {PlanKind.GRID}
