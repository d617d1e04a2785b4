"""Tensor cores: `@gpu(precision="tf32")` (the shim's TF32 rounding) and float16 / bfloat16
matmuls; the PTX interpreter's `mma.sync` (m16n8k8 .tf32 and m16n8k16 .f16 / .bf16), and
that a tensor-core kernel with a wrong fragment mapping or without its operand rounding
fails against the shim (the zoo runs, `tests/kernels/tensor_cores.py` and
`tests/kernels/tensor_cores_half.py`, are in `test_ptx_exec.py` and
`test_backends_exec.py`)."""

from __future__ import annotations

import json
import random
import re
import struct
from pathlib import Path

import pytest
from harness import random_inputs, shim_reference
from harness.ptx_interp import (
    _ALU,
    PtxInterpError,
    _mma_m16n8k8,
    _mma_m16n8k16,
    _tf32_bits,
    _to_bf16_rn,
    _to_f16_rn,
    run_ptx_manifest_cpu,
)
from test_backends_exec import KERNELS, _compare, _dims
from test_ptx_exec import compiled_ptx

from mimir.array import MimirError, Tensor, einsum, float32, gpu, tensor
from mimir.codegen import compile_source
from mimir.codegen.manifest import validate_manifest
from mimir.ops.numerics import tf32


def _f32(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def _bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


# ---------------------------------------------------------------- the rounding


@pytest.mark.parametrize(
    ("bits", "want"),
    [
        (0x3F800000, 0x3F800000),  # 1.0: already TF32
        (0x3F800FFF, 0x3F800000),  # below the half-way point: down
        (0x3F801000, 0x3F802000),  # exactly half-way: away from zero
        (0xBF801000, 0xBF802000),  # ... for a negative value too
        (0x3F803000, 0x3F804000),  # half-way above an odd TF32 value: away, not to even
        (0x3F801001, 0x3F802000),  # above half-way: up
        (0x3FFFF000, 0x40000000),  # the carry goes into the exponent
        (0x7F7FFFFF, 0x7F800000),  # the largest float rounds away, to infinity
        (0x00000FFF, 0x00000000),  # subnormals round on the same bits
        (0x80001000, 0x80002000),
    ],
)
def test_tf32_rounds_to_nearest_ties_away_as_cvt_rna(bits: int, want: int) -> None:
    assert _bits(tf32(_f32(bits))) == want
    assert _tf32_bits(_f32(bits)) == want  # the interpreter's `cvt.rna.tf32.f32`


def test_tf32_keeps_nan_and_infinities() -> None:
    assert tf32(float("inf")) == float("inf") and tf32(float("-inf")) == float("-inf")
    assert tf32(float("nan")) != tf32(float("nan"))


@gpu(precision="tf32")
def _tf32_mm(a: Tensor[float32, 2, 2], b: Tensor[float32, 2, 2]) -> Tensor[float32, 2, 2]:
    return a @ b


@gpu
def _exact_mm(a: Tensor[float32, 2, 2], b: Tensor[float32, 2, 2]) -> Tensor[float32, 2, 2]:
    return a @ b


@gpu(precision="tf32")
def _tf32_einsum(a: Tensor[float32, 2, 2], b: Tensor[float32, 2, 2]) -> Tensor[float32, 2, 2]:
    return einsum("ij,jk->ik", a, b)


@gpu(precision="tf32")
def _tf32_product(a: Tensor[float32, 2, 2], b: Tensor[float32, 2, 2]) -> Tensor[float32, 2, 2]:
    return a * b  # not a matmul: exact float32


@gpu(precision="tf64")
def _bad(a: Tensor[float32, 2, 2]) -> Tensor[float32, 2, 2]:
    return a


def test_the_shim_rounds_matmul_operands_to_tf32_only_where_asked() -> None:
    x = 1 + 2**-12  # TF32 drops it: 1.0
    a = tensor([[x, 0.0], [0.0, 1.0]], dtype=float32).to("gpu")
    b = tensor([[x, 0.0], [0.0, 1.0]], dtype=float32).to("gpu")
    assert _tf32_mm(a, b).tolist()[0][0] == 1.0
    assert _tf32_einsum(a, b).tolist()[0][0] == 1.0
    exact = _f32(_bits(x * x))  # the exact product, rounded once to float32
    assert _exact_mm(a, b).tolist()[0][0] == exact != 1.0
    assert _tf32_product(a, b).tolist()[0][0] == exact
    assert (a @ b).tolist()[0][0] == exact  # outside a kernel: float32


def test_the_shim_refuses_an_unknown_precision() -> None:
    a = tensor([[1.0, 0.0], [0.0, 1.0]], dtype=float32).to("gpu")
    with pytest.raises(MimirError, match="GPU036"):
        _bad(a)


# ---------------------------------------------------------------- the interpreter's mma


def _fragments(a: list[list[float]], b: list[list[float]], c: list[list[float]], mapping):
    """Each lane's (a, b, c) fragments of A (16x8), B (8x8), C (16x8) under `mapping`."""
    lanes = []
    for lane in range(32):
        g, q = lane >> 2, lane & 3
        rows_a, rows_b, rows_c = mapping(g, q)
        lanes.append(
            (
                [_f32(_tf32_bits(a[r][k])) for r, k in rows_a],
                [_f32(_tf32_bits(b[k][n])) for k, n in rows_b],
                [c[r][n] for r, n in rows_c],
            )
        )
    return lanes


def _isa(g: int, q: int):
    """The PTX ISA's m16n8k8 .tf32 layout (section "Matrix Fragments for mma.m16n8k8")."""
    a = [(g, q), (g + 8, q), (g, q + 4), (g + 8, q + 4)]
    b = [(q, g), (q + 4, g)]
    c = [(g, 2 * q), (g, 2 * q + 1), (g + 8, 2 * q), (g + 8, 2 * q + 1)]
    return a, b, c


def _swapped_a(g: int, q: int):
    """A mapping with a1 and a2 exchanged (the f16 layout's order): wrong for .tf32."""
    a, b, c = _isa(g, q)
    return [a[0], a[2], a[1], a[3]], b, c


def _matrices(seed: int):
    rng = random.Random(seed)
    a = [[tf32(rng.uniform(-1, 1)) for _ in range(8)] for _ in range(16)]
    b = [[tf32(rng.uniform(-1, 1)) for _ in range(8)] for _ in range(8)]
    c = [[_f32(_bits(rng.uniform(-1, 1))) for _ in range(8)] for _ in range(16)]
    want = [
        [c[i][j] + sum(a[i][k] * b[k][j] for k in range(8)) for j in range(8)] for i in range(16)
    ]
    return a, b, c, want


def test_mma_puts_the_matrices_together_as_the_ptx_isa_lays_them_out() -> None:
    a, b, c, want = _matrices(1)
    d = _mma_m16n8k8(_fragments(a, b, c, _isa))
    for lane in range(32):
        _, _, positions = _isa(lane >> 2, lane & 3)
        for v, (i, j) in zip(d[lane], positions, strict=True):
            assert v == pytest.approx(want[i][j], abs=1e-6)


def test_a_wrong_fragment_mapping_gives_a_wrong_product() -> None:
    a, b, c, want = _matrices(2)
    d = _mma_m16n8k8(_fragments(a, b, c, _swapped_a))
    errors = [
        abs(v - want[i][j])
        for lane in range(32)
        for v, (i, j) in zip(d[lane], _isa(lane >> 2, lane & 3)[2], strict=True)
    ]
    assert max(errors) > 0.1


def test_mma_reads_only_the_tf32_bits_of_its_operands() -> None:
    """An operand not rounded by `cvt.rna.tf32.f32` is truncated, as the hardware reads it."""
    a = [[0.0] * 8 for _ in range(16)]
    b = [[0.0] * 8 for _ in range(8)]
    c = [[0.0] * 8 for _ in range(16)]
    lanes = _fragments(a, b, c, _isa)
    lanes[0][0][0] = 1 + 2**-11 + 2**-20  # A[0][0], unrounded (cvt would give 1 + 2**-10)
    lanes[0][1][0] = 1.0  # B[0][0]
    assert _mma_m16n8k8(lanes)[0][0] == 1.0


# ---------------------------------------------------------------- the m16n8k16 mma (halves)


def _half(kind: str, x: float) -> int:
    """x's bits in `kind` (x exact in it)."""
    return _to_f16_rn(x) if kind == "f16" else _to_bf16_rn(x)


def _isa16(g: int, q: int):
    """The PTX ISA's m16n8k16 .f16 / .bf16 layout ("Matrix Fragments for mma.m16n8k16 with
    floating point type"): (row, col) of a0..a7, b0..b3, c0..c3."""
    a = [(g + 8 * (i >> 1 & 1), 2 * q + (i & 1) + 8 * (i >> 2)) for i in range(8)]
    b = [(2 * q + (i & 1) + 8 * (i >> 1), g) for i in range(4)]
    c = [(g, 2 * q), (g, 2 * q + 1), (g + 8, 2 * q), (g + 8, 2 * q + 1)]
    return a, b, c


def _k16_swapped_rows(g: int, q: int):
    """a2, a3 exchanged with a4, a5 (rows and k-halves mixed up): wrong."""
    a, b, c = _isa16(g, q)
    return [a[0], a[1], a[4], a[5], a[2], a[3], a[6], a[7]], b, c


def _k16_fragments(kind: str, a, b, c, mapping):
    """Each lane's (a, b, c) fragments under `mapping`, two halves to a `.b32` register (the
    lower index in the low half)."""
    lanes = []
    for lane in range(32):
        rows_a, rows_b, rows_c = mapping(lane >> 2, lane & 3)
        av = [_half(kind, a[r][k]) for r, k in rows_a]
        bv = [_half(kind, b[k][n]) for k, n in rows_b]
        lanes.append(
            (
                [av[i] | av[i + 1] << 16 for i in range(0, 8, 2)],
                [bv[i] | bv[i + 1] << 16 for i in range(0, 4, 2)],
                [c[r][n] for r, n in rows_c],
            )
        )
    return lanes


def _k16_matrices(kind: str, seed: int):
    rng = random.Random(seed)

    def value() -> float:  # exact in both types: a few bits of mantissa
        return rng.randint(-64, 64) / 32

    a = [[value() for _ in range(16)] for _ in range(16)]
    b = [[value() for _ in range(8)] for _ in range(16)]
    c = [[_f32(_bits(rng.uniform(-1, 1))) for _ in range(8)] for _ in range(16)]
    want = [
        [c[i][j] + sum(a[i][k] * b[k][j] for k in range(16)) for j in range(8)] for i in range(16)
    ]
    return a, b, c, want


@pytest.mark.parametrize("kind", ["f16", "bf16"])
def test_k16_mma_puts_the_matrices_together_as_the_ptx_isa_lays_them_out(kind: str) -> None:
    a, b, c, want = _k16_matrices(kind, 1)
    d = _mma_m16n8k16(_k16_fragments(kind, a, b, c, _isa16), kind)
    for lane in range(32):
        for v, (i, j) in zip(d[lane], _isa16(lane >> 2, lane & 3)[2], strict=True):
            # the products are exact and so is their sum here (few bits): only C's float32
            # rounding of the total
            assert v == pytest.approx(want[i][j], abs=1e-6)


@pytest.mark.parametrize("kind", ["f16", "bf16"])
@pytest.mark.parametrize("mapping", [_k16_swapped_rows, _isa])
def test_a_wrong_k16_fragment_mapping_gives_a_wrong_product(kind: str, mapping) -> None:
    """A rows-swapped layout, and the TF32 m16n8k8 one, both fail against the ISA's."""
    a, b, c, want = _k16_matrices(kind, 2)
    if mapping is _isa:  # m16n8k8's (k < 8) positions, padded to 8 and 4 elements

        def mapping(g: int, q: int):
            ra, rb, rc = _isa(g, q)
            return [*ra, *ra], [*rb, *rb], rc

    d = _mma_m16n8k16(_k16_fragments(kind, a, b, c, mapping), kind)
    errors = [
        abs(v - want[i][j])
        for lane in range(32)
        for v, (i, j) in zip(d[lane], _isa16(lane >> 2, lane & 3)[2], strict=True)
    ]
    assert max(errors) > 0.1


def test_k16_mma_reads_the_halves_of_its_type() -> None:
    """The same bits are 1.0 as float16 (0x3C00) and 1.0 as bfloat16 (0x3F80): each kind
    decodes its own, the low half first."""
    zero_a = [[0.0] * 16 for _ in range(16)]
    zero_b = [[0.0] * 8 for _ in range(16)]
    zero_c = [[0.0] * 8 for _ in range(16)]
    for kind, one in (("f16", 0x3C00), ("bf16", 0x3F80)):
        lanes = _k16_fragments(kind, zero_a, zero_b, zero_c, _isa16)
        lanes[0][0][0] = one  # A[0][0] = 1 (low half), A[0][1] = 0
        lanes[0][1][0] = one << 16  # B[1][0] = 1 (high half): A[0][1] * B[1][0] = 0
        assert _mma_m16n8k16(lanes, kind)[0][0] == 0.0
        lanes[0][1][0] = one  # B[0][0] = 1
        assert _mma_m16n8k16(lanes, kind)[0][0] == 1.0


def test_cvt_packs_the_first_source_into_the_upper_half() -> None:
    assert _ALU["cvt.rn.f16x2.f32"](2.0, 1.0) == 0x4000 << 16 | 0x3C00
    assert _ALU["cvt.rn.bf16x2.f32"](2.0, 1.0) == 0x4000 << 16 | 0x3F80
    # rounding to nearest, ties to even, on bfloat16's 16 dropped bits
    assert _to_bf16_rn(_f32(0x3F808000)) == 0x3F80  # tie, even below
    assert _to_bf16_rn(_f32(0x3F818000)) == 0x3F82  # tie, even above
    assert _to_bf16_rn(_f32(0x3F808001)) == 0x3F81


# ---------------------------------------------------------------- the emitted kernels


def _run(folder: Path, manifest: dict, dims: dict[str, int], seed: int) -> dict[str, list]:
    inputs = random_inputs(manifest, dims, seed=seed)
    return run_ptx_manifest_cpu(manifest, folder, inputs, dims), inputs


TF32_MMA = "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"


def _mutated(folder: Path, manifest: dict, edit, mma: str = TF32_MMA) -> None:
    for kernel in manifest["kernels"]:
        path = folder / kernel["file"]
        text = path.read_text()
        if "_matmul" not in kernel["file"]:
            continue
        assert mma in text
        edited = edit(text)
        assert edited != text, "the mutation changed nothing"
        path.write_text(edited)


def _caught(
    folder: Path, manifest: dict, function: str, seed: int = 3, stem: str = "tensor_cores"
) -> None:
    dims = _dims(manifest, "small")
    actual, inputs = _run(folder, manifest, dims, seed)
    expected = shim_reference(KERNELS / f"{stem}.py", function, inputs, dims, None)
    with pytest.raises(AssertionError, match="values differ"):
        _compare(manifest, actual, expected, stem, function, dims)


def test_the_tf32_kernel_matches_the_shim_and_uses_tensor_cores(tmp_path: Path) -> None:
    manifest = compiled_ptx("tensor_cores", "linear_tf32_tiles", tmp_path)
    validate_manifest(manifest)
    assert manifest["precision"] == {"requested": "tf32", "matmul": "tf32"}
    text = (tmp_path / manifest["kernels"][0]["file"]).read_text()
    assert ".target sm_80" in text and "cp.async" in text
    assert text.count("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32") == 16
    assert text.count("cvt.rna.tf32.f32") == 24  # 4 x 4 of A and 4 x 2 of B per k-slice
    assert "fma.rn.f32" not in text  # no scalar products left
    dims = _dims(manifest, "small")
    actual, inputs = _run(tmp_path, manifest, dims, 4)
    expected = shim_reference(KERNELS / "tensor_cores.py", "linear_tf32_tiles", inputs, dims, None)
    _compare(manifest, actual, expected, "tensor_cores", "linear_tf32_tiles", dims)


def test_paired_products_both_run_on_tensor_cores_in_one_launch(tmp_path: Path) -> None:
    """SwiGLU's two products of x share one launch: each k-slice issues the 16 `mma.sync`
    of the gate's tile, then (in the second loop over k) the 16 of the up projection's."""
    manifest = compiled_ptx("tensor_cores", "gated_tf32", tmp_path)
    (kernel,) = manifest["kernels"]
    text = (tmp_path / kernel["file"]).read_text()
    assert text.count("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32") == 32
    dims = _dims(manifest, "small")
    actual, inputs = _run(tmp_path, manifest, dims, 5)
    expected = shim_reference(KERNELS / "tensor_cores.py", "gated_tf32", inputs, dims, None)
    _compare(manifest, actual, expected, "tensor_cores", "gated_tf32", dims)


def test_a_wrong_a_fragment_order_is_caught(tmp_path: Path) -> None:
    manifest = compiled_ptx("tensor_cores", "matmul_tf32", tmp_path)

    def swap(text: str) -> str:  # a1 <-> a2 in every mma: the f16 layout's order
        return re.sub(
            r"(\.f32 \{[^}]*\}, \{)(%r\d+), (%r\d+), (%r\d+), (%r\d+)\}",
            r"\1\2, \4, \3, \5}",
            text,
        )

    _mutated(tmp_path, manifest, swap)
    _caught(tmp_path, manifest, "matmul_tf32")


def test_a_wrong_b_fragment_order_is_caught(tmp_path: Path) -> None:
    manifest = compiled_ptx("tensor_cores", "matmul_tf32", tmp_path)

    def swap(text: str) -> str:  # b0 <-> b1
        return re.sub(r"(\}, \{)(%r\d+), (%r\d+)(\}, \{%f)", r"\1\3, \2\4", text)

    _mutated(tmp_path, manifest, swap)
    _caught(tmp_path, manifest, "matmul_tf32")


def test_a_wrong_accumulator_order_is_caught(tmp_path: Path) -> None:
    manifest = compiled_ptx("tensor_cores", "matmul_tf32", tmp_path)

    def swap(text: str) -> str:  # c1 <-> c2 (and d): rows and columns of the result mixed
        return re.sub(
            r"\{(%f\d+), (%f\d+), (%f\d+), (%f\d+)\}",
            r"{\1, \3, \2, \4}",
            text,
        )

    _mutated(tmp_path, manifest, swap)
    _caught(tmp_path, manifest, "matmul_tf32")


def test_operands_not_rounded_to_tf32_are_caught(tmp_path: Path) -> None:
    """Without `cvt.rna.tf32.f32` the tensor core truncates: the kernel no longer matches the
    shim's rounding at the float32 tolerance."""
    manifest = compiled_ptx("tensor_cores", "linear_tf32_tiles", tmp_path)
    _mutated(tmp_path, manifest, lambda t: t.replace("cvt.rna.tf32.f32", "mov.b32"))
    _caught(tmp_path, manifest, "linear_tf32_tiles", seed=4)


F16_MMA = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
BF16_MMA = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"


def test_a_float16_matmul_runs_on_tensor_cores_by_default(tmp_path: Path) -> None:
    manifest = compiled_ptx("tensor_cores_half", "linear_gelu_f16_tiles", tmp_path)
    validate_manifest(manifest)
    assert "precision" not in manifest  # nothing asked for: the products are exact
    text = (tmp_path / manifest["kernels"][0]["file"]).read_text()
    assert ".target sm_80" in text
    # a 16-deep k-slice: 16 mma of 16 x 8 x 16, their fragments read from tiles of halves
    # by 4 ldmatrix.x4 (A) and 2 ldmatrix.x4.trans (B); K and N even: the tiles filled with
    # 4-byte cp.async of packed pairs (8 words a thread, before the loop and in it), no
    # repacking
    assert text.count(F16_MMA) == 16 and "tf32" not in text
    assert text.count("ldmatrix.sync.aligned.m8n8.x4.shared.b16") == 4
    assert text.count("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16") == 2
    assert text.count("cp.async.ca.shared.global") == 16 and text.count(", 4;") >= 16
    assert "cvt.rn.f16x2.f32" not in text and "ld.shared" not in text
    dims = _dims(manifest, "small")
    actual, inputs = _run(tmp_path, manifest, dims, 4)
    function = "linear_gelu_f16_tiles"
    expected = shim_reference(KERNELS / "tensor_cores_half.py", function, inputs, dims, None)
    _compare(manifest, actual, expected, "tensor_cores_half", function, dims)


def test_bfloat16_and_paired_float16_products_use_their_own_mma(tmp_path: Path) -> None:
    bmm = compiled_ptx("tensor_cores_half", "bmm_bf16", tmp_path / "bmm")
    text = (tmp_path / "bmm" / bmm["kernels"][0]["file"]).read_text()
    # K, N unknown: two k loops, one copying the packed words as they are (K and N even at
    # run time), one packing each from two element loads (8 words a thread, before the loop
    # and in it); 16 mma and 6 ldmatrix each
    assert text.count(BF16_MMA) == 32 and text.count("cvt.rn.bf16x2.f32") == 16
    assert text.count("ldmatrix") == 12 and text.count("cp.async.ca.shared.global") == 16
    gated = compiled_ptx("tensor_cores_half", "gated_f16", tmp_path / "gated")
    (kernel,) = gated["kernels"]
    # two products, each with its two k loops
    assert (tmp_path / "gated" / kernel["file"]).read_text().count(F16_MMA) == 64


@pytest.mark.parametrize(
    ("function", "dims"),
    [
        # three k-slices, the last partly past K; two batches
        ("bmm_bf16", {"B": 2, "M": 20, "K": 40, "N": 9}),
        # two row tiles, the second mostly past M, and both products of the pair
        ("gated_f16", {"M": 130, "K": 40, "N": 9}),
        # K and N even: the packed words copied as they are (cp.async), the edges zero
        ("bmm_bf16", {"B": 2, "M": 20, "K": 40, "N": 10}),
        ("gated_f16", {"M": 130, "K": 40, "N": 24}),
        # K odd, N even: words packed from element loads
        ("bmm_bf16", {"B": 1, "M": 17, "K": 23, "N": 8}),
    ],
)
def test_half_tensor_cores_walk_k_and_guard_the_edges(
    function: str, dims: dict[str, int], tmp_path: Path
) -> None:
    """The zoo's sizes give one k-slice; here K spans several, with a partial last one."""
    manifest = compiled_ptx("tensor_cores_half", function, tmp_path)
    actual, inputs = _run(tmp_path, manifest, dims, 6)
    expected = shim_reference(KERNELS / "tensor_cores_half.py", function, inputs, dims, None)
    _compare(manifest, actual, expected, "tensor_cores_half", function, dims)


def test_other_backends_and_mixed_operands_keep_scalar_products() -> None:
    path = KERNELS / "tensor_cores_half.py"
    result = compile_source(str(path), path.read_text(), ["all"], function="gated_f16")
    assert result.ok, result.diagnostics
    for name, content in result.files.items():
        if not name.startswith("ptx/"):
            assert "mma.sync" not in str(content), name
    # a float32 @ bfloat16 product, and a bfloat16 operand computed in the kernel: f32 FMAs
    path = KERNELS / "half_kinds.py"
    result = compile_source(str(path), path.read_text(), ["ptx"], function="bf16_chain")
    assert result.ok
    assert all("mma.sync" not in str(v) for v in result.files.values())


def _swap_a_halves(text: str) -> str:
    """Each `cvt.rn.f16x2.f32` that packs an A fragment register with its sources swapped."""
    a_regs = set()
    for m in re.finditer(r"mma\.sync\S* \{[^}]*\}, \{([^}]*)\}", text):
        a_regs |= {r.strip() for r in m.group(1).split(",")}

    def swap(m: re.Match) -> str:
        if m.group(1) not in a_regs:
            return m.group(0)
        return f"cvt.rn.f16x2.f32 {m.group(1)}, {m.group(3)}, {m.group(2)}"

    return re.sub(r"cvt\.rn\.f16x2\.f32 (%r\d+), (%f\d+), (%f\d+)", swap, text)


def _swap_packed_halves(text: str) -> str:
    """Every `cvt.rn.f16x2.f32` (the words staged from element loads where K or N is odd)
    with its sources swapped: k and k + 1 of A, n and n + 1 of B."""
    return re.sub(
        r"cvt\.rn\.f16x2\.f32 (%r\d+), (%f\d+), (%f\d+)", r"cvt.rn.f16x2.f32 \1, \3, \2", text
    )


EVEN = {"M": 20, "K": 24, "N": 10}  # K and N even: the packed words copied as they are


@pytest.mark.parametrize(
    ("what", "edit", "dims"),
    [
        # a1 <-> a2 in every mma (the TF32 layout's order): rows and k mixed up
        (
            "a order",
            lambda t: re.sub(
                r"(\.f32 \{[^}]*\}, \{)(%r\d+), (%r\d+), (%r\d+), (%r\d+)\}",
                r"\1\2, \4, \3, \5}",
                t,
            ),
            None,
        ),
        # b0 <-> b1: k and k + 8 exchanged
        (
            "b order",
            lambda t: re.sub(r"(\}, \{)(%r\d+), (%r\d+)(\}, \{%f)", r"\1\3, \2\4", t),
            None,
        ),
        # the halves of the words packed from element loads exchanged (the zoo's odd sizes)
        ("packing", _swap_packed_halves, None),
        # B's k-major rows read untransposed: B[n][k] in place of B[k][n]
        ("no trans", lambda t: t.replace(".x4.trans.shared", ".x4.shared"), EVEN),
        # A's matrices 1 and 2 exchanged (rows + 8 and k + 8) as ldmatrix writes them
        (
            "a matrices",
            lambda t: re.sub(
                r"(ldmatrix\S*x4\.shared\.b16 \{)(%r\d+), (%r\d+), (%r\d+), (%r\d+)\}",
                r"\1\2, \4, \3, \5}",
                t,
            ),
            EVEN,
        ),
    ],
)
def test_a_wrong_half_fragment_layout_is_caught(what: str, edit, dims, tmp_path: Path) -> None:
    manifest = compiled_ptx("tensor_cores_half", "gated_f16", tmp_path)
    _mutated(tmp_path, manifest, edit, F16_MMA)
    if dims is None:
        _caught(tmp_path, manifest, "gated_f16", stem="tensor_cores_half")
        return
    actual, inputs = _run(tmp_path, manifest, dims, 3)
    expected = shim_reference(KERNELS / "tensor_cores_half.py", "gated_f16", inputs, dims, None)
    with pytest.raises(AssertionError, match="values differ"):
        _compare(manifest, actual, expected, "tensor_cores_half", "gated_f16", dims)


# ---------------------------------------------------------------- attention on tensor cores


def test_half_attention_runs_both_products_on_tensor_cores(tmp_path: Path) -> None:
    """`softmax(q @ k.T * 0.125) @ v` over float16, D = 64: one launch whose blocks of 64 keys
    each issue 32 `mma.sync` for S = q k.T (4 slices of d by 8 tiles of keys) and 32 for
    O += P V (4 slices of keys by 8 tiles of columns), and 4 more for the rows' sums of p
    (P times a fragment of ones); q's fragments read once (4
    `ldmatrix.x4`), k's rows (16 `ldmatrix.x4`) and v's (16 `.trans`) per block, p packed
    from the accumulators (16 words) with no store of the scores to workgroup memory. T is
    symbolic: a loop over the whole blocks of keys, with no guard, then one for the last
    block, partly past T, so each of those counts twice. Rows are staged 16 bytes a
    `cp.async` (4 a thread for q's 64 rows, 4 for k's and 4 for v's a block), the rows past
    T zero-filled by the copy's source size: no `st.shared` at all. Each p is one
    `ex2.approx`, with no test for -inf."""
    manifest = compiled_ptx("tensor_cores_half", "attention_f16", tmp_path)
    validate_manifest(manifest)
    assert [k["file"] for k in manifest["kernels"]] == ["attention_f16_0_attention.ptx"]
    text = (tmp_path / manifest["kernels"][0]["file"]).read_text()
    assert text.count(F16_MMA) == 2 * (64 + 4) and "fma.rn.f32 %f" in text  # (exp's)
    ones = re.findall(r"mov\.b32 (%r\d+), 1006648320;", text)  # 0x3C003C00: two 1.0
    assert len(ones) == 1 and text.count(f"{{{ones[0]}, {ones[0]}}}") == 2 * 4
    assert text.count("ldmatrix.sync.aligned.m8n8.x4.shared.b16") == 4 + 2 * 16
    assert text.count("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16") == 2 * 16
    # in each loop 16 words of p, and the 32 scaled scores rounded to float16 two at a time
    # (then the output's 32 roundings after the loops, one each)
    assert text.count("cvt.rn.f16x2.f32") == 2 * (16 + 16)
    assert text.count("cvt.rn.f16.f32") == 32
    # each pair of products, rounded to float16 first, scaled by 0.125 as float16
    assert text.count("mul.rn.f16x2") == 2 * 16 and "0f3E000000" not in text
    assert text.count("cp.async.cg.shared.global") == 4 + 2 * 8 and "cp.async.ca" not in text
    assert text.count(", 16, %r") == 4 + 8 and "st.shared" not in text
    # 32 p and 2 rescale factors a thread in each loop; in the first (whole blocks) -inf is
    # only each row's test of its running max, not one per score
    assert text.count("ex2.approx.ftz.f32") == 2 * (32 + 2)
    whole = re.search(r"\$L_loop_\d+:(.*?)\n\$L_endloop_\d+:", text, re.S)
    assert whole and whole.group(1).count("0fFF800000") == 2
    # there each row's max over its 16 scores is over their 8 float16 pairs (7 `max.f16x2`),
    # then the last pair's halves; the last block's scores, selected, are float32 again
    assert whole.group(1).count("max.f16x2") == text.count("max.f16x2") == 2 * 7
    # each row's max over the 4 lanes of its quad (two butterfly rounds, two rows) in each
    # loop; its sum is whole in every lane (the tensor cores add over the quad)
    assert text.count("shfl.sync.bfly.b32") == 2 * 4
    bf16 = compiled_ptx("tensor_cores_half", "attention_bf16", tmp_path / "bf16")
    text = (tmp_path / "bf16" / bf16["kernels"][0]["file"]).read_text()
    # D = 32, E = 16: 2 x 8 mma for S, 4 x 2 for O += P V and 4 for the sums, in each loop
    assert text.count(BF16_MMA) == 2 * (24 + 4) and text.count("cvt.rn.bf16x2.f32") == 2 * 16


@pytest.mark.parametrize(
    ("function", "dims"),
    [
        # one block of keys, most of it past T, and rows past T
        ("attention_f16", {"T": 37}),
        # two blocks: the first's accumulators and sums rescaled by the second's max; the
        # first whole (no guards), the second partly past T
        ("attention_f16", {"T": 100}),
        # two whole blocks, no partial one
        ("attention_f16", {"T": 128}),
        # the diagonal block masked, the block past it not loaded
        ("causal_attention_f16", {"T": 37}),
        ("causal_attention_f16", {"T": 100}),
        ("causal_attention_f16", {"T": 130}),
        # heads over a batch, v narrower than q and k
        ("attention_bf16", {"B": 2, "T": 70}),
    ],
)
def test_half_attention_on_tensor_cores_matches_the_shim(
    function: str, dims: dict[str, int], tmp_path: Path
) -> None:
    manifest = compiled_ptx("tensor_cores_half", function, tmp_path)
    assert "mma.sync" in (tmp_path / manifest["kernels"][0]["file"]).read_text()
    actual, inputs = _run(tmp_path, manifest, dims, 7)
    expected = shim_reference(KERNELS / "tensor_cores_half.py", function, inputs, dims, None)
    _compare(manifest, actual, expected, "tensor_cores_half", function, dims)


def test_half_attention_under_precise_math_has_no_approximate_exp(tmp_path: Path) -> None:
    """Each p is 2^t; `--math precise` computes it as the correctly rounded e^(t ln 2), not
    `ex2.approx`, and still matches the shim."""
    manifest = compiled_ptx("tensor_cores_half", "attention_f16", tmp_path, "precise")
    text = (tmp_path / manifest["kernels"][0]["file"]).read_text()
    assert ".approx" not in text and ".ftz" not in text and "mul.rn.f32 %f" in text
    dims = {"T": 100}
    actual, inputs = _run(tmp_path, manifest, dims, 7)
    expected = shim_reference(KERNELS / "tensor_cores_half.py", "attention_f16", inputs, dims, None)
    _compare(manifest, actual, expected, "tensor_cores_half", "attention_f16", dims)


def test_causal_half_attention_skips_the_blocks_past_the_diagonal(tmp_path: Path) -> None:
    manifest = compiled_ptx("tensor_cores_half", "causal_attention_f16", tmp_path)
    (skipped,) = manifest["kernels"][0]["work_skipped"]
    assert skipped["work"].startswith("every step for the blocks of 64 keys from key r + 64")


def _swap_packs(text: str, scores: bool) -> str:
    """`text` with the two operands of each `cvt.rn.f16x2.f32` exchanged: those packing
    scores (scaled and read back as halves) with `scores`, else those packing p."""
    read_back = set(re.findall(r"mul\.rn\.f16x2 %r\d+, (%r\d+),", text))

    def swap(m: re.Match) -> str:
        if (m.group(1) in read_back) != scores:
            return m.group(0)
        return f"cvt.rn.f16x2.f32 {m.group(1)}, {m.group(3)}, {m.group(2)};"

    return re.sub(r"cvt\.rn\.f16x2\.f32 (%r\d+), (%f\d+), (%f\d+);", swap, text)


@pytest.mark.parametrize(
    "edit",
    [
        # v's key-major rows read untransposed: V[e][key] in place of V[key][e]
        lambda t: t.replace(".x4.trans.shared", ".x4.shared"),
        # keys 2q and 2q + 1 of p exchanged as they are packed into P's A fragment
        lambda t: _swap_packs(t, scores=False),
        # the two scores of a pair exchanged as they are rounded to float16
        lambda t: _swap_packs(t, scores=True),
        # each row's max and sum over one lane's 16 scores of the row, not its quad's 64
        lambda t: re.sub(
            r"shfl\.sync\.bfly\.b32 (%f\d+), (%f\d+), \d+, 0x1f, 0xffffffff;", r"mov.b32 \1, \2;", t
        ),
    ],
    ids=["v untransposed", "p pairs swapped", "score pairs swapped", "no quad exchange"],
)
def test_a_wrong_half_attention_is_caught(edit, tmp_path: Path) -> None:
    manifest = compiled_ptx("tensor_cores_half", "attention_f16", tmp_path)
    path = tmp_path / manifest["kernels"][0]["file"]
    text = path.read_text()
    edited = edit(text)
    assert edited != text, "the mutation changed nothing"
    path.write_text(edited)
    dims = {"T": 100}
    actual, inputs = _run(tmp_path, manifest, dims, 7)
    expected = shim_reference(KERNELS / "tensor_cores_half.py", "attention_f16", inputs, dims, None)
    with pytest.raises(AssertionError, match="values differ"):
        _compare(manifest, actual, expected, "tensor_cores_half", "attention_f16", dims)


def test_half_attention_of_a_symbolic_head_dim_keeps_scalar_products() -> None:
    """Fragments are registers: only a literal head dim (a multiple of 16, at most 128) takes
    the tensor cores; another float16 attention is the scalar launch, and other backends'
    attention has no `mma.sync`."""
    source = (
        "from mimir.array import Dim, Tensor, float16, gpu\n"
        'T = Dim("T")\nD = Dim("D", max=128)\n\n\n'
        "@gpu\n"
        "def att(\n"
        "    q: Tensor[float16, T, D], k: Tensor[float16, T, D], v: Tensor[float16, T, D]\n"
        ") -> Tensor[float16, T, D]:\n"
        "    return (q @ k.T).softmax() @ v\n"
    )
    result = compile_source("att.py", source, ["ptx"], function="att")
    assert result.ok, result.diagnostics
    manifest = json.loads(result.files["att.manifest.json"])
    assert [k["file"] for k in manifest["kernels"]] == ["att_0_attention.ptx"]
    assert "mma.sync" not in result.files["att_0_attention.ptx"]
    path = KERNELS / "tensor_cores_half.py"
    result = compile_source(str(path), path.read_text(), ["all"], function="attention_f16")
    assert result.ok, result.diagnostics
    for name, content in result.files.items():
        assert ("mma.sync" in str(content)) == (name == "ptx/attention_f16_0_attention.ptx")


# ---------------------------------------------------------------- ldmatrix in the interpreter

# 32 threads: thread t stores row t (the 8 halves 8t .. 8t + 7) at the permuted slot
# 7t % 32 of a shared tile; after a barrier each lane gives its own row's address to an
# ldmatrix.x4 and an ldmatrix.x4.trans, and stores the 8 registers it receives.
_LDMATRIX = """
.version 7.8
.target sm_80
.address_size 64

.visible .entry ldm(
    .param .u64 .ptr .global .align 4 out
)
.reqntid 32, 1, 1
{
    .reg .b32 %r<20>;
    .reg .b64 %rd<4>;
    .shared .align 16 .b8 tile[512];
    ld.param.u64 %rd0, [out];
    cvta.to.global.u64 %rd1, %rd0;
    mov.u32 %r0, %tid.x;
    mul.lo.u32 %r1, %r0, 7;
    and.b32 %r1, %r1, 31;
    mov.u32 %r2, tile;
    shl.b32 %r3, %r1, 4;
    add.u32 %r3, %r2, %r3;
    shl.b32 %r4, %r0, 3;
    add.u32 %r5, %r4, 1;
    shl.b32 %r5, %r5, 16;
    or.b32 %r5, %r5, %r4;
    add.u32 %r6, %r5, 131074;
    add.u32 %r7, %r5, 262148;
    add.u32 %r8, %r5, 393222;
    st.shared.u32 [%r3], %r5;
    st.shared.u32 [%r3+4], %r6;
    st.shared.u32 [%r3+8], %r7;
    st.shared.u32 [%r3+12], %r8;
    bar.sync 0;
    ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r10, %r11, %r12, %r13}, [%r3];
    ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%r14, %r15, %r16, %r17}, [%r3];
    mul.wide.u32 %rd2, %r0, 32;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r10;
    st.global.u32 [%rd3+4], %r11;
    st.global.u32 [%rd3+8], %r12;
    st.global.u32 [%rd3+12], %r13;
    st.global.u32 [%rd3+16], %r14;
    st.global.u32 [%rd3+20], %r15;
    st.global.u32 [%rd3+24], %r16;
    st.global.u32 [%rd3+28], %r17;
    ret;
}
"""


def _run_ldmatrix(text: str) -> list[list[tuple[int, int]]]:
    """Each lane's 8 registers as (low, high) halves."""
    import struct

    from harness.ptx_interp import _Interp, _Memory, _parse

    out = bytearray(32 * 32)
    interp = _Interp(_parse(text), _Memory([(1 << 40, out, "out")]), {})
    interp.params = {"out": struct.pack("<Q", 1 << 40)}
    interp.launch("ldm", (1, 1, 1))
    words = struct.unpack("<256I", bytes(out))
    return [[(w & 0xFFFF, w >> 16) for w in words[8 * t : 8 * t + 8]] for t in range(32)]


def _ldmatrix_reference(row, col) -> list[list[tuple[int, int]]]:
    """Lane l's registers, where matrix j's element (r, c) holds 64 j + 8 r + c and
    `row(g, q, e)`, `col(g, q, e)` place the e-th half of lane (g, q)'s pair."""
    out = []
    for lane in range(32):
        g, q = lane // 4, lane % 4
        regs = []
        for trans in (False, True):
            for j in range(4):
                pair = []
                for e in range(2):
                    r, c = row(g, q, e), col(g, q, e)
                    if trans:
                        r, c = c, r
                    pair.append(64 * j + 8 * r + c)
                regs.append(tuple(pair))
        out.append(regs)
    return out


def test_ldmatrix_gives_each_lane_the_pairs_the_ptx_isa_says() -> None:
    # lane (g, q) = (l / 4, l % 4): row g, columns 2q and 2q + 1 of each matrix; with
    # .trans rows 2q and 2q + 1 of column g
    got = _run_ldmatrix(_LDMATRIX)
    assert got == _ldmatrix_reference(lambda g, q, e: g, lambda g, q, e: 2 * q + e)


@pytest.mark.parametrize(
    ("row", "col"),
    [
        (lambda g, q, e: 2 * q + e, lambda g, q, e: g),  # transposed mapping
        (lambda g, q, e: q, lambda g, q, e: 2 * (g % 4) + e),  # lanes' g and q exchanged
        (lambda g, q, e: g, lambda g, q, e: 2 * q + 1 - e),  # halves of a pair exchanged
    ],
)
def test_a_wrong_ldmatrix_mapping_gives_other_registers(row, col) -> None:
    assert _run_ldmatrix(_LDMATRIX) != _ldmatrix_reference(row, col)


def test_an_ldmatrix_before_the_barrier_is_a_race() -> None:
    with pytest.raises(PtxInterpError, match="data race on shared memory"):
        _run_ldmatrix(_LDMATRIX.replace("    bar.sync 0;\n", ""))


def test_an_ldmatrix_row_address_must_be_16_byte_aligned() -> None:
    text = _LDMATRIX.replace(
        ".x4.shared.b16 {%r10, %r11, %r12, %r13}, [%r3]",
        ".x4.shared.b16 {%r10, %r11, %r12, %r13}, [%r3+4]",
    )
    with pytest.raises(PtxInterpError, match="16-byte aligned"):
        _run_ldmatrix(text)


# ---------------------------------------------------------------- manifests of every backend


def test_backends_without_tensor_cores_say_they_fell_back() -> None:
    path = KERNELS / "tensor_cores.py"
    result = compile_source(str(path), path.read_text(), ["all"], function="matmul_tf32")
    assert result.ok, result.diagnostics
    for backend in ("msl", "wgsl", "spirv"):
        manifest = json.loads(result.files[f"{backend}/matmul_tf32.manifest.json"])
        validate_manifest(manifest)
        precision = manifest["precision"]
        assert precision["requested"] == "tf32" and precision["matmul"] == "float32"
        assert "no tensor-core path" in precision["fallback"]
    ptx = json.loads(result.files["ptx/matmul_tf32.manifest.json"])
    assert ptx["precision"] == {"requested": "tf32", "matmul": "tf32"}


def test_a_float32_kernel_has_no_precision_field_and_no_mma() -> None:
    path = KERNELS / "linear.py"
    result = compile_source(str(path), path.read_text(), ["ptx"], function="linear_relu")
    assert result.ok
    assert "precision" not in json.loads(result.files["linear_relu.manifest.json"])
    assert all("mma.sync" not in str(v) for v in result.files.values())


def test_a_tf32_function_without_a_matmul_says_so() -> None:
    text = (
        "from mimir.array import Tensor, float32, gpu\n\n"
        '@gpu(precision="tf32")\n'
        "def f(x: Tensor[float32, 8]) -> Tensor[float32, 8]:\n"
        "    return x * 2.0\n"
    )
    result = compile_source("t.py", text, ["ptx"])
    assert result.ok
    precision = json.loads(result.files["f.manifest.json"])["precision"]
    assert precision["matmul"] == "float32" and "no float32 matmul" in precision["fallback"]


def test_verify_takes_the_fallback_tolerance_on_a_float32_backend() -> None:
    """`mimir verify` on a TF32 function run in full float32 (WGSL): the shim rounded the
    operands, the backend did not; the TF32 bound applies, not the float32 one."""
    from harness import require_tool

    require_tool("wgpu")
    from mimir.runtime.verify_run import verify_file

    report = verify_file(KERNELS / "tensor_cores.py", "linear_tf32_tiles", backends=["wgsl"])
    assert report.checks and all(c.ok for c in report.checks), report.failures
    assert max(c.max_abs for c in report.checks) > 1e-4  # past float32's own atol (1e-5)


@pytest.mark.parametrize(
    ("function", "kind", "says"),
    [
        ("attention_tf32", "attention", "attention launches (softmax(q @ k.T) @ v in one pass)"),
        ("probabilities_tf32", "scores_softmax", "scores_softmax launches (softmax(q @ k.T)"),
    ],
)
def test_a_tf32_attention_says_its_one_launch_computes_in_float32(
    function: str, kind: str, says: str
) -> None:
    """`softmax(q @ k.T) @ v` in a `precision="tf32"` function is one `attention` launch
    (`schedule._attention`), and `softmax(q @ k.T)` returned one `scores_softmax` launch,
    with no tensor-core path: the PTX manifest says why their products are float32, rather
    than that there is no matmul (the run against the shim, within the TF32 tolerance, is in
    tests/test_ptx_exec.py)."""
    path = KERNELS / "tensor_cores.py"
    result = compile_source(str(path), path.read_text(), ["ptx"], function=function)
    assert result.ok, result.diagnostics
    manifest = json.loads(result.files[f"{function}.manifest.json"])
    validate_manifest(manifest)
    assert [k["file"] for k in manifest["kernels"]] == [f"{function}_0_{kind}.ptx"]
    precision = manifest["precision"]
    assert precision["matmul"] == "float32"
    assert precision["fallback"].startswith(says)


# ---------------------------------------------------------------- wgmma in the interpreter


def _wgmma_module(kind: str, n: int = 64, a_lbo: int = 128, a_sbo: int = 256) -> str:
    """One warpgroup (128 threads) stages A (64 x 16, row-major in global) K-major and B
    (16 x n, row-major) MN-major into shared memory without swizzle, each 8 x 16-byte core
    matrix contiguous (B's: k-adjacent 128 bytes apart, n-adjacent 256), multiplies them
    with one `wgmma.mma_async` and stores D (64 x n, f32, row-major). A's array has one
    core matrix of room past its end, where a descriptor off by one reads zeros."""
    b_lbo, b_sbo = 128, 256
    d = ", ".join(f"%f{j}" for j in range(n // 2))
    lines: list[str] = []
    ins = lines.append
    ins("ld.param.u64 %rd0, [a];")
    ins("ld.param.u64 %rd1, [b];")
    ins("ld.param.u64 %rd2, [out];")
    ins("cvta.to.global.u64 %rd0, %rd0;")
    ins("cvta.to.global.u64 %rd1, %rd1;")
    ins("cvta.to.global.u64 %rd2, %rd2;")
    ins("mov.u32 %r0, %tid.x;")
    # A: thread t copies row m = t / 2, k = 8 (t % 2) .. + 7 (16 bytes) to the core-matrix row
    ins("shr.u32 %r1, %r0, 1;")  # m
    ins("and.b32 %r2, %r0, 1;")  # k half
    ins("mul.wide.u32 %rd3, %r0, 16;")
    ins("add.s64 %rd3, %rd0, %rd3;")
    ins("and.b32 %r3, %r1, 7;")
    ins("shl.b32 %r3, %r3, 4;")
    ins("shr.u32 %r4, %r1, 3;")
    ins(f"mul.lo.u32 %r4, %r4, {a_sbo};")
    ins("add.u32 %r3, %r3, %r4;")
    ins(f"mul.lo.u32 %r4, %r2, {a_lbo};")
    ins("add.u32 %r3, %r3, %r4;")
    ins("mov.u32 %r5, atile;")
    ins("add.u32 %r3, %r3, %r5;")
    for w in range(4):
        ins(f"ld.global.u32 %r6, [%rd3+{4 * w}];")
        ins(f"st.shared.u32 [%r3+{4 * w}], %r6;")
    # B: rows k < 16 of n halves; 16-byte pieces p = k * n/8 + nb; thread t copies pieces t, t+128..
    pieces = 16 * (n // 8)
    ins("mov.u32 %r7, btile;")
    for p0 in range(0, pieces, 128):
        ins(f"add.u32 %r8, %r0, {p0};")
        ins(f"setp.lt.u32 %p1, %r8, {pieces};")
        ins(f"@!%p1 bra SKIP{p0};")
        ins("mul.wide.u32 %rd4, %r8, 16;")
        ins("add.s64 %rd4, %rd1, %rd4;")
        ins(f"rem.u32 %r9, %r8, {n // 8};")  # nb
        ins(f"div.u32 %r10, %r8, {n // 8};")  # k
        ins("and.b32 %r11, %r10, 7;")
        ins("shl.b32 %r11, %r11, 4;")
        ins("shr.u32 %r12, %r10, 3;")
        ins(f"mul.lo.u32 %r12, %r12, {b_lbo};")
        ins("add.u32 %r11, %r11, %r12;")
        ins(f"mul.lo.u32 %r12, %r9, {b_sbo};")
        ins("add.u32 %r11, %r11, %r12;")
        ins("add.u32 %r11, %r11, %r7;")
        for w in range(4):
            ins(f"ld.global.u32 %r6, [%rd4+{4 * w}];")
            ins(f"st.shared.u32 [%r11+{4 * w}], %r6;")
        ins(f"SKIP{p0}:")
    ins("fence.proxy.async.shared::cta;")
    ins("bar.sync 0;")
    for reg, lbo, sbo, rd in (
        ("%r5", a_lbo, a_sbo, "%rd5"),
        ("%r7", b_lbo, b_sbo, "%rd6"),
    ):
        const = (lbo >> 4) << 16 | (sbo >> 4) << 32
        ins(f"shr.u32 %r13, {reg}, 4;")
        ins(f"cvt.u64.u32 {rd}, %r13;")
        ins(f"or.b64 {rd}, {rd}, {const:#018x};")
    for j in range(n // 2):
        ins(f"mov.f32 %f{j}, 0f00000000;")
    ins("mov.pred %p2, 1;")
    ins("wgmma.fence.sync.aligned;")
    ins(
        f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{kind}.{kind} "
        f"{{{d}}}, %rd5, %rd6, %p2, 1, 1, 0, 1;"
    )
    ins("wgmma.commit_group.sync.aligned;")
    ins("wgmma.wait_group.sync.aligned 0;")
    # D: row 16 w + g + 8 h, col 8 jj + 2 q + e of register 4 jj + 2 h + e
    ins("shr.u32 %r14, %r0, 5;")
    ins("and.b32 %r15, %r0, 31;")
    ins("shr.u32 %r16, %r15, 2;")
    ins("and.b32 %r17, %r15, 3;")
    ins("shl.b32 %r14, %r14, 4;")
    ins("add.u32 %r14, %r14, %r16;")  # row
    ins(f"mul.lo.u32 %r18, %r14, {n};")
    ins("shl.b32 %r17, %r17, 1;")
    ins("add.u32 %r18, %r18, %r17;")
    ins("mul.wide.u32 %rd7, %r18, 4;")
    ins("add.s64 %rd7, %rd2, %rd7;")
    for j in range(n // 2):
        jj, h, e = j // 4, j // 2 % 2, j % 2
        ins(f"st.global.f32 [%rd7+{4 * (8 * h * n + 8 * jj + e)}], %f{j};")
    ins("ret;")
    body = "\n".join(line if line.endswith(":") else "    " + line for line in lines)
    return f""".version 8.0
.target sm_90a
.address_size 64

.visible .entry wg(
    .param .u64 .ptr .global .align 16 a,
    .param .u64 .ptr .global .align 16 b,
    .param .u64 .ptr .global .align 4 out
)
.reqntid 128, 1, 1
{{
    .reg .pred %p<3>;
    .reg .b32 %r<19>;
    .reg .f32 %f<{n // 2}>;
    .reg .b64 %rd<8>;
    .shared .align 1024 .b8 atile[{a_sbo * 8 + 128}];
    .shared .align 1024 .b8 btile[{32 * n}];
{body}
}}
"""


_WGMMA_VALUES = (-2.0, -1.0, -0.5, 0.25, 0.5, 1.0, 1.5, 3.0)  # exact in both types


def _run_wgmma(text: str, kind: str, n: int = 64) -> tuple[list[float], list[float]]:
    """The module's D and the exact product of the same random A and B."""
    from harness.ptx_interp import _Interp, _Memory, _parse

    rng = random.Random(n)
    a = [rng.choice(_WGMMA_VALUES) for _ in range(64 * 16)]
    b = [rng.choice(_WGMMA_VALUES) for _ in range(16 * n)]
    pack = _to_f16_rn if kind == "f16" else _to_bf16_rn
    buffers = [
        bytearray(struct.pack(f"<{len(a)}H", *map(pack, a))),
        bytearray(struct.pack(f"<{len(b)}H", *map(pack, b))),
        bytearray(64 * n * 4),
    ]
    names = ("a", "b", "out")
    regions = [
        ((k + 1) << 40, data, name)
        for k, (data, name) in enumerate(zip(buffers, names, strict=True))
    ]
    interp = _Interp(_parse(text), _Memory(regions), {})
    interp.params = {name: struct.pack("<Q", (k + 1) << 40) for k, name in enumerate(names)}
    interp.launch("wg", (1, 1, 1))
    got = list(struct.unpack(f"<{64 * n}f", bytes(buffers[2])))
    want = [
        sum(a[16 * i + k] * b[n * k + j] for k in range(16)) for i in range(64) for j in range(n)
    ]
    return got, want


@pytest.mark.parametrize(("kind", "n"), [("f16", 64), ("bf16", 64), ("f16", 128)])
def test_wgmma_multiplies_the_matrices_its_descriptors_name(kind: str, n: int) -> None:
    got, want = _run_wgmma(_wgmma_module(kind, n), kind, n)
    assert got == want


def test_wgmma_module_assembles_for_sm_90a(tmp_path: Path) -> None:
    from test_ptx import ptxas

    path = tmp_path / "wg.ptx"
    path.write_text(_wgmma_module("f16"))
    assert ptxas(path, "sm_90a") == (0, "")


def _descriptor_constant(lbo: int, sbo: int) -> str:
    return f"{(lbo >> 4) << 16 | (sbo >> 4) << 32:#018x}"


@pytest.mark.parametrize(
    "edit",
    [
        # A's leading and stride byte offsets exchanged in its descriptor only
        lambda t: t.replace(_descriptor_constant(128, 256), _descriptor_constant(256, 128), 1),
        # B read K-major instead of MN-major
        lambda t: t.replace(", 1, 1, 0, 1;", ", 1, 1, 0, 0;"),
        # A's start address one core matrix further on
        lambda t: t.replace(
            "shr.u32 %r13, %r5, 4;", "shr.u32 %r13, %r5, 4;\n    add.u32 %r13, %r13, 8;"
        ),
    ],
    ids=["lbo-sbo", "trans-b", "start"],
)
def test_a_wrong_wgmma_descriptor_gives_a_wrong_product(edit) -> None:
    text = _wgmma_module("f16")
    assert edit(text) != text
    got, want = _run_wgmma(edit(text), "f16")
    assert got != want


def test_the_interpreter_refuses_a_swizzled_descriptor() -> None:
    constant = _descriptor_constant(128, 256)
    swizzled = constant.replace("0x00", "0x40", 1)  # bits 62-63: 1, the 128-byte swizzle
    text = _wgmma_module("f16").replace(constant, swizzled, 1)
    with pytest.raises(PtxInterpError, match="swizzle mode 1"):
        _run_wgmma(text, "f16")


def test_a_wgmma_result_lands_at_its_wait() -> None:
    text = _wgmma_module("f16").replace("wgmma.wait_group.sync.aligned 0;", "")
    got, want = _run_wgmma(text, "f16")
    assert got == [0.0] * len(want) != want


# ---------------------------------------------------------------- matmuls on wgmma (sm_90a)

WGMMA_F16 = "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"


WGMMA_BF16 = "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16"


def _compiled_sm90a(function: str, out: Path) -> dict:
    """One function of `tests/kernels/tensor_cores_half.py` compiled for sm_90a into `out`."""
    path = KERNELS / "tensor_cores_half.py"
    result = compile_source(
        str(path), path.read_text(), ["ptx"], function=function, ptx_target="sm_90a"
    )
    assert result.ok, [(d.code, d.message) for d in result.diagnostics]
    out.mkdir(parents=True, exist_ok=True)
    for relative, content in result.files.items():
        assert isinstance(content, str)
        (out / relative).write_text(content)
    return json.loads(result.files[f"{function}.manifest.json"])  # type: ignore[arg-type]


def _matches_the_shim(folder: Path, manifest: dict, function: str, dims: dict[str, int]) -> None:
    actual, inputs = _run(folder, manifest, dims, 6)
    expected = shim_reference(KERNELS / "tensor_cores_half.py", function, inputs, dims, None)
    _compare(manifest, actual, expected, "tensor_cores_half", function, dims)


def test_a_half_matmul_for_sm_90a_runs_on_wgmma(tmp_path: Path) -> None:
    from test_ptx import ptxas

    manifest = _compiled_sm90a("linear_gelu_f16_tiles", tmp_path)
    validate_manifest(manifest)
    (kernel,) = manifest["kernels"]
    assert kernel["requires"] == ["sm_90a"]
    path = tmp_path / kernel["file"]
    text = path.read_text()
    assert ".version 8.0\n.target sm_90a" in text
    # one 64 x 128 x 16 wgmma per warpgroup and k-slice, both operands from shared memory
    # (no ldmatrix, no mma.sync), two slices a loop step (buffers 0 and 1); proven sizes:
    # each thread copies one 16-byte piece of each operand per slice, unguarded (before
    # the loop and in it), fenced for the async proxy before the barrier
    assert text.count(WGMMA_F16) == 2 and "mma.sync" not in text and "ldmatrix" not in text
    copies = re.findall(r"cp\.async\.cg\.shared\.global [^;]*;", text)
    assert len(copies) == 6 and all(c.endswith(", 16;") for c in copies)
    assert text.count("fence.proxy.async.shared::cta") == 3
    assert text.count("wgmma.wait_group.sync.aligned 0") == 2
    assert ptxas(path, "sm_90a") == (0, "")
    _matches_the_shim(tmp_path, manifest, "linear_gelu_f16_tiles", {})


@pytest.mark.parametrize(
    ("function", "dims"),
    [
        # three k-slices, the last half past K; two batches; K and N multiples of 8:
        # 16-byte pieces copied (cp.async), those past the edges zero
        ("bmm_bf16", {"B": 2, "M": 20, "K": 40, "N": 16}),
        # N odd, then only even: words packed from element loads
        ("bmm_bf16", {"B": 2, "M": 20, "K": 40, "N": 9}),
        ("bmm_bf16", {"B": 2, "M": 20, "K": 40, "N": 10}),
        # two row tiles (both warpgroups' rows), the second mostly past M; the pair
        ("gated_f16", {"M": 130, "K": 40, "N": 24}),
        # K odd, N even
        ("bmm_bf16", {"B": 1, "M": 17, "K": 23, "N": 8}),
        # one k-slice: the loop step's second slice skipped; four (two steps), columns
        # past the first tile
        ("bmm_bf16", {"B": 1, "M": 20, "K": 16, "N": 16}),
        ("gated_f16", {"M": 70, "K": 64, "N": 136}),
    ],
)
def test_half_matmuls_on_wgmma_match_the_shim(
    function: str, dims: dict[str, int], tmp_path: Path
) -> None:
    from test_ptx import ptxas, ptxas_path

    manifest = _compiled_sm90a(function, tmp_path)
    path = tmp_path / manifest["kernels"][0]["file"]
    text = path.read_text()
    assert WGMMA_F16 in text or WGMMA_BF16 in text
    assert "mma.sync" not in text
    if ptxas_path() is not None:  # both k loops (16-byte pieces, packed words) assemble
        assert ptxas(path, "sm_90a") == (0, "")
    _matches_the_shim(tmp_path, manifest, function, dims)


def test_the_sm_80_build_keeps_mma_sync(tmp_path: Path) -> None:
    manifest = compiled_ptx("tensor_cores_half", "bmm_bf16", tmp_path)
    text = (tmp_path / manifest["kernels"][0]["file"]).read_text()
    assert BF16_MMA in text and "wgmma.mma_async" not in text and ".target sm_80" in text


_CORE_DESCRIPTOR = _descriptor_constant(128, 256)


@pytest.mark.parametrize(
    "edit",
    [
        # A's leading and stride byte offsets exchanged (B's kept)
        lambda t: t.replace(_CORE_DESCRIPTOR, _descriptor_constant(256, 128), 1),
        # B's exchanged
        lambda t: re.sub(
            f"({re.escape(_CORE_DESCRIPTOR)})(.*?){re.escape(_CORE_DESCRIPTOR)}",
            lambda m: m.group(1) + m.group(2) + _descriptor_constant(256, 128),
            t,
            count=1,
            flags=re.S,
        ),
        # no wait for the product before the next slice is staged over it
        lambda t: t.replace("wgmma.wait_group.sync.aligned 0;", "wgmma.wait_group.sync.aligned 1;"),
    ],
    ids=["a-offsets", "b-offsets", "wait"],
)
def test_a_wrong_wgmma_kernel_is_caught(edit, tmp_path: Path) -> None:
    manifest = _compiled_sm90a("bmm_bf16", tmp_path)
    _mutated(tmp_path, manifest, edit, mma=WGMMA_BF16)
    # K and N multiples of 8: the k loop that copies 16-byte pieces, whose wgmma the
    # edits change
    dims = {"B": 1, "M": 20, "K": 40, "N": 16}
    with pytest.raises(AssertionError, match="values differ"):
        _matches_the_shim(tmp_path, manifest, "bmm_bf16", dims)
