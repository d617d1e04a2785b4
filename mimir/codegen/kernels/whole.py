"""Whole reductions: a reduction to one element split over workgroups of `CHUNK`
elements, each folding its chunk into a partial, and the combine of the partials (a second
launch, or the last workgroup of one; `handoff`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mimir.codegen import lower as lw
from mimir.codegen import sizes as sz
from mimir.codegen.builder import Idx, ibin, size_ir, u32
from mimir.codegen.ir import Assign, Barrier, Binary, Builtin, Cast, Expr, If
from mimir.codegen.kernels.context import Built, KernelContext
from mimir.codegen.kernels.folds import (
    combiner,
    element_reader,
    holds,
    identity,
    whole_kept_axes,
    write_total,
)
from mimir.codegen.kernels.handoff import (
    hand_off,
    handed_off,
    handoff_fence,
    last_workgroup,
    reset_counter,
)
from mimir.codegen.kernels.loops import (
    LANES,
    four_wide,
    offset,
    row_vector,
    row_vectors,
    strided,
    vector_loop,
)
from mimir.codegen.kernels.warp import group_total, group_totals, op_for
from mimir.codegen.schedule.layout import CHUNK, SPLIT_WG, arg_reduction, row_launch_groups
from mimir.codegen.schedule.roots import root_kind
from mimir.codegen.tensors import Reduction


@dataclass
class Member:
    """A whole reduction of a pass over the elements (`partial_pass`): the plan's own or one
    of `Fold.reductions`. `outputs` None: the plan's outputs. An argmax / argmin's
    `positions` hold its parts' first positions (`partials`, their extrema)."""

    root: int
    red: Reduction
    partials: str
    outputs: list[tuple[int, list[str]]] | None
    positions: str | None = None

    @property
    def folded(self) -> str:
        """What the pass folds: an argmax's extremum, the reduction itself otherwise."""
        return {"argmax": "max", "argmin": "min"}.get(self.red.name, self.red.name)


def members_of(c: KernelContext) -> list[Member]:
    """The whole reductions the launch folds or combines: the plan's, then
    `Fold.reductions`, each with its partials' buffer (a `partial` plan's output)."""
    members = []
    for p in [c.plan, *c.plan.reductions]:
        partials = p.partials_buffer
        assert p.root is not None and partials is not None
        outputs = None if p is c.plan else p.outputs()
        arg = root_kind(c.ev.kg, p.root) == "argreduce"
        red = arg_reduction(c.ev, p.root) if arg else c.ev.reduction(p.root)
        members.append(Member(p.root, red, partials, outputs, p.positions))
    return members


class Firsts:
    """The second fold of the argmax / argmin members of a pass (`best_and_first`'s),
    after the first folded their extrema (`bests`, the same in every thread): the first
    position `position(m, r)` among the elements `element(m, r)` that hold the extremum
    (or a nan, when that is nan). `visit` each element; then `values` join a tree
    (`group_totals`), and `found` takes its totals: None for the other members."""

    def __init__(
        self,
        c: KernelContext,
        members: list[Member],
        bests: list[Expr],
        element: Any,
        position: Any,
    ) -> None:
        self.c, self.members, self.bests = c, members, bests
        self.element, self.position = element, position
        self.args = [k for k, m in enumerate(members) if m.positions is not None]
        self.accs = {k: c.body.var(lw.const(lw.UINT_MAX, "u32"), "first") for k in self.args}

    @classmethod
    def of_chunk(
        cls, c: KernelContext, members: list[Member], bests: list[Expr], reads: list[Any]
    ) -> Firsts:
        """The positions in a whole pass's chunk: member k's element at flat offset r is
        `reads[k]`'s (`element_reader`), its position r itself."""

        def element(m: Member, r: Expr) -> Expr:
            return reads[members.index(m)](r, whole_kept_axes(c, m.red))

        return cls(c, members, bests, element, lambda m, r: r)

    def visit(self, r: Expr) -> None:
        body = self.c.body
        for k in self.args:
            m, acc = self.members[k], self.accs[k]
            v = body.let(self.element(m, r), "v")
            at = body.let(self.position(m, r), "at")
            held = holds(v, self.bests[k], lw.REG[m.red.acc])
            body.emit(Assign(acc, lw.select(lw.bin_("&&", held, lw.bin_("<", at, acc)), at, acc)))

    def values(self) -> list[tuple[Expr, str, str]]:
        return [(self.accs[k], "min", f"$first{k}") for k in self.args]

    def found(self, totals: list[Expr]) -> list[Expr | None]:
        firsts: list[Expr | None] = [None] * len(self.members)
        for k, where in zip(self.args, totals, strict=True):
            firsts[k] = where
        return firsts

    def folded(self, over: Any, width: int = SPLIT_WG) -> list[Expr | None]:
        """The positions, in a pass of their own (`over(visit)`) and one tree."""
        if not self.args:
            return self.found([])
        over(self.visit)
        return self.found(group_totals(self.c.body, self.c.shared, self.values(), width))


def load_part(c: KernelContext, m: Member, r: Expr) -> Expr:
    """Member `m`'s part `r` (a chunk's partial), loaded once."""
    loaded = handed_off(c, m.partials, r, lw.STORAGE[m.red.acc])
    return c.body.let(lw.from_storage(loaded, m.red.acc), "partial")


def part_position(c: KernelContext, m: Member, r: Expr) -> Expr:
    """An argmax member's part `r`'s first position."""
    assert m.positions is not None
    return handed_off(c, m.positions, r, "u32")


def store_part(c: KernelContext, m: Member, g: Expr, total: Expr, first: Expr | None) -> None:
    """A member's part `g`: its total (an argmax's extremum) and an argmax's position."""
    hand_off(c, m.partials, g, lw.to_storage(total, m.red.acc))
    if first is not None:
        assert m.positions is not None
        hand_off(c, m.positions, g, first)


def finish_member(c: KernelContext, m: Member, o: Expr, total: Expr, first: Expr | None) -> None:
    """Member `m`'s output element `o` (`write_total`; an argmax's first position, an int32)."""
    if first is None:
        write_total(c, m.red, o, total, m.root, m.outputs)
        return
    index = c.body.let(Cast(first, "i32"), "index")
    c.write(Idx(c.ev.shape(m.root), flat=o), index, m.outputs, m.root)


def chunk_bounds(c: KernelContext, red: Reduction) -> tuple[Any, Expr, Expr, Expr]:
    """A split reduction's workgroups, one per CHUNK elements: the dispatch, the group id
    g, and the first and the end of g's elements (the last chunk may be shorter)."""
    body = c.body
    dispatch, g = c.groups(sz.cdiv(red.count, CHUNK))
    start = body.let(ibin("*", g, u32(CHUNK)), "start")
    stop = body.let(ibin("+", start, u32(CHUNK)), "stop")
    count = size_ir(red.count)
    return (
        dispatch,
        g,
        start,
        body.let(lw.select(Binary("<", stop, count, "bool"), stop, count), "end"),
    )


def partial_pass(c: KernelContext, members: list[Member]) -> tuple[Any, Expr]:
    """The `partial` launch's work: this workgroup's chunk folded into each member's
    `partials[group]` (stored by thread 0), and `Fold.elements` stored at each element
    the chunk holds. The dispatch and the group id."""
    body = c.body
    red = members[0].red  # every member reduces a tensor of the same shape
    dispatch, g, start, end = chunk_bounds(c, red)
    lid = Builtin("local_x")
    reads = [element_reader(c, m.red) for m in members]
    plan = row_vectors(c, start, red.count, ())

    def chunk(visit: Any) -> None:
        """The chunk as a row at `start`: 4 wide where the count is a multiple of 4 (then
        so is the chunk's length, `end - start`, start being a multiple of CHUNK)."""
        assert plan is not None

        def vectors(families: list[set[str]], proof: str) -> None:
            # a whole chunk (every workgroup's but the last) loop-free, 8 vectors a thread
            span = body.let(ibin("-", end, start), "span")
            at = lambda j: visit(offset(body, start, j))  # noqa: E731
            first = body.let(Binary("<<", lid, u32(2), "u32"), "r")
            with body.block() as whole:
                for k in range(CHUNK // (LANES * SPLIT_WG)):
                    r = body.let(ibin("+", first, u32(k * LANES * SPLIT_WG)), "r")
                    row_vector(c, start, r, at, families, proof)
            with body.block() as part:
                vector_loop(c, start, span, SPLIT_WG, at, families, proof)
            body.emit(If(Binary("==", span, u32(CHUNK), "bool"), whole, part))

        def scalars() -> None:
            strided(body, ibin("+", start, lid), end, SPLIT_WG, visit)

        four_wide(c, plan, red.count, vectors, scalars)

    accs = [body.var(identity(m.folded, m.red.acc), "acc") for m in members]

    def visit(r: Expr) -> None:
        if c.plan.elements:
            c.write(Idx(red.shape, flat=r), outputs=c.plan.elements)
        for acc, m, read in zip(accs, members, reads, strict=True):
            value = read(r, whole_kept_axes(c, m.red))
            body.emit(Assign(acc, combiner(m.folded, m.red.acc)(acc, value)))

    if plan is not None:
        chunk(visit)
    else:
        strided(body, ibin("+", start, lid), end, SPLIT_WG, visit)
    names = ["$partial" if k == 0 else f"$partial{k}" for k in range(len(members))]
    values = [(acc, op_for(m.folded), n) for acc, m, n in zip(accs, members, names, strict=True)]
    totals = group_totals(body, c.shared, values, SPLIT_WG)
    # an argmax's first position: a second read of the chunk (from the cache)
    firsts = Firsts.of_chunk(c, members, totals, reads).folded(
        lambda visit: strided(body, ibin("+", start, lid), end, SPLIT_WG, visit)
    )
    with body.if_(Binary("==", lid, u32(0), "bool")):
        for m, total, first in zip(members, totals, firsts, strict=True):
            store_part(c, m, g, total, first)
    return dispatch, g


def combine_partials(
    c: KernelContext,
    members: list[Member],
    o: Expr,
    shared: str,
    count: Expr | None = None,
    width: int = SPLIT_WG,
) -> None:
    """Fold each member's `count` partials (thread t of `width`: t, t + width, ...; by
    default the `partial` launch's chunks over `SPLIT_WG`), the tree, and thread 0 writes
    each result (`write_total`, to the member's outputs): the `reduce` launch after `partial`,
    and the last workgroup of a one-launch reduction, the same order and tree in both."""
    lid = Builtin("local_x")
    body = c.body
    red = members[0].red
    count = size_ir(sz.cdiv(red.count, CHUNK)) if count is None else count
    accs = [body.var(identity(m.folded, m.red.acc), "acc") for m in members]
    part = lambda m, r: load_part(c, m, r)  # noqa: E731

    def visit(r: Expr) -> None:
        for acc, m in zip(accs, members, strict=True):
            body.emit(Assign(acc, combiner(m.folded, m.red.acc)(acc, part(m, r))))

    over = lambda visit: strided(body, lid, count, width, visit)  # noqa: E731
    over(visit)
    names = [shared if k == 0 else f"{shared}{k}" for k in range(len(members))]
    values = [(acc, op_for(m.folded), n) for acc, m, n in zip(accs, members, names, strict=True)]
    totals = group_totals(body, c.shared, values, width)
    # an argmax's: the first position among the parts that hold the extremum
    position = lambda m, r: part_position(c, m, r)  # noqa: E731
    firsts = Firsts(c, members, totals, part, position).folded(over, width)
    with body.if_(Binary("==", lid, u32(0), "bool")):
        for m, total, first in zip(members, totals, firsts, strict=True):
            finish_member(c, m, o, total, first)


def last_block(c: KernelContext, red: Reduction) -> Built:
    """`partial` and `reduce` in one launch (a backend with a handoff, `last_workgroup`).

    Each workgroup stores its partial as `partial` does (thread 0, after the tree's
    barriers); then `last_workgroup` finds the last to finish with the counter, a zeroed
    `u32` scratch buffer. The last combines the partials as `reduce` does (so the result
    is bit-identical to the two launches), writes the output, and zeroes the counter
    again (`reset_counter`)."""
    assert c.plan.partials is not None and c.plan.counter is not None
    members = members_of(c)
    dispatch, _ = partial_pass(c, members)
    groups = size_ir(sz.cdiv(red.count, CHUNK))
    last_workgroup(c, groups)
    combine_partials(c, members, u32(0), "$combine")
    reset_counter(c, groups)
    return (SPLIT_WG, 1, 1), dispatch


def whole_of_rows(c: KernelContext, width: int) -> None:
    """The end of a `row` launch with a whole reduction of a value it computes per row
    (`Row.total`: the mean of a cross-entropy's per-row losses).

    Each workgroup has stored its rows' share in `partials[group]`: the one row's value
    (stored by thread 0), or, with a thread per row, the workgroup's total of its rows'
    values (combined here). Every thread fences its stores (unless tagged) before a
    barrier, and then `last_block`'s handoff: the last workgroup combines the partials
    (a strided fold, then the tree), writes the reduction's outputs (through its
    epilogue) and zeroes the counter again."""
    assert c.plan.total is not None and c.plan.partials is not None
    body, root = c.body, c.plan.total
    red = c.ev.reduction(root)
    groups = size_ir(row_launch_groups(c.ev, c.plan.roots))
    if c.row_share is not None:  # a thread per row: this workgroup's rows together
        group, share = c.row_share
        total = group_total(body, c.shared, share, op_for(red.name), width, "$share")
        with body.if_(Binary("==", Builtin("local_x"), u32(0), "bool")):
            hand_off(c, c.plan.partials, group, lw.to_storage(total, red.acc))
    handoff_fence(c)  # release this thread's stores (on to thread 0's fence: a device barrier)
    body.emit(Barrier(device=True))
    last_workgroup(c, groups)
    member = Member(root, red, c.plan.partials, c.plan.total_outputs)
    combine_partials(c, [member], u32(0), "$combine", groups, width)
    reset_counter(c, groups, width=width)
