"""The differential oracle: the checker's verdict on a kernel against the shim's behaviour.

`judge(case, workdir)` writes the case to a file, runs `mimir check` on it in process
(`mimir.check.check_source`), imports it under plain Python and calls the kernel under
the shim (`mimir.array`) at many admissible sizes: each dim's minimum, 0 where allowed,
1 to 5, primes, one large size per dim, and the checker's counterexample. A size is
admissible when every dim admits it (min, max, multiple_of) and every parameter axis is
>= 0 (a tensor with a negative axis cannot be passed). The `Judgement` names every
finding, by class:

- `false proof`: the checker is clean, the shim raises a `MimirError` at an admissible size;
- `false alarm`: the checker reports an error, the shim runs clean at every size tried
  (including the counterexample);
- `GPU050 on a valid kernel`: the same, where the checker's only verdict is "could not prove";
- `counterexample does not reproduce`: the counterexample is not an admissible call, or
  the shim runs clean there while it fails at another size;
- `code disagreement`: checker and shim both fail, with different codes;
- `crash`: the checker (or the compiler) raised instead of answering;
- `bare exception`: the shim raised a Python exception that is not a `MimirError`.

Backend findings (`invalid kernel`, `wrong result`) come from `fuzzing.backends`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
import math
import random
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mimir.array import Kernel, MimirError, TensorType, rand, tensor
from mimir.dims import Dim, DimExpr, evaluate

FALSE_PROOF = "false proof"
FALSE_ALARM = "false alarm"
UNPROVEN = "GPU050 on a valid kernel"
CEX = "counterexample does not reproduce"
CODE = "code disagreement"
CRASH = "crash"
BARE = "bare exception"
INVALID = "invalid kernel"
WRONG = "wrong result"
CLASSES = (FALSE_PROOF, FALSE_ALARM, UNPROVEN, CEX, CODE, CRASH, BARE, INVALID, WRONG)

CANDIDATES = (0, 1, 2, 3, 4, 5, 7, 11, 13)
LARGE = 97
MAX_ELEMENTS = 40_000  # per parameter, so the pure-Python shim stays quick
UNPROVEN_CODE = "GPU050"
DATA_RETRIES = 5  # inputs tried at an index-level counterexample


@dataclass
class Finding:
    klass: str
    detail: str
    sizes: dict[str, int] | None = None


@dataclass
class Judgement:
    """What the checker and the shim said about one kernel."""

    codes: list[str] = field(default_factory=list)
    counterexample: dict[str, int] | None = None
    shim: dict[str, str] = field(default_factory=dict)  # "N=3, M=5" -> "ok" | code | exception
    findings: list[Finding] = field(default_factory=list)
    clean: bool = False  # the checker is clean and the shim ran at every size
    path: Path | None = None
    sizes: list[dict[str, int]] = field(default_factory=list)  # the admissible sizes tried
    check_seconds: float = 0.0

    @property
    def verdict(self) -> str:
        return "clean" if not self.codes else "+".join(sorted(set(self.codes)))


_counter = itertools.count()


def write_case(source: str, workdir: Path) -> Path:
    digest = hashlib.sha1(source.encode()).hexdigest()[:12]
    path = workdir / f"k_{digest}.py"
    path.write_text(source)
    return path


def import_kernel(path: Path) -> Kernel:
    name = f"_mimir_fuzz_{path.stem}_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # inspect.getsource needs it registered
    spec.loader.exec_module(module)
    return module.kernel


def kernel_dims(kernel: Kernel) -> list[Dim]:
    """Every `Dim` the kernel's annotations mention, in order of first use."""
    found: list[Dim] = []
    for ann in kernel.annotations().values():
        if isinstance(ann, TensorType):
            for d in ann.dims:
                if isinstance(d, DimExpr):
                    found += [dim for dim in d.dims() if dim not in found]
    for g in kernel.grid or ():
        if isinstance(g, DimExpr):
            found += [dim for dim in g.dims() if dim not in found]
    return found


def admits(dim: Dim, v: int) -> bool:
    if v < dim.min or (dim.max is not None and v > dim.max):
        return False
    return not dim.multiple_of or v % dim.multiple_of == 0


def _snap(dim: Dim, want: int) -> int | None:
    v = max(want, dim.min)
    step = dim.multiple_of or 1
    v = -(-v // step) * step
    return v if dim.max is None or v <= dim.max else None


def callable_at(kernel: Kernel, env: dict[str, int]) -> str | None:
    """None when the kernel can be called at `env`, else why not."""
    for dim in kernel_dims(kernel):
        if dim.name not in env:
            return f"`{dim.name}` is not bound"
        if not admits(dim, env[dim.name]):
            return f"`{dim.name}={env[dim.name]}` is not admissible for {dim!r}"
    for name, ann in kernel.annotations().items():
        if name != "return" and isinstance(ann, TensorType):
            shape = [evaluate(d, env) for d in ann.dims]
            if any(s < 0 for s in shape):
                return f"parameter `{name}` would have the negative shape {shape}"
    return None


def _elements(kernel: Kernel, env: dict[str, int]) -> int:
    total = 0
    for name, ann in kernel.annotations().items():
        if name != "return" and isinstance(ann, TensorType):
            total = max(total, math.prod(evaluate(d, env) for d in ann.dims))
    if kernel.grid:
        total = max(total, math.prod(evaluate(g, env) for g in kernel.grid))
    return total


def size_sample(kernel: Kernel, seed: int = 0) -> list[dict[str, int]]:
    """Admissible sizes to run the kernel at (deduplicated, small first)."""
    dims = kernel_dims(kernel)
    rng = random.Random(seed)
    envs: list[dict[str, int]] = []

    def add(env: dict[str, int]) -> None:
        if env not in envs and callable_at(kernel, env) is None:
            if _elements(kernel, env) <= MAX_ELEMENTS:
                envs.append(env)

    for want in (*CANDIDATES, "min"):
        env = {}
        for d in dims:
            v = d.min if want == "min" else _snap(d, want)
            env[d.name] = (
                v if v is not None else (d.max // (d.multiple_of or 1)) * (d.multiple_of or 1)
            )
        add(env)
    for d in dims:  # each dim on its own at its minimum, 0 and large; the others at 3
        for want in (d.min, 0, 1, LARGE):
            env = {e.name: _snap(e, 3) or e.min for e in dims}
            v = _snap(d, want)
            if v is not None:
                env[d.name] = v
                add(env)
    for _ in range(6):  # mixtures
        env = {}
        for d in dims:
            v = _snap(d, rng.choice(CANDIDATES))
            env[d.name] = v if v is not None else d.min
        add(env)
    return envs


def edge_values(env: dict[str, int]) -> list[int]:
    """-1, 0, 1, and each dim's value and its neighbours: what an index loaded from memory
    must be to go out of bounds."""
    return sorted({-1, 0, 1, *(v + d for v in env.values() for d in (-1, 0, 1))})


def arguments(
    kernel: Kernel, env: dict[str, int], seed: int, edges: bool = False, fill: int | None = None
) -> dict[str, Any]:
    """Random arguments; with `edges`, integer tensors hold values drawn from `edge_values`;
    with `fill`, every integer tensor holds that one value."""
    args: dict[str, Any] = {}
    annotations = kernel.annotations()
    rng = random.Random(seed)
    around = [fill] if fill is not None else edge_values(env)
    edges = edges or fill is not None
    for k, name in enumerate(kernel.signature.parameters):
        ann = annotations.get(name)
        if isinstance(ann, TensorType):
            shape = tuple(evaluate(d, env) for d in ann.dims)
            t = rand(shape, dtype=ann.dtype, seed=seed + k)
            if ann.value_range is not None and 0 not in shape:
                # a `Range(lo, hi)` input: values the call admits (edges clamped into it)
                lo, hi = (evaluate(b, env) for b in (ann.value_range.lo, ann.value_range.hi))
                values = [
                    min(max(rng.choice(around), lo), hi - 1) if edges else rng.randrange(lo, hi)
                    for _ in range(math.prod(shape))
                ]
                t = tensor(_nest(values, shape), dtype=ann.dtype)
            elif edges and ann.dtype.name in ("int32", "uint32") and 0 not in shape:
                values = [rng.choice(around) for _ in range(math.prod(shape))]
                if ann.dtype.name == "uint32":
                    values = [v % 2**32 for v in values]
                t = tensor(_nest(values, shape), dtype=ann.dtype)
            args[name] = t.to("gpu")
        elif ann is int:
            args[name] = 2
        else:
            args[name] = 0.5
    return args


def _nest(values: list, shape: tuple[int, ...]) -> Any:
    if not shape:
        return values[0]
    step = math.prod(shape[1:])
    if len(shape) == 1:
        return values
    return [_nest(values[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])]


def run_shim(
    kernel: Kernel,
    env: dict[str, int],
    seed: int = 0,
    edges: bool = False,
    fill: int | None = None,
) -> tuple[str, str]:
    """("ok" | "mimir" | "bare", code or exception text)."""
    try:
        args = arguments(kernel, env, seed, edges, fill)
    except MimirError as err:  # the random inputs themselves cannot be built
        return "bare", f"building arguments raised [{err.code}] {err}"
    try:
        kernel(**args)
    except MimirError as err:
        return "mimir", err.code
    except RecursionError:
        return "bare", "RecursionError"
    except Exception as err:  # noqa: BLE001 - a bare exception is a finding
        frame = traceback.extract_tb(err.__traceback__)[-1]
        where = f"{Path(frame.filename).name}:{frame.lineno}"
        return "bare", f"{type(err).__name__}: {err} (at {where})"
    return "ok", ""


def _show(env: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in env.items()) or "-"


def judge(source: str, workdir: Path, seed: int = 0, check: Any = None) -> Judgement:
    """Check `source` and run it under the shim; the findings, classified.

    `check(path, text)` stands in for `mimir.check.check_source` (tests of the oracle).
    """
    import time

    from mimir.check import check_source

    check_source = check or check_source
    j = Judgement()
    path = write_case(source, workdir)
    j.path = path
    start = time.perf_counter()
    try:
        result = check_source(str(path), source)
    except Exception as err:  # noqa: BLE001 - a crash is a finding
        j.findings.append(Finding(CRASH, f"check_source raised {type(err).__name__}: {err}"))
        return j
    j.check_seconds = time.perf_counter() - start
    diags = [d for d in result.diagnostics if d.severity == "error"]
    j.codes = [d.code for d in diags]
    try:
        kernel = import_kernel(path)
    except MimirError as err:
        j.shim["import"] = err.code
        if not j.codes:
            j.findings.append(Finding(FALSE_PROOF, f"importing raised [{err.code}] {err}"))
        elif err.code not in j.codes:
            j.findings.append(Finding(CODE, f"checker {j.codes}, importing raised {err.code}"))
        return j
    except Exception as err:  # noqa: BLE001
        j.findings.append(Finding(BARE, f"importing raised {type(err).__name__}: {err}"))
        return j
    names = {d.name for d in kernel_dims(kernel)}
    cex_diag = next((d for d in diags if d.counterexample), None)
    if cex_diag is not None:
        j.counterexample = {k: v for k, v in cex_diag.counterexample if k in names}
    envs = size_sample(kernel, seed)
    j.sizes = envs
    outcomes: dict[str, tuple[str, str]] = {}
    for env in envs:
        outcomes[_show(env)] = run_shim(kernel, env, seed)
        if kernel.grid is not None and outcomes[_show(env)][0] == "ok":
            for extra in range(DATA_RETRIES):  # loaded indices at the edges of the sizes
                outcome = run_shim(kernel, env, seed + 1000 * extra, edges=True)
                if outcome[0] != "ok":
                    outcomes[_show(env)] = outcome
                    break
    cex_outcome = None
    if j.counterexample is not None:
        env = {d.name: j.counterexample.get(d.name) for d in kernel_dims(kernel)}
        if None in env.values():  # a dim the counterexample leaves free: any admissible size
            for d in kernel_dims(kernel):
                if env[d.name] is None:
                    env[d.name] = _snap(d, 3) or d.min
        why = callable_at(kernel, env)
        if why is not None:
            j.findings.append(
                Finding(CEX, f"counterexample {_show(j.counterexample)} is not a call: {why}")
            )
        else:
            # An index-level counterexample may also need particular loaded values: try
            # a few inputs before calling it irreproducible.
            for extra in range(2 * DATA_RETRIES):
                cex_outcome = run_shim(kernel, env, seed + 1000 * extra, edges=extra % 2 == 1)
                if cex_outcome[0] != "ok" or kernel.grid is None:
                    break
            if cex_outcome[0] == "ok" and kernel.grid is not None:
                # Random draws can miss the one loaded value that fails (`y == C` behind
                # `y < C + 1` at N=1): also fill every integer input with each edge value.
                for value in edge_values(env):
                    cex_outcome = run_shim(kernel, env, seed, fill=value)
                    if cex_outcome[0] != "ok":
                        break
            outcomes[f"counterexample {_show(env)}"] = cex_outcome
    j.shim = {k: (v[0] if v[0] != "mimir" else v[1]) for k, v in outcomes.items()}
    for at, (kind, what) in outcomes.items():
        if kind == "bare":
            j.findings.append(Finding(BARE, f"at {at}: {what}"))
            break
    failing = {at: what for at, (kind, what) in outcomes.items() if kind == "mimir"}
    if not j.codes:
        if failing:
            at, code = next(iter(failing.items()))
            j.findings.append(Finding(FALSE_PROOF, f"checker clean; shim raised {code} at {at}"))
        j.clean = not failing and not any(k == "bare" for k, _ in outcomes.values())
        return j
    if not failing and not any(k == "bare" for k, _ in outcomes.values()):
        only_unproven = set(j.codes) == {UNPROVEN_CODE}
        klass = UNPROVEN if only_unproven else FALSE_ALARM
        messages = "; ".join(f"{d.code} {d.message}" for d in diags)[:400]
        j.findings = [f for f in j.findings if f.klass != CEX]
        j.findings.append(Finding(klass, f"shim clean at {len(outcomes)} sizes; {messages}"))
        return j
    if cex_outcome is not None and cex_outcome[0] == "ok" and failing:
        at = next(iter(failing))
        j.findings.append(
            Finding(CEX, f"shim clean at the counterexample, fails at {at} ({failing[at]})")
        )
    known = set(j.codes)
    if UNPROVEN_CODE not in known:
        other = {at: code for at, code in failing.items() if code not in known}
        if cex_outcome is not None and cex_outcome[0] == "mimir" and cex_outcome[1] not in known:
            j.findings.append(
                Finding(
                    CODE, f"checker {sorted(known)}; shim {cex_outcome[1]} at the counterexample"
                )
            )
        elif other and cex_outcome is None and not set(failing.values()) & known:
            # Without a counterexample, a kernel may fail at different sizes for different
            # reasons; only a shim that never raises the checker's code disagrees.
            at, code = next(iter(other.items()))
            j.findings.append(Finding(CODE, f"checker {sorted(known)}; shim {code} at {at}"))
    return j
