"""float16 and bfloat16 rounding, bit for bit: the shim against NumPy and a reference, and
every backend against the shim.

The shim (`mimir.ops.numerics.cast`) rounds a float32 value to float16 and to bfloat16 to
nearest, ties to even, with overflow to inf, subnormals kept and nan kept nan. Hypothesis
checks it against NumPy's float16 conversion and an exact bfloat16 reference (the two
neighbours in `fractions.Fraction`, the nearer one, a tie to the even one, past the
largest finite value inf). Then `round_to_half` (`tests/kernels/half_storage.py`) runs on
MSL, WGSL, PTX and SPIR-V over ties, the overflow boundaries, subnormals, signed zeros,
infinities, nan and random bit patterns, and every stored bit pattern must be the shim's:
a float16 store is PTX's `cvt.rn.f16.f32` and MSL's `half(x)`, and on WGSL and SPIR-V
(whose specifications let the conversion round either way) integer rounding first
(`mimir_round_f16`, `lower.with_exact_half`); a bfloat16 value is rounded in integer
arithmetic on the float32 bits (`mimir_round_bf16`, `mimir_bf16_bits`) everywhere.
"""

from __future__ import annotations

import atexit
import functools
import json
import math
import random
import shutil
import struct
import tempfile
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from harness import require_tool, shim_reference, write_files
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mimir.codegen import compile_source
from mimir.dtypes import bfloat16, float16
from mimir.ops import numerics as nm
from mimir.runtime import manifest as mf

KERNELS = Path(__file__).resolve().parent / "kernels"
SOURCE = KERNELS / "half_storage.py"


def _f32(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def _bits32(v: float) -> int:
    return struct.unpack("<I", struct.pack("<f", v))[0]


def _half_bits(v: float) -> int:
    return int(np.array([v], np.float16).view(np.uint16)[0])


def _bf16_reference(v: float) -> float:
    """bfloat16 rounding by its definition: the representable neighbours of float32 `v`,
    exactly, the nearer one, a tie to the one with an even last bit; inf past the largest
    finite bfloat16 (the step after it, 2**128, is where a rounding up lands)."""
    if math.isnan(v) or math.isinf(v) or v == 0.0:
        return v
    bits = _bits32(v)
    down = bits & 0xFFFF0000
    up = down + 0x10000
    if bits == down:
        return v
    exact = Fraction(v)
    lo = Fraction(_f32(down))
    hi = Fraction(2**128) * (1 if v > 0 else -1) if up & 0x7FFFFFFF == 0x7F800000 else None
    hi = hi if hi is not None else Fraction(_f32(up))
    d_lo, d_hi = abs(exact - lo), abs(hi - exact)
    pick_up = d_hi < d_lo or (d_hi == d_lo and (up >> 16) % 2 == 0)
    if not pick_up:
        return _f32(down)
    return math.copysign(math.inf, v) if up & 0x7FFFFFFF == 0x7F800000 else _f32(up)


# ties, the overflow boundaries, subnormals, signed zeros, infinities and nan
SPECIAL: list[float] = [
    0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan,
    1 + 2**-11, 1 + 3 * 2**-11, -(1 + 2**-11), 2049.0, 2051.0,  # float16 ties
    65504.0, 65519.0, 65520.0, -65520.0, 65536.0, 1e5,  # float16 overflow
    2**-24, 2**-25, 3 * 2**-25, 5 * 2**-25, 2**-26, 2**-14, 2**-14 - 2**-24,  # f16 subnormal
    2**-14 - 2**-25, 2**-14 - 3 * 2**-25, -(3 * 2**-25), 1e-8, -1e-8, 6e-8, 5.9e-8,
    1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8), 256.5, 257.0,  # bfloat16 ties
    _f32(0x7F7FFFFF), _f32(0x7F7F7FFF), _f32(0x7F7F8000), _f32(0xFF7F8000),  # bf16 overflow
    _f32(0x00000001), _f32(0x00008000), _f32(0x00018000), _f32(0x807FFFFF),  # f32 subnormals
    3.14159, -2.71828, 1e-3, 1e30, -1e-30,
]  # fmt: skip


@settings(max_examples=500, deadline=None, derandomize=True)
@given(st.floats(width=32))
@example(1 + 2**-11)
@example(65520.0)
@example(2**-25)
@example(3 * 2**-25)
def test_float16_rounding_matches_numpy(v: float) -> None:
    (got,) = nm.cast([v], float16)
    with np.errstate(over="ignore"):
        want = np.float32(v).astype(np.float16)
    if math.isnan(v):
        assert math.isnan(got)
        return
    assert _half_bits(got) == int(np.array([want]).view(np.uint16)[0])


@settings(max_examples=500, deadline=None, derandomize=True)
@given(st.floats(width=32))
@example(1 + 2**-8)
@example(1 + 3 * 2**-8)
@example(_f32(0x7F7F8000))
@example(_f32(0x00008000))
def test_bfloat16_rounding_matches_the_reference(v: float) -> None:
    (got,) = nm.cast([v], bfloat16)
    want = _bf16_reference(v)
    if math.isnan(v):
        assert math.isnan(got)
        return
    assert _bits32(got) == _bits32(want)
    # and the host's encoding of a value to upload is the same rounding
    assert struct.unpack("<H", mf.encode([v], "bfloat16")[:2])[0] == _bits32(want) >> 16


def _inputs() -> list[float]:
    rng = random.Random(16)
    patterns = [_f32(rng.getrandbits(32)) for _ in range(2000)]
    near = [_f32((rng.getrandbits(16) << 16) | 0x8000) for _ in range(200)]  # bf16 ties
    return SPECIAL + [v for v in patterns + near if not math.isnan(v)]


@functools.cache
def _compiled() -> Path:
    out = Path(tempfile.mkdtemp(prefix="mimir-half-"))
    atexit.register(shutil.rmtree, out, ignore_errors=True)
    result = compile_source(str(SOURCE), SOURCE.read_text(), ["all"], function="round_to_half")
    assert result.ok, [d.message for d in result.diagnostics]
    write_files(result.files, out)
    return out


def _run(backend: str, folder: Path, inputs: dict, dims: dict) -> dict[str, list]:
    manifest = json.loads((folder / backend / "round_to_half.manifest.json").read_text())
    if backend in ("wgsl", "spirv"):
        require_tool("wgpu")
        from mimir.runtime.wgpu_runner import run_manifest

        return run_manifest(manifest, folder / backend, inputs, dims, {}, repeat=1)
    if backend == "msl":
        require_tool("clang++-half")
        from harness.msl_runner import run_msl_manifest

        return run_msl_manifest(manifest, folder / backend, inputs, dims, {})
    from harness.ptx_interp import run_ptx_manifest_cpu

    return run_ptx_manifest_cpu(manifest, folder / backend, inputs, dims, {})


def _pattern(values: list, dtype: str) -> list[int | str]:
    """Each value's stored bit pattern (any nan as "nan": a nan's payload is not kept)."""
    raw = struct.unpack(f"<{len(values)}H", mf.encode(values, dtype)[: 2 * len(values)])
    return ["nan" if math.isnan(v) else b for v, b in zip(values, raw, strict=True)]


@pytest.mark.parametrize("backend", ["msl", "wgsl", "ptx", "spirv"])
def test_every_backend_stores_the_shims_bits(backend: str) -> None:
    folder = _compiled()
    values = _inputs()
    dims = {"N": len(values)}
    inputs = {"x": values}
    want = shim_reference(SOURCE, "round_to_half", inputs, dims, {})
    got = _run(backend, folder, inputs, dims)
    for name, dtype in (("out0", "float16"), ("out1", "bfloat16")):
        expected, actual = _pattern(want[name], dtype), _pattern(got[name], dtype)
        bad = [
            f"{values[i]!r}: got {actual[i]}, expected {expected[i]}"
            for i in range(len(values))
            if actual[i] != expected[i]
        ]
        assert not bad, f"{backend} {dtype}: {len(bad)} differ: " + "; ".join(bad[:6])
