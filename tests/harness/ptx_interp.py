"""A small PTX interpreter for the subset Mimir emits, to run its kernels on the CPU (test-only).

There is no NVIDIA GPU here, so besides ptxas (which proves the PTX well
formed, not right) the emitted kernels are executed by this interpreter and
compared with the shim. It is written by us, so it shares our reading of the
PTX ISA; what it catches is the emitter's own logic (operand order, addresses,
control flow, predicates, conversions), and `tests/test_ptx_gpu.py` settles
the rest on a real GPU.

Semantics modelled: registers by class (`%p` bool, `%h` 16-bit bits, `%r`
32-bit ints as unsigned, `%f` float32 as exact Python floats, `%rd` 64-bit);
float arithmetic is IEEE float32 round-to-nearest via `mimir.codegen.backends.ptx
.emulate` (fma and division exact); global buffers are byte arrays behind
fake addresses and every access is bounds-checked (an out-of-bounds load or
store raises); each block's threads run as coroutines that meet at `bar.sync`,
and a barrier that some threads of a block skip by exiting is an error.
`atom.global.add.u32` returns the old value (an atomic step, as `red`); `fence.acq_rel.gpu`
does nothing, as blocks run one at a time (`launch` can run them last to first).
`shfl.sync` is a rendezvous of one warp (32 consecutive linear thread ids): every
lane its member mask names must reach a `shfl.sync` with that mask before any of
them goes on, and each takes the value the source lane held there; a lane named
but exited, not in the block, or waiting elsewhere is an error, as PTX leaves
that undefined. `mma.sync.aligned.m16n8k8...tf32` and `...m16n8k16...f16` / `.bf16` are
a rendezvous of all 32 lanes of a warp the same way; the matrices are assembled from the
lanes' fragments as the PTX ISA lays them out (`_mma_m16n8k8`, `_mma_m16n8k16`), so a
wrong fragment mapping gives wrong results. `wgmma.mma_async.sync.aligned.m64nNk16.f32.f16.f16`
(`.bf16.bf16`, sm_90a) is a rendezvous of the 128 threads of a warpgroup (4 consecutive
warps): both operands are read from shared memory through the matrix descriptors (start
address, leading and stride byte offsets, no swizzle: any other mode or a base offset is
refused), K-major or, with the instruction's transpose flag, MN-major, as the PTX ISA's
canonical layouts place the 8 x 16-byte core matrices (`_wgmma_element`); its results land in
the accumulator registers at the `wgmma.wait_group` that completes its group (so a missing
wait reads the old accumulators), and `wgmma.fence` orders nothing here, as each thread
runs in program order. Shared arrays sit at small addresses, as on a GPU, so a descriptor's
14-bit start address reaches them.

`run_ptx_manifest_cpu` has the signature of `cuda_runner.run_ptx_manifest`.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from mimir.codegen.backends.ptx import emulate as em
from mimir.runtime import manifest as mf

__all__ = ["PtxInterpError", "run_ptx_manifest_cpu"]

M32 = 0xFFFFFFFF


class PtxInterpError(RuntimeError):
    """The kernel did something a GPU would fault on or that PTX leaves undefined."""


def _s32(v: int) -> int:
    return v - (1 << 32) if v & 0x80000000 else v


def _tdiv(a: int, b: int) -> int:
    """Integer division truncating toward zero (`div.s32`)."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _f16_to_f32(bits: int) -> float:
    return struct.unpack("<e", struct.pack("<H", bits))[0]


def _to_f16_rn(x: float) -> int:
    try:
        return struct.unpack("<H", struct.pack("<e", x))[0]
    except OverflowError:
        return 0x7C00 if x > 0 else 0xFC00


def _max_f16(a: int, b: int) -> int:
    x, y = _f16_to_f32(a), _f16_to_f32(b)
    if math.isnan(x) or math.isnan(y):
        return b if math.isnan(x) else a
    return a if x > y or (x == y and not a & 0x8000) else b


def _bf16_to_f32(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", (bits & 0xFFFF) << 16))[0]


def _to_bf16_rn(x: float) -> int:
    """`cvt.rn.bf16.f32`: the f32 rounded to bfloat16, to nearest, ties to even (a nan stays
    a nan, quiet)."""
    if math.isnan(x):
        return 0x7FC0
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


def _cvt_rzi(x: float, signed: bool) -> int:
    if math.isnan(x):
        return 0
    lo, hi = (-(2**31), 2**31 - 1) if signed else (0, 2**32 - 1)
    return max(lo, min(hi, int(x) if math.isfinite(x) else (hi if x > 0 else lo))) & M32


_CMP: dict[str, Callable[[Any, Any], bool]] = {
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "neu": lambda a, b: a != b or math.isnan(a) or math.isnan(b),
}

# opcode -> function of source values (already decoded to Python values)
_ALU: dict[str, Callable[..., Any]] = {
    **em._F32_OPS,  # float32 arithmetic, exactly rounded (shared with the math tests)
    "add.s32": lambda a, b: (a + b) & M32,
    "add.u32": lambda a, b: (a + b) & M32,
    "sub.s32": lambda a, b: (a - b) & M32,
    "sub.u32": lambda a, b: (a - b) & M32,
    "mul.lo.s32": lambda a, b: (a * b) & M32,
    "mul.lo.u32": lambda a, b: (a * b) & M32,
    "mul.hi.u32": lambda a, b: (a * b) >> 32,
    "mad.lo.u32": lambda a, b, c: (a * b + c) & M32,
    "div.u32": lambda a, b: a // b if b else M32,
    "rem.u32": lambda a, b: a % b if b else a,
    "div.s32": lambda a, b: _tdiv(_s32(a), _s32(b)) & M32 if b else M32,
    "rem.s32": lambda a, b: (_s32(a) - _tdiv(_s32(a), _s32(b)) * _s32(b)) & M32 if b else a,
    "and.b32": lambda a, b: a & b,
    "or.b32": lambda a, b: a | b,
    "xor.b32": lambda a, b: a ^ b,
    "not.b32": lambda a: ~a & M32,
    "xor.b16": lambda a, b: (a ^ b) & 0xFFFF,
    "shl.b32": lambda a, n: (a << n) & M32 if n < 32 else 0,
    "shr.u32": lambda a, n: a >> n if n < 32 else 0,
    "shr.s32": lambda a, n: (_s32(a) >> min(n, 31)) & M32,
    "neg.s32": lambda a: -a & M32,
    "abs.s32": lambda a: abs(_s32(a)) & M32,
    "min.s32": lambda a, b: min(_s32(a), _s32(b)) & M32,
    "max.s32": lambda a, b: max(_s32(a), _s32(b)) & M32,
    "min.u32": min,
    "max.u32": max,
    "neg.f32": lambda a: -a,
    "sqrt.rn.f32": lambda a: _sqrt(a),
    "cvt.rzi.s32.f32": lambda a: _cvt_rzi(a, True),
    "cvt.rzi.u32.f32": lambda a: _cvt_rzi(a, False),
    "cvt.rn.f32.u32": lambda a: em.round_f32(a),
    "cvt.rmi.f32.f32": lambda a: a if not math.isfinite(a) else math.copysign(math.floor(a), a),
    "cvt.rn.f16.f32": _to_f16_rn,
    "cvt.rna.tf32.f32": lambda a: _tf32_bits(a),
    # a packed pair: the first operand in the upper half, the second in the lower
    "cvt.rn.f16x2.f32": lambda a, b: (_to_f16_rn(a) << 16) | _to_f16_rn(b),
    "cvt.rn.bf16x2.f32": lambda a, b: (_to_bf16_rn(a) << 16) | _to_bf16_rn(b),
    "cvt.f32.f16": _f16_to_f32,
    # two packed float16 products, each exact in a double and rounded once
    "mul.rn.f16x2": lambda a, b: (
        _to_f16_rn(_f16_to_f32(a >> 16) * _f16_to_f32(b >> 16)) << 16
        | _to_f16_rn(_f16_to_f32(a & 0xFFFF) * _f16_to_f32(b & 0xFFFF))
    ),
    # the larger of each half (a nan half gives the other, as `max.f32`)
    "max.f16x2": lambda a, b: _max_f16(a >> 16, b >> 16) << 16 | _max_f16(a & 0xFFFF, b & 0xFFFF),
    "cvt.u32.u16": lambda a: a & 0xFFFF,
    "cvt.u16.u32": lambda a: a & 0xFFFF,
    "testp.infinite.f32": math.isinf,
    "and.pred": lambda a, b: a and b,
    "or.pred": lambda a, b: a or b,
    "xor.pred": lambda a, b: a != b,
    "not.pred": lambda a: not a,
    "selp.b32": lambda a, b, p: a if p else b,
    "selp.b16": lambda a, b, p: a if p else b,
    "mul.wide.u32": lambda a, b: a * b,
    "mul.wide.s32": lambda a, b: _s32(a) * _s32(b),
    "add.s64": lambda a, b: a + b,
    "cvt.u64.u32": lambda a: a,
    "or.b64": lambda a, b: a | b,
    "cvta.to.global.u64": lambda a: a,
}
for _cmp, _f in _CMP.items():
    _ALU[f"setp.{_cmp}.u32"] = _ALU[f"setp.{_cmp}.f32"] = _f
    _ALU[f"setp.{_cmp}.s32"] = lambda a, b, f=_f: f(_s32(a), _s32(b))
_ALU["setp.nan.f32"] = lambda a, b: math.isnan(a) or math.isnan(b)  # unordered


def _tf32_bits(a: float) -> int:
    """`cvt.rna.tf32.f32`: the f32 bits rounded to TF32 (to nearest, ties away from zero,
    on the 13 low mantissa bits, which end 0); nan and infinities keep their bits (a nan
    stays a nan)."""
    bits = struct.unpack("<I", struct.pack("<f", a))[0]
    if not math.isfinite(a):
        return bits
    return (bits & 0x80000000) | (((bits & 0x7FFFFFFF) + 0x1000) & 0x7FFFE000)


def _tf32_value(v: Any) -> float:
    """What a tensor core reads from a `.tf32` operand register: the f32 value of its bits
    with the 13 low mantissa bits ignored (so an operand not rounded by `cvt` is truncated)."""
    bits = struct.unpack("<I", struct.pack("<f", v))[0] if type(v) is float else v
    return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFE000))[0]


def _c_fragment(g: int, q: int) -> tuple[tuple[int, int], ...]:
    """(row, col) of c0..c3 (and d0..d3) of the lane with groupID g, threadID_in_group q."""
    return ((g, 2 * q), (g, 2 * q + 1), (g + 8, 2 * q), (g + 8, 2 * q + 1))


def _double_to_f32(x: float) -> float:
    """A double rounded to the nearest f32 (ties to even; past the range, infinity)."""
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def _mma_m16n8k8(lanes: list[tuple[list, list, list]]) -> list[list[float]]:
    """`mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32` over a warp: lane l's (a, b, c)
    fragments -> its d fragment. The matrices are put together from the lanes as the PTX
    ISA lays them out (g = l / 4, q = l % 4): a0..a3 = A[g][q], A[g+8][q], A[g][q+4],
    A[g+8][q+4]; b0, b1 = B[q][g], B[q+4][g]; c0..c3 (and d) = C[g][2q], C[g][2q+1],
    C[g+8][2q], C[g+8][2q+1]. Each D element is C plus the 8 exact products, summed
    exactly and rounded to f32 (the hardware's order and rounding inside one instruction
    are its own: within the tests' float32 tolerance)."""
    a = [[0.0] * 8 for _ in range(16)]
    b = [[0.0] * 8 for _ in range(8)]
    c = [[0.0] * 8 for _ in range(16)]
    for lane, (fa, fb, fc) in enumerate(lanes):
        g, q = lane >> 2, lane & 3
        for k, (row, col) in enumerate(((g, q), (g + 8, q), (g, q + 4), (g + 8, q + 4))):
            a[row][col] = _tf32_value(fa[k])
        b[q][g], b[q + 4][g] = _tf32_value(fb[0]), _tf32_value(fb[1])
        for k, (row, col) in enumerate(
            ((g, 2 * q), (g, 2 * q + 1), (g + 8, 2 * q), (g + 8, 2 * q + 1))
        ):
            c[row][col] = fc[k]
    # a TF32 product is exact in a double (11 x 11 significant bits); `fsum` rounds the
    # exact sum to a double, then to f32
    d = [
        [
            _double_to_f32(math.fsum([c[i][j], *(a[i][k] * b[k][j] for k in range(8))]))
            for j in range(8)
        ]
        for i in range(16)
    ]
    out = []
    for lane in range(WARP):
        g, q = lane >> 2, lane & 3
        out.append([d[row][col] for row, col in _c_fragment(g, q)])
    return out


def _halves(v: Any, kind: str, opcode: str) -> tuple[float, float]:
    """The two `.f16` / `.bf16` values of a `.b32` operand register, low half first."""
    if type(v) is not int:
        raise PtxInterpError(f"`{opcode}` reads a packed operand from a float register")
    to_f32 = _f16_to_f32 if kind == "f16" else _bf16_to_f32
    return to_f32(v & 0xFFFF), to_f32(v >> 16)


def _mma_m16n8k16(lanes: list[tuple[list, list, list]], kind: str) -> list[list[float]]:
    """`mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32` (`kind` "f16") or
    `...f32.bf16.bf16.f32` ("bf16") over a warp: lane l's (a, b, c) fragments -> its d
    fragment, as the PTX ISA lays them out ("Matrix Fragments for mma.m16n8k16 with floating
    point type"; g = l / 4, q = l % 4; each `.b32` register holds two elements, the lower
    index in the low half): a0..a7 = A[g][2q], A[g][2q+1], A[g+8][2q], A[g+8][2q+1], then the
    same four at columns + 8; b0..b3 = B[2q][g], B[2q+1][g], B[2q+8][g], B[2q+9][g]; c0..c3
    (and d) as for m16n8k8. Each D element is C plus the 16 exact products (a product of two
    halves is exact in a double), summed exactly (`fsum`), rounded to a double and then to
    f32: the hardware's order and rounding of the additions inside one instruction are its
    own, and differ from this by at most a few f32 ulps of the sum's terms."""
    name = f"mma.sync.aligned.m16n8k16.row.col.f32.{kind}.{kind}.f32"
    a = [[0.0] * 16 for _ in range(16)]
    b = [[0.0] * 8 for _ in range(16)]
    c = [[0.0] * 8 for _ in range(16)]
    for lane, (fa, fb, fc) in enumerate(lanes):
        g, q = lane >> 2, lane & 3
        for r, (row, col) in enumerate(
            ((g, 2 * q), (g + 8, 2 * q), (g, 2 * q + 8), (g + 8, 2 * q + 8))
        ):
            a[row][col], a[row][col + 1] = _halves(fa[r], kind, name)
        for r, row in enumerate((2 * q, 2 * q + 8)):
            b[row][g], b[row + 1][g] = _halves(fb[r], kind, name)
        for k, (row, col) in enumerate(_c_fragment(g, q)):
            c[row][col] = fc[k]
    d = [
        [
            _double_to_f32(math.fsum([c[i][j], *(a[i][k] * b[k][j] for k in range(16))]))
            for j in range(8)
        ]
        for i in range(16)
    ]
    return [[d[row][col] for row, col in _c_fragment(lane >> 2, lane & 3)] for lane in range(WARP)]


# the `mma.sync` shapes and types the interpreter models -> their kind
_MMA = {
    "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32": "tf32",
    "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32": "f16",
    "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32": "bf16",
}


def _sqrt(a: float) -> float:
    """sqrt.rn.f32: the double square root of a float32 rounds correctly to float32."""
    if math.isnan(a) or a < 0:
        return math.nan
    return em.round_f32(Fraction(math.sqrt(a))) if math.isfinite(a) and a else a


# ---------------------------------------------------------------- parsing

_LINE = re.compile(r"^(?:@(!?)(%\w+)\s+)?([\w.]+)\s*(.*?);$")
_ADDR = re.compile(r"^\[([%\w$]+)(?:\+(-?\d+))?\]$")
_SPECIAL = re.compile(r"^%(tid|ntid|ctaid|nctaid)\.([xyz])$")
_FMT = {"f32": "<f", "s32": "<I", "u32": "<I", "b32": "<I", "b16": "<H", "u64": "<Q"}

_SHFL_MODES = ("up", "down", "bfly", "idx")
WARP = 32

# An operand is a register name (str) or a tuple: ("const", v), ("special", name, axis),
# ("sym", name) or ("addr", base operand, byte offset).
Operand = Any


def _operand(op: str, opcode: str) -> Operand:
    m = _ADDR.match(op)
    if m:
        return ("addr", _operand(m.group(1), opcode), int(m.group(2) or 0))
    m = _SPECIAL.match(op)
    if m:
        return ("special", m.group(1), "xyz".index(m.group(2)))
    if op.startswith("%"):
        return op
    if op.startswith("0f"):
        return ("const", struct.unpack("<f", struct.pack("<I", int(op[2:], 16)))[0])
    if op.startswith("0x"):
        return ("const", int(op, 16))
    if re.fullmatch(r"-?\d+", op):
        return ("const", bool(int(op)) if opcode.endswith("pred") else int(op) & M32)
    return ("sym", op)


@dataclass
class _Function:
    name: str
    params: list[str]
    ret: str | None
    code: list[tuple[Any, ...]] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)
    shared: dict[str, int] = field(default_factory=dict)  # symbol -> bytes
    param_names: list[str] = field(default_factory=list)  # entry parameters, in order
    block: tuple[int, int, int] = (1, 1, 1)
    classes: dict[str, str] = field(default_factory=dict)  # register (or prefix) -> .reg type

    def register_class(self, name: str) -> str:
        return self.classes.get(name) or self.classes[name.rstrip("0123456789")]


def _instruction(
    fn: _Function, guard: str | None, neg: bool, opcode: str, ops: list[str]
) -> tuple[Any, ...]:
    if opcode == "call.uni":
        args = [a.strip() for a in ops[2].strip("()").split(",") if a.strip()]
        return (guard, neg, "call", ops[1], ops[0].strip("()"), args)
    if opcode.startswith(("ld.global.", "st.global.")) and re.fullmatch(
        r"v[24]", opcode.split(".")[-2]
    ):
        # ld.global[.nc].v4.f32 {a, b, c, d}, [addr] / st.global.v4.f32 [addr], {a, b, c, d}
        parts = opcode.split(".")
        fmt, lanes = _FMT[parts[-1]], int(parts[-2][1:])
        if parts[0] == "ld":
            regs = _lanes(ops[0], lanes)
            return (guard, neg, "gldv", fmt, regs, _operand(ops[1], opcode))
        values = [_operand(v, opcode) for v in _lanes(ops[1], lanes)]
        return (guard, neg, "gstv", fmt, _operand(ops[0], opcode), values)
    if opcode.startswith("cp.async."):
        return _async_instruction(guard, neg, opcode, ops)
    if opcode.startswith(("ld.", "st.")):
        parts = opcode.split(".")
        fmt = _FMT[parts[-1]]
        kind = (parts[0], parts[1])
        if kind[0] == "ld" and parts[2] in ("v2", "v4"):
            # ld.shared.v4.f32 {%f1, %f2, %f3, %f4}, [addr]: one aligned access, 4 registers
            dsts = [d.strip() for d in ops[0].strip("{}").split(",")]
            if len(dsts) != int(parts[2][1:]):
                raise PtxInterpError(f"`{opcode}` with {len(dsts)} destinations")
            return (guard, neg, "ldv", kind[1], fmt, dsts, _operand(ops[1], opcode))
        if kind[0] == "ld":
            return (guard, neg, "ld", kind[1], fmt, ops[0], _operand(ops[1], opcode))
        return (guard, neg, "st", kind[1], fmt, _operand(ops[0], opcode), _operand(ops[1], opcode))
    if opcode.startswith("red."):  # red.global.add.T [addr], value: one atomic step
        parts = opcode.split(".")
        if parts[1:3] != ["global", "add"] or parts[3] not in ("s32", "u32", "f32"):
            raise PtxInterpError(f"the interpreter does not model `{opcode}`")
        return (guard, neg, "red", parts[3], _operand(ops[0], opcode), _operand(ops[1], opcode))
    if opcode.startswith("atom."):  # atom.global.add.u32 d, [addr], value: returns the old
        if opcode != "atom.global.add.u32":
            raise PtxInterpError(f"the interpreter does not model `{opcode}`")
        return (guard, neg, "atom", ops[0], _operand(ops[1], opcode), _operand(ops[2], opcode))
    if opcode == "fence.acq_rel.gpu":
        # blocks run one at a time, so an earlier block's stores are visible anyway
        return (guard, neg, "fence")
    if opcode.startswith("shfl."):  # shfl.sync.MODE.b32 d, a, b, c, membermask
        parts = opcode.split(".")
        if parts[1:2] != ["sync"] or parts[2] not in _SHFL_MODES or parts[3:] != ["b32"]:
            raise PtxInterpError(f"the interpreter does not model `{opcode}`")
        if "|" in ops[0]:
            raise PtxInterpError("`shfl.sync` with a predicate destination is not modelled")
        srcs = [_operand(o, opcode) for o in ops[1:]]
        return (guard, neg, "shfl", parts[2], ops[0], srcs, fn.register_class(ops[0]))
    if opcode.startswith("mma."):  # mma.sync.aligned.SHAPE.row.col.f32.T.T.f32 d, a, b, c
        if opcode not in _MMA:
            raise PtxInterpError(f"the interpreter does not model `{opcode}`")
        # 4, 4, 2 and 4 registers for both shapes (k16's A and B two halves to a register)
        d, a, b, c = (_lanes(op, n) for op, n in zip(ops, (4, 4, 2, 4), strict=True))
        return (guard, neg, "mma", d, a, b, c, _MMA[opcode])
    if opcode.startswith("wgmma."):
        return _wgmma_instruction(guard, neg, opcode, ops)
    if opcode.startswith("fence.proxy.async"):
        # generic-proxy writes made visible to wgmma's reads: one memory here
        return (guard, neg, "fence")
    if opcode.startswith("ldmatrix."):  # ldmatrix.sync.aligned.m8n8.xN[.trans].shared.b16
        m = re.fullmatch(r"ldmatrix\.sync\.aligned\.m8n8\.x([124])(\.trans)?\.shared\.b16", opcode)
        if not m:
            raise PtxInterpError(f"the interpreter does not model `{opcode}`")
        count = int(m.group(1))
        dsts = _lanes(ops[0], count)
        return (guard, neg, "ldm", count, m.group(2) is not None, dsts, _operand(ops[1], opcode))
    if opcode in ("bra", "ret", "bar.sync"):
        return (guard, neg, opcode, ops[0] if ops else None)
    if opcode.startswith("mov."):
        # mov.b32 between an f32 and a b32 register reinterprets the bits.
        return (guard, neg, "mov", ops[0], _operand(ops[1], opcode), fn.register_class(ops[0]))
    if opcode not in _ALU:
        raise PtxInterpError(f"the interpreter does not model `{opcode}`")
    return (guard, neg, "alu", _ALU[opcode], ops[0], [_operand(o, opcode) for o in ops[1:]])


def _lanes(op: str, lanes: int) -> list[str]:
    """The registers of a vector operand `{%f0, %f1, %f2, %f3}`."""
    m = re.fullmatch(r"\{(.*)\}", op.strip())
    if not m:
        raise PtxInterpError(f"not a vector operand: `{op}`")
    regs = [r.strip() for r in m.group(1).split(",")]
    if len(regs) != lanes:
        raise PtxInterpError(f"a vector of {lanes} lanes with {len(regs)} registers: `{op}`")
    return regs


_WGMMA = re.compile(r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k16\.f32\.(f16|bf16)\.(f16|bf16)")


def _wgmma_instruction(guard: str | None, neg: bool, opcode: str, ops: list[str]) -> tuple:
    """wgmma (sm_90a): `wgmma.fence.sync.aligned`, `wgmma.commit_group.sync.aligned`,
    `wgmma.wait_group.sync.aligned N` and `wgmma.mma_async.sync.aligned.m64nNk16.f32.T.T
    {d}, a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-a, imm-trans-b`."""
    if opcode == "wgmma.fence.sync.aligned":
        return (guard, neg, "fence")
    if opcode == "wgmma.commit_group.sync.aligned":
        return (guard, neg, "wgcommit")
    if opcode == "wgmma.wait_group.sync.aligned":
        return (guard, neg, "wgwait", int(ops[0]))
    m = _WGMMA.fullmatch(opcode)
    if not m or m.group(2) != m.group(3) or int(m.group(1)) % 8 or not 8 <= int(m.group(1)) <= 256:
        raise PtxInterpError(f"the interpreter does not model `{opcode}`")
    n, kind = int(m.group(1)), m.group(2)
    if len(ops) != 8:
        raise PtxInterpError(f"`{opcode}` with {len(ops)} operands (the interpreter models 8)")
    d = _lanes(ops[0], n // 2)
    scale_a, scale_b, trans_a, trans_b = (int(o) for o in ops[4:])
    if (scale_a, scale_b) != (1, 1):
        raise PtxInterpError(f"`{opcode}` with negated operands is not modelled")
    srcs = (_operand(ops[1], opcode), _operand(ops[2], opcode), _operand(ops[3], "pred"))
    return (guard, neg, "wgmma", d, *srcs, (n, kind, trans_a, trans_b))


def _async_instruction(guard: str | None, neg: bool, opcode: str, ops: list[str]) -> tuple:
    """cp.async (sm_80): `cp.async.ca|cg.shared.global [dst], [src], cp-size[, src-size]`,
    `cp.async.commit_group`, `cp.async.wait_group N` and `cp.async.wait_all`."""
    if opcode in ("cp.async.ca.shared.global", "cp.async.cg.shared.global"):
        size = int(ops[2])
        if size not in (4, 8, 16) or (opcode.split(".")[2] == "cg" and size != 16):
            raise PtxInterpError(f"`{opcode}` of {size} bytes")
        src_size = _operand(ops[3], opcode) if len(ops) > 3 else ("const", size)
        return (
            guard,
            neg,
            "cp",
            _operand(ops[0], opcode),
            _operand(ops[1], opcode),
            size,
            src_size,
        )
    if opcode == "cp.async.commit_group":
        return (guard, neg, "cpcommit")
    if opcode == "cp.async.wait_group":
        return (guard, neg, "cpwait", int(ops[0]))
    if opcode == "cp.async.wait_all":
        return (guard, neg, "cpwait", None)
    raise PtxInterpError(f"the interpreter does not model `{opcode}`")


def _parse(text: str) -> dict[str, _Function]:
    funcs: dict[str, _Function] = {}
    cur: _Function | None = None
    in_params = False
    for raw in text.splitlines():
        line = raw.split("//", 1)[0].strip()
        if not line or line.startswith((".version", ".target", ".address_size")):
            continue
        if line.startswith(".reg"):
            m = re.match(r"\.reg \.(\w+) (%[a-z]+)<\d+>;$", line)
            assert m and cur is not None, line
            cur.classes[m.group(2)] = m.group(1)
        elif line.startswith(".func"):
            m = re.match(r"\.func \(\.reg \.(\w+) (%\w+)\) (\w+)\((.*)\)$", line)
            assert m, line
            decls = [p.split() for p in m.group(4).split(",") if p.strip()]
            cur = funcs[m.group(3)] = _Function(m.group(3), [d[-1] for d in decls], m.group(2))
            cur.classes = {m.group(2): m.group(1), **{d[-1]: d[-2].lstrip(".") for d in decls}}
        elif line.startswith(".visible .entry"):
            name = line.split()[2].rstrip("(")
            cur = funcs[name] = _Function(name, [], None)
            in_params = True
        elif in_params:
            if line == ")":
                in_params = False
            else:
                assert cur is not None
                cur.param_names.append(re.sub(r"\[\d+\]$", "", line.rstrip(",").split()[-1]))
        elif cur is None or line in ("{", "}"):
            continue
        elif line.startswith(".reqntid"):
            x, y, z = (int(v) for v in line.split(None, 1)[1].split(","))
            cur.block = (x, y, z)
        elif line.startswith(".shared"):
            m = re.match(r"\.shared \.align \d+ \.b8 (\w+)\[(\d+)\];", line)
            assert m, line
            cur.shared[m.group(1)] = int(m.group(2))
        elif line.endswith(":"):
            cur.labels[line[:-1]] = len(cur.code)
        elif line == '.pragma "nounroll";':
            continue  # a hint to ptxas (do not unroll the loop it heads): nothing to execute
        else:
            m = _LINE.match(line)
            assert m, line
            neg, guard, opcode, rest = m.groups()
            cur.code.append(_instruction(cur, guard, neg == "!", opcode, _split(rest)))
    return funcs


def _split(rest: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in rest:
        depth += (ch in "([{") - (ch in ")]}")
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


# ---------------------------------------------------------------- execution

# The kinds of compiled instruction `_Interp.run` executes inline (ints, apart from the
# parsed instructions' strings): (guard, negated, kind, ...) as `_Interp._compile` builds.
_ALU1, _ALU2, _ALU3, _STEP, _BRA, _MOV, _MOV_F32, _MOV_BITS = range(8)
_F32, _U32 = struct.Struct("<f"), struct.Struct("<I")
_STRUCTS = {fmt: struct.Struct(fmt) for fmt in set(_FMT.values())}


def gpu_threads(manifest: Mapping[str, Any], dims: Mapping[str, int]) -> int:
    """GPU threads of all a manifest's launches together: what this interpreter runs one by one."""
    total = 0
    for kernel in manifest["kernels"]:
        x, y, z = mf.workgroup_counts(kernel, dims)
        bx, by, bz = kernel["workgroup_size"]
        total += x * y * z * bx * by * bz
    return total


@dataclass
class _Memory:
    regions: list[tuple[int, bytearray, str]]  # (base address, bytes, name)

    # (base, end, bytes) of the region found last: most accesses fall in it again
    last: tuple[int, int, bytearray] = field(default=(0, 0, bytearray()), init=False, repr=False)

    def find(self, addr: int, size: int) -> tuple[bytearray, int]:
        base, end, data = self.last
        if base <= addr and addr + size <= end:
            return data, addr - base
        for base, data, _ in self.regions:
            if base <= addr and addr + size <= base + len(data):
                self.last = (base, base + len(data), data)
                return data, addr - base
        for base, data, name in self.regions:
            if base - 0x10000 <= addr < base + len(data) + 0x10000:
                off = addr - base
                if off < 0 or off + size > len(data):
                    raise PtxInterpError(f"out-of-bounds access to `{name}` at byte {off}")
                return data, off
        raise PtxInterpError(f"access to unmapped address {addr:#x}")


class _Interp:
    def __init__(self, funcs: dict[str, _Function], memory: _Memory, params: dict) -> None:
        self.funcs = funcs
        self.global_mem = memory
        self.params = params
        self.symbols: dict[str, int] = {}
        self.shared_mem = _Memory([])
        self.specials: dict[str, tuple[int, int, int]] = {}
        # Race detection on shared memory: the last writer and the readers of each
        # address in the current epoch (the stretch between two barriers).
        self.epoch = 0
        self.writes: dict[int, tuple[Any, int]] = {}
        self.reads: dict[int, tuple[int, set]] = {}
        # What the launch did, for benchmarks/kernel_static.py: instructions issued
        # (predicated-off ones included, as a GPU issues them) and global accesses.
        self.executed = 0
        self.global_bytes = {"ld": 0, "st": 0}
        self.global_unique: dict[str, set[tuple[int, int]]] = {"ld": set(), "st": set()}
        # Each function's code decoded once more for `run`: the common instructions as
        # `_Step`s whose operands are all keys of the registers, as constants, special
        # registers and shared symbols sit in every thread's registers under `$` names.
        self.compiled: dict[str, list[tuple[Any, ...]]] = {}
        # pc -> (function, instructions) of the straight-line code from pc, as it is reached
        self.blocks: dict[str, dict[int, tuple[Any, int] | bool]] = {}
        self.constants: dict[tuple[type, Any], str] = {}  # (type, value or bits) -> its key
        self.constant_values: dict[str, Any] = {}  # its key -> the value

    def value(self, regs: dict[str, Any], op: Operand) -> Any:
        if type(op) is str:
            try:
                return regs[op]
            except KeyError:
                raise PtxInterpError(f"read of the undefined register {op}") from None
        kind = op[0]
        if kind == "const":
            return op[1]
        if kind == "special":
            return (regs["%tid"] if op[1] == "tid" else self.specials[op[1]])[op[2]]
        if kind == "sym":
            return self.symbols[op[1]]
        return self.value(regs, op[1]) + op[2]

    def run(self, fn: _Function, regs: dict[str, Any]) -> Iterator[None]:
        """One thread's execution of `fn`; it yields at each `bar.sync` and warp rendezvous."""
        code, blocks = self.compiled[fn.name], self.blocks[fn.name]
        pc, end, executed = 0, len(code), 0
        try:
            while pc < end:
                block = blocks.get(pc)
                if block is None:
                    block = blocks[pc] = self._straight_line(code, pc) or False
                if block:  # the instructions from pc to a branch or rendezvous, at once
                    executed += block[1]
                    pc = block[0](regs)
                    continue
                ins = code[pc]
                pc += 1
                executed += 1
                if ins[0] is not None and regs[ins[0]] == ins[1]:
                    continue
                if (yield from self._slow(fn, regs, ins)):
                    return
        except KeyError as e:
            name = e.args[0] if e.args else None
            if type(name) is str and name.startswith("%") and name not in regs:
                raise PtxInterpError(f"read of the undefined register {name}") from None
            raise
        finally:
            self.executed += executed

    def _straight_line(self, code: list[tuple[Any, ...]], start: int) -> tuple[Any, int] | None:
        """The compiled instructions from `start` up to a branch (included) or one left as
        parsed (excluded), as one Python function of the registers that returns the next
        pc, and their count; None where `start` holds one left as parsed."""
        namespace: dict[str, Any] = {"_F32": _F32, "_U32": _U32}
        lines, pc, closed = [], start, False
        while pc < len(code) and not closed:
            ins = code[pc]
            guard, neg, kind = ins[0], ins[1], ins[2]
            if type(kind) is str:
                break
            pc += 1
            if kind in (_ALU1, _ALU2, _ALU3, _STEP):
                name = f"f{pc}"
                namespace[name] = ins[3]
                args = ", ".join(f"r[{k!r}]" for k in ins[5:])
                line = f"{name}(r)" if kind == _STEP else f"r[{ins[4]!r}] = {name}({args})"
            elif kind == _BRA:
                line, closed = f"return {ins[3]}", guard is None
            elif kind == _MOV:
                line = f"r[{ins[3]!r}] = r[{ins[4]!r}]"
            else:
                change = (
                    "_F32.unpack(_U32.pack(v))[0] if type(v) is int"
                    if kind == _MOV_F32
                    else "_U32.unpack(_F32.pack(v))[0] if type(v) is float"
                )
                line = f"v = r[{ins[4]!r}]; r[{ins[3]!r}] = {change} else v"
            if guard is not None:  # skipped where the predicate equals `neg`
                lines.append(f"if r[{guard!r}] != {neg!r}:")
                line = "    " + line
            lines.append(line)
            if kind == _BRA and guard is not None:
                break  # a conditional branch ends the line too
        if pc == start:
            return None
        if not closed:
            lines.append(f"return {pc}")
        source = "def straight(r):\n" + "".join(f"    {line}\n" for line in lines)
        exec(compile(source, f"<ptx {start}-{pc}>", "exec"), namespace)
        return namespace["straight"], pc - start

    def _slow(self, fn: _Function, regs: dict[str, Any], ins: tuple[Any, ...]) -> Iterator[Any]:
        """An instruction `_compile` left as parsed; True after `ret`."""
        value = self.value
        kind = ins[2]
        if kind == "alu":
            regs[ins[4]] = ins[3](*[value(regs, o) for o in ins[5]])
        elif kind == "mov":
            v = value(regs, ins[4])
            if ins[5] == "f32" and type(v) is int:
                v = struct.unpack("<f", struct.pack("<I", v))[0]
            elif ins[5] in ("b32", "b16") and type(v) is float:
                v = struct.unpack("<I", struct.pack("<f", v))[0]
            regs[ins[3]] = v
        elif kind == "ld":
            regs[ins[5]] = self.load(regs, ins[3], ins[4], ins[6])
        elif kind == "ldv":
            self.load_vector(regs, ins[3], ins[4], ins[5], ins[6])
        elif kind == "cp":
            self.copy_async(regs, ins[3], ins[4], ins[5], ins[6])
        elif kind == "cpcommit":
            self.commit_group(regs)
        elif kind == "cpwait":
            self.wait_group(regs, ins[3])
        elif kind == "st":
            self.store(regs, ins[3], ins[4], ins[5], ins[6])
        elif kind == "gldv":
            for r, v in zip(ins[4], self.vector(regs, ins[3], ins[5], len(ins[4])), strict=True):
                regs[r] = v
        elif kind == "gstv":
            self.vector(regs, ins[3], ins[4], len(ins[5]), [value(regs, v) for v in ins[5]])
        elif kind == "red":
            self.reduce(regs, ins[3], ins[4], ins[5])
        elif kind == "atom":
            regs[ins[3]] = self.reduce(regs, "u32", ins[4], ins[5])
        elif kind == "fence":
            pass
        elif kind == "ret":
            return True
        elif kind == "bar.sync":
            yield None
        elif kind == "shfl":
            a, b, c, mask = (value(regs, o) for o in ins[5])
            v = yield (ins[3], a, b, c, mask)
            if ins[6] == "f32" and type(v) is int:
                v = struct.unpack("<f", struct.pack("<I", v))[0]
            elif ins[6] != "f32" and type(v) is float:
                v = struct.unpack("<I", struct.pack("<f", v))[0]
            regs[ins[4]] = v
        elif kind == "ldm":
            d = yield ("ldm", (ins[3], ins[4]), value(regs, ins[6]), regs["%tid"])
            for r, v in zip(ins[5], d, strict=True):
                regs[r] = v
        elif kind == "wgmma":
            a, b, scale = (value(regs, o) for o in ins[4:7])
            acc = [value(regs, r) for r in ins[3]] if scale else None
            d = yield ("wgmma", ins[7], a, b, acc, regs["%tid"])
            regs.setdefault("%wgmma_open", []).append(list(zip(ins[3], d, strict=True)))
        elif kind == "wgcommit":
            regs.setdefault("%wgmma_groups", []).append(regs.pop("%wgmma_open", []))
        elif kind == "wgwait":
            groups = regs.get("%wgmma_groups", [])
            cut = max(len(groups) - ins[3], 0)
            for group in groups[:cut]:
                for results in group:
                    regs.update(results)
            regs["%wgmma_groups"] = groups[cut:]
        elif kind == "mma":
            frags = tuple([value(regs, r) for r in ins[k]] for k in (4, 5, 6))
            d = yield ("mma", ins[7], *frags)
            for r, v in zip(ins[3], d, strict=True):
                regs[r] = v
        else:
            self.call(regs, ins)

    def _key(self, op: Operand) -> str | None:
        """The key of the registers that holds operand `op` (None for an address)."""
        if type(op) is str:
            return op
        kind = op[0]
        if kind == "const":
            v = op[1]
            # by type and bits: True and 1, 0.0 and -0.0, two nans are other constants
            ident = (type(v), struct.pack("<d", v) if type(v) is float else v)
            key = self.constants.get(ident)
            if key is None:
                key = self.constants[ident] = f"$const{len(self.constants)}"
                self.constant_values[key] = v
            return key
        if kind == "special":
            return f"${op[1]}.{op[2]}"
        if kind == "sym":
            return f"$sym.{op[1]}"
        return None

    def _compile(self, fn: _Function, ins: tuple[Any, ...]) -> tuple[Any, ...]:
        """A parsed instruction as `run` executes it fastest: ALU operations and moves with
        their operands as register keys, loads and stores as closures (`_STEP`), branches
        to their index; any other stays as parsed, for `_slow`."""
        guard, neg, kind = ins[0], ins[1], ins[2]
        if kind == "alu":
            keys = [self._key(o) for o in ins[5]]
            if None not in keys and 1 <= len(keys) <= 3:
                return (guard, neg, (_ALU1, _ALU2, _ALU3)[len(keys) - 1], ins[3], ins[4], *keys)
        elif kind == "mov":
            src = self._key(ins[4])
            if src is not None:
                mode = {"f32": _MOV_F32, "b32": _MOV_BITS, "b16": _MOV_BITS}.get(ins[5], _MOV)
                return (guard, neg, mode, ins[3], src)
        elif kind == "bra":
            if ins[3] in fn.labels:
                return (guard, neg, _BRA, fn.labels[ins[3]])
        elif kind in ("ld", "st", "ldv") and ins[3] in ("global", "shared"):
            addr = ins[6] if kind != "st" else ins[5]
            if type(addr) is tuple and addr[0] == "addr" and self._key(addr[1]) is not None:
                base, offset = self._key(addr[1]), addr[2]
                if kind == "ld":
                    step = self._load_step(ins[3], ins[4], ins[5], base, offset)
                    return (guard, neg, _STEP, step)
                if kind == "ldv" and ins[3] == "shared":
                    step = self._load_vector_step(ins[4], ins[5], base, offset)
                    return (guard, neg, _STEP, step)
                value = self._key(ins[6])
                if kind == "st" and value is not None:
                    step = self._store_step(ins[3], ins[4], base, offset, value)
                    return (guard, neg, _STEP, step)
        return ins

    def _load_step(
        self, space: str, fmt: str, dst: str, base: str, offset: int
    ) -> Callable[[dict[str, Any]], None]:
        """`ld.global` / `ld.shared` of one element, as `load`."""
        layout = _STRUCTS[fmt]
        size, unpack_from = layout.size, layout.unpack_from
        if space == "global":
            find, counts = self.global_mem.find, self.global_bytes
            unique = self.global_unique["ld"]

            def load_global(regs: dict[str, Any]) -> None:
                where = regs[base] + offset
                data, off = find(where, size)
                counts["ld"] += size
                unique.add((where, size))
                regs[dst] = unpack_from(data, off)[0]

            return load_global

        read_check = self._read_check

        def load_shared(regs: dict[str, Any]) -> None:
            where = regs[base] + offset
            read_check(regs, where)
            data, off = self.shared_mem.find(where, size)
            regs[dst] = unpack_from(data, off)[0]

        return load_shared

    def _load_vector_step(
        self, fmt: str, dsts: list[str], base: str, offset: int
    ) -> Callable[[dict[str, Any]], None]:
        """`ld.shared.vN`, as `load_vector`."""
        layout = _STRUCTS[fmt]
        size, unpack_from = layout.size, layout.unpack_from
        placed = [(k * size, d) for k, d in enumerate(dsts)]
        width = size * len(dsts)
        read_check = self._read_check
        whole = struct.Struct(fmt[0] + str(len(dsts)) + fmt[1:]).unpack_from
        writes, reads = self.writes, self.reads  # cleared, never replaced, at each block

        def load_vector(regs: dict[str, Any]) -> None:
            where = regs[base] + offset
            if where % width:
                raise PtxInterpError(f"misaligned {len(dsts)}-wide vector load at {where:#x}")
            try:
                data, off = self.shared_mem.find(where, width)
            except PtxInterpError:  # the element past the bounds names it, as one by one
                for k, d in placed:
                    read_check(regs, where + k)
                    data, off = self.shared_mem.find(where + k, size)
                    regs[d] = unpack_from(data, off)[0]
                return
            tid, epoch = regs["%tid"], self.epoch
            for k, _ in placed:  # `_read_check` of each element, inline
                last = writes.get(where + k)
                if last is not None and last[1] == epoch and last[0] != tid:
                    self.race_check(regs, where + k, write=False)  # raises
                readers = reads.get(where + k)
                if readers is None or readers[0] != epoch:
                    reads[where + k] = (epoch, {tid})
                else:
                    readers[1].add(tid)
            for (_, d), v in zip(placed, whole(data, off), strict=True):
                regs[d] = v

        return load_vector

    def _store_step(
        self, space: str, fmt: str, base: str, offset: int, value: str
    ) -> Callable[[dict[str, Any]], None]:
        """`st.global` / `st.shared` of one element, as `store`."""
        layout = _STRUCTS[fmt]
        size, pack_into = layout.size, layout.pack_into
        if space == "global":
            find, counts = self.global_mem.find, self.global_bytes
            unique = self.global_unique["st"]

            def store_global(regs: dict[str, Any]) -> None:
                where = regs[base] + offset
                counts["st"] += size
                unique.add((where, size))
                data, off = find(where, size)
                pack_into(data, off, regs[value])

            return store_global

        def store_shared(regs: dict[str, Any]) -> None:
            where = regs[base] + offset
            self.race_check(regs, where, write=True)
            data, off = self.shared_mem.find(where, size)
            pack_into(data, off, regs[value])

        return store_shared

    def call(self, regs: dict[str, Any], ins: tuple[Any, ...]) -> None:
        callee = self.funcs[ins[3]]
        frame = {p: regs[a] for p, a in zip(callee.params, ins[5], strict=True)}
        frame["$consts"] = regs["$consts"]
        frame.update(regs["$consts"])
        for _ in self.run(callee, frame):
            raise PtxInterpError(f"`bar.sync` or `shfl.sync` inside the helper `{callee.name}`")
        assert callee.ret is not None
        regs[ins[4]] = frame[callee.ret]

    def load(self, regs: dict[str, Any], space: str, fmt: str, addr: Operand) -> Any:
        size = struct.calcsize(fmt)
        if space == "param":
            data, off = self.params[addr[1][1]], addr[2]
        elif space == "global":
            where = self.value(regs, addr)
            data, off = self.global_mem.find(where, size)
            self.global_bytes["ld"] += size
            self.global_unique["ld"].add((where, size))
        else:
            where = self.value(regs, addr)
            self.race_check(regs, where, write=False)
            data, off = self.shared_mem.find(where, size)
        return struct.unpack(fmt, data[off : off + size])[0]

    def vector(
        self, regs: dict[str, Any], fmt: str, addr: Operand, lanes: int, values: list | None = None
    ) -> list:
        """A global vector load (`values` None) or store of `lanes` elements: one access,
        which the hardware requires aligned to its whole size."""
        size = struct.calcsize(fmt)
        where = self.value(regs, addr)
        if where % (size * lanes):
            raise PtxInterpError(
                f"misaligned {size * lanes}-byte vector access at {where:#x} "
                f"(byte {where % (1 << 40)} of its buffer)"
            )
        data, off = self.global_mem.find(where, size * lanes)
        kind = "ld" if values is None else "st"
        self.global_bytes[kind] += size * lanes
        self.global_unique[kind].add((where, size * lanes))
        if values is None:
            return [
                struct.unpack(fmt, data[off + k * size : off + (k + 1) * size])[0]
                for k in range(lanes)
            ]
        for k, v in enumerate(values):
            data[off + k * size : off + (k + 1) * size] = struct.pack(fmt, v)
        return []

    def load_vector(
        self, regs: dict[str, Any], space: str, fmt: str, dsts: list[str], addr: Operand
    ) -> None:
        """`ld.space.vN`: N consecutive elements; the address must be aligned to all N."""
        size = struct.calcsize(fmt)
        where = self.value(regs, addr)
        if where % (size * len(dsts)):
            raise PtxInterpError(f"misaligned {len(dsts)}-wide vector load at {where:#x}")
        for k, d in enumerate(dsts):
            regs[d] = self.load(regs, space, fmt, ("addr", ("const", where), k * size))

    # cp.async: the source is read when the copy is issued (global memory a kernel only
    # reads does not change), the shared destination written only when a wait completes
    # its group, so a thread that reads the tile before `cp.async.wait_*` sees stale data
    # and a missing wait or barrier shows as a wrong result or a race.

    def copy_async(
        self, regs: dict[str, Any], dst: Operand, src: Operand, size: int, src_size: Operand
    ) -> None:
        d, a, n = self.value(regs, dst), self.value(regs, src), self.value(regs, src_size)
        if d % size or a % size:
            raise PtxInterpError(f"cp.async of {size} bytes at misaligned {d:#x} <- {a:#x}")
        if not 0 <= n <= size:
            raise PtxInterpError(f"cp.async src-size {n} above its cp-size {size}")
        data = b""
        if n:
            mem, off = self.global_mem.find(a, n)
            data = bytes(mem[off : off + n])
            self.global_bytes["ld"] += n
            self.global_unique["ld"].add((a, n))
        self.shared_mem.find(d, size)  # bounds-checked when issued too
        regs.setdefault("%async_open", []).append((d, data + bytes(size - n)))

    def commit_group(self, regs: dict[str, Any]) -> None:
        regs.setdefault("%async_groups", []).append(regs.pop("%async_open", []))

    def wait_group(self, regs: dict[str, Any], keep: int | None) -> None:
        """Complete every committed group but the newest `keep` (None: wait_all, which
        commits the open copies first and waits for all)."""
        if keep is None:
            self.commit_group(regs)
            keep = 0
        groups = regs.get("%async_groups", [])
        cut = max(len(groups) - keep, 0)
        done, regs["%async_groups"] = groups[:cut], groups[cut:]
        for group in done:
            for where, data in group:
                for k in range(0, len(data), 4):
                    self.race_check(regs, where + k, write=True)
                mem, off = self.shared_mem.find(where, len(data))
                mem[off : off + len(data)] = data

    def _read_check(self, regs: dict[str, Any], address: int) -> None:
        """`race_check` of a read, with its common case (no writer this epoch) first."""
        tid, epoch = regs["%tid"], self.epoch
        last = self.writes.get(address)
        if last is not None and last[1] == epoch and last[0] != tid:
            self.race_check(regs, address, write=False)  # raises
        readers = self.reads.get(address)
        if readers is None or readers[0] != epoch:
            self.reads[address] = (epoch, {tid})
        else:
            readers[1].add(tid)

    def race_check(self, regs: dict[str, Any], address: int, write: bool) -> None:
        tid, epoch = regs["%tid"], self.epoch
        last = self.writes.get(address)
        if last is not None and last[1] == epoch and last[0] != tid:
            what = "writes" if write else "reads"
            raise PtxInterpError(
                f"data race on shared memory: thread {tid} {what} {address:#x}, which thread "
                f"{last[0]} wrote since the last bar.sync"
            )
        readers = self.reads.get(address)
        if write:
            if readers is not None and readers[0] == epoch and readers[1] - {tid}:
                raise PtxInterpError(
                    f"data race on shared memory: thread {tid} writes {address:#x}, which "
                    f"threads {sorted(readers[1] - {tid})[:3]} read since the last bar.sync"
                )
            self.writes[address] = (tid, epoch)
        elif readers is None or readers[0] != epoch:
            self.reads[address] = (epoch, {tid})
        else:
            readers[1].add(tid)

    def reduce(self, regs: dict[str, Any], t: str, addr: Operand, v: Operand) -> Any:
        """`red.global.add.t` / `atom.global.add.t`: a read-modify-write no other thread
        interleaves with (threads only switch at `bar.sync`), wrapping for integers,
        rounded to float32 for f32; the old value."""
        fmt = _FMT[t]
        data, off = self.global_mem.find(self.value(regs, addr), 4)
        old = struct.unpack(fmt, data[off : off + 4])[0]
        add = self.value(regs, v)
        new = _ALU["add.rn.f32"](old, add) if t == "f32" else (old + add) & M32
        data[off : off + 4] = struct.pack(fmt, new)
        return old

    def store(self, regs: dict[str, Any], space: str, fmt: str, addr: Operand, v: Operand) -> None:
        size = struct.calcsize(fmt)
        where = self.value(regs, addr)
        if space == "shared":
            self.race_check(regs, where, write=True)
        if space == "global":
            self.global_bytes["st"] += size
            self.global_unique["st"].add((where, size))
        mem = self.global_mem if space == "global" else self.shared_mem
        data, off = mem.find(where, size)
        data[off : off + size] = struct.pack(fmt, self.value(regs, v))

    def launch(self, entry: str, grid: tuple[int, int, int], reverse: bool = False) -> None:
        """Run every block of the grid, one after another: in order of their linear id, or
        with `reverse` the other way round (a kernel whose result depends on which block
        runs last, or that waits for a block run later, then shows it)."""
        fn = self.funcs[entry]
        self.specials = {"nctaid": grid, "ntid": fn.block}
        for name, func in self.funcs.items():  # every constant known before threads start
            if name not in self.compiled:
                self.compiled[name] = [self._compile(func, ins) for ins in func.code]
                self.blocks[name] = {}
        blocks = [
            (cx, cy, cz) for cz in range(grid[2]) for cy in range(grid[1]) for cx in range(grid[0])
        ]
        for ctaid in reversed(blocks) if reverse else blocks:
            self.specials["ctaid"] = ctaid
            self._block(fn)

    def _block(self, fn: _Function) -> None:
        # small addresses (a wgmma descriptor holds 14 bits of address / 16), 1 KiB aligned,
        # 4 KiB apart so that an access just past an array touches no other
        regions, base = [], 0x1000
        for name, size in fn.shared.items():
            self.symbols[name] = base
            regions.append((base, bytearray(size), name))
            base += -(-(size + 0x1000) // 0x400) * 0x400
        self.shared_mem = _Memory(regions)
        self.writes.clear()
        self.reads.clear()
        bx, by, bz = fn.block
        # what the compiled code reads as registers: constants, special registers, symbols
        block_consts = dict(self.constant_values)
        for name in ("ntid", "nctaid", "ctaid"):
            for axis, v in enumerate(self.specials[name]):
                block_consts[f"${name}.{axis}"] = v
        for name, address in self.symbols.items():
            block_consts[f"$sym.{name}"] = address
        threads = {}
        for z in range(bz):
            for y in range(by):
                for x in range(bx):
                    consts = {**block_consts, "$tid.0": x, "$tid.1": y, "$tid.2": z}
                    regs = {"%tid": (x, y, z), "$consts": consts, **consts}
                    threads[x + bx * (y + by * z)] = self.run(fn, regs)
        # Each round runs every thread that can go on to its next `bar.sync` or `shfl.sync`
        # (or its end); then the warps whose lanes all wait at a `shfl.sync` exchange and
        # go on, and when every live thread waits at `bar.sync`, the barrier opens.
        runnable: dict[int, Any] = dict.fromkeys(threads)
        waiting: dict[int, Any] = {}  # thread -> its request: None (bar.sync) or a shuffle
        exited_since_barrier = False
        while threads:
            for t, sent in runnable.items():
                try:
                    waiting[t] = threads[t].send(sent) if sent is not None else next(threads[t])
                except StopIteration:
                    del threads[t]
                    exited_since_barrier = True
            runnable = self._shuffles(waiting, threads, fn.block)
            if runnable:
                continue
            if not threads:
                break
            if len(waiting) != len(threads) or any(r is not None for r in waiting.values()):
                stuck = sorted(t for t, r in waiting.items() if r is not None)
                raise PtxInterpError(
                    f"`shfl.sync` in block {self.specials['ctaid']} waits for lanes that are "
                    f"elsewhere (threads {stuck[:4]})"
                )
            if exited_since_barrier:
                raise PtxInterpError(
                    f"`bar.sync` in block {self.specials['ctaid']} reached by {len(waiting)} "
                    f"of the block's threads; the others exited"
                )
            runnable = dict.fromkeys(waiting)
            waiting = {}
            exited_since_barrier = False
            self.epoch += 1

    def _shuffles(
        self, waiting: dict[int, Any], threads: dict[int, Any], block: tuple[int, ...]
    ) -> dict[int, Any]:
        """Complete the shuffles of every warp whose named lanes all wait at one; each of
        those threads -> the value it receives."""
        size = block[0] * block[1] * block[2]
        warps: dict[int, list[int]] = {}
        for t, request in waiting.items():
            if request is not None:
                warps.setdefault(t // WARP, []).append(t)
        done: dict[int, Any] = {}
        groups: dict[int, list[int]] = {}
        for warp, lanes in warps.items():
            if any(waiting[t][0] == "wgmma" for t in lanes):
                groups.setdefault(warp // 4, []).extend(lanes)
        for group, lanes in groups.items():
            done.update(self._wgmma(group, lanes, waiting, threads, size))
        for warp, lanes in warps.items():
            base = warp * WARP
            if warp // 4 in groups:
                continue
            if any(waiting[t][0] == "mma" for t in lanes):
                done.update(self._mma(warp, lanes, waiting, threads, size))
                continue
            if any(waiting[t][0] == "ldm" for t in lanes):
                done.update(self._ldmatrix(warp, lanes, waiting, threads, size))
                continue
            masks = {waiting[t][4] for t in lanes}
            if len(masks) != 1:
                raise PtxInterpError(f"`shfl.sync`: warp {warp} disagrees on the member mask")
            (mask,) = masks
            named = {base + k for k in range(WARP) if mask >> k & 1}
            if not named <= set(range(size)):
                raise PtxInterpError(f"`shfl.sync`: the mask {mask:#x} names a lane past the block")
            if not set(lanes) <= named:
                raise PtxInterpError(f"`shfl.sync` by a lane the mask {mask:#x} omits")
            if any(t not in threads for t in named):
                raise PtxInterpError(f"`shfl.sync`: the mask {mask:#x} names an exited lane")
            if set(lanes) != named:
                continue  # some named lanes have not arrived yet
            for t in lanes:
                mode, _, b, c, _ = waiting[t]
                lane = t - base
                bval, cval, seg = b & 31, c & 31, (c >> 8) & 31
                max_lane = (lane & seg) | (cval & ~seg & 31)
                min_lane = lane & seg
                if mode == "up":
                    j, ok = lane - bval, lane - bval >= max_lane
                elif mode == "down":
                    j, ok = lane + bval, lane + bval <= max_lane
                elif mode == "bfly":
                    j, ok = lane ^ bval, (lane ^ bval) <= max_lane
                else:
                    j = min_lane | (bval & ~seg & 31)
                    ok = j <= max_lane
                j = j if ok else lane
                if base + j not in named:
                    raise PtxInterpError(f"`shfl.sync` reads lane {j}, outside the mask {mask:#x}")
                done[t] = waiting[base + j][1]
            for t in lanes:
                del waiting[t]
        return done

    def _ldmatrix(
        self, warp: int, lanes: list[int], waiting: dict[int, Any], threads: dict, size: int
    ) -> dict[int, Any]:
        """Complete one warp's `ldmatrix.sync.aligned.m8n8.xN[.trans].shared.b16` once all 32
        lanes wait at one (PTX ISA, "Warp-level matrix load instruction: ldmatrix"): lane
        `8 j + r` gives the address of row r of matrix j (16 bytes, 16-byte aligned, in
        shared memory), read by every lane it goes to (race detection); lane l receives in its
        j-th register the elements at row `l / 4`, columns `2 (l % 4)`, `+ 1` of matrix j,
        or with `.trans` at rows `2 (l % 4)`, `+ 1` of column `l / 4`, the first in the low
        half. With x1 and x2 only the first 8 or 16 lanes' addresses are used."""
        base = warp * WARP
        named = set(range(base, base + WARP))
        if not named <= set(range(size)) or any(t not in threads for t in named):
            raise PtxInterpError(f"`ldmatrix` in warp {warp}, which is not whole")
        if any(waiting[t][0] != "ldm" for t in lanes):
            raise PtxInterpError(f"warp {warp}: lanes at `ldmatrix` and elsewhere at once")
        if set(lanes) != named:
            return {}  # some lanes have not arrived yet
        shapes = {waiting[t][1] for t in lanes}
        if len(shapes) != 1:
            raise PtxInterpError(f"warp {warp}: lanes at `ldmatrix`es of other shapes at once")
        ((count, trans),) = shapes
        mats = []
        for j in range(count):
            rows = []
            for r in range(8):
                where = waiting[base + 8 * j + r][2]
                if where % 16:
                    raise PtxInterpError(f"`ldmatrix` row address {where:#x} not 16-byte aligned")
                # read by each lane that receives part of the row (row r's pairs go to
                # lanes 4r .. 4r + 3; transposed, its elements to lanes 4g + r / 2)
                receivers = (
                    [4 * r + k for k in range(4)] if trans else [4 * g + r // 2 for g in range(8)]
                )
                for lane in receivers:
                    regs = {"%tid": waiting[base + lane][3]}
                    for w in range(4):
                        self.race_check(regs, where + 4 * w, write=False)
                data, off = self.shared_mem.find(where, 16)
                rows.append(struct.unpack("<8H", data[off : off + 16]))
            mats.append(rows)
        out = {}
        for lane in range(WARP):
            g, q = lane // 4, lane % 4
            regs = []
            for rows in mats:
                if trans:
                    lo, hi = rows[2 * q][g], rows[2 * q + 1][g]
                else:
                    lo, hi = rows[g][2 * q], rows[g][2 * q + 1]
                regs.append(lo | hi << 16)
            out[base + lane] = regs
        for t in lanes:
            del waiting[t]
        return out

    def _mma(
        self, warp: int, lanes: list[int], waiting: dict[int, Any], threads: dict, size: int
    ) -> dict[int, Any]:
        """Complete one warp's `mma.sync.aligned` once all 32 of its lanes wait at one (the
        instruction is warp-collective: a lane missing, exited or at another instruction
        is an error, as PTX leaves it undefined)."""
        base = warp * WARP
        named = set(range(base, base + WARP))
        if not named <= set(range(size)):
            raise PtxInterpError(f"`mma.sync` in warp {warp}, which the block fills partly")
        if any(t not in threads for t in named):
            raise PtxInterpError(f"`mma.sync` in warp {warp}, some of whose lanes exited")
        if any(waiting[t][0] != "mma" for t in lanes):
            raise PtxInterpError(f"warp {warp}: lanes at `mma.sync` and at `shfl.sync` at once")
        if set(lanes) != named:
            return {}  # some lanes have not arrived yet
        kinds = {waiting[base + k][1] for k in range(WARP)}
        if len(kinds) != 1:
            raise PtxInterpError(f"warp {warp}: lanes at `mma.sync`s of other shapes at once")
        (kind,) = kinds
        frags = [waiting[base + k][2:] for k in range(WARP)]
        d = _mma_m16n8k8(frags) if kind == "tf32" else _mma_m16n8k16(frags, kind)
        for t in lanes:
            del waiting[t]
        return {base + k: d[k] for k in range(WARP)}

    def _wgmma(
        self, group: int, lanes: list[int], waiting: dict[int, Any], threads: dict, size: int
    ) -> dict[int, Any]:
        """Complete one warpgroup's `wgmma.mma_async` once all 128 of its threads wait at
        one with the same shape and descriptors (PTX ISA, "Asynchronous Warpgroup Level
        Matrix Multiply-Accumulate"): D (64 x N) = A (64 x 16) B (16 x N) + D, or without
        scale-d A B alone. Thread `128 g + 32 w + l` holds D's rows `16 w + l / 4` and `+ 8`,
        its register j row `16 w + l / 4 + 8 (j / 2 % 2)`, column `8 (j / 4) + 2 (l % 4) +
        j % 2` ("Register Fragments: Matrix D" of wgmma .m64nNk16). Each element is summed
        exactly and rounded once, as `_mma_m16n8k16`; every word of the operands is read as
        the warpgroup's first thread (race detection)."""
        base = 4 * WARP * group
        named = set(range(base, base + 4 * WARP))
        if not named <= set(range(size)) or any(t not in threads for t in named):
            raise PtxInterpError(f"`wgmma` in warpgroup {group}, which is not whole")
        if any(waiting[t][0] != "wgmma" for t in lanes):
            raise PtxInterpError(f"warpgroup {group}: threads at `wgmma` and elsewhere at once")
        if set(lanes) != named:
            return {}  # some threads have not arrived yet
        shapes = {(waiting[t][1], waiting[t][2], waiting[t][3]) for t in lanes}
        if len(shapes) != 1:
            raise PtxInterpError(
                f"warpgroup {group}: threads at `wgmma` with other shapes or descriptors"
            )
        ((shape, a_desc, b_desc),) = shapes
        n, kind, trans_a, trans_b = shape
        regs = {"%tid": waiting[base][5]}
        a = self._wgmma_operand(a_desc, 64, trans_a, kind, regs)
        b = self._wgmma_operand(b_desc, n, trans_b, kind, regs)  # b[n][k]
        out = {}
        for t in range(base, base + 4 * WARP):
            w, lane = (t - base) // WARP, (t - base) % WARP
            acc = waiting[t][4]
            d = []
            for j in range(n // 2):
                row = 16 * w + lane // 4 + 8 * (j // 2 % 2)
                col = 8 * (j // 4) + 2 * (lane % 4) + j % 2
                c = 0.0 if acc is None else acc[j]
                products = (a[row][k] * b[col][k] for k in range(16))
                d.append(_double_to_f32(math.fsum([c, *products])))
            out[t] = d
        for t in lanes:
            del waiting[t]
        return out

    def _wgmma_operand(
        self, desc: int, rows: int, trans: int, kind: str, regs: dict[str, Any]
    ) -> list[list[float]]:
        """The `rows` x 16 operand (A as M x K, B as N x K) a matrix descriptor names."""
        start = (desc & 0x3FFF) << 4
        lbo = (desc >> 16 & 0x3FFF) << 4
        sbo = (desc >> 32 & 0x3FFF) << 4
        base_offset, swizzle = desc >> 49 & 7, desc >> 62 & 3
        if swizzle or base_offset:
            raise PtxInterpError(
                f"a wgmma descriptor with swizzle mode {swizzle} and base offset {base_offset}:"
                " the interpreter models only no swizzle"
            )
        to_f32 = _f16_to_f32 if kind == "f16" else _bf16_to_f32
        out = []
        for r in range(rows):
            row = []
            for k in range(16):
                where = start + _wgmma_element(r, k, lbo, sbo, trans)
                self.race_check(regs, where & ~3, write=False)
                data, off = self.shared_mem.find(where, 2)
                row.append(to_f32(struct.unpack("<H", data[off : off + 2])[0]))
            out.append(row)
        return out


def _wgmma_element(mn: int, k: int, lbo: int, sbo: int, trans: int) -> int:
    """The byte offset of element (mn, k) of a 16-bit wgmma operand without swizzle, in
    the PTX ISA's canonical layouts (elements of 2 bytes, T = 8 to a 16-byte row of a core
    matrix): K-major `((8,m),(T,2k)):((1T,SBO),(1,LBO))`, core matrices of 8 rows along
    M/N by 8 k each, rows 16 bytes apart, k-adjacent ones LBO apart and M/N-adjacent ones
    SBO; MN-major (`trans`) `((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))`, core matrices of 8 k
    rows by 8 M/N each, M/N-adjacent ones SBO apart and k-adjacent ones LBO."""
    if trans:
        return 2 * (mn % 8) + sbo * (mn // 8) + 16 * (k % 8) + lbo * (k // 8)
    return 16 * (mn % 8) + sbo * (mn // 8) + 2 * (k % 8) + lbo * (k // 8)


def _covered(accesses: set[tuple[int, int]]) -> int:
    """The bytes that `(address, size)` accesses cover, each byte once: a row read 4 wide
    and then again one element at a time counts once."""
    total, end = 0, None
    for where, size in sorted(accesses):
        start = where if end is None else max(where, end)
        if where + size > start:
            total += where + size - start
        end = where + size if end is None else max(end, where + size)
    return total


def run_ptx_manifest_cpu(
    manifest: Mapping[str, Any],
    directory: Path,
    inputs: Mapping[str, Any],
    dims: Mapping[str, int],
    scalars: Mapping[str, float | int] | None = None,
    stats: list[dict[str, Any]] | None = None,
    reverse_blocks: bool = False,
    buffers: dict[str, bytearray] | None = None,
) -> dict[str, list]:
    """Run a PTX manifest's kernels in this interpreter; each output as a flat list.

    `reverse_blocks`: run each grid's blocks from the last to the first. `buffers`: a
    dict that keeps the buffers between calls (each filled on its first call: inputs
    uploaded, the others zeroed; later calls upload the inputs again and leave the
    scratch buffers as the last launch left them, as a host that reuses them does).

    With `stats`, one entry per launch is appended: its file, PTX instructions
    issued, and global bytes loaded and stored (all accesses, and the bytes at
    distinct addresses: the traffic with a cache that holds the launch's data)."""
    mf.check_format(manifest)
    mf.check_dims(manifest, dims)
    values = mf.prepare_inputs(manifest, inputs, dims)
    kept = buffers
    buffers = {}
    addresses: dict[str, int] = {}
    regions = []
    for k, buf in enumerate(manifest["buffers"]):
        count = mf.numel(mf.buffer_shape(buf, dims))
        nbytes = mf.buffer_bytes(buf, count, "ptx")
        if buf["role"] in ("input", "inout"):
            data = bytearray(mf.encode(values[buf["name"]], buf["dtype"]))
        elif kept is not None and buf["role"] == "scratch" and buf["name"] in kept:
            data = kept[buf["name"]]
        else:
            data = bytearray(nbytes)  # zeroed: outputs, scratch, `zero` counters
        if kept is not None:
            kept[buf["name"]] = data
        buffers[buf["name"]] = data
        addresses[buf["name"]] = (k + 1) << 40
        regions.append((addresses[buf["name"]], data, buf["name"]))
    uniform = mf.pack_uniform(manifest, dims, scalars)
    modules: dict[str, dict[str, _Function]] = {}
    for kernel in manifest["kernels"]:
        grid = mf.workgroup_counts(kernel, dims)
        if 0 in grid:
            continue
        file = kernel["file"]
        if file not in modules:
            modules[file] = _parse((Path(directory) / file).read_text())
        fn = modules[file][kernel["entry_point"]]
        assert tuple(kernel["workgroup_size"]) == fn.block, "blockDim must equal .reqntid"
        slots: dict[int, bytes] = {}
        for b in kernel["bindings"]:
            slots[b["binding"]] = struct.pack("<Q", addresses[b["buffer"]])
        if kernel["uniform_binding"] is not None:
            assert uniform is not None
            slots[kernel["uniform_binding"]["binding"]] = uniform
        assert sorted(slots) == list(range(len(fn.param_names))), (slots, fn.param_names)
        params = {name: slots[k] for k, name in enumerate(fn.param_names)}
        interp = _Interp(modules[file], _Memory(regions), params)
        interp.launch(kernel["entry_point"], grid, reverse=reverse_blocks)
        if stats is not None:
            stats.append(
                {
                    "file": file,
                    "executed": interp.executed,
                    "bytes": dict(interp.global_bytes),
                    "unique_bytes": {k: _covered(v) for k, v in interp.global_unique.items()},
                }
            )
    out = {}
    for buf in manifest["buffers"]:
        if buf["role"] in ("output", "inout"):
            count = mf.numel(mf.buffer_shape(buf, dims))
            out[buf["name"]] = mf.decode(bytes(buffers[buf["name"]]), buf["dtype"], count)
    return out
