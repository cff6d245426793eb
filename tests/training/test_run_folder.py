"""The run folder as ``ablate train --overwrite`` treats it: only a run's own files are deleted."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.cli import assert_one_error_line, invoke_cli
from tests.helpers.tiny import tiny_checkpointing


def test_overwrite_refuses_a_folder_that_holds_more_than_a_run(tmp_path):
    """``--run-dir`` pointed at a corpus or a project by mistake: --overwrite deleted every file in it."""
    folder = tmp_path / "corpus"
    (folder / "sub").mkdir(parents=True)
    (folder / "train.en").write_text("precious\n")
    (folder / "config.yaml").write_text("seed: 1\n")  # a user's own config beside their data
    before = sorted(p.relative_to(folder) for p in folder.rglob("*"))
    proc = invoke_cli(
        "train", "--run-dir", str(folder), "--overwrite", *tiny_checkpointing("train.max_steps=2"), cwd=tmp_path
    )
    assert_one_error_line(proc, f"{folder} also holds sub, train.en (not written by a run)")
    assert sorted(p.relative_to(folder) for p in folder.rglob("*")) == before  # not even a lock or console.log


def test_overwrite_accepts_a_folder_of_run_files(tmp_path):
    from ablate.training.run_folder import RUN_ENTRIES, check_overwrite

    for name in [*RUN_ENTRIES, ".lock", ".fault-kill-5", ".summary.json.x1.tmp"]:
        (tmp_path / name).write_text("")
    check_overwrite(tmp_path)
    check_overwrite(tmp_path / "missing")


def test_overwrite_keeps_the_new_runs_console_log(tmp_path):
    """--overwrite deleted console.log after the run had opened it: the new run's status lines went nowhere."""
    run = tmp_path / "run"
    args = ("train", "--run-dir", str(run), *tiny_checkpointing("train.max_steps=2"))
    assert invoke_cli(*args, cwd=tmp_path).returncode == 0
    proc = invoke_cli(*args, "--overwrite", "seed=2", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    log = (run / "console.log").read_text()
    assert log.count("run dir:") == 1 and "(new;" in log  # this run's lines, none of the deleted run's


@pytest.mark.parametrize(
    "option",
    [
        "trainer.enable_progress_bar=false",
        "trainer.enable_model_summary=false",
        "trainer.profiler=simple",
        "train.num_workers=2",
        "train.threads=1",
        "data.cache_dir=elsewhere",
        "train.devices=2",  # a resource: allowed, with device_change()'s warning, though it names its own folder
    ],
)
def test_a_display_only_trainer_option_does_not_block_a_resume(tmp_path, option):
    """Turning the progress bar off for the rest of an interrupted run was refused as 'a run of a different config';
    like ``tracking.*`` and ``train.devices``, what only changes the console (or the loader, threads, cache folder:
    what tables ignore) does not make another run."""
    from ablate.config import ConfigError, load_config
    from ablate.training.run_folder import RunRecord, claim_run_dir, prepare_run_dir

    run = tmp_path / "run"
    cfg = load_config(None, ["train.max_steps=20"])
    claim_run_dir(cfg, run)
    RunRecord(run, cfg).write("interrupted")
    (run / "checkpoints").mkdir()
    (run / "checkpoints" / "last.ckpt").write_bytes(b"")
    assert prepare_run_dir(load_config(None, ["train.max_steps=20", option]), run) == "resume"
    with pytest.raises(ConfigError, match="a run of a different config"):  # a Trainer option that changes training
        prepare_run_dir(load_config(None, ["train.max_steps=20", "trainer.deterministic=true"]), run)


def test_a_sweeps_folder_is_not_made_a_run(tmp_path):
    """``ablate train --run-dir runs/quickstart`` (the sweep's folder, not a trial's) trained into it: config.yaml,
    summary.json, checkpoints/ and tokenizer/ among the trials' folders and sweep.json; refused in one line now,
    before anything is written there."""
    sweep = tmp_path / "quickstart"
    (sweep / "seed=1").mkdir(parents=True)
    (sweep / "sweep.json").write_text("{}")
    proc = invoke_cli("train", "--run-dir", str(sweep), *tiny_checkpointing("train.max_steps=2"), cwd=tmp_path)
    assert_one_error_line(proc, f"run dir {sweep} is a sweep's folder (it holds sweep.json); a trial's folder is")
    assert sorted(p.name for p in sweep.iterdir()) == ["seed=1", "sweep.json"]


def test_a_folder_holding_lightnings_slurm_checkpoint_is_refused(tmp_path, monkeypatch):
    """Under SLURM, Lightning's ``fit(ckpt_path=None)`` resumes from the run folder's ``hpc_ckpt_<n>.ckpt`` (its own
    requeue's, which ablate turns off): a received folder holding one trained on from its weights and step instead
    of starting over. Refused in one line before anything is written."""
    from ablate.training.run_folder import check_run_dir
    from ablate.utils.typed import ConfigError

    (tmp_path / "hpc_ckpt_3.ckpt").write_bytes(b"planted")
    monkeypatch.setenv("SLURM_NTASKS", "1")
    with pytest.raises(ConfigError, match=r"holds hpc_ckpt_3.ckpt, Lightning's SLURM checkpoint.*delete it$"):
        check_run_dir(tmp_path, overwrite=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hpc_ckpt_3.ckpt"]


def test_a_run_on_several_devices_has_its_own_default_folder():
    """``train.max_tokens`` is per device, so ``train.devices=2`` trains on twice the batch, yet it went to the
    default folder of the same config on one device: after a one-device run, ``ablate train ... train.devices=2``
    said 'run already finished' about that run (and --overwrite would have deleted it). A count other than 1 now
    enters the fingerprint; one device hashes as it did (every existing run keeps its folder)."""
    from ablate.config import fingerprint, load_config
    from ablate.training.run_folder import default_run_dir

    one = load_config(None, ["model.heads=8"])
    assert fingerprint(one) == fingerprint(one, resume=True)  # the rule before: devices left out
    folders = {default_run_dir(load_config(None, ["model.heads=8", f"train.devices={n}"])) for n in (1, 2, "auto")}
    assert default_run_dir(one) in folders and len(folders) == 3


@pytest.mark.parametrize("variant", ["../../outside", "attn/additive"])
def test_a_w_and_b_agent_run_of_a_variant_that_is_not_a_folder_name_is_refused(monkeypatch, variant):
    """Under plain ``wandb agent`` (no ablate check of the sweep file) the run folder is
    ``runs/sweep-<id>/<variant>-<run id>``: variant '../../outside' trained into ``./outside-r1``, outside ``runs/``,
    and 'attn/additive' into a nested ``runs/sweep-abc/attn/additive-r1``."""
    from ablate.config import ConfigError, load_config
    from ablate.sweep.spec import expand_variant
    from ablate.training.run_folder import default_run_dir

    monkeypatch.setenv("WANDB_SWEEP_ID", "abc")
    monkeypatch.setenv("WANDB_RUN_ID", "r1")
    cfg = load_config(None, expand_variant([f"variant={{'name': '{variant}', 'model.heads': 1}}"]))
    with pytest.raises(ConfigError, match=rf"^tracking.variant '{variant}' is not one folder name.*--run-dir$"):
        default_run_dir(cfg)
    assert default_run_dir(load_config(None, ["tracking.variant=attn-additive"])) == Path(
        "runs/sweep-abc/attn-additive-r1"
    )


@pytest.mark.parametrize("name", ["..", ".", "a/b", "../elsewhere"])
def test_a_run_name_that_is_not_one_folder_name_is_refused(tmp_path, name):
    """``tracking.name=..`` made the default run folder ``runs/..`` (the working directory: a run's files among the
    user's), ``a/b`` a nested one; the default folder is ``runs/<name>``, so a name must be one folder name."""
    work = tmp_path / "work"
    work.mkdir()
    proc = invoke_cli("train", *tiny_checkpointing("train.max_steps=2", f"tracking.name={name}"), cwd=work)
    assert_one_error_line(proc, f"tracking.name '{name}' is not one folder name")
    assert sorted(p.name for p in work.rglob("*")) == []


def test_a_resume_on_another_number_of_devices_says_the_batch_changes(tmp_path):
    """``train.max_tokens`` is per device, so a DDP run (``train.devices=2``) resumed with ``train.devices=1`` trains
    the rest of its steps on half the tokens per step; the resume is allowed (the device count is a resource) but
    said nothing. Measured: 2 CPU processes killed at step 12, resumed on 1: rc 0, no word of it."""
    from ablate.config import load_config
    from ablate.training.run_folder import RunRecord, claim_run_dir, device_change

    run = tmp_path / "run"
    ddp = load_config(None, ["train.max_steps=20", "train.devices=2", "train.accelerator=cpu"])
    claim_run_dir(ddp, run)
    RunRecord(run, ddp).write("interrupted")
    one = load_config(None, ["train.max_steps=20", "train.devices=1", "train.accelerator=cpu"])
    assert device_change(one, run) == (
        "train.devices=1 resumes a run last trained with train.devices=2: train.max_tokens is per device, so each "
        "step from here holds 1 x train.max_tokens tokens instead of 2 x (resume with train.devices=2 to keep it)"
    )
    assert device_change(ddp, run) is None
    RunRecord(run, one).write("interrupted")  # the last attempt's devices count, not the first's
    assert device_change(one, run) is None
    assert device_change(ddp, run).startswith("train.devices=2 resumes a run last trained with train.devices=1")
    auto = load_config(None, ["train.max_steps=20", "train.devices=auto", "train.accelerator=cpu"])
    assert device_change(auto, run) is None  # "auto": the count is the machine's, unknown here


def test_a_run_folder_whose_entry_links_out_of_it_is_refused_never_written_through(tmp_path):
    """A received run folder whose ``hyps`` is a link to a folder of the user's: training (or resuming) it wrote the
    run's hypotheses over the user's ``test.txt`` and ``val.txt`` there."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "test.txt").write_text("my thesis\n")
    run = tmp_path / "theirs"
    run.mkdir()
    (run / "hyps").symlink_to(mine)
    proc = invoke_cli("train", "--run-dir", str(run), *tiny_checkpointing("train.max_steps=2"), cwd=tmp_path)
    assert_one_error_line(proc, f"{run / 'hyps'} is a link to {mine}, outside the run folder")
    assert (mine / "test.txt").read_text() == "my thesis\n" and sorted(p.name for p in mine.iterdir()) == ["test.txt"]
