"""`z3`, with its shared library bound to itself.

Mesa's software Vulkan driver (lavapipe, which `wgpu` loads to run kernels on
the CPU) links LLVM, which links the system's `libz3.so.4`. Once that library
is in the process, a call from the z3-solver wheel's `libz3.so` into one of its
own exported functions that was not bound yet can resolve to the *system*
copy, and Z3 aborts (`std::bad_variant_access` inside `Z3_get_numeral_string`).
Loading the wheel's library first with `RTLD_DEEPBIND | RTLD_NOW` makes it
prefer its own symbols and binds every call at load time, whatever is loaded
later. Every Mimir module imports z3 through here.
"""

from __future__ import annotations

import ctypes
import glob
import importlib.util
import os


def _preload() -> None:
    deepbind = getattr(os, "RTLD_DEEPBIND", None)
    spec = importlib.util.find_spec("z3")
    if deepbind is None or spec is None or not spec.submodule_search_locations:
        return  # not glibc (no symbol interposition to guard against), or no z3
    for folder in spec.submodule_search_locations:
        # The name z3core loads first: the versioned one (`libz3.so.5.4`), then `libz3.so`.
        lib = os.path.join(folder, "lib")
        for path in sorted(glob.glob(os.path.join(lib, "libz3.so.*"))) + [
            os.path.join(lib, "libz3.so")
        ]:
            try:
                ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_GLOBAL | deepbind)
            except OSError:
                continue
            return


_preload()

import z3  # noqa: E402  (after the preload, on purpose)

__all__ = ["z3"]
