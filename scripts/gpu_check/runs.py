"""The GPU check's stages that run the product's own commands: ``pytest -m gpu``, packed sweeps
(``ablate sweep run --parallel K``) and the Multi30k base-size training run.

Each takes a ``timeout`` (seconds) and returns what it measured; the parsing of what those commands
leave behind (JUnit XML, sweep folders, ``summary.json``) is separate, so it is tested on canned files.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Callable, Optional

from ablate.record import DEV_BLEU, DEV_PPL, SUMMARY_FILE, TEST_BLEU, TOKENS_PER_SEC, RunFiles, RunStatus, RunSummary
from ablate.sweep.local import ablate_argv
from scripts.gpu_check.options import GpuCheckOptions

ROOT = Path(__file__).resolve().parents[2]
"""The checkout: ``tests/`` and ``scripts/`` live here."""

Echo = Callable[[str], None]


def child_env(cache_dir: str) -> dict[str, str]:
    """The environment of a child: this checkout first on PYTHONPATH, W&B off, the shared data cache."""
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        WANDB_MODE="disabled",
        WANDB_SILENT="true",
        PYTHONUNBUFFERED="1",
    )
    if cache_dir:
        env["ABLATE_CACHE"] = cache_dir
    return env


def run_child(cmd: list[str], timeout: float, env: dict[str, str], log: Optional[Path] = None) -> dict[str, Any]:
    """Run ``cmd`` in ROOT with a time limit; ``{"rc", "seconds", "timed_out", "tail"}`` (the last output lines).

    The child leads a process group of its own, and at the limit the whole group is killed: a sweep's
    trials must not run on into the next stage's measurements.
    """
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        text, _ = proc.communicate(timeout=max(timeout, 1.0))
        rc, timed_out = proc.returncode, False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        text, _ = proc.communicate()
        rc, timed_out = None, True
    if log is not None:
        log.write_text(text)
    tail = [line for line in (text or "").strip().splitlines() if line.strip()][-8:]
    return {"rc": rc, "seconds": time.perf_counter() - start, "timed_out": timed_out, "tail": tail}


# --- pytest -m gpu -----------------------------------------------------------------------------------


def parse_junit(xml_text: str) -> dict[str, Any]:
    """Counts and per-test outcomes of a pytest JUnit XML report.

    Returns:
        ``{"passed", "failed", "errors", "skipped", "total", "cases": {"file::test": outcome}}``, outcome one
        of passed / failed / error / skipped (with the skip or failure message's first line).
    """
    root = ET.fromstring(xml_text)
    cases: dict[str, str] = {}
    for case in root.iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        outcome = "passed"
        for tag, label in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
            found = case.find(tag)
            if found is not None:
                message = (found.get("message") or found.text or "").strip().splitlines()
                outcome = label + (f": {message[0][:200]}" if message else "")
                break
        cases[name] = outcome
    counts = {k: sum(v.split(":")[0] == k for v in cases.values()) for k in ("passed", "failed", "error", "skipped")}
    return {
        "passed": counts["passed"],
        "failed": counts["failed"],
        "errors": counts["error"],
        "skipped": counts["skipped"],
        "total": len(cases),
        "cases": cases,
    }


def gpu_test_files(tests: Path = ROOT / "tests") -> list[str]:
    """The test modules that mark tests ``gpu`` (relative to ROOT): only they are collected, so a module whose
    imports the GPU machine lacks (SLURM, W&B reports) cannot stop the GPU tests."""
    return sorted(str(p.relative_to(ROOT)) for p in tests.rglob("test_*.py") if "mark.gpu" in p.read_text())


def run_gpu_tests(opts: GpuCheckOptions, timeout: float, echo: Echo) -> dict[str, Any]:
    """``pytest -m gpu`` over the modules that have GPU tests; parsed outcomes."""
    with tempfile.TemporaryDirectory(prefix="ablate-gpu-tests-") as tmp:
        xml = Path(tmp) / "junit.xml"
        files = gpu_test_files()
        cmd = [sys.executable, "-m", "pytest", "-m", "gpu", *files, "-q", "-p", "no:cacheprovider", f"--junitxml={xml}"]
        echo("tests: " + " ".join(cmd[1:-1]))
        run = run_child(cmd, timeout, child_env(opts.cache_dir))
        out = {**run, "command": " ".join(["python", *cmd[1:-1]])}
        if xml.exists():
            out.update(parse_junit(xml.read_text()))
    return out


# --- packed trials -------------------------------------------------------------------------------------


def sweep_file(folder: Path, trials: int) -> Path:
    """A grid sweep of ``trials`` identical small trials that differ only in their seed."""
    path = folder / f"packed-{trials}.yaml"
    seeds = ", ".join(str(s) for s in range(1, trials + 1))
    path.write_text(
        f"method: grid\nmetric: {{name: val/bleu, goal: maximize}}\nparameters:\n  seed: {{values: [{seeds}]}}\n"
    )
    return path


def packed_overrides(opts: GpuCheckOptions) -> list[str]:
    """Every packed trial's config: the small model, ``packed_seconds`` of training, no validation until the
    end, greedy test decoding, no W&B."""
    out = [
        f"data.source={opts.data}",
        f"data.vocab_size={opts.vocab_size}",
        f"data.builtin_pairs={opts.builtin_pairs}",
        *opts.small_trial,
        f"train.max_time={opts.packed_seconds}",
        "train.max_epochs=1000",
        "train.val_every=1000000",
        "train.checkpoint_every=1000000",
        "eval.beam=1",
        "tracking.wandb=disabled",
    ]
    if opts.cache_dir:
        out.append(f"data.cache_dir={opts.cache_dir}")
    return out


def aggregate_packed(sweep_dir: Path) -> dict[str, Any]:
    """What the trials of one packed sweep did, from their ``summary.json`` files.

    Returns:
        ``{"trials", "finished", "aggregate_tokens_per_s" (sum over finished trials of each one's training
        tokens/s, measured while they all ran), "tokens_per_s" (each trial's), "steps", "train_seconds"}``.
    """
    rows = {}
    for run_dir in sorted(p.parent for p in sweep_dir.glob(f"*/{SUMMARY_FILE}")):
        rows[run_dir.name] = RunSummary.read(run_dir, strict=False).to_json()
    finished = {k: v for k, v in rows.items() if v.get("status") == RunStatus.FINISHED}
    rates = {k: v.get(TOKENS_PER_SEC.key) for k, v in finished.items()}
    good = [r for r in rates.values() if isinstance(r, (int, float)) and r == r]
    return {
        "trials": len(rows),
        RunStatus.FINISHED: len(finished),
        "aggregate_tokens_per_s": sum(good) if len(good) == len(rows) and good else None,
        "tokens_per_s": rates,
        "steps": {k: v.get("step") for k, v in rows.items()},
        "train_seconds": {k: v.get("train_seconds") for k, v in rows.items()},
        "errors": {k: v.get("error") for k, v in rows.items() if v.get("status") != RunStatus.FINISHED},
    }


def run_packed(
    opts: GpuCheckOptions, deadline: float, save: Callable[[dict[str, Any]], None], echo: Echo
) -> dict[str, Any]:
    """For each K in ``opts.packed`` (1 and the largest first): K small trials at once on the visible devices
    through ``ablate sweep run --parallel K``; aggregate tokens/s and the ratio of each K to one trial."""
    order = sorted(set(opts.packed), key=lambda k: (k != 1, -k))
    out: dict[str, Any] = {"trial": list(opts.small_trial), "train_seconds": opts.packed_seconds, "runs": {}}
    with tempfile.TemporaryDirectory(prefix="ablate-gpu-packed-") as tmp:
        for k in order:
            left = deadline - time.time()
            if left < opts.packed_seconds + 10:
                out["runs"][str(k)] = {"skipped": f"out of time ({left:.0f} s left)"}
                continue
            folder = Path(tmp) / f"k{k}"
            cmd = ablate_argv(
                "sweep",
                "run",
                str(sweep_file(Path(tmp), k)),
                "--out",
                str(folder),
                "--parallel",
                str(k),
                "--devices",
                "auto",
                "--retries",
                "0",
                *packed_overrides(opts),
            )
            echo(f"packed: {k} trial(s) at once (ablate sweep run --parallel {k})")
            run = run_child(cmd, left, child_env(opts.cache_dir))
            out["runs"][str(k)] = {
                **aggregate_packed(folder),
                "sweep_wall_s": run["seconds"],
                "rc": run["rc"],
                "timed_out": run["timed_out"],
                **({"tail": run["tail"]} if run["rc"] else {}),
            }
            out["ratios"] = packed_ratios(out["runs"])
            save(out)
    out["ratios"] = packed_ratios(out["runs"])
    return out


def packed_ratios(runs: dict[str, dict[str, Any]]) -> dict[str, Optional[float]]:
    """``packed{K}_vs_1``: aggregate tokens/s of K trials at once over that of one trial alone."""
    one = runs.get("1", {}).get("aggregate_tokens_per_s")
    out = {}
    for k, run in runs.items():
        agg = run.get("aggregate_tokens_per_s")
        if k != "1":
            out[f"packed{k}_vs_1"] = agg / one if one and agg else None
    return out


# --- Multi30k base-size quality --------------------------------------------------------------------------


def run_quality(opts: GpuCheckOptions, timeout: float, echo: Echo) -> dict[str, Any]:
    """``ablate train --config <quality_config>`` on the check's data for ``quality_minutes`` of training;
    test BLEU (beam 5), best validation BLEU, the step reached and throughput."""
    with tempfile.TemporaryDirectory(prefix="ablate-gpu-quality-") as tmp:
        run_dir = Path(tmp) / "run"
        cmd = ablate_argv(
            "train",
            "--config",
            str(ROOT / opts.quality_config),
            "--run-dir",
            str(run_dir),
            f"data.source={opts.data}",
            f"train.max_time={opts.quality_minutes * 60:g}",
            "tracking.wandb=disabled",
        )
        if opts.tiny:
            cmd += [
                f"data.builtin_pairs={opts.builtin_pairs}",
                f"data.vocab_size={opts.vocab_size}",
                *opts.small_trial,
                "eval.beam=1",
                "train.val_every=20",
            ]
        echo(f"quality: {opts.quality_minutes:g} min of training with {opts.quality_config}")
        run = run_child(cmd, timeout, child_env(opts.cache_dir))
        out: dict[str, Any] = {
            "config": opts.quality_config,
            "minutes": opts.quality_minutes,
            "rc": run["rc"],
            "seconds": run["seconds"],
            "timed_out": run["timed_out"],
        }
        summary = RunFiles(run_dir).summary
        if summary.exists():
            data = RunSummary.read(summary, strict=False).to_json()
            keys = (
                "status",
                "error",
                TEST_BLEU.key,
                DEV_BLEU.key,
                DEV_PPL.key,
                "step",
                "epoch",
                TOKENS_PER_SEC.key,
                "train_seconds",
                "wall_time_s",
                "params",
                "peak_memory_mb",
                "bleu_signature",
            )
            out.update({k: data.get(k) for k in keys})
            out["history"] = data.get("history")
        if run["rc"]:
            out["tail"] = run["tail"]
    return out
