"""Run the WGSL or SPIR-V kernels of a Mimir manifest through wgpu, on whatever adapter it finds.

A `.spv` file is passed to wgpu as bytes (naga's SPIR-V front end reads it);
any other kernel file as WGSL text.

This is the engine of `mimir verify` and of the test suite's WGSL execution: it
validates WGSL with naga (`validate_wgsl`) and executes a manifest's kernels in
launch order (`run_manifest`) exactly as a host program following the manifest
would: storage buffers for every manifest buffer (inputs uploaded, outputs and
scratch zeroed), the uniform block packed as the manifest says, one compute
pipeline per kernel entry with bind group layouts built from the manifest's
bindings (so a binding whose access disagrees with the shader fails loudly),
and the workgroup counts evaluated from their dim expressions. A compiled pipeline is kept
for the life of the process (at most `PIPELINE_CACHE_SIZE`, least recently used dropped
first), keyed by the kernel file's bytes, its entry point and its bindings: running the same
kernel again at other sizes does not compile it again. Every storage buffer
lies between two guard regions of a known pattern that the kernels are not bound to;
a launch that changes one (a store past either end of a buffer, on an adapter or a
backend that does not clamp it) fails with `GuardRegionError`.

Adapter choice: a discrete GPU, then an integrated one, then a CPU adapter
(Mesa lavapipe), preferring Vulkan/Metal/D3D12 over OpenGL. It works headless;
`XDG_RUNTIME_DIR` is set to `/tmp` when unset (Mesa wants one). Set
`MIMIR_WGPU_ADAPTER` to a substring of an adapter's description to force one.

Needs the optional dependency `wgpu` (`pip install 'mimir-kernels[gpu]'`), imported
lazily so that `import mimir.runtime` stays cheap.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mimir.runtime import contract
from mimir.runtime import manifest as mf
from mimir.runtime.errors import ManifestError

__all__ = [
    "DispatchError",
    "GpuUnavailableError",
    "GuardRegionError",
    "WgslValidationError",
    "adapter_description",
    "run_manifest",
    "validate_wgsl",
]


class GpuUnavailableError(RuntimeError):
    """wgpu is not installed, or it found no adapter to run on."""


class WgslValidationError(ValueError):
    """naga rejected a WGSL module; the message is naga's."""


class DispatchError(ManifestError):
    """A launch does not fit the adapter's limits."""


class GuardRegionError(RuntimeError):
    """A kernel wrote outside the buffer it was bound to."""


# 256 bytes keeps the bound middle at a valid storage offset: WebGPU's
# `minStorageBufferOffsetAlignment` is at most 256.
_GUARD_BYTES = 256
_GUARD = bytes([0xA5]) * _GUARD_BYTES


_STATE: dict[str, Any] = {}

# Compiled pipelines by (sha-256 of the module, entry point, bindings); a driver that compiles
# at pipeline creation (Mesa's lavapipe JITs through LLVM) pays it once per process.
PIPELINE_CACHE_SIZE = 64
_PIPELINES: OrderedDict[tuple[bytes, str, str], tuple[Any, dict[int, Any]]] = OrderedDict()

_TYPE_RANK = {"DiscreteGPU": 0, "IntegratedGPU": 1, "VirtualGPU": 2, "CPU": 3}
_BACKEND_RANK = {"Vulkan": 0, "Metal": 0, "D3D12": 0, "OpenGL": 2}


def _wgpu() -> Any:
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    try:
        import wgpu
    except ImportError as err:
        raise GpuUnavailableError(
            "the `wgpu` package is needed to run WGSL kernels; install it with "
            "`pip install 'mimir-kernels[gpu]'`"
        ) from err
    return wgpu


def _adapter() -> Any:
    if "adapter" in _STATE:
        return _STATE["adapter"]
    wgpu = _wgpu()
    adapters = list(wgpu.gpu.enumerate_adapters_sync())
    forced = os.environ.get("MIMIR_WGPU_ADAPTER")
    if forced:
        adapters = [a for a in adapters if forced.lower() in _describe(a).lower()]
    if not adapters:
        hint = f" matching MIMIR_WGPU_ADAPTER={forced!r}" if forced else ""
        raise GpuUnavailableError(
            f"wgpu found no adapter{hint}; on Linux without a GPU install Mesa's "
            "lavapipe (`apt-get install mesa-vulkan-drivers libvulkan1`)"
        )

    def rank(a: Any) -> tuple[int, int]:
        info = a.info
        return (
            _TYPE_RANK.get(info.get("adapter_type", ""), 4),
            _BACKEND_RANK.get(info.get("backend_type", ""), 1),
        )

    _STATE["adapter"] = min(adapters, key=rank)
    return _STATE["adapter"]


def _describe(adapter: Any) -> str:
    info = adapter.info
    parts = [info.get("device", ""), info.get("description", ""), info.get("backend_type", "")]
    return " / ".join(p for p in parts if p)


def adapter_description() -> str:
    """A one-line description of the adapter kernels run on (device / driver / backend)."""
    return _describe(_adapter())


def _device() -> Any:
    if "device" in _STATE:
        return _STATE["device"]
    adapter = _adapter()
    features = [f for f in ("shader-f16",) if f in adapter.features]
    # Ask for the adapter's own ceilings where the defaults are small for big tests.
    wanted = (
        "max-storage-buffer-binding-size",
        "max-buffer-size",
        "max-storage-buffers-per-shader-stage",
        "max-compute-invocations-per-workgroup",
        "max-compute-workgroup-size-x",
        "max-compute-workgroup-size-y",
        "max-compute-workgroup-size-z",
        "max-compute-workgroup-storage-size",
    )
    limits = {k: adapter.limits[k] for k in wanted if k in adapter.limits}
    _STATE["device"] = adapter.request_device_sync(
        required_features=features, required_limits=limits
    )
    return _STATE["device"]


def validate_wgsl(code: str) -> None:
    """Raise `WgslValidationError` with naga's message when `code` is not valid WGSL."""
    wgpu = _wgpu()
    try:
        _device().create_shader_module(code=code)
    except wgpu.GPUError as err:
        raise WgslValidationError(_naga_message(err)) from None


def _naga_message(err: Exception) -> str:
    text = str(err).strip()
    marker = "Shader '' "
    return text[text.index(marker) + len(marker) :] if marker in text else text


def run_manifest(
    manifest: Mapping[str, Any],
    directory: Path,
    inputs: Mapping[str, list],
    dims: Mapping[str, int],
    scalars: Mapping[str, float | int] | None = None,
    timings: list[float] | None = None,
    repeat: int = 5,
    scratch: dict[str, bytes] | None = None,
) -> dict[str, list]:
    """Run a WGSL or SPIR-V manifest's kernels in launch order; return each output (and each
    `inout` buffer, uploaded from `inputs` and read back) as a flat list.

    With `timings`, the launches run `repeat` more times after the first (the results are
    those of the first run), and the wall time of each repetition (submit to completion)
    is appended to it. With `scratch`, the bytes of each scratch buffer after the first
    run go into it (a buffer the manifest marks `zero` must be all zeros again).

    `directory` holds the kernel files the manifest names; `inputs` maps each
    input buffer to its values (flat row-major, or nested); `dims` binds every
    dim; `scalars` gives the uniform fields that are not dims.
    """
    wgpu = _wgpu()
    directory = Path(directory)
    contract.check_manifest(manifest, ("wgsl", "spirv"))
    dims = dict(dims)
    mf.check_dims(manifest, dims)
    values = mf.prepare_inputs(manifest, inputs, dims)
    device = _device()
    usage = wgpu.BufferUsage
    counts = _launch_counts(manifest, dims, device)
    max_bytes = device.limits.get("max-storage-buffer-binding-size")

    buffers: dict[str, Any] = {}
    sizes: dict[str, int] = {}
    for index, buf in enumerate(manifest["buffers"]):
        name, dtype = buf["name"], buf["dtype"]
        _, count, nbytes = contract.buffer_extent(manifest, index, dims, max_bytes)
        # A binding cannot be empty, and copies and maps move whole words.
        padded = max(4, nbytes + (-nbytes % 4))
        sizes[name] = count
        flags = usage.STORAGE | usage.COPY_SRC | usage.COPY_DST
        data = mf.encode(values[name], dtype) if buf["role"] in mf.UPLOADED else b""
        buffers[name] = device.create_buffer_with_data(
            data=_GUARD + data + bytes(padded - len(data)) + _GUARD, usage=flags
        )

    uniform_bytes = mf.pack_uniform(manifest, dims, scalars)
    uniform = (
        device.create_buffer_with_data(data=uniform_bytes, usage=usage.UNIFORM | usage.COPY_DST)
        if uniform_bytes is not None
        else None
    )

    launches = _prepare_launches(wgpu, device, manifest, directory, counts, buffers, uniform)
    _dispatch(device, launches)

    out: dict[str, list] = {}
    for buf in manifest["buffers"]:
        data = bytes(device.queue.read_buffer(buffers[buf["name"]]))
        before, after = data[:_GUARD_BYTES], data[len(data) - _GUARD_BYTES :]
        if before != _GUARD or after != _GUARD:
            where = "before the start" if before != _GUARD else "past the end"
            raise GuardRegionError(
                f"a kernel wrote {where} of buffer `{buf['name']}` (its guard region changed)"
            )
        middle = data[_GUARD_BYTES : len(data) - _GUARD_BYTES]
        if buf["role"] in mf.RESULTS:
            out[buf["name"]] = mf.decode(middle, buf["dtype"], sizes[buf["name"]])
        elif scratch is not None and buf["role"] == "scratch":
            scratch[buf["name"]] = middle
    # Timed runs come after the results are read: an `inout` buffer changes on every run.
    if timings is not None:
        sync = next(iter(buffers.values()))
        _dispatch(device, launches, sync)  # warm-up
        for _ in range(repeat):
            start = time.perf_counter()
            _dispatch(device, launches, sync)
            timings.append(time.perf_counter() - start)
    return out


def _prepare_launches(
    wgpu: Any,
    device: Any,
    manifest: Mapping[str, Any],
    directory: Path,
    counts: list,
    buffers: dict[str, Any],
    uniform: Any,
) -> list[tuple[Any, dict[int, Any], tuple[int, int, int]]]:
    """One (pipeline, bind groups, workgroup counts) per kernel, in launch order."""
    codes: dict[str, tuple[str | bytes, bytes]] = {}  # file -> (its code, sha-256 of it)
    modules: dict[str, Any] = {}
    roles = repr(_roles(manifest))
    launches = []
    for index, (kernel, launch) in enumerate(zip(manifest["kernels"], counts, strict=True)):
        file = kernel["file"]
        if file not in codes:
            text = kernel_code(directory, manifest, index)
            raw = text if isinstance(text, bytes) else text.encode()
            codes[file] = (text, hashlib.sha256(raw).digest())
        code, digest = codes[file]
        key = (
            digest,
            str(kernel.get("entry_point")),
            repr((kernel.get("bindings"), kernel.get("uniform_binding"))) + roles,
        )
        cached = _PIPELINES.get(key)
        if cached is None:
            if file not in modules:
                try:
                    modules[file] = device.create_shader_module(code=code, label=file)
                except wgpu.GPUError as err:
                    raise WgslValidationError(f"{file}: {_naga_message(err)}") from None
            cached = _pipeline(wgpu, device, modules[file], kernel, manifest)
            _PIPELINES[key] = cached
            while len(_PIPELINES) > PIPELINE_CACHE_SIZE:
                _PIPELINES.popitem(last=False)
        else:
            _PIPELINES.move_to_end(key)
        pipeline, groups = cached
        bind_groups = _bind_groups(device, pipeline, groups, kernel, buffers, uniform)
        if 0 in launch:
            continue  # nothing to launch (an empty tensor)
        launches.append((pipeline, bind_groups, launch))
    return launches


def _roles(manifest: Mapping[str, Any]) -> list[tuple[Any, Any]]:
    """Which buffer names exist and their roles: a binding's check depends on them."""
    return [(b.get("name"), b.get("role")) for b in manifest["buffers"]]


def kernel_code(directory: Path, manifest: Mapping[str, Any], index: int) -> str | bytes:
    """Kernel `index`'s module as wgpu takes it: SPIR-V as bytes (naga's SPIR-V front end
    reads them), WGSL as text; read under the contract (`contract.read_kernel_file`)."""
    data = contract.read_kernel_file(directory, manifest, index)
    if manifest["backend"] == "spirv":
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ManifestError(
            f"kernel file `{manifest['kernels'][index]['file']}` is not UTF-8 text",
            "MAN004",
            f"kernels[{index}].file",
        ) from None


def _dispatch(device: Any, launches: list, sync: Any = None) -> None:
    """Encode every launch in order and submit; with `sync`, wait until the device is done."""
    encoder = device.create_command_encoder()
    for pipeline, bind_groups, launch in launches:
        compute = encoder.begin_compute_pass()
        compute.set_pipeline(pipeline)
        for index, group in bind_groups.items():
            compute.set_bind_group(index, group)
        compute.dispatch_workgroups(*launch)
        compute.end()
    device.queue.submit([encoder.finish()])
    if sync is not None:
        # Reading four bytes back waits until the device has finished the submission.
        device.queue.read_buffer(sync, size=4)


def _launch_counts(
    manifest: Mapping[str, Any], dims: Mapping[str, int], device: Any
) -> list[tuple[int, int, int]]:
    """Every kernel's workgroup counts, checked against the adapter's dispatch limit."""
    max_groups = device.limits.get("max-compute-workgroups-per-dimension", 65535)
    out = []
    for index in range(len(manifest["kernels"])):
        try:
            out.append(contract.launch_counts(manifest, index, dims, (max_groups,) * 3))
        except ManifestError as err:
            if err.code != "MAN007":
                raise
            raise DispatchError(
                f"{err.message} (with {_show(dims)})", err.code, err.field
            ) from None
    return out


def _show(dims: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in dims.items()) or "no dims"


def _pipeline(
    wgpu: Any, device: Any, module: Any, kernel: Mapping[str, Any], manifest: Mapping[str, Any]
) -> tuple[Any, dict[int, Any]]:
    """A compute pipeline whose bind group layouts are exactly the manifest's bindings."""
    entries: dict[int, list[dict[str, Any]]] = {}
    roles = {b["name"]: b["role"] for b in manifest["buffers"]}
    for binding in kernel["bindings"]:
        if binding["buffer"] not in roles:
            raise mf.ManifestError(
                f"kernel `{kernel['entry_point']}` binds unknown buffer `{binding['buffer']}`"
            )
        access = binding["access"]
        if access not in ("read", "read_write"):
            raise mf.ManifestError(f"binding access must be read or read_write, got {access!r}")
        kind = (
            wgpu.BufferBindingType.read_only_storage
            if access == "read"
            else wgpu.BufferBindingType.storage
        )
        entries.setdefault(binding["group"], []).append(
            {
                "binding": binding["binding"],
                "visibility": wgpu.ShaderStage.COMPUTE,
                "buffer": {"type": kind},
            }
        )
    ub = kernel.get("uniform_binding")
    if ub is not None:
        entries.setdefault(ub["group"], []).append(
            {
                "binding": ub["binding"],
                "visibility": wgpu.ShaderStage.COMPUTE,
                "buffer": {"type": wgpu.BufferBindingType.uniform},
            }
        )
    count = max(entries, default=-1) + 1
    layouts = {g: device.create_bind_group_layout(entries=entries.get(g, [])) for g in range(count)}
    try:
        pipeline = device.create_compute_pipeline(
            layout=device.create_pipeline_layout(
                bind_group_layouts=[layouts[g] for g in range(count)]
            ),
            compute={"module": module, "entry_point": kernel["entry_point"]},
            label=kernel["entry_point"],
        )
    except wgpu.GPUError as err:
        raise mf.ManifestError(
            f"kernel `{kernel['entry_point']}` in {kernel['file']} does not match its manifest "
            f"entry (bindings, access or entry point):\n{str(err).strip()}"
        ) from None
    return pipeline, layouts


def _bind_groups(
    device: Any,
    pipeline: Any,
    layouts: Mapping[int, Any],
    kernel: Mapping[str, Any],
    buffers: Mapping[str, Any],
    uniform: Any,
) -> dict[int, Any]:
    del pipeline  # the layouts were made for it
    entries: dict[int, list[dict[str, Any]]] = {g: [] for g in layouts}
    for binding in kernel["bindings"]:
        buffer = buffers[binding["buffer"]]
        entries[binding["group"]].append(
            {
                "binding": binding["binding"],
                # the middle only: the guard regions on either side stay unbound
                "resource": {
                    "buffer": buffer,
                    "offset": _GUARD_BYTES,
                    "size": buffer.size - 2 * _GUARD_BYTES,
                },
            }
        )
    ub = kernel.get("uniform_binding")
    if ub is not None:
        if uniform is None:
            raise mf.ManifestError(
                f"kernel `{kernel['entry_point']}` has a uniform binding but the manifest "
                "declares no uniform"
            )
        entries[ub["group"]].append(
            {
                "binding": ub["binding"],
                "resource": {"buffer": uniform, "offset": 0, "size": uniform.size},
            }
        )
    return {
        g: device.create_bind_group(layout=layouts[g], entries=entries[g]) for g in sorted(layouts)
    }
