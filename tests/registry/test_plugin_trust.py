"""A run folder from someone else never runs its code.

Every command that reads a folder it did not write in this process either never imports the
plugins its record names (readers of numbers: ``ablate table``) or imports one only when the user
vouched for it (``--plugins`` naming the same code, an installed module, ``--trust-plugins``);
otherwise it refuses in one line naming the file, its digest and the flag. Each test plants a
plugin that appends a line to a marker file when imported: the marker says whether its code ran.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from ablate import cli
from ablate.utils.plugins import PluginError, sha256

from tests.helpers.tiny import tiny

PLANTED = """\
from pathlib import Path

with Path({marker!r}).open("a") as out:  # what a planted plugin could do: anything
    out.write("ran\\n")
"""


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict[str, Path]:
    """A tiny run trained with the plugin ``lab/stamp.py`` (the trainer's own; its record names that file)."""
    from ablate.config import load_config
    from ablate.training.train import train

    root = tmp_path_factory.mktemp("trust")
    marker = root / "marker"
    plugin = root / "lab" / "stamp.py"
    plugin.parent.mkdir()
    plugin.write_text(PLANTED.format(marker=str(marker)))
    overrides = tiny(
        "train.max_steps=2",
        "train.val_every=2",
        "data.builtin_eval_pairs=8",
        "eval.beam=1",
        "tracking.wandb=disabled",
        f"data.cache_dir={root / 'cache'}",
        f"plugins={plugin}",
        pairs=60,
    )
    summary = train(load_config(None, overrides), root / "run")
    assert summary["status"] == "finished" and marker.read_text() == "ran\n"  # the trainer imported its plugin
    return {"root": root, "run": root / "run", "plugin": plugin, "marker": marker}


@pytest.fixture(autouse=True)
def fresh(trained, monkeypatch):
    """As in a new process: none of the test plugins imported (the registry conftest resets the records),
    and no marker yet."""
    for name in ("stamp", "evil", "lab_stamp", "lab_planted"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    trained["marker"].unlink(missing_ok=True)


@pytest.fixture()
def run(trained, tmp_path) -> Path:
    """A copy of the trained run, as someone else's folder would arrive."""
    copy = tmp_path / "theirs"
    shutil.copytree(trained["run"], copy)
    return copy


def _planted(run: Path, marker: Path) -> Path:
    """The issue's repro: ``evil.py`` inside the run folder and ``plugins: [evil.py]`` in its config.yaml."""
    evil = run / "evil.py"
    evil.write_text(PLANTED.format(marker=str(marker)))
    config = yaml.safe_load((run / "config.yaml").read_text())
    config["plugins"] = ["evil.py"]
    (run / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return evil


def _invoke(*args: str, input: str | None = None):
    return CliRunner().invoke(cli.app, list(args), input=input)


def _refused(result, path: Path) -> str:
    """The command's one-line refusal, checked: exit 2, names the file, its digest and both flags."""
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    (line,) = lines
    assert str(path.resolve()) in line and sha256(path)[:12] in line, line
    assert f"--plugins {path.resolve()}" in line and "--trust-plugins" in line, line
    return line


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(["translate", "{run}"], id="translate"),
        pytest.param(["export-model", "{run}", "--out", "{tmp}/model.pt"], id="export-model"),
        pytest.param(["evaluate", "{run}"], id="evaluate"),
        pytest.param(["attention", "{run}", "--text", "a cat", "--out", "{tmp}/maps"], id="attention"),
    ],
)
def test_a_plugin_planted_in_a_run_folder_is_refused_not_run(command, run, trained, tmp_path):
    evil = _planted(run, trained["marker"])
    args = [a.format(run=run, tmp=tmp_path) for a in command]
    result = _invoke(*args, input="a cat .\n")
    line = _refused(result, evil)
    assert line.startswith("error: refusing to import plugin ")
    assert not trained["marker"].exists()  # its code never ran
    assert not (tmp_path / "model.pt").exists() and not (tmp_path / "maps").exists()


def test_the_recorded_plugin_of_a_copied_run_is_refused_until_the_user_names_it(run, trained):
    """A run trained elsewhere: its record names the trainer's plugin file by absolute path."""
    plugin = trained["plugin"]
    _refused(_invoke("translate", str(run), input="a cat .\n"), plugin)
    assert not trained["marker"].exists()

    mine = trained["root"] / "mine" / "stamp.py"  # the same code, in the user's own place
    mine.parent.mkdir(exist_ok=True)
    shutil.copy(plugin, mine)
    result = _invoke("translate", str(run), "--plugins", str(mine), input="a cat .\n")
    assert result.exit_code == 0, result.output
    assert len(result.output.splitlines()) == 1
    assert trained["marker"].read_text() == "ran\n"  # the user's file, imported once


def test_plugins_naming_other_code_of_that_name_is_refused(run, trained, tmp_path):
    other = tmp_path / "other" / "stamp.py"
    other.parent.mkdir()
    other.write_text("# not the recorded code\n")
    result = _invoke("translate", str(run), "--plugins", str(other), input="a cat .\n")
    assert result.exit_code == 2 and "refusing to import plugin" in result.output, result.output
    assert not trained["marker"].exists()


@pytest.mark.parametrize("how", ["--plugins", "--trust-plugins"])
def test_the_user_can_vouch_for_a_planted_plugin(how, run, trained, tmp_path):
    evil = _planted(run, trained["marker"])
    vouch = ["--plugins", str(evil)] if how == "--plugins" else ["--trust-plugins"]
    result = _invoke("export-model", str(run), "--out", str(tmp_path / "model.pt"), *vouch)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "model.pt").is_file()
    assert trained["marker"].read_text() == "ran\n"


def test_an_installed_module_a_record_names_is_imported(run, trained, tmp_path, monkeypatch):
    site = tmp_path / "site"
    (site / "lab_stamp").mkdir(parents=True)
    (site / "lab_stamp" / "__init__.py").write_text(PLANTED.format(marker=str(trained["marker"])))
    monkeypatch.syspath_prepend(str(site))
    config = yaml.safe_load((run / "config.yaml").read_text())
    config["plugins"] = ["lab_stamp"]
    (run / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    result = _invoke("translate", str(run), input="a cat .\n")
    assert result.exit_code == 0, result.output
    assert trained["marker"].read_text() == "ran\n"


def test_a_module_planted_beside_the_record_is_not_an_installed_one(run, trained, monkeypatch):
    (run / "lab_planted.py").write_text(PLANTED.format(marker=str(trained["marker"])))
    monkeypatch.syspath_prepend(str(run))  # e.g. `python -m ablate` started inside the folder
    config = yaml.safe_load((run / "config.yaml").read_text())
    config["plugins"] = ["lab_planted"]
    (run / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    result = _invoke("translate", str(run), input="a cat .\n")
    assert result.exit_code == 2, result.output
    assert "plugin module 'lab_planted'" in result.output and "--trust-plugins" in result.output
    assert not trained["marker"].exists()


def test_load_from_checkpoint_imports_a_recorded_plugin_only_when_trusted(run, trained):
    from ablate.training.module import TranslationModule

    ckpt = str(run / "checkpoints" / "best.ckpt")
    with pytest.raises(PluginError) as err:
        TranslationModule.load_from_checkpoint(ckpt, weights_only=True)
    message = str(err.value)
    assert "\n" not in message and "trust_plugins=True" in message
    assert str(trained["plugin"].resolve()) in message and sha256(trained["plugin"])[:12] in message
    assert not trained["marker"].exists()

    module = TranslationModule.load_from_checkpoint(ckpt, weights_only=True, trust_plugins=True)
    assert module.cfg.plugins[0]["name"] == "stamp"
    assert trained["marker"].read_text() == "ran\n"


def test_load_from_checkpoint_in_the_process_that_loaded_the_plugin_needs_no_flag(run, trained):
    from ablate.training.module import TranslationModule
    from ablate.utils.plugins import load

    load([str(trained["plugin"])])  # the user's own code, e.g. their training config's plugins
    module = TranslationModule.load_from_checkpoint(str(run / "checkpoints" / "best.ckpt"), weights_only=True)
    assert module.cfg.plugins[0]["sha256"] == sha256(trained["plugin"])
    assert trained["marker"].read_text() == "ran\n"  # once: by the user's load


@pytest.fixture()
def planted_sweep(trained, tmp_path) -> Path:
    """A sweep folder whose summaries lack ``resolved`` and whose configs name a planted plugin."""
    from tests.helpers.records import make_variant_sweep

    sweep = make_variant_sweep(tmp_path / "sweep")
    evil = sweep / "evil.py"
    evil.write_text(PLANTED.format(marker=str(trained["marker"])))
    for path in sweep.glob("*/summary.json"):
        summary = json.loads(path.read_text())
        summary.pop("resolved", None)
        summary["config"]["plugins"] = [str(evil)]
        path.write_text(json.dumps(summary))
    return sweep


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(["table", "{sweep}", "--format", "csv"], id="table"),
        pytest.param(["plot", "{sweep}", "--out", "{tmp}/plots", "--no-significance"], id="plot"),
        pytest.param(["calibrate", "{sweep}"], id="calibrate"),
    ],
)
def test_readers_of_numbers_never_import_a_plugin_a_summary_names(command, planted_sweep, trained, tmp_path):
    """A summary without ``resolved`` is derived from its config: without importing its plugins."""
    result = _invoke(*[a.format(sweep=planted_sweep, tmp=tmp_path) for a in command])
    assert "evil" not in result.output
    if command[0] == "table":
        assert result.exit_code == 0 and "base" in result.output, result.output
    assert not trained["marker"].exists()


def test_resuming_a_folder_whose_record_names_a_plugin_you_did_not_is_refused(trained, tmp_path):
    from ablate.config import ConfigError, load_config
    from ablate.training.run_folder import prepare_run_dir

    run = tmp_path / "theirs"
    shutil.copytree(trained["run"], run)
    _planted(run, trained["marker"])
    mine = load_config(None, [])  # a config of the user's that names no plugin
    with pytest.raises(ConfigError) as err:
        prepare_run_dir(mine, run)
    assert "evil.py" in str(err.value) and "does not name" in str(err.value) and "\n" not in str(err.value)
    assert not trained["marker"].exists()


def test_resuming_with_the_plugin_your_config_names_works(trained, tmp_path):
    from ablate.config import flatten, from_flat
    from ablate.training.run_folder import prepare_run_dir

    config = yaml.safe_load((trained["run"] / "config.yaml").read_text())
    config["plugins"] = [str(trained["plugin"])]  # the user's own config, naming their plugin
    mine = from_flat(flatten(config))
    assert prepare_run_dir(mine, trained["run"]) == "finished"
    assert trained["marker"].read_text() == "ran\n"  # imported once, as the user's


def test_trust_modes_of_from_flat(tmp_path, trained):
    from ablate.config import from_flat

    evil = tmp_path / "evil.py"
    evil.write_text(PLANTED.format(marker=str(trained["marker"])))
    never = from_flat({"plugins": [str(evil)]}, trust="never")
    assert never.plugins[0]["path"] == str(evil) and not trained["marker"].exists()
    with pytest.raises(PluginError, match="--trust-plugins"):
        from_flat({"plugins": [str(evil)]}, trust="recorded")
    assert not trained["marker"].exists()
    assert from_flat({"plugins": [str(evil)]}).plugins[0]["sha256"] == sha256(evil)  # the user's: imported
    assert trained["marker"].read_text() == "ran\n"
    assert from_flat({"plugins": [str(evil)]}, trust="recorded").plugins[0]["sha256"] == sha256(evil)  # now vouched
    assert sys.modules["evil"].__file__ == str(evil.resolve())


def _names(run: Path, **config: object) -> None:
    """Set top-level keys of ``run``'s config.yaml, as whoever made the folder could."""
    recorded = yaml.safe_load((run / "config.yaml").read_text())
    recorded.update(config)
    (run / "config.yaml").write_text(yaml.safe_dump(recorded, sort_keys=False))


@pytest.fixture()
def received(trained, tmp_path, monkeypatch) -> Path:
    """A sweep folder someone else made, holding the trained run as its trial ``trial``; the user works
    inside it with the folder on ``sys.path`` (``python -m ablate``, a notebook started there)."""
    folder = tmp_path / "received"
    shutil.copytree(trained["run"], folder / "trial")
    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend(str(folder))
    return folder


@pytest.mark.parametrize("entry", ["", "folder"], ids=["cwd-as-empty-entry", "cwd-as-path"])
def test_a_module_planted_in_the_working_directory_above_the_run_is_not_an_installed_one(
    entry, received, trained, monkeypatch
):
    """``_planted`` looked only inside the run folder: a module beside it, in the sweep folder the user
    works in, was taken for an installed one and imported."""
    if entry == "":
        monkeypatch.setattr(sys, "path", ["", *[p for p in sys.path if p != str(received)]])
    (received / "lab_planted.py").write_text(PLANTED.format(marker=str(trained["marker"])))
    _names(received / "trial", plugins=["lab_planted"])
    result = _invoke("translate", "trial", input="a cat .\n")
    assert result.exit_code == 2, result.output
    (line,) = [line for line in result.output.splitlines() if line.strip()]
    assert "plugin module 'lab_planted'" in line and str(received) in line and "--trust-plugins" in line, line
    assert not trained["marker"].exists()


def test_a_namespace_package_portion_planted_in_the_working_directory_is_refused(received, trained):
    """A submodule of a namespace package: its portion in the working directory joins the installed ones."""
    portion = received / "lab_space"
    portion.mkdir()
    (portion / "stamp.py").write_text(PLANTED.format(marker=str(trained["marker"])))
    _names(received / "trial", plugins=["lab_space.stamp"])
    result = _invoke("evaluate", "trial")
    assert result.exit_code == 2 and "plugin module 'lab_space.stamp'" in result.output, result.output
    assert not trained["marker"].exists()


def test_the_user_can_vouch_for_a_module_in_the_working_directory(received, trained):
    (received / "lab_planted.py").write_text(PLANTED.format(marker=str(trained["marker"])))
    _names(received / "trial", plugins=["lab_planted"])
    result = _invoke("translate", "trial", "--plugins", "lab_planted", input="a cat .\n")
    assert result.exit_code == 0, result.output
    assert trained["marker"].read_text() == "ran\n"


CALLBACK = PLANTED + "\nimport pytorch_lightning as pl\n\n\nclass Stamp(pl.Callback):\n    pass\n"


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(["translate", "trial"], id="translate"),
        pytest.param(["evaluate", "trial"], id="evaluate"),
        pytest.param(["export-model", "trial", "--out", "model.pt"], id="export-model"),
    ],
)
def test_a_callback_class_path_a_record_names_is_refused_unless_installed(command, received, trained):
    """``trainer.callbacks`` names code by class path: the config check imported it, whoever wrote the record."""
    (received / "lab_callback.py").write_text(CALLBACK.format(marker=str(trained["marker"])))
    _names(received / "trial", plugins=[], trainer={"callbacks": ["lab_callback.Stamp"]})
    result = _invoke(*command, input="a cat .\n")
    assert result.exit_code == 2, result.output
    (line,) = [line for line in result.output.splitlines() if line.strip()]
    assert "'lab_callback'" in line and "trainer.callbacks" in line and "--trust-plugins" in line, line
    assert not trained["marker"].exists()
    assert not (received / "model.pt").exists()


def test_an_installed_callback_a_record_names_is_imported(received, trained):
    _names(received / "trial", plugins=[], trainer={"callbacks": ["lightning.pytorch.callbacks.LearningRateMonitor"]})
    result = _invoke("translate", "trial", input="a cat .\n")
    assert result.exit_code == 0, result.output


def test_trust_plugins_imports_a_callback_a_record_names(received, trained):
    (received / "lab_callback.py").write_text(CALLBACK.format(marker=str(trained["marker"])))
    _names(received / "trial", plugins=[], trainer={"callbacks": [{"class_path": "lab_callback.Stamp"}]})
    result = _invoke("translate", "trial", "--trust-plugins", input="a cat .\n")
    assert result.exit_code == 0, result.output
    assert trained["marker"].read_text() == "ran\n"


def test_resuming_a_folder_whose_record_names_a_planted_callback_is_refused(received, trained):
    from ablate.config import load_config
    from ablate.training.run_folder import prepare_run_dir

    (received / "lab_callback.py").write_text(CALLBACK.format(marker=str(trained["marker"])))
    _names(received / "trial", plugins=[], trainer={"callbacks": ["lab_callback.Stamp"]})
    with pytest.raises(PluginError, match="--trust-plugins"):
        prepare_run_dir(load_config(None, []), received / "trial")  # checked before the configs are compared
    assert not trained["marker"].exists()


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(["table", "{sweep}", "--format", "csv"], id="table"),
        pytest.param(["calibrate", "{sweep}"], id="calibrate"),
    ],
)
def test_readers_of_numbers_never_import_a_callback_a_summary_names(command, planted_sweep, trained, monkeypatch):
    (planted_sweep / "lab_callback.py").write_text(CALLBACK.format(marker=str(trained["marker"])))
    for path in planted_sweep.glob("*/summary.json"):
        summary = json.loads(path.read_text())
        summary["config"]["plugins"] = []
        summary["config"]["trainer"] = {"callbacks": ["lab_callback.Stamp"]}
        path.write_text(json.dumps(summary))
    monkeypatch.chdir(planted_sweep)
    monkeypatch.syspath_prepend(str(planted_sweep))
    result = _invoke(*[a.format(sweep=".") for a in command])
    if command[0] == "table":
        assert result.exit_code == 0 and "base" in result.output, result.output
    assert not trained["marker"].exists()


def test_a_recorded_plugin_file_written_after_the_check_is_never_imported(trained, tmp_path, monkeypatch):
    """A missing file is vouched for (nothing of it can run); one written into the folder between that check
    and the import (a shared folder its owner still writes to) was imported as it then stood."""
    from ablate.config import from_flat
    from ablate.utils import plugins

    evil = tmp_path / "theirs" / "evil.py"
    evil.parent.mkdir()
    check = plugins._check_vouched

    def then_planted(entry, base):
        check(entry, base)
        evil.write_text(PLANTED.format(marker=str(trained["marker"])))  # the owner's write lands now

    monkeypatch.setattr(plugins, "_check_vouched", then_planted)
    with pytest.raises(PluginError) as err:
        from_flat({"plugins": [str(evil)]}, base=evil.parent, trust="recorded")
    assert "\n" not in str(err.value) and str(evil) in str(err.value) and "--trust-plugins" in str(err.value)
    assert not trained["marker"].exists()


def test_an_entry_point_planted_in_the_working_directory_is_not_an_installed_one(planted_sweep, tmp_path, monkeypatch):
    """``importlib.metadata`` finds a ``.dist-info`` through every ``sys.path`` entry: one planted in the folder
    the user works in declared an ``ablate.plugins`` entry point, which every command imported."""
    from ablate.utils import plugins

    marker = tmp_path / "entry-point-ran"
    dist = planted_sweep / "lab_entry-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: lab-entry\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[ablate.plugins]\nlab = lab_entry\n")
    (planted_sweep / "lab_entry.py").write_text(PLANTED.format(marker=str(marker)))
    monkeypatch.chdir(planted_sweep)
    monkeypatch.syspath_prepend(str(planted_sweep))
    monkeypatch.setattr(plugins, "_ENTRY_POINTS", None)  # as in a new process started there
    result = _invoke("table", ".", "--format", "csv")
    assert result.exit_code == 0 and "base" in result.output, result.output
    assert not marker.exists()
