"""PTX on a real NVIDIA GPU: every zoo kernel against the shim, the math sequences bit for bit.

The PTX is loaded through the CUDA driver API (`mimir.runtime.cuda_runner`,
ctypes on libcuda: the driver JIT-compiles it for the GPU present) and run
exactly as the manifest says. Skipped where there is no NVIDIA driver or
device, even under `CI=true`: CI machines have no GPU, and ptxas
(`tests/test_ptx.py`) is what validates the PTX there.

- every zoo function, at the bindings of `tests/test_backends_exec.py` (one,
  small, medium, large), is compared with the shim exactly as the WGSL and
  MSL runs are (`harness.TOLERANCES`, with the same few looser outputs:
  reductions may sum in another order; exp/log/tanh/pow are within their
  `ACCURACY` bounds, far inside those tolerances);
- exp, log, tanh and pow, compiled with `math="precise"`, run as kernels over
  thousands of float32 inputs and must equal the CPU emulation of the same
  instructions bit for bit, and so meet `mathlib.ACCURACY` against `math`
  exactly as `tests/test_ptx_math.py` shows on the CPU.
"""

from __future__ import annotations

import functools
import json
import math
import os
import random
import struct
from pathlib import Path
from typing import Any

import pytest
from harness import random_inputs, shim_reference
from test_backends_exec import BINDINGS, FUNCTIONS, KERNELS, _compare, _dims
from test_ptx_exec import compiled_ptx

from mimir.codegen import compile_source
from mimir.codegen.backends.ptx import mathlib
from mimir.codegen.backends.ptx.emulate import evaluate, ulp_error
from mimir.runtime.verify import default_scalars


@functools.cache
def _gpu() -> tuple[Any, str]:
    from mimir.runtime import cuda_runner

    try:
        return cuda_runner, cuda_runner.device_description()
    except cuda_runner.CudaUnavailableError as err:
        return None, str(err)


@pytest.fixture
def cuda() -> Any:
    runner, why = _gpu()
    if runner is None:
        pytest.skip(
            f"no NVIDIA GPU here ({why}); CI machines have none, ptxas checks the PTX there"
        )
    return runner


# A short device session can run a subset: MIMIR_PTX_GPU_BINDINGS=one,small.
GPU_BINDINGS = [
    b for b in os.environ.get("MIMIR_PTX_GPU_BINDINGS", ",".join(BINDINGS)).split(",") if b
]


@pytest.mark.parametrize("label", GPU_BINDINGS)
@pytest.mark.parametrize(("stem", "function"), FUNCTIONS, ids=[f"{s}.{f}" for s, f in FUNCTIONS])
def test_ptx_matches_shim_on_the_gpu(
    cuda: Any, stem: str, function: str, label: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    folder = tmp_path_factory.getbasetemp() / "ptx-gpu" / stem / function
    manifest = compiled_ptx(stem, function, folder)
    dims = _dims(manifest, label)
    if dims is None:
        pytest.skip(f"no dim of `{function}` can grow to the `large` size within its constraints")
    inputs = random_inputs(manifest, dims, seed=len(function))
    scalars = default_scalars(manifest, dims)
    expected = shim_reference(KERNELS / f"{stem}.py", function, inputs, dims, scalars)
    actual = cuda.run_ptx_manifest(manifest, folder, inputs, dims, scalars)
    _compare(manifest, actual, expected, stem, function, dims)


MATH_SOURCE = """
from mimir.array import Dim, Tensor, float32, gpu

N = Dim("N")


@gpu
def k_exp(x: Tensor[float32, N]) -> Tensor[float32, N]:
    return x.exp()


@gpu
def k_log(x: Tensor[float32, N]) -> Tensor[float32, N]:
    return x.log()


@gpu
def k_tanh(x: Tensor[float32, N]) -> Tensor[float32, N]:
    return x.tanh()


@gpu
def k_pow(x: Tensor[float32, N], y: Tensor[float32, N]) -> Tensor[float32, N]:
    return x ** y
"""


def _f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def _math_inputs(name: str, n: int) -> list[tuple[float, ...]]:
    rng = random.Random(name)
    out: list[tuple[float, ...]] = []
    for _ in range(n):
        if name == "exp":
            out.append((_f32(rng.uniform(-104, 89)),))
        elif name == "log":
            bits = rng.randrange(1, 0x7F800000)
            out.append((struct.unpack("<f", struct.pack("<I", bits))[0],))
        elif name == "tanh":
            out.append((_f32(rng.uniform(-20, 20) if rng.random() < 0.5 else rng.uniform(-1, 1)),))
        else:
            a = _f32(math.exp(rng.uniform(-10, 10)))
            limit = min(40.0, 88.0 / max(abs(math.log(a)), 1e-9))
            out.append((a, _f32(rng.uniform(-limit, limit))))
    return out


@pytest.mark.parametrize("name", ["exp", "log", "tanh", "pow"])
def test_math_sequences_are_bit_exact_on_the_gpu(cuda: Any, name: str, tmp_path: Path) -> None:
    # precise: every instruction correctly rounded, so the GPU equals the emulation bit for bit
    result = compile_source(
        "ptx_math.py", MATH_SOURCE, ["ptx"], function=f"k_{name}", math="precise"
    )
    assert result.ok, [d.message for d in result.diagnostics]
    for relative, content in result.files.items():
        (tmp_path / relative).write_text(content)  # type: ignore[arg-type]
    manifest = json.loads(result.files[f"k_{name}.manifest.json"])  # type: ignore[arg-type]
    args = _math_inputs(name, 4096)
    inputs = {"x": [a[0] for a in args]}
    if name == "pow":
        inputs["y"] = [a[1] for a in args]
    got = cuda.run_ptx_manifest(manifest, tmp_path, inputs, {"N": len(args)})["out"]
    exact_fn = {"exp": math.exp, "log": math.log, "tanh": math.tanh, "pow": math.pow}[name]
    worst = 0.0
    for a, g in zip(args, got, strict=True):
        emulated = evaluate(name, *a)
        assert struct.pack("<f", g) == struct.pack("<f", emulated), (name, a, g, emulated)
        try:
            exact = exact_fn(*a)
        except OverflowError:
            exact = math.inf
        error = ulp_error(g, exact)
        assert error <= mathlib.ulp_bound(name, a), (name, a, g, exact, error)
        worst = max(worst, error)
    print(f"{name}: worst {worst:.3f} ulp on {_gpu()[1]}")
