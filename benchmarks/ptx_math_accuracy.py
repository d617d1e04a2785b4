"""Measure the PTX math sequences' error over every float32 input (or a stride of them).

    python benchmarks/ptx_math_accuracy.py            # every 1024th float32 bit pattern
    python benchmarks/ptx_math_accuracy.py --stride 1 # all 2**32 of them (minutes; numpy)

The sequences of `mimir.codegen.backends.ptx.mathlib` are run vectorised with numpy:
float32 values in float64 arrays, each instruction rounded to float32 as the
GPU does (`fma` as a float64 product, exact for float32 operands, plus the
addend, then one rounding: a double rounding that can differ from the GPU in
rare ties, far below the ulp resolution measured here). The reference is
float64 `numpy` (error < 1e-15 relative). Prints the worst error in float32
ulp per function and where it happens; docs/ptx.md quotes the result. pow is
sampled over (a, b) pairs with |b ln a| <= 88, where the table states
`error - 2|b ln a|` (its bound is `2 + 2|b ln a|` ulp).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from mimir.codegen.backends.ptx import mathlib

_F32_MAX_EXP = 128


def _r(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(np.float32).astype(np.float64)


def _bits_of(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32).view(np.uint32).astype(np.int64)


def _float_of(bits: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):  # signalling NaN patterns, when sweeping every bit pattern
        return (bits & 0xFFFFFFFF).astype(np.uint32).view(np.float32).astype(np.float64)


def _signed(v: np.ndarray) -> np.ndarray:
    v = v & 0xFFFFFFFF
    return np.where(v >= 2**31, v - 2**32, v)


def _flush(x: np.ndarray) -> np.ndarray:
    """`.ftz`: subnormals to a zero of the same sign."""
    return np.where((x != 0) & (np.abs(x) < 2.0**-126), np.copysign(0.0, x), x)


def _mul_hi(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The upper 32 bits of a 64-bit product of two u32, in 16-bit pieces (int64 is too small)."""
    b_hi, b_lo = b >> 16, b & 0xFFFF
    low = a * b_lo  # < 2^48
    high = a * b_hi  # < 2^48
    return ((high + (low >> 16)) >> 16) & 0xFFFFFFFF


def _value(op: object, regs: dict, n: int) -> np.ndarray:
    if isinstance(op, mathlib.F32):
        return np.full(n, np.float32(op.value), dtype=np.float64)
    if isinstance(op, mathlib.Int):
        return np.full(n, op.value & 0xFFFFFFFF, dtype=np.int64)
    return regs[op]


def run(ops: list[mathlib.Op], env: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    regs = dict(env)
    n = len(next(iter(env.values())))
    with np.errstate(all="ignore"):
        for op in ops:
            a = [_value(s, regs, n) for s in op.srcs]
            code = op.opcode
            if code == "mov.b32":
                out = _float_of(a[0]) if op.kind == "f32" else _bits_of(a[0])
            elif code in ("add.rn.f32", "sub.rn.f32", "mul.rn.f32", "div.rn.f32"):
                f = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}
                out = _r(f[code[:3]](a[0], a[1]))
            elif code == "fma.rn.f32":
                out = _r(a[0] * a[1] + a[2])
            elif code in ("min.f32", "max.f32"):
                out = (np.fmin if code == "min.f32" else np.fmax)(a[0], a[1])
            elif code == "abs.f32":
                out = np.abs(a[0])
            elif code == "copysign.f32":
                out = np.copysign(a[1], a[0])
            elif code == "cvt.rni.f32.f32":
                out = np.rint(a[0])
            elif code == "cvt.rzi.s32.f32":
                out = np.trunc(np.nan_to_num(a[0])).astype(np.int64) & 0xFFFFFFFF
            elif code == "cvt.rn.f32.s32":
                out = _r(_signed(a[0]).astype(np.float64))
            elif code in ("add.s32", "sub.s32"):
                out = (a[0] + a[1] if code == "add.s32" else a[0] - a[1]) & 0xFFFFFFFF
            elif code == "shl.b32":
                out = (a[0] << a[1]) & 0xFFFFFFFF
            elif code == "shr.s32":
                out = (_signed(a[0]) >> a[1]) & 0xFFFFFFFF
            elif code == "testp.notanumber.f32":
                out = np.isnan(a[0])
            elif code == "setp.lt.f32":
                out = a[0] < a[1]
            elif code == "setp.eq.f32":
                out = a[0] == a[1]
            elif code == "setp.ge.u32":
                out = a[0] >= a[1]
            elif code == "setp.lt.u32":
                out = a[0] < a[1]
            elif code == "setp.eq.u32":
                out = a[0] == a[1]
            elif code in ("selp.f32", "selp.b32"):
                out = np.where(a[2], a[0], a[1])
            elif code == "and.b32":
                out = a[0] & a[1]
            elif code == "or.b32":
                out = a[0] | a[1]
            elif code == "shr.u32":
                out = np.where(a[1] < 32, a[0] >> np.minimum(a[1], 31), 0)
            elif code == "mul.lo.u32":
                out = (a[0] * a[1]) & 0xFFFFFFFF  # < 2^56 here: exact in int64
            elif code == "mul.hi.u32":
                out = _mul_hi(a[0], a[1])
            elif code == "cvt.rn.f32.u32":
                out = _r(a[0].astype(np.float64))
            elif code == "neg.f32":
                out = -a[0]
            elif code == "ex2.approx.ftz.f32":  # modelled correctly rounded, with the flush
                out = _flush(_r(np.exp2(_flush(a[0]))))
            elif code == "rcp.approx.ftz.f32":
                out = _flush(_r(1.0 / _flush(a[0])))
            else:
                raise ValueError(f"no numpy model of {code}")
            regs[op.dst] = out
    return regs


def evaluate(name: str, *args: np.ndarray, math_mode: str = "precise") -> np.ndarray:
    seq = mathlib.Seq()
    inputs = [f"%in{k}" for k in range(len(args))]
    result = mathlib.sequences(math_mode)[name](seq, *inputs)
    return run(seq.ops, dict(zip(inputs, args, strict=True)))[result]


def ulp_errors(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    a = np.abs(exact)
    e = np.floor(np.log2(np.where(a > 0, a, 1.0)))
    ulp = np.exp2(np.clip(e, -126, 127) - 23)
    with np.errstate(all="ignore"):
        err = np.abs(got - exact) / ulp
    rounded = _r(exact)
    both_nan = np.isnan(got) & np.isnan(exact)
    same_inf = np.isinf(got) & (got == rounded)
    return np.where(both_nan | same_inf | (got == exact), 0.0, err)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _gelu(x: np.ndarray) -> np.ndarray:
    """x sigmoid(2u): 0.5 x (1 + tanh u) without its cancellation for negative u."""
    u = 0.7978845608028654 * (x + 0.044715 * x**3)
    return x / (1.0 + np.exp(-2.0 * u))


_REF = {"exp": np.exp, "log": np.log, "tanh": np.tanh, "sin": np.sin, "cos": np.cos}
_REF |= {"sigmoid": _sigmoid, "gelu": _gelu}
_DOMAIN = {
    "exp": (-104.0, 89.0),
    "log": (0.0, np.inf),
    "tanh": (-np.inf, np.inf),
    "sin": (-np.inf, np.inf),
    "cos": (-np.inf, np.inf),
    "sigmoid": (-np.inf, np.inf),
    "gelu": (-np.inf, np.inf),
}


def sweep(
    name: str, stride: int, chunk: int = 1 << 22, math_mode: str = "precise"
) -> tuple[float, float]:
    worst, where = 0.0, float("nan")
    lo, hi = _DOMAIN[name]
    for start in range(0, 1 << 32, chunk * stride):
        bits = np.arange(start, min(start + chunk * stride, 1 << 32), stride, dtype=np.int64)
        x = _float_of(bits)
        x = x[np.isfinite(x) & (x > lo) & (x < hi)]
        if not len(x):
            continue
        with np.errstate(all="ignore"):
            got, exact = evaluate(name, x, math_mode=math_mode), _REF[name](x)
            err = ulp_errors(got, exact)
        if math_mode == "fast":  # `.ftz`: a result (gelu: its sigmoid factor) below 2^-126
            tiny = np.abs(exact) < 2.0**-126 * np.maximum(1.0, np.abs(x) if name == "gelu" else 1)
            err = np.where((got == 0) & tiny, 0.0, err)  # flushed to 0 is no error
        if name == "gelu":  # the rounding of u, magnified by e^-2u: reported beyond 2.5|2u|
            u = 0.7978845608028654 * (x + 0.044715 * x**3)
            err = np.where(x < 0, err - 5.0 * np.abs(u), err)
        k = int(np.argmax(err))
        if err[k] > worst:
            worst, where = float(err[k]), float(x[k])
    return worst, where


def sweep_near_multiples(name: str, top: float, neighbours: int = 8) -> tuple[float, float]:
    """The float32 values nearest to every multiple of pi/2 below `top`, and `neighbours`
    on each side: where the reduced argument is smallest and the reduction is hardest.
    (numpy's float64 sin and cos reduce exactly, so they remain the reference.)"""
    j = np.arange(1, int(top / (np.pi / 2)) + 1, dtype=np.float64)
    centre = _bits_of(j * (np.pi / 2))
    worst, where = 0.0, float("nan")
    for d in range(-neighbours, neighbours + 1):
        x = _float_of(centre + d)
        x = np.concatenate([x, -x])
        x = x[np.abs(x) < top]
        with np.errstate(all="ignore"):
            err = ulp_errors(evaluate(name, x), _REF[name](x))
        k = int(np.argmax(err))
        if err[k] > worst:
            worst, where = float(err[k]), float(x[k])
    return worst, where


def sweep_pow(samples: int, seed: int = 0) -> tuple[float, float, tuple[float, float]]:
    rng = np.random.default_rng(seed)
    a = _r(np.exp(rng.uniform(-20, 20, samples)))
    limit = np.minimum(60.0, 88.0 / np.maximum(np.abs(np.log(a)), 1e-9))
    b = _r(rng.uniform(-1, 1, samples) * limit)
    with np.errstate(all="ignore"):
        err = ulp_errors(evaluate("pow", a, b), np.power(a, b))
    excess = err - 2 * np.abs(b * np.log(a))
    k = int(np.argmax(excess))
    return float(err.max()), float(excess[k]), (float(a[k]), float(b[k]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stride", type=int, default=1024, help="test every Nth bit pattern")
    parser.add_argument("--pow-samples", type=int, default=1_000_000)
    parser.add_argument("--math", default="both", choices=("fast", "precise", "both"))
    args = parser.parse_args()
    modes = ("precise", "fast") if args.math == "both" else (args.math,)
    what = "all float32" if args.stride == 1 else f"every {args.stride}th float32"
    print("| mode | function | inputs | worst error (ulp) | at x | stated bound |")
    print("|---|---|---|---|---|---|")
    for mode in modes:
        names = ("exp", "log", "tanh", "sin", "cos")
        names += ("sigmoid", "gelu") if mode == "fast" else ()
        for name in names:
            t = time.time()
            worst, where = sweep(name, args.stride, math_mode=mode)
            note = " (beyond 2.5\\|2u\\| for x < 0)" if name == "gelu" else ""
            print(
                f"| {mode} | {name} | {what} | {worst:.3f}{note} | {where!r} | "
                f"{mathlib.accuracy(name, mode)} |  <!-- {time.time() - t:.0f}s -->",
                flush=True,
            )
        if mode == "precise":
            for name in ("sin", "cos"):
                worst, where = sweep_near_multiples(name, mathlib.TRIG_HUGE)
                print(
                    f"| precise | {name} | float32 within 8 ulp of k pi/2 below 2^17 | "
                    f"{worst:.3f} | {where!r} | {mathlib.ACCURACY[name]} |",
                    flush=True,
                )
            top, excess, at = sweep_pow(args.pow_samples)
            print(
                f"| precise | pow | {args.pow_samples} random (a, b), |b ln a| <= 88 | {top:.1f} "
                f"(error - 2|b ln a| <= {excess:.3f}) | {at} | {mathlib.ACCURACY['pow']} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
