"""Reading a Mimir manifest on the host: sizes, bytes, uniforms and launch counts.

A `FUNCTION.manifest.json` (format `mimir-manifest/1`) is all a host program
needs to run the kernels `mimir compile-gpu` wrote. This module turns it, plus
the values of the dims and scalar parameters, into the numbers and bytes any
runner needs; the wgpu runner (`mimir.runtime.wgpu_runner`) and the test-only
MSL runner both build on it, so they cannot disagree about a layout.

Layout rules (the manifest's contract):
- buffers are dense and row-major; a shape entry is an int or a dim expression
  (`mimir.runtime.dimexpr`);
- elements are little-endian: float32 `f`, float16 `e`, int32 `i`, uint32 `I`,
  bfloat16 as the upper 16 bits of its float32 (`H`, two to a 32-bit word, an odd
  count padded with one zero element to a whole word),
  and `bool_` as a 4-byte u32 holding 0 or 1 (`element_size` is the one place
  that says so; a buffer entry with `element_size` overrides it);
- the uniform block holds its fields in order, 4 bytes each (`u32`, `i32`,
  `f32`), padded with zeros to a multiple of 16 bytes.

Stdlib-only.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mimir.runtime import contract
from mimir.runtime.dimexpr import evaluate
from mimir.runtime.errors import ManifestError

__all__ = [
    "FORMAT",
    "ManifestError",
    "buffer_bytes",
    "buffer_shape",
    "check_dims",
    "decode",
    "element_size",
    "encode",
    "flatten",
    "numel",
    "pack_uniform",
    "workgroup_counts",
]

FORMAT = contract.FORMAT

DTYPES = tuple(contract.DTYPE_SIZES)

# struct codes, little-endian; bool_ travels as u32.
_CODES = {
    "float32": "f",
    "float16": "e",
    "bfloat16": "H",
    "int32": "i",
    "uint32": "I",
    "bool_": "I",
}
_UNIFORM_CODES = {"u32": "I", "i32": "i", "f32": "f"}


def element_size(dtype: str, backend: str = "wgsl") -> int:
    """Bytes per element of `dtype` in a buffer of `backend`.

    bool_ is stored as a 4-byte u32 on every backend (WGSL has no 1-byte storage
    type; the MSL backend uses the same layout so one host program serves both).
    """
    if dtype not in _CODES:
        raise ManifestError(f"unknown dtype {dtype!r}; expected one of {DTYPES}")
    del backend  # same layout on every backend today; kept so that can change in one place
    return struct.calcsize("<" + _CODES[dtype])


def buffer_element_size(buffer: Mapping[str, Any], backend: str = "wgsl") -> int:
    """Bytes per element of a manifest buffer entry (an `element_size` there, which the
    contract allows only when it agrees with the dtype, changes nothing)."""
    return element_size(buffer["dtype"], backend)


def buffer_bytes(buffer: Mapping[str, Any], count: int, backend: str = "wgsl") -> int:
    """Bytes a host allocates for `count` elements of a manifest buffer entry: a bfloat16
    buffer is a whole number of 32-bit words (its kernels read and write two elements at
    a time), so an odd count takes one more element of padding."""
    nbytes = count * buffer_element_size(buffer, backend)
    return nbytes + nbytes % 4 if buffer["dtype"] == "bfloat16" else nbytes


def buffer_shape(buffer: Mapping[str, Any], dims: Mapping[str, int]) -> tuple[int, ...]:
    """The concrete shape of a manifest buffer entry under `dims`."""
    shape = tuple(evaluate(entry, dims) for entry in buffer["shape"])
    if any(n < 0 for n in shape):
        raise ManifestError(
            f"buffer `{buffer['name']}` has a negative size: {list(shape)}", "MAN006"
        )
    return shape


U32_MAX = contract.U32_MAX


def numel(shape: Sequence[int]) -> int:
    return math.prod(shape)


def check_dims(manifest: Mapping[str, Any], dims: Mapping[str, int]) -> None:
    """Raise `ManifestError` when a dim is missing or outside its stated constraints (code
    GPU042 for a constraint), then when a buffer's size does not fit (`contract.buffer_extent`).

    Kernels hold dims in `u32` uniform fields and index with 32-bit integers, so a dim
    or a buffer's element count above 2**32 - 1 is refused too (the compiler proved it
    fits for bounded dims; an unbounded dim is checked here, at launch).
    """
    check_dim_values(manifest, dims)
    for index in range(len(manifest.get("buffers", []))):
        contract.buffer_extent(manifest, index, dims)


def check_dim_values(manifest: Mapping[str, Any], dims: Mapping[str, int]) -> None:
    """Every dim bound to an int within its `min`, `max`, `multiple_of` and 2**32 - 1."""
    for dim in manifest.get("dims", []):
        name = dim["name"]
        if name not in dims:
            raise ManifestError(f"no value given for dim `{name}`", "GPU035")
        value = dims[name]
        if isinstance(value, bool) or not isinstance(value, int):
            raise ManifestError(f"dim `{name}` must be an int, got {value!r}", "GPU042")
        lo, hi, step = dim.get("min"), dim.get("max"), dim.get("multiple_of")
        lo = None if isinstance(lo, str) else lo  # relations: below, once every dim is bound
        hi = None if isinstance(hi, str) else hi
        if lo is not None and value < lo:
            raise ManifestError(f"dim `{name}`={value} is below its minimum {lo}", "GPU042")
        if hi is not None and value > hi:
            raise ManifestError(f"dim `{name}`={value} is above its maximum {hi}", "GPU042")
        if step and value % step:
            raise ManifestError(f"dim `{name}`={value} is not a multiple of {step}", "GPU042")
        if value > U32_MAX:
            raise ManifestError(
                f"dim `{name}`={value} does not fit its u32 uniform field", "GPU042"
            )
        if value < 0:
            raise ManifestError(f"dim `{name}`={value} is negative", "GPU042")
    for i, dim in enumerate(manifest.get("dims", [])):
        for key, which in (("min", "below its minimum"), ("max", "above its maximum")):
            bound = dim.get(key)
            if not isinstance(bound, str):
                continue
            limit = contract.evaluate_field(bound, dims, f"dims[{i}].{key}")
            value = dims[dim["name"]]
            if value < limit if key == "min" else value > limit:
                raise ManifestError(
                    f"dim `{dim['name']}`={value} is {which} {bound}={limit}", "GPU042"
                )


def flatten(values: Any) -> list:
    """Row-major flat list from a flat or nested list (or a tuple)."""
    if not isinstance(values, (list, tuple)):
        return [values]
    # the types present, found at C speed: a flat list of millions of numbers is common
    if not any(issubclass(kind, (list, tuple)) for kind in set(map(type, values))):
        return list(values)
    out: list = []
    for v in values:
        out.extend(flatten(v))
    return out


def encode(values: Iterable[Any], dtype: str) -> bytes:
    """Little-endian bytes of `values` stored as `dtype`."""
    flat = list(values)
    code = _CODES.get(dtype)
    if code is None:
        raise ManifestError(f"unknown dtype {dtype!r}")
    if dtype == "bool_":
        flat = [1 if v else 0 for v in flat]
    elif dtype == "bfloat16":
        flat = [_bfloat16_bits(float(v)) for v in flat]
        flat += [0] * (len(flat) % 2)  # whole 32-bit words: kernels read two at a time
    elif dtype in ("int32", "uint32"):
        flat = [int(v) for v in flat]
    else:
        flat = [float(v) for v in flat]
    try:
        return struct.pack(f"<{len(flat)}{code}", *flat)
    except (struct.error, OverflowError) as err:
        raise ManifestError(f"cannot store these values as {dtype}: {err}") from None


def _values(value: Any) -> list:
    """Flat row-major values of a (nested) list, or of an array read through its memory."""
    if isinstance(value, (list, tuple)) or not hasattr(value, "__len__"):
        return flatten(value)
    from mimir.runtime.arrays import ArrayError, read_array

    try:
        arg = read_array(value)  # a NumPy array, a torch tensor, a buffer object
    except ArrayError:
        return flatten(value)
    if arg.data is None:
        raise ManifestError("a CUDA tensor cannot be read here; move it with `.cpu()` first")
    size = struct.calcsize("<" + arg.fmt)
    return list(struct.unpack(f"<{len(arg.data) // size}{arg.fmt}", arg.data))


def decode(data: bytes | memoryview, dtype: str, count: int) -> list:
    """The first `count` elements of `data` as Python values (bool_ from u32)."""
    code = _CODES.get(dtype)
    if code is None:
        raise ManifestError(f"unknown dtype {dtype!r}")
    size = struct.calcsize("<" + code)
    values = list(struct.unpack(f"<{count}{code}", bytes(data[: count * size])))
    if dtype == "bool_":
        return [v != 0 for v in values]
    if dtype == "bfloat16":
        return [struct.unpack("<f", struct.pack("<I", v << 16))[0] for v in values]
    return values


def _bfloat16_bits(v: float) -> int:
    """The upper 16 bits of `v` as a float32, rounded to nearest even (nan kept quiet)."""
    if v != v:
        return 0x7FC0
    try:
        bits = struct.unpack("<I", struct.pack("<f", v))[0]
    except OverflowError:
        return 0x7F80 if v > 0 else 0xFF80
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


def uniform_fields(manifest: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    uniform = manifest.get("uniform")
    return list(uniform["fields"]) if uniform else []


def pack_uniform(
    manifest: Mapping[str, Any],
    dims: Mapping[str, int],
    scalars: Mapping[str, float | int] | None = None,
) -> bytes | None:
    """The uniform block's bytes (None when the manifest has no uniform).

    Each field takes its value from `dims` first, then `scalars`.
    """
    fields = uniform_fields(manifest)
    if not manifest.get("uniform"):
        return None
    scalars = scalars or {}
    out = bytearray()
    for field in fields:
        name, kind = field["name"], field["type"]
        if name in dims:
            value: Any = dims[name]
        elif name in scalars:
            value = scalars[name]
        else:
            raise ManifestError(f"no value for uniform field `{name}` (neither a dim nor a scalar)")
        code = _UNIFORM_CODES.get(kind)
        if code is None:
            raise ManifestError(f"uniform field `{name}` has unknown type {kind!r}")
        value = float(value) if kind == "f32" else int(value)
        try:
            out += struct.pack("<" + code, value)
        except struct.error as err:
            raise ManifestError(
                f"uniform field `{name}`={value!r} does not fit {kind}: {err}"
            ) from None
    out += bytes(-len(out) % 16)
    return bytes(out) if out else bytes(16)


def workgroup_counts(kernel: Mapping[str, Any], dims: Mapping[str, int]) -> tuple[int, int, int]:
    """The evaluated `workgroups` of one kernel entry."""
    counts = tuple(evaluate(e, dims) for e in kernel["workgroups"])
    if len(counts) != 3:
        raise ManifestError(f"kernel `{kernel['entry_point']}` needs 3 workgroup counts")
    if any(c < 0 for c in counts):
        raise ManifestError(
            f"kernel `{kernel['entry_point']}` has a negative workgroup count {list(counts)}",
            "MAN007",
        )
    return counts  # type: ignore[return-value]


def check_format(manifest: Mapping[str, Any]) -> None:
    if manifest.get("format") != FORMAT:
        raise ManifestError(
            f"unsupported manifest format {manifest.get('format')!r}; expected {FORMAT!r}",
            "MAN002",
            "format",
        )


# Roles whose buffer the host fills before the launches, and reads back after them.
# `inout` is both: an `InOut` parameter the kernel updates in place.
UPLOADED = ("input", "inout")
RESULTS = ("output", "inout")


def prepare_inputs(
    manifest: Mapping[str, Any], inputs: Mapping[str, Any], dims: Mapping[str, int]
) -> dict[str, list]:
    """Flatten and size-check the values of every `input` and `inout` buffer.

    A value is a flat or nested list, or an array (NumPy, torch, any buffer
    object), read through its memory; `encode` then stores it as the buffer's dtype.
    """
    out: dict[str, list] = {}
    names = set()
    for buf in manifest["buffers"]:
        if buf["role"] not in UPLOADED:
            continue
        names.add(buf["name"])
        if buf["name"] not in inputs:
            raise ManifestError(f"no values given for input buffer `{buf['name']}`")
        flat = _values(inputs[buf["name"]])
        want = numel(buffer_shape(buf, dims))
        if len(flat) != want:
            raise ManifestError(
                f"input `{buf['name']}` has {len(flat)} values; its shape "
                f"{list(buffer_shape(buf, dims))} needs {want}",
                "GPU040",
            )
        if "range" in buf:
            _check_range(buf, flat, dims)
        out[buf["name"]] = flat
    extra = set(inputs) - names
    if extra:
        raise ManifestError(f"values given for unknown input buffers: {sorted(extra)}")
    return out


def _check_range(buf: Mapping[str, Any], flat: list, dims: Mapping[str, int]) -> None:
    """Every value of an input with a `range` lies in [lo, hi): the kernel's proofs assume it."""
    from mimir.runtime.arrays import range_violation

    lo, hi = (evaluate(b, dims) for b in buf["range"])
    for k, v in enumerate(flat):
        if not lo <= v < hi:
            shape = buffer_shape(buf, dims)
            raise ManifestError(
                range_violation(buf["name"], v, k, shape, buf["range"], (lo, hi), dims), "GPU043"
            )
