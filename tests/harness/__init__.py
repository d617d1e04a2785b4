"""Test harness for emitted kernels: inputs, the shim's expected outputs, comparison, tools.

Every emitted kernel is executed by a tool nobody here wrote (wgpu on lavapipe
for WGSL, clang-built C++ for MSL) and compared with the shim (`mimir.array`),
the living definition of the kernel language:

    inputs = random_inputs(manifest, dims, seed=0)
    expected = shim_reference(source, "softmax", inputs, dims)
    actual = run_manifest(manifest, out_dir, inputs, dims)        # or run_msl_manifest
    for name, values in expected.items():
        assert_close(actual[name], values, dtype_of(manifest, name))

`require_tool(name)` skips a test whose external tool is missing, with the
reason, and fails it instead when `CI=true` (a fresh CI machine installs every
tool through `.ci/run`, so a missing one there is a broken setup, not a skip).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from mimir.runtime.verify import (
    TOLERANCES,
    choose_dims,
    error_summary,
    largest_buffer,
    mismatches,
    random_inputs,
    shim_reference,
    tf32_fallback_atol,
)

__all__ = [
    "MEDIUM",
    "SMALL",
    "TOLERANCES",
    "assert_close",
    "dtype_of",
    "medium_dims",
    "error_summary",
    "in_ci",
    "load_manifest",
    "random_inputs",
    "require",
    "require_tool",
    "shim_reference",
    "tf32_fallback_atol",
]


# ---------------------------------------------------------------- tools


def in_ci() -> bool:
    """Whether the suite runs under CI (`CI=true`), where missing tools are failures."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def require(available: bool, reason: str) -> None:
    """Skip (locally) or fail (under `CI=true`) when `available` is false."""
    if available:
        return
    if in_ci():
        pytest.fail(f"{reason} (CI=true: a missing tool fails the suite; see .ci/run)")
    pytest.skip(reason)


def require_tool(name: str) -> None:
    """Require an external tool the execution tests use.

    Names: `wgpu` (the Python package and a wgpu adapter, e.g. Mesa lavapipe),
    `clang++` (a clang that compiles the MSL emulation), `clang++-half` (one
    with `_Float16`, clang >= 15, for float16 MSL kernels), `tsan` (clang's
    ThreadSanitizer runtime), `asan`, or any executable on PATH.
    """
    available, reason = _probe(name)
    require(available, reason)


@functools.cache
def _probe(name: str) -> tuple[bool, str]:
    if name == "wgpu":
        return _probe_wgpu()
    if name in ("clang++", "clang++-half", "tsan", "asan"):
        return _probe_clang(name)
    found = shutil.which(name) is not None
    return found, f"`{name}` is not on PATH"


def _probe_wgpu() -> tuple[bool, str]:
    try:
        from mimir.runtime.wgpu_runner import adapter_description

        adapter_description()
    except Exception as err:  # noqa: BLE001 - any failure means "no usable wgpu"
        return False, f"wgpu cannot run kernels here: {err}"
    return True, ""


_PROBES = {
    "clang++": ("int main() { return 0; }\n", []),
    "clang++-half": (
        "#include <metal_stdlib>\nint main() { half h = 1.5h; return h > 1.0h ? 0 : 1; }\n",
        [],
    ),
    "tsan": ("#include <thread>\nint main() { std::thread t([] {}); t.join(); }\n", ["thread"]),
    "asan": ("int main() { return 0; }\n", ["address"]),
}


def _probe_clang(name: str) -> tuple[bool, str]:
    from .msl_runner import HEADER_DIR, clang_compiler

    compiler = clang_compiler()
    if compiler is None:
        return False, "no clang++ on PATH (apt-get install clang-16; g++ cannot compile MSL)"
    source, sanitizers = _PROBES[name]
    flags = ["-std=c++17", "-pthread", "-I", str(HEADER_DIR)]
    flags += [f"-fsanitize={s}" for s in sanitizers]
    with tempfile.TemporaryDirectory(prefix="mimir-probe-") as tmp:
        src, exe = Path(tmp) / "probe.cpp", Path(tmp) / "probe"
        src.write_text(source)
        build = subprocess.run(
            [compiler, *flags, str(src), "-o", str(exe)], capture_output=True, text=True
        )
        if build.returncode != 0:
            what = {
                "clang++": "cannot build a C++17 program",
                "clang++-half": "has no _Float16 (MSL `half` needs clang >= 15)",
                "tsan": "cannot build with -fsanitize=thread (install libclang-rt-NN-dev)",
                "asan": "cannot build with -fsanitize=address (install libclang-rt-NN-dev)",
            }[name]
            return False, f"{compiler} {what}: {build.stderr.strip()[-300:]}"
        run = subprocess.run([str(exe)], capture_output=True, text=True)
        if run.returncode != 0:
            return False, f"{compiler}: a {name} test program fails: {run.stderr.strip()[-300:]}"
    return True, ""


# ---------------------------------------------------------------- manifests and inputs


def cuda_include() -> Path | None:
    """A folder holding cuda.h: $CUDA_HOME, the PyPI wheel (`nvidia-cuda-runtime`), a toolkit."""
    candidates = [
        Path(os.environ[v]) / "include" for v in ("CUDA_HOME", "CUDA_PATH") if v in os.environ
    ]
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        candidates += sorted(Path(root).glob("cu*/include"), reverse=True)
    candidates += [
        Path("/usr/local/cuda/include"),
        *sorted(Path("/usr/local").glob("cuda-*/include")),
    ]
    return next((c for c in candidates if (c / "cuda.h").is_file()), None)


def write_files(files: Mapping[str, str | bytes], out: Path) -> None:
    """Write a compile result's files (`CompileResult.files`: text, or SPIR-V bytes)
    under `out`, making the backends' folders."""
    for relative, content in files.items():
        target = out / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)


def run_backend(
    backend: str,
    manifest: Mapping[str, Any],
    folder: Path,
    inputs: Mapping[str, Any],
    dims: Mapping[str, int],
    scalars: Mapping[str, float | int] | None = None,
    stats: list[dict[str, Any]] | None = None,
) -> dict[str, list]:
    """Run a manifest's kernels from `folder` on `backend`'s executor, requiring its tool:
    WGSL and SPIR-V on wgpu, MSL in the C++ emulation, PTX in the interpreter (which alone
    fills `stats`). The outputs, each a flat list."""
    scalars = dict(scalars or {})
    if backend in ("wgsl", "spirv"):
        require_tool("wgpu")
        from mimir.runtime.wgpu_runner import run_manifest

        return run_manifest(manifest, folder, inputs, dims, scalars)
    if backend == "msl":
        require_tool("clang++")
        from harness.msl_runner import run_msl_manifest

        return run_msl_manifest(manifest, folder, inputs, dims, scalars)
    from harness.ptx_interp import run_ptx_manifest_cpu

    return run_ptx_manifest_cpu(manifest, folder, inputs, dims, scalars, stats=stats)


def load_manifest(path: Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


# An `attention` launch never stores its queries x keys scores, so its largest buffer
# (queries x head dim) says little of its work: its "large" binding grows a dim until a
# buffer holds this many values instead. At a head dim of 13, T doubles from 7 to 511:
# 261,121 scores, the order of the stored scores the old rule grew to 100,000.
ATTENTION_LARGE = 4_096


# The zoo's "small" and "medium" wishes, dim by dim (the last repeats): small primes, so no
# dim is a multiple of a workgroup size and no two agree by accident; medium ones past a
# 16x16 tile or a 256-thread group.
SMALL = (7, 13, 5, 11, 3)
MEDIUM = (131, 17, 19, 23, 29)


def medium_dims(manifest: Mapping[str, Any], elements: int) -> dict[str, int]:
    """The "medium" binding: `MEDIUM`, except that where its buffers would hold more than
    the "large" binding's `elements` values (a rank-4 grid at 131x17x19x23 is 973,199
    programs, each of them a Python call in the shim), the last dims take their small
    size instead, one at a time, until the largest buffer is within `elements`. The first
    dim keeps 131, so a medium binding still spans several workgroups."""
    wishes = list(MEDIUM[: max(1, len(manifest.get("dims", [])))])
    dims = choose_dims(manifest, wishes)
    for i in range(len(wishes) - 1, 0, -1):
        if largest_buffer(manifest, dims) <= elements:
            break
        wishes[i] = SMALL[min(i, len(SMALL) - 1)]
        dims = choose_dims(manifest, wishes)
    return dims


def large_elements(manifest: Mapping[str, Any], elements: int) -> int:
    """The values some buffer should hold at a manifest's "large" binding: `elements`, or
    `ATTENTION_LARGE` for one with an `attention` launch."""
    attention = any(k["entry_point"].endswith("_attention") for k in manifest["kernels"])
    return min(elements, ATTENTION_LARGE) if attention else elements


def dtype_of(manifest: Mapping[str, Any], buffer: str) -> str:
    for buf in manifest["buffers"]:
        if buf["name"] == buffer:
            return buf["dtype"]
    raise KeyError(f"no buffer `{buffer}` in the manifest of `{manifest.get('function')}`")


def assert_close(
    actual: Sequence[Any],
    expected: Sequence[Any],
    dtype: str,
    rtol: float | None = None,
    atol: float | None = None,
    *,
    label: str = "",
) -> None:
    """Assert `|actual - expected| <= atol + rtol * |expected|` elementwise (exact for ints/bools).

    Tolerances default to `TOLERANCES[dtype]`. NaN matches NaN and an infinity
    the same infinity. The failure names the first mismatches by flat index.
    """
    where = f" in `{label}`" if label else ""
    if len(actual) != len(expected):
        raise AssertionError(f"{len(actual)} values, expected {len(expected)}{where}")
    bad = mismatches(actual, expected, dtype, rtol, atol)
    if bad:
        default_rtol, default_atol = TOLERANCES[dtype]
        rtol = default_rtol if rtol is None else rtol
        atol = default_atol if atol is None else atol
        max_abs, max_rel = error_summary(actual, expected)
        shown = "\n  ".join(f"[{i}] got {actual[i]!r}, expected {expected[i]!r}" for i in bad[:8])
        raise AssertionError(
            f"{len(bad)} of {len(expected)} {dtype} values differ{where} "
            f"(rtol={rtol}, atol={atol}; max abs error {max_abs:.3g}, max rel {max_rel:.3g}):"
            f"\n  {shown}"
        )
