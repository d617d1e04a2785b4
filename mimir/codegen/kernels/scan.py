"""Prefix scans (`cumsum`, `cumprod`): one workgroup per row, work-efficient.

A row of any length (symbolic included) is walked in chunks of `width` elements
(the workgroup size). Each chunk is scanned in threadgroup memory with the
Brent-Kung inclusive scan: an up-sweep that builds partial sums at the nodes of
a balanced tree (`width - 1` combines), then a down-sweep that pushes them to
the positions in between (`width - log2(width) - 1` combines), so a chunk costs
fewer than `2 * width` combines and `2 * log2(width)` barriers, O(n) work for the
row (Hillis-Steele would do `width * log2(width)`). The carry, the combined total
of the chunks before, is added to every element of the chunk and then advanced
by the chunk's total, which is the last element of the scanned chunk.

Sums and products accumulate in the result dtype's register type (f32 for
float16, rounded once per output); integers wrap as the reference does at every
step. Every barrier is in uniform control flow: the chunk loop's bounds are the
same for all threads of the workgroup, and only loads and stores are guarded.
"""

from __future__ import annotations

from typing import Any

from mimir.codegen import lower as lw
from mimir.codegen import sizes as sz
from mimir.codegen.builder import Idx, ibin, size_ir, u32
from mimir.codegen.ir import Assign, Barrier, Binary, Builtin, Expr, Load, SharedArray, Store
from mimir.codegen.kernels.context import Built, KernelContext, reg_dtype, width_for


def scan_axis(c: KernelContext, root: int) -> int | None:
    """The scanned axis of a `cumsum`/`cumprod` node (None: the flattened tensor)."""
    ev = c.ev
    node = ev.node(root)
    kw = dict(zip(node["keywords"], node["inputs"][1:], strict=True))
    if "axis" not in kw:
        return None
    value = ev.values[ev.resolve(kw["axis"])]
    sym = getattr(value, "sym", None)
    if sym is None:
        return None  # `axis=None` written out
    return sym.value % len(ev.shape(node["inputs"][0]))


def build(c: KernelContext) -> Built:
    ev, body = c.ev, c.body
    root = c.plan.root
    assert root is not None
    node = ev.node(root)
    name = node["spec"].name
    x = node["inputs"][0]
    shape = ev.shape(x)
    axis = scan_axis(c, root)
    if axis is None:  # the flattened tensor is one row
        length, other = sz.product(list(shape)), ()
    else:
        length, other = shape[axis], tuple(s for k, s in enumerate(shape) if k != axis)
    out = ev.dtype(root)
    acc = reg_dtype(out)
    t = lw.REG[acc]
    op = "add" if name == "cumsum" else "mul"

    def combine(a: Expr, b: Expr) -> Expr:
        return lw.lower_element(op, [a, b], acc, acc)

    identity = lw.const(0 if name == "cumsum" else 1, t)
    width = width_for(length)
    dispatch, row = c.groups(sz.product(list(other)))
    other_axes = Idx(other, flat=row).axes(body) if other else []
    lid = Builtin("local_x")
    shared = "$scan"
    c.shared.append(SharedArray(shared, t, width))
    n = size_ir(length)
    oshape = ev.shape(root)

    def position(j: Expr) -> tuple[Idx, Idx]:
        """The input's and the output's position of row element j."""
        if axis is None:
            return Idx(shape, flat=j), Idx(oshape, flat=j)
        axes = list(other_axes)
        axes.insert(axis, j)
        return Idx(shape, axes=axes), Idx(oshape, axes=axes)

    carry = body.var(identity, "carry")
    with body.for_("j0_", u32(0), n, u32(width)) as j0:
        j = body.let(ibin("+", j0, lid), "j")
        inside = Binary("<", j, n, "bool")
        value = body.var(identity, "x")
        with body.if_(inside):
            src, _ = position(j)
            body.emit(Assign(value, lw.convert(ev.at(x, src), ev.dtype(x), acc)))
        body.emit(Store(shared, lid, value))
        _brent_kung(c, shared, t, combine, lid, width)
        scanned = body.let(combine(carry, Load(shared, lid, t)), "scanned")
        with body.if_(inside):
            _, dst = position(j)
            result = lw.round_to(scanned, out)
            c.write(dst, body.let(result, "y"))
        total = body.let(Load(shared, u32(width - 1), t), "chunk")
        body.emit(Barrier())  # every thread has read the chunk before the next overwrites it
        body.emit(Assign(carry, combine(carry, total)))
    return (width, 1, 1), dispatch


def _brent_kung(c: KernelContext, shared: str, t: str, combine: Any, lid: Expr, width: int) -> None:
    """Inclusive scan of `shared[0..width)` in place (width a power of two)."""
    body = c.body
    d = 1
    while d < width:  # up-sweep: shared[k*2d + 2d - 1] gets the total of its 2d block
        body.emit(Barrier())
        with body.if_(Binary("<", lid, u32(width // (2 * d)), "bool")):
            i = body.let(ibin("-", ibin("*", ibin("+", lid, u32(1)), u32(2 * d)), u32(1)), "i")
            a = body.let(Load(shared, ibin("-", i, u32(d)), t), "a")
            b = body.let(Load(shared, i, t), "b")
            body.emit(Store(shared, i, combine(a, b)))
        d *= 2
    d = width // 4
    while d >= 1:  # down-sweep: the position halfway into each next block
        body.emit(Barrier())
        with body.if_(Binary("<", lid, u32(width // (2 * d) - 1), "bool")):
            i = body.let(ibin("-", ibin("*", ibin("+", lid, u32(1)), u32(2 * d)), u32(1)), "i")
            a = body.let(Load(shared, i, t), "a")
            b = body.let(Load(shared, ibin("+", i, u32(d)), t), "b")
            body.emit(Store(shared, ibin("+", i, u32(d)), combine(a, b)))
        d //= 2
    body.emit(Barrier())
