"""The kernel IR: one small structured language every backend prints.

A `Kernel` is one compute entry point: its workgroup size, its dispatch size
(dim expressions, for the manifest), the buffers and uniform fields it binds,
its threadgroup (shared) arrays and a body of statements. Expressions are
frozen dataclasses, so they hash and compare structurally (the scheduler uses
them as keys for common-subexpression reuse).

Scalar types are `bool`, `i32`, `u32`, `f32`, `f16`. Semantics a backend must
preserve when it prints:
- `Binary` `+ - *` on `i32` and `u32` wrap modulo 2**32 (two's complement);
- `Binary` `/` and `%` on integers truncate (C, WGSL); the scheduler only emits
  them with a non-zero divisor and never `INT_MIN / -1` (Python's floor
  semantics are built from them in `mimir.codegen.lower`);
- `Cast` between `i32` and `u32` reinterprets the bits; other casts convert
  values and are only emitted where the value is in range (saturating float to
  integer casts are built in `lower`);
- `Call` names an intrinsic from `INTRINSICS` or a `Helper` function; `mulhi` of two
  `u32` is the high 32 bits of their 64-bit product.

Names in the IR are logical: user names are Python identifiers, internal names
start with `$`. Backends map every name through one `Namer` per file, which
removes reserved words and collisions.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

SCALAR_TYPES = ("bool", "i32", "u32", "f32", "f16")

# Intrinsic functions a backend prints from its own table (by IR name).
INTRINSICS = (
    "exp", "log", "sqrt", "tanh", "sin", "cos",
    "floor", "abs", "pow", "isnan", "isinf", "min", "max", "fma", "mulhi",
)  # fmt: skip

BINARY_OPS = (
    "+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>",
    "<", "<=", ">", ">=", "==", "!=", "&&", "||",
)  # fmt: skip
COMPARISONS = ("<", "<=", ">", ">=", "==", "!=")
UNARY_OPS = ("-", "!", "~")


class Expr:
    """Base of IR expressions; every expression has a scalar `type`."""

    type: str


@dataclass(frozen=True)
class Const(Expr):
    value: Any  # bool, int or float (float('inf') and nan allowed)
    type: str


@dataclass(frozen=True)
class Var(Expr):
    name: str
    type: str


@dataclass(frozen=True)
class Load(Expr):
    """`array[index]`: a buffer or a shared array, by logical name."""

    array: str
    index: Expr
    type: str


@dataclass(frozen=True)
class Uniform(Expr):
    """A field of the uniform block (runtime dim values, scalar parameters)."""

    field: str
    type: str


@dataclass(frozen=True)
class Builtin(Expr):
    """`local_x`, `local_y`, `group_x`, `group_y`, `groups_x`: thread and group ids (u32)."""

    name: str
    type: str = "u32"


@dataclass(frozen=True)
class Binary(Expr):
    op: str
    a: Expr
    b: Expr
    type: str


@dataclass(frozen=True)
class Unary(Expr):
    op: str
    a: Expr
    type: str


@dataclass(frozen=True)
class Call(Expr):
    fn: str
    args: tuple[Expr, ...]
    type: str


@dataclass(frozen=True)
class Select(Expr):
    cond: Expr
    if_true: Expr
    if_false: Expr
    type: str


@dataclass(frozen=True)
class Cast(Expr):
    a: Expr
    type: str


@dataclass(frozen=True)
class Bitcast(Expr):
    a: Expr
    type: str


WARP = 32  # lanes of a warp (PTX) or a simdgroup (MSL) that `WarpReduce` combines
WARP_OPS = ("add", "max", "min", "fmax")


@dataclass(frozen=True)
class WarpReduce(Expr):
    """`op` of `value` over the `lanes` consecutive threads (by `local_x`; `lanes` a power
    of two, at most 32, the groups aligned to it) of this thread's warp, the same result in
    each of them: warp shuffles (PTX), simdgroup functions (MSL), or workgroup memory where
    the target has neither (`mimir.codegen.kernels.warp`).

    `op` is `add` (integers wrap; floats summed in an unspecified order), `max` or `min`
    (for `f32` nan-propagating, as `maximum`/`minimum`; which zero of +0 and -0 is
    unspecified), or `fmax`, an `f32` max for a reader to which a nan does not matter
    (a softmax's, whose sum a nan makes nan anyway): the max of the lanes' numbers, any
    value when one is nan, with no instructions spent passing the nan on; `type` is `i32`,
    `u32` or `f32`. Like `Barrier` it is only emitted in
    uniform control flow of a 1-D workgroup whose size is a multiple of 32, and only as the
    value of a `Let`: every thread of the warp evaluates it together.
    """

    op: str
    value: Expr
    type: str
    lanes: int = WARP


# ---------------------------------------------------------------- statements


class Stmt:
    """Base of IR statements."""


@dataclass
class Let(Stmt):
    var: Var
    value: Expr


@dataclass
class VarDecl(Stmt):
    """A mutable local, initialised."""

    var: Var
    init: Expr


@dataclass
class Assign(Stmt):
    var: Var
    value: Expr


@dataclass
class Store(Stmt):
    array: str
    index: Expr
    value: Expr


# Vector accesses: the lanes of one vector as one access, to a global buffer
# (`GlobalVectorLoad`, `GlobalVectorStore`) or to a workgroup array (`SharedVectorLoad`).


@dataclass
class GlobalVectorLoad(Stmt):
    """`vars[k] = array[index + k]` for every lane k, as one aligned vector access to a
    global buffer (`SharedVectorLoad` is its threadgroup-memory counterpart).

    The scheduler emits it only where it has proven the access sound: `index` is a
    multiple of the width (so, with buffer bases 16-byte aligned, the address is aligned
    to the access), the buffer holds every lane's element, and the element type is
    32-bit. A backend that has no vector access prints one scalar load per lane.
    """

    vars: tuple[Var, ...]
    array: str
    index: Expr


@dataclass
class GlobalVectorStore(Stmt):
    """`array[index + k] = values[k]` for every lane k, as one aligned vector access
    (the same proof as `GlobalVectorLoad`)."""

    array: str
    index: Expr
    values: tuple[Expr, ...]


@dataclass
class SharedVectorLoad(Stmt):
    """`vars[j] = array[index + j]` for every j, from a shared array, as one access (the
    global-buffer counterpart is `GlobalVectorLoad`).

    `index` is a multiple of `len(vars)` (2 or 4) and the array is declared with that
    alignment, so a backend may print one vector load (`ld.shared.v4`, MSL `float4`);
    one that does not prints the scalar loads (`lower_vectors`).
    """

    vars: tuple[Var, ...]
    array: str
    index: Expr


@dataclass
class AtomicAdd(Stmt):
    """`array[index] += value` as one atomic read-modify-write (relaxed, device scope).

    `value` has the buffer's element type, `i32`, `u32` or `f32`; the buffer is then a
    `BufferParam` with `atomic=True`, and nothing else in the kernel reads or writes it.
    With `old` (a `u32` buffer only), the value the element held before the add is
    bound to that variable (PTX `atom`, MSL `atomic_fetch_add_explicit`, WGSL
    `atomicAdd`'s result; a one-launch reduction's ticket); without it nothing is
    returned (PTX `red`).
    """

    array: str
    index: Expr
    value: Expr
    old: Var | None = None


@dataclass
class Fence(Stmt):
    """A device-scope acquire-release fence over buffer memory (PTX `fence.acq_rel.gpu`,
    MSL 3.2 `atomic_thread_fence` at `thread_scope_device`, SPIR-V `OpMemoryBarrier` at
    Device scope). With a relaxed `AtomicAdd`
    after it in one thread and before it in another that reads the value the first
    wrote, the first thread's earlier stores are visible to the second's later loads
    (fence-fence synchronisation). Only for a backend with `device_fence`; WGSL has no
    such fence and hands off through `Publish` / `Await` instead."""


@dataclass
class Publish(Stmt):
    """`array[index] = value` for another workgroup of the same launch to `Await`, where
    the backend has no device-scope fence (WGSL's memory model: relaxed atomics and
    workgroup-scope barriers only). `value` is 32 bits (`f32`, `i32` or `u32`); its low
    and high 16 bits go to words 2 * index and 2 * index + 1 of a `u32` buffer with
    `atomic=True`, each with bit 16 set, by relaxed atomic stores.

    Every word is 0 until this launch publishes it: the buffer is zeroed at creation
    and each launch `Retract`s what it published. Atomics at one location are coherent
    whatever the order between locations, so a word that carries its tag holds this
    launch's value: no fence is needed to know the value has arrived."""

    array: str
    index: Expr
    value: Expr


@dataclass
class Await(Stmt):
    """Bind `var` (`f32`, `i32` or `u32`) to the value `Publish`ed at `index`: relaxed
    atomic loads of both words, again until both carry their tag. Only for a value whose
    publisher has already taken its ticket from the launch's counter
    (`kernels.handoff.last_workgroup`), so the wait ends."""

    var: Var
    array: str
    index: Expr


@dataclass
class Retract(Stmt):
    """Both words of element `index` back to 0 (relaxed atomic stores), after a barrier
    that follows every `Await` of them: ready for the next launch's `Publish`."""

    array: str
    index: Expr


@dataclass
class If(Stmt):
    cond: Expr
    then: list[Stmt]
    orelse: list[Stmt] = field(default_factory=list)


@dataclass
class For(Stmt):
    """`for (var = start; var < end; var += step)`, all u32. `unroll` False: the body
    already holds several iterations' work, or the loop runs only a few times
    (`kernels.loops.strided`), so a backend that would unroll it (ptxas) is asked not to."""

    var: Var
    start: Expr
    end: Expr
    step: Expr
    body: list[Stmt]
    unroll: bool = True


@dataclass
class Barrier(Stmt):
    """A workgroup barrier over threadgroup memory; only in uniform control flow. With
    `device`, it orders buffer memory between the workgroup's threads too (MSL
    `mem_device`): where one thread's device-scope fence must reach the others in a
    one-launch reduction's handoff."""

    device: bool = False


@dataclass
class Return(Stmt):
    value: Expr | None = None


@dataclass
class CopyAsync(Stmt):
    """`array[index] = cond ? value : 0` into a shared array, where `value` is a `Load` of a
    buffer of the same element type, completed at the next `WaitAsync` (which is before the
    next `Barrier`: no thread may read `array[index]` before then). PTX prints `cp.async`
    (sm_80); every other backend prints the guarded store (`lower_vectors`)."""

    array: str
    index: Expr
    value: Load
    cond: Expr | None = None
    # a u32 word of a shared array from two 16-bit elements: `value` a `Load` of an f16
    # buffer at an even element index, that element (low half) and the next (PTX only)
    pair: bool = False
    # consecutive u32 words copied from `index` on: 4 is one 16-byte `cp.async` on PTX,
    # both addresses 16-byte aligned (`value` an f16 index a multiple of 8 with `pair`, or
    # a u32 one of 4); `lower_vectors` makes it a store per word
    words: int = 1


@dataclass
class LoadMatrix(Stmt):
    """`ldmatrix.sync.aligned.m8n8.x{len(vars)}[.trans].shared.b16` (sm_75), warp-collective:
    `vars` (u32, 1, 2 or 4) receive 8 x 8 matrices of 16-bit elements from the u32 shared
    array `array`; lane `l` gives the address of row `l % 8` of matrix `l / 8` as the word
    `index` (16 bytes, 4-word aligned: 8 elements of the row). Lane `l` receives in
    `vars[j]` the pair at row `l / 4`, columns `2 (l % 4)`, `+ 1` of matrix j (low half
    first), or with `trans` the elements at rows `2 (l % 4)`, `+ 1` of column `l / 4`.
    Only the PTX backend prints it (`mimir.codegen.kernels.matmul`)."""

    vars: tuple[Var, ...]
    array: str
    index: Expr
    trans: bool = False


@dataclass
class PackHalves(Stmt):
    """`var` (u32) = `low` and `high` (f32 values, "f16" or "bf16") rounded to `kind` to
    nearest even and packed, `low` in bits 0-15 (PTX `cvt.rn.f16x2.f32` / `.bf16x2`; exact
    for values already in `kind`). PTX only, as `LoadMatrix`."""

    var: Var
    low: Expr
    high: Expr
    kind: str


@dataclass
class WaitAsync(Stmt):
    """Wait until this thread's `CopyAsync`s have landed (`cp.async.wait_all`)."""


MMA_SHAPE = (16, 8, 8)  # m, n, k of one TF32 `MmaSync`


MMA_HALF_SHAPE = (16, 8, 16)  # m, n, k of one float16 or bfloat16 `MmaSync`


@dataclass
class MmaSync(Stmt):
    """One warp's tensor-core multiply-add, `D = A B + C` with `C` and `D` both `acc` (f32
    accumulators): every lane of the warp executes it together (like `Barrier`, only in
    uniform control flow of a workgroup whose size is a multiple of 32), each holding the
    fragments the PTX ISA lays out. With `g = lane / 4` and `q = lane % 4`:

    `kind` "tf32", 16x8x8, `mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32`:

    - `a` (f32, each rounded to TF32 first, `cvt.rna.tf32.f32`): A[g][q], A[g + 8][q],
      A[g][q + 4], A[g + 8][q + 4];
    - `b` (f32, rounded the same way): B[q][g], B[q + 4][g];

    `kind` "f16" or "bf16", 16x8x16, `mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`
    (`.bf16.bf16`): values already exact in that type, carried as f32 and packed two to a
    `.b32` register (`cvt.rn.f16x2.f32`, `cvt.rn.bf16x2.f32`, exact), a0..a7 then b0..b3:

    - `a`: A[g][2q], A[g][2q + 1], A[g + 8][2q], A[g + 8][2q + 1], and the same at k + 8;
    - `b`: B[2q][g], B[2q + 1][g], B[2q + 8][g], B[2q + 9][g];

    or already packed: 4 `a` and 2 `b` u32 values holding those pairs (the first of each
    in the low half), as `LoadMatrix` reads them from shared tiles of halves;

    and for every kind `acc` (f32 variables, updated): D[g][2q], D[g][2q + 1], D[g + 8][2q],
    D[g + 8][2q + 1].

    Only the PTX backend prints it (`mimir.codegen.kernels.matmul`); the products are exact
    and the sum rounded to f32 (how the hardware orders and rounds the additions inside one
    instruction is its own)."""

    acc: tuple[Var, ...]
    a: tuple[Expr, ...]
    b: tuple[Expr, ...]
    kind: str = "tf32"


WGMMA_M, WGMMA_K = 64, 16  # rows and depth of one `WarpgroupMma` (its N is 8 .. 256)


@dataclass
class WarpgroupMma(Stmt):
    """One warpgroup's tensor-core multiply-add from shared memory, `D = A B + D` with `D`
    the f32 accumulators `acc` (sm_90a: `wgmma.mma_async.sync.aligned.m64nNk16.f32.f16.f16`,
    `.bf16.bf16`, N = 2 len(acc)). The 128 threads of a warpgroup (4 consecutive warps of
    the workgroup, its first warp's id a multiple of 4) execute it together, in uniform
    control flow, as `MmaSync`'s warp does, and it is complete when the statement is.

    A (64 x 16) and B (16 x N) are 16-bit values of `kind` ("f16" or "bf16") in the u32
    shared arrays `a_array` and `b_array` from the words `a_index` and `b_index` (16-byte
    aligned), in 8 x 16-byte core matrices without swizzle: A K-major (a core matrix is 8
    rows by 8 k, each row's 8 halves contiguous), B MN-major (8 k by 8 n, each k's 8 halves
    contiguous); `a_offsets` and `b_offsets` are each operand's (leading, stride) byte
    offsets: between core matrices adjacent in k, and adjacent in M or N.

    Thread `32 w + l` of the warpgroup (`g = l / 4`, `q = l % 4`) holds in `acc[4 j + 2 h +
    e]` D's row `16 w + g + 8 h`, column `8 j + 2 q + e`.

    Shared memory written by the threads (`Store`, `CopyAsync`) reaches it only after an
    `AsyncProxyFence` by the writers and a `Barrier`. Only the PTX backend prints it."""

    acc: tuple[Var, ...]
    a_array: str
    a_index: Expr
    b_array: str
    b_index: Expr
    kind: str
    a_offsets: tuple[int, int]
    b_offsets: tuple[int, int]


@dataclass
class AsyncProxyFence(Stmt):
    """This thread's earlier writes to shared memory made visible to `WarpgroupMma`'s reads
    (PTX `fence.proxy.async.shared::cta`: the tensor cores read through the async proxy)."""


SIMDGROUP_MATRIX = "m8x8"  # the type of an 8 x 8 f32 simdgroup matrix (MSL)


@dataclass
class SimdgroupLoad(Stmt):
    """`var` (an 8 x 8 f32 simdgroup matrix, type `SIMDGROUP_MATRIX`) = the matrix whose
    row r, column c is the shared array's `array[index + r * stride + c]`, or with
    `transpose` `array[index + c * stride + r]`: MSL's `simdgroup_load`, which every thread
    of the simdgroup executes together (uniform control flow, like `Barrier`). Which thread
    holds which elements is the device's own; only `SimdgroupStore` reads them back.
    Only the MSL backend prints it (`mimir.codegen.kernels.matmul`)."""

    var: Var
    array: str
    index: Expr
    stride: int
    transpose: bool = False


@dataclass
class SimdgroupMultiplyAccumulate(Stmt):
    """`acc = a b + acc` on 8 x 8 f32 simdgroup matrices (MSL's
    `simdgroup_multiply_accumulate`), simdgroup-collective as `SimdgroupLoad`; how the
    device orders and rounds the 8 products of an element is its own."""

    acc: Var
    a: Var
    b: Var


@dataclass
class SimdgroupStore(Stmt):
    """The simdgroup matrix `var` written to the shared array: row r, column c at
    `array[index + r * stride + c]` (MSL's `simdgroup_store`), simdgroup-collective. Another
    thread of the simdgroup reads an element only after a `SimdgroupBarrier`."""

    var: Var
    array: str
    index: Expr
    stride: int


@dataclass
class SimdgroupBarrier(Stmt):
    """Every thread of the simdgroup waits here, and its threadgroup-memory writes before
    are seen by the others after (`simdgroup_barrier(mem_flags::mem_threadgroup)`)."""


# ---------------------------------------------------------------- functions and kernels


@dataclass(frozen=True)
class Helper:
    """A small function the lowering table defines once, in IR, for every backend."""

    name: str
    params: tuple[Var, ...]
    ret: str
    body: tuple[Stmt, ...]
    uses: tuple[str, ...] = ()  # helpers this one calls


@dataclass
class BufferParam:
    name: str  # logical name (the manifest's buffer name)
    elem: str  # storage scalar type (bool is stored as u32)
    access: str  # "read" | "read_write"
    # only ever accessed through `AtomicAdd`, or `Publish` / `Await` / `Retract` (WGSL:
    # `array<atomic<T>>`)
    atomic: bool = False


@dataclass
class SharedArray:
    name: str
    elem: str
    count: int
    # written by one thread before a barrier and read by every thread after it, the value
    # then steering control flow around barriers (a one-launch reduction's ticket): WGSL
    # reads it with `workgroupUniformLoad`, so its uniformity analysis knows it uniform
    broadcast: bool = False


@dataclass
class Kernel:
    name: str  # logical entry-point name
    what: str  # a word for the file name: ew, matmul, reduce, softmax, ...
    workgroup_size: tuple[int, int, int]
    workgroups: tuple[Any, Any, Any]  # dim expressions (mimir.dims sizes or CDiv)
    buffers: list[BufferParam]
    uniform_fields: list[tuple[str, str]]  # (logical name, type), the whole block
    uses_uniform: bool
    shared: list[SharedArray]
    body: list[Stmt]
    helpers: list[Helper]  # in dependency order (callees first)
    # intrinsic or helper name -> (the op that needed it, its source span), for refusals
    origins: dict[str, tuple[str, Any]] = field(default_factory=dict)
    # (the guard not emitted, the proof that made it unnecessary), for the manifest
    proofs: list[tuple[str, str]] = field(default_factory=list)
    # (buffer, "read" | "write", lanes, proof) of each vector access, for the manifest
    vectorized: list[tuple[str, str, int, str]] = field(default_factory=list)
    # the linear count of workgroups the body expects (`workgroups` folds it into x and
    # y, past it the body returns), where known: what `side_by_side` lays end to end
    groups: Any = None
    # (the work not done, the proof the result does not need it), for the manifest
    skipped: list[tuple[str, str]] = field(default_factory=list)

    @property
    def shared_bytes(self) -> int:
        """Threadgroup memory in bytes at 4 an element, at least what any backend
        declares (PTX sizes each array by its element type, `ptx.tables.ELEMENT_BYTES`)."""
        return sum(a.count * 4 for a in self.shared)


# ---------------------------------------------------------------- walking


def sub_expressions(e: Expr) -> tuple[Expr, ...]:
    if isinstance(e, Load):
        return (e.index,)
    if isinstance(e, Binary):
        return (e.a, e.b)
    if isinstance(e, (Unary, Cast, Bitcast)):
        return (e.a,)
    if isinstance(e, WarpReduce):
        return (e.value,)
    if isinstance(e, Call):
        return e.args
    if isinstance(e, Select):
        return (e.cond, e.if_true, e.if_false)
    return ()


def walk_expr(e: Expr):
    """`e` and every expression inside it, in pre-order.

    Iterative: a recursive generator passes each item up through one frame per
    level, quadratic in the depth of a long chain `a + b + c + ...`.
    """
    stack = [e]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(sub_expressions(node)))


def map_expr(e: Expr, f: Any) -> Expr:
    """`e` with every sub-expression `x` for which `f(x)` is not None replaced by it
    (outermost first; a replacement is not looked into)."""
    new = f(e)
    if new is not None:
        return new
    if isinstance(e, Load):
        index = map_expr(e.index, f)
        return e if index is e.index else Load(e.array, index, e.type)
    if isinstance(e, Binary):
        return Binary(e.op, map_expr(e.a, f), map_expr(e.b, f), e.type)
    if isinstance(e, (Unary, Cast, Bitcast)):
        a = map_expr(e.a, f)
        if a is e.a:
            return e
        return Unary(e.op, a, e.type) if isinstance(e, Unary) else type(e)(a, e.type)
    if isinstance(e, Call):
        return Call(e.fn, tuple(map_expr(a, f) for a in e.args), e.type)
    if isinstance(e, Select):
        return Select(map_expr(e.cond, f), map_expr(e.if_true, f), map_expr(e.if_false, f), e.type)
    return e


def statement_expressions(s: Stmt) -> list[Expr]:
    if isinstance(s, (Let, Assign)):
        return [s.value]
    if isinstance(s, VarDecl):
        return [s.init]
    if isinstance(s, (Store, AtomicAdd, Publish)):
        return [s.index, s.value]
    if isinstance(s, (Await, Retract)):
        return [s.index]
    if isinstance(s, GlobalVectorLoad):
        return [s.index]
    if isinstance(s, GlobalVectorStore):
        return [s.index, *s.values]
    if isinstance(s, If):
        return [s.cond]
    if isinstance(s, For):
        return [s.start, s.end, s.step]
    if isinstance(s, Return):
        return [] if s.value is None else [s.value]
    if isinstance(s, SharedVectorLoad):
        return [s.index]
    if isinstance(s, CopyAsync):
        return [s.index, s.value] + ([] if s.cond is None else [s.cond])
    if isinstance(s, LoadMatrix):
        return [s.index]
    if isinstance(s, PackHalves):
        return [s.low, s.high]
    if isinstance(s, MmaSync):
        return [*s.acc, *s.a, *s.b]
    if isinstance(s, WarpgroupMma):
        return [*s.acc, s.a_index, s.b_index]
    if isinstance(s, SimdgroupLoad):
        return [s.var, s.index]
    if isinstance(s, SimdgroupMultiplyAccumulate):
        return [s.acc, s.a, s.b]
    if isinstance(s, SimdgroupStore):
        return [s.var, s.index]
    return []


def child_blocks(s: Stmt) -> list[list[Stmt]]:
    if isinstance(s, If):
        return [s.then, s.orelse]
    if isinstance(s, For):
        return [s.body]
    return []


def walk_statements(body: list[Stmt] | tuple[Stmt, ...]):
    for s in body:
        yield s
        for block in child_blocks(s):
            yield from walk_statements(block)


def all_expressions(body: list[Stmt] | tuple[Stmt, ...]):
    for s in walk_statements(body):
        for e in statement_expressions(s):
            yield from walk_expr(e)


def drop_unread_lets(body: list[Stmt]) -> list[Stmt]:
    """`body` without the `let`s nobody reads (an unravelled axis that no operand needed; a
    load whose value an element-wise chain does not use), dropped until none is left; the
    blocks of `If`s and `For`s are changed in place."""

    def keep(block: list[Stmt], used: set[str]) -> list[Stmt]:
        out = []
        for st in block:
            if isinstance(st, Let) and st.var.name not in used:
                continue
            if isinstance(st, If):
                st.then, st.orelse = keep(st.then, used), keep(st.orelse, used)
            elif isinstance(st, For):
                st.body = keep(st.body, used)
            out.append(st)
        return out

    while True:
        used = {e.name for e in all_expressions(body) if isinstance(e, Var)}
        before = sum(1 for _ in walk_statements(body))
        body = keep(body, used)
        if sum(1 for _ in walk_statements(body)) == before:
            return body


# ---------------------------------------------------------------- canonical form
#
# Constant folding and literal typing live here, once, so that every printer gets
# the same valid input (a printer never has to know that `-1u` is not WGSL).
# After `legalise`:
# - every integer literal holds its type's canonical value: `u32` in [0, 2**32),
#   `i32` in [-2**31, 2**31), `bool` a Python bool;
# - integer `+ - *`, `/` and `%` (non-zero divisor, truncating), bitwise ops,
#   comparisons, negation and integer casts of literals are folded, wrapping as
#   the IR's semantics say (module docstring);
# - `a + c` with a "negative" literal is `a - |c|` and `a - c` is `a + |c|`
#   (for `u32`, a literal above 2**31 is the wrapped form of a negative one);
# - `a + 0`, `a - 0`, `a * 1`, `a / 1` and integer `a * 0`, `a % 1` are
#   simplified; a `Select` on a literal condition is the chosen operand.
# Floating-point expressions are never folded: the host's double arithmetic is
# not the kernel's f32/f16 arithmetic.

INT_TYPES = ("i32", "u32")


def canonical_int(value: int, t: str) -> int:
    """An integer literal's value as type `t` holds it (two's complement wrap)."""
    v = int(value) & 0xFFFFFFFF
    if t == "i32" and v >= 2**31:
        v -= 2**32
    return v


def _negative(c: Const) -> int | None:
    """|c| when the literal is a negative number of its type (u32: above 2**31), else None."""
    if c.type == "i32" and c.value < 0 and c.value != -(2**31):
        return -c.value
    if c.type == "u32" and c.value > 2**31:
        return 2**32 - c.value
    return None


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _fold_ints(op: str, a: int, b: int, t: str) -> Any:
    """`a op b` on literals of integer type `t`, or None where the IR leaves it unfolded."""
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op in ("/", "%"):
        if b == 0 or (t == "i32" and a == -(2**31) and b == -1):
            return None
        q = _trunc_div(a, b)
        return q if op == "/" else a - q * b
    if op == "&":
        return a & b
    if op == "|":
        return a | b
    if op == "^":
        return a ^ b
    if op in COMPARISONS:
        return {
            "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b,
        }[op]  # fmt: skip
    return None  # shifts: backends differ on amounts >= 32; left as written


def fold(e: Expr) -> Expr:
    """`e` in canonical form (see above); structurally equal inputs give equal outputs."""
    if isinstance(e, Const):
        if e.type in INT_TYPES:
            v = canonical_int(e.value, e.type)
            return e if v == e.value and type(e.value) is int else Const(v, e.type)
        if e.type == "bool" and type(e.value) is not bool:
            return Const(bool(e.value), "bool")
        return e
    if isinstance(e, Load):
        index = fold(e.index)
        return e if index is e.index else Load(e.array, index, e.type)
    if isinstance(e, Call):
        args = tuple(fold(a) for a in e.args)
        return e if args == e.args else Call(e.fn, args, e.type)
    if isinstance(e, Select):
        cond, a, b = fold(e.cond), fold(e.if_true), fold(e.if_false)
        if isinstance(cond, Const):
            return a if cond.value else b
        return Select(cond, a, b, e.type)
    if isinstance(e, (Cast, Bitcast)):
        a = fold(e.a)
        if isinstance(a, Const) and a.type in INT_TYPES and e.type in INT_TYPES:
            return Const(canonical_int(a.value, e.type), e.type)  # reinterprets the bits
        if isinstance(a, Const) and a.type == e.type:
            return a
        if (
            isinstance(e, Cast)
            and isinstance(a, Const)
            and a.type in INT_TYPES
            and e.type == "f32"
            and abs(canonical_int(a.value, a.type)) <= 2**24
        ):
            return Const(float(canonical_int(a.value, a.type)), "f32")  # exact in float32
        return type(e)(a, e.type)
    if isinstance(e, Unary):
        a = fold(e.a)
        if isinstance(a, Const) and a.type in INT_TYPES and e.op in ("-", "~"):
            v = -a.value if e.op == "-" else ~a.value
            return Const(canonical_int(v, e.type), e.type)
        if isinstance(a, Const) and a.type == "bool" and e.op == "!":
            return Const(not a.value, "bool")
        return Unary(e.op, a, e.type)
    if isinstance(e, Binary):
        return _fold_binary(e.op, fold(e.a), fold(e.b), e.type)
    if isinstance(e, WarpReduce):
        value = fold(e.value)
        return e if value is e.value else WarpReduce(e.op, value, e.type, e.lanes)
    return e


def _fold_binary(op: str, a: Expr, b: Expr, t: str) -> Expr:
    ca = a if isinstance(a, Const) else None
    cb = b if isinstance(b, Const) else None
    integer = a.type in INT_TYPES
    if integer and ca is not None and cb is not None:
        value = _fold_ints(op, ca.value, cb.value, a.type)
        if value is not None:
            return Const(value, "bool") if t == "bool" else Const(canonical_int(value, t), t)
    if a.type == "bool" and op in ("&&", "||") and (ca is not None or cb is not None):
        known, other = (ca, b) if ca is not None else (cb, a)
        absorbing = op == "||"  # true || x is true; false && x is false
        return known if known.value == absorbing else other
    if integer and op in ("+", "-") and cb is not None:
        magnitude = _negative(cb)
        if magnitude is not None:  # `a + -c` is `a - c`; `a - -c` is `a + c`
            return _fold_binary("-" if op == "+" else "+", a, Const(magnitude, cb.type), t)
    if integer and op == "+" and ca is not None and cb is None:
        return _fold_binary("+", b, a, t)  # the literal goes right, where `-` can take it
    if op in ("+", "-") and integer and cb is not None and cb.value == 0:
        return a
    if op == "+" and integer and ca is not None and ca.value == 0:
        return b
    if op == "*" and integer:
        if (ca is not None and ca.value == 0) or (cb is not None and cb.value == 0):
            return Const(0, t)
        if ca is not None and ca.value == 1:
            return b
        if cb is not None and cb.value == 1:
            return a
    if op == "/" and integer and cb is not None and cb.value == 1:
        return a
    if op == "%" and integer and cb is not None and cb.value == 1:
        return Const(0, t)
    return Binary(op, a, b, t)


def map_statement(s: Stmt, f: Any) -> Stmt:
    """`s` with `f` applied to each of its expressions (and those of its blocks)."""
    if isinstance(s, Let):
        return Let(s.var, f(s.value))
    if isinstance(s, VarDecl):
        return VarDecl(s.var, f(s.init))
    if isinstance(s, Assign):
        return Assign(s.var, f(s.value))
    if isinstance(s, Store):
        return Store(s.array, f(s.index), f(s.value))
    if isinstance(s, AtomicAdd):
        return AtomicAdd(s.array, f(s.index), f(s.value), s.old)
    if isinstance(s, Publish):
        return Publish(s.array, f(s.index), f(s.value))
    if isinstance(s, Await):
        return Await(s.var, s.array, f(s.index))
    if isinstance(s, Retract):
        return Retract(s.array, f(s.index))
    if isinstance(s, GlobalVectorLoad):
        return GlobalVectorLoad(s.vars, s.array, f(s.index))
    if isinstance(s, GlobalVectorStore):
        return GlobalVectorStore(s.array, f(s.index), tuple(f(v) for v in s.values))
    if isinstance(s, If):
        return If(f(s.cond), map_block(s.then, f), map_block(s.orelse, f))
    if isinstance(s, For):
        return replace(s, start=f(s.start), end=f(s.end), step=f(s.step), body=map_block(s.body, f))
    if isinstance(s, Return):
        return Return(None if s.value is None else f(s.value))
    if isinstance(s, SharedVectorLoad):
        return SharedVectorLoad(s.vars, s.array, f(s.index))
    if isinstance(s, CopyAsync):
        value = f(s.value)
        assert isinstance(value, Load)
        cond = None if s.cond is None else f(s.cond)
        return CopyAsync(s.array, f(s.index), value, cond, s.pair, s.words)
    if isinstance(s, LoadMatrix):
        return LoadMatrix(s.vars, s.array, f(s.index), s.trans)
    if isinstance(s, PackHalves):
        return PackHalves(s.var, f(s.low), f(s.high), s.kind)
    if isinstance(s, MmaSync):
        return MmaSync(s.acc, tuple(f(a) for a in s.a), tuple(f(b) for b in s.b), s.kind)
    if isinstance(s, WarpgroupMma):
        return replace(s, a_index=f(s.a_index), b_index=f(s.b_index))
    if isinstance(s, (SimdgroupLoad, SimdgroupStore)):
        return replace(s, index=f(s.index))
    return s


def map_block(body: list[Stmt] | tuple[Stmt, ...], f: Any) -> list[Stmt]:
    return [map_statement(s, f) for s in body]


def fold_block(body: list[Stmt] | tuple[Stmt, ...]) -> list[Stmt]:
    return map_block(body, fold)


def legalise(kernel: Kernel) -> Kernel:
    """The kernel with every expression in canonical form; what every backend prints."""
    helpers = [
        Helper(h.name, h.params, h.ret, tuple(fold_block(h.body)), h.uses) for h in kernel.helpers
    ]
    return Kernel(
        kernel.name,
        kernel.what,
        kernel.workgroup_size,
        kernel.workgroups,
        kernel.buffers,
        kernel.uniform_fields,
        kernel.uses_uniform,
        kernel.shared,
        fold_block(kernel.body),
        helpers,
        kernel.origins,
        kernel.proofs,
        kernel.vectorized,
        kernel.groups,
        kernel.skipped,
    )


def vector_only_buffers(kernel: Kernel) -> set[str]:
    """Buffers the kernel reads and writes only through `GlobalVectorLoad`/`GlobalVectorStore`: a
    target without a reinterpreting view (WGSL, SPIR-V) declares these as arrays of
    vectors (their element count is then a multiple of the width)."""
    vector: set[str] = set()
    scalar: set[str] = set()
    for s in walk_statements(kernel.body):
        if isinstance(s, (GlobalVectorLoad, GlobalVectorStore)):
            vector.add(s.array)
        if isinstance(s, (Store, AtomicAdd, Publish, Await, Retract)):
            scalar.add(s.array)
    for e in all_expressions(kernel.body):
        if isinstance(e, Load):
            scalar.add(e.array)
    return vector - scalar


def lower_vectors(body: list[Stmt], keep: tuple[type, ...] = ()) -> list[Stmt]:
    """`body` with `SharedVectorLoad`, `CopyAsync` and `WaitAsync` (but the kinds in `keep`) as the
    scalar statements they mean: one `let` per element, a guarded store, nothing."""
    out: list[Stmt] = []
    for s in body:
        if isinstance(s, keep):
            out.append(s)
        elif isinstance(s, SharedVectorLoad):
            out += [
                Let(v, Load(s.array, fold(Binary("+", s.index, Const(j, "u32"), "u32")), v.type))
                for j, v in enumerate(s.vars)
            ]
        elif isinstance(s, CopyAsync):
            for j in range(s.words):
                at = fold(Binary("+", s.index, Const(j, "u32"), "u32")) if j else s.index
                value = s.value
                if j:
                    index = fold(Binary("+", value.index, Const(j, "u32"), "u32"))
                    value = replace(value, index=index)
                store = Store(s.array, at, value)
                if s.cond is None:
                    out.append(store)
                else:
                    zero = Const(0.0 if value.type == "f32" else 0, value.type)
                    out.append(If(s.cond, [store], [Store(s.array, at, zero)]))
        elif isinstance(s, WaitAsync):
            continue
        elif isinstance(s, If):
            out.append(If(s.cond, lower_vectors(s.then, keep), lower_vectors(s.orelse, keep)))
        elif isinstance(s, For):
            out.append(replace(s, body=lower_vectors(s.body, keep)))
        else:
            out.append(s)
    return out


def literal_problems(kernel: Kernel) -> list[str]:
    """Integer literals that are not in canonical form (empty after `legalise`)."""
    out = []
    bodies = [kernel.body, *(h.body for h in kernel.helpers)]
    for body in bodies:
        for e in all_expressions(body):
            if isinstance(e, Const) and e.type in INT_TYPES:
                if canonical_int(e.value, e.type) != e.value:
                    out.append(f"{e.value} as {e.type}")
            if isinstance(e, Binary) and e.op in ("+", "-") and isinstance(e.b, Const):
                if e.b.type in INT_TYPES and _negative(e.b) is not None:
                    out.append(f"`{e.op}` of the negative literal {e.b.value} as {e.b.type}")
    return out
