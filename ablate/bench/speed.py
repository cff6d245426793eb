"""What is timed in this process: the inputs, the ``torch.nn.Transformer`` reference, training and decoding.

* Inputs: the first ``n`` real token batches of a seeded shuffle from the project's own pipeline
  (``prepare`` -> :class:`TokenBatchSampler` -> ``collate``), and a fixed decoding batch.
* The reference (:class:`TorchTransformer`): PyTorch's own encoder and decoder layers inside our tied,
  sqrt(d_model)-scaled embeddings and sinusoidal positions (Vaswani et al. 2017, sec. 3.4-3.5), with
  dropout where ours has it (sec. 5.4), so both models do the same work.
* Training: one step is what ``ablate train`` does per batch minus Lightning's hooks (forward,
  label-smoothed loss, backward, clipping, AdamW and schedule); tokens/s counts non-padding tokens.
* Decoding: greedy and beam search with and without the key/value cache, every hypothesis held to
  ``decode_len`` tokens (:class:`FixedLength`), so the modes do the same steps.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass
from typing import Any, Callable, Optional, cast

import torch
from torch import Tensor, nn

from ablate.bench import BenchError, BenchOptions, timing
from ablate.bench.timing import compute_clock, interleaved, median, paired, paired_interval, spread
from ablate.config import Config, DataConfig, from_flat
from ablate.data.cache import Prepared, prepare
from ablate.data.datamodule import EncodedPairs, TokenBatchSampler, collate, lengths
from ablate.errors import did_you_mean
from ablate.model.build import build_model
from ablate.model.decoding import Seq2Seq, beam_search, greedy
from ablate.model.positions import POSITIONS, sinusoids
from ablate.model.scores import SCORES
from ablate.training.module import batch_tokens, make_optimizer, sequence_loss, token_loss

Batch = dict[str, Any]  # a collated batch (:func:`ablate.data.datamodule.collate`) on the device


@dataclass
class Inputs:
    """What the measurements run on: the encoded corpus, training ``batches`` (``{"src": (B, S), "tgt_in":
    (B, T), "tgt_out": (B, T), ...}``), their non-padding ``tokens``, and ``decode_src`` (N, S) from the test
    (else validation) split."""

    prepared: Prepared
    batches: list[Batch]
    tokens: int
    decode_src: torch.Tensor

    @property
    def vocab(self) -> int:
        return self.prepared.tokenizer.tgt_vocab_size


def load_inputs(opts: BenchOptions, device: torch.device) -> Inputs:
    """Prepare (or load from the cache) the corpus and cut the fixed batches."""
    sources = {k: getattr(opts, k) for k in ("vocab_size", "builtin_pairs", "cache_dir")}
    prepared = prepare(DataConfig(source=opts.data, **sources))
    train = prepared.splits["train"]
    sampler = TokenBatchSampler(*lengths(train), opts.max_tokens, shuffle=True, seed=opts.seed)
    pairs = EncodedPairs(train)
    batches = [
        {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in collate(pairs.__getitems__(i)).items()}
        for i in itertools.islice(sampler, opts.batches)
    ]
    split = prepared.test_splits[0] if prepared.test_splits else prepared.val_split
    eval_pairs = EncodedPairs(prepared.splits[split])
    count = min(opts.decode_sentences, len(eval_pairs))
    decode_src = collate(eval_pairs.__getitems__(list(range(count))))["src"].to(device)
    return Inputs(prepared, batches, sum(batch_tokens(b, 0) for b in batches), decode_src)


class TorchTransformer(nn.Module):
    """``torch.nn.Transformer`` (``layers`` encoder and ``layers`` decoder layers) between a tied embedding
    and output layer over a joint ``vocab``; ``dropout`` on the embeddings and sublayer outputs,
    ``attention_dropout`` on the attention weights (none inside the feed-forward, as ours), the ``pad_id``
    row starting at zero; ``norm_first``: pre-norm layers and a final LayerNorm after each stack."""

    def __init__(
        self,
        vocab: int,
        d_model: int,
        heads: int,
        layers: int,
        d_ff: int,
        dropout: float = 0.1,
        attention_dropout: float = 0.0,
        pad_id: int = 0,
        max_positions: int = 1024,
        norm_first: bool = False,
    ):
        super().__init__()
        self.pad_id, self.d_model = pad_id, d_model
        self.embed = nn.Embedding(vocab, d_model, padding_idx=pad_id)
        self.table: Tensor
        self.register_buffer("table", sinusoids(torch.arange(max_positions), d_model), persistent=False)
        self.drop = nn.Dropout(dropout)

        shape: dict[str, Any] = dict(dim_feedforward=d_ff, dropout=dropout, batch_first=True, norm_first=norm_first)
        encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(d_model, heads, **shape),
            layers,
            norm=nn.LayerNorm(d_model) if norm_first else None,
            enable_nested_tensor=False,
        )
        decoder_layer = nn.TransformerDecoderLayer(d_model, heads, **shape)
        decoder = nn.TransformerDecoder(decoder_layer, layers, norm=nn.LayerNorm(d_model) if norm_first else None)
        self.transformer = nn.Transformer(
            d_model, heads, batch_first=True, custom_encoder=encoder, custom_decoder=decoder
        )
        for module in self.transformer.modules():
            if isinstance(module, nn.MultiheadAttention):
                module.dropout = attention_dropout
            if isinstance(module, (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer)):
                module.dropout = nn.Identity()  # type: ignore[assignment]  # in the feed-forward: relu(x W1) W2, no dropout
        self.generator = nn.Linear(d_model, vocab, bias=False)
        nn.init.normal_(self.embed.weight, 0.0, d_model**-0.5)
        with torch.no_grad():
            self.embed.weight[pad_id].zero_()
        self.generator.weight = self.embed.weight

    def _embed(self, tokens: Tensor) -> Tensor:
        x = self.embed(tokens) * math.sqrt(self.d_model)
        return self.drop(x + self.table[: tokens.size(1)].to(x.dtype))

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher-forced logits: (B, S), (B, T) -> (B, T, V)."""
        src_pad = src.eq(self.pad_id)  # (B, S)
        causal = nn.Transformer.generate_square_subsequent_mask(tgt_in.size(1), device=src.device)  # (T, T)
        out = self.transformer(
            self._embed(src),
            self._embed(tgt_in),
            tgt_mask=causal,
            src_key_padding_mask=src_pad,
            memory_key_padding_mask=src_pad,
            tgt_is_causal=True,
        )  # (B, T, D)
        return self.generator(out)


REFERENCE = "torch"  # the ``torch.nn.Transformer`` contender
STANDARD = "dot-scaled"  # the base Transformer (dot, scaled, sinusoidal): what ratios are taken against
ALL_ROWS = "dot-scaled-all-rows"  # the standard model over every position, padding included (no packed rows)
MATMUL = "matmul-peak"  # the square-matmul contender that measures the hardware's peak


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
    sizes = {f"model.{k}": getattr(opts, k) for k in ("d_model", "layers", "heads", "d_ff")}
    flat = {"model.rnn.hidden": opts.d_model, "data.vocab_size": opts.vocab_size, "seed": opts.seed}
    return from_flat({**sizes, **flat, "plugins": list(opts.plugins), **changes})


@dataclass
class Trainee:
    """A model with its loss, optimiser and schedule; ``dtype`` the autocast dtype (None: the device's)."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: Any
    clip_norm: float
    smoothing: float
    dev: torch.device
    dtype: Optional[torch.dtype] = None
    all_rows: bool = False  # every position computed (padding included), as the reference computes them

    @property
    def params(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    def loss(self, batch: Batch) -> torch.Tensor:
        """Ours: the training loss (:func:`~ablate.training.module.sequence_loss`: the non-padding source and
        target positions only); the reference (and :data:`ALL_ROWS`): the same loss over full (B, T, V) logits."""
        with timing.autocast(self.dev, self.dtype):
            if self.all_rows:
                logits = self.model(batch["src"], batch["tgt_in"])  # (B, T, V), nothing else reads them
                return token_loss(logits, batch["tgt_out"], 0, self.smoothing, overwrite=True)[0]
            return sequence_loss(self.model, batch, 0, self.smoothing)[0]

    def step(self, batch: Batch) -> None:
        self.loss(batch).backward()
        if self.clip_norm:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.clip_norm)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)

    def forward_backward(self, batches: list[Batch]) -> None:
        """Forward and backward only on each of ``batches`` (what FLOPs are counted on); gradients are dropped."""
        for batch in batches:
            self.loss(batch).backward()
            self.optimizer.zero_grad(set_to_none=True)

    def contender(self, batches: list[Batch]) -> Callable[[], None]:
        """One round for :func:`~ablate.bench.timing.interleaved`: a :meth:`step` on each of ``batches``."""

        def run() -> None:
            for batch in batches:
                self.step(batch)

        return run


def make_trainee(name: str, opts: BenchOptions, vocab: int, dev: torch.device) -> Trainee:
    """Build variant ``name`` (a key of :func:`variants`) with its optimiser, seeded by ``opts.seed``."""
    cfg = variant_config(opts, variants()[name])  # a name selected() checked, or the GPU check's own
    torch.manual_seed(opts.seed)
    if name == REFERENCE:
        m = cfg.model
        sizes = (vocab, m.d_model, m.heads, m.layers, m.d_ff, m.dropout, m.attention_dropout)
        model: nn.Module = TorchTransformer(*sizes, pad_id=0, max_positions=m.max_positions, norm_first=m.norm == "pre")
    else:
        model = build_model(cfg.model, vocab, vocab, pad_id=0, shared_vocab=True)
    model = model.to(dev).train()
    optimizer, scheduler = make_optimizer(model, cfg)
    smoothing, all_rows = cfg.train.label_smoothing, name in (REFERENCE, ALL_ROWS)
    return Trainee(model, optimizer, scheduler, cfg.train.clip_norm, smoothing, dev, all_rows=all_rows)


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


def bench_training(
    opts: BenchOptions, inputs: Inputs, dev: torch.device, echo: Callable[[str], None] = lambda s: None
) -> dict[str, Any]:
    """Tokens/s (seconds of ``clock``, CPU seconds on a CPU) of every selected variant, interleaved
    round-robin over the same batches, with ratios paired per round and FLOPs, MFU and SDPA backend."""
    trainees = {name: make_trainee(name, opts, inputs.vocab, dev) for name in selected(opts)}
    census: dict[str, tuple[float, str]] = {}
    if opts.flops:
        echo("counting model FLOPs (one forward + backward per variant and batch)")
        for name, trainee in trainees.items():
            flops, ops = timing.census(lambda: trainee.forward_backward(inputs.batches))  # noqa: B023 - called here
            census[name] = (flops, timing.sdpa_backend(ops))
    matmul, matmul_flops = timing.matmul_work(dev)
    matmul()
    contenders = {name: t.contender(inputs.batches) for name, t in trainees.items()}
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
        row["ratio_vs_torch"], row["ratio_vs_torch_spread"] = paired(secs, seconds[REFERENCE])
        row["ratio_vs_standard"], row["ratio_vs_standard_spread"] = paired(secs, seconds[STANDARD])
        results[name] = row
    return {
        "clock": clock_name,
        "variants": results,
        "matmul_gflops": peak,
        "tokens_per_pass": inputs.tokens,
        "batches": [list(b["src"].shape) + [b["tgt_in"].size(1)] for b in inputs.batches],
    }


class FixedLength(nn.Module):
    """Wraps a model (``pad_id`` / ``encode`` / ``decode``) so the EOS logit loses ``penalty``: hypotheses
    end only at the length limit, where the decoders force EOS (finite, so it still finishes normally)."""

    def __init__(self, model: Seq2Seq, eos: int, penalty: float = 1e4):
        super().__init__()
        self.model, self.eos, self.penalty = model, eos, penalty
        self.pad_id = model.pad_id

    def encode(self, src: Tensor) -> Any:
        return self.model.encode(src)

    def decode(self, tgt: Tensor, enc: Any, state: Any = None) -> tuple[Tensor, Any]:
        logits, state = self.model.decode(tgt, enc, state)  # (B, t, V)
        logits[..., self.eos] -= self.penalty
        return logits, state


def modes(model: nn.Module, bos: int, eos: int, length: int, beam: int) -> dict[str, Callable[[Tensor], list]]:
    """Mode name -> ``decode(src) -> hypotheses`` for greedy and beam ``beam``, cached and not."""
    fixed = FixedLength(cast(Seq2Seq, model), eos)  # build_model's: nn.Module's typing hides its decoding interface
    out: dict[str, Callable[..., list]] = {}  # (src, c=cache): the cache flag bound by its default
    for cache in (True, False):
        tag = "cache" if cache else "nocache"
        out[f"greedy-{tag}"] = lambda src, c=cache: greedy(fixed, src, bos, eos, 0.0, length, use_cache=c)
        out[f"beam{beam}-{tag}"] = lambda src, c=cache: beam_search(
            fixed, src, beam, bos, eos, 1.0, 0.0, length, use_cache=c
        )
    return out


def bench_decoding(
    opts: BenchOptions, inputs: Inputs, dev: torch.device, echo: Callable[[str], None] = lambda s: None
) -> dict[str, Any]:
    """Sentences/s and output tokens/s of the standard Transformer in every mode, interleaved, and the
    cache's speed-up of greedy and beam search."""
    tok = inputs.prepared.tokenizer
    cfg = variant_config(opts, variants()[STANDARD])
    torch.manual_seed(opts.seed)
    model = build_model(cfg.model, inputs.vocab, inputs.vocab, tok.pad_id, True).to(dev).eval()
    src = inputs.decode_src
    runs = modes(model, tok.bos_id, tok.eos_id, opts.decode_len, opts.beam)
    short = modes(model, tok.bos_id, tok.eos_id, min(4, opts.decode_len), opts.beam)
    for decode in short.values():  # warm-up: every code path once, on a short output
        decode(src[:2])
    produced: dict[str, int] = {}

    def run(name: str) -> None:
        produced[name] = sum(len(h) for h in runs[name](src))

    echo(f"decoding: {src.size(0)} sentences to {opts.decode_len} tokens, {len(runs)} modes x {opts.reps} rounds")
    clock_name, clock = compute_clock(dev)
    seconds = interleaved({name: functools.partial(run, name) for name in runs}, opts.reps, 0, clock)
    results = {}
    for name, secs in seconds.items():
        t = median(secs)
        results[name] = {
            "sentences_per_s": src.size(0) / t,
            "tokens_per_s": produced[name] / t,
            "seconds": secs,
            "spread": spread(secs),
            "tokens": produced[name],
        }
    pairs = {kind: (seconds[f"{kind}-cache"], seconds[f"{kind}-nocache"]) for kind in ("greedy", f"beam{opts.beam}")}
    return {
        "clock": clock_name,
        "model": STANDARD,
        "sentences": src.size(0),
        "length": opts.decode_len,
        "beam": opts.beam,
        "modes": results,
        "cache_speedup": {kind: paired(*pair)[0] for kind, pair in pairs.items()},
        "cache_speedup_spread": {kind: paired(*pair)[1] for kind, pair in pairs.items()},
        "cache_speedup_interval": {kind: paired_interval(*pair) for kind, pair in pairs.items()},
    }
