"""Row groups: outputs computed with last-axis reductions of the same rows, in one launch."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from mimir.codegen import sizes as sz
from mimir.codegen.schedule.layout import SERIAL_REDUCE_MAX, row_shape, softmax_input, split
from mimir.codegen.schedule.roots import FUSIBLE, op_kind, root_kind
from mimir.constraints.checker import TensorVal
from mimir.dtypes import float32


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
    ev: Any,
    kg: Any,
    writes: dict[int, list[str]],
    epilogue: dict[int, int],
    in_place: set[str],
) -> tuple[dict[int, RowGroup], dict[int, int]]:
    """`_row_groups`, offering as outputs the per-row values that a whole reduction reads
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
        rows = _row_groups(ev, kg, {**writes, **offer}, epilogue, in_place, set(offered))
        grouped = {o for group in rows.values() for o in group.outputs}
        kept = {x: r for x, r in offered.items() if x in grouped}
        if kept == offered:
            return rows, kept
        offered = kept


def _row_groups(
    ev: Any,
    kg: Any,
    writes: dict[int, list[str]],
    epilogue: dict[int, int],
    in_place: set[str],
    totals: set[int] | frozenset = frozenset(),
) -> dict[int, RowGroup]:
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
    axes share a thread-per-row launch for their outputs with one element per row. The plan
    of each group is placed at its last output -> the group.
    """

    g = kg.graph

    def row_reduction(r: int) -> bool:
        if root_kind(kg, r) == "softmax":
            # a float32 softmax of the last axis: its max and sum are the row's
            x, axis = softmax_input(ev, r)
            return axis == len(ev.shape(x)) - 1 and ev.dtype(r) == float32
        if root_kind(kg, r) not in ("reduce", "moments", "argreduce"):
            return False
        if len(ev.shape(epilogue[r])) != len(ev.shape(r)):  # an epilogue that reshapes
            return False
        red = ev.reduction(r)
        shape = ev.shape(r)
        rank = len(red.shape)
        kept = len(shape) == rank - 1 or (len(shape) == rank > 0 and shape[-1] == 1)
        return red.axes == [rank - 1] and kept and not split(red)

    def reads(n: int, materialised: set[int]) -> set[int]:
        """The materialised nodes (and roots) computing `n` element-wise reads."""
        found, stack, seen = set(), list(g.predecessors(n)), set()
        while stack:
            m = stack.pop()
            if m in seen:
                continue
            seen.add(m)
            if m in materialised:
                found.add(m)
            elif kg.node(m)["kind"] != "param":
                stack.extend(g.predecessors(m))
        return found

    def keys(n: int) -> list[str]:
        return [sz.key(s) for s in ev.shape(n)]

    def own_row(starts: list[int], lead: list[str], members: set[int]) -> bool:
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
        tainted = set(members).union(*(nx.descendants(g, m) for m in members))

        def reads_member(m: int) -> bool:
            return m in tainted

        def last_axis_only(items: list[tuple]) -> bool:
            """Whether subscript `items` keep the leading axes as they are (`m[:, None]`,
            `x[..., :3]`, `x[:, 0]`): full slices, or an ellipsis before one item."""
            plain = [("slice", None, None)] * len(lead)
            if items[: len(lead)] == plain:
                return all(it[0] != "ellipsis" for it in items[len(lead) :])
            rest = items[1:]
            return items[0][0] == "ellipsis" and sum(it[0] != "newaxis" for it in rest) <= 1

        def operands(m: int) -> tuple[list[int], bool] | None:
            """The operands of `m` that an element of a row reads at that row, and whether
            they have m's rank; None where m may read another row."""
            kind, node = op_kind(kg, m), ev.node(m)
            inputs = [ev.resolve(i) for i in node["inputs"]]
            if kind in (*FUSIBLE, "rowmix"):
                return [ev.resolve(i) for i in g.predecessors(m)], True
            if kind == "join" and ev.spec(m).name == "concatenate":
                kw = ev._kwargs(m)
                axis = ev.literal_arg(kw.get("axis"), 0) % len(ev.shape(m))
                if axis == len(ev.shape(m)) - 1:
                    return [
                        ev.resolve(i) for i in ev.node(ev.resolve(kw["tensors"]))["inputs"]
                    ], True
            if kind == "subscript" and last_axis_only(node["items"]):
                ints = [inputs[it[1]] for it in node["items"] if it[0] == "int"]
                if not any(isinstance(ev.values[i], TensorVal) for i in ints):  # not a gather
                    return [inputs[0]], False
            if kind == "gather":
                named = dict(zip(node["keywords"], inputs, strict=True))
                rank = len(ev.shape(m))
                if "axis" in named and ev.literal_arg(named["axis"], 0) % rank == rank - 1:
                    return [named["arr"], named["indices"]], True
            return None

        checked: set[int] = set()
        stack = list(starts)
        while stack:
            m = stack.pop()
            if m in checked or m in members or not reads_member(m):
                continue
            checked.add(m)
            mine = keys(m)
            if len(mine) not in (len(lead), len(lead) + 1) or mine[: len(lead)] != lead:
                return False
            found = operands(m)
            if found is None:
                return False
            for o in found[0]:
                if not reads_member(o):
                    continue
                if not isinstance(ev.values[o], TensorVal):
                    return False
                theirs = keys(o)
                ranks = [len(mine)] if found[1] else [len(lead), len(lead) + 1]
                if len(theirs) not in ranks or theirs[: len(lead)] != lead:
                    return False
                stack.append(o)
        return True

    by_target = {p: r for r, p in epilogue.items()}
    materialised = set(writes) | set(by_target)
    readers: dict[int, set[int]] = {}
    computing: dict[int, set[int]] = {}
    for t in materialised:
        start = by_target.get(t)
        # a root's plan reads what its input needs; an element-wise plan what it needs
        found = reads(start if start is not None else t, materialised - {t})
        if start is not None:
            found |= reads(t, materialised - {t}) - {start}
        computing[t] = found
        for m in found:
            readers.setdefault(m, set()).add(t)

    # Each output that reads row reductions (or is one): the reductions' targets it
    # needs, and the row shape they share.
    candidates: dict[int, tuple[set[int], list[str]]] = {}
    plain: list[int] = []  # element-wise outputs that read no row reduction
    wide: set[int] = set()  # outputs over the same rows, of another length
    for out in sorted(writes):
        r = by_target.get(out)
        if r is None and op_kind(kg, out) not in (*FUSIBLE, "rowmix", "gather", "join"):
            continue
        if r is not None and not row_reduction(r):
            continue
        members = {out} if r is not None else set()
        frontier = [out]
        while frontier:
            t = frontier.pop()
            for m in computing[t]:
                root = by_target.get(m)
                # any other root (a whole sum, a matmul) has its own launch before this
                # one, and is read from its buffer
                if root is None or m in members or not row_reduction(root):
                    continue
                members.add(m)
                frontier.append(m)
        row = {tuple(sz.key(s) for s in row_shape(ev, by_target[m])) for m in members}
        mine = keys(out)
        # every value of the group read at its own row: by the output, and by the roots'
        # inputs (a variance's, from the mean)
        leads = {shape[:-1] for shape in row}
        inputs = [ev.resolve(i) for m in members for i in g.predecessors(by_target[m])]
        if len(leads) == 1 and not own_row([out, *inputs], list(next(iter(leads))), members):
            continue
        if not row:
            if r is None and op_kind(kg, out) in FUSIBLE:
                plain.append(out)
            continue
        if len(row) > 1:
            # short literal rows of several lengths over the same leading axes (rows of 5
            # and of 3 per item): a thread per row folds each of them (`kernels.rows`);
            # only outputs with one element per row
            lead = {shape[:-1] for shape in row}
            short = all(
                isinstance(last := row_shape(ev, by_target[m])[-1], int)
                and last <= SERIAL_REDUCE_MAX
                and root_kind(kg, by_target[m]) != "softmax"
                for m in members
            )
            if len(lead) != 1 or not short:
                continue
            (leading,) = lead
            if mine not in (list(leading), [*leading, "1"]):
                continue
            candidates[out] = (members, [*leading, "short"])
            continue
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
                continue
            if not computing[out] <= members:
                continue
            wide.add(out)
        candidates[out] = (members, list(shape))

    # Outputs over rows of one shape share a launch: one read of the rows serves them all.
    grouped: dict[tuple[str, ...], list[int]] = {}
    for out in sorted(candidates):
        grouped.setdefault(tuple(candidates[out][1]), []).append(out)
    # an element-wise output of the rows' shape joins them too (an `InOut` row's new
    # value, `x * s`, beside sums of the old rows: each thread writes its own elements
    # after the workgroup's folds, `write_in_place_is_safe`), where it comes before
    # the group's last output (so the group's place in the launch order stays)
    for out in plain:
        key = tuple(keys(out))
        if key in grouped and out < max(grouped[key]):
            grouped[key] = sorted([*grouped[key], out])
            candidates[out] = (set(), list(key))

    groups: dict[int, RowGroup] = {}
    for shape, outs in grouped.items():
        # every reduction read only inside the group, and written by it where it is an
        # output: an output needing one that is not keeps its own launches
        while outs:
            members = set().union(*(candidates[o][0] for o in outs))
            inside = members | set(outs)
            bad = {
                o
                for o in outs
                for m in candidates[o][0] - set(outs)
                if m in writes or readers.get(m, set()) - inside
            }
            if not bad:
                break
            outs = [o for o in outs if o not in bad]
        if not outs:
            continue
        # whatever reads the group's outputs launches after it
        place = max(outs)
        if any(t <= place for o in outs for t in readers.get(o, set()) - inside):
            continue
        row = list(shape)
        ordered = sorted(outs, key=lambda o: keys(o) != row)
        roots = sorted(by_target[m] for m in members)
        # a lone reduction keeps its `reduce` launch (a thread per row when rows are short),
        # a softmax written as it is its `softmax` launch; a softmax beside another root,
        # or read by an output (the label's log-probability of a cross-entropy), joins; so
        # does a lone reduction whose per-row value a whole reduction reads (an accuracy)
        softmax = any(root_kind(kg, r) == "softmax" for r in roots)
        alone = len(roots) == 1 and ordered == [epilogue[roots[0]]]
        lone = not set(outs) & totals
        whole = keys(ordered[0]) == row or ordered[0] in wide
        if (len(roots) > 1 or whole or softmax or not lone) and not (softmax and alone):
            outside = {o: readers.get(o, set()) - inside for o in ordered}
            groups[place] = RowGroup(roots, ordered, outside, wide & set(ordered))
    # what a group reads from other launches is written before it: drop a group placed
    # before a group it reads from, until none is
    while True:
        at = {o: p for p, group in groups.items() for o in group.outputs}
        late = []
        for p, group in groups.items():
            inside = set(group.outputs) | {epilogue[r] for r in group.roots}
            if any(at.get(m, m) >= p for o in inside for m in computing[o] - inside):
                late.append(p)
        if not late:
            return groups
        for p in late:
            del groups[p]
