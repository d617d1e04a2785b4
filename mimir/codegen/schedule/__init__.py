"""Scheduling a proven kernel graph into launches (ARCHITECTURE.md, "The pipeline").

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
`row` launch computes per row ends that launch there (`Row.total`). A bfloat16 result is
stored as float32 and packed two to a word by a launch of its own (`schedule.packing`).

`schedule()` is the named passes of `PASSES` run in order over one `State`
(`schedule.state`), then `limits.finish`. Planning decides which launches and which kind
(`schedule.plan.PlanKind`); building each kind's kernel is `mimir.codegen.kernels`, which
imports this package, never the other way round.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from mimir.codegen.schedule import (
    attention,
    inplace,
    launches,
    limits,
    merge,
    narrow,
    operand_sums,
    packing,
)
from mimir.codegen.schedule.limits import kernel_dims, refuse_oversized
from mimir.codegen.schedule.plan import BufferSpec, Plan, PlanKind, Schedule
from mimir.codegen.schedule.state import State, Target
from mimir.codegen.tensors import Evaluator

__all__ = [
    "PASSES",
    "BufferSpec",
    "Plan",
    "PlanKind",
    "Schedule",
    "Target",
    "refuse_oversized",
    "schedule",
]

Pass = Callable[[State], State]

# The scheduler, in order: each pass takes the state the one before left.
PASSES: tuple[tuple[str, Pass], ...] = (
    ("outputs", launches.find_outputs),
    ("epilogues", launches.fuse_epilogues),
    ("buffers", launches.allocate_buffers),
    ("row groups", launches.group_rows),
    ("launches", launches.plan_launches),
    ("sort lengths", limits.refuse_long_sorts),
    ("narrow softmax", narrow.fold_softmax),
    ("narrow row reductions", narrow.fold_row_reductions),
    ("operand sums", operand_sums.fold_operand_sums),
    ("stored values", launches.record_stored),
    ("element-wise merges", merge.merge_elementwise),
    ("whole-reduction passes", merge.merge_whole_reductions),
    ("attention", attention.fuse_attention),
    ("scores softmax", attention.fuse_scores_softmax),
    ("paired products", attention.pair_products),
    ("shared counters", merge.share_counters),
    ("in-place updates", inplace.write_in_place),
    ("bfloat16 packing", packing.pack_bfloat16),
)


# Nodes that only check a call (an `einsum`'s spec, an inlined function's arguments) and
# compute nothing: they read the operands, so the scheduler would count them as readers,
# and `einsum("ts,sd->td", p, v)` would not fuse where `p @ v` does.
CHECK_ONLY = ("einsum", "bind")


def computing(kernel: Any) -> Any:
    """`kernel` (a `CheckedKernel`) with the check-only nodes (`CHECK_ONLY`) left out of its
    graph: the graph the scheduler and the builders read, where every node computes."""
    graph = kernel.graph.graph
    checks = [n for n, kind in graph.nodes(data="kind") if kind in CHECK_ONLY]
    if not checks:
        return kernel
    pruned = graph.copy()
    pruned.remove_nodes_from(checks)
    return replace(kernel, graph=replace(kernel.graph, graph=pruned))


def schedule(
    kernel: Any, one_launch: bool = False, vector_views: bool = False, tagged: bool = False
) -> Schedule:
    """The launches of `kernel` (a `CheckedKernel`). `one_launch`: the target has atomics
    that return the old value and a way to hand values between workgroups, so a split
    reduction is one launch (module docstring): a device-scope fence, or with `tagged`
    values published in tagged atomic words (`ir.Publish`; WGSL). `vector_views`: the
    target may read one buffer 4 wide and one element at a time (`Backend.vector_views`)."""
    kernel = computing(kernel)
    declared = {d.name: d for d in kernel_dims(kernel)}
    target = Target(one_launch=one_launch, tagged=tagged, vector_views=vector_views)
    st = State(kernel, Evaluator(kernel), target, declared)
    for _, run in PASSES:
        st = run(st)
    return limits.finish(st)
