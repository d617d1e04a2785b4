"""Sizes that reach a `u32`: dims in uniform fields, element counts, the grid.

A compiled kernel holds each dim in a `u32` uniform field and indexes with 32-bit integers.
The compiler refuses (GPU071) a kernel when some admissible binding of its dims makes one of
those sizes exceed 2**32 - 1, derived sizes (products) included; with an unbounded dim the
runtime refuses the launch instead.
"""

from __future__ import annotations

import pytest

from mimir.codegen import compile_source
from mimir.codegen.backends import BACKENDS
from mimir.runtime import manifest as mf

HEADER = "from mimir.array import Dim, Tensor, float32, gpu, program_id\n\n"
BIG = 2**64


def _compile(text: str):
    return compile_source("k.py", HEADER + text, list(BACKENDS))


def _refusal(text: str) -> str:
    result = _compile(text)
    assert [d.code for d in result.diagnostics] == ["GPU071"], result.diagnostics
    assert result.files == {}
    return result.diagnostics[0].message


def test_a_dim_that_never_fits_a_u32_is_refused() -> None:
    message = _refusal(
        f'B = Dim("B", min={BIG}, max={BIG})\n\n\n'
        "@gpu\ndef big(x: Tensor[float32, B]) -> Tensor[float32, B]:\n    return x * 2.0\n"
    )
    assert f"dim `B` can be {BIG}, more than its u32 uniform field holds" in message


def test_a_dim_whose_max_exceeds_a_u32_is_refused() -> None:
    message = _refusal(
        f'B = Dim("B", max={2**32})\n\n\n'
        "@gpu\ndef big(x: Tensor[float32, B]) -> Tensor[float32, B]:\n    return x * 2.0\n"
    )
    assert f"dim `B` can be {2**32}" in message


def test_a_literal_size_past_a_u32_is_still_refused() -> None:
    message = _refusal(
        f"@gpu\ndef big(x: Tensor[float32, {BIG}]) -> Tensor[float32, {BIG}]:\n    return x * 2.0\n"
    )
    assert f"`x` can have {BIG} elements" in message


@pytest.mark.parametrize(("limit", "fits"), [(65535, True), (65536, False), (100000, False)])
def test_a_product_of_dims_must_fit(limit: int, fits: bool) -> None:
    text = (
        f'N = Dim("N", max={limit})\nM = Dim("M", max={limit})\n\n\n'
        "@gpu\ndef grid2d(x: Tensor[float32, N, M]) -> Tensor[float32, N, M]:\n"
        "    return x * 2.0\n"
    )
    if fits:
        assert _compile(text).diagnostics == []
    else:
        message = _refusal(text)
        assert f"`x` can have N*M = {limit * limit} elements" in message


def test_an_index_level_kernel_is_held_to_the_same_limit() -> None:
    message = _refusal(
        'N = Dim("N", max=100000)\nM = Dim("M", max=100000)\n\n\n'
        "@gpu(grid=(N, M))\n"
        "def scale(x: Tensor[float32, N, M], out: Tensor[float32, N, M]):\n"
        "    i = program_id(0)\n    j = program_id(1)\n    out[i, j] = x[i, j] * 2.0\n"
    )
    assert "`x` can have N*M = 10000000000 elements" in message


def test_unbounded_dims_compile_and_the_launch_checks_them() -> None:
    result = _compile(
        'N = Dim("N")\nM = Dim("M")\n\n\n'
        "@gpu\ndef grid2d(x: Tensor[float32, N, M]) -> Tensor[float32, N, M]:\n"
        "    return x * 2.0\n"
    )
    assert result.diagnostics == []
    import json

    manifest = json.loads(result.files["wgsl/grid2d.manifest.json"])
    mf.check_dims(manifest, {"N": 3, "M": 5})
    with pytest.raises(mf.ManifestError, match="does not fit its u32 uniform field"):
        mf.check_dims(manifest, {"N": 2**32, "M": 1})
    with pytest.raises(mf.ManifestError, match="would have 4294967296 elements"):
        mf.check_dims(manifest, {"N": 2**16, "M": 2**16})
