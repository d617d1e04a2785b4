"""The `attention` and `scores_softmax` launches: the scores `q @ k.T` computed inside the
launch that reads them, never stored (`schedule.attention`).

- `attention`: `softmax(f(q @ k.T)) @ v` in one pass over the keys, flash attention's
  online softmax (`build`): 256 threads own 64 query rows and 64 (or 128) output columns,
  and store each row's log-sum-exp too where the function returns it;
- `scores_softmax`: `softmax(f(q @ k.T))` returned, the scores computed twice, for each
  row's max and sum, then for the values stored (`build_scores_softmax`).

Under a causal mask (`causal`) both stop after the last key a workgroup's rows keep.
"""

from __future__ import annotations

import contextlib

from mimir.codegen import lower as lw
from mimir.codegen import sizes as sz
from mimir.codegen.builder import Idx, ibin, size_ir, u32
from mimir.codegen.ir import (
    Assign,
    Barrier,
    Binary,
    Builtin,
    Expr,
    If,
    Load,
    SharedArray,
    SharedVectorLoad,
    Store,
    Var,
    WaitAsync,
    WarpReduce,
    walk_expr,
    walk_statements,
)
from mimir.codegen.kernels import attention_mma
from mimir.codegen.kernels.causal import causal_end, causal_reach
from mimir.codegen.kernels.context import Built, KernelContext
from mimir.codegen.kernels.online import rescale_factor, rescaled, running_max, stable_shift
from mimir.codegen.kernels.staging import (
    VEC,
    all_below,
    all_true,
    broadcast_batch,
    exprs_of,
    stage_operand,
    write_where,
)
from mimir.codegen.schedule.layout import WG, softmax_input
from mimir.codegen.schedule.plan import Attention
from mimir.dtypes import float32

ATT_ROWS = 64  # query rows an `attention` workgroup owns, 4 per thread


ATT_KEYS = 64  # keys it takes at each step, 4 per thread


ATT_COLS = 64  # output columns it owns, 4 per thread


ATT_SLICE = 16  # the slice of the scores' contraction staged at once


ATT_PART = 16  # the keys of a block whose p goes through workgroup memory at once


ATT_SIDE = 16  # threads per side: thread t is row group t / 16, column group t % 16


class _ScoreBlocks:
    """The scores `a @ b` of a workgroup's `ATT_ROWS` rows, a block of `ATT_KEYS` keys at a
    time, through their epilogue up to the softmax's input x: the first half of each
    step of an `attention` launch and both passes of a `scores_softmax` one. Thread t
    holds rows `4 (t / 16) + i` and keys `4 (t % 16) + j` (i, j < 4) of each block; a's
    and b's `ATT_SLICE`-wide slices of the contraction are staged through the workgroup
    array `stage` (a's from 0, b's from `b_at`)."""

    def __init__(
        self,
        c: KernelContext,
        first: int,
        x: int,
        batch: tuple,
        batch_axes: list[Expr],
        row0: Expr,
        rows: list[Expr],
        stage: str,
    ) -> None:
        ev, body = c.ev, c.body
        self.c, self.first, self.x, self.stage = c, first, x, stage
        self.batch_axes, self.rows, self.row0 = batch_axes, rows, row0
        a, b = (ev.resolve(n) for n in ev.node(first)["inputs"][:2])
        self.a, self.b = a, b
        self.ashape, self.bshape, self.sshape = ev.shape(a), ev.shape(b), ev.shape(first)
        m, k, n = self.ashape[-2], self.ashape[-1], self.bshape[-1]
        self.k_ir, self.n_ir = size_ir(k), size_ir(n)
        # a bound needs no guard when its size is proven a multiple of the block
        self.m_b = None if c.multiple(m, ATT_ROWS, f"row < {sz.manifest_text(m)}") else size_ir(m)
        self.n_b = None if c.multiple(n, ATT_KEYS, f"key < {sz.manifest_text(n)}") else self.n_ir
        self.k_b = None if c.multiple(k, ATT_SLICE, f"k < {sz.manifest_text(k)}") else self.k_ir
        self.b_at = ATT_SLICE * ATT_ROWS  # where b's slice starts in `stage`
        self.a_batch = broadcast_batch(batch_axes, batch, self.ashape[:-2])
        self.b_batch = broadcast_batch(batch_axes, batch, self.bshape[:-2])
        # staging: 16 consecutive threads read 16 consecutive k of a row of a and of a
        # key's column of b (k.T: a row of k), four rows and four keys each, 16 apart
        t = Builtin("local_x")
        self.sk = body.let(ibin("%", t, u32(ATT_SLICE)), "sk")
        self.sr = body.let(ibin("/", t, u32(ATT_SLICE)), "sr")
        self.apart = WG // ATT_SLICE  # rows of a (keys of b) between one thread's values
        apart, m_b = self.apart, self.m_b
        self.a_rows = [
            body.let(ibin("+", row0, ibin("+", self.sr, u32(apart * h))), "ar")
            for h in range(ATT_ROWS // apart)
        ]
        self.a_ok = [
            None if m_b is None else body.let(Binary("<", r, m_b, "bool"), "aok")
            for r in self.a_rows
        ]
        self.row_ok = [
            None if m_b is None else body.let(Binary("<", r, m_b, "bool"), "rok") for r in rows
        ]
        self.causal = causal_reach(ev, x, first)
        self.end: Expr | None = None

    def keys_end(self, work: str) -> Expr:
        """Where a pass over the keys may stop: past the keys, or under a causal mask
        (`causal_reach`) past the last key the workgroup's last row keeps (the blocks after
        it hold only the mask's fill), which the manifest's `work_skipped` records as
        `work` done only up to there (ending "for"...)."""
        if self.causal is None:
            return self.n_ir
        if self.end is None:
            causal, row0, n = self.causal, self.row0, self.n_ir
            self.end = causal_end(self.c, causal, row0, ATT_ROWS, ATT_KEYS, n, work)
        return self.end

    def keys(self, n0: Expr, my_col: Expr) -> tuple[list[Expr], list[Expr | None]]:
        """The keys this thread holds of the block from `n0`, and whether each is one."""
        body, n_b = self.c.body, self.n_b
        keys = [body.let(ibin("+", n0, ibin("+", my_col, u32(j))), "key") for j in range(VEC)]
        valid = [
            None if n_b is None else body.let(Binary("<", key, n_b, "bool"), "kv") for key in keys
        ]
        return keys, valid

    def block(
        self, n0: Expr, my_row: Expr, my_col: Expr
    ) -> tuple[list[list[Expr]], list[Expr], list[Expr | None]]:
        """This thread's 4 x 4 softmax inputs for the block of keys from `n0` (-inf past
        the last row or key), the block's keys it holds, and whether each is one."""
        c, ev, body, stage = self.c, self.c.ev, self.c.body, self.stage
        f32, zero, inf = "f32", lw.const(0, "f32"), lw.const(-lw.INF, "f32")
        sk, sr, apart, b_at = self.sk, self.sr, self.apart, self.b_at
        scores = [[body.var(zero, "s") for _ in range(VEC)] for _ in range(VEC)]
        b_keys = [
            body.let(ibin("+", n0, ibin("+", sr, u32(apart * h))), "bkey")
            for h in range(ATT_KEYS // apart)
        ]
        n_b = self.n_b
        b_ok = [None if n_b is None else Binary("<", key, n_b, "bool") for key in b_keys]
        with body.for_("k0_", u32(0), self.k_ir, u32(ATT_SLICE), unroll=False) as k0:
            kk = body.let(ibin("+", k0, sk), "kk")
            kk_ok = None if self.k_b is None else body.let(Binary("<", kk, self.k_b, "bool"), "kok")
            for h, (row, ok) in enumerate(zip(self.a_rows, self.a_ok, strict=True)):
                slot = ibin("+", ibin("*", sk, u32(ATT_ROWS)), ibin("+", sr, u32(apart * h)))
                idx = Idx(self.ashape, axes=[*self.a_batch, row, kk])
                stage_operand(c, stage, slot, self.a, idx, all_true([ok, kk_ok]), float32)
            for h, (key, ok) in enumerate(zip(b_keys, b_ok, strict=True)):
                at = ibin("+", ibin("*", sk, u32(ATT_KEYS)), ibin("+", sr, u32(b_at + apart * h)))
                idx = Idx(self.bshape, axes=[*self.b_batch, kk, key])
                stage_operand(c, stage, at, self.b, idx, all_true([ok, kk_ok]), float32)
            body.emit(WaitAsync())
            body.emit(Barrier())
            for kk_ in range(ATT_SLICE):
                qv = tuple(body.fresh("q", f32) for _ in range(VEC))
                body.emit(SharedVectorLoad(qv, stage, ibin("+", my_row, u32(kk_ * ATT_ROWS))))
                kv = tuple(body.fresh("k", f32) for _ in range(VEC))
                at = ibin("+", my_col, u32(b_at + kk_ * ATT_KEYS))
                body.emit(SharedVectorLoad(kv, stage, at))
                for i in range(VEC):
                    for j in range(VEC):
                        product = lw.bin_("*", qv[i], kv[j])
                        body.emit(Assign(scores[i][j], lw.bin_("+", scores[i][j], product)))
            body.emit(Barrier())
        keys, valid = self.keys(n0, my_col)
        first, x = self.first, self.x
        xs: list[list[Expr]] = []
        for i in range(VEC):
            # the softmax's input at (row, key): the scores through their epilogue, which
            # may load (a mask input); -inf past the last row or key
            row_x: list[Expr] = []
            for j in range(VEC):
                idx = Idx(self.sshape, axes=[*self.batch_axes, self.rows[i], keys[j]])
                cond = all_true([self.row_ok[i], valid[j]])
                ev.overrides[first] = (idx.key, scores[i][j])
                with body.block() as trial:
                    value = ev.at(x, idx)
                exprs = [e for st in walk_statements(trial) for e in exprs_of(st)]
                loads = any(isinstance(e, Load) for e in [*exprs, *walk_expr(value)])
                if cond is None or not loads:
                    # arithmetic only (a scale, a mask made from the indices): no branch
                    for st in trial:
                        body.emit(st)
                    value = value if cond is None else lw.select(cond, value, inf)
                    row_x.append(body.let(value, "x"))
                    continue
                xv = body.var(inf, "x")
                with body.if_(cond):
                    ev.overrides[first] = (idx.key, scores[i][j])
                    body.emit(Assign(xv, ev.at(x, idx)))
                row_x.append(xv)
            xs.append(row_x)
            del ev.overrides[first]
        return xs, keys, valid


def _online_step(
    c: KernelContext, xs: list[Expr], top: Var, total: Var, shared: bool = True
) -> tuple[Expr, list[Expr]]:
    """One block of a row's online softmax: the block's max (`shared`: over the row's 16
    threads, a `WarpReduce`; else over this thread's values), the running max `top` grown
    to it, p = exp(x - top) for this thread's 4 values (0 for a -inf), and its share
    `total` of the row's sum rescaled and added to. Returns the rescale factor
    exp(m_old - m) (`rescale_factor`) and the p."""

    body, f32 = c.body, "f32"
    inf, zero = lw.const(-lw.INF, f32), lw.const(0, f32)
    block = body.let(running_max(running_max(xs[0], xs[1]), running_max(xs[2], xs[3])), "bm")
    if shared:
        block = body.let(WarpReduce("fmax", block, f32, ATT_SIDE), "bm")
    grown = body.let(running_max(top, block), "mn")
    alpha = body.let(rescale_factor(top, grown), "alpha")
    row_p = []
    for x in xs:
        e_ = lw.call("exp", lw.bin_("-", x, grown))
        row_p.append(body.let(lw.select(lw.bin_("!=", x, inf), e_, zero), "p"))
    added = lw.bin_("+", lw.bin_("+", row_p[0], row_p[1]), lw.bin_("+", row_p[2], row_p[3]))
    body.emit(Assign(total, lw.bin_("+", lw.bin_("*", total, alpha), added)))
    body.emit(Assign(top, grown))
    return alpha, row_p


def build(c: KernelContext) -> Built:
    """`softmax(f(a @ b)) @ v` (`schedule.attention.fuse_attention`; attention: a = q,
    b = k.T) in one pass over the keys, the online softmax of flash attention. A workgroup
    of 256 threads
    owns `ATT_ROWS` query rows and `ATT_COLS` columns of the output, or twice as many
    where v may be wider (its bound, at most 128, above 64: the scores are computed once
    for the whole head, not once per 64 columns); thread t holds rows `4 (t / 16) + i`
    (i < 4) of both, the output's columns `4 (t % 16) + j` (and `64 + 4 (t % 16) + j`)
    and, for each block of `ATT_KEYS` keys, the scores of keys `4 (t % 16) + j` (j < 4).
    Per block:

    - the scores, the contraction staged through workgroup memory `ATT_SLICE` at a time
      (one array, `$stage`, holds a's and b's slices, then v's rows), and their epilogue
      f (a scale, a causal mask; guarded past the last row or key, whose value is -inf,
      where it may load): `_ScoreBlocks`;
    - each row's max over the block (a `WarpReduce` over the row's 16 threads), and with
      the running max m grown to it: p = exp(x - m), and this thread's share of the row's
      sum l and the accumulators rescaled by exp(m_old - m) (`_online_step`);
    - p through workgroup memory (`$p_tile`, key-major, `ATT_PART` keys at a time) times
      those keys' rows of v, staged into `$stage` beside it (the second 64 columns' only
      where v has more than 64 at run time, unless proven).

    After the last block each output is its accumulator / l (the threads' shares of l
    summed), through the second product's epilogue, and where the function returns it
    (`Attention.lse`) each row's log-sum-exp m + log(l). Neither the scores nor the softmax is
    stored: the launch loads a, b and v and stores the output. Workgroup memory: 12 KiB
    (16 with WGSL's arrays for `WarpReduce`, WebGPU's limit). A score of -inf has p = 0 (a
    row of them all gives nan, as the softmax's 0 / 0 does); a softmax over no keys is
    refused by the checker (GPU024). Under a causal mask (`causal_reach`) the walk stops
    after the last key the workgroup's rows keep. A PTX build whose q, k and v are float16
    or bfloat16 buffers of a literal head dim multiplies both products on tensor cores
    instead (`attention_mma`)."""

    operands = attention_mma.fits(c)
    if operands is not None:  # float16 or bfloat16 tensor cores (PTX)
        return attention_mma.build(c, operands)
    heads = _Heads(c)
    end = heads.scores.keys_end("every step for")
    with c.body.for_("n0_", u32(0), end, u32(ATT_KEYS), unroll=False) as n0:
        heads.step(n0)
    heads.store()
    return (WG, 1, 1), heads.dispatch


class _Heads:
    """An `attention` workgroup's rows and output columns, and this thread's part (`build`)."""

    def __init__(self, c: KernelContext) -> None:
        assert isinstance(c.plan, Attention)
        ev, body, plan = c.ev, c.body, c.plan
        self.c, self.body = c, body
        second, first, x = plan.root, plan.scores, plan.x
        self.v = ev.resolve(ev.node(second)["inputs"][1])
        self.vshape, self.oshape = vshape, oshape = ev.shape(self.v), ev.shape(second)
        m, e = ev.shape(first)[-2], vshape[-1]
        batch = oshape[:-2]
        bound = e if isinstance(e, int) else sz.upper_bound(e, c.dims)
        self.halves = halves = 2 if bound is not None and bound > ATT_COLS else 1  # 64 columns each
        self.width = width = ATT_COLS * halves
        tm, te = sz.cdiv(m, ATT_ROWS), sz.cdiv(e, width)
        self.dispatch, g = c.groups(sz.product([*batch, tm, te]))
        col_tile = body.let(ibin("%", g, size_ir(te)), "tile")
        rest = body.let(ibin("/", g, size_ir(te)), "tile")
        row_tile = body.let(ibin("%", rest, size_ir(tm)), "tile") if batch else rest
        flat_batch = body.let(ibin("/", rest, size_ir(tm)), "b") if batch else u32(0)
        self.batch_axes = batch_axes = Idx(batch, flat=flat_batch).axes(body) if batch else []
        t = Builtin("local_x")
        ly = body.let(ibin("/", t, u32(ATT_SIDE)), "ly")
        self.lx = body.let(ibin("%", t, u32(ATT_SIDE)), "lx")
        row0 = body.let(ibin("*", row_tile, u32(ATT_ROWS)), "row")
        col0 = body.let(ibin("*", col_tile, u32(width)), "col")
        self.my_row = my_row = body.let(ibin("*", ly, u32(VEC)), "ry")
        self.my_col = my_col = body.let(ibin("*", self.lx, u32(VEC)), "cx")
        self.rows = [
            body.let(ibin("+", row0, ibin("+", my_row, u32(i))), "row") for i in range(VEC)
        ]
        self.cols = [
            body.let(ibin("+", col0, ibin("+", my_col, u32(h * ATT_COLS + j))), "col")
            for h in range(halves)
            for j in range(VEC)
        ]
        # a, b's slices and v's rows take turns in one array (a barrier ends each phase)
        self.scores = _ScoreBlocks(c, first, x, batch, batch_axes, row0, self.rows, _STAGE)
        self.e_b = None if c.multiple(e, width, f"col < {sz.manifest_text(e)}") else size_ir(e)
        # the second 64 columns, where v may have none (not a literal above 64)
        self.wide = (
            None
            if halves == 1 or isinstance(e, int)
            else body.let(Binary("<", ibin("+", col0, u32(ATT_COLS)), size_ir(e), "bool"), "wide")
        )
        size = max(self.scores.b_at + ATT_SLICE * ATT_KEYS, ATT_PART * width)
        c.shared += [
            SharedArray(_STAGE, "f32", size),
            SharedArray(_P_TILE, "f32", ATT_PART * ATT_ROWS),
        ]
        self.v_batch = broadcast_batch(batch_axes, batch, vshape[:-2])
        # `width` consecutive threads stage a row of v's (four rows each, 4 apart; eight, 2
        # apart, for 128 columns)
        self.vc = body.let(ibin("%", t, u32(width)), "vc")
        self.vk = body.let(ibin("/", t, u32(width)), "vk")
        self.v_col = body.let(ibin("+", col0, self.vc), "vcol")
        self.v_ok = (
            None if self.e_b is None else body.let(Binary("<", self.v_col, self.e_b, "bool"), "vok")
        )
        inf, zero = lw.const(-lw.INF, "f32"), lw.const(0, "f32")
        self.top = [body.var(inf, "m") for _ in range(VEC)]  # each row's running max
        self.sums = [body.var(zero, "l") for _ in range(VEC)]  # this thread's share of exp(x - m)
        self.accs = [[body.var(zero, "acc") for _ in self.cols] for _ in range(VEC)]

    def step(self, n0: Expr) -> None:
        """The block of keys from `n0`: its scores, the online softmax's rescale, and p
        times v's rows, `ATT_PART` keys at a time."""
        body, accs = self.body, self.accs
        xs, _, _ = self.scores.block(n0, self.my_row, self.my_col)
        ps: list[list[Expr]] = []
        alphas = []
        for i in range(VEC):
            alpha, row_p = _online_step(self.c, xs[i], self.top[i], self.sums[i])
            ps.append(row_p)
            alphas.append(alpha)
            for j in range(VEC):
                body.emit(Assign(accs[i][j], lw.bin_("*", accs[i][j], alpha)))
        # the second 64 columns' accumulators, where v has them
        with body.if_(self.wide) if self.wide is not None else contextlib.nullcontext():
            for i in range(VEC):
                for j in range(VEC, len(self.cols)):
                    body.emit(Assign(accs[i][j], lw.bin_("*", accs[i][j], alphas[i])))
        # p times v's rows, `ATT_PART` keys at a time: the threads that hold them store
        # their p in `$p_tile` (key-major) while all stage those rows of v
        owner = body.let(ibin("/", self.lx, u32(ATT_PART // VEC)), "part")
        for h in range(ATT_KEYS // ATT_PART):
            self.part(n0, h, owner, ps)

    def part(self, n0: Expr, h: int, owner: Expr, ps: list[list[Expr]]) -> None:
        """Keys `h * ATT_PART` .. of the block: their p into `$p_tile`, their rows of v
        staged, then multiplied into the accumulators."""
        c, body, width, my_row = self.c, self.body, self.width, self.my_row
        with body.if_(Binary("==", owner, u32(h), "bool")):
            for j in range(VEC):
                key = ibin("-", ibin("+", self.my_col, u32(j)), u32(h * ATT_PART))
                for i in range(VEC):
                    at = ibin("+", ibin("*", key, u32(ATT_ROWS)), ibin("+", my_row, u32(i)))
                    body.emit(Store(_P_TILE, at, ps[i][j]))
        n_b = self.scores.n_b
        for q in range(ATT_PART * width // WG):
            vrow = ibin("+", self.vk, u32(q * WG // width))
            key = body.let(ibin("+", n0, ibin("+", vrow, u32(h * ATT_PART))), "vkey")
            ok = None if n_b is None else Binary("<", key, n_b, "bool")
            slot = ibin("+", ibin("*", vrow, u32(width)), self.vc)
            idx = Idx(self.vshape, axes=[*self.v_batch, key, self.v_col])
            stage_operand(c, _STAGE, slot, self.v, idx, all_true([ok, self.v_ok]), float32)
        body.emit(WaitAsync())
        body.emit(Barrier())
        if self.wide is None:
            self.products(self.halves)
        else:
            with body.block() as both:
                self.products(2)
            with body.block() as first_half:
                self.products(1)
            body.emit(If(self.wide, both, first_half))
        body.emit(Barrier())

    def products(self, used: int) -> None:
        """p times the staged rows of v (`ATT_PART` keys), for the first `used` halves."""
        body, f32 = self.body, "f32"
        for kk_ in range(ATT_PART):
            pv = tuple(body.fresh("p", f32) for _ in range(VEC))
            body.emit(SharedVectorLoad(pv, _P_TILE, ibin("+", self.my_row, u32(kk_ * ATT_ROWS))))
            for half in range(used):
                vv = tuple(body.fresh("v", f32) for _ in range(VEC))
                at = ibin("+", self.my_col, u32(kk_ * self.width + half * ATT_COLS))
                body.emit(SharedVectorLoad(vv, _STAGE, at))
                for i in range(VEC):
                    for j in range(VEC):
                        acc = self.accs[i][half * VEC + j]
                        product = lw.bin_("*", pv[i], vv[j])
                        body.emit(Assign(acc, lw.bin_("+", acc, product)))

    def store(self) -> None:
        """Each output: its accumulator over the row's sum, through the epilogue; and
        where the launch returns it, each row's log-sum-exp (`_store_lse`)."""
        body, one = self.body, lw.const(1, "f32")
        for i in range(VEC):
            total = body.let(WarpReduce("add", self.sums[i], "f32", ATT_SIDE), "l")
            self._store_lse(i, total)
            inv = body.let(lw.bin_("/", one, total), "inv")
            for j in range(len(self.cols)):
                cond = all_below([(self.rows[i], self.scores.m_b), (self.cols[j], self.e_b)])
                idx = Idx(self.oshape, axes=[*self.batch_axes, self.rows[i], self.cols[j]])
                value = body.let(lw.bin_("*", self.accs[i][j], inv), "o")
                write_where(self.c, cond, idx, value)

    def _store_lse(self, i: int, total: Expr) -> None:
        """Row i's log-sum-exp m + log(l) (`Attention.lse`), stored by the first of the
        row's 16 threads (each holds the row's m and l; the workgroup owns every column of
        the output, so no other workgroup has the row). A row of -inf has l = 0 and m =
        -inf: the reference's `x - m` is nan there, and so its log-sum-exp; a +inf or a
        nan makes l nan already."""
        plan = self.c.plan
        assert isinstance(plan, Attention)
        if not plan.lse:
            return
        body, f32 = self.body, "f32"
        ((lse, _),) = plan.lse
        top = self.top[i]
        log_sum = lw.bin_("+", top, lw.call("mimir_log", total))
        empty = lw.bin_("==", top, lw.const(-lw.INF, f32))
        value = body.let(lw.select(empty, lw.const(lw.NAN, f32), log_sum), "lse")
        cond = all_true([Binary("==", self.lx, u32(0), "bool"), self.scores.row_ok[i]])
        idx = Idx(self.c.ev.shape(lse), axes=[*self.batch_axes, self.rows[i]])
        with body.if_(cond):
            self.c.write(idx, value, outputs=plan.lse, root=lse)


# the workgroup arrays of an `attention` launch: a's and b's slices, then v's rows, take
# turns in one (a barrier ends each phase); p goes through the other
_STAGE, _P_TILE = "$stage", "$p_tile"


def build_scores_softmax(c: KernelContext) -> Built:
    """`softmax(f(a @ b))` over the last axis, or its log, returned
    (`schedule.attention.fuse_scores_softmax`; attention's probabilities) without storing
    the scores: a workgroup of 256 threads owns
    `ATT_ROWS` rows and walks the keys twice, `ATT_KEYS` at a time, computing each
    block's scores through their epilogue (`_ScoreBlocks`). In the first pass each
    thread keeps, for each of its rows, the running max and sum of exp(x - max) over the
    keys it holds (`_online_step`, no exchange between threads); after it the row's 16
    threads combine them into the row's max m and sum l; the second pass stores
    exp(x - m) / l (log-softmax: x - m - log l) through the softmax's epilogue. A row of
    -inf shifts by 0, as the reference does (0 / 0: nan; -inf - log 0: nan). Under a
    causal mask (`causal_reach`) the first pass stops after the last key the workgroup's
    rows keep, and the second writes the later blocks from the mask's fill, without their
    product. Workgroup memory: 8 KiB (10 with the two arrays WGSL and SPIR-V take for
    `WarpReduce`)."""

    ev, body, plan = c.ev, c.body, c.plan
    soft, first = plan.root, plan.scores
    assert soft is not None and first is not None
    x = ev.resolve(softmax_input(ev, soft)[0])
    log = ev.node(soft)["spec"].name == "log_softmax"
    sshape = ev.shape(first)
    batch = sshape[:-2]
    tm = sz.cdiv(sshape[-2], ATT_ROWS)
    dispatch, g = c.groups(sz.product([*batch, tm]))
    row_tile = body.let(ibin("%", g, size_ir(tm)), "tile") if batch else g
    flat_batch = body.let(ibin("/", g, size_ir(tm)), "b") if batch else u32(0)
    batch_axes = Idx(batch, flat=flat_batch).axes(body) if batch else []
    t = Builtin("local_x")
    ly = body.let(ibin("/", t, u32(ATT_SIDE)), "ly")
    lx = body.let(ibin("%", t, u32(ATT_SIDE)), "lx")
    row0 = body.let(ibin("*", row_tile, u32(ATT_ROWS)), "row")
    my_row = body.let(ibin("*", ly, u32(VEC)), "ry")
    my_col = body.let(ibin("*", lx, u32(VEC)), "cx")
    rows = [body.let(ibin("+", row0, ibin("+", my_row, u32(i))), "row") for i in range(VEC)]
    stage = "$stage"
    scores = _ScoreBlocks(c, first, x, batch, batch_axes, row0, rows, stage)
    c.shared.append(SharedArray(stage, "f32", scores.b_at + ATT_SLICE * ATT_KEYS))

    f32 = "f32"
    inf, zero = lw.const(-lw.INF, f32), lw.const(0, f32)
    top = [body.var(inf, "m") for _ in range(VEC)]  # each row's running max
    sums = [body.var(zero, "l") for _ in range(VEC)]  # this thread's share of exp(x - m)
    # each thread's own max and sum over its keys of the row: no exchange per block (and
    # none over the blocks a causal mask fills: each adds exp(fill - max) = 0)
    end = scores.keys_end("the first pass, and the second pass's scores, for")
    with body.for_("n0_", u32(0), end, u32(ATT_KEYS), unroll=False) as n0:
        xs, _, _ = scores.block(n0, my_row, my_col)
        for i in range(VEC):
            _online_step(c, xs[i], top[i], sums[i], shared=False)
    shifts, totals = [], []
    for i in range(VEC):
        # the row's max over its 16 threads, and their sums rescaled to it and added
        row_max = body.let(WarpReduce("fmax", top[i], f32, ATT_SIDE), "m")
        share = body.let(rescaled(top[i], sums[i], row_max), "l")
        total = body.let(WarpReduce("add", share, f32, ATT_SIDE), "l")
        totals.append(body.let(lw.call("mimir_log", total), "lse") if log else total)
        shifts.append(stable_shift(c, row_max))  # (0 for a row of -inf, as the reference)

    def write(xs: list[list[Expr]], keys: list[Expr], valid: list[Expr | None]) -> None:
        for i in range(VEC):
            for j in range(VEC):
                shifted = lw.bin_("-", xs[i][j], shifts[i])
                if log:
                    value = lw.bin_("-", shifted, totals[i])
                else:
                    value = lw.bin_("/", lw.call("exp", shifted), totals[i])
                cond = all_true([scores.row_ok[i], valid[j]])
                idx = Idx(sshape, axes=[*batch_axes, rows[i], keys[j]])
                write_where(c, cond, idx, body.let(value, "y"))

    with body.for_("n0_", u32(0), end, u32(ATT_KEYS), unroll=False) as n0:
        write(*scores.block(n0, my_row, my_col))
    if scores.causal is not None:  # the blocks past the mask's reach: every x is the fill
        fill = lw.const(scores.causal.fill, f32)
        with body.for_("n0_", end, scores.n_ir, u32(ATT_KEYS), unroll=False) as n0:
            write([[fill] * VEC] * VEC, *scores.keys(n0, my_col))
    return (WG, 1, 1), dispatch
