"""Measure cosh, sinh, expm1, log1p, erf, erfc, atan, atan2 and the exact GELU against the
shim, over float32 inputs: the IR helpers (`mimir.codegen.helpers`) by a NumPy model of
the IR, and the compiled kernels on each backend's executor.

    python benchmarks/special_accuracy.py                  # IR model, every 4096th pattern
    python benchmarks/special_accuracy.py --stride 1024    # denser
    python benchmarks/special_accuracy.py --backends msl,wgsl,spirv,ptx --stride 65536

The inputs are every `stride`-th float32 bit pattern (both signs, subnormals to the
largest float, inf and nan) plus hard cases (0, -0, the branch points of each helper
and their neighbours). atan2 takes its y from the sweep and its x from the sweep rotated
by a third, plus every pair of special values. The reference is the shim's element
function (`mimir.ops.numerics`, Python's `math` in double) rounded once to float32.
For each function the table gives the worst error in float32 ulp of the reference where
the reference is a normal float (inf where a finite reference came back non-finite or a
special value came back wrong), and the worst ratio of |got - ref| to the float32
tolerance `1e-5 + 1e-4 |ref|` (`mimir.runtime.tolerances`; at most 1 passes). The IR
model computes `exp` and `log` with NumPy's float32 functions (within an ulp); a
backend's own exp and log (WGSL's `3 + 2|x|` ulp, PTX's fast `ex2.approx`) add theirs.
Backends run through `tests/harness` (WGSL and SPIR-V on wgpu, MSL as C++, PTX in the
Python interpreter: slow, give it a large stride).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from mimir.codegen.helpers import HELPERS
from mimir.codegen.ir import Binary, Call, Helper
from mimir.ops import numerics as nm
from mimir.runtime.tolerances import TOLERANCES

REPO = Path(__file__).resolve().parents[1]

# function -> (IR helper, shim element function, arity)
FUNCTIONS = {
    "cosh": ("mimir_cosh", nm.cosh, 1),
    "sinh": ("mimir_sinh", nm.sinh, 1),
    "expm1": ("mimir_expm1", nm.expm1, 1),
    "log1p": ("mimir_log1p", nm.log1p, 1),
    "erf": ("mimir_erf", nm.erf, 1),
    "erfc": ("mimir_erfc", nm.erfc, 1),
    "atan": ("mimir_atan", nm.atan, 1),
    "atan2": ("mimir_atan2", nm.atan2, 2),
    "gelu_erf": ("mimir_gelu_erf", nm.gelu_erf, 1),
}


def _trig_bench():
    name = "_mimir_trig_accuracy"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks/trig_accuracy.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


_INTRINSICS = {
    "exp": np.exp, "log": np.log, "abs": np.abs, "sqrt": np.sqrt, "floor": np.floor,
    "isnan": np.isnan, "isinf": np.isinf, "min": np.minimum, "max": np.maximum,
}  # fmt: skip


def run_helper(h: Helper, args: list[np.ndarray], fused: bool = True) -> np.ndarray:
    """`h` applied lane by lane, helpers it calls included (the trig benchmark's model of
    the IR, with the intrinsics above). The helpers hold no `fma` (the contraction pass
    fuses `a * b + c` later, in the kernels the backends run), so `fused` changes nothing
    here; the backends' rows show the fused code."""
    base = _trig_bench()._Run

    class Run(base):  # type: ignore[misc, valid-type]
        def expr(self, e):  # noqa: ANN001, ANN202
            if isinstance(e, Call) and e.fn in HELPERS:
                return run_helper(HELPERS[e.fn], [self.expr(a) for a in e.args], fused)
            if isinstance(e, Call) and e.fn in _INTRINSICS:
                return _INTRINSICS[e.fn](*(self.expr(a) for a in e.args))
            if isinstance(e, Binary) and e.op == "/" and e.type == "f32":
                return np.divide(self.expr(e.a), self.expr(e.b))
            return super().expr(e)

    run = Run(len(args[0]), fused)
    for p, a in zip(h.params, args, strict=True):
        run.env[p.name] = a.astype(np.float32)
    with np.errstate(all="ignore"):
        run.block(h.body, np.ones(run.n, dtype=bool))
    assert run.result is not None and run.done.all()
    return run.result


def sweep(stride: int) -> np.ndarray:
    bits = np.arange(0, 2**32, stride, dtype=np.uint64).astype(np.uint32)
    return bits.view(np.float32)


def hard_cases() -> np.ndarray:
    """Zeros, infinities, nan, and each helper's branch points with their neighbours."""
    xs = [0.0, 1e-30, 1e-7, 1e-3, 0.25, 0.5, 1.0, 2.0, 4.0, 9.0, 10.5, 0.4142135623730950]
    xs += [2.414213562373095, 3.0, 20.0, 88.7, 89.4, 89.5, 1e10, 3.4028234663852886e38]
    xs += [2.0**-126, 2.0**-149]
    x = np.array(xs + [-v for v in xs], dtype=np.float32)
    bits = x.view(np.uint32).astype(np.int64)
    near = np.concatenate([bits + d for d in range(-3, 4)]).astype(np.uint32).view(np.float32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, -0.999999], dtype=np.float32)
    return np.concatenate([near, special])


def inputs(stride: int) -> tuple[np.ndarray, np.ndarray]:
    """(x, y): one-argument functions read x; atan2 reads (y, x)."""
    x = np.concatenate([sweep(stride), hard_cases()])
    y = np.roll(x, len(x) // 3)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 1e-30], dtype=np.float32)
    sy, sx = (a.ravel() for a in np.meshgrid(special, special))
    return np.concatenate([x, sx]), np.concatenate([y, sy])


def reference(name: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    fn, arity = FUNCTIONS[name][1], FUNCTIONS[name][2]
    if arity == 2:
        values = [fn(float(b), float(a)) for a, b in zip(x, y, strict=True)]
    else:
        values = [fn(float(a)) for a in x]
    return np.array(nm.cast(values, _F32), dtype=np.float64)


_F32 = __import__("mimir.dtypes", fromlist=["float32"]).float32


def errors(got: np.ndarray, ref: np.ndarray) -> tuple[float, float, int]:
    """(worst ulp where the reference is normal, worst tolerance ratio, its index)."""
    rtol, atol = TOLERANCES["float32"]
    with np.errstate(all="ignore"):
        got = got.astype(np.float64)
        same_special = (np.isnan(got) & np.isnan(ref)) | (np.isinf(ref) & (got == ref))
        finite = np.isfinite(ref)
        diff = np.abs(got - ref)
        normal = finite & (np.abs(ref) >= 2.0**-126)
        ulp = np.exp2(np.floor(np.log2(np.where(normal, np.abs(ref), 1.0))) - 23)
        ulps = np.where(normal, diff / ulp, 0.0)
        ratio = np.where(finite, diff / (atol + rtol * np.abs(ref)), 0.0)
    wrong = ~same_special & (~finite | ~np.isfinite(got))
    ulps = np.where(wrong | np.isnan(ulps), np.inf, ulps)
    ratio = np.where(wrong | np.isnan(ratio), np.inf, ratio)
    k = int(np.argmax(ulps))
    return float(ulps[k]), float(np.max(ratio)), k


_SOURCE = """
from mimir.array import Dim, Tensor, atan2, float32, gpu

N = Dim("N")
{kernels}
"""


def _kernel(name: str) -> str:
    if name == "atan2":
        body, params = "atan2(y, x)", "y: Tensor[float32, N], x: Tensor[float32, N]"
    elif name == "gelu_erf":
        body, params = 'x.gelu(approximate="none")', "x: Tensor[float32, N]"
    else:
        body, params = f"x.{name}()", "x: Tensor[float32, N]"
    return f"\n\n@gpu\ndef f_{name}({params}) -> Tensor[float32, N]:\n    return {body}\n"


def on_backends(backends: list[str], x: np.ndarray, y: np.ndarray, math: str = "fast") -> dict:
    sys.path.insert(0, str(REPO / "tests"))
    from harness import run_backend

    from mimir.codegen import compile_source

    source = _SOURCE.format(kernels="".join(_kernel(n) for n in FUNCTIONS))
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "special_bench.py"
        src.write_text(source)
        for backend in backends:
            result = compile_source(str(src), source, [backend], math=math)
            assert result.ok, [(d.code, d.message) for d in result.diagnostics]
            folder = Path(tmp) / backend
            for path, content in result.files.items():
                target = folder / path
                target.parent.mkdir(parents=True, exist_ok=True)
                if isinstance(content, bytes):
                    target.write_bytes(content)
                else:
                    target.write_text(content)
            for name in FUNCTIONS:
                manifest = json.loads((folder / f"f_{name}.manifest.json").read_text())
                feed = {"y": y.tolist(), "x": x.tolist()} if name == "atan2" else {"x": x.tolist()}
                got = run_backend(backend, manifest, folder, feed, {"N": len(x)})["out"]
                out[(backend, name)] = np.array(got, dtype=np.float32)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stride", type=int, default=4096)
    parser.add_argument("--backends", default="", help="comma-separated: msl,wgsl,spirv,ptx")
    parser.add_argument("--math", default="fast", help="PTX's exp and log: fast or precise")
    args = parser.parse_args()
    x, y = inputs(args.stride)
    print(f"{len(x)} float32 inputs: every {args.stride}th bit pattern and hard cases")
    print(f"{'function':<9} {'how':<14} {'worst ulp':>10} {'tol ratio':>10}  at")
    refs = {name: reference(name, x, y) for name in FUNCTIONS}

    def show(name: str, how: str, got: np.ndarray) -> None:
        ulps, ratio, k = errors(got, refs[name])
        at = f"({float(y[k])!r}, {float(x[k])!r})" if name == "atan2" else repr(float(x[k]))
        print(f"{name:<9} {how:<14} {ulps:>10.3f} {ratio:>10.4f}  {at}")

    for name, (helper, _, arity) in FUNCTIONS.items():
        operands = [y, x] if arity == 2 else [x]
        show(name, "IR", run_helper(HELPERS[helper], operands))
    backends = [b for b in args.backends.split(",") if b]
    if backends:
        for (backend, name), got in sorted(on_backends(backends, x, y, args.math).items()):
            show(name, backend if backend != "ptx" else f"ptx {args.math}", got)


if __name__ == "__main__":
    main()
