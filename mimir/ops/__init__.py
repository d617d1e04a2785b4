"""The op table: every tensor-level op of the kernel language, defined once.

Each `OpSpec` names how the user spells the op (operator, method, function or
attribute), its family (`kind`), its dtype rule, its element function (for
element-wise ops) and, through `kind`, its shape rule and reference evaluator.
The shim (`mimir.array`) builds `Tensor`'s operators and methods from this
table, the checker (`mimir.constraints`) looks ops up here by spelling, and the
backends lower by `name`. Nothing outside this table decides what an op is.

Stdlib-only, so that importing the shim never imports z3 or networkx.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

from mimir.ops import dtype_rules as dr
from mimir.ops import numerics as nm
from mimir.ops.shapes import RuleError

__all__ = [
    "OpSpec",
    "RuleError",
    "TABLE",
    "BY_OPERATOR",
    "BY_UNARY_OPERATOR",
    "BY_METHOD",
    "BY_FUNCTION",
    "BY_ATTRIBUTE",
    "GELU_APPROXIMATE",
    "gelu_variant",
    "lookup",
]


@dataclass(frozen=True)
class OpSpec:
    """One op. `kind` selects the shape rule and the reference evaluator:

    - `elementwise`: broadcasting over tensor operands; `element` computes one value
    - `reduce`: `axis=None|int|tuple`, `keepdims=False`
    - `softmax`: along `axis=-1`
    - `scan`: inclusive prefix along `axis` (NumPy's `cumsum`/`cumprod`; `axis=None` flattens)
    - `einsum`: a literal spec, lowered to the ops below by the graph builder
    - `scalar_math`: `math.sqrt/exp/log/sin/cos` of one Python scalar or size
    - `matmul`, `reshape`, `transpose`, `index`, `create`, `cast`, `shape`
    - `gather`: `take_along_axis(x, idx, axis)`, reads `x` where `idx` says
    - `atomic`: an index-level statement, `atomic_add(out, index, value)`
    - `iota`: `arange(n)`, the ints 0..n-1 (int32, or the `dtype` given)
    - `mask`: `tril(x, k)` / `triu(x, k)`, zeros above / below the k-th diagonal of the
      last two axes
    - `join`: `concatenate((a, b, ...), axis)` / `stack((a, b, ...), axis)`
    - `argreduce`: `argmax` / `argmin` along one axis or all (int32, first index wins)
    - `moments`: `var` / `std` with `ddof`, two-pass (mean first) for stability
    - `sort`: `sort` / `argsort` along one axis (`descending=False`), stable: equal keys
      keep their order, a NaN sorts last ascending (NumPy) and first descending, and
      -0.0 equals 0.0; `argsort` gives int32 indices
    - `topk`: `topk(x, k, axis=-1, largest=True)`, the pair (values, int32 indices) of the
      k largest (smallest) along an axis, 1 <= k <= its size; lowered by the graph builder
      to a `sort` and an `argsort`, each cut to its first k
    """

    name: str
    kind: str
    spelling: str
    dtype_rule: dr.DtypeRule
    element: Callable[..., object] | None = None
    operator: str | None = None  # binary `a OP b`
    unary_operator: str | None = None  # `OP a`
    dunder: str | None = None
    rdunder: str | None = None
    method: str | None = None
    function: str | None = None
    attribute: str | None = None
    compute_in_common: bool = False  # comparisons: operands promoted, result bool

    @property
    def arity(self) -> int:
        if self.kind == "elementwise" and self.element is not None:
            # the signature, not `__code__`, so a wrapped element function counts right too
            return len(inspect.signature(self.element).parameters)
        return 1


def _binary(name: str, op: str, dunder: str, rule: dr.DtypeRule, element, **kw) -> OpSpec:
    return OpSpec(
        name=name,
        kind="elementwise",
        spelling=op,
        dtype_rule=rule,
        element=element,
        operator=op,
        dunder=f"__{dunder}__",
        rdunder=f"__r{dunder}__" if dunder not in ("lt", "le", "gt", "ge", "eq", "ne") else None,
        **kw,
    )


def _method(name: str, kind: str, rule: dr.DtypeRule, element=None) -> OpSpec:
    return OpSpec(
        name=name, kind=kind, spelling=f".{name}()", dtype_rule=rule, element=element, method=name
    )


def _function(name: str, kind: str, rule: dr.DtypeRule, element=None, **kw) -> OpSpec:
    return OpSpec(
        name=name,
        kind=kind,
        spelling=f"{name}()",
        dtype_rule=rule,
        element=element,
        function=name,
        **kw,
    )


def _never(spelling: str, operands) -> object:  # pragma: no cover - never a dtype source
    raise AssertionError(spelling)


TABLE: tuple[OpSpec, ...] = (
    # arithmetic
    _binary("add", "+", "add", dr.arithmetic, nm.add),
    _binary("sub", "-", "sub", dr.arithmetic, nm.sub),
    _binary("mul", "*", "mul", dr.arithmetic, nm.mul),
    _binary("truediv", "/", "truediv", dr.true_divide, nm.truediv),
    _binary("floordiv", "//", "floordiv", dr.arithmetic, nm.floordiv),
    _binary("mod", "%", "mod", dr.arithmetic, nm.mod),
    _binary("pow", "**", "pow", dr.arithmetic, nm.power),
    # bitwise / logical
    _binary("bitand", "&", "and", dr.bitwise, nm.bitand),
    _binary("bitor", "|", "or", dr.bitwise, nm.bitor),
    _binary("bitxor", "^", "xor", dr.bitwise, nm.bitxor),
    # shifts: the count must be proven in 0..31 (GPU037)
    _binary("lshift", "<<", "lshift", dr.shift, nm.lshift),
    _binary("rshift", ">>", "rshift", dr.shift, nm.rshift),
    # comparisons
    _binary("lt", "<", "lt", dr.comparison, nm.lt, compute_in_common=True),
    _binary("le", "<=", "le", dr.comparison, nm.le, compute_in_common=True),
    _binary("gt", ">", "gt", dr.comparison, nm.gt, compute_in_common=True),
    _binary("ge", ">=", "ge", dr.comparison, nm.ge, compute_in_common=True),
    _binary("eq", "==", "eq", dr.comparison, nm.eq, compute_in_common=True),
    _binary("ne", "!=", "ne", dr.comparison, nm.ne, compute_in_common=True),
    # unary operators
    OpSpec(
        "neg", "elementwise", "unary -", dr.signed, nm.neg, unary_operator="-", dunder="__neg__"
    ),
    OpSpec(
        "invert", "elementwise", "~", dr.bitwise, nm.invert, unary_operator="~", dunder="__invert__"
    ),
    # unary methods
    _method("relu", "elementwise", dr.signed, nm.relu),
    _method("abs", "elementwise", dr.signed, nm.absolute),
    _method("sigmoid", "elementwise", dr.floating, nm.sigmoid),
    _method("tanh", "elementwise", dr.floating, nm.tanh),
    _method("gelu", "elementwise", dr.floating, nm.gelu),
    # `.gelu(approximate="none")`: the exact GELU; no spelling of its own (see `gelu_variant`)
    OpSpec(
        "gelu_erf",
        "elementwise",
        '.gelu(approximate="none")',
        dr.floating,
        nm.gelu_erf,
    ),
    _method("exp", "elementwise", dr.floating, nm.exp),
    _method("sin", "elementwise", dr.floating, nm.sin),
    _method("cos", "elementwise", dr.floating, nm.cos),
    _method("log", "elementwise", dr.floating, nm.log),
    _method("sqrt", "elementwise", dr.floating, nm.sqrt),
    _method("rsqrt", "elementwise", dr.floating, nm.rsqrt),
    _method("cosh", "elementwise", dr.floating, nm.cosh),
    _method("sinh", "elementwise", dr.floating, nm.sinh),
    _method("atan", "elementwise", dr.floating, nm.atan),
    _method("erf", "elementwise", dr.floating, nm.erf),
    _method("erfc", "elementwise", dr.floating, nm.erfc),
    _method("log1p", "elementwise", dr.floating, nm.log1p),
    _method("expm1", "elementwise", dr.floating, nm.expm1),
    _method("clip", "elementwise", dr.signed, nm.clip),
    _method("astype", "cast", _never),
    # element-wise functions
    _function("where", "elementwise", dr.select, nm.where),
    _function("maximum", "elementwise", dr.same, nm.maximum),
    _function("minimum", "elementwise", dr.same, nm.minimum),
    _function("atan2", "elementwise", dr.floating, nm.atan2),
    # counter-based random numbers (Philox4x32-10, as Triton's `tl.rand` / `tl.randn`):
    # `rand(seed, offsets)` in [0, 1), `randn(seed, offsets)` standard normal, float32
    _function("rand", "elementwise", dr.random, nm.rand, compute_in_common=True),
    _function("randn", "elementwise", dr.random, nm.randn, compute_in_common=True),
    # gathers: `take_along_axis(x, idx, axis)` (and `x[idx]`, the `index` op on a tensor)
    _function("take_along_axis", "gather", dr.same),
    # index-level scatter: `atomic_add(out, index, value)` adds into one element atomically
    _function("atomic_add", "atomic", dr.atomic),
    # reductions
    _method("sum", "reduce", dr.summation),
    _method("mean", "reduce", dr.floating),
    _method("max", "reduce", dr.same),
    _method("min", "reduce", dr.same),
    _method("cumsum", "scan", dr.summation),
    _method("cumprod", "scan", dr.summation),
    _method("softmax", "softmax", dr.floating),
    _method("log_softmax", "softmax", dr.floating),
    _method("argmax", "argreduce", dr.ordered),
    _method("argmin", "argreduce", dr.ordered),
    _method("sort", "sort", dr.sortable),
    _method("argsort", "sort", dr.sort_indices),
    _function("topk", "topk", dr.sortable),
    _method("var", "moments", dr.floating),
    _method("std", "moments", dr.floating),
    # linear algebra and layout
    # `einsum('ij,jk->ik', a, b)`: the spec is parsed statically (`mimir.ops.einsum`) and
    # lowered by the graph builder to `sum`, `transpose`, `@`, `*` and indexing
    OpSpec("einsum", "einsum", "einsum()", dr.arithmetic, function="einsum"),
    OpSpec(
        "matmul",
        "matmul",
        "@",
        dr.arithmetic,
        operator="@",
        dunder="__matmul__",
        rdunder="__rmatmul__",
    ),
    _method("reshape", "reshape", dr.same),
    _method("transpose", "transpose", dr.same),
    OpSpec("T", "transpose", ".T", dr.same, attribute="T"),
    OpSpec("index", "index", "[]", dr.same, dunder="__getitem__"),
    OpSpec("shape", "shape", ".shape", _never, attribute="shape"),
    # Python's `math` functions on sizes and scalars (`1.0 / math.sqrt(D)`): a float scalar
    # (double in the shim, f32 on the GPU), never a tensor
    OpSpec("math_sqrt", "scalar_math", "math.sqrt()", dr.floating, nm.sqrt, function="math.sqrt"),
    OpSpec("math_exp", "scalar_math", "math.exp()", dr.floating, nm.exp, function="math.exp"),
    OpSpec("math_log", "scalar_math", "math.log()", dr.floating, nm.log, function="math.log"),
    OpSpec("math_sin", "scalar_math", "math.sin()", dr.floating, nm.sin, function="math.sin"),
    OpSpec("math_cos", "scalar_math", "math.cos()", dr.floating, nm.cos, function="math.cos"),
    # creation
    _function("zeros", "create", _never),
    _function("ones", "create", _never),
    _function("full", "create", _never),
    _function("arange", "iota", _never),
    # masks and joins
    _function("tril", "mask", dr.same),
    _function("triu", "mask", dr.same),
    _function("concatenate", "join", dr.same),
    _function("stack", "join", dr.same),
)

BY_NAME: dict[str, OpSpec] = {op.name: op for op in TABLE}
BY_OPERATOR: dict[str, OpSpec] = {op.operator: op for op in TABLE if op.operator}
BY_UNARY_OPERATOR: dict[str, OpSpec] = {op.unary_operator: op for op in TABLE if op.unary_operator}
BY_METHOD: dict[str, OpSpec] = {op.method: op for op in TABLE if op.method}
BY_FUNCTION: dict[str, OpSpec] = {op.function: op for op in TABLE if op.function}
BY_ATTRIBUTE: dict[str, OpSpec] = {op.attribute: op for op in TABLE if op.attribute}

# Which keyword arguments each method or function accepts (positional order).
PARAMETERS: dict[str, tuple[str, ...]] = {
    "sum": ("axis", "keepdims"),
    "mean": ("axis", "keepdims"),
    "max": ("axis", "keepdims"),
    "min": ("axis", "keepdims"),
    "cumsum": ("axis",),
    "cumprod": ("axis",),
    "softmax": ("axis",),
    "log_softmax": ("axis",),
    "argmax": ("axis", "keepdims"),
    "argmin": ("axis", "keepdims"),
    "sort": ("axis", "descending"),
    "argsort": ("axis", "descending"),
    "topk": ("x", "k", "axis", "largest"),
    "var": ("axis", "ddof", "keepdims"),
    "std": ("axis", "ddof", "keepdims"),
    "clip": ("lo", "hi"),
    "astype": ("dtype",),
    "math_sqrt": ("x",),
    "math_exp": ("x",),
    "math_log": ("x",),
    "math_sin": ("x",),
    "math_cos": ("x",),
    "zeros": ("shape", "dtype"),
    "ones": ("shape", "dtype"),
    "full": ("shape", "fill_value", "dtype"),
    "take_along_axis": ("arr", "indices", "axis"),
    "arange": ("n", "dtype"),
    "tril": ("x", "k"),
    "triu": ("x", "k"),
    "concatenate": ("tensors", "axis"),
    "stack": ("tensors", "axis"),
}


# `.gelu(approximate=...)`: the literal picks the op (torch's spelling; Mimir's default,
# "tanh", is the approximation `.gelu()` has always meant).
GELU_APPROXIMATE: dict[str, str] = {"tanh": "gelu", "none": "gelu_erf"}


def gelu_variant(approximate: object) -> OpSpec | None:
    """The op `.gelu(approximate=approximate)` means, or None for anything but the
    literal "none" or "tanh" (GPU036)."""
    name = GELU_APPROXIMATE.get(approximate) if isinstance(approximate, str) else None
    return BY_NAME[name] if name is not None else None


def lookup(name: str) -> OpSpec:
    return BY_NAME[name]
