"""Self-tests of the execution harness, independent of Mimir's compiler.

Hand-written WGSL and MSL kernels with hand-written manifests prove that the
runners (`mimir.runtime.wgpu_runner`, `harness.msl_runner`) follow the manifest
contract: buffers, the uniform block, bindings, launch order, workgroup counts;
that the MSL emulation has real barriers (a missing one is caught by
ThreadSanitizer); and that the dim expression evaluator is safe.
"""

from __future__ import annotations

import json
import math
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from harness import assert_close, in_ci, random_inputs, require, require_tool

from mimir.runtime import dimexpr
from mimir.runtime import manifest as mf
from mimir.runtime.dimexpr import DimExprError

# ---------------------------------------------------------------- dim expressions


@pytest.mark.parametrize(
    ("text", "env", "want"),
    [
        ("7", {}, 7),
        ("N", {"N": 13}, 13),
        ("cdiv(N, 64)", {"N": 1}, 1),
        ("cdiv(N, 64)", {"N": 64}, 1),
        ("cdiv(N, 64)", {"N": 65}, 2),
        ("cdiv(N * M, 256)", {"N": 7, "M": 131}, 4),
        ("2 + 3 * N", {"N": 5}, 17),
        ("(2 + 3) * N", {"N": 5}, 25),
        ("N - 2 - 1", {"N": 10}, 7),
        ("N // 4 * 4", {"N": 10}, 8),
        ("N // (4 * 4)", {"N": 40}, 2),
        ("N % 3 + 1", {"N": 8}, 3),
        ("-7 // 2", {}, -4),
        ("cdiv(cdiv(N, 16) + 1, 2)", {"N": 100}, 4),
        (" (K + 3)  //  4 ", {"K": 13}, 4),
    ],
)
def test_dimexpr_evaluates(text: str, env: dict[str, int], want: int) -> None:
    assert dimexpr.evaluate(text, env) == want


def test_dimexpr_int_passthrough_and_names() -> None:
    assert dimexpr.evaluate(42, {}) == 42
    assert dimexpr.names("cdiv(N * M, 256) + K % 2") == {"N", "M", "K"}
    assert dimexpr.names(3) == set()


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('true')",
        "pow(N, 2)",
        "max(N, 2)",
        "N.bit_length()",
        "N.real",
        "x[0]",
        "N / 2",
        "N ** 2",
        "N << 1",
        "N > 2",
        "N if N else 1",
        "lambda: 1",
        "1.5",
        "True",
        "'N'",
        "cdiv(N)",
        "cdiv(N, 2, 3)",
        "cdiv(a=N, b=2)",
        "cdiv(*N)",
        "[N]",
        "N; N",
        "",
        "N +",
    ],
)
def test_dimexpr_rejects(text: str) -> None:
    with pytest.raises(DimExprError):
        dimexpr.evaluate(text, {"N": 4, "x": 1})


def test_dimexpr_runtime_errors() -> None:
    with pytest.raises(DimExprError, match="`M` has no value"):
        dimexpr.evaluate("N + M", {"N": 1})
    with pytest.raises(DimExprError, match="division by zero"):
        dimexpr.evaluate("N // (N - N)", {"N": 3})
    with pytest.raises(DimExprError, match="non-positive"):
        dimexpr.evaluate("cdiv(N, 0)", {"N": 3})
    with pytest.raises(DimExprError):
        dimexpr.evaluate(True, {})  # type: ignore[arg-type]


def test_runtime_import_is_cheap() -> None:
    """`import mimir.runtime` must not pull in wgpu (an optional extra)."""
    code = "import sys, mimir.runtime; print('wgpu' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_missing_wgpu_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from mimir.runtime import wgpu_runner

    monkeypatch.setitem(sys.modules, "wgpu", None)  # makes `import wgpu` raise ImportError
    with pytest.raises(
        wgpu_runner.GpuUnavailableError, match=r"pip install 'mimir-kernels\[gpu\]'"
    ):
        wgpu_runner.validate_wgsl("fn main() {}")


# ---------------------------------------------------------------- manifest layout


def test_uniform_block_layout() -> None:
    manifest = {
        "uniform": {
            "fields": [
                {"name": "N", "type": "u32"},
                {"name": "K", "type": "i32"},
                {"name": "alpha", "type": "f32"},
            ]
        }
    }
    data = mf.pack_uniform(manifest, {"N": 7, "K": -2}, {"alpha": 0.5})
    assert data == struct.pack("<Iif", 7, -2, 0.5) + bytes(4)
    assert mf.pack_uniform({"uniform": None}, {}) is None
    with pytest.raises(mf.ManifestError, match="no value for uniform field `alpha`"):
        mf.pack_uniform(manifest, {"N": 7, "K": 1})


def test_element_encoding_round_trips() -> None:
    assert mf.element_size("bool_") == 4
    assert mf.element_size("float16") == 2
    assert mf.decode(mf.encode([True, False], "bool_"), "bool_", 2) == [True, False]
    assert mf.decode(mf.encode([0.5, -2.0], "float16"), "float16", 2) == [0.5, -2.0]
    assert mf.decode(mf.encode([-3, 4], "int32"), "int32", 2) == [-3, 4]
    assert len(mf.encode([1.0, 2.0, 3.0], "float32")) == 12


def test_check_dims_constraints() -> None:
    manifest = {"dims": [{"name": "N", "min": 1, "max": 64, "multiple_of": 4}]}
    mf.check_dims(manifest, {"N": 8})
    for bad, why in [(0, "below"), (68, "above"), (6, "multiple"), (None, "no value")]:
        with pytest.raises(mf.ManifestError, match=why):
            mf.check_dims(manifest, {} if bad is None else {"N": bad})


def test_random_inputs_are_seeded_and_typed() -> None:
    manifest = _manifest(
        "x",
        buffers=[
            _buf("a", "input", "float32", ["N", 3]),
            _buf("m", "input", "bool_", ["N"]),
            _buf("i", "input", "int32", ["N"]),
            _buf("out", "output", "float32", ["N"]),
        ],
        kernels=[],
    )
    one = random_inputs(manifest, {"N": 5}, seed=1)
    assert one == random_inputs(manifest, {"N": 5}, seed=1)
    assert one != random_inputs(manifest, {"N": 5}, seed=2)
    assert set(one) == {"a", "m", "i"}
    assert len(one["a"]) == 15 and all(-1.0 <= v < 1.0 for v in one["a"])
    assert all(isinstance(v, bool) for v in one["m"])
    assert all(isinstance(v, int) for v in one["i"])


def test_assert_close_tolerances() -> None:
    assert_close([1.0, 2.00001], [1.0, 2.0], "float32")
    assert_close([float("nan")], [float("nan")], "float32")
    with pytest.raises(AssertionError, match="1 of 2 float32 values differ"):
        assert_close([1.0, 2.1], [1.0, 2.0], "float32")
    with pytest.raises(AssertionError):
        assert_close([3], [4], "int32")
    with pytest.raises(AssertionError):
        assert_close([float("nan")], [0.0], "float32")


def test_require_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    assert in_ci()
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        require(False, "frobnicator is missing")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="frobnicator"):
        require(False, "frobnicator is missing")


# ---------------------------------------------------------------- helpers


def _buf(name: str, role: str, dtype: str, shape: list[Any]) -> dict[str, Any]:
    return {"name": name, "role": role, "dtype": dtype, "shape": shape}


def _bind(buffer: str, binding: int, access: str) -> dict[str, Any]:
    return {"buffer": buffer, "group": 0, "binding": binding, "access": access}


def _kernel(
    file: str,
    entry: str,
    size: int,
    groups: list[Any],
    bindings: list[dict[str, Any]],
    uniform: int | None,
) -> dict[str, Any]:
    return {
        "file": file,
        "entry_point": entry,
        "workgroup_size": [size, 1, 1],
        "workgroups": groups,
        "bindings": bindings,
        "uniform_binding": None if uniform is None else {"group": 0, "binding": uniform},
    }


def _manifest(
    function: str,
    *,
    buffers: list[dict[str, Any]],
    kernels: list[dict[str, Any]],
    backend: str = "wgsl",
    uniform: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    manifest = {
        "format": "mimir-manifest/1",
        "function": function,
        "source": f"{function}.py",
        "backend": backend,
        "dims": [{"name": "N", "min": 1, "max": None, "multiple_of": None}],
        "buffers": buffers,
        "uniform": None if uniform is None else {"fields": uniform},
        "kernels": kernels,
    }
    # Every manifest the harness sees goes through JSON, like one read from disk.
    return json.loads(json.dumps(manifest))


def _f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


SIZES = [1, 7, 13, 131, 1000]

# ---------------------------------------------------------------- WGSL on wgpu

ADD_WGSL = """
struct Params { n: u32, scale: f32 }
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;

@compute @workgroup_size(64)
fn add(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= params.n) { return; }
    out[i] = (a[i] + b[i]) * params.scale;
}
"""


def _add_manifest(file: str, backend: str) -> dict[str, Any]:
    return _manifest(
        "add",
        backend=backend,
        buffers=[
            _buf("a", "input", "float32", ["N"]),
            _buf("b", "input", "float32", ["N"]),
            _buf("out", "output", "float32", ["N"]),
        ],
        uniform=[{"name": "N", "type": "u32"}, {"name": "scale", "type": "f32"}],
        kernels=[
            _kernel(
                file,
                "add",
                64,
                ["cdiv(N, 64)", 1, 1],
                [_bind("a", 0, "read"), _bind("b", 1, "read"), _bind("out", 2, "read_write")],
                3,
            )
        ],
    )


@pytest.fixture
def wgpu_runner() -> Any:
    require_tool("wgpu")
    from mimir.runtime import wgpu_runner

    return wgpu_runner


def test_validate_wgsl_reports_nagas_message(wgpu_runner: Any) -> None:
    wgpu_runner.validate_wgsl(ADD_WGSL)
    wrong = "expected to be `f32`, but got `u32`"
    with pytest.raises(wgpu_runner.WgslValidationError, match=wrong):
        wgpu_runner.validate_wgsl("@compute @workgroup_size(1) fn main() { let x: f32 = 1u; }")


@pytest.mark.parametrize("n", [*SIZES, 100_003])
def test_wgsl_add_kernel(wgpu_runner: Any, tmp_path: Path, n: int) -> None:
    (tmp_path / "add.wgsl").write_text(ADD_WGSL)
    manifest = _add_manifest("add.wgsl", "wgsl")
    inputs = random_inputs(manifest, {"N": n}, seed=n)
    out = wgpu_runner.run_manifest(manifest, tmp_path, inputs, {"N": n}, {"scale": 0.5})
    want = [_f32((_f32(x + y)) * 0.5) for x, y in zip(inputs["a"], inputs["b"], strict=True)]
    assert_close(out["out"], want, "float32", rtol=0.0, atol=0.0)


def test_wgsl_store_outside_a_buffer_changes_its_guard_region(
    wgpu_runner: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each buffer lies between guard regions that must stay untouched.

    No adapter here lets a kernel store outside its binding (naga and Vulkan clamp), so the
    breach is made on the host side: `out` is bound 256 bytes early, into its leading guard,
    as a host with an offset bug would bind it.
    """
    real = wgpu_runner._bind_groups

    class EarlyBinding:
        def __init__(self, device: Any) -> None:
            self.device = device

        def create_bind_group(self, *, layout: Any, entries: list) -> Any:
            for entry in entries:
                if entry["binding"] == 2:
                    entry["resource"]["offset"] = 0
            return self.device.create_bind_group(layout=layout, entries=entries)

    monkeypatch.setattr(
        wgpu_runner, "_bind_groups", lambda device, *rest: real(EarlyBinding(device), *rest)
    )
    (tmp_path / "add.wgsl").write_text(ADD_WGSL)
    manifest = _add_manifest("add.wgsl", "wgsl")
    inputs = random_inputs(manifest, {"N": 5}, seed=5)
    with pytest.raises(wgpu_runner.GuardRegionError, match="before the start of buffer `out`"):
        wgpu_runner.run_manifest(manifest, tmp_path, inputs, {"N": 5}, {"scale": 0.5})


TWO_STAGE_WGSL = """
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> tmp: array<f32>;
@group(0) @binding(2) var<uniform> n: vec4<u32>;

@compute @workgroup_size(32)
fn double_it(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x < n.x) { tmp[gid.x] = x[gid.x] * 2.0; }
}
"""

TWO_STAGE_WGSL_2 = """
@group(1) @binding(0) var<storage, read> tmp: array<f32>;
@group(1) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(0) var<uniform> n: vec4<u32>;

@compute @workgroup_size(16)
fn add_one(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * 16u * 8u;
    if (i < n.x) { out[i] = tmp[i] + 1.0; }
}
"""


def test_wgsl_launch_order_scratch_and_groups(wgpu_runner: Any, tmp_path: Path) -> None:
    (tmp_path / "k1.wgsl").write_text(TWO_STAGE_WGSL)
    (tmp_path / "k2.wgsl").write_text(TWO_STAGE_WGSL_2)
    second = _kernel("k2.wgsl", "add_one", 16, [8, "cdiv(N, 16 * 8)", 1], [], 0)
    second["bindings"] = [
        {"buffer": "tmp", "group": 1, "binding": 0, "access": "read"},
        {"buffer": "out", "group": 1, "binding": 1, "access": "read_write"},
    ]
    manifest = _manifest(
        "two_stage",
        buffers=[
            _buf("x", "input", "float32", ["N"]),
            _buf("tmp", "scratch", "float32", ["N"]),
            _buf("out", "output", "float32", ["N"]),
        ],
        uniform=[{"name": "N", "type": "u32"}],
        kernels=[
            _kernel(
                "k1.wgsl",
                "double_it",
                32,
                ["cdiv(N, 32)", 1, 1],
                [_bind("x", 0, "read"), _bind("tmp", 1, "read_write")],
                2,
            ),
            second,
        ],
    )
    for n in (1, 129, 1000):
        inputs = random_inputs(manifest, {"N": n}, seed=3)
        out = wgpu_runner.run_manifest(manifest, tmp_path, inputs, {"N": n})
        assert set(out) == {"out"}
        assert_close(out["out"], [x * 2.0 + 1.0 for x in inputs["x"]], "float32")


MIXED_WGSL = """
enable f16;
@group(0) @binding(0) var<storage, read> x: array<f16>;
@group(0) @binding(1) var<storage, read> keep: array<u32>;
@group(0) @binding(2) var<storage, read_write> out0: array<f16>;
@group(0) @binding(3) var<storage, read_write> out1: array<u32>;

@compute @workgroup_size(64)
fn masked(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= arrayLength(&keep)) { return; }
    out0[i] = select(f16(0.0), x[i] * f16(2.0), keep[i] != 0u);
    out1[i] = u32(x[i] > f16(0.0));
}
"""


def test_wgsl_float16_and_bool_buffers(wgpu_runner: Any, tmp_path: Path) -> None:
    (tmp_path / "masked.wgsl").write_text(MIXED_WGSL)
    manifest = _manifest(
        "masked",
        buffers=[
            _buf("x", "input", "float16", ["N"]),
            _buf("keep", "input", "bool_", ["N"]),
            _buf("out0", "output", "float16", ["N"]),
            _buf("out1", "output", "bool_", ["N"]),
        ],
        kernels=[
            _kernel(
                "masked.wgsl",
                "masked",
                64,
                ["cdiv(N, 64)", 1, 1],
                [
                    _bind("x", 0, "read"),
                    _bind("keep", 1, "read"),
                    _bind("out0", 2, "read_write"),
                    _bind("out1", 3, "read_write"),
                ],
                None,
            )
        ],
    )
    # An odd count of halfs: the buffer is padded to whole words.
    inputs = random_inputs(manifest, {"N": 131}, seed=5)
    out = wgpu_runner.run_manifest(manifest, tmp_path, inputs, {"N": 131})
    want0 = [x * 2.0 if k else 0.0 for x, k in zip(inputs["x"], inputs["keep"], strict=True)]
    assert_close(out["out0"], want0, "float16", rtol=0.0, atol=0.0)
    assert out["out1"] == [x > 0 for x in inputs["x"]]


def test_wgsl_binding_access_must_match_the_shader(wgpu_runner: Any, tmp_path: Path) -> None:
    (tmp_path / "add.wgsl").write_text(ADD_WGSL)
    manifest = _add_manifest("add.wgsl", "wgsl")
    manifest["kernels"][0]["bindings"][2]["access"] = "read"  # the shader writes `out`
    inputs = random_inputs(manifest, {"N": 8}, seed=0)
    with pytest.raises(mf.ManifestError, match="does not match its manifest"):
        wgpu_runner.run_manifest(manifest, tmp_path, inputs, {"N": 8}, {"scale": 1.0})


def test_a_kernel_run_again_at_other_sizes_is_not_compiled_again(
    wgpu_runner: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pipelines are kept per process by the module's bytes, entry point and bindings: the
    same kernel at three sizes compiles once; other code, or the same code under a binding
    that disagrees with it, is compiled (and refused) afresh."""
    monkeypatch.setattr(wgpu_runner, "_PIPELINES", type(wgpu_runner._PIPELINES)())
    made: list[str] = []
    real = wgpu_runner._pipeline
    monkeypatch.setattr(
        wgpu_runner,
        "_pipeline",
        lambda wgpu, device, module, kernel, manifest: (
            made.append(kernel["entry_point"]) or real(wgpu, device, module, kernel, manifest)
        ),
    )
    (tmp_path / "add.wgsl").write_text(ADD_WGSL)
    manifest = _add_manifest("add.wgsl", "wgsl")
    for n in (1, 65, 1000):
        inputs = random_inputs(manifest, {"N": n}, seed=n)
        out = wgpu_runner.run_manifest(manifest, tmp_path, inputs, {"N": n}, {"scale": 2.0})
        want = [_f32(_f32(x + y) * 2.0) for x, y in zip(inputs["a"], inputs["b"], strict=True)]
        assert out["out"] == want
    assert made == ["add"]

    (tmp_path / "add.wgsl").write_text(ADD_WGSL.replace("* params.scale", "- params.scale"))
    inputs = random_inputs(manifest, {"N": 5}, seed=5)
    out = wgpu_runner.run_manifest(manifest, tmp_path, inputs, {"N": 5}, {"scale": 2.0})
    pairs = zip(inputs["a"], inputs["b"], strict=True)
    assert out["out"] == [_f32(_f32(x + y) - 2.0) for x, y in pairs]
    assert made == ["add", "add"]

    manifest["kernels"][0]["bindings"][2]["access"] = "read"  # the shader writes `out`
    with pytest.raises(mf.ManifestError, match="does not match its manifest"):
        wgpu_runner.run_manifest(manifest, tmp_path, inputs, {"N": 5}, {"scale": 2.0})


def test_wgsl_dispatch_limit_is_a_clear_error(wgpu_runner: Any, tmp_path: Path) -> None:
    (tmp_path / "add.wgsl").write_text(ADD_WGSL)
    manifest = _add_manifest("add.wgsl", "wgsl")
    manifest["kernels"][0]["workgroups"] = ["N * 70000", 1, 1]
    inputs = random_inputs(manifest, {"N": 1}, seed=0)
    with pytest.raises(wgpu_runner.DispatchError, match="70000 workgroups along x"):
        wgpu_runner.run_manifest(manifest, tmp_path, inputs, {"N": 1}, {"scale": 1.0})


def test_wgsl_wrong_input_size_is_refused(wgpu_runner: Any, tmp_path: Path) -> None:
    (tmp_path / "add.wgsl").write_text(ADD_WGSL)
    manifest = _add_manifest("add.wgsl", "wgsl")
    with pytest.raises(mf.ManifestError, match="input `a` has 3 values"):
        wgpu_runner.run_manifest(manifest, tmp_path, {"a": [1.0] * 3, "b": [1.0] * 4}, {"N": 4})


# ---------------------------------------------------------------- MSL on the CPU

BLOCK_SUM_MSL = """
#include <metal_stdlib>
using namespace metal;

struct Params { uint n; };

kernel void block_sum(const device float* x [[buffer(0)]],
                      device float* out [[buffer(1)]],
                      constant Params& p [[buffer(2)]],
                      uint gid [[thread_position_in_grid]],
                      uint lid [[thread_position_in_threadgroup]],
                      uint3 group [[threadgroup_position_in_grid]]) {
    threadgroup float partial[64];
    partial[lid] = gid < p.n ? x[gid] : 0.0f;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint stride = 32; stride > 0; stride >>= 1) {
        if (lid < stride) {
            partial[lid] += partial[lid + stride];
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    if (lid == 0) {
        out[group.x] = partial[0];
    }
}
"""

# The same kernel with the barrier between the stores and the tree removed.
NO_BARRIER_MSL = BLOCK_SUM_MSL.replace(
    "0.0f;\n    threadgroup_barrier(mem_flags::mem_threadgroup);", "0.0f;", 1
)


def _block_sum_manifest(file: str) -> dict[str, Any]:
    return _manifest(
        "block_sum",
        backend="msl",
        buffers=[
            _buf("x", "input", "float32", ["N"]),
            _buf("out", "output", "float32", ["cdiv(N, 64)"]),
        ],
        uniform=[{"name": "N", "type": "u32"}],
        kernels=[
            _kernel(
                file,
                "block_sum",
                64,
                ["cdiv(N, 64)", 1, 1],
                [_bind("x", 0, "read"), _bind("out", 1, "read_write")],
                2,
            )
        ],
    )


def _block_sums(x: list[float]) -> list[float]:
    return [math.fsum(x[i : i + 64]) for i in range(0, len(x), 64)]


@pytest.fixture
def msl() -> Any:
    require_tool("clang++")
    from harness import msl_runner

    return msl_runner


def test_no_barrier_variant_really_lacks_the_barrier() -> None:
    assert (
        NO_BARRIER_MSL.count("threadgroup_barrier")
        == BLOCK_SUM_MSL.count("threadgroup_barrier") - 1
    )


@pytest.mark.parametrize("n", SIZES)
def test_msl_block_sum_with_threadgroup_memory(msl: Any, tmp_path: Path, n: int) -> None:
    (tmp_path / "block_sum.metal").write_text(BLOCK_SUM_MSL)
    manifest = _block_sum_manifest("block_sum.metal")
    inputs = random_inputs(manifest, {"N": n}, seed=n)
    out = msl.run_msl_manifest(manifest, tmp_path, inputs, {"N": n})
    assert_close(out["out"], _block_sums(inputs["x"]), "float32")


def test_msl_tsan_passes_the_correct_kernel(msl: Any, tmp_path: Path) -> None:
    require_tool("tsan")
    (tmp_path / "block_sum.metal").write_text(BLOCK_SUM_MSL)
    manifest = _block_sum_manifest("block_sum.metal")
    inputs = random_inputs(manifest, {"N": 131}, seed=0)
    out = msl.run_msl_manifest(manifest, tmp_path, inputs, {"N": 131}, sanitize="thread")
    assert_close(out["out"], _block_sums(inputs["x"]), "float32")


def test_msl_tsan_catches_a_missing_barrier(msl: Any, tmp_path: Path) -> None:
    require_tool("tsan")
    (tmp_path / "block_sum.metal").write_text(NO_BARRIER_MSL)
    manifest = _block_sum_manifest("block_sum.metal")
    inputs = random_inputs(manifest, {"N": 131}, seed=0)
    with pytest.raises(msl.MslRunError, match="ThreadSanitizer: data race"):
        msl.run_msl_manifest(manifest, tmp_path, inputs, {"N": 131}, sanitize="thread")


DIVERGENT_MSL = """
#include <metal_stdlib>
using namespace metal;
kernel void early_exit(const device float* x [[buffer(0)]],
                       device float* out [[buffer(1)]],
                       uint gid [[thread_position_in_grid]],
                       uint lid [[thread_position_in_threadgroup]]) {
    threadgroup float tile[32];
    if (gid >= 40) return;  // returns before the barrier: undefined on a GPU
    tile[lid] = x[gid];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    out[gid] = tile[31 - lid];
}
"""


def test_msl_barrier_divergence_is_reported(msl: Any, tmp_path: Path) -> None:
    (tmp_path / "k.metal").write_text(DIVERGENT_MSL)
    manifest = _manifest(
        "early_exit",
        backend="msl",
        buffers=[_buf("x", "input", "float32", ["N"]), _buf("out", "output", "float32", ["N"])],
        kernels=[
            _kernel(
                "k.metal",
                "early_exit",
                32,
                ["cdiv(N, 32)", 1, 1],
                [_bind("x", 0, "read"), _bind("out", 1, "read_write")],
                None,
            )
        ],
    )
    inputs = random_inputs(manifest, {"N": 64}, seed=0)
    with pytest.raises(msl.MslRunError, match="barrier divergence"):
        msl.run_msl_manifest(manifest, tmp_path, inputs, {"N": 64}, timeout=60)


UNGUARDED_MSL = """
#include <metal_stdlib>
using namespace metal;
kernel void scale(const device float* x [[buffer(0)]],
                  device float* out [[buffer(1)]],
                  uint gid [[thread_position_in_grid]]) {
    out[gid] = 2.0f * x[gid < 7 ? gid : 0];  // no bounds guard on the store
}
"""


def test_msl_out_of_bounds_write_is_reported(msl: Any, tmp_path: Path) -> None:
    (tmp_path / "k.metal").write_text(UNGUARDED_MSL)
    manifest = _manifest(
        "scale",
        backend="msl",
        buffers=[_buf("x", "input", "float32", ["N"]), _buf("out", "output", "float32", ["N"])],
        kernels=[
            _kernel(
                "k.metal",
                "scale",
                64,
                ["cdiv(N, 64)", 1, 1],
                [_bind("x", 0, "read"), _bind("out", 1, "read_write")],
                None,
            )
        ],
    )
    inputs = random_inputs(manifest, {"N": 7}, seed=0)
    with pytest.raises(msl.MslRunError, match="out of bounds of buffer `out`|past the end"):
        msl.run_msl_manifest(manifest, tmp_path, inputs, {"N": 7})


UNGUARDED_READ_MSL = """
#include <metal_stdlib>
using namespace metal;
kernel void scale(const device float* x [[buffer(0)]],
                  device float* out [[buffer(1)]],
                  uint gid [[thread_position_in_grid]]) {
    float v = x[gid];  // no bounds guard on the load
    if (gid < 7) out[gid] = 2.0f * v;
    else if (v == 12345.0f) out[0] = v;  // keeps the stray load alive
}
"""


def test_msl_asan_catches_an_out_of_bounds_read(msl: Any, tmp_path: Path) -> None:
    require_tool("asan")
    (tmp_path / "k.metal").write_text(UNGUARDED_READ_MSL)
    manifest = _manifest(
        "scale",
        backend="msl",
        buffers=[_buf("x", "input", "float32", ["N"]), _buf("out", "output", "float32", ["N"])],
        kernels=[
            _kernel(
                "k.metal",
                "scale",
                64,
                ["cdiv(N, 64)", 1, 1],
                [_bind("x", 0, "read"), _bind("out", 1, "read_write")],
                None,
            )
        ],
    )
    inputs = random_inputs(manifest, {"N": 7}, seed=0)
    # Without a sanitizer the stray read lands in the guard band and goes unseen.
    out = msl.run_msl_manifest(manifest, tmp_path, inputs, {"N": 7})
    assert out["out"] == [2.0 * v for v in inputs["x"]]
    with pytest.raises(msl.MslRunError, match="AddressSanitizer: heap-buffer-overflow"):
        msl.run_msl_manifest(manifest, tmp_path, inputs, {"N": 7}, sanitize="address")


# Everything a scheduled kernel tends to use, in one place: a helper taking a
# threadgroup pointer, two kernels in one file, unqualified and qualified math,
# integer min/max/abs, select, as_type, uint3 ids and precise:: functions.
LIBRARY_MSL = """
#include <metal_stdlib>
using namespace metal;

constant uint TILE = 32;

struct Params {
    uint n;
    float alpha;
};

static float tile_max(threadgroup const float* t, uint count) {
    float m = -INFINITY;
    for (uint i = 0; i < count; ++i) m = max(m, t[i]);
    return m;
}

kernel void math_ops(const device float* x [[buffer(0)]],
                     const device int* k [[buffer(1)]],
                     device float* out [[buffer(2)]],
                     device int* iout [[buffer(3)]],
                     constant Params& p [[buffer(4)]],
                     uint3 gid [[thread_position_in_grid]]) {
    uint i = gid.x;
    if (i >= p.n) return;
    float v = x[i];
    float r = exp(v) + log(fabs(v) + 1.0f) + sqrt(fabs(v)) + rsqrt(fabs(v) + 1.0f);
    r += tanh(v) + metal::precise::exp(-v) + precise::tanh(v) + abs(v) + floor(v * 4.0f);
    r += pow(fabs(v), 1.5f) + clamp(v, -0.5f, 0.5f) + fmax(v, 0.0f) + fmin(v, 0.0f);
    r += select(0.0f, p.alpha, v > 0.0f) + as_type<float>(as_type<uint>(v));
    out[i] = r;
    iout[i] = max(k[i], 0) + min(k[i], 2) + abs(k[i]) + int(clamp(uint(abs(k[i])), 1u, 3u));
}

kernel void row_max(const device float* x [[buffer(0)]],
                    device float* out [[buffer(1)]],
                    constant Params& p [[buffer(2)]],
                    uint2 lid [[thread_position_in_threadgroup]],
                    uint2 group [[threadgroup_position_in_grid]]) {
    threadgroup float t[TILE];
    uint i = group.x * TILE + lid.x;
    t[lid.x] = i < p.n ? x[i] : -INFINITY;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (lid.x == 0) out[group.x] = tile_max(t, TILE);
}
"""


def test_msl_library_coverage(msl: Any, tmp_path: Path) -> None:
    (tmp_path / "lib.metal").write_text(LIBRARY_MSL)
    manifest = _manifest(
        "lib",
        backend="msl",
        buffers=[
            _buf("x", "input", "float32", ["N"]),
            _buf("k", "input", "int32", ["N"]),
            _buf("out", "output", "float32", ["N"]),
            _buf("out1", "output", "int32", ["N"]),
            _buf("out2", "output", "float32", ["cdiv(N, 32)"]),
        ],
        uniform=[{"name": "N", "type": "u32"}, {"name": "alpha", "type": "f32"}],
        kernels=[
            _kernel(
                "lib.metal",
                "math_ops",
                64,
                ["cdiv(N, 64)", 1, 1],
                [
                    _bind("x", 0, "read"),
                    _bind("k", 1, "read"),
                    _bind("out", 2, "read_write"),
                    _bind("out1", 3, "read_write"),
                ],
                4,
            ),
            _kernel(
                "lib.metal",
                "row_max",
                32,
                ["cdiv(N, 32)", 1, 1],
                [_bind("x", 0, "read"), _bind("out2", 1, "read_write")],
                2,
            ),
        ],
    )
    n = 77
    inputs = random_inputs(manifest, {"N": n}, seed=9)
    out = msl.run_msl_manifest(manifest, tmp_path, inputs, {"N": n}, {"alpha": 0.25})

    def ref(v: float) -> float:
        r = math.exp(v) + math.log(abs(v) + 1) + math.sqrt(abs(v)) + 1 / math.sqrt(abs(v) + 1)
        r += math.tanh(v) + math.exp(-v) + math.tanh(v) + abs(v) + math.floor(v * 4)
        r += abs(v) ** 1.5 + min(max(v, -0.5), 0.5) + max(v, 0.0) + min(v, 0.0)
        return r + (0.25 if v > 0 else 0.0) + v

    def iref(k: int) -> int:
        return max(k, 0) + min(k, 2) + abs(k) + min(max(abs(k), 1), 3)

    assert_close(out["out"], [ref(v) for v in inputs["x"]], "float32")
    assert out["out1"] == [iref(k) for k in inputs["k"]]
    want = [max(inputs["x"][i : i + 32]) for i in range(0, n, 32)]
    assert_close(out["out2"], want, "float32", rtol=0.0, atol=0.0)


HALF_MSL = """
#include <metal_stdlib>
using namespace metal;
kernel void halve(const device half* x [[buffer(0)]],
                  const device uint* keep [[buffer(1)]],
                  device half* out [[buffer(2)]],
                  constant uint& n [[buffer(3)]],
                  uint gid [[thread_position_in_grid]]) {
    if (gid >= n) return;
    half v = x[gid] * 0.5h + half(1);
    out[gid] = keep[gid] != 0 ? max(v, 1.25h) : half(0.0f);
}
"""


def test_msl_half_and_bool_buffers(msl: Any, tmp_path: Path) -> None:
    require_tool("clang++-half")
    (tmp_path / "half.metal").write_text(HALF_MSL)
    manifest = _manifest(
        "halve",
        backend="msl",
        buffers=[
            _buf("x", "input", "float16", ["N"]),
            _buf("keep", "input", "bool_", ["N"]),
            _buf("out", "output", "float16", ["N"]),
        ],
        uniform=[{"name": "N", "type": "u32"}],
        kernels=[
            _kernel(
                "half.metal",
                "halve",
                32,
                ["cdiv(N, 32)", 1, 1],
                [_bind("x", 0, "read"), _bind("keep", 1, "read"), _bind("out", 2, "read_write")],
                3,
            )
        ],
    )
    inputs = random_inputs(manifest, {"N": 45}, seed=4)
    out = msl.run_msl_manifest(manifest, tmp_path, inputs, {"N": 45})
    want = [
        max(x * 0.5 + 1.0, 1.25) if k else 0.0
        for x, k in zip(inputs["x"], inputs["keep"], strict=True)
    ]
    assert_close(out["out"], want, "float16")


def test_msl_builds_are_cached(msl: Any, tmp_path: Path) -> None:
    (tmp_path / "block_sum.metal").write_text(BLOCK_SUM_MSL)
    manifest = _block_sum_manifest("block_sum.metal")
    first = msl.build_driver(manifest, tmp_path)
    assert msl.build_driver(manifest, tmp_path) == first
    (tmp_path / "block_sum.metal").write_text(BLOCK_SUM_MSL.replace("64]", "64 ]"))
    assert msl.build_driver(manifest, tmp_path) != first


def test_msl_binding_access_must_match_the_kernel(msl: Any, tmp_path: Path) -> None:
    (tmp_path / "block_sum.metal").write_text(BLOCK_SUM_MSL)
    manifest = _block_sum_manifest("block_sum.metal")
    manifest["kernels"][0]["bindings"][1]["access"] = "read"  # the kernel writes `out`
    inputs = random_inputs(manifest, {"N": 4}, seed=0)
    with pytest.raises(msl.MslBuildError, match="declares `out` .* writable"):
        msl.run_msl_manifest(manifest, tmp_path, inputs, {"N": 4})


def test_msl_compile_error_carries_clangs_message(msl: Any, tmp_path: Path) -> None:
    (tmp_path / "bad.metal").write_text(BLOCK_SUM_MSL.replace("partial[0];", "partial[0]"))
    manifest = _block_sum_manifest("bad.metal")
    inputs = random_inputs(manifest, {"N": 4}, seed=0)
    with pytest.raises(msl.MslBuildError, match=r"bad\.metal:\d+:\d+: error"):
        msl.run_msl_manifest(manifest, tmp_path, inputs, {"N": 4})


def test_msl_and_wgsl_agree_on_the_same_manifest_contract(
    msl: Any, wgpu_runner: Any, tmp_path: Path
) -> None:
    """One host contract, two backends: the add kernel in MSL and WGSL, same inputs."""
    add_msl = """
#include <metal_stdlib>
using namespace metal;
struct Params { uint n; float scale; };
kernel void add(const device float* a [[buffer(0)]], const device float* b [[buffer(1)]],
                device float* out [[buffer(2)]], constant Params& params [[buffer(3)]],
                uint gid [[thread_position_in_grid]]) {
    if (gid >= params.n) return;
    out[gid] = (a[gid] + b[gid]) * params.scale;
}
"""
    (tmp_path / "add.metal").write_text(add_msl)
    (tmp_path / "add.wgsl").write_text(ADD_WGSL)
    dims = {"N": 131}
    inputs = random_inputs(_add_manifest("add.wgsl", "wgsl"), dims, seed=1)
    a = msl.run_msl_manifest(
        _add_manifest("add.metal", "msl"), tmp_path, inputs, dims, {"scale": 3}
    )
    b = wgpu_runner.run_manifest(
        _add_manifest("add.wgsl", "wgsl"), tmp_path, inputs, dims, {"scale": 3}
    )
    assert a == b
