"""The launcher backends ``ablate sweep run --launcher NAME`` chooses from: one registry line each.

A new backend is one class that implements :class:`~ablate.sweep.executor.Executor` and has a
``from_args(args, opts)`` classmethod, plus its line in :data:`EXECUTORS`; the CLI's choices,
help and did-you-mean come from here (docs/extending.md has a worked example).
"""

from __future__ import annotations

from typing import Protocol

from ablate.errors import did_you_mean
from ablate.sweep.executor import Executor, ExecutorArgs
from ablate.sweep.local import LocalExecutor
from ablate.sweep.options import LaunchOptions
from ablate.sweep.ray_cluster import RayExecutor
from ablate.sweep.slurm import SlurmExecutor
from ablate.sweep.spec import SweepError


class ExecutorClass(Protocol):
    """What a registry entry is: a class that builds its executor from the command line."""

    def from_args(self, args: ExecutorArgs, opts: LaunchOptions) -> Executor: ...


EXECUTORS: dict[str, ExecutorClass] = {
    "local": LocalExecutor,  # processes over this machine's GPU/CPU slots
    "slurm": SlurmExecutor,  # one batch job per trial through submitit, from a login node
    "ray": RayExecutor,  # one Ray task per trial on a Ray cluster (the optional extra ablate[ray])
}
"""``--launcher`` name -> executor class (with ``from_args``)."""


def executor_class(name: str) -> ExecutorClass:
    """The registry entry ``--launcher NAME`` names (a one-line error with did-you-mean for another name)."""
    if name not in EXECUTORS:
        hint = did_you_mean(name, EXECUTORS, cutoff=0.4)
        raise SweepError(f"--launcher {name!r}: choose one of {', '.join(EXECUTORS)}{hint}")
    return EXECUTORS[name]


def make_executor(name: str, args: ExecutorArgs, opts: LaunchOptions) -> Executor:
    """The executor ``--launcher NAME`` names, built from the command line's options."""
    return executor_class(name).from_args(args, opts)
