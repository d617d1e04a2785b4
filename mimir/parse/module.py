"""Module-level reading: imports, `Dim` declarations, int constants, `@gpu` functions.

Nothing is imported or executed: every fact comes from the `ast`. Names are
resolved the way Python would resolve them at module scope, through
`from mimir.array import ...` and `import mimir.array as ...`: each binding of a
name at module level replaces what the name meant before (`float32 = Dim(...)`
after importing `float32` makes it a dim, not a dtype), so a kernel sees the
last one, as its body does when it is called; a binding inside a module-level
`if`, `try`, `for`, ... leaves the name with no known meaning. A name the
module binds shadows the builtin of that name (`float`, `int`, `range`).
Decorators are read at the `def`, as Python evaluates them there.
"""

from __future__ import annotations

import ast
import functools
import math
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from mimir.diagnostics.diagnostic import Span
from mimir.dims import Dim, DimExpr, Size, binop
from mimir.dtypes import BY_NAME as DTYPES
from mimir.dtypes import DType
from mimir.parse.spans import SourceFile

MIMIR_ARRAY = "mimir.array"


@dataclass
class Problem:
    """A finding made while reading source, before any solving."""

    code: str
    message: str
    span: Span
    # Already reported elsewhere (a use of a `Dim` whose declaration failed): poison only.
    reported: bool = False
    function: str | None = None  # the kernel it belongs to (its decorator), if any


@dataclass
class DimDecl:
    dim: Dim
    span: Span


@dataclass
class TensorAnnotation:
    dtype: DType
    dims: list[Size]
    dim_spans: list[Span]
    span: Span
    # `Range(lo, hi)` after the sizes of an integer tensor: every element v has lo <= v < hi
    # (checked by the shim at the call, assumed by the checker, recorded in the manifest).
    value_range: tuple[Size, Size] | None = None
    # `InOut[Tensor[...]]`: a parameter the kernel may read and write; the caller's tensor
    # holds what the kernel wrote when it returns (manifest role `inout`)
    inout: bool = False


@dataclass
class ScalarAnnotation:
    kind: str  # "int" | "float"
    span: Span


@dataclass
class TupleAnnotation:
    """`-> tuple[Tensor[...], Tensor[...]]`: a kernel with several results (`out0`, `out1`...)."""

    items: list[TensorAnnotation]
    span: Span
    # the field names of a `NamedTuple` result type (the manifest's output names), else None
    names: list[str] | None = None


Annotation = TensorAnnotation | ScalarAnnotation


@dataclass
class KernelDef:
    node: ast.FunctionDef
    grid: ast.expr | None
    span: Span
    # `@gpu(precision=...)`: "float32" (exact), or "tf32" (matmul operands may be read as
    # TF32: tensor cores on PTX)
    precision: str = "float32"


@dataclass
class ModuleInfo:
    source: SourceFile
    tree: ast.Module
    # local name -> canonical name in mimir.array ("Tensor", "float32", "where", ...)
    imported: dict[str, str] = field(default_factory=dict)
    # local alias -> "mimir.array" (or "mimir" for `import mimir`)
    modules: dict[str, str] = field(default_factory=dict)
    dims: dict[str, DimDecl] = field(default_factory=dict)
    constants: dict[str, int] = field(default_factory=dict)
    # module-level float constants (`GELU_SCALING_FACTOR = 0.7978845608`, `SCALE = 1 /
    # math.sqrt(2.0)`): literals, `math.pi`, `math.e`, and arithmetic and `math` functions
    # of them, folded here; a kernel reads one as the literal it equals
    floats: dict[str, float] = field(default_factory=dict)
    kernels: list[KernelDef] = field(default_factory=list)
    # Filled by an import resolver (`mimir.project`): `@gpu` functions imported from other
    # modules of the project (local name -> their definition), and where each imported
    # name is declared (for go to definition).
    imported_kernels: dict[str, KernelDef] = field(default_factory=dict)
    # every top-level function imported from another module: local name -> (its module, def)
    imported_functions: dict[str, tuple[ModuleInfo, ast.FunctionDef]] = field(default_factory=dict)
    origins: dict[str, Span] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    # names bound to a `Dim(...)` whose declaration was refused (GPU034)
    bad_dims: set[str] = field(default_factory=set)
    # every name bound at module level (functions, classes, variables)
    module_names: set[str] = field(default_factory=set)
    # names bound to size arithmetic on dims and int constants (`D_HID = 4 * D_IN`)
    sizes: dict[str, DimExpr] = field(default_factory=dict)
    # a module-level name that is not a size, used as one: the span of its first use, where
    # it is reported (every later use is the same root cause)
    non_size_uses: dict[str, Span] = field(default_factory=dict)
    # `class Stats(NamedTuple)` with only annotated fields: a kernel's named results
    named_results: dict[str, ast.ClassDef] = field(default_factory=dict)

    def resolve(self, node: ast.expr) -> str | None:
        """The `mimir.array` name an expression refers to, if any."""
        if isinstance(node, ast.Name):
            return self.imported.get(node.id)
        if isinstance(node, ast.Attribute):
            base = dotted_name(node.value)
            module = None if base is None else self._module_of(base)
            if module == MIMIR_ARRAY:
                return node.attr
            if module == "math":  # `math.sqrt(D)`: a scalar function of the op table
                return f"math.{node.attr}"
        return None

    def _module_of(self, dotted: str) -> str | None:
        head, _, rest = dotted.partition(".")
        if head not in self.modules:
            return None
        full = self.modules[head] + ("." + rest if rest else "")
        return full


def dotted_name(node: ast.expr) -> str | None:
    """`a.b.c` for a chain of names and attributes, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted_name(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


ImportResolver = Callable[[ModuleInfo, ast.Import | ast.ImportFrom], None]


_BODIES = frozenset(("body", "orelse", "finalbody", "handlers", "cases"))


def walk_statements(tree: ast.AST) -> Iterator[ast.AST]:
    """The statements under `tree` (and the handlers and match cases holding some), in
    `ast.walk`'s order, never an expression's nodes: a few percent of what `ast.walk`
    visits, for the searches that want only imports, functions or classes."""
    todo = deque([tree])
    while todo:
        node = todo.popleft()
        yield node
        for name in node._fields:
            if name in _BODIES:
                children = getattr(node, name)
                if isinstance(children, list):
                    todo.extend(children)


def import_statements(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Every `import` in the module, nested ones too, in walk order.

    Computed once per tree (the host interpreter and the device rules both read it on
    every check, and the language server re-checks on every edit).
    """
    found = getattr(tree, "_mimir_imports", None)
    if found is None:
        found = [n for n in walk_statements(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
        tree._mimir_imports = found  # type: ignore[attr-defined]
    return found


def read_module(
    source: SourceFile, tree: ast.Module, resolve_import: ImportResolver | None = None
) -> ModuleInfo:
    """The module's facts. `resolve_import` (from `mimir.project`) adds what each
    top-level import of another module brings in, in statement order."""
    info = ModuleInfo(source=source, tree=tree)
    for stmt in tree.body:
        _read_statement(info, stmt)
        if resolve_import is not None and isinstance(stmt, (ast.Import, ast.ImportFrom)):
            resolve_import(info, stmt)
    return info


def _rebind(info: ModuleInfo, name: str) -> None:
    """`name` is bound again at module level: forget what it meant before."""
    tables = (
        info.imported,
        info.modules,
        info.dims,
        info.constants,
        info.floats,
        info.sizes,
        info.imported_kernels,
        info.imported_functions,
        info.named_results,
    )
    for table in tables:
        table.pop(name, None)
    info.bad_dims.discard(name)
    info.module_names.add(name)


@functools.cache
def _kernel_language() -> frozenset[str]:
    """The names `mimir.array` exports (`Dim`, `Tensor`, `gpu`, the dtypes, ...)."""
    from mimir import array

    return frozenset(array.__all__)


def _read_statement(info: ModuleInfo, stmt: ast.stmt) -> None:
    if isinstance(stmt, ast.ImportFrom) and stmt.module in ("mimir.array", "mimir"):
        misplaced = []
        for alias in stmt.names:
            local = alias.asname or alias.name
            _rebind(info, local)
            if stmt.module == "mimir.array":
                info.imported[local] = alias.name
            elif alias.name == "array":
                info.modules[local] = MIMIR_ARRAY
            elif alias.name in _kernel_language():
                misplaced.append(alias)
        if misplaced:
            # `from mimir import gpu` fails when the file runs, and no `@gpu` here would be
            # recognised: say so once, rather than check nothing and report no issues
            names = ", ".join(f"`{a.name}`" for a in misplaced)
            spelled = ", ".join(ast.unparse(a) for a in misplaced)
            info.problems.append(
                Problem(
                    "GPU082",
                    f"`mimir` has no {names}: the kernel language is `mimir.array`; write "
                    f"`from mimir.array import {spelled}`",
                    info.source.span(misplaced[0]),
                )
            )
        return
    if isinstance(stmt, ast.Import):
        for alias in stmt.names:
            _rebind(info, (alias.asname or alias.name).split(".")[0])
            if alias.name in ("mimir.array", "mimir"):
                if alias.asname:
                    info.modules[alias.asname] = alias.name
                else:
                    info.modules["mimir"] = "mimir"
            elif alias.name == "math":
                info.modules[alias.asname or "math"] = "math"
        return
    if isinstance(stmt, ast.ImportFrom):
        for alias in stmt.names:
            _rebind(info, alias.asname or alias.name)
            if stmt.module == "math" and not stmt.level:
                info.imported[alias.asname or alias.name] = f"math.{alias.name}"
        return
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        if isinstance(stmt, ast.FunctionDef):
            grid = _gpu_decorator(info, stmt)  # before the name is bound, as Python does
            if grid is not False:
                info.kernels.append(
                    KernelDef(
                        stmt,
                        grid if isinstance(grid, ast.expr) else None,
                        info.source.span(stmt),
                        _precision(info, stmt),
                    )
                )
        _rebind(info, stmt.name)
        if isinstance(stmt, ast.ClassDef) and _is_named_tuple(stmt):
            info.named_results[stmt.name] = stmt
        return
    if isinstance(stmt, ast.Assign):
        for target in stmt.targets:
            for name in ast.walk(target):
                if isinstance(name, ast.Name):
                    _rebind(info, name.id)
        if len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            _read_binding(info, stmt.targets[0].id, stmt.value)
        elif len(stmt.targets) == 1 and _pairwise(stmt.targets[0], stmt.value):
            # `M, K = Dim("M"), Dim("K")`: each name bound to its own value (none of the
            # values reads a name the statement binds, so the order does not matter)
            for target, value in zip(stmt.targets[0].elts, stmt.value.elts, strict=True):
                _read_binding(info, target.id, value)
        return
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        _rebind(info, stmt.target.id)
        if stmt.value is not None:
            _read_binding(info, stmt.target.id, stmt.value)
        return
    # `if`, `try`, `for`, `with`, `N += 1`, `(N := 3)`, ...: names bound, meaning unknown.
    _bind_names_only(info, stmt)


def _is_named_tuple(cls: ast.ClassDef) -> bool:
    """`class Stats(NamedTuple):` (or `typing.NamedTuple`) holding only `name: type` fields."""
    if len(cls.bases) != 1 or cls.keywords or cls.decorator_list:
        return False
    base = dotted_name(cls.bases[0])
    if base not in ("NamedTuple", "typing.NamedTuple"):
        return False
    fields = [
        s for s in cls.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
    ]
    return bool(fields) and all(
        isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.value is None
        for s in fields
    )


def named_result_fields(cls: ast.ClassDef) -> list[ast.AnnAssign]:
    return [s for s in cls.body if isinstance(s, ast.AnnAssign)]


def _bind_names_only(info: ModuleInfo, stmt: ast.stmt) -> None:
    """Names bound in nested module-level blocks exist, but carry no facts."""
    for node in _module_scope_nodes(stmt):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            _rebind(info, node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            _rebind(info, node.name)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            _rebind(info, node.name)
        elif isinstance(node, ast.alias):
            _rebind(info, (node.asname or node.name).split(".")[0])


def _module_scope_nodes(stmt: ast.stmt) -> list[ast.AST]:
    """The nodes of `stmt` that run in module scope: not the bodies of defs and lambdas."""
    out: list[ast.AST] = []
    todo: list[ast.AST] = [stmt]
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue  # its own name is bound here; what its body binds is local to it
        todo.extend(ast.iter_child_nodes(node))
    return out


def _gpu_decorator(info: ModuleInfo, fn: ast.FunctionDef) -> ast.expr | None | bool:
    """False when `fn` is not a kernel; else the `grid=` expression or None."""
    for dec in fn.decorator_list:
        if info.resolve(dec) == "gpu":
            return None
        if isinstance(dec, ast.Call) and info.resolve(dec.func) == "gpu":
            for kw in dec.keywords:
                if kw.arg == "grid":
                    return kw.value
            return None
    return False


PRECISIONS = ("float32", "tf32")


def _precision(info: ModuleInfo, fn: ast.FunctionDef) -> str:
    """The `precision=` of a kernel's `@gpu(...)` (a string literal), "float32" without one;
    anything else is a GPU036 problem (and the kernel keeps "float32")."""
    for dec in fn.decorator_list:
        if not (isinstance(dec, ast.Call) and info.resolve(dec.func) == "gpu"):
            continue
        for kw in dec.keywords:
            if kw.arg != "precision":
                continue
            value = kw.value
            if isinstance(value, ast.Constant) and value.value in PRECISIONS:
                return value.value
            what = repr(value.value) if isinstance(value, ast.Constant) else "not a string literal"
            info.problems.append(
                Problem(
                    "GPU036",
                    f'`precision=` takes the literal "float32" (the default: exact float32 '
                    f'matmuls) or "tf32" (matmul operands may be rounded to TF32 for tensor '
                    f"cores); got {what}",
                    info.source.span(value),
                    function=fn.name,
                )
            )
    return "float32"


def _pairwise(target: ast.expr, value: ast.expr) -> bool:
    """`a, b = x, y` of plain names and as many values, no value reading a bound name."""
    if not (isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List))):
        return False
    names = [t.id for t in target.elts if isinstance(t, ast.Name)]
    if len(names) != len(target.elts) or len(value.elts) != len(names):
        return False
    read = {n.id for v in value.elts for n in ast.walk(v) if isinstance(n, ast.Name)}
    return not read & set(names)


# `math`'s constants, read as the literals they are (in a kernel, and in a module-level
# float constant)
MATH_CONSTANTS = {"math.pi": math.pi, "math.e": math.e, "math.tau": math.tau}
_MATH_FUNCTIONS: dict[str, Callable[..., float]] = {
    "sqrt": math.sqrt, "exp": math.exp, "log": math.log, "log2": math.log2,
    "log10": math.log10, "sin": math.sin, "cos": math.cos, "tan": math.tan,
    "tanh": math.tanh, "atan": math.atan, "erf": math.erf,
}  # fmt: skip
_FLOAT_OPS: dict[type, Callable[[float, float], float]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.Pow: lambda a, b: a**b,
}


def float_constant(info: ModuleInfo, node: ast.expr, depth: int = 0) -> float | None:
    """The float a module-level expression folds to: float literals, int literals and
    constants, `math.pi`/`e`/`tau`, other float constants, `+ - * / **` and a `math`
    function of them; None for anything else (or a fold that overflows or has no value)."""
    if depth > 32:
        return None
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return float(node.value)
    if isinstance(node, ast.Name):
        if node.id in info.floats:
            return info.floats[node.id]
        if node.id in info.constants:
            return float(info.constants[node.id])
        return MATH_CONSTANTS.get(info.imported.get(node.id, ""))
    if isinstance(node, ast.Attribute):
        return MATH_CONSTANTS.get(info.resolve(node) or "")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = float_constant(info, node.operand, depth + 1)
        return None if v is None else (-v if isinstance(node.op, ast.USub) else v)
    try:
        if isinstance(node, ast.BinOp) and type(node.op) in _FLOAT_OPS:
            a = float_constant(info, node.left, depth + 1)
            b = float_constant(info, node.right, depth + 1)
            if a is None or b is None:
                return None
            out = _FLOAT_OPS[type(node.op)](a, b)
        elif isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
            canonical = info.resolve(node.func) or ""
            fn = _MATH_FUNCTIONS.get(canonical.removeprefix("math.")) if canonical else None
            arg = float_constant(info, node.args[0], depth + 1)
            if fn is None or arg is None:
                return None
            out = fn(arg)
        else:
            return None
    except (ArithmeticError, ValueError):
        return None
    return float(out) if isinstance(out, (int, float)) and math.isfinite(out) else None


def _read_binding(info: ModuleInfo, name: str, value: ast.expr) -> None:
    lit = int_literal(value)  # `-3` too: a negative constant is refused where used as a size
    if lit is not None:
        info.constants[name] = lit
        return
    if _is_float_expression(info, value):
        folded = float_constant(info, value)
        if folded is not None:
            info.floats[name] = folded
            return
    if isinstance(value, ast.BinOp) and type(value.op) in _DIM_OPS:
        # `D_HID = 4 * D_IN`: size arithmetic is a size. Anything else is an ordinary
        # module value, reported only where a kernel uses it as a size.
        first_uses = dict(info.non_size_uses)  # a failed binding reports nothing itself
        size = read_size(info, value)
        info.non_size_uses = first_uses
        if isinstance(size, int):
            info.constants[name] = size
        elif isinstance(size, DimExpr):
            info.sizes[name] = size
        elif size.code == "GPU034":  # arithmetic on a badly declared dim: poisoned, as it is
            info.bad_dims.add(name)
        return
    if isinstance(value, ast.Call) and info.resolve(value.func) == "Dim":
        decl = _read_dim(info, name, value)
        if decl is not None:
            info.dims[name] = decl
        else:
            info.bad_dims.add(name)


def _read_dim(info: ModuleInfo, var: str, call: ast.Call) -> DimDecl | None:
    span = info.source.span(call)

    def problem(message: str) -> None:
        info.problems.append(Problem("GPU034", message, span))

    if len(call.args) != 1 or not (
        isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str)
    ):
        problem(f'`Dim` for `{var}` needs its name as a string literal: `Dim("{var}")`')
        return None
    name = call.args[0].value
    if not name.isidentifier():
        problem(f"dim name {name!r} is not an identifier")
        return None
    kwargs: dict[str, Size | None] = {}
    for kw in call.keywords:
        if kw.arg not in ("min", "max", "multiple_of"):
            problem(f"`Dim` has no parameter `{kw.arg}`; use min=, max= or multiple_of=")
            return None
        if isinstance(kw.value, ast.Constant) and kw.value.value is None:
            kwargs[kw.arg] = None
            continue
        lit = int_literal(kw.value)
        if lit is None:
            # a module-level int constant, another `Dim` or size arithmetic on them
            first_uses = dict(info.non_size_uses)
            size = read_size(info, kw.value)
            info.non_size_uses = first_uses
            if isinstance(size, DimExpr) and kw.arg == "multiple_of":
                problem(f"`multiple_of=` of dim `{name}` must be an int, not the size `{size}`")
                return None
            if not isinstance(size, (int, DimExpr)):
                problem(
                    f"`{kw.arg}=` of dim `{name}` must be an int, an int constant, a `Dim` or "
                    "size arithmetic on them"
                )
                return None
            lit = size  # type: ignore[assignment]
        kwargs[kw.arg] = lit
    low = kwargs.get("min")
    low = 1 if low is None else low
    high = kwargs.get("max")
    mult = kwargs.get("multiple_of")
    assert mult is None or isinstance(mult, int)
    if isinstance(low, int) and low < 0:
        problem(f"dim `{name}` has min={low}; sizes cannot be negative")
        return None
    if mult is not None and mult < 1:
        problem(f"dim `{name}` has multiple_of={mult}; it must be at least 1")
        return None
    dim = Dim(name, min=low, max=high, multiple_of=mult)
    lo, hi = dim.min, dim.max  # the int bounds, those a relation implies included
    if hi is not None and hi < lo:
        related = "" if dim.min_of is None and dim.max_of is None else " (by its relations)"
        problem(f"dim `{name}` has min={lo} > max={hi}{related}: no size satisfies it")
        return None
    if hi is not None and mult is not None and (hi // mult) * mult < lo:
        problem(
            f"dim `{name}` has no multiple of {mult} between min={lo} and max={hi}: "
            "no size satisfies it"
        )
        return None
    return DimDecl(dim, span)


def _is_float_expression(info: ModuleInfo, node: ast.expr) -> bool:
    """Whether an expression is a float's (a float literal, `/`, `**`, `math`, another
    float constant), not size arithmetic of ints (`4 * D_IN`, which is a size)."""
    for n in ast.walk(node):
        if isinstance(n, ast.Constant) and type(n.value) is float:
            return True
        if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Div, ast.Pow)):
            return True
        if isinstance(n, (ast.Attribute, ast.Call)):
            return True
        if isinstance(n, ast.Name) and n.id in info.floats:
            return True
    return False


def int_literal(node: ast.expr) -> int | None:
    """The int a literal `3` or `-3` spells, else None."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
        and type(node.operand.value) is int
    ):
        return -node.operand.value
    return None


# ---------------------------------------------------------------- annotations

_DIM_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%"}


def read_annotation(info: ModuleInfo, node: ast.expr | None) -> Annotation | Problem:
    """A parameter or return annotation as a tensor or scalar type, or a problem."""
    src = info.source
    if node is None:
        return Problem("GPU033", "", Span("", 0, 0, 0, 0))
    if isinstance(node, ast.Name) and node.id in ("int", "float"):
        if node.id in info.module_names:
            return Problem(
                "GPU033",
                f"`{node.id}` is bound at module level, so it is not Python's `{node.id}` here",
                src.span(node),
            )
        return ScalarAnnotation(node.id, src.span(node))
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            inner = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return Problem("GPU033", f"cannot read the annotation {node.value!r}", src.span(node))
        # Re-locate the string's contents at the string's own position.
        for sub in ast.walk(inner):
            if hasattr(sub, "lineno"):
                sub.lineno, sub.end_lineno = node.lineno, node.end_lineno  # type: ignore[attr-defined]
                sub.col_offset, sub.end_col_offset = node.col_offset, node.end_col_offset  # type: ignore[attr-defined]
        return read_annotation(info, inner)
    if isinstance(node, ast.Subscript) and info.resolve(node.value) == "InOut":
        inner = read_annotation(info, node.slice)
        if isinstance(inner, TensorAnnotation) and not inner.inout:
            inner.inout = True
            inner.span = src.span(node)
            return inner
        if isinstance(inner, Problem):
            return inner
        return Problem(
            "GPU033",
            f"`{src.text(node)}`: `InOut[...]` holds one tensor type, `InOut[Tensor[dtype, "
            "sizes...]]`",
            src.span(node),
        )
    if not (isinstance(node, ast.Subscript) and info.resolve(node.value) == "Tensor"):
        return Problem(
            "GPU033",
            f"`{src.text(node)}` is not a kernel type; use `Tensor[dtype, sizes...]`, "
            "`InOut[Tensor[...]]`, `int` or `float`",
            src.span(node),
        )
    items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    dtype_name = info.resolve(items[0])
    first = items[0]
    if dtype_name is None and isinstance(first, ast.Name) and first.id in DTYPES:
        if first.id in info.module_names:
            return Problem(
                "GPU033",
                f"`{first.id}` is bound at module level, so it is not the dtype `{first.id}` here",
                src.span(first),
            )
    if dtype_name not in DTYPES:
        return Problem(
            "GPU033",
            f"`{src.text(items[0])}` is not a dtype; use one of {', '.join(DTYPES)}",
            src.span(items[0]),
        )
    dims: list[Size] = []
    spans: list[Span] = []
    value_range = None
    sized = items[1:]
    if sized and isinstance(sized[-1], ast.Call) and info.resolve(sized[-1].func) == "Range":
        value_range = _read_range(info, sized[-1], DTYPES[dtype_name])
        if isinstance(value_range, Problem):
            return value_range
        sized = sized[:-1]
    for item in sized:
        if isinstance(item, ast.Call) and info.resolve(item.func) == "Range":
            return Problem(
                "GPU033",
                "`Range(lo, hi)` comes last in a tensor type, after every size: "
                "`Tensor[int32, N, Range(0, C)]`",
                src.span(item),
            )
        size = read_size(info, item)
        if isinstance(size, Problem):
            return size
        dims.append(size)
        spans.append(src.span(item))
    return TensorAnnotation(DTYPES[dtype_name], dims, spans, src.span(node), value_range)


def _read_range(info: ModuleInfo, call: ast.Call, dtype: DType) -> tuple[Size, Size] | Problem:
    """`Range(lo, hi)`: the half-open interval of an integer tensor's values, as `range`."""
    src = info.source
    if not dtype.is_integer:
        return Problem(
            "GPU033",
            f"`Range` describes the values of an integer tensor, not of a {dtype} one; "
            "use `Tensor[int32, N, Range(0, C)]`",
            src.span(call),
        )
    if len(call.args) != 2 or call.keywords:
        return Problem(
            "GPU033",
            "`Range` takes two bounds, the lowest value and one past the highest: `Range(0, C)`",
            src.span(call),
        )
    bounds: list[Size] = []
    for arg in call.args:
        lit = int_literal(arg)
        if lit is None and isinstance(arg, ast.Name) and arg.id in info.constants:
            lit = info.constants[arg.id]  # `Range(IGNORE_INDEX, V)`: a module constant too
        if lit is not None:  # a literal bound may be negative (`Range(-1, C)`)
            bounds.append(lit)
            continue
        size = read_size(info, arg)
        if isinstance(size, Problem):
            return size
        bounds.append(size)
    lo, hi = bounds
    if isinstance(lo, int) and isinstance(hi, int) and lo >= hi:
        return Problem(
            "GPU033",
            f"`Range({lo}, {hi})` holds no value; the upper bound is exclusive",
            src.span(call),
        )
    return lo, hi


def read_return_annotation(
    info: ModuleInfo, node: ast.expr
) -> TensorAnnotation | TupleAnnotation | Problem:
    """A kernel's result type: `Tensor[...]`, or `tuple[Tensor[...], ...]` for several."""
    src = info.source
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            inner = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return Problem("GPU033", f"cannot read the annotation {node.value!r}", src.span(node))
        for sub in ast.walk(inner):
            if hasattr(sub, "lineno"):
                sub.lineno, sub.end_lineno = node.lineno, node.end_lineno  # type: ignore[attr-defined]
                sub.col_offset, sub.end_col_offset = node.col_offset, node.end_col_offset  # type: ignore[attr-defined]
        return read_return_annotation(info, inner)
    if isinstance(node, ast.Name) and node.id in info.named_results:
        named: list[TensorAnnotation] = []
        names: list[str] = []
        for f in named_result_fields(info.named_results[node.id]):
            item = read_annotation(info, f.annotation)
            if isinstance(item, Problem):
                return item
            if not isinstance(item, TensorAnnotation) or item.inout:
                return Problem(
                    "GPU033",
                    f"field `{f.target.id}` of `{node.id}` is not a tensor type; each result "
                    "of a kernel is a `Tensor[dtype, sizes...]`",
                    src.span(f.annotation),
                )
            named.append(item)
            names.append(f.target.id)  # type: ignore[union-attr]
        return TupleAnnotation(named, src.span(node), names)
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and node.value.id == "tuple"
        and "tuple" not in info.module_names
    ):
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if any(isinstance(e, ast.Constant) and e.value is Ellipsis for e in elts):
            return Problem(
                "GPU033",
                "a kernel's results are a fixed number of tensors: spell each one, "
                "`tuple[Tensor[...], Tensor[...]]`",
                src.span(node),
            )
        items: list[TensorAnnotation] = []
        for e in elts:
            item = read_return_annotation(info, e)
            if isinstance(item, Problem):
                return item
            if not isinstance(item, TensorAnnotation):
                return Problem(
                    "GPU033",
                    f"result `{src.text(e)}` is not a tensor type; each result of a kernel is a "
                    "`Tensor[dtype, sizes...]`",
                    src.span(e),
                )
            items.append(item)
        return TupleAnnotation(items, src.span(node))
    ann = read_annotation(info, node)
    if isinstance(ann, TensorAnnotation) and ann.inout:
        return Problem(
            "GPU033",
            "`InOut[...]` marks a parameter the kernel updates; a result is a plain `Tensor[...]`",
            src.span(node),
        )
    if isinstance(ann, ScalarAnnotation):
        return Problem(
            "GPU033",
            f"the result annotation `{src.text(node)}` is a scalar; a kernel returns "
            "`Tensor[...]` or `tuple[Tensor[...], ...]`",
            src.span(node),
        )
    if isinstance(ann, Problem) and ann.message.endswith("`int` or `float`"):
        return Problem(
            "GPU033",
            f"the result annotation `{src.text(node)}` is not a kernel type; use "
            "`Tensor[dtype, sizes...]` or `tuple[Tensor[...], ...]`",
            src.span(node),
        )
    return ann


def read_size(info: ModuleInfo, node: ast.expr) -> Size | Problem:
    src = info.source
    lit = int_literal(node)
    if lit is not None:
        if lit < 0:
            return Problem("GPU033", f"a size cannot be negative ({lit})", src.span(node))
        return lit
    if isinstance(node, ast.Name):
        if node.id in info.dims:
            return info.dims[node.id].dim
        if node.id in info.bad_dims:
            return Problem("GPU034", f"dim `{node.id}` is declared badly", src.span(node), True)
        if node.id in info.constants:
            value = info.constants[node.id]
            if value < 0:
                return Problem(
                    "GPU033", f"a size cannot be negative (`{node.id}` is {value})", src.span(node)
                )
            return value
        if node.id in info.sizes:
            return info.sizes[node.id]
        if node.id in info.module_names:
            span = src.span(node)
            first = info.non_size_uses.setdefault(node.id, span)
            return Problem(
                "GPU033",
                f"`{node.id}` is not a `Dim`, an int constant or arithmetic on them, so it "
                "cannot be a size",
                span,
                reported=first != span,
            )
        return Problem("GPU032", f"undefined name `{node.id}`", src.span(node))
    if isinstance(node, ast.BinOp) and type(node.op) in _DIM_OPS:
        left = read_size(info, node.left)
        if isinstance(left, Problem):
            return left
        right = read_size(info, node.right)
        if isinstance(right, Problem):
            return right
        if type(node.op) in (ast.FloorDiv, ast.Mod) and right == 0:
            return Problem("GPU033", "division by zero in a size", src.span(node))
        return binop(_DIM_OPS[type(node.op)], left, right)
    return Problem(
        "GPU033",
        f"`{src.text(node)}` is not a size: use an int, a `Dim`, or `+ - * // %` on them",
        src.span(node),
    )


def dims_in(size: Size) -> list[Dim]:
    return size.dims() if isinstance(size, DimExpr) else []
