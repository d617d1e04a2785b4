"""Work that must not grow faster than the input: per-file text handling, host code, workers.

Timings belong in `benchmarks/scale.py`; these tests count the work instead, so they are
exact and fast: the whole file is split into lines a fixed number of times however many
kernels it holds, host code with no tensor never starts the Datalog engine, and `-j` never
starts more workers than there are cores.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from mimir.check import check_source
from mimir.constraints import devices
from mimir.gate import runner
from mimir.gate.config import load_config
from mimir.parse import spans

HEADER = 'from mimir.array import Dim, Tensor, float32, gpu\n\nN = Dim("N")\n'
KERNEL = """

@gpu
def k{i}(x: Tensor[float32, N, 16], w: Tensor[float32, 16, 8]) -> Tensor[float32, N, 8]:
    y = (x @ w).relu()
    return y * 2.0 + y.sigmoid() - y.max(axis=-1, keepdims=True)
"""


def _kernels(count: int) -> str:
    return HEADER + "".join(KERNEL.format(i=i) for i in range(count))


def test_the_file_is_split_a_fixed_number_of_times(monkeypatch: pytest.MonkeyPatch) -> None:
    # `ast.get_source_segment` splits the whole file on every call: one call per graph node
    # made checking quadratic in the number of kernels of a file.
    whole_file_splits = []

    def segment(source: str, node: ast.AST, *, padded: bool = False) -> str | None:
        whole_file_splits.append(len(source))
        return original(source, node, padded=padded)

    original = ast.get_source_segment
    monkeypatch.setattr(ast, "get_source_segment", segment)
    counts = []
    for kernels in (5, 40):
        whole_file_splits.clear()
        result = check_source("k.py", _kernels(kernels))
        assert not result.diagnostics
        counts.append(len(whole_file_splits))
    assert counts[0] == counts[1]


def test_node_text_comes_from_lines_split_once() -> None:
    text = _kernels(3)
    source = spans.SourceFile("k.py", text)
    lines = source.lines
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.expr):
            assert source.text(node) == ast.get_source_segment(text, node)
    assert source.lines is lines


def test_host_code_without_tensors_skips_the_datalog_engine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Plain Python (operators, calls, branches) with no tensor anywhere: nothing can be on a
    # device, and solving Datalog facts for it took ~20 s per MB of source.
    def refuse(*args: object) -> None:
        raise AssertionError("the Datalog engine was started")

    monkeypatch.setattr(devices.z3, "Fixedpoint", refuse)
    text = "def f(a, b):\n    if a:\n        return a + b * 2\n    return g(a) - b\n\n"
    text += "x = f(1, 2) + 3\n"
    assert check_source("host.py", text * 50).diagnostics == []


def test_device_ids_never_wrap(monkeypatch: pytest.MonkeyPatch) -> None:
    # Value ids are bit-vectors; with more values than the width holds they wrapped, and a
    # gpu tensor could share an id with a cpu one. Shrink the width to see it with a small file.
    monkeypatch.setattr(devices, "_BITS", 3)
    text = (
        "from mimir.array import Tensor, float32, gpu, zeros\n\n\n"
        "@gpu\n"
        "def k(x: Tensor[float32, 4]) -> Tensor[float32, 4]:\n"
        "    return x * 2.0\n\n\n"
        + "".join(f"a{i} = zeros((4,))\n" for i in range(12))
        + 'good = zeros((4,)).to("gpu")\n'
        "k(good)\n"
        "k(a3)\n"
    )
    found = [(d.code, d.span.line) for d in check_source("host.py", text).diagnostics]
    assert found == [("GPU060", 23)]


def test_jobs_are_capped_at_the_cores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `-j 100000` started one worker process per file.
    monkeypatch.chdir(tmp_path)
    for i in range(6):
        (tmp_path / f"k{i}.py").write_text(f"x{i} = {i}\n")
    asked = []

    def check_all(todo: list, timeout_ms: int, workers: int, roots=()):
        asked.append(workers)
        return ((item, runner.check_text(item[0], item[2], timeout_ms, roots)) for item in todo)

    monkeypatch.setattr(runner, "_check_all", check_all)
    monkeypatch.setattr(runner.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(runner.os, "cpu_count", lambda: 64)
    config = load_config()
    files = runner.select_files([tmp_path], config)
    for jobs, expected in ((100000, 2), (None, 2), (1, 1), (2, 2)):
        asked.clear()
        runner.run_check(files, config, jobs=jobs, use_cache=False, progress=False)
        assert asked == [expected]
    asked.clear()
    runner.run_check(files[:1], config, jobs=100000, use_cache=False, progress=False)
    assert asked == [1]
