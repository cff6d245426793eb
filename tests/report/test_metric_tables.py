"""``ablate table --metric`` and ``ablate score``: tables, † and 'best' on chrF, chrF++, TER or a plugin's
metric, in the metric's direction, and metrics added to runs from their saved hypotheses."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
import sacrebleu
from typer.testing import CliRunner

from ablate import cli
from ablate.metrics import METRIC_SCORERS, SentenceMetric, register_metric
from ablate.report import load, table as report_table
from ablate.report.layout import MARK
from ablate.report.render import render

ROOT = Path(__file__).resolve().parents[2]
MISSION = ROOT / "results" / "mission-cpu"
SPLIT = "test_2016_flickr"


class SourceLengthRatio(SentenceMetric):
    """Hypothesis words per source word, in percent, per sentence: a real (if crude) adequacy signal that
    needs the sources."""

    name, label, version = "lenratio", "len/src", "1"

    def sentences(self, hyps, refs, sources=None):
        if sources is None:
            raise ValueError("lenratio needs the source sentences (sources/<split>.txt)")
        return [100.0 * len(h.split()) / max(len(s.split()), 1) for h, s in zip(hyps, sources)]


@pytest.fixture()
def lenratio():
    register_metric("lenratio", SourceLengthRatio)
    yield SourceLengthRatio()
    METRIC_SCORERS.pop("lenratio", None)


@pytest.fixture()
def sweep_copy(variant_sweep: Path, tmp_path: Path) -> Path:
    """A writable copy of the variant sweep, with sources saved beside its hypotheses."""
    root = tmp_path / "table3"
    shutil.copytree(variant_sweep, root)
    for run in root.iterdir():
        for refs in (run / "refs").glob("*.txt") if run.is_dir() else []:
            (run / "sources").mkdir(exist_ok=True)
            lines = refs.read_text(encoding="utf-8").splitlines()
            (run / "sources" / refs.name).write_text("\n".join(f"{x} src" for x in lines) + "\n", encoding="utf-8")
    return root


def _ter(run: Path, split: str) -> float:
    hyps = (run / "hyps" / f"{split}.txt").read_text(encoding="utf-8").splitlines()
    refs = (run / "refs" / f"{split}.txt").read_text(encoding="utf-8").splitlines()
    return sacrebleu.metrics.TER().corpus_score(hyps, [refs]).score


def _column(table, key: str) -> int:
    return next(i for i, c in enumerate(table.columns) if c.key == key)


def test_ter_table_is_scored_from_hypotheses_and_best_is_the_lowest(variant_sweep):
    sweep, table = _parts(report_table(str(variant_sweep), metric="ter"))
    i = _column(table, f"test_{SPLIT}/ter")
    col = table.columns[i]
    assert col.label == f"TER ({SPLIT})" and col.higher_better is False and col.split == SPLIT
    cells = {row.name: row.cells[i] for row in table.rows}
    means = {name: c.stat.mean for name, c in cells.items()}
    # the cell is the mean over seeds of corpus TER of each trial's hypotheses
    row = next(r for r in sweep.rows if r.name == "A-heads1")
    assert means["A-heads1"] == pytest.approx(sum(_ter(variant_sweep / t.name, SPLIT) for t in row.trials) / 3)
    best = [name for name, c in cells.items() if c.best]
    assert best == ["E-learned"] and means["E-learned"] == min(means.values())  # 5% of words changed: least TER
    assert means["A-heads1"] > means["base"]  # worse: more edits
    assert MARK in cells["A-heads1"].mark and MARK in cells["E-learned"].mark and cells["A-heads8"].mark == ""
    comp = cells["E-learned"].comparison
    assert comp.metric == "ter" and comp.delta < 0  # better, by the direction of an error rate
    text = render(table, "md")
    assert "TER is an error rate, lower is better" in text
    assert "corpus TER" in text and "TER: nrefs:1|case:lc|tok:tercom" in text.replace("\\|", "|")


def test_bleu_table_is_unchanged_by_the_metric_path(variant_sweep):
    default = render(report_table(str(variant_sweep)).table, "md")
    assert render(report_table(str(variant_sweep), metric="bleu").table, "md") == default
    assert "BLEU (test_2016_flickr)" in default and "lower is better" not in default


def test_chrf_cells_come_from_the_summaries_and_the_test_from_the_hypotheses(variant_sweep):
    sweep, table = _parts(report_table(str(variant_sweep), metric="chrf"))
    i = _column(table, f"test_{SPLIT}/chrf")
    base = table.rows[0].cells[i]
    assert base.stat.mean == pytest.approx(50.0 + 27.5)  # the fixture's summaries record chrF = 50 + BLEU
    hyp_chrf = [sacrebleu.metrics.CHRF().corpus_score(t.hyps[SPLIT], [t.refs[SPLIT]]).score for t in sweep.base.trials]
    assert base.comparison is None  # the base is not compared with itself
    elearned = next(r for r in table.rows if r.name == "E-learned").cells[i].comparison
    assert elearned.base_bleu == pytest.approx(sum(hyp_chrf) / 3)  # the test reads the hypotheses' chrF
    assert [c.label for c in table.columns if c.key.endswith("/chrf")][0] == "chrF (dev)"


def test_an_unknown_metric_is_one_line_with_the_choices(variant_sweep):
    result = CliRunner().invoke(cli.app, ["table", str(variant_sweep), "--metric", "terr"])
    assert result.exit_code == 2
    assert result.output.strip() == (
        "error: unknown metric 'terr' (choose from: bleu, chrf, chrf++, ter); did you mean 'ter'?"
    )


def test_per_seed_lists_the_tables_metric(variant_sweep):
    """A TER table's footnotes send the reader to ``--per-seed`` for each trial's Δ and its ‡, which refused
    ``--metric ter`` ('lists test BLEU per trial'): it lists each trial's TER (scored from its hypotheses, as the
    table's) and its Δ against the base's trial of the same seed."""
    md = report_table(str(variant_sweep), metric="ter", samples=50).render("md")
    assert "each trial's Δ in `--per-seed`" in md
    result = CliRunner().invoke(cli.app, ["table", str(variant_sweep), "--per-seed", "--metric", "ter", "-f", "md"])
    assert result.exit_code == 0, result.output
    assert "(test TER, lower is better; Δ against the base trial of the same seed)" in result.output
    assert f"| TER ({SPLIT}) |" in result.output and "BLEU" not in result.output
    base, heads1 = _ter(variant_sweep / "base-s1", SPLIT), _ter(variant_sweep / "A-heads1-s1", SPLIT)
    assert f"| A-heads1 | 1 | {heads1:.2f} |" in result.output and f"{heads1 - base:+.2f}" in result.output
    csv_out = CliRunner().invoke(cli.app, ["table", str(variant_sweep), "--per-seed", "--metric", "ter", "-f", "csv"])
    assert csv_out.output.splitlines()[0].startswith("row,seed,test_test_2016_flickr/ter,")


def test_reference_without_the_metric_says_so(variant_sweep):
    result = CliRunner().invoke(
        cli.app, ["table", str(variant_sweep), "--metric", "chrf++", "--reference", "vaswani2017-table3", "-f", "md"]
    )
    assert result.exit_code == 0, result.output
    assert "chrF++ (test_2016_flickr)" in result.output
    assert "note: the published table 'vaswani2017-table3' reports BLEU, not chrF++" in result.output


def test_the_note_under_a_latex_table_is_a_latex_comment(variant_sweep):
    """`--format latex --metric chrf --reference NAME` ended the .tex with the note as document text: printed in the
    paper, and a source path with ``_`` in it (results/table3_cpu) stopped pdflatex ("Missing $ inserted")."""
    args = ["table", str(variant_sweep), "--metric", "chrf", "--reference", "vaswani2017-table3", "-f", "latex"]
    result = CliRunner().invoke(cli.app, [*args, "--no-significance"])
    assert result.exit_code == 0, result.output
    last = result.output.rstrip().splitlines()[-1]
    assert last.startswith("% note: the published table 'vaswani2017-table3' reports BLEU, not chrF"), last


@pytest.mark.slow
def test_plot_metric_names_its_figures(variant_sweep, tmp_path):
    result = CliRunner().invoke(cli.app, ["plot", str(variant_sweep), "--metric", "ter", "--out", str(tmp_path / "p")])
    assert result.exit_code == 0, result.output
    names = {p.name for p in (tmp_path / "p").iterdir()}
    assert {"test_ter.png", "ter_vs_speed.png", "delta_ci.png"} <= names and "test_bleu.png" not in names


def test_score_adds_ter_to_every_finished_run_and_is_idempotent(sweep_copy):
    runner = CliRunner()
    result = runner.invoke(cli.app, ["score", str(sweep_copy), "--metric", "ter"])
    assert result.exit_code == 0, result.output
    finished = sorted(p for p in sweep_copy.iterdir() if p.is_dir() and p.name not in ("B-dk16-s3", "E-learned-s3"))
    assert "E-learned-s3: left alone (status running)" in result.output
    for run in finished:
        summary = json.loads((run / "summary.json").read_text())
        for split in ("test_2016_flickr", "test_2017_flickr"):
            assert summary[f"test_{split}/ter"] == pytest.approx(_ter(run, split))
        assert summary["test/ter"] == summary["test_test_2016_flickr/ter"]
        assert summary["ter_signature"].startswith("nrefs:1|case:lc|tok:tercom")
        assert summary["test/bleu"] == json.loads((run / "summary.json").read_text())["test/bleu"]
    before = {run: (run / "summary.json").read_bytes() for run in finished}
    stamps = {run: (run / "summary.json").stat().st_mtime_ns for run in finished}
    time.sleep(0.01)
    again = runner.invoke(cli.app, ["score", str(sweep_copy), "--metric", "ter"])
    assert again.exit_code == 0 and "base-s1: already scored" in again.output
    assert {run: (run / "summary.json").read_bytes() for run in finished} == before
    assert {run: (run / "summary.json").stat().st_mtime_ns for run in finished} == stamps  # not even rewritten
    # the table now reads the summaries: a recorded value is what the cell shows
    summary = json.loads((finished[0] / "summary.json").read_text())
    summary["test_test_2016_flickr/ter"] = 1.0
    (finished[0] / "summary.json").write_text(json.dumps(summary))
    rows = load(str(sweep_copy), metric="ter").rows
    trial = next(t for r in rows for t in r.trials if t.name == finished[0].name)
    assert trial.metrics["test_test_2016_flickr/ter"] == 1.0


def test_score_leaves_a_run_with_a_torn_text_alone_and_scores_the_others(sweep_copy):
    (sweep_copy / "base-s1" / "hyps" / f"{SPLIT}.txt").write_bytes(b"\xff\xfe broken\n")
    result = CliRunner().invoke(cli.app, ["score", str(sweep_copy), "--metric", "ter"])
    assert result.exit_code == 0, result.output
    assert f"base-s1: left alone (hyps/{SPLIT}.txt is not UTF-8 text" in result.output
    assert "test/ter" not in json.loads((sweep_copy / "base-s1" / "summary.json").read_text())
    assert "test/ter" in json.loads((sweep_copy / "base-s2" / "summary.json").read_text())


def test_score_leaves_a_run_with_a_truncated_text_alone_and_says_which(sweep_copy):
    """A hyps file cut short scored the run on its other splits and said "scored 1 of 1" with that split gone."""
    hyps = sweep_copy / "base-s1" / "hyps" / f"{SPLIT}.txt"
    lines = hyps.read_text(encoding="utf-8").splitlines()
    hyps.write_text("\n".join(lines[:-1]) + "\n", encoding="utf-8")
    result = CliRunner().invoke(cli.app, ["score", str(sweep_copy), "--metric", "ter"])
    assert result.exit_code == 0, result.output
    n = len(lines)
    assert (
        f"base-s1: left alone (hyps/{SPLIT}.txt has {n - 1} lines, refs/{SPLIT}.txt {n}: not aligned)" in result.output
    )
    assert not any("/ter" in k for k in json.loads((sweep_copy / "base-s1" / "summary.json").read_text()))
    assert "test/ter" in json.loads((sweep_copy / "base-s2" / "summary.json").read_text())


def test_score_leaves_a_trial_folder_linking_out_of_the_sweep_alone(sweep_copy, tmp_path):
    """A received sweep folder's trial folder that is a link to a run of yours elsewhere: ``ablate score`` rewrote
    that run's summary.json through the link, as sweep run would have trained into it before Planner.open refused."""
    mine = tmp_path / "mine"
    shutil.move(sweep_copy / "base-s1", mine)
    (sweep_copy / "base-s1").symlink_to(mine)
    before = (mine / "summary.json").read_bytes()
    result = CliRunner().invoke(cli.app, ["score", str(sweep_copy), "--metric", "ter"])
    assert result.exit_code == 0, result.output
    assert f"base-s1: left alone (a link to {mine}, outside {sweep_copy}: score that run itself)" in result.output
    assert (mine / "summary.json").read_bytes() == before
    assert "test/ter" in json.loads((sweep_copy / "base-s2" / "summary.json").read_text())
    assert CliRunner().invoke(cli.app, ["score", str(sweep_copy / "base-s1"), "--metric", "ter"]).exit_code == 0
    assert "test/ter" in json.loads((mine / "summary.json").read_text())  # named itself, the run is scored


def test_score_a_single_run_folder(sweep_copy):
    run = sweep_copy / "base-s2"
    result = CliRunner().invoke(cli.app, ["score", str(run), "--metric", "chrf++"])
    assert result.exit_code == 0, result.output
    summary = json.loads((run / "summary.json").read_text())
    hyps = (run / "hyps" / f"{SPLIT}.txt").read_text(encoding="utf-8").splitlines()
    refs = (run / "refs" / f"{SPLIT}.txt").read_text(encoding="utf-8").splitlines()
    assert summary[f"test_{SPLIT}/chrf++"] == sacrebleu.metrics.CHRF(word_order=2).corpus_score(hyps, [refs]).score
    assert "test_2016_flickr/chrf++" in result.output and "base-s1" not in result.output


def test_score_refuses_a_folder_that_is_not_a_run_or_sweep(tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("x")
    result = CliRunner().invoke(cli.app, ["score", str(tmp_path), "--metric", "ter"])
    assert result.exit_code == 2
    assert result.output.startswith("error: ") and result.output.count("\n") == 1
    assert f"{tmp_path} is not a run or sweep folder" in result.output


def test_a_plugin_metric_with_sources_round_trips_through_score_and_table(sweep_copy, lenratio):
    result = CliRunner().invoke(cli.app, ["score", str(sweep_copy), "--metric", "lenratio"])
    assert result.exit_code == 0, result.output
    run = sweep_copy / "A-heads1-s1"
    summary = json.loads((run / "summary.json").read_text())
    hyps = (run / "hyps" / f"{SPLIT}.txt").read_text(encoding="utf-8").splitlines()
    sources = (run / "sources" / f"{SPLIT}.txt").read_text(encoding="utf-8").splitlines()
    expected = sum(100.0 * len(h.split()) / len(s.split()) for h, s in zip(hyps, sources)) / len(hyps)
    assert summary[f"test_{SPLIT}/lenratio"] == pytest.approx(expected)
    assert summary["lenratio_signature"] == "lenratio|version:1"
    sweep, table = _parts(report_table(str(sweep_copy), metric="lenratio"))
    i = _column(table, f"test_{SPLIT}/lenratio")
    assert table.columns[i].label == f"len/src ({SPLIT})"
    tested = [row.cells[i].comparison for row in table.rows if row.cells[i].comparison is not None]
    assert tested and all(c.tested and c.metric == "lenratio" for c in tested)  # the seed-aware test applies
    assert "len/src: lenratio|version:1" in render(table, "md").replace("\\|", "|")


@pytest.mark.slow
def test_mission_cpu_gets_a_whole_chrf_plus_plus_table_from_its_saved_hypotheses():
    if not (MISSION / "base-seed=1" / "hyps").is_dir():
        pytest.skip("results/mission-cpu is not in this checkout")
    summary = json.loads((MISSION / "base-seed=1" / "summary.json").read_text())
    assert "test/chrf++" not in summary  # shipped before chrF++ was recorded
    result = CliRunner().invoke(cli.app, ["table", str(MISSION), "--metric", "chrf++", "-f", "md"])
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if line.startswith("| ") and "350" in line]
    assert len(rows) == 10 and all(" ± " in r for r in rows)
    assert f"chrF++ ({SPLIT})" in result.output and MARK in result.output and "corpus chrF++" in result.output


def test_a_wandb_source_gets_the_metric_from_its_texts_artifact(variant_sweep, wandb_api):
    local = report_table(str(variant_sweep), metric="chrf++", samples=300).table
    remote = report_table("wandb:me/ablate/table3", metric="chrf++", samples=300, api=wandb_api).table
    i, j = _column(local, f"test_{SPLIT}/chrf++"), _column(remote, f"test_{SPLIT}/chrf++")
    assert {r.name: r.cells[i].stat.mean for r in local.rows} == pytest.approx(
        {r.name: r.cells[j].stat.mean for r in remote.rows}
    )
    assert {r.name: r.cells[i].mark for r in local.rows} == {r.name: r.cells[j].mark for r in remote.rows}


def _parts(result):
    return result.sweep, result.table


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--reference", "vaswani2017-table3"], "error: --per-seed lists each trial, not the table beside a paper"),
        (["--columns", "h"], "error: --per-seed lists each trial's test BLEU: drop --columns"),
        (["--by-length"], "error: --per-seed lists each trial's test BLEU: drop --by-length"),
        (["--alpha", "0.01"], "error: --per-seed lists each trial's Δ, with no test: drop --alpha"),
        (["--samples", "50"], "error: --per-seed lists each trial's Δ, with no test: drop --samples"),
        (["--test", "bs"], "error: --per-seed lists each trial's Δ, with no test: drop --test"),
    ],
)
def test_per_seed_refuses_the_options_it_would_ignore_in_one_line(variant_sweep, option, message):
    """--per-seed printed its list and dropped these without a word."""
    result = CliRunner().invoke(cli.app, ["table", str(variant_sweep), "--per-seed", *option])
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert result.output.startswith(message)


@pytest.mark.parametrize(("metric", "label"), [("ter", "TER"), ("chrf", "chrF"), ("bleu", "BLEU")])
def test_per_seed_refusals_name_the_metric_in_use(variant_sweep, metric, label):
    """Under --metric ter, --per-seed lists each trial's TER, but its refusals said "each trial's test BLEU"."""
    for option in ("--columns", "--by-length"):
        given = [option, "h"] if option == "--columns" else [option]
        result = CliRunner().invoke(cli.app, ["table", str(variant_sweep), "--per-seed", "--metric", metric, *given])
        assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
        assert result.output.startswith(f"error: --per-seed lists each trial's test {label}: drop {option}")


def test_score_refuses_a_bleu_signature_whose_tokenizer_sacrebleu_lacks(sweep_copy):
    """A run whose signature says tok:ja-mecab, without sacreBLEU's Japanese tokenizer: ``ablate score --metric bleu``
    wrote 13a BLEU beside that signature (and the table resampled 13a statistics under it)."""
    run = sweep_copy / "base-s1"
    summary = json.loads((run / "summary.json").read_text())
    summary = {k: v for k, v in summary.items() if not k.endswith("/bleu")}
    summary["bleu_signature"] = summary["bleu_signature"].replace("tok:13a", "tok:no-such-tok")
    (run / "summary.json").write_text(json.dumps(summary))
    result = CliRunner().invoke(cli.app, ["score", str(run), "--metric", "bleu"])
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert "BLEU's tokenizer 'no-such-tok' (tok:no-such-tok)" in result.output
    assert not any(k.endswith("/bleu") for k in json.loads((run / "summary.json").read_text()))
