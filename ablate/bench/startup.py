"""Start-up: how soon a cached trial reaches its first training step.

The child (``python -m ablate.bench.startup``) is the real ``ablate train`` path: it imports the
libraries the path needs (torch, Lightning, datasets, tokenizers, sacreBLEU, W&B, typer and the
``ablate`` modules), then loads the config and calls :func:`ablate.training.train.train` as the
command does, with the ``milestone`` hook that ``train`` offers: it is called when the data is
ready, the model is built, ``fit`` starts and the first training step begins; at that point the
child prints its timings and exits.

Reported: ``interpreter_s`` (process spawn -> first line of the child), ``imports_s`` (library
and ``ablate`` imports) and ``first_step_s`` (imports done -> first training step, the target
of <= 3 s), with the milestones between. The data cache must already hold the corpus
(:func:`bench_startup` warms it first when needed).
"""

from __future__ import annotations

import time

_T0 = time.time()

import json  # noqa: E402 - after the first timestamp on purpose
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _child(argv: list[str]) -> None:
    sys.path.insert(0, str(ROOT))
    import datasets  # noqa: F401
    import pytorch_lightning  # noqa: F401
    import sacrebleu  # noqa: F401
    import tokenizers  # noqa: F401
    import torch  # noqa: F401
    import typer  # noqa: F401

    if "tracking.wandb=disabled" not in argv:
        import wandb  # noqa: F401

    import ablate.data.datamodule  # noqa: F401
    import ablate.model.build  # noqa: F401
    import ablate.training.module  # noqa: F401
    from ablate.config import load_config
    from ablate.training.train import train

    marks = {"interpreter": _T0, "imports": time.time()}

    def milestone(name: str) -> None:
        marks[name] = time.time()
        if name == "first_step":
            print(json.dumps(marks), flush=True)
            os._exit(0)

    at = argv.index("--run-dir")
    run_dir, overrides = Path(argv[at + 1]), [a for a in argv[:at] + argv[at + 2 :] if a != "--overwrite"]
    train(load_config(None, overrides), run_dir, overwrite=True, milestone=milestone)
    raise SystemExit("training ended before its first step")


def run_trial(overrides: list[str], run_dir: Path) -> dict[str, float]:
    """One child run; returns seconds per phase (see the module docstring)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    env.setdefault("WANDB_SILENT", "true")
    cmd = [sys.executable, "-m", "ablate.bench.startup", *overrides, "--run-dir", str(run_dir), "--overwrite"]
    spawned = time.time()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or done.stdout.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"start-up trial failed: {tail}")
    m = json.loads(lines[-1])
    out = {
        "interpreter_s": m["interpreter"] - spawned,
        "imports_s": m["imports"] - m["interpreter"],
        "first_step_s": m["first_step"] - m["imports"],
        "total_s": m["first_step"] - spawned,
    }
    previous = m["imports"]
    for name in ("data", "model", "fit_start", "first_step"):
        if name in m:
            out[f"to_{name}_s"] = m[name] - previous
            previous = m[name]
    return out


def trial_overrides(opts, wandb: str) -> list[str]:
    """The trial's config: the benchmark's data and model sizes, a one-step budget."""
    out = [
        f"data.source={opts.data}",
        f"data.vocab_size={opts.vocab_size}",
        f"data.builtin_pairs={opts.builtin_pairs}",
        f"model.d_model={opts.d_model}",
        f"model.layers={opts.layers}",
        f"model.heads={opts.heads}",
        f"model.d_ff={opts.d_ff}",
        f"train.max_tokens={opts.max_tokens}",
        "train.max_steps=1",
        f"tracking.wandb={wandb}",
        f"seed={opts.seed}",
    ]
    if opts.cache_dir:
        out.append(f"data.cache_dir={opts.cache_dir}")
    if opts.threads:
        out.append(f"train.threads={opts.threads}")
    return out


def bench_startup(opts, warm: bool = False, echo=lambda s: None) -> dict[str, Any]:
    """Time a cached trial with W&B disabled (and, if ``opts.startup_wandb``, offline).

    Args:
        opts: The benchmark options.
        warm: The data cache is known to hold the corpus already (else one untimed trial fills it).
    """
    modes = ["disabled"] + (["offline"] if opts.startup_wandb else [])
    out: dict[str, Any] = {"target_s": 3.0}
    with tempfile.TemporaryDirectory(prefix="ablate-bench-startup-") as tmp:
        if not warm:
            echo("start-up: filling the data cache")
            run_trial(trial_overrides(opts, "disabled"), Path(tmp) / "warm")
        for mode in modes:
            echo(f"start-up: cached trial, W&B {mode}")
            out[f"wandb_{mode}"] = run_trial(trial_overrides(opts, mode), Path(tmp) / mode)
    out["first_step_s"] = out["wandb_disabled"]["first_step_s"]
    return out


if __name__ == "__main__":
    _child(sys.argv[1:])
