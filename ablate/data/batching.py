"""Token-based batching: batches bounded by padded tokens, not by sentences (Vaswani et al. 2017,
section 5.1: "sentence pairs were batched together by approximate sequence length").

A batch's cost is ``batch_size * max length`` over both sides, counting the one special token
each collated row gets (``src`` + EOS, BOS + ``tgt``), i.e. exactly the padded size of the
larger of the ``src`` and ``tgt_in`` tensors. Lengths come from the cached arrays (numpy).
"""

from __future__ import annotations

from typing import Iterator, Optional

import numpy as np
from torch.utils.data import Sampler


def pack_sorted(cost: np.ndarray, max_tokens: int, max_sentences: Optional[int] = None) -> np.ndarray:
    """Boundaries of greedy batches over a non-decreasing ``cost`` array.

    Each batch ``cost[b[k]:b[k+1]]`` is the longest run from ``b[k]`` whose padded size
    ``count * cost[end - 1]`` fits ``max_tokens`` (a single over-long item forms its own batch).

    Returns:
        ``(n_batches + 1,)`` int array of start offsets followed by ``len(cost)``.
    """
    n, starts, i = len(cost), [], 0
    while i < n:
        hi = min(n, i + max(1, max_tokens // int(cost[i])))  # no batch from i can be longer
        if max_sentences:
            hi = min(hi, i + max_sentences)
        lo = i + 1  # always feasible; find the largest feasible end in [lo, hi] by bisection
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if (mid - i) * int(cost[mid - 1]) <= max_tokens:
                lo = mid
            else:
                hi = mid - 1
        starts.append(i)
        i = lo
    return np.asarray(starts + [n], dtype=np.int64)


class _EpochHook:
    """Lightning calls ``set_epoch`` on ``dataloader.batch_sampler.sampler``; forward it."""

    def __init__(self, owner: TokenBatchSampler):
        self.owner = owner

    def set_epoch(self, epoch: int) -> None:
        self.owner.set_epoch(epoch)


class TokenBatchSampler(Sampler):
    """Length-sorted batches of at most ``max_tokens`` padded tokens, reshuffled each epoch.

    Items are sorted by cost (``max(src_len, tgt_len) + specials``) with random tie-breaking,
    cut greedily into batches, and the batch order is shuffled; both use a generator seeded
    with ``(seed, epoch)``. Since ties only permute equal costs, the batch sizes and their
    number are the same every epoch. Under DDP the shuffled batches are dealt round-robin to
    ranks after dropping the last ``n_batches % world_size`` (different ones each epoch), so every
    rank gets distinct batches and the same number of them (unequal counts would hang DDP); if
    there are fewer batches than ranks, batches are repeated instead.

    Args:
        src_lens, tgt_lens: ``(N,)`` subword counts per item, without special tokens.
        max_tokens: upper bound of ``batch_size * max cost`` of every batch (unless one item alone
            exceeds it).
        shuffle: randomise ties and the batch order; otherwise a fixed, sorted order.
        seed: base seed; the data order of epoch ``e`` depends on ``(seed, e)`` only.
        rank, world_size: this process's share under data parallelism.
        specials: tokens added to each row by collation (1: EOS on src, BOS on tgt_in).
    """

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
        self.sampler = _EpochHook(self)
        self._resume: tuple[int, int] | None = None

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def resume(self, epoch: int, done: int) -> None:
        """Start the next pass over ``epoch`` after its first ``done`` batches (a mid-epoch resume).

        The order is a function of ``(seed, epoch)``, so a resumed run sees exactly the batches
        an uninterrupted one would have seen next. Applies once.
        """
        self.epoch, self._resume = epoch, (epoch, done)

    @property
    def n_batches(self) -> int:
        """Batches over all ranks, before equalising."""
        return len(self.bounds) - 1

    def __len__(self) -> int:
        total, ws = self.n_batches, self.world_size
        return max(total // ws, 1 if total else 0)

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
    """Deterministic batches for decoding, sorted by source length, this rank's share.

    Batches hold at most ``max_sentences`` items and ``max_tokens`` padded tokens (as in
    :class:`TokenBatchSampler`). With ``world_size > 1`` the largest batches are halved until the
    count divides evenly, then batches are dealt round-robin: every item lands on exactly one
    rank and all ranks get the same number of batches (when there are at least as many items).

    Returns:
        Lists of item indices, in decoding order.
    """
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


class FixedBatches(Sampler):
    """A batch sampler over a precomputed list of batches (evaluation)."""

    def __init__(self, batches: list[list[int]]):
        self.batches = batches

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self.batches)
