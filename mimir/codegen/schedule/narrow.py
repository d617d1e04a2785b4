"""Passes over the plans of `narrow` launches: the softmax of their rows and the row
reductions they fold."""

from __future__ import annotations

from dataclasses import replace

import networkx as nx

from mimir.codegen import sizes as sz
from mimir.codegen.schedule.layout import MERGE_BUFFER_LIMIT, softmax_input
from mimir.codegen.schedule.plan import BufferSpec, Narrow, Plan, Reduce, Row, Softmax
from mimir.codegen.schedule.roots import (
    FUSIBLE,
    ROW_FOLDS,
    fused_reads,
    op_kind,
    read_by,
    root_kind,
)
from mimir.codegen.schedule.state import State
from mimir.codegen.tensors import Evaluator
from mimir.dtypes import float32


def _narrow_softmax(
    ev: Evaluator, g: nx.DiGraph, plans: list[Plan], writes: dict[int, list[str]], buffers: list
) -> None:
    """A float32 softmax (or log-softmax) over the rows of a `narrow` launch's result, its
    only reader (a classifier: `(h @ w + b).softmax()`, w H x 5): the
    `narrow` launch normalises each row it computes (`Narrow.softmax`), and writes the
    softmax's result instead of storing the logits in scratch for a softmax launch."""

    narrow = {p.node: p for p in plans if isinstance(p, Narrow) and not p.also}
    for plan in list(plans):
        if not isinstance(plan, Softmax):
            continue
        x, axis = softmax_input(ev, plan.root)
        x = ev.resolve(x)
        logits = narrow.get(x)
        if logits is None or axis != len(ev.shape(x)) - 1 or ev.dtype(x) != float32:
            continue
        if ev.dtype(plan.root) != float32 or not read_by(ev, g, x, plan.root):
            continue
        # the logits stay an output where they are one (`return logits, logits.softmax()`)
        scratch = {b.name for b in buffers if b.role == "scratch"}
        kept = [name for name in writes[x] if name not in scratch]
        buffers[:] = [b for b in buffers if b.name in kept or b.name not in writes[x]]
        writes[x] = kept
        logits.node, logits.writes, logits.softmax = plan.node, plan.writes, plan.root
        logits.also = [(x, kept)] if kept else []
        plans.remove(plan)


# ... and of all its sums over the lanes of a row: the J products and the row reductions
# it folds (`narrow_row_reductions`), each a register in every thread
NARROW_SUMS = 24


def _narrow_row_reductions(
    ev: Evaluator,
    g: nx.DiGraph,
    plans: list[Plan],
    node_buffers: dict[int, str],
    writes: dict[int, list[str]],
    buffers: list[BufferSpec],
) -> None:
    """Sums, means, maxes and mins over the last axis of a tensor of the shape of a
    `narrow` product's left operand (`h.sum(axis=1)` beside `h @ w`; `z.max(axis=1)` beside
    `z.relu() @ w2`, z an inline product), a `reduce` launch or a `row` launch that writes
    only values with one element per row (`h.max(axis=1) - h.min(axis=1)`), are folded by
    the `narrow` launch in its loop over k, where it computes that row anyway
    (`Narrow.folds`): one read of h, and no launch of their own. Only when everything they
    read is a parameter or is stored by a launch before the `narrow` one, nothing the
    `narrow` launch reads is their value, and no launch between the two reads it; and
    while the launch combines at most `NARROW_SUMS` values over each row's lanes."""
    params = {n for n in node_buffers if ev.node(n)["kind"] == "param"}
    in_place = {b.name for b in buffers if b.role == "inout"}
    for narrow in [p for p in plans if isinstance(p, Narrow)]:
        left = ev.resolve(ev.node(narrow.root)["inputs"][0])
        row = [sz.key(s) for s in ev.shape(left)]
        rows = sz.key(sz.product(list(ev.shape(left)[:-1])))
        sums = ev.shape(narrow.root)[-1]
        for plan in list(plans):
            roots = _row_folds(ev, plan, row, rows)
            if not roots or sums + len(roots) > NARROW_SUMS:
                continue
            if any(set(bufs) & in_place for _, bufs in plan.outputs()):
                continue  # an `InOut` update: left to `write_in_place_is_safe`'s launches
            if _folds_into(ev, g, plans, params, narrow, plan, roots):
                sums += len(roots)
                narrow.folds.append(plan)
                plans.remove(plan)
                _drop_unread_scratch(g, plans, narrow, plan, params, writes, buffers)


def _drop_unread_scratch(
    g: nx.DiGraph,
    plans: list[Plan],
    narrow: Narrow,
    plan: Plan,
    params: set[int],
    writes: dict[int, list[str]],
    buffers: list[BufferSpec],
) -> None:
    """A folded reduction's scratch that only the `narrow` launch read (its epilogue, which
    now has the value in registers) is not written, nor allocated."""
    stored = params | {n for p in plans for n, _ in p.computed()}
    read = set().union(*(_launch_reads(g, p, stored) for p in plans if p is not narrow))
    scratch = {b.name for b in buffers if b.role == "scratch"}
    for n, bufs in plan.outputs():
        if n in read:
            continue
        unread = [b for b in bufs if b in scratch]
        bufs[:] = [b for b in bufs if b not in unread]
        writes[n] = [b for b in writes.get(n, []) if b not in unread]
        buffers[:] = [b for b in buffers if b.name not in unread]


def _row_folds(ev: Evaluator, plan: Plan, row: list[str], rows: str) -> list[int]:
    """The reductions of `plan` when a `narrow` launch over rows of the shape `row` can
    fold them (`narrow_row_reductions`), else none."""
    if isinstance(plan, Reduce):
        if plan.partials or plan.counter or plan.positions or plan.reductions or plan.elements:
            return []
        roots = [plan.root]
    elif isinstance(plan, Row):
        if plan.total is not None or plan.wide:
            return []
        roots = plan.roots
    else:
        return []
    for r in roots:
        if root_kind(ev.kg, r) != "reduce":
            return []
        red = ev.reduction(r)
        if red.name not in ROW_FOLDS or tuple(red.axes) != (len(red.shape) - 1,):
            return []
        if [sz.key(s) for s in red.shape] != row:
            return []
    # a value with one element per row, each (`keepdims` or not)
    for n, _ in plan.outputs():
        if sz.key(sz.product(list(ev.shape(n)))) != rows:
            return []
    return roots


def _folds_into(
    ev: Evaluator,
    g: nx.DiGraph,
    plans: list[Plan],
    params: set[int],
    narrow: Narrow,
    plan: Plan,
    roots: list[int],
) -> bool:
    """Whether the `narrow` launch can compute `plan`, the reductions `roots`, in its
    stead (`narrow_row_reductions`)."""
    at, here = plans.index(narrow), plans.index(plan)
    written = {n: k for k, p in enumerate(plans) for n, _ in p.computed()}
    stored = params | set(written)
    # what the reductions read: parameters, or values stored before the `narrow` launch
    for r in roots:
        x = ev.resolve(ev.reduction(r).x)
        if any(written.get(m, -1) >= at for m in fused_reads(g, x, stored)):
            return False
    # the `narrow` launch reads their values only in its epilogue, at its own rows; no
    # launch between the two reads them when the reductions came first
    values = {*roots, *(n for n, _ in plan.outputs())}
    region = _launch_reads(g, narrow, stored)
    if values & region and not _read_at_own_rows(ev, g, narrow, values, region):
        return False
    if any(values & _launch_reads(g, other, stored) for other in plans[here + 1 : at]):
        return False
    # and the `narrow` launch binds no more buffers than every backend allows
    names = {n: bufs[0] for p in plans for n, bufs in p.computed() if bufs}
    names.update({n: ev.node(n)["name"] for n in params})
    bound: set[str] = set()
    for n, bufs in [*narrow.computed(), *plan.computed()]:
        bound |= set(bufs)
        bound |= {names[m] for m in fused_reads(g, n, stored) if m != n and m in names}
    return len(bound) <= MERGE_BUFFER_LIMIT


def _launch_reads(g: nx.DiGraph, plan: Plan, stored: set[int]) -> set[int]:
    """The nodes the launch of `plan` walks through to compute what it stores, stopping
    at the `stored` values (`fused_reads` of each)."""
    return set().union(*(fused_reads(g, n, stored) for n, _ in plan.computed()))


def _read_at_own_rows(
    ev: Evaluator, g: nx.DiGraph, narrow: Narrow, values: set[int], region: set
) -> bool:
    """Whether the `narrow` launch reads the per-row `values` only where lane 0 writes a
    row's results, each row its own value (`h @ w + h.sum(axis=1, keepdims=True)`):
    every node from them to what it stores is element-wise, of the shape (..., rows, 1)
    or (..., rows, J), and none is the product's left operand or its softmax."""
    shape = ev.shape(narrow.root)
    lead, width = [sz.key(s) for s in shape[:-1]], sz.key(shape[-1])
    between = set().union(*(nx.descendants(g, v) for v in values)) & region
    product = nx.ancestors(g, narrow.root) | {narrow.root}  # computed at each k, before
    for m in {*values, *between}:
        if m in product:
            return False
        if not (m in values and op_kind(ev.kg, m) == "reduce") and op_kind(ev.kg, m) not in FUSIBLE:
            return False
        keys = [sz.key(s) for s in ev.shape(m)]
        if keys[:-1] != lead or keys[-1] not in ("1", width):
            return False
    return True


def fold_softmax(st: State) -> State:
    """The pass of `_narrow_softmax`: a softmax over a `narrow` launch's rows, in it."""
    plans, writes, buffers = list(st.plans), dict(st.writes), list(st.buffers)
    _narrow_softmax(st.ev, st.g, plans, writes, buffers)
    return replace(st, plans=plans, writes=writes, buffers=buffers)


def fold_row_reductions(st: State) -> State:
    """The pass of `_narrow_row_reductions`: row reductions a `narrow` launch folds."""
    plans, writes, buffers = list(st.plans), dict(st.writes), list(st.buffers)
    _narrow_row_reductions(st.ev, st.g, plans, st.node_buffers, writes, buffers)
    return replace(st, plans=plans, writes=writes, buffers=buffers)
