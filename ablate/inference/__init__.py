"""Use a trained run: translate new text, score any test set (``ablate translate`` / ``evaluate``)."""
