"""The C hosts in `examples/hosts/`: built here, run on the committed kernel snapshots, compared
with the shim.

`mimir-vulkan` (plain C over libvulkan) reads a manifest and its `.spv` files and
runs every launch; it runs on Mesa lavapipe where there is no GPU. Inputs go in
and outputs come out as raw little-endian files, exactly as a user's program
would pass them; nothing of Mimir's Python runs in that process. `mimir-cuda`
(C over the CUDA driver API, from `cuda.h`) is compiled against the CUDA headers
and run only where a CUDA device is present.
"""

from __future__ import annotations

import functools
import json
import os
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from harness import assert_close, cuda_include, dtype_of, require, require_tool, tf32_fallback_atol

from mimir.runtime import manifest as mf
from mimir.runtime.verify import default_scalars, random_inputs, shim_reference

ROOT = Path(__file__).resolve().parent
REPO = ROOT.parent
HOSTS = REPO / "examples" / "hosts"
OUT = ROOT / "kernels" / "out"

# (file stem, function, dims): one launch, several launches with scratch buffers,
# ints and bools with several outputs, float16, an f32 scalar in the uniform.
CASES = [
    ("linear", "linear_relu", {"N": 37}),
    ("linear", "linear_relu", {"N": 1}),
    ("linear", "linear_gelu_scaled", {"N": 9}),
    ("attention", "log_probs", {"B": 5, "T": 131}),
    ("layernorm", "layernorm", None),
    ("attention", "attention", None),
    ("reductions", "int_sum_and_bool_any", {"A": 7, "B": 300}),
    ("reductions", "sum_all", {"A": 3, "B": 70, "C": 11}),
    ("combos", "half_pipeline", None),
    ("combos", "bool_reductions", None),
    # InOut buffers uploaded and read back (alone, next to an output, at index level),
    # a tuple result, and an input with a `Range` (in range: random_inputs draws from it);
    # the zoo test below runs them on Vulkan too, these run on CUDA where a GPU is lent.
    ("inout", "adam_step", None),
    ("inout", "scale_and_norm", None),
    ("inout", "kv_append", None),
    ("inout", "layer_norm_stats", None),
    ("gathers", "embedding", None),
]


def _compiler() -> str | None:
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return name
    return None


def _make(target: str, out: Path, **variables: str) -> subprocess.CompletedProcess:
    cc = _compiler()
    require(cc is not None, "no C compiler (cc, gcc or clang) on PATH")
    require_tool("make")
    args = ["make", "-s", "-C", str(HOSTS / target), f"OUT={out}", f"CC={cc}"]
    args += [f"{k}={v}" for k, v in variables.items()]
    return subprocess.run(args, capture_output=True, text=True, timeout=300)


@functools.cache
def _vulkan_host(build: Path) -> Path:
    result = _make("vulkan", build)
    headers = Path("/usr/include/vulkan/vulkan.h").exists()
    require(result.returncode == 0 or headers,
            "the Vulkan headers are missing (Debian: libvulkan-dev)")  # fmt: skip
    assert result.returncode == 0, result.stderr
    return build / "mimir-vulkan"


def _default_dims(manifest: dict) -> dict[str, int]:
    from mimir.runtime.verify import choose_dims

    return choose_dims(manifest, (7, 13, 5, 11, 3))


def _write_inputs(manifest: dict, inputs: dict, folder: Path) -> list[str]:
    args = []
    for buf in manifest["buffers"]:
        if buf["role"] in mf.UPLOADED:
            path = folder / f"{buf['name']}.in"
            path.write_bytes(mf.encode(inputs[buf["name"]], buf["dtype"]))
            args.append(f"{buf['name']}=@{path}")
    return args


def _read_outputs(manifest: dict, dims: dict, folder: Path) -> dict[str, list]:
    out = {}
    for buf in manifest["buffers"]:
        if buf["role"] in mf.RESULTS:  # an inout buffer comes back as the kernel left it
            count = mf.numel(mf.buffer_shape(buf, dims))
            data = (folder / f"{buf['name']}.bin").read_bytes()
            assert len(data) == count * mf.buffer_element_size(buf), buf["name"]
            out[buf["name"]] = mf.decode(data, buf["dtype"], count)
    return out


def _run_case(host: Path, backend: str, stem: str, function: str, dims, tmp: Path) -> str:
    """Run one zoo kernel in a C host and compare with the shim; the host's stderr."""
    path = OUT / backend / stem / f"{function}.manifest.json"
    manifest = json.loads(path.read_text())
    dims = dims or _default_dims(manifest)
    inputs = random_inputs(manifest, dims, seed=3)
    scalars = default_scalars(manifest, dims)
    expected = shim_reference(ROOT / "kernels" / f"{stem}.py", function, inputs, dims, scalars)
    values = [f"{k}={v}" for k, v in {**dims, **scalars}.items()]
    command = [str(host), str(path), *values, *_write_inputs(manifest, inputs, tmp), "-o", str(tmp)]
    env = {**os.environ, "XDG_RUNTIME_DIR": os.environ.get("XDG_RUNTIME_DIR", "/tmp")}
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr
    actual = _read_outputs(manifest, dims, tmp)
    assert set(actual) == set(expected)
    atol = tf32_fallback_atol(manifest, dims)
    for name, want in expected.items():
        dtype = dtype_of(manifest, name)
        assert_close(actual[name], want, dtype, atol=atol, label=f"{function}.{name}")
    first = next(b["name"] for b in manifest["buffers"] if b["role"] in mf.RESULTS)
    assert result.stdout.startswith(f"{first} "), result.stdout  # the printed summary
    return result.stderr


# A LeakSanitizer stack frame: `#3 0x7f... in function file.c:12` or `#3 0x7f... (module+0x1f)`
_FRAME = re.compile(r"^\s*#\d+ 0x[0-9a-f]+ (?:in (\S+)\s*(\S*)|\((.*)\))", re.M)
# frames that are not the host's: the sanitizer's allocator, and the Vulkan driver (Mesa's
# lavapipe, which the loader has unloaded by the time LeakSanitizer symbolizes its frames)
_NOT_THE_HOST = ("libsanitizer", "<unknown module>", "libvulkan", "libLLVM", "libgallium")


def leaks_of_the_host(report: str) -> list[str]:
    """The LeakSanitizer leak reports of `report` with a frame in the host's own code.

    Debian 12's Mesa 22.3.6 lavapipe leaks one 128-byte `realloc` inside the driver on
    every run (seen on the base commit of stop 21 too); its frames are the allocator and
    an unloaded module only. A leak the host makes has a frame in the host's C files."""
    blocks = re.split(r"(?=^(?:Direct|Indirect) leak of)", report, flags=re.M)[1:]
    ours = []
    for block in blocks:
        for function, where, module in _FRAME.findall(block):
            place = f"{function} {where}" if function else module
            if function.startswith("__interceptor_") or any(m in place for m in _NOT_THE_HOST):
                continue
            ours.append(block.strip())
            break
    return ours


@functools.cache
def _cuda_host(build: Path) -> Path:
    include = cuda_include()
    reason = "no CUDA headers (cuda.h): install the test extra (PyPI nvidia-cuda-runtime)"
    require(include is not None, reason)
    result = _make("cuda", build, CUDA_INCLUDE=str(include))
    assert result.returncode == 0, result.stderr
    return build / "mimir-cuda"


@pytest.fixture(scope="module")
def build(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("hosts-build")


@pytest.mark.parametrize(("stem", "function", "dims"), CASES, ids=lambda c: str(c))
def test_vulkan_host_runs_spirv_kernels(build: Path, tmp_path: Path, stem, function, dims) -> None:
    require_tool("wgpu")  # the same Vulkan driver (lavapipe here) runs the C host
    _run_case(_vulkan_host(build), "spirv", stem, function, dims, tmp_path)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "no value given for dim `N`"),
        (["N=0"], "below its minimum 1"),
        (["N=4", "M=3"], "no dim or scalar named `M`"),
        (["N=4", "x=@/nonexistent.bin"], "cannot read"),
        (["N=4", "x=@{short}"], "input `x` has 8 bytes"),
    ],
)
def test_vulkan_host_refuses_bad_arguments(build: Path, tmp_path: Path, args, message) -> None:
    host = _vulkan_host(build)
    short = tmp_path / "short.bin"
    short.write_bytes(bytes(8))
    manifest = OUT / "spirv" / "linear" / "linear_relu.manifest.json"
    args = [a.format(short=short) for a in args]
    result = subprocess.run([str(host), str(manifest), *args], capture_output=True, text=True)
    assert result.returncode == 2
    assert message in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("ids", "message"),
    [
        ([0, 4, 5, 1], "[GPU043] input `ids` holds 5 at index [2], outside its range [0, 5)"),
        ([-3, 0, 0, 0], "[GPU043] input `ids` holds -3 at index [0]"),
    ],
)
def test_vulkan_host_refuses_a_value_outside_its_range(build: Path, tmp_path: Path, ids, message):
    """`ids: Tensor[int32, N, Range(0, V)]`: the kernel gathers `table[ids[i]]` unguarded, so
    the host checks every value before the launch and names the first one outside."""
    host = _vulkan_host(build)
    manifest = OUT / "spirv" / "gathers" / "embedding.manifest.json"
    (tmp_path / "ids.in").write_bytes(mf.encode(ids, "int32"))
    (tmp_path / "table.in").write_bytes(mf.encode([0.5] * 10, "float32"))
    args = ["V=5", "D=2", "N=4", f"ids=@{tmp_path / 'ids.in'}", f"table=@{tmp_path / 'table.in'}"]
    result = subprocess.run([str(host), str(manifest), *args, "-o", str(tmp_path)],
                            capture_output=True, text=True)  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert message in result.stderr, result.stderr
    assert not (tmp_path / "out.bin").exists()  # nothing ran
    # Not given, with --zeros, `ids` is zeros: in range.
    result = subprocess.run(
        [str(host), str(manifest), *args[:3], "--zeros"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_the_c_hosts_read_the_inout_role_and_refuse_unknown_ones(build: Path, tmp_path: Path):
    host = _vulkan_host(build)
    source = OUT / "spirv" / "inout"
    text = (source / "swap.manifest.json").read_text()
    for spv in source.glob("swap*.spv"):
        (tmp_path / spv.name).write_bytes(spv.read_bytes())
    (tmp_path / "p.in").write_bytes(mf.encode([1.0, 2.0], "float32"))
    (tmp_path / "q.in").write_bytes(mf.encode([3.0, 4.0], "float32"))
    good = tmp_path / "swap.manifest.json"
    good.write_text(text)
    args = ["N=2", f"p=@{tmp_path / 'p.in'}", f"q=@{tmp_path / 'q.in'}", "-o", str(tmp_path)]
    result = subprocess.run([str(host), str(good), *args], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["p float32 [2]: 3 4", "q float32 [2]: 1 2"]
    assert mf.decode((tmp_path / "p.bin").read_bytes(), "float32", 2) == [3.0, 4.0]
    bad = tmp_path / "bad.manifest.json"
    bad.write_text(text.replace('"inout"', '"in_out"', 1))
    result = subprocess.run([str(host), str(bad), *args], capture_output=True, text=True)
    assert result.returncode == 2
    assert '[MAN002] buffers[0].role: "in_out" is not one of input' in result.stderr


def test_vulkan_host_refuses_a_file_that_is_not_a_manifest(build: Path, tmp_path: Path) -> None:
    host = _vulkan_host(build)
    bad = tmp_path / "bad.manifest.json"
    bad.write_text('{"format": "mimir-manifest/1", "function": ')
    result = subprocess.run([str(host), str(bad)], capture_output=True, text=True)
    assert result.returncode == 2 and "[MAN001] the manifest is not JSON" in result.stderr


def _linear_npy(folder: Path, n: int = 37) -> dict:
    import numpy as np

    rng = np.random.default_rng(5)
    arrays = {
        "x": rng.random((n, 20), dtype=np.float32),
        "w": rng.random((20, 33), dtype=np.float32),
        "b": rng.random(33, dtype=np.float32),
    }
    for name, value in arrays.items():
        np.save(folder / f"{name}.npy", value)
    return arrays


def test_vulkan_host_reads_npy_inputs_and_their_dims(build: Path, tmp_path: Path) -> None:
    """`x=@x.npy`: the dims its axes name come from its shape (no `N=37`), and `-o` makes
    its folder, parents included, before anything runs."""
    import numpy as np

    require_tool("wgpu")
    host = _vulkan_host(build)
    manifest = OUT / "spirv" / "linear" / "linear_relu.manifest.json"
    arrays = _linear_npy(tmp_path)
    results = tmp_path / "results" / "run1"
    args = [f"{k}=@{tmp_path / f'{k}.npy'}" for k in arrays]
    run = subprocess.run([str(host), str(manifest), *args, "-o", str(results)],
                         capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("out float32 [37, 33]:")
    got = np.fromfile(results / "out.bin", dtype="<f4").reshape(37, 33)
    want = np.maximum(arrays["x"] @ arrays["w"] + arrays["b"], 0)
    assert np.allclose(got, want, rtol=1e-4, atol=1e-5)


def test_vulkan_host_reads_the_open_dim_from_a_raw_file(build: Path, tmp_path: Path) -> None:
    require_tool("wgpu")
    host = _vulkan_host(build)
    manifest = OUT / "spirv" / "linear" / "linear_relu.manifest.json"
    for name, value in _linear_npy(tmp_path, n=5).items():
        value.tofile(tmp_path / f"{name}.bin")
    args = [f"{k}=@{tmp_path / f'{k}.bin'}" for k in ("x", "w", "b")]
    run = subprocess.run([str(host), str(manifest), *args], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("out float32 [5, 33]:")


def test_vulkan_host_solves_a_dim_only_an_equation_fixes(build: Path, tmp_path: Path) -> None:
    """`x: Tensor[float32, 3 * C]` alone: the manifest's `solve` binds C from x.npy's shape
    (size / 3, exactly), and `[B, T + 1]` binds T as the size less 1."""
    import numpy as np

    require_tool("wgpu")
    host = _vulkan_host(build)
    folder = OUT / "spirv" / "sizes"
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, 15).astype("<f4")
    np.save(tmp_path / "x.npy", x)
    run = subprocess.run([str(host), str(folder / "thirds_summed.manifest.json"),
                          f"x=@{tmp_path / 'x.npy'}", "-o", str(tmp_path / "a")],
                         capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("out float32 [5]:")
    got = np.fromfile(tmp_path / "a" / "out.bin", dtype="<f4")
    assert np.allclose(got, x[:5] + 2 * x[5:10] + 3 * x[10:], rtol=1e-5, atol=1e-6)
    rows = rng.uniform(-1, 1, (2, 6)).astype("<f4")
    np.save(tmp_path / "rows.npy", rows)
    run = subprocess.run([str(host), str(folder / "shifted_rows.manifest.json"),
                          f"x=@{tmp_path / 'rows.npy'}", "-o", str(tmp_path / "b")],
                         capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 0, run.stderr
    got = np.fromfile(tmp_path / "b" / "out.bin", dtype="<f4").reshape(2, 5)
    assert np.allclose(got, rows[:, 1:] - rows[:, :5])
    np.save(tmp_path / "x7.npy", x[:7])
    run = subprocess.run([str(host), str(folder / "thirds_summed.manifest.json"),
                          f"x=@{tmp_path / 'x7.npy'}"], capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 2
    want = (
        "[GPU040] argument `x` has size 7 on axis 0, which fits no `C` (7 is not a multiple of 3)"
    )
    assert want in run.stderr


def test_vulkan_host_refuses_a_dim_past_its_relation(build: Path, tmp_path: Path) -> None:
    """`Dim("T", max=MAXT)` is `"max": "MAXT"` in the manifest: T = MAXT runs, T > MAXT is
    GPU042 before any launch."""
    import numpy as np

    require_tool("wgpu")
    host = _vulkan_host(build)
    manifest = OUT / "spirv" / "related" / "encoder.manifest.json"
    rng = np.random.default_rng(5)
    wpe = rng.uniform(-1, 1, (6, 3)).astype("<f4")
    np.save(tmp_path / "wpe.npy", wpe)
    xs = {t: rng.uniform(-1, 1, (2, t, 3)).astype("<f4") for t in (6, 7)}
    for t, code in ((6, 0), (7, 2)):
        np.save(tmp_path / f"x{t}.npy", xs[t])
        out = tmp_path / f"t{t}"
        args = [
            f"wte_rows=@{tmp_path / f'x{t}.npy'}",
            f"wpe=@{tmp_path / 'wpe.npy'}",
            "-o",
            str(out),
        ]
        run = subprocess.run([str(host), str(manifest), *args], capture_output=True, text=True)
        assert run.returncode == code, run.stderr
    got = np.fromfile(tmp_path / "t6" / "out.bin", dtype="<f4").reshape(2, 6, 3)
    assert np.allclose(got, xs[6] + wpe)
    assert "[GPU042] dim `T`=7 is above its maximum MAXT=6" in run.stderr


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("float64", "[GPU041] input `x` in x.npy holds '<f8'; the kernel takes float32 ('<f4'): "
                    "save it with .astype(np.float32)"),
        ("rank", "[GPU040] input `x` in x.npy has shape [37, 20, 1]; the kernel takes [N, 20]"),
        ("axis", "[GPU040] input `x` in x.npy has shape [37, 21]; the kernel takes [N, 20]"),
        ("fortran", "save it in C order"),
        ("garbage", "[GPU040] input `x`: "),
        ("dims", "[GPU040] input `x` in x.npy has shape [37, 20]; the kernel takes [N, 20] = "
                 "[36, 20]"),
        ("missing", "[GPU040] no data for input `b`: give it as b=@FILE (a .npy file or raw "
                    "bytes), or --zeros"),
    ],
)  # fmt: skip
def test_vulkan_host_refuses_npy_inputs_that_do_not_fit(
    build: Path, tmp_path: Path, change: str, message: str
) -> None:
    import numpy as np

    host = _vulkan_host(build)
    manifest = OUT / "spirv" / "linear" / "linear_relu.manifest.json"
    arrays = _linear_npy(tmp_path)
    x = arrays["x"]
    if change == "float64":
        np.save(tmp_path / "x.npy", x.astype(np.float64))
    elif change == "rank":
        np.save(tmp_path / "x.npy", x[:, :, None])
    elif change == "axis":
        np.save(tmp_path / "x.npy", np.zeros((37, 21), np.float32))
    elif change == "fortran":
        np.save(tmp_path / "x.npy", np.asfortranarray(x))
    elif change == "garbage":
        (tmp_path / "x.npy").write_bytes(b"\x93NUMPY\x01\x00\xff\xff{'descr': ")
    names = ["x", "w"] if change == "missing" else ["x", "w", "b"]
    args = [f"{k}=@{k}.npy" for k in names] + (["N=36"] if change == "dims" else [])
    out = tmp_path / "out"
    run = subprocess.run([str(host), str(manifest), *args, "-o", str(out)],
                         capture_output=True, text=True, cwd=tmp_path)  # fmt: skip
    assert run.returncode == 2, run.stderr
    assert message in run.stderr, run.stderr
    assert not (out / "out.bin").exists()


def test_a_c_host_names_the_backend_a_manifest_is_for(build: Path, tmp_path: Path) -> None:
    host = _vulkan_host(build)
    manifest = OUT / "wgsl" / "linear" / "linear_relu.manifest.json"
    run = subprocess.run([str(host), str(manifest), "N=3", "--zeros"],
                         capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 2
    assert (
        "[MAN002] backend: this host runs spirv, not wgsl: compile the kernels for it with "
        "`mimir compile-gpu --backend spirv`"
    ) in run.stderr


def test_the_npy_reader_is_memory_safe_on_broken_files(tmp_path: Path) -> None:
    """Truncated and corrupted .npy files through the host built with AddressSanitizer and
    UBSan: refused with exit 2, never a crash."""
    import numpy as np

    require_tool("wgpu")
    build = tmp_path / "asan"
    build.mkdir()
    result = _make("vulkan", build, CFLAGS=SANITIZE)
    assert result.returncode == 0, result.stderr
    host = build / "mimir-vulkan"
    manifest = OUT / "spirv" / "linear" / "linear_relu.manifest.json"
    np.save(tmp_path / "good.npy", np.ones((3, 20), np.float32))
    data = (tmp_path / "good.npy").read_bytes()
    rng = random.Random(7)
    broken = [data[:n] for n in range(0, 140, 7)]
    for _ in range(30):
        at = rng.randrange(128)
        broken.append(
            data[:at] + bytes([rng.choice(b"(),'0123456789:{} \x00\xff")]) + data[at + 1 :]
        )
    env = {**os.environ, "ASAN_OPTIONS": "detect_leaks=0", "XDG_RUNTIME_DIR": "/tmp"}
    for i, blob in enumerate(broken):
        path = tmp_path / f"x{i}.npy"
        path.write_bytes(blob)
        run = subprocess.run([str(host), str(manifest), f"x=@{path}", "--zeros"],
                             capture_output=True, env=env)  # fmt: skip
        report = run.stderr.decode(errors="replace")
        assert "Sanitizer" not in report and "runtime error" not in report, (blob, report)
        assert run.returncode in (0, 2), (blob, run.returncode, report)


def test_cuda_host_builds_against_the_cuda_headers(build: Path) -> None:
    host = _cuda_host(build)
    manifest = OUT / "ptx" / "linear" / "linear_relu.manifest.json"
    result = subprocess.run([str(host), str(manifest)], capture_output=True, text=True)
    assert result.returncode == 2 and "no value given for dim `N`" in result.stderr


@functools.cache
def _cuda_device(host: Path) -> str | None:
    """Why the CUDA host cannot run here (no driver, no device), or None when it can."""
    manifest = OUT / "ptx" / "linear" / "linear_relu.manifest.json"
    result = subprocess.run(
        [str(host), str(manifest), "N=1", "--zeros"], capture_output=True, text=True
    )
    return result.stderr.strip() if result.returncode == 3 else None


@pytest.mark.parametrize(("stem", "function", "dims"), CASES, ids=lambda c: str(c))
def test_cuda_host_runs_ptx_kernels(build: Path, tmp_path: Path, stem, function, dims) -> None:
    host = _cuda_host(build)
    missing = _cuda_device(host)
    if missing:
        pytest.skip(f"no CUDA device: {missing}")
    _run_case(host, "ptx", stem, function, dims, tmp_path)


def _random_expr(rng: random.Random, depth: int) -> str:
    if depth == 0 or rng.random() < 0.25:
        return rng.choice(["N", "K", "M", str(rng.randint(0, 70))])
    kind = rng.random()
    a, b = _random_expr(rng, depth - 1), _random_expr(rng, depth - 1)
    if kind < 0.15:
        return f"cdiv({a}, {b})"
    if kind < 0.25:
        return f"-{a}" if rng.random() < 0.5 else f"-({a})"
    if kind < 0.4:
        return f"({a} {rng.choice(['+', '-', '*', '//', '%'])} {b})"
    return f"{a} {rng.choice(['+', '-', '*', '//', '%'])} {b}"


def test_the_c_dim_expression_evaluator_agrees_with_python(build: Path) -> None:
    """Random expressions (floor division and modulo of negatives, precedence, cdiv) evaluated
    by examples/hosts/common/manifest.c and by mimir.runtime.dimexpr: the same value or both
    an error."""
    from mimir.runtime.dimexpr import DimExprError, evaluate

    cc = _compiler()
    require(cc is not None, "no C compiler (cc, gcc or clang) on PATH")
    common = HOSTS / "common"
    exe = build / "dimexpr"
    subprocess.run(
        [cc, "-O1", "-std=c11", "-Wall", "-Werror", "-D_POSIX_C_SOURCE=200809L", f"-I{common}",
         "-o", str(exe), str(ROOT / "harness" / "c" / "dimexpr_main.c"),
         str(common / "manifest.c"), str(common / "json_check.c"),
         str(common / "cjson" / "cJSON.c"), "-lm"],
        check=True,
    )  # fmt: skip
    rng = random.Random(14)
    env = {"N": 37, "K": 5, "M": 1}
    exprs = [_random_expr(rng, 4) for _ in range(600)] + ["-7 // 2", "-7 % 3", "7 % -3", "2*-3"]
    out = subprocess.run(
        [str(exe), *(f"{k}={v}" for k, v in env.items()), "--", *exprs],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    assert len(out) == len(exprs)
    errors = 0
    for expr, line in zip(exprs, out, strict=True):
        try:
            want = str(evaluate(expr, env))
        except DimExprError:
            errors += 1
            assert line.startswith("error: "), (expr, line)
            continue
        assert line == want, expr
    assert 0 < errors < len(exprs) // 2  # both kinds of case were exercised


SANITIZE = (
    "-O1 -g -std=c11 -Wall -Wextra -Werror -D_POSIX_C_SOURCE=200809L "
    "-fsanitize=address,undefined -fno-sanitize-recover=all"
)


def test_the_cuda_host_runs_sm_90a_kernels_on_compute_capability_9_0_alone(
    build: Path, tmp_path: Path
) -> None:
    """The check mimir-cuda makes once the device is open (manifest.c, built with the
    sanitizers): `sm_90a` needs compute capability exactly 9.0, and the refusal names the
    kernel and the device's capability."""
    cc = _compiler()
    require(cc is not None, "no C compiler (cc, gcc or clang) on PATH")
    common = HOSTS / "common"
    exe = build / "capability"
    subprocess.run(
        [cc, *SANITIZE.split(), f"-I{common}", "-o", str(exe),
         str(ROOT / "harness" / "c" / "capability_main.c"), str(common / "manifest.c"),
         str(common / "json_check.c"), str(common / "cjson" / "cJSON.c"), "-lm"],
        check=True,
    )  # fmt: skip
    manifest = json.loads((OUT / "ptx" / "linear" / "linear_relu.manifest.json").read_text())
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps(manifest))
    manifest["kernels"][0]["requires"] = ["sm_90a"]
    hopper = tmp_path / "sm_90a.json"
    hopper.write_text(json.dumps(manifest))

    def check(path: Path, major: int, minor: int) -> str:
        run = subprocess.run([str(exe), str(path), str(major), str(minor)],
                             capture_output=True, text=True, check=True)  # fmt: skip
        assert "Sanitizer" not in run.stderr and "runtime error" not in run.stderr, run.stderr
        return run.stdout.strip()

    assert check(hopper, 9, 0) == "ok"
    assert check(plain, 8, 0) == "ok"
    for major, minor in ((8, 0), (8, 9), (9, 1), (10, 0), (12, 0)):
        assert check(hopper, major, minor) == (
            "refused: kernel `linear_relu_0_matmul` requires `sm_90a` (compute capability 9.0); "
            f"the device has compute capability {major}.{minor}"
        )
    manifest["kernels"][0]["requires"] = ["tensor-memory"]
    hopper.write_text(json.dumps(manifest))
    assert check(hopper, 9, 0) == (
        "error: [MAN002] kernels[0].requires[0]: kernel `linear_relu_0_matmul` requires "
        "`tensor-memory`, which this host does not know"
    )


def test_the_vulkan_host_is_memory_safe_on_good_and_broken_manifests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AddressSanitizer and UBSan over a full run (three launches, scratch buffers) and over
    truncated and corrupted manifests, which must be refused with exit 2, never crash."""
    require_tool("wgpu")
    build = tmp_path / "asan"
    build.mkdir()
    result = _make("vulkan", build, CFLAGS=SANITIZE)
    assert result.returncode == 0, result.stderr
    host = build / "mimir-vulkan"
    with monkeypatch.context() as patch:
        # a full run frees all it allocates: leaks are reported (exit status 0, so that the
        # driver's own leak does not fail the run) and those in the host's code counted
        patch.setenv("ASAN_OPTIONS", "detect_leaks=1")
        patch.setenv("LSAN_OPTIONS", "exitcode=0")
        for stem, function in (("layernorm", "layernorm"), ("inout", "scale_and_norm")):
            report = _run_case(host, "spirv", stem, function, None, tmp_path)
            assert leaks_of_the_host(report) == [], report
    # A range violation found in a rank-2 input (the index printed) is refused cleanly.
    labels = tmp_path / "labels.in"
    labels.write_bytes(mf.encode([0, 1, 7], "int32"))
    # (refused after the device is open: the driver's own leak is not counted)
    range_run = subprocess.run(
        [str(host), str(OUT / "spirv" / "gathers" / "cross_entropy_mean.manifest.json"),
         "N=3", "C=4", f"labels=@{labels}", "--zeros"],
        capture_output=True, text=True,
        env={**os.environ, "XDG_RUNTIME_DIR": "/tmp", "ASAN_OPTIONS": "detect_leaks=0"},
    )  # fmt: skip
    assert range_run.returncode == 2, range_run.stderr
    assert "input `labels` holds 7 at index [2, 0], outside its range [0, 4)" in range_run.stderr
    # A refused manifest may exit from the middle of setting up (as C programs do), so
    # leaks are not counted there; reads and writes out of bounds still are.
    env = {**os.environ, "ASAN_OPTIONS": "detect_leaks=0", "XDG_RUNTIME_DIR": "/tmp"}
    text = (OUT / "spirv" / "linear" / "linear_relu.manifest.json").read_bytes()
    rng = random.Random(3)
    broken = [text[:n] for n in range(0, len(text), max(1, len(text) // 40))]
    for _ in range(40):
        at = rng.randrange(len(text))
        broken.append(text[:at] + bytes([rng.choice(b'{}[]":,0-9aeE\\\x00')]) + text[at + 1 :])
    for i, data in enumerate(broken):
        path = OUT / "spirv" / "linear"  # the .spv files the manifest names
        target = tmp_path / f"m{i}.manifest.json"
        target.write_bytes(data)
        for spv in path.glob("linear_relu*.spv"):
            (tmp_path / spv.name).write_bytes(spv.read_bytes())
        run = subprocess.run(
            [str(host), str(target), "N=3", "--zeros"], capture_output=True, env=env
        )
        report = run.stderr.decode(errors="replace")
        assert "Sanitizer" not in report and "runtime error" not in report, (data, report)
        assert run.returncode in (0, 1, 2), (data, run.returncode, report)


ZOO = sorted(
    (p.parent.name, p.name.removesuffix(".manifest.json"))
    for p in (OUT / "spirv").glob("*/*.manifest.json")
)


@pytest.mark.parametrize(("stem", "function"), ZOO, ids=[f"{s}.{f}" for s, f in ZOO])
def test_vulkan_host_runs_every_zoo_kernel(build: Path, tmp_path: Path, stem, function) -> None:
    """Every committed SPIR-V snapshot of tests/kernels runs from C and matches the shim."""
    require_tool("wgpu")
    _run_case(_vulkan_host(build), "spirv", stem, function, None, tmp_path)


def test_vulkan_host_takes_bfloat16_files_with_or_without_the_padding(
    build: Path, tmp_path: Path
) -> None:
    """An odd count of bfloat16 values (3 x 7) as raw bits: the file may hold just the
    values (what `ndarray.tofile` writes) or the device's whole last word; the output file
    holds the values only."""
    require_tool("wgpu")
    host = _vulkan_host(build)
    path = OUT / "spirv" / "half_storage" / "bf16_rms_norm.manifest.json"
    manifest = json.loads(path.read_text())
    dims = {"N": 3, "D": 7}
    inputs = random_inputs(manifest, dims, seed=4)
    want = shim_reference(ROOT / "kernels" / "half_storage.py", "bf16_rms_norm", inputs, dims)
    env = {**os.environ, "XDG_RUNTIME_DIR": os.environ.get("XDG_RUNTIME_DIR", "/tmp")}
    for padded in (True, False):
        folder = tmp_path / str(padded)
        folder.mkdir()
        args = []
        for name in ("x", "g"):
            data = mf.encode(inputs[name], "bfloat16")
            count = len(inputs[name])
            (folder / name).write_bytes(data if padded else data[: 2 * count])
            args.append(f"{name}=@{folder / name}")
        command = [str(host), str(path), "N=3", "D=7", *args, "-o", str(folder)]
        result = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
        assert result.returncode == 0, result.stderr
        data = (folder / "out.bin").read_bytes()
        assert len(data) == 2 * 21
        assert_close(mf.decode(data, "bfloat16", 21), want["out"], "bfloat16")


def test_only_leaks_with_a_frame_in_the_host_count() -> None:
    """The driver's leak (allocator and unloaded-module frames only) is not the host's; a
    leak with a frame in the host's C files is."""
    driver = (
        "==2796==ERROR: LeakSanitizer: detected memory leaks\n\n"
        "Direct leak of 128 byte(s) in 1 object(s) allocated from:\n"
        "    #0 0x7fb3e5cb78d5 in __interceptor_realloc "
        "../../../../src/libsanitizer/asan/asan_malloc_linux.cpp:85\n"
        "    #1 0x7fb3e1878455  (<unknown module>)\n\n"
        "SUMMARY: AddressSanitizer: 128 byte(s) leaked in 1 allocation(s).\n"
    )
    assert leaks_of_the_host(driver) == []
    host = driver.replace(
        "    #1 0x7fb3e1878455  (<unknown module>)\n",
        "    #1 0x55d0c0a1b2c3 in read_manifest examples/hosts/common/manifest.c:212\n"
        "    #2 0x55d0c0a1b400 in main examples/hosts/vulkan/mimir_vulkan.c:640\n",
    )
    (leak,) = leaks_of_the_host(host)
    assert "manifest.c:212" in leak
    assert leaks_of_the_host("") == []
