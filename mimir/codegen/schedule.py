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
norm, and its mean and 1/std as outputs) are one `row` launch (`_row_groups`);
and a reduction to a single element of a large or symbolic count runs as two
launches (`partial` over many workgroups into a scratch buffer, then `reduce`), or as
one where the target can hand off between workgroups; a whole reduction of a value a
`row` launch computes per row ends that launch there (`Plan.total`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from mimir.codegen import sizes as sz
from mimir.codegen.refusal import BACKEND_CANNOT_EMIT, CANNOT_SCHEDULE, RefusalError
from mimir.constraints.checker import ScalarVal, TensorVal, TupleVal
from mimir.dims import Dim, Size
from mimir.dtypes import DType, bfloat16, float32, uint32
from mimir.parse.module import ScalarAnnotation, TensorAnnotation

ROOT_KINDS = ("matmul", "reduce", "softmax", "argreduce", "moments", "scan")
# the launches that end a split whole reduction, and fold the others of its pass (an
# argmax's: its chunks' extrema and first positions, `reductions._Firsts`)
_WHOLE_ENDS = ("reduce", "moments", "argreduce")
_FUSIBLE = ("elementwise", "cast")
# A `@` whose right operand is a matrix parameter with literal sizes of at most this many
# rows and columns, and this many elements, is computed where it is read, each element a
# dot product of its row (`small_matmul`); a tiled launch would stage 128 x 128 tiles for
# it. The elements bound keeps the matrix in registers without spills when a thread reuses
# it for a row, or for layer after layer (`h = (h @ w).tanh()`, 8 x 8: 95 registers).
SMALL_MATMUL = 16
SMALL_MATMUL_ELEMENTS = 64
# A `@` by a matrix parameter of at most this many (literal) columns, when it is no product
# by a small matrix (`small_matmul`), is a `narrow` launch (`narrow_matmul`,
# `kernels._narrow`): a 128 x 128 tile would spend all but this many of its 128 columns'
# multiply-adds on nothing. Sixteen takes a 10-class head (MNIST's); each column is a
# register in every thread and a load of w at each k, which a wider product would rather
# share through a tile.
NARROW = 16
# ... and of all its sums over the lanes of a row: the J products and the row reductions
# it folds (`_narrow_row_reductions`), each a register in every thread
NARROW_SUMS = 24
# `softmax(q @ k.T) @ v` is one `attention` launch when v is proven at most this many
# columns wide (`_attention`): a workgroup holds up to 128 of them (4 x 8 outputs a
# thread), so the scores of a block of rows are computed once
ATTENTION_COLUMNS = 128
# `softmax(q @ k.T)` returned is one `scores_softmax` launch when the product contracts
# over at most this many (proven) values (`_scores_softmax`): it computes the scores twice
# to save their round trip through memory (8 bytes an element). Measured in PTX executed
# per element (benchmarks/kernel_static.py, T = 256), against a matmul and a softmax: K =
# 16: 93 against 132; 32: 141 against 152; 48: 189 against 171; 64: 243 against 193. Up
# to 32 the one launch issues fewer instructions as well as a third of the bytes; beyond,
# an H200 (about 7 instructions per byte of bandwidth) is bound by issuing them.
SCORES_CONTRACTION = 32


@dataclass
class BufferSpec:
    name: str  # the manifest's name: a parameter, `out`/`out0`..., or `scratchK`
    role: str  # input | output | scratch
    dtype: DType
    shape: tuple[Size, ...]
    # An input's `Range(lo, hi)`: hosts check lo <= value < hi before a launch
    value_range: tuple[Size, Size] | None = None
    # the kernels need it zeroed before their first launch (a counter, or WGSL's tagged
    # partials, that they keep at zero)
    zero: bool = False


@dataclass
class Plan:
    """One launch: compute node `node` (the root's epilogue when `root` is set)."""

    kind: str  # ew | matmul | narrow | reduce | softmax | argreduce | moments | ...
    node: int
    root: int | None
    writes: list[str]  # buffers the kernel stores `node` into
    # a copy launch: `node` is already in a scratch buffer, and is stored into `writes`
    copy: bool = False
    # more element-wise results of the same shape written by the same launch
    also: list[tuple[int, list[str]]] = field(default_factory=list)
    partials: str | None = None  # a `reduce` that combines a `partial` launch's results
    # a `reduce` that computes the partials itself and whose last workgroup combines them,
    # found with this zeroed `u32` counter (`reductions._last_block`)
    counter: str | None = None
    # a split argmax's: its chunks' first positions (`partials` holds their extrema)
    positions: str | None = None
    # a `narrow` launch that normalises the rows it computes: the softmax over them, whose
    # epilogue it writes (`_narrow_softmax`); an `attention` launch's softmax
    softmax: int | None = None
    # a `matmul` launch's second product of the same left operand, which its epilogue
    # reads at each element it writes (SwiGLU's gate, `x @ w_gate`, beside `x @ w_up`):
    # computed in the same tile, never stored (`_paired_products`, `kernels._matmul`)
    paired: int | None = None
    # an `attention` launch's first product (the scores `q @ k.T`, `_attention`), or the
    # product a `scores_softmax` launch's softmax reads (`_scores_softmax`)
    scores: int | None = None
    # ... and the last-axis reductions of the rows of its left operand it folds in the
    # same loop over k (`return h @ w, h.sum(axis=1)`), each a `reduce` plan of its own
    # (root, outputs) no longer launched (`_narrow_row_reductions`)
    folds: list[Plan] = field(default_factory=list)
    # an in-place `x = f(x, x.T)` of a square x: each thread computes an element and its
    # mirror image across the diagonal before it stores either (`kernels._mirrored`)
    mirror: bool = False
    # a `row` launch: the last-axis reductions it computes per row, in order, before
    # writing `node` (layer norm: the mean, then the variance)
    roots: list[int] = field(default_factory=list)
    # ... and what each root's element-wise epilogue makes of it (`rsqrt(var + eps)`),
    # computed once per row
    row_values: list[int] = field(default_factory=list)
    # a `row` launch that ends with a whole reduction of a value it computes per row (a
    # cross-entropy's mean loss): the reduction, and its epilogue's outputs. Each workgroup
    # stores its rows' share in `partials`; the last, found with `counter`, combines them
    # (`reductions.whole_of_rows`)
    total: int | None = None
    total_outputs: list[tuple[int, list[str]]] = field(default_factory=list)
    # ... and its outputs over the same rows of another length (`concatenate((x,
    # x.sum(axis=1, keepdims=True)), axis=1)`), which the workgroup writes in a loop of
    # their own (`reductions._row_passes`)
    wide: list[int] = field(default_factory=list)
    # a `partial` launch, or a `reduce` one with `counter` or `partials`: more whole
    # reductions of inputs of the same shape, folded in the same pass over the elements
    # (`return x.max(), x.min()`), each its own plan (root, outputs, partials)
    reductions: list[Plan] = field(default_factory=list)
    # ... and the element-wise outputs of that shape it writes at each element it folds
    # (`return y, y.sum()`: y is stored and summed by one read of x)
    elements: list[tuple[int, list[str]]] = field(default_factory=list)

    def outputs(self) -> list[tuple[int, list[str]]]:
        return [(self.node, self.writes), *self.also]

    def computed(self) -> list[tuple[int, list[str]]]:
        """Every value the launch computes and stores, and where."""
        more = [o for m in [*self.reductions, *self.folds] for o in m.outputs()]
        return [*self.outputs(), *self.elements, *more, *self.total_outputs]


@dataclass
class Schedule:
    function: str
    dims: list[Dim]
    uniform_fields: list[tuple[str, str]]  # (name, u32|i32|f32), in block order
    buffers: list[BufferSpec]
    plans: list[Plan]
    node_buffers: dict[int, str]  # node -> buffer holding its value
    kernel: Any = field(repr=False)  # the CheckedKernel
    # the target reads a buffer 4 wide and one element at a time alike (`Backend.vector_views`)
    vector_views: bool = False
    # a one-launch reduction's handed-off buffers where the target has no fence (WGSL):
    # name -> element count, each element two tagged words (`ir.Publish`)
    tagged: dict[str, Any] = field(default_factory=dict)


def small_matmul(kg: Any, n: int) -> bool:
    """Whether node `n` is `x @ w` with `w` a matrix parameter (not `InOut`) of literal
    sizes, each at most `SMALL_MATMUL`, with at most `SMALL_MATMUL_ELEMENTS` elements (a
    3 x 3 rotation, an 8 x 8 layer): computed where it is read, element (..., i, j) the
    sum over k of x[..., i, k] * w[k, j] (`Evaluator._dot`). It reads x at other elements
    of the same row, so it is op kind `rowmix`: fused into any launch, but never counted
    as reading only its own element."""
    node = kg.node(n)
    if node["kind"] != "binop" or node["symbol"] != "@":
        return False
    right = kg.node(node["inputs"][1])
    ann = right.get("annotation") if right["kind"] == "param" else None
    if not isinstance(ann, TensorAnnotation) or ann.inout or len(ann.dims) != 2:
        return False
    k, m = ann.dims
    if not (isinstance(k, int) and isinstance(m, int)):
        return False
    return k <= SMALL_MATMUL and m <= SMALL_MATMUL and k * m <= SMALL_MATMUL_ELEMENTS


def narrow_matmul(kg: Any, n: int) -> bool:
    """Whether node `n` is `h @ w` with `w` a matrix parameter of a literal width of at
    most `NARROW` (a linear head: w H x 3), or `h @ w.T` with w 3 x H (PyTorch's layout
    of a linear layer's weight): one `narrow` launch, in which a few threads fold each row
    of h into the row's few dot products (`kernels._narrow`). A product by a small matrix
    parameter (`small_matmul`) is not one: it is computed where it is read."""
    node = kg.node(n)
    if node["kind"] != "binop" or node["symbol"] != "@" or small_matmul(kg, n):
        return False
    right = node["inputs"][1]
    ann = _matrix_parameter(kg, right)
    width = ann.dims[1] if ann is not None else None
    rnode = kg.node(right)
    if ann is None and op_kind(kg, right) == "transpose" and rnode["spec"].name == "T":
        ann = _matrix_parameter(kg, rnode["inputs"][0])
        width = ann.dims[0] if ann is not None else None
    return isinstance(width, int) and width <= NARROW


def inline_product(kg: Any, n: int) -> bool:
    """Whether node `n` is `x @ w1` with `w1` a matrix parameter (not `InOut`) of a literal
    number of rows, at most `SMALL_MATMUL`, whose value only a `narrow` launch reads, as
    (an element-wise function of) its left operand: `relu(x @ w1 + b1) @ w2` with x N x 13
    and w2 H x 3. The `narrow` launch computes each element once, as the dot product of
    its row (`Evaluator._dot`), so it is op kind `rowmix` and no launch of its own: a tiled
    launch would store the N x H hidden layer for the next to read back. Its value may
    also be summed, averaged or maxed (`z.max(axis=1)`): the `narrow` launch folds a row
    reduction of it (`_narrow_row_reductions`), and any other reduction computes it too."""
    node = kg.node(n)
    if node["kind"] != "binop" or node["symbol"] != "@" or small_matmul(kg, n):
        return False
    ann = _matrix_parameter(kg, node["inputs"][1])
    if ann is None or ann.inout or not isinstance(ann.dims[0], int):
        return False
    if ann.dims[0] > SMALL_MATMUL:
        return False
    # follow the readers through element-wise ops to a narrow `@`, as its left operand;
    # a row reduction the `narrow` launch folds may read it too (`_narrow_row_reductions`)
    narrow, stack, seen = False, [n], set()
    while stack:
        cur = stack.pop()
        if cur in seen:
            continue
        seen.add(cur)
        for user in set(kg.graph.successors(cur)):
            if narrow_matmul(kg, user):
                left, right = kg.node(user)["inputs"][:2]
                if left != cur or right == cur:
                    return False
                narrow = True
            elif op_kind(kg, user) == "reduce" and kg.node(user)["spec"].name in ROW_FOLDS:
                continue
            elif op_kind(kg, user) in _FUSIBLE:
                stack.append(user)
            else:
                return False
    return narrow


def _matrix_parameter(kg: Any, n: int) -> TensorAnnotation | None:
    """The annotation of node `n` when it is a rank-2 tensor parameter."""
    node = kg.node(n)
    ann = node.get("annotation") if node["kind"] == "param" else None
    if not isinstance(ann, TensorAnnotation) or len(ann.dims) != 2:
        return None
    return ann


def row_per_thread(ev: Any, g: nx.DiGraph, plan: Plan, node_buffers: dict[int, str]) -> bool:
    """Whether element-wise launch `plan` computes a `@` by a small matrix (`small_matmul`),
    each of whose elements reads a whole row of its left operand, and writes rows of a
    literal length of at most `SERIAL_REDUCE_MAX`: then a thread computes whole rows
    (`kernels._row_elements`)."""
    from mimir.codegen.reductions import SERIAL_REDUCE_MAX

    if plan.kind != "ew" or plan.mirror or plan.copy:
        return False
    shape = ev.shape(plan.node)
    length = shape[-1] if shape else None
    if not isinstance(length, int) or length > SERIAL_REDUCE_MAX:
        return False
    region = set().union(*(fused_reads(g, n, node_buffers) for n, _ in plan.outputs()))
    return any(op_kind(ev.kg, m) == "rowmix" for m in region)


def root_kind(kg: Any, n: int) -> str | None:
    node = kg.node(n)
    if node["kind"] == "binop" and node["symbol"] == "@":
        if small_matmul(kg, n) or inline_product(kg, n):
            return None
        return "narrow" if narrow_matmul(kg, n) else "matmul"
    spec = node.get("spec")
    if node["kind"] == "method" and spec is not None and spec.kind in ROOT_KINDS:
        return spec.kind
    return None


def op_kind(kg: Any, n: int) -> str:
    node = kg.node(n)
    if node["kind"] in ("binop", "unop"):
        if node.get("symbol") == "@":
            return "rowmix" if small_matmul(kg, n) or inline_product(kg, n) else "matmul"
        return "elementwise"
    spec = node.get("spec")
    return spec.kind if spec is not None else node["kind"]


def schedule(
    kernel: Any, one_launch: bool = False, vector_views: bool = False, tagged: bool = False
) -> Schedule:
    """The launches of `kernel`. `one_launch`: the target has atomics that return the old
    value and a way to hand values between workgroups, so a split reduction is one launch
    (module docstring): a device-scope fence, or with `tagged` values published in tagged
    atomic words (`ir.Publish`; WGSL). `vector_views`: the target may read one buffer 4
    wide and one element at a time (`Backend.vector_views`)."""
    from mimir.codegen.reductions import (
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
    from mimir.codegen.tensors import Evaluator  # resolve() and shapes, without a body

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
            elif op_kind(kg, c) not in _FUSIBLE:
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
    declared = {d.name: d for d in _dims(kernel)}
    roots_by_target = {p: r for r, p in epilogue.items()}
    in_place = {name for _, name in updates}
    rows, per_row = _groups_with_totals(ev, kg, writes, epilogue, in_place)
    # a whole reduction of a row group's per-row value: one launch where the target can
    # hand off between workgroups and some row exists, else the value goes through scratch
    fused: dict[int, int] = {}  # the per-row value -> the whole reduction
    for x, r in per_row.items():
        place = next(p for p, group in rows.items() if x in group.outputs)
        rowcount = sz.product(list(row_shape(ev, rows[place].roots[0])[:-1]))
        nonempty = (sz.lower_bound(rowcount, declared) or 0) >= 1
        # one value per row (`reductions.whole_of_rows` hands a row's one value on), not a
        # value at every element of a row (`x.softmax(axis=-1).max()`: through scratch)
        one_per_row = sz.key(sz.product(list(ev.shape(x)))) == sz.key(rowcount)
        alone = not set(rows[place].outputs) & set(fused)  # one whole reduction a launch
        # with no buffer for the per-row value, only the group and the reduction read it
        private = rows[place].readers[x] <= {epilogue[r]}
        in_place_out = set(writes.get(epilogue[r], [])) & in_place
        # the reduction's epilogue runs in the row launch's last workgroup, so what it reads
        # from other launches must not come from this launch's own outputs
        acyclic = not _epilogue_reads_own_rows(g, rows[place].outputs, x, r, epilogue[r])
        if (
            one_launch and one_per_row and nonempty and alone and private and acyclic
            and not in_place_out
        ):  # fmt: skip
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
        with `counters` counters (`_last_workgroup`), or, with None, `partial` then the
        plan that combines."""
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
                Plan(kind, p, r, writes[p], partials=partials, counter=counter,
                     positions=positions)
            )  # fmt: skip
            return
        plans.append(Plan("partial", r, r, [partials], positions=positions))
        plans.append(Plan(kind, p, r, writes[p], partials=partials, positions=positions))

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
            plan = Plan("row", first, None, writes[first], also=also, roots=group.roots,
                        row_values=values, wide=sorted(group.wide))  # fmt: skip
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
        plans.append(Plan(kind, p, r, writes[p]))
    _refuse_bfloat16(ev, writes)
    _narrow_softmax(ev, g, plans, writes, buffers)
    _narrow_row_reductions(ev, g, plans, node_buffers, writes, buffers)
    for p in targets:
        if writes[p]:
            node_buffers.setdefault(p, writes[p][0])
    plans = _merge_elementwise(ev, g, plans, node_buffers)
    plans = _merge_whole_reductions(ev, g, plans, node_buffers, in_place)
    _attention(ev, g, plans, node_buffers, buffers, declared)
    _scores_softmax(ev, g, plans, node_buffers, buffers, declared)
    _paired_products(ev, g, plans, node_buffers, buffers)
    # a reduction folded by another's one-launch pass hands off with that one's counter
    spare = {m.counter for p in plans for m in p.reductions if m.counter is not None}
    for p in plans:
        for m in p.reductions:
            m.counter = None
    buffers = [b for b in buffers if b.name not in spare]
    if updates:
        params = {kg.node(n)["name"]: n for n in g.nodes if kg.node(n)["kind"] == "param"}
        for n, name in updates:
            if _write_in_place_is_safe(ev, g, plans, node_buffers, params[name], name):
                continue
            if _write_in_place_is_safe(ev, g, plans, node_buffers, params[name], name, True):
                # `x + x.T`: a thread owns both elements it reads, (i, j) and (j, i)
                (writer,) = [p for p in plans for _, bufs in p.outputs() if name in bufs]
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
            plans.append(Plan("ew", n, None, [name], copy=True))

    dims = _dims(kernel)
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


def _narrow_softmax(
    ev: Any, g: nx.DiGraph, plans: list[Plan], writes: dict[int, list[str]], buffers: list
) -> None:
    """A float32 softmax (or log-softmax) over the rows of a `narrow` launch's result, its
    only reader (a classifier: `(h @ w + b).softmax()`, w H x 5): the
    `narrow` launch normalises each row it computes (`Plan.softmax`), and writes the
    softmax's result instead of storing the logits in scratch for a softmax launch."""
    from mimir.codegen.reductions import softmax_input

    narrow = {p.node: p for p in plans if p.kind == "narrow" and not p.also}
    for plan in list(plans):
        if plan.kind != "softmax" or plan.root is None:
            continue
        x, axis = softmax_input(ev, plan.root)
        x = ev.resolve(x)
        logits = narrow.get(x)
        if logits is None or axis != len(ev.shape(x)) - 1 or ev.dtype(x) != float32:
            continue
        if ev.dtype(plan.root) != float32 or not _read_by(ev, g, x, plan.root):
            continue
        # the logits stay an output where they are one (`return logits, logits.softmax()`)
        scratch = {b.name for b in buffers if b.role == "scratch"}
        kept = [name for name in writes[x] if name not in scratch]
        buffers[:] = [b for b in buffers if b.name in kept or b.name not in writes[x]]
        writes[x] = kept
        logits.node, logits.writes, logits.softmax = plan.node, plan.writes, plan.root
        logits.also = [(x, kept)] if kept else []
        plans.remove(plan)


def _attention(
    ev: Any,
    g: nx.DiGraph,
    plans: list[Plan],
    node_buffers: dict[int, str],
    buffers: list[BufferSpec],
    declared: dict[str, Dim],
) -> None:
    """`softmax(f(a @ b)) @ v` over the last axis, float32 (attention: a = q, b = k.T, f a
    scale and a causal mask), as one `attention` launch (`kernels._attention`) instead of
    a matmul, a softmax and a matmul: the scores `a @ b` and their softmax are never
    stored, each block of keys' scores is computed, exponentiated and multiplied by v's
    rows in registers and workgroup memory (the online softmax of flash attention). Only
    when the scores' epilogue and the softmax are each read by the next step alone (no
    output, no other launch), the softmax has no epilogue, both products have the same
    batch axes, and v is proven at most `ATTENTION_COLUMNS` wide (a literal, or a dim's
    `max`: the head dims of FlashAttention's and Triton's kernels are compile-time
    constants too): a workgroup owns all of them (up to 128: 4 x 8 outputs a thread) and
    computes its rows' scores once; a wider v would need a workgroup per 128 columns,
    each computing the scores again, or more registers than a thread has."""
    scratch = {b.name for b in buffers if b.role == "scratch"}
    by_node = {p.node: p for p in plans}
    products = ("matmul", "narrow")  # (v, or b, a parameter of at most 16 columns)
    for second in list(plans):
        if second.kind not in products or second.root is None or second.also or second.copy:
            continue
        if second.folds or second.softmax is not None:
            continue
        soft = ev.resolve(ev.node(second.root)["inputs"][0])
        middle = by_node.get(soft)
        if middle is None or middle.kind != "softmax" or middle.root != soft or middle.also:
            continue
        if ev.node(soft)["spec"].name != "softmax":
            continue
        found = _scores_under(ev, g, by_node, soft, scratch, products)
        if found is None or not set(middle.writes) <= scratch:
            continue
        first, x = found
        if not _read_by(ev, g, soft, second.root):
            continue
        operands = [*ev.node(first.root)["inputs"][:2], ev.node(second.root)["inputs"][1]]
        values = [*operands, first.root, x, soft, second.root]
        if any(ev.dtype(ev.resolve(n)) != float32 for n in values):
            continue
        batch = [sz.key(s) for s in ev.shape(first.root)[:-2]]
        if [sz.key(s) for s in ev.shape(second.root)[:-2]] != batch:
            continue
        width = sz.upper_bound(ev.shape(second.root)[-1], declared)
        if width is None or width > ATTENTION_COLUMNS:
            continue
        unused = set(first.writes + middle.writes)
        buffers[:] = [b for b in buffers if b.name not in unused]
        node_buffers.pop(x, None)
        node_buffers.pop(soft, None)
        second.kind, second.scores, second.softmax = "attention", first.root, soft
        plans.remove(first)
        plans.remove(middle)


def _paired_products(
    ev: Any,
    g: nx.DiGraph,
    plans: list[Plan],
    node_buffers: dict[int, str],
    buffers: list[BufferSpec],
) -> None:
    """Two tiled products of one left operand, `a @ b1` stored only for the epilogue of a
    later `a @ b2` to read at the positions it writes (SwiGLU: `silu(x @ w_gate) * (x @
    w_up)`), as one launch: each workgroup computes both products of its tile, one after
    the other through the same workgroup memory, and the epilogue reads the first from
    registers (`kernels._matmul`). The first product is never stored or read back, and
    there is one launch fewer. Only when both products have the same shapes and dtype,
    neither the first nor its own epilogue (`gelu(x @ w_gate)`, then computed where it is
    read) is an output, and every op between the first and the second's epilogue is
    element-wise on that shape and read by nothing else (so the epilogue reads the first
    product at its own position); not for a second product that reads the first."""
    scratch = {b.name for b in buffers if b.role == "scratch"}
    for first in list(plans):
        if first.kind != "matmul" or first.root is None:
            continue
        if first.also or first.folds or first.copy or first.paired is not None:
            continue
        if not first.writes or not set(first.writes) <= scratch:
            continue
        p = first.root
        second = _pairing(ev, g, plans[plans.index(first) + 1 :], p)
        if second is None:
            continue
        unused = set(first.writes)
        buffers[:] = [b for b in buffers if b.name not in unused]
        node_buffers.pop(first.node, None)  # its epilogue, computed where it is read
        second.paired = p
        plans.remove(first)


def _pairing(ev: Any, g: nx.DiGraph, later: list[Plan], p: int) -> Plan | None:
    """The later `matmul` launch whose epilogue alone reads product `p`, as
    `_paired_products` requires, or None."""
    key = [sz.key(s) for s in ev.shape(p)]
    left, right = (ev.resolve(n) for n in ev.node(p)["inputs"][:2])
    for second in later:
        if second.kind != "matmul" or second.root is None or second.paired is not None:
            continue
        if second.also or second.folds or second.copy or second.softmax is not None:
            continue
        q, t = second.root, second.node
        if q == p or p in nx.ancestors(g, q) or p not in nx.ancestors(g, t):
            continue
        q_left, q_right = (ev.resolve(n) for n in ev.node(q)["inputs"][:2])
        if q_left != left or [sz.key(s) for s in ev.shape(q)] != key:
            continue
        if [sz.key(s) for s in ev.shape(q_right)] != [sz.key(s) for s in ev.shape(right)]:
            continue
        if len({ev.dtype(n) for n in (p, q, left, right, q_right)}) != 1:
            continue
        if _private_elementwise(ev, g, p, t, key):
            return second
    return None


def _private_elementwise(ev: Any, g: nx.DiGraph, p: int, t: int, key: list) -> bool:
    """Whether product `p` and every op on a path from it to `t` are read only by such
    ops or by `t`, and each op (and `t`) is element-wise of shape `key`, so each reads its
    operands at the position it is computed."""
    between = nx.descendants(g, p) & nx.ancestors(g, t)
    for n in between | {p}:
        if any(u not in between and u != t for u in g.successors(n)):
            return False
    for n in between | {t}:
        if op_kind(ev.kg, n) not in _FUSIBLE or [sz.key(s) for s in ev.shape(n)] != key:
            return False
    return True


def _scores_under(
    ev: Any,
    g: nx.DiGraph,
    by_node: dict[int, Plan],
    soft: int,
    scratch: set[str],
    products: tuple[str, ...],
) -> tuple[Plan, int] | None:
    """The launch of a product (of a kind in `products`) whose epilogue x the softmax
    `soft` reads over its last axis, and x: when that launch computes the product alone
    (no other result, no folds or softmax of a `narrow` launch's own) into scratch, and
    only the softmax reads x, at the product's own positions (no reshape). The scores of
    `_attention` and `_scores_softmax`, which compute them inside their own launch."""
    from mimir.codegen.reductions import softmax_input

    x, axis = softmax_input(ev, soft)
    x = ev.resolve(x)
    first = by_node.get(x)
    if first is None or first.kind not in products or first.root is None or first.also:
        return None
    if first.folds or first.softmax is not None:
        return None  # (a `narrow` launch that writes more than the scores)
    if axis != len(ev.shape(x)) - 1 or not set(first.writes) <= scratch:
        return None
    if [sz.key(s) for s in ev.shape(x)] != [sz.key(s) for s in ev.shape(first.root)]:
        return None
    if not _read_by(ev, g, x, soft):
        return None
    return first, x


def _scores_softmax(
    ev: Any,
    g: nx.DiGraph,
    plans: list[Plan],
    node_buffers: dict[int, str],
    buffers: list[BufferSpec],
    declared: dict[str, Dim],
) -> None:
    """A float32 softmax or log-softmax over the last axis of a tiled product's epilogue
    (`softmax(q @ k.T * scale)`, attention's probabilities), which is a launch's result
    (an output, or read by later launches), as one `scores_softmax` launch
    (`kernels._scores_softmax`) instead of a matmul and a softmax: a workgroup owns a block
    of rows and computes their scores twice, once for each row's max and sum (online) and
    once for the values it stores, so the scores are never stored. Only when the epilogue
    is read by the softmax alone, the softmax's own launch writes nothing else, no
    `InOut` buffer is written, and the product contracts over at most
    `SCORES_CONTRACTION` proven values (a literal or a dim's `max`), where computing the
    scores again costs less than their round trip through memory."""
    scratch = {b.name for b in buffers if b.role == "scratch"}
    in_place = {b.name for b in buffers if b.role == "inout"}
    by_node = {p.node: p for p in plans}
    for middle in list(plans):
        soft = middle.root
        if middle.kind != "softmax" or soft is None or middle.also or middle.copy:
            continue
        if ev.node(soft)["spec"].name not in ("softmax", "log_softmax"):
            continue
        if set(middle.writes) & in_place:
            continue
        found = _scores_under(ev, g, by_node, soft, scratch, ("matmul",))
        if found is None:
            continue
        first, x = found
        operands = ev.node(first.root)["inputs"][:2]
        if any(ev.dtype(ev.resolve(n)) != float32 for n in [*operands, first.root, x, soft]):
            continue
        contraction = sz.upper_bound(ev.shape(ev.resolve(operands[0]))[-1], declared)
        if contraction is None or contraction > SCORES_CONTRACTION:
            continue
        unused = set(first.writes)
        buffers[:] = [b for b in buffers if b.name not in unused]
        node_buffers.pop(x, None)
        middle.kind, middle.scores = "scores_softmax", first.root
        plans.remove(first)


# the reductions a `narrow` launch folds along its rows (`_narrow_row_reductions`)
ROW_FOLDS = ("sum", "mean", "max", "min")


def _narrow_row_reductions(
    ev: Any,
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
    (`Plan.folds`): one read of h, and no launch of their own. Only when everything they
    read is a parameter or is stored by a launch before the `narrow` one, nothing the
    `narrow` launch reads is their value, and no launch between the two reads it; and
    while the launch combines at most `NARROW_SUMS` values over each row's lanes."""
    params = {n for n in node_buffers if ev.node(n)["kind"] == "param"}
    in_place = {b.name for b in buffers if b.role == "inout"}
    for narrow in [p for p in plans if p.kind == "narrow" and p.root is not None]:
        left = ev.resolve(ev.node(narrow.root)["inputs"][0])
        row = [sz.key(s) for s in ev.shape(left)]
        rows = sz.key(sz.product(list(ev.shape(left)[:-1])))
        sums = ev.shape(narrow.root)[-1]
        for plan in list(plans):
            roots = _row_folds(ev, plan, row, rows)
            if not roots or sums + len(roots) > NARROW_SUMS:
                continue
            if any(set(bufs) & in_place for _, bufs in plan.outputs()):
                continue  # an `InOut` update: left to `_write_in_place_is_safe`'s launches
            if _folds_into(ev, g, plans, params, narrow, plan, roots):
                sums += len(roots)
                narrow.folds.append(plan)
                plans.remove(plan)
                _drop_unread_scratch(g, plans, narrow, plan, params, writes, buffers)


def _drop_unread_scratch(
    g: nx.DiGraph,
    plans: list[Plan],
    narrow: Plan,
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


def _row_folds(ev: Any, plan: Plan, row: list[str], rows: str) -> list[int]:
    """The reductions of `plan` when a `narrow` launch over rows of the shape `row` can
    fold them (`_narrow_row_reductions`), else none."""
    if plan.kind == "reduce" and plan.root is not None:
        if plan.partials or plan.counter or plan.positions or plan.also:
            return []
        roots = [plan.root]
    elif plan.kind == "row":
        if plan.total is not None or plan.wide:
            return []
        roots = plan.roots
    else:
        return []
    if plan.copy or plan.reductions or plan.elements:
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
    ev: Any,
    g: nx.DiGraph,
    plans: list[Plan],
    params: set[int],
    narrow: Plan,
    plan: Plan,
    roots: list[int],
) -> bool:
    """Whether the `narrow` launch can compute `plan`, the reductions `roots`, in its
    stead (`_narrow_row_reductions`)."""
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


def _read_at_own_rows(ev: Any, g: nx.DiGraph, narrow: Plan, values: set[int], region: set) -> bool:
    """Whether the `narrow` launch reads the per-row `values` only where lane 0 writes a
    row's results, each row its own value (`h @ w + h.sum(axis=1, keepdims=True)`):
    every node from them to what it stores is element-wise, of the shape (..., rows, 1)
    or (..., rows, J), and none is the product's left operand or its softmax."""
    assert narrow.root is not None
    shape = ev.shape(narrow.root)
    lead, width = [sz.key(s) for s in shape[:-1]], sz.key(shape[-1])
    between = set().union(*(nx.descendants(g, v) for v in values)) & region
    product = nx.ancestors(g, narrow.root) | {narrow.root}  # computed at each k, before
    for m in {*values, *between}:
        if m in product:
            return False
        if (
            not (m in values and op_kind(ev.kg, m) == "reduce")
            and op_kind(ev.kg, m) not in _FUSIBLE
        ):
            return False
        keys = [sz.key(s) for s in ev.shape(m)]
        if keys[:-1] != lead or keys[-1] not in ("1", width):
            return False
    return True


def _read_by(ev: Any, g: nx.DiGraph, x: int, reader: int) -> bool:
    """Whether `reader` is the only op that reads node `x`, beside the function's return."""
    for user in g.successors(x):
        kind = ev.node(user)["kind"]
        if kind == "tuple":
            if any(ev.node(u)["kind"] != "return" for u in g.successors(user)):
                return False
        elif user != reader and kind != "return":
            return False
    return True


def _flat_reshape(ev: Any, kg: Any, root: int, c: int, cur: int) -> bool:
    """Whether a root's epilogue may go on through the reshape `c` of `cur`: to another
    rank (the written element's flat offset is the same in both shapes,
    `KernelContext._position`; a reshape to the same rank is left to its own launch),
    after a reduction or a matmul (the rows and columns of an einsum's merged letters
    split again, `'npk,kmd->npmd'`)."""
    same_rank = len(ev.shape(c)) == len(ev.shape(cur))
    kinds = ("reduce", "moments", "argreduce", "matmul")
    return not same_rank and root_kind(kg, root) in kinds


def _refuse_bfloat16(ev: Any, writes: dict[int, list[str]]) -> None:
    """A kernel reads bfloat16 (two to a u32 word) but never writes it: two threads would
    share each word. Refused loudly at the first value that would be stored."""
    for n in sorted(writes):
        if ev.dtype(n) == bfloat16:
            node = ev.node(n)
            raise RefusalError(
                BACKEND_CANNOT_EMIT,
                f"`{node['text']}` is bfloat16 and would be stored, which no backend (msl, "
                "wgsl, ptx, spirv) emits yet (bfloat16 is read two to a 32-bit word); "
                "store float32: end with `.astype(float32)`",
                node["span"],
            )


@dataclass
class RowGroup:
    """One `row` launch: its last-axis reductions in order, and the outputs it writes
    (those of the row's shape first; the others have one element per row)."""

    roots: list[int]
    outputs: list[int]
    # for each output, the materialised nodes outside the group that read it
    readers: dict[int, set[int]] = field(default_factory=dict)
    # the outputs over the same rows of another length (`Plan.wide`)
    wide: set[int] = field(default_factory=set)


def _groups_with_totals(
    ev: Any,
    kg: Any,
    writes: dict[int, list[str]],
    epilogue: dict[int, int],
    in_place: set[str],
) -> tuple[dict[int, RowGroup], dict[int, int]]:
    """`_row_groups`, offering as outputs the per-row values that a whole reduction reads
    (each row's loss, before the mean of a cross-entropy; each row's hit, before an
    accuracy; row sums that shares also read): the groups, and {value: its whole
    reduction} for those a group computes."""
    offered: dict[int, int] = {}
    for r in sorted(epilogue):
        if root_kind(kg, r) != "reduce":
            continue
        red = ev.reduction(r)
        x = ev.resolve(red.x)
        if red.kept or x in writes or kg.node(x)["kind"] == "param":
            continue
        if x in epilogue and epilogue[x] != x:  # a root whose launch writes something else
            continue
        offered[x] = r
    while True:
        offer = {x: [] for x in offered}
        rows = _row_groups(ev, kg, {**writes, **offer}, epilogue, in_place, set(offered))
        grouped = {o for group in rows.values() for o in group.outputs}
        kept = {x: r for x, r in offered.items() if x in grouped}
        if kept == offered:
            return rows, kept
        offered = kept


def _row_groups(
    ev: Any,
    kg: Any,
    writes: dict[int, list[str]],
    epilogue: dict[int, int],
    in_place: set[str],
    totals: set[int] | frozenset = frozenset(),
) -> dict[int, RowGroup]:
    """Outputs computed with last-axis reductions of the same rows, in one launch.

    The reductions (`sum mean max min`, `var std`, `argmax argmin`) are over the last axis
    of tensors of one shape (..., L), with or without `keepdims` (the mean and the
    variance of a layer norm, the mean square of an RMS norm, a row's max and min). One
    workgroup per row computes them in order; then it writes the outputs of shape
    (..., L) that read them (the normalised row), and thread 0 writes those with one
    element per row (the mean and `rsqrt(var)` a layer norm keeps for its backward
    pass, `max - min`). An element-wise output over the same rows of another length, that
    reads nothing but the rows' reductions and inputs (a row with its sum appended,
    `concatenate((x, s), axis=1)`), is written by the workgroup in a loop of its own.
    Nothing goes through a scratch buffer, and x is read by one launch. All such outputs
    over rows of one shape share the launch; if a reduction of theirs is read by anything
    else, they keep their own launches. A float32 softmax of the last axis is a root too,
    where the group has another root or an output reading it (`softmax_lse`, a cross-
    entropy's per-row loss). Short literal rows of several lengths over the same leading
    axes share a thread-per-row launch for their outputs with one element per row. The plan
    of each group is placed at its last output -> the group.
    """
    from mimir.codegen.reductions import SERIAL_REDUCE_MAX, row_shape, softmax_input, split

    g = kg.graph

    def row_reduction(r: int) -> bool:
        if root_kind(kg, r) == "softmax":
            # a float32 softmax of the last axis: its max and sum are the row's
            x, axis = softmax_input(ev, r)
            return axis == len(ev.shape(x)) - 1 and ev.dtype(r) == float32
        if root_kind(kg, r) not in ("reduce", "moments", "argreduce"):
            return False
        if len(ev.shape(epilogue[r])) != len(ev.shape(r)):  # an epilogue that reshapes
            return False
        red = ev.reduction(r)
        shape = ev.shape(r)
        rank = len(red.shape)
        kept = len(shape) == rank - 1 or (len(shape) == rank > 0 and shape[-1] == 1)
        return red.axes == [rank - 1] and kept and not split(red)

    def reads(n: int, materialised: set[int]) -> set[int]:
        """The materialised nodes (and roots) computing `n` element-wise reads."""
        found, stack, seen = set(), list(g.predecessors(n)), set()
        while stack:
            m = stack.pop()
            if m in seen:
                continue
            seen.add(m)
            if m in materialised:
                found.add(m)
            elif kg.node(m)["kind"] != "param":
                stack.extend(g.predecessors(m))
        return found

    def keys(n: int) -> list[str]:
        return [sz.key(s) for s in ev.shape(n)]

    def own_row(starts: list[int], lead: list[str], members: set[int]) -> bool:
        """Whether computing `starts` at an element of a row reads the group's values
        (`members`) of that row only. A `row` launch holds one row's reductions whatever
        index reads them (`Evaluator.row_values`), so `(x - x.mean(axis=1,
        keepdims=True)).T + 1` of a square x, or a mean without `keepdims` broadcast along
        the rows of an (N, N) x, keeps its own launches. Between the start and a member,
        each node is element-wise (a cast, a concatenation along the last axis, a subscript
        of the last axis, a gather along it, a `@` by a small matrix: `small_matmul`) over
        the rows' leading axes, and each operand that reads a member has those leading
        axes (and its rank, but for a subscript)."""
        if not lead:
            return True  # one row
        tainted = set(members).union(*(nx.descendants(g, m) for m in members))

        def reads_member(m: int) -> bool:
            return m in tainted

        def last_axis_only(items: list[tuple]) -> bool:
            """Whether subscript `items` keep the leading axes as they are (`m[:, None]`,
            `x[..., :3]`, `x[:, 0]`): full slices, or an ellipsis before one item."""
            plain = [("slice", None, None)] * len(lead)
            if items[: len(lead)] == plain:
                return all(it[0] != "ellipsis" for it in items[len(lead) :])
            rest = items[1:]
            return items[0][0] == "ellipsis" and sum(it[0] != "newaxis" for it in rest) <= 1

        def operands(m: int) -> tuple[list[int], bool] | None:
            """The operands of `m` that an element of a row reads at that row, and whether
            they have m's rank; None where m may read another row."""
            kind, node = op_kind(kg, m), ev.node(m)
            inputs = [ev.resolve(i) for i in node["inputs"]]
            if kind in (*_FUSIBLE, "rowmix"):
                return [ev.resolve(i) for i in g.predecessors(m)], True
            if kind == "join" and ev.spec(m).name == "concatenate":
                kw = ev._kwargs(m)
                axis = ev.literal_arg(kw.get("axis"), 0) % len(ev.shape(m))
                if axis == len(ev.shape(m)) - 1:
                    return [
                        ev.resolve(i) for i in ev.node(ev.resolve(kw["tensors"]))["inputs"]
                    ], True
            if kind == "subscript" and last_axis_only(node["items"]):
                ints = [inputs[it[1]] for it in node["items"] if it[0] == "int"]
                if not any(isinstance(ev.values[i], TensorVal) for i in ints):  # not a gather
                    return [inputs[0]], False
            if kind == "gather":
                named = dict(zip(node["keywords"], inputs, strict=True))
                rank = len(ev.shape(m))
                if "axis" in named and ev.literal_arg(named["axis"], 0) % rank == rank - 1:
                    return [named["arr"], named["indices"]], True
            return None

        checked: set[int] = set()
        stack = list(starts)
        while stack:
            m = stack.pop()
            if m in checked or m in members or not reads_member(m):
                continue
            checked.add(m)
            mine = keys(m)
            if len(mine) not in (len(lead), len(lead) + 1) or mine[: len(lead)] != lead:
                return False
            found = operands(m)
            if found is None:
                return False
            for o in found[0]:
                if not reads_member(o):
                    continue
                if not isinstance(ev.values[o], TensorVal):
                    return False
                theirs = keys(o)
                ranks = [len(mine)] if found[1] else [len(lead), len(lead) + 1]
                if len(theirs) not in ranks or theirs[: len(lead)] != lead:
                    return False
                stack.append(o)
        return True

    by_target = {p: r for r, p in epilogue.items()}
    materialised = set(writes) | set(by_target)
    readers: dict[int, set[int]] = {}
    computing: dict[int, set[int]] = {}
    for t in materialised:
        start = by_target.get(t)
        # a root's plan reads what its input needs; an element-wise plan what it needs
        found = reads(start if start is not None else t, materialised - {t})
        if start is not None:
            found |= reads(t, materialised - {t}) - {start}
        computing[t] = found
        for m in found:
            readers.setdefault(m, set()).add(t)

    # Each output that reads row reductions (or is one): the reductions' targets it
    # needs, and the row shape they share.
    candidates: dict[int, tuple[set[int], list[str]]] = {}
    plain: list[int] = []  # element-wise outputs that read no row reduction
    wide: set[int] = set()  # outputs over the same rows, of another length
    for out in sorted(writes):
        r = by_target.get(out)
        if r is None and op_kind(kg, out) not in (*_FUSIBLE, "rowmix", "gather", "join"):
            continue
        if r is not None and not row_reduction(r):
            continue
        members = {out} if r is not None else set()
        frontier = [out]
        while frontier:
            t = frontier.pop()
            for m in computing[t]:
                root = by_target.get(m)
                # any other root (a whole sum, a matmul) has its own launch before this
                # one, and is read from its buffer
                if root is None or m in members or not row_reduction(root):
                    continue
                members.add(m)
                frontier.append(m)
        row = {tuple(sz.key(s) for s in row_shape(ev, by_target[m])) for m in members}
        mine = keys(out)
        # every value of the group read at its own row: by the output, and by the roots'
        # inputs (a variance's, from the mean)
        leads = {shape[:-1] for shape in row}
        inputs = [ev.resolve(i) for m in members for i in g.predecessors(by_target[m])]
        if len(leads) == 1 and not own_row([out, *inputs], list(next(iter(leads))), members):
            continue
        if not row:
            if r is None and op_kind(kg, out) in _FUSIBLE:
                plain.append(out)
            continue
        if len(row) > 1:
            # short literal rows of several lengths over the same leading axes (rows of 5
            # and of 3 per item): a thread per row folds each of them (`_short_rows`);
            # only outputs with one element per row
            lead = {shape[:-1] for shape in row}
            short = all(
                isinstance(last := row_shape(ev, by_target[m])[-1], int)
                and last <= SERIAL_REDUCE_MAX
                and root_kind(kg, by_target[m]) != "softmax"
                for m in members
            )
            if len(lead) != 1 or not short:
                continue
            (leading,) = lead
            if mine not in (list(leading), [*leading, "1"]):
                continue
            candidates[out] = (members, [*leading, "short"])
            continue
        (shape,) = row
        if mine not in (list(shape), list(shape[:-1]), [*shape[:-1], "1"]):
            # an element-wise output over the same rows, of another length, that reads
            # nothing but the rows' reductions and inputs (`concatenate((x, x.sum(axis=1,
            # keepdims=True)), axis=1)`): the workgroup writes it in a loop of its own; a
            # thread per short row (`_short_rows`) writes it unrolled, so its own length
            # must be a short literal too (`x.softmax() @ w`, w 4 x 3)
            length, own = shape[-1], ev.shape(out)[-1]
            short = isinstance(length, int) and length <= SERIAL_REDUCE_MAX
            unrolled = isinstance(own, int) and own <= SERIAL_REDUCE_MAX
            same_rows = len(mine) == len(shape) and mine[:-1] == list(shape[:-1])
            if r is not None or (short and not unrolled) or not same_rows:
                continue
            if not computing[out] <= members:
                continue
            wide.add(out)
        candidates[out] = (members, list(shape))

    # Outputs over rows of one shape share a launch: one read of the rows serves them all.
    grouped: dict[tuple[str, ...], list[int]] = {}
    for out in sorted(candidates):
        grouped.setdefault(tuple(candidates[out][1]), []).append(out)
    # an element-wise output of the rows' shape joins them too (an `InOut` row's new
    # value, `x * s`, beside sums of the old rows: each thread writes its own elements
    # after the workgroup's folds, `_write_in_place_is_safe`), where it comes before
    # the group's last output (so the group's place in the launch order stays)
    for out in plain:
        key = tuple(keys(out))
        if key in grouped and out < max(grouped[key]):
            grouped[key] = sorted([*grouped[key], out])
            candidates[out] = (set(), list(key))

    groups: dict[int, RowGroup] = {}
    for shape, outs in grouped.items():
        # every reduction read only inside the group, and written by it where it is an
        # output: an output needing one that is not keeps its own launches
        while outs:
            members = set().union(*(candidates[o][0] for o in outs))
            inside = members | set(outs)
            bad = {
                o
                for o in outs
                for m in candidates[o][0] - set(outs)
                if m in writes or readers.get(m, set()) - inside
            }
            if not bad:
                break
            outs = [o for o in outs if o not in bad]
        if not outs:
            continue
        # whatever reads the group's outputs launches after it
        place = max(outs)
        if any(t <= place for o in outs for t in readers.get(o, set()) - inside):
            continue
        row = list(shape)
        ordered = sorted(outs, key=lambda o: keys(o) != row)
        roots = sorted(by_target[m] for m in members)
        # a lone reduction keeps its `reduce` launch (a thread per row when rows are short),
        # a softmax written as it is its `softmax` launch; a softmax beside another root,
        # or read by an output (the label's log-probability of a cross-entropy), joins; so
        # does a lone reduction whose per-row value a whole reduction reads (an accuracy)
        softmax = any(root_kind(kg, r) == "softmax" for r in roots)
        alone = len(roots) == 1 and ordered == [epilogue[roots[0]]]
        lone = not set(outs) & totals
        whole = keys(ordered[0]) == row or ordered[0] in wide
        if (len(roots) > 1 or whole or softmax or not lone) and not (softmax and alone):
            outside = {o: readers.get(o, set()) - inside for o in ordered}
            groups[place] = RowGroup(roots, ordered, outside, wide & set(ordered))
    # what a group reads from other launches is written before it: drop a group placed
    # before a group it reads from, until none is
    while True:
        at = {o: p for p, group in groups.items() for o in group.outputs}
        late = []
        for p, group in groups.items():
            inside = set(group.outputs) | {epilogue[r] for r in group.roots}
            if any(at.get(m, m) >= p for o in inside for m in computing[o] - inside):
                late.append(p)
        if not late:
            return groups
        for p in late:
            del groups[p]


def refuse_oversized(
    dims: list[Dim], buffers: list[BufferSpec], span: Any, grid: Size | None = None
) -> None:
    """Refuse a kernel when a size it puts in a `u32` can exceed 2**32 - 1.

    Each dim is a `u32` uniform field; element counts, axis sizes and the grid are
    32-bit index arithmetic. A size is refused when some admissible binding (the dims'
    `min` and `max`) overflows; with an unbounded dim the runtime checks at launch.
    """
    by_name = {d.name: d for d in dims}
    for d in dims:
        value = sz.u32_overflow(d, by_name)
        if value is not None:
            raise RefusalError(
                CANNOT_SCHEDULE,
                f"dim `{d.name}` can be {value}, more than its u32 uniform field holds "
                "(at most 2**32 - 1); declare a smaller `max`",
                span,
            )
    for b in buffers:
        total = sz.product(list(b.shape))
        for size in (total, *b.shape):
            value = sz.u32_overflow(size, by_name)
            if value is None:
                continue
            shown = "" if isinstance(size, int) else f"{sz.manifest_text(size)} = "
            what = "elements" if size is total else "on one axis"
            raise RefusalError(
                CANNOT_SCHEDULE,
                f"`{b.name}` can have {shown}{value} {what}; indices are 32-bit, so at most "
                "2**32 - 1",
                span,
            )
    if grid is not None and (value := sz.u32_overflow(grid, by_name)) is not None:
        raise RefusalError(
            CANNOT_SCHEDULE,
            f"the grid can have {value} program ids; they are 32-bit, so at most 2**32 - 1",
            span,
        )


# A merged launch binds at most this many storage buffers: WebGPU's guaranteed
# `maxStorageBuffersPerShaderStage`, the smallest limit of any backend.
MERGE_BUFFER_LIMIT = 8


def _merge_elementwise(
    ev: Any, g: nx.DiGraph, plans: list[Plan], node_buffers: dict[int, str]
) -> list[Plan]:
    """One launch for adjacent element-wise results of one shape (`return a + b, a - b`):
    each thread writes all of them. A later one may read an earlier one through
    element-wise ops of that shape (an Adam step's parameter from its new moments): the
    thread computes it once, in registers, for both (a launch never reads what it
    writes: `KernelContext`), and `_write_in_place_is_safe` looks through it."""

    def reads(n: int) -> set[str]:
        found, stack, seen = set(), list(g.predecessors(n)), set()
        while stack:
            m = stack.pop()
            if m in seen:
                continue
            seen.add(m)
            if m in node_buffers:
                found.add(node_buffers[m])
            else:
                stack.extend(g.predecessors(m))
        return found

    def keys(n: int) -> list[str]:
        return [sz.key(s) for s in ev.shape(n)]

    def read_in_place(n: int, later: int) -> bool:
        """Whether `later` reads `n` (if at all) only at its own element: every node
        between them element-wise, of their shape."""
        if n not in nx.ancestors(g, later):
            return True
        between = (nx.descendants(g, n) & nx.ancestors(g, later)) | {later}
        return all(op_kind(ev.kg, m) in _FUSIBLE and keys(m) == keys(n) for m in between)

    out: list[Plan] = []
    for plan in plans:
        head = out[-1] if out else None
        if (
            head is not None
            and plan.kind == head.kind == "ew"
            and not head.copy
            and not plan.copy
            and keys(plan.node) == keys(head.node)
            and all(read_in_place(n, plan.node) for n, _ in head.outputs())
        ):
            group = [*head.outputs(), (plan.node, plan.writes)]
            buffers = set().union(*(reads(n) | set(w) for n, w in group))
            if len(buffers) <= MERGE_BUFFER_LIMIT:
                head.also.append((plan.node, plan.writes))
                continue
        out.append(plan)
    return out


def _merge_whole_reductions(
    ev: Any, g: nx.DiGraph, plans: list[Plan], node_buffers: dict[int, str], in_place: set[str]
) -> list[Plan]:
    """One pass over the elements for adjacent whole reductions of inputs of one shape
    (`x.max(), x.min()`) and the element-wise outputs of that shape beside them
    (`return y, y.sum()`): each workgroup folds its chunk into a partial per reduction
    and stores the element-wise outputs at the elements it reads.

    The pass is the first reduction's one-launch `reduce`, or its `partial` (then its
    `reduce` combines every reduction's partials): it takes the other reductions' plans
    as `Plan.reductions` and the element-wise outputs as `Plan.elements`. A member reads
    another's value only at its own element (computed once, in registers), never a
    reduction's result; an `InOut` write keeps its own launch.

    Reductions over the same leading axes of one input (`x.mean(axis=0), x.max(axis=0)`)
    share their column pass the same way (`reductions._columns`)."""
    from mimir.codegen.reductions import column_layout

    def keys(n: int) -> list[str]:
        return [sz.key(s) for s in ev.shape(n)]

    def whole(plan: Plan) -> list[str] | None:
        """The input's shape, for a split reduction over every axis of size other than 1."""
        if plan.kind != "partial" and (plan.kind not in _WHOLE_ENDS or plan.partials is None):
            return None
        assert plan.root is not None
        if root_kind(ev.kg, plan.root) not in _WHOLE_ENDS:
            return None
        red = ev.reduction(plan.root)
        # every other axis of size 1 (`x.sum(axis=1)` of a (1, N) x): element r is at r
        if any(sz.key(red.shape[k]) != "1" for k in red.kept) or red.axes != sorted(red.axes):
            return None
        return keys(ev.resolve(red.x))

    def local(n: int, later: int, shape: list[str]) -> bool:
        """Whether `later` reads `n` (if at all) only at its own element."""
        if n == later or n not in nx.ancestors(g, later):
            return True
        between = (nx.descendants(g, n) & nx.ancestors(g, later)) | {later}
        return all(op_kind(ev.kg, m) in _FUSIBLE and keys(m) == shape for m in between)

    def joins(first: Plan, shape: list[str], at_element: list[int], after: int | None) -> bool:
        """Whether a member may join the pass `first` (or the element-wise launch `first`,
        which the member's pass would take in): what it computes at each element
        (`at_element`: an output, a reduction's input) reads the pass's values only at
        that element, and nothing it computes (nor its reduction's epilogue, `after`)
        reads a reduction's result, known only at the end."""
        roots = [r for r in [first.root, *(m.root for m in first.reductions)] if r is not None]
        for n in [*at_element, *([after] if after is not None else [])]:
            if any(r == n or r in nx.ancestors(g, n) for r in roots):
                return False
        values = [o for o, _ in first.computed() if o not in roots]
        return all(local(o, n, shape) for n in at_element for o in values)

    def var(plan: Plan) -> bool:
        """A `var` / `std`: it leads its pass (`_moment_chunk` folds the others)."""
        return plan.root is not None and root_kind(ev.kg, plan.root) == "moments"

    def writes_in_place(group: list[Plan]) -> bool:
        return any(set(bufs) & in_place for p in group for _, bufs in p.computed())

    def column(plan: Plan) -> tuple[Any, ...] | None:
        """A column reduction's input shape, axes and launch form (`_columns`)."""
        if plan.kind not in ("partial", "reduce", "moments") or plan.root is None:
            return None
        if root_kind(ev.kg, plan.root) not in ("reduce", "moments"):
            return None
        red = ev.reduction(plan.root)
        if column_layout(red) is None:
            return None
        form = (plan.kind == "partial", plan.counter is not None, plan.partials is not None)
        return tuple(sz.key(s) for s in red.shape), tuple(red.axes), form

    def column_pass(group: list[Plan]) -> list[Plan] | None:
        """The launches of the column pass just before `group` (a column reduction's)
        that it may join: the same input shape, axes and launches, and a `var` at most
        among them (it leads: `_column_moments` folds the others)."""
        lead = out[-len(group) :] if len(out) >= len(group) else []
        if not lead or [column(p) for p in lead] != [column(p) for p in group]:
            return None
        if lead[0].root != lead[-1].root:
            return None
        plans = [lead[0], *lead[0].reductions, group[0]]
        if sum(root_kind(ev.kg, p.root or 0) == "moments" for p in plans) > 1:
            return None
        return lead

    out: list[Plan] = []
    k = 0
    while k < len(plans):
        plan = plans[k]
        # the launches of one reduction: `partial` and `reduce`, or the one-launch `reduce`
        group = plans[k : k + 2] if plan.kind == "partial" else [plan]
        one = plan.kind in _WHOLE_ENDS and plan.counter is not None
        head = out[-1] if out else None
        # the pass before: the launch that reads the elements (its combining `reduce` is
        # `head` after a `partial`)
        first = None
        final = head is not None and head.kind in _WHOLE_ENDS
        if head is not None and final and head.counter is not None:
            first = head
        elif head is not None and final and head.partials is not None:
            if len(out) > 1 and out[-2].kind == "partial" and out[-2].root == head.root:
                first = out[-2]
        lead = column_pass(group) if column(plan) is not None else None
        if lead is not None and not writes_in_place([*group, *lead]):
            assert plan.root is not None
            x = ev.resolve(ev.reduction(plan.root).x)
            if joins(lead[0], keys(x), [x], group[-1].node):
                if root_kind(ev.kg, plan.root) == "moments":  # the var leads the pass
                    for into, member in zip(lead, group, strict=True):
                        member.reductions = [into, *into.reductions]
                        into.reductions = []
                    out[-len(group) :] = group
                else:
                    for into, member in zip(lead, group, strict=True):
                        into.reductions.append(member)
                k += len(group)
                continue
        shape = whole(plan) if plan.kind == "partial" or one else None
        if head is not None and shape is not None and not writes_in_place([*group, head]):
            assert plan.root is not None
            x, after = [ev.resolve(ev.reduction(plan.root).x)], group[-1].node
            same = first is not None and (first is head) == one
            if same and whole(first) == shape and joins(first, shape, x, after):
                assert first is not None
                lead = [first] if first is head else [first, head]
                if not var(plan):
                    for into, member in zip(lead, group, strict=True):
                        into.reductions.append(member)
                    k += len(group)
                    continue
                if not any(var(p) for p in [first, *first.reductions]):
                    # a `var` leads the pass: `_moment_chunk` folds the others beside its
                    # sums, and stores the element-wise outputs in its first read
                    for into, member in zip(lead, group, strict=True):
                        member.reductions, into.reductions = [into, *into.reductions], []
                    group[0].elements, first.elements = first.elements, []
                    out[-len(group) :] = group
                    k += len(group)
                    continue
            ew = head.kind == "ew" and not head.copy and head.total is None
            if ew and keys(head.node) == shape and joins(head, shape, x, after):
                out.pop()  # its outputs are stored by this pass
                plan.elements = head.outputs()
                out.extend(group)
                k += len(group)
                continue
        ew = plan.kind == "ew" and not plan.copy and plan.total is None
        if ew and first is not None and not writes_in_place([plan, first]):
            shape = keys(plan.node)
            if whole(first) == shape and joins(first, shape, [n for n, _ in plan.outputs()], None):
                first.elements.extend(plan.outputs())
                k += 1
                continue
        out.extend(group)
        k += len(group)
    return out


def fused_reads(
    g: nx.DiGraph, n: int, node_buffers: dict[int, str], inline: set[int] | frozenset = frozenset()
) -> set[int]:
    """The nodes a launch computing `n` walks through (stopping at values in buffers, but
    for the launch's other outputs, `inline`, which it computes)."""
    found, stack = set(), [n]
    while stack:
        m = stack.pop()
        if m in found:
            continue
        found.add(m)
        if m != n and m in node_buffers and m not in inline:
            continue
        stack.extend(g.predecessors(m))
    return found


def _write_in_place_is_safe(
    ev: Any,
    g: nx.DiGraph,
    plans: list[Plan],
    node_buffers: dict[int, str],
    param: int,
    name: str,
    mirror: bool = False,
) -> bool:
    """Whether storing an `InOut` parameter's new value straight into its buffer is safe.

    It is when no launch after the writing one reads the old value, and the writing launch
    reads the old value only at the element its thread stores (through element-wise ops of
    the parameter's shape: the thread loads before it stores, and no other thread touches
    that element), or, in a `row` launch, in the reductions of the rows (element-wise of
    the parameter's shape too: each workgroup folds its own rows before it writes).

    With `mirror`: whether it is safe for a launch whose threads own an element of a square
    matrix and its mirror image (`Plan.mirror`): the writing launch is element-wise with
    that one output, and reads the old value at the element or at its transpose."""
    writer = next(k for k, p in enumerate(plans) for _, bufs in p.computed() if name in bufs)
    key = [sz.key(s) for s in ev.shape(param)]
    after = nx.descendants(g, param)  # what reads the old value, directly or not
    # a thread per row stores its whole row after computing all of it: it may read the
    # old row anywhere (`p = p @ r`, through a `@` by a small matrix)
    whole_rows = row_per_thread(ev, g, plans[writer], node_buffers)
    if mirror:
        plan = plans[writer]
        square = len(key) == 2 and key[0] == key[1]
        if not square or plan.kind != "ew" or plan.copy or len(plan.computed()) != 1:
            return False

    def own_element(m: int, axes: list[int | None], stop: set[int]) -> bool:
        """Whether `m` at an element reads the parameter only at the element the thread
        stores (or at its mirror image, with `mirror`): `axes[k]` is the stored element's
        axis that m's axis k is."""
        if m == param:
            mine = axes == list(range(len(key))) or (mirror and axes == [1, 0])
            row = whole_rows and bool(key) and axes == [*range(len(key) - 1), None]
            return (mine or row) and [sz.key(s) for s in ev.shape(m)] == key
        if m not in after or m in stop:
            return True
        if op_kind(ev.kg, m) == "rowmix":
            # x @ w at an element reads x anywhere along the element's row (axis None);
            # w is a parameter other than an `InOut` one (`small_matmul`)
            x = ev.resolve(ev.node(m)["inputs"][0])
            same = len(ev.shape(x)) == len(axes)
            return whole_rows and same and own_element(x, [*axes[:-1], None], stop)
        if op_kind(ev.kg, m) == "transpose":
            perm = ev.permutation(m)  # m's axis k is axis perm[k] of its input
            inner = [0] * len(perm)
            for k, p in enumerate(perm):
                inner[p] = axes[k]
            return own_element(ev.resolve(ev.node(m)["inputs"][0]), inner, stop)
        if op_kind(ev.kg, m) not in _FUSIBLE:
            return False
        mine = [sz.key(s) for s in ev.shape(m)]
        for i in {ev.resolve(i) for i in g.predecessors(m)}:
            # an input read at another element (broadcast) would be another thread's
            if i in after | {param} and [sz.key(s) for s in ev.shape(i)] != mine:
                return False
            if not own_element(i, axes, stop):
                return False
        return True

    for k, plan in enumerate(plans[writer:], start=writer):
        inline = {n for n, _ in plan.computed()}
        for node, _ in plan.computed():
            region = fused_reads(g, node, node_buffers, inline)
            if param not in region:
                continue
            if k > writer or plan.kind not in ("ew", "row") or plan.copy:
                return False
            # values in other buffers are loaded; a row launch's reductions fold its
            # workgroup's own rows, every one of them before any element is written
            stop = {m for m in node_buffers if m != node and m not in inline} | set(plan.roots)
            # the reductions' inputs: at their own elements, so each fold reads its own rows
            starts = [node, *{ev.resolve(i) for r in plan.roots for i in g.predecessors(r)}]
            for m in starts:
                if isinstance(ev.values[m], TensorVal):
                    if not own_element(m, list(range(len(ev.shape(m)))), stop):
                        return False
    return True


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


def _dims(kernel: Any) -> list[Dim]:
    """The dims the parameters bind, in order of first appearance, with their constraints."""
    declared = kernel.info.dims
    found: list[Dim] = []
    for _, ann, _ in kernel.graph.params:
        if not isinstance(ann, TensorAnnotation):
            continue
        for d in ann.dims:
            if isinstance(d, int):
                continue
            for dim in d.dims():
                if dim not in found:
                    found.append(declared[dim.name].dim if dim.name in declared else dim)
    return found
