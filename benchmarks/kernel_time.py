"""Compile time per backend and kernel time on the adapter present, next to a naive reference.

    python benchmarks/kernel_time.py [--size 256] [--repeat 5] [FILES...]
    python benchmarks/kernel_time.py --roofline [--repeat 5]

Table 1: for every `@gpu` function of the kernel zoo (tests/kernels/*.py, or FILES),
the time `compile_source` takes per backend (check included), in milliseconds.

Table 2: kernel time on whatever WebGPU adapter `wgpu` finds (a real GPU, or Mesa
lavapipe on the CPU), median of `--repeat` launches after a warm-up, every dim
bound near `--size`.

Table 4 (`--roofline` prints only this one): the memory-bound ops of
benchmarks/roofline_ops.py on the same adapter, each as a ratio to a copy kernel that
moves the op's ideal bytes (every input read once, every output written once: a copy of
ideal/8 float32 elements reads and writes that many bytes) and to NumPy doing the same op
on the CPU, all in one run. On lavapipe the copy ratio says how far an op is from the
memory system; 1.0 is a kernel that costs what moving its bytes costs.

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
from typing import Any

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


ROOFLINE_OPS = ROOT / "benchmarks" / "roofline_ops.py"
COPY = textwrap.dedent(
    """\
    from mimir.array import Dim, Tensor, float32, gpu

    N = Dim("N")


    @gpu
    def copy(x: Tensor[float32, N]) -> Tensor[float32, N]:
        return x * 1.0
    """
)


def _numpy_ops() -> dict[str, Any]:
    """Each roofline op in NumPy (float32), over the inputs in manifest order."""
    import numpy as np

    def softmax(x: Any) -> Any:
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    def layer_norm(x: Any, g: Any, b: Any) -> Any:
        c = x - x.mean(axis=-1, keepdims=True)
        return c / np.sqrt((c * c).mean(axis=-1, keepdims=True) + 1e-5) * g + b

    return {
        "vector_add": lambda a, b: a + b,
        "sigmoid_chain": lambda a, b: a / (1 + np.exp(-(a * b + 1))),
        "softmax_rows": softmax,
        "softmax_1024": softmax,
        "layer_norm": layer_norm,
        "layer_norm_1024": layer_norm,
        "rms_norm": lambda x, w: x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6) * w,
        "row_sum": lambda x: x.sum(axis=-1),
        "total": lambda x: x.sum(),
    }


# (op, dims): element-wise and full sums over 4M elements, rows of 1024 and 4096
ROOFLINE_CASES = [
    ("vector_add", {"N": 1 << 22}),
    ("sigmoid_chain", {"N": 1 << 22}),
    ("total", {"N": 1 << 22}),
    ("softmax_1024", {"M": 4096}),
    ("softmax_rows", {"M": 4096, "D": 1024}),
    ("softmax_rows", {"M": 1024, "D": 4096}),
    ("layer_norm_1024", {"M": 4096}),
    ("layer_norm", {"M": 1024, "D": 4096}),
    ("rms_norm", {"M": 1024, "D": 4096}),
    ("row_sum", {"M": 1024, "D": 4096}),
]


def _timed(folder: Path, function: str, dims: dict[str, int], repeat: int) -> tuple[float, Any]:
    """The median launch time of a compiled WGSL function, and its inputs."""
    from mimir.runtime.verify import random_inputs
    from mimir.runtime.wgpu_runner import run_manifest

    manifest = json.loads((folder / f"{function}.manifest.json").read_text())
    inputs = random_inputs(manifest, dims)
    timings: list[float] = []
    run_manifest(manifest, folder, inputs, dims, {}, timings=timings, repeat=repeat)
    return statistics.median(timings), (manifest, inputs)


def roofline_table(work: Path, repeat: int) -> None:
    import numpy as np

    from mimir.runtime import manifest as mf
    from mimir.runtime.wgpu_runner import adapter_description

    adapter = adapter_description()
    ops = _numpy_ops()
    copy_path = work / "copy.py"
    copy_path.write_text(COPY)
    copy_folder = work / "roofline" / "copy"
    copy_folder.mkdir(parents=True, exist_ok=True)
    _compile(copy_path, COPY, "copy", "wgsl", copy_folder)
    text = ROOFLINE_OPS.read_text()
    print(f"\nmemory-bound ops on {adapter}, WGSL, median of {repeat}; ratios to a copy of")
    print("the ideal bytes and to NumPy on the CPU (lower is better)\n")
    print(
        f"{'op':<18}{'dims':<18}{'launches':>9}{'MB':>8}{'ms':>9}{'copy ms':>9}"
        f"{'x copy':>8}{'numpy ms':>10}{'x numpy':>9}"
    )
    for function, dims in ROOFLINE_CASES:
        folder = work / "roofline" / function / "_".join(f"{k}{v}" for k, v in dims.items())
        folder.mkdir(parents=True, exist_ok=True)
        _compile(ROOFLINE_OPS, text, function, "wgsl", folder)
        seconds, (manifest, inputs) = _timed(folder, function, dims, repeat)
        ideal = 0
        arrays = []
        for buf in manifest["buffers"]:
            if buf["role"] == "scratch":
                continue
            shape = mf.buffer_shape(buf, dims)
            ideal += mf.numel(shape) * mf.buffer_element_size(buf, "wgsl")
            if buf["role"] == "input":
                arrays.append(np.asarray(inputs[buf["name"]], dtype=np.float32).reshape(shape))
        copy_seconds, _ = _timed(copy_folder, "copy", {"N": max(1, ideal // 8)}, repeat)
        numpy_times = []
        for _ in range(repeat):
            start = time.perf_counter()
            ops[function](*arrays)
            numpy_times.append(time.perf_counter() - start)
        numpy_seconds = statistics.median(numpy_times)
        label = ",".join(f"{k}={v}" for k, v in dims.items())
        print(
            f"{function:<18}{label:<18}{len(manifest['kernels']):>9}{ideal / 1e6:>8.1f}"
            f"{seconds * 1e3:>9.2f}{copy_seconds * 1e3:>9.2f}{seconds / copy_seconds:>8.2f}"
            f"{numpy_seconds * 1e3:>10.2f}{seconds / numpy_seconds:>9.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--roofline", action="store_true", help="only the memory-bound ops against copy and NumPy"
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mimir-bench-"))
    if args.roofline:
        roofline_table(work, args.repeat)
        return
    paths = args.paths or sorted(ZOO.glob("*.py"))
    functions = _functions(paths)

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
    roofline_table(work, args.repeat)


if __name__ == "__main__":
    main()
