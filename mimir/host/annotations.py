"""Parameter annotations in host code, read statically into host values.

- `Tensor[float32, B, 784]` from `mimir.array` (on a `torch.Tensor` or `np.ndarray`
  parameter as well as in kernels), read by the kernel checker's own reader;
- jaxtyping strings, `Float[Tensor, "batch 784"]`, `Int[np.ndarray, "n"]`: each
  name is a size (one per function), an int a literal size, `_` an unknown size,
  and `*name` or `...` an unknown number of axes (then the rank is unknown);
- `torch.Tensor`, `np.ndarray`: a tensor of unknown shape; `int`: an unknown int.

jaxtyping itself is never imported.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from mimir.dims import BinOp, Dim, Size
from mimir.host.values import UNKNOWN, FloatV, IntV, Sym, TensorV
from mimir.parse.module import ModuleInfo, TensorAnnotation, read_annotation

JAXTYPING_DTYPES = {
    "Float": None,
    "Float16": "float16",
    "Float32": "float32",
    "Float64": "float64",
    "BFloat16": "bfloat16",
    "Int": "int64",
    "Int8": "int8",
    "Int16": "int16",
    "Int32": "int32",
    "Int64": "int64",
    "Integer": "int64",
    "UInt8": "uint8",
    "Bool": "bool",
    "Shaped": None,
    "Num": None,
    "Real": None,
    "Inexact": None,
}


def read_host_annotation(
    info: ModuleInfo,
    node: ast.expr | None,
    qualname: Callable[[ast.expr], str | None],
    size_of_dim: Callable[[Dim], Sym],
    named_size: Callable[[str], Sym],
) -> Any:
    """The host value an annotation promises, or UNKNOWN."""
    if node is None:
        return UNKNOWN
    if isinstance(node, ast.Name) and node.id == "int":
        return IntV(None)
    if isinstance(node, ast.Name) and node.id == "float":
        return FloatV()
    if isinstance(node, ast.Subscript) and info.resolve(node.value) == "Tensor":
        ann = read_annotation(info, node)
        if not isinstance(ann, TensorAnnotation):
            return UNKNOWN
        shape = tuple(_size(d, size_of_dim) for d in ann.dims)
        dtype = "bool" if ann.dtype.name == "bool_" else ann.dtype.name
        return TensorV(shape, dtype, "torch")
    name = qualname(node)
    if name in ("torch.Tensor", "numpy.ndarray", "torch.FloatTensor", "torch.LongTensor"):
        lib = "numpy" if name.startswith("numpy") else "torch"
        dtype = {"torch.FloatTensor": "float32", "torch.LongTensor": "int64"}.get(name)
        return TensorV(None, dtype, lib)
    if isinstance(node, ast.Subscript):
        head = qualname(node.value)
        if head is not None and head.startswith("jaxtyping."):
            kind = head.rsplit(".", 1)[-1]
            items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if kind not in JAXTYPING_DTYPES or len(items) != 2:
                return UNKNOWN
            array = qualname(items[0])
            lib = "numpy" if array and array.startswith("numpy") else "torch"
            spec = items[1]
            if not (isinstance(spec, ast.Constant) and isinstance(spec.value, str)):
                return UNKNOWN
            shape = _jaxtyping_shape(spec.value, named_size)
            return TensorV(shape, JAXTYPING_DTYPES[kind], lib)
    return UNKNOWN


def _size(d: Size, size_of_dim: Callable[[Dim], Sym]) -> Sym:
    if isinstance(d, int):
        return Sym.const(d)
    if isinstance(d, Dim):
        return size_of_dim(d)
    assert isinstance(d, BinOp)
    return _size(d.left, size_of_dim)._op(d.op, _size(d.right, size_of_dim))


def _jaxtyping_shape(spec: str, named_size: Callable[[str], Sym]) -> tuple | None:
    shape: list[Sym | None] = []
    for token in spec.split():
        token = token.split("=")[-1] if "=" in token else token
        if token == "..." or token.startswith("*") or token.startswith("#*"):
            return None  # a variadic run of axes: the rank is not known
        token = token.lstrip("#")
        if token.isdigit():
            shape.append(Sym.const(int(token)))
        elif token == "_" or token.startswith("_"):
            shape.append(None)
        elif token.isidentifier():
            shape.append(named_size(token))
        else:
            shape.append(None)  # an expression (`dim+1`): not read
    return tuple(shape)
