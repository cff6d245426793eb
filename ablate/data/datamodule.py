"""The LightningDataModule and its batches: cached encoded splits -> padded tensor batches.

Training batches are bounded by padded tokens, not sentences (Vaswani et al. 2017, sec. 5.1: "sentence
pairs were batched together by approximate sequence length"): a batch costs ``batch_size * max length``
over both sides, counting the one special token each row gets (``src`` + EOS, BOS + ``tgt``), i.e. exactly
the padded size of the larger of ``src`` and ``tgt_in``. A collated batch is a dict of LongTensors (pad 0):
``src`` (B, S) subwords + [eos]; ``tgt_in`` (B, T) [bos] + subwords; ``tgt_out`` (B, T) subwords + [eos];
``index`` (B,) each sentence's position in its split (restores corpus order after length-sorted,
rank-sharded decoding); and what the host knows without reading a device tensor back: ``src_tokens``,
``tgt_tokens`` (non-padding tokens of ``src`` and ``tgt_out``) and ``src_padded`` (whether any ``src`` row is
padded; if not, attention needs no mask). The Trainer is built with ``use_distributed_sampler=False``."""

from __future__ import annotations

import bisect
import os
from typing import Any, Iterator, Optional

import datasets
import numpy as np
import pyarrow as pa
import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from ablate.config import DataConfig, EvalConfig, TrainConfig
from ablate.data.cache import Prepared, lengths, prepare
from ablate.data.sources import DataError
from ablate.data.tokenizer import BOS, EOS, PAD, SubwordTokenizer


def pack_sorted(cost: np.ndarray, max_tokens: int) -> np.ndarray:
    """Boundaries ``(n_batches + 1,)`` of greedy batches over a non-decreasing ``cost``: each batch is the
    longest run whose padded size ``count * cost[end - 1]`` fits ``max_tokens`` (an over-long item alone)."""
    n, starts, i = len(cost), [], 0
    while i < n:
        hi = min(n, i + max(1, max_tokens // int(cost[i])))  # no batch from i can be longer
        fits = bisect.bisect_right(range(i + 1, hi + 1), max_tokens, key=lambda end: (end - i) * int(cost[end - 1]))
        starts.append(i)
        i += max(fits, 1)  # an over-long item alone
    return np.asarray(starts + [n], dtype=np.int64)


class TokenBatchSampler(Sampler):
    """Length-sorted batches of at most ``max_tokens`` padded tokens, reshuffled each epoch.

    Items are sorted by cost (``max(src_len, tgt_len) + specials``, ``specials`` tokens added per row by
    collation) with random tie-breaking, cut greedily into batches, and the batch order shuffled, all seeded
    with ``(seed, epoch)``; ties only permute equal costs, so the batch sizes are the same every epoch. Under
    DDP the shuffled batches are dealt round-robin after dropping the last ``n_batches % world_size``, so every
    rank gets as many distinct batches (unequal counts would hang DDP); fewer batches than ranks are repeated."""

    def __init__(
        self,
        src_lens,
        tgt_lens,
        max_tokens: int,
        shuffle: bool = True,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        specials: int = 1,
    ):
        if not 0 <= rank < world_size:
            raise ValueError(f"rank={rank} must be in [0, world_size={world_size})")
        if max_tokens <= 0:
            raise ValueError(f"max_tokens={max_tokens} must be positive")
        src_lens, tgt_lens = np.asarray(src_lens), np.asarray(tgt_lens)
        if src_lens.shape != tgt_lens.shape:
            raise ValueError(f"{len(src_lens)} source lengths but {len(tgt_lens)} target lengths")
        cost = np.maximum(src_lens, tgt_lens).astype(np.int64) + specials
        # small integer keys let numpy's stable sort use radix sort (fast at WMT scale)
        self.cost = cost.astype(np.int16 if cost.max(initial=0) < (1 << 15) else np.int64)
        self.max_tokens, self.shuffle, self.seed = max_tokens, shuffle, seed
        self.rank, self.world_size = rank, world_size
        self.bounds = pack_sorted(np.sort(self.cost, kind="stable"), max_tokens)
        self.epoch = 0
        self.sampler = self  # Lightning calls set_epoch on dataloader.batch_sampler.sampler
        self._resume: tuple[int, int] | None = None

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def resume(self, epoch: int, done: int) -> None:
        """Start the next pass over ``epoch`` after its first ``done`` batches, once: the order is a function of
        ``(seed, epoch)``, so a resumed run sees the batches an uninterrupted one would have seen next."""
        self.epoch, self._resume = epoch, (epoch, done)

    def __len__(self) -> int:
        total = len(self.bounds) - 1  # over all ranks, before equalising
        return max(total // self.world_size, 1 if total else 0)

    def __iter__(self) -> Iterator[list[int]]:
        if self.shuffle:  # two stable radix sorts (16-bit keys): by random noise, then by cost
            rng = np.random.default_rng([self.seed, self.epoch])
            by_noise = np.argsort(rng.integers(0, 1 << 16, len(self.cost), dtype=np.uint16), kind="stable")
            order = by_noise[np.argsort(self.cost[by_noise], kind="stable")]
        else:
            order = np.argsort(self.cost, kind="stable")
        batches = [order[s:e] for s, e in zip(self.bounds[:-1], self.bounds[1:])]
        if self.shuffle:
            batches = [batches[k] for k in rng.permutation(len(batches))]
        if self.world_size > 1 and batches:
            if len(batches) >= self.world_size:
                batches = batches[: len(batches) - len(batches) % self.world_size]
            else:
                batches = (batches * self.world_size)[: self.world_size]
            batches = batches[self.rank :: self.world_size]
        if self._resume is not None:
            epoch, done = self._resume
            self._resume = None
            if epoch == self.epoch:
                batches = batches[done:]
        for batch in batches:
            yield batch.tolist()


def eval_batches(
    src_lens, tgt_lens, max_tokens: int, max_sentences: int, rank: int = 0, world_size: int = 1, specials: int = 1
) -> list[list[int]]:
    """This rank's deterministic decoding batches (item indices), sorted by source length, of at most
    ``max_sentences`` items and ``max_tokens`` padded tokens. With ``world_size > 1`` the largest batches are
    halved until the count divides evenly, then dealt round-robin: every item on exactly one rank."""
    src_lens, tgt_lens = np.asarray(src_lens), np.asarray(tgt_lens)
    order = np.argsort(src_lens, kind="stable")
    cost = np.maximum(src_lens, tgt_lens)[order].astype(np.int64) + specials
    batches, start, longest = [], 0, 0
    for i, c in enumerate(cost):
        longest_if = max(longest, int(c))
        if i > start and ((i - start + 1) * longest_if > max_tokens or i - start >= max_sentences):
            batches.append(order[start:i].tolist())
            start, longest_if = i, int(c)
        longest = longest_if
    if start < len(order):
        batches.append(order[start:].tolist())
    while world_size > 1 and len(batches) % world_size and max(map(len, batches), default=0) > 1:
        k = max(range(len(batches)), key=lambda j: len(batches[j]))
        half = len(batches[k]) // 2
        batches[k : k + 1] = [batches[k][:half], batches[k][half:]]
    return batches[rank::world_size]


def _lengths(ids: pa.ChunkedArray | pa.ListArray) -> np.ndarray:
    """Subwords per row of ``ids``, without the special token collation adds."""
    if isinstance(ids, pa.ChunkedArray):
        ids = ids.combine_chunks()
    return np.diff(ids.offsets.to_numpy())


def pad_rows(ids: pa.ChunkedArray | pa.ListArray, bos: bool) -> torch.Tensor:
    """``(B, L + 1)`` rows of ``ids`` with BOS prepended (``bos``) or EOS appended, right-padded."""
    if isinstance(ids, pa.ChunkedArray):
        ids = ids.combine_chunks()
    lengths = _lengths(ids)
    values = ids.flatten().to_numpy(zero_copy_only=False)
    width = int(lengths.max(initial=0)) + 1
    out = np.full((len(lengths), width), PAD, dtype=np.int64)
    cols, shift = np.arange(width), int(bos)
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
        "src": pad_rows(items["src"], bos=False),
        "tgt_in": pad_rows(items["tgt"], bos=True),
        "tgt_out": pad_rows(items["tgt"], bos=False),
        "index": torch.tensor(items["index"], dtype=torch.long),
        "src_tokens": int(src_len.sum()),
        "tgt_tokens": int(tgt_len.sum()),
        "src_padded": bool(src_len.min(initial=0) != src_len.max(initial=0)),
    }


class TranslationDataModule(pl.LightningDataModule):
    """Parallel text for training, validation and test; after :meth:`setup`: ``tokenizer``, ``val_split``,
    ``test_splits`` and ``stats`` (pairs per split, dropped/truncated/undecodable counts, vocabulary, ``cached``)."""

    def __init__(self, data: DataConfig, train: TrainConfig, eval: EvalConfig, seed: int):
        super().__init__()
        self.data_cfg, self.train_cfg, self.eval_cfg, self.seed = data, train, eval, seed
        self._prepared: Optional[Prepared] = None
        self.val_split: str = ""
        self.test_splits: list[str] = []
        self.stats: dict = {}

    def setup(self, stage: Optional[str] = None) -> None:
        """Load the corpus, tokenizer and encoded splits (from the cache when present); idempotent."""
        if self._prepared is not None:
            return
        self._prepared = prepare(self.data_cfg)
        self.val_split = self._prepared.val_split
        self.test_splits = list(self._prepared.test_splits)
        self.stats = self._prepared.stats
        self._check_fits()

    def _check_fits(self) -> None:
        """Refuse a training pair that no batch of ``train.max_tokens`` padded tokens holds (as fairseq's
        ``batch_by_size`` does): alone in its batch, it would be the step that runs out of memory."""
        train = self._split("train")
        cost = np.maximum(*lengths(train)) + 1  # + EOS / BOS
        limit = self.train_cfg.max_tokens
        if len(cost) and cost.max() > limit:
            i, over = int(cost.argmax()), int((cost > limit).sum())
            raise DataError(
                f"{over} training {'pair is' if over == 1 else 'pairs are'} longer than train.max_tokens={limit} padded tokens, "
                f"the longest {cost[i]} ({train[i]['src'][:40]!r}...): raise train.max_tokens to {cost[i]}, or lower "
                f"data.max_len to {limit - 1} to drop them"
            )

    @property
    def tokenizer(self) -> SubwordTokenizer:
        return self._ready().tokenizer

    def _ready(self) -> Prepared:
        if self._prepared is None:
            raise RuntimeError("call setup() before asking the data module for data")
        return self._prepared

    def _split(self, name: str) -> datasets.Dataset:
        splits = self._ready().splits
        if name not in splits:
            raise DataError(f"no split '{name}' in the corpus (have: {', '.join(splits)})")
        return splits[name]

    def references(self, split: str) -> list[str]:
        """Raw target sentences of ``split`` in corpus order (the BLEU references)."""
        return self._split(split).data.column("tgt").to_pylist()

    def sources(self, split: str) -> list[str]:
        """Raw source sentences of ``split`` in corpus order."""
        return self._split(split).data.column("src").to_pylist()

    def _rank_world(self) -> tuple[int, int]:
        trainer = getattr(self, "trainer", None)
        return (0, 1) if trainer is None else (trainer.global_rank, trainer.world_size)

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
            collate_fn=collate,  # type: ignore[arg-type]  # given __getitems__'s dict, not a list (torch's stub)
            num_workers=workers,
            persistent_workers=workers > 0,
            pin_memory=torch.cuda.is_available(),
            generator=generator,
        )

    def train_sampler(self) -> TokenBatchSampler:
        """The training batch sampler for this rank, positioned at the trainer's current epoch."""
        rank, world = self._rank_world()
        sampler = TokenBatchSampler(
            *lengths(self._split("train")), self.train_cfg.max_tokens, seed=self.seed, rank=rank, world_size=world
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
        data = self._split(split)
        batches = eval_batches(
            *lengths(data), self.train_cfg.max_tokens, self.eval_cfg.max_sentences, rank=rank, world_size=world
        )
        return self._loader(data, batches)  # a list of index lists is a batch sampler

    def val_dataloader(self) -> DataLoader:
        return self.eval_dataloader(self.val_split)

    def test_dataloader(self) -> list[DataLoader]:
        """One loader per test split, in ``test_splits`` order."""
        return [self.eval_dataloader(name) for name in self.test_splits]
