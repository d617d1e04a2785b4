"""What an attention launch computes once, and what it leaves out.

A head up to 128 wide is one workgroup's per 64 rows: the scores are computed once for
every column of v, not once per 64 (`kernels._attention`), and a v narrower at run time
than its bound skips the second 64 columns' products.

Causal attention skips the keys its mask hides (`kernels.causal_reach`).

An attention launch under a mask made in the kernel (`tril(ones((T, T))) > 0.0`,
`arange(T)[None, :] <= arange(T)[:, None]`, a band `tril(..., k=70)`, heads sharing one
mask) whose hidden scores are a fill of at most -1e30 stops each workgroup's walk over the
keys after the last key its last row keeps: those blocks' exp(fill - max) are 0. A
`scores_softmax` launch (the probabilities returned) skips them in its first pass and
writes them from the fill, without their product, in its second. Each launch loads fewer
bytes and runs fewer instructions than the same one unmasked, its manifest says what it
skipped and why, and on every backend it matches the shim at sizes of several blocks.
Masks that must not be read that way (a fill of 0, a first row that keeps no key, a mask
broadcast along the keys) skip nothing, and match the shim at the same sizes (a skip
there would not).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harness import assert_close, random_inputs, run_backend, shim_reference, write_files

from mimir.codegen import compile_source
from mimir.runtime import manifest as mf

KERNELS = Path(__file__).parent / "kernels"
BACKENDS = ["ptx", "msl", "wgsl", "spirv"]

SKIPPING = (
    ("flash", "causal"),
    ("flash", "causal_by_positions"),
    ("flash", "causal_band"),
    ("flash", "causal_heads"),
    ("probabilities", "causal_probabilities"),
    ("probabilities", "causal_log_probabilities"),
)
NOT_SKIPPING = (
    ("flash", "zero_filled"),
    ("flash", "strictly_causal"),
    ("flash", "one_key_column"),
    ("flash", "causal_of_a_mask"),
    ("flash", "late_keys"),
    ("flash", "above_one"),
)
# four blocks of rows and of keys, the last partial (the band's first rows skip the
# fourth), heads: two; queries and keys of other counts. The PTX interpreter, slower,
# runs two blocks of each (the first rows skip the second) for three masks, one that
# must not skip (the test above it runs `causal`): its code is the IR the others print.
DIMS = {"T": 200, "D": 16, "H": 2, "Q": 200, "S": 150}
PTX_DIMS = {**DIMS, "T": 70, "Q": 70, "S": 70}
ON_PTX = ("causal_heads", "causal_log_probabilities", "zero_filled")


def _compiled(stem: str, function: str, out: Path) -> dict[str, dict]:
    """The four backends' files under out/<backend>/, and their manifests."""
    path = KERNELS / f"{stem}.py"
    result = compile_source(str(path), path.read_text(), BACKENDS, function)
    assert result.ok, [(d.code, d.message) for d in result.diagnostics]
    write_files(result.files, out)
    return {b: json.loads((out / b / f"{function}.manifest.json").read_text()) for b in BACKENDS}


# the unmasked functions' scale parameter
SCALED = ("flash_attention", "probabilities")


def _run(backend: str, manifest: dict, folder: Path, inputs: dict, dims: dict, stats=None):
    scalars = {"scale": 0.25} if manifest["function"] in SCALED else {}
    return run_backend(backend, manifest, folder, inputs, dims, scalars, stats)


def _dims(manifest: dict) -> dict[str, int]:
    names = {d["name"] for d in manifest["dims"]}
    sizes = PTX_DIMS if manifest["backend"] == "ptx" else DIMS
    return {n: v for n, v in sizes.items() if n in names}


@pytest.mark.parametrize(
    ("stem", "masked", "unmasked", "what", "executed"),
    [
        ("flash", "causal", "flash_attention", "every step for", 0.75),
        (
            "probabilities",
            "causal_probabilities",
            "probabilities",
            "the first pass, and the second pass's scores, for",
            0.9,
        ),
    ],
)
def test_a_causal_launch_skips_the_keys_past_its_rows(
    stem: str, masked: str, unmasked: str, what: str, executed: float, tmp_path: Path
) -> None:
    """At T = 130 (three blocks of 64 rows and of keys), the causal launch computes the
    scores of 1 + 2 + 3 of the 9 blocks of keys the unmasked one does (the probabilities:
    in each pass): it loads at most 3/4 of the bytes and runs at most 3/4 of the
    instructions (the probabilities, which still write every block's, 9/10), and the
    manifest names the blocks skipped and the mask that lets it."""
    dims = {"T": 130, "D": 16}
    stats: dict[str, dict] = {}
    for function in (masked, unmasked):
        manifest = _compiled(stem, function, tmp_path / function)["ptx"]
        inputs = random_inputs(manifest, dims, seed=11)
        launches: list[dict] = []
        folder = tmp_path / function / "ptx"
        actual = _run("ptx", manifest, folder, inputs, dims, stats=launches)
        if function == masked:
            expected = shim_reference(KERNELS / f"{stem}.py", function, inputs, dims, {})
            assert_close(actual["out"], expected["out"], "float32")
            (kernel,) = manifest["kernels"]
            (skipped,) = kernel["work_skipped"]
            assert skipped["work"] == (
                f"{what} the blocks of 64 keys from key r + 64 on, in the workgroup of rows "
                "r .. r + 63"
            )
            assert "`tril(ones((T, T))) > 0.0`" in skipped["proof"]
            assert "is -1e30 at every key j > i of row i" in skipped["proof"]
        else:
            assert "work_skipped" not in manifest["kernels"][0]
        (stats[function],) = launches
    causal, full = stats[masked], stats[unmasked]
    assert causal["bytes"]["ld"] <= 0.75 * full["bytes"]["ld"]
    assert causal["executed"] <= executed * full["executed"]
    assert causal["bytes"]["st"] == full["bytes"]["st"]


@pytest.mark.parametrize(
    ("stem", "function", "backend"),
    [
        (stem, f, b)
        for stem, f in SKIPPING + NOT_SKIPPING
        for b in BACKENDS
        if b != "ptx" or f in ON_PTX
    ],
)
def test_causal_masks_match_the_shim_over_several_blocks(
    stem: str, function: str, backend: str, tmp_path: Path
) -> None:
    manifest = _compiled(stem, function, tmp_path)[backend]
    (kernel,) = manifest["kernels"]
    assert kernel["file"].rsplit(".", 1)[0].endswith(("_attention", "_scores_softmax"))
    assert ("work_skipped" in kernel) == ((stem, function) in SKIPPING)
    dims = _dims(manifest)
    inputs = random_inputs(manifest, dims, seed=7)
    if "keep" in inputs:  # a row the mask input clears: its softmax is over every key
        t = dims["T"]
        inputs["keep"] = [False] * t + list(inputs["keep"])[t:]
    actual = _run(backend, manifest, tmp_path / backend, inputs, dims)
    expected = shim_reference(KERNELS / f"{stem}.py", function, inputs, dims, {})
    assert_close(actual["out"], expected["out"], "float32", label=f"{function} at {dims}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_head_of_up_to_128_columns_computes_its_scores_once(backend: str, tmp_path: Path) -> None:
    """`causal` (D of max 128) at D = 100: one workgroup per 64 rows (each computes the
    scores once, for all 100 columns: before, one per 64 rows and 64 columns), the
    second 64 columns partial; it matches the shim on every backend."""
    manifest = _compiled("flash", "causal", tmp_path)[backend]
    dims = {"T": 70, "D": 100}
    (kernel,) = manifest["kernels"]
    x, y, z = mf.workgroup_counts(kernel, dims)
    assert x * y * z == 2  # 70 rows: two blocks of 64, one tile wide
    inputs = random_inputs(manifest, dims, seed=9)
    actual = _run(backend, manifest, tmp_path / backend, inputs, dims)
    expected = shim_reference(KERNELS / "flash.py", "causal", inputs, dims, {})
    assert_close(actual["out"], expected["out"], "float32", label=f"causal at {dims}")
