"""``ablate export`` ships an environment lock: the freeze the trials recorded, else the
exporting machine's, said so."""

from __future__ import annotations

import json
import shutil

from typer.testing import CliRunner

from ablate.report.commands import app
from ablate.report.export import readme_line, write_environment_lock
from ablate.utils.provenance import freeze, freeze_sha256, freeze_text

runner = CliRunner()
THEIRS = ["numpy==1.26.4", "sacrebleu==2.4.0", "torch==2.3.1"]
OTHER = ["numpy==1.26.4", "torch==2.4.0"]


def _trial(root, name: str, lines: list[str] | None, recorded: list[str] | None = None) -> dict:
    """A run folder holding ``lines`` as its environment.txt, its summary recording ``recorded`` (default: the same)."""
    (root / name).mkdir(parents=True)
    summary: dict = {"_name": name}
    if lines is not None:
        (root / name / "environment.txt").write_text(freeze_text(lines))
    if recorded is not None or lines is not None:
        sha = freeze_sha256(recorded if recorded is not None else lines or [])
        summary["environment"] = {"versions": {"torch": "2.3.1"}, "freeze_sha256": sha}
    return summary


def test_the_lock_is_the_freeze_most_trials_ran_with(tmp_path):
    src, out = tmp_path / "runs", tmp_path / "out"
    out.mkdir()
    summaries = [_trial(src, "a", THEIRS), _trial(src, "b", THEIRS), _trial(src, "c", OTHER)]
    env = write_environment_lock(src, summaries, out)
    assert (out / "environment.txt").read_text().splitlines() == THEIRS
    other = f"environment-{freeze_sha256(OTHER)[:12]}.txt"
    assert (out / other).read_text().splitlines() == OTHER
    assert env["source"] == "trials" and env["versions"] == {"torch": "2.3.1"} and env["trials_without"] == 0
    assert [(f["file"], f["trials"]) for f in env["files"]] == [("environment.txt", 2), (other, 1)]
    assert "the packages the trials ran with" in readme_line(env)


def test_a_file_that_is_not_what_the_trial_recorded_is_not_believed(tmp_path):
    src, out = tmp_path / "runs", tmp_path / "out"
    out.mkdir()
    summaries = [
        _trial(src, "edited", THEIRS, recorded=OTHER),  # changed after the run
        _trial(src, "junk", ["rm -rf /"], recorded=["rm -rf /"]),  # not a freeze
        _trial(src, "old", None),  # from before runs recorded it
    ]
    env = write_environment_lock(src, summaries, out)
    assert env["source"] == "export" and env["trials_without"] == 3
    assert (out / "environment.txt").read_text().splitlines() == freeze()  # the exporting machine's
    assert env["files"] == [{"file": "environment.txt", "freeze_sha256": freeze_sha256(freeze()), "trials": 0}]
    assert "the machine that exported: these trials did not record theirs" in readme_line(env)


def test_export_writes_the_lock_and_says_whose_it_is(variant_sweep, tmp_path):
    src = tmp_path / "runs" / "table3"
    shutil.copytree(variant_sweep, src)
    for path in src.glob("*/summary.json"):
        summary = json.loads(path.read_text())
        path.write_text(json.dumps({**summary, "environment": {"freeze_sha256": freeze_sha256(THEIRS)}}))
        (path.parent / "environment.txt").write_text(freeze_text(THEIRS))
    out = tmp_path / "results" / "table3"
    result = runner.invoke(app, ["export", str(src), str(out), "--no-plots", "--samples", "20"])
    assert result.exit_code == 0, result.output
    assert (out / "environment.txt").read_text().splitlines() == THEIRS
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["environment"]["source"] == "trials"
    assert manifest["environment"]["files"][0]["trials"] == manifest["trials"]
    assert "- Environment: `environment.txt`, the packages the trials ran with" in (out / "README.md").read_text()
