"""What the scheduler's passes share: the graph, what the target can do, and what is planned.

`schedule()` runs its passes (`PASSES`) in order over one `State`; each pass returns the
state it leaves, with new lists where it changes them. The first passes fill in what a
launch needs (the outputs, each root's epilogue, the buffers, the row groups), then
`plan_launches` makes the plans, and the later passes merge and fuse them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from mimir.codegen import sizes as sz
from mimir.codegen.schedule.plan import BufferSpec, Plan
from mimir.codegen.schedule.rows import RowGroup
from mimir.codegen.tensors import Evaluator
from mimir.dims import Dim
from mimir.dtypes import DType, uint32


@dataclass(frozen=True)
class Target:
    """What the target can do that changes the launches (`Backend`'s flags)."""

    # a split whole reduction is one launch: the target has atomics that return the old
    # value and a way to hand values between workgroups
    one_launch: bool = False
    # ... the handed values published in tagged atomic words (`ir.Publish`; WGSL), not
    # ordered by a device-scope fence
    tagged: bool = False
    # one buffer may be read 4 wide and one element at a time (`Backend.vector_views`)
    vector_views: bool = False


@dataclass
class State:
    kernel: Any  # the CheckedKernel
    ev: Evaluator  # shapes, dtypes and reductions of the graph's nodes (no body)
    target: Target
    declared: dict[str, Dim]  # the dims the parameters bind, with their constraints
    # what the function returns, (node, output name), and its `InOut` updates, (new
    # value, parameter name)
    outputs: list[tuple[int, str]] = field(default_factory=list)
    updates: list[tuple[int, str]] = field(default_factory=list)
    live: set[int] = field(default_factory=set)  # the nodes any result depends on
    epilogue: dict[int, int] = field(default_factory=dict)  # root -> the node it writes
    # an epilogue that ends in layout ops only: its last node -> the node before them
    folded: dict[int, int] = field(default_factory=dict)
    buffers: list[BufferSpec] = field(default_factory=list)
    node_buffers: dict[int, str] = field(default_factory=dict)  # node -> its buffer
    scalar_params: list[tuple[str, str]] = field(default_factory=list)  # (name, i32|f32)
    writes: dict[int, list[str]] = field(default_factory=dict)  # node -> buffers it is stored in
    # row launches, at the node each is placed at; per-row values a whole reduction reads
    # (value -> the reduction), and those a row launch ends with (`Row.total`)
    rows: dict[int, RowGroup] = field(default_factory=dict)
    per_row: dict[int, int] = field(default_factory=dict)
    fused: dict[int, int] = field(default_factory=dict)
    targets: list[int] = field(default_factory=list)  # the nodes launches write, in order
    plans: list[Plan] = field(default_factory=list)
    # a one-launch reduction's buffers handed off in tagged words: name -> element count
    tagged_sizes: dict[str, Any] = field(default_factory=dict)
    taken: set[str] = field(default_factory=set)  # buffer names in use
    scratch: int = 0  # the number of the next scratch buffer

    @property
    def kg(self) -> Any:
        return self.kernel.graph

    @property
    def g(self) -> nx.DiGraph:
        return self.kernel.graph.graph

    @property
    def in_place(self) -> set[str]:
        """The `InOut` parameters the function updates."""
        return {name for _, name in self.updates}

    def unique(self, name: str) -> str:
        """`name`, or `name_`, `name__`... where it is taken; taken from now on."""
        while name in self.taken:
            name += "_"
        self.taken.add(name)
        return name

    def scratch_name(self) -> str:
        """The name of a new scratch buffer (`scratchK`)."""
        name = self.unique(f"scratch{self.scratch}")
        self.scratch += 1
        return name

    def handoff_buffer(self, name: str, dtype: DType, size: Any) -> BufferSpec:
        """A buffer whose elements a one-launch reduction's workgroups hand to its last:
        as it is where the target has a fence, else (`tagged`) two zeroed `u32` words an
        element (`ir.Publish`), its element count in `tagged_sizes`."""
        if not self.target.tagged:
            return BufferSpec(name, "scratch", dtype, (size,))
        self.tagged_sizes[name] = size
        return BufferSpec(name, "scratch", uint32, (sz.product([2, size]),), zero=True)
