"""A fuzzing campaign: generate kernels, judge each, tally the findings.

    stats = run(seed=0, batches=116, examples=2)          # deterministic for a seed
    print(table(stats))

Kernels come in batches, one category (a `mimir.ops.TABLE` op, or an index-level
pattern) per batch, in a fixed rotation; each category gets a batch of kernels
meant clean, then a batch with a planted bug; each batch is a Hypothesis run seeded from the
campaign's seed and the batch number, so a campaign is the same on every machine.
Duplicate sources are judged once. Every kernel the checker accepts is compiled for
every backend and each file validated; every `execute_every`-th one the shim also
runs cleanly is executed and compared with the shim.
"""

from __future__ import annotations

import hashlib
import re
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, seed, settings

from fuzzing.backends import BackendReport, Tools, compile_and_validate, execute, validate_msl
from fuzzing.kernels import (
    INDEX_PATTERNS,
    REDUCTION_GRAPH,
    TENSOR_OPS,
    Case,
    index_cases,
    reduction_graphs,
    tensor_cases,
)
from fuzzing.oracle import CLASSES, CRASH, Finding, Judgement, judge


def _rotation() -> tuple[tuple[str, str], ...]:
    """Every op and index pattern; an index-level pattern after every fourth op (index-level
    kernels come about twice as often as one pattern per rotation would give), so that a
    short run already covers both tiers."""
    out: list[tuple[str, str]] = []
    index = [("index", p) for p in INDEX_PATTERNS * 2]
    stride = 7  # coprime with len(TENSOR_OPS): neighbours in the rotation are unrelated ops
    assert len(TENSOR_OPS) % stride
    ops = [TENSOR_OPS[(k * stride) % len(TENSOR_OPS)] for k in range(len(TENSOR_OPS))]
    for k, op in enumerate(ops):
        out.append(("tensor", op))
        if k % 4 == 3 and index:
            out.append(index.pop(0))
        if k % 16 == 15:  # graphs of reductions feeding each other, four times a rotation
            out.append(("tensor", REDUCTION_GRAPH))
    return (*out, *index)


CATEGORIES: tuple[tuple[str, str], ...] = _rotation()
MSL_BATCH = 40  # MSL files validated per clang++ run


@dataclass
class Outcome:
    case: Case
    judgement: Judgement
    backend: BackendReport | None = None

    @property
    def findings(self) -> list[Finding]:
        return self.judgement.findings + (self.backend.findings if self.backend else [])


@dataclass
class Stats:
    seed: int
    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0
    duplicates: int = 0

    def findings(self, known: Callable[[Outcome, Finding], str | None] | None = None):
        """(outcome, finding) pairs, without those `known` names an issue for."""
        out = []
        for o in self.outcomes:
            for f in o.findings:
                if known is None or known(o, f) is None:
                    out.append((o, f))
        return out


def _batch(tier: str, category: str, planted: bool, examples: int, batch_seed: int) -> list[Case]:
    if category == REDUCTION_GRAPH:
        strategy = reduction_graphs(planted=planted)
    elif tier == "tensor":
        strategy = tensor_cases(planted=planted, op=category)
    else:
        strategy = index_cases(planted=planted, pattern=category)
    drawn: list[Case] = []

    @seed(batch_seed)
    @settings(
        max_examples=examples + 1,  # the first is Hypothesis's simplest example: dropped below
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(case: Case) -> None:
        drawn.append(case)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        collect()
    # Hypothesis starts every run with the simplest example (every choice at its first
    # option), the same for every seed; keep it only where it is the only one.
    return drawn[1:] if len(drawn) > 1 else drawn


def stream(campaign_seed: int, examples: int = 3, only: str | None = None) -> Iterator[Case]:
    """An endless, deterministic stream of generated kernels (of one category: `only`)."""
    rotation = [c for c in CATEGORIES if only is None or c[1] == only]
    if not rotation:
        raise ValueError(
            f"no category `{only}`; expected one of {sorted({c for _, c in CATEGORIES})}"
        )
    k = 0
    while True:
        tier, category = rotation[(k // 2) % len(rotation)]
        planted = k % 2 == 1
        yield from _batch(tier, category, planted, examples, campaign_seed * 1_000_003 + k)
        k += 1


def run(
    campaign_seed: int,
    workdir: Path,
    *,
    kernels: int | None = None,
    seconds: float | None = None,
    examples: int = 3,
    backends: bool = True,
    execute_every: int = 10,
    progress: Callable[[Outcome], None] | None = None,
    only: str | None = None,
) -> Stats:
    """Judge kernels until `kernels` are done or `seconds` have passed."""
    stats = Stats(campaign_seed)
    start = time.perf_counter()
    seen: set[str] = set()
    clean_count = 0
    pending: list[Outcome] = []  # compiled, MSL not yet validated
    workdir.mkdir(parents=True, exist_ok=True)
    for case in stream(campaign_seed, examples, only):
        if kernels is not None and len(stats.outcomes) >= kernels:
            break
        if seconds is not None and time.perf_counter() - start >= seconds:
            break
        if case.source in seen:
            stats.duplicates += 1
            continue
        seen.add(case.source)
        j = judge(case.source, workdir, seed=len(stats.outcomes))
        outcome = Outcome(case, j)
        checked_clean = not j.codes and not any(f.klass == CRASH for f in j.findings)
        if backends and checked_clean and j.path is not None:
            # Everything the checker accepts is compiled and validated; only what the
            # shim also runs cleanly is executed against it.
            folder = workdir / f"{j.path.stem}_out"
            outcome.backend = compile_and_validate(j.path, folder)
            compiled = outcome.backend.refused is None and not outcome.backend.findings
            if compiled and j.clean:
                clean_count += 1
                if execute_every and (clean_count - 1) % execute_every == 0:
                    execute(j.path, folder, outcome.backend, seed=clean_count)
        stats.outcomes.append(outcome)
        if outcome.backend is not None:
            pending.append(outcome)
        if len(pending) >= MSL_BATCH:
            _flush(pending, workdir, progress)
        elif progress is not None and outcome.backend is None:
            progress(outcome)
    _flush(pending, workdir, progress)
    stats.seconds = time.perf_counter() - start
    return stats


def _flush(pending: list[Outcome], workdir: Path, progress) -> None:
    validate_msl([o.backend for o in pending if o.backend is not None], workdir / "msl_check")
    if progress is not None:
        for o in pending:
            progress(o)
    pending.clear()


# ---------------------------------------------------------------- reporting


def table(stats: Stats, known: Callable[[Outcome, Finding], str | None] | None = None) -> str:
    """Kernels per category (and what the checker said), then findings per class."""
    rows: dict[str, Counter] = {}
    for o in stats.outcomes:
        key = f"{o.case.tier}:{o.case.category}"
        row = rows.setdefault(key, Counter())
        row["kernels"] += 1
        row["planted" if o.case.planted else "meant clean"] += 1
        row["checker clean" if not o.judgement.codes else "checker error"] += 1
        if o.backend is not None:
            row["compiled" if o.backend.refused is None else "refused"] += 1
            row["executed"] += 1 if o.backend.executed else 0
        row["findings"] += len(o.findings)
    cols = ("kernels", "meant clean", "planted", "checker clean", "checker error", "compiled",
            "refused", "executed", "findings")  # fmt: skip
    width = max([len(k) for k in rows] + [8])
    lines = [f"{'category':<{width}} " + " ".join(f"{c:>13}" for c in cols)]
    total: Counter = Counter()
    for key in sorted(rows):
        lines.append(f"{key:<{width}} " + " ".join(f"{rows[key][c]:>13}" for c in cols))
        total.update(rows[key])
    lines.append(f"{'total':<{width}} " + " ".join(f"{total[c]:>13}" for c in cols))
    lines.append("")
    by_class: Counter = Counter()
    kernels_by_class: dict[str, set[int]] = {}
    for i, o in enumerate(stats.outcomes):
        for f in o.findings:
            by_class[f.klass] += 1
            kernels_by_class.setdefault(f.klass, set()).add(i)
    known_by_class: Counter = Counter()
    if known is not None:
        for o in stats.outcomes:
            for f in o.findings:
                if known(o, f) is not None:
                    known_by_class[f.klass] += 1
    lines.append(f"{'finding class':<36} {'findings':>9} {'kernels':>8} {'known':>6}")
    for klass in CLASSES:
        n = len(kernels_by_class.get(klass, ()))
        lines.append(f"{klass:<36} {by_class[klass]:>9} {n:>8} {known_by_class[klass]:>6}")
    valid = sum(1 for o in stats.outcomes if not o.case.planted)
    lines.append("")
    lines.append(
        f"{len(stats.outcomes)} kernels ({valid} meant clean) in {stats.seconds:.0f}s, "
        f"seed {stats.seed}, {stats.duplicates} duplicates skipped"
        + (f"; tools missing: {', '.join(sorted(Tools.missing))}" if Tools.missing else "")
    )
    return "\n".join(lines)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def dump(stats: Stats, folder: Path) -> list[Path]:
    """Each finding's kernel source, with the finding as a header comment, one file per kernel."""
    written = []
    folder.mkdir(parents=True, exist_ok=True)
    for o in stats.outcomes:
        if not o.findings:
            continue
        first = o.findings[0]
        digest = hashlib.sha1(o.case.source.encode()).hexdigest()[:8]
        name = f"{_slug(first.klass)}__{_slug(o.case.label)}__{digest}.py"
        header = [f"# fuzz finding (seed {stats.seed}): {o.case.label}"]
        header.append(f"# checker: {o.judgement.verdict}")
        for f in o.findings:
            header.append(f"# {f.klass}: {' '.join(f.detail.split())[:600]}")
        path = folder / name
        path.write_text("\n".join(header) + "\n" + o.case.source)
        written.append(path)
    return written
