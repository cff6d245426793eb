"""A sweep from Python (``ablate.sweep(...)``): what ``ablate sweep run`` does on this machine, as a function.

The file (or a dict, written to ``<out>/sweep.yaml`` first so the folder names its sweep file as a
run from the command line does) is validated by :func:`~ablate.sweep.spec.load_spec`, overrides by
:func:`~ablate.sweep.options.check_overrides` (``key=a,b`` adds a grid axis), and the
:class:`~ablate.sweep.launcher.Launcher` with the ``local`` executor trains every trial as its own
``python -m ablate train`` process over the device slots of :func:`~ablate.sweep.slots.plan_slots`:
rerunning resumes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence, Union

from ablate.record import RunStatus
from ablate.sweep.spec import SweepError, load_spec, safe_name
from ablate.utils.io import atomic_write_text


@dataclass(frozen=True)
class SweepRun:
    """A sweep folder after :func:`run`: where it is, and how each trial ended.

    Attributes:
        out: the sweep folder (``sweep.json``, one run folder per trial); ``ablate.table(out)`` reads it.
        state: its ``sweep.json`` (:class:`~ablate.sweep.state.SweepState`).
        interrupted: the run was interrupted (run again to resume).
    """

    out: Path
    state: Any
    interrupted: bool = False

    @property
    def trials(self) -> dict[str, str]:
        """Trial name -> status (``finished``, ``failed``, ...)."""
        return {t.name: t.status for t in self.state.trials}

    @property
    def finished(self) -> bool:
        """Every trial finished."""
        return not self.interrupted and all(status == RunStatus.FINISHED for status in self.trials.values())

    def __repr__(self) -> str:
        counts: dict[str, int] = {}
        for status in self.trials.values():
            counts[status] = counts.get(status, 0) + 1
        summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "no trials"
        return f"SweepRun({str(self.out)!r}: {summary}{', interrupted' if self.interrupted else ''})"


def _spec_file(file_or_dict: Union[str, Path, dict[str, Any]], out: Optional[Path]) -> Path:
    """The sweep file to run: ``file_or_dict`` itself, or a dict written to ``<out>/sweep.yaml``."""
    if not isinstance(file_or_dict, dict):
        return Path(file_or_dict)
    import yaml

    name = safe_name(str(file_or_dict.get("name") or "sweep"))  # as load_spec names it
    folder = Path(out) if out is not None else Path("runs") / name
    path = folder / "sweep.yaml"
    text = yaml.safe_dump(file_or_dict, sort_keys=False)
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
    """Run a sweep on this machine, as ``ablate sweep run FILE [OVERRIDES] --out OUT --parallel N`` does.

    Args:
        file_or_dict: a sweep file (W&B format) or the same as a dict.
        overrides: ``key=value`` for every trial; ``key=a,b`` adds a grid axis.
        out: the sweep folder (default ``runs/<sweep name>``).
        parallel: trials at once on CPU (cores split evenly), or per GPU group.
        devices: ``auto``, ``cpu`` or GPU ids (``0,1``).
        gpus_per_trial: GPUs per trial (DDP when more than one).
        max_trials: run at most this many trials.
        retry_failed: run failed trials again.
        config: a base YAML config for every trial.
        quiet: print nothing (the trials still write their ``trial.log``).

    Raises:
        SweepError / ConfigError: a bad sweep, override or option, before any trial starts.
    """
    from rich.console import Console

    from ablate.sweep.axes import axis_overrides, split_axes, with_axes
    from ablate.sweep.executor import ExecutorArgs
    from ablate.sweep.executors import make_executor
    from ablate.sweep.launcher import Launcher, LaunchOptions, check_trial_count, default_out
    from ablate.sweep.options import TRIAL_LIMIT, check_overrides
    from ablate.sweep.progress import Progress
    from ablate.sweep.search import trial_cap
    from ablate.sweep.slots import plan_slots

    plain, axes = split_axes(check_overrides([str(o) for o in overrides]))
    plan_slots(devices, gpus_per_trial, parallel)  # a bad device option fails before a dict is written
    spec = with_axes(load_spec(_spec_file(file_or_dict, None if out is None else Path(out))), axes)
    opts = LaunchOptions(
        out=Path(out) if out is not None else default_out(spec),
        slots=[],
        overrides=plain,
        axes=axis_overrides(axes),
        config=None if config is None else Path(config),
        retry_failed=retry_failed,
        max_trials=max_trials,
        trial_limit=TRIAL_LIMIT,
    )
    args = ExecutorArgs(name=spec.name, devices=devices, gpus_per_trial=gpus_per_trial, parallel=parallel)
    executor = make_executor("local", args, opts)  # as `ablate sweep run --launcher local`
    check_trial_count(spec, trial_cap(spec, max_trials), TRIAL_LIMIT)
    progress = Progress(Console(quiet=quiet), spec.metric, spec.goal)
    result = Launcher(spec, opts, progress, executor).run()
    return SweepRun(opts.out, result.state, result.interrupted)
