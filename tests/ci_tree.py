"""A small project tree for the CI-gate tests, and a way to run `mimir` inside it.

`make_tree(root)` writes four kernel files: a matmul mismatch (with secondary
labels), a slice out of bounds (with a counterexample), a clean kernel, and a
file with one used and one unused suppression. `mimir(...)` runs the CLI
in-process in the current directory and returns click's result (exit code,
stdout and stderr apart).
"""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from mimir.cli import app

DATA = Path(__file__).resolve().parent / "data"

MATMUL = """\
from mimir.array import Tensor, float32, gpu


@gpu
def project(x: Tensor[float32, 32, 784], w: Tensor[float32, 128, 10]) -> Tensor[float32, 32, 10]:
    return x @ w
"""

SLICES = """\
from mimir.array import Dim, Tensor, float32, gpu

N = Dim("N", min=7, max=7)


@gpu
def shift(x: Tensor[float32, N]) -> Tensor[float32, 8]:
    return x[0:8]
"""

CLEAN = """\
from mimir.array import Tensor, float32, gpu


@gpu
def scale(x: Tensor[float32, 8]) -> Tensor[float32, 8]:
    return x * 2.0
"""

SUPPRESSED = """\
from mimir.array import Tensor, float32, gpu


@gpu
def kept(x: Tensor[float32, 4, 3], b: Tensor[float32, 4]) -> Tensor[float32, 4, 3]:
    return x + b  # mimir: ignore[GPU010]


@gpu
def stale(x: Tensor[float32, 8]) -> Tensor[float32, 8]:
    return x + 1.0  # mimir: ignore[GPU011]
"""

TREE = {
    "kernels/matmul.py": MATMUL,
    "kernels/slices.py": SLICES,
    "kernels/clean.py": CLEAN,
    "kernels/suppressed.py": SUPPRESSED,
}


def make_tree(root: Path, files: dict[str, str] | None = None) -> Path:
    for rel, text in (TREE if files is None else files).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def mimir(*args: str):
    return CliRunner().invoke(app, list(args), catch_exceptions=False)
