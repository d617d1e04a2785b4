"""Passes over built IR kernels, before they are printed.

- `launch_order`: each launch after the launches whose results it reads;
- `side_by_side`: independent launches of one function as one launch;
- `contract`: float32 `a * b + c` as one `fma`;
- `workgroup_memory`: each `WarpReduce` as a tree in workgroup memory, for targets
  without warp functions.

Each takes kernels and returns kernels; none imports a kernel builder or a backend.
"""
