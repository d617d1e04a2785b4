"""The pieces of a numerically stable softmax that every launch computing one shares
(`softmax`, `row`, `narrow`, `attention`): the running max, the shift, the rescale."""

from __future__ import annotations

from mimir.codegen import lower as lw
from mimir.codegen.ir import Expr
from mimir.codegen.kernels.context import KernelContext
from mimir.codegen.kernels.warp import group_total


def running_max(m: Expr, v: Expr) -> Expr:
    """A softmax's running max: the target's own `max` (PTX `max.f32`, one instruction;
    the nan-propagating `maximum` is four), whose result with a nan operand is either
    operand or unspecified. A nan need not be passed on: its `exp(nan - top)` makes the
    row's sum nan, so every output is nan whatever `top` is, as the reference's; and
    which of +0 and -0 is the max changes no `x - top`'s exp."""
    return lw.call("max", m, v)


def rescale_factor(old: Expr, new: Expr) -> Expr:
    """exp(old - new), what a sum of exp(x - old) is multiplied by to become one of
    exp(x - new) (new >= old): 1 while the max holds (also for two infinities), 0 from
    -inf (nothing was summed)."""
    inf, zero, one = lw.const(-lw.INF, "f32"), lw.const(0, "f32"), lw.const(1, "f32")
    fresh = lw.select(lw.bin_("==", old, inf), zero, lw.call("exp", lw.bin_("-", old, new)))
    return lw.select(lw.bin_("==", old, new), one, fresh)


def block_total(c: KernelContext, value: Expr, op: str, width: int, name: str) -> Expr:
    """Combine every thread's `value` over the workgroup; the result, in every thread."""
    return group_total(c.body, c.shared, value, op, width, f"${name}")


def rescaled(pm: Expr, ps: Expr, top: Expr) -> Expr:
    """A sum of exp(x - pm) as one of exp(x - top) (top >= pm): ps * exp(pm - top); ps
    (nothing summed) where pm is -inf."""
    scaled = lw.bin_("*", ps, lw.call("exp", lw.bin_("-", pm, top)))
    return lw.select(lw.bin_("==", pm, lw.const(-lw.INF, "f32")), ps, scaled)


def stable_shift(c: KernelContext, top: Expr) -> Expr:
    # A row of -inf has nothing to subtract (the reference shifts by 0 then).
    inf = lw.const(-lw.INF, "f32")
    return c.body.let(lw.select(lw.bin_("==", top, inf), lw.const(0, "f32"), top), "top")
