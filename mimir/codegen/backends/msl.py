"""Metal Shading Language: one `kernel` function per file.

Layout of a file: `#include <metal_stdlib>`, the uniform struct, helper
functions (`static inline`), then

    kernel void NAME(device const float* x [[buffer(0)]],   // buffers, binding order
                     device float* out [[buffer(1)]],
                     constant Uniforms& u [[buffer(2)]],      // when the kernel reads it
                     uint3 lid [[thread_position_in_threadgroup]],
                     uint3 wid [[threadgroup_position_in_grid]],
                     uint3 nwg [[threadgroups_per_grid]])     // the ones it uses

Threadgroup arrays are declared at the top of the body. Signed `int` `+ - *`
go through `uint` so that overflow wraps (C++ leaves it undefined); nan and
inf are tested on the bits and spelled as bit patterns, so that Metal's fast
math (on by default) cannot fold them away. For Python's float semantics
build with `MTLCompileOptions.mathMode = .safe` (`fastMathEnabled = NO`).
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
    SIMDGROUP_MATRIX,
    WARP,
    AtomicAdd,
    Const,
    Fence,
    For,
    GlobalVectorLoad,
    GlobalVectorStore,
    Helper,
    Kernel,
    SimdgroupBarrier,
    SimdgroupLoad,
    SimdgroupMultiplyAccumulate,
    SimdgroupStore,
    Stmt,
    WarpReduce,
    all_expressions,
    walk_statements,
)

_CPP = """alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t
char16_t char32_t class compl concept const consteval constexpr constinit const_cast continue
co_await co_return co_yield decltype default delete do double dynamic_cast else enum explicit
export extern false float for friend goto if inline int long mutable namespace new noexcept not
not_eq nullptr operator or or_eq private protected public register reinterpret_cast requires
return short signed sizeof static static_assert static_cast struct switch template this
thread_local throw true try typedef typeid typename union unsigned using virtual void volatile
wchar_t while xor xor_eq NULL"""
_METAL = """kernel vertex fragment device constant threadgroup thread threadgroup_imageblock
ray_data object_data visible stitchable patch half uint ushort uchar size_t ptrdiff_t metal main
bool2 bool3 bool4 char2 char3 char4 uchar2 uchar3 uchar4 short2 short3 short4 ushort2 ushort3
ushort4 int2 int3 int4 uint2 uint3 uint4 half2 half3 half4 float2 float3 float4 float2x2
float3x3 float4x4 half2x2 half3x3 half4x4 packed_float2 packed_float3 packed_float4 atomic_int
atomic_uint atomic_bool atomic_float texture1d texture2d texture3d texturecube sampler access
mem_flags as_type select exp log sqrt rsqrt tanh floor abs fabs pow min max fmin fmax clamp
isnan isinf INFINITY NAN MAXFLOAT threadgroup_barrier simdgroup_barrier fast precise std
simd_sum simd_max simd_min simd_any simd_all simd_shuffle simd_shuffle_xor simd_broadcast
simdgroup_float8x8 simdgroup_half8x8 simdgroup_matrix make_filled_simdgroup_matrix simdgroup_load
simdgroup_store simdgroup_multiply_accumulate ulong ulong2
assert vec array"""

_TYPES = {
    "bool": "bool",
    "i32": "int",
    "u32": "uint",
    "f32": "float",
    "f16": "half",
    SIMDGROUP_MATRIX: "simdgroup_float8x8",
}
_ATOMIC_TYPES = {"i32": "atomic_int", "u32": "atomic_uint", "f32": "atomic_float"}
_NONFINITE = {math.inf: "0x7f800000u", -math.inf: "0xff800000u"}


def _shuffle_helper(e: WarpReduce) -> str:
    return f"$mimir_simd_{e.op}_{e.type}_{e.lanes}"


class MSL(Backend):
    name = "msl"
    extension = "metal"
    # Metal guarantees 1024 threads per threadgroup and 32 KiB of threadgroup memory;
    # 31 buffer arguments.
    capabilities = Capabilities(
        types=frozenset(_TYPES),
        max_invocations=1024,
        max_shared_bytes=32768,
        max_storage_buffers=30,
    )
    reserved = frozenset((_CPP + " " + _METAL).split())
    type_map = _TYPES
    intrinsics = {
        "exp": "exp({0})",
        "log": "log({0})",
        "sqrt": "sqrt({0})",
        "tanh": "tanh({0})",
        # `precise::`: fast math's sin and cos are only accurate on [-pi, pi]
        "sin": "precise::sin({0})",
        "cos": "precise::cos({0})",
        "floor": "floor({0})",
        "abs": "abs({0})",
        "pow": "pow({0}, {1})",
        "fma": "fma({0}, {1}, {2})",
        "mulhi": "mulhi({0}, {1})",
        "min": "min({0}, {1})",
        "max": "max({0}, {1})",
        "isnan": "((as_type<uint>({0}) & 0x7fffffffu) > 0x7f800000u)",
        "isinf": "((as_type<uint>({0}) & 0x7fffffffu) == 0x7f800000u)",
    }
    # Signed overflow is undefined in C++: compute in uint, which wraps.
    binary_overrides = {
        (op, "i32"): "int(uint({a}) " + op + " uint({b}))" for op in ("+", "-", "*")
    }
    barrier = "threadgroup_barrier(mem_flags::mem_threadgroup);"
    device_barrier = "threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);"
    warp_functions = True
    device_fence = True  # `atomic_thread_fence` at `thread_scope_device` (MSL 3.2)
    vector_views = True  # a `device float4*` cast of a 16-byte aligned address

    def warp_reduce(self, e: WarpReduce) -> str:
        """`simd_sum` / `simd_max` / `simd_min` over the simdgroup (32 threads on every
        Apple GPU). An `int` sum goes through `uint`, which wraps; a float extremum is nan
        when any thread's value is (`simd_any`), as `maximum`/`minimum` say, since Metal
        leaves the nan behaviour of `simd_max` unspecified. Fewer than 32 lanes: a helper
        of `simd_shuffle_xor` rounds (`_shuffle_helpers`)."""
        x = self.expr(e.value)
        if e.lanes < WARP:
            return f"{self.names(_shuffle_helper(e))}({x})"
        fn = {"add": "simd_sum", "max": "simd_max", "fmax": "simd_max", "min": "simd_min"}[e.op]
        if e.op == "add" and e.type == "i32":
            return f"as_type<int>({fn}(as_type<uint>({x})))"
        if e.type == "f32" and e.op in ("max", "min"):
            nan = self.intrinsics["isnan"].format(x)
            return f"(simd_any({nan}) ? as_type<float>(0x7fc00000u) : {fn}({x}))"
        return f"{fn}({x})"

    def stmt(self, s: Stmt, indent: int) -> list[str]:
        """The simdgroup matrix statements (`SimdgroupLoad`...), then the shared ones."""
        pad = "    " * indent
        if isinstance(s, SimdgroupLoad):
            at = f"&{self.names(s.array)}[{self.expr(s.index)}]"
            flip = "true" if s.transpose else "false"
            var = self.names(s.var.name)
            return [f"{pad}simdgroup_load({var}, {at}, {s.stride}, ulong2(0, 0), {flip});"]
        if isinstance(s, SimdgroupMultiplyAccumulate):
            acc, a, b = (self.names(v.name) for v in (s.acc, s.a, s.b))
            return [f"{pad}simdgroup_multiply_accumulate({acc}, {a}, {b}, {acc});"]
        if isinstance(s, SimdgroupStore):
            at = f"&{self.names(s.array)}[{self.expr(s.index)}]"
            return [f"{pad}simdgroup_store({self.names(s.var.name)}, {at}, {s.stride});"]
        if isinstance(s, SimdgroupBarrier):
            return [f"{pad}simdgroup_barrier(mem_flags::mem_threadgroup);"]
        return super().stmt(s, indent)

    def literal(self, c: Const) -> tuple[str, int]:
        v, t = c.value, c.type
        if t == SIMDGROUP_MATRIX:  # every element `v`
            fill = shortest_float(float(v)) + "f"
            return f"make_filled_simdgroup_matrix<float, 8, 8>({fill})", ATOM
        if t == "bool":
            return ("true" if v else "false"), ATOM
        if t == "u32":
            return f"{v}u", ATOM
        if t == "i32":
            if v == -(2**31):
                return "(-2147483647 - 1)", ATOM
            return str(v), (UNARY if v < 0 else ATOM)
        if math.isnan(v):
            return "as_type<float>(0x7fc00000u)", ATOM
        if math.isinf(v):
            return f"as_type<float>({_NONFINITE[v]})", ATOM
        text = shortest_float(v) + "f"
        return text, (UNARY if text.startswith("-") else ATOM)

    def bitcast(self, e: str, t: str) -> str:
        return f"as_type<{self.type_map[t]}>({e})"

    def select(self, cond: str, a: str, b: str) -> str:
        return f"({cond} ? {a} : {b})"

    def let(self, name: str, t: str, value: str) -> str:
        return f"const {self.type_map[t]} {name} = {value};"

    def var(self, name: str, t: str, value: str) -> str:
        return f"{self.type_map[t]} {name} = {value};"

    def _vector_pointer(self, array: str, lanes: int, const: bool) -> str:
        elem = next(b.elem for b in self._kernel.buffers if b.name == array)
        qualifier = "device const" if const else "device"
        return f"(({qualifier} {self.type_map[elem]}{lanes}*){self.names(array)})"

    def vector_load(self, s: GlobalVectorLoad, pad: str) -> list[str]:
        # a vector type is aligned to its size: the scheduler proved the offset is
        lanes = len(s.vars)
        elem = s.vars[0].type
        self._vectors += 1
        tmp = self.names(f"$vec{self._vectors}")
        source = f"{self._vector_pointer(s.array, lanes, True)}[{self.expr(vector_index(s))}]"
        lines = [f"{pad}const {self.type_map[elem]}{lanes} {tmp} = {source};"]
        lines += [
            pad + self.let(self.names(v.name), v.type, f"{tmp}[{k}]") for k, v in enumerate(s.vars)
        ]
        return lines

    def vector_store(self, s: GlobalVectorStore, pad: str) -> list[str]:
        lanes = len(s.values)
        elem = next(b.elem for b in self._kernel.buffers if b.name == s.array)
        target = f"{self._vector_pointer(s.array, lanes, False)}[{self.expr(vector_index(s))}]"
        # filled lane by lane and stored whole (one 128-bit store): the same text is valid
        # MSL and the clang vector extension the tests compile it with
        self._vectors += 1
        tmp = self.names(f"$vec{self._vectors}")
        lines = [f"{pad}{self.type_map[elem]}{lanes} {tmp};"]
        for k, v in enumerate(s.values):
            value = self.expr(v)
            if v.type != elem:
                value = self.cast(value, elem)
            lines.append(f"{pad}{tmp}.{'xyzw'[k]} = {value};")
        return [*lines, f"{pad}{target} = {tmp};"]

    def prepare(self, kernel: Kernel) -> None:
        self._kernel = kernel
        self._vectors = 0

    def atomic_add(self, s: AtomicAdd, pad: str) -> list[str]:
        target = f"&{self.names(s.array)}[{self.expr(s.index)}]"
        value = self.expr(s.value)
        call = f"atomic_fetch_add_explicit({target}, {value}, memory_order_relaxed)"
        if s.old is not None:
            return [pad + self.let(self.names(s.old.name), s.old.type, call)]
        return [f"{pad}{call};"]

    def fence(self) -> str:
        # MSL 3.2 (macOS 15, iOS 18): fence-fence synchronisation with relaxed atomics at
        # device scope; the manifest says `requires: ["msl-3.2"]`
        return (
            "atomic_thread_fence(mem_flags::mem_device, memory_order_seq_cst, thread_scope_device);"
        )

    def for_head(self, name: str, s: For) -> str:
        return (
            f"for (uint {name} = {self.expr(s.start)}; {name} < {self.expr(s.end)}; "
            f"{name} += {self.expr(s.step)})"
        )

    def _shuffle_helpers(self, kernel: Kernel) -> list[str]:
        """One function per (op, type, lanes) of a `WarpReduce` over fewer than 32 lanes:
        butterfly rounds of `simd_shuffle_xor`, the combine as `maximum`/`minimum` say."""
        found = {
            _shuffle_helper(e): e
            for e in all_expressions(kernel.body)
            if isinstance(e, WarpReduce) and e.lanes < WARP
        }
        lines: list[str] = []
        for name, e in sorted(found.items()):
            t = self.type_map[e.type]
            if e.op == "add":
                both = "int(uint(x) + uint(y))" if e.type == "i32" else "x + y"
            elif e.type == "f32" and e.op != "fmax":  # `fmax`: Metal's, nan unspecified
                nan = " || ".join(self.intrinsics["isnan"].format(v) for v in "xy")
                both = f"({nan}) ? as_type<float>(0x7fc00000u) : {e.op}(x, y)"
            else:
                both = f"{e.op}(x, y)"
            lines += [
                f"static inline {t} {self.names(name)}({t} x) {{",
                f"    for (ushort m = {e.lanes // 2}; m > 0; m >>= 1) {{",
                f"        const {t} y = simd_shuffle_xor(x, m);",
                f"        x = {both};",
                "    }",
                "    return x;",
                "}",
                "",
            ]
        return lines

    def helper(self, h: Helper) -> list[str]:
        params = ", ".join(f"{self.type_map[p.type]} {self.names(p.name)}" for p in h.params)
        head = f"static inline {self.type_map[h.ret]} {self.names(h.name)}({params}) {{"
        return [head, *self.block(h.body, 1), "}", ""]

    def file(self, kernel: Kernel, entry: str, header: str) -> str:
        lines = [f"// {line}" for line in header.splitlines()]
        lines += ["#include <metal_stdlib>"]
        if any(
            isinstance(st, (SimdgroupLoad, SimdgroupStore)) for st in walk_statements(kernel.body)
        ):
            lines.append("#include <metal_simdgroup_matrix>")
        lines += ["using namespace metal;", ""]
        if kernel.uses_uniform:
            lines.append(f"struct {self.names('$Uniforms')} {{")
            for f, t in kernel.uniform_fields:
                lines.append(f"    {self.type_map[t]} {self.fields(f)};")
            lines += ["};", ""]
        for h in kernel.helpers:
            lines += self.helper(h)
        lines += self._shuffle_helpers(kernel)
        params = []
        # A kernel that hands data between threadgroups through a device fence (the
        # one-launch reduction's partials) declares what it writes `coherent(device)`
        # (MSL 3.2): without it a threadgroup's plain stores need not reach another
        # threadgroup of the same dispatch, whatever the fences say.
        handoff = any(isinstance(s, Fence) for s in walk_statements(kernel.body))
        for k, b in enumerate(kernel.buffers):
            const = "const " if b.access == "read" else ""
            t = self.type_map[b.elem]
            if b.atomic:  # Metal 3: atomic_int, atomic_uint, atomic_float
                t = _ATOMIC_TYPES[b.elem]
            space = "coherent(device) device" if handoff and not const else "device"
            params.append(f"{space} {const}{t}* {self.names(b.name)} [[buffer({k})]]")
        if kernel.uses_uniform:
            params.append(
                f"constant {self.names('$Uniforms')}& {self.names('$u')} "
                f"[[buffer({len(kernel.buffers)})]]"
            )
        attributes = {
            "local": ("$lid", "thread_position_in_threadgroup"),
            "group": ("$wid", "threadgroup_position_in_grid"),
            "groups": ("$nwg", "threadgroups_per_grid"),
        }
        for b in self.builtins_used(kernel):
            name, attribute = attributes[b]
            params.append(f"uint3 {self.names(name)} [[{attribute}]]")
        lines.append(f"kernel void {entry}(")
        lines += [f"    {p}{',' if k < len(params) - 1 else ''}" for k, p in enumerate(params)]
        lines.append(") {")
        for a in kernel.shared:
            t = self.type_map[a.elem]
            lines.append(f"    threadgroup {t} {self.names(a.name)}[{a.count}];")
        lines += self.block(kernel.body, 1)
        lines.append("}")
        return "\n".join(lines) + "\n"
