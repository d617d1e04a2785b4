"""float16 and bfloat16 layers against NumPy, not only against the shim.

The zoo compares every backend with the shim; this file checks that what both compute is
the layer itself: a bfloat16 linear layer with a GELU epilogue, a bfloat16 RMS norm and a
float16 matmul, run on WGSL and SPIR-V (wgpu) at odd sizes, against a float64 NumPy
reference of the same math, within the rounding of the stored dtype (half an ulp of it,
relative, plus the float32 accumulation's error).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from harness import load_manifest, require_tool

from mimir.runtime.verify import random_inputs

OUT = Path(__file__).resolve().parent / "kernels" / "out"

# One ulp of the stored type, relative: the rounding at the store is at most half of it,
# and the float32 accumulation before it (K products in another order than NumPy's) adds
# far less at these sizes.
ULP = {"bfloat16": 2.0**-7, "float16": 2.0**-10}


def _gelu_tanh(v: np.ndarray) -> np.ndarray:
    return 0.5 * v * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v**3)))


def _linear_gelu(a: dict[str, np.ndarray]) -> np.ndarray:
    return _gelu_tanh(a["x"] @ a["w"] + a["b"])


def _rms_norm(a: dict[str, np.ndarray]) -> np.ndarray:
    x = a["x"]
    return x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-6) * a["g"]


def _matmul(a: dict[str, np.ndarray]) -> np.ndarray:
    return a["x"] @ a["w"]


CASES = [
    ("half_storage", "bf16_linear_gelu", {"N": 37, "K": 129, "M": 53}, _linear_gelu),
    ("half_storage", "bf16_rms_norm", {"N": 37, "D": 781}, _rms_norm),
    ("half_storage", "f16_matmul", {"N": 37, "K": 129, "M": 53}, _matmul),
]


@pytest.mark.parametrize("backend", ["wgsl", "spirv"])
@pytest.mark.parametrize(
    ("stem", "function", "dims", "reference"), CASES, ids=[c[1] for c in CASES]
)
def test_half_layers_match_numpy_at_odd_sizes(
    backend: str, stem: str, function: str, dims: dict[str, int], reference
) -> None:
    require_tool("wgpu")
    from mimir.runtime.wgpu_runner import run_manifest

    folder = OUT / backend / stem
    manifest = load_manifest(folder / f"{function}.manifest.json")
    inputs = random_inputs(manifest, dims, seed=7)
    arrays = {}
    for buf in manifest["buffers"]:
        if buf["role"] == "input":
            shape = [dims[s] if isinstance(s, str) else s for s in buf["shape"]]
            arrays[buf["name"]] = np.asarray(inputs[buf["name"]], np.float64).reshape(shape)
    (out,) = [b for b in manifest["buffers"] if b["role"] == "output"]
    want = reference(arrays).reshape(-1)
    got = np.asarray(run_manifest(manifest, folder, inputs, dims, {})[out["name"]], np.float64)
    assert got.shape == want.shape
    # the reference's scale: a relative bound alone fails where a sum cancels to near 0
    scale = float(np.abs(want).max())
    err = np.abs(got - want)
    bound = ULP[out["dtype"]] * (np.abs(want) + 2.0**-6 * scale)
    worst = int(np.argmax(err - bound))
    assert (err <= bound).all(), (
        f"{function} on {backend} at {dims}: {int((err > bound).sum())} of {want.size} values "
        f"off by more than an ulp of {out['dtype']}; [{worst}] got {got[worst]}, "
        f"NumPy {want[worst]}"
    )
