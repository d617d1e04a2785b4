"""Loaded by every pytest process (each xdist worker) before any test runs."""

import importlib
import importlib.util

# Triton's native library and lavapipe (the Vulkan driver wgpu runs on here) both carry
# LLVM. Loading Triton's into a process where lavapipe is already loaded crashes it (a
# segfault in `import triton`, which `torch._dynamo` also runs, e.g. from
# `torch.optim.Adam`), so a worker that ran a wgpu test before a PyTorch program died,
# depending on how xdist shared out the tests. The other order works: load it first.
# Triton is not a test dependency: it comes with the `bench` extra, or with a CUDA build
# of PyTorch (`.ci/run` installs the CPU build where the machine has its wheel, which
# does not bring it). Where it is absent there is nothing to order.
if importlib.util.find_spec("triton") is not None:
    importlib.import_module("triton")
