"""The shim's `arange`, `tril`/`triu`, `concatenate`/`stack`, `argmax`/`argmin` and
`var`/`std` against NumPy on Hypothesis-drawn shapes, axes, offsets and values.

Integer results (indices, masks, joins) must match exactly; `var`/`std` are computed in
double precision and rounded once to float32, so they match NumPy's float64 two-pass
result rounded to float32 within one ulp (the shim uses `fsum`, NumPy pairwise sums).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mimir.array import (
    MimirError,
    Tensor,
    arange,
    bool_,
    concatenate,
    float16,
    float32,
    int32,
    stack,
    tensor,
    tril,
    triu,
    uint32,
)

NP = {float32: np.float32, float16: np.float16, int32: np.int32, uint32: np.uint32, bool_: np.bool_}
SETTINGS = settings(max_examples=60, deadline=None)


def to_np(t: Tensor) -> np.ndarray:
    return np.array(t.flat(), dtype=NP[t.dtype]).reshape(t.shape)


def from_np(a: np.ndarray, dtype) -> Tensor:
    return tensor(a.reshape(-1).tolist(), dtype=dtype).reshape(a.shape)


shapes = st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple)


@st.composite
def arrays(draw, shape=None, kind="float", nan=False):
    shape = shape if shape is not None else draw(shapes)
    n = int(np.prod(shape))
    if kind == "int":
        values = draw(st.lists(st.integers(-3, 3), min_size=n, max_size=n))  # many ties
        return np.array(values, dtype=np.int32).reshape(shape)
    if kind == "bool":
        return np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n))).reshape(shape)
    element = st.floats(-1e3, 1e3, width=32) | st.sampled_from([0.0, 1.0, -1.0])
    if nan:
        element = element | st.just(float("nan"))
    values = draw(st.lists(element, min_size=n, max_size=n))
    return np.array(values, dtype=np.float32).reshape(shape)


# ---------------------------------------------------------------- arange, tril, triu


@SETTINGS
@given(n=st.integers(0, 40), dtype=st.sampled_from([int32, float32, uint32, float16]))
def test_arange_matches_numpy(n: int, dtype) -> None:
    out = arange(n, dtype=dtype)
    assert out.dtype == dtype
    np.testing.assert_array_equal(to_np(out), np.arange(n, dtype=NP[dtype]))


def test_arange_defaults_to_int32_and_refuses_bad_sizes() -> None:
    assert arange(3).dtype == int32
    with pytest.raises(MimirError) as err:
        arange(-1)
    assert err.value.code == "GPU025"
    with pytest.raises(MimirError) as err:
        arange(3, dtype=bool_)
    assert err.value.code == "GPU020"


@SETTINGS
@given(
    a=arrays(shape=None).filter(lambda a: a.ndim >= 2),
    k=st.integers(-6, 6),
    upper=st.booleans(),
)
def test_triangles_match_numpy(a: np.ndarray, k: int, upper: bool) -> None:
    fn, ref = (triu, np.triu) if upper else (tril, np.tril)
    np.testing.assert_array_equal(to_np(fn(from_np(a, float32), k=k)), ref(a, k=k))


def test_triangle_of_a_vector_is_refused() -> None:
    with pytest.raises(MimirError) as err:
        tril(arange(4))
    assert err.value.code == "GPU014"


# ---------------------------------------------------------------- concatenate, stack


@st.composite
def joins(draw):
    rank = draw(st.integers(1, 3))
    base = [draw(st.integers(1, 4)) for _ in range(rank)]
    stacked = draw(st.booleans())
    axis = draw(st.integers(-(rank + stacked), rank + stacked - 1))
    count = draw(st.integers(1, 4))
    parts = []
    for _ in range(count):
        shape = list(base)
        if not stacked:
            shape[axis % rank] = draw(st.integers(0, 4))
        parts.append(draw(arrays(shape=tuple(shape), kind=draw(st.sampled_from(["float", "int"])))))
    return parts, axis, stacked


@SETTINGS
@given(case=joins())
def test_joins_match_numpy(case) -> None:
    parts, axis, stacked = case
    dtype = float32 if any(p.dtype == np.float32 for p in parts) else int32
    tensors = tuple(from_np(p, float32 if p.dtype == np.float32 else int32) for p in parts)
    fn, ref = (stack, np.stack) if stacked else (concatenate, np.concatenate)
    out = fn(tensors, axis=axis)
    expected = ref(parts, axis=axis)
    assert out.dtype == dtype
    assert out.shape == expected.shape
    np.testing.assert_array_equal(to_np(out), expected.astype(NP[dtype]))


def test_join_mismatch_is_gpu023() -> None:
    a, b = arange(6).reshape(2, 3), arange(4).reshape(2, 2)
    assert concatenate((a, b), axis=1).shape == (2, 5)
    for call in (lambda: concatenate((a, b), axis=0), lambda: stack((a, b))):
        with pytest.raises(MimirError) as err:
            call()
        assert err.value.code == "GPU023"


# ---------------------------------------------------------------- argmax, argmin


@SETTINGS
@given(
    data=st.data(),
    kind=st.sampled_from(["float", "int", "bool"]),
    which=st.sampled_from(["argmax", "argmin"]),
)
def test_arg_reductions_match_numpy(data, kind: str, which: str) -> None:
    """First index on ties, and the first NaN wins, as NumPy."""
    a = data.draw(arrays(kind=kind, nan=True))
    axis = data.draw(st.none() | st.integers(-a.ndim, a.ndim - 1))
    dtype = {"float": float32, "int": int32, "bool": bool_}[kind]
    out = getattr(from_np(a, dtype), which)(axis=axis)
    assert out.dtype == int32
    np.testing.assert_array_equal(to_np(out), getattr(np, which)(a, axis=axis))


def test_arg_reduction_over_an_empty_axis_is_gpu024() -> None:
    with pytest.raises(MimirError) as err:
        arange(0).argmax()
    assert err.value.code == "GPU024"


# ---------------------------------------------------------------- var, std


@SETTINGS
@given(
    data=st.data(),
    which=st.sampled_from(["var", "std"]),
    offset=st.sampled_from([0.0, 1e4]),
)
def test_moments_match_numpy(data, which: str, offset: float) -> None:
    """Two passes: an offset of 1e4 (where E[x^2] - E[x]^2 in float32 loses every digit)
    still matches NumPy's float64 answer rounded to float32."""
    a = data.draw(arrays(kind="float")) / np.float32(1e3) + np.float32(offset)
    axis = data.draw(st.none() | st.integers(-a.ndim, a.ndim - 1))
    count = a.size if axis is None else a.shape[axis]
    ddof = data.draw(st.integers(0, count - 1))
    out = getattr(from_np(a, float32), which)(axis=axis, ddof=ddof)
    expected = getattr(np, which)(a.astype(np.float64), axis=axis, ddof=ddof).astype(np.float32)
    np.testing.assert_allclose(to_np(out), expected, rtol=2e-7, atol=1e-30)


def test_moments_of_ints_are_float32_and_ddof_is_bounded() -> None:
    x = arange(6).reshape(2, 3)
    assert x.var().dtype == float32
    assert abs(x.var(axis=1, ddof=1).flat()[0] - 1.0) < 1e-7
    with pytest.raises(MimirError) as err:
        x.var(axis=1, ddof=3)
    assert err.value.code == "GPU024"
