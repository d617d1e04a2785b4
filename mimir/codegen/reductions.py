"""Reductions and softmax: strided loops, threadgroup trees, several workgroups.

- `reduce`: one workgroup per output element: its threads stride over the
  reduced elements (any count, any axes), then combine in a tree in threadgroup
  memory. When the reduced count is a literal of at most 32, one thread per
  output element loops instead. `mean` divides by the count.
- a reduction to one element of a large or symbolic count is split over many
  workgroups, each reducing `CHUNK` elements into a scratch buffer of partials.
  Where the count is at least 1 (so some workgroup runs) this is one launch (`reduce`
  with a counter, `_last_block`): the last workgroup to finish, found with an atomic
  counter, combines the partials. PTX, MSL and SPIR-V hand the partials over with a
  device-scope fence (SPIR-V's is `OpMemoryBarrier` at Device scope; the partials are
  stored and loaded as atomics, which are device-coherent without the `Coherent`
  decoration naga rejects). WGSL has no such fence (relaxed atomics and workgroup-scope
  barriers only): there each partial is published in two tagged atomic words
  (`ir.Publish`, `_hand`), which the last workgroup reads again until both carry their
  tag, then zeroes for the next launch (`_reset_counter`). Where the counters and
  partials take a target past its 8 storage buffers it is two launches
  (`mimir.codegen._compile_kernel`): `partial`, then `reduce` combines the partials.
  Every schedule combines the partials in the same order and tree: bit-identical
  results.
- `moments` (`var`/`std`) and `argreduce` (`argmax`/`argmin`): one workgroup per
  output element, two strided passes each combined in a tree (the mean, then the
  squared deviations; the extremum, then its first position); for a literal count of
  at most 32, one thread per output element makes both passes alone.
- `softmax`: one workgroup per row along the axis, numerically stable for any
  row length: the row read once into registers when its length is proven small
  enough, else one online max-and-sum pass and a write pass (see `softmax`).

Sums accumulate in the result dtype (f32 for float16), max/min of bools in u32.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from typing import Any

import networkx as nx

from mimir.codegen import lower as lw
from mimir.codegen import sizes as sz
from mimir.codegen.builder import Idx, ibin, size_ir, u32
from mimir.codegen.context import WG, KernelContext, reg_dtype, row_width
from mimir.codegen.ir import (
    WARP,
    Assign,
    AtomicAdd,
    Await,
    Barrier,
    Binary,
    Builtin,
    Cast,
    Const,
    Expr,
    Fence,
    If,
    Load,
    Publish,
    Retract,
    Return,
    SharedArray,
    Store,
    Var,
    VarDecl,
    VectorLoad,
    WarpReduce,
)
from mimir.codegen.schedule import root_kind
from mimir.codegen.tensors import Reduction
from mimir.codegen.vectorize import vectorise
from mimir.codegen.warp import group_total, group_totals, op_for, slots
from mimir.dims import BinOp
from mimir.dtypes import DType, bool_, float16, float32, uint32

SERIAL_REDUCE_MAX = 32
CHUNK = 4096  # elements per workgroup in a `partial` launch (32 per thread)
SPLIT_WG = 128  # threads of a split reduction's workgroups (Triton's 4 warps of a 4096 block)
SPLIT_MIN = 16384  # a literal count up to this is reduced by one workgroup, unsplit
UNROLL = 4  # elements a strided loop visits per iteration (`strided`)


def strided(body: Any, start: Expr, end: Expr, step: int, visit: Any) -> None:
    """`visit(r)` for r = start, start + step, ... below `end`, in that order: `UNROLL`
    of them per iteration of one loop, then the rest (fewer than `UNROLL`) one per
    iteration of a second. A thread sees its elements in the same order as one loop
    would give them, so what it accumulates is bit for bit the same; the loop's compare,
    branch and increment are paid once per `UNROLL` elements."""
    span = (UNROLL - 1) * step
    # r + span is below end exactly when r < end - span; no u32 wrap when end <= span
    if isinstance(end, Const):
        last: Expr = u32(max(0, int(end.value) - span))
    else:
        over = Binary(">", end, u32(span), "bool")
        last = body.let(lw.select(over, ibin("-", end, u32(span)), u32(0)), "last")
    rest = body.var(start, "rest")
    with body.for_("r", start, last, u32(UNROLL * step), unroll=False) as r:
        for k in range(UNROLL):
            visit(r if k == 0 else ibin("+", r, u32(k * step)))
        body.emit(Assign(rest, ibin("+", r, u32(UNROLL * step))))
    with body.for_("r", rest, end, u32(step), unroll=False) as r:
        visit(r)


LANES = 4  # elements of a 128-bit vector access (`row_elements`)


def row_elements(
    c: KernelContext,
    base: Expr | None,
    length: Any,
    rows: tuple[Any, ...],
    width: int,
    visit: Any,
    held: bool = False,
) -> None:
    """`visit(j)` for this thread's elements j of a row of `length` at flat offset `base`
    of a tensor whose elements are `rows` rows of it, the row's elements split among
    `width` threads.

    Four consecutive elements per thread at a time where that is sound
    (`_row_vectors`): thread t visits j = 4t .. 4t+3, then 4t + 4*width .. , and the
    reads and writes of a vector's four elements become one 128-bit access
    (`vectorize.vectorise`): the tensor's own buffers at `base + j`, and buffers of one
    row's length (a broadcast `gamma`) at `j`. Both offsets are multiples of 4 when the
    length is, which the checker proves (a literal, a `multiple_of` dim) or, for a
    symbolic length on a target with `vector_views` (PTX, MSL), the kernel tests at run
    time, with the strided scalar loop (`strided`: thread t visits t, t + width, ...) for
    the other lengths. Elsewhere it is that strided loop alone. With `held` (a pass that
    is the only one over its row: a reduction's), the run-time test first takes a row
    of at most `HELD` vectors per thread loop-free: each of the thread's vectors that is
    in the row, under its own guard."""
    body = c.body
    lid = Builtin("local_x")
    plan = _row_vectors(c, base, length, rows)

    def scalars() -> None:
        strided(body, lid, size_ir(length), width, visit)

    if plan is None:
        scalars()
        return
    assert base is not None

    def vectors(families: list[set[str]], proof: str) -> None:
        _vector_loop(c, base, size_ir(length), width, visit, families, proof)

    if not held or plan[1] is not None or not c.s.vector_views:
        _four_wide(c, plan, length, vectors, scalars)
        return

    def short(proof: str) -> None:
        first = body.let(Binary("<<", lid, u32(2), "u32"), "j")
        for k in range(HELD):
            r = body.let(ibin("+", first, u32(k * LANES * width)), "j")
            with body.block() as guarded:
                _row_vector(c, base, r, visit, plan[0], proof)
            body.emit(If(Binary("<", r, size_ir(length), "bool"), guarded))

    _if_held(c, length, width, short, lambda: _four_wide(c, plan, length, vectors, scalars))


def _four_wide(
    c: KernelContext, plan: tuple[list[set[str]], str | None], size: Any, vectors: Any, scalars: Any
) -> None:
    """`vectors(families, proof)` where `size` is proven a multiple of 4; else both, behind
    a run-time test of `size % 4` (`_row_vectors` says which)."""
    body = c.body
    families, proof = plan
    if proof is not None:
        vectors(families, proof)
        return
    text = sz.manifest_text(size)
    with body.block() as wide:
        vectors(families, f"{text} % 4 == 0, tested at run time (else one element at a time)")
    with body.block() as narrow:
        scalars()
    whole = Binary("==", ibin("%", size_ir(size), u32(LANES)), u32(0), "bool")
    body.emit(If(whole, wide, narrow))


def _row_vectors(
    c: KernelContext, base: Expr | None, length: Any, rows: tuple[Any, ...]
) -> tuple[list[set[str]], str | None] | None:
    """Whether `row_elements` may go 4 wide: None if not; else the buffers each family of
    offsets may read or write 4 wide (the tensor's own, `base + j`; one row's, `j`) and
    why the length is a multiple of 4 (None: tested at run time)."""
    if base is None:
        return None
    proof = sz.multiple_proof(length, LANES, c.dims)
    if proof is None and (isinstance(length, int) or not c.s.vector_views):
        return None
    total = sz.simplify(sz.product([*rows, length]))
    high = sz.upper_bound(length, c.dims)
    low = sz.lower_bound(total, c.dims)
    if (high is not None and high < LANES) or low is None or low < 1:
        # a WebGPU binding of an array of vectors must hold one vector (as `elementwise`)
        return None
    sizes = {b.name: sz.key(sz.simplify(sz.product(list(b.shape)))) for b in c.s.buffers}
    own = {n for n, k in sizes.items() if k == sz.key(total)}
    one_row = {n for n, k in sizes.items() if k == sz.key(sz.simplify(length))}
    return [own, one_row], proof


def _words(
    c: KernelContext, plan: tuple[list[set[str]], str | None] | None
) -> tuple[list[set[str]], str | None] | None:
    """`plan` (`_row_vectors`'s), where every buffer it would access 4 wide holds 32-bit
    elements (a row held 4 wide with guards loads 16-bit lanes one by one, past the row
    too); else None. On a target without `vector_views` only a proven multiple of 4."""
    if plan is None or (plan[1] is None and not c.s.vector_views):
        return None
    named = set().union(*plan[0])
    if any(b.dtype.itemsize != 4 for b in c.s.buffers if b.name in named):
        return None
    return plan


def _vector_loop(
    c: KernelContext,
    base: Expr,
    end: Expr,
    width: int,
    visit: Any,
    families: list[set[str]],
    proof: str,
) -> None:
    """The 4-wide loop of `row_elements` over r below `end` (a multiple of 4): two
    vectors per iteration, r and r + 4*width (both below end when r < end - 4*width),
    then one."""
    body = c.body
    step = LANES * width
    start = body.let(Binary("<<", Builtin("local_x"), u32(2), "u32"), "r")
    if isinstance(end, Const):
        last: Expr = u32(max(0, int(end.value) - step))
    else:
        over = Binary(">", end, u32(step), "bool")
        last = body.let(lw.select(over, ibin("-", end, u32(step)), u32(0)), "last")
    rest = body.var(start, "rest")
    with body.for_("r", start, last, u32(2 * step), unroll=False) as r:
        _row_vector(c, base, r, visit, families, proof)
        _row_vector(c, base, body.let(ibin("+", r, u32(step)), "r"), visit, families, proof)
        body.emit(Assign(rest, ibin("+", r, u32(2 * step))))
    with body.for_("r", rest, end, u32(step), unroll=False) as r:
        _row_vector(c, base, r, visit, families, proof)


def _row_vector(
    c: KernelContext,
    base: Expr,
    r: Expr,
    visit: Any,
    families: list[set[str]],
    proof: str,
    keep: bool = False,
    loaded_if: Expr | None = None,
) -> None:
    """`visit` row elements r .. r+3 (r a multiple of 4), their accesses made 4 wide. With
    `keep`, what the lanes compute stays known to later passes over the same elements
    (`Body.taken`: a row held in registers), else it is scoped to this vector. With
    `loaded_if`, the 4-wide loads run only under that condition (the lanes are 0
    otherwise): a held vector past the row moves no bytes."""
    body = c.body
    js = lanes_of(r)
    with body.taken() if keep else body.block() as lanes:
        flats = [offset(body, base, j) for j in js]
        for j in js:
            visit(j)
    stmts: list[Any] = lanes
    for offsets, dense in zip((flats, js), families, strict=True):
        done = vectorise(body, stmts, offsets, dense, c.s)
        if done is None:
            continue
        stmts, accesses = done
        for name, access in accesses:
            entry = (name, access, LANES, f"{proof}; offset a multiple of 16 bytes")
            if entry not in c.vectorized:
                c.vectorized.append(entry)
    for st in stmts:
        if loaded_if is not None and isinstance(st, VectorLoad):
            # the lanes are variables, 0 unless the load runs (in fresh names, in its block)
            fresh = tuple(body.fresh("ld", v.type) for v in st.vars)
            for v in st.vars:
                body.emit(VarDecl(v, lw.const(0, v.type)))
            then: list[Any] = [VectorLoad(fresh, st.array, st.index)]
            then += [Assign(v, f) for v, f in zip(st.vars, fresh, strict=True)]
            body.emit(If(loaded_if, then))
            continue
        body.emit(st)


def lanes_of(r: Expr) -> list[Expr]:
    """Row elements r, r + 1, r + 2, r + 3: one vector's lanes."""
    return [r] + [ibin("+", r, u32(k)) for k in range(1, LANES)]


def register_slots(
    c: KernelContext, base: Expr, length: Any, rows: tuple[Any, ...], width: int
) -> tuple[list[Expr], Any]:
    """The row elements a thread keeps in registers (a literal `length`, a multiple of
    `width`), and how a pass visits them: `over(visit)`.

    When the row can go 4 wide (`_row_vectors`, and a whole number of vectors per
    thread), thread t holds 4t .. 4t+3, 4t + 4*width .. and a pass's accesses to each
    vector are one 128-bit access (`_row_vector` with `keep`); else it holds
    t, t + width, ... one element at a time."""
    body = c.body
    vectors = register_vectors(c, base, length, rows, width)
    if vectors is None:
        lid = Builtin("local_x")
        slots = [body.let(ibin("+", lid, u32(k * width)), "j") for k in range(length // width)]

        def over(visit: Any) -> None:
            for j in slots:
                visit(j)

        return slots, over

    return [j for r, _ in vectors.each for j in lanes_of(r)], vectors.read_all


class RegisterVectors:
    """A row held in registers 4 wide: thread t's vector k starts at 4t + 4k*width, its
    accesses one 128-bit access each (`_row_vector` with `keep`, so what a pass computes
    from it stays for the later passes).

    For a literal row every vector is in it. Given a run-time length `n` (which the
    caller has tested: a multiple of 4, at least 4, at most `count * 4 * width`), a
    vector past the row is marked by its condition in `each` (r, inside): its loads do
    not run (`loaded_if`) and its lanes read from the row's last vector's position (in
    bounds), a fold leaves it out (`visit(j, inside)`), and the write skips it."""

    def __init__(
        self,
        c: KernelContext,
        base: Expr,
        width: int,
        count: int,
        plan: tuple[Any, str],
        n: Expr | None = None,
    ) -> None:
        body = c.body
        self.c, self.base = c, base
        self.families, self.proof = plan
        first = body.let(Binary("<<", Builtin("local_x"), u32(2), "u32"), "j")
        self.each: list[tuple[Expr, Expr | None]] = []
        last = None if n is None else body.let(ibin("-", n, u32(LANES)), "last")
        for k in range(count):
            r = body.let(ibin("+", first, u32(k * LANES * width)), "j")
            if n is None or last is None:
                self.each.append((r, None))
                continue
            inside = body.let(Binary("<", r, n, "bool"), "inside")
            self.each.append((body.let(lw.select(inside, r, last), "j"), inside))

    def read(self, r: Expr, inside: Expr | None, f: Any) -> None:
        """`f` on vector r's lanes, its loads run only `inside` the row."""
        _row_vector(self.c, self.base, r, f, self.families, self.proof, True, loaded_if=inside)

    def read_all(self, visit: Any) -> None:
        for r, inside in self.each:
            self.read(r, inside, visit)

    def fold_all(self, visit: Any) -> None:
        """`visit(j, inside)` on every lane (a fold leaves out the lanes past the row)."""
        for r, inside in self.each:
            self.read(r, inside, lambda j, inside=inside: visit(j, inside))

    def write(self, r: Expr, inside: Expr | None, f: Any) -> None:
        """`f` on vector r's lanes (a write), only for a vector `inside` the row."""
        if inside is None:
            self.read(r, None, f)
            return
        body = self.c.body
        with body.block() as guarded:
            self.read(r, None, f)
        body.emit(If(inside, guarded))

    def write_all(self, visit: Any) -> None:
        for r, inside in self.each:
            self.write(r, inside, visit)


def register_vectors(
    c: KernelContext, base: Expr | None, length: Any, rows: tuple[Any, ...], width: int
) -> RegisterVectors | None:
    """A literal row of a whole number of vectors per thread, held in registers 4 wide,
    where `row_elements` would go 4 wide without a run-time test; else None."""
    if not isinstance(length, int) or length % (LANES * width):
        return None
    plan = _row_vectors(c, base, length, rows)
    if plan is None or plan[1] is None:
        return None
    assert base is not None
    return RegisterVectors(c, base, width, length // (LANES * width), (plan[0], plan[1]))


def offset(body: Any, base: Expr, r: Expr) -> Expr:
    """`base + r` for an element of a row at offset `base`; for r = r0 + k (an unrolled
    `strided` loop's later elements), `(base + r0) + k`, with `base + r0` computed once."""
    first, k = (
        (r.a, r.b)
        if isinstance(r, Binary) and r.op == "+" and isinstance(r.b, Const)
        else (r, None)
    )
    at = body.memo(("offset", base, first), lambda: ibin("+", base, first), "i")
    return at if k is None else ibin("+", at, k)


# ---------------------------------------------------------------- reductions


def combiner(name: str, acc: DType) -> Any:
    op = {"sum": "add", "mean": "add", "max": "maximum", "min": "minimum"}[name]
    return lambda a, b: lw.lower_element(op, [a, b], acc, acc)


def identity(name: str, acc: DType) -> Expr:
    t = lw.REG[acc]
    if name in ("sum", "mean"):
        return lw.const(0, t)
    big = {"f32": lw.INF, "i32": lw.INT_MAX, "u32": lw.UINT_MAX}[t]
    small = {"f32": -lw.INF, "i32": lw.INT_MIN, "u32": 0}[t]
    return lw.const(small if name == "max" else big, t)


def split(red: Reduction) -> bool:
    """Whether a reduction is split over several workgroups (`partial`, then `reduce`):
    when it reduces to one element, unless its count is a literal one group handles."""
    single = sz.key(red.outputs) == "1"
    return single and not (isinstance(red.count, int) and red.count <= SPLIT_MIN)


def _fold(
    c: KernelContext,
    red: Reduction,
    o: Expr,
    start: Expr,
    end: Expr,
    step: Expr,
    source: Any,
    over: Any = None,
) -> Var:
    """`acc = combine(acc, source(r))` for r in start, start + step, ... below end, or for
    the elements `over(visit)` visits (a row by `row_elements`, a chunk 4 wide)."""
    body = c.body
    combine = combiner(red.name, red.acc)
    acc = body.var(identity(red.name, red.acc), "acc")
    kept_axes = Idx(red.kept_shape, flat=o).axes(body)
    assert isinstance(step, Const)

    def visit(r: Expr) -> None:
        body.emit(Assign(acc, combine(acc, source(r, kept_axes))))

    if over is None:
        strided(body, start, end, int(step.value), visit)
    else:
        over(visit)
    return acc


def _element(c: KernelContext, red: Reduction, o: Expr | None = None) -> Any:
    """The input element at reduced position r (with the output's kept indices).

    Given the output element `o` of a reduction over the last axis alone, its row's
    offset `o * count` is computed here, once, and element r is at that offset + r. In a
    reduction over every axis in order, element r is at r."""
    base = _row_base(c, red, o)
    everything = not red.kept and tuple(red.axes) == tuple(range(len(red.shape)))

    def read(r: Expr, kept_axes: list[Expr]) -> Expr:
        full: list[Expr] = [u32(0)] * len(red.shape)
        for k, a in zip(red.kept, kept_axes, strict=True):
            full[k] = a
        for k, a in zip(red.axes, Idx(red.reduced_shape, flat=r).axes(c.body), strict=True):
            full[k] = a
        flat = r if everything else None if base is None else offset(c.body, base, r)
        value = c.ev.at(red.x, Idx(red.shape, flat=flat, axes=full))
        return lw.convert(value, c.ev.dtype(red.x), red.acc)

    return read


def _kept_axes(c: KernelContext, red: Reduction) -> list[Expr]:
    """The kept axes' indices of a reduction to one element (all 0: a kept axis of size
    1, `x.sum(axis=1)` of a (1, N) tensor), for `_element`'s `read`."""
    return Idx(red.kept_shape, flat=u32(0)).axes(c.body)


def _row_base(c: KernelContext, red: Reduction, o: Expr | None) -> Expr | None:
    """The flat offset of output element `o`'s row, for a reduction over the last axis
    alone (else None); the same variable each time it is asked for in a block."""
    if o is None or tuple(red.axes) != (len(red.shape) - 1,):
        return None
    key = ("row", o, sz.key(red.count))
    return c.body.memo(key, lambda: ibin("*", o, size_ir(red.count)), "base")


def _tree_total(c: KernelContext, red: Reduction, acc: Var, width: int) -> Expr:
    return group_total(c.body, c.shared, acc, op_for(red.name), width, "$partial")


def write_total(
    c: KernelContext,
    red: Reduction,
    o: Expr,
    total: Expr,
    root: int | None = None,
    outputs: list[tuple[int, list[str]]] | None = None,
) -> None:
    """Output element `o` of the reduction from its `total` (a mean divided, converted to
    the output dtype), written through its epilogue: the plan's outputs, or `outputs` of
    the reduction `root`."""
    body = c.body
    value = row_value(red, body.let(total, "total"))
    root = c.plan.root if root is None else root
    assert root is not None
    c.write(Idx(c.ev.shape(root), flat=o), body.let(value, "total"), outputs, root)


def row_value(red: Reduction, total: Expr) -> Expr:
    """The reduction's value from the `total` of its elements in its accumulator type: a
    mean divided by the count, in the output dtype's register type and precision."""
    value = total
    if red.name == "mean":
        value = lw.bin_("/", value, lw.convert(size_ir(red.count), uint32, float32))
    if red.acc != reg_dtype(red.out):
        value = lw.convert(value, red.acc, red.out)
    return lw.round_to(value, red.out)


def partial(c: KernelContext) -> tuple[tuple[int, int, int], tuple[Any, Any, Any]]:
    """Each workgroup reduces CHUNK consecutive elements into `partials[group]` (with
    `Plan.reductions`, each reduction into its own; `_partial`); a `var`'s, its chunk's
    sum and squared deviations (`_moment_chunk`); an argmax's, its chunk's extremum and
    the first position holding it (`_Firsts`)."""
    assert c.plan.root is not None
    if root_kind(c.ev.kg, c.plan.root) == "reduce":
        red = c.ev.reduction(c.plan.root)
        if column_layout(red) is not None:
            return _columns(c, red)
    if root_kind(c.ev.kg, c.plan.root) == "argreduce":
        if column_layout(red := arg_reduction(c.ev, c.plan.root)) is not None:
            return _column_args(c, red)
    if root_kind(c.ev.kg, c.plan.root) == "moments":
        if column_layout(red := c.ev.reduction(c.plan.root)) is not None:
            return _column_moments(c, red)
        dispatch, _ = _moment_chunk(c, c.ev.reduction(c.plan.root), c.plan.writes[0])
    else:
        dispatch, _ = _partial(c, _members(c))
    return (SPLIT_WG, 1, 1), dispatch


@dataclass
class Member:
    """A whole reduction of a pass over the elements (`_partial`): the plan's own or one
    of `Plan.reductions`. `outputs` None: the plan's outputs. An argmax / argmin's
    `positions` hold its parts' first positions (`partials`, their extrema)."""

    root: int
    red: Reduction
    partials: str
    outputs: list[tuple[int, list[str]]] | None
    positions: str | None = None

    @property
    def folded(self) -> str:
        """What the pass folds: an argmax's extremum, the reduction itself otherwise."""
        return {"argmax": "max", "argmin": "min"}.get(self.red.name, self.red.name)


def _members(c: KernelContext) -> list[Member]:
    """The whole reductions the launch folds or combines: the plan's, then
    `Plan.reductions`, each with its partials' buffer (a `partial` plan's output)."""
    members = []
    for p in [c.plan, *c.plan.reductions]:
        partials = p.writes[0] if p.kind == "partial" else p.partials
        assert p.root is not None and partials is not None
        outputs = None if p is c.plan else p.outputs()
        arg = root_kind(c.ev.kg, p.root) == "argreduce"
        red = arg_reduction(c.ev, p.root) if arg else c.ev.reduction(p.root)
        members.append(Member(p.root, red, partials, outputs, p.positions))
    return members


class _Firsts:
    """The second fold of the argmax / argmin members of a pass (`_best_and_first`'s),
    after the first folded their extrema (`bests`, the same in every thread): the first
    position `position(m, r)` among the elements `element(m, r)` that hold the extremum
    (or a nan, when that is nan). `visit` each element; then `values` join a tree
    (`group_totals`), and `found` takes its totals: None for the other members."""

    def __init__(
        self,
        c: KernelContext,
        members: list[Member],
        bests: list[Expr],
        element: Any,
        position: Any,
    ) -> None:
        self.c, self.members, self.bests = c, members, bests
        self.element, self.position = element, position
        self.args = [k for k, m in enumerate(members) if m.positions is not None]
        self.accs = {k: c.body.var(lw.const(lw.UINT_MAX, "u32"), "first") for k in self.args}

    @classmethod
    def of_chunk(
        cls, c: KernelContext, members: list[Member], bests: list[Expr], reads: list[Any]
    ) -> _Firsts:
        """The positions in a whole pass's chunk: member k's element at flat offset r is
        `reads[k]`'s (`_element`), its position r itself."""

        def element(m: Member, r: Expr) -> Expr:
            return reads[members.index(m)](r, _kept_axes(c, m.red))

        return cls(c, members, bests, element, lambda m, r: r)

    def visit(self, r: Expr) -> None:
        body = self.c.body
        for k in self.args:
            m, acc = self.members[k], self.accs[k]
            v = body.let(self.element(m, r), "v")
            at = body.let(self.position(m, r), "at")
            held = _holds(v, self.bests[k], lw.REG[m.red.acc])
            body.emit(Assign(acc, lw.select(lw.bin_("&&", held, lw.bin_("<", at, acc)), at, acc)))

    def values(self) -> list[tuple[Expr, str, str]]:
        return [(self.accs[k], "min", f"$first{k}") for k in self.args]

    def found(self, totals: list[Expr]) -> list[Expr | None]:
        firsts: list[Expr | None] = [None] * len(self.members)
        for k, where in zip(self.args, totals, strict=True):
            firsts[k] = where
        return firsts

    def folded(self, over: Any, width: int = SPLIT_WG) -> list[Expr | None]:
        """The positions, in a pass of their own (`over(visit)`) and one tree."""
        if not self.args:
            return self.found([])
        over(self.visit)
        return self.found(group_totals(self.c.body, self.c.shared, self.values(), width))


def _hand(c: KernelContext, array: str, index: Expr, value: Expr) -> None:
    """`array[index] = value` for the last workgroup of a one-launch reduction (or for a
    later launch): a `Publish` where the buffer is tagged (a target without a fence,
    `Schedule.tagged`), else a store (a fence releases it before the ticket)."""
    tagged = array in c.s.tagged
    c.body.emit(Publish(array, index, value) if tagged else Store(array, index, value))


def _handed(c: KernelContext, array: str, index: Expr, t: str) -> Expr:
    """Element `index` (storage type `t`) of what `_hand` stored: awaited where tagged."""
    if array not in c.s.tagged:
        return Load(array, index, t)
    value = c.body.fresh("handed", t)
    c.body.emit(Await(value, array, index))
    return value


def _fence(c: KernelContext) -> None:
    """A device-scope fence of a one-launch reduction's handoff; none where the handed-off
    values are tagged (`_hand`): their tags say they have arrived."""
    if not c.s.tagged:
        c.body.emit(Fence())


def _part(c: KernelContext, m: Member, r: Expr) -> Expr:
    """Member `m`'s part `r` (a chunk's partial), loaded once."""
    loaded = _handed(c, m.partials, r, lw.STORAGE[m.red.acc])
    return c.body.let(lw.from_storage(loaded, m.red.acc), "partial")


def _position(c: KernelContext, m: Member, r: Expr) -> Expr:
    """An argmax member's part `r`'s first position."""
    assert m.positions is not None
    return _handed(c, m.positions, r, "u32")


def _store_part(c: KernelContext, m: Member, g: Expr, total: Expr, first: Expr | None) -> None:
    """A member's part `g`: its total (an argmax's extremum) and an argmax's position."""
    _hand(c, m.partials, g, lw.to_storage(total, m.red.acc))
    if first is not None:
        assert m.positions is not None
        _hand(c, m.positions, g, first)


def _finish_member(c: KernelContext, m: Member, o: Expr, total: Expr, first: Expr | None) -> None:
    """Member `m`'s output element `o` (`write_total`; an argmax's first position, an int32)."""
    if first is None:
        write_total(c, m.red, o, total, m.root, m.outputs)
        return
    index = c.body.let(Cast(first, "i32"), "index")
    c.write(Idx(c.ev.shape(m.root), flat=o), index, m.outputs, m.root)


def _chunk(c: KernelContext, red: Reduction) -> tuple[Any, Expr, Expr, Expr]:
    """A split reduction's workgroups, one per CHUNK elements: the dispatch, the group id
    g, and the first and the end of g's elements (the last chunk may be shorter)."""
    body = c.body
    dispatch, g = c.groups(sz.cdiv(red.count, CHUNK))
    start = body.let(ibin("*", g, u32(CHUNK)), "start")
    stop = body.let(ibin("+", start, u32(CHUNK)), "stop")
    count = size_ir(red.count)
    return (
        dispatch,
        g,
        start,
        body.let(lw.select(Binary("<", stop, count, "bool"), stop, count), "end"),
    )


def _partial(c: KernelContext, members: list[Member]) -> tuple[Any, Expr]:
    """The `partial` launch's work: this workgroup's chunk folded into each member's
    `partials[group]` (stored by thread 0), and `Plan.elements` stored at each element
    the chunk holds. The dispatch and the group id."""
    body = c.body
    red = members[0].red  # every member reduces a tensor of the same shape
    dispatch, g, start, end = _chunk(c, red)
    lid = Builtin("local_x")
    reads = [_element(c, m.red) for m in members]
    plan = _row_vectors(c, start, red.count, ())

    def chunk(visit: Any) -> None:
        """The chunk as a row at `start`: 4 wide where the count is a multiple of 4 (then
        so is the chunk's length, `end - start`, start being a multiple of CHUNK)."""
        assert plan is not None

        def vectors(families: list[set[str]], proof: str) -> None:
            # a whole chunk (every workgroup's but the last) loop-free, 8 vectors a thread
            span = body.let(ibin("-", end, start), "span")
            at = lambda j: visit(offset(body, start, j))  # noqa: E731
            first = body.let(Binary("<<", lid, u32(2), "u32"), "r")
            with body.block() as whole:
                for k in range(CHUNK // (LANES * SPLIT_WG)):
                    r = body.let(ibin("+", first, u32(k * LANES * SPLIT_WG)), "r")
                    _row_vector(c, start, r, at, families, proof)
            with body.block() as part:
                _vector_loop(c, start, span, SPLIT_WG, at, families, proof)
            body.emit(If(Binary("==", span, u32(CHUNK), "bool"), whole, part))

        def scalars() -> None:
            strided(body, ibin("+", start, lid), end, SPLIT_WG, visit)

        _four_wide(c, plan, red.count, vectors, scalars)

    accs = [body.var(identity(m.folded, m.red.acc), "acc") for m in members]

    def visit(r: Expr) -> None:
        if c.plan.elements:
            c.write(Idx(red.shape, flat=r), outputs=c.plan.elements)
        for acc, m, read in zip(accs, members, reads, strict=True):
            value = read(r, _kept_axes(c, m.red))
            body.emit(Assign(acc, combiner(m.folded, m.red.acc)(acc, value)))

    if plan is not None:
        chunk(visit)
    else:
        strided(body, ibin("+", start, lid), end, SPLIT_WG, visit)
    names = ["$partial" if k == 0 else f"$partial{k}" for k in range(len(members))]
    values = [(acc, op_for(m.folded), n) for acc, m, n in zip(accs, members, names, strict=True)]
    totals = group_totals(body, c.shared, values, SPLIT_WG)
    # an argmax's first position: a second read of the chunk (from the cache)
    firsts = _Firsts.of_chunk(c, members, totals, reads).folded(
        lambda visit: strided(body, ibin("+", start, lid), end, SPLIT_WG, visit)
    )
    with body.if_(Binary("==", lid, u32(0), "bool")):
        for m, total, first in zip(members, totals, firsts, strict=True):
            _store_part(c, m, g, total, first)
    return dispatch, g


def _combine_partials(
    c: KernelContext,
    members: list[Member],
    o: Expr,
    shared: str,
    count: Expr | None = None,
    width: int = SPLIT_WG,
) -> None:
    """Fold each member's `count` partials (thread t of `width`: t, t + width, ...; by
    default the `partial` launch's chunks over `SPLIT_WG`), the tree, and thread 0 writes
    each result (`write_total`, to the member's outputs): the `reduce` launch after `partial`,
    and the last workgroup of a one-launch reduction, the same order and tree in both."""
    lid = Builtin("local_x")
    body = c.body
    red = members[0].red
    count = size_ir(sz.cdiv(red.count, CHUNK)) if count is None else count
    accs = [body.var(identity(m.folded, m.red.acc), "acc") for m in members]
    part = lambda m, r: _part(c, m, r)  # noqa: E731

    def visit(r: Expr) -> None:
        for acc, m in zip(accs, members, strict=True):
            body.emit(Assign(acc, combiner(m.folded, m.red.acc)(acc, part(m, r))))

    over = lambda visit: strided(body, lid, count, width, visit)  # noqa: E731
    over(visit)
    names = [shared if k == 0 else f"{shared}{k}" for k in range(len(members))]
    values = [(acc, op_for(m.folded), n) for acc, m, n in zip(accs, members, names, strict=True)]
    totals = group_totals(body, c.shared, values, width)
    # an argmax's: the first position among the parts that hold the extremum
    position = lambda m, r: _position(c, m, r)  # noqa: E731
    firsts = _Firsts(c, members, totals, part, position).folded(over, width)
    with body.if_(Binary("==", lid, u32(0), "bool")):
        for m, total, first in zip(members, totals, firsts, strict=True):
            _finish_member(c, m, o, total, first)


def _last_workgroup(c: KernelContext, groups: Expr, slot: Expr | None = None) -> None:
    """The handoff of a one-launch reduction: thread 0 fences (release; what the other
    threads stored is ordered before it by the caller's barrier) and adds 1 to the
    counter, reading the old value; the workgroup that reads `groups - 1` is the last:
    every other partial is stored and, after an acquire fence (in thread 0, and in every
    thread after the barrier), visible to it. Where the partials are tagged (`_hand`) no
    fence: the last workgroup knows every other has published its partial, and
    `Await`s each until its tags show it has arrived. The old value goes to every thread
    through threadgroup memory and a barrier (a `broadcast` array: WGSL's uniform load),
    and every other workgroup returns (uniformly). With `slot`, the counter is element
    `slot` of the buffer, shared by `groups` workgroups (a column tile's slabs,
    `_columns`)."""
    body, counter = c.body, c.plan.counter
    assert counter is not None
    lid = Builtin("local_x")
    last = body.let(ibin("-", groups, u32(1)), "last")
    c.shared.append(SharedArray("$ticket", "u32", 1, broadcast=True))
    with body.if_(Binary("==", lid, u32(0), "bool")):
        _fence(c)
        old = body.fresh("old", "u32")
        body.emit(AtomicAdd(counter, slot or u32(0), u32(1), old))
        if not c.s.tagged:
            with body.if_(Binary("==", old, last, "bool")):
                body.emit(Fence())  # acquire, in the thread that read the counter
        body.emit(Store("$ticket", u32(0), old))
    body.emit(Barrier(device=True))  # thread 0's acquire on to the others (MSL `mem_device`)
    ticket = body.let(Load("$ticket", u32(0), "u32"), "ticket")
    with body.if_(Binary("!=", ticket, last, "bool")):
        body.emit(Return())
    _fence(c)  # and in every thread of the last workgroup, after the barrier


def _reset_counter(
    c: KernelContext,
    groups: Expr,
    slot: Expr | None = None,
    width: int = SPLIT_WG,
    retract: Any = None,
) -> None:
    """The last workgroup's thread 0 subtracts `groups` from the counter (element `slot`):
    zero again for the next launch on the same buffers. Where the partials are tagged
    (`_hand`), after a barrier (every `Await` done) the workgroup's `width` threads
    `Retract` every element of them, or, with `retract`, that emits the retractions (a
    column tile's, of its own partials)."""
    assert c.plan.counter is not None
    body, lid = c.body, Builtin("local_x")
    with body.if_(Binary("==", lid, u32(0), "bool")):
        body.emit(AtomicAdd(c.plan.counter, slot or u32(0), ibin("-", u32(0), groups)))
    plans = [c.plan, *c.plan.reductions]
    handed = dict.fromkeys(b for p in plans for b in (p.partials, p.positions) if b)
    tagged = [b for b in handed if b in c.s.tagged]
    if not tagged:
        return
    body.emit(Barrier())
    if retract is not None:
        retract()
        return
    for b in tagged:
        strided(body, lid, size_ir(c.s.tagged[b]), width, lambda r, b=b: body.emit(Retract(b, r)))


def _last_block(
    c: KernelContext, red: Reduction
) -> tuple[tuple[int, int, int], tuple[Any, Any, Any]]:
    """`partial` and `reduce` in one launch (a backend with a handoff, `_last_workgroup`).

    Each workgroup stores its partial as `partial` does (thread 0, after the tree's
    barriers); then `_last_workgroup` finds the last to finish with the counter, a zeroed
    `u32` scratch buffer. The last combines the partials as `reduce` does (so the result
    is bit-identical to the two launches), writes the output, and zeroes the counter
    again (`_reset_counter`)."""
    assert c.plan.partials is not None and c.plan.counter is not None
    members = _members(c)
    dispatch, _ = _partial(c, members)
    groups = size_ir(sz.cdiv(red.count, CHUNK))
    _last_workgroup(c, groups)
    _combine_partials(c, members, u32(0), "$combine")
    _reset_counter(c, groups)
    return (SPLIT_WG, 1, 1), dispatch


def whole_of_rows(c: KernelContext, width: int) -> None:
    """The end of a `row` launch with a whole reduction of a value it computes per row
    (`Plan.total`: the mean of a cross-entropy's per-row losses).

    Each workgroup has stored its rows' share in `partials[group]`: the one row's value
    (stored by thread 0), or, with a thread per row, the workgroup's total of its rows'
    values (combined here). Every thread fences its stores (unless tagged) before a
    barrier, and then `_last_block`'s handoff: the last workgroup combines the partials
    (a strided fold, then the tree), writes the reduction's outputs (through its
    epilogue) and zeroes the counter again."""
    assert c.plan.total is not None and c.plan.partials is not None
    body, root = c.body, c.plan.total
    red = c.ev.reduction(root)
    groups = size_ir(row_launch_groups(c.ev, c.plan.roots))
    if c.row_share is not None:  # a thread per row: this workgroup's rows together
        group, share = c.row_share
        total = group_total(body, c.shared, share, op_for(red.name), width, "$share")
        with body.if_(Binary("==", Builtin("local_x"), u32(0), "bool")):
            _hand(c, c.plan.partials, group, lw.to_storage(total, red.acc))
    _fence(c)  # release this thread's stores (on to thread 0's fence: a device barrier)
    body.emit(Barrier(device=True))
    _last_workgroup(c, groups)
    member = Member(root, red, c.plan.partials, c.plan.total_outputs)
    _combine_partials(c, [member], u32(0), "$combine", groups, width)
    _reset_counter(c, groups, width=width)


# ---------------------------------------------------------------- columns

COLUMNS = 32  # columns of a column workgroup: a warp reads 32 consecutive elements of a row
COLUMN_LANES = 4  # ... and its threads per column, each folding every 4th row: 128
# threads, the size of the row and split launches, so they can run side by side
# (`side_by_side`); a thread folds 64 rows of a slab, 4 loads in flight (`strided`)
SLAB = 256  # rows a column workgroup folds (64 a thread) before it stores its partial


def column_layout(red: Reduction) -> tuple[Any, Any, Any] | None:
    """(outer, count, inner) of a reduction over a run of consecutive axes before the
    last, with more than one element after them and more than `SERIAL_REDUCE_MAX` in the
    run (`x.sum(axis=0)` of an (N, M) tensor: 1, N, M): element r of output element
    (a, col) is at (a * count + r) * inner + col, so consecutive columns are consecutive
    in memory (`_columns`). None for any other reduction."""
    axes, rank = list(red.axes), len(red.shape)
    if not axes or axes != list(range(axes[0], axes[-1] + 1)) or axes[-1] == rank - 1:
        return None
    inner = sz.product(list(red.shape[axes[-1] + 1 :]))
    if (isinstance(inner, int) and inner == 1) or (
        isinstance(red.count, int) and red.count <= SERIAL_REDUCE_MAX
    ):
        return None
    return sz.product(list(red.shape[: axes[0]])), red.count, inner


def column_slabs(red: Reduction, dims: Any) -> bool:
    """Whether a column reduction (`column_layout`) may have more rows than a `SLAB`:
    then its workgroups store partials, which the last workgroup of each column tile (or
    a second launch) combines."""
    high = sz.upper_bound(red.count, dims)
    return high is None or high > SLAB


def slab_count(red: Reduction, dims: Any) -> Any:
    """A column reduction's slabs a column tile: one per `SLAB` rows, and one (with no
    rows, folding to the identity) where there may be none, so some workgroup of each
    tile writes its output."""
    if (sz.lower_bound(red.count, dims) or 0) >= 1:
        return sz.cdiv(red.count, SLAB)
    return sz.cdiv(sz.add(red.count, 1), SLAB)


@dataclass
class _Tile:
    """Where a thread of a column workgroup (`_columns`) is: its column `col` of the
    tile, lane, slab and outer index `a`, its output element `o` = a * inner + col, and
    the rows [first, end) of its slab."""

    c: KernelContext
    red: Reduction
    dispatch: Any
    slabbed: bool  # the rows are split in slabs whose partials are combined
    combine_only: bool  # a `reduce` launch after a `partial` one: partials, no rows
    slabs: Any
    tiles: Any
    slab: Expr
    a: Expr
    tile: Expr
    column: Expr
    lane: Expr
    col: Expr
    o: Expr
    inside: Expr  # col is a column of the tensor (the last tile may be partly past it)
    mine: Expr  # lane 0 of a column inside: the thread that stores the column's results

    def at_partial(self, k: Expr) -> Expr:
        """Slab k's partial of this column: at (a * slabs + k) * inner + col."""
        _, _, inner = column_layout(self.red) or ()
        slabs, inner = size_ir(self.slabs), size_ir(inner)
        return ibin("+", ibin("*", ibin("+", ibin("*", self.a, slabs), k), inner), self.col)

    def rows(self) -> tuple[Expr, Expr]:
        """The first and the end of this slab's rows (all of them without slabs)."""
        body = self.c.body
        count = size_ir(self.red.count)
        if not self.slabbed:
            return u32(0), count
        first = body.let(ibin("*", self.slab, u32(SLAB)), "first")
        stop = body.let(ibin("+", first, u32(SLAB)), "stop")
        return first, body.let(lw.select(Binary("<", stop, count, "bool"), stop, count), "end")

    def lanes(self, members: list[tuple[str, DType, str]], fold: Any) -> list[Expr]:
        """Each thread's folds of `members` ((reduction name, accumulator dtype,
        threadgroup array); inside the tile's columns: `fold(add)` calls `add` with each
        member's value at an element), then in every thread its column's: the 4 lanes'
        values combined in order (after one barrier; never written again)."""
        body, lid = self.c.body, Builtin("local_x")
        for _, acc, name in members:
            if not any(s.name == name for s in self.c.shared):
                self.c.shared.append(SharedArray(name, lw.REG[acc], COLUMNS * COLUMN_LANES))
        accs = [body.var(identity(op, acc), "acc") for op, acc, _ in members]

        def add(values: list[Expr]) -> None:
            for v, (op, acc, _), value in zip(accs, members, values, strict=True):
                body.emit(Assign(v, combiner(op, acc)(v, value)))

        with body.if_(self.inside):
            fold(add)
        for v, (_, _, name) in zip(accs, members, strict=True):
            body.emit(Store(name, lid, v))
        body.emit(Barrier())
        totals = []
        for op, acc, name in members:
            t = lw.REG[acc]
            total = body.var(Load(name, self.column, t), "total")
            for k in range(1, COLUMN_LANES):
                value = body.let(Load(name, ibin("+", self.column, u32(k * COLUMNS)), t), "lane")
                body.emit(Assign(total, combiner(op, acc)(total, value)))
            totals.append(total)
        return totals

    def handoff(self, combined: Any, partials: Any) -> None:
        """After the slab's partials are stored: the last slab of the tile to finish
        (its counter, element a * tiles + tile) runs `combined()`; where they are tagged,
        then retracts them: `partials(at)` is the (buffer, index) of each at slab
        partial `at` (`at_partial`) of a column."""
        body = self.c.body
        _fence(self.c)  # release this thread's stores (on to thread 0's: a device barrier)
        body.emit(Barrier(device=True))
        slot = body.let(ibin("+", ibin("*", self.a, size_ir(self.tiles)), self.tile), "slot")
        _last_workgroup(self.c, size_ir(self.slabs), slot)
        combined()

        def retract() -> None:
            """The tile's partials, each by the thread that folded it (`combined`)."""

            def visit(k: Expr) -> None:
                at = body.let(self.at_partial(k), "at")
                for array, index in partials(at):
                    body.emit(Retract(array, index))

            with body.if_(self.inside):
                strided(body, self.lane, size_ir(self.slabs), COLUMN_LANES, visit)

        _reset_counter(self.c, size_ir(self.slabs), slot, retract=retract)


def _column_tile(c: KernelContext, red: Reduction) -> _Tile:
    """The workgroups of a column launch (`_columns`) and where each thread is."""
    body = c.body
    layout = column_layout(red)
    assert layout is not None
    outer, _, inner = layout
    lid = Builtin("local_x")
    slabbed = c.plan.partials is not None or c.plan.kind == "partial"
    slabs = slab_count(red, c.dims) if slabbed else 1
    tiles = sz.cdiv(inner, COLUMNS)
    combine_only = c.plan.kind != "partial" and c.plan.partials is not None and not c.plan.counter
    per_tile = 1 if combine_only else slabs
    dispatch, g = c.groups(sz.product([outer, tiles, per_tile]))
    if isinstance(per_tile, int) and per_tile == 1:
        slab, rest = u32(0), g
    else:
        slab = body.let(ibin("%", g, size_ir(per_tile)), "slab")
        rest = body.let(ibin("/", g, size_ir(per_tile)), "tile")
    tile = body.let(ibin("%", rest, size_ir(tiles)), "tile")
    a = body.let(ibin("/", rest, size_ir(tiles)), "outer")
    column = body.let(ibin("%", lid, u32(COLUMNS)), "column")
    lane = body.let(ibin("/", lid, u32(COLUMNS)), "lane")
    col = body.let(ibin("+", ibin("*", tile, u32(COLUMNS)), column), "col")
    o = body.let(ibin("+", ibin("*", a, size_ir(inner)), col), "o")
    inside = Binary("<", col, size_ir(inner), "bool")
    mine = Binary("&&", Binary("==", lane, u32(0), "bool"), inside, "bool")
    return _Tile(c, red, dispatch, slabbed, combine_only, slabs, tiles, slab, a, tile,
                 column, lane, col, o, inside, mine)  # fmt: skip


def _column_reads(c: KernelContext, tile: _Tile, reds: list[Reduction]) -> Any:
    """`fold(add)` over this thread's rows of its slab: `add` with each reduction's
    input element there."""
    red = tile.red
    outer_axes = Idx(tuple(red.shape[: red.axes[0]]), flat=tile.a).axes(c.body)
    inner_axes = Idx(tuple(red.shape[red.axes[-1] + 1 :]), flat=tile.col).axes(c.body)
    reads = [_element(c, r, tile.o) for r in reds]
    first, end = tile.rows()

    def fold(add: Any, step: Any = None) -> None:
        """`step(values, r)`, if given, makes what `add` gets of the values at row r."""

        def visit(r: Expr) -> None:
            values = [read(r, [*outer_axes, *inner_axes]) for read in reads]
            add(values if step is None else step(values, r))

        strided(c.body, ibin("+", first, tile.lane), end, COLUMN_LANES, visit)

    return fold


def _columns(c: KernelContext, red: Reduction) -> tuple[tuple[int, int, int], Any]:
    """A reduction over leading axes (`column_layout`), and the others of the same layout
    folded in the same pass (`Plan.reductions`: `x.mean(axis=0), x.max(axis=0)`): a
    workgroup per tile of `COLUMNS` columns (and per slab of `SLAB` rows, when there may
    be more), its threads 4 per column. Thread (lane, col) folds rows lane, lane + 4, ...
    of its column, so a warp reads 32 consecutive elements of a row (the strided
    `reduce` read one element per row and thread, a row apart); the 4 lanes combine in
    threadgroup memory, in order.

    One slab: lane 0 writes the outputs. Several: lane 0 stores the slab's partials; in
    a `partial` launch that is all, and a `reduce` launch after it, a workgroup per tile,
    combines the slabs' partials the same way (4 lanes, every 4th slab); in one launch
    (`Plan.counter`, a counter per tile), the last slab of each tile to finish does."""
    body = c.body
    members = []
    for p in [c.plan, *c.plan.reductions]:
        partials = p.writes[0] if p.kind == "partial" else p.partials
        outputs = None if p is c.plan else p.outputs()
        assert p.root is not None
        members.append(Member(p.root, c.ev.reduction(p.root), partials or "", outputs))
    tile = _column_tile(c, red)
    names = ["$columns" if k == 0 else f"$columns{k}" for k in range(len(members))]
    folds = [(m.red.name, m.red.acc, name) for m, name in zip(members, names, strict=True)]

    def finish(totals: list[Expr]) -> None:
        with body.if_(tile.mine):
            for m, total in zip(members, totals, strict=True):
                write_total(c, m.red, tile.o, total, m.root, m.outputs)

    def combined() -> None:
        """Every slab's partials of the tile's columns, folded; lane 0 writes the results."""

        def fold(add: Any) -> None:
            def visit(k: Expr) -> None:
                at = body.let(tile.at_partial(k), "at")
                loads = [_handed(c, m.partials, at, lw.STORAGE[m.red.acc]) for m in members]
                add([
                    body.let(lw.from_storage(v, m.red.acc), "partial")
                    for v, m in zip(loads, members, strict=True)
                ])  # fmt: skip

            strided(body, tile.lane, size_ir(tile.slabs), COLUMN_LANES, visit)

        finish(tile.lanes(folds, fold))

    if tile.combine_only:
        combined()
        return (COLUMNS * COLUMN_LANES, 1, 1), tile.dispatch
    totals = tile.lanes(folds, _column_reads(c, tile, [m.red for m in members]))
    if not tile.slabbed:
        finish(totals)
        return (COLUMNS * COLUMN_LANES, 1, 1), tile.dispatch
    with body.if_(tile.mine):
        at = body.let(tile.at_partial(tile.slab), "at")
        for m, total in zip(members, totals, strict=True):
            _hand(c, m.partials, at, lw.to_storage(total, m.red.acc))
    if c.plan.kind != "partial":
        tile.handoff(combined, lambda at: [(m.partials, at) for m in members])
    return (COLUMNS * COLUMN_LANES, 1, 1), tile.dispatch


def _column_moments(c: KernelContext, red: Reduction) -> tuple[tuple[int, int, int], Any]:
    """`var` / `std` over leading axes, in the column layout of `_columns`: each column's
    sum over the thread's rows, combined over the 4 lanes (every thread gets its
    column's), the mean, then the squared deviations from it the same way (the rows read
    again, from the cache). With slabs, each stores its sum s and squares q (at
    `at_partial` in the first and the second half of the partials), and the combine
    folds sum(s) for the mean m of the column, then sum(q + n (s / n - m)^2) over the
    slabs of n rows (Chan's parallel variance, as `_combine_moments`).

    Reductions of the same layout (`Plan.reductions`: the mean beside the variance of a
    batch norm) are folded in the first pass, as `_columns` folds them."""
    assert c.plan.root is not None
    body = c.body
    tile = _column_tile(c, red)
    ddof = _ddof(c.ev, c.plan.root)
    size = size_ir(_column_size(red, tile))
    count = size_ir(red.count)
    partials = c.plan.writes[0] if c.plan.kind == "partial" else c.plan.partials
    members = []
    for p in c.plan.reductions:
        buffer = p.writes[0] if p.kind == "partial" else p.partials
        assert p.root is not None
        members.append(Member(p.root, c.ev.reduction(p.root), buffer or "", p.outputs()))
    names = [f"$columns{k}" for k in range(len(members))]
    folds = [(m.red.name, m.red.acc, name) for m, name in zip(members, names, strict=True)]

    def finish(squares: Expr, totals: list[Expr]) -> None:
        value = _spread(body, red, squares, ddof)
        with body.if_(tile.mine):
            write_total(c, red, tile.o, value)
            for m, total in zip(members, totals, strict=True):
                write_total(c, m.red, tile.o, total, m.root, m.outputs)

    def totals(fold: Any, name: str, more: list[Any] = []) -> list[Expr]:  # noqa: B006
        return tile.lanes([("sum", float32, name), *more], fold)

    def combined() -> None:
        assert partials is not None

        def sums(add: Any) -> None:
            def visit(k: Expr) -> None:
                at = body.let(tile.at_partial(k), "at")
                loads = [_handed(c, partials, at, "f32")]
                for m in members:
                    loaded = _handed(c, m.partials, at, lw.STORAGE[m.red.acc])
                    loads.append(body.let(lw.from_storage(loaded, m.red.acc), "partial"))
                add(loads)

            strided(body, tile.lane, size_ir(tile.slabs), COLUMN_LANES, visit)

        first, *more = totals(sums, "$sum", folds)
        whole = lw.convert(count, uint32, float32)
        mean = body.let(lw.bin_("/", first, whole), "mean")

        def squares(add: Any) -> None:
            def visit(k: Expr) -> None:
                at = body.let(tile.at_partial(k), "at")
                s = _handed(c, partials, at, "f32")
                q = _handed(c, partials, ibin("+", size, at), "f32")
                term, rows = _part_squares(body, count, k, SLAB, s, q, mean)
                # a slab of no rows (a count that may be 0 has one more) adds nothing
                add([lw.select(Binary(">", rows, u32(0), "bool"), term, lw.const(0, "f32"))])

            strided(body, tile.lane, size_ir(tile.slabs), COLUMN_LANES, visit)

        (q,) = totals(squares, "$squares")
        finish(q, more)

    if tile.combine_only:
        combined()
        return (COLUMNS * COLUMN_LANES, 1, 1), tile.dispatch
    s, *more = totals(_column_reads(c, tile, [red, *(m.red for m in members)]), "$sum", folds)
    first, end = tile.rows()
    n = lw.convert(ibin("-", end, first), uint32, float32)
    mean = body.let(lw.bin_("/", s, n), "mean")

    def deviation(values: list[Expr], _: Expr) -> list[Expr]:
        d = body.let(lw.bin_("-", values[0], mean), "d")
        return [lw.bin_("*", d, d)]

    fold = _column_reads(c, tile, [red])
    (q,) = totals(lambda add: fold(add, deviation), "$squares")
    if not tile.slabbed:
        finish(q, more)
        return (COLUMNS * COLUMN_LANES, 1, 1), tile.dispatch
    assert partials is not None
    with body.if_(tile.mine):
        at = body.let(tile.at_partial(tile.slab), "at")
        _hand(c, partials, at, lw.to_storage(s, float32))
        _hand(c, partials, ibin("+", size, at), lw.to_storage(q, float32))
        for m, total in zip(members, more, strict=True):
            _hand(c, m.partials, at, lw.to_storage(total, m.red.acc))
    if c.plan.kind != "partial":
        tile.handoff(
            combined,
            lambda at: [
                (partials, at),
                (partials, ibin("+", size, at)),
                *((m.partials, at) for m in members),
            ],
        )
    return (COLUMNS * COLUMN_LANES, 1, 1), tile.dispatch


def _column_size(red: Reduction, tile: _Tile) -> Any:
    """Elements in one half of a column `var`'s partials: outer * slabs * inner."""
    outer, _, inner = column_layout(red) or ()
    return sz.product([outer, tile.slabs, inner])


def reduce(c: KernelContext) -> tuple[tuple[int, int, int], tuple[Any, Any, Any]]:
    assert c.plan.root is not None
    red = c.ev.reduction(c.plan.root)
    body = c.body
    lid = Builtin("local_x")
    if column_layout(red) is not None:
        return _columns(c, red)
    if c.plan.counter is not None:
        return _last_block(c, red)
    if c.plan.partials is not None:
        # Combine the partial results of the `partial` launch.
        dispatch, o = c.groups(1)
        _combine_partials(c, _members(c), o, "$partial")
        return (SPLIT_WG, 1, 1), dispatch
    count, outputs = red.count, red.outputs
    if isinstance(count, int) and count <= SERIAL_REDUCE_MAX:
        # Few elements per output: one thread per output element, no threadgroup memory.
        dispatch, g = c.groups(sz.cdiv(outputs, WG), guard=False)
        o = body.let(ibin("+", ibin("*", g, u32(WG)), lid), "o")
        with body.if_(Binary("<", o, size_ir(outputs), "bool")):
            acc = _fold(c, red, o, u32(0), size_ir(count), u32(1), _element(c, red))
            write_total(c, red, o, acc)
        return (WG, 1, 1), dispatch
    width = row_width(count)
    dispatch, o = c.groups(outputs)
    read = _element(c, red, o)
    base = _row_base(c, red, o)
    rows = tuple(red.shape[:-1])

    def over(visit: Any) -> None:
        row_elements(c, base, count, rows, width, visit, held=True)

    walk = over if base is not None else None
    acc = _fold(c, red, o, lid, size_ir(count), u32(width), read, walk)
    total = _tree_total(c, red, acc, width)
    with body.if_(Binary("==", lid, u32(0), "bool")):
        write_total(c, red, o, total)
    return (width, 1, 1), dispatch


# ---------------------------------------------------------------- rows


def row(c: KernelContext) -> tuple[tuple[int, int, int], tuple[Any, Any, Any]]:
    """A `row` launch (`_row`), and the whole reduction that may finish it
    (`whole_of_rows`)."""
    threads, dispatch = _row(c)
    if c.plan.total is not None:
        whole_of_rows(c, threads[0])
    return threads, dispatch


def row_launch_groups(ev: Any, roots: list[int]) -> Any:
    """The workgroups of a `row` launch over the rows `roots` reduce: one a row, or one
    per `WG` rows of at most `SERIAL_REDUCE_MAX` elements (`_short_rows`)."""
    shape = row_shape(ev, roots[0])
    rows = sz.product(list(shape[:-1]))
    short = isinstance(shape[-1], int) and shape[-1] <= SERIAL_REDUCE_MAX
    return sz.cdiv(rows, WG) if short else rows


def _row(c: KernelContext) -> tuple[tuple[int, int, int], tuple[Any, Any, Any]]:
    """One workgroup per row: the plan's last-axis reductions in order, then the row's
    outputs (`schedule.RowGroup`): those of the row's shape, and by thread 0 those with one
    element per row.

    Each reduction is a strided fold and a tree; its total, the same in every thread,
    stands for the reduction's value wherever the row reads it (`Evaluator.row_values`).
    When the row length is a literal multiple of the workgroup width, at most
    `ROW_REGISTERS` per thread, the strided loops are unrolled at the top level of the
    kernel: each element (and each value computed from it, `x - mean`) is loaded or
    computed once and stays in a register for the later passes and the write. Another
    literal multiple of 4 up to `HELD` vectors per thread is held in registers 4 wide
    (`RegisterVectors` given the length), on every backend. A symbolic length on a
    target with `vector_views` is tested at run time: a multiple of 4 up to `HELD`
    vectors per thread is held the same way, any other goes through the loops of
    `row_elements`. Literal rows of at most `SERIAL_REDUCE_MAX` are a thread each
    (`_short_rows`).
    """
    ev, body = c.ev, c.body
    shape = row_shape(ev, c.plan.roots[0])
    other, length = tuple(shape[:-1]), shape[-1]
    # outputs over the rows of another length (`Plan.wide`): a symbolic one is written
    # by the row's workgroup, strided, not by one thread in a loop as long as the row
    wide = [ev.shape(n)[-1] for n in c.plan.wide]
    short = all(isinstance(w, int) for w in wide)
    if short and isinstance(length, int) and length <= SERIAL_REDUCE_MAX:
        return _short_rows(c, shape)  # (rows of several short lengths too: `_row_groups`)
    width = max([row_width(length), *(row_width(w) for w in wide)])
    dispatch, rowid = c.groups(sz.product(list(other)))
    other_axes = Idx(other, flat=rowid).axes(body)
    base = body.let(ibin("*", rowid, size_ir(length)), "base")

    unrolled = isinstance(length, int) and length % width == 0 and length // width <= ROW_REGISTERS
    if unrolled:
        c.proofs.append((f"j < {length}", f"{length} is a multiple of {width}"))
        _, over_slots = register_slots(c, base, length, other, width)
        _row_passes(c, shape, other_axes, base, width, over_slots, over_slots)
        return (width, 1, 1), dispatch

    def over_row(visit: Any) -> None:
        row_elements(c, base, length, other, width, visit)

    plan = _row_vectors(c, base, length, other)
    if isinstance(length, int):
        words = _words(c, plan)
        proof = None if words is None else words[1]
        if proof is not None and LANES * width <= length <= HELD * LANES * width:
            # A literal multiple of 4 that the workgroup does not divide (1000 over 128
            # threads): held 4 wide as a symbolic row is, each vector past it guarded.
            # Not for a row shorter than a vector per thread (most threads would only
            # test their guards), nor for 16-bit elements (`_words`).
            vectors = RegisterVectors(c, base, width, HELD, (words[0], proof), u32(length))
            _row_passes(c, shape, other_axes, base, width, vectors.fold_all, vectors.write_all)
            return (width, 1, 1), dispatch
        plan = None
    if plan is None or not c.s.vector_views:
        _row_passes(c, shape, other_axes, base, width, over_row, over_row)
        return (width, 1, 1), dispatch
    # A symbolic row of at most HELD vectors per thread, its length a multiple of 4 (tested
    # at run time): held in registers 4 wide as a literal row is, read once.
    families = plan[0]

    def held(proof: str) -> None:
        vectors = RegisterVectors(c, base, width, HELD, (families, proof), size_ir(length))
        _row_passes(c, shape, other_axes, base, width, vectors.fold_all, vectors.write_all)

    def looped() -> None:
        _row_passes(c, shape, other_axes, base, width, over_row, over_row)

    _if_held(c, length, width, held, looped)
    return (width, 1, 1), dispatch


def softmax_input(ev: Any, r: int) -> tuple[int, int]:
    """A softmax node's input and the axis it normalises (non-negative)."""
    node = ev.node(r)
    x = node["inputs"][0]
    kw = dict(zip(node["keywords"], node["inputs"][1:], strict=True))
    axis = -1 if "axis" not in kw else ev.values[ev.resolve(kw["axis"])].sym.value
    return x, axis % len(ev.shape(x))


def row_shape(ev: Any, r: int) -> tuple[Any, ...]:
    """The shape of the rows a `row` launch's root reduces (or normalises, a softmax)."""
    if root_kind(ev.kg, r) == "softmax":
        return tuple(ev.shape(softmax_input(ev, r)[0]))
    return tuple(ev.reduction(r).shape)


def _short_rows(c: KernelContext, shape: tuple[Any, ...]) -> Any:
    """`row` for a literal row of at most `SERIAL_REDUCE_MAX` elements: a thread per row
    (as a short `reduce`), no threadgroup memory, no barrier. The row is unrolled, so each
    element is loaded once and stays in a register for the later passes and the write."""
    body = c.body
    other, length = tuple(shape[:-1]), shape[-1]
    rows = sz.product(list(other))
    dispatch, g = c.groups(sz.cdiv(rows, WG), guard=False)
    rowid = body.let(ibin("+", ibin("*", g, u32(WG)), Builtin("local_x")), "row")
    if c.plan.total is not None:
        # this thread's row's share of the whole reduction: the identity past the rows
        red = c.ev.reduction(c.plan.total)
        c.row_share = (g, body.var(identity(red.name, red.acc), "share"))
    with body.if_(Binary("<", rowid, size_ir(rows), "bool")):
        other_axes = Idx(other, flat=rowid).axes(body)
        base = body.let(ibin("*", rowid, u32(length)), "base")

        def over(n: int) -> Any:
            def each(visit: Any) -> None:
                for j in range(n):
                    visit(u32(j))

            return each

        # a root over rows of another length (rows of 5 beside rows of 3) folds its own
        folds = {r: over(row_shape(c.ev, r)[-1]) for r in c.plan.roots}
        _row_passes(c, shape, other_axes, base, 1, over(length), over(length), folds)
    return (WG, 1, 1), dispatch


# vectors per thread of a symbolic row held in registers (`row`, `softmax`): 8 elements,
# 1024 for a workgroup of 128, as Triton's 1024 block of 4 warps
HELD = 2


def _if_held(
    c: KernelContext, length: Any, width: int, held: Any, other: Any, count: int = HELD
) -> None:
    """`held(proof)` where a symbolic row fits `count` vectors per thread (a multiple of
    4, at least 4, at most count * 4 * width: tested at run time, but for the last where
    the dim's max says so; `proof` is the manifest's words for it), else `other()`."""
    body = c.body
    cap = count * LANES * width
    n = size_ir(length)
    whole = Binary("==", ibin("%", n, u32(LANES)), u32(0), "bool")
    low, high = Binary(">=", n, u32(LANES), "bool"), Binary("<=", n, u32(cap), "bool")
    text = sz.manifest_text(length)
    bound = sz.upper_bound(length, c.dims)
    if bound is not None and bound <= cap:  # a dim's max: no upper test to make
        fits = Binary("&&", whole, low, "bool")
        proof = f"{text} % 4 == 0, tested at run time ({text} <= {bound}, its max)"
    else:
        fits = Binary("&&", whole, Binary("&&", low, high, "bool"), "bool")
        proof = f"{text} % 4 == 0 and {text} <= {cap}, tested at run time"
    with body.block() as short:
        held(proof)
    with body.block() as long:
        other()
    body.emit(If(fits, short, long))


def _row_passes(
    c: KernelContext,
    shape: tuple[Any, ...],
    other_axes: list[Expr],
    base: Expr,
    width: int,
    fold_over: Any,
    write_over: Any,
    folds: dict[int, Any] | None = None,
) -> None:
    """`row`'s work: each reduction of the plan folded over the row (`fold_over(visit)`,
    or its own `folds[root]`),
    combined over the workgroup, its epilogue once; then the row written (`write_over`).
    A fold's `visit(j, valid)` is given, where the element may lie past the row (a row
    held in registers), the condition that it does not."""
    ev, body = c.ev, c.body

    def at(j: Expr) -> Idx:
        return Idx(shape, flat=offset(body, base, j), axes=[*other_axes, j])

    graph = c.s.kernel.graph.graph
    softmaxes = {r for r in c.plan.roots if root_kind(ev.kg, r) == "softmax"}
    # a softmax's epilogue is element-wise in the row: written, or read, where it is needed
    targets = [
        t for r, t in zip(c.plan.roots, c.plan.row_values, strict=True) if r not in softmaxes
    ]
    epilogues = {t: set(c.plan.roots) & (nx.ancestors(graph, t) | {t}) for t in targets}
    done: set[int] = set()
    keys = [sz.key(s) for s in shape]
    outputs = c.plan.outputs()
    whole = [(n, bufs) for n, bufs in outputs if [sz.key(s) for s in ev.shape(n)] == keys]
    wide = [(n, bufs) for n, bufs in outputs if n in c.plan.wide]
    # what the row's elements read (later folds, the row-shaped outputs): an epilogue they
    # do not read is computed where it is stored, in thread 0 (an accuracy's hit, whose
    # label a workgroup's every thread would load)
    at_elements = set().union(
        *(nx.ancestors(graph, n) for n in [*c.plan.roots, *dict(whole), *dict(wide)])
    )

    def element(red: Reduction, j: Expr) -> Expr:
        """Row element j of what `red` reduces, in its accumulator's type."""
        same = [sz.key(s) for s in red.shape] == [sz.key(s) for s in shape]
        value = ev.at(red.x, at(j) if same else Idx(red.shape, axes=[*other_axes, j]))
        return lw.convert(value, ev.dtype(red.x), red.acc)

    over_row = fold_over

    def fold(init: Expr, step: Any, op: str, shared: str) -> Expr:
        """Each thread's `acc = step(acc, j)` over its elements, then the workgroup's
        total (`op`), the same in every thread."""
        acc = body.var(init, "acc")

        def visit(j: Expr, valid: Expr | None = None) -> None:
            folded = step(acc, j)
            body.emit(Assign(acc, folded if valid is None else lw.select(valid, folded, acc)))

        over_row(visit)
        if width == 1:  # a thread per row (`_short_rows`)
            return acc
        return group_total(body, c.shared, acc, op, width, shared)

    def normalise(r: int, names: tuple[str, str]) -> None:
        """A softmax root: the row's max and its sum of exp(x - max) (two folds), then its
        value at any index of the row (`Evaluator.row_functions`): at the row's own
        elements exp(x - max) is the one the sum computed (a held row keeps it)."""
        x, _ = softmax_input(ev, r)
        dtype = ev.dtype(x)

        def value(idx: Idx) -> Expr:
            return lw.convert(ev.at(x, idx), dtype, float32)

        def shifted(idx: Idx, top: Expr) -> Expr:
            return body.memo(("shifted", r, idx.key), lambda: lw.bin_("-", value(idx), top), "d")

        def exp(idx: Idx, top: Expr) -> Expr:
            return body.memo(("exp", r, idx.key), lambda: lw.call("exp", shifted(idx, top)), "e")

        # the row's max, where the group already folds it (`x.max(axis=-1)` beside
        # `x.softmax()`: nan-propagating, which a softmax may take, `_row_max`)
        reduced = {q: ev.reduction(q) for q in sorted(done) if root_kind(ev.kg, q) == "reduce"}
        maxes = [
            q
            for q, red in reduced.items()
            if red.name == "max"
            and ev.resolve(red.x) == ev.resolve(x)
            and dtype == ev.dtype(q) == float32
        ]
        if maxes:
            m = ev.row_values[maxes[0]]
        else:
            m = fold(lw.const(-lw.INF, "f32"), lambda a, j: _row_max(a, value(at(j))), "fmax",
                     names[0])  # fmt: skip
        top = _shift(c, m)
        total = fold(lw.const(0, "f32"), lambda a, j: lw.bin_("+", a, exp(at(j), top)), "add",
                     names[1])  # fmt: skip
        if ev.node(r)["spec"].name == "log_softmax":
            log_total = body.let(lw.call("mimir_log", total), "lse")
            ev.row_functions[r] = lambda idx: lw.bin_("-", shifted(idx, top), log_total)
        else:
            ev.row_functions[r] = lambda idx: lw.bin_("/", exp(idx, top), total)

    for k, r in enumerate(c.plan.roots):
        kind = root_kind(ev.kg, r)
        names = (f"$row{k}", f"$row{k}b")
        over_row = fold_over if folds is None else folds[r]
        if kind == "softmax":
            normalise(r, names)
            done.add(r)
            continue
        red = arg_reduction(ev, r) if kind == "argreduce" else ev.reduction(r)

        def lane(j: Expr, red: Reduction = red) -> Expr:
            return element(red, j)

        if kind == "argreduce":
            value = _first_extremum(body, red, lane, fold, names)
        elif kind == "moments":
            value = _variance(body, red, _ddof(ev, r), lane, fold, names)
        else:
            combine = combiner(red.name, red.acc)
            value = fold(
                identity(red.name, red.acc),
                lambda a, j, combine=combine, lane=lane: combine(a, lane(j)),
                op_for(red.name),
                names[0],
            )
            if red.name == "mean":
                value = lw.bin_("/", value, lw.convert(size_ir(red.count), uint32, float32))
        if kind != "argreduce":
            if red.acc != reg_dtype(red.out):
                value = lw.convert(value, red.acc, red.out)
            if red.out == float16:
                value = lw.round_f16(value)
        ev.row_values[r] = body.let(value, "total")
        # each root's epilogue once per row, where the row's elements will find it, as
        # soon as the reductions it reads are done (`max - min`: after both)
        done.add(r)
        for target in list(epilogues):
            if epilogues[target] <= done:
                del epilogues[target]
                if target in at_elements:
                    ev.at(target, _per_row(ev.shape(target), other_axes))

    def write(j: Expr) -> None:
        c.write(at(j), outputs=whole)

    if whole:
        write_over(write)
    for n, bufs in wide:
        # its own length: each thread every `width`-th element, reading what it needs
        out_shape = ev.shape(n)

        def store(j: Expr, n: int = n, bufs: list[str] = bufs, out_shape: Any = out_shape) -> None:
            c.write(Idx(out_shape, axes=[*other_axes, j]), outputs=[(n, bufs)])

        if width == 1:  # a thread per short row: all of its own short length, unrolled
            for j in range(out_shape[-1]):
                store(u32(j))
        else:
            strided(body, Builtin("local_x"), size_ir(out_shape[-1]), width, store)
    per_row = [(n, bufs) for n, bufs in outputs if (n, bufs) not in whole + wide and bufs]
    if not per_row and c.plan.total is None:
        return
    rowid = Idx(shape[:-1], axes=other_axes).flat(body)
    with (
        contextlib.nullcontext()
        if width == 1
        else body.if_(Binary("==", Builtin("local_x"), u32(0), "bool"))
    ):
        for n, bufs in per_row:
            value = ev.at(n, _per_row(ev.shape(n), other_axes))
            for name in bufs:
                body.emit(Store(name, rowid, lw.to_storage(value, ev.dtype(n))))
        if c.plan.total is not None:
            # the row's share of the whole reduction that ends the launch (`whole_of_rows`)
            red = ev.reduction(c.plan.total)
            x = ev.resolve(red.x)
            share = lw.convert(ev.at(x, _per_row(ev.shape(x), other_axes)), ev.dtype(x), red.acc)
            if width == 1:  # a thread per row: the workgroup's rows are combined later
                body.emit(Assign(c.row_share[1], share))
            else:
                assert c.plan.partials is not None
                _hand(c, c.plan.partials, rowid, lw.to_storage(share, red.acc))


def _per_row(shape: tuple[Any, ...], other_axes: list[Expr]) -> Idx:
    """The position of a row's element in a tensor with one per row (`keepdims` or not)."""
    return Idx(shape, axes=[*other_axes, *[u32(0)] * (len(shape) - len(other_axes))])


# ---------------------------------------------------------------- softmax

# Row elements one thread keeps in registers when softmax reads its row once.
ROW_REGISTERS = 16


def softmax(c: KernelContext) -> tuple[tuple[int, int, int], tuple[Any, Any, Any]]:
    """Softmax and log-softmax over one row per workgroup.

    When the row length is proven at most `width * ROW_REGISTERS` (a literal, or a dim's
    declared `max`), each thread loads its elements once into registers, and `exp` is
    computed once per element (`_row_in_registers`). Otherwise one pass computes the
    row's max and its sum of exponentials together (the online algorithm: the running
    sum is rescaled when the max grows), and a second pass writes: two reads, not three.
    """
    ev, body = c.ev, c.body
    root = c.plan.root
    assert root is not None
    node = ev.node(root)
    x, axis = softmax_input(ev, root)
    shape = ev.shape(x)
    other = tuple(s for k, s in enumerate(shape) if k != axis)
    length = shape[axis]
    bound = length if isinstance(length, int) else sz.upper_bound(length, c.dims)
    # enough threads for a row of `bound` to fit in registers, when it can
    width = row_width(length, sz.cdiv(bound, ROW_REGISTERS) if bound is not None else 0)
    dispatch, row = c.groups(sz.product(list(other)))
    other_axes = Idx(other, flat=row).axes(body)
    xdtype = ev.dtype(x)
    last = axis == len(shape) - 1
    base = body.let(ibin("*", row, size_ir(length)), "base") if last else None

    def position(j: Expr) -> Idx:
        axes = list(other_axes)
        axes.insert(axis, j)
        return Idx(shape, flat=None if base is None else offset(body, base, j), axes=axes)

    def element(j: Expr) -> tuple[Idx, Expr]:
        idx = position(j)
        return idx, lw.convert(ev.at(x, idx), xdtype, float32)

    log = node["spec"].name == "log_softmax"
    wide_plan = (
        _words(c, _row_vectors(c, base, length, other))
        if bound is not None and bound != length and base is not None
        else None
    )
    if wide_plan is not None and bound is not None and bound > HELD * LANES * 128:
        # a row of a dim's max above what 128 threads hold in 2 vectors (a max of 4096,
        # rows of 1000): 128 threads hold up to BOUNDED_VECTORS each; every vector past
        # the row is skipped. Fewer, busier threads pay the two workgroup reductions
        # once per more elements.
        wide_width = row_width(length, sz.cdiv(bound, LANES * BOUNDED_VECTORS))
        if wide_width < width:
            return _bounded_rows(c, element, position, length, bound, wide_width, log,
                                 wide_plan, base, other, dispatch)  # fmt: skip
    if bound is not None and bound <= width * ROW_REGISTERS:
        vectors = register_vectors(c, base, length, other, width) if bound == length else None
        # (not a row shorter than a vector per thread: most threads would compute exp of
        # -inf lanes)
        short = bound < LANES * width
        plan = (
            None
            if vectors is not None or short
            else _words(c, _row_vectors(c, base, length, other))
        )
        if plan is None:
            _row_in_registers(c, element, position, length, bound, width, log, vectors)
            return (width, 1, 1), dispatch
        # A row the workgroup does not divide, a multiple of 4 (1000 over 128 threads; a
        # dim of `max` 4096 over 256, tested at run time where not proven): held 4 wide,
        # enough vectors per thread for the bound, each past the row -inf; else in
        # registers one element per slot, each slot guarded.
        assert base is not None
        families, proof = plan
        count = sz.cdiv(bound, LANES * width)

        def wide(proof: str) -> None:
            vectors = RegisterVectors(c, base, width, count, (families, proof), size_ir(length))
            skip = count > HELD  # a row of 1000 under a bound of 4096: 3 of 4 vectors past it
            _row_in_registers(c, element, position, length, bound, width, log, vectors, skip)

        if proof is not None:
            wide(proof)
        else:

            def slots() -> None:
                _row_in_registers(c, element, position, length, bound, width, log)

            _if_held(c, length, width, wide, slots, count)
        return (width, 1, 1), dispatch
    plan = None if base is None else _row_vectors(c, base, length, other)
    if plan is None or not c.s.vector_views:
        _online(c, element, length, width, log, base, other)
        return (width, 1, 1), dispatch
    # a symbolic row of a multiple of 4 up to HELD vectors per thread, tested at run time:
    # held in registers 4 wide (read once, exp once per element), else online
    assert base is not None
    families = plan[0]

    def held(proof: str) -> None:
        vectors = RegisterVectors(c, base, width, HELD, (families, proof), size_ir(length))
        _row_in_registers(c, element, position, length, 0, width, log, vectors)

    _if_held(c, length, width, held, lambda: _online(c, element, length, width, log, base, other))
    return (width, 1, 1), dispatch


# vectors per thread a row bounded by a dim's `max` may hold (`_bounded_rows`)
BOUNDED_VECTORS = 8


def _bounded_rows(
    c: KernelContext,
    element: Any,
    position: Any,
    length: Any,
    bound: int,
    width: int,
    log: bool,
    plan: Any,
    base: Expr,
    other: tuple[Any, ...],
    dispatch: Any,
) -> tuple[tuple[int, int, int], tuple[Any, Any, Any]]:
    """A symbolic row of at most `bound` elements (a dim's `max`), a multiple of 4 (tested
    at run time where not proven): `width` threads hold it 4 wide, up to
    `BOUNDED_VECTORS` vectors each, those past the row skipped (`_row_in_registers` with
    `skip_past`); another length takes the online two-pass schedule."""
    families, proof = plan
    count = sz.cdiv(bound, LANES * width)

    def wide(proof: str) -> None:
        vectors = RegisterVectors(c, base, width, count, (families, proof), size_ir(length))
        _row_in_registers(c, element, position, length, bound, width, log, vectors, True)

    if proof is not None:
        wide(proof)
    else:
        online = lambda: _online(c, element, length, width, log, base, other)  # noqa: E731
        _if_held(c, length, width, wide, online, count)
    return (width, 1, 1), dispatch


def _row_max(m: Expr, v: Expr) -> Expr:
    """A softmax's running max: the target's own `max` (PTX `max.f32`, one instruction;
    the nan-propagating `maximum` is four), whose result with a nan operand is either
    operand or unspecified. A nan need not be passed on: its `exp(nan - top)` makes the
    row's sum nan, so every output is nan whatever `top` is, as the reference's; and
    which of +0 and -0 is the max changes no `x - top`'s exp."""
    return lw.call("max", m, v)


def _block_total(c: KernelContext, value: Expr, op: str, width: int, name: str) -> Expr:
    """Combine every thread's `value` over the workgroup; the result, in every thread."""
    return group_total(c.body, c.shared, value, op, width, f"${name}")


def rescaled(pm: Expr, ps: Expr, top: Expr) -> Expr:
    """A sum of exp(x - pm) as one of exp(x - top) (top >= pm): ps * exp(pm - top); ps
    (nothing summed) where pm is -inf."""
    scaled = lw.bin_("*", ps, lw.call("exp", lw.bin_("-", pm, top)))
    return lw.select(lw.bin_("==", pm, lw.const(-lw.INF, "f32")), ps, scaled)


def _shift(c: KernelContext, top: Expr) -> Expr:
    # A row of -inf has nothing to subtract (the reference shifts by 0 then).
    inf = lw.const(-lw.INF, "f32")
    return c.body.let(lw.select(lw.bin_("==", top, inf), lw.const(0, "f32"), top), "top")


def _write(c: KernelContext, idx: Idx, shifted: Expr, e: Expr, total: Expr, log: Any) -> None:
    value = lw.bin_("-", shifted, log) if log is not None else lw.bin_("/", e, total)
    assert c.plan.root is not None
    if c.ev.dtype(c.plan.root) == float16:
        value = lw.round_f16(value)
    c.write(idx, c.body.let(value, "y"))


def _row_in_registers(
    c: KernelContext,
    element: Any,
    position: Any,
    length: Any,
    bound: int,
    width: int,
    log: bool,
    vectors: RegisterVectors | None = None,
    skip_past: bool = False,
) -> None:
    """Thread t holds row elements t, t + width, ... (at most ROW_REGISTERS) in registers
    (with `vectors`, 4 wide: 4t .. 4t+3, 4t + 4*width, ...; for a run-time length, a
    vector past the row holds -inf and is not written; with `skip_past`, for rows
    often far below the vectors held, its max, exp, sum and write are skipped, each
    vector's guard inside the previous one's).

    A slot that every thread fills (a literal length covering it) has no guard; the
    others are guarded and hold -inf past the end, which adds nothing to the max
    and exp(-inf) = 0 to the sum."""
    body = c.body
    lid = Builtin("local_x")
    count = size_ir(length)
    slots: list[tuple[Expr, Any, Expr, bool]] = []
    # a vector lane's condition to be in the row (None: always), for the exp phase
    lanes_inside: dict[int, Expr | None] = {}

    def load(j: Expr, inside: Expr | None) -> None:
        idx, v = element(j)
        if inside is not None and not skip_past:  # past the row: -inf, as a guarded slot
            v = lw.select(inside, v, lw.const(-lw.INF, "f32"))
        lanes_inside[len(slots)] = inside
        slots.append((j, idx, body.let(v, "v"), True))

    for r, inside in vectors.each if vectors is not None else []:
        vectors.read(r, inside, lambda j, inside=inside: load(j, inside))
    for k in range(sz.cdiv(bound, width) if vectors is None and isinstance(bound, int) else 0):
        j = body.let(ibin("+", lid, u32(k * width)), "j")
        full = isinstance(length, int) and (k + 1) * width <= length
        if full:
            idx, v = element(j)
            slots.append((j, idx, body.let(v, "v"), True))
            continue
        v = body.var(lw.const(-lw.INF, "f32"), "v")
        with body.if_(Binary("<", j, count, "bool")):
            idx, value = element(j)
            body.emit(Assign(v, value))
        slots.append((j, idx, v, False))
    # a guarded slot's work (max, exp, sum, write) is all inside its guard, so a slot
    # past the end of the row costs a compare and a branch per phase
    first = 0
    if skip_past:
        # a vector that may lie past the row: its lanes' max under its guard (they hold
        # what its loads left, not -inf), so a thread past the row skips them. A
        # thread's vectors in the row come first, so each guard is inside the one
        # before: a thread meets one failing guard, not one per vector past the row
        m = body.var(lw.const(-lw.INF, "f32"), "m")
        with ExitStack() as nested:
            while first < len(slots) and (inside := lanes_inside.get(first)) is not None:
                nested.enter_context(body.if_(inside))
                for _, _, v, _ in slots[first : first + LANES]:
                    body.emit(Assign(m, _row_max(m, v)))
                first += LANES
    elif slots[0][3]:
        m = body.var(slots[0][2], "m")
        first = 1
    else:
        m = body.var(lw.const(-lw.INF, "f32"), "m")
    for j, _, v, full in slots[first:]:
        with _unless(body, full, Binary("<", j, count, "bool")):
            body.emit(Assign(m, _row_max(m, v)))
    top = _shift(c, _block_total(c, m, "fmax", width, "row_max"))  # a nan: as `_row_max`
    s = body.var(lw.const(0, "f32"), "s")
    values: list[tuple[Expr, Expr]] = []

    def exps_under(guards: list[tuple[Expr, list[Expr]]]) -> list[tuple[Expr, Expr]]:
        """`d = v - top`, `e = exp(d)` and `s += e` for each of the values held under each
        condition, each guard inside the one before (`nested`); outside them only what
        the write reads (e, or d for a log-softmax; 0 where a guard fails) is kept, in a
        variable."""
        kept = [[body.var(lw.const(0, "f32"), "d" if log else "e") for _ in h] for _, h in guards]
        with ExitStack() as nested:
            for (cond, held), variables in zip(guards, kept, strict=True):
                nested.enter_context(body.if_(cond))
                for v, var in zip(held, variables, strict=True):
                    d = body.let(lw.bin_("-", v, top), "d")
                    e = body.let(lw.call("exp", d), "e")
                    body.emit(Assign(s, lw.bin_("+", s, e)))
                    body.emit(Assign(var, d if log else e))
        # (d, e): `_write` reads the one it needs
        return [(var, var) for variables in kept for var in variables]

    k = 0
    vectors_past: list[tuple[Expr, list[Expr]]] = []
    while skip_past and k < len(slots) and lanes_inside.get(k) is not None:
        # a vector that may lie past the row (a length below the bound): its lanes' exp
        # and sum under its guard, nested as the max's, so a thread past the row skips them
        vectors_past.append((lanes_inside[k], [slot[2] for slot in slots[k : k + LANES]]))
        k += LANES
    if vectors_past:
        values += exps_under(vectors_past)
    for j, _, v, full in slots[k:]:
        if full:
            d = body.let(lw.bin_("-", v, top), "d")
            e = body.let(lw.call("exp", d), "e")
            body.emit(Assign(s, lw.bin_("+", s, e)))
            values.append((d, e))
            continue
        values += exps_under([(Binary("<", j, count, "bool"), [v])])
    total = _block_total(c, s, "add", width, "row_sum")
    log_total = body.let(lw.call("mimir_log", total)) if log else None
    if vectors is not None:
        written = {j: (idx, d, e) for (j, idx, _, _), (d, e) in zip(slots, values, strict=True)}

        def write(j: Expr) -> None:
            idx, d, e = written[j]
            _write(c, idx, d, e, total, log_total)

        with ExitStack() as nested:
            for r, inside in vectors.each:
                if skip_past and inside is not None:  # nested, as the max's guards
                    nested.enter_context(body.if_(inside))
                    vectors.read(r, None, write)
                else:
                    vectors.write(r, inside, write)
        return
    for (j, idx, _, full), (d, e) in zip(slots, values, strict=True):
        with _unless(body, full, Binary("<", j, count, "bool")):
            # a guarded slot's position is made again here: the one made under its load's
            # guard may name a value only that block defines
            _write(c, idx if full else position(j), d, e, total, log_total)


@contextmanager
def _unless(body: Any, unguarded: bool, cond: Expr) -> Iterator[None]:
    """The statements inside run under `if cond`, or plainly when `unguarded`."""
    if unguarded:
        yield
        return
    with body.if_(cond):
        yield


def _online(
    c: KernelContext,
    element: Any,
    length: Any,
    width: int,
    log: bool,
    base: Expr | None,
    other: tuple[Any, ...],
) -> None:
    """One pass for the max and the sum of exp(x - max) together, one pass to write.

    Each thread keeps (m, s): its running max and the sum of exp(x - m) so far; an element
    above m rescales s by exp(m - x). Threads' pairs are combined the same way in a tree."""
    body = c.body
    inf = lw.const(-lw.INF, "f32")
    zero, one = lw.const(0, "f32"), lw.const(1, "f32")
    m = body.var(inf, "m")
    s = body.var(zero, "s")

    def step(j: Expr) -> None:
        _, v = element(j)
        v = body.let(v, "v")
        grows = body.let(lw.bin_(">", v, m), "grows")
        d = body.let(lw.select(grows, lw.bin_("-", m, v), lw.bin_("-", v, m)), "d")
        # exp(d) once; d is NaN only when x and m are both -inf (nothing to add)
        e = body.let(lw.select(lw.bin_("==", v, inf), zero, lw.call("exp", d)), "e")
        body.emit(
            Assign(s, lw.select(grows, lw.bin_("+", lw.bin_("*", s, e), one), lw.bin_("+", s, e)))
        )
        body.emit(Assign(m, lw.select(grows, v, m)))

    row_elements(c, base, length, other, width, step)

    # Each thread's sum is rescaled to its warp's max, then summed over the warp; the warps'
    # (max, sum) pairs are combined the same way, in every thread.
    # A thread whose max is -inf saw only -inf and nan: its sum is 0, or nan to pass on.
    # `fmax`: m is never nan (a nan does not grow it; it makes s nan, which is passed on)
    wm = body.let(WarpReduce("fmax", m, "f32"), "warp_max")
    ws = body.let(WarpReduce("add", body.let(rescaled(m, s, wm)), "f32"), "warp_sum")
    if width == WARP:
        row_max, row_sum = wm, ws
    else:
        count = width // WARP
        pm, ps = slots(body, c.shared, [("$row_max", wm), ("$row_sum", ws)], width)
        row_max = body.let(WarpReduce("fmax", pm, "f32", count), "row_max")
        row_sum = body.let(WarpReduce("add", body.let(rescaled(pm, ps, row_max)), "f32", count))
    top = _shift(c, row_max)
    total = row_sum
    log_total = body.let(lw.call("mimir_log", total)) if log else None

    def write(j: Expr) -> None:
        idx, v = element(j)
        shifted = body.let(lw.bin_("-", v, top))
        e = lw.call("exp", shifted) if log_total is None else shifted
        _write(c, idx, shifted, e, total, log_total)

    row_elements(c, base, length, other, width, write)


# ---------------------------------------------------------------- two-pass reductions


def _strided_pass(
    c: KernelContext,
    count: Any,
    width: int,
    shared: str,
    init: Expr,
    step: Any,
    op: str,
    row: tuple[Expr | None, tuple[Any, ...]] = (None, ()),
) -> Expr:
    """Each thread folds `step(acc, r)` over r = lid, lid + width, ... below `count`, then
    the threads' results are combined with `op` (`group_total`, its threadgroup array
    `shared`); every thread gets the total. With
    `width` 1 (a serial launch: one thread per output) the thread folds every r alone.
    `row`: the row's flat offset and the other axes' sizes, for a reduction over the last
    axis (its elements then by `row_elements`)."""
    body = c.body
    acc = body.var(init, "acc")

    def visit(r: Expr) -> None:
        body.emit(Assign(acc, step(acc, r)))

    if width == 1:
        strided(body, u32(0), size_ir(count), 1, visit)
        return acc
    base, rows = row
    row_elements(c, base, count, rows, width, visit, held=True)
    return group_total(body, c.shared, acc, op, width, shared)


class _TwoPass:
    """The launch shape of a two-pass reduction: a workgroup per output element, or, when
    the reduced count is a literal of at most `SERIAL_REDUCE_MAX`, a thread per output
    element looping alone (no threadgroup memory, no barriers). `inside` opens the block
    the passes are built in; `once` the block where one thread writes the result."""

    def __init__(self, c: KernelContext, red: Reduction) -> None:
        self.c = c
        self.serial = isinstance(red.count, int) and red.count <= SERIAL_REDUCE_MAX
        body = c.body
        if self.serial:
            self.width = 1
            self.dispatch, g = c.groups(sz.cdiv(red.outputs, WG), guard=False)
            lid = Builtin("local_x")
            self.o = body.let(ibin("+", ibin("*", g, u32(WG)), lid), "o")
            self.workgroup = (WG, 1, 1)
        else:
            self.width = row_width(red.count)
            self.dispatch, self.o = c.groups(red.outputs)
            self.workgroup = (self.width, 1, 1)

    def inside(self, red: Reduction) -> Any:
        if self.serial:
            return self.c.body.if_(Binary("<", self.o, size_ir(red.outputs), "bool"))
        return contextlib.nullcontext()

    def once(self) -> Any:
        if self.serial:
            return contextlib.nullcontext()
        return self.c.body.if_(Binary("==", Builtin("local_x"), u32(0), "bool"))


def moments(c: KernelContext) -> tuple[tuple[int, int, int], tuple[Any, Any, Any]]:
    """`var` / `std` (`_TwoPass`: a workgroup per output element, or a thread for a small
    literal count), two passes: the mean, then the sum of squared deviations from it
    (never E[x^2] - E[x]^2, which cancels catastrophically), divided by count - ddof.
    Over a whole tensor, split over workgroups of CHUNK elements (`_moment_chunk`,
    `_combine_moments`)."""
    assert c.plan.root is not None
    ev = c.ev
    red = ev.reduction(c.plan.root)
    if column_layout(red) is not None:
        return _column_moments(c, red)
    if c.plan.partials is not None:
        ddof = _ddof(ev, c.plan.root)
        if c.plan.counter is not None:  # every chunk, then the last workgroup combines
            dispatch, _ = _moment_chunk(c, red, c.plan.partials)
            groups = size_ir(sz.cdiv(red.count, CHUNK))
            _last_workgroup(c, groups)
            _combine_moments(c, red, u32(0), ddof)
            _reset_counter(c, groups)
            return (SPLIT_WG, 1, 1), dispatch
        dispatch, o = c.groups(1)  # after a `partial` launch
        _combine_moments(c, red, o, ddof)
        return (SPLIT_WG, 1, 1), dispatch
    launch = _TwoPass(c, red)
    t = lw.REG[red.acc]
    with launch.inside(red):
        _moments(c, red, launch, _ddof(ev, c.plan.root), t)
    return launch.workgroup, launch.dispatch


def _moment_chunk(c: KernelContext, red: Reduction, partials: str) -> tuple[Any, Expr]:
    """A whole `var`'s `partial` work: this workgroup's chunk of n elements (CHUNK, fewer
    in the last), its sum s and, after a second read of the same elements (from the
    cache), the sum of squared deviations from its own mean s / n; thread 0 stores s at
    `partials[group]` and the squares at `partials[groups + group]`. The other
    reductions of the pass are folded beside the sum, and `Plan.elements` stored at each
    element, in the first read."""
    assert red.acc == float32  # (a float16 input's var accumulates in float32)
    body = c.body
    dispatch, g, start, end = _chunk(c, red)
    lid = Builtin("local_x")
    read = _element(c, red)
    n = lw.convert(ibin("-", end, start), uint32, float32)
    members = _members(c)[1:]  # the other reductions of the pass, folded with the sums
    reads = [_element(c, m.red) for m in members]
    accs = [body.var(identity(m.folded, m.red.acc), "acc") for m in members]
    over = lambda visit: strided(body, ibin("+", start, lid), end, SPLIT_WG, visit)  # noqa: E731
    kept = _kept_axes(c, red)

    def fold(step: Any, shared: str, more: bool = False, then: Any = None) -> list[Expr]:
        """The chunk's `step` summed (`more`: and the members folded; `then`: an
        argmax's positions found in the same read, `_Firsts`)."""
        acc = body.var(lw.const(0, "f32"), "acc")

        def visit(r: Expr) -> None:
            if more and c.plan.elements:  # the element-wise outputs, in the first read
                c.write(Idx(red.shape, flat=r), outputs=c.plan.elements)
            body.emit(Assign(acc, lw.bin_("+", acc, step(read(r, kept)))))
            for a, m, get in zip(accs, members, reads, strict=True) if more else ():
                value = get(r, _kept_axes(c, m.red))
                body.emit(Assign(a, combiner(m.folded, m.red.acc)(a, value)))
            if then is not None:
                then.visit(r)

        over(visit)
        values = [(acc, "add", shared)]
        if more:
            values += [(a, op_for(m.folded), f"$partial{k + 1}") for k, (a, m) in
                       enumerate(zip(accs, members, strict=True))]  # fmt: skip
        return group_totals(body, c.shared, [*values, *(then.values() if then else [])], SPLIT_WG)

    total, *others = fold(lambda v: v, "$sum", True)
    mean = body.let(lw.bin_("/", total, n), "mean")

    def square(v: Expr) -> Expr:
        d = body.let(lw.bin_("-", v, mean), "d")
        return lw.bin_("*", d, d)

    # an argmax's first position, in the squares' read of the chunk (from the cache)
    positions = _Firsts.of_chunk(c, members, others, reads)
    squares, *found = fold(square, "$squares", then=positions)
    firsts = positions.found(found)
    groups = size_ir(sz.cdiv(red.count, CHUNK))
    with body.if_(Binary("==", lid, u32(0), "bool")):
        _hand(c, partials, g, lw.to_storage(total, float32))
        _hand(c, partials, ibin("+", groups, g), lw.to_storage(squares, float32))
        for m, value, first in zip(members, others, firsts, strict=True):
            _store_part(c, m, g, value, first)
    return dispatch, g


def _combine_moments(c: KernelContext, red: Reduction, o: Expr, ddof: int) -> None:
    """A whole `var` from its chunks' sums s_g and squared deviations q_g (n_g elements
    each): the mean m = sum(s_g) / count, then sum(q_g + n_g (s_g / n_g - m)^2), the
    squared deviations from m (Chan et al.'s parallel variance, folded like any sum), over
    count - ddof; thread 0 writes it (its `sqrt` for `std`)."""
    assert c.plan.partials is not None
    body, partials = c.body, c.plan.partials
    lid = Builtin("local_x")
    groups = size_ir(sz.cdiv(red.count, CHUNK))
    count = size_ir(red.count)

    members = _members(c)[1:]  # the other reductions of the pass, combined with the sums
    accs = [body.var(identity(m.folded, m.red.acc), "acc") for m in members]
    over = lambda visit: strided(body, lid, groups, SPLIT_WG, visit)  # noqa: E731
    part = lambda m, r: _part(c, m, r)  # noqa: E731

    def fold(step: Any, shared: str, more: bool = False) -> list[Expr]:
        acc = body.var(lw.const(0, "f32"), "acc")

        def visit(r: Expr) -> None:
            body.emit(Assign(acc, lw.bin_("+", acc, step(r))))
            for a, m in zip(accs, members, strict=True) if more else ():
                body.emit(Assign(a, combiner(m.folded, m.red.acc)(a, part(m, r))))

        over(visit)
        values = [(acc, "add", shared)]
        if more:
            values += [(a, op_for(m.folded), f"$combine{k + 1}") for k, (a, m) in
                       enumerate(zip(accs, members, strict=True))]  # fmt: skip
        return group_totals(body, c.shared, values, SPLIT_WG)

    total, *others = fold(lambda r: _handed(c, partials, r, "f32"), "$sum", True)
    mean = body.let(lw.bin_("/", total, lw.convert(count, uint32, float32)), "mean")

    def square(r: Expr) -> Expr:
        s = _handed(c, partials, r, "f32")
        q = _handed(c, partials, ibin("+", groups, r), "f32")
        return _part_squares(body, count, r, CHUNK, s, q, mean)[0]

    (squares,) = fold(square, "$squares")
    position = lambda m, r: _position(c, m, r)  # noqa: E731
    firsts = _Firsts(c, members, others, part, position).folded(over)
    value = _spread(body, red, squares, ddof)
    with body.if_(Binary("==", lid, u32(0), "bool")):
        write_total(c, red, o, value)
        for m, total, first in zip(members, others, firsts, strict=True):
            _finish_member(c, m, o, total, first)


def _part_squares(
    body: Any, count: Expr, k: Expr, size: int, s: Expr, q: Expr, mean: Expr
) -> tuple[Expr, Expr]:
    """Part k's share of the squared deviations from the whole `mean`, for a `var` split
    in parts of `size` elements (the last may be shorter) of `count`: q + n (s / n -
    mean)^2, from the part's sum s and squared deviations q from its own mean (Chan et
    al.'s parallel variance); and n, its element count (a `u32`)."""
    left = ibin("-", count, ibin("*", k, u32(size)))
    rows = lw.select(Binary("<", left, u32(size), "bool"), left, u32(size))
    n = body.let(lw.convert(rows, uint32, float32), "n")
    d = body.let(lw.bin_("-", lw.bin_("/", s, n), mean), "d")
    return lw.bin_("+", q, lw.bin_("*", n, lw.bin_("*", d, d))), rows


def _spread(body: Any, red: Reduction, squares: Expr, ddof: int) -> Expr:
    """A `var` from its squared deviations, over count - ddof, or its `std`."""
    divisor = lw.convert(size_ir(sz.simplify(BinOp("-", red.count, ddof))), uint32, float32)
    value = body.let(lw.bin_("/", squares, divisor), "var")
    if red.name == "std":
        value = body.let(lw.call("mimir_sqrt", value), "std")
    return value


def _ddof(ev: Any, r: int) -> int:
    """The `ddof=` of `var` / `std` root `r` (0 if not given)."""
    node = ev.node(r)
    kw = dict(zip(node["keywords"], node["inputs"][1:], strict=True))
    return ev.literal_arg(kw.get("ddof"), 0)


def _moments(c: KernelContext, red: Reduction, launch: _TwoPass, ddof: int, t: str) -> None:
    body, o = c.body, launch.o
    value = _variance(body, red, ddof, *_launch_passes(c, red, launch), ("$sum", "$squares"))
    with launch.once():
        write_total(c, red, o, value)


def _launch_passes(c: KernelContext, red: Reduction, launch: _TwoPass) -> tuple[Any, Any]:
    """How a `moments` / `argreduce` launch reads reduced element r of its output element
    (`element(r)`), and folds over them (`fold(init, step, op, shared)`: `_strided_pass`)."""
    o = launch.o
    kept_axes = Idx(red.kept_shape, flat=o).axes(c.body)
    read = _element(c, red, o)
    row = (_row_base(c, red, o), tuple(red.shape[:-1]))

    def element(r: Expr) -> Expr:
        return read(r, kept_axes)

    def fold(init: Expr, step: Any, op: str, shared: str) -> Expr:
        return _strided_pass(c, red.count, launch.width, shared, init, step, op, row)

    return element, fold


def _variance(
    body: Any, red: Reduction, ddof: int, element: Any, fold: Any, shared: tuple[str, str]
) -> Expr:
    """`var` / `std`, two passes (`fold(init, step, op, shared)` over the elements
    `element(r)`, a `moments` launch's or a `row` launch's): the mean, then the sum of
    squared deviations from it, over count - ddof."""
    t = lw.REG[red.acc]
    count = lw.convert(size_ir(red.count), uint32, float32)

    def add(a: Expr, b: Expr) -> Expr:
        return lw.bin_("+", a, b)

    total = fold(lw.const(0, t), lambda acc, r: add(acc, element(r)), "add", shared[0])
    mean = body.let(lw.bin_("/", total, count), "mean")

    def square(acc: Expr, r: Expr) -> Expr:
        d = body.let(lw.bin_("-", element(r), mean), "d")
        return add(acc, lw.bin_("*", d, d))

    squares = fold(lw.const(0, t), square, "add", shared[1])
    return _spread(body, red, squares, ddof)


def argreduce(c: KernelContext) -> tuple[tuple[int, int, int], tuple[Any, Any, Any]]:
    """`argmax` / `argmin` (`_TwoPass`: a workgroup per output element, or a thread for a
    small literal count), two passes: the extremum (nan-propagating, so a row with a nan
    has a nan extremum), then the first position that holds it (or holds a nan), as NumPy
    answers."""
    assert c.plan.root is not None
    ev = c.ev
    red = arg_reduction(ev, c.plan.root)
    if column_layout(red) is not None:
        return _column_args(c, red)
    if c.plan.partials is not None:  # over a whole tensor, split as a whole `reduce` is
        if c.plan.counter is not None:  # every chunk, then the last workgroup combines
            return _last_block(c, red)
        dispatch, o = c.groups(1)  # after a `partial` launch
        _combine_partials(c, _members(c), o, "$partial")
        return (SPLIT_WG, 1, 1), dispatch
    t = lw.REG[red.acc]
    launch = _TwoPass(c, red)
    with launch.inside(red):
        _argreduce(c, red, launch, t)
    return launch.workgroup, launch.dispatch


def arg_reduction(ev: Any, r: int) -> Reduction:
    """Root `r` (an argmax or argmin) as a reduction whose accumulator holds the values
    compared: bools as u32, float16 as f32."""
    red = ev.reduction(r)
    x_dtype = ev.dtype(red.x)
    acc = uint32 if x_dtype == bool_ else float32 if x_dtype == float16 else x_dtype
    return replace(red, acc=acc)


def _argreduce(c: KernelContext, red: Reduction, launch: _TwoPass, t: str) -> None:
    body, o = c.body, launch.o
    where = _first_extremum(body, red, *_launch_passes(c, red, launch), ("$best", "$first"))
    with launch.once():
        assert c.plan.root is not None
        c.write(Idx(c.ev.shape(c.plan.root), flat=o), body.let(where, "index"))


def _first_extremum(
    body: Any, red: Reduction, element: Any, fold: Any, shared: tuple[str, str]
) -> Expr:
    """`argmax` / `argmin` as an int32, two passes (`fold` over `element(r)`, as
    `_variance`): the extremum (nan-propagating), then the first position r holding it,
    or holding a nan when the extremum is nan."""
    _, where = _best_and_first(body, red, element, fold, shared)
    return Cast(where, "i32")


def _holds(v: Expr, best: Expr, t: str) -> Expr:
    """Whether a value is the extremum an argmax looks for (a nan, when that is nan)."""
    if t != "f32":
        return lw.bin_("==", v, best)
    hit = lw.float_compare("==", v, best)
    return lw.bin_("||", hit, lw.bin_("&&", lw.isnan(v), lw.isnan(best)))


def _column_args(c: KernelContext, red: Reduction) -> tuple[tuple[int, int, int], Any]:
    """`argmax` / `argmin` over leading axes, in the column layout of `_columns`: the
    column's extremum over the 4 lanes (every thread gets it), then the first row holding
    it (a min over the lanes of the rows that hold it). With slabs, each stores its
    extremum (`partials`) and first row (`Plan.positions`); the combine takes the
    extremum of those, then the first row among the slabs that hold it."""
    body = c.body
    tile = _column_tile(c, red)
    name = "max" if red.name == "argmax" else "min"
    t = lw.REG[red.acc]
    values = c.plan.writes[0] if c.plan.kind == "partial" else c.plan.partials
    positions = c.plan.positions
    nowhere = lw.const(lw.UINT_MAX, "u32")

    def finish(where: Expr) -> None:
        with body.if_(tile.mine):
            assert c.plan.root is not None
            index = body.let(Cast(where, "i32"), "index")
            c.write(Idx(c.ev.shape(c.plan.root), flat=tile.o), index)

    def combined() -> None:
        assert values is not None and positions is not None

        def extrema(add: Any) -> None:
            def visit(k: Expr) -> None:
                at = body.let(tile.at_partial(k), "at")
                loaded = _handed(c, values, at, lw.STORAGE[red.acc])
                add([body.let(lw.from_storage(loaded, red.acc))])

            strided(body, tile.lane, size_ir(tile.slabs), COLUMN_LANES, visit)

        (best,) = tile.lanes([(name, red.acc, "$best")], extrema)

        def firsts(add: Any) -> None:
            def visit(k: Expr) -> None:
                at = body.let(tile.at_partial(k), "at")
                v = body.let(lw.from_storage(_handed(c, values, at, lw.STORAGE[red.acc]), red.acc))
                row = _handed(c, positions, at, "u32")
                add([lw.select(_holds(v, best, t), row, nowhere)])

            strided(body, tile.lane, size_ir(tile.slabs), COLUMN_LANES, visit)

        (where,) = tile.lanes([("min", uint32, "$first")], firsts)
        finish(where)

    if tile.combine_only:
        combined()
        return (COLUMNS * COLUMN_LANES, 1, 1), tile.dispatch
    fold = _column_reads(c, tile, [red])
    (best,) = tile.lanes([(name, red.acc, "$best")], fold)

    def hits(found: list[Expr], r: Expr) -> list[Expr]:
        v = body.let(found[0], "v")
        return [lw.select(_holds(v, best, t), r, nowhere)]

    (where,) = tile.lanes([("min", uint32, "$first")], lambda add: fold(add, hits))
    if not tile.slabbed:
        finish(where)
        return (COLUMNS * COLUMN_LANES, 1, 1), tile.dispatch
    assert values is not None and positions is not None
    with body.if_(tile.mine):
        at = body.let(tile.at_partial(tile.slab), "at")
        _hand(c, values, at, lw.to_storage(best, red.acc))
        _hand(c, positions, at, where)
    if c.plan.kind != "partial":
        tile.handoff(combined, lambda at: [(values, at), (positions, at)])
    return (COLUMNS * COLUMN_LANES, 1, 1), tile.dispatch


def _best_and_first(
    body: Any,
    red: Reduction,
    element: Any,
    fold: Any,
    shared: tuple[str, str],
    position: Any = None,
) -> tuple[Expr, Expr]:
    """`_first_extremum`'s two passes: the extremum, and the first position (a `u32`;
    the largest where nothing holds it) of those `element(r)` that hold it, position
    `position(r)` (r itself by default: a workgroup's partials carry their chunk's)."""
    name = "max" if red.name == "argmax" else "min"
    t = lw.REG[red.acc]
    combine = combiner(name, red.acc)
    best = fold(identity(name, red.acc), lambda a, r: combine(a, element(r)), name, shared[0])

    def first(a: Expr, r: Expr) -> Expr:
        v = body.let(element(r), "v")
        at = r if position is None else body.let(position(r), "at")
        return lw.select(lw.bin_("&&", _holds(v, best, t), lw.bin_("<", at, a)), at, a)

    where = fold(lw.const(lw.UINT_MAX, "u32"), first, "min", shared[1])
    return best, where
