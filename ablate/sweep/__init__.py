"""Sweeps: W&B sweep files run locally over every device slot (resumable, one process per
trial), or through a W&B server across machines.

Modules: ``spec`` (load and validate sweep files, variants), ``search`` (W&B's grid/random/bayes),
``trial`` (names, overrides, outcomes), ``state`` (the sweep folder on disk), ``slots`` (devices),
``process`` (trial processes), ``launcher`` (the local scheduler), ``progress`` (live display),
``wandb_agent`` (``wandb.sweep`` / ``wandb.agent``), ``commands`` (the ``ablate sweep`` CLI).
"""

from ablate.sweep.spec import SweepError, SweepSpec, load_spec

__all__ = ["SweepError", "SweepSpec", "load_spec"]
