"""Every compiled kernel of the zoo, executed and compared with the shim.

Each MSL and WGSL snapshot (`tests/kernels/out/<backend>/...`, see
`test_codegen.py`) runs through the test harness (`tests/harness`): WGSL on
wgpu (Mesa lavapipe here), MSL as C++ on the CPU with real barriers. Inputs
are seeded random values; dims are bound to size 1, to primes that are not
multiples of any tile or workgroup size, and, for the large-reduction kernels,
to more than 100,000 elements. The shim (`mimir.array`) gives the expected
values, compared within each dtype's tolerance.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from harness import (
    assert_close,
    random_inputs,
    require_tool,
    shim_reference,
    tf32_fallback_atol,
)

from mimir.runtime.dimexpr import evaluate, names

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "kernels" / "out"
PRIMES = (37, 19, 23, 17, 29, 41, 13, 11, 7, 5, 3)
SCALARS = {"f32": 0.75, "i32": 3}
# Large bindings, for the kernels whose point is size. The CPU runner of MSL
# starts an OS thread per GPU thread, so thousands of workgroups are for wgpu only.
LARGE = {"big_reduction": {"N": 100_003}, "reductions": {"A": 131, "B": 67, "C": 29}}
LARGE_WGSL_ONLY = {"reductions"}


def _admissible(dim: dict[str, Any], want: int) -> int:
    # a bound naming other dims (`Dim("T", max=MAXT)`) is kept by `_related`
    low = dim["min"] if isinstance(dim["min"], int) else 0
    value = max(want, low)
    step = dim["multiple_of"] or 1
    value = -(-value // step) * step
    if isinstance(dim["max"], int) and value > dim["max"]:
        value = dim["max"] // step * step
    return value


def _related(dims: list[dict[str, Any]], env: dict[str, int]) -> dict[str, int]:
    """`env` with each dim moved into the bounds that name other dims (the manifest writes
    them as expressions: `"max": "MAXT"`, `"min": "T"`)."""
    for _ in range(64):
        moved = False
        for d in dims:
            value = env[d["name"]]
            if isinstance(d["min"], str):
                value = max(value, evaluate(d["min"], env))
            if isinstance(d["max"], str):
                top = evaluate(d["max"], env)
                low = d["min"] if isinstance(d["min"], int) else 0
                if top < low:
                    # no room below the bound (`P <= MAXT - 1` with MAXT=1): raise what it names
                    for name in names(d["max"]):
                        env[name] += 1
                    moved = True
                value = max(min(value, top), low)
            moved |= value != env[d["name"]]
            env[d["name"]] = value
        if not moved:
            return env
    raise AssertionError(f"no binding keeps the relations of {dims}")


def _bindings(
    manifest: dict[str, Any], stem: str, backend: str
) -> list[tuple[str, dict[str, int]]]:
    dims = manifest["dims"]
    out = [
        ("ones", {d["name"]: _admissible(d, 1) for d in dims}),
        ("primes", {d["name"]: _admissible(d, p) for d, p in zip(dims, PRIMES, strict=False)}),
    ]
    if stem in LARGE and (backend == "wgsl" or stem not in LARGE_WGSL_ONLY):
        large = {d["name"]: _admissible(d, LARGE[stem].get(d["name"], 1)) for d in dims}
        out.append(("large", large))
    return [(label, _related(dims, env)) for label, env in out]


def _cases() -> list[Any]:
    cases = []
    for path in sorted(OUT.glob("*/*/*.manifest.json")):
        backend, stem = path.parent.parent.name, path.parent.name
        if backend not in ("msl", "wgsl"):
            continue
        manifest = json.loads(path.read_text())
        for label, dims in _bindings(manifest, stem, backend):
            if not manifest["dims"] and label != "ones":
                continue
            name = f"{backend}/{stem}/{manifest['function']}/{label}"
            cases.append(pytest.param(backend, path, dims, id=name))
    return cases


def _scalars(manifest: dict[str, Any], dims: dict[str, int]) -> dict[str, float | int]:
    fields = (manifest["uniform"] or {"fields": []})["fields"]
    return {f["name"]: SCALARS[f["type"]] for f in fields if f["name"] not in dims}


@pytest.mark.parametrize(("backend", "path", "dims"), _cases())
def test_kernel_matches_the_shim(backend: str, path: Path, dims: dict[str, int]) -> None:
    manifest = json.loads(path.read_text())
    dtypes = {b["dtype"] for b in manifest["buffers"]}
    if backend == "wgsl":
        require_tool("wgpu")
        from mimir.runtime.wgpu_runner import run_manifest as run
    else:
        require_tool("clang++-half" if "float16" in dtypes else "clang++")
        from harness.msl_runner import run_msl_manifest as run
    scalars = _scalars(manifest, dims)
    inputs = random_inputs(manifest, dims, seed=7)
    source = REPO / manifest["source"]
    expected = shim_reference(source, manifest["function"], inputs, dims, scalars)
    actual = run(manifest, path.parent, inputs, dims, scalars)
    atol = tf32_fallback_atol(manifest, dims)  # None but for a `precision="tf32"` fallback
    for name, values in expected.items():
        dtype = next(b["dtype"] for b in manifest["buffers"] if b["name"] == name)
        assert_close(actual[name], values, dtype, atol=atol, label=f"{name} with {dims}")


# ---------------------------------------------------------------- edge values

_NAN, _INF = float("nan"), float("inf")
_INT_EDGES = [0, 1, -1, 7, -7, 2**31 - 1, -(2**31), 5, -3, 2, 3, -2]
_FLOAT_EDGES = [0.0, -0.0, 0.5, -0.5, 1e30, -1e30, _NAN, _INF, -_INF, 2.5, -2.5, 3.0]

# function -> values per input buffer (each of length 12): Python semantics at the edges.
EDGES: dict[str, dict[str, list[Any]]] = {
    "int_arith": {"a": _INT_EDGES, "b": [0, 0, -1, -1, 3, -1, -1, 2, -3, 5, -7, 4]},
    "int_pow": {"a": [2, -2, 0, 1, -1, 3, 7, -7, 0, 5, -1, 1], "b": list(range(-6, 6))},
    "uint_ops": {"a": [0, 1, 2**32 - 1, 7, 2**31, 9, 0, 3, 4, 5, 6, 8], "b": [2**32 - 1] * 12},
    "casts": {"x": _FLOAT_EDGES},
    "where_clip": {"x": _FLOAT_EDGES, "y": list(reversed(_FLOAT_EDGES))},
    "unary_zoo": {"x": [v for v in _FLOAT_EDGES if v == v and abs(v) < 1e3] + [-4.0] * 5},
    "mixed_int_float": {"a": _INT_EDGES, "x": [0.3, -0.3, 0.25, -0.25, 1.0, -1.0] * 2},
    "float_floor_mod_pow": {
        "x": [2.0, -2.0, 0.0, -8.0, 1.0, _NAN, _INF, -_INF, 3.5, -3.5, 0.5, -0.0],
        "y": [3.0, 3.0, -1.0, 0.5, _NAN, 0.0, 2.0, 3.0, -2.0, 0.0, _INF, -_INF],
    },
}


def _edge_cases() -> list[Any]:
    cases = []
    for backend in ("msl", "wgsl"):
        for stem in ("ints_bools", "select_cast"):
            for path in sorted((OUT / backend / stem).glob("*.manifest.json")):
                function = json.loads(path.read_text())["function"]
                if function in EDGES:
                    cases.append(pytest.param(backend, path, id=f"{backend}/{function}"))
    return cases


@pytest.mark.parametrize(("backend", "path"), _edge_cases())
def test_python_semantics_at_the_edges(backend: str, path: Path) -> None:
    """Floor division and modulo by 0 and -1, INT_MIN, wrap-around, nan and inf,
    saturating casts: the kernel does what Python (the shim) does."""
    manifest = json.loads(path.read_text())
    if backend == "wgsl":
        require_tool("wgpu")
        from mimir.runtime.wgpu_runner import run_manifest as run
    else:
        require_tool("clang++")
        from harness.msl_runner import run_msl_manifest as run
    inputs = EDGES[manifest["function"]]
    dims = {"N": 12}
    source = REPO / manifest["source"]
    expected = shim_reference(source, manifest["function"], inputs, dims, {})
    actual = run(manifest, path.parent, inputs, dims, {})
    for name, values in expected.items():
        dtype = next(b["dtype"] for b in manifest["buffers"] if b["name"] == name)
        assert_close(actual[name], values, dtype, label=name)


# ---------------------------------------------------------------- barriers

TSAN = [
    ("attention", "attention", {"T": 19, "D": 17}),
    ("big_reduction", "total", {"N": 5000}),
    ("layernorm", "layernorm", {"N": 3, "D": 300}),
    ("batched", "bmm", {"B": 2, "M": 17, "K": 18, "N": 5}),
    ("reductions", "min_axes02_keepdims", {"A": 3, "B": 2, "C": 40}),
]


@pytest.mark.parametrize(("stem", "function", "dims"), TSAN, ids=[f for _, f, _ in TSAN])
def test_threadgroup_kernels_are_race_free(stem: str, function: str, dims: dict[str, int]) -> None:
    """ThreadSanitizer on the MSL build: a missing barrier is a data race on threadgroup memory."""
    require_tool("tsan")
    from harness.msl_runner import run_msl_manifest

    path = OUT / "msl" / stem / f"{function}.manifest.json"
    manifest = json.loads(path.read_text())
    scalars = _scalars(manifest, dims)
    inputs = random_inputs(manifest, dims, seed=3)
    expected = shim_reference(REPO / manifest["source"], function, inputs, dims, scalars)
    actual = run_msl_manifest(manifest, path.parent, inputs, dims, scalars, sanitize="thread")
    for name, values in expected.items():
        dtype = next(b["dtype"] for b in manifest["buffers"] if b["name"] == name)
        assert_close(actual[name], values, dtype, label=name)
