"""The kernel IR: one small structured language every backend prints.

A `Kernel` is one compute entry point: its workgroup size, its dispatch size
(dim expressions, for the manifest), the buffers and uniform fields it binds,
its threadgroup (shared) arrays and a body of statements. Expressions are
frozen dataclasses, so they hash and compare structurally (the scheduler uses
them as keys for common-subexpression reuse).

Scalar types are `bool`, `i32`, `u32`, `f32`, `f16`. Semantics a backend must
preserve when it prints:
- `Binary` `+ - *` on `i32` and `u32` wrap modulo 2**32 (two's complement);
- `Binary` `/` and `%` on integers truncate (C, WGSL); the scheduler only emits
  them with a non-zero divisor and never `INT_MIN / -1` (Python's floor
  semantics are built from them in `mimir.codegen.lower`);
- `Cast` between `i32` and `u32` reinterprets the bits; other casts convert
  values and are only emitted where the value is in range (saturating float to
  integer casts are built in `lower`);
- `Call` names an intrinsic from `INTRINSICS` or a `Helper` function.

Names in the IR are logical: user names are Python identifiers, internal names
start with `$`. Backends map every name through one `Namer` per file, which
removes reserved words and collisions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SCALAR_TYPES = ("bool", "i32", "u32", "f32", "f16")

# Intrinsic functions a backend prints from its own table (by IR name).
INTRINSICS = ("exp", "log", "sqrt", "tanh", "floor", "abs", "pow", "isnan", "isinf", "min", "max")

BINARY_OPS = (
    "+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>",
    "<", "<=", ">", ">=", "==", "!=", "&&", "||",
)  # fmt: skip
COMPARISONS = ("<", "<=", ">", ">=", "==", "!=")
UNARY_OPS = ("-", "!", "~")


class Expr:
    """Base of IR expressions; every expression has a scalar `type`."""

    type: str


@dataclass(frozen=True)
class Const(Expr):
    value: Any  # bool, int or float (float('inf') and nan allowed)
    type: str


@dataclass(frozen=True)
class Var(Expr):
    name: str
    type: str


@dataclass(frozen=True)
class Load(Expr):
    """`array[index]`: a buffer or a shared array, by logical name."""

    array: str
    index: Expr
    type: str


@dataclass(frozen=True)
class Uniform(Expr):
    """A field of the uniform block (runtime dim values, scalar parameters)."""

    field: str
    type: str


@dataclass(frozen=True)
class Builtin(Expr):
    """`local_x`, `local_y`, `group_x`, `group_y`, `groups_x`: thread and group ids (u32)."""

    name: str
    type: str = "u32"


@dataclass(frozen=True)
class Binary(Expr):
    op: str
    a: Expr
    b: Expr
    type: str


@dataclass(frozen=True)
class Unary(Expr):
    op: str
    a: Expr
    type: str


@dataclass(frozen=True)
class Call(Expr):
    fn: str
    args: tuple[Expr, ...]
    type: str


@dataclass(frozen=True)
class Select(Expr):
    cond: Expr
    if_true: Expr
    if_false: Expr
    type: str


@dataclass(frozen=True)
class Cast(Expr):
    a: Expr
    type: str


@dataclass(frozen=True)
class Bitcast(Expr):
    a: Expr
    type: str


# ---------------------------------------------------------------- statements


class Stmt:
    """Base of IR statements."""


@dataclass
class Let(Stmt):
    var: Var
    value: Expr


@dataclass
class VarDecl(Stmt):
    """A mutable local, initialised."""

    var: Var
    init: Expr


@dataclass
class Assign(Stmt):
    var: Var
    value: Expr


@dataclass
class Store(Stmt):
    array: str
    index: Expr
    value: Expr


@dataclass
class If(Stmt):
    cond: Expr
    then: list[Stmt]
    orelse: list[Stmt] = field(default_factory=list)


@dataclass
class For(Stmt):
    """`for (var = start; var < end; var += step)`, all u32."""

    var: Var
    start: Expr
    end: Expr
    step: Expr
    body: list[Stmt]


@dataclass
class Barrier(Stmt):
    """A workgroup barrier over threadgroup memory; only in uniform control flow."""


@dataclass
class Return(Stmt):
    value: Expr | None = None


# ---------------------------------------------------------------- functions and kernels


@dataclass(frozen=True)
class Helper:
    """A small function the lowering table defines once, in IR, for every backend."""

    name: str
    params: tuple[Var, ...]
    ret: str
    body: tuple[Stmt, ...]
    uses: tuple[str, ...] = ()  # helpers this one calls


@dataclass
class BufferParam:
    name: str  # logical name (the manifest's buffer name)
    elem: str  # storage scalar type (bool is stored as u32)
    access: str  # "read" | "read_write"


@dataclass
class SharedArray:
    name: str
    elem: str
    count: int


@dataclass
class Kernel:
    name: str  # logical entry-point name
    what: str  # a word for the file name: ew, matmul, reduce, softmax, ...
    workgroup_size: tuple[int, int, int]
    workgroups: tuple[Any, Any, Any]  # dim expressions (mimir.dims sizes or CDiv)
    buffers: list[BufferParam]
    uniform_fields: list[tuple[str, str]]  # (logical name, type), the whole block
    uses_uniform: bool
    shared: list[SharedArray]
    body: list[Stmt]
    helpers: list[Helper]  # in dependency order (callees first)
    # intrinsic or helper name -> (the op that needed it, its source span), for refusals
    origins: dict[str, tuple[str, Any]] = field(default_factory=dict)


# ---------------------------------------------------------------- walking


def sub_expressions(e: Expr) -> tuple[Expr, ...]:
    if isinstance(e, Load):
        return (e.index,)
    if isinstance(e, Binary):
        return (e.a, e.b)
    if isinstance(e, (Unary, Cast, Bitcast)):
        return (e.a,)
    if isinstance(e, Call):
        return e.args
    if isinstance(e, Select):
        return (e.cond, e.if_true, e.if_false)
    return ()


def walk_expr(e: Expr):
    """`e` and every expression inside it, in pre-order.

    Iterative: a recursive generator passes each item up through one frame per
    level, quadratic in the depth of a long chain `a + b + c + ...`.
    """
    stack = [e]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(sub_expressions(node)))


def statement_expressions(s: Stmt) -> list[Expr]:
    if isinstance(s, (Let, Assign)):
        return [s.value]
    if isinstance(s, VarDecl):
        return [s.init]
    if isinstance(s, Store):
        return [s.index, s.value]
    if isinstance(s, If):
        return [s.cond]
    if isinstance(s, For):
        return [s.start, s.end, s.step]
    if isinstance(s, Return):
        return [] if s.value is None else [s.value]
    return []


def child_blocks(s: Stmt) -> list[list[Stmt]]:
    if isinstance(s, If):
        return [s.then, s.orelse]
    if isinstance(s, For):
        return [s.body]
    return []


def walk_statements(body: list[Stmt] | tuple[Stmt, ...]):
    for s in body:
        yield s
        for block in child_blocks(s):
            yield from walk_statements(block)


def all_expressions(body: list[Stmt] | tuple[Stmt, ...]):
    for s in walk_statements(body):
        for e in statement_expressions(s):
            yield from walk_expr(e)
