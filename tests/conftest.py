"""Loaded by every pytest process (each xdist worker) before any test runs."""

# Triton's native library and lavapipe (the Vulkan driver wgpu runs on here) both carry
# LLVM. Loading Triton's into a process where lavapipe is already loaded crashes it (a
# segfault in `import triton`, which `torch._dynamo` also runs, e.g. from
# `torch.optim.Adam`), so a worker that ran a wgpu test before a PyTorch program or a
# Triton anchor died, depending on how xdist shared out the tests. The other order works:
# load it first, before any test can create a wgpu device.
try:
    import triton  # noqa: F401
except ImportError:  # an environment without the test extras: nothing to order
    pass
