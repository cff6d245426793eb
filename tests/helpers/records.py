"""Constructed sweep folders and stand-in W&B public-API objects (no training, no network).

The fixtures of tests/report/conftest.py are built from it; other tests import it directly.

``variant_sweep`` follows the sweep-folder contract: ``DIR/<trial>/summary.json`` plus
``hyps/<split>.txt`` and ``refs/<split>.txt``. The made-up numbers in ``TEST_BLEU`` etc. are
what the aggregation tests check against; the hypotheses are the references with a fixed
fraction of words replaced, so a lower fraction is a clearly better system.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from ablate.config import Config, replace, to_dict

SPLITS = ("test_2016_flickr", "test_2017_flickr")
SEEDS = (1, 2, 3)
N_SENTENCES = 60

# variant -> (config overrides, word-corruption rate of its hypotheses)
VARIANTS = {
    "base": ({}, 0.30),
    "A-heads1": ({"model.heads": 1}, 0.60),  # clearly worse
    "A-heads8": ({"model.heads": 8}, None),  # None: hypotheses identical to the base's
    "B-dk16": ({"model.d_k": 16}, 0.30),
    "E-learned": ({"model.positions": "learned"}, 0.05),  # clearly better
}
# variant -> test BLEU (first split) per seed 1, 2, 3 (None: that seed did not finish)
TEST_BLEU = {
    "base": [27.0, 27.5, 28.0],
    "A-heads1": [24.0, 24.5, 26.0],
    "A-heads8": [27.2, 27.3, 27.7],
    "B-dk16": [26.0, 26.4, None],
    "E-learned": [28.5, 29.5, None],
}
UNFINISHED = {("B-dk16", 3): ("failed", "RuntimeError: CUDA out of memory"), ("E-learned", 3): ("running", None)}
PARAMS = {"base": 9_500_000, "A-heads1": 9_500_000, "A-heads8": 9_500_000, "B-dk16": 8_700_000, "E-learned": 9_800_000}


def _sentences(n: int, rng: random.Random, vocab: list[str]) -> list[str]:
    return [" ".join(rng.choice(vocab) for _ in range(rng.randint(8, 16))) + "." for _ in range(n)]


def _corrupt(refs: list[str], rate: float, rng: random.Random, vocab: list[str]) -> list[str]:
    out = []
    for ref in refs:
        words = ref.split()
        out.append(" ".join(rng.choice(vocab) if rng.random() < rate else w for w in words))
    return out


def references() -> dict[str, list[str]]:
    vocab = [f"w{i}" for i in range(300)]
    return {s: _sentences(N_SENTENCES, random.Random(i), vocab) for i, s in enumerate(SPLITS)}


def write_trial(
    root: Path,
    name: str,
    summary: dict[str, Any],
    hyps: dict[str, list[str]] | None = None,
    refs: dict[str, list[str]] | None = None,
) -> Path:
    run = root / name
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps(summary, indent=2))
    for kind, texts in (("hyps", hyps or {}), ("refs", refs or {})):
        for split, lines in texts.items():
            (run / kind).mkdir(exist_ok=True)
            (run / kind / f"{split}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return run


def trial_summary(
    name: str,
    variant: str | None,
    overrides: dict[str, Any],
    seed: int,
    bleu: float,
    params: int,
    sweep_params: dict[str, Any],
    sweep: str = "table3",
) -> dict[str, Any]:
    cfg = replace(Config(), **overrides, seed=seed, **{"tracking.name": name, "tracking.group": sweep})
    metrics = {
        "val/bleu": bleu + 1.0,
        "val/ppl": 60.0 - bleu,
        "val/chrf": 50.0 + bleu,
        "test/bleu": bleu,
        "train/tokens_per_sec": 10000.0 + 100 * bleu,
        "params": params,
        "step": 500,
        "wall_time_s": 120.0,
    }
    for i, split in enumerate(SPLITS):
        metrics[f"test_{split}/bleu"] = bleu - 2.0 * i
        metrics[f"test_{split}/chrf"] = 50.0 + bleu - i
    history = [
        {"step": s, "val/bleu": (bleu + 1.0) * s / 500 + 0.1 * seed, "val/ppl": 200.0 - s / 5}
        for s in (100, 200, 300, 400, 500)
    ]
    return {
        "status": "finished",
        "error": None,
        **metrics,
        "bleu_signature": "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0",
        "config": to_dict(cfg),
        "history": history,
        "variant": variant,
        "sweep": {"name": sweep, "params": {**sweep_params, "seed": seed}},
    }


def make_variant_sweep(root: Path) -> Path:
    """A Table-3-style sweep: 5 named variants x 3 seeds, one failed and one running trial."""
    refs = references()
    vocab = [f"w{i}" for i in range(300)]
    base_hyps: dict[int, dict[str, list[str]]] = {}
    for variant, (overrides, rate) in VARIANTS.items():
        for seed, bleu in zip(SEEDS, TEST_BLEU[variant]):
            name = f"{variant}-s{seed}"
            summary = trial_summary(name, variant, overrides, seed, bleu or 0.0, PARAMS[variant], {"variant": variant})
            if (variant, seed) in UNFINISHED:
                status, error = UNFINISHED[(variant, seed)]
                summary = {
                    "status": status,
                    "error": error,
                    "config": summary["config"],
                    "variant": variant,
                    "sweep": summary["sweep"],
                }
                write_trial(root, name, summary)
                continue
            rng = random.Random(f"{variant}-{seed}")
            if rate is None:
                hyps = base_hyps[seed]
            else:
                hyps = {s: _corrupt(r, rate, rng, vocab) for s, r in refs.items()}
            if variant == "base":
                base_hyps[seed] = hyps
            write_trial(root, name, summary, hyps, refs)
    (root / "sweep.json").write_text(json.dumps({"name": "table3"}))
    return root


def make_grid_sweep(root: Path) -> Path:
    """A one-at-a-time sweep without variant names: heads 1/4/8 and learned positions, 2 seeds."""
    points = [
        {"model.heads": 4, "model.positions": "sinusoidal"},
        {"model.heads": 1, "model.positions": "sinusoidal"},
        {"model.heads": 8, "model.positions": "sinusoidal"},
        {"model.heads": 4, "model.positions": "learned"},
    ]
    for i, point in enumerate(points):
        for seed in (1, 2):
            name = f"trial-{i}-s{seed}"
            bleu = 20.0 + i + seed
            write_trial(root, name, trial_summary(name, None, point, seed, bleu, 1_000_000 * (i + 1), point, "grid"))
    return root


# --------------------------------------------------------------------------------------
# Stand-ins for wandb.apis.public (Api, Run, File)
# --------------------------------------------------------------------------------------


class FakeFile:
    """Like ``wandb.apis.public.File``: a name and ``download(root, replace)``."""

    def __init__(self, name: str, source: Path):
        self.name, self._source = name, source

    def download(self, root: str = ".", replace: bool = False):
        target = Path(root) / self.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(self._source.read_bytes())
        return open(target)  # noqa: SIM115 - W&B returns an open handle too


class FakeRun:
    """Like ``wandb.apis.public.Run``: name, group, state, tags, config, summary, files, history."""

    def __init__(self, run_dir: Path, nested_config: bool):
        data = json.loads((run_dir / "summary.json").read_text())
        self.name = run_dir.name
        self.group = data["sweep"]["name"]
        self.tags = []
        status = data["status"]
        self.state = {"failed": "crashed", "interrupted": "killed"}.get(status, status)
        config = data["config"]
        if not nested_config:  # how ablate.training.tracking logs it: dotted keys
            from ablate.config import flatten

            config = flatten(config)
        config = dict(config, _wandb={"cli_version": "0.31.0"})
        if data.get("variant"):
            config["variant"] = data["variant"]
        self.config = config
        self.summary = {k: v for k, v in data.items() if k not in ("config", "history", "sweep", "variant", "status")}
        if "val/bleu" in self.summary:  # define_metric(summary="max"/"min") stores nested summaries
            self.summary["val/bleu"] = {"max": self.summary["val/bleu"]}
            self.summary["val/ppl"] = {"min": self.summary["val/ppl"]}
        if data.get("error"):
            self.summary["error"] = data["error"]
        self._history = data.get("history", [])
        self._files = [FakeFile(f"{p.parent.name}/{p.name}", p) for p in sorted(run_dir.glob("*/*.txt"))]

    def scan_history(self, keys=None, **_):
        for row in self._history:
            yield {
                "trainer/global_step": row["step"],
                "_step": row["step"] * 3,
                "val/bleu": row["val/bleu"],
                "val/ppl": row["val/ppl"],
            }

    def files(self):
        return list(self._files)


class FakeApi:
    """Like ``wandb.Api``: ``runs(path, filters)`` over runs built from sweep folders."""

    def __init__(self, *sweep_dirs: Path):
        self.calls = []
        self._runs = [
            FakeRun(d, nested_config=i % 2 == 0)
            for root in sweep_dirs
            for i, d in enumerate(sorted(p for p in root.iterdir() if p.is_dir()))
        ]
        self._runs.reverse()  # W&B lists newest first

    def runs(self, path: str, filters: dict | None = None, **_):
        self.calls.append((path, filters))
        group = (filters or {}).get("group")
        return [r for r in self._runs if group is None or r.group == group]


def make_mixed_seed_sweep(root: Path) -> Path:
    """Six rows trained with seeds 1-4 and one (``heads1``) with seeds 5-8: the six pair by seed (the row + seed
    fit, 15 df), ``heads1`` against the base cannot (the within-row σ, 21 df), so two σs test one table."""
    refs, vocab = references(), [f"w{i}" for i in range(300)]
    rows: dict[str, tuple[dict[str, Any], float, tuple[int, ...]]] = {"base": ({}, 0.30, (1, 2, 3, 4))}
    for i, dropout in enumerate((0.0, 0.2, 0.3, 0.4, 0.5)):
        rows[f"drop{dropout}"] = ({"model.dropout": dropout}, 0.30 + 0.01 * i, (1, 2, 3, 4))
    rows["heads1"] = ({"model.heads": 1}, 0.33, (5, 6, 7, 8))
    for variant, (overrides, rate, seeds) in rows.items():
        for seed in seeds:
            name = f"{variant}-s{seed}"
            summary = trial_summary(name, variant, overrides, seed, 20.0, 1000, {"variant": variant}, sweep="mixed")
            rng = random.Random(name)
            hyps = {s: _corrupt(r, rate + 0.03 * rng.random(), rng, vocab) for s, r in refs.items()}
            write_trial(root, name, summary, hyps, refs)
    return root
