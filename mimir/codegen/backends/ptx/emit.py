"""Lowering kernel-IR bodies to PTX instructions: expressions, statements, control flow.

`Emitter` turns one IR body (a kernel's or a helper's) into PTX lines over
fresh virtual registers (`mimir.codegen.backends.ptx.registers`). Expressions become
three-address instructions and yield an operand (a register, or an immediate
where PTX takes one); statements become instructions, predicated branches and
labels. It prints the IR; it never re-derives what the IR means. The IR's
semantics (`mimir.codegen.ir`) and how they are kept:

- `+ - *` on i32/u32 are `add`/`sub`/`mul.lo`, which wrap; `/` and `%` are
  `div`/`rem`, which truncate; shifts mask their amount to 0..31 (WGSL's rule;
  PTX itself clamps);
- float `+ - * /` carry `.rn`: without a rounding modifier ptxas may fuse a
  multiply and an add into one `fma`, which rounds differently from the shim;
  `/` is `div.rn.f32`, IEEE division (fast math: `div.full.f32`, within 2 ulp; by a
  literal power of two: a multiply by its exact reciprocal); subnormals are kept (no `.ftz`);
- float comparisons are ordered (false on nan) except `!=`, which is `neu`;
- float16 values are held as `.b16` bits; arithmetic on them goes through
  f32 and rounds back once (`cvt.rn.f16.f32`), which is the correctly
  rounded half result for `+ - * /`;
- exp, log, tanh, sin, cos and pow are the sequences of `mimir.codegen.backends.ptx.mathlib`,
  the fast ones by default (`ex2.approx.ftz`, `rcp.approx.ftz`; sigmoid, tanh and gelu
  inlined instead of called) and the correctly rounded ones with `--math precise`;
  sqrt is `sqrt.rn.f32` (fast math: `1 / sqrt(y)`, how `rsqrt` lowers, is
  `rsqrt.approx.f32`, CUDA's rsqrtf: within 2 ulp, and `x / sqrt(y)` is `x * rsqrt(y)`,
  within 3 ulp; a square root bound by a `Let` and read only as a divisor, as a row's
  `sqrt(mean(x * x) + eps)`, is computed as that rsqrt once: `divisor_roots`), floor
  `cvt.rmi.f32.f32`;
- `WarpReduce` is `shfl.sync.bfly.b32` rounds within its lanes (`warp_reduce`);
- `MmaSync` is `mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32` on operands rounded
  with `cvt.rna.tf32.f32`, or `mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`
  (`.bf16.bf16`) on operands packed in pairs with `cvt.rn.f16x2.f32` (`mma`; sm_80);
- `WarpgroupMma` is `wgmma.mma_async.sync.aligned.m64nNk16.f32.f16.f16` (`.bf16.bf16`)
  between `wgmma.fence` and `wgmma.commit_group` / `wgmma.wait_group 0`, its operands'
  matrix descriptors built from their shared addresses (`wgmma`; sm_90a), and
  `AsyncProxyFence` is `fence.proxy.async.shared::cta`;
- `If` is a predicated branch around its blocks, `For` a loop whose bound and
  step are evaluated at every iteration (as C does), `Barrier` is
  `bar.sync 0`, and `Return` is `ret` (from a helper, after moving the value
  into its return register).
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass

from mimir.codegen.backends.ptx import mathlib
from mimir.codegen.backends.ptx.registers import CLASS_OF, Registers
from mimir.codegen.backends.ptx.tables import (
    ARITH,
    COMPARE,
    ELEMENT_BYTES,
    MEMORY_TYPE,
    MOV,
    SHIFTS,
    SIMPLE_INTRINSICS,
    TYPE,
)
from mimir.codegen.ir import (
    COMPARISONS,
    Assign,
    AsyncProxyFence,
    AtomicAdd,
    Barrier,
    Binary,
    Bitcast,
    Builtin,
    Call,
    Cast,
    Const,
    CopyAsync,
    Expr,
    Fence,
    For,
    GlobalVectorLoad,
    GlobalVectorStore,
    If,
    Let,
    Load,
    LoadMatrix,
    MmaSync,
    PackHalves,
    Return,
    Select,
    SharedVectorLoad,
    Stmt,
    Store,
    Unary,
    Uniform,
    Var,
    VarDecl,
    WaitAsync,
    WarpgroupMma,
    WarpReduce,
    all_expressions,
    walk_statements,
)
from mimir.codegen.refusal import BACKEND_CANNOT_EMIT, RefusalError

__all__ = ["EXTREMUM_HELPERS", "INLINED_HELPERS", "NATIVE_HELPERS", "Emitter", "Memory", "refuse"]

# With fast math these IR helpers (`mimir.codegen.helpers`, f32 -> f32) are not called:
# their `mathlib` fast sequence is inlined where the call was.
INLINED_HELPERS = {"mimir_sigmoid": "sigmoid", "mimir_tanh": "tanh", "mimir_gelu": "gelu"}
# In either mode the f32 `maximum`/`minimum` helpers are printed where they are called, as a
# compare, a select and a nan fix-up (four instructions, no branch, no call).
EXTREMUM_HELPERS = {"mimir_maximum_f32": "ge", "mimir_minimum_f32": "le"}
# IR helpers one PTX instruction already computes, printed in place of the call:
# `sqrt.rn.f32` of a negative number is nan, as the `mimir_sqrt` helper's guard makes it.
NATIVE_HELPERS = {"mimir_sqrt": "sqrt.rn.f32"}

# `WarpReduce` (op, type) -> the instruction combining two lanes' values
_WARP_COMBINE = {
    **{("add", t): f"add.{TYPE[t]}" for t in ("i32", "u32")},
    ("add", "f32"): "add.rn.f32",
    **{(op, t): f"{op}.{TYPE[t]}" for op in ("max", "min") for t in ("i32", "u32", "f32")},
    ("fmax", "f32"): "max.f32",  # a nan is dropped: `fmax` leaves it unspecified
}
# an unpredicated instruction's opcode, its destination register and its sources
_DEFINES = re.compile(r"^    ([a-z][\w.]*) (%\w+), (.*);$")


def refuse(what: str) -> RefusalError:
    return RefusalError(BACKEND_CANNOT_EMIT, f"the PTX backend cannot emit {what}")


@dataclass(frozen=True)
class Memory:
    """A buffer (`global`, base address in a register) or a shared array (`shared`)."""

    space: str
    base: str  # register holding the address (b64 global, b32 shared)
    elem: str  # IR storage type
    readonly: bool = False
    symbol: str = ""  # the shared array's name, for constant offsets


def _f16_bits(value: float) -> str:
    """The bits of `value` rounded to half (inf past the half range), as `0xXXXX`."""
    try:
        bits = struct.unpack("<H", struct.pack("<e", value))[0]
    except OverflowError:
        bits = 0x7C00 if value > 0 else 0xFC00
    return f"0x{bits:04X}"


def _divisor_root(e: Binary) -> Expr | None:
    """`y` when `e` is float32 `x / sqrt(y)` (`1 / sqrt(y)` is how `rsqrt` lowers), else None."""
    root = e.b
    if e.op != "/" or e.type != "f32":
        return None
    if isinstance(root, Call) and root.fn == "mimir_sqrt" and root.args[0].type == "f32":
        return root.args[0]
    return None


def divisor_roots(body: list[Stmt] | tuple[Stmt, ...]) -> set[str]:
    """The float32 square roots bound by a `Let` that the body reads only as a divisor
    (`x / s`, `1 / s`): under fast math the emitter computes their `rsqrt.approx.f32` once
    instead, and each division is a multiply by it. `x * rsqrt(y)` keeps `x / sqrt(y)`'s
    special values (nan below 0 and for `0 / sqrt(0)`, `inf / sqrt(inf)`; signed zeros and
    infinities; rsqrt of -0 is -inf) and its error is rsqrt's 2^-22.9 and one rounding,
    within 3 ulp, against `div.full`'s 2 ulp after `sqrt.rn`: one MUFU per row instead of a
    division per element."""
    roots = {
        s.var.name
        for s in walk_statements(body)
        if isinstance(s, Let)
        and isinstance(s.value, Call)
        and s.value.fn == "mimir_sqrt"
        and s.value.type == "f32"
        and s.value.args[0].type == "f32"
    }
    return {name for name, n in _only_divisors(body, roots).items() if n >= 1}


def divisors(body: list[Stmt] | tuple[Stmt, ...]) -> set[str]:
    """The float32 values bound by a `Let` (but square roots, `divisor_roots`) that the body
    reads only as a divisor, in at least two divisions (a softmax's row sum, a row's total
    that shares divide by): under fast math the emitter computes `1 / y` once
    (`div.full.f32`, 2 ulp) and each division is a multiply by it, as CUDA's
    `__fdividef` is a multiply by a reciprocal: within 3 ulp where 1/y is a normal float32
    (2^-126 <= |y| <= 2^126), the division's special values (y zero, infinite or nan;
    signed zeros) otherwise."""
    lets = {
        s.var.name
        for s in walk_statements(body)
        if isinstance(s, Let)
        and s.var.type == "f32"
        and not (isinstance(s.value, Call) and s.value.fn == "mimir_sqrt")
    }
    return {name for name, n in _only_divisors(body, lets).items() if n >= 2}


def _only_divisors(body: list[Stmt] | tuple[Stmt, ...], names: set[str]) -> dict[str, int]:
    """Of the variables `names`, those the body reads only as the divisor of a float32
    division: how many divisions read each."""
    if not names:
        return {}
    reads: dict[str, int] = {}
    divisions: dict[str, int] = {}
    for e in all_expressions(body):
        if isinstance(e, Var) and e.name in names:
            reads[e.name] = reads.get(e.name, 0) + 1
        elif isinstance(e, Binary) and e.op == "/" and isinstance(e.b, Var) and e.b.name in names:
            if e.type == "f32":
                divisions[e.b.name] = divisions.get(e.b.name, 0) + 1
    return {name: n for name, n in divisions.items() if reads.get(name, 0) == n}


def _exact_reciprocal(divisor: Expr | None) -> str | None:
    """The f32 immediate `1/d` when `divisor` is a literal power of two whose reciprocal is a
    normal float32: then `x * (1/d)` and `x / d` are the same correctly rounded value."""
    if not isinstance(divisor, Const) or divisor.type != "f32":
        return None
    d = float(divisor.value)
    if not math.isfinite(d) or d == 0:
        return None
    mantissa, exponent = math.frexp(abs(d))
    if mantissa != 0.5 or not -126 <= 1 - exponent <= 127:
        return None
    return mathlib.F32(1.0 / d).text()


# ---------------------------------------------------------------- the emitter


class Emitter:
    """PTX lines for one function body over `regs`.

    `memory` (buffers and shared arrays), `uniforms` and `builtins` (registers
    loaded in the kernel's prologue) and `helpers` are what the body can name;
    `return_register` is set when the body is a helper's.
    """

    def __init__(
        self,
        regs: Registers,
        memory: Mapping[str, Memory],
        uniforms: Mapping[str, str],
        builtins: Mapping[str, str],
        helpers: Mapping[str, tuple[str, str, tuple[str, ...]]],
        return_register: str | None = None,
        math: str = "fast",
    ) -> None:
        self.math = math  # `fast` or `precise`: which `mathlib` sequences are inlined
        self.regs = regs
        self.memory = memory
        self.uniforms = uniforms
        self.builtins = builtins
        self.helpers = helpers  # IR name -> (PTX name, return type, parameter types)
        self.return_register = return_register
        self.lines: list[str] = []
        self.env: dict[str, str] = {}
        self.mutable: set[str] = set()
        # (shared base register, index register) -> the register holding that address, so
        # `array[i + c]` for many c is one `mad` and immediate offsets; entries made inside
        # a block are dropped when it ends (they may not have run on the path after it)
        self.addresses: dict[tuple[str, str], str] = {}
        # f32 register -> the `.b32` register holding it rounded to TF32 (`tf32`), same scoping
        self.converted: dict[str, str] = {}
        # fast math: `Let` names of square roots read only as divisors (`divisor_roots`),
        # and for each one bound so far the register holding its rsqrt
        self.divisor_roots: set[str] = set()
        self.reciprocals: dict[str, str] = {}
        # ... and of other values read only as divisors (`divisors`): their `1 / y` register
        self.divisors: set[str] = set()

    # -- output

    def ins(self, text: str) -> None:
        self.lines.append(f"    {text};")

    def end(self) -> None:
        """Close the body: `ret`, unless it already ends in one."""
        if not self.lines or self.lines[-1] != "    ret;":
            self.ins("ret")

    def put_label(self, name: str) -> None:
        self.lines.append(f"{name}:")

    def comment(self, text: str) -> None:
        self.lines.append(f"    // {text}")

    # -- operands

    def new(self, ir_type: str) -> str:
        return self.regs.of_type(ir_type)

    def reg(self, e: Expr) -> str:
        """`e` in a register (immediates are moved into one)."""
        op = self.expr(e)
        if op.startswith("%"):
            return op
        return self.materialise(op, e.type)

    def materialise(self, op: str, ir_type: str) -> str:
        cls = CLASS_OF[ir_type]
        r = self.regs.new(cls)
        self.ins(f"{MOV[cls]} {r}, {op}")
        return r

    def literal(self, c: Const) -> str:
        v, t = c.value, c.type
        if t == "bool":
            return self.materialise("1" if v else "0", "bool")
        if t == "u32":
            return str(int(v) & 0xFFFFFFFF)
        if t == "i32":
            return str(int(v))
        if t == "f32":
            return mathlib.F32(float(v)).text()
        if t == "f16":
            bits = "0x7E00" if math.isnan(v) else _f16_bits(float(v))
            return self.materialise(bits, "f16")
        raise refuse(f"a constant of type `{t}`")

    # -- expressions

    def expr(self, e: Expr) -> str:
        if isinstance(e, Const):
            return self.literal(e)
        if isinstance(e, Var):
            if e.name not in self.env:
                raise refuse(f"a read of `{e.name}` before it is defined")
            return self.env[e.name]
        if isinstance(e, Load):
            return self.load(e)
        if isinstance(e, Uniform):
            if e.field not in self.uniforms:
                raise refuse(f"the uniform field `{e.field}` here")
            return self.uniforms[e.field]
        if isinstance(e, Builtin):
            if e.name not in self.builtins:
                raise refuse(f"the builtin `{e.name}` here")
            return self.builtins[e.name]
        if isinstance(e, Binary):
            return self.binary(e)
        if isinstance(e, Unary):
            return self.unary(e)
        if isinstance(e, Call):
            return self.call(e)
        if isinstance(e, Select):
            return self.select(e)
        if isinstance(e, Cast):
            return self.cast(self.expr(e.a), e.a.type, e.type)
        if isinstance(e, Bitcast):
            return self.bitcast(e)
        if isinstance(e, WarpReduce):
            return self.warp_reduce(e)
        raise refuse(f"the expression {type(e).__name__}")

    def address(self, array: str, index: Expr) -> tuple[Memory, str]:
        mem = self.memory.get(array)
        if mem is None:
            raise refuse(f"an access to `{array}`, which the kernel does not bind")
        size = ELEMENT_BYTES[mem.elem]
        if isinstance(index, Const) and 0 <= int(index.value) * size < 2**31:
            offset = int(index.value) * size
            base = mem.symbol if mem.space == "shared" else mem.base
            return mem, f"[{base}+{offset}]" if offset else f"[{base}]"
        if mem.space == "shared":
            # shared addresses are 32 bits, so (i + c) * size + base wraps as i * size + base
            # + c * size does: a literal part of the index is an immediate offset
            offset = 0
            if isinstance(index, Binary) and index.op == "+" and isinstance(index.b, Const):
                offset = int(index.b.value) * size
                if 0 <= offset < 2**24:
                    index = index.a
                else:
                    offset = 0
            idx = self.reg(index)
            a = self.addresses.get((mem.base, idx))
            if a is None:
                a = self.regs.new("b32")
                self.ins(f"mad.lo.u32 {a}, {idx}, {size}, {mem.base}")
                if idx not in self.mutable:
                    self.addresses[(mem.base, idx)] = a
            return mem, f"[{a}+{offset}]" if offset else f"[{a}]"
        idx = self.reg(index)
        wide, a = self.regs.new("b64"), self.regs.new("b64")
        self.ins(f"mul.wide.{'s32' if index.type == 'i32' else 'u32'} {wide}, {idx}, {size}")
        self.ins(f"add.s64 {a}, {mem.base}, {wide}")
        return mem, f"[{a}]"

    def load(self, e: Load) -> str:
        mem, addr = self.address(e.array, e.index)
        nc = ".nc" if mem.space == "global" and mem.readonly else ""
        if e.type == "bool":
            bits = self.regs.new("b32")
            self.ins(f"ld.{mem.space}{nc}.u32 {bits}, {addr}")
            d = self.regs.new("pred")
            self.ins(f"setp.ne.u32 {d}, {bits}, 0")
            return d
        d = self.new(e.type)
        self.ins(f"ld.{mem.space}{nc}.{MEMORY_TYPE[e.type]} {d}, {addr}")
        return d

    def to_f32(self, e: Expr) -> str:
        """An f16 expression widened to an f32 register (exact)."""
        return self.cast(self.expr(e), "f16", "f32")

    def binary(self, e: Binary) -> str:
        op, t = e.op, e.a.type
        if t == "f16" and op not in ("&&", "||"):
            a, b = self.to_f32(e.a), self.to_f32(e.b)
            result = self._binary_on(op, "f32", a, b)
            return result if e.type == "bool" else self.cast(result, "f32", "f16")
        if self.math == "fast":  # x / sqrt(y) as x * rsqrt(y), CUDA's rsqrtf (`divisor_roots`)
            rsqrt = None
            if isinstance(e.b, Var) and e.b.name in self.reciprocals:
                rsqrt = self.reciprocals[e.b.name]
            elif (root := _divisor_root(e)) is not None:
                rsqrt = self.new("f32")
                self.ins(f"rsqrt.approx.f32 {rsqrt}, {self.reg(root)}")
            if rsqrt is not None:
                if isinstance(e.a, Const) and e.a.value == 1.0:
                    return rsqrt
                return self._binary_on("*", "f32", self.expr(e.a), rsqrt)
        return self._binary_on(op, t, self.expr(e.a), self.expr(e.b), shift=e.b)

    def _binary_on(self, op: str, t: str, a: str, b: str, shift: Expr | None = None) -> str:
        """`a op b` on `t`; `shift` is the right operand's expression where it is known (a
        literal shift amount or divisor is printed as an immediate)."""
        if op in COMPARISONS:
            d = self.regs.new("pred")
            if t == "bool":
                if op not in ("==", "!="):
                    raise refuse(f"the ordering `{op}` on bool")
                self.ins(f"xor.pred {d}, {a}, {b}")
                if op == "==":
                    self.ins(f"not.pred {d}, {d}")
                return d
            cmp = "neu" if (t == "f32" and op == "!=") else COMPARE[op]
            self.ins(f"setp.{cmp}.{TYPE[t]} {d}, {a}, {b}")
            return d
        if (op, t) in SHIFTS:
            if isinstance(shift, Const):
                amount = str(int(shift.value) & 31)
            else:
                amount = self.regs.new("b32")
                self.ins(f"and.b32 {amount}, {b}, 31")
            d = self.regs.new("b32")
            self.ins(f"{SHIFTS[(op, t)]} {d}, {a}, {amount}")
            return d
        opcode = ARITH.get((op, t))
        if opcode is None:
            raise refuse(f"the operator `{op}` on `{t}`")
        if (op, t) == ("/", "f32"):
            reciprocal = _exact_reciprocal(shift)
            if reciprocal is not None:  # x / 2^k is x * 2^-k, both correctly rounded
                opcode, b = "mul.rn.f32", reciprocal
            elif self.math == "fast":
                opcode = "div.full.f32"  # 2 ulp over the whole range (PTX ISA), no slow path
        d = self.regs.new(CLASS_OF["bool" if t == "bool" else t])
        self.ins(f"{opcode} {d}, {a}, {b}")
        return d

    def unary(self, e: Unary) -> str:
        t = e.a.type
        if e.op == "!" and t == "bool":
            d = self.regs.new("pred")
            self.ins(f"not.pred {d}, {self.reg(e.a)}")
            return d
        if e.op == "~" and t in ("i32", "u32"):
            d = self.regs.new("b32")
            self.ins(f"not.b32 {d}, {self.reg(e.a)}")
            return d
        if e.op == "-" and t in ("f32", "i32"):
            d = self.new(t)
            self.ins(f"neg.{TYPE[t]} {d}, {self.reg(e.a)}")
            return d
        if e.op == "-" and t == "u32":
            d = self.regs.new("b32")
            self.ins(f"sub.u32 {d}, 0, {self.expr(e.a)}")
            return d
        if e.op == "-" and t == "f16":
            d = self.regs.new("b16")
            self.ins(f"xor.b16 {d}, {self.reg(e.a)}, 0x8000")  # flips the sign, nan too
            return d
        raise refuse(f"the unary operator `{e.op}` on `{t}`")

    def select(self, e: Select) -> str:
        cond = self.reg(e.cond)
        a, b = self.expr(e.if_true), self.expr(e.if_false)
        if e.type == "bool":
            t1, t2, n, d = (self.regs.new("pred") for _ in range(4))
            self.ins(f"and.pred {t1}, {cond}, {a}")
            self.ins(f"not.pred {n}, {cond}")
            self.ins(f"and.pred {t2}, {n}, {b}")
            self.ins(f"or.pred {d}, {t1}, {t2}")
            return d
        kind = {"i32": "b32", "u32": "b32", "f32": "f32", "f16": "b16"}[e.type]
        d = self.new(e.type)
        self.ins(f"selp.{kind} {d}, {a}, {b}, {cond}")
        return d

    def cast(self, op: str, src: str, dst: str) -> str:
        if src == dst or {src, dst} == {"i32", "u32"}:
            return op  # i32 <-> u32 reinterprets the bits: the same register
        if src == "bool":
            p = op if op.startswith("%") else self.materialise(op, "bool")
            one = {"f32": "0f3F800000", "f16": "0x3C00"}.get(dst, "1")
            zero = {"f32": "0f00000000", "f16": "0x0000"}.get(dst, "0")
            d = self.new(dst)
            kind = {"f32": "f32", "f16": "b16"}.get(dst, "b32")
            self.ins(f"selp.{kind} {d}, {one}, {zero}, {p}")
            return d
        if dst == "bool":
            if src == "f16":
                return self.cast(self.cast(op, "f16", "f32"), "f32", "bool")
            d = self.regs.new("pred")
            cmp = "neu" if src == "f32" else "ne"
            zero = "0f00000000" if src == "f32" else "0"
            self.ins(f"setp.{cmp}.{TYPE[src]} {d}, {op}, {zero}")
            return d
        if src == "f16" and dst != "f32":
            return self.cast(self.cast(op, "f16", "f32"), "f32", dst)
        if dst == "f16" and src != "f32":
            return self.cast(self.cast(op, src, "f32"), "f32", "f16")
        mode = {
            ("f32", "i32"): "cvt.rzi.s32.f32",
            ("f32", "u32"): "cvt.rzi.u32.f32",
            ("i32", "f32"): "cvt.rn.f32.s32",
            ("u32", "f32"): "cvt.rn.f32.u32",
            ("f32", "f16"): "cvt.rn.f16.f32",
            ("f16", "f32"): "cvt.f32.f16",
        }.get((src, dst))
        if mode is None:
            raise refuse(f"a conversion from `{src}` to `{dst}`")
        a = op if op.startswith("%") else self.materialise(op, src)
        d = self.new(dst)
        self.ins(f"{mode} {d}, {a}")
        return d

    def bitcast(self, e: Bitcast) -> str:
        src, dst = e.a.type, e.type
        a = self.reg(e.a)
        if src == dst or {src, dst} <= {"i32", "u32"}:
            return a
        d = self.new(dst)
        if {src, dst} <= {"i32", "u32", "f32"}:
            self.ins(f"mov.b32 {d}, {a}")
        elif src == "f16" and dst in ("i32", "u32"):
            self.ins(f"cvt.u32.u16 {d}, {a}")
        elif dst == "f16" and src in ("i32", "u32"):
            self.ins(f"cvt.u16.u32 {d}, {a}")
        else:
            raise refuse(f"a bit cast from `{src}` to `{dst}`")
        return d

    def call(self, e: Call) -> str:
        if self.math == "fast" and e.fn in INLINED_HELPERS:
            return self.sequence(INLINED_HELPERS[e.fn], [self.reg(a) for a in e.args])
        if e.fn in EXTREMUM_HELPERS and [a.type for a in e.args] == ["f32", "f32"]:
            return self.extremum(EXTREMUM_HELPERS[e.fn], self.reg(e.args[0]), self.reg(e.args[1]))
        if e.fn in NATIVE_HELPERS and [a.type for a in e.args] == ["f32"]:
            d = self.new("f32")
            self.ins(f"{NATIVE_HELPERS[e.fn]} {d}, {self.reg(e.args[0])}")
            return d
        if e.fn in self.helpers:
            name, ret, params = self.helpers[e.fn]
            args = []
            for a, t in zip(e.args, params, strict=True):
                args.append(self.reg(a) if a.type == t else self.cast(self.expr(a), a.type, t))
            d = self.new(ret)
            self.ins(f"call.uni ({d}), {name}, ({', '.join(args)})")
            return d
        types = {a.type for a in e.args}
        if types == {"f16"} and e.fn not in ("isnan", "isinf"):
            widened = Call(e.fn, tuple(Cast(a, "f32") for a in e.args), "f32")
            return self.cast(self.call(widened), "f32", "f16")
        if types == {"f16"}:
            return self.call(Call(e.fn, tuple(Cast(a, "f32") for a in e.args), e.type))
        t = e.args[0].type
        if e.fn == "exp2" and t == "f32":
            return self.exp2(self.reg(e.args[0]))
        if e.fn in mathlib.sequences(self.math) and t == "f32":
            return self.sequence(e.fn, [self.reg(a) for a in e.args])
        opcode = SIMPLE_INTRINSICS.get((e.fn, t))
        if opcode is None:
            raise refuse(f"the function `{e.fn}` on `{t}`")
        args = [self.expr(a) if len(e.args) > 1 else self.reg(a) for a in e.args]
        d = self.new(e.type)
        self.ins(f"{opcode} {d}, {', '.join(args)}")
        return d

    def exp2(self, t: str) -> str:
        """2^t: under fast math the hardware's `ex2.approx.ftz.f32` (2 ulp, 0 below 2^-126);
        under precise math e^(t ln 2) by the correctly rounded exp, whose argument's
        rounding adds |t| 2^-24 relative."""
        d = self.new("f32")
        if self.math == "fast":
            self.ins(f"ex2.approx.ftz.f32 {d}, {t}")
            return d
        self.ins(f"mul.rn.f32 {d}, {t}, 0f3F317218")
        return self.sequence("exp", [d])

    def extremum(self, cmp: str, a: str, b: str) -> str:
        """`maximum`/`minimum` as the IR helper defines them (`mimir.codegen.lower`): a nan
        operand gives nan, else `a` when `a >= b` (`<=` for minimum), so `-0` against `+0`
        keeps the first. The select is exact; a nan operand replaces it (`nan_wins`)."""
        first = self.regs.new("pred")
        d = self.new("f32")
        self.ins(f"setp.{cmp}.f32 {first}, {a}, {b}")
        self.ins(f"selp.f32 {d}, {a}, {b}, {first}")
        self.nan_wins(d, a, b)
        return d

    def nan_wins(self, d: str, a: str, b: str) -> None:
        """Overwrite `d`, the max or min of `a` and `b`, with nan when either is nan (their
        sum, `setp.nan` being true when either is): the IR's nan-propagating extremum."""
        nan = self.regs.new("pred")
        self.ins(f"setp.nan.f32 {nan}, {a}, {b}")
        self.ins(f"@{nan} add.rn.f32 {d}, {a}, {b}")

    def warp_reduce(self, e: WarpReduce) -> str:
        """Butterfly rounds within each group of `lanes` (five for 32): each lane takes the
        value of the lane whose id differs in one bit (`shfl.sync.bfly.b32`, all 32 lanes
        named in the member mask) and combines it with its own, so every lane of the group
        ends with the same result.

        `max`/`min` on f32 keep the IR's nan propagation: `max.f32` returns the number when
        one operand is nan, so a nan operand takes over (`nan_wins`)."""
        t = e.type
        if (e.op, t) not in _WARP_COMBINE:
            raise refuse(f"a warp `{e.op}` of `{t}`")
        acc = self.reg(e.value)
        mask = e.lanes // 2
        while mask >= 1:
            other, d = self.new(t), self.new(t)
            self.ins(f"shfl.sync.bfly.b32 {other}, {acc}, {mask}, 0x1f, 0xffffffff")
            self.ins(f"{_WARP_COMBINE[e.op, t]} {d}, {acc}, {other}")
            if t == "f32" and e.op in ("max", "min"):
                self.nan_wins(d, acc, other)
            acc = d
            mask //= 2
        return acc

    def sequence(self, name: str, args: list[str]) -> str:
        """Inline one `mathlib` sequence over `args`; the register holding its result."""
        seq = mathlib.Seq()
        inputs = [f"%in{k}" for k in range(len(args))]
        result = mathlib.sequences(self.math)[name](seq, *inputs)
        names = dict(zip(inputs, args, strict=True))
        accuracy = mathlib.accuracy(name, self.math)
        # (the comment names the module by the path it had when the snapshots were made:
        # emitted kernels stay byte-identical; it lives in `backends/ptx/mathlib.py`)
        self.comment(f"{name}: mimir.codegen.backends.ptx.mathlib, {self.math} math ({accuracy})")
        starts = {skip.start: skip for skip in seq.skips}
        ends: dict[int, str] = {}
        kinds = {op.dst: op.kind for op in seq.ops}
        for k, op in enumerate(seq.ops):
            skip = starts.get(k)
            if skip is not None:  # outputs start as 0, then a branch around the ops
                for out in skip.outputs:
                    names[out] = self.regs.new(kinds[out])
                    zero = "0f00000000" if kinds[out] == "f32" else "0"
                    self.ins(f"{MOV[kinds[out]]} {names[out]}, {zero}")
                ends[skip.end] = self.regs.label("skip")
                self.ins(f"@{names[skip.unless]} bra {ends[skip.end]}")
            if op.dst not in names:
                names[op.dst] = self.regs.new(op.kind)
            srcs = [s.text() if not isinstance(s, str) else names[s] for s in op.srcs]
            self.ins(f"{op.opcode} {names[op.dst]}, {', '.join(srcs)}")
            if k + 1 in ends:
                self.put_label(ends.pop(k + 1))
        return names[result]

    # -- statements

    def block(self, body: list[Stmt] | tuple[Stmt, ...]) -> None:
        for s in body:
            self.stmt(s)

    def stmt(self, s: Stmt) -> None:
        if isinstance(s, Let):
            if self.math == "fast" and s.var.name in self.divisor_roots:
                assert isinstance(s.value, Call)  # `divisor_roots`: a `mimir_sqrt` call
                r = self.new("f32")
                self.ins(f"rsqrt.approx.f32 {r}, {self.reg(s.value.args[0])}")
                self.reciprocals[s.var.name] = r
                return
            op = self.expr(s.value)
            if op in self.mutable:
                op = self.materialise(op, s.var.type)
            self.env[s.var.name] = op
            if self.math == "fast" and s.var.name in self.divisors:
                inverse = self.new("f32")  # `divisors`: 1 / y once, a multiply per division
                self.ins(f"div.full.f32 {inverse}, 0f3F800000, {op}")
                self.reciprocals[s.var.name] = inverse
        elif isinstance(s, VarDecl):
            r = self.new(s.var.type)
            self.ins(f"{MOV[CLASS_OF[s.var.type]]} {r}, {self.expr(s.init)}")
            self.env[s.var.name] = r
            self.mutable.add(r)
        elif isinstance(s, Assign):
            r = self.env.get(s.var.name)
            if r is None or r not in self.mutable:
                raise refuse(f"an assignment to `{s.var.name}`, which is not a variable")
            before = len(self.lines)
            self._assign(r, s.var.type, self.expr(s.value), before)
        elif isinstance(s, SharedVectorLoad):
            self.load_vector(s)
        elif isinstance(s, CopyAsync):
            self.copy_async(s)
        elif isinstance(s, WaitAsync):
            self.ins("cp.async.wait_all")
        elif isinstance(s, MmaSync):
            self.mma(s)
        elif isinstance(s, WarpgroupMma):
            self.wgmma(s)
        elif isinstance(s, AsyncProxyFence):
            self.ins("fence.proxy.async.shared::cta")
        elif isinstance(s, LoadMatrix):
            self.load_matrix(s)
        elif isinstance(s, PackHalves):
            if s.kind not in ("f16", "bf16") or s.var.type != "u32":
                raise refuse(f"a packing of two `{s.kind}` into `{s.var.type}`")
            self.env[s.var.name] = self.packed(s.kind, s.low, s.high)
        elif isinstance(s, Store):
            self.store(s)
        elif isinstance(s, GlobalVectorLoad):
            self.vector_load(s)
        elif isinstance(s, GlobalVectorStore):
            self.vector_store(s)
        elif isinstance(s, AtomicAdd):
            # `red` is `atom` without the old value (sm_20+; f32 adds since sm_20 as well);
            # both relaxed at gpu scope, as no `.sem` says
            mem, addr = self.address(s.array, s.index)
            if s.old is None:
                self.ins(f"red.global.add.{TYPE[mem.elem]} {addr}, {self.expr(s.value)}")
            else:
                if mem.elem != "u32":
                    raise refuse(f"an atomic add returning the old value of `{mem.elem}`")
                r = self.new("u32")
                self.ins(f"atom.global.add.u32 {r}, {addr}, {self.expr(s.value)}")
                self.env[s.old.name] = r
        elif isinstance(s, Fence):
            self.ins("fence.acq_rel.gpu")  # PTX ISA 6.0, sm_70
        elif isinstance(s, If):
            self.if_(s)
        elif isinstance(s, For):
            self.for_(s)
        elif isinstance(s, Barrier):
            self.ins("bar.sync 0")
        elif isinstance(s, Return):
            self.return_(s)
        else:
            raise refuse(f"the statement {type(s).__name__}")

    def _assign(self, r: str, t: str, value: str, before: int) -> None:
        """`r = value`; when the value's own last instruction defined it (a register no
        one else has seen), that instruction writes `r` instead of a `mov` after it."""
        if len(self.lines) > before:
            m = _DEFINES.match(self.lines[-1])
            if m and m.group(2) == value:
                self.lines[-1] = f"    {m.group(1)} {r}, {m.group(3)};"
                return
        self.ins(f"{MOV[CLASS_OF[t]]} {r}, {value}")

    def load_vector(self, s: SharedVectorLoad) -> None:
        """One `ld.shared.v2`/`.v4` into fresh registers (the IR promises the alignment)."""
        mem, addr = self.address(s.array, s.index)
        types = {v.type for v in s.vars}
        if mem.space != "shared" or len(s.vars) not in (2, 4) or types - {"f32", "i32", "u32"}:
            raise refuse(f"a vector load of {len(s.vars)} `{'/'.join(sorted(types))}` here")
        if types != {mem.elem} and types | {mem.elem} != {"i32", "u32"}:
            raise refuse(f"a vector load of `{'/'.join(sorted(types))}` from `{s.array}`")
        dsts = [self.new(v.type) for v in s.vars]
        self.ins(f"ld.shared.v{len(dsts)}.{MEMORY_TYPE[mem.elem]} {{{', '.join(dsts)}}}, {addr}")
        for v, d in zip(s.vars, dsts, strict=True):
            self.env[v.name] = d

    def tf32(self, e: Expr) -> str:
        """`e` (f32) rounded to TF32 in a `.b32` register (`cvt.rna.tf32.f32`, sm_80): to
        nearest, ties away from zero, the low 13 mantissa bits 0. A value read from an
        immutable register is converted once (`self.converted`, dropped when a block ends)."""
        src = self.reg(e)
        d = self.converted.get(src)
        if d is None:
            d = self.regs.new("b32")
            self.ins(f"cvt.rna.tf32.f32 {d}, {src}")
            if src not in self.mutable:
                self.converted[src] = d
        return d

    def packed(self, kind: str, low: Expr, high: Expr) -> str:
        """Two f32 values exact in `kind` (f16 or bf16) packed into one `.b32` register,
        `low` in the low half (`cvt.rn.f16x2.f32` / `cvt.rn.bf16x2.f32`, sm_80, whose first
        source goes to the upper half); a pair of immutable registers is packed once."""
        lo, hi = self.reg(low), self.reg(high)
        key = f"{kind}:{hi}:{lo}"
        d = self.converted.get(key)
        if d is None:
            d = self.regs.new("b32")
            self.ins(f"cvt.rn.{kind}x2.f32 {d}, {hi}, {lo}")
            if lo not in self.mutable and hi not in self.mutable:
                self.converted[key] = d
        return d

    def mma(self, s: MmaSync) -> None:
        """One warp's `mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32` or
        `mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32` (`.bf16.bf16`) (sm_80), the
        accumulator registers both C and D; the fragments are as `MmaSync` lays them out."""
        halves = s.kind in ("f16", "bf16")
        if s.kind != "tf32" and not halves:
            raise refuse(f"an `MmaSync` of kind `{s.kind}`")
        packed = halves and len(s.a) == 4 and all(e.type == "u32" for e in (*s.a, *s.b))
        n_a, n_b = (4, 2) if packed or not halves else (8, 4)
        if len(s.acc) != 4 or len(s.a) != n_a or len(s.b) != n_b:
            raise refuse("an `MmaSync` whose fragments are not the PTX ISA's")
        if any(e.type != "f32" for e in (*s.acc, *(() if packed else (*s.a, *s.b)))):
            raise refuse("an `MmaSync` on values that are not f32")
        acc = []
        for v in s.acc:
            r = self.env.get(v.name)
            if r is None or r not in self.mutable:
                raise refuse(f"an `MmaSync` into `{v.name}`, which is not a variable")
            acc.append(r)
        d = "{" + ", ".join(acc) + "}"
        if packed:
            a = [self.reg(e) for e in s.a]
            b = [self.reg(e) for e in s.b]
            shape = f"m16n8k16.row.col.f32.{s.kind}.{s.kind}.f32"
        elif halves:
            a = [self.packed(s.kind, s.a[k], s.a[k + 1]) for k in range(0, 8, 2)]
            b = [self.packed(s.kind, s.b[k], s.b[k + 1]) for k in range(0, 4, 2)]
            shape = f"m16n8k16.row.col.f32.{s.kind}.{s.kind}.f32"
        else:
            a = [self.tf32(e) for e in s.a]
            b = [self.tf32(e) for e in s.b]
            shape = "m16n8k8.row.col.f32.tf32.tf32.f32"
        self.ins(f"mma.sync.aligned.{shape} {d}, {{{', '.join(a)}}}, {{{', '.join(b)}}}, {d}")

    def wgmma(self, s: WarpgroupMma) -> None:
        """One warpgroup's `wgmma.mma_async.sync.aligned.m64nNk16.f32.f16.f16` (`.bf16.bf16`,
        sm_90a) between `wgmma.fence` (the accumulators were written by other instructions)
        and a `wgmma.commit_group` / `wgmma.wait_group 0`: complete when the statement is.
        The operands' matrix descriptors are built from their shared addresses: bits 0-13
        the address / 16, 16-29 the leading byte offset / 16, 32-45 the stride byte offset
        / 16, no base offset, swizzle mode 0 (none); A K-major, B MN-major (`imm-trans-b`
        1), scale-d true (`D = A B + D`)."""
        n = 2 * len(s.acc)
        if s.kind not in ("f16", "bf16") or n % 8 or not 8 <= n <= 256:
            raise refuse(f"a `WarpgroupMma` of {len(s.acc)} `{s.kind}` accumulators")
        acc = []
        for v in s.acc:
            r = self.env.get(v.name)
            if r is None or r not in self.mutable or v.type != "f32":
                raise refuse(f"a `WarpgroupMma` into `{v.name}`, which is not an f32 variable")
            acc.append(r)
        descriptors = []
        for array, index, (leading, stride) in (
            (s.a_array, s.a_index, s.a_offsets),
            (s.b_array, s.b_index, s.b_offsets),
        ):
            mem = self.memory.get(array)
            if mem is None or mem.space != "shared" or mem.elem != "u32":
                raise refuse(f"a `WarpgroupMma` operand in `{array}`")
            if leading % 16 or stride % 16 or not (0 < leading < 1 << 18 and 0 < stride < 1 << 18):
                raise refuse(f"a `WarpgroupMma` with byte offsets {leading} and {stride}")
            address, start = self.new("u32"), self.new("u32")
            self.ins(f"mad.lo.u32 {address}, {self.reg(index)}, 4, {mem.base}")
            self.ins(f"shr.u32 {start}, {address}, 4")
            wide, desc = self.regs.new("b64"), self.regs.new("b64")
            self.ins(f"cvt.u64.u32 {wide}, {start}")
            fields = (leading >> 4) << 16 | (stride >> 4) << 32
            self.ins(f"or.b64 {desc}, {wide}, {fields:#018x}")
            descriptors.append(desc)
        scale_d = self.regs.new("pred")
        self.ins(f"mov.pred {scale_d}, 1")
        self.ins("wgmma.fence.sync.aligned")
        shape = f"m64n{n}k16.f32.{s.kind}.{s.kind}"
        d = "{" + ", ".join(acc) + "}"
        a, b = descriptors
        self.ins(f"wgmma.mma_async.sync.aligned.{shape} {d}, {a}, {b}, {scale_d}, 1, 1, 0, 1")
        self.ins("wgmma.commit_group.sync.aligned")
        self.ins("wgmma.wait_group.sync.aligned 0")

    def load_matrix(self, s: LoadMatrix) -> None:
        """`ldmatrix.sync.aligned.m8n8.xN[.trans].shared.b16` (sm_75) into fresh `.b32`
        registers, this lane's row address the word `s.index` of a u32 shared array."""
        mem, addr = self.address(s.array, s.index)
        if mem.space != "shared" or mem.elem != "u32" or len(s.vars) not in (1, 2, 4):
            raise refuse(f"an `ldmatrix` of {len(s.vars)} from `{s.array}`")
        dsts = [self.new("u32") for _ in s.vars]
        trans = ".trans" if s.trans else ""
        shape = f"m8n8.x{len(dsts)}{trans}.shared.b16"
        self.ins(f"ldmatrix.sync.aligned.{shape} {{{', '.join(dsts)}}}, {addr}")
        for v, d in zip(s.vars, dsts, strict=True):
            self.env[v.name] = d

    def copy_async(self, s: CopyAsync) -> None:
        """`cp.async.ca.shared.global` of one element (sm_80+), predicated on the guard,
        which otherwise stores 0 into the slot; done by the next `cp.async.wait_all`. With
        `s.pair` two f16 elements into one u32 word (4 bytes, the element index even). Of
        16 bytes (`s.words` 4), `cp.async.cg` (around L1, as the ISA asks of that size),
        whose guard is its source size: 0 reads nothing and fills the slot with zeros."""
        dst_mem, dst = self.address(s.array, s.index)
        src_mem, src = self.address(s.value.array, s.value.index)
        size = ELEMENT_BYTES[src_mem.elem] * s.words
        if s.pair:
            if src_mem.elem != "f16" or dst_mem.elem != "u32":
                raise refuse(f"a paired asynchronous copy from `{s.value.array}`")
            size = 4 * s.words
        if dst_mem.space != "shared" or src_mem.space != "global" or size not in (4, 8, 16):
            raise refuse(f"an asynchronous copy from `{s.value.array}` to `{s.array}`")
        if dst_mem.elem != src_mem.elem and not s.pair:
            raise refuse(f"an asynchronous copy from `{src_mem.elem}` to `{dst_mem.elem}`")
        if size == 16:
            if s.cond is None:
                self.ins(f"cp.async.cg.shared.global {dst}, {src}, 16")
                return
            n = self.new("u32")
            self.ins(f"selp.b32 {n}, 16, 0, {self.reg(s.cond)}")
            self.ins(f"cp.async.cg.shared.global {dst}, {src}, 16, {n}")
            return
        if s.words != 1:
            raise refuse(f"an asynchronous copy of {size} bytes from `{s.value.array}`")
        if s.cond is None:
            self.ins(f"cp.async.ca.shared.global {dst}, {src}, {size}")
            return
        p = self.reg(s.cond)
        self.ins(f"@{p} cp.async.ca.shared.global {dst}, {src}, {size}")
        zero = "0f00000000" if dst_mem.elem == "f32" else "0"
        self.ins(f"@!{p} st.shared.{MEMORY_TYPE[dst_mem.elem]} {dst}, {zero}")

    def store(self, s: Store) -> None:
        mem, addr = self.address(s.array, s.index)
        value = self.expr(s.value)
        if s.value.type == "bool":
            value = self.cast(value, "bool", "u32")
        elif s.value.type != mem.elem and {s.value.type, mem.elem} != {"i32", "u32"}:
            raise refuse(f"a store of `{s.value.type}` into `{s.array}` of `{mem.elem}`")
        self.ins(f"st.{mem.space}.{MEMORY_TYPE[mem.elem]} {addr}, {value}")

    def vector_load(self, s: GlobalVectorLoad) -> None:
        """`ld.global.nc.v4.f32 {a, b, c, d}, [addr]`: one 128-bit load (the scheduler
        proved the address a multiple of 16 bytes, `mimir.codegen.kernels.vectorized`)."""
        mem, addr = self.address(s.array, s.index)
        if mem.elem not in TYPE or mem.space != "global":
            raise refuse(f"a vector access to `{s.array}` of `{mem.elem}`")
        nc = ".nc" if mem.readonly else ""
        lanes = [self.new(v.type) for v in s.vars]
        kind = f"v{len(lanes)}.{MEMORY_TYPE[mem.elem]}"
        self.ins(f"ld.global{nc}.{kind} {{{', '.join(lanes)}}}, {addr}")
        for v, r in zip(s.vars, lanes, strict=True):
            self.env[v.name] = r

    def vector_store(self, s: GlobalVectorStore) -> None:
        mem, addr = self.address(s.array, s.index)
        if mem.elem not in TYPE or mem.space != "global":
            raise refuse(f"a vector access to `{s.array}` of `{mem.elem}`")
        values = [self.reg(v) for v in s.values]
        kind = f"v{len(values)}.{MEMORY_TYPE[mem.elem]}"
        self.ins(f"st.global.{kind} {addr}, {{{', '.join(values)}}}")

    def if_(self, s: If) -> None:
        if isinstance(s.cond, Const):
            self.block(s.then if s.cond.value else s.orelse)
            return
        cond = self.reg(s.cond)
        otherwise, end = self.regs.label("else"), self.regs.label("endif")
        self.ins(f"@!{cond} bra {otherwise if s.orelse else end}")
        self.scoped(s.then)
        if s.orelse:
            self.ins(f"bra {end}")
            self.put_label(otherwise)
            self.scoped(s.orelse)
        self.put_label(end)

    def scoped(self, body: list[Stmt]) -> None:
        """A nested block: address registers it computes are not reused after it."""
        saved, converted = dict(self.addresses), dict(self.converted)
        self.block(body)
        self.addresses, self.converted = saved, converted

    def for_(self, s: For) -> None:
        v = self.regs.new("b32")
        self.ins(f"mov.u32 {v}, {self.expr(s.start)}")
        self.env[s.var.name] = v
        self.mutable.add(v)
        head, end = self.regs.label("loop"), self.regs.label("endloop")
        self.put_label(head)
        if not s.unroll:
            self.lines.append('    .pragma "nounroll";')
        done = self.regs.new("pred")
        self.ins(f"setp.ge.u32 {done}, {v}, {self.expr(s.end)}")
        self.ins(f"@{done} bra {end}")
        self.scoped(s.body)
        self.ins(f"add.u32 {v}, {v}, {self.expr(s.step)}")
        self.ins(f"bra {head}")
        self.put_label(end)

    def return_(self, s: Return) -> None:
        if s.value is not None:
            if self.return_register is None:
                raise refuse("a kernel that returns a value")
            t = s.value.type
            self.ins(f"{MOV[CLASS_OF[t]]} {self.return_register}, {self.expr(s.value)}")
        self.ins("ret")
