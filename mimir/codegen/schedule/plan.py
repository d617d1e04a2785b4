"""The scheduler's output: the launches of a function (`Plan`s), its buffers and dims.

`Schedule` is what every later stage reads: the kernel builders (`mimir.codegen.kernels`)
build one IR kernel per plan (`BUILDERS[plan.kind]`), and the manifest describes the
buffers and the launches.

Each kind of launch is one `PlanKind` and one dataclass, which holds the fields that mean
something for that kind only: a matmul's `paired` product, a whole reduction's `counter`,
a row launch's `roots`. A kind's value names its kernel's files (`NAME_K_<kind>.metal`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

from mimir.dims import Dim, Size
from mimir.dtypes import DType


class PlanKind(StrEnum):
    """Every kind of launch the scheduler plans."""

    ELEMENTWISE = "ew"  # element-wise results, no root of their own (`Elementwise`)
    MATMUL = "matmul"  # a tiled product
    NARROW = "narrow"  # a product by a matrix at most 16 columns wide: a fold per row
    ATTENTION = "attention"  # softmax(f(q @ k.T)) @ v, the scores never stored
    SCORES_SOFTMAX = "scores_softmax"  # softmax(f(q @ k.T)), the scores computed twice
    PARTIAL = "partial"  # the first launch of a split whole reduction: its partials
    REDUCE = "reduce"  # sum, mean, max, min
    MOMENTS = "moments"  # var, std
    ARGREDUCE = "argreduce"  # argmax, argmin
    SOFTMAX = "softmax"  # softmax, log_softmax over one row per workgroup
    SCAN = "scan"  # cumsum, cumprod
    SORT = "sort"  # sort, argsort: one row per workgroup, in workgroup memory
    ROW = "row"  # last-axis reductions of rows of one shape and what reads them
    GRID = "grid"  # an index-level function (`@gpu(grid=...)`)


# (node, the buffers it is stored into) of each value a launch stores
Outputs = list[tuple[int, list[str]]]


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
    """One launch: compute node `node` and store it into `writes`."""

    kind: ClassVar[PlanKind]
    node: int
    writes: list[str]  # buffers the kernel stores `node` into

    def outputs(self) -> Outputs:
        """The values the launch stores through its epilogue, and where."""
        return [(self.node, self.writes)]

    def computed(self) -> Outputs:
        """Every value the launch computes and stores, and where."""
        return self.outputs()


@dataclass
class Elementwise(Plan):
    """Element-wise results of one shape: every value no root launch writes."""

    kind: ClassVar[PlanKind] = PlanKind.ELEMENTWISE
    # more element-wise results of the same shape written by the same launch
    also: Outputs = field(default_factory=list)
    # a copy launch: `node` is already in a scratch buffer, and is stored into `writes`
    copy: bool = False
    # an in-place `x = f(x, x.T)` of a square x: each thread computes an element and its
    # mirror image across the diagonal before it stores either (`kernels.elementwise`)
    mirror: bool = False
    # an in-place `x = concatenate([f(x1, x2), g(x1, x2)], axis=-1)` of x's two halves
    # along the last axis (RoPE): the half's length; each thread computes element j of a
    # row and the one `halves` further before it stores either (`kernels.elementwise`)
    halves: Size | None = None
    # a packing launch: `node`, a bfloat16 value (with `copy`: held as float32 in scratch),
    # stored two elements to a u32 word by each thread (`schedule.packing`)
    pack: bool = False

    def outputs(self) -> Outputs:
        return [(self.node, self.writes), *self.also]


@dataclass
class Rooted(Plan):
    """A launch built around one root op (`schedule.roots.root_kind`): `node` is the
    root's epilogue, the last element-wise op its kernel applies before storing."""

    root: int


@dataclass
class Matmul(Rooted):
    kind: ClassVar[PlanKind] = PlanKind.MATMUL
    # a second product of the same left operand, which the epilogue reads at each element
    # it writes (SwiGLU's gate, `x @ w_gate`, beside `x @ w_up`): computed in the same
    # tile, never stored (`schedule.attention.pair_products`, `kernels.matmul`)
    paired: int | None = None
    # sums (or means) of an operand over the contraction axis (`dout.sum(axis=0)` beside
    # `dout.T @ inp`), each with the operand it sums: 0 the left one (a value per row,
    # stored by the workgroups of the first column of tiles), 1 the right one (a value per
    # column, by those of the first row). Each is the `reduce` plan no longer launched: the
    # launch adds up the values it stages (`schedule.operand_sums`, `kernels.matmul`)
    sums: list[tuple[int, Reduce]] = field(default_factory=list)

    def computed(self) -> Outputs:
        return [*self.outputs(), *(o for _, fold in self.sums for o in fold.outputs())]


@dataclass
class Narrow(Rooted):
    kind: ClassVar[PlanKind] = PlanKind.NARROW
    # the logits, where they are an output beside the softmax that normalises them
    also: Outputs = field(default_factory=list)
    # the softmax over the rows it computes, whose epilogue it writes
    # (`schedule.narrow.narrow_softmax`)
    softmax: int | None = None
    # the last-axis reductions of the rows of its left operand it folds in the same loop
    # over k (`return h @ w, h.sum(axis=1)`), each a `reduce` or `row` plan of its own no
    # longer launched (`schedule.narrow.narrow_row_reductions`)
    folds: list[Reduce | Row] = field(default_factory=list)

    def outputs(self) -> Outputs:
        return [(self.node, self.writes), *self.also]

    def computed(self) -> Outputs:
        return [*self.outputs(), *(o for m in self.folds for o in m.outputs())]


@dataclass
class Attention(Rooted):
    """`softmax(f(scores)) @ v`: `root` the second product, `scores` the first (`q @ k.T`),
    `x` the softmax's input f(scores), `softmax` the probabilities between them (a
    softmax of x, or `exp(x - lse[..., None])`) (`schedule.attention.fuse_attention`)."""

    kind: ClassVar[PlanKind] = PlanKind.ATTENTION
    scores: int
    softmax: int
    x: int
    # each row's log-sum-exp of x, `max + log(sum(exp(x - max)))`, and where it is stored
    # (FlashAttention-2's L, returned beside the output): computed from the online
    # softmax's running max and sum
    lse: Outputs = field(default_factory=list)

    def computed(self) -> Outputs:
        return [*self.outputs(), *self.lse]


@dataclass
class ScoresSoftmax(Rooted):
    """`softmax(f(scores))`: `root` the softmax, `scores` the product it reads
    (`schedule.attention.fuse_scores_softmax`)."""

    kind: ClassVar[PlanKind] = PlanKind.SCORES_SOFTMAX
    scores: int


@dataclass
class Softmax(Rooted):
    kind: ClassVar[PlanKind] = PlanKind.SOFTMAX


@dataclass
class Scan(Rooted):
    kind: ClassVar[PlanKind] = PlanKind.SCAN


@dataclass
class Sort(Rooted):
    kind: ClassVar[PlanKind] = PlanKind.SORT


@dataclass
class Fold(Rooted):
    """A reduction's launch (`reduce`, `moments`, `argreduce`), or the `partial` launch of a
    whole one split over workgroups, whose partials it stores in `writes[0]`."""

    # a launch that combines the partials of a split whole reduction, in this buffer: a
    # `partial` launch's, or (with `counter`) its own workgroups'
    partials: str | None = None
    # ... which the last workgroup to finish combines, found with this zeroed `u32`
    # counter (`kernels.whole.last_block`)
    counter: str | None = None
    # a split argmax's: its chunks' first positions (`partials` holds their extrema)
    positions: str | None = None
    # a whole pass: more whole reductions of inputs of the same shape, folded in the same
    # pass over the elements (`return x.max(), x.min()`), each its own plan
    reductions: list[Fold] = field(default_factory=list)
    # ... and the element-wise outputs of that shape it writes at each element it folds
    # (`return y, y.sum()`: y is stored and summed by one read of x)
    elements: Outputs = field(default_factory=list)

    def computed(self) -> Outputs:
        more = [o for m in self.reductions for o in m.outputs()]
        return [*self.outputs(), *self.elements, *more]

    @property
    def partials_buffer(self) -> str | None:
        """Where the partials of a split whole reduction are: the `partial` launch's
        output, or what a later launch combines (`partials`)."""
        return self.writes[0] if self.kind == PlanKind.PARTIAL else self.partials


@dataclass
class Partial(Fold):
    kind: ClassVar[PlanKind] = PlanKind.PARTIAL


@dataclass
class Reduce(Fold):
    kind: ClassVar[PlanKind] = PlanKind.REDUCE


@dataclass
class Moments(Fold):
    kind: ClassVar[PlanKind] = PlanKind.MOMENTS


@dataclass
class ArgReduce(Fold):
    kind: ClassVar[PlanKind] = PlanKind.ARGREDUCE


# a reduction's launch by the kind of its root (`schedule.roots.root_kind`)
FOLDS: dict[str, type[Fold]] = {"reduce": Reduce, "moments": Moments, "argreduce": ArgReduce}


@dataclass
class Row(Plan):
    """Outputs computed with last-axis reductions of rows of one shape, in one launch
    (`schedule.rows`): `node` the first output."""

    kind: ClassVar[PlanKind] = PlanKind.ROW
    # the last-axis reductions it computes per row, in order, before writing `node` (layer
    # norm: the mean, then the variance)
    roots: list[int] = field(default_factory=list)
    # ... and what each root's element-wise epilogue makes of it (`rsqrt(var + eps)`),
    # computed once per row
    row_values: list[int] = field(default_factory=list)
    # more outputs of the launch
    also: Outputs = field(default_factory=list)
    # its outputs over the same rows of another length (`concatenate((x, x.sum(axis=1,
    # keepdims=True)), axis=1)`), which the workgroup writes in a loop of their own
    wide: list[int] = field(default_factory=list)
    # a whole reduction of a value it computes per row (a cross-entropy's mean loss): the
    # reduction, and its epilogue's outputs. Each workgroup stores its rows' share in
    # `partials`; the last, found with `counter`, combines them (`kernels.whole`)
    total: int | None = None
    total_outputs: Outputs = field(default_factory=list)
    partials: str | None = None
    counter: str | None = None

    def outputs(self) -> Outputs:
        return [(self.node, self.writes), *self.also]

    def computed(self) -> Outputs:
        return [*self.outputs(), *self.total_outputs]


@dataclass
class Grid(Plan):
    """An index-level function's one launch (`kernels.index_level`)."""

    kind: ClassVar[PlanKind] = PlanKind.GRID


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
    # a product's result stored through layout ops alone (`(a @ b).T`, attention's heads
    # merged): the stored node -> the node before them, which the launch computes at its
    # own position and stores at the re-indexed one (`launches._layout_tail`)
    folded: dict[int, int] = field(default_factory=dict)


# the launch of each root kind (`schedule.roots.root_kind`)
ROOTED: dict[str, type[Rooted]] = {
    "matmul": Matmul,
    "narrow": Narrow,
    "softmax": Softmax,
    "scan": Scan,
    "sort": Sort,
    **FOLDS,
}
