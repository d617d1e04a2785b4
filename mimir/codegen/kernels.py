"""One IR kernel per launch of a schedule, by kind.

- `ew` (element-wise): 256 threads per workgroup, four consecutive output elements
  per thread with 128-bit loads and stores where that is proven sound
  (`mimir.codegen.vectorize`), else one element per thread guarded by `index < numel`.
- `matmul`: 64x64 output tiles, one 16x16-thread workgroup each (batches
  included), each thread accumulating a 4x4 block in registers; K is walked in
  16-wide slices staged through threadgroup memory, loads past M, N or K read 0,
  stores are guarded, so any size works. The epilogue (bias, activation, ...)
  is applied to each accumulator before its store.
- `partial`, `reduce`, `softmax`, `argreduce`, `moments`: see `mimir.codegen.reductions`.
- `partial`, `reduce`, `softmax`: see `mimir.codegen.reductions`.
- `scan` (`cumsum`, `cumprod`): see `mimir.codegen.scans`.

Workgroup counts are folded into x and y (`sizes.dispatch`) so no dimension
passes 65535 (`mimir.codegen.context`).
"""

from __future__ import annotations

from typing import Any

from mimir.codegen import lower as lw
from mimir.codegen import reductions, scans, vectorize
from mimir.codegen import sizes as sz
from mimir.codegen.builder import Idx, ibin, size_ir, u32
from mimir.codegen.context import WG, KernelContext, reg_dtype
from mimir.codegen.ir import (
    Assign,
    Barrier,
    Binary,
    BufferParam,
    Builtin,
    Expr,
    For,
    If,
    Kernel,
    Let,
    Load,
    SharedArray,
    Stmt,
    Store,
    Uniform,
    Var,
    VectorLoad,
    VectorStore,
    all_expressions,
    walk_statements,
)
from mimir.codegen.schedule import Schedule

TILE = 16  # threads per side of a matmul workgroup, and the k-slice staged at once
REG = 4  # outputs per thread per side (register blocking)
BLOCK = TILE * REG  # the output tile a matmul workgroup owns


# ---------------------------------------------------------------- element-wise


def _elementwise(c: KernelContext) -> tuple[tuple[int, int, int], tuple[Any, Any, Any]]:
    shape = c.ev.shape(c.plan.node)
    total = sz.product(list(shape))
    if c.multiple(total, WG, f"i < {sz.manifest_text(total)}"):
        # every thread of every dispatched group has an element (groups past the end of a
        # folded dispatch return, uniformly, in `groups`)
        dispatch, g = c.groups(sz.cdiv(total, WG))
        i = c.body.let(ibin("+", ibin("*", g, u32(WG)), Builtin("local_x")), "i")
        c.write(Idx(shape, flat=i))
        return (WG, 1, 1), dispatch
    dispatch, g = c.groups(sz.cdiv(total, WG), guard=False)
    i = c.body.let(ibin("+", ibin("*", g, u32(WG)), Builtin("local_x")), "i")
    with c.body.if_(Binary("<", i, size_ir(total), "bool")):
        c.write(Idx(shape, flat=i))
    return (WG, 1, 1), dispatch


# ---------------------------------------------------------------- matmul


def _matmul(c: KernelContext) -> tuple[tuple[int, int, int], tuple[Any, Any, Any]]:
    """A register-blocked tiled matmul: each workgroup owns a BLOCK x BLOCK output tile.

    16x16 threads; thread (ly, lx) accumulates the REG x REG outputs at rows
    `ly + 16 r` and columns `lx + 16 s` of the tile. K is walked TILE at a time:
    the workgroup stages a BLOCK x TILE slice of the left operand and a
    TILE x BLOCK slice of the right one in workgroup memory (each thread loads
    REG of each, reads past M, N or K are 0), then every thread does
    REG * REG multiply-adds per staged k, so a barrier pair is amortised over
    REG * REG times the work of the one-output-per-thread tiling.
    """
    ev, body = c.ev, c.body
    root = c.plan.root
    assert root is not None
    left, right = ev.node(root)["inputs"][:2]
    out = ev.dtype(root)
    lshape, rshape, oshape = ev.shape(left), ev.shape(right), ev.shape(root)
    m, k, n = lshape[-2], lshape[-1], rshape[-1]
    batch = oshape[:-2]
    tm, tn = sz.cdiv(m, BLOCK), sz.cdiv(n, BLOCK)
    count = sz.product([*batch, tm, tn])
    dispatch, g = c.groups(count)
    tn_ir, tm_ir = size_ir(tn), size_ir(tm)
    col_tile = body.let(ibin("%", g, tn_ir), "tile")
    rest = body.let(ibin("/", g, tn_ir), "tile")
    row_tile = body.let(ibin("%", rest, tm_ir), "tile") if batch else rest
    b = body.let(ibin("/", rest, tm_ir), "b") if batch else u32(0)
    lx, ly = Builtin("local_x"), Builtin("local_y")
    row0 = body.let(ibin("*", row_tile, u32(BLOCK)), "row")
    col0 = body.let(ibin("*", col_tile, u32(BLOCK)), "col")
    rows = [body.let(ibin("+", row0, ibin("+", ly, u32(TILE * r))), "row") for r in range(REG)]
    cols = [body.let(ibin("+", col0, ibin("+", lx, u32(TILE * s))), "col") for s in range(REG)]
    batch_axes = Idx(batch, flat=b).axes(body) if batch else []
    acc_t = lw.REG[out]
    a_tile, b_tile = "$a_tile", "$b_tile"
    c.shared += [
        SharedArray(a_tile, acc_t, BLOCK * TILE),
        SharedArray(b_tile, acc_t, TILE * BLOCK),
    ]
    accs = [[body.var(lw.const(0, acc_t), "acc") for _ in range(REG)] for _ in range(REG)]
    m_ir, k_ir, n_ir = size_ir(m), size_ir(k), size_ir(n)
    # a bound needs no guard when its size is proven a multiple of the tile
    m_ok = c.multiple(m, BLOCK, f"row < {sz.manifest_text(m)}")
    n_ok = c.multiple(n, BLOCK, f"col < {sz.manifest_text(n)}")
    k_ok = c.multiple(k, TILE, f"k < {sz.manifest_text(k)}")
    m_b, n_b, k_b = (None if m_ok else m_ir), (None if n_ok else n_ir), (None if k_ok else k_ir)
    with body.for_("k0_", u32(0), k_ir, u32(TILE)) as k0:
        ka = body.let(ibin("+", k0, lx), "ka")  # the k this thread stages for the left tile
        kb = body.let(ibin("+", k0, ly), "kb")  # ... and for the right tile
        for r in range(REG):
            slot = ibin("+", ibin("*", ibin("+", ly, u32(TILE * r)), u32(TILE)), lx)
            _stage(c, a_tile, slot, left, lshape, batch, batch_axes, rows[r], ka, m_b, k_b, out)
        for s_ in range(REG):
            slot = ibin("+", ibin("*", ly, u32(BLOCK)), ibin("+", lx, u32(TILE * s_)))
            _stage(c, b_tile, slot, right, rshape, batch, batch_axes, kb, cols[s_], k_b, n_b, out)
        body.emit(Barrier())
        with body.for_("kk", u32(0), u32(TILE), u32(1)) as kk:
            a_vals = [
                body.let(
                    Load(
                        a_tile,
                        ibin("+", ibin("*", ibin("+", ly, u32(TILE * r)), u32(TILE)), kk),
                        acc_t,
                    ),
                    "a",
                )
                for r in range(REG)
            ]
            b_vals = [
                body.let(
                    Load(
                        b_tile,
                        ibin("+", ibin("*", kk, u32(BLOCK)), ibin("+", lx, u32(TILE * s_))),
                        acc_t,
                    ),
                    "b",
                )
                for s_ in range(REG)
            ]
            for r in range(REG):
                for s_ in range(REG):
                    acc = accs[r][s_]
                    body.emit(Assign(acc, lw.bin_("+", acc, lw.bin_("*", a_vals[r], b_vals[s_]))))
        body.emit(Barrier())
    for r in range(REG):
        for s_ in range(REG):
            cond = _all_below([(rows[r], m_b), (cols[s_], n_b)])
            acc = accs[r][s_]
            result = lw.round_to(acc, out)
            idx = Idx(oshape, axes=[*batch_axes, rows[r], cols[s_]])
            if cond is None:
                c.write(idx, result)
                continue
            with body.if_(cond):
                c.write(idx, result)
    return (TILE, TILE, 1), dispatch


def _stage(
    c: KernelContext,
    tile: str,
    slot: Expr,
    operand: int,
    shape: tuple,
    batch: tuple,
    batch_axes: list[Expr],
    i: Expr,
    j: Expr,
    bound_i: Expr | None,
    bound_j: Expr | None,
    out: Any,
) -> None:
    """Store `operand[..., i, j]` (0 past its bounds) into the workgroup array `tile`;
    a bound of None is proven never reached (no guard)."""
    body, ev = c.body, c.ev
    axes = _broadcast_batch(batch_axes, batch, shape[:-2]) + [i, j]
    cond = _all_below([(i, bound_i), (j, bound_j)])
    if cond is None:
        x = ev.at(operand, Idx(shape, axes=axes))
        body.emit(Store(tile, slot, lw.convert(x, ev.dtype(operand), reg_dtype(out))))
        return
    acc_t = lw.REG[out]
    value = body.var(lw.const(0, acc_t), "x")
    with body.if_(cond):
        x = ev.at(operand, Idx(shape, axes=axes))
        body.emit(Assign(value, lw.convert(x, ev.dtype(operand), reg_dtype(out))))
    body.emit(Store(tile, slot, value))


def _all_below(pairs: list[tuple[Expr, Expr | None]]) -> Expr | None:
    """`a < bound && ...` over the pairs with a bound; None when no pair has one."""
    cond: Expr | None = None
    for a, bound in pairs:
        if bound is None:
            continue
        test = Binary("<", a, bound, "bool")
        cond = test if cond is None else Binary("&&", cond, test, "bool")
    return cond


def _broadcast_batch(axes: list[Expr], batch: tuple, shape: tuple) -> list[Expr]:
    pad = len(batch) - len(shape)
    return [u32(0) if isinstance(s, int) and s == 1 else axes[pad + k] for k, s in enumerate(shape)]


def _prune(body: list[Stmt]) -> list[Stmt]:
    """Drop `let`s nobody reads (an unravelled axis that no operand needed)."""

    def keep(block: list[Stmt], used: set[str]) -> list[Stmt]:
        out = []
        for st in block:
            if isinstance(st, Let) and st.var.name not in used:
                continue
            if isinstance(st, If):
                st.then, st.orelse = keep(st.then, used), keep(st.orelse, used)
            elif isinstance(st, For):
                st.body = keep(st.body, used)
            out.append(st)
        return out

    while True:
        used = {e.name for e in all_expressions(body) if isinstance(e, Var)}
        before = sum(1 for _ in walk_statements(body))
        body = keep(body, used)
        if sum(1 for _ in walk_statements(body)) == before:
            return body


_BUILDERS = {
    "ew": _elementwise,
    "matmul": _matmul,
    "partial": reductions.partial,
    "reduce": reductions.reduce,
    "softmax": reductions.softmax,
    "argreduce": reductions.argreduce,
    "moments": reductions.moments,
    "scan": scans.scan,
    "row": reductions.row,
}


def build(s: Schedule, index: int) -> Kernel:
    """The IR kernel for launch `index` of schedule `s`."""
    plan = s.plans[index]
    c = KernelContext(s, plan)
    built = vectorize.elementwise(c) if plan.kind == "ew" else None
    if built is None:
        c = KernelContext(s, plan)
        built = _BUILDERS[plan.kind](c)
    workgroup_size, dispatch = built
    body = _prune(c.body.root)
    shared_names = {a.name for a in c.shared}
    stored = {st.array for st in walk_statements(body) if isinstance(st, (Store, VectorStore))}
    exprs = list(all_expressions(body))
    loaded = {e.array for e in exprs if isinstance(e, Load)}
    loaded |= {st.array for st in walk_statements(body) if isinstance(st, VectorLoad)}
    used = (stored | loaded) - shared_names
    buffers = [
        BufferParam(b.name, lw.STORAGE[b.dtype], "read_write" if b.name in stored else "read")
        for b in s.buffers
        if b.name in used
    ]
    uses_uniform = any(isinstance(e, Uniform) for e in exprs)
    return Kernel(
        name=f"{s.function}_{index}_{plan.kind}",
        what=plan.kind,
        workgroup_size=workgroup_size,
        workgroups=dispatch,
        buffers=buffers,
        uniform_fields=list(s.uniform_fields),
        uses_uniform=uses_uniform,
        shared=c.shared,
        body=body,
        helpers=lw.helpers_needed(exprs),
        origins=c.ev.origins,
        proofs=c.proofs,
        vectorized=c.vectorized,
    )
