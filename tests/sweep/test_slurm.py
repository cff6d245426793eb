"""SLURM sweeps through submitit, against a real one-node SLURM cluster started on localhost.

The cluster tests need Debian's ``slurm-wlm`` and ``munge`` and root (``.ci/run`` installs them);
where SLURM cannot start they are skipped with the reason. The option parsing tests always run.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from rich.console import Console
from typer.testing import CliRunner

from ablate.sweep import commands
from ablate.sweep.commands import app
from ablate.sweep.local import ExecutorArgs
from ablate.sweep.slurm import SlurmExecutor, parse_time
from ablate.sweep.spec import SweepError

from tests.helpers.slurm_cluster import LocalSlurm, unavailable
from tests.helpers.sweep import one_seed
from tests.helpers.tiny import EVAL_PAIRS, tiny_sweep_yaml

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "text, minutes",
    [("30", 30), ("01:30:00", 90), ("00:00:30", 1), ("2-00:00:00", 2880), ("1-12", 2160), ("45:30", 46)],
)
def test_slurm_time_formats(text, minutes):
    assert parse_time(text) == minutes


@pytest.mark.parametrize("text", ["0", "00:00:00", "0-0", "0:00"])
def test_a_zero_time_is_no_limit_as_slurm_reads_it(tmp_path, text):
    """``man sbatch``: "A time limit of zero requests that no time limit be imposed"; ablate read it as 1 minute
    (and then refused the default --signal-delay 120 as not below it)."""
    assert parse_time(text) == 0
    slurm = SlurmExecutor(ExecutorArgs(time=text), tmp_path)
    assert slurm.minutes == 0 and slurm.describe().endswith("no time limit")


@pytest.mark.parametrize(
    "item, option",
    [("time=20", "--time"), ("signal=USR1@5", "--signal-delay"), ("partition=gpu", "--partition"),
     ("cpus-per-task=4", "--cpus-per-trial"), ("mem=8G", "--mem"), ("nodes=2", "--nodes-per-trial")],
)  # fmt: skip
def test_a_slurm_arg_that_replaces_an_option_ablate_sets_is_refused(tmp_path, item, option):
    """``--slurm-arg signal=USR1@5`` replaced the USR2 signal the trials checkpoint and requeue on, and ``time=20``
    the --time the signal delay was checked against, without a word (submitit writes the last value given)."""
    with pytest.raises(SweepError, match=rf"^--slurm-arg {item}: ablate sets it; use {option}"):
        SlurmExecutor(ExecutorArgs(slurm_args=(item,)), tmp_path)


@pytest.mark.parametrize("mem", ["abc", "8 GB", "-1G", "1.5G"])
def test_a_malformed_mem_is_one_line_before_anything_is_submitted(tmp_path, mem):
    with pytest.raises(SweepError, match=rf"^--mem '{mem}': use a size in megabytes or with K, M, G or T"):
        SlurmExecutor(ExecutorArgs(mem=mem), tmp_path)
    assert SlurmExecutor(ExecutorArgs(mem="32G"), tmp_path).args.mem == "32G"


def test_bad_time_is_one_line():
    with pytest.raises(SweepError, match="--time 'soon'"):
        parse_time("soon")


def test_job_shape_reaches_the_trainer(tmp_path):
    assert SlurmExecutor(ExecutorArgs(gpus_per_trial=4, nodes_per_trial=2), tmp_path).trainer_overrides() == [
        "train.accelerator=gpu",
        "train.devices=4",
        "train.nodes=2",
    ]
    assert SlurmExecutor(ExecutorArgs(cpus_per_trial=3), tmp_path).trainer_overrides() == [
        "train.accelerator=cpu",
        "train.devices=1",
        "train.nodes=1",
        "train.threads=3",
    ]


def test_packing_refuses_fewer_than_one_trial_per_job_by_its_own_option(tmp_path):
    """The message named --max-concurrent too, which the packed sweep does not check (SlurmExecutor does)."""
    from ablate.sweep.slurm import PackedSweep

    with pytest.raises(SweepError, match=r"^--trials-per-job must be >= 1$"):
        PackedSweep(None, None, SlurmExecutor(ExecutorArgs(), tmp_path), 0)  # type: ignore[arg-type]


@pytest.mark.parametrize("time_limit", ["00:01:00", "2", "0:30"])
def test_a_signal_delay_not_below_the_time_limit_is_refused(tmp_path, time_limit):
    # every job was signalled as it started: under --time 00:01:00 (or 0:30, rounded up to 1 minute) and the default
    # --signal-delay 120, a job checkpointed and requeued every 20-40 s until max_num_timeout ran out
    with pytest.raises(SweepError, match=rf"^--signal-delay 120 is not below --time {time_limit} "):
        SlurmExecutor(ExecutorArgs(time=time_limit), tmp_path)
    assert SlurmExecutor(ExecutorArgs(time=time_limit, signal_delay_s=30), tmp_path).minutes >= 1


def test_unknown_launcher_and_bad_slurm_arg_are_one_line(tmp_path):
    runner = CliRunner()
    bad = runner.invoke(app, ["run", str(ROOT / "sweeps" / "quickstart.yaml"), "--launcher", "pbs"])
    assert bad.exit_code == 2 and "--launcher 'pbs': choose one of local, slurm, ray" in bad.output
    typo = runner.invoke(app, ["run", str(ROOT / "sweeps" / "quickstart.yaml"), "--launcher", "slrum"])
    assert typo.exit_code == 2 and "did you mean 'slurm'?" in typo.output and len(typo.output.splitlines()) == 1
    bad = runner.invoke(
        app,
        [
            "run",
            str(ROOT / "sweeps" / "quickstart.yaml"),
            "--launcher",
            "slurm",
            "--slurm-arg",
            "account",
            "--out",
            str(tmp_path / "x"),
        ],
    )
    assert bad.exit_code == 2 and "--slurm-arg 'account': use KEY=VALUE" in bad.output


@pytest.mark.parametrize("code, lost", [("import os, signal; os.kill(os.getpid(), 9)", True), ("exit(3)", False)])
def test_a_trainer_killed_inside_its_job_is_relaunched_as_a_local_one_is(tmp_path, monkeypatch, code, lost):
    """A trainer killed by a signal inside its SLURM job (the OOM killer, ``kill -9``) failed its trial for good, the
    reason the log's last line, "SLURM auto-requeueing enabled. Setting signal handlers. [exit code 1]"; a local or
    Ray trial killed so is relaunched and resumes from its checkpoint. A trainer that fails by itself still fails."""
    from ablate.sweep import slurm
    from ablate.sweep.state import Trial, outcome

    run_dir = tmp_path / "out" / "t"
    argv = [sys.executable, "-c", f"print('SLURM auto-requeueing enabled. Setting signal handlers.'); {code}"]
    with pytest.raises(RuntimeError, match="trainer exited"):
        slurm.TrialJob(argv, run_dir)()
    monkeypatch.setattr(slurm, "job_states", lambda ids: {"7": "FAILED"})
    monkeypatch.setattr(slurm, "REQUEUE_GRACE_S", 0.0)
    executor = SlurmExecutor(ExecutorArgs(name="s"), tmp_path / "out")
    ((handle, exit),) = executor.poll([executor.adopt(Trial("t", {}, job_id="7", job_state="RUNNING"), print)]).ended
    assert exit.lost is lost and ("trainer killed by SIGKILL (out of memory?) in SLURM job" in exit.reason) is lost
    if lost:
        reason = outcome(run_dir, exit.code, None).error
        assert "trainer killed by SIGKILL" in reason and "auto-requeueing" not in reason, reason


def test_a_requeued_trials_log_says_slurm_runs_it_again(tmp_path):
    """The trainer stopped for a requeue (SIGUSR2) ends its block of trial.log with 'interrupted; run the same
    command again to resume', and the log said nothing more, though SLURM reruns the job by itself."""
    from ablate.sweep.slurm import TrialJob

    trainer = "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: sys.exit(print('error: interrupted; "
    trainer += "run the same command again to resume') or 130)); print('training', flush=True); time.sleep(60)"
    job, log = TrialJob([sys.executable, "-c", trainer], tmp_path / "trial"), tmp_path / "trial" / "trial.log"
    thread = threading.Thread(target=lambda: pytest.raises(RuntimeError, job))
    thread.start()
    deadline = time.monotonic() + 60
    while not (log.exists() and "training" in log.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    job.checkpoint()
    thread.join()
    lines = log.read_text().splitlines()
    assert lines[-2:] == [
        "error: interrupted; run the same command again to resume",
        "requeued: SLURM runs this job again and it resumes from its checkpoint (nothing to run by hand)",
    ], lines


# ------------------------------------------------------------------ against a real cluster
@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    slurm = LocalSlurm(tmp_path_factory.mktemp("slurm")).start()
    yield slurm
    slurm.stop()


FAST = [
    "tracking.wandb=disabled",
    "train.max_time=3",
    "data.builtin_pairs=400",
    f"data.builtin_eval_pairs={EVAL_PAIRS}",
    "data.vocab_size=300",
    "eval.beam=1",
    "eval.max_len_b=3",
    "train.checkpoint_every=20",
]


@pytest.mark.slow
def test_quickstart_sweep_completes_through_slurm(cluster, tmp_path, cache_dir, monkeypatch):
    """sweeps/quickstart.yaml (one seed, budget shortened) as 4 SLURM jobs, 2 at a time; then `ablate table`."""
    monkeypatch.setattr(commands, "console", Console(width=250))
    out = tmp_path / "quickstart"
    args = [
        "run",
        str(one_seed(ROOT / "sweeps" / "quickstart.yaml", tmp_path)),
        "--launcher",
        "slurm",
        "--out",
        str(out),
        "--max-concurrent",
        "2",
        "--cpus-per-trial",
        "1",
        "--time",
        "00:20:00",
        *FAST,
    ]
    monkeypatch.setattr("ablate.sweep.slurm.POLL_S", 1.0)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output + cluster.log()
    state = json.loads((out / "sweep.json").read_text())
    assert len(state["trials"]) == 4
    jobs = set()
    for trial in state["trials"]:
        assert trial["status"] == "finished", (trial, (out / trial["name"] / "trial.log").read_text()[-2000:])
        assert trial["job_id"] and trial["job_state"] in ("COMPLETED", "GONE")
        jobs.add(trial["job_id"])
        run = out / trial["name"]
        summary = json.loads((run / "summary.json").read_text())  # the local launcher's layout
        assert summary["status"] == "finished" and trial["metric"] == summary["val/bleu"]
        assert summary["config"]["tracking"]["name"] == trial["name"]
        assert len((run / "hyps" / "test.txt").read_text().splitlines()) == EVAL_PAIRS
    assert len(jobs) == 4
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0 and "nothing to train: all 4 trials of quickstart are done" in again.output

    from ablate.cli import app as main_app

    table = CliRunner().invoke(main_app, ["table", str(out), "--format", "md"])
    assert table.exit_code == 0, table.output
    variants = yaml.safe_load((ROOT / "sweeps" / "quickstart.yaml").read_text())["parameters"]["variant"]["values"]
    for variant in variants:
        assert (variant if isinstance(variant, str) else variant["name"]) in table.output
    status = CliRunner().invoke(app, ["status", str(out)])
    assert status.exit_code == 0 and "SLURM job" in status.output and "completed" in status.output


REQUEUE_SWEEP = (
    """\
# one trial, long enough to be preempted half-way
method: grid
parameters:
  seed: {values: [1]}
  data.builtin_pairs: {value: 800}
"""
    + tiny_sweep_yaml()
    + """\
  train.max_steps: {value: 500}
  train.max_epochs: {value: 1000}
  train.max_tokens: {value: 512}
  train.checkpoint_every: {value: 1000}
  train.val_every: {value: 100000}   # validate only at the end
  eval.beam: {value: 1}
  eval.max_len_b: {value: 3}
"""
)


def _wait(predicate, timeout: float, what: str, cluster: LocalSlurm) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}\n{cluster.log()}\n{cluster.log('slurmd')}"
        time.sleep(0.5)


@pytest.mark.slow
def test_preempted_trial_is_requeued_and_resumes_in_the_same_run(cluster, tmp_path, cache_dir):
    """SIGUSR2 (what SLURM sends before the time limit or on preemption): checkpoint, requeue, resume."""
    path = tmp_path / "requeue.yaml"
    path.write_text(REQUEUE_SWEEP)
    out = tmp_path / "out"
    argv = [
        sys.executable,  # this interpreter: the one with ablate's dependencies (a bare `python` may lack them)
        str(ROOT / "cli.py"),
        "sweep",
        "run",
        str(path),
        "--launcher",
        "slurm",
        "--out",
        str(out),
        "--cpus-per-trial",
        "2",
        "--grace",
        "60",
        "tracking.wandb=offline",
    ]
    watcher = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    trial_dir = out / "trial"  # a one-point sweep's only trial

    def state():
        try:
            return json.loads((out / "sweep.json").read_text())["trials"][0]
        except (OSError, ValueError, KeyError, IndexError):
            return {}

    def training() -> bool:  # the trainer is past its set-up: the W&B run exists and it said where it writes
        log = trial_dir / "trial.log"
        return (trial_dir / "wandb_id.txt").exists() and log.exists() and "run dir:" in log.read_text(errors="replace")

    def started() -> bool:
        assert watcher.poll() is None, watcher.communicate()[0]  # the launcher died before the trial started
        return bool(state().get("job_id")) and training()

    _wait(started, 180, "the trial to start training", cluster)
    time.sleep(4)
    job = state()["job_id"]
    run_id = (trial_dir / "wandb_id.txt").read_text().strip()
    signalled = time.monotonic()
    subprocess.run(["scancel", "--signal=USR2", job], check=True)
    _wait(lambda: (trial_dir / ".requeues").exists(), 120, "the job to checkpoint and requeue", cluster)
    # requeued once the trainer stopped at a step boundary, not at the end of --grace 60 (it used to be:
    # the job's wait on the trainer, interrupted by SIGUSR2, kept the handler's own wait from seeing the exit)
    assert time.monotonic() - signalled < 45, (trial_dir / "trial.log").read_text()[-2000:]
    # SLURM holds a requeued job until its old credential expires (cred_expire, 10 s on this cluster)
    output, _ = watcher.communicate(timeout=600)
    assert watcher.returncode == 0, output + cluster.log()

    trial = state()
    assert trial["status"] == "finished" and trial["job_id"] == job, (trial, output)
    summary = json.loads((trial_dir / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["step"] == 500
    assert (trial_dir / ".requeues").read_text() == "1"
    assert (trial_dir / "wandb_id.txt").read_text().strip() == run_id  # the same W&B run
    assert {p.name.rsplit("-", 1)[-1] for p in trial_dir.glob("wandb/offline-run-*")} == {run_id}
    log = (trial_dir / "trial.log").read_text()
    assert log.count(f"=== SLURM job {job} task 0") == 2  # ran, was requeued under the same id, ran again
    assert "resume" in log.lower()
    assert "auto-requeueing" not in log and not list(trial_dir.glob("hpc_ckpt_*"))  # the job's requeue only


def test_a_trial_name_from_a_received_sweep_json_adds_no_line_to_the_sbatch_script(tmp_path, monkeypatch):
    """``sweep.json``'s trial names are folder names (any character but ``/``): resuming a received sweep folder with
    ``--launcher slurm`` made a name holding a newline the job's name, and submitit wrote it into the sbatch script,
    where the line after it ran as a shell command in the job (``touch pwned``)."""
    from submitit.slurm.slurm import _make_sbatch_string

    from ablate.sweep import slurm
    from ablate.sweep.state import Trial

    names = []

    class Executor:
        def submit(self, job):
            return type("Submitted", (), {"job_id": "1"})()

    monkeypatch.setattr(slurm, "_need", lambda name: name)
    monkeypatch.setattr(SlurmExecutor, "submitit", lambda self, name, *shape: names.append(name) or Executor())
    SlurmExecutor(ExecutorArgs(), tmp_path).start(Trial("a\ntouch pwned\n#", {}), tmp_path / "a", lambda x: ["true"])
    script = _make_sbatch_string(command="true", folder=str(tmp_path), job_name=names[0])
    assert all(not line or line.startswith("#") for line in script.split("# command")[0].splitlines()), script


def test_a_requeue_count_planted_as_a_link_or_a_pipe_is_never_written_through_or_waited_on(tmp_path):
    """A received trial folder's ``.requeues`` linked to a file of the user's: the job's requeue wrote the count over
    that file; as a FIFO, ``ablate sweep status`` (which shows the count) waited forever to read it."""
    from ablate.sweep.slurm import TrialJob, requeues

    thesis = tmp_path / "thesis.tex"
    thesis.write_text("my thesis\n")
    (tmp_path / "trial").mkdir()
    (tmp_path / "trial" / ".requeues").symlink_to(thesis)
    TrialJob(["true"], tmp_path / "trial").checkpoint()
    assert thesis.read_text() == "my thesis\n" and requeues(tmp_path / "trial") == 1
    code = "import os, pathlib, sys; from ablate.sweep.slurm import requeues; os.mkfifo(sys.argv[1] + '/.requeues'); "
    code += "print(requeues(pathlib.Path(sys.argv[1])))"
    (tmp_path / "piped").mkdir()
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "piped")], capture_output=True, text=True, timeout=30
    )
    assert proc.stdout == "0\n", proc.stderr


@pytest.mark.skipif(sys.version_info < (3, 11), reason="Python 3.10 ignores PYTHONSAFEPATH (docs/runs.md)")
def test_a_slurm_job_imports_nothing_from_the_working_directory(cluster, tmp_path, monkeypatch):
    """submitit runs each job as ``python -u -m submitit.core._submit`` in the submission's working directory, and
    ``-m`` put that folder first on ``sys.path``: unpickling the trial's job imported a ``yaml.py`` planted there
    (the local executor's children get ``PYTHONSAFEPATH=1``; the jobs did not)."""
    from ablate.sweep.slurm import TrialJob

    work, marker = tmp_path / "work", tmp_path / "marker"
    work.mkdir()
    (work / "yaml.py").write_text(f"open({str(marker)!r}, 'a').write('yaml ')\nfrom yaml_real import *\n")
    monkeypatch.chdir(work)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p and Path(p).resolve() != work])  # the ablate command
    executor = SlurmExecutor(ExecutorArgs(), tmp_path / "out").submitit("planted", 1, 1, 0, None)
    job = executor.submit(TrialJob([sys.executable, "-c", "pass"], tmp_path / "run"))
    with contextlib.suppress(Exception):  # a planted module may break the job too: the marker is what counts
        job.result()
    assert not marker.exists(), f"the job imported {marker.read_text()}from {work}"


def test_a_packed_sweep_says_each_trial_its_workers_start_and_end(tmp_path, monkeypatch):
    """The local launcher prints 'started' and 'finished seed=1 (0:05) val/bleu=20.00' as trials go; the packed
    sweep's watcher printed 'submitted worker job 101 (2 slots)', then nothing until the whole sweep was done."""
    import itertools

    from ablate.record import RunStatus
    from ablate.sweep import slurm
    from ablate.sweep.planner import launch_options
    from ablate.sweep.state import load_state, save_state

    path = tmp_path / "p.yaml"
    path.write_text(
        "method: grid\nmetric: {name: val/bleu, goal: maximize}\nparameters:\n  seed: {values: [1, 2]}\n"
        + tiny_sweep_yaml()
    )
    spec, opts = launch_options(path, [], tmp_path / "out")
    said: list[str] = []
    executor = SlurmExecutor(ExecutorArgs(name=spec.name, max_concurrent=1), opts.out)
    packed = slurm.PackedSweep(spec, opts, executor, 2, lambda line, style="": said.append(line))
    jobs = itertools.count(101)
    monkeypatch.setattr(packed, "_submit", lambda: str(next(jobs)))
    monkeypatch.setattr(slurm, "job_states", lambda ids: {job: "RUNNING" for job in ids})

    def worker(name: str, **fields) -> None:  # what a worker writes into sweep.json
        state = load_state(opts.out)
        trial = state.trial(name)
        for key, value in fields.items():
            setattr(trial, key, value)
        save_state(opts.out, state)

    packed.planner.open()  # as run() does before it watches
    packed.planner.prepare()
    assert packed._tick() and said == ["submitted worker job 101 (2 slots)"]
    worker("seed=1", status=RunStatus.RUNNING, attempts=1, job_id="101")
    worker("seed=2", status=RunStatus.RUNNING, attempts=1, job_id="101")
    packed._tick()
    assert said[1:] == ["started  seed=1 [worker job 101]", "started  seed=2 [worker job 101]"]
    worker("seed=1", attempts=2, duration_s=20.0)  # lost from outside and relaunched between two looks
    packed._tick()  # the attempt that ended is not 'running', as its trial is again
    assert said[3:] == ["interrupted seed=1 (job 101, 0:20)", "started  seed=1 [worker job 101]"]
    worker("seed=1", status=RunStatus.FINISHED, metric=20.0, duration_s=85.0)
    worker("seed=2", status=RunStatus.FAILED, error="boom", duration_s=3.0)
    packed._tick()
    assert said[5:] == ["finished seed=1 (job 101, 1:05) val/bleu=20.00", "failed   seed=2 (job 101, 0:03): boom"]
