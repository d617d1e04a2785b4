"""Differential verification of compiled kernels against the shim (`mimir.array`).

The shim is the definition of the kernel language; a compiled kernel is right
when, on the same inputs, it returns what the shim returns within the
tolerance of its dtype. This module holds the pieces every such comparison
needs, shared by `mimir verify` and the test suite:

- `random_inputs(manifest, dims, seed)`: seeded values for every input buffer,
  exactly representable in their dtype (floats in [-1, 1), small ints, bools);
- `shim_reference(source, function, inputs, dims)`: the shim's outputs, named
  as the manifest names them (`out`, `out0`, `out1`... or an index-level
  kernel's output parameters);
- `TOLERANCES`, `mismatches` and `error_summary`: the comparison rule.

What `mimir verify FILE` does with them (compile for every backend this machine
can run, run, compare; the `gpu` extra or a CUDA driver) is
`mimir.runtime.verify_run.verify_file`, which imports this module, never the
other way round.

Stdlib-only.
"""

from __future__ import annotations

import functools
import importlib.util
import itertools
import math
import random
import struct
import sys
from array import array
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from mimir.runtime import manifest as mf
from mimir.runtime.dimexpr import evaluate
from mimir.runtime.tolerances import TOLERANCES

__all__ = [
    "TOLERANCES",
    "choose_dims",
    "default_scalars",
    "grow_dims",
    "error_summary",
    "mismatches",
    "random_inputs",
    "random_value",
    "shim_reference",
]


def _round_f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def _round_f16(x: float) -> float:
    return struct.unpack("<e", struct.pack("<e", x))[0]


INT_RANGE = (-8, 8)
UINT_RANGE = (0, 16)


def random_value(rng: random.Random, dtype: str) -> Any:
    """One random element: floats in [-1, 1), ints in a small range, bools."""
    if dtype == "float32":
        return _round_f32(rng.uniform(-1.0, 1.0))
    if dtype == "float16":
        return _round_f16(rng.uniform(-1.0, 1.0))
    if dtype == "bfloat16":
        return mf.decode(mf.encode([rng.uniform(-1.0, 1.0)], "bfloat16"), "bfloat16", 1)[0]
    if dtype == "int32":
        return rng.randint(*INT_RANGE)
    if dtype == "uint32":
        return rng.randint(*UINT_RANGE)
    if dtype == "bool_":
        return rng.random() < 0.5
    raise ValueError(f"unknown dtype {dtype!r}")


def random_inputs(
    manifest: Mapping[str, Any], dims: Mapping[str, int], seed: int = 0
) -> dict[str, list]:
    """Seeded random values for every input buffer, flat and row-major.

    Values are exactly representable in their dtype (floats pre-rounded), so the
    shim and the kernel start from the same bits.
    """
    out: dict[str, list] = {}
    for buf in manifest["buffers"]:
        if buf["role"] not in mf.UPLOADED:
            continue
        rng = random.Random(f"{seed}:{buf['name']}")
        count = mf.numel(mf.buffer_shape(buf, dims))
        if "range" in buf:  # `Range(lo, hi)`: only values the kernel's proofs admit
            lo, hi = (evaluate(b, dims) for b in buf["range"])
            out[buf["name"]] = [rng.randrange(lo, hi) for _ in range(count)]
            continue
        if buf["dtype"] == "float32":  # the values random_value draws, rounded in one go
            draw = rng.random  # rng.uniform(-1.0, 1.0) is -1.0 + 2.0 * rng.random()
            out[buf["name"]] = array("f", [-1.0 + 2.0 * draw() for _ in range(count)]).tolist()
            continue
        out[buf["name"]] = [random_value(rng, buf["dtype"]) for _ in range(count)]
    return out


# ---------------------------------------------------------------- the shim's answer

_counter = itertools.count()


def _import_path(path: Path) -> ModuleType:
    name = f"_mimir_harness_{Path(path).stem}_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # inspect.getsource needs it registered
    # As `python path` would: the file's own imports of its project's modules resolve.
    from mimir.project.resolve import package_root

    root = str(package_root(Path(path).resolve()))
    sys.path.insert(0, root)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(root)
    return module


@functools.cache
def _module(path: str) -> ModuleType:
    return _import_path(Path(path))


def _make_tensor(values: list, shape: Sequence[int], dtype: Any) -> Any:
    from mimir.array import Tensor
    from mimir.ops.numerics import cast

    if math.prod(shape) != len(values):
        raise ValueError(f"{len(values)} values do not fill shape {list(shape)}")
    # what `tensor(nested values, dtype=dtype).to("gpu")` makes, without nesting them first
    return Tensor(cast(values, dtype), tuple(shape), dtype, "gpu")


def shim_reference(
    source_path: Path,
    function: str,
    inputs: Mapping[str, list],
    dims: Mapping[str, int],
    scalars: Mapping[str, float | int] | None = None,
    fast: bool = False,
) -> dict[str, list]:
    """Run `function` of the kernel file under the shim; its outputs as flat lists.

    `fast`: compute through NumPy where it is importable (`fast_reference`: the shim's
    semantics, vectorised; floats within the comparison's tolerances of the shim's own).

    A tier-1 kernel's result is named `out` (or `out0`, `out1`... for a tuple),
    as in the manifest. An index-level kernel (`@gpu(grid=...)`) gets a zeroed
    tensor for each tensor parameter missing from `inputs`, and those are its
    outputs, named after the parameter. An `InOut[...]` parameter is given in
    `inputs` and is also an output, named after the parameter: its contents after
    the call.
    """
    from mimir.array import TensorType
    from mimir.dims import evaluate

    module = _module(str(Path(source_path).resolve()))
    kernel = getattr(module, function)
    annotations = kernel.annotations()
    scalars = scalars or {}
    args: dict[str, Any] = {}
    written: list[str] = []
    for name in kernel.signature.parameters:
        ann = annotations.get(name)
        if isinstance(ann, TensorType):
            shape = [evaluate(d, dims) for d in ann.dims]
            if name in inputs:
                args[name] = _make_tensor(mf.flatten(inputs[name]), shape, ann.dtype)
            elif kernel.grid is not None:
                args[name] = _make_tensor([0] * math.prod(shape), shape, ann.dtype)
                written.append(name)
            else:
                raise KeyError(f"no input values for parameter `{name}` of `{function}`")
        elif name in scalars:
            args[name] = scalars[name]
        else:
            raise KeyError(f"no value for scalar parameter `{name}` of `{function}`")
    if fast:
        from mimir.runtime.fast_reference import accelerated

        with accelerated():
            result = kernel(**args)
    else:
        result = kernel(**args)
    updated = {
        name: args[name].flat()
        for name in kernel.signature.parameters
        if isinstance(annotations.get(name), TensorType) and annotations[name].inout
    }
    if kernel.grid is not None:
        return {**{name: args[name].flat() for name in written}, **updated}
    if isinstance(result, tuple):
        from mimir.array import result_names

        names = result_names(annotations.get("return")) or [f"out{i}" for i in range(len(result))]
        return {**{n: r.flat() for n, r in zip(names, result, strict=True)}, **updated}
    if result is None:
        return updated
    return {"out": result.flat(), **updated}


# ---------------------------------------------------------------- comparison

# (rtol, atol) per dtype: `mimir.runtime.tolerances`, the rule both references share.


def error_summary(actual: Sequence[Any], expected: Sequence[Any]) -> tuple[float, float]:
    """(max absolute error, max relative error) between two flat lists of numbers."""
    max_abs = max_rel = 0.0
    for a, e in zip(actual, expected, strict=True):
        a, e = float(a), float(e)
        if math.isnan(a) and math.isnan(e):
            continue
        if a == e:
            continue
        nonfinite = math.isinf(a) or math.isinf(e) or math.isnan(a) or math.isnan(e)
        diff = math.inf if nonfinite else abs(a - e)
        max_abs = max(max_abs, diff)
        max_rel = max(max_rel, diff / abs(e) if e else math.inf)
    return max_abs, max_rel


def tf32_fallback_atol(manifest: Mapping[str, Any], dims: Mapping[str, int]) -> float | None:
    """The absolute tolerance against the shim of a `@gpu(precision="tf32")` function that
    this backend computed in full float32 (the manifest's `precision.matmul` is "float32":
    MSL, WGSL, SPIR-V), else None (the dtype's own tolerance).

    The shim rounds each float32 operand of such a function's matmuls to TF32 (at most
    2**-11 relative each) before its exact products, as PTX's tensor cores do, so a backend
    that did not round differs from it by at most 2 * 2**-11 per product of inputs in
    [-1, 1): atol = 2 * 2**-11 * K, with K bounded by the largest size of any buffer."""
    precision = manifest.get("precision")
    if precision is None or precision["matmul"] != "float32":
        return None
    sizes = [1, *dims.values()]
    for buf in manifest["buffers"]:
        for size in buf["shape"]:
            sizes.append(size if isinstance(size, int) else dims.get(str(size), 1))
    return max(TOLERANCES["float32"][1], 2 * 2**-11 * max(sizes))


def mismatches(
    actual: Sequence[Any],
    expected: Sequence[Any],
    dtype: str,
    rtol: float | None = None,
    atol: float | None = None,
) -> list[int]:
    """Flat indices where `|actual - expected| > atol + rtol * |expected|` (ints: any difference).

    NaN matches NaN and an infinity matches the same infinity; a length
    difference is a `ValueError`.
    """
    default_rtol, default_atol = TOLERANCES[dtype]
    rtol = default_rtol if rtol is None else rtol
    atol = default_atol if atol is None else atol
    if len(actual) != len(expected):
        raise ValueError(f"{len(actual)} values, expected {len(expected)}")
    bad: list[int] = []
    for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
        if dtype == "bool_":
            ok = bool(a) == bool(e)
        elif dtype in ("int32", "uint32"):
            ok = int(a) == int(e)
        else:
            a, e = float(a), float(e)
            if math.isnan(e) or math.isinf(e):
                ok = (math.isnan(a) and math.isnan(e)) or a == e
            else:
                ok = not math.isnan(a) and abs(a - e) <= atol + rtol * abs(e)
        if not ok:
            bad.append(i)
    return bad


# ---------------------------------------------------------------- dim bindings


def admissible(dim: Mapping[str, Any], start: int) -> int | None:
    """The smallest size >= `start` that a manifest dim entry admits, or None."""
    lo = dim.get("min")
    hi = dim.get("max")
    step = dim.get("multiple_of") or 1
    v = max(start, lo if lo is not None else 1)
    v = -(-v // step) * step
    if hi is not None and v > hi:
        return None
    return v


def choose_dims(manifest: Mapping[str, Any], targets: Sequence[int]) -> dict[str, int]:
    """Bind each dim, in order, to the first admissible size >= its target.

    `targets[i]` is dim i's wish (the last target repeats); when none of the
    targets fits a dim, its largest admissible size (or its minimum) is used.
    """
    env: dict[str, int] = {}
    for i, dim in enumerate(manifest.get("dims", [])):
        want = targets[min(i, len(targets) - 1)] if targets else 1
        value = admissible(dim, want)
        if value is None:
            hi = dim["max"]
            step = dim.get("multiple_of") or 1
            value = hi // step * step
        env[dim["name"]] = value
    return env


def largest_buffer(manifest: Mapping[str, Any], dims: Mapping[str, int]) -> int:
    return max(
        (mf.numel(mf.buffer_shape(b, dims)) for b in manifest["buffers"]),
        default=0,
    )


def grow_dims(
    manifest: Mapping[str, Any], dims: Mapping[str, int], elements: int
) -> list[dict[str, int]]:
    """Bindings where one dim grew until some buffer holds >= `elements` values.

    One candidate per dim that can get there within its constraints (grown by
    doubling, so sizes stay odd when they start odd); empty when none can.
    """
    found: list[dict[str, int]] = []
    for dim in manifest.get("dims", []):
        env = dict(dims)
        name = dim["name"]
        while largest_buffer(manifest, env) < elements:
            bigger = admissible(dim, env[name] * 2 + 1)
            if bigger is None or bigger > 2 * elements:
                break
            env[name] = bigger
        if largest_buffer(manifest, env) >= elements and env not in found:
            found.append(env)
    return found


def default_scalars(manifest: Mapping[str, Any], dims: Mapping[str, int]) -> dict[str, Any]:
    """A value for every uniform field that is not a dim: 0.5 for f32, 2 for integers."""
    out: dict[str, Any] = {}
    for entry in mf.uniform_fields(manifest):
        if entry["name"] not in dims:
            out[entry["name"]] = 0.5 if entry["type"] == "f32" else 2
    return out
