"""Kernel builders: one IR kernel per launch of a schedule, by the module of its kind.

`BUILDERS` maps each kind of launch the scheduler plans to the function that builds it;
each kind's module opens with its thread layout and when the scheduler picks it:

- `ew`: `elementwise` (four elements a thread with 128-bit accesses: `vectorized`);
- `matmul`: `matmul`; `narrow`: `narrow`; `attention` and `scores_softmax`: `attention`;
- `partial` and `reduce`: `reduce`; `moments`: `moments`; `argreduce`: `argreduce`;
- `softmax`: `softmax`; `row`: `rows`; `scan`: `scan`; `sort`: `sort`;
- an index-level function (`@gpu(grid=...)`) is one launch of its own: `index_level`.

What they share, which imports no kind module: `context` (the `KernelContext` each builder
gets), `warp` (workgroup reductions), `loops` (strided and 4-wide walks, rows held in
registers), `folds` (a reduction's arithmetic), `handoff` (the last workgroup of a launch),
`whole` (whole reductions over chunks), `columns` (column tiles), `online` (a stable
softmax's running max), `staging` (operands through workgroup memory), `causal` (causal
masks) and `vectorized` (128-bit element-wise accesses).

Workgroup counts are folded into x and y (`sizes.dispatch`) so no dimension passes 65535
(`KernelContext.groups`).
"""

from __future__ import annotations

from collections.abc import Callable

from mimir.codegen import lower as lw
from mimir.codegen.ir import (
    AtomicAdd,
    Await,
    BufferParam,
    GlobalVectorLoad,
    GlobalVectorStore,
    Kernel,
    Load,
    Publish,
    Retract,
    Store,
    Uniform,
    all_expressions,
    drop_unread_lets,
    walk_statements,
)
from mimir.codegen.kernels import (
    argreduce,
    attention,
    elementwise,
    matmul,
    moments,
    narrow,
    reduce,
    rows,
    scan,
    softmax,
    sort,
)
from mimir.codegen.kernels.context import Built, KernelContext
from mimir.codegen.schedule.plan import PlanKind, Rooted, Schedule
from mimir.codegen.schedule.roots import root_kind

Builder = Callable[[KernelContext], Built]


def _partial(c: KernelContext) -> Built:
    """The first launch of a split reduction, built by the module of its root's kind."""
    assert isinstance(c.plan, Rooted)
    return _PARTIALS[root_kind(c.ev.kg, c.plan.root) or ""](c)


_PARTIALS: dict[str, Builder] = {
    "reduce": reduce.partial,
    "moments": moments.partial,
    "argreduce": argreduce.partial,
}

# Every kind of launch the scheduler plans, and the function that builds its kernel.
BUILDERS: dict[PlanKind, Builder] = {
    PlanKind.ELEMENTWISE: elementwise.build,
    PlanKind.MATMUL: matmul.build,
    PlanKind.NARROW: narrow.build,
    PlanKind.ATTENTION: attention.build,
    PlanKind.SCORES_SOFTMAX: attention.build_scores_softmax,
    PlanKind.PARTIAL: _partial,
    PlanKind.REDUCE: reduce.build,
    PlanKind.MOMENTS: moments.build,
    PlanKind.ARGREDUCE: argreduce.build,
    PlanKind.SOFTMAX: softmax.build,
    PlanKind.SCAN: scan.build,
    PlanKind.SORT: sort.build,
    PlanKind.ROW: rows.build,
}


def build(
    s: Schedule,
    index: int,
    tensor_cores: bool = False,
    simdgroup_matrices: bool = False,
    warpgroups: bool = False,
) -> Kernel:
    """The IR kernel for launch `index` of schedule `s`; with `tensor_cores` (a PTX build) a
    matmul multiplies with `MmaSync` where `context.mma_kind` says (with `warpgroups`, a
    build for sm_90a, its float16 and bfloat16 products with `WarpgroupMma`), with
    `simdgroup_matrices` (an MSL build) on simdgroup matrices."""
    plan = s.plans[index]
    c = KernelContext(s, plan, tensor_cores, simdgroup_matrices, warpgroups)
    workgroup_size, dispatch = BUILDERS[plan.kind](c)
    body = drop_unread_lets(c.body.root)
    shared_names = {a.name for a in c.shared}
    stored = {
        st.array for st in walk_statements(body) if isinstance(st, (Store, GlobalVectorStore))
    }
    exprs = list(all_expressions(body))
    loaded = {e.array for e in exprs if isinstance(e, Load)}
    loaded |= {st.array for st in walk_statements(body) if isinstance(st, GlobalVectorLoad)}
    handoff = (AtomicAdd, Publish, Await, Retract)
    atomic = {st.array for st in walk_statements(body) if isinstance(st, handoff)}
    stored |= atomic  # (an atomic is read_write, even one only awaited)
    used = (stored | loaded) - shared_names
    buffers = [
        BufferParam(
            b.name,
            lw.STORAGE[b.dtype],
            "read_write" if b.name in stored else "read",
            atomic=b.name in atomic,
        )
        for b in s.buffers
        if b.name in used
    ]
    uses_uniform = any(isinstance(e, Uniform) for e in exprs)
    return Kernel(
        name=f"{s.function}_{index}_{plan.kind}",
        what=plan.kind.value,
        workgroup_size=workgroup_size,
        workgroups=dispatch,
        buffers=buffers,
        uniform_fields=list(s.uniform_fields),
        uses_uniform=uses_uniform,
        shared=c.shared,
        body=body,
        helpers=lw.helpers_needed(exprs),
        origins=c.ev.origins,
        proofs=c.proofs,
        vectorized=c.vectorized,
        groups=c.group_count,
        skipped=c.skipped,
    )
