"""`sort` / `argsort`: one workgroup per row, a bitonic sort in workgroup memory.

Thread layout: `width` threads (at most 256) per row; the row's keys and their positions
sit in two workgroup arrays of `P` elements, `P` the power of two that covers the axis's
bound (a literal, or a `Dim`'s `max=`: `schedule.limits.refuse_long_sorts` refuses an
axis past `SORT_LIMIT` or without one). Each thread loads the elements `lid, lid + width,
...` (the padding past the row's length too), then the bitonic network runs its
`log2(P) * (log2(P) + 1) / 2` compare-exchange steps, a barrier after each; the steps'
loop bounds are the same for every thread, so each barrier is in uniform control flow.

Each value is held as a u32 whose unsigned order is the sort's (`order_key`): an int32's
bits with the sign flipped; a float's with every bit flipped when negative and the sign
set when not, every NaN the largest key (last ascending, as NumPy; first descending) and
-0.0 the key of 0.0. Only integer compares, then: no target's fast math or flushing of
subnormals can reorder them. The network compares (key, position) pairs: positions are
distinct, so the order is strict and total and the result is the stable sort (equal
keys keep their order); the padding, whose positions are past the row's length, sorts
after every element of the row whatever its key. `sort` then reads each output's value
back from the input at its sorted position (so a -0.0 or a NaN's bits come out as they
went in), and `argsort` stores the position.

A sort along another axis than the last reads and writes its row strided, through the
positions of the other axes (as `scan` does).
"""

from __future__ import annotations

from mimir.codegen import lower as lw
from mimir.codegen import sizes as sz
from mimir.codegen.builder import Body, Idx, ibin, size_ir, u32
from mimir.codegen.helpers import not_
from mimir.codegen.ir import (
    Barrier,
    Binary,
    Bitcast,
    Builtin,
    Cast,
    Expr,
    Load,
    Select,
    SharedArray,
    Store,
)
from mimir.codegen.kernels.context import Built, KernelContext, reg_dtype
from mimir.codegen.schedule.layout import WG
from mimir.codegen.schedule.limits import SORT_LIMIT, sort_axis, sort_length
from mimir.dtypes import DType, int32, uint32


def _and(a: Expr, b: Expr) -> Expr:
    return Binary("&&", a, b, "bool")


def _or(a: Expr, b: Expr) -> Expr:
    return Binary("||", a, b, "bool")


def order_key(body: Body, v: Expr, dtype: DType) -> Expr:
    """A u32 whose unsigned order is the ascending sort order of `v` (float32, int32 or
    uint32): NaNs (any sign or payload) the largest, -0.0 equal to 0.0."""
    if dtype == uint32:
        return v
    if dtype == int32:
        return Binary("^", Bitcast(v, "u32"), u32(0x80000000), "u32")
    bits = body.let(Bitcast(v, "u32"), "bits")
    magnitude = Binary("&", bits, u32(0x7FFFFFFF), "u32")
    negative = Binary(">=", bits, u32(0x80000000), "bool")
    ordered = Select(
        negative,
        Binary("^", bits, u32(0xFFFFFFFF), "u32"),
        Binary("|", bits, u32(0x80000000), "u32"),
        "u32",
    )
    zero = Select(Binary("==", magnitude, u32(0), "bool"), u32(0x80000000), ordered, "u32")
    nan = Binary(">", magnitude, u32(0x7F800000), "bool")
    return Select(nan, u32(0xFFFFFFFF), zero, "u32")


def build(c: KernelContext) -> Built:
    ev, body = c.ev, c.body
    root = c.plan.root  # type: ignore[attr-defined]
    node = ev.node(root)
    name = node["spec"].name
    kw = dict(zip(node["keywords"], node["inputs"][1:], strict=True))
    descending = False
    if "descending" in kw:
        descending = bool(ev.values[ev.resolve(kw["descending"])].value)
    x = node["inputs"][0]
    shape = ev.shape(x)
    axis = sort_axis(ev, root)
    length = shape[axis]
    other = tuple(s for k, s in enumerate(shape) if k != axis)
    bound = sort_length(length, c.dims)
    assert bound is not None and bound <= SORT_LIMIT  # refuse_long_sorts
    padded = 1 << max(0, bound - 1).bit_length()
    log = padded.bit_length() - 1
    width = min(WG, max(32, padded))
    kdt = reg_dtype(ev.dtype(x))

    dispatch, row = c.groups(sz.product(list(other)))
    other_axes = Idx(other, flat=row).axes(body) if other else []
    lid = Builtin("local_x")
    keys, places = "$keys", "$places"
    c.shared.append(SharedArray(keys, "u32", padded))
    c.shared.append(SharedArray(places, "u32", padded))
    n = size_ir(length)
    oshape = ev.shape(root)

    def position(j: Expr) -> tuple[Idx, Idx]:
        axes = list(other_axes)
        axes.insert(axis, j)
        return Idx(shape, axes=axes), Idx(oshape, axes=axes)

    def each(visit) -> None:
        """Every thread's elements of the padded row: `lid`, `lid + width`, ..."""
        with body.for_("i0_", u32(0), u32(padded), u32(width)) as i0:
            i = body.let(ibin("+", i0, lid), "i")
            if width > padded:
                with body.if_(Binary("<", i, u32(padded), "bool")):
                    visit(i)
            else:
                visit(i)

    def load(i: Expr) -> None:
        with body.if_(Binary("<", i, n, "bool")):
            src, _ = position(i)
            value = body.let(lw.convert(ev.at(x, src), ev.dtype(x), kdt), "v")
            body.emit(Store(keys, i, body.let(order_key(body, value, kdt), "key")))
        with body.if_(Binary(">=", i, n, "bool")):
            body.emit(Store(keys, i, u32(0)))
        body.emit(Store(places, i, i))

    each(load)
    body.emit(Barrier())

    with body.for_("e_", u32(0), u32(log), u32(1), unroll=False) as e:
        k = body.let(Binary("<<", u32(2), e, "u32"), "k")
        half = body.let(Binary("<<", u32(1), e, "u32"), "half")
        with body.for_("f_", u32(0), ibin("+", e, u32(1)), u32(1), unroll=False) as f:
            j = body.let(Binary(">>", half, f, "u32"), "j")

            def exchange(i: Expr) -> None:
                partner = body.let(Binary("^", i, j, "u32"), "l")
                with body.if_(Binary(">", partner, i, "bool")):
                    a = body.let(Load(keys, i, "u32"), "a")
                    b = body.let(Load(keys, partner, "u32"), "b")
                    pa = body.let(Load(places, i, "u32"), "pa")
                    pb = body.let(Load(places, partner, "u32"), "pb")
                    padding = _or(Binary(">=", pa, n, "bool"), Binary(">=", pb, n, "bool"))
                    by_place = Binary("<", pb, pa, "bool")
                    ahead = Binary(">" if descending else "<", b, a, "bool")
                    by_key = _or(ahead, _and(Binary("==", a, b, "bool"), by_place))
                    b_first = body.let(_or(_and(padding, by_place), _and(not_(padding), by_key)))
                    up = body.let(Binary("==", Binary("&", i, k, "u32"), u32(0), "bool"), "up")
                    swap = _or(_and(up, b_first), _and(not_(up), not_(b_first)))
                    with body.if_(swap):
                        body.emit(Store(keys, i, b))
                        body.emit(Store(keys, partner, a))
                        body.emit(Store(places, i, pb))
                        body.emit(Store(places, partner, pa))

            each(exchange)
            body.emit(Barrier())

    out = ev.dtype(root)

    def store(i: Expr) -> None:
        with body.if_(Binary("<", i, n, "bool")):
            place = body.let(Load(places, i, "u32"), "place")
            if name == "sort":  # the input's value at the sorted position, bit for bit
                src, _ = position(place)
                value = lw.round_to(lw.convert(ev.at(x, src), ev.dtype(x), kdt), out)
            else:
                value = Cast(place, lw.REG[out])
            _, dst = position(i)
            c.write(dst, body.let(value, "y"))

    each(store)
    return (width, 1, 1), dispatch
