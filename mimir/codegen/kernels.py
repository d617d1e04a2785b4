"""One IR kernel per launch of a schedule, by kind.

- `ew` (element-wise): 256 threads per workgroup, four consecutive output elements
  per thread with 128-bit loads and stores where that is proven sound
  (`mimir.codegen.vectorize`), else one element per thread guarded by `index < numel`;
  one that computes a product by a small matrix (`schedule.small_matmul`) gives each
  thread a whole row instead (`_row_elements`).
- `matmul`: 128x128 output tiles, one 16x16-thread workgroup each (batches
  included), each thread accumulating an 8x8 block in registers from 4-wide
  vector reads of workgroup memory; K is walked in 8-wide slices staged
  through two buffers per operand (the next slice copied while this one is
  multiplied: `cp.async` on PTX), loads past M, N or K read 0, stores are
  guarded, so any size works. The epilogue (bias, activation, ...) is applied
  to each accumulator before its store.
- `narrow`: `h @ w` with w at most 16 columns wide (`schedule.narrow_matmul`): 8
  threads fold each row of h into its few dot products, and its row sums, means, maxes
  and mins (`Plan.folds`), with no tile (`_narrow`).
- `attention`: `softmax(f(q @ k.T)) @ v` in one pass over the keys, the scores and
  their softmax never stored (`_attention`, flash attention's online softmax);
  `scores_softmax`: `softmax(f(q @ k.T))` returned, the scores computed twice, for each
  row's max and sum, then for the values stored (`_scores_softmax`).
- `partial`, `reduce`, `softmax`, `argreduce`, `moments`, `row`: see
  `mimir.codegen.reductions`.
- `scan` (`cumsum`, `cumprod`): see `mimir.codegen.scans`.

Workgroup counts are folded into x and y (`sizes.dispatch`) so no dimension
passes 65535 (`mimir.codegen.context`).
"""

from __future__ import annotations

import contextlib
import operator
from typing import Any, NamedTuple

from mimir.codegen import lower as lw
from mimir.codegen import reductions, scans, vectorize, warp
from mimir.codegen import sizes as sz
from mimir.codegen.builder import Idx, ibin, linearise, size_ir, u32
from mimir.codegen.context import WG, KernelContext, reg_dtype
from mimir.codegen.ir import (
    MMA_SHAPE,
    WARP,
    Assign,
    AtomicAdd,
    Await,
    Barrier,
    Binary,
    BufferParam,
    Builtin,
    CopyAsync,
    Expr,
    If,
    Kernel,
    Let,
    Load,
    MmaSync,
    Publish,
    Retract,
    SharedArray,
    SharedVectorLoad,
    Stmt,
    Store,
    Uniform,
    Var,
    VectorLoad,
    VectorStore,
    WaitAsync,
    WarpReduce,
    all_expressions,
    drop_unread_lets,
    statement_expressions,
    walk_expr,
    walk_statements,
)
from mimir.codegen.schedule import Plan, Schedule, fused_reads, op_kind, row_per_thread
from mimir.dtypes import float32

TILE = 16  # threads per side of a matmul workgroup
REG = 8  # outputs per thread per side (register blocking), two 4-wide halves
VEC = 4  # the width of a shared-memory vector load (`SharedVectorLoad`)
BLOCK = TILE * REG  # the output tile a matmul workgroup owns (128 x 128)
SLICE = 8  # the k-slice staged at once, in each of two buffers per operand


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


def _row_elements(c: KernelContext) -> tuple[tuple[int, int, int], tuple[Any, Any, Any]]:
    """An element-wise launch a thread per row (`schedule.row_per_thread`): thread t
    computes every element of row t, so the small matrix products' left rows are loaded
    once per row and a chain of them (`h = (h @ w).tanh()` layer after layer) computes
    each layer's row once. Every value of the row is computed before the first store, so
    an `InOut` row may be read whole and written in place (`p = p @ r`)."""
    body, ev = c.body, c.ev
    shape = ev.shape(c.plan.node)
    lead, length = tuple(shape[:-1]), shape[-1]
    assert isinstance(length, int)  # `row_per_thread`
    rows = sz.product(list(lead))
    every = c.multiple(rows, WG, f"row < {sz.manifest_text(rows)}")
    dispatch, g = c.groups(sz.cdiv(rows, WG), guard=every)
    row = body.let(ibin("+", ibin("*", g, u32(WG)), Builtin("local_x")), "row")
    below = Binary("<", row, size_ir(rows), "bool")
    with contextlib.nullcontext() if every else body.if_(below):
        lead_axes = Idx(lead, flat=row).axes(body) if lead else []
        base = body.let(ibin("*", row, u32(length)), "base")
        stores: list[Stmt] = []
        for j in range(length):
            flat = body.let(ibin("+", base, u32(j)), "i")
            idx = Idx(shape, flat=flat, axes=[*lead_axes, u32(j)])
            for node, names in c.plan.outputs():
                value = body.let(ev.at(node, ev.same(idx, node)), "v")
                stores += [
                    Store(name, flat, lw.to_storage(value, ev.dtype(node))) for name in names
                ]
        for store in stores:
            body.emit(store)
    return (WG, 1, 1), dispatch


def _mirrored(c: KernelContext) -> tuple[tuple[int, int, int], tuple[Any, Any, Any]]:
    """An in-place `x = f(x, x.T)` of a square x (`Plan.mirror`): thread (i, j) of the
    D x D elements, for i <= j, computes the new (i, j) and (j, i), both from the old
    values, and then stores them; the others have nothing to do. Every old element is
    read by the one thread that writes it and its mirror image, so no scratch copy."""
    body = c.body
    shape = c.ev.shape(c.plan.node)
    side, total = size_ir(shape[0]), sz.product(list(shape))
    dispatch, g = c.groups(sz.cdiv(total, WG), guard=False)
    t = body.let(ibin("+", ibin("*", g, u32(WG)), Builtin("local_x")), "t")
    ((node, names),) = c.plan.outputs()  # the `InOut` buffer, and an output it may also be
    with body.if_(Binary("<", t, size_ir(total), "bool")):
        i = body.let(ibin("/", t, side), "i")
        j = body.let(ibin("%", t, side), "j")
        with body.if_(Binary("<=", i, j, "bool")):
            dtype = c.ev.dtype(node)
            here = body.let(c.ev.at(node, Idx(shape, axes=[i, j])), "here")
            there = body.let(c.ev.at(node, Idx(shape, axes=[j, i])), "there")
            for name in names:
                body.emit(Store(name, t, lw.to_storage(here, dtype)))
            with body.if_(Binary("<", i, j, "bool")):
                mirror = body.let(ibin("+", ibin("*", j, side), i), "mirror")
                for name in names:
                    body.emit(Store(name, mirror, lw.to_storage(there, dtype)))
    return (WG, 1, 1), dispatch


# ---------------------------------------------------------------- matmul


def _matmul(
    c: KernelContext, tensor_cores: bool = False
) -> tuple[tuple[int, int, int], tuple[Any, Any, Any]]:
    """A register-blocked, double-buffered tiled matmul: each workgroup owns a BLOCK x BLOCK
    output tile (128 x 128), 16 x 16 threads, each thread an 8 x 8 block of it.

    Thread (ly, lx) accumulates rows `4 ly + i` and `64 + 4 ly + i` and columns `4 lx + j`
    and `64 + 4 lx + j` (i, j < 4) of the tile, so at each staged k it reads its 8 left
    values and 8 right values as four aligned 4-wide vectors (`SharedVectorLoad`) and does 64
    multiply-adds (one `fma` each after contraction). K is walked SLICE at a time through
    two workgroup buffers per operand: while the products of slice s are computed from one
    buffer, slice s + 1 is copied into the other (`CopyAsync`: `cp.async` on PTX, a plain
    store elsewhere), then one wait and one barrier per slice. The left tile is stored
    k-major (`a_tile[k][m]`), the right one as it is (`b_tile[k][n]`). Reads past M, N or K
    stage 0 and stores past M or N are skipped, so any size works; a guard whose size is
    proven a multiple of the tile is not emitted (`guards_removed` in the manifest).

    With `tensor_cores` (PTX, `@gpu(precision="tf32")`, a float32 result) the staging is
    the same but the products are `MmaSync`s, 16 x 8 x 8 per warp: see `_MmaWarp`.

    With `Plan.paired` (`schedule._paired_products`) the workgroup first computes the
    paired product's tile (the same left operand by another right one) into a second set
    of accumulators, through the same buffers, and the epilogue reads it from there.
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
    t = body.let(ibin("+", ibin("*", ly, u32(TILE)), lx), "t")  # 0 .. 255
    row0 = body.let(ibin("*", row_tile, u32(BLOCK)), "row")
    col0 = body.let(ibin("*", col_tile, u32(BLOCK)), "col")
    half = BLOCK // 2
    rows = [
        body.let(ibin("+", row0, ibin("+", ibin("*", ly, u32(VEC)), u32(half * h + i))), "row")
        for h in range(2)
        for i in range(VEC)
    ]
    cols = [
        body.let(ibin("+", col0, ibin("+", ibin("*", lx, u32(VEC)), u32(half * h + j))), "col")
        for h in range(2)
        for j in range(VEC)
    ]
    batch_axes = Idx(batch, flat=b).axes(body) if batch else []
    acc_t = lw.REG[out]
    a_tile, b_tile = "$a_tile", "$b_tile"
    size = BLOCK * SLICE  # elements of one buffer of either operand
    c.shared += [SharedArray(a_tile, acc_t, 2 * size), SharedArray(b_tile, acc_t, 2 * size)]
    mma = _MmaWarp(c, t, row0, col0) if tensor_cores and acc_t == "f32" else None
    if mma is not None:
        rows, cols = mma.rows, mma.cols

    def zeros() -> list[list[Var]]:
        if mma is not None:
            return mma.zeros()
        return [[body.var(lw.const(0, acc_t), "acc") for _ in range(REG)] for _ in range(REG)]

    # a paired product (`schedule._paired_products`): computed first, through the same
    # workgroup buffers, and read by the epilogue from its own accumulators
    paired = c.plan.paired
    paired_accs = zeros() if paired is not None else None
    accs = zeros()
    m_ir, k_ir, n_ir = size_ir(m), size_ir(k), size_ir(n)
    # a bound needs no guard when its size is proven a multiple of the tile
    m_ok = c.multiple(m, BLOCK, f"row < {sz.manifest_text(m)}")
    n_ok = c.multiple(n, BLOCK, f"col < {sz.manifest_text(n)}")
    k_ok = c.multiple(k, SLICE, f"k < {sz.manifest_text(k)}")
    m_b, n_b, k_b = (None if m_ok else m_ir), (None if n_ok else n_ir), (None if k_ok else k_ir)
    # what each thread stages per slice: the left operand at rows `t / 8 + 32 q` and
    # k `t % 8` (8 threads read 8 consecutive k of a row), the right one at k `t / 128 + 2 q`
    # and column `t % 128` (consecutive threads, consecutive columns), q < 4. Row offsets,
    # row and column guards are computed once, before the k loop.
    per = size // (TILE * TILE)  # elements of each operand one thread stages per slice
    a_k = body.let(ibin("%", t, u32(SLICE)), "ak")
    a_m = body.let(ibin("/", t, u32(SLICE)), "am")
    a_rows = [
        body.let(ibin("+", row0, ibin("+", a_m, u32(q * BLOCK // per))), "ar") for q in range(per)
    ]
    a_batch = _batch_offset(c, lshape, batch, batch_axes)
    a_base = [body.let(ibin("+", a_batch, ibin("*", r_, k_ir)), "ab") for r_ in a_rows]
    a_ok = [None if m_b is None else body.let(Binary("<", r_, m_b, "bool"), "aok") for r_ in a_rows]
    a_slot = body.let(ibin("+", ibin("*", a_k, u32(BLOCK)), a_m), "as")
    b_k = body.let(ibin("/", t, u32(BLOCK)), "bk")
    b_n = body.let(ibin("+", col0, ibin("%", t, u32(BLOCK))), "bn")
    b_base = body.let(ibin("+", _batch_offset(c, rshape, batch, batch_axes), b_n), "bb")
    b_ok = None if n_b is None else body.let(Binary("<", b_n, n_b, "bool"), "bok")
    b_step = SLICE // per
    b_rows = [body.let(ibin("*", u32(q * b_step), n_ir), "bs") for q in range(per)]
    l_batch = _broadcast_batch(batch_axes, batch, lshape[:-2])
    r_batch = _broadcast_batch(batch_axes, batch, rshape[:-2])

    def stage(k0: Expr, buffer: Expr, right: int) -> None:
        ka = body.let(ibin("+", k0, a_k), "ka")
        ka_ok = None if k_b is None else body.let(Binary("<", ka, k_b, "bool"), "kok")
        a_at = body.let(ibin("+", buffer, a_slot), "sa")
        for q in range(per):
            slot = ibin("+", a_at, u32(q * BLOCK // per))
            idx = Idx(lshape, flat=ibin("+", a_base[q], ka), axes=[*l_batch, a_rows[q], ka])
            _stage(c, a_tile, slot, left, idx, _all_true([a_ok[q], ka_ok]), out)
        kb0 = body.let(ibin("+", k0, b_k), "kb")
        b_at = body.let(ibin("+", buffer, t), "sb")
        b_at0 = body.let(ibin("+", ibin("*", kb0, n_ir), b_base), "bi")
        for q in range(per):
            kb = body.let(ibin("+", kb0, u32(q * b_step)), "kb") if q else kb0
            kb_ok = None if k_b is None else Binary("<", kb, k_b, "bool")
            slot = ibin("+", b_at, u32(q * b_step * BLOCK))
            idx = Idx(rshape, flat=ibin("+", b_at0, b_rows[q]), axes=[*r_batch, kb, b_n])
            _stage(c, b_tile, slot, right, idx, _all_true([kb_ok, b_ok]), out)

    def product(right: int, accs: list[list[Var]]) -> None:
        """The tile of `left @ right` into this thread's `accs`, ending with a barrier (so
        the workgroup buffers may be staged again)."""
        stage(u32(0), u32(0), right)
        body.emit(WaitAsync())
        body.emit(Barrier())
        a_row = body.let(ibin("*", ly, u32(VEC)), "ly")
        b_col = body.let(ibin("*", lx, u32(VEC)), "lx")
        with body.for_("k0_", u32(0), k_ir, u32(SLICE)) as k0:
            slices(k0, accs, right, a_row, b_col)

    def slices(k0: Expr, accs: list[list[Var]], right: int, a_row: Expr, b_col: Expr) -> None:
        # slice s = k0 / SLICE is in buffer s % 2: `cur` is its offset, the next goes to the other
        shift = (size // SLICE).bit_length() - 1
        cur = body.let(Binary("&", Binary("<<", k0, u32(shift), "u32"), u32(size), "u32"), "cur")
        nxt = body.let(Binary("^", cur, u32(size), "u32"), "nxt")
        k_next = body.let(ibin("+", k0, u32(SLICE)), "kn")
        with body.if_(Binary("<", k_next, k_ir, "bool")):
            stage(k_next, nxt, right)
        if mma is not None:
            mma.slice(cur, accs)
        else:
            a_at = body.let(ibin("+", cur, a_row), "ra")
            b_at = body.let(ibin("+", cur, b_col), "rb")
            for kk in range(SLICE):
                a_vals: list[Var] = []
                b_vals: list[Var] = []
                for h in range(2):
                    va = tuple(body.fresh("a", acc_t) for _ in range(VEC))
                    at = ibin("+", a_at, u32(kk * BLOCK + half * h))
                    body.emit(SharedVectorLoad(va, a_tile, at))
                    a_vals += va
                for h in range(2):
                    vb = tuple(body.fresh("b", acc_t) for _ in range(VEC))
                    at = ibin("+", b_at, u32(kk * BLOCK + half * h))
                    body.emit(SharedVectorLoad(vb, b_tile, at))
                    b_vals += vb
                for r in range(REG):
                    for s_ in range(REG):
                        acc = accs[r][s_]
                        term = lw.bin_("*", a_vals[r], b_vals[s_])
                        body.emit(Assign(acc, lw.bin_("+", acc, term)))
        body.emit(WaitAsync())
        body.emit(Barrier())

    if paired is not None and paired_accs is not None:
        product(ev.node(paired)["inputs"][1], paired_accs)  # ends with a barrier
    product(right, accs)
    # an epilogue through a reshape to another rank (an einsum's merged letters split
    # again) reads the product at the flat offset it writes (`KernelContext._position`)
    flat = any(len(c.ev.shape(n)) != len(oshape) for n, _ in c.plan.outputs())
    for r in range(len(rows)):
        for s_ in range(len(cols)):
            cond = _all_below([(rows[r], m_b), (cols[s_], n_b)])
            acc = accs[r][s_]
            result = lw.round_to(acc, out)
            idx = Idx(oshape, axes=[*batch_axes, rows[r], cols[s_]])
            if flat:
                idx = Idx(oshape, flat=idx.flat(body))
            if paired is not None and paired_accs is not None:
                ev.overrides[paired] = (idx.key, lw.round_to(paired_accs[r][s_], out))
            _write_where(c, cond, idx, result)
    return (TILE, TILE, 1), dispatch


# ---------------------------------------------------------------- narrow products

LANES = 8  # threads that fold one row of a `narrow` product's left operand


def _narrow(c: KernelContext) -> tuple[tuple[int, int, int], tuple[Any, Any, Any]]:
    """`h @ w` with w K x J, J at most `schedule.NARROW` (a linear head), as a fold of
    each row of h, like a GEMV with J right-hand vectors: `LANES` consecutive threads own
    a row, `WG / LANES` rows a workgroup. Thread `lane` of a row walks k = lane, lane +
    LANES, ..., computes h there (its element-wise chain, and a product by a matrix of at
    most 16 rows inside it as a dot product, `schedule.inline_product`) and adds h * w[k, j]
    to partial sum j. One `WarpReduce` over the row's lanes per column, then lane 0 stores
    the row's J results through the epilogue. Every element of h is read or computed
    once; w (K x J) is read by every row, from cache. A 128 x 128 tile would spend all but
    J of its 128 columns' multiply-adds on nothing, and store the hidden layer h of an MLP
    for the next launch to read back."""
    ev, body = c.ev, c.body
    root = c.plan.root
    assert root is not None
    left, right = ev.node(root)["inputs"][:2]
    out = ev.dtype(root)
    acc_t, reg = lw.REG[out], reg_dtype(out)
    lshape, rshape, oshape = ev.shape(left), ev.shape(right), ev.shape(root)
    k_size, width = lshape[-1], rshape[-1]
    assert isinstance(width, int)  # `schedule.narrow_matmul`
    lead = tuple(oshape[:-1])
    rows = sz.product(list(lead))
    per_group = WG // LANES
    every = c.multiple(rows, per_group, f"row < {sz.manifest_text(rows)}")
    dispatch, g = c.groups(sz.cdiv(rows, per_group))
    lid = Builtin("local_x")
    row = body.let(ibin("+", ibin("*", g, u32(per_group)), ibin("/", lid, u32(LANES))), "row")
    lane = body.let(ibin("%", lid, u32(LANES)), "lane")
    below = Binary("<", row, size_ir(rows), "bool")
    sums = [body.var(lw.const(0, acc_t), "acc") for _ in range(width)]
    # the row reductions it folds (`Plan.folds`): each launch's reductions, in order
    folds = [(r, ev.reduction(r)) for f in c.plan.folds for r in _fold_roots(f)]
    partials = [body.var(reductions.identity(red.name, red.acc), "part") for _, red in folds]
    # a thread past the last row adds nothing, but joins its lanes' `WarpReduce`s
    with contextlib.nullcontext() if every else body.if_(below):
        lead_axes = Idx(lead, flat=row).axes(body) if lead else []
        _hoist_rows(c, left, lead_axes)
        with body.for_("k", lane, size_ir(k_size), u32(LANES), unroll=False) as k:
            h = ev.at(left, Idx(lshape, axes=[*lead_axes, k]))
            h = body.let(lw.convert(h, ev.dtype(left), reg), "h")
            for j, acc in enumerate(sums):
                w = ev.at(right, Idx(rshape, axes=[k, u32(j)]))
                product = lw.bin_("*", h, lw.convert(w, ev.dtype(right), reg))
                body.emit(Assign(acc, lw.bin_("+", acc, product)))
            for (_, red), part in zip(folds, partials, strict=True):
                v = ev.at(red.x, Idx(red.shape, axes=[*lead_axes, k]))
                v = lw.convert(v, ev.dtype(red.x), red.acc)
                body.emit(Assign(part, reductions.combiner(red.name, red.acc)(part, v)))
    totals = [body.let(WarpReduce("add", acc, acc_t, LANES), "total") for acc in sums]
    folded = [
        body.let(WarpReduce(warp.op_for(red.name), part, lw.REG[red.acc], LANES), "folded")
        for (_, red), part in zip(folds, partials, strict=True)
    ]
    first = Binary("==", lane, u32(0), "bool")
    with body.if_(first if every else Binary("&&", first, below, "bool")):
        lead_axes = Idx(lead, flat=row).axes(body) if lead else []
        idxs = [Idx(oshape, axes=[*lead_axes, u32(j)]) for j in range(width)]
        results = [lw.round_to(total, out) for total in totals]
        # the folded reductions' values, where the epilogue may read them too
        for (r, red), total in zip(folds, folded, strict=True):
            ev.row_values[r] = body.let(reductions.row_value(red, total), "row_total")
        if c.plan.softmax is not None:
            _normalise_row(c, idxs, results)
        for idx, result in zip(idxs, results, strict=True):
            c.write(idx, result)
        for fold in c.plan.folds:
            first = _fold_roots(fold)[0]
            c.write(Idx(ev.shape(first), flat=row), outputs=fold.outputs())
    return (WG, 1, 1), dispatch


def _fold_roots(fold: Plan) -> list[int]:
    """The reductions of a plan a `narrow` launch folds: a `row` plan's roots, or a
    `reduce` plan's root."""
    if fold.roots:
        return fold.roots
    assert fold.root is not None
    return [fold.root]


def _normalise_row(c: KernelContext, idxs: list[Idx], results: list[Expr]) -> None:
    """The softmax (`Plan.softmax`) of the short row a `narrow` launch's lane 0 holds:
    the softmax's input at each of the row's `idxs` (the product's `results` through their
    epilogue), its max, the sum of exp(x - max), then each element's value for the
    softmax's readers (`Evaluator.row_functions`), as a `row` launch computes it."""
    from mimir.codegen.reductions import _row_max, _shift, softmax_input

    ev, body = c.ev, c.body
    soft, root = c.plan.softmax, c.plan.root
    assert soft is not None and root is not None
    x, _ = softmax_input(ev, soft)
    values = []
    for idx, result in zip(idxs, results, strict=True):
        ev.overrides[root] = (idx.key, result)
        values.append(body.let(ev.at(x, ev.same(idx, x)), "v"))
    del ev.overrides[root]
    top = values[0]
    for v in values[1:]:
        top = body.let(_row_max(top, v), "m")
    top = _shift(c, top)
    shifted = [body.let(lw.bin_("-", v, top), "d") for v in values]
    exps = [body.let(lw.call("exp", d), "e") for d in shifted]
    total = exps[0]
    for e in exps[1:]:
        total = body.let(lw.bin_("+", total, e), "sum")
    if ev.node(soft)["spec"].name == "log_softmax":
        lse = body.let(lw.call("mimir_log", total), "lse")
        out = [body.let(lw.bin_("-", d, lse), "y") for d in shifted]
    else:
        out = [body.let(lw.bin_("/", e, total), "y") for e in exps]
    by_key = {idx.key: y for idx, y in zip(idxs, out, strict=True)}
    ev.row_functions[soft] = lambda idx: by_key[idx.key]


def _hoist_rows(c: KernelContext, left: int, lead_axes: list[Expr]) -> None:
    """Evaluate, before a `narrow` launch's loop over k, the values its inline products
    read from their left operand's row (`x[row, 0 .. 12]` for `x @ w1`, w1 13 x H): the
    same at every k, so the loop finds them bound (`Body.memo`) instead of loading them
    again at each k."""
    ev = c.ev
    if left in ev.buffers:
        return
    region = fused_reads(ev.kg.graph, left, c.s.node_buffers)
    for m in sorted(region):
        if op_kind(ev.kg, m) != "rowmix" or m in ev.buffers:
            continue
        x, w = (ev.resolve(i) for i in ev.node(m)["inputs"][:2])
        xshape = ev.shape(x)
        if len(xshape) != len(lead_axes) + 1:
            continue
        for kk in range(int(ev.shape(w)[0])):
            ev.at(x, Idx(xshape, axes=[*lead_axes, u32(kk)]))


# ---------------------------------------------------------------- attention

ATT_ROWS = 64  # query rows an `attention` workgroup owns, 4 per thread
ATT_KEYS = 64  # keys it takes at each step, 4 per thread
ATT_COLS = 64  # output columns it owns, 4 per thread
ATT_SLICE = 16  # the slice of the scores' contraction staged at once
ATT_PART = 16  # the keys of a block whose p goes through workgroup memory at once
ATT_SIDE = 16  # threads per side: thread t is row group t / 16, column group t % 16


# a fill at or below this makes a masked score's exp(fill - max) 0 for any row whose max
# is above it (at this magnitude the next float32 up is 7.6e22 higher)
CAUSAL_FILL = -1e30
_COMPARISONS = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}


class CausalReach(NamedTuple):
    """What `causal_reach` shows: every key more than `reach` past its row scores `fill`
    (a literal), with the manifest's words for it."""

    reach: int
    fill: float
    proof: str


def _float_literal(ev: Any, n: int) -> float | None:
    """A literal number (`-1e30`, `0.0`), or None."""
    node = ev.node(ev.resolve(n))
    if node["kind"] == "const" and isinstance(node.get("value"), (int, float)):
        return float(node["value"])
    if node["kind"] == "unop" and node["symbol"] == "-":
        inner = _float_literal(ev, node["inputs"][0])
        return None if inner is None else -inner
    return None


def _positions(ev: Any, n: int, keys: list[Any]) -> str | None:
    """'row' for `arange(n)[:, None]`, 'key' for `arange(n)[None, :]` (n the scores' rows,
    or keys): a tensor whose value is its own position on one of the last two axes."""
    node = ev.node(ev.resolve(n))
    if node["kind"] != "subscript":
        return None
    source = ev.node(ev.resolve(node["inputs"][0]))
    if source["kind"] != "call" or source["spec"].name != "arange":
        return None
    if source["keywords"] != ["n"]:
        return None  # (a start or a step)
    items = [item[0] for item in node["items"]]
    full = ("slice", None, None)
    shape = [sz.key(s) for s in ev.shape(n)]
    if items == ["slice", "newaxis"] and node["items"][0] == full and shape == [keys[0], sz.key(1)]:
        return "row"
    if items == ["newaxis", "slice"] and node["items"][1] == full and shape == [sz.key(1), keys[1]]:
        return "key"
    return None


def _false_past(ev: Any, cond: int, keys: list[Any]) -> int | None:
    """The d >= 0 such that the bool tensor `cond`, a function of positions alone, is True
    exactly where key j and row i (its last two axes, of sizes `keys`: the scores') have
    j - i <= d (so every row keeps key 0); None where that is not shown. The forms:
    `tril(ones(...), k) op c` with `op(1, c)` True and `op(0, c)` False
    (`tril(ones((T, T))) > 0.0`), of the scores' last two sizes (a broadcast key axis
    would make its j 0 everywhere); `arange(T)[:, None] >= arange(T)[None, :]` or
    `arange(T)[None, :] <= arange(T)[:, None]`. A mask read from data (`tril(keep)`,
    `causal & keep`) may keep nothing of a row, whose softmax then spreads over every key:
    not these."""
    cond = ev.resolve(cond)
    node = ev.node(cond)
    if node["kind"] != "binop" or node["symbol"] not in _COMPARISONS:
        return None
    left, right = node["inputs"]
    op = node["symbol"]
    sides = (_positions(ev, left, keys), _positions(ev, right, keys))
    if (sides, op) in ((("row", "key"), ">="), (("key", "row"), "<=")):  # j <= i
        return 0
    if None not in sides:
        return None
    for mask, other in ((left, right), (right, left)):
        masked = ev.resolve(mask)
        mask_spec, value = ev.spec(masked), _float_literal(ev, other)
        if mask_spec is None or mask_spec.name != "tril" or value is None:
            continue
        if [sz.key(s) for s in ev.shape(masked)[-2:]] != keys:
            continue
        ones = ev.node(ev.resolve(ev._kwargs(masked)["x"]))
        if ones["kind"] != "call" or ones["spec"].name != "ones":
            continue
        compare = _COMPARISONS[op]
        kept, cleared = (
            (compare(1.0, value), compare(0.0, value))
            if mask == left
            else (compare(value, 1.0), compare(value, 0.0))
        )
        k = ev.literal_arg(ev._kwargs(masked).get("k"), 0)
        if kept and not cleared and k >= 0:
            return k
    return None


def causal_reach(ev: Any, x: int, scores: int) -> CausalReach | None:
    """Where a softmax's input x (of the shape of the product `scores`) is
    `where(cond, s, fill)` with cond made from positions, True exactly where key j is
    at most d past row i (`_false_past`, d >= 0: every row keeps key 0, so no row is
    all fill) on cond's own last two axes, the scores' (no broadcast there), and fill a
    literal at most `CAUSAL_FILL`: d, the fill and the manifest's words. A launch may then
    skip every block of keys past its last row's reach: each skipped score's
    exp(fill - max) is 0, the sum and the product by v the same without it."""
    node = ev.node(x)
    spec = ev.spec(x)
    if spec is None or spec.name != "where":
        return None
    cond, _, fill = ev.operands(x)
    value = _float_literal(ev, fill)
    if value is None or value > CAUSAL_FILL:
        return None
    keys = [sz.key(s) for s in ev.shape(scores)[-2:]]
    if len(ev.shape(cond)) < 2 or [sz.key(s) for s in ev.shape(cond)[-2:]] != keys:
        return None
    reach = _false_past(ev, cond, keys)
    if reach is None:
        return None
    fill_text = ev.node(ev.resolve(fill))["text"]
    past = "j > i" if reach == 0 else f"j > i + {reach}"
    return CausalReach(
        reach,
        value,
        (
            f"`{node['text']}` is {fill_text} at every key {past} of row i "
            f"(`{ev.node(ev.resolve(cond))['text']}`), and exp({fill_text} - max) is 0 (every "
            "row keeps key 0); the result differs from the reference only where a skipped "
            f"key's row of v holds inf or nan, or a row's kept scores are all at most "
            f"{fill_text}"
        ),
    )


class _ScoreBlocks:
    """The scores `a @ b` of a workgroup's `ATT_ROWS` rows, a block of `ATT_KEYS` keys at a
    time, through their epilogue up to the softmax's input x: the first half of each
    step of an `attention` launch and both passes of a `scores_softmax` one. Thread t
    holds rows `4 (t / 16) + i` and keys `4 (t % 16) + j` (i, j < 4) of each block; a's
    and b's `ATT_SLICE`-wide slices of the contraction are staged through the workgroup
    array `stage` (a's from 0, b's from `b_at`)."""

    def __init__(
        self,
        c: KernelContext,
        first: int,
        x: int,
        batch: tuple,
        batch_axes: list[Expr],
        row0: Expr,
        rows: list[Expr],
        stage: str,
    ) -> None:
        ev, body = c.ev, c.body
        self.c, self.first, self.x, self.stage = c, first, x, stage
        self.batch_axes, self.rows, self.row0 = batch_axes, rows, row0
        a, b = (ev.resolve(n) for n in ev.node(first)["inputs"][:2])
        self.a, self.b = a, b
        self.ashape, self.bshape, self.sshape = ev.shape(a), ev.shape(b), ev.shape(first)
        m, k, n = self.ashape[-2], self.ashape[-1], self.bshape[-1]
        self.k_ir, self.n_ir = size_ir(k), size_ir(n)
        # a bound needs no guard when its size is proven a multiple of the block
        self.m_b = None if c.multiple(m, ATT_ROWS, f"row < {sz.manifest_text(m)}") else size_ir(m)
        self.n_b = None if c.multiple(n, ATT_KEYS, f"key < {sz.manifest_text(n)}") else self.n_ir
        self.k_b = None if c.multiple(k, ATT_SLICE, f"k < {sz.manifest_text(k)}") else self.k_ir
        self.b_at = ATT_SLICE * ATT_ROWS  # where b's slice starts in `stage`
        self.a_batch = _broadcast_batch(batch_axes, batch, self.ashape[:-2])
        self.b_batch = _broadcast_batch(batch_axes, batch, self.bshape[:-2])
        # staging: 16 consecutive threads read 16 consecutive k of a row of a and of a
        # key's column of b (k.T: a row of k), four rows and four keys each, 16 apart
        t = Builtin("local_x")
        self.sk = body.let(ibin("%", t, u32(ATT_SLICE)), "sk")
        self.sr = body.let(ibin("/", t, u32(ATT_SLICE)), "sr")
        self.apart = WG // ATT_SLICE  # rows of a (keys of b) between one thread's values
        apart, m_b = self.apart, self.m_b
        self.a_rows = [
            body.let(ibin("+", row0, ibin("+", self.sr, u32(apart * h))), "ar")
            for h in range(ATT_ROWS // apart)
        ]
        self.a_ok = [
            None if m_b is None else body.let(Binary("<", r, m_b, "bool"), "aok")
            for r in self.a_rows
        ]
        self.row_ok = [
            None if m_b is None else body.let(Binary("<", r, m_b, "bool"), "rok") for r in rows
        ]
        self.causal = causal_reach(ev, x, first)
        self.end: Expr | None = None

    def keys_end(self, work: str) -> Expr:
        """Where a pass over the keys may stop: past the keys, or under a causal mask
        (`causal_reach`) past the last key the workgroup's last row keeps (the blocks after
        it hold only the mask's fill), which the manifest's `work_skipped` records as
        `work` done only up to there (ending "for"...)."""
        if self.causal is None:
            return self.n_ir
        if self.end is None:
            body, reach = self.c.body, self.causal.reach
            last = body.let(ibin("+", self.row0, u32(ATT_ROWS + reach)), "reach")
            kept = Binary("<", last, self.n_ir, "bool")
            self.end = body.let(lw.select(kept, last, self.n_ir), "keys")
            self.c.skipped.append(
                (
                    f"{work} the blocks of {ATT_KEYS} keys from key r + {ATT_ROWS + reach} "
                    f"on, in the workgroup of rows r .. r + {ATT_ROWS - 1}",
                    self.causal.proof,
                )
            )
        return self.end

    def keys(self, n0: Expr, my_col: Expr) -> tuple[list[Expr], list[Expr | None]]:
        """The keys this thread holds of the block from `n0`, and whether each is one."""
        body, n_b = self.c.body, self.n_b
        keys = [body.let(ibin("+", n0, ibin("+", my_col, u32(j))), "key") for j in range(VEC)]
        valid = [
            None if n_b is None else body.let(Binary("<", key, n_b, "bool"), "kv") for key in keys
        ]
        return keys, valid

    def block(
        self, n0: Expr, my_row: Expr, my_col: Expr
    ) -> tuple[list[list[Expr]], list[Expr], list[Expr | None]]:
        """This thread's 4 x 4 softmax inputs for the block of keys from `n0` (-inf past
        the last row or key), the block's keys it holds, and whether each is one."""
        c, ev, body, stage = self.c, self.c.ev, self.c.body, self.stage
        f32, zero, inf = "f32", lw.const(0, "f32"), lw.const(-lw.INF, "f32")
        sk, sr, apart, b_at = self.sk, self.sr, self.apart, self.b_at
        scores = [[body.var(zero, "s") for _ in range(VEC)] for _ in range(VEC)]
        b_keys = [
            body.let(ibin("+", n0, ibin("+", sr, u32(apart * h))), "bkey")
            for h in range(ATT_KEYS // apart)
        ]
        n_b = self.n_b
        b_ok = [None if n_b is None else Binary("<", key, n_b, "bool") for key in b_keys]
        with body.for_("k0_", u32(0), self.k_ir, u32(ATT_SLICE), unroll=False) as k0:
            kk = body.let(ibin("+", k0, sk), "kk")
            kk_ok = None if self.k_b is None else body.let(Binary("<", kk, self.k_b, "bool"), "kok")
            for h, (row, ok) in enumerate(zip(self.a_rows, self.a_ok, strict=True)):
                slot = ibin("+", ibin("*", sk, u32(ATT_ROWS)), ibin("+", sr, u32(apart * h)))
                idx = Idx(self.ashape, axes=[*self.a_batch, row, kk])
                _stage(c, stage, slot, self.a, idx, _all_true([ok, kk_ok]), float32)
            for h, (key, ok) in enumerate(zip(b_keys, b_ok, strict=True)):
                at = ibin("+", ibin("*", sk, u32(ATT_KEYS)), ibin("+", sr, u32(b_at + apart * h)))
                idx = Idx(self.bshape, axes=[*self.b_batch, kk, key])
                _stage(c, stage, at, self.b, idx, _all_true([ok, kk_ok]), float32)
            body.emit(WaitAsync())
            body.emit(Barrier())
            for kk_ in range(ATT_SLICE):
                qv = tuple(body.fresh("q", f32) for _ in range(VEC))
                body.emit(SharedVectorLoad(qv, stage, ibin("+", my_row, u32(kk_ * ATT_ROWS))))
                kv = tuple(body.fresh("k", f32) for _ in range(VEC))
                at = ibin("+", my_col, u32(b_at + kk_ * ATT_KEYS))
                body.emit(SharedVectorLoad(kv, stage, at))
                for i in range(VEC):
                    for j in range(VEC):
                        product = lw.bin_("*", qv[i], kv[j])
                        body.emit(Assign(scores[i][j], lw.bin_("+", scores[i][j], product)))
            body.emit(Barrier())
        keys, valid = self.keys(n0, my_col)
        first, x = self.first, self.x
        xs: list[list[Expr]] = []
        for i in range(VEC):
            # the softmax's input at (row, key): the scores through their epilogue, which
            # may load (a mask input); -inf past the last row or key
            row_x: list[Expr] = []
            for j in range(VEC):
                idx = Idx(self.sshape, axes=[*self.batch_axes, self.rows[i], keys[j]])
                cond = _all_true([self.row_ok[i], valid[j]])
                ev.overrides[first] = (idx.key, scores[i][j])
                with body.block() as trial:
                    value = ev.at(x, idx)
                exprs = [e for st in walk_statements(trial) for e in _exprs_of(st)]
                loads = any(isinstance(e, Load) for e in [*exprs, *walk_expr(value)])
                if cond is None or not loads:
                    # arithmetic only (a scale, a mask made from the indices): no branch
                    for st in trial:
                        body.emit(st)
                    value = value if cond is None else lw.select(cond, value, inf)
                    row_x.append(body.let(value, "x"))
                    continue
                xv = body.var(inf, "x")
                with body.if_(cond):
                    ev.overrides[first] = (idx.key, scores[i][j])
                    body.emit(Assign(xv, ev.at(x, idx)))
                row_x.append(xv)
            xs.append(row_x)
            del ev.overrides[first]
        return xs, keys, valid


def _online_step(
    c: KernelContext, xs: list[Expr], top: Var, total: Var, shared: bool = True
) -> tuple[Expr, list[Expr]]:
    """One block of a row's online softmax: the block's max (`shared`: over the row's 16
    threads, a `WarpReduce`; else over this thread's values), the running max `top` grown
    to it, p = exp(x - top) for this thread's 4 values (0 for a -inf), and its share
    `total` of the row's sum rescaled and added to. Returns the rescale factor
    exp(m_old - m) (`_rescale`) and the p."""
    from mimir.codegen.reductions import _row_max

    body, f32 = c.body, "f32"
    inf, zero = lw.const(-lw.INF, f32), lw.const(0, f32)
    block = body.let(_row_max(_row_max(xs[0], xs[1]), _row_max(xs[2], xs[3])), "bm")
    if shared:
        block = body.let(WarpReduce("fmax", block, f32, ATT_SIDE), "bm")
    grown = body.let(_row_max(top, block), "mn")
    alpha = body.let(_rescale(top, grown), "alpha")
    row_p = []
    for x in xs:
        e_ = lw.call("exp", lw.bin_("-", x, grown))
        row_p.append(body.let(lw.select(lw.bin_("!=", x, inf), e_, zero), "p"))
    added = lw.bin_("+", lw.bin_("+", row_p[0], row_p[1]), lw.bin_("+", row_p[2], row_p[3]))
    body.emit(Assign(total, lw.bin_("+", lw.bin_("*", total, alpha), added)))
    body.emit(Assign(top, grown))
    return alpha, row_p


def _rescale(old: Expr, new: Expr) -> Expr:
    """exp(old - new), what a sum of exp(x - old) is multiplied by to become one of
    exp(x - new) (new >= old): 1 while the max holds (also for two infinities), 0 from
    -inf (nothing was summed)."""
    inf, zero, one = lw.const(-lw.INF, "f32"), lw.const(0, "f32"), lw.const(1, "f32")
    fresh = lw.select(lw.bin_("==", old, inf), zero, lw.call("exp", lw.bin_("-", old, new)))
    return lw.select(lw.bin_("==", old, new), one, fresh)


def _attention(c: KernelContext) -> tuple[tuple[int, int, int], tuple[Any, Any, Any]]:
    """`softmax(f(a @ b)) @ v` (`schedule._attention`; attention: a = q, b = k.T) in one
    pass over the keys, the online softmax of flash attention. A workgroup of 256 threads
    owns `ATT_ROWS` query rows and `ATT_COLS` columns of the output, or twice as many
    where v may be wider (its bound, at most 128, above 64: the scores are computed once
    for the whole head, not once per 64 columns); thread t holds rows `4 (t / 16) + i`
    (i < 4) of both, the output's columns `4 (t % 16) + j` (and `64 + 4 (t % 16) + j`)
    and, for each block of `ATT_KEYS` keys, the scores of keys `4 (t % 16) + j` (j < 4).
    Per block:

    - the scores, the contraction staged through workgroup memory `ATT_SLICE` at a time
      (one array, `$stage`, holds a's and b's slices, then v's rows), and their epilogue
      f (a scale, a causal mask; guarded past the last row or key, whose value is -inf,
      where it may load): `_ScoreBlocks`;
    - each row's max over the block (a `WarpReduce` over the row's 16 threads), and with
      the running max m grown to it: p = exp(x - m), and this thread's share of the row's
      sum l and the accumulators rescaled by exp(m_old - m) (`_online_step`);
    - p through workgroup memory (`$p_tile`, key-major, `ATT_PART` keys at a time) times
      those keys' rows of v, staged into `$stage` beside it (the second 64 columns' only
      where v has more than 64 at run time, unless proven).

    After the last block each output is its accumulator / l (the threads' shares of l
    summed), through the second product's epilogue. Neither the scores nor the softmax is
    stored: the launch loads a, b and v and stores the output. Workgroup memory: 12 KiB
    (16 with WGSL's arrays for `WarpReduce`, WebGPU's limit). A score of -inf has p = 0 (a
    row of them all gives nan, as the softmax's 0 / 0 does); a softmax over no keys is
    refused by the checker (GPU024). Under a causal mask (`causal_reach`) the walk stops
    after the last key the workgroup's rows keep."""
    from mimir.codegen.reductions import softmax_input

    ev, body, plan = c.ev, c.body, c.plan
    second, first, soft = plan.root, plan.scores, plan.softmax
    assert second is not None and first is not None and soft is not None
    v = ev.resolve(ev.node(second)["inputs"][1])
    x = ev.resolve(softmax_input(ev, soft)[0])
    vshape, oshape = ev.shape(v), ev.shape(second)
    m, e = ev.shape(first)[-2], vshape[-1]
    batch = oshape[:-2]
    bound = e if isinstance(e, int) else sz.upper_bound(e, c.dims)
    halves = 2 if bound is not None and bound > ATT_COLS else 1  # 64 columns each
    width = ATT_COLS * halves
    tm, te = sz.cdiv(m, ATT_ROWS), sz.cdiv(e, width)
    dispatch, g = c.groups(sz.product([*batch, tm, te]))
    col_tile = body.let(ibin("%", g, size_ir(te)), "tile")
    rest = body.let(ibin("/", g, size_ir(te)), "tile")
    row_tile = body.let(ibin("%", rest, size_ir(tm)), "tile") if batch else rest
    flat_batch = body.let(ibin("/", rest, size_ir(tm)), "b") if batch else u32(0)
    batch_axes = Idx(batch, flat=flat_batch).axes(body) if batch else []
    t = Builtin("local_x")
    ly = body.let(ibin("/", t, u32(ATT_SIDE)), "ly")
    lx = body.let(ibin("%", t, u32(ATT_SIDE)), "lx")
    row0 = body.let(ibin("*", row_tile, u32(ATT_ROWS)), "row")
    col0 = body.let(ibin("*", col_tile, u32(width)), "col")
    my_row = body.let(ibin("*", ly, u32(VEC)), "ry")
    my_col = body.let(ibin("*", lx, u32(VEC)), "cx")
    rows = [body.let(ibin("+", row0, ibin("+", my_row, u32(i))), "row") for i in range(VEC)]
    cols = [
        body.let(ibin("+", col0, ibin("+", my_col, u32(h * ATT_COLS + j))), "col")
        for h in range(halves)
        for j in range(VEC)
    ]
    # a, b's slices and v's rows take turns in one array (a barrier ends each phase)
    stage, p_tile = "$stage", "$p_tile"
    scores = _ScoreBlocks(c, first, x, batch, batch_axes, row0, rows, stage)
    e_b = None if c.multiple(e, width, f"col < {sz.manifest_text(e)}") else size_ir(e)
    # the second 64 columns, where v may have none (not a literal above 64)
    wide = (
        None
        if halves == 1 or isinstance(e, int)
        else body.let(Binary("<", ibin("+", col0, u32(ATT_COLS)), size_ir(e), "bool"), "wide")
    )
    size = max(scores.b_at + ATT_SLICE * ATT_KEYS, ATT_PART * width)
    c.shared += [
        SharedArray(stage, "f32", size),
        SharedArray(p_tile, "f32", ATT_PART * ATT_ROWS),
    ]
    v_batch = _broadcast_batch(batch_axes, batch, vshape[:-2])
    # `width` consecutive threads stage a row of v's (four rows each, 4 apart; eight, 2
    # apart, for 128 columns)
    vc = body.let(ibin("%", t, u32(width)), "vc")
    vk = body.let(ibin("/", t, u32(width)), "vk")
    v_col = body.let(ibin("+", col0, vc), "vcol")
    v_ok = None if e_b is None else body.let(Binary("<", v_col, e_b, "bool"), "vok")

    f32 = "f32"
    inf = lw.const(-lw.INF, f32)
    zero, one = lw.const(0, f32), lw.const(1, f32)
    top = [body.var(inf, "m") for _ in range(VEC)]  # each row's running max
    sums = [body.var(zero, "l") for _ in range(VEC)]  # this thread's share of exp(x - m)
    accs = [[body.var(zero, "acc") for _ in cols] for _ in range(VEC)]
    n_b = scores.n_b

    def products(used: int) -> None:
        """p times the staged rows of v (`ATT_PART` keys), for the first `used` halves."""
        for kk_ in range(ATT_PART):
            pv = tuple(body.fresh("p", f32) for _ in range(VEC))
            body.emit(SharedVectorLoad(pv, p_tile, ibin("+", my_row, u32(kk_ * ATT_ROWS))))
            for half in range(used):
                vv = tuple(body.fresh("v", f32) for _ in range(VEC))
                at = ibin("+", my_col, u32(kk_ * width + half * ATT_COLS))
                body.emit(SharedVectorLoad(vv, stage, at))
                for i in range(VEC):
                    for j in range(VEC):
                        acc = accs[i][half * VEC + j]
                        product = lw.bin_("*", pv[i], vv[j])
                        body.emit(Assign(acc, lw.bin_("+", acc, product)))

    end = scores.keys_end("every step for")
    with body.for_("n0_", u32(0), end, u32(ATT_KEYS), unroll=False) as n0:
        xs, _, _ = scores.block(n0, my_row, my_col)
        ps: list[list[Expr]] = []
        alphas = []
        for i in range(VEC):
            alpha, row_p = _online_step(c, xs[i], top[i], sums[i])
            ps.append(row_p)
            alphas.append(alpha)
            for j in range(VEC):
                body.emit(Assign(accs[i][j], lw.bin_("*", accs[i][j], alpha)))
        # the second 64 columns' accumulators, where v has them
        with body.if_(wide) if wide is not None else contextlib.nullcontext():
            for i in range(VEC):
                for j in range(VEC, len(cols)):
                    body.emit(Assign(accs[i][j], lw.bin_("*", accs[i][j], alphas[i])))
        # p times v's rows, `ATT_PART` keys at a time: the threads that hold them store
        # their p in `$p_tile` (key-major) while all stage those rows of v
        owner = body.let(ibin("/", lx, u32(ATT_PART // VEC)), "part")
        for h in range(ATT_KEYS // ATT_PART):
            with body.if_(Binary("==", owner, u32(h), "bool")):
                for j in range(VEC):
                    key = ibin("-", ibin("+", my_col, u32(j)), u32(h * ATT_PART))
                    for i in range(VEC):
                        at = ibin("+", ibin("*", key, u32(ATT_ROWS)), ibin("+", my_row, u32(i)))
                        body.emit(Store(p_tile, at, ps[i][j]))
            for q in range(ATT_PART * width // WG):
                vrow = ibin("+", vk, u32(q * WG // width))
                key = body.let(ibin("+", n0, ibin("+", vrow, u32(h * ATT_PART))), "vkey")
                ok = None if n_b is None else Binary("<", key, n_b, "bool")
                slot = ibin("+", ibin("*", vrow, u32(width)), vc)
                idx = Idx(vshape, axes=[*v_batch, key, v_col])
                _stage(c, stage, slot, v, idx, _all_true([ok, v_ok]), float32)
            body.emit(WaitAsync())
            body.emit(Barrier())
            if wide is None:
                products(halves)
            else:
                with body.block() as both:
                    products(2)
                with body.block() as first_half:
                    products(1)
                body.emit(If(wide, both, first_half))
            body.emit(Barrier())
    for i in range(VEC):
        total = body.let(WarpReduce("add", sums[i], f32, ATT_SIDE), "l")
        inv = body.let(lw.bin_("/", one, total), "inv")
        for j in range(len(cols)):
            cond = _all_below([(rows[i], scores.m_b), (cols[j], e_b)])
            idx = Idx(oshape, axes=[*batch_axes, rows[i], cols[j]])
            value = body.let(lw.bin_("*", accs[i][j], inv), "o")
            _write_where(c, cond, idx, value)
    return (WG, 1, 1), dispatch


def _scores_softmax(c: KernelContext) -> tuple[tuple[int, int, int], tuple[Any, Any, Any]]:
    """`softmax(f(a @ b))` over the last axis, or its log, returned (`schedule._scores_softmax`;
    attention's probabilities) without storing the scores: a workgroup of 256 threads owns
    `ATT_ROWS` rows and walks the keys twice, `ATT_KEYS` at a time, computing each
    block's scores through their epilogue (`_ScoreBlocks`). In the first pass each
    thread keeps, for each of its rows, the running max and sum of exp(x - max) over the
    keys it holds (`_online_step`, no exchange between threads); after it the row's 16
    threads combine them into the row's max m and sum l; the second pass stores
    exp(x - m) / l (log-softmax: x - m - log l) through the softmax's epilogue. A row of
    -inf shifts by 0, as the reference does (0 / 0: nan; -inf - log 0: nan). Under a
    causal mask (`causal_reach`) the first pass stops after the last key the workgroup's
    rows keep, and the second writes the later blocks from the mask's fill, without their
    product. Workgroup memory: 8 KiB (10 with the two arrays WGSL and SPIR-V take for
    `WarpReduce`)."""
    from mimir.codegen.reductions import _shift, rescaled, softmax_input

    ev, body, plan = c.ev, c.body, c.plan
    soft, first = plan.root, plan.scores
    assert soft is not None and first is not None
    x = ev.resolve(softmax_input(ev, soft)[0])
    log = ev.node(soft)["spec"].name == "log_softmax"
    sshape = ev.shape(first)
    batch = sshape[:-2]
    tm = sz.cdiv(sshape[-2], ATT_ROWS)
    dispatch, g = c.groups(sz.product([*batch, tm]))
    row_tile = body.let(ibin("%", g, size_ir(tm)), "tile") if batch else g
    flat_batch = body.let(ibin("/", g, size_ir(tm)), "b") if batch else u32(0)
    batch_axes = Idx(batch, flat=flat_batch).axes(body) if batch else []
    t = Builtin("local_x")
    ly = body.let(ibin("/", t, u32(ATT_SIDE)), "ly")
    lx = body.let(ibin("%", t, u32(ATT_SIDE)), "lx")
    row0 = body.let(ibin("*", row_tile, u32(ATT_ROWS)), "row")
    my_row = body.let(ibin("*", ly, u32(VEC)), "ry")
    my_col = body.let(ibin("*", lx, u32(VEC)), "cx")
    rows = [body.let(ibin("+", row0, ibin("+", my_row, u32(i))), "row") for i in range(VEC)]
    stage = "$stage"
    scores = _ScoreBlocks(c, first, x, batch, batch_axes, row0, rows, stage)
    c.shared.append(SharedArray(stage, "f32", scores.b_at + ATT_SLICE * ATT_KEYS))

    f32 = "f32"
    inf, zero = lw.const(-lw.INF, f32), lw.const(0, f32)
    top = [body.var(inf, "m") for _ in range(VEC)]  # each row's running max
    sums = [body.var(zero, "l") for _ in range(VEC)]  # this thread's share of exp(x - m)
    # each thread's own max and sum over its keys of the row: no exchange per block (and
    # none over the blocks a causal mask fills: each adds exp(fill - max) = 0)
    end = scores.keys_end("the first pass, and the second pass's scores, for")
    with body.for_("n0_", u32(0), end, u32(ATT_KEYS), unroll=False) as n0:
        xs, _, _ = scores.block(n0, my_row, my_col)
        for i in range(VEC):
            _online_step(c, xs[i], top[i], sums[i], shared=False)
    shifts, totals = [], []
    for i in range(VEC):
        # the row's max over its 16 threads, and their sums rescaled to it and added
        row_max = body.let(WarpReduce("fmax", top[i], f32, ATT_SIDE), "m")
        share = body.let(rescaled(top[i], sums[i], row_max), "l")
        total = body.let(WarpReduce("add", share, f32, ATT_SIDE), "l")
        totals.append(body.let(lw.call("mimir_log", total), "lse") if log else total)
        shifts.append(_shift(c, row_max))  # (0 for a row of -inf, as the reference)

    def write(xs: list[list[Expr]], keys: list[Expr], valid: list[Expr | None]) -> None:
        for i in range(VEC):
            for j in range(VEC):
                shifted = lw.bin_("-", xs[i][j], shifts[i])
                if log:
                    value = lw.bin_("-", shifted, totals[i])
                else:
                    value = lw.bin_("/", lw.call("exp", shifted), totals[i])
                cond = _all_true([scores.row_ok[i], valid[j]])
                idx = Idx(sshape, axes=[*batch_axes, rows[i], keys[j]])
                _write_where(c, cond, idx, body.let(value, "y"))

    with body.for_("n0_", u32(0), end, u32(ATT_KEYS), unroll=False) as n0:
        write(*scores.block(n0, my_row, my_col))
    if scores.causal is not None:  # the blocks past the mask's reach: every x is the fill
        fill = lw.const(scores.causal.fill, f32)
        with body.for_("n0_", end, scores.n_ir, u32(ATT_KEYS), unroll=False) as n0:
            write([[fill] * VEC] * VEC, *scores.keys(n0, my_col))
    return (WG, 1, 1), dispatch


WARPS_M, WARPS_N = 2, 4  # the 8 warps of a matmul workgroup over its 128 x 128 tile
MMA_M, MMA_N, MMA_K = MMA_SHAPE
FRAG_M = BLOCK // WARPS_M // MMA_M  # 16 x 8 tiles per warp along m (4) and n (4)
FRAG_N = BLOCK // WARPS_N // MMA_N


class _MmaWarp:
    """The tensor-core products of a `_matmul` (`@gpu(precision="tf32")`, PTX): warp
    `w = t / 32` of the workgroup owns rows `64 (w / 4)` .. `+ 64` and columns `32 (w % 4)`
    .. `+ 32` of the 128 x 128 tile, 4 x 4 `MmaSync` tiles of 16 x 8 each, and at each
    staged k-slice (8 wide, one `MmaSync` deep) reads its fragments from the shared tiles
    with plain loads, at the PTX ISA's positions (`MmaSync`): lane `(g, q) = (l / 4, l % 4)`
    reads A[m][k] at `a_tile[k * 128 + m]` for m in `g, g + 8` (+ 16 per tile) and k in
    `q, q + 4`, and B[k][n] at `b_tile[k * 128 + n]` for n = `g` (+ 8 per tile). The 64
    accumulators of a thread are, as a grid, rows `16 i + g + 8 h` by columns
    `8 j + 2 q + e` (h, e < 2) of the warp's block: what the epilogue stores."""

    def __init__(self, c: KernelContext, t: Expr, row0: Expr, col0: Expr) -> None:
        body = c.body
        self.body = body
        warp = body.let(ibin("/", t, u32(WARP)), "warp")
        lane = body.let(ibin("%", t, u32(WARP)), "lane")
        g = body.let(ibin("/", lane, u32(4)), "g")
        q = body.let(ibin("%", lane, u32(4)), "q")
        wm = body.let(ibin("*", ibin("/", warp, u32(WARPS_N)), u32(BLOCK // WARPS_M)), "wm")
        wn = body.let(ibin("*", ibin("%", warp, u32(WARPS_N)), u32(BLOCK // WARPS_N)), "wn")
        # shared offsets of this lane's first A and B elements (k = q), within a buffer
        self.a_at = body.let(ibin("+", ibin("*", q, u32(BLOCK)), ibin("+", wm, g)), "fa")
        self.b_at = body.let(ibin("+", ibin("*", q, u32(BLOCK)), ibin("+", wn, g)), "fb")
        row = ibin("+", row0, ibin("+", wm, g))
        col = ibin("+", col0, ibin("+", wn, ibin("*", q, u32(2))))
        self.rows = [
            body.let(ibin("+", row, u32(MMA_M * i + 8 * h)), "row")
            for i in range(FRAG_M)
            for h in range(2)
        ]
        self.cols = [
            body.let(ibin("+", col, u32(MMA_N * j + e)), "col")
            for j in range(FRAG_N)
            for e in range(2)
        ]

    def zeros(self) -> list[list[Var]]:
        """A thread's accumulators of one product, zero: grid [2 i + h][2 j + e] is
        fragment (i, j)'s c[2 h + e]."""
        return [
            [self.body.var(lw.const(0, "f32"), "acc") for _ in range(2 * FRAG_N)]
            for _ in range(2 * FRAG_M)
        ]

    def slice(self, cur: Expr, accs: list[list[Var]]) -> None:
        """The `MmaSync`s of the k-slice in the shared buffer at offset `cur`, into `accs`."""
        body = self.body
        a_at = body.let(ibin("+", cur, self.a_at), "ra")
        b_at = body.let(ibin("+", cur, self.b_at), "rb")
        k4 = 4 * BLOCK  # k + 4, in the k-major tiles

        def load(tile: str, at: Expr, offset: int) -> Expr:
            return body.let(Load(tile, ibin("+", at, u32(offset)), "f32"), tile.strip("$_")[0])

        a_frags = [
            tuple(load("$a_tile", a_at, MMA_M * i + off) for off in (0, 8, k4, k4 + 8))
            for i in range(FRAG_M)
        ]
        b_frags = [
            tuple(load("$b_tile", b_at, MMA_N * j + off) for off in (0, k4)) for j in range(FRAG_N)
        ]
        for i, a in enumerate(a_frags):
            for j, b in enumerate(b_frags):
                acc = tuple(accs[2 * i + h][2 * j + e] for h in range(2) for e in range(2))
                body.emit(MmaSync(acc, a, b))


def _stage(
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
        and not any(isinstance(e, Load) for st in trial[:-1] for e in _exprs_of(st))
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


def _batch_offset(c: KernelContext, shape: tuple, batch: tuple, batch_axes: list[Expr]) -> Expr:
    """The flat offset of the operand's matrix for this workgroup's batch position."""
    if not batch:
        return u32(0)
    axes = _broadcast_batch(batch_axes, batch, shape[:-2])
    matrix = ibin("*", size_ir(shape[-2]), size_ir(shape[-1]))
    return c.body.let(ibin("*", linearise(axes, shape[:-2]), matrix), "mo")


def _all_true(conds: list[Expr | None]) -> Expr | None:
    out: Expr | None = None
    for cond in conds:
        if cond is not None:
            out = cond if out is None else Binary("&&", out, cond, "bool")
    return out


def _exprs_of(st: Stmt) -> list[Expr]:
    return [e for top in statement_expressions(st) for e in walk_expr(top)]


def _write_where(c: KernelContext, cond: Expr | None, idx: Idx, value: Expr) -> None:
    """Store the plan's results at `idx`, its root's `value` given, where `cond` holds (a
    tile's row and column bounds); a `cond` of None is a guard proven unnecessary."""
    if cond is None:
        c.write(idx, value)
        return
    with c.body.if_(cond):
        c.write(idx, value)


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


_BUILDERS = {
    "ew": _elementwise,
    "matmul": _matmul,
    "partial": reductions.partial,
    "reduce": reductions.reduce,
    "softmax": reductions.softmax,
    "argreduce": reductions.argreduce,
    "moments": reductions.moments,
    "scan": scans.scan,
    "narrow": _narrow,
    "row": reductions.row,
    "attention": _attention,
    "scores_softmax": _scores_softmax,
}


def build(s: Schedule, index: int, tensor_cores: bool = False) -> Kernel:
    """The IR kernel for launch `index` of schedule `s`; with `tensor_cores` (a PTX build of
    an `@gpu(precision="tf32")` function) a float32 matmul multiplies with `MmaSync`."""
    plan = s.plans[index]
    c = KernelContext(s, plan)
    rows = row_per_thread(c.ev, s.kernel.graph.graph, plan, s.node_buffers)
    plain = plan.kind == "ew" and not plan.mirror and not rows
    built = vectorize.elementwise(c) if plain else None
    if built is None:
        c = KernelContext(s, plan)
        if rows:
            built = _row_elements(c)
        elif plan.mirror:
            built = _mirrored(c)
        elif plan.kind == "matmul":
            built = _matmul(c, tensor_cores)
        else:
            built = _BUILDERS[plan.kind](c)
    workgroup_size, dispatch = built
    body = drop_unread_lets(c.body.root)
    shared_names = {a.name for a in c.shared}
    stored = {st.array for st in walk_statements(body) if isinstance(st, (Store, VectorStore))}
    exprs = list(all_expressions(body))
    loaded = {e.array for e in exprs if isinstance(e, Load)}
    loaded |= {st.array for st in walk_statements(body) if isinstance(st, VectorLoad)}
    handoff = (AtomicAdd, Publish, Await, Retract)
    atomic = {st.array for st in walk_statements(body) if isinstance(st, handoff)}
    stored |= atomic  # (an atomic is read_write, even one only awaited)
    used = (stored | loaded) - shared_names
    buffers = [
        BufferParam(
            b.name,
            lw.STORAGE[b.dtype],
            "read_write" if b.name in stored else "read",
            atomic=b.name in atomic,
        )
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
        groups=c.group_count,
        skipped=c.skipped,
    )
