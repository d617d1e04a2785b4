"""Row groups: outputs computed with last-axis reductions of the same rows, in one launch."""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx

from mimir.codegen import sizes as sz
from mimir.codegen.schedule.layout import SERIAL_REDUCE_MAX, row_shape, softmax_input, split
from mimir.codegen.schedule.roots import FUSIBLE, op_kind, root_kind
from mimir.codegen.tensors import Evaluator
from mimir.constraints.checker import TensorVal
from mimir.dtypes import float32
from mimir.parse.graph import KernelGraph


@dataclass
class RowGroup:
    """One `row` launch: its last-axis reductions in order, and the outputs it writes
    (those of the row's shape first; the others have one element per row)."""

    roots: list[int]
    outputs: list[int]
    # for each output, the materialised nodes outside the group that read it
    readers: dict[int, set[int]] = field(default_factory=dict)
    # the outputs over the same rows of another length (`Row.wide`)
    wide: set[int] = field(default_factory=set)


def groups_with_totals(
    ev: Evaluator,
    kg: KernelGraph,
    writes: dict[int, list[str]],
    epilogue: dict[int, int],
    ends: bool = True,
) -> tuple[dict[int, RowGroup], dict[int, int]]:
    """`_RowGrouping.groups`, offering as outputs the per-row values that a whole reduction reads
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
        grouping = _RowGrouping(ev, kg, {**writes, **offer}, epilogue, set(offered), ends)
        rows = grouping.groups()
        grouped = {o for group in rows.values() for o in group.outputs}
        kept = {x: r for x, r in offered.items() if x in grouped}
        if kept == offered:
            return rows, kept
        offered = kept


class _RowGrouping:
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
    axes share a thread-per-row launch for their outputs with one element per row.
    `groups()`: the plan of each group is placed at its last output -> the group.
    `totals`: the outputs a whole reduction reads.
    """

    def __init__(
        self,
        ev: Evaluator,
        kg: KernelGraph,
        writes: dict[int, list[str]],
        epilogue: dict[int, int],
        totals: set[int] | frozenset = frozenset(),
        ends: bool = True,
    ) -> None:
        self.ev, self.kg, self.g = ev, kg, kg.graph
        self.writes, self.epilogue, self.totals = writes, epilogue, totals
        # a group may be placed after the whole reduction of a value it offers, which its
        # launch then ends (`Row.total`; `launches.group_rows` checks that it does)
        self.ends = ends
        self.by_target = {p: r for r, p in epilogue.items()}
        materialised = set(writes) | set(self.by_target)
        # for each materialised node: what its launch reads, and which launches read it
        self.readers: dict[int, set[int]] = {}
        self.computing: dict[int, set[int]] = {}
        for t in materialised:
            start = self.by_target.get(t)
            # a root's plan reads what its input needs; an element-wise plan what it needs
            found = self.reads(start if start is not None else t, materialised - {t})
            if start is not None:
                found |= self.reads(t, materialised - {t}) - {start}
            self.computing[t] = found
            for m in found:
                self.readers.setdefault(m, set()).add(t)
        self.wide: set[int] = set()  # outputs over the same rows, of another length

    def groups(self) -> dict[int, RowGroup]:
        candidates, plain = self.candidates()
        grouped = self.share(candidates, plain)
        return self.in_order(self.launches(grouped, candidates))

    def _total_of(self, value: int, t: int) -> bool:
        """Whether `t` is the target of the whole reduction of `value`, a per-row value
        offered to the groups (`groups_with_totals`)."""
        r = self.by_target.get(t)
        if not self.ends or value not in self.totals or r is None:
            return False
        if root_kind(self.kg, r) != "reduce":
            return False
        red = self.ev.reduction(r)
        return not red.kept and self.ev.resolve(red.x) == value

    def row_reduction(self, r: int) -> bool:
        ev, kg = self.ev, self.kg
        if root_kind(kg, r) == "softmax":
            # a float32 softmax of the last axis: its max and sum are the row's
            x, axis = softmax_input(ev, r)
            return axis == len(ev.shape(x)) - 1 and ev.dtype(r) == float32
        if root_kind(kg, r) not in ("reduce", "moments", "argreduce"):
            return False
        if len(ev.shape(self.epilogue[r])) != len(ev.shape(r)):  # an epilogue that reshapes
            return False
        red = ev.reduction(r)
        shape = ev.shape(r)
        rank = len(red.shape)
        kept = len(shape) == rank - 1 or (len(shape) == rank > 0 and shape[-1] == 1)
        return red.axes == [rank - 1] and kept and not split(red)

    def reads(self, n: int, materialised: set[int]) -> set[int]:
        """The materialised nodes (and roots) computing `n` element-wise reads."""
        g = self.g
        found, stack, seen = set(), list(g.predecessors(n)), set()
        while stack:
            m = stack.pop()
            if m in seen:
                continue
            seen.add(m)
            if m in materialised:
                found.add(m)
            elif self.kg.node(m)["kind"] != "param":
                stack.extend(g.predecessors(m))
        return found

    def keys(self, n: int) -> list[str]:
        return [sz.key(s) for s in self.ev.shape(n)]

    def own_row(self, starts: list[int], lead: list[str], members: set[int]) -> bool:
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
        ev, keys = self.ev, self.keys
        tainted = set(members).union(*(nx.descendants(self.g, m) for m in members))
        checked: set[int] = set()
        stack = list(starts)
        while stack:
            m = stack.pop()
            if m in checked or m in members or m not in tainted:
                continue
            checked.add(m)
            mine = keys(m)
            if len(mine) not in (len(lead), len(lead) + 1) or mine[: len(lead)] != lead:
                return False
            found = self.operands(m, lead)
            if found is None:
                return False
            for o in found[0]:
                if o not in tainted:
                    continue
                if not isinstance(ev.values[o], TensorVal):
                    return False
                theirs = keys(o)
                ranks = [len(mine)] if found[1] else [len(lead), len(lead) + 1]
                if len(theirs) not in ranks or theirs[: len(lead)] != lead:
                    return False
                stack.append(o)
        return True

    def operands(self, m: int, lead: list[str]) -> tuple[list[int], bool] | None:
        """The operands of `m` that an element of a row reads at that row, and whether
        they have m's rank; None where m may read another row."""
        ev = self.ev
        kind, node = op_kind(self.kg, m), ev.node(m)
        inputs = [ev.resolve(i) for i in node["inputs"]]
        if kind in (*FUSIBLE, "rowmix"):
            return [ev.resolve(i) for i in self.g.predecessors(m)], True
        if kind == "join" and ev.spec(m).name == "concatenate":
            kw = ev._kwargs(m)
            axis = ev.literal_arg(kw.get("axis"), 0) % len(ev.shape(m))
            if axis == len(ev.shape(m)) - 1:
                return [ev.resolve(i) for i in ev.node(ev.resolve(kw["tensors"]))["inputs"]], True
        if kind == "subscript" and _last_axis_only(node["items"], lead):
            ints = [inputs[it[1]] for it in node["items"] if it[0] == "int"]
            if not any(isinstance(ev.values[i], TensorVal) for i in ints):  # not a gather
                return [inputs[0]], False
        if kind == "gather":
            named = dict(zip(node["keywords"], inputs, strict=True))
            rank = len(ev.shape(m))
            if "axis" in named and ev.literal_arg(named["axis"], 0) % rank == rank - 1:
                return [named["arr"], named["indices"]], True
        return None

    def candidates(self) -> tuple[dict[int, tuple[set[int], list[str]]], list[int]]:
        """Each output that reads row reductions (or is one): the reductions' targets it
        needs, and the row shape they share; and the element-wise outputs that read no
        row reduction."""
        candidates: dict[int, tuple[set[int], list[str]]] = {}
        plain: list[int] = []
        for out in sorted(self.writes):
            r = self.by_target.get(out)
            kind = op_kind(self.kg, out)
            # a subscript of the last axis alone: `mean[:, :, 0]` of a keepdims mean
            # (`own_row` checks its items)
            if r is None and kind not in (*FUSIBLE, "rowmix", "gather", "join", "subscript"):
                continue
            if r is not None and not self.row_reduction(r):
                continue
            members = self.members(out, r)
            row = {tuple(sz.key(s) for s in row_shape(self.ev, self.by_target[m])) for m in members}
            # every value of the group read at its own row: by the output, and by the
            # roots' inputs (a variance's, from the mean)
            leads = {shape[:-1] for shape in row}
            inputs = [
                self.ev.resolve(i) for m in members for i in self.g.predecessors(self.by_target[m])
            ]
            if len(leads) == 1 and not self.own_row(
                [out, *inputs], list(next(iter(leads))), members
            ):
                continue
            if not row:
                if r is None and op_kind(self.kg, out) in FUSIBLE:
                    plain.append(out)
                continue
            shape = self.row_of(out, r, row, members)
            if shape is not None:
                candidates[out] = (members, shape)
        return candidates, plain

    def members(self, out: int, r: int | None) -> set[int]:
        """The targets of the row reductions `out` reads (through element-wise ops), itself
        where it is one (the root `r`'s)."""
        members = {out} if r is not None else set()
        frontier = [out]
        while frontier:
            t = frontier.pop()
            for m in self.computing[t]:
                root = self.by_target.get(m)
                # any other root (a whole sum, a matmul) has its own launch before this
                # one, and is read from its buffer
                if root is None or m in members or not self.row_reduction(root):
                    continue
                members.add(m)
                frontier.append(m)
        return members

    def row_of(
        self, out: int, r: int | None, row: set[tuple[str, ...]], members: set[int]
    ) -> list[str] | None:
        """The key of the rows output `out` shares a launch over (`row`: the shapes of
        the rows its reductions reduce), or None where it has no row launch."""
        ev, mine = self.ev, self.keys(out)
        if len(row) > 1:
            # short literal rows of several lengths over the same leading axes (rows of 5
            # and of 3 per item): a thread per row folds each of them (`kernels.rows`);
            # only outputs with one element per row
            lead = {shape[:-1] for shape in row}
            short = all(
                isinstance(last := row_shape(ev, self.by_target[m])[-1], int)
                and last <= SERIAL_REDUCE_MAX
                and root_kind(self.kg, self.by_target[m]) != "softmax"
                for m in members
            )
            if len(lead) != 1 or not short:
                return None
            (leading,) = lead
            if mine not in (list(leading), [*leading, "1"]):
                return None
            return [*leading, "short"]
        (shape,) = row
        if mine not in (list(shape), list(shape[:-1]), [*shape[:-1], "1"]):
            # an element-wise output over the same rows, of another length, that reads
            # nothing but the rows' reductions and inputs (`concatenate((x, x.sum(axis=1,
            # keepdims=True)), axis=1)`): the workgroup writes it in a loop of its own; a
            # thread per short row (`kernels.rows`) writes it unrolled, so its own length
            # must be a short literal too (`x.softmax() @ w`, w 4 x 3)
            length, own = shape[-1], ev.shape(out)[-1]
            short = isinstance(length, int) and length <= SERIAL_REDUCE_MAX
            unrolled = isinstance(own, int) and own <= SERIAL_REDUCE_MAX
            same_rows = len(mine) == len(shape) and mine[:-1] == list(shape[:-1])
            if r is not None or (short and not unrolled) or not same_rows:
                return None
            if not self.computing[out] <= members:
                return None
            self.wide.add(out)
        return list(shape)

    def share(
        self, candidates: dict[int, tuple[set[int], list[str]]], plain: list[int]
    ) -> dict[tuple[str, ...], list[int]]:
        """Outputs over rows of one shape share a launch: one read of the rows serves them
        all. An element-wise output of the rows' shape joins them too (an `InOut` row's new
        value, `x * s`, beside sums of the old rows: each thread writes its own elements
        after the workgroup's folds, `write_in_place_is_safe`), where it comes before the
        group's last output (so the group's place in the launch order stays)."""
        grouped: dict[tuple[str, ...], list[int]] = {}
        for out in sorted(candidates):
            grouped.setdefault(tuple(candidates[out][1]), []).append(out)
        for out in plain:
            key = tuple(self.keys(out))
            if key in grouped and out < max(grouped[key]):
                grouped[key] = sorted([*grouped[key], out])
                candidates[out] = (set(), list(key))
        return grouped

    def launches(
        self,
        grouped: dict[tuple[str, ...], list[int]],
        candidates: dict[int, tuple[set[int], list[str]]],
    ) -> dict[int, RowGroup]:
        """The group of each row shape, where it has one: every reduction read only inside
        the group, and written by it where it is an output (an output needing one that is
        not keeps its own launches), and whatever reads the group's outputs after it."""
        kg, keys, readers = self.kg, self.keys, self.readers
        groups: dict[int, RowGroup] = {}
        for shape, outs in grouped.items():
            while outs:
                members = set().union(*(candidates[o][0] for o in outs))
                inside = members | set(outs)
                bad = {
                    o
                    for o in outs
                    for m in candidates[o][0] - set(outs)
                    if m in self.writes or readers.get(m, set()) - inside
                }
                if not bad:
                    break
                outs = [o for o in outs if o not in bad]
            if not outs:
                continue
            place = max(outs)
            # the whole reduction of a per-row value the group offers (`Row.total`) is
            # computed by the group's launch, wherever it is in the source
            later = {
                o: {t for t in readers.get(o, set()) - inside if not self._total_of(o, t)}
                for o in outs
            }
            if any(t <= place for o in outs for t in later[o]):
                continue
            row = list(shape)
            ordered = sorted(outs, key=lambda o: keys(o) != row)
            roots = sorted(self.by_target[m] for m in members)
            # a lone reduction keeps its `reduce` launch (a thread per row when rows are
            # short), a softmax written as it is its `softmax` launch; a softmax beside
            # another root, or read by an output (the label's log-probability of a
            # cross-entropy), joins; so does a lone reduction whose per-row value a whole
            # reduction reads (an accuracy)
            softmax = any(root_kind(kg, r) == "softmax" for r in roots)
            alone = len(roots) == 1 and ordered == [self.epilogue[roots[0]]]
            lone = not set(outs) & self.totals
            whole = keys(ordered[0]) == row or ordered[0] in self.wide
            if (len(roots) > 1 or whole or softmax or not lone) and not (softmax and alone):
                outside = {o: readers.get(o, set()) - inside for o in ordered}
                groups[place] = RowGroup(roots, ordered, outside, self.wide & set(ordered))
        return groups

    def in_order(self, groups: dict[int, RowGroup]) -> dict[int, RowGroup]:
        """What a group reads from other launches is written before it: drop a group placed
        before a group it reads from, until none is."""
        while True:
            at = {o: p for p, group in groups.items() for o in group.outputs}
            late = []
            for p, group in groups.items():
                inside = set(group.outputs) | {self.epilogue[r] for r in group.roots}
                if any(at.get(m, m) >= p for o in inside for m in self.computing[o] - inside):
                    late.append(p)
            if not late:
                return groups
            for p in late:
                del groups[p]


def _last_axis_only(items: list[tuple], lead: list[str]) -> bool:
    """Whether subscript `items` keep the leading axes `lead` as they are (`m[:, None]`,
    `x[..., :3]`, `x[:, 0]`): full slices, or an ellipsis before one item."""
    plain = [("slice", None, None)] * len(lead)
    if items[: len(lead)] == plain:
        return all(it[0] != "ellipsis" for it in items[len(lead) :])
    rest = items[1:]
    return items[0][0] == "ellipsis" and sum(it[0] != "newaxis" for it in rest) <= 1
