"""Sweeps: W&B sweep files run locally over every device slot (resumable, one process per
trial), or through a W&B server across machines.

Modules: ``spec`` (load and validate sweep files, variants), ``search`` (W&B's grid/random/bayes),
``trial`` (names, overrides, outcomes), ``state`` (the sweep folder on disk), ``planner`` (which
trials, in which order, retries, hyperband), ``executor`` (the protocol of a launcher backend),
``executors`` (the ``--launcher`` registry), ``local`` (processes on device slots: ``slots``,
``process``), ``slurm`` (jobs through submitit: ``slurm_job``), ``launcher`` (the one loop),
``progress`` (live display), ``wandb_agent`` (``wandb.sweep`` / ``wandb.agent``), ``views`` (what the
CLI prints), ``commands`` (the ``ablate sweep`` CLI).
"""

from ablate.sweep.spec import SweepError, SweepSpec, load_spec

__all__ = ["SweepError", "SweepSpec", "load_spec"]
