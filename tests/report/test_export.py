"""``ablate export``: a sweep shipped as results/<sweep>/ rebuilds the identical table from its files alone."""

from __future__ import annotations

import gzip
import json
import shlex
import shutil

import pytest
import sacrebleu
from typer.testing import CliRunner

from ablate.config import Config, load_config
from ablate.report import stats as significance, table as report_table
from ablate.report.commands import app
from ablate.report.stats import aggregate
from ablate.report.trials import collect
from ablate.training.run_folder import RunRecord
from ablate.training.train import train

from tests.helpers.cli import ROOT
from tests.helpers.marks import drawn, table_marks
from tests.helpers.tiny import tiny

runner = CliRunner()


def _with_training_leftovers(variant_sweep, tmp_path):
    """A copy of the stand-in sweep with what a real run also leaves: checkpoints, configs, val texts, state."""
    src = tmp_path / "runs" / "table3"
    shutil.copytree(variant_sweep, src)
    state = {
        "name": "table3",
        "source": "sweeps/table3-cpu.yaml",
        "overrides": ["train.max_steps=10"],
        "created_at": 1.0,
        "trials": [],
        "signature": "x",
    }
    (src / "sweep.json").write_text(json.dumps(state))
    for run in (p for p in src.iterdir() if (p / "hyps").is_dir()):
        (run / "checkpoints").mkdir()
        (run / "checkpoints" / "last.ckpt").write_bytes(b"\0" * 1000)
        (run / "config.yaml").write_text("seed: 1\n")
        (run / "hyps" / "val.txt").write_text("not a test split\n")
        (run / "refs" / "val.txt").write_text("a validation reference\n")
    return src


@pytest.mark.slow
def test_export_rebuilds_the_identical_table_from_its_files_alone(variant_sweep, tmp_path):
    src = _with_training_leftovers(variant_sweep, tmp_path)
    out = tmp_path / "results" / "table3"
    result = runner.invoke(
        app,
        [
            "export",
            str(src),
            str(out),
            "--samples",
            "100",
            "--command",
            "ablate sweep run sweeps/table3-cpu.yaml --parallel 2",
            "--reference",
            "vaswani2017-table3",
        ],
    )
    assert result.exit_code == 0, result.output

    for fmt in ("md", "latex", "csv"):
        assert report_table(str(out), samples=100).render(fmt) == report_table(str(src), samples=100).render(fmt)
    shipped = (out / "table.md").read_text()
    assert shipped.startswith(report_table(str(src), samples=100).render("md")) and "All matched rows: " in shipped
    tex = (out / "table.tex").read_text()  # the paper beside it in LaTeX too, as in table.md
    assert tex.startswith(report_table(str(src), samples=100).render("latex")) and tex.count(r"\end{table}") == 2
    assert r"\caption{Beside Vaswani" in tex and "**" not in tex
    assert len(list((out / "plots").glob("*.png"))) >= 4

    # only summaries and gzip'd test and validation texts travel: no checkpoints or configs
    files = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    trial_files = {f for f in files if "/" in f and not f.startswith("plots/")}
    assert trial_files and all(f.endswith(("summary.json", ".txt.gz")) for f in trial_files)
    assert not any("ckpt" in f or "config.yaml" in f for f in files)
    assert {"A-heads1-s1/hyps/val.txt.gz", "A-heads1-s1/refs/val.txt.gz"} <= files
    assert "A-heads1-s1/hyps/test_2016_flickr.txt.gz" in files and "A-heads1-s1/refs/test_2017_flickr.txt.gz" in files
    hyps = gzip.decompress((out / "A-heads1-s1/hyps/test_2016_flickr.txt.gz").read_bytes()).decode()
    assert hyps == (src / "A-heads1-s1/hyps/test_2016_flickr.txt").read_text()
    assert {t.name for t in collect(str(out))} == {t.name for t in collect(str(src))}  # failed trials too

    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["command"] == "ablate sweep run sweeps/table3-cpu.yaml --parallel 2"
    assert manifest["command_recorded"]
    assert manifest["commit"] and manifest["trials"] == 15 and manifest["finished"] == 13
    assert manifest["trial_wall_time_s"] == 13 * 120.0
    readme = (out / "README.md").read_text()
    assert "ablate sweep run sweeps/table3-cpu.yaml --parallel 2" in readme and manifest["commit"] in readme


@pytest.mark.slow
def test_the_exported_validation_texts_reproduce_the_dev_bleu_and_are_not_tested(tmp_path, cache_dir):
    """A reader can re-check ``val/bleu`` from results/ alone; the table still tests only the test split."""
    overrides = ["train.max_steps=24", "train.max_tokens=1024", "train.warmup=4", "train.lr=3e-2"]
    overrides += ["train.schedule=inverse_sqrt", "train.val_every=8", "eval.beam=1", "tracking.wandb=disabled"]
    src = tmp_path / "runs" / "tiny"
    train(load_config(None, tiny(*overrides, pairs=200)), src / "base-seed=1")
    out = tmp_path / "results" / "tiny"
    result = runner.invoke(app, ["export", str(src), str(out), "--no-plots", "--samples", "20"])
    assert result.exit_code == 0, result.output

    trial = out / "base-seed=1"
    summary = json.loads((trial / "summary.json").read_text())
    hyps, refs = (gzip.decompress((trial / kind / "val.txt.gz").read_bytes()).decode() for kind in ("hyps", "refs"))
    hyps, refs = hyps.split("\n")[:-1], refs.split("\n")[:-1]
    assert len(hyps) == len(refs) == 500 and summary["val/bleu"] > 0
    assert abs(sacrebleu.corpus_bleu(hyps, [refs]).score - summary["val/bleu"]) <= 1e-9
    assert (trial / "sources" / "val.txt.gz").exists()

    sweep = aggregate(collect(str(out)))
    assert significance.test_splits(sweep) == ["test"] and sweep.test_splits == ["test"]
    header = report_table(str(out), samples=20).render("csv").splitlines()[0].split(",")
    assert "test_test/bleu.p" in header and not any(h.startswith(("test_val", "BLEU (val")) for h in header)


def test_export_refuses_to_overwrite_and_rebuilds_the_run_command(variant_sweep, tmp_path):
    src = _with_training_leftovers(variant_sweep, tmp_path)
    out = tmp_path / "results"
    (out / "x").mkdir(parents=True)
    result = runner.invoke(app, ["export", str(src), str(out), "--no-plots"])
    assert result.exit_code == 2 and "pass --force" in result.output and len(result.output.strip().splitlines()) == 1
    result = runner.invoke(app, ["export", str(src), str(out), "--no-plots", "--force", "--samples", "50"])
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["command"] == f"ablate sweep run sweeps/table3-cpu.yaml --out {src} train.max_steps=10"
    assert not manifest["command_recorded"] and not (out / "x").exists() and not (out / "plots").exists()


def test_the_run_record_says_what_machine_ran_it_and_its_cpu_time(tmp_path):
    record = RunRecord(tmp_path, Config())
    sum(i * i for i in range(200_000))  # some CPU work
    record.write("finished")
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["cpu_time_s"] >= 0 and summary["machine"]["cores"] >= 1 and summary["machine"]["cpu"]
    resumed = RunRecord(tmp_path, Config())
    resumed.write("finished")
    assert json.loads((tmp_path / "summary.json").read_text())["cpu_time_s"] >= summary["cpu_time_s"]


def test_the_run_record_names_the_commit_of_every_attempt(tmp_path, monkeypatch):
    import ablate.training.run_folder as tracking

    monkeypatch.setattr(tracking, "git_commit", lambda: "aaa")
    RunRecord(tmp_path, Config()).write("interrupted")
    RunRecord(tmp_path, Config()).write("interrupted")  # resumed on the same code: named once
    monkeypatch.setattr(tracking, "git_commit", lambda: "bbb")
    RunRecord(tmp_path, Config()).write("finished")  # resumed after a code change
    assert json.loads((tmp_path / "summary.json").read_text())["commits"] == ["aaa", "bbb"]


def test_export_names_the_commit_the_trials_ran_not_the_exporting_checkout(variant_sweep, tmp_path):
    src = _with_training_leftovers(variant_sweep, tmp_path)
    for path in src.glob("*/summary.json"):
        summary = json.loads(path.read_text())
        path.write_text(json.dumps({**summary, "commits": ["1234abc"]}))
    out = tmp_path / "results" / "table3"
    result = runner.invoke(app, ["export", str(src), str(out), "--no-plots", "--samples", "50"])
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["commit"] == "1234abc" and manifest["commit_source"] == "trials"
    assert "- Commit: `1234abc` (recorded by the trials)" in (out / "README.md").read_text()

    for path in src.glob("*/summary.json"):  # runs from before ablate recorded commits
        summary = json.loads(path.read_text())
        path.write_text(json.dumps({k: v for k, v in summary.items() if k != "commits"}))
    args = ["export", str(src), str(out), "--no-plots", "--samples", "50", "--force", "--commit", "5678def"]
    assert runner.invoke(app, args).exit_code == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["commit"] == "5678def" and manifest["commit_source"] == "given"
    assert manifest["export_command"].endswith("--commit 5678def")


def test_an_installed_copy_inside_another_repository_does_not_borrow_its_commit(tmp_path):
    import subprocess

    from ablate.utils.provenance import CHECKOUT, git_commit

    site = tmp_path / "project" / ".venv" / "lib" / "site-packages"  # a venv inside someone's git project
    (site / "ablate").mkdir(parents=True)
    project = ["git", "-C", str(tmp_path / "project"), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(tmp_path / "project")], check=True)
    subprocess.run([*project, "commit", "-q", "--allow-empty", "-m", "their project"], check=True)
    assert git_commit(site) == "unknown"
    assert git_commit(CHECKOUT) != "unknown"  # this checkout is a git clone of ablate


def test_export_of_a_running_sweep_counts_its_planned_trials_and_survives_a_bad_start_time(tmp_path):
    """The README said "2 finished of 2" while sweep.json planned 4, and a
    created_at of "yesterday" crashed the export after it had written half its output."""
    from ablate.report.export import export_sweep

    from tests.helpers.records import write_trial

    src = tmp_path / "runs" / "s"
    for seed in (1, 2):
        write_trial(
            src, f"base-seed={seed}", {"status": "finished", "test/bleu": 20.0 + seed, "config": {"seed": seed}}
        )
    planned = [{"name": f"base-seed={s}", "point": {"seed": s}, "status": "pending"} for s in (1, 2, 3, 4)]
    (src / "sweep.json").write_text(json.dumps({"name": "s", "created_at": "yesterday", "trials": planned}))
    manifest = export_sweep(src, tmp_path / "out", plots=False)
    assert (manifest["finished"], manifest["trials"], manifest["wall_time_s"]) == (2, 4, None)
    readme = (tmp_path / "out" / "README.md").read_text()
    assert "- Trials: 2 finished of 4;" in readme
    table = (tmp_path / "out" / "table.md").read_text()
    assert "Trials: 2 of 4 in the table; not in it: 2 pending" in table and "- base-seed=4 (seed 4): pending" in table


# What an export ships agrees with itself: the README's table command prints table.md, the plots draw table.md's
# comparisons, and a results folder exported again keeps its texts (two_by_two: four shipped runs of mission-cpu).


def test_the_recorded_table_command_carries_every_option_that_changes_the_table(two_by_two_runs, tmp_path):
    out = tmp_path / "results" / "small"
    options = ["--alpha", "0.1", "--test", "bs", "--samples", "100"]
    result = runner.invoke(app, ["export", str(two_by_two_runs), str(out), "--no-plots", *options])
    assert result.exit_code == 0, result.output
    shipped = (out / "table.md").read_text()
    assert shipped == report_table(str(out), alpha=0.1, test="bs", samples=100).render("md")
    assert shipped != report_table(str(out)).render("md")  # the options change the table

    manifest = json.loads((out / "manifest.json").read_text())
    command = shlex.split(manifest["table_command"])
    assert command[:2] == ["ablate", "table"] and all(option in command for option in options)
    rebuilt = runner.invoke(app, command[1:])  # ablate table ..., as the README gives it
    assert rebuilt.exit_code == 0, rebuilt.output
    assert rebuilt.stdout == shipped
    assert f"`{manifest['table_command']}`" in (out / "README.md").read_text()
    assert all(option in shlex.split(manifest["export_command"]) for option in options)

    out = tmp_path / "results" / "defaults"  # options left at their defaults are not spelled out
    assert runner.invoke(app, ["export", str(two_by_two_runs), str(out), "--no-plots"]).exit_code == 0
    assert json.loads((out / "manifest.json").read_text())["table_command"] == f"ablate table {out} --format md"


def test_the_recorded_export_command_makes_the_same_export_again(two_by_two_runs, tmp_path):
    out = tmp_path / "first"
    given = ["--no-plots", "--command", "ablate sweep run 'my sweep.yaml' --parallel 2", "--commit", "5" * 40]
    assert runner.invoke(app, ["export", str(two_by_two_runs), str(out), *given]).exit_code == 0
    manifest = json.loads((out / "manifest.json").read_text())
    command = shlex.split(manifest["export_command"])
    assert command[:2] == ["ablate", "export"] and not (out / "plots").exists()
    again = tmp_path / "again"
    command[command.index(str(out))] = str(again)  # the same command, to another folder
    assert runner.invoke(app, command[1:]).exit_code == 0
    rebuilt = json.loads((again / "manifest.json").read_text())
    for key in ("command", "command_recorded", "commit", "commit_source", "plots", "table_command"):
        assert rebuilt[key] == (
            manifest[key] if key != "table_command" else manifest[key].replace(str(out), str(again))
        )
    assert (again / "table.md").read_text() == (out / "table.md").read_text() and not (again / "plots").exists()


def test_the_exported_plots_draw_the_comparisons_of_the_table_beside_them(two_by_two_runs, tmp_path, drawing):
    out = tmp_path / "results" / "small"
    result = runner.invoke(app, ["export", str(two_by_two_runs), str(out), "--test", "bs", "--samples", "200"])
    assert result.exit_code == 0, result.output
    shipped = report_table(str(out), test="bs", samples=200)
    assert (out / "table.md").read_text() == shipped.render("md")
    marks = table_marks(shipped)
    assert marks != table_marks(report_table(str(out), samples=200))  # the seed test's CIs and † differ
    ((sweep, comparisons),) = drawing
    assert drawn(sweep, comparisons) == marks and any(mark for *_, mark in marks.values())
    assert (out / "plots" / "delta_ci.png").is_file()


def test_ablate_plot_takes_the_test_and_samples_of_ablate_table(two_by_two, tmp_path, drawing):
    plots = tmp_path / "plots"
    result = runner.invoke(app, ["plot", str(two_by_two), "--out", str(plots), "--test", "bs", "--samples", "200"])
    assert result.exit_code == 0, result.output
    ((sweep, comparisons),) = drawing
    assert drawn(sweep, comparisons) == table_marks(report_table(str(two_by_two), test="bs", samples=200))
    for args, expected in {
        ("--test", "xx"): "'xx' is not one of",
        ("--samples", "-1"): "-1 is not in the range x>=0",
        ("--test", "ar", "--sigma-from", "results/calibration-cpu"): "needs --test seeds",
    }.items():
        result = runner.invoke(app, ["plot", str(two_by_two), "--out", str(tmp_path / "no"), *args])
        assert result.exit_code == 2 and expected in result.output, (args, result.output)
        assert not (tmp_path / "no").exists()


def test_exporting_a_results_folder_again_keeps_its_texts_and_its_table(two_by_two, tmp_path):
    out = tmp_path / "again"
    result = runner.invoke(app, ["export", str(two_by_two), str(out), "--no-plots"])
    assert result.exit_code == 0, result.output
    for options in ({}, {"test": "bs", "samples": 200}):
        again, shipped = report_table(str(out), **options), report_table(str(two_by_two), **options)
        assert again.render("csv") == shipped.render("csv")
        assert table_marks(again) == table_marks(shipped) and table_marks(shipped)
    assert "not tested" not in (out / "table.md").read_text()
    gz = "score-additive-seed=2/hyps/test_2016_flickr.txt.gz"
    assert (out / gz).read_bytes() == (two_by_two / gz).read_bytes()  # carried over, not gzip'd twice
    assert not list(out.rglob("*.gz.gz")) and not list(out.glob("*/*/*.txt"))

    result = runner.invoke(app, ["export", str(two_by_two), str(two_by_two), "--no-plots", "--force"])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert (two_by_two / gz).is_file() and not (two_by_two / "table.md").exists()


def test_a_results_folder_exported_again_keeps_the_command_time_commit_and_environment_it_recorded(
    two_by_two_runs, tmp_path
):
    first, again = tmp_path / "first", tmp_path / "again"
    command = "ablate sweep run sweeps/mission-cpu.yaml --parallel 2"
    args = ["export", str(two_by_two_runs), str(first), "--no-plots", "--command", command, "--commit", "5" * 40]
    assert runner.invoke(app, args).exit_code == 0
    shipped = json.loads((first / "manifest.json").read_text())
    shipped["wall_time_s"] = 4257.4  # as the sweep's own clock measured it; copies of its files cannot
    (first / "manifest.json").write_text(json.dumps(shipped))

    result = runner.invoke(app, ["export", str(first), str(again), "--no-plots"])
    assert result.exit_code == 0, result.output
    manifest = json.loads((again / "manifest.json").read_text())
    assert manifest["command"] == command and manifest["command_recorded"] is True
    assert manifest["commit"] == "5" * 40 and manifest["commit_source"] == "given"
    assert manifest["wall_time_s"] == 4257.4
    assert manifest["environment"] == shipped["environment"]
    for lock in shipped["environment"]["files"]:
        assert (again / lock["file"]).read_bytes() == (first / lock["file"]).read_bytes()
    readme = (again / "README.md").read_text()
    assert command in readme and "1.18 h (4,257 s)" in readme


SHIPPED = sorted(p.parent.name for p in (ROOT / "results").glob("*/manifest.json"))


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_table_is_what_its_recorded_command_prints_today(name, monkeypatch):
    """Each results folder's table.md and table.tex are what the ``table_command`` in its manifest prints on this
    code: a change to the statistics or the layout that moves a shipped number or mark fails here, not at the
    next reader's rebuild (the golden check of every output ran only on a developer's machine)."""
    monkeypatch.chdir(ROOT)
    folder = ROOT / "results" / name
    command = shlex.split(json.loads((folder / "manifest.json").read_text())["table_command"])
    assert command[:2] == ["ablate", "table"] and command[command.index("--format") + 1] == "md"
    for fmt, file in (("md", "table.md"), ("latex", "table.tex")):
        command[command.index("--format") + 1] = fmt
        result = runner.invoke(app, command[1:])
        assert result.exit_code == 0, result.output
        assert result.stdout == (folder / file).read_text(), (name, file)


def test_a_dotted_split_without_a_test_bleu_keeps_its_texts(tmp_path):
    """A trial whose summary has no ``test_<split>/bleu`` (the fallback: every saved split but validation) lost the
    texts of ``test.2016`` and ``newstest.2014``: the split was cut at its first dot, so ``hyps/test.txt`` was looked
    for and not found."""
    from ablate.report.export import _copy_trial

    run = tmp_path / "runs" / "trial"
    for kind in ("hyps", "refs"):
        (run / kind).mkdir(parents=True)
        for split in ("test.2016", "newstest.2014", "val"):
            (run / kind / f"{split}.txt").write_text(f"{kind} of {split}\n")
    (run / "summary.json").write_text("{}")
    _copy_trial(tmp_path / "runs", "trial", tmp_path / "out")
    for kind in ("hyps", "refs"):
        copied = sorted(p.name for p in (tmp_path / "out" / "trial" / kind).iterdir())
        assert copied == ["newstest.2014.txt.gz", "test.2016.txt.gz", "val.txt.gz"]
        assert gzip.decompress((tmp_path / "out" / "trial" / kind / "test.2016.txt.gz").read_bytes()) == (
            f"{kind} of test.2016\n".encode()
        )
