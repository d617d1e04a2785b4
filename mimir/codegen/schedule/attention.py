"""Passes that fuse products with what reads them: attention, a softmax of scores, and two
products of one left operand."""

from __future__ import annotations

from dataclasses import replace

import networkx as nx

from mimir.codegen import sizes as sz
from mimir.codegen.schedule.layout import softmax_input
from mimir.codegen.schedule.plan import (
    Attention,
    BufferSpec,
    Matmul,
    Narrow,
    Plan,
    Row,
    ScoresSoftmax,
    Softmax,
)
from mimir.codegen.schedule.roots import FUSIBLE, op_kind
from mimir.codegen.schedule.state import State
from mimir.codegen.tensors import Evaluator
from mimir.dims import Dim
from mimir.dtypes import bfloat16, float16, float32

# `softmax(q @ k.T) @ v` is one `attention` launch when v is proven at most this many
# columns wide (`fuse_attention`): a workgroup holds up to 128 of them (4 x 8 outputs a
# thread), so the scores of a block of rows are computed once
ATTENTION_COLUMNS = 128


# `softmax(q @ k.T)` returned is one `scores_softmax` launch when the product contracts
# over at most this many (proven) values (`fuse_scores_softmax`): it computes the scores twice
# to save their round trip through memory (8 bytes an element). Measured in PTX executed
# per element (benchmarks/kernel_static.py, T = 256), against a matmul and a softmax: K =
# 16: 93 against 132; 32: 141 against 152; 48: 189 against 171; 64: 243 against 193. Up
# to 32 the one launch issues fewer instructions as well as a third of the bytes; beyond,
# an H200 (about 7 instructions per byte of bandwidth) is bound by issuing them.
SCORES_CONTRACTION = 32


def _fuse_attention(
    ev: Evaluator,
    g: nx.DiGraph,
    plans: list[Plan],
    node_buffers: dict[int, str],
    buffers: list[BufferSpec],
    declared: dict[str, Dim],
) -> None:
    """`softmax(f(a @ b)) @ v` over the last axis, float32 or one half type (attention: a =
    q, b = k.T, f a scale and a causal mask; halves read into float32 registers, the scores
    and the softmax never rounded to the half type), as one `attention` launch
    (`kernels.attention`) instead of a matmul, a softmax and a matmul: the scores `a @ b`
    and their softmax are never stored, each block of keys' scores is computed,
    exponentiated and multiplied by v's rows in registers and workgroup memory (the online
    softmax of flash attention). Only when the scores' epilogue and the softmax are each
    read by the next step alone (no output, no other launch), the softmax has no epilogue,
    both products have the same batch axes, and v is proven at most `ATTENTION_COLUMNS` wide
    (a literal, or a dim's `max`: the head dims of FlashAttention's and Triton's kernels are
    compile-time constants too): a workgroup owns all of them (up to 128: 4 x 8 outputs a
    thread) and computes its rows' scores once; a wider v would need a workgroup per 128
    columns, each computing the scores again, or more registers than a thread has.

    Each row's log-sum-exp of the softmax's input x (`m + log(sum(exp(x - m[:, None])))`,
    m = `x.max(axis=-1)`: FlashAttention-2's L, which its backward pass reads), returned
    beside the output by a `row` launch of its own, is the online softmax's running max
    and sum at the end, stored by the same launch (`Attention.lse`); the probabilities
    may then be spelled `(x - lse[:, None]).exp()` as well as `x.softmax(axis=-1)`. Only
    where the log-sum-exp's launch computes it alone and nothing else reads x or the
    steps between (`_log_sum_exp`, `_private`), and all in float32."""
    scratch = {b.name for b in buffers if b.role == "scratch"}
    by_node = {p.node: p for p in plans}
    products = (Matmul, Narrow)  # (v, or b, a parameter of at most 16 columns)
    for second in list(plans):
        if not isinstance(second, products) or not _product_alone(second):
            continue
        soft = ev.resolve(ev.node(second.root)["inputs"][0])
        if set(g.successors(soft)) != {second.root}:
            continue
        found = _probabilities(ev, g, plans, by_node, soft, scratch)
        if found is None:
            continue
        x, readers, launches, lse = found
        scores = _scores_of(ev, g, by_node, x, readers, scratch, products)
        if scores is None:
            continue
        operands = [*ev.node(scores.root)["inputs"][:2], ev.node(second.root)["inputs"][1]]
        values = [*operands, scores.root, x, soft, second.root, *([] if lse is None else [lse])]
        dtypes = {ev.dtype(ev.resolve(n)) for n in values}
        # halves: one type throughout; a log-sum-exp beside the output only in float32
        allowed = {float32} if lse is not None else {float32, float16, bfloat16}
        if len(dtypes) != 1 or not dtypes <= allowed:
            continue
        batch = [sz.key(s) for s in ev.shape(scores.root)[:-2]]
        if [sz.key(s) for s in ev.shape(second.root)[:-2]] != batch:
            continue
        width = sz.upper_bound(ev.shape(second.root)[-1], declared)
        if width is None or width > ATTENTION_COLUMNS:
            continue
        stored = [w for plan in launches for w in plan.writes if w not in scratch]
        unused = set(scores.writes) | {w for plan in launches for w in plan.writes} - set(stored)
        buffers[:] = [b for b in buffers if b.name not in unused]
        for n in (x, soft) if stored else (x, soft, lse):
            node_buffers.pop(n, None)
        fused = Attention(
            second.node,
            second.writes,
            second.root,
            scores=scores.root,
            softmax=soft,
            x=x,
            lse=[(lse, stored)] if stored and lse is not None else [],
        )
        plans[plans.index(second)] = by_node[second.node] = fused
        for plan in (scores, *launches):
            plans.remove(plan)


def _probabilities(
    ev: Evaluator,
    g: nx.DiGraph,
    plans: list[Plan],
    by_node: dict[int, Plan],
    soft: int,
    scratch: set[str],
) -> tuple[int, set[int], list[Plan], int | None] | None:
    """What an `attention` launch computes in place of the probabilities `soft`, a
    softmax over the last axis in a launch of its own, or `exp(x - lse[..., None])` with
    lse x's log-sum-exp: x, the nodes that may read x, the launches no longer made (the
    softmax's, the log-sum-exp's) and the log-sum-exp (None where there is none), or
    None. The log-sum-exp's launch computes it alone, and nothing outside reads a node
    between it and x; it may be returned."""
    node = ev.node(soft)
    name = _op(ev, soft)
    if name == "softmax":
        middle = by_node.get(soft)
        if not isinstance(middle, Softmax) or middle.root != soft:
            return None
        if not set(middle.writes) <= scratch:
            return None
        x, axis = softmax_input(ev, soft)
        x = ev.resolve(x)
        if axis != len(ev.shape(x)) - 1:
            return None
        rows = [r for r in plans if isinstance(r, Row) and _log_sum_exp(ev, r.node, x)]
        if not rows:
            return x, {soft}, [middle], None
        (row, *_) = rows
        lse, tail = row.node, set()
        launches: list[Plan] = [middle, row]
    elif name == "exp":
        shift = _shift(ev, ev.resolve(node["inputs"][0]))
        if shift is None:
            return None
        x, lse, broadcast = shift
        row = by_node.get(lse)
        if not isinstance(row, Row) or _log_sum_exp(ev, lse, x) is None:
            return None
        tail = {broadcast, ev.resolve(node["inputs"][0])}
        launches = [row]
    else:
        return None
    if row.also or row.wide or row.total is not None:
        return None
    inner = _log_sum_exp(ev, lse, x)
    assert inner is not None
    readers = {*inner, *tail, soft}
    if not _private(ev, g, inner | tail, readers | {lse}):
        return None
    if not _private(ev, g, {lse}, tail, returned=True):
        return None
    return x, {u for u in g.successors(x) if u in readers}, launches, lse


def _op(ev: Evaluator, n: int) -> str | None:
    """The op table's name of node `n`'s op (a method or function), or None."""
    spec = ev.node(n).get("spec")
    return None if spec is None else spec.name


def _private(
    ev: Evaluator, g: nx.DiGraph, nodes: set[int], readers: set[int], returned: bool = False
) -> bool:
    """Whether every op that reads one of `nodes` is in `readers` (`returned`: or the
    function's return, directly or in its tuple)."""
    for n in nodes:
        for user in g.successors(n):
            kind = ev.node(user)["kind"]
            if user in readers or (returned and kind == "return"):
                continue
            if returned and kind == "tuple":
                if all(ev.node(u)["kind"] == "return" for u in g.successors(user)):
                    continue
            return False
    return True


def _last_axis(ev: Evaluator, r: int, name: str) -> int | None:
    """x, where node `r` is `x.name(axis=-1)` (over x's last axis alone, no `keepdims`)."""
    if _op(ev, r) != name:
        return None
    red = ev.reduction(r)
    rank = len(red.shape)
    if red.axes != [rank - 1] or len(ev.shape(r)) != rank - 1:
        return None
    return ev.resolve(red.x)


def _row_broadcast(ev: Evaluator, n: int) -> int | None:
    """The per-row value node `n` spreads along a new last axis (`m[:, None]`,
    `m[..., None]`), or None."""
    node = ev.node(n)
    if node["kind"] != "subscript" or len(node["inputs"]) != 1:
        return None
    v = ev.resolve(node["inputs"][0])
    items = list(node["items"])
    if not items or items[-1][0] != "newaxis":
        return None
    lead = items[:-1]
    if lead != [("slice", None, None)] * len(ev.shape(v)) and [i[0] for i in lead] != ["ellipsis"]:
        return None
    return v


def _shift(ev: Evaluator, n: int) -> tuple[int, int, int] | None:
    """(x, v, the broadcast of v) where node `n` is `x - v[..., None]`, or None."""
    node = ev.node(n)
    if node["kind"] != "binop" or node["symbol"] != "-":
        return None
    x, broadcast = (ev.resolve(i) for i in node["inputs"])
    v = _row_broadcast(ev, broadcast)
    return None if v is None else (x, v, broadcast)


def _log_sum_exp(ev: Evaluator, lse: int, x: int) -> set[int] | None:
    """The nodes between x and `lse` where node `lse` is x's log-sum-exp over its last
    axis, `m + log(sum(exp(x - m[..., None]), axis=-1))` with m = `x.max(axis=-1)` (the
    sum in either order), or None."""
    node = ev.node(lse)
    if node["kind"] != "binop" or node["symbol"] != "+":
        return None
    left, right = (ev.resolve(i) for i in node["inputs"])
    for m, log in ((left, right), (right, left)):
        if _last_axis(ev, m, "max") != x or _op(ev, log) != "log":
            continue
        total = ev.resolve(ev.node(log)["inputs"][0])
        e = _last_axis(ev, total, "sum")
        if e is None or _op(ev, e) != "exp":
            continue
        shifted = ev.resolve(ev.node(e)["inputs"][0])
        shift = _shift(ev, shifted)
        if shift is None or shift[:2] != (x, m):
            continue
        return {m, shift[2], shifted, e, total, log}
    return None


def _pair_products(
    ev: Evaluator,
    g: nx.DiGraph,
    plans: list[Plan],
    node_buffers: dict[int, str],
    buffers: list[BufferSpec],
    folded: dict[int, int],
) -> None:
    """Two tiled products of one left operand, `a @ b1` stored only for the epilogue of a
    later `a @ b2` to read at the positions it writes (SwiGLU: `silu(x @ w_gate) * (x @
    w_up)`), as one launch: each workgroup computes both products of its tile, one after
    the other through the same workgroup memory, and the epilogue reads the first from
    registers (`kernels.matmul`). The first product is never stored or read back, and
    there is one launch fewer. Only when both products have the same shapes and dtype,
    neither the first nor its own epilogue (`gelu(x @ w_gate)`, then computed where it is
    read) is an output, and every op between the first and the second's epilogue is
    element-wise on that shape and read by nothing else (so the epilogue reads the first
    product at its own position); not for a second product that reads the first."""
    scratch = {b.name for b in buffers if b.role == "scratch"}
    for first in list(plans):
        if not isinstance(first, Matmul) or first.paired is not None:
            continue
        if not first.writes or not set(first.writes) <= scratch:
            continue
        p = first.root
        second = _pairing(ev, g, plans[plans.index(first) + 1 :], p, folded)
        if second is None:
            continue
        unused = set(first.writes)
        buffers[:] = [b for b in buffers if b.name not in unused]
        node_buffers.pop(first.node, None)  # its epilogue, computed where it is read
        second.paired = p
        plans.remove(first)


def _pairing(
    ev: Evaluator, g: nx.DiGraph, later: list[Plan], p: int, folded: dict[int, int]
) -> Matmul | None:
    """The later `matmul` launch whose epilogue alone reads product `p`, as
    `pair_products` requires, or None (an epilogue stored through layout ops alone,
    `launches._layout_tail`, reads it before them)."""
    key = [sz.key(s) for s in ev.shape(p)]
    left, right = (ev.resolve(n) for n in ev.node(p)["inputs"][:2])
    for second in later:
        if not isinstance(second, Matmul) or second.paired is not None:
            continue
        q, t = second.root, folded.get(second.node, second.node)
        if q == p or p in nx.ancestors(g, q) or p not in nx.ancestors(g, t):
            continue
        q_left, q_right = (ev.resolve(n) for n in ev.node(q)["inputs"][:2])
        if q_left != left or [sz.key(s) for s in ev.shape(q)] != key:
            continue
        if [sz.key(s) for s in ev.shape(q_right)] != [sz.key(s) for s in ev.shape(right)]:
            continue
        if len({ev.dtype(n) for n in (p, q, left, right, q_right)}) != 1:
            continue
        if _private_elementwise(ev, g, p, t, key):
            return second
    return None


def _private_elementwise(ev: Evaluator, g: nx.DiGraph, p: int, t: int, key: list) -> bool:
    """Whether product `p` and every op on a path from it to `t` are read only by such
    ops or by `t`, and each op (and `t`) is element-wise of shape `key`, so each reads its
    operands at the position it is computed."""
    between = nx.descendants(g, p) & nx.ancestors(g, t)
    for n in between | {p}:
        if any(u not in between and u != t for u in g.successors(n)):
            return False
    for n in between | {t}:
        if op_kind(ev.kg, n) not in FUSIBLE or [sz.key(s) for s in ev.shape(n)] != key:
            return False
    return True


def _scores_under(
    ev: Evaluator,
    g: nx.DiGraph,
    by_node: dict[int, Plan],
    soft: int,
    scratch: set[str],
    products: tuple[type[Matmul] | type[Narrow], ...],
) -> tuple[Matmul | Narrow, int] | None:
    """The launch of a product (of a kind in `products`) whose epilogue x the softmax
    `soft` reads over its last axis, and x, as `_scores_of` finds it with the softmax x's
    only reader: the scores of `fuse_scores_softmax`, which computes them inside its own
    launch."""

    x, axis = softmax_input(ev, soft)
    x = ev.resolve(x)
    if axis != len(ev.shape(x)) - 1:
        return None
    first = _scores_of(ev, g, by_node, x, {soft}, scratch, products)
    return None if first is None else (first, x)


def _scores_of(
    ev: Evaluator,
    g: nx.DiGraph,
    by_node: dict[int, Plan],
    x: int,
    readers: set[int],
    scratch: set[str],
    products: tuple[type[Matmul] | type[Narrow], ...],
) -> Matmul | Narrow | None:
    """The launch of a product (of a kind in `products`) whose epilogue is x, when that
    launch computes the product alone (no other result, no folds or softmax of a `narrow`
    launch's own) into scratch, and only `readers` read x, at the product's own positions
    (no reshape)."""
    first = by_node.get(x)
    if not isinstance(first, products) or not _product_alone(first):
        return None  # (a `narrow` launch that writes more than the scores)
    if not set(first.writes) <= scratch:
        return None
    if [sz.key(s) for s in ev.shape(x)] != [sz.key(s) for s in ev.shape(first.root)]:
        return None
    if not set(g.successors(x)) <= readers:
        return None
    return first


def _fuse_scores_softmax(
    ev: Evaluator,
    g: nx.DiGraph,
    plans: list[Plan],
    node_buffers: dict[int, str],
    buffers: list[BufferSpec],
    declared: dict[str, Dim],
) -> None:
    """A float32 softmax or log-softmax over the last axis of a tiled product's epilogue
    (`softmax(q @ k.T * scale)`, attention's probabilities), which is a launch's result
    (an output, or read by later launches), as one `scores_softmax` launch
    (`kernels.attention.build_scores_softmax`) instead of a matmul and a softmax: a
    workgroup owns a block of rows and computes their scores twice, once for each row's
    max and sum (online) and
    once for the values it stores, so the scores are never stored. Only when the epilogue
    is read by the softmax alone, the softmax's own launch writes nothing else, no
    `InOut` buffer is written, and the product contracts over at most
    `SCORES_CONTRACTION` proven values (a literal or a dim's `max`), where computing the
    scores again costs less than their round trip through memory."""
    scratch = {b.name for b in buffers if b.role == "scratch"}
    in_place = {b.name for b in buffers if b.role == "inout"}
    by_node = {p.node: p for p in plans}
    for middle in list(plans):
        if not isinstance(middle, Softmax):
            continue
        soft = middle.root
        if ev.node(soft)["spec"].name not in ("softmax", "log_softmax"):
            continue
        if set(middle.writes) & in_place:
            continue
        found = _scores_under(ev, g, by_node, soft, scratch, (Matmul,))
        if found is None:
            continue
        first, x = found
        operands = ev.node(first.root)["inputs"][:2]
        if any(ev.dtype(ev.resolve(n)) != float32 for n in [*operands, first.root, x, soft]):
            continue
        contraction = sz.upper_bound(ev.shape(ev.resolve(operands[0]))[-1], declared)
        if contraction is None or contraction > SCORES_CONTRACTION:
            continue
        unused = set(first.writes)
        buffers[:] = [b for b in buffers if b.name not in unused]
        node_buffers.pop(x, None)
        fused = ScoresSoftmax(middle.node, middle.writes, middle.root, scores=first.root)
        plans[plans.index(middle)] = by_node[middle.node] = fused
        plans.remove(first)


def _product_alone(plan: Matmul | Narrow) -> bool:
    """Whether a product's launch computes the product alone: no other result, and no
    folds or softmax of a `narrow` launch's own."""
    return isinstance(plan, Matmul) or not (plan.also or plan.folds or plan.softmax is not None)


def fuse_attention(st: State) -> State:
    """The pass of `_fuse_attention`: `softmax(f(q @ k.T)) @ v` as one launch."""
    plans, node_buffers, buffers = list(st.plans), dict(st.node_buffers), list(st.buffers)
    _fuse_attention(st.ev, st.g, plans, node_buffers, buffers, st.declared)
    return replace(st, plans=plans, node_buffers=node_buffers, buffers=buffers)


def fuse_scores_softmax(st: State) -> State:
    """The pass of `_fuse_scores_softmax`: `softmax(f(q @ k.T))` as one launch."""
    plans, node_buffers, buffers = list(st.plans), dict(st.node_buffers), list(st.buffers)
    _fuse_scores_softmax(st.ev, st.g, plans, node_buffers, buffers, st.declared)
    return replace(st, plans=plans, node_buffers=node_buffers, buffers=buffers)


def pair_products(st: State) -> State:
    """The pass of `_pair_products`: two products of one left operand in one tile."""
    plans, node_buffers, buffers = list(st.plans), dict(st.node_buffers), list(st.buffers)
    _pair_products(st.ev, st.g, plans, node_buffers, buffers, st.folded)
    return replace(st, plans=plans, node_buffers=node_buffers, buffers=buffers)
