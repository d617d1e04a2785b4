"""Run the MSL kernels of a Mimir manifest on the CPU, as C++ built by clang (test-only).

There is no Metal device here, so an MSL kernel is shown correct by compiling
it as C++17 against `tests/msl/metal_stdlib` and running it with the semantics
that matter: one OS thread per GPU thread of a threadgroup, threadgroups run one
after another, `threadgroup` arrays shared by the group, `threadgroup_barrier` a
real barrier. `run_msl_manifest` writes a small C++ driver for the manifest's
kernels (one translation unit holding each `.metal` file in its own namespace),
builds it once per content hash, and runs it on the manifest's buffers:

- `[[buffer(n)]]` parameters get the buffer the manifest binds at index `n` (or
  the uniform block at `uniform_binding`), cast to the parameter's type;
- the thread-position attributes get the thread's ids, narrowed to the
  parameter's type (`uint`, `uint2`, `uint3`, `ushort`...);
- a guard band after and before every buffer is checked after each launch, so a
  kernel that writes out of bounds fails (`sanitize="address"` also catches
  out-of-bounds reads);
- `sanitize="thread"` builds with ThreadSanitizer and fails on any report: a
  missing `threadgroup_barrier` is a data race on threadgroup memory;
- a barrier reached by only some threads of a group is reported, not hung on.

A kernel without barriers or threadgroup memory is run by a few worker threads
over all GPU threads instead (its threads cannot observe each other).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mimir.runtime import manifest as mf

from .msl_driver import MslBuildError, driver_source, grouped_threads

HEADER_DIR = Path(__file__).resolve().parent.parent / "msl"

__all__ = [
    "MslBuildError",
    "MslRunError",
    "build_driver",
    "clang_compiler",
    "grouped_threads",
    "run_msl_manifest",
]

# clang >= 15 has _Float16 on x86-64 (MSL `half`); older clang still runs f32 kernels.
_CANDIDATES = ("clang++-19", "clang++-18", "clang++-17", "clang++-16", "clang++-15", "clang++")


class MslRunError(RuntimeError):
    """The kernel ran and failed: a sanitizer report, an out-of-bounds write, a hang."""


def clang_compiler() -> str | None:
    """The clang++ the runner uses: `$MIMIR_CLANGXX`, else the newest one on PATH."""
    forced = os.environ.get("MIMIR_CLANGXX")
    if forced:
        return shutil.which(forced)
    for name in _CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


def _cache_dir() -> Path:
    root = os.environ.get("MIMIR_MSL_CACHE")
    path = Path(root) if root else Path(tempfile.gettempdir()) / "mimir-msl-cache"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _flags(sanitize: str | None) -> list[str]:
    # -fwrapv: signed integer arithmetic wraps, as the IR (and every GPU) defines it.
    flags = ["-std=c++17", "-O1", "-pthread", "-fwrapv", "-I", str(HEADER_DIR), "-w"]
    if sanitize == "thread":
        flags += ["-fsanitize=thread", "-g"]
    elif sanitize == "address":
        flags += ["-fsanitize=address", "-fno-omit-frame-pointer", "-g"]
    elif sanitize is not None:
        raise ValueError(f"sanitize must be None, 'thread' or 'address', got {sanitize!r}")
    return flags


def build_driver(manifest: Mapping[str, Any], directory: Path, sanitize: str | None = None) -> Path:
    """Compile (or reuse) the driver for `manifest`; returns the executable's path."""
    compiler = clang_compiler()
    if compiler is None:
        raise MslBuildError("no clang++ found (apt-get install clang); g++ cannot compile MSL")
    source = driver_source(manifest, Path(directory), sanitize)
    flags = _flags(sanitize)
    header = (HEADER_DIR / "metal_stdlib").read_text()
    key = hashlib.sha256("\0".join([compiler, *flags, header, source]).encode()).hexdigest()[:24]
    target = _cache_dir() / key / "driver"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    src = target.parent / "driver.cpp"
    src.write_text(source)
    tmp = target.parent / f"driver.{os.getpid()}.tmp"
    proc = subprocess.run(
        [compiler, *flags, str(src), "-o", str(tmp)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        hint = ""
        if "unknown type name 'half'" in proc.stderr:
            hint = "\n(MSL `half` needs clang >= 15 for _Float16; install clang-16)"
        raise MslBuildError(f"clang++ failed on the MSL kernel:\n{proc.stderr[-6000:]}{hint}")
    os.replace(tmp, target)
    return target


def _symbolizer() -> str | None:
    """An llvm-symbolizer for readable sanitizer reports (any recent one reads clang's DWARF)."""
    names = ["llvm-symbolizer", *(f"llvm-symbolizer-{v}" for v in range(20, 13, -1))]
    return next((path for name in names if (path := shutil.which(name))), None)


def run_msl_manifest(
    manifest: Mapping[str, Any],
    directory: Path,
    inputs: Mapping[str, list],
    dims: Mapping[str, int],
    scalars: Mapping[str, float | int] | None = None,
    *,
    sanitize: str | None = None,
    timeout: float = 300.0,
) -> dict[str, list]:
    """Run every kernel of an MSL manifest on the CPU; return each output as a flat list.

    `sanitize` is None, `"thread"` (fail on any ThreadSanitizer report) or
    `"address"` (fail on any AddressSanitizer report).
    """
    directory = Path(directory)
    mf.check_format(manifest)
    dims = dict(dims)
    mf.check_dims(manifest, dims)
    values = mf.prepare_inputs(manifest, inputs, dims)
    driver = build_driver(manifest, directory, sanitize)
    sizes: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="mimir-msl-run-") as tmp:
        work = Path(tmp)
        for i, buf in enumerate(manifest["buffers"]):
            count = mf.numel(mf.buffer_shape(buf, dims))
            sizes[buf["name"]] = count
            if buf["role"] in ("input", "inout"):
                data = mf.encode(values[buf["name"]], buf["dtype"])
            else:
                data = bytes(mf.buffer_bytes(buf, count, "msl"))
            (work / f"b{i}.bin").write_bytes(data)
        (work / "uniform.bin").write_bytes(mf.pack_uniform(manifest, dims, scalars) or b"")
        counts = [mf.workgroup_counts(k, dims) for k in manifest["kernels"]]
        (work / "launch.txt").write_text("".join(f"{x} {y} {z}\n" for x, y, z in counts))
        env = dict(os.environ)
        symbolizer = _symbolizer()
        common = f"external_symbolizer_path={symbolizer}" if symbolizer else "symbolize=0"
        env["TSAN_OPTIONS"] = f"halt_on_error=1:exitcode=66:report_signal_unsafe=0:{common}"
        env["ASAN_OPTIONS"] = f"halt_on_error=1:exitcode=67:detect_leaks=0:redzone=128:{common}"
        try:
            proc = subprocess.run(
                [str(driver), str(work)], capture_output=True, text=True, timeout=timeout, env=env
            )
        except subprocess.TimeoutExpired:
            raise MslRunError(
                f"the MSL kernel did not finish in {timeout:.0f}s (a hang or a barrier deadlock)"
            ) from None
        report = proc.stderr
        if sanitize and "Sanitizer" in report:
            raise MslRunError(f"{sanitize} sanitizer report:\n{report[-8000:]}")
        if proc.returncode != 0:
            raise MslRunError(f"the MSL driver exited with {proc.returncode}:\n{report[-8000:]}")
        out: dict[str, list] = {}
        for i, buf in enumerate(manifest["buffers"]):
            if buf["role"] in ("output", "inout"):
                data = (work / f"b{i}.bin").read_bytes()
                out[buf["name"]] = mf.decode(data, buf["dtype"], sizes[buf["name"]])
    return out
