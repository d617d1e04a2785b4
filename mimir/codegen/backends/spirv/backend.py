"""The SPIR-V `Backend`: capabilities, refusals, and one module per kernel (see the package)."""

from __future__ import annotations

from dataclasses import replace

from mimir.codegen.backends.base import Backend, Capabilities, Namer, Printed
from mimir.codegen.backends.spirv.body import BINARY, EXT, INTRINSICS
from mimir.codegen.backends.spirv.disasm import disassemble
from mimir.codegen.backends.spirv.emit import BUILTINS, Binding, emit_kernel
from mimir.codegen.ir import Binary, Builtin, Call, Kernel, Unary, all_expressions, lower_vectors

_TYPES = {"bool": "bool", "i32": "i32", "u32": "u32", "f32": "f32", "f16": "f16"}


class SPIRV(Backend):
    name = "spirv"
    extension = "spv"
    capabilities = Capabilities(
        types=frozenset(_TYPES),
        max_invocations=256,
        max_shared_bytes=16384,
        max_storage_buffers=8,
    )
    # Not keywords (SPIR-V has none): names a reader of the assembly should not see reused.
    reserved = frozenset({"main", "void", "bool", "int", "uint", "float", "half", "glsl"})
    type_map = _TYPES
    intrinsics = {fn: fn for fn in INTRINSICS}
    device_fence = True  # OpMemoryBarrier at Device scope, buffers decorated Coherent
    full_range_trig = False  # GLSL.std.450 Sin/Cos: Vulkan bounds them on [-pi, pi] only
    nearest_even_half = False  # Vulkan leaves OpFConvert's rounding to the driver
    # `OpUMulExtended` is valid Vulkan SPIR-V, but naga (wgpu's SPIR-V reader, how Mimir's
    # hosts run these modules) rejects it as an unsupported instruction: 16-bit halves
    emulated = {"mulhi": "mimir_mulhi_u32"}

    def check(self, kernel: Kernel) -> str | None:
        """The base checks, then every operator, intrinsic and built-in against the tables."""
        why = super().check(kernel)
        if why is not None:
            return why
        kernel = self.adapt(kernel)
        exprs = list(all_expressions(kernel.body))
        for h in kernel.helpers:
            exprs += list(all_expressions(h.body))
        helpers = {h.name for h in kernel.helpers}
        for e in exprs:
            if isinstance(e, Binary) and e.op not in BINARY.get(e.a.type, {}):
                return f"the operator `{e.op}` on `{e.a.type}`"
            if isinstance(e, Unary) and (e.op == "!") != (e.type == "bool"):
                return f"the operator `{e.op}` on `{e.type}`"
            if isinstance(e, Call) and e.fn not in helpers and e.fn not in ("isnan", "isinf"):
                if (e.fn, e.args[0].type) not in EXT and (e.fn, e.args[0].type) != ("abs", "u32"):
                    return f"the function `{e.fn}` on `{e.args[0].type}`"
            if isinstance(e, Builtin):
                group, _, axis = e.name.rpartition("_")
                if group not in BUILTINS or axis not in ("x", "y", "z"):
                    return f"the built-in `{e.name}`"
        return None

    def print_kernel(self, kernel: Kernel, header: str) -> Printed:
        kernel = self.adapt(kernel)
        kernel = replace(kernel, body=lower_vectors(kernel.body))
        self.names = Namer(self.reserved)
        self.fields = Namer(self.reserved)
        for b in kernel.buffers:
            self.names(b.name)
        for f, _ in kernel.uniform_fields:
            self.fields(f)
        entry = self.names(kernel.name)
        for h in kernel.helpers:
            self.names(h.name)
        bindings = [(b.name, 0, k, b.access) for k, b in enumerate(kernel.buffers)]
        uniform = (0, len(kernel.buffers)) if kernel.uses_uniform else None
        module = emit_kernel(
            kernel,
            entry,
            self.names,
            self.fields,
            [Binding(g, k) for _, g, k, _ in bindings],
            Binding(*uniform) if uniform is not None else None,
        )
        comment = "".join(f"; {line}\n" for line in header.splitlines())
        return Printed(
            comment + disassemble(module.words()), entry, bindings, uniform, module.to_bytes()
        )
