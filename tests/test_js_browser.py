"""The JavaScript host (js/) in a real browser, and the browser demo (examples/web/).

Headless Chromium (the system's `chromium`, driven by npm `playwright-core`) with
`--enable-unsafe-webgpu --enable-features=Vulkan` runs WebGPU on SwiftShader where there is no
GPU. js/test/browser.mjs serves the repository over http://127.0.0.1 (a secure context, which
WebGPU needs); the host fetches manifests and kernels by URL, as a web page would.

The demo's screenshot is kept in tests/artifacts/web-demo.png (gitignored).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from jshost import JS, REPO, chromium, compile_wgsl, from_json_number, require_node_package

from mimir.runtime.verify import (
    choose_dims,
    default_scalars,
    mismatches,
    random_inputs,
    shim_reference,
)

KERNELS = REPO / "tests" / "kernels"
WEB = REPO / "examples" / "web"
ARTIFACTS = REPO / "tests" / "artifacts"
CASES = [
    ("mlp.py", "mlp", [37, 16]),
    ("attention.py", "attention", [19, 8]),
    ("combos.py", "unsigned_and_ints", [29]),
    ("combos.py", "bool_reductions", [7, 9]),
    ("index_level.py", "row_stats", [9, 13]),
]


def browser(*args: str, flags: str | None = None) -> Any:
    node = require_node_package("playwright-core")
    exe = chromium()
    env = {**os.environ, "CHROMIUM": exe, "XDG_RUNTIME_DIR": "/tmp"}
    if flags is not None:
        env["MIMIR_CHROMIUM_FLAGS"] = flags
    proc = subprocess.run(
        [node, str(JS / "test" / "browser.mjs"), *args],
        cwd=JS,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    tail = f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    assert proc.returncode == 0, f"browser.mjs failed:\n{tail}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _abs_url(path: Path) -> str:
    return "/_abs" + str(path.resolve())


def test_host_runs_kernels_in_chromium(tmp_path: Path) -> None:
    jobs, expected = [], []
    for file, function, targets in CASES:
        manifest_path = compile_wgsl(KERNELS / file, function, tmp_path / function)
        manifest = json.loads(manifest_path.read_text())
        dims = choose_dims(manifest, targets)
        scalars = default_scalars(manifest, dims)
        inputs = random_inputs(manifest, dims, seed=3)
        dtypes = {b["name"]: b["dtype"] for b in manifest["buffers"]}
        expected.append((dtypes, shim_reference(KERNELS / file, function, inputs, dims, scalars)))
        jobs.append(
            {
                "manifest": _abs_url(manifest_path),
                "inputs": {
                    k: [int(v) for v in vs] if dtypes[k] == "bool_" else vs
                    for k, vs in inputs.items()
                },
                "sizes": {**dims, **scalars},
                "typed": True,
            }
        )
    (tmp_path / "jobs.json").write_text(json.dumps({"jobs": jobs}))
    answer = browser("jobs", str(REPO), _abs_url(tmp_path / "jobs.json"))
    assert answer["adapter"]["vendor"], answer
    for (file, function, _), (dtypes, reference), result in zip(
        CASES, expected, answer["results"], strict=True
    ):
        assert "error" not in result, (function, result, answer["console"])
        assert set(result["outputs"]) == set(reference), function
        for name, want in reference.items():
            got = [from_json_number(v) for v in result["outputs"][name]]
            assert not mismatches(got, want, dtypes[name]), (file, function, name)


def test_demo_files_are_up_to_date(tmp_path: Path) -> None:
    """examples/web/kernels is what `mimir compile-gpu` writes today, and data.json what
    make_data.py writes."""
    fresh = tmp_path / "kernels"
    compile_wgsl(WEB.relative_to(REPO) / "model.py", "classify", fresh)
    committed = WEB / "kernels"
    names = sorted(p.name for p in fresh.iterdir())
    assert names == sorted(p.name for p in committed.iterdir())
    for name in names:
        text = (fresh / name).read_text()
        # The manifest records the source path as given; compile from the repo root.
        assert text == (committed / name).read_text(), (
            f"examples/web/kernels/{name} is stale: run `python -m mimir compile-gpu "
            "examples/web/model.py --backend wgsl -o examples/web/kernels` from the repo root"
        )
    proc = subprocess.run(
        [sys.executable, str(WEB / "make_data.py"), "--check"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr


def test_web_demo_runs_in_chromium_and_matches_the_shim() -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "web-demo.png"
    shot.unlink(missing_ok=True)
    result = browser("page", str(REPO), "/examples/web/index.html", str(shot))
    assert result["state"] == "done", (result.get("error"), result["console"])
    data = json.loads((WEB / "data.json").read_text())
    expected = shim_reference(WEB / "model.py", "classify", data["inputs"], data["dims"])["out"]
    assert not mismatches(result["probs"], expected, "float32")
    assert result["predictions"] == data["labels"]  # the model is meant to be right
    assert [k["entryPoint"] for k in result["kernels"]] == [
        "classify_0_matmul",
        "classify_1_narrow",  # the 10 classes and their softmax: 8 threads a row
    ]
    assert all(k["ms"] >= 0 for k in result["kernels"])
    assert shot.is_file() and shot.stat().st_size > 10_000
    # A PNG of the full page, at least the viewport's width.
    header = shot.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(header[16:20], "big") >= 1000


def test_web_demo_says_how_to_turn_webgpu_on_when_it_is_off() -> None:
    """Chromium without the WebGPU flags has no adapter: the page shows how to enable it,
    not only the error."""
    result = browser("page", str(REPO), "/examples/web/index.html", flags=" ")
    assert result["state"] == "error", result
    assert result["error"].startswith("ManifestError: WebGPU found no adapter")
    assert "chrome://flags/#enable-unsafe-webgpu" in result["error"]
    assert result["help"] is True


def test_the_docs_count_the_demo_kernels_the_page_runs() -> None:
    manifest = json.loads((WEB / "kernels" / "classify.manifest.json").read_text())
    page = (REPO / "docs" / "hosts-js.md").read_text()
    words = {1: "one", 2: "two", 3: "three", 4: "four"}
    count = len(manifest["kernels"])
    assert f"{words[count]} kernel launches" in page
    assert not [n for n in words.values() if n != words[count] and f"{n} kernels" in page]
