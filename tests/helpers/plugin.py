"""A researcher's own attention score, written where a plugin lives: outside the repository."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import tiny

COSINE = '''\
"""Cosine attention: temperature * cos(q, k). A plugin, not part of ablate."""

from __future__ import annotations

import torch.nn.functional as F

import ablate
from ablate.model.scores import Score


@ablate.register("score", "cosine")
class CosineScore(Score):
    paper_scale = False  # the temperature is the scale

    def __init__(self, d_k, heads, cfg, *, temperature: float = 10.0):
        super().__init__(d_k, heads, cfg)
        self.temperature = temperature

    def prepare_keys(self, k):
        return F.normalize(k, dim=-1)

    def forward(self, q, keys):
        return self.temperature * F.normalize(q, dim=-1) @ keys.transpose(-1, -2)

    def as_dot(self, q, keys):
        return self.temperature * F.normalize(q, dim=-1), keys, None
'''

TINY = {
    "data.builtin_pairs": 200,
    "data.builtin_eval_pairs": tiny.EVAL_PAIRS,
    **tiny.TINY,
    "train.max_steps": 4,
    "train.val_every": 4,
    "eval.beam": 1,
    "tracking.wandb": "disabled",
}
"""A tiny run on the built-in task (:mod:`tests.helpers.tiny`): seconds of training, most of it decoding the
validation and test pairs."""


def write_cosine(folder: Path, name: str = "cosine.py") -> Path:
    """The cosine plugin as ``folder/name``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(COSINE)
    return path
