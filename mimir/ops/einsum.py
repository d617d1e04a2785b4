"""`einsum` with a literal spec: parsing, the letter rule, and the reference evaluator.

The spec is read statically (`'ij,jk->ik'`, or NumPy's implicit form `'ij,jk'`,
whose output is the letters that appear once, sorted). The kernel language takes
one or two operands, letters `a-z` and `A-Z`, no ellipsis and no letter twice in
one operand (a diagonal); each refusal is a `RuleError` with code GPU022 whose
message names the construct and the closest spelling that is supported.

The same letter must have the same size in every operand (unlike NumPy, a size 1
does not broadcast). The checker lowers a spec to ops that already exist
(`mimir.parse.graph`): a sum over letters that appear in one operand only,
transposes, and a batched `@` when a letter is contracted and each operand keeps one
of its own (`'bhqd,bhkd->bhqk'`; several contracted or kept letters are merged into one
axis by a reshape, `'ikd,kdj->ji'`), else a broadcast product and a sum.
`letter_roles` is that classification.

Stdlib-only: the shim evaluates with `evaluate`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import product as cartesian

from mimir.ops import numerics as nm
from mimir.ops.shapes import Algebra, RuleError, Shape

CODE = "GPU022"


@dataclass(frozen=True)
class Spec:
    text: str
    inputs: tuple[str, ...]
    output: str


def parse(text: str) -> Spec:
    """The spec's operand terms and output term, or a `RuleError` (GPU022)."""
    compact = text.replace(" ", "")
    if "..." in compact:
        raise RuleError(
            CODE,
            f"`einsum('{text}')` uses an ellipsis; write every axis as a letter "
            "(`'bij,bjk->bik'` for one batch axis)",
        )
    if compact.count("->") > 1:
        raise RuleError(CODE, f"`einsum('{text}')` has more than one `->`")
    lhs, arrow, rhs = compact.partition("->")
    terms = tuple(lhs.split(","))
    for term in (*terms, rhs):
        for ch in term:
            if not ("a" <= ch <= "z" or "A" <= ch <= "Z"):
                raise RuleError(
                    CODE,
                    f"`einsum('{text}')` has `{ch}`; a spec holds letters, `,` and one `->`",
                )
    if not 1 <= len(terms) <= 2:
        raise RuleError(
            CODE,
            f"`einsum('{text}')` has {len(terms)} operands; the kernel language takes one or "
            "two: chain two einsums (`einsum('ij,jk->ik', einsum('ij,jk->ik', a, b), c)`)",
        )
    for k, term in enumerate(terms):
        for ch in term:
            if term.count(ch) > 1:
                raise RuleError(
                    CODE,
                    f"`einsum('{text}')` repeats `{ch}` in operand {k} (a diagonal), which the "
                    "kernel language does not take; give each axis of an operand its own letter",
                )
    if not arrow:
        counts = "".join(terms)
        rhs = "".join(sorted(ch for ch in set(counts) if counts.count(ch) == 1))
    for ch in rhs:
        if rhs.count(ch) > 1:
            raise RuleError(CODE, f"`einsum('{text}')` repeats `{ch}` in its output")
        if not any(ch in t for t in terms):
            raise RuleError(CODE, f"`einsum('{text}')`: the output letter `{ch}` is in no operand")
    return Spec(text, terms, rhs)


def shape(alg: Algebra, spec: Spec, shapes: Sequence[Shape]) -> Shape:
    """The output shape; each operand's rank matches its term, each letter one size."""
    if len(shapes) != len(spec.inputs):
        alg.fail(
            CODE,
            f"`einsum('{spec.text}')` names {len(spec.inputs)} operands, the call passes "
            f"{len(shapes)}",
        )
    sizes: dict[str, tuple[int, object]] = {}
    for k, (term, s) in enumerate(zip(spec.inputs, shapes, strict=True)):
        if len(term) != len(s):
            alg.fail(
                CODE,
                f"`einsum('{spec.text}')`: operand {k} has rank {len(s)}, its term `{term}` "
                f"names {len(term)} axes",
            )
        for ch, size in zip(term, s, strict=True):
            if ch not in sizes:
                sizes[ch] = (k, size)
                continue
            first_k, first = sizes[ch]
            alg.require(
                alg.eq(first, size),
                CODE,
                f"`einsum('{spec.text}')`: letter `{ch}` is {{}} in operand {first_k} and {{}} "
                f"in operand {k}",
                first,
                size,
            )
    return tuple(sizes[ch][1] for ch in spec.output)


@dataclass(frozen=True)
class Roles:
    """How the letters of a two-operand spec are lowered."""

    batch: str  # in both operands and the output (output order)
    contracted: str  # in both operands, not the output (first operand's order)
    left: str  # only in the first operand, kept (its order)
    right: str  # only in the second operand, kept (its order)
    summed: tuple[str, str]  # per operand: letters only there and not in the output

    @property
    def matmul(self) -> bool:
        """Whether a batched `@` computes it: a contracted letter, and a kept letter of
        each operand (several of any of these are merged into one axis each by a
        reshape). Without a right letter (a dot `'i,i->'`, a matrix-vector product
        `'ij,j->i'`) the contracted letters are the last axes of the broadcast product,
        so a `sum` over rows computes it, reading each element once, where `@` would
        fill one column of each tile; without a left letter (`'j,jk->k'`) they are its
        leading axes, a column sum, where `@` would fill one row of each tile."""
        return bool(self.contracted) and bool(self.left) and bool(self.right)


def letter_roles(spec: Spec) -> Roles:
    a, b = spec.inputs
    out = spec.output
    summed = (
        "".join(ch for ch in a if ch not in b and ch not in out),
        "".join(ch for ch in b if ch not in a and ch not in out),
    )
    return Roles(
        batch="".join(ch for ch in out if ch in a and ch in b),
        contracted="".join(ch for ch in a if ch in b and ch not in out),
        left="".join(ch for ch in a if ch not in b and ch in out),
        right="".join(ch for ch in b if ch not in a and ch in out),
        summed=summed,
    )


def evaluate(spec: Spec, operands: Sequence[tuple[list, Shape]], out_shape: Shape, dtype) -> list:
    """The reference: each output element the sum over every binding of the letters not
    in the output of the operands' product, in double (floats) or exact ints, rounded
    or wrapped once into `dtype`."""
    sizes: dict[str, int] = {}
    for term, (_, s) in zip(spec.inputs, operands, strict=True):
        sizes.update(zip(term, s, strict=True))
    inner = [ch for ch in sizes if ch not in spec.output]
    strides = []
    for term, (_, s) in zip(spec.inputs, operands, strict=True):
        st, acc = {}, 1
        for ch, n in reversed(list(zip(term, s, strict=True))):
            st[ch] = acc
            acc *= n
        strides.append(st)
    vals = [[nm.as_operand(v, dtype) for v in values] for values, _ in operands]
    out = []
    for combo in cartesian(*(range(n) for n in out_shape)):
        where = dict(zip(spec.output, combo, strict=True))
        terms = []
        for rest in cartesian(*(range(sizes[ch]) for ch in inner)):
            where.update(zip(inner, rest, strict=True))
            prod = 1
            for st, v in zip(strides, vals, strict=True):
                prod = prod * v[sum(where[ch] * k for ch, k in st.items())]
            terms.append(prod)
        out.append(nm.fsum(terms) if dtype.is_float else sum(terms))
    return nm.cast(out, dtype)
