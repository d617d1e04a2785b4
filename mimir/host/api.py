"""Dispatch of library calls: `torch.*`, `numpy.*`, `torch.nn.functional.*`, tensor methods.

`call_function(cx, name, args, kwargs)` answers a call of a dotted library name;
`call_method(cx, tensor, name, args, kwargs)` a method of a tensor. Both give
`UNKNOWN` for anything not in the table.
"""

from __future__ import annotations

from typing import Any

from mimir.host import nn, nn_spatial
from mimir.host import torch_table as tt
from mimir.host.rules import Ctx
from mimir.host.values import (
    UNKNOWN,
    BoolV,
    DeviceV,
    DTypeV,
    FloatV,
    HeadV,
    IntV,
    NoneV,
    ShapeOfV,
    StrV,
    TensorV,
    TupleV,
    const,
    eq,
    literal,
    product,
    show,
    show_shape,
)

_ELEMENTWISE_1 = {
    "relu",
    "sigmoid",
    "tanh",
    "exp",
    "log",
    "abs",
    "sqrt",
    "rsqrt",
    "neg",
    "sin",
    "cos",
    "square",
    "log1p",
    "expm1",
    "reciprocal",
    "floor",
    "ceil",
    "round",
    "sign",
    "detach",
    "clone",
    "contiguous",
    "roll",
    "clamp",
    "clip",
    "requires_grad_",
    "cpu",
    "cuda",
    "pin_memory",
    "nan_to_num",
    "tril",
    "triu",
    "zero_",
    "fill_",
    "normal_",
    "uniform_",
    "copy",
    "erf",
    "exp2",
    "log2",
    "negative",
    "positive",
    "relu_",
    "sigmoid_",
    "tanh_",
}
_ELEMENTWISE_2 = {
    "add",
    "sub",
    "subtract",
    "mul",
    "multiply",
    "div",
    "divide",
    "true_divide",
    "pow",
    "maximum",
    "minimum",
    "fmod",
    "remainder",
    "atan2",
    "add_",
    "sub_",
    "mul_",
    "div_",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "logical_and",
    "logical_or",
    "power",
    "greater",
    "less",
    "equal",
    "not_equal",
    "hypot",
}
_COMPARE = {
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "greater",
    "less",
    "equal",
    "not_equal",
    "logical_and",
    "logical_or",
    "isnan",
    "isinf",
    "isfinite",
    "logical_not",
}
_REDUCE = {
    "sum",
    "mean",
    "max",
    "min",
    "prod",
    "argmax",
    "argmin",
    "std",
    "var",
    "norm",
    "logsumexp",
    "all",
    "any",
    "amax",
    "amin",
    "nansum",
    "nanmean",
    "median",
}
_CAST = {
    "float": "float32",
    "double": "float64",
    "half": "float16",
    "long": "int64",
    "int": "int32",
    "bool": "bool",
    "bfloat16": "bfloat16",
    "short": "int16",
    "byte": "uint8",
}
_CREATE = {"zeros", "ones", "empty", "randn", "rand"}


def call_function(cx: Ctx, name: str, args: list, kwargs: dict) -> Any:
    lib = "numpy" if name.startswith("numpy.") else "torch"
    short = name.rsplit(".", 1)[-1]
    if name.startswith("torch.nn.functional."):
        rule = nn.FUNCTIONAL.get(short)
        return rule(cx, args, kwargs) if rule else UNKNOWN
    if name in ("torch.device",):
        return tt.device_of(args[0]) if args else DeviceV(None)
    if lib == "torch" and name.count(".") == 1 or name.startswith("numpy."):
        return _library(cx, short, name, args, kwargs, lib)
    if name in ("numpy.random.randn", "numpy.random.rand"):
        return tt.creation(cx, args, kwargs, lib)
    return UNKNOWN


def _library(cx: Ctx, short: str, name: str, args: list, kwargs: dict, lib: str) -> Any:
    if (
        lib == "numpy"
        and args
        and isinstance(args[0], (IntV, FloatV))
        and short in _ELEMENTWISE_1 | {"log", "exp", "sqrt", "log2", "log10", "power", "floor"}
    ):
        return FloatV()  # `np.log(10000)`: a Python number
    if name in ("numpy.random.randn", "numpy.random.rand", "numpy.random.standard_normal"):
        return tt.creation(cx, args, kwargs, lib)
    if name in ("numpy.random.randint", "torch.randint"):
        if lib == "torch":
            sizes = tt.arg(args, kwargs, 2 if len(args) >= 3 else 1, "size")
            dtype = tt.dtype_arg(kwargs.get("dtype")) or "int64"
            return tt.creation(
                cx, [sizes] if sizes is not None else [], {"dtype": DTypeV(dtype)}, lib
            )
        size = kwargs.get("size", args[2] if len(args) > 2 else None)
        if size is None:
            return IntV(None)
        return tt.creation(cx, [size], {"dtype": DTypeV("int64")}, lib)
    if name.startswith("numpy.random.") or name.startswith("numpy.linalg."):
        return UNKNOWN
    if short in _CREATE:
        return tt.creation(cx, args, kwargs, lib)
    if short == "full":
        return tt.creation(cx, args[:1], kwargs, lib)
    if short in ("zeros_like", "ones_like", "empty_like", "randn_like", "rand_like", "full_like"):
        t = tt.tensor(args[0] if args else None)
        if t is None:
            return UNKNOWN
        dtype = tt.dtype_arg(kwargs.get("dtype"))
        return t.with_dtype(dtype) if dtype else t
    if short in (
        "tensor",
        "as_tensor",
        "array",
        "asarray",
        "from_numpy",
        "LongTensor",
        "FloatTensor",
    ):
        dtype = tt.dtype_arg(kwargs.get("dtype"))
        if short == "LongTensor":
            dtype = "int64"
        if short == "FloatTensor":
            dtype = "float32"
        data = args[0] if args else None
        if "ndmin" in kwargs:
            return TensorV(None, dtype, lib)
        if isinstance(data, TensorV):
            return TensorV(data.shape, dtype or data.dtype, lib)
        return tt.from_data(data, lib, dtype)
    if short == "meshgrid" and lib == "torch":
        items = args[0].items if len(args) == 1 and isinstance(args[0], TupleV) else args
        ts = [tt.tensor(a) for a in items]
        if not ts or any(t is None or t.shape is None or len(t.shape) != 1 for t in ts):
            return UNKNOWN
        sizes = [t.shape[0] for t in ts]  # type: ignore[union-attr, index]
        order = kwargs.get("indexing")
        if isinstance(order, StrV) and order.value == "xy" and len(sizes) >= 2:
            sizes[0], sizes[1] = sizes[1], sizes[0]
        return TupleV(tuple(TensorV(tuple(sizes), t.dtype, lib) for t in ts if t is not None))
    if short in ("outer", "ger") and len(args) == 2:
        a, b = tt.tensor(args[0]), tt.tensor(args[1])
        if a is None or b is None:
            return UNKNOWN
        n = a.shape[0] if a.shape is not None and len(a.shape) == 1 else None
        m = b.shape[0] if b.shape is not None and len(b.shape) == 1 else None
        return TensorV((n, m), tt.promote(a, b), lib)
    if short == "arange":
        return tt.arange(args, kwargs, lib)
    if short in ("eye", "identity"):
        n = tt.size_of(args[0]) if args else None
        m = tt.size_of(args[1]) if len(args) > 1 else n
        return TensorV((n, m), tt.dtype_arg(kwargs.get("dtype")) or tt.default_float(lib), lib)
    if short == "linspace":
        n = tt.size_of(tt.arg(args, kwargs, 2, "steps" if lib == "torch" else "num"))
        return TensorV((n,), tt.default_float(lib), lib)
    if short in ("cat", "concat", "concatenate", "stack", "hstack", "vstack"):
        seq = tt.arg(args, kwargs, 0, "tensors")
        dim = tt.arg(args, kwargs, 1, "dim" if lib == "torch" else "axis")
        if short == "hstack" or short == "vstack":
            return UNKNOWN
        return tt.cat(cx, seq, dim, short == "stack", short)
    if short in ("matmul", "dot") and len(args) == 2:
        if set(kwargs) - {"out"}:
            return UNKNOWN  # `axes=`, `signature=`: not the plain product
        if short == "dot" and lib == "torch":
            return TensorV((), None)
        a, b = tt.tensor(args[0]), tt.tensor(args[1])
        if (
            short == "dot"
            and a
            and b
            and a.shape
            and b.shape
            and max(len(a.shape), len(b.shape)) > 2
        ):
            return _numpy_dot(cx, a, b)  # sums over a's last and b's second-to-last axis
        return tt.matmul(cx, args[0], args[1])
    if short == "mm":
        return tt.mm(cx, args, kwargs)
    if short in ("addmm", "baddbmm"):  # input + mat1 @ mat2 (batched for baddbmm)
        product = (tt.mm if short == "addmm" else tt.bmm)(cx, list(args[1:3]), {})
        base = tt.arg(args, kwargs, 0, "input", UNKNOWN)
        return tt.elementwise(cx, base, product) if isinstance(product, TensorV) else product
    if short == "bmm":
        return tt.bmm(cx, args, kwargs)
    if short == "einsum":
        return tt.einsum(cx, args, kwargs)
    if short == "where" and len(args) == 3:
        return tt.elementwise(cx, args[1], args[2], args[0], dtype=tt.promote(args[1], args[2]))
    if short in ("softmax", "log_softmax"):
        return nn.FUNCTIONAL["softmax"](cx, args, kwargs)
    if short == "gather" and lib == "torch" and args and isinstance(args[0], TensorV):
        return call_method(cx, args[0], "gather", args[1:], kwargs)
    if short in _ORDERING and args and isinstance(args[0], TensorV):
        return _ordering(cx, args[0], short, args[1:], kwargs, method=False)
    if short in _ELEMENTWISE_2 and len(args) == 2 and any(isinstance(a, TensorV) for a in args):
        out = tt.elementwise(cx, args[0], args[1])  # `np.maximum(0, x)`: a scalar first
        return out.with_dtype("bool") if short in _COMPARE and isinstance(out, TensorV) else out
    if short in (
        "flatten",
        "reshape",
        "transpose",
        "permute",
        "squeeze",
        "unsqueeze",
        "split",
        "chunk",
        "unbind",
        "argmax",
        "argmin",
        "sum",
        "mean",
        "max",
        "min",
        "t",
        "exp",
        "log",
        "relu",
        "sigmoid",
        "tanh",
        "abs",
        "sqrt",
        "clamp",
        "clip",
        "expand_dims",
        "swapaxes",
        "moveaxis",
        "prod",
        "std",
        "var",
        "all",
        "any",
        "amax",
        "amin",
        "logsumexp",
        "norm",
        "add",
        "sub",
        "mul",
        "div",
        "pow",
        "maximum",
        "minimum",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "logical_and",
        "logical_or",
        "isnan",
        "dropout",
        "multiply",
        "subtract",
        "divide",
        "power",
        "square",
        "greater",
        "less",
        "equal",
        "sin",
        "cos",
        "detach",
        "clone",
        "roll",
        "narrow",
        "unflatten",
        "movedim",
        "type_as",
        "masked_fill",
        "softmax",
        "log_softmax",
    ) or (short in _ELEMENTWISE_1 | _ELEMENTWISE_2 | _REDUCE and not short.endswith("_")):
        if args and isinstance(args[0], TensorV):
            return call_method(cx, args[0], short, args[1:], kwargs)
        return UNKNOWN
    return UNKNOWN


def _numpy_dot(cx: Ctx, a: TensorV, b: TensorV) -> Any:
    assert a.shape is not None and b.shape is not None
    k_b = b.shape[-2] if len(b.shape) >= 2 else b.shape[-1]
    cx.need(
        eq(a.shape[-1], k_b),
        "GPU011",
        f"dot shape mismatch: {show_shape(a.shape)} . {show_shape(b.shape)}, "
        f"left has K={show(a.shape[-1])}, right has K={show(k_b)}",
    )
    rest = (*b.shape[:-2], b.shape[-1]) if len(b.shape) >= 2 else ()
    return TensorV((*a.shape[:-1], *rest), tt.promote(a, b), a.lib)


_ORDERING = ("sort", "argsort", "topk")


def _ordering(cx: Ctx, t: TensorV, name: str, args: list, kwargs: dict, method: bool) -> Any:
    """`sort` and `argsort` (the shape kept; positions int64) and torch's `topk` (`k`
    along `dim`). torch's `sort` and `topk` give (values, indices); NumPy's `np.sort` the
    values, and `ndarray.sort()` sorts in place and gives None."""
    numpy = t.lib == "numpy"
    if name == "topk":
        if numpy:
            return UNKNOWN
        k = tt.arg(args, kwargs, 0, "k")
        return tt.topk(cx, t, k, tt.arg(args, kwargs, 1, "dim", IntV(const(-1))))
    if numpy and name == "sort" and method:
        return NoneV()
    dim = tt.arg(args, kwargs, 0, "axis" if numpy else "dim", IntV(const(-1)))
    if isinstance(dim, NoneV):  # NumPy's `axis=None`: the flattened array, ordered
        flat = None if t.shape is None else (product(t.shape),)
        t = TensorV(flat, t.dtype, t.lib)
    elif t.shape is not None:
        tt.axis(cx, dim, len(t.shape), name)
    positions = t.with_dtype("int64")
    if name == "argsort":
        return positions
    return t if numpy else TupleV((t, positions))


def call_method(cx: Ctx, t: TensorV, name: str, args: list, kwargs: dict) -> Any:
    """`t.name(*args, **kwargs)` for a tensor `t` (PyTorch and NumPy spellings)."""
    dim_kw = "dim" if "dim" in kwargs else "axis"
    if name in _ORDERING:
        return _ordering(cx, t, name, args, kwargs, method=True)
    if name == "gather" and t.lib == "torch":
        dim, index = tt.arg(args, kwargs, 0, "dim"), tt.arg(args, kwargs, 1, "index")
        return tt.gather(cx, t, dim, index)
    if name in _ELEMENTWISE_1 or name in ("type_as",):
        if name in ("isnan", "isinf", "isfinite", "logical_not"):
            return t.with_dtype("bool")
        if name == "type_as" and args and isinstance(args[0], TensorV):
            return t.with_dtype(args[0].dtype)
        return t
    if name in ("isnan", "isinf", "isfinite", "logical_not"):
        return t.with_dtype("bool")
    if name in _ELEMENTWISE_2:
        other = tt.arg(args, kwargs, 0, "other", UNKNOWN)
        out = tt.elementwise(cx, t, other)
        if name in _COMPARE and isinstance(out, TensorV):
            return out.with_dtype("bool")
        return out
    if name in _CAST:
        return t.with_dtype(_CAST[name])
    if name == "astype":
        dtype = tt.dtype_arg(args[0]) if args else None
        return t.with_dtype(dtype)
    if name == "to":
        dtype = None
        for v in [*args, *kwargs.values()]:
            if isinstance(v, DTypeV):
                dtype = v.name
        return t.with_dtype(dtype) if dtype else t
    if name == "type":
        dtype = tt.dtype_arg(args[0]) if args else None
        if args:  # `x.type(other.dtype)` of a dtype nobody knows: its sizes are x's still
            return t.with_dtype(dtype)
        return TensorV(t.shape, None, t.lib)
    if name in ("item", "tolist", "numpy", "backward", "register_hook"):
        if name == "numpy":
            return TensorV(t.shape, t.dtype, "numpy")
        if name == "backward":
            return NoneV()
        if name == "item":
            if t.dtype == "bool":
                return BoolV(None)
            return (
                FloatV() if tt.is_float(t.dtype) else IntV(None) if tt.is_int(t.dtype) else UNKNOWN
            )
        return UNKNOWN
    if name in ("size", "shape"):
        if t.shape is None:
            k = tt.int_lit(tt.arg(args, kwargs, 0, "dim"))
            if args or "dim" in kwargs:
                return IntV(None) if k is None else IntV(cx.axis_size(t, k))
            return ShapeOfV(t)
        if args or "dim" in kwargs:
            d = tt.axis(cx, tt.arg(args, kwargs, 0, "dim"), len(t.shape), "size")
            return IntV(None) if d is None else IntV(t.shape[d])
        return TupleV(tuple(IntV(s) for s in t.shape))
    if name in ("dim", "ndimension"):  # unknown rank: opaque, as `if_` needs it
        return UNKNOWN if t.shape is None else IntV(const(len(t.shape)))
    if name in ("numel", "nelement"):
        return IntV(None) if t.shape is None else IntV(product(t.shape))
    if name in _REDUCE:
        if name == "norm":  # norm(p, dim, keepdim): the first positional is the order
            args = args[1:]
        dim = tt.arg(args, kwargs, 0, dim_kw)
        # (dim, keepdim) positionally only in torch's sum/mean/max/...; numpy's second
        # positional is a dtype, torch's std/var take `unbiased` there
        positional_keep = t.lib == "torch" and name not in ("std", "var", "norm")
        second = args[1] if len(args) > 1 and positional_keep else None
        keep = kwargs.get("keepdim", kwargs.get("keepdims", second))
        if isinstance(dim, TensorV):  # torch.max(a, b) element-wise
            return tt.elementwise(cx, t, dim)
        indices = (
            name in ("max", "min", "median") and dim is not None and not isinstance(dim, NoneV)
        )
        return tt.reduction(cx, t, dim, keep, name, indices and t.lib == "torch")
    if name in ("softmax", "log_softmax"):
        dim = tt.arg(args, kwargs, 0, "dim")
        if dim is not None and t.shape is not None:
            tt.axis(cx, dim, len(t.shape), name)
        return t
    if name in ("view", "reshape"):
        if (args and isinstance(args[0], DTypeV)) or (name == "view" and t.lib == "numpy"):
            return UNKNOWN  # numpy's view takes a dtype or a type, never a shape
        new = tt.sizes_arg(args) if args else tt.sizes_arg([kwargs.get("shape", UNKNOWN)])
        if len(args) == 1 and isinstance(args[0], HeadV):
            return _onto_head(cx, t, args[0])
        several = len(args) >= 2 and all(isinstance(a, IntV) or a is UNKNOWN for a in args)
        if new is None and several:
            # `view(B, H // ws[0], ws[0], ...)`: several ints, some unknown: the rank is theirs
            sizes = [a.sym if isinstance(a, IntV) and literal(a.sym) != -1 else None for a in args]
            return TensorV(tuple(sizes), t.dtype, t.lib)
        return tt.reshape(cx, t, new, name)
    if name in ("view_as", "reshape_as", "expand_as"):
        other = tt.tensor(args[0] if args else None)
        if other is None or other.shape is None:
            return TensorV(None, t.dtype, t.lib)
        if name == "expand_as":
            return tt.expand(cx, t, list(other.shape))
        return tt.reshape(cx, t, list(other.shape), name[:-3])
    if name == "flatten":
        start = tt.arg(args, kwargs, 0, "start_dim", IntV(const(0)))
        end = tt.arg(args, kwargs, 1, "end_dim", IntV(const(-1)))
        if t.lib == "numpy":
            start, end = IntV(const(0)), IntV(const(-1))
        return tt.flatten(cx, t, start, end)
    if name == "unflatten":
        return nn.unflatten(cx, t, tt.arg(args, kwargs, 0, "dim"), tt.arg(args, kwargs, 1, "sizes"))
    if name == "permute" or (name == "transpose" and t.lib == "numpy"):
        if not args:
            return TensorV(None if t.shape is None else tuple(reversed(t.shape)), t.dtype, t.lib)
        dims = tt.ints(args[0]) if len(args) == 1 else [tt.int_lit(a) for a in args]
        return tt.permute(cx, t, dims)
    if name in ("transpose", "swapaxes", "swapdims"):
        return tt.transpose(cx, t, tt.arg(args, kwargs, 0, "dim0"), tt.arg(args, kwargs, 1, "dim1"))
    if name in ("t", "T", "mT"):
        if t.shape is None or len(t.shape) < 2:
            return t
        if name == "mT" or len(t.shape) == 2:
            return TensorV((*t.shape[:-2], t.shape[-1], t.shape[-2]), t.dtype, t.lib)
        return TensorV(tuple(reversed(t.shape)), t.dtype, t.lib)
    if name == "squeeze":
        return tt.squeeze(cx, t, tt.arg(args, kwargs, 0, dim_kw))
    if name in ("unsqueeze", "expand_dims"):
        return tt.unsqueeze(cx, t, tt.arg(args, kwargs, 0, dim_kw))
    if name == "expand":
        return tt.expand(cx, t, tt.sizes_arg(args))
    if name in ("repeat", "tile"):
        if t.lib != "torch":  # numpy's repeat repeats elements; its tile pads the counts
            return UNKNOWN
        counts = tt.sizes_arg(args)
        if name == "tile" and counts is not None and t.shape is not None:
            counts = [const(1)] * (len(t.shape) - len(counts)) + counts  # fewer: ones first
        return tt.repeat(cx, t, counts)
    if name in ("split", "chunk", "tensor_split"):
        if name == "tensor_split" or t.lib != "torch":
            return UNKNOWN  # numpy's split takes a section count or split points
        size = tt.arg(args, kwargs, 0, "split_size_or_sections" if name == "split" else "chunks")
        return tt.split(cx, t, size, tt.arg(args, kwargs, 1, "dim"), name == "chunk")
    if name == "unbind":
        return tt.unbind(cx, t, tt.arg(args, kwargs, 0, "dim"))
    if name == "narrow":
        return tt.narrow(
            cx,
            t,
            tt.arg(args, kwargs, 0, "dim"),
            tt.arg(args, kwargs, 1, "start"),
            tt.arg(args, kwargs, 2, "length"),
        )
    if name == "unfold" and t.lib == "torch":
        return nn_spatial.tensor_unfold(
            cx,
            t,
            tt.arg(args, kwargs, 0, "dimension"),
            tt.arg(args, kwargs, 1, "size"),
            tt.arg(args, kwargs, 2, "step"),
        )
    if name in ("matmul", "mm", "dot", "__matmul__"):
        return tt.matmul(cx, t, args[0] if args else UNKNOWN)
    if name == "bmm":
        return tt.bmm(cx, [t, *args], kwargs)
    if name in ("masked_fill", "masked_fill_"):
        mask = tt.arg(args, kwargs, 0, "mask", UNKNOWN)
        out = tt.elementwise(cx, t, mask, dtype=t.dtype)
        return out
    if name in ("gather", "index_select", "scatter", "scatter_add"):
        return TensorV(None, t.dtype, t.lib)
    return UNKNOWN


_ = (BoolV, StrV)


def _onto_head(cx: Ctx, t: TensorV, head: HeadV) -> Any:
    """`x.view(size_out)` with `size_out = x.size()[:-1] + (nf,)`: the leading axes of a
    tensor of unknown rank, then the sizes given (a -1 among them is a size of its own)."""
    if not all(isinstance(a, IntV) and a.sym is not None for a in head.after):
        return TensorV(None, t.dtype, t.lib)
    inferred = cx.free_size("size")
    dropped = t.tail[-head.drop :] if 0 < head.drop <= len(t.tail) else ()
    given = [a.sym for a in head.after if literal(a.sym) != -1]
    if head.tensor is t and dropped and None not in dropped and len(head.after) == 1 and not given:
        # `x.reshape(*x.shape[:-k], -1)`: the leading axes kept, so the -1 is the
        # product of the k last, known from the tail
        inferred = tt.product(tuple(dropped))
    tail = tuple(inferred if literal(a.sym) == -1 else a.sym for a in head.after)
    return TensorV(None, t.dtype, t.lib, tail)
