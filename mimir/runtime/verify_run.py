"""`mimir verify FILE`: compile for every backend this machine can run, run, compare with the shim.

Backends and what runs them: `wgsl` and `spirv` through wgpu (any adapter,
Mesa lavapipe included), `ptx` through the CUDA driver where a CUDA device is
present. `available_backends()` says which of them this machine has and why
the others are missing. Each function is run at three dim bindings (all dims
1, small primes, ~131, with `fixed` overriding named dims) on seeded random
inputs; every output is compared with the shim's under `TOLERANCES`. A
`progress` callback hears about each run before it starts, so a front end can
show progress on long runs.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mimir.runtime import manifest as mf
from mimir.runtime.verify import (
    choose_dims,
    default_scalars,
    error_summary,
    mismatches,
    random_inputs,
    shim_reference,
    tf32_fallback_atol,
)

__all__ = [
    "BACKENDS",
    "OutputCheck",
    "VerifyReport",
    "available_backends",
    "verify_file",
]

BACKENDS = ("wgsl", "spirv", "ptx")
DEFAULT_TARGETS: tuple[tuple[int, ...], ...] = ((1,), (7, 13, 5, 11, 3), (131, 17, 19, 23, 29))


@dataclass
class OutputCheck:
    """One output of one function on one backend at one dim binding, compared with the shim."""

    function: str
    dims: dict[str, int]
    output: str
    dtype: str
    count: int
    max_abs: float
    max_rel: float
    bad: list[int]
    actual: list
    expected: list
    backend: str = "wgsl"

    @property
    def ok(self) -> bool:
        return not self.bad


@dataclass
class VerifyReport:
    adapter: str = ""
    # backend -> the device it ran on; backend -> why it did not run
    devices: dict[str, str] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    checks: list[OutputCheck] = field(default_factory=list)
    # (function, message) for functions that did not compile or could not run.
    failures: list[tuple[str, str]] = field(default_factory=list)
    diagnostics: list[Any] = field(default_factory=list)
    # functions that failed `mimir check` (their errors are in `diagnostics`): not run
    check_failed: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures and not self.diagnostics and all(c.ok for c in self.checks)


def available_backends() -> tuple[dict[str, str], dict[str, str]]:
    """({backend: device description}, {backend: why it cannot run here})."""
    found: dict[str, str] = {}
    missing: dict[str, str] = {}
    from mimir.runtime import wgpu_runner

    try:
        adapter = wgpu_runner.adapter_description()
        found["wgsl"] = found["spirv"] = adapter
    except wgpu_runner.GpuUnavailableError as err:
        missing["wgsl"] = missing["spirv"] = str(err)
    from mimir.runtime import cuda_runner

    try:
        found["ptx"] = cuda_runner.device_description()
    except (cuda_runner.CudaUnavailableError, cuda_runner.CudaError) as err:
        missing["ptx"] = str(err)
    return found, missing


def _run(backend: str, manifest: Mapping[str, Any], folder: Path, inputs, dims, scalars) -> dict:
    # Looked up at each call, so that a test can substitute a runner.
    if backend == "ptx":
        from mimir.runtime import cuda_runner

        return cuda_runner.run_ptx_manifest(manifest, folder, inputs, dims, scalars)
    from mimir.runtime import wgpu_runner

    return wgpu_runner.run_manifest(manifest, folder, inputs, dims, scalars)


def _write(files: Mapping[str, str | bytes], folder: Path) -> None:
    for relative, content in files.items():
        target = folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")


def _compile(path: Path, text: str, name: str, backends: Sequence[str], report: VerifyReport):
    """{backend: {relative path: content}} for the backends that compile `name`."""
    from mimir.codegen import compile_source

    result = compile_source(str(path), text, list(backends), function=name)
    if result.ok:
        if len(backends) == 1:
            return {backends[0]: result.files}
        return {
            b: {k.split("/", 1)[1]: v for k, v in result.files.items() if k.startswith(b + "/")}
            for b in backends
        }
    # One backend may refuse what the others emit: compile them one at a time.
    out = {}
    seen: set[tuple] = set()
    for backend in backends:
        single = compile_source(str(path), text, [backend], function=name)
        if single.ok:
            out[backend] = single.files
            continue
        for d in single.diagnostics:
            key = (d.code, d.message)
            if key not in seen:
                seen.add(key)
                report.diagnostics.append(d)
    return out


def verify_file(
    path: Path,
    function: str | None = None,
    seed: int = 0,
    fixed: Mapping[str, int] | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    backends: Sequence[str] | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    on_function: Callable[[str, str], None] | None = None,
    fast: bool = True,
) -> VerifyReport:
    """Compile `path` for each backend here (or those named), run each function, compare.

    Importing the file runs it as Python (the shim needs it), as `python path` would.
    Raises `GpuUnavailableError` when none of the backends asked for can run. A function
    that fails `mimir check` is not compiled or run (`report.check_failed`). `on_function`
    hears `(function, outcome)` as each function finishes: `ok`, `MISMATCH`, `failed the
    check`, `refused` or `error`. `fast`: the shim's answer through NumPy where it is
    importable (`fast_reference`), else the shim's own loops.
    """
    from mimir.check import check_source
    from mimir.parse.spans import read_source
    from mimir.runtime.wgpu_runner import GpuUnavailableError

    path = Path(path)
    report = VerifyReport()
    found, missing = available_backends()
    wanted = list(backends or BACKENDS)
    chosen = [b for b in wanted if b in found]
    report.devices = {b: found[b] for b in chosen}
    report.missing = {b: missing[b] for b in wanted if b in missing}
    report.adapter = found.get("wgsl", found.get("ptx", ""))
    if not chosen:
        reason = report.missing.get("wgsl") or next(iter(report.missing.values()), "")
        raise GpuUnavailableError(reason)
    text, unreadable = read_source(path)  # as Python decodes it (PEP 263)
    if text is None:
        report.diagnostics.append(unreadable)
        return report
    checked = check_source(str(path), text)
    names = [k.graph.name for k in checked.kernels]
    if function is not None:
        names = [n for n in names if n == function]
    errors = [d for d in checked.diagnostics if d.severity == "error"]
    if any(d.function is None for d in errors):  # outside every kernel: none can run
        failing = set(names)
    else:
        failing = {d.function for d in errors} & set(names)
    report.diagnostics += [d for d in errors if d.function is None or d.function in failing]
    report.check_failed = [n for n in names if n in failing]
    total = len(names) * len(chosen) * len(DEFAULT_TARGETS)
    step = 0
    for name in names:
        if name in failing:
            step += len(chosen) * len(DEFAULT_TARGETS)
            if on_function is not None:
                on_function(name, "failed the check")
            continue
        before = (len(report.checks), len(report.failures), len(report.diagnostics))
        compiled = _compile(path, text, name, chosen, report)
        with tempfile.TemporaryDirectory(prefix="mimir-verify-") as tmp:
            for backend, files in compiled.items():
                folder = Path(tmp) / backend
                _write(files, folder)
                manifest = json.loads((folder / f"{name}.manifest.json").read_text())
                seen: list[dict[str, int]] = []
                for targets in DEFAULT_TARGETS:
                    step += 1
                    dims = choose_dims(manifest, targets)
                    dims.update({k: v for k, v in (fixed or {}).items() if k in dims})
                    if dims in seen:
                        continue
                    seen.append(dims)
                    if progress is not None:
                        progress(step, total, f"{name} on {backend} at {_show(dims)}")
                    try:
                        inputs = random_inputs(manifest, dims, seed)
                        scalars = default_scalars(manifest, dims)
                        expected = shim_reference(path, name, inputs, dims, scalars, fast=fast)
                        actual = _run(backend, manifest, folder, inputs, dims, scalars)
                    except Exception as err:  # noqa: BLE001 - reported per function, verify goes on
                        report.failures.append((name, f"{backend} at {_show(dims)}: {err}"))
                        break
                    # a `precision="tf32"` function this backend computed in float32: the
                    # shim rounded its matmul operands, the backend did not
                    limit = atol if atol is not None else tf32_fallback_atol(manifest, dims)
                    for buf in manifest["buffers"]:
                        if buf["role"] in mf.RESULTS:
                            report.checks.append(
                                _check(name, backend, dims, buf, actual, expected, rtol, limit)
                            )
        if on_function is not None:
            on_function(name, _outcome(report, before))
    return report


def _outcome(report: VerifyReport, before: tuple[int, int, int]) -> str:
    """What became of the function whose results follow `before` in the report."""
    checks, failures, diagnostics = before
    if len(report.failures) > failures:
        return "error"
    if len(report.diagnostics) > diagnostics and len(report.checks) == checks:
        return "refused"
    if any(not c.ok for c in report.checks[checks:]):
        return "MISMATCH"
    return "ok" if len(report.diagnostics) == diagnostics else "refused"


def _check(name, backend, dims, buf, actual, expected, rtol, atol) -> OutputCheck:
    from mimir.runtime import fast_reference

    got, want = actual[buf["name"]], expected[buf["name"]]
    if fast_reference.available():  # the same rule, over arrays
        max_abs, max_rel, bad = fast_reference.compare(got, want, buf["dtype"], rtol, atol)
    else:
        max_abs, max_rel = error_summary(got, want)
        bad = mismatches(got, want, buf["dtype"], rtol, atol)
    return OutputCheck(
        function=name,
        dims=dict(dims),
        output=buf["name"],
        dtype=buf["dtype"],
        count=len(want),
        max_abs=float(max_abs),
        max_rel=max_rel,
        bad=bad,
        actual=got,
        expected=want,
        backend=backend,
    )


def _show(dims: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in dims.items()) or "no dims"
