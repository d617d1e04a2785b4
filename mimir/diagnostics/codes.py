"""The registry of diagnostic codes: one frozen entry per code.

Each entry has a short name, a summary, why the rule exists, how to fix it, a
bad example that fires exactly this code and a good example that checks clean.
`mimir explain CODE` prints an entry; `tests/test_registry.py` runs every
example. `found_by` says who reports the code: the static `checker`, the
`shim` at call time (argument checks happen where the call's values exist),
`checker+shim` for both (device placement and call arguments: the checker follows host code, the
shim checks every call), `compile` for a kernel that checks clean but that
`mimir compile-gpu` cannot emit (for one backend, or at all), `cli` for
input that cannot be read, or `compiler` for a bug in Mimir itself that one of its own
invariant checks caught before any file was written. `severity` is
the level a diagnostic of the code carries: `error` (exit 1) or `warning` (reported, exit 0 unless
`--warnings-as-errors`).

Precedence when several rules could fire on one node: construct (GPU031) before
names (GPU032) before unknown ops (GPU030) before dtype rules (GPU02x) before
shape rules (GPU01x); the first failing rule poisons the node and nothing
downstream of it is reported.
"""

from __future__ import annotations

from dataclasses import dataclass

PRELUDE = (
    "from mimir.array import Dim, InOut, Tensor, bool_, float16, float32, gpu, int32, uint32\n"
    "from mimir.array import full, maximum, minimum, ones, program_id, where, zeros\n"
    "from mimir.array import arange, concatenate, stack, tril, triu\n"
)


@dataclass(frozen=True)
class Code:
    code: str
    name: str
    summary: str
    why: str
    fix: str
    bad: str
    good: str
    found_by: str = "checker"
    severity: str = "error"  # "warning" codes alone leave the exit code at 0

    def bad_source(self) -> str:
        return PRELUDE + self.bad

    def good_source(self) -> str:
        return PRELUDE + self.good


_CODES = [
    Code(
        "GPU001",
        "syntax-error",
        "the file is not valid Python",
        "Mimir parses the file with Python's own parser and cannot read it",
        "correct the syntax at the reported position",
        "def f(:\n    pass\n",
        "def f():\n    pass\n",
        found_by="cli",
    ),
    Code(
        "GPU002",
        "unreadable-input",
        "the file cannot be read",
        "the path does not exist, is not a file, or its bytes are not text in the encoding "
        "Python reads it with (UTF-8, or what a PEP 263 coding line names)",
        "check the path and the file's encoding",
        "",
        "",
        found_by="cli",
    ),
    Code(
        "GPU003",
        "input-too-large",
        "skipped: the file is larger than the size limit",
        "a file is read whole and parsing costs memory in proportion to its size; a limit keeps "
        "one huge or endless input (a link to a device) from stopping the run",
        "raise `max-file-size` in the configuration or `--max-file-size`, or exclude the file",
        "",
        "",
        found_by="cli",
    ),
    Code(
        "GPU004",
        "expression-too-deep",
        "an expression nested deeper than Mimir's limit (3,000 levels)",
        "the checker and the code generators walk expressions recursively; CPython's own "
        "compiler stops near 3,000 levels, and Mimir checks every expression it accepts",
        "split the expression with intermediate variables",
        "",
        "",
    ),
    Code(
        "GPU005",
        "unwritable-output",
        "an output path that cannot be written",
        "Mimir validates every output path before it writes anything and writes each file "
        "through a temporary file and a rename, so a failed run leaves the output as it was "
        "and never writes through a symbolic link",
        "choose a writable folder, a shorter name, or remove what blocks the path",
        "",
        "",
        found_by="cli",
    ),
    Code(
        "GPU010",
        "broadcast-mismatch",
        "shapes cannot broadcast",
        "element-wise ops broadcast as NumPy does: aligned from the right, each pair of sizes "
        "must be equal or one of them 1",
        "make the mismatched axes equal, or give one of them size 1 (`x[:, None]`)",
        "@gpu\ndef f(a: Tensor[float32, 4, 3], b: Tensor[float32, 4]) -> Tensor[float32, 4, 3]:\n"
        "    return a + b\n",
        "@gpu\ndef f(a: Tensor[float32, 4, 3], b: Tensor[float32, 3]) -> Tensor[float32, 4, 3]:\n"
        "    return a + b\n",
    ),
    Code(
        "GPU011",
        "matmul-shape-mismatch",
        "matmul shape mismatch",
        "matrix multiplication requires inner dimensions to match (A[M,K] @ B[K,N])",
        "ensure the inner dimensions of both matrices are equal",
        "@gpu\ndef f(x: Tensor[float32, 32, 784], w: Tensor[float32, 128, 10])"
        " -> Tensor[float32, 32, 10]:\n    return x @ w\n",
        "@gpu\ndef f(x: Tensor[float32, 32, 784], w: Tensor[float32, 784, 10])"
        " -> Tensor[float32, 32, 10]:\n    return x @ w\n",
    ),
    Code(
        "GPU012",
        "matmul-rank",
        "matmul operand has rank below 2",
        "`@` in the kernel language multiplies matrices or batches of matrices; a vector "
        "operand would change the result's rank silently",
        "make the vector a matrix with `v[None, :]` or `v[:, None]`, or use `(a * v).sum(axis=-1)`",
        "@gpu\ndef f(a: Tensor[float32, 3, 4], v: Tensor[float32, 4]) -> Tensor[float32, 3]:\n"
        "    return a @ v\n",
        "@gpu\ndef f(a: Tensor[float32, 3, 4], v: Tensor[float32, 4]) -> Tensor[float32, 3, 1]:\n"
        "    return a @ v[:, None]\n",
    ),
    Code(
        "GPU013",
        "reshape-size",
        "reshape changes the number of elements",
        "a reshape reinterprets the same elements, so the element counts must be equal",
        "choose a target shape with the same product of sizes, or infer one size with -1",
        "@gpu\ndef f(x: Tensor[float32, 6, 4]) -> Tensor[float32, 5, 5]:\n"
        "    return x.reshape(5, 5)\n",
        "@gpu\ndef f(x: Tensor[float32, 6, 4]) -> Tensor[float32, 3, 8]:\n"
        "    return x.reshape(3, -1)\n",
    ),
    Code(
        "GPU014",
        "axis-out-of-range",
        "axis out of range",
        "an axis must name one of the tensor's dimensions: -rank <= axis < rank",
        "use an axis between -rank and rank - 1",
        "@gpu\ndef f(x: Tensor[float32, 8, 4]) -> Tensor[float32, 8]:\n    return x.sum(axis=2)\n",
        "@gpu\ndef f(x: Tensor[float32, 8, 4]) -> Tensor[float32, 8]:\n    return x.sum(axis=1)\n",
    ),
    Code(
        "GPU015",
        "return-shape-mismatch",
        "the returned shape differs from the annotation",
        "the return annotation is the kernel's contract with its caller and sizes its output "
        "buffer",
        "return a value of the annotated shape, or correct the annotation",
        "@gpu\ndef f(x: Tensor[float32, 8, 4]) -> Tensor[float32, 4, 8]:\n    return x + 1.0\n",
        "@gpu\ndef f(x: Tensor[float32, 8, 4]) -> Tensor[float32, 4, 8]:\n    return x.T + 1.0\n",
    ),
    Code(
        "GPU016",
        "return-dtype-mismatch",
        "the returned dtype differs from the annotation",
        "the kernel language never converts implicitly: a float written into an int buffer "
        "would be truncated",
        "convert explicitly with `.astype(dtype)`, or correct the annotation",
        "@gpu\ndef f(x: Tensor[int32, 8]) -> Tensor[int32, 8]:\n    return x / 2\n",
        "@gpu\ndef f(x: Tensor[int32, 8]) -> Tensor[int32, 8]:\n    return x // 2\n",
    ),
    Code(
        "GPU017",
        "bad-permutation",
        "transpose axes are not a permutation",
        "`transpose(axes)` must name every axis exactly once",
        "pass each axis from 0 to rank - 1 once, or no axes to reverse them",
        "@gpu\ndef f(x: Tensor[float32, 2, 3, 4]) -> Tensor[float32, 3, 3, 4]:\n"
        "    return x.transpose(1, 1, 2)\n",
        "@gpu\ndef f(x: Tensor[float32, 2, 3, 4]) -> Tensor[float32, 3, 2, 4]:\n"
        "    return x.transpose(1, 0, 2)\n",
    ),
    Code(
        "GPU018",
        "index-out-of-bounds",
        "an index or slice bound is out of range",
        "on a GPU an out-of-range read returns garbage or faults; unlike NumPy, slices do not "
        "clamp, because a bound past the end is nearly always an off-by-one",
        "keep every index below its axis size and every slice bound within 0..size",
        "@gpu\ndef f(x: Tensor[float32, 8, 8]) -> Tensor[float32, 8, 9]:\n    return x[:, 0:9]\n",
        "@gpu\ndef f(x: Tensor[float32, 8, 8]) -> Tensor[float32, 8, 7]:\n    return x[:, 1:8]\n",
    ),
    Code(
        "GPU019",
        "too-many-indices",
        "more indices than dimensions",
        "each index or slice consumes one axis of the tensor",
        "index at most rank axes",
        "@gpu\ndef f(x: Tensor[float32, 8]) -> Tensor[float32]:\n    return x[0, 0]\n",
        "@gpu\ndef f(x: Tensor[float32, 8]) -> Tensor[float32]:\n    return x[0]\n",
    ),
    Code(
        "GPU020",
        "dtype-not-supported",
        "the op is not defined for this dtype",
        "NumPy's promotion would not make this legal: arithmetic on bool tensors, bitwise ops "
        "on floats, or a non-bool condition",
        "convert with `.astype(...)` first (e.g. `mask.astype(int32)`)",
        "@gpu\ndef f(a: Tensor[bool_, 8], b: Tensor[bool_, 8]) -> Tensor[bool_, 8]:\n"
        "    return a + b\n",
        "@gpu\ndef f(a: Tensor[bool_, 8], b: Tensor[bool_, 8]) -> Tensor[bool_, 8]:\n"
        "    return a | b\n",
    ),
    Code(
        "GPU021",
        "no-common-dtype",
        "the operands have no common dtype",
        "int32 and uint32 have no common 32-bit type (NumPy would widen to int64, which GPUs "
        "handle poorly)",
        "convert one operand explicitly with `.astype(...)`",
        "@gpu\ndef f(a: Tensor[int32, 8], b: Tensor[uint32, 8]) -> Tensor[int32, 8]:\n"
        "    return a + b\n",
        "@gpu\ndef f(a: Tensor[int32, 8], b: Tensor[uint32, 8]) -> Tensor[int32, 8]:\n"
        "    return a + b.astype(int32)\n",
    ),
    Code(
        "GPU023",
        "join-shape-mismatch",
        "concatenate or stack got tensors whose sizes differ",
        "`concatenate` joins tensors of one rank along an axis, so every other axis must have "
        "equal sizes; `stack` needs equal shapes; neither broadcasts, as in NumPy",
        "make the other axes equal (slice, or broadcast explicitly with `+ zeros(...)`), or "
        "join along the axis whose sizes differ",
        "@gpu\ndef f(a: Tensor[float32, 4, 3], b: Tensor[float32, 5, 2])"
        " -> Tensor[float32, 4, 5]:\n"
        "    return concatenate((a, b), axis=1)\n",
        "@gpu\ndef f(a: Tensor[float32, 4, 3], b: Tensor[float32, 4, 2])"
        " -> Tensor[float32, 4, 5]:\n"
        "    return concatenate((a, b), axis=1)\n",
    ),
    Code(
        "GPU024",
        "empty-reduction",
        "max, min, mean, argmax, argmin, var, std or a softmax over an axis that may be empty",
        "the maximum of no elements is undefined, their mean is 0 / 0, a softmax of them "
        "divides by a zero sum and a variance with `ddof` divides by count - ddof; NumPy "
        "raises or warns, a GPU returns garbage",
        "give the dim `min=1` (more than `ddof` for `var`/`std`), or reduce with `sum`, which "
        "is 0 on an empty axis",
        'E = Dim("E", min=0)\n\n@gpu\ndef f(x: Tensor[float32, 4, E]) -> Tensor[float32, 4]:\n'
        "    return x.max(axis=1)\n",
        'E = Dim("E", min=1)\n\n@gpu\ndef f(x: Tensor[float32, 4, E]) -> Tensor[float32, 4]:\n'
        "    return x.max(axis=1)\n",
    ),
    Code(
        "GPU025",
        "negative-size",
        "a negative size in a shape",
        "a tensor size counts elements and cannot be negative",
        "use a size of 0 or more",
        "@gpu\ndef f(x: Tensor[float32, 4]) -> Tensor[float32, 4]:\n"
        "    return x + zeros((4, -1))\n",
        "@gpu\ndef f(x: Tensor[float32, 4]) -> Tensor[float32, 4]:\n    return x + zeros((4,))\n",
    ),
    Code(
        "GPU027",
        "store-dtype-mismatch",
        "an element store converts the value's dtype",
        "the kernel language never converts implicitly: a float written into an int tensor "
        "would be truncated",
        "convert explicitly with `.astype(dtype)`, or change the output's dtype",
        'N = Dim("N")\n\n@gpu(grid=(N,))\n'
        "def f(x: Tensor[float32, N], out: Tensor[int32, N]):\n"
        "    i = program_id(0)\n    out[i] = x[i]\n",
        'N = Dim("N")\n\n@gpu(grid=(N,))\n'
        "def f(x: Tensor[float32, N], out: Tensor[int32, N]):\n"
        "    i = program_id(0)\n    out[i] = x[i].astype(int32)\n",
    ),
    Code(
        "GPU028",
        "write-race",
        "two program ids may write the same element",
        "program ids run in parallel in no fixed order: two writes to one element, or a write "
        "to an element another program id reads, give a result that changes from run to run",
        "make each program id write only elements indexed by its own `program_id`, or split "
        "the work into two kernels",
        'N = Dim("N")\n\n@gpu(grid=(N,))\n'
        "def f(x: Tensor[float32, N], out: Tensor[float32, N]):\n"
        "    i = program_id(0)\n    out[i // 2] = x[i]\n",
        'N = Dim("N")\n\n@gpu(grid=(N,))\n'
        "def f(x: Tensor[float32, N], out: Tensor[float32, N]):\n"
        "    i = program_id(0)\n    out[i] = x[i]\n",
    ),
    Code(
        "GPU029",
        "write-to-input",
        "a kernel writes a tensor parameter that is not annotated `InOut[...]`",
        "a plain `Tensor[...]` parameter is read-only to a tensor-level kernel, and an "
        "index-level kernel's plain parameter is an input or an output, never both: "
        "`p -= g` on one would update the caller's tensor in NumPy but only a local copy here, "
        "and reading an output before writing it reads memory nobody set (a program may read "
        "back an element it wrote itself: zero, then accumulate)",
        "annotate the parameter `InOut[Tensor[...]]` to update the caller's tensor (a tensor-level "
        "kernel assigns its name, `p -= lr * g`), or bind the new value to another name",
        'N = Dim("N")\n\n@gpu\n'
        "def f(p: Tensor[float32, N], g: Tensor[float32, N]) -> Tensor[float32, N]:\n"
        "    p -= g\n    return p\n",
        'N = Dim("N")\n\n@gpu\n'
        "def f(p: InOut[Tensor[float32, N]], g: Tensor[float32, N]):\n"
        "    p -= g\n",
    ),
    Code(
        "GPU026",
        "runtime-slice-bound",
        "a slice or index bound that is a run-time value (an `int` parameter)",
        "a tensor-level kernel's shapes are proven before it runs, so every slice bound must be "
        "a size: `x[:, 0:k]` with `k: int` would have a shape nobody can check",
        "make the size a `Dim` bound by a parameter's shape (`k_cols: Tensor[float32, K]` and "
        "`x[:, 0:K]`), or keep the whole axis and mask it: `where(mask, x, 0.0)` with a "
        "mask tensor",
        'N = Dim("N")\nD = Dim("D")\n\n@gpu\n'
        "def f(x: Tensor[float32, N, D], k: int) -> Tensor[float32, N]:\n"
        "    return x[:, 0:k].sum(axis=1)\n",
        'N = Dim("N")\nK = Dim("K")\n\n@gpu\n'
        "def f(x: Tensor[float32, N, K + 4], w: Tensor[float32, K]) -> Tensor[float32, N]:\n"
        "    return x[:, 0:K].sum(axis=1)\n",
    ),
    Code(
        "GPU022",
        "einsum-spec",
        "an `einsum` spec the kernel language cannot take, or that does not fit its operands",
        "the spec is parsed statically and lowered to `sum`, transposes and `@`: each operand "
        "needs one letter per axis, and a letter names one size in every operand (a size 1 "
        "does not broadcast); an ellipsis, a diagonal (`'ii->i'`) or three operands have no "
        "lowering",
        "write one letter per axis and give each letter one size (`einsum('ij,jk->ik', a, b)` "
        "needs `a.shape[1] == b.shape[0]`); spell out batch axes as letters instead of `...`, "
        "and chain two-operand einsums",
        "from mimir.array import einsum\n\n"
        "@gpu\ndef f(a: Tensor[float32, 4, 3], b: Tensor[float32, 4, 5])"
        " -> Tensor[float32, 4, 5]:\n"
        "    return einsum('ij,jk->ik', a, b)\n",
        "from mimir.array import einsum\n\n"
        "@gpu\ndef f(a: Tensor[float32, 4, 3], b: Tensor[float32, 3, 5])"
        " -> Tensor[float32, 4, 5]:\n"
        "    return einsum('ij,jk->ik', a, b)\n",
    ),
    Code(
        "GPU030",
        "unknown-operation",
        "an operator, method, function or attribute the kernel language does not define",
        "Mimir compiles only ops it can prove and lower; an op it skipped would leave the kernel "
        "computing something else",
        'use an op the kernel language defines (docs/kernels.md, "The kernel language"), or '
        "write the computation with those ops",
        "@gpu\ndef f(x: Tensor[float32, 8]) -> Tensor[float32, 8]:\n    return x.tan()\n",
        "@gpu\ndef f(x: Tensor[float32, 8]) -> Tensor[float32, 8]:\n    return x.sin() / x.cos()\n",
    ),
    Code(
        "GPU031",
        "unsupported-construct",
        "a Python construct a kernel cannot hold",
        "a kernel body is straight-line tensor code: strings, exceptions, loops without bounds, "
        "recursion, globals, collections and I/O have no GPU meaning",
        "move the construct to host code outside the `@gpu` function",
        '@gpu\ndef f(x: Tensor[float32, 8]) -> Tensor[float32, 8]:\n    print("x")\n    return x\n',
        "@gpu\ndef f(x: Tensor[float32, 8]) -> Tensor[float32, 8]:\n    return x\n",
    ),
    Code(
        "GPU032",
        "undefined-name",
        "a name that is not defined",
        "every name in a kernel must be a parameter, a local, a module-level `Dim` or a name "
        "imported from `mimir.array`",
        "define or import the name",
        "@gpu\ndef f(x: Tensor[float32, 8]) -> Tensor[float32, 8]:\n    return x + y\n",
        "@gpu\ndef f(x: Tensor[float32, 8], y: Tensor[float32, 8]) -> Tensor[float32, 8]:\n"
        "    return x + y\n",
    ),
    Code(
        "GPU033",
        "bad-annotation",
        "a kernel parameter or result has no usable annotation",
        "the annotations are the facts the proof starts from; `Tensor[dtype, d0, ...]` with int "
        "or `Dim` sizes, `InOut[Tensor[...]]` for a parameter the kernel updates, or "
        "`int`/`float` for a scalar; a result is `Tensor[...]` or `tuple[Tensor[...], ...]`",
        "annotate each parameter as `Tensor[float32, N, 4]` (or `InOut[Tensor[...]]`, `float`, "
        "`int`) and the result as `-> Tensor[float32, N]` or `-> tuple[Tensor[...], Tensor[...]]`",
        "@gpu\ndef f(x) -> Tensor[float32, 8]:\n    return x\n",
        "@gpu\ndef f(x: Tensor[float32, 8]) -> Tensor[float32, 8]:\n    return x\n",
    ),
    Code(
        "GPU034",
        "bad-dim",
        "a `Dim` declaration that cannot be read or satisfied",
        "a dim's constraints must be sizes the checker can read (ints, int constants, other "
        "dims) that some size satisfies",
        'write `Dim("N", min=1, max=4096, multiple_of=4)` (min and max may be int constants, '
        'other dims or size arithmetic: `Dim("T", max=MAXT)`), min <= max',
        'N = Dim("N", min=8, max=4)\n\n@gpu\ndef f(x: Tensor[float32, N]) -> Tensor[float32, N]:\n'
        "    return x\n",
        'N = Dim("N", min=4, max=8)\n\n@gpu\ndef f(x: Tensor[float32, N]) -> Tensor[float32, N]:\n'
        "    return x\n",
    ),
    Code(
        "GPU035",
        "unbound-dim",
        "a dim that no parameter fixes",
        "every size in a kernel must be known when it is launched, so each dim must appear on "
        "its own in some parameter's shape",
        "add a parameter whose shape names the dim, or write the size in terms of bound dims",
        'N = Dim("N")\nM = Dim("M")\n\n@gpu\ndef f(x: Tensor[float32, N]) -> Tensor[float32, M]:\n'
        "    return zeros((M,))\n",
        'N = Dim("N")\n\n@gpu\ndef f(x: Tensor[float32, N]) -> Tensor[float32, N]:\n'
        "    return zeros((N,))\n",
    ),
    Code(
        "GPU036",
        "invalid-argument",
        "an argument an op cannot take",
        "op arguments that decide shapes (axes, sizes, dtypes) must be known statically",
        "pass an int literal, a `Dim`, a dtype name or a tuple of these",
        "@gpu\ndef f(x: Tensor[float32, 8, 4]) -> Tensor[float32, 8]:\n    return x.sum(axis=x)\n",
        "@gpu\ndef f(x: Tensor[float32, 8, 4]) -> Tensor[float32, 8]:\n    return x.sum(axis=1)\n",
    ),
    Code(
        "GPU037",
        "shift-count-out-of-range",
        "a shift count may be negative or at least the 32-bit width",
        "a shift by 32 or more (or by a negative count) means something different on each "
        "target: Python shifts by any amount, PTX clamps the count, WGSL takes it modulo 32, "
        "SPIR-V and Metal leave the result undefined; so the checker proves every count of "
        "`<<` and `>>` is in 0..31 and names a count that is not",
        "shift by a literal or a size proven below 32, declare the count tensor "
        "`Range(0, 32)`, or clamp it with `minimum(maximum(k, 0), 31)`",
        "@gpu\ndef f(x: Tensor[int32, 8], k: Tensor[int32, 8]) -> Tensor[int32, 8]:\n"
        "    return x << k\n",
        "from mimir.array import Range\n\n"
        "@gpu\ndef f(x: Tensor[int32, 8], k: Tensor[int32, 8, Range(0, 32)]) "
        "-> Tensor[int32, 8]:\n    return x << k\n",
    ),
    Code(
        "GPU040",
        "argument-shape-mismatch",
        "an argument's shape differs from the parameter's annotation",
        "a parameter's annotation is a contract; a size that disagrees would be read out of bounds",
        "pass a tensor of the annotated shape",
        'N = Dim("N")\n\n@gpu\ndef f(a: Tensor[float32, N], b: Tensor[float32, N]) -> '
        "Tensor[float32, N]:\n    return a + b\n\n"
        'f(zeros((3,)).to("gpu"), zeros((4,)).to("gpu"))\n',
        'N = Dim("N")\n\n@gpu\ndef f(a: Tensor[float32, N], b: Tensor[float32, N]) -> '
        "Tensor[float32, N]:\n    return a + b\n\n"
        'f(zeros((3,)).to("gpu"), zeros((3,)).to("gpu"))\n',
    ),
    Code(
        "GPU041",
        "argument-dtype-mismatch",
        "an argument's dtype differs from the parameter's annotation",
        "a kernel reads its buffers as the annotated dtype; other bytes would be reinterpreted",
        "convert the argument with `.astype(...)` before the call",
        "@gpu\ndef f(a: Tensor[float32, 3]) -> Tensor[float32, 3]:\n    return a\n\n"
        'f(zeros((3,), dtype=int32).to("gpu"))\n',
        "@gpu\ndef f(a: Tensor[float32, 3]) -> Tensor[float32, 3]:\n    return a\n\n"
        'f(zeros((3,)).to("gpu"))\n',
        found_by="checker+shim",
    ),
    Code(
        "GPU042",
        "dim-constraint-violated",
        "a call binds a dim to a size its constraints exclude",
        "the proofs hold only for the sizes the `Dim` admits",
        "pass sizes within the dim's min, max and multiple_of",
        'N = Dim("N", multiple_of=4)\n\n@gpu\ndef f(a: Tensor[float32, N]) -> Tensor[float32, N]:\n'
        '    return a\n\nf(zeros((6,)).to("gpu"))\n',
        'N = Dim("N", multiple_of=4)\n\n@gpu\ndef f(a: Tensor[float32, N]) -> Tensor[float32, N]:\n'
        '    return a\n\nf(zeros((8,)).to("gpu"))\n',
        found_by="checker+shim",
    ),
    Code(
        "GPU043",
        "argument-out-of-range",
        "an argument holds a value outside the `Range` its annotation declares",
        "the checker assumes every value of a `Tensor[int32, N, Range(lo, hi)]` parameter lies in "
        "lo..hi-1 to prove the gathers through it in bounds; a value outside would read past "
        "the end of a buffer on the GPU",
        "clamp or filter the values before the call (`minimum(maximum(idx, 0), C - 1)`), or widen "
        "the `Range` and guard the gather in the kernel (`if 0 <= y < C:`)",
        "from mimir.array import Range, tensor\n\n"
        'N = Dim("N")\nC = Dim("C")\n\n@gpu\n'
        "def f(x: Tensor[float32, C], i: Tensor[int32, N, Range(0, C)]) -> Tensor[float32, C]:\n"
        "    return x\n\n"
        'f(zeros((3,)).to("gpu"), tensor([0, 3], dtype=int32).to("gpu"))\n',
        "from mimir.array import Range, tensor\n\n"
        'N = Dim("N")\nC = Dim("C")\n\n@gpu\n'
        "def f(x: Tensor[float32, C], i: Tensor[int32, N, Range(0, C)]) -> Tensor[float32, C]:\n"
        "    return x\n\n"
        'f(zeros((3,)).to("gpu"), tensor([0, 2], dtype=int32).to("gpu"))\n',
        found_by="shim",
    ),
    Code(
        "GPU050",
        "unproven",
        "the solver could not decide an obligation within its budget",
        "Z3 returned unknown or spent its resource limit (or, on a very slow machine, its "
        "wall-clock timeout); Mimir never treats that as proven",
        "simplify the size arithmetic (avoid products of two dims inside `//` and `%`), or raise "
        "the budget with `--z3-timeout`",
        "",
        "",
    ),
    Code(
        "GPU060",
        "cpu-argument",
        "a cpu tensor passed to a `@gpu` function",
        "a kernel can only read memory on the GPU",
        'move the tensor first: `x.to("gpu")`',
        "@gpu\ndef f(a: Tensor[float32, 3]) -> Tensor[float32, 3]:\n    return a\n\n"
        "f(zeros((3,)))\n",
        "@gpu\ndef f(a: Tensor[float32, 3]) -> Tensor[float32, 3]:\n    return a\n\n"
        'f(zeros((3,)).to("gpu"))\n',
        found_by="checker+shim",
    ),
    Code(
        "GPU061",
        "mixed-devices",
        "one op mixes cpu and gpu tensors",
        "an op runs on one device and cannot read the other's memory",
        'move both operands to one device with `.to("gpu")` or `.to("cpu")`',
        'a = zeros((3,))\nb = zeros((3,)).to("gpu")\nc = a + b\n',
        'a = zeros((3,)).to("gpu")\nb = zeros((3,)).to("gpu")\nc = a + b\n',
        found_by="checker+shim",
    ),
    Code(
        "GPU070",
        "backend-cannot-emit",
        "a construct one backend cannot emit",
        "each target has its limits (WebGPU guarantees 8 storage buffers and 256 threads per "
        "workgroup; a target may lack a dtype or a math function), and a kernel that ignored them "
        "would fail to load or compute something else",
        "compile for another backend, or split the computation so that each launch stays within "
        "the target's limits",
        "@gpu\ndef f(\n    a: Tensor[float32, 4], b: Tensor[float32, 4], c: Tensor[float32, 4],\n"
        "    d: Tensor[float32, 4], e: Tensor[float32, 4], g: Tensor[float32, 4],\n"
        "    h: Tensor[float32, 4], i: Tensor[float32, 4], j: Tensor[float32, 4],\n"
        ") -> Tensor[float32, 4]:\n    return a + b + c + d + e + g + h + i + j\n",
        "@gpu\ndef f(\n    a: Tensor[float32, 4], b: Tensor[float32, 4], c: Tensor[float32, 4],\n"
        ") -> Tensor[float32, 4]:\n    return a + b + c\n",
        found_by="compile",
    ),
    Code(
        "GPU071",
        "cannot-schedule",
        "a kernel that checks clean but cannot be compiled into launches",
        "code generation needs every result to be a tensor whose sizes are dim expressions, "
        "every size to fit 32-bit indices, and a sorted axis to fit workgroup memory (a bound "
        "of at most 2048); Mimir refuses rather than guess what a kernel should write",
        "return tensors (not Python scalars) or assign an `InOut[...]` parameter, spell "
        'every size with the kernel\'s dims, and bound a sorted axis (`Dim("L", max=1024)`)',
        "@gpu\ndef f(x: Tensor[float32, 8], s: float):\n    return s * 2.0\n",
        "@gpu\ndef f(x: Tensor[float32, 8], s: float) -> Tensor[float32, 8]:\n    return x * s\n",
        found_by="compile",
    ),
    Code(
        "GPU072",
        "stale-artifact",
        "a vendored kernel file is not what its source compiles to now",
        "a repository that commits the emitted kernels ships them without Mimir; a file that "
        "differs from its source's output runs code nobody checked",
        "regenerate the folder with the `mimir compile-gpu ... -o DIR` command the message "
        "names, and commit the result",
        "",
        "",
        found_by="cli",
    ),
    Code(
        "GPU073",
        "launch-order",
        "the launches compiled for a function would read a buffer before it is written",
        "launches talk to each other only through buffers and run one after another, so a "
        "launch that reads a result no earlier launch wrote computes with garbage; Mimir checks "
        "every manifest for this before it writes any file, and this code means the compiler "
        "itself went wrong",
        "report it with the kernel's source; until it is fixed, computing the values in "
        "separate `@gpu` functions avoids the launch order in question",
        "",
        "",
        found_by="compiler",
    ),
    Code(
        "GPU100",
        "layer-input-mismatch",
        "a layer gets an input whose feature or channel size differs from the one it was built for",
        "a `Linear(512, 10)` holds a 10x512 weight, a `Conv2d(3, ...)` a kernel over 3 channels, "
        "a `LayerNorm(d)` and a `BatchNorm(c)` one scale per feature: any other size fails when "
        "the layer runs",
        "build the layer for the size its input has (the first argument of `Linear`/`Conv2d`), "
        "or reshape the input",
        "import torch\n\nfc = torch.nn.Linear(512, 10)\nout = fc(torch.randn(64, 256))\n",
        "import torch\n\nfc = torch.nn.Linear(256, 10)\nout = fc(torch.randn(64, 256))\n",
    ),
    Code(
        "GPU101",
        "layer-input-rank",
        "a layer gets an input of a rank it does not accept",
        "`Conv2d` and `MaxPool2d` read [N, C, H, W] or [C, H, W], `BatchNorm1d` [N, C] or "
        "[N, C, L]: an input of another rank fails when the layer runs",
        "add or remove the batch or channel axis (`unsqueeze`, `flatten`) before the layer",
        "import torch\n\nconv = torch.nn.Conv2d(1, 8, 3)\nout = conv(torch.randn(64, 784))\n",
        "import torch\n\nconv = torch.nn.Conv2d(1, 8, 3)\n"
        "out = conv(torch.randn(64, 784).view(64, 1, 28, 28))\n",
    ),
    Code(
        "GPU102",
        "empty-spatial-output",
        "a convolution or pooling window is larger than its (padded) input",
        "the output size is `(size + 2*padding - dilation*(kernel - 1) - 1) // stride + 1`, which "
        "must be at least 1; a smaller input fails when the layer runs",
        "pad the input, use a smaller kernel or fewer pooling steps, or feed larger images",
        "import torch\nimport torch.nn.functional as F\n\n"
        "x = F.max_pool2d(torch.randn(8, 3, 4, 4), 2)\ny = F.max_pool2d(x, 4)\n",
        "import torch\nimport torch.nn.functional as F\n\n"
        "x = F.max_pool2d(torch.randn(8, 3, 4, 4), 2)\ny = F.max_pool2d(x, 2)\n",
    ),
    Code(
        "GPU103",
        "concat-mismatch",
        "tensors joined by `cat` or `stack` differ outside the joined dim",
        "`cat` lays tensors end to end along one dim, so every other dim must agree; `stack` "
        "needs equal shapes",
        "make the other dims equal, or join along the dim in which the tensors differ",
        "import torch\n\nz = torch.cat([torch.randn(4, 3), torch.randn(4, 5)], dim=0)\n",
        "import torch\n\nz = torch.cat([torch.randn(4, 3), torch.randn(4, 5)], dim=1)\n",
    ),
    Code(
        "GPU104",
        "loss-target-mismatch",
        "a loss gets a target whose shape does not fit its input",
        "`cross_entropy` of [N, C] logits wants class indices of shape [N] (or probabilities of "
        "shape [N, C]); `binary_cross_entropy` wants a target of the input's shape",
        "squeeze the target (`y.squeeze(1)`) or reshape it to the shape the loss expects",
        "import torch\nimport torch.nn.functional as F\n\n"
        "loss = F.cross_entropy(torch.randn(8, 10), torch.randint(0, 10, (8, 1)))\n",
        "import torch\nimport torch.nn.functional as F\n\n"
        "loss = F.cross_entropy(torch.randn(8, 10), torch.randint(0, 10, (8,)))\n",
    ),
    Code(
        "GPU105",
        "wrong-dtype-for-op",
        "a library op gets a tensor of a dtype it does not accept",
        "these are not converted for you: `cross_entropy` and `nll_loss` read class "
        "indices as integers (long), `embedding` looks rows up by integer index, and `Linear` and "
        "`Conv` layers multiply floating-point weights by floating-point inputs",
        "convert the tensor where it is made or passed: `.long()` for indices and targets, "
        "`.float()` for layer inputs",
        "import torch\n\nemb = torch.nn.Embedding(100, 16)\nout = emb(torch.rand(8, 5))\n",
        "import torch\n\nemb = torch.nn.Embedding(100, 16)\n"
        "out = emb(torch.randint(0, 100, (8, 5)))\n",
    ),
    Code(
        "GPU106",
        "loss-broadcast",
        "a regression loss broadcasts a target of another shape than its input",
        "`mse_loss` and `l1_loss` do not require equal shapes: a [N] target against an [N, 1] "
        "input broadcasts to [N, N] and averages every pair, so training runs and learns the "
        "wrong thing (PyTorch only warns)",
        "give the target the input's shape (`y.unsqueeze(1)` or `pred.squeeze(1)`)",
        "import torch\nimport torch.nn.functional as F\n\n"
        "loss = F.mse_loss(torch.randn(8, 1), torch.randn(8))\n",
        "import torch\nimport torch.nn.functional as F\n\n"
        "loss = F.mse_loss(torch.randn(8, 1), torch.randn(8, 1))\n",
        severity="warning",
    ),
    Code(
        "GPU107",
        "unpack-count",
        "unpacking a tensor's pieces or sizes gives another number of values than names",
        "`q, k, v = x.split(d, dim=-1)` needs exactly three pieces, `B, T, C = x.shape` a "
        "tensor of rank 3: Python raises ValueError when the counts differ",
        "split into as many pieces as there are names (check the split size and the dim), "
        "or unpack a tensor of the rank the names expect",
        "import torch\n\nx = torch.randn(2, 8, 64)\nq, k, v = x.split(32, dim=2)\n",
        "import torch\n\nx = torch.randn(2, 8, 96)\nq, k, v = x.split(32, dim=2)\n",
    ),
    Code(
        "GPU108",
        "assert-never-holds",
        "an `assert` on sizes fails for every size the code admits",
        "the condition contradicts what the code before it requires (or the configuration "
        "being checked states), so the assertion raises AssertionError whenever it runs",
        "correct the sizes the assertion compares, or the code that makes them",
        "import torch\n\nx = torch.randn(4, 6)\nassert x.shape[1] == 4\n",
        "import torch\n\nx = torch.randn(4, 6)\nassert x.shape[1] == 6\n",
    ),
    Code(
        "GPU109",
        "einops-mismatch",
        "an einops pattern does not fit the shape of the tensor it is applied to",
        "`rearrange(x, 'b n (h d) -> b h n d', h=8)` names one axis of `x` per group on "
        "the left, so `x` must have that many axes, and each group's sizes must multiply "
        "to the axis it stands for: einops raises EinopsError otherwise",
        "write the pattern for the tensor's rank, or give sizes that divide the axis",
        "import torch\nfrom einops import rearrange\n\n"
        "x = torch.randn(2, 16, 64)\ny = rearrange(x, 'b n h d -> b h n d', h=8)\n",
        "import torch\nfrom einops import rearrange\n\n"
        "x = torch.randn(2, 16, 64)\ny = rearrange(x, 'b n (h d) -> b h n d', h=8)\n",
    ),
    Code(
        "GPU090",
        "unused-suppression",
        "a `# mimir: ignore[...]` comment that suppresses nothing",
        "a suppression that no longer matches a diagnostic on its line hides the next real bug "
        "written there; an unknown code in the brackets never matched anything",
        "delete the comment, or correct the code in the brackets to the one reported on the line",
        "@gpu\ndef f(x: Tensor[float32, 8]) -> Tensor[float32, 8]:\n"
        "    return x + 1.0  # mimir: ignore[GPU011]\n",
        "@gpu\ndef f(x: Tensor[float32, 32, 784], w: Tensor[float32, 128, 10])"
        " -> Tensor[float32, 32, 10]:\n    return x @ w  # mimir: ignore[GPU011]\n",
        severity="warning",
    ),
    Code(
        "GPU080",
        "import-cycle",
        "an import that closes a cycle of project modules",
        "Mimir reads a project's modules in import order; in a cycle one module runs before the "
        "names it imports are bound, so nothing it takes from the cycle has a meaning Mimir can "
        "trust",
        "move what both modules need (the `Dim`s, the constants) into a third module that both "
        "import",
        "",
        "",
    ),
    Code(
        "GPU081",
        "missing-module",
        "an import of a project module that does not exist",
        "a relative import, or an import inside one of the project's packages, names no file in "
        "the project, so the names it should bring are unknown",
        "correct the module's name or create it; add its root to `paths` in `[tool.mimir]` when it "
        "lives elsewhere",
        "from .nothere import N\n",
        "import math\n",
    ),
    Code(
        "GPU082",
        "unresolved-import",
        "an imported name that its module does not define",
        "the name is bound nowhere at the top of the imported module, so Python's import fails and "
        "Mimir cannot know what it means",
        "import a name the module defines, or define it there",
        "",
        "",
    ),
]

REGISTRY: dict[str, Code] = {c.code: c for c in _CODES}


def get(code: str) -> Code | None:
    return REGISTRY.get(code.upper())
