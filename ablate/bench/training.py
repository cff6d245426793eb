"""Training throughput of every variant and of ``torch.nn.Transformer``, on the same batches.

One training step is exactly what ``ablate train`` does per batch, minus Lightning's hooks:
forward, the label-smoothed cross-entropy (:func:`ablate.training.module.sequence_loss`), backward,
gradient-norm clipping, the AdamW step and learning-rate schedule (:func:`ablate.training.module.make_optimizer`).
The reference (:class:`ablate.bench.reference.TorchTransformer`) gets the same loss and optimiser. Throughput counts non-padding source + target tokens per second.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

import torch
from torch import nn

from ablate.bench import hardware
from ablate.bench.inputs import Batch, Inputs
from ablate.bench.options import BenchError, BenchOptions
from ablate.bench.reference import TorchTransformer
from ablate.bench.timing import compute_clock, interleaved, median, paired, spread
from ablate.config import Config, from_flat
from ablate.errors import did_you_mean
from ablate.model.build import build_model
from ablate.model.positions import POSITIONS
from ablate.model.scores import SCORES
from ablate.training.module import make_optimizer, sequence_loss, token_loss

REFERENCE = "torch"
"""Name of the ``torch.nn.Transformer`` contender."""
STANDARD = "dot-scaled"
"""The base Transformer (dot, scaled, sinusoidal): what ratios are taken against."""
ALL_ROWS = "dot-scaled-all-rows"
"""The standard model with logits for every target position, padding included (what item 6 of issue 31 removed)."""
MATMUL = "matmul-peak"
"""Name of the square-matmul contender that measures the hardware's peak."""


def variants() -> dict[str, dict[str, Any]]:
    """Variant name -> dotted model-config changes (on top of the benchmark's sizes): every registered
    score scaled and unscaled, every registered position type (a plugin's too: ``ablate bench
    --plugins``), the RNN and the reference."""
    return {
        **{
            f"{score}-{'scaled' if scale else 'unscaled'}": {
                "model.attention.score": score,
                "model.attention.scale": scale,
            }
            for score in SCORES
            for scale in (True, False)
        },
        **{f"pos-{name}": {"model.positions": name} for name in POSITIONS if name != "sinusoidal"},
        "rnn-additive": {"model.arch": "rnn", "model.attention.score": "additive"},
        ALL_ROWS: {},
        REFERENCE: {},
    }


def variant_config(opts: BenchOptions, changes: dict[str, Any]) -> Config:
    """The run config of one variant: the benchmark's sizes, defaults elsewhere (dropout 0.1, AdamW)."""
    flat = {
        "model.d_model": opts.d_model,
        "model.layers": opts.layers,
        "model.heads": opts.heads,
        "model.d_ff": opts.d_ff,
        "model.rnn.hidden": opts.d_model,
        "data.vocab_size": opts.vocab_size,
        "seed": opts.seed,
        "plugins": list(opts.plugins),
    }
    flat.update(changes)
    return from_flat(flat)


@dataclass
class Trainee:
    """A model with its loss, optimiser and schedule, ready to take steps; ``dtype`` is the autocast dtype
    (None: the device's training dtype, see :func:`ablate.bench.hardware.training_dtype`)."""

    name: str
    model: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: Any
    clip_norm: float
    smoothing: float
    dev: torch.device
    dtype: Optional[torch.dtype] = None
    all_rows: bool = False
    """Logits for every target position (padding included), as the reference computes them."""

    @property
    def params(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    def loss(self, batch: Batch) -> torch.Tensor:
        """Ours: the training loss (:func:`~ablate.training.module.sequence_loss`, logits of non-padding
        targets only); the reference (and :data:`ALL_ROWS`): the same loss over full (B, T, V) logits."""
        with hardware.autocast(self.dev, self.dtype):
            if self.all_rows:
                return token_loss(self.model(batch["src"], batch["tgt_in"]), batch["tgt_out"], 0, self.smoothing)[0]
            return sequence_loss(self.model, batch, 0, self.smoothing)[0]

    def step(self, batch: Batch) -> None:
        """One optimisation step, as ``ablate train`` takes it."""
        self.loss(batch).backward()
        if self.clip_norm:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.clip_norm)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)

    def forward_backward(self, batch: Batch) -> None:
        """Forward and backward only (what FLOPs are counted on); gradients are dropped."""
        self.loss(batch).backward()
        self.optimizer.zero_grad(set_to_none=True)


def make_trainee(name: str, opts: BenchOptions, vocab: int, dev: torch.device) -> Trainee:
    """Build variant ``name`` (a key of :func:`variants`) with its optimiser, seeded by ``opts.seed``."""
    known = variants()
    if name not in known:
        raise BenchError(f"unknown bench variant '{name}'; choose from {', '.join(known)}")
    cfg = variant_config(opts, known[name])
    torch.manual_seed(opts.seed)
    if name == REFERENCE:
        m = cfg.model
        model: nn.Module = TorchTransformer(
            vocab,
            m.d_model,
            m.heads,
            m.layers,
            m.d_ff,
            m.dropout,
            m.attention_dropout,
            pad_id=0,
            max_positions=m.max_positions,
            norm_first=m.norm == "pre",
        )
    else:
        model = build_model(cfg.model, vocab, vocab, pad_id=0, shared_vocab=True)
    model = model.to(dev).train()
    optimizer, scheduler = make_optimizer(model, cfg)
    return Trainee(
        name,
        model,
        optimizer,
        scheduler,
        cfg.train.clip_norm,
        cfg.train.label_smoothing,
        dev,
        all_rows=name in (REFERENCE, ALL_ROWS),
    )


def selected(opts: BenchOptions) -> list[str]:
    """Variants to run: ``opts.variants`` (always with the standard model and the reference) or all."""
    known = variants()
    if not opts.variants:
        return list(known)
    names = [STANDARD, REFERENCE] + [v for v in opts.variants if v not in (STANDARD, REFERENCE)]
    for name in names:
        if name not in known:
            raise BenchError(
                f"unknown bench variant '{name}'{did_you_mean(name, list(known))}; choose from {', '.join(known)}"
            )
    return names


def _pass(trainee: Trainee, batches: list[Batch]) -> Callable[[], None]:
    def run() -> None:
        for batch in batches:
            trainee.step(batch)

    return run


def bench_training(
    opts: BenchOptions, inputs: Inputs, dev: torch.device, echo: Callable[[str], None] = lambda s: None
) -> dict[str, Any]:
    """Tokens/s of every selected variant, interleaved round-robin over the same batches.

    Returns:
        ``{"clock", "variants": {name: {tokens_per_s, seconds, spread, params, ratio_vs_torch(_spread),
        ratio_vs_standard(_spread), [gflop_per_pass, gflops, mfu, sdpa]}}, "matmul_gflops": float,
        "tokens_per_pass": int, "batches"}``; seconds are those of ``clock``
        (:func:`ablate.bench.timing.compute_clock`: CPU seconds on a CPU), the ratios paired per round
        (:func:`ablate.bench.timing.paired`) with the spread of their per-round values.
    """
    trainees = {}
    for name in selected(opts):
        trainees[name] = make_trainee(name, opts, inputs.vocab, dev)
    census: dict[str, tuple[float, str]] = {}
    if opts.flops:
        echo("counting model FLOPs (one forward + backward per variant and batch)")
        for name, trainee in trainees.items():
            flops, ops = hardware.census(lambda: [trainee.forward_backward(b) for b in inputs.batches])  # noqa: B023 - called here
            census[name] = (flops, hardware.sdpa_backend(ops))
    matmul, matmul_flops = hardware.matmul_work(dev)
    matmul()
    contenders = {name: _pass(t, inputs.batches) for name, t in trainees.items()}
    contenders[MATMUL] = matmul
    echo(
        f"training: {len(trainees)} models x {opts.reps} rounds of {len(inputs.batches)} batches "
        f"({inputs.tokens} tokens), {opts.warmup} warm-up round(s) first"
    )
    warmup = max(opts.warmup - 1, 0) if census else opts.warmup  # counting FLOPs was a warm-up round
    clock_name, clock = compute_clock(dev)
    seconds = interleaved(contenders, opts.reps, warmup, clock)
    peak = matmul_flops / median(seconds.pop(MATMUL)) / 1e9
    results: dict[str, dict[str, Any]] = {}
    for name, secs in seconds.items():
        row = {
            "tokens_per_s": inputs.tokens / median(secs),
            "seconds": secs,
            "spread": spread(secs),
            "params": trainees[name].params,
        }
        if name in census:
            flops, backend = census[name]
            gflops = flops / 1e9 / median(secs)
            row.update(gflop_per_pass=flops / 1e9, gflops=gflops, mfu=gflops / peak, sdpa=backend)
        results[name] = row
    for name, row in results.items():
        row["ratio_vs_torch"], row["ratio_vs_torch_spread"] = paired(seconds[name], seconds[REFERENCE])
        row["ratio_vs_standard"], row["ratio_vs_standard_spread"] = paired(seconds[name], seconds[STANDARD])
    return {
        "clock": clock_name,
        "variants": results,
        "matmul_gflops": peak,
        "tokens_per_pass": inputs.tokens,
        "batches": [list(b["src"].shape) + [b["tgt_in"].size(1)] for b in inputs.batches],
    }
