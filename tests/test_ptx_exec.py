"""PTX kernels executed on the CPU by the test interpreter and compared with the shim.

ptxas (`tests/test_ptx.py`) shows the PTX is well formed; this shows it
computes the right thing, as far as our own reading of the PTX ISA goes
(`harness.ptx_interp`: IEEE float32 arithmetic, real barriers between
coroutine threads, bounds-checked buffers, and a shared-memory race detector).
A real GPU settles the rest (`tests/test_ptx_gpu.py`). The zoo functions, the
dim bindings and the comparison are those of `tests/test_backends_exec.py`;
only the `one` and `small` bindings run here, since the interpreter executes
every GPU thread in Python; where `small` launches more than `INTERPRETER_THREADS` GPU
threads, its leading dims (batches and heads, as a kernel names them first) take 2
(`_interpreter_dims`): the rows, tiles and tails stay those of `small`.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
from harness import SMALL, random_inputs, shim_reference
from harness.ptx_interp import PtxInterpError, gpu_threads, run_ptx_manifest_cpu
from test_backends_exec import FUNCTIONS, KERNELS, _compare, _dims

from mimir.codegen import compile_source
from mimir.runtime.verify import choose_dims, default_scalars

THREAD_BUDGET = 20_000  # GPU threads per case, all launches together
# GPU threads of a `small` case before its leading dims shrink: a workgroup of attention
# costs the interpreter about 2.7 s whatever its rows, so 7x4 heads (28 workgroups of 256)
# take 75 s, 2x4 heads a third of it.
INTERPRETER_THREADS = 2_048


def _interpreter_dims(manifest: dict[str, Any], label: str) -> dict[str, int] | None:
    """`_dims`, with the `small` binding's leading dims at 2, one at a time, while it
    launches more than `INTERPRETER_THREADS` GPU threads."""
    dims = _dims(manifest, label)
    if label != "small" or dims is None:
        return dims
    count = len(manifest.get("dims", []))
    wishes = [SMALL[min(i, len(SMALL) - 1)] for i in range(count)]
    for i in range(count - 1):
        if gpu_threads(manifest, dims) <= INTERPRETER_THREADS:
            break
        wishes[i] = 2
        dims = choose_dims(manifest, wishes)
    return dims


@functools.cache
def compiled_ptx(stem: str, function: str, out: Path, math: str = "fast") -> dict[str, Any]:
    """Write one function's PTX files into `out`; its manifest."""
    path = KERNELS / f"{stem}.py"
    result = compile_source(str(path), path.read_text(), ["ptx"], function=function, math=math)
    assert result.ok, [(d.code, d.message) for d in result.diagnostics]
    out.mkdir(parents=True, exist_ok=True)
    for relative, content in result.files.items():
        assert isinstance(content, str)
        (out / relative).write_text(content)
    return json.loads(result.files[f"{function}.manifest.json"])  # type: ignore[arg-type]


@pytest.mark.parametrize("label", ["one", "small"])
@pytest.mark.parametrize(("stem", "function"), FUNCTIONS, ids=[f"{s}.{f}" for s, f in FUNCTIONS])
def test_ptx_matches_shim_in_the_interpreter(
    stem: str, function: str, label: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    folder = tmp_path_factory.getbasetemp() / "ptx-exec" / stem / function
    manifest = compiled_ptx(stem, function, folder)
    dims = _interpreter_dims(manifest, label)
    assert dims is not None
    if gpu_threads(manifest, dims) > THREAD_BUDGET:
        pytest.skip(f"{gpu_threads(manifest, dims)} GPU threads at {dims}: too many to interpret")
    inputs = random_inputs(manifest, dims, seed=len(function))
    scalars = default_scalars(manifest, dims)
    expected = shim_reference(KERNELS / f"{stem}.py", function, inputs, dims, scalars)
    actual = run_ptx_manifest_cpu(manifest, folder, inputs, dims, scalars)
    _compare(manifest, actual, expected, stem, function, dims)


# `--math precise` on the kernels whose math it changes (the zoo run above is fast math).
PRECISE = [(s, f) for s, f in FUNCTIONS if s in ("select_cast", "trig", "combos", "scalar_math")]


@pytest.mark.parametrize(("stem", "function"), PRECISE, ids=[f"{s}.{f}" for s, f in PRECISE])
def test_precise_math_matches_shim_in_the_interpreter(
    stem: str, function: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    folder = tmp_path_factory.getbasetemp() / "ptx-precise" / stem / function
    manifest = compiled_ptx(stem, function, folder, "precise")
    assert manifest["math"] == "precise"
    dims = _dims(manifest, "small")
    assert dims is not None
    inputs = random_inputs(manifest, dims, seed=len(function))
    scalars = default_scalars(manifest, dims)
    expected = shim_reference(KERNELS / f"{stem}.py", function, inputs, dims, scalars)
    actual = run_ptx_manifest_cpu(manifest, folder, inputs, dims, scalars)
    _compare(manifest, actual, expected, stem, function, dims)


# ---------------------------------------------------------------- the interpreter's own checks


def _linear(tmp_path: Path) -> tuple[dict[str, Any], Path]:
    manifest = compiled_ptx("linear", "linear_relu", tmp_path / "linear")
    return manifest, tmp_path / "linear" / manifest["kernels"][0]["file"]


def _run(manifest: dict[str, Any], path: Path, seed: int = 0) -> list:
    dims = {"N": 5}
    inputs = random_inputs(manifest, dims, seed=seed)
    return run_ptx_manifest_cpu(manifest, path.parent, inputs, dims)["out"]


def test_a_missing_barrier_is_a_data_race(tmp_path: Path) -> None:
    manifest, path = _linear(tmp_path)
    path.write_text(path.read_text().replace("bar.sync 0;\n", "", 1))
    with pytest.raises(PtxInterpError, match="data race on shared memory"):
        _run(manifest, path)


def test_an_out_of_bounds_store_is_caught(tmp_path: Path) -> None:
    manifest, path = _linear(tmp_path)
    text = path.read_text()
    # Drop the last bounds guard (around a load of the bias and the store of the result).
    guard = [ln for ln in text.splitlines() if ln.strip().startswith("@!")][-1]
    path.write_text(text.replace(guard + "\n", "", 1))
    with pytest.raises(PtxInterpError, match="out-of-bounds access to `(out|b)`"):
        _run(manifest, path)


def test_a_swapped_operand_changes_the_result(tmp_path: Path) -> None:
    """A mutation of the emitted PTX (the operands of a `selp` swapped) is visible."""
    manifest, path = _linear(tmp_path)
    good = _run(manifest, path, seed=4)
    text = path.read_text()
    line = next(ln for ln in text.splitlines() if "selp.f32" in ln)
    opcode, rest = line.split(None, 1)
    d, a, b, p = (x.strip() for x in rest.rstrip(";").split(","))
    path.write_text(text.replace(line, f"    {opcode} {d}, {b}, {a}, {p};"))
    assert _run(manifest, path, seed=4) != good


# ---------------------------------------------------------------- warp shuffles

# Every mode of `shfl.sync` on a block of two warps: each thread stores what it received.
_SHUFFLES = """
.version 7.0
.target sm_70
.address_size 64

.visible .entry shuffles(
    .param .u64 .ptr .global .align 4 out
)
.reqntid 64, 1, 1
{
    .reg .b32 %r<12>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd0, [out];
    cvta.to.global.u64 %rd1, %rd0;
    mov.u32 %r0, %tid.x;
    shfl.sync.down.b32 %r1, %r0, 3, 0x1f, 0xffffffff;
    shfl.sync.up.b32 %r2, %r0, 2, 0, 0xffffffff;
    shfl.sync.idx.b32 %r3, %r0, 5, 0x1f, 0xffffffff;
    shfl.sync.bfly.b32 %r4, %r0, 6, 0x1f, 0xffffffff;
    shfl.sync.down.b32 %r5, %r0, 1, 0x1807, 0xffffffff;
    mul.wide.u32 %rd2, %r0, 20;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r1;
    st.global.u32 [%rd3+4], %r2;
    st.global.u32 [%rd3+8], %r3;
    st.global.u32 [%rd3+12], %r4;
    st.global.u32 [%rd3+16], %r5;
    ret;
}
"""


def _run_shuffles(text: str) -> list[int]:
    import struct

    from harness.ptx_interp import _Interp, _Memory, _parse

    out = bytearray(64 * 20)
    interp = _Interp(_parse(text), _Memory([(1 << 40, out, "out")]), {})
    interp.params = {"out": struct.pack("<Q", 1 << 40)}
    interp.launch("shuffles", (1, 1, 1))
    return list(struct.unpack(f"<{64 * 5}I", bytes(out)))


def test_shuffles_take_the_source_lane_as_the_ptx_isa_says() -> None:
    got = _run_shuffles(_SHUFFLES)
    for t in range(64):
        base, lane = t - t % 32, t % 32
        down = base + lane + 3 if lane + 3 <= 31 else t  # past the clamp: its own value
        up = base + lane - 2 if lane >= 2 else t
        # c = 0x1807: segments of 8 lanes (segmask 0x18, clamp 7): down stays in its segment
        seg_down = t + 1 if lane % 8 != 7 else t
        assert got[5 * t : 5 * t + 5] == [down, up, base + 5, base + (lane ^ 6), seg_down], t


def test_a_shuffle_some_lanes_skip_is_caught() -> None:
    # Lanes 16..63 jump over the shuffle (and over the stores), lanes 0..15 wait for them.
    text = _SHUFFLES.replace(
        "    shfl.sync.down.b32 %r1, %r0, 3,",
        "    setp.ge.u32 %p0, %r0, 16;\n    @%p0 bra $L_end;\n    shfl.sync.down.b32 %r1, %r0, 3,",
    )
    text = text.replace("    ret;\n}", "$L_end:\n    ret;\n}").replace(
        ".reg .b32 %r<12>;", ".reg .pred %p<2>;\n    .reg .b32 %r<12>;"
    )
    with pytest.raises(PtxInterpError, match="exited lane"):
        _run_shuffles(text)


_CONSTANTS = """
.version 7.0
.target sm_70
.address_size 64

.visible .entry constants(
    .param .u64 .ptr .global .align 4 out
)
.reqntid 1, 1, 1
{
    .reg .f32 %f<4>;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd0, [out];
    cvta.to.global.u64 %rd1, %rd0;
    mov.f32 %f0, 0f80000000;
    mov.f32 %f1, 0f00000000;
    add.rn.f32 %f2, %f0, %f3;
    st.global.f32 [%rd1], %f0;
    st.global.f32 [%rd1+4], %f1;
    ret;
}
"""


def _run_constants(text: str) -> list[int]:
    import struct

    from harness.ptx_interp import _Interp, _Memory, _parse

    out = bytearray(8)
    interp = _Interp(_parse(text), _Memory([(1 << 40, out, "out")]), {})
    interp.params = {"out": struct.pack("<Q", 1 << 40)}
    interp.launch("constants", (1, 1, 1))
    return list(struct.unpack("<2I", bytes(out)))


def test_constants_equal_as_floats_keep_their_own_bits() -> None:
    # -0.0 == 0.0, yet the two constants have other bits and each keeps its own
    text = _CONSTANTS.replace("    add.rn.f32 %f2, %f0, %f3;\n", "")
    assert _run_constants(text) == [0x80000000, 0x00000000]


def test_a_read_of_an_unwritten_register_is_caught() -> None:
    with pytest.raises(PtxInterpError, match="read of the undefined register %f3"):
        _run_constants(_CONSTANTS)


def test_a_wrong_shuffle_lane_changes_a_reduction(tmp_path: Path) -> None:
    """A mutation of a warp reduction (one butterfly round reading its own lane) is visible."""
    manifest = compiled_ptx("reductions", "sum_all", tmp_path / "sum")
    dims = _dims(manifest, "small")
    inputs = random_inputs(manifest, dims, seed=3)
    good = run_ptx_manifest_cpu(manifest, tmp_path / "sum", inputs, dims)
    for kernel in manifest["kernels"]:
        path = tmp_path / "sum" / kernel["file"]
        text = path.read_text()
        assert "shfl.sync.bfly.b32" in text
        path.write_text(text.replace(", 16, 0x1f, 0xffffffff;", ", 0, 0x1f, 0xffffffff;", 1))
    assert run_ptx_manifest_cpu(manifest, tmp_path / "sum", inputs, dims) != good


def test_a_missing_cp_async_wait_leaves_the_tile_stale(tmp_path: Path) -> None:
    """The interpreter lands a `cp.async` in shared memory only at a wait, as the ISA
    allows: with the waits gone the products read tiles that were never filled."""
    manifest, path = _linear(tmp_path)
    good = _run(manifest, path, seed=5)
    text = path.read_text()
    assert text.count("cp.async.wait_all;") == 2  # after the first slice, after each slice
    path.write_text(text.replace("    cp.async.wait_all;\n", ""))
    assert _run(manifest, path, seed=5) != good


def test_a_misaligned_vector_load_is_caught(tmp_path: Path) -> None:
    manifest, path = _linear(tmp_path)
    text = path.read_text()
    line = next(ln for ln in text.splitlines() if "ld.shared.v4.f32" in ln and "+256]" in ln)
    path.write_text(text.replace(line, line.replace("+256]", "+260]"), 1))
    with pytest.raises(PtxInterpError, match="misaligned 4-wide vector load"):
        _run(manifest, path)


def _total_ptx(folder: Path) -> dict[str, Any]:
    path = KERNELS / "big_reduction.py"
    result = compile_source(str(path), path.read_text(), ["ptx"], function="total")
    assert result.ok, [(d.code, d.message) for d in result.diagnostics]
    folder.mkdir(parents=True, exist_ok=True)
    for relative, content in result.files.items():
        assert isinstance(content, str)
        (folder / relative).write_text(content)
    return json.loads(result.files["total.manifest.json"])  # type: ignore[arg-type]


def test_one_launch_total_any_block_last_repeated_and_as_two_launches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`x.sum()` over 4 workgroups' chunks is one launch whose last block combines the
    partials: the same bits whichever block runs last (blocks in order and reversed), on a
    second run on the same buffers (the counter is back at zero), and as the two launches
    a target without a device-scope fence gets (PTX compiled as if it had none)."""
    from mimir.codegen.backends.ptx import PTX
    from mimir.codegen.schedule.layout import CHUNK

    manifest = _total_ptx(tmp_path / "one")
    (kernel,) = manifest["kernels"]
    counters = [b for b in manifest["buffers"] if b.get("zero")]
    assert [(b["role"], b["dtype"], b["shape"]) for b in counters] == [("scratch", "uint32", [1])]
    assert any(b["buffer"] == counters[0]["name"] for b in kernel["bindings"])
    dims = {"N": 3 * CHUNK + 77}
    inputs = random_inputs(manifest, dims, seed=15)
    expected = shim_reference(KERNELS / "big_reduction.py", "total", inputs, dims, {})
    kept: dict[str, bytearray] = {}
    first = run_ptx_manifest_cpu(manifest, tmp_path / "one", inputs, dims, buffers=kept)
    _compare(manifest, first, expected, "big_reduction", "total", dims)
    assert kept[counters[0]["name"]] == bytearray(4)  # the last block reset it
    again = run_ptx_manifest_cpu(manifest, tmp_path / "one", inputs, dims, buffers=kept)
    backwards = run_ptx_manifest_cpu(manifest, tmp_path / "one", inputs, dims, reverse_blocks=True)
    assert first == again == backwards
    monkeypatch.setattr(PTX, "device_fence", False)
    two = _total_ptx(tmp_path / "two")
    assert [k["entry_point"] for k in two["kernels"]] == ["total_0_partial", "total_1_reduce"]
    assert not any(b.get("zero") for b in two["buffers"])
    assert run_ptx_manifest_cpu(two, tmp_path / "two", inputs, dims) == first


def test_a_block_that_is_not_last_leaves_the_output_alone(tmp_path: Path) -> None:
    """Run forward, the first block reads ticket 0 of 4 and returns; were the ticket
    ignored (every block combining), the result would still match, so this runs one
    block alone and checks that it did not write the output and left the counter at 1."""
    from mimir.codegen.schedule.layout import CHUNK

    manifest = _total_ptx(tmp_path)
    (kernel,) = manifest["kernels"]
    dims = {"N": 3 * CHUNK + 77}
    inputs = random_inputs(manifest, dims, seed=16)
    one_block = {**manifest, "kernels": [{**kernel, "workgroups": [1, 1, 1]}]}
    kept: dict[str, bytearray] = {}
    out = run_ptx_manifest_cpu(one_block, tmp_path, inputs, dims, buffers=kept)
    assert out["out"] == [0.0]
    (counter,) = [b["name"] for b in manifest["buffers"] if b.get("zero")]
    assert kept[counter] == bytearray([1, 0, 0, 0])


def test_a_sum_whose_count_can_be_zero_keeps_two_launches(tmp_path: Path) -> None:
    """With `min=0` no workgroup may run, so none would find itself last and write the
    output: such a sum keeps `partial` then `reduce`, which writes the empty sum."""
    text = (
        "from mimir.array import Dim, Tensor, float32, gpu\n\n"
        'E = Dim("E", min=0)\n\n\n'
        "@gpu\n"
        "def empty_ok_sum(x: Tensor[float32, E]) -> Tensor[float32]:\n"
        "    return x.sum() + 1.0\n"
    )
    result = compile_source(str(tmp_path / "k.py"), text, ["ptx"], function="empty_ok_sum")
    assert result.ok, [(d.code, d.message) for d in result.diagnostics]
    for relative, content in result.files.items():
        (tmp_path / relative).write_text(content)  # type: ignore[arg-type]
    manifest = json.loads(result.files["empty_ok_sum.manifest.json"])  # type: ignore[arg-type]
    assert [k["entry_point"] for k in manifest["kernels"]] == [
        "empty_ok_sum_0_partial",
        "empty_ok_sum_1_reduce",
    ]
    assert run_ptx_manifest_cpu(manifest, tmp_path, {"x": []}, {"E": 0}) == {"out": [1.0]}
    x = [0.5] * 5000
    assert run_ptx_manifest_cpu(manifest, tmp_path, {"x": x}, {"E": 5000}) == {"out": [2501.0]}
