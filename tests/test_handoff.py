"""One-launch reductions on WGSL: partials handed between workgroups in tagged atomic words.

WGSL has relaxed atomics and workgroup-scope barriers only, so no fence can make one
workgroup's partial visible to the last workgroup of a launch. Mimir's WGSL kernels
publish each 32-bit partial in two atomic words, each holding 16 bits of it with bit 16
set (`ir.Publish`); the last workgroup (found with a counter, as on PTX, MSL and
SPIR-V) reads both words again until both carry their tag (`ir.Await`), and after a
barrier sets them back to 0 (`ir.Retract`). These tests run such kernels on wgpu at
sizes of many workgroups against the shim, check that every buffer the manifest marks
`zero` is all zeros again after the launch (so the next launch on the same buffers
starts clean), and that the printed WGSL says what the IR means.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from harness import assert_close, write_files

from mimir.codegen import compile_source
from mimir.runtime import manifest as mf
from mimir.runtime.verify import default_scalars, random_inputs, shim_reference

KERNELS = Path(__file__).resolve().parent / "kernels"

# (file, function, dims): a whole sum, sums beside per-row and per-column reductions, a
# whole argmax (its extremum and its first position handed off), a whole `var` (sums
# and squared deviations), column tiles with slabs (a counter a tile), a column `std`
# and a batch norm (moments by slab), and whole reductions of per-row values
# (`whole_of_rows`: each workgroup's share of a cross entropy's mean)
CASES = [
    ("big_reduction.py", "total", {"N": 70001}),
    ("combos.py", "bool_reductions", {"N": 1201, "M": 37}),
    ("statistics.py", "argmax_flat", {"N": 9001}),
    ("statistics.py", "whole_statistics", {"N": 1000, "C": 61}),
    ("statistics.py", "var_all", {"N": 20011}),
    ("reductions.py", "column_stats", {"A": 1500, "B": 70}),
    ("statistics.py", "sample_std", {"S": 2100, "C": 45}),
    ("statistics.py", "batch_norm", {"S": 1300, "C": 33}),
    ("gathers.py", "cross_entropy_mean", {"N": 3000, "C": 7}),
    ("layernorm.py", "shares_and_total", {"N": 2500, "D": 9}),
]


def _compiled(file: str, function: str, tmp_path: Path) -> tuple[dict, Path]:
    path = KERNELS / file
    result = compile_source(str(path), path.read_text(), ["wgsl"], function=function)
    assert result.ok, [(d.code, d.message) for d in result.diagnostics]
    write_files(result.files, tmp_path)
    return json.loads((tmp_path / f"{function}.manifest.json").read_text()), tmp_path


@pytest.mark.parametrize(("file", "function", "dims"), CASES, ids=[c[1] for c in CASES])
def test_one_launch_reduction_matches_the_shim_and_leaves_its_scratch_zeroed(
    file: str, function: str, dims: dict[str, int], tmp_path: Path
) -> None:
    from mimir.runtime.wgpu_runner import run_manifest

    manifest, folder = _compiled(file, function, tmp_path)
    handoffs = [k for k in manifest["kernels"] if "atomicLoad" in (folder / k["file"]).read_text()]
    assert handoffs, "no launch hands partials between workgroups"
    groups = [mf.workgroup_counts(k, dims) for k in handoffs]
    assert all(x * y * z > 1 for x, y, z in groups), groups  # the handoff really runs
    scalars = default_scalars(manifest, dims)
    inputs = random_inputs(manifest, dims, seed=3)
    scratch: dict[str, bytes] = {}
    got = run_manifest(manifest, folder, inputs, dims, scalars, scratch=scratch)
    want = shim_reference(KERNELS / file, function, inputs, dims, scalars)
    dtypes = {b["name"]: b["dtype"] for b in manifest["buffers"]}
    for name, values in want.items():
        assert_close(got[name], values, dtypes[name], label=f"{function} {name}")
    zeroed = [b["name"] for b in manifest["buffers"] if b.get("zero")]
    assert zeroed
    for name in zeroed:
        assert not any(scratch[name]), f"`{name}` is not zero after the launch"


def test_the_partials_are_tagged_words_published_awaited_and_retracted(tmp_path: Path) -> None:
    """`x.sum()` on WGSL: one launch; its partials are a zeroed u32 buffer of two words a
    partial, each stored with bit 16 set, read until both carry it, set back to 0 after
    a barrier; the ticket reaches every thread through `workgroupUniformLoad` (Tint's
    uniformity analysis then accepts the barriers after the other workgroups return)."""
    manifest, folder = _compiled("big_reduction.py", "total", tmp_path)
    (kernel,) = manifest["kernels"]
    wgsl = (folder / kernel["file"]).read_text()
    zeroed = {b["name"]: (b["dtype"], b["shape"]) for b in manifest["buffers"] if b.get("zero")}
    assert zeroed == {
        "scratch0": ("uint32", ["2*cdiv(N, 4096)"]),
        "scratch1": ("uint32", [1]),
    }, zeroed
    assert "var<storage, read_write> scratch0: array<atomic<u32>>;" in wgsl
    assert re.search(r"atomicStore\(&scratch0\[at\d+\], \(bits\d+ & 0xffffu\) \| 0x10000u\)", wgsl)
    assert re.search(
        r"atomicStore\(&scratch0\[at\d+ \+ 1u\], \(bits\d+ >> 16u\) \| 0x10000u\)", wgsl
    )
    assert re.search(r"if \(\(low\d+ & high\d+ & 0x10000u\) != 0u\) \{ break; \}", wgsl)
    assert re.search(r"atomicStore\(&scratch0\[at\d+\], 0u\);", wgsl)
    assert re.search(r"atomicStore\(&scratch0\[at\d+ \+ 1u\], 0u\);", wgsl)
    assert re.search(r"= workgroupUniformLoad\(&ticket\[0u\]\);", wgsl)
    assert "scratch0[" not in wgsl.replace("&scratch0[", "")  # every access is atomic
