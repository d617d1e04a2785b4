"""What the schedule does for speed, as facts about the emitted files.

Execution against the shim is in test_backends_exec.py, test_ptx_exec.py and
test_spirv.py (the zoo files rows.py and proven.py); here: launch counts, loads
per element, contraction to fma, and the guards the proofs remove.
"""

from __future__ import annotations

import json
import math
import re
import struct
from pathlib import Path

from harness import assert_close, random_inputs, require_tool, shim_reference
from harness.ptx_interp import run_ptx_manifest_cpu

from mimir.codegen import compile_source
from mimir.codegen import sizes as sz
from mimir.codegen.builder import ibin, u32
from mimir.codegen.ir import Binary, Var
from mimir.dims import BinOp, Dim
from mimir.runtime.verify import default_scalars

KERNELS = Path(__file__).resolve().parent / "kernels"


def _compile(stem: str, function: str, backend: str) -> dict[str, str]:
    path = KERNELS / f"{stem}.py"
    result = compile_source(str(path), path.read_text(), [backend], function=function)
    assert result.ok, [(d.code, d.message) for d in result.diagnostics]
    return {k: v for k, v in result.files.items() if isinstance(v, str)}


def test_layer_norm_is_one_launch_without_scratch() -> None:
    files = _compile("layernorm", "layernorm", "wgsl")
    manifest = json.loads(files["layernorm.manifest.json"])
    assert [k["file"] for k in manifest["kernels"]] == ["layernorm_0_row.wgsl"]
    assert all(b["role"] != "scratch" for b in manifest["buffers"])


def test_layer_norm_with_its_statistics_is_one_launch_reading_x_once(tmp_path: Path) -> None:
    """The row, its mean and its 1/std (three outputs, two of one element per row) come
    from one `row` launch: x is loaded once and each output stored once (measured in the
    PTX interpreter), and all three match the shim. Row reductions combined into one
    value per row (`max - min`), and rows standardised by a mean and a std, are one
    launch too."""
    files = _compile("layernorm", "layer_norm_with_stats", "ptx")
    manifest = json.loads(files["layer_norm_with_stats.manifest.json"])
    assert [k["file"] for k in manifest["kernels"]] == ["layer_norm_with_stats_0_row.ptx"]
    assert all(b["role"] != "scratch" for b in manifest["buffers"])
    rows, d = 3, 1024
    dims = {"N": rows, "D": d}
    inputs = random_inputs(manifest, dims, seed=5)
    actual, stats = _ptx_run(files, "layer_norm_with_stats", dims, tmp_path / "run", inputs)
    (launch,) = stats
    assert launch["bytes"]["ld"] == 4 * (rows * d + rows * 2 * d)  # x, gamma and beta per row
    assert launch["bytes"]["st"] == 4 * (rows * d + 2 * rows)
    path = KERNELS / "layernorm.py"
    expected = shim_reference(path, "layer_norm_with_stats", inputs, dims, {})
    assert set(actual) == set(expected) == {"out0", "out1", "out2"}
    for name in expected:
        assert_close(actual[name], expected[name], "float32", label=name)
    together = (
        ("reductions", "int_max_min"),  # max - min
        ("inout", "row_stats_named"),  # three outputs
        ("statistics", "standardise"),  # a mean and a std (two passes)
        ("statistics", "arg_with_nans"),  # an argmax and an argmin (two passes each)
    )
    for stem, function in together:
        manifest = json.loads(_compile(stem, function, "wgsl")[f"{function}.manifest.json"])
        assert [k["file"] for k in manifest["kernels"]] == [f"{function}_0_row.wgsl"]


def test_short_rows_are_a_thread_each_in_one_launch() -> None:
    """Rows of at most 32 elements: a thread per row, the row unrolled in registers, no
    threadgroup memory or barrier (a workgroup per row would leave most lanes idle)."""
    files = _compile("layernorm", "short_row_stats", "ptx")
    (kernel,) = json.loads(files["short_row_stats.manifest.json"])["kernels"]
    assert kernel["file"] == "short_row_stats_0_row.ptx"
    assert kernel["workgroup_size"] == [256, 1, 1]
    text = files["short_row_stats_0_row.ptx"]
    assert ".shared" not in text and "bar.sync" not in text and "$L_loop" not in text
    assert text.count("ld.global") == 6  # each element of the row once


def test_row_sums_read_elsewhere_keep_their_own_launch() -> None:
    """Row sums that a whole sum also reads stay inside the row launch (the last
    workgroup sums them, `test_a_whole_reduction_of_per_row_values_ends_the_row_launch`;
    on WGSL through tagged words, tests/test_handoff.py). Read by two whole reductions,
    they go through scratch. A whole reduction that rows read is a launch of its own,
    before the row launch."""

    def kinds(stem: str, function: str, backend: str, source: str | None = None) -> list[str]:
        path = KERNELS / f"{stem}.py"
        text = path.read_text() if source is None else source
        result = compile_source(str(path), text, [backend], function=function)
        assert result.ok, [(d.code, d.message) for d in result.diagnostics]
        manifest = json.loads(result.files[f"{function}.manifest.json"])  # type: ignore[arg-type]
        return [k["file"].removeprefix(f"{function}_") for k in manifest["kernels"]]

    assert kinds("layernorm", "shares_and_total", "ptx") == ["0_row.ptx"]
    assert kinds("layernorm", "shares_and_total", "wgsl") == ["0_row.wgsl"]
    text = (KERNELS / "layernorm.py").read_text()
    twice = text.replace(
        "return x / s[:, None], s.sum()", "return x / s[:, None], s.sum() + s.max()"
    )
    assert twice != text
    assert kinds("layernorm", "shares_and_total", "ptx", twice) == [
        "0_row.ptx",
        "1_reduce.ptx",
        "2_reduce.ptx",
    ]
    # a row launch reads a whole reduction (its own launch, before) from its buffer:
    # x / x.sum(axis=1, keepdims=True) - x.max() is the max, then the rows
    assert kinds("pipeline", "normalize_rows", "ptx") == ["0_reduce.ptx", "1_row.ptx"]


def test_a_value_read_at_another_row_keeps_its_own_launches(tmp_path: Path) -> None:
    """A `row` launch holds one row's reductions, whatever index reads them; an output that
    reads another row's (through a transpose, or a reduction without `keepdims`
    broadcast along the rows of a square matrix) must not be one: these two were, and
    were wrong. Rows kept in place (`m[:, None]`, a gather along the row) still are."""
    for function, dims in (("centred_then_transposed", {}), ("minus_maxima_along_rows", {"N": 5})):
        files = _compile("rows", function, "ptx")
        manifest = json.loads(files[f"{function}.manifest.json"])
        kinds = [k["file"].removeprefix(f"{function}_") for k in manifest["kernels"]]
        assert kinds == ["0_reduce.ptx", "1_ew.ptx"], kinds
        inputs = random_inputs(manifest, dims, seed=2)
        actual, _ = _ptx_run(files, function, dims, tmp_path / function, inputs)
        expected = shim_reference(KERNELS / "rows.py", function, inputs, dims, {})
        assert_close(actual["out"], expected["out"], "float32")
    files = _compile("layernorm", "layer_norm_with_stats", "ptx")
    manifest = json.loads(files["layer_norm_with_stats.manifest.json"])
    assert [k["file"] for k in manifest["kernels"]] == ["layer_norm_with_stats_0_row.ptx"]
    files = _compile("gathers", "label_nll_from_a_vector", "ptx")
    manifest = json.loads(files["label_nll_from_a_vector.manifest.json"])
    assert [k["file"] for k in manifest["kernels"]] == ["label_nll_from_a_vector_0_row.ptx"]


def test_a_row_with_its_reductions_appended_is_one_row_launch(tmp_path: Path) -> None:
    """`concatenate((x, x.sum(axis=1, keepdims=True)), axis=1).relu()` (N, M + 1), and a
    row's max before its centred values: one `row` launch each, the longer output
    written by the row's workgroup in a loop of its own (it was a `reduce` launch, then
    an element-wise one reading x again). Every byte of x is loaded once from global
    memory (4 wide by the fold, again one element at a time by the write: from the
    cache) and every byte of the output stored once, for a row held in registers (1024),
    one that is not (1023) and a short one (5); the results match the shim."""
    source = (
        "from mimir.array import Dim, Tensor, concatenate, float32, gpu\n"
        'N = Dim("N")\nM = Dim("M")\n'
        "@gpu\ndef max_first(x: Tensor[float32, N, M]) -> Tensor[float32, N, M + 1]:\n"
        "    top = x.max(axis=1, keepdims=True)\n"
        "    return concatenate((top, x - x.mean(axis=1, keepdims=True)), axis=1)\n"
    )
    path = tmp_path / "appended.py"
    path.write_text(source)
    result = compile_source(str(path), source, ["ptx"], function="max_first")
    assert result.ok, [(d.code, d.message) for d in result.diagnostics]
    compiled = {
        ("causal", "with_row_sums"): (
            KERNELS / "causal.py",
            _compile("causal", "with_row_sums", "ptx"),
        ),
        ("appended", "max_first"): (
            path,
            {k: v for k, v in result.files.items() if isinstance(v, str)},
        ),
    }
    for (_, function), (source_path, files) in compiled.items():
        manifest = json.loads(files[f"{function}.manifest.json"])
        assert [k["file"] for k in manifest["kernels"]] == [f"{function}_0_row.ptx"]
        assert all(b["role"] != "scratch" for b in manifest["buffers"])
        for m in (1024, 1023, 5):
            dims = {"N": 3, "M": m}
            actual, stats = _ptx_run(files, function, dims, tmp_path / f"{function}_{m}")
            (launch,) = stats
            assert launch["unique_bytes"] == {"ld": 4 * 3 * m, "st": 4 * 3 * (m + 1)}, m
            assert launch["bytes"]["st"] == 4 * 3 * (m + 1)
            inputs = random_inputs(manifest, dims)
            actual, _ = _ptx_run(files, function, dims, tmp_path / f"{function}_{m}_b", inputs)
            expected = shim_reference(source_path, function, inputs, dims, {})
            assert_close(actual["out"], expected["out"], "float32", label=f"{function} {m}")


def _ptx_run(
    files: dict[str, str],
    function: str,
    dims: dict[str, int],
    folder: Path,
    inputs: dict | None = None,
) -> tuple[dict, list[dict]]:
    """Run compiled PTX `files` in the interpreter from `folder` (made here): the outputs
    and the per-launch stats (bytes loaded, instructions executed)."""
    folder.mkdir()
    for relative, content in files.items():
        (folder / relative).write_text(content)
    manifest = json.loads(files[f"{function}.manifest.json"])
    if inputs is None:
        inputs = random_inputs(manifest, dims)
    stats: list[dict] = []
    outputs = run_ptx_manifest_cpu(manifest, folder, inputs, dims, stats=stats)
    return outputs, stats


def _bytes_loaded(stem: str, function: str, dims: dict[str, int], tmp: Path) -> int:
    """Global bytes the PTX loads, all launches and threads, in the interpreter."""
    _, stats = _ptx_run(_compile(stem, function, "ptx"), function, dims, tmp / "run")
    return sum(s["bytes"]["ld"] for s in stats)


def test_a_literal_row_is_loaded_once_per_element(tmp_path: Path) -> None:
    """A 512 row, and a 1000 row, are held in registers: x read once, gamma and beta once
    per row (measured in the interpreter), and exp evaluated once per element (one
    sequence per element a thread holds, none in a loop)."""
    rows = 3
    loaded = _bytes_loaded("rows", "layer_norm_512", {"N": rows}, tmp_path)
    assert loaded == 4 * (rows * 512 + rows * 2 * 512)  # x, then gamma and beta per row
    # 1000 is not a multiple of the 128 threads: held 4 wide all the same, read once
    odd = tmp_path / "odd"
    odd.mkdir()
    loaded = _bytes_loaded("rows", "layer_norm_1000", {"N": rows}, odd)
    assert loaded == 4 * (rows * 1000 + rows * 2 * 1000)
    files = _compile("rows", "log_softmax_row_512", "ptx")
    text = files["log_softmax_row_512_0_softmax.ptx"]
    (kernel,) = json.loads(files["log_softmax_row_512.manifest.json"])["kernels"]
    per_thread = 512 // kernel["workgroup_size"][0]
    assert "$L_loop" not in text  # the row is not walked twice
    assert text.count("// exp: mimir.codegen.backends.ptx.mathlib") == per_thread
    softmax = tmp_path / "softmax"
    softmax.mkdir()
    assert _bytes_loaded("rows", "log_softmax_row_512", {"N": rows}, softmax) == 4 * rows * 512


def test_a_symbolic_softmax_reads_its_row_once_or_twice(tmp_path: Path) -> None:
    """A row that fits 8 per thread (a multiple of 4 up to 1024, tested at run time) is
    held in registers and read once; a longer one, or one of another length, takes the
    online max and sum in one pass, then the write pass: two reads of x, no more."""
    for n, reads in ((1000, 1), (1024, 1), (1002, 2), (2048, 2)):
        folder = tmp_path / str(n)
        folder.mkdir()
        loaded = _bytes_loaded("big_reduction", "long_softmax", {"N": n}, folder)
        assert loaded == reads * 4 * 2 * n, n


def test_a_softmax_the_workgroup_does_not_divide_is_read_once(tmp_path: Path) -> None:
    """A literal row of 1000 over 128 threads, and a row of `max` 2048 (1000, 1002 and
    2048 of it), are held in registers (4 wide where the length is a multiple of 4: a
    literal, or tested at run time on PTX) and x is loaded once, matching the shim."""
    rows = 2
    cases = [("softmax_row_1000", {"N": rows}, 1000)]
    cases += [("softmax_bounded_row", {"N": rows, "D": d}, d) for d in (1000, 1002, 2048)]
    for function, dims, length in cases:
        files = _compile("rows", function, "ptx")
        manifest = json.loads(files[f"{function}.manifest.json"])
        inputs = random_inputs(manifest, dims, seed=length)
        folder = tmp_path / f"{function}{length}"
        actual, stats = _ptx_run(files, function, dims, folder, inputs)
        assert sum(s["bytes"]["ld"] for s in stats) == 4 * rows * length, (function, length)
        expected = shim_reference(KERNELS / "rows.py", function, inputs, dims, {})
        assert_close(actual["out"], expected["out"], "float32", label=f"{function} {length}")
        if length % 4 == 0:
            (kernel,) = manifest["kernels"]
            assert [v["buffer"] for v in kernel["vectorized"]] == ["x", "out"], function


def test_vectors_past_a_bounded_row_are_skipped_not_folded(tmp_path: Path) -> None:
    """A dim of `max` 4096 over 128 threads holds 8 vectors a thread (fewer threads than
    the 256 that 4 vectors would take: the two workgroup reductions are paid once per
    more elements); a row of 1000 or 36 leaves most of them past it, and their lanes
    (what a load that did not run left) must not reach the max: rows near -200
    (exp(-200) is 0 in float32) and near +200 (exp(200) is inf) come out finite and as
    the shim's only if the max is the row's. x is loaded once; a row that is not a
    multiple of 4 takes the online schedule and reads it twice."""
    function = "log_softmax_wide_bounded"
    files = _compile("rows", function, "ptx")
    manifest = json.loads(files[f"{function}.manifest.json"])
    assert manifest["kernels"][0]["workgroup_size"] == [128, 1, 1]
    text = "".join(v for k, v in files.items() if k.endswith(".ptx"))
    assert "setp.nan" not in text  # the row's max passes no nan on: its sum does
    for length in (1000, 36, 4096, 1001):
        dims = {"N": 2, "W": length}
        inputs = random_inputs(manifest, dims, seed=length)
        inputs["x"] = [v - 200.0 for v in inputs["x"][:length]]
        inputs["x"] += [v + 200.0 for v in random_inputs(manifest, dims, seed=1)["x"][:length]]
        folder = tmp_path / str(length)
        actual, stats = _ptx_run(files, function, dims, folder, inputs)
        reads = 1 if length % 4 == 0 else 2
        assert sum(s["bytes"]["ld"] for s in stats) == 4 * 2 * length * reads
        expected = shim_reference(KERNELS / "rows.py", function, inputs, dims, {})
        assert all(abs(v) < 1e4 for v in actual["out"]), length
        assert_close(actual["out"], expected["out"], "float32", label=f"{function} {length}")


def test_a_softmax_beside_row_reductions_is_one_launch(tmp_path: Path) -> None:
    """A softmax joins a `row` launch where its row is also reduced (its log-sum-exp)
    or where an output reads it at a gathered position (a cross-entropy's per-row loss):
    nothing goes through a scratch buffer, the rows are read once (held in registers),
    and the outputs match the shim. A softmax that is its own output keeps its launch."""
    cases = [
        ("gathers", "label_nll_from_a_vector", {"N": 3, "C": 1000}, 3 * 1000 + 3 + 3, 3),
        ("inout", "softmax_lse", {"N": 3, "D": 1024}, 3 * 1024, 3 * 1024 + 3),
    ]
    for stem, function, dims, loaded, stored in cases:
        files = _compile(stem, function, "ptx")
        manifest = json.loads(files[f"{function}.manifest.json"])
        assert [k["file"] for k in manifest["kernels"]] == [f"{function}_0_row.ptx"]
        assert all(b["role"] != "scratch" for b in manifest["buffers"])
        inputs = random_inputs(manifest, dims, seed=3)
        actual, stats = _ptx_run(files, function, dims, tmp_path / function, inputs)
        assert sum(s["bytes"]["ld"] for s in stats) == 4 * loaded, function
        assert sum(s["bytes"]["st"] for s in stats) == 4 * stored, function
        expected = shim_reference(KERNELS / f"{stem}.py", function, inputs, dims, {})
        for name in expected:
            assert_close(actual[name], expected[name], "float32", label=f"{function}.{name}")
    # a row too long to hold is read once per fold and once to write: the softmax takes
    # the group's `x.max(axis=1)` as its max, so 4 passes (max, the log-sum-exp's sum, the
    # softmax's sum, the write), not 5
    dims = {"N": 2, "D": 2048}
    files = _compile("inout", "softmax_lse", "ptx")
    manifest = json.loads(files["softmax_lse.manifest.json"])
    inputs = random_inputs(manifest, dims, seed=4)
    actual, stats = _ptx_run(files, "softmax_lse", dims, tmp_path / "long", inputs)
    assert sum(s["bytes"]["ld"] for s in stats) == 4 * 4 * 2 * 2048
    expected = shim_reference(KERNELS / "inout.py", "softmax_lse", inputs, dims, {})
    for name in expected:
        assert_close(actual[name], expected[name], "float32", label=f"softmax_lse.{name}")
    files = _compile("rows", "softmax_row_1000", "ptx")
    manifest = json.loads(files["softmax_row_1000.manifest.json"])
    assert [k["file"] for k in manifest["kernels"]] == ["softmax_row_1000_0_softmax.ptx"]


def test_a_whole_reduction_of_per_row_values_ends_the_row_launch(tmp_path: Path) -> None:
    """A cross-entropy's mean loss and an accuracy are one launch on PTX: each workgroup
    stores its rows' share (one row's loss; 256 rows' hits summed in a tree), and the last
    workgroup combines the shares. The rows are read once, the labels once per row (not
    by every thread), nothing of one element per row goes through scratch, and the result
    matches the shim over several workgroups. WGSL too is one launch, its shares in
    tagged words (two a share, zeroed again by the last workgroup)."""
    cases = [
        # stem, function, dims, elements loaded, stored: the logits, the labels, the
        # label's logit again (`label_nll_from_a_vector`'s gather) and the partials
        ("gathers", "cross_entropy_mean", {"N": 40, "C": 1000}, 40 * 1000 + 3 * 40, 40 + 1),
        ("statistics", "top1_accuracy", {"N": 40, "C": 64}, 40 * 64 + 2 * 40, 40 + 1),
        # a thread per row of 10: 2 workgroups of 256, 2 partials
        ("statistics", "top1_of_ten", {"N": 300}, 300 * 10 + 300 + 2, 2 + 1),
        # row sums that the shares read too: x once, the shares and the partials stored
        ("layernorm", "shares_and_total", {"N": 40, "D": 256}, 40 * 256 + 40, 40 * 256 + 41),
    ]
    for stem, function, dims, loaded, stored in cases:
        files = _compile(stem, function, "ptx")
        manifest = json.loads(files[f"{function}.manifest.json"])
        assert [k["file"] for k in manifest["kernels"]] == [f"{function}_0_row.ptx"]
        n, classes = dims["N"], dims.get("C", 10)
        inputs = random_inputs(manifest, dims, seed=13)
        if "labels" in inputs:  # in range, a third of them the row's argmax: hits to count
            logits = inputs["logits"]
            for i in range(n):
                row = logits[i * classes : (i + 1) * classes]
                inputs["labels"][i] = row.index(max(row)) if i % 3 == 0 else (7 * i) % classes
        actual, stats = _ptx_run(files, function, dims, tmp_path / function, inputs)
        assert sum(s["bytes"]["ld"] for s in stats) == 4 * loaded, function
        assert sum(s["bytes"]["st"] for s in stats) == 4 * stored, function
        expected = shim_reference(KERNELS / f"{stem}.py", function, inputs, dims, {})
        dtype = "int32" if function == "top1_of_ten" else "float32"
        for name in expected:
            assert_close(actual[name], expected[name], dtype, label=f"{function}.{name}")
        if function == "top1_of_ten":
            assert expected["out"][0] >= n // 3
            # whichever workgroup finishes last combines; the counter is zero again after
            folder = tmp_path / function
            kept: dict[str, bytearray] = {}
            again = run_ptx_manifest_cpu(manifest, folder, inputs, dims, buffers=kept)
            (counter,) = [b["name"] for b in manifest["buffers"] if b.get("zero")]
            assert kept[counter] == bytearray(4)
            again = run_ptx_manifest_cpu(manifest, folder, inputs, dims, buffers=kept)
            back = run_ptx_manifest_cpu(manifest, folder, inputs, dims, reverse_blocks=True)
            assert actual == again == back
    files = _compile("gathers", "cross_entropy_mean", "wgsl")
    manifest = json.loads(files["cross_entropy_mean.manifest.json"])
    kinds = [k["file"].removeprefix("cross_entropy_mean_") for k in manifest["kernels"]]
    assert kinds == ["0_row.wgsl"]
    scratch = [(b["dtype"], b["shape"]) for b in manifest["buffers"] if b["role"] == "scratch"]
    assert scratch == [("uint32", ["2*N"]), ("uint32", [1])]
    # rows that may not exist (`min=0`): no workgroup would find itself last, so the hits
    # go through scratch, and the sum is `partial` then `reduce`, which writes an empty sum
    text = (KERNELS / "statistics.py").read_text().replace('N = Dim("N")', 'N = Dim("N", min=0)')
    assert 'Dim("N", min=0)' in text
    result = compile_source("statistics.py", text, ["ptx"], function="top1_of_ten")
    assert result.ok, [(d.code, d.message) for d in result.diagnostics]
    manifest = json.loads(result.files["top1_of_ten.manifest.json"])  # type: ignore[arg-type]
    kinds = [k["file"].removeprefix("top1_of_ten_") for k in manifest["kernels"]]
    assert kinds == ["0_row.ptx", "1_partial.ptx", "2_reduce.ptx"]


def test_whole_reductions_and_outputs_of_one_shape_share_one_pass(tmp_path: Path) -> None:
    """`return y, y.sum()` and `x.max(), x.min(), x * 0.5 + h, h.mean()`: one launch on
    PTX that reads each input once, stores each element-wise output at the elements it
    folds, and folds every reduction into its own partials; the last workgroup combines
    them all, with one counter. WGSL the same, but for `range_and_scaled`, whose one
    launch would bind 9 storage buffers: a `partial` launch that does the same, then one
    `reduce` for every reduction. Against the shim over several workgroups, blocks in
    reverse too, with N*M a multiple of 4 (read 4 wide) and not."""
    dims_of = {"even": {"A": 37, "B": 300}, "odd": {"A": 37, "B": 301}}
    cases = [
        # function, per element: bytes loaded, bytes stored; reductions; the element-wise
        # output
        ("activations_and_their_sum", 4, 4, 1, "out0"),
        ("range_and_scaled", 4 + 2, 2, 3, "out2"),
    ]
    path = KERNELS / "reductions.py"
    for function, loaded, stored, reductions, element in cases:
        files = _compile("reductions", function, "ptx")
        manifest = json.loads(files[f"{function}.manifest.json"])
        assert [k["file"] for k in manifest["kernels"]] == [f"{function}_0_reduce.ptx"]
        counters = [b for b in manifest["buffers"] if b.get("zero")]
        assert len(counters) == 1
        scratch = [b for b in manifest["buffers"] if b["role"] == "scratch"]
        assert len(scratch) == reductions + 1
        for case, dims in dims_of.items():
            n = dims["A"] * dims["B"]
            groups = -(-n // 4096)
            inputs = random_inputs(manifest, dims, seed=n)
            folder = tmp_path / f"{function}_{case}"
            actual, stats = _ptx_run(files, function, dims, folder, inputs)
            # the partials: stored by every workgroup, loaded by the last
            assert sum(s["bytes"]["ld"] for s in stats) == loaded * n + 4 * reductions * groups
            assert sum(s["bytes"]["st"] for s in stats) == stored * n + 4 * reductions * (
                groups + 1
            )
            back = run_ptx_manifest_cpu(manifest, folder, inputs, dims, reverse_blocks=True)
            assert back == actual
            expected = shim_reference(path, function, inputs, dims, {})
            for name in expected:
                dtype = "float16" if name == element == "out2" else "float32"
                assert_close(actual[name], expected[name], dtype, label=f"{function}.{name}")
        files = _compile("reductions", function, "wgsl")
        manifest = json.loads(files[f"{function}.manifest.json"])
        kinds = [k["file"].removeprefix(f"{function}_") for k in manifest["kernels"]]
        if function == "activations_and_their_sum":
            assert kinds == ["0_reduce.wgsl"]
            continue
        assert kinds == ["0_partial.wgsl", "1_reduce.wgsl"]
        assert f"{element}[" in files[f"{function}_0_partial.wgsl"]
        assert f"{element}[" not in files[f"{function}_1_reduce.wgsl"]
    # a reduction whose other axes have size 1 (a sum, a var, an argmax of a (1, B) x)
    # joins too
    files = _compile("reductions", "one_row_statistics", "ptx")
    kernels = json.loads(files["one_row_statistics.manifest.json"])["kernels"]
    kinds = [k["file"].removeprefix("one_row_statistics_") for k in kernels]
    assert kinds == ["0_moments.ptx"]
    # what must not share the pass: an output that reads a reduction's result, another
    # shape, an `InOut` write
    source = (
        "from mimir.array import Dim, InOut, Tensor, float32, gpu\n"
        'N = Dim("N")\nM = Dim("M")\n'
        "@gpu\ndef centred(x: Tensor[float32, N, M]):\n    return x.sum(), x - x.max()\n"
        "@gpu\ndef turned(x: Tensor[float32, N, M]):\n    return x.sum(), x.T * 2.0\n"
        "@gpu\ndef doubled(x: InOut[Tensor[float32, N, M]]):\n"
        "    t = x.sum()\n    x = x * 2.0\n    return t\n"
    )
    # (the sum and the max of `centred` share theirs; `x - max` comes after; `turned`'s
    # two passes, independent, run side by side in one launch, each reading x)
    launches = {
        "centred": ["0_reduce", "1_ew"],
        "turned": ["0_reduce_ew"],
        "doubled": ["0_reduce", "1_ew"],
    }
    for function, expected_kinds in launches.items():
        result = compile_source("apart.py", source, ["ptx"], function=function)
        assert result.ok, [(d.code, d.message) for d in result.diagnostics]
        manifest = json.loads(result.files[f"{function}.manifest.json"])  # type: ignore[arg-type]
        kinds = [k["file"].removeprefix(f"{function}_") for k in manifest["kernels"]]
        assert kinds == [f"{k}.ptx" for k in expected_kinds], function


def test_a_whole_variance_is_split_over_workgroups(tmp_path: Path) -> None:
    """`x.var()` and `x.std(ddof=1)` over a whole tensor: a workgroup per 4096 elements
    (it was one workgroup for the whole tensor), each storing its chunk's sum and squared
    deviations from its own mean; the last combines them (Chan's parallel variance) in the
    same launch (on WGSL through tagged words). Values around 1e4
    whose variance is about 1: E[x^2] - E[x]^2 would lose every digit; this keeps 5."""
    source = (
        "from mimir.array import Dim, Tensor, float32, gpu\n"
        'N = Dim("N", min=2)\nM = Dim("M")\n'
        "@gpu\ndef spread(x: Tensor[float32, N, M]):\n    return x.var(), x.std(ddof=1)\n"
    )
    path = tmp_path / "spread.py"
    path.write_text(source)
    built = {}
    for backend in ("ptx", "wgsl"):
        result = compile_source(str(path), source, [backend], function="spread")
        assert result.ok, [(d.code, d.message) for d in result.diagnostics]
        built[backend] = {k: v for k, v in result.files.items() if isinstance(v, str)}
    kernels = json.loads(built["ptx"]["spread.manifest.json"])["kernels"]
    # the two (independent) launches side by side in one
    assert [k["file"] for k in kernels] == ["spread_0_moments_moments.ptx"]
    assert "cdiv(N*M, 4096) + cdiv(N*M, 4096)" in kernels[0]["workgroups"][0]
    wgsl = json.loads(built["wgsl"]["spread.manifest.json"])["kernels"]
    assert [k["file"] for k in wgsl] == ["spread_0_moments_moments.wgsl"]
    dims = {"N": 37, "M": 301}  # 11137 elements: 3 chunks, the last of 2945
    n = dims["N"] * dims["M"]
    values = [1e4 + ((k * 7919) % 1000) / 500.0 for k in range(n)]
    inputs = {"x": list(struct.unpack(f"{n}f", struct.pack(f"{n}f", *values)))}  # float32
    actual, stats = _ptx_run(built["ptx"], "spread", dims, tmp_path / "run", inputs)
    mean = sum(inputs["x"]) / n
    squares = sum((v - mean) ** 2 for v in inputs["x"])
    assert abs(actual["out0"][0] - squares / n) < 1e-5 * squares / n
    assert abs(actual["out1"][0] - (squares / (n - 1)) ** 0.5) < 1e-5 * (squares / n) ** 0.5
    # per part, x once, and again by each thread from the cache for its deviations; the
    # last workgroup loads the 3 sums twice and the 3 squares once
    assert sum(s["bytes"]["ld"] for s in stats) == 2 * (2 * 4 * n + 4 * 3 * 3)
    # a whole mean and max beside a whole std: folded in the std's first pass
    files = _compile("statistics", "whole_statistics", "ptx")
    manifest = json.loads(files["whole_statistics.manifest.json"])
    assert [k["file"] for k in manifest["kernels"]] == ["whole_statistics_0_moments.ptx"]
    assert len([b for b in manifest["buffers"] if b.get("zero")]) == 1
    dims = {"N": 37, "C": 301}
    inputs = random_inputs(manifest, dims, seed=9)
    actual, stats = _ptx_run(files, "whole_statistics", dims, tmp_path / "whole", inputs)
    expected = shim_reference(KERNELS / "statistics.py", "whole_statistics", inputs, dims, {})
    for name in expected:
        assert_close(actual[name], expected[name], "float32", label=f"whole_statistics.{name}")
    # x twice (the deviations from the cache); the 3 chunks' sums twice, their squares,
    # means and maxes once
    assert sum(s["bytes"]["ld"] for s in stats) == 2 * 4 * n + 4 * 3 * 5
    kinds = [k["file"] for k in json.loads(_compile("statistics", "whole_statistics", "wgsl")[
        "whole_statistics.manifest.json"])["kernels"]]  # fmt: skip
    assert kinds == ["whole_statistics_0_moments.wgsl"]


def test_a_reduction_over_leading_axes_reads_rows_across_threads(tmp_path: Path) -> None:
    """`x.sum(axis=0)`: 32 columns a workgroup, 4 threads a column, so a warp reads 32
    consecutive elements of a row (the strided `reduce` read each element a row apart
    from its neighbour's), in slabs of 256 rows whose partials the last workgroup of each
    column tile combines (its own counter). A literal count of at most 256 rows needs no
    slabs. Against the shim: one row, a last slab of one row, a last tile of one column,
    an outer axis, ints exactly; blocks reversed, and the counters back at zero."""
    source = (
        "from mimir.array import Dim, Tensor, float32, gpu, int32\n"
        'A = Dim("A")\nN = Dim("N")\nM = Dim("M")\n'
        "@gpu\ndef column_sums(x: Tensor[float32, N, M]):\n    return x.sum(axis=0)\n"
        "@gpu\ndef middle_max(x: Tensor[int32, A, N, M]):\n    return x.max(axis=1)\n"
        "@gpu\ndef short_columns(x: Tensor[float32, 100, M]):\n    return x.mean(axis=0)\n"
        'Z = Dim("Z", min=0)\n'
        "@gpu\ndef maybe_none(x: Tensor[float32, Z, M]):\n    return x.sum(axis=0)\n"
    )
    path = tmp_path / "columns.py"
    path.write_text(source)

    def compiled(function: str, backend: str) -> dict[str, str]:
        result = compile_source(str(path), source, [backend], function=function)
        assert result.ok, [(d.code, d.message) for d in result.diagnostics]
        return {k: v for k, v in result.files.items() if isinstance(v, str)}

    cases = [
        ("column_sums", {"N": 1, "M": 40}),
        ("column_sums", {"N": 257, "M": 33}),
        ("column_sums", {"N": 600, "M": 64}),
        ("middle_max", {"A": 3, "N": 300, "M": 5}),
        ("short_columns", {"M": 70}),
        # no rows at all: one slab of none a tile, which writes 0; 256 rows: 2 slabs
        ("maybe_none", {"Z": 0, "M": 40}),
        ("maybe_none", {"Z": 256, "M": 40}),
    ]
    for function, dims in cases:
        files = compiled(function, "ptx")
        manifest = json.loads(files[f"{function}.manifest.json"])
        (kernel,) = manifest["kernels"]
        assert kernel["workgroup_size"] == [128, 1, 1]
        counters = [b for b in manifest["buffers"] if b.get("zero")]
        assert len(counters) == (function != "short_columns")
        rows, columns = dims.get("N", dims.get("Z", 100)), dims["M"] * dims.get("A", 1)
        slabs = -(-rows // 256) if counters else 0
        if function == "maybe_none":
            slabs = (rows + 1 + 255) // 256
        label = f"{function} at {dims}"
        folder = tmp_path / f"{function}_{len(list(tmp_path.iterdir()))}"
        inputs = random_inputs(manifest, dims, seed=rows)
        kept: dict[str, bytearray] = {}
        folder.mkdir()
        for relative, content in files.items():
            (folder / relative).write_text(content)
        stats: list[dict] = []
        actual = run_ptx_manifest_cpu(manifest, folder, inputs, dims, stats=stats, buffers=kept)
        # x once; each slab's partials stored, and loaded by the tile's last workgroup
        assert sum(st["bytes"]["ld"] for st in stats) == 4 * (rows + slabs) * columns, label
        assert sum(st["bytes"]["st"] for st in stats) == 4 * (slabs + 1) * columns, label
        for counter in counters:
            assert kept[counter["name"]] == bytearray(len(kept[counter["name"]])), label
        back = run_ptx_manifest_cpu(manifest, folder, inputs, dims, reverse_blocks=True)
        assert back == actual, label
        expected = shim_reference(path, function, inputs, dims, {})
        dtype = "int32" if function == "middle_max" else "float32"
        assert_close(actual["out"], expected["out"], dtype, label=label)
    files = compiled("column_sums", "wgsl")
    kinds = [k["file"] for k in json.loads(files["column_sums.manifest.json"])["kernels"]]
    assert kinds == ["column_sums_0_reduce.wgsl"]  # the tiles hand off through tagged words
    # a var over leading axes: the same columns, a second read of the slab from the cache
    # for the squared deviations; slabs combined as Chan's parallel variance
    spread = (
        "from mimir.array import Dim, Tensor, float32, gpu\n"
        'A = Dim("A")\nN = Dim("N", min=2)\nM = Dim("M")\n'
        "@gpu\ndef spread(x: Tensor[float32, A, N, M]):\n    return x.std(axis=1, ddof=1)\n"
    )
    result = compile_source("spread.py", spread, ["ptx"], function="spread")
    assert result.ok, [(d.code, d.message) for d in result.diagnostics]
    files = {k: v for k, v in result.files.items() if isinstance(v, str)}
    (kernel,) = json.loads(files["spread.manifest.json"])["kernels"]
    assert kernel["workgroup_size"] == [128, 1, 1]
    (path := tmp_path / "spread.py").write_text(spread)
    for rows in (2, 600):
        dims = {"A": 2, "N": rows, "M": 33}
        n = 2 * rows * 33
        values = [1e4 + ((k * 7919) % 1000) / 500.0 for k in range(n)]
        inputs = {"x": list(struct.unpack(f"{n}f", struct.pack(f"{n}f", *values)))}
        actual, _ = _ptx_run(files, "spread", dims, tmp_path / f"spread{rows}", inputs)
        expected = shim_reference(path, "spread", inputs, dims, {})
        assert_close(actual["out"], expected["out"], "float32", rtol=1e-5, label=f"std {dims}")
    # a batch norm's mean joins its variance's pass: x read for the statistics (twice,
    # the second from the cache), then once to normalise
    files = _compile("statistics", "batch_norm", "ptx")
    manifest = json.loads(files["batch_norm.manifest.json"])
    names = [k["file"] for k in manifest["kernels"]]
    assert names == ["batch_norm_0_moments.ptx", "batch_norm_1_ew.ptx"]
    dims = {"S": 300, "C": 40}
    inputs = random_inputs(manifest, dims, seed=4)
    actual, stats = _ptx_run(files, "batch_norm", dims, tmp_path / "norm", inputs)
    slabs, x = 2, 4 * 300 * 40
    partials = 4 * slabs * 40 * (2 + 1 + 1)  # the sums twice, the squares, the mean's
    # (the normalising launch loads its column's mean and var at each element too)
    assert [st["bytes"]["ld"] for st in stats] == [2 * x + partials, 3 * x]
    expected = shim_reference(KERNELS / "statistics.py", "batch_norm", inputs, dims, {})
    for name in expected:
        assert_close(actual[name], expected[name], "float32", label=f"batch_norm.{name}")
    files = _compile("statistics", "batch_norm", "wgsl")
    kinds = [k["file"] for k in json.loads(files["batch_norm.manifest.json"])["kernels"]]
    assert kinds == ["batch_norm_0_moments.wgsl", "batch_norm_1_ew.wgsl"]
    # an argmax over leading axes: the column's extremum, then its first row; a tie in a
    # later slab loses to an earlier row, a nan wins from wherever it is
    where = (
        "from mimir.array import Dim, Tensor, float32, gpu\n"
        'N = Dim("N")\nM = Dim("M")\n'
        "@gpu\ndef where(x: Tensor[float32, N, M]):\n    return x.argmax(axis=0)\n"
    )
    result = compile_source("where.py", where, ["ptx"], function="where")
    assert result.ok, [(d.code, d.message) for d in result.diagnostics]
    files = {k: v for k, v in result.files.items() if isinstance(v, str)}
    (kernel,) = json.loads(files["where.manifest.json"])["kernels"]
    assert kernel["workgroup_size"] == [128, 1, 1]
    (path := tmp_path / "where.py").write_text(where)
    rows, cols = 600, 3
    x = [float((k * 7919) % 97) for k in range(rows * cols)]
    x[500 * cols + 0] = x[300 * cols + 0] = 1000.0  # column 0: rows 300 and 500 (slab 1, 2)
    x[10 * cols + 1] = x[550 * cols + 1] = 1000.0  # column 1: rows 10 and 550
    x[520 * cols + 2] = math.nan  # column 2: the nan at row 520
    actual, _ = _ptx_run(files, "where", {"N": rows, "M": cols}, tmp_path / "where", {"x": x})
    expected = shim_reference(path, "where", {"x": x}, {"N": rows, "M": cols}, {})
    assert actual["out"] == expected["out"] == [300, 10, 520]
    # reductions over the same leading axes of one shape share the pass: one read of x
    files = _compile("reductions", "column_stats", "ptx")
    manifest = json.loads(files["column_stats.manifest.json"])
    assert [k["file"] for k in manifest["kernels"]] == ["column_stats_0_reduce.ptx"]
    assert len([b for b in manifest["buffers"] if b.get("zero")]) == 1
    dims = {"A": 600, "B": 40}
    inputs = random_inputs(manifest, dims, seed=3)
    actual, stats = _ptx_run(files, "column_stats", dims, tmp_path / "stats", inputs)
    slabs = 3
    loaded = 4 * (600 * 40 + 3 * slabs * 40)
    assert sum(st["bytes"]["ld"] for st in stats) == loaded
    expected = shim_reference(KERNELS / "reductions.py", "column_stats", inputs, dims, {})
    for name in expected:
        assert_close(actual[name], expected[name], "float32", label=f"column_stats.{name}")
    # a count bounded by a dim's max needs no slabs: `x.T[1:]` of M <= 64 has M - 1 rows
    assert sz.upper_bound(BinOp("-", Dim("M", max=64), 1), {}) == 63
    files = _compile("combos", "reduce_a_view", "ptx")
    (kernel,) = json.loads(files["reduce_a_view.manifest.json"])["kernels"]
    assert kernel["file"] == "reduce_a_view_0_reduce.ptx"


def test_a_whole_argmax_is_split_over_workgroups(tmp_path: Path) -> None:
    """`x.argmax()` over a whole tensor: a workgroup per 4096 elements (it was one
    workgroup for the whole tensor) stores its chunk's extremum and the first position
    holding it; the last workgroup takes the extremum of those and the first position
    among the chunks holding it. The extremum in two chunks: the earlier position; a nan
    anywhere: the first nan; ties of ints; bools, none of them true: 0. As the shim
    answers, blocks in reverse order too."""
    source = (
        "from mimir.array import Dim, Tensor, bool_, float32, gpu, int32\n"
        'N = Dim("N")\n'
        "@gpu\ndef where_max(x: Tensor[float32, N]):\n    return x.argmax()\n"
        "@gpu\ndef where_min(x: Tensor[int32, N]):\n    return x.argmin()\n"
        "@gpu\ndef first_true(m: Tensor[bool_, N]):\n    return m.argmax()\n"
    )
    path = tmp_path / "where.py"
    path.write_text(source)
    n = 3 * 4096 + 17
    floats = [float((k * 7919) % 1000) for k in range(n)]
    floats[9000] = floats[5000] = 2000.0  # chunks 2 and 1: the first is 5000
    with_nan = list(floats)
    with_nan[11000] = with_nan[8200] = math.nan
    ints = [(k * 31) % 97 - 40 for k in range(n)]  # -40 first at 0, again every 97
    ints[4100] = ints[12000] = -41
    cases = [
        ("where_max", {"x": floats}, 5000),
        ("where_max", {"x": with_nan}, 8200),
        ("where_min", {"x": ints}, 4100),
        ("first_true", {"m": [k == 10000 or k == 12100 for k in range(n)]}, 10000),
        ("first_true", {"m": [False] * n}, 0),
    ]
    for k, (function, inputs, position) in enumerate(cases):
        result = compile_source(str(path), source, ["ptx"], function=function)
        assert result.ok, [(d.code, d.message) for d in result.diagnostics]
        files = {name: v for name, v in result.files.items() if isinstance(v, str)}
        manifest = json.loads(files[f"{function}.manifest.json"])
        (kernel,) = manifest["kernels"]
        assert "cdiv(N, 4096)" in kernel["workgroups"][0]
        dims = {"N": n}
        folder = tmp_path / f"{function}_{k}"
        actual, _ = _ptx_run(files, function, dims, folder, inputs)
        back = run_ptx_manifest_cpu(manifest, folder, inputs, dims, reverse_blocks=True)
        expected = shim_reference(path, function, inputs, dims, {})
        assert actual["out"] == back["out"] == expected["out"] == [position], (function, k)
    result = compile_source(str(path), source, ["wgsl"], function="where_max")
    manifest = json.loads(result.files["where_max.manifest.json"])  # type: ignore[arg-type]
    kinds = [k["file"] for k in manifest["kernels"]]
    assert kinds == ["where_max_0_argreduce.wgsl"]


def test_a_whole_argmax_shares_the_pass_of_the_other_whole_reductions(tmp_path: Path) -> None:
    """`x.argmax()` beside other whole reductions of x (a sum, a var, an argmin; first or
    after them) joins their pass: one launch, its extremum folded with theirs and its
    first position in a second read of the chunk (a var's squares' read), the last
    workgroup combining every one. x is loaded from global memory twice at most; the
    results match the shim across 3 chunks, with the extremum tied across chunks and a
    nan, blocks in reverse order too. WGSL: two, the one launch binding too many buffers."""
    source = (
        "from mimir.array import Dim, Tensor, float32, gpu, int32\n"
        'N = Dim("N")\n'
        "@gpu\ndef stats(x: Tensor[float32, N]):\n"
        "    return x.sum(), x.var(), x.argmax()\n"
        "@gpu\ndef led(x: Tensor[float32, N]):\n"
        "    return x.argmax(), x.max(), x.argmin()\n"
        "@gpu\ndef ints(x: Tensor[int32, N]):\n"
        "    return x.argmin(), x.min(), x.sum()\n"
    )
    path = tmp_path / "args.py"
    path.write_text(source)
    n = 3 * 4096 + 17
    floats = [float((k * 7919) % 1000) / 7 for k in range(n)]
    floats[9000] = floats[5000] = 2000.0  # the max in chunks 2 and 1: the first is 5000
    floats[4500] = floats[12300] = -5.0  # the min in chunks 1 and 3
    with_nan = list(floats)
    with_nan[11000] = with_nan[8200] = math.nan
    ints = [(k * 31) % 97 - 40 for k in range(n)]  # -40 first at 0, again every 97
    ints[4100] = ints[12000] = -41
    cases = [
        ("stats", {"x": floats}, ["out0", "out1", "out2"]),
        ("stats", {"x": with_nan}, ["out2"]),
        ("led", {"x": floats}, ["out0", "out1", "out2"]),
        ("led", {"x": with_nan}, ["out0", "out2"]),
        ("ints", {"x": ints}, ["out0", "out1", "out2"]),
    ]
    dims = {"N": n}
    for k, (function, inputs, compared) in enumerate(cases):
        result = compile_source(str(path), source, ["ptx"], function=function)
        assert result.ok, [(d.code, d.message) for d in result.diagnostics]
        files = {name: v for name, v in result.files.items() if isinstance(v, str)}
        manifest = json.loads(files[f"{function}.manifest.json"])
        (kernel,) = manifest["kernels"]
        folder = tmp_path / f"{function}_{k}"
        actual, stats = _ptx_run(files, function, dims, folder, inputs)
        loaded = sum(s["bytes"]["ld"] for s in stats)
        assert 2 * 4 * n <= loaded < 2 * 4 * n + 4096, (function, loaded)
        back = run_ptx_manifest_cpu(manifest, folder, inputs, dims, reverse_blocks=True)
        expected = shim_reference(path, function, inputs, dims, {})
        for name in compared:
            dtype = next(b["dtype"] for b in manifest["buffers"] if b["name"] == name)
            for got in (actual[name], back[name]):
                assert_close(got, expected[name], dtype, label=f"{function} {k} {name}")
    # the positions themselves, not only close: 5000 (tied max), 4500 (tied min), 8200 (nan)
    result = compile_source(str(path), source, ["ptx"], function="led")
    files = {name: v for name, v in result.files.items() if isinstance(v, str)}
    for inputs, first, low in (({"x": floats}, 5000, 4500), ({"x": with_nan}, 8200, 8200)):
        actual, _ = _ptx_run(files, "led", dims, tmp_path / f"led_{first}", inputs)
        assert (actual["out0"], actual["out2"]) == ([first], [low])
    result = compile_source(str(path), source, ["wgsl"], function="stats")
    manifest = json.loads(result.files["stats.manifest.json"])  # type: ignore[arg-type]
    kinds = [k["file"] for k in manifest["kernels"]]
    # (one launch would bind 9 storage buffers, past WGSL's 8: x, 3 outputs, 4 partials'
    # buffers and the counter)
    assert kinds == ["stats_0_partial.wgsl", "stats_1_moments.wgsl"]


def test_a_whole_variance_pass_stores_the_outputs_beside_it(tmp_path: Path) -> None:
    """Element-wise outputs of x's shape beside a whole `var` / `std` (after it, before
    it, between other reductions) are stored by the var's pass, in its first read of each
    chunk: one launch, x loaded twice (the squares' read comes from the cache) and each
    output stored once, matching the shim over 3 chunks and a count that is not a
    multiple of 4, blocks in reverse order too. WGSL: one launch too."""
    source = (
        "from mimir.array import Dim, Tensor, float32, gpu\n"
        'N = Dim("N")\nM = Dim("M")\n'
        "@gpu\ndef after(x: Tensor[float32, N, M]):\n    return x.relu(), x.var()\n"
        "@gpu\ndef before(x: Tensor[float32, N, M]):\n    return x.var(), x * 2.0, x.max()\n"
        "@gpu\ndef joined(x: Tensor[float32, N, M]):\n"
        "    return x.sum(), x * 2.0, x.std(), x.min()\n"
    )
    path = tmp_path / "spread.py"
    path.write_text(source)
    for function in ("after", "before", "joined"):
        result = compile_source(str(path), source, ["ptx"], function=function)
        assert result.ok, [(d.code, d.message) for d in result.diagnostics]
        files = {name: v for name, v in result.files.items() if isinstance(v, str)}
        manifest = json.loads(files[f"{function}.manifest.json"])
        (kernel,) = manifest["kernels"]
        assert kernel["file"].endswith("_moments.ptx"), kernel["file"]
        for dims in ({"N": 3, "M": 4096 + 5}, {"N": 1, "M": 7}):
            n = dims["N"] * dims["M"]
            inputs = random_inputs(manifest, dims, seed=3)
            folder = tmp_path / f"{function}_{n}"
            actual, stats = _ptx_run(files, function, dims, folder, inputs)
            (launch,) = stats
            assert launch["unique_bytes"]["ld"] <= 4 * n + 4096, function
            assert 2 * 4 * n <= launch["bytes"]["ld"] < 2 * 4 * n + 4096, function
            assert launch["bytes"]["st"] < 4 * n + 4096, function  # one output, and partials
            back = run_ptx_manifest_cpu(manifest, folder, inputs, dims, reverse_blocks=True)
            expected = shim_reference(path, function, inputs, dims, {})
            for name in expected:
                for got in (actual[name], back[name]):
                    assert_close(got, expected[name], "float32", label=f"{function}.{name}")
    result = compile_source(str(path), source, ["wgsl"], function="after")
    files = {name: v for name, v in result.files.items() if isinstance(v, str)}
    manifest = json.loads(files["after.manifest.json"])
    kinds = [k["file"] for k in manifest["kernels"]]
    assert kinds == ["after_0_moments.wgsl"]
    assert "out0[" in files["after_0_moments.wgsl"]


def test_a_dot_and_a_matrix_vector_einsum_are_reductions_not_matmuls(tmp_path: Path) -> None:
    """`einsum('i,i->')`, `'bi,bi->b'` and `'ij,j->i'` keep no letter of the second
    operand: they are sums of a broadcast product over its last axis (one launch, each
    element of the operands loaded once per output it feeds), not a `@` whose tiles would
    fill one column. They match the shim."""
    cases = [
        ("dot", {"L": 5000}, 2 * 5000, "reduce"),
        ("batched_dot", {"B": 3, "L": 700}, 2 * 3 * 700, "reduce"),
        ("matvec", {"N": 5, "K": 300}, 2 * 5 * 300, "reduce"),
    ]
    for function, dims, loaded, kind in cases:
        files = _compile("einsums", function, "ptx")
        manifest = json.loads(files[f"{function}.manifest.json"])
        assert [k["file"] for k in manifest["kernels"]] == [f"{function}_0_{kind}.ptx"]
        inputs = random_inputs(manifest, dims, seed=17)
        actual, stats = _ptx_run(files, function, dims, tmp_path / function, inputs)
        if function != "dot":  # a dot's last block reads the partials too
            assert sum(s["bytes"]["ld"] for s in stats) == 4 * loaded, function
        expected = shim_reference(KERNELS / "einsums.py", function, inputs, dims, {})
        assert_close(actual["out"], expected["out"], "float32", label=function)


def test_an_einsum_with_several_contracted_or_kept_letters_is_one_matmul(
    tmp_path: Path,
) -> None:
    """`'ikd,kdj->ji'` contracts two letters: they are merged into one axis by a reshape
    and the product is one tiled matmul launch (it was a broadcast product of every
    (i, k, d, j) and a sum: 79x the ideal bytes issued, 2,227 PTX instructions per
    element). An output that names the second operand's letters first is `b.T @ a.T`
    (no transpose launch after); two kept letters on one side are merged and split
    again in the matmul's epilogue (its flat offsets); a batch letter stays a batch. No
    letter kept by the first operand: a column sum, not a matmul filling one row of each
    tile. Each reads every operand element from global memory and matches the shim."""
    cases = [
        ("two_contracted", {"N": 5, "K": 3, "D": 7, "M": 9}, "matmul"),
        ("einsum_transposed", {"N": 33, "K": 17, "M": 65}, "matmul"),
        ("two_kept", {"N": 3, "Q": 5, "K": 11, "M": 4, "D": 6}, "matmul"),
        ("batched_two_contracted", {"B": 2, "N": 6, "K": 3, "D": 5, "M": 7}, "matmul"),
        ("vector_two_contracted", {"K": 40, "D": 13, "M": 70}, "reduce"),
    ]
    for function, dims, kind in cases:
        files = _compile("einsums", function, "ptx")
        manifest = json.loads(files[f"{function}.manifest.json"])
        assert [k["file"] for k in manifest["kernels"]] == [f"{function}_0_{kind}.ptx"]
        assert all(b["role"] != "scratch" for b in manifest["buffers"])
        inputs = random_inputs(manifest, dims, seed=5)
        actual, stats = _ptx_run(files, function, dims, tmp_path / function, inputs)
        inputs_bytes = sum(4 * len(v) for v in inputs.values())
        (launch,) = stats
        assert launch["unique_bytes"]["ld"] == inputs_bytes, function
        expected = shim_reference(KERNELS / "einsums.py", function, inputs, dims, {})
        assert_close(actual["out"], expected["out"], "float32", label=function)


def test_a_reduction_reshaped_to_another_rank_writes_through_its_epilogue(
    tmp_path: Path,
) -> None:
    """`x.sum(axis=2).reshape(N, 2, 3) * 0.5`: the reduce launch's output element o is the
    reshaped result's element o, so the reshape and the multiply are its epilogue (one
    launch, no scratch), matching the shim."""
    function = "reshape_a_reduction"
    files = _compile("combos", function, "ptx")
    manifest = json.loads(files[f"{function}.manifest.json"])
    assert [k["file"] for k in manifest["kernels"]] == [f"{function}_0_reduce.ptx"]
    assert all(b["role"] != "scratch" for b in manifest["buffers"])
    n = 7
    dims = {"N": n}
    inputs = random_inputs(manifest, dims, seed=19)
    actual, stats = _ptx_run(files, function, dims, tmp_path / function, inputs)
    assert sum(s["bytes"]["ld"] for s in stats) == 4 * n * 24
    assert sum(s["bytes"]["st"] for s in stats) == 4 * n * 6
    expected = shim_reference(KERNELS / "combos.py", function, inputs, dims, {})
    assert_close(actual["out"], expected["out"], "float32", label=function)


def test_an_adam_step_in_place_is_one_launch_reading_and_writing_each_buffer_once(
    tmp_path: Path,
) -> None:
    """The parameter's update reads the new moments: they are computed once, in
    registers, and the launch that writes them in place writes the parameter too (four
    buffers read once, three written once), matching the shim. A parameter returned as it
    is and a result computed from it share a launch as well."""
    files = _compile("inout", "adam_step", "ptx")
    manifest = json.loads(files["adam_step.manifest.json"])
    assert [k["file"] for k in manifest["kernels"]] == ["adam_step_0_ew.ptx"]
    # the bias corrections `1 - b**step` are uniform: computed once at the top, not for
    # each of a thread's elements
    assert files["adam_step_0_ew.ptx"].count("call.uni") == 2
    n = 1000
    dims, scalars = {"N": n}, {"lr": 0.01, "step": 3}
    inputs = random_inputs(manifest, dims, seed=7)
    inputs["v"] = [abs(v) for v in inputs["v"]]
    folder = tmp_path / "adam"
    folder.mkdir()
    for relative, content in files.items():
        (folder / relative).write_text(content)
    stats: list[dict] = []
    actual = run_ptx_manifest_cpu(manifest, folder, inputs, dims, scalars, stats=stats)
    (launch,) = stats
    assert launch["bytes"]["ld"] == 4 * 4 * n and launch["bytes"]["st"] == 3 * 4 * n
    expected = shim_reference(KERNELS / "inout.py", "adam_step", inputs, dims, scalars)
    assert set(expected) == {"p", "m", "v"}
    for name in expected:
        assert_close(actual[name], expected[name], "float32", label=f"adam_step.{name}")
    files = _compile("inout", "with_input", "ptx")
    assert len(json.loads(files["with_input.manifest.json"])["kernels"]) == 1


def test_a_product_by_a_small_matrix_is_computed_a_row_per_thread(tmp_path: Path) -> None:
    """`x @ w` with w a matrix parameter of at most 16 x 16 sizes and 64 elements
    (`schedule.small_matmul`) is no tiled launch: a thread computes a whole output row,
    loading its row of x once and w once, and a chain of such layers (three `(h @ w *
    0.5).tanh()` with one 8 x 8 w) is one launch that reads x once and writes the result
    once. The loads are counted in the PTX interpreter, and the result matches the shim."""
    files = _compile("loops", "stacked_layers", "ptx")
    manifest = json.loads(files["stacked_layers.manifest.json"])
    assert [k["file"] for k in manifest["kernels"]] == ["stacked_layers_0_ew.ptx"]
    assert all(b["role"] != "scratch" for b in manifest["buffers"])
    assert ".shared" not in files["stacked_layers_0_ew.ptx"]
    rows = 300
    dims = {"N": rows}
    inputs = random_inputs(manifest, dims, seed=4)
    actual, stats = _ptx_run(files, "stacked_layers", dims, tmp_path / "layers", inputs)
    (launch,) = stats
    assert launch["bytes"]["ld"] == 4 * rows * (8 + 64)  # its row of x, and w, per thread
    assert launch["bytes"]["st"] == 4 * rows * 8
    assert launch["unique_bytes"]["ld"] == 4 * (rows * 8 + 64)
    expected = shim_reference(KERNELS / "loops.py", "stacked_layers", inputs, dims, {})
    assert_close(actual["out"], expected["out"], "float32")
    # a matrix past the bounds keeps its tiled launch (linear.py: 20 x 33)
    files = _compile("linear", "linear_relu", "ptx")
    kernels = json.loads(files["linear_relu.manifest.json"])["kernels"]
    assert [k["file"] for k in kernels] == ["linear_relu_0_matmul.ptx"]
    # read by a row launch's softmax and a column sum beside it: one launch (PTX)
    files = _compile("pipeline", "two_heads", "ptx")
    kernels = json.loads(files["two_heads.manifest.json"])["kernels"]
    assert [k["file"] for k in kernels] == ["two_heads_0_reduce_row.ptx"]
    # a product of a short row's softmax, of another width (w 4 x 3): written by the
    # thread that owns the row, in the softmax's launch
    files = _compile("small_matmul", "softmax_then_project", "ptx")
    kernels = json.loads(files["softmax_then_project.manifest.json"])["kernels"]
    assert [k["file"] for k in kernels] == ["softmax_then_project_0_row.ptx"]


def test_a_product_by_a_narrow_matrix_is_one_launch_without_a_tile(tmp_path: Path) -> None:
    """`h @ w2` with w2 H x 3 (`schedule.narrow_matmul`) is a `narrow` launch, 8 threads a
    row, not a 128 x 128 tile that uses 3 of its columns; the hidden layer of
    `((x @ w1 + b1).relu() @ w2 + b2).sigmoid()` (x N x 13, `schedule.inline_product`) is
    computed inside it and never stored. The loads, counted in the PTX interpreter: each
    of a row's 8 threads loads the row of x once (13), then per hidden unit its 13 weights,
    its bias and its 3 outputs' weights; lane 0 loads b2 and stores the row's 3 results.
    The result matches the shim."""
    files = _compile("mlp", "mlp", "ptx")
    manifest = json.loads(files["mlp.manifest.json"])
    assert [k["file"] for k in manifest["kernels"]] == ["mlp_0_narrow.ptx"]
    assert all(b["role"] != "scratch" for b in manifest["buffers"])
    assert ".shared" not in files["mlp_0_narrow.ptx"]
    rows, hidden = 40, 21  # 40 rows: the second workgroup's last 24 rows are past the end
    dims = {"N": rows, "H": hidden}
    inputs = random_inputs(manifest, dims, seed=5)
    actual, stats = _ptx_run(files, "mlp", dims, tmp_path / "mlp", inputs)
    (launch,) = stats
    assert launch["bytes"]["ld"] == 4 * (rows * 8 * 13 + rows * hidden * (13 + 1 + 3) + rows * 3)
    assert launch["bytes"]["st"] == 4 * rows * 3
    assert launch["unique_bytes"]["ld"] == 4 * (rows * 13 + hidden * (13 + 1 + 3) + 3)
    expected = shim_reference(KERNELS / "mlp.py", "mlp", inputs, dims, {})
    assert_close(actual["out"], expected["out"], "float32")
    # the hidden layer read by a reduction over its columns too: that reduction's launch
    # computes it again (its scratch holds partial maxima), and nothing stores it
    files = _compile("narrow", "hidden_column_max", "ptx")
    manifest = json.loads(files["hidden_column_max.manifest.json"])
    assert [k["file"] for k in manifest["kernels"]] == [
        "hidden_column_max_0_narrow.ptx",
        "hidden_column_max_1_reduce.ptx",
    ]
    assert ["N", "H"] not in [b["shape"] for b in manifest["buffers"]]
    # seventeen columns are past the bound: a tile (linear.py's `x @ w`, w 20 x 33, stays one)
    source = "\n".join(
        [
            "from mimir.array import Dim, Tensor, float32, gpu",
            'N = Dim("N")',
            'H = Dim("H")',
            "@gpu",
            "def wide(h: Tensor[float32, N, H], w: Tensor[float32, H, 17]) -> "
            "Tensor[float32, N, 17]:",
            "    return h @ w",
        ]
    )
    result = compile_source("wide.py", source, ["ptx"], function="wide")
    kernels = json.loads(result.files["wide.manifest.json"])["kernels"]  # type: ignore[arg-type]
    assert [k["file"] for k in kernels] == ["wide_0_matmul.ptx"]


def test_two_products_of_one_operand_read_by_one_epilogue_are_one_launch(
    tmp_path: Path,
) -> None:
    """SwiGLU's `gate * sigmoid(gate) * (x @ w_up)`, gate = x @ w_gate: one tiled launch
    computing both tiles, the gate never stored (no N x H scratch; each thread's stores
    are the output alone), matching the shim; the forms of tests/kernels/paired.py that
    must not pair keep the gate in its own launch."""
    launches = {}
    for function in (
        "gated_hidden",
        "geglu_with_bias",
        "batched_gates",
        "gate_also_returned",
        "gate_summed",
        "other_left",
        "gate_transposed",
    ):
        files = _compile("paired", function, "ptx")
        manifest = json.loads(files[f"{function}.manifest.json"])
        launches[function] = [k["entry_point"].split("_")[-1] for k in manifest["kernels"]]
    assert launches == {
        "gated_hidden": ["matmul"],
        "geglu_with_bias": ["matmul"],
        "batched_gates": ["matmul"],
        "gate_also_returned": ["matmul", "matmul"],
        "gate_summed": ["matmul", "reduce", "matmul"],
        "other_left": ["matmul", "matmul"],
        "gate_transposed": ["matmul", "matmul"],
    }
    files = _compile("paired", "gated_hidden", "ptx")
    manifest = json.loads(files["gated_hidden.manifest.json"])
    assert [b["role"] for b in manifest["buffers"]] == ["input"] * 3 + ["output"]
    dims = {"N": 9, "D": 11, "H": 7}
    inputs = random_inputs(manifest, dims, seed=8)
    actual, (launch,) = _ptx_run(files, "gated_hidden", dims, tmp_path / "gated", inputs)
    assert launch["bytes"]["st"] == 4 * 9 * 7  # the output, nothing else
    assert launch["unique_bytes"]["ld"] == 4 * (9 * 11 + 2 * 11 * 7)
    expected = shim_reference(KERNELS / "paired.py", "gated_hidden", inputs, dims, {})
    assert_close(actual["out"], expected["out"], "float32")


def test_row_reductions_beside_a_narrow_product_are_folded_in_its_launch(tmp_path: Path) -> None:
    """`return h @ w, h.sum(axis=1)` (w H x 3): the `narrow` launch adds each element of h
    it reads to the row's sum too (`schedule._narrow_row_reductions`), so h is read once,
    by one launch; lane 0 stores the row's 3 products and its sum. With the hidden layer
    of an MLP, `z.relu() @ w2, z.max(axis=1)` (z = x @ w1, w1 6 x H), z is computed once
    per element in the one launch and never stored. Both match the shim. A sum the
    product's epilogue reads at its own row (`h @ w + h.sum(axis=1, keepdims=True)`) is
    folded too; one its left operand reads is a launch before."""
    files = _compile("narrow", "head_and_row_sums", "ptx")
    manifest = json.loads(files["head_and_row_sums.manifest.json"])
    assert [k["file"] for k in manifest["kernels"]] == ["head_and_row_sums_0_narrow.ptx"]
    rows, hidden = 37, 29
    dims = {"N": rows, "H": hidden}
    inputs = random_inputs(manifest, dims, seed=8)
    actual, stats = _ptx_run(files, "head_and_row_sums", dims, tmp_path / "sums", inputs)
    (launch,) = stats
    # each element of h and its 3 weights, once; lane 0 stores 3 products and a sum a row
    assert launch["bytes"]["ld"] == 4 * rows * hidden * (1 + 3)
    assert launch["bytes"]["st"] == 4 * rows * (3 + 1)
    expected = shim_reference(KERNELS / "narrow.py", "head_and_row_sums", inputs, dims, {})
    for name in ("out0", "out1"):
        assert_close(actual[name], expected[name], "float32")
    files = _compile("narrow", "hidden_read_twice", "ptx")
    manifest = json.loads(files["hidden_read_twice.manifest.json"])
    assert [k["file"] for k in manifest["kernels"]] == ["hidden_read_twice_0_narrow.ptx"]
    assert all(b["role"] != "scratch" for b in manifest["buffers"])
    inputs = random_inputs(manifest, dims, seed=9)
    actual, _ = _ptx_run(files, "hidden_read_twice", dims, tmp_path / "hidden", inputs)
    expected = shim_reference(KERNELS / "narrow.py", "hidden_read_twice", inputs, dims, {})
    for name in ("out0", "out1"):
        assert_close(actual[name], expected[name], "float32")
    # the product's epilogue reads the sum at its own row: still one launch, lane 0 adds
    # the row's sum to its 3 products, and the sum gets no scratch buffer
    files = _compile("narrow", "head_plus_row_sum", "ptx")
    manifest = json.loads(files["head_plus_row_sum.manifest.json"])
    assert [k["file"] for k in manifest["kernels"]] == ["head_plus_row_sum_0_narrow.ptx"]
    assert all(b["role"] != "scratch" for b in manifest["buffers"])
    inputs = random_inputs(manifest, dims, seed=10)
    actual, _ = _ptx_run(files, "head_plus_row_sum", dims, tmp_path / "plus", inputs)
    expected = shim_reference(KERNELS / "narrow.py", "head_plus_row_sum", inputs, dims, {})
    assert_close(actual["out"], expected["out"], "float32")
    # where the product's left operand reads the mean, the mean is a launch before
    files = _compile("narrow", "centred_square_head", "ptx")
    kernels = json.loads(files["centred_square_head.manifest.json"])["kernels"]
    assert [k["file"] for k in kernels] == [
        "centred_square_head_0_reduce.ptx",
        "centred_square_head_1_narrow.ptx",
    ]


def test_a_softmax_of_a_narrow_product_is_normalised_in_its_launch(tmp_path: Path) -> None:
    """`(h @ w + b).softmax() * 2.0` with w H x 7 (a classifier): the `narrow` launch's
    lane 0 holds the row's 7 logits, normalises them and writes the probabilities, so
    there is no softmax launch and no scratch for the logits; returned beside their
    softmax, the logits are stored by the same launch. Both match the shim. A softmax
    along the other axis needs every row: it keeps its own launch."""
    files = _compile("narrow", "classifier", "ptx")
    manifest = json.loads(files["classifier.manifest.json"])
    assert [k["file"] for k in manifest["kernels"]] == ["classifier_0_narrow.ptx"]
    assert all(b["role"] != "scratch" for b in manifest["buffers"])
    dims = {"N": 45, "H": 37}
    inputs = random_inputs(manifest, dims, seed=6)
    actual, stats = _ptx_run(files, "classifier", dims, tmp_path / "classifier", inputs)
    assert stats[0]["bytes"]["st"] == 4 * 45 * 7
    expected = shim_reference(KERNELS / "narrow.py", "classifier", inputs, dims, {})
    assert_close(actual["out"], expected["out"], "float32")
    files = _compile("narrow", "logits_and_probabilities", "ptx")
    manifest = json.loads(files["logits_and_probabilities.manifest.json"])
    assert [k["file"] for k in manifest["kernels"]] == ["logits_and_probabilities_0_narrow.ptx"]
    dims = {"N": 33, "H": 12}
    inputs = random_inputs(manifest, dims, seed=7)
    actual, _ = _ptx_run(files, "logits_and_probabilities", dims, tmp_path / "both", inputs)
    expected = shim_reference(KERNELS / "narrow.py", "logits_and_probabilities", inputs, dims, {})
    for name in ("out0", "out1"):
        assert_close(actual[name], expected[name], "float32", label=name)
    source = "\n".join(
        [
            "from mimir.array import Dim, Tensor, float32, gpu",
            'N = Dim("N")',
            'H = Dim("H")',
            "@gpu",
            "def columns(h: Tensor[float32, N, H], w: Tensor[float32, H, 3]) -> "
            "Tensor[float32, N, 3]:",
            "    return (h @ w).softmax(axis=0)",
        ]
    )
    result = compile_source("columns.py", source, ["ptx"], function="columns")
    kernels = json.loads(result.files["columns.manifest.json"])["kernels"]  # type: ignore[arg-type]
    assert [k["file"] for k in kernels] == ["columns_0_narrow.ptx", "columns_1_softmax.ptx"]


def test_short_rows_of_several_lengths_are_one_launch(tmp_path: Path) -> None:
    """An argmin and a variance over rows of 5 and a std over rows of 3, per item: one
    thread per item folds all three, each row loaded once (x's elements serve both of
    its reductions), matching the shim."""
    files = _compile("statistics", "small_rows", "ptx")
    manifest = json.loads(files["small_rows.manifest.json"])
    assert [k["file"] for k in manifest["kernels"]] == ["small_rows_0_row.ptx"]
    n = 300
    dims = {"N": n}
    inputs = random_inputs(manifest, dims, seed=11)
    actual, stats = _ptx_run(files, "small_rows", dims, tmp_path / "run", inputs)
    assert sum(s["bytes"]["ld"] for s in stats) == 4 * (5 * n + 3 * n)
    expected = shim_reference(KERNELS / "statistics.py", "small_rows", inputs, dims, {})
    assert_close(actual["out"], expected["out"], "float32", label="small_rows")


def test_multiply_add_contracts_to_fma_on_every_backend() -> None:
    expected = {
        "ptx": "fma.rn.f32",
        "wgsl": "fma(",
        "msl": "fma(",
    }
    for backend, needle in expected.items():
        files = _compile("proven", "multiply_add", backend)
        (kernel,) = [v for k, v in files.items() if not k.endswith(".json")]
        assert needle in kernel, backend
    spirv = compile_source(
        str(KERNELS / "proven.py"), (KERNELS / "proven.py").read_text(), ["spirv"], "multiply_add"
    )
    assert "Fma" in spirv.listings["multiply_add_0_ew.spv"]


def test_guards_proven_unnecessary_are_not_emitted_and_the_manifest_says_why() -> None:
    files = _compile("proven", "tiled_matmul_bias_relu", "wgsl")
    manifest = json.loads(files["tiled_matmul_bias_relu.manifest.json"])
    (kernel,) = manifest["kernels"]
    removed = {g["guard"]: g["proof"] for g in kernel["guards_removed"]}
    assert removed == {
        "row < M": "M is a multiple of 128 (M multiple_of 128)",
        "col < 128": "128 is a multiple of 128",
        "k < K": "K is a multiple of 8 (K multiple_of 8)",
    }
    # the `if`s left, both uniform: workgroups past the end of a folded dispatch (M has no
    # max), and whether there is a next k-slice to stage while this one is multiplied
    body = files["tiled_matmul_bias_relu_0_matmul.wgsl"].split("fn ")[-1]
    assert body.count("if (") == 2 and "if (g0 >= " in body
    assert re.search(r"if \(kn\w* < u\.K\)", body)
    files = _compile("proven", "multiply_add", "wgsl")
    manifest = json.loads(files["multiply_add.manifest.json"])
    assert manifest["kernels"][0]["guards_removed"] == [
        {"guard": "4*v + 3 < N", "proof": "N is a multiple of 4 (N multiple_of 256)"}
    ]
    # without the proof the guard stays, and the manifest has nothing to say
    files = _compile("linear", "linear_relu", "wgsl")
    assert "guards_removed" not in json.loads(files["linear_relu.manifest.json"])["kernels"][0]


def test_division_by_a_power_of_two_is_a_shift_and_a_mask() -> None:
    x = Var("x", "u32")
    assert ibin("/", x, u32(64)) == Binary(">>", x, u32(6), "u32")
    assert ibin("%", x, u32(64)) == Binary("&", x, u32(63), "u32")
    assert ibin("/", x, u32(48)) == Binary("/", x, u32(48), "u32")


def _vectorized(stem: str, function: str) -> dict[str, set[str]]:
    files = _compile(stem, function, "ptx")
    (kernel,) = json.loads(files[f"{function}.manifest.json"])["kernels"]
    out: dict[str, set[str]] = {}
    for v in kernel.get("vectorized", []):
        assert v["lanes"] == 4 and v["proof"]
        out.setdefault(v["access"], set()).add(v["buffer"])
    return out


def test_element_wise_kernels_move_16_bytes_per_access_where_proven() -> None:
    text = _compile("vectors", "vec_add_quads", "ptx")["vec_add_quads_0_ew.ptx"]
    # two vectors per thread: two 16-byte loads of each operand, two stores
    assert len(re.findall(r"ld\.global\.nc\.v4\.f32 \{%f\d+, %f\d+, %f\d+, %f\d+\}", text)) == 4
    assert len(re.findall(r"st\.global\.v4\.f32", text)) == 2
    assert not re.search(r"(ld|st)\.global(\.nc)?\.f32", text)  # no scalar tail: Q multiple_of 4
    assert text.count(".align 16") == 3 + 1  # three buffers and the uniform block
    assert _vectorized("vectors", "vec_add_quads") == {"read": {"a", "b"}, "write": {"out"}}
    # a count not proven a multiple of 4: the vector part and a scalar tail
    text = _compile("vectors", "vec_add", "ptx")["vec_add_0_ew.ptx"]
    assert len(re.findall(r"ld\.global\.nc\.v4\.f32", text)) == 4
    assert len(re.findall(r"ld\.global\.nc\.f32", text)) == 2 * 3  # up to 3 tail elements
    # a literal multiple of 1024: no guard at all
    files = _compile("vectors", "vec_add_2048", "wgsl")
    (kernel,) = json.loads(files["vec_add_2048.manifest.json"])["kernels"]
    assert {g["guard"] for g in kernel["guards_removed"]} == {"4*v + 3 < 2048", "v < 2048 / 4"}
    assert "if (" not in files["vec_add_2048_0_ew.wgsl"]
    assert "array<vec4<f32>>" in files["vec_add_2048_0_ew.wgsl"]


def test_a_literal_row_moves_16_bytes_per_access_on_every_backend() -> None:
    """A 512 row held in registers: thread t holds 4t .. 4t+3 and 4t + 512 .. , and every
    access to the row (x, the write) and to the broadcast weights is one 16-byte access;
    WGSL declares all four buffers as arrays of vectors."""
    files = _compile("rows", "layer_norm_512", "ptx")
    text = files["layer_norm_512_0_row.ptx"]
    assert not re.search(r"(ld|st)\.global(\.nc)?\.f32", text)
    assert len(re.findall(r"ld\.global\.nc\.v4\.f32", text)) == 3 * 512 // 4 // 64
    expected = {"read": {"x", "gamma", "beta"}, "write": {"out"}}
    assert _vectorized("rows", "layer_norm_512") == expected
    (kernel,) = json.loads(files["layer_norm_512.manifest.json"])["kernels"]
    assert {v["proof"] for v in kernel["vectorized"]} == {
        "512 is a multiple of 4; offset a multiple of 16 bytes"
    }
    wgsl = _compile("rows", "layer_norm_512", "wgsl")["layer_norm_512_0_row.wgsl"]
    for name in ("x", "gamma", "beta", "out"):
        assert re.search(rf"\b{name}: array<vec4<f32>>", wgsl), name
    softmax = _compile("rows", "log_softmax_row_512", "ptx")["log_softmax_row_512_0_softmax.ptx"]
    assert not re.search(r"(ld|st)\.global(\.nc)?\.f32", softmax)


def test_a_symbolic_row_is_tested_at_run_time_on_ptx_and_msl(tmp_path: Path) -> None:
    """D not proven a multiple of 4: PTX and MSL test it once. A multiple of 4 up to 1024
    (8 per thread of 128) is held in registers 4 wide and x read once; a larger multiple
    of 4 takes the 4-wide loops, any other length the strided scalar loops, both reading
    x once per pass (three for layer norm). WGSL and SPIR-V (a buffer is an array of
    vectors or of scalars there) keep the scalar loops alone. Measured in the
    interpreter: bytes loaded, and instructions per element (far fewer 4 wide)."""
    files = _compile("layernorm", "layernorm", "ptx")
    text = files["layernorm_0_row.ptx"]
    assert re.search(r"and\.b32 %r\d+, %r\d+, 3;", text)
    assert re.search(r"setp\.le\.u32 %p\d+, %r\d+, 1024;", text)
    assert re.search(r"ld\.global\.nc\.v4\.f32", text) and re.search(r"st\.global\.v4", text)
    (kernel,) = json.loads(files["layernorm.manifest.json"])["kernels"]
    proofs = {(v["buffer"], v["proof"].split(";")[0]) for v in kernel["vectorized"]}
    assert proofs == {
        (name, proof)
        for name in ("x", "gamma", "beta", "out")
        for proof in (
            "D % 4 == 0 and D <= 1024, tested at run time",
            "D % 4 == 0, tested at run time (else one element at a time)",
        )
    }, proofs
    msl = _compile("layernorm", "layernorm", "msl")["layernorm_0_row.metal"]
    assert "float4" in msl
    for backend in ("wgsl", "spirv"):
        manifest = _compile("layernorm", "layernorm", backend)["layernorm.manifest.json"]
        assert "vectorized" not in json.loads(manifest)["kernels"][0], backend
    executed = {}
    for d, passes in ((515, 3), (516, 1), (1024, 1), (2052, 3), (2053, 3)):
        _, (launch,) = _ptx_run(files, "layernorm", {"N": 2, "D": d}, tmp_path / str(d))
        assert launch["bytes"]["ld"] == 4 * 2 * (passes + 2) * d, d  # x, then gamma and beta
        executed[d] = launch["executed"] / (2 * d)
    assert executed[1024] < 0.6 * executed[515], executed
    assert executed[2052] < 0.75 * executed[2053], executed


def test_a_row_reduction_takes_the_cheapest_schedule_its_length_allows(tmp_path: Path) -> None:
    """A max over rows of symbolic length on PTX: loop-free (two guarded vectors per
    thread) for a multiple of 4 up to 1024, the 4-wide loops for a longer multiple of 4,
    the scalar loops otherwise; each reads x once, and each costs more instructions per
    element than the one before (measured in the interpreter)."""
    files = _compile("big_reduction", "long_rows_max", "ptx")
    executed = []
    for n in (1024, 1028, 1026):
        _, (launch,) = _ptx_run(files, "long_rows_max", {"N": n}, tmp_path / str(n))
        assert launch["bytes"]["ld"] == 4 * 3 * n
        executed.append(launch["executed"] / (3 * n))
    assert executed == sorted(executed) and executed[0] < 0.9 * executed[1], executed


def test_a_whole_sum_reads_its_chunks_4_wide_on_ptx(tmp_path: Path) -> None:
    """A sum to one element: workgroups of 128 threads each reduce a 4096 chunk, 4 wide
    when N % 4 == 0 (tested at run time; a whole chunk loop-free, the last one in a
    loop), one element at a time otherwise; the last workgroup combines the partials.
    Both branches match the shim in the interpreter, and the 4-wide one issues far fewer
    instructions per element."""
    files = _compile("big_reduction", "total", "ptx")
    (kernel,) = json.loads(files["total.manifest.json"])["kernels"]
    assert kernel["workgroup_size"] == [128, 1, 1]
    assert [v["buffer"] for v in kernel["vectorized"]] == ["x"]
    path = KERNELS / "big_reduction.py"
    executed = {}
    manifest = json.loads(files["total.manifest.json"])
    for n in (8195, 8196, 12288):
        dims = {"N": n}
        inputs = random_inputs(manifest, dims, seed=n)
        actual, stats = _ptx_run(files, "total", dims, tmp_path / str(n), inputs)
        expected = shim_reference(path, "total", inputs, dims, {})
        assert_close(actual["out"], expected["out"], "float32", label=f"total at N={n}")
        executed[n] = sum(s["executed"] for s in stats) / n
    assert executed[8196] < 0.75 * executed[8195], executed


def test_what_broadcasting_and_layouts_keep_scalar() -> None:
    # the broadcast row, the transposed operand and the float16 operand are read lane by
    # lane; the same-shaped operand and the result are 4-wide
    assert _vectorized("vectors", "vec_row_bias") == {"read": {"x"}, "write": {"out"}}
    assert _vectorized("vectors", "vec_add_transposed") == {"read": {"x"}, "write": {"out"}}
    assert _vectorized("vectors", "vec_widen_half") == {"read": {"x"}, "write": {"out"}}
    assert _vectorized("vectors", "vec_axpy_in_place") == {"read": {"x", "y"}, "write": {"y"}}
    # too small, or possibly empty: the one-element-per-thread schedule
    for function in ("vec_scale_3", "vec_maybe_empty"):
        text = _compile("vectors", function, "ptx")[f"{function}_0_ew.ptx"]
        assert ".v4" not in text and _vectorized("vectors", function) == {}
    # a concatenation reads each part at an offset (in a `select`): never 4-wide
    assert _vectorized("causal", "cache_concat") == {"write": {"out"}}
    # WGSL declares vec4 arrays only for buffers touched 4-wide alone (not by the tail)
    wgsl = _compile("vectors", "vec_add_transposed", "wgsl")["vec_add_transposed_0_ew.wgsl"]
    assert "y: array<f32>" in wgsl and "out: array<f32>" in wgsl  # the tail reads it too


def test_independent_launches_run_side_by_side_in_one_launch(tmp_path: Path) -> None:
    """Launches that share no buffer one of them writes are one launch, each workgroup
    running the part its id falls in (`mimir.codegen.passes.side_by_side`): a column sum of x
    beside row reductions of m (2 launches before), a row min, a whole sum and a column
    max of one mask (3, on WGSL too: its whole and column reductions hand off through
    tagged words),
    a row scan beside a column scan (2), and a row sum beside two element-wise outputs of
    other shapes (3; their 256-thread workgroups cut in two of the row sum's 128, as
    their threads never wait for each other). Each matches the shim in the PTX
    interpreter and moves at most 1.05x its ideal bytes (every input read and every
    output written once: the scratch partials are the rest)."""
    cases = [
        ("reductions", "int_sum_and_bool_any", {"A": 600, "B": 40}, ["0_reduce_row"]),
        ("combos", "bool_reductions", {"N": 600, "M": 40}, ["0_reduce_reduce_reduce"]),
        ("scans", "rows_and_columns", {"N": 40, "M": 33}, ["0_scan_scan"]),
        ("combos", "side_by_side", {"N": 300, "M": 40}, ["0_reduce_ew_ew"]),
    ]
    for stem, function, dims, launches in cases:
        files = _compile(stem, function, "ptx")
        manifest = json.loads(files[f"{function}.manifest.json"])
        assert [k["file"] for k in manifest["kernels"]] == [f"{function}_{x}.ptx" for x in launches]
        inputs = random_inputs(manifest, dims, seed=7)
        actual, stats = _ptx_run(files, function, dims, tmp_path / function, inputs)
        expected = shim_reference(KERNELS / f"{stem}.py", function, inputs, dims, {})
        assert set(actual) == set(expected)
        for name in expected:
            dtype = next(b["dtype"] for b in manifest["buffers"] if b["name"] == name)
            assert_close(actual[name], expected[name], dtype, label=f"{function} {name}")
        ideal = sum(4 * len(v) for v in inputs.values()) + sum(
            4 * len(v) for v in expected.values()
        )
        (launch,) = stats
        moved = launch["unique_bytes"]["ld"] + launch["unique_bytes"]["st"]
        assert ideal <= moved <= 1.05 * ideal, (function, moved / ideal)
    wgsl = json.loads(
        _compile("combos", "bool_reductions", "wgsl")["bool_reductions.manifest.json"]
    )
    assert [k["file"] for k in wgsl["kernels"]] == ["bool_reductions_0_reduce_reduce_reduce.wgsl"]
    # more workgroups (70,005) than a dispatch's x holds: folded into x and y (35,003 x 2),
    # the one past the total returning in the last part's branch; on lavapipe
    require_tool("wgpu")
    from mimir.runtime.wgpu_runner import run_manifest

    files = _compile("combos", "side_by_side", "wgsl")
    manifest = json.loads(files["side_by_side.manifest.json"])
    (kernel,) = manifest["kernels"]
    assert kernel["workgroups"][1] != 1
    dims = {"N": 70001, "M": 2}
    folder = tmp_path / "wgsl"
    folder.mkdir()
    for relative, content in files.items():
        (folder / relative).write_text(content)
    inputs = random_inputs(manifest, dims, seed=3)
    actual = run_manifest(manifest, folder, inputs, dims, {})
    expected = shim_reference(KERNELS / "combos.py", "side_by_side", inputs, dims, {})
    for name in expected:
        assert_close(actual[name], expected[name], "float32", label=f"side_by_side {name}")


def _kernel(name: str, reads: list[str], writes: list[str], width: int = 128, shared: int = 0):
    from mimir.codegen.ir import BufferParam, Kernel, SharedArray

    buffers = [BufferParam(b, "f32", "read") for b in reads]
    buffers += [BufferParam(b, "f32", "read_write") for b in writes]
    arrays = [SharedArray("$tree", "f32", shared)] if shared else []
    return Kernel(name, "ew", (width, 1, 1), (1, 1, 1), buffers, [], False, arrays, [], [])


def test_launches_are_merged_only_where_independent_and_within_every_limit() -> None:
    """`side_by_side.groups`: a launch that reads what an earlier one writes (or writes
    what it reads or writes) runs after it, never beside it; a launch independent of a
    chain joins the chain's first launch (it moves up); workgroups of another size (but a
    wider thread-local launch, cut to size), more threadgroup memory or more buffers than
    every backend guarantees keep launches apart."""
    from mimir.codegen.backends import BACKENDS
    from mimir.codegen.passes import side_by_side

    limit = side_by_side.limits(BACKENDS.values())
    assert limit == side_by_side.Limits(shared_bytes=16384, storage_buffers=8)
    chain = [
        _kernel("a", ["x"], ["p"]),
        _kernel("b", ["p"], ["out0"]),  # reads a's output
        _kernel("c", ["x"], ["out1"]),  # independent of both: beside a
        _kernel("d", ["out1"], ["q"]),  # after c, beside b
        _kernel("e", ["y"], ["x"]),  # writes what a and c read: after them, beside b
    ]
    assert side_by_side.groups([chain], limit) == [[0, 2], [1, 3, 4]]
    chain[4] = _kernel("e", ["out0"], ["x"])  # and reads b's output: after b
    assert side_by_side.groups([chain], limit) == [[0, 2], [1, 3], [4]]
    apart = [
        _kernel("a", ["x"], ["o0"]),
        _kernel("b", ["x"], ["o1"], width=256, shared=16),  # its threads work together
        _kernel("c", ["x"], ["o2"], shared=3000),
        _kernel("d", ["x"], ["o3"], shared=1200),
        _kernel("e", ["y0", "y1", "y2", "y3"], ["o4"]),
        _kernel("f", ["y4", "y5"], ["o5"]),
        _kernel("g", ["x"], ["o6"], width=512),  # thread-local: cut to b's 256
    ]
    # c and d need 16,800 bytes together; a, c, e and f would bind 10 buffers; a and f
    # (thread-local) are narrower than b
    assert side_by_side.groups([apart], limit) == [[0, 2, 4], [1, 6], [3, 5]]
    # a limit broken in one variant (here e's workgroup-memory fallback) keeps them apart
    fallback = [*apart[:4], _kernel("e", ["y0", "y1", "y2", "y3"], ["o4"], shared=3000), *apart[5:]]
    assert side_by_side.groups([apart, fallback], limit) == [[0, 2, 5, 6], [1], [3], [4]]


def test_attention_is_one_launch_that_never_stores_its_scores(tmp_path: Path) -> None:
    """`softmax(f(q @ k.T)) @ v` with v proven at most 128 wide (`schedule._attention`):
    one `attention` launch, no scratch, that loads q, k and v and nothing else and stores
    each output once, at 70 queries and keys (two blocks of rows and two of keys, the
    second partial) under a causal mask made in the kernel; the result matches the shim.
    An unbounded head dim keeps the three launches, and the softmax kept as an output two
    (`scores_softmax`, then the product by v); sizes proven whole blocks drop the guards,
    and the manifest says so."""
    files = _compile("flash", "causal", "ptx")
    manifest = json.loads(files["causal.manifest.json"])
    assert [k["file"] for k in manifest["kernels"]] == ["causal_0_attention.ptx"]
    assert all(b["role"] != "scratch" for b in manifest["buffers"])
    t, d = 70, 24
    dims = {"T": t, "D": d}
    inputs = random_inputs(manifest, dims, seed=3)
    actual, stats = _ptx_run(files, "causal", dims, tmp_path / "causal", inputs)
    (launch,) = stats
    assert launch["unique_bytes"]["ld"] == 4 * 3 * t * d  # q, k and v
    assert launch["bytes"]["st"] == launch["unique_bytes"]["st"] == 4 * t * d
    expected = shim_reference(KERNELS / "flash.py", "causal", inputs, dims, {})
    assert_close(actual["out"], expected["out"], "float32")
    kernels = json.loads(_compile("attention", "attention", "ptx")["attention.manifest.json"])
    assert [k["file"] for k in kernels["kernels"]] == [
        "attention_0_matmul.ptx",
        "attention_1_softmax.ptx",
        "attention_2_matmul.ptx",
    ]
    kernels = json.loads(_compile("flash", "scores_kept", "ptx")["scores_kept.manifest.json"])
    assert [k["file"] for k in kernels["kernels"]] == [
        "scores_kept_0_scores_softmax.ptx",
        "scores_kept_1_narrow.ptx",
    ]
    files = _compile("flash", "whole_blocks", "wgsl")
    (kernel,) = json.loads(files["whole_blocks.manifest.json"])["kernels"]
    assert {g["guard"] for g in kernel["guards_removed"]} == {
        "row < R",
        "key < R",
        "k < 64",
        "col < 64",
    }


def test_a_returned_softmax_of_scores_is_one_launch_that_never_stores_them(
    tmp_path: Path,
) -> None:
    """`softmax(f(q @ k.T))` returned, the product contracting over at most 32 proven
    values (`schedule._scores_softmax`): one `scores_softmax` launch, no scratch, that
    loads q and k and nothing else and stores each output once. At 70 queries and keys
    (two blocks of rows, two of keys, the second partial) under a causal mask made in the
    kernel, and a log-softmax over 150 keys (three blocks: the running max grows twice),
    the results match the shim. A contraction over 48 values, or the scores returned too,
    keeps a matmul and a softmax; sizes proven whole blocks drop the guards."""
    cases = (
        ("causal_probabilities", {"T": 70, "D": 24}, 2 * 70 * 24, 70 * 70),
        ("log_probabilities", {"Q": 70, "S": 150}, (70 + 150) * 24, 70 * 150),
    )
    for function, dims, loaded, stored in cases:
        files = _compile("probabilities", function, "ptx")
        manifest = json.loads(files[f"{function}.manifest.json"])
        assert [k["file"] for k in manifest["kernels"]] == [f"{function}_0_scores_softmax.ptx"]
        assert all(b["role"] != "scratch" for b in manifest["buffers"])
        inputs = random_inputs(manifest, dims, seed=5)
        actual, stats = _ptx_run(files, function, dims, tmp_path / function, inputs)
        (launch,) = stats
        assert launch["unique_bytes"]["ld"] == 4 * loaded  # q and k
        assert launch["bytes"]["st"] == launch["unique_bytes"]["st"] == 4 * stored
        expected = shim_reference(KERNELS / "probabilities.py", function, inputs, dims, {})
        assert_close(actual["out"], expected["out"], "float32")
    for function in ("long_contraction", "scores_and_probabilities"):
        files = _compile("probabilities", function, "ptx")
        kernels = json.loads(files[f"{function}.manifest.json"])["kernels"]
        assert [k["file"].removeprefix(f"{function}_") for k in kernels] == [
            "0_matmul.ptx",
            "1_softmax.ptx",
        ]
    files = _compile("probabilities", "block_probabilities", "wgsl")
    (kernel,) = json.loads(files["block_probabilities.manifest.json"])["kernels"]
    assert {g["guard"] for g in kernel["guards_removed"]} == {"row < R", "key < R", "k < 32"}


def _kernel_files(stem: str, function: str) -> list[str]:
    """The kinds of the launches of `function` in tests/kernels/`stem`.py, in order."""
    manifest = json.loads(_compile(stem, function, "ptx")[f"{function}.manifest.json"])
    return [k["file"].split("_", len(function.split("_")) + 1)[-1] for k in manifest["kernels"]]


def test_einsum_contractions_plan_as_their_products() -> None:
    """An `einsum` that is a product plans exactly as `@` does (tests/kernels/cliffs.py):
    attention written `einsum("td,sd->ts", q, k)` and `einsum("ts,sd->td", p, v)`, batched
    or not, is the one `attention` launch that never stores the scores (the einsum's own
    check node reads its operands but computes nothing, so it is no reader), and a linear
    layer `einsum("nk,mk->nm", x, w)` one matmul with its epilogue."""
    for matmul, einsum in (
        ("attention_matmul", "attention_einsum"),
        ("batched_attention_matmul", "batched_attention_einsum"),
    ):
        assert _kernel_files("cliffs", matmul) == _kernel_files("cliffs", einsum)
        assert _kernel_files("cliffs", einsum) == ["attention.ptx"]
    assert _kernel_files("cliffs", "linear_einsum") == _kernel_files("cliffs", "linear_matmul")
    assert _kernel_files("cliffs", "linear_einsum") == ["matmul.ptx"]


def test_any_element_wise_epilogue_of_a_product_fuses() -> None:
    """An epilogue that reads the product more than once (leaky ReLU as `where(y > 0, y,
    0.01 * y)` or `maximum(y, 0.01 * y)`, GELU written out) is computed from the
    accumulators where the ops meet again (`launches._joined`), as `.relu()` and
    `.gelu()` are: one matmul launch and no M x N scratch, not a matmul and an
    element-wise launch (tests/kernels/cliffs.py)."""
    for function in ("relu_epilogue", "leaky_relu_where", "leaky_relu_maximum", "gelu_method"):
        assert _kernel_files("cliffs", function) == ["matmul.ptx"], function
    assert _kernel_files("cliffs", "gelu_written") == ["matmul.ptx"]
    files = _compile("cliffs", "leaky_relu_where", "ptx")
    manifest = json.loads(files["leaky_relu_where.manifest.json"])
    assert all(b["role"] != "scratch" for b in manifest["buffers"])


def test_keepdims_statistics_returned_by_subscript_are_one_row_launch() -> None:
    """llm.c's layer norm keeps `x.mean(axis=-1, keepdims=True)` and returns it as
    `mean[:, :, 0]`: a subscript of the last axis alone is an output of the row launch
    as the mean without `keepdims` is (tests/kernels/cliffs.py), one launch and no
    scratch, not a row launch, a reduction and an element-wise copy."""
    index = _kernel_files("cliffs", "layernorm_stats_index")
    assert _kernel_files("cliffs", "layernorm_stats_keepdims") == index == ["row.ptx"]
    files = _compile("cliffs", "layernorm_stats_keepdims", "ptx")
    manifest = json.loads(files["layernorm_stats_keepdims.manifest.json"])
    assert all(b["role"] != "scratch" for b in manifest["buffers"])


def test_layout_ops_after_a_product_fold_into_its_store() -> None:
    """A product returned through transposes and reshapes alone (`(a @ b).T`, a batched
    product permuted after its bias and GELU, attention's heads merged with
    `.transpose(0, 2, 1, 3).reshape(B, T, H * D)` or by an einsum that writes `bthd`) is
    stored by its own launch at the re-indexed position (`launches._layout_tail`): one
    launch and no scratch, not the product and an element-wise copy
    (tests/kernels/cliffs.py)."""
    for function in ("product_transposed", "batched_matmul_permuted"):
        assert _kernel_files("cliffs", function) == ["matmul.ptx"], function
    for function in ("attention_heads_merged", "attention_heads_einsum"):
        assert _kernel_files("cliffs", function) == ["attention.ptx"], function
    files = _compile("cliffs", "attention_heads_merged", "ptx")
    manifest = json.loads(files["attention_heads_merged.manifest.json"])
    assert all(b["role"] != "scratch" for b in manifest["buffers"])


def _matches_shim_in_the_interpreter(path: Path, function: str, dims: dict, tmp: Path) -> dict:
    """Compile `function` of the file `path` to PTX, run it in the interpreter at `dims`
    and compare every output with the shim's; the manifest."""
    result = compile_source(str(path), path.read_text(), ["ptx"], function=function)
    assert result.ok, [(d.code, d.message) for d in result.diagnostics]
    files = {k: v for k, v in result.files.items() if isinstance(v, str)}
    tmp.mkdir()
    for name, content in files.items():
        (tmp / name).write_text(content)
    manifest = json.loads(files[f"{function}.manifest.json"])
    inputs = random_inputs(manifest, dims, seed=3)
    scalars = default_scalars(manifest, dims)
    actual = run_ptx_manifest_cpu(manifest, tmp, inputs, dims, scalars)
    expected = shim_reference(path, function, inputs, dims, scalars)
    assert set(actual) == set(expected)
    for name in expected:
        assert_close(actual[name], expected[name], "float32", label=f"{function} {name}")
    return manifest


def test_attention_returning_its_log_sum_exp_is_one_launch(tmp_path: Path) -> None:
    """Flash attention's forward pass as FlashAttention-2 and Triton's fused attention
    return it, the output and each query row's log-sum-exp `m + log(sum(exp(s - m)))`,
    with the probabilities spelled `(s - lse[:, None]).exp()` or `s.softmax(axis=-1)`
    (tests/kernels/cliffs.py): one `attention` launch that stores the online softmax's
    max and log-sum per row (`Attention.lse`), not a matmul, a row launch and a matmul
    with the T x T scores in scratch; both outputs match the shim at a size that is no
    multiple of the blocks."""
    for function in ("attention_lse_written", "attention_lse_softmax"):
        assert _kernel_files("cliffs", function) == ["attention.ptx"], function
        manifest = _matches_shim_in_the_interpreter(
            KERNELS / "cliffs.py", function, {"T": 70, "D": 24}, tmp_path / function
        )
        assert all(b["role"] != "scratch" for b in manifest["buffers"])


LSE_KEPT = """
from mimir.array import Dim, Tensor, float32, gpu

T = Dim("T")
D = Dim("D", max=128)


@gpu
def max_returned_too(
    q: Tensor[float32, T, D], k: Tensor[float32, T, D], v: Tensor[float32, T, D]
) -> tuple[Tensor[float32, T, D], Tensor[float32, T], Tensor[float32, T]]:
    s = q @ k.T
    m = s.max(axis=-1)
    lse = m + (s - m[:, None]).exp().sum(axis=-1).log()
    return (s - lse[:, None]).exp() @ v, lse, m


@gpu
def shifted_by_another_row_value(
    q: Tensor[float32, T, D], k: Tensor[float32, T, D], v: Tensor[float32, T, D]
) -> tuple[Tensor[float32, T, D], Tensor[float32, T]]:
    s = q @ k.T
    m = s.max(axis=-1)
    lse = m + (s - m[:, None]).exp().sum(axis=-1).log()
    return (s - m[:, None]).exp() @ v, lse
"""


def test_a_log_sum_exp_whose_steps_are_read_elsewhere_keeps_its_launches(
    tmp_path: Path,
) -> None:
    """The log-sum-exp rides the attention launch only when nothing else reads its steps
    and the probabilities are the softmax: with the row max returned too, or with
    `exp(s - m)` (not normalised) multiplied by v, the scores are stored and every output
    still matches the shim."""
    path = tmp_path / "kept.py"
    path.write_text(LSE_KEPT)
    for function in ("max_returned_too", "shifted_by_another_row_value"):
        manifest = _matches_shim_in_the_interpreter(
            path, function, {"T": 70, "D": 24}, tmp_path / function
        )
        kinds = [k["file"].rsplit("_", 1)[-1] for k in manifest["kernels"]]
        assert "attention.ptx" not in kinds, (function, kinds)


def test_matmul_backward_is_one_launch_that_sums_the_bias_from_its_tiles(tmp_path: Path) -> None:
    """llm.c's `matmul_backward` (dinp = dout @ w, dweight = dout.T @ inp, dbias =
    dout.sum(axis=0)), with `@` or `einsum` (tests/kernels/cliffs.py): one launch. The two
    products read each other's nothing, so each workgroup computes a tile of one of them
    through the same workgroup arrays (`side_by_side._arrays`: two tiles' 16 KiB would not
    fit WebGPU's 16 KiB side by side otherwise); dweight contracts over the axis the bias
    sums over, so its workgroups of the first column of tiles add up the `dout` values they
    stage and store dbias (`schedule.operand_sums`): no column-sum launch, no partials.
    Every output matches the shim at sizes no multiple of the 128 x 128 tile (two tiles of
    rows, so every staging thread's rows hold values)."""
    for function in ("matmul_backward", "matmul_backward_einsum"):
        assert _kernel_files("cliffs", function) == ["matmul_matmul.ptx"]
        products = _compile("cliffs", function, "wgsl")[f"{function}_0_matmul_matmul.wgsl"]
        arrays = re.findall(r"var<workgroup> \w+: array<f32, (\d+)>", products)
        assert sum(4 * int(count) for count in arrays) == 16384, arrays
        manifest = _matches_shim_in_the_interpreter(
            KERNELS / "cliffs.py", function, {"N": 20, "K": 9, "M": 140}, tmp_path / function
        )
        assert all(b["role"] != "scratch" for b in manifest["buffers"]), manifest["buffers"]


OPERAND_SUMS = """
from mimir.array import Dim, Tensor, float32, gpu

B = Dim("B", max=8)
N = Dim("N")
K = Dim("K")
M = Dim("M")


@gpu
def right_column_means(
    x: Tensor[float32, N, K], w: Tensor[float32, K, M]
) -> tuple[Tensor[float32, N, M], Tensor[float32, M]]:
    return x @ w, w.mean(axis=0) * 2.0


@gpu
def batched_row_sums_kept(
    a: Tensor[float32, B, N, K], b: Tensor[float32, B, K, M]
) -> tuple[Tensor[float32, B, N, M], Tensor[float32, B, N, 1]]:
    return (a @ b).relu(), a.sum(axis=2, keepdims=True)


@gpu
def row_sums_of_another_axis(
    a: Tensor[float32, N, K], b: Tensor[float32, K, M]
) -> tuple[Tensor[float32, N, M], Tensor[float32, K]]:
    return a @ b, a.sum(axis=0)
"""


def test_an_operands_sums_over_the_contraction_axis_are_its_products_epilogue(
    tmp_path: Path,
) -> None:
    """A sum or mean of either operand of a product over the axis it contracts (the right
    one's columns, the left one's rows, batched, kept dims, an epilogue after it) is
    computed by the product's launch from the values it stages: one launch, matching the
    shim at sizes no multiple of the tile. A sum over another axis is a launch of its own."""
    path = tmp_path / "sums.py"
    path.write_text(OPERAND_SUMS)
    # two tiles along the summed operand's kept axis, so every staging thread's part holds values
    sizes = {
        "right_column_means": {"N": 5, "K": 21, "M": 133},
        "batched_row_sums_kept": {"B": 2, "N": 150, "K": 9, "M": 5},
    }
    for function, dims in sizes.items():
        manifest = _matches_shim_in_the_interpreter(path, function, dims, tmp_path / function)
        assert [k["file"].rsplit("_", 1)[-1] for k in manifest["kernels"]] == ["matmul.ptx"]
    manifest = _matches_shim_in_the_interpreter(
        path, "row_sums_of_another_axis", {"N": 5, "K": 9, "M": 7}, tmp_path / "other"
    )
    assert len(manifest["kernels"]) == 2, manifest["kernels"]


def test_a_whole_sum_returned_before_the_rows_last_output_ends_their_row_launch() -> None:
    """Liger-Kernel's cross entropy (tests/kernels/ports_liger.py) returns the mean loss
    first and the gradient, `where(kept[:, None], grad, 0.0)`, second: the gradient's node
    comes after the loss's sum in the source, yet the sum still ends the row launch that
    computes every row's loss and gradient (`Row.total`): one launch on every target, not
    two reductions, a row launch and a sum."""
    for backend, suffix in (("ptx", "row.ptx"), ("wgsl", "row.wgsl")):
        files = _compile("ports_liger", "liger_cross_entropy", backend)
        manifest = json.loads(files["liger_cross_entropy.manifest.json"])
        assert [k["file"].rsplit("_", 1)[-1] for k in manifest["kernels"]] == [suffix]


def test_layer_norm_backward_is_a_row_launch_and_a_column_launch() -> None:
    """llm.c's `layernorm_backward` (tests/kernels/cliffs.py, with per-row means by
    subscript or `keepdims`): dinp is one `row` launch (its two row sums), dweight and
    dbias one column launch that sums both. Fewer cannot be: the column sums need every
    row's, so a launch that computes rows would hand its partials to a last workgroup
    through scratch, beside five inputs and three outputs: more than the 8 storage
    buffers WebGPU guarantees."""
    for function in ("layernorm_backward", "layernorm_backward_keepdims"):
        assert _kernel_files("cliffs", function) == ["row.ptx", "reduce.ptx"], function


FOLD_KEPT = """
from mimir.array import Dim, Tensor, float32, gpu

N = Dim("N")
K = Dim("K")
M = Dim("M")


@gpu
def also_returned(
    a: Tensor[float32, N, K], b: Tensor[float32, K, M]
) -> tuple[Tensor[float32, M, N], Tensor[float32, N, M]]:
    y = a @ b
    return y.T, y


@gpu
def read_again(
    a: Tensor[float32, N, K], b: Tensor[float32, K, M]
) -> tuple[Tensor[float32, M, N], Tensor[float32, N]]:
    y = a @ b
    return y.T, y.sum(axis=1)


@gpu
def then_added(
    a: Tensor[float32, N, K], b: Tensor[float32, K, M], c: Tensor[float32, M, N]
) -> Tensor[float32, M, N]:
    return (a @ b).T + c


@gpu
def swiglu_transposed(
    x: Tensor[float32, N, K], wg: Tensor[float32, K, M], wu: Tensor[float32, K, M]
) -> Tensor[float32, M, N]:
    g = x @ wg
    return (g * g.sigmoid() * (x @ wu)).T
"""


def test_layout_ops_read_by_another_launch_keep_their_own(tmp_path: Path) -> None:
    """Where the product before the layout ops is read by something else too (returned as
    it is, or summed) or the layout result is read by more element-wise ops, the product
    is stored as it is and an element-wise launch re-indexes it, as before; the two
    products of SwiGLU returned transposed are still one paired launch. Each result
    matches the shim at odd sizes (the transposed stores are scalar)."""
    path = tmp_path / "fold_kept.py"
    path.write_text(FOLD_KEPT)
    expected = {
        "also_returned": ["matmul", "ew"],
        "read_again": ["matmul", "reduce"],
        "then_added": ["matmul", "ew"],
        "swiglu_transposed": ["matmul"],
    }
    for function, kinds in expected.items():
        result = compile_source(str(path), FOLD_KEPT, ["ptx"], function=function)
        assert result.ok, [(d.code, d.message) for d in result.diagnostics]
        manifest = json.loads(result.files[f"{function}.manifest.json"])
        files = [k["file"].rsplit("_", 1)[-1].split(".")[0] for k in manifest["kernels"]]
        assert files == kinds, function
        dims = {"N": 7, "K": 13, "M": 5}
        inputs = random_inputs(manifest, dims)
        files = {k: v for k, v in result.files.items() if isinstance(v, str)}
        actual, _ = _ptx_run(files, function, dims, tmp_path / function, inputs)
        want = shim_reference(path, function, inputs, dims, {})
        for buf in manifest["buffers"]:
            if buf["role"] == "output":
                assert_close(actual[buf["name"]], want[buf["name"]], "float32", label=function)
