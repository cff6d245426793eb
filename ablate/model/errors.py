"""The model family's user-facing error."""

from __future__ import annotations

from ablate.errors import AblateError


class ModelBuildError(AblateError):
    """A model configuration that cannot be built; the message is one actionable line."""
