"""The IR's canonical form (`mimir.codegen.ir.legalise`): folded constants, typed literals.

Constant folding and integer literal typing happen once, in the IR, so that no
printer meets `u.N + -1u` (naga rejects a unary minus on an unsigned literal;
MSL accepts the same text). The end-to-end case is `x[:, -1]` on a symbolic axis.
"""

from __future__ import annotations

import pytest
from harness import require_tool

from mimir.codegen import compile_source
from mimir.codegen.ir import (
    Binary,
    Cast,
    Const,
    Kernel,
    Let,
    Select,
    Store,
    Unary,
    Uniform,
    Var,
    fold,
    legalise,
    literal_problems,
)

N = Uniform("N", "u32")
IV = Var("i", "i32")

LAST_COLUMN = """\
from mimir.array import Dim, Tensor, float32, gpu

N = Dim("N")
M = Dim("M")


@gpu
def last(x: Tensor[float32, M, N]) -> Tensor[float32, M]:
    return x[:, -1]
"""


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (Binary("+", N, Const(-1, "u32"), "u32"), Binary("-", N, Const(1, "u32"), "u32")),
        (Binary("+", N, Const(2**32 - 3, "u32"), "u32"), Binary("-", N, Const(3, "u32"), "u32")),
        (Binary("-", N, Const(-2, "u32"), "u32"), Binary("+", N, Const(2, "u32"), "u32")),
        (Binary("+", IV, Const(-4, "i32"), "i32"), Binary("-", IV, Const(4, "i32"), "i32")),
        (Binary("+", Const(-1, "u32"), N, "u32"), Binary("-", N, Const(1, "u32"), "u32")),
        (Const(-1, "u32"), Const(2**32 - 1, "u32")),
        (Const(2**31, "i32"), Const(-(2**31), "i32")),
        (Binary("*", Const(2**16, "u32"), Const(2**16, "u32"), "u32"), Const(0, "u32")),
        (Binary("-", Const(0, "u32"), Const(1, "u32"), "u32"), Const(2**32 - 1, "u32")),
        (Binary("/", Const(-7, "i32"), Const(2, "i32"), "i32"), Const(-3, "i32")),
        (Binary("%", Const(-7, "i32"), Const(2, "i32"), "i32"), Const(-1, "i32")),
        (Binary("<", Const(3, "u32"), Const(5, "u32"), "bool"), Const(True, "bool")),
        (Binary("*", Binary("+", N, Const(0, "u32"), "u32"), Const(1, "u32"), "u32"), N),
        (Cast(Const(-1, "i32"), "u32"), Const(2**32 - 1, "u32")),
        # an integer literal float32 holds exactly (a reduction's count) becomes a float one
        (Cast(Const(1024, "u32"), "f32"), Const(1024.0, "f32")),
        (Cast(Const(-(2**24), "i32"), "f32"), Const(-16777216.0, "f32")),
        (Unary("-", Const(5, "i32"), "i32"), Const(-5, "i32")),
        (Select(Const(False, "bool"), N, Const(7, "u32"), "u32"), Const(7, "u32")),
    ],
)
def test_fold(before, after) -> None:
    assert fold(before) == after


@pytest.mark.parametrize(
    "kept",
    [
        Binary("/", IV, Const(0, "i32"), "i32"),  # never folded into a host exception
        Binary("/", Const(-(2**31), "i32"), Const(-1, "i32"), "i32"),  # INT_MIN / -1
        Binary("+", IV, Const(-(2**31), "i32"), "i32"),  # -INT_MIN does not exist
        Binary("<<", Const(1, "u32"), Const(40, "u32"), "u32"),  # backends differ past 31
        Binary("+", Var("f", "f32"), Const(0.0, "f32"), "f32"),  # -0.0 + 0.0 is 0.0
        Cast(Const(2**24 + 1, "u32"), "f32"),  # rounds: left to the backend's conversion
    ],
)
def test_what_is_not_folded(kept) -> None:
    assert fold(kept) == kept


def test_legalise_leaves_no_negative_unsigned_literal() -> None:
    body = [
        Let(Var("a", "u32"), Binary("+", N, Const(-1, "u32"), "u32")),
        Store("out", Binary("+", Var("a", "u32"), Const(-2, "u32"), "u32"), Const(0.0, "f32")),
    ]
    kernel = Kernel("k", "ew", (64, 1, 1), (1, 1, 1), [], [("N", "u32")], True, [], body, [])
    assert len(literal_problems(kernel)) == 2
    assert literal_problems(legalise(kernel)) == []


def test_last_column_on_a_symbolic_axis_validates_everywhere() -> None:
    result = compile_source("last.py", LAST_COLUMN, ["msl", "wgsl", "ptx", "spirv"])
    assert result.ok, [(d.code, d.message) for d in result.diagnostics]
    wgsl = next(v for k, v in result.files.items() if k.endswith(".wgsl"))
    assert "-1u" not in wgsl
    for text in (v for k, v in result.files.items() if k.endswith((".metal", ".wgsl"))):
        assert "+ -" not in text
    require_tool("wgpu")
    from mimir.runtime.wgpu_runner import validate_wgsl

    validate_wgsl(wgsl)
