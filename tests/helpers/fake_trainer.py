"""A stand-in for ``cli.py train`` that honours the trainer contract in milliseconds.

``fake_trainer.py --run-dir DIR [--mode M] [--steps N] [--step-s S] [--events FILE] key=value ...``

It resumes from ``DIR/checkpoints/last.ckpt`` (a JSON step counter), exits 0 at once when
``DIR/summary.json`` already says finished, writes ``summary.json`` atomically (``running`` after
each step, then ``finished``/``failed``/``interrupted``), and appends ``<event> <run name> <time>
<step>`` lines to FILE so tests can see what ran when. Modes: ``ok``, ``crash`` (exception, no
summary), ``nan`` (diverges: summary says failed), ``oom-kill`` (SIGKILLs itself), ``bad`` (a
worse metric, for early termination), ``stubborn`` (a hung
trainer: on its first attempt it ignores SIGTERM and hangs after half its steps), ``hang`` (sleeps for
ever after its first step, silent, as a plugin waiting on a lock; SIGTERM ends it as it does a trainer),
``chatty`` (prints ``--steps`` lines of 1 kB a step).
``--texts SPLIT`` makes a finished run's record one ``ablate table`` reads as a real one: the
config typed as YAML reads it, ``test_SPLIT/bleu`` (sacreBLEU of the hypotheses), and ``hyps/SPLIT.txt`` / ``refs/SPLIT.txt``
(the references with a share of words replaced that falls with ``model.heads`` and varies by seed).
"""

import json
import os
import random
import signal
import sys
import time
from pathlib import Path


def atomic(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    opts = {"--mode": "ok", "--steps": "4", "--step-s": "0.05", "--events": os.devnull, "--texts": ""}
    overrides, run_dir = [], None
    it = iter(argv)
    for arg in it:
        if arg == "--run-dir":
            run_dir = Path(next(it))
        elif arg in opts:
            opts[arg] = next(it)
        else:
            overrides.append(arg)
    params = dict(o.split("=", 1) for o in overrides)
    name = run_dir.name
    mode, steps, step_s = opts["--mode"], int(opts["--steps"]), float(opts["--step-s"])

    def event(what: str, step: int = 0) -> None:
        with open(opts["--events"], "a") as f:
            f.write(
                f"{what} {name} {time.time():.4f} {step} [{os.environ.get('CUDA_VISIBLE_DEVICES', '-')}] "
                f"{os.environ.get('OMP_NUM_THREADS', '-')}\n"
            )

    summary_path, ckpt = run_dir / "summary.json", run_dir / "checkpoints" / "last.ckpt"
    if summary_path.exists() and json.loads(summary_path.read_text()).get("status") == "finished":
        event("skip")
        return 0
    step = json.loads(ckpt.read_text())["step"] if ckpt.exists() else 0
    resumed = step > 0
    event("start", step)
    bleu = float(params.get("seed", 1)) + 10.0 * float(params.get("model.heads", 1))
    if mode == "bad":
        bleu = 0.5
    base = {"error": None, "params": 1234, "config": params}

    def on_term(signum, frame):
        atomic(summary_path, {**base, "status": "interrupted", "step": step})
        event("interrupted", step)
        sys.exit(143)

    signal.signal(signal.SIGTERM, signal.SIG_IGN if mode == "stubborn" else on_term)
    ckpt.parent.mkdir(parents=True, exist_ok=True)
    while step < steps:
        time.sleep(step_s)
        step += 1
        atomic(ckpt, {"step": step})
        atomic(summary_path, {**base, "status": "running", "step": step, "val/bleu": bleu * step / steps})
        if mode == "crash" and step == 2:
            print(
                "Traceback (most recent call last):\n  File ...\nRuntimeError: CUDA out of memory. Tried to allocate 2 GiB",
                file=sys.stderr,
                flush=True,
            )
            return 1
        if mode == "nan" and step == 2:
            atomic(summary_path, {**base, "status": "failed", "step": step, "error": "loss is NaN at step 2"})
            return 1
        if mode == "stubborn" and step == steps // 2 and not resumed:
            while True:
                time.sleep(1)
        if mode == "hang":
            while True:
                time.sleep(1)
        if mode == "chatty":
            print(("x" * 1023 + "\n") * 200, end="", flush=True)
        if mode == "oom-kill" and step == 2:
            os.kill(os.getpid(), signal.SIGKILL)
    atomic(
        summary_path,
        {
            **base,
            "status": "finished",
            "step": step,
            "val/bleu": bleu,
            "test/bleu": bleu - 1,
            "val/ppl": 3.0,
            "train/tokens_per_sec": 1000.0,
            "wall_time_s": steps * step_s,
        },
    )
    if opts["--texts"]:
        write_texts(run_dir, opts["--texts"], params, bleu)
    event("finish", step)
    return 0


def write_texts(run_dir: Path, split: str, params: dict[str, str], bleu: float) -> None:
    """``--texts``: a typed config, the split's BLEU, and hypotheses/references that a table can test."""
    import sacrebleu
    import yaml

    vocab = [f"w{i}" for i in range(200)]
    words = random.Random(0)
    refs = [" ".join(words.choice(vocab) for _ in range(words.randint(8, 14))) for _ in range(40)]
    heads, seed = float(params.get("model.heads", 1)), float(params.get("seed", 1))
    rate = max(0.05, 0.6 - 0.1 * heads + 0.02 * seed)
    noise = random.Random(f"{heads}-{seed}")
    hyps = [" ".join(noise.choice(vocab) if noise.random() < rate else w for w in ref.split()) for ref in refs]
    for kind, lines in (("hyps", hyps), ("refs", refs)):
        (run_dir / kind).mkdir(exist_ok=True)
        (run_dir / kind / f"{split}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    summary_path = run_dir / "summary.json"
    summary = json.loads(summary_path.read_text())
    summary["config"] = {k: yaml.safe_load(v) for k, v in params.items()}
    summary[f"test_{split}/bleu"] = sacrebleu.corpus_bleu(hyps, [refs]).score
    atomic(summary_path, summary)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
