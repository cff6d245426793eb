"""End-to-end training runs on tiny data: the record, the hypotheses, W&B, resume, DDP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import sacrebleu

from ablate.config import load_config
from ablate.training.train import train

from tests.helpers.tiny import EVAL_PAIRS, tiny
from tests.helpers.wandb_offline import read_offline_run

ROOT = Path(__file__).resolve().parents[2]
TINY = tiny(
    "train.max_steps=40",
    "train.max_tokens=1024",
    "train.warmup=10",
    "train.lr=3e-3",
    "eval.beam=2",
    "tracking.wandb=offline",
    "tracking.log_every=5",
    pairs=400,
    eval_pairs=EVAL_PAIRS,
)


def wandb_logged(run_dir: Path) -> dict:
    """Keys logged to the offline W&B run's history (read from its record file)."""
    files = list(run_dir.glob("wandb/offline-run-*/run-*.wandb"))
    assert len(files) == 1, f"expected one offline W&B run under {run_dir}/wandb, found {files}"
    return read_offline_run(files[0])["history"]


def test_tiny_run_end_to_end(tmp_path, cache_dir):
    run_dir = tmp_path / "run"
    summary = train(load_config(None, TINY), run_dir)
    assert summary["status"] == "finished" and summary["step"] == 40
    for key in ("val/bleu", "val/ppl", "test/bleu", "test_test/bleu", "train/tokens_per_sec", "params"):
        assert summary[key] is not None and summary[key] == summary[key], key
    assert summary["train/tokens_per_sec"] > 0 and summary["accelerator"] == "cpu"
    assert summary["precision"] == "32-true"  # train.precision=auto, resolved on a CPU
    assert summary["train/cpu_seconds"] > 0 and summary["train/tokens_per_cpu_sec"] > 0  # CPU time of the timed steps

    on_disk = json.loads((run_dir / "summary.json").read_text())
    assert on_disk["status"] == "finished" and on_disk["config"]["model"]["d_model"] == 32
    hyps = (run_dir / "hyps" / "test.txt").read_text().splitlines()
    refs = (run_dir / "refs" / "test.txt").read_text().splitlines()
    assert len(hyps) == len(refs) == EVAL_PAIRS
    # The recorded BLEU is sacreBLEU's on the saved hypotheses.
    assert summary["test/bleu"] == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score, abs=1e-6)
    assert (run_dir / "checkpoints" / "last.ckpt").exists()

    logged = wandb_logged(run_dir)
    for key in ("val/bleu", "test_test/bleu", "train/tokens_per_sec", "train/tokens_per_cpu_sec"):
        assert key in logged, key
    assert "test/bleu" not in logged  # W&B holds each test score once, per split

    # Running the same command again trains nothing.
    again = train(load_config(None, TINY), run_dir)
    assert again["step"] == 40 and again["status"] == "finished"


@pytest.mark.slow
def test_a_time_budget_records_the_steps_it_bought_and_the_threads(tmp_path, cache_dir):
    """Under ``train.max_time`` the machine's load decides the steps: the summary says how many."""
    import torch

    budget = ["train.max_steps=-1", "train.max_epochs=null", "train.max_time=2", "tracking.wandb=disabled"]
    summary = train(load_config(None, [*TINY, *budget]), tmp_path / "run")
    trained = torch.load(tmp_path / "run" / "checkpoints" / "last.ckpt", weights_only=False)["global_step"]
    assert summary["status"] == "finished" and summary["step"] == trained > 0
    assert summary["threads"] == torch.get_num_threads()


def test_train_threads_hold_for_the_run_only(tmp_path, cache_dir):
    """train.threads set torch's threads for the rest of the process: a notebook's next run, whose train.threads=0
    keeps torch's default, trained and recorded the first run's (measured: 1 of 2)."""
    import torch

    before = torch.get_num_threads()
    threads = 1 if before != 1 else 2
    overrides = tiny(
        "train.max_steps=2", "eval.beam=1", "tracking.wandb=disabled", f"train.threads={threads}", eval_pairs=10
    )
    summary = train(load_config(None, overrides), tmp_path / "run")
    assert summary["threads"] == threads and torch.get_num_threads() == before


def test_run_dir_of_another_config_is_refused(tmp_path, cache_dir):
    from ablate.config import ConfigError

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text("model:\n  d_model: 64\n")
    with pytest.raises(ConfigError, match="different config"):
        train(load_config(None, TINY), run_dir)


@pytest.mark.parametrize(
    "option, says",
    [
        ("trainer.strategy=bogus", "invalid strategy name"),
        ("trainer.strategy=fsdp", "requires a GPU accelerator"),
        ("trainer.gradient_clip_algorithm=bogus", "Allowed algorithms"),
        ("trainer.limit_train_batches=-1", "invalid value -1 for limit_train_batches"),
    ],
)
def test_a_trainer_option_lightning_refuses_is_one_line(tmp_path, option, says):
    """Lightning's own ValueError / MisconfigurationException for a ``trainer.*`` value reached the user as a
    traceback after the data and model were built; it is a ConfigError naming the options now."""
    from ablate.config import ConfigError
    from ablate.training.trainer import make_trainer

    cfg = load_config(None, [option])
    with pytest.raises(ConfigError, match=f"^Lightning's Trainer refused {option.split('=')[0]}") as err:
        make_trainer(cfg, tmp_path, [], "cpu", "32-true", [])
    assert says in str(err.value) and "\n" not in str(err.value)


def test_several_nodes_without_a_multi_node_launch_are_refused_before_any_work(monkeypatch):
    """``train.nodes=2`` on one machine, started by hand, printed 'Initializing distributed: GLOBAL_RANK: 0,
    MEMBER: 1/2' and waited for a second node no one starts (torch's rendezvous: 30 minutes); now one line. Under
    SLURM, torchrun or by hand (MASTER_ADDR / NODE_RANK set on each machine) it goes on to Lightning."""
    from ablate.config import ConfigError
    from ablate.training.trainer import MULTI_NODE_ENV, check_devices

    for name in MULTI_NODE_ENV:
        monkeypatch.delenv(name, raising=False)
    check_devices(load_config(None, ["train.accelerator=cpu"]))
    two = load_config(None, ["train.nodes=2", "train.accelerator=cpu"])
    with pytest.raises(ConfigError, match=r"^train.nodes=2 needs a launch on 2 machines \(.*\); on one machine"):
        check_devices(two)
    monkeypatch.setenv("NODE_RANK", "1")
    check_devices(two)


@pytest.mark.parametrize("accelerator", ["cpu", "auto"])
def test_fp16_autocast_on_the_cpu_is_refused_not_swapped_for_bf16(accelerator, monkeypatch):
    """``train.precision=16-mixed`` on the CPU: Lightning printed its own warning (a path into site-packages, then
    'Using precision='bf16-mixed' instead') and trained in bf16, under a config that says fp16; now one line."""
    from ablate.config import ConfigError
    from ablate.training.trainer import check_devices

    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    cfg = load_config(None, [f"train.accelerator={accelerator}", "train.precision=16-mixed"])
    with pytest.raises(ConfigError, match=r"^train.precision=16-mixed .* needs a GPU; on the CPU use .*bf16-mixed"):
        check_devices(cfg)
    check_devices(load_config(None, [f"train.accelerator={accelerator}", "train.precision=bf16-mixed"]))


def _cli(*args: str, cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "WANDB_MODE": "offline", "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_cli_bad_key_is_one_line(tmp_path):
    proc = _cli("train", "model.head=4", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: unknown config key 'model.head'; did you mean 'model.heads'?"


@pytest.mark.slow
def test_ddp_two_processes_on_cpu(tmp_path, cache_dir):
    """train.devices=2: one summary, one W&B run, every test sentence decoded exactly once."""
    run_dir = tmp_path / "ddp"
    proc = _cli("train", "--run-dir", str(run_dir), *TINY, "train.devices=2", "train.accelerator=cpu", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "finished"
    assert len(list(run_dir.glob("wandb/offline-run-*"))) == 1
    hyps = (run_dir / "hyps" / "test.txt").read_text().splitlines()
    refs = (run_dir / "refs" / "test.txt").read_text().splitlines()
    assert len(hyps) == len(refs) == EVAL_PAIRS
    assert summary["test/bleu"] == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score, abs=1e-6)
    # the tokens of both ranks: one rank's 40 steps hold at most 40 x (1,024 source + 1,024 target)
    assert summary["train/tokens"] > 40 * 2 * 1024 and summary["train/tokens_per_sec"] > 0
    # status on stderr, said once (global rank zero only), the result line on stdout
    said = [line for line in proc.stderr.splitlines() if line.startswith(("run dir: ", "W&B offline: "))]
    assert [line.split(":")[0] for line in said] == ["run dir", "W&B offline"], proc.stderr[-3000:]
    assert proc.stdout.count("test BLEU ") == 1 and "run dir: " not in proc.stdout


def test_learned_positions_shorter_than_data_max_len_are_refused_before_training(tmp_path, cache_dir):
    """A sentence of data.max_len subwords must fit the learned positions: else the run failed at the first long
    batch (or, where training sentences are short, at the validation or test decoding after training)."""
    from ablate.config import ConfigError

    cfg = load_config(None, [*TINY, "model.positions=learned", "model.max_positions=32"])
    with pytest.raises(
        ConfigError,
        match=r"model.max_positions=32 positions sentences of up to 31 subwords, fewer "
        r"than the data.max_len=128 this run keeps: raise model.max_positions to 129 or lower "
        r"data.max_len to 31",
    ):
        train(cfg, tmp_path / "run")
    assert not (tmp_path / "run" / "checkpoints").exists()
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["status"] == "failed"
    fits = load_config(None, [*TINY, "model.positions=learned", "model.max_positions=32", "data.max_len=31"])
    assert train(fits, tmp_path / "short")["status"] == "finished"


def test_an_rnn_run_names_the_transformer_keys_it_does_not_read(tmp_path):
    """``model.arch=rnn model.heads=8 model.positions=rotary`` trained an RNN and said nothing of the two keys."""
    from tests.helpers.cli import invoke_cli

    argv = tiny("model.arch=rnn", "model.rnn.hidden=16", "model.heads=8", "model.positions=rotary", "train.max_steps=1")
    proc = invoke_cli("train", "--run-dir", str(tmp_path / "rnn"), *argv, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (line,) = [x for x in proc.stderr.splitlines() if "model.arch=rnn does not read" in x]
    assert "model.heads=8" in line and "model.positions=rotary" in line and "model.rnn.hidden" not in line
    assert line.endswith(": they change nothing in this run")
    assert line.removeprefix("warning: ") in (tmp_path / "rnn" / "console.log").read_text()  # the run records it


def test_under_slurm_lightning_arms_no_requeue_of_its_own(tmp_path, monkeypatch):
    """Under SLURM Lightning's SLURMEnvironment armed its own auto-requeue beside the job's (SIGUSR2, in
    ablate.sweep.slurm): a SIGUSR1 wrote hpc_ckpt_*.ckpt into the run folder and ran `scontrol requeue`, and each
    fit/validate/test logged 'SLURM auto-requeueing enabled'. The job's requeue is the only one now."""
    import signal

    from lightning_fabric.plugins.environments import SLURMEnvironment

    from ablate.training.trainer import make_trainer

    env = {"SLURM_NTASKS": "1", "SLURM_JOB_NAME": "trial", "SLURM_JOB_ID": "7", "SLURM_PROCID": "0"}
    for name, value in {**env, "SLURM_LOCALID": "0", "SLURM_NODEID": "0"}.items():
        monkeypatch.setenv(name, value)
    trainer = make_trainer(load_config(None, TINY), tmp_path, [], "cpu", "32-true", [])
    environment = trainer._accelerator_connector.cluster_environment
    assert isinstance(environment, SLURMEnvironment) and not environment.auto_requeue
    before = signal.getsignal(signal.SIGUSR1)
    trainer._signal_connector.register_signal_handlers()
    try:
        assert signal.getsignal(signal.SIGUSR1) is before
    finally:
        trainer._signal_connector.teardown()


def test_a_wandb_failure_while_the_run_ends_does_not_say_training_goes_on(tmp_path, caplog, monkeypatch):
    """SLURM's scancel stops W&B's service with the trainer; finishing the interrupted run's W&B run then warned
    'W&B logging failed, training goes on: Connection lost' above 'error: interrupted': training had stopped."""
    from types import SimpleNamespace

    import wandb

    from ablate.training.tracking import _resilient_logger_class
    from ablate.training.train import _end_wandb

    def lost(**kwargs):
        raise ConnectionResetError("Connection lost")

    logger = _resilient_logger_class()(save_dir=str(tmp_path), offline=True)
    logger._experiment = SimpleNamespace(finish=lost)
    monkeypatch.setattr(wandb, "teardown", lost)
    _end_wandb(SimpleNamespace(logger=logger))
    said = [r.getMessage() for r in caplog.records if "W&B" in r.getMessage()]
    assert said == ["W&B logging failed as the run ended (summary.json has its record): Connection lost"]


def test_a_loss_that_blows_up_without_a_nan_warns_once(tmp_path, cache_dir, caplog):
    """lr 10: the logged loss reached 1827 (ln V = 5.7, a fresh model's ~6.3) and the run trained on to its
    budget without a word; now the first logged loss over twice ln V (what guessing uniformly over the target
    vocabulary scores) warns, once."""
    overrides = tiny(
        *("train.max_steps=10", "train.lr=10", "train.warmup=1", "tracking.log_every=5", "train.val_every=1000"),
        *("eval.beam=1", "eval.max_len_b=2", "tracking.wandb=disabled"),
        eval_pairs=5,
    )
    with caplog.at_level("WARNING"):
        summary = train(load_config(None, overrides), tmp_path / "run")
    assert summary["status"] == "finished"
    said = [r.getMessage() for r in caplog.records if "diverg" in r.getMessage()]
    assert len(said) == 1 and "train.lr" in said[0] and "\n" not in said[0], said
