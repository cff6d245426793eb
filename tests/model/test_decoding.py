"""Greedy and beam search: exact search on a toy model, beam 1 == greedy, cache == no cache."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from torch import nn

from ablate.config import AttentionConfig, EvalConfig, LengthPenalty, ModelConfig
from ablate.model.build import build_model
from ablate.model.decoding import (
    LENGTH_PENALTIES,
    beam_search,
    fairseq_penalty,
    gnmt_penalty,
    greedy,
    max_lengths,
    reorder,
)
from ablate.model.positions import POSITIONS
from ablate.model.scores import SCORES

from tests.helpers.model import BOS, EOS, PAD, tiny_model


class MarkovModel(nn.Module):
    """A toy model with the decoding interface: next-token logits depend on the previous token only."""

    pad_id = PAD

    def __init__(self, table: torch.Tensor):
        super().__init__()
        self.table = table  # (V, V) logits of the next token given the previous one

    def encode(self, src):
        return {"src": src}

    def decode(self, tgt, enc, state=None):
        step = 0 if state is None else state["step"]
        return self.table[tgt], {"step": step + tgt.size(1), "last": tgt[:, -1:]}


def _markov(vocab: int = 5, seed: int = 0) -> MarkovModel:
    g = torch.Generator().manual_seed(seed)
    return MarkovModel(torch.randn(vocab, vocab, generator=g) * 2)


def _exhaustive_best(model: MarkovModel, max_len: int, alpha: float, penalty: str = "fairseq") -> list[int]:
    """Best ``log p(y, EOS) / lp(len(y) + 1)`` over every y of at most max_len tokens."""
    lp_of = {"fairseq": lambda n: n**alpha, "gnmt": lambda n: ((5 + n) / 6) ** alpha}[penalty]
    lp = torch.log_softmax(model.table.double(), -1)
    words = [t for t in range(model.table.size(0)) if t not in (PAD, BOS, EOS)]
    best, best_score = None, -float("inf")
    for n in range(max_len + 1):
        for ys in itertools.product(words, repeat=n):
            seq = [BOS, *ys, EOS]
            score = sum(lp[a, b].item() for a, b in zip(seq, seq[1:])) / lp_of(n + 1)
            if score > best_score:
                best, best_score = list(ys), score
    return best


def _transformer(score="dot", positions="sinusoidal", seed=0, scale=True, d_model=16):
    torch.manual_seed(seed)
    cfg = ModelConfig(
        layers=2,
        d_model=d_model,
        d_ff=2 * d_model,
        heads=4,
        dropout=0.0,
        positions=positions,
        max_positions=64,
        attention=AttentionConfig(score=score, scale=scale),
    )
    return build_model(cfg, 12, 12, pad_id=PAD).eval()


def _sources(seed=0, batch=5, length=6, vocab=12):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, vocab, (batch, length), generator=g)
    for row in range(1, batch):
        src[row, length - row :] = PAD
    return src


def test_reorder_walks_nested_states():
    state = {"step": 3, "layers": [{"keys": torch.arange(4.0)[:, None]}], "pair": (torch.arange(4), None)}
    out = reorder(state, torch.tensor([2, 2, 0]))
    assert out["step"] == 3 and out["pair"][1] is None
    assert out["layers"][0]["keys"].squeeze(1).tolist() == [2.0, 2.0, 0.0]
    assert out["pair"][0].tolist() == [2, 2, 0]


def test_max_lengths():
    src = torch.tensor([[5, 6, 7, 0], [5, 0, 0, 0]])
    assert max_lengths(src, PAD, 1.5, 2).tolist() == [6, 3]


@pytest.mark.parametrize("penalty", ["fairseq", "gnmt"])
@pytest.mark.parametrize("alpha", [0.0, 1.0, 2.0])
@pytest.mark.parametrize("seed", range(4))
def test_wide_beam_finds_the_exact_optimum(seed, alpha, penalty):
    """A beam wider than the search space is exhaustive search (length penalty included)."""
    model = _markov(vocab=5, seed=seed)
    src = torch.full((1, 3), 3)  # max length 0 * 3 + 4 = 4
    hyp = beam_search(
        model, src, beam=64, bos=BOS, eos=EOS, len_penalty=alpha, max_len_a=0, max_len_b=4, length_penalty=penalty
    )
    assert hyp == [_exhaustive_best(model, 4, alpha, penalty)]


def test_length_penalties_match_their_formulas():
    """fairseq: |Y|^alpha; GNMT (Wu et al. 2016, eq. 14): ((5 + |Y|) / 6)^alpha."""
    assert fairseq_penalty(4, 0.6) == pytest.approx(2.2974, abs=1e-4)  # 4^0.6 = e^(0.6 ln 4)
    assert gnmt_penalty(4, 0.6) == pytest.approx(1.2754, abs=1e-4)  # 1.5^0.6 = e^(0.6 ln 1.5)
    assert gnmt_penalty(1, 0.6) == 1.0 and fairseq_penalty(1, 0.6) == 1.0  # one token: no penalty
    assert gnmt_penalty(10, 1.0) == 2.5 and fairseq_penalty(10, 1.0) == 10.0
    assert gnmt_penalty(7, 0.0) == fairseq_penalty(7, 0.0) == 1.0
    assert LengthPenalty.__metadata__[0].choices() == list(LENGTH_PENALTIES)  # the config offers the registry
    assert EvalConfig().length_penalty == "fairseq" and EvalConfig().len_penalty == 1.0  # default unchanged


def test_the_two_length_penalties_rank_hypotheses_differently():
    """fairseq's |Y| grows faster than GNMT's (5 + |Y|) / 6, so it rewards length more.

    Hypotheses: EOS at once, log P = -1 (|Y| = 1), or 3 3 3 3 EOS, log P = ln .632 + 3 ln .9 + ln .1
    = -3.078 (|Y| = 5). alpha 1: fairseq -1 vs -0.616 picks the long one; GNMT -1 vs -1.847 the empty one.
    """
    table = torch.full((5, 5), -50.0)  # log-probabilities; everything not set is (almost) impossible
    table[BOS, EOS], table[BOS, 3] = -1.0, math.log(1 - math.exp(-1.0))
    table[3, 3], table[3, EOS] = math.log(0.9), math.log(0.1)
    model = MarkovModel(table)
    src = torch.full((1, 2), 3)

    def search(penalty):
        return beam_search(model, src, 64, BOS, EOS, 1.0, 0, 4, length_penalty=penalty)

    assert search("fairseq") == [[3, 3, 3, 3]]
    assert search("gnmt") == [[]]
    with pytest.raises(ValueError, match="choose from: fairseq, gnmt"):
        search("wu")


def test_beam_beats_greedy_on_a_garden_path():
    """Greedy takes the likelier first token and is stuck; a beam of 2 finds the better sentence."""
    table = torch.full((5, 5), -20.0)
    table[BOS, 3], table[BOS, 4] = 1.0, 0.9  # 3 is slightly likelier first ...
    table[3, 3], table[3, 4] = 0.0, 0.0  # ... but then uncertain
    table[4, EOS] = 5.0  # while 4 is followed by a confident EOS
    table[3:, EOS] = torch.maximum(table[3:, EOS], torch.tensor(-20.0))
    model = MarkovModel(table)
    src = torch.full((1, 2), 3)
    assert greedy(model, src, BOS, EOS, 0, 3)[0][0] == 3
    assert beam_search(model, src, 2, BOS, EOS, 0.0, 0, 3) == [[4]]


@pytest.mark.parametrize("seed", range(6))
def test_beam_one_equals_greedy_on_toy_model(seed):
    model = _markov(vocab=6, seed=seed)
    src = _sources(seed, vocab=6)
    assert beam_search(model, src, 1, BOS, EOS, max_len_a=1.0, max_len_b=2) == greedy(
        model, src, BOS, EOS, max_len_a=1.0, max_len_b=2
    )


def test_greedy_takes_the_arg_max_of_the_logits_without_a_log_softmax(monkeypatch):
    """Greedy's choice is the log-softmax's arg-max, so it skips the (N, V) log-softmax (about 10% of a greedy
    step of a Multi30k model: 1.6 of 19 ms per 128 rows); PAD and BOS stay forbidden where their logit is largest."""
    table = _markov(vocab=6, seed=3).table
    table[:, PAD] = table[:, BOS] = 50.0  # the largest logits everywhere
    model = MarkovModel(table)
    src = _sources(3, vocab=6)
    lp = torch.log_softmax(table, -1)
    lp[:, [PAD, BOS]] = -math.inf
    expected, prev = [], BOS  # the arg-max walk of the log-probabilities, to the length limit or EOS
    for _ in range(8):
        prev = int(lp[prev].argmax())
        if prev == EOS:
            break
        expected.append(prev)

    def no_log_softmax(*args, **kwargs):
        raise AssertionError("greedy computed a log-softmax")

    monkeypatch.setattr(torch, "log_softmax", no_log_softmax)
    out = greedy(model, src, BOS, EOS, max_len_a=0.0, max_len_b=8)
    assert out == [expected] * src.size(0)
    assert table[0, PAD] == 50.0  # the model's logits are not written over


def test_beam_search_adds_the_beam_scores_into_its_own_log_probabilities():
    """The candidates' scores ``scores + log p`` are written over the step's log-probabilities, not into a fresh
    (n K, V) buffer (1.32 instead of 2.72 ms per (640, 8000) step on a CPU); the search is unchanged (the tests
    above: exact optimum, beam 1 == greedy, batched == one by one)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Adds(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.fresh = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            self.fresh += func is torch.ops.aten.add.Tensor and tuple(out.shape) == (5 * 3, 12)
            return out

    model, src = _transformer(), _sources()
    with Adds() as adds:
        out = beam_search(model, src, 3, BOS, EOS, 1.0, 1.5, 3)
    assert adds.fresh == 0 and out == beam_search(model, src, 3, BOS, EOS, 1.0, 1.5, 3)


@pytest.mark.parametrize("positions", list(POSITIONS))
@pytest.mark.parametrize("score", list(SCORES))
def test_beam_one_equals_greedy_and_cache_changes_nothing(score, positions):
    model = _transformer(score, positions)
    src = _sources()
    g = greedy(model, src, BOS, EOS, 1.5, 3)
    assert beam_search(model, src, 1, BOS, EOS, 1.0, 1.5, 3) == g
    assert greedy(model, src, BOS, EOS, 1.5, 3, use_cache=False) == g
    cached = beam_search(model, src, 3, BOS, EOS, 1.0, 1.5, 3)
    assert beam_search(model, src, 3, BOS, EOS, 1.0, 1.5, 3, use_cache=False) == cached


@pytest.mark.parametrize("scale", [True, False])
def test_batched_beam_equals_one_sentence_at_a_time(scale):
    """Sentences finish at different steps and leave the batch; results must not depend on batching."""
    model = _transformer("dot", "sinusoidal", seed=3, scale=scale)
    src = _sources(1, batch=6)
    batched = beam_search(model, src, 4, BOS, EOS, 1.0, 1.0, 4)
    alone = [beam_search(model, row[row.ne(PAD)][None], 4, BOS, EOS, 1.0, 1.0, 4)[0] for row in src]
    assert batched == alone
    assert greedy(model, src, BOS, EOS, 1.0, 4) == [
        greedy(model, row[row.ne(PAD)][None], BOS, EOS, 1.0, 4)[0] for row in src
    ]


@pytest.mark.parametrize("positions", list(POSITIONS))
@pytest.mark.parametrize("score", list(SCORES))
def test_a_sentence_translates_alone_as_in_a_padded_batch(score, positions):
    """Padding masks, positions and the per-sentence length limits leave each sentence's search its own, for
    every score and position scheme (the dot/sinusoidal test above also varies the scaling)."""
    model = _transformer(score, positions, seed=3)
    src = _sources(1, batch=6)
    for search in (
        lambda s: greedy(model, s, BOS, EOS, 1.0, 4),
        lambda s: beam_search(model, s, 3, BOS, EOS, 1.0, 1.0, 4),
    ):
        assert search(src) == [search(row[row.ne(PAD)][None])[0] for row in src]


def test_outputs_respect_the_length_limit_and_exclude_specials():
    model = _transformer(seed=1)
    src = _sources(2)
    limits = max_lengths(src, PAD, 0.5, 1).tolist()
    for hyps in (greedy(model, src, BOS, EOS, 0.5, 1), beam_search(model, src, 3, BOS, EOS, 1.0, 0.5, 1)):
        assert len(hyps) == len(src)
        for hyp, limit in zip(hyps, limits):
            assert len(hyp) <= limit and not {PAD, BOS, EOS} & set(hyp)


@pytest.mark.slow
def test_trained_toy_model_decodes_its_task():
    """End to end: a tiny Transformer trained briefly to reverse sequences decodes them with both searches."""
    torch.manual_seed(0)
    model = _transformer(seed=0, d_model=32)
    opt = torch.optim.Adam(model.parameters(), 3e-3, betas=(0.9, 0.98))
    model.train()
    for _ in range(250):
        src = torch.randint(3, 12, (32, 5))
        tgt = torch.cat((torch.full((32, 1), BOS), src.flip(1), torch.full((32, 1), EOS)), 1)
        loss = nn.functional.cross_entropy(model(src, tgt[:, :-1]).reshape(-1, 12), tgt[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    src = torch.randint(3, 12, (16, 5), generator=torch.Generator().manual_seed(9))
    expected = src.flip(1).tolist()
    for hyps in (greedy(model, src, BOS, EOS), beam_search(model, src, 4, BOS, EOS)):
        assert sum(h == e for h, e in zip(hyps, expected)) >= 12  # chance level is 0


def test_decoding_stops_at_the_last_learned_position():
    """A learned table of 8 positions: an output that would run past them (a*S+b is 40 here) stops at 7 tokens, with
    both searches, instead of a PositionError that loses a whole run's test pass."""
    model = tiny_model("dot", True, "learned", seed=1, max_positions=8)
    src = _sources(2)
    hyps = greedy(model, src, BOS, EOS, 6.0, 4)
    assert max(len(h) for h in hyps) == 7 < min(max_lengths(src, PAD, 6.0, 4).tolist())
    assert beam_search(model, src, 1, BOS, EOS, 1.0, 6.0, 4) == hyps
    assert all(len(h) <= 7 for h in beam_search(model, src, 3, BOS, EOS, 1.0, 6.0, 4))
