"""The hostile-manifest corpus: one set of bad manifests that every host must refuse alike.

Each case starts from a compiled kernel's manifest (`linear_relu` of tests/kernels/linear.py,
for the backend a host runs), breaks one rule of the manifest contract (docs/hosts.md) and
names the code and the field every host must refuse it with. A case is written to a folder
of its own (the manifest, its kernel files, the inputs as raw files for the C hosts), so each
host reads it from disk exactly as it would read a user's folder. A few cases are not
refusals (`code` None): they sit at a limit and must run.

tests/test_hostile_manifests.py runs the corpus through the Python host (`load()`), the
JavaScript host (js/test/corpus.mjs), the C Vulkan host and the C CUDA host. Raw manifests join
it as files under tests/data/hostile/ (`NAME.json`, with `NAME.expect` holding the code and the
field): a fuzzer's findings (benchmarks/fuzz_manifests.py writes them out), and texts no edit of
a parsed manifest can make (a key twice in one object, which cJSON would read as its first and
JSON.parse as its last). `found_cases()` reads them.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
OUT = ROOT / "kernels" / "out"
FOUND = ROOT / "data" / "hostile"
FUNCTION = "linear_relu"
SUFFIX = {"wgsl": ".wgsl", "spirv": ".spv", "ptx": ".ptx"}
DIMS = {"N": 4}
# the inputs of linear_relu at N=4, as element counts
INPUTS = {"x": 4 * 20, "w": 20 * 33, "b": 33}
OUTPUT_ELEMENTS = 4 * 33
# The hosts: `load()` on WGSL (wgpu) and on PTX (CUDA), the JS host, the C hosts.
HOSTS = frozenset({"python-wgsl", "python-ptx", "js", "vulkan", "cuda"})

Edit = Callable[[dict, str], Any]  # (the manifest, the backend) -> None, or the file's bytes


@dataclass(frozen=True)
class Case:
    """One manifest (an edit of the base) and the refusal every host gives it."""

    name: str
    code: str | None  # None: at a limit, and it must run
    field: str | None
    edit: Edit | None = None
    folder: Callable[[Path, str], None] | None = None  # changes to the folder's files
    dims: dict[str, int] = field(default_factory=lambda: dict(DIMS))
    short_input: bool = False  # give `x` one value too few
    hosts: frozenset[str] = HOSTS  # where the refusal applies (a device limit some lack)
    says: str | None = None  # a part of the refusal's message every host gives


def _set(path: str, value: Any) -> Edit:
    """An edit setting one field, given as `kernels.0.file`."""

    def edit(m: dict, backend: str) -> None:
        keys = [int(k) if k.isdigit() else k for k in path.split(".")]
        target = m
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value(backend) if callable(value) else value

    return edit


def _text(change: Callable[[bytes], bytes]) -> Edit:
    def edit(m: dict, backend: str) -> bytes:
        return change(json.dumps(m, indent=2).encode())

    return edit


def _nest(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


def _extra(depth: int) -> Edit:
    """An unknown key (hosts ignore it) whose value nests lists `depth` deep."""

    def edit(m: dict, backend: str) -> None:
        m["notes"] = _nest(depth)

    return edit


def _rename_output(name: str) -> Edit:
    def edit(m: dict, backend: str) -> None:
        m["buffers"][3]["name"] = name
        m["kernels"][0]["bindings"][3]["buffer"] = name

    return edit


def _many_buffers(m: dict, backend: str) -> None:
    m["buffers"] += [
        {"name": f"extra{i}", "role": "scratch", "dtype": "float32", "shape": [1]}
        for i in range(253)
    ]


def _many_bindings(m: dict, backend: str) -> None:
    m["kernels"][0]["bindings"] += [
        {"buffer": "x", "group": 0, "binding": 5 + i, "access": "read"} for i in range(29)
    ]


def _fields(names: list[str]) -> Edit:
    def edit(m: dict, backend: str) -> None:
        m["uniform"]["fields"] = [{"name": n, "type": "u32" if n == "N" else "f32"} for n in names]

    return edit


def _twice_dim(m: dict, backend: str) -> None:
    m["dims"].append(dict(m["dims"][0]))


def _kernel_path(folder: Path, backend: str) -> Path:
    return folder / f"{FUNCTION}_0_matmul{SUFFIX[backend]}"


def _delete(folder: Path, backend: str) -> None:
    _kernel_path(folder, backend).unlink()


def _symlink(folder: Path, backend: str) -> None:
    kernel = _kernel_path(folder, backend)
    outside = folder.parent / f"{folder.name}-outside{SUFFIX[backend]}"
    outside.write_bytes(kernel.read_bytes())
    kernel.unlink()
    kernel.symlink_to(outside)


def _fifo(folder: Path, backend: str) -> None:
    kernel = _kernel_path(folder, backend)
    kernel.unlink()
    os.mkfifo(kernel)


def _directory(folder: Path, backend: str) -> None:
    kernel = _kernel_path(folder, backend)
    kernel.unlink()
    kernel.mkdir()


def _huge(folder: Path, backend: str) -> None:
    with _kernel_path(folder, backend).open("r+b") as f:
        f.truncate(17 << 20)  # sparse: 17 MiB of size, no disk


def _suffix(name: str) -> Callable[[str], str]:
    return lambda backend: name + SUFFIX[backend]


OUT_SHAPE = "buffers.3.shape"
# CUDA has no per-binding byte limit (cuMemAlloc decides what fits)
NOT_CUDA = HOSTS - {"cuda", "python-ptx"}

CASES: list[Case] = [
    # -- at a limit: these run
    Case("base", None, None),
    Case("json-nested-32", None, None, _extra(31)),
    Case("expr-parens-32", None, None, _set("buffers.3.shape.0", "(" * 32 + "N" + ")" * 32)),
    Case("expr-unary-32", None, None, _set("buffers.3.shape.0", "-" * 32 + "N")),
    # -- MAN001: not the contract's JSON
    Case("json-nested-200000", "MAN001", None, lambda m, b: b"[" * 200_000 + b"]" * 200_000),
    Case("json-nested-33", "MAN001", None, _extra(32)),
    Case(
        "json-not-utf8",
        "MAN001",
        None,
        _text(lambda t: t.replace(b"linear_relu", b"linear\xffrelu", 1)),
    ),
    Case("json-byte-order-mark", "MAN001", None, _text(lambda t: b"\xef\xbb\xbf" + t)),
    Case(
        "json-duplicate-key",
        "MAN001",
        None,
        _text(lambda t: t.replace(b"{", b'{"format": "x", ', 1)),
    ),
    Case("json-nan", "MAN001", None, _text(lambda t: t.replace(b'"min": 1', b'"min": NaN', 1))),
    Case(
        "json-leading-zero",
        "MAN001",
        None,
        _text(lambda t: t.replace(b'"min": 1', b'"min": 01', 1)),
    ),
    Case(
        "json-control-character",
        "MAN001",
        None,
        _text(lambda t: t.replace(b"linear_relu", b"linear\x01relu", 1)),
    ),
    Case("json-nul-escape", "MAN001", None, _set("function", "linear\x00relu")),
    Case("json-lone-surrogate", "MAN001", None, _set("function", "\ud800")),
    Case("json-over-1-mib", "MAN001", None, _text(lambda t: t + b" " * (1 << 20))),
    Case("json-truncated", "MAN001", None, _text(lambda t: t[: len(t) // 2])),
    # -- MAN002: a field of the wrong type or value
    Case("not-an-object", "MAN002", "(manifest)", lambda m, b: b"[]"),
    Case("format", "MAN002", "format", _set("format", "mimir-manifest/2")),
    Case("backend-unknown", "MAN002", "backend", _set("backend", "cuda")),
    Case("dims-min-negative", "MAN002", "dims[0].min", _set("dims.0.min", -1)),
    Case("dims-max-boolean", "MAN002", "dims[0].max", _set("dims.0.max", True)),
    Case(
        "dims-multiple-of-relation",
        "MAN002",
        "dims[0].multiple_of",
        _set("dims.0.multiple_of", "N"),
    ),
    Case("solve-not-an-object", "MAN002", "dims[0].solve", _set("dims.0.solve", [0])),
    Case(
        "solve-axis-past-the-rank",
        "MAN002",
        "dims[0].solve.axis",
        _set("dims.0.solve", {"buffer": "x", "axis": 2, "scale": 1, "offset": 0}),
    ),
    Case(
        "solve-scale-zero",
        "MAN002",
        "dims[0].solve.scale",
        _set("dims.0.solve", {"buffer": "x", "axis": 0, "scale": 0, "offset": 0}),
    ),
    Case(
        "solve-offset-missing",
        "MAN002",
        "dims[0].solve.offset",
        _set("dims.0.solve", {"buffer": "x", "axis": 0, "scale": 1}),
    ),
    Case("dtype-float64", "MAN002", "buffers[0].dtype", _set("buffers.0.dtype", "float64")),
    Case("role-unknown", "MAN002", "buffers[0].role", _set("buffers.0.role", "in_out")),
    Case(
        "element-size-negative",
        "MAN002",
        "buffers[0].element_size",
        _set("buffers.0.element_size", -4),
    ),
    Case(
        "element-size-wrong", "MAN002", "buffers[0].element_size", _set("buffers.0.element_size", 8)
    ),
    Case("shape-not-a-list", "MAN002", "buffers[0].shape", _set("buffers.0.shape", "N")),
    Case(
        "shape-rank-9",
        "MAN002",
        "buffers[3].shape",
        _set(OUT_SHAPE, ["N", 33, 1, 1, 1, 1, 1, 1, 1]),
    ),
    Case("shape-fraction", "MAN002", "buffers[1].shape[0]", _set("buffers.1.shape.0", 20.5)),
    Case("shape-boolean", "MAN002", "buffers[1].shape[0]", _set("buffers.1.shape.0", True)),
    Case("buffers-257", "MAN002", "buffers", _many_buffers),
    Case("range-on-float", "MAN002", "buffers[0].range", _set("buffers.0.range", [0, 4])),
    Case(
        "workgroup-size-2",
        "MAN002",
        "kernels[0].workgroup_size",
        _set("kernels.0.workgroup_size", [16, 16]),
    ),
    Case(
        "access-unknown",
        "MAN002",
        "kernels[0].bindings[0].access",
        _set("kernels.0.bindings.0.access", "write"),
    ),
    Case("bindings-33", "MAN002", "kernels[0].bindings", _many_bindings),
    # -- MAN003: names
    Case("output-name-traversal", "MAN003", "buffers[3].name", _rename_output("../../escaped_N")),
    Case("output-name-absolute", "MAN003", "buffers[3].name", _rename_output("/tmp/escaped")),
    Case("name-too-long", "MAN003", "buffers[3].name", _rename_output("o" * 129)),
    Case("function-name", "MAN003", "function", _set("function", "a/b")),
    Case(
        "entry-point", "MAN003", "kernels[0].entry_point", _set("kernels.0.entry_point", "main; x")
    ),
    Case("dim-twice", "MAN003", "dims[1].name", _twice_dim),
    Case(
        "solve-output-buffer",
        "MAN003",
        "dims[0].solve.buffer",
        _set("dims.0.solve", {"buffer": "out", "axis": 0, "scale": 1, "offset": 0}),
    ),
    Case(
        "solve-unknown-buffer",
        "MAN003",
        "dims[0].solve.buffer",
        _set("dims.0.solve", {"buffer": "../x", "axis": 0, "scale": 1, "offset": 0}),
    ),
    Case("buffer-twice", "MAN003", "buffers[1].name", _set("buffers.1.name", "x")),
    Case(
        "binding-unknown-buffer",
        "MAN003",
        "kernels[0].bindings[0].buffer",
        _set("kernels.0.bindings.0.buffer", "y"),
    ),
    # -- MAN004: kernel files
    Case("file-parent", "MAN004", "kernels[0].file", _set("kernels.0.file", _suffix("../outside"))),
    Case(
        "file-absolute",
        "MAN004",
        "kernels[0].file",
        _set("kernels.0.file", _suffix("/tmp/outside")),
    ),
    Case(
        "file-url",
        "MAN004",
        "kernels[0].file",
        _set("kernels.0.file", _suffix("file:///tmp/outside")),
    ),
    Case("file-dev-zero", "MAN004", "kernels[0].file", _set("kernels.0.file", "/dev/zero")),
    Case("file-dot-first", "MAN004", "kernels[0].file", _set("kernels.0.file", _suffix(".."))),
    Case(
        "file-suffix",
        "MAN004",
        "kernels[0].file",
        _set("kernels.0.file", "linear_relu.manifest.json"),
    ),
    Case("file-missing", "MAN004", "kernels[0].file", folder=_delete),
    Case("file-symlink", "MAN004", "kernels[0].file", folder=_symlink),
    Case("file-fifo", "MAN004", "kernels[0].file", folder=_fifo),
    Case("file-directory", "MAN004", "kernels[0].file", folder=_directory),
    Case("file-over-16-mib", "MAN004", "kernels[0].file", folder=_huge),
    # -- MAN005: dim expressions
    Case("dims-max-names-no-dim", "MAN005", "dims[0].max", _set("dims.0.max", "MAXT")),
    Case("dims-min-malformed", "MAN005", "dims[0].min", _set("dims.0.min", "N +")),
    Case(
        "solve-scale-names-no-dim",
        "MAN005",
        "dims[0].solve.scale",
        _set("dims.0.solve", {"buffer": "x", "axis": 0, "scale": "2 * Q", "offset": 0}),
    ),
    Case(
        "expr-int64-min-div-minus-one",
        "MAN005",
        "buffers[3].shape[1]",
        _set("buffers.3.shape.1", "(0-9223372036854775807-1)//(0-1)"),
    ),
    Case(
        "expr-overflow",
        "MAN005",
        "buffers[3].shape[1]",
        _set("buffers.3.shape.1", "N * 9223372036854775807"),
    ),
    Case(
        "expr-literal-over-int64",
        "MAN005",
        "buffers[3].shape[1]",
        _set("buffers.3.shape.1", "99999999999999999999"),
    ),
    Case(  # a million levels need a manifest over 1 MiB: refused before its JSON is read
        "expr-parens-1000000",
        "MAN001",
        None,
        _set("buffers.3.shape.0", "(" * 1_000_000 + "N" + ")" * 1_000_000),
    ),
    Case(
        "expr-parens-400000",
        "MAN005",
        "buffers[3].shape[0]",
        _set("buffers.3.shape.0", "(" * 400_000 + "N" + ")" * 400_000),
    ),
    Case(
        "expr-unary-900000",
        "MAN005",
        "buffers[3].shape[0]",
        _set("buffers.3.shape.0", "-" * 900_000 + "N"),
    ),
    Case(
        "expr-parens-33",
        "MAN005",
        "buffers[3].shape[0]",
        _set("buffers.3.shape.0", "(" * 33 + "N" + ")" * 33),
    ),
    Case(
        "expr-unary-33", "MAN005", "buffers[3].shape[0]", _set("buffers.3.shape.0", "-" * 33 + "N")
    ),
    Case(
        "expr-too-long",
        "MAN005",
        "buffers[3].shape[0]",
        _set("buffers.3.shape.0", "N" + " + 0" * 300),
    ),
    Case(
        "expr-division-by-zero",
        "MAN005",
        "buffers[3].shape[1]",
        _set("buffers.3.shape.1", "33 + N // (N - N)"),
    ),
    Case(
        "expr-modulo-by-zero",
        "MAN005",
        "buffers[3].shape[1]",
        _set("buffers.3.shape.1", "33 + N % 0"),
    ),
    Case(
        "expr-cdiv-by-zero",
        "MAN005",
        "buffers[3].shape[1]",
        _set("buffers.3.shape.1", "cdiv(N, 0)"),
    ),
    Case("expr-unknown-dim", "MAN005", "buffers[3].shape[1]", _set("buffers.3.shape.1", "Q")),
    Case("expr-call", "MAN005", "buffers[3].shape[1]", _set("buffers.3.shape.1", "max(N, 33)")),
    Case("expr-leading-zero", "MAN005", "buffers[3].shape[1]", _set("buffers.3.shape.1", "033")),
    Case(
        "expr-unknown-dim-in-workgroups",
        "MAN005",
        "kernels[0].workgroups[2]",
        _set("kernels.0.workgroups.2", "Q + 1"),
    ),
    # -- MAN006: buffer sizes
    Case(
        "shape-2-to-the-32",
        "MAN006",
        "buffers[3].shape[1]",
        _set(OUT_SHAPE, ["N", 4294967296, 4294967296]),
    ),
    Case(
        "shape-product-over-2-to-the-32",
        "MAN006",
        "buffers[3].shape",
        _set(OUT_SHAPE, ["N", 4294967295, 33]),
    ),
    Case("shape-negative", "MAN006", "buffers[3].shape[1]", _set("buffers.3.shape.1", "N - 10")),
    Case("shape-negative-literal", "MAN006", "buffers[3].shape[1]", _set("buffers.3.shape.1", -1)),
    Case(
        "binding-over-device-limit",
        "MAN006",
        "buffers[3].shape",
        _set(OUT_SHAPE, ["N", 1073741823]),
        hosts=NOT_CUDA,
    ),
    # -- MAN007: launches
    Case(
        "workgroups-2-to-the-31",
        "MAN007",
        "kernels[0].workgroups[0]",
        _set("kernels.0.workgroups.0", "2147483648"),
    ),
    Case(
        "workgroups-y-70000",
        "MAN007",
        "kernels[0].workgroups[1]",
        _set("kernels.0.workgroups.1", 70000),
    ),
    Case(
        "workgroups-literal-over-u32",
        "MAN007",
        "kernels[0].workgroups[0]",
        _set("kernels.0.workgroups.0", 4294967296),
    ),
    Case(
        "workgroups-negative",
        "MAN007",
        "kernels[0].workgroups[0]",
        _set("kernels.0.workgroups.0", "0 - N"),
    ),
    Case(
        "workgroup-size-2048",
        "MAN007",
        "kernels[0].workgroup_size[0]",
        _set("kernels.0.workgroup_size", [2048, 1, 1]),
    ),
    Case(
        "workgroup-size-zero",
        "MAN007",
        "kernels[0].workgroup_size[0]",
        _set("kernels.0.workgroup_size", [0, 16, 1]),
    ),
    Case(
        "workgroup-threads-2048",
        "MAN007",
        "kernels[0].workgroup_size",
        _set("kernels.0.workgroup_size", [32, 32, 2]),
    ),
    # -- MAN008: bindings
    Case(
        "two-buffers-one-binding",
        "MAN008",
        "kernels[0].bindings[1]",
        _set("kernels.0.bindings.1.binding", 0),
    ),
    Case(
        "uniform-on-a-buffer-binding",
        "MAN008",
        "kernels[0].uniform_binding",
        _set("kernels.0.uniform_binding.binding", 0),
    ),
    Case(
        "group-9", "MAN008", "kernels[0].bindings[0].group", _set("kernels.0.bindings.0.group", 9)
    ),
    Case(
        "binding-99",
        "MAN008",
        "kernels[0].bindings[0].binding",
        _set("kernels.0.bindings.0.binding", 99),
    ),
    Case(
        "buffer-bound-twice",
        "MAN008",
        "kernels[0].bindings[1]",
        _set("kernels.0.bindings.1.buffer", "x"),
    ),
    # -- MAN009: the uniform block
    Case(
        "uniform-1100-fields",
        "MAN009",
        "uniform.fields",
        _fields(["N"] + [f"s{i}" for i in range(1099)]),
    ),
    Case("uniform-field-twice", "MAN009", "uniform.fields[1].name", _fields(["N", "N"])),
    Case("uniform-missing", "MAN009", "kernels[0].uniform_binding", _set("uniform", None)),
    # -- `requires`: a short lowercase word the host knows for the backend, else refused
    Case(
        "requires-not-a-list", "MAN002", "kernels[0].requires", _set("kernels.0.requires", "sm_90a")
    ),
    Case("requires-a-number", "MAN002", "kernels[0].requires[0]", _set("kernels.0.requires", [90])),
    Case(
        "requires-uppercase",
        "MAN002",
        "kernels[0].requires[0]",
        _set("kernels.0.requires", ["SM_90A"]),
    ),
    Case(
        "requires-65-characters",
        "MAN002",
        "kernels[0].requires[0]",
        _set("kernels.0.requires", ["a" * 65]),
    ),
    Case(
        "requires-17",
        "MAN002",
        "kernels[0].requires",
        _set("kernels.0.requires", ["tensor-memory"] * 17),
    ),
    Case(
        "requires-unknown",
        "MAN002",
        "kernels[0].requires[0]",
        _set("kernels.0.requires", ["tensor-memory"]),
        says="kernel `linear_relu_0_matmul` requires `tensor-memory`, which this host does not"
        " know",
    ),
    Case(
        "requires-another-backends",
        "MAN002",
        "kernels[0].requires[0]",
        _set("kernels.0.requires", ["simdgroup-matrix"]),
        says="requires `simdgroup-matrix`, which is for msl kernels, not",
    ),
    Case(
        "requires-sm_90a-off-ptx",
        "MAN002",
        "kernels[0].requires[0]",
        _set("kernels.0.requires", ["sm_90a"]),
        hosts=frozenset({"python-wgsl", "js", "vulkan"}),
    ),
    Case(  # a requirement the CUDA host knows passes the contract, and meets the device
        "requires-sm_90a-on-ptx",
        None,
        None,
        _set("kernels.0.requires", ["sm_90a"]),
        hosts=frozenset({"cuda"}),
    ),
    # -- the call's own values
    Case("input-short", "GPU040", None, short_input=True),
    Case("dim-below-minimum", "GPU042", None, dims={"N": 0}),
    Case("dim-above-its-relation", "GPU042", None, _set("dims.0.max", "N - 1")),
    Case("dim-within-its-relation", None, None, _set("dims.0.max", "N * 2 // 2")),
]


def found_cases() -> list[Case]:
    """The raw fixtures: tests/data/hostile/NAME.json with NAME.expect (`CODE` or `CODE FIELD`),
    the manifest's text as it is (it replaces the base manifest whole)."""
    cases = []
    for path in sorted(FOUND.glob("*.json")):
        expect = path.with_suffix(".expect").read_text().split()
        data = path.read_bytes()
        cases.append(
            Case(
                f"found-{path.stem}",
                expect[0],
                expect[1] if len(expect) > 1 else None,
                lambda m, b, data=data: data,
            )
        )
    return cases


ALL = CASES + found_cases()


def base_manifest(backend: str) -> dict:
    return json.loads((OUT / backend / "linear" / f"{FUNCTION}.manifest.json").read_text())


def write_case(case: Case, backend: str, root: Path) -> Path:
    """The case's folder under `root`: its manifest, the base's kernel files and `NAME.in`
    input files (zeros); returns the manifest's path."""
    folder = root / case.name
    folder.mkdir(parents=True)
    source = OUT / backend / "linear"
    for kernel in source.glob(f"{FUNCTION}_*{SUFFIX[backend]}"):
        (folder / kernel.name).write_bytes(kernel.read_bytes())
    manifest = copy.deepcopy(base_manifest(backend))
    data = case.edit(manifest, backend) if case.edit else None
    if data is None:
        data = json.dumps(manifest, indent=2).encode()
    path = folder / f"{FUNCTION}.manifest.json"
    path.write_bytes(data)
    for name, count in input_counts(case).items():
        (folder / f"{name}.in").write_bytes(bytes(4 * count))
    if case.folder:
        case.folder(folder, backend)
    return path


def input_counts(case: Case) -> dict[str, int]:
    """Elements of each input the call passes (zeros of float32)."""
    n = case.dims["N"]
    counts = {"x": n * 20, "w": 20 * 33, "b": 33}
    if case.short_input:
        counts["x"] -= 1
    return counts


def host_args(case: Case, manifest: Path, output: Path) -> list[str]:
    """The C hosts' command line for the case: dims, inputs, `-o`."""
    folder = manifest.parent
    inputs = [f"{name}=@{folder / f'{name}.in'}" for name in input_counts(case)]
    return [str(manifest), *(f"{k}={v}" for k, v in case.dims.items()), *inputs, "-o", str(output)]
