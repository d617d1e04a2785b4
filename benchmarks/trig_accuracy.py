"""Measure `mimir_trig` (sin and cos on WGSL and SPIR-V) against float64 over float32 inputs.

    python benchmarks/trig_accuracy.py              # every 1024th bit pattern + hard cases
    python benchmarks/trig_accuracy.py --stride 64  # denser (numpy; a minute or so)
    python benchmarks/trig_accuracy.py --gpu        # also run the WGSL and SPIR-V on wgpu

The IR helper (`mimir.codegen.helpers`, the function the WGSL and SPIR-V backends
print for f32 `sin`/`cos`) is executed by a small vectorised interpreter of the
IR: u32/i32 in numpy's wrapping 32-bit integers, f32 in numpy float32 (every
`+ - *` correctly rounded, as WGSL and Vulkan require). `fma` is evaluated both
ways a backend may print it: fused (a float64 product, exact for float32
operands, plus the addend, rounded to float32: a double rounding that differs
from a true fma in rare ties only) and unfused (product and sum each rounded).
With `--gpu` the same inputs also go through the compiled WGSL and SPIR-V on the
local wgpu adapter (lavapipe in the tests). The reference is numpy's float64
sin/cos of the float32 input (glibc reduces exactly). Errors are in float32 ulp
of the reference (the ulp of a subnormal result is 2^-149); inf and nan inputs
must give nan. docs/language.md quotes the result.
"""

from __future__ import annotations

import argparse
import math
import tempfile
from pathlib import Path

import numpy as np

from mimir.codegen.helpers import HELPERS
from mimir.codegen.ir import (
    Assign,
    Binary,
    Bitcast,
    Call,
    Cast,
    Const,
    Expr,
    Helper,
    If,
    Let,
    Return,
    Select,
    Stmt,
    Unary,
    Var,
    VarDecl,
)

_NP = {"u32": np.uint32, "i32": np.int32, "f32": np.float32, "bool": np.bool_}


class _Run:
    """One vectorised call of a helper: every lane runs every statement; `If` and
    `Return` act through masks."""

    def __init__(self, n: int, fused: bool) -> None:
        self.n, self.fused = n, fused
        self.env: dict[str, np.ndarray] = {}
        self.done = np.zeros(n, dtype=bool)
        self.result: np.ndarray | None = None

    def expr(self, e: Expr) -> np.ndarray:
        if isinstance(e, Const):
            return np.full(self.n, e.value, dtype=_NP[e.type])
        if isinstance(e, Var):
            return self.env[e.name]
        if isinstance(e, Binary):
            a, b = self.expr(e.a), self.expr(e.b)
            if e.op in ("<<", ">>"):
                return (a << b.astype(a.dtype)) if e.op == "<<" else (a >> b.astype(a.dtype))
            ops = {
                "+": np.add, "-": np.subtract, "*": np.multiply, "&": np.bitwise_and,
                "|": np.bitwise_or, "^": np.bitwise_xor, "<": np.less, "<=": np.less_equal,
                ">": np.greater, ">=": np.greater_equal, "==": np.equal, "!=": np.not_equal,
                "&&": np.logical_and, "||": np.logical_or,
            }  # fmt: skip
            return ops[e.op](a, b)
        if isinstance(e, Unary):
            a = self.expr(e.a)
            return {"-": np.negative, "!": np.logical_not, "~": np.invert}[e.op](a)
        if isinstance(e, Select):
            return np.where(self.expr(e.cond), self.expr(e.if_true), self.expr(e.if_false))
        if isinstance(e, Cast):
            return self.expr(e.a).astype(_NP[e.type])
        if isinstance(e, Bitcast):
            return self.expr(e.a).view(_NP[e.type])
        if isinstance(e, Call) and e.fn == "fma":
            a, b, c = (self.expr(x) for x in e.args)
            if self.fused:
                return (a.astype(np.float64) * b + c).astype(np.float32)
            return a * b + c
        raise ValueError(f"no numpy model of {e!r}")

    def block(self, body: list[Stmt] | tuple[Stmt, ...], active: np.ndarray) -> None:
        for s in body:
            live = active & ~self.done
            if isinstance(s, (Let, VarDecl)):
                self.env[s.var.name] = self.expr(s.value if isinstance(s, Let) else s.init)
            elif isinstance(s, Assign):
                self.env[s.var.name] = np.where(live, self.expr(s.value), self.env[s.var.name])
            elif isinstance(s, If):
                cond = self.expr(s.cond)
                self.block(s.then, live & cond)
                self.block(s.orelse, live & ~cond)
            elif isinstance(s, Return):
                value = self.expr(s.value)
                if self.result is None:
                    self.result = np.zeros(self.n, dtype=value.dtype)
                self.result = np.where(live, value, self.result)
                self.done |= live
            else:
                raise ValueError(f"no numpy model of {type(s).__name__}")


def run_helper(h: Helper, args: list[np.ndarray], fused: bool) -> np.ndarray:
    run = _Run(len(args[0]), fused)
    for p, a in zip(h.params, args, strict=True):
        run.env[p.name] = a.astype(_NP[p.type])
    with np.errstate(all="ignore"):
        run.block(h.body, np.ones(run.n, dtype=bool))
    assert run.result is not None and run.done.all()
    return run.result


def trig(x: np.ndarray, cosine: bool, fused: bool) -> np.ndarray:
    q = np.full(len(x), 1 if cosine else 0, dtype=np.uint32)
    return run_helper(HELPERS["mimir_trig"], [x.astype(np.float32), q], fused)


def ulp_error(got: np.ndarray, x: np.ndarray, cosine: bool) -> np.ndarray:
    """|got - f(x)| in float32 ulp of f(x) (computed in float64); inf where a finite x
    gives a non-finite result or a non-finite x does not give nan."""
    with np.errstate(all="ignore"):
        x64 = x.astype(np.float64)
        ref = np.cos(x64) if cosine else np.sin(x64)
        exponent = np.floor(np.log2(np.maximum(np.abs(ref), 2.0**-126)))
        ulp = np.exp2(exponent - 23)
        err = np.abs(got.astype(np.float64) - ref) / ulp
    finite = np.isfinite(x64)
    err = np.where(finite & ~np.isfinite(got), np.inf, err)
    return np.where(finite, err, np.where(np.isnan(got), 0.0, np.inf))


def hard_cases() -> np.ndarray:
    """Arguments known to be hard: near multiples of pi/2, huge, tiny, special."""
    xs = [0.0, -0.0, 2.0**-149, -(2.0**-149), 2.0**-126, 1e-20, 0.5, math.pi / 4, 3e5, 1e22]
    xs += [5.3e8, 1e30, 3.4028234663852886e38, -3.4028234663852886e38, 16367173 * 2.0**72]
    xs += [float("inf"), float("-inf"), float("nan"), 2.0**17, 2.0**17 - 0.0078125]
    for k in (1, 2, 3, 4, 103993, 411557987, 2**20 + 1):
        xs.append(k * math.pi / 2)
    x = np.array(xs, dtype=np.float32)
    bits = x.view(np.uint32).astype(np.int64)
    near = np.concatenate([bits + d for d in range(-4, 5)])
    return np.concatenate([x, (near & 0xFFFFFFFF).astype(np.uint32).view(np.float32)])


def sweep(stride: int) -> np.ndarray:
    bits = np.arange(0, 2**32, stride, dtype=np.uint64)
    # plus the largest float32s below 2^17 (Cody-Waite's end on PTX) and near pi/4
    extra = np.concatenate([np.arange(0x47FFF000, 0x48001000), np.arange(0x3F48F000, 0x3F491000)])
    return np.concatenate([bits.astype(np.uint32), extra.astype(np.uint32)]).view(np.float32)


def near_multiples(limit: float = 2.0**24, within: int = 8) -> np.ndarray:
    """The float32 values within `within` ulp of each multiple of pi/2 below `limit`,
    where r is smallest and the reduction's absolute error counts most."""
    k = np.arange(1, int(limit / (math.pi / 2)) + 1, dtype=np.float64)
    bits = (k * (math.pi / 2)).astype(np.float32).view(np.uint32).astype(np.int64)
    near = np.concatenate([bits + d for d in range(-within, within + 1)])
    return near.astype(np.uint32).view(np.float32)


def worst(err: np.ndarray, x: np.ndarray) -> tuple[float, float]:
    k = int(np.argmax(err))
    return float(err[k]), float(x[k])


_SOURCE = """
from mimir.array import Dim, Tensor, float32, gpu

N = Dim("N")


@gpu
def trig_sin(x: Tensor[float32, N]) -> Tensor[float32, N]:
    return x.sin()


@gpu
def trig_cos(x: Tensor[float32, N]) -> Tensor[float32, N]:
    return x.cos()
"""


def on_gpu(x: np.ndarray) -> dict[tuple[str, str], np.ndarray]:
    """sin and cos of `x` from the compiled WGSL and SPIR-V, on the local wgpu adapter."""
    import json

    from mimir.codegen import compile_source
    from mimir.runtime.wgpu_runner import run_manifest

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "trig_bench.py"
        src.write_text(_SOURCE)
        result = compile_source(str(src), _SOURCE, ["wgsl", "spirv"])
        assert result.ok, result.diagnostics
        for path, content in result.files.items():
            target = Path(tmp) / path
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                target.write_bytes(content)
            else:
                target.write_text(content)
        for backend in ("wgsl", "spirv"):
            for fn in ("trig_sin", "trig_cos"):
                folder = Path(tmp) / backend
                manifest = json.loads((folder / f"{fn}.manifest.json").read_text())
                got = run_manifest(manifest, folder, {"x": x}, {"N": len(x)}, repeat=0)
                out[(backend, fn[5:])] = np.array(got["out"], dtype=np.float32)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stride", type=int, default=1024)
    parser.add_argument("--gpu", action="store_true", help="also run WGSL and SPIR-V on wgpu")
    parser.add_argument("--near", type=float, default=2.0**20, help="multiples of pi/2 below")
    args = parser.parse_args()
    x = np.concatenate([sweep(args.stride), hard_cases(), near_multiples(args.near)])
    print(
        f"{len(x)} float32 inputs: every {args.stride}th bit pattern, hard cases, and the 17 "
        f"nearest each multiple of pi/2 below {args.near:g}"
    )
    print(f"{'function':<8} {'how':<22} {'worst ulp':>10}  at x")
    for cosine in (False, True):
        name = "cos" if cosine else "sin"
        for fused in (True, False):
            err = ulp_error(trig(x, cosine, fused), x, cosine)
            e, at = worst(err, x)
            how = "IR, fma fused" if fused else "IR, fma unfused"
            print(f"{name:<8} {how:<22} {e:>10.3f}  {at!r}")
    if args.gpu:
        for (backend, name), got in on_gpu(x).items():
            e, at = worst(ulp_error(got, x, name == "cos"), x)
            print(f"{name:<8} {backend + ' on wgpu':<22} {e:>10.3f}  {at!r}")


if __name__ == "__main__":
    main()
