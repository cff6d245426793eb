"""Live progress of a local sweep: trials done / running / failed, elapsed, ETA, best so far.

On a terminal a ``rich`` live panel is redrawn as trials run; elsewhere (a log file, CI) only the
one-line events are printed, so logs stay readable.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Optional

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from ablate.record import RunStatus
from ablate.sweep.state import SweepState, Trial


@dataclass(frozen=True)
class Stats:
    """A snapshot of a sweep's progress."""

    total: int
    finished: int
    failed: int
    running: int
    elapsed_s: float
    eta_s: Optional[float]
    best: Optional[Trial]

    @property
    def done(self) -> int:
        return self.finished + self.failed


def best_trial(state: SweepState, goal: str) -> Optional[Trial]:
    """The finished trial with the best metric (``goal``: ``maximize`` or ``minimize``)."""
    scored = [t for t in state.trials if t.status in (RunStatus.FINISHED, RunStatus.STOPPED) and t.metric is not None]
    if not scored:
        return None
    return (max if goal == "maximize" else min)(scored, key=lambda t: t.metric)


def stats(state: SweepState, goal: str, total: int, elapsed_s: float, slots: int, durations: list[float]) -> Stats:
    """Counts, and an ETA from the mean duration of the trials this launcher finished."""
    finished = state.count(RunStatus.FINISHED, RunStatus.STOPPED)
    failed = state.count(RunStatus.FAILED)
    running = state.count(RunStatus.RUNNING)
    remaining = max(0, total - finished - failed)
    eta = None
    if durations and remaining:
        mean = sum(durations) / len(durations)
        eta = mean * remaining / max(1, min(slots, remaining))
    elif not remaining:
        eta = 0.0
    return Stats(total, finished, failed, running, elapsed_s, eta, best_trial(state, goal))


def clock(seconds: Optional[float]) -> str:
    """``3725`` -> ``1:02:05``; ``None`` -> ``?``."""
    if seconds is None:
        return "?"
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Progress:
    """Prints events and, on a terminal, keeps a live panel of the sweep up to date."""

    def __init__(self, console: Optional[Console] = None, metric: Optional[str] = None, goal: str = "maximize"):
        self.console = console or Console()
        self.metric, self.goal = metric, goal
        self._live: Optional[Live] = None
        self._started = self._drawn = time.monotonic()

    def start(self) -> None:
        self._started = time.monotonic()
        if self.console.is_terminal:
            self._live = Live(console=self.console, auto_refresh=False, transient=True)
            self._live.start()

    def event(self, text: str, style: str = "") -> None:
        self.console.print(Text(text, style=style))

    def update(
        self, state: SweepState, total: int, slots: int, durations: list[float], running: dict[str, float]
    ) -> Stats:
        """Redraw the panel. ``running``: trial name -> ``time.monotonic()`` at its start."""
        now = time.monotonic()
        snap = stats(state, self.goal, total, now - self._started, slots, durations)
        if self._live is not None and now - self._drawn >= 0.5:  # redraw twice a second at most
            self._drawn = now
            self._live.update(self._render(snap, running, now), refresh=True)
        return snap

    def _render(self, snap: Stats, running: dict[str, float], now: float) -> Group:
        head = Text.assemble(
            ("done ", "bold"),
            f"{snap.done}/{snap.total}  ",
            ("running ", "bold"),
            f"{snap.running}  ",
            ("failed ", "bold"),
            (f"{snap.failed}", "red" if snap.failed else ""),
            "  ",
            ("elapsed ", "bold"),
            f"{clock(snap.elapsed_s)}  ",
            ("ETA ", "bold"),
            clock(snap.eta_s),
        )
        lines = [head]
        if snap.best is not None and self.metric:
            lines.append(Text(f"best {self.metric} = {snap.best.metric:.4g} ({snap.best.name})", style="green"))
        if running:
            table = Table(show_header=True, header_style="dim", box=None, pad_edge=False)
            table.add_column(str(RunStatus.RUNNING))
            table.add_column("for", justify="right")
            for name, since in running.items():
                table.add_row(name, clock(now - since))
            lines.append(table)
        return Group(*lines)

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
