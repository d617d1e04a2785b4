"""One IR kernel as one SPIR-V module (Vulkan 1.1, SPIR-V 1.3, GLCompute, GLSL.std.450).

Resources, as the manifest states them (descriptor set = group, binding = binding):

- each storage buffer is a `StorageBuffer` variable of a `Block` struct
  holding a runtime array (`ArrayStride` = element size, member `Offset` 0);
  a read-only buffer's variable is decorated `NonWritable` (on the variable,
  not the member: naga ignores member-level `NonWritable`: ARCHITECTURE.md,
  "Correctness without a GPU");
- the uniform block is a `Uniform` variable of a `Block` struct with the
  manifest's fields in order, 4 bytes each (`Offset` 4 * i);
- shared arrays are `Workgroup` variables of fixed-size arrays;
- `local_*`, `group_*` and `groups_*` read the `LocalInvocationId`,
  `WorkgroupId` and `NumWorkgroups` built-ins (listed in the entry point's
  interface, as SPIR-V 1.3 requires of `Input` variables).

Uniform fields and built-ins the body reads are loaded once at the top of the
entry function. float16 buffers declare `Float16` and
`StorageBuffer16BitAccess` (the latter is core in SPIR-V 1.3, so no
`OpExtension` is needed). Helpers become functions the entry point calls.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mimir.codegen.backends.spirv import instructions as ins
from mimir.codegen.backends.spirv.body import BodyEmitter, Resources
from mimir.codegen.backends.spirv.module import Function, Module
from mimir.codegen.backends.spirv.spec import (
    GLSL_SET,
    BuiltIn,
    Capability,
    Decoration,
    StorageClass,
)
from mimir.codegen.ir import (
    Builtin,
    Fence,
    GlobalVectorLoad,
    Kernel,
    Load,
    Uniform,
    all_expressions,
    vector_only_buffers,
    walk_statements,
)

BUILTINS = {
    "local": BuiltIn.LocalInvocationId,
    "group": BuiltIn.WorkgroupId,
    "groups": BuiltIn.NumWorkgroups,
    "global": BuiltIn.GlobalInvocationId,
}
_AXES = "xyz"
_BYTES = {"bool": 4, "i32": 4, "u32": 4, "f32": 4, "f16": 2}


@dataclass(frozen=True)
class Binding:
    group: int
    binding: int


def _scalar_types(module: Module) -> Callable[[str], int]:
    def scalar(t: str) -> int:
        if t == "bool":
            return module.bool_()
        if t in ("i32", "u32"):
            return module.int_(32, t == "i32")
        if t == "f32":
            return module.float_(32)
        if t == "f16":
            module.capability(Capability.Float16)
            return module.float_(16)
        raise TypeError(f"no SPIR-V type for `{t}`")

    return scalar


def handed_off(kernel: Kernel) -> set[str]:
    """In a kernel with a `Fence` (a one-launch reduction's handoff), the buffers it both
    stores to (`read_write`, not only through `AtomicAdd`) and loads from: one workgroup
    stores a partial, the last loads it. Their accesses are atomic (device scope,
    relaxed), so the fence orders them across workgroups; the Vulkan memory model makes
    plain accesses visible only through `Coherent`, which naga rejects."""
    if not any(isinstance(s, Fence) for s in walk_statements(kernel.body)):
        return set()
    loaded = {e.array for e in all_expressions(kernel.body) if isinstance(e, Load)}
    loaded |= {s.array for s in walk_statements(kernel.body) if isinstance(s, GlobalVectorLoad)}
    return {b.name for b in kernel.buffers if b.access == "read_write" and not b.atomic} & loaded


def emit_kernel(
    kernel: Kernel,
    entry: str,
    name: Callable[[str], str],
    field_name: Callable[[str], str],
    buffer_bindings: Sequence[Binding],
    uniform_binding: Binding | None,
) -> Module:
    """The module for `kernel`; `name` and `field_name` are the file's namers."""
    m = Module()
    m.capability(Capability.Shader)
    scalar = _scalar_types(m)
    res = Resources()
    res.glsl = m.ext_inst_import(GLSL_SET)
    zero = m.const_u32(0)

    blocks: dict[tuple[str, int], int] = {}  # (element type, lanes) -> the Block struct
    vector = vector_only_buffers(kernel)  # declared as runtime arrays of 4-vectors
    res.handed_off = handed_off(kernel)
    vector -= res.handed_off
    for buf, where in zip(kernel.buffers, buffer_bindings, strict=True):
        if buf.elem == "f16":
            m.capability(Capability.StorageBuffer16BitAccess)
        # A float buffer that `AtomicAdd` updates is viewed as its bits (u32): SPIR-V's
        # compare-exchange takes integers (see `Body.atomic_add`).
        atomic = buf.atomic or buf.name in res.handed_off
        elem = "u32" if atomic and buf.elem == "f32" else buf.elem
        lanes = 4 if buf.name in vector else 1
        if (elem, lanes) not in blocks:
            item = scalar(elem) if lanes == 1 else m.vector(scalar(elem), lanes)
            block = m.struct([m.runtime_array(item, _BYTES[elem] * lanes)])
            m.name(block, name(f"${elem}_buffer" if lanes == 1 else f"${elem}x{lanes}_buffer"))
            m.decorate(block, Decoration.Block)
            m.member_decorate(block, 0, Decoration.Offset, 0)
            blocks[elem, lanes] = block
        var = m.variable(StorageClass.StorageBuffer, blocks[elem, lanes])
        m.name(var, name(buf.name))
        m.decorate(var, Decoration.DescriptorSet, where.group)
        m.decorate(var, Decoration.Binding, where.binding)
        if buf.access == "read":
            m.decorate(var, Decoration.NonWritable)
        res.arrays[buf.name] = (var, StorageClass.StorageBuffer, elem, (zero,))
        if lanes > 1:
            res.vector_arrays[buf.name] = lanes

    uniform_var = None
    if kernel.uses_uniform:
        assert uniform_binding is not None
        block = m.struct([scalar(t) for _, t in kernel.uniform_fields])
        m.name(block, name("$Uniforms"))
        m.decorate(block, Decoration.Block)
        for k, (f, _) in enumerate(kernel.uniform_fields):
            m.member_name(block, k, field_name(f))
            m.member_decorate(block, k, Decoration.Offset, 4 * k)
        uniform_var = m.variable(StorageClass.Uniform, block)
        m.name(uniform_var, name("$u"))
        m.decorate(uniform_var, Decoration.DescriptorSet, uniform_binding.group)
        m.decorate(uniform_var, Decoration.Binding, uniform_binding.binding)

    for a in kernel.shared:
        var = m.variable(StorageClass.Workgroup, m.array(scalar(a.elem), a.count))
        m.name(var, name(a.name))
        res.arrays[a.name] = (var, StorageClass.Workgroup, a.elem, ())

    exprs = list(all_expressions(kernel.body))
    builtin_names = sorted({e.name for e in exprs if isinstance(e, Builtin)})
    fields_used = {e.field for e in exprs if isinstance(e, Uniform)}

    void = m.void()
    entry_fn = Function(m, void, [])
    m.name(entry_fn.id, entry)
    for h in kernel.helpers:
        res.helpers[h.name] = Function(m, scalar(h.ret), [scalar(p.type) for p in h.params])
        m.name(res.helpers[h.name].id, name(h.name))

    # Built-ins and uniform fields, loaded once at the top of the entry function.
    u32 = scalar("u32")
    vec3 = m.vector(u32, 3)
    interface: list[int] = []
    loaded: dict[str, int] = {}
    for b in builtin_names:
        group, axis = b.rsplit("_", 1)
        if group not in loaded:
            var = m.builtin_input(BUILTINS[group], vec3)
            m.name(var, name(f"${group}_id"))
            interface.append(var)
            loaded[group] = m.new_id()
            entry_fn.emit(ins.op_load(vec3, loaded[group], var))
        value = m.new_id()
        entry_fn.emit(ins.op_composite_extract(u32, value, loaded[group], _AXES.index(axis)))
        m.name(value, name("$" + b))
        res.builtins[b] = value
    for k, (f, t) in enumerate(kernel.uniform_fields):
        if f not in fields_used:
            continue
        assert uniform_var is not None
        ptr, value = m.new_id(), m.new_id()
        ptr_type = m.pointer(StorageClass.Uniform, scalar(t))
        entry_fn.emit(ins.op_access_chain(ptr_type, ptr, uniform_var, [m.const_u32(k)]))
        entry_fn.emit(ins.op_load(scalar(t), value, ptr))
        m.name(value, name("$u_" + f))
        res.uniforms[f] = value

    body = BodyEmitter(m, entry_fn, res, scalar, name)
    body.block(kernel.body)
    if not entry_fn.terminated:
        entry_fn.terminate(ins.op_return())
    m.entry_point(entry_fn.id, entry, interface)
    m.local_size(entry_fn.id, kernel.workgroup_size)
    m.add_function(entry_fn.finish())

    for h in kernel.helpers:
        fn = res.helpers[h.name]
        helper_body = BodyEmitter(m, fn, res, scalar, name)
        helper_body.bind_params(h.params, h.body)
        helper_body.block(h.body)
        if not fn.terminated:
            raise TypeError(f"IR helper `{h.name}` can reach its end without returning")
        m.add_function(fn.finish())
    return m
