"""What each zoo kernel costs, without a GPU: launches, bytes against the ideal, PTX/SASS.

    python benchmarks/kernel_static.py [--zoo] [--dims N=65536,M=8] [--function NAME] [FILES...]

For every `@gpu` function of benchmarks/roofline_ops.py (the ops of issue 15's table),
of the kernel zoo with `--zoo` (tests/kernels/*.py), or of FILES:

- `launches`: kernels in the manifest (one schedule, so the same for every backend).
- bytes, measured by running the PTX in the test interpreter (tests/harness/ptx_interp.py)
  on random inputs, dims bound by `--dims` (`NAME=VALUE`, or target sizes in manifest
  order, the last repeating):
  `ideal` is every input read once plus every output written once; `dram` sums, per launch,
  the bytes at distinct global addresses (the traffic if a cache held a launch's data: what
  a second launch re-reads, or a scratch round trip, counts again); `issued` is every global
  load and store (a pass that re-reads the row from memory counts again). Both as x ideal.
  The IR is one for all four backends, so these figures hold for MSL, WGSL and SPIR-V too.
- `ptx/el`: PTX instructions issued (predicated-off included), all threads and launches,
  per element of the largest buffer, or per multiply-add for a matmul.
- from `ptxas -arch=sm_90 -v` per launch (the largest figures): registers, spill bytes,
  shared memory; from `cuobjdump -sass` of those cubins (PyPI `nvidia-cuda-cuobjdump` and
  `nvidia-cuda-nvdisasm`, the `bench` extra): SASS instructions in all launches' files
  (static, NOPs excluded; a dynamic SASS count per element needs a GPU profiler).
- `h200 us`, `m-series us`: a roofline estimate at `--scale` elements of the largest buffer:
  max(dram bytes / bandwidth, flops / peak) with H200 at 4.8 TB/s and 67 TFLOP/s fp32 and an
  Apple M-series Max at 400 GB/s and 14 TFLOP/s fp32.

Not here yet: Triton anchors (the same ops compiled offline for sm_90 with
`triton.compiler.ASTSource` and `GPUTarget("cuda", 90, 32)`). `triton` is not a declared
dependency (its wheel is several hundred MB); RECEIPTS.md quotes issue 15's figures.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ZOO = ROOT / "tests" / "kernels"
H200 = (4.8e12, 67e12)
MSERIES = (400e9, 14e12)
# roofline_ops.py's dims: 64K-element vectors, 8 rows of 1024 (1000 where the row is
# bounded), a 64x64x64 matmul; small enough for the interpreter
OPS_DIMS = "N=65536,M=8,D=1024,R=1000,I=64,J=64,K=64"


def _tool(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for base in sys.path:
        candidate = Path(base) / "nvidia" / "cu13" / "bin" / name
        if candidate.exists():
            return str(candidate)
    return None


def _functions(paths: list[Path], only: str | None) -> list[tuple[Path, str]]:
    sys.path.insert(0, str(ROOT / "tests"))
    from support import import_file, kernels_of

    out = []
    for path in paths:
        for name in kernels_of(import_file(path)):
            if only is None or name == only:
                out.append((path, name))
    return out


def ptxas_info(ptxas: str, ptx: Path, cubin: Path) -> dict[str, int]:
    proc = subprocess.run(
        [ptxas, "-arch=sm_90", "-v", str(ptx), "-o", str(cubin)],
        capture_output=True,
        text=True,
        check=True,
    )
    text = proc.stdout + proc.stderr

    def grab(pattern: str) -> int:
        return sum(int(m) for m in re.findall(pattern, text))

    return {
        "regs": max((int(m) for m in re.findall(r"Used (\d+) registers", text)), default=0),
        "spill": grab(r"(\d+) bytes spill stores") + grab(r"(\d+) bytes spill loads"),
        "smem": max((int(m) for m in re.findall(r"(\d+) bytes smem", text)), default=0),
    }


def sass_count(cuobjdump: str, cubin: Path) -> int:
    # cuobjdump runs nvdisasm (PyPI `nvidia-cuda-nvdisasm`), found beside it or on PATH
    env = dict(os.environ, PATH=f"{Path(cuobjdump).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    proc = subprocess.run(
        [cuobjdump, "-sass", str(cubin)], capture_output=True, text=True, check=True, env=env
    )
    count = 0
    for line in proc.stdout.splitlines():
        m = re.match(r"\s*/\*[0-9a-f]{4}\*/\s+(.*?);", line)
        if m and not m.group(1).strip().startswith("NOP"):
            count += 1
    return count


def _matmul_macs(path: Path, function: str, dims: dict[str, int]) -> int:
    """Multiply-adds of every `@` in the function at `dims` (0 when it has none)."""
    from mimir.check import check_source
    from mimir.codegen import sizes as sz
    from mimir.codegen.schedule import schedule
    from mimir.codegen.tensors import Evaluator
    from mimir.runtime.dimexpr import evaluate

    checked = check_source(str(path), path.read_text())
    (kernel,) = [k for k in checked.kernels if k.graph.name == function]
    if kernel.graph.kernel.grid is not None:
        return 0
    s = schedule(kernel)
    ev = Evaluator(kernel, None, {})  # type: ignore[arg-type]
    total = 0
    for plan in s.plans:
        if plan.kind != "matmul" or plan.root is None:
            continue
        left = ev.node(plan.root)["inputs"][0]
        out = ev.shape(plan.root)
        k = ev.shape(left)[-1]
        n = 1
        for size in (*out, k):
            n *= evaluate(sz.manifest_text(size), dims)
        total += n
    return total


def measure(
    path: Path, function: str, targets: list[int], named: dict[str, int], tools: dict
) -> dict:
    from harness.ptx_interp import run_ptx_manifest_cpu

    from mimir.codegen import compile_source
    from mimir.runtime import manifest as mf
    from mimir.runtime.verify import choose_dims, default_scalars, random_inputs

    result = compile_source(str(path), path.read_text(), ["ptx"], function=function)
    if not result.ok:
        return {"error": result.diagnostics[0].code if result.diagnostics else "?"}
    row: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for relative, content in result.files.items():
            (folder / relative).write_text(content)  # type: ignore[arg-type]
        manifest = json.loads(result.files[f"{function}.manifest.json"])  # type: ignore[arg-type]
        dims = choose_dims(manifest, targets)
        dims.update({k: v for k, v in named.items() if k in dims})
        row["dims"] = dims
        row["launches"] = len(manifest["kernels"])
        ideal = 0
        largest = 0
        for buf in manifest["buffers"]:
            if buf["role"] == "scratch":
                continue
            n = mf.numel(mf.buffer_shape(buf, dims))
            ideal += n * mf.buffer_element_size(buf, "ptx")
            largest = max(largest, n)
        row["ideal"] = ideal
        stats: list[dict] = []
        inputs = random_inputs(manifest, dims, seed=1)
        run_ptx_manifest_cpu(
            manifest, folder, inputs, dims, default_scalars(manifest, dims), stats=stats
        )
        row["dram"] = sum(s["unique_bytes"]["ld"] + s["unique_bytes"]["st"] for s in stats)
        row["issued"] = sum(s["bytes"]["ld"] + s["bytes"]["st"] for s in stats)
        executed = sum(s["executed"] for s in stats)
        macs = _matmul_macs(path, function, dims)
        row["per"] = "mac" if macs else "el"
        row["elements"] = macs or largest
        row["ptx_el"] = executed / max(1, row["elements"])
        sass = 0
        info = {"regs": 0, "spill": 0, "smem": 0}
        if tools["ptxas"]:
            for kernel in manifest["kernels"]:
                ptx_file = folder / kernel["file"]
                cubin = ptx_file.with_suffix(".cubin")
                got = ptxas_info(tools["ptxas"], ptx_file, cubin)
                info = {k: max(info[k], got[k]) for k in info}
                if tools["cuobjdump"]:
                    sass += sass_count(tools["cuobjdump"], cubin)
        row.update(info)
        row["sass"] = sass
        row["flops"] = 2 * macs
    return row


def roofline(row: dict, scale: int, machine: tuple[float, float]) -> float:
    """Microseconds at `scale` elements of the largest buffer (bytes scaled linearly)."""
    factor = scale / max(1, row["elements"]) if row["per"] == "el" else 1.0
    bandwidth, peak = machine
    return max(row["dram"] * factor / bandwidth, row["flops"] * factor / peak) * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument(
        "--dims", default=None, help="sizes: NAME=VALUE, or targets in manifest order"
    )
    parser.add_argument("--zoo", action="store_true", help="the test zoo, not roofline_ops.py")
    parser.add_argument("--function", default=None)
    parser.add_argument("--scale", type=int, default=1 << 24, help="elements for the roofline")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "tests"))
    default = "64,512,16" if args.zoo or args.files else OPS_DIMS
    targets, named = [], {}
    for item in (args.dims or default).split(","):
        name, _, value = item.rpartition("=")
        if name:
            named[name] = int(value)
        else:
            targets.append(int(value))
    tools = {"ptxas": _tool("ptxas"), "cuobjdump": _tool("cuobjdump")}
    paths = args.files or (
        sorted(p for p in ZOO.glob("*.py") if p.name != "__init__.py")
        if args.zoo
        else [Path(__file__).resolve().parent / "roofline_ops.py"]
    )
    rows = []
    header = (
        f"{'function':<28} {'launch':>6} {'dram':>6} {'issued':>6} {'ptx/el':>8} "
        f"{'sass':>5} {'regs':>4} {'spill':>5} {'smem':>6} "
        f"{'h200 us':>8} {'m-ser us':>8}  dims"
    )
    print(header)
    print("-" * len(header))
    for path, function in _functions(paths, args.function):
        row = measure(path, function, targets or [64], named, tools)
        row["function"] = f"{path.stem}.{function}"
        rows.append(row)
        if "error" in row:
            print(f"{row['function']:<28} refused ({row['error']})")
            continue
        h200 = f"{roofline(row, args.scale, H200):.1f}" if row["per"] == "el" else "-"
        mser = f"{roofline(row, args.scale, MSERIES):.1f}" if row["per"] == "el" else "-"
        per = "/mac" if row["per"] == "mac" else ""
        print(
            f"{row['function']:<28} {row['launches']:>6} {row['dram'] / row['ideal']:>5.2f}x "
            f"{row['issued'] / row['ideal']:>5.2f}x {row['ptx_el']:>8.2f} "
            f"{row['sass']:>5} {row['regs']:>4} {row['spill']:>5} {row['smem']:>6} "
            f"{h200:>8} {mser:>8}"
            f"  {','.join(f'{k}={v}' for k, v in row['dims'].items())}{per}",
            flush=True,
        )
    if not tools["ptxas"]:
        print("ptxas not found: no registers, spills, shared memory or SASS")
    elif not tools["cuobjdump"]:
        print("cuobjdump not found (pip install nvidia-cuda-cuobjdump): no SASS counts")
    print("no Triton anchors (not implemented; RECEIPTS.md quotes issue 15's figures)")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
