"""The notebook API: ``ablate.train / sweep / table / plot``, a cheap ``import ablate``,
and docs/python-api.md run as written."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import ablate
from ablate.config import ConfigError
from ablate.sweep.spec import SweepError

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "python-api.md"


def _fresh(code: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT, check=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_import_ablate_and_naming_the_api_load_no_torch():
    got = _fresh(
        "import json, sys, ablate\n"
        "before = sorted(m for m in ('torch', 'pytorch_lightning', 'pandas', 'matplotlib') if m in sys.modules)\n"
        "names = [ablate.train, ablate.table, ablate.plot, ablate.sweep]\n"
        "after = sorted(m for m in ('torch', 'pytorch_lightning', 'pandas', 'matplotlib') if m in sys.modules)\n"
        "print(json.dumps({'before': before, 'after': after, 'callable': [callable(n) for n in names]}))"
    )
    assert got == {"before": [], "after": [], "callable": [True, True, True, True]}


def test_ablate_sweep_stays_callable_once_its_modules_are_imported():
    import ablate.sweep.launcher  # binds ablate.sweep to the package: it must still run a sweep

    assert callable(ablate.sweep) and ablate.sweep.launcher.Launcher
    assert ablate.sweep is sys.modules["ablate.sweep"]
    with pytest.raises(AttributeError, match="has no attribute 'trian'"):
        ablate.trian  # noqa: B018 - a typo is an AttributeError, not a silent None


def test_train_reads_config_keys_overrides_in_order_and_refuses_unknown_keys(tmp_path, monkeypatch):
    from ablate import api
    from ablate.training import train as training

    seen = {}

    def fake_train(cfg, run_dir, overwrite=False, callbacks=None):
        seen.update(cfg=cfg, run_dir=run_dir)
        return {"status": "finished", "test/bleu": 12.5, "step": 3, "config": {}, "history": []}

    monkeypatch.setattr(training, "train", fake_train)
    config = tmp_path / "base.yaml"
    config.write_text("model: {heads: 2, layers: 3}\nseed: 7\n")
    result = ablate.train(config, ["model.layers=1"], run_dir=tmp_path / "run", model={"heads": 4, "layers": 2}, seed=3)
    cfg = seen["cfg"]
    assert (cfg.model.heads, cfg.model.layers, cfg.seed) == (4, 1, 3)  # defaults < file < keywords < overrides
    assert result.run_dir == tmp_path / "run" and result.metrics["test/bleu"] == 12.5
    assert "test/bleu=12.5" in repr(result)
    with pytest.raises(ConfigError, match="unknown config key 'model.heds'; did you mean 'model.heads'"):
        api.train(model={"heds": 4})


def test_a_sweep_dict_is_written_as_its_sweep_file_and_a_different_one_refused(tmp_path, monkeypatch):
    from ablate.sweep import launcher

    calls = []

    class FakeLauncher:
        def __init__(self, spec, opts, progress, executor=None):
            calls.append((spec, opts))

        def run(self):
            from ablate.sweep.planner import SweepResult

            return SweepResult(state=type("S", (), {"trials": []})(), launched=0, skipped=0, interrupted=False)

    monkeypatch.setattr(launcher, "Launcher", FakeLauncher)
    sweep = {"name": "mini", "method": "grid", "parameters": {"model.heads": {"values": [1, 2]}}}
    result = ablate.sweep(sweep, ["train.max_steps=5", "seed=1,2"], out=tmp_path / "mini", quiet=True)
    spec, opts = calls[0]
    assert spec.path == tmp_path / "mini" / "sweep.yaml" and spec.path.is_file()
    assert opts.overrides == ["train.max_steps=5"] and opts.axes == ["seed=1,2"]
    assert result.out == tmp_path / "mini" and repr(result) == f"SweepRun({str(tmp_path / 'mini')!r}: no trials)"
    with pytest.raises(SweepError, match="holds another sweep"):
        ablate.sweep({**sweep, "method": "random"}, out=tmp_path / "mini")
    with pytest.raises(ConfigError, match="unknown config key 'train.max_stesp'"):
        ablate.sweep(sweep, ["train.max_stesp=5"], out=tmp_path / "other")


def test_a_sweep_of_max_trials_below_one_is_refused_as_the_command_refuses_it(tmp_path, monkeypatch):
    # the command's --max-trials says min=1; ablate.sweep(max_trials=0) planned nothing and returned
    from ablate.sweep import launcher

    monkeypatch.setattr(launcher, "Launcher", lambda *args: pytest.fail("a launcher started"))
    sweep = {"name": "mini", "method": "grid", "parameters": {"model.heads": {"values": [1, 2]}}}
    with pytest.raises(SweepError, match="^--max-trials 0 must be at least 1$"):
        ablate.sweep(sweep, out=tmp_path / "mini", max_trials=0, quiet=True)


def _python_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)


CHECKS = """
import re, matplotlib.figure
assert run.summary["status"] == "finished"
assert sorted(df["name"]) == ["heads-1", "heads-2"]
(test_bleu,) = [c for c in df.columns if re.fullmatch(r"test_.+/bleu\\.mean", c)]
assert df[test_bleu].notna().all() and df[test_bleu.replace(".mean", ".n")].tolist() == [1, 1]
assert isinstance(fig, matplotlib.figure.Figure)
html = table._repr_html_()
assert "heads-1" in html and "<pre" in html
"""
"""What the page's variables hold once it ran (checked inside the kernel)."""


@pytest.mark.slow
def test_the_python_api_page_runs_as_a_notebook_with_its_figure_inline(tmp_path, monkeypatch):
    """docs/python-api.md, one notebook cell per code block, executed headless by a Jupyter kernel: the plot cell has an ``image/png`` output, and no cell shows a widget or an ipywidgets warning."""
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    blocks = _python_blocks(PAGE)
    assert len(blocks) == 3
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(b) for b in [*blocks, CHECKS]])
    NotebookClient(nb, timeout=1200, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()

    plot_cell = nb.cells[2]
    assert any("image/png" in out.get("data", {}) for out in plot_cell.outputs), plot_cell.outputs
    assert (tmp_path / "runs" / "notebook-heads.png").stat().st_size > 1000
    for cell in nb.cells:
        for out in cell.outputs:
            text = out.get("text", "") + json.dumps(out.get("data", {}))
            assert "ipywidgets" not in text and "widget-view" not in text, out
            assert out.get("output_type") != "error", out


def test_version_is_the_installed_distributions():
    from importlib.metadata import version

    import ablate

    assert ablate.__version__ == version("ablate")
    assert "__version__" in dir(ablate)


def test_a_plot_displays_as_a_png_in_an_ipython_shell(tmp_path):
    """What a notebook cell ending in ``ablate.plot(...)`` shows: an ``image/png``, not ``<Figure size ...>``."""
    from IPython.core.interactiveshell import InteractiveShell

    from tests.helpers.records import make_variant_sweep

    shell = InteractiveShell.instance()
    try:
        figure = ablate.plot(make_variant_sweep(tmp_path / "sweep"), significance=False)
        data, _ = shell.display_formatter.format(figure)
    finally:
        InteractiveShell.clear_instance()
    assert data["image/png"][:4] == b"\x89PNG"


RIGHT_FILE = "the right plugin file, stopping here"


def _rival_plugins(tmp_path: Path, monkeypatch, name: str, right: str) -> tuple[Path, Path]:
    """Two folders each holding ``<name>.py``: ``work`` (made the working directory) and ``other``. The one
    ``right`` names raises :data:`RIGHT_FILE` on import; the other writes a marker file, then raises too, so
    importing the wrong one fails fast. Returns ``other`` and the marker's path; no plugin is loaded yet."""
    from ablate.utils import plugins

    monkeypatch.setattr(plugins, "_LOADED", {})
    marker = tmp_path / "wrong-plugin-ran"
    folders = {"work": tmp_path / "work", "other": tmp_path / "other"}
    for key, folder in folders.items():
        folder.mkdir()
        wrong = f"open({str(marker)!r}, 'w').write('ran')\nraise RuntimeError('the wrong plugin file')\n"
        (folder / f"{name}.py").write_text(f"raise RuntimeError({RIGHT_FILE!r})\n" if key == right else wrong)
    monkeypatch.chdir(folders["work"])
    return folders["other"], marker


def test_a_dict_sweeps_relative_plugin_is_the_users_file_not_one_in_out(tmp_path, monkeypatch):
    """A dict has no folder of its own: its relative ``plugins`` paths are the user's (the working directory),
    not files lying in ``out``, where the dict is written, perhaps a folder someone else made."""
    from ablate.sweep import launcher
    from ablate.sweep.planner import Planner, SweepResult
    from ablate.utils.plugins import PluginError

    out, marker = _rival_plugins(tmp_path, monkeypatch, "lab_dict", right="work")

    class CheckingLauncher:  # checks the trials' configs as a run does, trains nothing
        def __init__(self, spec, opts, progress, executor):
            Planner(spec, opts).preview()

        def run(self):
            return SweepResult(state=type("S", (), {"trials": []})(), launched=0, skipped=0, interrupted=False)

    monkeypatch.setattr(launcher, "Launcher", CheckingLauncher)
    sweep = {"name": "mini", "method": "grid", "parameters": {"plugins": {"value": ["lab_dict.py"]}}}
    try:
        with pytest.raises(PluginError, match=RIGHT_FILE):  # the user's file was imported
            ablate.sweep(sweep, out=out, quiet=True)
    finally:
        sys.modules.pop("lab_dict", None)
    assert not marker.exists()


def test_a_config_files_relative_plugin_lies_beside_that_file_as_for_ablate_train_config(tmp_path, monkeypatch):
    """``ablate.train("cfg/run.yaml")`` reads ``plugins: [lab_cfg.py]`` relative to the file's folder, as
    ``ablate train --config`` does (``load_config``), not a same-named file in the working directory."""
    from ablate.utils.plugins import PluginError

    cfg, marker = _rival_plugins(tmp_path, monkeypatch, "lab_cfg", right="other")
    (cfg / "run.yaml").write_text("plugins: [lab_cfg.py]\n")
    try:
        with pytest.raises(PluginError, match=RIGHT_FILE):
            ablate.train(str(cfg / "run.yaml"), run_dir=tmp_path / "run", quiet=True)
    finally:
        sys.modules.pop("lab_cfg", None)
    assert not marker.exists() and not (tmp_path / "run").exists()


def test_translate_of_one_string_is_refused_not_read_as_a_list_of_characters(tmp_path):
    from ablate.api import TrainResult
    from ablate.inference import InputError

    with pytest.raises(InputError, match=r"a list of sentences, not one string: run.translate\(\[text\]\)"):
        TrainResult(tmp_path, {}).translate("A man is riding a bike.")


def test_translate_refuses_a_beam_below_one_as_the_command_does(tmp_path):
    from ablate.api import TrainResult
    from ablate.inference import InputError

    with pytest.raises(InputError, match="--beam 0 must be at least 1"):
        TrainResult(tmp_path, {}).translate(["A man is riding a bike."], beam=0)


@pytest.mark.parametrize(
    "sentences, beam, words",
    [
        (["A man."], 2.5, r"--beam 2.5 must be a whole number, at least 1"),  # was torch's repeat_interleave TypeError
        (["A man."], True, r"--beam True must be a whole number, at least 1"),
        (None, None, r"a list of sentences, not NoneType"),  # was "'NoneType' object is not iterable"
        (["A man.", 3], None, r"sentence 2 is a int, not text"),  # was tokenizers' "TextEncodeInput must be Union"
    ],
)
def test_translate_refuses_what_is_not_sentences_or_a_beam_in_one_line(tmp_path, sentences, beam, words):
    from ablate.api import TrainResult
    from ablate.inference import InputError

    with pytest.raises(InputError, match=words):
        TrainResult(tmp_path, {}).translate(sentences, beam=beam)


def test_overrides_given_as_one_string_are_refused_with_the_list_to_write(tmp_path):
    from ablate.config import ConfigError, load_config

    with pytest.raises(ConfigError, match=r"not one string: overrides=\['model.heads=8'\]"):
        ablate.train(overrides="model.heads=8", run_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()
    # ablate.sweep split the string into characters: "override 'm' is not of the form key=value"
    with pytest.raises(ConfigError, match=r"not one string: overrides=\['model.heads=8'\]"):
        ablate.sweep(str(ROOT / "sweeps" / "quickstart.yaml"), "model.heads=8", out=tmp_path / "sweep")
    assert not (tmp_path / "sweep").exists()
    with pytest.raises(ConfigError, match=r"not one string: overrides=\['model.heads=8'\]"):
        load_config(None, "model.heads=8")  # was "override 'm' is not of the form key=value"


def test_a_sweep_override_of_a_key_variants_set_names_them_as_the_command_does(tmp_path, monkeypatch, capsys):
    # ablate.sweep(..., ["model.heads=4"]) replaced h1's 1 without a word; `ablate sweep run` notes it
    from ablate.sweep import launcher
    from ablate.sweep.planner import SweepResult

    nothing = SweepResult(state=type("S", (), {"trials": []})(), launched=0, skipped=0, interrupted=False)
    monkeypatch.setattr(launcher.Launcher, "run", lambda self: nothing)
    variants = ["base", {"name": "h1", "model.heads": 1}]
    sweep = {"name": "mini", "method": "grid", "parameters": {"variant": {"values": variants}}}
    ablate.sweep(sweep, ["model.heads=4"], out=tmp_path / "mini", devices="cpu")
    out = " ".join(capsys.readouterr().out.split())
    assert "note: model.heads=4 applies after the variants, so h1 (model.heads=1) train model.heads=4 under" in out


def test_translate_of_no_sentences_loads_no_model(tmp_path, monkeypatch):
    """``run.translate([])`` loaded the checkpoint and built the model to translate nothing."""
    from ablate.api import TrainResult
    from ablate.inference import InputError, translate as inference

    loads: list[str] = []
    monkeypatch.setattr(inference, "load_run", lambda run_dir, which, **_: loads.append(which))
    assert TrainResult(tmp_path, {}).translate([]) == [] and loads == []
    with pytest.raises(InputError, match="--checkpoint 'bset' is not a checkpoint name"):
        TrainResult(tmp_path, {}).translate([], checkpoint="bset")


def test_translate_loads_the_checkpoint_once_until_it_changes(tmp_path, monkeypatch):
    """``run.translate([s])`` in a notebook loop reloaded the checkpoint (and rebuilt the model) at every call: on a
    0.04M-parameter run 0.23 s of a 0.4 s call; 3 s on a 543 MB checkpoint. The loaded run is kept while the
    checkpoint files are the same, and one model at a time."""
    from types import SimpleNamespace

    from ablate.api import TrainResult
    from ablate.inference import translate as inference

    loads: list[str] = []
    monkeypatch.setattr(inference, "load_run", lambda run_dir, which, **_: loads.append(which) or SimpleNamespace())
    monkeypatch.setattr(inference, "translate", lambda run, sources, beam: [s.upper() for s in sources])
    best = tmp_path / "checkpoints" / "best.ckpt"
    best.parent.mkdir()
    best.write_bytes(b"weights")
    run = TrainResult(tmp_path, {})
    assert run.translate(["a"]) == ["A"] and run.translate([" b "], beam=1) == ["B"]
    assert loads == ["best"]
    run.translate(["c"], checkpoint="last")
    run.translate(["d"])
    assert loads == ["best", "last", "best"]
    best.write_bytes(b"resumed weights")  # the run trained on: another best.ckpt
    run.translate(["e"])
    assert loads == ["best", "last", "best", "best"] and run == TrainResult(tmp_path, {})


def test_a_sweep_whose_trials_hyperband_stopped_is_finished_as_the_command_exits_0(tmp_path):
    """``ablate sweep run`` exits 0 when hyperband stopped some trials (they are done, scored early), but
    ``ablate.sweep(...).finished`` was False for the same sweep: a notebook's ``assert sweep.finished`` failed."""
    from ablate.sweep import SweepRun
    from ablate.sweep.state import SweepState, Trial

    trials = [Trial("seed=1", {"seed": 1}, status="finished"), Trial("seed=2", {"seed": 2}, status="stopped")]
    assert SweepRun(tmp_path, SweepState("hb", "hb.yaml", "sig", trials=trials)).finished
    trials.append(Trial("seed=3", {"seed": 3}, status="failed"))
    assert not SweepRun(tmp_path, SweepState("hb", "hb.yaml", "sig", trials=trials)).finished


def test_translate_reads_each_sentence_as_the_command_reads_a_line(tmp_path, monkeypatch):
    """``run.translate(open(path).readlines())`` of a file saved with a BOM (Notepad's UTF-8) kept U+FEFF on the first
    sentence, which ``ablate translate`` drops: on a trained Multi30k run another translation of the same line."""
    from ablate.api import TrainResult
    from ablate.inference import read_sentences, translate as inference

    seen: list[list[str]] = []
    monkeypatch.setattr(inference, "load_run", lambda run_dir, which, **_: which)
    monkeypatch.setattr(inference, "translate", lambda run, sources, beam: seen.append(sources) or sources)
    text = "\ufeffa dog .\n two  men \n\ufeff b \n"
    TrainResult(tmp_path, {}).translate(text.splitlines(keepends=True))
    assert seen == [read_sentences(text.encode(), "x")] == [["a dog .", "two  men", "b"]]
