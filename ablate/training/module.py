"""The LightningModule: a thin training shell around a plain ``nn.Module`` translation model.

The loss and the optimiser with its learning-rate schedule are plain functions
(:mod:`ablate.training.objective`) that ``ablate bench`` calls too; throughput is measured by the
:class:`~ablate.training.throughput.Throughput` callback. The module wires the loss into
Lightning's steps, decodes for validation and test BLEU (sacreBLEU on detokenized text) and
measures perplexity. The model itself never imports Lightning.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any, Callable

import pytorch_lightning as pl
import torch
import torch.distributed as dist
from torch import nn

from ablate.config import Config, flatten, from_flat, to_dict
from ablate.errors import AblateError
from ablate.model.build import build_model
from ablate.model.decoding import beam_search, greedy
from ablate.record import DEV_BLEU, DEV_CHRF, DEV_PPL
from ablate.training.metrics import corpus_scores, test_scores
from ablate.training.objective import clip_gradients, make_optimizer, sequence_loss
from ablate.training.record_checks import checked_history, checked_record


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
    """Trains ``model`` on batches from :class:`ablate.data.datamodule.TranslationDataModule`.

    ``TranslationModule.load_from_checkpoint(run_dir / "checkpoints/best.ckpt")`` rebuilds it
    from the checkpoint alone (the config and vocabulary sizes are its hyperparameters); a plugin that
    config names is imported only if this process already runs the same code (the user's config,
    ``ablate.utils.plugins.load([...])``) or it is an installed module, unless
    ``load_from_checkpoint(path, trust_plugins=True)`` says to import what the checkpoint names. Attach
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
        trust_plugins: a ``cfg`` given as a dict (a checkpoint's) may import every plugin it names;
            without it, only those the user vouched for (:func:`ablate.utils.plugins.unvouched`).
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

    def logs_now(self) -> bool:
        """Whether this training step is one whose values are logged (``tracking.log_every``, and Lightning's
        ``log_every_n_steps``): the only steps that may read a tensor's value on the host."""
        step = self.global_step + 1  # the optimizer step this batch completes
        every = [self.cfg.tracking.log_every, getattr(self._trainer, "log_every_n_steps", 0) or 0]
        return any(n > 0 and step % n == 0 for n in every)

    def training_step(self, batch: dict[str, Any], batch_idx: int) -> torch.Tensor:
        loss, _ = sequence_loss(self.model, batch, self.pad_id, self.cfg.train.label_smoothing)
        self._note_finite(loss.detach())
        self.last_loss = loss.detach()
        if self.logs_now():
            self.check_finite()
            # not prog_bar=True: Lightning would read the logged tensor back on every later step
            self.log("train/loss", loss, on_step=True, on_epoch=False, batch_size=1)
            self.bar_metrics["train/loss"] = float(self.last_loss)
        return loss

    def _note_finite(self, loss: torch.Tensor) -> None:
        """Remember, on the device, the first step whose loss is NaN or infinite (read by :meth:`check_finite`)."""
        if self._first_non_finite is None or self._first_non_finite.device != loss.device:
            self._first_non_finite = torch.full((), -1, dtype=torch.long, device=loss.device)
        first = self._first_non_finite
        self._first_non_finite = torch.where(~torch.isfinite(loss) & (first < 0), self.global_step, first)

    def check_finite(self) -> None:
        """Raise :class:`NonFiniteLossError` naming the first step whose loss was not finite, if there was one.

        Training steps only note it on the device; this reads it, at the steps that log and before anything
        is validated or saved, so a diverged run neither reports nor checkpoints its weights.
        """
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
        loss, ntok = sequence_loss(self.model, batch, self.pad_id, 0.0)
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
        stats = self.trainer.strategy.reduce(self._eval_nll.to(self.device), reduce_op="sum")
        return math.exp(min(stats[0].item() / max(stats[1].item(), 1.0), 50.0))

    def _reset_eval(self) -> None:
        self._eval, self._eval_time = {}, 0.0
        self._eval_nll = torch.zeros(2, dtype=torch.float64)

    def on_validation_epoch_start(self) -> None:
        self.check_finite()
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
        self.last_val = {DEV_BLEU.key: scores.bleu, DEV_CHRF.key: scores.chrf, DEV_PPL.key: ppl}
        entry: dict[str, Any] = {"step": int(self.global_step), **self.last_val}
        if (norm := self.grad_norm_value()) is not None:
            entry["train/grad_norm"] = norm  # of the step that made the weights validated (before clipping)
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
        seconds = self.trainer.strategy.reduce(
            torch.tensor(self._eval_time, dtype=torch.float64, device=self.device), reduce_op="max"
        )
        for i, split in enumerate(self.test_splits):
            refs = self.references[split]
            hyps = self._collect(i, len(refs))
            scores = test_scores(hyps, refs)  # BLEU, chrF, chrF++, TER
            self.test_results[split] = {
                "hypotheses": hyps,
                **scores.values(),
                "signature": scores.signature,
                "chrf_signature": scores.chrf_signature,
                "signatures": scores.signatures,
            }
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
            "best_val_record": self.best_val_record,
            # so a rerun that only decodes (killed during the test) still reports it
            "last_loss": None if self.last_loss is None else float(self.last_loss),
        }

    @classmethod
    def load_from_checkpoint(cls, checkpoint_path: Any, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        """Lightning's ``load_from_checkpoint``, after verifying the file (zip CRCs, the run record's sha256).

        Raises:
            CheckpointError: the file is damaged (one line naming it and what to do).
        """
        from ablate.training.checkpoint_io import verify_checkpoint

        if isinstance(checkpoint_path, (str, os.PathLike)):
            verify_checkpoint(os.fspath(checkpoint_path))
        return super().load_from_checkpoint(checkpoint_path, *args, **kwargs)

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        # A checkpoint may come from someone else's run folder: take only well-formed values, and
        # derive the best validation BLEU from the history rather than from a stored number.
        state = checkpoint.get("ablate") if isinstance(checkpoint.get("ablate"), dict) else {}
        self.history = checked_history(state.get("history"))
        self.best_val_bleu = max((h[DEV_BLEU.key] for h in self.history), default=-1.0)
        self.best_val_record = checked_record(state.get("best_val_record"), self.history)
        # the throughput counters are the Throughput callback's; older checkpoints kept the loss beside them
        measured = state.get("measured") if isinstance(state.get("measured"), dict) else {}
        loss = state.get("last_loss", measured.get("loss"))
        if isinstance(loss, (int, float)) and math.isfinite(loss):
            self.last_loss = torch.tensor(float(loss))
        rng = state.get("rng") if isinstance(state.get("rng"), dict) else {}
        if isinstance(rng.get("torch"), torch.Tensor):
            torch.set_rng_state(rng["torch"])
        if isinstance(rng.get("cuda"), torch.Tensor) and torch.cuda.is_available():
            self._cuda_rng = rng["cuda"]  # applied once the module is on its device

    def on_train_end(self) -> None:
        self.check_finite()

    def on_train_start(self) -> None:
        cuda_rng = self._cuda_rng
        if cuda_rng is not None and self.device.type == "cuda":
            torch.cuda.set_rng_state(cuda_rng, self.device)
            self._cuda_rng = None
