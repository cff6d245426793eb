"""The catalogue of shipped components (``ablate/components.json``): written from the registries, and
what lets commands that never build a model check configs without importing torch."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ablate.utils.typed import CATALOG_FILE

ROOT = Path(__file__).resolve().parents[2]


def test_the_shipped_catalogue_is_the_registries():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from gen_config_docs import render_catalog
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    assert json.loads(CATALOG_FILE.read_text()) == json.loads(render_catalog()), (
        "ablate/components.json is stale: run python scripts/gen_config_docs.py"
    )


def _run_without_torch(code: str) -> str:
    """Run ``code`` in a fresh interpreter; fail if it imported torch or Lightning; its stdout."""
    probe = textwrap.dedent(code) + textwrap.dedent(
        """
        import sys
        heavy = sorted(m for m in ("torch", "pytorch_lightning", "lightning") if m in sys.modules)
        print("IMPORTED", heavy)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=300, check=True
    ).stdout
    assert "IMPORTED []" in out, out
    return out


def test_a_config_error_names_the_choices_without_importing_torch():
    out = _run_without_torch(
        """
        from ablate.config import load_config
        from ablate.utils.typed import ConfigError
        try:
            load_config(None, ["model.attention.score=dott"])
        except ConfigError as err:
            print("ERROR", err)
        cfg = load_config(None, ["model.positions=rotary", "model.attention.score=additive"])
        print("OK", cfg.model.positions, cfg.model.attention.score)
        """
    )
    assert "did you mean 'dot'" in out and "OK rotary additive" in out, out


@pytest.mark.slow
def test_commands_that_never_train_never_import_torch(tmp_path):
    """``--help``, ``table``, ``plot``, a dry run (default ``--devices auto``), ``sweep status``, ``power``,
    ``calibrate``, ``train --help`` and ``--print-config`` run in-process without importing torch or Lightning (or pydantic: 0.15 CPU-s of a dry run); ``table`` and ``plot``
    not the SLURM launcher either."""
    from ablate.sweep.state import SweepState, save_state

    save_state(tmp_path / "sweep", SweepState(name="s", source="s.yaml", signature="x", group="s-000000"))
    _run_without_torch(
        f"""
        import contextlib, io, sys
        from ablate.cli import app
        for argv in (["--help"], ["table", "results/defaults-cpu", "--format", "md"],
                     ["plot", "results/defaults-cpu", "--out", {str(tmp_path / "plots")!r}],
                     ["sweep", "run", "sweeps/quickstart.yaml", "--dry-run", "--out", {str(tmp_path / "q")!r}],
                     ["sweep", "status", {str(tmp_path / "sweep")!r}], ["train", "--help"], ["train", "--print-config"],
                     ["bench", "--help"], ["power", "sweeps/mission-cpu.yaml", "--sigma-from", "results/calibration-cpu"],
                     ["calibrate", "results/mission-cpu"]):
            with contextlib.redirect_stdout(io.StringIO()) as out:
                try:
                    app(argv, standalone_mode=False)
                except SystemExit as exit:
                    assert not exit.code, (argv, exit.code)
            assert out.getvalue().strip(), argv
            if argv[0] in ("table", "plot"):
                assert "ablate.sweep.slurm" not in sys.modules, argv
            assert "pydantic" not in sys.modules, argv  # typer >= 0.29 converts options through it
        """
    )


def test_every_key_with_registry_choices_names_each_shipped_choice_in_its_docstring():
    """The docstring of ``model.attention.score``, ``model.positions``, ``model.arch``, ... (what
    ``--help`` and the configuration reference print) names every shipped choice of its registry."""
    import dataclasses
    import typing

    from ablate.config import Config
    from ablate.utils.typed import OneOf, catalogued, field_docstrings

    shipped = catalogued()["choices"]
    missing = []

    def walk(cls, prefix=""):
        docs = field_docstrings(cls)
        for name, tp in typing.get_type_hints(cls, include_extras=True).items():
            if dataclasses.is_dataclass(tp):
                walk(tp, f"{prefix}{name}.")
                continue
            marks = [
                m for t in (tp, *typing.get_args(tp)) for m in getattr(t, "__metadata__", ()) if isinstance(m, OneOf)
            ]
            for mark in marks:
                doc = docs.get(name, "").lower()
                missing.extend(f"{prefix}{name}: {c}" for c in shipped[mark.key] if c.lower() not in doc)

    walk(Config)
    assert not missing, f"name these choices in the key's docstring: {missing}"
