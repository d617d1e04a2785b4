"""Mimir's PTX kernels against torch on the same GPU: matmul, softmax and reductions.

    python benchmarks/ptx_vs_torch.py [--repeats 20] [--quick]

Needs an NVIDIA GPU and torch with CUDA; without them it says so and exits 0.
Each case compiles a small kernel file with `mimir.codegen.compile_source`,
loads the PTX through the CUDA driver (`mimir.runtime.cuda_runner.PtxProgram`)
and times its launches with CUDA events, then times the torch expression on
the same shapes and inputs (torch's own kernels: cuBLAS for matmul, with TF32
off so both do float32 arithmetic). The table gives each time, Mimir's time as
a multiple of torch's, and the memory bandwidth each achieves (the bytes a
kernel must move at least: its inputs once and its outputs once) as a fraction
of the device's peak (memory clock x bus width x 2, from the driver). Results
are checked against torch before they are timed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SOURCE = """
from mimir.array import Dim, Tensor, float32, gpu

M = Dim("M")
K = Dim("K")
N = Dim("N")


@gpu
def matmul(a: Tensor[float32, M, K], b: Tensor[float32, K, N]) -> Tensor[float32, M, N]:
    return a @ b


@gpu
def softmax_rows(x: Tensor[float32, M, N]) -> Tensor[float32, M, N]:
    return x.softmax(axis=-1)


@gpu
def sum_rows(x: Tensor[float32, M, N]) -> Tensor[float32, M]:
    return x.sum(axis=1)


@gpu
def sum_all(x: Tensor[float32, M, N]) -> Tensor[float32]:
    return x.sum()


@gpu
def max_cols(x: Tensor[float32, M, N]) -> Tensor[float32, N]:
    return x.max(axis=0)
"""


@dataclass
class Case:
    function: str
    dims: dict[str, int]
    inputs: dict[str, tuple[int, ...]]  # name -> shape
    torch_fn: Callable[..., Any]
    flops: float = 0.0


def cases(quick: bool) -> list[Case]:
    big = 1024 if quick else 4096
    out = [
        Case("matmul", {"M": 512, "K": 512, "N": 512}, {"a": (512, 512), "b": (512, 512)},
             lambda a, b: a @ b, 2 * 512**3),
        Case("matmul", {"M": 2048, "K": 2048, "N": 2048}, {"a": (2048, 2048), "b": (2048, 2048)},
             lambda a, b: a @ b, 2 * 2048**3),
        Case("softmax_rows", {"M": big, "N": 1000}, {"x": (big, 1000)},
             lambda x: x.softmax(dim=-1)),
        Case("softmax_rows", {"M": 256, "N": 32768}, {"x": (256, 32768)},
             lambda x: x.softmax(dim=-1)),
        Case("sum_rows", {"M": big, "N": big}, {"x": (big, big)}, lambda x: x.sum(dim=1)),
        Case("sum_all", {"M": big, "N": big}, {"x": (big, big)}, lambda x: x.sum()),
        Case("max_cols", {"M": big, "N": 1024}, {"x": (big, 1024)},
             lambda x: x.max(dim=0).values),
    ]  # fmt: skip
    if quick:
        out = [c for c in out if not (c.function == "matmul" and c.dims["M"] > 1024)]
    return out


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def torch_ms(torch: Any, fn: Callable[..., Any], args: list[Any], repeats: int) -> float:
    fn(*args)
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        fn(*args)
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / repeats


def peak_bandwidth() -> float:
    """Bytes per second: memory clock (kHz) x bus width (bits) x 2 (DDR) / 8."""
    import ctypes

    from mimir.runtime import cuda_runner

    cuda_runner._context()
    lib, device = cuda_runner._lib(), cuda_runner._STATE["device"]
    clock, width = ctypes.c_int(), ctypes.c_int()
    lib.cuDeviceGetAttribute(ctypes.byref(clock), 36, device)  # MEMORY_CLOCK_RATE
    lib.cuDeviceGetAttribute(ctypes.byref(width), 37, device)  # GLOBAL_MEMORY_BUS_WIDTH
    return clock.value * 1e3 * width.value * 2 / 8


def run(repeats: int, quick: bool) -> int:
    torch = _torch()
    if torch is None:
        print("ptx_vs_torch: skipped: needs torch with CUDA and an NVIDIA GPU")
        return 0
    from mimir.codegen import compile_source
    from mimir.runtime import cuda_runner

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    result = compile_source("ptx_bench.py", SOURCE, ["ptx"])
    if not result.ok:
        print("\n".join(d.message for d in result.diagnostics), file=sys.stderr)
        return 1
    directory = Path(tempfile.mkdtemp(prefix="mimir-ptx-bench-"))
    for name, content in result.files.items():
        (directory / name).write_text(content)  # type: ignore[arg-type]
    import json

    peak = peak_bandwidth()
    print(f"device: {cuda_runner.device_description()}, peak {peak / 1e9:.0f} GB/s")
    print(f"torch {torch.__version__}; {repeats} launches per timing, after one warm-up\n")
    head = "| case | mimir ms | torch ms | mimir / torch time | mimir BW | torch BW | note |"
    print(head)
    print("|---|---|---|---|---|---|---|")
    gen = torch.Generator(device="cuda").manual_seed(0)
    for case in cases(quick):
        manifest = json.loads((directory / f"{case.function}.manifest.json").read_text())
        tensors = {
            n: torch.rand(s, generator=gen, device="cuda", dtype=torch.float32) * 2 - 1
            for n, s in case.inputs.items()
        }
        raw = {n: t.cpu().numpy().tobytes() for n, t in tensors.items()}
        with cuda_runner.PtxProgram(manifest, directory, raw, case.dims) as program:
            program.launch()
            ours = program.outputs()["out"]
            want = case.torch_fn(*tensors.values()).flatten().cpu().tolist()
            err = max((abs(a - b) for a, b in zip(ours, want, strict=True)), default=0.0)
            mimir_ms = program.time_ms(repeats)
        reference_ms = torch_ms(torch, case.torch_fn, list(tensors.values()), repeats)
        moved = sum(t.numel() * 4 for t in tensors.values()) + len(want) * 4
        bw = [moved / (ms / 1e3) / peak for ms in (mimir_ms, reference_ms)]
        shape = " x ".join(f"{k}={v}" for k, v in case.dims.items())
        note = f"max |diff| {err:.2g}"
        if case.flops:
            note += f"; {case.flops / (mimir_ms / 1e3) / 1e12:.2f} vs "
            note += f"{case.flops / (reference_ms / 1e3) / 1e12:.2f} TFLOP/s"
        print(
            f"| {case.function} {shape} | {mimir_ms:.3f} | {reference_ms:.3f} | "
            f"{mimir_ms / reference_ms:.2f}x | {bw[0]:.0%} | {bw[1]:.0%} | {note} |"
        )
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="smaller shapes, no 2048 matmul")
    args = parser.parse_args()
    sys.exit(run(args.repeats, args.quick))


if __name__ == "__main__":
    main()
