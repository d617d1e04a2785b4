"""The arithmetic every reduction layout shares: a reduction's identity and combine, its
input element at a reduced position, its value from a total (a mean divided), and the two
passes of a variance and of an argmax."""

from __future__ import annotations

import contextlib
from typing import Any

from mimir.codegen import lower as lw
from mimir.codegen import sizes as sz
from mimir.codegen.builder import Body, Idx, ibin, size_ir, u32
from mimir.codegen.ir import Assign, Binary, Builtin, Cast, Const, Expr, Var
from mimir.codegen.kernels.context import KernelContext, Walk, reg_dtype, row_width
from mimir.codegen.kernels.loops import offset, row_elements, strided
from mimir.codegen.kernels.warp import group_total, op_for
from mimir.codegen.schedule.layout import SERIAL_REDUCE_MAX, WG
from mimir.codegen.schedule.plan import Rooted
from mimir.codegen.tensors import Evaluator, Reduction
from mimir.dims import BinOp, Size
from mimir.dtypes import DType, float32, uint32


def combiner(name: str, acc: DType) -> Any:
    op = {"sum": "add", "mean": "add", "max": "maximum", "min": "minimum"}[name]
    return lambda a, b: lw.lower_element(op, [a, b], acc, acc)


def identity(name: str, acc: DType) -> Expr:
    t = lw.REG[acc]
    if name in ("sum", "mean"):
        return lw.const(0, t)
    big = {"f32": lw.INF, "i32": lw.INT_MAX, "u32": lw.UINT_MAX}[t]
    small = {"f32": -lw.INF, "i32": lw.INT_MIN, "u32": 0}[t]
    return lw.const(small if name == "max" else big, t)


def fold_elements(
    c: KernelContext,
    red: Reduction,
    o: Expr,
    start: Expr,
    end: Expr,
    step: Expr,
    source: Any,
    over: Walk | None = None,
) -> Var:
    """`acc = combine(acc, source(r))` for r in start, start + step, ... below end, or for
    the elements `over(visit)` visits (a row by `row_elements`, a chunk 4 wide)."""
    body = c.body
    combine = combiner(red.name, red.acc)
    acc = body.var(identity(red.name, red.acc), "acc")
    kept_axes = Idx(red.kept_shape, flat=o).axes(body)
    assert isinstance(step, Const)

    def visit(r: Expr) -> None:
        body.emit(Assign(acc, combine(acc, source(r, kept_axes))))

    if over is None:
        strided(body, start, end, int(step.value), visit)
    else:
        over(visit)
    return acc


def element_reader(c: KernelContext, red: Reduction, o: Expr | None = None) -> Any:
    """The input element at reduced position r (with the output's kept indices).

    Given the output element `o` of a reduction over the last axis alone, its row's
    offset `o * count` is computed here, once, and element r is at that offset + r. In a
    reduction over every axis in order, element r is at r."""
    base = row_base(c, red, o)
    everything = not red.kept and tuple(red.axes) == tuple(range(len(red.shape)))

    def read(r: Expr, kept_axes: list[Expr]) -> Expr:
        full: list[Expr] = [u32(0)] * len(red.shape)
        for k, a in zip(red.kept, kept_axes, strict=True):
            full[k] = a
        for k, a in zip(red.axes, Idx(red.reduced_shape, flat=r).axes(c.body), strict=True):
            full[k] = a
        flat = r if everything else None if base is None else offset(c.body, base, r)
        value = c.ev.at(red.x, Idx(red.shape, flat=flat, axes=full))
        return lw.convert(value, c.ev.dtype(red.x), red.acc)

    return read


def whole_kept_axes(c: KernelContext, red: Reduction) -> list[Expr]:
    """The kept axes' indices of a reduction to one element (all 0: a kept axis of size
    1, `x.sum(axis=1)` of a (1, N) tensor), for `element_reader`'s `read`."""
    return Idx(red.kept_shape, flat=u32(0)).axes(c.body)


def row_base(c: KernelContext, red: Reduction, o: Expr | None) -> Expr | None:
    """The flat offset of output element `o`'s row, for a reduction over the last axis
    alone (else None); the same variable each time it is asked for in a block."""
    if o is None or tuple(red.axes) != (len(red.shape) - 1,):
        return None
    key = ("row", o, sz.key(red.count))
    return c.body.memo(key, lambda: ibin("*", o, size_ir(red.count)), "base")


def tree_total(c: KernelContext, red: Reduction, acc: Var, width: int) -> Expr:
    return group_total(c.body, c.shared, acc, op_for(red.name), width, "$partial")


def write_total(
    c: KernelContext,
    red: Reduction,
    o: Expr,
    total: Expr,
    root: int | None = None,
    outputs: list[tuple[int, list[str]]] | None = None,
) -> None:
    """Output element `o` of the reduction from its `total` (a mean divided, converted to
    the output dtype), written through its epilogue: the plan's outputs, or `outputs` of
    the reduction `root`."""
    body = c.body
    value = row_value(red, body.let(total, "total"))
    if root is None:
        assert isinstance(c.plan, Rooted)
        root = c.plan.root
    c.write(Idx(c.ev.shape(root), flat=o), body.let(value, "total"), outputs, root)


def row_value(red: Reduction, total: Expr) -> Expr:
    """The reduction's value from the `total` of its elements in its accumulator type: a
    mean divided by the count, in the output dtype's register type and precision."""
    value = total
    if red.name == "mean":
        value = lw.bin_("/", value, lw.convert(size_ir(red.count), uint32, float32))
    if red.acc != reg_dtype(red.out):
        value = lw.convert(value, red.acc, red.out)
    return lw.round_to(value, red.out)


def strided_pass(
    c: KernelContext,
    count: Size,
    width: int,
    shared: str,
    init: Expr,
    step: Any,
    op: str,
    row: tuple[Expr | None, tuple[Size, ...]] = (None, ()),
) -> Expr:
    """Each thread folds `step(acc, r)` over r = lid, lid + width, ... below `count`, then
    the threads' results are combined with `op` (`group_total`, its threadgroup array
    `shared`); every thread gets the total. With
    `width` 1 (a serial launch: one thread per output) the thread folds every r alone.
    `row`: the row's flat offset and the other axes' sizes, for a reduction over the last
    axis (its elements then by `row_elements`)."""
    body = c.body
    acc = body.var(init, "acc")

    def visit(r: Expr) -> None:
        body.emit(Assign(acc, step(acc, r)))

    if width == 1:
        strided(body, u32(0), size_ir(count), 1, visit)
        return acc
    base, rows = row
    row_elements(c, base, count, rows, width, visit, held=True)
    return group_total(body, c.shared, acc, op, width, shared)


class TwoPass:
    """The launch shape of a two-pass reduction: a workgroup per output element, or, when
    the reduced count is a literal of at most `SERIAL_REDUCE_MAX`, a thread per output
    element looping alone (no threadgroup memory, no barriers). `inside` opens the block
    the passes are built in; `once` the block where one thread writes the result."""

    def __init__(self, c: KernelContext, red: Reduction) -> None:
        self.c = c
        self.serial = isinstance(red.count, int) and red.count <= SERIAL_REDUCE_MAX
        body = c.body
        if self.serial:
            self.width = 1
            self.dispatch, g = c.groups(sz.cdiv(red.outputs, WG), guard=False)
            lid = Builtin("local_x")
            self.o = body.let(ibin("+", ibin("*", g, u32(WG)), lid), "o")
            self.workgroup = (WG, 1, 1)
        else:
            self.width = row_width(red.count)
            self.dispatch, self.o = c.groups(red.outputs)
            self.workgroup = (self.width, 1, 1)

    def inside(self, red: Reduction) -> Any:
        if self.serial:
            return self.c.body.if_(Binary("<", self.o, size_ir(red.outputs), "bool"))
        return contextlib.nullcontext()

    def once(self) -> Any:
        if self.serial:
            return contextlib.nullcontext()
        return self.c.body.if_(Binary("==", Builtin("local_x"), u32(0), "bool"))


def launch_passes(c: KernelContext, red: Reduction, launch: TwoPass) -> tuple[Any, Any]:
    """How a `moments` / `argreduce` launch reads reduced element r of its output element
    (`element(r)`), and folds over them (`fold(init, step, op, shared)`: `strided_pass`)."""
    o = launch.o
    kept_axes = Idx(red.kept_shape, flat=o).axes(c.body)
    read = element_reader(c, red, o)
    row = (row_base(c, red, o), tuple(red.shape[:-1]))

    def element(r: Expr) -> Expr:
        return read(r, kept_axes)

    def fold(init: Expr, step: Any, op: str, shared: str) -> Expr:
        return strided_pass(c, red.count, launch.width, shared, init, step, op, row)

    return element, fold


def variance(
    body: Body, red: Reduction, ddof: int, element: Any, fold: Any, shared: tuple[str, str]
) -> Expr:
    """`var` / `std`, two passes (`fold(init, step, op, shared)` over the elements
    `element(r)`, a `moments` launch's or a `row` launch's): the mean, then the sum of
    squared deviations from it, over count - ddof."""
    t = lw.REG[red.acc]
    count = lw.convert(size_ir(red.count), uint32, float32)

    def add(a: Expr, b: Expr) -> Expr:
        return lw.bin_("+", a, b)

    total = fold(lw.const(0, t), lambda acc, r: add(acc, element(r)), "add", shared[0])
    mean = body.let(lw.bin_("/", total, count), "mean")

    def square(acc: Expr, r: Expr) -> Expr:
        d = body.let(lw.bin_("-", element(r), mean), "d")
        return add(acc, lw.bin_("*", d, d))

    squares = fold(lw.const(0, t), square, "add", shared[1])
    return spread(body, red, squares, ddof)


def spread(body: Body, red: Reduction, squares: Expr, ddof: int) -> Expr:
    """A `var` from its squared deviations, over count - ddof, or its `std`."""
    divisor = lw.convert(size_ir(sz.simplify(BinOp("-", red.count, ddof))), uint32, float32)
    value = body.let(lw.bin_("/", squares, divisor), "var")
    if red.name == "std":
        value = body.let(lw.call("mimir_sqrt", value), "std")
    return value


def part_squares(
    body: Body, count: Expr, k: Expr, size: int, s: Expr, q: Expr, mean: Expr
) -> tuple[Expr, Expr]:
    """Part k's share of the squared deviations from the whole `mean`, for a `var` split
    in parts of `size` elements (the last may be shorter) of `count`: q + n (s / n -
    mean)^2, from the part's sum s and squared deviations q from its own mean (Chan et
    al.'s parallel variance); and n, its element count (a `u32`)."""
    left = ibin("-", count, ibin("*", k, u32(size)))
    rows = lw.select(Binary("<", left, u32(size), "bool"), left, u32(size))
    n = body.let(lw.convert(rows, uint32, float32), "n")
    d = body.let(lw.bin_("-", lw.bin_("/", s, n), mean), "d")
    return lw.bin_("+", q, lw.bin_("*", n, lw.bin_("*", d, d))), rows


def ddof_of(ev: Evaluator, r: int) -> int:
    """The `ddof=` of `var` / `std` root `r` (0 if not given)."""
    node = ev.node(r)
    kw = dict(zip(node["keywords"], node["inputs"][1:], strict=True))
    return ev.literal_arg(kw.get("ddof"), 0)


def first_extremum(
    body: Body, red: Reduction, element: Any, fold: Any, shared: tuple[str, str]
) -> Expr:
    """`argmax` / `argmin` as an int32, two passes (`fold` over `element(r)`, as
    `variance`): the extremum (nan-propagating), then the first position r holding it,
    or holding a nan when the extremum is nan."""
    _, where = best_and_first(body, red, element, fold, shared)
    return Cast(where, "i32")


def best_and_first(
    body: Body,
    red: Reduction,
    element: Any,
    fold: Any,
    shared: tuple[str, str],
    position: Any = None,
) -> tuple[Expr, Expr]:
    """`first_extremum`'s two passes: the extremum, and the first position (a `u32`;
    the largest where nothing holds it) of those `element(r)` that hold it, position
    `position(r)` (r itself by default: a workgroup's partials carry their chunk's)."""
    name = "max" if red.name == "argmax" else "min"
    t = lw.REG[red.acc]
    combine = combiner(name, red.acc)
    best = fold(identity(name, red.acc), lambda a, r: combine(a, element(r)), name, shared[0])

    def first(a: Expr, r: Expr) -> Expr:
        v = body.let(element(r), "v")
        at = r if position is None else body.let(position(r), "at")
        return lw.select(lw.bin_("&&", holds(v, best, t), lw.bin_("<", at, a)), at, a)

    where = fold(lw.const(lw.UINT_MAX, "u32"), first, "min", shared[1])
    return best, where


def holds(v: Expr, best: Expr, t: str) -> Expr:
    """Whether a value is the extremum an argmax looks for (a nan, when that is nan)."""
    if t != "f32":
        return lw.bin_("==", v, best)
    hit = lw.float_compare("==", v, best)
    return lw.bin_("||", hit, lw.bin_("&&", lw.isnan(v), lw.isnan(best)))
