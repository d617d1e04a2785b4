"""Run compiled kernels from Python on NumPy arrays and PyTorch tensors: `mimir.runtime.load`.

    import numpy as np
    from mimir.runtime import load

    kernels = load("out/")             # what `mimir compile-gpu ... -o out/` wrote
    y = kernels.linear_relu(x, w, b)   # x, w, b: float32 ndarrays -> an ndarray [N, 33]

`load(directory)` reads every `*.manifest.json` there (or in its `wgsl/`,
`spirv/` or `ptx/` folder, as `--backend all` lays them out) and returns a
`KernelLibrary`; each function is a `HostKernel` callable. Each manifest and its
kernel files are checked against the contract first (`mimir.runtime.contract`): a
manifest that breaks it is refused with a `ManifestError` whose `code` is a MAN
code and whose `field` names the field at fault. A call:

- takes the manifest's `input` and `inout` buffers in order (the kernel's array
  parameters), then its scalar uniform fields (or all of them by name), as NumPy
  arrays, CPU or CUDA torch tensors, or any buffer-protocol object; nothing is
  copied through Python lists;
- binds every dim from the arrays' shapes (or `dims={...}` for a dim no input
  fixes) and checks shapes, dtypes and dim constraints, raising `HostError`
  with the checker's code: GPU040 (shape, not an array, or a read-only array
  for an `InOut` parameter), GPU041 (dtype), GPU042 (dim constraint), GPU035
  (a dim no input fixes), GPU043 (a value outside an input's `Range(lo, hi)`,
  naming the first one and its index: the kernel's bounds proofs assume none);
  before those, every buffer's size and launch's workgroup counts are computed
  exactly and checked against the device's limits (MAN005 to MAN007); every
  check comes before any launch, so a refused call changes nothing;
- updates every `InOut` argument in place, as PyTorch's in-place ops and the
  shim do (a CUDA tensor on the CUDA engine is written by the kernel itself;
  otherwise the new values are copied back into the caller's array);
- returns the outputs (a tuple for several) shaped as the manifest says, of the
  first array argument's kind: NumPy in, NumPy out; torch in, torch out. A
  kernel with no outputs returns its `InOut` arguments, updated (a tuple for
  several), as `tensor.add_(...)` returns the tensor.

Engines: `wgpu` (WGSL or SPIR-V, on any adapter wgpu finds, lavapipe included)
and `cuda` (PTX through the CUDA driver API; a CUDA torch tensor is passed to
the kernel as its own device pointer and outputs are allocated by torch on the
same device, launched on torch's current stream). Pipelines, modules and
device buffers stay alive between calls; buffers are reallocated only when the
dims change.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mimir.runtime import contract
from mimir.runtime import manifest as mf
from mimir.runtime.arrays import (
    ArrayArg,
    ArrayError,
    first_outside,
    range_violation,
    read_array,
    write_back,
)
from mimir.runtime.errors import ManifestError

__all__ = ["HostError", "HostKernel", "KernelLibrary", "load"]

_BACKENDS = ("wgsl", "spirv", "ptx")
_NAME = re.compile(r"[A-Za-z_][A-Za-z_0-9]*\Z")


class HostError(ManifestError):
    """A call's arguments do not fit the manifest; `code` is the checker's code for it (or the
    manifest contract's, with the `field` at fault, when the manifest itself is refused)."""

    def __init__(self, code: str, message: str, field: str | None = None) -> None:
        super().__init__(message, code, field)


class HostKernel:
    """One compiled `@gpu` function, callable on arrays."""

    def __init__(self, manifest: Mapping[str, Any], directory: Path, engine: str) -> None:
        contract.check_manifest(manifest, "ptx" if engine == "cuda" else ("wgsl", "spirv"))
        self.manifest = manifest
        self.directory = Path(directory)
        self.name: str = manifest["function"]
        self.engine = engine
        # The array parameters, in order: plain inputs and `InOut` tensors alike.
        self.inputs = [b for b in manifest["buffers"] if b["role"] in mf.UPLOADED]
        self.inouts = [b for b in manifest["buffers"] if b["role"] == "inout"]
        self.outputs = [b for b in manifest["buffers"] if b["role"] == "output"]
        dim_names = {d["name"] for d in manifest.get("dims", [])}
        self.scalars = [f for f in mf.uniform_fields(manifest) if f["name"] not in dim_names]
        self._runner: Any = None

    def __repr__(self) -> str:
        params = [b["name"] for b in self.inputs] + [f["name"] for f in self.scalars]
        return f"<mimir kernel {self.name}({', '.join(params)}) on {self.engine}>"

    def __call__(self, *args: Any, dims: Mapping[str, int] | None = None, **kwargs: Any) -> Any:
        arrays, scalars, given = self._arguments(args, kwargs)
        env, deferred = self._bind_dims(arrays, dims or {})
        self._check_sizes(env)  # the manifest's own sizes first, then the arguments against them
        self._compare_shapes(deferred, env)
        self._check_ranges(arrays, env)
        kind = next(iter(a.kind for a in arrays.values() if a.kind == "torch-cuda"), None)
        kind = kind or next(iter(a.kind for a in arrays.values()), "numpy")
        if self._runner is None:
            self._runner = _make_runner(self.engine, self.manifest, self.directory)
        results = self._runner.run(arrays, env, scalars, kind)
        for buf in self.inouts:
            name = buf["name"]
            write_back(given[name], arrays[name], results[name])
        if self.outputs:
            outs = tuple(results[b["name"]] for b in self.outputs)
        else:
            outs = tuple(given[b["name"]] for b in self.inouts)
        return outs[0] if len(outs) == 1 else outs

    # ------------------------------------------------------------ validation

    def _arguments(
        self, args: tuple, kwargs: Mapping[str, Any]
    ) -> tuple[dict[str, ArrayArg], dict[str, float | int], dict[str, Any]]:
        params = [b["name"] for b in self.inputs] + [f["name"] for f in self.scalars]
        if len(args) > len(params):
            raise HostError(
                "GPU040",
                f"`{self.name}` takes {len(params)} arguments ({', '.join(params)}), "
                f"got {len(args)}",
            )
        given: dict[str, Any] = dict(zip(params, args, strict=False))
        for key, value in kwargs.items():
            if key not in params:
                raise HostError("GPU040", f"`{self.name}` has no parameter `{key}`")
            if key in given:
                raise HostError("GPU040", f"argument `{key}` given twice")
            given[key] = value
        missing = [p for p in params if p not in given]
        if missing:
            raise HostError("GPU040", f"`{self.name}` is missing argument `{missing[0]}`")
        arrays: dict[str, ArrayArg] = {}
        for buf in self.inputs:
            name = buf["name"]
            try:
                arg = read_array(given[name])
            except ArrayError as err:
                raise HostError("GPU040", f"argument `{name}`: {err}") from None
            if arg.dtype != buf["dtype"]:
                hint = (
                    " (NumPy has no bfloat16: pass the bit patterns as a uint16 array, or a "
                    "torch.bfloat16 tensor)"
                    if buf["dtype"] == "bfloat16" and arg.kind in ("numpy", "buffer")
                    else ""
                )
                raise HostError(
                    "GPU041",
                    f"argument `{name}` has dtype {arg.dtype_name}, expected {buf['dtype']}{hint}",
                )
            if buf["role"] == "inout" and not _writable(given[name]):
                raise HostError(
                    "GPU040",
                    f"argument `{name}` is `InOut` (the kernel updates it in place), but this "
                    f"{type(given[name]).__name__} is read-only; pass a writable array",
                )
            arrays[name] = arg
        scalars: dict[str, float | int] = {}
        for entry in self.scalars:
            value = given[entry["name"]]
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                value = _python_number(value, entry["name"])
            if entry["type"] != "f32" and not float(value).is_integer():
                raise HostError(
                    "GPU041", f"scalar `{entry['name']}` is an integer parameter, got {value!r}"
                )
            scalars[entry["name"]] = value
        return arrays, scalars, given

    def _check_sizes(self, env: Mapping[str, int]) -> None:
        """Every buffer's size and every launch's workgroup counts under `env`, against the
        device's limits (MAN005 to MAN007), before anything is allocated or launched."""
        max_bytes, max_workgroups = _limits(self.engine)
        for index in range(len(self.manifest["buffers"])):
            contract.buffer_extent(self.manifest, index, env, max_bytes)
        for index in range(len(self.manifest["kernels"])):
            contract.launch_counts(self.manifest, index, env, max_workgroups)

    def _check_ranges(self, arrays: Mapping[str, ArrayArg], env: Mapping[str, int]) -> None:
        """GPU043 for the first value outside an input's `Range(lo, hi)`, before any launch."""
        for index, buf in enumerate(self.manifest["buffers"]):
            if buf["role"] not in mf.UPLOADED or buf.get("range") is None:
                continue
            lo, hi = contract.range_bounds(self.manifest, index, env)
            arg = arrays[buf["name"]]
            found = first_outside(arg, lo, hi)
            if found is None:
                continue
            flat, value = found
            raise HostError(
                "GPU043",
                range_violation(buf["name"], value, flat, arg.shape, buf["range"], (lo, hi), env),
            )

    def _bind_dims(
        self, arrays: Mapping[str, ArrayArg], given: Mapping[str, int]
    ) -> tuple[dict[str, int], list[tuple[str, str, int, Any, int]]]:
        """The dims (given, or read from the inputs' shapes) checked against their constraints,
        and the shape entries still to compare with the arguments once the sizes are checked."""
        names = [d["name"] for d in self.manifest.get("dims", [])]
        env: dict[str, int] = {k: v for k, v in given.items() if k in names}
        unknown = set(given) - set(names)
        if unknown:
            raise HostError("GPU040", f"`{self.name}` has no dim `{sorted(unknown)[0]}`")
        deferred: list[tuple[str, str, int, Any, int]] = []
        index = {b["name"]: i for i, b in enumerate(self.manifest["buffers"])}
        for buf in self.inputs:
            name, arg = buf["name"], arrays[buf["name"]]
            shape = buf["shape"]
            if len(arg.shape) != len(shape):
                raise HostError(
                    "GPU040",
                    f"argument `{name}` has shape {list(arg.shape)}, expected {_show(shape)}",
                )
            for axis, (actual, entry) in enumerate(zip(arg.shape, shape, strict=True)):
                if isinstance(entry, str) and _NAME.match(entry) and entry in names:
                    if entry not in env:
                        env[entry] = actual
                        continue
                field = f"buffers[{index[name]}].shape[{axis}]"
                deferred.append((name, field, axis, entry, actual))
        try:
            contract.solve_dims(
                self.manifest, {b["name"]: arrays[b["name"]].shape for b in self.inputs}, env
            )
        except ManifestError as err:
            if err.code != "GPU040":
                raise
            raise HostError(err.code, err.message) from None
        free = [n for n in names if n not in env]
        if free:
            raise HostError(
                "GPU035",
                f"dim `{free[0]}` is not fixed by the shape of any input; "
                f"pass it as `dims={{'{free[0]}': ...}}`",
            )
        try:
            mf.check_dim_values(self.manifest, env)
        except ManifestError as err:
            raise HostError("GPU042", err.message) from None
        return env, deferred

    def _compare_shapes(
        self, deferred: list[tuple[str, str, int, Any, int]], env: Mapping[str, int]
    ) -> None:
        """GPU040 for an argument whose size on an axis is not what its shape entry says."""
        for name, field, axis, entry, actual in deferred:
            want = contract.evaluate_field(entry, env, field)
            if want != actual:
                raise HostError(
                    "GPU040",
                    f"argument `{name}` has size {actual} on axis {axis}, expected "
                    + (f"{want}" if isinstance(entry, int) else f"{entry}={want}")
                    + f" (with {_show_env(env)})",
                )


def _writable(value: Any) -> bool:
    """A NumPy array or buffer the host can write an `InOut` result back into (torch: always)."""
    if type(value).__module__.startswith("torch"):
        return True
    flags = getattr(value, "flags", None)
    if flags is not None and hasattr(flags, "writeable"):
        return bool(flags.writeable)
    try:
        return not memoryview(value).readonly
    except TypeError:
        return False


def _python_number(value: Any, name: str) -> float | int:
    item = getattr(value, "item", None)  # a 0-d array or a one-element tensor
    if callable(item):
        try:
            number = item()
        except (TypeError, ValueError, RuntimeError):
            number = None
        if isinstance(number, (int, float)) and not isinstance(number, bool):
            return number
    raise HostError("GPU040", f"scalar `{name}` must be a number, got {type(value).__name__}")


def _show(shape: Any) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _show_env(env: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in env.items()) or "no dims"


def _limits(engine: str) -> tuple[int | None, tuple[int, int, int]]:
    """Bytes one binding may hold (None: what the allocator grants) and workgroups per
    dispatch axis, on the device `engine` runs on."""
    if engine == "cuda":
        from mimir.runtime.cuda_runner import MAX_GRID

        return None, MAX_GRID
    from mimir.runtime import wgpu_runner

    limits = wgpu_runner._device().limits
    groups = limits.get("max-compute-workgroups-per-dimension", 65535)
    return limits.get("max-storage-buffer-binding-size", 2**27), (groups, groups, groups)


def _make_runner(engine: str, manifest: Mapping[str, Any], directory: Path) -> Any:
    if engine == "cuda":
        from mimir.runtime.host_cuda import CudaRunner

        return CudaRunner(manifest, directory)
    from mimir.runtime.host_wgpu import WgpuRunner

    return WgpuRunner(manifest, directory)


class KernelLibrary:
    """The compiled functions of one folder: `library.NAME(...)` or `library["NAME"](...)`."""

    def __init__(self, kernels: Mapping[str, HostKernel], directory: Path, backend: str) -> None:
        self._kernels = dict(kernels)
        self.directory = directory
        self.backend = backend

    def __getattr__(self, name: str) -> HostKernel:
        kernels = self.__dict__.get("_kernels", {})
        if name in kernels:
            return kernels[name]
        if name.startswith("__"):  # copy, pickle and friends probe for dunders
            raise AttributeError(name)
        raise AttributeError(self._unknown(name))

    def __getitem__(self, name: str) -> HostKernel:
        if name not in self._kernels:
            raise KeyError(self._unknown(name))
        return self._kernels[name]

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *self._kernels})

    def __contains__(self, name: object) -> bool:
        return name in self._kernels

    def _unknown(self, name: str) -> str:
        import difflib

        known = sorted(self.__dict__.get("_kernels", {}))
        where = f"{self.__dict__.get('directory')} ({self.__dict__.get('backend')})"
        close = difflib.get_close_matches(name, known, n=1)
        hint = f" (did you mean `{close[0]}`?)" if close else ""
        listed = ", ".join(f"`{k}`" for k in known) or "nothing"
        return f"no compiled function `{name}` in {where}; it holds {listed}{hint}"

    def __iter__(self) -> Any:
        return iter(self._kernels)

    def __len__(self) -> int:
        return len(self._kernels)

    def __repr__(self) -> str:
        listed = ", ".join(repr(k) for k in self._kernels.values()) or "no functions"
        return f"<mimir kernels from {self.directory} ({self.backend}): {listed}>"


def _cuda_available() -> bool:
    try:
        from mimir.runtime import cuda_runner

        cuda_runner._context()
    except Exception:  # noqa: BLE001 - no driver, no device: use wgpu
        return False
    return True


def load(directory: str | Path, backend: str | None = None) -> KernelLibrary:
    """The compiled kernels in `directory`, ready to call on arrays.

    `backend` picks `wgsl`, `spirv` (both run through wgpu) or `ptx` (CUDA) when
    the folder holds more than one; by default PTX where a CUDA device is
    present, else WGSL, else SPIR-V.
    """
    root = Path(directory)
    if not root.is_dir():
        raise ManifestError(f"`{root}` is not a folder of compiled kernels")
    found: dict[str, list[tuple[dict, Path]]] = {}
    for folder in [root, *(root / b for b in _BACKENDS)]:
        for path in sorted(folder.glob("*.manifest.json")) if folder.is_dir() else []:
            manifest = _read(path)
            found.setdefault(manifest["backend"], []).append((manifest, folder))
    if backend is None:
        order = (["ptx"] if "ptx" in found and _cuda_available() else []) + ["wgsl", "spirv"]
        backend = next((b for b in order if b in found), None)
        if backend is None:
            raise ManifestError(
                f"no WGSL, SPIR-V or PTX manifest in `{root}` (found: {sorted(found) or 'none'})"
            )
    if backend not in _BACKENDS:
        raise ManifestError(f"backend must be one of {_BACKENDS}, got {backend!r}")
    if backend not in found:
        raise ManifestError(f"no {backend} manifest in `{root}`")
    engine = "cuda" if backend == "ptx" else "wgpu"
    kernels = {m["function"]: HostKernel(m, folder, engine) for m, folder in found[backend]}
    for m, folder in found[backend]:
        for index in range(len(m["kernels"])):
            contract.check_kernel_file(folder, m, index)
    return KernelLibrary(kernels, root, backend)


def _read(path: Path) -> dict[str, Any]:
    """A manifest of the folder, refused (a `ManifestError` naming the file) unless it keeps
    the contract's JSON and field rules."""
    try:
        manifest = contract.read_manifest(path)
        contract.check_manifest(manifest)
    except ManifestError as err:
        raise ManifestError(f"{err.message} (in {path.name})", err.code, err.field) from None
    return manifest
