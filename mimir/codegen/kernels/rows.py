"""The `row` launch: outputs computed with last-axis reductions of rows of one shape
(`schedule.rows`: a layer norm, and its mean and 1/std as outputs).

One workgroup per row computes the row's reductions in order, each combined over the
workgroup, then writes the outputs that read them; literal rows of at most
`SERIAL_REDUCE_MAX` elements are a thread each (`_short_rows`). A whole reduction of a
value computed per row (a cross-entropy's mean loss) ends the launch (`whole.whole_of_rows`).
"""

from __future__ import annotations

import contextlib
from typing import Any

import networkx as nx

from mimir.codegen import lower as lw
from mimir.codegen import sizes as sz
from mimir.codegen.builder import Idx, ibin, size_ir, u32
from mimir.codegen.ir import Assign, Binary, Builtin, Expr, Store
from mimir.codegen.kernels.context import Built, KernelContext, reg_dtype, row_width
from mimir.codegen.kernels.folds import combiner, ddof_of, first_extremum, identity, variance
from mimir.codegen.kernels.handoff import hand_off
from mimir.codegen.kernels.loops import (
    HELD,
    LANES,
    ROW_REGISTERS,
    RegisterVectors,
    if_held,
    offset,
    register_slots,
    row_elements,
    row_vectors,
    strided,
    word_vectors,
)
from mimir.codegen.kernels.online import running_max, stable_shift
from mimir.codegen.kernels.warp import group_total, op_for
from mimir.codegen.kernels.whole import whole_of_rows
from mimir.codegen.schedule.layout import (
    SERIAL_REDUCE_MAX,
    WG,
    arg_reduction,
    row_shape,
    softmax_input,
)
from mimir.codegen.schedule.plan import Row
from mimir.codegen.schedule.roots import root_kind
from mimir.codegen.tensors import Reduction
from mimir.dtypes import float16, float32, uint32


def build(c: KernelContext) -> Built:
    """A `row` launch (`_row`), and the whole reduction that may finish it
    (`whole_of_rows`)."""
    threads, dispatch = _row(c)
    if c.plan.total is not None:
        whole_of_rows(c, threads[0])
    return threads, dispatch


def _row(c: KernelContext) -> Built:
    """One workgroup per row: the plan's last-axis reductions in order, then the row's
    outputs (`schedule.RowGroup`): those of the row's shape, and by thread 0 those with one
    element per row.

    Each reduction is a strided fold and a tree; its total, the same in every thread,
    stands for the reduction's value wherever the row reads it (`Evaluator.row_values`).
    When the row length is a literal multiple of the workgroup width, at most
    `ROW_REGISTERS` per thread, the strided loops are unrolled at the top level of the
    kernel: each element (and each value computed from it, `x - mean`) is loaded or
    computed once and stays in a register for the later passes and the write. Another
    literal multiple of 4 up to `HELD` vectors per thread is held in registers 4 wide
    (`RegisterVectors` given the length), on every backend. A symbolic length on a
    target with `vector_views` is tested at run time: a multiple of 4 up to `HELD`
    vectors per thread is held the same way, any other goes through the loops of
    `row_elements`. Literal rows of at most `SERIAL_REDUCE_MAX` are a thread each
    (`_short_rows`).
    """
    ev, body = c.ev, c.body
    shape = row_shape(ev, c.plan.roots[0])
    other, length = tuple(shape[:-1]), shape[-1]
    # outputs over the rows of another length (`Row.wide`): a symbolic one is written
    # by the row's workgroup, strided, not by one thread in a loop as long as the row
    wide = [ev.shape(n)[-1] for n in c.plan.wide]
    short = all(isinstance(w, int) for w in wide)
    if short and isinstance(length, int) and length <= SERIAL_REDUCE_MAX:
        return _short_rows(c, shape)  # (rows of several short lengths too: `schedule.rows`)
    width = max([row_width(length), *(row_width(w) for w in wide)])
    dispatch, rowid = c.groups(sz.product(list(other)))
    other_axes = Idx(other, flat=rowid).axes(body)
    base = body.let(ibin("*", rowid, size_ir(length)), "base")

    unrolled = isinstance(length, int) and length % width == 0 and length // width <= ROW_REGISTERS
    if unrolled:
        c.proofs.append((f"j < {length}", f"{length} is a multiple of {width}"))
        _, over_slots = register_slots(c, base, length, other, width)
        _row_passes(c, shape, other_axes, base, width, over_slots, over_slots)
        return (width, 1, 1), dispatch

    def over_row(visit: Any) -> None:
        row_elements(c, base, length, other, width, visit)

    plan = row_vectors(c, base, length, other)
    if isinstance(length, int):
        words = word_vectors(c, plan)
        proof = None if words is None else words[1]
        if proof is not None and LANES * width <= length <= HELD * LANES * width:
            # A literal multiple of 4 that the workgroup does not divide (1000 over 128
            # threads): held 4 wide as a symbolic row is, each vector past it guarded.
            # Not for a row shorter than a vector per thread (most threads would only
            # test their guards), nor for 16-bit elements (`word_vectors`).
            vectors = RegisterVectors(c, base, width, HELD, (words[0], proof), u32(length))
            _row_passes(c, shape, other_axes, base, width, vectors.fold_all, vectors.write_all)
            return (width, 1, 1), dispatch
        plan = None
    if plan is None or not c.s.vector_views:
        _row_passes(c, shape, other_axes, base, width, over_row, over_row)
        return (width, 1, 1), dispatch
    # A symbolic row of at most HELD vectors per thread, its length a multiple of 4 (tested
    # at run time): held in registers 4 wide as a literal row is, read once.
    families = plan[0]

    def held(proof: str) -> None:
        vectors = RegisterVectors(c, base, width, HELD, (families, proof), size_ir(length))
        _row_passes(c, shape, other_axes, base, width, vectors.fold_all, vectors.write_all)

    def looped() -> None:
        _row_passes(c, shape, other_axes, base, width, over_row, over_row)

    if_held(c, length, width, held, looped)
    return (width, 1, 1), dispatch


def _short_rows(c: KernelContext, shape: tuple[Any, ...]) -> Any:
    """`row` for a literal row of at most `SERIAL_REDUCE_MAX` elements: a thread per row
    (as a short `reduce`), no threadgroup memory, no barrier. The row is unrolled, so each
    element is loaded once and stays in a register for the later passes and the write."""
    body = c.body
    other, length = tuple(shape[:-1]), shape[-1]
    rows = sz.product(list(other))
    dispatch, g = c.groups(sz.cdiv(rows, WG), guard=False)
    rowid = body.let(ibin("+", ibin("*", g, u32(WG)), Builtin("local_x")), "row")
    if c.plan.total is not None:
        # this thread's row's share of the whole reduction: the identity past the rows
        red = c.ev.reduction(c.plan.total)
        c.row_share = (g, body.var(identity(red.name, red.acc), "share"))
    with body.if_(Binary("<", rowid, size_ir(rows), "bool")):
        other_axes = Idx(other, flat=rowid).axes(body)
        base = body.let(ibin("*", rowid, u32(length)), "base")

        def over(n: int) -> Any:
            def each(visit: Any) -> None:
                for j in range(n):
                    visit(u32(j))

            return each

        # a root over rows of another length (rows of 5 beside rows of 3) folds its own
        folds = {r: over(row_shape(c.ev, r)[-1]) for r in c.plan.roots}
        _row_passes(c, shape, other_axes, base, 1, over(length), over(length), folds)
    return (WG, 1, 1), dispatch


def _row_passes(
    c: KernelContext,
    shape: tuple[Any, ...],
    other_axes: list[Expr],
    base: Expr,
    width: int,
    fold_over: Any,
    write_over: Any,
    folds: dict[int, Any] | None = None,
) -> None:
    """`row`'s work: each reduction of the plan folded over the row (`fold_over(visit)`,
    or its own `folds[root]`), combined over the workgroup, its epilogue once; then the
    row written (`write_over`). A fold's `visit(j, valid)` is given, where the element may
    lie past the row (a row held in registers), the condition that it does not."""
    passes = _RowPasses(c, shape, other_axes, base, width, fold_over)
    for k, r in enumerate(passes.plan.roots):
        passes.over_row = fold_over if folds is None else folds[r]
        passes.reduce(k, r)
    passes.write(write_over)


class _RowPasses:
    """The passes of a `row` launch over its rows (`_row_passes`): what they share."""

    def __init__(
        self,
        c: KernelContext,
        shape: tuple[Any, ...],
        other_axes: list[Expr],
        base: Expr,
        width: int,
        fold_over: Any,
    ) -> None:
        assert isinstance(c.plan, Row)
        self.c, self.plan, self.ev, self.body = c, c.plan, c.ev, c.body
        self.shape, self.other_axes, self.base, self.width = shape, other_axes, base, width
        self.over_row = fold_over  # how the next fold walks the row
        ev, plan = self.ev, self.plan
        graph = c.s.kernel.graph.graph
        softmaxes = {r for r in plan.roots if root_kind(ev.kg, r) == "softmax"}
        # a softmax's epilogue is element-wise in the row: written, or read, where needed
        targets = [
            t for r, t in zip(plan.roots, plan.row_values, strict=True) if r not in softmaxes
        ]
        self.epilogues = {t: set(plan.roots) & (nx.ancestors(graph, t) | {t}) for t in targets}
        self.done: set[int] = set()
        keys = [sz.key(s) for s in shape]
        self.outputs = plan.outputs()
        self.whole = [
            (n, bufs) for n, bufs in self.outputs if [sz.key(s) for s in ev.shape(n)] == keys
        ]
        self.wide = [(n, bufs) for n, bufs in self.outputs if n in plan.wide]
        # what the row's elements read (later folds, the row-shaped outputs): an epilogue
        # they do not read is computed where it is stored, in thread 0 (an accuracy's hit,
        # whose label a workgroup's every thread would load)
        self.at_elements = set().union(
            *(nx.ancestors(graph, n) for n in [*plan.roots, *dict(self.whole), *dict(self.wide)])
        )

    def at(self, j: Expr) -> Idx:
        return Idx(self.shape, flat=offset(self.body, self.base, j), axes=[*self.other_axes, j])

    def element(self, red: Reduction, j: Expr) -> Expr:
        """Row element j of what `red` reduces, in its accumulator's type."""
        ev = self.ev
        same = [sz.key(s) for s in red.shape] == [sz.key(s) for s in self.shape]
        value = ev.at(red.x, self.at(j) if same else Idx(red.shape, axes=[*self.other_axes, j]))
        return lw.convert(value, ev.dtype(red.x), red.acc)

    def fold(self, init: Expr, step: Any, op: str, shared: str) -> Expr:
        """Each thread's `acc = step(acc, j)` over its elements, then the workgroup's
        total (`op`), the same in every thread."""
        body = self.body
        acc = body.var(init, "acc")

        def visit(j: Expr, valid: Expr | None = None) -> None:
            folded = step(acc, j)
            body.emit(Assign(acc, folded if valid is None else lw.select(valid, folded, acc)))

        self.over_row(visit)
        if self.width == 1:  # a thread per row (`_short_rows`)
            return acc
        return group_total(body, self.c.shared, acc, op, self.width, shared)

    def reduce(self, k: int, r: int) -> None:
        """Root `r`, the plan's `k`th: its value in every thread, and each epilogue whose
        reductions are all done, once per row."""
        ev, body = self.ev, self.body
        kind = root_kind(ev.kg, r)
        names = (f"$row{k}", f"$row{k}b")
        if kind == "softmax":
            self.normalise(r, names)
            self.done.add(r)
            return
        red = arg_reduction(ev, r) if kind == "argreduce" else ev.reduction(r)

        def lane(j: Expr, red: Reduction = red) -> Expr:
            return self.element(red, j)

        if kind == "argreduce":
            value = first_extremum(body, red, lane, self.fold, names)
        elif kind == "moments":
            value = variance(body, red, ddof_of(ev, r), lane, self.fold, names)
        else:
            combine = combiner(red.name, red.acc)
            value = self.fold(
                identity(red.name, red.acc),
                lambda a, j, combine=combine, lane=lane: combine(a, lane(j)),
                op_for(red.name),
                names[0],
            )
            if red.name == "mean":
                value = lw.bin_("/", value, lw.convert(size_ir(red.count), uint32, float32))
        if kind != "argreduce":
            if red.acc != reg_dtype(red.out):
                value = lw.convert(value, red.acc, red.out)
            if red.out == float16:
                value = lw.round_f16(value)
        ev.row_values[r] = body.let(value, "total")
        # each root's epilogue once per row, where the row's elements will find it, as
        # soon as the reductions it reads are done (`max - min`: after both)
        self.done.add(r)
        for target in list(self.epilogues):
            if self.epilogues[target] <= self.done:
                del self.epilogues[target]
                if target in self.at_elements:
                    ev.at(target, _per_row(ev.shape(target), self.other_axes))

    def normalise(self, r: int, names: tuple[str, str]) -> None:
        """A softmax root: the row's max and its sum of exp(x - max) (two folds), then its
        value at any index of the row (`Evaluator.row_functions`): at the row's own
        elements exp(x - max) is the one the sum computed (a held row keeps it)."""
        ev, body, at = self.ev, self.body, self.at
        x, _ = softmax_input(ev, r)
        dtype = ev.dtype(x)

        def value(idx: Idx) -> Expr:
            return lw.convert(ev.at(x, idx), dtype, float32)

        def shifted(idx: Idx, top: Expr) -> Expr:
            return body.memo(("shifted", r, idx.key), lambda: lw.bin_("-", value(idx), top), "d")

        def exp(idx: Idx, top: Expr) -> Expr:
            return body.memo(("exp", r, idx.key), lambda: lw.call("exp", shifted(idx, top)), "e")

        # the row's max, where the group already folds it (`x.max(axis=-1)` beside
        # `x.softmax()`: nan-propagating, which a softmax may take, `running_max`)
        done = sorted(self.done)
        reduced = {q: ev.reduction(q) for q in done if root_kind(ev.kg, q) == "reduce"}
        maxes = [
            q
            for q, red in reduced.items()
            if red.name == "max"
            and ev.resolve(red.x) == ev.resolve(x)
            and dtype == ev.dtype(q) == float32
        ]
        if maxes:
            m = ev.row_values[maxes[0]]
        else:
            m = self.fold(lw.const(-lw.INF, "f32"), lambda a, j: running_max(a, value(at(j))),
                          "fmax", names[0])  # fmt: skip
        top = stable_shift(self.c, m)
        total = self.fold(lw.const(0, "f32"), lambda a, j: lw.bin_("+", a, exp(at(j), top)),
                          "add", names[1])  # fmt: skip
        if ev.node(r)["spec"].name == "log_softmax":
            log_total = body.let(lw.call("mimir_log", total), "lse")
            ev.row_functions[r] = lambda idx: lw.bin_("-", shifted(idx, top), log_total)
        else:
            ev.row_functions[r] = lambda idx: lw.bin_("/", exp(idx, top), total)

    def write(self, write_over: Any) -> None:
        """The row's outputs: those of its shape (`write_over`), those over the same rows
        of another length (`Row.wide`), then, in thread 0, those with one element per
        row and the row's share of the whole reduction that ends the launch."""
        c, ev, body, width, other_axes = self.c, self.ev, self.body, self.width, self.other_axes
        if self.whole:
            write_over(lambda j: c.write(self.at(j), outputs=self.whole))
        for n, bufs in self.wide:
            # its own length: each thread every `width`-th element, reading what it needs
            out_shape = ev.shape(n)

            def store(
                j: Expr, n: int = n, bufs: list[str] = bufs, out_shape: Any = out_shape
            ) -> None:
                c.write(Idx(out_shape, axes=[*other_axes, j]), outputs=[(n, bufs)])

            if width == 1:  # a thread per short row: all of its own short length, unrolled
                for j in range(out_shape[-1]):
                    store(u32(j))
            else:
                strided(body, Builtin("local_x"), size_ir(out_shape[-1]), width, store)
        per_row = [
            (n, bufs)
            for n, bufs in self.outputs
            if (n, bufs) not in self.whole + self.wide and bufs
        ]
        if not per_row and self.plan.total is None:
            return
        rowid = Idx(self.shape[:-1], axes=other_axes).flat(body)
        with (
            contextlib.nullcontext()
            if width == 1
            else body.if_(Binary("==", Builtin("local_x"), u32(0), "bool"))
        ):
            for n, bufs in per_row:
                value = ev.at(n, _per_row(ev.shape(n), other_axes))
                for name in bufs:
                    body.emit(Store(name, rowid, lw.to_storage(value, ev.dtype(n))))
            if self.plan.total is not None:
                self.share(rowid)

    def share(self, rowid: Expr) -> None:
        """The row's share of the whole reduction that ends the launch (`whole_of_rows`)."""
        c, ev, plan = self.c, self.ev, self.plan
        assert plan.total is not None
        red = ev.reduction(plan.total)
        x = ev.resolve(red.x)
        share = lw.convert(ev.at(x, _per_row(ev.shape(x), self.other_axes)), ev.dtype(x), red.acc)
        if self.width == 1:  # a thread per row: the workgroup's rows are combined later
            assert c.row_share is not None
            self.body.emit(Assign(c.row_share[1], share))
        else:
            assert plan.partials is not None
            hand_off(c, plan.partials, rowid, lw.to_storage(share, red.acc))


def _per_row(shape: tuple[Any, ...], other_axes: list[Expr]) -> Idx:
    """The position of a row's element in a tensor with one per row (`keepdims` or not)."""
    return Idx(shape, axes=[*other_axes, *[u32(0)] * (len(shape) - len(other_axes))])
