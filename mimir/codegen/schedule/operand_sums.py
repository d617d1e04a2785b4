"""Sums of a product's operand over its contraction axis, computed by the product's launch.

llm.c's `matmul_backward` returns `dout.T @ inp` and `dout.sum(axis=0)`: the product
contracts over the axis the bias sums over, so the workgroups that compute it already
stage every element of `dout`. Those of the first column of tiles (for a sum of the left
operand's rows) or of the first row (for one of the right operand's columns) add up what
they stage and store the sums (`Matmul.sums`, `kernels.matmul`), and the reduction needs
no launch of its own.
"""

from __future__ import annotations

from dataclasses import replace

import networkx as nx

from mimir.codegen import sizes as sz
from mimir.codegen.schedule.layout import MERGE_BUFFER_LIMIT
from mimir.codegen.schedule.plan import BufferSpec, Fold, Matmul, Plan, Reduce
from mimir.codegen.schedule.roots import fused_reads, root_kind
from mimir.codegen.schedule.state import State
from mimir.codegen.tensors import Evaluator
from mimir.dtypes import float32

# the reductions a tile may fold: the tile stages 0 past the operand's bounds, which adds
# nothing to a sum
_SUMS = ("sum", "mean")


def operand_side(ev: Evaluator, product: int, reduction: int) -> int | None:
    """Which operand of the product `reduction` sums over the contraction axis: 0 the left
    (its rows), 1 the right (its columns), None neither. The operand is the reduction's
    input itself or a transpose of it, of the product's rank (no broadcast batch), and the
    reduction keeps the operand's other axes in the operand's order; every value is
    float32, so the tile stages them as they are."""
    red = ev.reduction(reduction)
    if red.name not in _SUMS or red.acc != float32 or ev.dtype(red.x) != float32:
        return None
    if ev.dtype(product) != float32 or len(red.axes) != 1:
        return None
    x = ev.resolve(red.x)
    oshape = ev.shape(product)
    for side, operand in enumerate(ev.node(product)["inputs"][:2]):
        operand = ev.resolve(operand)
        shape = ev.shape(operand)
        if len(shape) != len(oshape) or ev.dtype(operand) != float32:
            continue
        if [sz.key(s) for s in shape[:-2]] != [sz.key(s) for s in oshape[:-2]]:
            continue
        if operand == x:
            perm = list(range(len(shape)))
        else:
            spec = ev.spec(operand)
            if spec is None or spec.kind != "transpose":
                continue
            if ev.resolve(ev.node(operand)["inputs"][0]) != x:
                continue
            perm = ev.permutation(operand)
        contracted = len(shape) - 1 if side == 0 else len(shape) - 2
        kept = [perm[k] for k in range(len(shape)) if k != contracted]
        if red.axes == [perm[contracted]] and kept == red.kept:
            return side
    return None


def _sum_plans(plans: list[Plan], root: int) -> list[Plan]:
    """The launches of reduction `root`: its `reduce` plan, and a `partial` one before it
    where the reduction is split."""
    return [p for p in plans if isinstance(p, Fold) and p.root == root]


def _foldable(ev: Evaluator, fold: Plan) -> bool:
    """Whether `fold` is a reduction's own launch, with nothing else in it, whose outputs
    hold one element per element of the reduction's result (its epilogue)."""
    if not isinstance(fold, Fold) or root_kind(ev.kg, fold.root) != "reduce":
        return False
    if fold.reductions or fold.elements or fold.positions:
        return False
    count = sz.key(ev.reduction(fold.root).outputs)
    return all(sz.key(sz.product(list(ev.shape(n)))) == count for n, _ in fold.outputs())


def _launch_reads(g: nx.DiGraph, plan: Plan, stored: set[int]) -> set[int]:
    return set().union(*(fused_reads(g, n, stored) for n, _ in plan.computed()))


def _fits(
    ev: Evaluator,
    g: nx.DiGraph,
    plans: list[Plan],
    params: set[int],
    product: Matmul,
    reduction: Reduce,
    launches: list[Plan],
) -> bool:
    """Whether the product's launch can compute `reduction` in place of its `launches`:
    nothing it reads is stored at or after the product's launch, the product's launch
    reads none of its values, no launch between the two reads them, and the product's
    launch binds no more buffers than every backend allows."""
    at = plans.index(product)
    written = {n: k for k, p in enumerate(plans) for n, _ in p.computed()}
    stored = params | set(written)
    x = ev.resolve(ev.reduction(reduction.root).x)
    if any(written.get(m, -1) >= at for m in fused_reads(g, x, stored)):
        return False
    values = {reduction.root, *(n for n, _ in reduction.outputs())}
    if values & _launch_reads(g, product, stored):
        return False
    first = min(plans.index(p) for p in launches)
    between = plans[first + 1 : at] if first < at else []
    if any(values & _launch_reads(g, p, stored) for p in between if p not in launches):
        return False
    names = {n: bufs[0] for p in plans for n, bufs in p.computed() if bufs}
    names.update({n: ev.node(n)["name"] for n in params})
    bound: set[str] = set()
    for n, bufs in [*product.computed(), *reduction.outputs()]:
        bound |= set(bufs)
        bound |= {names[m] for m in fused_reads(g, n, stored) if m != n and m in names}
    return len(bound) <= MERGE_BUFFER_LIMIT


def _drop_unused(plans: list[Plan], buffers: list[BufferSpec], tagged: dict, gone: set[str]):
    """The scratch, partials and counters of the launches no longer planned, where no plan
    left names them."""
    named: set[str] = set()
    for p in plans:
        for _, bufs in p.computed():
            named |= set(bufs)
        for attr in ("partials", "counter", "positions"):
            if getattr(p, attr, None):
                named.add(getattr(p, attr))
        for _, fold in getattr(p, "sums", []):
            named |= set(fold.writes)
    unused = {b.name for b in buffers if b.role == "scratch" and b.name in gone} - named
    buffers[:] = [b for b in buffers if b.name not in unused]
    for name in unused:
        tagged.pop(name, None)


def fold_operand_sums(st: State) -> State:
    """Each sum (or mean) of a float32 `matmul` operand over the contraction axis, a
    reduction's own launches (a `reduce`, after a `partial` where it is split), computed by
    the product's launch instead (`Matmul.sums`), where `_fits` holds. Not in a function
    that updates an `InOut` buffer, whose launches' order the reads then depend on."""
    if st.in_place:
        return st
    ev, g = st.ev, st.g
    plans, buffers, tagged = list(st.plans), list(st.buffers), dict(st.tagged_sizes)
    params = {n for n in st.node_buffers if ev.node(n)["kind"] == "param"}
    for product in [p for p in plans if isinstance(p, Matmul) and p.paired is None]:
        for plan in list(plans):
            if not isinstance(plan, Reduce) or plan not in plans or not _foldable(ev, plan):
                continue
            side = operand_side(ev, product.root, plan.root)
            if side is None:
                continue
            launches = _sum_plans(plans, plan.root)
            if not all(_foldable(ev, p) for p in launches):
                continue
            if not _fits(ev, g, plans, params, product, plan, launches):
                continue
            gone = set()
            for p in launches:
                gone |= {b for _, bufs in p.computed() for b in bufs}
                gone |= {getattr(p, a) for a in ("partials", "counter") if getattr(p, a)}
                plans.remove(p)
            product.sums.append((side, Reduce(plan.node, list(plan.writes), plan.root)))
            _drop_unused(plans, buffers, tagged, gone)
    return replace(st, plans=plans, buffers=buffers, tagged_sizes=tagged)
