"""`torch.nn` layers and `torch.nn.functional`: shape rules with the layer's own sizes.

A layer is built from its constructor arguments (literal or symbolic sizes) and
checked when it is called: a `Linear(512, 10)` owes `x.shape[-1] == 512`, a
`Conv2d` owes its channel count and the exact floor formula for each spatial
size, `(H + 2*padding - dilation*(k - 1) - 1) // stride + 1 >= 1`, proven for
every size the annotations admit (a counterexample otherwise).
"""

from __future__ import annotations

from typing import Any

from mimir.host import nn_sequence, nn_spatial
from mimir.host import torch_table as tt
from mimir.host.rules import Ctx
from mimir.host.symbolic import DEEP, term_size
from mimir.host.values import (
    UNKNOWN,
    BoolV,
    IntV,
    LayerV,
    NoneV,
    Size,
    StrV,
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

# Layers whose output is their input (shape and dtype).
IDENTITY = {
    "ReLU",
    "ReLU6",
    "GELU",
    "SiLU",
    "Tanh",
    "Sigmoid",
    "LeakyReLU",
    "ELU",
    "Mish",
    "Softplus",
    "Hardswish",
    "Dropout",
    "Dropout1d",
    "Dropout2d",
    "Identity",
}
LOSSES = {
    "CrossEntropyLoss": "cross_entropy",
    "NLLLoss": "nll_loss",
    "MSELoss": "mse_loss",
    "L1Loss": "l1_loss",
    "SmoothL1Loss": "l1_loss",
    "BCELoss": "binary_cross_entropy",
    "BCEWithLogitsLoss": "binary_cross_entropy_with_logits",
}
_TRANSPOSED = (
    "in_channels",
    "out_channels",
    "kernel_size",
    "stride",
    "padding",
    "output_padding",
    "groups",
    "bias",
    "dilation",
)
# Constructor parameter names, in order, for the layers read by `param`.
PARAMS = {
    "Linear": ("in_features", "out_features", "bias"),
    "Conv1d": ("in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation"),
    "Conv2d": ("in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation"),
    "MaxPool1d": ("kernel_size", "stride", "padding", "dilation"),
    "MaxPool2d": ("kernel_size", "stride", "padding", "dilation"),
    "AvgPool1d": ("kernel_size", "stride", "padding"),
    "AvgPool2d": ("kernel_size", "stride", "padding"),
    "AdaptiveAvgPool2d": ("output_size",),
    "AdaptiveMaxPool2d": ("output_size",),
    "AdaptiveAvgPool1d": ("output_size",),
    "BatchNorm1d": ("num_features",),
    "BatchNorm2d": ("num_features",),
    "LayerNorm": ("normalized_shape",),
    "Embedding": ("num_embeddings", "embedding_dim"),
    "Flatten": ("start_dim", "end_dim"),
    "Unflatten": ("dim", "unflattened_size"),
    "Softmax": ("dim",),
    "MultiheadAttention": ("embed_dim", "num_heads", "dropout", "bias"),
    "LogSoftmax": ("dim",),
    "Conv3d": ("in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation"),
    "ConvTranspose1d": _TRANSPOSED,
    "ConvTranspose2d": _TRANSPOSED,
    "ConvTranspose3d": _TRANSPOSED,
    "PixelShuffle": ("upscale_factor",),
    "PixelUnshuffle": ("downscale_factor",),
    "Upsample": ("size", "scale_factor", "mode"),
    "GroupNorm": ("num_groups", "num_channels", "eps", "affine"),
    "BatchNorm3d": ("num_features",),
    "Unfold": ("kernel_size", "dilation", "padding", "stride"),
    "RNN": ("input_size", "hidden_size", "num_layers"),
    "LSTM": ("input_size", "hidden_size", "num_layers"),
    "GRU": ("input_size", "hidden_size", "num_layers"),
    "RNNCell": ("input_size", "hidden_size"),
    "LSTMCell": ("input_size", "hidden_size"),
    "GRUCell": ("input_size", "hidden_size"),
    "EmbeddingBag": ("num_embeddings", "embedding_dim"),
    "Transformer": ("d_model", "nhead"),
    "TransformerEncoderLayer": ("d_model", "nhead", "dim_feedforward"),
    "TransformerDecoderLayer": ("d_model", "nhead", "dim_feedforward"),
    "TransformerEncoder": ("encoder_layer", "num_layers"),
    "TransformerDecoder": ("decoder_layer", "num_layers"),
}
KNOWN_LAYERS = set(PARAMS) | IDENTITY | set(LOSSES)
KNOWN_LAYERS |= {"Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"}
# Constructor parameters that are sizes (free sizes when a derived class is built unseen).
SIZES = {
    "in_features",
    "out_features",
    "in_channels",
    "out_channels",
    "kernel_size",
    "num_features",
    "normalized_shape",
    "num_embeddings",
    "embedding_dim",
    "embed_dim",
    "num_heads",
    "num_channels",
    "num_groups",
    "input_size",
    "hidden_size",
}


def param(layer: LayerV, name: str, default: Any = None) -> Any:
    """A constructor argument; its default when not given (unknown if built with
    `**kwargs` nobody can read, which may hold it)."""
    names = PARAMS.get(layer.kind, ())
    if layer.open and default is not None:
        default = UNKNOWN
    return tt.arg(
        layer.args, layer.kwargs, names.index(name) if name in names else None, name, default
    )


def weight(layer: LayerV, name: str) -> Any:
    """A layer's parameter: `Linear(i, o).weight` is [o, i], `Conv2d`'s [o, i, kh, kw]."""
    if name not in ("weight", "bias"):
        return None
    dtype = layer.dtype or "float32"
    kind = layer.kind

    def size(p: str, default: Any = None) -> Size:
        return tt.size_of(param(layer, p, default))

    if kind == "Linear":
        shape = (
            (size("out_features"), size("in_features"))
            if name == "weight"
            else (size("out_features"),)
        )
    elif kind in ("Conv1d", "Conv2d", "Conv3d"):
        d = int(kind[-2])
        if name == "bias":
            shape = (size("out_channels"),)
        else:
            groups = tt.size_of(layer.kwargs.get("groups", IntV(const(1))))
            k = _pair(param(layer, "kernel_size"), d)
            cin = arith("//", size("in_channels"), groups)
            shape = (size("out_channels"), cin, *k)
    elif kind == "Embedding":
        if name == "bias":
            return None
        shape = (size("num_embeddings"), size("embedding_dim"))
    elif kind == "LayerNorm":
        normalized = param(layer, "normalized_shape")
        items = normalized.items if isinstance(normalized, TupleV) else (normalized,)
        shape = tuple(tt.size_of(x) for x in items)
    elif kind in ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d"):
        shape = (size("num_features"),)
    elif kind == "GroupNorm":
        shape = (size("num_channels"),)
    else:
        return None
    return TensorV(tuple(shape), dtype, "torch")


def describe(layer: LayerV) -> str:
    return layer.text


def call_layer(cx: Ctx, layer: LayerV, args: list, kwargs: dict, call_value: Any) -> Any:
    """The result of `layer(*args)`; `call_value` applies a member of a Sequential."""
    kind = layer.kind
    x = args[0] if args else UNKNOWN
    if kind == "Sequential":
        for member in layer.items:
            x = call_value(member, [x])
        return x
    if kind in LOSSES:
        return FUNCTIONAL[LOSSES[kind]](cx, args, {**layer.kwargs, **kwargs})
    if kind in nn_sequence.RECURRENT:
        return nn_sequence.recurrent(cx, layer, param, args, kwargs)
    if kind in nn_sequence.CELLS:
        return nn_sequence.cell(cx, layer, param, args, kwargs)
    if kind in nn_sequence.TRANSFORMER:
        return nn_sequence.transformer(cx, layer, param, args, kwargs)
    if kind == "EmbeddingBag":
        return nn_sequence.embedding_bag(cx, layer, param, args, kwargs)
    t = tt.tensor(x)
    if t is None:
        return UNKNOWN
    _weights_dtype(cx, layer, t)
    if kind in IDENTITY:
        return t
    if kind.startswith("ConvTranspose"):
        d = int(kind[-2])
        return nn_spatial.conv_transpose(
            cx,
            t,
            d,
            tt.size_of(param(layer, "in_channels")),
            tt.size_of(param(layer, "out_channels")),
            param(layer, "kernel_size"),
            param(layer, "stride", IntV(const(1))),
            param(layer, "padding", IntV(const(0))),
            param(layer, "output_padding", IntV(const(0))),
            param(layer, "dilation", IntV(const(1))),
            describe(layer),
        )
    if kind in ("PixelShuffle", "PixelUnshuffle"):
        factor = param(layer, "upscale_factor" if kind == "PixelShuffle" else "downscale_factor")
        return nn_spatial.pixel_shuffle(
            cx, t, tt.size_of(factor), kind == "PixelUnshuffle", describe(layer)
        )
    if kind == "Upsample":
        return nn_spatial.interpolate(cx, t, param(layer, "size"), param(layer, "scale_factor"))
    if kind == "GroupNorm":
        return nn_spatial.group_norm(
            cx,
            t,
            tt.size_of(param(layer, "num_groups")),
            tt.size_of(param(layer, "num_channels")),
            describe(layer),
        )
    if kind == "Unfold":
        return nn_spatial.im2col(
            cx,
            t,
            param(layer, "kernel_size"),
            param(layer, "dilation", IntV(const(1))),
            param(layer, "padding", IntV(const(0))),
            param(layer, "stride", IntV(const(1))),
        )
    if kind == "Linear":
        return linear_shape(
            cx,
            t,
            tt.size_of(param(layer, "in_features")),
            tt.size_of(param(layer, "out_features")),
            describe(layer),
        )
    if kind in ("Conv1d", "Conv2d", "Conv3d"):
        return conv(cx, layer, t, int(kind[-2]))
    if kind in ("MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d"):
        d = int(kind[-2])
        k = _pair(param(layer, "kernel_size"), d)
        stride = param(layer, "stride")
        s = k if stride is None or isinstance(stride, NoneV) else _pair(stride, d)
        p = _pair(param(layer, "padding", IntV(const(0))), d)
        dil = _pair(param(layer, "dilation", IntV(const(1))), d) if kind.startswith("Max") else None
        return pool(cx, t, d, k, s, p, dil, describe(layer))
    if kind.startswith("Adaptive"):
        d = 1 if kind.endswith("1d") else 2
        return adaptive(cx, t, d, param(layer, "output_size"), describe(layer))
    if kind in ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d"):
        return batchnorm(cx, t, tt.size_of(param(layer, "num_features")), kind, describe(layer))
    if kind == "LayerNorm":
        return layer_norm_shape(cx, t, param(layer, "normalized_shape"), describe(layer))
    if kind == "Embedding":
        return embedding_shape(cx, t, tt.size_of(param(layer, "embedding_dim")), describe(layer))
    if kind == "Flatten":
        return tt.flatten(
            cx,
            t,
            param(layer, "start_dim", IntV(const(1))),
            param(layer, "end_dim", IntV(const(-1))),
        )
    if kind == "Unflatten":
        return unflatten(cx, t, param(layer, "dim"), param(layer, "unflattened_size"))
    if kind == "MultiheadAttention":
        return multihead_attention(cx, layer, args, kwargs)
    if kind in ("Softmax", "LogSoftmax"):
        dim = param(layer, "dim")
        if dim is not None and t.shape is not None:
            tt.axis(cx, dim, len(t.shape), kind)
        return t
    return UNKNOWN


def _weights_dtype(cx: Ctx, layer: LayerV, t: TensorV) -> None:
    """A layer whose weights were converted (`.double()`, `.half()`, `dtype=`) multiplies
    only inputs of that dtype."""
    if layer.dtype is None or t.dtype is None or layer.kind in IDENTITY:
        return
    if tt.is_float(t.dtype) and tt.is_float(layer.dtype) and t.dtype != layer.dtype:
        if layer.kind in ("Linear", "Conv1d", "Conv2d", "Conv3d", "LayerNorm", "GroupNorm"):
            cx.fail(
                "GPU105",
                f"`{describe(layer)}` holds {layer.dtype} weights, got a {t.dtype} input",
            )


# ---------------------------------------------------------------- the rules


def linear_shape(cx: Ctx, t: TensorV, fan_in: Size, fan_out: Size, what: str) -> Any:
    if t.dtype is not None and not tt.is_float(t.dtype):
        cx.fail("GPU105", f"`{what}` needs a floating-point input, got {t.dtype}")
    if t.shape is None:
        features = cx.axis_size(t, -1)
        cx.need(
            eq(features, fan_in),
            "GPU100",
            f"`{what}` expects {show(fan_in)} input features, got {show_tensor(t)} "
            f"({show(features)} features)",
        )
        return TensorV(None, t.dtype, t.lib, (*t.tail[:-1], fan_out))
    if not t.shape:
        cx.fail("GPU101", f"`{what}` needs an input of rank 1 or more, got a scalar")
    cx.need(
        eq(t.shape[-1], fan_in),
        "GPU100",
        f"`{what}` expects {show(fan_in)} input features, got {show_shape(t.shape)} "
        f"({show(t.shape[-1])} features)",
        (t.shape,),
    )
    return TensorV((*t.shape[:-1], fan_out), t.dtype, t.lib)


def _pair(v: Any, d: int) -> list[Size]:
    if isinstance(v, TupleV):
        return [tt.size_of(x) for x in v.items][:d] + [None] * (d - len(v.items))
    return [tt.size_of(v)] * d


def _spatial(
    cx: Ctx, what: str, size: Size, k: Size, s: Size, p: Size, dil: Size | None, axis_name: str
) -> Size:
    """`(size + 2p - dil*(k-1) - 1) // s + 1`, owing at least 1 (PyTorch's exact formula)."""
    span = arith("+", arith("*", dil, arith("-", k, const(1))), const(1)) if dil is not None else k
    padded = arith("+", size, arith("*", const(2), p))
    cx.need(
        le(span, padded),
        "GPU102",
        f"`{what}` gets {axis_name}={show(size)}, smaller than its kernel: the padded input "
        f"{show(padded)} is less than the kernel's extent {show(span)}",
        ((size,),),
    )
    # floor((padded - span) / s) + 1 == floor((padded - span + s) / s): one division, and
    # the constants fold (`H - 4` for a 5x5 kernel, `H // 2` for a 2x2 pool).
    shift = arith("-", s, span)
    k = literal(shift)
    top = arith("-", padded, const(-k)) if k is not None and k < 0 else arith("+", padded, shift)
    out = arith("//", top, s)
    if out is not None and out.value is None and term_size(out.term, DEEP + 1) > DEEP:
        # fifty layers deep, the exact floor formula is too large to reason with: a size of
        # its own, at least 1 (what the layers after it demand of it is assumed)
        return cx.free_size(f"{axis_name}'")
    return out


def conv(cx: Ctx, layer: LayerV, t: TensorV, d: int) -> Any:
    cin = tt.size_of(param(layer, "in_channels"))
    cout = tt.size_of(param(layer, "out_channels"))
    k = _pair(param(layer, "kernel_size"), d)
    s = _pair(param(layer, "stride", IntV(const(1))), d)
    padding = param(layer, "padding", IntV(const(0)))
    dil = _pair(param(layer, "dilation", IntV(const(1))), d)
    return conv_shape(cx, t, d, cin, cout, k, s, padding, dil, describe(layer))


def conv_shape(
    cx: Ctx,
    t: TensorV,
    d: int,
    cin: Size,
    cout: Size,
    k: list[Size],
    s: list[Size],
    padding: Any,
    dil: list[Size],
    what: str,
) -> Any:
    if t.dtype is not None and not tt.is_float(t.dtype):
        cx.fail("GPU105", f"`{what}` needs a floating-point input, got {t.dtype}")
    if t.shape is None:  # [C, *spatial] or [N, C, *spatial]: the last d + 1 sizes are known
        last = cx.tail_of(t, d + 1)
        t = TensorV(last, t.dtype, t.lib)
        out = conv_shape(cx, t, d, cin, cout, k, s, padding, dil, what)
        if not isinstance(out, TensorV):
            return out
        return TensorV(None, out.dtype, out.lib, out.shape, max_rank=d + 2)
    if len(t.shape) not in (d + 1, d + 2):
        cx.fail(
            "GPU101",
            f"`{what}` needs a {d + 1}-d or {d + 2}-d input, got {show_shape(t.shape)}",
        )
    c = t.shape[-d - 1]
    cx.need(
        eq(c, cin),
        "GPU100",
        f"`{what}` expects {show(cin)} input channels, got {show_shape(t.shape)} "
        f"({show(c)} channels)",
        (t.shape,),
    )
    names = ["L"] if d == 1 else ["H", "W"] if d == 2 else ["D", "H", "W"]
    spatial = t.shape[-d:]
    if isinstance(padding, StrV):
        if padding.value == "same":
            out = list(spatial)
        else:
            out = [
                _spatial(cx, what, n, kk, ss, const(0), dd, name)
                for n, kk, ss, dd, name in zip(spatial, k, s, dil, names, strict=True)
            ]
    else:
        p = _pair(padding, d)
        out = [
            _spatial(cx, what, n, kk, ss, pp, dd, name)
            for n, kk, ss, pp, dd, name in zip(spatial, k, s, p, dil, names, strict=True)
        ]
    return TensorV((*t.shape[: -d - 1], cout, *out), t.dtype, t.lib)


def pool(
    cx: Ctx,
    t: TensorV,
    d: int,
    k: list[Size],
    s: list[Size],
    p: list[Size],
    dil: list[Size] | None,
    what: str,
) -> Any:
    if t.shape is None:  # [C, *spatial] or [N, C, *spatial]: the last d + 1 sizes are known
        last = cx.tail_of(t, d + 1)
        out = pool(cx, TensorV(last, t.dtype, t.lib), d, k, s, p, dil, what)
        if not isinstance(out, TensorV):
            return out
        return TensorV(None, t.dtype, t.lib, out.shape, max_rank=d + 2)
    if len(t.shape) not in (d + 1, d + 2):
        cx.fail(
            "GPU101", f"`{what}` needs a {d + 1}-d or {d + 2}-d input, got {show_shape(t.shape)}"
        )
    names = ["L"] if d == 1 else ["H", "W"] if d == 2 else ["D", "H", "W"]
    dils = dil if dil is not None else [None] * d
    out = [
        _spatial(cx, what, n, kk, ss, pp, dd, name)
        for n, kk, ss, pp, dd, name in zip(t.shape[-d:], k, s, p, dils, names, strict=True)
    ]
    return TensorV((*t.shape[:-d], *out), t.dtype, t.lib)


def adaptive(cx: Ctx, t: TensorV, d: int, size: Any, what: str) -> Any:
    if t.shape is None:
        last = cx.tail_of(t, d + 1)
        out = adaptive(cx, TensorV(last, t.dtype, t.lib), d, size, what)
        if not isinstance(out, TensorV):
            return out
        return TensorV(None, t.dtype, t.lib, out.shape, max_rank=d + 2)
    if len(t.shape) not in (d + 1, d + 2):
        cx.fail(
            "GPU101", f"`{what}` needs a {d + 1}-d or {d + 2}-d input, got {show_shape(t.shape)}"
        )
    out = _pair(size, d)
    if isinstance(size, TupleV):
        out = [
            t.shape[-d + i] if isinstance(x, NoneV) else tt.size_of(x)
            for i, x in enumerate(size.items)
        ]
    return TensorV((*t.shape[:-d], *out), t.dtype, t.lib)


def batchnorm(cx: Ctx, t: TensorV, c: Size, kind: str, what: str) -> Any:
    ranks = (2, 3) if kind == "BatchNorm1d" else (4,) if kind == "BatchNorm2d" else (5,)
    if t.shape is None and len(ranks) == 1:
        t = cx.refine(t, ranks[0])  # the only rank it accepts
    if t.shape is None:
        return t
    if len(t.shape) not in ranks:
        want = " or ".join(f"{r}-d" for r in ranks)
        cx.fail("GPU101", f"`{what}` needs a {want} input, got {show_shape(t.shape)}")
    cx.need(
        eq(t.shape[1], c),
        "GPU100",
        f"`{what}` expects {show(c)} channels in dim 1, got {show_shape(t.shape)}",
    )
    return t


def layer_norm_shape(cx: Ctx, t: TensorV, normalized: Any, what: str) -> Any:
    sizes = (
        [tt.size_of(x) for x in normalized.items]
        if isinstance(normalized, TupleV)
        else [tt.size_of(normalized)]
    )
    if t.shape is None:
        last = cx.tail_of(t, len(sizes))
        for want, got in zip(sizes, last, strict=True):
            cx.need(
                eq(want, got),
                "GPU100",
                f"`{what}` normalizes trailing size {show(want)}, got {show_tensor(t)}",
            )
        return t
    if len(sizes) > len(t.shape):
        cx.fail("GPU101", f"`{what}` normalizes {len(sizes)} dims of a rank-{len(t.shape)} input")
    for want, got in zip(sizes, t.shape[len(t.shape) - len(sizes) :], strict=True):
        cx.need(
            eq(want, got),
            "GPU100",
            f"`{what}` normalizes trailing size {show(want)}, got {show_shape(t.shape)}",
        )
    return t


def embedding_shape(cx: Ctx, idx: TensorV, dim: Size, what: str) -> Any:
    if idx.dtype is not None and not tt.is_int(idx.dtype):
        cx.fail("GPU105", f"`{what}` needs integer (long) indices, got {idx.dtype}")
    if idx.shape is None:
        return TensorV(None, "float32", idx.lib, (*idx.tail, dim))
    return TensorV((*idx.shape, dim), "float32", idx.lib)


def unflatten(cx: Ctx, t: TensorV, dim: Any, sizes: Any) -> Any:
    if t.shape is None or not isinstance(sizes, TupleV):
        return TensorV(None, t.dtype, t.lib)
    d = tt.axis(cx, dim, len(t.shape), "unflatten")
    if d is None:
        return TensorV(None, t.dtype, t.lib)
    parts = tt.sizes_arg([sizes])
    if parts is None:
        return TensorV(None, t.dtype, t.lib)
    inner = tt.reshape(cx, TensorV((t.shape[d],), t.dtype, t.lib), parts, "unflatten")
    return TensorV((*t.shape[:d], *inner.shape, *t.shape[d + 1 :]), t.dtype, t.lib)


def multihead_attention(cx: Ctx, layer: LayerV, args: list, kwargs: dict) -> Any:
    """`attn(query, key, value)` is `(output, weights)`; the output has the query's shape."""
    e = tt.size_of(param(layer, "embed_dim"))
    q, k, v = (
        tt.tensor(tt.arg(args, kwargs, i, n)) for i, n in enumerate(("query", "key", "value"))
    )
    if q is None or q.shape is None or not q.shape:
        return TupleV((UNKNOWN, UNKNOWN))
    what = describe(layer)
    for name, t, dim_kw in (("query", q, None), ("key", k, "kdim"), ("value", v, "vdim")):
        if t is None or t.shape is None or not t.shape:
            continue
        want = tt.size_of(layer.kwargs[dim_kw]) if dim_kw in layer.kwargs else e
        cx.need(
            eq(t.shape[-1], want),
            "GPU100",
            f"`{what}` expects {name} features of size {show(want)}, got {show_shape(t.shape)}",
            (t.shape,),
        )
    return TupleV((q, UNKNOWN))


# ---------------------------------------------------------------- losses


def _loss_result(t: TensorV, kwargs: dict) -> TensorV:
    red = kwargs.get("reduction")
    if isinstance(red, StrV) and red.value == "none":
        return t
    return TensorV((), t.dtype, t.lib)


def cross_entropy(cx: Ctx, args: list, kwargs: dict, what: str = "cross_entropy") -> Any:
    x = tt.tensor(tt.arg(args, kwargs, 0, "input"))
    y = tt.tensor(tt.arg(args, kwargs, 1, "target"))
    if x is None or y is None or x.shape is None or y.shape is None:
        return TensorV((), None) if x is not None else UNKNOWN
    if len(y.shape) == len(x.shape) and tt.is_float(y.dtype) and what == "cross_entropy":
        for a, b in zip(x.shape, y.shape, strict=True):
            cx.need(
                eq(a, b),
                "GPU104",
                f"`{what}` with probability targets needs equal shapes: input "
                f"{show_shape(x.shape)}, target {show_shape(y.shape)}",
            )
        return _loss_result(TensorV(x.shape[:1], x.dtype, x.lib), kwargs)
    want = x.shape[:1] + x.shape[2:] if len(x.shape) >= 2 else ()
    if len(y.shape) != len(want):
        cx.fail(
            "GPU104",
            f"`{what}` needs a class-index target of shape {show_shape(want)} for input "
            f"{show_shape(x.shape)}, got {show_shape(y.shape)}",
        )
    if y.dtype is not None and not tt.is_int(y.dtype):
        cx.fail(
            "GPU105",
            f"`{what}` needs integer (long) class indices as target, got {y.dtype}",
        )
    for a, b in zip(want, y.shape, strict=True):
        cx.need(
            eq(a, b),
            "GPU104",
            f"`{what}`: input {show_shape(x.shape)} and target {show_shape(y.shape)} "
            f"disagree on the batch size ({show(a)} vs {show(b)})",
        )
    return _loss_result(TensorV(tuple(want), x.dtype, x.lib), kwargs)


def pointwise_loss(cx: Ctx, args: list, kwargs: dict, what: str, exact: bool) -> Any:
    """`mse_loss`/`l1_loss` broadcast (with a warning); `binary_cross_entropy` raises."""
    x = tt.tensor(tt.arg(args, kwargs, 0, "input"))
    y = tt.tensor(tt.arg(args, kwargs, 1, "target"))
    if x is None or y is None or x.shape is None or y.shape is None:
        return TensorV((), x.dtype if x else None)
    if exact:
        same_rank = len(x.shape) == len(y.shape)
        cond: Any = False if not same_rank else True
        if same_rank:
            for a, b in zip(x.shape, y.shape, strict=True):
                c = eq(a, b)
                cond = (
                    None
                    if c is None or cond is None
                    else (cond if c is True else c if cond is True else None)
                )
        cx.need(
            cond,
            "GPU104",
            f"`{what}` needs a target of the input's shape: input {show_shape(x.shape)}, "
            f"target {show_shape(y.shape)}",
        )
        shape = x.shape
    else:
        shape = tt.broadcast(cx, x.shape, y.shape)
        differ = len(x.shape) != len(y.shape) or any(
            eq(a, b) is False for a, b in zip(x.shape, y.shape, strict=True)
        )
        if differ and shape is not None:
            cx.warn(
                "GPU106",
                f"`{what}` broadcasts target {show_shape(y.shape)} against input "
                f"{show_shape(x.shape)} to {show_shape(shape)}",
            )
    return _loss_result(TensorV(shape, x.dtype, x.lib), kwargs)


# ---------------------------------------------------------------- torch.nn.functional


def _f_linear(cx: Ctx, args: list, kwargs: dict) -> Any:
    x = tt.tensor(tt.arg(args, kwargs, 0, "input"))
    w = tt.tensor(tt.arg(args, kwargs, 1, "weight"))
    if x is None or w is None or w.shape is None or len(w.shape) != 2:
        return TensorV(None, x.dtype if x else None) if x else UNKNOWN
    return linear_shape(cx, x, w.shape[1], w.shape[0], "linear")


def _f_conv(d: int) -> Any:
    def rule(cx: Ctx, args: list, kwargs: dict) -> Any:
        x = tt.tensor(tt.arg(args, kwargs, 0, "input"))
        w = tt.tensor(tt.arg(args, kwargs, 1, "weight"))
        if x is None:
            return UNKNOWN
        if w is None or w.shape is None or len(w.shape) != d + 2:
            return TensorV(None, x.dtype, x.lib)
        groups = tt.int_lit(tt.arg(args, kwargs, 6, "groups", IntV(const(1))))
        if groups != 1:
            return TensorV(None, x.dtype, x.lib)
        s = _pair(tt.arg(args, kwargs, 3, "stride", IntV(const(1))), d)
        p = tt.arg(args, kwargs, 4, "padding", IntV(const(0)))
        dil = _pair(tt.arg(args, kwargs, 5, "dilation", IntV(const(1))), d)
        return conv_shape(
            cx, x, d, w.shape[1], w.shape[0], list(w.shape[2:]), s, p, dil, f"conv{d}d"
        )

    return rule


def _f_pool(d: int, maxpool: bool) -> Any:
    def rule(cx: Ctx, args: list, kwargs: dict) -> Any:
        x = tt.tensor(tt.arg(args, kwargs, 0, "input"))
        if x is None:
            return UNKNOWN
        k = _pair(tt.arg(args, kwargs, 1, "kernel_size"), d)
        stride = tt.arg(args, kwargs, 2, "stride")
        s = k if stride is None or isinstance(stride, NoneV) else _pair(stride, d)
        p = _pair(tt.arg(args, kwargs, 3, "padding", IntV(const(0))), d)
        dil = _pair(tt.arg(args, kwargs, 4, "dilation", IntV(const(1))), d) if maxpool else None
        name = f"{'max' if maxpool else 'avg'}_pool{d}d"
        return pool(cx, x, d, k, s, p, dil, name)

    return rule


def _f_adaptive(d: int) -> Any:
    def rule(cx: Ctx, args: list, kwargs: dict) -> Any:
        x = tt.tensor(tt.arg(args, kwargs, 0, "input"))
        if x is None:
            return UNKNOWN
        return adaptive(cx, x, d, tt.arg(args, kwargs, 1, "output_size"), "adaptive pool")

    return rule


def _f_embedding(cx: Ctx, args: list, kwargs: dict) -> Any:
    idx = tt.tensor(tt.arg(args, kwargs, 0, "input"))
    w = tt.tensor(tt.arg(args, kwargs, 1, "weight"))
    if idx is None:
        return UNKNOWN
    dim = w.shape[1] if w is not None and w.shape is not None and len(w.shape) == 2 else None
    return embedding_shape(cx, idx, dim, "embedding")


def _f_layer_norm(cx: Ctx, args: list, kwargs: dict) -> Any:
    x = tt.tensor(tt.arg(args, kwargs, 0, "input"))
    if x is None:
        return UNKNOWN
    return layer_norm_shape(cx, x, tt.arg(args, kwargs, 1, "normalized_shape"), "layer_norm")


def _f_softmax(cx: Ctx, args: list, kwargs: dict) -> Any:
    x = tt.tensor(tt.arg(args, kwargs, 0, "input"))
    if x is None:
        return UNKNOWN
    dim = tt.arg(args, kwargs, 1, "dim")
    if dim is not None and x.shape is not None:
        tt.axis(cx, dim, len(x.shape), "softmax")
    return x


def _f_identity(cx: Ctx, args: list, kwargs: dict) -> Any:
    x = tt.tensor(tt.arg(args, kwargs, 0, "input"))
    return x if x is not None else UNKNOWN


def _f_pad(cx: Ctx, args: list, kwargs: dict) -> Any:
    x = tt.tensor(tt.arg(args, kwargs, 0, "input"))
    pads = tt.arg(args, kwargs, 1, "pad")
    if x is None or x.shape is None or not isinstance(pads, TupleV):
        return TensorV(None, x.dtype, x.lib) if x else UNKNOWN
    sizes = [tt.size_of(p) for p in pads.items]
    if len(sizes) % 2 or len(sizes) // 2 > len(x.shape):
        cx.fail("GPU036", f"pad got {len(sizes)} values for a tensor of rank {len(x.shape)}")
    shape = list(x.shape)
    for i in range(len(sizes) // 2):
        ax = len(shape) - 1 - i
        shape[ax] = arith("+", shape[ax], arith("+", sizes[2 * i], sizes[2 * i + 1]))
    return TensorV(tuple(shape), x.dtype, x.lib)


def _f_interpolate(cx: Ctx, args: list, kwargs: dict) -> Any:
    x = tt.tensor(tt.arg(args, kwargs, 0, "input"))
    if x is None:
        return UNKNOWN
    size = tt.arg(args, kwargs, 1, "size")
    scale = tt.arg(args, kwargs, 2, "scale_factor")
    return nn_spatial.interpolate(cx, x, size, scale)


def _f_pixel_shuffle(unshuffle: bool) -> Any:
    def rule(cx: Ctx, args: list, kwargs: dict) -> Any:
        x = tt.tensor(tt.arg(args, kwargs, 0, "input"))
        r = tt.size_of(
            tt.arg(args, kwargs, 1, "downscale_factor" if unshuffle else "upscale_factor")
        )
        if x is None:
            return UNKNOWN
        name = "pixel_unshuffle" if unshuffle else "pixel_shuffle"
        return nn_spatial.pixel_shuffle(cx, x, r, unshuffle, name)

    return rule


def _f_unfold(cx: Ctx, args: list, kwargs: dict) -> Any:
    x = tt.tensor(tt.arg(args, kwargs, 0, "input"))
    if x is None:
        return UNKNOWN
    return nn_spatial.im2col(
        cx,
        x,
        tt.arg(args, kwargs, 1, "kernel_size"),
        tt.arg(args, kwargs, 2, "dilation", IntV(const(1))),
        tt.arg(args, kwargs, 3, "padding", IntV(const(0))),
        tt.arg(args, kwargs, 4, "stride", IntV(const(1))),
    )


def _f_sdpa(cx: Ctx, args: list, kwargs: dict) -> Any:
    q = tt.tensor(tt.arg(args, kwargs, 0, "query"))
    k = tt.tensor(tt.arg(args, kwargs, 1, "key"))
    v = tt.tensor(tt.arg(args, kwargs, 2, "value"))
    if q is None or k is None or v is None or None in (q.shape, k.shape, v.shape):
        return TensorV(None, q.dtype if q else None) if q else UNKNOWN
    assert q.shape is not None and k.shape is not None and v.shape is not None
    if min(len(q.shape), len(k.shape), len(v.shape)) < 2:
        cx.fail("GPU101", "scaled_dot_product_attention needs query, key and value of rank 2+")
    cx.need(
        eq(q.shape[-1], k.shape[-1]),
        "GPU011",
        f"attention: query {show_shape(q.shape)} and key {show_shape(k.shape)} differ in the "
        f"embedding size ({show(q.shape[-1])} vs {show(k.shape[-1])})",
    )
    cx.need(
        eq(k.shape[-2], v.shape[-2]),
        "GPU011",
        f"attention: key {show_shape(k.shape)} and value {show_shape(v.shape)} differ in "
        f"sequence length ({show(k.shape[-2])} vs {show(v.shape[-2])})",
    )
    batch = tt.broadcast(cx, q.shape[:-2], k.shape[:-2], v.shape[:-2])
    if batch is None:
        return TensorV(None, q.dtype, q.lib)
    return TensorV((*batch, q.shape[-2], v.shape[-1]), q.dtype, q.lib)


def _keepdim_false(kwargs: dict) -> bool:
    k = kwargs.get("keepdim")
    return not (isinstance(k, BoolV) and k.value)


FUNCTIONAL: dict[str, Any] = {
    "linear": _f_linear,
    "conv1d": _f_conv(1),
    "conv2d": _f_conv(2),
    "max_pool1d": _f_pool(1, True),
    "max_pool2d": _f_pool(2, True),
    "avg_pool1d": _f_pool(1, False),
    "avg_pool2d": _f_pool(2, False),
    "adaptive_avg_pool2d": _f_adaptive(2),
    "adaptive_max_pool2d": _f_adaptive(2),
    "adaptive_avg_pool1d": _f_adaptive(1),
    "embedding": _f_embedding,
    "layer_norm": _f_layer_norm,
    "softmax": _f_softmax,
    "log_softmax": _f_softmax,
    "pad": _f_pad,
    "interpolate": _f_interpolate,
    "upsample": _f_interpolate,
    "pixel_shuffle": _f_pixel_shuffle(False),
    "pixel_unshuffle": _f_pixel_shuffle(True),
    "unfold": _f_unfold,
    "scaled_dot_product_attention": _f_sdpa,
    "cross_entropy": cross_entropy,
    "nll_loss": lambda cx, a, k: cross_entropy(cx, a, k, "nll_loss"),
    "mse_loss": lambda cx, a, k: pointwise_loss(cx, a, k, "mse_loss", exact=False),
    "l1_loss": lambda cx, a, k: pointwise_loss(cx, a, k, "l1_loss", exact=False),
    "smooth_l1_loss": lambda cx, a, k: pointwise_loss(cx, a, k, "smooth_l1_loss", exact=False),
    "binary_cross_entropy": lambda cx, a, k: pointwise_loss(
        cx, a, k, "binary_cross_entropy", exact=True
    ),
    "binary_cross_entropy_with_logits": lambda cx, a, k: pointwise_loss(
        cx, a, k, "binary_cross_entropy_with_logits", exact=True
    ),
}
for _name in (
    "relu",
    "gelu",
    "silu",
    "tanh",
    "sigmoid",
    "leaky_relu",
    "elu",
    "dropout",
    "dropout1d",
    "dropout2d",
    "relu6",
    "hardswish",
    "mish",
    "softplus",
    "normalize",
):
    FUNCTIONAL[_name] = _f_identity
