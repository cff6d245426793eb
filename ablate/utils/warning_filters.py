"""Every warning ablate silences, in one place, each with what causes it and why it says nothing.

:func:`install` adds the filters of :data:`FILTERS`; the command line calls it once at its edge
(``ablate ...``, which is also how sweep trials and DDP ranks start) and :func:`ablate.training.train`
calls it for the Python API. :func:`sweeps_engine` silences W&B's ``sweeps`` package around the
calls into it. A warning not listed here reaches the user: it may be about their run.
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

__all__ = ["FILTERS", "Filter", "install", "jit_export", "sweeps_engine"]


@dataclass(frozen=True)
class Filter:
    """One ignored warning: a regular expression its message starts with, and why it is noise."""

    message: str
    cause: str


FILTERS: tuple[Filter, ...] = (
    Filter(
        r".*sync_dist=True.*",
        "Lightning asks for sync_dist on epoch-level logs under DDP; our validation and test "
        "metrics are scored on every rank's gathered hypotheses (module.gather_objects), so each "
        "rank already logs the same value",
    ),
    Filter(
        r".*does not have many workers.*",
        "Lightning's hint to raise DataLoader num_workers; token batches come from memory-mapped "
        "Arrow in the main process, workers are train.num_workers' choice",
    ),
    Filter(
        r".*LeafSpec.*",
        "torch's pytree deprecation of LeafSpec, raised inside Lightning's own code",
    ),
    Filter(
        r".*The number of training batches.*",
        "Lightning's note that an epoch has fewer batches than log_every_n_steps (tiny and test "
        "runs, small corpora); metrics are still logged every tracking.log_every steps across epochs",
    ),
    Filter(
        r".*`srun` command is available.*",
        "Lightning's SLURM hint on a machine with srun; our SLURM trials are submitted by submitit, "
        "and a local run on a login node is meant to be local",
    ),
    Filter(
        r"IProgress not found.*",
        "tqdm.auto's notebook bar (imported by datasets and huggingface_hub) asks for ipywidgets in a Jupyter "
        "kernel; ablate shows no tqdm bar (its progress is one status line, training/progress_bar.py), so "
        "there is nothing to install",
    ),
    Filter(
        r".*resuming from a checkpoint that ended before the epoch.*",
        "Lightning's caution about mid-epoch resumes; ours restore the batch sampler's position "
        "exactly (tests/training/test_train_resume.py)",
    ),
)
"""The warnings ignored everywhere (:func:`install`)."""


def install() -> None:
    """Ignore the warnings of :data:`FILTERS` in this process (idempotent: a filter is added once)."""
    for f in FILTERS:
        warnings.filterwarnings("ignore", message=f.message)


@contextmanager
def sweeps_engine() -> Iterator[None]:
    """Ignore every warning inside the block: a call into, or the import of, W&B's ``sweeps`` engine.

    Cause: ``sweeps`` declares pydantic-v1 style models (pydantic 2 warns at import: "Valid config
    keys have changed", "class-based config is deprecated"), and its bayes search fits a scikit-learn
    Gaussian process that warns about convergence on the few points a sweep has. None of it is
    about the user's sweep file, which ablate validates itself.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@contextmanager
def jit_export() -> Iterator[None]:
    """Ignore every warning inside the block: tracing or scripting a model for TorchScript export.

    Cause: ``torch.jit.trace`` warns (TracerWarning) at every Python-level branch and tensor-to-int
    conversion of the traced step, and torch 2.13 prints ``torch.jit``'s deprecation notice on each
    call. Neither is about the exported model's correctness, which the exporter checks itself by
    decoding a batch of other shapes and comparing it with ablate's greedy output.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
