"""Compile time per backend and kernel time on the adapter present, next to a naive reference.

    python benchmarks/kernel_time.py [--size 256] [--repeat 5] [FILES...]

Table 1: for every `@gpu` function of the kernel zoo (tests/kernels/*.py, or FILES),
the time `compile_source` takes per backend (check included), in milliseconds.

Table 2: kernel time on whatever WebGPU adapter `wgpu` finds (a real GPU, or Mesa
lavapipe on the CPU), median of `--repeat` launches after a warm-up, every dim
bound near `--size`.

Table 3: the tiled matmul (`x @ w`, 16x16 tiles through workgroup memory) against
a naive reference kernel, one thread per output walking K from global memory
(the index-level `naive_matmul` of tests/kernels/index_level.py), at M = N = K =
`--size`. The tiled kernel is expected to win.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ZOO = ROOT / "tests" / "kernels"
BACKENDS = ("msl", "wgsl", "spirv", "ptx")

TILED = textwrap.dedent(
    """\
    from mimir.array import Dim, Tensor, float32, gpu

    M = Dim("M")
    N = Dim("N")
    K = Dim("K")


    @gpu
    def tiled_matmul(a: Tensor[float32, M, K], b: Tensor[float32, K, N]) -> Tensor[float32, M, N]:
        return a @ b
    """
)


def _functions(paths: list[Path]) -> list[tuple[Path, str]]:
    sys.path.insert(0, str(ROOT / "tests"))
    from support import import_file, kernels_of

    out = []
    for path in paths:
        for name in kernels_of(import_file(path)):
            out.append((path, name))
    return out


def _compile(path: Path, text: str, function: str, backend: str, folder: Path) -> float:
    from mimir.codegen import compile_source

    start = time.perf_counter()
    result = compile_source(str(path), text, [backend], function=function)
    elapsed = time.perf_counter() - start
    if not result.ok:
        raise RuntimeError(f"{path.name}:{function} does not compile for {backend}")
    for rel, content in result.files.items():
        data = content if isinstance(content, bytes) else content.encode()
        (folder / rel).write_bytes(data)
    return elapsed


def _kernel_time(path: Path, function: str, folder: Path, size: int, repeat: int) -> float:
    from mimir.runtime.verify import choose_dims, default_scalars, random_inputs
    from mimir.runtime.wgpu_runner import run_manifest

    manifest = json.loads((folder / f"{function}.manifest.json").read_text())
    dims = choose_dims(manifest, [size])
    timings: list[float] = []
    run_manifest(
        manifest,
        folder,
        random_inputs(manifest, dims),
        dims,
        default_scalars(manifest, dims),
        timings=timings,
        repeat=repeat,
    )
    return statistics.median(timings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    paths = args.paths or sorted(ZOO.glob("*.py"))
    functions = _functions(paths)
    work = Path(tempfile.mkdtemp(prefix="mimir-bench-"))

    print(f"compile time per backend, ms ({len(functions)} functions)\n")
    print(f"{'function':<40}" + "".join(f"{b:>9}" for b in BACKENDS))
    folders: dict[tuple[Path, str], Path] = {}
    for path, function in functions:
        text = path.read_text()
        row = f"{path.stem + '.' + function:<40}"
        for backend in BACKENDS:
            folder = work / path.stem / function / backend
            folder.mkdir(parents=True, exist_ok=True)
            row += f"{_compile(path, text, function, backend, folder) * 1000:>9.1f}"
            folders[(path, function, backend)] = folder  # type: ignore[index]
        print(row)

    try:
        from mimir.runtime.wgpu_runner import adapter_description

        adapter = adapter_description()
    except Exception as err:  # no wgpu, or no adapter: the compile table still stands
        print(f"\nno WebGPU adapter ({err}); kernel times skipped")
        return
    print(f"\nkernel time on {adapter}, WGSL, dims near {args.size}, median of {args.repeat}\n")
    print(f"{'function':<40}{'ms':>10}")
    for path, function in functions:
        folder = folders[(path, function, "wgsl")]  # type: ignore[index]
        seconds = _kernel_time(path, function, folder, args.size, args.repeat)
        print(f"{path.stem + '.' + function:<40}{seconds * 1000:>10.3f}")

    tiled_path = work / "tiled.py"
    tiled_path.write_text(TILED)
    naive_path = ZOO / "index_level.py"
    rows = []
    for label, path, function in (
        ("tiled `a @ b` (64x64 tiles, 4x4 per thread)", tiled_path, "tiled_matmul"),
        ("naive reference (one thread per output)", naive_path, "naive_matmul"),
    ):
        folder = work / "matmul" / function
        folder.mkdir(parents=True, exist_ok=True)
        _compile(path, path.read_text(), function, "wgsl", folder)
        rows.append((label, _kernel_time(path, function, folder, args.size, args.repeat)))
    n = args.size
    print(f"\nmatmul {n}x{n}x{n} on {adapter}\n")
    print(f"{'kernel':<44}{'ms':>10}{'GFLOP/s':>10}{'vs naive':>10}")
    naive = rows[1][1]
    for label, seconds in rows:
        gflops = 2 * n**3 / seconds / 1e9
        print(f"{label:<44}{seconds * 1000:>10.3f}{gflops:>10.2f}{naive / seconds:>9.2f}x")


if __name__ == "__main__":
    main()
