"""Scheduling a proven kernel graph into launches (DESIGN.md sections 1 and 4).

The graph's ops fall into two families:

- *roots*: `@` (matmul; `narrow` for a right operand at most `NARROW` columns wide),
  reductions (`sum mean max min`), `softmax` / `log_softmax` and scans (`cumsum cumprod`).
  Each needs its own kernel, with its own thread layout (a tiled matmul, a fold per row,
  one workgroup per reduced element or per row).
- everything else: element-wise ops, casts, creation and layout (transpose,
  reshape, slicing), and a `@` by a small matrix parameter (`small_matmul`: each
  element a dot product of at most `SMALL_MATMUL` terms; `inline_product`: one of at
  most `SMALL_MATMUL` rows that only a `narrow` launch reads). These never get a kernel
  of their own: they are computed inside whichever kernel reads them
  (`mimir.codegen.tensors`).

A root's result is *fused into its epilogue*: following it through a chain of
element-wise ops of the same shape (each the only reader of the previous
one), the last node of the chain is what the root's kernel writes (bias and
activation after a matmul, `* scale` after a reduction). What a kernel writes
is *materialised*: a function output, or a `scratch` buffer read by a later
kernel. Outputs that are not a root's epilogue get an element-wise kernel.

Kernels launch in the order of the graph node they write; a kernel only reads
buffers written by nodes that come before it in source order, so this order
respects every dependency. Three refinements: adjacent element-wise launches of
one shape that do not read each other merge into one launch with several
outputs; outputs computed from last-axis reductions of rows of one shape (layer
norm, and its mean and 1/std as outputs) are one `row` launch (`schedule.rows`);
and a reduction to a single element of a large or symbolic count runs as two
launches (`partial` over many workgroups into a scratch buffer, then `reduce`), or as
one where the target can hand off between workgroups; a whole reduction of a value a
`row` launch computes per row ends that launch there (`Row.total`).
"""

from __future__ import annotations

from typing import Any

import networkx as nx

from mimir.codegen import sizes as sz
from mimir.codegen.refusal import CANNOT_SCHEDULE, RefusalError
from mimir.codegen.schedule.attention import fuse_attention, fuse_scores_softmax, pair_products
from mimir.codegen.schedule.inplace import write_in_place_is_safe
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
from mimir.codegen.schedule.limits import kernel_dims, refuse_bfloat16, refuse_oversized
from mimir.codegen.schedule.merge import merge_elementwise, merge_whole_reductions
from mimir.codegen.schedule.narrow import narrow_row_reductions, narrow_softmax
from mimir.codegen.schedule.plan import (
    FOLDS,
    ROOTED,
    BufferSpec,
    Elementwise,
    Fold,
    Partial,
    Plan,
    Row,
    Schedule,
)
from mimir.codegen.schedule.roots import FUSIBLE, op_kind, root_kind
from mimir.codegen.schedule.rows import groups_with_totals
from mimir.codegen.tensors import Evaluator
from mimir.constraints.checker import ScalarVal, TensorVal, TupleVal
from mimir.dtypes import DType, uint32
from mimir.parse.module import ScalarAnnotation, TensorAnnotation


def schedule(
    kernel: Any, one_launch: bool = False, vector_views: bool = False, tagged: bool = False
) -> Schedule:
    """The launches of `kernel`. `one_launch`: the target has atomics that return the old
    value and a way to hand values between workgroups, so a split reduction is one launch
    (module docstring): a device-scope fence, or with `tagged` values published in tagged
    atomic words (`ir.Publish`; WGSL). `vector_views`: the target may read one buffer 4
    wide and one element at a time (`Backend.vector_views`)."""

    kg = kernel.graph
    ev = Evaluator(kernel, None, {})  # type: ignore[arg-type]
    g: nx.DiGraph = kg.graph
    returns = [n for n in g.nodes if kg.node(n)["kind"] == "return"]
    writebacks = [n for n in g.nodes if kg.node(n)["kind"] == "writeback"]
    if not returns and not writebacks:
        raise RefusalError(CANNOT_SCHEDULE, f"`{kg.name}` returns nothing", kg.kernel.span)
    outputs = _outputs(ev, returns[0]) if returns else []
    # `InOut` parameters: the final value of each is stored into the parameter's own buffer.
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

    # Who reads each tensor node (through tuple unpacking).
    readers: dict[int, list[int]] = {}
    for c in sorted(live):
        node = kg.node(c)
        if node["kind"] in ("item", "tuple", "return"):
            continue
        for i in node["inputs"]:
            t = ev.resolve(i)
            if isinstance(kernel.values[t], TensorVal):
                readers.setdefault(t, []).append(c)

    output_nodes = {n for n, _ in [*outputs, *updates]}
    epilogue: dict[int, int] = {}  # root -> the node its kernel writes
    claimed: set[int] = set()
    for r in sorted(n for n in live if root_kind(kg, n)):
        cur = r
        while cur not in output_nodes:
            users = set(readers.get(cur, []))
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
        epilogue[r] = cur

    # Buffers: inputs, outputs, then scratch in launch order.
    taken: set[str] = set()
    buffers: list[BufferSpec] = []
    node_buffers: dict[int, str] = {}
    scalar_params: list[tuple[str, str]] = []
    for n in sorted(g.nodes):
        node = kg.node(n)
        if node["kind"] != "param":
            continue
        ann = node["annotation"]
        taken.add(node["name"])
        if isinstance(ann, TensorAnnotation):
            role = "inout" if ann.inout else "input"
            buffers.append(BufferSpec(node["name"], role, ann.dtype, ev.shape(n), ann.value_range))
            node_buffers[n] = node["name"]
        elif isinstance(ann, ScalarAnnotation):
            scalar_params.append((node["name"], "i32" if ann.kind == "int" else "f32"))
    writes: dict[int, list[str]] = {}
    for n, name in outputs:
        name = _unique(name, taken)
        buffers.append(BufferSpec(name, "output", ev.dtype(n), ev.shape(n)))
        writes.setdefault(n, []).append(name)
    for n, name in updates:
        writes.setdefault(n, []).append(name)

    plans: list[Plan] = []
    declared = {d.name: d for d in kernel_dims(kernel)}
    roots_by_target = {p: r for r, p in epilogue.items()}
    in_place = {name for _, name in updates}
    rows, per_row = groups_with_totals(ev, kg, writes, epilogue, in_place)
    # a whole reduction of a row group's per-row value: one launch where the target can
    # hand off between workgroups and some row exists, else the value goes through scratch
    fused: dict[int, int] = {}  # the per-row value -> the whole reduction
    for x, r in per_row.items():
        place = next(p for p, group in rows.items() if x in group.outputs)
        rowcount = sz.product(list(row_shape(ev, rows[place].roots[0])[:-1]))
        nonempty = (sz.lower_bound(rowcount, declared) or 0) >= 1
        alone = not set(rows[place].outputs) & set(fused)  # one whole reduction a launch
        # with no buffer for the per-row value, only the group and the reduction read it
        private = rows[place].readers[x] <= {epilogue[r]}
        in_place_out = set(writes.get(epilogue[r], [])) & in_place
        if one_launch and nonempty and alone and private and not in_place_out:
            fused[x] = r
            roots_by_target.pop(epilogue[r])
    fused_plans: dict[int, Plan] = {}  # a fused whole reduction's target -> its row launch

    tagged_sizes: dict[str, Any] = {}

    def scratch_buffer(dtype: DType, size: Any, zero: bool = False, handed: bool = False) -> str:
        """A new scratch buffer; `handed`: one a one-launch reduction hands off
        (`handoff_buffer`)."""
        nonlocal scratch
        name = _unique(f"scratch{scratch}", taken)
        scratch += 1
        spec = BufferSpec(name, "scratch", dtype, (size,), zero=zero)
        buffers.append(handoff_buffer(name, dtype, size) if handed else spec)
        return name

    def handoff_buffer(name: str, dtype: DType, size: Any) -> BufferSpec:
        """A buffer whose elements a one-launch reduction's workgroups hand to its last:
        as it is where the target has a fence, else (`tagged`) two zeroed `u32` words an
        element (`ir.Publish`), its element count in `tagged`."""
        if not tagged:
            return BufferSpec(name, "scratch", dtype, (size,))
        tagged_sizes[name] = size
        return BufferSpec(name, "scratch", uint32, (sz.product([2, size]),), zero=True)

    def split_plans(kind: str, p: int, r: int, parts: list[Any], counters: Any) -> None:
        """The plans of a reduction split over workgroups (partials as many as the
        product of `parts`: a chunk's each, or a column slab's): one launch handing off
        with `counters` counters (`kernels.handoff.last_workgroup`), or, with None,
        `partial` then the plan that combines."""
        red = arg_reduction(ev, r) if kind == "argreduce" else ev.reduction(r)
        # a `var`'s partials are sums, then squared deviations from their mean
        halves = [2] if kind == "moments" else []
        handed = counters is not None
        partials = scratch_buffer(red.acc, sz.product([*halves, *parts]), handed=handed)
        # an argmax's extrema, and the first position of each
        positions = (
            scratch_buffer(uint32, sz.product(parts), handed=handed)
            if kind == "argreduce"
            else None
        )
        if handed:
            counter = scratch_buffer(uint32, counters, zero=True)
            plans.append(
                FOLDS[kind](p, writes[p], r, partials=partials, counter=counter,
                            positions=positions)
            )  # fmt: skip
            return
        plans.append(Partial(r, [partials], r, positions=positions))
        plans.append(FOLDS[kind](p, writes[p], r, partials=partials, positions=positions))

    for group in rows.values():
        for r in group.roots:
            roots_by_target.pop(epilogue[r], None)
    by_row = {o for group in rows.values() for o in group.outputs} - set(rows)
    targets = sorted(set(writes) | set(roots_by_target) | set(per_row))
    targets = sorted(set(targets) | {epilogue[r] for r in fused.values()})
    scratch = 0
    for p in targets:
        if p in fused:
            writes[p] = []  # folded into its whole reduction's partials, never stored
        elif p not in writes:
            name = _unique(f"scratch{scratch}", taken)
            scratch += 1
            buffers.append(BufferSpec(name, "scratch", ev.dtype(p), ev.shape(p)))
            writes[p] = [name]
        r = roots_by_target.get(p)
        if p in fused_plans:
            fused_plans[p].total_outputs = [(p, writes[p])]
            continue  # the row launch before it writes it
        if p in by_row:
            continue  # its group's launch writes it
        if p in rows:
            group = rows[p]
            # a per-row value a whole reduction folds is no output of its own
            stored = [o for o in group.outputs if o not in fused]
            first, *more = stored or group.outputs
            values = [epilogue[r] for r in group.roots]
            also = [(o, writes[o]) for o in more]
            plan = Row(first, writes[first], also=also, roots=group.roots, row_values=values,
                       wide=sorted(group.wide))  # fmt: skip
            plans.append(plan)
            for x in set(group.outputs) & set(fused):
                total = fused[x]
                plan.total = total
                fused_plans[epilogue[total]] = plan
                partials = _unique(f"scratch{scratch}", taken)
                counter = _unique(f"scratch{scratch + 1}", taken)
                scratch += 2
                count = row_launch_groups(ev, group.roots)
                buffers.append(handoff_buffer(partials, ev.reduction(total).acc, count))
                buffers.append(BufferSpec(counter, "scratch", uint32, (1,), zero=True))
                plan.partials, plan.counter = partials, counter
            continue
        kind = root_kind(kg, r) if r is not None else "ew"
        columns = kind in ("reduce", "moments", "argreduce") and r is not None
        if columns and r is not None and column_layout(red := ev.reduction(r)):
            if column_slabs(red, declared):
                # slabs of rows, combined by the last of each column tile or a second launch
                outer, _, inner = column_layout(red) or ()
                slabs = [outer, slab_count(red, declared), inner]
                tiles = sz.product([outer, sz.cdiv(inner, COLUMNS)])
                split_plans(kind, p, r, slabs, tiles if one_launch else None)
                continue
        if r is not None and kind in ("reduce", "moments", "argreduce") and split(ev.reduction(r)):
            # one launch needs a workgroup to find itself last: not for a count that can
            # be 0 (no workgroup then; the `reduce` launch still writes the identity)
            nonempty = (sz.lower_bound(ev.reduction(r).count, declared) or 0) >= 1
            chunks = [sz.cdiv(ev.reduction(r).count, CHUNK)]
            split_plans(kind, p, r, chunks, 1 if one_launch and nonempty else None)
            continue
        plans.append(Elementwise(p, writes[p]) if r is None else ROOTED[kind](p, writes[p], r))
    refuse_bfloat16(ev, writes)
    narrow_softmax(ev, g, plans, writes, buffers)
    narrow_row_reductions(ev, g, plans, node_buffers, writes, buffers)
    for p in targets:
        if writes[p]:
            node_buffers.setdefault(p, writes[p][0])
    plans = merge_elementwise(ev, g, plans, node_buffers)
    plans = merge_whole_reductions(ev, g, plans, node_buffers, in_place)
    fuse_attention(ev, g, plans, node_buffers, buffers, declared)
    fuse_scores_softmax(ev, g, plans, node_buffers, buffers, declared)
    pair_products(ev, g, plans, node_buffers, buffers)
    # a reduction folded by another's one-launch pass hands off with that one's counter
    passes = [p for p in plans if isinstance(p, Fold)]
    spare = {m.counter for p in passes for m in p.reductions if m.counter is not None}
    for p in passes:
        for m in p.reductions:
            m.counter = None
    buffers = [b for b in buffers if b.name not in spare]
    if updates:
        params = {kg.node(n)["name"]: n for n in g.nodes if kg.node(n)["kind"] == "param"}
        for n, name in updates:
            if write_in_place_is_safe(ev, g, plans, node_buffers, params[name], name):
                continue
            if write_in_place_is_safe(ev, g, plans, node_buffers, params[name], name, True):
                # `x + x.T`: a thread owns both elements it reads, (i, j) and (j, i)
                (writer,) = [p for p in plans for _, bufs in p.outputs() if name in bufs]
                assert isinstance(writer, Elementwise)
                writer.mirror = True
                continue
            # Some launch reads the old value where the write would already have changed
            # it: compute the new value into scratch, and copy it over after every launch.
            for plan in plans:
                for node, bufs in plan.outputs():
                    if node == n and name in bufs:
                        bufs.remove(name)
                        if not bufs:
                            extra = _unique(f"scratch{scratch}", taken)
                            scratch += 1
                            buffers.append(BufferSpec(extra, "scratch", ev.dtype(n), ev.shape(n)))
                            bufs.append(extra)
                        node_buffers[n] = bufs[0]
            plans.append(Elementwise(n, [name], copy=True))

    dims = kernel_dims(kernel)
    for name, _ in scalar_params:
        if any(d.name == name for d in dims):
            raise RefusalError(
                CANNOT_SCHEDULE,
                f"the parameter `{name}` has the name of a dim, and both would be uniform "
                f"field `{name}`; rename the parameter",
                kg.kernel.span,
            )
    refuse_oversized(dims, buffers, kg.kernel.span)
    fields = [(d.name, "u32") for d in dims] + scalar_params
    kept = {b.name for b in buffers}
    tagged_sizes = {name: n for name, n in tagged_sizes.items() if name in kept}
    return Schedule(
        kg.name, dims, fields, buffers, plans, node_buffers, kernel, vector_views, tagged_sizes
    )


def _outputs(ev: Any, ret: int) -> list[tuple[int, str]]:
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


def _unique(name: str, taken: set[str]) -> str:
    while name in taken:
        name += "_"
    taken.add(name)
    return name


def _flat_reshape(ev: Any, kg: Any, root: int, c: int, cur: int) -> bool:
    """Whether a root's epilogue may go on through the reshape `c` of `cur`: to another
    rank (the written element's flat offset is the same in both shapes,
    `KernelContext._position`; a reshape to the same rank is left to its own launch),
    after a reduction or a matmul (the rows and columns of an einsum's merged letters
    split again, `'npk,kmd->npmd'`)."""
    same_rank = len(ev.shape(c)) == len(ev.shape(cur))
    kinds = ("reduce", "moments", "argreduce", "matmul")
    return not same_rank and root_kind(kg, root) in kinds
