"""What every backend shares: capabilities, the namer, and a table-driven printer.

A backend subclass is mostly tables: `type_map`, `intrinsics` (IR intrinsic
name -> template), `binary_overrides` ((op, type) -> template, for
legalisation such as MSL's wrapping `int` arithmetic), the barrier text and
how a file is laid out around the kernel. `check` refuses a kernel the target
cannot hold (a dtype, an intrinsic, a resource limit) with a message naming the
construct; the caller turns it into a GPU070 diagnostic.

Every name the IR carries goes through one `Namer` per file: Python names are
kept when legal and renamed when they are a reserved word of the target or
collide (`kernel` -> `kernel_`), and internal names (`$t3`) never shadow user
names.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, replace

from mimir.codegen.ir import (
    Assign,
    AtomicAdd,
    Await,
    Barrier,
    Binary,
    Bitcast,
    Builtin,
    Call,
    Cast,
    Const,
    Expr,
    Fence,
    For,
    GlobalVectorLoad,
    GlobalVectorStore,
    Helper,
    If,
    Kernel,
    Let,
    Load,
    Publish,
    Retract,
    Return,
    Select,
    Stmt,
    Store,
    Unary,
    Uniform,
    Var,
    VarDecl,
    WarpReduce,
    all_expressions,
    lower_vectors,
    walk_statements,
)
from mimir.codegen.lower import with_exact_half, with_helpers_for, with_reduced_trig

_ARITH = ("+", "-", "*", "/", "%")
_BITWISE = ("<<", ">>", "&", "|", "^")
_PREC = {
    "*": 80, "/": 80, "%": 80, "+": 70, "-": 70, "<<": 60, ">>": 60,
    "<": 50, "<=": 50, ">": 50, ">=": 50, "==": 45, "!=": 45,
    "&": 40, "^": 39, "|": 38, "&&": 30, "||": 29,
}  # fmt: skip
# the precedence of an atom and of a unary operation, as `expr` (and a target's `literal`)
# returns them beside its text
ATOM, UNARY = 100, 90


@dataclass(frozen=True)
class Capabilities:
    types: frozenset[str]
    max_invocations: int
    max_shared_bytes: int
    max_storage_buffers: int


@dataclass
class Printed:
    """One kernel file and what the manifest needs to know about it."""

    text: str
    entry_point: str
    bindings: list[tuple[str, int, int, str]]  # (buffer, group, binding, access)
    uniform_binding: tuple[int, int] | None
    data: bytes | None = None  # a binary file (SPIR-V); `text` is then its readable form


class Namer:
    """Unique, legal identifiers for one file."""

    def __init__(self, reserved: frozenset[str]) -> None:
        self.reserved = reserved
        self.taken: set[str] = set()
        self.names: dict[str, str] = {}

    def __call__(self, logical: str) -> str:
        if logical in self.names:
            return self.names[logical]
        base = re.sub(r"[^0-9A-Za-z_]", "_", logical.lstrip("$")) or "v"
        base = re.sub(r"__+", "_", base)
        if base[0].isdigit() or base == "_":
            base = "v" + base
        name = base
        if name in self.reserved or name in self.taken:
            name = base + "_"
            k = 1
            while name in self.reserved or name in self.taken:
                name = f"{base}_{k}"
                k += 1
        self.taken.add(name)
        self.names[logical] = name
        return name


def shortest_float(value: float) -> str:
    """The shortest decimal that reads back as the same f32."""
    f32 = struct.unpack("<f", struct.pack("<f", value))[0]
    for digits in range(1, 18):
        text = f"{f32:.{digits}g}"
        if struct.unpack("<f", struct.pack("<f", float(text)))[0] == f32:
            break
    if "e" not in text and "." not in text:
        text += ".0"
    return text


def lane(s: GlobalVectorLoad | GlobalVectorStore, k: int) -> Expr:
    """The index of lane `k` of a vector access."""
    return s.index if k == 0 else Binary("+", s.index, Const(k, "u32"), "u32")


def vector_index(s: GlobalVectorLoad | GlobalVectorStore) -> Expr:
    """The index of a vector access in an array of vectors (`index` is a multiple of 4)."""
    lanes = len(s.vars) if isinstance(s, GlobalVectorLoad) else len(s.values)
    shift = lanes.bit_length() - 1
    return Binary(">>", s.index, Const(shift, "u32"), "u32")


class Backend:
    name = ""
    extension = ""
    capabilities: Capabilities
    reserved: frozenset[str] = frozenset()
    type_map: dict[str, str] = {}
    intrinsics: dict[str, str] = {}
    binary_overrides: dict[tuple[str, str], str] = {}
    barrier = ""
    # a `Barrier(device=True)`, where it differs from `barrier`
    device_barrier = ""
    # Whether the target prints `WarpReduce` (warp shuffles, simdgroup functions); a
    # target without them gets `mimir.codegen.passes.workgroup_memory.to_workgroup_memory` first.
    warp_functions = False
    # Whether the target has a device-scope acquire-release fence (`Fence`) and atomics
    # that return the old value: then a split reduction is one launch whose last
    # workgroup combines the partials (`mimir.codegen.kernels.whole`).
    device_fence = False
    # Whether, without such a fence (WGSL: relaxed atomics only, `storageBarrier` is
    # workgroup-scope), the target prints a handoff of tagged atomic words (`Publish`,
    # `Await`, `Retract`): then a split reduction is one launch too.
    tagged_handoff = False
    # Whether one buffer may be read both 4 wide and one element at a time (a pointer
    # cast: PTX, MSL). Then a row of symbolic length goes 4 wide behind a run-time test
    # of the length (`kernels.loops.row_elements`); WGSL and SPIR-V declare a buffer as an
    # array of vectors or of scalars, so there a row goes 4 wide only when the checker
    # proves its length a multiple of 4.
    vector_views = False
    # statements printed as they are; the other vector and async ones are lowered first
    native_statements: tuple[type, ...] = ()
    # Whether the builtin sin and cos hold for every argument. Where they are specified
    # on [-pi, pi] only (WGSL, SPIR-V), `adapt` calls the `mimir_trig` helper instead.
    full_range_trig = True
    # Whether the f32 -> f16 conversion rounds to nearest even (PTX `cvt.rn.f16.f32`,
    # MSL's `half()`). Where the specification leaves it to the implementation (WGSL,
    # Vulkan SPIR-V), `adapt` rounds with the `mimir_round_f16` helper first.
    nearest_even_half = True
    # IR intrinsics the target has no instruction for, each called as the IR helper that
    # computes it (`mulhi` from 16-bit halves on WGSL)
    emulated: dict[str, str] = {}

    def __init__(self, math: str = "fast") -> None:
        # `--math fast|precise`: how PTX lowers exp, log, tanh, sigmoid and gelu (the
        # hardware's ex2/rcp, or correctly rounded sequences). The other backends print
        # their language's builtins, whose accuracy their spec states, in both modes.
        self.math = math

    # -- refusing

    def adapt(self, kernel: Kernel) -> Kernel:
        """The kernel as this backend prints it: f32 sin and cos by `with_reduced_trig`
        unless the target's builtins hold for every argument, f32 -> f16 conversions
        rounded by `with_exact_half` unless the target's round to nearest even, and the
        intrinsics it has no instruction for as helpers (`emulated`)."""
        if self.emulated:
            kernel = with_helpers_for(kernel, self.emulated)
        if not self.full_range_trig:
            kernel = with_reduced_trig(kernel)
        return kernel if self.nearest_even_half else with_exact_half(kernel)

    def check(self, kernel: Kernel) -> str | None:
        """Why this backend cannot emit `kernel`, or None."""
        kernel = self.adapt(kernel)
        caps = self.capabilities
        x, y, z = kernel.workgroup_size
        if x * y * z > caps.max_invocations:
            return f"a workgroup of {x * y * z} threads (at most {caps.max_invocations})"
        shared = kernel.shared_bytes
        if shared > caps.max_shared_bytes:
            return f"{shared} bytes of threadgroup memory (at most {caps.max_shared_bytes})"
        if len(kernel.buffers) > caps.max_storage_buffers:
            return (
                f"{len(kernel.buffers)} storage buffers in one kernel "
                f"(at most {caps.max_storage_buffers} are guaranteed)"
            )
        exprs = list(all_expressions(kernel.body))
        for h in kernel.helpers:
            exprs.extend(all_expressions(h.body))
        for e in exprs:
            if e.type not in caps.types:
                return f"the scalar type `{e.type}`"
            if isinstance(e, Call) and not any(e.fn == h.name for h in kernel.helpers):
                if e.fn not in self.intrinsics:
                    return f"the function `{e.fn}`"
        for b in kernel.buffers:
            if b.elem not in caps.types:
                return f"buffers of `{b.elem}`"
        statements = list(walk_statements(kernel.body))
        fence = any(isinstance(s, Fence) for s in statements)
        ticket = any(isinstance(s, AtomicAdd) and s.old is not None for s in statements)
        tagged = [s for s in statements if isinstance(s, (Publish, Await, Retract))]
        if (fence and not self.device_fence) or (ticket and not (self.device_fence or tagged)):
            return "a device-scope memory fence and a counter (a cross-workgroup handoff)"
        if tagged and not self.tagged_handoff:
            return "values handed between workgroups in tagged atomic words"
        for s in tagged:
            value = s.value if isinstance(s, Publish) else s.var if isinstance(s, Await) else None
            if value is not None and value.type not in ("f32", "i32", "u32"):
                return f"a `{value.type}` handed between workgroups (32-bit values only)"
        return None

    # -- printing expressions

    def literal(self, c: Const) -> tuple[str, int]:
        raise NotImplementedError

    def cast(self, e: str, t: str) -> str:
        return f"{self.type_map[t]}({e})"

    def bitcast(self, e: str, t: str) -> str:
        raise NotImplementedError

    def select(self, cond: str, a: str, b: str) -> str:
        raise NotImplementedError

    def builtin(self, name: str) -> str:
        axis = name[-1]
        base = {"local": "lid", "group": "wid", "groups": "nwg"}[name[:-2]]
        return f"{self.names('$' + base)}.{axis}"

    def uniform(self, field: str) -> str:
        return f"{self.names('$u')}.{self.fields(field)}"

    def expr(self, e: Expr) -> str:
        return self._expr(e)[0]

    def _expr(self, e: Expr) -> tuple[str, int]:
        if isinstance(e, Const):
            return self.literal(e)
        if isinstance(e, Var):
            return self.names(e.name), ATOM
        if isinstance(e, Load):
            return f"{self.names(e.array)}[{self.expr(e.index)}]", ATOM
        if isinstance(e, Uniform):
            return self.uniform(e.field), ATOM
        if isinstance(e, Builtin):
            return self.builtin(e.name), ATOM
        if isinstance(e, Cast):
            return self.cast(self.expr(e.a), e.type), ATOM
        if isinstance(e, Bitcast):
            return self.bitcast(self.expr(e.a), e.type), ATOM
        if isinstance(e, Select):
            parts = (self.expr(e.cond), self.expr(e.if_true), self.expr(e.if_false))
            return self.select(*parts), ATOM
        if isinstance(e, Call):
            args = [self.expr(a) for a in e.args]
            if e.fn in self.intrinsics:
                return self.intrinsics[e.fn].format(*args), ATOM
            return f"{self.names(e.fn)}({', '.join(args)})", ATOM
        if isinstance(e, Unary):
            inner, prec = self._expr(e.a)
            if prec < ATOM:
                inner = f"({inner})"
            return f"{e.op}{inner}", UNARY
        if isinstance(e, Binary):
            return self._binary(e)
        if isinstance(e, WarpReduce):
            return self.warp_reduce(e), ATOM
        raise TypeError(f"cannot print {e!r}")

    def warp_reduce(self, e: WarpReduce) -> str:
        raise TypeError(f"{self.name} has no warp functions: {e!r}")

    def _binary(self, e: Binary) -> tuple[str, int]:
        override = self.binary_overrides.get((e.op, e.a.type))
        if override is not None:
            return override.format(a=self.expr(e.a), b=self.expr(e.b)), ATOM
        prec = _PREC[e.op]
        parts = []
        for side, child in (("left", e.a), ("right", e.b)):
            text, cp = self._expr(child)
            child_op = child.op if isinstance(child, Binary) else None
            needs = cp < prec or (cp == prec and (side == "right" or e.op not in _ARITH))
            if e.op not in _ARITH and child_op is not None and child_op not in _ARITH:
                needs = True  # WGSL requires it; it reads better everywhere
            if e.op in _BITWISE and child_op is not None:
                needs = True  # WGSL: the operands of a shift or a bit operation are unary
            if cp == UNARY and text.startswith("-") and e.op in ("+", "-"):
                needs = True
            parts.append(f"({text})" if needs and cp < ATOM else text)
        return f"{parts[0]} {e.op} {parts[1]}", prec

    # -- printing statements

    def block(self, body: list[Stmt] | tuple[Stmt, ...], indent: int) -> list[str]:
        out: list[str] = []
        for s in body:
            out.extend(self.stmt(s, indent))
        return out

    def stmt(self, s: Stmt, indent: int) -> list[str]:
        pad = "    " * indent
        if isinstance(s, Let):
            return [pad + self.let(self.names(s.var.name), s.var.type, self.expr(s.value))]
        if isinstance(s, VarDecl):
            return [pad + self.var(self.names(s.var.name), s.var.type, self.expr(s.init))]
        if isinstance(s, Assign):
            return [f"{pad}{self.names(s.var.name)} = {self.expr(s.value)};"]
        if isinstance(s, Store):
            return [f"{pad}{self.names(s.array)}[{self.expr(s.index)}] = {self.expr(s.value)};"]
        if isinstance(s, AtomicAdd):
            return self.atomic_add(s, pad)
        if isinstance(s, (Publish, Await, Retract)):
            return self.handoff(s, pad)
        if isinstance(s, GlobalVectorLoad):
            return self.vector_load(s, pad)
        if isinstance(s, GlobalVectorStore):
            return self.vector_store(s, pad)
        if isinstance(s, If):
            lines = [f"{pad}if ({self.expr(s.cond)}) {{", *self.block(s.then, indent + 1)]
            if s.orelse:
                lines += [f"{pad}}} else {{", *self.block(s.orelse, indent + 1)]
            return [*lines, pad + "}"]
        if isinstance(s, For):
            head = self.for_head(self.names(s.var.name), s)
            return [f"{pad}{head} {{", *self.block(s.body, indent + 1), pad + "}"]
        if isinstance(s, Barrier):
            chosen = (self.device_barrier or self.barrier) if s.device else self.barrier
            return [pad + chosen]
        if isinstance(s, Fence):
            return [pad + self.fence()]
        if isinstance(s, Return):
            return [pad + ("return;" if s.value is None else f"return {self.expr(s.value)};")]
        raise TypeError(f"cannot print {s!r}")

    def let(self, name: str, t: str, value: str) -> str:
        raise NotImplementedError

    def vector_load(self, s: GlobalVectorLoad, pad: str) -> list[str]:
        """One scalar load per lane (a target with vector access overrides this)."""
        return [
            pad + self.let(self.names(v.name), v.type, self.expr(Load(s.array, lane(s, k), v.type)))
            for k, v in enumerate(s.vars)
        ]

    def vector_store(self, s: GlobalVectorStore, pad: str) -> list[str]:
        return [
            f"{pad}{self.names(s.array)}[{self.expr(lane(s, k))}] = {self.expr(v)};"
            for k, v in enumerate(s.values)
        ]

    def atomic_add(self, s: AtomicAdd, pad: str) -> list[str]:
        raise NotImplementedError

    def handoff(self, s: Publish | Await | Retract, pad: str) -> list[str]:
        """A tagged atomic word handoff (only where `tagged_handoff`)."""
        raise NotImplementedError

    def fence(self) -> str:
        """A device-scope acquire-release fence (only where `device_fence`)."""
        raise NotImplementedError

    def var(self, name: str, t: str, value: str) -> str:
        raise NotImplementedError

    def for_head(self, name: str, s: For) -> str:
        raise NotImplementedError

    # -- files

    def print_kernel(self, kernel: Kernel, header: str) -> Printed:
        kernel = self.adapt(kernel)
        kernel = replace(kernel, body=lower_vectors(kernel.body, self.native_statements))
        self.names = Namer(self.reserved)
        self.fields = Namer(self.reserved)
        for b in kernel.buffers:
            self.names(b.name)
        for f, _ in kernel.uniform_fields:
            self.fields(f)
        entry = self.names(kernel.name)
        for h in kernel.helpers:
            self.names(h.name)
        for internal in ("$Uniforms", "$u", "$lid", "$wid", "$nwg"):
            self.names(internal)
        self.prepare(kernel)
        bindings = [(b.name, 0, k, b.access) for k, b in enumerate(kernel.buffers)]
        uniform = (0, len(kernel.buffers)) if kernel.uses_uniform else None
        text = self.file(kernel, entry, header)
        return Printed(text, entry, bindings, uniform)

    def prepare(self, kernel: Kernel) -> None:
        """Register target-specific internal names (before any body is printed)."""

    def file(self, kernel: Kernel, entry: str, header: str) -> str:
        raise NotImplementedError

    def helper(self, h: Helper) -> list[str]:
        raise NotImplementedError

    def builtins_used(self, kernel: Kernel) -> list[str]:
        names = {e.name for e in all_expressions(kernel.body) if isinstance(e, Builtin)}
        order = ("local", "group", "groups")
        return [b for b in order if any(n.rsplit("_", 1)[0] == b for n in names)]
