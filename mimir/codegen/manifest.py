"""The manifest: `FUNCTION.manifest.json`, public API (ARCHITECTURE.md, "The manifest").

`build_manifest` turns a schedule and its printed kernels into the JSON
document; `SCHEMA_PATH` is its JSON Schema, shipped inside the package, and
`validate_manifest` checks a document against it (needs `jsonschema`, a test
dependency, imported on use).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from mimir.codegen import sizes as sz
from mimir.codegen.backends.base import Printed
from mimir.codegen.ir import (
    Fence,
    Kernel,
    MmaSync,
    SimdgroupMultiplyAccumulate,
    WarpgroupMma,
    WarpReduce,
    all_expressions,
    walk_statements,
)
from mimir.codegen.schedule import BufferSpec, Schedule
from mimir.codegen.schedule.limits import kernel_solves
from mimir.dims import Size

FORMAT = "mimir-manifest/1"
SCHEMA_PATH = Path(str(resources.files("mimir.codegen") / "schemas" / "manifest-v1.schema.json"))


def build_manifest(
    s: Schedule,
    source: str,
    backend: str,
    kernels: list[tuple[Kernel, Printed, str]],
    math: str | None = None,
    precision: str = "float32",
) -> dict[str, Any]:
    """The manifest of one function for one backend; `kernels` holds (IR, printed, file).
    `math` (PTX only): the `--math` mode its transcendental functions were built with;
    `precision`: the function's `@gpu(precision=...)` (see `_precision`)."""
    manifest = {
        "format": FORMAT,
        "function": s.function,
        "source": source,
        "backend": backend,
        "dims": _dims(s),
        "buffers": [_buffer(b) for b in s.buffers],
        "uniform": (
            {"fields": [{"name": n, "type": t} for n, t in s.uniform_fields]}
            if s.uniform_fields
            else None
        ),
        "kernels": [
            {
                "file": file,
                "entry_point": printed.entry_point,
                "workgroup_size": list(kernel.workgroup_size),
                "workgroups": [sz.manifest_value(x) for x in kernel.workgroups],
                "bindings": [
                    {"buffer": b, "group": g, "binding": k, "access": a}
                    for b, g, k, a in printed.bindings
                ],
                "uniform_binding": _uniform_binding(printed),
                **_proofs(kernel),
                **_requires(kernel, backend),
            }
            for kernel, printed, file in kernels
        ],
    }
    if math is not None:
        manifest["math"] = math
    if precision != "float32":
        manifest["precision"] = _precision(precision, backend, [k for k, _, _ in kernels])
    return manifest


# launches that compute a product inside another computation, in float32
_RECOMPUTED_PRODUCTS = {
    "attention": "attention launches (softmax(q @ k.T) @ v in one pass)",
    "scores_softmax": "scores_softmax launches (softmax(q @ k.T), the scores computed twice)",
}


def _precision(requested: str, backend: str, kernels: list[Kernel]) -> dict[str, Any]:
    """`precision` (absent for the default, exact float32): what `@gpu(precision=...)` asked
    for, what the function's matmuls compute in (`matmul`), and why when that is not it."""
    mmas = [s for k in kernels for s in walk_statements(k.body) if isinstance(s, MmaSync)]
    if any(s.kind == "tf32" for s in mmas):
        return {"requested": requested, "matmul": "tf32"}
    fused = sorted({k.what for k in kernels} & set(_RECOMPUTED_PRODUCTS))
    if fused:
        why = (
            " and ".join(_RECOMPUTED_PRODUCTS[what] for what in fused)
            + " compute their products in full float32, which is at least as accurate as TF32"
        )
    elif backend == "ptx":
        why = "no float32 matmul launch: nothing runs on tensor cores"
    else:
        why = (
            f"the {backend} backend has no tensor-core path: its matmuls compute in full "
            "float32, which is at least as accurate as TF32"
        )
    return {"requested": requested, "matmul": "float32", "fallback": why}


def _dims(s: Schedule) -> list[dict[str, Any]]:
    """Each dim with its constraints; `solve` for one no input axis names alone: input
    `buffer`'s `axis` is `scale * dim + offset`, so a host binds it to
    `(size - offset) / scale` (exact, else the argument fits no binding)."""
    solves = kernel_solves(s.kernel)
    names = {d.name for d in s.dims}
    out = []
    for d in s.dims:
        entry: dict[str, Any] = {
            "name": d.name,
            "min": _bound(d.min_of, d.min, names),
            "max": _bound(d.max_of, d.max, names),
            "multiple_of": d.multiple_of,
        }
        found = solves.get(d.name)
        if found is not None:
            entry["solve"] = {
                "buffer": found.param,
                "axis": found.axis,
                "scale": sz.manifest_value(found.scale),
                "offset": sz.manifest_value(found.offset),
            }
        out.append(entry)
    return out


def _bound(relation: Size | None, static: int | None, names: set[str]) -> int | str | None:
    """A dim's `min` or `max`: a relation with other dims of the function
    (`Dim("T", max=MAXT)`) as an expression a host checks, else the int bound."""
    if relation is not None and all(x.name in names for x in relation.dims()):
        return sz.manifest_value(relation)
    return static


def _buffer(b: BufferSpec) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": b.name,
        "role": b.role,
        "dtype": b.dtype.name,
        "shape": [sz.manifest_value(x) for x in b.shape],
    }
    if b.value_range is not None:  # the `Range(lo, hi)` the kernel's proofs assume
        entry["range"] = [sz.manifest_value(x) for x in b.value_range]
    if b.zero:  # a counter the kernels keep at zero between launches: zeroed at allocation
        entry["zero"] = True
    return entry


def _proofs(kernel: Kernel) -> dict[str, Any]:
    """`guards_removed`: each bounds check the kernel does not make, and its proof;
    `vectorized`: each buffer the kernel reads or writes `lanes` elements at a time
    (one 128-bit access), and the proof that the access is aligned and in bounds;
    `work_skipped`: work the kernel leaves out because the result does not need it (the
    blocks of keys past a causal mask's diagonal), and why."""
    out: dict[str, Any] = {}
    if kernel.proofs:
        out["guards_removed"] = [{"guard": g, "proof": p} for g, p in kernel.proofs]
    if kernel.skipped:
        out["work_skipped"] = [{"work": w, "proof": p} for w, p in kernel.skipped]
    if kernel.vectorized:
        out["vectorized"] = [
            {"buffer": b, "access": a, "lanes": n, "proof": p} for b, a, n, p in kernel.vectorized
        ]
    return out


def _requires(kernel: Kernel, backend: str) -> dict[str, Any]:
    """`requires`: what the device must have beyond the backend's baseline, absent when
    nothing. `simdgroup-32`: the MSL kernel's simdgroup reductions (`simd_sum`...) combine
    32 threads, so the pipeline's `threadExecutionWidth` must be 32, as on every Apple GPU.
    `msl-3.2`: the MSL kernel calls `atomic_thread_fence` (a one-launch reduction's
    handoff between threadgroups), which Metal 3.2 introduced. `simdgroup-matrix`: the
    MSL kernel multiplies on 8 x 8 simdgroup matrices (`simdgroup_multiply_accumulate`,
    Metal 2.3 on an Apple7 GPU or later: A14, M1). (PTX warps are 32 threads
    on every NVIDIA GPU and `.target sm_70` has `fence.acq_rel.gpu`; SPIR-V's
    `OpMemoryBarrier` and atomics are core Vulkan 1.1; WGSL reduces in workgroup memory
    and hands off through core atomics: none needs anything.) `sm_90a`: the PTX kernel
    multiplies on warpgroup tensor cores (`wgmma`, `.target sm_90a`), which only Hopper
    (compute capability 9.0) runs."""
    if backend == "ptx":
        warpgroups = any(isinstance(st, WarpgroupMma) for st in walk_statements(kernel.body))
        return {"requires": ["sm_90a"]} if warpgroups else {}
    if backend != "msl":
        return {}
    needs = []
    if any(isinstance(e, WarpReduce) for e in all_expressions(kernel.body)):
        needs.append("simdgroup-32")
    if any(isinstance(st, Fence) for st in walk_statements(kernel.body)):
        needs.append("msl-3.2")
    if any(isinstance(st, SimdgroupMultiplyAccumulate) for st in walk_statements(kernel.body)):
        needs.append("simdgroup-matrix")
    return {"requires": needs} if needs else {}


def _uniform_binding(printed: Printed) -> dict[str, int] | None:
    if printed.uniform_binding is None:
        return None
    group, binding = printed.uniform_binding
    return {"group": group, "binding": binding}


def dumps(manifest: dict[str, Any]) -> str:
    return json.dumps(manifest, indent=2) + "\n"


def schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text())


def validate_manifest(manifest: dict[str, Any]) -> None:
    """Raise `jsonschema.ValidationError` when `manifest` does not follow the schema."""
    import jsonschema

    jsonschema.validate(manifest, schema(), cls=jsonschema.Draft202012Validator)
