"""`InOut` parameters: whether a launch may store a parameter's new value in place."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import networkx as nx

from mimir.codegen import sizes as sz
from mimir.codegen.schedule.layout import row_per_thread
from mimir.codegen.schedule.plan import BufferSpec, Elementwise, Plan, Row
from mimir.codegen.schedule.roots import FUSIBLE, fused_reads, op_kind
from mimir.codegen.schedule.state import State
from mimir.codegen.tensors import Evaluator
from mimir.constraints.checker import TensorVal
from mimir.dims import Size


def write_in_place_is_safe(
    ev: Evaluator,
    g: nx.DiGraph,
    plans: list[Plan],
    node_buffers: dict[int, str],
    param: int,
    name: str,
    mirror: bool = False,
    half: Size | None = None,
) -> bool:
    """Whether storing an `InOut` parameter's new value straight into its buffer is safe.

    It is when no launch after the writing one reads the old value, and the writing launch
    reads the old value only at the element its thread stores (through element-wise ops of
    the parameter's shape: the thread loads before it stores, and no other thread touches
    that element), or, in a `row` launch, in the reductions of the rows (element-wise of
    the parameter's shape too: each workgroup folds its own rows before it writes).

    With `mirror`: whether it is safe for a launch whose threads own an element of a square
    matrix and its mirror image (`Elementwise.mirror`): the writing launch is element-wise with
    that one output, and reads the old value at the element or at its transpose.

    With `half`: whether it is safe for a launch whose threads own elements j and j + half
    of a row (`Elementwise.halves`): the writing launch is element-wise with that one
    output, and reads the old value of the row only at those two elements (`own_half`)."""
    writer = next(k for k, p in enumerate(plans) for _, bufs in p.computed() if name in bufs)
    key = [sz.key(s) for s in ev.shape(param)]
    after = nx.descendants(g, param)  # what reads the old value, directly or not
    # a thread per row stores its whole row after computing all of it: it may read the
    # old row anywhere (`p = p @ r`, through a `@` by a small matrix)
    whole_rows = row_per_thread(ev, g, plans[writer], node_buffers)
    if mirror or half is not None:
        plan = plans[writer]
        square = half is not None or (len(key) == 2 and key[0] == key[1])
        if not square or not isinstance(plan, Elementwise) or plan.copy:
            return False
        if len(plan.computed()) != 1:
            return False

    def inputs_owned(m: int, owned: Callable[[int], bool]) -> bool:
        """Whether the element-wise `m` reads each input that depends on the parameter at its
        own element (of m's shape: a broadcast input would be read at another thread's),
        and each input is `owned`."""
        mine = [sz.key(s) for s in ev.shape(m)]
        for i in {ev.resolve(i) for i in g.predecessors(m)}:
            if i in after | {param} and [sz.key(s) for s in ev.shape(i)] != mine:
                return False
            if not owned(i):
                return False
        return True

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
        if op_kind(ev.kg, m) not in FUSIBLE:
            return False
        return inputs_owned(m, lambda i: own_element(i, axes, stop))

    def own_half(m: int, shift: int, stop: set[int]) -> bool:
        """Whether `m` at element j + `shift` * half of the last axis (j < half) of the
        stored element's row reads the parameter only at j or j + half of that row: through
        element-wise ops of m's shape, a `concatenate` of two halves along the last axis
        (half `shift` of it, at j), and the slices `[..., :half]` and `[..., half:]`."""
        assert half is not None
        mine = [sz.key(s) for s in ev.shape(m)]
        if m == param:
            return mine == key
        if m not in after or m in stop:
            return True
        if mine[:-1] != key[:-1]:
            return False
        kind, half_key = op_kind(ev.kg, m), sz.key(half)
        if kind == "join":
            parts, axis = ev.join_parts(m)
            if ev.node(m)["spec"].name != "concatenate" or axis != len(key) - 1:
                return False
            if len(parts) != 2 or any(sz.key(ev.shape(p)[-1]) != half_key for p in parts):
                return False
            return own_half(ev.resolve(parts[shift]), 0, stop)
        if kind == "subscript":
            x = ev.resolve(ev.node(m)["inputs"][0])
            items = ev.index_items(m)
            if len(items) != len(key) or any(it[0] != "slice" or len(it) != 3 for it in items):
                return False
            if any(sz.key(it[1]) != "0" for it in items[:-1]):
                return False  # the lead axes whole (m's lead shape is the row's)
            start = sz.key(items[-1][1])
            if shift or mine[-1] != half_key or start not in ("0", half_key):
                return False
            return own_half(x, 0 if start == "0" else 1, stop)
        if kind not in FUSIBLE:
            return False
        return inputs_owned(m, lambda i: own_half(i, shift, stop))

    for k, plan in enumerate(plans[writer:], start=writer):
        inline = {n for n, _ in plan.computed()}
        for node, _ in plan.computed():
            region = fused_reads(g, node, node_buffers, inline)
            if param not in region:
                continue
            if k > writer or not isinstance(plan, (Elementwise, Row)):
                return False
            if isinstance(plan, Elementwise) and plan.copy:
                return False
            roots = plan.roots if isinstance(plan, Row) else []
            # values in other buffers are loaded; a row launch's reductions fold its
            # workgroup's own rows, every one of them before any element is written
            stop = {m for m in node_buffers if m != node and m not in inline} | set(roots)
            # the reductions' inputs: at their own elements, so each fold reads its own rows
            starts = [node, *{ev.resolve(i) for r in roots for i in g.predecessors(r)}]
            if half is not None:
                if not (own_half(node, 0, stop) and own_half(node, 1, stop)):
                    return False
                continue
            for m in starts:
                if isinstance(ev.values[m], TensorVal):
                    if not own_element(m, list(range(len(ev.shape(m)))), stop):
                        return False
    return True


def _halves(ev: Evaluator, n: int) -> Size | None:
    """The length of each part where `n` is a `concatenate` of two parts of one length
    along the last axis, else None."""
    if op_kind(ev.kg, n) != "join" or ev.node(n)["spec"].name != "concatenate":
        return None
    parts, axis = ev.join_parts(n)
    if axis != len(ev.shape(n)) - 1 or len(parts) != 2:
        return None
    first, second = (ev.shape(p)[-1] for p in parts)
    return first if sz.key(first) == sz.key(second) else None


def write_in_place(st: State) -> State:
    """Each `InOut` update stored straight into its parameter's buffer where that is safe
    (`write_in_place_is_safe`), by a launch whose threads own an element and its mirror
    image where that makes it safe (`x + x.T`), else computed into scratch and copied
    over after every launch."""
    if not st.updates:
        return st
    new = replace(
        st,
        plans=list(st.plans),
        buffers=list(st.buffers),
        node_buffers=dict(st.node_buffers),
        taken=set(st.taken),
    )
    ev, g, plans, node_buffers = st.ev, st.g, new.plans, new.node_buffers
    params = {ev.node(n)["name"]: n for n in g.nodes if ev.node(n)["kind"] == "param"}
    for n, name in st.updates:
        if write_in_place_is_safe(ev, g, plans, node_buffers, params[name], name):
            continue
        if write_in_place_is_safe(ev, g, plans, node_buffers, params[name], name, True):
            # `x + x.T`: a thread owns both elements it reads, (i, j) and (j, i)
            (writer,) = [p for p in plans for _, bufs in p.outputs() if name in bufs]
            assert isinstance(writer, Elementwise)
            writer.mirror = True
            continue
        half = _halves(ev, n)
        if half is not None and write_in_place_is_safe(
            ev, g, plans, node_buffers, params[name], name, half=half
        ):
            # RoPE: a thread owns elements j and j + half of a row, both it reads
            (writer,) = [p for p in plans for _, bufs in p.outputs() if name in bufs]
            assert isinstance(writer, Elementwise)
            writer.halves = half
            continue
        # Some launch reads the old value where the write would already have changed it:
        # compute the new value into scratch, and copy it over after every launch.
        for plan in plans:
            for node, bufs in plan.outputs():
                if node == n and name in bufs:
                    bufs.remove(name)
                    if not bufs:
                        extra = new.scratch_name()
                        spec = BufferSpec(extra, "scratch", ev.dtype(n), ev.shape(n))
                        new.buffers.append(spec)
                        bufs.append(extra)
                    node_buffers[n] = bufs[0]
        plans.append(Elementwise(n, [name], copy=True))
    return new
