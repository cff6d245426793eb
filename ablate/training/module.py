"""The LightningModule: a thin training shell around a plain ``nn.Module`` translation model.

It owns the loss (label-smoothed cross-entropy), the optimiser and the paper's learning-rate
schedule, decoding for validation and test BLEU (sacreBLEU on detokenized text), perplexity and
throughput. The model itself never imports Lightning.
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

from ablate.config import Config, peak_lr
from ablate.model.decoding import beam_search, greedy
from ablate.training.metrics import corpus_scores
from ablate.training.schedule import WarmupDecay


class NonFiniteLossError(RuntimeError):
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


class TranslationModule(pl.LightningModule):
    """Trains ``model`` on batches from :class:`ablate.data.datamodule.TranslationDataModule`.

    Args:
        model: encoder-decoder with ``forward(src, tgt_in) -> logits`` and the decoding interface
            of :mod:`ablate.model.decoding`.
        cfg: the resolved run configuration.
        detokenize: ids -> detokenized target text.
        references: raw target sentences per split name, in corpus order.
        bos_id, eos_id, pad_id: special token ids.
    """

    def __init__(
        self,
        model: nn.Module,
        cfg: Config,
        detokenize: Callable[[list[int]], str],
        references: dict[str, list[str]],
        bos_id: int = 1,
        eos_id: int = 2,
        pad_id: int = 0,
        val_split: str = "val",
        test_splits: tuple[str, ...] = ("test",),
        warmup_steps_excluded: int = 10,
    ):
        super().__init__()
        self.model = model
        self.cfg = cfg
        self.detokenize = detokenize
        self.references = references
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
        self.clock = None  # a TrainClock callback, set by the trainer's builder: budget progress

    # ------------------------------------------------------------------ training
    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        return self.model(src, tgt_in)

    def _loss(self, logits: torch.Tensor, target: torch.Tensor, smoothing: float) -> tuple[torch.Tensor, int]:
        """Mean token loss over non-padding targets; logits (B, T, V), target (B, T)."""
        ntok = int((target != self.pad_id).sum())
        loss = F.cross_entropy(
            logits.reshape(-1, logits.size(-1)).float(), target.reshape(-1),
            ignore_index=self.pad_id, label_smoothing=smoothing, reduction="sum",
        )
        return loss / max(ntok, 1), ntok

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        logits = self.model(batch["src"], batch["tgt_in"])
        loss, _ = self._loss(logits, batch["tgt_out"], self.cfg.train.label_smoothing)
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
        self.log_dict({"train/tokens_per_sec": self.tokens_per_sec, "train/lr": lr},
                      on_step=True, on_epoch=False, rank_zero_only=True, batch_size=1)

    def on_train_end(self) -> None:
        self._reduce_throughput()
        tok = torch.tensor([float(self._all_tok)], dtype=torch.float64, device=self.device)
        if self.trainer.world_size > 1 and dist.is_available() and dist.is_initialized():
            dist.all_reduce(tok, op=dist.ReduceOp.SUM)
        self.train_tokens = int(tok.item())  # every step's tokens, all devices, resumed runs included

    def configure_optimizers(self):
        t = self.cfg.train
        decay, no_decay = [], []
        for name, p in self.model.named_parameters():
            (no_decay if p.ndim < 2 or "norm" in name else decay).append(p)
        groups = [{"params": decay, "weight_decay": t.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
        lr = peak_lr(self.cfg)
        opt = torch.optim.AdamW(groups, lr=lr, betas=t.betas, eps=1e-9)
        ratio = t.min_lr / lr
        clock = self.clock
        sched = WarmupDecay(opt, t.schedule, t.warmup, ratio, progress=clock.progress if clock else lambda: 0.0)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    # ------------------------------------------------------------------ decoding
    def translate(self, src: torch.Tensor, beam: int) -> list[list[int]]:
        """Token ids of the best hypothesis for each source row of ``src`` (B, S)."""
        e = self.cfg.eval
        if beam <= 1:
            return greedy(self.model, src, self.bos_id, self.eos_id, e.max_len_a, e.max_len_b)
        return beam_search(self.model, src, beam, self.bos_id, self.eos_id, e.len_penalty, e.max_len_a, e.max_len_b,
                           length_penalty=e.length_penalty)

    def _eval_step(self, batch: dict[str, torch.Tensor], dataloader_idx: int, beam: int) -> None:
        logits = self.model(batch["src"], batch["tgt_in"])
        loss, ntok = self._loss(logits, batch["tgt_out"], 0.0)
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
            self.test_results[split] = {"hypotheses": hyps, "bleu": scores.bleu, "chrf": scores.chrf,
                                        "signature": scores.signature}
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
        checkpoint["ablate"] = {"history": self.history, "best_val_bleu": self.best_val_bleu, "rng": rng,
                                "best_val_record": self.best_val_record, "train_tokens": self._all_tok}

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        state = checkpoint.get("ablate", {})
        self.history = list(state.get("history", []))
        self.best_val_bleu = float(state.get("best_val_bleu", -1.0))
        self.best_val_record = dict(state.get("best_val_record") or {})
        self._all_tok = int(state.get("train_tokens", 0))
        rng = state.get("rng") or {}
        if "torch" in rng:
            torch.set_rng_state(rng["torch"])
        if "cuda" in rng and torch.cuda.is_available():
            self._cuda_rng = rng["cuda"]  # applied once the module is on its device

    def on_train_start(self) -> None:
        cuda_rng = getattr(self, "_cuda_rng", None)
        if cuda_rng is not None and self.device.type == "cuda":
            torch.cuda.set_rng_state(cuda_rng, self.device)
            self._cuda_rng = None
