"""Causal masks: which keys a softmax's input leaves at its fill, so a launch may skip them."""

from __future__ import annotations

import operator
from typing import Any, NamedTuple

from mimir.codegen import lower as lw
from mimir.codegen import sizes as sz
from mimir.codegen.builder import ibin, u32
from mimir.codegen.ir import Binary, Expr
from mimir.codegen.kernels.context import KernelContext
from mimir.codegen.tensors import Evaluator

# a fill at or below this makes a masked score's exp(fill - max) 0 for any row whose max
# is above it (at this magnitude the next float32 up is 7.6e22 higher)
CAUSAL_FILL = -1e30


_COMPARISONS = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}


class CausalReach(NamedTuple):
    """What `causal_reach` shows: every key more than `reach` past its row scores `fill`
    (a literal), with the manifest's words for it."""

    reach: int
    fill: float
    proof: str


def _float_literal(ev: Evaluator, n: int) -> float | None:
    """A literal number (`-1e30`, `0.0`), or None."""
    node = ev.node(ev.resolve(n))
    if node["kind"] == "const" and isinstance(node.get("value"), (int, float)):
        return float(node["value"])
    if node["kind"] == "unop" and node["symbol"] == "-":
        inner = _float_literal(ev, node["inputs"][0])
        return None if inner is None else -inner
    return None


def _positions(ev: Evaluator, n: int, keys: list[Any]) -> str | None:
    """'row' for `arange(n)[:, None]`, 'key' for `arange(n)[None, :]` (n the scores' rows,
    or keys): a tensor whose value is its own position on one of the last two axes."""
    node = ev.node(ev.resolve(n))
    if node["kind"] != "subscript":
        return None
    source = ev.node(ev.resolve(node["inputs"][0]))
    if source["kind"] != "call" or source["spec"].name != "arange":
        return None
    if source["keywords"] != ["n"]:
        return None  # (a start or a step)
    items = [item[0] for item in node["items"]]
    full = ("slice", None, None)
    shape = [sz.key(s) for s in ev.shape(n)]
    if items == ["slice", "newaxis"] and node["items"][0] == full and shape == [keys[0], sz.key(1)]:
        return "row"
    if items == ["newaxis", "slice"] and node["items"][1] == full and shape == [sz.key(1), keys[1]]:
        return "key"
    return None


def _false_past(ev: Evaluator, cond: int, keys: list[Any]) -> int | None:
    """The d >= 0 such that the bool tensor `cond`, a function of positions alone, is True
    exactly where key j and row i (its last two axes, of sizes `keys`: the scores') have
    j - i <= d (so every row keeps key 0); None where that is not shown. The forms:
    `tril(ones(...), k) op c` with `op(1, c)` True and `op(0, c)` False
    (`tril(ones((T, T))) > 0.0`), of the scores' last two sizes (a broadcast key axis
    would make its j 0 everywhere); `arange(T)[:, None] >= arange(T)[None, :]` or
    `arange(T)[None, :] <= arange(T)[:, None]`. A mask read from data (`tril(keep)`,
    `causal & keep`) may keep nothing of a row, whose softmax then spreads over every key:
    not these."""
    cond = ev.resolve(cond)
    node = ev.node(cond)
    if node["kind"] != "binop" or node["symbol"] not in _COMPARISONS:
        return None
    left, right = node["inputs"]
    op = node["symbol"]
    sides = (_positions(ev, left, keys), _positions(ev, right, keys))
    if (sides, op) in ((("row", "key"), ">="), (("key", "row"), "<=")):  # j <= i
        return 0
    if None not in sides:
        return None
    for mask, other in ((left, right), (right, left)):
        masked = ev.resolve(mask)
        mask_spec, value = ev.spec(masked), _float_literal(ev, other)
        if mask_spec is None or mask_spec.name != "tril" or value is None:
            continue
        if [sz.key(s) for s in ev.shape(masked)[-2:]] != keys:
            continue
        ones = ev.node(ev.resolve(ev._kwargs(masked)["x"]))
        if ones["kind"] != "call" or ones["spec"].name != "ones":
            continue
        compare = _COMPARISONS[op]
        kept, cleared = (
            (compare(1.0, value), compare(0.0, value))
            if mask == left
            else (compare(value, 1.0), compare(value, 0.0))
        )
        k = ev.literal_arg(ev._kwargs(masked).get("k"), 0)
        if kept and not cleared and k >= 0:
            return k
    return None


def causal_reach(ev: Evaluator, x: int, scores: int) -> CausalReach | None:
    """Where a softmax's input x (of the shape of the product `scores`) is
    `where(cond, s, fill)` with cond made from positions, True exactly where key j is
    at most d past row i (`_false_past`, d >= 0: every row keeps key 0, so no row is
    all fill) on cond's own last two axes, the scores' (no broadcast there), and fill a
    literal at most `CAUSAL_FILL`: d, the fill and the manifest's words. A launch may then
    skip every block of keys past its last row's reach: each skipped score's
    exp(fill - max) is 0, the sum and the product by v the same without it."""
    node = ev.node(x)
    spec = ev.spec(x)
    if spec is None or spec.name != "where":
        return None
    cond, _, fill = ev.operands(x)
    value = _float_literal(ev, fill)
    if value is None or value > CAUSAL_FILL:
        return None
    keys = [sz.key(s) for s in ev.shape(scores)[-2:]]
    if len(ev.shape(cond)) < 2 or [sz.key(s) for s in ev.shape(cond)[-2:]] != keys:
        return None
    reach = _false_past(ev, cond, keys)
    if reach is None:
        return None
    fill_text = ev.node(ev.resolve(fill))["text"]
    past = "j > i" if reach == 0 else f"j > i + {reach}"
    return CausalReach(
        reach,
        value,
        (
            f"`{node['text']}` is {fill_text} at every key {past} of row i "
            f"(`{ev.node(ev.resolve(cond))['text']}`), and exp({fill_text} - max) is 0 (every "
            "row keeps key 0); the result differs from the reference only where a skipped "
            f"key's row of v holds inf or nan, or a row's kept scores are all at most "
            f"{fill_text}"
        ),
    )


def causal_end(
    c: KernelContext, causal: CausalReach, row0: Expr, rows: int, keys: int, n: Expr, work: str
) -> Expr:
    """Where a walk over the keys in blocks of `keys` may stop for the workgroup of `rows`
    rows from `row0` (`causal_reach`): past the last key its last row keeps, or past the
    keys `n`; the manifest's `work_skipped` records `work` done only up to there (ending
    "for"...)."""
    body = c.body
    last = body.let(ibin("+", row0, u32(rows + causal.reach)), "reach")
    kept = Binary("<", last, n, "bool")
    end = body.let(lw.select(kept, last, n), "keys")
    c.skipped.append(
        (
            f"{work} the blocks of {keys} keys from key r + {rows + causal.reach} "
            f"on, in the workgroup of rows r .. r + {rows - 1}",
            causal.proof,
        )
    )
    return end
