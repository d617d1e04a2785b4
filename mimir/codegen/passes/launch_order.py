"""The order of a function's launches, and the invariant every emitted manifest keeps.

Launches talk to each other only through buffers, and run one after another in the
manifest's order. `dependency_order` puts a schedule's launches in an order that respects
every dependency their IR kernels show: a launch that reads a scratch buffer or an output
(a binding with access `read`) comes after every launch that writes it (access
`read_write`), and launches that both touch an `InOut` parameter, or both write one
buffer, keep the order the scheduler gave them. Among launches that do not depend on each
other the scheduler's order stays (a stable topological order).

`violations` is the invariant, checked over every manifest before any file is written
(`mimir.codegen.compile_source`):

- a launch that reads a scratch buffer or an output reads what an earlier launch wrote,
  unless the host zeroes the buffer (`"zero": true`);
- every output is written by some launch;
- no launch writes an input;
- no two launches write one buffer, but for an `InOut` parameter (whose writes the
  scheduler orders) and a buffer the kernels keep themselves (`zero`: a counter, tagged
  partials): which write a reader sees would depend on the launch order.

A violation is a bug in the compiler, reported as GPU073 naming the launches, and
nothing is written.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Any

from mimir.codegen.ir import Kernel

# the roles whose buffers hold nothing before a launch writes them
_PRODUCED = ("scratch", "output")


def dependency_order(kernels: Sequence[Kernel], roles: dict[str, str]) -> list[int] | None:
    """The launches' indices in an order that respects every dependency between them (the
    identity when the scheduler's order already does), or None when they depend on each
    other in a cycle. `roles`: each buffer's manifest role (`input`, `inout`, `output`,
    `scratch`)."""
    after: dict[int, set[int]] = {k: set() for k in range(len(kernels))}  # k -> its deps
    for i in range(len(kernels)):
        for j in range(i + 1, len(kernels)):
            edge = _edge(kernels[i], kernels[j], roles)
            if edge == "both":
                return None  # each reads what the other writes
            if edge == "forward":
                after[j].add(i)
            elif edge == "backward":
                after[i].add(j)
    waiting = {k: len(deps) for k, deps in after.items()}
    users: dict[int, list[int]] = {k: [] for k in after}
    for k, deps in after.items():
        for d in deps:
            users[d].append(k)
    ready = [k for k, n in waiting.items() if n == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        k = heapq.heappop(ready)
        order.append(k)
        for u in users[k]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, u)
    return order if len(order) == len(kernels) else None


def _edge(first: Kernel, later: Kernel, roles: dict[str, str]) -> str | None:
    """How two launches (`first` before `later` in the scheduler's order) must be ordered:
    "forward" (as they are), "backward" (`later` writes what `first` reads), "both" (no
    order works) or None."""
    a = {b.name: b.access for b in first.buffers}
    b = {b.name: b.access for b in later.buffers}
    forward = backward = False
    for name in a.keys() & b.keys():
        wa, wb = a[name] == "read_write", b[name] == "read_write"
        if not (wa or wb):
            continue
        role = roles.get(name)
        if role in _PRODUCED and wb and not wa:
            backward = True  # `first` reads what only `later` writes
        else:
            forward = True  # written before read, two writers, or an `InOut` parameter
    if forward and backward:
        return "both"
    return "backward" if backward else "forward" if forward else None


def reorder(items: Sequence[Any], order: list[int]) -> list[Any]:
    return [items[k] for k in order]


def violations(manifest: dict[str, Any]) -> list[str]:
    """What in `manifest`'s launch order breaks the invariant (module docstring); empty
    when nothing does."""
    roles = {b["name"]: b["role"] for b in manifest["buffers"]}
    zeroed = {b["name"] for b in manifest["buffers"] if b.get("zero")}
    found: list[str] = []
    written: dict[str, list[int]] = {}  # buffer -> the launches that wrote it, in order
    for k, kernel in enumerate(manifest["kernels"]):
        what = f"launch {k} (`{kernel['file']}`)"
        for binding in kernel["bindings"]:
            name, access = binding["buffer"], binding["access"]
            role = roles.get(name)
            if role is None:
                found.append(f"{what} binds `{name}`, which is no buffer of the manifest")
                continue
            if access == "read_write":
                if role == "input":
                    found.append(f"{what} writes the input `{name}`")
                written.setdefault(name, []).append(k)
            elif role in _PRODUCED and name not in zeroed and not written.get(name):
                writers = [
                    j
                    for j, later in enumerate(manifest["kernels"])
                    if any(
                        x["buffer"] == name and x["access"] == "read_write"
                        for x in later["bindings"]
                    )
                ]
                by = (
                    f"; launch {writers[0]} (`{manifest['kernels'][writers[0]]['file']}`) "
                    "writes it after"
                    if writers
                    else "; no launch writes it"
                )
                found.append(f"{what} reads {role} `{name}` before any launch writes it{by}")
    for name, role in roles.items():
        if role == "output" and name not in written:
            found.append(f"no launch writes the output `{name}`")
    for name, writers in written.items():
        if len(writers) > 1 and name not in zeroed and roles.get(name) != "inout":
            first, second = writers[:2]
            found.append(
                f"launches {first} and {second} both write `{name}`, which the kernels do not "
                "keep themselves (no `zero`): which write the readers see depends on the order"
            )
    return found
