"""The differential fuzzer (`tests/fuzzing`) in the suite: generator, oracle, a fixed-seed run.

`test_fixed_seed_campaign` judges 188 generated kernels (every op of `mimir.ops.TABLE` and
every index-level pattern, once meant clean and once with a planted bug), compiles the
clean ones for every backend, validates every file and executes a sample against the
shim; it fails on any finding that `KNOWN` does not name. The run is derandomized: the
same kernels on every machine. `benchmarks/fuzz.py` is the long run.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from fuzzing import CATEGORIES, TENSOR_OPS, dump, run, table
from fuzzing.campaign import Outcome
from fuzzing.kernels import INDEX_BUGS, REDUCTION_GRAPH, TENSOR_BUGS, reduction_graphs
from fuzzing.oracle import (
    CEX,
    CLASSES,
    CRASH,
    FALSE_ALARM,
    FALSE_PROOF,
    INVALID,
    UNPROVEN,
    Finding,
    import_kernel,
    judge,
    size_sample,
    write_case,
)
from harness import require_tool

from mimir import ops
from mimir.check import FileResult
from mimir.diagnostics.diagnostic import Diagnostic, Span

# Findings the fixed-seed run knows about, each with what will fix it:
# (finding class, what produced it) -> reference, where "what" is the planted bug's label
# (`Case.planted`) or the category `tier:op`. Each must also be a failing fixture under
# tests/fixtures/fuzz_findings/. Empty: every finding class the run produced in the first long
# run (slice bounds, empty axes, a Dim as a value, loaded-index ranges) is fixed and its
# fixture is in tests/fixtures/check/. An entry the run no longer produces fails
# `test_known_findings_still_occur`, so this list only shrinks.
KNOWN: dict[tuple[str, str], str] = {}


def _keys(outcome: Outcome, finding: Finding) -> list[tuple[str, str]]:
    keys = [(finding.klass, f"{outcome.case.tier}:{outcome.case.category}")]
    if outcome.case.planted:
        keys.append((finding.klass, outcome.case.planted))
    return keys


def known(outcome: Outcome, finding: Finding) -> str | None:
    return next((KNOWN[k] for k in _keys(outcome, finding) if k in KNOWN), None)


SWAPPED = """\
from mimir.array import Dim, Tensor, float32, gpu

N = Dim("N")
M = Dim("M")


@gpu
def kernel(x: Tensor[float32, N, M], y: Tensor[float32, M, N]) -> Tensor[float32, N, M]:
    return x + y
"""

CLEAN = """\
from mimir.array import Dim, Tensor, float32, gpu

N = Dim("N", min=0, multiple_of=2)


@gpu
def kernel(x: Tensor[float32, N], y: Tensor[float32, N]) -> Tensor[float32, N]:
    return (x * y).relu()
"""


def test_the_generator_covers_every_op_of_the_table() -> None:
    from fuzzing.kernels import INDEX_LEVEL_OPS

    assert sorted(TENSOR_OPS + INDEX_LEVEL_OPS) == sorted(op.name for op in ops.TABLE)
    assert {c for t, c in CATEGORIES if t == "tensor"} == {*TENSOR_OPS, REDUCTION_GRAPH}
    assert len(TENSOR_BUGS) == 8 and len(INDEX_BUGS) >= 4


def _stub(codes: list[str], counterexample=()):
    def check(path: str, text: str) -> FileResult:
        span = Span(path, 9, 5, 9, 10)
        found = [Diagnostic(c, "stub", span, counterexample=tuple(counterexample)) for c in codes]
        return FileResult(path, found)

    return check


def test_the_oracle_calls_a_clean_verdict_on_a_failing_kernel_a_false_proof(tmp_path) -> None:
    j = judge(SWAPPED, tmp_path, check=_stub([]))
    assert [f.klass for f in j.findings] == [FALSE_PROOF]
    assert not j.clean


def test_the_oracle_calls_an_error_on_a_kernel_that_always_runs_a_false_alarm(tmp_path) -> None:
    assert [f.klass for f in judge(CLEAN, tmp_path, check=_stub(["GPU011"])).findings] == [
        FALSE_ALARM
    ]
    assert [f.klass for f in judge(CLEAN, tmp_path, check=_stub(["GPU050"])).findings] == [UNPROVEN]


def test_the_oracle_replays_counterexamples(tmp_path) -> None:
    # N=3, M=3: a call at which the swapped operands broadcast fine.
    j = judge(SWAPPED, tmp_path, check=_stub(["GPU010"], [("N", 3), ("M", 3)]))
    assert [f.klass for f in j.findings] == [CEX]
    j = judge(CLEAN, tmp_path, check=_stub(["GPU010"], [("N", 3)]))  # N=3: not a multiple of 2
    assert FALSE_ALARM in [f.klass for f in j.findings]
    j = judge(SWAPPED, tmp_path, check=_stub(["GPU010"], [("N", 2), ("M", 3)]))
    assert j.findings == []  # reproduces with the same code


THREE_LOADS = """\
from mimir.array import Dim, Tensor, float32, gpu, int32, program_id

N = Dim("N")
C = Dim("C")


@gpu(grid=(N,))
def kernel(
    a: Tensor[int32, N], b: Tensor[int32, N], c: Tensor[int32, N], x: Tensor[float32, C],
    out: Tensor[float32, N],
):
    i = program_id(0)
    if (a[i] == C) & (b[i] == C) & (c[i] == C):
        out[i] = x[a[i]]
    else:
        out[i] = 0.0
"""


def test_a_counterexample_that_needs_loaded_values_is_replayed_with_them(tmp_path) -> None:
    # Fails only where three loaded indices all equal C: random draws at N=1, C=3 miss it,
    # filling every integer input with each edge value (here 3) reproduces it.
    j = judge(THREE_LOADS, tmp_path, check=_stub(["GPU018"], [("N", 1), ("C", 3)]))
    assert [f.klass for f in j.findings] == []
    assert j.shim["counterexample N=1, C=3"] == "GPU018"


def test_the_oracle_agrees_with_the_real_checker_on_plain_kernels(tmp_path) -> None:
    j = judge(CLEAN, tmp_path)
    assert j.findings == [] and j.clean and j.codes == []
    j = judge(SWAPPED, tmp_path)
    assert j.findings == [] and j.codes


def test_sizes_respect_every_constraint_and_include_the_edges(tmp_path) -> None:
    kernel = import_kernel(write_case(CLEAN, tmp_path))
    sizes = sorted({env["N"] for env in size_sample(kernel)})
    assert 0 in sizes and 2 in sizes and any(n > 50 for n in sizes)
    assert all(n % 2 == 0 for n in sizes)


def test_every_generated_kernel_parses() -> None:
    from fuzzing import cases
    from hypothesis import HealthCheck, given, settings

    @settings(max_examples=200, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(cases())
    def parses(case) -> None:
        ast.parse(case.source)
        assert "def kernel(" in case.source

    parses()


def test_one_clang_run_validates_many_msl_files_and_names_the_bad_one(tmp_path) -> None:
    require_tool("clang++-half")
    from fuzzing.backends import BackendReport, validate_msl

    good, bad = tmp_path / "good.metal", tmp_path / "bad.metal"
    good.write_text("kernel void k(device float* x [[buffer(0)]]) { x[0] = 1.0f; }\n")
    bad.write_text("kernel void k(device float* x [[buffer(0)]]) { x[0] = 1.0f + -1u ; y; }\n")
    reports = [BackendReport(pending_msl=[good]), BackendReport(pending_msl=[bad])]
    validate_msl(reports, tmp_path / "check")
    assert reports[0].findings == [] and reports[0].validated == ["msl clang++"]
    assert [f.klass for f in reports[1].findings] == [INVALID]
    assert "bad.metal" in reports[1].findings[0].detail


def test_a_backend_that_disagrees_with_the_shim_is_a_wrong_result(tmp_path, monkeypatch) -> None:
    import harness.msl_runner
    from fuzzing.backends import Tools, compile_and_validate, execute
    from fuzzing.oracle import WRONG

    import mimir.runtime.wgpu_runner

    def off_by_one(manifest, folder, inputs, dims, scalars=None):
        n = dims["N"]
        return {"out": [1.0] * n}  # relu(x * y) is never 1.0 everywhere on random inputs

    monkeypatch.setattr(mimir.runtime.wgpu_runner, "run_manifest", off_by_one)
    monkeypatch.setattr(harness.msl_runner, "run_msl_manifest", off_by_one)
    monkeypatch.setattr(Tools, "wgpu", staticmethod(lambda: True))
    monkeypatch.setattr(Tools, "clang", staticmethod(lambda: "clang++"))
    j = judge(CLEAN, tmp_path)
    report = compile_and_validate(j.path, tmp_path / "out")
    report.findings.clear()  # validators may be missing here; execution is what is tested
    execute(j.path, tmp_path / "out", report)
    assert {f.klass for f in report.findings} == {WRONG}
    assert {f.detail.split()[0] for f in report.findings} == {"wgsl", "spirv", "msl"}


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    from fuzzing.backends import Tools
    from harness import require

    for tool in ("wgpu", "clang++-half", "spirv-val"):
        require_tool(tool)
    require(Tools.ptxas() is not None, "ptxas (CUDA 13.0) is neither on PATH nor pip-installed")
    workdir = tmp_path_factory.mktemp("fuzz")
    return run(0, workdir, kernels=2 * len(CATEGORIES), examples=1, execute_every=12)


def test_fixed_seed_campaign(campaign, tmp_path: Path) -> None:
    found = campaign.findings(known)
    print(table(campaign, known))
    if found:
        dump(campaign, tmp_path / "findings")
    lines = [f"{o.case.label}: {f.klass}: {f.detail}\n{o.case.source}" for o, f in found]
    assert not found, f"{len(found)} findings (dumped under {tmp_path}):\n" + "\n".join(lines)


def test_every_accepted_kernel_validates_on_every_backend(campaign) -> None:
    """Whatever the checker accepts compiles (or is refused with a code)
    for msl, wgsl, ptx and spirv, and every file passes its validator. Never in `KNOWN`."""
    accepted = [o for o in campaign.outcomes if o.backend is not None]
    assert len(accepted) >= len(CATEGORIES) // 2
    bad = [(o.case.label, f.detail) for o in accepted for f in o.backend.findings
           if f.klass in (INVALID, CRASH)]  # fmt: skip
    assert not bad, bad


def test_the_campaign_covered_both_tiers_and_every_backend(campaign) -> None:
    tiers = {o.case.tier for o in campaign.outcomes}
    assert tiers == {"tensor", "index"}
    assert {o.case.category for o in campaign.outcomes} == {c for _, c in CATEGORIES}
    assert sum(1 for o in campaign.outcomes if o.case.planted) >= len(CATEGORIES) // 2
    validated = {v for o in campaign.outcomes if o.backend for v in o.backend.validated}
    assert {"wgsl naga", "spirv-val", "msl clang++", "ptxas sm_80", "ptxas sm_90"} <= validated
    executed = {e.split()[0] for o in campaign.outcomes if o.backend for e in o.backend.executed}
    assert executed == {"wgsl", "spirv", "msl"}


def test_known_findings_still_occur(campaign) -> None:
    """A `KNOWN` entry the run no longer produces has been fixed: remove it. An empty
    `KNOWN` is the goal, and valid; every entry must name a finding class and a planted bug
    or a category the generator has, so a typo cannot silence nothing forever."""
    whats = {f"{t}:{c}" for t, c in CATEGORIES} | set(TENSOR_BUGS) | set(INDEX_BUGS)
    malformed = sorted(k for k in KNOWN if k[0] not in CLASSES or k[1] not in whats)
    assert not malformed, f"KNOWN entries that name no finding class or category: {malformed}"
    produced = {k for o in campaign.outcomes for f in o.findings for k in _keys(o, f)}
    stale = sorted(set(KNOWN) - produced)
    assert not stale, f"fixed, remove from KNOWN: {stale}"


def test_graphs_of_reductions_run_right_on_every_backend(tmp_path: Path) -> None:
    """Several reductions feeding each other (rows, columns, whole tensors): each kernel the
    checker accepts is compiled, validated and executed against the shim. A launch that read
    another's result before it was written (`x.max(axis=1).sum() / w.sum()`) fails here."""
    for tool in ("wgpu", "clang++-half", "spirv-val"):
        require_tool(tool)
    stats = run(7, tmp_path, kernels=6, examples=2, execute_every=1, only=REDUCTION_GRAPH)
    assert {o.case.category for o in stats.outcomes} == {REDUCTION_GRAPH}
    executed = [o for o in stats.outcomes if o.backend is not None and o.backend.executed]
    assert len(executed) >= 2
    found = [(o.case.source, f.klass, f.detail) for o, f in stats.findings()]
    assert not found, found


def test_the_reduction_graph_generator_draws_the_weighted_mean_shape() -> None:
    """Among a fixed-seed batch, some kernel reduces a per-row value to a scalar beside a
    whole reduction of another input: the shape of `(x.max(axis=1) * w).sum() / w.sum()`."""
    from hypothesis import HealthCheck, Phase, given, seed, settings

    drawn = []

    @seed(0)
    @settings(max_examples=60, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(reduction_graphs(planted=False))
    def collect(case) -> None:
        drawn.append(case.source)

    collect()
    per_row = re.compile(r"\.(sum|mean|max|min|var|std)\(axis=1\)")
    shaped = [
        s
        for s in drawn
        if per_row.search(s) and re.search(r"\bw\.(sum|mean|max|min|var|std)\(\)", s)
    ]
    assert shaped, "no draw combines a row reduction with a whole reduction of `w`"
