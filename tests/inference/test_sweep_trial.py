"""``ablate translate SWEEP --variant NAME --seed N``: the trial folder found by what the trial
is, whatever its folder is called."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from ablate.cli import app
from ablate.inference.commands import TrialLookupError, trial_folder

from tests.helpers.records import make_variant_sweep


@pytest.fixture()
def sweep(tmp_path):
    return make_variant_sweep(tmp_path / "sweep")


def test_variant_and_seed_name_one_trial_whatever_its_folder_is_called(sweep):
    (sweep / "base-s2").rename(sweep / "renamed")  # folder names change with the keys a sweep varies
    assert trial_folder(sweep, "base", 2) == sweep / "renamed"
    assert trial_folder(sweep, "base", 1) == sweep / "base-s1"


def test_an_ambiguous_or_unknown_choice_is_one_line_naming_what_there_is(sweep):
    with pytest.raises(TrialLookupError, match=r"--variant base matches 3 trials .*; add --seed$") as err:
        trial_folder(sweep, "base", None)  # it asks for what is missing, not for the --variant already given
    assert "\n" not in str(err.value)
    with pytest.raises(TrialLookupError, match=r"--seed 1 matches \d trials .*; add --variant$"):
        trial_folder(sweep, None, 1)
    with pytest.raises(
        TrialLookupError, match="no trained trial .* matches --variant bsae --seed 1; variants: "
    ) as err:
        trial_folder(sweep, "bsae", 1)
    assert "base" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(TrialLookupError, match="is not a sweep folder"):
        trial_folder(sweep / "base-s1", "base", 1)


def test_translate_refuses_an_unknown_variant_in_one_line(sweep):
    seeds = sorted({json.loads((p / "summary.json").read_text())["config"]["seed"] for p in sweep.glob("base-*")})
    result = CliRunner().invoke(
        app, ["translate", str(sweep), "--variant", "nope", "--seed", str(seeds[0])], input="Hallo\n"
    )
    assert result.exit_code == 2
    assert "no trained trial" in result.output and len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize("command", [["translate"], ["evaluate"], ["attention", "--text", "a"], ["export-model"]])
def test_a_sweep_folder_without_a_trial_named_says_how_to_pick_one(sweep, command, tmp_path):
    """``ablate translate SWEEP`` (no --variant or --seed) said "SWEEP is not a run directory (no config.yaml); pass a
    folder written by `ablate train`", though --variant and --seed pick a trial of it."""
    extra = ["--out", str(tmp_path / "out")] if command[0] in ("attention", "export-model") else []
    result = CliRunner().invoke(app, [command[0], str(sweep), *command[1:], *extra], input="Hallo\n")
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    names = ", ".join(sorted(p.name for p in sweep.iterdir() if (p / "summary.json").is_file())[:6])
    how = (
        "pick a trial with --variant NAME and/or --seed N"
        if command[0] in ("translate", "evaluate", "export-model")
        else ("pass one of its trial folders")
    )
    assert result.output.startswith(f"error: {sweep} is a sweep folder, not a run (trials: {names}"), result.output
    assert result.output.rstrip().endswith(how), result.output


def test_export_model_picks_a_sweeps_trial_with_variant_and_seed_as_its_help_says(sweep, tmp_path, monkeypatch):
    """``ablate export-model --help`` offered "a sweep folder with --variant/--seed", and the command answered
    "No such option: --variant"."""
    from ablate.inference import torchscript, translate

    picked = []
    run = SimpleNamespace(checkpoint=Path("best.ckpt"))
    monkeypatch.setattr(translate, "load_run", lambda folder, which, **_: picked.append((folder, which)) or run)
    monkeypatch.setattr(torchscript, "export", lambda run, out: out.write_bytes(b"model"))
    monkeypatch.setattr(torchscript, "describe", lambda run: "model")
    args = ["export-model", str(sweep), "--variant", "base", "--seed", "1", "--out", str(tmp_path / "m.pt")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0 and picked == [(sweep / "base-s1", "best")], result.output
    nope = CliRunner().invoke(app, [*args[:3], "nope", *args[4:]])
    assert nope.exit_code == 2 and "no trained trial" in nope.output and len(nope.output.strip().splitlines()) == 1
