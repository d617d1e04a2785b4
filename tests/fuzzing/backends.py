"""Backend oracle for kernels the checker and the shim both accept.

`compile_and_validate` compiles a kernel for MSL, WGSL, PTX and SPIR-V and feeds every
file to a validator nobody here wrote: naga (inside the `wgpu` package) for WGSL,
`spirv-val --target-env vulkan1.1`, `ptxas -arch=sm_80` and `sm_90`, and clang++ against
the test-only `metal_stdlib` header for MSL. `execute` runs the WGSL and SPIR-V files on
wgpu (Mesa lavapipe here) and the MSL file as C++ on the CPU (`harness.msl_runner`),
and compares every output with the shim's. A refusal (GPU070, GPU071) is a loud,
allowed answer, not a finding; an unavailable tool is recorded in `Tools.missing`.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fuzzing.oracle import CRASH, INVALID, WRONG, Finding

BACKENDS = ("msl", "wgsl", "ptx", "spirv")
REFUSALS = ("GPU070", "GPU071")
EXECUTED = ("wgsl", "spirv", "msl")
EXECUTION_TARGETS = ((1,), (7, 13, 5, 11, 3))


@dataclass
class BackendReport:
    refused: str | None = None  # the refusal code, when the compiler refused loudly
    validated: list[str] = field(default_factory=list)  # "wgsl", "ptx sm_80", ...
    executed: list[str] = field(default_factory=list)  # "wgsl N=7", ...
    findings: list[Finding] = field(default_factory=list)
    pending_msl: list[Path] = field(default_factory=list)  # validated in batches


class Tools:
    """Which external validators and runners this machine has (probed once)."""

    missing: set[str] = set()

    @staticmethod
    @functools.cache
    def ptxas() -> str | None:
        found = shutil.which("ptxas")
        if found:
            return found
        import importlib.util

        spec = importlib.util.find_spec("nvidia")
        for root in spec.submodule_search_locations if spec else []:
            candidate = Path(root) / "cu13" / "bin" / "ptxas"
            if candidate.is_file():
                return str(candidate)
        return None

    @staticmethod
    @functools.cache
    def wgpu() -> bool:
        try:
            from mimir.runtime.wgpu_runner import adapter_description

            adapter_description()
        except Exception:  # noqa: BLE001 - any failure means "no usable wgpu"
            return False
        return True

    @staticmethod
    @functools.cache
    def clang() -> str | None:
        from harness.msl_runner import clang_compiler

        return clang_compiler()


def write_files(folder: Path, files: dict[str, str | bytes]) -> None:
    """Write `compile_source`'s files (text or bytes) under `folder`, making sub-folders."""
    for relative, content in files.items():
        target = folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)


def _run(args: list[str], timeout: float = 120) -> tuple[int, str]:
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return 124, f"{Path(args[0]).name} did not finish in {timeout:.0f}s"
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def validate_file(path: Path, report: BackendReport) -> None:
    """Feed one emitted file to its validator (MSL is queued for `validate_msl`)."""
    suffix = path.suffix
    if suffix == ".wgsl":
        if not Tools.wgpu():
            Tools.missing.add("wgpu")
            return
        from mimir.runtime.wgpu_runner import WgslValidationError, validate_wgsl

        try:
            validate_wgsl(path.read_text())
        except WgslValidationError as err:
            report.findings.append(Finding(INVALID, f"naga rejects {path.name}: {err}"[:1500]))
        report.validated.append("wgsl naga")
    elif suffix == ".spv":
        if shutil.which("spirv-val") is None:
            Tools.missing.add("spirv-val")
            return
        rc, out = _run(["spirv-val", "--target-env", "vulkan1.1", str(path)])
        if rc != 0 or out:
            report.findings.append(Finding(INVALID, f"spirv-val rejects {path.name}: {out}"[:1500]))
        report.validated.append("spirv-val")
    elif suffix == ".ptx":
        ptxas = Tools.ptxas()
        if ptxas is None:
            Tools.missing.add("ptxas")
            return
        for arch in ("sm_80", "sm_90"):
            rc, out = _run([ptxas, f"-arch={arch}", str(path), "-o", os.devnull])
            if rc != 0:
                report.findings.append(
                    Finding(INVALID, f"ptxas -arch={arch} rejects {path.name}: {out}"[:1500])
                )
            report.validated.append(f"ptxas {arch}")
    elif suffix == ".metal":
        report.pending_msl.append(path)  # clang++ is slow to start: see `validate_msl`


def _clang_syntax(paths: list[Path], unit: Path) -> tuple[int, str]:
    """clang++ -fsyntax-only over `paths`, each in its own namespace of one translation unit."""
    from harness.msl_runner import HEADER_DIR

    lines = ["#include <metal_stdlib>"]
    for k, path in enumerate(paths):
        lines += [f"namespace k{k} {{", f'#include "{path}"', "}"]
    unit.write_text("\n".join(lines) + "\n")
    clang = Tools.clang()
    assert clang is not None
    return _run([clang, "-std=c++17", "-fsyntax-only", "-I", str(HEADER_DIR), str(unit)], 600)


def validate_msl(reports: list[BackendReport], scratch_dir: Path) -> None:
    """Validate the MSL files of many reports with one clang++ run (per file when it fails)."""
    pending = [(r, p) for r in reports for p in r.pending_msl]
    if not pending:
        return
    if Tools.clang() is None:
        Tools.missing.add("clang++")
        return
    scratch_dir.mkdir(parents=True, exist_ok=True)
    rc, _ = _clang_syntax([p for _, p in pending], scratch_dir / "all_msl.cpp")
    for k, (report, path) in enumerate(pending):
        if rc != 0:
            one_rc, out = _clang_syntax([path], scratch_dir / f"msl_{k}.cpp")
            if one_rc != 0:
                report.findings.append(
                    Finding(INVALID, f"clang++ rejects {path.name}: {out}"[:1500])
                )
        report.validated.append("msl clang++")
        report.pending_msl.remove(path)


def compile_and_validate(source_path: Path, folder: Path) -> BackendReport:
    """Compile for every backend into `folder` and validate each file."""
    from mimir.codegen import compile_source

    report = BackendReport()
    text = source_path.read_text()
    try:
        result = compile_source(str(source_path), text, list(BACKENDS))
    except Exception as err:  # noqa: BLE001 - a crash is a finding
        report.findings.append(Finding(CRASH, f"compile_source raised {type(err).__name__}: {err}"))
        return report
    if result.diagnostics:
        codes = sorted({d.code for d in result.diagnostics})
        if set(codes) <= set(REFUSALS):
            report.refused = ",".join(codes)
        else:
            messages = "; ".join(f"{d.code} {d.message}" for d in result.diagnostics)
            report.findings.append(
                Finding(CRASH, f"compile of a checked-clean kernel reported {messages}"[:1500])
            )
        return report
    write_files(folder, result.files)
    for path in sorted(folder.rglob("*")):
        if path.suffix in (".wgsl", ".spv", ".ptx", ".metal"):
            validate_file(path, report)
    return report


def _manifest(folder: Path, backend: str) -> dict[str, Any]:
    return json.loads(next((folder / backend).glob("*.manifest.json")).read_text())


def execute(source_path: Path, folder: Path, report: BackendReport, seed: int = 0) -> None:
    """Run the compiled kernel on WGSL, SPIR-V and MSL at two bindings; compare with the shim."""
    from mimir.runtime import manifest as mf
    from mimir.runtime.verify import (
        choose_dims,
        default_scalars,
        mismatches,
        random_inputs,
        shim_reference,
    )

    base = _manifest(folder, "wgsl")
    for targets in EXECUTION_TARGETS:
        dims = choose_dims(base, targets)
        if any(min(mf.buffer_shape(b, dims), default=0) < 0 for b in base["buffers"]):
            continue
        try:
            inputs = random_inputs(base, dims, seed)
            scalars = default_scalars(base, dims)
            expected = shim_reference(source_path, "kernel", inputs, dims, scalars)
        except Exception:  # noqa: BLE001 - the shim's own failures are the oracle's business
            continue
        for backend in EXECUTED:
            manifest = _manifest(folder, backend)
            label = f"{backend} " + ", ".join(f"{k}={v}" for k, v in dims.items())
            try:
                if backend == "msl":
                    if Tools.clang() is None:
                        Tools.missing.add("clang++")
                        continue
                    from harness.msl_runner import run_msl_manifest

                    actual = run_msl_manifest(manifest, folder / backend, inputs, dims, scalars)
                else:
                    if not Tools.wgpu():
                        Tools.missing.add("wgpu")
                        continue
                    from mimir.runtime.wgpu_runner import run_manifest

                    actual = run_manifest(manifest, folder / backend, inputs, dims, scalars)
            except Exception as err:  # noqa: BLE001 - a kernel that cannot run is wrong
                report.findings.append(
                    Finding(WRONG, f"{label}: {type(err).__name__}: {err}"[:1500])
                )
                continue
            report.executed.append(label)
            for buf in manifest["buffers"]:
                if buf["role"] not in ("output", "inout"):
                    continue
                got, want = actual[buf["name"]], expected[buf["name"]]
                try:
                    bad = mismatches(got, want, buf["dtype"])
                except ValueError as err:
                    bad, note = [0], str(err)
                else:
                    note = ""
                if bad:
                    k = bad[0]
                    shown = f"{got[k]!r} vs shim {want[k]!r}" if not note else note
                    report.findings.append(
                        Finding(
                            WRONG,
                            f"{label}: `{buf['name']}` differs at {len(bad)} of {len(want)} "
                            f"elements (first [{k}]: {shown})",
                            dict(dims),
                        )
                    )


def scratch() -> Path:
    return Path(tempfile.mkdtemp(prefix="mimir-fuzz-"))
