"""Device slots: GPUs per trial via CUDA_VISIBLE_DEVICES, CPU cores split between trials."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ablate.sweep.local import Slot, plan_slots, start_process
from ablate.sweep.spec import SweepError


def four_gpus() -> list[str]:
    return ["0", "1", "2", "3"]


def test_auto_gives_one_trial_per_visible_gpu():
    slots = plan_slots("auto", cores=16, gpus=four_gpus)
    assert [s.gpus for s in slots] == [("0",), ("1",), ("2",), ("3",)]
    assert {s.threads for s in slots} == {4}
    env = slots[2].env({"PATH": "/bin"})
    assert env["CUDA_VISIBLE_DEVICES"] == "2" and env["OMP_NUM_THREADS"] == "4" and env["PATH"] == "/bin"
    assert slots[2].overrides() == []


def test_gpus_per_trial_groups_devices_and_trains_with_ddp():
    slots = plan_slots("0,1,2,3", gpus_per_trial=2, cores=8, gpus=four_gpus)
    assert [s.gpus for s in slots] == [("0", "1"), ("2", "3")]
    assert slots[1].env({})["CUDA_VISIBLE_DEVICES"] == "2,3" and slots[1].overrides() == ["train.devices=2"]
    assert [s.gpus for s in plan_slots("0,1,2", gpus_per_trial=2, cores=8, gpus=four_gpus)] == [("0", "1")]


def test_cpu_slots_split_the_cores_and_hide_gpus():
    slots = plan_slots("cpu", parallel=2, cores=2)
    assert len(slots) == 2 and all(s.gpus == () and s.threads == 1 for s in slots)
    assert slots[0].env({"CUDA_VISIBLE_DEVICES": "0"})["CUDA_VISIBLE_DEVICES"] == ""
    no_gpu = plan_slots("auto", parallel=3, cores=12, gpus=lambda: [])
    assert [s.threads for s in no_gpu] == [4, 4, 4] and no_gpu[0].gpus is None
    assert "CUDA_VISIBLE_DEVICES" not in no_gpu[0].env({})


def test_several_trials_may_share_a_gpu():
    slots = plan_slots("0,1", parallel=2, cores=8, gpus=four_gpus)
    assert [s.gpus for s in slots] == [("0",), ("0",), ("1",), ("1",)] and slots[0].threads == 2


def test_visible_devices_come_from_the_environment(monkeypatch):
    from ablate.sweep.local import visible_gpus

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")
    assert visible_gpus() == ["4", "6"]
    assert [s.gpus for s in plan_slots("auto", cores=2)] == [("4",), ("6",)]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert visible_gpus() == []


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"devices": "cpu", "gpus_per_trial": 2}, "needs GPUs"),
        ({"devices": "0", "gpus_per_trial": 2}, "needs at least that many GPUs"),
        ({"devices": "gpu0"}, "use auto, cpu, or GPU ids"),
        ({"devices": "cpu", "parallel": 0}, "at least 1"),
        ({"devices": "0,0", "gpus_per_trial": 2}, r"^--devices 0,0 lists GPU 0 twice; list each GPU once"),
        ({"devices": "1, 0,1"}, r"^--devices 1, 0,1 lists GPU 1 twice; .*--parallel 2"),
    ],
)
def test_impossible_slot_requests_are_one_line_errors(kwargs, message):
    with pytest.raises(SweepError, match=message):
        plan_slots(cores=2, gpus=four_gpus if kwargs["devices"][0].isdigit() else lambda: [], **kwargs)


def test_slot_description():
    assert Slot(0, ("0", "1"), 4).describe() == "gpu 0,1" and Slot(1, None, 2).describe() == "cpu x2"


@pytest.mark.slow
@pytest.mark.parametrize("cores, parallel, threads", [(2, 2, 1), (4, 2, 2), (2, 1, 2)])
def test_a_trials_torch_gets_its_share_of_the_cores_and_idle_threads_that_sleep(cores, parallel, threads):
    """What a trial process actually sees: torch's intra-op threads and OpenMP's wait policy."""
    clean = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY")}
    env = plan_slots("cpu", parallel=parallel, cores=cores)[-1].env(clean)
    probe = "import os, torch; print(torch.get_num_threads(), os.environ['OMP_WAIT_POLICY'])"
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == [str(threads), "PASSIVE"]


def test_a_wait_policy_the_user_chose_is_kept():
    assert plan_slots("cpu", parallel=2, cores=2)[0].env({"OMP_WAIT_POLICY": "ACTIVE"})["OMP_WAIT_POLICY"] == "ACTIVE"


def test_absent_gpu_ids_are_refused_not_run_on_cpu():
    """``--devices 7`` without GPU 7 fails in one line instead of training on CPU as "gpu 7"."""
    from ablate.sweep.spec import SweepError

    with pytest.raises(SweepError, match="no GPU 7 on this machine \\(visible: none\\)"):
        plan_slots("7", cores=2, gpus=lambda: [])
    with pytest.raises(SweepError, match="no GPU 7 on this machine \\(visible: 0,1,2,3\\)"):
        plan_slots("0,7", cores=2, gpus=four_gpus)


def test_a_trial_log_that_links_out_of_a_received_sweep_folder_is_replaced_not_appended_to(tmp_path):
    thesis = tmp_path / "thesis.tex"
    thesis.write_text("my thesis\n")
    log = tmp_path / "sweep" / "base-seed=1" / "trial.log"
    log.parent.mkdir(parents=True)
    log.symlink_to(thesis)
    command = [sys.executable, "-c", "print('trained')"]
    proc, log_start = start_process(command, dict(os.environ), log, "ablate sweep: base-seed=1, attempt 1")
    proc.wait()
    assert thesis.read_text() == "my thesis\n"
    assert not log.is_symlink() and log.read_text()[log_start:] == "trained\n"
    assert log.read_text()[:log_start].endswith(
        "=== ablate sweep: base-seed=1, attempt 1 ===\n$ " + shlex.join(command) + "\n"
    )


def test_a_trial_started_by_the_ablate_command_imports_nothing_from_the_working_directory(tmp_path, monkeypatch):
    """docs/runs.md: inside a folder someone else made, run the ``ablate`` command (its process has no working
    directory on ``sys.path``). But each trial it starts is ``python -m ablate train``, which puts the working
    directory first: a ``yaml.py`` planted there ran in every trial."""
    from ablate.sweep.local import ablate_argv, child_env

    marker = tmp_path / "marker"
    for name in ("yaml", "typer", "rich"):
        (tmp_path / f"{name}.py").write_text(f"open({str(marker)!r}, 'a').write('{name} ')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p and os.path.abspath(p) != str(tmp_path)])
    proc = subprocess.run(ablate_argv("--version"), env=child_env(os.environ), capture_output=True, text=True)
    assert not marker.exists(), f"planted modules ran: {marker.read_text()}"
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_a_trial_started_from_a_notebook_still_imports_its_modules_from_the_working_directory(tmp_path, monkeypatch):
    """A notebook (``ablate.sweep(...)``) imports the user's modules from its working directory, and so must its
    trials' ``plugins=MODULE``, though ``python -m ablate`` takes the working directory ``-m`` puts first off
    ``sys.path`` (plain ``wandb agent``'s planted-module fix): ``child_env`` hands it on through ``PYTHONPATH``."""
    from ablate.sweep.local import ablate_argv, child_env

    marker = tmp_path / "marker"
    (tmp_path / "my_lab_plugin.py").write_text(f"open({str(marker)!r}, 'a').write('imported')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", ["", *sys.path])
    argv = ablate_argv("train", "plugins=my_lab_plugin", "no.such.key=1")  # plugins load, then the key is refused
    proc = subprocess.run(argv, env=child_env(os.environ), capture_output=True, text=True)
    assert marker.exists(), proc.stderr[-2000:]
    assert proc.returncode == 2 and "no.such.key" in proc.stderr


def _python310() -> str | None:
    """A working ``python3.10``: on PATH, or pyenv's (whose shim on PATH fails unless 3.10 is selected)."""
    found = [shutil.which("python3.10")]
    if shutil.which("pyenv"):
        root = subprocess.run(["pyenv", "root"], capture_output=True, text=True).stdout.strip()
        found += sorted(Path(root).glob("versions/3.10*/bin/python3.10")) if root else []
    return next(
        (str(exe) for exe in found if exe and subprocess.run([exe, "-c", ""], capture_output=True).returncode == 0),
        None,
    )


@pytest.mark.skipif(_python310() is None, reason="needs a python3.10 on PATH")
def test_on_python_3_10_a_trial_imports_nothing_from_the_working_directory_either(tmp_path):
    """``requires-python >= 3.10``, but Python 3.10 ignores the ``PYTHONSAFEPATH=1`` a trial gets: its
    ``python -m ablate`` put the working directory first, and a planted ``yaml.py`` ran in every trial."""
    from ablate.sweep.local import PACKAGE_ROOT, ablate_argv

    marker = tmp_path / "marker"
    for name in ("yaml", "typer", "rich", "torch", "numpy"):  # whatever ablate imports first, installed or not
        (tmp_path / f"{name}.py").write_text(f"open({str(marker)!r}, 'a').write('{name} ')\n")
    env = {**os.environ, "PYTHONSAFEPATH": "1", "PYTHONPATH": str(PACKAGE_ROOT)}
    subprocess.run([_python310(), *ablate_argv("--version")[1:]], cwd=tmp_path, env=env, capture_output=True)
    assert not marker.exists(), f"planted modules ran: {marker.read_text()}"
