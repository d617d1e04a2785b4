"""Passes that merge adjacent launches: element-wise results of one shape, and whole
reductions (and the element-wise outputs beside them) that share one pass over the elements."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import networkx as nx

from mimir.codegen import sizes as sz
from mimir.codegen.schedule.layout import MERGE_BUFFER_LIMIT, column_layout
from mimir.codegen.schedule.plan import Elementwise, Fold, Moments, Partial, Plan, PlanKind, Reduce
from mimir.codegen.schedule.roots import FUSIBLE, op_kind, root_kind
from mimir.codegen.schedule.state import State
from mimir.codegen.tensors import Evaluator

# the launches that end a split whole reduction, and fold the others of its pass (an
# argmax's: its chunks' extrema and first positions, `kernels.whole.Firsts`)
_WHOLE_ENDS = ("reduce", "moments", "argreduce")


def _merge_elementwise(
    ev: Evaluator, g: nx.DiGraph, plans: list[Plan], node_buffers: dict[int, str]
) -> list[Plan]:
    """One launch for adjacent element-wise results of one shape (`return a + b, a - b`):
    each thread writes all of them. A later one may read an earlier one through
    element-wise ops of that shape (an Adam step's parameter from its new moments): the
    thread computes it once, in registers, for both (a launch never reads what it
    writes: `KernelContext`), and `write_in_place_is_safe` looks through it."""

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
        return all(op_kind(ev.kg, m) in FUSIBLE and keys(m) == keys(n) for m in between)

    out: list[Plan] = []
    for plan in plans:
        head = out[-1] if out else None
        if (
            head is not None
            and isinstance(plan, Elementwise)
            and isinstance(head, Elementwise)
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
    ev: Evaluator,
    g: nx.DiGraph,
    plans: list[Plan],
    node_buffers: dict[int, str],
    in_place: set[str],
) -> list[Plan]:
    """One pass over the elements for adjacent whole reductions of inputs of one shape
    (`x.max(), x.min()`) and the element-wise outputs of that shape beside them
    (`return y, y.sum()`): each workgroup folds its chunk into a partial per reduction
    and stores the element-wise outputs at the elements it reads.

    The pass is the first reduction's one-launch `reduce`, or its `partial` (then its
    `reduce` combines every reduction's partials): it takes the other reductions' plans
    as `Fold.reductions` and the element-wise outputs as `Fold.elements`. A member reads
    another's value only at its own element (computed once, in registers), never a
    reduction's result; an `InOut` write keeps its own launch.

    Reductions over the same leading axes of one input (`x.mean(axis=0), x.max(axis=0)`)
    share their column pass the same way (`kernels.columns.column_pass`)."""
    merged = _WholePasses(ev, g, in_place)
    k = 0
    while k < len(plans):
        k += merged.take(plans, k)
    return merged.out


class _WholePasses:
    """The launches `_merge_whole_reductions` keeps (`out`), as it takes them in order."""

    def __init__(self, ev: Evaluator, g: nx.DiGraph, in_place: set[str]) -> None:
        self.ev, self.g, self.in_place = ev, g, in_place
        self.out: list[Plan] = []

    def take(self, plans: list[Plan], k: int) -> int:
        """Plan k (and the `reduce` that combines a `partial`'s partials) into `out`, in
        a pass before it where it may join one: the number of plans taken."""
        plan, out = plans[k], self.out
        # the launches of one reduction: `partial` and `reduce`, or the one-launch `reduce`
        group = plans[k : k + 2] if plan.kind == PlanKind.PARTIAL else [plan]
        one = plan.kind in _WHOLE_ENDS and plan.counter is not None
        head = out[-1] if out else None
        first = self.pass_before(head)
        lead = self.column_pass(group) if self.column(plan) is not None else None
        if lead is not None and not self.writes_in_place([*group, *lead]):
            if self.join_columns(plan, group, lead):
                return len(group)
        shape = self.whole(plan) if plan.kind == PlanKind.PARTIAL or one else None
        if head is not None and shape is not None and not self.writes_in_place([*group, head]):
            if self.join_whole(plan, group, head, first, one, shape):
                return len(group)
        ew = isinstance(plan, Elementwise) and not plan.copy
        if ew and first is not None and not self.writes_in_place([plan, first]):
            shape = self.keys(plan.node)
            at_element = [n for n, _ in plan.outputs()]
            if self.whole(first) == shape and self.joins(first, shape, at_element, None):
                first.elements.extend(plan.outputs())
                return 1
        out.extend(group)
        return len(group)

    def pass_before(self, head: Plan | None) -> Fold | None:
        """The pass before: the launch that reads the elements (its combining `reduce`
        is `head` after a `partial`)."""
        out = self.out
        if not isinstance(head, Fold) or head.kind not in _WHOLE_ENDS:
            return None
        if head.counter is not None:
            return head
        if head.partials is not None:
            if len(out) > 1 and out[-2].kind == PlanKind.PARTIAL and out[-2].root == head.root:
                return out[-2]
        return None

    def join_columns(self, plan: Fold, group: list[Plan], lead: list[Plan]) -> bool:
        """`plan`'s column reduction into the column pass `lead` before it."""
        ev, out = self.ev, self.out
        x = ev.resolve(ev.reduction(plan.root).x)
        if not self.joins(lead[0], self.keys(x), [x], group[-1].node):
            return False
        if root_kind(ev.kg, plan.root) == "moments":  # the var leads the pass
            for into, member in zip(lead, group, strict=True):
                member.reductions = [into, *into.reductions]
                into.reductions = []
            out[-len(group) :] = group
        else:
            for into, member in zip(lead, group, strict=True):
                into.reductions.append(member)
        return True

    def join_whole(
        self,
        plan: Fold,
        group: list[Plan],
        head: Plan,
        first: Fold | None,
        one: bool,
        shape: list[str],
    ) -> bool:
        """`plan`'s whole reduction into the pass before it (`first`), or the element-wise
        launch before it (`head`) into `plan`'s pass."""
        ev, out = self.ev, self.out
        x, after = [ev.resolve(ev.reduction(plan.root).x)], group[-1].node
        same = first is not None and (first is head) == one
        if first is not None and same and self.whole(first) == shape:
            if self.joins(first, shape, x, after):
                lead = [first] if first is head else [first, head]
                if not self.var(plan):
                    for into, member in zip(lead, group, strict=True):
                        into.reductions.append(member)
                    return True
                if not any(self.var(p) for p in [first, *first.reductions]):
                    # a `var` leads the pass: `kernels.moments.moment_chunk` folds the
                    # others beside its sums, and stores the element-wise outputs in its
                    # first read
                    for into, member in zip(lead, group, strict=True):
                        member.reductions, into.reductions = [into, *into.reductions], []
                    group[0].elements, first.elements = first.elements, []
                    out[-len(group) :] = group
                    return True
        ew = isinstance(head, Elementwise) and not head.copy
        if ew and self.keys(head.node) == shape and self.joins(head, shape, x, after):
            out.pop()  # its outputs are stored by this pass
            plan.elements = head.outputs()
            out.extend(group)
            return True
        return False

    def keys(self, n: int) -> list[str]:
        return [sz.key(s) for s in self.ev.shape(n)]

    def whole(self, plan: Plan) -> list[str] | None:
        """The input's shape, for a split reduction over every axis of size other than 1."""
        ev = self.ev
        if not isinstance(plan, Fold):
            return None
        if plan.kind != PlanKind.PARTIAL and plan.partials is None:
            return None
        if root_kind(ev.kg, plan.root) not in _WHOLE_ENDS:
            return None
        red = ev.reduction(plan.root)
        # every other axis of size 1 (`x.sum(axis=1)` of a (1, N) x): element r is at r
        if any(sz.key(red.shape[k]) != "1" for k in red.kept) or red.axes != sorted(red.axes):
            return None
        return self.keys(ev.resolve(red.x))

    def local(self, n: int, later: int, shape: list[str]) -> bool:
        """Whether `later` reads `n` (if at all) only at its own element."""
        g = self.g
        if n == later or n not in nx.ancestors(g, later):
            return True
        between = (nx.descendants(g, n) & nx.ancestors(g, later)) | {later}
        return all(op_kind(self.ev.kg, m) in FUSIBLE and self.keys(m) == shape for m in between)

    def joins(
        self, first: Plan, shape: list[str], at_element: list[int], after: int | None
    ) -> bool:
        """Whether a member may join the pass `first` (or the element-wise launch `first`,
        which the member's pass would take in): what it computes at each element
        (`at_element`: an output, a reduction's input) reads the pass's values only at
        that element, and nothing it computes (nor its reduction's epilogue, `after`)
        reads a reduction's result, known only at the end."""
        roots = [first.root, *(m.root for m in first.reductions)] if isinstance(first, Fold) else []
        for n in [*at_element, *([after] if after is not None else [])]:
            if any(r == n or r in nx.ancestors(self.g, n) for r in roots):
                return False
        values = [o for o, _ in first.computed() if o not in roots]
        return all(self.local(o, n, shape) for n in at_element for o in values)

    def var(self, plan: Plan) -> bool:
        """A `var` / `std`: it leads its pass (`kernels.moments.moment_chunk` folds the
        others)."""
        return isinstance(plan, Fold) and root_kind(self.ev.kg, plan.root) == "moments"

    def writes_in_place(self, group: list[Plan]) -> bool:
        return any(set(bufs) & self.in_place for p in group for _, bufs in p.computed())

    def column(self, plan: Plan) -> tuple[Any, ...] | None:
        """A column reduction's input shape, axes and launch form
        (`kernels.columns.column_pass`)."""
        ev = self.ev
        if not isinstance(plan, (Partial, Reduce, Moments)):
            return None
        if root_kind(ev.kg, plan.root) not in ("reduce", "moments"):
            return None
        red = ev.reduction(plan.root)
        if column_layout(red) is None:
            return None
        form = (plan.kind == PlanKind.PARTIAL, plan.counter is not None, plan.partials is not None)
        return tuple(sz.key(s) for s in red.shape), tuple(red.axes), form

    def column_pass(self, group: list[Plan]) -> list[Fold] | None:
        """The launches of the column pass just before `group` (a column reduction's)
        that it may join: the same input shape, axes and launches, and a `var` at most
        among them (it leads: `kernels.moments.column_moments` folds the others)."""
        out = self.out
        lead = out[-len(group) :] if len(out) >= len(group) else []
        if not lead or [self.column(p) for p in lead] != [self.column(p) for p in group]:
            return None
        folds = [p for p in lead if isinstance(p, Fold)]
        if len(folds) != len(lead) or folds[0].root != folds[-1].root:
            return None
        plans = [folds[0], *folds[0].reductions, group[0]]
        if sum(self.var(p) for p in plans) > 1:
            return None
        return folds


def merge_elementwise(st: State) -> State:
    """The pass of `_merge_elementwise`: adjacent element-wise launches of one shape."""
    return replace(st, plans=_merge_elementwise(st.ev, st.g, st.plans, st.node_buffers))


def merge_whole_reductions(st: State) -> State:
    """The pass of `_merge_whole_reductions`: whole reductions sharing one pass."""
    plans = _merge_whole_reductions(st.ev, st.g, st.plans, st.node_buffers, st.in_place)
    return replace(st, plans=plans)


def share_counters(st: State) -> State:
    """A reduction folded by another's one-launch pass hands off with that one's counter:
    its own is dropped."""
    passes = [p for p in st.plans if isinstance(p, Fold)]
    spare = {m.counter for p in passes for m in p.reductions if m.counter is not None}
    for p in passes:
        for m in p.reductions:
            m.counter = None
    return replace(st, buffers=[b for b in st.buffers if b.name not in spare])
