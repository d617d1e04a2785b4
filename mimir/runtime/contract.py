"""The manifest contract: every rule a host checks before it trusts a manifest.

A manifest is input anyone can hand a host, so nothing in it is trusted: this
module is the Python host's half of the contract docs/hosts.md states (the
JavaScript host in `js/src/contract.js` and the C hosts in
`examples/hosts/common/manifest.c` implement the same rules, in the same
order, with the same codes). Three stages:

- `read_manifest(path)` / `parse_manifest(data)`: the bytes are a regular
  file of at most `MAX_MANIFEST_BYTES`, UTF-8, strict JSON (no NaN, no
  duplicate keys, no U+0000 or lone surrogate in a string) nested at most
  `MAX_JSON_DEPTH` deep (MAN001);
- `check_manifest(manifest, backend)`: the schema's types and sets, names that
  are identifiers, plain kernel file names, parseable dim expressions over
  declared dims, bindings unique and in range, a uniform block of at most 4 KiB
  (MAN002 to MAN009); what it accepts is safe to index without further checks;
- at a call, with the dims bound: `buffer_extent` and `launch_counts` compute
  every size exactly and refuse what is negative, over 2^32 - 1 elements or
  over the device's limits (MAN005 to MAN007); `read_kernel_file` opens a
  kernel file without following a link (MAN004).

Stdlib-only.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mimir.runtime.dimexpr import DimExprError, evaluate, names, parse
from mimir.runtime.errors import ManifestError

__all__ = [
    "BACKENDS",
    "DTYPE_SIZES",
    "FORMAT",
    "MAX_JSON_DEPTH",
    "MAX_KERNEL_FILE_BYTES",
    "MAX_MANIFEST_BYTES",
    "REQUIREMENTS",
    "U32_MAX",
    "buffer_extent",
    "check_kernel_file",
    "check_manifest",
    "evaluate_field",
    "launch_counts",
    "parse_manifest",
    "range_bounds",
    "read_kernel_file",
    "read_manifest",
]

FORMAT = "mimir-manifest/1"
U32_MAX = 2**32 - 1
MAX_MANIFEST_BYTES = 1 << 20
MAX_KERNEL_FILE_BYTES = 16 << 20
MAX_JSON_DEPTH = 32
# The largest integer every host reads exactly from JSON (a double holds it; 2**53 is next).
MAX_EXACT = 2**53 - 1
MAX_NAME_LENGTH = 128
MAX_DIMS = 64
MAX_BUFFERS = 256
MAX_KERNELS = 256
MAX_RANK = 8
MAX_BINDINGS = 32
MAX_GROUP = 3  # bind groups / descriptor sets 0..3: WebGPU's and Vulkan's guaranteed 4
MAX_BINDING = 31
MAX_UNIFORM_FIELDS = 1024  # 4 KiB: Metal's setBytes, CUDA's classic parameter space
# workgroup_size: CUDA's and Metal's guaranteed limits (x, y, z and threads in all)
MAX_WORKGROUP_SIZE = (1024, 1024, 64)
MAX_WORKGROUP_THREADS = 1024

BACKENDS = ("msl", "wgsl", "ptx", "spirv")
SUFFIX = {"msl": ".metal", "wgsl": ".wgsl", "ptx": ".ptx", "spirv": ".spv"}
ROLES = ("input", "output", "inout", "scratch")
UPLOADED = ("input", "inout")
DTYPE_SIZES = {"float32": 4, "float16": 2, "bfloat16": 2, "int32": 4, "uint32": 4, "bool_": 4}
ACCESS = ("read", "read_write")
UNIFORM_TYPES = ("u32", "i32", "f32")
# What a kernel may require of the device beyond its backend's baseline, by backend: the
# requirements a host knows how to check. Any other is refused before anything is allocated.
REQUIREMENTS = {
    "msl": ("simdgroup-32", "msl-3.2", "simdgroup-matrix"),
    "ptx": ("sm_90a",),
    "wgsl": (),
    "spirv": (),
}
MAX_REQUIREMENTS = 16
MAX_REQUIREMENT_LENGTH = 64

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\Z")
_REQUIREMENT = re.compile(r"[a-z0-9][a-z0-9_.-]*\Z")


# ------------------------------------------------------------------ stage 1: bytes to JSON


def read_manifest(path: str | Path) -> dict[str, Any]:
    """The JSON object of the manifest at `path`; `ManifestError` MAN001 when it is not one."""
    data = _read_regular(Path(path), MAX_MANIFEST_BYTES, "MAN001", None, follow=True)
    return parse_manifest(data)


def parse_manifest(data: bytes) -> dict[str, Any]:
    """The JSON value of `data` under the contract's JSON rules (MAN001 otherwise)."""
    if len(data) > MAX_MANIFEST_BYTES:
        raise _unreadable(f"is {len(data)} bytes, over the limit of {MAX_MANIFEST_BYTES}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise _unreadable(f"is not UTF-8 (byte {err.start})") from None
    depth = _nesting(text)
    if depth > MAX_JSON_DEPTH:
        raise _unreadable(f"nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        value = json.loads(
            text,
            object_pairs_hook=_unique_keys,
            parse_constant=_no_constant,
            parse_int=_integer,
        )
    except json.JSONDecodeError as err:
        raise _unreadable(
            f"is not JSON: {err.msg} at line {err.lineno} column {err.colno}"
        ) from None
    except _RefusedError as err:
        raise _unreadable(str(err)) from None
    _check_strings(value)
    return value


class _RefusedError(ValueError):
    pass


def _unreadable(why: str) -> ManifestError:
    return ManifestError(f"the manifest {why}", "MAN001", None)


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def _nesting(text: str) -> int:
    """How deep `text`'s arrays and objects nest (strings skipped), before parsing it."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    depth = deepest = 0
    for char in brackets:
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _RefusedError(f"has the key {_show(key)} twice in one object")
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise _RefusedError(f"holds {name}, which is not JSON")


def _integer(text: str) -> int | float:
    # Python reads any number of digits exactly; other hosts read a double. Past 400 digits
    # this is a float (infinity), as in those hosts, so the same field check refuses it.
    return int(text) if len(text) <= 400 else float(text)


def _check_strings(value: Any) -> None:
    """No string (key or value) holds U+0000 or a lone surrogate: not every host can."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, member in item.items():
                _check_string(key)
                stack.append(member)
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            _check_string(item)


def _check_string(text: str) -> None:
    if "\x00" in text:
        raise _unreadable("holds a string with U+0000 in it")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise _unreadable("holds a string with a lone UTF-16 surrogate in it") from None


# ------------------------------------------------------------------ stage 2: the fields


def check_manifest(manifest: Any, backend: str | Sequence[str] | None = None) -> None:
    """Refuse `manifest` unless every field follows the contract; `backend` is what this host
    runs (a name or several; None: any).

    The order of the checks is the contract's (docs/hosts.md), the same in every host, so a
    manifest with several faults gets the same code everywhere.
    """
    root = _object(manifest, "(manifest)")
    if root.get("format") != FORMAT:
        raise ManifestError(
            f"unsupported manifest format {_show(root.get('format'))}; expected {FORMAT!r}",
            "MAN002",
            "format",
        )
    _identifier(root.get("function"), "function")
    _backend(root.get("backend"), backend)
    dims = _dims(root.get("dims"))
    buffers = _buffers(root.get("buffers"), dims)
    _solves(root["dims"], dims, buffers)
    has_uniform = _uniform(root.get("uniform"))
    kernels = _list(root.get("kernels"), "kernels", MAX_KERNELS)
    for k, kernel in enumerate(kernels):
        _kernel(kernel, f"kernels[{k}]", root["backend"], dims, buffers, has_uniform)


def _backend(value: Any, wanted: str | Sequence[str] | None) -> None:
    if value not in BACKENDS:
        raise ManifestError(
            f"unknown backend {_show(value)}; expected one of {', '.join(BACKENDS)}",
            "MAN002",
            "backend",
        )
    allowed = (wanted,) if isinstance(wanted, str) else wanted
    if allowed is not None and value not in allowed:
        raise ManifestError(
            f"this host runs {' or '.join(allowed)}, not {value}", "MAN002", "backend"
        )


def _dims(value: Any) -> set[str]:
    seen: set[str] = set()
    for i, entry in enumerate(_list(value, "dims", MAX_DIMS)):
        where = f"dims[{i}]"
        dim = _object(entry, where)
        name = _identifier(dim.get("name"), f"{where}.name")
        if name in seen:
            raise ManifestError(f"dim `{name}` is declared twice", "MAN003", f"{where}.name")
        seen.add(name)
        for key, low in (("min", 0), ("max", 0), ("multiple_of", 1)):
            if dim.get(key) is not None and not (key != "multiple_of" and _is_text(dim[key])):
                _integer_field(dim[key], f"{where}.{key}", low, U32_MAX, "MAN002")
    for i, dim in enumerate(value):  # a relation with other dims (`max: "MAXT"`), once all named
        for key in ("min", "max"):
            if _is_text(dim.get(key)):
                _expression(dim[key], f"dims[{i}].{key}", seen)
    return seen


def _is_text(value: Any) -> bool:
    return isinstance(value, str)


def _buffers(value: Any, dims: set[str]) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = {}
    for i, entry in enumerate(_list(value, "buffers", MAX_BUFFERS)):
        where = f"buffers[{i}]"
        buf = _object(entry, where)
        name = _identifier(buf.get("name"), f"{where}.name")
        if name in out:
            raise ManifestError(f"buffer `{name}` is declared twice", "MAN003", f"{where}.name")
        role = _choice(buf.get("role"), ROLES, f"{where}.role")
        dtype = _choice(buf.get("dtype"), tuple(DTYPE_SIZES), f"{where}.dtype")
        if "element_size" in buf and (
            _integer_field(buf["element_size"], f"{where}.element_size", 1, 16, "MAN002")
            != DTYPE_SIZES[dtype]
        ):
            raise ManifestError(
                f"element_size {buf['element_size']} is not the {DTYPE_SIZES[dtype]} bytes of "
                f"{dtype}",
                "MAN002",
                f"{where}.element_size",
            )
        shape = _list(buf.get("shape"), f"{where}.shape", MAX_RANK)
        for a, size in enumerate(shape):
            _size(size, f"{where}.shape[{a}]", dims, "MAN006")
        bounds = buf.get("range")
        if bounds is not None:
            if not (
                isinstance(bounds, list)
                and len(bounds) == 2
                and role in UPLOADED
                and dtype in ("int32", "uint32")
            ):
                raise ManifestError(
                    "a range is two bounds on an integer input", "MAN002", f"{where}.range"
                )
            for e, bound in enumerate(bounds):
                if isinstance(bound, str):
                    _expression(bound, f"{where}.range[{e}]", dims)
                else:
                    _integer_field(bound, f"{where}.range[{e}]", -MAX_EXACT, MAX_EXACT, "MAN002")
        out[name] = buf
    return out


def _solves(entries: list, dims: set[str], buffers: Mapping[str, Mapping[str, Any]]) -> None:
    """Each dim's `solve` (after the buffers, which it names): an input buffer, one of its
    axes, a `scale` of at least 1 and an `offset`, each an int or an expression over dims."""
    for i, entry in enumerate(entries):
        if entry.get("solve") is None:
            continue
        where = f"dims[{i}].solve"
        solve = _object(entry["solve"], where)
        name = _identifier(solve.get("buffer"), f"{where}.buffer")
        buf = buffers.get(name)
        if buf is None or buf["role"] not in UPLOADED:
            raise ManifestError(f"`{name}` is not an input buffer", "MAN003", f"{where}.buffer")
        _integer_field(solve.get("axis"), f"{where}.axis", 0, len(buf["shape"]) - 1, "MAN002")
        for key, low, high in (("scale", 1, U32_MAX), ("offset", -MAX_EXACT, MAX_EXACT)):
            value = solve.get(key)
            if isinstance(value, str):
                _expression(value, f"{where}.{key}", dims)
            else:
                _integer_field(value, f"{where}.{key}", low, high, "MAN002")


def _uniform(value: Any) -> bool:
    if value is None:
        return False
    uniform = _object(value, "uniform")
    fields = uniform.get("fields")
    if not isinstance(fields, list):
        raise ManifestError("must be a list", "MAN002", "uniform.fields")
    if len(fields) > MAX_UNIFORM_FIELDS:
        raise ManifestError(
            f"{len(fields)} fields of 4 bytes are over the 4 KiB uniform block "
            f"(at most {MAX_UNIFORM_FIELDS})",
            "MAN009",
            "uniform.fields",
        )
    seen: set[str] = set()
    for i, entry in enumerate(fields):
        where = f"uniform.fields[{i}]"
        item = _object(entry, where)
        name = _identifier(item.get("name"), f"{where}.name")
        if name in seen:
            raise ManifestError(
                f"uniform field `{name}` is given twice (two values for one name)",
                "MAN009",
                f"{where}.name",
            )
        seen.add(name)
        _choice(item.get("type"), UNIFORM_TYPES, f"{where}.type")
    return True


def _kernel(
    value: Any,
    where: str,
    backend: str,
    dims: set[str],
    buffers: Mapping[str, Mapping[str, Any]],
    has_uniform: bool,
) -> None:
    kernel = _object(value, where)
    file = kernel.get("file")
    if not isinstance(file, str):
        raise ManifestError("must be a file name", "MAN002", f"{where}.file")
    _file_name(file, f"{where}.file", backend)
    _identifier(kernel.get("entry_point"), f"{where}.entry_point")
    size = kernel.get("workgroup_size")
    if not isinstance(size, list) or len(size) != 3:
        raise ManifestError("must be a list of 3 integers", "MAN002", f"{where}.workgroup_size")
    threads = 1
    for axis, (n, limit) in enumerate(zip(size, MAX_WORKGROUP_SIZE, strict=True)):
        field = f"{where}.workgroup_size[{axis}]"
        count = _integer_field(n, field, 1, U32_MAX, "MAN007")
        if count > limit:
            raise ManifestError(f"{count} threads is over the limit of {limit}", "MAN007", field)
        threads *= count
    if threads > MAX_WORKGROUP_THREADS:
        raise ManifestError(
            f"{threads} threads per workgroup is over the limit of {MAX_WORKGROUP_THREADS}",
            "MAN007",
            f"{where}.workgroup_size",
        )
    groups = kernel.get("workgroups")
    if not isinstance(groups, list) or len(groups) != 3:
        raise ManifestError("must be a list of 3 sizes", "MAN002", f"{where}.workgroups")
    for axis, count in enumerate(groups):
        _size(count, f"{where}.workgroups[{axis}]", dims, "MAN007")
    bindings = _list(kernel.get("bindings"), f"{where}.bindings", MAX_BINDINGS)
    places: dict[tuple[int, int], str] = {}
    bound: set[str] = set()
    for i, entry in enumerate(bindings):
        at = f"{where}.bindings[{i}]"
        binding = _object(entry, at)
        name = _identifier(binding.get("buffer"), f"{at}.buffer")
        if name not in buffers:
            raise ManifestError(
                f"names no buffer of the manifest: `{name}`", "MAN003", f"{at}.buffer"
            )
        place = _place(binding, at)
        _choice(binding.get("access"), ACCESS, f"{at}.access")
        if place in places:
            raise ManifestError(
                f"`{name}` and {places[place]} are both at group {place[0]}, binding {place[1]}",
                "MAN008",
                at,
            )
        if name in bound:
            raise ManifestError(f"buffer `{name}` is bound twice by one kernel", "MAN008", at)
        places[place] = f"`{name}`"
        bound.add(name)
    ub = kernel.get("uniform_binding")
    if ub is not None:
        at = f"{where}.uniform_binding"
        place = _place(_object(ub, at), at)
        if not has_uniform:
            raise ManifestError("the manifest has no uniform to bind", "MAN009", at)
        if place in places:
            raise ManifestError(
                f"the uniform and {places[place]} are both at group {place[0]}, binding {place[1]}",
                "MAN008",
                at,
            )
        places[place] = "the uniform"
    if backend in ("ptx", "msl") and any(group for group, _ in places):
        raise ManifestError(f"{backend} binds everything in group 0", "MAN008", f"{where}.bindings")
    if backend == "ptx" and sorted(b for _, b in places) != list(range(len(places))):
        raise ManifestError(
            "PTX parameter positions must be 0 to "
            f"{len(places) - 1}, each once; got {sorted(b for _, b in places)}",
            "MAN008",
            f"{where}.bindings",
        )
    if "requires" in kernel:
        _requires(kernel["requires"], f"{where}.requires", kernel["entry_point"], backend)


def _requires(value: Any, field: str, entry_point: str, backend: str) -> None:
    """Each requirement a short lowercase word (MAN002), and one this host knows for the
    manifest's backend: an unknown one, or another backend's, is refused (MAN002) rather than
    left to fail inside the driver."""
    for i, requirement in enumerate(_list(value, field, MAX_REQUIREMENTS)):
        at = f"{field}[{i}]"
        if (
            not isinstance(requirement, str)
            or len(requirement) > MAX_REQUIREMENT_LENGTH
            or not _REQUIREMENT.match(requirement)
        ):
            raise ManifestError(
                f"{_show(requirement)} is not a requirement ([a-z0-9][a-z0-9_.-]*, at most "
                f"{MAX_REQUIREMENT_LENGTH} characters)",
                "MAN002",
                at,
            )
        if requirement in REQUIREMENTS[backend]:
            continue
        owner = next((b for b, known in REQUIREMENTS.items() if requirement in known), None)
        if owner is None:
            why = f"kernel `{entry_point}` requires `{requirement}`, which this host does not know"
        else:
            why = (
                f"kernel `{entry_point}` requires `{requirement}`, which is for {owner} "
                f"kernels, not {backend}"
            )
        raise ManifestError(why, "MAN002", at)


def _place(binding: Mapping[str, Any], at: str) -> tuple[int, int]:
    group = _integer_field(binding.get("group"), f"{at}.group", 0, MAX_GROUP, "MAN008")
    number = _integer_field(binding.get("binding"), f"{at}.binding", 0, MAX_BINDING, "MAN008")
    return group, number


def _file_name(name: str, field: str, backend: str) -> None:
    if not _FILE_NAME.match(name) or len(name) > 255:
        raise ManifestError(
            f"{_show(name)} is not a plain file name in the manifest's folder (letters, digits, "
            "`_`, `.`, `-`; no separator, no scheme)",
            "MAN004",
            field,
        )
    if not name.endswith(SUFFIX[backend]):
        raise ManifestError(
            f"{_show(name)} is not a {backend} file (`{SUFFIX[backend]}`)", "MAN004", field
        )


def _size(value: Any, field: str, dims: set[str], code: str) -> None:
    """A shape entry or a workgroup count: an integer in 0..2^32 - 1, or a dim expression."""
    if isinstance(value, str):
        _expression(value, field, dims)
        return
    _integer_field(value, field, 0, U32_MAX, code)


def _expression(text: str, field: str, dims: set[str]) -> None:
    try:
        parse(text)
        unknown = sorted(names(text) - dims)
    except DimExprError as err:
        raise DimExprError(err.message, field) from None
    if unknown:
        raise DimExprError(f"`{unknown[0]}` is not a dim of this manifest", field)


def _object(value: Any, field: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise ManifestError(f"must be an object, got {_kind(value)}", "MAN002", field)
    return value


def _list(value: Any, field: str, limit: int) -> list:
    if not isinstance(value, list):
        raise ManifestError(f"must be a list, got {_kind(value)}", "MAN002", field)
    if len(value) > limit:
        raise ManifestError(f"has {len(value)} entries, over the limit of {limit}", "MAN002", field)
    return value


def _identifier(value: Any, field: str) -> str:
    if not isinstance(value, str) or not _IDENTIFIER.match(value) or len(value) > MAX_NAME_LENGTH:
        raise ManifestError(
            f"{_show(value)} is not an identifier ([A-Za-z_][A-Za-z0-9_]*, at most "
            f"{MAX_NAME_LENGTH} characters)",
            "MAN003",
            field,
        )
    return value


def _choice(value: Any, choices: Sequence[str], field: str) -> str:
    if value not in choices or not isinstance(value, str):
        raise ManifestError(f"{_show(value)} is not one of {', '.join(choices)}", "MAN002", field)
    return value


def _integer_field(value: Any, field: str, low: int, high: int, code: str) -> int:
    """An integer-valued JSON number (1 and 1.0 alike), in [low, high] (else `code`)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ManifestError(f"must be an integer, got {_kind(value)}", "MAN002", field)
    if isinstance(value, float):
        if not value.is_integer():
            raise ManifestError(f"must be an integer, got {value!r}", "MAN002", field)
        value = int(value)
    if not low <= value <= high:
        raise ManifestError(f"{_show(value)} is outside {low}..{high}", code, field)
    return value


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string",
            list: "a list", dict: "an object"}.get(type(value), type(value).__name__)  # fmt: skip


def _show(value: Any) -> str:
    text = json.dumps(value) if isinstance(value, (str, int, float)) else _kind(value)
    return text if len(text) <= 60 else text[:57] + "..."


# ------------------------------------------------------------------ stage 3: at a call


def buffer_extent(
    manifest: Mapping[str, Any],
    index: int,
    dims: Mapping[str, int],
    max_bytes: int | None = None,
) -> tuple[tuple[int, ...], int, int]:
    """(shape, elements, bytes) of buffer `index` under `dims`, every one of them checked:
    each axis and the element count in 0..2^32 - 1, the bytes within `max_bytes` (MAN006)."""
    buf = manifest["buffers"][index]
    where = f"buffers[{index}].shape"
    shape = []
    for a, entry in enumerate(buf["shape"]):
        n = evaluate_field(entry, dims, f"{where}[{a}]")
        if not 0 <= n <= U32_MAX:
            raise ManifestError(
                f"buffer `{buf['name']}` would have {n} elements along axis {a}",
                "MAN006",
                f"{where}[{a}]",
            )
        shape.append(n)
    count = math.prod(shape)
    if count > U32_MAX:
        raise ManifestError(
            f"buffer `{buf['name']}` would have {count} elements; kernels index with 32-bit "
            "integers, so at most 2^32 - 1",
            "MAN006",
            where,
        )
    nbytes = count * DTYPE_SIZES[buf["dtype"]]
    if buf["dtype"] == "bfloat16":
        nbytes += nbytes % 4  # whole 32-bit words
    if max_bytes is not None and nbytes > max_bytes:
        raise ManifestError(
            f"buffer `{buf['name']}` would be {nbytes} bytes, over this device's limit of "
            f"{max_bytes} for one binding",
            "MAN006",
            where,
        )
    return tuple(shape), count, nbytes


def launch_counts(
    manifest: Mapping[str, Any],
    index: int,
    dims: Mapping[str, int],
    limits: Sequence[int] = (U32_MAX, U32_MAX, U32_MAX),
) -> tuple[int, int, int]:
    """The workgroup counts of kernel `index` under `dims`, each in 0..`limits[axis]`, the
    device's maximum per dimension (MAN007): a count past it is refused, never truncated."""
    kernel = manifest["kernels"][index]
    counts = []
    for axis, (entry, limit) in enumerate(zip(kernel["workgroups"], limits, strict=True)):
        field = f"kernels[{index}].workgroups[{axis}]"
        n = evaluate_field(entry, dims, field)
        if not 0 <= n <= limit:
            raise ManifestError(
                f"kernel `{kernel['entry_point']}` would launch {n} workgroups along "
                f"{'xyz'[axis]}; this device takes 0 to {limit}",
                "MAN007",
                field,
            )
        counts.append(n)
    return counts[0], counts[1], counts[2]


def solve_dims(
    manifest: Mapping[str, Any], shapes: Mapping[str, Sequence[int]], env: dict[str, int]
) -> None:
    """Bind in `env` each dim with a `solve` that `env` lacks, from the input shapes (buffer
    name -> its argument's shape): after the dims shapes name alone, again and again while
    one more dim's `scale` and `offset` have all their dims bound. The size less the offset
    must be a multiple of the scale (GPU040); a scale below 1 is the manifest's (MAN005)."""
    pending = [
        (i, d) for i, d in enumerate(manifest.get("dims", []))
        if d.get("solve") is not None and d["name"] not in env
    ]  # fmt: skip
    progress = True
    while pending and progress:
        progress = False
        for i, dim in list(pending):
            solve = dim["solve"]
            used = set()
            for key in ("scale", "offset"):
                if isinstance(solve[key], str):
                    used |= names(solve[key])
            if not used <= set(env):
                continue
            where = f"dims[{i}].solve"
            scale = evaluate_field(solve["scale"], env, f"{where}.scale")
            offset = evaluate_field(solve["offset"], env, f"{where}.offset")
            if scale < 1:
                raise DimExprError(f"scale {scale} of dim `{dim['name']}` is below 1",
                                   f"{where}.scale")  # fmt: skip
            axis = int(solve["axis"])
            size = shapes[solve["buffer"]][axis]
            value, rest = divmod(size - offset, scale)
            if rest:
                left = f"{size}" if offset == 0 else f"{size} - {offset}"
                raise ManifestError(
                    f"argument `{solve['buffer']}` has size {size} on axis {axis}, which fits "
                    f"no `{dim['name']}` ({left} is not a multiple of {scale})",
                    "GPU040",
                )
            env[dim["name"]] = value
            pending.remove((i, dim))
            progress = True


def range_bounds(
    manifest: Mapping[str, Any], index: int, dims: Mapping[str, int]
) -> tuple[int, int]:
    """The evaluated `range` [lo, hi) of buffer `index` (MAN005 when a bound fails)."""
    lo, hi = manifest["buffers"][index]["range"]
    where = f"buffers[{index}].range"
    return evaluate_field(lo, dims, f"{where}[0]"), evaluate_field(hi, dims, f"{where}[1]")


def evaluate_field(entry: Any, dims: Mapping[str, int], field: str) -> int:
    """The value of a size (an int or a dim expression) that sits at `field` of the manifest;
    a `DimExprError` names that field."""
    if isinstance(entry, float):
        return int(entry)
    try:
        return evaluate(entry, dims)
    except DimExprError as err:
        raise DimExprError(err.message, field) from None


def read_kernel_file(directory: str | Path, manifest: Mapping[str, Any], index: int) -> bytes:
    """The bytes of kernel `index`'s file: a regular file (not a link) of at most
    `MAX_KERNEL_FILE_BYTES` in `directory` (MAN004)."""
    name = manifest["kernels"][index]["file"]
    return _read_regular(
        Path(directory) / name, MAX_KERNEL_FILE_BYTES, "MAN004", f"kernels[{index}].file"
    )


def check_kernel_file(directory: str | Path, manifest: Mapping[str, Any], index: int) -> None:
    """Refuse (MAN004) unless kernel `index`'s file is there: a regular file, not a link, of
    at most `MAX_KERNEL_FILE_BYTES` (`read_kernel_file` checks again as it reads)."""
    name = manifest["kernels"][index]["file"]
    path = Path(directory) / name
    field = f"kernels[{index}].file"
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise ManifestError(
            f"kernel file `{name}` does not exist ({path})", "MAN004", field
        ) from None
    except OSError as err:
        raise ManifestError(f"kernel file `{name}`: {err.strerror}", "MAN004", field) from None
    if stat.S_ISLNK(info.st_mode):
        raise ManifestError(f"kernel file `{name}` is a symbolic link", "MAN004", field)
    if not stat.S_ISREG(info.st_mode):
        raise ManifestError(f"kernel file `{name}` is not a regular file", "MAN004", field)
    if info.st_size > MAX_KERNEL_FILE_BYTES:
        raise ManifestError(
            f"kernel file `{name}` is {info.st_size} bytes, over the limit of "
            f"{MAX_KERNEL_FILE_BYTES}",
            "MAN004",
            field,
        )


def _read_regular(
    path: Path, limit: int, code: str, field: str | None, follow: bool = False
) -> bytes:
    what = "the manifest" if field is None else f"kernel file `{path.name}`"
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise ManifestError(f"{what} does not exist ({path})", code, field) from None
    except OSError as err:
        why = "is a symbolic link" if not follow and os.path.islink(path) else err.strerror
        raise ManifestError(f"{what} cannot be opened: {why} ({path})", code, field) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ManifestError(f"{what} is not a regular file ({path})", code, field)
        if info.st_size > limit:
            raise ManifestError(
                f"{what} is {info.st_size} bytes, over the limit of {limit}", code, field
            )
        chunks, total = [], 0
        while total <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as err:
        raise ManifestError(f"{what} cannot be read: {err.strerror}", code, field) from None
    finally:
        os.close(fd)
    if total > limit:
        raise ManifestError(f"{what} grew past the limit of {limit} bytes", code, field)
    return b"".join(chunks)
