"""Several results and `InOut` parameters beyond what fixtures show: the manifest's roles,
when the write-back needs a copy launch, the shim's update of the caller's tensor, and the
host checker's view of a kernel's tuple of results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harness import assert_close, random_inputs, shim_reference
from harness.ptx_interp import run_ptx_manifest_cpu

from mimir.array import Dim, InOut, MimirError, Tensor, float32, gpu, tensor
from mimir.check import check_source
from mimir.codegen import compile_source

N = Dim("N")
KERNELS = Path(__file__).resolve().parent / "kernels"

PRELUDE = (
    "from mimir.array import Dim, InOut, Tensor, float32, gpu, zeros\n\n"
    'N = Dim("N")\nD = Dim("D")\n\n'
)


def _manifest(source: str, function: str) -> dict:
    result = compile_source("k.py", PRELUDE + source, ["wgsl"], function=function)
    assert result.ok, [(d.code, d.message) for d in result.diagnostics]
    return json.loads(result.files[f"{function}.manifest.json"])


def test_inout_buffers_have_the_role_inout_and_are_written_in_place() -> None:
    m = _manifest(
        "@gpu\ndef sgd(p: InOut[Tensor[float32, N]], g: Tensor[float32, N], lr: float):\n"
        "    p -= lr * g\n",
        "sgd",
    )
    assert [(b["name"], b["role"]) for b in m["buffers"]] == [("p", "inout"), ("g", "input")]
    (kernel,) = m["kernels"]
    access = {b["buffer"]: b["access"] for b in kernel["bindings"]}
    assert access == {"p": "read_write", "g": "read"}


def _written(m: dict) -> list[list[str]]:
    return [
        [b["buffer"] for b in k["bindings"] if b["access"] == "read_write"] for k in m["kernels"]
    ]


def test_old_value_read_after_the_write_is_copied_back_last() -> None:
    # `old.sum(axis=0)` sums columns of the old `x` in a launch after the one that computes
    # the new value (or beside it): that goes to scratch, and a last launch copies it into
    # `x` (beside the sum's combine, on WGSL, which reads `x` no more).
    m = _manifest(
        "@gpu\ndef f(x: InOut[Tensor[float32, N, D]]) -> Tensor[float32, D]:\n"
        "    old = x\n    x = x * 2.0\n    return old.sum(axis=0)\n",
        "f",
    )
    writes = _written(m)
    assert "x" in writes[-1]
    assert all("x" not in w for w in writes[:-1])


def test_old_rows_folded_by_the_launch_that_writes_them_are_written_in_place() -> None:
    # Row sums of the old `x` and its new rows are one row launch: each workgroup folds its
    # own rows before any thread writes, and each thread writes the elements it read.
    source = "    old = x\n    x = x * 2.0\n    return (x * {}).sum(axis=1) + old.sum(axis=1)\n"
    head = "@gpu\ndef f(x: InOut[Tensor[float32, N, N]]) -> Tensor[float32, N]:\n"
    m = _manifest(head + source.format("old.T.T"), "f")
    assert [k["entry_point"] for k in m["kernels"]] == ["f_0_row"]
    assert "x" in _written(m)[0] and not any(b["role"] == "scratch" for b in m["buffers"])
    # `old.T` reads another row's element, which its own workgroup may have written
    m = _manifest(head + source.format("old.T"), "f")
    assert _written(m)[-1] == ["x"] and len(m["kernels"]) > 1


def test_a_row_read_whole_by_a_small_matrix_product_is_written_in_place(tmp_path: Path) -> None:
    """`p = p @ r` with r 3 x 3 (`schedule.small_matmul`): a thread per row loads its whole
    old row, computes the new one, then stores it, so one launch writes p in place (no
    scratch, no copy), and the result matches the shim. Read through a transpose, the old
    row is another thread's: then the new value goes through scratch and a copy."""
    source = "@gpu\ndef f(p: InOut[Tensor[float32, N, 3]], r: Tensor[float32, 3, 3]):\n"
    m = _manifest(source + "    p = p @ r + 1.0\n", "f")
    assert [k["entry_point"] for k in m["kernels"]] == ["f_0_ew"]
    assert not any(b["role"] == "scratch" for b in m["buffers"])
    square = "@gpu\ndef f(p: InOut[Tensor[float32, 3, 3]], r: Tensor[float32, 3, 3]):\n"
    m = _manifest(square + "    p = p.T @ r\n", "f")
    assert len(m["kernels"]) == 2 and _written(m)[-1] == ["p"]
    path = KERNELS / "small_matmul.py"
    result = compile_source(str(path), path.read_text(), ["ptx"], function="rotate_in_place")
    files = {k: v for k, v in result.files.items() if isinstance(v, str)}
    manifest = json.loads(files["rotate_in_place.manifest.json"])
    assert [k["entry_point"] for k in manifest["kernels"]] == ["rotate_in_place_0_ew"]
    for relative, content in files.items():
        (tmp_path / relative).write_text(content)
    dims = {"N": 300}
    inputs = random_inputs(manifest, dims, seed=8)
    actual = run_ptx_manifest_cpu(manifest, tmp_path, inputs, dims)
    expected = shim_reference(path, "rotate_in_place", inputs, dims, {})
    assert_close(actual["p"], expected["p"], "float32")


def test_a_transposed_read_of_the_old_value_is_written_by_the_mirror_thread(
    tmp_path: Path,
) -> None:
    """`x = x + x.T`: thread (i, j), i <= j, computes the new (i, j) and (j, i) from the
    old values, then stores both (`Elementwise.mirror`): one launch, no scratch, each element
    read once. Against the shim for sides of 1, 7 and 300 (several workgroups), blocks
    in reverse too. A launch with a second output keeps the scratch and the copy:
    another thread would read the element it stores."""
    source = (
        'S = Dim("S")\n\n@gpu\ndef f(x: InOut[Tensor[float32, S, S]]):\n    x = x + x.T\n'
        "@gpu\ndef r(x: InOut[Tensor[float32, S, S]]) -> Tensor[float32, S, S]:\n"
        "    x = x + x.T\n    return x\n"
    )
    m = _manifest(source, "f")
    assert _written(m) == [["x"]] and not any(b["role"] == "scratch" for b in m["buffers"])
    path = tmp_path / "k.py"
    path.write_text(PRELUDE + source)
    for function in ("f", "r"):  # r also returns the new value: stored twice
        result = compile_source(str(path), PRELUDE + source, ["ptx"], function=function)
        assert result.ok
        for relative, content in result.files.items():
            (tmp_path / relative).write_text(content)  # type: ignore[arg-type]
        manifest = json.loads(result.files[f"{function}.manifest.json"])  # type: ignore[arg-type]
        assert len(manifest["kernels"]) == 1
        for side in (1, 7, 300):
            dims = {"S": side}
            inputs = random_inputs(manifest, dims, seed=side)
            stats: list[dict] = []
            actual = run_ptx_manifest_cpu(manifest, tmp_path, inputs, dims, stats=stats)
            back = run_ptx_manifest_cpu(manifest, tmp_path, inputs, dims, reverse_blocks=True)
            expected = shim_reference(path, function, inputs, dims, {})
            assert actual == back
            for name in expected:
                assert_close(actual[name], expected[name], "float32", label=f"{name} at {side}")
            # each element loaded once, by the thread that owns it and its mirror (a
            # diagonal element twice, as itself and as its mirror), and stored once a buffer
            assert sum(st["bytes"]["ld"] for st in stats) == 4 * (side * side + side)
            stores = 4 * side * side * (2 if function == "r" else 1)
            assert sum(st["bytes"]["st"] for st in stats) == stores
    two = (
        "@gpu\ndef g(x: InOut[Tensor[float32, D, D]]) -> Tensor[float32, D, D]:\n"
        "    old = x\n    x = old + old.T\n    return old * 2.0\n"
    )
    m = _manifest(two, "g")
    assert _written(m)[-1] == ["x"] and len(m["kernels"]) == 2  # into scratch, then copied


HALVES = (
    'from mimir.array import concatenate\n\nR = Dim("R")\n\n'
    "@gpu\ndef rope(x: InOut[Tensor[float32, N, 2 * R]], c: Tensor[float32, R], "
    "s: Tensor[float32, R]):\n"
    "    x1 = x[:, :R]\n    x2 = x[:, R:]\n"
    "    x = concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=1)\n"
    "@gpu\ndef spread(x: InOut[Tensor[float32, N, 2 * R]]):\n"
    "    x = concatenate([x[:, R:], x[:, :R] * x[:, :1]], axis=1)\n"
)


def test_an_update_from_its_own_other_half_is_written_by_the_thread_that_owns_both(
    tmp_path: Path,
) -> None:
    """RoPE in place, `x = concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=1)` with
    x1, x2 the halves of x's rows: thread t computes elements j and j + R of a row, both
    from the old values, then stores both (`Elementwise.halves`): one launch, no scratch.
    Against the shim at R = 1, 5 and 300 (several workgroups), blocks in reverse too. An
    update that reads another element of the row (`x[:, :1]`, every thread's) keeps the
    scratch and the copy."""
    source = HALVES
    m = _manifest(source, "rope")
    assert _written(m) == [["x"]] and not any(b["role"] == "scratch" for b in m["buffers"])
    path = tmp_path / "k.py"
    text = PRELUDE + source
    path.write_text(text)
    result = compile_source(str(path), text, ["ptx"], function="rope")
    assert result.ok
    for relative, content in result.files.items():
        (tmp_path / relative).write_text(content)  # type: ignore[arg-type]
    manifest = json.loads(result.files["rope.manifest.json"])  # type: ignore[arg-type]
    assert len(manifest["kernels"]) == 1
    for rows, half in ((3, 1), (2, 5), (3, 300)):
        dims = {"N": rows, "R": half}
        inputs = random_inputs(manifest, dims, seed=half)
        actual = run_ptx_manifest_cpu(manifest, tmp_path, inputs, dims)
        back = run_ptx_manifest_cpu(manifest, tmp_path, inputs, dims, reverse_blocks=True)
        expected = shim_reference(path, "rope", inputs, dims, {})
        assert actual == back
        assert_close(actual["x"], expected["x"], "float32", label=f"x at N={rows}, R={half}")
    m = _manifest(source, "spread")
    assert _written(m)[-1] == ["x"] and len(m["kernels"]) == 2  # into scratch, then copied


def test_a_result_named_like_out0_does_not_clash_with_an_unchanged_inout() -> None:
    m = _manifest(
        "@gpu\ndef f(p: InOut[Tensor[float32, N]]) -> tuple[Tensor[float32, N], "
        "Tensor[float32, N]]:\n    return p * 2.0, p + 1.0\n",
        "f",
    )
    assert [(b["name"], b["role"]) for b in m["buffers"]] == [
        ("p", "inout"),
        ("out0", "output"),
        ("out1", "output"),
    ]


def test_a_kernel_that_writes_nothing_is_refused() -> None:
    source = PRELUDE + (
        "@gpu\ndef f(p: InOut[Tensor[float32, N]], g: Tensor[float32, N]):\n"
        "    q = p + g  # noqa: F841\n"
    )
    result = compile_source("k.py", source, ["wgsl"])
    assert [d.code for d in result.diagnostics] == ["GPU071"]
    assert "assigns none of its `InOut` parameters" in result.diagnostics[0].message


@gpu
def _sgd(p: InOut[Tensor[float32, N]], g: Tensor[float32, N], lr: float):
    p -= lr * g


@gpu
def _bad_update(p: InOut[Tensor[float32, N]], g: Tensor[float32, N]) -> Tensor[float32, 2]:
    p = p - g
    return g


def test_the_shim_updates_the_callers_tensor() -> None:
    p = tensor([1.0, 2.0]).to("gpu")
    assert _sgd(p, tensor([2.0, 2.0]).to("gpu"), 0.5) is None
    assert p.tolist() == [0.0, 1.0]


@gpu
def _sgd_annotated(p: InOut[Tensor[float32, N]], g: Tensor[float32, N], lr: float) -> None:
    p -= lr * g


def test_a_kernel_annotated_to_return_none_runs_in_the_shim_as_it_checks() -> None:
    """`-> None` is how Python spells "returns nothing": the checker and the compiler take
    it, so the shim must run it too (it used to refuse it as GPU033)."""
    source = PRELUDE + (
        "@gpu\ndef f(p: InOut[Tensor[float32, N]], g: Tensor[float32, N]) -> None:\n    p -= g\n"
    )
    assert compile_source("k.py", source, ["wgsl"]).ok
    p = tensor([1.0, 2.0]).to("gpu")
    assert _sgd_annotated(p, tensor([2.0, 2.0]).to("gpu"), 0.5) is None
    assert p.tolist() == [0.0, 1.0]


def test_a_failed_call_leaves_the_callers_tensor_as_it_was() -> None:
    p = tensor([1.0, 2.0, 3.0]).to("gpu")
    with pytest.raises(MimirError) as err:
        _bad_update(p, tensor([1.0, 1.0, 1.0]).to("gpu"))
    assert err.value.code == "GPU015"
    assert p.tolist() == [1.0, 2.0, 3.0]


def test_host_code_unpacks_a_tuple_of_results_with_their_shapes() -> None:
    source = PRELUDE + (
        "@gpu\ndef stats(x: Tensor[float32, N, D]) -> "
        "tuple[Tensor[float32, N], Tensor[float32, N]]:\n"
        "    return x.mean(axis=1), x.max(axis=1)\n\n"
        "@gpu\ndef three(x: Tensor[float32, 3]) -> Tensor[float32, 3]:\n    return x\n\n"
        'mean, top = stats(zeros((4, 3)).to("gpu"))\nthree(top)\n'
    )
    found = [(d.code, d.span.line) for d in check_source("k.py", source).diagnostics]
    assert found == [("GPU040", source.count("\n"))]
