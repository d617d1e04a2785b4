"""The `softmax` launch: softmax and log-softmax over one row per workgroup, when no `row`
launch computes it (`schedule.rows`).

Numerically stable for any row length: the row read once into registers when its length is
proven small enough (`_row_in_registers`), else one online max-and-sum pass and a write pass
(`_online`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from mimir.codegen import lower as lw
from mimir.codegen import sizes as sz
from mimir.codegen.builder import Idx, ibin, size_ir, u32
from mimir.codegen.ir import WARP, Assign, Binary, Builtin, Expr, WarpReduce
from mimir.codegen.kernels.context import Built, KernelContext, row_width
from mimir.codegen.kernels.loops import (
    HELD,
    LANES,
    ROW_REGISTERS,
    RegisterVectors,
    if_held,
    offset,
    register_vectors,
    row_elements,
    row_vectors,
    word_vectors,
)
from mimir.codegen.kernels.online import block_total, rescaled, running_max, stable_shift
from mimir.codegen.kernels.warp import slots
from mimir.codegen.schedule.layout import softmax_input
from mimir.codegen.schedule.plan import Rooted
from mimir.dtypes import float16, float32


def build(c: KernelContext) -> Built:
    """Softmax and log-softmax over one row per workgroup.

    When the row length is proven at most `width * ROW_REGISTERS` (a literal, or a dim's
    declared `max`), each thread loads its elements once into registers, and `exp` is
    computed once per element (`_row_in_registers`). Otherwise one pass computes the
    row's max and its sum of exponentials together (the online algorithm: the running
    sum is rescaled when the max grows), and a second pass writes: two reads, not three.
    """
    ev, body = c.ev, c.body
    root = c.plan.root
    assert root is not None
    node = ev.node(root)
    x, axis = softmax_input(ev, root)
    shape = ev.shape(x)
    other = tuple(s for k, s in enumerate(shape) if k != axis)
    length = shape[axis]
    bound = length if isinstance(length, int) else sz.upper_bound(length, c.dims)
    # enough threads for a row of `bound` to fit in registers, when it can
    width = row_width(length, sz.cdiv(bound, ROW_REGISTERS) if bound is not None else 0)
    dispatch, row = c.groups(sz.product(list(other)))
    other_axes = Idx(other, flat=row).axes(body)
    xdtype = ev.dtype(x)
    last = axis == len(shape) - 1
    base = body.let(ibin("*", row, size_ir(length)), "base") if last else None

    def position(j: Expr) -> Idx:
        axes = list(other_axes)
        axes.insert(axis, j)
        return Idx(shape, flat=None if base is None else offset(body, base, j), axes=axes)

    def element(j: Expr) -> tuple[Idx, Expr]:
        idx = position(j)
        return idx, lw.convert(ev.at(x, idx), xdtype, float32)

    log = node["spec"].name == "log_softmax"
    wide_plan = (
        word_vectors(c, row_vectors(c, base, length, other))
        if bound is not None and bound != length and base is not None
        else None
    )
    if wide_plan is not None and bound is not None and bound > HELD * LANES * 128:
        # a row of a dim's max above what 128 threads hold in 2 vectors (a max of 4096,
        # rows of 1000): 128 threads hold up to BOUNDED_VECTORS each; every vector past
        # the row is skipped. Fewer, busier threads pay the two workgroup reductions
        # once per more elements.
        wide_width = row_width(length, sz.cdiv(bound, LANES * BOUNDED_VECTORS))
        if wide_width < width:
            return _bounded_rows(c, element, position, length, bound, wide_width, log,
                                 wide_plan, base, other, dispatch)  # fmt: skip
    if bound is not None and bound <= width * ROW_REGISTERS:
        vectors = register_vectors(c, base, length, other, width) if bound == length else None
        # (not a row shorter than a vector per thread: most threads would compute exp of
        # -inf lanes)
        short = bound < LANES * width
        plan = (
            None
            if vectors is not None or short
            else word_vectors(c, row_vectors(c, base, length, other))
        )
        if plan is None:
            _row_in_registers(c, element, position, length, bound, width, log, vectors)
            return (width, 1, 1), dispatch
        # A row the workgroup does not divide, a multiple of 4 (1000 over 128 threads; a
        # dim of `max` 4096 over 256, tested at run time where not proven): held 4 wide,
        # enough vectors per thread for the bound, each past the row -inf; else in
        # registers one element per slot, each slot guarded.
        assert base is not None
        families, proof = plan
        count = sz.cdiv(bound, LANES * width)

        def wide(proof: str) -> None:
            vectors = RegisterVectors(c, base, width, count, (families, proof), size_ir(length))
            skip = count > HELD  # a row of 1000 under a bound of 4096: 3 of 4 vectors past it
            _row_in_registers(c, element, position, length, bound, width, log, vectors, skip)

        if proof is not None:
            wide(proof)
        else:

            def slots() -> None:
                _row_in_registers(c, element, position, length, bound, width, log)

            if_held(c, length, width, wide, slots, count)
        return (width, 1, 1), dispatch
    plan = None if base is None else row_vectors(c, base, length, other)
    if plan is None or not c.s.vector_views:
        _online(c, element, length, width, log, base, other)
        return (width, 1, 1), dispatch
    # a symbolic row of a multiple of 4 up to HELD vectors per thread, tested at run time:
    # held in registers 4 wide (read once, exp once per element), else online
    assert base is not None
    families = plan[0]

    def held(proof: str) -> None:
        vectors = RegisterVectors(c, base, width, HELD, (families, proof), size_ir(length))
        _row_in_registers(c, element, position, length, 0, width, log, vectors)

    if_held(c, length, width, held, lambda: _online(c, element, length, width, log, base, other))
    return (width, 1, 1), dispatch


# vectors per thread a row bounded by a dim's `max` may hold (`_bounded_rows`)
BOUNDED_VECTORS = 8


def _bounded_rows(
    c: KernelContext,
    element: Any,
    position: Any,
    length: Any,
    bound: int,
    width: int,
    log: bool,
    plan: Any,
    base: Expr,
    other: tuple[Any, ...],
    dispatch: Any,
) -> Built:
    """A symbolic row of at most `bound` elements (a dim's `max`), a multiple of 4 (tested
    at run time where not proven): `width` threads hold it 4 wide, up to
    `BOUNDED_VECTORS` vectors each, those past the row skipped (`_row_in_registers` with
    `skip_past`); another length takes the online two-pass schedule."""
    families, proof = plan
    count = sz.cdiv(bound, LANES * width)

    def wide(proof: str) -> None:
        vectors = RegisterVectors(c, base, width, count, (families, proof), size_ir(length))
        _row_in_registers(c, element, position, length, bound, width, log, vectors, True)

    if proof is not None:
        wide(proof)
    else:
        online = lambda: _online(c, element, length, width, log, base, other)  # noqa: E731
        if_held(c, length, width, wide, online, count)
    return (width, 1, 1), dispatch


def _write(c: KernelContext, idx: Idx, shifted: Expr, e: Expr, total: Expr, log: Any) -> None:
    value = lw.bin_("-", shifted, log) if log is not None else lw.bin_("/", e, total)
    assert isinstance(c.plan, Rooted)
    if c.ev.dtype(c.plan.root) == float16:
        value = lw.round_f16(value)
    c.write(idx, c.body.let(value, "y"))


def _row_in_registers(
    c: KernelContext,
    element: Any,
    position: Any,
    length: Any,
    bound: int,
    width: int,
    log: bool,
    vectors: RegisterVectors | None = None,
    skip_past: bool = False,
) -> None:
    """Thread t holds row elements t, t + width, ... (at most ROW_REGISTERS) in registers
    (with `vectors`, 4 wide: 4t .. 4t+3, 4t + 4*width, ...; for a run-time length, a
    vector past the row holds -inf and is not written; with `skip_past`, for rows
    often far below the vectors held, its max, exp, sum and write are skipped, each
    vector's guard inside the previous one's).

    A slot that every thread fills (a literal length covering it) has no guard; the
    others are guarded and hold -inf past the end, which adds nothing to the max
    and exp(-inf) = 0 to the sum."""
    row = _HeldRow(c, element, length, width, vectors, skip_past)
    row.load(bound)
    top = stable_shift(
        c, block_total(c, row.maximum(), "fmax", width, "row_max")
    )  # a nan: as `running_max`
    values, s = row.exponentials(top, log)
    total = block_total(c, s, "add", width, "row_sum")
    log_total = c.body.let(lw.call("mimir_log", total)) if log else None
    row.write(position, values, total, log_total)


class _HeldRow:
    """The slots of a row a thread holds in registers (`_row_in_registers`): (j, its
    position, its value, whether every thread's slot is in the row)."""

    def __init__(
        self,
        c: KernelContext,
        element: Any,
        length: Any,
        width: int,
        vectors: RegisterVectors | None,
        skip_past: bool,
    ) -> None:
        self.c, self.body, self.element = c, c.body, element
        self.length, self.width, self.vectors, self.skip_past = length, width, vectors, skip_past
        self.count = size_ir(length)
        self.slots: list[tuple[Expr, Any, Expr, bool]] = []
        # a vector lane's condition to be in the row (None: always), for the exp phase
        self.lanes_inside: dict[int, Expr | None] = {}

    def load(self, bound: int) -> None:
        """The row's elements into the slots: each vector's lanes, or element j of each
        slot (-inf past the row)."""
        body, element, length, width, slots = (
            self.body,
            self.element,
            self.length,
            self.width,
            self.slots,
        )
        vectors = self.vectors

        def load(j: Expr, inside: Expr | None) -> None:
            idx, v = element(j)
            if inside is not None and not self.skip_past:  # past the row: -inf, as a guarded slot
                v = lw.select(inside, v, lw.const(-lw.INF, "f32"))
            self.lanes_inside[len(slots)] = inside
            slots.append((j, idx, body.let(v, "v"), True))

        for r, inside in vectors.each if vectors is not None else []:
            vectors.read(r, inside, lambda j, inside=inside: load(j, inside))
        lid = Builtin("local_x")
        for k in range(sz.cdiv(bound, width) if vectors is None and isinstance(bound, int) else 0):
            j = body.let(ibin("+", lid, u32(k * width)), "j")
            full = isinstance(length, int) and (k + 1) * width <= length
            if full:
                idx, v = element(j)
                slots.append((j, idx, body.let(v, "v"), True))
                continue
            v = body.var(lw.const(-lw.INF, "f32"), "v")
            with body.if_(Binary("<", j, self.count, "bool")):
                idx, value = element(j)
                body.emit(Assign(v, value))
            slots.append((j, idx, v, False))

    def maximum(self) -> Expr:
        """This thread's max of its slots. A guarded slot's work (max, exp, sum, write) is
        all inside its guard, so a slot past the end of the row costs a compare and a
        branch per phase."""
        body, slots = self.body, self.slots
        first = 0
        if self.skip_past:
            # a vector that may lie past the row: its lanes' max under its guard (they hold
            # what its loads left, not -inf), so a thread past the row skips them. A
            # thread's vectors in the row come first, so each guard is inside the one
            # before: a thread meets one failing guard, not one per vector past the row
            m = body.var(lw.const(-lw.INF, "f32"), "m")
            with ExitStack() as nested:
                while first < len(slots) and (inside := self.lanes_inside.get(first)) is not None:
                    nested.enter_context(body.if_(inside))
                    for _, _, v, _ in slots[first : first + LANES]:
                        body.emit(Assign(m, running_max(m, v)))
                    first += LANES
        elif slots[0][3]:
            m = body.var(slots[0][2], "m")
            first = 1
        else:
            m = body.var(lw.const(-lw.INF, "f32"), "m")
        for j, _, v, full in slots[first:]:
            with _unless(body, full, Binary("<", j, self.count, "bool")):
                body.emit(Assign(m, running_max(m, v)))
        return m

    def exponentials(self, top: Expr, log: bool) -> tuple[list[tuple[Expr, Expr]], Expr]:
        """(d, e) of each slot, `d = v - top` and `e = exp(d)`, and this thread's sum of
        the e."""
        body, slots = self.body, self.slots
        s = body.var(lw.const(0, "f32"), "s")
        values: list[tuple[Expr, Expr]] = []

        def exps_under(guards: list[tuple[Expr, list[Expr]]]) -> list[tuple[Expr, Expr]]:
            """`d = v - top`, `e = exp(d)` and `s += e` for each of the values held under
            each condition, each guard inside the one before (`nested`); outside them only
            what the write reads (e, or d for a log-softmax; 0 where a guard fails) is
            kept, in a variable."""
            kept = [
                [body.var(lw.const(0, "f32"), "d" if log else "e") for _ in h] for _, h in guards
            ]
            with ExitStack() as nested:
                for (cond, held), variables in zip(guards, kept, strict=True):
                    nested.enter_context(body.if_(cond))
                    for v, var in zip(held, variables, strict=True):
                        d = body.let(lw.bin_("-", v, top), "d")
                        e = body.let(lw.call("exp", d), "e")
                        body.emit(Assign(s, lw.bin_("+", s, e)))
                        body.emit(Assign(var, d if log else e))
            # (d, e): `_write` reads the one it needs
            return [(var, var) for variables in kept for var in variables]

        k = 0
        vectors_past: list[tuple[Expr, list[Expr]]] = []
        while self.skip_past and k < len(slots) and self.lanes_inside.get(k) is not None:
            # a vector that may lie past the row (a length below the bound): its lanes' exp
            # and sum under its guard, nested as the max's, so a thread past the row skips
            inside = self.lanes_inside[k]
            assert inside is not None
            vectors_past.append((inside, [slot[2] for slot in slots[k : k + LANES]]))
            k += LANES
        if vectors_past:
            values += exps_under(vectors_past)
        for j, _, v, full in slots[k:]:
            if full:
                d = body.let(lw.bin_("-", v, top), "d")
                e = body.let(lw.call("exp", d), "e")
                body.emit(Assign(s, lw.bin_("+", s, e)))
                values.append((d, e))
                continue
            values += exps_under([(Binary("<", j, self.count, "bool"), [v])])
        return values, s

    def write(
        self, position: Any, values: list[tuple[Expr, Expr]], total: Expr, log_total: Expr | None
    ) -> None:
        """Each slot's softmax, through the epilogue (a vector past the row not written)."""
        c, body, vectors, slots = self.c, self.body, self.vectors, self.slots
        if vectors is not None:
            written = {j: (idx, d, e) for (j, idx, _, _), (d, e) in zip(slots, values, strict=True)}

            def write(j: Expr) -> None:
                idx, d, e = written[j]
                _write(c, idx, d, e, total, log_total)

            with ExitStack() as nested:
                for r, inside in vectors.each:
                    if self.skip_past and inside is not None:  # nested, as the max's guards
                        nested.enter_context(body.if_(inside))
                        vectors.read(r, None, write)
                    else:
                        vectors.write(r, inside, write)
            return
        for (j, idx, _, full), (d, e) in zip(slots, values, strict=True):
            with _unless(body, full, Binary("<", j, self.count, "bool")):
                # a guarded slot's position is made again here: the one made under its
                # load's guard may name a value only that block defines
                _write(c, idx if full else position(j), d, e, total, log_total)


@contextmanager
def _unless(body: Any, unguarded: bool, cond: Expr) -> Iterator[None]:
    """The statements inside run under `if cond`, or plainly when `unguarded`."""
    if unguarded:
        yield
        return
    with body.if_(cond):
        yield


def _online(
    c: KernelContext,
    element: Any,
    length: Any,
    width: int,
    log: bool,
    base: Expr | None,
    other: tuple[Any, ...],
) -> None:
    """One pass for the max and the sum of exp(x - max) together, one pass to write.

    Each thread keeps (m, s): its running max and the sum of exp(x - m) so far; an element
    above m rescales s by exp(m - x). Threads' pairs are combined the same way in a tree."""
    body = c.body
    inf = lw.const(-lw.INF, "f32")
    zero, one = lw.const(0, "f32"), lw.const(1, "f32")
    m = body.var(inf, "m")
    s = body.var(zero, "s")

    def step(j: Expr) -> None:
        _, v = element(j)
        v = body.let(v, "v")
        grows = body.let(lw.bin_(">", v, m), "grows")
        d = body.let(lw.select(grows, lw.bin_("-", m, v), lw.bin_("-", v, m)), "d")
        # exp(d) once; d is NaN only when x and m are both -inf (nothing to add)
        e = body.let(lw.select(lw.bin_("==", v, inf), zero, lw.call("exp", d)), "e")
        body.emit(
            Assign(s, lw.select(grows, lw.bin_("+", lw.bin_("*", s, e), one), lw.bin_("+", s, e)))
        )
        body.emit(Assign(m, lw.select(grows, v, m)))

    row_elements(c, base, length, other, width, step)

    # Each thread's sum is rescaled to its warp's max, then summed over the warp; the warps'
    # (max, sum) pairs are combined the same way, in every thread.
    # A thread whose max is -inf saw only -inf and nan: its sum is 0, or nan to pass on.
    # `fmax`: m is never nan (a nan does not grow it; it makes s nan, which is passed on)
    wm = body.let(WarpReduce("fmax", m, "f32"), "warp_max")
    ws = body.let(WarpReduce("add", body.let(rescaled(m, s, wm)), "f32"), "warp_sum")
    if width == WARP:
        row_max, row_sum = wm, ws
    else:
        count = width // WARP
        pm, ps = slots(body, c.shared, [("$row_max", wm), ("$row_sum", ws)], width)
        row_max = body.let(WarpReduce("fmax", pm, "f32", count), "row_max")
        row_sum = body.let(WarpReduce("add", body.let(rescaled(pm, ps, row_max)), "f32", count))
    top = stable_shift(c, row_max)
    total = row_sum
    log_total = body.let(lw.call("mimir_log", total)) if log else None

    def write(j: Expr) -> None:
        idx, v = element(j)
        shifted = body.let(lw.bin_("-", v, top))
        e = lw.call("exp", shifted) if log_total is None else shifted
        _write(c, idx, shifted, e, total, log_total)

    row_elements(c, base, length, other, width, write)
