"""Property-based fuzzing of the Python host's manifest reader (`mimir.runtime.contract`).

Two properties, each over inputs Hypothesis draws:

- `check_reader(data)`: any bytes (a committed manifest with its JSON edited or its bytes
  mutated, or anything at all) go through the whole reader: parsing, the field checks, then
  sizes, launches, ranges and the uniform at several dims. Every outcome is either a value or
  a `ManifestError` with a code of the contract; any other exception, or an accepted size
  over its bound, is a finding.
- `check_expression(text, value)`: a dim expression built from a random tree (operators,
  nesting, literals up to past the 64-bit range) evaluates to the tree's value computed
  independently here, or is refused with MAN005 exactly when the tree leaves int64, divides
  by zero or nests deeper than the limit.

`tests/test_manifest_fuzz.py` runs both for a fixed number of derandomized examples;
`benchmarks/fuzz_manifests.py --reader python` runs them for as long as it is told.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from mimir.runtime import contract, manifest
from mimir.runtime.dimexpr import INT64_MAX, INT64_MIN, MAX_DEPTH, MAX_LENGTH, evaluate
from mimir.runtime.errors import CODES, ManifestError

ROOT = Path(__file__).resolve().parent
ARGUMENT_CODES = {"GPU035", "GPU040", "GPU041", "GPU042", "GPU043"}
SIZES = (0, 1, 37, 65536, 2**32 - 1)


def seed_manifests() -> list[bytes]:
    """Committed manifests of every backend, and the corpus's found fixtures."""
    paths = sorted((ROOT / "kernels" / "out").glob("*/*/*.manifest.json"))
    return [p.read_bytes() for p in paths[::7]] + [
        p.read_bytes() for p in sorted((ROOT / "data" / "hostile").glob("*.json"))
    ]


_SEEDS = seed_manifests()

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(["N", "cdiv(N, 0)", "../x.spv", "-" * 40 + "1", "9" * 30, "\x00", "x" * 200])
    | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def edited_manifests(draw: st.DrawFn) -> bytes:
    """A committed manifest with a few of its values replaced by arbitrary JSON."""
    value = json.loads(draw(st.sampled_from(_SEEDS[: max(1, len(_SEEDS) - 8)])))
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(value)[1:]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        target = value
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = draw(json_values)
    return json.dumps(value).encode()


@st.composite
def mutated_bytes(draw: st.DrawFn) -> bytes:
    """A committed manifest's bytes with a few bytes inserted, deleted or replaced."""
    data = bytearray(draw(st.sampled_from(_SEEDS)))
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(data)))
        kind = draw(st.sampled_from(["insert", "delete", "replace"]))
        chunk = draw(st.binary(min_size=1, max_size=4) | st.sampled_from(
            [b"[", b"{", b"\\u0000", b"\xff", b'"', b"-", b"9999999999999999999", b"//0"]
        ))  # fmt: skip
        if kind == "insert":
            data[at:at] = chunk
        elif kind == "delete":
            del data[at : at + len(chunk)]
        else:
            data[at : at + len(chunk)] = chunk
    return bytes(data)


manifest_inputs = edited_manifests() | mutated_bytes() | st.binary(max_size=64)


def check_reader(data: bytes) -> None:
    """The whole reader on `data`: a value or a coded refusal, never anything else."""
    try:
        value = contract.parse_manifest(data)
        contract.check_manifest(value)
    except ManifestError as err:
        assert err.code in CODES, err
        return
    for size in SIZES:
        dims = {d["name"]: size for d in value["dims"]}
        try:
            manifest.check_dim_values(value, dims)
        except ManifestError as err:
            assert err.code in ARGUMENT_CODES, err
            continue
        for index in range(len(value["buffers"])):
            try:
                shape, count, nbytes = contract.buffer_extent(value, index, dims, 2**27)
            except ManifestError as err:
                assert err.code in ("MAN005", "MAN006"), err
                continue
            assert all(0 <= n < 2**32 for n in shape) and 0 <= count < 2**32
            assert nbytes <= 2**27
            if value["buffers"][index].get("range") is not None:
                try:
                    contract.range_bounds(value, index, dims)
                except ManifestError as err:
                    assert err.code == "MAN005", err
        for index in range(len(value["kernels"])):
            try:
                counts = contract.launch_counts(value, index, dims, (65535, 65535, 65535))
            except ManifestError as err:
                assert err.code in ("MAN005", "MAN007"), err
                continue
            assert all(0 <= n <= 65535 for n in counts)
        scalars = {f["name"]: 1 for f in (value.get("uniform") or {}).get("fields", [])}
        try:
            block = manifest.pack_uniform(value, dims, scalars)
        except ManifestError as err:
            assert err.code is None or err.code in ARGUMENT_CODES, err
            continue
        assert block is None or (len(block) % 16 == 0 and len(block) <= 4096)


# ------------------------------------------------------------------ dim expressions

_OVER = object()  # the tree leaves int64, divides by zero, or is refused for its shape


def _fits(v: Any) -> Any:
    return v if v is _OVER or INT64_MIN <= v <= INT64_MAX else _OVER


@st.composite
def expression_trees(draw: st.DrawFn, depth: int = 0) -> tuple[str, Any, int]:
    """(text, exact value or _OVER, nesting depth in the grammar's sense)."""
    env = {"N": 37, "M": 65535, "K": 0}
    # 9 in 20 a leaf, 4 in 20 one operand, 7 in 20 two: fewer than one child a node on
    # average keeps trees small, while chains of signs and parentheses still pass the depth limit
    pick = draw(st.integers(0, 19))
    if depth > 40 or pick < 9:
        kind = draw(st.sampled_from(["int", "big", "name"]))
        if kind == "name":
            name = draw(st.sampled_from(sorted(env)))
            return name, env[name], 0
        n = draw(st.integers(0, 100) if kind == "int" else st.integers(2**62, 2**66))
        return str(n), (n if n <= INT64_MAX else _OVER), 0
    if pick < 13:
        op = draw(st.sampled_from(["neg", "paren"]))
    else:
        op = draw(st.sampled_from(["+", "-", "*", "//", "%", "cdiv"]))
    a_text, a, a_depth = draw(expression_trees(depth + 1))
    if op == "neg":  # a sign, then parentheses: two levels
        return f"-({a_text})", _fits(-a) if a is not _OVER else _OVER, a_depth + 2
    if op == "paren":
        return f"({a_text})", a, a_depth + 1
    b_text, b, b_depth = draw(expression_trees(depth + 1))
    if op == "cdiv":
        value = _OVER if _OVER in (a, b) or b <= 0 else _fits(-(-a // b))
        return f"cdiv({a_text}, {b_text})", value, max(a_depth, b_depth) + 1
    # binary operators bind as written: parenthesize the operands to keep the tree's shape
    text = f"({a_text}) {op} ({b_text})"
    if _OVER in (a, b):
        return text, _OVER, max(a_depth, b_depth) + 1
    if op in ("//", "%") and b == 0:
        return text, _OVER, max(a_depth, b_depth) + 1
    exact = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
             "//": lambda: a // b, "%": lambda: a % b}[op]()  # fmt: skip
    return text, _fits(exact), max(a_depth, b_depth) + 1


@st.composite
def nested_chains(draw: st.DrawFn) -> tuple[str, Any, int]:
    """A small tree inside 10 to 40 levels of parentheses and signs: around the depth limit."""
    text, value, depth = draw(expression_trees(30))
    for _ in range(draw(st.integers(10, 40))):
        if draw(st.booleans()):
            text, depth = f"({text})", depth + 1
        else:
            text, value, depth = (
                f"-({text})",
                _fits(-value) if value is not _OVER else _OVER,
                depth + 2,
            )
    return text, value, depth


expressions = expression_trees() | nested_chains()


def check_expression(tree: tuple[str, Any, int]) -> None:
    """`evaluate` gives the tree's exact value, or MAN005 where the contract says to refuse."""
    text, value, depth = tree
    env = {"N": 37, "M": 65535, "K": 0}
    refuse = value is _OVER or depth > MAX_DEPTH or len(text) > MAX_LENGTH
    try:
        got = evaluate(text, env)
    except ManifestError as err:
        assert err.code == "MAN005", err
        assert refuse, (text, value, err)
        return
    assert not refuse, (text, value, got)
    assert got == value, (text, value, got)
