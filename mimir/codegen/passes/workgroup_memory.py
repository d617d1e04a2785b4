"""`to_workgroup_memory`: each `WarpReduce` as a tree in workgroup memory, for a target
without warp functions (`mimir.codegen.kernels.warp` explains the schedule)."""

from __future__ import annotations

from dataclasses import replace

from mimir.codegen import lower as lw
from mimir.codegen.builder import u32
from mimir.codegen.ir import (
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
from mimir.codegen.kernels.warp import combine


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
