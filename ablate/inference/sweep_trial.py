"""A sweep's trial named by what it is, not by its folder: ``ablate translate SWEEP --variant NAME --seed N``.

A trial's folder name depends on which keys the sweep varies (``l2`` alone, ``l2-seed=1`` once seeds
vary), so a script that builds paths breaks when a sweep grows. The variant and the seed do not
change: each trial's ``summary.json`` records them (``variant``, ``config.seed``), and this module
finds the one trial folder they name, or says in one line what the sweep holds instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from ablate.errors import AblateError
from ablate.record import RunFiles, RunSummary, SweepFiles


class TrialLookupError(AblateError, ValueError):
    """No trial, or more than one, of the sweep matches ``--variant`` / ``--seed``."""


def _trained(out: Path) -> list[tuple[str, Optional[str], Optional[int], Path]]:
    """``(folder name, variant, seed, folder)`` of every trial folder of ``out`` that has a summary, by name."""
    found = []
    for folder in sorted(p for p in out.iterdir() if p.is_dir()):
        summary = RunSummary.peek(RunFiles(folder).summary)
        if summary is None:
            continue
        seed = (summary.config or {}).get("seed")
        variant = summary.variant.get("name") if isinstance(summary.variant, dict) else summary.variant
        found.append((folder.name, variant, seed if isinstance(seed, int) else None, folder))
    return found


def trial_folder(out: Path, variant: Optional[str], seed: Optional[int]) -> Path:
    """The folder of the trial of sweep ``out`` whose variant is ``variant`` and whose seed is ``seed`` (either may
    be left out where it leaves one trial); :class:`TrialLookupError` in one line otherwise."""
    if not SweepFiles(out).state.is_file():
        raise TrialLookupError(
            f"{out} is not a sweep folder (no {SweepFiles(out).state.name}); --variant and --seed "
            "pick a trial of a sweep, pass a run folder without them"
        )
    trials = _trained(out)
    matches = [t for t in trials if (variant is None or t[1] == variant) and (seed is None or t[2] == seed)]
    if len(matches) == 1:
        return matches[0][3]
    asked = " ".join(
        part for part in (f"--variant {variant}" * (variant is not None), f"--seed {seed}" * (seed is not None)) if part
    )
    if not matches:
        variants = sorted({str(t[1]) for t in trials})
        seeds = sorted({t[2] for t in trials if t[2] is not None and (variant is None or t[1] == variant)})
        raise TrialLookupError(
            f"no trained trial of {out} matches {asked}; variants: {', '.join(variants) or 'none'}; "
            f"seeds{' of ' + variant if variant else ''}: {', '.join(map(str, seeds)) or 'none'}"
        )
    names = ", ".join(t[0] for t in matches)
    raise TrialLookupError(f"{asked} matches {len(matches)} trials of {out} ({names}); add --variant or --seed")
