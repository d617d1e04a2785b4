"""`RefusalError`: why a checked kernel cannot be compiled, as a coded diagnostic.

The scheduler and the backends raise it instead of emitting something that
would compute the wrong thing (ARCHITECTURE.md, "Refusals": a loud
refusal, never a silent miscompile). `compile_source` turns it into a `Diagnostic`.
"""

from __future__ import annotations

from mimir.diagnostics.diagnostic import Span

# A backend cannot emit a construct (an op, a dtype, a resource limit).
BACKEND_CANNOT_EMIT = "GPU070"
# The scheduler cannot lower a construct for any backend.
CANNOT_SCHEDULE = "GPU071"
# The launches of a function break the launch-order invariant (`launch_order`): a bug in
# the compiler, reported instead of a kernel that would compute the wrong thing.
LAUNCH_ORDER = "GPU073"


class RefusalError(Exception):
    def __init__(self, code: str, message: str, span: Span | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.span = span
