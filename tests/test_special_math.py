"""cosh, sinh, expm1, log1p, erf, erfc, atan, atan2 and the exact GELU against the shim.

Every backend computes them with the same IR helpers (`mimir.codegen.helpers`, written
over `exp`, `log` and arithmetic), so they are held here twice: the helpers by the NumPy
model of the IR in `benchmarks/special_accuracy.py` over a sweep of float32 bit patterns
(both signs, subnormals to the largest float, inf and nan) plus each helper's branch
points, and the compiled kernels on every backend's executor at the branch points and a
thinner sweep. Both must stay within the float32 tolerance of `mimir.runtime.tolerances`
(what `verify` and the execution tests compare with) everywhere and within the ulp bound
below wherever the result is a normal float; special values must be exactly IEEE's.
RECEIPTS.md has the measured figures.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mimir.codegen.helpers import HELPERS
from mimir.ops import numerics as nm

REPO = Path(__file__).resolve().parents[1]

# worst float32 ulp where the reference is normal: the IR model (NumPy's exp and log) and
# the backends (their own exp and log: WGSL and SPIR-V allow 3 + 2|x| ulp, which sinh and
# cosh near 89 and erfc near 10 inherit). The exact GELU rounds x / sqrt(2), which erfc
# turns into up to 2 z^2 2^-24 relative far in its tail (results below 1e-30).
IR_ULP = {"gelu_erf": 256.0}
IR_ULP_DEFAULT = 8.0
BACKEND_ULP = {"gelu_erf": 512.0, "cosh": 256.0, "sinh": 256.0, "erfc": 256.0, "expm1": 256.0}
BACKEND_ULP_DEFAULT = 16.0


def _bench() -> Any:
    name = "_mimir_special_accuracy"
    if name not in sys.modules:
        path = REPO / "benchmarks/special_accuracy.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture(scope="module")
def sweep() -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    bench = _bench()
    x, y = bench.inputs(1 << 14)
    return x, y, {name: bench.reference(name, x, y) for name in bench.FUNCTIONS}


@pytest.mark.parametrize("name", list(_bench().FUNCTIONS))
def test_the_ir_helper_is_within_tolerance_over_float32(name: str, sweep: Any) -> None:
    bench = _bench()
    x, y, refs = sweep
    helper, _, arity = bench.FUNCTIONS[name]
    got = bench.run_helper(HELPERS[helper], [y, x] if arity == 2 else [x])
    ulps, ratio, k = bench.errors(got, refs[name])
    assert ratio <= 1.0, f"{name}: {ratio:.3f} of the tolerance"
    bound = IR_ULP.get(name, IR_ULP_DEFAULT)
    assert ulps <= bound, f"{name}: {ulps} ulp at x = {float(x[k])!r}"


@pytest.fixture(scope="module")
def on_backends() -> tuple[np.ndarray, np.ndarray, dict]:
    bench = _bench()
    sys.path.insert(0, str(REPO / "tests"))
    from harness import require_tool

    require_tool("wgpu")
    require_tool("clang++")
    x, y = bench.inputs(1 << 22)
    return x, y, bench.on_backends(["msl", "wgsl", "spirv", "ptx"], x, y)


@pytest.mark.parametrize("backend", ["msl", "wgsl", "spirv", "ptx"])
@pytest.mark.parametrize("name", list(_bench().FUNCTIONS))
def test_each_backend_matches_the_shim(name: str, backend: str, on_backends: Any) -> None:
    bench = _bench()
    x, y, got = on_backends
    ulps, ratio, k = bench.errors(got[(backend, name)], bench.reference(name, x, y))
    assert ratio <= 1.0, f"{backend} {name}: {ratio:.3f} of the tolerance at index {k}"
    bound = BACKEND_ULP.get(name, BACKEND_ULP_DEFAULT)
    assert ulps <= bound, f"{backend} {name}: {ulps} ulp at x = {float(x[k])!r}"


INF, NAN = math.inf, math.nan


@pytest.mark.parametrize(
    ("fn", "x", "want"),
    [
        (nm.log1p, -1.0, -INF),
        (nm.log1p, -2.0, NAN),
        (nm.log1p, INF, INF),
        (nm.expm1, 1000.0, INF),
        (nm.expm1, -INF, -1.0),
        (nm.sinh, -1000.0, -INF),
        (nm.cosh, -1000.0, INF),
        (nm.erf, -INF, -1.0),
        (nm.erfc, -INF, 2.0),
        (nm.atan, INF, math.pi / 2),
        (nm.gelu_erf, -INF, 0.0),
        (nm.gelu_erf, INF, INF),
    ],
)
def test_the_shim_gives_ieee_answers_where_python_raises(fn: Any, x: float, want: float) -> None:
    got = fn(x)
    assert (math.isnan(got) and math.isnan(want)) or got == want


def test_atan2_keeps_the_signs_of_zeros() -> None:
    bench = _bench()
    cases = [(0.0, -0.0), (-0.0, -0.0), (0.0, 0.0), (-0.0, 0.0), (-0.0, -1.0), (1.0, -INF)]
    y = np.array([c[0] for c in cases], np.float32)
    x = np.array([c[1] for c in cases], np.float32)
    got = bench.run_helper(HELPERS["mimir_atan2"], [y, x])
    for (a, b), g in zip(cases, got, strict=True):
        want = math.atan2(a, b)
        assert float(g) == pytest.approx(want, rel=1e-7) and math.copysign(1, g) == math.copysign(
            1, want
        ), (a, b, g)
