"""`argmax` / `argmin`: the `argreduce` launch.

One workgroup per output element, or a thread for a literal count of at most
`SERIAL_REDUCE_MAX` (`folds.TwoPass`): two passes, the extremum (nan-propagating), then the
first position that holds it, as NumPy answers. Over leading axes, column tiles
(`column_args`); over a whole tensor, chunks whose extrema and first positions are combined
as a whole `reduce`'s partials are (`whole`).
"""

from __future__ import annotations

from typing import Any

from mimir.codegen import lower as lw
from mimir.codegen.builder import Idx, size_ir
from mimir.codegen.ir import Cast, Expr
from mimir.codegen.kernels.columns import column_reads, column_tile
from mimir.codegen.kernels.context import Built, KernelContext
from mimir.codegen.kernels.folds import TwoPass, first_extremum, holds, launch_passes
from mimir.codegen.kernels.handoff import hand_off, handed_off
from mimir.codegen.kernels.loops import strided
from mimir.codegen.kernels.whole import combine_partials, last_block, members_of, partial_pass
from mimir.codegen.schedule.layout import (
    COLUMN_LANES,
    COLUMNS,
    SPLIT_WG,
    arg_reduction,
    column_layout,
)
from mimir.codegen.schedule.plan import PlanKind, Rooted
from mimir.codegen.tensors import Reduction
from mimir.dtypes import uint32


def partial(c: KernelContext) -> Built:
    """The `partial` launch of a split argmax: each workgroup's chunk's extremum and the
    first position holding it (`partial_pass`, `Firsts`), or a column tile's slab's
    (`column_args`)."""
    assert isinstance(c.plan, Rooted)
    red = arg_reduction(c.ev, c.plan.root)
    if column_layout(red) is not None:
        return column_args(c, red)
    dispatch, _ = partial_pass(c, members_of(c))
    return (SPLIT_WG, 1, 1), dispatch


def build(c: KernelContext) -> Built:
    """`argmax` / `argmin` (`TwoPass`: a workgroup per output element, or a thread for a
    small literal count), two passes: the extremum (nan-propagating, so a row with a nan
    has a nan extremum), then the first position that holds it (or holds a nan), as NumPy
    answers."""
    assert isinstance(c.plan, Rooted)
    ev = c.ev
    red = arg_reduction(ev, c.plan.root)
    if column_layout(red) is not None:
        return column_args(c, red)
    if c.plan.partials is not None:  # over a whole tensor, split as a whole `reduce` is
        if c.plan.counter is not None:  # every chunk, then the last workgroup combines
            return last_block(c, red)
        dispatch, o = c.groups(1)  # after a `partial` launch
        combine_partials(c, members_of(c), o, "$partial")
        return (SPLIT_WG, 1, 1), dispatch
    t = lw.REG[red.acc]
    launch = TwoPass(c, red)
    with launch.inside(red):
        _argreduce(c, red, launch, t)
    return launch.workgroup, launch.dispatch


def _argreduce(c: KernelContext, red: Reduction, launch: TwoPass, t: str) -> None:
    body, o = c.body, launch.o
    where = first_extremum(body, red, *launch_passes(c, red, launch), ("$best", "$first"))
    with launch.once():
        assert isinstance(c.plan, Rooted)
        c.write(Idx(c.ev.shape(c.plan.root), flat=o), body.let(where, "index"))


def column_args(c: KernelContext, red: Reduction) -> Built:
    """`argmax` / `argmin` over leading axes, in the column layout of `column_pass`: the
    column's extremum over the 4 lanes (every thread gets it), then the first row holding
    it (a min over the lanes of the rows that hold it). With slabs, each stores its
    extremum (`partials`) and first row (`Fold.positions`); the combine takes the
    extremum of those, then the first row among the slabs that hold it."""
    body = c.body
    tile = column_tile(c, red)
    name = "max" if red.name == "argmax" else "min"
    t = lw.REG[red.acc]
    values = c.plan.partials_buffer
    positions = c.plan.positions
    nowhere = lw.const(lw.UINT_MAX, "u32")

    def finish(where: Expr) -> None:
        with body.if_(tile.mine):
            assert isinstance(c.plan, Rooted)
            index = body.let(Cast(where, "i32"), "index")
            c.write(Idx(c.ev.shape(c.plan.root), flat=tile.o), index)

    def combined() -> None:
        assert values is not None and positions is not None

        def extrema(add: Any) -> None:
            def visit(k: Expr) -> None:
                at = body.let(tile.at_partial(k), "at")
                loaded = handed_off(c, values, at, lw.STORAGE[red.acc])
                add([body.let(lw.from_storage(loaded, red.acc))])

            strided(body, tile.lane, size_ir(tile.slabs), COLUMN_LANES, visit)

        (best,) = tile.lanes([(name, red.acc, "$best")], extrema)

        def firsts(add: Any) -> None:
            def visit(k: Expr) -> None:
                at = body.let(tile.at_partial(k), "at")
                v = body.let(
                    lw.from_storage(handed_off(c, values, at, lw.STORAGE[red.acc]), red.acc)
                )
                row = handed_off(c, positions, at, "u32")
                add([lw.select(holds(v, best, t), row, nowhere)])

            strided(body, tile.lane, size_ir(tile.slabs), COLUMN_LANES, visit)

        (where,) = tile.lanes([("min", uint32, "$first")], firsts)
        finish(where)

    if tile.combine_only:
        combined()
        return (COLUMNS * COLUMN_LANES, 1, 1), tile.dispatch
    fold = column_reads(c, tile, [red])
    (best,) = tile.lanes([(name, red.acc, "$best")], fold)

    def hits(found: list[Expr], r: Expr) -> list[Expr]:
        v = body.let(found[0], "v")
        return [lw.select(holds(v, best, t), r, nowhere)]

    (where,) = tile.lanes([("min", uint32, "$first")], lambda add: fold(add, hits))
    if not tile.slabbed:
        finish(where)
        return (COLUMNS * COLUMN_LANES, 1, 1), tile.dispatch
    assert values is not None and positions is not None
    with body.if_(tile.mine):
        at = body.let(tile.at_partial(tile.slab), "at")
        hand_off(c, values, at, lw.to_storage(best, red.acc))
        hand_off(c, positions, at, where)
    if c.plan.kind != PlanKind.PARTIAL:
        tile.handoff(combined, lambda at: [(values, at), (positions, at)])
    return (COLUMNS * COLUMN_LANES, 1, 1), tile.dispatch
