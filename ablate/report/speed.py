"""Which training speed the table shows, and the footnote that says what it measures.

Wall-clock tokens per second measure the machine as much as the model where other processes share
its cores: on a busy CPU the same run trains slower or faster with the load. The Throughput
callback (:mod:`ablate.training.trainer`) therefore also records the process CPU seconds of the
same training steps. Where every run of the table trained on a CPU and recorded them, the speed
column is tokens per CPU-second (``train/tokens_per_cpu_sec``); on a GPU, and for CPU runs from
before CPU time was recorded, it stays wall-clock tokens per second (``train/tokens_per_sec``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ablate.record import TOKENS_PER_CPU_SEC, TOKENS_PER_SEC
from ablate.report.aggregate import Sweep
from ablate.report.records import Trial

WALL = TOKENS_PER_SEC.key
CPU = TOKENS_PER_CPU_SEC.key
COUNTED = "training tokens (source + target, non-padding; warm-up steps left out, all devices together)"


@dataclass(frozen=True)
class Speed:
    """The speed column of a table.

    Attributes:
        key: the summary metric shown.
        label: its header.
        note: the footnote saying what it measures (and, for wall-clock on a CPU, that load moves it).
    """

    key: str
    label: str
    note: str


def training_speed(sweep: Sweep) -> Speed:
    """The speed column for ``sweep``'s finished trials (see the module docstring)."""
    return speed_of([t for r in sweep.rows for t in r.trials])


def speed_of(trials: Sequence[Trial]) -> Speed:
    """Tokens per CPU-second when every trial trained on a CPU and recorded it, else wall-clock tokens/s."""
    on = {t.accelerator for t in trials}
    if on == {"cpu"} and all(CPU in t.metrics for t in trials):
        return Speed(CPU, TOKENS_PER_CPU_SEC.label, _cpu_note(trials))
    wall = f"Tokens/s (train): wall-clock {COUNTED} per second of the training steps"
    if on == {"gpu"}:
        return Speed(WALL, TOKENS_PER_SEC.label, f"{wall} (each step synchronised on the GPU).")
    if on == {"cpu"}:
        why = "these runs trained on a CPU but not all recorded their CPU time"
    elif "cpu" in on:
        why = "the runs trained on different devices (CPU and GPU or not recorded)"
    else:
        why = "the runs did not record whether they trained on a CPU or a GPU"
    return Speed(
        WALL,
        TOKENS_PER_SEC.label,
        f"{wall}. Wall-clock, so it depends on the machine's load: on a CPU shared with other processes "
        f"it swings with their work ({why}, so tokens per CPU-second cannot be shown).",
    )


def _cpu_note(trials: Sequence[Trial]) -> str:
    threads = sorted({int(t.metrics["threads"]) for t in trials if "threads" in t.metrics})
    if len(threads) == 1:
        same = f"; every run used {threads[0]} torch thread{'s' if threads[0] != 1 else ''}"
    elif threads:
        same = f"; the runs used {', '.join(map(str, threads))} torch threads, so compare rows of equal threads"
    else:
        same = ""
    return (
        f"Tokens/CPU-s (train): {COUNTED} per second of process CPU time (user + system, every thread, "
        f"summed over devices) in the training steps, which trained on a CPU. Unlike wall-clock tokens/s it "
        f"leaves out time spent waiting for a core, so other processes' load moves it little (cache and "
        f"memory contention still do); threads' overhead counts in it{same}."
    )
