"""The documentation: a generated configuration reference that matches the code, a README that stays a front page."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def _generator():
    spec = importlib.util.spec_from_file_location("gen_config_docs", ROOT / "scripts" / "gen_config_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_configuration_reference_matches_the_code():
    gen = _generator()
    assert gen.PAGE.read_text() == gen.render(), "run python scripts/gen_config_docs.py"
    assert gen.main(["--check"]) == 0


def test_the_reference_lists_every_key_with_its_whole_docstring():
    from ablate.config import TrainConfig, valid_keys

    page = _generator().render()
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `([\w.]+)` \|.*$", page, re.M)}
    params = [k for k in rows if k.startswith(("model.attention.params.", "model.positions_params."))]
    assert sorted(set(rows) - set(params)) == sorted(valid_keys())
    # the shipped components' parameters, from the registries
    assert sorted(params) == [
        "model.attention.params.bandwidth",
        "model.attention.params.chunk_mb",
        "model.positions_params.base",
    ]
    # the full docstring, not only the first sentence that `ablate train --help` prints
    assert "Default: d_model^-0.5 * warmup^-0.5" in rows["train.lr"]
    assert "`inverse_sqrt`, `linear`, `cosine`" in rows["train.schedule"]  # choices from the registry
    assert TrainConfig.__doc__ in page


def test_every_key_of_the_reference_has_a_description():
    """``model.rnn.layers`` had none: its row's description cell was empty (and ``ablate train --help`` had no
    sentence for it)."""
    page = _generator().render()
    empty = [m.group(1) for m in re.finditer(r"^\| `([\w.]+)` \|.*\|\s*\|$", page, re.M)]
    assert empty == []


def test_a_new_config_field_appears_in_the_reference(monkeypatch):
    """What makes the page unable to drift: it is rendered from the dataclasses, so a field added there is listed."""
    from ablate import config
    from ablate.utils import typed

    @dataclasses.dataclass(frozen=True)
    class Eval(config.EvalConfig):
        sampling_topk: int = 0
        """Sample from the k most likely tokens. A made-up key of this test."""

    typed.field_types.cache_clear()
    monkeypatch.setattr(config, "EvalConfig", Eval)  # what Config's (string) annotation `eval: EvalConfig` resolves to
    try:
        page = _generator().render()
    finally:
        typed.field_types.cache_clear()
    assert (
        "| `eval.sampling_topk` | int | `0` | Sample from the k most likely tokens. A made-up key of this test. |"
        in page
    )
    assert page != _generator().PAGE.read_text()  # so the check above would fail until the page is regenerated


@pytest.mark.parametrize(
    ("text", "cell"),
    [
        ("a | b", "a \\| b"),
        ("x\n   y", "x y"),
        # in code a backslash would show on the site and a bare pipe split the row on GitHub
        ("by ``|Y|^alpha`` or `a<b`", "by <code>&#124;Y&#124;^alpha</code> or `a<b`"),
    ],
)
def test_a_table_cell_is_one_line_with_pipes_escaped(text, cell):
    assert _generator()._cell(text) == cell


# --------------------------------------------------------------------------------------
# The worked examples of docs/extending.md do what the page says
# --------------------------------------------------------------------------------------


PLACEHOLDER = re.compile(r"\.\.\.|<|^[A-Z][A-Z:]*$")
"""A value that stands for the reader's own (``model.d_model=...``, ``train.devices=N``), not an example."""


def _example_overrides() -> list[str]:
    """Every ``key=value`` example of a config key in docs/, README.md and ``ablate train --help``."""
    from ablate.config import describe_keys, is_key

    texts = [p.read_text() for p in [README, *sorted(DOCS.rglob("*.md"))]]
    texts += [doc for *_, doc in describe_keys()]
    found = set()
    for text in texts:
        for key, value in re.findall(r"`([a-z_]+(?:\.[a-z_0-9]+)+)=([^`\s]+)`", text):
            if is_key(key) and not PLACEHOLDER.search(value):
                found.add(f"{key}={value}")
    return sorted(found)


def _selecting(override: str) -> list[str]:
    """The overrides that select the shipped component a ``params`` example belongs to (from the registries)."""
    from ablate.utils.typed import catalogued

    selector = {
        "model.attention.params.": ("score", "model.attention.score"),
        "model.positions_params.": ("positions", "model.positions"),
    }
    for prefix, (kind, key) in selector.items():
        if override.startswith(prefix):
            param = override[len(prefix) :].split("=")[0]
            owners = [name for name, params in catalogued()["params"][kind].items() if param in params]
            assert owners, f"{override}: no shipped {kind} declares {param}"
            return [f"{key}={owners[0]}"]
    return []


def test_the_documented_examples_include_every_component_parameter():
    examples = _example_overrides()
    for key in (
        "model.positions_params.base=500",
        "model.attention.params.bandwidth=true",
        "model.attention.params.chunk_mb=16",
    ):
        assert key in examples


@pytest.mark.parametrize("override", _example_overrides())
def test_every_documented_example_key_loads(override):
    from ablate.config import load_config

    load_config(None, [*_selecting(override), override])


def _python_block(page: Path, containing: str) -> str:
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(), re.S)
    return next(b for b in blocks if containing in b)


def test_the_extending_pages_score_example_is_the_example_plugin_and_trains(monkeypatch):
    import sys

    import torch

    from ablate.config import load_config
    from ablate.model import scores
    from ablate.model.attention import MultiHeadAttention
    from ablate.model.build import build_model
    from ablate.utils import plugins

    example = ROOT / "examples" / "cosine_score" / "cosine.py"
    assert _python_block(DOCS / "extending.md", "class CosineScore").strip() in example.read_text()
    monkeypatch.setattr(plugins, "_LOADED", {})
    try:
        overrides = [f"plugins={example}", "model.attention.score=cosine", "model.d_model=16", "model.heads=2"]
        cfg = load_config(None, [*overrides, "model.layers=1", "model.attention.params.temperature=30"])
        cosine = scores.SCORES["cosine"]
        torch.manual_seed(0)
        score = cosine(8, 2, cfg.model.attention)
        q, k = torch.randn(3, 2, 5, 8), torch.randn(3, 2, 7, 8)
        out = score(q, score.prepare_keys(k))
        expected = 10.0 * torch.nn.functional.cosine_similarity(q[:, :, :, None], k[:, :, None], dim=-1)
        torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)  # (B, H, Tq, Tk): cos(q, k) / tau

        model = build_model(cfg.model, 20, 20)
        attention = next(m for m in model.modules() if isinstance(m, MultiHeadAttention))
        assert isinstance(attention.score, cosine) and attention.scaling == 1.0  # paper_scale False: auto adds none
        assert torch.allclose(attention.score.log_inv_tau.exp(), torch.tensor(30.0))  # the params reached it
        x = torch.randn(2, 6, 16)
        fused, _ = attention(x, attention.project_kv(x))  # the as_dot form, through the fused kernel
        explicit, weights = attention(x, attention.project_kv(x), need_weights=True)
        torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=1e-5)
        assert weights is not None and weights.shape == (2, 2, 6, 6)
    finally:
        scores.SCORES.pop("cosine", None)
        sys.modules.pop("cosine", None)


def test_the_extending_pages_column_example_renders_in_every_format(monkeypatch, tmp_path):
    import json

    from ablate.report import table as report_table
    from ablate.report.render import FORMATS, render

    from tests.helpers.records import make_variant_sweep

    root = make_variant_sweep(tmp_path / "sweep")
    for path in root.glob("*/summary.json"):  # what summarise() records for every finished run
        summary = json.loads(path.read_text())
        if summary["status"] == "finished":
            summary["peak_memory_mb"] = 900.0 if summary["variant"] == "A-heads1" else 1000.0
            path.write_text(json.dumps(summary))

    from ablate.report import layout

    monkeypatch.setattr(layout, "COLUMNS", dict(layout.COLUMNS))  # the entry the page adds to ablate/report/layout.py
    exec(_python_block(DOCS / "extending.md", "peak_memory_mb"), dict(vars(layout)))
    assert layout.COLUMNS["peak_memory"].key == "peak_memory_mb"
    table = report_table(str(root), significance=False).table
    index = [c.key for c in table.columns].index("peak_memory_mb")
    best = {row.name for row in table.rows if row.cells[index].best}
    assert best == {"A-heads1"}  # lowest is best
    for fmt in FORMATS:
        text = render(table, fmt, width=1000)  # wide enough that rich does not wrap the header
        assert ("peak_memory_mb" if fmt == "csv" else "Peak memory (MB)") in text, fmt


def test_every_field_a_summary_records_is_in_the_architecture_pages_table():
    """runs.md sends the reader to architecture.md for "every field" of ``summary.json``; ``environment`` and the
    top-level ``train/grad_norm`` (both recorded since mission-budget-cpu) were in no row of it."""
    import json

    text = (DOCS / "architecture.md").read_text()
    section = text[text.index("### `summary.json`") : text.index("### Metrics and table columns")]
    named = set(re.findall(r"`([^`]+)`", section))
    keys = {key for path in ROOT.glob("results/*/*/summary.json") for key in json.loads(path.read_text())}
    per_split = {key for key in keys if re.fullmatch(r"test_[^/]+/(.+)", key)}  # the row's test_<split>/<metric>
    assert "environment" in keys and per_split
    assert sorted(keys - per_split - named) == []


@pytest.mark.parametrize(
    ("page", "start", "end"),
    [
        ("runs.md", "## What a run writes", "\nRunning the same"),
        ("architecture.md", "### A run folder", "### `summary"),
    ],
)
def test_every_entry_a_run_writes_is_in_the_pages_run_folder_table(page, start, end):
    """Both tables of a run folder's files left out ``environment.txt`` (every run writes it since the
    environment lock), and runs.md a sweep trial's ``trial.log``."""
    from ablate.training.run_folder import RUN_ENTRIES

    text = (DOCS / page).read_text()
    rows = [line.split("|")[1] for line in text[text.index(start) : text.index(end)].splitlines() if line[:3] == "| `"]
    named = {re.split(r"[/<]", cell)[0] for cell in re.findall(r"`([^`]+)`", " ".join(rows))}
    assert sorted(RUN_ENTRIES - named) == []


def test_every_helper_module_is_in_the_contributing_pages_table():
    """``tests/helpers/`` is what tests share, and the page's table is where a test author looks for it:
    ``marks`` (a table's marks beside the figures') and ``plugin`` (a score plugin outside the repository) were
    in no row, so a new test would write its own."""
    text = (DOCS / "contributing.md").read_text()
    rows = [line.split("|")[1] for line in text.splitlines() if line.startswith("| `")]
    named = set(re.findall(r"`(\w+)`", " ".join(rows)))
    modules = {p.stem for p in (ROOT / "tests" / "helpers").glob("*.py")} - {"__init__"}
    assert "tiny" in modules and sorted(modules - named) == []


def test_the_architecture_page_names_every_path_of_a_run_folder():
    """``RunFiles``' row listed every path but ``.environment`` and ``.texts(kind)``."""
    from ablate.record import RunFiles

    row = next(line for line in (DOCS / "architecture.md").read_text().splitlines() if line.startswith("| `RunFiles("))
    public = {name for name, value in vars(RunFiles).items() if isinstance(value, property) or callable(value)}
    assert sorted({name for name in public if not name.startswith("_")} - set(re.findall(r"`\.(\w+)", row))) == []


def test_the_faqs_seeds_answer_quotes_the_measured_power():
    """The FAQ said a true +1 BLEU is found '13% of the time with 2 seeds per row': the footnotes' prediction
    (13.9%), where the measured power of results/calibration-cpu (what every other page quotes) is 11.1%."""
    measured = {}
    for line in (ROOT / "results" / "calibration-cpu" / "calibration.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 12 and cells[0].isdigit() and cells[1] == "2000":  # the k-vs-k table: k, draws, ...
            measured[int(cells[0])] = round(float(cells[5].rstrip("%")))  # seed-aware: power at +1
    answer = (DOCS / "faq.md").read_text().split("**How many seeds do I need?**")[1].split("**")[0]
    quoted = {int(k): int(p) for p, k in re.findall(r"(\d+)% (?:of the time )?with (\d+)", answer)}
    assert len(quoted) == 4 and quoted == {k: measured[k] for k in quoted}


def test_the_count_of_rows_whose_seeds_disagree_is_the_tables():
    """docs/results.md and results/table3-cpu/README.md said 'the per-seed Δs of 8 rows' disagree in sign (‡);
    the table they describe (its table.md, what ``ablate table results/table3-cpu`` prints) marks 7."""
    shipped = ROOT / "results" / "table3-cpu"
    table = (shipped / "table.md").read_text().split("\n\n")[1]  # the ablation table, before its footnotes
    marked = sum("‡" in line for line in table.splitlines())
    for text in (DOCS / "results.md", shipped / "README.md"):
        (quoted,) = re.findall(r"per-seed Δs of (\d+)\s+rows", text.read_text())
        assert int(quoted) == marked == 7, text


def _shipped_runs(name: str) -> tuple[dict[str, list[dict]], dict[str, list[float]]]:
    """The summaries of results/NAME's trials by variant, and their test BLEU in seed order."""
    import json

    runs: dict[str, list[dict]] = {}
    for path in sorted((ROOT / "results" / name).glob("*/summary.json")):
        summary = json.loads(path.read_text())
        runs.setdefault(summary["variant"], []).append(summary)
    bleu = {v: [s["test/bleu"] for s in sorted(r, key=lambda s: s["config"]["seed"])] for v, r in runs.items()}
    return runs, bleu


def test_the_quickstart_numbers_the_pages_quote_are_the_shipped_runs():
    """README.md, docs/tutorial.md and docs/sweeps.md quoted the quickstart's test BLEU from 2026-11-30 (base
    40.0 ± 1.7 (41.2, 38.8), additive 21.0 ± 2.5, 8.5k vs 17.9k tokens/s) with no run behind them; the same
    command on today's code gives other numbers (base seed 1: 42.63), now shipped as results/quickstart."""
    import statistics

    runs, bleu = _shipped_runs("quickstart")
    assert sorted(bleu) == ["additive-sinusoidal", "dot-learned", "dot-none", "dot-sinusoidal"]
    quoted = {v: f"{statistics.mean(b):.1f} ± {statistics.stdev(b):.1f}" for v, b in bleu.items()}
    seeds = "(" + ", ".join(f"{b:.1f}" for b in bleu["dot-sinusoidal"]) + ")"
    speed = {v: statistics.mean(s["train/tokens_per_cpu_sec"] for s in r) / 1000 for v, r in runs.items()}
    for page in (README, DOCS / "tutorial.md", DOCS / "sweeps.md"):
        text = " ".join(page.read_text().split())
        assert all(q in text for q in quoted.values()), (page, quoted)
        assert page == README or seeds in text, (page, seeds)
        assert page == README or f"{speed['additive-sinusoidal']:.1f}k vs {speed['dot-sinusoidal']:.1f}k" in text


def test_the_recurrent_baseline_numbers_docs_quote_are_the_shipped_runs():
    """docs/sweeps.md quoted rnn-vs-transformer-builtin's test BLEU from an old commit and an older test (GRU +
    Bahdanau 24.9 ± 2.0, Transformer 78.3 ± 0.7) with no run behind them; the command on today's code gives other
    numbers (Bahdanau 27.9 ± 1.1), shipped as results/rnn-vs-transformer-builtin with its table's † marks."""
    import statistics

    shipped = ROOT / "results" / "rnn-vs-transformer-builtin"
    runs, bleu = _shipped_runs(shipped.name)
    assert sorted(bleu) == ["rnn-bahdanau", "rnn-no-attention", "transformer"]
    marked = {
        line.split("|")[2].strip()
        for line in (shipped / "table.md").read_text().splitlines()
        if line.startswith("|") and "†" in line
    }
    text = " ".join((DOCS / "sweeps.md").read_text().replace("**", "").split())
    for variant, b in bleu.items():
        quoted = f"{statistics.mean(b):.1f} ± {statistics.stdev(b):.1f}" + (" †" if variant in marked else "")
        assert f"{quoted} (" + ", ".join(f"{x:.1f}" for x in b) + ")" in text, (variant, quoted)
    assert marked == {"rnn-bahdanau", "transformer"}
    speed = {v: statistics.mean(s["train/tokens_per_cpu_sec"] for s in r) / 1000 for v, r in runs.items()}
    ratio = speed["rnn-bahdanau"] / speed["rnn-no-attention"]
    assert f"{ratio:.2f}x" in text and f"({speed['rnn-bahdanau']:.1f}k vs {speed['rnn-no-attention']:.1f}k)" in text


def test_the_budget_pages_quote_the_dev_deltas_the_records_give():
    """README.md, docs/results.md and results/table3-budget-cpu/README.md said no dropout's dev BLEU lead
    'shrinks at every later validation' (the README: N 2's too); the records have it grow again from step 600
    to 900 (+1.55 -> +2.07), and N 2's from 150 to 300 and from 1,200 to 1,350."""
    import numpy as np

    from ablate.report.stats import delta_curves, load

    shipped = ROOT / "results" / "table3-budget-cpu"
    curves = {c.row: c for c in delta_curves(load(str(shipped))).curves}
    d = curves["D-dropout0.0"]
    at = dict(zip(d.steps.tolist(), d.mean.tolist()))
    steady = {row: bool(np.all(np.diff(curves[row].mean[curves[row].steps >= 300]) < 0)) for row in curves}
    assert not steady["D-dropout0.0"] and not steady["C-layers2"]
    for page in (README, DOCS / "results.md", shipped / "README.md"):
        text = " ".join(page.read_text().split())
        assert f"+{at[300]:.1f} at step 300" in text or f"{at[300]:.1f} higher at step 300" in text, page
        assert f"+{at[1500]:.1f} dev BLEU" in text or page == README, page
        assert not re.search(r"shrinks? at every (later )?validation", text), page


# --------------------------------------------------------------------------------------
# The README is a front page; the site builds
# --------------------------------------------------------------------------------------

TWO_COMMANDS = """\
# 1. install (CPU is enough) and run the main job on the built-in offline task
python3 -m venv .venv && . .venv/bin/activate && pip install -e ".[test]" && ablate train

# 2. run the tests
python -m pytest -q
"""


def test_the_readme_is_a_front_page_of_at_most_10_kb():
    assert len(README.read_bytes()) <= 10 * 1024


def test_the_readme_opens_with_the_two_commands():
    text = README.read_text()
    first_block = re.search(r"```bash\n(.*?)```", text, re.S)
    assert first_block is not None and first_block.group(1) == TWO_COMMANDS
    before = text[: first_block.start()]
    assert before.count("\n## ") == 1 and "## Set up and run (two commands)" in before  # only the pitch before them


def _relative_links(text: str) -> list[str]:
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    return [link.split("#")[0] for link in links if not re.match(r"[a-z]+:", link) and not link.startswith("#")]


def test_the_readmes_links_resolve():
    """Every link points at a file, except the results folder of a shipped sweep that has not run yet."""
    links = _relative_links(README.read_text())
    assert "docs/architecture.md" in links and "LICENSE" in links
    for link in links:
        if (ROOT / link).exists():
            continue
        pending = re.fullmatch(r"results/([\w.-]+)/README\.md", link)
        assert pending and (ROOT / "sweeps" / f"{pending.group(1)}.yaml").exists(), link


def test_every_docs_page_is_in_the_site_nav():
    import yaml

    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    listed = {next(iter(item.values())) for item in nav}
    assert listed == {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}


@pytest.mark.slow  # a few seconds; .ci/run builds the site too
def test_the_site_builds_strict(tmp_path):
    """What CI runs: offline, and a broken link or anchor fails it."""
    pytest.importorskip("mkdocs")
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1", "HOME": str(tmp_path)},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "site" / "architecture" / "index.html").exists()
