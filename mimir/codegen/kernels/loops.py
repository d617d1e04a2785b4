"""How a kernel's threads walk the elements of a row or a chunk: strided loops, four
elements at a time where that is proven sound, and rows held in registers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mimir.codegen import lower as lw
from mimir.codegen import sizes as sz
from mimir.codegen.builder import Body, ibin, size_ir, u32
from mimir.codegen.ir import Assign, Binary, Builtin, Const, Expr, GlobalVectorLoad, If, VarDecl
from mimir.codegen.kernels.context import KernelContext, Visit, Walk
from mimir.codegen.kernels.vectorized import vectorise
from mimir.dims import Size

UNROLL = 4  # elements a strided loop visits per iteration (`strided`)


def strided(body: Body, start: Expr, end: Expr, step: int, visit: Visit) -> None:
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
    length: Size,
    rows: tuple[Size, ...],
    width: int,
    visit: Visit,
    held: bool = False,
) -> None:
    """`visit(j)` for this thread's elements j of a row of `length` at flat offset `base`
    of a tensor whose elements are `rows` rows of it, the row's elements split among
    `width` threads.

    Four consecutive elements per thread at a time where that is sound
    (`row_vectors`): thread t visits j = 4t .. 4t+3, then 4t + 4*width .. , and the
    reads and writes of a vector's four elements become one 128-bit access
    (`vectorized.vectorise`): the tensor's own buffers at `base + j`, and buffers of one
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
    plan = row_vectors(c, base, length, rows)

    def scalars() -> None:
        strided(body, lid, size_ir(length), width, visit)

    if plan is None:
        scalars()
        return
    assert base is not None

    def vectors(families: list[set[str]], proof: str) -> None:
        vector_loop(c, base, size_ir(length), width, visit, families, proof)

    if not held or plan[1] is not None or not c.s.vector_views:
        four_wide(c, plan, length, vectors, scalars)
        return

    def short(proof: str) -> None:
        first = body.let(Binary("<<", lid, u32(2), "u32"), "j")
        for k in range(HELD):
            r = body.let(ibin("+", first, u32(k * LANES * width)), "j")
            with body.block() as guarded:
                row_vector(c, base, r, visit, plan[0], proof)
            body.emit(If(Binary("<", r, size_ir(length), "bool"), guarded))

    if_held(c, length, width, short, lambda: four_wide(c, plan, length, vectors, scalars))


def four_wide(
    c: KernelContext,
    plan: tuple[list[set[str]], str | None],
    size: Size,
    vectors: Any,
    scalars: Any,
) -> None:
    """`vectors(families, proof)` where `size` is proven a multiple of 4; else both, behind
    a run-time test of `size % 4` (`row_vectors` says which)."""
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


def row_vectors(
    c: KernelContext, base: Expr | None, length: Size, rows: tuple[Size, ...]
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


def word_vectors(
    c: KernelContext, plan: tuple[list[set[str]], str | None] | None
) -> tuple[list[set[str]], str | None] | None:
    """`plan` (`row_vectors`'s), where every buffer it would access 4 wide holds 32-bit
    elements (a row held 4 wide with guards loads 16-bit lanes one by one, past the row
    too); else None. On a target without `vector_views` only a proven multiple of 4."""
    if plan is None or (plan[1] is None and not c.s.vector_views):
        return None
    named = set().union(*plan[0])
    if any(b.dtype.itemsize != 4 for b in c.s.buffers if b.name in named):
        return None
    return plan


def vector_loop(
    c: KernelContext,
    base: Expr,
    end: Expr,
    width: int,
    visit: Visit,
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
        row_vector(c, base, r, visit, families, proof)
        row_vector(c, base, body.let(ibin("+", r, u32(step)), "r"), visit, families, proof)
        body.emit(Assign(rest, ibin("+", r, u32(2 * step))))
    with body.for_("r", rest, end, u32(step), unroll=False) as r:
        row_vector(c, base, r, visit, families, proof)


def row_vector(
    c: KernelContext,
    base: Expr,
    r: Expr,
    visit: Visit,
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
        if loaded_if is not None and isinstance(st, GlobalVectorLoad):
            # the lanes are variables, 0 unless the load runs (in fresh names, in its block)
            fresh = tuple(body.fresh("ld", v.type) for v in st.vars)
            for v in st.vars:
                body.emit(VarDecl(v, lw.const(0, v.type)))
            then: list[Any] = [GlobalVectorLoad(fresh, st.array, st.index)]
            then += [Assign(v, f) for v, f in zip(st.vars, fresh, strict=True)]
            body.emit(If(loaded_if, then))
            continue
        body.emit(st)


def lanes_of(r: Expr) -> list[Expr]:
    """Row elements r, r + 1, r + 2, r + 3: one vector's lanes."""
    return [r] + [ibin("+", r, u32(k)) for k in range(1, LANES)]


def register_slots(
    c: KernelContext, base: Expr, length: Size, rows: tuple[Size, ...], width: int
) -> tuple[list[Expr], Walk]:
    """The row elements a thread keeps in registers (a literal `length`, a multiple of
    `width`), and how a pass visits them: `over(visit)`.

    When the row can go 4 wide (`row_vectors`, and a whole number of vectors per
    thread), thread t holds 4t .. 4t+3, 4t + 4*width .. and a pass's accesses to each
    vector are one 128-bit access (`row_vector` with `keep`); else it holds
    t, t + width, ... one element at a time."""
    body = c.body
    vectors = register_vectors(c, base, length, rows, width)
    if vectors is None:
        lid = Builtin("local_x")
        slots = [body.let(ibin("+", lid, u32(k * width)), "j") for k in range(length // width)]

        def over(visit: Visit) -> None:
            for j in slots:
                visit(j)

        return slots, over

    return [j for r, _ in vectors.each for j in lanes_of(r)], vectors.read_all


class RegisterVectors:
    """A row held in registers 4 wide: thread t's vector k starts at 4t + 4k*width, its
    accesses one 128-bit access each (`row_vector` with `keep`, so what a pass computes
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

    def read(self, r: Expr, inside: Expr | None, f: Visit) -> None:
        """`f` on vector r's lanes, its loads run only `inside` the row."""
        row_vector(self.c, self.base, r, f, self.families, self.proof, True, loaded_if=inside)

    def read_all(self, visit: Visit) -> None:
        for r, inside in self.each:
            self.read(r, inside, visit)

    def fold_all(self, visit: Callable[[Expr, Expr | None], None]) -> None:
        """`visit(j, inside)` on every lane (a fold leaves out the lanes past the row)."""
        for r, inside in self.each:
            self.read(r, inside, lambda j, inside=inside: visit(j, inside))

    def write(self, r: Expr, inside: Expr | None, f: Visit) -> None:
        """`f` on vector r's lanes (a write), only for a vector `inside` the row."""
        if inside is None:
            self.read(r, None, f)
            return
        body = self.c.body
        with body.block() as guarded:
            self.read(r, None, f)
        body.emit(If(inside, guarded))

    def write_all(self, visit: Visit) -> None:
        for r, inside in self.each:
            self.write(r, inside, visit)


def register_vectors(
    c: KernelContext, base: Expr | None, length: Size, rows: tuple[Size, ...], width: int
) -> RegisterVectors | None:
    """A literal row of a whole number of vectors per thread, held in registers 4 wide,
    where `row_elements` would go 4 wide without a run-time test; else None."""
    if not isinstance(length, int) or length % (LANES * width):
        return None
    plan = row_vectors(c, base, length, rows)
    if plan is None or plan[1] is None:
        return None
    assert base is not None
    return RegisterVectors(c, base, width, length // (LANES * width), (plan[0], plan[1]))


def offset(body: Body, base: Expr, r: Expr) -> Expr:
    """`base + r` for an element of a row at offset `base`; for r = r0 + k (an unrolled
    `strided` loop's later elements), `(base + r0) + k`, with `base + r0` computed once."""
    first, k = (
        (r.a, r.b)
        if isinstance(r, Binary) and r.op == "+" and isinstance(r.b, Const)
        else (r, None)
    )
    at = body.memo(("offset", base, first), lambda: ibin("+", base, first), "i")
    return at if k is None else ibin("+", at, k)


# vectors per thread of a symbolic row held in registers (`row`, `softmax`): 8 elements,
# 1024 for a workgroup of 128, as Triton's 1024 block of 4 warps
HELD = 2

# Row elements one thread keeps in registers when a `row` or `softmax` launch reads its row
# once (a literal row, a multiple of the workgroup's width)
ROW_REGISTERS = 16


def if_held(
    c: KernelContext, length: Size, width: int, held: Any, other: Any, count: int = HELD
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
