"""The inputs every variant sees: a fixed list of real token batches and a fixed decoding batch.

Batches come from the project's own pipeline (``prepare`` -> :class:`TokenBatchSampler` ->
``collate``), so they have the lengths and padding of real training: the first ``n`` batches of
epoch 0 of a seeded shuffle, i.e. a random sample of the corpus's batch shapes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ablate.bench.options import BenchOptions
from ablate.config import DataConfig
from ablate.data.cache import Prepared, prepare
from ablate.data.datamodule import EncodedPairs, TokenBatchSampler, collate, lengths

Batch = dict[str, Any]
"""A collated batch (:func:`ablate.data.datamodule.collate`): tensors on the device, host counts beside them."""


@dataclass
class Inputs:
    """What the measurements run on.

    Attributes:
        prepared: the encoded corpus (tokenizer, splits).
        batches: training batches, each ``{"src": (B, S), "tgt_in": (B, T), "tgt_out": (B, T), ...}``.
        tokens: non-padding source + target tokens of all ``batches`` together.
        decode_src: (N, S) padded source sentences for decoding, from the test (else validation) split.
    """

    prepared: Prepared
    batches: list[Batch]
    tokens: int
    decode_src: torch.Tensor

    @property
    def vocab(self) -> int:
        return self.prepared.tokenizer.tgt_vocab_size


def data_config(opts: BenchOptions, **changes) -> DataConfig:
    """The :class:`DataConfig` of the benchmark's text."""
    fields = dict(
        source=opts.data, vocab_size=opts.vocab_size, builtin_pairs=opts.builtin_pairs, cache_dir=opts.cache_dir
    )
    fields.update(changes)
    return DataConfig(**fields)


def batch_tokens(batch: Batch, pad_id: int = 0) -> int:
    """Non-padding source tokens plus non-padding target tokens (EOS included), as training counts them."""
    return int(batch["src"].ne(pad_id).sum() + batch["tgt_out"].ne(pad_id).sum())


def load_inputs(opts: BenchOptions, device: torch.device) -> Inputs:
    """Prepare (or load from the cache) the corpus and cut the fixed batches."""
    prepared = prepare(data_config(opts))
    train = prepared.splits["train"]
    src_len, tgt_len = lengths(train)
    sampler = TokenBatchSampler(src_len, tgt_len, opts.max_tokens, shuffle=True, seed=opts.seed)
    pairs = EncodedPairs(train)
    batches = []
    for indices in sampler:
        batch = collate(pairs.__getitems__(indices))
        batches.append({k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()})
        if len(batches) == opts.batches:
            break
    split = prepared.test_splits[0] if prepared.test_splits else prepared.val_split
    eval_pairs = EncodedPairs(prepared.splits[split])
    count = min(opts.decode_sentences, len(eval_pairs))
    decode_src = collate(eval_pairs.__getitems__(list(range(count))))["src"].to(device)
    return Inputs(prepared, batches, sum(batch_tokens(b) for b in batches), decode_src)
