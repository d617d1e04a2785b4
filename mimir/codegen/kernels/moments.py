"""`var` / `std`: the `moments` launch.

One workgroup per output element, or a thread for a literal count of at most
`SERIAL_REDUCE_MAX` (`folds.TwoPass`): two strided passes, each combined over the
workgroup, the mean, then the squared deviations from it (never E[x^2] - E[x]^2). Over
leading axes, column tiles (`column_moments`); over a whole tensor, chunks whose sums and
squared deviations are combined with Chan's parallel variance (`moment_chunk`,
`combine_moments`), in one launch where the target hands off between workgroups.
"""

from __future__ import annotations

from typing import Any

from mimir.codegen import lower as lw
from mimir.codegen import sizes as sz
from mimir.codegen.builder import Idx, ibin, size_ir, u32
from mimir.codegen.ir import Assign, Binary, Builtin, Expr
from mimir.codegen.kernels.columns import column_reads, column_size, column_tile
from mimir.codegen.kernels.context import Built, KernelContext
from mimir.codegen.kernels.folds import (
    TwoPass,
    combiner,
    ddof_of,
    element_reader,
    identity,
    launch_passes,
    part_squares,
    spread,
    variance,
    whole_kept_axes,
    write_total,
)
from mimir.codegen.kernels.handoff import hand_off, handed_off, last_workgroup, reset_counter
from mimir.codegen.kernels.loops import strided
from mimir.codegen.kernels.warp import group_totals, op_for
from mimir.codegen.kernels.whole import (
    Firsts,
    Member,
    chunk_bounds,
    finish_member,
    load_part,
    members_of,
    part_position,
    store_part,
)
from mimir.codegen.schedule.layout import (
    CHUNK,
    COLUMN_LANES,
    COLUMNS,
    SLAB,
    SPLIT_WG,
    column_layout,
)
from mimir.codegen.schedule.plan import PlanKind, Rooted
from mimir.codegen.tensors import Reduction
from mimir.dtypes import float32, uint32


def partial(c: KernelContext) -> Built:
    """The `partial` launch of a split `var`: each workgroup's chunk's sum and squared
    deviations (`moment_chunk`), or a column tile's slab's (`column_moments`)."""
    assert isinstance(c.plan, Rooted)
    red = c.ev.reduction(c.plan.root)
    if column_layout(red) is not None:
        return column_moments(c, red)
    dispatch, _ = moment_chunk(c, red, c.plan.writes[0])
    return (SPLIT_WG, 1, 1), dispatch


def build(c: KernelContext) -> Built:
    """`var` / `std` (`TwoPass`: a workgroup per output element, or a thread for a small
    literal count), two passes: the mean, then the sum of squared deviations from it
    (never E[x^2] - E[x]^2, which cancels catastrophically), divided by count - ddof.
    Over a whole tensor, split over workgroups of CHUNK elements (`moment_chunk`,
    `combine_moments`)."""
    assert isinstance(c.plan, Rooted)
    ev = c.ev
    red = ev.reduction(c.plan.root)
    if column_layout(red) is not None:
        return column_moments(c, red)
    if c.plan.partials is not None:
        ddof = ddof_of(ev, c.plan.root)
        if c.plan.counter is not None:  # every chunk, then the last workgroup combines
            dispatch, _ = moment_chunk(c, red, c.plan.partials)
            groups = size_ir(sz.cdiv(red.count, CHUNK))
            last_workgroup(c, groups)
            combine_moments(c, red, u32(0), ddof)
            reset_counter(c, groups)
            return (SPLIT_WG, 1, 1), dispatch
        dispatch, o = c.groups(1)  # after a `partial` launch
        combine_moments(c, red, o, ddof)
        return (SPLIT_WG, 1, 1), dispatch
    launch = TwoPass(c, red)
    t = lw.REG[red.acc]
    with launch.inside(red):
        _moments(c, red, launch, ddof_of(ev, c.plan.root), t)
    return launch.workgroup, launch.dispatch


def moment_chunk(c: KernelContext, red: Reduction, partials: str) -> tuple[Any, Expr]:
    """A whole `var`'s `partial` work: this workgroup's chunk of n elements (CHUNK, fewer
    in the last), its sum s and, after a second read of the same elements (from the
    cache), the sum of squared deviations from its own mean s / n; thread 0 stores s at
    `partials[group]` and the squares at `partials[groups + group]`. The other
    reductions of the pass are folded beside the sum, and `Fold.elements` stored at each
    element, in the first read."""
    assert red.acc == float32  # (a float16 input's var accumulates in float32)
    body = c.body
    dispatch, g, start, end = chunk_bounds(c, red)
    lid = Builtin("local_x")
    read = element_reader(c, red)
    n = lw.convert(ibin("-", end, start), uint32, float32)
    members = members_of(c)[1:]  # the other reductions of the pass, folded with the sums
    reads = [element_reader(c, m.red) for m in members]
    accs = [body.var(identity(m.folded, m.red.acc), "acc") for m in members]
    over = lambda visit: strided(body, ibin("+", start, lid), end, SPLIT_WG, visit)  # noqa: E731
    kept = whole_kept_axes(c, red)

    def fold(step: Any, shared: str, more: bool = False, then: Any = None) -> list[Expr]:
        """The chunk's `step` summed (`more`: and the members folded; `then`: an
        argmax's positions found in the same read, `Firsts`)."""
        acc = body.var(lw.const(0, "f32"), "acc")

        def visit(r: Expr) -> None:
            if more and c.plan.elements:  # the element-wise outputs, in the first read
                c.write(Idx(red.shape, flat=r), outputs=c.plan.elements)
            body.emit(Assign(acc, lw.bin_("+", acc, step(read(r, kept)))))
            for a, m, get in zip(accs, members, reads, strict=True) if more else ():
                value = get(r, whole_kept_axes(c, m.red))
                body.emit(Assign(a, combiner(m.folded, m.red.acc)(a, value)))
            if then is not None:
                then.visit(r)

        over(visit)
        values = [(acc, "add", shared)]
        if more:
            values += [(a, op_for(m.folded), f"$partial{k + 1}") for k, (a, m) in
                       enumerate(zip(accs, members, strict=True))]  # fmt: skip
        return group_totals(body, c.shared, [*values, *(then.values() if then else [])], SPLIT_WG)

    total, *others = fold(lambda v: v, "$sum", True)
    mean = body.let(lw.bin_("/", total, n), "mean")

    def square(v: Expr) -> Expr:
        d = body.let(lw.bin_("-", v, mean), "d")
        return lw.bin_("*", d, d)

    # an argmax's first position, in the squares' read of the chunk (from the cache)
    positions = Firsts.of_chunk(c, members, others, reads)
    squares, *found = fold(square, "$squares", then=positions)
    firsts = positions.found(found)
    groups = size_ir(sz.cdiv(red.count, CHUNK))
    with body.if_(Binary("==", lid, u32(0), "bool")):
        hand_off(c, partials, g, lw.to_storage(total, float32))
        hand_off(c, partials, ibin("+", groups, g), lw.to_storage(squares, float32))
        for m, value, first in zip(members, others, firsts, strict=True):
            store_part(c, m, g, value, first)
    return dispatch, g


def combine_moments(c: KernelContext, red: Reduction, o: Expr, ddof: int) -> None:
    """A whole `var` from its chunks' sums s_g and squared deviations q_g (n_g elements
    each): the mean m = sum(s_g) / count, then sum(q_g + n_g (s_g / n_g - m)^2), the
    squared deviations from m (Chan et al.'s parallel variance, folded like any sum), over
    count - ddof; thread 0 writes it (its `sqrt` for `std`)."""
    assert c.plan.partials is not None
    body, partials = c.body, c.plan.partials
    lid = Builtin("local_x")
    groups = size_ir(sz.cdiv(red.count, CHUNK))
    count = size_ir(red.count)

    members = members_of(c)[1:]  # the other reductions of the pass, combined with the sums
    accs = [body.var(identity(m.folded, m.red.acc), "acc") for m in members]
    over = lambda visit: strided(body, lid, groups, SPLIT_WG, visit)  # noqa: E731
    part = lambda m, r: load_part(c, m, r)  # noqa: E731

    def fold(step: Any, shared: str, more: bool = False) -> list[Expr]:
        acc = body.var(lw.const(0, "f32"), "acc")

        def visit(r: Expr) -> None:
            body.emit(Assign(acc, lw.bin_("+", acc, step(r))))
            for a, m in zip(accs, members, strict=True) if more else ():
                body.emit(Assign(a, combiner(m.folded, m.red.acc)(a, part(m, r))))

        over(visit)
        values = [(acc, "add", shared)]
        if more:
            values += [(a, op_for(m.folded), f"$combine{k + 1}") for k, (a, m) in
                       enumerate(zip(accs, members, strict=True))]  # fmt: skip
        return group_totals(body, c.shared, values, SPLIT_WG)

    total, *others = fold(lambda r: handed_off(c, partials, r, "f32"), "$sum", True)
    mean = body.let(lw.bin_("/", total, lw.convert(count, uint32, float32)), "mean")

    def square(r: Expr) -> Expr:
        s = handed_off(c, partials, r, "f32")
        q = handed_off(c, partials, ibin("+", groups, r), "f32")
        return part_squares(body, count, r, CHUNK, s, q, mean)[0]

    (squares,) = fold(square, "$squares")
    position = lambda m, r: part_position(c, m, r)  # noqa: E731
    firsts = Firsts(c, members, others, part, position).folded(over)
    value = spread(body, red, squares, ddof)
    with body.if_(Binary("==", lid, u32(0), "bool")):
        write_total(c, red, o, value)
        for m, total, first in zip(members, others, firsts, strict=True):
            finish_member(c, m, o, total, first)


def _moments(c: KernelContext, red: Reduction, launch: TwoPass, ddof: int, t: str) -> None:
    body, o = c.body, launch.o
    value = variance(body, red, ddof, *launch_passes(c, red, launch), ("$sum", "$squares"))
    with launch.once():
        write_total(c, red, o, value)


def column_moments(c: KernelContext, red: Reduction) -> Built:
    """`var` / `std` over leading axes, in the column layout of `column_pass`: each column's
    sum over the thread's rows, combined over the 4 lanes (every thread gets its
    column's), the mean, then the squared deviations from it the same way (the rows read
    again, from the cache). With slabs, each stores its sum s and squares q (at
    `at_partial` in the first and the second half of the partials), and the combine
    folds sum(s) for the mean m of the column, then sum(q + n (s / n - m)^2) over the
    slabs of n rows (Chan's parallel variance, as `combine_moments`).

    Reductions of the same layout (`Fold.reductions`: the mean beside the variance of a
    batch norm) are folded in the first pass, as `column_pass` folds them."""
    assert isinstance(c.plan, Rooted)
    body = c.body
    tile = column_tile(c, red)
    ddof = ddof_of(c.ev, c.plan.root)
    size = size_ir(column_size(red, tile))
    count = size_ir(red.count)
    partials = c.plan.partials_buffer
    members = []
    for p in c.plan.reductions:
        buffer = p.partials_buffer
        assert p.root is not None
        members.append(Member(p.root, c.ev.reduction(p.root), buffer or "", p.outputs()))
    names = [f"$columns{k}" for k in range(len(members))]
    folds = [(m.red.name, m.red.acc, name) for m, name in zip(members, names, strict=True)]

    def finish(squares: Expr, totals: list[Expr]) -> None:
        value = spread(body, red, squares, ddof)
        with body.if_(tile.mine):
            write_total(c, red, tile.o, value)
            for m, total in zip(members, totals, strict=True):
                write_total(c, m.red, tile.o, total, m.root, m.outputs)

    def totals(fold: Any, name: str, more: list[Any] = []) -> list[Expr]:  # noqa: B006
        return tile.lanes([("sum", float32, name), *more], fold)

    def combined() -> None:
        assert partials is not None

        def sums(add: Any) -> None:
            def visit(k: Expr) -> None:
                at = body.let(tile.at_partial(k), "at")
                loads = [handed_off(c, partials, at, "f32")]
                for m in members:
                    loaded = handed_off(c, m.partials, at, lw.STORAGE[m.red.acc])
                    loads.append(body.let(lw.from_storage(loaded, m.red.acc), "partial"))
                add(loads)

            strided(body, tile.lane, size_ir(tile.slabs), COLUMN_LANES, visit)

        first, *more = totals(sums, "$sum", folds)
        whole = lw.convert(count, uint32, float32)
        mean = body.let(lw.bin_("/", first, whole), "mean")

        def squares(add: Any) -> None:
            def visit(k: Expr) -> None:
                at = body.let(tile.at_partial(k), "at")
                s = handed_off(c, partials, at, "f32")
                q = handed_off(c, partials, ibin("+", size, at), "f32")
                term, rows = part_squares(body, count, k, SLAB, s, q, mean)
                # a slab of no rows (a count that may be 0 has one more) adds nothing
                add([lw.select(Binary(">", rows, u32(0), "bool"), term, lw.const(0, "f32"))])

            strided(body, tile.lane, size_ir(tile.slabs), COLUMN_LANES, visit)

        (q,) = totals(squares, "$squares")
        finish(q, more)

    if tile.combine_only:
        combined()
        return (COLUMNS * COLUMN_LANES, 1, 1), tile.dispatch
    s, *more = totals(column_reads(c, tile, [red, *(m.red for m in members)]), "$sum", folds)
    first, end = tile.rows()
    n = lw.convert(ibin("-", end, first), uint32, float32)
    mean = body.let(lw.bin_("/", s, n), "mean")

    def deviation(values: list[Expr], _: Expr) -> list[Expr]:
        d = body.let(lw.bin_("-", values[0], mean), "d")
        return [lw.bin_("*", d, d)]

    fold = column_reads(c, tile, [red])
    (q,) = totals(lambda add: fold(add, deviation), "$squares")
    if not tile.slabbed:
        finish(q, more)
        return (COLUMNS * COLUMN_LANES, 1, 1), tile.dispatch
    assert partials is not None
    with body.if_(tile.mine):
        at = body.let(tile.at_partial(tile.slab), "at")
        hand_off(c, partials, at, lw.to_storage(s, float32))
        hand_off(c, partials, ibin("+", size, at), lw.to_storage(q, float32))
        for m, total in zip(members, more, strict=True):
            hand_off(c, m.partials, at, lw.to_storage(total, m.red.acc))
    if c.plan.kind != PlanKind.PARTIAL:
        tile.handoff(
            combined,
            lambda at: [
                (partials, at),
                (partials, ibin("+", size, at)),
                *((m.partials, at) for m in members),
            ],
        )
    return (COLUMNS * COLUMN_LANES, 1, 1), tile.dispatch
