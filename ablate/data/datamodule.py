"""The LightningDataModule: cached encoded splits -> padded tensor batches.

A collated batch is a dict of LongTensors (pad id 0):

* ``src``     ``(B, S)``: subwords + [eos]
* ``tgt_in``  ``(B, T)``: [bos] + subwords
* ``tgt_out`` ``(B, T)``: subwords + [eos]
* ``index``   ``(B,)``: position of each sentence in its split (restores corpus order after
  length-sorted, rank-sharded decoding).

and what the host knows of it without reading a tensor back from a device (a training step that asked
the GPU would wait for it):

* ``src_tokens``, ``tgt_tokens`` ``int``: non-padding tokens of ``src`` and of ``tgt_out``.
* ``src_padded`` ``bool``: whether any ``src`` row is padded (if not, attention needs no padding mask).

Training batches come from :class:`TokenBatchSampler` (so the Trainer must be built with
``use_distributed_sampler=False``); evaluation batches are sorted by source length, bounded by
``eval.max_sentences`` and ``train.max_tokens``, and sharded across ranks.
"""

from __future__ import annotations

import os
from typing import Any, Optional

import datasets
import numpy as np
import pyarrow as pa
import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, Dataset

from ablate.config import DataConfig, EvalConfig, TrainConfig
from ablate.data.batching import FixedBatches, TokenBatchSampler, eval_batches
from ablate.data.encoded import Prepared, prepare
from ablate.data.errors import DataError
from ablate.data.tokenizer import BOS, EOS, PAD


def _lengths(ids: pa.ChunkedArray | pa.ListArray) -> np.ndarray:
    """Subwords per row of ``ids``, without the special token collation adds."""
    if isinstance(ids, pa.ChunkedArray):
        ids = ids.combine_chunks()
    return np.diff(ids.offsets.to_numpy())


def _pad(ids: pa.ChunkedArray | pa.ListArray, bos: bool) -> torch.Tensor:
    """``(B, L + 1)`` rows of ``ids`` with BOS prepended (``bos``) or EOS appended, right-padded."""
    if isinstance(ids, pa.ChunkedArray):
        ids = ids.combine_chunks()
    lengths = _lengths(ids)
    values = ids.flatten().to_numpy(zero_copy_only=False)
    width = int(lengths.max(initial=0)) + 1
    out = np.full((len(lengths), width), PAD, dtype=np.int64)
    cols = np.arange(width)
    shift = 1 if bos else 0
    out[(cols >= shift) & (cols < lengths[:, None] + shift)] = values
    if bos:
        out[:, 0] = BOS
    else:
        out[np.arange(len(lengths)), lengths] = EOS
    return torch.from_numpy(out)


class EncodedPairs(Dataset):
    """Map-style view of one encoded split; fetches whole batches at once (``__getitems__``)."""

    def __init__(self, split: datasets.Dataset):
        self.split = split.select_columns(["src_ids", "tgt_ids"]).with_format("arrow")

    def __len__(self) -> int:
        return len(self.split)

    def __getitems__(self, indices: list[int]) -> dict:
        table = self.split[list(indices)]
        return {"src": table.column("src_ids"), "tgt": table.column("tgt_ids"), "index": list(indices)}

    def __getitem__(self, index: int) -> dict:
        return self.__getitems__([index])


def collate(items: dict) -> dict[str, Any]:
    """Batch fetched by :meth:`EncodedPairs.__getitems__` -> padded tensors and host counts (module docstring)."""
    src_len, tgt_len = _lengths(items["src"]) + 1, _lengths(items["tgt"]) + 1  # + EOS
    return {
        "src": _pad(items["src"], bos=False),
        "tgt_in": _pad(items["tgt"], bos=True),
        "tgt_out": _pad(items["tgt"], bos=False),
        "index": torch.tensor(items["index"], dtype=torch.long),
        "src_tokens": int(src_len.sum()),
        "tgt_tokens": int(tgt_len.sum()),
        "src_padded": bool(src_len.min(initial=0) != src_len.max(initial=0)),
    }


def lengths(split: datasets.Dataset) -> tuple[np.ndarray, np.ndarray]:
    """Cached ``(src_len, tgt_len)`` subword counts of a split, as numpy arrays."""
    return split.data.column("src_len").to_numpy(), split.data.column("tgt_len").to_numpy()


class TranslationDataModule(pl.LightningDataModule):
    """Parallel text for training, validation and test, per ``DataConfig``.

    After :meth:`setup`: ``tokenizer``, ``val_split``, ``test_splits`` and ``stats`` (pairs per
    split, dropped/truncated/undecodable counts, vocabulary, ``cached``, ``seconds``).
    """

    def __init__(self, data: DataConfig, train: TrainConfig, eval: EvalConfig, seed: int):
        super().__init__()
        self.data_cfg, self.train_cfg, self.eval_cfg, self.seed = data, train, eval, seed
        self._prepared: Optional[Prepared] = None
        self.tokenizer = None
        self.val_split: str = ""
        self.test_splits: list[str] = []
        self.stats: dict = {}

    def setup(self, stage: Optional[str] = None) -> None:
        """Load the corpus, tokenizer and encoded splits (from the cache when present); idempotent."""
        if self._prepared is not None:
            return
        self._prepared = prepare(self.data_cfg)
        self.tokenizer = self._prepared.tokenizer
        self.val_split = self._prepared.val_split
        self.test_splits = list(self._prepared.test_splits)
        self.stats = self._prepared.stats

    def _split(self, name: str) -> datasets.Dataset:
        if self._prepared is None:
            raise RuntimeError("call setup() before asking the data module for data")
        if name not in self._prepared.splits:
            raise DataError(f"no split '{name}' in the corpus (have: {', '.join(self._prepared.splits)})")
        return self._prepared.splits[name]

    def references(self, split: str) -> list[str]:
        """Raw target sentences of ``split`` in corpus order (the BLEU references)."""
        return self._split(split).data.column("tgt").to_pylist()

    def sources(self, split: str) -> list[str]:
        """Raw source sentences of ``split`` in corpus order."""
        return self._split(split).data.column("src").to_pylist()

    def _rank_world(self) -> tuple[int, int]:
        trainer = getattr(self, "trainer", None)
        if trainer is None:
            return 0, 1
        return trainer.global_rank, trainer.world_size

    def _loader(self, split: datasets.Dataset, batch_sampler) -> DataLoader:
        workers = self.train_cfg.num_workers
        if workers > 0:
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # quiet the fork warning
        # a private generator: creating an iterator draws a worker seed from it, not from the
        # global stream that dropout uses (so a resumed run keeps the uninterrupted run's stream)
        generator = torch.Generator().manual_seed(self.seed)
        return DataLoader(
            EncodedPairs(split),
            batch_sampler=batch_sampler,
            collate_fn=collate,
            num_workers=workers,
            persistent_workers=workers > 0,
            pin_memory=torch.cuda.is_available(),
            generator=generator,
        )

    def train_sampler(self) -> TokenBatchSampler:
        """The training batch sampler for this rank, positioned at the trainer's current epoch."""
        rank, world = self._rank_world()
        src_len, tgt_len = lengths(self._split("train"))
        sampler = TokenBatchSampler(
            src_len, tgt_len, self.train_cfg.max_tokens, shuffle=True, seed=self.seed, rank=rank, world_size=world
        )
        trainer = getattr(self, "trainer", None)
        sampler.set_epoch(trainer.current_epoch if trainer is not None else 0)
        if trainer is not None and getattr(trainer, "global_step", 0) > 0 and len(sampler):
            # resuming from a checkpoint: skip what this epoch already trained on (the optimizer
            # steps once per ``accumulate`` batches, and at the end of every epoch)
            acc = max(self.train_cfg.accumulate, 1)
            per_epoch = -(-len(sampler) // acc)
            epoch, within = divmod(trainer.global_step, per_epoch)
            if epoch == trainer.current_epoch and within:
                sampler.resume(epoch, within * acc)
        return sampler

    def train_dataloader(self) -> DataLoader:
        return self._loader(self._split("train"), self.train_sampler())

    def eval_dataloader(self, split: str) -> DataLoader:
        """Deterministic, length-sorted batches of ``split``, this rank's shard."""
        rank, world = self._rank_world()
        src_len, tgt_len = lengths(self._split(split))
        batches = eval_batches(
            src_len, tgt_len, self.train_cfg.max_tokens, self.eval_cfg.max_sentences, rank=rank, world_size=world
        )
        return self._loader(self._split(split), FixedBatches(batches))

    def val_dataloader(self) -> DataLoader:
        return self.eval_dataloader(self.val_split)

    def test_dataloader(self) -> list[DataLoader]:
        """One loader per test split, in ``test_splits`` order."""
        return [self.eval_dataloader(name) for name in self.test_splits]
