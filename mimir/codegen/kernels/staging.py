"""Staging operands through workgroup memory and guarded stores: what the tiled launches
(`matmul`, `attention`) share."""

from __future__ import annotations

from typing import Any

from mimir.codegen import lower as lw
from mimir.codegen.builder import Idx, ibin, linearise, size_ir, u32
from mimir.codegen.ir import (
    Assign,
    Binary,
    CopyAsync,
    Expr,
    Let,
    Load,
    Stmt,
    Store,
    statement_expressions,
    walk_expr,
)
from mimir.codegen.kernels.context import KernelContext, reg_dtype

VEC = 4  # the width of a shared-memory vector load (`SharedVectorLoad`)


def stage_operand(
    c: KernelContext, tile: str, slot: Expr, operand: int, idx: Idx, cond: Expr | None, out: Any
) -> None:
    """Store the operand's value at `idx` (0 where `cond` is false) into the workgroup array
    `tile`; a `cond` of None is a guard proven unnecessary.

    When the operand is a buffer of the tile's own type, read at an index that needs no
    load to compute, this is one `CopyAsync` (the index computed whatever the guard says,
    the load only where it holds); otherwise a guarded load and a store."""
    body, ev = c.body, c.ev
    acc_t = lw.REG[out]
    with body.block() as trial:
        x = lw.convert(ev.at(operand, idx), ev.dtype(operand), reg_dtype(out))
    last = trial[-1] if trial else None
    if (
        isinstance(last, Let)
        and last.var == x
        and isinstance(last.value, Load)
        and last.value.type == acc_t
        and all(isinstance(st, Let) for st in trial)
        and not any(isinstance(e, Load) for st in trial[:-1] for e in exprs_of(st))
    ):
        for st in trial[:-1]:
            body.emit(st)
        body.emit(CopyAsync(tile, slot, last.value, cond))
        return
    if cond is None:
        x = ev.at(operand, idx)
        body.emit(Store(tile, slot, lw.convert(x, ev.dtype(operand), reg_dtype(out))))
        return
    value = body.var(lw.const(0, acc_t), "x")
    with body.if_(cond):
        x = ev.at(operand, idx)
        body.emit(Assign(value, lw.convert(x, ev.dtype(operand), reg_dtype(out))))
    body.emit(Store(tile, slot, value))


def batch_offset(c: KernelContext, shape: tuple, batch: tuple, batch_axes: list[Expr]) -> Expr:
    """The flat offset of the operand's matrix for this workgroup's batch position."""
    if not batch:
        return u32(0)
    axes = broadcast_batch(batch_axes, batch, shape[:-2])
    matrix = ibin("*", size_ir(shape[-2]), size_ir(shape[-1]))
    return c.body.let(ibin("*", linearise(axes, shape[:-2]), matrix), "mo")


def all_true(conds: list[Expr | None]) -> Expr | None:
    out: Expr | None = None
    for cond in conds:
        if cond is not None:
            out = cond if out is None else Binary("&&", out, cond, "bool")
    return out


def exprs_of(st: Stmt) -> list[Expr]:
    return [e for top in statement_expressions(st) for e in walk_expr(top)]


def write_where(c: KernelContext, cond: Expr | None, idx: Idx, value: Expr) -> None:
    """Store the plan's results at `idx`, its root's `value` given, where `cond` holds (a
    tile's row and column bounds); a `cond` of None is a guard proven unnecessary."""
    if cond is None:
        c.write(idx, value)
        return
    with c.body.if_(cond):
        c.write(idx, value)


def all_below(pairs: list[tuple[Expr, Expr | None]]) -> Expr | None:
    """`a < bound && ...` over the pairs with a bound; None when no pair has one."""
    cond: Expr | None = None
    for a, bound in pairs:
        if bound is None:
            continue
        test = Binary("<", a, bound, "bool")
        cond = test if cond is None else Binary("&&", cond, test, "bool")
    return cond


def broadcast_batch(axes: list[Expr], batch: tuple, shape: tuple) -> list[Expr]:
    pad = len(batch) - len(shape)
    return [u32(0) if isinstance(s, int) and s == 1 else axes[pad + k] for k, s in enumerate(shape)]
