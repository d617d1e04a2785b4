"""The CUDA engine of `mimir.runtime.load`: PTX launched through the driver API, kept loaded.

Modules are JIT-loaded and functions looked up once, on the first call.
Buffers the engine owns (host-array inputs, outputs for host arrays, scratch)
stay allocated until a call needs more bytes. With CUDA torch tensors nothing
is copied: each input tensor's own device pointer is a kernel parameter, the
outputs are `torch.empty` tensors on that device, and every launch goes on
torch's current stream, so the call is ordered with the torch work around it
(and returns without waiting, as a torch op does). An `InOut` CUDA tensor is
written by the kernel in place (through a copy only when it shares memory with
another argument, which the kernel would race with). With host arrays the
inputs are copied to the device, launches go on the default stream, and the
call waits for the outputs and the updated `inout` buffers.

The parameter list follows the PTX manifest contract (`mimir.codegen.backends.ptx`):
`binding` is the parameter position; a buffer is its `CUdeviceptr`; the uniform
block is passed by value as the manifest's packed bytes.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mimir.runtime import cuda_runner as cr
from mimir.runtime import manifest as mf
from mimir.runtime.arrays import ArrayArg, make_output

__all__ = ["CudaRunner"]

_TORCH_DTYPES = {"float32": "float32", "float16": "float16", "int32": "int32"}


class CudaRunner:
    def __init__(self, manifest: Mapping[str, Any], directory: Path) -> None:
        cr._context()
        cr.check_requirements(manifest)
        self.lib = cr._lib()
        self.manifest = manifest
        self.modules: dict[str, Any] = {}
        self.functions: list[Any] = []
        for index, kernel in enumerate(manifest["kernels"]):
            file, entry = kernel["file"], kernel["entry_point"]
            if file not in self.modules:
                self.modules[file] = cr.load_module(
                    cr.ptx_text(Path(directory), manifest, index), file
                )
            function = ctypes.c_void_p()
            cr._check(
                self.lib.cuModuleGetFunction(
                    ctypes.byref(function), self.modules[file], entry.encode()
                ),
                f"cuModuleGetFunction({entry})",
            )
            self.functions.append(function)
        self.owned: dict[str, tuple[ctypes.c_uint64, int]] = {}  # name -> (pointer, capacity)

    def _owned(self, name: str, nbytes: int) -> int:
        ptr, capacity = self.owned.get(name, (None, 0))
        if ptr is None or capacity < nbytes:
            if ptr is not None:
                self.lib.cuMemFree_v2(ptr)
            ptr = ctypes.c_uint64()
            cr._check(self.lib.cuMemAlloc_v2(ctypes.byref(ptr), max(nbytes, 4)), "cuMemAlloc")
            self.owned[name] = (ptr, max(nbytes, 4))
        return self.owned[name][0].value

    def run(
        self,
        arrays: Mapping[str, ArrayArg],
        dims: Mapping[str, int],
        scalars: Mapping[str, float | int],
        kind: str,
    ) -> dict[str, Any]:
        cr._context()  # current on this thread too (a call may come from another thread)
        on_device = kind == "torch-cuda"
        torch = sys.modules.get("torch") if on_device else None
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream if torch else None)
        device = arrays_device(arrays) if on_device else None
        if on_device and any(a.kind != "torch-cuda" for a in arrays.values()):
            # Host inputs are copied synchronously into buffers a previous call's launches
            # (on torch's stream, maybe not the default one) may still read: wait for them.
            cr._check(self.lib.cuStreamSynchronize(stream), "cuStreamSynchronize")
        pointers: dict[str, int] = {}
        device_outputs: dict[str, Any] = {}
        # buffers a kernel reads or writes 16 bytes at a time need a 16-byte-aligned base;
        # a tensor that starts inside its storage (`x[1:]`) may not have one: copied
        vector = {v["buffer"] for k in self.manifest["kernels"] for v in k.get("vectorized", [])}
        copies: list[Any] = []  # alive until the launches are queued
        for buf in self.manifest["buffers"]:
            name, role = buf["name"], buf["role"]
            shape = mf.buffer_shape(buf, dims)
            nbytes = mf.buffer_bytes(buf, mf.numel(shape), "ptx")
            arg = arrays.get(name)
            if arg is not None and arg.kind == "torch-cuda":
                misaligned = name in vector and arg.device_ptr % 16 != 0
                if role == "inout":
                    tensor = arg.keep
                    if _shares_memory(name, arrays) or misaligned:
                        tensor = tensor.clone()  # the kernel writes it while reading the other
                    device_outputs[name] = tensor
                    pointers[name] = tensor.data_ptr()
                elif misaligned:
                    copies.append(arg.keep.clone())
                    pointers[name] = copies[-1].data_ptr()
                else:
                    pointers[name] = arg.device_ptr
            elif role in mf.RESULTS and torch is not None:
                dtype = getattr(torch, _TORCH_DTYPES.get(buf["dtype"], "int32"))
                if arg is None:
                    tensor = torch.zeros(shape, dtype=dtype, device=device)
                else:  # a host array among CUDA tensors: its values, on the device
                    host = bytearray(arg.data or b"")
                    tensor = (
                        torch.frombuffer(host, dtype=dtype).reshape(shape).to(device)
                        if host
                        else torch.zeros(shape, dtype=dtype, device=device)
                    )
                device_outputs[name] = tensor
                pointers[name] = tensor.data_ptr()
            else:
                pointers[name] = self._owned(name, nbytes + (-nbytes % 4))  # whole words
                if arg is not None:
                    data = arg.data if arg.kind != "torch-cuda" else None
                    host = bytes(data) if data is not None else b""
                    if host:
                        rc = self.lib.cuMemcpyHtoD_v2(pointers[name], host, len(host))
                        cr._check(rc, "cuMemcpyHtoD")
                else:  # outputs and scratch (a `zero` counter among them) start at zero
                    cr._check(
                        self.lib.cuMemsetD8Async(pointers[name], 0, max(nbytes, 4), stream),
                        "cuMemsetD8Async",
                    )
        packed = mf.pack_uniform(self.manifest, dims, scalars)
        uniform = None if packed is None else ctypes.create_string_buffer(packed)
        slots_alive: list[Any] = []
        for kernel, function in zip(self.manifest["kernels"], self.functions, strict=True):
            grid = mf.workgroup_counts(kernel, dims)
            if 0 in grid:
                continue
            slots: dict[int, Any] = {}
            for b in kernel["bindings"]:
                holder = ctypes.c_uint64(pointers[b["buffer"]])
                slots_alive.append(holder)
                slots[b["binding"]] = ctypes.addressof(holder)
            ub = kernel.get("uniform_binding")
            if ub is not None:
                slots[ub["binding"]] = ctypes.addressof(uniform)
            if sorted(slots) != list(range(len(slots))):
                raise mf.ManifestError(
                    f"kernel `{kernel['entry_point']}` has parameter positions {sorted(slots)}"
                )
            params = (ctypes.c_void_p * max(len(slots), 1))(*[slots[k] for k in sorted(slots)])
            block = tuple(kernel["workgroup_size"])
            rc = self.lib.cuLaunchKernel(function, *grid, *block, 0, stream, params, None)
            cr._check(rc, f"cuLaunchKernel({kernel['entry_point']})")
        out: dict[str, Any] = {}
        if torch is not None:
            for buf in self.manifest["buffers"]:
                if buf["role"] in mf.RESULTS:
                    tensor = device_outputs[buf["name"]]
                    out[buf["name"]] = (
                        tensor != 0 if buf["dtype"] == "bool_" else _uint(tensor, buf)
                    )
            return out
        cr._check(self.lib.cuCtxSynchronize(), "cuCtxSynchronize (a kernel failed)")
        for buf in self.manifest["buffers"]:
            if buf["role"] not in mf.RESULTS:
                continue
            shape = mf.buffer_shape(buf, dims)
            nbytes = mf.buffer_bytes(buf, mf.numel(shape), "ptx")
            host = ctypes.create_string_buffer(max(nbytes, 1))
            dst = ctypes.cast(host, ctypes.c_void_p)
            src = pointers[buf["name"]]
            cr._check(self.lib.cuMemcpyDtoH_v2(dst, src, nbytes), "cuMemcpyDtoH")
            out[buf["name"]] = make_output(kind, host.raw[:nbytes], buf["dtype"], shape)
        return out

    def __del__(self) -> None:
        lib = getattr(self, "lib", None)
        if lib is None:
            return
        for ptr, _ in getattr(self, "owned", {}).values():
            lib.cuMemFree_v2(ptr)
        for module in getattr(self, "modules", {}).values():
            lib.cuModuleUnload(module)


def arrays_device(arrays: Mapping[str, ArrayArg]) -> Any:
    """The device of the CUDA tensors among the arguments: device 0, whose context runs them."""
    devices = {str(a.keep.device) for a in arrays.values() if a.kind == "torch-cuda"}
    if devices - {"cuda:0"}:
        raise mf.ManifestError(
            f"CUDA tensors on {sorted(devices)}: the kernels run on device 0 (cuda:0); "
            "move the tensors there"
        )
    return "cuda:0"


def _shares_memory(name: str, arrays: Mapping[str, ArrayArg]) -> bool:
    """Whether CUDA tensor `name` lies in the same storage as another CUDA argument."""
    storage = arrays[name].keep.untyped_storage().data_ptr()
    return any(
        other != name and a.kind == "torch-cuda" and a.keep.untyped_storage().data_ptr() == storage
        for other, a in arrays.items()
    )


def _uint(tensor: Any, buf: Mapping[str, Any]) -> Any:
    torch = sys.modules["torch"]
    if buf["dtype"] == "uint32" and hasattr(torch, "uint32"):
        return tensor.view(torch.uint32)
    return tensor
