"""What each zoo kernel costs, without a GPU: launches, bytes against the ideal, PTX/SASS.

    python benchmarks/kernel_static.py [--zoo] [--dims N=65536,M=8] [--function NAME] [FILES...]

For every `@gpu` function of benchmarks/roofline_ops.py (the memory-bound ops compared with Triton),
of the kernel zoo with `--zoo` (tests/kernels/*.py), or of FILES:

- `launches`: kernels in the PTX manifest (the same for every backend, but that a reduction
  to one element, one launch on PTX and MSL, is two on WGSL and SPIR-V).
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

Triton anchors (benchmarks/triton_anchors.py; `triton` is in the `bench` extra): for
roofline_ops.py, a second table puts each op beside the same op written in Triton and
compiled offline for sm_90 (`triton.compiler.ASTSource`, `GPUTarget("cuda", 90, 32)`),
its PTX assembled by the same ptxas and counted by the same cuobjdump. `sass/el` there:
Triton's anchors are loop-free but the matmul, so one thread runs its static SASS once and
SASS per element is static SASS x threads / elements of a program (per multiply-add: the
K loop's body x threads / BM*BN*BK). Mimir's kernels loop, and their dynamic SASS needs a
GPU, so Mimir's `sass/el~` is an estimate: the measured PTX per element x (static SASS /
static PTX instructions) of its files. `x` is Mimir's figure over Triton's. Time columns
(Mimir/Triton) at `--scale` elements, the matmul at 4096^3 multiply-adds: `h200 us` and
`m-ser us` the roofline as above (the anchors move the ideal bytes: one launch, each block
loaded once, by construction); `issue us` the time an H200 needs just to issue the SASS
per element, one instruction per lane per cycle (its fp32 FMA rate): above `h200 us`, the
kernel is bound by its instruction count, not by memory. A third table takes the matmuls
whose k loop has tensor-core instructions (TF32, float16, bfloat16): the loop's static SASS,
its `HMMA` (`mma.sync`) or `HGMMA` (`wgmma`) count and SASS per one, Mimir's and Triton's
(of several k loops, the smallest with tensor-core instructions: `sass_mma_loop`).
`--no-triton` skips the tables; without triton installed it says so.
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
# bounded), a 128x128x64 matmul (one full 128x128 tile, 8 k-slices: its per-MAC count is
# the schedule's, not a partly empty tile's); small enough for the interpreter
OPS_DIMS = "N=65536,M=8,D=1024,R=1000,I=128,J=128,K=64"
# the matmul's size in the Triton table's time columns: 4096 x 4096 x 4096 multiply-adds
MAC_SCALE = 4096**3


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


def ptxas_info(ptxas: str, ptx: Path, cubin: Path, arch: str = "sm_90") -> dict[str, int]:
    proc = subprocess.run(
        [ptxas, f"-arch={arch}", "-v", str(ptx), "-o", str(cubin)],
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


def sass_lines(cuobjdump: str, cubin: Path) -> list[tuple[int, str]]:
    """(address, instruction) of every SASS instruction but NOPs, all kernels of `cubin`."""
    # cuobjdump runs nvdisasm (PyPI `nvidia-cuda-nvdisasm`), found beside it or on PATH
    env = dict(os.environ, PATH=f"{Path(cuobjdump).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    proc = subprocess.run(
        [cuobjdump, "-sass", str(cubin)], capture_output=True, text=True, check=True, env=env
    )
    out = []
    for line in proc.stdout.splitlines():
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if m and not m.group(2).strip().startswith("NOP"):
            out.append((int(m.group(1), 16), m.group(2).strip()))
    return out


def sass_count(cuobjdump: str, cubin: Path) -> int:
    return len(sass_lines(cuobjdump, cubin))


def sass_loops(lines: list[tuple[int, str]]) -> list[list[str]]:
    """The instructions of each loop (a branch back to an earlier address)."""
    out = []
    for i, (addr, text) in enumerate(lines):
        m = re.search(r"\bBRA\b.*?0x([0-9a-f]+)", text)
        if not m or int(m.group(1), 16) >= addr:
            continue
        target = int(m.group(1), 16)
        out.append([t for a, t in lines[: i + 1] if a >= target])
    return out


def sass_loop(lines: list[tuple[int, str]]) -> list[str]:
    """The instructions of the largest loop (a branch back to an earlier address)."""
    return max(sass_loops(lines), key=len, default=[])


def sass_mma_loop(lines: list[tuple[int, str]]) -> list[str]:
    """The k loop of a matmul: the smallest loop with tensor-core instructions (a half
    matmul whose K or N is not proven even has a second k loop, for odd sizes, packing
    its words from element loads: the benchmark's even sizes run the smaller one), else
    the largest loop."""
    with_mma = [body for body in sass_loops(lines) if mma_count(body)]
    return min(with_mma, key=len) if with_mma else sass_loop(lines)


def sass_loop_body(lines: list[tuple[int, str]]) -> int:
    """Instructions in the largest loop (a branch back to an earlier address), 0 if none."""
    return len(sass_loop(lines))


def mma_count(instructions: list[str]) -> int:
    """Tensor-core instructions: `HMMA` (`mma.sync`) and `HGMMA` (`wgmma`, sm_90)."""
    return sum(1 for t in instructions if re.search(r"\bHG?MMA\b", t))


def ptx_instructions(text: str) -> list[str]:
    """The PTX instructions of `text` (labels, directives, declarations and braces left
    out), with the labels kept as `LABEL:` entries for ptx_loop_body."""
    out = []
    for raw in text.splitlines():
        line = raw.split("//")[0].strip()
        if not line or line in ("{", "}") or line.startswith("."):
            continue
        if line.endswith(":") and " " not in line:
            out.append(line)
        elif line.endswith(";"):
            out.append(line)
    return out


def ptx_count(text: str) -> int:
    return sum(1 for line in ptx_instructions(text) if not line.endswith(":"))


def ptx_loop_body(text: str, mma: bool = False) -> int:
    """PTX instructions in the largest loop (a `bra` back to an earlier label), 0 if none;
    with `mma` in the smallest loop with `mma.sync`, where there is one (`sass_mma_loop`)."""
    lines = ptx_instructions(text)
    where = {line[:-1]: i for i, line in enumerate(lines) if line.endswith(":")}
    sizes, with_mma = [0], []
    for i, line in enumerate(lines):
        m = re.search(r"\bbra(?:\.uni)?\s+(\S+?);", line)
        if m and where.get(m.group(1), i) < i:
            body = [x for x in lines[where[m.group(1)] : i + 1] if not x.endswith(":")]
            sizes.append(len(body))
            if any(x.startswith("mma.sync") for x in body):
                with_mma.append(len(body))
    return min(with_mma) if mma and with_mma else max(sizes)


def _matmuls(path: Path, function: str, dims: dict[str, int]) -> tuple[int, set[str]]:
    """Multiply-adds of every `@` in the function at `dims`, and the names of the dims
    they contract over (where those are plain dims)."""
    from mimir.check import check_source
    from mimir.codegen import sizes as sz
    from mimir.codegen.schedule import schedule
    from mimir.codegen.schedule.plan import Attention, Matmul, Narrow, ScoresSoftmax
    from mimir.codegen.schedule.roots import inline_product
    from mimir.codegen.tensors import Evaluator
    from mimir.runtime.dimexpr import evaluate

    checked = check_source(str(path), path.read_text())
    (kernel,) = [k for k in checked.kernels if k.graph.name == function]
    if kernel.graph.kernel.grid is not None:
        return 0, set()
    s = schedule(kernel)
    ev = Evaluator(kernel)
    total = 0
    contracted: set[str] = set()
    # the products launches of their own compute, and those a `narrow` launch computes
    # inside (`schedule.inline_product`); a product by a small matrix is element-wise
    roots = [p.root for p in s.plans if isinstance(p, (Matmul, Narrow))]
    # an `attention` launch's two: the scores `q @ k.T` and the product by v; a
    # `scores_softmax` launch's scores (which it computes twice: counted once, as the
    # function's multiply-adds)
    roots += [r for p in s.plans if isinstance(p, Attention) for r in (p.scores, p.root)]
    roots += [p.scores for p in s.plans if isinstance(p, ScoresSoftmax)]
    # a `matmul` launch's paired product (SwiGLU's gate beside its up projection)
    roots += [p.paired for p in s.plans if isinstance(p, Matmul) and p.paired is not None]
    inline = [n for n in kernel.graph.graph.nodes if inline_product(kernel.graph, n)]
    for root in [*roots, *inline]:
        left = ev.node(root)["inputs"][0]
        out = ev.shape(root)
        k = ev.shape(left)[-1]
        n = 1
        for size in (*out, k):
            n *= evaluate(sz.manifest_text(size), dims)
        total += n
        if sz.manifest_text(k) in dims:
            contracted.add(sz.manifest_text(k))
    return total, contracted


def measure(
    path: Path,
    function: str,
    targets: list[int],
    named: dict[str, int],
    tools: dict,
    math: str = "fast",
    ptx_target: str | None = None,
) -> dict:
    from harness.ptx_interp import run_ptx_manifest_cpu

    from mimir.codegen import compile_source
    from mimir.runtime import manifest as mf
    from mimir.runtime.verify import choose_dims, default_scalars, random_inputs

    result = compile_source(
        str(path), path.read_text(), ["ptx"], function=function, math=math, ptx_target=ptx_target
    )
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
            # each input read once, each output written once: an `InOut` buffer both
            ideal += n * mf.buffer_element_size(buf, "ptx") * (2 if buf["role"] == "inout" else 1)
            largest = max(largest, n)
        row["ideal"] = ideal

        def run(dims: dict[str, int]) -> list[dict]:
            stats: list[dict] = []
            inputs = random_inputs(manifest, dims, seed=1)
            run_ptx_manifest_cpu(
                manifest, folder, inputs, dims, default_scalars(manifest, dims), stats=stats
            )
            return stats

        stats = run(dims)
        row["dram"] = sum(s["unique_bytes"]["ld"] + s["unique_bytes"]["st"] for s in stats)
        row["issued"] = sum(s["bytes"]["ld"] + s["bytes"]["st"] for s in stats)
        executed = sum(s["executed"] for s in stats)
        macs, contracted = _matmuls(path, function, dims)
        if macs and len(contracted) == 1:
            # the k loop's steady state, as the Triton anchor's is counted (its loop body):
            # what one more k-slice costs, from a run with the contracted dim doubled
            (k,) = contracted
            longer = {**dims, k: 2 * dims[k]}
            try:
                more = sum(s["executed"] for s in run(longer)) - executed
            except mf.ManifestError:
                pass  # the dim's `max` does not admit it doubled: no loop figure
            else:
                row["ptx_mac_loop"] = more / (_matmuls(path, function, longer)[0] - macs)
        row["per"] = "mac" if macs else "el"
        row["elements"] = macs or largest
        row["ptx_el"] = executed / max(1, row["elements"])
        sass = 0
        info = {"regs": 0, "spill": 0, "smem": 0}
        row["ptx_static"] = sum(
            ptx_count((folder / kernel["file"]).read_text()) for kernel in manifest["kernels"]
        )
        if tools["ptxas"]:
            for kernel in manifest["kernels"]:
                ptx_file = folder / kernel["file"]
                cubin = ptx_file.with_suffix(".cubin")
                # a file for sm_90a (wgmma) assembles only for it
                arch = "sm_90a" if ".target sm_90a" in ptx_file.read_text() else "sm_90"
                got = ptxas_info(tools["ptxas"], ptx_file, cubin, arch)
                info = {k: max(info[k], got[k]) for k in info}
                if tools["cuobjdump"]:
                    lines = sass_lines(tools["cuobjdump"], cubin)
                    sass += len(lines)
                    loop = ptx_loop_body(ptx_file.read_text(), mma=True)
                    if "ptx_mac_loop" in row and loop:
                        body = sass_mma_loop(lines)
                        row["mma_loop"] = max(row.get("mma_loop", 0), mma_count(body))
                        row["sass_loop"] = max(row.get("sass_loop", 0), len(body))
                        # SASS per multiply-add in the k loop: its SASS body per PTX body,
                        # times the PTX one more k-slice executes per multiply-add
                        row["sass_mac_loop"] = max(
                            row.get("sass_mac_loop", 0), len(body) * row["ptx_mac_loop"] / loop
                        )
        row.update(info)
        row["sass"] = sass
        row["flops"] = 2 * macs
    return row


def measure_triton(anchor: Any, dims: dict[str, int], tools: dict) -> dict:
    """Compile a Triton anchor offline and count it the way `measure` counts Mimir's PTX."""
    import triton_anchors as ta

    got = ta.compile_anchor(anchor, dims)
    row: dict[str, Any] = {"config": got["config"], "launches": anchor.launches}
    text = got["ptx"]
    row["ptx_static"] = ptx_count(text)
    loop = ptx_loop_body(text) if anchor.per == "mac" else 0
    row["ptx_el"] = (loop or row["ptx_static"]) * got["threads"] / got["work"]
    info = {"regs": 0, "spill": 0, "smem": got["shared"]}
    row["sass"] = row["sass_el"] = row["sass_own"] = 0
    if tools["ptxas"]:
        with tempfile.TemporaryDirectory() as tmp:
            ptx_file = Path(tmp) / f"{anchor.kernel}.ptx"
            ptx_file.write_text(text)
            cubin = ptx_file.with_suffix(".cubin")
            info.update(ptxas_info(tools["ptxas"], ptx_file, cubin, got["arch"]))
            info["smem"] = max(info["smem"], got["shared"])  # dynamic shared memory
            if tools["cuobjdump"]:
                lines = sass_lines(tools["cuobjdump"], cubin)
                row["sass"] = len(lines)
                loop = sass_loop(lines) if anchor.per == "mac" else []
                body = len(loop)
                row["sass_el"] = (body or len(lines)) * got["threads"] / got["work"]
                row["sass_loop"], row["mma_loop"] = body, mma_count(loop)
                own = Path(tmp) / "own.cubin"  # the cubin Triton's bundled ptxas made
                own.write_bytes(got["cubin"])
                row["sass_own"] = sass_count(tools["cuobjdump"], own)
    row.update(info)
    return row


def triton_table(rows: list[dict], tools: dict, scale: int) -> list[dict]:
    """The Triton anchors beside Mimir's rows of roofline_ops.py; the printed table."""
    try:
        import triton_anchors as ta
    except ImportError as exc:  # pragma: no cover
        print(f"no Triton anchors: {exc}")
        return []
    if not ta.AVAILABLE:
        print("no Triton anchors: triton is not installed (pip install -e '.[bench]')")
        return []
    by_name = {r["function"].split(".")[-1]: r for r in rows if "error" not in r}
    header = (
        f"{'op':<20} {'sass/el~':>8} {'triton':>7} {'x':>5}  {'ptx/el':>7} {'triton':>7} "
        f"{'x':>5}  {'launch':>6} {'regs':>7} {'smem':>11} {'sass':>9}  "
        f"{'h200 us':>11} {'issue us':>13} {'m-ser us':>11}  triton config"
    )
    print()
    print("Mimir against Triton 3.9 (offline, sm_90), Mimir / Triton; x = Mimir over Triton")
    print(header)
    print("-" * len(header))
    out = []
    for anchor in [*ta.ANCHORS, ta.TF32]:
        mine = by_name.get(anchor.function)
        if mine is None:
            continue
        dims = {**mine["dims"]}
        t = measure_triton(anchor, dims, tools)
        t["function"] = anchor.function
        out.append(t)
        # Mimir's dynamic SASS per element, estimated from its dynamic PTX; per multiply-add
        # the k loop's steady state, as Triton's (`measure`: ptx_mac_loop, sass_mac_loop)
        ptx_el = mine.get("ptx_mac_loop", mine["ptx_el"])
        est = mine.get("sass_mac_loop") or ptx_el * mine["sass"] / max(1, mine["ptx_static"])
        t["mimir_sass_el"] = est
        # the anchors move each input once and each output once per launch (by construction)
        trow = {**mine, "dram": mine["ideal"]}
        if mine["per"] == "el":
            h = f"{roofline(mine, scale, H200):.1f}/{roofline(trow, scale, H200):.1f}"
            m = f"{roofline(mine, scale, MSERIES):.1f}/{roofline(trow, scale, MSERIES):.1f}"
            work = scale
        else:  # the matmul at MAC_SCALE: bytes of a, w, out, flops 2 per multiply-add
            square = round(MAC_SCALE ** (1 / 3)) ** 2
            at = {"per": "mac", "elements": 1, "dram": 3 * 4 * square, "flops": 2 * MAC_SCALE}
            h = f"{roofline(at, scale, H200):.0f}"
            m = f"{roofline(at, scale, MSERIES):.0f}"
            work = MAC_SCALE
        issue = f"{issue_us(est, work):.1f}/{issue_us(t['sass_el'], work):.1f}"
        mimir = [
            f"{est:.2f}",
            f"{t['sass_el']:>7.2f}",
            f"{est / t['sass_el']:.2f}" if t["sass_el"] else "-",
            f"{ptx_el:.2f}",
            f"{t['ptx_el']:>7.2f}",
            f"{ptx_el / t['ptx_el']:.2f}",
        ]
        launches = f"{mine['launches']}/{t['launches']}"
        regs = f"{mine['regs']}/{t['regs']}"
        smem = f"{mine['smem']}/{t['smem']}"
        sass = f"{mine['sass']}/{t['sass']}"
        per = "/mac" if anchor.per == "mac" else ""
        print(
            f"{t['function']:<20} {mimir[0]:>8} {mimir[1]:>7} {mimir[2]:>5}  {mimir[3]:>7} "
            f"{mimir[4]:>7} {mimir[5]:>5}  {launches:>6} {regs:>7} {smem:>11} {sass:>9}  "
            f"{h:>11} {issue:>13} {m:>11}  {t['config']}{per}",
            flush=True,
        )
    mma_table(by_name, out)
    return out


def mma_table(by_name: dict[str, dict], anchors: list[dict]) -> None:
    """The k loops with tensor-core instructions, Mimir's and Triton's: the loop's static
    SASS, its `HMMA` / `HGMMA` instructions and SASS instructions per one of them."""
    rows = [
        (t, by_name[t["function"]])
        for t in anchors
        if t.get("mma_loop") or by_name[t["function"]].get("mma_loop")
    ]
    if not rows:
        return
    print()
    print("k loops on tensor cores (static SASS of the loop body, sm_90)")
    header = (
        f"{'op':<22} {'mimir sass':>10} {'HMMA':>5} {'sass/mma':>8}  "
        f"{'triton sass':>11} {'mma':>4} {'sass/mma':>8}"
    )
    print(header)
    print("-" * len(header))
    for t, mine in rows:

        def per(row: dict) -> str:
            return f"{row['sass_loop'] / row['mma_loop']:.2f}" if row.get("mma_loop") else "-"

        print(
            f"{t['function']:<22} {mine.get('sass_loop', 0):>10} {mine.get('mma_loop', 0):>5} "
            f"{per(mine):>8}  {t.get('sass_loop', 0):>11} {t.get('mma_loop', 0):>4} "
            f"{per(t):>8}",
            flush=True,
        )


def issue_us(sass_el: float, work: int) -> float:
    """Microseconds an H200 needs to issue `sass_el` SASS per element (or per multiply-add)
    over `work` of them, one instruction per lane per cycle: the rate of its fp32 FMAs
    (67 TFLOP/s = 33.5e12 FMA/s); latency, occupancy and dual issue ignored."""
    return sass_el * work / (H200[1] / 2) * 1e6


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
    parser.add_argument(
        "--no-triton", action="store_true", help="no Triton anchors (roofline_ops.py only)"
    )
    parser.add_argument(
        "--math", default="fast", choices=("fast", "precise"), help="`mimir compile-gpu --math`"
    )
    parser.add_argument(
        "--ptx-target",
        default=None,
        choices=("sm_90a",),
        help="`compile_source(ptx_target=...)`: sm_90a puts half matmuls on wgmma",
    )
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
        row = measure(path, function, targets or [64], named, tools, args.math, args.ptx_target)
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
    anchors: list[dict] = []
    if not (args.no_triton or args.zoo or args.files):
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        anchors = triton_table(rows, tools, args.scale)
    if args.json:
        args.json.write_text(json.dumps({"mimir": rows, "triton": anchors}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
