"""Every kernel of the zoo, compiled for MSL and WGSL, executed and compared with the shim.

For each `@gpu` function in `tests/kernels/*.py`: compile it for both backends
(`mimir.codegen.compile_source`), validate every WGSL file with naga, then run
the kernels on random inputs at several dim bindings and compare each output
with the shim's (`mimir.array`, the definition of the language):

- `one`: every dim at its smallest admissible size (1 when unconstrained);
- `small`: distinct small primes (7, 13, 5, 11...), so no dim is a multiple of
  a workgroup size and no two dims agree by accident;
- `medium`: 131, 17, 19, 23... (past one 16x16 tile or 256-thread group), with the last
  dims small where that would hold more values than `large` (`harness.medium_dims`);
- `large`: one dim grown until some buffer holds >= 100,000 values.

WGSL runs on wgpu (Mesa lavapipe here). MSL runs as C++ on the CPU with one OS
thread per GPU thread (`harness.msl_runner`); a barrier wakes every one of those
threads, so a binding whose barrier kernels would need more than
`MSL_THREAD_BUDGET` of them is skipped for MSL with the reason (WGSL still covers
it), and for `large` the grown dim is the one that keeps that count lowest.
ThreadSanitizer runs on a reduction, a softmax and a matmul, at sizes with several
workgroups and several k-slices; AddressSanitizer on the same kernels and the other matmuls.
"""

from __future__ import annotations

import atexit
import functools
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from harness import (
    SMALL,
    assert_close,
    large_elements,
    medium_dims,
    require_tool,
    tf32_fallback_atol,
    write_files,
)
from support import import_file, kernels_of

from mimir.runtime.verify import (
    choose_dims,
    default_scalars,
    grow_dims,
    random_inputs,
    shim_reference,
)

KERNELS = Path(__file__).resolve().parent / "kernels"
BINDINGS = ("one", "small", "medium", "large")
LARGE = 100_000
MSL_THREAD_BUDGET = 150_000

# Ill-conditioned outputs, where summation order alone moves the result past
# the default tolerance: (file stem, function, output) -> (rtol, atol).
# normalize_rows divides by a row sum of values in [-1, 1), which can be close
# to zero; a reordered sum then changes the quotient by ~1e-3 relative.
LOOSER: dict[tuple[str, str, str], tuple[float, float]] = {
    ("pipeline", "normalize_rows", "out"): (1e-2, 1e-4),
    # adam_step's random second moment `v` is in [-1, 1), not >= 0 as in training, so
    # `b2 * v + (1 - b2) * g * g` can cancel to near zero, and its square root turns an
    # FMA's different rounding into ~1e-2 relative in the step.
    ("inout", "adam_step", "p"): (1e-2, 1e-4),
    # A float16 prefix sum of 131070 values: the GPU accumulates in f32, the shim in
    # double, and a prefix that lands near a half-way point rounds to the other float16
    # neighbour (one float16 ulp, 2**-10 relative).
    ("scans", "flattened_half", "out"): (2e-3, 1e-3),
    # A prefix that cancels to near 0 after partial sums of ~100 keeps their absolute
    # f32 error (a few ulps of the largest partial sum, not of the prefix itself).
    ("scans", "prefix_sum", "out"): (1e-4, 1e-3),
    # A batched matmul over k = 3071 products of values in [-1, 1): f32 sums of that length
    # carry ~1e-4 absolute error where the result cancels to near 0.
    ("einsums", "einsum_bmm", "out"): (1e-4, 2e-4),
    # Float atomics add up to N rows into each of V rows of `grad` in whatever order the
    # threads land: at the "large" size 8191 rows into 5, ~1600 f32 additions per element
    # whose partial sums reach ~30, so a reordering moves the result by ~sqrt(1600) ulps of
    # 30 (~8e-5), past the 1e-5 default though the kernel is right.
    ("gathers", "scatter_add_rows", "grad"): (1e-4, 1e-3),
    # `(x @ w).astype(bfloat16) @ w`: where fma or the summation order moves the first
    # product across a bfloat16 rounding boundary, that element of h moves by one bfloat16
    # ulp (2**-8 relative), and the second product over D = 447 terms carries it: ~1e-2
    # absolute on results of ~50, not a float32 rounding.
    ("half_kinds", "bf16_chain", "out"): (2e-2, 5e-2),
    # The shim rounds the scores and the softmax to bfloat16 (2**-8 relative) before the
    # second product; the fused launch keeps both in float32 (and rounds p to bfloat16 on
    # PTX's tensor cores): outputs, means of v's rows that cancel to ~1e-2, move by ~2e-3.
    ("tensor_cores_half", "attention_bf16", "out"): (2e-2, 4e-3),
}


def _functions() -> list[tuple[str, str]]:
    found = []
    for path in sorted(KERNELS.glob("*.py")):
        for name in kernels_of(import_file(path)):
            found.append((path.stem, name))
    return found


FUNCTIONS = _functions()
_OUT = Path(tempfile.mkdtemp(prefix="mimir-exec-"))
atexit.register(shutil.rmtree, _OUT, ignore_errors=True)


@functools.cache
def _compiled(stem: str, function: str) -> Path:
    """Compile one function for MSL and WGSL into its own folder (once per session)."""
    from mimir.codegen import compile_source

    path = KERNELS / f"{stem}.py"
    result = compile_source(str(path), path.read_text(), ["msl", "wgsl"], function=function)
    if not result.ok:
        messages = "\n".join(f"{d.code}: {d.message}" for d in result.diagnostics)
        raise AssertionError(f"{stem}.py::{function} does not compile:\n{messages}")
    out = _OUT / stem / function
    write_files(result.files, out)
    return out


def _manifest(folder: Path, backend: str, function: str) -> dict[str, Any]:
    return json.loads((folder / backend / f"{function}.manifest.json").read_text())


def _grouped_threads(manifest: dict[str, Any], folder: Path, dims: dict[str, int]) -> int:
    from harness.msl_runner import grouped_threads

    return grouped_threads(manifest, folder, dims)


def _dims(manifest: dict[str, Any], label: str, cost: Any = None) -> dict[str, int] | None:
    if label == "one":
        return choose_dims(manifest, [1])
    small = choose_dims(manifest, SMALL)
    if label == "small":
        return small
    if label == "medium":
        return medium_dims(manifest, large_elements(manifest, LARGE))
    candidates = grow_dims(manifest, small, large_elements(manifest, LARGE))
    if not candidates:
        return None
    return min(candidates, key=cost) if cost is not None else candidates[0]


# A matmul accumulates with fma (mimir.codegen.passes.contract): each of its K steps rounds once
# where the shim rounds twice, so a dot product of K terms of inputs in [-1, 1) may differ
# by up to about K ulps of 1 (2**-24 each). The bound used, with a factor 4 of margin and
# K at most the largest dim (or 1024 for the zoo's literal inner sizes):
# atol = 4 * 2**-24 * max(K), on top of the float32 default.
# (A `precision="tf32"` function that fell back to float32 gets the TF32 bound instead.)
def _dot_product_atol(manifest: dict[str, Any], dims: dict[str, int]) -> float | None:
    fallback = tf32_fallback_atol(manifest, dims)
    if fallback is not None:
        return fallback
    # (an attention launch's scores and its sums over keys; a scores_softmax launch's scores)
    products = ("_matmul", "_attention", "_scores_softmax")
    if not any(k["file"].rsplit(".", 1)[0].endswith(products) for k in manifest["kernels"]):
        return None
    return max(1e-5, 4 * 2**-24 * max([1024, *dims.values()]))


def _compare(
    manifest: dict[str, Any],
    actual: dict[str, list],
    expected: dict[str, list],
    stem: str,
    function: str,
    dims: dict[str, int],
) -> None:
    outputs = [b for b in manifest["buffers"] if b["role"] in ("output", "inout")]
    assert set(actual) == {b["name"] for b in outputs}
    assert set(expected) == set(actual), "the manifest and the shim name the outputs differently"
    contracted = _dot_product_atol(manifest, dims)
    for buf in outputs:
        rtol, atol = LOOSER.get((stem, function, buf["name"]), (None, contracted))
        assert_close(
            actual[buf["name"]],
            expected[buf["name"]],
            buf["dtype"],
            rtol,
            atol,
            label=f"{function}.{buf['name']} at {dims}",
        )


def test_the_zoo_is_not_empty() -> None:
    assert len(FUNCTIONS) >= 10


@pytest.mark.parametrize(("stem", "function"), FUNCTIONS, ids=[f"{s}.{f}" for s, f in FUNCTIONS])
def test_wgsl_validates_with_naga(stem: str, function: str) -> None:
    require_tool("wgpu")
    from mimir.runtime.wgpu_runner import validate_wgsl

    folder = _compiled(stem, function)
    files = sorted((folder / "wgsl").glob("*.wgsl"))
    assert files
    for file in files:
        validate_wgsl(file.read_text())


@pytest.mark.parametrize("label", BINDINGS)
@pytest.mark.parametrize(("stem", "function"), FUNCTIONS, ids=[f"{s}.{f}" for s, f in FUNCTIONS])
def test_wgsl_matches_shim(stem: str, function: str, label: str) -> None:
    require_tool("wgpu")
    from mimir.runtime.wgpu_runner import run_manifest

    folder = _compiled(stem, function)
    manifest = _manifest(folder, "wgsl", function)
    msl = _manifest(folder, "msl", function)
    # The same bindings as the MSL run, so both backends see the same inputs.
    dims = _dims(manifest, label, lambda d: _grouped_threads(msl, folder / "msl", d))
    if dims is None:
        pytest.skip(f"no dim of `{function}` can grow to {LARGE} elements within its constraints")
    inputs = random_inputs(manifest, dims, seed=len(function))
    scalars = default_scalars(manifest, dims)
    expected = shim_reference(KERNELS / f"{stem}.py", function, inputs, dims, scalars)
    actual = run_manifest(manifest, folder / "wgsl", inputs, dims, scalars)
    _compare(manifest, actual, expected, stem, function, dims)


@pytest.mark.parametrize("label", BINDINGS)
@pytest.mark.parametrize(("stem", "function"), FUNCTIONS, ids=[f"{s}.{f}" for s, f in FUNCTIONS])
def test_msl_matches_shim(stem: str, function: str, label: str) -> None:
    require_tool("clang++")
    from harness.msl_runner import run_msl_manifest

    folder = _compiled(stem, function)
    manifest = _manifest(folder, "msl", function)
    if any(b["dtype"] == "float16" for b in manifest["buffers"]):
        require_tool("clang++-half")

    def cost(d: dict[str, int]) -> int:
        return _grouped_threads(manifest, folder / "msl", d)

    dims = _dims(manifest, label, cost)
    if dims is None:
        pytest.skip(f"no dim of `{function}` can grow to {LARGE} elements within its constraints")
    if cost(dims) > MSL_THREAD_BUDGET:
        pytest.skip(
            f"MSL emulation at {dims} needs {cost(dims)} OS threads through barriers "
            f"(budget {MSL_THREAD_BUDGET}); the WGSL run covers this binding"
        )
    inputs = random_inputs(manifest, dims, seed=len(function))
    scalars = default_scalars(manifest, dims)
    expected = shim_reference(KERNELS / f"{stem}.py", function, inputs, dims, scalars)
    actual = run_msl_manifest(manifest, folder / "msl", inputs, dims, scalars)
    _compare(manifest, actual, expected, stem, function, dims)


# One kernel of each barrier-heavy kind: a tree reduction, a softmax (max and
# sum trees), a tiled matmul (tiles staged through threadgroup memory).
TSAN = [
    ("reductions", "sum_axis0", "reduce"),
    ("big_reduction", "long_softmax", "softmax"),
    ("batched", "bmm", "matmul"),
    ("sorts", "sort_rows", "sort"),
]

# Race tests need sizes where a race can happen: several workgroups, and for the matmul
# several k-slices (K > 8), or the barrier after a slice's products guards nothing. bmm
# binds B, M, K, N: 2 batches x 2 row tiles x 2 column tiles of 128, and 5 slices of K=37.
RACE_TARGETS: dict[str, list[int]] = {
    "reduce": [3, 5, 300],
    "softmax": [300],
    "matmul": [2, 131, 37, 131],
    # three rows of 61, padded to 64 (64 threads a row): every compare-exchange step
    # reads what other threads wrote in the step before
    "sort": [3, 61],
}


@pytest.mark.parametrize(("stem", "function", "kind"), TSAN, ids=[t[2] for t in TSAN])
def test_msl_threadsanitizer_finds_no_race(stem: str, function: str, kind: str) -> None:
    require_tool("clang++")
    require_tool("tsan")
    from harness.msl_runner import run_msl_manifest

    folder = _compiled(stem, function)
    manifest = _manifest(folder, "msl", function)
    text = "".join(p.read_text() for p in (folder / "msl").glob("*.metal"))
    assert "threadgroup_barrier" in text, f"the {kind} kernel was expected to use barriers"
    dims = choose_dims(manifest, RACE_TARGETS[kind])
    inputs = random_inputs(manifest, dims, seed=1)
    scalars = default_scalars(manifest, dims)
    expected = shim_reference(KERNELS / f"{stem}.py", function, inputs, dims, scalars)
    actual = run_msl_manifest(manifest, folder / "msl", inputs, dims, scalars, sanitize="thread")
    _compare(manifest, actual, expected, stem, function, dims)


# AddressSanitizer over the kernels that stage tiles: a read one element past a buffer (a
# staging bound off by one) leaves the harness's guard band untouched and multiplies into a
# discarded product, so only ASan sees it. Sizes: several tiles of 128 with a ragged edge,
# and K not a multiple of the 8-wide slice.
ASAN = [
    *(("batched", f) for f in ("bmm", "bmm_broadcast", "matmul_transposed", "int_matmul")),
    ("reductions", "sum_axis0"),
    ("big_reduction", "long_softmax"),
    ("sorts", "sort_columns"),
]
ASAN_SIZES = {"B": 2, "M": 131, "K": 37, "N": 131}


@pytest.mark.parametrize(("stem", "function"), ASAN, ids=[f"{s}.{f}" for s, f in ASAN])
def test_msl_addresssanitizer_finds_no_bad_access(stem: str, function: str) -> None:
    require_tool("clang++")
    require_tool("asan")
    from harness.msl_runner import run_msl_manifest

    folder = _compiled(stem, function)
    manifest = _manifest(folder, "msl", function)
    dims = choose_dims(manifest, [ASAN_SIZES.get(d["name"], 300) for d in manifest["dims"]])
    inputs = random_inputs(manifest, dims, seed=2)
    scalars = default_scalars(manifest, dims)
    expected = shim_reference(KERNELS / f"{stem}.py", function, inputs, dims, scalars)
    actual = run_msl_manifest(manifest, folder / "msl", inputs, dims, scalars, sanitize="address")
    _compare(manifest, actual, expected, stem, function, dims)


@pytest.mark.parametrize("which", [0, 1], ids=["after-staging", "after-products"])
def test_msl_threadsanitizer_catches_each_removed_matmul_barrier(
    tmp_path: Path, which: int
) -> None:
    """Drop one of the tiled matmul's two barriers: both are races once K has several slices.

    The first barrier publishes the first slice; the one after a slice's products only
    matters when a later slice is staged over its buffer, so K spans several 8-wide
    slices (with one slice, K <= 8, its removal would pass).
    """
    require_tool("clang++")
    require_tool("tsan")
    from harness.msl_runner import MslRunError, run_msl_manifest

    folder = _compiled("batched", "bmm")
    manifest = _manifest(folder, "msl", "bmm")
    barrier = "threadgroup_barrier(mem_flags::mem_threadgroup);"
    for file in (folder / "msl").glob("*.metal"):
        text = file.read_text()
        if file.name.endswith("_matmul.metal"):
            assert text.count(barrier) == 2
            parts = text.split(barrier)
            text = barrier.join(parts[: which + 1]) + barrier.join(parts[which + 1 :])
            assert text.count(barrier) == 1
        (tmp_path / file.name).write_text(text)
    dims = choose_dims(manifest, RACE_TARGETS["matmul"])
    assert dims["K"] > 16 and dims["M"] > 128 and dims["N"] > 128 and dims["B"] > 1
    inputs = random_inputs(manifest, dims, seed=1)
    with pytest.raises(MslRunError, match="ThreadSanitizer: data race"):
        run_msl_manifest(manifest, tmp_path, inputs, dims, sanitize="thread")


@pytest.mark.parametrize("which", [0, 1], ids=["after-store", "after-reads"])
def test_msl_threadsanitizer_catches_removed_simdgroup_barriers(tmp_path: Path, which: int) -> None:
    """The matmul's simdgroup matrices reach the threads through threadgroup memory: a
    `simdgroup_barrier` after each store (the others' elements are written) and after
    each thread's reads (before the next store overwrites them). Drop either kind and the
    emulation, whose threads compute elements they do not read back, races."""
    require_tool("clang++")
    require_tool("tsan")
    from harness.msl_runner import MslRunError, run_msl_manifest

    folder = _compiled("batched", "bmm")
    manifest = _manifest(folder, "msl", "bmm")
    barrier = "simdgroup_barrier(mem_flags::mem_threadgroup);"
    for file in (folder / "msl").glob("*.metal"):
        text = file.read_text()
        if file.name.endswith("_matmul.metal"):
            assert text.count(barrier) == 64  # 32 matrices, two barriers each
            parts = text.split(barrier)
            text = parts[0] + "".join(
                (barrier if (k % 2) != which else "") + part for k, part in enumerate(parts[1:])
            )
            assert text.count(barrier) == 32
        (tmp_path / file.name).write_text(text)
    dims = choose_dims(manifest, [2, 131, 9, 131])
    inputs = random_inputs(manifest, dims, seed=1)
    with pytest.raises(MslRunError, match="ThreadSanitizer: data race"):
        run_msl_manifest(manifest, tmp_path, inputs, dims, sanitize="thread")


def test_msl_threadsanitizer_catches_a_removed_barrier(tmp_path: Path) -> None:
    """The TSan run is not vacuous: drop the first barrier of the generated reduction."""
    require_tool("clang++")
    require_tool("tsan")
    from harness.msl_runner import MslRunError, run_msl_manifest

    folder = _compiled("reductions", "sum_axis0")
    manifest = _manifest(folder, "msl", "sum_axis0")
    for file in (folder / "msl").glob("*.metal"):
        text = file.read_text()
        barrier = "threadgroup_barrier(mem_flags::mem_threadgroup);"
        assert barrier in text
        (tmp_path / file.name).write_text(text.replace(barrier, "", 1))
    dims = choose_dims(manifest, [3, 5, 7])
    inputs = random_inputs(manifest, dims, seed=1)
    with pytest.raises(MslRunError, match="ThreadSanitizer: data race"):
        run_msl_manifest(manifest, tmp_path, inputs, dims, sanitize="thread")
