"""Run one module's text (unmodified, or a copy with a planted bug) under CPU PyTorch.

Reads a JSON job on stdin: `path` (folders put first on sys.path), `module` (its dotted
name), `file` (its path, which tracebacks name), `text` and `run` (code that builds and
calls what the module defines, with the module as `m`). Prints one JSON line: `line`, the
line of `file` the run raised at (its innermost frame there), or null when it ran clean,
and `error`. The module's package is imported for real; a few heavy optional packages
the projects import but the runs never use (torchvision, numba, ...) are stubbed where they
are not installed.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import json
import sys
import traceback
import types
import warnings
from typing import Any

STUBBED = {
    "torchvision",
    "tiktoken",
    "numba",
    "fairscale",
    "more_itertools",
    "PIL",
    "accelerate",
    "transformers",
    "scipy",
    "sentencepiece",
    "jinja2",
    "triton",
    "kornia",
}


class _Dummy:
    """Anything a stubbed module is asked for: callable, subscriptable, a decorator."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and (callable(args[0]) or isinstance(args[0], type)):
            return args[0]
        return _Dummy()

    def __getattr__(self, name: str) -> Any:
        return _Dummy()

    def __iter__(self) -> Any:
        return iter(())

    def __or__(self, other: Any) -> Any:
        return self

    def __ror__(self, other: Any) -> Any:
        return self

    def __getitem__(self, key: Any) -> Any:
        return _Dummy()

    def __bool__(self) -> bool:
        return False

    def __mro_entries__(self, bases: Any) -> tuple:
        return (object,)


class _StubModule(types.ModuleType):
    __path__: list[str] = []

    def __getattr__(self, name: str) -> Any:
        if name == "__version__":
            return "0.0.0"
        if name.startswith("__"):
            raise AttributeError(name)
        return _Dummy()


# Modules of a real package that need its compiled operators, which a CPU-only run lacks:
# torchvision's fake-tensor registrations name operators its CUDA build defines.
EMPTY = {"torchvision._meta_registrations"}


class _Stubs(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, empty_only: bool = False) -> None:
        self.empty_only = empty_only  # first on the path: only the EMPTY modules

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name in EMPTY:
            return importlib.machinery.ModuleSpec(name, self)
        if self.empty_only or name.split(".")[0] not in STUBBED:
            return None
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec: Any) -> types.ModuleType:
        return types.ModuleType(spec.name) if spec.name in EMPTY else _StubModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def main() -> None:
    job = json.loads(sys.stdin.read())
    sys.path[:0] = job["path"]
    warnings.simplefilter("ignore")
    import torch

    sys.meta_path.insert(0, _Stubs(empty_only=True))
    sys.meta_path.append(_Stubs())  # only what is not installed
    torch.manual_seed(0)
    name, file = job["module"], job["file"]
    package = name.rpartition(".")[0]
    result: dict[str, Any] = {"line": None, "error": None}
    try:
        if package:
            importlib.import_module(package)
        module = types.ModuleType(name)
        module.__file__ = file
        module.__package__ = package
        sys.modules[name] = module
        if package:
            setattr(sys.modules[package], name.rpartition(".")[2], module)
        if name.startswith("torchvision.models."):
            # the package registered the unmodified module's builders by name: the copy
            # registers them again
            sys.modules["torchvision.models._api"].BUILTIN_MODELS.clear()
        exec(compile(job["text"], file, "exec"), module.__dict__)
        exec(compile(job["run"], "<run>", "exec"), {"m": module, "torch": torch})
    except BaseException as err:  # noqa: BLE001 - every crash is what is measured
        frames = [f for f in traceback.extract_tb(err.__traceback__) if f.filename == file]
        result["line"] = frames[-1].lineno if frames else -1
        result["error"] = f"{type(err).__name__}: {str(err)[:200]}"
    print(json.dumps(result))


if __name__ == "__main__":
    main()
