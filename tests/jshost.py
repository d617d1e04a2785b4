"""Shared pieces of the JavaScript host tests: finding node, Dawn's adapter, compiling kernels.

The JS host (`js/`) runs in Node on Dawn (the `webgpu` npm package) and in headless Chromium
(`playwright-core` driving the system's `chromium`). `.ci/run` runs `npm ci` in js/; locally
the tests skip until it has been run once, and under CI=true anything missing fails.

Dawn asks the Vulkan loader for an adapter. It refuses the lavapipe of Mesa 22 (Debian 12:
"Vulkan shaderUniform*ArrayDynamicIndexing required"), so when the default ICDs give no
adapter the Node tests use the SwiftShader Vulkan ICD that Chromium ships
(`/usr/lib/chromium/vk_swiftshader_icd.json`) — the same software rasterizer the browser uses.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from harness import require

REPO = Path(__file__).resolve().parent.parent
JS = REPO / "js"
CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
SWIFTSHADER_ICDS = (
    "/usr/lib/chromium/vk_swiftshader_icd.json",
    "/usr/lib/chromium-browser/vk_swiftshader_icd.json",
)
NODE_TIMEOUT = 600


def require_node_package(name: str) -> str:
    """The path of node, after requiring it and js/node_modules/NAME (skip or CI failure)."""
    node = shutil.which("node")
    require(node is not None, "`node` is not on PATH (apt-get install nodejs npm)")
    assert node is not None
    require(
        (JS / "node_modules" / name / "package.json").is_file(),
        f"js/node_modules/{name} is missing: run `npm ci` in js/",
    )
    return node


def chromium() -> str:
    found = next((p for p in CHROMIUM_CANDIDATES if Path(p).is_file()), None)
    require(found is not None, "no chromium at /usr/bin/chromium (apt-get install chromium)")
    assert found is not None
    return found


def _base_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("XDG_RUNTIME_DIR", "/tmp")
    return env


_PROBE = """
import { create, globals } from 'webgpu';
Object.assign(globalThis, globals);
const a = await create([]).requestAdapter();
console.log(JSON.stringify(a ? {vendor: a.info.vendor, architecture: a.info.architecture} : null));
process.exit(0);
"""


@functools.cache
def dawn_env() -> dict[str, str]:
    """The environment under which Dawn in Node finds an adapter (see the module docstring)."""
    node = require_node_package("webgpu")
    candidates: list[dict[str, str]] = [_base_env()]
    for icd in SWIFTSHADER_ICDS:
        if Path(icd).is_file():
            candidates.append({**_base_env(), "VK_ICD_FILENAMES": icd})
    tried = []
    for env in candidates:
        proc = subprocess.run(
            [node, "--input-type=module", "-e", _PROBE],
            cwd=JS,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        lines = proc.stdout.strip().splitlines()
        if proc.returncode == 0 and lines and json.loads(lines[-1]) is not None:
            return env
        tried.append(env.get("VK_ICD_FILENAMES", "the default Vulkan ICDs"))
    require(False, f"Dawn (the `webgpu` npm package) found no adapter with {', '.join(tried)}")
    raise AssertionError("unreachable")


def run_node(script: str, *args: str, env: dict[str, str] | None = None) -> Any:
    """Run js/test/SCRIPT with node; its last stdout line parsed as JSON."""
    node = require_node_package("webgpu")
    proc = subprocess.run(
        [node, str(JS / "test" / script), *args],
        cwd=JS,
        env=env or _base_env(),
        capture_output=True,
        text=True,
        timeout=NODE_TIMEOUT,
    )
    assert proc.returncode == 0, f"node {script} failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def compile_wgsl(source: Path, function: str, out_dir: Path) -> Path:
    """Compile one function for WGSL into OUT_DIR (`mimir compile-gpu`); its manifest's path."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mimir",
            "compile-gpu",
            str(source),
            "--backend",
            "wgsl",
            "--function",
            function,
            "-o",
            str(out_dir),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    manifest = out_dir / f"{function}.manifest.json"
    assert manifest.is_file(), proc.stdout
    return manifest


def from_json_number(value: Any) -> Any:
    return (
        {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}.get(value, value)
        if isinstance(value, str)
        else value
    )
