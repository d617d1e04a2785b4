"""`mimir compile-gpu` for MSL and WGSL: snapshots, manifests, renaming, refusals, the CLI.

The zoo (`tests/kernels/*.py`) is compiled for each backend and compared with the
files under `tests/kernels/out/<backend>/<zoo file>/`; regenerate them with
`MIMIR_UPDATE_SNAPSHOTS=1 pytest tests/test_codegen.py`. Every manifest is
validated against the JSON Schema shipped in the package, every WGSL snapshot
by naga, and every MSL snapshot by clang against the test-only `metal_stdlib`.
Executing the snapshots against the shim is `tests/test_codegen_run.py`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from harness import require_tool
from typer.testing import CliRunner

from mimir import ops
from mimir.cli import app
from mimir.codegen import BACKENDS, compile_file, compile_source, resolve_backends
from mimir.codegen import lower as lw
from mimir.codegen import sizes as sz
from mimir.codegen.backends import MSL, WGSL, Namer
from mimir.codegen.ir import (
    INTRINSICS,
    Binary,
    Call,
    Const,
    CopyAsync,
    If,
    Load,
    Store,
    Var,
    all_expressions,
    lower_vectors,
)
from mimir.codegen.manifest import SCHEMA_PATH, validate_manifest
from mimir.codegen.passes import launch_order
from mimir.diagnostics.codes import REGISTRY
from mimir.dims import Dim

REPO = Path(__file__).resolve().parent.parent
ZOO = REPO / "tests" / "kernels"
OUT = ZOO / "out"
SNAPSHOT_BACKENDS = ("msl", "wgsl")
ZOO_FILES = sorted(p.stem for p in ZOO.glob("*.py"))
UPDATE = os.environ.get("MIMIR_UPDATE_SNAPSHOTS") == "1"
PRELUDE = REGISTRY["GPU070"].bad_source().split("@gpu")[0]


def _compile(stem: str, backend: str) -> dict[str, str | bytes]:
    relative = f"tests/kernels/{stem}.py"
    result = compile_source(relative, (ZOO / f"{stem}.py").read_text(), [backend])
    assert result.ok, [(d.code, d.message) for d in result.diagnostics]
    return result.files


def _snapshot_dir(backend: str, stem: str) -> Path:
    return OUT / backend / stem


# ---------------------------------------------------------------- snapshots


@pytest.mark.parametrize("backend", SNAPSHOT_BACKENDS)
@pytest.mark.parametrize("stem", ZOO_FILES)
def test_emitted_files_match_snapshots(stem: str, backend: str) -> None:
    files = _compile(stem, backend)
    folder = _snapshot_dir(backend, stem)
    if UPDATE:
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.iterdir():
            old.unlink()
        for name, content in files.items():
            (folder / name).write_text(content)  # type: ignore[arg-type]
    on_disk = {p.name for p in folder.iterdir()} if folder.exists() else set()
    assert on_disk == set(files), "snapshot files differ; MIMIR_UPDATE_SNAPSHOTS=1 rewrites them"
    for name, content in files.items():
        assert (folder / name).read_text() == content, f"{folder / name} changed"


def _snapshots(suffix: str) -> list[Path]:
    return sorted(OUT.glob(f"*/*/*{suffix}"))


@pytest.mark.parametrize(
    "path", _snapshots(".manifest.json"), ids=lambda p: str(p.relative_to(OUT))
)
def test_every_manifest_follows_the_schema(path: Path) -> None:
    manifest = json.loads(path.read_text())
    validate_manifest(manifest)
    assert manifest["backend"] == path.parent.parent.name
    assert manifest["source"] == f"tests/kernels/{path.parent.name}.py"
    names = [b["name"] for b in manifest["buffers"]]
    assert len(set(names)) == len(names)
    roles = [b["role"] for b in manifest["buffers"]]
    # Parameters first (an `InOut` one is a parameter), then results, then scratch.
    rank = {"input": 0, "inout": 0, "output": 1, "scratch": 2}
    assert roles == sorted(roles, key=rank.__getitem__)
    assert "output" in roles or "inout" in roles
    fields = [f["name"] for f in (manifest["uniform"] or {"fields": []})["fields"]]
    assert fields[: len(manifest["dims"])] == [d["name"] for d in manifest["dims"]]
    for kernel in manifest["kernels"]:
        assert (path.parent / kernel["file"]).exists()
        bindings = [b["binding"] for b in kernel["bindings"]]
        assert bindings == list(range(len(bindings)))
        if kernel["uniform_binding"] is not None:
            assert kernel["uniform_binding"]["binding"] == len(bindings)
    # each scratch buffer and output written before it is read, each output written
    assert launch_order.violations(manifest) == []


def test_the_schema_ships_in_the_package() -> None:
    schema = json.loads(SCHEMA_PATH.read_text())
    assert schema["properties"]["format"] == {"const": "mimir-manifest/1"}
    pyproject = (REPO / "pyproject.toml").read_text()
    assert '"mimir.codegen" = ["schemas/*.json"]' in pyproject


@pytest.mark.parametrize("path", _snapshots(".wgsl"), ids=lambda p: str(p.relative_to(OUT)))
def test_wgsl_snapshots_validate_with_naga(path: Path) -> None:
    require_tool("wgpu")
    from mimir.runtime.wgpu_runner import validate_wgsl

    validate_wgsl(path.read_text())


def test_msl_snapshots_compile_with_clang(tmp_path: Path) -> None:
    """Every MSL snapshot, each in its own namespace of one C++ translation unit."""
    require_tool("clang++-half")
    from harness.msl_runner import HEADER_DIR, clang_compiler

    compiler = clang_compiler()
    assert compiler is not None
    sources = _snapshots(".metal")
    assert sources
    unit = ["#include <metal_stdlib>"]
    for k, path in enumerate(sources):
        unit += [f"namespace k{k} {{", f'#include "{path}"', "}"]
    (tmp_path / "all.cpp").write_text("\n".join(unit) + "\n")
    flags = ["-std=c++17", "-fsyntax-only", "-I", str(HEADER_DIR)]
    build = subprocess.run(
        [compiler, *flags, str(tmp_path / "all.cpp")], capture_output=True, text=True
    )
    assert build.returncode == 0, build.stderr


# ---------------------------------------------------------------- what the kernels say


def _source(body: str) -> str:
    return PRELUDE + body


def test_elementwise_chains_fuse_into_one_guarded_kernel() -> None:
    files = _compile("layout", "wgsl")
    manifest = json.loads(files["outer.manifest.json"])
    assert len(manifest["kernels"]) == 1
    text = files["outer_0_ew.wgsl"]
    # every vector of 4 is guarded, and each element of the tail
    assert "let q2: u32 = (u.N * u.M) >> 2u;" in text
    assert "if (v1 < q2)" in text and text.count("< u.N * u.M) {") == 3
    assert "u.N" in text and "u.M" in text  # sizes arrive at run time


def test_matmul_is_tiled_with_its_epilogue_fused() -> None:
    files = _compile("linear", "msl")
    manifest = json.loads(files["linear_relu.manifest.json"])
    (kernel,) = manifest["kernels"]
    assert kernel["workgroup_size"] == [16, 16, 1]
    text = files[kernel["file"]]
    # 128x128 output tiles: two buffers each of a 128x8 and an 8x128 slice, 8x8
    # accumulators per thread; a barrier after the first slice and one per slice
    assert "threadgroup float a_tile[2048];" in text
    assert "threadgroup float b_tile[2048];" in text
    assert text.count("threadgroup_barrier(mem_flags::mem_threadgroup);") == 2
    assert text.count("float acc") == 64
    assert "b[" in text  # the bias is read in the epilogue, no second launch


def test_attention_is_three_launches_in_order_with_scratch() -> None:
    files = _compile("attention", "wgsl")
    manifest = json.loads(files["attention.manifest.json"])
    assert [k["file"] for k in manifest["kernels"]] == [
        "attention_0_matmul.wgsl",
        "attention_1_softmax.wgsl",
        "attention_2_matmul.wgsl",
    ]
    roles = {b["name"]: b["role"] for b in manifest["buffers"]}
    assert roles == {
        "q": "input",
        "k": "input",
        "v": "input",
        "out": "output",
        "scratch0": "scratch",
        "scratch1": "scratch",
    }
    # k.T is index arithmetic inside the matmul, not a transpose kernel.
    assert "transpose" not in "".join(k["file"] for k in manifest["kernels"])
    assert manifest["uniform"] == {
        "fields": [
            {"name": "T", "type": "u32"},
            {"name": "D", "type": "u32"},
            {"name": "scale", "type": "f32"},
        ]
    }


def test_reductions_have_no_size_cap() -> None:
    files = _compile("big_reduction", "wgsl")
    # A whole-tensor sum: many workgroups reduce 4096-element chunks, and the last to
    # finish combines them (in the same launch; tests/test_handoff.py).
    manifest = json.loads(files["total.manifest.json"])
    assert [k["file"] for k in manifest["kernels"]] == ["total_0_reduce.wgsl"]
    assert (
        manifest["kernels"][0]["workgroups"][0] == "cdiv(cdiv(N, 4096), cdiv(N, 4096)//65535 + 1)"
    )
    scratch = [b for b in manifest["buffers"] if b["role"] == "scratch"]
    assert scratch == [
        {
            "name": "scratch0",
            "role": "scratch",
            "dtype": "uint32",
            "shape": ["2*cdiv(N, 4096)"],
            "zero": True,
        },
        {"name": "scratch1", "role": "scratch", "dtype": "uint32", "shape": [1], "zero": True},
    ]
    # each of 128 threads strides over the chunk, 4 elements per iteration, then the rest
    # (WGSL: N is not proven a multiple of 4, so no 4-wide loop)
    partial = files["total_0_reduce.wgsl"]
    assert re.search(r"(r\d+) < last\d+; \1 \+= 512u\)", partial), partial
    assert re.search(r"(r\d+) < end\d+; \1 \+= 128u\)", partial), partial
    assert "vec4" not in partial
    # A row reduction: one workgroup per row, its threads stride over any length.
    row = files["long_rows_max_0_reduce.wgsl"]
    assert re.search(r"select\(0u, u\.N - 384u, u\.N > 384u\)", row), row  # no u32 wrap
    assert re.search(r"(r\d+) < u\.N; \1 \+= 128u\)", row), row


def test_reserved_words_are_renamed_and_the_manifest_keeps_python_names() -> None:
    msl = _compile("reserved", "msl")
    wgsl = _compile("reserved", "wgsl")
    metal = msl["kernel_0_ew.metal"]
    assert "device const float* device_ [[buffer(0)]]" in metal
    assert "device const float* half_ [[buffer(3)]]" in metal
    assert "float constant_;" in metal
    shader = wgsl["kernel_0_ew.wgsl"]
    for python, renamed in (("var", "var_"), ("fn", "fn_"), ("loop", "loop_")):
        assert f" {renamed}" in shader, python
    assert "var<storage, read> var_: array<f32>;" in shader
    assert "loop_: u32," in shader
    manifest = json.loads(wgsl["kernel.manifest.json"])
    assert [b["name"] for b in manifest["buffers"]] == ["device", "var", "fn", "half", "out"]
    assert [f["name"] for f in manifest["uniform"]["fields"]] == ["loop", "constant"]


def test_namer_keeps_legal_names_and_renames_the_rest() -> None:
    names = Namer(WGSL.reserved)
    assert names("x") == "x"
    assert names("loop") == "loop_"
    assert names("$x") == "x_"  # an internal name never takes a user's
    assert names("$x") == "x_"
    assert names("__init") == "_init"
    assert names("_") == "v_"
    assert Namer(MSL.reserved)("kernel") == "kernel_"


@pytest.mark.parametrize("backend", [MSL, WGSL], ids=["msl", "wgsl"])
def test_bool_literals_are_spelled_true_and_false(backend: type) -> None:
    # No zoo kernel keeps a bool constant after lowering, so no snapshot shows these.
    from mimir.codegen.ir import Const

    emit = backend()
    assert emit.literal(Const(True, "bool"))[0] == "true"
    assert emit.literal(Const(False, "bool"))[0] == "false"


@pytest.mark.parametrize("backend", [MSL, WGSL], ids=["msl", "wgsl"])
def test_a_negative_int_literal_binds_as_a_unary_minus_and_zero_as_an_atom(
    backend: type,
) -> None:
    # The printer parenthesizes an operand by its binding strength; a literal reports its own.
    from mimir.codegen.backends.base import ATOM, UNARY
    from mimir.codegen.ir import Const

    emit = backend()
    assert [emit.literal(Const(v, "i32"))[1] for v in (-1, 0, 1)] == [UNARY, ATOM, ATOM]


def test_a_guarded_copy_of_four_words_is_four_guarded_stores_off_ptx() -> None:
    """A 16-byte `CopyAsync` (PTX's one `cp.async`) is, on the other backends, a store of
    each word from the next one of the buffer, 0 where the guard is false."""
    i, j, ok = Var("i", "u32"), Var("j", "u32"), Var("ok", "bool")
    copy = CopyAsync("$tile", i, Load("b", j, "u32"), ok, words=4)
    stores = lower_vectors([copy])
    assert len(stores) == 4 and all(isinstance(st, If) and st.cond == ok for st in stores)
    for k, st in enumerate(stores):
        assert isinstance(st, If)
        (store,), (zero,) = st.then, st.orelse
        at = i if k == 0 else Binary("+", i, Const(k, "u32"), "u32")
        word = j if k == 0 else Binary("+", j, Const(k, "u32"), "u32")
        assert store == Store("$tile", at, Load("b", word, "u32"))
        assert zero == Store("$tile", at, Const(0, "u32"))


def test_every_elementwise_op_has_a_lowering_and_every_backend_its_intrinsics() -> None:
    elementwise = {op.name for op in ops.TABLE if op.kind in ("elementwise", "scalar_math")}
    assert elementwise == set(lw.LOWERING)
    used = {
        e.fn
        for helper in lw.HELPERS.values()
        for e in all_expressions(helper.body)
        if isinstance(e, Call) and e.fn not in lw.HELPERS
    }
    assert used <= set(INTRINSICS)
    for backend in (MSL, WGSL):
        # an intrinsic the target has no instruction for is called as its IR helper
        assert set(INTRINSICS) - set(backend.emulated) <= set(backend.intrinsics), backend.name
        assert set(backend.emulated.values()) <= set(lw.HELPERS), backend.name


def test_dispatch_folds_past_65535_workgroups() -> None:
    n = Dim("N")
    assert sz.dispatch(1000, {}) == (1000, 1, 1)
    x, y, z = sz.dispatch(n, {"N": n})
    for value in (1, 65535, 65536, 10**7):
        gx, gy = x.evaluate({"N": value}), y.evaluate({"N": value})  # type: ignore[union-attr]
        assert gx <= 65535 and gy <= 65535 and value <= gx * gy < value + gy
    bounded = Dim("N", max=4096)
    assert sz.dispatch(bounded, {"N": bounded}) == (bounded, 1, 1)


def test_size_expressions_simplify() -> None:
    n = Dim("N")
    assert sz.manifest_text(sz.simplify(n + 2 - 2)) == "N"
    assert sz.manifest_text(sz.simplify(n * 4)) == "4*N"
    assert sz.manifest_text(sz.cdiv(n * 4, 256)) == "cdiv(N*4, 256)"
    assert sz.key(n + 1 - 1) == sz.key(n)


# ---------------------------------------------------------------- refusals


def test_backends_all_means_every_backend() -> None:
    assert resolve_backends(["all"]) == list(BACKENDS)
    assert {"msl", "wgsl"} <= set(BACKENDS)
    with pytest.raises(ValueError, match="unknown backend"):
        resolve_backends(["cuda"])


def test_a_backend_limit_is_a_coded_refusal_that_writes_nothing() -> None:
    entry = REGISTRY["GPU070"]
    result = compile_source("many.py", entry.bad_source(), ["wgsl"])
    assert [d.code for d in result.diagnostics] == ["GPU070"]
    (d,) = result.diagnostics
    assert "wgsl" in d.message and "10 storage buffers" in d.message
    assert d.span.line == entry.bad_source().count("\n", 0, entry.bad_source().index("return")) + 1
    assert result.files == {}
    assert compile_source("many.py", entry.bad_source(), ["msl"]).ok
    assert compile_source("good.py", entry.good_source(), ["all"]).ok


def test_an_unschedulable_kernel_is_a_coded_refusal() -> None:
    entry = REGISTRY["GPU071"]
    result = compile_source("scalar.py", entry.bad_source(), ["msl", "wgsl"])
    assert [d.code for d in result.diagnostics] == ["GPU071"]
    assert "msl, wgsl" in result.diagnostics[0].message
    assert result.files == {}
    assert compile_source("good.py", entry.good_source(), ["msl", "wgsl"]).ok


def test_sizes_past_32_bits_and_dim_named_parameters_are_refused() -> None:
    source = _source(
        'N = Dim("N")\n\n@gpu\ndef f(x: Tensor[float32, N], N: float) -> Tensor[float32, N]:\n'
        "    return x * N\n\n"
        "@gpu\ndef g(x: Tensor[float32, 70000, 70000]) -> Tensor[float32, 70000, 70000]:\n"
        "    return x * 2.0\n"
    )
    result = compile_source("c.py", source, ["msl"])
    assert [d.code for d in result.diagnostics] == ["GPU071", "GPU071"]
    assert "the name of a dim" in result.diagnostics[0].message
    assert "4900000000 elements" in result.diagnostics[1].message
    assert result.files == {}


def test_a_backend_without_an_intrinsic_refuses_naming_the_op(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class NoTanh(WGSL):
        intrinsics = {k: v for k, v in WGSL.intrinsics.items() if k != "tanh"}

    monkeypatch.setitem(BACKENDS, "wgsl", NoTanh)
    source = _source(
        'N = Dim("N")\n\n@gpu\ndef f(x: Tensor[float32, N]) -> Tensor[float32, N]:\n'
        "    return (x * 2.0).exp() + x.tanh()\n"
    )
    result = compile_source("t.py", source, ["msl", "wgsl"])
    assert [d.code for d in result.diagnostics] == ["GPU070"]
    (d,) = result.diagnostics
    assert d.message == "`.tanh()` cannot be emitted for wgsl: it needs `tanh`"
    last = source.splitlines()[-1]
    assert (d.span.line, d.span.column) == (source.count("\n"), last.index("x.tanh") + 1)
    assert result.files == {}


def test_check_errors_come_first_and_nothing_is_compiled() -> None:
    result = compile_source("bad.py", REGISTRY["GPU011"].bad_source(), ["all"])
    assert [d.code for d in result.diagnostics] == ["GPU011"]
    assert result.files == {}


# ---------------------------------------------------------------- the command line

runner = CliRunner()


def test_cli_writes_one_backend_into_the_folder(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = runner.invoke(
        app, ["compile-gpu", str(ZOO / "mlp.py"), "--backend", "wgsl", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == [
        "mlp.manifest.json",
        "mlp_0_narrow.wgsl",
        "wide_mlp.manifest.json",
        "wide_mlp_0_matmul.wgsl",
        "wide_mlp_1_matmul.wgsl",
    ]


def test_cli_all_backends_write_per_backend_folders(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = runner.invoke(
        app, ["compile-gpu", str(ZOO / "mlp.py"), "--backend", "all", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == sorted(BACKENDS)
    for backend in SNAPSHOT_BACKENDS:
        assert (out / backend / "mlp.manifest.json").exists()


def test_cli_without_output_prints_the_kernels() -> None:
    result = runner.invoke(
        app,
        ["compile-gpu", str(ZOO / "linear.py"), "--backend", "msl", "--function", "linear_relu"],
    )
    assert result.exit_code == 0, result.output
    assert result.output.startswith("// file: linear_relu_0_matmul.metal\n")
    assert "kernel void linear_relu_0_matmul(" in result.output
    assert "manifest" not in result.output


def test_cli_check_errors_exit_1_and_write_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(REGISTRY["GPU011"].bad_source())
    out = tmp_path / "out"
    result = runner.invoke(app, ["compile-gpu", str(bad), "-o", str(out)])
    assert result.exit_code == 1
    assert "error[GPU011]" in result.output
    assert not out.exists()


def test_cli_refusal_exits_1_and_writes_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "many.py"
    bad.write_text(REGISTRY["GPU070"].bad_source())
    out = tmp_path / "out"
    result = runner.invoke(app, ["compile-gpu", str(bad), "--backend", "all", "-o", str(out)])
    assert result.exit_code == 1
    assert "error[GPU070]" in result.output and "wgsl" in result.output
    assert not out.exists()


@pytest.mark.parametrize(
    "args",
    [
        ["missing.py"],
        ["{zoo}/mlp.py", "--backend", "cuda"],
        ["{zoo}/mlp.py", "--function", "nope"],
    ],
)
def test_cli_usage_errors_exit_2(args: list[str], tmp_path: Path) -> None:
    args = [a.format(zoo=ZOO) for a in args]
    if args[0] == "missing.py":
        args[0] = str(tmp_path / "missing.py")
    result = runner.invoke(app, ["compile-gpu", *args])
    assert result.exit_code == 2, result.output


def test_compile_file_reports_an_unreadable_file(tmp_path: Path) -> None:
    result = compile_file(tmp_path / "nope.py", ["msl"])
    assert result.unreadable and [d.code for d in result.diagnostics] == ["GPU002"]


def test_a_sum_to_one_element_is_one_launch_on_every_backend() -> None:
    """`x.sum()` over a symbolic count: one launch with a counter the manifest marks
    `zero`. PTX, MSL and SPIR-V hand the partials over with a device-scope fence; WGSL
    (relaxed atomics and workgroup-scope barriers only) in tagged atomic words, a zeroed
    buffer of two words a partial (tests/test_handoff.py)."""
    path = REPO / "tests" / "kernels" / "big_reduction.py"
    result = compile_source(str(path), path.read_text(), ["all"], function="total")
    assert result.ok, [(d.code, d.message) for d in result.diagnostics]
    launches = {}
    for backend in BACKENDS:
        manifest = json.loads(result.files[f"{backend}/total.manifest.json"])
        validate_manifest(manifest)
        launches[backend] = [k["entry_point"] for k in manifest["kernels"]]
        zeroed = [(b["role"], b["dtype"], b["shape"]) for b in manifest["buffers"] if "zero" in b]
        requires = [r for k in manifest["kernels"] for r in k.get("requires", [])]
        if backend != "wgsl":
            assert zeroed == [("scratch", "uint32", [1])], backend
            assert ("msl-3.2" in requires) == (backend == "msl")
        else:
            partials = ("scratch", "uint32", ["2*cdiv(N, 4096)"])
            assert zeroed == [partials, ("scratch", "uint32", [1])], backend
            assert "msl-3.2" not in requires
    assert launches == {backend: ["total_0_reduce"] for backend in BACKENDS}
    assert "fence.acq_rel.gpu" in result.files["ptx/total_0_reduce.ptx"]
    assert "atom.global.add.u32" in result.files["ptx/total_0_reduce.ptx"]
    msl = result.files["msl/total_0_reduce.metal"]
    assert "device atomic_uint*" in msl and "thread_scope_device" in msl
    # the partials one threadgroup stores and the last one reads: coherent across groups
    assert re.search(r"coherent\(device\) device float\* scratch0 ", msl), msl
    assert "device const float* x " in msl  # what nothing writes stays plain
    # the barrier that hands the ticket on also carries thread 0's acquire fence to the
    # other threads: it orders device memory too (the tree's barriers need not)
    device_barrier = "threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);"
    assert msl.count(device_barrier) == 1, msl
    assert "threadgroup_barrier(mem_flags::mem_threadgroup);" in msl
    # where several threads store partials (a column tile's, a row launch's shares), the
    # barrier between their release fences and thread 0's counter add too
    for stem, function, kernel in (
        ("reductions", "sum_axis0", "sum_axis0_0_reduce.metal"),
        ("gathers", "cross_entropy_mean", "cross_entropy_mean_0_row.metal"),
    ):
        path = REPO / "tests" / "kernels" / f"{stem}.py"
        other = compile_source(str(path), path.read_text(), ["msl"], function=function)
        assert other.files[kernel].count(device_barrier) == 2, function
    # SPIR-V: a fence at Device scope (1) over buffer memory, acquire-release (0x48 = 72),
    # and the partials stored and loaded as atomics (device-coherent without `Coherent`)
    spvasm = result.listings["spirv/total_0_reduce.spv"]
    assert re.search(r"OpMemoryBarrier %uint_1 %uint_72\b", spvasm), spvasm
    assert re.search(r"OpAtomicStore %\w+ %uint_1 %uint_0 ", spvasm), spvasm
    assert re.search(r"= OpAtomicLoad %uint %\w+ %uint_1 %uint_0\b", spvasm), spvasm
    assert "Coherent" not in spvasm and "OpLoad %float %x" not in spvasm
    # its workgroup barriers pass thread 0's acquire on: buffer memory too (0x148 = 328)
    barriers = set(re.findall(r"OpControlBarrier %uint_2 %uint_2 (%uint_\d+)", spvasm))
    assert barriers == {"%uint_328"}, barriers


def test_spirv_keeps_two_launches_where_the_handoff_needs_too_many_buffers() -> None:
    """One launch of `unsigned_and_ints` (two whole reductions, their partials and
    counters beside five outputs) binds more than the 8 storage buffers SPIR-V is given:
    SPIR-V then takes the schedule without a fence (as WGSL), never a refusal; PTX, with
    no such limit, stays one launch."""
    path = REPO / "tests" / "kernels" / "combos.py"
    result = compile_source(str(path), path.read_text(), ["all"], function="unsigned_and_ints")
    assert result.ok, [(d.code, d.message) for d in result.diagnostics]
    launches = {
        b: len(json.loads(result.files[f"{b}/unsigned_and_ints.manifest.json"])["kernels"])
        for b in BACKENDS
    }
    assert launches["ptx"] == 1 and launches["spirv"] == launches["wgsl"] == 2, launches


def test_a_backend_without_a_device_fence_refuses_a_handoff_kernel() -> None:
    """The one-launch kernel handed to WGSL (no device-scope fence) is a refusal, never
    an unsound kernel; PTX takes it. WGSL's own one-launch kernel (tagged words,
    tests/test_handoff.py) is a refusal on PTX, which does not print them, never a
    kernel that drops them."""
    from mimir.check import check_source
    from mimir.codegen.backends import PTX
    from mimir.codegen.ir import legalise
    from mimir.codegen.kernels import build
    from mimir.codegen.schedule import schedule

    path = REPO / "tests" / "kernels" / "big_reduction.py"
    (kernel,) = [
        k for k in check_source(str(path), path.read_text()).kernels if k.graph.name == "total"
    ]
    s = schedule(kernel, one_launch=True)
    (ir,) = [legalise(build(s, k)) for k in range(len(s.plans))]
    assert (
        WGSL().check(ir) == "a device-scope memory fence and a counter (a cross-workgroup handoff)"
    )
    assert PTX().check(ir) is None
    tagged = schedule(kernel, one_launch=True, tagged=True)
    (ir,) = [legalise(build(tagged, k)) for k in range(len(tagged.plans))]
    assert PTX().check(ir) == "values handed between workgroups in tagged atomic words"
    assert WGSL().check(ir) is None
