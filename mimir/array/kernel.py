"""`@gpu`: a kernel that checks its arguments, runs its body and checks its result."""

from __future__ import annotations

import functools
import inspect
import itertools
import sys
from collections.abc import Callable, Sequence
from typing import Any

from mimir.array.functions import from_array
from mimir.array.state import (
    BINDINGS,
    GRID,
    PRECISION,
    PRECISIONS,
    GridRun,
    MimirError,
    RuntimeInt,
    resolve,
)
from mimir.array.tensors import Tensor
from mimir.array.types import Range, TensorType
from mimir.dims import (
    Dim,
    DimExpr,
    Size,
    SizeDivisionError,
    UnboundDimError,
    evaluate,
    solve_dims,
)
from mimir.dtypes import DType
from mimir.ops import numerics as nm


class Kernel:
    """A `@gpu` function: checks its arguments, runs its body, checks its result."""

    def __init__(
        self, fn: Callable[..., Any], grid: tuple | None = None, precision: str = "float32"
    ) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.grid = grid
        self.precision = precision
        self.signature = inspect.signature(fn)
        self._validated = False

    def __repr__(self) -> str:
        return f"<mimir kernel {self.fn.__qualname__}>"

    def annotations(self) -> dict[str, Any]:
        """Parameter and return annotations, evaluated (`return` for the result).

        Postponed annotations (PEP 563) are evaluated here, against the module's globals
        as they are now: one Python cannot evaluate raises the checker's code.
        """
        # Outside any running kernel's bindings, so that `N - 1` is a dim expression.
        token = BINDINGS.set(None)
        try:
            return inspect.get_annotations(self.fn, eval_str=True)
        except NameError as err:
            raise MimirError("GPU032", f"undefined name `{err.name}` in an annotation") from None
        except TypeError as err:  # `Tensor[N, 4]`, or a dtype name bound to a `Dim`
            raise MimirError("GPU033", f"cannot evaluate the annotations: {err}") from None
        finally:
            BINDINGS.reset(token)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.precision not in PRECISIONS:  # the checker's GPU036 on the decorator
            raise MimirError(
                "GPU036", f"`precision=` is one of {list(PRECISIONS)}, got {self.precision!r}"
            )
        self._validate_language()
        annotations = self.annotations()
        _check_annotations(self.signature, annotations, index_level=self.grid is not None)
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        if self.grid is not None:
            for name, value in bound.arguments.items():
                if isinstance(annotations.get(name), TensorType) and not isinstance(value, Tensor):
                    # The body writes into its tensors; a converted array would not see it.
                    raise MimirError(
                        "GPU040",
                        f"argument `{name}` of an index-level kernel must be a tensor, got "
                        f"{type(value).__name__} (its writes would be lost); wrap it with "
                        '`tensor(a).to("gpu")`',
                    )
        bindings = _bind_arguments(bound.arguments, annotations)
        if self.grid is None:
            for name, value in bound.arguments.items():
                if annotations.get(name) is int and type(value) is int:
                    bound.arguments[name] = RuntimeInt(value)
        token = BINDINGS.set(bindings)
        precision_token = PRECISION.set(self.precision)
        inout = [
            n
            for n, a in annotations.items()
            if n != "return" and isinstance(a, TensorType) and a.inout
        ]
        final: dict[str, Any] = {}
        try:
            if self.grid is not None:
                result = self._run_grid(bound, bindings)
            elif inout:
                result = _run_capturing(self.fn, bound, inout, final)
            else:
                result = self.fn(*bound.args, **bound.kwargs)
        except UnboundDimError as err:
            raise MimirError(
                "GPU035", f"dim `{err.name}` is not fixed by any parameter of the kernel"
            ) from None
        except NameError as err:
            # UnboundLocalError (a local read before assignment) carries no `.name`.
            name = err.name or (str(err).split("'")[1] if "'" in str(err) else "?")
            raise MimirError("GPU032", f"undefined name `{name}`") from None
        except TypeError as err:
            # Python's own argument binding (`x.sum(1, False, 3)`, `x.clip(0.0)`): the op
            # cannot take these arguments, which the checker reports as GPU036.
            raise MimirError("GPU036", f"invalid argument: {err}") from err
        except IndexError as err:
            # `x.shape[5]` on a rank-1 tensor: the checker's GPU018 (tensor indexing raises
            # MimirError itself, so only the shape tuple gets here).
            raise MimirError("GPU018", f"index out of range: {err}") from err
        except (SizeDivisionError, ZeroDivisionError) as err:
            # Size `//` or `%` by a divisor that is not positive: the checker's GPU036.
            raise MimirError("GPU036", f"division of sizes: {err}") from None
        except ValueError as err:
            # `a, b, c = x.shape` on a rank-2 tensor: the checker's GPU036 (cannot unpack).
            raise MimirError("GPU036", f"invalid argument: {err}") from None
        finally:
            PRECISION.reset(precision_token)
            BINDINGS.reset(token)
        if "return" in annotations:
            _check_result(result, annotations["return"], bindings)
            if result_names(annotations["return"]) is not None and type(result) is tuple:
                result = annotations["return"](*result)  # `return a, b` as the named tuple
        # Tensor-level `InOut` parameters: the value each name holds at the return goes
        # back into the caller's tensor (after every check, so a failed call changes nothing).
        updates = []
        for name in inout if self.grid is None else ():
            value, ann = final.get(name), annotations[name]
            target = bound.arguments[name]
            if value is None or value is target:
                continue
            _check_result(value, ann, bindings, f"the value written back into `{name}`")
            updates.append((target, list(value._values)))  # a copy: `p, q = q, p` swaps
        for target, values in updates:
            target._values[:] = values
        return result

    def _run_grid(self, bound: inspect.BoundArguments, bindings: dict[str, int]) -> None:
        """Run the body once per program id, in row-major order of the grid."""
        if not isinstance(self.grid, tuple) or not self.grid:
            raise MimirError("GPU036", "`grid=` takes a tuple of one or more sizes")
        sizes = [resolve(g) for g in self.grid]
        run = GridRun()
        token = GRID.set(run)
        try:
            for pids in itertools.product(*(range(n) for n in sizes)):
                run.pids = pids
                try:
                    returned = self.fn(*bound.args, **bound.kwargs)
                except AttributeError as err:
                    # `program_id(0).exp()`: ids, their arithmetic and comparisons are plain
                    # ints and bools here, as the checker's GPU030 says
                    raise MimirError(
                        "GPU030",
                        f"{err}: a program id, arithmetic on it and comparisons are plain "
                        "Python values in a kernel, with no methods",
                    ) from None
                if returned is not None:
                    raise MimirError(
                        "GPU015", "an index-level kernel writes its outputs and returns nothing"
                    )
        finally:
            GRID.reset(token)
        annotations = self.annotations()
        # a program may read back what it wrote itself (zero, then accumulate)
        read = run.unwritten_reads
        written = {slot[0] for slot in run.writes}
        for name, value in bound.arguments.items():
            ann = annotations.get(name)
            if not isinstance(ann, TensorType) or ann.inout or not isinstance(value, Tensor):
                continue
            if id(value._values) in read and id(value._values) in written:
                raise MimirError(
                    "GPU029",
                    f"`{name}` is read where this program has not written it yet, and "
                    "written, but not annotated `InOut[...]`",
                )
        return None

    def _validate_language(self) -> None:
        """Refuse what the checker refuses: constructs outside the kernel language."""
        if self._validated:
            return
        try:
            source = inspect.getsource(self.fn)
        except (OSError, TypeError):
            self._validated = True  # no source (a REPL): nothing to read
            return
        from mimir.parse.subset import first_violation

        # Names the kernel's module binds itself shadow the builtins (`range = Dim(...)`).
        shadowed = frozenset(getattr(self.fn, "__globals__", {}))
        violation = first_violation(source, self.fn.__name__, self.grid is not None, shadowed)
        if violation is not None:
            raise MimirError(violation.code, violation.message)
        if self.grid is None:
            self._refuse_plain_writes(source)
        self._validated = True

    def _refuse_plain_writes(self, source: str) -> None:
        """The checker's GPU029 at tensor level: `p -= g` or `p[...] = v` on a parameter
        not annotated `InOut` (NumPy would update the caller's tensor; Python rebinds)."""
        import ast
        import textwrap

        annotations = self.annotations()
        plain = {
            n
            for n, a in annotations.items()
            if n != "return" and isinstance(a, TensorType) and not a.inout
        }
        tree = ast.parse(textwrap.dedent(source))
        fn = next(
            (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
             and n.name == self.fn.__name__),
            None,
        )  # fmt: skip
        for stmt in fn.body if fn is not None else []:
            if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
                if stmt.target.id in plain:
                    raise MimirError(
                        "GPU029",
                        f"`{stmt.target.id}` is a parameter not annotated `InOut[...]`: "
                        "an augmented assignment cannot update the caller's tensor",
                    )
            targets = stmt.targets if isinstance(stmt, ast.Assign) else []
            for t in targets:
                if (
                    isinstance(t, ast.Subscript)
                    and isinstance(t.value, ast.Name)
                    and t.value.id in plain
                ):
                    raise MimirError(
                        "GPU029",
                        f"`{t.value.id}` is a parameter not annotated `InOut[...]`: "
                        "a kernel cannot write into it",
                    )
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                        plain.discard(n.id)  # rebound: a local from here on


def _run_capturing(
    fn: Callable[..., Any], bound: inspect.BoundArguments, names: list[str], final: dict
) -> Any:
    """Call `fn`, recording the values `names` hold in its frame when it returns."""
    code = fn.__code__
    previous = sys.getprofile()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "return" and frame.f_code is code:
            local = frame.f_locals
            final.update({n: local[n] for n in names if n in local})
        if previous is not None:
            previous(frame, event, arg)

    sys.setprofile(profile)
    try:
        return fn(*bound.args, **bound.kwargs)
    finally:
        sys.setprofile(previous)


def gpu(
    fn: Callable[..., Any] | None = None, *, grid: tuple | None = None, precision: str = "float32"
) -> Any:
    """Mark a kernel: `@gpu`, or `@gpu(grid=(N,))` for an index-level kernel.

    `precision="tf32"` lets every `@` (and einsum lowered to `@`) of the kernel read its
    float32 operands as TF32 (tensor cores on PTX, sm_80+); the shim then rounds them so
    (`numerics.tf32`) before its exact products. The default, "float32", is exact float32."""
    if fn is None:
        return lambda f: Kernel(f, grid, precision)
    return Kernel(fn, grid, precision)


def _check_annotations(
    signature: inspect.Signature, annotations: dict[str, Any], index_level: bool = False
) -> None:
    """Refuse what the checker refuses as GPU033: parameters and results it cannot type."""
    plain = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    for name, param in signature.parameters.items():
        if param.kind not in plain:
            raise MimirError("GPU033", "kernels take plain named parameters only")
        ann = annotations.get(name)
        if not (isinstance(ann, TensorType) or ann in (int, float)):
            raise MimirError(
                "GPU033",
                f"parameter `{name}` has no usable annotation; annotate it as "
                "`Tensor[dtype, sizes...]`, `int` or `float`",
            )
    if index_level:
        if annotations.get("return") is not None:
            raise MimirError(
                "GPU033",
                "an index-level kernel writes its outputs and returns nothing; "
                "remove the return annotation",
            )
        return
    if annotations.get("return", None) is None:
        return  # no annotation, or `-> None`: a kernel that only updates `InOut` tensors
    ret = annotations["return"]
    if isinstance(ret, TensorType) and not ret.inout:
        return
    items = _tuple_items(ret)
    if (
        items is not None
        and items
        and all(isinstance(t, TensorType) and not t.inout for t in items)
    ):
        clash = [n for n in result_names(ret) or () if n in signature.parameters]
        if clash:
            raise MimirError(
                "GPU033", f"result `{clash[0]}` has the name of a parameter; rename the field"
            )
        return
    raise MimirError(
        "GPU033",
        f"the result annotation `{getattr(ret, '__name__', ret)!r}` is not a kernel type; use "
        "`Tensor[dtype, sizes...]` "
        "or `tuple[Tensor[...], ...]`",
    )


def _tuple_items(ann: Any) -> tuple | None:
    """The items of `tuple[A, B]`, or the field types of a `NamedTuple` class, else None."""
    import typing

    if typing.get_origin(ann) is tuple:
        return typing.get_args(ann)
    if result_names(ann) is not None:
        hints = typing.get_type_hints(ann)
        return tuple(hints[f] for f in ann._fields)
    return None


def result_names(ann: Any) -> tuple[str, ...] | None:
    """The field names of a `NamedTuple` result annotation (the manifest's output names)."""
    if isinstance(ann, type) and issubclass(ann, tuple) and hasattr(ann, "_fields"):
        return tuple(ann._fields)
    return None


def _bind_arguments(arguments: dict[str, Any], annotations: dict[str, Any]) -> dict[str, int]:
    env: dict[str, int] = {}
    dims: dict[str, Dim] = {}
    deferred: list[tuple[str, int, Size, int]] = []
    for name, value in arguments.items():
        ann = annotations.get(name)
        if not isinstance(ann, TensorType):
            continue
        if not isinstance(value, Tensor):
            value = _array_argument(name, value, ann.dtype)
            arguments[name] = value
        if value._device != "gpu":
            raise MimirError(
                "GPU060",
                f'argument `{name}` is on cpu; move it with `.to("gpu")` before the call',
            )
        if value._dtype != ann.dtype:
            raise MimirError(
                "GPU041", f"argument `{name}` has dtype {value._dtype}, expected {ann.dtype}"
            )
        if len(value._shape) != len(ann.dims):
            raise MimirError(
                "GPU040",
                f"argument `{name}` has shape {list(value._shape)}, expected {_show(ann.dims)}",
            )
        for axis, (actual, expected) in enumerate(zip(value._shape, ann.dims, strict=True)):
            if isinstance(expected, Dim) and expected.name not in env:
                if not expected.admits(actual):
                    raise MimirError(
                        "GPU042",
                        f"argument `{name}` binds {expected.name}={actual}, outside its "
                        f"constraints ({expected.describe_constraints()})",
                    )
                env[expected.name] = actual
                dims[expected.name] = expected
            else:
                deferred.append((name, axis, expected, actual))
    _solve_dims(arguments, annotations, env)
    _check_relations(annotations, env)
    for name, axis, expected, actual in deferred:
        try:
            want = evaluate(expected, env)
        except UnboundDimError as err:
            raise MimirError(
                "GPU035", f"dim `{err.name}` is not fixed by any parameter of the kernel"
            ) from None
        except ZeroDivisionError:
            raise MimirError("GPU033", f"division by zero in the size `{expected}`") from None
        if want != actual:
            raise MimirError(
                "GPU040",
                f"argument `{name}` has size {actual} on axis {axis}, expected {expected}={want}",
            )
    for name, value in arguments.items():
        ann = annotations.get(name)
        if isinstance(ann, TensorType) and ann.value_range is not None:
            _check_range(name, value, ann.value_range, env)
    return env


def _solve_dims(
    arguments: dict[str, Any], annotations: dict[str, Any], env: dict[str, int]
) -> None:
    """Bind each dim an axis fixes by an equation (`3 * C`: C is the size / 3), in the order
    `mimir.dims.solve_dims` gives, as the checker and every host do."""
    shapes = [
        (name, tuple(ann.dims))
        for name, ann in annotations.items()
        if name in arguments and isinstance(ann, TensorType)
    ]
    for s in solve_dims(shapes):
        actual = arguments[s.param]._shape[s.axis]
        scale, offset = evaluate(s.scale, env), evaluate(s.offset, env)
        value, rest = divmod(actual - offset, scale)
        size = annotations[s.param].dims[s.axis]
        if rest:
            left = f"{actual}" if offset == 0 else f"{actual} - {offset}"
            raise MimirError(
                "GPU040",
                f"argument `{s.param}` has size {actual} on axis {s.axis}, which is {size} for "
                f"no {s.dim.name} ({left} is not a multiple of {scale})",
            )
        if not s.dim.admits(value):
            raise MimirError(
                "GPU042",
                f"argument `{s.param}` binds {s.dim.name}={value} (axis {s.axis} is {size}), "
                f"outside its constraints ({s.dim.describe_constraints()})",
            )
        env[s.dim.name] = value


def _check_relations(annotations: dict[str, Any], env: dict[str, int]) -> None:
    """Each bound dim declared with a relation (`Dim("T", max=MAXT)`) keeps it, once the
    dims it names are bound too (GPU042): the checker's proofs assume it."""
    seen: set[str] = set()
    for ann in annotations.values():
        if not isinstance(ann, TensorType):
            continue
        for size in ann.dims:
            for dim in size.dims() if isinstance(size, DimExpr) else ():
                if dim.name in seen or dim.name not in env:
                    continue
                seen.add(dim.name)
                why = dim.relation_error(env[dim.name], env)
                if why is not None:
                    raise MimirError(
                        "GPU042",
                        f"the arguments bind {why}, outside its constraints "
                        f"({dim.describe_constraints()})",
                    )


def _array_argument(name: str, value: Any, dtype: DType) -> Tensor:
    """An array passed for a tensor parameter, as a gpu tensor (the call uploads it).

    Its dtype must be the parameter's exactly (a float64 array for a float32
    parameter is GPU041): converting silently would hide a precision change.
    """
    try:
        array = from_array(value)
    except ValueError as err:
        raise MimirError("GPU040", f"argument `{name}`: {err}") from None
    if array is None:
        raise MimirError(
            "GPU040", f"argument `{name}` must be a tensor or an array, got {type(value).__name__}"
        )
    from mimir.runtime.arrays import read_array

    exact = read_array(value).dtype
    if exact != dtype.name:
        raise MimirError(
            "GPU041",
            f"argument `{name}` has dtype {getattr(value, 'dtype', exact)}, expected {dtype}",
        )
    values, shape, _ = array
    return Tensor(nm.cast(values, dtype), shape, dtype, "gpu")


def _check_range(name: str, value: Tensor, bounds: Range, env: dict[str, int]) -> None:
    """Every value of a `Range`-annotated argument lies in [lo, hi) (the checker assumes it)."""
    try:
        lo, hi = evaluate(bounds.lo, env), evaluate(bounds.hi, env)
    except UnboundDimError as err:
        raise MimirError(
            "GPU035", f"dim `{err.name}` is not fixed by any parameter of the kernel"
        ) from None
    for flat, v in enumerate(value._values):
        if not lo <= v < hi:
            from mimir.runtime.arrays import range_violation  # stdlib-only, as the shim

            where = (bounds.lo, bounds.hi)
            message = range_violation(name, v, flat, value._shape, where, (lo, hi), env)
            raise MimirError("GPU043", message)


def _show(dims: Sequence[Any]) -> str:
    return "[" + ", ".join(str(d) for d in dims) + "]"


def _check_result(result: Any, ann: Any, env: dict[str, int], what: str = "") -> None:
    items = _tuple_items(ann)
    if items is not None:
        if not isinstance(result, tuple) or len(result) != len(items):
            got = f"{len(result)} values" if isinstance(result, tuple) else "one value"
            raise MimirError(
                "GPU015", f"the kernel returns {got}, the annotation says {len(items)} tensors"
            )
        for k, (r, a) in enumerate(zip(result, items, strict=True)):
            _check_result(r, a, env, f"result {k}")
        return
    if not isinstance(ann, TensorType):
        return
    if not isinstance(result, Tensor):
        raise MimirError(
            "GPU015", f"{what or 'the kernel'} returns {type(result).__name__}, not a tensor"
        )
    try:
        expected = [evaluate(d, env) for d in ann.dims]
    except UnboundDimError as err:
        raise MimirError(
            "GPU035", f"dim `{err.name}` is not fixed by any parameter of the kernel"
        ) from None
    if list(result._shape) != expected:
        raise MimirError(
            "GPU015",
            f"return shape mismatch: the kernel returns {list(result._shape)}, "
            f"the annotation says {_show(ann.dims)}",
        )
    if result._dtype != ann.dtype:
        raise MimirError(
            "GPU016",
            f"return dtype mismatch: the kernel returns {result._dtype}, "
            f"the annotation says {ann.dtype}",
        )
