"""`mimir.array`: the kernel language, executable as plain Python.

This package is the living definition of the kernel language's semantics. A file
written against it runs under plain `python` (so a breakpoint works), and the
same file is what `mimir check` proves and `mimir compile-gpu` compiles.

    from mimir.array import Tensor, gpu, Dim, float32

    N = Dim("N")

    @gpu
    def linear(x: Tensor[float32, N, 784], w: Tensor[float32, 784, 128]) -> Tensor[float32, N, 128]:
        return (x @ w).relu()

Calling a `@gpu` function binds each `Dim` to a size, checks every argument and
the result against the annotations, and raises `MimirError` carrying the same
diagnostic code the checker reports. Every op comes from the one op table
(`mimir.ops`), shared with the checker and the backends.

Stdlib-only: importing this package never imports z3, networkx or numpy.

The package: `types` (the annotation types), `state` (the running call and
`MimirError`), `tensors` (`Tensor` and its operators), `functions` (`where`,
`einsum`, `full`, ...), `kernel` (`@gpu`: argument binding and result checks).
"""

from __future__ import annotations

from mimir.array.functions import (
    arange,
    atan2,
    atomic_add,
    concatenate,
    einsum,
    full,
    maximum,
    minimum,
    ones,
    program_id,
    rand,
    randn,
    stack,
    take_along_axis,
    tensor,
    topk,
    tril,
    triu,
    where,
    zeros,
)
from mimir.array.kernel import Kernel as Kernel
from mimir.array.kernel import gpu
from mimir.array.kernel import result_names as result_names
from mimir.array.state import DEVICES as DEVICES
from mimir.array.state import PRECISIONS as PRECISIONS
from mimir.array.state import MimirError
from mimir.array.tensors import Tensor
from mimir.array.types import InOut, Range, TensorType
from mimir.dims import Dim
from mimir.dtypes import DType, bfloat16, bool_, float16, float32, int32, uint32

__all__ = [
    "Dim",
    "DType",
    "InOut",
    "MimirError",
    "Range",
    "Tensor",
    "TensorType",
    "arange",
    "atan2",
    "concatenate",
    "bool_",
    "bfloat16",
    "float16",
    "float32",
    "gpu",
    "einsum",
    "full",
    "int32",
    "maximum",
    "minimum",
    "atomic_add",
    "program_id",
    "take_along_axis",
    "ones",
    "rand",
    "randn",
    "stack",
    "tensor",
    "topk",
    "tril",
    "triu",
    "uint32",
    "where",
    "zeros",
]
