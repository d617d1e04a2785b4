"""How a host refuses a manifest: one error type, one table of codes.

Every host in this repository (this package's `load()`, the JavaScript module in
`js/`, the C hosts in `examples/hosts/`) refuses a manifest that breaks the
contract of docs/hosts.md with one of the codes below, and names the field at
fault as a path into the manifest (`kernels[0].file`, `buffers[2].shape[1]`),
so one hostile manifest gets the same code from every host. The calls' own
arguments keep the checker's codes (GPU040 a shape, GPU041 a dtype, GPU042 a
dim constraint, GPU043 a value outside its `Range`).

Stdlib-only; imports nothing of Mimir.
"""

from __future__ import annotations

__all__ = ["CODES", "ManifestError"]

# code -> (name, what it refuses). docs/hosts.md has the same table; the JavaScript and C
# hosts use the same codes (tests/test_hostile_manifests.py runs one corpus through all).
CODES: dict[str, tuple[str, str]] = {
    "MAN001": (
        "unreadable-manifest",
        "not a regular file of at most 1 MiB of UTF-8 JSON (RFC 8259), nested at most 32 "
        "deep, with unique keys and no U+0000 in a string",
    ),
    "MAN002": (
        "malformed-field",
        "a field missing, of the wrong type, outside its set of values or over a count limit",
    ),
    "MAN003": (
        "bad-name",
        "a name that is not an identifier, that is given twice, or that names nothing",
    ),
    "MAN004": (
        "bad-kernel-file",
        "a kernel file that is not a plain name in the manifest's folder, a regular file of at "
        "most 16 MiB with the backend's suffix",
    ),
    "MAN005": (
        "bad-dim-expression",
        "a dim expression that does not parse, is too long or too deep, names an unknown dim, "
        "divides by zero or leaves the 64-bit range",
    ),
    "MAN006": (
        "buffer-too-large",
        "a buffer axis that is negative, or more than 2^32 - 1 elements, or more bytes than "
        "the device binds",
    ),
    "MAN007": (
        "launch-too-large",
        "a workgroup count that is negative or over the device's limit, or a workgroup size "
        "over the limits",
    ),
    "MAN008": (
        "bad-binding",
        "two bindings at one place, a buffer bound twice by one kernel, or a group or binding "
        "number out of range",
    ),
    "MAN009": (
        "bad-uniform",
        "a uniform block over 4 KiB, a field named twice, or a kernel reading a uniform the "
        "manifest lacks",
    ),
}


class ManifestError(ValueError):
    """A manifest is malformed, or the values given do not fit it.

    `code` is the refusal's code (a `MAN` code of `CODES`, or one of the checker's codes for
    an argument), `field` the path of the manifest field at fault (both None for refusals
    from before this contract had codes).
    """

    def __init__(self, message: str, code: str | None = None, field: str | None = None) -> None:
        where = f"{field}: " if field else ""
        super().__init__(f"[{code}] {where}{message}" if code else where + message)
        self.code = code
        self.field = field
        self.message = message
