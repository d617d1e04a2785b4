"""The first passes of `schedule()`: from the proven graph to one plan per launch.

`find_outputs` (what the function returns and which `InOut` parameters it updates),
`fuse_epilogues` (each root's chain of element-wise ops, which its kernel applies before
storing), `allocate_buffers` (parameters and outputs), `group_rows` (row launches and the
whole reductions that end them), `plan_launches` (a plan per node a launch writes: its
kind, its scratch buffers, a split reduction's two launches or one), `record_stored`
(where each stored value can be read).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import networkx as nx

from mimir.codegen import sizes as sz
from mimir.codegen.refusal import CANNOT_SCHEDULE, RefusalError
from mimir.codegen.schedule.layout import (
    CHUNK,
    COLUMNS,
    arg_reduction,
    column_layout,
    column_slabs,
    row_launch_groups,
    row_shape,
    slab_count,
    split,
)
from mimir.codegen.schedule.plan import FOLDS, ROOTED, BufferSpec, Elementwise, Partial, Row
from mimir.codegen.schedule.roots import FUSIBLE, op_kind, root_kind
from mimir.codegen.schedule.rows import RowGroup, groups_with_totals
from mimir.codegen.schedule.state import State
from mimir.codegen.tensors import Evaluator
from mimir.constraints.checker import ScalarVal, TensorVal, TupleVal
from mimir.dtypes import DType, uint32
from mimir.parse.graph import KernelGraph
from mimir.parse.module import ScalarAnnotation, TensorAnnotation


def find_outputs(st: State) -> State:
    """What the function returns, named as the manifest names it, and the new value of
    each `InOut` parameter it assigns (stored into the parameter's own buffer)."""
    kg, g, ev = st.kg, st.g, st.ev
    returns = [n for n in g.nodes if kg.node(n)["kind"] == "return"]
    writebacks = [n for n in g.nodes if kg.node(n)["kind"] == "writeback"]
    if not returns and not writebacks:
        raise RefusalError(CANNOT_SCHEDULE, f"`{kg.name}` returns nothing", kg.kernel.span)
    outputs = _outputs(ev, returns[0]) if returns else []
    updates: list[tuple[int, str]] = []
    for wb in writebacks:
        for name, value in zip(kg.node(wb)["names"], kg.node(wb)["inputs"], strict=True):
            value = ev.resolve(value)
            if not (kg.node(value)["kind"] == "param" and kg.node(value)["name"] == name):
                updates.append((value, name))
    if not outputs and not updates:
        raise RefusalError(
            CANNOT_SCHEDULE,
            f"`{kg.name}` returns nothing and assigns none of its `InOut` parameters",
            kg.kernel.span,
        )
    live = set().union(*(nx.ancestors(g, n) for n in [*returns, *writebacks]))
    return replace(st, outputs=outputs, updates=updates, live=live)


def fuse_epilogues(st: State) -> State:
    """Each root's epilogue: following its result through a chain of element-wise ops of
    the same shape, each the only reader of the one before, the last node of the chain is
    what the root's kernel writes (bias and activation after a matmul); after a matmul, a
    chain of transposes and reshapes on to an output goes on it too (`_layout_tail`,
    recorded in `folded`)."""
    kg, ev = st.kg, st.ev
    # who reads each tensor node (through tuple unpacking)
    readers: dict[int, list[int]] = {}
    for c in sorted(st.live):
        node = kg.node(c)
        if node["kind"] in ("item", "tuple", "return"):
            continue
        for i in node["inputs"]:
            t = ev.resolve(i)
            if isinstance(st.kernel.values[t], TensorVal):
                readers.setdefault(t, []).append(c)
    output_nodes = {n for n, _ in [*st.outputs, *st.updates]}
    epilogue: dict[int, int] = {}
    claimed: set[int] = set()
    folded: dict[int, int] = {}
    for r in sorted(n for n in st.live if root_kind(kg, n)):
        cur = r
        while cur not in output_nodes:
            users = set(readers.get(cur, []))
            if len(users) > 1:  # `where(y > 0, y, 0.01 * y)`: read again where they meet
                joined = _joined(ev, kg, readers, cur, claimed, output_nodes)
                if joined is None:
                    break
                sink, region = joined
                claimed |= region
                cur = sink
                continue
            if len(users) != 1:
                break
            (c,) = users
            if c in claimed:
                break
            if op_kind(kg, c) == "reshape" and _flat_reshape(ev, kg, r, c, cur):
                pass  # a reduction's element o is the reshaped result's element o
            elif op_kind(kg, c) not in FUSIBLE:
                break
            elif [sz.key(s) for s in ev.shape(c)] != [sz.key(s) for s in ev.shape(cur)]:
                break
            claimed.add(c)
            cur = c
        if root_kind(kg, r) == "matmul":
            end = _layout_tail(kg, readers, cur, claimed, st)
            if end is not None:
                folded[end] = cur
                cur = end
        epilogue[r] = cur
    return replace(st, epilogue=epilogue, folded=folded)


# the ops that only re-index a value: each element of the result is one element of the
# operand, and every element of the operand is one of the result
LAYOUT = ("transpose", "reshape")


def _layout_tail(
    kg: KernelGraph, readers: dict[int, list[int]], cur: int, claimed: set[int], st: State
) -> int | None:
    """Where a product's epilogue value `cur` is returned through layout ops alone
    (`(a @ b).T`, `o.transpose(0, 2, 1, 3).reshape(B, T, H * D)`): the returned node,
    when each op of the chain is the only reader of the one before; the product's launch
    then stores each element straight at its position in the output (`KernelContext.write`)
    instead of a second launch copying it there. None where the chain has another reader
    (the value before the layout ops is then stored, as it is), ends anywhere but in an
    output, or in an `InOut` update (whose parameter the product may still read)."""
    returned = {n for n, _ in st.outputs} - {n for n, _ in st.updates}
    chain: list[int] = []
    end = cur
    while end not in returned:
        users = set(readers.get(end, []))
        if len(users) != 1:
            return None
        (u,) = users
        if u in claimed or op_kind(kg, u) not in LAYOUT:
            return None
        chain.append(u)
        end = u
    if not chain:
        return None
    claimed.update(chain)
    return end


# the most ops `_joined` takes into one epilogue before it gives up
JOINED_OPS = 64


def _joined(
    ev: Evaluator,
    kg: KernelGraph,
    readers: dict[int, list[int]],
    cur: int,
    taken: set[int],
    outputs: set[int],
) -> tuple[int, set[int]] | None:
    """Where the several readers of epilogue value `cur` join again: (the node, the ops
    after `cur` up to it) when some element-wise ops of `cur`'s shape, read by nothing
    else, lead from `cur` to that one node alone (`where(y > 0, y, 0.01 * y)`,
    `maximum(y, 0.01 * y)`, a GELU written out), so it is computed from `cur` at each
    position; None where another launch or an output reads an op in between."""
    key = [sz.key(s) for s in ev.shape(cur)]
    region = {cur}
    while len(region) <= JOINED_OPS:
        more = {u for n in region for u in readers.get(n, []) if u not in region}
        add = {
            u
            for u in more
            if u not in taken
            and op_kind(kg, u) in FUSIBLE
            and [sz.key(s) for s in ev.shape(u)] == key
        }
        if not add:
            return None
        region |= add
        open_ = [
            n for n in region if n in outputs or any(u not in region for u in readers.get(n, []))
        ]
        if len(open_) == 1 and open_[0] != cur:
            (sink,) = open_
            return sink, region - {cur}
        if cur in open_:  # read by another launch: stored whatever follows
            return None
    return None


def allocate_buffers(st: State) -> State:
    """A buffer per tensor parameter, a uniform field per scalar one, and one per output;
    an `InOut` update is stored into its parameter's buffer."""
    new = replace(st, taken=set(st.taken), buffers=[], node_buffers={}, scalar_params=[])
    kg, ev = st.kg, st.ev
    for n in sorted(st.g.nodes):
        node = kg.node(n)
        if node["kind"] != "param":
            continue
        ann = node["annotation"]
        new.taken.add(node["name"])
        if isinstance(ann, TensorAnnotation):
            role = "inout" if ann.inout else "input"
            spec = BufferSpec(node["name"], role, ann.dtype, ev.shape(n), ann.value_range)
            new.buffers.append(spec)
            new.node_buffers[n] = node["name"]
        elif isinstance(ann, ScalarAnnotation):
            new.scalar_params.append((node["name"], "i32" if ann.kind == "int" else "f32"))
    writes: dict[int, list[str]] = {}
    for n, name in st.outputs:
        name = new.unique(name)
        new.buffers.append(BufferSpec(name, "output", ev.dtype(n), ev.shape(n)))
        writes.setdefault(n, []).append(name)
    for n, name in st.updates:
        writes.setdefault(n, []).append(name)
    new.writes = writes
    return new


def group_rows(st: State) -> State:
    """The row launches (`schedule.rows`), and which whole reductions of a row launch's
    per-row value end that launch (`Row.total`): where the target can hand off between
    workgroups and some row exists, else the value goes through scratch."""
    rows, per_row = groups_with_totals(st.ev, st.kg, st.writes, st.epilogue)
    fused = _fused_totals(st, rows, per_row)
    # a group placed after a whole reduction it offers a value to must end in it; else
    # the groups placed before every reader, as without that
    for place, group in rows.items():
        ended = {st.epilogue[r] for x, r in fused.items() if x in group.outputs}
        if any(t <= place and t not in ended for ts in group.readers.values() for t in ts):
            rows, per_row = groups_with_totals(st.ev, st.kg, st.writes, st.epilogue, False)
            fused = _fused_totals(st, rows, per_row)
            break
    return replace(st, rows=rows, per_row=per_row, fused=fused)


def _fused_totals(st: State, rows: dict[int, RowGroup], per_row: dict[int, int]) -> dict[int, int]:
    """The whole reductions of per-row values that end their row launch (`group_rows`)."""
    ev = st.ev
    fused: dict[int, int] = {}  # the per-row value -> the whole reduction
    for x, r in per_row.items():
        place = next(p for p, group in rows.items() if x in group.outputs)
        rowcount = sz.product(list(row_shape(ev, rows[place].roots[0])[:-1]))
        nonempty = (sz.lower_bound(rowcount, st.declared) or 0) >= 1
        # one value per row (`reductions.whole_of_rows` hands a row's one value on), not a
        # value at every element of a row (`x.softmax(axis=-1).max()`: through scratch)
        one_per_row = sz.key(sz.product(list(ev.shape(x)))) == sz.key(rowcount)
        alone = not set(rows[place].outputs) & set(fused)  # one whole reduction a launch
        # with no buffer for the per-row value, only the group and the reduction read it
        private = rows[place].readers[x] <= {st.epilogue[r]}
        in_place_out = set(st.writes.get(st.epilogue[r], [])) & st.in_place
        # the reduction's epilogue runs in the row launch's last workgroup, so what it reads
        # from other launches must not come from this launch's own outputs
        acyclic = not _epilogue_reads_own_rows(
            st.kg.graph, rows[place].outputs, x, r, st.epilogue[r]
        )
        if (
            st.target.one_launch and one_per_row and nonempty and alone and private
            and acyclic and not in_place_out
        ):  # fmt: skip
            fused[x] = r
    return fused


def _epilogue_reads_own_rows(
    g: nx.DiGraph, outputs: list[int], x: int, root: int, end: int
) -> bool:
    """Whether the epilogue of whole reduction `root` (of the row group's per-row value
    `x`, ending at node `end`) reads a value computed from the group's outputs other than
    through the reduction itself (`(m * w).sum() - (m.sum(axis=0)).min()`): a launch that
    reads the row launch's outputs would have to run both before and after it."""
    # computed by the row launch itself: x and what it is made of, and the epilogue chain
    inside = nx.ancestors(g, x) | {x} | (nx.descendants(g, root) & nx.ancestors(g, end))
    inside |= {root, end}
    from_rows = set().union(*(nx.descendants(g, o) | {o} for o in outputs))
    return bool((nx.ancestors(g, end) & from_rows) - inside)


def plan_launches(st: State) -> State:
    """A plan for each node a launch writes, in the order of the graph: a row group's
    launch, a root's (a reduction over leading axes or to one element split over
    workgroups), or an element-wise one; each value no output holds gets a scratch
    buffer."""
    new = replace(
        st,
        plans=[],
        buffers=list(st.buffers),
        writes=dict(st.writes),
        tagged_sizes=dict(st.tagged_sizes),
        taken=set(st.taken),
        scratch=0,
    )
    roots_by_target = {p: r for r, p in st.epilogue.items()}
    for r in st.fused.values():
        roots_by_target.pop(st.epilogue[r])
    for group in st.rows.values():
        for r in group.roots:
            roots_by_target.pop(st.epilogue[r], None)
    by_row = {o for group in st.rows.values() for o in group.outputs} - set(st.rows)
    targets = sorted(set(st.writes) | set(roots_by_target) | set(st.per_row))
    targets = sorted(set(targets) | {st.epilogue[r] for r in st.fused.values()})
    # a whole reduction a row launch ends is planned after that launch, wherever it is
    # in the source (`where(kept, loss, 0.0).sum()` returned before the gradient)
    ends = {
        st.epilogue[st.fused[x]]: place
        for place, group in st.rows.items()
        for x in group.outputs
        if x in st.fused
    }
    targets.sort(key=lambda p: (ends.get(p, p), p in ends, p))
    totals: dict[int, Row] = {}  # a fused whole reduction's target -> its row launch
    writes = new.writes
    for p in targets:
        if p in st.fused:
            writes[p] = []  # folded into its whole reduction's partials, never stored
        elif p not in writes:
            name = new.scratch_name()
            new.buffers.append(BufferSpec(name, "scratch", st.ev.dtype(p), st.ev.shape(p)))
            writes[p] = [name]
        if p in totals:
            totals[p].total_outputs = [(p, writes[p])]
            continue  # the row launch before it writes it
        if p in by_row:
            continue  # its group's launch writes it
        if p in st.rows:
            _plan_row_group(new, p, totals)
            continue
        r = roots_by_target.get(p)
        if r is None:
            new.plans.append(Elementwise(p, writes[p]))
        elif not _plan_split(new, p, r):
            new.plans.append(ROOTED[root_kind(st.kg, r) or ""](p, writes[p], r))
    return replace(new, targets=targets)


def _plan_row_group(st: State, p: int, totals: dict[int, Row]) -> None:
    """The `row` launch of the group placed at `p`, and the whole reduction that ends it
    (`Row.total`): each workgroup's share in `partials`, a counter to find the last."""
    group, ev, writes = st.rows[p], st.ev, st.writes
    # a per-row value a whole reduction folds is no output of its own
    stored = [o for o in group.outputs if o not in st.fused]
    first, *more = stored or group.outputs
    values = [st.epilogue[r] for r in group.roots]
    also = [(o, writes[o]) for o in more]
    plan = Row(first, writes[first], also=also, roots=group.roots, row_values=values,
               wide=sorted(group.wide))  # fmt: skip
    st.plans.append(plan)
    for x in set(group.outputs) & set(st.fused):
        total = st.fused[x]
        plan.total = total
        totals[st.epilogue[total]] = plan
        partials, counter = st.scratch_name(), st.scratch_name()
        count = row_launch_groups(ev, group.roots)
        st.buffers.append(st.handoff_buffer(partials, ev.reduction(total).acc, count))
        st.buffers.append(BufferSpec(counter, "scratch", uint32, (1,), zero=True))
        plan.partials, plan.counter = partials, counter


def _plan_split(st: State, p: int, r: int) -> bool:
    """The plans of reduction `r` (written at `p`) where it is split over workgroups: over
    leading axes, in slabs of rows combined by the last workgroup of each column tile or a
    second launch; to one element, in chunks. False where it is not split."""
    kind, ev, declared = root_kind(st.kg, r), st.ev, st.declared
    if kind not in ("reduce", "moments", "argreduce"):
        return False
    one_launch = st.target.one_launch
    if column_layout(red := ev.reduction(r)) and column_slabs(red, declared):
        outer, _, inner = column_layout(red) or ()
        slabs = [outer, slab_count(red, declared), inner]
        tiles = sz.product([outer, sz.cdiv(inner, COLUMNS)])
        _split_plans(st, kind, p, r, slabs, tiles if one_launch else None)
        return True
    if split(ev.reduction(r)):
        # one launch needs a workgroup to find itself last: not for a count that can be 0
        # (no workgroup then; the `reduce` launch still writes the identity)
        nonempty = (sz.lower_bound(ev.reduction(r).count, declared) or 0) >= 1
        chunks = [sz.cdiv(ev.reduction(r).count, CHUNK)]
        _split_plans(st, kind, p, r, chunks, 1 if one_launch and nonempty else None)
        return True
    return False


def _split_plans(st: State, kind: str, p: int, r: int, parts: list[Any], counters: Any) -> None:
    """The plans of a reduction split over workgroups (partials as many as the product of
    `parts`: a chunk's each, or a column slab's): one launch handing off with `counters`
    counters (`kernels.handoff.last_workgroup`), or, with None, `partial` then the plan
    that combines."""
    red = arg_reduction(st.ev, r) if kind == "argreduce" else st.ev.reduction(r)
    # a `var`'s partials are sums, then squared deviations from their mean
    halves = [2] if kind == "moments" else []
    handed = counters is not None
    partials = _scratch_buffer(st, red.acc, sz.product([*halves, *parts]), handed=handed)
    # an argmax's extrema, and the first position of each
    positions = (
        _scratch_buffer(st, uint32, sz.product(parts), handed=handed)
        if kind == "argreduce"
        else None
    )
    writes = st.writes[p]
    if handed:
        counter = _scratch_buffer(st, uint32, counters, zero=True)
        plan = FOLDS[kind](p, writes, r, partials=partials, counter=counter, positions=positions)
        st.plans.append(plan)
        return
    st.plans.append(Partial(r, [partials], r, positions=positions))
    st.plans.append(FOLDS[kind](p, writes, r, partials=partials, positions=positions))


def _scratch_buffer(
    st: State, dtype: DType, size: Any, zero: bool = False, handed: bool = False
) -> str:
    """A new scratch buffer of `size` elements; `handed`: one a one-launch reduction
    hands off (`State.handoff_buffer`)."""
    name = st.scratch_name()
    spec = BufferSpec(name, "scratch", dtype, (size,), zero=zero)
    st.buffers.append(st.handoff_buffer(name, dtype, size) if handed else spec)
    return name


def record_stored(st: State) -> State:
    """Where each value a launch stores can be read: its first buffer."""
    node_buffers = dict(st.node_buffers)
    for p in st.targets:
        if st.writes[p]:
            node_buffers.setdefault(p, st.writes[p][0])
    return replace(st, node_buffers=node_buffers)


def _outputs(ev: Evaluator, ret: int) -> list[tuple[int, str]]:
    kg = ev.kg
    (value,) = kg.node(ret)["inputs"]
    value = ev.resolve(value)
    v = ev.values[value]
    if isinstance(v, TensorVal):
        return [(value, "out")]
    if isinstance(v, TupleVal) and kg.node(value)["kind"] == "tuple":
        items = [ev.resolve(i) for i in kg.node(value)["inputs"]]
        for i in items:
            if not isinstance(ev.values[i], TensorVal):
                raise ev.refuse(i, f"the kernel returns `{kg.node(i)['text']}`, not a tensor")
        returns = kg.returns
        names = getattr(returns, "names", None) or [f"out{k}" for k in range(len(items))]
        return list(zip(items, names, strict=True))
    what = "a scalar" if isinstance(v, ScalarVal) else f"`{kg.node(value)['text']}`"
    raise ev.refuse(value, f"the kernel returns {what}; a compiled kernel must return tensors")


def _flat_reshape(ev: Evaluator, kg: KernelGraph, root: int, c: int, cur: int) -> bool:
    """Whether a root's epilogue may go on through the reshape `c` of `cur`: to another
    rank (the written element's flat offset is the same in both shapes,
    `KernelContext._position`; a reshape to the same rank is left to its own launch),
    after a reduction or a matmul (the rows and columns of an einsum's merged letters
    split again, `'npk,kmd->npmd'`)."""
    same_rank = len(ev.shape(c)) == len(ev.shape(cur))
    kinds = ("reduce", "moments", "argreduce", "matmul")
    return not same_rank and root_kind(kg, root) in kinds
