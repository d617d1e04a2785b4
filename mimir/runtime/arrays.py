"""Arrays in and out of compiled kernels: NumPy arrays, PyTorch tensors, buffer objects.

`read_array(value)` turns one argument into an `ArrayArg`: its shape, its dtype
as the manifest spells it, its bytes as a contiguous little-endian memoryview
(no copy where the array already is contiguous and of a storable dtype), and
its kind (`numpy`, `torch`, `torch-cuda` or `buffer`). A CUDA torch tensor
carries its device pointer instead of host bytes. `make_output(kind, ...)`
builds the result of the same kind from bytes the device returned;
`write_back(target, ...)` copies an `InOut` result into the caller's array, and
`first_outside(arg, lo, hi)` finds the first value outside a `Range`.

Nothing here goes through Python lists. NumPy and torch are never imported by
this module: an array of theirs can only reach it when they are loaded, so
it reads them from `sys.modules`.

Layout (the manifest's): float32 `f`, float16 `e`, int32 `i`, uint32 `I`,
bfloat16 as its 16 bits (a torch.bfloat16 tensor, or a NumPy `uint16` array of the bit
patterns: NumPy has no bfloat16, so a uint16 array is read as bfloat16 bits and a
bfloat16 result comes back as one), and bool_ as a 4-byte u32 holding 0 or 1 (a 1-byte
bool array is widened here). A bfloat16 buffer on the device is a whole number of 32-bit
words; `make_output` drops the padding.
"""

from __future__ import annotations

import ctypes
import sys
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ArrayArg",
    "ArrayError",
    "first_outside",
    "make_output",
    "nested_index",
    "range_violation",
    "read_array",
    "write_back",
]


class ArrayError(TypeError):
    """A value is not an array this host reads, or its dtype has no manifest dtype."""


# buffer-protocol format (native, little-endian here) -> manifest dtype, by item size.
_FORMATS: dict[tuple[str, int], str | None] = {
    ("f", 4): "float32",
    ("e", 2): "float16",
    ("i", 4): "int32",
    ("I", 4): "uint32",
    ("?", 1): "bool_",
    ("H", 2): "bfloat16",  # NumPy uint16: bfloat16 bit patterns (NumPy has no bfloat16)
}
# torch dtype -> (manifest dtype or None, struct code of its elements)
_TORCH = {
    "torch.float32": ("float32", "f"),
    "torch.float16": ("float16", "e"),
    "torch.bfloat16": ("bfloat16", "H"),  # its bits, as the manifest stores them
    "torch.int32": ("int32", "i"),
    "torch.uint32": ("uint32", "I"),
    "torch.bool": ("bool_", "I"),  # widened to int32 before it is read
    "torch.float64": (None, "d"),
    "torch.int64": (None, "q"),
    "torch.int16": (None, "h"),
    "torch.int8": (None, "b"),
    "torch.uint8": (None, "B"),
}
_NUMPY_OUT = {
    "float32": "<f4",
    "float16": "<f2",
    "bfloat16": "<u2",  # the bit patterns
    "int32": "<i4",
    "uint32": "<u4",
    "bool_": "<u4",
}
_TORCH_OUT = {
    "float32": "float32",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "int32": "int32",
    "uint32": "int32",  # viewed as int32 bits, then reinterpreted below
    "bool_": "int32",
}


@dataclass
class ArrayArg:
    """One array argument, read for upload."""

    kind: str  # "numpy", "torch", "torch-cuda" or "buffer"
    shape: tuple[int, ...]
    dtype: str | None  # the manifest dtype, None when it has none (float64, int64...)
    dtype_name: str  # as the array's library names it, for messages
    data: memoryview | None  # contiguous little-endian bytes (None for a CUDA tensor)
    fmt: str = "B"  # the struct code of one element of `data` (bool_: "I")
    device_ptr: int = 0  # a CUDA tensor's data pointer
    keep: Any = None  # the object that owns `data` (kept alive while it is used)


def _is_torch(value: Any) -> bool:
    return type(value).__module__.startswith("torch") and hasattr(value, "data_ptr")


def read_array(value: Any) -> ArrayArg:
    """Read a NumPy array, a torch tensor or any buffer-protocol object; `ArrayError` otherwise."""
    if _is_torch(value):
        return _read_torch(value)
    try:
        view = memoryview(value)
    except TypeError:
        raise ArrayError(
            f"expected a NumPy array, a torch tensor or a buffer, got {type(value).__name__}"
        ) from None
    kind = "numpy" if type(value).__module__ == "numpy" else "buffer"
    fmt = view.format
    if fmt[:1] in (">", "!") or (fmt[:1] == "=" and sys.byteorder == "big"):
        raise ArrayError("big-endian arrays are not read; convert with `.astype('<f4')` etc.")
    fmt = _standard(fmt.lstrip("@=<"), view.itemsize)
    dtype = _FORMATS.get((fmt, view.itemsize))
    name = str(getattr(value, "dtype", fmt))
    if not view.c_contiguous:
        numpy = sys.modules.get("numpy")
        if numpy is None or kind != "numpy":
            raise ArrayError("the array is not contiguous; pass a contiguous copy")
        value = numpy.ascontiguousarray(value)
        view = memoryview(value)
    data = view.cast("B") if view.nbytes else memoryview(b"")
    if dtype == "bool_":
        data, fmt = memoryview(bytes(_widen_bools(data))), "I"
    return ArrayArg(kind, tuple(view.shape), dtype, name, data, fmt, keep=value)


def _standard(fmt: str, size: int) -> str:
    """The struct code (standard sizes) of a native buffer format: numpy's int64 is `l`."""
    if fmt in ("b", "h", "i", "l", "q", "n"):
        return {1: "b", 2: "h", 4: "i", 8: "q"}.get(size, fmt)
    if fmt in ("B", "H", "I", "L", "Q", "N"):
        return {1: "B", 2: "H", 4: "I", 8: "Q"}.get(size, fmt)
    return fmt


def _widen_bools(data: memoryview) -> bytearray:
    out = bytearray(4 * len(data))
    out[::4] = bytes(1 if b else 0 for b in data)
    return out


def _read_torch(value: Any) -> ArrayArg:
    name = str(value.dtype)
    dtype, fmt = _TORCH.get(name, (None, "B"))
    shape = tuple(int(s) for s in value.shape)
    tensor = value.detach()
    if tensor.is_cuda:
        if dtype == "bool_":
            tensor = tensor.to(dtype=sys.modules["torch"].int32)  # bool_ travels as u32
        tensor = tensor.contiguous()
        return ArrayArg("torch-cuda", shape, dtype, name, None, fmt, tensor.data_ptr(), tensor)
    if tensor.device.type != "cpu":
        raise ArrayError(f"a torch tensor on `{tensor.device}` is not read; move it to cpu")
    if dtype == "bool_":
        tensor = tensor.to(dtype=sys.modules["torch"].int32)
    tensor = tensor.contiguous()
    nbytes = tensor.numel() * tensor.element_size()
    # The tensor's own memory, viewed in place (no numpy needed, no copy).
    raw = (ctypes.c_char * nbytes).from_address(tensor.data_ptr()) if nbytes else bytearray()
    return ArrayArg("torch", shape, dtype, name, memoryview(raw).cast("B"), fmt, keep=tensor)


def make_output(kind: str, data: bytes | bytearray | memoryview, dtype: str, shape: tuple) -> Any:
    """An array of `kind` holding `data` (little-endian, manifest layout) with `shape`."""
    if dtype == "bfloat16":  # whole 32-bit words on the device: drop an odd count's padding
        count = 1
        for s in shape:
            count *= s
        data = memoryview(data)[: 2 * count]
    if kind in ("torch", "torch-cuda"):
        torch = sys.modules["torch"]
        buffer = bytearray(data)
        if not buffer:
            out = torch.zeros(shape, dtype=getattr(torch, _TORCH_OUT[dtype]))
        else:
            out = torch.frombuffer(buffer, dtype=getattr(torch, _TORCH_OUT[dtype])).reshape(shape)
        if dtype == "bool_":
            out = out != 0
        elif dtype == "uint32":
            out = out.view(torch.uint32) if hasattr(torch, "uint32") else out
        return out.cuda() if kind == "torch-cuda" else out
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        out = numpy.frombuffer(bytes(data), dtype=_NUMPY_OUT[dtype]).reshape(shape)
        return out != 0 if dtype == "bool_" else out.copy()
    # No NumPy: a memoryview shaped like the output (float16 stays raw bytes: no format for it).
    view = memoryview(bytes(data))
    code = {"float32": "f", "int32": "i", "uint32": "I", "bool_": "I", "bfloat16": "H"}.get(dtype)
    if code is None:
        return view
    return view.cast(code, shape) if 0 not in shape and shape else view.cast(code)


def first_outside(arg: ArrayArg, lo: int, hi: int) -> tuple[int, int] | None:
    """(flat index, value) of the first element of `arg` not in [lo, hi), or None.

    Vectorised where the array's library is loaded (on the device, for a CUDA tensor).
    """
    if arg.kind == "torch-cuda":
        torch = sys.modules["torch"]
        flat = arg.keep.reshape(-1)
        if flat.dtype != torch.int32:  # uint32 has few kernels in torch: compare as int64
            flat = flat.to(torch.int64)
        bad = ((flat < lo) | (flat >= hi)).nonzero()
        if not bad.numel():
            return None
        k = int(bad[0])
        return k, int(flat[k])
    if arg.data is None or not len(arg.data):
        return None
    code = "I" if arg.dtype == "uint32" else "i"
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        values = numpy.frombuffer(arg.data, dtype="<u4" if code == "I" else "<i4")
        if code == "I" or not -(2**31) <= lo <= hi < 2**31:
            values = values.astype(numpy.int64)  # bounds the element type cannot hold
        bad = numpy.flatnonzero((values < lo) | (values >= hi))
        return (int(bad[0]), int(values[bad[0]])) if bad.size else None
    for k, v in enumerate(arg.data.cast(code)):
        if not lo <= v < hi:
            return k, v
    return None


def nested_index(flat: int, shape: tuple[int, ...]) -> list[int]:
    """The row-major index of element `flat` of an array of `shape`."""
    index = []
    for size in reversed(shape):
        index.append(flat % size)
        flat //= size
    return index[::-1]


def range_violation(
    name: str,
    value: int,
    flat: int,
    shape: tuple[int, ...],
    bounds: tuple[Any, Any],
    limits: tuple[int, int],
    env: Any,
) -> str:
    """The GPU043 message for an argument value outside its `Range`, the same whether the
    shim, `load` or the test runner found it: the value, where it is, the range as written
    (`bounds`) and as evaluated at the call (`limits`, with the dims `env` bound)."""
    lo, hi = limits
    dims = ", ".join(f"{k}={v}" for k, v in env.items()) or "no dims"
    return (
        f"argument `{name}` holds {value} at index {nested_index(flat, shape)}, outside its "
        f"Range({bounds[0]}, {bounds[1]}) ({lo} <= value < {hi} with {dims}); the kernel's "
        "bounds proofs assume every value lies in it"
    )


def write_back(target: Any, arg: ArrayArg, value: Any) -> None:
    """Copy `value` (what `make_output` made, or the tensor a kernel wrote) into `target`.

    `target` is the caller's `InOut` argument and `arg` what `read_array` read of it; the
    copy is skipped when the kernel already wrote the caller's own memory.
    """
    if _is_torch(target):
        torch = sys.modules["torch"]
        if (
            _is_torch(value)
            and value.device == target.device
            and value.dtype == target.dtype
            and value.data_ptr() == target.data_ptr()
            and value.stride() == target.stride()
        ):
            return  # the kernel wrote the caller's tensor itself
        with torch.no_grad():  # an optimizer step: no autograd history for the update
            target.copy_(value)
        return
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(target, numpy.ndarray):
        numpy.copyto(target, numpy.asarray(value).reshape(target.shape), casting="unsafe")
        return
    view = memoryview(target).cast("B")  # a buffer object: contiguous (read_array checked)
    raw: Any = memoryview(value).cast("B")
    if arg.dtype == "bool_" and len(raw) != view.nbytes:  # u32 0/1 words into 1-byte bools
        raw = bytes(1 if w else 0 for w in memoryview(bytes(raw)).cast("I"))
    view[:] = raw
