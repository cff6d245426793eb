"""Ctrl-C that always ends in a saved checkpoint and a run record that says ``interrupted``.

The first SIGINT stops the run (``KeyboardInterrupt``, which Lightning turns into a graceful stop
that saves ``last.ckpt``). A second one shortly after, by an impatient user or a terminal sending
it twice, used to land inside that shutdown (before Lightning ignores further SIGINTs) and abort
it: no interrupt checkpoint, and the summary left at ``running``. While :class:`SigintGuard` is
active, every SIGINT after the first is counted and ignored, so the shutdown always completes.
"""

from __future__ import annotations

import signal
import threading
from typing import Any


class SigintGuard:
    """``with SigintGuard():`` the first SIGINT raises ``KeyboardInterrupt``; later ones are ignored.

    Outside the main thread (where Python cannot install handlers) it does nothing.
    """

    def __init__(self) -> None:
        self.fired = False
        self.ignored = 0
        self._previous: Any = None
        self._installed = False

    def _handle(self, signum: int, frame: Any) -> None:
        if self.fired:
            self.ignored += 1
            return
        self.fired = True
        raise KeyboardInterrupt

    def __enter__(self) -> SigintGuard:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
            self._installed = True
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
            self._installed = False
