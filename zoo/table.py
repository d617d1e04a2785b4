"""The zoo's table: check, compile, validate and run every zoo kernel, then write zoo/README.md.

    python -m zoo.table            # run everything, time WGSL on the adapter, write zoo/README.md
    python -m zoo.table --check    # the same without timing; exit 1 when zoo/README.md is stale
    python -m zoo.table softmax    # only the kernels whose file or function names contain a word

For every `@gpu` function of `zoo/*.py` (a file is an entry; adding a kernel is adding a
file): check and compile it for each backend on its own (`compile_source`, so one backend's
refusal does not hide the others), feed every emitted file to the validator nobody here
wrote (naga, `spirv-val --target-env vulkan1.1`, `ptxas -arch=sm_80` and `sm_90`, clang++
against the test-only `metal_stdlib`; `fuzzing.backends`), then execute it on seeded random
inputs at every binding of `BINDINGS` and compare each output with the shim's, within the
dtype's tolerance: WGSL and SPIR-V on wgpu (Mesa lavapipe here), MSL as C++ on the CPU
(`harness.msl_runner`), PTX in the test interpreter (`harness.ptx_interp`).

A status cell is `ok` (valid, and equal to the shim at every binding; `ok (least sizes
only)` where the PTX interpreter's thread budget left the small sizes out), `refused GPUxxx`
(a coded refusal by that backend), `FAIL (...)` or `not run (no TOOL)`. Everything in the
table is a function of the sources and the compiler except the last column, the WGSL time
on the adapter at hand, which `--check` (and `tests/test_zoo.py`) leaves out of the
comparison: see `mask_measured`.

The validators and runners live with the tests (`tests/harness`, `tests/fuzzing`), and need
only the base install and the `gpu` extra (`pip install '.[gpu]'`); a backend whose tool
this machine lacks says `not run (no TOOL)`. Progress goes to stderr, one kernel at a time.
Each row is cached by everything it depends on (the kernel's source, Mimir's own code and
the test harness's, which tools exist, whether it is timed), under `$XDG_CACHE_HOME/mimir/
zoo`, so re-running after changing one kernel runs only that one (`--no-cache` runs all).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import functools
import hashlib
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ZOO = Path(__file__).resolve().parent
REPO = ZOO.parent
README = ZOO / "README.md"
NOT_KERNELS = {"__init__.py", "table.py"}

BACKENDS = ("wgsl", "spirv", "msl", "ptx")
TITLES = {"wgsl": "WGSL", "spirv": "SPIR-V", "msl": "MSL", "ptx": "PTX"}
REFUSALS = {"GPU070", "GPU071"}
# Dim targets, in declaration order (the last repeats): every dim at its least size, then
# small sizes that are not multiples of any workgroup or tile size and differ from each other.
BINDINGS: dict[str, Sequence[int]] = {"one": (1,), "small": (5, 7, 3, 11, 13, 2)}
# The PTX interpreter runs every GPU thread in Python: a binding that needs more is left
# out for PTX (the cell says which bindings ran), as in tests/test_ptx_exec.py.
PTX_THREAD_BUDGET = 8192
TIME_ELEMENTS = 1 << 18  # the WGSL timing: every dim at one size, no buffer above this
TIME_REPEAT = 5


@dataclass(frozen=True)
class Entry:
    """One `@gpu` function of a zoo file, as the file's text says (it is never imported here)."""

    path: Path
    function: str
    summary: str  # the module docstring's first paragraph
    waiting_for: str  # the file's WAITING_FOR: ops whose arrival should rewrite it, or ""

    @property
    def relative(self) -> str:
        return self.path.relative_to(REPO).as_posix()


@dataclass
class Row:
    entry: Entry
    launches: dict[str, int] = field(default_factory=dict)  # per backend that compiled
    status: dict[str, str] = field(default_factory=dict)
    details: list[str] = field(default_factory=list)  # why a status is not `ok`
    milliseconds: float | None = None
    timed_at: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(s.startswith(("ok", "refused")) for s in self.status.values())


# ---------------------------------------------------------------- the entries


def _is_gpu(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(target, ast.Name) and target.id == "gpu"


def read_entry(path: Path) -> list[Entry]:
    """The `@gpu` functions of one zoo file, with its summary and WAITING_FOR."""
    tree = ast.parse(path.read_text(), str(path))
    doc = (ast.get_docstring(tree) or "").strip()
    summary = " ".join(doc.split("\n\n")[0].split())
    waiting = ""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "WAITING_FOR" for t in node.targets
        ):
            waiting = ast.literal_eval(node.value)
    return [
        Entry(path, node.name, summary, waiting)
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and any(_is_gpu(d) for d in node.decorator_list)
    ]


def entries(words: Sequence[str] = ()) -> list[Entry]:
    found = []
    for path in sorted(ZOO.glob("*.py")):
        if path.name in NOT_KERNELS:
            continue
        for entry in read_entry(path):
            if not words or any(w in entry.function or w in path.stem for w in words):
                found.append(entry)
    return found


# ---------------------------------------------------------------- tools and runners


def _use_test_tools() -> None:
    tests = str(REPO / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)


def missing_tools() -> dict[str, str]:
    """backend -> the tool this machine lacks to validate or run it (absent when it has all)."""
    _use_test_tools()
    from fuzzing.backends import Tools

    missing: dict[str, str] = {}
    if not Tools.wgpu():
        missing["wgsl"] = missing["spirv"] = "wgpu"
    elif shutil.which("spirv-val") is None:
        missing["spirv"] = "spirv-val"
    if Tools.clang() is None:
        missing["msl"] = "clang++"
    if Tools.ptxas() is None:
        missing["ptx"] = "ptxas"
    return missing


def _runner(backend: str) -> Callable[..., dict[str, list]]:
    _use_test_tools()
    if backend in ("wgsl", "spirv"):
        from mimir.runtime.wgpu_runner import run_manifest

        return run_manifest
    if backend == "msl":
        from harness.msl_runner import run_msl_manifest

        return run_msl_manifest
    from harness.ptx_interp import run_ptx_manifest_cpu

    return run_ptx_manifest_cpu


def _write(folder: Path, files: Mapping[str, str | bytes]) -> None:
    from fuzzing.backends import write_files

    write_files(folder, dict(files))


def _ptx_threads(manifest: Mapping[str, Any], dims: Mapping[str, int]) -> int:
    from harness.ptx_interp import gpu_threads

    return gpu_threads(manifest, dims)


# ---------------------------------------------------------------- one entry


def _compile_all(entry: Entry, workdir: Path) -> dict[str, str]:
    """Compile for every backend, once: each backend's status so far (`ok` when it compiled).

    One `compile_source` call checks the file once for all four backends; only when it
    reports something is each backend compiled on its own, so that one backend's refusal
    does not hide the others.
    """
    from mimir.codegen import compile_source

    text = entry.path.read_text()
    result = compile_source(entry.relative, text, list(BACKENDS), entry.function)
    if result.ok:
        _write(workdir, result.files)
        return dict.fromkeys(BACKENDS, "ok")
    status = {}
    for backend in BACKENDS:
        one = compile_source(entry.relative, text, [backend], entry.function)
        if one.ok:
            _write(workdir / backend, one.files)
            status[backend] = "ok"
            continue
        codes = sorted({d.code for d in one.diagnostics})
        if codes and set(codes) <= REFUSALS:
            status[backend] = f"refused {'/'.join(codes)}"
        else:
            shown = "; ".join(f"{d.code} {d.message}" for d in one.diagnostics)
            status[backend] = f"FAIL (compile: {shown or one.usage_error})"
    return status


def _validate(folder: Path) -> str:
    """Feed every file of one backend to its validator.

    MSL is validated by the build of the runner's driver, which compiles each
    `.metal` file with clang++ against the same header (`harness.msl_runner`).
    """
    from fuzzing.backends import BackendReport, validate_file

    report = BackendReport()
    for path in sorted(folder.iterdir()):
        validate_file(path, report)
    if report.findings:
        return "FAIL (invalid: " + "; ".join(f.detail for f in report.findings) + ")"
    return "ok"


def _expected(entry: Entry, manifest: Mapping[str, Any], label: str, cache: dict) -> tuple:
    """(dims, inputs, scalars, the shim's outputs) at one binding, the same for every backend."""
    from mimir.runtime.verify import choose_dims, default_scalars, random_inputs, shim_reference

    if label not in cache:
        dims = choose_dims(manifest, BINDINGS[label])
        inputs = random_inputs(manifest, dims, seed=len(entry.function))
        scalars = default_scalars(manifest, dims)
        expected = shim_reference(entry.path, entry.function, inputs, dims, scalars)
        cache[label] = dims, inputs, scalars, expected
    return cache[label]


def _execute(
    entry: Entry, backend: str, folder: Path, manifest: Mapping[str, Any], cache: dict
) -> str:
    from mimir.runtime.manifest import RESULTS
    from mimir.runtime.verify import error_summary, mismatches

    run = _runner(backend)
    skipped = []
    for label in BINDINGS:
        dims, inputs, scalars, expected = _expected(entry, manifest, label, cache)
        if backend == "ptx" and _ptx_threads(manifest, dims) > PTX_THREAD_BUDGET:
            skipped.append(label)
            continue
        try:
            actual = run(manifest, folder, inputs, dims, scalars)
        except Exception as err:  # noqa: BLE001 - a kernel that cannot run is a failure
            return f"FAIL (run at {_show(dims)}: {type(err).__name__}: {str(err)[:400]})"
        for buf in manifest["buffers"]:
            if buf["role"] not in RESULTS:  # outputs, and `InOut` buffers after the launches
                continue
            got, want = actual[buf["name"]], expected[buf["name"]]
            bad = mismatches(got, want, buf["dtype"])
            if bad:
                abs_err, rel_err = error_summary(got, want)
                return (
                    f"FAIL (`{buf['name']}` differs from the shim at {len(bad)} of {len(want)} "
                    f"values at {_show(dims)}; max abs {abs_err:.3g}, rel {rel_err:.3g})"
                )
    return "ok" if not skipped else "ok (least sizes only)"


def timing_dims(manifest: Mapping[str, Any]) -> dict[str, int]:
    """Every dim at one size: the largest power of two up to 4096 at which no buffer holds
    more than TIME_ELEMENTS values (4096 bounds the quadratic kernels: histogram, scan)."""
    from mimir.runtime.verify import choose_dims, largest_buffer

    size = 1 << 12
    while size > 1:
        dims = choose_dims(manifest, (size,))
        if largest_buffer(manifest, dims) <= TIME_ELEMENTS:
            return dims
        size //= 2
    return choose_dims(manifest, (1,))


def _time(entry: Entry, folder: Path, manifest: Mapping[str, Any], row: Row) -> None:
    from mimir.runtime.verify import default_scalars, random_inputs
    from mimir.runtime.wgpu_runner import run_manifest

    dims = timing_dims(manifest)
    inputs = random_inputs(manifest, dims, seed=1)
    timings: list[float] = []
    run_manifest(
        manifest, folder, inputs, dims, default_scalars(manifest, dims), timings, TIME_REPEAT
    )
    row.milliseconds = statistics.median(timings) * 1e3
    row.timed_at = dims


def evaluate(entry: Entry, workdir: Path, missing: Mapping[str, str], time_it: bool = False) -> Row:
    """Check, compile, validate and run one entry on every backend."""
    _use_test_tools()
    row = Row(entry)
    cache: dict = {}
    folder = workdir / entry.function
    compiled = _compile_all(entry, folder)
    for backend in BACKENDS:
        status = compiled[backend]
        if backend in missing:
            status = f"not run (no {missing[backend]})"
        elif status == "ok":
            status = _validate(folder / backend)
        if status == "ok":
            path = folder / backend / f"{entry.function}.manifest.json"
            manifest = json.loads(path.read_text())
            row.launches[backend] = len(manifest["kernels"])
            status = _execute(entry, backend, folder / backend, manifest, cache)
            if status == "ok" and backend == "wgsl" and time_it:
                _time(entry, folder / backend, manifest, row)
        row.status[backend] = _cell(status)
        if status != row.status[backend]:
            row.details.append(f"{entry.function} on {TITLES[backend]}: {status}")
    return row


def _cell(status: str) -> str:
    """The table's form of a status: a failure's details go to `Row.details`."""
    return status.split(" (", 1)[0] if status.startswith("FAIL") else status


def _show(dims: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in dims.items()) or "no dims"


# ---------------------------------------------------------------- the README

_HEAD = """\
# The kernel zoo

Kernels people know, each one file of typed Python that `mimir check` proves
clean, that runs as plain Python through the shim (`python zoo/softmax.py`
prints a small example), and that compiles to WGSL, SPIR-V, MSL and PTX. The
table is written by `python -m zoo.table` (do not edit it by hand);
`tests/test_zoo.py` fails when it no longer matches what the compiler does.

Each status says that every emitted file passed its validator (naga;
`spirv-val --target-env vulkan1.1`; clang++ against the test-only
`metal_stdlib`; `ptxas -arch=sm_80` and `sm_90`) and that the kernel, run on
seeded random inputs with every dim at its least size and at small sizes
({small}), matched the shim within its dtype's tolerance: WGSL and SPIR-V on
wgpu (Mesa lavapipe), MSL as C++ on the CPU with one thread per GPU thread,
PTX in the test suite's PTX interpreter. *Launches* counts the kernels the
manifest runs in order (`1 (WGSL 2)`: two on WGSL, one on every other backend).
*Rewrite when* names the ops (not yet in the language) whose arrival should let
a kernel be written the natural way (each file's
`WAITING_FOR`); once such an op is in `mimir.array`, the cell says `landed:
rewrite` and this table is stale until regenerated.

"""

_MEASURED_NOTE = (
    "¹ Wall time of all launches (submit to completion, median of {repeat} after a "
    "warm-up), WGSL on `{adapter}`, every dim at the largest power of two up to 4,096 at "
    "which no buffer holds more than {elements} values (the sizes are in the cell; a size a "
    "dim does not admit is raised to one it does). Measured on the machine that last "
    "ran `python -m zoo.table`; the staleness test ignores this column."
)

_TAIL = """
## Running a zoo kernel

```sh
python zoo/softmax.py                         # the shim: plain Python, a small example
python -m mimir check zoo/softmax.py          # prove shapes, dtypes and bounds for every size
python -m mimir compile-gpu zoo/softmax.py --backend all -o out/softmax
python -m mimir verify zoo/softmax.py         # WGSL on your wgpu adapter against the shim
```

`out/softmax/<backend>/` then holds one file per launch (`.wgsl`, `.spv`,
`.metal`, `.ptx`) and `softmax.manifest.json`, all a host needs: the dims and
their constraints, the buffers and their shapes, the uniform block, and the
launches in order. From Python, with the `gpu` extra:

<!-- run: python -->
```python
import json
from mimir.runtime.wgpu_runner import run_manifest

manifest = json.load(open("out/softmax/wgsl/softmax.manifest.json"))
x = [0.5] * (3 * 4)  # flat, row-major, as the manifest's shape says
print(run_manifest(manifest, "out/softmax/wgsl", {"x": x}, {"N": 3, "C": 4}))
```

## Regenerating the table

`python -m zoo.table` needs the base install and the `gpu` extra (`pip install
'.[gpu]'`, plus spirv-val, clang++ and ptxas for those columns: a backend whose tool is
missing says `not run`). It shows its progress, and keeps each row in a cache under
`~/.cache/mimir/zoo` keyed by the kernel's source and Mimir's own code, so after an edit
only the changed kernels run again (`--no-cache` runs them all). Words choose kernels by
name and print their rows instead of writing the file:

```sh
python -m zoo.table softmax                   # the rows of softmax and log_softmax, printed
```

<!-- not run here: every kernel, minutes on a cold cache; tests/test_zoo.py checks the table -->
```sh
python -m zoo.table                           # every kernel: writes zoo/README.md
```

## Adding a kernel

Add one file, `zoo/NAME.py`: a module docstring whose first paragraph says
what it computes, one `@gpu` function, a small `if __name__ == "__main__":`
example, and, when it is written around an op the language lacks, a
`WAITING_FOR = "op, op"` line. Then run `python -m zoo.table` and commit the
new `zoo/README.md` with it.
"""


def landed(op: str) -> bool:
    """Whether an op a kernel waits for is in the language now (a name `mimir.array` exports,
    or a tensor method): the table then says so, and its file should be rewritten."""
    import mimir.array as ma

    return op in getattr(ma, "__all__", ()) or hasattr(ma.Tensor, op)


def _waiting(text: str) -> str:
    ops = [op.strip() for op in text.split(",") if op.strip()]
    return ", ".join(f"{op} (landed: rewrite)" if landed(op) else op for op in ops) or "–"


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def _launches(counts: dict[str, int]) -> str:
    """The count most backends have, then each other backend's: `1 (WGSL 2)`."""
    if not counts:
        return "–"
    values = [counts[b] for b in BACKENDS if b in counts]
    common = max(values, key=values.count)
    others = [f"{TITLES[b]} {n}" for b, n in counts.items() if n != common]
    return f"{common} ({', '.join(others)})" if others else str(common)


def render(rows: Sequence[Row], adapter: str | None) -> str:
    """zoo/README.md for these rows; times and the adapter only where they were measured."""
    small = ", ".join(str(n) for n in BINDINGS["small"])
    head = ["kernel", "file", "what", "launches", *(TITLES[b] for b in BACKENDS)]
    head += ["rewrite when", "WGSL ms¹"]
    lines = [_HEAD.format(small=small), "| " + " | ".join(head) + " |"]
    lines.append("|" + "|".join("---" for _ in head) + "|")
    for row in rows:
        e = row.entry
        time = "–"
        if row.milliseconds is not None:
            time = f"{row.milliseconds:.2f} ({_show(row.timed_at)})"
        cells = [
            f"`{e.function}`",
            f"[{e.path.name}]({e.path.name})",
            _md(e.summary),
            _launches(row.launches),
            *(row.status.get(b, "–") for b in BACKENDS),
            _md(_waiting(e.waiting_for)),
            time,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    note = _MEASURED_NOTE.format(
        repeat=TIME_REPEAT, adapter=adapter or "–", elements=f"{TIME_ELEMENTS:,}"
    )
    return "\n".join(lines) + "\n\n" + note + "\n" + _TAIL


_ROW = re.compile(r"^(\|.*\| )([^|]*)( \|)$")


def mask_measured(text: str) -> str:
    """The README without what is machine-dependent: each row's last cell and the note ¹."""
    out = []
    for line in text.splitlines():
        if line.startswith("¹ "):
            line = "¹ (measured)"
        elif line.startswith("| `"):
            line = _ROW.sub(r"\1…\3", line)
        out.append(line)
    return "\n".join(out)


# ---------------------------------------------------------------- the row cache


def cache_folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "mimir" / "zoo"


@functools.cache
def _harness_fingerprint() -> str:
    """Mimir's own code and the validators and runners the rows come from."""
    from mimir.gate.cache import tool_fingerprint

    h = hashlib.sha256(tool_fingerprint().encode())
    for folder in (REPO / "tests" / "harness", REPO / "tests" / "fuzzing", ZOO):
        for source in sorted(folder.rglob("*")):
            if source.suffix in (".py", ".h", ".c", ".cpp") and source.name != "README.md":
                h.update(source.relative_to(REPO).as_posix().encode() + b"\0")
                h.update(source.read_bytes())
    return h.hexdigest()


def row_key(entry: Entry, missing: Mapping[str, str], time_it: bool) -> str:
    parts = [
        _harness_fingerprint(),
        entry.relative,
        entry.function,
        entry.path.read_text(),
        json.dumps(sorted(missing.items())),
        str(time_it),
    ]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def _cached(key: str, entry: Entry) -> Row | None:
    try:
        data = json.loads((cache_folder() / f"{key}.json").read_text())
        return Row(
            entry,
            {b: int(n) for b, n in data["launches"].items()},
            {b: str(s) for b, s in data["status"].items()},
            [str(d) for d in data["details"]],
            None if data["milliseconds"] is None else float(data["milliseconds"]),
            {d: int(n) for d, n in data["timed_at"].items()},
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None  # absent, or not a row this code wrote: evaluate again


def _store(key: str, row: Row) -> None:
    data = {
        "launches": row.launches,
        "status": row.status,
        "details": row.details,
        "milliseconds": row.milliseconds,
        "timed_at": row.timed_at,
    }
    folder = cache_folder()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        part = folder / f"{key}.{os.getpid()}.tmp"
        part.write_text(json.dumps(data))
        part.replace(folder / f"{key}.json")
    except OSError:
        pass  # a cache that cannot be written only costs time


# ---------------------------------------------------------------- command line


def run_all(
    selected: Sequence[Entry],
    time_it: bool,
    log: Callable[[str], None] = lambda s: None,
    use_cache: bool = False,
    progress: Callable[[int, int, str], None] = lambda k, n, name: None,
) -> list[Row]:
    """Evaluate every entry (from the cache where `use_cache` and nothing it depends on has
    changed); `progress(k, n, name)` before each, `log` a line after each."""
    missing = missing_tools()
    rows = []
    with tempfile.TemporaryDirectory(prefix="mimir-zoo-") as tmp:
        for k, entry in enumerate(selected, start=1):
            progress(k - 1, len(selected), entry.function)
            key = row_key(entry, missing, time_it)
            row = _cached(key, entry) if use_cache else None
            cached = row is not None
            if row is None:
                row = evaluate(entry, Path(tmp), missing, time_it)
                if row.ok:
                    _store(key, row)
            shown = "  ".join(f"{TITLES[b]} {row.status[b]}" for b in BACKENDS)
            note = " (cached)" if cached else ""
            log(f"[{k}/{len(selected)}] {entry.function}{note}: {shown}")
            for detail in row.details:
                log(f"    {detail}")
            rows.append(row)
        progress(len(selected), len(selected), "")
    return rows


def _progress_bar() -> tuple[Any, Callable[[int, int, str], None]]:
    """A rich progress bar on stderr when it is a terminal, else nothing (the log lines)."""
    if not sys.stderr.isatty():
        return contextlib.nullcontext(), lambda k, n, name: None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(
        TextColumn("zoo"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        TextColumn("{task.description}"), console=Console(stderr=True), transient=True,
    )  # fmt: skip
    task = bar.add_task("", total=None)

    def update(k: int, n: int, name: str) -> None:
        bar.update(task, completed=k, total=n, description=name)

    return bar, update


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zoo.table", description=__doc__.split("\n")[0])
    parser.add_argument("words", nargs="*", help="only kernels whose file or function contain one")
    parser.add_argument(
        "--check", action="store_true", help="compare with zoo/README.md, no timing"
    )
    parser.add_argument(
        "--no-cache", action="store_true", help="evaluate every kernel, none from the cache"
    )
    args = parser.parse_args(argv)
    selected = entries(args.words)
    bar, progress = _progress_bar()
    with bar:
        log = bar.console.print if hasattr(bar, "console") else lambda s: print(s, file=sys.stderr)
        rows = run_all(
            selected, not args.check, log, use_cache=not args.no_cache, progress=progress
        )
    failed = [r for r in rows if not r.ok]
    adapter = None
    if not args.check:
        from mimir.runtime.wgpu_runner import adapter_description

        adapter = adapter_description()
    text = render(rows, adapter)
    if args.words:
        print(text)
    elif args.check:
        if mask_measured(text) != mask_measured(README.read_text()):
            print("zoo/README.md is stale: run `python -m zoo.table`", file=sys.stderr)
            return 1
    else:
        README.write_text(text)
        print(f"wrote {README.relative_to(REPO)} ({len(rows)} kernels)", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
