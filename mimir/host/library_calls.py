"""Calls of the libraries host code uses: `torch` and `torch.nn` (layers built from their
arguments, `Sequential`, `ModuleList`, `ModuleDict`), `mimir.array`, `einops`, `math`,
`functools.partial`, datasets and data loaders (a batch of the loader's size).

`HostChecker` mixes this in; the shape rules themselves are `mimir.host.api`,
`mimir.host.nn` and `mimir.host.torch_table`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from mimir.host import api, einops, hf_cache, nn, nn_spatial, pyops
from mimir.host import torch_table as tt
from mimir.host.flow import segment
from mimir.host.objects import BUILD_LAYER
from mimir.host.values import (
    UNKNOWN,
    ApiV,
    BoolV,
    DictV,
    DTypeV,
    IntV,
    LayerV,
    LoaderV,
    NoneV,
    ObjectV,
    PartialV,
    Sym,
    TensorV,
    TupleV,
    const,
    join_all,
    literal,
)

OPEN = "**"  # the keyword a layer built with unreadable `**kwargs` gets
_EINOPS_LAYERS = ("Rearrange", "Repeat", "Reduce")


@dataclass
class Dataset:
    tensors: list[Any]


class Library:
    """Library calls; `HostChecker` inherits them."""

    def library(self, name: str, args: list, kwargs: dict, node: ast.AST | None) -> Any:
        if name == "builtins.super":
            return self._super(args)
        if name.startswith("builtins."):
            return self.builtin(name[9:], args, kwargs)
        if name == "collections.OrderedDict":  # `Sequential(OrderedDict([("conv0", ...)]))`
            return self.builtin("dict", args, kwargs)
        if name.startswith("mimir.array."):
            short = name[12:]
            if short in ("zeros", "ones", "full", "rand"):
                shape = args[0] if args else kwargs.get("shape", UNKNOWN)
                dtype = kwargs.get("dtype", args[1] if short != "full" and len(args) > 1 else None)
                kw = {"dtype": dtype} if isinstance(dtype, DTypeV) else {}
                return tt.creation(self, [shape], kw, "mimir")
            if short in ("where", "maximum", "minimum"):
                return tt.elementwise(self, *args)
            if short == "tensor":
                # `tensor(data, dtype=float32)`: float32 unless a dtype is given, whatever
                # the literals (the shim converts them), never NumPy's int64 guess.
                given = kwargs.get("dtype", args[1] if len(args) > 1 else None)
                if given is None:
                    dtype = "float32"
                else:
                    dtype = tt.dtype_arg(given) if isinstance(given, DTypeV) else None
                return tt.from_data(args[0] if args else UNKNOWN, "mimir", dtype)
            return UNKNOWN
        if name in ("torch.nn.Parameter", "torch.nn.parameter.Parameter"):
            return args[0] if args and isinstance(args[0], TensorV) else UNKNOWN
        if name == "typing.cast" and len(args) == 2:
            return args[1]  # `cast(int, v)`: the value, as it is
        if name in ("functools.partial",) and args:
            return PartialV(args[0], tuple(args[1:]), tuple(kwargs.items()))
        if name.startswith("math."):
            return pyops.math_call(name[5:], args)
        if name in ("einops.rearrange", "einops.repeat", "einops.reduce"):
            return einops.apply(self, name[7:], args, kwargs)
        if name.startswith("einops.layers.") and name.rsplit(".", 1)[-1] in _EINOPS_LAYERS:
            kind = name.rsplit(".", 1)[-1].lower()
            given = dict(kwargs)
            for key, v in zip(("pattern", "reduction"), args, strict=False):
                given[key] = v
            return PartialV(ApiV(f"einops.{kind}"), (), tuple(given.items()))
        if name == BUILD_LAYER and len(args) >= 2 and isinstance(args[0], ObjectV):
            self.build_layer(args[0], args[1].value, args[2:], kwargs)
            return NoneV()
        if name.startswith("torch.nn.") and not name.startswith("torch.nn.functional."):
            kind = name.rsplit(".", 1)[-1]
            if kind not in nn.KNOWN_LAYERS:
                if node is not None and kind[:1].isupper() and not self.quiet and not self.abroad:
                    key = (node.lineno, node.col_offset)
                    if key not in self._counted_layers:
                        self._counted_layers.add(key)
                        self.coverage.layers[f"nn.{kind}"] += 1
                return UNKNOWN
            text = segment(self.src.lines, node) if node is not None else kind
            open_ = bool(kwargs.pop(OPEN, False))
            items: list[Any] = []
            named: dict[str, Any] = {}
            exact = True
            if kind == "Sequential":
                if len(args) == 1 and isinstance(args[0], DictV):  # Sequential(OrderedDict(...))
                    named = dict(args[0].items)
                    items = list(named.values())
                else:
                    items = list(args)
            if kind in ("ModuleList", "ParameterList") and args:
                if isinstance(args[0], TupleV):
                    items = list(args[0].items)
                elif isinstance(args[0], LayerV) and args[0].kind in ("ModuleList", "Sequential"):
                    items, exact = list(args[0].items), args[0].exact
                elif isinstance(args[0], LoaderV) and args[0].item is not UNKNOWN:
                    items, exact = [args[0].item], False  # `[Block(c) for _ in range(n)]`
                else:
                    return UNKNOWN  # built from a comprehension or a list we cannot read
            if kind in ("ModuleDict", "ParameterDict"):
                if args and isinstance(args[0], DictV):
                    named = dict(args[0].items)
                elif args:
                    return UNKNOWN
            span = self.src.span(node) if node is not None else None
            layer = LayerV(kind, args, kwargs, text, items, span, named, exact, open_)
            dtype = kwargs.get("dtype")
            if isinstance(dtype, DTypeV):
                layer.dtype = dtype.name
            if kind == "GroupNorm" and node is not None:
                groups = tt.size_of(nn.param(layer, "num_groups"))
                channels = tt.size_of(nn.param(layer, "num_channels"))
                self.guard(node, lambda: nn_spatial.group_norm_built(self, groups, channels, text))
            return layer
        if name.startswith(hf_cache.MODULE + "."):
            return hf_cache.call(name, args)
        if name in ("torch.utils.data.TensorDataset",):
            return Dataset(list(args))
        if name == "torch.utils.data.DataLoader":
            return self.loader(args, kwargs)
        if name.startswith("torch.cuda.") or name in ("torch.manual_seed", "torch.no_grad"):
            return UNKNOWN
        return api.call_function(self, name, args, kwargs)

    def element(self, iterable: Any) -> Any:
        """What iterating `iterable` yields (the join of a tuple's items)."""
        if isinstance(iterable, LoaderV):
            return iterable.item
        if isinstance(iterable, TensorV):
            if iterable.shape:
                return TensorV(iterable.shape[1:], iterable.dtype, iterable.lib)
            return TensorV(None, iterable.dtype, iterable.lib)
        if isinstance(iterable, TupleV) and iterable.items:
            return join_all(iterable.items)
        if isinstance(iterable, Dataset):
            return TupleV(tuple(self.element(t) for t in iterable.tensors))
        if isinstance(iterable, LayerV) and iterable.kind in ("ModuleList", "Sequential"):
            return iterable.items[0] if len(iterable.items) == 1 else UNKNOWN
        return UNKNOWN

    def loader(self, args: list, kwargs: dict) -> Any:
        data = tt.arg(args, kwargs, 0, "dataset")
        bs = tt.int_lit(tt.arg(args, kwargs, 1, "batch_size", IntV(const(1))))
        drop = kwargs.get("drop_last")
        drop_last = isinstance(drop, BoolV) and drop.value is True
        if not isinstance(data, Dataset) or bs is None or bs < 1:
            return LoaderV(UNKNOWN)
        tensors = [tt.tensor(t) for t in data.tensors]
        if any(t is None or not t.shape for t in tensors):
            return LoaderV(UNKNOWN)
        n = literal(tensors[0].shape[0])  # type: ignore[union-attr, index]
        if n is not None and (n % bs == 0 or drop_last) and n >= bs:
            batch: Sym = const(bs)
        elif n is not None and n < bs:
            batch = const(n)
        elif n is not None:
            batch = self.fresh("batch", 1, bs, values=(bs, n % bs))
        else:
            batch = self.fresh("batch", 1, bs)
        return LoaderV(
            TupleV(tuple(t.with_shape((batch, *t.shape[1:])) for t in tensors if t and t.shape))
        )
