"""einops patterns: `rearrange`, `repeat`, `reduce` and their layers, read from the pattern.

einops itself is never imported. A pattern `b n (h d) -> b h n d` with `h=8` is parsed
into axes and groups; each group on the left is matched with one axis of the tensor (a
pattern without `...` fixes the tensor's rank), the sizes of its names are bound (one
unknown name per group is the axis divided by the others, which must divide it), and
the right side is built from the bound sizes. What einops would reject for some input
is a requirement like any other: an error when it can never hold, else assumed.
"""

from __future__ import annotations

from typing import Any

from mimir.host import torch_table as tt
from mimir.host.rules import Ctx
from mimir.host.values import (
    UNKNOWN,
    IntV,
    Size,
    StrV,
    TensorV,
    arith,
    const,
    eq,
    literal,
    product,
    show,
    show_shape,
    show_tensor,
)

Group = list[str]  # the names in one axis of a pattern: `(h d)` is ["h", "d"], `()` is []
ELLIPSIS = "..."


class PatternError(ValueError):
    pass


def parse_side(side: str) -> list[Group | str]:
    """`b (h w) ... c` as [["b"], ["h", "w"], "...", ["c"]]."""
    items: list[Group | str] = []
    group: list[str] | None = None
    for token in side.replace("(", " ( ").replace(")", " ) ").split():
        if token == "(":
            if group is not None:
                raise PatternError("nested parentheses")
            group = []
        elif token == ")":
            if group is None:
                raise PatternError("unbalanced parentheses")
            items.append(group)
            group = None
        elif token in (ELLIPSIS, "…"):
            if group is not None:
                raise PatternError("an ellipsis inside parentheses")
            items.append(ELLIPSIS)
        elif group is not None:
            group.append(token)
        else:
            items.append([token])
    if group is not None:
        raise PatternError("unbalanced parentheses")
    return items


def apply(cx: Ctx, kind: str, args: list, kwargs: dict) -> Any:
    """`einops.rearrange(x, pattern, **sizes)` (or `repeat`, `reduce`)."""
    x = tt.tensor(args[0] if args else kwargs.get("tensor"))
    pattern = args[1] if len(args) > 1 else kwargs.get("pattern")
    if x is None or not isinstance(pattern, StrV):
        return UNKNOWN
    sizes: dict[str, Size] = {}
    for name, v in kwargs.items():
        if name not in ("pattern", "tensor", "reduction"):
            sizes[name] = tt.size_of(v) if isinstance(v, IntV) else None
    text = pattern.value
    if "->" not in text:
        return UNKNOWN
    lhs_text, rhs_text = text.split("->", 1)
    try:
        lhs, rhs = parse_side(lhs_text), parse_side(rhs_text)
    except PatternError:
        return UNKNOWN
    return _apply(cx, kind, x, lhs, rhs, sizes, text.strip())


def _apply(
    cx: Ctx,
    kind: str,
    x: TensorV,
    lhs: list[Group | str],
    rhs: list[Group | str],
    given: dict[str, Size],
    pattern: str,
) -> Any:
    what = f"{kind}(x, '{pattern}')"
    fixed = [i for i in lhs if i != ELLIPSIS]
    has_ellipsis = len(fixed) != len(lhs)
    if x.shape is None and not has_ellipsis:
        if x.max_rank is not None and len(fixed) > x.max_rank:
            cx.fail(
                "GPU109",
                f"`{what}` names {len(fixed)} axes, the tensor has rank at most {x.max_rank}",
            )
        if len(x.tail) > len(fixed):
            cx.fail(
                "GPU109",
                f"`{what}` names {len(fixed)} axes, the tensor {show_tensor(x)} has more",
            )
        x = cx.refine(x, len(fixed))  # the pattern names every axis: the rank
    bound: dict[str, Size] = dict(given)
    if x.shape is not None:
        rank = len(x.shape)
        if not has_ellipsis and rank != len(fixed):
            cx.fail(
                "GPU109",
                f"`{what}` names {len(fixed)} axes, the tensor {show_shape(x.shape)} has "
                f"rank {rank}",
            )
        if has_ellipsis and rank < len(fixed):
            cx.fail(
                "GPU109",
                f"`{what}` names {len(fixed)} axes besides `...`, the tensor "
                f"{show_shape(x.shape)} has rank {rank}",
            )
        k = lhs.index(ELLIPSIS) if has_ellipsis else len(lhs)
        before = x.shape[:k]
        after = x.shape[rank - (len(lhs) - k - 1) :] if has_ellipsis else ()
        middle = x.shape[k : rank - len(after)] if has_ellipsis else ()
        axes = [*before, *after]
    else:  # `...` first: only the axes after it are read
        k = lhs.index(ELLIPSIS)
        if k != 0:
            return TensorV(None, x.dtype, x.lib)
        last = cx.tail_of(x, len(fixed))
        if last is None:
            return TensorV(None, x.dtype, x.lib)
        axes, middle = list(last), None
    for group, size in zip(fixed, axes, strict=True):
        assert isinstance(group, list)
        _bind(cx, group, size, bound, what)
    out: list[Size] = []
    for item in rhs:
        if item == ELLIPSIS:
            if middle is None:
                out.append(ELLIPSIS)  # type: ignore[arg-type]
            else:
                out.extend(middle)
            continue
        assert isinstance(item, list)
        part: Size = const(1)
        for name in item:
            if name.isdigit():
                part = arith("*", part, const(int(name)))
            elif name in bound:
                part = arith("*", part, bound[name])
            else:
                part = None
        out.append(part)
    if ELLIPSIS in out:  # type: ignore[comparison-overlap]
        k = out.index(ELLIPSIS)  # type: ignore[arg-type]
        if k != 0:
            return TensorV(None, x.dtype, x.lib)
        return TensorV(None, x.dtype, x.lib, tuple(out[1:]))
    return TensorV(tuple(out), x.dtype, x.lib)


def _bind(cx: Ctx, group: Group, size: Size, bound: dict[str, Size], what: str) -> None:
    """Bind the names of one axis of the left side to sizes that multiply to `size`."""
    names = [n for n in group if not n.isdigit()]
    literal_part = product(tuple(const(int(n)) for n in group if n.isdigit()))
    unknown = [n for n in names if bound.get(n) is None]
    known = product(tuple(bound[n] for n in names if bound.get(n) is not None))
    whole = arith("*", known, literal_part)
    shown = "(" + " ".join(group) + ")" if len(group) != 1 else group[0]
    if not unknown:
        cx.need(
            eq(whole, size),
            "GPU109",
            f"`{what}`: axis `{shown}` is {show(whole)}, the tensor has {show(size)}",
        )
        return
    if len(unknown) > 1:
        for n in unknown:
            bound[n] = None  # einops refuses it; the checker does not guess
        return
    if literal(whole) == 1:
        bound[unknown[0]] = size
        return
    cx.need(
        eq(arith("%", size, whole), const(0)),
        "GPU109",
        f"`{what}`: axis `{shown}` of size {show(size)} is not divisible by {show(whole)}",
    )
    bound[unknown[0]] = cx.quotient(size, whole)
