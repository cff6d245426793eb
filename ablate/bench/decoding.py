"""Decoding throughput: greedy and beam search, with the key/value cache and without.

Every hypothesis is held to exactly ``decode_len`` tokens (:class:`FixedLength`), so the four
modes do the same number of steps whatever the (untrained) model prefers, and the cache speed-up
is measured at a known output length (50 tokens by default). ``use_cache=False`` recomputes
the whole prefix at every step (:func:`ablate.model.decoding._step`), which is what the cache saves.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch import Tensor, nn

from ablate.bench.inputs import Inputs
from ablate.bench.options import BenchOptions
from ablate.bench.timing import compute_clock, interleaved, median, paired, spread
from ablate.bench.training import STANDARD, variant_config, variants
from ablate.model.build import build_model
from ablate.model.decoding import beam_search, greedy


class FixedLength(nn.Module):
    """Wraps a model so EOS loses ``penalty`` logits: hypotheses end only at the length limit.

    The penalty is finite, so where the decoders force EOS (at the limit) it still has a finite
    score and the hypothesis finishes normally.

    Args:
        model: A model with the ``pad_id`` / ``encode`` / ``decode`` interface.
        eos: The EOS id.
        penalty: Subtracted from the EOS logit.
    """

    def __init__(self, model: nn.Module, eos: int, penalty: float = 1e4):
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
    fixed = FixedLength(model, eos)
    out = {}
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
    """Sentences/s and output tokens/s of the standard Transformer in every mode, interleaved.

    Returns:
        ``{"model": name, "sentences": N, "length": L, "modes": {mode: {sentences_per_s, tokens_per_s,
        seconds, spread}}, "cache_speedup": {"greedy": x, "beam<k>": x}, "cache_speedup_spread": {...}, "clock"}``.
    """
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

    def contender(name: str) -> Callable[[], None]:
        def run() -> None:
            produced[name] = sum(len(h) for h in runs[name](src))

        return run

    echo(f"decoding: {src.size(0)} sentences to {opts.decode_len} tokens, {len(runs)} modes x {opts.reps} rounds")
    clock_name, clock = compute_clock(dev)
    seconds = interleaved({name: contender(name) for name in runs}, opts.reps, 0, clock)
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
    pairs = {
        kind: paired(seconds[f"{kind}-cache"], seconds[f"{kind}-nocache"]) for kind in ("greedy", f"beam{opts.beam}")
    }
    return {
        "clock": clock_name,
        "model": STANDARD,
        "sentences": src.size(0),
        "length": opts.decode_len,
        "beam": opts.beam,
        "modes": results,
        "cache_speedup": {kind: ratio for kind, (ratio, _) in pairs.items()},
        "cache_speedup_spread": {kind: ratio_spread for kind, (_, ratio_spread) in pairs.items()},
    }
