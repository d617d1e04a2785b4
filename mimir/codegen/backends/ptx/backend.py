"""The PTX `Backend`: capabilities, refusals, and one file per kernel (see the package)."""

from __future__ import annotations

from dataclasses import replace

from mimir.codegen.backends.base import Backend, Capabilities, Namer, Printed
from mimir.codegen.backends.ptx.emit import (
    EXTREMUM_HELPERS,
    INLINED_HELPERS,
    NATIVE_HELPERS,
    Emitter,
    Memory,
    divisor_roots,
    divisors,
    refuse,
)
from mimir.codegen.backends.ptx.registers import Registers
from mimir.codegen.backends.ptx.tables import BUILTINS, ELEMENT_BYTES, PTX_INTRINSICS
from mimir.codegen.ir import (
    INTRINSICS,
    Builtin,
    CopyAsync,
    Helper,
    Kernel,
    LoadMatrix,
    MmaSync,
    SharedVectorLoad,
    Uniform,
    WarpgroupMma,
    all_expressions,
    lower_vectors,
    walk_statements,
)
from mimir.codegen.refusal import RefusalError

PTX_VERSION = "7.0"
PTX_TARGET = "sm_70"
# a kernel that stages through `cp.async` (the matmul) or multiplies on tensor cores
# (`mma.sync ... .tf32` with `cvt.rna.tf32.f32` under `@gpu(precision="tf32")`, or
# `mma.sync ... .f16` / `.bf16` with `cvt.rn.f16x2.f32`) needs Ampere or newer
PTX_ASYNC_TARGET = "sm_80"
# a matmul on warpgroup tensor cores (`wgmma.mma_async`, `WarpgroupMma`) needs Hopper's
# architecture-specific target, which PTX ISA 8.0 introduced
PTX_WGMMA_VERSION, PTX_WGMMA_TARGET = "8.0", "sm_90a"

_TYPES = {"bool": "pred", "i32": "s32", "u32": "u32", "f32": "f32", "f16": "b16"}
_PARAM_TYPES = {"i32": ".b32", "u32": ".b32", "f32": ".f32"}
_UNIFORM_LOAD = {"u32": "u32", "i32": "s32", "f32": "f32"}

# PTX opcodes, directive words and special-register names: legal identifiers
# for ptxas, but confusing in a listing, so the Namer keeps user names off them.
_RESERVED = """abs activemask add addc alloca and applypriority atom bar barrier bfe bfi bfind
bmsk bra brev brkpt brx call clz cnot copysign cos cp createpolicy cvt cvta discard div dp2a dp4a
elect ex2 exit fence fma fns getctarank griddepcontrol isspacep istypep ld ldmatrix ldu lg2 lop3
mad mad24 madc mapa match max mbarrier membar min mma mov movmatrix mul mul24 multimem nanosleep
neg not or pmevent popc prefetch prefetchu prmt rcp red redux rem ret rsqrt sad selp set
setmaxnreg setp shf shfl shl shr sin slct sqrt st stackrestore stacksave stmatrix sub subc suld
suq sured sust szext tanh testp tex tld4 trap txq vabsdiff vadd vmad vmax vmin vote vset vshl
vshr vsub wgmma wmma xor entry func param reg local global shared const version target
address_size align visible extern weak common maxntid reqntid minnctapersm pragma file loc
section tid ntid ctaid nctaid laneid warpid nwarpid smid nsmid gridid clock clock64 WARP_SZ
texref samplerref surfref pred b8 b16 b32 b64 u8 u16 u32 u64 s8 s16 s32 s64 f16 f16x2 f32 f64"""


class PTX(Backend):
    name = "ptx"
    extension = "ptx"
    capabilities = Capabilities(
        types=frozenset(_TYPES),
        max_invocations=1024,
        max_shared_bytes=48 * 1024,
        max_storage_buffers=256,  # 8-byte pointers in the 4 KiB parameter space, with room
    )
    reserved = frozenset(_RESERVED.split())
    type_map = _TYPES
    intrinsics = {fn: fn for fn in (*INTRINSICS, *PTX_INTRINSICS)}
    barrier = "bar.sync 0;"
    warp_functions = True  # `shfl.sync` (sm_30+, `.sync` since sm_70)
    device_fence = True  # `fence.acq_rel.gpu` (PTX 6.0, sm_70) and `atom`
    vector_views = True  # `ld.global.v4` at any 16-byte aligned address

    # -- refusing

    def check(self, kernel: Kernel) -> str | None:
        why = super().check(kernel)
        if why is not None:
            return why
        x, y, z = kernel.workgroup_size
        if x > 1024 or y > 1024 or z > 64:
            return f"a block of {x}x{y}x{z} threads (at most 1024x1024x64, 1024 in all)"
        shared = sum(a.count * ELEMENT_BYTES[a.elem] for a in kernel.shared)
        if shared > self.capabilities.max_shared_bytes:
            return f"{shared} bytes of shared memory (at most {self.capabilities.max_shared_bytes})"
        try:
            self.print_kernel(kernel, "")  # the emitter refuses what it cannot print
        except RefusalError as err:
            return err.message.removeprefix("the PTX backend cannot emit ")
        return None

    # -- printing

    def print_kernel(self, kernel: Kernel, header: str) -> Printed:
        self.names = Namer(self.reserved)
        for b in kernel.buffers:
            self.names(b.name)
        entry = self.names(kernel.name)
        for h in kernel.helpers:
            self.names(h.name)
        uniform_param = self.names("$mimir_uniforms")
        shared = {a.name: self.names(a.name) for a in kernel.shared}
        bindings = [(b.name, 0, k, b.access) for k, b in enumerate(kernel.buffers)]
        uniform = (0, len(kernel.buffers)) if kernel.uses_uniform else None
        lines = [f"// {line}" for line in header.splitlines()]
        target = PTX_ASYNC_TARGET if needs_sm80(kernel) else PTX_TARGET
        version = PTX_VERSION
        if uses_warpgroups(kernel):
            version, target = PTX_WGMMA_VERSION, PTX_WGMMA_TARGET
        if not uses_async(kernel):  # no copy to wait for (a wait needs sm_80 too)
            kernel = replace(kernel, body=lower_vectors(kernel.body, keep=(SharedVectorLoad,)))
        lines += [f".version {version}", f".target {target}", ".address_size 64", ""]
        helpers = [h for h in kernel.helpers if not self._inlined(h.name)]
        signatures = self._signatures(helpers)
        for h in helpers:
            lines += self._helper(h, signatures)
        lines += self._entry(kernel, entry, uniform_param, shared, signatures)
        return Printed("\n".join(lines) + "\n", entry, bindings, uniform)

    def _inlined(self, name: str) -> bool:
        if self.math == "fast" and name in INLINED_HELPERS:
            return True
        return name in EXTREMUM_HELPERS or name in NATIVE_HELPERS

    def _signatures(self, helpers: list[Helper]) -> dict[str, tuple[str, str, tuple[str, ...]]]:
        out = {}
        for h in helpers:
            types = (h.ret, *(p.type for p in h.params))
            bad = [t for t in types if t not in _PARAM_TYPES]
            if bad:
                raise refuse(f"the helper `{h.name}`, which takes or returns `{bad[0]}`")
            out[h.name] = (self.names(h.name), h.ret, tuple(p.type for p in h.params))
        return out

    def _helper(self, h: Helper, signatures: dict) -> list[str]:
        regs = Registers()
        ret = "%ret"
        params = [f"%a{k}" for k in range(len(h.params))]
        em = Emitter(regs, {}, {}, {}, signatures, return_register=ret, math=self.math)
        for p, reg in zip(h.params, params, strict=True):
            em.env[p.name] = reg
        em.block(h.body)
        em.end()
        decl = ", ".join(
            f".reg {_PARAM_TYPES[p.type]} {r}" for p, r in zip(h.params, params, strict=True)
        )
        head = f".func (.reg {_PARAM_TYPES[h.ret]} {ret}) {self.names(h.name)}({decl})"
        return [head, "{", *regs.declarations(), *em.lines, "}", ""]

    def _entry(
        self,
        kernel: Kernel,
        entry: str,
        uniform_param: str,
        shared: dict[str, str],
        signatures: dict,
    ) -> list[str]:
        regs = Registers()
        prologue = Emitter(regs, {}, {}, {}, {}, math=self.math)
        # a buffer read or written 16 bytes at a time is declared 16-byte aligned (the
        # manifest's `vectorized` says hosts must pass it so)
        vector = {name for name, *_ in kernel.vectorized}
        params = [
            f"    .param .u64 .ptr .global .align {16 if b.name in vector else 4} "
            f"{self.names(b.name)}"
            for b in kernel.buffers
        ]
        memory: dict[str, Memory] = {}
        for b in kernel.buffers:
            generic, base = regs.new("b64"), regs.new("b64")
            prologue.ins(f"ld.param.u64 {generic}, [{self.names(b.name)}]")
            prologue.ins(f"cvta.to.global.u64 {base}, {generic}")
            memory[b.name] = Memory("global", base, b.elem, readonly=b.access == "read")
        decls = []
        # `ld.shared.v4` and `ldmatrix` rows need 16-byte alignment
        vectors = {
            s.array
            for s in walk_statements(kernel.body)
            if isinstance(s, (SharedVectorLoad, LoadMatrix))
        }
        # a wgmma operand's core matrices: 128 bytes each, at 16-byte aligned addresses
        vectors |= {
            a
            for s in walk_statements(kernel.body)
            if isinstance(s, WarpgroupMma)
            for a in (s.a_array, s.b_array)
        }
        for a in kernel.shared:
            size = ELEMENT_BYTES[a.elem] * a.count
            align = 16 if a.name in vectors else 4  # `ld.shared.v4` needs 16-byte alignment
            decls.append(f"    .shared .align {align} .b8 {shared[a.name]}[{size}];")
            base = regs.new("b32")
            prologue.ins(f"mov.u32 {base}, {shared[a.name]}")
            memory[a.name] = Memory("shared", base, a.elem, symbol=shared[a.name])
        exprs = list(all_expressions(kernel.body))
        used_fields = {e.field for e in exprs if isinstance(e, Uniform)}
        uniforms: dict[str, str] = {}
        if kernel.uses_uniform:
            size = 4 * len(kernel.uniform_fields)
            size = max(16, size + (-size % 16))
            params.append(f"    .param .align 16 .b8 {uniform_param}[{size}]")
            for k, (field, t) in enumerate(kernel.uniform_fields):
                if field in used_fields:
                    r = regs.of_type(t)
                    offset = f"+{4 * k}" if k else ""
                    prologue.ins(f"ld.param.{_UNIFORM_LOAD[t]} {r}, [{uniform_param}{offset}]")
                    uniforms[field] = r
        builtins: dict[str, str] = {}
        for name in sorted({e.name for e in exprs if isinstance(e, Builtin)}):
            if name not in BUILTINS:
                raise refuse(f"the builtin `{name}`")
            r = regs.new("b32")
            prologue.ins(f"mov.u32 {r}, {BUILTINS[name]}")
            builtins[name] = r
        body = Emitter(regs, memory, uniforms, builtins, signatures, math=self.math)
        body.divisor_roots = divisor_roots(kernel.body)
        body.divisors = divisors(kernel.body)
        body.block(kernel.body)
        body.end()
        x, y, z = kernel.workgroup_size
        head = [f".visible .entry {entry}("]
        head += [p + ("," if k < len(params) - 1 else "") for k, p in enumerate(params)]
        head += [")", f".reqntid {x}, {y}, {z}", "{"]
        return [*head, *regs.declarations(), *decls, *prologue.lines, *body.lines, "}"]


def uses_async(kernel: Kernel) -> bool:
    """Whether the kernel copies through `cp.async` (and so targets sm_80)."""
    return any(isinstance(s, CopyAsync) for s in walk_statements(kernel.body))


def uses_tensor_cores(kernel: Kernel) -> bool:
    """Whether the kernel multiplies with `mma.sync` (TF32, float16 or bfloat16; sm_80)."""
    return any(isinstance(s, MmaSync) for s in walk_statements(kernel.body))


def uses_warpgroups(kernel: Kernel) -> bool:
    """Whether the kernel multiplies with `wgmma` (float16 or bfloat16; sm_90a)."""
    return any(isinstance(s, WarpgroupMma) for s in walk_statements(kernel.body))


def needs_sm80(kernel: Kernel) -> bool:
    return uses_async(kernel) or uses_tensor_cores(kernel)
