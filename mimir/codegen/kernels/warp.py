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

from mimir.codegen import lower as lw
from mimir.codegen.builder import Body, ibin, u32
from mimir.codegen.helpers import bin_
from mimir.codegen.ir import (
    WARP,
    Barrier,
    Binary,
    Builtin,
    Expr,
    Load,
    SharedArray,
    Store,
    WarpReduce,
)

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
