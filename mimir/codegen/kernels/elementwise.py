"""The element-wise launch (`ew`): every launch that computes no root of its own.

256 threads a workgroup. Four consecutive output elements a thread, with 128-bit loads
and stores, where that is proven sound (`vectorized`); else one element a thread, guarded
by `index < numel` (`scalar`). A launch that computes a product by a small matrix
(`schedule.roots.small_matmul`) and writes short literal rows gives each thread a whole
row instead (`by_rows`); an in-place `x = f(x, x.T)` of a square x gives each thread an
element and its mirror image (`mirrored`, `Elementwise.mirror`), and an in-place update
of x from its two halves along the last axis an element of each half (`halved`,
`Elementwise.halves`). A packing copy of a
bfloat16 result gives each thread one u32 word, two elements (`packed`,
`Elementwise.pack`).
"""

from __future__ import annotations

import contextlib

from mimir.codegen import lower as lw
from mimir.codegen import sizes as sz
from mimir.codegen.builder import Idx, ibin, size_ir, u32
from mimir.codegen.ir import Binary, Builtin, Const, Stmt, Store
from mimir.codegen.kernels import vectorized
from mimir.codegen.kernels.context import Built, KernelContext
from mimir.codegen.schedule.layout import WG, row_per_thread


def build(c: KernelContext) -> Built:
    """An element-wise launch: four elements a thread with 128-bit accesses where that is
    proven sound (`vectorized`), else a thread per row (`row_per_thread`), a thread per
    element and its mirror image (`Elementwise.mirror`), or a thread per element."""
    if c.plan.pack:
        return packed(c)
    rows = row_per_thread(c.ev, c.s.kernel.graph.graph, c.plan, c.s.node_buffers)
    if not c.plan.mirror and c.plan.halves is None and not rows:
        built = vectorized.elementwise(c)
        if built is not None:
            return built
        c.restart()
    if rows:
        return by_rows(c)
    if c.plan.mirror:
        return mirrored(c)
    if c.plan.halves is not None:
        return halved(c)
    return scalar(c)


def scalar(c: KernelContext) -> Built:
    shape = c.ev.shape(c.plan.node)
    total = sz.product(list(shape))
    if c.multiple(total, WG, f"i < {sz.manifest_text(total)}"):
        # every thread of every dispatched group has an element (groups past the end of a
        # folded dispatch return, uniformly, in `groups`)
        dispatch, g = c.groups(sz.cdiv(total, WG))
        i = c.body.let(ibin("+", ibin("*", g, u32(WG)), Builtin("local_x")), "i")
        c.write(Idx(shape, flat=i))
        return (WG, 1, 1), dispatch
    dispatch, g = c.groups(sz.cdiv(total, WG), guard=False)
    i = c.body.let(ibin("+", ibin("*", g, u32(WG)), Builtin("local_x")), "i")
    with c.body.if_(Binary("<", i, size_ir(total), "bool")):
        c.write(Idx(shape, flat=i))
    return (WG, 1, 1), dispatch


def by_rows(c: KernelContext) -> Built:
    """An element-wise launch a thread per row (`schedule.row_per_thread`): thread t
    computes every element of row t, so the small matrix products' left rows are loaded
    once per row and a chain of them (`h = (h @ w).tanh()` layer after layer) computes
    each layer's row once. Every value of the row is computed before the first store, so
    an `InOut` row may be read whole and written in place (`p = p @ r`)."""
    body, ev = c.body, c.ev
    shape = ev.shape(c.plan.node)
    lead, length = tuple(shape[:-1]), shape[-1]
    assert isinstance(length, int)  # `row_per_thread`
    rows = sz.product(list(lead))
    every = c.multiple(rows, WG, f"row < {sz.manifest_text(rows)}")
    dispatch, g = c.groups(sz.cdiv(rows, WG), guard=every)
    row = body.let(ibin("+", ibin("*", g, u32(WG)), Builtin("local_x")), "row")
    below = Binary("<", row, size_ir(rows), "bool")
    with contextlib.nullcontext() if every else body.if_(below):
        lead_axes = Idx(lead, flat=row).axes(body) if lead else []
        base = body.let(ibin("*", row, u32(length)), "base")
        stores: list[Stmt] = []
        for j in range(length):
            flat = body.let(ibin("+", base, u32(j)), "i")
            idx = Idx(shape, flat=flat, axes=[*lead_axes, u32(j)])
            for node, names in c.plan.outputs():
                value = body.let(ev.at(node, ev.same(idx, node)), "v")
                stores += [
                    Store(name, flat, lw.to_storage(value, ev.dtype(node))) for name in names
                ]
        for store in stores:
            body.emit(store)
    return (WG, 1, 1), dispatch


def mirrored(c: KernelContext) -> Built:
    """An in-place `x = f(x, x.T)` of a square x (`Elementwise.mirror`): thread (i, j) of the
    D x D elements, for i <= j, computes the new (i, j) and (j, i), both from the old
    values, and then stores them; the others have nothing to do. Every old element is
    read by the one thread that writes it and its mirror image, so no scratch copy."""
    body = c.body
    shape = c.ev.shape(c.plan.node)
    side, total = size_ir(shape[0]), sz.product(list(shape))
    dispatch, g = c.groups(sz.cdiv(total, WG), guard=False)
    t = body.let(ibin("+", ibin("*", g, u32(WG)), Builtin("local_x")), "t")
    ((node, names),) = c.plan.outputs()  # the `InOut` buffer, and an output it may also be
    with body.if_(Binary("<", t, size_ir(total), "bool")):
        i = body.let(ibin("/", t, side), "i")
        j = body.let(ibin("%", t, side), "j")
        with body.if_(Binary("<=", i, j, "bool")):
            dtype = c.ev.dtype(node)
            here = body.let(c.ev.at(node, Idx(shape, axes=[i, j])), "here")
            there = body.let(c.ev.at(node, Idx(shape, axes=[j, i])), "there")
            for name in names:
                body.emit(Store(name, t, lw.to_storage(here, dtype)))
            with body.if_(Binary("<", i, j, "bool")):
                mirror = body.let(ibin("+", ibin("*", j, side), i), "mirror")
                for name in names:
                    body.emit(Store(name, mirror, lw.to_storage(there, dtype)))
    return (WG, 1, 1), dispatch


def halved(c: KernelContext) -> Built:
    """An in-place update of x from the two halves of its last axis (`Elementwise.halves`,
    RoPE's `concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)`): thread t computes
    element j of a row and element j + half (j < half), both from the old values, and then
    stores them. Every old element is read by the one thread that writes it and its
    partner (`inplace.write_in_place_is_safe`), so no scratch copy."""
    body, ev = c.body, c.ev
    shape = ev.shape(c.plan.node)
    half = c.plan.halves
    pairs = sz.product([*shape[:-1], half])
    dispatch, g = c.groups(sz.cdiv(pairs, WG), guard=False)
    t = body.let(ibin("+", ibin("*", g, u32(WG)), Builtin("local_x")), "t")
    ((node, names),) = c.plan.outputs()  # the `InOut` buffer, and an output it may also be
    with body.if_(Binary("<", t, size_ir(pairs), "bool")):
        half_ir = size_ir(half)
        row = body.let(ibin("/", t, half_ir), "row")
        j = body.let(ibin("%", t, half_ir), "j")
        low = body.let(ibin("+", ibin("*", row, size_ir(shape[-1])), j), "low")
        high = body.let(ibin("+", low, half_ir), "high")
        lead = Idx(tuple(shape[:-1]), flat=row).axes(body) if len(shape) > 1 else []
        dtype = ev.dtype(node)
        values = [
            body.let(ev.at(node, Idx(shape, flat=at, axes=[*lead, axis])), "v")
            for at, axis in ((low, j), (high, body.let(ibin("+", j, half_ir), "jr")))
        ]
        for at, value in zip((low, high), values, strict=True):
            for name in names:
                body.emit(Store(name, at, lw.to_storage(value, dtype)))
    return (WG, 1, 1), dispatch


def packed(c: KernelContext) -> Built:
    """A packing launch (`Elementwise.pack`): thread w computes elements 2w and 2w + 1 of a
    bfloat16 value (or, a copy, reads them where they are held as float32) and stores word
    w of the packed buffer, both halves at once, so no two threads share a word. Past an
    odd count the last word's high half is 0 (padding; the buffer is whole words)."""
    body, ev = c.body, c.ev
    node = c.plan.node
    shape = ev.shape(node)
    total = sz.product(list(shape))
    words = sz.cdiv(total, 2)
    dispatch, g = c.groups(sz.cdiv(words, WG), guard=False)
    w = body.let(ibin("+", ibin("*", g, u32(WG)), Builtin("local_x")), "w")
    with body.if_(Binary("<", w, size_ir(words), "bool")):
        even = body.let(ibin("*", w, u32(2)), "e")
        odd = body.let(ibin("+", even, u32(1)), "o")
        low = body.let(ev.at(node, Idx(shape, flat=even)), "lo")
        if isinstance(total, int) and total % 2 == 0:
            high = body.let(ev.at(node, Idx(shape, flat=odd)), "hi")
        else:
            # the odd element, where there is one (else element 2w again, and a zero half)
            has_odd = body.let(Binary("<", odd, size_ir(total), "bool"), "has_odd")
            at = body.let(lw.select(has_odd, odd, even), "at")
            read = body.let(ev.at(node, Idx(shape, flat=at)), "hi")
            high = body.let(lw.select(has_odd, read, Const(0.0, "f32")), "hi")
        word = body.let(lw.pack_bfloat16(low, high), "word")
        for name in c.plan.writes:
            body.emit(Store(name, w, word))
    return (WG, 1, 1), dispatch
