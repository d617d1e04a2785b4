"""bfloat16 results: computed into float32 scratch, then packed two to a word.

A bfloat16 buffer holds two elements to a u32 word (element 2k in the low half of word k),
and no backend here stores 16 bits on its own everywhere (WGSL and core SPIR-V have no
16-bit integer store), so a launch whose threads each store one element would have two
threads writing each word: a race. Instead every launch that computes a bfloat16 value
stores it as float32 (the value is already rounded to bfloat16 by the op that made it, so
float32 holds it exactly):

- into a scratch buffer, which this pass makes float32 (a later launch reads it as float32,
  `Evaluator.wide`);
- for an output or an `InOut` parameter, into a new float32 scratch buffer, and a packing
  launch (`Elementwise(copy=True, pack=True)`, `kernels.elementwise.packed`) after it
  stores each word from its two elements: one thread a word, both halves at once, each
  rounded to nearest even, nan as 0x7FC0.

An element-wise launch of one bfloat16 result into outputs or `InOut` parameters (a
thread per element) needs neither: it becomes a packing launch itself, each thread
computing the two elements of its word. The in-place pass's copy of an `InOut` update
out of scratch becomes a packing launch as it is. Launch order follows from the buffers
(`passes.launch_order`): a packing launch reads the scratch its value was stored in, and
writes the parameter after every launch that reads the old value.
"""

from __future__ import annotations

from dataclasses import replace

from mimir.codegen.schedule.layout import row_per_thread
from mimir.codegen.schedule.plan import BufferSpec, Elementwise, Plan
from mimir.codegen.schedule.state import State
from mimir.dtypes import bfloat16, float32


def pack_bfloat16(st: State) -> State:
    """Every bfloat16 value a launch stores goes through float32 scratch, and each output
    or `InOut` parameter of bfloat16 gets a packing launch (module docstring)."""
    ev = st.ev
    stored = [(n, bufs) for p in st.plans for n, bufs in p.computed()]
    if not any(ev.dtype(n) == bfloat16 for n, _ in stored):
        return st
    new = replace(
        st,
        plans=list(st.plans),
        buffers=list(st.buffers),
        node_buffers=dict(st.node_buffers),
        taken=set(st.taken),
    )
    specs = {b.name: k for k, b in enumerate(new.buffers)}

    def widen(name: str) -> None:
        k = specs[name]
        new.buffers[k] = replace(new.buffers[k], dtype=float32)

    def is_param(n: int) -> bool:
        return bool(ev.node(ev.resolve(n))["kind"] == "param")

    def packs_directly(plan: Plan) -> bool:
        """An element-wise launch of one bfloat16 value into outputs or `InOut` parameters
        only, a thread per element: a thread per word computes both elements of its word
        and stores it. An in-place update stays safe: a thread reads the old value only at
        the elements it stores (`inplace.write_in_place_is_safe`), both in its own word.
        Not a thread per row (`p = p @ r` reads the old row anywhere), nor a mirrored one."""
        return (
            isinstance(plan, Elementwise)
            and not plan.also
            and not plan.mirror
            and plan.halves is None
            and ev.dtype(plan.node) == bfloat16
            and all(new.buffers[specs[b]].role != "scratch" for b in plan.writes)
            and not row_per_thread(ev, st.g, plan, st.node_buffers)
        )

    packs: list[Elementwise] = []
    for plan in list(new.plans):
        if isinstance(plan, Elementwise) and plan.copy:
            if ev.dtype(plan.node) == bfloat16:
                plan.pack = True  # an `InOut` update copied out of (widened) scratch
            continue
        if isinstance(plan, Elementwise) and not plan.also and is_param(plan.node):
            if ev.dtype(plan.node) == bfloat16:  # a parameter returned as it is: repacked
                plan.copy = plan.pack = True
            continue
        if packs_directly(plan):
            plan.pack = True  # computes both elements of each word itself: no scratch
            continue
        for node, bufs in plan.computed():
            if ev.dtype(node) != bfloat16:
                continue
            packed = [b for b in bufs if new.buffers[specs[b]].role != "scratch"]
            for name in packed:
                bufs.remove(name)
            for name in bufs:
                widen(name)
            if not bufs:
                scratch = new.scratch_name()
                specs[scratch] = len(new.buffers)
                new.buffers.append(BufferSpec(scratch, "scratch", float32, ev.shape(node)))
                bufs.append(scratch)
            # later launches (and the packing launch) read the value from its scratch
            new.node_buffers[node] = bufs[0]
            packs += [Elementwise(node, [name], copy=True, pack=True) for name in packed]
    new.plans += packs
    return new
