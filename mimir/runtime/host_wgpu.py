"""The wgpu engine of `mimir.runtime.load`: persistent pipelines and buffers for one manifest.

Shader modules and compute pipelines are made once, on the first call (their
bind group layouts are the manifest's bindings, built by
`mimir.runtime.wgpu_runner`, so a binding that disagrees with the shader fails
there). Storage buffers, the uniform buffer and the bind groups are made for
one set of dims and kept until a call brings other dims. Each call writes the
inputs (`input` and `inout` buffers) and the uniform with `queue.write_buffer`
straight from the arrays' memory, clears outputs and scratch on the device,
encodes every launch in manifest order in one submission and reads the outputs
and the updated `inout` buffers back.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mimir.runtime import contract
from mimir.runtime import manifest as mf
from mimir.runtime import wgpu_runner as wr
from mimir.runtime.arrays import ArrayArg, make_output

__all__ = ["WgpuRunner"]


def _padded(nbytes: int) -> int:
    # A binding cannot be empty, and copies and maps move whole 4-byte words.
    return max(4, nbytes + (-nbytes % 4))


class WgpuRunner:
    def __init__(self, manifest: Mapping[str, Any], directory: Path) -> None:
        self.wgpu = wr._wgpu()
        self.device = wr._device()
        self.manifest = manifest
        modules: dict[str, Any] = {}
        self.pipelines: list[tuple[Any, dict[int, Any]]] = []
        for index, kernel in enumerate(manifest["kernels"]):
            file = kernel["file"]
            if file not in modules:
                code = wr.kernel_code(directory, manifest, index)
                try:
                    modules[file] = self.device.create_shader_module(code=code, label=file)
                except self.wgpu.GPUError as err:
                    raise wr.WgslValidationError(f"{file}: {wr._naga_message(err)}") from None
            self.pipelines.append(
                wr._pipeline(self.wgpu, self.device, modules[file], kernel, manifest)
            )
        self.dims: dict[str, int] | None = None
        self.buffers: dict[str, Any] = {}
        self.nbytes: dict[str, int] = {}
        self.uniform: Any = None
        self.launches: list[tuple[Any, dict[int, Any], tuple[int, int, int]]] = []

    def _allocate(self, dims: Mapping[str, int], uniform_size: int) -> None:
        usage = self.wgpu.BufferUsage
        self.buffers, self.nbytes = {}, {}
        for index, buf in enumerate(self.manifest["buffers"]):
            _, _, nbytes = contract.buffer_extent(self.manifest, index, dims)
            self.nbytes[buf["name"]] = nbytes
            self.buffers[buf["name"]] = self.device.create_buffer(
                size=_padded(nbytes), usage=usage.STORAGE | usage.COPY_SRC | usage.COPY_DST
            )
        self.uniform = (
            self.device.create_buffer(size=uniform_size, usage=usage.UNIFORM | usage.COPY_DST)
            if uniform_size
            else None
        )
        counts = wr._launch_counts(self.manifest, dims, self.device)
        self.launches = []
        for kernel, (pipeline, layouts), launch in zip(
            self.manifest["kernels"], self.pipelines, counts, strict=True
        ):
            groups = self._bind_groups(kernel, layouts)
            if 0 not in launch:
                self.launches.append((pipeline, groups, launch))
        self.dims = dict(dims)

    def _bind_groups(self, kernel: Mapping[str, Any], layouts: Mapping[int, Any]) -> dict:
        entries: dict[int, list[dict[str, Any]]] = {g: [] for g in layouts}
        for b in kernel["bindings"]:
            buffer = self.buffers[b["buffer"]]
            entries[b["group"]].append(
                {"binding": b["binding"], "resource": {"buffer": buffer, "size": buffer.size}}
            )
        ub = kernel.get("uniform_binding")
        if ub is not None:
            if self.uniform is None:
                raise mf.ManifestError(f"kernel `{kernel['entry_point']}` reads a missing uniform")
            entries[ub["group"]].append(
                {"binding": ub["binding"], "resource": {"buffer": self.uniform}}
            )
        return {
            g: self.device.create_bind_group(layout=layouts[g], entries=entries[g])
            for g in sorted(layouts)
        }

    def run(
        self,
        arrays: Mapping[str, ArrayArg],
        dims: Mapping[str, int],
        scalars: Mapping[str, float | int],
        kind: str,
    ) -> dict[str, Any]:
        uniform = mf.pack_uniform(self.manifest, dims, scalars)
        if dims != self.dims:
            self._allocate(dims, len(uniform) if uniform else 0)
        queue = self.device.queue
        for name, arg in arrays.items():
            data = arg.data
            if arg.kind == "torch-cuda":  # wgpu cannot read CUDA memory: one copy to the host
                from mimir.runtime.arrays import read_array

                data = read_array(arg.keep.cpu()).data
            if data is None or not len(data):
                continue
            if len(data) % 4:
                data = memoryview(bytes(data) + bytes(-len(data) % 4))
            queue.write_buffer(self.buffers[name], 0, data)
        if uniform is not None:
            queue.write_buffer(self.uniform, 0, uniform)
        encoder = self.device.create_command_encoder()
        for buf in self.manifest["buffers"]:
            # outputs and scratch (a `zero` counter among them) start at zero; `inout`
            # holds the caller's values
            if buf["role"] not in mf.UPLOADED:
                encoder.clear_buffer(self.buffers[buf["name"]])
        for pipeline, groups, launch in self.launches:
            compute = encoder.begin_compute_pass()
            compute.set_pipeline(pipeline)
            for index, group in groups.items():
                compute.set_bind_group(index, group)
            compute.dispatch_workgroups(*launch)
            compute.end()
        queue.submit([encoder.finish()])
        out: dict[str, Any] = {}
        for buf in self.manifest["buffers"]:
            if buf["role"] not in mf.RESULTS:
                continue
            name = buf["name"]
            nbytes = self.nbytes[name]
            data = queue.read_buffer(self.buffers[name], size=_padded(nbytes))[:nbytes]
            shape = mf.buffer_shape(buf, dims)
            out[name] = make_output(kind, data, buf["dtype"], shape)
        return out
