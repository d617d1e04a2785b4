"""SPIR-V: one binary module per kernel (Vulkan 1.1 / SPIR-V 1.3, GLCompute, GLSL.std.450).

The module is written by Mimir's own instruction builder
(`mimir.codegen.backends.spirv`): `emit.emit_kernel` lays out the resources and
`body.BodyEmitter` prints the IR's statements in structured control flow. The
file is the binary (`.spv`); `Printed.text` carries its assembly, which
`mimir compile-gpu --emit spvasm` writes next to it.

Bindings follow the other backends: descriptor set 0, the storage buffers at
bindings 0.. in the kernel's order, the uniform block after them. Limits are
WebGPU's guaranteed defaults (256 invocations, 16 KiB of workgroup memory,
8 storage buffers), which every Vulkan driver wgpu runs on meets, so a kernel
that compiles here runs through wgpu everywhere. bool is stored as u32, as in
every backend; float16 buffers need `Float16` and `StorageBuffer16BitAccess`
(wgpu's `shader-f16` feature).

SPIR-V has no reserved words, but names still go through the shared `Namer`
(they become `OpName`s and the entry point's name, which host APIs look up).

The folder:

- `backend`: `SPIRV`, the `Backend` (capabilities, tables, `check`, `print_kernel`);
- `spec`: opcodes, operand layouts and enumerants;
- `instructions`: one function per opcode, returning words;
- `module`: `Module` (ids, types, constants, layout), `Function`, `split_instructions`;
- `emit`: the resources and entry point of one kernel (`emit_kernel`);
- `body`: the IR's statements in structured control flow (`BodyEmitter`);
- `disasm`: `disassemble(words)`, readable assembly.
"""

from __future__ import annotations

from mimir.codegen.backends.spirv.backend import SPIRV
from mimir.codegen.backends.spirv.disasm import disassemble
from mimir.codegen.backends.spirv.module import Function, Module, split_instructions

__all__ = ["Function", "Module", "SPIRV", "disassemble", "split_instructions"]
