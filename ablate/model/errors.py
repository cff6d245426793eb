"""The model family's user-facing error."""


class ModelBuildError(ValueError):
    """A model configuration that cannot be built; the message is one actionable line."""
