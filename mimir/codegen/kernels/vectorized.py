"""The element-wise schedule with 128-bit memory access: eight elements per thread.

The output's row-major order is cut into vectors of four elements; workgroup `g` (256
threads) owns vectors `512g .. 512g+511`, and its thread `l` the two vectors
`v = 512g + l` and `v + 256` (so neighbouring threads touch neighbouring 16 bytes, and
each thread amortises its index arithmetic over eight elements). The four lanes of a
vector are evaluated as in the scalar schedule (`KernelContext.write` at flat positions
`4v + k`), then `vectorise` turns the lanes' accesses into `GlobalVectorLoad` and
`GlobalVectorStore` where that is sound, buffer by buffer:

- the buffer is dense with exactly the output's element count (a same-shaped operand
  or an output; a broadcast operand, a slice or a concatenated part is not), so the
  element `4v + k` the lane reads is in bounds whenever the lane runs;
- each of the four lanes reads it at its own flat position `4v + k` (the scalar code
  would do the same four loads; an operand read through a broadcast, a transpose or a
  gather has another index and keeps its scalar loads);
- the element is 32 bits wide (f32, i32, u32, and bool stored as u32), so four of them
  are 16 bytes at an offset of `16v` bytes from a buffer base that every host aligns
  to at least 16 bytes (the manifest says which buffers rely on it);
- a buffer the block writes is read, if at all, only through its own lanes: the loads
  then all happen before the stores, and lane k reads only the element lane k writes.

Sizes decide the guards: with the element count proven a multiple of 2048 (4 lanes x
2 vectors x 256 threads) no vector is guarded; a multiple of 4 gives one guard per
vector (`v < n / 4`); otherwise the thread owning vector `n / 4` also runs the last
`n % 4` elements one at a time (the scalar tail). When no access can be vectorised, the
element count is below 4, or it may be 0 (a dim with `min=0`), the caller builds the
scalar schedule.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from mimir.codegen import lower as lw
from mimir.codegen import sizes as sz
from mimir.codegen.builder import Body, Idx, ibin, size_ir, u32
from mimir.codegen.ir import (
    AtomicAdd,
    Binary,
    Builtin,
    Expr,
    For,
    GlobalVectorLoad,
    GlobalVectorStore,
    If,
    Let,
    Load,
    Stmt,
    Store,
    Var,
    all_expressions,
    drop_unread_lets,
    map_expr,
    statement_expressions,
    walk_statements,
)
from mimir.codegen.kernels.context import Built, KernelContext
from mimir.codegen.schedule.layout import WG

LANES = 4


VECTORS = 2  # vectors per thread: 8 elements, as many as Triton's 1024-wide blocks of 4 warps


_WIDE = ("f32", "i32", "u32")  # element types four of which make 16 bytes


def elementwise(c: KernelContext) -> Built | None:
    """The element-wise launch with 4-wide accesses, or None where no access of it can be
    4-wide (then the scalar schedule is built in a fresh context)."""
    shape = c.ev.shape(c.plan.node)
    total = sz.product(list(shape))
    high = sz.upper_bound(total, c.dims)
    low = sz.lower_bound(total, c.dims)
    if (high is not None and high < LANES) or low is None or low < 1:
        # a tensor that may be empty keeps the scalar schedule: a WebGPU binding of an
        # array of vectors must hold at least one vector
        return None
    text = sz.manifest_text(total)
    whole = sz.multiple_proof(total, LANES, c.dims)
    full = sz.multiple_proof(total, LANES * WG * VECTORS, c.dims)
    body = c.body
    dispatch, g = c.groups(sz.cdiv(total, LANES * WG * VECTORS), guard=full is not None)
    base = body.let(ibin("+", ibin("*", g, u32(WG * VECTORS)), Builtin("local_x")), "v")
    vectors = body.let(ibin("/", size_ir(total), u32(LANES)), "q")
    sizes = {b.name: sz.key(sz.simplify(sz.product(list(b.shape)))) for b in c.s.buffers}
    dense = {name for name, key in sizes.items() if key == sz.key(sz.simplify(total))}
    blocks: list[tuple[Expr, list[Stmt]]] = []
    accesses: list[tuple[str, str]] = []
    for j in range(VECTORS):
        v = base if j == 0 else body.let(ibin("+", base, u32(j * WG)), "v")
        with body.block() as lanes:
            i4 = body.let(Binary("<<", v, u32(2), "u32"), "i")
            flats = [i4] + [body.let(ibin("+", i4, u32(k)), "i") for k in range(1, LANES)]
            for flat in flats:
                c.write(Idx(shape, flat=flat))
        # a load whose value nothing uses (`take_along_axis` by an index proven 0) is no
        # access: made 4 wide it would be the buffer's only view, an array of vectors that
        # a WebGPU binding of fewer than 4 elements cannot hold. (The lanes store all they
        # compute: no statement after them reads their `let`s.)
        done = vectorise(body, drop_unread_lets(lanes), flats, dense, c.s)
        if done is None:
            return None
        blocks.append((v, done[0]))
        accesses = done[1]
    proof = (
        f"{whole}; offset 16*v bytes"
        if whole
        else f"offset 16*v bytes; the last {text} % 4 elements one at a time"
    )
    c.vectorized += [(name, access, LANES, proof) for name, access in accesses]
    if whole is not None:
        c.proofs.append((f"4*v + 3 < {text}", whole))
    if full is not None:
        c.proofs.append((f"v < {text} / 4", full))
    for v, stmts in blocks:
        if full is not None:
            for st in stmts:
                body.emit(st)
        else:
            body.emit(If(Binary("<", v, vectors, "bool"), stmts))
    if whole is None:  # the thread that owns vector `N / 4` runs the last `N % 4` elements
        owner: Expr | None = None
        for v, _ in blocks:
            test = Binary("==", v, vectors, "bool")
            owner = test if owner is None else Binary("||", owner, test, "bool")
        assert owner is not None
        n = size_ir(total)
        with body.if_(owner):  # at most 3 elements, each guarded (a loop would be unrolled)
            start = body.let(Binary("<<", vectors, u32(2), "u32"), "i")
            for k in range(LANES - 1):
                j = start if k == 0 else body.let(ibin("+", start, u32(k)), "i")
                with body.if_(Binary("<", j, n, "bool")):
                    c.write(Idx(shape, flat=j))
    return (WG, 1, 1), dispatch


def vectorise(
    body: Body, lanes: list[Stmt], flats: list[Expr], dense: set[str], s: Any
) -> tuple[list[Stmt], list[tuple[str, str]]] | None:
    """`lanes` (the four lanes' statements) with the sound accesses made 4-wide, and the
    (buffer, "read" | "write") accesses that were; None when there is none."""
    flat_lanes = {f: k for k, f in enumerate(flats)}
    # an index may be a variable the lanes bind to a lane's position (a memoised offset)
    bound = {st.var: st.value for st in walk_statements(lanes) if isinstance(st, Let)}

    def lane(index: Expr) -> int | None:
        k = flat_lanes.get(index)
        return flat_lanes.get(bound[index]) if k is None and index in bound else k

    elem = {b.name: _storage(b) for b in s.buffers}
    seen: dict[str, set[int]] = {}
    other: set[str] = set()  # buffers also read at an index that is not a lane's own
    for e in all_expressions(lanes):
        if isinstance(e, Load) and e.array in elem:
            k = lane(e.index)
            if k is None:
                other.add(e.array)
            else:
                seen.setdefault(e.array, set()).add(k)
    stores: dict[str, dict[int, int]] = {}
    nested: set[str] = set()  # buffers written inside a nested block, or atomically
    for pos, st in enumerate(lanes):
        if isinstance(st, Store) and lane(st.index) is not None:
            stores.setdefault(st.array, {})
            if lane(st.index) in stores[st.array]:
                nested.add(st.array)  # written twice at one position: leave it alone
            stores[st.array][lane(st.index)] = pos
        elif isinstance(st, Store):
            nested.add(st.array)
    for st in walk_statements(lanes):
        if isinstance(st, (If, For)):
            for inner in walk_statements(st.then if isinstance(st, If) else st.body):
                if isinstance(inner, (Store, AtomicAdd)):
                    nested.add(inner.array)
        if isinstance(st, AtomicAdd):
            nested.add(st.array)
    full = set(range(len(flats)))

    def wide(name: str) -> bool:
        return name in dense and elem.get(name) in _WIDE

    loads = {n for n, ks in seen.items() if ks == full and n not in other and wide(n)}
    writes = {
        n
        for n, ks in stores.items()
        if set(ks) == full and n not in nested and n not in other and wide(n)
    }
    # a written buffer is read only through its own lanes, all of them (hoisted above
    # every store); otherwise the lanes keep their order and their scalar accesses
    for n in list(writes):
        if n in seen and n not in loads:
            writes.discard(n)
    if not loads and not writes:
        return None
    index = flats[0]
    lane_vars = {n: tuple(body.fresh(f"{n}_", elem[n]) for _ in flats) for n in sorted(loads)}

    def replace(e: Expr) -> Expr | None:
        if isinstance(e, Load) and e.array in lane_vars:
            k = lane(e.index)
            if k is not None:
                return lane_vars[e.array][k]
        return None

    # the lanes' index `let`s come first in the block; the vector loads go after them
    defined = {f.name for f in flats if isinstance(f, Var)}
    head = 0
    while head < len(lanes) and isinstance(lanes[head], Let) and lanes[head].var.name in defined:
        head += 1
    out: list[Stmt] = list(lanes[:head])
    out += [GlobalVectorLoad(vs, n, index) for n, vs in lane_vars.items()]
    values: dict[str, list[Expr]] = {n: [None] * len(flats) for n in writes}  # type: ignore[list-item]
    for st in lanes[head:]:
        st = _map_statement(st, replace)
        if isinstance(st, Store) and st.array in writes:
            v = body.fresh(f"{st.array}_", st.value.type)
            out.append(Let(v, st.value))
            values[st.array][lane(st.index)] = v  # type: ignore[index]
            continue
        out.append(st)
    out += [GlobalVectorStore(n, index, tuple(values[n])) for n in sorted(writes)]
    accesses = [(n, "read") for n in sorted(loads)] + [(n, "write") for n in sorted(writes)]
    return out, accesses


def _storage(b: Any) -> str:

    return lw.STORAGE[b.dtype]


def _map_statement(st: Stmt, f: Any) -> Stmt:
    """`st` with `f` applied to its expressions (and its nested blocks')."""
    if isinstance(st, If):
        return If(
            map_expr(st.cond, f),
            [_map_statement(x, f) for x in st.then],
            [_map_statement(x, f) for x in st.orelse],
        )
    if isinstance(st, For):
        return dataclasses.replace(
            st,
            start=map_expr(st.start, f),
            end=map_expr(st.end, f),
            step=map_expr(st.step, f),
            body=[_map_statement(x, f) for x in st.body],
        )
    if not statement_expressions(st):
        return st
    if isinstance(st, Let):
        return Let(st.var, map_expr(st.value, f))
    if isinstance(st, Store):
        return Store(st.array, map_expr(st.index, f), map_expr(st.value, f))
    from dataclasses import fields, replace

    changes = {
        fl.name: map_expr(getattr(st, fl.name), f)
        for fl in fields(st)  # type: ignore[arg-type]
        if isinstance(getattr(st, fl.name), Expr)
    }
    return replace(st, **changes)  # type: ignore[type-var]
