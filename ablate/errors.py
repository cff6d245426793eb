"""The one base of every user-facing error, the one "did you mean" helper, and how an error quotes another.

Each layer raises its own subclass (:class:`~ablate.utils.typed.ConfigError`,
:class:`~ablate.data.sources.DataError`, :class:`~ablate.model.errors.ModelBuildError`, ...), whose
message is one actionable line: what was wrong and what to do. The command line catches
:class:`AblateError` in one place (:class:`ablate.utils.commands.HandledGroup`), prints that line and exits 2;
anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import difflib
from typing import Iterable, Optional


class AblateError(ValueError):
    """A mistake the user can fix; the message is one line that says how."""


def closest(word: str, choices: Iterable[object], cutoff: float = 0.6) -> Optional[str]:
    """The choice nearest to ``word`` (as text; one that differs only in case first), or ``None`` when nothing is close."""
    names = [str(c) for c in choices]
    close = [c for c in names if c.casefold() == str(word).casefold()] or difflib.get_close_matches(
        str(word), names, n=1, cutoff=cutoff
    )
    return close[0] if close else None


def did_you_mean(word: str, choices: Iterable[object], cutoff: float = 0.6) -> str:
    """``"; did you mean 'x'?"`` for the nearest choice, or ``""``."""
    match = closest(word, choices, cutoff)
    return f"; did you mean '{match}'?" if match else ""


def first_line(err: BaseException) -> str:
    """The first line of ``err``'s message, or its class name where it has none (what a one-line error quotes)."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
