"""PTX: one `.visible .entry` per file, text for `.target sm_70` and newer.

(`sm_80` where a kernel uses `cp.async` or `mma.sync`; `.version 8.0` and `sm_90a` where
it multiplies on `wgmma`, a build for `ptx_target="sm_90a"`.)

Layout of a file:

    .version 7.0                        // PTX ISA 7.0: every CUDA 11+ driver JITs it,
    .target sm_70                       //   and ptxas 13.0 accepts it
    .address_size 64
    .func (.reg .f32 %ret) mimir_log(.reg .f32 %a0) { ... }      // helpers, callees first
    .visible .entry NAME(
        .param .u64 .ptr .global .align 4 x,      // buffers, in binding order
        .param .u64 .ptr .global .align 4 out,          // .align 16 when read 4 at a time
        .param .align 16 .b8 mimir_uniforms[16]   // the uniform block, when the kernel reads it
    )
    .reqntid 256, 1, 1
    { .reg ...; .shared ...; prologue; body }

How a host launches it (the manifest's contract, `mimir.runtime.cuda_runner`):
`binding` is the kernel parameter position (`group` is always 0). A buffer
parameter is a `.u64` global-memory device pointer (a `CUdeviceptr`); the
uniform parameter, at `uniform_binding`, is passed *by value*: its bytes are
exactly the manifest's uniform block (fields in order, 4 bytes each,
little-endian, zero-padded to a multiple of 16), so `kernelParams[k]` points
at that block in host memory. `workgroup_size` is `blockDim` (the entry's
`.reqntid`, so a launch with any other block size fails) and `workgroups` is
`gridDim`.

Semantics are kept as `mimir.codegen.backends.ptx.emit` states (wrapping integer
arithmetic, truncating division, `.rn` float operations so ptxas cannot
contract them into an `fma`, subnormals kept, `bar.sync 0` for barriers); the
transcendental sequences and their accuracy are in `mimir.codegen.backends.ptx.mathlib`
and docs/ptx.md. `PTX(math="fast")` (the default) uses the hardware's
`ex2.approx.ftz`/`rcp.approx.ftz` inside them and inlines sigmoid, tanh and gelu;
`PTX(math="precise")` keeps every instruction correctly rounded. Read-only buffers
are loaded with `ld.global.nc` (distinct manifest buffers never alias). float16
needs nothing beyond `.target sm_70` (`cvt` between f16 and f32 is sm_53+): values
travel as `.b16` bits and are computed in f32, rounded back once per op.

Limits: 1024 threads per block (x, y <= 1024, z <= 64) and 48 KiB of static
shared memory (the `.shared` ceiling without opting in to more). Anything the
emitter cannot print (an op on a type PTX has no instruction for, a helper
with a bool parameter) is refused by `check` with the reason, and then
`compile-gpu` reports GPU070 and writes nothing.

The folder:

- `backend`: `PTX`, the `Backend` (capabilities, tables, `check`, `print_kernel`);
- `registers`: typed virtual registers and labels for one function body;
- `tables`: IR operators, types and builtins to PTX instruction names;
- `emit`: kernel-IR expressions and statements to PTX instructions;
- `mathlib`: exp, log, tanh and pow as instruction sequences, with their accuracy;
- `emulate`: exact CPU execution of those sequences (float32, round to nearest even).
"""

from __future__ import annotations

from mimir.codegen.backends.ptx.backend import PTX, PTX_ASYNC_TARGET, PTX_TARGET, PTX_VERSION
from mimir.codegen.backends.ptx.mathlib import ACCURACY

__all__ = ["ACCURACY", "PTX", "PTX_ASYNC_TARGET", "PTX_TARGET", "PTX_VERSION"]
