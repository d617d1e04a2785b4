"""Code generation: proven kernels to MSL, WGSL, PTX and SPIR-V files plus a manifest.

    result = compile_source("k.py", text, ["msl", "wgsl", "ptx", "spirv"])
    result.diagnostics, result.refused       # check errors or refusals, and whose
    for relative_path, content in result.files.items(): ...   # every other function's

Pipeline per `@gpu` function (ARCHITECTURE.md, "The pipeline"): `schedule` splits the
proven graph into launches, `kernels.build` turns each launch into one IR kernel,
the passes order them, run independent ones side by side and legalise them
(`passes/`), and each backend prints them (`backends/`); `manifest` describes the
launches. A construct that cannot be compiled is a coded diagnostic (GPU070: a
backend cannot emit it, GPU071: it cannot be scheduled), never a silently wrong
kernel, and then no file of that function is produced; the functions that check
clean and compile keep theirs (a module-level error refuses them all).

With one backend the files are `NAME.manifest.json` and `NAME_K_WHAT.EXT`;
with several, each backend's files sit under `BACKEND/`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mimir.codegen.backends import BACKENDS
from mimir.codegen.backends.base import Backend
from mimir.codegen.ir import (
    Kernel,
    MmaSync,
    SimdgroupMultiplyAccumulate,
    WarpgroupMma,
    legalise,
    walk_statements,
)
from mimir.codegen.kernels import build
from mimir.codegen.kernels.index_level import build_index_level
from mimir.codegen.manifest import build_manifest, dumps
from mimir.codegen.passes import launch_order, side_by_side
from mimir.codegen.passes.contract import contract
from mimir.codegen.passes.workgroup_memory import to_workgroup_memory
from mimir.codegen.refusal import BACKEND_CANNOT_EMIT, LAUNCH_ORDER, RefusalError
from mimir.codegen.schedule import Schedule, schedule
from mimir.codegen.schedule.plan import Attention, Matmul
from mimir.diagnostics.diagnostic import Diagnostic, Span
from mimir.parse.depth import on_deep_stack
from mimir.parse.spans import read_source

__all__ = [
    "BACKENDS",
    "MATH_MODES",
    "CompileResult",
    "compile_file",
    "compile_source",
    "resolve_backends",
]


@dataclass
class CompileResult:
    path: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    files: dict[str, str | bytes] = field(default_factory=dict)
    # readable text of each file (a binary's disassembly), for printing to a terminal
    listings: dict[str, str] = field(default_factory=dict)
    unreadable: bool = False  # the input cannot be read or parsed (exit 2)
    # each compiled function's definition, where diagnostics about its files point
    functions: dict[str, Span] = field(default_factory=dict)
    usage_error: str | None = None  # e.g. `--function` names no @gpu function (exit 2)
    # functions refused (check errors or a backend's refusal): none of their files are in
    # `files`; the others' are
    refused: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.diagnostics and not self.unreadable and self.usage_error is None


def resolve_backends(names: list[str]) -> list[str]:
    """`all` means every backend that exists; order and duplicates are normalised."""
    if "all" in names:
        return list(BACKENDS)
    unknown = [n for n in names if n not in BACKENDS]
    if unknown:
        raise ValueError(f"unknown backend `{unknown[0]}`; expected one of {[*BACKENDS, 'all']}")
    return [b for b in BACKENDS if b in names]


MATH_MODES = ("fast", "precise")


PTX_TARGETS = (None, "sm_90a")


def compile_source(
    path: str,
    text: str,
    backends: list[str],
    function: str | None = None,
    math: str = "fast",
    progress: Callable[[int, int, str], None] | None = None,
    ptx_target: str | None = None,
) -> CompileResult:
    """Compile every `@gpu` function of one file (or only `function`) for `backends`.

    `ptx_target`: None (each PTX file targets the oldest architecture it can: sm_70, or
    sm_80 for `cp.async` and `mma.sync`) or "sm_90a" (Hopper: float16 and bfloat16
    matmuls on `wgmma`, in files that target sm_90a; the rest as with None).

    `math`: `fast` (PTX's exp, log, tanh, sigmoid and gelu through the hardware's
    `ex2.approx`/`rcp.approx`, a few ulp) or `precise` (correctly rounded sequences);
    the manifest of a PTX function records it. `progress(done, total, name)` hears about
    each function before it is compiled."""
    if math not in MATH_MODES:
        raise ValueError(f"unknown math mode `{math}`; expected one of {list(MATH_MODES)}")
    if ptx_target not in PTX_TARGETS:
        raise ValueError(f"unknown PTX target `{ptx_target}`; expected one of {PTX_TARGETS}")
    # room for the deepest expression the checker accepts (mimir.parse.depth)
    return on_deep_stack(
        lambda: _compile_source(path, text, backends, function, math, progress, ptx_target)
    )


def _compile_source(
    path: str,
    text: str,
    backends: list[str],
    function: str | None,
    math: str,
    progress: Callable[[int, int, str], None] | None = None,
    ptx_target: str | None = None,
) -> CompileResult:
    from mimir.check import check_source

    names = resolve_backends(backends)
    checked = check_source(path, text)
    result = CompileResult(path)
    if checked.unreadable:
        result.unreadable = True
        result.diagnostics = checked.diagnostics
        return result
    kernels = checked.kernels
    if function is not None:
        kernels = [k for k in kernels if k.graph.name == function]
        if not kernels:
            result.usage_error = f"no @gpu function `{function}` in {path}"
            return result
    wanted = {k.graph.name for k in kernels}
    result.functions = {k.graph.name: k.graph.kernel.span for k in kernels}
    errors = [
        d
        for d in checked.diagnostics
        if d.severity == "error" and (d.function is None or d.function in wanted)
    ]
    result.diagnostics = errors
    if any(d.function is None for d in errors):  # a module-level error: every function
        result.refused = [k.graph.name for k in kernels]
        return result
    failed = {d.function for d in errors}
    for done, kernel in enumerate(kernels):
        name = kernel.graph.name
        if progress is not None:
            progress(done, len(kernels), name)
        if name in failed:
            result.refused.append(name)
            continue
        before = len(result.diagnostics)
        compiled = _compile_kernel(kernel, path, names, result.diagnostics, math, ptx_target)
        if len(result.diagnostics) > before:  # refused by a backend: none of its files
            result.refused.append(name)
            continue
        for relative, content, listing in compiled:
            result.files[relative] = content
            result.listings[relative] = listing
    return result


def compile_file(
    path: str | Path,
    backends: list[str],
    function: str | None = None,
    math: str = "fast",
    progress: Callable[[int, int, str], None] | None = None,
    ptx_target: str | None = None,
) -> CompileResult:
    text, unreadable = read_source(Path(path))
    if unreadable is not None:
        return CompileResult(str(path), [unreadable], unreadable=True)
    return compile_source(str(path), text or "", backends, function, math, progress, ptx_target)


def _compile_kernel(
    kernel: Any,
    path: str,
    names: list[str],
    diagnostics: list[Diagnostic],
    math: str = "fast",
    ptx_target: str | None = None,
) -> list[tuple[str, str | bytes, str]]:
    """(relative path, content, text) of every file one function compiles to; none, with
    the diagnostic appended, where it cannot be compiled for every backend in `names`."""
    builds = _Builds(kernel, names, diagnostics, warpgroups=ptx_target == "sm_90a")
    if any(builds.get(*builds.kind(BACKENDS[n])) is None for n in names):
        return []
    files: list[tuple[str, str | bytes, str]] = []
    for backend_name in names:
        files += _backend_files(builds, backend_name, path, math)
    return files


# The IR kernels of one kind of target (`_Builds.get`): the schedule, which of its launches
# each kernel runs side by side, and the kernels legalised: for targets with warp
# functions, without (WGSL, SPIR-V), and those built for a backend's matrix units (by name).
Built = tuple[Schedule, list[list[int]], list[Kernel], list[Kernel], dict[str, list[Kernel]]]


# The backends whose matmul launches are built again for their matrix units: the
# `build` flags, and the statements that show a launch multiplies there.
_MATRIX_UNITS = (
    ("ptx", {"tensor_cores": True}, (MmaSync, WarpgroupMma)),
    ("msl", {"simdgroup_matrices": True}, (SimdgroupMultiplyAccumulate,)),
)


class _Builds:
    """One schedule and its IR per kind of target, built when first asked for.

    A kind is (handoff, vector views): a split reduction is one launch that hands off
    through a device-scope fence ("fence") or tagged atomic words ("tagged", WGSL), else
    (None) two; with vector views a symbolic row goes 4 wide behind a run-time test
    (`mimir.codegen.schedule`)."""

    def __init__(
        self, kernel: Any, names: list[str], diagnostics: list[Diagnostic], warpgroups: bool = False
    ) -> None:
        self.kernel, self.names, self.diagnostics = kernel, names, diagnostics
        self.warpgroups = warpgroups  # PTX for sm_90a: half matmuls on `WarpgroupMma`
        self.index_level = kernel.graph.kernel.grid is not None
        self.built: dict[tuple[str | None, bool], Built | None] = {}

    def kind(self, backend: type[Backend]) -> tuple[str | None, bool]:
        handoff = "fence" if backend.device_fence else "tagged" if backend.tagged_handoff else None
        index_level = self.index_level
        return (None if index_level else handoff, backend.vector_views and not index_level)

    def get(self, handoff: str | None, views: bool) -> Built | None:
        """The schedule and the IR of its launches for one kind of target (None once
        refused, with the diagnostic appended)."""
        if (handoff, views) in self.built:
            return self.built[handoff, views]
        self.built[handoff, views] = None
        name, span = self.kernel.graph.name, self.kernel.graph.kernel.span
        try:
            s, parts, irs, own = self.launches(handoff, views)
        except RefusalError as err:
            message = f"cannot compile `{name}` for {', '.join(self.names)}: {err.message}"
            self.diagnostics.append(Diagnostic(err.code, message, err.span or span, function=name))
            return None
        # folded, literals typed: valid input for every printer; float32 a * b + c as fma;
        # for a target without warp functions, warp reductions in workgroup memory
        native = [contract(legalise(ir)) for ir in irs]
        fallback = (
            [contract(legalise(to_workgroup_memory(ir))) for ir in irs]
            if any(not BACKENDS[n].warp_functions for n in self.names)
            else native
        )
        own_native = {b: [contract(legalise(ir)) for ir in v] for b, v in own.items()}
        self.built[handoff, views] = (s, parts, native, fallback, own_native)
        return self.built[handoff, views]

    def launches(
        self, handoff: str | None, views: bool
    ) -> tuple[Schedule, list[list[int]], list[Kernel], dict[str, list[Kernel]]]:
        """The schedule, which launches run side by side, the IR of its launches, and the
        launches built again for a backend's matrix units where they multiply there:
        PTX's tensor cores, MSL's simdgroup matrices (by backend name)."""
        kernel = self.kernel
        if self.index_level:
            s, irs = build_index_level(kernel)
            return s, [[k] for k in range(len(irs))], irs, {}
        one, tagged = handoff is not None, handoff == "tagged"
        s = schedule(kernel, one_launch=one, vector_views=views, tagged=tagged)
        irs = [build(s, k) for k in range(len(s.plans))]
        # each launch after the launches whose results it reads (`launch_order`)
        order = launch_order.dependency_order(irs, {b.name: b.role for b in s.buffers})
        if order is None:
            raise RefusalError(
                LAUNCH_ORDER,
                f"internal error: the launches of `{kernel.graph.name}` read each other's "
                "results in a cycle; please report it",
                kernel.graph.kernel.span,
            )
        if order != sorted(order):
            s = replace(s, plans=launch_order.reorder(s.plans, order))
            irs = launch_order.reorder(irs, order)
        # PTX's own build: its matmuls (and half attention) on tensor cores (`mma.sync`:
        # float16 and bfloat16 operands, float32 ones under `precision="tf32"`); MSL's:
        # float32 accumulations on simdgroup matrices. Each where any multiplies there.
        own: dict[str, list[Kernel]] = {}
        if any(isinstance(p, (Matmul, Attention)) for p in s.plans):
            for name, flags, unit in _MATRIX_UNITS:
                if name not in self.names:
                    continue
                if name == "ptx" and self.warpgroups:
                    flags = {**flags, "warpgroups": True}
                built = [build(s, k, **flags) for k in range(len(s.plans))]
                if any(isinstance(st, unit) for ir in built for st in walk_statements(ir.body)):
                    own[name] = built
        parts = [[k] for k in range(len(irs))]
        if len(irs) > 1:
            # independent launches side by side in one (`side_by_side`)
            variants = [irs, *own.values(), [to_workgroup_memory(ir) for ir in irs]]
            parts = side_by_side.groups(variants, side_by_side.limits(BACKENDS.values()))
            irs = side_by_side.fuse(s, irs, parts)
            own = {name: side_by_side.fuse(s, v, parts) for name, v in own.items()}
        return s, parts, irs, own


def _backend_files(
    builds: _Builds, backend_name: str, path: str, math: str
) -> list[tuple[str, str | bytes, str]]:
    """The files of one backend: its kernels and manifest. A one-launch schedule whose
    handoff needs more than the backend has (8 storage buffers with the counters) falls
    back to the schedule without a handoff."""
    kernel, diagnostics = builds.kernel, builds.diagnostics
    name, span = kernel.graph.name, kernel.graph.kernel.span
    precision = kernel.graph.kernel.precision
    backend = BACKENDS[backend_name](math=math)
    handoff, views = builds.kind(BACKENDS[backend_name])
    tries = [(handoff, views), (None, views)] if handoff else [(handoff, views)]
    for attempt, (f, v) in enumerate(tries):
        got = builds.get(f, v)
        if got is None:
            break
        s, parts, native, fallback, own_native = got
        own = own_native.get(backend_name, native)
        irs = own if backend.warp_functions else fallback
        refused = next(
            ((k, why) for k, ir in enumerate(irs) if (why := backend.check(ir)) is not None),
            None,
        )
        if refused is None:
            try:
                return _print_kernels(
                    backend, backend_name, irs, builds.names, path, name, s, math, precision
                )
            except RefusalError as err:
                diagnostics.append(Diagnostic(err.code, err.message, span, function=name))
            return []
        if attempt == len(tries) - 1:
            k, why = refused
            diagnostics.append(
                _refusal(kernel, s.plans[parts[k][0]].node, irs[k], backend_name, why)
            )
    return []


def _print_kernels(
    backend: Backend,
    backend_name: str,
    irs: list,
    names: list[str],
    path: str,
    name: str,
    s: Schedule,
    math: str,
    precision: str,
) -> list[tuple[str, str | bytes, str]]:
    """(relative path, content, text) of each launch's file of `s` for `backend`, and
    of the manifest."""
    folder = f"{backend_name}/" if len(names) > 1 else ""
    files: list[tuple[str, str | bytes, str]] = []
    printed = []
    for k, ir in enumerate(irs):
        file = f"{ir.name}.{backend.extension}"
        header = (
            f"generated by `mimir compile-gpu` from {path}: `{name}`, "
            f"launch {k + 1} of {len(irs)} ({ir.what}); do not edit"
        )
        out = backend.print_kernel(ir, header)
        printed.append((ir, out, file))
        content = out.data if out.data is not None else out.text
        files.append((folder + file, content, out.text))
    mode = math if backend_name == "ptx" else None
    built = build_manifest(s, path, backend_name, printed, math=mode, precision=precision)
    broken = launch_order.violations(built)
    if broken:
        raise RefusalError(
            LAUNCH_ORDER,
            f"internal error: the {backend_name} launches of `{name}` are out of order: "
            + "; ".join(broken)
            + " (please report it)",
        )
    manifest = dumps(built)
    files.append((f"{folder}{name}.manifest.json", manifest, manifest))
    return files


def _refusal(kernel, node: int, ir, backend: str, why: str) -> Diagnostic:
    """GPU070 at the op that needs what the backend lacks (else at the launch's result)."""
    name = kernel.graph.name
    for fn, (spelling, span) in ir.origins.items():
        if why == f"the function `{fn}`":
            message = f"`{spelling}` cannot be emitted for {backend}: it needs `{fn}`"
            return Diagnostic(BACKEND_CANNOT_EMIT, message, span, function=name)
    text = kernel.graph.node(node)["text"]
    message = f"`{text}` cannot be emitted for {backend}: its kernel needs {why}"
    return Diagnostic(BACKEND_CANNOT_EMIT, message, kernel.graph.node(node)["span"], function=name)
