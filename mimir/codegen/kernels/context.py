"""What every kernel builder shares: the body, the evaluator and dispatch.

A `KernelContext` is made per launch of a schedule. `write` evaluates the
launch's results at a position and stores them (with a root's value given, for
a fused epilogue); `groups` dispatches a 1-D count of workgroups folded into x
and y (`sizes.dispatch`) and returns the linear group id, with the groups past
the end returning at once (uniformly, so barriers stay in uniform control
flow). Workgroup reductions are `mimir.codegen.kernels.warp.group_total`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mimir.codegen import lower as lw
from mimir.codegen import sizes as sz
from mimir.codegen.builder import Body, Idx, group_id, over_dispatched, size_ir
from mimir.codegen.ir import Binary, Expr, Return, SharedArray, Store
from mimir.codegen.schedule.layout import WG
from mimir.codegen.schedule.plan import Elementwise, Plan, Rooted, Schedule
from mimir.codegen.tensors import Evaluator
from mimir.dims import Size
from mimir.dtypes import DType, bfloat16, float16, float32

# What a builder returns: its workgroup size and its dispatch (workgroups per axis, as sizes)
Built = tuple[tuple[int, int, int], tuple[Size, Size, Size]]
# What a walk over elements calls at each (its position r or j), and a walk itself
Visit = Callable[[Expr], None]
Walk = Callable[[Visit], None]


class KernelContext:
    """What one kernel's builder needs: the body, the evaluator and the schedule.

    `tensor_cores`: a PTX build, whose matmul launches multiply with `MmaSync` where
    `mma_kind` says (float16 and bfloat16 operands; float32 ones of an
    `@gpu(precision="tf32")` function), and whose attention launches over halves do too
    (`attention_mma.fits`). `simdgroup_matrices`: an MSL build, whose matmul launches
    accumulate in float32 on 8 x 8 simdgroup matrices (`matmul._SimdgroupWarp`).
    `warpgroups`: a PTX build for sm_90a, whose float16 and bfloat16 matmuls multiply with
    `WarpgroupMma` (`matmul._WarpgroupTile`) instead."""

    def __init__(
        self,
        s: Schedule,
        plan: Plan,
        tensor_cores: bool = False,
        simdgroup_matrices: bool = False,
        warpgroups: bool = False,
    ) -> None:
        self.s = s
        self.plan = plan
        self.tensor_cores = tensor_cores
        self.simdgroup_matrices = simdgroup_matrices
        self.warpgroups = warpgroups
        self.body = Body()
        # A parameter's value is always its buffer (`p = g` for an `InOut` p stores g's).
        written = (
            set()
            if isinstance(plan, Elementwise) and plan.copy
            else {n for n, _ in plan.computed() if s.kernel.graph.node(n)["kind"] != "param"}
        )
        readable = {n: b for n, b in s.node_buffers.items() if n not in written}
        self.ev = Evaluator(s.kernel, self.body, readable)
        # a bfloat16 value in a float32 buffer is read as float32 (`schedule.packing`)
        self.ev.wide = {b.name for b in s.buffers if b.dtype == float32}
        self.shared: list[SharedArray] = []
        self.dims = {d.name: d for d in s.dims}
        # guards not emitted because a size is proven a multiple of a tile: (guard, proof)
        self.proofs: list[tuple[str, str]] = []
        # vector accesses and their proof: (buffer, "read" | "write", lanes, proof)
        self.vectorized: list[tuple[str, str, int, str]] = []
        # work not done because the result is proven not to need it: (work, proof)
        self.skipped: list[tuple[str, str]] = []
        # a thread-per-row `row` launch's group id and its rows' share of its whole
        # reduction (`Row.total`, `whole.whole_of_rows`)
        self.row_share: tuple[Expr, Any] | None = None
        # the linear count of workgroups `groups` dispatched (None: a builder of its own)
        self.group_count: Any = None

    def restart(self) -> None:
        """Forget everything built so far: a builder that tried one layout and gave up
        (`vectorized.elementwise`) starts the next from an empty body."""
        self.__init__(  # type: ignore[misc]
            self.s, self.plan, self.tensor_cores, self.simdgroup_matrices, self.warpgroups
        )

    def multiple(self, size: Any, of: int, guard: str) -> bool:
        """Whether `size` is proven a multiple of `of`; if so, `guard` is recorded as
        removed, with the proof, for the manifest."""
        proof = sz.multiple_proof(size, of, self.dims)
        if proof is not None:
            self.proofs.append((guard, proof))
        return proof is not None

    def write(
        self,
        idx: Idx,
        root_value: Expr | None = None,
        outputs: list[tuple[int, list[str]]] | None = None,
        root: int | None = None,
    ) -> None:
        """Evaluate the plan's results (or `outputs`) at `idx` (the value of the plan's
        root, or of `root`, given) and store them."""
        if root is None and isinstance(self.plan, Rooted):
            root = self.plan.root
        if root_value is not None and root is not None:
            self.ev.overrides[root] = (idx.key, root_value)
        inout = {b.name for b in self.s.buffers if b.role == "inout"}
        outputs = self.plan.outputs() if outputs is None else outputs
        # a node stored through layout ops alone is the value before them (`Schedule.folded`)
        computed = [self.s.folded.get(n, n) for n, _ in outputs]
        flat = idx.flat(self.body) if any(n not in self.s.folded for n, _ in outputs) else None
        if any(set(bufs) & inout for _, bufs in outputs) and len(outputs) > 1:
            # An `InOut` buffer is stored here: every value is computed (its loads done)
            # before the first store, so no output reads an element this thread already wrote.
            values = [self.body.let(self.ev.at(n, self._position(idx, n)), "v") for n in computed]
        else:
            values = [None] * len(outputs)
        for (node, buffers), n, value in zip(outputs, computed, values, strict=True):
            if value is None:
                value = self.ev.at(n, self._position(idx, n))
            at = flat if node not in self.s.folded else self._folded_flat(idx, node, n)
            assert at is not None
            for name in buffers:
                self.body.emit(Store(name, at, lw.to_storage(value, self.ev.dtype(node))))

    def _folded_flat(self, idx: Idx, node: int, before: int) -> Expr:
        """The flat offset in `node` of the element `before` has at `idx`, where `node` is
        `before` through transposes and reshapes alone (`Schedule.folded`): a transpose's
        axis k is its operand's axis `perm[k]`, a reshape keeps the flat offset."""
        chain = []
        n = self.ev.resolve(node)
        while n != before:
            chain.append(n)
            n = self.ev.resolve(self.ev.node(n)["inputs"][0])
        pos = self._position(idx, before)
        for t in reversed(chain):
            shape = self.ev.shape(t)
            spec = self.ev.spec(t)
            if spec is not None and spec.kind == "transpose":
                axes = pos.axes(self.body)
                pos = Idx(shape, axes=[axes[p] for p in self.ev.permutation(t)])
            else:  # a reshape: the same flat offset
                pos = Idx(shape, flat=pos.flat(self.body))
        return pos.flat(self.body)

    def _position(self, idx: Idx, node: int) -> Idx:
        """`idx` as a position of `node`: the same element, or, for an epilogue that
        reshapes to another rank (`schedule._flat_reshape`), the same flat offset."""
        if len(self.ev.shape(node)) != len(idx.shape):
            return Idx(self.ev.shape(node), flat=idx.flat(self.body))
        return self.ev.same(idx, node)

    def groups(self, count: Any, guard: bool = True) -> tuple[tuple[Any, Any, Any], Expr]:
        """Dispatch `count` workgroups; the linear group id. Groups past the end
        return at once, unless `guard` is False (every thread is guarded anyway)."""
        dispatch = sz.dispatch(count, self.dims)
        self.group_count = count
        g = group_id(self.body, dispatch)
        if guard and over_dispatched(dispatch):
            with self.body.if_(Binary(">=", g, size_ir(count), "bool")):
                self.body.emit(Return())
        return dispatch, g


def width_for(count: Any) -> int:
    """Threads per workgroup for a strided pass over `count` elements: 256, or the
    power of two that covers a smaller literal count (at least 32)."""
    if isinstance(count, int) and count < WG:
        return max(32, 1 << max(0, count - 1).bit_length())
    return WG


# Elements each thread of a row kernel handles when the row allows (Triton's 4 warps for
# a row of 1024): the two workgroup reductions are paid once per that many elements.
ROW_ELEMENTS = 8


def row_width(count: Any, at_least: int = 0) -> int:
    """Threads per workgroup for a row kernel over `count` elements: the power of two
    that gives each thread about `ROW_ELEMENTS` of a literal count (128 for a symbolic
    one), at least `at_least` and 32, at most 256."""
    want = 128 if not isinstance(count, int) else -(-count // ROW_ELEMENTS)
    return min(WG, 1 << (max(32, at_least, want) - 1).bit_length())


def reg_dtype(dtype: DType) -> DType:
    """The dtype a value of `dtype` is computed in (float16, bfloat16 in f32 registers)."""
    return float32 if dtype in (float16, bfloat16) else dtype


def mma_kind(c: KernelContext, left: int, *rights: int) -> str | None:
    """The tensor cores a PTX build (`c.tensor_cores`) multiplies `left @ right` on (for
    each right operand), into an f32 accumulator: "f16" or "bf16" when all operands are
    buffers of that type (values exact in it: the products are exact, as the scalar path's
    f32 products of them are), "tf32" for an `@gpu(precision="tf32")` function, else None
    (scalar f32 products)."""
    if not c.tensor_cores:
        return None
    ev = c.ev
    operands = (left, *rights)
    dtypes = {ev.dtype(x) for x in operands}
    stored = all(
        ev.resolve(x) in ev.buffers and ev.buffers[ev.resolve(x)] not in ev.wide for x in operands
    )
    if len(dtypes) == 1 and stored and dtypes <= {float16, bfloat16}:
        return "f16" if dtypes == {float16} else "bf16"
    return "tf32" if c.s.kernel.graph.kernel.precision == "tf32" else None
