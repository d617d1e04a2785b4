"""FMA contraction: float32 `a * b + c` becomes one `fma(a, b, c)`, rounded once.

Every backend has the instruction (`fma.rn.f32`, MSL and WGSL `fma`, GLSL.std.450
`Fma`), and a GPU runs it at the cost of the multiply alone. The result can differ
from the shim's twice-rounded `a * b + c` by half an ulp of the product; tests compare
float outputs under a tolerance (ARCHITECTURE.md, "Exactness and
tolerance"), never bit for bit.

Contracted in the kernel body only, never inside a `Helper`: helpers are written
instruction by instruction (the maximum with NaN rules, the bit-exact sequences), and
a contraction there could change what they promise. A product bound by a `let` is
contracted into its one reader when that reader is the next use in the same block and
the product reads no memory and no mutable variable (so moving it past a store or an
assignment cannot change its value).
"""

from __future__ import annotations

from dataclasses import replace

from mimir.codegen.ir import (
    Assign,
    Binary,
    Call,
    Expr,
    For,
    If,
    Kernel,
    Let,
    Load,
    Return,
    Stmt,
    Store,
    Var,
    VarDecl,
    all_expressions,
    child_blocks,
    walk_expr,
    walk_statements,
)


def contract(kernel: Kernel) -> Kernel:
    """The kernel with every float32 `a * b + c` of its body as `fma(a, b, c)`."""
    uses: dict[str, int] = {}
    for e in all_expressions(kernel.body):
        if isinstance(e, Var):
            uses[e.name] = uses.get(e.name, 0) + 1
    # a product over a mutable variable is never moved (an assignment may come between)
    for st in walk_statements(kernel.body):
        if isinstance(st, VarDecl):
            uses[st.var.name] = -1
    return replace(kernel, body=_block(kernel.body, uses))


def _is_product(e: Expr) -> bool:
    return isinstance(e, Binary) and e.op == "*" and e.type == "f32"


def _movable(e: Expr, uses: dict[str, int]) -> bool:
    return not any(
        isinstance(x, Load) or (isinstance(x, Var) and uses.get(x.name) == -1) for x in walk_expr(e)
    )


def _block(body: list[Stmt], uses: dict[str, int]) -> list[Stmt]:
    # products bound by a `let` that only one later expression of this block reads
    inline: dict[str, Expr] = {}
    out: list[Stmt] = []
    for s in body:
        for block in child_blocks(s):
            block[:] = _block(block, uses)
        s = _rewrite_statement(s, inline)
        if isinstance(s, Let) and _is_product(s.value) and _movable(s.value, uses):
            if uses.get(s.var.name) == 1:
                inline[s.var.name] = s.value
                out.append(s)  # dropped below if its reader took it
                continue
        out.append(s)
    taken = {name for name, e in inline.items() if e is _TAKEN}
    return [s for s in out if not (isinstance(s, Let) and s.var.name in taken)]


_TAKEN = Var("$taken", "f32")


def _rewrite_statement(s: Stmt, inline: dict[str, Expr]) -> Stmt:
    def rw(e: Expr) -> Expr:
        return _rewrite(e, inline)

    if isinstance(s, Let):
        return Let(s.var, rw(s.value))
    if isinstance(s, Assign):
        return Assign(s.var, rw(s.value))
    if isinstance(s, VarDecl):
        return VarDecl(s.var, rw(s.init))
    if isinstance(s, Store):
        return Store(s.array, s.index, rw(s.value))
    if isinstance(s, If):
        return If(s.cond, s.then, s.orelse)
    if isinstance(s, (For, Return)):
        return s
    return s


def _take(e: Expr, inline: dict[str, Expr]) -> Expr | None:
    """The product `e` is (itself, or the pending `let` it names), else None."""
    if _is_product(e):
        return e
    if isinstance(e, Var) and e.name in inline and inline[e.name] is not _TAKEN:
        product = inline[e.name]
        inline[e.name] = _TAKEN
        return product
    return None


def _rewrite(e: Expr, inline: dict[str, Expr]) -> Expr:
    if isinstance(e, Binary) and e.op == "+" and e.type == "f32":
        a, b = _rewrite(e.a, inline), _rewrite(e.b, inline)
        for first, other in ((a, b), (b, a)):
            product = _take(first, inline)
            if isinstance(product, Binary):
                return Call("fma", (product.a, product.b, other), "f32")
        return Binary("+", a, b, "f32")
    if isinstance(e, Binary):
        return Binary(e.op, _rewrite(e.a, inline), _rewrite(e.b, inline), e.type)
    if isinstance(e, Call):
        return Call(e.fn, tuple(_rewrite(a, inline) for a in e.args), e.type)
    return _rebuild(e, inline)


def _rebuild(e: Expr, inline: dict[str, Expr]) -> Expr:
    """Rewrite inside the other expression kinds (Select, Cast, Unary, ...)."""
    from dataclasses import fields, is_dataclass

    if not is_dataclass(e):
        return e
    changes = {}
    for f in fields(e):
        value = getattr(e, f.name)
        if isinstance(value, Expr) and not isinstance(e, Load):
            new = _rewrite(value, inline)
            if new is not value:
                changes[f.name] = new
    return replace(e, **changes) if changes else e
