"""The PTX backend without a GPU: every zoo kernel compiles, assembles, and keeps its snapshot.

- every kernel of `tests/kernels/*.py` compiles to PTX, and `ptxas -arch=sm_80`
  and `-arch=sm_90` (CUDA 13.0) assemble each file with no output at all (no
  warning); a missing ptxas skips here and fails under `CI=true` (.ci/run
  installs it);
- the files match `tests/kernels/out/ptx/<zoo file>/` (regenerate with
  `MIMIR_UPDATE_SNAPSHOTS=1`), and the manifests follow the schema, with
  `binding` the position of the kernel parameter;
- what PTX cannot emit is refused with GPU070, through `compile_source`.

Execution: `tests/test_ptx_exec.py` (a PTX interpreter, on the CPU) and
`tests/test_ptx_gpu.py` (a real GPU); the math sequences' accuracy is
`tests/test_ptx_math.py`.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from harness import require

from mimir.codegen import compile_source
from mimir.codegen.backends.ptx import PTX, PTX_ASYNC_TARGET, PTX_TARGET, PTX_VERSION, mathlib
from mimir.codegen.ir import (
    Binary,
    BufferParam,
    Builtin,
    Call,
    Cast,
    Const,
    Helper,
    Kernel,
    Load,
    Return,
    Select,
    SharedArray,
    Store,
    Var,
)
from mimir.codegen.manifest import validate_manifest
from mimir.codegen.refusal import BACKEND_CANNOT_EMIT

ZOO_DIR = Path(__file__).resolve().parent / "kernels"
ZOO = sorted(ZOO_DIR.glob("*.py"))
SNAPSHOTS = ZOO_DIR / "out" / "ptx"
ARCHS = ("sm_80", "sm_90")


@functools.cache
def compiled(path: Path) -> dict[str, str]:
    """The files one zoo module compiles to (PTX only); the test fails on a diagnostic."""
    relative = path.relative_to(ZOO_DIR.parent.parent).as_posix()
    result = compile_source(relative, path.read_text(), ["ptx"])
    assert result.ok, "\n".join(str(d.message) for d in result.diagnostics)
    assert all(isinstance(c, str) for c in result.files.values())
    return dict(result.files)  # type: ignore[arg-type]


def all_files() -> dict[str, str]:
    """Every PTX file of the zoo, by name (names are unique across the zoo)."""
    out: dict[str, str] = {}
    for path in ZOO:
        for name, content in compiled(path).items():
            assert name not in out, f"two zoo kernels write `{name}`"
            out[name] = content
    return out


# ---------------------------------------------------------------- ptxas


@functools.cache
def ptxas_path() -> str | None:
    """ptxas on PATH, else the one the `nvidia-cuda-nvcc` wheel installs (nvidia/cu13/bin)."""
    found = shutil.which("ptxas")
    if found:
        return found
    spec = importlib.util.find_spec("nvidia")
    for root in spec.submodule_search_locations if spec else []:
        candidate = Path(root) / "cu13" / "bin" / "ptxas"
        if candidate.is_file():
            return str(candidate)
    return None


def require_ptxas() -> str:
    path = ptxas_path()
    require(
        path is not None,
        "ptxas (CUDA 13.0) is neither on PATH nor installed by "
        "`pip install nvidia-cuda-nvcc==13.0.88`",
    )
    assert path is not None
    return path


def ptxas(path: Path, arch: str) -> tuple[int, str]:
    run = subprocess.run(
        [require_ptxas(), f"-arch={arch}", str(path), "-o", os.devnull],
        capture_output=True,
        text=True,
    )
    return run.returncode, (run.stdout + run.stderr).strip()


@pytest.mark.parametrize("path", ZOO, ids=lambda p: p.stem)
def test_zoo_assembles_with_ptxas_without_warnings(path: Path, tmp_path: Path) -> None:
    require_ptxas()
    files = [name for name in compiled(path) if name.endswith(".ptx")]
    assert files, f"{path.name} compiled to no PTX"
    for name in files:
        (tmp_path / name).write_text(compiled(path)[name])
    jobs = [(tmp_path / name, arch) for name in files for arch in ARCHS]
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda job: ptxas(*job), jobs))
    failures = [
        f"{p.name} -arch={arch}: rc={rc}\n{out}"
        for (p, arch), (rc, out) in zip(jobs, results, strict=True)
        if rc != 0 or out
    ]
    assert not failures, "\n\n".join(failures)


def test_ptxas_is_the_expected_release() -> None:
    require_ptxas()
    version = subprocess.run([require_ptxas(), "--version"], capture_output=True, text=True).stdout
    match = re.search(r"release (\d+)\.(\d+)", version)
    assert match, version
    # The PTX ISA version we emit must not exceed the assembler's (ptxas 13.0 takes 9.0).
    assert (int(match.group(1)), int(match.group(2))) >= (11, 0), version


def test_a_missing_ptxas_fails_in_ci_and_skips_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.modules[__name__], "ptxas_path", lambda: None)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="ptxas"):
        require_ptxas()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="nvidia-cuda-nvcc"):
        require_ptxas()


def test_ptxas_rejects_a_broken_kernel(tmp_path: Path) -> None:
    """The assembler check is real: a bad instruction is an error, not a pass."""
    require_ptxas()
    text = compiled(ZOO_DIR / "linear.py")["linear_relu_0_matmul.ptx"]
    bad = tmp_path / "bad.ptx"
    bad.write_text(text.replace("bar.sync 0;", "bar.sync %f0;", 1))
    rc, out = ptxas(bad, "sm_80")
    assert rc != 0 and "error" in out


# The kernels whose math differs between `--math fast` (the snapshots) and `precise`.
MATH_KERNELS = ("select_cast", "trig", "combos", "attention", "scalar_math")


@pytest.mark.parametrize("stem", MATH_KERNELS)
def test_precise_math_assembles_and_is_ieee_throughout(stem: str, tmp_path: Path) -> None:
    require_ptxas()
    path = ZOO_DIR / f"{stem}.py"
    relative = path.relative_to(ZOO_DIR.parent.parent).as_posix()
    result = compile_source(relative, path.read_text(), ["ptx"], math="precise")
    assert result.ok
    fast = compiled(path)
    for name, text in result.files.items():
        assert isinstance(text, str)
        if name.endswith(".manifest.json"):
            assert json.loads(text)["math"] == "precise"
            assert json.loads(fast[name])["math"] == "fast"
            continue
        assert ".approx" not in text and ".ftz" not in text, name
        (tmp_path / name).write_text(text)
        for arch in ARCHS:
            rc, out = ptxas(tmp_path / name, arch)
            assert rc == 0 and not out, f"{name} -arch={arch}: {out}"


# ---------------------------------------------------------------- snapshots


@pytest.mark.parametrize("path", ZOO, ids=lambda p: p.stem)
def test_snapshots(path: Path) -> None:
    """`tests/kernels/out/ptx/<zoo file>/`, as for the other backends."""
    files = compiled(path)
    folder = SNAPSHOTS / path.stem
    if os.environ.get("MIMIR_UPDATE_SNAPSHOTS") == "1":
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        for name, content in files.items():
            (folder / name).write_text(content)
    hint = "regenerate with MIMIR_UPDATE_SNAPSHOTS=1 and review the diff"
    on_disk = {p.name for p in folder.iterdir()} if folder.is_dir() else set()
    missing, stale = sorted(set(files) - on_disk), sorted(on_disk - set(files))
    assert not missing and not stale, f"snapshots missing: {missing}, stale: {stale}; {hint}"
    changed = [n for n, c in files.items() if (folder / n).read_text() != c]
    assert not changed, f"PTX output changed for {changed}; {hint}"


def test_no_stale_snapshot_folders() -> None:
    folders = {p.name for p in SNAPSHOTS.iterdir() if p.is_dir()} if SNAPSHOTS.is_dir() else set()
    assert folders <= {p.stem for p in ZOO}, sorted(folders - {p.stem for p in ZOO})


# ---------------------------------------------------------------- what the files say


def _entry_params(text: str) -> list[tuple[str, str]]:
    """(declaration, name) of each `.entry` parameter, in order."""
    head = text[text.index(".visible .entry") :]
    params = head[head.index("(") + 1 : head.index(")")]
    out = []
    for decl in params.split(","):
        decl = decl.strip()
        name = re.search(r"([A-Za-z_$][\w$]*)(\[\d+\])?$", decl)
        assert name, decl
        out.append((decl, name.group(1)))
    return out


@pytest.mark.parametrize("path", ZOO, ids=lambda p: p.stem)
def test_manifests_follow_the_schema_and_bind_parameter_positions(path: Path) -> None:
    files = compiled(path)
    manifests = [json.loads(c) for n, c in files.items() if n.endswith(".manifest.json")]
    assert manifests
    for manifest in manifests:
        validate_manifest(manifest)
        assert manifest["backend"] == "ptx"
        fields = (manifest["uniform"] or {"fields": []})["fields"]
        for kernel in manifest["kernels"]:
            text = files[kernel["file"]]
            params = _entry_params(text)
            assert f".visible .entry {kernel['entry_point']}(" in text
            assert re.search(r"\.reqntid {}, {}, {}\n".format(*kernel["workgroup_size"]), text)
            slots = {b["binding"]: b for b in kernel["bindings"]}
            ub = kernel["uniform_binding"]
            count = len(slots) + (ub is not None)
            assert len(params) == count and set(slots) | ({ub["binding"]} if ub else set()) == set(
                range(count)
            )
            for position, binding in slots.items():
                decl, _ = params[position]
                assert binding["group"] == 0
                assert decl.startswith(".param .u64 .ptr .global"), decl
            if ub is not None:
                decl, _ = params[ub["binding"]]
                size = max(16, -(-4 * len(fields) // 16) * 16)
                assert decl.startswith(".param .align 16 .b8") and decl.endswith(f"[{size}]")


def test_headers_barriers_and_ieee_arithmetic() -> None:
    for name, text in all_files().items():
        if not name.endswith(".ptx"):
            continue
        lines = [ln for ln in text.splitlines() if not ln.startswith("//")]
        # sm_80 exactly where the kernel stages through cp.async (the matmul) or multiplies
        # on tensor cores (a float16 matmul stages without cp.async), else sm_70
        sm80 = "cp.async" in text or "mma.sync" in text
        target = PTX_ASYNC_TARGET if sm80 else PTX_TARGET
        assert lines[:3] == [f".version {PTX_VERSION}", f".target {target}", ".address_size 64"]
        # Approximate and flush-to-zero instructions only where fast math puts them: the
        # mathlib's ex2/rcp and rsqrt (the rest of the semantics are IEEE).
        code = "\n".join(line.split("//", 1)[0] for line in text.splitlines())
        approx = set(re.findall(r"\b[a-z0-9]+(?:\.[a-z0-9]+)*\.(?:approx|ftz)\b\S*", code))
        assert {a.rstrip(";") for a in approx} <= set(mathlib.APPROX), (name, approx)
        # Float arithmetic always names its rounding, so ptxas cannot contract it
        # (`atom.global.add.f32` is an atomic, whose rounding is fixed: not arithmetic here).
        bare = re.findall(r"(?<![.\w])(?:add|sub|mul|div|fma)\.f32\b", text)
        assert not bare, f"{name}: {bare}"
        if ".shared" in text:
            assert "bar.sync 0;" in text, name
        barriers = re.findall(r"\b(bar|barrier)\.\S+", text)
        assert all(b == "bar" for b in barriers), f"{name}: {barriers}"


def test_compile_gpu_cli_writes_ptx(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from mimir.cli import app

    runner = CliRunner()
    result = runner.invoke(
        app, ["compile-gpu", str(ZOO_DIR / "linear.py"), "--backend", "ptx", "-o", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    assert (tmp_path / "linear_relu_0_matmul.ptx").exists()
    assert json.loads((tmp_path / "linear_relu.manifest.json").read_text())["backend"] == "ptx"
    both = tmp_path / "all"
    result = runner.invoke(
        app, ["compile-gpu", str(ZOO_DIR / "linear.py"), "--backend", "all", "-o", str(both)]
    )
    assert result.exit_code == 0, result.output
    assert (both / "ptx" / "linear_relu_0_matmul.ptx").exists()


def test_compile_gpu_math_option(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from mimir.cli import app

    runner = CliRunner()
    source = str(ZOO_DIR / "select_cast.py")
    for mode in ("fast", "precise"):
        out = tmp_path / mode
        args = ["compile-gpu", source, "--backend", "ptx,wgsl", "-o", str(out), "--math", mode]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        for manifest in (out / "ptx").glob("*.manifest.json"):
            assert json.loads(manifest.read_text())["math"] == mode
        for manifest in (out / "wgsl").glob("*.manifest.json"):
            assert "math" not in json.loads(manifest.read_text())  # builtins in both modes
        text = "".join(p.read_text() for p in (out / "ptx").glob("*.ptx"))
        assert ("ex2.approx.ftz.f32" in text) == (mode == "fast")
        # --check compares with the same mode: up to date here, stale in the other
        check = runner.invoke(app, [*args, "--check"])
        assert check.exit_code == 0, check.output
    stale = runner.invoke(
        app,
        [
            "compile-gpu",
            source,
            "--backend",
            "ptx,wgsl",
            "-o",
            str(tmp_path / "precise"),
            "--check",
        ],
    )
    assert stale.exit_code == 1 and "GPU072" in stale.output
    bad = runner.invoke(app, ["compile-gpu", source, "--backend", "ptx", "--math", "sloppy"])
    assert bad.exit_code == 2 and "--math sloppy" in bad.output


PTX_NAMES = """
from mimir.array import Dim, Tensor, float32, gpu

tid = Dim("tid")


@gpu
def ret(add: Tensor[float32, tid], param: Tensor[float32, tid], reg: float) -> Tensor[float32, tid]:
    return (add + param) * reg
"""


def test_ptx_words_are_renamed(tmp_path: Path) -> None:
    result = compile_source("names.py", PTX_NAMES, ["ptx"])
    assert result.ok, result.diagnostics
    text = result.files["ret_0_ew.ptx"]
    manifest = json.loads(result.files["ret.manifest.json"])
    assert ".visible .entry ret_0_ew(" in text
    names = [name for _, name in _entry_params(text)]
    assert names[:2] == ["add_", "param_"], names
    assert manifest["buffers"][0]["name"] == "add"  # the manifest keeps the Python names
    if ptxas_path():
        (tmp_path / "k.ptx").write_text(text)
        assert ptxas(tmp_path / "k.ptx", "sm_80") == (0, "")


# ---------------------------------------------------------------- refusals


def _kernel(body: list, **kw: object) -> Kernel:
    args: dict = dict(
        name="k",
        what="ew",
        workgroup_size=(64, 1, 1),
        workgroups=(1, 1, 1),
        buffers=[BufferParam("out", "f32", "read_write")],
        uniform_fields=[],
        uses_uniform=False,
        shared=[],
        body=body,
        helpers=[],
    )
    args.update(kw)
    return Kernel(**args)


def _store(value: object) -> list:
    return [Store("out", Builtin("local_x"), value)]


def test_refusals_name_the_construct() -> None:
    ptx = PTX()
    x = Load("out", Const(0, "u32"), "f32")
    cases = {
        "the function `sin` on `i32`": _kernel(
            _store(Cast(Call("sin", (Const(1, "i32"),), "i32"), "f32"))
        ),
        "the scalar type `f64`": _kernel(_store(Call("exp", (Const(1.0, "f64"),), "f64"))),
        "2048 threads": _kernel(_store(x), workgroup_size=(2048, 1, 1)),
        "65536 bytes": _kernel(_store(x), shared=[SharedArray("big", "f32", 16384)]),
        "the operator `%` on `f32`": _kernel(_store(Binary("%", x, x, "f32"))),
    }
    flag = Var("$p", "bool")
    helper = Helper("h", (flag,), "f32", (Return(Const(1.0, "f32")),))
    cases["takes or returns `bool`"] = _kernel(
        _store(Call("h", (Const(True, "bool"),), "f32")), helpers=[helper]
    )
    for why, kernel in cases.items():
        reason = ptx.check(kernel)
        assert reason is not None and why in reason, (why, reason)
    assert ptx.check(_kernel(_store(Call("exp", (x,), "f32")))) is None


def test_casts_the_lowering_does_not_make_today_are_printed(tmp_path: Path) -> None:
    """IR `Cast`s from a float to bool (`!= 0`, unordered: nan is true) and from an int to
    f16 (through f32); the lowering spells `astype(bool_)` as a comparison and keeps f16
    values in f32 registers, so no zoo kernel reaches these."""
    i = Builtin("local_x")
    flag = {"f32": Load("x", i, "f32"), "f16": Load("h", i, "f16")}
    half = {"i32": Load("n", i, "i32"), "u32": Load("u", i, "u32")}
    body = [
        Store(f"is_{t}", i, Select(Cast(v, "bool"), Const(1, "u32"), Const(0, "u32"), "u32"))
        for t, v in flag.items()
    ] + [Store(f"{t}_half", i, Cast(v, "f16")) for t, v in half.items()]
    buffers = [
        BufferParam("x", "f32", "read"),
        BufferParam("h", "f16", "read"),
        BufferParam("n", "i32", "read"),
        BufferParam("u", "u32", "read"),
        BufferParam("is_f32", "u32", "read_write"),
        BufferParam("is_f16", "u32", "read_write"),
        BufferParam("i32_half", "f16", "read_write"),
        BufferParam("u32_half", "f16", "read_write"),
    ]
    text = PTX().print_kernel(_kernel(body, buffers=buffers), "").text
    conversions = [
        ln.split()[0] for ln in text.splitlines() if ln.strip().startswith(("cvt.", "setp."))
    ]
    assert conversions == [
        "setp.neu.f32",
        "cvt.f32.f16",
        "setp.neu.f32",
        "cvt.rn.f32.s32",
        "cvt.rn.f16.f32",
        "cvt.rn.f32.u32",
        "cvt.rn.f16.f32",
    ], conversions
    if ptxas_path():
        (tmp_path / "k.ptx").write_text(text)
        assert ptxas(tmp_path / "k.ptx", "sm_80") == (0, "")


def test_f16_constants_and_math_on_f16_values_are_printed(tmp_path: Path) -> None:
    """An IR f16 constant is its bits; math on f16 values runs in f32 and rounds back once.
    (The lowering keeps float16 values in f32 registers, so no zoo kernel reaches these.)"""
    i = Builtin("local_x")
    body = [
        Store("o", i, Call("exp", (Load("h", i, "f16"),), "f16")),
        Store("o", i, Const(1.5, "f16")),
    ]
    buffers = [BufferParam("h", "f16", "read"), BufferParam("o", "f16", "read_write")]
    text = PTX().print_kernel(_kernel(body, buffers=buffers), "").text
    lines = [ln.strip() for ln in text.splitlines()]
    f16 = [ln.split(" ", 1)[0] for ln in lines if ln.startswith(("cvt.", "st.", "mov.b16"))]
    assert [ln for ln in f16 if "16" in ln] == [
        "cvt.f32.f16",  # the load, widened
        "cvt.rn.f16.f32",  # exp's result, rounded once
        "st.global.b16",
        "mov.b16",
        "st.global.b16",
    ], f16
    assert any(ln.startswith("mov.b16") and ln.endswith(", 0x3E00;") for ln in lines)  # 1.5
    if ptxas_path():
        (tmp_path / "k.ptx").write_text(text)
        assert ptxas(tmp_path / "k.ptx", "sm_80") == (0, "")


BOOL_EQUALITY = """
from mimir.array import Dim, Tensor, float32, gpu, where

N = Dim("N")


@gpu
def same_sign(x: Tensor[float32, N], y: Tensor[float32, N]) -> Tensor[float32, N]:
    return where((x > 0.0) == (y > 0.0), x, y)


@gpu
def other_sign(x: Tensor[float32, N], y: Tensor[float32, N]) -> Tensor[float32, N]:
    return where((x > 0.0) != (y > 0.0), x, y)
"""


def test_bool_equality_is_xor_then_not(tmp_path: Path) -> None:
    result = compile_source("bools.py", BOOL_EQUALITY, ["ptx"])
    assert result.ok, [d.message for d in result.diagnostics]
    for name, negated in (("same_sign", True), ("other_sign", False)):
        text = str(result.files[f"{name}_0_ew.ptx"])
        lines = [ln.strip() for ln in text.splitlines()]
        at = next(k for k, ln in enumerate(lines) if ln.startswith("xor.pred"))
        d = lines[at].split()[1].rstrip(",")
        assert (lines[at + 1] == f"not.pred {d}, {d};") == negated, lines[at : at + 2]
        if ptxas_path():
            (tmp_path / f"{name}.ptx").write_text(text)
            assert ptxas(tmp_path / f"{name}.ptx", "sm_80") == (0, "")


def test_a_helper_ending_in_a_return_has_one_ret() -> None:
    a = Var("a", "f32")
    helper = Helper("h", (a,), "f32", (Return(a),))
    i = Builtin("local_x")
    kernel = _kernel(
        [Store("out", i, Call("h", (Load("out", i, "f32"),), "f32"))], helpers=[helper]
    )
    text = PTX().print_kernel(kernel, "").text
    body = text[text.index(".func") : text.index(".visible")]
    assert [ln.strip() for ln in body.strip().splitlines()][-2:] == ["ret;", "}"]
    assert body.count("ret;") == 1


def test_a_refusal_is_gpu070_and_writes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    from mimir.codegen.backends.base import Capabilities

    small = Capabilities(
        types=PTX.capabilities.types, max_invocations=64, max_shared_bytes=0, max_storage_buffers=8
    )
    monkeypatch.setattr(PTX, "capabilities", small)
    path = ZOO_DIR / "linear.py"
    result = compile_source(str(path), path.read_text(), ["ptx"])
    assert not result.ok and not result.files
    assert {d.code for d in result.diagnostics} == {BACKEND_CANNOT_EMIT}
    assert "cannot be emitted for ptx" in result.diagnostics[0].message
