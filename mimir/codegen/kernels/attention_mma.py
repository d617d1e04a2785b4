"""The `attention` launch on float16 or bfloat16 tensor cores (PTX): `softmax(f(q @ k.T)) @ v`
with both products `MmaSync`s of 16 x 8 x 16 into float32 accumulators, as FlashAttention-2
lays them out (`build`, where `fits` finds the operands).

A workgroup of 4 warps owns `ROWS` (64) query rows, warp w rows `16 w` .. `16 w + 15`, and
walks the keys `KEYS` (64) at a time. Lane l, with g = l / 4 and q = l % 4 (the PTX ISA's
fragment layout, `MmaSync`), holds:

- q's A fragments for its warp's rows, all D of them: D / 16 of 4 words, read once
  (`ldmatrix.x4`, rows `+ 8` in matrix 1, d `+ 8` in matrix 2);
- the block's scores S as 8 accumulator tiles of 16 x 8: tile j's are S[g][8j + 2q + e]
  and S[g + 8][8j + 2q + e] (e < 2);
- the output O as E / 8 such tiles: rows g and g + 8, columns 8j + 2q + e.

The accumulator layout of m16n8k16 is its A layout: P's A fragment for keys 16t .. 16t + 15
is tiles 2t and 2t + 1's accumulators, in that order, each p rounded to the half type
(`PackHalves`, `cvt.rn`) in registers, with no trip through workgroup memory. A row's max
is over the 4 lanes of its quad (`WarpReduce` of 4 lanes: `shfl.sync`); its sum l is one
more `MmaSync` per 16 keys, P times a B fragment of ones, whose accumulators hold the
row's sum of the p as rounded for P V in every lane.

Per block of keys (first the blocks of 64 keys, with no guard, then the last, partly past
the keys, where it is not proven whole): its rows of k and v copied into workgroup memory
(16-byte `cp.async`; rows past the keys zero-filled); S = q k.T, k's rows read with
`ldmatrix.x4` (a key's pairs of d are B's pairs of k: no `.trans`); the epilogue f per
score (-inf past the last key, its loads guarded); each row's max, the running max m grown
to it, O and l rescaled by exp(m_old - m), p = exp(x - m) (each one `ex2.approx` of an fma,
`online`); l += P 1 and O += P V, v's rows read with `ldmatrix.x4.trans`. After the last
block each output is O / l through the epilogue. Under a causal mask the walk stops after
the last key the workgroup's rows keep (`causal_end`); the blocks it crosses are masked by
f itself.

Workgroup memory: q's tile then k's (one array: q's fragments are in registers before k is
staged) and v's, each row D / 2 (E / 2) words and 4 words of padding, which puts the 8
rows of an `ldmatrix` matrix on 8 distinct groups of 4 banks: 18 KiB for D = E = 64, 34 KiB
for 128.
"""

from __future__ import annotations

import contextlib
import struct
from typing import NamedTuple

from mimir.codegen import lower as lw
from mimir.codegen import sizes as sz
from mimir.codegen.builder import Body, Idx, ibin, size_ir, u32
from mimir.codegen.ir import (
    WARP,
    Assign,
    Barrier,
    Binary,
    Bitcast,
    Builtin,
    Call,
    Cast,
    Const,
    CopyAsync,
    Expr,
    Let,
    Load,
    LoadMatrix,
    MmaSync,
    PackHalves,
    SharedArray,
    Stmt,
    Var,
    WaitAsync,
    WarpReduce,
    walk_expr,
    walk_statements,
)
from mimir.codegen.kernels.causal import causal_end, causal_reach
from mimir.codegen.kernels.context import Built, KernelContext, mma_kind
from mimir.codegen.kernels.online import running_max
from mimir.codegen.kernels.staging import all_true, batch_offset, exprs_of, write_where
from mimir.codegen.schedule.layout import softmax_input
from mimir.codegen.schedule.plan import Attention

ROWS = 64  # query rows a workgroup owns, 16 a warp


KEYS = 64  # keys it takes at each step: 8 accumulator tiles of 8


THREADS = ROWS // 16 * WARP  # 4 warps


PAD = 4  # words of padding after each staged row


HEAD_DIMS = range(16, 129, 16)  # the literal head dims (of q and k, and of v) it takes


class Operands(NamedTuple):
    """The buffers an `attention` launch on tensor cores reads: q, k (whose transpose is
    the scores' right operand) and v, and their type's tensor cores ("f16" or "bf16")."""

    q: int
    k: int
    v: int
    kind: str


def fits(c: KernelContext) -> Operands | None:
    """The operands of a PTX build's `attention` launch (`c.tensor_cores`) that can run on
    half tensor cores: q, k and v buffers of one half type (`context.mma_kind`), the scores
    `q @ k.T` (the transpose of k's last two axes), and q's and v's widths literals in
    `HEAD_DIMS`; else None (the scalar launch)."""
    if not c.tensor_cores or not isinstance(c.plan, Attention):
        return None
    ev = c.ev
    q, right = (ev.resolve(n) for n in ev.node(c.plan.scores)["inputs"][:2])
    v = ev.resolve(ev.node(c.plan.root)["inputs"][1])
    spec = ev.spec(right)
    if spec is None or spec.kind != "transpose":
        return None
    rank = len(ev.shape(right))
    if list(ev.permutation(right)) != [*range(rank - 2), rank - 1, rank - 2]:
        return None
    k = ev.resolve(ev.node(right)["inputs"][0])
    kind = mma_kind(c, q, k, v)
    if kind not in ("f16", "bf16"):
        return None
    widths = [ev.shape(x)[-1] for x in (q, v)]
    if not all(isinstance(w, int) and w in HEAD_DIMS for w in widths):
        return None
    return Operands(q, k, v, kind)


def build(c: KernelContext, operands: Operands) -> Built:
    """The launch (the module's docstring), `attention.build`'s on tensor cores."""
    heads = _MmaHeads(c, operands)
    body, end = c.body, heads.keys_end()
    if heads.n_b is None:
        with body.for_("n0_", u32(0), end, u32(KEYS), unroll=False) as n0:
            heads.step(n0, None)
    else:
        # the blocks of 64 keys, with no guard, then the last one, partly past the keys
        whole = body.let(ibin("*", ibin("/", end, u32(KEYS)), u32(KEYS)), "whole")
        with body.for_("n0_", u32(0), whole, u32(KEYS), unroll=False) as n0:
            heads.step(n0, None)
        with body.for_("n0_", whole, end, u32(KEYS), unroll=False) as n0:
            heads.step(n0, heads.n_b)
    heads.store()
    return (THREADS, 1, 1), heads.dispatch


_LOG2E = 1.4426950408889634


def _ex2(t: Expr) -> Expr:
    """2^t: the hardware's `ex2.approx.ftz.f32` under fast math (`Emitter.exp2`)."""
    return lw.call("exp2", t, t="f32")


def _rounded_to_half(e: Expr) -> Expr | None:
    """The f32 value `e` rounds to float16 and back (`Cast(Cast(a, f16), f32)`), else None."""
    if isinstance(e, Cast) and e.type == "f32" and isinstance(e.a, Cast) and e.a.type == "f16":
        return e.a.a if e.a.a.type == "f32" else None
    return None


def _max_f16x2(a: Expr, b: Expr) -> Expr:
    """The larger of each half of two packed float16 pairs (PTX `max.f16x2`)."""
    return Call("max_f16x2", (a, b), "u32")


def _half_scale(low: Expr, high: Expr) -> float | None:
    """The scale c of two `s * c` (the same literal c, exact in float16, s float32
    variables: scores), else None."""
    literals = []
    for x in (low, high):
        if not (isinstance(x, Binary) and x.op == "*" and isinstance(x.a, Var)):
            return None
        if not (isinstance(x.b, Const) and isinstance(x.b.value, float)):
            return None
        literals.append(x.b.value)
    c = literals[0]
    if literals[1] != c or not 2**-14 <= abs(c) <= 2**15:  # a normal float16
        return None
    return c if struct.unpack("<e", struct.pack("<e", c))[0] == c else None


def _f16_bits(value: float) -> int:
    return struct.unpack("<H", struct.pack("<e", value))[0]


def _paired(body: Body, first: list[Stmt], second: list[Stmt]) -> dict[str, Var]:
    """Two scores' epilogue statements, the same f of two scores (each its own `Let`s), side
    by side: where both round an f32 to float16 (`_rounded_to_half`), the two are packed
    by one `cvt.rn.f16x2.f32` (`PackHalves`, rounding to nearest even as `cvt.rn.f16.f32`
    does) and read back from its halves. Statements not in that shape, or a second that
    uses what the first binds, are emitted one list after the other. Returns the packed
    word each variable read back from one is a half of."""
    bound = {st.var.name for st in first if isinstance(st, Let)}
    used = {
        x.name for st in second for e in exprs_of(st) for x in walk_expr(e) if isinstance(x, Var)
    }
    same = len(first) == len(second) and all(isinstance(st, Let) for st in [*first, *second])
    if not same or bound & used:
        for st in [*first, *second]:
            body.emit(st)
        return {}
    halves: dict[str, Var] = {}
    for a, b in zip(first, second, strict=True):
        assert isinstance(a, Let) and isinstance(b, Let)
        low, high = _rounded_to_half(a.value), _rounded_to_half(b.value)
        if low is None or high is None:
            body.emit(a)
            body.emit(b)
            continue
        word = body.fresh("xh", "u32")
        scale = _half_scale(low, high)
        if scale is None:
            body.emit(PackHalves(word, low, high, "f16"))
        else:
            # the products rounded to float16 (the language's float16 `q @ k.T`), then
            # scaled as float16 pairs: one rounding of the exact product, as the shim's
            assert isinstance(low, Binary) and isinstance(high, Binary)
            products = body.fresh("xp", "u32")
            body.emit(PackHalves(products, low.a, high.a, "f16"))
            bits = _f16_bits(scale)
            pair = body.var(Const(bits << 16 | bits, "u32"), "sc")
            body.emit(Let(word, Call("mul_f16x2", (products, pair), "u32")))
        body.emit(Let(a.var, Cast(Bitcast(word, "f16"), "f32")))
        top = Binary(">>", word, u32(16), "u32")
        body.emit(Let(b.var, Cast(Bitcast(top, "f16"), "f32")))
        halves[a.var.name] = halves[b.var.name] = word
    return halves


# the workgroup arrays: q's rows then each block's k rows, and each block's v rows
_QK, _V = "$qk_tile", "$v_tile"


class _MmaHeads:
    """A workgroup's rows and this lane's fragments (`build`)."""

    def __init__(self, c: KernelContext, operands: Operands) -> None:
        assert isinstance(c.plan, Attention)
        ev, body, plan = c.ev, c.body, c.plan
        self.c, self.ev, self.body, self.ops = c, ev, body, operands
        self.first, self.second = plan.scores, plan.root
        self.x = ev.resolve(softmax_input(ev, plan.softmax)[0])
        self.qshape, self.kshape = ev.shape(operands.q), ev.shape(operands.k)
        self.vshape, self.oshape = ev.shape(operands.v), ev.shape(self.second)
        self.sshape = ev.shape(self.first)
        m, n = self.qshape[-2], self.kshape[-2]
        self.d, self.e = d, e = self.qshape[-1], self.vshape[-1]
        self.qk_stride, self.v_stride = d // 2 + PAD, e // 2 + PAD
        self.batch = batch = self.oshape[:-2]
        tm = sz.cdiv(m, ROWS)
        self.dispatch, g = c.groups(sz.product([*batch, tm]))
        row_tile = body.let(ibin("%", g, size_ir(tm)), "tile") if batch else g
        flat_batch = body.let(ibin("/", g, size_ir(tm)), "b") if batch else u32(0)
        self.batch_axes = Idx(batch, flat=flat_batch).axes(body) if batch else []
        self.row0 = body.let(ibin("*", row_tile, u32(ROWS)), "row")
        self.n_ir = size_ir(n)
        # a bound needs no guard when its size is proven a multiple of the block
        self.m_b = None if c.multiple(m, ROWS, f"row < {sz.manifest_text(m)}") else size_ir(m)
        self.n_b = None if c.multiple(n, KEYS, f"key < {sz.manifest_text(n)}") else self.n_ir
        self.t = t = Builtin("local_x")
        warp = body.let(ibin("/", t, u32(WARP)), "warp")
        lane = body.let(ibin("%", t, u32(WARP)), "lane")
        g_ = body.let(ibin("/", lane, u32(4)), "g")
        self.q2 = body.let(ibin("*", ibin("%", lane, u32(4)), u32(2)), "q2")
        # the row this lane addresses for `ldmatrix`: row `l % 8` of matrix `l / 8`, whose
        # bit 0 is 8 more rows (q, v's keys) or d (k), bit 1 8 more d (q), keys (k) or
        # columns (v)
        mat = body.let(ibin("/", lane, u32(8)), "mat")
        r = body.let(ibin("%", lane, u32(8)), "r")
        bit0 = body.let(ibin("%", mat, u32(2)), "lo")
        bit1 = body.let(ibin("/", mat, u32(2)), "hi")
        qs, vs = self.qk_stride, self.v_stride
        q_row = ibin("+", ibin("*", warp, u32(16)), ibin("+", r, ibin("*", bit0, u32(8))))
        q_at = ibin("+", ibin("*", q_row, u32(qs)), ibin("*", bit1, u32(4)))
        self.q_at = body.let(q_at, "fq")
        k_row = ibin("+", r, ibin("*", bit1, u32(8)))
        self.k_at = body.let(ibin("+", ibin("*", k_row, u32(qs)), ibin("*", bit0, u32(4))), "fk")
        v_row = ibin("+", r, ibin("*", bit0, u32(8)))
        self.v_at = body.let(ibin("+", ibin("*", v_row, u32(vs)), ibin("*", bit1, u32(4))), "fv")
        # this lane's rows of the scores and the output: g and g + 8 of its warp's
        mine = ibin("+", self.row0, ibin("+", ibin("*", warp, u32(16)), g_))
        self.rows = [body.let(ibin("+", mine, u32(8 * h)), "row") for h in range(2)]
        self.row_ok = [
            None if self.m_b is None else body.let(Binary("<", r_, self.m_b, "bool"), "rok")
            for r_ in self.rows
        ]
        c.shared += [
            SharedArray(_QK, "u32", ROWS * qs),
            SharedArray(_V, "u32", KEYS * vs),
        ]
        self.causal = causal_reach(ev, self.x, self.first)
        # the 16-byte chunk each thread stages of q, k and v (`stage`), computed before the loops
        self._spread: dict[int, tuple[Expr, Expr]] = {}
        for chunks in sorted({d // 8, e // 8}):
            w = body.let(ibin("%", t, u32(chunks)), "w")
            self._spread[chunks] = (w, body.let(ibin("/", t, u32(chunks)), "wr"))
        self._base = {x: batch_offset(c, ev.shape(x), batch, self.batch_axes) for x in operands[:3]}
        self.q_frags = self.load_q()
        inf, zero = lw.const(-lw.INF, "f32"), lw.const(0, "f32")
        self.top = [body.var(inf, "m") for _ in range(2)]  # rows g and g + 8's running max
        # their sums as an accumulator tile of P times ones (every column the row's sum of
        # the p it multiplied: rows g, g, g + 8, g + 8), and B's fragment of those ones
        self.sums = [body.var(zero, "l") for _ in range(4)]
        one_bits = 0x3C00 if operands.kind == "f16" else 0x3F80
        self.ones = body.var(Const(one_bits << 16 | one_bits, "u32"), "ones")
        self.accs = [[body.var(zero, "acc") for _ in range(4)] for _ in range(e // 8)]

    def keys_end(self) -> Expr:
        if self.causal is None:
            return self.n_ir
        work = "every step for"
        return causal_end(self.c, self.causal, self.row0, ROWS, KEYS, self.n_ir, work)

    def stage(
        self, array: str, operand: int, shape: tuple, first: Expr, bound: Expr | None
    ) -> None:
        """Rows `first` .. `first + 63` of `operand` (a matrix of `shape`, this workgroup's
        batch) into `array`, their pairs as words at a row stride of width / 2 + `PAD`, 8
        halves (4 words, 16 bytes) a `cp.async` (zeros past `bound`): thread t the chunk
        `t % (width / 8)` of rows `t / (width / 8)` + `128 / (width / 8)` i. A head dim
        (`HEAD_DIMS`) is a multiple of 16, so each chunk is 16-byte aligned in both."""
        body, width = self.body, shape[-1]
        chunks, words = width // 8, width // 2
        w, row_in = self._spread[chunks]
        base = self._base[operand]
        start = body.let(ibin("+", base, ibin("*", ibin("+", first, row_in), u32(width))), "st")
        start = body.let(ibin("+", start, ibin("*", w, u32(8))), "st")
        slot0 = body.let(ibin("+", ibin("*", row_in, u32(words + PAD)), ibin("*", w, u32(4))), "sl")
        apart = THREADS // chunks
        buffer = self.ev.buffers[operand]
        for i in range(ROWS // apart):
            row = ibin("+", ibin("+", first, row_in), u32(apart * i))
            ok = None if bound is None else Binary("<", row, bound, "bool")
            flat = ibin("+", start, u32(apart * i * width))
            slot = ibin("+", slot0, u32(apart * i * (words + PAD)))
            if self.ops.kind == "f16":
                value = Load(buffer, flat, "f16")
                body.emit(CopyAsync(array, slot, value, ok, pair=True, words=4))
            else:  # a bfloat16 buffer is u32 words of two already
                word = Load(buffer, ibin("/", flat, u32(2)), "u32")
                body.emit(CopyAsync(array, slot, word, ok, words=4))

    def load_q(self) -> list[tuple[Var, ...]]:
        """q's rows staged, and this lane's A fragments of them read, once."""
        body = self.body
        self.stage(_QK, self.ops.q, self.qshape, self.row0, self.m_b)
        body.emit(WaitAsync())
        body.emit(Barrier())
        frags = []
        for kk in range(self.d // 16):
            regs = tuple(body.fresh("qa", "u32") for _ in range(4))
            body.emit(LoadMatrix(regs, _QK, ibin("+", self.q_at, u32(8 * kk))))
            frags.append(regs)
        body.emit(Barrier())  # (k's rows take q's place)
        return frags

    def step(self, n0: Expr, bound: Expr | None) -> None:
        """The block of keys from `n0`; keys from `bound` on (None: none) are past the last."""
        body, kind = self.body, self.ops.kind
        self.stage(_QK, self.ops.k, self.kshape, n0, bound)
        self.stage(_V, self.ops.v, self.vshape, n0, bound)
        body.emit(WaitAsync())
        body.emit(Barrier())
        zero = lw.const(0, "f32")
        scores = [[body.var(zero, "s") for _ in range(4)] for _ in range(KEYS // 8)]
        qs = self.qk_stride
        for kk, a in enumerate(self.q_frags):
            for jp in range(KEYS // 16):
                regs = tuple(body.fresh("kb", "u32") for _ in range(4))
                at = ibin("+", self.k_at, u32(16 * jp * qs + 8 * kk))
                body.emit(LoadMatrix(regs, _QK, at))
                body.emit(MmaSync(tuple(scores[2 * jp]), a, regs[:2], kind))
                body.emit(MmaSync(tuple(scores[2 * jp + 1]), a, regs[2:], kind))
        xs, words = self.epilogue(n0, scores, bound)
        ps = [[zero] * 4 for _ in range(KEYS // 8)]
        for h in range(2):
            row_x = [xs[j][2 * h + e] for j in range(KEYS // 8) for e in range(2)]
            alpha, row_p = self.online(row_x, h, words[h])
            for j in range(KEYS // 8):
                ps[j][2 * h], ps[j][2 * h + 1] = row_p[2 * j], row_p[2 * j + 1]
            for acc in [*self.accs, self.sums]:
                for e in range(2):
                    body.emit(Assign(acc[2 * h + e], lw.bin_("*", acc[2 * h + e], alpha)))
        for t in range(KEYS // 16):
            a = []
            for j in (2 * t, 2 * t + 1):
                for h in range(2):
                    word = body.fresh("pa", "u32")
                    body.emit(PackHalves(word, ps[j][2 * h], ps[j][2 * h + 1], kind))
                    a.append(word)
            # the rows' sums of the p as packed, on the tensor cores
            body.emit(MmaSync(tuple(self.sums), tuple(a), (self.ones, self.ones), kind))
            for jp in range(self.e // 16):
                regs = tuple(body.fresh("vb", "u32") for _ in range(4))
                at = ibin("+", self.v_at, u32(16 * t * self.v_stride + 8 * jp))
                body.emit(LoadMatrix(regs, _V, at, trans=True))
                body.emit(MmaSync(tuple(self.accs[2 * jp]), tuple(a), regs[:2], kind))
                body.emit(MmaSync(tuple(self.accs[2 * jp + 1]), tuple(a), regs[2:], kind))
        body.emit(Barrier())

    def epilogue(
        self, n0: Expr, scores: list[list[Var]], bound: Expr | None
    ) -> tuple[list[list[Expr]], list[list[Var] | None]]:
        """The softmax's inputs x = f(s) of this lane's scores, grid [j][2h + e] as the
        accumulators: -inf from key `bound` on; an f that loads (a mask input) evaluated
        only where the row and key are inside. The two scores of a row in a tile (e = 0,
        1) are computed side by side, their roundings to float16 one `cvt.rn.f16x2.f32`
        (`_paired`). Also, for each row whose 16 x are exactly the halves of 8 such words,
        those words (else None)."""
        ev, body, first = self.ev, self.body, self.first
        inf = lw.const(-lw.INF, "f32")
        xs: list[list[Expr]] = []
        words: list[list[Var]] = [[], []]  # each row's x as packed float16 pairs, in order
        for j in range(KEYS // 8):
            tile_x: list[Expr] = []
            for h in range(2):
                pair = []
                for e in range(2):
                    key = body.let(ibin("+", n0, ibin("+", self.q2, u32(8 * j + e))), "key")
                    key_ok = None if bound is None else Binary("<", key, bound, "bool")
                    idx = Idx(self.sshape, axes=[*self.batch_axes, self.rows[h], key])
                    score = scores[j][2 * h + e]
                    ev.overrides[first] = (idx.key, score)
                    with body.block() as trial:
                        value = ev.at(self.x, idx)
                    exprs = [x for st in walk_statements(trial) for x in exprs_of(st)]
                    loads = any(isinstance(x, Load) for x in [*exprs, *walk_expr(value)])
                    pair.append((trial, value, key_ok, idx, score, loads))
                if not any(loads for *_, loads in pair):
                    halves = _paired(body, pair[0][0], pair[1][0])
                    for _, value, key_ok, *_ in pair:
                        value = value if key_ok is None else lw.select(key_ok, value, inf)
                        tile_x.append(body.let(value, "x"))
                    low, high = tile_x[-2:]
                    if isinstance(low, Var) and isinstance(high, Var):
                        word = halves.get(low.name)
                        if word is not None and halves.get(high.name) is word:
                            words[h].append(word)
                    continue
                for trial, value, key_ok, idx, score, loads in pair:
                    if not loads:
                        for st in trial:
                            body.emit(st)
                        value = value if key_ok is None else lw.select(key_ok, value, inf)
                        tile_x.append(body.let(value, "x"))
                        continue
                    xv = body.var(inf, "x")
                    cond = all_true([self.row_ok[h], key_ok])
                    with body.if_(cond) if cond is not None else contextlib.nullcontext():
                        ev.overrides[first] = (idx.key, score)
                        body.emit(Assign(xv, ev.at(self.x, idx)))
                    tile_x.append(xv)
            xs.append(tile_x)
        del ev.overrides[first]
        return xs, [w if len(w) == KEYS // 8 else None for w in words]

    def online(self, row_x: list[Expr], h: int, words: list[Var] | None) -> tuple[Expr, list[Expr]]:
        """Row g + 8h's step of the online softmax over this lane's 16 values of the block:
        the block's max over the quad, the running max m grown to it, the rescale factor
        exp(m_old - m) (returned, for O and the sums) and p = exp(x - m) (returned; `step`
        adds them to the row's sum with the tensor cores, as rounded for P V).

        Each exp is 2^(x log2 e - m log2 e) (one fma, then one `ex2.approx` under fast
        math), as FlashAttention computes it: its error, a few float32 ulp and |x - m|
        2^-24 relative, is far below the half p is rounded to for the second product. A
        row whose max is still -inf (every x so far -inf) subtracts 0 instead, so its -inf
        x give 2^-inf = 0 with no test per score. Where the 16 x are float16 pairs (`words`),
        the block's max is taken over the pairs (`max.f16x2`, exact), then its two halves."""
        body, f32 = self.body, "f32"
        inf, zero, one = lw.const(-lw.INF, f32), lw.const(0, f32), lw.const(1, f32)
        log2e, minus_log2e = lw.const(_LOG2E, f32), lw.const(-_LOG2E, f32)
        if words is None:
            block = row_x[0]
            for x in row_x[1:]:
                block = running_max(block, x)
        else:
            pairs: list[Expr] = list(words)
            while len(pairs) > 1:  # a tree of the 8: 4, 2, 1
                halves = zip(pairs[::2], pairs[1::2], strict=True)
                pairs = [body.let(_max_f16x2(a, b), "bw") for a, b in halves]
            low = Cast(Bitcast(pairs[0], "f16"), "f32")
            high = Cast(Bitcast(Binary(">>", pairs[0], u32(16), "u32"), "f16"), "f32")
            block = running_max(low, high)
        block = body.let(WarpReduce("fmax", body.let(block, "bm"), f32, 4), "bm")
        top = self.top[h]
        grown = body.let(running_max(top, block), "mn")
        shift = lw.select(lw.bin_("==", grown, inf), zero, grown)
        minus = body.let(lw.bin_("*", shift, minus_log2e), "ml")
        # 1 while the max holds (also from -inf to -inf), 0 from -inf (nothing summed)
        moved = _ex2(lw.call("fma", top, log2e, minus))
        alpha = body.let(lw.select(lw.bin_("==", top, grown), one, moved), "alpha")
        row_p = [body.let(_ex2(lw.call("fma", x, log2e, minus)), "p") for x in row_x]
        body.emit(Assign(top, grown))
        return alpha, row_p

    def store(self) -> None:
        """Each output: its accumulator over the row's sum, through the epilogue, where the
        row is inside (v's columns all are)."""
        body, one = self.body, lw.const(1, "f32")
        for h in range(2):
            inv = body.let(lw.bin_("/", one, self.sums[2 * h]), "inv")
            for j, acc in enumerate(self.accs):
                for e in range(2):
                    col = ibin("+", self.q2, u32(8 * j + e))
                    idx = Idx(self.oshape, axes=[*self.batch_axes, self.rows[h], col])
                    value = body.let(lw.bin_("*", acc[2 * h + e], inv), "o")
                    write_where(self.c, self.row_ok[h], idx, value)
