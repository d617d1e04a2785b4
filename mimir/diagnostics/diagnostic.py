"""The one data type every checker rule produces and every renderer reads."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, order=True)
class Span:
    """A source range. Lines and columns are 1-based; `end_column` is exclusive."""

    path: str
    line: int
    column: int
    end_line: int
    end_column: int


@dataclass(frozen=True)
class Label:
    """A secondary location that explains the primary one (an annotation, a declaration)."""

    span: Span
    message: str


@dataclass(frozen=True)
class Diagnostic:
    code: str
    message: str
    span: Span
    severity: str = "error"
    labels: tuple[Label, ...] = ()
    counterexample: tuple[tuple[str, int], ...] = ()
    function: str | None = None
    extra_why: str | None = None  # a case-specific sentence appended to the registry's why
    counterexample_note: str | None = None  # e.g. "(x has 1 element)"
    notes: tuple[str, ...] = field(default=())
    extra_fix: str | None = None  # a case-specific way out, appended to the registry's fix

    @property
    def why(self) -> str:
        from mimir.diagnostics.codes import REGISTRY

        text = REGISTRY[self.code].why
        if self.extra_why:
            text = f"{text}; {self.extra_why}"
        if self.counterexample:
            text = f"{text}; counterexample: {format_counterexample(self.counterexample)}"
            if self.counterexample_note:
                text = f"{text} {self.counterexample_note}"
        return text

    @property
    def fix(self) -> str:
        from mimir.diagnostics.codes import REGISTRY

        text = REGISTRY[self.code].fix
        return f"{text}; {self.extra_fix}" if self.extra_fix else text

    def sort_key(self) -> tuple:
        return (self.span.path, self.span.line, self.span.column, self.code)


def format_counterexample(values: tuple[tuple[str, int], ...]) -> str:
    return ", ".join(f"{name}={value}" for name, value in values)
