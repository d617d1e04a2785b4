"""Time per call of a compiled kernel from each host on this machine, for the same inputs.

    python benchmarks/hosts.py [--repeat 10]

Columns, in milliseconds per call (median of `--repeat` after one warm-up):
- `run_manifest`: Mimir's test runner (`mimir.runtime.run_manifest`) with NumPy inputs:
  new buffers, pipelines and bind groups every call, outputs as lists;
- `load (numpy)`: `mimir.runtime.load` with NumPy arrays: pipelines and buffers kept,
  inputs written from the arrays' memory, outputs as arrays;
- `load (torch)`: the same with CPU torch tensors;
- `C vulkan`: `examples/hosts/vulkan/mimir-vulkan --repeat`: one submission of the
  recorded command buffer and a fence wait (no upload; outputs stay mapped);
- `C vulkan process`: the whole program once (device, pipelines, files), wall time.
All run on the adapter wgpu / the Vulkan loader finds (lavapipe on a machine without
a GPU), on the committed SPIR-V snapshots of tests/kernels/out/spirv.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "kernels" / "out" / "spirv"

CASES = [  # (folder, function, dims)
    ("linear", "linear_relu", {"N": 4096}),
    ("layernorm", "rmsnorm", {"N": 4096}),
    ("layernorm", "layernorm", {"N": 512, "D": 1024}),
    ("attention", "log_probs", {"B": 8, "T": 4096}),
    ("attention", "attention", {"T": 256, "D": 64}),
]


def _timed(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    import torch

    from mimir.runtime import load, run_manifest
    from mimir.runtime import manifest as mf
    from mimir.runtime.verify import default_scalars
    from mimir.runtime.wgpu_runner import adapter_description

    build = Path(tempfile.mkdtemp(prefix="mimir-hosts-bench-"))
    subprocess.run(
        ["make", "-s", "-C", str(ROOT / "examples" / "hosts" / "vulkan"), f"OUT={build}"],
        check=True,
    )
    host = build / "mimir-vulkan"
    print(f"adapter: {adapter_description()}")
    header = (
        f"{'kernel':<14} {'dims':<16} {'run_manifest':>12} {'load (numpy)':>12} "
        f"{'load (torch)':>12} {'C vulkan':>9} {'C vulkan process':>16}"
    )
    print(header)
    rng = np.random.default_rng(0)
    for folder, function, dims in CASES:
        manifest = json.loads((OUT / folder / f"{function}.manifest.json").read_text())
        arrays = {}
        for buf in manifest["buffers"]:
            if buf["role"] == "input":
                shape = mf.buffer_shape(buf, dims)
                arrays[buf["name"]] = rng.uniform(-1, 1, shape).astype(np.float32)
        scalars = default_scalars(manifest, dims)
        kernel = load(OUT / folder)[function]
        tensors = {k: torch.from_numpy(v) for k, v in arrays.items()}
        fresh = _timed(
            functools.partial(run_manifest, manifest, OUT / folder, arrays, dims, scalars),
            args.repeat,
        )
        kept = _timed(functools.partial(kernel, **arrays, **scalars), args.repeat)
        kept_torch = _timed(functools.partial(kernel, **tensors, **scalars), args.repeat)
        files = []
        for name, value in arrays.items():
            path = build / f"{name}.bin"
            value.tofile(path)
            files.append(f"{name}=@{path}")
        command = [str(host), str(OUT / folder / f"{function}.manifest.json")]
        command += [f"{k}={v}" for k, v in {**dims, **scalars}.items()] + files
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        process = (time.perf_counter() - start) * 1e3
        timed = subprocess.run(
            [*command, "--repeat", str(args.repeat)], check=True, capture_output=True, text=True
        )
        per_run = float(re.search(r"([0-9.]+) ms per run", timed.stderr).group(1))
        sizes = ",".join(f"{k}={v}" for k, v in dims.items())
        print(
            f"{function:<14} {sizes:<16} {fresh:>12.2f} {kept:>12.2f} {kept_torch:>12.2f} "
            f"{per_run:>9.2f} {process:>16.1f}"
        )


if __name__ == "__main__":
    main()
