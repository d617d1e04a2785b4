"""Calls of `@gpu` kernels from host code: one binding of each `Dim` across all arguments.

Each tensor argument's shape is matched against its parameter's annotation: a literal
size must be equal, a `Dim` is bound by the first argument that carries it and every
later one must agree (GPU040 names both arguments and both sizes), a size within the
dim's constraints (GPU042), a dim expression (`N + 2`) after the dims are bound, and
the dtype of a `mimir.array` tensor (GPU041). The result takes the return annotation
with the binding substituted, so `k2(k1(x))` is checked as written.
"""

from __future__ import annotations

import ast
from typing import Any, Protocol

from mimir.dims import Dim, solve_dims
from mimir.host import torch_table as tt
from mimir.host.rules import RefutedError
from mimir.host.values import (
    UNKNOWN,
    Sym,
    TensorV,
    TupleV,
    arith,
    const,
    eq,
    le,
    show,
    show_shape,
)
from mimir.parse.module import (
    KernelDef,
    ModuleInfo,
    TensorAnnotation,
    TupleAnnotation,
    read_annotation,
    read_return_annotation,
)
from mimir.solve.z3lib import z3


class KernelCaller(Protocol):
    """What checking a kernel call asks of the interpreter (`HostChecker` is one)."""

    info: ModuleInfo
    kernels: dict[str, KernelDef]

    def need(self, cond: Any, code: str, message: str, shapes: tuple = ()) -> None: ...

    def report(self, err: RefutedError, node: ast.AST) -> None: ...


def kernel_call(hc: KernelCaller, name: str, args: list, kwargs: dict, node: ast.AST | None) -> Any:
    kernel = hc.kernels[name].node
    params = kernel.args.args
    call = node if isinstance(node, ast.Call) else None
    passed: list[tuple[str, Any, ast.expr | None]] = []
    for k, p in enumerate(params):
        if k < len(args):
            passed.append((p.arg, args[k], call.args[k] if call and k < len(call.args) else None))
        elif p.arg in kwargs:
            src = (
                next((kw.value for kw in call.keywords if kw.arg == p.arg), None) if call else None
            )
            passed.append((p.arg, kwargs[p.arg], src))
    binding: dict[str, tuple[Sym, str, str]] = {}
    later: list[tuple[str, Any, Any, str]] = []
    seen: dict[str, tuple[TensorAnnotation, tuple, ast.expr | None, str]] = {}
    for pname, value, src in passed:
        ann = read_annotation(hc.info, next(p for p in params if p.arg == pname).annotation)
        t = tt.tensor(value)
        if not isinstance(ann, TensorAnnotation) or t is None:
            continue
        shown = show_shape(t.shape)
        want = "[" + ", ".join(str(d) for d in ann.dims) + "]"
        if t.dtype is not None and t.lib == "mimir":
            want_dtype = "bool" if ann.dtype.name == "bool_" else ann.dtype.name
            if t.dtype != want_dtype:
                _report_at(
                    hc,
                    src,
                    node,
                    RefutedError(
                        "GPU041",
                        f"argument `{pname}` of `{name}` is {t.dtype}, the annotation says "
                        f"{ann.dtype.name}",
                    ),
                )
                continue
        if t.shape is None:
            continue
        if len(t.shape) != len(ann.dims):
            _report_at(
                hc,
                src,
                node,
                RefutedError(
                    "GPU040",
                    f"argument `{pname}` of `{name}` has shape {shown} (rank {len(t.shape)}), "
                    f"the annotation says {want}",
                ),
            )
            continue
        seen[pname] = (ann, t.shape, src, shown)
        try:
            for d, size in zip(ann.dims, t.shape, strict=True):
                if size is None:
                    continue
                if isinstance(d, Dim):
                    if d.name in binding:
                        bound, other, other_shape = binding[d.name]
                        hc.need(
                            eq(bound, size),
                            "GPU040",
                            f"`{d.name}` is {show(bound)} from argument `{other}` "
                            f"{other_shape} but {show(size)} from argument `{pname}` {shown} "
                            f"in the call of `{name}`",
                        )
                    else:
                        binding[d.name] = (size, pname, shown)
                        _dim_constraints(hc, d, size, pname, name)
                else:
                    later.append((pname, d, size, shown))
            for pname2, d, size, shown2 in later:
                expected = _substitute(d, binding)
                hc.need(
                    eq(expected, size),
                    "GPU040",
                    f"argument `{pname2}` of `{name}` has shape {shown2}, the annotation "
                    f"says {want} (expected {show(expected)}, got {show(size)})",
                )
            later.clear()
        except RefutedError as err:
            _report_at(hc, src, node, err)
            return UNKNOWN
    if not _solve(hc, name, seen, binding, node):
        return UNKNOWN
    try:
        _relations(hc, name, seen, binding)
    except RefutedError as err:
        _report_at(hc, None, node, err)
        return UNKNOWN
    if kernel.returns is None:
        return UNKNOWN
    ret = read_return_annotation(hc.info, kernel.returns)
    if isinstance(ret, TupleAnnotation) and ret.names is None:
        # `-> tuple[Tensor[...], ...]`: `a, b = k(x)` unpacks results of known shapes
        return TupleV(tuple(_result(r, binding) for r in ret.items))
    if not isinstance(ret, TensorAnnotation):
        return UNKNOWN
    return _result(ret, binding)


def _solve(hc: KernelCaller, kernel: str, seen: dict, binding: dict, node: ast.AST | None) -> bool:
    """The dims an axis fixes by an equation (`3 * C`), solved as the shim solves them
    (`mimir.dims.solve_dims`): the size less the offset must be a multiple of the scale
    (GPU040), and the quotient within the dim's constraints (GPU042). False: reported."""
    shapes = [(p, ann.dims) for p, (ann, _, _, _) in seen.items()]
    for s in solve_dims(shapes):
        ann, shape, src, shown = seen[s.param]
        size = shape[s.axis]
        scale, offset = _substitute(s.scale, binding), _substitute(s.offset, binding)
        if s.dim.name in binding or size is None or scale is None or offset is None:
            continue
        diff = arith("-", size, offset)
        left = show(size) if offset.value == 0 else f"{show(size)} - {show(offset)}"
        try:
            hc.need(
                eq(arith("%", diff, scale), const(0)),
                "GPU040",
                f"argument `{s.param}` of `{kernel}` has shape {shown}: axis {s.axis} is "
                f"{ann.dims[s.axis]} for no `{s.dim.name}` ({left} is not a multiple of "
                f"{show(scale)})",
            )
            value = arith("//", diff, scale)
            binding[s.dim.name] = (value, s.param, shown)
            _dim_constraints(hc, s.dim, value, s.param, kernel)
        except RefutedError as err:
            _report_at(hc, src, node, err)
            return False
    return True


def _relations(hc: KernelCaller, kernel: str, seen: dict, binding: dict) -> None:
    """Each bound dim declared with a relation (`Dim("T", max=MAXT)`) keeps it, once the
    dims it names are bound too (GPU042), as the shim checks at the call."""
    dims = {d.name: d for ann, _, _, _ in seen.values() for s in ann.dims for d in _dims_of(s)}
    for name, dim in dims.items():
        if name not in binding:
            continue
        size, pname, _ = binding[name]
        for bound, upper in ((dim.min_of, False), (dim.max_of, True)):
            limit = None if bound is None else _substitute(bound, binding)
            if limit is None:
                continue
            hc.need(
                le(size, limit) if upper else le(limit, size),
                "GPU042",
                f"argument `{pname}` of `{kernel}` binds `{name}` to {show(size)}, outside "
                f"{dim.describe_constraints()} ({bound} is {show(limit)})",
            )


def _dims_of(size: Any) -> list[Dim]:
    return [] if isinstance(size, int) else size.dims()


def _result(ret: TensorAnnotation, binding: dict) -> TensorV:
    shape = tuple(_substitute(d, binding) for d in ret.dims)
    dtype = "bool" if ret.dtype.name == "bool_" else ret.dtype.name
    return TensorV(shape, dtype, "mimir")


def _dim_constraints(hc: KernelCaller, d: Dim, size: Sym, pname: str, kernel: str) -> None:
    conds = [size.term >= d.min]
    if d.max is not None:
        conds.append(size.term <= d.max)
    if d.multiple_of is not None:
        conds.append(size.term % d.multiple_of == 0)
    if size.value is not None:
        ok = d.admits(size.value)
        cond: Any = ok
    else:
        cond = z3.And(*conds)
    hc.need(
        cond,
        "GPU042",
        f"argument `{pname}` of `{kernel}` binds `{d.name}` to {show(size)}, outside "
        f"{d.describe_constraints()}",
    )


def _substitute(d: Any, binding: dict) -> Any:
    if isinstance(d, int):
        return const(d)
    if isinstance(d, Dim):
        return binding[d.name][0] if d.name in binding else None
    left, right = _substitute(d.left, binding), _substitute(d.right, binding)
    return arith(d.op, left, right)


def _report_at(
    hc: KernelCaller, src: ast.AST | None, node: ast.AST | None, err: RefutedError
) -> None:
    at = src if src is not None else node
    if at is not None:
        hc.report(err, at)
