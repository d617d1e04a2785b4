"""Sequence layers: recurrent layers and cells, transformer layers, embedding bags.

- `RNN`/`LSTM`/`GRU(input_size, hidden_size, num_layers=1, batch_first=False,
  bidirectional=False, proj_size=0)`: the input is [L, N, input_size] ([N, L, ...] with
  `batch_first`, [L, input_size] unbatched); the output ends in D*H_out (D = 2 when
  bidirectional, H_out = proj_size or hidden_size), the hidden state is
  [D*num_layers, N, H_out] and an LSTM's cell state [D*num_layers, N, hidden_size]. A
  hidden state passed in must have that shape.
- `RNNCell`/`LSTMCell`/`GRUCell`: [N, input_size] -> [N, hidden_size] (an LSTM cell
  gives `(h, c)`).
- `TransformerEncoderLayer`/`TransformerDecoderLayer`/`TransformerEncoder`/
  `TransformerDecoder`/`Transformer`: every input ends in `d_model`; the output has the
  shape of `src` (an encoder) or `tgt` (a decoder, a transformer).
- `EmbeddingBag(num, dim)`: [B, bag] -> [B, dim]; 1-d input with `offsets` -> [len, dim].
"""

from __future__ import annotations

from typing import Any

from mimir.host import torch_table as tt
from mimir.host.rules import Ctx
from mimir.host.values import (
    UNKNOWN,
    BoolV,
    IntV,
    LayerV,
    NoneV,
    Size,
    TensorV,
    TupleV,
    arith,
    const,
    eq,
    literal,
    show,
    show_shape,
    show_tensor,
)

RECURRENT = {"RNN", "LSTM", "GRU"}
CELLS = {"RNNCell", "LSTMCell", "GRUCell"}
TRANSFORMER = {
    "Transformer",
    "TransformerEncoder",
    "TransformerDecoder",
    "TransformerEncoderLayer",
    "TransformerDecoderLayer",
}


def _flag(v: Any) -> bool | None:
    if v is None or isinstance(v, NoneV):
        return False
    if isinstance(v, BoolV):
        return v.value
    k = tt.int_lit(v)
    return None if k is None else bool(k)


def _features(cx: Ctx, t: TensorV, want: Size, name: str, what: str) -> None:
    last = cx.axis_size(t, -1)
    cx.need(
        eq(last, want),
        "GPU100",
        f"`{what}` expects {name} of size {show(want)}, got {show_tensor(t)}",
    )


def recurrent(cx: Ctx, layer: LayerV, param: Any, args: list, kwargs: dict) -> Any:
    what = layer.text
    x = tt.tensor(args[0] if args else kwargs.get("input"))
    if x is None:
        return UNKNOWN
    size_in = tt.size_of(param(layer, "input_size"))
    hidden = tt.size_of(param(layer, "hidden_size"))
    layers = tt.size_of(param(layer, "num_layers", IntV(const(1))))
    proj = tt.size_of(layer.kwargs.get("proj_size", IntV(const(0))))
    batch_first = _flag(layer.kwargs.get("batch_first"))
    bidirectional = _flag(layer.kwargs.get("bidirectional"))
    if None in (batch_first, bidirectional) or layer.open or len(layer.args) > 3:
        return UNKNOWN  # flags given positionally or through `**kwargs`: not read
    _features(cx, x, size_in, "input features", what)
    directions = const(2 if bidirectional else 1)
    h_out: Size = None if proj is None else hidden if literal(proj) == 0 else proj
    if x.shape is None:
        return TupleV((TensorV(None, x.dtype, x.lib, (arith("*", directions, h_out),)), UNKNOWN))
    if len(x.shape) not in (2, 3):
        cx.fail("GPU101", f"`{what}` needs a 2-d or 3-d input, got {show_shape(x.shape)}")
    out = (*x.shape[:-1], arith("*", directions, h_out))
    stacked = arith("*", directions, layers)
    batch = () if len(x.shape) == 2 else (x.shape[0] if batch_first else x.shape[1],)
    h_shape = (stacked, *batch, h_out)
    c_shape = (stacked, *batch, hidden)
    given = args[1] if len(args) > 1 else kwargs.get("hx")
    if layer.kind == "LSTM" and isinstance(given, TupleV) and len(given.items) == 2:
        _state(cx, given.items[0], h_shape, "h_0", what)
        _state(cx, given.items[1], c_shape, "c_0", what)
    elif layer.kind != "LSTM" and isinstance(given, TensorV):
        _state(cx, given, h_shape, "h_0", what)
    output = TensorV(out, x.dtype, x.lib)
    h_n = TensorV(h_shape, x.dtype, x.lib)
    if layer.kind == "LSTM":
        return TupleV((output, TupleV((h_n, TensorV(c_shape, x.dtype, x.lib)))))
    return TupleV((output, h_n))


def _state(cx: Ctx, v: Any, want: tuple, name: str, what: str) -> None:
    t = tt.tensor(v)
    if t is None or t.shape is None:
        return
    if len(t.shape) != len(want):
        cx.fail(
            "GPU100",
            f"`{what}` expects {name} of shape {show_shape(want)}, got {show_shape(t.shape)}",
        )
    for a, b in zip(t.shape, want, strict=True):
        cx.need(
            eq(a, b),
            "GPU100",
            f"`{what}` expects {name} of shape {show_shape(want)}, got {show_shape(t.shape)}",
        )


def cell(cx: Ctx, layer: LayerV, param: Any, args: list, kwargs: dict) -> Any:
    what = layer.text
    x = tt.tensor(args[0] if args else kwargs.get("input"))
    if x is None:
        return UNKNOWN
    size_in = tt.size_of(param(layer, "input_size"))
    hidden = tt.size_of(param(layer, "hidden_size"))
    _features(cx, x, size_in, "input features", what)
    if x.shape is None:
        h = TensorV(None, x.dtype, x.lib, (hidden,))
    else:
        if len(x.shape) not in (1, 2):
            cx.fail("GPU101", f"`{what}` needs a 1-d or 2-d input, got {show_shape(x.shape)}")
        h = TensorV((*x.shape[:-1], hidden), x.dtype, x.lib)
    given = args[1] if len(args) > 1 else kwargs.get("hx")
    states = given.items if isinstance(given, TupleV) else (given,) if given is not None else ()
    for s in states:
        t = tt.tensor(s)
        if t is not None and h.shape is not None and t.shape is not None:
            _state(cx, t, h.shape, "the hidden state", what)
    return TupleV((h, h)) if layer.kind == "LSTMCell" else h


def transformer(cx: Ctx, layer: LayerV, param: Any, args: list, kwargs: dict) -> Any:
    """The output of a transformer layer has the shape of its first (decoder: target) input."""
    d_model = _d_model(layer, param)
    names = ("src", "tgt") if layer.kind == "Transformer" else ("src", "memory")
    if layer.kind in ("TransformerDecoderLayer", "TransformerDecoder"):
        names = ("tgt", "memory")
    ins = [tt.tensor(args[k] if k < len(args) else kwargs.get(n)) for k, n in enumerate(names)]
    for t, name in zip(ins, names, strict=True):
        if t is not None and d_model is not None:
            _features(cx, t, d_model, f"{name} features", layer.text)
    out = ins[1] if layer.kind == "Transformer" else ins[0]
    return out if out is not None else UNKNOWN


def _d_model(layer: LayerV, param: Any) -> Size:
    if layer.kind in ("TransformerEncoder", "TransformerDecoder"):
        inner = param(layer, "encoder_layer") or param(layer, "decoder_layer")
        if isinstance(inner, LayerV):
            return tt.size_of(inner.args[0] if inner.args else inner.kwargs.get("d_model"))
        return None
    default = IntV(const(512)) if layer.kind == "Transformer" else None
    return tt.size_of(param(layer, "d_model", default))


def embedding_bag(cx: Ctx, layer: LayerV, param: Any, args: list, kwargs: dict) -> Any:
    idx = tt.tensor(args[0] if args else kwargs.get("input"))
    if idx is None:
        return UNKNOWN
    dim = tt.size_of(param(layer, "embedding_dim"))
    if idx.dtype is not None and not tt.is_int(idx.dtype):
        cx.fail("GPU105", f"`{layer.text}` needs integer (long) indices, got {idx.dtype}")
    if idx.shape is None:
        return TensorV(None, "float32", idx.lib, (dim,))
    if len(idx.shape) == 2:
        return TensorV((idx.shape[0], dim), "float32", idx.lib)
    offsets = tt.tensor(args[1] if len(args) > 1 else kwargs.get("offsets"))
    if len(idx.shape) == 1 and offsets is not None and offsets.shape is not None:
        return TensorV((offsets.shape[0], dim), "float32", idx.lib)
    if len(idx.shape) == 1 and offsets is None:
        cx.fail("GPU101", f"`{layer.text}` needs `offsets` with a 1-d input, or a 2-d input")
    return TensorV(None, "float32", idx.lib)
