"""Reading a W&B project: no API key, or W&B failing, is one line; no network."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from ablate.cli import app
from ablate.report.trials import INVALID, ReportError, collect, from_wandb_run


@pytest.fixture()
def no_key(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    (tmp_path / "netrc").write_text("")
    monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))


def test_table_of_a_wandb_project_without_an_api_key_is_one_line(no_key):
    with pytest.raises(ReportError, match=r"needs an API key: set WANDB_API_KEY or run `wandb login`"):
        collect("wandb:x/y")
    result = CliRunner().invoke(app, ["table", "wandb:x/y"])
    assert result.exit_code != 0 and "needs an API key" in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


def test_a_failing_wandb_api_is_one_line():
    class Refusing:
        def runs(self, path, filters=None):
            raise RuntimeError("Could not find project y\nmore detail")

    with pytest.raises(ReportError, match=r"^cannot read W&B project x/y: Could not find project y$"):
        collect("wandb:x/y", api=Refusing())


def test_a_wandb_run_with_a_bad_summary_is_invalid_not_a_traceback():
    class Run:
        name, state, group = "r", "finished", None
        config = {"seed": 1}
        summary = {"val/bleu": "x", "history": [{"step": 1, "val/bleu": 2.0}]}

    trial = from_wandb_run(Run())
    assert trial.status == INVALID and trial.error == "W&B summary: val/bleu is 'x', not a number"


def test_the_declared_wandb_floor_keeps_a_received_artifact_inside_its_download_folder():
    """``ablate table wandb:...`` downloads a run's hypotheses artifact (``Artifact.download(root=tmp)``), whose
    manifest someone else wrote: wandb before 0.28.0 (PR #11735) wrote an entry named ``../../.bashrc`` where its
    path said, outside the download folder. pyproject declared ``wandb>=0.17``."""
    import re
    from pathlib import Path

    import ablate

    text = (Path(ablate.__file__).parent.parent / "pyproject.toml").read_text()
    floor = re.search(r'"wandb>=([\d.]+)"', text)
    assert floor and tuple(map(int, floor.group(1).split("."))) >= (0, 28), floor
