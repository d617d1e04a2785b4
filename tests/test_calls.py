"""Calls inside kernels: inlined by the graph builder, so checked per call and compiled inline.

The fixture tests/fixtures/check/calls.py holds the per-line expectations; these
tests cover what a fixture cannot: recursion and arity (Python itself fails them),
a helper imported from another module, and the emitted kernels run against the shim.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import weakref
from pathlib import Path

from harness import require_tool

from mimir.check import check_source
from mimir.codegen import compile_source

PRELUDE = 'from mimir.array import Dim, Tensor, float32, gpu\n\nN = Dim("N")\n\n\n'


def _codes(text: str, path: str = "k.py") -> list[tuple[int, str]]:
    return [(d.span.line, d.code) for d in check_source(path, PRELUDE + text).diagnostics]


def test_recursion_is_refused_at_the_recursive_call() -> None:
    text = (
        "def forever(t):\n    return forever(t)\n\n\n"
        "@gpu\ndef k(x: Tensor[float32, N]) -> Tensor[float32, N]:\n    return forever(x)\n"
    )
    assert _codes(text) == [(7, "GPU031")]


def test_arguments_must_bind_the_parameters() -> None:
    text = (
        "def add(a, b):\n    return a + b\n\n\n"
        "@gpu\ndef k(x: Tensor[float32, N]) -> Tensor[float32, N]:\n    return add(x)\n"
    )
    assert _codes(text) == [(12, "GPU036")]


def test_an_index_level_kernel_is_not_callable() -> None:
    text = (
        "@gpu(grid=(N,))\ndef fill(out: Tensor[float32, N]) -> None:\n"
        "    i = program_id(0)\n    out[i] = 1.0\n\n\n"
        "@gpu\ndef k(x: Tensor[float32, N]) -> Tensor[float32, N]:\n    return fill(x)\n"
    )
    text = text.replace("@gpu(grid", "from mimir.array import program_id\n\n\n@gpu(grid", 1)
    assert [c for _, c in _codes(text)] == ["GPU030"]


def test_a_failure_in_an_imported_helper_points_into_its_module(tmp_path: Path) -> None:
    (tmp_path / "helpers.py").write_text("def project(a, b):\n    return a @ b\n")
    main = tmp_path / "main.py"
    text = PRELUDE.replace("\n\nN =", "\nfrom helpers import project\n\nN =") + (
        "@gpu\ndef k(x: Tensor[float32, N, 4], w: Tensor[float32, 3, 2]) -> "
        "Tensor[float32, N, 2]:\n    return project(x, w)\n"
    )
    main.write_text(text)
    (d,) = check_source(str(main), text).diagnostics
    assert d.code == "GPU011"
    assert d.span.path == str(tmp_path / "helpers.py") and d.span.line == 2
    call = d.labels[-1]
    assert call.span.path == str(main) and "in this call of `project`" in call.message
    assert d.function == "k"


def test_a_helper_edit_reproves_its_callers_in_the_kernel_cache() -> None:
    cache: dict = {}
    ok = "def twice(t):\n    return t * 2.0\n\n\n"
    bad = "def twice(t):\n    return t @ t\n\n\n"
    kernel = (
        "@gpu\ndef k(x: Tensor[float32, N, 3]) -> Tensor[float32, N, 3]:\n    return twice(x)\n"
    )
    assert check_source("k.py", PRELUDE + ok + kernel, kernel_cache=cache).diagnostics == []
    found = check_source("k.py", PRELUDE + bad + kernel, kernel_cache=cache).diagnostics
    assert [d.code for d in found] == ["GPU011"]


def test_a_cached_kernel_reads_the_module_of_the_check_that_hits_it() -> None:
    """A language server's cache outlives each version of the file: an entry holding the
    module it was proven in (its whole tree) kept one copy of the file alive per edit."""
    cache: dict = {}
    first = "@gpu\ndef k(x: Tensor[float32, N, 3]) -> Tensor[float32, N, 3]:\n    return x * 2.0\n"
    second = first.replace("def k(", "def j(").replace("2.0", "3.0")
    old = check_source("k.py", PRELUDE + first + "\n\n" + second, kernel_cache=cache)
    tree = weakref.ref(old.info.tree)
    edited = PRELUDE + first + "\n\n" + second.replace("3.0", "4.0")
    new = check_source("k.py", edited, kernel_cache=cache)
    del old
    gc.collect()
    assert tree() is None  # the cached `k` no longer holds the first version's tree
    assert [k.info for k in new.kernels] == [new.info, new.info]  # `k` came from the cache
    assert len(cache) == 3


CALLS = Path(__file__).resolve().parent / "fixtures" / "check" / "calls.py"


def test_inlined_calls_compile_for_every_backend() -> None:
    text = CALLS.read_text()
    for name in ("scale", "center_rows", "center_cols", "scale_twice", "projected"):
        result = compile_source(str(CALLS), text, ["all"], function=name)
        assert result.ok, (name, [d.message for d in result.diagnostics])


def test_inlined_calls_run_like_the_shim(tmp_path: Path) -> None:
    require_tool("wgpu")
    source = CALLS.read_text()
    # Only the kernels that check clean: cut the file before the first failing one.
    path = tmp_path / "calls_ok.py"
    path.write_text(source[: source.index("@gpu\ndef mismatched")])
    proc = subprocess.run(
        [sys.executable, "-m", "mimir", "verify", str(path)],
        capture_output=True,
        text=True,
        env={**os.environ, "XDG_RUNTIME_DIR": os.environ.get("XDG_RUNTIME_DIR", "/tmp")},
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1] == "verified 5 functions: all outputs match"


def test_the_callee_module_s_suppressions_apply_to_failures_inside_it(tmp_path: Path) -> None:
    helpers = tmp_path / "helpers.py"
    helpers.write_text("def project(a, b):\n    return a @ b  # mimir: ignore[GPU011]\n")
    main = tmp_path / "main.py"
    text = PRELUDE.replace("\n\nN =", "\nfrom helpers import project\n\nN =") + (
        "@gpu\ndef k(x: Tensor[float32, N, 4], w: Tensor[float32, 3, 2]) -> "
        "Tensor[float32, N, 2]:\n    return project(x, w)  # mimir: ignore[GPU015]\n"
    )
    found = check_source(str(main), text).diagnostics
    # the helper's comment suppresses its failure; main.py's own comment is unused there
    assert [(d.code, Path(d.span.path).name) for d in found] == [("GPU090", "main.py")]


def test_verify_runs_a_kernel_calling_a_helper_from_another_module(tmp_path: Path) -> None:
    require_tool("wgpu")
    (tmp_path / "helpers.py").write_text(
        "def center(t):\n    return t - t.mean(axis=-1, keepdims=True)\n"
    )
    main = tmp_path / "main.py"
    main.write_text(
        PRELUDE.replace("\n\nN =", "\nfrom helpers import center\n\nN =")
        + "@gpu\ndef k(x: Tensor[float32, N, 16]) -> Tensor[float32, N, 16]:\n"
        "    return center(x) * 2.0\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "mimir", "verify", str(main)],
        capture_output=True,
        text=True,
        env={**os.environ, "XDG_RUNTIME_DIR": os.environ.get("XDG_RUNTIME_DIR", "/tmp")},
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1] == "verified 1 function: all outputs match"
