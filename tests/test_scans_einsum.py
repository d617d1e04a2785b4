"""Shim numerics of the scan and einsum ops against NumPy, on random shapes and values.

`cumsum`/`cumprod` along every axis (and flattened), in float32, int32 and bool, and
`einsum` over the specs the kernel language lowers, each compared with NumPy's result
computed in float64 (integers exactly).
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mimir.array import bool_, float32, int32, tensor

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)

SHAPES = st.lists(st.sampled_from([1, 2, 3, 5]), min_size=1, max_size=3).map(tuple)


def _values(draw, shape, dtype):
    count = int(np.prod(shape))
    if dtype == "int32":
        items = st.integers(-(2**31), 2**31 - 1)
    elif dtype == "bool":
        items = st.booleans()
    else:
        items = st.floats(-2, 2, width=32)  # a product of 125 stays below f32's max
    return np.array(draw(st.lists(items, min_size=count, max_size=count))).reshape(shape)


@st.composite
def scan_cases(draw):
    shape = draw(SHAPES)
    dtype = draw(st.sampled_from(["float32", "int32", "bool"]))
    axis = draw(st.sampled_from([None, *range(-len(shape), len(shape))]))
    kind = draw(st.sampled_from(["cumsum", "cumprod"]))
    return _values(draw, shape, dtype), dtype, axis, kind


@SETTINGS
@given(scan_cases())
def test_scans_match_numpy(case) -> None:
    values, dtype, axis, kind = case
    mdtype = {"float32": float32, "int32": int32, "bool": bool_}[dtype]
    x = tensor(values.tolist(), dtype=mdtype)
    got = getattr(x, kind)(axis=axis)
    if dtype == "float32":
        want = getattr(values.astype(np.float64), kind)(axis=axis).astype(np.float32)
        np.testing.assert_allclose(np.array(got.tolist()), want, rtol=1e-6, atol=1e-6)
        assert got.dtype == float32
    else:
        # int32 arithmetic wraps; NumPy's int64 result wrapped to int32 is the reference
        want = getattr(values.astype(np.int64), kind)(axis=axis).astype(np.int32)
        assert np.array(got.tolist()).tolist() == want.tolist()
        assert got.dtype == int32
    assert tuple(got.shape) == want.shape


SPECS = [
    "ij,jk->ik",
    "bij,bjk->bik",
    "ij->ji",
    "ij->i",
    "ij->",
    "bhqd,bhkd->bhqk",
    "i,j->ij",
    "i,i->",
    "ikd,kdj->ji",
    "ij,jk",
    "ij,kj->ik",
    "ijk->kij",
    "ij,j->i",
]


@st.composite
def einsum_cases(draw):
    spec = draw(st.sampled_from(SPECS))
    lhs = spec.split("->")[0]
    letters = sorted(set(lhs) - {","})
    sizes = {ch: draw(st.sampled_from([1, 2, 3, 4])) for ch in letters}
    dtype = draw(st.sampled_from(["float32", "int32"]))
    operands = [_values(draw, tuple(sizes[ch] for ch in term), dtype) for term in lhs.split(",")]
    return spec, operands, dtype


@SETTINGS
@given(einsum_cases())
def test_einsum_matches_numpy(case) -> None:
    from mimir.array import einsum

    spec, operands, dtype = case
    mdtype = {"float32": float32, "int32": int32}[dtype]
    got = einsum(spec, *(tensor(o.tolist(), dtype=mdtype) for o in operands))
    if dtype == "float32":
        want = np.einsum(spec, *(o.astype(np.float64) for o in operands)).astype(np.float32)
        np.testing.assert_allclose(np.array(got.tolist()), want, rtol=1e-5, atol=1e-5)
    else:
        want = np.einsum(spec, *(o.astype(np.int64) for o in operands)).astype(np.int32)
        assert np.array(got.tolist()).tolist() == want.tolist()
    assert tuple(got.shape) == want.shape
    assert got.dtype == mdtype
