"""The LightningModule: a thin training shell around a plain ``nn.Module`` translation model (which never
imports Lightning), its loss, optimiser and learning-rate schedule, and the validation and test metrics.

The loss and optimiser are plain functions that ``ablate bench`` times too. Schedules (``train.schedule``; why:
docs/getting-started.md, "Training defaults"): linear warm-up, then a decay that ends at ``train.min_lr`` when
the nearest budget runs out (Li, Yumer & Ramanan 2020, "Budgeted Training"); a plugin adds one with
``@register("schedule", "<name>")``."""

from __future__ import annotations

import logging
import math
import os
import pickle
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, cast

import pytorch_lightning as pl
import torch
import torch.distributed as dist
from torch import nn

from ablate.config import Config, flatten, from_flat, peak_lr, to_dict
from ablate.errors import AblateError
from ablate.metrics import TEST_METRICS, get_scorer
from ablate.model.build import build_model
from ablate.model.decoding import Seq2Seq, beam_search, greedy
from ablate.record import DEV_BLEU, DEV_CHRF, DEV_PPL
from ablate.registry import register, table
from ablate.training.run_folder import checked_history, checked_record

DECAYS: dict[str, Callable[[float], float]] = table("schedule")
"""Decay name -> multiplier at fraction q in [0, 1] of the post-warm-up budget (1 at q=0)."""
INVERSE_SQRT = "inverse_sqrt"
"""The paper's schedule, outside :data:`DECAYS` (it ignores the budget)."""


def inverse_sqrt(step: int, warmup: int, min_ratio: float = 0.0) -> float:
    """Multiplier on the peak learning rate at optimizer ``step`` (0-based), never below ``min_ratio``.

    Linear warm-up to 1 over ``warmup`` steps, then sqrt(warmup / step): the paper's
    ``d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)`` normalised to a peak of 1, as fairseq's ``inverse_sqrt``."""
    step = step + 1
    if warmup <= 0:
        return 1.0
    value = step / warmup if step < warmup else math.sqrt(warmup / step)
    return max(value, min_ratio)


@register("schedule", "linear")
def linear(q: float) -> float:
    """1 at the end of warm-up, 0 at the end of the budget."""
    return 1.0 - q


@register("schedule", "cosine")
def cosine(q: float) -> float:
    """Half a cosine from 1 to 0 (Loshchilov & Hutter 2017, Eq. 5 with one cycle)."""
    return 0.5 * (1.0 + math.cos(math.pi * q))


def schedules() -> list[str]:
    """Every ``train.schedule`` name: ``inverse_sqrt`` and the registered decays."""
    return [INVERSE_SQRT, *DECAYS]


class WarmupDecay(torch.optim.lr_scheduler.LRScheduler):
    """Linear warm-up over ``warmup`` steps, then ``schedule`` (a name in :func:`schedules`) as a function of
    budget ``progress`` (the fraction used, in [0, 1]), floored at ``min_ratio`` of the peak (the groups' ``lr``).

    The decay runs from the progress at which warm-up ended to 1, so a time budget and a step budget shape the
    curve alike; that starting point is part of the state, so a resumed run continues the same curve."""

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        schedule: str,
        warmup: int,
        min_ratio: float,
        progress: Callable[[], float],
    ):
        if schedule not in schedules():
            raise ValueError(f"unknown schedule {schedule!r}; valid: {', '.join(schedules())}")
        self.schedule, self.warmup, self.min_ratio = schedule, warmup, min_ratio
        self._progress = progress
        self.decay_from: float | None = None
        super().__init__(optimizer)

    def multiplier(self, step: int) -> float:
        """Factor on the peak rate for optimizer ``step`` (0-based)."""
        if self.schedule == INVERSE_SQRT:
            return inverse_sqrt(step, self.warmup, self.min_ratio)
        if step + 1 < self.warmup:
            return (step + 1) / self.warmup
        p = min(max(self._progress(), 0.0), 1.0)
        if self.decay_from is None:
            self.decay_from = p
        q = 1.0 if p >= 1.0 else (p - self.decay_from) / max(1.0 - self.decay_from, 1e-12)
        return max(DECAYS[self.schedule](min(max(q, 0.0), 1.0)), self.min_ratio)

    def get_lr(self) -> list[float]:  # type: ignore[override]  # torch allows tensor rates; ours are the config's floats
        m = self.multiplier(self.last_epoch)
        return [float(base) * m for base in self.base_lrs]

    def state_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_progress")}


def batch_tokens(batch: dict[str, Any], pad_id: int) -> int:
    """Non-padding source plus target tokens (EOS included): the host counts of
    :func:`~ablate.data.datamodule.collate`, else counted from the tensors (which waits for their device)."""
    if "src_tokens" in batch and "tgt_tokens" in batch:
        return int(batch["src_tokens"]) + int(batch["tgt_tokens"])
    return int((batch["src"] != pad_id).sum() + (batch["tgt_out"] != pad_id).sum())


def token_loss(
    logits: torch.Tensor,
    target: torch.Tensor,
    pad_id: int,
    smoothing: float,
    ntok: int | None = None,
    overwrite: bool = False,
) -> tuple[torch.Tensor, int]:
    """Mean label-smoothed cross-entropy over non-padding targets, and their number.

    ``logits`` (B, T, V) or (N, V), ``target`` (B, T) or (N,); ``smoothing`` is epsilon (Szegedy et al. 2016;
    0.1 in Vaswani et al. 2017). ``ntok``: the host's count of targets (the batch's ``tgt_tokens``), else
    counted on the device (which waits for it). ``overwrite``: the caller has no further use for ``logits``
    (nor has any other node of the graph: one that saved them raises in backward), so the log-softmax is
    written over them instead of into a fresh (N, V) buffer."""
    if ntok is None:
        ntok = int((target != pad_id).sum())
    loss = _SmoothedCrossEntropy.apply(
        logits.reshape(-1, logits.size(-1)).float(), target.reshape(-1), pad_id, smoothing, overwrite
    )
    return loss / max(ntok, 1), ntok


class _SmoothedCrossEntropy(torch.autograd.Function):
    """Summed label-smoothed cross-entropy of (N, V) logits against (N,) targets, ``pad_id`` ignored: the value
    of ``F.cross_entropy(logits, target, ignore_index=pad_id, label_smoothing=smoothing, reduction="sum")``.

    Per row ``(1 - eps) (-log p_t) + eps/V sum_j (-log p_j)``, the cross-entropy against ``q = (1 - eps)
    onehot(t) + eps/V`` (Szegedy et al. 2016, sec. 7), whose logit gradient is ``g (p - q)``. The backward pass
    writes it into the saved log-probabilities in place (``exp``, then one ``addcmul``), where
    ``F.cross_entropy`` allocates and fills a one-hot gradient, adds the smoothing's and runs a log-softmax
    backward: two fresh (N, V) buffers and two passes fewer, the same numbers. A second backward through the
    same graph raises (the saved tensor was modified). With ``overwrite`` the forward pass writes the
    log-probabilities over the logits (row by row, each row read before it is written), so the step allocates
    no (N, V) buffer beyond the logits: on a CPU a fresh 90 MB buffer costs about as much in page faults as the
    log-softmax itself."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx, logits: torch.Tensor, target: torch.Tensor, pad_id: int, smoothing: float, overwrite: bool
    ) -> torch.Tensor:
        log_probs = torch.log_softmax(logits, dim=-1, out=logits) if overwrite else torch.log_softmax(logits, dim=-1)
        keep = target.ne(pad_id)  # (N,)
        index = target.masked_fill(~keep, 0).unsqueeze(1)  # (N, 1): any valid class where ignored
        nll = -log_probs.gather(1, index).squeeze(1)
        smooth = -log_probs.sum(-1)
        per_row = (1.0 - smoothing) * nll + (smoothing / logits.size(-1)) * smooth
        ctx.save_for_backward(log_probs, index, keep)
        ctx.smoothing = smoothing
        return torch.where(keep, per_row, 0.0).sum()

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: torch.Tensor):  # type: ignore[override]
        log_probs, index, keep = ctx.saved_tensors
        eps, classes = ctx.smoothing, log_probs.size(-1)
        weight = (keep.to(log_probs.dtype) * grad).unsqueeze(1)  # (N, 1): g, 0 at ignored rows
        probs = log_probs.exp_()  # p, in place: nothing else holds the buffer
        d_logits = torch.addcmul(weight * (-eps / classes), probs, weight, out=probs)  # g p - g eps/V
        d_logits.scatter_add_(1, index, weight * -(1.0 - eps))  # - g (1 - eps) at the target
        return d_logits, None, None, None, None


def target_rows(target: torch.Tensor, pad_id: int, ntok: int | None = None) -> torch.Tensor:
    """Indices (N,) of the non-padding positions of ``target`` (B, T) flattened (a target or source batch), in
    order; with the host's count ``ntok`` nothing waits for the device (``torch.nonzero_static``)."""
    keep = target.reshape(-1).ne(pad_id)
    rows = keep.nonzero() if ntok is None else torch.nonzero_static(keep, size=ntok)
    return rows.squeeze(1)


def sequence_loss(
    model: nn.Module, batch: dict[str, Any], pad_id: int, smoothing: float, enc: Any = None
) -> tuple[torch.Tensor, int]:
    """The training loss of a collated batch (:func:`token_loss`) and its number of targets.

    The model computes the non-padding positions only (``model(..., rows=, src_rows=)``; the source ones where
    the batch is padded), so the output projection and log-softmax, the largest terms of a small model's step,
    and the Transformer's position-wise layers skip the padding; loss and gradients equal those of the full
    (B, T, V) logits with padding ignored. ``enc``: ``model.encode(batch["src"])`` where the caller has it
    (validation decodes from the same encoding), else the source is encoded here."""
    target, src = batch["tgt_out"], batch["src"]
    rows = target_rows(target, pad_id, batch.get("tgt_tokens"))
    padded = batch.get("src_padded", True)
    src_rows = target_rows(src, pad_id, batch.get("src_tokens")) if padded and enc is None else None
    logits = model(src, batch["tgt_in"], src_padded=padded, rows=rows, src_rows=src_rows, enc=enc)  # (N, V)
    targets = target.reshape(-1).index_select(0, rows)
    return token_loss(logits, targets, pad_id, smoothing, ntok=rows.size(0), overwrite=True)


def make_optimizer(
    model: nn.Module, cfg: Config, progress: Callable[[], float] = lambda: 0.0, fused: bool | None = None
) -> tuple[torch.optim.Optimizer, WarmupDecay]:
    """AdamW (no weight decay on biases and norms) and its per-step :class:`WarmupDecay`.

    ``progress``: the budget fraction used (:meth:`~ablate.training.trainer.TrainClock.progress`). ``fused``:
    AdamW's fused kernel (None: where every parameter is on CUDA or on the CPU; False under a gradient scaler,
    whose unscaling the clipping relies on), else ``foreach``. On a CPU the fused step reads and writes each
    parameter's tensors once where ``foreach`` makes five passes, one tensor at a time: 13 instead of 46 ms per
    step for the benchmark's 131-tensor Transformer."""
    t = cfg.train
    decay: list[nn.Parameter] = []
    no_decay: list[nn.Parameter] = []
    for name, p in model.named_parameters():
        (no_decay if p.ndim < 2 or "norm" in name else decay).append(p)
    groups = [{"params": decay, "weight_decay": t.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    lr = peak_lr(cfg)
    if fused is None:
        fused = all(p.device.type in ("cuda", "cpu") for p in model.parameters())
    kernel = {"fused": True} if fused else {"foreach": True}
    opt = torch.optim.AdamW(groups, lr=lr, betas=t.betas, eps=1e-9, **kernel)
    return opt, WarmupDecay(opt, t.schedule, t.warmup, t.min_lr / lr, progress=progress)


def clip_gradients(parameters: Iterable[torch.Tensor], max_norm: float | None) -> torch.Tensor:
    """Clip the gradients to a total L2 norm of ``max_norm`` (None or 0: leave them); returns the norm
    before clipping as a 0-d tensor, without waiting for the device."""
    params = [p for p in parameters if p.grad is not None]
    if not params:
        return torch.zeros(())
    if max_norm:  # what Lightning's gradient_clip_val calls, so the clipped gradients are the same
        return torch.nn.utils.clip_grad_norm_(params, max_norm)
    return torch.nn.utils.get_total_norm([p.grad for p in params if p.grad is not None])


@dataclass(frozen=True)
class Scores:
    """Scores of one system output with sacreBLEU's signatures: ``bleu``, ``chrf`` and their signatures,
    ``more`` (``chrf++``, ``ter``, ...) and ``signatures`` of every metric scored."""

    bleu: float
    chrf: float
    signature: str
    chrf_signature: str = ""
    more: dict[str, float] = field(default_factory=dict)
    signatures: dict[str, str] = field(default_factory=dict)

    def values(self) -> dict[str, float]:
        """Metric name -> corpus score, for every metric scored."""
        return {"bleu": self.bleu, "chrf": self.chrf, **self.more}


def corpus_scores(hypotheses: list[str], references: list[str], metrics: tuple[str, ...] = ("bleu", "chrf")) -> Scores:
    """sacreBLEU BLEU (13a tokenisation, cased), chrF and the other ``metrics`` of ``hypotheses``
    against ``references`` (raw, detokenized sentences in the same order)."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    scores, signatures = {}, {}
    for name in dict.fromkeys(("bleu", "chrf", *metrics)):
        scorer = get_scorer(name)
        scores[name], signatures[name] = scorer.corpus(hypotheses, references), scorer.signature()
    return Scores(
        bleu=scores.pop("bleu"),
        chrf=scores.pop("chrf"),
        signature=signatures["bleu"],
        chrf_signature=signatures["chrf"],
        more=scores,
        signatures=signatures,
    )


class NonFiniteLossError(AblateError, RuntimeError):
    """Training diverged: the loss became NaN or infinite."""


def gather_objects(obj: Any) -> list[Any]:
    """Every rank's ``obj`` (a list of one element outside distributed runs)."""
    if not (dist.is_available() and dist.is_initialized()):
        return [obj]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


class TranslationModule(pl.LightningModule):
    """Trains ``model`` on batches of :class:`ablate.data.datamodule.TranslationDataModule`.

    ``load_from_checkpoint(run_dir / "checkpoints/best.ckpt")`` rebuilds it from the checkpoint alone (the
    config and vocabulary sizes are its hyperparameters); a plugin that config names is imported only if this
    process already runs the same code or it is an installed module, unless ``trust_plugins=True``. Attach
    ``detokenize`` (``SubwordTokenizer.load(run_dir / "tokenizer").decode_tgt``) to score text.

    Args:
        model: ``forward(src, tgt_in) -> logits`` and the interface of :mod:`ablate.model.decoding`;
            ``None`` builds it from ``cfg.model`` and ``vocab`` (``{"src": n, "tgt": n, "joint": bool}``).
        cfg: a :class:`Config` or its nested dict; detokenize: ids -> text; references: raw targets per split.
        clock: the run's :class:`~ablate.training.trainer.TrainClock` (budget progress for the schedule)."""

    def __init__(
        self,
        model: nn.Module | None = None,
        cfg: Config | dict | None = None,
        detokenize: Callable[[list[int]], str] | None = None,
        references: dict[str, list[str]] | None = None,
        bos_id: int = 1,
        eos_id: int = 2,
        pad_id: int = 0,
        val_split: str = "val",
        test_splits: tuple[str, ...] = ("test",),
        vocab: dict[str, Any] | None = None,
        clock: Any = None,
        trust_plugins: bool = False,
    ):
        super().__init__()
        if not isinstance(cfg, Config):  # a checkpoint's record: its plugins are not necessarily the user's
            cfg = from_flat(flatten(cfg or {}), trust="import" if trust_plugins else "recorded")
        if model is None:
            if vocab is None:
                raise ValueError(
                    "TranslationModule needs a model, or vocab={'src': n, 'tgt': n, 'joint': bool} to build one"
                )
            model = build_model(cfg.model, vocab["src"], vocab["tgt"], pad_id, vocab["joint"])
        # plain values only, so the checkpoint loads with torch.load(weights_only=True)
        self.save_hyperparameters(
            {
                "cfg": to_dict(cfg),
                "vocab": vocab,
                "bos_id": bos_id,
                "eos_id": eos_id,
                "pad_id": pad_id,
                "val_split": val_split,
                "test_splits": list(test_splits),
            },
            logger=False,
        )
        self.model = model
        self.cfg = cfg
        self.detokenize = detokenize
        self.references = references or {}
        self.bos_id, self.eos_id, self.pad_id = bos_id, eos_id, pad_id
        self.val_split = val_split
        self.test_splits = list(test_splits)
        self.history: list[dict[str, float]] = []
        self.test_results: dict[str, dict[str, Any]] = {}
        self.best_val_bleu = -1.0
        self.last_val: dict[str, float] = {}
        self.last_val_record: dict[str, Any] = {}
        self.best_val_record: dict[str, Any] = {}  # scores and hypotheses of the best validation
        self.last_loss: torch.Tensor | None = None  # of the latest training step
        self.last_grad_norm: torch.Tensor | None = None  # of the latest optimizer step, before clipping
        self.bar_metrics: dict[str, float] = {}  # what the progress bar shows, as numbers, refreshed when logging
        # on the device: the first step whose loss was not finite, or -1 (see check_finite)
        self._first_non_finite: torch.Tensor | None = None
        # a logged loss over twice ln V (uniform guessing; a fresh model starts near 1.1x) warns: diverging
        self._diverged_over = 2 * math.log(vocab["tgt"]) if vocab else math.inf
        self._reset_eval()
        self.clock = clock
        self.test_metrics: dict[str, float] = {}
        self._cuda_rng: torch.Tensor | None = None

    # ------------------------------------------------------------------ training
    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        return self.model(src, tgt_in)

    def logs_now(self) -> bool:
        """Whether this training step is one whose values are logged (``tracking.log_every``, Lightning's
        ``log_every_n_steps``): the only steps that may read a tensor's value on the host. Under ``train.accumulate``
        only the batch that completes the step logs (as Lightning writes it), not each batch of its window."""
        loop = getattr(getattr(self._trainer, "fit_loop", None), "epoch_loop", None)
        if loop is not None and loop._should_accumulate():
            return False
        return (self.global_step + 1) % self.cfg.tracking.log_every == 0  # the optimizer step this batch completes

    def training_step(self, batch: dict[str, Any], batch_idx: int) -> torch.Tensor:
        loss, _ = sequence_loss(self.model, batch, self.pad_id, self.cfg.train.label_smoothing)
        self._note_finite(loss.detach())
        self.last_loss = loss.detach()
        if self.logs_now():
            self.check_finite()
            # not prog_bar=True: Lightning would read the logged tensor back on every later step
            self.log("train/loss", loss, on_step=True, on_epoch=False, batch_size=1)
            self.bar_metrics["train/loss"] = value = float(self.last_loss)
            if value > self._diverged_over and self.global_rank == 0:
                logging.getLogger(__name__).warning(
                    f"training loss {value:.4g} at step {self.global_step + 1} is over {self._diverged_over:.2f}, "
                    f"twice what guessing uniformly over the target vocabulary scores: training is diverging "
                    f"(lower train.lr, or raise train.warmup)"
                )
                self._diverged_over = math.inf  # once a run
        return loss

    def _note_finite(self, loss: torch.Tensor) -> None:
        """Remember, on the device, the first step whose loss is NaN or infinite (read by :meth:`check_finite`)."""
        if self._first_non_finite is None or self._first_non_finite.device != loss.device:
            self._first_non_finite = torch.full((), -1, dtype=torch.long, device=loss.device)
        first = self._first_non_finite
        self._first_non_finite = torch.where(~torch.isfinite(loss) & (first < 0), self.global_step, first)

    def check_finite(self) -> None:
        """Raise :class:`NonFiniteLossError` naming the first step whose loss was not finite: read (from the device)
        only at the steps that log and before anything is validated or saved, so a diverged run saves nothing."""
        first = self._first_non_finite
        if first is not None and (step := int(first)) >= 0:
            raise NonFiniteLossError(f"non-finite loss at step {step}")

    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None) -> None:
        # Lightning calls this after backward (and unscaling, and the DDP all-reduce) with train.clip_norm: one
        # norm computation clips and is recorded (the norm before clipping: the clipped one would read
        # clip_norm whenever it bites)
        if gradient_clip_algorithm not in (None, "norm"):
            raise ValueError(f"gradient_clip_algorithm={gradient_clip_algorithm!r}: ablate clips by norm")
        self.last_grad_norm = clip_gradients(self.model.parameters(), gradient_clip_val)
        if (self.global_step + 1) % self.cfg.tracking.log_every == 0:  # the steps Throughput logs on
            self.log("train/grad_norm", self.last_grad_norm, on_step=True, on_epoch=False, batch_size=1)

    def grad_norm_value(self) -> float | None:
        """The latest gradient norm as a number; None before the first step or when it was not finite."""
        if self.last_grad_norm is None:
            return None
        value = float(self.last_grad_norm)
        return value if math.isfinite(value) else None

    def configure_optimizers(self):
        # the fused kernel unscales inside its step, after clipping: not under a gradient scaler (fp16)
        scaled = getattr(getattr(self._trainer, "precision_plugin", None), "scaler", None) is not None
        progress = self.clock.progress if self.clock else lambda: 0.0
        opt, sched = make_optimizer(self.model, self.cfg, progress, fused=False if scaled else None)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    # ------------------------------------------------------------------ decoding
    def translate(
        self, src: torch.Tensor, beam: int, len_penalty: float | None = None, enc: Any = None
    ) -> list[list[int]]:
        """Token ids of the best hypothesis per row of ``src`` (B, S); ``len_penalty`` defaults to ``eval.len_penalty``;
        ``enc``: ``model.encode(src)`` where the caller has it. An empty source (a row that starts with EOS) gets an
        empty hypothesis, as fairseq-interactive keeps an empty line empty: the test decoding and ``ablate
        translate`` both come here."""
        e = self.cfg.eval
        model = cast(Seq2Seq, self.model)  # nn.Module's typing hides the decoding interface every model has (Args)
        if beam <= 1:
            hyps = greedy(model, src, self.bos_id, self.eos_id, e.max_len_a, e.max_len_b, enc=enc)
        else:
            alpha = e.len_penalty if len_penalty is None else len_penalty
            hyps = beam_search(
                model,
                src,
                beam,
                self.bos_id,
                self.eos_id,
                alpha,
                e.max_len_a,
                e.max_len_b,
                length_penalty=e.length_penalty,
                enc=enc,
            )
        empty = (src[:, 0] == self.eos_id).tolist()
        return [[] if none else hyp for none, hyp in zip(empty, hyps)]

    def _eval_step(self, batch: dict[str, torch.Tensor], dataloader_idx: int, beam: int, nll: bool = False) -> None:
        """Decode ``batch`` with ``beam``; ``nll``: also its teacher-forced loss (the validation perplexity), from
        the encoding that decoding starts from (one encoder pass, not two)."""
        if self.detokenize is None:
            raise ValueError("TranslationModule needs detokenize (ids -> text) to score its translations")
        enc = None
        if nll:
            enc = cast(Seq2Seq, self.model).encode(batch["src"])
            loss, ntok = sequence_loss(self.model, batch, self.pad_id, 0.0, enc=enc)
            self._eval_nll += torch.tensor([float(loss) * ntok, ntok], dtype=torch.float64)
        start = time.perf_counter()
        hyps = self.translate(batch["src"], beam, enc=enc)
        self._eval_time += time.perf_counter() - start
        out = self._eval.setdefault(dataloader_idx, [])
        for idx, ids in zip(batch["index"].tolist(), hyps):
            out.append((idx, self.detokenize(ids)))

    def _collect(self, dataloader_idx: int, n: int) -> list[str]:
        """Hypotheses of every rank, restored to corpus order; each sentence exactly once."""
        merged: dict[int, str] = {}
        for part in gather_objects(self._eval.get(dataloader_idx, [])):
            merged.update(part)
        if len(merged) != n:
            raise RuntimeError(f"decoding covered {len(merged)} of {n} sentences")
        return [merged[i] for i in range(n)]

    def _reset_eval(self) -> None:
        self._eval: dict[int, list[tuple[int, str]]] = {}  # dataloader -> (sentence index, hypothesis) of this rank
        self._eval_time = 0.0
        self._eval_nll = torch.zeros(2, dtype=torch.float64)

    def on_validation_epoch_start(self) -> None:
        self.check_finite()
        self._reset_eval()

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        self._eval_step(batch, 0, self.cfg.eval.val_beam, nll=True)

    def on_validation_epoch_end(self) -> None:
        if self.trainer.sanity_checking:
            return
        refs = self.references[self.val_split]
        hyps = self._collect(0, len(refs))
        scores = corpus_scores(hyps, refs)
        nll, ntok = self.trainer.strategy.reduce(self._eval_nll.to(self.device), reduce_op="sum").tolist()
        ppl = math.exp(min(nll / max(ntok, 1.0), 50.0))
        self.last_val = {DEV_BLEU.key: scores.bleu, DEV_CHRF.key: scores.chrf, DEV_PPL.key: ppl}
        entry: dict[str, Any] = {"step": int(self.global_step), **self.last_val}
        if (norm := self.grad_norm_value()) is not None:
            entry["train/grad_norm"] = norm  # of the step that made the weights validated (before clipping)
        # one validation's scores and hypotheses together; the best is strictly better, as best.ckpt
        self.last_val_record = {**entry, "hypotheses": hyps}
        if scores.bleu > self.best_val_bleu:
            self.best_val_record, self.best_val_bleu = self.last_val_record, scores.bleu
        if not self.history or self.history[-1]["step"] != entry["step"]:  # the final re-validation repeats the last
            self.history.append(entry)
        self.log_dict(self.last_val, prog_bar=True, sync_dist=False, batch_size=1)
        self._reset_eval()

    def on_test_epoch_start(self) -> None:
        self._reset_eval()

    def test_step(self, batch: dict[str, torch.Tensor], batch_idx: int, dataloader_idx: int = 0) -> None:
        self._eval_step(batch, dataloader_idx, self.cfg.eval.beam)

    def on_test_epoch_end(self) -> None:
        metrics: dict[str, float] = {}
        seconds = self.trainer.strategy.reduce(
            torch.tensor(self._eval_time, dtype=torch.float64, device=self.device), reduce_op="max"
        )
        for i, split in enumerate(self.test_splits):
            refs = self.references[split]
            hyps = self._collect(i, len(refs))
            scores = corpus_scores(hyps, refs, TEST_METRICS)  # BLEU, chrF, chrF++, TER
            self.test_results[split] = {"hypotheses": hyps, **scores.values(), "signatures": scores.signatures}
            for name, value in scores.values().items():
                metrics[f"test_{split}/{name}"] = value
                if i == 0:
                    metrics[f"test/{name}"] = value
        total = sum(len(self.references[s]) for s in self.test_splits)
        if seconds.item() > 0:
            metrics["test/sents_per_sec"] = total / seconds.item()
        self.test_metrics = metrics
        self.log_dict(metrics, sync_dist=False, batch_size=1)
        self._reset_eval()

    # ------------------------------------------------------------------ state
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self.check_finite()  # before anything is written: a diverged run never replaces a good checkpoint
        # the random state (dropout) too, so a resumed run continues the uninterrupted run's stream
        rng = {"torch": torch.get_rng_state()}
        if torch.cuda.is_available() and self.device.type == "cuda":
            rng["cuda"] = torch.cuda.get_rng_state(self.device)
        checkpoint["ablate"] = {
            "history": self.history,
            "rng": rng,
            "rng_ranks": gather_objects(rng),  # under DDP each rank's own stream (its dropout differs from rank 0's)
            "best_val_record": self.best_val_record,
            # so a rerun that only decodes (killed during the test) still reports it
            "last_loss": None if self.last_loss is None else float(self.last_loss),
        }

    @classmethod
    def load_from_checkpoint(cls, checkpoint_path: Any, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        """Lightning's ``load_from_checkpoint``, after verifying the file (CheckpointError when it is damaged),
        with ``weights_only=True`` unless the caller says otherwise: Lightning leaves the default to torch, which
        an environment can turn into unpickling anything (``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD``)."""
        from ablate.training.checkpoints import PICKLED, CheckpointError, refused_pickle, verify_checkpoint

        if isinstance(checkpoint_path, (str, os.PathLike)):
            verify_checkpoint(os.fspath(checkpoint_path))
        kwargs.setdefault("weights_only", True)
        try:
            return super().load_from_checkpoint(checkpoint_path, *args, **kwargs)
        except pickle.UnpicklingError as err:
            if not refused_pickle(err):
                raise
            raise CheckpointError(f"checkpoint {checkpoint_path} is unreadable: {PICKLED}") from None

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        # A checkpoint may come from someone else's run folder: take only well-formed values, and
        # derive the best validation BLEU from the history rather than from a stored number.
        state = found if isinstance(found := checkpoint.get("ablate"), dict) else {}
        self.history = checked_history(state.get("history"))
        self.best_val_bleu = max((h[DEV_BLEU.key] for h in self.history), default=-1.0)
        self.best_val_record = checked_record(state.get("best_val_record"), self.history)
        # the throughput counters are the Throughput callback's; older checkpoints kept the loss beside them
        measured = found if isinstance(found := state.get("measured"), dict) else {}
        loss = state.get("last_loss", measured.get("loss"))
        if isinstance(loss, (int, float)) and math.isfinite(loss):
            self.last_loss = torch.tensor(float(loss))
        ranks, trainer = state.get("rng_ranks"), getattr(self, "_trainer", None)
        if trainer is not None and isinstance(ranks, list) and len(ranks) == trainer.world_size > 1:
            state = dict(state, rng=ranks[trainer.global_rank])  # this rank's own stream
        rng = found if isinstance(found := state.get("rng"), dict) else {}
        if isinstance(rng.get("torch"), torch.Tensor):
            torch.set_rng_state(rng["torch"])
        if isinstance(rng.get("cuda"), torch.Tensor) and torch.cuda.is_available():
            self._cuda_rng = rng["cuda"]  # applied once the module is on its device

    def on_train_end(self) -> None:
        self.check_finite()

    def on_train_start(self) -> None:
        if self._cuda_rng is not None and self.device.type == "cuda":
            torch.cuda.set_rng_state(self._cuda_rng, self.device)
            self._cuda_rng = None
