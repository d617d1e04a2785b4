"""What kind of op a graph node is, to the scheduler: a root that needs a launch of its own,
or an op computed inside whichever launch reads it.

Questions about the graph alone (no plan): `root_kind`, `op_kind`, the products by a small
or a narrow matrix, the nodes a launch walks through (`fused_reads`) and who reads a node.
"""

from __future__ import annotations

import networkx as nx

from mimir.codegen.tensors import Evaluator
from mimir.parse.graph import KernelGraph
from mimir.parse.module import TensorAnnotation

ROOT_KINDS = ("matmul", "reduce", "softmax", "argreduce", "moments", "scan", "sort")


FUSIBLE = ("elementwise", "cast")


# A `@` whose right operand is a matrix parameter with literal sizes of at most this many
# rows and columns, and this many elements, is computed where it is read, each element a
# dot product of its row (`small_matmul`); a tiled launch would stage 128 x 128 tiles for
# it. The elements bound keeps the matrix in registers without spills when a thread reuses
# it for a row, or for layer after layer (`h = (h @ w).tanh()`, 8 x 8: 95 registers).
SMALL_MATMUL = 16


SMALL_MATMUL_ELEMENTS = 64


# A `@` by a matrix parameter of at most this many (literal) columns, when it is no product
# by a small matrix (`small_matmul`), is a `narrow` launch (`narrow_matmul`,
# `kernels.narrow`): a 128 x 128 tile would spend all but this many of its 128 columns'
# multiply-adds on nothing. Sixteen takes a 10-class head (MNIST's); each column is a
# register in every thread and a load of w at each k, which a wider product would rather
# share through a tile.
NARROW = 16


def small_matmul(kg: KernelGraph, n: int) -> bool:
    """Whether node `n` is `x @ w` with `w` a matrix parameter (not `InOut`) of literal
    sizes, each at most `SMALL_MATMUL`, with at most `SMALL_MATMUL_ELEMENTS` elements (a
    3 x 3 rotation, an 8 x 8 layer): computed where it is read, element (..., i, j) the
    sum over k of x[..., i, k] * w[k, j] (`Evaluator._dot`). It reads x at other elements
    of the same row, so it is op kind `rowmix`: fused into any launch, but never counted
    as reading only its own element."""
    node = kg.node(n)
    if node["kind"] != "binop" or node["symbol"] != "@":
        return False
    right = kg.node(node["inputs"][1])
    ann = right.get("annotation") if right["kind"] == "param" else None
    if not isinstance(ann, TensorAnnotation) or ann.inout or len(ann.dims) != 2:
        return False
    k, m = ann.dims
    if not (isinstance(k, int) and isinstance(m, int)):
        return False
    return k <= SMALL_MATMUL and m <= SMALL_MATMUL and k * m <= SMALL_MATMUL_ELEMENTS


def narrow_matmul(kg: KernelGraph, n: int) -> bool:
    """Whether node `n` is `h @ w` with `w` a matrix parameter of a literal width of at
    most `NARROW` (a linear head: w H x 3), or `h @ w.T` with w 3 x H (PyTorch's layout
    of a linear layer's weight): one `narrow` launch, in which a few threads fold each row
    of h into the row's few dot products (`kernels.narrow`). A product by a small matrix
    parameter (`small_matmul`) is not one: it is computed where it is read."""
    node = kg.node(n)
    if node["kind"] != "binop" or node["symbol"] != "@" or small_matmul(kg, n):
        return False
    right = node["inputs"][1]
    ann = _matrix_parameter(kg, right)
    width = ann.dims[1] if ann is not None else None
    rnode = kg.node(right)
    if ann is None and op_kind(kg, right) == "transpose" and rnode["spec"].name == "T":
        ann = _matrix_parameter(kg, rnode["inputs"][0])
        width = ann.dims[0] if ann is not None else None
    return isinstance(width, int) and width <= NARROW


def inline_product(kg: KernelGraph, n: int) -> bool:
    """Whether node `n` is `x @ w1` with `w1` a matrix parameter (not `InOut`) of a literal
    number of rows, at most `SMALL_MATMUL`, whose value only a `narrow` launch reads, as
    (an element-wise function of) its left operand: `relu(x @ w1 + b1) @ w2` with x N x 13
    and w2 H x 3. The `narrow` launch computes each element once, as the dot product of
    its row (`Evaluator._dot`), so it is op kind `rowmix` and no launch of its own: a tiled
    launch would store the N x H hidden layer for the next to read back. Its value may
    also be summed, averaged or maxed (`z.max(axis=1)`): the `narrow` launch folds a row
    reduction of it (`narrow_row_reductions`), and any other reduction computes it too."""
    node = kg.node(n)
    if node["kind"] != "binop" or node["symbol"] != "@" or small_matmul(kg, n):
        return False
    ann = _matrix_parameter(kg, node["inputs"][1])
    if ann is None or ann.inout or not isinstance(ann.dims[0], int):
        return False
    if ann.dims[0] > SMALL_MATMUL:
        return False
    # follow the readers through element-wise ops to a narrow `@`, as its left operand;
    # a row reduction the `narrow` launch folds may read it too (`narrow_row_reductions`)
    narrow, stack, seen = False, [n], set()
    while stack:
        cur = stack.pop()
        if cur in seen:
            continue
        seen.add(cur)
        for user in set(kg.graph.successors(cur)):
            if narrow_matmul(kg, user):
                left, right = kg.node(user)["inputs"][:2]
                if left != cur or right == cur:
                    return False
                narrow = True
            elif op_kind(kg, user) == "reduce" and kg.node(user)["spec"].name in ROW_FOLDS:
                continue
            elif op_kind(kg, user) in FUSIBLE:
                stack.append(user)
            else:
                return False
    return narrow


def _matrix_parameter(kg: KernelGraph, n: int) -> TensorAnnotation | None:
    """The annotation of node `n` when it is a rank-2 tensor parameter."""
    node = kg.node(n)
    ann = node.get("annotation") if node["kind"] == "param" else None
    if not isinstance(ann, TensorAnnotation) or len(ann.dims) != 2:
        return None
    return ann


def root_kind(kg: KernelGraph, n: int) -> str | None:
    node = kg.node(n)
    if node["kind"] == "binop" and node["symbol"] == "@":
        if small_matmul(kg, n) or inline_product(kg, n):
            return None
        return "narrow" if narrow_matmul(kg, n) else "matmul"
    spec = node.get("spec")
    if node["kind"] == "method" and spec is not None and spec.kind in ROOT_KINDS:
        return spec.kind
    return None


def op_kind(kg: KernelGraph, n: int) -> str:
    node = kg.node(n)
    if node["kind"] in ("binop", "unop"):
        if node.get("symbol") == "@":
            return "rowmix" if small_matmul(kg, n) or inline_product(kg, n) else "matmul"
        return "elementwise"
    spec = node.get("spec")
    return spec.kind if spec is not None else node["kind"]


# the reductions a `narrow` launch folds along its rows (`narrow_row_reductions`)
ROW_FOLDS = ("sum", "mean", "max", "min")


def fused_reads(
    g: nx.DiGraph, n: int, node_buffers: dict[int, str], inline: set[int] | frozenset = frozenset()
) -> set[int]:
    """The nodes a launch computing `n` walks through (stopping at values in buffers, but
    for the launch's other outputs, `inline`, which it computes)."""
    found, stack = set(), [n]
    while stack:
        m = stack.pop()
        if m in found:
            continue
        found.add(m)
        if m != n and m in node_buffers and m not in inline:
            continue
        stack.extend(g.predecessors(m))
    return found


def read_by(ev: Evaluator, g: nx.DiGraph, x: int, reader: int) -> bool:
    """Whether `reader` is the only op that reads node `x`, beside the function's return."""
    for user in g.successors(x):
        kind = ev.node(user)["kind"]
        if kind == "tuple":
            if any(ev.node(u)["kind"] != "return" for u in g.successors(user)):
                return False
        elif user != reader and kind != "return":
            return False
    return True
