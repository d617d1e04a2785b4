"""The NumPy reference (`mimir.runtime.fast_reference`) gives the shim's answers.

`mimir verify` computes the shim's answer through NumPy where it is installed: the same
semantics, vectorised. Every kernel of the zoo and of `tests/kernels` runs both ways on the
same seeded inputs, and the outputs agree within the tolerances verify compares with
(integers and bools exactly).
"""

from __future__ import annotations

import functools
import json
import math
import sys
from pathlib import Path

import pytest

from mimir.runtime import fast_reference
from mimir.runtime import manifest as mf
from mimir.runtime.verify import (
    choose_dims,
    default_scalars,
    mismatches,
    random_inputs,
    shim_reference,
)

ROOT = Path(__file__).resolve().parent
OUT = ROOT / "kernels" / "out"
REPO = ROOT.parent
SIZES = (7, 5, 3, 4, 2)


def _manifests() -> list[tuple[Path, dict]]:
    """One committed manifest per function of tests/kernels (any backend: dims and the
    caller's buffers are the same on every one)."""
    found: dict[tuple[str, str], tuple[Path, dict]] = {}
    for backend in ("wgsl", "msl", "spirv", "ptx"):
        for path in sorted((OUT / backend).glob("*/*.manifest.json")):
            key = (path.parent.name, path.name)
            if key not in found:
                source = ROOT / "kernels" / f"{path.parent.name}.py"
                found[key] = (source, json.loads(path.read_text()))
    return list(found.values())


@functools.cache
def _zoo_manifests() -> list[tuple[Path, dict]]:
    from mimir.codegen import compile_file

    out = []
    for path in sorted((REPO / "zoo").glob("*.py")):
        if path.stem in ("table", "__init__"):
            continue
        result = compile_file(path, ["msl"])
        assert result.ok, result.diagnostics
        for name, text in result.files.items():
            if name.endswith(".manifest.json"):
                out.append((path, json.loads(text)))
    return out


def _compare(source: Path, manifest: dict, sizes: tuple[int, ...]) -> list[str]:
    dims = choose_dims(manifest, sizes)
    inputs = random_inputs(manifest, dims, seed=4)
    scalars = default_scalars(manifest, dims)
    name = manifest["function"]
    want = shim_reference(source, name, inputs, dims, scalars)
    got = shim_reference(source, name, inputs, dims, scalars, fast=True)
    bad = []
    for buf in manifest["buffers"]:
        if buf["role"] in mf.RESULTS:
            wrong = mismatches(got[buf["name"]], want[buf["name"]], buf["dtype"])
            if wrong:
                i = wrong[0]
                out = buf["name"]
                bad.append(f"{name}.{out}[{i}]: {got[out][i]!r} != {want[out][i]!r}")
    return bad


def test_numpy_is_there() -> None:
    assert fast_reference.available()


def test_every_kernel_of_tests_kernels_agrees_with_the_shim() -> None:
    cases = _manifests()
    assert len(cases) > 150
    bad = [line for source, manifest in cases for line in _compare(source, manifest, SIZES)]
    assert bad == []


@pytest.mark.parametrize("sizes", [(1,), SIZES], ids=["ones", "small"])
def test_every_zoo_kernel_agrees_with_the_shim(sizes: tuple[int, ...]) -> None:
    cases = _zoo_manifests()
    assert len(cases) >= 30
    bad = [line for source, manifest in cases for line in _compare(source, manifest, sizes)]
    assert bad == []


def test_an_index_level_kernel_runs_once_for_the_whole_grid(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """conv1d runs as arrays: the shim's program-by-program loop is never entered."""
    import mimir.array as ma

    def refuse(*args: object) -> None:
        raise AssertionError("the shim's grid loop ran")

    monkeypatch.setattr(ma.Kernel, "_run_grid", refuse)
    source = REPO / "zoo" / "conv1d.py"
    manifest = next(m for p, m in _zoo_manifests() if p == source)
    dims = choose_dims(manifest, (3, 4, 9, 5))
    inputs = random_inputs(manifest, dims, seed=1)
    out = shim_reference(source, "conv1d", inputs, dims, {}, fast=True)
    assert len(out["out"]) == dims["B"] * dims["C_OUT"] * (dims["L"] - 2)


def test_a_body_it_cannot_vectorise_is_run_by_the_shim(tmp_path: Path) -> None:
    """An `if` on a program id cannot run on arrays: the shim runs it, program by program,
    and the answer is the shim's."""
    path = tmp_path / "branchy.py"
    path.write_text(
        "from mimir.array import Dim, Tensor, float32, gpu, program_id\n\n"
        'N = Dim("N")\n\n\n'
        "@gpu(grid=(N,))\n"
        "def halves(x: Tensor[float32, N], out: Tensor[float32, N]):\n"
        "    i = program_id(0)\n"
        "    if i % 2 == 0:\n"
        "        out[i] = x[i] * 2.0\n"
        "    else:\n"
        "        out[i] = x[i]\n"
    )
    inputs = {"x": [1.0, 2.0, 3.0, 4.0, 5.0]}
    fast = shim_reference(path, "halves", inputs, {"N": 5}, {}, fast=True)
    assert fast == {"out": [2.0, 2.0, 6.0, 4.0, 10.0]}


def test_without_numpy_it_is_the_shim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "numpy", None)
    with fast_reference.accelerated() as used:
        assert used is False
    from mimir.ops import evaluate

    assert evaluate.matmul.__module__ == "mimir.ops.evaluate"  # nothing left swapped


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "uint32", "bool_"])
def test_the_array_comparison_is_the_stdlib_one(dtype: str) -> None:
    import random

    from mimir.runtime.verify import error_summary

    rng = random.Random(dtype)
    special = [0.0, -0.0, 1.0, math.inf, -math.inf, math.nan, 1e-30, -2.5]
    for _ in range(200):
        n = rng.randrange(0, 40)
        if dtype in ("int32", "uint32"):
            want = [rng.randrange(-3, 4) for _ in range(n)]
            got = [v + rng.choice([0, 0, 0, 1]) for v in want]
        elif dtype == "bool_":
            want = [rng.random() < 0.5 for _ in range(n)]
            got = [v if rng.random() < 0.8 else not v for v in want]
        else:
            want = [rng.choice(special) if rng.random() < 0.3 else rng.uniform(-2, 2)
                    for _ in range(n)]  # fmt: skip
            got = [
                rng.choice(special) if rng.random() < 0.2 else w + rng.choice([0.0, 1e-7, 1e-3])
                for w in want
            ]
        fast = fast_reference.compare(got, want, dtype)
        assert fast == (*error_summary(got, want), mismatches(got, want, dtype)), (got, want)
