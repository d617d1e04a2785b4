"""Independent launches of one function, side by side in one launch.

`x.sum(axis=0), m.max(axis=1)` is a column launch and a row launch that share no
buffer one writes: neither waits for the other, so one launch can run both, each
workgroup taking the part its id falls in. That saves a launch (a few microseconds of
host and GPU ramp each, the cost that dominates small kernels) and lets the parts'
workgroups run at once instead of one launch draining before the next fills the GPU.

`groups` orders the launches in levels (a launch's level is one more than that of
any earlier launch it conflicts with: one writes a buffer the other reads or writes)
and puts launches of a level together when their 1-D workgroups have one size (a
thread-local launch, whose threads never wait for each other, may have a multiple of
it: each of its workgroups is cut in pieces of that size) and the threadgroup memory
and the buffers of the merged launch fit every backend's guaranteed limits (`Limits`).
`fuse` then builds each merged launch: the parts' workgroup counts laid end to end,
and for part k

    if (g < end_k) { the part's body, its group id g - start_k }

one after another in the else branches. The part's body is unchanged but for its
names (its variables and threadgroup arrays get the prefix `$s{k}_`), its group id
and a cut part's thread id (`_adapted`): every part dispatches 1-D counts through
`context.KernelContext.groups`, whose id is `group_y * groups_x + group_x`, so
`group_x` becomes g - start_k and `group_y` 0. The branch taken is the same in the
whole workgroup (g is a workgroup id), so each part's barriers and warp reductions stay
in uniform control flow; a part's `Return` (its groups past its own count) ends only
its own threads. A workgroup runs one part, but the arrays of all of them are
declared: their sum is what `Limits` bounds.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, is_dataclass, replace
from typing import Any

from mimir.codegen import sizes as sz
from mimir.codegen.builder import Body, group_id, ibin, over_dispatched, size_ir, u32
from mimir.codegen.ir import (
    Barrier,
    Binary,
    Builtin,
    CopyAsync,
    Expr,
    If,
    Kernel,
    Let,
    MmaSync,
    Return,
    SharedArray,
    Stmt,
    Uniform,
    Var,
    WaitAsync,
    WarpgroupMma,
    WarpReduce,
    all_expressions,
    walk_statements,
)
from mimir.codegen.schedule import Schedule


@dataclass(frozen=True)
class Limits:
    """What every backend guarantees a kernel (the least of their capabilities)."""

    shared_bytes: int
    storage_buffers: int


def limits(backends: Any) -> Limits:
    caps = [b.capabilities for b in backends]
    return Limits(min(c.max_shared_bytes for c in caps), min(c.max_storage_buffers for c in caps))


def _conflict(a: Kernel, b: Kernel) -> bool:
    """Whether one of the two writes a buffer the other reads or writes."""
    writes_a = {p.name for p in a.buffers if p.access == "read_write"}
    writes_b = {p.name for p in b.buffers if p.access == "read_write"}
    return bool(writes_a & {p.name for p in b.buffers} or writes_b & {p.name for p in a.buffers})


def groups(variants: list[list[Kernel]], limit: Limits) -> list[list[int]]:
    """The launches (indices into each list of `variants`: the same launches built for
    different targets, their buffers alike) in merged groups, in the order they run.
    Every limit is checked in every variant."""
    first = variants[0]
    level: list[int] = []
    for k, kernel in enumerate(first):
        level.append(
            max((level[j] + 1 for j in range(k) if _conflict(first[j], kernel)), default=0)
        )
    out: list[list[int]] = []
    for depth in sorted(set(level)):
        open_: list[list[int]] = []
        for k in (k for k in range(len(first)) if level[k] == depth):
            for group in open_:
                if _fits(variants, [*group, k], limit):
                    group.append(k)
                    break
            else:
                open_.append([k])
        out.extend(open_)
    return out


def _fits(variants: list[list[Kernel]], group: list[int], limit: Limits) -> bool:
    for kernels in variants:
        parts = [kernels[k] for k in group]
        if any(_two_d(p) for p in parts):
            # only beside parts of the same workgroup size: every thread keeps its ids
            if len({p.workgroup_size for p in parts}) != 1:
                return False
        else:
            width = _width(parts)
            if any(p.workgroup_size[0] % width for p in parts):
                return False
            if any(p.workgroup_size[0] != width for p in parts if not _thread_local(p)):
                return False
        if 4 * sum(a.count for a in _arrays(parts)[0]) > limit.shared_bytes:
            return False
        if len({b.name for p in parts for b in p.buffers}) > limit.storage_buffers:
            return False
    return True


def _two_d(k: Kernel) -> bool:
    """Whether `k`'s workgroups are 2-D (a tiled product's 16 x 16 threads)."""
    return k.workgroup_size[1:] != (1, 1)


def _arrays(parts: list[Kernel]) -> tuple[list[SharedArray], list[dict[str, str]]]:
    """The workgroup arrays a launch of `parts` declares, and each part's names for its
    own. Each part's are its own (`$s{k}_` before the name), but where the parts are 2-D
    (tiled products): a workgroup runs one part, so each takes the arrays the earlier
    ones declared, of its element type, as far as they go (grown to the larger count).
    Two tiled products each fill the workgroup memory every backend guarantees, so they
    fit side by side only this way."""
    share = all(_two_d(p) for p in parts)
    declared: list[SharedArray] = []
    names: list[dict[str, str]] = []
    for k, part in enumerate(parts):
        own: dict[str, str] = {}
        free = list(range(len(declared))) if share else []
        for a in part.shared:
            kind = (a.elem, a.broadcast)
            slot = next(
                (j for j in free if (declared[j].elem, declared[j].broadcast) == kind), None
            )
            if slot is None:
                declared.append(replace(a, name=f"$s{k}_{a.name.lstrip('$')}"))
                slot = len(declared) - 1
            else:
                free.remove(slot)
                declared[slot] = replace(declared[slot], count=max(declared[slot].count, a.count))
            own[a.name] = declared[slot].name
        names.append(own)
    return declared, names


def _width(parts: list[Kernel]) -> int:
    """The threads of the merged launch's workgroups: those of the parts whose threads
    work together, else the fewest of any part."""
    together = [p.workgroup_size[0] for p in parts if not _thread_local(p)]
    return together[0] if together else min(p.workgroup_size[0] for p in parts)


def _thread_local(k: Kernel) -> bool:
    """Whether no thread of `k` waits for or reads from another: no barrier, warp
    reduction, threadgroup memory or tensor-core step. Its workgroups may then be cut to a
    smaller size (`_adapted`)."""
    if k.shared or any(isinstance(e, WarpReduce) for e in all_expressions(k.body)):
        return False
    waits = (Barrier, MmaSync, WarpgroupMma, CopyAsync, WaitAsync)
    return not any(isinstance(st, waits) for st in walk_statements(k.body))


def fuse(s: Schedule, kernels: list[Kernel], grouping: list[list[int]]) -> list[Kernel]:
    """The launches `grouping` (from `groups`) makes of schedule `s`'s `kernels`, named
    in order."""
    function = s.function
    out = []
    for index, group in enumerate(grouping):
        parts = [kernels[k] for k in group]
        if len(parts) == 1:
            (kernel,) = parts
            out.append(replace(kernel, name=f"{function}_{index}_{kernel.what}"))
            continue
        out.append(_merged(s, index, parts))
    return out


def _merged(s: Schedule, index: int, parts: list[Kernel]) -> Kernel:
    width = _width(parts)
    counts = [_units(p, width) for p in parts]
    total: Any = 0
    starts = []
    for count in counts:
        starts.append(total)
        total = sz.add(total, count)
    dispatch = sz.dispatch(total, {d.name: d for d in s.dims})
    body = Body()
    g = group_id(body, dispatch)
    shared, names = _arrays(parts)
    blocks: list[list[Stmt]] = []
    for k, (part, start, count) in enumerate(zip(parts, starts, counts, strict=True)):
        renamed = names[k]
        own = Var(f"$s{k}_unit", "u32")
        lets, builtins = _adapted(part, k, width, own)
        if k == len(parts) - 1 and over_dispatched(dispatch):
            # the groups past the total (a dispatch folded into x and y) fall in the
            # last part's branch: only its threads compute the total
            lets.insert(0, If(Binary(">=", own, size_ir(count), "bool"), [Return()]))
        rename = _Renamer(f"$s{k}_", renamed, builtins)
        blocks.append([Let(own, ibin("-", g, size_ir(start))), *lets, *rename.block(part.body)])
    tail = blocks[-1]
    for k in range(len(parts) - 2, -1, -1):
        end = size_ir(sz.add(starts[k], counts[k]))
        tail = [If(Binary("<", g, end, "bool"), blocks[k], tail)]
    for st in tail:
        body.emit(st)
    # a buffer two parts bind is read-only in both (`_conflict`)
    buffers = {b.name: b for p in reversed(parts) for b in p.buffers}
    order = [b.name for b in s.buffers]
    helpers: dict[str, Any] = {}
    for p in parts:
        for h in p.helpers:
            helpers.setdefault(h.name, h)
    whats = [p.what for p in parts]
    return Kernel(
        name=f"{s.function}_{index}_{'_'.join(whats)}",
        what=" + ".join(whats),
        workgroup_size=parts[0].workgroup_size if _two_d(parts[0]) else (width, 1, 1),
        groups=total,
        workgroups=dispatch,
        buffers=sorted(buffers.values(), key=lambda b: order.index(b.name)),
        uniform_fields=parts[0].uniform_fields,
        uses_uniform=any(isinstance(e, Uniform) for e in all_expressions(body.root)),
        shared=shared,
        body=body.root,
        helpers=list(helpers.values()),
        origins={k: v for p in parts for k, v in p.origins.items()},
        proofs=[x for p in parts for x in p.proofs],
        vectorized=[x for p in parts for x in p.vectorized],
        skipped=[x for p in parts for x in p.skipped],
    )


def _count(part: Kernel) -> Any:
    """The linear count of `part`'s workgroups (its dispatch's x * y where no builder
    said)."""
    return sz.product(list(part.workgroups)) if part.groups is None else part.groups


def _units(part: Kernel, width: int) -> Any:
    """The workgroups of `width` threads that run `part`'s."""
    return sz.mul(_count(part), part.workgroup_size[0] // width)


def _adapted(part: Kernel, k: int, width: int, unit: Var) -> tuple[list[Stmt], dict[str, Expr]]:
    """What part k's group and thread ids become in workgroup `unit` (of its own, from 0)
    of `width` threads: the statements that compute them and the builtins they replace.
    A wider thread-local part (`_thread_local`) has each of its workgroups cut in
    `own // width` pieces."""
    own = part.workgroup_size[0]
    if own == width:
        return [], {"group_x": unit, "group_y": u32(0)}
    group, lid = Var(f"$s{k}_group", "u32"), Var(f"$s{k}_local", "u32")
    ratio = own // width
    piece = ibin("*", ibin("%", unit, u32(ratio)), u32(width))
    lets: list[Stmt] = [
        Let(group, ibin("/", unit, u32(ratio))),
        Let(lid, ibin("+", piece, Builtin("local_x"))),
    ]
    return lets, {"group_x": group, "group_y": u32(0), "local_x": lid}


class _Renamer:
    """A part's statements with its variables prefixed, its threadgroup arrays renamed
    and its group builtins replaced. Expressions are shared subtrees (a DAG): each is
    rebuilt once."""

    def __init__(self, prefix: str, arrays: dict[str, str], builtins: dict[str, Expr]) -> None:
        self.prefix = prefix
        self.arrays = arrays
        self.builtins = builtins
        self.memo: dict[int, Any] = {}

    def block(self, body: list[Stmt]) -> list[Stmt]:
        return [self.node(st) for st in body]

    def node(self, obj: Any) -> Any:
        if isinstance(obj, (str, int, float, bool)) or obj is None:
            return obj
        key = id(obj)
        if key in self.memo:
            return self.memo[key][1]
        new = self._rebuild(obj)
        self.memo[key] = (obj, new)  # keep obj alive so its id is not reused
        return new

    def _rebuild(self, obj: Any) -> Any:
        if isinstance(obj, Builtin):
            return self.builtins.get(obj.name, obj)
        if isinstance(obj, Var):
            return Var(self.prefix + obj.name.lstrip("$"), obj.type)
        if isinstance(obj, list):
            return [self.node(x) for x in obj]
        if isinstance(obj, tuple):
            return tuple(self.node(x) for x in obj)
        assert is_dataclass(obj), type(obj)
        values = {}
        for f in fields(obj):
            value = getattr(obj, f.name)
            if f.name == "array" and isinstance(value, str):
                values[f.name] = self.arrays.get(value, value)
            else:
                values[f.name] = self.node(value)
        return type(obj)(**values)
