"""Which Python constructs a `@gpu` body may hold.

The kernel language is a subset of Python. This module finds every construct
outside it (strings, `try`, `while`, recursion, `global`, collection literals,
comprehensions, `print`, ...) and says why, with code GPU031. The checker uses
it to refuse those statements; the shim uses it on a kernel's first call so
that plain `python` raises the same code the checker reports.

Stdlib-only (the shim imports it).
"""

from __future__ import annotations

import ast
import builtins
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass

from mimir import ops

CODE = "GPU031"
_BUILTINS = frozenset(dir(builtins))


@dataclass(frozen=True)
class Violation:
    code: str
    message: str
    node: ast.AST


_STATEMENTS: dict[type, str] = {
    ast.While: "`while` loops",
    ast.Try: "`try` statements",
    ast.With: "`with` statements",
    ast.AsyncWith: "`async with` statements",
    ast.AsyncFor: "`async for` loops",
    ast.Raise: "`raise` statements",
    ast.Assert: "`assert` statements",
    ast.Import: "imports",
    ast.ImportFrom: "imports",
    ast.Global: "`global` declarations",
    ast.Nonlocal: "`nonlocal` declarations",
    ast.Delete: "`del` statements",
    ast.FunctionDef: "nested functions",
    ast.AsyncFunctionDef: "nested functions",
    ast.ClassDef: "class definitions",
    ast.Break: "`break` statements",
    ast.Continue: "`continue` statements",
    ast.Match: "`match` statements",
}
if hasattr(ast, "TryStar"):
    _STATEMENTS[ast.TryStar] = "`try` statements"

# Control flow that index-level kernels (`@gpu(grid=...)`) may hold.
_INDEX_LEVEL_ONLY: dict[type, str] = {
    ast.For: "`for` loops",
    ast.If: "`if` statements",
}

_EXPRESSIONS: dict[type, str] = {
    ast.JoinedStr: "strings",
    ast.List: "list literals (other than the tensors of `concatenate([a, b])` and `stack`)",
    ast.Dict: "dict literals",
    ast.Set: "set literals",
    ast.ListComp: "comprehensions",
    ast.SetComp: "comprehensions",
    ast.DictComp: "comprehensions",
    ast.GeneratorExp: "generator expressions",
    ast.Lambda: "lambdas",
    ast.IfExp: "conditional expressions (use `where`)",
    ast.Await: "`await`",
    ast.Yield: "`yield`",
    ast.YieldFrom: "`yield`",
    ast.NamedExpr: "assignment expressions (`:=`)",
    ast.Starred: "star-unpacking",
}


def violations(
    func: ast.FunctionDef, index_level: bool = False, shadowed: frozenset[str] = frozenset()
) -> Iterator[Violation]:
    """Every construct in `func`'s body that the kernel language cannot hold.

    `shadowed` names the builtins the kernel's module binds itself (`range = Dim("range")`):
    inside the kernel those names are the module's, as Python looks them up.
    """
    returned = False
    for stmt in func.body:
        if returned and not _is_docstring(stmt):
            # The checker refuses dead code too; the shim would never reach it.
            yield Violation(CODE, "unreachable code after `return`", stmt)
            return
        yield from statement_violations(stmt, func.name, index_level, shadowed)
        returned = returned or isinstance(stmt, ast.Return)


def statement_violations(
    stmt: ast.stmt,
    function_name: str,
    index_level: bool = False,
    shadowed: frozenset[str] = frozenset(),
) -> Iterator[Violation]:
    kind = type(stmt)
    if kind in _STATEMENTS:
        yield Violation(CODE, f"{_STATEMENTS[kind]} are not allowed inside `@gpu`", stmt)
        return
    if kind in _INDEX_LEVEL_ONLY:
        if not index_level and isinstance(stmt, ast.For):
            # Tensor-level: unrolled by the graph builder when its trip count is static.
            yield from _for_violations(stmt, function_name, shadowed, index_level=False)
            return
        if not index_level:
            yield Violation(
                CODE,
                f"{_INDEX_LEVEL_ONLY[kind]} are only allowed in index-level kernels "
                "(`@gpu(grid=...)`); use `where` and reductions in a tensor-level kernel",
                stmt,
            )
            return
        if isinstance(stmt, ast.For):
            yield from _for_violations(stmt, function_name, shadowed)
            return
    if kind is ast.Expr and _is_atomic_call(stmt.value):
        if not index_level:
            yield Violation(
                CODE,
                "`atomic_add` is only allowed in index-level kernels (`@gpu(grid=...)`); "
                "a tensor-level kernel sums with `.sum(axis=...)`",
                stmt,
            )
            return
        for child in stmt.value.args:
            yield from _expression_violations(child, function_name, index_level)
        return
    if kind is ast.Expr and not _is_docstring(stmt):
        # A bare expression does nothing in a kernel unless it is a call with effects.
        yield from _expression_violations(stmt.value, function_name, index_level)
        if not _has_violation(stmt.value, function_name, index_level):
            yield Violation(CODE, "an expression statement has no effect inside `@gpu`", stmt)
        return
    if kind is ast.Expr:
        return
    for child in ast.iter_child_nodes(stmt):
        if isinstance(child, ast.expr):
            yield from _expression_violations(child, function_name, index_level)
        elif isinstance(child, ast.stmt):
            yield from statement_violations(child, function_name, index_level, shadowed)


def _for_violations(
    stmt: ast.For, function_name: str, shadowed: frozenset[str], index_level: bool = True
) -> Iterator[Violation]:
    """`for NAME in range(...)` with no `else`: the only loop a kernel may hold."""
    it = stmt.iter
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id in shadowed:
        yield Violation(
            CODE,
            f"`{it.func.id}` is bound at module level, so this loop does not iterate over "
            "Python's `range`",
            it.func,
        )
        return
    if not (
        isinstance(it, ast.Call)
        and isinstance(it.func, ast.Name)
        and it.func.id == "range"
        and 1 <= len(it.args) <= 3
        and not it.keywords
    ):
        yield Violation(CODE, "a kernel `for` loop must iterate over `range(...)`", it)
        return
    if not isinstance(stmt.target, ast.Name):
        yield Violation(CODE, "a kernel `for` loop needs one loop variable", stmt.target)
        return
    if stmt.orelse:
        yield Violation(CODE, "`for ... else` is not allowed inside `@gpu`", stmt)
        return
    if not index_level:  # unrolled: the body is built once per iteration, straight-line
        for sub in ast.walk(stmt):
            if isinstance(sub, ast.Return):
                yield Violation(
                    CODE,
                    "`return` inside a `for` loop of a tensor-level kernel; assign in the "
                    "loop and return after it",
                    sub,
                )
                return
    for arg in it.args:
        yield from _expression_violations(arg, function_name, index_level)
    for child in stmt.body:
        yield from statement_violations(child, function_name, index_level, shadowed)


def _has_violation(expr: ast.expr, function_name: str, index_level: bool = False) -> bool:
    return next(_expression_violations(expr, function_name, index_level), None) is not None


def _expression_violations(
    expr: ast.expr, function_name: str, index_level: bool = False
) -> Iterator[Violation]:
    """Violations in `expr`, outermost first; nothing inside a violation is reported again."""
    found = _expression_violation(expr, function_name, index_level)
    if found is not None:
        yield found
        return
    for child in ast.iter_child_nodes(expr):
        if isinstance(expr, ast.Call) and child is expr.func and isinstance(child, ast.Attribute):
            child = child.value  # `x.relu()`: the method is called; look at its receiver
        if _is_einsum_spec(expr, child):
            continue  # the one string a kernel holds: parsed statically (`mimir.ops.einsum`)
        if _is_gelu_literal(expr, child):
            continue  # `.gelu(approximate="none")`: a literal that picks the op
        if isinstance(child, ast.keyword) and child.arg == "tensors":
            child = child.value  # `stack(tensors=[a, b])`
        if _is_joined_list(expr, child):
            # `concatenate([a, b])`: the list is the tuple of tensors the join takes
            for e in child.elts:  # type: ignore[attr-defined]
                yield from _expression_violations(e, function_name, index_level)
            continue
        if isinstance(child, ast.expr):
            yield from _expression_violations(child, function_name, index_level)
        else:  # slices in older ASTs, comprehension clauses, keywords
            for sub in ast.iter_child_nodes(child):
                if isinstance(sub, ast.expr):
                    yield from _expression_violations(sub, function_name, index_level)


_JOINS = ("concatenate", "stack")


def _is_joined_list(call: ast.expr, child: ast.AST) -> bool:
    """`child` is the list of tensors of a `concatenate`/`stack` call: its first positional
    argument or its `tensors=` keyword. A list anywhere else stays refused."""
    if not (isinstance(call, ast.Call) and isinstance(child, ast.List)):
        return False
    func = call.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    if name not in _JOINS:
        return False
    first = call.args[0] if call.args else None
    return child is first or any(k.arg == "tensors" and k.value is child for k in call.keywords)


def _expression_violation(
    node: ast.expr, function_name: str, index_level: bool = False
) -> Violation | None:
    kind = type(node)
    if kind in _EXPRESSIONS:
        return Violation(CODE, f"{_EXPRESSIONS[kind]} are not allowed inside `@gpu`", node)
    # Index-level kernels branch on single conditions, so `and`, `or`, `not` and chained
    # comparisons keep Python's short-circuit meaning there (the checker and every backend
    # evaluate a right operand only when the left one lets Python reach it). Tensor-level
    # code computes on whole boolean tensors, where only `&`, `|` and `~` mean anything.
    if isinstance(node, ast.BoolOp) and not index_level:
        return Violation(
            CODE,
            "`and`/`or` are not allowed in a tensor-level kernel (use `&` and `|`; they are "
            "allowed in index-level kernels)",
            node,
        )
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
        return Violation(CODE, "strings are not allowed inside `@gpu`", node)
    if isinstance(node, ast.Constant) and isinstance(node.value, complex):
        return Violation(CODE, "complex numbers are not allowed inside `@gpu`", node)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not) and not index_level:
        return Violation(CODE, "`not` is not allowed in a tensor-level kernel (use `~`)", node)
    if isinstance(node, ast.Compare) and len(node.ops) > 1 and not index_level:
        return Violation(
            CODE,
            "chained comparisons are not allowed in a tensor-level kernel "
            "(write `(a < b) & (b < c)`)",
            node,
        )
    if isinstance(node, ast.Compare) and isinstance(
        node.ops[0], (ast.Is, ast.IsNot, ast.In, ast.NotIn)
    ):
        return Violation(CODE, "`is` and `in` are not allowed inside `@gpu`", node)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.func.id == "print":
            return Violation(CODE, "`print` is not allowed inside `@gpu`", node)
        if node.func.id == function_name:
            return Violation(CODE, "recursion is not allowed inside `@gpu`", node)
        if node.func.id in _BUILTINS:
            return Violation(
                "GPU030", f"the Python builtin `{node.func.id}()` is not a kernel op", node
            )
    if isinstance(node, ast.Attribute) and node.attr in _METHODS:
        # `return x.relu`: a bound method is no tensor (reached only when not called)
        return Violation("GPU030", f"`.{node.attr}` is a method: call it as `.{node.attr}()`", node)
    if isinstance(node, ast.Slice) and node.step is not None and not _is_one(node.step):
        return Violation(CODE, "slice steps are not supported in the kernel language", node)
    return None


# Tensor methods of the op table (`.T` and `.shape` are attributes, used without a call).
_METHODS = frozenset(ops.BY_METHOD) - frozenset(ops.BY_ATTRIBUTE)


def _is_gelu_literal(call: ast.expr, child: ast.AST) -> bool:
    """Whether `child` is the literal string `approximate` of a `.gelu(...)` call."""
    if not (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "gelu"
    ):
        return False
    if isinstance(child, ast.keyword) and child.arg == "approximate":
        child = child.value
    return isinstance(child, ast.Constant) and isinstance(child.value, str)


def _is_einsum_spec(call: ast.expr, child: ast.AST) -> bool:
    """Whether `child` is the literal spec string of an `einsum(...)` call."""
    if not isinstance(call, ast.Call) or not call.args or child is not call.args[0]:
        return False
    func = call.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    return name == "einsum" and isinstance(child, ast.Constant) and isinstance(child.value, str)


def _is_one(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value == 1 and type(node.value) is int


def _is_atomic_call(node: ast.expr) -> bool:
    """`atomic_add(...)` (or `m.atomic_add(...)`): the one call that is a statement."""
    if not isinstance(node, ast.Call) or node.keywords:
        return False
    func = node.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    return name == "atomic_add"


def _is_docstring(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


def first_violation(
    source: str,
    function_name: str,
    index_level: bool = False,
    shadowed: frozenset[str] = frozenset(),
) -> Violation | None:
    """The first violation in the function `function_name` defined in `source`."""
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == function_name:
            return next(violations(node, index_level, shadowed), None)
    return None
