"""PTX arithmetic the emitter prints in place of calls and IEEE sequences.

- `maximum`/`minimum` on float32 are printed where they are used (a compare, a select
  and a nan fix-up), not called: they must still give nan for a nan operand and, for
  `-0` against `+0`, the first operand, as the shim does;
- `sqrt` is one `sqrt.rn.f32` (nan below zero, `-0` kept);
- `/` is `div.full.f32` (2 ulp over the whole range) with fast math and `div.rn.f32`
  with `--math precise`; a division by a literal power of two is a multiply by its
  reciprocal in both modes, which is exact;
- `rsqrt` (which lowers to `1 / sqrt(x)`) is one `rsqrt.approx.f32` with fast math
  (CUDA's rsqrtf, within 2 ulp) and `sqrt.rn` then `div.rn` with `--math precise`;
- `x / sqrt(y)` is `x * rsqrt(y)` with fast math (within 3 ulp), and a row's square root
  read only as a divisor (RMS norm) is one rsqrt per row and a multiply per element.

Each kernel runs in the PTX interpreter and is compared with the shim bit for bit
(the sign of zero included), with inputs holding nan, infinities and signed zeros.
"""

from __future__ import annotations

import json
import math
import random
import re
import struct
from pathlib import Path
from typing import Any

import pytest
from harness import shim_reference
from harness.ptx_interp import run_ptx_manifest_cpu

from mimir.codegen import compile_source

SOURCE = """\
from mimir.array import Dim, Tensor, float32, gpu, maximum, minimum

N = Dim("N")
M = Dim("M")
D = Dim("D")


@gpu
def extrema(a: Tensor[float32, N], b: Tensor[float32, N]) -> Tensor[float32, N]:
    return maximum(a, b) * 2.0 + minimum(a, b)


@gpu
def larger(a: Tensor[float32, N], b: Tensor[float32, N]) -> Tensor[float32, N]:
    return maximum(a, b)


@gpu
def smaller(a: Tensor[float32, N], b: Tensor[float32, N]) -> Tensor[float32, N]:
    return minimum(a, b)


@gpu
def root(a: Tensor[float32, N]) -> Tensor[float32, N]:
    return a.sqrt()


@gpu
def reciprocal_root(a: Tensor[float32, N]) -> Tensor[float32, N]:
    return a.rsqrt()


@gpu
def quarter(a: Tensor[float32, N]) -> Tensor[float32, N]:
    return a / 4.0


@gpu
def tiny_divisor(a: Tensor[float32, N]) -> Tensor[float32, N]:
    return a / 1.1754943508222875e-38


@gpu
def ratio(a: Tensor[float32, N], b: Tensor[float32, N]) -> Tensor[float32, N]:
    return a / b


@gpu
def over_root(a: Tensor[float32, N], b: Tensor[float32, N]) -> Tensor[float32, N]:
    return a / b.sqrt()


@gpu
def rms(x: Tensor[float32, M, D]) -> Tensor[float32, M, D]:
    return x / ((x * x).mean(axis=-1, keepdims=True) + 1e-6).sqrt()


@gpu
def shares(x: Tensor[float32, M, D]) -> Tensor[float32, M, D]:
    return x / x.sum(axis=-1, keepdims=True)
"""

SPECIALS = [math.nan, -0.0, 0.0, 1.5, -2.0, math.inf, -math.inf, 3.0, -0.0, 0.0, 2.0, -1.0]
OTHERS = [1.0, 0.0, -0.0, math.nan, -2.0, 5.0, -math.inf, math.inf, 0.0, -0.0, 2.0, -1.0]
DIMS = {"N": len(SPECIALS)}


def _bits(values: list[float]) -> list[int]:
    """float32 bits, every nan as one pattern (the shim's and PTX's payloads may differ)."""
    return [0x7FC00000 if math.isnan(v) else struct.unpack("<I", struct.pack("<f", v))[0]
            for v in values]  # fmt: skip


def _compile(tmp_path: Path, function: str, math_mode: str) -> tuple[dict[str, Any], str]:
    source = tmp_path / "arith.py"
    source.write_text(SOURCE)
    result = compile_source(str(source), SOURCE, ["ptx"], function, math=math_mode)
    assert result.ok, [(d.code, d.message) for d in result.diagnostics]
    out = tmp_path / math_mode / "ptx"
    ptx = ""
    for relative, content in result.files.items():
        (out / relative).parent.mkdir(parents=True, exist_ok=True)
        (out / relative).write_text(content)
        if relative.endswith(".ptx"):
            ptx += content
    manifest = json.loads((out / f"{function}.manifest.json").read_text())
    return manifest, ptx


def _run(tmp_path: Path, function: str, math_mode: str) -> tuple[list[float], list[float], str]:
    manifest, ptx = _compile(tmp_path, function, math_mode)
    names = [b["name"] for b in manifest["buffers"] if b["role"] == "input"]
    inputs = dict(zip(names, [SPECIALS, OTHERS], strict=False))
    expected = shim_reference(tmp_path / "arith.py", function, inputs, DIMS)["out"]
    actual = run_ptx_manifest_cpu(manifest, tmp_path / math_mode / "ptx", inputs, DIMS)["out"]
    return actual, expected, ptx


@pytest.mark.parametrize("math_mode", ["fast", "precise"])
@pytest.mark.parametrize("function", ["extrema", "larger", "smaller", "root"])
def test_inlined_helpers_match_the_shim_bit_for_bit(
    function: str, math_mode: str, tmp_path: Path
) -> None:
    actual, expected, ptx = _run(tmp_path, function, math_mode)
    assert ".func" not in ptx and "call" not in ptx, "the helper was called, not inlined"
    rows = list(zip(SPECIALS, OTHERS, actual, expected, strict=True))
    assert _bits(actual) == _bits(expected), rows


def test_signed_zeros_keep_the_first_operand(tmp_path: Path) -> None:
    """maximum(-0, +0) is -0 and maximum(+0, -0) is +0 (the first of two equal operands):
    `max.f32` alone would not say which zero, so the select must come from a compare."""
    actual, _, _ = _run(tmp_path, "larger", "fast")
    assert math.copysign(1.0, actual[1]) == -1.0 and math.copysign(1.0, actual[2]) == 1.0
    assert math.isnan(actual[0]) and math.isnan(actual[3])


@pytest.mark.parametrize(
    ("function", "math_mode", "opcode"),
    [
        ("ratio", "fast", "div.full.f32"),
        ("ratio", "precise", "div.rn.f32"),
        ("quarter", "fast", "mul.rn.f32"),
        ("quarter", "precise", "mul.rn.f32"),
        ("tiny_divisor", "precise", "mul.rn.f32"),
    ],
)
def test_division_opcodes(function: str, math_mode: str, opcode: str, tmp_path: Path) -> None:
    actual, expected, ptx = _run(tmp_path, function, math_mode)
    divisions = re.findall(r"^\s*(div\.\w+\.f32|mul\.rn\.f32)\b", ptx, re.M)
    assert divisions and set(divisions) == {opcode}, divisions
    # modelled correctly rounded (div.full within 2 ulp on the GPU), so equal to the shim
    assert _bits(actual) == _bits(expected)


def test_a_divisor_whose_reciprocal_is_subnormal_stays_a_division(tmp_path: Path) -> None:
    """1 / 2^127 is subnormal in float32: no exact reciprocal to multiply by."""
    source = SOURCE + (
        "\n\n@gpu\ndef huge_divisor(a: Tensor[float32, N]) -> Tensor[float32, N]:\n"
        "    return a / 1.7014118346046923e38\n"
    )
    path = tmp_path / "huge.py"
    path.write_text(source)
    result = compile_source(str(path), source, ["ptx"], "huge_divisor", math="precise")
    assert result.ok
    (ptx,) = [c for r, c in result.files.items() if r.endswith(".ptx")]
    assert "div.rn.f32" in ptx and "0f00400000" not in ptx


ROOTS = [math.nan, -0.0, 0.0, 1.5, -2.0, math.inf, -math.inf, 3.0, 1e-40, 3e38, 2.0, 0.3]


@pytest.mark.parametrize(
    ("math_mode", "opcodes"),
    [("fast", ["rsqrt.approx.f32"]), ("precise", ["sqrt.rn.f32", "div.rn.f32"])],
)
def test_reciprocal_square_root(math_mode: str, opcodes: list[str], tmp_path: Path) -> None:
    """Special values exactly as the shim (nan below 0, -inf at -0, +inf at +0, 0 at
    +inf), a subnormal argument kept (no `.ftz`), finite results within 2 ulp (the
    interpreter models rsqrt.approx correctly rounded; the shim rounds twice)."""
    manifest, ptx = _compile(tmp_path, "reciprocal_root", math_mode)
    found = re.findall(r"^\s*((?:rsqrt|sqrt|div)\.[\w.]+)", ptx, re.M)
    assert found and set(found) == set(opcodes), found
    inputs, dims = {"a": ROOTS}, {"N": len(ROOTS)}
    expected = shim_reference(tmp_path / "arith.py", "reciprocal_root", inputs, dims)["out"]
    folder = tmp_path / math_mode / "ptx"
    actual = run_ptx_manifest_cpu(manifest, folder, inputs, dims)["out"]
    for x, a, e in zip(ROOTS, actual, expected, strict=True):
        if not math.isfinite(e) or e == 0:
            assert _bits([a]) == _bits([e]), (x, a, e)
        else:
            assert abs(_bits([a])[0] - _bits([e])[0]) <= 2, (x, a, e)
    assert math.isfinite(actual[8]) and actual[8] > 1e19  # 1/sqrt(1e-40) = 1e20


def _within(actual: list[float], expected: list[float], ulps: int) -> None:
    """Non-finite results and zeros bit for bit (signs included), others within `ulps`."""
    for a, e in zip(actual, expected, strict=True):
        if not math.isfinite(e) or e == 0:
            assert _bits([a]) == _bits([e]), (a, e)
        else:
            assert abs(_bits([a])[0] - _bits([e])[0]) <= ulps, (a, e)


@pytest.mark.parametrize(
    ("math_mode", "opcodes"),
    [("fast", ["rsqrt.approx.f32"]), ("precise", ["sqrt.rn.f32", "div.rn.f32"])],
)
def test_a_division_by_a_square_root(math_mode: str, opcodes: list[str], tmp_path: Path) -> None:
    """x / sqrt(y) is x * rsqrt(y) with fast math: the special values of the division
    (nan for 0 / sqrt(0), inf / sqrt(inf) and below 0; -0 / sqrt(1) is -0; x / sqrt(-0) is
    an infinity of the opposite sign), finite results within 3 ulp."""
    actual, expected, ptx = _run(tmp_path, "over_root", math_mode)
    found = re.findall(r"^\s*((?:rsqrt|sqrt|div)\.[\w.]+)", ptx, re.M)
    assert found and set(found) == set(opcodes), found
    _within(actual, expected, 3 if math_mode == "fast" else 0)


def test_a_rows_total_read_only_as_a_divisor_is_one_reciprocal_a_row(tmp_path: Path) -> None:
    """`x / x.sum(axis=-1, keepdims=True)` under fast math: `1 / total` once per row in each
    of the kernel's paths (`div.full.f32` of 1.0) and a multiply per element, within 3 ulp
    of the division; a row summing to 0, to inf or to nan gives the division's special
    values bit for bit. Precise math divides each element (`div.rn`)."""
    manifest, ptx = _compile(tmp_path, "shares", "fast")
    inverses = ptx.count("div.full.f32")
    assert inverses and ptx.count(", 0f3F800000, ") == inverses, ptx
    _, precise = _compile(tmp_path, "shares", "precise")
    assert "div.full" not in precise and "div.rn.f32" in precise
    rng = random.Random(16)
    for dims in ({"M": 4, "D": 1024}, {"M": 4, "D": 1030}, {"M": 4, "D": 7}):
        d = dims["D"]
        x = [rng.uniform(0.5, 4) for _ in range(dims["M"] * d)]
        x[d : 2 * d] = [0.0] * d  # 0 / 0: nan
        x[d] = -0.0
        x[2 * d + 1] = math.inf  # inf / inf and x / inf
        x[3 * d] = math.nan
        expected = shim_reference(tmp_path / "arith.py", "shares", {"x": x}, dims)["out"]
        actual = run_ptx_manifest_cpu(manifest, tmp_path / "fast" / "ptx", {"x": x}, dims)
        assert any(math.isnan(v) for v in expected) and any(v == 0 for v in expected)
        _within(actual["out"], expected, 3)


def test_a_rows_square_root_read_as_a_divisor_is_one_rsqrt_a_row(tmp_path: Path) -> None:
    """RMS norm's `x / sqrt(mean(x * x) + eps)`: the row's rsqrt once in each of the
    kernel's paths, a multiply for each element, and the only division the mean's."""
    manifest, ptx = _compile(tmp_path, "rms", "fast")
    assert "sqrt.rn" not in ptx
    paths = ptx.count("rsqrt.approx.f32")
    assert paths and ptx.count("div.full.f32") == paths, ptx  # mean = sum / D, per path
    rng = random.Random(15)
    for dims in ({"M": 3, "D": 1024}, {"M": 2, "D": 1030}, {"M": 2, "D": 7}):
        x = [rng.uniform(-4, 4) for _ in range(dims["M"] * dims["D"])]
        x[5] = 0.0
        expected = shim_reference(tmp_path / "arith.py", "rms", {"x": x}, dims)["out"]
        actual = run_ptx_manifest_cpu(manifest, tmp_path / "fast" / "ptx", {"x": x}, dims)
        _within(actual["out"], expected, 4)
