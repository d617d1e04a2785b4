"""`sort` / `argsort`: one workgroup per row, a bitonic sort in workgroup memory.

Thread layout: `width` threads (at most 256) per row; the row's keys and their positions
sit in two workgroup arrays of `P` elements, `P` the power of two that covers the axis's
bound (a literal, or a `Dim`'s `max=`: `schedule.limits.refuse_long_sorts` refuses an
axis past `SORT_LIMIT` or without one). Each thread loads the elements `lid, lid + width,
...` (the padding past the row's length too), then the bitonic network runs its
`log2(P) * (log2(P) + 1) / 2` compare-exchange steps, a barrier after each; the steps'
loop bounds are the same for every thread, so each barrier is in uniform control flow.

The network compares (key, position) pairs: positions are distinct, so the order is
strict and total and the result is the stable sort (equal keys keep their order). A
NaN is larger than every number (last ascending, as NumPy; first descending), -0.0
equals 0.0 (the positions decide), and the padding, whose positions are past the row's
length, sorts after every element of the row whatever its key.

A sort along another axis than the last reads and writes its row strided, through the
positions of the other axes (as `scan` does).
"""

from __future__ import annotations

from mimir.codegen import lower as lw
from mimir.codegen import sizes as sz
from mimir.codegen.builder import Idx, ibin, size_ir, u32
from mimir.codegen.helpers import isnan, not_
from mimir.codegen.ir import Barrier, Binary, Builtin, Cast, Expr, Load, SharedArray, Store
from mimir.codegen.kernels.context import Built, KernelContext, reg_dtype
from mimir.codegen.schedule.layout import WG
from mimir.codegen.schedule.limits import SORT_LIMIT, sort_axis, sort_length


def _and(a: Expr, b: Expr) -> Expr:
    return Binary("&&", a, b, "bool")


def _or(a: Expr, b: Expr) -> Expr:
    return Binary("||", a, b, "bool")


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
    t = lw.REG[kdt]
    is_float = kdt.is_float

    dispatch, row = c.groups(sz.product(list(other)))
    other_axes = Idx(other, flat=row).axes(body) if other else []
    lid = Builtin("local_x")
    keys, places = "$keys", "$places"
    c.shared.append(SharedArray(keys, t, padded))
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
            body.emit(Store(keys, i, lw.convert(ev.at(x, src), ev.dtype(x), kdt)))
        with body.if_(Binary(">=", i, n, "bool")):
            body.emit(Store(keys, i, lw.const(0, t)))
        body.emit(Store(places, i, i))

    each(load)
    body.emit(Barrier())

    def precedes(p: Expr, q: Expr) -> Expr:
        """Key p sorts strictly before key q."""
        less = Binary(">" if descending else "<", p, q, "bool")
        if not is_float:
            return less
        if descending:  # a NaN first
            return _and(not_(isnan(q)), _or(isnan(p), less))
        return _and(not_(isnan(p)), _or(isnan(q), less))

    def equal(p: Expr, q: Expr) -> Expr:
        same = Binary("==", p, q, "bool")
        return _or(_and(isnan(p), isnan(q)), same) if is_float else same

    with body.for_("e_", u32(0), u32(log), u32(1), unroll=False) as e:
        k = body.let(Binary("<<", u32(2), e, "u32"), "k")
        half = body.let(Binary("<<", u32(1), e, "u32"), "half")
        with body.for_("f_", u32(0), ibin("+", e, u32(1)), u32(1), unroll=False) as f:
            j = body.let(Binary(">>", half, f, "u32"), "j")

            def exchange(i: Expr) -> None:
                partner = body.let(Binary("^", i, j, "u32"), "l")
                with body.if_(Binary(">", partner, i, "bool")):
                    a = body.let(Load(keys, i, t), "a")
                    b = body.let(Load(keys, partner, t), "b")
                    pa = body.let(Load(places, i, "u32"), "pa")
                    pb = body.let(Load(places, partner, "u32"), "pb")
                    padding = _or(Binary(">=", pa, n, "bool"), Binary(">=", pb, n, "bool"))
                    by_place = Binary("<", pb, pa, "bool")
                    by_key = _or(precedes(b, a), _and(equal(a, b), by_place))
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
            if name == "sort":
                value = lw.round_to(Load(keys, i, t), out)
            else:
                value = Cast(Load(places, i, "u32"), lw.REG[out])
            _, dst = position(i)
            c.write(dst, body.let(value, "y"))

    each(store)
    return (width, 1, 1), dispatch
