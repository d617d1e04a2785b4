"""Triton kernels for the ops of benchmarks/roofline_ops.py, compiled offline for sm_90.

    python benchmarks/triton_anchors.py [--dims D=1024,R=1000]

benchmarks/kernel_static.py prints them beside Mimir's kernels (`--no-triton` to skip).
Each anchor is compiled with `triton.compiler.ASTSource` for `GPUTarget("cuda", 90, 32)`
(no GPU, no driver), asking for PTX ISA 9.0 so that the same ptxas 13.0 and `cuobjdump
-sass` that kernel_static.py uses for Mimir's PTX assemble and count it (the PTX is the
same: Triton's LLVM caps its PTX features at 9.0; only the `.version` line differs).

The kernels are the textbook Triton ones (one program per block of 1024 elements, or per
row with the whole row in registers; a sum with one `atomic_add` per program; the tiled
matmul with a pipelined K loop). Integer arguments and pointers carry the 16-divisibility
hint that Triton's launcher derives at run time for 16-aligned pointers and sizes that are
multiples of 16 (so a row of 1000 gets none). Triton (the `bench` extra) is optional: this
module imports without it and then `AVAILABLE` is False.

Per element: every anchor but the matmul is loop-free, so one thread executes its static
SASS once (a division's slow path counted as if taken) and SASS per element is the static
count times threads per program over elements per program. The matmul's cost is its K
loop: the body of the loop (a backward branch in the SASS) times threads over the
multiply-adds of one iteration (BM*BN*BK).
"""

# Triton spells compile-time block sizes and matrix sizes in capitals (BLOCK, BM, M)
# ruff: noqa: N803

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # Triton 3.9's default, stated

# MIMIR_ANCHORS_SPEC_ONLY=1: the anchor list without importing triton (tests read it)
try:
    if os.environ.get("MIMIR_ANCHORS_SPEC_ONLY") == "1":
        raise ImportError("MIMIR_ANCHORS_SPEC_ONLY=1")
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    AVAILABLE = True
except ImportError:  # pragma: no cover - depends on the environment
    AVAILABLE = False

TARGET_ARCH = 90
PTX_VERSION = 90  # what ptxas 13.0 (kernel_static.py's) accepts


@dataclass(frozen=True)
class Anchor:
    """One Triton kernel standing for one `@gpu` function of roofline_ops.py."""

    function: str  # the roofline_ops.py function it stands for
    kernel: str  # the @triton.jit function below
    signature: dict[str, str]
    constexprs: dict[str, Any] = field(default_factory=dict)
    divisible: tuple[str, ...] = ()  # arguments with the 16-divisibility hint
    num_warps: int = 4
    num_stages: int = 3
    # elements (or multiply-adds per K iteration) one program handles, from the dims
    work: str = "BLOCK"
    per: str = "el"  # "el" or "mac"
    launches: int = 1
    note: str = ""


# ops and dims of roofline_ops.py as kernel_static.py binds them (OPS_DIMS)
ROW = "D"  # the row length of softmax_rows / layer_norm / rms_norm / row_sum
_P = "*fp32"
_ELEMENTWISE_SIG = {"a": _P, "b": _P, "out": _P, "n": "i32", "BLOCK": "constexpr"}
_ROW_SIG = {"x": _P, "out": _P, "stride": "i32", "n_cols": "i32", "BLOCK": "constexpr"}
_LN_SIG = {
    "x": _P,
    "gamma": _P,
    "beta": _P,
    "out": _P,
    "stride": "i32",
    "n_cols": "i32",
    "eps": "fp32",
    "BLOCK": "constexpr",
}
_RMS_SIG = {
    "x": _P,
    "w": _P,
    "out": _P,
    "stride": "i32",
    "n_cols": "i32",
    "eps": "fp32",
    "BLOCK": "constexpr",
}
_MM_SIG = {
    "a": _P,
    "w": _P,
    "bias": _P,
    "out": _P,
    "M": "i32",
    "N": "i32",
    "K": "i32",
    "stride_am": "i32",
    "stride_wk": "i32",
    "stride_om": "i32",
    "BM": "constexpr",
    "BN": "constexpr",
    "BK": "constexpr",
    "PRECISION": "constexpr",
}

ANCHORS: list[Anchor] = [
    Anchor(
        "vector_add",
        "t_vector_add",
        _ELEMENTWISE_SIG,
        {"BLOCK": 1024},
        ("a", "b", "out", "n"),
    ),
    Anchor(
        "sigmoid_chain",
        "t_sigmoid_chain",
        _ELEMENTWISE_SIG,
        {"BLOCK": 1024},
        ("a", "b", "out", "n"),
    ),
    Anchor(
        "softmax_rows",
        "t_softmax",
        _ROW_SIG,
        {"BLOCK": "pow2(D)"},
        ("x", "out", "stride", "n_cols"),
        num_warps=8,
        work="D",
    ),
    Anchor(
        "softmax_1024",
        "t_softmax",
        _ROW_SIG,
        {"BLOCK": 1024, "n_cols": 1024, "stride": 1024},
        ("x", "out"),
        num_warps=8,
        work="1024",
    ),
    Anchor(
        "softmax_bounded",
        "t_softmax",
        _ROW_SIG,
        {"BLOCK": "pow2(R)"},
        ("x", "out"),
        num_warps=8,
        work="R",
    ),
    Anchor(
        "layer_norm",
        "t_layer_norm",
        _LN_SIG,
        {"BLOCK": "pow2(D)"},
        ("x", "gamma", "beta", "out", "stride", "n_cols"),
        work="D",
    ),
    Anchor(
        "rms_norm",
        "t_rms_norm",
        _RMS_SIG,
        {"BLOCK": "pow2(D)"},
        ("x", "w", "out", "stride", "n_cols"),
        work="D",
    ),
    Anchor(
        "row_sum",
        "t_row_sum",
        _ROW_SIG,
        {"BLOCK": "pow2(D)"},
        ("x", "out", "stride", "n_cols"),
        work="D",
    ),
    Anchor(
        "total",
        "t_total",
        {"x": _P, "out": _P, "n": "i32", "BLOCK": "constexpr"},
        {"BLOCK": 4096},
        ("x", "out", "n"),
        note="out zeroed before the launch (atomic_add per program)",
    ),
    Anchor(
        "matmul_bias_relu",
        "t_matmul_bias_relu",
        _MM_SIG,
        {"BM": 128, "BN": 128, "BK": 32, "PRECISION": "ieee"},
        ("a", "w", "bias", "out", "M", "N", "K", "stride_am", "stride_wk", "stride_om"),
        num_warps=8,
        num_stages=3,
        work="BM*BN*BK",
        per="mac",
        note="fp32 FMA (input_precision='ieee')",
    ),
    # the same matmul on float16 and bfloat16 operands: tensor cores on both sides
    Anchor(
        "matmul_bias_relu_f16",
        "t_matmul_bias_relu",
        {**_MM_SIG, "a": "*fp16", "w": "*fp16"},
        {"BM": 128, "BN": 128, "BK": 32, "PRECISION": "tf32"},
        ("a", "w", "bias", "out", "M", "N", "K", "stride_am", "stride_wk", "stride_om"),
        num_warps=8,
        num_stages=3,
        work="BM*BN*BK",
        per="mac",
        note="fp16 tensor cores, f32 accumulator",
    ),
    Anchor(
        "matmul_bias_relu_bf16",
        "t_matmul_bias_relu",
        {**_MM_SIG, "a": "*bf16", "w": "*bf16"},
        {"BM": 128, "BN": 128, "BK": 32, "PRECISION": "tf32"},
        ("a", "w", "bias", "out", "M", "N", "K", "stride_am", "stride_wk", "stride_om"),
        num_warps=8,
        num_stages=3,
        work="BM*BN*BK",
        per="mac",
        note="bf16 tensor cores, f32 accumulator",
    ),
    Anchor(
        "layer_norm_1024",
        "t_layer_norm",
        _LN_SIG,
        {"BLOCK": 1024, "n_cols": 1024, "stride": 1024},
        ("x", "gamma", "beta", "out"),
        work="1024",
    ),
]

# the same matmul on tensor cores, beside Mimir's `@gpu(precision="tf32")` version of it
# (roofline_ops.matmul_bias_relu_tf32)
TF32 = Anchor(
    "matmul_bias_relu_tf32",
    "t_matmul_bias_relu",
    _MM_SIG,
    {"BM": 128, "BN": 128, "BK": 32, "PRECISION": "tf32"},
    ("a", "w", "bias", "out", "M", "N", "K", "stride_am", "stride_wk", "stride_om"),
    num_warps=8,
    num_stages=3,
    work="BM*BN*BK",
    per="mac",
    note="TF32 tensor cores (input_precision='tf32')",
)


if AVAILABLE:

    @triton.jit
    def t_vector_add(a, b, out, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(a + offs, mask=mask)
        y = tl.load(b + offs, mask=mask)
        tl.store(out + offs, x + y, mask=mask)

    @triton.jit
    def t_sigmoid_chain(a, b, out, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(a + offs, mask=mask)
        y = tl.load(b + offs, mask=mask)
        tl.store(out + offs, tl.sigmoid(x * y + 1.0) * x, mask=mask)

    @triton.jit
    def t_softmax(x, out, stride, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        v = tl.load(x + row * stride + cols, mask=mask, other=-float("inf"))
        v = v - tl.max(v, axis=0)
        e = tl.exp(v)
        tl.store(out + row * stride + cols, e / tl.sum(e, axis=0), mask=mask)

    @triton.jit
    def t_layer_norm(x, gamma, beta, out, stride, n_cols, eps, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        v = tl.load(x + row * stride + cols, mask=mask, other=0.0)
        mean = tl.sum(v, axis=0) / n_cols
        centered = tl.where(mask, v - mean, 0.0)
        var = tl.sum(centered * centered, axis=0) / n_cols
        g = tl.load(gamma + cols, mask=mask)
        b = tl.load(beta + cols, mask=mask)
        y = centered * tl.rsqrt(var + eps) * g + b
        tl.store(out + row * stride + cols, y, mask=mask)

    @triton.jit
    def t_rms_norm(x, w, out, stride, n_cols, eps, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        v = tl.load(x + row * stride + cols, mask=mask, other=0.0)
        ms = tl.sum(v * v, axis=0) / n_cols
        g = tl.load(w + cols, mask=mask)
        tl.store(out + row * stride + cols, v / tl.sqrt(ms + eps) * g, mask=mask)

    @triton.jit
    def t_row_sum(x, out, stride, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        v = tl.load(x + row * stride + cols, mask=cols < n_cols, other=0.0)
        tl.store(out + row, tl.sum(v, axis=0))

    @triton.jit
    def t_total(x, out, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        v = tl.load(x + offs, mask=offs < n, other=0.0)
        tl.atomic_add(out, tl.sum(v, axis=0))

    @triton.jit
    def t_matmul_bias_relu(
        a,
        w,
        bias,
        out,
        M,
        N,
        K,
        stride_am,
        stride_wk,
        stride_om,
        BM: tl.constexpr,
        BN: tl.constexpr,
        BK: tl.constexpr,
        PRECISION: tl.constexpr,
    ):
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
        rm = pid_m * BM + tl.arange(0, BM)
        rn = pid_n * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        a_ptr = a + rm[:, None] * stride_am + rk[None, :]
        w_ptr = w + rk[:, None] * stride_wk + rn[None, :]
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            left = K - k * BK
            x = tl.load(a_ptr, mask=rk[None, :] < left, other=0.0)
            y = tl.load(w_ptr, mask=rk[:, None] < left, other=0.0)
            acc = tl.dot(x, y, acc, input_precision=PRECISION)
            a_ptr += BK
            w_ptr += BK * stride_wk
        acc = acc + tl.load(bias + rn, mask=rn < N, other=0.0)[None, :]
        acc = tl.maximum(acc, 0.0)
        mask = (rm[:, None] < M) & (rn[None, :] < N)
        tl.store(out + rm[:, None] * stride_om + rn[None, :], acc, mask=mask)


def _pow2(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def _value(expr: Any, dims: dict[str, int]) -> int:
    """A constexpr or work figure: an int, `pow2(NAME)`, a dim name, a product of those."""
    if isinstance(expr, int):
        return expr
    m = re.fullmatch(r"pow2\((\w+)\)", expr)
    if m:
        return _pow2(dims[m.group(1)])
    total = 1
    for part in expr.split("*"):
        part = part.strip()
        total *= int(part) if part.isdigit() else dims[part]
    return total


def compile_anchor(anchor: Anchor, dims: dict[str, int]) -> dict[str, Any]:
    """Compile one anchor offline; its PTX, Triton's own cubin and the launch figures."""
    if not AVAILABLE:
        raise RuntimeError("triton is not installed (pip install -e '.[bench]')")
    fn = globals()[anchor.kernel]
    constexprs: dict[str, Any] = {}
    for k, v in anchor.constexprs.items():
        constexprs[k] = v if k == "PRECISION" else _value(v, dims)
    signature = {k: ("constexpr" if k in constexprs else v) for k, v in anchor.signature.items()}
    attrs = {
        (fn.arg_names.index(name),): [["tt.divisibility", 16]]
        for name in anchor.divisible
        if name not in constexprs
    }
    src = ASTSource(fn, signature=signature, constexprs=constexprs, attrs=attrs)
    compiled = triton.compile(
        src,
        target=GPUTarget("cuda", TARGET_ARCH, 32),
        options={
            "num_warps": anchor.num_warps,
            "num_stages": anchor.num_stages,
            "ptx_version": PTX_VERSION,
        },
    )
    threads = anchor.num_warps * 32
    work = _value(
        anchor.work, {**dims, **{k: v for k, v in constexprs.items() if isinstance(v, int)}}
    )
    return {
        "ptx": compiled.asm["ptx"],
        "cubin": compiled.asm["cubin"],
        "arch": "sm_90a" if ".target sm_90a" in compiled.asm["ptx"] else "sm_90",
        "threads": threads,
        "work": work,
        "shared": compiled.metadata.shared,
        "config": _config(anchor, constexprs),
    }


def _config(anchor: Anchor, constexprs: dict[str, Any]) -> str:
    parts = [f"{k}={v}" for k, v in constexprs.items() if k in ("BLOCK", "BM", "BN", "BK")]
    parts.append(f"w{anchor.num_warps}")
    if anchor.per == "mac":
        parts.append(f"s{anchor.num_stages}")
        if anchor.signature["a"] != _P:  # half operands: their type, not the precision
            parts.append(anchor.signature["a"].lstrip("*"))
        elif constexprs.get("PRECISION") == "tf32":
            parts.append("tf32")
    return " ".join(parts)


def main() -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", default="D=1024,R=1000")
    args = parser.parse_args()
    dims = {k: int(v) for k, v in (item.split("=") for item in args.dims.split(","))}
    for anchor in [*ANCHORS, TF32]:
        got = compile_anchor(anchor, dims)
        print(f"{anchor.function:<20} {anchor.kernel:<22} {got['config']:<28} {got['arch']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
