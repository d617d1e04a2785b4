"""What no schedule may hold: sizes past 32-bit indices; and the dims."""

from __future__ import annotations

from typing import Any

from mimir.codegen import sizes as sz
from mimir.codegen.refusal import CANNOT_SCHEDULE, RefusalError
from mimir.codegen.schedule.plan import BufferSpec, Schedule
from mimir.codegen.schedule.roots import root_kind
from mimir.codegen.schedule.state import State
from mimir.codegen.tensors import Evaluator
from mimir.dims import Dim, Size, Solved, solve_dims
from mimir.parse.module import TensorAnnotation


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


def kernel_dims(kernel: Any) -> list[Dim]:
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


def kernel_solves(kernel: Any) -> dict[str, Solved]:
    """The dims the parameters fix only by an equation (`x: Tensor[float32, 3 * C]`), by
    name, as `mimir.dims.solve_dims` solves them: the manifest tells hosts how."""
    shapes = [
        (name, ann.dims)
        for name, ann, _ in kernel.graph.params
        if isinstance(ann, TensorAnnotation)
    ]
    return {s.dim.name: s for s in solve_dims(shapes)}


# The longest axis `sort` / `argsort` take: a row's keys and their positions (4 bytes
# each) in workgroup memory, padded to a power of two, fit the 16 KiB every WebGPU device
# has (`maxComputeWorkgroupStorageSize`), and so every target's.
SORT_LIMIT = 2048


def sort_length(length: Size, dims: dict[str, Dim]) -> int | None:
    """The longest the axis of a sort can be (`sizes.upper_bound`), None when unbounded."""
    return sz.upper_bound(length, dims)


def refuse_long_sorts(st: State) -> State:
    """A sort keeps a whole row in workgroup memory, so its axis needs a bound of at most
    `SORT_LIMIT`: a literal, or a `Dim` with a `max=`. Refused loudly otherwise."""
    for r in sorted(n for n in st.live if root_kind(st.kg, n) == "sort"):
        node = st.ev.node(r)
        axis = sort_axis(st.ev, r)
        length = st.ev.shape(node["inputs"][0])[axis]
        bound = sort_length(length, st.declared)
        if bound is not None and bound <= SORT_LIMIT:
            continue
        name = node["spec"].name
        shown = sz.manifest_text(length) if not isinstance(length, int) else str(length)
        why = "has no upper bound" if bound is None else f"can be {bound} long"
        fix = (
            f'declare the dim with `max=` of at most {SORT_LIMIT} (`Dim("{shown}", '
            f"max={SORT_LIMIT})`)"
            if not isinstance(length, int)
            else f"sort at most {SORT_LIMIT} elements along one axis"
        )
        raise RefusalError(
            CANNOT_SCHEDULE,
            f"`.{name}()` along axis {axis} (size {shown}) {why}; a row is sorted in "
            f"workgroup memory, at most {SORT_LIMIT} elements: {fix}",
            node["span"],
        )
    return st


def sort_axis(ev: Evaluator, r: int) -> int:
    """The axis of a `sort` / `argsort` node, from 0."""
    node = ev.node(r)
    kw = dict(zip(node["keywords"], node["inputs"][1:], strict=True))
    rank = len(ev.shape(node["inputs"][0]))
    if "axis" not in kw:
        return rank - 1
    return ev.values[ev.resolve(kw["axis"])].sym.value % rank


def finish(st: State) -> Schedule:
    """The schedule the passes leave: its dims and uniform fields, each size proven to fit
    a 32-bit index (`refuse_oversized`)."""
    kg = st.kg
    dims = kernel_dims(st.kernel)
    for name, _ in st.scalar_params:
        if any(d.name == name for d in dims):
            raise RefusalError(
                CANNOT_SCHEDULE,
                f"the parameter `{name}` has the name of a dim, and both would be uniform "
                f"field `{name}`; rename the parameter",
                kg.kernel.span,
            )
    refuse_oversized(dims, st.buffers, kg.kernel.span)
    fields = [(d.name, "u32") for d in dims] + st.scalar_params
    kept = {b.name for b in st.buffers}
    tagged = {name: n for name, n in st.tagged_sizes.items() if name in kept}
    return Schedule(
        kg.name,
        dims,
        fields,
        st.buffers,
        st.plans,
        st.node_buffers,
        st.kernel,
        st.target.vector_views,
        tagged,
        {n: before for n, before in st.folded.items() if n in {p.node for p in st.plans}},
    )
