"""Run the PTX kernels of a Mimir manifest through the CUDA driver API (ctypes on libcuda).

`run_ptx_manifest(manifest, directory, inputs, dims, scalars)` mirrors
`mimir.runtime.wgpu_runner.run_manifest`: one device allocation per manifest
buffer (inputs uploaded, outputs and scratch zeroed), each `.ptx` file loaded
with `cuModuleLoadDataEx` (the driver JIT-compiles it for the GPU it runs on;
its error log is in the exception), and every kernel launched in manifest
order with `cuLaunchKernel`. The parameter list follows the PTX manifest
contract (`mimir.codegen.backends.ptx`): `binding` is the parameter position,
a buffer is passed as its `CUdeviceptr`, the uniform block by value as the
manifest's packed bytes; `workgroup_size` is blockDim and `workgroups` gridDim.

`PtxProgram` keeps the buffers and modules alive between launches, for
benchmarks: `launch()` enqueues every kernel, `time_ms(repeats)` times them
with CUDA events, `outputs()` reads the results back.

Needs only an NVIDIA driver (`libcuda.so.1`); no CUDA toolkit, no Python
package. Raises `CudaUnavailableError` where there is no driver or no device.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mimir.runtime import contract
from mimir.runtime import manifest as mf
from mimir.runtime.errors import ManifestError

__all__ = [
    "CudaError",
    "CudaUnavailableError",
    "UnmetRequirementError",
    "PtxProgram",
    "device_description",
    "run_ptx_manifest",
]


class CudaUnavailableError(RuntimeError):
    """There is no CUDA driver, or it sees no device."""


class UnmetRequirementError(CudaUnavailableError):
    """Device 0 lacks what a kernel's manifest entry `requires` (`sm_90a` on a GPU other than
    compute capability 9.0)."""


class CudaError(RuntimeError):
    """A CUDA driver call failed (the message names the call and the error)."""


_STATE: dict[str, Any] = {}
# gridDim's limits on every GPU since compute capability 3.0
MAX_GRID = (2**31 - 1, 65535, 65535)
_JIT_ERROR_LOG_BUFFER, _JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 5, 6


_P, _PP, _U, _I = ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint, ctypes.c_int
_SZ, _U64 = ctypes.c_size_t, ctypes.c_uint64
# The driver calls used, with their C parameter types (ctypes would pass a
# Python int as a 32-bit int otherwise, and size_t / CUdeviceptr are 64-bit).
_SIGNATURES: dict[str, list[Any]] = {
    "cuInit": [_U],
    "cuDeviceGetCount": [ctypes.POINTER(_I)],
    "cuDeviceGet": [ctypes.POINTER(_I), _I],
    "cuDeviceGetName": [ctypes.c_char_p, _I, _I],
    "cuDeviceGetAttribute": [ctypes.POINTER(_I), _I, _I],
    "cuDevicePrimaryCtxRetain": [_PP, _I],
    "cuCtxSetCurrent": [_P],
    "cuCtxSynchronize": [],
    "cuGetErrorName": [_I, ctypes.POINTER(ctypes.c_char_p)],
    "cuModuleLoadDataEx": [_PP, ctypes.c_char_p, _U, ctypes.POINTER(_I), _PP],
    "cuModuleGetFunction": [_PP, _P, ctypes.c_char_p],
    "cuModuleUnload": [_P],
    "cuMemAlloc_v2": [ctypes.POINTER(_U64), _SZ],
    "cuMemFree_v2": [_U64],
    "cuMemcpyHtoD_v2": [_U64, ctypes.c_char_p, _SZ],
    "cuMemcpyDtoH_v2": [_P, _U64, _SZ],
    "cuMemsetD8_v2": [_U64, ctypes.c_ubyte, _SZ],
    "cuMemsetD8Async": [_U64, ctypes.c_ubyte, _SZ, _P],
    "cuStreamSynchronize": [_P],
    "cuLaunchKernel": [_P, _U, _U, _U, _U, _U, _U, _U, _P, _PP, _PP],
    "cuEventCreate": [_PP, _U],
    "cuEventRecord": [_P, _P],
    "cuEventSynchronize": [_P],
    "cuEventElapsedTime": [ctypes.POINTER(ctypes.c_float), _P, _P],
    "cuEventDestroy_v2": [_P],
}


def _lib() -> Any:
    if "lib" in _STATE:
        return _STATE["lib"]
    names = ["libcuda.so.1", "libcuda.so", "nvcuda.dll", ctypes.util.find_library("cuda")]
    for name in [n for n in names if n]:
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            continue
    else:
        raise CudaUnavailableError("no CUDA driver (libcuda.so.1) on this machine")
    for name, argtypes in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = argtypes, ctypes.c_int
    _STATE["lib"] = lib
    return lib


def _check(rc: int, call: str) -> None:
    if rc == 0:
        return
    name = ctypes.c_char_p()
    _lib().cuGetErrorName(rc, ctypes.byref(name))
    text = name.value.decode() if name.value else f"error {rc}"
    raise CudaError(f"{call} failed: {text}")


def _context() -> Any:
    """The primary context of device 0, made current (shared with torch, if it runs)."""
    lib = _lib()
    if "context" in _STATE:
        _check(lib.cuCtxSetCurrent(_STATE["context"]), "cuCtxSetCurrent")
        return _STATE["context"]
    rc = lib.cuInit(0)
    if rc != 0:
        raise CudaUnavailableError(f"the CUDA driver does not initialise (error {rc}): no GPU?")
    count = ctypes.c_int()
    _check(lib.cuDeviceGetCount(ctypes.byref(count)), "cuDeviceGetCount")
    if count.value == 0:
        raise CudaUnavailableError("the CUDA driver sees no device")
    device = ctypes.c_int()
    _check(lib.cuDeviceGet(ctypes.byref(device), 0), "cuDeviceGet")
    context = ctypes.c_void_p()
    _check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), device), "cuDevicePrimaryCtxRetain")
    _check(lib.cuCtxSetCurrent(context), "cuCtxSetCurrent")
    _STATE["device"], _STATE["context"] = device, context
    return context


def _device_name() -> str:
    _context()
    name = ctypes.create_string_buffer(256)
    _check(_lib().cuDeviceGetName(name, 256, _STATE["device"]), "cuDeviceGetName")
    return name.value.decode()


def device_capability() -> tuple[int, int]:
    """Device 0's compute capability, (major, minor)."""
    _context()
    lib, device = _lib(), _STATE["device"]
    major, minor = ctypes.c_int(), ctypes.c_int()
    _check(lib.cuDeviceGetAttribute(ctypes.byref(major), 75, device), "cuDeviceGetAttribute")
    _check(lib.cuDeviceGetAttribute(ctypes.byref(minor), 76, device), "cuDeviceGetAttribute")
    return major.value, minor.value


def device_description() -> str:
    """`NAME (sm_XY)` of device 0."""
    major, minor = device_capability()
    return f"{_device_name()} (sm_{major}{minor})"


# The compute capability each PTX requirement runs on: `.target sm_90a` code (`wgmma`) loads
# on 9.0 alone, not on a later architecture.
_CAPABILITY = {"sm_90a": (9, 0)}


def unmet_requirement(
    manifest: Mapping[str, Any], capability: tuple[int, int], device: str = "this device"
) -> str | None:
    """Why `device`, of compute capability `capability`, cannot run a kernel of the checked
    PTX `manifest`; None when it runs them all."""
    for kernel in manifest["kernels"]:
        for requirement in kernel.get("requires", ()):
            if capability != _CAPABILITY[requirement]:
                major, minor = _CAPABILITY[requirement]
                return (
                    f"kernel `{kernel['entry_point']}` requires `{requirement}` (compute "
                    f"capability {major}.{minor}); {device} has compute capability "
                    f"{capability[0]}.{capability[1]}"
                )
    return None


def check_requirements(manifest: Mapping[str, Any]) -> None:
    """Refuse (`UnmetRequirementError`) a checked PTX manifest that device 0 cannot run,
    before any buffer or module is made on it."""
    if any(kernel.get("requires") for kernel in manifest["kernels"]):
        why = unmet_requirement(manifest, device_capability(), _device_name())
        if why is not None:
            raise UnmetRequirementError(why)


def load_module(ptx: str, label: str = "") -> Any:
    """JIT-load PTX text; a `CudaError` carries the driver's error log."""
    lib = _lib()
    module = ctypes.c_void_p()
    log = ctypes.create_string_buffer(8192)
    options = (ctypes.c_int * 2)(_JIT_ERROR_LOG_BUFFER, _JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
    values = (ctypes.c_void_p * 2)(ctypes.cast(log, ctypes.c_void_p).value, len(log))
    source = ctypes.c_char_p(ptx.encode() + b"\0")
    rc = lib.cuModuleLoadDataEx(ctypes.byref(module), source, 2, options, values)
    if rc != 0:
        try:
            _check(rc, f"cuModuleLoadDataEx({label})")
        except CudaError as err:
            raise CudaError(f"{err}: {log.value.decode(errors='replace').strip()}") from None
    return module


def ptx_text(directory: Path, manifest: Mapping[str, Any], index: int) -> str:
    """Kernel `index`'s PTX, read under the contract (`contract.read_kernel_file`)."""
    data = contract.read_kernel_file(directory, manifest, index)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ManifestError(
            f"kernel file `{manifest['kernels'][index]['file']}` is not PTX text",
            "MAN004",
            f"kernels[{index}].file",
        ) from None


class PtxProgram:
    """A PTX manifest's buffers, modules and launches on device 0, ready to run."""

    def __init__(
        self,
        manifest: Mapping[str, Any],
        directory: Path,
        inputs: Mapping[str, Any],
        dims: Mapping[str, int],
        scalars: Mapping[str, float | int] | None = None,
    ) -> None:
        contract.check_manifest(manifest, "ptx")
        dims = dict(dims)
        mf.check_dims(manifest, dims)
        _context()
        check_requirements(manifest)
        self.lib = _lib()
        self.manifest = manifest
        self.pointers: dict[str, ctypes.c_uint64] = {}
        self.counts: dict[str, int] = {}
        self.modules: dict[str, Any] = {}
        try:
            self._allocate(inputs, dims)
            uniform = mf.pack_uniform(manifest, dims, scalars)
            self.uniform = None if uniform is None else ctypes.create_string_buffer(uniform)
            self.launches = [
                self._launch_spec(index, Path(directory), dims)
                for index in range(len(manifest["kernels"]))
            ]
        except BaseException:
            self.close()
            raise

    def _allocate(self, inputs: Mapping[str, Any], dims: Mapping[str, int]) -> None:
        raw = {k: v for k, v in inputs.items() if isinstance(v, (bytes, bytearray, memoryview))}
        listed = mf.prepare_inputs(
            {
                **self.manifest,
                "buffers": [b for b in self.manifest["buffers"] if b["name"] not in raw],
            },
            {k: v for k, v in inputs.items() if k not in raw},
            dims,
        )
        for buf in self.manifest["buffers"]:
            name = buf["name"]
            count = mf.numel(mf.buffer_shape(buf, dims))
            nbytes = mf.buffer_bytes(buf, count, "ptx")
            ptr = ctypes.c_uint64()
            _check(self.lib.cuMemAlloc_v2(ctypes.byref(ptr), max(nbytes, 4)), "cuMemAlloc")
            self.pointers[name], self.counts[name] = ptr, count
            if buf["role"] in mf.UPLOADED:
                data = bytes(raw[name]) if name in raw else mf.encode(listed[name], buf["dtype"])
                if len(data) != nbytes:
                    raise mf.ManifestError(f"input `{name}` has {len(data)} bytes, not {nbytes}")
                _check(self.lib.cuMemcpyHtoD_v2(ptr, data, nbytes), "cuMemcpyHtoD")
            else:  # outputs and scratch (a `zero` counter among them) start at zero
                _check(self.lib.cuMemsetD8_v2(ptr, 0, max(nbytes, 4)), "cuMemsetD8")

    def _launch_spec(self, index: int, directory: Path, dims: Mapping[str, int]):
        kernel = self.manifest["kernels"][index]
        file, entry = kernel["file"], kernel["entry_point"]
        if file not in self.modules:
            self.modules[file] = load_module(ptx_text(directory, self.manifest, index), file)
        function = ctypes.c_void_p()
        _check(
            self.lib.cuModuleGetFunction(
                ctypes.byref(function), self.modules[file], entry.encode()
            ),
            f"cuModuleGetFunction({entry})",
        )
        slots: dict[int, Any] = {}
        for b in kernel["bindings"]:
            if b["buffer"] not in self.pointers:
                raise mf.ManifestError(f"kernel `{entry}` binds unknown buffer `{b['buffer']}`")
            slots[b["binding"]] = ctypes.addressof(self.pointers[b["buffer"]])
        ub = kernel.get("uniform_binding")
        if ub is not None:
            if self.uniform is None:
                raise mf.ManifestError(f"kernel `{entry}` reads a uniform the manifest lacks")
            slots[ub["binding"]] = ctypes.addressof(self.uniform)
        if sorted(slots) != list(range(len(slots))):
            raise mf.ManifestError(f"kernel `{entry}` has parameter positions {sorted(slots)}")
        params = (ctypes.c_void_p * max(len(slots), 1))(*[slots[k] for k in range(len(slots))])
        grid = contract.launch_counts(self.manifest, index, dims, MAX_GRID)
        return entry, function, grid, tuple(kernel["workgroup_size"]), params

    def launch(self) -> None:
        """Enqueue every kernel, in order, on the default stream."""
        for entry, function, grid, block, params in self.launches:
            if 0 in grid:
                continue  # an empty tensor: nothing to launch
            rc = self.lib.cuLaunchKernel(function, *grid, *block, 0, None, params, None)
            _check(rc, f"cuLaunchKernel({entry})")

    def synchronize(self) -> None:
        _check(self.lib.cuCtxSynchronize(), "cuCtxSynchronize (a kernel failed)")

    def outputs(self) -> dict[str, list]:
        """Every `output` buffer as a flat list (after synchronising)."""
        self.synchronize()
        out: dict[str, list] = {}
        for buf in self.manifest["buffers"]:
            if buf["role"] not in mf.RESULTS:
                continue
            name, count = buf["name"], self.counts[buf["name"]]
            nbytes = mf.buffer_bytes(buf, count, "ptx")
            host = ctypes.create_string_buffer(max(nbytes, 1))
            dst = ctypes.cast(host, ctypes.c_void_p)
            _check(self.lib.cuMemcpyDtoH_v2(dst, self.pointers[name], nbytes), "cuMemcpyDtoH")
            out[name] = mf.decode(host.raw[:nbytes], buf["dtype"], count)
        return out

    def time_ms(self, repeats: int = 20) -> float:
        """Milliseconds per `launch()`, the mean of `repeats` after one warm-up, by CUDA events.

        Every launch updates the `inout` buffers again: read `outputs()` before timing."""
        self.launch()
        start, stop = ctypes.c_void_p(), ctypes.c_void_p()
        _check(self.lib.cuEventCreate(ctypes.byref(start), 0), "cuEventCreate")
        _check(self.lib.cuEventCreate(ctypes.byref(stop), 0), "cuEventCreate")
        try:
            _check(self.lib.cuEventRecord(start, None), "cuEventRecord")
            for _ in range(repeats):
                self.launch()
            _check(self.lib.cuEventRecord(stop, None), "cuEventRecord")
            _check(self.lib.cuEventSynchronize(stop), "cuEventSynchronize")
            ms = ctypes.c_float()
            _check(self.lib.cuEventElapsedTime(ctypes.byref(ms), start, stop), "cuEventElapsedTime")
        finally:
            self.lib.cuEventDestroy_v2(start)
            self.lib.cuEventDestroy_v2(stop)
        return ms.value / repeats

    def close(self) -> None:
        for ptr in self.pointers.values():
            self.lib.cuMemFree_v2(ptr)
        for module in self.modules.values():
            self.lib.cuModuleUnload(module)
        self.pointers, self.modules = {}, {}

    def __enter__(self) -> PtxProgram:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_ptx_manifest(
    manifest: Mapping[str, Any],
    directory: Path,
    inputs: Mapping[str, Any],
    dims: Mapping[str, int],
    scalars: Mapping[str, float | int] | None = None,
) -> dict[str, list]:
    """Run every kernel of a PTX manifest in launch order; each output as a flat list.

    `inputs` maps each input buffer to its values (flat row-major or nested,
    or raw little-endian bytes); `dims` binds every dim; `scalars` gives the
    uniform fields that are not dims.
    """
    with PtxProgram(manifest, directory, inputs, dims, scalars) as program:
        program.launch()
        return program.outputs()
