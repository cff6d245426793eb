"""Layout and formats: the same numbers in rich, md, latex and csv; failed trials listed."""

from __future__ import annotations

import csv
import io
import re
import shutil
import subprocess

import pytest

from ablate.record import RecordError
from ablate.report import layout
from ablate.report.layout import Column, build_table, key_labels, register_column
from ablate.report.render import FORMATS, latex_escape, latex_float, render
from ablate.report.stats import aggregate, compare
from ablate.report.trials import collect

from tests.helpers.records import SPLITS


@pytest.fixture(scope="module")
def table(variant_sweep):
    sweep = aggregate(collect(str(variant_sweep)))
    return build_table(sweep, compare(sweep, n_samples=200))


def _csv_rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def _expected_cells(row: dict[str, str], table) -> list[str]:
    """The text cells a reader should see, computed from the CSV's unrounded numbers."""
    cells = []
    for col in table.columns:
        key = col.key + ("_millions" if col.scale != 1.0 else "")
        mean, std = row[f"{key}.mean"], row[f"{key}.std"]
        text = f"{float(mean):.{col.decimals}f}"
        if std and col.show_std:
            text += f" ± {float(std):.{col.decimals}f}"
        cells.append(text)
    return cells


def test_md_latex_rich_show_the_csv_numbers(table):
    texts = {fmt: render(table, fmt) for fmt in FORMATS}
    rows = [r for r in _csv_rows(texts["csv"]) if r["status"] == "finished"]
    assert [r["name"] for r in rows] == [r.name for r in table.rows]
    md_lines = {line.split("|")[2].strip(): line for line in texts["md"].splitlines() if line.startswith("| ")}
    tex_lines = {line.split("&")[1].strip(): line for line in texts["latex"].splitlines() if " & " in line}
    rich_lines = texts["rich"].splitlines()
    for row in rows:
        name = row["name"]
        md_cells = [c.strip().replace("**", "").rstrip("†‡") for c in md_lines[name][2:-2].split(" | ")]
        tex_cells = [
            re.sub(r"\\textbf\{(.*)\}", r"\1", c.strip().replace(r" \\", ""))
            .replace(r"$\pm$", "±")
            .replace(r"$^\dagger$", "")
            .replace(r"$^\ddagger$", "")
            for c in tex_lines[name.replace("_", r"\_")].split(" & ")
        ]
        expected = _expected_cells(row, table)
        n_lead = 2 + len(table.keys)
        assert md_cells[n_lead : n_lead + len(expected)] == expected, name
        assert tex_cells[n_lead : n_lead + len(expected)] == expected, name
        rich_line = next(line for line in rich_lines if f" {name} " in line)
        assert all(cell in rich_line for cell in expected), name


def test_exact_aggregates_in_csv(table):
    base = _csv_rows(render(table, "csv"))[0]
    assert base["name"] == "base" and base[f"test_{SPLITS[0]}/bleu.mean"] == "27.5"
    assert base[f"test_{SPLITS[0]}/bleu.std"] == "0.5" and base[f"test_{SPLITS[0]}/bleu.n"] == "3"
    assert base["params_millions.mean"] == "9.5"


def test_best_values_are_bold_and_significance_marked(table):
    md = render(table, "md")
    e_learned = next(line for line in md.splitlines() if "| E-learned |" in line)
    assert "**29.00 ± 0.71**†" in e_learned  # best test BLEU, significantly better
    heads8 = next(line for line in md.splitlines() if "| A-heads8 |" in line)
    assert "†" not in heads8 and "**" not in heads8  # identical to base: no mark
    assert "**8.70**" in md  # fewest parameters (B-dk16)
    tex = render(table, "latex")
    assert r"\textbf{29.00 $\pm$ 0.71}$^\dagger$" in tex
    for text in (md, tex):
        assert "Holm-Bonferroni over all 8 comparisons" in text and "against the base row" in text
        assert "seed-aware t-test" in text and "Minimum detectable effect at 80" in text
    assert "Seed σ (" in md and r"Seed $\sigma$ (" in tex


def test_values_that_print_equal_share_the_bold(tmp_path):
    """Two rows whose parameters print as 1.00 (1.000 M and 1.004 M): both are the best a reader can see, so both
    are bold, as a paper's table marks ties at its printed precision; the next row (2.00) is not."""
    import json

    from tests.helpers.records import make_grid_sweep

    folder = make_grid_sweep(tmp_path / "grid")
    for seed in (1, 2):
        path = folder / f"trial-1-s{seed}" / "summary.json"
        summary = json.loads(path.read_text())
        path.write_text(json.dumps({**summary, "params": 1_004_000}))
    table = build_table(aggregate(collect(str(folder))))
    (i,) = [i for i, c in enumerate(table.columns) if c.key == "params"]
    assert [(r.cells[i].stat.mean, r.cells[i].best) for r in table.rows][:3] == [
        (pytest.approx(1.0), True), (pytest.approx(1.004), True), (pytest.approx(3.0), False),
    ]  # fmt: skip
    assert render(table, "md").count("**1.00**") == 2


def test_a_column_whose_rows_all_print_the_same_marks_no_best(tmp_path):
    """Every row's parameters print as 1.00 (1.000 M and 1.004 M): no row is better to the reader's eye, so none
    is bold (results/defaults-cpu's Params 2.41 in all four rows)."""
    import json

    from tests.helpers.records import make_grid_sweep

    folder = make_grid_sweep(tmp_path / "grid")
    for path in folder.glob("*/summary.json"):
        summary = json.loads(path.read_text())
        path.write_text(json.dumps({**summary, "params": 1_004_000 if "trial-1" in path.parent.name else 1_000_000}))
    table = build_table(aggregate(collect(str(folder))))
    (i,) = [i for i, c in enumerate(table.columns) if c.key == "params"]
    assert {round(r.cells[i].stat.mean, 2) for r in table.rows} == {1.0}
    assert not any(r.cells[i].best for r in table.rows)


def test_base_row_shows_everything_others_only_changes(table):
    md = render(table, "md").splitlines()
    header = next(line for line in md if line.startswith("|  | variant"))
    assert header.split(" | ")[2:12] == [
        "N",
        "d_model",
        "d_ff",
        "h",
        "d_k",
        "d_v",
        "P_drop",
        "eps_ls",
        "positions",
        "train steps",
    ]
    assert next(line for line in md if "| base | base |" in line).split(" | ")[2:12] == [
        "3",
        "128",
        "512",
        "4",
        "32",
        "32",
        "0.1",
        "0.1",
        "sinusoidal",
        "500 ± 0",
    ]
    assert next(line for line in md if "| A-heads1 |" in line).split(" | ")[2:11] == [
        "",
        "",
        "",
        "1",
        "128",
        "128",
        "",
        "",
        "",
    ]
    assert next(line for line in md if "| B-dk16 |" in line).split(" | ")[2:11] == [
        "",
        "",
        "",
        "",
        "16",
        "16",
        "",
        "",
        "",
    ]
    tex = render(table, "latex")
    assert tex.count(r"\midrule") == 4 and r"\toprule" in tex and r"\bottomrule" in tex  # header + 3 groups


@pytest.mark.parametrize("fmt", FORMATS)
def test_failed_trials_are_listed_with_reasons(table, fmt):
    text = render(table, fmt)
    assert "B-dk16-s3" in text and "CUDA out of memory" in text
    assert "E-learned-s3" in text and "running" in text


def test_csv_lists_unfinished_trials_as_rows(table):
    rows = _csv_rows(render(table, "csv"))
    failed = [r for r in rows if r["status"] != "finished"]
    assert [(r["name"], r["status"], r["reason"]) for r in failed] == [
        ("B-dk16-s3", "failed", "RuntimeError: CUDA out of memory"),
        ("E-learned-s3", "running", "still running"),
    ]


def test_grid_sweep_groups_by_changed_key(grid_sweep):
    sweep = aggregate(collect(str(grid_sweep)))
    md = render(build_table(sweep, compare(sweep)), "md")
    assert "variant" not in md.splitlines()[2]
    assert "| h |" in md and "No saved hypotheses" in md
    firsts = [line.split(" | ")[0].strip("| ") for line in md.splitlines()[4:8]]
    assert firsts == ["base", "h", "", "positions"]


def test_key_labels_use_paper_symbols_and_unique_suffixes():
    assert key_labels(["model.heads", "model.rnn.layers", "model.layers", "model.attention.bandwidth"]) == [
        "h",
        "rnn.layers",
        "N",
        "bandwidth",
    ]


def _budget_table(config: dict, steps: tuple[int, int]):
    from ablate.report.trials import Trial

    trials = [
        Trial(
            f"{h}-{s}",
            "finished",
            config={**config, "model.heads": h, "seed": s},
            metrics={"test/bleu": 20.0 + s, "step": float(n), "train/tokens": 1e5 * n},
        )
        for h, n in zip((4, 8), steps)
        for s in (1, 2)
    ]
    return build_table(aggregate(trials))


def test_table_shows_steps_trained_and_says_which_budget():
    by_steps = _budget_table({"train.max_steps": 600, "train.max_epochs": None}, (600, 600))
    note = next(n for n in by_steps.footnotes if n.startswith("Budget:"))
    assert note == "Budget: 600 steps (train.max_steps); train steps and tokens show what each row trained."
    by_time = _budget_table({"train.max_steps": -1, "train.max_epochs": None, "train.max_time": 60.0}, (410, 130))
    note = next(n for n in by_time.footnotes if n.startswith("Budget:"))
    assert "60 s of training time (train.max_time)" in note and "a time budget" in note
    md = render(by_time, "md")
    assert "| train steps | train tokens (M) |" in md
    assert "| 410 ± 0 | 41.00 ± 0.00 |" in md and "| 130 ± 0 | 13.00 ± 0.00 |" in md  # what each row trained
    mixed = _budget_table({"train.max_steps": 600, "train.max_epochs": 10}, (600, 540))
    assert "whichever ended first" in next(n for n in mixed.footnotes if n.startswith("Budget:"))


def _one_row_table(metrics: list[dict], **trial: object):
    """A table over one configuration whose seeds report ``metrics``."""
    from ablate.report.trials import Trial

    trials = [
        Trial(f"s{i}", "finished", config={"model.heads": 4, "seed": i}, metrics={"test/bleu": 20.0 + i, **m}, **trial)
        for i, m in enumerate(metrics)
    ]
    return build_table(aggregate(trials))


def test_the_step_of_the_tested_checkpoint_is_a_column_beside_train_steps():
    table = _one_row_table([{"step": 600.0, "val/step": 400.0}, {"step": 600.0, "val/step": 600.0}])
    keys = [c.key for c in table.columns]
    assert keys.index("val/step") == keys.index("step") + 1
    tested = table.columns[keys.index("val/step")]
    assert tested.label == "tested step" and not tested.ranked
    assert "| train steps | tested step |" in render(table, "md") and "| 600 ± 0 | 500 ± 141 |" in render(table, "md")
    assert r"600 $\pm$ 0 & 500 $\pm$ 141" in render(table, "latex")
    assert _csv_rows(render(table, "csv"))[0]["val/step.mean"] == "500"
    assert "500 ± 141" in render(table, "rich")
    cells = next(n for n in table.footnotes if n.startswith("Cells:"))
    assert "the checkpoint that was tested" in cells and "tested step" in cells

    old = _one_row_table([{"step": 600.0}, {"step": 600.0}])  # summaries from before val/step was recorded
    assert "val/step" not in [c.key for c in old.columns] and "tested step" not in render(old, "md")
    assert "the checkpoint that was tested" in next(n for n in old.footnotes if n.startswith("Cells:"))


def _speed(table) -> tuple[list[str], list[str]]:
    """The table's speed column labels and the footnotes about a speed measure."""
    labels = [c.label for c in table.columns if c.label.startswith("Tokens/")]
    return labels, [n for n in table.footnotes if n.startswith("Tokens/")]


SPEEDS = [
    {"threads": 2.0, "train/tokens_per_sec": 900.0, "train/tokens_per_cpu_sec": 500.0},
    {"threads": 2.0, "train/tokens_per_sec": 1500.0, "train/tokens_per_cpu_sec": 520.0},
]


def test_cpu_runs_show_tokens_per_cpu_second_and_the_footnote_says_so():
    table = _one_row_table(SPEEDS, accelerator="cpu")
    labels, notes = _speed(table)
    assert labels == ["Tokens/CPU-s (train)"] and len(notes) == 1
    assert "per second of process CPU time" in notes[0] and "every run used 2 torch threads" in notes[0]
    for fmt in ("md", "latex", "rich"):
        text = render(table, fmt)
        assert "510" in text and "1200" not in text and "Tokens/CPU-s (train): " in text, fmt
    assert _csv_rows(render(table, "csv"))[0]["train/tokens_per_cpu_sec.mean"] == "510"


@pytest.mark.parametrize(
    "accelerator, with_cpu_key, why",
    [
        ("gpu", True, None),  # a GPU keeps wall-clock tokens/s, CPU time or not
        ("cpu", False, "not all recorded their CPU time"),  # CPU runs from before CPU time was recorded
        (None, False, "did not record whether they trained on a CPU"),  # older "auto" runs
        (None, True, "did not record whether they trained on a CPU"),
    ],
)
def test_gpu_and_older_runs_show_wall_clock_tokens_per_second_and_the_footnote_says_so(accelerator, with_cpu_key, why):
    metrics = [m if with_cpu_key else {k: v for k, v in m.items() if k != "train/tokens_per_cpu_sec"} for m in SPEEDS]
    table = _one_row_table(metrics, accelerator=accelerator)
    labels, notes = _speed(table)
    assert labels == ["Tokens/s (train)"] and len(notes) == 1 and "wall-clock" in notes[0]
    assert "1200 ± 424" in render(table, "md")
    if why is None:
        assert "synchronised on the GPU" in notes[0] and "load" not in notes[0]
    else:
        assert "depends on the machine's load" in notes[0] and why in notes[0]


@pytest.mark.parametrize(
    "precisions, said",
    [
        (["bf16-mixed", "bf16-mixed"], "synchronised on the GPU), in bf16-mixed."),
        (["bf16-mixed", "32-true"], "the runs trained in 32-true, bf16-mixed, so compare rows of equal precision"),
        (
            ["bf16-mixed", None],
            "synchronised on the GPU), in bf16-mixed.",
        ),  # one run from before precision was recorded
        ([None, None], "synchronised on the GPU)."),
    ],
)
def test_the_gpu_speed_note_names_the_precision_and_warns_when_runs_differ(precisions, said):
    from ablate.report.trials import Trial

    trials = [
        Trial(f"s{i}", "finished", config={"seed": i}, metrics={"test/bleu": 20.0, **m}, accelerator="gpu", precision=p)
        for i, (m, p) in enumerate(zip(SPEEDS, precisions))
    ]
    _, notes = _speed(build_table(aggregate(trials)))
    assert said in notes[0]


def test_one_cpu_run_without_cpu_time_keeps_the_whole_column_wall_clock():
    """A column measures one thing: tokens per CPU-second only where every run recorded it."""
    from ablate.report.trials import Trial

    trials = [
        Trial(f"s{i}", "finished", config={"seed": i}, metrics={"test/bleu": 20.0, **m}, accelerator="cpu")
        for i, m in enumerate([SPEEDS[0], {"train/tokens_per_sec": 800.0}])
    ]
    labels, notes = _speed(build_table(aggregate(trials)))
    assert labels == ["Tokens/s (train)"] and "not all recorded their CPU time" in notes[0]
    assert _speed(_one_row_table([{"test/bleu": 1.0}]))[1] == []  # no speed column, no speed footnote


def test_a_new_column_is_one_metrics_entry(variant_sweep, monkeypatch):
    """Registering a metric (here dev chrF, which every run records) adds its column to every format."""
    monkeypatch.setattr(layout, "COLUMNS", dict(layout.COLUMNS))
    sweep = aggregate(collect(str(variant_sweep)))
    before = build_table(sweep)
    assert "val/chrf" not in [c.key for c in before.columns]
    # the entry of docs/architecture.md's example, edited in place (a new entry goes last in its place)
    layout.COLUMNS["dev_chrf"] = Column("val/chrf", "chrF (dev)", 1, latex=r"chrF$_{\mathrm{dev}}$")
    table = build_table(sweep)
    keys = [c.key for c in table.columns]
    assert keys.index("val/chrf") == keys.index("val/bleu") + 1  # the score columns, in registry order
    col = table.columns[keys.index("val/chrf")]
    assert (col.label, col.decimals) == ("chrF (dev)", 1)
    base = next(r for r in sweep.rows if r.is_base)
    assert f"{base.stats['val/chrf'].mean:.1f}" in render(table, "md")
    assert r"chrF$_{\mathrm{dev}}$" in render(table, "latex") and "val/chrf.mean" in render(table, "csv")


def test_metric_columns_are_the_registry_filtered_by_place():
    budget = [m.key for m in layout.registered_columns("budget")]
    scores = [m.key for m in layout.registered_columns("score")]
    costs = [m.key for m in layout.registered_columns("cost")]
    assert budget == ["step", "val/step", "train/tokens"]
    assert scores == ["val/ppl", "val/bleu", "test/bleu"]  # chrF is recorded but not a column
    assert costs == ["params", "train/tokens_per_sec", "train/tokens_per_cpu_sec"]
    assert [m.key for m in layout.registered_columns()] == budget + scores + costs


def test_a_registered_metric_is_a_column_and_a_clash_is_refused(monkeypatch):
    monkeypatch.setattr(layout, "COLUMNS", dict(layout.COLUMNS))
    chrf = register_column(Column("test/chrf++", "chrF++ (test)", 1, per_split=True), "test_chrfpp")
    assert layout.registered_columns("score")[-1] is chrf and layout.COLUMNS["test_chrfpp"] is chrf
    with pytest.raises(RecordError, match="metric name 'test_chrfpp' is taken"):
        register_column(Column("test/other", "x"), "test_chrfpp")
    with pytest.raises(RecordError, match="metric key 'val/bleu' is registered already"):
        register_column(Column("val/bleu", "BLEU again"), "bleu_again")
    with pytest.raises(RecordError, match="metric place 'middle'"):
        register_column(Column("val/x", "x", place="middle"))


def test_per_seed_explains_the_sign_mark_only_where_a_row_has_it(grid_sweep, variant_sweep):
    # every row's per-seed Δs agree in sign: no ‡ in the lines, but the legend "‡ the row's per-seed Δs disagree in
    # sign." was printed under them all the same
    from ablate.report.render import render_per_seed
    from ablate.report.stats import load

    assert "‡" not in render_per_seed(load(str(grid_sweep)), "md")
    flipped = render_per_seed(load(str(variant_sweep)), "md")  # A-heads8: +0.20, -0.20, -0.30
    assert "‡ |" in flipped and flipped.endswith("‡ the row's per-seed Δs disagree in sign.\n")


def _pdflatex(body: str, tmp_path) -> subprocess.CompletedProcess:
    """``body`` compiled by pdflatex in a plain article with booktabs (nothing else a paper needs)."""
    doc = "\\documentclass{article}\n\\usepackage{booktabs}\n\\begin{document}\n" + body + "\\end{document}\n"
    (tmp_path / "t.tex").write_text(doc, encoding="utf-8")
    cmd = ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "t.tex"]
    return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120)


def test_latex_escapes_symbols_pdflatex_has_no_text_glyph_for():
    """σ, Δ, ≥ etc. are math symbols with no glyph in pdflatex's text fonts ("Unicode character σ (U+03C3)
    not set up for use with LaTeX"): they go out as math, like ± and †; `code` as typewriter text."""
    assert latex_escape("σ 0.55; Δ ≥ 1; α/10; 2 × 3 → 4; –") == (
        r"$\sigma$ 0.55; $\Delta$ $\geq$ 1; $\alpha$/10; 2 $\times$ 3 $\to$ 4; --"
    )
    assert latex_escape("in `--format csv` or `ablate plot`") == r"in \texttt{-{}-format csv} or \texttt{ablate plot}"
    assert latex_escape("Müller's") == "Müller's"  # Latin letters: pdflatex reads UTF-8 text
    assert latex_escape("nrefs:1|case:mixed; de->en") == r"nrefs:1\textbar{}case:mixed; de-\textgreater{}en"


def test_every_latex_table_is_ascii_apart_from_latin_letters(table, variant_sweep):
    """The seed-test footnotes (σ, Δ, 95% CIs in `--format csv`) come out as LaTeX, not raw Unicode."""
    tex = render(table, "latex")
    assert "Seed $\\sigma$" in tex and "\\texttt{-{}-per-seed}" in tex
    assert not re.findall(r"[^\x00-\x7f]", tex)


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="no pdflatex")
def test_the_latex_table_and_its_side_by_side_compile_with_pdflatex(variant_sweep, tmp_path):
    from ablate.report import table as report_table
    from ablate.report.papers import get, render as render_reference, side_by_side

    result = report_table(str(variant_sweep), samples=200)
    beside = render_reference(side_by_side(result.sweep, result.table, get("vaswani2017-table3")), "latex")
    proc = _pdflatex(result.render("latex") + beside, tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:]


@pytest.mark.slow
def test_csv_carries_the_named_comparisons_that_leave_out_the_base():
    """mission-cpu names scale-additive-scaled vs score-additive and rnn-bahdanau vs rnn-no-attention: the
    Markdown lists them, the CSV had no line for them. Now a ``vs`` column names each line's reference (the
    base on the table's rows) and one line per such pair carries its test; the table's rows are unchanged."""
    from pathlib import Path

    from ablate.report import table as report_table

    result = report_table(str(Path(__file__).resolve().parents[2] / "results" / "mission-cpu"))
    rows = _csv_rows(render(result.table, "csv"))
    key = "test_test_2016_flickr/bleu"
    pairs = {(r["name"], r["vs"]): r for r in rows if r["vs"] and r["vs"] != "base"}
    assert set(pairs) == {("scale-additive-scaled", "score-additive"), ("rnn-bahdanau", "rnn-no-attention")}
    named = {(c.row, c.reference): c for c in _named(result)}
    for pair, line in pairs.items():
        c = named[pair]
        assert float(line[f"{key}.delta"]) == pytest.approx(c.delta) and line[f"{key}.marks"] == "†"
        assert float(line[f"{key}.p_holm"]) == pytest.approx(c.p_adjusted)
        assert line[f"{key}.mean"] == "" and line["status"] == ""  # the row's own numbers are on its table line
    table_lines = [r for r in rows if r["status"]]
    assert len(table_lines) == len(result.table.rows) and table_lines[0]["vs"] == ""  # the base
    heads1 = next(r for r in table_lines if r["name"] == "heads-1")
    assert heads1["vs"] == "base" and heads1[f"{key}.delta"]


def test_a_csv_without_pairs_apart_from_the_base_keeps_its_columns(table):
    assert render(table, "csv").splitlines()[0].endswith(",status,reason")


def _named(result):
    """Every comparison of a table's result, against the base or not."""
    from ablate.report.stats import compare

    return compare(result.sweep, n_samples=2000)


def test_per_seed_in_latex_is_a_latex_table(variant_sweep, tmp_path):
    """`ablate table --per-seed --format latex` printed the Markdown lines (| row | seed |)."""
    from ablate.report.render import render_per_seed
    from ablate.report.stats import load

    tex = render_per_seed(load(str(variant_sweep)), "latex")
    assert tex.startswith(r"\begin{table}") and r"\begin{tabular}{lr" in tex and "| " not in tex
    assert r"A-heads8 & 2 & " in tex and r"$^\ddagger$" in tex and not re.findall(r"[^\x00-\x7f]", tex)
    if shutil.which("pdflatex"):
        proc = _pdflatex(tex, tmp_path)
        assert proc.returncode == 0, proc.stdout[-2000:]


def test_the_seed_footnote_sends_for_cis_only_where_they_are(table):
    """`--per-seed` lists each trial's Δ against the base trial of its seed, with no CI; the footnote said
    "95% CIs of every Δ in `--format csv`, `--per-seed` and `ablate plot`"."""
    sigma = next(line for line in render(table, "md").splitlines() if line.startswith("Seed σ"))
    assert (
        "95% CIs of every Δ in `--format csv` and `ablate plot` (delta_ci.png); each trial's Δ in `--per-seed`" in sigma
    )


@pytest.mark.slow
def test_a_named_comparisons_p_below_the_shown_digits_is_not_written_as_zero():
    """mission-cpu's rnn-no-attention vs base: Holm p 2.3e-13 was printed "p = 0.0000, Holm p = 0.0000"."""
    from pathlib import Path

    from ablate.report import table as report_table

    result = report_table(str(Path(__file__).resolve().parents[2] / "results" / "mission-cpu"))
    lines = {line.split(" (")[0]: line for line in result.table.comparisons}
    assert "p = 0.0000" not in "".join(result.table.comparisons)
    assert lines["rnn-no-attention vs base"].endswith("p < 0.0001, Holm p < 0.0001 †")
    assert lines["heads-8 vs base"].endswith("p = 0.1170, Holm p = 0.2340")


def test_per_seed_in_the_terminal_format_is_a_rich_table_not_markdown(variant_sweep):
    """`ablate table --per-seed` (default format rich) printed Markdown (`**title**`, `| row | seed |`)."""
    from typer.testing import CliRunner

    from ablate.report.commands import app

    result = CliRunner().invoke(app, ["table", str(variant_sweep), "--per-seed"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "**" not in out and not any(line.startswith("| ") for line in out.splitlines())
    assert "Per seed:" in out and "seed" in out and "A-heads1" in out


def test_greek_in_user_labels_compiles_and_other_scripts_are_named(tmp_path):
    """A variant named β-heads1 or Ω-dk16 stopped pdflatex ("Unicode character Ω (U+03A9) not set up for use
    with LaTeX") while α and σ compiled: every Greek letter is math now. A script pdflatex cannot set without a
    package (学习) stays as written, and a comment above the float says so and what to compile with."""
    assert latex_escape("β-heads1 Ω λ ς ο Α") == r"$\beta$-heads1 $\Omega$ $\lambda$ $\varsigma$ o A"
    body = [latex_escape(name) + r" & 1 \\" for name in ("β-heads1", "Ω-dk16")]
    tex = latex_float("ll", ["variant", "x"], body, [latex_escape("Δ ε")], "γ")
    assert not re.findall(r"[^\x00-\x7f]", tex) and not tex.startswith("%")
    cjk = latex_float("ll", ["variant", "x"], [latex_escape("学习-learned") + r" & 1 \\"], [], "t")
    assert cjk.splitlines()[0].startswith("% pdflatex has no glyphs for 学, 习") and "xelatex" in cjk.splitlines()[0]
    if shutil.which("pdflatex"):
        proc = _pdflatex(tex, tmp_path)
        assert proc.returncode == 0, proc.stdout[-2000:]


def test_a_delta_that_rounds_to_zero_prints_without_a_minus():
    """A Δ of -0.004 printed "-0.00" (Python's "+.2f"): in --per-seed's Δ column, the named comparisons and the
    paper side-by-side. It prints "+0.00", as Python's "z" option (PEP 682) writes it; other Δs keep their sign."""
    from ablate.report.layout import signed
    from ablate.report.render import render_per_seed
    from ablate.report.stats import Row, Sweep
    from ablate.report.trials import Trial

    assert [signed(x) for x in (-0.004, 0.004, -0.0, -0.005001, 1.5, -2.25)] == [
        "+0.00", "+0.00", "+0.00", "-0.01", "+1.50", "-2.25",
    ]  # fmt: skip
    assert signed(-0.04, 1) == "+0.0" and signed(-0.06, 1) == "-0.1"

    def row(name, bleu):
        trial = Trial(f"{name}-s1", "finished", config={"seed": 1}, metrics={"test/bleu": bleu})
        return Row(name, name, {}, (), (trial,), {}, name == "base")

    for fmt in ("md", "latex", "rich"):
        text = render_per_seed(Sweep("t", [], [row("base", 20.0), row("A-x", 19.996)], [], True), fmt)
        assert "+0.00" in text and "-0.00" not in text, fmt


def test_per_seed_on_an_error_rate_says_lower_is_better():
    """`ablate table --metric ter --per-seed` printed "+3.19" Δs with no word that TER is an error rate (the
    table's footnote and the figures say "lower is better"; a reader of the per-seed list took + for a gain)."""
    from ablate.report.render import render_per_seed
    from ablate.report.stats import Row, Sweep
    from ablate.report.trials import Trial

    def row(name, ter):
        trial = Trial(f"{name}-s1", "finished", config={"seed": 1}, metrics={"test/ter": ter})
        return Row(name, name, {}, (), (trial,), {}, name == "base")

    sweep = Sweep("t", [], [row("base", 60.0), row("A-x", 63.0)], [], True)
    for fmt in ("md", "latex", "rich"):
        assert "lower is better" in render_per_seed(sweep, fmt, metric="ter"), fmt
        assert "lower is better" not in render_per_seed(sweep, fmt, metric="bleu").replace("ter", ""), fmt
