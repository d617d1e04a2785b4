"""The scheduler's output: the launches of a function (`Plan`s), its buffers and dims.

`Schedule` is what every later stage reads: the kernel builders (`mimir.codegen.kernels`)
build one IR kernel per plan, and the manifest describes the buffers and the launches.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mimir.dims import Dim, Size
from mimir.dtypes import DType


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
    # found with this zeroed `u32` counter (`kernels.whole.last_block`)
    counter: str | None = None
    # a split argmax's: its chunks' first positions (`partials` holds their extrema)
    positions: str | None = None
    # a `narrow` launch that normalises the rows it computes: the softmax over them, whose
    # epilogue it writes (`narrow_softmax`); an `attention` launch's softmax
    softmax: int | None = None
    # a `matmul` launch's second product of the same left operand, which its epilogue
    # reads at each element it writes (SwiGLU's gate, `x @ w_gate`, beside `x @ w_up`):
    # computed in the same tile, never stored (`pair_products`, `kernels.matmul`)
    paired: int | None = None
    # an `attention` launch's first product (the scores `q @ k.T`, `fuse_attention`), or the
    # product a `scores_softmax` launch's softmax reads (`fuse_scores_softmax`)
    scores: int | None = None
    # ... and the last-axis reductions of the rows of its left operand it folds in the
    # same loop over k (`return h @ w, h.sum(axis=1)`), each a `reduce` plan of its own
    # (root, outputs) no longer launched (`narrow_row_reductions`)
    folds: list[Plan] = field(default_factory=list)
    # an in-place `x = f(x, x.T)` of a square x: each thread computes an element and its
    # mirror image across the diagonal before it stores either (`kernels.elementwise.mirrored`)
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
    # (`kernels.whole.whole_of_rows`)
    total: int | None = None
    total_outputs: list[tuple[int, list[str]]] = field(default_factory=list)
    # ... and its outputs over the same rows of another length (`concatenate((x,
    # x.sum(axis=1, keepdims=True)), axis=1)`), which the workgroup writes in a loop of
    # their own (`kernels.rows`)
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
