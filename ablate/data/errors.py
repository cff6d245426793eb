"""The one exception type of the data pipeline."""

from __future__ import annotations

from ablate.errors import AblateError


class DataError(AblateError):
    """A user-facing problem with the corpus or data settings; its message is one actionable line."""
