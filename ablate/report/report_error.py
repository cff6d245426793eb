"""The report's one user error: a bad source or nothing to tabulate, in one actionable line."""

from __future__ import annotations

from ablate.errors import AblateError


class ReportError(AblateError):
    """A user-facing report mistake (bad source, nothing to tabulate); one actionable line."""
