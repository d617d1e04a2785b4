"""`sum mean max min`: the `reduce` launch, and a split reduction's `partial` launch.

- one workgroup per output element: its threads stride over the reduced elements (any
  count, any axes), then combine over the workgroup (`warp.group_total`). When the reduced
  count is a literal of at most `SERIAL_REDUCE_MAX`, one thread per output element loops
  instead. `mean` divides by the count.
- a reduction over leading axes (`x.sum(axis=0)`): column tiles (`columns`).
- a reduction to one element of a large or symbolic count (`schedule.layout.split`): the
  chunks and their partials (`whole`), one launch where the target can hand off between
  workgroups, else `partial`, then `reduce` combines the partials.

Sums accumulate in the result dtype (f32 for float16), max/min of bools in u32.
"""

from __future__ import annotations

from typing import Any

from mimir.codegen import sizes as sz
from mimir.codegen.builder import ibin, size_ir, u32
from mimir.codegen.ir import Binary, Builtin
from mimir.codegen.kernels.columns import column_pass
from mimir.codegen.kernels.context import Built, KernelContext, row_width
from mimir.codegen.kernels.folds import (
    element_reader,
    fold_elements,
    row_base,
    tree_total,
    write_total,
)
from mimir.codegen.kernels.loops import row_elements
from mimir.codegen.kernels.whole import combine_partials, last_block, members_of, partial_pass
from mimir.codegen.schedule.layout import (
    SERIAL_REDUCE_MAX,
    SPLIT_WG,
    WG,
    column_layout,
)
from mimir.codegen.schedule.plan import Rooted


def partial(c: KernelContext) -> Built:
    """The `partial` launch of a split reduction: each workgroup reduces CHUNK consecutive
    elements into `partials[group]` (with `Fold.reductions`, each reduction into its own;
    `partial_pass`), or, over leading axes, a slab of rows of a column tile (`column_pass`)."""
    assert isinstance(c.plan, Rooted)
    red = c.ev.reduction(c.plan.root)
    if column_layout(red) is not None:
        return column_pass(c, red)
    dispatch, _ = partial_pass(c, members_of(c))
    return (SPLIT_WG, 1, 1), dispatch


def build(c: KernelContext) -> Built:
    assert isinstance(c.plan, Rooted)
    red = c.ev.reduction(c.plan.root)
    body = c.body
    lid = Builtin("local_x")
    if column_layout(red) is not None:
        return column_pass(c, red)
    if c.plan.counter is not None:
        return last_block(c, red)
    if c.plan.partials is not None:
        # Combine the partial results of the `partial` launch.
        dispatch, o = c.groups(1)
        combine_partials(c, members_of(c), o, "$partial")
        return (SPLIT_WG, 1, 1), dispatch
    count, outputs = red.count, red.outputs
    if isinstance(count, int) and count <= SERIAL_REDUCE_MAX:
        # Few elements per output: one thread per output element, no threadgroup memory.
        dispatch, g = c.groups(sz.cdiv(outputs, WG), guard=False)
        o = body.let(ibin("+", ibin("*", g, u32(WG)), lid), "o")
        with body.if_(Binary("<", o, size_ir(outputs), "bool")):
            acc = fold_elements(c, red, o, u32(0), size_ir(count), u32(1), element_reader(c, red))
            write_total(c, red, o, acc)
        return (WG, 1, 1), dispatch
    width = row_width(count)
    dispatch, o = c.groups(outputs)
    read = element_reader(c, red, o)
    base = row_base(c, red, o)
    rows = tuple(red.shape[:-1])

    def over(visit: Any) -> None:
        row_elements(c, base, count, rows, width, visit, held=True)

    walk = over if base is not None else None
    acc = fold_elements(c, red, o, lid, size_ir(count), u32(width), read, walk)
    total = tree_total(c, red, acc, width)
    with body.if_(Binary("==", lid, u32(0), "bool")):
        write_total(c, red, o, total)
    return (width, 1, 1), dispatch
