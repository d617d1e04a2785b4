"""Shared helpers for the test suite: fixture markers, importing kernel files, running kernels.

The checker's verdict and the shim's behaviour are compared the same way everywhere
(`test_fixtures.py`, `test_properties.py`): import the file under plain Python, bind
each `Dim` of a kernel (to the checker's counterexample when it gave one), build
random arguments from the annotations, call the kernel and classify what happened.
"""

from __future__ import annotations

import importlib.util
import itertools
import math
import random
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from mimir.array import Kernel, MimirError, Tensor, TensorType, full, rand
from mimir.dims import Dim, DimExpr, UnboundDimError, evaluate

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures" / "check"

# `# E: GPU011` or `# E: GPU010 GPU011` at the end of a line.
_MARKER = re.compile(r"#\s*E:\s*((?:GPU\d{3}[ \t]*)+)$")
# `__mimir_shim__ = "skip: reason"` at module level.
_SHIM_SKIP = re.compile(r'^__mimir_shim__\s*=\s*"skip:\s*(.+)"\s*$', re.MULTILINE)


def markers(text: str) -> set[tuple[int, str]]:
    """The (line, code) pairs a fixture's `# E:` markers promise."""
    out: set[tuple[int, str]] = set()
    for lineno, line in enumerate(text.splitlines(), start=1):
        m = _MARKER.search(line.rstrip())
        if m:
            out.update((lineno, code) for code in m.group(1).split())
    return out


def shim_skip_reason(text: str) -> str | None:
    m = _SHIM_SKIP.search(text)
    return m.group(1) if m else None


_counter = itertools.count()


def import_file(path: Path) -> ModuleType:
    """Import a kernel file under plain Python (so `inspect.getsource` works on it)."""
    name = f"_mimir_test_{path.stem}_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def kernels_of(module: ModuleType) -> dict[str, Kernel]:
    return {
        name: value
        for name, value in vars(module).items()
        if isinstance(value, Kernel) and value.fn.__module__ == module.__name__
    }


# Default sizes: distinct primes, so two dims never agree (or broadcast) by accident.
_PREFERRED = (3, 5, 7, 11, 13, 17, 19, 23)


def _admissible(dim: Dim, start: int) -> int | None:
    """The smallest size >= start that `dim` admits, or None."""
    v = max(start, dim.min)
    if dim.multiple_of:
        v = -(-v // dim.multiple_of) * dim.multiple_of
    while dim.max is None or v <= dim.max:
        if dim.admits(v):
            return v
        v += 1
    return None


def choose_size(dim: Dim, taken: Iterable[int] = ()) -> int:
    """A size `dim` admits, avoiding `taken` when it can."""
    taken = set(taken)
    for want in _PREFERRED:
        v = _admissible(dim, want)
        if v is not None and v not in taken:
            return v
    v = _admissible(dim, dim.min)
    assert v is not None, f"no admissible size for {dim!r}"
    return v


def param_dims(annotations: dict[str, Any]) -> list[Dim]:
    found: list[Dim] = []
    for name, ann in annotations.items():
        if name == "return" or not isinstance(ann, TensorType):
            continue
        for d in ann.dims:
            if isinstance(d, DimExpr):
                for dim in d.dims():
                    if dim not in found:
                        found.append(dim)
    return found


def bind_dims(annotations: dict[str, Any], fixed: dict[str, int] | None = None) -> dict[str, int]:
    """A value for every dim the parameters mention; `fixed` (a counterexample) wins."""
    env = dict(fixed or {})
    for dim in param_dims(annotations):
        if dim.name not in env:
            env[dim.name] = choose_size(dim, env.values())
    return _callable(annotations, env, set(fixed or ()))


def smallest_sizes(annotations: dict[str, Any]) -> dict[str, int]:
    """Every dim at the smallest size it admits (1, or 0 where `min=0`) that a call can pass."""
    env = {}
    for dim in param_dims(annotations):
        v = _admissible(dim, dim.min)
        assert v is not None, f"no admissible size for {dim!r}"
        env[dim.name] = v
    return _callable(annotations, env, set())


def negative_axes(annotations: dict[str, Any], env: dict[str, int]) -> list[tuple[str, Any]]:
    """The parameter axes (name, size) that are negative under `env`: no call can pass them."""
    found = []
    for name, ann in annotations.items():
        if name == "return" or not isinstance(ann, TensorType):
            continue
        found += [(name, d) for d in ann.dims if isinstance(d, DimExpr) and evaluate(d, env) < 0]
    return found


def _related(annotations: dict[str, Any], env: dict[str, int], fixed: set[str]) -> None:
    """Move the free dims of `env` until each keeps its relations (`Dim("T", max=MAXT)`)."""
    for _ in range(64):
        moved = False
        for dim in param_dims(annotations):
            if dim.name in fixed or dim.relation_error(env[dim.name], env) is None:
                continue
            low, high = _bound(dim.min_of, env, dim.min), _bound(dim.max_of, env, dim.max)
            v = _admissible(dim, max(low, dim.min))
            if v is not None and (high is None or v <= high):
                env[dim.name] = v
                moved = True
            elif dim.max_of is not None:  # no room below the bound (P <= MAXT - 1 at MAXT=1)
                for other in dim.max_of.dims():
                    grown = None if other.name in fixed else _admissible(other, env[other.name] + 1)
                    if grown is not None:
                        env[other.name] = grown
                        moved = True
        if not moved:
            return


def _bound(relation: Any, env: dict[str, int], default: int | None) -> int | None:
    try:
        return default if relation is None else evaluate(relation, env)
    except UnboundDimError:
        return default


def _callable(annotations: dict[str, Any], env: dict[str, int], fixed: set[str]) -> dict[str, int]:
    """Grow the free dims of `env` until every parameter axis is >= 0 (`H - 2` needs H >= 2)."""
    _related(annotations, env, fixed)
    for _ in range(64):
        bad = negative_axes(annotations, env)
        if not bad:
            return env
        for dim in bad[0][1].dims():
            if dim.name not in fixed:
                grown = _admissible(dim, env[dim.name] + 1)
                if grown is not None:
                    env[dim.name] = grown
    return env


def make_arguments(
    kernel: Kernel, env: dict[str, int], seed: int = 0, fill: int | None = None
) -> dict[str, Any]:
    """Random gpu tensors (and scalars) matching the kernel's parameter annotations; with
    `fill`, every integer tensor holds that one value (a loaded index a failure needs)."""
    annotations = kernel.annotations()
    args: dict[str, Any] = {}
    for k, (name, param) in enumerate(kernel.signature.parameters.items()):
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        ann = annotations.get(name)
        if isinstance(ann, TensorType):
            shape = tuple(evaluate(d, env) for d in ann.dims)
            if getattr(ann, "value_range", None) is not None:
                # A `Range(lo, hi)` input: values the call admits (GPU043 refuses others).
                lo = evaluate(ann.value_range.lo, env)
                hi = evaluate(ann.value_range.hi, env)
                gen = random.Random(seed + k)
                count = math.prod(shape)
                picks = [
                    min(max(fill, lo), hi - 1) if fill is not None else gen.randrange(lo, hi)
                    for _ in range(count)
                ]
                args[name] = Tensor(picks, shape, ann.dtype, "gpu")
            elif fill is not None and ann.dtype.name in ("int32", "uint32"):
                value = fill % 2**32 if ann.dtype.name == "uint32" else fill
                args[name] = full(shape, value, dtype=ann.dtype).to("gpu")
            else:
                args[name] = rand(shape, dtype=ann.dtype, seed=seed + k).to("gpu")
        elif ann is int:
            args[name] = 2
        elif ann is float:
            args[name] = 0.5
        else:  # no usable annotation: the kernel must refuse it (GPU033) before reading it
            args[name] = None
    return args


@dataclass
class Outcome:
    """What calling a kernel did: returned a value, or raised."""

    value: Any = None
    error: BaseException | None = None

    @property
    def code(self) -> str | None:
        return self.error.code if isinstance(self.error, MimirError) else None


def call_kernel(
    kernel: Kernel,
    counterexample: dict[str, int] | None = None,
    seed: int = 0,
    fill: int | None = None,
):
    """Bind dims, build arguments, call; returns (Outcome, env)."""
    try:
        annotations = kernel.annotations()
    except MimirError as err:  # postponed annotations Python cannot evaluate
        return Outcome(error=err), {}
    env = bind_dims(annotations, counterexample)
    args = make_arguments(kernel, env, seed, fill)
    try:
        return Outcome(value=kernel(**args)), env
    except Exception as err:  # noqa: BLE001 - classified by the caller
        return Outcome(error=err), env
