"""Greedy and beam-search decoding over an explicit incremental state.

Works with any model exposing ``pad_id``, ``encode(src) -> enc`` and
``decode(tgt, enc, state) -> (logits, state)`` where every tensor in ``enc`` and ``state`` has
the batch in dim 0 (see :mod:`ablate.model.transformer`). Call ``model.eval()`` first; these
functions do not change the model's mode.

Both functions return token ids without BOS/EOS, one list per source sentence, and stop a
hypothesis after ``max_len_a * source_length + max_len_b`` tokens (source length without
padding), or after ``model.max_output`` where the model has a smaller one (where learned positions end).
Beam search is tensorised over (sentences x beam) rows; finished hypotheses are kept until a
sentence has ``beam`` of them, and they are ranked by ``score / lp(length)`` with a length
penalty ``lp`` from :data:`LENGTH_PENALTIES` (length counts EOS, as in fairseq and tensor2tensor).
With ``beam=1`` it returns exactly the greedy output.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, Optional, Protocol

import torch
from torch import Tensor

from ablate.registry import register, table

LENGTH_PENALTIES: dict[str, Callable[[int, float], float]] = table("length_penalty")
"""Divisors of a finished hypothesis' log-probability, by name (``eval.length_penalty``); filled by
``@register("length_penalty", name)``."""


@register("length_penalty", "fairseq")
def fairseq_penalty(length: int, alpha: float) -> float:
    """``|Y|^alpha``: fairseq's ``--lenpen`` (score divided by length to the power alpha)."""
    return float(length) ** alpha


@register("length_penalty", "gnmt")
def gnmt_penalty(length: int, alpha: float) -> float:
    """``((5 + |Y|) / (5 + 1))^alpha`` (Wu et al. 2016, GNMT, eq. 14; alpha 0.6 in Vaswani et al. 2017)."""
    return ((5.0 + length) / 6.0) ** alpha


def reorder(tree: Any, index: Tensor) -> Any:
    """Select rows ``index`` along dim 0 of every tensor in a nested dict/list/tuple.

    Non-tensor leaves (e.g. an int step counter) are returned unchanged.
    """
    if isinstance(tree, Tensor):
        return tree.index_select(0, index)
    if isinstance(tree, dict):
        return {key: reorder(value, index) for key, value in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(reorder(value, index) for value in tree)
    return tree


def max_lengths(src: Tensor, pad_id: int, max_len_a: float, max_len_b: int, cap: Optional[int] = None) -> Tensor:
    """(B,) longest output per sentence: ``floor(a * source_length + b)``, at least 0 and at most ``cap``."""
    src_len = src.ne(pad_id).sum(1).float()
    return (max_len_a * src_len + max_len_b).floor().long().clamp(min=0, max=cap)


class Seq2Seq(Protocol):
    """What decoding needs of a model: :class:`~ablate.model.transformer.Transformer` and
    :class:`~ablate.model.rnn.RNNSeq2Seq` both provide it."""

    pad_id: int

    def encode(self, src: Tensor) -> Any: ...

    def decode(self, tgt: Tensor, enc: Any, state: Any = None) -> tuple[Tensor, Any]: ...


def _log_probs(logits: Tensor, pad_id: int, bos: int) -> Tensor:
    """(N, V) logits -> float32 log-probabilities with padding and BOS forbidden."""
    lprobs = torch.log_softmax(logits.float(), dim=-1)
    lprobs[:, pad_id] = float("-inf")
    lprobs[:, bos] = float("-inf")
    return lprobs


def _best(logits: Tensor, pad_id: int, bos: int) -> Tensor:
    """(N,) arg-max of the (N, V) ``logits`` with padding and BOS forbidden: that of :func:`_log_probs`, which
    only shifts each row, without its passes over the vocabulary (the model's logits are not written over)."""
    return logits.index_fill(1, torch.tensor([pad_id, bos], device=logits.device), float("-inf")).argmax(-1)


def _step(model: Seq2Seq, tokens: Tensor, enc: Any, state: Any, use_cache: bool) -> tuple[Tensor, Any]:
    """Logits (N, V) for the next token after ``tokens`` (N, t), and the new state."""
    if use_cache and state is not None:
        logits, state = model.decode(tokens[:, -1:], enc, state)
    else:
        logits, state = model.decode(tokens, enc, None)
    return logits[:, -1], (state if use_cache else None)


@torch.no_grad()
def greedy(
    model: Seq2Seq,
    src: Tensor,
    bos: int,
    eos: int,
    max_len_a: float = 1.5,
    max_len_b: int = 10,
    use_cache: bool = True,
    enc: Any = None,
) -> list[list[int]]:
    """Greedy decoding (arg-max token at each step).

    Args:
        model: A model with the encode/decode interface, in eval mode.
        src: (B, S) padded source ids.
        bos, eos: Target begin/end-of-sentence ids.
        max_len_a, max_len_b: Output length limit ``a * source_length + b``.
        use_cache: Decode incrementally through the state (False recomputes the whole prefix).
        enc: ``model.encode(src)``, where the caller has it (None: encoded here).

    Returns:
        B lists of token ids, without BOS/EOS.
    """
    B, pad = src.size(0), model.pad_id
    limit = max_lengths(src, pad, max_len_a, max_len_b, getattr(model, "max_output", None))
    enc = model.encode(src) if enc is None else enc
    tokens = src.new_full((B, 1), bos)
    done = limit.eq(0)
    state = None
    for step in range(int(limit.max().item()) if B else 0):
        if bool(done.all()):
            break
        logits, state = _step(model, tokens, enc, state, use_cache)
        nxt = _best(logits, pad, bos).masked_fill(done, pad)
        tokens = torch.cat((tokens, nxt[:, None]), dim=1)
        done = done | nxt.eq(eos) | limit.le(step + 1)
    return [list(itertools.takewhile(lambda tok: tok not in (eos, pad), row)) for row in tokens[:, 1:].tolist()]


@torch.no_grad()
def beam_search(
    model: Seq2Seq,
    src: Tensor,
    beam: int,
    bos: int,
    eos: int,
    len_penalty: float = 1.0,
    max_len_a: float = 1.5,
    max_len_b: int = 10,
    use_cache: bool = True,
    length_penalty: str = "fairseq",
    enc: Any = None,
) -> list[list[int]]:
    """Batched beam search over (sentences x beam) rows.

    At each step the ``2 * beam`` best continuations of each sentence are taken; those ending
    in EOS among the first ``beam`` are finished, the best ``beam`` others continue. A sentence
    is done once it has ``beam`` finished hypotheses or reaches its length limit (where EOS is
    forced); finished sentences leave the batch.

    Args:
        model: A model with the encode/decode interface, in eval mode.
        src: (B, S) padded source ids.
        beam: Beam size (1 equals :func:`greedy`).
        bos, eos: Target begin/end-of-sentence ids.
        len_penalty: The exponent alpha of the length penalty.
        max_len_a, max_len_b: Output length limit ``a * source_length + b``.
        use_cache: Decode incrementally through the state (False recomputes the whole prefix).
        length_penalty: Name in :data:`LENGTH_PENALTIES`: finished hypotheses are ranked by
            ``log P(Y) / LENGTH_PENALTIES[name](|Y|, len_penalty)``.
        enc: ``model.encode(src)``, where the caller has it (None: encoded here).

    Returns:
        B lists of token ids of the best finished hypothesis, without BOS/EOS.
    """
    B, K, pad, device = src.size(0), beam, model.pad_id, src.device
    if K < 1:
        raise ValueError(f"beam={K} must be at least 1")
    if length_penalty not in LENGTH_PENALTIES:
        raise ValueError(f"length penalty {length_penalty!r} is unknown; choose from: {', '.join(LENGTH_PENALTIES)}")
    penalty = LENGTH_PENALTIES[length_penalty]
    limit = max_lengths(src, pad, max_len_a, max_len_b, getattr(model, "max_output", None))
    enc = reorder(model.encode(src) if enc is None else enc, torch.arange(B, device=device).repeat_interleave(K))
    sent = torch.arange(B, device=device)  # original sentence of each active sentence
    tokens = src.new_full((B * K, 1), bos)
    scores = torch.zeros(B, K, device=device)
    scores[:, 1:] = float("-inf")  # all beams start identical: keep one
    n_finished = torch.zeros(B, dtype=torch.long, device=device)
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(B)]
    beams = torch.arange(K, device=device)
    state, step = None, 0
    while sent.numel():
        n = sent.numel()
        logits, state = _step(model, tokens, enc, state, use_cache)
        lprobs = _log_probs(logits, pad, bos)  # (n*K, V)
        at_limit = limit[sent].le(step)  # (n,)
        if bool(at_limit.any()):  # only EOS is allowed at the length limit
            rows = at_limit.repeat_interleave(K)
            eos_lp = lprobs[:, eos].clone()
            lprobs[rows] = float("-inf")
            lprobs[rows, eos] = eos_lp[rows]
        V = lprobs.size(1)
        cand = lprobs.add_(scores.view(-1, 1)).view(n, K * V)  # into the step's own buffer, not a fresh one
        top, flat = cand.topk(min(2 * K, K * V), dim=1)  # (n, 2K), best first
        origin, tok = flat // V, flat % V
        is_eos = tok.eq(eos)

        ended = is_eos[:, :K] & torch.isfinite(top[:, :K])
        if bool(ended.any()):
            for i, r in ended.nonzero().tolist():
                b = int(sent[i])
                hyp = tokens[i * K + int(origin[i, r]), 1:].tolist()
                finished[b].append((float(top[i, r]) / penalty(step + 1, len_penalty), hyp))
            n_finished.index_add_(0, sent, ended.sum(1))

        rank = torch.arange(top.size(1), device=device) + is_eos.long() * top.size(1)
        pick = rank.topk(K, dim=1, largest=False).indices  # best K non-EOS continuations
        scores = top.gather(1, pick)
        rows = (torch.arange(n, device=device)[:, None] * K + origin.gather(1, pick)).view(-1)
        tokens = torch.cat((tokens[rows], tok.gather(1, pick).view(-1, 1)), dim=1)

        done = n_finished[sent].ge(K) | at_limit
        if bool(done.any()):
            keep = (~done).nonzero().squeeze(1)
            keep_rows = (keep[:, None] * K + beams).view(-1)
            sent, scores, tokens, rows = sent[keep], scores[keep], tokens[keep_rows], rows[keep_rows]
            enc = reorder(enc, keep_rows)
        if state is not None:
            state = reorder(state, rows)
        step += 1
    return [max(hyps, key=lambda h: h[0])[1] if hyps else [] for hyps in finished]
