"""Helpers for sweep tests: sweep specs of the tiny run, a fake trainer (see fake_trainer.py) and quiet launcher options."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Callable

import yaml
from rich.console import Console

from ablate.sweep.launcher import Launcher, Progress
from ablate.sweep.local import Slot
from ablate.sweep.planner import LaunchOptions, SweepResult
from ablate.sweep.spec import spec_from_dict

from tests.helpers.tiny import tiny_parameters

FAKE = Path(__file__).with_name("fake_trainer.py")


class Events:
    """The event lines the fake trainers appended: ``(event, trial, time, step, gpus, threads)``."""

    def __init__(self, path: Path):
        self.path = path

    def rows(self) -> list[tuple[str, str, float, int, str, str]]:
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text().splitlines():
            what, name, t, step, gpus, threads = line.split()
            out.append((what, name, float(t), int(step), gpus, threads))
        return out

    def count(self, what: str, name: str | None = None) -> int:
        return sum(r[0] == what and (name is None or r[1] == name) for r in self.rows())


def fake_command(
    events: Events, modes: dict[str, str] | None = None, steps: int = 4, step_s: float = 0.05, texts: str = ""
) -> Callable[[Path, list[str]], list[str]]:
    """A trial command running the fake trainer; ``modes`` maps a trial name to its mode; ``texts``
    names a test split whose hypotheses and references each run writes (a record ``ablate table`` tests)."""
    modes = modes or {}

    def command(run_dir: Path, overrides: list[str]) -> list[str]:
        mode = modes.get(run_dir.name, "ok")
        return [
            sys.executable,
            str(FAKE),
            "--run-dir",
            str(run_dir),
            "--events",
            str(events.path),
            "--mode",
            mode,
            "--steps",
            str(steps),
            "--step-s",
            str(step_s),
            *(["--texts", texts] if texts else []),
            *overrides,
        ]

    return command


def quiet_progress() -> tuple[Progress, io.StringIO]:
    buffer = io.StringIO()
    return Progress(Console(file=buffer, force_terminal=False, width=200), "val/bleu", "maximize"), buffer


def options(out: Path, command, parallel: int = 1, **kwargs) -> LaunchOptions:
    slots = [Slot(i, None, 1) for i in range(parallel)]
    return LaunchOptions(out=out, slots=slots, command=command, grace_s=5.0, poll_s=0.02, **kwargs)


def small_spec(parameters: dict, method: str = "grid", name: str = "t", **extra):
    config = {
        "method": method,
        "metric": {"name": "val/bleu", "goal": "maximize"},
        "parameters": {**tiny_parameters(train__max_steps=5), **parameters},
        **extra,
    }
    return spec_from_dict(config, name=name)


def run_sweep(spec, opts: LaunchOptions, progress: Progress | None = None, executor=None) -> SweepResult:
    """Run ``spec`` as ``opts`` says, on ``executor`` (default: local processes over ``opts.slots``)."""
    return Launcher(spec, opts, progress, executor).run()


def one_seed(sweep: Path, folder: Path) -> Path:
    """Shipped sweep file ``sweep`` with its ``seed`` axis cut to seed 1 (one trial per variant), written to
    ``folder`` under the same file name (the sweep keeps its ``name``)."""
    spec = yaml.safe_load(sweep.read_text())
    spec["parameters"]["seed"] = {"values": [1]}
    path = folder / sweep.name
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path
