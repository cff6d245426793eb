"""``--sigma-from``: a small table's seed σ pooled with another sweep's seeds of its base setup.

The pooled σ is checked against a reference computed here, its test against Student's t with pooled
variance, its size and power on simulated normal seeds, and on the shipped runs a 2-row, 2-seed table
that cannot mark a 3-BLEU drop with its own 2 df and marks it with the 15 df of results/calibration-cpu.
Every way a source can be the wrong one gives one line.
"""

from __future__ import annotations

import json
import math
import shlex
import shutil
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as st
from typer.testing import CliRunner

from ablate.report import table
from ablate.report.commands import app
from ablate.report.stats import (
    BorrowedNoise,
    ReportError,
    SplitScores,
    borrow_noise,
    compare_scores,
    detectable,
    fit_seed_noise,
    load,
    seeds_needed,
    table_comparisons,
)

from tests.helpers.marks import drawn, table_marks

ROOT = Path(__file__).resolve().parents[2]
MISSION, CALIBRATION = ROOT / "results" / "mission-cpu", ROOT / "results" / "calibration-cpu"
SPLIT = "test_2016_flickr"


def _table(rows: dict[str, list[float]], shared: bool, borrowed: BorrowedNoise | None) -> SplitScores:
    """A table of per-trial scores with no test-set variance (every bootstrap score equal to the trial's)."""
    seeds = {
        r: [str(i + 1 if shared else 10 * j + i + 1) for i in range(len(v))] for j, (r, v) in enumerate(rows.items())
    }
    boot = {r: [np.full(4, x) for x in v] for r, v in rows.items()}
    return SplitScores.of_values(SPLIT, rows, boot, seeds, borrowed)


def test_the_within_row_sum_of_squares_is_pooled_with_the_borrowed_one():
    a, b, ss = [20.0, 21.0], [23.0, 22.5], 7.5
    noise = fit_seed_noise({"a": dict(zip("12", a)), "b": dict(zip("34", b))}, BorrowedNoise("cal", 16, ss))
    own = np.sum((np.array(a) - np.mean(a)) ** 2) + np.sum((np.array(b) - np.mean(b)) ** 2)
    assert noise.unpaired_df == 2 + 15
    assert noise.unpaired == pytest.approx(math.sqrt((own + ss) / 17))
    assert noise.borrowed.sigma == pytest.approx(math.sqrt(ss / 15))


def test_the_borrowed_test_is_students_t_with_the_pooled_variance():
    a, b, borrowed = [20.0, 21.0], [23.0, 22.5], BorrowedNoise("cal", 16, 7.5)
    (c,) = compare_scores([_table({"a": a, "b": b}, False, borrowed)], [("a", "b")])
    pooled = (np.var(a, ddof=1) + np.var(b, ddof=1) + 7.5) / (2 + 15)  # each row has 1 df
    t = (np.mean(b) - np.mean(a)) / math.sqrt(pooled * (1 / 2 + 1 / 2))
    assert c.sigma_df == 17 and not c.paired
    assert c.p_value == pytest.approx(2 * st.t.sf(abs(t), 17), rel=1e-9)


def test_rows_that_share_their_seeds_keep_the_paired_fit_where_it_has_the_df():
    """A 10x3 table on shared seeds (the shipped mission-cpu design) pairs with or without the borrowed seeds."""
    rng = np.random.default_rng(0)
    rows = {f"r{i}": list(20 + rng.normal(size=3)) for i in range(10)}
    (c,) = compare_scores([_table(rows, True, BorrowedNoise("cal", 16, 7.5))], [("r0", "r1")])
    assert c.paired and c.sigma_df == 18


def test_a_one_seed_table_is_tested_with_a_borrowed_sigma_and_not_without():
    rows = {"a": [20.0], "b": [24.0]}
    (alone,) = compare_scores([_table(rows, False, None)], [("a", "b")])
    (pooled,) = compare_scores([_table(rows, False, BorrowedNoise("cal", 16, 15 * 0.7**2))], [("a", "b")])
    assert not alone.tested
    assert pooled.sigma_df == 15 and pooled.sigma == pytest.approx(0.7) and pooled.p_value < 0.01


def test_size_and_power_on_normal_seeds():
    """2x2 tables of N(0, 1) seeds, one independent 16-seed σ source per table: the borrowed test holds
    alpha and finds a 2σ shift about twice as often as the table's own 2-df σ does."""
    rng, n = np.random.default_rng(7), 3000
    calls = {"own": [0, 0], "borrowed": [0, 0]}
    for _ in range(n):
        x, other = rng.normal(size=(2, 2)), rng.normal(size=16)
        borrowed = BorrowedNoise("cal", 16, float(np.sum((other - other.mean()) ** 2)))
        for name, b in (("own", None), ("borrowed", borrowed)):
            for j, shift in enumerate((0.0, 2.0)):
                rows = {"a": list(x[0]), "b": list(x[1] + shift)}
                (c,) = compare_scores([_table(rows, False, b)], [("a", "b")])
                calls[name][j] += c.p_value < 0.05
    size, power = (np.array(calls["borrowed"]) / n).tolist()
    assert 0.04 <= size <= 0.06  # binomial 99.9% band of an exact 5% test over 3,000 tables: 3.8-6.3%
    assert 0.04 <= calls["own"][0] / n <= 0.06
    assert power > 1.8 * calls["own"][1] / n
    predicted = 1 - st.nct.cdf(st.t.ppf(0.975, 17), 17, 2 / 1.0) + st.nct.cdf(-st.t.ppf(0.975, 17), 17, 2 / 1.0)
    assert power == pytest.approx(predicted, abs=0.03)


def test_the_minimum_detectable_effect_and_seeds_needed_count_the_borrowed_df():
    assert detectable(0.65, 17, 2, 0.0, 0.05) < 0.6 * detectable(0.65, 2, 2, 0.0, 0.05)
    own = seeds_needed(2.0, 0.65, 0.0, 0.05, rows=2, shared=False)
    borrowed = seeds_needed(2.0, 0.65, 0.0, 0.05, rows=2, shared=False, borrowed_df=15)
    assert borrowed < own
    assert seeds_needed(6.0, 0.65, 0.0, 0.05, rows=2, shared=False, borrowed_df=15) == 1


def test_a_two_row_two_seed_table_marks_a_large_drop_only_with_the_borrowed_seeds(two_by_two):
    own = table(two_by_two)
    pooled = table(two_by_two, sigma_from=str(CALIBRATION))
    (row_own,) = [r for r in own.df.to_dict("records") if r["name"] == "score-additive"]
    (row_pooled,) = [r for r in pooled.df.to_dict("records") if r["name"] == "score-additive"]
    key = f"test_{SPLIT}/bleu"
    assert row_own[f"{key}.delta"] == pytest.approx(row_pooled[f"{key}.delta"]) and row_own[f"{key}.delta"] < -3
    assert row_own[f"{key}.p_holm"] > 0.05 > 0.001 > row_pooled[f"{key}.p_holm"]
    text = pooled.render("md")
    assert "16 seeds of its base setup from" in text and "(17 df)" in text
    assert "differ from the base only in train.val_every" in text
    assert "†" in text.split("Cells:")[0] and "†" not in own.render("md").split("Cells:")[0]


def _copy_runs(source: Path, out: Path, edit=None) -> Path:
    for run in sorted(source.iterdir()):
        if (run / "summary.json").exists():
            shutil.copytree(run, out / run.name)
            if edit is not None:
                summary = json.loads((out / run.name / "summary.json").read_text())
                edit(summary)
                (out / run.name / "summary.json").write_text(json.dumps(summary))
    return out


def test_a_source_of_another_setup_or_shape_is_refused_in_one_line(two_by_two, tmp_path):
    sweep = load(str(two_by_two))

    def longer(summary):
        summary["config"]["train"]["max_steps"] = 1500

    cases = {
        "another setup": (_copy_runs(CALIBRATION, tmp_path / "longer", longer), "train.max_steps=1500 there, 350 here"),
        "several configurations": (MISSION, "it holds 10 configurations"),
        "the table itself": (two_by_two, "it shares runs with"),
        "a folder inside it": (two_by_two / "base-seed=1", "it shares runs with"),
    }
    one_seed = tmp_path / "one-seed"
    shutil.copytree(CALIBRATION / "seed=1", one_seed / "seed=1")
    cases["one seed"] = (one_seed, "a seed σ needs at least 2")
    # a folder of failed runs only, or none: said as the table's own source was ("no finished trial among 1"),
    # so the user looked for the fault in the table's folder; now named as --sigma-from's
    (tmp_path / "failed" / "t1").mkdir(parents=True)
    (tmp_path / "failed" / "t1" / "summary.json").write_text(json.dumps({"status": "failed", "error": "boom"}))
    (tmp_path / "empty").mkdir()
    cases["failed runs only"] = (tmp_path / "failed", "no finished trial among 1 (failed)")
    cases["no runs"] = (tmp_path / "empty", "no trials in")
    for case, (source, expected) in cases.items():
        with pytest.raises(ReportError, match=None) as err:
            borrow_noise(sweep, str(source), [str(two_by_two)])
        assert expected in str(err.value) and "\n" not in str(err.value), case
        assert str(err.value).startswith(f"--sigma-from {source}: "), case


def test_the_command_line_takes_it_for_the_seed_test_only(two_by_two):
    runner = CliRunner()
    result = runner.invoke(app, ["table", str(two_by_two), "--test", "bs", "--sigma-from", str(CALIBRATION)])
    assert result.exit_code == 2 and "needs --test seeds" in result.output
    result = runner.invoke(app, ["table", str(two_by_two), "--sigma-from", str(CALIBRATION), "--format", "md"])
    assert result.exit_code == 0, result.output
    assert "(`--sigma-from`) (17 df)" in result.output


def test_the_size_script_runs_on_the_shipped_seeds():
    """scripts/calibrate_sigma_from.py, which made results/calibration-cpu-17-32/sigma-from.md, still runs."""
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "scripts/calibrate_sigma_from.py", "--splits", "1", "--tables", "3"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith(("| real", "| simulated"))]
    assert len(rows) == 4 and "+ lent (17 df)" in rows[1]


def test_a_sweep_file_is_planned_with_the_design_its_table_will_have():
    """``ablate power sweeps/mission-cpu.yaml --sigma-from results/calibration-cpu``: the planned design is the
    one results/mission-cpu (that sweep, run) has, and the numbers are the stats layer's for it at σ 0.70."""
    from ablate.report.calibration import TableDesign
    from ablate.report.stats import design_df

    result = CliRunner().invoke(app, ["power", str(ROOT / "sweeps/mission-cpu.yaml"), "--sigma-from", str(CALIBRATION)])
    assert result.exit_code == 0, result.output
    shipped = TableDesign.of_sweep(load(str(MISSION)), "mission-cpu")
    assert (shipped.rows, shipped.seeds, shipped.shared, len(shipped.plan)) == (10, 3, True, 10)
    assert "10 rows x 3 seeds (shared seed values), 10 comparisons" in result.output
    sigma = borrow_noise(load(str(MISSION)), str(CALIBRATION))[SPLIT].sigma
    mde = detectable(sigma, design_df(10, 3, True), 3, 0.0, 0.05 / 10)
    assert f"with the table's own σ: {mde:.2f} BLEU (row + seed fit, 18 df)" in result.output
    own, lent = (seeds_needed(1.0, sigma, 0.0, 0.005, 10, True, borrowed_df=b) for b in (0, 15))
    assert f"Δ 1: {own} own, {lent} with --sigma-from" in result.output


def test_planning_with_the_seeds_of_another_setup_is_refused_in_one_line():
    result = CliRunner().invoke(app, ["power", str(ROOT / "sweeps/quickstart.yaml"), "--sigma-from", str(CALIBRATION)])
    assert result.exit_code == 2
    assert "its runs are not of the base configuration: " in result.output and "data.source=" in result.output


def test_without_the_significance_test_a_lent_sigma_is_refused_naming_the_flag(two_by_two):
    with pytest.raises(ReportError, match="drop --no-significance"):
        table(two_by_two, significance=False, sigma_from=str(CALIBRATION))


# ``ablate plot`` and ``ablate export`` take --sigma-from too, so their CIs and † are the table's.


def test_the_plots_draw_the_intervals_and_marks_of_the_table_with_the_same_source(two_by_two, tmp_path, drawing):
    pooled = table_marks(table(two_by_two, sigma_from=str(CALIBRATION)))
    assert pooled != table_marks(table(two_by_two)) and any(mark for *_, mark in pooled.values())
    result = CliRunner().invoke(
        app, ["plot", str(two_by_two), "--out", str(tmp_path / "plots"), "--sigma-from", str(CALIBRATION)]
    )
    assert result.exit_code == 0, result.output
    ((sweep, comparisons),) = drawing
    assert drawn(sweep, comparisons) == pooled
    assert (tmp_path / "plots" / "delta_ci.png").is_file()


def test_the_notebook_plot_marks_what_the_table_marks_with_the_same_source(two_by_two, monkeypatch):
    import ablate
    import ablate.report.figures as figures

    calls, bars = [], figures.bleu_bars_figure
    monkeypatch.setattr(figures, "bleu_bars_figure", lambda s, c, *a: calls.append((s, c)) or bars(s, c, *a))
    assert ablate.plot(two_by_two, sigma_from=str(CALIBRATION)) is not None
    ((sweep, comparisons),) = calls
    assert drawn(sweep, comparisons) == table_marks(table(two_by_two, sigma_from=str(CALIBRATION)))


def test_an_export_with_a_lent_sigma_ships_the_table_its_readme_command_rebuilds(two_by_two_runs, tmp_path, drawing):
    out = tmp_path / "results" / "small"
    result = CliRunner().invoke(app, ["export", str(two_by_two_runs), str(out), "--sigma-from", str(CALIBRATION)])
    assert result.exit_code == 0, result.output
    shipped = (out / "table.md").read_text()
    assert shipped == table(out, sigma_from=str(CALIBRATION)).render("md") != table(out).render("md")
    assert "16 seeds of its base setup from" in shipped and "(17 df)" in shipped
    assert (out / "table.tex").read_text() == table(out, sigma_from=str(CALIBRATION)).render("latex")
    ((sweep, comparisons),) = drawing  # the exported plots too
    assert drawn(sweep, comparisons) == table_marks(table(out, sigma_from=str(CALIBRATION)))

    manifest = json.loads((out / "manifest.json").read_text())
    command = shlex.split(manifest["table_command"])
    assert command[:2] == ["ablate", "table"] and command[-2:] == ["--sigma-from", str(CALIBRATION)]
    rebuilt = CliRunner().invoke(app, command[1:])  # ablate table ...
    assert rebuilt.exit_code == 0, rebuilt.output
    assert rebuilt.stdout == shipped
    readme = (out / "README.md").read_text()
    assert manifest["table_command"] in readme and f"pooled with the seeds of `{CALIBRATION}`" in readme
    assert "--sigma-from" in manifest["export_command"] and manifest["sigma_from"] == str(CALIBRATION)


def test_plot_and_export_refuse_what_table_refuses_in_one_line(two_by_two, tmp_path):
    runner, out = CliRunner(), tmp_path / "out"
    cases = {
        "plot, no test": (["plot", str(two_by_two), "--no-significance"], "drop --no-significance"),
        "export, sentences only": (["export", str(two_by_two), str(out), "--test", "bs"], "needs --test seeds"),
        "plot, many configurations": (["plot", str(two_by_two)], "it holds 10 configurations"),
        "export, many configurations": (["export", str(two_by_two), str(out)], "it holds 10 configurations"),
    }
    for case, (args, expected) in cases.items():
        source = MISSION if "configurations" in case else CALIBRATION
        args = [*args, "--sigma-from", str(source)] + (["--out", str(out)] if args[0] == "plot" else [])
        result = runner.invoke(app, args)
        assert result.exit_code == 2 and expected in result.output, (case, result.output)
        assert len(result.output.strip().splitlines()) == 1, (case, result.output)
        assert not out.exists(), case


def test_the_wandb_report_holds_the_table_of_the_same_source(two_by_two, tmp_path):
    from ablate.report.render import to_markdown
    from ablate.report.sources import make_report

    pooled = to_markdown(table(two_by_two, sigma_from=str(CALIBRATION)).table)
    assert pooled != to_markdown(table(two_by_two).table)
    report = make_report(str(two_by_two), sigma_from=str(CALIBRATION))
    assert [b.text for b in report.blocks if type(b).__name__ == "MarkdownBlock"] == [pooled]
    out = tmp_path / "spec.json"
    args = ["report", str(two_by_two), "--dry-run", "--out", str(out), "--sigma-from", str(CALIBRATION)]
    assert CliRunner().invoke(app, args).exit_code == 0
    assert json.dumps(pooled)[1:-1] in out.read_text()  # the spec publishing would save carries it
    refused = CliRunner().invoke(app, [*args[:3], "--test", "bs", "--sigma-from", str(CALIBRATION)])
    assert refused.exit_code == 2 and "needs --test seeds" in refused.output


def test_a_sweep_of_one_seed_per_row_is_planned_with_the_lent_sigma(tmp_path):
    """A lent σ tests even rows of one seed (docs/reports.md), so `ablate power` plans them: no seed df of the
    table's own, the lent df alone. It refused: "calibrating a table needs every row to have the same number
    (>= 2) of seeds"."""
    from ablate.report.stats import design_df

    sweep = tmp_path / "one-seed.yaml"
    sweep.write_text((ROOT / "sweeps/mission-cpu.yaml").read_text().replace("values: [1, 2, 3]", "values: [1]"))
    result = CliRunner().invoke(app, ["power", str(sweep), "--sigma-from", str(CALIBRATION)])
    assert result.exit_code == 0, result.output
    assert "10 rows x 1 seed (shared seed values), 10 comparisons" in result.output  # not "1 seeds"
    assert "with the table's own σ: none (no seed df)" in result.output
    sigma = borrow_noise(load(str(MISSION)), str(CALIBRATION))[SPLIT].sigma
    mde = detectable(sigma, design_df(10, 1, True, borrowed_df=15), 1, 0.0, 0.05 / 10)
    assert f"with --sigma-from {CALIBRATION}: {mde:.2f} BLEU (within-row fit, 15 df)" in result.output


def test_planning_a_sweep_of_one_configuration_says_there_is_nothing_to_compare():
    """It said "the table has no comparisons to calibrate" for `ablate power`."""
    result = CliRunner().invoke(
        app, ["power", str(ROOT / "sweeps/calibration-cpu.yaml"), "--sigma-from", str(CALIBRATION)]
    )
    assert result.exit_code == 2 and result.output.count("\n") == 1
    assert result.output.startswith("error: calibration-cpu: the table has no comparisons to plan (one row")


def test_planning_a_two_row_sweep_states_its_level_plainly(tmp_path):
    """Two rows (base and one variant), one comparison: `ablate power` said 'Holm at alpha 0.05: each at alpha/1'
    and '80% power at alpha/1'."""
    import yaml

    spec = yaml.safe_load((ROOT / "sweeps/mission-cpu.yaml").read_text())
    spec["parameters"]["variant"]["values"] = spec["parameters"]["variant"]["values"][:2]
    spec["parameters"]["seed"]["values"] = [1, 2]
    del spec["parameters"]["comparisons"]
    (sweep := tmp_path / "two.yaml").write_text(yaml.safe_dump(spec))
    result = CliRunner().invoke(app, ["power", str(sweep), "--sigma-from", str(CALIBRATION)])
    assert result.exit_code == 0, result.output
    assert "alpha/1" not in result.output and "Holm" not in result.output
    assert "2 rows x 2 seeds (shared seed values), 1 comparison at alpha 0.05" in result.output
    assert "seeds per row for 80% power at alpha 0.05: Δ 1:" in result.output


def test_rows_of_one_seed_take_the_per_seed_sentence_part_from_the_lent_seeds(tmp_path):
    """Rows of one seed have no within-row bootstrap covariance to measure the per-seed part s of their sentence
    variance (the seed x sentence interaction, inside σ already), so it was counted twice: SE² = 2σ² + v, not
    2σ² + v - 2s (docs/reports.md, Minimum detectable effect). Simulated through of_values + compare_scores
    (σ 0.70, s 0.066, v0 0.01, 4,000 tables): size 3.5% and power 75.5% at the footnote's MDE, now 4.7% and 79.7%.
    SOURCE's seeds of the base configuration measure s on the same sentences."""
    for name in ("base-seed=1", "score-additive-seed=1"):
        shutil.copytree(MISSION / name, tmp_path / name)
    _, (c,) = table_comparisons(str(tmp_path), samples=500, sigma_from=str(CALIBRATION))
    lent = SplitScores.of_sweep(load(str(CALIBRATION)), SPLIT, 2000)  # as many resamples as the lent ones
    assert 0.03 < lent.per_seed_var < c.sentence_var / 2
    assert c.sentence_fixed == pytest.approx(max(c.sentence_var - 2 * lent.per_seed_var, 0.0), rel=1e-6)
    assert c.se == pytest.approx(math.sqrt(2 * c.sigma**2 + c.sentence_fixed), rel=1e-9)


@pytest.mark.parametrize(
    "trials, counted",
    [
        (
            ("base-seed=1", "score-additive-seed=1", "heads-1-seed=1"),
            "(15 df; the table's 3 trials, one per row, add none)",
        ),
        (
            ("base-seed=1", "base-seed=2", "score-additive-seed=1", "score-additive-seed=2", "heads-1-seed=1"),
            "over 4 of the table's 5 trials and 16 seeds of its base setup from",
        ),
    ],
)
def test_the_sigma_note_counts_the_trials_that_feed_sigma(tmp_path, trials, counted):
    """A row of one seed adds nothing to a pooled within-row variance: the note of a one-seed table read 'from the
    pooled within-row spread over the table's 3 trials and 16 seeds ... (15 df)', as if the 3 trials were in it."""
    for name in trials:
        shutil.copytree(MISSION / name, tmp_path / name)
    md = table(str(tmp_path), samples=200, sigma_from=str(CALIBRATION)).render("md")
    note = next(line for line in md.splitlines() if line.startswith("Seed σ"))
    assert counted in note and "16 seeds of its base setup" in note
    assert ("a trial alone in its row adds none" in note) is (len(trials) == 5)
    assert f"over the table's {len(trials)} trials" not in note


def test_a_lent_sigma_that_only_the_rows_of_other_seeds_pool_is_said_to_be_used_for_them(tmp_path):
    """Nine rows of mission-cpu's seeds 1-3 (the row + seed fit) and heads-1 retrained with seeds 11-13: the lent seeds
    go into heads-1's within-row σ (35 df = 20 + 15), and the note said 'The table's rows share their seed values ...
    so that fit is used and the 16 seeds of results/calibration-cpu (σ 0.70 BLEU) are not'."""
    for trial in MISSION.glob("*-seed=*"):
        if not trial.name.startswith("heads-1-"):
            shutil.copytree(trial, tmp_path / trial.name)
            continue
        seed = 10 + int(trial.name.rsplit("=", 1)[1])
        shutil.copytree(trial, tmp_path / f"other-seeds-{seed}")
        summary = json.loads((trial / "summary.json").read_text())
        summary["config"]["seed"], summary["variant"] = seed, "zz-heads-1"
        (tmp_path / f"other-seeds-{seed}" / "summary.json").write_text(json.dumps(summary))
    md = table(str(tmp_path), samples=200, sigma_from=str(CALIBRATION)).render("md")
    sigma = next(line for line in md.splitlines() if line.startswith("Seed σ"))
    assert "from a row + seed fit over 27 of the table's 30 trials" in sigma
    assert f"and 16 seeds of its base setup from {CALIBRATION} (`--sigma-from`) (35 df) for zz-heads-1" in sigma
    lent = next(line for line in md.splitlines() if line.startswith(("The table's rows", str(CALIBRATION))))
    assert "are not" not in lent and "zz-heads-1" in lent and "15 df" in lent
