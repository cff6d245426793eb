"""The LightningModule: a thin training shell around a plain ``nn.Module`` translation model.

The loss (:func:`token_loss`, label-smoothed cross-entropy) and the optimiser with its
learning-rate schedule (:func:`make_optimizer`: AdamW, warm-up, then ``train.schedule``, linear by
default) are plain functions that ``ablate bench`` calls too; the module wires them into
Lightning's steps, decodes for validation and test BLEU (sacreBLEU on detokenized text) and
measures perplexity and throughput. The model itself never imports Lightning.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

import pytorch_lightning as pl
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from ablate.config import Config, flatten, from_flat, peak_lr, to_dict
from ablate.errors import AblateError
from ablate.model.build import build_model
from ablate.model.decoding import beam_search, greedy
from ablate.training.metrics import corpus_scores
from ablate.training.schedule import WarmupDecay


class NonFiniteLossError(AblateError, RuntimeError):
    """Training diverged: the loss became NaN or infinite."""


def gather_objects(obj: Any) -> list[Any]:
    """Every rank's ``obj`` (a list of one element outside distributed runs)."""
    if not (dist.is_available() and dist.is_initialized()):
        return [obj]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def batch_tokens(batch: dict[str, torch.Tensor], pad_id: int) -> int:
    """Non-padding source tokens plus non-padding target tokens predicted (EOS included)."""
    return int((batch["src"] != pad_id).sum() + (batch["tgt_out"] != pad_id).sum())


def token_loss(logits: torch.Tensor, target: torch.Tensor, pad_id: int, smoothing: float) -> tuple[torch.Tensor, int]:
    """Mean label-smoothed cross-entropy over non-padding targets, and their number.

    Args:
        logits: (B, T, V) next-token scores.
        target: (B, T) token ids; ``pad_id`` positions are ignored.
        pad_id: padding id.
        smoothing: label smoothing epsilon (Szegedy et al. 2016; 0.1 in Vaswani et al. 2017).
    """
    ntok = int((target != pad_id).sum())
    loss = F.cross_entropy(
        logits.reshape(-1, logits.size(-1)).float(),
        target.reshape(-1),
        ignore_index=pad_id,
        label_smoothing=smoothing,
        reduction="sum",
    )
    return loss / max(ntok, 1), ntok


def make_optimizer(
    model: nn.Module, cfg: Config, progress: Callable[[], float] = lambda: 0.0
) -> tuple[torch.optim.Optimizer, WarmupDecay]:
    """AdamW (no weight decay on biases and norms) and its per-step :class:`WarmupDecay` schedule.

    ``progress`` is the fraction of the training budget used (:meth:`TrainClock.progress`), which the
    budget-aware decays read.
    """
    t = cfg.train
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim < 2 or "norm" in name else decay).append(p)
    groups = [{"params": decay, "weight_decay": t.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    lr = peak_lr(cfg)
    opt = torch.optim.AdamW(groups, lr=lr, betas=t.betas, eps=1e-9)
    return opt, WarmupDecay(opt, t.schedule, t.warmup, t.min_lr / lr, progress=progress)


class TranslationModule(pl.LightningModule):
    """Trains ``model`` on batches from :class:`ablate.data.datamodule.TranslationDataModule`.

    ``TranslationModule.load_from_checkpoint(run_dir / "checkpoints/best.ckpt")`` rebuilds it
    from the checkpoint alone (the config and vocabulary sizes are its hyperparameters); attach
    ``detokenize`` (``SubwordTokenizer.load(run_dir / "tokenizer").decode_tgt``) to score text.

    Args:
        model: encoder-decoder with ``forward(src, tgt_in) -> logits`` and the decoding interface
            of :mod:`ablate.model.decoding`; ``None`` builds it from ``cfg.model`` and ``vocab``.
        cfg: the resolved run configuration (a :class:`Config` or its nested dict).
        detokenize: ids -> detokenized target text.
        references: raw target sentences per split name, in corpus order.
        bos_id, eos_id, pad_id: special token ids.
        vocab: ``{"src": size, "tgt": size, "joint": bool}``, to build (and rebuild) the model.
        clock: the run's :class:`~ablate.training.callbacks.TrainClock` (budget progress for the schedule).
    """

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
        warmup_steps_excluded: int = 10,
        vocab: dict[str, Any] | None = None,
        clock: Any = None,
    ):
        super().__init__()
        cfg = cfg if isinstance(cfg, Config) else from_flat(flatten(cfg or {}))
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
        # throughput, measured over training steps only, after a few warm-up steps
        self._skip = warmup_steps_excluded
        self._tok, self._sec = 0, 0.0  # after the warm-up steps
        self._all_tok, self._all_sec = 0, 0.0  # every step (fallback for very short runs)
        self._t0 = 0.0
        self._step_tokens = 0
        self.tokens_per_sec = float("nan")
        self.train_tokens: int | None = None
        self.last_loss: torch.Tensor | None = None
        self.step_time = float("nan")
        self._eval: dict[int, list[tuple[int, str]]] = {}
        self._eval_nll = torch.zeros(2, dtype=torch.float64)
        self._eval_time = 0.0
        self.clock = clock
        self.test_metrics: dict[str, float] = {}
        self.val_hypotheses: list[str] | None = None
        self._cuda_rng: torch.Tensor | None = None

    # ------------------------------------------------------------------ training
    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        return self.model(src, tgt_in)

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        logits = self.model(batch["src"], batch["tgt_in"])
        loss, _ = token_loss(logits, batch["tgt_out"], self.pad_id, self.cfg.train.label_smoothing)
        if not torch.isfinite(loss):
            raise NonFiniteLossError(f"non-finite loss at step {self.global_step}")
        self._step_tokens = batch_tokens(batch, self.pad_id)
        self.last_loss = loss.detach()
        self.log("train/loss", loss, prog_bar=True, on_step=True, on_epoch=False, batch_size=1)
        return loss

    def on_train_batch_start(self, batch: Any, batch_idx: int) -> None:
        self._t0 = time.perf_counter()

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        elapsed = time.perf_counter() - self._t0
        self._all_tok += self._step_tokens
        self._all_sec += elapsed
        if self._skip > 0:
            self._skip -= 1
        else:
            self._tok += self._step_tokens
            self._sec += elapsed
        if self.global_step % self.cfg.tracking.log_every == 0 and self._all_sec > 0:
            self._log_throughput()

    @property
    def step_seconds(self) -> float:
        """Seconds spent in training steps so far (every step, this rank)."""
        return self._all_sec

    def _reduce_throughput(self) -> float:
        """Tokens/s summed over devices: all ranks' tokens over the slowest rank's step time."""
        tokens, seconds = (self._tok, self._sec) if self._sec > 0 else (self._all_tok, self._all_sec)
        tok = torch.tensor([float(tokens)], dtype=torch.float64, device=self.device)
        sec = torch.tensor([seconds], dtype=torch.float64, device=self.device)
        if self.trainer.world_size > 1 and dist.is_available() and dist.is_initialized():
            dist.all_reduce(tok, op=dist.ReduceOp.SUM)
            dist.all_reduce(sec, op=dist.ReduceOp.MAX)
        if sec.item() > 0:
            self.tokens_per_sec = tok.item() / sec.item()
        return self.tokens_per_sec

    def _log_throughput(self) -> None:
        self._reduce_throughput()
        lr = self.lr_schedulers().get_last_lr()[0]
        self.log_dict(
            {"train/tokens_per_sec": self.tokens_per_sec, "train/lr": lr},
            on_step=True,
            on_epoch=False,
            rank_zero_only=True,
            batch_size=1,
        )

    def on_train_end(self) -> None:
        self._reduce_throughput()
        tok = torch.tensor([float(self._all_tok)], dtype=torch.float64, device=self.device)
        if self.trainer.world_size > 1 and dist.is_available() and dist.is_initialized():
            dist.all_reduce(tok, op=dist.ReduceOp.SUM)
        self.train_tokens = int(tok.item())  # every step's tokens, all devices, resumed runs included

    def configure_optimizers(self):
        opt, sched = make_optimizer(self.model, self.cfg, self.clock.progress if self.clock else lambda: 0.0)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    # ------------------------------------------------------------------ decoding
    def translate(self, src: torch.Tensor, beam: int, len_penalty: float | None = None) -> list[list[int]]:
        """Token ids of the best hypothesis for each source row of ``src`` (B, S).

        ``len_penalty`` defaults to ``eval.len_penalty`` (beam search only).
        """
        e = self.cfg.eval
        if beam <= 1:
            return greedy(self.model, src, self.bos_id, self.eos_id, e.max_len_a, e.max_len_b)
        alpha = e.len_penalty if len_penalty is None else len_penalty
        return beam_search(
            self.model,
            src,
            beam,
            self.bos_id,
            self.eos_id,
            alpha,
            e.max_len_a,
            e.max_len_b,
            length_penalty=e.length_penalty,
        )

    def _eval_step(self, batch: dict[str, torch.Tensor], dataloader_idx: int, beam: int) -> None:
        logits = self.model(batch["src"], batch["tgt_in"])
        loss, ntok = token_loss(logits, batch["tgt_out"], self.pad_id, 0.0)
        self._eval_nll += torch.tensor([float(loss) * ntok, ntok], dtype=torch.float64)
        start = time.perf_counter()
        hyps = self.translate(batch["src"], beam)
        self._eval_time += time.perf_counter() - start
        out = self._eval.setdefault(dataloader_idx, [])
        for idx, ids in zip(batch["index"].tolist(), hyps):
            out.append((idx, self.detokenize(ids)))

    def _collect(self, dataloader_idx: int, n: int) -> list[str]:
        """Hypotheses of every rank, restored to corpus order; each sentence exactly once."""
        merged: dict[int, str] = {}
        for part in gather_objects(self._eval.get(dataloader_idx, [])):
            merged.update(part)
        missing = n - len(merged)
        if missing:
            raise RuntimeError(f"decoding covered {len(merged)} of {n} sentences")
        return [merged[i] for i in range(n)]

    def _reduce_nll(self) -> float:
        stats = self._eval_nll.clone()
        if dist.is_available() and dist.is_initialized():
            dist.all_reduce(stats, op=dist.ReduceOp.SUM)
        return math.exp(min(stats[0].item() / max(stats[1].item(), 1.0), 50.0))

    def _reset_eval(self) -> None:
        self._eval, self._eval_time = {}, 0.0
        self._eval_nll = torch.zeros(2, dtype=torch.float64)

    def on_validation_epoch_start(self) -> None:
        self._reset_eval()

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        self._eval_step(batch, 0, self.cfg.eval.val_beam)

    def on_validation_epoch_end(self) -> None:
        if self.trainer.sanity_checking:
            return
        refs = self.references[self.val_split]
        hyps = self._collect(0, len(refs))
        scores = corpus_scores(hyps, refs)
        ppl = self._reduce_nll()
        self.last_val = {"val/bleu": scores.bleu, "val/chrf": scores.chrf, "val/ppl": ppl}
        entry = {"step": int(self.global_step), **self.last_val}
        # one validation's scores and hypotheses together; the best is strictly better, as best.ckpt
        self.last_val_record = {**entry, "hypotheses": hyps}
        if scores.bleu > self.best_val_bleu:
            self.best_val_record = self.last_val_record
        self.best_val_bleu = max(self.best_val_bleu, scores.bleu)
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
        seconds = torch.tensor([self._eval_time], dtype=torch.float64)
        if dist.is_available() and dist.is_initialized():
            dist.all_reduce(seconds, op=dist.ReduceOp.MAX)
        for i, split in enumerate(self.test_splits):
            refs = self.references[split]
            hyps = self._collect(i, len(refs))
            scores = corpus_scores(hyps, refs)
            self.test_results[split] = {
                "hypotheses": hyps,
                "bleu": scores.bleu,
                "chrf": scores.chrf,
                "signature": scores.signature,
            }
            metrics[f"test_{split}/bleu"] = scores.bleu
            metrics[f"test_{split}/chrf"] = scores.chrf
            if i == 0:
                metrics["test/bleu"] = scores.bleu
                metrics["test/chrf"] = scores.chrf
        total = sum(len(self.references[s]) for s in self.test_splits)
        if seconds.item() > 0:
            metrics["test/sents_per_sec"] = total / seconds.item()
        self.test_metrics = metrics
        self.log_dict(metrics, sync_dist=False, batch_size=1)
        self._reset_eval()

    # ------------------------------------------------------------------ state
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        # the random state (dropout) too, so a resumed run continues the uninterrupted run's stream
        rng = {"torch": torch.get_rng_state()}
        if torch.cuda.is_available() and self.device.type == "cuda":
            rng["cuda"] = torch.cuda.get_rng_state(self.device)
        # what training measured, so a rerun that only decodes (killed during the test) still reports it
        measured = {
            "tok": self._tok,
            "sec": self._sec,
            "all_tok": self._all_tok,
            "all_sec": self._all_sec,
            "skip": self._skip,
            "loss": None if self.last_loss is None else float(self.last_loss),
        }
        checkpoint["ablate"] = {
            "history": self.history,
            "rng": rng,
            "measured": measured,
            "best_val_record": self.best_val_record,
            "train_tokens": self._all_tok,
        }

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        # A checkpoint may come from someone else's run folder: take only well-formed values, and
        # derive the best validation BLEU from the history rather than from a stored number.
        state = checkpoint.get("ablate") if isinstance(checkpoint.get("ablate"), dict) else {}
        self.history = checked_history(state.get("history"))
        self.best_val_bleu = max((h["val/bleu"] for h in self.history), default=-1.0)
        self.best_val_record = checked_record(state.get("best_val_record"), self.history)
        measured = state.get("measured") if isinstance(state.get("measured"), dict) else {}
        counts = {k: _nonnegative(measured.get(k)) for k in ("tok", "sec", "all_tok", "all_sec", "skip")}
        if None not in counts.values():
            self._tok, self._all_tok, self._skip = int(counts["tok"]), int(counts["all_tok"]), int(counts["skip"])
            self._sec, self._all_sec = counts["sec"], counts["all_sec"]
            if self._sec > 0 or self._all_sec > 0:
                self.tokens_per_sec = (self._tok / self._sec) if self._sec > 0 else self._all_tok / self._all_sec
        elif _nonnegative(state.get("train_tokens")) is not None:
            self._all_tok = int(state["train_tokens"])
        loss = measured.get("loss")
        if isinstance(loss, (int, float)) and math.isfinite(loss):
            self.last_loss = torch.tensor(float(loss))
        rng = state.get("rng") if isinstance(state.get("rng"), dict) else {}
        if isinstance(rng.get("torch"), torch.Tensor):
            torch.set_rng_state(rng["torch"])
        if isinstance(rng.get("cuda"), torch.Tensor) and torch.cuda.is_available():
            self._cuda_rng = rng["cuda"]  # applied once the module is on its device

    def on_train_start(self) -> None:
        cuda_rng = self._cuda_rng
        if cuda_rng is not None and self.device.type == "cuda":
            torch.cuda.set_rng_state(cuda_rng, self.device)
            self._cuda_rng = None


def _nonnegative(value: Any) -> float | None:
    """``value`` as a float when it is a finite, non-negative number, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


def checked_record(record: Any, history: list[dict[str, float]]) -> dict[str, Any]:
    """A checkpoint's best-validation record if well formed and one of the (checked) ``history``, else ``{}``."""
    if not isinstance(record, dict):
        return {}
    scores = checked_history([record])
    hyps = record.get("hypotheses")
    seen = {(h["step"], h["val/bleu"]) for h in history}
    if (
        not scores
        or (scores[0]["step"], scores[0]["val/bleu"]) not in seen
        or not isinstance(hyps, list)
        or not all(isinstance(h, str) for h in hyps)
    ):
        return {}
    return {**scores[0], "hypotheses": list(hyps)}


def checked_history(history: Any) -> list[dict[str, float]]:
    """The validation history of a checkpoint, keeping only well-formed entries.

    Each entry is ``{"step": int >= 0, "val/bleu": [0, 100], "val/chrf": [0, 100], "val/ppl": >= 1 or None}``;
    a planted or damaged entry (a BLEU of 1e9, a string, NaN) is dropped, not believed.
    """
    if not isinstance(history, list):
        return []
    out = []
    for entry in history:
        if not isinstance(entry, dict) or isinstance(entry.get("step"), bool) or not isinstance(entry.get("step"), int):
            continue
        bleu, chrf, ppl = (_nonnegative(entry.get(k)) for k in ("val/bleu", "val/chrf", "val/ppl"))
        if entry["step"] < 0 or bleu is None or bleu > 100 or chrf is None or chrf > 100:
            continue
        out.append({"step": entry["step"], "val/bleu": bleu, "val/chrf": chrf, "val/ppl": ppl})
    return out
