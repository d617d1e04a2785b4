"""Workgroup reductions over warps: the schedule every reduction uses, and its fallback.

`group_total` combines one value per thread over a 1-D workgroup of `width` threads (a
power of two, at least 32) and gives the total to every thread:

1. each warp of 32 threads combines its lanes with one `WarpReduce` (PTX `shfl.sync.bfly`,
   MSL `simd_sum`/`simd_max`/`simd_min`): no threadgroup memory, no barrier;
2. with more than one warp, lane 0 of each warp stores its warp's result in slot
   `local_x / 32` of a threadgroup array of `width / 32` elements, one barrier, then each
   lane loads slot `local_x % (width / 32)` and a second `WarpReduce` over groups of
   `width / 32` lanes (three rounds for 256 threads) gives every thread the total.

A 256-thread reduction is then one barrier instead of the eight steps of a tree (nine
barriers) down to one thread, and 32 bytes of threadgroup memory instead of 1 KiB.
A target without warp functions (WGSL, SPIR-V here) gets `to_workgroup_memory`: each
`WarpReduce` becomes a tree over its lanes' elements of a threadgroup array (five steps
for 32 lanes; at most 8 lanes are read and combined by every thread after one barrier),
the combine written once in IR (`combine`), so every backend computes the same function.
The reductions of a block take turns with two arrays of each type (`_rewrite_block`).
"""

from __future__ import annotations

from dataclasses import replace

from mimir.codegen import lower as lw
from mimir.codegen.builder import Body, ibin, u32
from mimir.codegen.helpers import bin_
from mimir.codegen.ir import (
    WARP,
    Barrier,
    Binary,
    Builtin,
    Expr,
    For,
    If,
    Kernel,
    Let,
    Load,
    SharedArray,
    Stmt,
    Store,
    Var,
    WarpReduce,
    all_expressions,
)

__all__ = ["combine", "group_total", "group_totals", "op_for", "to_workgroup_memory"]

# a reduction's name -> the `WarpReduce` op that combines its partial results
_OPS = {"sum": "add", "mean": "add", "max": "max", "min": "min"}


def op_for(name: str) -> str:
    return _OPS[name]


def combine(op: str, a: Expr, b: Expr) -> Expr:
    """`a op b` as `WarpReduce` defines it: `+` (wrapping for integers), the
    nan-propagating `maximum` / `minimum` of the op table, or for `fmax` the target's
    `max` intrinsic (a nan operand: unspecified)."""
    if op == "add":
        return bin_("+", a, b)
    if op == "fmax":
        return lw.call("max", a, b)
    return lw.LOWERING["maximum" if op == "max" else "minimum"]([a, b], a.type)


def group_total(
    body: Body, shared: list[SharedArray], value: Expr, op: str, width: int, name: str
) -> Expr:
    """`value` combined with `op` over the workgroup's `width` threads, in every thread.

    `name` is a threadgroup array this reduction owns (declared here when `width` > 32;
    never written again, so no barrier is needed after the slots are read)."""
    return group_totals(body, shared, [(value, op, name)], width)[0]


def group_totals(
    body: Body, shared: list[SharedArray], values: list[tuple[Expr, str, str]], width: int
) -> list[Expr]:
    """`group_total` of several `(value, op, array name)` at once: one barrier for all."""
    warps = [body.let(WarpReduce(op, v, v.type), "warp") for v, op, _ in values]
    if width <= WARP:
        return warps
    mine = slots(
        body, shared, [(name, w) for (_, _, name), w in zip(values, warps, strict=True)], width
    )
    return [
        body.let(WarpReduce(op, m, m.type, width // WARP), "total")
        for (_, op, _), m in zip(values, mine, strict=True)
    ]


def slots(body: Body, shared: list[SharedArray], values: list[tuple[str, Expr]], width: int):
    """Lane 0 of each warp stores each of its warp's `values` in slot `local_x / 32` of
    its array (declared here, `width / 32` elements), one barrier, then each thread loads
    slot `local_x % (width / 32)`: every group of `width / 32` lanes holds all the slots,
    for a `WarpReduce` over that many lanes."""
    lid = Builtin("local_x")
    count = width // WARP
    for name, v in values:
        declared = [s for s in shared if s.name == name]
        if declared:  # the same slots in another branch of the kernel (one runs)
            assert declared == [SharedArray(name, v.type, count)], declared
            continue
        shared.append(SharedArray(name, v.type, count))
    with body.if_(Binary("==", ibin("%", lid, u32(WARP)), u32(0), "bool")):
        for name, v in values:
            body.emit(Store(name, ibin("/", lid, u32(WARP)), v))
    body.emit(Barrier())
    return [body.let(Load(name, ibin("%", lid, u32(count)), v.type), "slot") for name, v in values]


# ---------------------------------------------------------------- the fallback


def to_workgroup_memory(kernel: Kernel) -> Kernel:
    """`kernel` with each `Let(v, WarpReduce(...))` replaced by workgroup memory: every
    thread stores its value in its own element of a fresh array as wide as the workgroup;
    then either (at most 8 lanes) one barrier and each thread combines its group's
    elements in order, or a tree: steps s = lanes/2, ..., 1, each after a barrier, fold
    element `i + s` into `i` for the lanes `i % lanes < s`, and after a last barrier each
    thread reads its group's first element. The helpers the combines call are added."""
    if not any(isinstance(e, WarpReduce) for e in all_expressions(kernel.body)):
        return kernel
    width = kernel.workgroup_size[0]
    shared = list(kernel.shared)
    body = _rewrite_block(kernel.body, shared, width)
    helpers = list(kernel.helpers)
    known = {h.name for h in helpers}
    for h in lw.helpers_needed(all_expressions(body)):
        if h.name not in known:
            helpers.append(h)
            known.add(h.name)
    return replace(kernel, body=body, shared=shared, helpers=helpers)


def _rewrite_block(block: list[Stmt], shared: list[SharedArray], width: int) -> list[Stmt]:
    """`block` with its `WarpReduce`s through workgroup memory. The block's reductions of
    one type take turns with two arrays: reduction k stores into the array reduction k - 2
    read, and every thread has read it by then, since each passed reduction k - 1's barrier
    after its reads (statements of one block run in order). A narrow launch's 16 column
    sums take 2 KiB, not 16. A loop whose body reduces ends each iteration with a
    barrier, so the next one's stores wait for this one's reads."""
    out: list[Stmt] = []
    arrays: dict[str, list[str]] = {}  # type -> this block's arrays
    turns: dict[str, int] = {}  # type -> the reductions of that type so far
    for s in block:
        if isinstance(s, Let) and isinstance(s.value, WarpReduce):
            mine = arrays.setdefault(s.value.type, [])
            turn = turns.get(s.value.type, 0)
            turns[s.value.type] = turn + 1
            if turn < 2:
                name = f"$warp{sum(1 for a in shared if a.name.startswith('$warp'))}"
                shared.append(SharedArray(name, s.value.type, width))
                mine.append(name)
            out.extend(_tree(s.var, s.value, mine[turn % 2]))
        elif isinstance(s, If):
            then = _rewrite_block(s.then, shared, width)
            out.append(If(s.cond, then, _rewrite_block(s.orelse, shared, width)))
        elif isinstance(s, For):
            body = _rewrite_block(s.body, shared, width)
            if any(isinstance(e, WarpReduce) for e in all_expressions(s.body)):
                # the next iteration's first store into an array waits for every
                # thread's last read of it in this one
                body.append(Barrier())
            out.append(replace(s, body=body))
        else:
            if any(isinstance(e, WarpReduce) for e in all_expressions([s])):
                raise ValueError("a WarpReduce outside the value of a Let")
            out.append(s)
    return out


# A group of at most this many lanes is combined by each thread reading all its elements
# (one barrier) rather than by a tree (a barrier per step).
_SERIAL_LANES = 8


def _tree(var: Var, e: WarpReduce, name: str) -> list[Stmt]:
    """`var = e` through the workgroup array `name`, one element a thread."""
    lid = Builtin("local_x")
    lane = Binary("&", lid, u32(e.lanes - 1), "u32")
    first = Binary("-", lid, lane, "u32")
    out: list[Stmt] = [Store(name, lid, e.value)]
    if e.lanes <= _SERIAL_LANES:
        out.append(Barrier())
        total: Expr = Load(name, first, e.type)
        for k in range(1, e.lanes):
            total = combine(e.op, total, Load(name, Binary("+", first, u32(k), "u32"), e.type))
        out.append(Let(var, total))
        return out
    step = e.lanes // 2
    while step >= 1:
        out.append(Barrier())
        a = Load(name, lid, e.type)
        b = Load(name, Binary("+", lid, u32(step), "u32"), e.type)
        cond = Binary("<", lane, u32(step), "bool")
        out.append(If(cond, [Store(name, lid, combine(e.op, a, b))]))
        step //= 2
    out.append(Barrier())
    out.append(Let(var, Load(name, first, e.type)))
    return out
