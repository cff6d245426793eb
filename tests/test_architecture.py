"""The shape of the package: layers without cycles, registries as the only lists, one error base, the CLI entries."""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import re
import subprocess
import sys
import typing
from pathlib import Path

import pytest
from typer.testing import CliRunner

import ablate
from ablate.config import describe_keys, load_config
from ablate.errors import AblateError
from ablate.utils.typed import ConfigError, OneOf

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ablate"
LAYERS: dict[str, float] = {
    "errors": 0,
    "utils": 1,
    "registry": 1.2,  # ablate.register and the component registries' dicts; plugins register through it
    "config": 2,
    "record": 2,  # the run record: statuses, file names, summary.json, the metric keys
    "data": 3,
    "model": 3,
    "metrics": 3,  # scorers shared by training and the report
    "training": 4,
    "sweep": 5,
    "report": 6,
    "bench": 6,
    "inference": 6,
    "testing": 6,  # ablate.testing: the registry tests for one plugin component
    "cli": 7,
    "api": 7,  # the notebook API: the commands as functions (ablate.train, .table, .plot)
    "__main__": 8,
}
"""Data flows up this list: a module imports only from lower layers or its own folder (the report reads
what sweeps write, so it may use the sweep file's format)."""


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        out[name] = path
    return out


def _graph() -> dict[str, set[str]]:
    """Module -> the ``ablate`` modules it imports (anywhere in the file, function-level too)."""
    mods = _modules()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for target in targets:
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if target and target not in (name, "ablate"):
                    edges[name].add(target)
    return edges


def _cycle(edges: dict[str, set[str]]) -> list[str]:
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = 2
        path.pop()
        return []

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return []


def test_every_module_imports():
    for name in _modules():
        if name != "ablate.__main__":
            importlib.import_module(name)


def test_the_import_graph_has_no_cycle():
    assert _cycle(_graph()) == []


def test_no_import_points_up_the_layers():
    def layer(module: str) -> tuple[int, str]:
        top = module.split(".")[1]
        return LAYERS[top], top

    upward = [
        f"{a} -> {b}"
        for a, targets in _graph().items()
        if a != "ablate"
        for b in targets
        if layer(b)[0] > layer(a)[0] or (layer(b)[0] == layer(a)[0] and layer(b)[1] != layer(a)[1])
    ]
    assert upward == []


def test_the_run_record_imports_only_errors_and_utils():
    allowed = {"ablate.errors"} | {m for m in _modules() if m.startswith("ablate.utils")}
    assert _graph()["ablate.record"] - allowed == set()


# Where a status word is another system's vocabulary, not a run's status (module -> literals).
FOREIGN_WORDS = {
    "ablate.report.trials": {"finished", "failed", "running", "pending"},  # W&B run states, mapped to ours
    "ablate.sweep.planner": {"finished", "failed", "running"},  # the W&B sweeps engine's run states
}


def _record_words() -> set[str]:
    """The literals only :mod:`ablate.record` may spell: file names, status values, namespaced metric keys."""
    from ablate.record import METRICS, RunStatus

    keys = {m.key for m in METRICS.values() if "/" in m.key}  # "step", "params": also ordinary words
    return {"summary.json", "sweep.json"} | {s.value for s in RunStatus} | keys


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def test_the_run_records_words_are_spelt_only_in_the_record_module():
    """No module but ablate/record.py writes "summary.json", "finished" or "val/bleu" as a whole string
    constant: they come from RunFiles, RunStatus and METRICS, so a rename is one edit."""
    words = _record_words()
    found = []
    for name, path in sorted(_modules().items()):
        if name == "ablate.record":
            continue
        tree = ast.parse(path.read_text())
        skip = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
                if node.value in words and node.value not in FOREIGN_WORDS.get(name, set()):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert found == [], "use ablate.record (RunFiles, RunStatus, METRICS) instead of:\n" + "\n".join(found)


def _markers() -> dict[str, OneOf]:
    from ablate import config

    out = {}
    for cls in (
        config.DataConfig,
        config.AttentionConfig,
        config.ModelConfig,
        config.TrainConfig,
        config.EvalConfig,
        config.TrackingConfig,
    ):
        for name, tp in typing.get_type_hints(cls, include_extras=True).items():
            for arg in (tp, *typing.get_args(tp)):
                if typing.get_origin(arg) is typing.Annotated:
                    out[f"{cls.__name__}.{name}"] = next(m for m in arg.__metadata__ if isinstance(m, OneOf))
    return out


def test_config_choices_come_from_the_registries():
    from ablate.model.build import ARCHS
    from ablate.model.positions import POSITIONS
    from ablate.model.scores import SCORES

    markers = _markers()
    assert markers["AttentionConfig.score"].choices() == [*SCORES, "none"]
    assert markers["ModelConfig.positions"].choices() == list(POSITIONS)
    assert markers["ModelConfig.arch"].choices() == list(ARCHS)
    for marker in markers.values():
        assert marker.choices() and all(isinstance(c, str) for c in marker.choices())


def test_a_registered_variant_is_selectable_and_listed(monkeypatch):
    from ablate.model.build import build_model
    from ablate.model.scores import SCORES, DotScore

    class ToyScore(DotScore):
        """A copy of the dot product under another name."""

    monkeypatch.setitem(SCORES, "toy", ToyScore)
    cfg = load_config(None, ["model.attention.score=toy"])
    assert cfg.model.attention.score == "toy"
    assert "toy" in dict((k, t) for k, t, _, _ in describe_keys())["model.attention.score"]
    model = build_model(cfg.model, 20, 20)
    assert any(isinstance(m, ToyScore) for m in model.modules())
    with pytest.raises(ConfigError, match="did you mean 'toy'"):
        load_config(None, ["model.attention.score=tyo"])


def test_every_error_class_has_the_one_base():
    found = []
    for name in _modules():
        if name == "ablate.__main__":
            continue
        for _, obj in inspect.getmembers(importlib.import_module(name), inspect.isclass):
            if obj.__module__ == name and issubclass(obj, Exception):
                found.append(obj)
    assert len(found) >= 11
    assert [cls.__name__ for cls in found if not issubclass(cls, AblateError)] == []


def test_a_model_building_error_is_one_line_exit_2(monkeypatch):
    from ablate import cli
    from ablate.model.scores import ScoreError
    from ablate.training import train

    def build_fails(*args, **kwargs):
        raise ScoreError("attention score 'x' is not available for this model; choose from: dot")

    monkeypatch.setattr(train, "train", build_fails)
    result = CliRunner().invoke(cli.app, ["train", "tracking.wandb=disabled"])
    assert result.exit_code == 2
    assert result.output.strip() == "error: attention score 'x' is not available for this model; choose from: dot"


def test_version_and_help_list_the_config_keys():
    from ablate import cli

    result = CliRunner().invoke(cli.app, ["--version"])
    assert result.exit_code == 0 and result.output.startswith("ablate ")
    help_text = CliRunner().invoke(cli.app, ["train", "--help"], terminal_width=200).output
    assert "model.attention.score" in help_text and "additive" in help_text
    assert "Peak learning rate" in help_text


@pytest.mark.slow
@pytest.mark.parametrize("argv", [[sys.executable, "-m", "ablate", "--help"], [sys.executable, "cli.py", "--help"]])
def test_entry_points(argv, tmp_path):
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)} if argv[1] == "-m" else {"PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        argv, cwd=ROOT if argv[1] == "cli.py" else tmp_path, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "train" in done.stdout and "sweep" in done.stdout


def test_no_top_level_cli_module_is_installed():
    text = (ROOT / "pyproject.toml").read_text()
    assert "py-modules" not in text and 'ablate = "ablate.cli:main"' in text
    assert Path(ablate.__file__).parent == PACKAGE


def test_slurm_options_render_in_their_own_panel():
    from ablate import cli

    text = CliRunner().invoke(cli.app, ["sweep", "run", "--help"], terminal_width=160).output
    panel = text[text.index("SLURM (--launcher slurm)") :]
    assert "--partition" in panel and "partition for the jobs" in panel


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["pdf", "svg"])
def test_plot_writes_vector_figures(fmt, tmp_path):
    from ablate import cli
    from ablate.report.figures import FIGURE_FORMATS

    assert fmt in FIGURE_FORMATS
    from tests.helpers.records import make_variant_sweep

    sweep = make_variant_sweep(tmp_path / "sweep")
    result = CliRunner().invoke(cli.app, ["plot", str(sweep), "--out", str(tmp_path / "p"), "--format", fmt])
    assert result.exit_code == 0, result.output
    files = sorted((tmp_path / "p").iterdir())
    assert files and all(f.suffix == f".{fmt}" for f in files)


@pytest.mark.slow
@pytest.mark.parametrize(
    "probe, preset, expected",
    [
        ("import ablate, ablate.config, ablate.registry", None, "unset"),
        ("import ablate.cli", None, "PASSIVE"),
        ("import ablate.cli", "ACTIVE", "ACTIVE"),
    ],
)
def test_only_the_command_line_makes_idle_threads_sleep_unless_the_user_chose(probe, preset, expected):
    """``import ablate`` (a notebook's) leaves the environment alone; the command line sets
    ``OMP_WAIT_POLICY=PASSIVE`` before torch loads; an explicit value wins."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if preset:
        env["OMP_WAIT_POLICY"] = preset
    env["PYTHONPATH"] = str(ROOT)
    code = f"import os; {probe}; print(os.environ.get('OMP_WAIT_POLICY', 'unset'))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == expected


def test_test_docstrings_say_what_they_pin_not_which_issue_asked():
    """A test's docstring is its specification; an issue number means nothing to a reader of the code."""
    cited = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef)))]
        for node in nodes:
            doc = ast.get_docstring(node) or ""
            if re.search(r"\b[Ii]ssue \d+", doc):
                cited.append(f"{path.relative_to(ROOT)}:{getattr(node, 'name', '<module>')}")
    assert not cited, f"say what behaviour these pin instead of which issue asked: {cited}"


def test_the_tests_mirror_the_package():
    """A test file lives in the folder of the part of ``ablate`` it specifies (tests/config/ for config.py ...);
    only the package-wide specifications stay at the top; basenames are unique (pytest refuses duplicates)."""
    tests = ROOT / "tests"
    assert sorted(p.name for p in tests.glob("test_*.py")) == ["test_architecture.py", "test_docs.py"]
    parts = {p.stem if p.suffix == ".py" else p.name for p in PACKAGE.iterdir() if not p.name.startswith("_")}
    folders = {p.name for p in tests.iterdir() if p.is_dir() and any(p.rglob("test_*.py"))} - {"helpers"}
    assert folders - parts == set(), f"test folders that mirror no part of ablate/: {sorted(folders - parts)}"
    names = [p.name for p in tests.rglob("test_*.py")]
    assert sorted({n for n in names if names.count(n) > 1}) == []


MAX_FUNCTION_LINES = 60
"""A function's body (docstring and signature not counted) fits on a screen; longer ones say why below."""

LONG_FUNCTIONS: dict[str, str] = {}
"""Functions over :data:`MAX_FUNCTION_LINES`, each with the reason it is long (``path:qualified name``)."""


def _lengths_of(tree: ast.AST, path: str) -> dict[str, int]:
    """``path:qualified name`` -> body lines (without the docstring) of every function in ``tree``."""
    lengths: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                body = child.body
                has_doc = isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant)
                first = body[1].lineno if has_doc and len(body) > 1 else body[0].lineno
                lengths[f"{path}:{prefix}{child.name}"] = (child.end_lineno or first) - first + 1
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")

    visit(tree, "")
    return lengths


def _function_lengths() -> dict[str, int]:
    lengths: dict[str, int] = {}
    for file in sorted(PACKAGE.rglob("*.py")):
        lengths.update(_lengths_of(ast.parse(file.read_text(encoding="utf-8")), str(file.relative_to(PACKAGE))))
    return lengths


def test_no_function_is_longer_than_a_screen_without_a_reason():
    lengths = _function_lengths()
    long = {name: n for name, n in lengths.items() if n > MAX_FUNCTION_LINES}
    unexplained = {name: n for name, n in long.items() if name not in LONG_FUNCTIONS}
    assert not unexplained, (
        f"split these into named steps (or add each to LONG_FUNCTIONS with its reason): {unexplained}"
    )
    stale = sorted(set(LONG_FUNCTIONS) - set(long))
    assert not stale, f"no longer long (or gone): remove from LONG_FUNCTIONS: {stale}"
    assert all(len(reason) > 30 for reason in LONG_FUNCTIONS.values())


def test_the_function_length_measure_counts_the_body():
    source = (
        'def f():\n    """Doc\n    string."""\n'
        + "    x = 1\n" * 70
        + "    def inner():\n        return 2\n"
        + "\n\nclass C:\n    def g(self):\n        pass\n"
    )
    assert _lengths_of(ast.parse(source), "x.py") == {"x.py:f": 72, "x.py:f.inner": 1, "x.py:C.g": 1}


MODULES_PROBE = """
import contextlib, io, sys, tempfile
from ablate.cli import app
argv = sys.argv[1:]
if argv[0] == "train":
    argv += ["--run-dir", tempfile.mkdtemp() + "/run"]
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        app(argv, standalone_mode=False)
    except SystemExit:
        pass
print(sorted(m for m in sys.modules if m == "ablate" or m.startswith("ablate.")), "torch" in sys.modules)
"""
"""Runs one command in-process and prints the ``ablate`` modules it imported, then whether torch was."""


@pytest.mark.parametrize(
    "argv, most, torch_imported",
    [
        (["table", "results/mission-cpu"], 30, False),
        (["power", "sweeps/mission-cpu.yaml", "--sigma-from", "results/calibration-cpu"], 30, False),
        (
            ["train", "data.builtin_pairs=100", "data.builtin_eval_pairs=100", "data.vocab_size=300", "model.d_model=32",
             "model.layers=1", "model.heads=2", "model.d_ff=64", "train.max_steps=1", "tracking.wandb=disabled",
             "eval.beam=1"],
            50,
            True,
        ),
    ],
    ids=["table", "power", "train"],
)  # fmt: skip
def test_a_command_reaches_few_modules(argv, most, torch_imported):
    """One ``ablate table`` (or ``ablate power``, which plans a sweep's table) imports at most 30 ablate modules and no
    torch; one tiny ``ablate train`` at most 50
    (docs/contributing.md says how to count): a command's code stays in a few modules a reader can follow."""
    out = subprocess.run(
        [sys.executable, "-c", MODULES_PROBE, *argv], cwd=ROOT, capture_output=True, text=True, timeout=600, check=True
    ).stdout.strip()
    modules, torch = out.rsplit(" ", 1)
    names = ast.literal_eval(modules)
    assert len(names) <= most, f"{len(names)} ablate modules: {names}"
    assert torch == str(torch_imported)
