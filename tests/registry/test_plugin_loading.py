"""Plugins reach the registries before the config is checked; mistakes are one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from ablate import cli
from ablate.config import ConfigError, from_flat, load_config
from ablate.registry import RegistryError, register
from ablate.utils.plugins import PluginError, sha256

from tests.helpers.plugin import write_cosine

ROOT = Path(__file__).resolve().parents[2]


def test_a_yaml_plugin_path_is_relative_to_the_config_file_and_recorded(tmp_path, monkeypatch):
    plugin = write_cosine(tmp_path / "lab")
    (tmp_path / "lab" / "run.yaml").write_text(
        "plugins: [cosine.py]\nmodel:\n  attention: {score: cosine, params: {temperature: 5}}\n"
    )
    monkeypatch.chdir(tmp_path)  # not the config's folder
    cfg = load_config(tmp_path / "lab" / "run.yaml")
    assert cfg.model.attention.score == "cosine"
    assert cfg.model.attention.params == {"temperature": 5.0}  # typed by the constructor's annotation
    assert isinstance(cfg.model.attention.params["temperature"], float)
    assert cfg.plugins == ({"kind": "file", "name": "cosine", "path": str(plugin.resolve()), "sha256": sha256(plugin)},)


def test_a_plugin_override_reaches_the_score_constructor(tmp_path, monkeypatch):
    write_cosine(tmp_path)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        cli.app,
        [
            "train",
            "--print-config",
            "plugins=cosine.py",
            "model.attention.score=cosine",
            "model.attention.params.temperature=3",
        ],
    )
    assert result.exit_code == 0, result.output
    printed = yaml.safe_load(result.output)
    assert printed["model"]["attention"]["params"] == {"temperature": 3.0}
    assert printed["plugins"][0]["path"] == str((tmp_path / "cosine.py").resolve())

    from ablate.model.build import build_model
    from ablate.model.scores import SCORES

    cfg = load_config(
        None, ["plugins=cosine.py", "model.attention.score=cosine", "model.attention.params.temperature=3"]
    )
    model = build_model(cfg.model, 20, 20)
    temperatures = {m.temperature for m in model.modules() if isinstance(m, SCORES["cosine"])}
    assert temperatures == {3.0}


def test_without_the_plugin_the_score_is_unknown_with_did_you_mean(tmp_path):
    with pytest.raises(ConfigError, match="model.attention.score='cosine' is not valid"):
        load_config(None, ["model.attention.score=cosine"])
    write_cosine(tmp_path)
    with pytest.raises(ConfigError, match="did you mean 'cosine'"):
        load_config(None, [f"plugins={tmp_path / 'cosine.py'}", "model.attention.score=cosin"])


@pytest.mark.parametrize(
    "override, expected",
    [
        (
            "model.attention.params.temperatur=2",
            "model.attention.params.temperatur is not a parameter of score 'cosine'; did you mean 'temperature'? "
            "(parameters: temperature)",
        ),
        (
            "model.attention.params.temperature=hot",
            "model.attention.params.temperature='hot' is not valid (expected a number)",
        ),
    ],
)
def test_a_misspelled_or_mistyped_parameter_is_one_line(tmp_path, override, expected):
    write_cosine(tmp_path)
    with pytest.raises(ConfigError) as err:
        load_config(None, [f"plugins={tmp_path / 'cosine.py'}", "model.attention.score=cosine", override])
    assert str(err.value) == expected


def test_a_shipped_component_without_parameters_refuses_them():
    with pytest.raises(ConfigError, match="score 'dot' takes no parameters; remove model.attention.params.t"):
        load_config(None, ["model.attention.params.t=1"])
    with pytest.raises(ConfigError, match="positions 'sinusoidal' takes no parameters"):
        load_config(None, ["model.positions_params.base=10"])


def test_positions_params_reach_a_registered_scheme(tmp_path):
    (tmp_path / "shifted.py").write_text(
        "import ablate\n"
        "from ablate.model.positions import SinusoidalPositions\n\n"
        "@ablate.register('positions', 'shifted')\n"
        "class Shifted(SinusoidalPositions):\n"
        "    def __init__(self, d_model, d_k, heads, max_positions, *, shift: int = 0):\n"
        "        super().__init__(d_model, d_k, heads, max_positions)\n"
        "        self.shift = shift\n"
    )
    cfg = load_config(
        None, [f"plugins={tmp_path / 'shifted.py'}", "model.positions=shifted", "model.positions_params.shift=2"]
    )
    from ablate.model.build import build_model

    model = build_model(cfg.model, 20, 20)
    assert model.src_positions.shift == 2
    import ablate.testing

    ablate.testing.check_positions("shifted", shift=2)
    with pytest.raises(ConfigError, match="did you mean 'shift'"):
        load_config(
            None, [f"plugins={tmp_path / 'shifted.py'}", "model.positions=shifted", "model.positions_params.shfit=2"]
        )


def test_a_name_clash_between_plugins_or_within_ablate_is_refused_in_one_line(tmp_path):
    with pytest.raises(RegistryError, match="score 'dot' is already registered by ablate.model.scores.DotScore"):

        class Mine:
            __module__ = "ablate.model.mine"  # ablate's own code may not take a name twice

        register("score", "dot")(Mine)

    for plugin in ("one", "two"):
        (tmp_path / f"{plugin}.py").write_text(
            "import ablate\n\n@ablate.register('schedule', 'steps')\ndef steps(q):\n    return 1.0\n"
        )
    load_config(None, [f"plugins={tmp_path / 'one.py'}"])
    with pytest.raises(PluginError) as err:
        load_config(None, [f"plugins={tmp_path / 'two.py'}"])
    assert str(err.value).startswith("plugin 'two': schedule 'steps' is already registered by one.steps")
    with pytest.raises(RegistryError, match="unknown component kind 'scor'; did you mean 'score'"):
        register("scor", "x")
    with pytest.raises(RegistryError, match="reserved"):
        register("score", "none")


def test_a_broken_plugin_stops_train_with_one_line(tmp_path):
    (tmp_path / "broken.py").write_text("import torch\nraise RuntimeError('no GPU kernel for cosine\\nsecond line')\n")
    result = CliRunner().invoke(cli.app, ["train", f"plugins={tmp_path / 'broken.py'}", "tracking.wandb=disabled"])
    assert result.exit_code == 2
    assert result.output.strip() == (
        "error: plugin 'broken' failed to import: RuntimeError: no GPU kernel for cosine; fix it or drop it from plugins"
    )
    result = CliRunner().invoke(cli.app, ["train", "plugins=no_such_plugin_module", "tracking.wandb=disabled"])
    assert result.exit_code == 2
    assert "plugin 'no_such_plugin_module' failed to import: ModuleNotFoundError" in result.output
    with pytest.raises(PluginError, match="does not exist"):
        load_config(None, [f"plugins={tmp_path / 'missing.py'}"])


def _installed(site: Path, dist: str, version: str, module: str, source: str) -> Path:
    """``site`` as a site-packages folder holding distribution ``dist`` (``lab_scores`` is ``lab-scores``) whose
    ``ablate.plugins`` entry point ``lab`` is ``module``, written from ``source``."""
    info = site / f"{dist}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist.replace('_', '-')}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[ablate.plugins]\nlab = {module}\n")
    (site / f"{module}.py").write_text(source)
    return site


def test_an_installed_entry_point_is_loaded_and_recorded_with_its_version(tmp_path, monkeypatch):
    source = write_cosine(tmp_path / "src").read_text().replace('"cosine"', '"labcos"')
    site = _installed(tmp_path / "site", "lab_scores", "1.2", "lab_scores_plugin", source)
    monkeypatch.syspath_prepend(str(site))
    cfg = load_config(None, ["model.attention.score=labcos"])  # no plugins key: the entry point is found
    (record,) = cfg.plugins
    assert record["kind"] == "entry_point" and record["entry_point"] == "lab"
    assert (record["package"], record["version"], record["name"]) == ("lab-scores", "1.2", "lab_scores_plugin")
    assert record["sha256"] == sha256(site / "lab_scores_plugin.py")
    help_text = CliRunner().invoke(cli.app, ["train", "--help"], terminal_width=250).output
    assert "labcos" in help_text  # registered names are choices in --help


def test_a_missing_entry_point_says_which_package_to_install(monkeypatch):
    record = {
        "kind": "entry_point",
        "name": "lab_scores_plugin",
        "entry_point": "lab",
        "package": "lab-scores",
        "version": "1.2",
    }
    with pytest.raises(PluginError) as err:
        from_flat({"plugins": [record]})
    assert str(err.value) == (
        "plugin 'lab' (entry point lab_scores_plugin of package lab-scores==1.2) is not installed; "
        "install it (pip install lab-scores==1.2)"
    )


def test_the_registry_tests_run_on_a_plugin_component(tmp_path):
    import ablate.testing

    load_config(None, [f"plugins={write_cosine(tmp_path)}"])
    ablate.testing.check_score("cosine", temperature=5.0)
    (tmp_path / "peeks.py").write_text(
        "import ablate\nfrom ablate.model.scores import DotScore\n\n"
        "@ablate.register('score', 'peeks')\n"
        "class Peeks(DotScore):\n"
        "    def prepare_keys(self, k):\n"
        "        return k.cumsum(2).flip(2)  # every key sees the later ones\n"
    )
    load_config(None, [f"plugins={tmp_path / 'peeks.py'}"])
    with pytest.raises(AssertionError, match="prepare_keys is not per position"):
        ablate.testing.check_score("peeks")


def test_import_ablate_stays_light_and_exposes_register():
    code = "import sys, ablate; r = ablate.register; print('torch' in sys.modules, r.__module__)"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "ablate.registry"]


def test_bench_lists_a_plugins_score_as_variants(tmp_path):
    from ablate.bench.speed import variants
    from ablate.utils.plugins import load

    assert "cosine-scaled" not in variants()
    load([str(write_cosine(tmp_path))])
    assert {"cosine-scaled", "cosine-unscaled"} <= set(variants())


def test_a_recorded_plugin_whose_file_changed_loads_with_a_warning(tmp_path):
    plugin = write_cosine(tmp_path)
    record = {"kind": "file", "name": "cosine", "path": str(plugin), "sha256": "0" * 64}
    with pytest.warns(UserWarning, match="plugin 'cosine' changed since it was recorded"):
        cfg = from_flat({"plugins": [record], "model.attention.score": "cosine"})
    assert cfg.plugins[0]["sha256"] == sha256(plugin)  # the code this process runs


def test_a_module_plugin_records_its_file_and_a_missing_one_says_so(tmp_path, monkeypatch):
    (tmp_path / "lab_pkg").mkdir()
    (tmp_path / "lab_pkg" / "__init__.py").write_text("")
    write_cosine(tmp_path / "lab_pkg", "attention.py")
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = load_config(None, ["plugins=lab_pkg.attention", "model.attention.score=cosine"])
    (record,) = cfg.plugins
    assert record["kind"] == "module" and record["name"] == "lab_pkg.attention"
    assert record["sha256"] == sha256(tmp_path / "lab_pkg" / "attention.py")
    gone = {**record, "name": "lab_pkg_gone.attention"}
    with pytest.raises(PluginError, match="plugin module 'lab_pkg_gone.attention' is not installed .*PYTHONPATH"):
        from_flat({"plugins": [gone]})


def test_the_arguments_plain_wandb_agent_passes_load_the_plugin(tmp_path):
    """W&B's ``${args_no_hyphens}`` is ``key=str(value)``: a list and a variant arrive as Python text."""
    write_cosine(tmp_path)
    variant = {"name": "t5", "model.attention.params.temperature": 5}
    argv = [f"plugins={['cosine.py']}", "model.attention.score=cosine", f"variant={variant}", "seed=1"]
    done = subprocess.run(
        [sys.executable, "-m", "ablate", "train", "--print-config", *argv],
        cwd=tmp_path,  # the agent starts in the sweep file's folder
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    printed = yaml.safe_load(done.stdout)
    assert printed["model"]["attention"]["params"] == {"temperature": 5.0}
    assert printed["tracking"]["variant"] == "t5"
    assert printed["plugins"][0]["path"] == str((tmp_path / "cosine.py").resolve())


def test_a_recorded_plugin_that_moved_is_found_by_its_digest_once_the_new_place_is_loaded(tmp_path, monkeypatch):
    from ablate.utils import plugins

    old = write_cosine(tmp_path / "old")
    record = from_flat({"plugins": [str(old)]}).plugins[0]
    old.unlink()
    monkeypatch.setattr(plugins, "_LOADED", {})  # a new process (a resume) ...
    del sys.modules["cosine"]
    new = write_cosine(tmp_path / "new")
    new_cfg = from_flat({"plugins": [str(new)], "model.attention.score": "cosine"})  # ... names the new place
    assert new_cfg.plugins[0]["path"] == str(new.resolve())
    assert from_flat({"plugins": [record], "model.attention.score": "cosine"}).plugins == new_cfg.plugins
    changed = {**record, "sha256": "f" * 64}  # other code: not the same plugin
    with pytest.raises(PluginError, match=f"plugin 'cosine' is missing: {old}"):
        from_flat({"plugins": [changed]})


def test_a_copy_of_a_loaded_plugin_file_is_the_same_plugin(tmp_path):
    first = write_cosine(tmp_path / "a")
    record = from_flat({"plugins": [str(first)]}).plugins[0]
    copy = write_cosine(tmp_path / "b")
    assert from_flat({"plugins": [str(copy)]}).plugins[0] == record
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "cosine.py").write_text("# other code under the same module name\n")
    with pytest.raises(PluginError, match="a module named 'cosine' is already imported; rename the file"):
        from_flat({"plugins": [str(tmp_path / "c" / "cosine.py")]})


def test_a_metric_registered_by_the_decorator_is_the_metrics_registrys(tmp_path):
    from ablate.metrics import METRIC_SCORERS, get_scorer

    (tmp_path / "lab_metric.py").write_text(
        "import ablate\nfrom ablate.metrics.scorers import Chrf\n\n"
        "@ablate.register('metric', 'chrf')\nclass Mine(Chrf):\n    pass\n"
    )
    load_config(None, [f"plugins={tmp_path / 'lab_metric.py'}"])  # a shipped name: the plugin's is namespaced
    assert METRIC_SCORERS["chrf"].__module__ == "ablate.metrics.scorers"
    assert METRIC_SCORERS["lab_metric:chrf"].__module__ == "lab_metric"
    (tmp_path / "lab_metric2.py").write_text(
        "import ablate\nfrom ablate.metrics.scorers import Chrf\n\n"
        "@ablate.register('metric', 'mychrf')\nclass Mine(Chrf):\n    name = 'mychrf'\n"
    )
    load_config(None, [f"plugins={tmp_path / 'lab_metric2.py'}"])
    assert "mychrf" in METRIC_SCORERS and get_scorer("mychrf").name == "mychrf"


def test_an_installed_entry_points_metric_is_found_by_table_and_score(tmp_path, monkeypatch):
    """docs/extending.md: every ablate process loads an installed entry point, and `ablate table --metric NAME`
    and `ablate score --metric NAME` use its metric (they read no config, so no `plugins` key loads it)."""
    source = (
        "from ablate.metrics import register_metric\nfrom ablate.metrics.scorers import Chrf\n\n"
        "class Mine(Chrf):\n    name = 'labchrf'\n\nregister_metric('labchrf', Mine)\n"
    )
    monkeypatch.syspath_prepend(str(_installed(tmp_path / "site", "lab_metrics", "1.0", "lab_metric_ep", source)))
    result = CliRunner().invoke(cli.app, ["score", str(tmp_path / "no-runs"), "--metric", "labchrf"])
    assert "unknown metric" not in result.output
    from ablate.metrics import get_scorer

    assert get_scorer("labchrf").name == "labchrf"


def test_a_folder_named_like_a_plugin_file_is_called_a_folder(tmp_path):
    from ablate.utils.plugins import PluginError

    (tmp_path / "x.py").mkdir()
    with pytest.raises(PluginError, match=r"x\.py is a folder, not a Python file; name a \.py file inside it"):
        load_config(None, [f"plugins={tmp_path / 'x.py'}"])  # said "does not exist"


def test_a_plugin_file_edited_in_the_same_process_is_imported_again(tmp_path):
    """A notebook: ``ablate.train(..., plugins=[file])``, edit the file, train again: the old class ran, and the
    run recorded the new file's sha256 beside the old code."""
    import inspect

    from ablate.registry import lookup

    plugin = write_cosine(tmp_path)
    overrides = [f"plugins={plugin}", "model.attention.score=cosine"]
    first = load_config(None, overrides).plugins[0]["sha256"]
    plugin.write_text(plugin.read_text().replace("temperature: float = 10.0", "temperature: float = 2.0"))
    assert load_config(None, overrides).plugins[0]["sha256"] == sha256(plugin) != first
    assert inspect.signature(lookup("score", "cosine").__init__).parameters["temperature"].default == 2.0
    plugin.write_text("raise ValueError('half-edited')\n")  # a broken edit: one line, the last good code stays
    with pytest.raises(PluginError, match="half-edited"):
        load_config(None, overrides)
    assert inspect.signature(lookup("score", "cosine").__init__).parameters["temperature"].default == 2.0


def test_a_plugin_module_edited_in_the_same_process_is_imported_again(tmp_path, monkeypatch):
    """The same for ``plugins=[lab_pkg.attention]``: the module stayed as first imported."""
    import inspect

    from ablate.registry import lookup

    (tmp_path / "lab_pkg2").mkdir()
    (tmp_path / "lab_pkg2" / "__init__.py").write_text("")
    plugin = write_cosine(tmp_path / "lab_pkg2", "attention.py")
    monkeypatch.syspath_prepend(str(tmp_path))
    overrides = ["plugins=lab_pkg2.attention", "model.attention.score=cosine"]
    first = load_config(None, overrides).plugins[0]["sha256"]
    plugin.write_text(plugin.read_text().replace("temperature: float = 10.0", "temperature: float = 2.0"))
    assert load_config(None, overrides).plugins[0]["sha256"] == sha256(plugin) != first
    assert inspect.signature(lookup("score", "cosine").__init__).parameters["temperature"].default == 2.0
