"""Every score against a naive reference, and the dot-product form used by the fused kernel."""

from __future__ import annotations

import pytest
import torch

from ablate.config import AttentionConfig
from ablate.model.scores import SCORES, AdditiveScore, ScoreError, build_score

from tests.helpers.model import WITH_EVERY_WEIGHT

B, H, TQ, TK, D = 2, 3, 5, 7, 4


def _qk(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, H, TQ, D, generator=g), torch.randn(B, H, TK, D, generator=g)


def _naive(score, q, k):
    """Loop-free but unoptimised reference for each variant, straight from its equation."""
    name = type(score).__name__
    if name == "DotScore":
        return torch.einsum("bhqd,bhkd->bhqk", q, k)
    if name == "GeneralScore":  # q^T W k, W per head
        return torch.einsum("bhqd,hde,bhke->bhqk", q, score.weight, k)
    if name == "AdditiveScore":  # v^T tanh(W_q q + W_k k), full (B, H, Tq, Tk, d) tensor
        hidden = torch.tanh(
            torch.einsum("bhqd,hda->bhqa", q, score.w_q)[:, :, :, None]
            + torch.einsum("bhkd,hda->bhka", k, score.w_k)[:, :, None]
        )
        return torch.einsum("bhqka,ha->bhqk", hidden, score.v)
    if name == "GaussianScore":  # -||w (q - k)||^2 / 2
        w = 1.0 if score.bandwidth is None else score.bandwidth.view(1, H, 1, 1, 1)
        diff = q[:, :, :, None, :] - k[:, :, None, :, :]
        return -0.5 * (w * diff).pow(2).sum(-1)
    raise AssertionError(f"no reference for {name}; add one when adding a score")


@pytest.mark.parametrize("bandwidth", [False, True])
@pytest.mark.parametrize("name", list(SCORES))
def test_score_matches_naive_reference(name, bandwidth):
    torch.manual_seed(0)
    score = build_score(
        name, D, H, AttentionConfig(score=name, params=WITH_EVERY_WEIGHT.get(name, {}) if bandwidth else {})
    )
    if getattr(score, "bandwidth", None) is not None:  # distinct per-head bandwidths
        with torch.no_grad():
            score.bandwidth.copy_(torch.tensor([0.5, 1.0, 2.0]))
    q, k = _qk()
    out = score(q, score.prepare_keys(k))
    assert out.shape == (B, H, TQ, TK)
    torch.testing.assert_close(out, _naive(score, q, k), atol=1e-5, rtol=1e-5)


def test_additive_has_no_dot_form():
    score = build_score("additive", D, H, AttentionConfig())
    q, k = _qk()
    assert score.as_dot(q, score.prepare_keys(k)) is None


def test_chunked_additive_equals_unchunked():
    """A tiny budget forces one query per chunk; a big one a single chunk."""
    torch.manual_seed(0)
    tiny = AdditiveScore(D, H, AttentionConfig(), chunk_mb=1e-9)
    big = AdditiveScore(D, H, AttentionConfig(), chunk_mb=1e3)
    big.load_state_dict(tiny.state_dict())
    per_query = B * H * TK * D * 4
    assert int(tiny.chunk_bytes // per_query) < 1 <= TQ  # really chunked, one query at a time
    q, k = _qk()
    torch.testing.assert_close(tiny(q, tiny.prepare_keys(k)), big(q, big.prepare_keys(k)))
    torch.testing.assert_close(tiny(q, tiny.prepare_keys(k)), _naive(tiny, q, k), atol=1e-5, rtol=1e-5)


def test_chunked_additive_gradients_match():
    torch.manual_seed(0)
    tiny = AdditiveScore(D, H, AttentionConfig(), chunk_mb=1e-9)
    q, k = _qk()
    q.requires_grad_(True)
    tiny(q, tiny.prepare_keys(k)).square().sum().backward()
    chunked = (q.grad.clone(), tiny.v.grad.clone())
    q.grad, tiny.v.grad = None, None
    _naive(tiny, q, k).square().sum().backward()
    torch.testing.assert_close(chunked[0], q.grad, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(chunked[1], tiny.v.grad, atol=1e-5, rtol=1e-5)


def test_unknown_score_is_a_one_line_error():
    with pytest.raises(ScoreError, match="choose from: dot, additive, general, gaussian"):
        build_score("cosine", D, H, AttentionConfig())
    assert issubclass(ScoreError, ValueError)


@pytest.mark.parametrize("chunk_mb", [0.0, -3.0])
def test_a_chunk_budget_that_is_not_positive_is_a_one_line_error(chunk_mb):
    """``chunk_mb`` <= 0 was accepted and silently ran one query per chunk (the slowest path); the user's
    ``model.attention.params.chunk_mb=-3`` trained and was recorded as if it meant something."""
    with pytest.raises(ScoreError, match=rf"model.attention.params.chunk_mb={chunk_mb} must be positive"):
        build_score("additive", D, H, AttentionConfig(score="additive", params={"chunk_mb": chunk_mb}))


def _saved_bytes(fn) -> int:
    """Bytes of the distinct storages autograd keeps for the backward pass while ``fn`` runs (the training
    memory of a forward; a tensor saved by several operations counts once)."""
    storages: dict[int, int] = {}

    def pack(t):
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    return sum(storages.values()), out


def test_chunked_additive_keeps_no_chunk_for_training_and_its_loss_and_gradients_equal_the_naive_ones():
    """In training each chunk is recomputed in the backward pass, so what a forward keeps
    is at most a quarter of the naive path's (there: every chunk's (B, H, c, Tk, A) tanh output), with
    the loss and every gradient of the naive path."""
    from ablate.model.attention import MultiHeadAttention

    d_model, heads, length = 32, 2, 64
    d_k = d_model // heads
    torch.manual_seed(0)
    naive = MultiHeadAttention(d_model, heads, AdditiveScore(d_k, heads, AttentionConfig(), chunk_mb=1e3), d_k=d_k)
    chunked = MultiHeadAttention(d_model, heads, AdditiveScore(d_k, heads, AttentionConfig(), chunk_mb=0.05), d_k=d_k)
    chunked.load_state_dict(naive.state_dict())
    x = torch.randn(2, length, d_model)
    per_query = 2 * heads * length * d_k * 4
    assert 1 < chunked.score.chunk_bytes // per_query < length  # several chunks of several queries
    results = {}
    for name, att in (("naive", naive), ("chunked", chunked)):
        saved, (out, _, _) = _saved_bytes(lambda att=att: att.self_attend(x, causal=True))
        loss = out.square().mean()
        loss.backward()
        results[name] = (saved, loss.detach(), {n: p.grad.clone() for n, p in att.named_parameters()})
    assert results["chunked"][0] / results["naive"][0] <= 0.25
    torch.testing.assert_close(results["chunked"][1], results["naive"][1], rtol=1e-5, atol=0)
    for name, grad in results["naive"][2].items():
        torch.testing.assert_close(results["chunked"][2][name], grad, rtol=1e-5, atol=1e-7, msg=name)
