"""Where an import statement's module lives in the project, found on disk, never imported.

Absolute imports are looked up, in order, under the importing file's own
package root (the first directory above it without an `__init__.py`, where
Python itself would start when running from there) and each configured root
(`Config.import_roots`): `a.b` is `a/b.py` or `a/b/__init__.py`. Relative
imports count package levels up from the importing file. A module that is not
in the project is `EXTERNAL` (the standard library, installed packages: they
carry no Mimir facts) unless it is a relative import or its top-level package
is one of the project's, which makes it `MISSING`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Target:
    """What a module name in an import resolved to."""

    name: str  # as written, with leading dots for a relative import
    path: Path | None  # the module's file, when it is in the project
    missing: bool = False  # in the project's namespace, but no such file

    @property
    def external(self) -> bool:
        return self.path is None and not self.missing


def package_root(path: Path) -> Path:
    """The directory above `path`'s outermost package (its directory when not in a package)."""
    here = path.parent
    while (here / "__init__.py").is_file() and here.parent != here:
        here = here.parent
    return here


def _module_file(base: Path, parts: list[str]) -> Path | None:
    where = base.joinpath(*parts) if parts else base
    if parts and where.with_suffix(".py").is_file():
        return where.with_suffix(".py")
    init = where / "__init__.py"
    if init.is_file():
        return init
    return None


def _is_package(base: Path, name: str) -> bool:
    where = base / name
    return (where / "__init__.py").is_file() or (base / f"{name}.py").is_file()


def resolve_module(
    importer: Path, module: str | None, level: int, roots: tuple[Path, ...]
) -> Target:
    """The file of `from <level dots><module> import ...` (or `import <module>`) in `importer`."""
    written = "." * level + (module or "")
    parts = module.split(".") if module else []
    if level > 0:
        base = importer.parent
        for _ in range(level - 1):
            base = base.parent
        found = _module_file(base, parts)
        return Target(written, found, missing=found is None)
    search = (package_root(importer), *roots)
    for root in search:
        found = _module_file(root, parts)
        if found is not None:
            return Target(written, found)
    if parts and any(_is_package(root, parts[0]) for root in search):
        return Target(written, None, missing=True)
    return Target(written, None)
