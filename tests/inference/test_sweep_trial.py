"""``ablate translate SWEEP --variant NAME --seed N``: the trial folder found by what the trial
is, whatever its folder is called."""

from __future__ import annotations

import json

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
