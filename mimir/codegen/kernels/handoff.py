"""Handing values between the workgroups of one launch: the last workgroup to finish,
found with an atomic counter, reads what the others stored (after a device-scope fence,
or as tagged atomic words where the target has no fence)."""

from __future__ import annotations

from typing import Any

from mimir.codegen.builder import ibin, size_ir, u32
from mimir.codegen.ir import (
    AtomicAdd,
    Await,
    Barrier,
    Binary,
    Builtin,
    Expr,
    Fence,
    Load,
    Publish,
    Retract,
    Return,
    SharedArray,
    Store,
)
from mimir.codegen.kernels.context import KernelContext
from mimir.codegen.kernels.loops import strided
from mimir.codegen.schedule.layout import SPLIT_WG
from mimir.codegen.schedule.plan import Fold, Plan, Row


def hand_off(c: KernelContext, array: str, index: Expr, value: Expr) -> None:
    """`array[index] = value` for the last workgroup of a one-launch reduction (or for a
    later launch): a `Publish` where the buffer is tagged (a target without a fence,
    `Schedule.tagged`), else a store (a fence releases it before the ticket)."""
    tagged = array in c.s.tagged
    c.body.emit(Publish(array, index, value) if tagged else Store(array, index, value))


def handed_off(c: KernelContext, array: str, index: Expr, t: str) -> Expr:
    """Element `index` (storage type `t`) of what `hand_off` stored: awaited where tagged."""
    if array not in c.s.tagged:
        return Load(array, index, t)
    value = c.body.fresh("handed", t)
    c.body.emit(Await(value, array, index))
    return value


def handoff_fence(c: KernelContext) -> None:
    """A device-scope fence of a one-launch reduction's handoff; none where the handed-off
    values are tagged (`hand_off`): their tags say they have arrived."""
    if not c.s.tagged:
        c.body.emit(Fence())


def last_workgroup(c: KernelContext, groups: Expr, slot: Expr | None = None) -> None:
    """The handoff of a one-launch reduction: thread 0 fences (release; what the other
    threads stored is ordered before it by the caller's barrier) and adds 1 to the
    counter, reading the old value; the workgroup that reads `groups - 1` is the last:
    every other partial is stored and, after an acquire fence (in thread 0, and in every
    thread after the barrier), visible to it. Where the partials are tagged (`hand_off`) no
    fence: the last workgroup knows every other has published its partial, and
    `Await`s each until its tags show it has arrived. The old value goes to every thread
    through threadgroup memory and a barrier (a `broadcast` array: WGSL's uniform load),
    and every other workgroup returns (uniformly). With `slot`, the counter is element
    `slot` of the buffer, shared by `groups` workgroups (a column tile's slabs,
    `column_pass`)."""
    body, counter = c.body, c.plan.counter
    assert counter is not None
    lid = Builtin("local_x")
    last = body.let(ibin("-", groups, u32(1)), "last")
    c.shared.append(SharedArray("$ticket", "u32", 1, broadcast=True))
    with body.if_(Binary("==", lid, u32(0), "bool")):
        handoff_fence(c)
        old = body.fresh("old", "u32")
        body.emit(AtomicAdd(counter, slot or u32(0), u32(1), old))
        if not c.s.tagged:
            with body.if_(Binary("==", old, last, "bool")):
                body.emit(Fence())  # acquire, in the thread that read the counter
        body.emit(Store("$ticket", u32(0), old))
    body.emit(Barrier(device=True))  # thread 0's acquire on to the others (MSL `mem_device`)
    ticket = body.let(Load("$ticket", u32(0), "u32"), "ticket")
    with body.if_(Binary("!=", ticket, last, "bool")):
        body.emit(Return())
    handoff_fence(c)  # and in every thread of the last workgroup, after the barrier


def reset_counter(
    c: KernelContext,
    groups: Expr,
    slot: Expr | None = None,
    width: int = SPLIT_WG,
    retract: Any = None,
) -> None:
    """The last workgroup's thread 0 subtracts `groups` from the counter (element `slot`):
    zero again for the next launch on the same buffers. Where the partials are tagged
    (`hand_off`), after a barrier (every `Await` done) the workgroup's `width` threads
    `Retract` every element of them, or, with `retract`, that emits the retractions (a
    column tile's, of its own partials)."""
    assert c.plan.counter is not None
    body, lid = c.body, Builtin("local_x")
    with body.if_(Binary("==", lid, u32(0), "bool")):
        body.emit(AtomicAdd(c.plan.counter, slot or u32(0), ibin("-", u32(0), groups)))
    plans = [c.plan, *c.plan.reductions] if isinstance(c.plan, Fold) else [c.plan]
    handed = dict.fromkeys(b for p in plans for b in _handed_buffers(p) if b)
    tagged = [b for b in handed if b in c.s.tagged]
    if not tagged:
        return
    body.emit(Barrier())
    if retract is not None:
        retract()
        return
    for b in tagged:
        strided(body, lid, size_ir(c.s.tagged[b]), width, lambda r, b=b: body.emit(Retract(b, r)))


def _handed_buffers(plan: Plan) -> list[str | None]:
    """The buffers a launch's workgroups hand to its last: a whole reduction's partials
    (and an argmax's positions), a row launch's share of its whole reduction."""
    if isinstance(plan, Fold):
        return [plan.partials, plan.positions]
    assert isinstance(plan, Row)
    return [plan.partials]
