"""The JavaScript host (js/) in Node on Dawn: kernels compiled by Mimir give the shim's answers.

Each case compiles one @gpu function of tests/kernels for WGSL, draws seeded inputs
(`random_inputs`), runs it through `load(...).run(...)` in Node (js/test/run-jobs.mjs), and
compares every output with the shim within the dtype's tolerance. The host's own dim
expressions, float16 rounding and uniform packing are compared with mimir.runtime's, and its
input validation is checked message by message. See tests/jshost.py for the setup.
"""

from __future__ import annotations

import json
import random
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest
from harness import require
from jshost import (
    JS,
    REPO,
    compile_wgsl,
    dawn_env,
    from_json_number,
    require_node_package,
    run_node,
)

from mimir.runtime import dimexpr
from mimir.runtime import manifest as mf
from mimir.runtime.verify import (
    choose_dims,
    default_scalars,
    mismatches,
    random_inputs,
    shim_reference,
)

KERNELS = REPO / "tests" / "kernels"

# (file, function, dim targets): every dtype, scalars of both kinds, several launches with
# scratch, tuple outputs, index-level kernels with output parameters, reductions.
CASES = [
    ("mlp.py", "mlp", [37, 16]),
    ("attention.py", "attention", [19, 8]),
    ("layernorm.py", "layernorm", [5, 33]),
    ("big_reduction.py", "long_softmax", [1500]),
    ("combos.py", "scalar_math", [41]),
    ("combos.py", "unsigned_and_ints", [29]),
    ("combos.py", "bool_reductions", [7, 9]),
    ("combos.py", "int_matmul_epilogue", [6, 7]),
    ("index_level.py", "row_stats", [9, 13]),
    ("index_level.py", "scale", [300]),
    ("batched.py", "bmm", [2, 3, 5, 4]),
    # InOut parameters (alone; next to an output; at index level), a tuple result, and an
    # input with a `Range` (random_inputs draws its values from the range).
    ("inout.py", "adam_step", [37]),
    ("inout.py", "scale_and_norm", [5, 7]),
    ("inout.py", "kv_append", [4, 3, 5]),
    ("inout.py", "layer_norm_stats", [6, 9]),
    ("gathers.py", "embedding", [7, 5, 6]),
    # bfloat16 in and out (an odd count: the last word's padding), packed by a launch of its
    # own; an InOut bfloat16 update
    ("half_storage.py", "bf16_linear_gelu", [5, 9, 7]),
    ("half_storage.py", "bf16_rms_norm", [5, 7]),
    ("half_storage.py", "bf16_update", [3, 7]),
]
HALF_CASE = ("combos.py", "half_pipeline", [6, 5])


def _typed(values: list, dtype: str) -> list:
    return [int(v) for v in values] if dtype == "bool_" else values


@pytest.fixture(scope="module")
def kernel_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Compile every case, run them all in one node process, and return results by function."""
    env = dawn_env()
    root = tmp_path_factory.mktemp("js-kernels")
    jobs, expected = [], {}
    for file, function, targets in [*CASES, HALF_CASE]:
        manifest_path = compile_wgsl(KERNELS / file, function, root / function)
        manifest = json.loads(manifest_path.read_text())
        dims = choose_dims(manifest, targets)
        scalars = default_scalars(manifest, dims)
        inputs = random_inputs(manifest, dims, seed=7)
        dtypes = {b["name"]: b["dtype"] for b in manifest["buffers"]}
        expected[function] = (
            manifest,
            shim_reference(KERNELS / file, function, inputs, dims, scalars),
        )
        jobs.append(
            {
                "manifest": str(manifest_path),
                "inputs": {k: _typed(v, dtypes[k]) for k, v in inputs.items()},
                "sizes": {**dims, **scalars},
                "typed": True,
            }
        )
    jobs_file = root / "jobs.json"
    jobs_file.write_text(json.dumps({"jobs": jobs}))
    answer = run_node("run-jobs.mjs", str(jobs_file), env=env)
    names = [c[1] for c in [*CASES, HALF_CASE]]
    return {
        "adapter": answer["adapter"],
        "results": dict(zip(names, answer["results"], strict=True)),
        "expected": expected,
    }


def _check_outputs(
    result: dict[str, Any], manifest: dict[str, Any], reference: dict[str, list]
) -> None:
    assert "error" not in result, result
    dtypes = {b["name"]: b["dtype"] for b in manifest["buffers"]}
    assert set(result["outputs"]) == set(reference)
    for name, want in reference.items():
        got = [from_json_number(v) for v in result["outputs"][name]]
        bad = mismatches(got, want, dtypes[name])
        assert not bad, (
            f"{name}: {len(bad)} of {len(want)} differ, "
            f"first at {bad[0]}: {got[bad[0]]} != {want[bad[0]]}"
        )


TYPED_ARRAYS = {
    "float32": "Float32Array",
    "float16": "Float32Array",
    "bfloat16": "Float32Array",
    "int32": "Int32Array",
    "uint32": "Uint32Array",
    "bool_": "Uint8Array",
}


@pytest.mark.parametrize("function", [c[1] for c in CASES])
def test_kernel_matches_the_shim(kernel_runs: dict[str, Any], function: str) -> None:
    manifest, reference = kernel_runs["expected"][function]
    result = kernel_runs["results"][function]
    _check_outputs(result, manifest, reference)
    dtypes = {b["name"]: b["dtype"] for b in manifest["buffers"]}
    for name, kind in result["types"].items():
        assert kind == TYPED_ARRAYS[dtypes[name]], name


def test_float16_kernel_runs_or_is_refused_by_name(kernel_runs: dict[str, Any]) -> None:
    """Where the adapter has shader-f16 the half kernel matches the shim; elsewhere (SwiftShader)
    load() refuses it naming the feature, before anything is dispatched."""
    manifest, reference = kernel_runs["expected"]["half_pipeline"]
    result = kernel_runs["results"]["half_pipeline"]
    if "error" in result:
        assert result["error"] == "ManifestError"
        assert "shader-f16" in result["message"] and "half_pipeline" in result["message"]
    else:
        _check_outputs(result, manifest, reference)


# ---------------------------------------------------------------- validation and reuse


@pytest.fixture(scope="module")
def mlp_manifest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_wgsl(KERNELS / "mlp.py", "mlp", tmp_path_factory.mktemp("js-mlp"))


@pytest.fixture(scope="module")
def two_launch_manifest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`wide_mlp`: two tiled launches with the hidden layer in scratch."""
    return compile_wgsl(KERNELS / "mlp.py", "wide_mlp", tmp_path_factory.mktemp("js-wide"))


def _mlp_inputs(n: int, h: int, outputs: int = 3) -> dict[str, list]:
    manifest = {
        "buffers": [
            {"name": "x", "role": "input", "dtype": "float32", "shape": [n, 13]},
            {"name": "w1", "role": "input", "dtype": "float32", "shape": [13, h]},
            {"name": "b1", "role": "input", "dtype": "float32", "shape": [h]},
            {"name": "w2", "role": "input", "dtype": "float32", "shape": [h, outputs]},
            {"name": "b2", "role": "input", "dtype": "float32", "shape": [outputs]},
        ]
    }
    return random_inputs(manifest, {}, seed=n * 100 + h)


def _run_jobs(tmp_path: Path, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps({"jobs": jobs}))
    return run_node("run-jobs.mjs", str(path), env=dawn_env())["results"]


def test_bad_inputs_get_clear_errors(mlp_manifest: Path, tmp_path: Path) -> None:
    good = _mlp_inputs(4, 6)
    m = str(mlp_manifest)

    def job(inputs: dict[str, Any], sizes: dict[str, Any], typed: bool = True) -> dict[str, Any]:
        return {"manifest": m, "inputs": inputs, "sizes": sizes, "typed": typed}

    short = {**good, "x": good["x"][:-1]}
    cases = [
        (
            job(short, {"N": 4, "H": 6}),
            "input `x` (float32) has 51 values; its shape needs 52 "
            "(shape [N, 13] = [4, 13] for N=4, H=6)",
        ),
        (job(short, {"H": 6}), "input `x` has 51 values, not a multiple of 13"),
        (job(good, {"N": 0, "H": 6}), "dim `N`=0 is below its minimum 1"),
        (
            job(good, {"N": 4, "H": 6, "K": 1}),
            "`K` is neither a dim nor a scalar parameter of `mlp`",
        ),
        (
            job({k: v for k, v in good.items() if k != "b2"}, {"N": 4, "H": 6}),
            "no values given for input buffer `b2`",
        ),
        (
            job({**good, "bias": [1.0]}, {"N": 4, "H": 6}),
            "values given for unknown input buffers: bias",
        ),
        (
            job({**good, "x": [str(v) for v in good["x"]]}, {"N": 4, "H": 6}, typed=False),
            "input `x` (float32)[0] must be a number, got string",
        ),
        (
            job({**good, "x": [1e39] * 52}, {"N": 4, "H": 6}, typed=False),
            "input `x` (float32)[0] = 1e+39 does not fit float32",
        ),
        (
            job({**good, "w2": good["w2"][:-3]}, {}),
            "input `w2` (float32) has 15 values; its shape needs 18 "
            "(shape [H, 3] = [6, 3] for N=4, H=6)",
        ),
    ]
    results = _run_jobs(tmp_path, [c[0] for c in cases])
    for (_, message), result in zip(cases, results, strict=True):
        assert result.get("error") == "ManifestError", result
        assert message in result["message"], result["message"]


def test_wrong_typed_array_and_bad_scalars_are_refused(tmp_path: Path) -> None:
    manifest = compile_wgsl(KERNELS / "combos.py", "scalar_math", tmp_path / "k")
    x = [0.5] * 8
    jobs = [
        {
            "manifest": str(manifest),
            "inputs": {"x": x},
            "sizes": {"N": 8, "s": 0.5, "n": 2.5},
            "typed": True,
        },
        {"manifest": str(manifest), "inputs": {"x": x}, "sizes": {"N": 8, "s": 0.5}, "typed": True},
        {"manifest": str(manifest), "inputs": {"x": x}, "sizes": {"s": 0.5, "n": 3}, "typed": True},
    ]
    results = _run_jobs(tmp_path, jobs)
    assert "uniform field `n`=2.5 does not fit i32" in results[0]["message"]
    assert "no value for uniform field `n`" in results[1]["message"]
    # N is inferred from x's length, and the result is the shim's.
    expected = shim_reference(
        KERNELS / "combos.py", "scalar_math", {"x": x}, {"N": 8}, {"s": 0.5, "n": 3}
    )
    assert not mismatches(results[2]["outputs"]["out"], expected["out"], "float32")

    int_job = compile_wgsl(KERNELS / "combos.py", "unsigned_and_ints", tmp_path / "u")
    wrong = _run_jobs(
        tmp_path,
        [
            {
                "manifest": str(int_job),
                "inputs": {"u": [1.5, 2], "i": [1, 2]},
                "sizes": {},
                "typed": False,
            },
            {
                "manifest": str(int_job),
                "inputs": {"u": [-1, 2], "i": [1, 2]},
                "sizes": {},
                "typed": False,
            },
        ],
    )
    assert "input `u` (uint32)[0] = 1.5 is not an integer in [0, 4294967295]" in wrong[0]["message"]
    assert "input `u` (uint32)[0] = -1 is not an integer" in wrong[1]["message"]


def test_inout_comes_back_by_name_and_a_value_outside_its_range_is_refused(
    tmp_path: Path,
) -> None:
    """On Dawn: `adam_step` twice from the state the first call returned, and `embedding`
    refusing an id outside `Range(0, V)` with GPU043 before anything is dispatched."""
    adam = str(compile_wgsl(KERNELS / "inout.py", "adam_step", tmp_path / "adam"))
    embedding = str(compile_wgsl(KERNELS / "gathers.py", "embedding", tmp_path / "emb"))
    rng = random.Random(5)
    state = {k: [rng.uniform(-1, 1) for _ in range(20)] for k in ("p", "grad", "m")}
    state["v"] = [rng.uniform(0, 1) for _ in range(20)]
    table = [rng.uniform(-1, 1) for _ in range(12)]
    jobs = [
        {"manifest": adam, "inputs": state, "sizes": {"lr": 0.01, "step": 1}, "typed": True},
        {"manifest": embedding, "inputs": {"table": table, "ids": [0, 5, 6, 1]},
         "sizes": {"D": 2}, "typed": True},
        {"manifest": embedding, "inputs": {"table": table, "ids": [-2, 0]},
         "sizes": {"D": 2}, "typed": False},
        {"manifest": embedding, "inputs": {"table": table, "ids": [5, 0, 2]},
         "sizes": {"D": 2}, "typed": True},
    ]  # fmt: skip
    first, bad, negative, good = _run_jobs(tmp_path, jobs)
    want = shim_reference(KERNELS / "inout.py", "adam_step", state, {"N": 20},
                          {"lr": 0.01, "step": 1})  # fmt: skip
    assert set(first["outputs"]) == {"p", "m", "v"}
    for name in ("p", "m", "v"):
        assert not mismatches(first["outputs"][name], want[name], "float32"), name
    # The next step, from the state the first one returned: nothing of it stayed on the device.
    again = {**state, **{k: first["outputs"][k] for k in ("p", "m", "v")}}
    [second] = _run_jobs(tmp_path, [{"manifest": adam, "inputs": again,
                                     "sizes": {"lr": 0.01, "step": 2}, "typed": True}])  # fmt: skip
    want = shim_reference(KERNELS / "inout.py", "adam_step", again, {"N": 20},
                          {"lr": 0.01, "step": 2})  # fmt: skip
    for name in ("p", "m", "v"):
        assert not mismatches(second["outputs"][name], want[name], "float32"), name
    assert bad["error"] == "ManifestError"
    assert bad["message"].startswith(
        "[GPU043] input `ids` holds 6 at index [2], outside its range [0, V) = [0, 6)"
    ), bad["message"]
    assert "holds -2 at index [0]" in negative["message"]
    assert good["stats"]["runs"] == 1  # the refused calls launched nothing
    assert good["outputs"]["out"] == [x for i in (5, 0, 2) for x in
                                      [float(struct.unpack("<f", struct.pack("<f", v))[0])
                                       for v in table[2 * i: 2 * i + 2]]]  # fmt: skip


def test_buffers_and_pipelines_are_reused_across_calls(
    two_launch_manifest: Path, tmp_path: Path
) -> None:
    jobs, expected = [], []
    manifest = str(two_launch_manifest)
    for n, h in [(5, 8), (5, 8), (3, 4), (9, 8)]:
        inputs = _mlp_inputs(n, h, 17)
        jobs.append({"manifest": manifest, "inputs": inputs, "sizes": {"H": h}, "typed": True})
        expected.append(shim_reference(KERNELS / "mlp.py", "wide_mlp", inputs, {"N": n, "H": h}))
    results = _run_jobs(tmp_path, jobs)
    for result, want in zip(results, expected, strict=True):
        assert not mismatches(result["outputs"]["out"], want["out"], "float32")
    stats = [r["stats"] for r in results]
    assert all(s["pipelines"] == 2 for s in stats)  # made once, at load
    # 7 storage buffers (5 inputs, out, the scratch), 1 read-back, 1 uniform on the first call;
    # the same size reuses them, a smaller one too; a bigger N grows x, out and the scratch
    # (and out's read-back) only.
    assert [s["buffers"] for s in stats] == [9, 9, 9, 13]
    assert [s["runs"] for s in stats] == [1, 2, 3, 4]


def test_profile_times_every_launch(two_launch_manifest: Path, tmp_path: Path) -> None:
    inputs = _mlp_inputs(6, 5, 17)
    [result] = _run_jobs(
        tmp_path,
        [
            {
                "manifest": str(two_launch_manifest),
                "inputs": inputs,
                "sizes": {"H": 5},
                "typed": True,
                "repeat": 3,
            }
        ],
    )
    entry_points = [k["entryPoint"] for k in result["kernels"]]
    assert entry_points == ["wide_mlp_0_matmul", "wide_mlp_1_matmul"]
    assert all(k["ms"] > 0 for k in result["kernels"])
    want = shim_reference(KERNELS / "mlp.py", "wide_mlp", inputs, {"N": 6, "H": 5})
    assert not mismatches(result["outputs"]["out"], want["out"], "float32")


# ---------------------------------------------------------------- layout, against mimir.runtime


def _random_expr(rng: random.Random, depth: int) -> str:
    if depth == 0 or rng.random() < 0.3:
        return rng.choice(["N", "M", "K", str(rng.randint(0, 40)), "0", "7"])
    kind = rng.randrange(5)
    a, b = _random_expr(rng, depth - 1), _random_expr(rng, depth - 1)
    if kind == 0:
        return f"cdiv({a}, {b})"
    if kind == 1:
        return f"-{a}" if rng.random() < 0.5 else f"+({a})"
    if kind == 2:
        return f"({a})"
    return f"{a} {rng.choice(['+', '-', '*', '//', '%'])} {b}"


def _python_value(thunk: Any) -> Any:
    try:
        return thunk()
    except (dimexpr.DimExprError, mf.ManifestError, OverflowError, struct.error):
        return "error"


def test_dim_expressions_agree_with_python(tmp_path: Path) -> None:
    rng = random.Random(14)
    envs = [{"N": 37, "M": 5, "K": 0}, {"N": 1, "M": 65535, "K": 3}, {"N": -7, "M": 4, "K": 2**31}]
    texts = [_random_expr(rng, 4) for _ in range(400)] + [
        "N",
        "cdiv(N * M, 256)",
        "(K + 3) // 4",
        "-N // 4",
        "-N % 4",
        "N % -3",
        "N // -3",
        "cdiv(N, 0)",
        "cdiv(N, -2)",
        "N // 0",
        "N % 0",
        "cdiv(N, 2,)",
        "cdiv(N)",
        "cdiv(N, 2, 3)",
        "N / 2",
        "N ** 2",
        "max(N, 2)",
        "1_000 + N",
        "007",
        "(N, M)",
        "",
        "N +",
        "Q",
        "2*-N",
        "N * M * M * M * M",
        12,
        "M  *  (N-1)",
    ]
    cases = [(t, env) for t in texts for env in envs]
    path = tmp_path / "cases.json"
    path.write_text(json.dumps({"exprs": cases}))
    got = run_node("layout-cases.mjs", str(path))["exprs"]
    disagree = []
    for (text, env), js in zip(cases, got, strict=True):
        py = _python_value(lambda t=text, e=env: dimexpr.evaluate(t, e))
        if isinstance(py, int) and abs(py) > 2**53 - 1:
            py = "error"  # the JS host refuses values it cannot hold exactly
        js_value = "error" if isinstance(js, dict) else js
        if py != js_value:
            disagree.append((text, env, py, js))
    assert not disagree, disagree[:10]


def test_float16_rounding_agrees_with_struct(tmp_path: Path) -> None:
    rng = random.Random(16)
    values: list[Any] = [
        0.0,
        -0.0,
        1.0,
        -2.5,
        65504.0,
        65519.99,
        65520.0,
        1e6,
        2**-24,
        2**-25,
        2**-25 * 1.0000001,
        3 * 2**-25,
        2**-14,
        2**-14 - 2**-25,
        1 + 2**-11,
        1 + 3 * 2**-11,
        0.1,
        1 / 3,
        "inf",
        "-inf",
        "nan",
        5.960464477539063e-08,
    ]
    values += [rng.uniform(-70000, 70000) for _ in range(300)]
    values += [rng.uniform(-1, 1) * 2.0 ** rng.randint(-30, 5) for _ in range(300)]
    path = tmp_path / "cases.json"
    path.write_text(json.dumps({"halves": values}))
    got = run_node("layout-cases.mjs", str(path))["halves"]
    for value, js in zip(values, got, strict=True):
        x = from_json_number(value)
        try:
            bits = struct.unpack("<H", struct.pack("<e", x))[0]
        except OverflowError:
            assert "error" in js, (value, js)
            continue
        if x != x:  # NaN: any quiet NaN
            assert js["back"] == "nan"
            continue
        assert js["bits"] == bits, (value, js, bits)
        assert from_json_number(js["back"]) == struct.unpack("<e", struct.pack("<H", bits))[0]


def test_uniform_packing_agrees_with_python(tmp_path: Path) -> None:
    fields = [
        {"name": "N", "type": "u32"},
        {"name": "s", "type": "f32"},
        {"name": "k", "type": "i32"},
    ]
    cases = [
        ({"uniform": {"fields": fields}}, {"N": 37}, {"s": 0.1, "k": -3}),
        ({"uniform": {"fields": fields[:1]}}, {"N": 2**32 - 1}, {}),
        ({"uniform": {"fields": fields * 2}}, {"N": 1}, {"s": 1e-40, "k": 2**31 - 1}),
        ({"uniform": None}, {}, {}),
        ({"uniform": {"fields": fields}}, {"N": 2**32}, {"s": 0.0, "k": 0}),
        ({"uniform": {"fields": fields}}, {"N": 1}, {"s": 0.0, "k": 2**31}),
        ({"uniform": {"fields": fields}}, {"N": 1}, {"k": 0}),
    ]
    path = tmp_path / "cases.json"
    path.write_text(json.dumps({"uniforms": cases}))
    got = run_node("layout-cases.mjs", str(path))["uniforms"]
    for (manifest, dims, scalars), js in zip(cases, got, strict=True):
        py = _python_value(lambda m=manifest, d=dims, s=scalars: mf.pack_uniform(m, d, s))
        if isinstance(py, bytes):
            assert js == py.hex(), (manifest, dims, scalars)
        elif py is None:
            assert js is None
        else:
            assert isinstance(js, dict) and "error" in js, (manifest, dims, scalars, js)


def test_manifest_that_disagrees_with_its_shader_is_refused_at_load(
    mlp_manifest: Path, tmp_path: Path
) -> None:
    manifest = json.loads(mlp_manifest.read_text())
    manifest["kernels"][0]["bindings"][0]["access"] = "read_write"  # the shader reads it
    for kernel in manifest["kernels"]:
        (tmp_path / kernel["file"]).write_text((mlp_manifest.parent / kernel["file"]).read_text())
    tampered = tmp_path / "mlp.manifest.json"
    tampered.write_text(json.dumps(manifest))
    [result] = _run_jobs(tmp_path, [{"manifest": str(tampered), "inputs": {}, "sizes": {}}])
    assert result["error"] == "ManifestError"
    assert (
        "kernel `mlp_0_narrow` in mlp_0_narrow.wgsl does not match its manifest entry"
        in (result["message"])
    )


def test_js_unit_tests_and_type_declarations_pass() -> None:
    """`npm test` in js/: node:test unit tests on a fake device, and tsc on src/index.d.ts."""
    node = require_node_package("typescript")
    for command in (
        [node, "--test", "test/unit.test.mjs"],
        [node, "node_modules/typescript/bin/tsc", "-p", "test"],
    ):
        proc = subprocess.run(command, cwd=JS, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]


def test_load_keeps_the_gpu_object_alive(mlp_manifest: Path) -> None:
    """`load(m, {gpu: create([])})` with nothing else holding the GPU object: Dawn tears the
    device down when that object is collected (node crashed here before load kept it)."""
    node = require_node_package("webgpu")
    proc = subprocess.run(
        [node, "--expose-gc", "test/gc-check.mjs", str(mlp_manifest)],
        cwd=JS,
        env=dawn_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    runs = json.loads(proc.stdout.strip().splitlines()[-1])
    inputs = {
        "x": [(i % 7) / 7 for i in range(4 * 13)],
        "w1": [0.1] * 65,
        "b1": [0.0] * 5,
        "w2": [0.2] * 15,
        "b2": [0.0] * 3,
    }
    inputs = {
        k: [struct.unpack("<f", struct.pack("<f", v))[0] for v in vs] for k, vs in inputs.items()
    }
    want = shim_reference(KERNELS / "mlp.py", "mlp", inputs, {"N": 4, "H": 5})["out"]
    assert len(runs) == 3
    for got in runs:
        assert not mismatches(got, want, "float32")


def test_the_package_packs_for_installing_elsewhere() -> None:
    """`npm pack` makes an installable tarball: not private, the sources, the README with its
    install instructions, `webgpu` an optional peer, and no tests."""
    npm = shutil.which("npm")
    require(npm is not None, "`npm` is not on PATH (apt-get install nodejs npm)")
    package = json.loads((JS / "package.json").read_text())
    assert "private" not in package
    assert package["peerDependenciesMeta"]["webgpu"]["optional"] is True
    run = subprocess.run(
        [npm, "pack", "--dry-run", "--json"], cwd=JS, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    (packed,) = json.loads(run.stdout)
    assert packed["filename"] == f"mimir-host-{package['version']}.tgz"
    files = {f["path"] for f in packed["files"]}
    assert {"package.json", "README.md", "src/index.js", "src/index.d.ts"} <= files
    assert not [f for f in files if f.startswith("test/")]
    readme = (JS / "README.md").read_text()
    assert "npm pack" in readme and "npm install" in readme
