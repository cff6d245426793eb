"""``wandb sweep FILE && wandb agent ID`` runs the shipped sweep files."""

from __future__ import annotations

import json
import os
import subprocess
import warnings
from pathlib import Path

import pytest
import yaml

from ablate.config import load_config
from ablate.sweep.spec import SWEEP_COMMAND, SweepError, expand_variant, load_spec, resolve

from tests.helpers.tiny import tiny_parameters
from tests.helpers.wandb_agent import agent_command, agent_env, proposal, proposals, python_on_path
from tests.helpers.wandb_offline import offline_runs, read_run

ROOT = Path(__file__).resolve().parents[2]
SWEEPS = sorted((ROOT / "sweeps").glob("*.yaml"))


@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: p.stem)
def test_every_sweep_file_is_a_runnable_wandb_sweep(path):
    config = yaml.safe_load(path.read_text())
    assert config["command"] == SWEEP_COMMAND
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from sweeps import SweepConfig
    SweepConfig(config)  # W&B's own schema validation
    load_spec(path)  # and ours
    first = proposals(config)[0] if config["method"] == "grid" else None
    if first is None:
        return
    argv = agent_command(config["command"], first)
    assert argv[:5] == ["/usr/bin/env", "python", "-m", "ablate", "train"]
    # the trainer reads exactly the proposal's resolved parameters from those arguments
    point = {k: v["value"] for k, v in first.items()}
    cfg = load_config(None, expand_variant(argv[5:]))
    for key, value in resolve(point).items():
        got = cfg.seed if key == "seed" else _get(cfg, key)
        assert got == pytest.approx(value) if isinstance(value, float) else got == value, key


def _get(cfg, key):
    node = cfg
    for part in key.split("."):
        node = getattr(node, part)
    return list(node) if isinstance(node, tuple) else node


def test_table3_variant_arguments_train_the_variant():
    config = yaml.safe_load((ROOT / "sweeps" / "table3.yaml").read_text())
    argv = agent_command(config["command"], proposal(config, "A-heads1", seed=2))
    assert "model.heads=8" in argv and "variant={'name': 'A-heads1', 'model.heads': 1}" in argv
    cfg = load_config(None, expand_variant(argv[5:]))
    assert cfg.model.heads == 1 and cfg.seed == 2 and cfg.tracking.variant == "A-heads1"
    json_form = expand_variant(["model.heads=8", 'variant={"name": "A-heads1", "model.heads": 1}'])
    assert load_config(None, json_form).model.heads == 1
    assert expand_variant(["comparisons=[{'between': 'model.heads'}]", "seed=2"]) == ["seed=2"]  # about the sweep
    with pytest.raises(SweepError, match="variant"):
        expand_variant(["variant={'model.heads': 1}"])


def _corpus(folder: Path) -> Path:
    from ablate.data import builtin

    folder.mkdir(parents=True)
    for split, n in (("train", 300), ("val", 20), ("test", 20)):
        pairs = list(builtin.generate("train" if split == "train" else "val", n))
        (folder / f"{split}.en").write_text("\n".join(en for en, _ in pairs) + "\n")
        (folder / f"{split}.de").write_text("\n".join(de for _, de in pairs) + "\n")
    return folder


@pytest.mark.slow
def test_plain_wandb_agent_runs_ablate_train(tmp_path, cache_dir):
    """The command ``wandb agent`` builds from a sweep file, run for real: ``python -m ablate
    train`` trains the variant, in the agent's W&B run, with the resolved config recorded."""
    config = {
        "name": "tiny",
        "method": "grid",
        "command": SWEEP_COMMAND,
        "metric": {"name": "val/bleu", "goal": "maximize"},
        "parameters": {
            "variant": {"values": ["base", {"name": "A-heads1", "model.heads": 1}]},
            **tiny_parameters(),
            "data.source": {"value": str(_corpus(tmp_path / "corpus"))},
            "train.max_steps": {"value": 5},
            "train.max_tokens": {"value": 1024},
            "eval.beam": {"value": 1},
            "eval.max_len_a": {"value": 1.0},
            "eval.max_len_b": {"value": 2},
        },
    }
    args = proposal(config, "A-heads1")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(
        agent_env(tmp_path, "sw9", "runabc", args), WANDB_MODE="offline", WANDB_SILENT="true", PYTHONPATH=str(ROOT)
    )
    proc = subprocess.run(
        agent_command(config["command"], args),
        env=python_on_path(env),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    run_dir = tmp_path / "runs" / "sweep-sw9" / "A-heads1-runabc"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["config"]["model"]["heads"] == 1
    run = read_run(offline_runs(run_dir)[0])
    assert run.id == "runabc" and run.config["model.heads"] == 1 and run.config["tracking.variant"] == "A-heads1"
    assert any(a.type == "hypotheses" for a in run.artifacts)


def test_plain_wandb_agent_imports_nothing_planted_in_its_working_directory(tmp_path):
    """Plain ``wandb agent`` runs the file's ``command:`` (``python -m ablate train ...``) without PYTHONSAFEPATH,
    so ``-m`` put the working directory first on ``sys.path`` and a planted ``typer.py``/``yaml.py`` ran."""
    marker = tmp_path / "marker"
    for name in ("yaml", "typer", "rich", "click", "torch", "numpy"):
        (tmp_path / f"{name}.py").write_text(f"open({str(marker)!r}, 'a').write('{name} ')\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONSAFEPATH", "PYTHONPATH")}
    argv = agent_command(SWEEP_COMMAND, {}) + ["--help"]
    proc = subprocess.run(argv, env=python_on_path(dict(env, PYTHONPATH=str(ROOT))), cwd=tmp_path, capture_output=True)
    assert not marker.exists(), f"planted modules ran: {marker.read_text()}"
    assert proc.returncode == 0 and b"Usage" in proc.stdout, proc.stderr[-2000:]
