"""`sort` / `argsort`: the shim against NumPy (ascending) and PyTorch (descending), on random
shapes with ties, NaNs and signed zeros; the codegen's refusal of unbounded or long axes.

NumPy's `argsort(kind="stable")` is the ascending reference (a NaN last); PyTorch's
`sort(descending=True, stable=True)` the descending one (a NaN first, equal keys in their
order). -0.0 and 0.0 are equal keys, so their order is their positions'.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mimir.array import float32, int32, tensor, topk, uint32
from mimir.codegen import compile_source

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)

SHAPES = st.lists(st.sampled_from([1, 2, 3, 5, 8]), min_size=1, max_size=3).map(tuple)
# few distinct values, so ties are common, and the values that order oddly
FLOATS = st.sampled_from([0.0, -0.0, 1.5, -1.5, 2.0, math.nan, math.inf, -math.inf, 1e-3])


@st.composite
def cases(draw):
    shape = draw(SHAPES)
    dtype = draw(st.sampled_from(["float32", "int32", "uint32"]))
    count = int(np.prod(shape))
    if dtype == "float32":
        items = FLOATS
    elif dtype == "int32":
        items = st.sampled_from([-(2**31), -3, 0, 0, 7, 2**31 - 1])
    else:
        items = st.sampled_from([0, 1, 1, 2**32 - 1])
    values = draw(st.lists(items, min_size=count, max_size=count))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    return np.array(values, dtype=dtype).reshape(shape), dtype, axis


def _tensor(values: np.ndarray, dtype: str):
    mdtype = {"float32": float32, "int32": int32, "uint32": uint32}[dtype]
    return tensor(values.tolist(), dtype=mdtype)


def _same(got, want: np.ndarray) -> None:
    got_arr = np.array(got.tolist(), dtype=want.dtype).reshape(want.shape)
    # bit for bit: NaN matches NaN, and -0.0 is told from 0.0 (which element landed where)
    assert got_arr.tobytes() == want.tobytes(), (got_arr.tolist(), want.tolist())


@SETTINGS
@given(cases())
def test_ascending_matches_numpy_stable(case) -> None:
    values, dtype, axis = case
    x = _tensor(values, dtype)
    order = np.argsort(values, axis=axis, kind="stable")
    _same(x.argsort(axis=axis), order.astype(np.int32))
    _same(x.sort(axis=axis), np.take_along_axis(values, order, axis=axis))
    assert x.argsort(axis=axis).dtype == int32 and x.sort(axis=axis).dtype == x.dtype


@SETTINGS
@given(cases())
def test_descending_matches_torch_stable(case) -> None:
    torch = pytest.importorskip("torch")
    values, dtype, axis = case
    x = _tensor(values, dtype)
    wide = values.astype(np.float64 if dtype == "float32" else np.int64)
    _, order = torch.sort(torch.from_numpy(wide), dim=axis, descending=True, stable=True)
    order = order.numpy()
    _same(x.argsort(axis=axis, descending=True), order.astype(np.int32))
    _same(x.sort(axis=axis, descending=True), np.take_along_axis(values, order, axis=axis))


@SETTINGS
@given(cases(), st.integers(1, 8), st.booleans())
def test_topk_matches_torch(case, k, largest) -> None:
    """Values as `torch.topk`'s; positions the stable sort's first k (`torch.topk` leaves
    the order of tied keys to its kernel)."""
    torch = pytest.importorskip("torch")
    values, dtype, axis = case
    k = min(k, values.shape[axis])
    x = _tensor(values, dtype)
    got_values, got_positions = topk(x, k, axis=axis, largest=largest)
    wide = torch.from_numpy(values.astype(np.float64 if dtype == "float32" else np.int64))
    want, _ = torch.topk(wide, k, dim=axis, largest=largest, sorted=True)
    want = want.numpy().astype(values.dtype)
    np.testing.assert_array_equal(np.array(got_values.tolist(), dtype=values.dtype), want)
    _, order = torch.sort(wide, dim=axis, descending=largest, stable=True)
    first = order.numpy().take(range(k), axis=axis).astype(np.int32)
    _same(got_positions, first)
    assert got_positions.dtype == int32 and got_values.dtype == x.dtype


def test_nan_last_ascending_first_descending_and_signed_zeros_keep_their_order() -> None:
    nan = math.nan
    x = tensor([[3.0, nan, -0.0, 0.0, 1.0, nan, -2.0]], dtype=float32)
    assert x.argsort().tolist() == [[6, 2, 3, 4, 0, 1, 5]]
    assert x.argsort(descending=True).tolist() == [[1, 5, 0, 4, 2, 3, 6]]
    y = tensor([0.0, -0.0], dtype=float32)
    assert [math.copysign(1, v) for v in y.sort().tolist()] == [1, -1]


SOURCE = """\
from mimir.array import Dim, Tensor, float32, gpu

N = Dim("N")
B = Dim("B", max=2048)
F = Dim("F", max=4096)


@gpu
def bounded(x: Tensor[float32, N, B]) -> Tensor[float32, N, B]:
    return x.sort()


@gpu
def unbounded(x: Tensor[float32, B, N]) -> Tensor[float32, B, N]:
    return x.sort(axis=1)


@gpu
def too_long(x: Tensor[float32, F]) -> Tensor[float32, F]:
    return x.sort()


@gpu
def literal(x: Tensor[float32, 3000]) -> Tensor[float32, 3000]:
    return x.argsort().astype(float32)
"""


@pytest.mark.parametrize(
    ("function", "words"),
    [
        ("unbounded", ["`.sort()` along axis 1 (size N) has no upper bound", 'Dim("N", max=2048)']),
        ("too_long", ["(size F) can be 4096 long", "at most 2048"]),
        ("literal", ["`.argsort()` along axis 0 (size 3000)", "at most 2048 elements"]),
    ],
)
def test_an_axis_without_a_bound_that_fits_is_refused_naming_the_fix(function, words) -> None:
    result = compile_source("s.py", SOURCE, ["all"], function=function)
    assert [d.code for d in result.diagnostics] == ["GPU071"]
    (d,) = result.diagnostics
    for w in words:
        assert w in d.message
    lines = SOURCE.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"def {function}("))
    assert d.span.line == start + 2  # the `return` line, 1-based
    assert result.files == {}


def test_an_axis_bounded_by_max_compiles_for_every_backend() -> None:
    result = compile_source("s.py", SOURCE, ["all"], function="bounded")
    assert result.ok
    wgsl = next(v for k, v in result.files.items() if k.endswith(".wgsl"))
    # 2048 u32 order keys and 2048 positions: 16 KiB, WebGPU's workgroup storage floor
    assert wgsl.count("array<u32, 2048>") == 2


ODD_FLOATS = [
    math.nan, 1e-45, -1e-45, 0.0, -0.0, math.inf, -math.inf, 1.0, -1.0, 1e-45, -0.0, math.nan,
    3.4e38, -3.4e38, 1.17e-38, 0.0,
]  # fmt: skip


def test_wgsl_sorts_subnormals_zeros_infinities_and_nans_as_the_shim(tmp_path) -> None:
    """Subnormals apart from 0.0 and from each other, -0.0 tied with 0.0, NaNs last: the
    kernel orders u32 keys, so a target that flushes subnormals cannot tie them."""
    import json
    import struct
    from pathlib import Path

    from harness import require_tool, write_files

    from mimir.runtime.verify import shim_reference
    from mimir.runtime.wgpu_runner import run_manifest

    require_tool("wgpu")
    path = Path(__file__).parent / "kernels" / "sorts.py"
    for function in ("sort_rows", "argsort_ties"):
        result = compile_source(str(path), path.read_text(), ["wgsl"], function=function)
        write_files(result.files, tmp_path / function)
        manifest = json.loads((tmp_path / function / f"{function}.manifest.json").read_text())
        dims = {"N": 2, "L": len(ODD_FLOATS)}
        inputs = {"x": ODD_FLOATS + list(reversed(ODD_FLOATS))}
        got = run_manifest(manifest, tmp_path / function, inputs, dims, {})["out"]
        want = shim_reference(path, function, inputs, dims, {})["out"]

        def bits(values: list) -> list:
            return [struct.pack("<f", v) if isinstance(v, float) else v for v in values]

        assert bits(got) == bits(want)
