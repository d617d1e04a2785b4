"""Proven gathers and scatters: `Range(lo, hi)` on integer inputs and `atomic_add`.

The checker's half is in `tests/fixtures/check/index_value_ranges.py` and
`index_atomics.py` (with `# E:` markers); the backends' half runs `tests/kernels/gathers.py`
through the zoo's execution tests. Here: the shim's numerics against NumPy (Hypothesis),
the call-time check (GPU043) and its twin in the manifest and the host runtime, the
shim's race rule for atomics, and the examples of `docs/language.md`.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import import_file

from mimir.array import MimirError, Tensor, float32, int32, tensor, uint32, zeros
from mimir.check import check_source
from mimir.codegen import compile_source
from mimir.runtime import manifest as mf
from mimir.runtime.verify import random_inputs

REPO = Path(__file__).resolve().parent.parent
ZOO = import_file(REPO / "tests" / "kernels" / "gathers.py")
FIXTURE = import_file(REPO / "tests" / "fixtures" / "check" / "index_atomics.py")


def _gpu(values: list, shape: tuple[int, ...], dtype) -> Tensor:
    return Tensor(list(values), shape, dtype, "gpu")


def _f32(values) -> list[float]:
    return np.asarray(values, dtype=np.float32).tolist()


# ---------------------------------------------------------------- shim numerics vs NumPy

sizes = st.integers(min_value=1, max_value=6)


@settings(max_examples=40, deadline=None)
@given(n=sizes, c=sizes, data=st.data())
def test_cross_entropy_matches_numpy(n: int, c: int, data: st.DataObject) -> None:
    floats = st.floats(-8.0, 8.0, allow_nan=False, width=32)
    logits = data.draw(st.lists(floats, min_size=n * c, max_size=n * c))
    labels = data.draw(st.lists(st.integers(0, c - 1), min_size=n, max_size=n))
    loss = zeros((n,)).to("gpu")
    ZOO.cross_entropy(_gpu(logits, (n, c), float32), _gpu(labels, (n,), int32), loss)
    x = np.asarray(logits, dtype=np.float64).reshape(n, c)
    m = x.max(axis=1, keepdims=True)
    logp = x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))
    want = -logp[np.arange(n), labels]
    assert np.allclose(loss.flat(), want, rtol=1e-5, atol=1e-5)


@settings(max_examples=40, deadline=None)
@given(n=sizes, v=sizes, d=sizes, data=st.data())
def test_embedding_is_numpy_take(n: int, v: int, d: int, data: st.DataObject) -> None:
    table = data.draw(st.lists(st.floats(-4, 4, width=32), min_size=v * d, max_size=v * d))
    ids = data.draw(st.lists(st.integers(0, v - 1), min_size=n, max_size=n))
    out = zeros((n, d)).to("gpu")
    ZOO.embedding(_gpu(table, (v, d), float32), _gpu(ids, (n,), int32), out)
    want = np.take(np.asarray(table, dtype=np.float32).reshape(v, d), ids, axis=0)
    assert out.flat() == want.ravel().tolist()


@settings(max_examples=40, deadline=None)
@given(b=sizes, values=st.lists(st.integers(-3, 8), min_size=1, max_size=30))
def test_histograms_match_numpy_bincount(b: int, values: list[int]) -> None:
    n = len(values)
    inside = [min(max(x, 0), b - 1) for x in values]
    counts = zeros((b,), dtype=int32).to("gpu")
    ZOO.histogram(_gpu(inside, (n,), int32), counts)
    assert counts.flat() == np.bincount(inside, minlength=b).tolist()
    guarded = zeros((b,), dtype=uint32).to("gpu")
    ZOO.histogram_guarded(_gpu(values, (n,), int32), guarded)
    kept = [x for x in values if 0 <= x < b]
    assert guarded.flat() == np.bincount(kept, minlength=b).astype(np.uint32).tolist()


@settings(max_examples=40, deadline=None)
@given(n=sizes, v=sizes, d=sizes, data=st.data())
def test_scatter_add_is_numpy_add_at(n: int, v: int, d: int, data: st.DataObject) -> None:
    ids = data.draw(st.lists(st.integers(0, v - 1), min_size=n, max_size=n))
    rows = data.draw(st.lists(st.floats(-4, 4, width=32), min_size=n * d, max_size=n * d))
    grad = zeros((v, d)).to("gpu")
    ZOO.scatter_add_rows(_gpu(ids, (n,), int32), _gpu(rows, (n, d), float32), grad)
    want = np.zeros((v, d), dtype=np.float32)
    np.add.at(want, ids, np.asarray(rows, dtype=np.float32).reshape(n, d))
    assert np.allclose(grad.flat(), want.ravel(), rtol=1e-6, atol=1e-6)


@settings(max_examples=40, deadline=None)
@given(n=sizes, v=sizes, d=sizes, data=st.data())
def test_tensor_level_row_gather_is_numpy_indexing(
    n: int, v: int, d: int, data: st.DataObject
) -> None:
    table = data.draw(st.lists(st.floats(-4, 4, width=32), min_size=v * d, max_size=v * d))
    ids = data.draw(st.lists(st.integers(0, v - 1), min_size=n, max_size=n))
    out = ZOO.embedding_rows(_gpu(table, (v, d), float32), _gpu(ids, (n,), int32))
    want = np.asarray(table, dtype=np.float32).reshape(v, d)[np.asarray(ids)]
    assert out.flat() == want.ravel().tolist()


@settings(max_examples=40, deadline=None)
@given(
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    width=st.integers(1, 4),
    data=st.data(),
)
def test_take_along_axis_is_numpy_take_along_axis(
    shape: list[int], width: int, data: st.DataObject
) -> None:
    from mimir.array import take_along_axis

    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = np.asarray(
        data.draw(
            st.lists(
                st.floats(-4, 4, width=32), min_size=math.prod(shape), max_size=math.prod(shape)
            )
        ),
        dtype=np.float32,
    ).reshape(shape)
    ishape = list(shape)
    ishape[axis] = width
    count = math.prod(ishape)
    idx = np.asarray(
        data.draw(st.lists(st.integers(0, shape[axis] - 1), min_size=count, max_size=count)),
        dtype=np.int32,
    ).reshape(ishape)
    got = take_along_axis(
        _gpu(x.ravel().tolist(), tuple(shape), float32),
        _gpu(idx.ravel().tolist(), tuple(ishape), int32),
        axis,
    )
    assert got.flat() == np.take_along_axis(x, idx, axis).ravel().tolist()
    assert list(np.shape(got.tolist())) == ishape


@settings(max_examples=30, deadline=None)
@given(n=sizes, c=sizes, data=st.data())
def test_cross_entropy_mean_matches_numpy(n: int, c: int, data: st.DataObject) -> None:
    logits = data.draw(st.lists(st.floats(-8, 8, width=32), min_size=n * c, max_size=n * c))
    labels = data.draw(st.lists(st.integers(0, c - 1), min_size=n, max_size=n))
    got = ZOO.cross_entropy_mean(_gpu(logits, (n, c), float32), _gpu(labels, (n, 1), int32))
    x = np.asarray(logits, dtype=np.float64).reshape(n, c)
    m = x.max(axis=1, keepdims=True)
    logp = x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))
    assert np.isclose(got.item(), -logp[np.arange(n), labels].mean(), rtol=1e-5, atol=1e-5)


@settings(max_examples=30, deadline=None)
@given(n=sizes, c=sizes, data=st.data())
def test_label_loss_from_a_label_vector_matches_numpy(n: int, c: int, data: st.DataObject) -> None:
    logits = data.draw(st.lists(st.floats(-8, 8, width=32), min_size=n * c, max_size=n * c))
    labels = data.draw(st.lists(st.integers(0, c - 1), min_size=n, max_size=n))
    got = ZOO.label_nll_from_a_vector(_gpu(logits, (n, c), float32), _gpu(labels, (n,), int32))
    x = np.asarray(logits, dtype=np.float64).reshape(n, c)
    m = x.max(axis=1, keepdims=True)
    logp = x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))
    want = -logp[np.arange(n), labels][:, None]
    assert np.allclose(np.asarray(got.tolist()), want, rtol=1e-5, atol=1e-5)


def test_a_gather_index_out_of_bounds_is_gpu018_in_the_shim() -> None:
    from mimir.array import take_along_axis

    with pytest.raises(MimirError, match="GPU018"):
        zeros((3, 2)).to("gpu")[tensor([0, 3], dtype=int32).to("gpu")]
    with pytest.raises(MimirError, match="GPU018"):
        take_along_axis(zeros((2, 3)).to("gpu"), tensor([[0], [-1]], dtype=int32).to("gpu"), axis=1)


def test_int32_atomic_add_wraps_as_the_dtype() -> None:
    counts = tensor([2**31 - 1, 0], dtype=int32).to("gpu")
    ZOO.histogram(tensor([0, 0], dtype=int32).to("gpu"), counts)
    assert counts.flat() == [-(2**31) + 1, 0]


# ---------------------------------------------------------------- ranges at the call


def test_a_value_outside_the_range_is_gpu043_naming_it() -> None:
    counts = zeros((3,), dtype=int32).to("gpu")
    with pytest.raises(MimirError) as err:
        ZOO.histogram(tensor([0, 2, 3, 1], dtype=int32).to("gpu"), counts)
    assert err.value.code == "GPU043"
    assert "holds 3 at index [2]" in err.value.message and "Range(0, B)" in err.value.message
    assert counts.flat() == [0, 0, 0]  # refused before the kernel ran


def test_the_range_bounds_are_checked_at_both_ends() -> None:
    logits = zeros((1, 3)).to("gpu")
    for bad in (-1, 3):
        with pytest.raises(MimirError, match="GPU043"):
            ZOO.cross_entropy(logits, tensor([bad], dtype=int32).to("gpu"), zeros((1,)).to("gpu"))


def test_manifest_records_the_range_and_hosts_check_it(tmp_path: Path) -> None:
    path = REPO / "tests" / "kernels" / "gathers.py"
    result = compile_source(str(path), path.read_text(), ["wgsl"], function="embedding")
    assert result.ok, result.diagnostics
    manifest = next(
        json.loads(text) for name, text in result.files.items() if name.endswith(".json")
    )
    ids = next(b for b in manifest["buffers"] if b["name"] == "ids")
    assert ids["range"] == [0, "V"]
    assert "range" not in next(b for b in manifest["buffers"] if b["name"] == "out")
    dims = {"N": 4, "V": 3, "D": 2}
    drawn = random_inputs(manifest, dims, seed=5)
    assert all(0 <= x < 3 for x in drawn["ids"])
    drawn["ids"][2] = 3
    with pytest.raises(mf.ManifestError, match=r"holds 3 at index \[2\]"):
        mf.prepare_inputs(manifest, drawn, dims)


# ---------------------------------------------------------------- the race rule


def test_atomic_adds_of_one_element_by_many_program_ids_do_not_race() -> None:
    out = zeros((1,)).to("gpu")
    FIXTURE.total(tensor([1.0, 2.0, 3.5]).to("gpu"), out)
    assert out.flat() == [6.5]


@pytest.mark.parametrize("kernel", ["total_then_read", "total_then_write"])
def test_a_plain_access_of_an_atomic_element_races_in_the_shim_too(kernel: str) -> None:
    fn = getattr(FIXTURE, kernel)
    args = [tensor([1.0, 2.0]).to("gpu"), zeros((1,)).to("gpu")]
    if kernel == "total_then_read":
        args.append(zeros((2,)).to("gpu"))
    with pytest.raises(MimirError, match="GPU028"):
        fn(*args)


def test_atomic_add_outside_an_index_level_kernel_is_refused() -> None:
    from mimir.array import atomic_add

    with pytest.raises(MimirError, match="GPU031"):
        atomic_add(zeros((2,)).to("gpu"), 0, 1.0)
    source = (
        "from mimir.array import Tensor, atomic_add, float32, gpu\n\n\n@gpu\n"
        "def f(x: Tensor[float32, 4]) -> Tensor[float32, 4]:\n"
        "    atomic_add(x, 0, 1.0)\n    return x\n"
    )
    (d,) = check_source("t.py", source).diagnostics
    assert d.code == "GPU031" and "index-level" in d.message


def test_a_plain_store_beside_atomic_add_is_a_coded_refusal_at_compile() -> None:
    path = REPO / "tests" / "fixtures" / "check" / "index_atomics.py"
    result = compile_source(str(path), path.read_text(), ["wgsl"], function="own_element")
    assert [d.code for d in result.diagnostics] == ["GPU071"]
    assert "atomic_add" in result.diagnostics[0].message


# ---------------------------------------------------------------- docs/language.md


def _doc_examples() -> list:
    text = (REPO / "docs" / "language.md").read_text()
    blocks = re.findall(r"```python\n(# example: (gathers_\w+)\n.*?)```", text, re.S)
    return [pytest.param(code, id=name) for code, name in blocks]


def test_the_docs_hold_the_gather_examples() -> None:
    assert len(_doc_examples()) >= 3


@pytest.mark.parametrize("code", _doc_examples())
def test_doc_example_checks_runs_and_compiles(code: str, tmp_path: Path) -> None:
    path = tmp_path / "example.py"
    path.write_text(code)
    assert check_source(str(path), code).diagnostics == []
    run = subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, timeout=120, check=False
    )
    assert run.returncode == 0, run.stderr
    result = compile_source(str(path), code, ["msl", "wgsl", "ptx", "spirv"])
    assert result.ok, result.diagnostics
