"""Thread layouts the scheduler decides and the kernel builders follow.

The planner asks these questions to choose launches (is a reduction split over workgroups,
is it a column reduction, how many workgroups a row launch has); the builder of each kind of
kernel asks the same ones to lay out its threads. Both import them from here, so neither
imports the other.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import networkx as nx

from mimir.codegen import sizes as sz
from mimir.codegen.schedule.plan import Elementwise, Plan
from mimir.codegen.schedule.roots import fused_reads, op_kind, root_kind
from mimir.codegen.tensors import Evaluator, Reduction
from mimir.dtypes import bool_, float16, float32, uint32

WG = 256


SERIAL_REDUCE_MAX = 32


CHUNK = 4096  # elements per workgroup in a `partial` launch (32 per thread)


SPLIT_WG = 128  # threads of a split reduction's workgroups (Triton's 4 warps of a 4096 block)


SPLIT_MIN = 16384  # a literal count up to this is reduced by one workgroup, unsplit


def split(red: Reduction) -> bool:
    """Whether a reduction is split over several workgroups (`partial`, then `reduce`):
    when it reduces to one element, unless its count is a literal one group handles."""
    single = sz.key(red.outputs) == "1"
    return single and not (isinstance(red.count, int) and red.count <= SPLIT_MIN)


COLUMNS = 32  # columns of a column workgroup: a warp reads 32 consecutive elements of a row


COLUMN_LANES = 4  # ... and its threads per column, each folding every 4th row: 128


# threads, the size of the row and split launches, so they can run side by side
# (`side_by_side`); a thread folds 64 rows of a slab, 4 loads in flight (`strided`)
SLAB = 256  # rows a column workgroup folds (64 a thread) before it stores its partial


def column_layout(red: Reduction) -> tuple[Any, Any, Any] | None:
    """(outer, count, inner) of a reduction over a run of consecutive axes before the
    last, with more than one element after them and more than `SERIAL_REDUCE_MAX` in the
    run (`x.sum(axis=0)` of an (N, M) tensor: 1, N, M): element r of output element
    (a, col) is at (a * count + r) * inner + col, so consecutive columns are consecutive
    in memory (`kernels.columns.column_pass`). None for any other reduction."""
    axes, rank = list(red.axes), len(red.shape)
    if not axes or axes != list(range(axes[0], axes[-1] + 1)) or axes[-1] == rank - 1:
        return None
    inner = sz.product(list(red.shape[axes[-1] + 1 :]))
    if (isinstance(inner, int) and inner == 1) or (
        isinstance(red.count, int) and red.count <= SERIAL_REDUCE_MAX
    ):
        return None
    return sz.product(list(red.shape[: axes[0]])), red.count, inner


def column_slabs(red: Reduction, dims: Any) -> bool:
    """Whether a column reduction (`column_layout`) may have more rows than a `SLAB`:
    then its workgroups store partials, which the last workgroup of each column tile (or
    a second launch) combines."""
    high = sz.upper_bound(red.count, dims)
    return high is None or high > SLAB


def slab_count(red: Reduction, dims: Any) -> Any:
    """A column reduction's slabs a column tile: one per `SLAB` rows, and one (with no
    rows, folding to the identity) where there may be none, so some workgroup of each
    tile writes its output."""
    if (sz.lower_bound(red.count, dims) or 0) >= 1:
        return sz.cdiv(red.count, SLAB)
    return sz.cdiv(sz.add(red.count, 1), SLAB)


def softmax_input(ev: Evaluator, r: int) -> tuple[int, int]:
    """A softmax node's input and the axis it normalises (non-negative)."""
    node = ev.node(r)
    x = node["inputs"][0]
    kw = dict(zip(node["keywords"], node["inputs"][1:], strict=True))
    axis = -1 if "axis" not in kw else ev.values[ev.resolve(kw["axis"])].sym.value
    return x, axis % len(ev.shape(x))


def row_shape(ev: Evaluator, r: int) -> tuple[Any, ...]:
    """The shape of the rows a `row` launch's root reduces (or normalises, a softmax)."""
    if root_kind(ev.kg, r) == "softmax":
        return tuple(ev.shape(softmax_input(ev, r)[0]))
    return tuple(ev.reduction(r).shape)


def row_launch_groups(ev: Evaluator, roots: list[int]) -> Any:
    """The workgroups of a `row` launch over the rows `roots` reduce: one a row, or one
    per `WG` rows of at most `SERIAL_REDUCE_MAX` elements (`kernels.rows`)."""
    shape = row_shape(ev, roots[0])
    rows = sz.product(list(shape[:-1]))
    short = isinstance(shape[-1], int) and shape[-1] <= SERIAL_REDUCE_MAX
    return sz.cdiv(rows, WG) if short else rows


def arg_reduction(ev: Evaluator, r: int) -> Reduction:
    """Root `r` (an argmax or argmin) as a reduction whose accumulator holds the values
    compared: bools as u32, float16 as f32."""
    red = ev.reduction(r)
    x_dtype = ev.dtype(red.x)
    acc = uint32 if x_dtype == bool_ else float32 if x_dtype == float16 else x_dtype
    return replace(red, acc=acc)


def row_per_thread(ev: Evaluator, g: nx.DiGraph, plan: Plan, node_buffers: dict[int, str]) -> bool:
    """Whether element-wise launch `plan` computes a `@` by a small matrix (`small_matmul`),
    each of whose elements reads a whole row of its left operand, and writes rows of a
    literal length of at most `SERIAL_REDUCE_MAX`: then a thread computes whole rows
    (`kernels.elementwise.by_rows`)."""

    if not isinstance(plan, Elementwise) or plan.mirror or plan.halves is not None or plan.copy:
        return False
    shape = ev.shape(plan.node)
    length = shape[-1] if shape else None
    if not isinstance(length, int) or length > SERIAL_REDUCE_MAX:
        return False
    region = set().union(*(fused_reads(g, n, node_buffers) for n, _ in plan.outputs()))
    return any(op_kind(ev.kg, m) == "rowmix" for m in region)


# A merged launch binds at most this many storage buffers: WebGPU's guaranteed
# `maxStorageBuffersPerShaderStage`, the smallest limit of any backend.
MERGE_BUFFER_LIMIT = 8
