"""The one exception type of the data pipeline."""

from __future__ import annotations


class DataError(ValueError):
    """A user-facing problem with the corpus or data settings; its message is one actionable line."""
