"""WGSL: one `@compute` entry point per file.

Layout of a file: `enable f16;` when a buffer holds float16, the uniform
struct, `@group(0) @binding(k)` storage buffers in binding order (`read` or
`read_write`) and the uniform after them, workgroup arrays, helper functions,
then the entry point with the builtins it uses (`local_invocation_id`,
`workgroup_id`, `num_workgroups`). A float16 kernel needs a device with the
`shader-f16` feature.

Limits are WebGPU's guaranteed defaults (256 invocations per workgroup,
16 KiB of workgroup memory, 8 storage buffers per stage), so a kernel that
validates here runs on every WebGPU device. WGSL has no bool storage, so bool
tensors are u32 (0 or 1) in buffers, as in every backend. WGSL has no
`isNan`, and a constant inf or nan is a shader-creation error, so non-finite
constants are read from a `var<private>` holding their bits.
"""

from __future__ import annotations

import math

from mimir.codegen.backends.base import (
    ATOM,
    UNARY,
    Backend,
    Capabilities,
    shortest_float,
    vector_index,
)
from mimir.codegen.ir import (
    AtomicAdd,
    Await,
    Binary,
    Const,
    Expr,
    For,
    GlobalVectorLoad,
    GlobalVectorStore,
    Helper,
    Kernel,
    Load,
    Publish,
    Retract,
    all_expressions,
    vector_only_buffers,
)

_KEYWORDS = """alias break case const const_assert continue continuing default diagnostic discard
else enable false fn for if let loop override requires return struct switch true var while"""
_RESERVED = """NULL Self abstract active alignas alignof as asm asm_fragment async attribute auto
await become binding_array cast catch class co_await co_return co_yield coherent column_major
common compile compile_fragment concept const_cast consteval constexpr constinit crate debugger
decltype delete demote demote_to_helper do dynamic_cast enum explicit export extends extern
external fallthrough filter final finally friend from fxgroup get goto groupshared highp impl
implements import inline instanceof interface layout lowp macro macro_rules match mediump meta
mod module move mut mutable namespace new nil noexcept noinline nointerpolation noperspective
null nullptr of operator package packoffset partition pass patch pixelfragment precise
precision premerge priv protected pub public readonly ref regardless register reinterpret_cast
require resource restrict self set shared sizeof smooth snorm static static_assert static_cast
std subroutine super target template this thread_local throw trait try type typedef typeid
typename typeof union unless unorm unsafe unsized use using varying virtual volatile wgsl where
with writeonly yield"""
_PREDECLARED = """bool i32 u32 f32 f16 vec2 vec3 vec4 mat2x2 mat3x3 mat4x4 array atomic ptr
sampler texture_2d vec2i vec3i vec4i vec2u vec3u vec4u vec2f vec3f vec4f vec2h vec3h vec4h
read write read_write function private workgroup uniform storage exp log sqrt tanh floor abs
pow min max clamp select bitcast workgroupBarrier storageBarrier arrayLength inverseSqrt
main"""

_TYPES = {"bool": "bool", "i32": "i32", "u32": "u32", "f32": "f32", "f16": "f16"}


class WGSL(Backend):
    name = "wgsl"
    extension = "wgsl"
    capabilities = Capabilities(
        types=frozenset(_TYPES),
        max_invocations=256,
        max_shared_bytes=16384,
        max_storage_buffers=8,
    )
    reserved = frozenset((_KEYWORDS + " " + _RESERVED + " " + _PREDECLARED).split())
    type_map = _TYPES
    # no device-scope fence: a one-launch reduction's partials go in tagged words
    tagged_handoff = True
    intrinsics = {
        "exp": "exp({0})",
        "log": "log({0})",
        "sqrt": "sqrt({0})",
        "tanh": "tanh({0})",
        "sin": "sin({0})",
        "cos": "cos({0})",
        "floor": "floor({0})",
        "abs": "abs({0})",
        "pow": "pow({0}, {1})",
        "fma": "fma({0}, {1}, {2})",
        "min": "min({0}, {1})",
        "max": "max({0}, {1})",
        "isnan": "((bitcast<u32>({0}) & 0x7fffffffu) > 0x7f800000u)",
        "isinf": "((bitcast<u32>({0}) & 0x7fffffffu) == 0x7f800000u)",
    }
    barrier = "workgroupBarrier();"
    full_range_trig = False  # WGSL's sin/cos: 2^-11 absolute on [-pi, pi] only
    nearest_even_half = False  # f32 -> f16 may round either way (and near 65504 to inf)
    emulated = {"mulhi": "mimir_mulhi_u32"}  # WGSL has no high-half multiply

    def literal(self, c: Const) -> tuple[str, int]:
        v, t = c.value, c.type
        if t == "bool":
            return ("true" if v else "false"), ATOM
        if t == "u32":
            return f"{v}u", ATOM
        if t == "i32":
            if v == -(2**31):
                return "i32(-2147483648)", ATOM
            return f"{v}i", (UNARY if v < 0 else ATOM)
        if math.isnan(v):
            self._nonfinite.add("$nan_bits")
            return f"bitcast<f32>({self.names('$nan_bits')})", ATOM
        if math.isinf(v):
            self._nonfinite.add("$inf_bits")
            text = f"bitcast<f32>({self.names('$inf_bits')})"
            return ("-" + text, UNARY) if v < 0 else (text, ATOM)
        text = shortest_float(v) + "f"
        return text, (UNARY if text.startswith("-") else ATOM)

    def bitcast(self, e: str, t: str) -> str:
        return f"bitcast<{self.type_map[t]}>({e})"

    def select(self, cond: str, a: str, b: str) -> str:
        return f"select({b}, {a}, {cond})"

    def let(self, name: str, t: str, value: str) -> str:
        return f"let {name}: {self.type_map[t]} = {value};"

    def var(self, name: str, t: str, value: str) -> str:
        return f"var {name}: {self.type_map[t]} = {value};"

    def atomic_add(self, s: AtomicAdd, pad: str) -> list[str]:
        target = f"&{self.names(s.array)}[{self.expr(s.index)}]"
        if s.old is not None:  # a one-launch reduction's ticket (a u32 counter)
            add = f"atomicAdd({target}, {self.expr(s.value)})"
            return [pad + self.let(self.names(s.old.name), "u32", add)]
        if s.value.type != "f32":
            return [f"{pad}atomicAdd({target}, {self.expr(s.value)});"]
        # WGSL has no float atomics: a compare-exchange loop on the bits (`array<atomic<u32>>`).
        self._atomics += 1
        add, old, res = (self.names(f"${w}{self._atomics}") for w in ("add", "old", "cas"))
        return [
            f"{pad}{{",
            f"{pad}    let {add}: f32 = {self.expr(s.value)};",
            f"{pad}    var {old}: u32 = atomicLoad({target});",
            f"{pad}    loop {{",
            f"{pad}        let {res} = atomicCompareExchangeWeak({target}, {old}, "
            f"bitcast<u32>(bitcast<f32>({old}) + {add}));",
            f"{pad}        if ({res}.exchanged) {{ break; }}",
            f"{pad}        {old} = {res}.old_value;",
            f"{pad}    }}",
            f"{pad}}}",
        ]

    def handoff(self, s: Publish | Await | Retract, pad: str) -> list[str]:
        """The two tagged words of element i of a handed-off buffer (`ir.Publish`):
        2i holds the value's low 16 bits, 2i+1 its high 16 bits, each with bit 16 set."""
        self._atomics += 1
        words = self.names(s.array)
        at = self.names(f"$at{self._atomics}")
        lines = [f"{pad}let {at}: u32 = 2u * ({self.expr(s.index)});"]
        low, high = f"&{words}[{at}]", f"&{words}[{at} + 1u]"
        if isinstance(s, Retract):
            return [*lines, f"{pad}atomicStore({low}, 0u);", f"{pad}atomicStore({high}, 0u);"]
        if isinstance(s, Publish):
            bits = self.names(f"$bits{self._atomics}")
            return [
                *lines,
                f"{pad}let {bits}: u32 = bitcast<u32>({self.expr(s.value)});",
                f"{pad}atomicStore({low}, ({bits} & 0xffffu) | 0x10000u);",
                f"{pad}atomicStore({high}, ({bits} >> 16u) | 0x10000u);",
            ]
        # Await: both words again until both carry their tag (relaxed loads; every
        # publisher has stored them before taking its ticket, so the loop ends)
        lo, hi = (self.names(f"${w}{self._atomics}") for w in ("low", "high"))
        value = f"bitcast<{self.type_map[s.var.type]}>(({lo} & 0xffffu) | ({hi} << 16u))"
        return [
            *lines,
            f"{pad}var {lo}: u32 = atomicLoad({low});",
            f"{pad}var {hi}: u32 = atomicLoad({high});",
            f"{pad}loop {{",
            f"{pad}    if (({lo} & {hi} & 0x10000u) != 0u) {{ break; }}",
            f"{pad}    {lo} = atomicLoad({low});",
            f"{pad}    {hi} = atomicLoad({high});",
            f"{pad}}}",
            pad + self.let(self.names(s.var.name), s.var.type, value),
        ]

    def for_head(self, name: str, s: For) -> str:
        end = self.expr(s.end)
        if isinstance(s.end, Binary) and s.end.op in ("<<", ">>"):
            end = f"({end})"  # `i < a >> b` would read as a template list
        return (
            f"for (var {name}: u32 = {self.expr(s.start)}; {name} < {end}; "
            f"{name} += {self.expr(s.step)})"
        )

    def vector_load(self, s: GlobalVectorLoad, pad: str) -> list[str]:
        # WGSL has no reinterpreting view of a buffer: a buffer the kernel reads only a
        # vector at a time is declared as an array of vectors, any other one lane by lane
        if s.array not in self._vector_buffers:
            return super().vector_load(s, pad)
        self._vectors += 1
        tmp = self.names(f"$vec{self._vectors}")
        lines = [f"{pad}let {tmp} = {self.names(s.array)}[{self.expr(vector_index(s))}];"]
        lines += [
            pad + self.let(self.names(v.name), v.type, f"{tmp}[{k}]") for k, v in enumerate(s.vars)
        ]
        return lines

    def vector_store(self, s: GlobalVectorStore, pad: str) -> list[str]:
        if s.array not in self._vector_buffers:
            return super().vector_store(s, pad)
        elem = self._elems[s.array]
        values = ", ".join(self.expr(v) for v in s.values)
        target = f"{self.names(s.array)}[{self.expr(vector_index(s))}]"
        return [f"{pad}{target} = vec{len(s.values)}<{self.type_map[elem]}>({values});"]

    def _expr(self, e: Expr) -> tuple[str, int]:
        if isinstance(e, Load) and e.array in self._broadcast:
            # (a barrier of its own, then the value all threads read is uniform)
            return f"workgroupUniformLoad(&{self.names(e.array)}[{self.expr(e.index)}])", ATOM
        return super()._expr(e)

    def prepare(self, kernel: Kernel) -> None:
        self._broadcast = {a.name for a in kernel.shared if a.broadcast}
        self._vector_buffers = vector_only_buffers(kernel)
        self._elems = {b.name: b.elem for b in kernel.buffers}
        self._vectors = 0
        self._nonfinite: set[str] = set()
        self._atomics = 0
        self.names("$inf_bits")
        self.names("$nan_bits")

    def helper(self, h: Helper) -> list[str]:
        params = ", ".join(f"{self.names(p.name)}: {self.type_map[p.type]}" for p in h.params)
        head = f"fn {self.names(h.name)}({params}) -> {self.type_map[h.ret]} {{"
        return [head, *self.block(h.body, 1), "}", ""]

    def file(self, kernel: Kernel, entry: str, header: str) -> str:
        body = self.block(kernel.body, 1)
        helpers = [line for h in kernel.helpers for line in self.helper(h)]
        lines = [f"// {line}" for line in header.splitlines()]
        exprs = list(all_expressions(kernel.body))
        for h in kernel.helpers:
            exprs += list(all_expressions(h.body))
        if any(e.type == "f16" for e in exprs) or any(b.elem == "f16" for b in kernel.buffers):
            lines.append("enable f16;")
        lines.append("")
        if kernel.uses_uniform:
            lines.append(f"struct {self.names('$Uniforms')} {{")
            for f, t in kernel.uniform_fields:
                lines.append(f"    {self.fields(f)}: {self.type_map[t]},")
            lines += ["}", ""]
        for k, b in enumerate(kernel.buffers):
            t, name = self.type_map[b.elem], self.names(b.name)
            if b.atomic:  # f32 is updated through its bits (see `atomic_add`)
                t = f"atomic<{'u32' if t == 'f32' else t}>"
            if b.name in self._vector_buffers:
                t = f"vec4<{t}>"
            lines.append(f"@group(0) @binding({k}) var<storage, {b.access}> {name}: array<{t}>;")
        if kernel.uses_uniform:
            lines.append(
                f"@group(0) @binding({len(kernel.buffers)}) var<uniform> {self.names('$u')}: "
                f"{self.names('$Uniforms')};"
            )
        for a in kernel.shared:
            t = self.type_map[a.elem]
            lines.append(f"var<workgroup> {self.names(a.name)}: array<{t}, {a.count}>;")
        for bits, pattern in (("$inf_bits", "0x7f800000u"), ("$nan_bits", "0x7fc00000u")):
            if bits in self._nonfinite:
                lines.append(f"var<private> {self.names(bits)}: u32 = {pattern};")
        lines.append("")
        lines += helpers
        builtins = {
            "local": ("$lid", "local_invocation_id"),
            "group": ("$wid", "workgroup_id"),
            "groups": ("$nwg", "num_workgroups"),
        }
        params = [
            f"@builtin({builtins[b][1]}) {self.names(builtins[b][0])}: vec3<u32>"
            for b in self.builtins_used(kernel)
        ]
        x, y, z = kernel.workgroup_size
        lines.append(f"@compute @workgroup_size({x}, {y}, {z})")
        if len(params) > 1:
            lines.append(f"fn {entry}(")
            lines += [f"    {p}," for p in params]
            lines.append(") {")
        else:
            lines.append(f"fn {entry}({', '.join(params)}) {{")
        lines += body
        lines.append("}")
        return "\n".join(lines) + "\n"
