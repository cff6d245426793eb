"""Sweeps: W&B sweep files run locally over every device slot (resumable, one process per trial), on SLURM
or Ray, or through a W&B server across machines; called, ``ablate.sweep("sweeps/x.yaml")`` is :func:`run`.
"""

from __future__ import annotations

import sys
import types
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence, Union

from ablate.record import RunStatus
from ablate.sweep.spec import SweepError, SweepSpec, load_spec, safe_name, with_absolute_plugins
from ablate.utils.io import atomic_write_text

__all__ = ["SweepError", "SweepRun", "SweepSpec", "load_spec", "run"]


@dataclass(frozen=True)
class SweepRun:
    """A sweep folder after :func:`run` (``ablate.table(out)`` reads it), its ``sweep.json``
    (:class:`~ablate.sweep.state.SweepState`), and whether it was ``interrupted`` (run again to resume)."""

    out: Path
    state: Any
    interrupted: bool = False

    @property
    def trials(self) -> dict[str, str]:
        """Trial name -> status (``finished``, ``failed``, ...)."""
        return {t.name: t.status for t in self.state.trials}

    @property
    def finished(self) -> bool:
        """No trial failed or is left unfinished (hyperband's stopped ones are done, and so are those a reached
        ``metric.target`` left pending): what ``ablate sweep run`` exits 0 on."""
        unfinished = self.state.count(RunStatus.FAILED, RunStatus.INTERRUPTED, RunStatus.RUNNING)
        return not self.interrupted and not unfinished

    def __repr__(self) -> str:
        counts = Counter(self.trials.values())
        summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "no trials"
        return f"SweepRun({str(self.out)!r}: {summary}{', interrupted' if self.interrupted else ''})"


def _spec_file(file_or_dict: Union[str, Path, dict[str, Any]], out: Optional[Path]) -> Path:
    """The sweep file to run: ``file_or_dict``, or a dict written to ``<out>/sweep.yaml`` (its relative
    ``plugins`` paths made absolute against the working directory first: :func:`with_absolute_plugins`)."""
    if not isinstance(file_or_dict, dict):
        return Path(file_or_dict)
    import yaml

    name = safe_name(str(file_or_dict.get("name") or "sweep"))  # as load_spec names it
    folder = Path(out) if out is not None else Path("runs") / name
    path = folder / "sweep.yaml"
    text = yaml.safe_dump(with_absolute_plugins(file_or_dict, Path.cwd()), sort_keys=False)
    if path.exists() and path.read_text(encoding="utf-8") != text:
        raise SweepError(f"{folder} holds another sweep (its sweep.yaml differs from this dict); pass another out=")
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text)
    return path


def run(
    file_or_dict: Union[str, Path, dict[str, Any]],
    overrides: Sequence[str] = (),
    *,
    out: Union[str, Path, None] = None,
    parallel: int = 1,
    devices: str = "auto",
    gpus_per_trial: int = 1,
    max_trials: Optional[int] = None,
    retry_failed: bool = False,
    config: Union[str, Path, None] = None,
    quiet: bool = False,
) -> SweepRun:
    """Run a sweep on this machine as ``ablate sweep run FILE [OVERRIDES] --out OUT --parallel N ...`` does
    (the options are the command's); ``file_or_dict``: a sweep file or the same as a dict; ``quiet``: print
    nothing. A bad sweep, override or option raises (``SweepError`` / ``ConfigError``) before any trial starts."""
    from rich.console import Console

    from ablate.sweep.launcher import Launcher, Progress, make_executor
    from ablate.sweep.local import ExecutorArgs, plan_slots
    from ablate.sweep.planner import TRIAL_LIMIT, check_overrides, check_trial_count, launch_options, trial_cap
    from ablate.sweep.spec import replaced_variants

    overrides = check_overrides(overrides)
    plan_slots(devices, gpus_per_trial, parallel)  # a bad device option fails before a dict is written
    folder = None if out is None else Path(out)
    base = None if config is None else Path(config)
    file = _spec_file(file_or_dict, folder)
    spec, opts = launch_options(file, overrides, folder, config=base, retry_failed=retry_failed, max_trials=max_trials)
    args = ExecutorArgs(name=spec.name, devices=devices, gpus_per_trial=gpus_per_trial, parallel=parallel)
    executor = make_executor("local", args, opts)  # as `ablate sweep run --launcher local`
    check_trial_count(spec, trial_cap(spec, max_trials), TRIAL_LIMIT)
    progress = Progress(Console(quiet=quiet), spec.metric, spec.goal)
    for note in replaced_variants(spec, opts.overrides):
        progress.event(note, "yellow")
    result = Launcher(spec, opts, progress, executor).run()
    return SweepRun(opts.out, result.state, result.interrupted)


class _CallablePackage(types.ModuleType):
    """``ablate.sweep`` is this package and, called, :func:`run` (importing ``ablate.sweep.*`` binds the name
    to the package, which would shadow a function of that name on ``ablate``)."""

    def __call__(self, *args: Any, **kwargs: Any) -> SweepRun:
        return run(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
