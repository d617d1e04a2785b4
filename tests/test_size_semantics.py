"""Sizes in the shim mean what the checker proves: at the exact sizes issue reports name.

The fixtures (`tests/fixtures/check/symbolic_bounds.py`, `empty_axes.py`, `dims_as_values.py`,
`size_division.py`) compare checker and shim at the checker's counterexample; these tests pin
the shim's behaviour at other sizes too, where NumPy's reading and the kernel language's differ.
"""

from __future__ import annotations

import math

import pytest

from mimir.array import Dim, MimirError, Tensor, float32, full, gpu, rand, zeros
from mimir.dims import BinOp, SizeInt

N = Dim("N")
K0 = Dim("K0", min=0)
M0 = Dim("M0", min=0)
D = Dim("D")


@gpu
def last3(x: Tensor[float32, N]) -> Tensor[float32, 3]:
    return x[N - 3 : N]


@gpu
def all_but_last3(x: Tensor[float32, N]) -> Tensor[float32, N - 3]:
    return x[0 : N - 3]


@gpu
def last_column(x: Tensor[float32, N, 4]) -> Tensor[float32, N]:
    return x[:, -1]


@gpu
def mean_rows(x: Tensor[float32, K0, 4]) -> Tensor[float32, 4]:
    return x.mean(axis=0)


@gpu
def softmax_rest(x: Tensor[float32, 4, N]) -> Tensor[float32, 4, N - 1]:
    return x[:, 1:].log_softmax()


@gpu
def infer_rows(x: Tensor[float32, 4, K0], k: Tensor[float32, K0]) -> Tensor[float32, 1, K0]:
    return x.reshape(-1, K0)


@gpu
def split(x: Tensor[float32, N], m: Tensor[float32, M0]) -> Tensor[float32]:
    return zeros((N // M0,)).sum()


@gpu
def scale(q: Tensor[float32, N, D], k: Tensor[float32, N, D]) -> Tensor[float32, N, N]:
    return q @ k.T / (D**0.5)


@gpu
def size_values(x: Tensor[float32, K0]) -> Tensor[float32]:
    return full((), 1.0 / K0) + full((), K0)


@gpu
def size_powers(x: Tensor[float32, K0]) -> Tensor[float32]:
    return full((), K0**-1) + full((), (-K0) ** 0.5) * 0.0 + full((), K0**-1.0)


def _x(*shape: int) -> Tensor:
    return rand(shape, seed=1).to("gpu")


def _code(fn, *args) -> str:
    with pytest.raises(MimirError) as info:
        fn(*args)
    return info.value.code


@pytest.mark.parametrize("n", [1, 2])
def test_a_dim_bound_never_counts_from_the_end(n: int) -> None:
    # NumPy reads `N - 3 = -1` at N=2 as "the last element" (GPU015 then); the language does not.
    assert _code(last3, _x(n)) == "GPU018"
    assert _code(all_but_last3, _x(n)) == "GPU018"


def test_a_dim_bound_in_range_slices_as_written() -> None:
    x = _x(5)
    assert last3(x).flat() == x.flat()[2:]
    assert all_but_last3(x).flat() == x.flat()[:2]
    assert all_but_last3(_x(3)).shape == (0,)


def test_a_negative_literal_keeps_numpys_meaning() -> None:
    x = _x(3, 4)
    assert last_column(x).flat() == x.flat()[3::4]


def test_empty_axes_are_gpu024_not_python_errors() -> None:
    assert _code(mean_rows, _x(0, 4)) == "GPU024"
    assert mean_rows(_x(2, 4)).shape == (4,)
    assert _code(softmax_rest, _x(4, 1)) == "GPU024"
    assert _code(infer_rows, _x(4, 0), _x(0)) == "GPU013"


def test_size_division_by_zero_is_gpu036() -> None:
    assert _code(split, _x(3), _x(0)) == "GPU036"
    assert split(_x(6), _x(2)).flat() == [0.0]


def test_a_dim_is_a_number_inside_a_kernel() -> None:
    q, k = _x(2, 4), _x(2, 4)
    got = scale(q, k).flat()
    qv, kv = q.flat(), k.flat()
    want = [
        sum(qv[i * 4 + c] * kv[j * 4 + c] for c in range(4)) for i in range(2) for j in range(2)
    ]
    assert got == pytest.approx([w / 2.0 for w in want], rel=1e-6)
    assert size_values(_x(4)).flat() == [4.25]
    assert size_values(_x(0)).flat() == [math.inf]  # 1.0 / 0 is inf, as on a GPU
    # `**` is the kernel language's: an int to a negative power keeps its integer part,
    # 0.0 ** -1.0 is inf and a negative base to a fractional power is nan (never complex).
    assert math.isnan(size_powers(_x(4)).flat()[0])
    assert size_powers(_x(0)).flat() == [math.inf]


def test_dim_arithmetic_outside_a_kernel_builds_expressions() -> None:
    assert isinstance(N - 3, BinOp) and str(N - 3) == "N - 3"
    assert isinstance(-N, BinOp)
    with pytest.raises(TypeError):
        N**2  # noqa: B018 - sizes are `+ - * // %` only
    with pytest.raises(TypeError):
        1.0 / N  # noqa: B018


def test_size_ints_keep_their_mark() -> None:
    s = SizeInt(5)
    assert isinstance(s - 3, SizeInt) and isinstance(3 - s, SizeInt) and isinstance(-s, SizeInt)
    assert isinstance(s // 2, SizeInt) and isinstance(s % 2, SizeInt)
    assert type(s * 0.5) is float and s / 2 == 2.5


C = Dim("C")
NH = Dim("NH")
HS = Dim("HS")
EVEN = Dim("EVEN", multiple_of=2)


@gpu
def thirds(x: Tensor[float32, 3 * C]) -> Tensor[float32, C]:
    return x[:C] + x[2 * C :]


@gpu
def heads(qkv: Tensor[float32, 3 * NH * HS], h: Tensor[float32, NH]) -> Tensor[float32, HS]:
    return qkv[:HS]


@gpu
def after_even(x: Tensor[float32, EVEN + 1]) -> Tensor[float32, EVEN]:
    return x[1:]


@gpu
def past_rows(x: Tensor[float32, N + K0]) -> Tensor[float32, N]:
    return x[K0:]


def test_a_dim_only_an_equation_fixes_is_solved_exactly() -> None:
    """`3 * C` alone: C is the size / 3; a size 3 does not divide fits no C (GPU040), the
    checker's code at a host call; the solved value keeps its dim's constraints (GPU042)."""
    assert thirds(_x(6)).shape == (2,)
    assert [_code(thirds, _x(n)) for n in (1, 7, 8)] == ["GPU040"] * 3
    assert heads(_x(24), _x(2)).shape == (4,)  # HS = 24 / (3 * 2), NH from h
    assert _code(heads, _x(24), _x(5)) == "GPU040"
    assert after_even(_x(5)).shape == (4,)
    assert _code(after_even, _x(4)) == "GPU042"  # EVEN = 3 is not a multiple of 2
    assert _code(after_even, _x(1)) == "GPU042"  # EVEN = 0 is below its minimum 1


def test_two_unknown_dims_in_one_axis_fix_neither() -> None:
    assert _code(past_rows, _x(3)) == "GPU035"


LIMIT = 6
MAXT = Dim("MAXT")
T = Dim("T", max=MAXT)
WIDE = Dim("WIDE", min=T, max=2 * MAXT)
CAPPED = Dim("CAPPED", max=LIMIT - 2)


@gpu
def first_rows(x: Tensor[float32, T], table: Tensor[float32, MAXT]) -> Tensor[float32, T]:
    return x + table[:T]


@gpu
def wide_window(
    w: Tensor[float32, WIDE], x: Tensor[float32, T], table: Tensor[float32, MAXT]
) -> Tensor[float32, T]:
    return w[:T] + x + table[:T]


@gpu
def capped(x: Tensor[float32, CAPPED]) -> Tensor[float32, CAPPED]:
    return x


def test_a_relation_between_dims_is_checked_once_both_are_bound() -> None:
    """`Dim("T", max=MAXT)`: T = MAXT runs, T > MAXT is GPU042; relations by expressions
    (`min=T, max=2 * MAXT`) too; `max=LIMIT - 2` of a module constant is an int bound."""
    assert first_rows(_x(4), _x(4)).shape == (4,)
    assert _code(first_rows, _x(5), _x(4)) == "GPU042"
    assert wide_window(_x(8), _x(3), _x(4)).shape == (3,)
    assert _code(wide_window, _x(2), _x(3), _x(4)) == "GPU042"  # WIDE < T
    assert _code(wide_window, _x(9), _x(3), _x(4)) == "GPU042"  # WIDE > 2 * MAXT
    assert CAPPED.max == 4 and capped(_x(4)).shape == (4,)
    assert _code(capped, _x(5)) == "GPU042"
    assert T.describe_constraints() == "min=1, max=MAXT"
