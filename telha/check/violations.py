"""What a check finds: :class:`Violation` records and the :class:`Report` that counts them."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Report", "Violation"]


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken invariant.

    :param check: the check's name (``spans_in_text``, ``job_states``, …).
    :param subject: what is broken, with its ids (``node <uuid>@<tx> (tenant/org)``).
    :param detail: how, in one line.
    """

    check: str
    subject: str
    detail: str

    def line(self) -> str:
        """The violation as one printable line."""
        return f"{self.check}: {self.subject}: {self.detail}"


@dataclass
class Report:
    """Counts per check (items checked, violations) in registration order, and the first
    ``max_listed`` violations of each check (the rest are counted, not kept, so a badly
    broken database does not fill memory).

    :param max_listed: violations kept per check.
    """

    max_listed: int = 100
    checked: dict[str, int] = field(default_factory=dict)
    violation_counts: dict[str, int] = field(default_factory=dict)
    violations: list[Violation] = field(default_factory=list)

    def declare(self, check: str) -> None:
        """Show ``check`` in the summary even when it finds nothing to check."""
        self.checked.setdefault(check, 0)
        self.violation_counts.setdefault(check, 0)

    def count(self, check: str, n: int = 1) -> None:
        """``n`` more items checked by ``check``."""
        self.declare(check)
        self.checked[check] += n

    def add(self, check: str, subject: str, detail: str) -> None:
        """Record one violation of ``check``."""
        self.declare(check)
        self.violation_counts[check] += 1
        if self.violation_counts[check] <= self.max_listed:
            self.violations.append(Violation(check, subject, detail))

    @property
    def total(self) -> int:
        """Violations found, listed or not."""
        return sum(self.violation_counts.values())
