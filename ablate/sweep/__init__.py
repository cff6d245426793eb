"""Sweeps: W&B sweep files run locally over every device slot (resumable, one process per
trial), or through a W&B server across machines.

Modules: ``spec`` (load and validate sweep files, variants), ``search`` (W&B's grid/random/bayes),
``trial`` (names, overrides, outcomes), ``state`` (the sweep folder on disk), ``planner`` (which
trials, in which order, retries, hyperband), ``executor`` (the protocol of a launcher backend),
``executors`` (the ``--launcher`` registry), ``local`` (processes on device slots: ``slots``,
``process``), ``slurm`` (jobs through submitit: ``slurm_job``), ``launcher`` (the one loop),
``progress`` (live display), ``wandb_agent`` (``wandb.sweep`` / ``wandb.agent``), ``views`` (what the
CLI prints), ``commands`` (the ``ablate sweep`` CLI), ``api`` (``ablate.sweep(...)`` from Python).
"""

import sys
import types
from typing import Any

from ablate.sweep.spec import SweepError, SweepSpec, load_spec

__all__ = ["SweepError", "SweepSpec", "load_spec"]


class _CallablePackage(types.ModuleType):
    """``ablate.sweep`` is this package and, called, :func:`ablate.sweep.api.run`: ``ablate.sweep("sweeps/x.yaml")``.

    One name for both, because importing any ``ablate.sweep.*`` module binds ``ablate.sweep`` to the
    package, which would shadow a function of that name on ``ablate``.
    """

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from ablate.sweep.api import run

        return run(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
