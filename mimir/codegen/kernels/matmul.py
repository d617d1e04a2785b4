"""The `matmul` launch: `a @ b` (batched too) when it is no product by a small or a narrow
matrix (`schedule.roots.root_kind`).

128x128 output tiles, one 16x16-thread workgroup each (batches included), each thread
accumulating an 8x8 block in registers from 4-wide vector reads of workgroup memory; K is
walked in 8-wide slices staged through two buffers per operand (the next slice copied
while this one is multiplied: `cp.async` on PTX), loads past M, N or K read 0, stores are
guarded, so any size works. The epilogue (bias, activation, ...) is applied to each
accumulator before its store. With tensor cores each warp multiplies with `MmaSync`
(`_MmaWarp`) on PTX: float16 or bfloat16 operands always (16-deep k-slices, staged as
halves: `_HalfTiles`, read with `ldmatrix`), float32 ones under `@gpu(precision="tf32")`.
"""

from __future__ import annotations

from mimir.codegen import lower as lw
from mimir.codegen import sizes as sz
from mimir.codegen.builder import Body, Idx, ibin, size_ir, u32
from mimir.codegen.ir import (
    MMA_HALF_SHAPE,
    MMA_SHAPE,
    SIMDGROUP_MATRIX,
    WARP,
    WGMMA_M,
    Assign,
    AsyncProxyFence,
    Barrier,
    Binary,
    Builtin,
    Const,
    CopyAsync,
    Expr,
    If,
    Load,
    LoadMatrix,
    MmaSync,
    PackHalves,
    SharedArray,
    SharedVectorLoad,
    SimdgroupBarrier,
    SimdgroupLoad,
    SimdgroupMultiplyAccumulate,
    SimdgroupStore,
    Store,
    Var,
    WaitAsync,
    WarpgroupMma,
)
from mimir.codegen.kernels.context import Built, KernelContext, mma_kind
from mimir.codegen.kernels.folds import row_value
from mimir.codegen.kernels.staging import (
    VEC,
    all_below,
    all_true,
    batch_offset,
    broadcast_batch,
    stage_operand,
    write_where,
)
from mimir.codegen.schedule.plan import Matmul
from mimir.dtypes import float16

TILE = 16  # threads per side of a matmul workgroup


REG = 8  # outputs per thread per side (register blocking), two 4-wide halves


BLOCK = TILE * REG  # the output tile a matmul workgroup owns (128 x 128)


SLICE = 8  # the k-slice staged at once, in each of two buffers per operand


def build(c: KernelContext) -> Built:
    """A register-blocked, double-buffered tiled matmul: each workgroup owns a BLOCK x BLOCK
    output tile (128 x 128), 16 x 16 threads, each thread an 8 x 8 block of it.

    Thread (ly, lx) accumulates rows `4 ly + i` and `64 + 4 ly + i` and columns `4 lx + j`
    and `64 + 4 lx + j` (i, j < 4) of the tile, so at each staged k it reads its 8 left
    values and 8 right values as four aligned 4-wide vectors (`SharedVectorLoad`) and does 64
    multiply-adds (one `fma` each after contraction). K is walked SLICE at a time through
    two workgroup buffers per operand: while the products of slice s are computed from one
    buffer, slice s + 1 is copied into the other (`CopyAsync`: `cp.async` on PTX, a plain
    store elsewhere), then one wait and one barrier per slice. The left tile is stored
    k-major (`a_tile[k][m]`), the right one as it is (`b_tile[k][n]`). Reads past M, N or K
    stage 0 and stores past M or N are skipped, so any size works; a guard whose size is
    proven a multiple of the tile is not emitted (`guards_removed` in the manifest).

    With `c.tensor_cores` (a PTX build) the products are `MmaSync`s: 16 x 8 x 16 on float16
    or bfloat16 tensor cores when both operands are buffers of that type (their values
    exact in it), the k-slice then 16 deep and the tiles halves (`_HalfTiles`); 16 x 8 x 8
    on TF32 ones for the other float32 accumulations of an `@gpu(precision="tf32")`
    function. See `_MmaWarp`.

    With `Matmul.paired` (`schedule.attention.pair_products`) the workgroup first computes the
    paired product's tile (the same left operand by another right one) into a second set
    of accumulators, through the same buffers, and the epilogue reads it from there.

    With `Matmul.sums` (`schedule.operand_sums`) each thread also adds up the operand
    values it staged (`_OperandSums`), and the workgroups of the first column (row) of
    tiles store the sums of their rows of the left operand (columns of the right one).
    """
    assert isinstance(c.plan, Matmul)
    tile = _Tile(c)
    # a paired product (`schedule.attention.pair_products`): computed first, through the
    # same workgroup buffers, and read by the epilogue from its own accumulators
    paired = c.plan.paired
    paired_accs = tile.zeros() if paired is not None else None
    accs = tile.zeros()
    tile.offsets()
    if paired is not None and paired_accs is not None:
        tile.product(c.ev.node(paired)["inputs"][1], paired_accs, restaged=True)
    tile.sums = _OperandSums(tile) if c.plan.sums else None
    tile.product(tile.right, accs)
    tile.store(accs, paired, paired_accs)
    if tile.sums is not None:
        tile.sums.store()
    return (TILE, TILE, 1), tile.dispatch


class _Tile:
    """A matmul workgroup's output tile and this thread's part of it (`build`)."""

    def __init__(self, c: KernelContext) -> None:
        assert isinstance(c.plan, Matmul)
        ev, body = c.ev, c.body
        self.c, self.ev, self.body = c, ev, body
        root = c.plan.root
        self.left, self.right = ev.node(root)["inputs"][:2]
        self.out = ev.dtype(root)
        lshape, rshape, oshape = ev.shape(self.left), ev.shape(self.right), ev.shape(root)
        self.lshape, self.rshape, self.oshape = lshape, rshape, oshape
        self.m, self.k, self.n = lshape[-2], lshape[-1], rshape[-1]
        self.batch = batch = oshape[:-2]
        tm, tn = sz.cdiv(self.m, BLOCK), sz.cdiv(self.n, BLOCK)
        count = sz.product([*batch, tm, tn])
        self.dispatch, g = c.groups(count)
        tn_ir, tm_ir = size_ir(tn), size_ir(tm)
        self.col_tile = col_tile = body.let(ibin("%", g, tn_ir), "tile")
        rest = body.let(ibin("/", g, tn_ir), "tile")
        row_tile = body.let(ibin("%", rest, tm_ir), "tile") if batch else rest
        self.row_tile = row_tile
        self.sums: _OperandSums | None = None  # `Matmul.sums`, added up in the main product
        b = body.let(ibin("/", rest, tm_ir), "b") if batch else u32(0)
        self.lx, self.ly = lx, ly = Builtin("local_x"), Builtin("local_y")
        self.t = t = body.let(ibin("+", ibin("*", ly, u32(TILE)), lx), "t")  # 0 .. 255
        self.row0 = row0 = body.let(ibin("*", row_tile, u32(BLOCK)), "row")
        self.col0 = col0 = body.let(ibin("*", col_tile, u32(BLOCK)), "col")
        half = BLOCK // 2
        self.rows = [
            body.let(ibin("+", row0, ibin("+", ibin("*", ly, u32(VEC)), u32(half * h + i))), "row")
            for h in range(2)
            for i in range(VEC)
        ]
        self.cols = [
            body.let(ibin("+", col0, ibin("+", ibin("*", lx, u32(VEC)), u32(half * h + j))), "col")
            for h in range(2)
            for j in range(VEC)
        ]
        self.batch_axes = Idx(batch, flat=b).axes(body) if batch else []
        self.acc_t = acc_t = lw.REG[self.out]
        # a paired product (`Matmul.paired`) goes through the same tiles: its right operand
        # must suit the same tensor cores
        rights = [self.right]
        if c.plan.paired is not None:
            rights.append(ev.node(c.plan.paired)["inputs"][1])
        kind = mma_kind(c, self.left, *rights) if acc_t == "f32" else None
        # the k-slice staged at once: one `MmaSync` deep on half tensor cores
        self.sk = MMA_HALF_SHAPE[2] if kind in ("f16", "bf16") else SLICE
        self.size = size = BLOCK * self.sk  # elements of one buffer of either operand
        # half operands are staged as halves: u32 words of two (`_HalfTiles`)
        # on sm_90a the half products are one warpgroup's `WarpgroupMma` (`_WarpgroupTile`)
        self.warpgroups = c.warpgroups and kind in ("f16", "bf16")
        self.halves = _HalfTiles(self) if kind in ("f16", "bf16") else None
        if self.halves is None:
            c.shared += [SharedArray(_A, acc_t, 2 * size), SharedArray(_B, acc_t, 2 * size)]
        else:
            a_words, b_words = self.halves.a_words, self.halves.b_words
            c.shared += [SharedArray(_A, "u32", 2 * a_words), SharedArray(_B, "u32", 2 * b_words)]
        self.mma: _MmaWarp | _WarpgroupTile | None = None
        if self.warpgroups and kind is not None:
            self.mma = _WarpgroupTile(c, t, row0, col0, kind)
        elif kind is not None:
            self.mma = _MmaWarp(c, t, row0, col0, kind)
        if self.mma is not None:
            self.rows, self.cols = self.mma.rows, self.mma.cols
        # an MSL build: f32 products on simdgroup matrices
        simd = kind is None and c.simdgroup_matrices and acc_t == "f32"
        self.simd = _SimdgroupWarp(c, t, row0, col0) if simd else None
        if self.simd is not None:
            self.rows, self.cols = self.simd.rows, self.simd.cols

    def zeros(self) -> list[list[Var]]:
        """A thread's accumulators of one product, zero."""
        if self.mma is not None:
            return self.mma.zeros()
        if self.simd is not None:
            return self.simd.zeros()
        acc_t, body = self.acc_t, self.body
        return [[body.var(lw.const(0, acc_t), "acc") for _ in range(REG)] for _ in range(REG)]

    def offsets(self) -> None:
        """The bounds that need guards, and what each thread stages per slice: the left
        operand at rows `t / 8 + 32 q` and k `t % 8` (8 threads read 8 consecutive k of a
        row), the right one at k `t / 128 + 2 q` and column `t % 128` (consecutive threads,
        consecutive columns), q < 4. Row offsets, row and column guards are computed once,
        before the k loop."""
        c, body, t, m, k, n = self.c, self.body, self.t, self.m, self.k, self.n
        batch, batch_axes = self.batch, self.batch_axes
        self.m_ir, self.k_ir, self.n_ir = m_ir, k_ir, n_ir = size_ir(m), size_ir(k), size_ir(n)
        # a bound needs no guard when its size is proven a multiple of the tile
        m_ok = c.multiple(m, BLOCK, f"row < {sz.manifest_text(m)}")
        n_ok = c.multiple(n, BLOCK, f"col < {sz.manifest_text(n)}")
        k_ok = c.multiple(k, self.sk, f"k < {sz.manifest_text(k)}")
        self.m_b, self.n_b = (None if m_ok else m_ir), (None if n_ok else n_ir)
        self.k_b = None if k_ok else k_ir
        self.l_batch = broadcast_batch(batch_axes, batch, self.lshape[:-2])
        self.r_batch = broadcast_batch(batch_axes, batch, self.rshape[:-2])
        if self.halves is not None:
            self.halves.offsets()
            return
        self.per = per = self.size // (TILE * TILE)  # elements of each operand a thread stages
        self.a_k = body.let(ibin("%", t, u32(self.sk)), "ak")
        self.a_m = a_m = body.let(ibin("/", t, u32(self.sk)), "am")
        self.a_rows = [
            body.let(ibin("+", self.row0, ibin("+", a_m, u32(q * BLOCK // per))), "ar")
            for q in range(per)
        ]
        a_batch = batch_offset(c, self.lshape, batch, batch_axes)
        self.a_base = [
            body.let(ibin("+", a_batch, ibin("*", r_, k_ir)), "ab") for r_ in self.a_rows
        ]
        self.a_ok = [
            None if self.m_b is None else body.let(Binary("<", r_, self.m_b, "bool"), "aok")
            for r_ in self.a_rows
        ]
        self.a_slot = body.let(ibin("+", ibin("*", self.a_k, u32(BLOCK)), a_m), "as")
        self.b_k = body.let(ibin("/", t, u32(BLOCK)), "bk")
        self.b_n = b_n = body.let(ibin("+", self.col0, ibin("%", t, u32(BLOCK))), "bn")
        self.b_base = body.let(
            ibin("+", batch_offset(c, self.rshape, batch, batch_axes), b_n), "bb"
        )
        self.b_ok = (
            None if self.n_b is None else body.let(Binary("<", b_n, self.n_b, "bool"), "bok")
        )
        self.b_step = self.sk // per
        self.b_rows = [body.let(ibin("*", u32(q * self.b_step), n_ir), "bs") for q in range(per)]

    def stage(self, k0: Expr, buffer: Expr, right: int) -> None:
        """Slice `k0` of both operands into the workgroup buffers at offset `buffer` (the
        buffer's parity, 0 or 1, with `_HalfTiles`)."""
        if self.halves is not None:
            self.halves.stage(k0, buffer, right)
            return
        c, body, per, out = self.c, self.body, self.per, self.out
        ka = body.let(ibin("+", k0, self.a_k), "ka")
        ka_ok = None if self.k_b is None else body.let(Binary("<", ka, self.k_b, "bool"), "kok")
        a_at = body.let(ibin("+", buffer, self.a_slot), "sa")
        for q in range(per):
            slot = ibin("+", a_at, u32(q * BLOCK // per))
            axes = [*self.l_batch, self.a_rows[q], ka]
            idx = Idx(self.lshape, flat=ibin("+", self.a_base[q], ka), axes=axes)
            stage_operand(c, _A, slot, self.left, idx, all_true([self.a_ok[q], ka_ok]), out)
        kb0 = body.let(ibin("+", k0, self.b_k), "kb")
        b_at = body.let(ibin("+", buffer, self.t), "sb")
        b_at0 = body.let(ibin("+", ibin("*", kb0, self.n_ir), self.b_base), "bi")
        for q in range(per):
            kb = body.let(ibin("+", kb0, u32(q * self.b_step)), "kb") if q else kb0
            kb_ok = None if self.k_b is None else Binary("<", kb, self.k_b, "bool")
            slot = ibin("+", b_at, u32(q * self.b_step * BLOCK))
            axes = [*self.r_batch, kb, self.b_n]
            idx = Idx(self.rshape, flat=ibin("+", b_at0, self.b_rows[q]), axes=axes)
            stage_operand(c, _B, slot, right, idx, all_true([kb_ok, self.b_ok]), out)

    def product(self, right: int, accs: list[list[Var]], restaged: bool = False) -> None:
        """The tile of `left @ right` into this thread's `accs`, ending with a barrier (so
        the workgroup buffers may be staged again; with `restaged`, where they will be, after
        the spill of simdgroup matrices too). With `_HalfTiles` whose K or N is not
        proven even, the whole k loop twice: copying packed words where both are even at run
        time, packing them from element loads where not."""
        body, halves = self.body, self.halves
        if halves is None or halves.even is None:
            self._product(right, accs, restaged)
            return
        with body.block() as fast:
            halves.copying = True
            self._product(right, accs, restaged)
        with body.block() as slow:
            halves.copying = False
            self._product(right, accs, restaged)
        body.emit(If(halves.even, fast, slow))

    def _product(self, right: int, accs: list[list[Var]], restaged: bool) -> None:
        body = self.body
        # on simdgroup matrices the k loop accumulates into matrices, which then reach
        # this thread's `accs` through workgroup memory (`_SimdgroupWarp.spill`)
        matrices = self.simd.matrices() if self.simd is not None else None
        self.stage(u32(0), u32(0), right)
        self.landed()
        a_row = body.let(ibin("*", self.ly, u32(VEC)), "ly")
        b_col = body.let(ibin("*", self.lx, u32(VEC)), "lx")
        if self.warpgroups:
            # two slices a step, in the buffers of parity 0 and then 1: the operands'
            # descriptors are the same on every step (computed once)
            with body.for_("k0_", u32(0), self.k_ir, u32(2 * self.sk)) as k0:
                self.slices(k0, accs, right, a_row, b_col, parity=0)
                k1 = body.let(ibin("+", k0, u32(self.sk)), "k1")
                with body.if_(Binary("<", k1, self.k_ir, "bool")):
                    self.slices(k1, accs, right, a_row, b_col, parity=1)
        else:
            with body.for_("k0_", u32(0), self.k_ir, u32(self.sk)) as k0:
                self.slices(k0, accs if matrices is None else matrices, right, a_row, b_col)
        if self.simd is not None and matrices is not None:
            self.simd.spill(matrices, accs, restaged)

    def slices(
        self,
        k0: Expr,
        accs: list[list[Var]],
        right: int,
        a_row: Expr,
        b_col: Expr,
        parity: int | None = None,
    ) -> None:
        """One k-slice: the next staged into the other buffers while this one multiplies
        (with `parity`, the halves' buffers it is in, known)."""
        body, size = self.body, self.size
        if parity is not None:
            cur, nxt = u32(parity), u32(1 - parity)
        elif self.halves is not None:
            # slice s = k0 / 16 is in buffers of parity s % 2, the next in the others
            cur = body.let(Binary("&", Binary(">>", k0, u32(4), "u32"), u32(1), "u32"), "cur")
            nxt = body.let(Binary("^", cur, u32(1), "u32"), "nxt")
        else:
            # slice s = k0 / sk is in buffer s % 2: `cur` is its offset, the next in the other
            shift = (size // self.sk).bit_length() - 1
            cur = Binary("&", Binary("<<", k0, u32(shift), "u32"), u32(size), "u32")
            cur = body.let(cur, "cur")
            nxt = body.let(Binary("^", cur, u32(size), "u32"), "nxt")
        k_next = body.let(ibin("+", k0, u32(self.sk)), "kn")
        with body.if_(Binary("<", k_next, self.k_ir, "bool")):
            self.stage(k_next, nxt, right)
        if self.mma is not None and self.halves is not None:
            self.mma.slice_halves(cur, accs)
        elif self.mma is not None:
            self.mma.slice(cur, accs)
        elif self.simd is not None:
            self.simd.slice(cur, accs)
        else:
            self.multiply(cur, accs, a_row, b_col)
        if self.sums is not None and right == self.right:
            self.sums.add(cur)
        self.landed()

    def landed(self) -> None:
        """Wait for this thread's copies, then for the workgroup's: the staged slice may be
        read (by `WarpgroupMma`s after each thread's `AsyncProxyFence`)."""
        self.body.emit(WaitAsync())
        if self.warpgroups:
            self.body.emit(AsyncProxyFence())
        self.body.emit(Barrier())

    def multiply(self, cur: Expr, accs: list[list[Var]], a_row: Expr, b_col: Expr) -> None:
        """The 64 multiply-adds of each k of the slice in the buffers at `cur`, from this
        thread's 8 left and 8 right values, read as four 4-wide vectors."""
        body, acc_t, half = self.body, self.acc_t, BLOCK // 2
        a_at = body.let(ibin("+", cur, a_row), "ra")
        b_at = body.let(ibin("+", cur, b_col), "rb")
        for kk in range(self.sk):
            a_vals: list[Var] = []
            b_vals: list[Var] = []
            for h in range(2):
                va = tuple(body.fresh("a", acc_t) for _ in range(VEC))
                at = ibin("+", a_at, u32(kk * BLOCK + half * h))
                body.emit(SharedVectorLoad(va, _A, at))
                a_vals += va
            for h in range(2):
                vb = tuple(body.fresh("b", acc_t) for _ in range(VEC))
                at = ibin("+", b_at, u32(kk * BLOCK + half * h))
                body.emit(SharedVectorLoad(vb, _B, at))
                b_vals += vb
            for r in range(REG):
                for s_ in range(REG):
                    acc = accs[r][s_]
                    term = lw.bin_("*", a_vals[r], b_vals[s_])
                    body.emit(Assign(acc, lw.bin_("+", acc, term)))

    def store(
        self, accs: list[list[Var]], paired: int | None, paired_accs: list[list[Var]] | None
    ) -> None:
        """Each accumulator through the epilogue (which reads the paired product's, where
        there is one), stored where it is inside the output."""
        c, ev, body, oshape, out = self.c, self.ev, self.body, self.oshape, self.out
        # an epilogue through a reshape to another rank (an einsum's merged letters split
        # again) reads the product at the flat offset it writes (`KernelContext._position`)
        flat = any(len(ev.shape(c.s.folded.get(n, n))) != len(oshape) for n, _ in c.plan.outputs())
        rows, cols = self.rows, self.cols
        for r in range(len(rows)):
            for s_ in range(len(cols)):
                cond = all_below([(rows[r], self.m_b), (cols[s_], self.n_b)])
                acc = accs[r][s_]
                result = lw.round_to(acc, out)
                idx = Idx(oshape, axes=[*self.batch_axes, rows[r], cols[s_]])
                if flat:
                    idx = Idx(oshape, flat=idx.flat(body))
                if paired is not None and paired_accs is not None:
                    ev.overrides[paired] = (idx.key, lw.round_to(paired_accs[r][s_], out))
                write_where(c, cond, idx, result)


# the workgroup arrays that stage the left operand (k-major) and the right one
_A, _B = "$a_tile", "$b_tile"


class _OperandSums:
    """The sums of `Matmul.sums`: each thread adds up, at each k-slice, the operand values
    it staged itself (`_Tile.offsets`), read back from the workgroup buffer (0 past the
    bounds, which adds nothing): of the left operand, rows `t / 8 + 32 q` (q < 4) over k
    `t % 8` of each slice; of the right one, column `t % 128`. After the k loop the 8 (2)
    threads of a row (column) meet in the left (right) tile, and thread t < 128 adds up row
    (column) t of the tile: stored by the workgroups of the first column (row) of tiles.
    Only with the scalar staging: the operands are float32 (`operand_side`)."""

    def __init__(self, tile: _Tile) -> None:
        assert isinstance(tile.c.plan, Matmul) and tile.halves is None
        self.tile = tile
        body, acc_t = tile.body, tile.acc_t
        sides = {side for side, _ in tile.c.plan.sums}
        self.left = (
            [body.var(lw.const(0, acc_t), "rs") for _ in range(tile.per)] if 0 in sides else []
        )
        self.right = body.var(lw.const(0, acc_t), "cs") if 1 in sides else None

    def add(self, cur: Expr) -> None:
        """This thread's staged values of the k-slice in the buffers at offset `cur`."""
        tile = self.tile
        body, per, acc_t = tile.body, tile.per, tile.acc_t
        if self.left:
            at = body.let(ibin("+", cur, tile.a_slot), "sa")
            for q, part in enumerate(self.left):
                value = Load(_A, ibin("+", at, u32(q * BLOCK // per)), acc_t)
                body.emit(Assign(part, lw.bin_("+", part, value)))
        if self.right is not None:
            at = body.let(ibin("+", cur, tile.t), "sb")
            for q in range(per):
                value = Load(_B, ibin("+", at, u32(q * tile.b_step * BLOCK)), acc_t)
                body.emit(Assign(self.right, lw.bin_("+", self.right, value)))

    def store(self) -> None:
        """The threads' sums combined through the workgroup buffers, and stored."""
        tile = self.tile
        c, body, t, per, sk, acc_t = tile.c, tile.body, tile.t, tile.per, tile.sk, tile.acc_t
        assert isinstance(c.plan, Matmul)
        body.emit(Barrier())  # every product's reads of the buffers are done
        for q, part in enumerate(self.left):
            row = ibin("+", tile.a_m, u32(q * BLOCK // per))
            body.emit(Store(_A, ibin("+", ibin("*", row, u32(sk)), tile.a_k), part))
        if self.right is not None:
            body.emit(Store(_B, t, self.right))
        body.emit(Barrier())
        with body.if_(Binary("<", t, u32(BLOCK), "bool")):
            for side, fold in c.plan.sums:
                if side == 0:
                    terms = [
                        Load(_A, ibin("+", ibin("*", t, u32(sk)), u32(j)), acc_t) for j in range(sk)
                    ]
                    at, first, bound, size = tile.row0, tile.col_tile, tile.m_b, tile.m
                else:
                    copies = TILE * TILE // BLOCK
                    terms = [Load(_B, ibin("+", t, u32(j * BLOCK)), acc_t) for j in range(copies)]
                    at, first, bound, size = tile.col0, tile.row_tile, tile.n_b, tile.n
                total = body.let(terms[0], "sum")
                for term in terms[1:]:
                    total = body.let(lw.bin_("+", total, term), "sum")
                pos = body.let(ibin("+", at, t), "at")
                cond: Expr = Binary("==", first, u32(0), "bool")
                if bound is not None:
                    cond = Binary("&&", cond, Binary("<", pos, bound, "bool"), "bool")
                red = c.ev.reduction(fold.root)
                kept = Idx((*tile.batch, size), axes=[*tile.batch_axes, pos])
                with body.if_(cond):
                    c.ev.row_values[fold.root] = body.let(row_value(red, total), "total")
                    c.write(
                        Idx(c.ev.shape(fold.root), flat=kept.flat(body)), outputs=fold.outputs()
                    )
                del c.ev.row_values[fold.root]


# `_HalfTiles`: words per row of the left tile (16 halves, then 4 words of padding) and
# per k of the right one (128 halves, then 4 words), and the words of one buffer of each
A_STRIDE, B_STRIDE = 12, 68


A_WORDS, B_WORDS = BLOCK * A_STRIDE, MMA_HALF_SHAPE[2] * B_STRIDE


class _HalfTiles:
    """The shared tiles of a matmul on float16 or bfloat16 tensor cores: halves stored as
    they are, two to a u32 word (the lower index in the low half), 16-deep k-slices in two
    buffers of each operand (parity 0 or 1).

    The left tile is m-major, `a_tile[m * 12 + k / 2]` (row m's 16 halves in 8 words, then
    4 words of padding), the right one k-major as B is stored, `b_tile[k * 68 + n / 2]`
    (128 halves in 64 words, then 4). `_MmaWarp.slice_halves` reads the fragments with
    `ldmatrix` (x4 for A; x4 `.trans` for B, whose k-major rows are the mma's "col"
    operand transposed); the padding puts the 8 rows of each 8 x 8 matrix (16 bytes each,
    48 or 272 bytes apart) on 8 distinct groups of 4 banks, so no read conflicts.

    Staging copies the packed words as they are where K and N are even (the pairs `2w`,
    `2w + 1` of a row then never straddle rows and are 4-byte aligned): one `cp.async` of 4
    bytes per word (`CopyAsync`, `pair` for float16; a bfloat16 buffer is u32 words
    already), thread t the words `t % 8` of rows `t / 8 + 32 q` (A) and `t % 64` of k
    `t / 64 + 4 q` (B), q < 4, 0 where the pair is past M, N or K. Where K or N is odd (not
    proven even, checked once at run time: `_Tile.product` then has two k loops) each word
    is packed from two guarded element loads instead (`PackHalves`, exact)."""

    def __init__(self, tile: _Tile) -> None:
        self.tile = tile
        ev = tile.ev
        self.kind = "f16" if ev.dtype(tile.left) == float16 else "bf16"
        # the words of one buffer of each operand
        self.a_words, self.b_words = (
            (CORE_WORDS, CORE_WORDS) if tile.warpgroups else (A_WORDS, B_WORDS)
        )

    def a_step(self, q: int) -> int:
        """Words from the slot of row `m` to that of row `m + 32 q` (same k)."""
        return 4 * 2 * CORE * q if self.tile.warpgroups else 32 * A_STRIDE * q

    def b_step(self, q: int) -> int:
        """Words from the slot of k to that of k + 4 q (same n)."""
        if self.tile.warpgroups:  # k + 4 q: q / 2 core matrices on, row 4 (q % 2) of it
            return CORE * (q // 2) + 4 * 4 * (q % 2)
        return 4 * B_STRIDE * q

    def offsets(self) -> None:
        """The staging offsets and guards, before the k loop."""
        tile = self.tile
        c, body, t = tile.c, tile.body, tile.t
        self.copying = True  # `_Tile.product` sets it for each of its two k loops
        # the copies need K and N even (words), or multiples of 8 (16-byte pieces, wgmma)
        unit = 8 if tile.warpgroups else 2
        if all(sz.multiple_proof(x, unit, c.dims) is not None for x in (tile.k, tile.n)):
            self.even: Expr | None = None
        else:
            odd = Binary("&", Binary("|", tile.k_ir, tile.n_ir, "u32"), u32(unit - 1), "u32")
            self.even = body.let(Binary("==", odd, u32(0), "bool"), "even")
        if tile.warpgroups:
            self._piece_offsets()
        a_w = body.let(ibin("%", t, u32(8)), "aw")
        self.a_k = body.let(ibin("*", a_w, u32(2)), "ak")
        a_m = body.let(ibin("/", t, u32(8)), "am")
        self.a_rows = [
            body.let(ibin("+", tile.row0, ibin("+", a_m, u32(32 * q))), "ar") for q in range(4)
        ]
        a_batch = batch_offset(c, tile.lshape, tile.batch, tile.batch_axes)
        self.a_base = [
            body.let(ibin("+", a_batch, ibin("*", r_, tile.k_ir)), "ab") for r_ in self.a_rows
        ]
        self.a_ok = [
            None if tile.m_b is None else body.let(Binary("<", r_, tile.m_b, "bool"), "aok")
            for r_ in self.a_rows
        ]
        if tile.warpgroups:
            self.a_slot = body.let(_core_slot(a_m, a_w), "as")
        else:
            self.a_slot = body.let(ibin("+", ibin("*", a_m, u32(A_STRIDE)), a_w), "as")
        b_w = body.let(ibin("%", t, u32(64)), "bw")
        self.b_k = body.let(ibin("/", t, u32(64)), "bk")
        self.b_n = body.let(ibin("+", tile.col0, ibin("*", b_w, u32(2))), "bn")
        b_batch = batch_offset(c, tile.rshape, tile.batch, tile.batch_axes)
        self.b_base = body.let(ibin("+", b_batch, self.b_n), "bb")
        self.b_ok = [
            None
            if tile.n_b is None
            else body.let(Binary("<", ibin("+", self.b_n, u32(e)), tile.n_b, "bool"), "bok")
            for e in range(2)
        ]
        if tile.warpgroups:
            self.b_slot = body.let(_core_slot(b_w, self.b_k, mn_major=True), "bs")
        else:
            self.b_slot = body.let(ibin("+", ibin("*", self.b_k, u32(B_STRIDE)), b_w), "bs")

    def _piece_offsets(self) -> None:
        """What thread t copies per slice as 16-byte pieces (`copy_pieces`): A's row
        `t / 2`, k `8 (t % 2)` .. `+ 7`, one core-matrix row; B's k `t / 16`, n `8 (t % 16)`
        .. `+ 7`, one core-matrix row too."""
        tile = self.tile
        c, body, t = tile.c, tile.body, tile.t
        a_m = body.let(ibin("/", t, u32(2)), "pm")
        a_half = body.let(ibin("%", t, u32(2)), "ph")
        self.piece_a_k = body.let(ibin("*", a_half, u32(8)), "pk")
        a_row = body.let(ibin("+", tile.row0, a_m), "pr")
        a_batch = batch_offset(c, tile.lshape, tile.batch, tile.batch_axes)
        self.piece_a_base = body.let(ibin("+", a_batch, ibin("*", a_row, tile.k_ir)), "pa")
        self.piece_a_ok = (
            None if tile.m_b is None else body.let(Binary("<", a_row, tile.m_b, "bool"), "pok")
        )
        self.piece_a_slot = body.let(_core_slot(a_m, ibin("*", a_half, u32(4))), "ps")
        nb = body.let(ibin("%", t, u32(16)), "pn")
        self.piece_b_k = body.let(ibin("/", t, u32(16)), "pk")
        b_n = body.let(ibin("+", tile.col0, ibin("*", nb, u32(8))), "pn")
        b_batch = batch_offset(c, tile.rshape, tile.batch, tile.batch_axes)
        self.piece_b_base = body.let(ibin("+", b_batch, b_n), "pb")
        self.piece_b_ok = (
            None if tile.n_b is None else body.let(Binary("<", b_n, tile.n_b, "bool"), "pok")
        )
        slot = _core_slot(ibin("*", nb, u32(4)), self.piece_b_k, mn_major=True)
        self.piece_b_slot = body.let(slot, "ps")
        # bfloat16 buffers are read in u32 words: the pieces' word offsets at k = 0 (every
        # element offset above is even) and N's words
        self.piece_a_word = body.let(
            ibin("/", ibin("+", self.piece_a_base, self.piece_a_k), u32(2)), "pw"
        )
        self.piece_b_word = body.let(ibin("/", self.piece_b_base, u32(2)), "pw")
        self.n_words = body.let(ibin("/", tile.n_ir, u32(2)), "nw")

    def copy_pieces(self, k0: Expr, parity: Expr, right: int) -> None:
        """The slice's two 16-byte pieces of this thread (K and N multiples of 8: a piece
        is wholly inside the operand or wholly past it, and 16-byte aligned)."""
        tile, body = self.tile, self.tile.body
        a_at = body.let(ibin("+", ibin("*", parity, u32(self.a_words)), self.piece_a_slot), "sa")
        b_at = body.let(ibin("+", ibin("*", parity, u32(self.b_words)), self.piece_b_slot), "sb")
        ka = body.let(ibin("+", k0, self.piece_a_k), "ka")
        cond = all_true([self.piece_a_ok, self._k_ok(ka)])
        word = ibin("+", self.piece_a_word, ibin("/", k0, u32(2)))
        flat = ibin("+", self.piece_a_base, ka)
        self._copy(_A, a_at, tile.left, flat, cond, quad=True, word=word)
        kb = body.let(ibin("+", k0, self.piece_b_k), "kb")
        cond = all_true([self._k_ok(kb), self.piece_b_ok])
        flat = ibin("+", self.piece_b_base, ibin("*", kb, tile.n_ir))
        word = ibin("+", self.piece_b_word, ibin("*", kb, self.n_words))
        self._copy(_B, b_at, right, flat, cond, quad=True, word=word)

    def stage(self, k0: Expr, parity: Expr, right: int) -> None:
        """Slice `k0` of both operands into the buffers of `parity`."""
        body = self.tile.body
        if self.copying and self.tile.warpgroups:
            self.copy_pieces(k0, parity, right)
            return
        a_at = body.let(ibin("+", ibin("*", parity, u32(self.a_words)), self.a_slot), "sa")
        b_at = body.let(ibin("+", ibin("*", parity, u32(self.b_words)), self.b_slot), "sb")
        ka = body.let(ibin("+", k0, self.a_k), "ka")
        kb = body.let(ibin("+", k0, self.b_k), "kb")
        if self.copying:
            self.copy(ka, kb, a_at, b_at, right)
        else:
            self.pack(ka, kb, a_at, b_at, right)

    def _k_ok(self, k: Expr) -> Expr | None:
        k_b = self.tile.k_b
        return None if k_b is None else Binary("<", k, k_b, "bool")

    def copy(self, ka: Expr, kb: Expr, a_at: Expr, b_at: Expr, right: int) -> None:
        """The words of the slice copied as they are (K and N even)."""
        tile = self.tile
        ka_ok = self._k_ok(ka)
        for q in range(4):
            slot = ibin("+", a_at, u32(self.a_step(q)))
            cond = all_true([self.a_ok[q], ka_ok])
            self._copy(_A, slot, tile.left, ibin("+", self.a_base[q], ka), cond)
        for q in range(4):
            k = ibin("+", kb, u32(4 * q))
            slot = ibin("+", b_at, u32(self.b_step(q)))
            cond = all_true([self._k_ok(k), self.b_ok[0]])
            self._copy(_B, slot, right, ibin("+", self.b_base, ibin("*", k, tile.n_ir)), cond)

    def _copy(
        self,
        array: str,
        slot: Expr,
        operand: int,
        flat: Expr,
        cond: Expr | None,
        quad: bool = False,
        word: Expr | None = None,
    ) -> None:
        """Copy the pair (or with `quad` the 16-byte piece) at element `flat` of `operand`;
        a bfloat16 operand's u32 word `flat / 2`, or `word` where given (the same, in
        fewer instructions)."""
        ev, body, c = self.tile.ev, self.tile.body, self.tile.c
        buffer = ev.buffers[ev.resolve(operand)]
        if quad:
            entry = (
                buffer,
                "read",
                8,
                "K and N multiples of 8 (else the k loop that packs "
                "words from element loads); offset a multiple of 16 bytes",
            )
            if entry not in c.vectorized:
                c.vectorized.append(entry)
        if self.kind == "f16":
            value = Load(buffer, flat, "f16")
            body.emit(CopyAsync(array, slot, value, cond, pair=True, words=4 if quad else 1))
        else:
            at = ibin("/", flat, u32(2)) if word is None else word
            words = 4 if quad else 1
            body.emit(CopyAsync(array, slot, Load(buffer, at, "u32"), cond, words=words))

    def pack(self, ka: Expr, kb: Expr, a_at: Expr, b_at: Expr, right: int) -> None:
        """The words of the slice packed from two guarded element loads each (K or N odd)."""
        tile = self.tile
        for q in range(4):
            pair = []
            for e in range(2):
                k = ibin("+", ka, u32(e))
                axes = [*tile.l_batch, self.a_rows[q], k]
                idx = Idx(tile.lshape, flat=ibin("+", self.a_base[q], k), axes=axes)
                pair.append(self._value(tile.left, idx, all_true([self.a_ok[q], self._k_ok(k)])))
            self._store(_A, ibin("+", a_at, u32(self.a_step(q))), pair)
        for q in range(4):
            k = ibin("+", kb, u32(4 * q))
            pair = []
            for e in range(2):
                n = ibin("+", self.b_n, u32(e))
                axes = [*tile.r_batch, k, n]
                flat = ibin("+", ibin("+", self.b_base, u32(e)), ibin("*", k, tile.n_ir))
                idx = Idx(tile.rshape, flat=flat, axes=axes)
                pair.append(self._value(right, idx, all_true([self._k_ok(k), self.b_ok[e]])))
            self._store(_B, ibin("+", b_at, u32(self.b_step(q))), pair)

    def _value(self, operand: int, idx: Idx, cond: Expr | None) -> Expr:
        body, ev = self.tile.body, self.tile.ev
        if cond is None:
            return ev.at(operand, idx)
        value = body.var(lw.const(0, "f32"), "x")
        with body.if_(cond):
            body.emit(Assign(value, ev.at(operand, idx)))
        return value

    def _store(self, array: str, slot: Expr, pair: list[Expr]) -> None:
        body = self.tile.body
        word = body.fresh("w", "u32")
        body.emit(PackHalves(word, pair[0], pair[1], self.kind))
        body.emit(Store(array, slot, word))


# `_HalfTiles` for `WarpgroupMma` (no swizzle): 8 x 16-byte core matrices of 32 words each;
# A's (8 rows by 8 k) 2 per 8 rows (k, then k + 8: LBO 128 bytes), 8 rows on every 256 bytes
# (SBO); B's (8 k by 8 n) 2 per 8 columns (LBO 128), 8 columns on every 256 (SBO). 1024
# words per buffer of each operand.
CORE = 32


CORE_WORDS = BLOCK * MMA_HALF_SHAPE[2] // 2


CORE_OFFSETS = (4 * CORE, 8 * CORE)  # (leading, stride) byte offsets of both operands


def _core_slot(mn: Expr, w: Expr, mn_major: bool = False) -> Expr:
    """The word of a core-matrix tile (`CORE_OFFSETS`) that holds the pair at word `w` of
    row `mn` (K-major: row m, k `2w`, `2w + 1`), or with `mn_major` at word `mn` of k row
    `w` (n `2 mn`, `2 mn + 1` at k `w`). Either way a core matrix is 8 rows of 4 words;
    they follow each other along k (`CORE` words apart) and along m or n (`2 * CORE`)."""
    row, word = (w, mn) if mn_major else (mn, w)
    row_core, word_core = (CORE, 2 * CORE) if mn_major else (2 * CORE, CORE)
    core = ibin(
        "+",
        ibin("*", ibin("/", row, u32(8)), u32(row_core)),
        ibin("*", ibin("/", word, u32(4)), u32(word_core)),
    )
    return ibin(
        "+", core, ibin("+", ibin("*", ibin("%", row, u32(8)), u32(4)), ibin("%", word, u32(4)))
    )


WARPS_M, WARPS_N = 2, 4  # the 8 warps of a matmul workgroup over its 128 x 128 tile


MMA_M, MMA_N, MMA_K = MMA_SHAPE


FRAG_M = BLOCK // WARPS_M // MMA_M  # 16 x 8 tiles per warp along m (4) and n (4)


FRAG_N = BLOCK // WARPS_N // MMA_N


def _warp_block(body: Body, t: Expr) -> tuple[Expr, Expr, Expr, Expr, Expr, Expr]:
    """Where thread `t` of a matmul workgroup sits among its 8 warps (`_MmaWarp`) or
    simdgroups (`_SimdgroupWarp`): its warp, its lane, the lane's `g = l / 4` and
    `q = l % 4`, and the first row and column of the warp's 64 x 32 block of the tile."""
    warp = body.let(ibin("/", t, u32(WARP)), "warp")
    lane = body.let(ibin("%", t, u32(WARP)), "lane")
    g = body.let(ibin("/", lane, u32(4)), "g")
    q = body.let(ibin("%", lane, u32(4)), "q")
    wm = body.let(ibin("*", ibin("/", warp, u32(WARPS_N)), u32(BLOCK // WARPS_M)), "wm")
    wn = body.let(ibin("*", ibin("%", warp, u32(WARPS_N)), u32(BLOCK // WARPS_N)), "wn")
    return warp, lane, g, q, wm, wn


class _MmaWarp:
    """The tensor-core products of a `matmul` launch (PTX): warp `w = t / 32` of the
    workgroup owns rows `64 (w / 4)` .. `+ 64` and columns `32 (w % 4)` .. `+ 32` of the
    128 x 128 tile, 4 x 4 `MmaSync` tiles of 16 x 8 each, and at each staged k-slice (one
    `MmaSync` deep: 8 for TF32, 16 for float16 and bfloat16) reads its fragments from the
    shared tiles: TF32 with plain loads, halves with `ldmatrix` (`slice_halves`, the tiles
    of `_HalfTiles`), at the PTX ISA's positions (`MmaSync`), lane
    `(g, q) = (l / 4, l % 4)`: with TF32 A[m][k] at `a_tile[k * 128 + m]` for m in `g, g + 8`
    (+ 16 per tile) and k in `q, q + 4`, and B[k][n] at `b_tile[k * 128 + n]` for n = `g`
    (+ 8 per tile); with halves k in `2q, 2q + 1, 2q + 8, 2q + 9` for both. The 64
    accumulators of a thread are, as a grid, rows `16 i + g + 8 h` by columns
    `8 j + 2 q + e` (h, e < 2) of the warp's block: what the epilogue stores."""

    def __init__(self, c: KernelContext, t: Expr, row0: Expr, col0: Expr, kind: str) -> None:
        body = c.body
        self.body, self.kind = body, kind
        _, lane, g, q, wm, wn = _warp_block(body, t)
        if kind == "tf32":
            # shared offsets of this lane's first A and B elements (k = q), within a buffer
            self.a_at = body.let(ibin("+", ibin("*", q, u32(BLOCK)), ibin("+", wm, g)), "fa")
            self.b_at = body.let(ibin("+", ibin("*", q, u32(BLOCK)), ibin("+", wn, g)), "fb")
        else:
            # the row this lane addresses for `ldmatrix` (`_HalfTiles`): row `l % 8` of
            # matrix `l / 8`, whose bit 0 is 8 more rows (A) or k (B), bit 1 8 more k (A,
            # 4 words) or n (B, 4 words)
            mat = body.let(ibin("/", lane, u32(8)), "mat")
            r = body.let(ibin("%", lane, u32(8)), "r")
            hi = body.let(ibin("*", ibin("%", mat, u32(2)), u32(8)), "hi")
            side = body.let(ibin("*", ibin("/", mat, u32(2)), u32(4)), "side")
            a_row = ibin("+", ibin("+", wm, r), hi)
            self.a_at = body.let(ibin("+", ibin("*", a_row, u32(A_STRIDE)), side), "fa")
            b_row = ibin("*", ibin("+", r, hi), u32(B_STRIDE))
            b_at = ibin("+", b_row, ibin("+", ibin("/", wn, u32(2)), side))
            self.b_at = body.let(b_at, "fb")
        row = ibin("+", row0, ibin("+", wm, g))
        col = ibin("+", col0, ibin("+", wn, ibin("*", q, u32(2))))
        self.rows = [
            body.let(ibin("+", row, u32(MMA_M * i + 8 * h)), "row")
            for i in range(FRAG_M)
            for h in range(2)
        ]
        self.cols = [
            body.let(ibin("+", col, u32(MMA_N * j + e)), "col")
            for j in range(FRAG_N)
            for e in range(2)
        ]

    def zeros(self) -> list[list[Var]]:
        """A thread's accumulators of one product, zero: grid [2 i + h][2 j + e] is
        fragment (i, j)'s c[2 h + e]."""
        return [
            [self.body.var(lw.const(0, "f32"), "acc") for _ in range(2 * FRAG_N)]
            for _ in range(2 * FRAG_M)
        ]

    def slice_halves(self, parity: Expr, accs: list[list[Var]]) -> None:
        """The `MmaSync`s of the k-slice in the `_HalfTiles` buffers of `parity`: each A
        fragment one `ldmatrix.x4` (a0..a7 in the order of its 4 matrices), each two B
        fragments one `ldmatrix.x4.trans` (k-major rows: the transposed pairs)."""
        body = self.body
        a_at = body.let(ibin("+", ibin("*", parity, u32(A_WORDS)), self.a_at), "ra")
        b_at = body.let(ibin("+", ibin("*", parity, u32(B_WORDS)), self.b_at), "rb")
        a_frags = []
        for i in range(FRAG_M):
            regs = tuple(body.fresh("a", "u32") for _ in range(4))
            body.emit(LoadMatrix(regs, _A, ibin("+", a_at, u32(MMA_M * i * A_STRIDE))))
            a_frags.append(regs)
        b_frags = []
        for jp in range(FRAG_N // 2):
            regs = tuple(body.fresh("b", "u32") for _ in range(4))
            body.emit(LoadMatrix(regs, _B, ibin("+", b_at, u32(MMA_N * jp)), trans=True))
            b_frags += [regs[:2], regs[2:]]
        for i, a in enumerate(a_frags):
            for j, b in enumerate(b_frags):
                acc = tuple(accs[2 * i + h][2 * j + e] for h in range(2) for e in range(2))
                body.emit(MmaSync(acc, a, b, self.kind))

    def slice(self, cur: Expr, accs: list[list[Var]]) -> None:
        """The `MmaSync`s of the k-slice in the shared buffer at offset `cur`, into `accs`."""
        body = self.body
        a_at = body.let(ibin("+", cur, self.a_at), "ra")
        b_at = body.let(ibin("+", cur, self.b_at), "rb")

        def load(tile: str, at: Expr, offset: int) -> Expr:
            return body.let(Load(tile, ibin("+", at, u32(offset)), "f32"), tile.strip("$_")[0])

        if self.kind == "tf32":
            k4 = 4 * BLOCK  # k + 4, in the k-major tiles
            a_offsets: tuple[int, ...] = (0, 8, k4, k4 + 8)
            b_offsets: tuple[int, ...] = (0, k4)
        else:
            # k + 1 and k + 8, in the k-major tiles: a0..a7 are (m, k), (m, k + 1),
            # (m + 8, k), (m + 8, k + 1), then the same at k + 8; b0..b3 k, k + 1, k + 8, k + 9
            k1, k8 = BLOCK, 8 * BLOCK
            a_offsets = (0, k1, 8, k1 + 8, k8, k8 + k1, k8 + 8, k8 + k1 + 8)
            b_offsets = (0, k1, k8, k8 + k1)
        a_frags = [
            tuple(load("$a_tile", a_at, MMA_M * i + off) for off in a_offsets)
            for i in range(FRAG_M)
        ]
        b_frags = [
            tuple(load("$b_tile", b_at, MMA_N * j + off) for off in b_offsets)
            for j in range(FRAG_N)
        ]
        for i, a in enumerate(a_frags):
            for j, b in enumerate(b_frags):
                acc = tuple(accs[2 * i + h][2 * j + e] for h in range(2) for e in range(2))
                body.emit(MmaSync(acc, a, b, self.kind))


class _WarpgroupTile:
    """The products of a `matmul` launch on warpgroup tensor cores (PTX, sm_90a): the 256
    threads are 2 warpgroups, warpgroup `t / 128` owns rows `64 (t / 128)` .. `+ 64` and all
    128 columns of the tile, one `WarpgroupMma` m64n128k16 per staged k-slice, both
    operands read from the `_HalfTiles` buffers (core-matrix layout, `CORE_OFFSETS`). Thread
    `32 w + l` of a warpgroup, `(g, q) = (l / 4, l % 4)`, accumulates rows `16 w + g + 8 h`
    by columns `8 j + 2 q + e` (h, e < 2, j < 16) of its warpgroup's block: grid [h][2 j + e],
    what the epilogue stores."""

    def __init__(self, c: KernelContext, t: Expr, row0: Expr, col0: Expr, kind: str) -> None:
        body = c.body
        self.body, self.kind = body, kind
        group = body.let(ibin("/", t, u32(4 * WARP)), "wg")
        warp = body.let(ibin("%", ibin("/", t, u32(WARP)), u32(4)), "warp")
        lane = body.let(ibin("%", t, u32(WARP)), "lane")
        g = body.let(ibin("/", lane, u32(4)), "g")
        q = body.let(ibin("%", lane, u32(4)), "q")
        # the warpgroup's first row of A: 8 core-matrix rows of 2 core matrices on
        self.a_at = body.let(ibin("*", group, u32(WGMMA_M // 8 * 2 * CORE)), "fa")
        row = ibin(
            "+",
            row0,
            ibin("+", ibin("*", group, u32(WGMMA_M)), ibin("+", ibin("*", warp, u32(16)), g)),
        )
        col = ibin("+", col0, ibin("*", q, u32(2)))
        self.rows = [body.let(ibin("+", row, u32(8 * h)), "row") for h in range(2)]
        self.cols = [
            body.let(ibin("+", col, u32(8 * j + e)), "col")
            for j in range(BLOCK // 8)
            for e in range(2)
        ]

    def zeros(self) -> list[list[Var]]:
        """A thread's accumulators of one product, zero: grid [h][2 j + e]."""
        return [
            [self.body.var(lw.const(0, "f32"), "acc") for _ in range(BLOCK // 4)] for _ in range(2)
        ]

    def slice_halves(self, parity: Expr, accs: list[list[Var]]) -> None:
        """The `WarpgroupMma` of the k-slice in the `_HalfTiles` buffers of `parity`."""
        body = self.body
        a_at = body.let(ibin("+", ibin("*", parity, u32(CORE_WORDS)), self.a_at), "ra")
        b_at = body.let(ibin("*", parity, u32(CORE_WORDS)), "rb")
        acc = tuple(
            accs[h][2 * j + e] for j in range(BLOCK // 8) for h in range(2) for e in range(2)
        )
        body.emit(WarpgroupMma(acc, _A, a_at, _B, b_at, self.kind, CORE_OFFSETS, CORE_OFFSETS))


SIMDS_M, SIMDS_N = 8, 4  # 8 x 8 matrices of a simdgroup's 64 x 32 block


class _SimdgroupWarp:
    """The simdgroup-matrix products of a `matmul` launch (MSL): simdgroup `w = t / 32`
    owns rows `64 (w / 4)` .. `+ 64` and columns `32 (w % 4)` .. `+ 32` of the 128 x 128
    tile, 8 x 4 matrices of 8 x 8 (`SimdgroupMultiplyAccumulate`); at each staged k-slice
    (8 deep) it loads 8 left fragments from the k-major left tile (transposed: `a_tile[k *
    128 + m]` is row m, column k) and 4 right ones from the right tile as it is.

    How a simdgroup matrix's elements sit in its threads is the device's own, so after the
    k loop each matrix is stored to the simdgroup's 64 floats of workgroup memory (in the
    left tile, free once the k loop's last barrier is passed: no memory beyond the scalar
    schedule's, so the launch fits beside another as that one does) and read back as the
    epilogue wants it: lane `l`, `(g, q) = (l / 4, l % 4)`, holds rows `8 i +
    g` and columns `8 j + 2 q + e` (i < 8, j < 4, e < 2) of the simdgroup's block, the
    layout of `_MmaWarp`."""

    def __init__(self, c: KernelContext, t: Expr, row0: Expr, col0: Expr) -> None:
        body = c.body
        self.body = body
        warp, _, g, q, self.wm, self.wn = _warp_block(body, t)
        self.spill_at = body.let(ibin("*", warp, u32(64)), "sp")
        self.lane_at = body.let(
            ibin("+", self.spill_at, ibin("+", ibin("*", g, u32(8)), ibin("*", q, u32(2)))), "sl"
        )
        row = ibin("+", row0, ibin("+", self.wm, g))
        col = ibin("+", col0, ibin("+", self.wn, ibin("*", q, u32(2))))
        self.rows = [body.let(ibin("+", row, u32(8 * i)), "row") for i in range(SIMDS_M)]
        self.cols = [
            body.let(ibin("+", col, u32(8 * j + e)), "col")
            for j in range(SIMDS_N)
            for e in range(2)
        ]

    def zeros(self) -> list[list[Var]]:
        """A thread's accumulators of one product as the epilogue reads them, zero: grid
        [i][2 j + e] is row `8 i + g`, column `8 j + 2 q + e`."""
        return [
            [self.body.var(lw.const(0, "f32"), "acc") for _ in range(2 * SIMDS_N)]
            for _ in range(SIMDS_M)
        ]

    def matrices(self) -> list[list[Var]]:
        """The simdgroup's accumulator matrices, zero, and its fragments (`slice`)."""
        zero = Const(0.0, SIMDGROUP_MATRIX)
        body = self.body
        self.left = [body.var(zero, "fa") for _ in range(SIMDS_M)]
        self.right = [body.var(zero, "fb") for _ in range(SIMDS_N)]
        return [[body.var(zero, "sm") for _ in range(SIMDS_N)] for _ in range(SIMDS_M)]

    def slice(self, cur: Expr, matrices: list[list[Var]]) -> None:
        """The products of the k-slice in the buffers at offset `cur`."""
        body = self.body
        a_at = body.let(ibin("+", cur, self.wm), "ra")
        b_at = body.let(ibin("+", cur, self.wn), "rb")
        for kk in range(0, SLICE, 8):
            for i, a in enumerate(self.left):
                at = ibin("+", a_at, u32(kk * BLOCK + 8 * i))
                body.emit(SimdgroupLoad(a, _A, at, BLOCK, transpose=True))
            for j, b in enumerate(self.right):
                at = ibin("+", b_at, u32(kk * BLOCK + 8 * j))
                body.emit(SimdgroupLoad(b, _B, at, BLOCK))
            for i, a in enumerate(self.left):
                for j, b in enumerate(self.right):
                    body.emit(SimdgroupMultiplyAccumulate(matrices[i][j], a, b))

    def spill(self, matrices: list[list[Var]], accs: list[list[Var]], restaged: bool) -> None:
        """Each matrix through the simdgroup's 64 floats of the left tile into this thread's
        `accs`; with `restaged` (another product stages the tiles next) a barrier after."""
        body = self.body
        for i in range(SIMDS_M):
            for j in range(SIMDS_N):
                body.emit(SimdgroupStore(matrices[i][j], _A, self.spill_at, 8))
                body.emit(SimdgroupBarrier())
                for e in range(2):
                    value = Load(_A, ibin("+", self.lane_at, u32(e)), "f32")
                    body.emit(Assign(accs[i][2 * j + e], body.let(value, "v")))
                body.emit(SimdgroupBarrier())  # all read before the next matrix is stored
        if restaged:
            body.emit(Barrier())
