"""One place for warning filters: each names its cause, and nothing else in ablate filters warnings."""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

import ablate
from ablate.utils import commands

PACKAGE = Path(ablate.__file__).parent
HOME = PACKAGE / "utils" / "commands.py"


def test_every_filter_says_why_and_silences_only_its_warning():
    assert commands.WARNING_FILTERS and all(len(f.cause) > 40 for f in commands.WARNING_FILTERS)
    with warnings.catch_warnings(record=True) as seen:
        warnings.resetwarnings()
        warnings.simplefilter("always")
        commands.ignore_warnings()
        warnings.warn(
            "The 'train_dataloader' does not have many workers which may be a bottleneck.", UserWarning, stacklevel=1
        )
        warnings.warn("train.max_tokens is smaller than the longest sentence", UserWarning, stacklevel=1)
    assert [str(w.message) for w in seen] == ["train.max_tokens is smaller than the longest sentence"]


def test_the_sweeps_engine_block_silences_only_inside_it():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with commands.sweeps_engine():
            warnings.warn("Valid config keys have changed in V2", UserWarning, stacklevel=1)
        warnings.warn("after", UserWarning, stacklevel=1)
    assert [str(w.message) for w in seen] == ["after"]


def test_no_other_module_filters_warnings():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == HOME:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in ("filterwarnings", "simplefilter", "catch_warnings"):
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.attr}")
    assert offenders == [], "filter warnings in ablate/utils/commands.py, with the cause"
