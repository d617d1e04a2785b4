"""Spatial layers beyond convolution and pooling: transposed convolutions, pixel
shuffles, upsampling, group normalisation and unfolding, with PyTorch's exact formulas.

- `ConvTranspose{1,2,3}d`: out = (in - 1)*stride - 2*padding + dilation*(k - 1)
  + output_padding + 1 per spatial axis; the input has `in_channels` channels;
- `PixelShuffle(r)`: [N, C*r*r, H, W] -> [N, C, H*r, W*r] (C*r*r must divide);
  `PixelUnshuffle(r)` the inverse (H and W must divide by r);
- `Upsample`/`F.interpolate`: a `size`, or a `scale_factor` (floor of size * scale);
- `GroupNorm(g, c)`: c channels in dim 1 (and g must divide c, checked where it is built);
- `Tensor.unfold(dim, size, step)` and `nn.Unfold`/`F.unfold` (im2col).
"""

from __future__ import annotations

from typing import Any

from mimir.host import torch_table as tt
from mimir.host.rules import Ctx
from mimir.host.values import (
    FloatV,
    NoneV,
    Size,
    TensorV,
    TupleV,
    arith,
    const,
    eq,
    le,
    literal,
    show,
    show_shape,
    show_tensor,
)


def _tuple(v: Any, d: int, default: int | None = None) -> list[Size]:
    if v is None or isinstance(v, NoneV):
        return [None if default is None else const(default)] * d
    if isinstance(v, TupleV):
        sizes = [tt.size_of(x) for x in v.items][:d]
        return sizes + [None] * (d - len(sizes))
    return [tt.size_of(v)] * d


def _spatial_input(cx: Ctx, t: TensorV, d: int, what: str) -> TensorV | None:
    """`t` as [C, *spatial] or [N, C, *spatial]: its last d + 1 sizes when the rank is unknown."""
    if t.shape is None:
        last = cx.tail_of(t, d + 1)
        return None if last is None else TensorV(last, t.dtype, t.lib)
    if len(t.shape) not in (d + 1, d + 2):
        cx.fail(
            "GPU101", f"`{what}` needs a {d + 1}-d or {d + 2}-d input, got {show_shape(t.shape)}"
        )
    return t


def _result(t: TensorV, known: TensorV, shape: tuple, d: int) -> TensorV:
    if t.shape is None:
        return TensorV(None, t.dtype, t.lib, shape[-(d + 1) :], max_rank=d + 2)
    return TensorV(shape, t.dtype, t.lib)


def conv_transpose(
    cx: Ctx,
    t: TensorV,
    d: int,
    cin: Size,
    cout: Size,
    k: Any,
    stride: Any,
    padding: Any,
    output_padding: Any,
    dilation: Any,
    what: str,
) -> Any:
    if t.dtype is not None and not tt.is_float(t.dtype):
        cx.fail("GPU105", f"`{what}` needs a floating-point input, got {t.dtype}")
    x = _spatial_input(cx, t, d, what)
    if x is None or x.shape is None:
        return TensorV(None, t.dtype, t.lib)
    c = x.shape[-d - 1]
    cx.need(
        eq(c, cin),
        "GPU100",
        f"`{what}` expects {show(cin)} input channels, got {show_tensor(t)} ({show(c)} channels)",
    )
    ks, ss = _tuple(k, d), _tuple(stride, d, 1)
    ps, ops, ds = _tuple(padding, d, 0), _tuple(output_padding, d, 0), _tuple(dilation, d, 1)
    out_channels = cout
    out: list[Size] = []
    for n, kk, s, p, op, dd in zip(x.shape[-d:], ks, ss, ps, ops, ds, strict=True):
        size = arith(
            "+",
            arith(
                "+",
                arith("-", arith("*", arith("-", n, const(1)), s), arith("*", const(2), p)),
                arith("*", dd, arith("-", kk, const(1))),
            ),
            arith("+", op, const(1)),
        )
        cx.need(
            le(const(1), size),
            "GPU102",
            f"`{what}` gives a spatial size {show(size)} below 1 for an input of size {show(n)}",
        )
        out.append(size)
    shape = (*x.shape[: -d - 1], out_channels, *out)
    return _result(t, x, shape, d)


def pixel_shuffle(cx: Ctx, t: TensorV, r: Size, unshuffle: bool, what: str) -> Any:
    x = t
    if t.shape is None:
        last = cx.tail_of(t, 3)
        x = TensorV(last, t.dtype, t.lib)
    assert x.shape is not None
    if len(x.shape) < 3:
        cx.fail("GPU101", f"`{what}` needs an input of rank 3 or more, got {show_shape(x.shape)}")
    c, h, w = x.shape[-3:]
    rr = arith("*", r, r)
    if unshuffle:
        for name, n in (("height", h), ("width", w)):
            cx.need(
                eq(arith("%", n, r), const(0)),
                "GPU013",
                f"`{what}` needs a {name} divisible by {show(r)}, got {show_tensor(t)}",
            )
        shape = (*x.shape[:-3], arith("*", c, rr), cx.quotient(h, r), cx.quotient(w, r))
    else:
        cx.need(
            eq(arith("%", c, rr), const(0)),
            "GPU013",
            f"`{what}` needs channels divisible by {show(rr)}, got {show_tensor(t)}",
        )
        shape = (*x.shape[:-3], cx.quotient(c, rr), arith("*", h, r), arith("*", w, r))
    if t.shape is None:
        return TensorV(None, t.dtype, t.lib, shape[-3:])
    return TensorV(shape, t.dtype, t.lib)


def interpolate(cx: Ctx, t: TensorV, size: Any, scale: Any) -> Any:
    """`F.interpolate(x, size=..., scale_factor=...)` and `nn.Upsample` on [N, C, *spatial]."""
    if t.shape is None or len(t.shape) < 3:
        return TensorV(None, t.dtype, t.lib)
    d = len(t.shape) - 2
    if size is not None and not isinstance(size, NoneV):
        return TensorV((*t.shape[:2], *_tuple(size, d)), t.dtype, t.lib)
    factors = scale.items if isinstance(scale, TupleV) else [scale] * d
    out: list[Size] = []
    for n, f in zip(t.shape[2:], factors, strict=False):
        k = tt.int_lit(f)
        if k is None and isinstance(f, FloatV) and f.value is not None and f.value.is_integer():
            k = int(f.value)
        if k is not None and k > 0:
            out.append(arith("*", n, const(k)))
        elif isinstance(f, FloatV) and f.value is not None and literal(n) is not None:
            out.append(const(int(literal(n) * f.value)))  # type: ignore[operator]
        else:
            out.append(None)
    return TensorV((*t.shape[:2], *out), t.dtype, t.lib)


def group_norm(cx: Ctx, t: TensorV, groups: Size, channels: Size, what: str) -> Any:
    if t.shape is None:
        return t
    if len(t.shape) < 2:
        cx.fail("GPU101", f"`{what}` needs an input of rank 2 or more, got {show_shape(t.shape)}")
    cx.need(
        eq(t.shape[1], channels),
        "GPU100",
        f"`{what}` expects {show(channels)} channels in dim 1, got {show_shape(t.shape)}",
    )
    return t


def group_norm_built(cx: Ctx, groups: Size, channels: Size, what: str) -> None:
    """`GroupNorm(g, c)` raises where it is built unless g divides c."""
    cx.need(
        eq(arith("%", channels, groups), const(0)),
        "GPU100",
        f"`{what}` splits {show(channels)} channels into {show(groups)} groups, which "
        f"does not divide them",
    )


def tensor_unfold(cx: Ctx, t: TensorV, dim: Any, size: Any, step: Any) -> Any:
    """`x.unfold(dim, size, step)`: windows along `dim`, the window as a new last axis."""
    if t.shape is None:
        return TensorV(None, t.dtype, t.lib)
    d = tt.axis(cx, dim, len(t.shape), "unfold")
    n, k, s = (t.shape[d] if d is not None else None), tt.size_of(size), tt.size_of(step)
    if d is None or k is None or s is None:
        return TensorV(None, t.dtype, t.lib)
    cx.need(
        le(k, n),
        "GPU102",
        f"`unfold` takes windows of {show(k)} from dim {d} of size {show(n)}",
    )
    count = arith("+", arith("//", arith("-", n, k), s), const(1))
    shape = list(t.shape)
    shape[d] = count
    return TensorV((*shape, k), t.dtype, t.lib)


def im2col(cx: Ctx, t: TensorV, kernel: Any, dilation: Any, padding: Any, stride: Any) -> Any:
    """`nn.Unfold`/`F.unfold`: [N, C, H, W] -> [N, C*kh*kw, L], L the count of windows."""
    if t.shape is None:
        return TensorV(None, t.dtype, t.lib)
    if len(t.shape) not in (3, 4):
        cx.fail("GPU101", f"`unfold` needs a 3-d or 4-d input, got {show_shape(t.shape)}")
    ks, ds = _tuple(kernel, 2), _tuple(dilation, 2, 1)
    ps, ss = _tuple(padding, 2, 0), _tuple(stride, 2, 1)
    count: Size = const(1)
    for n, k, dd, p, s in zip(t.shape[-2:], ks, ds, ps, ss, strict=True):
        span = arith("+", arith("*", dd, arith("-", k, const(1))), const(1))
        windows = arith(
            "+", arith("//", arith("-", arith("+", n, arith("*", const(2), p)), span), s), const(1)
        )
        count = arith("*", count, windows)
    c = t.shape[-3]
    per = arith("*", c, arith("*", ks[0], ks[1]))
    return TensorV((*t.shape[:-3], per, count), t.dtype, t.lib)
