"""float16 and bfloat16 layers against NumPy, not only against the shim.

The zoo compares every backend with the shim; this file checks that what both compute is the
layer itself: a bfloat16 linear layer with a GELU epilogue, a bfloat16 RMS norm, a float16
matmul and float16 flash attention (causal too), run on WGSL and SPIR-V (wgpu) at odd sizes,
against a float64 NumPy reference of the same math, within the rounding of the stored dtype
(half an ulp of it, relative, plus the float32 accumulation's error; for attention, plus
what rounding its scores and probabilities to that dtype, as the language does, can move an
output).
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


def _softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _scores(a: dict[str, np.ndarray], causal: bool) -> np.ndarray:
    scores = a["q"] @ a["k"].T * 0.125
    if causal:
        t = scores.shape[0]
        scores = np.where(np.tril(np.ones((t, t), bool)), scores, -np.inf)
    return scores


def _attention(a: dict[str, np.ndarray], causal: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The output, and its sensitivity to rounding the scores and the probabilities to the
    half type (the language rounds each op's float16 result; a fused launch may keep them
    in float32): a relative error e in every score s and probability p moves an output by
    at most e * sum_j p_j (1 + |s_j|) |v_j|."""
    scores = _scores(a, causal)
    probs = _softmax(scores)
    finite = np.where(np.isfinite(scores), np.abs(scores), 0.0)
    return probs @ a["v"], (probs * (1.0 + finite)) @ np.abs(a["v"])


def _reach(want: np.ndarray) -> np.ndarray:
    # a relative bound alone fails where a sum cancels to near 0: 1/64 of the largest too
    return np.abs(want) + 2.0**-6 * np.abs(want).max()


def _plain(f):
    def reference(a: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        want = f(a)
        return want, _reach(want)

    return reference


CASES = [
    ("half_storage", "bf16_linear_gelu", {"N": 37, "K": 129, "M": 53}, _plain(_linear_gelu)),
    ("half_storage", "bf16_rms_norm", {"N": 37, "D": 781}, _plain(_rms_norm)),
    ("half_storage", "f16_matmul", {"N": 37, "K": 129, "M": 53}, _plain(_matmul)),
    ("tensor_cores_half", "attention_f16", {"T": 131}, _attention),
    ("tensor_cores_half", "causal_attention_f16", {"T": 131}, lambda a: _attention(a, True)),
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
    want, reach = (r.reshape(-1) for r in reference(arrays))
    got = np.asarray(run_manifest(manifest, folder, inputs, dims, {})[out["name"]], np.float64)
    assert got.shape == want.shape
    err = np.abs(got - want)
    bound = ULP[out["dtype"]] * reach
    worst = int(np.argmax(err - bound))
    assert (err <= bound).all(), (
        f"{function} on {backend} at {dims}: {int((err > bound).sum())} of {want.size} values "
        f"off by more than an ulp of {out['dtype']}; [{worst}] got {got[worst]}, "
        f"NumPy {want[worst]}"
    )
