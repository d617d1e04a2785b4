"""bfloat16: a storage dtype computed in float32, rounded to nearest even on the upper 16 bits.

The shim's rounding is checked against the definition (the two bfloat16 neighbours of the
float32 value, the nearer one, ties to the even one), the promotion rules against JAX's
choices, and compilation: kernels read bfloat16 (the zoo's `bfloat16_reads`) and store it
through float32 scratch and a packing launch (the zoo's `half_storage`).
"""

from __future__ import annotations

import json
import math
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mimir.array import bfloat16, float16, float32, int32, tensor
from mimir.codegen import compile_source
from mimir.dtypes import promote, promote_weak
from mimir.ops import numerics as nm


def _bits(v: float) -> int:
    return struct.unpack("<I", struct.pack("<f", v))[0]


def _value(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits))[0]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.floats(width=32, allow_nan=False))
def test_rounding_is_nearest_even_on_the_upper_16_bits(v: float) -> None:
    (got,) = nm.cast([v], bfloat16)
    bits = _bits(v)
    down = bits & 0xFFFF0000  # toward zero
    up = down + 0x10000  # away from zero (may be inf)
    if bits == down:
        assert _bits(got) == bits
        return
    assert _bits(got) in (down, up)
    # past the largest finite bfloat16 the next step is 2**128, which rounds to inf
    up_value = math.copysign(2.0**128, v) if up & 0x7FFFFFFF == 0x7F800000 else _value(up)
    d_down, d_up = abs(_value(down) - v), abs(up_value - v)
    if d_down != d_up:
        assert _bits(got) == (down if d_down < d_up else up)
    else:  # a tie: the even upper half
        assert (_bits(got) >> 16) % 2 == 0


def test_special_values() -> None:
    assert nm.cast([1e39, -1e39], bfloat16) == [math.inf, -math.inf]
    assert math.isnan(nm.cast([math.nan], bfloat16)[0])
    assert nm.cast([3.4e38], bfloat16) == [math.inf]  # rounds past the largest finite
    assert nm.cast([1.0, -2.5, 0.0], bfloat16) == [1.0, -2.5, 0.0]


def test_promotion() -> None:
    assert promote(bfloat16, float16) is float32
    assert promote(bfloat16, float32) is float32
    assert promote(bfloat16, int32) is bfloat16
    assert promote_weak(bfloat16, "float") is bfloat16
    x = tensor([1.0, 2.0], dtype=bfloat16)
    assert (x + tensor([1.0, 1.0], dtype=float16)).dtype == float32
    assert (x * 3).dtype == bfloat16
    assert (x / 3.0).tolist() == nm.cast([1 / 3, 2 / 3], bfloat16)


SOURCE = """
from mimir.array import Dim, Tensor, bfloat16, float32, gpu
N = Dim("N")

@gpu
def scale(x: Tensor[bfloat16, N], w: Tensor[float32, N]) -> Tensor[bfloat16, N]:
    return (x.astype(float32) * w).astype(bfloat16)
"""


LAYER = """
from mimir.array import Dim, Tensor, bfloat16, float32, gpu
N = Dim("N")
K = Dim("K", max=64)
M = Dim("M")

@gpu
def layer(x: Tensor[bfloat16, N, K], w: Tensor[bfloat16, K, M]) -> Tensor[bfloat16, N, M]:
    return (x @ w).gelu()
"""


def _launches(source: str, name: str, backend: str) -> tuple[dict, list[str]]:
    result = compile_source("bf16.py", source, [backend])
    assert result.ok, [d.message for d in result.diagnostics]
    manifest = json.loads(result.files[f"{name}.manifest.json"])
    buffers = {b["name"]: (b["role"], b["dtype"]) for b in manifest["buffers"]}
    return buffers, [k["entry_point"].rsplit("_", 1)[-1] for k in manifest["kernels"]]


@pytest.mark.parametrize("backend", ["msl", "wgsl", "ptx", "spirv"])
def test_every_backend_stores_bfloat16_a_word_per_thread(backend: str) -> None:
    """No two threads share a 32-bit word (`mimir.codegen.schedule.packing`): an
    element-wise result is one launch whose threads compute a word each; a matmul's
    epilogue goes to float32 scratch and a packing launch. Executed against the shim on
    every backend: `tests/kernels/half_storage.py`, `half_kinds.py`."""
    buffers, kinds = _launches(SOURCE, "scale", backend)
    assert buffers["out"] == ("output", "bfloat16") and kinds == ["ew"]
    assert not any(role == "scratch" for role, _ in buffers.values())
    buffers, kinds = _launches(LAYER, "layer", backend)
    assert buffers["out"] == ("output", "bfloat16")
    assert buffers["scratch0"] == ("scratch", "float32")
    assert kinds == ["matmul", "ew"]


INDEX_LEVEL = """
from mimir.array import Dim, Tensor, bfloat16, gpu, program_id
N = Dim("N")

@gpu(grid=(N,))
def copy(x: Tensor[bfloat16, N], out: Tensor[bfloat16, N]):
    i = program_id(0)
    out[i] = x[i]
"""


@pytest.mark.parametrize("backend", ["msl", "wgsl", "ptx", "spirv"])
def test_index_level_kernels_refuse_bfloat16_naming_the_backends(backend: str) -> None:
    """A program of an index-level kernel stores one element: it would share its word
    with the next program's, so bfloat16 stays a coded refusal there."""
    result = compile_source("bf16.py", INDEX_LEVEL, [backend])
    (d,) = result.diagnostics
    assert d.code == "GPU070" and "bfloat16" in d.message and backend in d.message
    assert not result.files
