"""Status messages: the ``ablate`` logger hierarchy, shown by one rich handler on stderr, rank zero only.

Every module logs through ``log = logging.getLogger(__name__)`` (``ablate.training.train``,
``ablate.data.cache``, ...): ``log.info`` for what a command is doing, ``log.warning`` for what
went wrong but did not stop it. The command line calls :func:`setup` once, at its edge; a library
user configures logging as they like (an ``ablate`` logger nobody configured shows warnings only,
through Python's last-resort handler).

What a command *produces* (a table, ``--json``, the paths of written figures, translations, the
final result line of ``ablate train``) is printed on stdout, never logged, so scripts can read
stdout while status goes to stderr. User errors are not logged either: they end the command as
one red line (:func:`ablate.utils.commands.fail`).

Under DDP every rank runs the same code; only global rank zero emits (:class:`RankZero`), so a
two-GPU run says everything once.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, Optional

from rich.console import Console
from rich.text import Text

__all__ = ["ConsoleHandler", "RankZero", "capture", "global_rank", "setup", "verbosity_of"]

LEVELS = {-1: logging.WARNING, 0: logging.INFO, 1: logging.DEBUG}
"""``-q`` (-1), default (0), ``-v`` (1) -> the level of the ``ablate`` logger."""


def global_rank() -> int:
    """This process's global rank: Lightning's once it is known, else from the launcher's environment."""
    rank_zero = sys.modules.get("lightning_utilities.core.rank_zero")
    rank = getattr(getattr(rank_zero, "rank_zero_only", None), "rank", None)
    if isinstance(rank, int):
        return rank
    if os.environ.get("RANK", "").isdigit():
        return int(os.environ["RANK"])
    local, node = os.environ.get("LOCAL_RANK", "0"), os.environ.get("NODE_RANK", "0")
    return 0 if local in ("", "0") and node in ("", "0") else 1


class RankZero(logging.Filter):
    """Lets a record through on global rank zero only (DDP ranks run the same code and would repeat it)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return global_rank() == 0


class ConsoleHandler(logging.Handler):
    """Each record as one line on stderr through rich: ``warning: ...`` in yellow, info plain.

    A line is never wrapped (soft wrap), so a sweep trial's log file holds one line per message;
    colour only on a terminal. The stream is looked up at each message (``sys.stderr`` then), so a
    redirected or captured stderr gets it.
    """

    def __init__(self, level: int = logging.NOTSET):
        super().__init__(level)
        self.console = Console(stderr=True, soft_wrap=True, highlight=False)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if record.levelno >= logging.ERROR:
                prefix, style = "error: ", "red"
            elif record.levelno >= logging.WARNING:
                prefix, style = "warning: ", "yellow"
            else:
                prefix, style = "", ""
            message = self.format(record)
            self.console.print(Text(prefix + message, style=style), markup=False, emoji=False)
        except Exception:  # noqa: BLE001 - logging must never break the command
            self.handleError(record)


def setup(verbosity: int = 0) -> logging.Handler:
    """Configure the ``ablate`` logger: one :class:`ConsoleHandler` (rank zero only) at the level for
    ``verbosity`` (-1 quiet: warnings only, 0: info, 1 verbose: debug). Calling it again replaces
    the handler it added before, so it is safe to call once per command (tests run many)."""
    logger = logging.getLogger("ablate")
    for old in [h for h in logger.handlers if isinstance(h, ConsoleHandler)]:
        logger.removeHandler(old)
    handler = ConsoleHandler()
    handler.addFilter(RankZero())
    logger.addHandler(handler)
    logger.setLevel(LEVELS[max(-1, min(1, verbosity))])
    logger.propagate = False  # a root handler (a host application's) would print each line twice
    return handler


def verbosity_of(quiet: bool, verbose: Optional[bool]) -> int:
    """``-q`` / ``-v`` flags -> :func:`setup`'s verbosity (quiet wins)."""
    return -1 if quiet else 1 if verbose else 0


CAPTURED = ("ablate", "pytorch_lightning", "lightning.pytorch")
"""The loggers whose records a run's ``console.log`` keeps: ablate's status lines and warnings, Lightning's."""


@contextmanager
def capture(path: Path) -> Iterator[None]:
    """Append what the console is told (the records of :data:`CAPTURED` at the levels they are shown,
    timestamped) to ``path`` while the block runs, so a run folder keeps its console log."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RankZero())
    loggers = [logging.getLogger(name) for name in CAPTURED]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
        handler.close()


class Progress:
    """``<what>: <done>/<total> (<s> s)`` logged (info, so on stderr) once a loop has run ``after_s``
    seconds, then at most every ``every_s`` and at the end: a long loop is never silent, a short
    one says nothing.

    Example::

        progress = Progress("scored", len(trials), log)
        for t in trials:
            ...
            progress.step()
    """

    def __init__(
        self,
        what: str,
        total: int,
        logger: logging.Logger,
        after_s: float = 3.0,
        every_s: float = 5.0,
        clock: Optional[Callable[[], float]] = None,
    ) -> None:
        self.what, self.total, self.logger = what, total, logger
        self.after_s, self.every_s, self.clock = after_s, every_s, clock or time.monotonic
        self.done = 0
        self.start = self.clock()
        self.said: Optional[float] = None  # when it last logged

    def step(self) -> None:
        """One item done: log the count if the loop has run long enough and not logged lately, or ends now."""
        self.done += 1
        now = self.clock()
        if now - self.start < self.after_s:
            return
        if self.said is None or now - self.said >= self.every_s or self.done == self.total:
            self.said = now
            self.logger.info("%s: %d/%d (%.0f s)", self.what, self.done, self.total, now - self.start)
