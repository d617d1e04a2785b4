"""cosh, sinh, expm1, log1p, erf, erfc, atan, atan2 and the exact GELU, element-wise.

Inputs are random in [-1, 1); the kernels scale them so the arguments reach every
branch of the IR helpers (`mimir.codegen.helpers`, the same on every backend): the
Taylor polynomials near 0, `exp` in the middle, `exp(x / 2)^2` past 9 (sinh, cosh up
to 80), erfc's fit out to 10 and its cut-off past 10.5, atan's three ranges and
atan2 in all four quadrants. The shim computes each in double (`math`) and rounds
once; each backend must match within the float32 tolerance (docs/language.md and
RECEIPTS.md have the ulp figures over all of float32).
"""

from mimir.array import Dim, Tensor, atan2, float16, float32, gpu, program_id

N = Dim("N")


@gpu
def hyperbolic(x: Tensor[float32, N]) -> Tensor[float32, N]:
    return (x * 0.8).sinh() + (x * 5.0).cosh() * 0.01 + (x * 80.0).sinh() * 1e-34


@gpu
def near_zero(x: Tensor[float32, N]) -> Tensor[float32, N]:
    # expm1 and log1p where exp(x) - 1 and log(1 + x) lose their leading bits
    small = x * 1e-3
    return small.expm1() * 1000.0 + small.log1p() * 1000.0 + (x * 3.0).expm1() + (x * 0.9).log1p()


@gpu
def error_function(x: Tensor[float32, N]):
    return (x * 3.0).erf(), (x * 11.0).erfc(), (x * 0.4).erf() + (x * 0.4).erfc()


@gpu
def arctangent(y: Tensor[float32, N], x: Tensor[float32, N]) -> Tensor[float32, N]:
    return (y * 10.0).atan() + atan2(y, x) + atan2(y * 1e-3, x)


@gpu
def gelu_exact(x: Tensor[float32, N]):
    a = x * 8.0
    return a.gelu(approximate="none"), a.gelu(approximate="tanh") - a.gelu()


@gpu
def half_precision(x: Tensor[float16, N]) -> Tensor[float16, N]:
    # computed in f32 registers, rounded to half once per op, as the shim rounds
    return (x * 2.0).erf() + (x * 3.0).sinh() + atan2(x, x + 2.0)


@gpu(grid=(N,))
def index_special(x: Tensor[float32, N], y: Tensor[float32, N], out: Tensor[float32, N]):
    i = program_id(0)
    v = x[i] * 4.0
    out[i] = v.erf() + v.gelu(approximate="none") + atan2(y[i], x[i]) + v.abs().log1p() + v.cosh()
