"""`mimir.array` against NumPy: the shim's numerics and semantics on random data.

The shim computes in double precision and rounds once into the result dtype; NumPy computes
in the dtype itself. For `+ - * /` and `sqrt` both are correctly rounded, so results are
compared exactly; transcendental functions and sums are compared to a float64 NumPy reference
rounded into the dtype, within a few ulps. Where the kernel language deliberately differs
from NumPy (int division by zero, float -> int saturation, no int64 promotion), the test
says so and checks the kernel language's rule.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from mimir.array import (
    Dim,
    MimirError,
    Tensor,
    bool_,
    float16,
    float32,
    full,
    gpu,
    int32,
    maximum,
    minimum,
    ones,
    rand,
    tensor,
    uint32,
    where,
    zeros,
)

NP = {float32: np.float32, float16: np.float16, int32: np.int32, uint32: np.uint32, bool_: np.bool_}
RNG = np.random.default_rng(20240611)


def to_np(t: Tensor) -> np.ndarray:
    return np.array(t.flat(), dtype=NP[t.dtype]).reshape(t.shape)


def from_np(a: np.ndarray, dtype=None) -> Tensor:
    dtype = dtype or {v: k for k, v in NP.items()}[a.dtype.type]
    # Through a flat list, so that empty axes (shape (4, 0)) survive.
    return tensor(a.reshape(-1).tolist(), dtype=dtype).reshape(a.shape)


def floats(*shape: int, lo: float = -3.0, hi: float = 3.0, dtype=np.float32) -> np.ndarray:
    return RNG.uniform(lo, hi, size=shape).astype(dtype)


def ints(*shape: int, lo: int = -50, hi: int = 50, dtype=np.int32) -> np.ndarray:
    return RNG.integers(lo, hi, size=shape, endpoint=True).astype(dtype)


def same(got: Tensor, want: np.ndarray) -> None:
    """Exactly equal, dtype and shape included (NaNs equal)."""
    assert got.dtype in NP and np.dtype(NP[got.dtype]) == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape
    np.testing.assert_array_equal(to_np(got), want)


def close(got: Tensor, want: np.ndarray, rtol: float = 2e-6, atol: float = 1e-6) -> None:
    assert np.dtype(NP[got.dtype]) == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape
    np.testing.assert_allclose(to_np(got), want, rtol=rtol, atol=atol)


def ref(fn, *arrays: np.ndarray, dtype=np.float32) -> np.ndarray:
    """A float64 NumPy reference rounded once into `dtype` (the shim's own rounding model)."""
    with np.errstate(all="ignore"):
        return np.asarray(fn(*(a.astype(np.float64) for a in arrays))).astype(dtype)


# ---------------------------------------------------------------- element-wise ops

BINARY_FLOAT = [
    ("+", lambda a, b: a + b, np.add),
    ("-", lambda a, b: a - b, np.subtract),
    ("*", lambda a, b: a * b, np.multiply),
    ("/", lambda a, b: a / b, np.divide),
]


@pytest.mark.parametrize(("name", "op", "np_op"), BINARY_FLOAT, ids=[b[0] for b in BINARY_FLOAT])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_correctly_rounded_float_ops_match_numpy_exactly(name, op, np_op, dtype) -> None:
    a, b = floats(6, 7, dtype=dtype), floats(6, 7, lo=0.5, hi=4.0, dtype=dtype)
    same(op(from_np(a), from_np(b)), np_op(a, b))


def test_float_floordiv_mod_pow_match_numpy() -> None:
    a, b = floats(5, 9), floats(5, 9, lo=0.25, hi=2.0) * np.sign(floats(5, 9)).astype(np.float32)
    b[b == 0] = 1.0
    ta, tb = from_np(a), from_np(b)
    close(ta // tb, ref(np.floor_divide, a, b), rtol=0, atol=0)
    close(ta % tb, ref(np.mod, a, b), rtol=1e-6, atol=1e-6)
    base = np.abs(a) + np.float32(0.5)
    close(from_np(base) ** tb, ref(np.power, base, b), rtol=2e-6)


def test_float_division_by_zero_is_ieee_not_an_exception() -> None:
    a = tensor([1.0, -1.0, 0.0, 2.0])
    out = to_np(a / 0.0)
    assert out[0] == np.inf and out[1] == -np.inf and np.isnan(out[2])
    assert to_np(a // 0.0)[0] == np.inf and np.isnan(to_np(a % 0.0)).all()


def test_sums_meeting_both_infinities_are_nan_not_an_exception() -> None:
    """`math.fsum` raises on inf + -inf; the shim's sums answer as IEEE and NumPy do:
    nan there, inf where the float32 total overflows, and the same through a mean, a
    variance and a matmul's dot products."""
    mixed = tensor([[np.inf, -np.inf, 1.0], [1.0, 2.0, 3.0], [3e38, 3e38, 0.0]])
    with np.errstate(invalid="ignore", over="ignore"):
        expected = to_np(mixed).astype(np.float64).sum(axis=1).astype(np.float32)
        for got in (to_np(mixed.sum(axis=1)), to_np(mixed.mean(axis=1)) * 3):
            assert np.array_equal(got, expected, equal_nan=True), got
        assert np.isnan(to_np(mixed.var(axis=1))[0])
        product = to_np(mixed @ ones((3, 1)))[:, 0]
        assert np.array_equal(product, expected, equal_nan=True), product
    assert math.isnan(float(to_np(tensor([np.inf, -np.inf]).sum())))


def test_int_floor_division_and_modulo_are_floor_semantics() -> None:
    # Python's and NumPy's rule, not C's truncation: -7 // 2 == -4, -7 % 2 == 1.
    a, b = ints(8, 8), ints(8, 8, lo=-9, hi=9)
    b[b == 0] = 3
    ta, tb = from_np(a), from_np(b)
    same(ta // tb, np.floor_divide(a, b))
    same(ta % tb, np.mod(a, b))
    same(tensor([-7, 7, -7, 7], dtype=int32) // tensor([2, -2, -2, 2], dtype=int32),
         np.array([-4, -4, 3, 3], dtype=np.int32))  # fmt: skip
    same(tensor([-7, 7, -7, 7], dtype=int32) % tensor([2, -2, -2, 2], dtype=int32),
         np.array([1, -1, -1, 1], dtype=np.int32))  # fmt: skip


def test_int_division_by_zero_gives_zero_like_numpy() -> None:
    a = tensor([5, -5, 0], dtype=int32)
    with np.errstate(divide="ignore"):
        same(a // 0, np.array([5, -5, 0], dtype=np.int32) // np.int32(0))
    same(a % 0, np.zeros(3, dtype=np.int32))


def test_int_arithmetic_wraps_like_int32() -> None:
    a = ints(6, 6, lo=-(2**31), hi=2**31 - 1)
    b = ints(6, 6, lo=-(2**31), hi=2**31 - 1)
    with np.errstate(over="ignore"):
        same(from_np(a) + from_np(b), a + b)
        same(from_np(a) * from_np(b), a * b)
        same(from_np(a) - from_np(b), a - b)
    big = tensor([2**31 - 1], dtype=int32)
    assert (big + 1).item() == -(2**31)


def test_uint_arithmetic_wraps_like_uint32() -> None:
    a, b = (
        ints(7, lo=0, hi=2**32 - 1, dtype=np.uint32),
        ints(7, lo=0, hi=2**32 - 1, dtype=np.uint32),
    )
    same(from_np(a) + from_np(b), a + b)
    same(from_np(a) - from_np(b), a - b)
    b[b == 0] = 1
    same(from_np(a) // from_np(b), a // b)


def test_int_power() -> None:
    a, b = ints(5, 5, lo=-6, hi=6), ints(5, 5, lo=0, hi=5)
    same(from_np(a) ** from_np(b), np.power(a, b))
    # NumPy refuses integers to negative powers; the kernel language truncates the real result.
    same(tensor([2, 1, -1, 0], dtype=int32) ** -1, np.array([0, 1, -1, 0], dtype=np.int32))
    assert (tensor([0, 3], dtype=int32) ** 0).tolist() == [1, 1]


@pytest.mark.parametrize(
    ("op", "np_op"),
    [
        (lambda a, b: a < b, np.less),
        (lambda a, b: a <= b, np.less_equal),
        (lambda a, b: a > b, np.greater),
        (lambda a, b: a >= b, np.greater_equal),
        (lambda a, b: a == b, np.equal),
        (lambda a, b: a != b, np.not_equal),
    ],
    ids=["<", "<=", ">", ">=", "==", "!="],
)
def test_comparisons(op, np_op) -> None:
    a, b = ints(6, 5, lo=-3, hi=3), ints(5, lo=-3, hi=3)
    same(op(from_np(a), from_np(b)), np_op(a, b))
    fa = floats(4, 4)
    fb = fa.copy()
    fb[::2] = floats(2, 4)
    same(op(from_np(fa), from_np(fb)), np_op(fa, fb))
    same(op(from_np(fa), 0.5), np_op(fa, np.float32(0.5)))


def test_bitwise_on_ints_and_bools() -> None:
    a, b = ints(9, lo=-1000, hi=1000), ints(9, lo=-1000, hi=1000)
    same(from_np(a) & from_np(b), a & b)
    same(from_np(a) | from_np(b), a | b)
    same(~from_np(a), ~a)
    p, q = RNG.random(9) < 0.5, RNG.random(9) < 0.5
    same(from_np(p) & from_np(q), p & q)
    same(from_np(p) | from_np(q), p | q)
    same(~from_np(p), ~p)
    u = ints(5, lo=0, hi=2**32 - 1, dtype=np.uint32)
    same(~from_np(u), ~u)


def _gelu(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


UNARY = [
    ("neg", lambda t: -t, np.negative),
    ("relu", lambda t: t.relu(), lambda x: np.maximum(x, 0.0)),
    ("abs", lambda t: t.abs(), np.abs),
    ("sigmoid", lambda t: t.sigmoid(), lambda x: 1.0 / (1.0 + np.exp(-x))),
    ("tanh", lambda t: t.tanh(), np.tanh),
    ("gelu", lambda t: t.gelu(), _gelu),
    ("exp", lambda t: t.exp(), np.exp),
    ("sin", lambda t: t.sin(), np.sin),
    ("cos", lambda t: t.cos(), np.cos),
]


@pytest.mark.parametrize(("name", "op", "np_op"), UNARY, ids=[u[0] for u in UNARY])
def test_unary_float_ops(name, op, np_op) -> None:
    x = floats(7, 6, lo=-8.0, hi=8.0)
    close(op(from_np(x)), ref(np_op, x), rtol=1e-6, atol=1e-7)


def test_log_sqrt_rsqrt_on_positive_and_special_values() -> None:
    x = floats(40, lo=1e-3, hi=100.0)
    t = from_np(x)
    close(t.log(), ref(np.log, x))
    same(t.sqrt(), np.sqrt(x))  # correctly rounded
    close(t.rsqrt(), ref(lambda v: 1.0 / np.sqrt(v), x))
    special = tensor([0.0, -1.0, float("inf")])
    assert to_np(special.log()).tolist()[0] == -math.inf
    assert np.isnan(to_np(special.log())[1]) and np.isnan(to_np(special.sqrt())[1])
    assert to_np(special.rsqrt()).tolist()[::2] == [math.inf, 0.0]


def test_int_unary_ops_keep_int_and_float_ones_promote() -> None:
    a = ints(10)
    same(-from_np(a), -a)
    same(from_np(a).abs(), np.abs(a))
    same(from_np(a).relu(), np.maximum(a, 0))
    e = from_np(a).exp()
    assert e.dtype == float32  # JAX's choice: exp of an int is float32
    close(e, ref(np.exp, a))


def test_sigmoid_and_softplus_like_expressions_are_stable_at_extremes() -> None:
    x = tensor([-1000.0, -88.0, 0.0, 88.0, 1000.0])
    s = to_np(x.sigmoid())
    assert np.isfinite(s).all() and s[0] == 0.0 and s[-1] == 1.0 and s[2] == 0.5
    assert to_np(x.exp())[-1] == np.inf  # overflow is inf, never an exception
    assert to_np(x.gelu()).tolist() == pytest.approx([-0.0, -0.0, 0.0, 88.0, 1000.0])
    assert to_np(tensor([-math.inf, math.inf]).gelu()).tolist() == [0.0, math.inf]


def test_float_power_overflow_keeps_the_sign_of_the_real_result() -> None:
    # Python raises OverflowError; the shim returns the infinity NumPy (and a GPU) gives.
    base, exponent = tensor([10.0, -10.0, -10.0, 10.0]), tensor([401.0, 401.0, 400.0, 400.5])
    assert to_np(base**exponent).tolist() == [math.inf, -math.inf, math.inf, math.inf]


# ---------------------------------------------------------------- broadcasting and scalars

BROADCAST_SHAPES = [
    ((3, 1, 4), (5, 4)),
    ((1,), (6, 2)),
    ((2, 3), (2, 1)),
    ((7, 1, 1), (1, 5, 1)),
    ((), (3, 2)),
    ((4, 0), (1, 0)),
]


@pytest.mark.parametrize(
    ("sa", "sb"), BROADCAST_SHAPES, ids=[f"{a}+{b}" for a, b in BROADCAST_SHAPES]
)
def test_broadcasting_matches_numpy(sa, sb) -> None:
    a, b = floats(*sa), floats(*sb)
    same(from_np(a) * from_np(b), a * b)
    same(from_np(b) - from_np(a), b - a)
    same(where(from_np(a) > 0.0, from_np(a), from_np(b)), np.where(a > 0, a, b))


def test_broadcast_failure_is_gpu010() -> None:
    with pytest.raises(MimirError) as info:
        zeros((4, 3)) + zeros((4,))
    assert info.value.code == "GPU010"
    assert info.value.message == "shapes [4, 3] and [4] cannot broadcast: 3 vs 4"


def test_python_scalars_are_weakly_typed() -> None:
    i = tensor([1, 2, 3], dtype=int32)
    h = tensor([1.0, 2.0], dtype=float16)
    b = tensor([True, False], dtype=bool_)
    assert (i * 2).dtype == int32  # as NumPy 2 / JAX: the scalar does not widen
    assert (i * 0.5).dtype == float32
    assert (h * 2.0).dtype == float16
    assert (b * 3).dtype == int32
    assert (2 - i).tolist() == [1, 0, -1]
    assert (1.0 / h).dtype == float16
    same(tensor([1.5, 2.5]) + 1, np.array([2.5, 3.5], dtype=np.float32))


def test_dtype_promotion() -> None:
    i, u = tensor([1], dtype=int32), tensor([1], dtype=uint32)
    h, f = tensor([1.0], dtype=float16), tensor([1.0])
    assert (i + h).dtype == float16 and (u * f).dtype == float32 and (h + f).dtype == float32
    assert (i / i).dtype == float32
    with pytest.raises(MimirError) as info:
        i + u
    assert info.value.code == "GPU021"
    with pytest.raises(MimirError) as info:
        tensor([True], dtype=bool_) + tensor([False], dtype=bool_)
    assert info.value.code == "GPU020"
    with pytest.raises(MimirError) as info:
        f & f
    assert info.value.code == "GPU020"
    with pytest.raises(MimirError) as info:
        where(f, f, f)
    assert info.value.code == "GPU020"


# ---------------------------------------------------------------- reductions


@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2), (2, 0, 1), (-1, -3)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_float_reductions(axis, keepdims) -> None:
    x = floats(3, 4, 5)
    t = from_np(x)
    kw = {"axis": axis, "keepdims": keepdims}
    close(t.sum(**kw), ref(lambda v: v.sum(**kw), x), rtol=1e-6, atol=1e-5)
    close(t.mean(**kw), ref(lambda v: v.mean(**kw), x), rtol=1e-6, atol=1e-6)
    same(t.max(**kw), x.max(**kw))
    same(t.min(**kw), x.min(**kw))


def test_int_and_bool_reductions() -> None:
    a = ints(4, 6, lo=-(2**30), hi=2**30)
    with np.errstate(over="ignore"):
        same(from_np(a).sum(axis=1), a.sum(axis=1, dtype=np.int32))  # wraps like int32
    same(from_np(a).max(axis=0, keepdims=True), a.max(axis=0, keepdims=True))
    # summed as ints, then wrapped; never through a float (which would saturate or round)
    big = tensor([2**31 - 1, 1, 2**31 - 1, 2**31 - 1], dtype=int32)
    assert big.sum().item() == 2**31 - 2  # 3 * (2**31 - 1) + 1, wrapped to int32
    mean = from_np(a).mean(axis=0)
    assert mean.dtype == float32
    close(mean, ref(lambda v: v.mean(axis=0), a))
    m = RNG.random((5, 3)) < 0.5
    s = from_np(m).sum(axis=0)
    assert s.dtype == int32
    same(s, m.sum(axis=0).astype(np.int32))


def test_reductions_of_empty_axes() -> None:
    e = zeros((3, 0))
    same(e.sum(axis=1), np.zeros(3, dtype=np.float32))
    with pytest.raises(MimirError) as info:
        e.max(axis=1)
    assert info.value.code == "GPU024"


def test_nan_propagates_through_max_min_maximum_minimum() -> None:
    x = tensor([1.0, float("nan"), 3.0])
    assert math.isnan(x.max().item()) and math.isnan(x.min().item())
    y = tensor([2.0, 2.0, float("nan")])
    same(maximum(x, y), np.maximum(to_np(x), to_np(y)))
    same(minimum(x, y), np.minimum(to_np(x), to_np(y)))


def test_reduction_axis_errors() -> None:
    t = zeros((2, 3))
    for call, code in [
        (lambda: t.sum(axis=2), "GPU014"),
        (lambda: t.mean(axis=-3), "GPU014"),
        (lambda: t.max(axis=(0, -2)), "GPU014"),
        (lambda: t.sum(axis=1.0), "GPU036"),
        (lambda: t.sum(axis=1, keepdims=1), "GPU036"),
        (lambda: t.softmax(axis=2), "GPU014"),
    ]:
        with pytest.raises(MimirError) as info:
            call()
        assert info.value.code == code


# ---------------------------------------------------------------- softmax


def _np_softmax(x, axis):
    m = x.max(axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=axis, keepdims=True)


def _np_log_softmax(x, axis):
    m = x.max(axis=axis, keepdims=True)
    return (x - m) - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_and_log_softmax(axis) -> None:
    x = floats(4, 6, lo=-5, hi=5)
    close(from_np(x).softmax(axis=axis), ref(lambda v: _np_softmax(v, axis), x))
    close(from_np(x).log_softmax(axis=axis), ref(lambda v: _np_log_softmax(v, axis), x))
    rows = to_np(from_np(x).softmax(axis=axis)).astype(np.float64).sum(axis=axis)
    np.testing.assert_allclose(rows, 1.0, rtol=1e-6)


@pytest.mark.parametrize("scale", [1e4, 1e30])
def test_softmax_is_stable_on_large_values(scale) -> None:
    x = floats(3, 5) * np.float32(scale / 3)
    s, ls = from_np(x).softmax(), from_np(x).log_softmax()
    assert np.isfinite(to_np(s)).all() and np.isfinite(to_np(ls)).all()
    close(s, ref(lambda v: _np_softmax(v, -1), x))
    close(ls, ref(lambda v: _np_log_softmax(v, -1), x), rtol=1e-6, atol=1e-3)
    assert (to_np(ls) <= 0).all()


def test_softmax_of_a_row_holding_inf_is_nan_throughout() -> None:
    # As in PyTorch: inf - inf is nan, and the nan sum spreads to every element of the row.
    assert np.isnan(to_np(tensor([[math.inf, 1.0]]).softmax())).all()


def test_softmax_near_float32_max_stays_finite() -> None:
    x = floats(3, 5) * np.float32(1e38)
    s = to_np(from_np(x).softmax())
    assert np.isfinite(s).all() and (s.max(axis=-1) == 1.0).all()
    # log_softmax there is below -float32 max for some entries: -inf is its correct rounding.
    ls = to_np(from_np(x).log_softmax())
    assert not np.isnan(ls).any() and (ls.max(axis=-1) == 0.0).all()


def test_softmax_of_int_is_float32_and_of_half_is_half() -> None:
    assert tensor([1, 2], dtype=int32).softmax().dtype == float32
    h = tensor([1.0, 2.0, 3.0], dtype=float16).softmax()
    assert h.dtype == float16
    close(h, ref(lambda v: _np_softmax(v, -1), np.array([1, 2, 3], np.float16), dtype=np.float16),
          rtol=1e-3)  # fmt: skip


# ---------------------------------------------------------------- matmul


@pytest.mark.parametrize(
    ("sa", "sb"),
    [((3, 4), (4, 5)), ((1, 7), (7, 1)), ((2, 3, 4), (2, 4, 5)), ((3, 2, 4), (4, 5)),
     ((1, 2, 3), (4, 3, 5)), ((2, 1, 3, 4), (5, 4, 2)), ((4, 0), (0, 3))],
)  # fmt: skip
def test_matmul_matches_numpy(sa, sb) -> None:
    a, b = floats(*sa), floats(*sb)
    close(from_np(a) @ from_np(b), ref(np.matmul, a, b), rtol=1e-6, atol=1e-5)


def test_int_matmul_and_errors() -> None:
    a, b = ints(3, 4, lo=-9, hi=9), ints(4, 2, lo=-9, hi=9)
    same(from_np(a) @ from_np(b), a @ b)
    for left, right, code in [
        (zeros((3, 4)), zeros((5, 2)), "GPU011"),
        (zeros((3, 4)), zeros((4,)), "GPU012"),
        (zeros((2, 3, 4)), zeros((3, 4, 5)), "GPU010"),
        (zeros((3, 4)), zeros((4, 2), dtype=uint32).astype(int32), None),
    ]:
        if code is None:
            assert (left @ right).dtype == float32
            continue
        with pytest.raises(MimirError) as info:
            left @ right
        assert info.value.code == code
    with pytest.raises(MimirError) as info:
        zeros((3, 4)) @ zeros((4,))
    assert info.value.message == "matmul needs operands of rank 2 or more: right has rank 1"
    with pytest.raises(MimirError) as info:
        zeros((3, 4)) @ zeros((5, 2))
    assert info.value.message == "matmul shape mismatch: left has K=4, right has K=5"


# ---------------------------------------------------------------- layout


def test_reshape_and_transpose() -> None:
    x = floats(2, 3, 4)
    t = from_np(x)
    same(t.reshape(6, 4), x.reshape(6, 4))
    same(t.reshape((4, -1)), x.reshape(4, -1))
    same(t.reshape(-1), x.reshape(-1))
    for perm in [(0, 1, 2), (2, 0, 1), (1, 2, 0), (-1, 0, 1)]:
        same(t.transpose(*perm), x.transpose(perm))
    same(t.transpose((2, 1, 0)), x.transpose(2, 1, 0))
    same(t.transpose(), x.transpose())
    same(t.T, x.T)
    same(from_np(x[0]).T, x[0].T)
    with pytest.raises(MimirError) as info:
        t.reshape(5, -1)
    assert info.value.code == "GPU013"
    with pytest.raises(MimirError) as info:
        t.transpose(0, 0, 1)
    assert info.value.code == "GPU017"


@pytest.mark.parametrize(
    "key",
    [
        (slice(1, 3),),
        (slice(None), slice(None), 2),
        (1, slice(None, 2)),
        (-1,),
        (slice(-2, None), None),
        (None, Ellipsis, 0),
        (Ellipsis, slice(1, 4)),
        (0, 1, 2),
        (slice(2, 2),),
        (slice(-3, -1), Ellipsis, None),
    ],
    ids=str,
)
def test_indexing_matches_numpy(key) -> None:
    x = floats(3, 4, 5)
    same(from_np(x)[key], x[key])


W = Dim("W", min=2)


@gpu
def _window(x: Tensor[float32, W + 2], y: Tensor[float32, W]) -> Tensor[float32, W]:
    return x[1 : W + 1] + y * 0.0 + x[W - 1 : W + 1][:1] * 0.0


def test_indexing_with_dims_inside_a_kernel() -> None:
    x = floats(7)
    out = _window(from_np(x).to("gpu"), zeros((5,)).to("gpu"))
    same(out, x[1:6] + np.float32(0) * x[4:5])


def test_slices_do_not_clamp_unlike_numpy() -> None:
    t = zeros((4,))
    with pytest.raises(MimirError) as info:
        t[0:-5]
    assert info.value.message == "slice stop -5 is out of bounds for axis 0 with size 4"
    for key in (slice(0, 5), slice(3, 1), 4, -5):
        with pytest.raises(MimirError) as info:
            t[key]
        assert info.value.code == "GPU018"
    with pytest.raises(MimirError) as info:
        t[0, 0]
    assert info.value.code == "GPU019"
    with pytest.raises(MimirError) as info:
        t[::2]
    assert info.value.code == "GPU031"


# ---------------------------------------------------------------- dtypes and casts


def test_float_to_int_truncates_toward_zero_and_saturates() -> None:
    x = tensor([1.9, -1.9, 0.5, -0.5, 3e9, -3e9, float("nan"), float("inf"), -float("inf")])
    assert x.astype(int32).tolist() == [1, -1, 0, 0, 2**31 - 1, -(2**31), 0, 2**31 - 1, -(2**31)]
    assert x.astype(uint32).tolist() == [1, 0, 0, 0, 3_000_000_000, 0, 0, 2**32 - 1, 0]
    assert tensor([5e9]).astype(uint32).tolist() == [2**32 - 1]
    # Inside int32's range the truncation is NumPy's.
    y = floats(50, lo=-1e6, hi=1e6)
    same(from_np(y).astype(int32), y.astype(np.int32))


def test_int_casts_wrap_like_numpy() -> None:
    a = ints(20, lo=-(2**31), hi=2**31 - 1)
    same(from_np(a).astype(uint32), a.astype(np.uint32))
    u = ints(20, lo=0, hi=2**32 - 1, dtype=np.uint32)
    same(from_np(u).astype(int32), u.astype(np.int32))
    same(from_np(a).astype(float32), a.astype(np.float32))
    same(from_np(a).astype(bool_), a.astype(np.bool_))
    with np.errstate(over="ignore"):
        same(from_np(a).astype(float16), a.astype(np.float16))


def test_float32_and_float16_rounding() -> None:
    assert tensor([0.1]).item() == float(np.float32(0.1))
    assert tensor([16777217.0]).item() == 16777216.0
    assert tensor([1e-46]).item() == 0.0
    assert (tensor([16777216.0]) + 1.0).item() == 16777216.0
    assert tensor([3.4e39]).item() == math.inf
    x = floats(100, lo=-7e4, hi=7e4, dtype=np.float64)
    with np.errstate(over="ignore"):
        same(tensor(x.tolist(), dtype=float16), x.astype(np.float16))
        same(from_np(x.astype(np.float32)).astype(float16), x.astype(np.float32).astype(np.float16))
    f = floats(30)
    same(from_np(f).astype(float16).astype(float32), f.astype(np.float16).astype(np.float32))


def test_bool_casts() -> None:
    x = tensor([0.0, -0.0, 2.5, float("nan")])
    assert x.astype(bool_).tolist() == [False, False, True, True]
    assert tensor([True, False], dtype=bool_).astype(float32).tolist() == [1.0, 0.0]


# ---------------------------------------------------------------- where / maximum / minimum / clip


def test_where_takes_a_python_bool_condition_but_not_an_int() -> None:
    a, b = tensor([1.0, 2.0]), tensor([3.0, 4.0])
    assert where(True, a, b).tolist() == [1.0, 2.0]
    with pytest.raises(MimirError) as info:
        where(1, a, b)
    assert info.value.message == "the condition of `where()` must be a bool tensor, got int32"


def test_where_maximum_minimum_clip() -> None:
    a, b = floats(4, 5), floats(5)
    c = a > 0
    same(where(from_np(c), from_np(a), from_np(b)), np.where(c, a, b))
    same(where(from_np(c), from_np(a), 0.0), np.where(c, a, np.float32(0)))
    same(maximum(from_np(a), from_np(b)), np.maximum(a, b))
    same(minimum(from_np(a), 0.5), np.minimum(a, np.float32(0.5)))
    same(from_np(a).clip(-0.5, 0.5), np.clip(a, np.float32(-0.5), np.float32(0.5)))
    i = ints(9)
    same(from_np(i).clip(-3, 4), np.clip(i, -3, 4))
    j = ints(9)
    same(maximum(from_np(i), from_np(j)), np.maximum(i, j))
    same(minimum(from_np(i), 2), np.minimum(i, np.int32(2)))


def test_creation_functions() -> None:
    same(zeros((2, 3)), np.zeros((2, 3), np.float32))
    same(ones((4,), dtype=int32), np.ones(4, np.int32))
    same(full((2, 2), 7, dtype=uint32), np.full((2, 2), 7, np.uint32))
    same(full(3, 0.1), np.full(3, 0.1, np.float32))
    assert zeros((2,)).device == "cpu"
    for bad in (lambda: zeros((2, -1)), lambda: ones((-3,))):
        with pytest.raises(MimirError) as info:
            bad()
        assert info.value.code == "GPU025"
    with pytest.raises(MimirError) as info:
        zeros((2.0, 3))
    assert info.value.code == "GPU036"


def test_rand_is_seeded_and_in_range() -> None:
    a, b = rand((50,), seed=3), rand((50,), seed=3)
    assert a.flat() == b.flat() and a.flat() != rand((50,), seed=4).flat()
    assert all(-1.0 <= v < 1.0 for v in a.flat())
    i = rand((200,), dtype=int32, low=-2, high=2, seed=1)
    assert set(i.flat()) == {-2, -1, 0, 1, 2}
    assert rand((3,), dtype=bool_).dtype == bool_


# ---------------------------------------------------------------- devices


def test_to_moves_between_devices_without_mutating() -> None:
    x = tensor([1.0, 2.0])
    y = x.to("gpu")
    assert x.device == "cpu" and y.device == "gpu" and y.to("cpu").device == "cpu"
    assert (y + y).device == "gpu" and (x * 2).device == "cpu"
    assert (y[None, :] @ y[:, None]).device == "gpu"
    with pytest.raises(ValueError):
        x.to("tpu")


def test_mixed_devices_is_gpu061() -> None:
    cpu, dev = zeros((3,)), zeros((3,)).to("gpu")
    for op in (lambda: cpu + dev, lambda: dev * cpu, lambda: where(dev > 0, cpu, dev),
               lambda: cpu[:, None] @ dev[None, :], lambda: maximum(cpu, dev)):  # fmt: skip
        with pytest.raises(MimirError) as info:
            op()
        assert info.value.code == "GPU061"


@gpu
def _add(a: Tensor[float32, 3], b: Tensor[float32, 3]) -> Tensor[float32, 3]:
    return a + b


def test_cpu_argument_is_gpu060() -> None:
    with pytest.raises(MimirError) as info:
        _add(zeros((3,)), zeros((3,)).to("gpu"))
    assert info.value.code == "GPU060"
    out = _add(ones((3,)).to("gpu"), ones((3,)).to("gpu"))
    assert out.device == "gpu" and out.tolist() == [2.0, 2.0, 2.0]


def test_tensors_created_inside_a_kernel_are_on_gpu() -> None:
    @gpu
    def make(a: Tensor[float32, 3]) -> Tensor[float32, 3]:
        return zeros((3,)) + ones((3,)) + full((3,), 2.0) + a * 0.0

    assert make(zeros((3,)).to("gpu")).device == "gpu"


# ---------------------------------------------------------------- argument binding


N = Dim("N")
M4 = Dim("M4", multiple_of=4, max=16)
SMALL = Dim("SMALL", min=2, max=3)


@gpu
def _pair(a: Tensor[float32, N, 2], b: Tensor[float32, N]) -> Tensor[float32, N]:
    return a.sum(axis=1) + b


@gpu
def _constrained(a: Tensor[int32, M4], b: Tensor[int32, SMALL]) -> Tensor[int32, M4]:
    return a * b.sum()


def _code(fn) -> str:
    with pytest.raises(MimirError) as info:
        fn()
    return info.value.code


def test_argument_shapes_gpu040() -> None:
    g = lambda *s, dtype=float32: zeros(s, dtype=dtype).to("gpu")  # noqa: E731
    assert _pair(g(3, 2), g(3)).shape == (3,)
    assert _pair(g(1, 2), g(1)).shape == (1,)
    assert _code(lambda: _pair(g(3, 2), g(4))) == "GPU040"  # N bound twice, differently
    assert _code(lambda: _pair(g(3, 3), g(3))) == "GPU040"  # literal size
    assert _code(lambda: _pair(g(3), g(3))) == "GPU040"  # rank
    assert _code(lambda: _pair(g(3, 2), 1.0)) == "GPU040"  # not a tensor
    assert _code(lambda: _pair(g(3, 2, dtype=int32), g(3))) == "GPU041"


def test_argument_dtypes_gpu041() -> None:
    g = lambda *s, dtype=int32: zeros(s, dtype=dtype).to("gpu")  # noqa: E731
    assert _constrained(g(8), g(2)).dtype == int32
    for dtype in (float32, uint32, bool_, float16):
        assert _code(lambda d=dtype: _constrained(g(8, dtype=d), g(2))) == "GPU041"


def test_dim_constraints_gpu042() -> None:
    g = lambda *s: ones(s, dtype=int32).to("gpu")  # noqa: E731
    assert _constrained(g(4), g(3)).tolist() == [3, 3, 3, 3]
    assert _constrained(g(16), g(2)).shape == (16,)
    assert _code(lambda: _constrained(g(6), g(2))) == "GPU042"  # multiple_of
    assert _code(lambda: _constrained(g(20), g(2))) == "GPU042"  # max
    assert _code(lambda: _constrained(g(8), g(1))) == "GPU042"  # min
    assert _code(lambda: _constrained(g(8), g(4))) == "GPU042"  # max
    err = pytest.raises(MimirError, lambda: _constrained(g(6), g(2))).value
    assert "M4=6" in err.message and "multiple_of=4" in err.message


def test_result_is_checked_against_the_annotation() -> None:
    @gpu
    def wrong_shape(a: Tensor[float32, N]) -> Tensor[float32, N, 1]:
        return a

    @gpu
    def wrong_dtype(a: Tensor[float32, N]) -> Tensor[int32, N]:
        return a

    v = zeros((3,)).to("gpu")
    assert _code(lambda: wrong_shape(v)) == "GPU015"
    assert _code(lambda: wrong_dtype(v)) == "GPU016"


def test_host_only_attributes_are_refused_inside_kernels() -> None:
    @gpu
    def peek(a: Tensor[float32, 2]) -> Tensor[float32, 2]:
        return a * a.ndim

    assert _code(lambda: peek(zeros((2,)).to("gpu"))) == "GPU030"
    t = zeros((2,))
    assert t.ndim == 1 and t.dtype == float32 and t.device == "cpu"


def test_truth_value_of_a_tensor_is_refused() -> None:
    with pytest.raises(MimirError) as info:
        bool(zeros((1,)))
    assert info.value.code == "GPU031"


def test_unknown_attribute_and_operators() -> None:
    t = zeros((2,), dtype=int32)
    for op in (lambda: t.tan(), lambda: +t):
        assert _code(op) == "GPU030"


# ---------------------------------------------------------------- import isolation


def test_importing_the_shim_imports_no_heavy_dependency() -> None:
    script = (
        "import json, sys\n"
        "import mimir.array\n"
        "from mimir.array import Tensor, gpu, Dim, float32, zeros\n"
        "x = zeros((2, 2)) @ zeros((2, 2))\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('z3', 'networkx', 'numpy'))\n"
        "print(json.dumps(heavy))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(out.stdout) == []


# ---------------------------------------------------------------- bit operations


def test_int32_shifts_wrap_and_right_shift_is_arithmetic() -> None:
    a = tensor([-8, 1, 3, -1], dtype=int32)
    assert (a << 1).tolist() == [-16, 2, 6, -2]
    assert (tensor([1], dtype=int32) << 31).tolist() == [-(2**31)]  # the bit past 31 dropped
    assert (tensor([3], dtype=int32) << 31).tolist() == [-(2**31)]
    assert (a >> 1).tolist() == [-4, 0, 1, -1]  # sign-filling, as Python's
    assert (a ^ 5).tolist() == [-8 ^ 5, 4, 6, -6]
    want = np.array([-8, 1, 3, -1], np.int32)
    assert (a << 3).tolist() == (want << 3).tolist()


def test_uint32_right_shift_is_logical() -> None:
    a = tensor([0xFFFFFFFF, 0x80000000], dtype=uint32)
    assert (a >> 31).tolist() == [1, 1]
    assert (a << 4).tolist() == [0xFFFFFFF0, 0]
    assert (a ^ 0xFFFFFFFF).tolist() == [0, 0x7FFFFFFF]


def test_bool_xor_and_shift_dtypes() -> None:
    p, q = tensor([True, True, False]), tensor([True, False, False])
    assert (p.astype(bool_) ^ q.astype(bool_)).tolist() == [False, True, False]
    assert _code(lambda: tensor([1.0]) << 1) == "GPU020"
    assert _code(lambda: tensor([True], dtype=bool_) << tensor([True], dtype=bool_)) == "GPU020"


def test_a_shift_count_outside_0_to_31_is_gpu037() -> None:
    a = tensor([1, 2], dtype=int32)
    assert _code(lambda: a << 32) == "GPU037"
    assert _code(lambda: a >> -1) == "GPU037"
    assert _code(lambda: a << tensor([3, 40], dtype=int32)) == "GPU037"
    assert (a << tensor([0, 31], dtype=int32)).tolist() == [1, 0]


# ---------------------------------------------------------------- special functions


def test_special_functions_are_math_rounded_to_float32() -> None:
    xs = [-3.0, -0.5, -1e-7, 0.0, 1e-7, 0.75, 2.5]
    x = tensor(xs)
    for method, fn in (
        ("cosh", math.cosh),
        ("sinh", math.sinh),
        ("expm1", math.expm1),
        ("erf", math.erf),
        ("erfc", math.erfc),
        ("atan", math.atan),
    ):
        got = getattr(x, method)().tolist()
        want = np.array([fn(v) for v in xs], np.float32).tolist()
        assert got == want, method
    assert tensor([1e-7, -0.5]).log1p().tolist() == np.float32(np.log1p([1e-7, -0.5])).tolist()


def test_special_functions_give_ieee_answers_where_python_raises() -> None:
    assert tensor([-1.0, -2.0, 1.0]).log1p().tolist()[0] == -math.inf
    assert math.isnan(tensor([-2.0]).log1p().tolist()[0])
    assert tensor([1000.0, -1000.0]).sinh().tolist() == [math.inf, -math.inf]
    assert tensor([1000.0]).expm1().tolist() == [math.inf]
    assert tensor([3], dtype=int32).cosh().dtype == float32


def test_atan2_broadcasts_and_follows_math() -> None:
    from mimir.array import atan2

    y = tensor([[1.0], [-1.0]])
    x = tensor([-1.0, 0.0, 2.0])
    got = atan2(y, x)
    assert got.shape == (2, 3)
    want = [[math.atan2(a, b) for b in (-1.0, 0.0, 2.0)] for a in (1.0, -1.0)]
    assert got.tolist() == np.float32(want).tolist()
    assert atan2(tensor([-0.0]), tensor([-0.0])).tolist() == [np.float32(-math.pi)]


def test_gelu_approximate() -> None:
    x = tensor([-2.0, -0.5, 0.0, 1.5])
    exact = [v * 0.5 * math.erfc(-v / math.sqrt(2.0)) for v in (-2.0, -0.5, 0.0, 1.5)]
    assert x.gelu(approximate="none").tolist() == np.float32(exact).tolist()
    assert x.gelu(approximate="tanh").tolist() == x.gelu().tolist()
    assert x.gelu("none").tolist() == x.gelu(approximate="none").tolist()
    assert _code(lambda: x.gelu(approximate="exact")) == "GPU036"
    assert _code(lambda: x.gelu(approximate=None)) == "GPU036"
