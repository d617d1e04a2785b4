"""Warp reductions at the edges, on every executor: nan, infinities, rows of -inf.

Every reduction combines its threads' partial results through `WarpReduce` (PTX
`shfl.sync.bfly`, MSL `simd_sum`/`simd_max`/`simd_min`, a per-warp tree in workgroup
memory for WGSL and SPIR-V) and then one slot per warp. A max or min must propagate nan
from any lane of any warp, as the shim's `maximum` does; a row of -inf must come out of a
softmax as the shim's does. The rows here are shorter than a warp, one warp and a bit,
and several warps; the specials sit in a lane of the second warp where there is one.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from harness import assert_close, random_inputs, run_backend, shim_reference, write_files

from mimir.codegen import compile_source
from mimir.codegen.ir import (
    Barrier,
    Builtin,
    Const,
    For,
    Kernel,
    Let,
    Load,
    Store,
    Var,
    WarpReduce,
    walk_expr,
)
from mimir.codegen.passes.workgroup_memory import to_workgroup_memory
from mimir.runtime import manifest as mf

KERNELS = Path(__file__).parent / "kernels"

CASES = [
    ("reductions", "max_axis2", {"A": 2, "B": 4, "C": 45}),  # 64 threads: two warps
    ("reductions", "max_axis2", {"A": 1, "B": 4, "C": 9}),  # a row shorter than a warp
    ("reductions", "min_axes02_keepdims", {"A": 3, "B": 4, "C": 40}),
    ("big_reduction", "long_rows_max", {"N": 300}),  # 256 threads: eight warps
    ("statistics", "argmax_rows", {"N": 4, "C": 70}),
    ("big_reduction", "long_softmax", {"N": 300}),  # the online max-and-sum
    ("rows", "softmax_row_1000", {"N": 4}),  # the row in registers
    ("rows", "softmax_bounded_row", {"N": 4, "D": 33}),
    # 4 vectors a thread held for a bound of 4096: the nan in a thread's first vector,
    # a row inside every thread's first vector, and a full one
    ("rows", "log_softmax_wide_bounded", {"N": 3, "W": 1000}),
    ("rows", "log_softmax_wide_bounded", {"N": 3, "W": 36}),
    ("rows", "log_softmax_wide_bounded", {"N": 3, "W": 4096}),
    # a softmax in a `row` launch beside other roots, or read at a gathered position
    ("inout", "softmax_lse", {"N": 3, "D": 70}),
    ("inout", "softmax_lse", {"N": 3, "D": 1000}),
    ("gathers", "label_nll_from_a_vector", {"N": 3, "C": 1000}),
    ("gathers", "label_nll_from_a_vector", {"N": 3, "C": 37}),
    ("combos", "root_read_twice", {"N": 3, "M": 60}),
    # strided loops take 4 elements per iteration, then the rest one at a time: rows of
    # one element, rows shorter than the workgroup, and rows of 4 * 128 + 3 (a thread's
    # last elements in the second loop), on each kind of row kernel
    ("layernorm", "layernorm", {"N": 3, "D": 1}),
    ("layernorm", "layernorm", {"N": 3, "D": 515}),
    ("big_reduction", "long_softmax", {"N": 1}),
    ("big_reduction", "long_softmax", {"N": 7}),
    ("big_reduction", "long_softmax", {"N": 515}),
    ("reductions", "max_axis2", {"A": 1, "B": 3, "C": 1}),
    ("reductions", "max_axis2", {"A": 1, "B": 3, "C": 517}),
    # not the last axis: columns, 4 threads each, in 3 slabs of 256 rows (no shuffles)
    ("reductions", "sum_axis0", {"A": 517, "B": 3, "C": 2}),
    ("statistics", "variance_rows", {"N": 3, "C": 1}),
    ("statistics", "variance_rows", {"N": 3, "C": 517}),
    ("statistics", "argmax_rows", {"N": 3, "C": 515}),
    ("rows", "rms_norm_bounded", {"N": 3, "D": 5}),
    # 4 wide: a row of 4 (one thread's vector), 516 (4 * 128 + 4: the second loop) and
    # 2052 (both loops) on PTX and MSL, behind the run-time test of the length; literal
    # rows held in registers 4 wide on every backend
    ("layernorm", "layernorm", {"N": 3, "D": 4}),
    ("layernorm", "layernorm", {"N": 3, "D": 516}),
    # held in registers on PTX and MSL up to 8 per thread (1024): full, the second
    # vector past the row in some threads, and just over
    ("layernorm", "layernorm", {"N": 3, "D": 1024}),
    ("layernorm", "layernorm", {"N": 3, "D": 600}),
    ("layernorm", "layernorm", {"N": 3, "D": 1028}),
    ("big_reduction", "long_softmax", {"N": 1024}),
    ("big_reduction", "long_softmax", {"N": 600}),
    ("big_reduction", "long_softmax", {"N": 1028}),
    # a reduction's pass loop-free up to 1024 on PTX and MSL, each vector guarded
    ("reductions", "max_axis2", {"A": 1, "B": 3, "C": 1024}),
    ("statistics", "argmax_rows", {"N": 3, "C": 600}),
    ("statistics", "variance_rows", {"N": 3, "C": 1028}),
    ("big_reduction", "long_softmax", {"N": 4}),
    ("big_reduction", "long_softmax", {"N": 2052}),
    ("reductions", "max_axis2", {"A": 1, "B": 3, "C": 516}),
    ("statistics", "variance_rows", {"N": 3, "C": 516}),
    ("rows", "layer_norm_512", {"N": 3}),
    ("rows", "log_softmax_row_512", {"N": 3}),
]


def _edges(values: list[float], length: int, softmax: bool) -> list[float]:
    """Row 0 holds a nan (in lane 33 when the row has one), row 1 is all -inf, row 2
    holds +inf (a large number for softmax, where inf - inf is nan on every side)."""
    out = list(values)
    rows = len(out) // length
    if rows > 0:
        out[min(33, length - 1)] = math.nan
    if rows > 1:
        out[length : 2 * length] = [-math.inf] * length
    if rows > 2:
        out[2 * length + length // 2] = 80.0 if softmax else math.inf
    return out


def _compiled(stem: str, function: str, out: Path) -> dict[str, Any]:
    path = KERNELS / f"{stem}.py"
    result = compile_source(str(path), path.read_text(), ["ptx", "msl", "wgsl"], function)
    assert result.ok, [(d.code, d.message) for d in result.diagnostics]
    write_files(result.files, out)
    return {
        b: json.loads((out / b / f"{function}.manifest.json").read_text())
        for b in ("ptx", "msl", "wgsl")
    }


@pytest.mark.parametrize("backend", ["ptx", "msl", "wgsl"])
@pytest.mark.parametrize(("stem", "function", "dims"), CASES, ids=lambda v: str(v))
def test_nan_and_infinities_match_the_shim(
    stem: str, function: str, dims: dict[str, int], backend: str, tmp_path: Path
) -> None:
    manifests = _compiled(stem, function, tmp_path)
    manifest = manifests[backend]
    inputs = random_inputs(manifest, dims, seed=5)
    x = [b for b in manifest["buffers"] if b["role"] == "input"][0]  # the rows (then weights)
    length = mf.buffer_shape(x, dims)[-1]
    inputs[x["name"]] = _edges(inputs[x["name"]], length, "softmax" in function)
    expected = shim_reference(KERNELS / f"{stem}.py", function, inputs, dims, {})
    folder = tmp_path / backend
    actual = run_backend(backend, manifest, folder, inputs, dims)
    if backend == "ptx":
        shuffles = any("shfl.sync.bfly.b32" in p.read_text() for p in folder.glob("*.ptx"))
        assert shuffles or function == "sum_axis0"
    elif backend == "msl":
        simd = any("simd_" in p.read_text() for p in folder.glob("*.metal"))
        assert simd or function == "sum_axis0"
    for name, values in expected.items():
        dtype = next(b["dtype"] for b in manifest["buffers"] if b["name"] == name)
        assert_close(actual[name], values, dtype, label=f"{function}.{name} at {dims}")


def test_row_width_gives_each_thread_about_eight_elements() -> None:
    from mimir.codegen.kernels.context import row_width

    assert [row_width(n) for n in (1, 64, 257, 1024, 1025, 4096)] == [32, 32, 64, 128, 256, 256]
    assert row_width(None) == 128  # a symbolic row: 4 warps
    assert row_width(None, 188) == 256  # enough threads to hold a bounded row in registers


def test_strided_loops_take_four_elements_and_ask_ptxas_not_to_unroll(tmp_path: Path) -> None:
    """A symbolic row length is tested at run time: a multiple of 4 takes the 4-wide
    loops (two 128-bit loads per iteration, then one), any other the strided scalar
    loops (4 elements per iteration, then the rest one at a time); every loop carries
    the pragma (ptxas would unroll them 4 times again)."""
    path = KERNELS / "big_reduction.py"
    result = compile_source(str(path), path.read_text(), ["ptx"], "long_rows_max")
    assert result.ok
    (text,) = [c for name, c in result.files.items() if name.endswith(".ptx")]
    loops = text.split('.pragma "nounroll";')[1:]
    assert len(loops) == 4
    bodies = [loop.split("bra $L_loop")[0] for loop in loops]
    assert [b.count("ld.global.nc.v4.f32") for b in bodies] == [2, 1, 0, 0]
    assert [b.count("ld.global") for b in bodies] == [2, 1, 4, 1]


def test_reductions_without_warp_functions_take_turns_with_two_arrays() -> None:
    """WGSL has no warp functions: each `WarpReduce` goes through workgroup memory
    (`warp.to_workgroup_memory`). A 10-class head and a row max (`narrow.digits`: 11 sums
    over each row's 8 lanes) take two f32 arrays in turns, 2 KiB, not 11 KiB; and no
    thread stores into an array before a barrier that every thread reaches only after
    its last read of that array."""
    path = KERNELS / "narrow.py"
    result = compile_source(str(path), path.read_text(), ["wgsl"], function="digits")
    assert result.ok, [(d.code, d.message) for d in result.diagnostics]
    code = result.files["digits_0_narrow.wgsl"]
    assert isinstance(code, str)
    arrays = re.findall(r"var<workgroup> (warp\d+): array<f32, 256>;", code)
    assert arrays == ["warp0", "warp1"], arrays
    stores = 0
    read_since_barrier: set[str] = set()
    for line in code.splitlines():
        if "workgroupBarrier()" in line:
            read_since_barrier.clear()
            continue
        stored = re.match(r"\s*(warp\d+)\[lid\.x\] = ", line)
        if stored:
            assert stored.group(1) not in read_since_barrier, line
            stores += 1
        read_since_barrier |= set(re.findall(r"(warp\d+)\[lid\.x - ", line))
    assert stores == 11


def test_a_loop_that_reduces_waits_before_its_next_iteration_stores() -> None:
    """Three reductions of one type in a loop body take turns with two arrays: the third
    stores into the first's array, and the next iteration's first stores into the array
    the third just read. The body ends with a barrier, so over two iterations no thread
    stores into an array another may still be reading."""

    lid = Builtin("local_x")
    k = Var("k", "u32")
    reductions = [
        Let(Var(f"t{i}", "f32"), WarpReduce("add", Load("x", lid, "f32"), "f32", 8))
        for i in range(3)
    ]
    loop = For(k, Const(0, "u32"), Const(4, "u32"), Const(1, "u32"), reductions)
    kernel = Kernel("k", "test", (256, 1, 1), (1, 1, 1), [], [], False, [], [loop], [])
    (rewritten,) = to_workgroup_memory(kernel).body
    assert isinstance(rewritten, For) and isinstance(rewritten.body[-1], Barrier)
    assert len(to_workgroup_memory(kernel).shared) == 2
    read_since_barrier: set[str] = set()
    for statement in [*rewritten.body, *rewritten.body]:  # two iterations
        if isinstance(statement, Barrier):
            read_since_barrier.clear()
            continue
        if isinstance(statement, Store):
            assert statement.array not in read_since_barrier, statement
        if isinstance(statement, Let):
            loads = [e for e in walk_expr(statement.value) if isinstance(e, Load)]
            read_since_barrier |= {e.array for e in loads if e.array.startswith("$warp")}
