"""One hostile-manifest corpus through every host: each refuses each case with the same code,
naming the same field, and never crashes, hangs, writes outside its folder or runs.

The corpus is tests/hostile_corpus.py (the contract of docs/hosts.md broken one rule at a
time, plus fuzzer findings from tests/data/hostile/). The hosts: `mimir.runtime.load` on WGSL
(wgpu, lavapipe here) and on PTX (refusals come before any CUDA call, so they need no GPU), the
JavaScript host in Node on Dawn, and the C hosts built with AddressSanitizer and UBSan, so a
read or write out of bounds, an overflow or a leak in the host's own code fails the case.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from harness import cuda_include, require, require_tool
from hostile_corpus import ALL, OUTPUT_ELEMENTS, Case, host_args, input_counts, write_case
from jshost import dawn_env, run_node

from mimir.runtime import load
from mimir.runtime.errors import CODES, ManifestError

SANITIZE = (
    "-O1 -g -std=c11 -Wall -Wextra -Werror -D_POSIX_C_SOURCE=200809L "
    "-fsanitize=address,undefined -fno-sanitize-recover=all"
)
# `[MAN004] kernels[0].file: why` (C hosts' stderr); the field is absent for MAN001 and GPU codes
_REFUSAL = re.compile(r"error: \[(?P<code>[A-Z]+\d{3})\] (?:(?P<field>[A-Za-z_(][\w.\[\]()]*): )?")


def _ids(cases: list[Case]) -> list[str]:
    return [c.name for c in cases]


def _for(host: str) -> list[Case]:
    """The cases that apply to `host` (a few device limits are not every host's)."""
    return [c for c in ALL if host in c.hosts]


def _expect(case: Case, host: str, result: dict[str, Any]) -> None:
    """`result`: {"code", "field"} for a refusal, {"ran": ...} for a run."""
    if case.code is None:
        assert "ran" in result, result
        return
    assert result.get("code") == case.code, result
    if case.code.startswith("MAN"):
        assert result.get("field") == case.field, result
    if case.says is not None:
        assert case.says in result["message"], result


def test_every_code_is_in_the_corpus() -> None:
    assert {c.code for c in ALL if c.code and c.code.startswith("MAN")} == set(CODES)


# ---------------------------------------------------------------- Python: load()


def _call_python(case: Case, backend: str, root: Path) -> dict[str, Any]:
    path = write_case(case, backend, root)
    arrays = {
        "x": np.zeros(
            (input_counts(case)["x"],) if case.short_input else (case.dims["N"], 20), "f4"
        ),
        "w": np.zeros((20, 33), "f4"),
        "b": np.zeros((33,), "f4"),
    }
    try:
        kernels = load(path.parent, backend=backend)
        out = kernels.linear_relu(**arrays, dims=case.dims)
    except ManifestError as err:
        return {"code": err.code, "field": err.field, "message": str(err)}
    return {"ran": {"out": int(np.asarray(out).size)}}


@pytest.mark.parametrize("case", _for("python-wgsl"), ids=_ids(_for("python-wgsl")))
def test_python_host_on_wgsl(case: Case, tmp_path: Path) -> None:
    require_tool("wgpu")
    result = _call_python(case, "wgsl", tmp_path)
    _expect(case, "python-wgsl", result)
    if "ran" in result:
        assert result["ran"]["out"] == case.dims["N"] * 33


_PTX_REFUSALS = [c for c in _for("python-ptx") if c.code is not None]


@pytest.mark.parametrize("case", _PTX_REFUSALS, ids=_ids(_PTX_REFUSALS))
def test_python_host_on_ptx(case: Case, tmp_path: Path) -> None:
    """The CUDA engine's refusals: every one comes before the driver is touched."""
    _expect(case, "python-ptx", _call_python(case, "ptx", tmp_path))


# ---------------------------------------------------------------- JavaScript


@functools.cache
def _js_results(root: Path) -> dict[str, dict[str, Any]]:
    cases = []
    for case in ALL:
        path = write_case(case, "wgsl", root)
        cases.append(
            {
                "name": case.name,
                "manifest": str(path),
                "inputs": input_counts(case),
                "sizes": case.dims,
            }
        )
    spec = root / "cases.json"
    spec.write_text(json.dumps({"cases": cases}))
    return run_node("corpus.mjs", str(spec), env=dawn_env())["results"]


@pytest.fixture(scope="module")
def js_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    return _js_results(tmp_path_factory.mktemp("js-corpus"))


@pytest.mark.parametrize("case", _for("js"), ids=_ids(_for("js")))
def test_js_host(case: Case, js_results: dict[str, dict[str, Any]]) -> None:
    result = js_results[case.name]
    assert "error" not in result, result  # anything but a ManifestError is a crash
    _expect(case, "js", result)
    if "ran" in result:
        assert result["ran"] == {"out": OUTPUT_ELEMENTS}


# ---------------------------------------------------------------- C hosts


@functools.cache
def _sanitized(target: str, build: Path) -> Path:
    cc = next((c for c in (os.environ.get("CC"), "cc", "gcc") if c and shutil.which(c)), None)
    require(cc is not None, "no C compiler with AddressSanitizer (apt-get install gcc)")
    extra = {}
    if target == "cuda":
        include = cuda_include()
        require(include is not None, "no CUDA headers (cuda.h): install the test extra")
        extra["CUDA_INCLUDE"] = str(include)
    else:
        require(Path("/usr/include/vulkan/vulkan.h").exists(), "no Vulkan headers (libvulkan-dev)")
    result = subprocess.run(
        ["make", "-s", "-C", str(Path(__file__).parent.parent / "examples" / "hosts" / target),
         f"OUT={build}", f"CC={cc}", f"CFLAGS={SANITIZE}", *(f"{k}={v}" for k, v in extra.items())],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return build / f"mimir-{target}"


def _run_c(host: Path, case: Case, backend: str, root: Path) -> dict[str, Any]:
    path = write_case(case, backend, root / "cases")
    output = root / "results" / "deeper"
    output.mkdir(parents=True)
    env = {
        **os.environ,
        "XDG_RUNTIME_DIR": os.environ.get("XDG_RUNTIME_DIR", "/tmp"),
        # the Vulkan driver leaks on its own; the host's reads, writes and UB still fail the run
        "ASAN_OPTIONS": "detect_leaks=0",
        "UBSAN_OPTIONS": "print_stacktrace=1",
    }
    run = subprocess.run(
        [str(host), *host_args(case, path, output)], capture_output=True, text=True, env=env,
        timeout=120,
    )  # fmt: skip
    report = run.stderr
    assert "Sanitizer" not in report and "runtime error" not in report, report[-4000:]
    # nothing is ever written outside -o: not above it, not beside the case
    written = sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file())
    allowed = {"cases", "results"}
    assert all(p.parts[0] in allowed for p in written), written
    assert all(
        p.parts[:3] == ("results", "deeper", p.name) or p.parts[0] == "cases" for p in written
    )
    if run.returncode == 0:
        return {"ran": {p.stem: p.stat().st_size for p in output.iterdir()}}
    if run.returncode == 3:
        return {"no-device": report}
    found = _REFUSAL.search(report)
    assert run.returncode == 2 and found, (run.returncode, report[-2000:])
    return {"code": found["code"], "field": found["field"], "message": report}


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sanitized-hosts")


@pytest.mark.parametrize("case", _for("vulkan"), ids=_ids(_for("vulkan")))
def test_vulkan_host(case: Case, build: Path, tmp_path: Path) -> None:
    require_tool("wgpu")  # the same Vulkan driver (lavapipe here) runs the C host
    result = _run_c(_sanitized("vulkan", build), case, "spirv", tmp_path)
    _expect(case, "vulkan", result)
    if "ran" in result:
        assert result["ran"] == {"out": 4 * OUTPUT_ELEMENTS}


@pytest.mark.parametrize("case", _for("cuda"), ids=_ids(_for("cuda")))
def test_cuda_host(case: Case, build: Path, tmp_path: Path) -> None:
    """Every refusal comes before the driver is opened, so it is checked on any machine; a case
    that must run needs a CUDA device (exit status 3 without one)."""
    result = _run_c(_sanitized("cuda", build), case, "ptx", tmp_path)
    if "no-device" in result:
        assert case.code is None, result  # every refusal comes before the driver is opened
        return
    _expect(case, "cuda", result)
