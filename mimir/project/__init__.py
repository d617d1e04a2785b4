"""Whole projects: imports between the modules of a project, resolved without running them.

`resolve` finds the file an import names; `index.Project` reads modules on
demand and tells `read_module` what each import brings in (Dims, constants,
kernels, re-exports), reports cycles, missing modules and unknown names, and
hashes a module's dependencies for caches.
"""

from mimir.project.index import Project
from mimir.project.resolve import Target, package_root, resolve_module

__all__ = ["Project", "Target", "package_root", "resolve_module"]
