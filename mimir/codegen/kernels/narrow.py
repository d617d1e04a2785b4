"""The `narrow` launch: `h @ w` with w at most 16 columns wide (`schedule.roots.narrow_matmul`).

8 threads fold each row of h into its few dot products, and its row sums, means, maxes and
mins (`Narrow.folds`), with no tile; lane 0 of a row writes its results, and, for a softmax
over them (`Narrow.softmax`), normalises the row first.
"""

from __future__ import annotations

import contextlib

from mimir.codegen import lower as lw
from mimir.codegen import sizes as sz
from mimir.codegen.builder import Idx, ibin, size_ir, u32
from mimir.codegen.ir import Assign, Binary, Builtin, Expr, WarpReduce
from mimir.codegen.kernels.context import Built, KernelContext, reg_dtype
from mimir.codegen.kernels.folds import combiner, identity, row_value
from mimir.codegen.kernels.online import running_max, stable_shift
from mimir.codegen.kernels.warp import op_for
from mimir.codegen.schedule.layout import WG, softmax_input
from mimir.codegen.schedule.plan import Reduce, Row
from mimir.codegen.schedule.roots import fused_reads, op_kind

LANES = 8  # threads that fold one row of a `narrow` product's left operand


def build(c: KernelContext) -> Built:
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
    # the row reductions it folds (`Narrow.folds`): each launch's reductions, in order
    folds = [(r, ev.reduction(r)) for f in c.plan.folds for r in _fold_roots(f)]
    partials = [body.var(identity(red.name, red.acc), "part") for _, red in folds]
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
                body.emit(Assign(part, combiner(red.name, red.acc)(part, v)))
    totals = [body.let(WarpReduce("add", acc, acc_t, LANES), "total") for acc in sums]
    folded = [
        body.let(WarpReduce(op_for(red.name), part, lw.REG[red.acc], LANES), "folded")
        for (_, red), part in zip(folds, partials, strict=True)
    ]
    first = Binary("==", lane, u32(0), "bool")
    with body.if_(first if every else Binary("&&", first, below, "bool")):
        lead_axes = Idx(lead, flat=row).axes(body) if lead else []
        idxs = [Idx(oshape, axes=[*lead_axes, u32(j)]) for j in range(width)]
        results = [lw.round_to(total, out) for total in totals]
        # the folded reductions' values, where the epilogue may read them too
        for (r, red), total in zip(folds, folded, strict=True):
            ev.row_values[r] = body.let(row_value(red, total), "row_total")
        if c.plan.softmax is not None:
            _normalise_row(c, idxs, results)
        for idx, result in zip(idxs, results, strict=True):
            c.write(idx, result)
        for fold in c.plan.folds:
            first = _fold_roots(fold)[0]
            c.write(Idx(ev.shape(first), flat=row), outputs=fold.outputs())
    return (WG, 1, 1), dispatch


def _fold_roots(fold: Reduce | Row) -> list[int]:
    """The reductions of a plan a `narrow` launch folds: a `row` plan's roots, or a
    `reduce` plan's root."""
    return fold.roots if isinstance(fold, Row) else [fold.root]


def _normalise_row(c: KernelContext, idxs: list[Idx], results: list[Expr]) -> None:
    """The softmax (`Narrow.softmax`) of the short row a `narrow` launch's lane 0 holds:
    the softmax's input at each of the row's `idxs` (the product's `results` through their
    epilogue), its max, the sum of exp(x - max), then each element's value for the
    softmax's readers (`Evaluator.row_functions`), as a `row` launch computes it."""

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
        top = body.let(running_max(top, v), "m")
    top = stable_shift(c, top)
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
