"""Column reductions: a reduction over leading axes (`x.sum(axis=0)`), a workgroup per
tile of `COLUMNS` columns whose threads fold the rows of their column."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mimir.codegen import lower as lw
from mimir.codegen import sizes as sz
from mimir.codegen.builder import Idx, ibin, size_ir, u32
from mimir.codegen.ir import (
    Assign,
    Barrier,
    Binary,
    Builtin,
    Expr,
    Load,
    Retract,
    SharedArray,
    Store,
)
from mimir.codegen.kernels.context import Built, KernelContext
from mimir.codegen.kernels.folds import combiner, element_reader, identity, write_total
from mimir.codegen.kernels.handoff import (
    hand_off,
    handed_off,
    handoff_fence,
    last_workgroup,
    reset_counter,
)
from mimir.codegen.kernels.loops import strided
from mimir.codegen.kernels.whole import Member
from mimir.codegen.schedule.layout import COLUMN_LANES, COLUMNS, SLAB, column_layout, slab_count
from mimir.codegen.schedule.plan import PlanKind
from mimir.codegen.tensors import Reduction
from mimir.dtypes import DType


@dataclass
class Tile:
    """Where a thread of a column workgroup (`column_pass`) is: its column `col` of the
    tile, lane, slab and outer index `a`, its output element `o` = a * inner + col, and
    the rows [first, end) of its slab."""

    c: KernelContext
    red: Reduction
    dispatch: Any
    slabbed: bool  # the rows are split in slabs whose partials are combined
    combine_only: bool  # a `reduce` launch after a `partial` one: partials, no rows
    slabs: Any
    tiles: Any
    slab: Expr
    a: Expr
    tile: Expr
    column: Expr
    lane: Expr
    col: Expr
    o: Expr
    inside: Expr  # col is a column of the tensor (the last tile may be partly past it)
    mine: Expr  # lane 0 of a column inside: the thread that stores the column's results

    def at_partial(self, k: Expr) -> Expr:
        """Slab k's partial of this column: at (a * slabs + k) * inner + col."""
        _, _, inner = column_layout(self.red) or ()
        slabs, inner = size_ir(self.slabs), size_ir(inner)
        return ibin("+", ibin("*", ibin("+", ibin("*", self.a, slabs), k), inner), self.col)

    def rows(self) -> tuple[Expr, Expr]:
        """The first and the end of this slab's rows (all of them without slabs)."""
        body = self.c.body
        count = size_ir(self.red.count)
        if not self.slabbed:
            return u32(0), count
        first = body.let(ibin("*", self.slab, u32(SLAB)), "first")
        stop = body.let(ibin("+", first, u32(SLAB)), "stop")
        return first, body.let(lw.select(Binary("<", stop, count, "bool"), stop, count), "end")

    def lanes(self, members: list[tuple[str, DType, str]], fold: Any) -> list[Expr]:
        """Each thread's folds of `members` ((reduction name, accumulator dtype,
        threadgroup array); inside the tile's columns: `fold(add)` calls `add` with each
        member's value at an element), then in every thread its column's: the 4 lanes'
        values combined in order (after one barrier; never written again)."""
        body, lid = self.c.body, Builtin("local_x")
        for _, acc, name in members:
            if not any(s.name == name for s in self.c.shared):
                self.c.shared.append(SharedArray(name, lw.REG[acc], COLUMNS * COLUMN_LANES))
        accs = [body.var(identity(op, acc), "acc") for op, acc, _ in members]

        def add(values: list[Expr]) -> None:
            for v, (op, acc, _), value in zip(accs, members, values, strict=True):
                body.emit(Assign(v, combiner(op, acc)(v, value)))

        with body.if_(self.inside):
            fold(add)
        for v, (_, _, name) in zip(accs, members, strict=True):
            body.emit(Store(name, lid, v))
        body.emit(Barrier())
        totals = []
        for op, acc, name in members:
            t = lw.REG[acc]
            total = body.var(Load(name, self.column, t), "total")
            for k in range(1, COLUMN_LANES):
                value = body.let(Load(name, ibin("+", self.column, u32(k * COLUMNS)), t), "lane")
                body.emit(Assign(total, combiner(op, acc)(total, value)))
            totals.append(total)
        return totals

    def handoff(self, combined: Any, partials: Any) -> None:
        """After the slab's partials are stored: the last slab of the tile to finish
        (its counter, element a * tiles + tile) runs `combined()`; where they are tagged,
        then retracts them: `partials(at)` is the (buffer, index) of each at slab
        partial `at` (`at_partial`) of a column."""
        body = self.c.body
        handoff_fence(self.c)  # release this thread's stores (on to thread 0's: a device barrier)
        body.emit(Barrier(device=True))
        slot = body.let(ibin("+", ibin("*", self.a, size_ir(self.tiles)), self.tile), "slot")
        last_workgroup(self.c, size_ir(self.slabs), slot)
        combined()

        def retract() -> None:
            """The tile's partials, each by the thread that folded it (`combined`)."""

            def visit(k: Expr) -> None:
                at = body.let(self.at_partial(k), "at")
                for array, index in partials(at):
                    body.emit(Retract(array, index))

            with body.if_(self.inside):
                strided(body, self.lane, size_ir(self.slabs), COLUMN_LANES, visit)

        reset_counter(self.c, size_ir(self.slabs), slot, retract=retract)


def column_tile(c: KernelContext, red: Reduction) -> Tile:
    """The workgroups of a column launch (`column_pass`) and where each thread is."""
    body = c.body
    layout = column_layout(red)
    assert layout is not None
    outer, _, inner = layout
    lid = Builtin("local_x")
    slabbed = c.plan.partials is not None or c.plan.kind == PlanKind.PARTIAL
    slabs = slab_count(red, c.dims) if slabbed else 1
    tiles = sz.cdiv(inner, COLUMNS)
    # a `reduce` launch after a `partial` one: it combines the slabs' partials
    combine_only = (
        c.plan.kind != PlanKind.PARTIAL and c.plan.partials is not None and not c.plan.counter
    )
    per_tile = 1 if combine_only else slabs
    dispatch, g = c.groups(sz.product([outer, tiles, per_tile]))
    if isinstance(per_tile, int) and per_tile == 1:
        slab, rest = u32(0), g
    else:
        slab = body.let(ibin("%", g, size_ir(per_tile)), "slab")
        rest = body.let(ibin("/", g, size_ir(per_tile)), "tile")
    tile = body.let(ibin("%", rest, size_ir(tiles)), "tile")
    a = body.let(ibin("/", rest, size_ir(tiles)), "outer")
    column = body.let(ibin("%", lid, u32(COLUMNS)), "column")
    lane = body.let(ibin("/", lid, u32(COLUMNS)), "lane")
    col = body.let(ibin("+", ibin("*", tile, u32(COLUMNS)), column), "col")
    o = body.let(ibin("+", ibin("*", a, size_ir(inner)), col), "o")
    inside = Binary("<", col, size_ir(inner), "bool")
    mine = Binary("&&", Binary("==", lane, u32(0), "bool"), inside, "bool")
    return Tile(c, red, dispatch, slabbed, combine_only, slabs, tiles, slab, a, tile,
                 column, lane, col, o, inside, mine)  # fmt: skip


def column_reads(c: KernelContext, tile: Tile, reds: list[Reduction]) -> Any:
    """`fold(add)` over this thread's rows of its slab: `add` with each reduction's
    input element there."""
    red = tile.red
    outer_axes = Idx(tuple(red.shape[: red.axes[0]]), flat=tile.a).axes(c.body)
    inner_axes = Idx(tuple(red.shape[red.axes[-1] + 1 :]), flat=tile.col).axes(c.body)
    reads = [element_reader(c, r, tile.o) for r in reds]
    first, end = tile.rows()

    def fold(add: Any, step: Any = None) -> None:
        """`step(values, r)`, if given, makes what `add` gets of the values at row r."""

        def visit(r: Expr) -> None:
            values = [read(r, [*outer_axes, *inner_axes]) for read in reads]
            add(values if step is None else step(values, r))

        strided(c.body, ibin("+", first, tile.lane), end, COLUMN_LANES, visit)

    return fold


def column_pass(c: KernelContext, red: Reduction) -> Built:
    """A reduction over leading axes (`column_layout`), and the others of the same layout
    folded in the same pass (`Fold.reductions`: `x.mean(axis=0), x.max(axis=0)`): a
    workgroup per tile of `COLUMNS` columns (and per slab of `SLAB` rows, when there may
    be more), its threads 4 per column. Thread (lane, col) folds rows lane, lane + 4, ...
    of its column, so a warp reads 32 consecutive elements of a row (the strided
    `reduce` read one element per row and thread, a row apart); the 4 lanes combine in
    threadgroup memory, in order.

    One slab: lane 0 writes the outputs. Several: lane 0 stores the slab's partials; in
    a `partial` launch that is all, and a `reduce` launch after it, a workgroup per tile,
    combines the slabs' partials the same way (4 lanes, every 4th slab); in one launch
    (`Fold.counter`, a counter per tile), the last slab of each tile to finish does."""
    body = c.body
    members = []
    for p in [c.plan, *c.plan.reductions]:
        partials = p.partials_buffer
        outputs = None if p is c.plan else p.outputs()
        assert p.root is not None
        members.append(Member(p.root, c.ev.reduction(p.root), partials or "", outputs))
    tile = column_tile(c, red)
    names = ["$columns" if k == 0 else f"$columns{k}" for k in range(len(members))]
    folds = [(m.red.name, m.red.acc, name) for m, name in zip(members, names, strict=True)]

    def finish(totals: list[Expr]) -> None:
        with body.if_(tile.mine):
            for m, total in zip(members, totals, strict=True):
                write_total(c, m.red, tile.o, total, m.root, m.outputs)

    def combined() -> None:
        """Every slab's partials of the tile's columns, folded; lane 0 writes the results."""

        def fold(add: Any) -> None:
            def visit(k: Expr) -> None:
                at = body.let(tile.at_partial(k), "at")
                loads = [handed_off(c, m.partials, at, lw.STORAGE[m.red.acc]) for m in members]
                add([
                    body.let(lw.from_storage(v, m.red.acc), "partial")
                    for v, m in zip(loads, members, strict=True)
                ])  # fmt: skip

            strided(body, tile.lane, size_ir(tile.slabs), COLUMN_LANES, visit)

        finish(tile.lanes(folds, fold))

    if tile.combine_only:
        combined()
        return (COLUMNS * COLUMN_LANES, 1, 1), tile.dispatch
    totals = tile.lanes(folds, column_reads(c, tile, [m.red for m in members]))
    if not tile.slabbed:
        finish(totals)
        return (COLUMNS * COLUMN_LANES, 1, 1), tile.dispatch
    with body.if_(tile.mine):
        at = body.let(tile.at_partial(tile.slab), "at")
        for m, total in zip(members, totals, strict=True):
            hand_off(c, m.partials, at, lw.to_storage(total, m.red.acc))
    if c.plan.kind != PlanKind.PARTIAL:
        tile.handoff(combined, lambda at: [(m.partials, at) for m in members])
    return (COLUMNS * COLUMN_LANES, 1, 1), tile.dispatch


def column_size(red: Reduction, tile: Tile) -> Any:
    """Elements in one half of a column `var`'s partials: outer * slabs * inner."""
    outer, _, inner = column_layout(red) or ()
    return sz.product([outer, tile.slabs, inner])
