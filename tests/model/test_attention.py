"""Multi-head attention: references, fast path == slow path, masks, caches, head sizes."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from ablate.config import AttentionConfig
from ablate.model.attention import AttentionError, MultiHeadAttention, Packing, resolve_scale
from ablate.model.positions import POSITIONS, build_positions
from ablate.model.scores import SCORES, build_score

from tests.helpers.model import every_weight

D = 16


def _attention(score="dot", heads=4, scale=True, d_k=None, d_v=None, d_kv=None, dropout=0.0):
    torch.manual_seed(0)
    dk = d_k or D // heads
    sc = build_score(score, dk, heads, every_weight(score))
    return MultiHeadAttention(D, heads, sc, d_k=d_k, d_v=d_v, d_kv=d_kv, scale=scale, dropout=dropout).eval()


def _x(batch=2, t=5, d=D, seed=0):
    return torch.randn(batch, t, d, generator=torch.Generator().manual_seed(seed))


def _pad_mask(batch=2, t=5):
    mask = torch.zeros(batch, t, dtype=torch.bool)
    mask[1, -2:] = True
    return mask


@pytest.mark.parametrize("score", list(SCORES))
def test_resolve_scale_explicit_values_are_honoured(score):
    assert resolve_scale(True, 16, SCORES[score]) == 0.25
    assert resolve_scale(False, 16, SCORES[score]) == 1.0
    assert resolve_scale(0.3, 16, SCORES[score]) == 0.3


@pytest.mark.parametrize("score,scaled", [("dot", True), ("general", True), ("gaussian", True), ("additive", False)])
def test_auto_scale_is_the_papers(score, scaled):
    """auto: 1/sqrt(d_k) for the dot-product family (Vaswani et al.), none for additive (Bahdanau et al.)."""
    assert resolve_scale("auto", 16, SCORES[score]) == (0.25 if scaled else 1.0)
    assert _attention(score, scale="auto").scaling == (0.5 if scaled else 1.0)  # d_k = 16 / 4 heads
    # the default of the module and of the config is auto
    assert MultiHeadAttention(D, 1, build_score(score, D, 1, AttentionConfig())).scaling == (0.25 if scaled else 1.0)
    assert AttentionConfig().scale == "auto"


def test_every_score_declares_its_paper_scale():
    assert {name: cls.paper_scale for name, cls in SCORES.items()} == {
        "dot": True,
        "general": True,
        "gaussian": True,
        "additive": False,
    }


@pytest.mark.parametrize("scale,expected", [("auto", 1.0), (True, 0.5), (False, 1.0), (0.3, 0.3)])
def test_additive_scores_reach_softmax_with_the_resolved_factor(scale, expected):
    """The factor that multiplies the additive scores is the resolved one (unscaled by default)."""
    att = _attention("additive", scale=scale)
    x = _x()
    _, kv, w = att.self_attend(x, need_weights=True)
    q = att.q_proj(x).view(2, 5, 4, 4).transpose(1, 2)
    manual = torch.softmax(expected * att.score(q, kv["keys"]), dim=-1)
    torch.testing.assert_close(w, manual, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("heads", [1, 4, 8])
def test_dot_equals_torch_multihead_attention(heads, causal):
    ours = _attention("dot", heads=heads)
    ref = nn.MultiheadAttention(D, heads, batch_first=True).eval()
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight]))
        ref.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
        ref.out_proj.weight.copy_(ours.out_proj.weight)
        ref.out_proj.bias.copy_(ours.out_proj.bias)
    x, pad = _x(), _pad_mask()
    future = torch.triu(torch.ones(5, 5, dtype=torch.bool), 1) if causal else None
    expected, expected_w = ref(x, x, x, key_padding_mask=pad, attn_mask=future, average_attn_weights=False)
    for need_weights in (False, True):  # fused kernel and explicit softmax
        out, _, w = ours.self_attend(x, key_padding_mask=pad, causal=causal, need_weights=need_weights)
        torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w, expected_w, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("scale", [False, 0.3])
def test_unscaled_dot_equals_explicit_softmax(scale):
    att = _attention("dot", scale=scale)
    x = _x()
    s = 1.0 if scale is False else scale
    H, dk = 4, D // 4

    def heads(t):
        return t.view(2, 5, H, dk).transpose(1, 2)

    q, k, v = heads(att.q_proj(x)), heads(att.k_proj(x)), heads(att.v_proj(x))
    manual = torch.softmax(s * q @ k.transpose(-1, -2), dim=-1) @ v
    manual = att.out_proj(manual.transpose(1, 2).reshape(2, 5, D))
    out, _, _ = att.self_attend(x)
    torch.testing.assert_close(out, manual, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("positions", list(POSITIONS))
@pytest.mark.parametrize("scale", [True, False])
@pytest.mark.parametrize("score", list(SCORES))
def test_fast_path_equals_slow_path(score, scale, positions):
    att = _attention(score, scale=scale)
    pos = build_positions(positions, D, D // 4, 4, 32)
    x, pad = _x(), _pad_mask()
    for causal, mask in ((True, None), (False, pad)):
        fast, _, _ = att.self_attend(x, key_padding_mask=mask, causal=causal, positions=pos)
        slow, _, w = att.self_attend(x, key_padding_mask=mask, causal=causal, positions=pos, need_weights=True)
        torch.testing.assert_close(fast, slow, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(w.sum(-1), torch.ones(2, 4, 5))


@pytest.mark.parametrize("scale", [True, False])
@pytest.mark.parametrize("score", list(SCORES))
def test_masks_block_future_and_padding(score, scale):
    att = _attention(score, scale=scale)
    x, pad = _x(), _pad_mask()
    _, _, w = att.self_attend(x, causal=True, need_weights=True)
    assert torch.all(w.triu(1) == 0)
    _, _, w = att.self_attend(x, key_padding_mask=pad, need_weights=True)
    assert torch.all(w[1, :, :, -2:] == 0) and torch.all(w[0, :, :, -2:] > 0)


@pytest.mark.parametrize("positions", list(POSITIONS))
@pytest.mark.parametrize("score", list(SCORES))
def test_incremental_self_attention_equals_full(score, positions):
    att = _attention(score)
    pos = build_positions(positions, D, D // 4, 4, 32)
    x = _x(t=6)
    full, full_cache, _ = att.self_attend(x, causal=True, positions=pos)
    out, cache = [], None
    for chunk in (x[:, :1], x[:, 1:2], x[:, 2:5], x[:, 5:]):  # one token and several at a time
        y, cache, _ = att.self_attend(chunk, cache, causal=True, positions=pos)
        out.append(y)
    torch.testing.assert_close(torch.cat(out, 1), full, atol=1e-5, rtol=1e-5)
    for name in full_cache:
        torch.testing.assert_close(cache[name], full_cache[name], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("score", list(SCORES))
def test_cross_attention_with_different_kv_size_and_one_head(score):
    """RNN-style use: a 1-head attention from a 16-d query over 24-d encoder states."""
    att = _attention(score, heads=1, d_kv=24)
    query, memory = _x(t=3), _x(t=7, d=24, seed=1)
    pad = torch.zeros(2, 7, dtype=torch.bool)
    pad[0, 5:] = True
    kv = att.project_kv(memory)
    out, w = att(query, kv, key_padding_mask=pad, need_weights=True)
    assert out.shape == (2, 3, D) and w.shape == (2, 1, 3, 7)
    # padding keys are ignored: dropping them gives the same output for that row
    short, _ = att(query[:1], att.project_kv(memory[:1, :5]))
    torch.testing.assert_close(out[:1], short, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("heads,d_k,d_v", [(1, None, None), (8, None, None), (4, 8, 8), (2, 3, 5)])
def test_head_counts_and_sizes(heads, d_k, d_v):
    att = _attention("dot", heads=heads, d_k=d_k, d_v=d_v)
    dk = d_k or D // heads
    assert att.q_proj.out_features == heads * dk and att.v_proj.out_features == heads * (d_v or dk)
    assert att.scaling == pytest.approx(1 / math.sqrt(dk))
    x = _x()
    out, kv, w = att.self_attend(x, need_weights=True)
    assert out.shape == x.shape and kv["values"].shape == (2, heads, 5, d_v or dk) and w.shape == (2, heads, 5, 5)
    torch.testing.assert_close(att.self_attend(x)[0], out, atol=1e-5, rtol=1e-5)


def test_attention_dropout_only_in_training():
    att = _attention("dot", dropout=0.5)
    x = _x()
    torch.testing.assert_close(att.self_attend(x)[0], att.self_attend(x)[0])
    att.train()
    assert not torch.allclose(att.self_attend(x)[0], att.self_attend(x)[0])


def test_inconsistent_score_is_rejected():
    score = build_score("dot", 8, 4, AttentionConfig())
    with pytest.raises(AttentionError, match="d_k=8"):
        MultiHeadAttention(D, 4, score)
    with pytest.raises(AttentionError, match="does not divide"):
        MultiHeadAttention(D, 3, build_score("dot", 5, 3, AttentionConfig()))


@pytest.mark.parametrize("score", list(SCORES))
def test_dot_product_scores_take_the_fused_kernel(score, monkeypatch):
    """dot (any scaling), general and gaussian run through SDPA unless weights are requested."""
    import ablate.model.attention as attention_module

    calls = []
    real = attention_module.F.scaled_dot_product_attention

    def spy(*args, **kwargs):
        calls.append(kwargs.get("scale"))
        return real(*args, **kwargs)

    monkeypatch.setattr(attention_module.F, "scaled_dot_product_attention", spy)
    for scale in (True, False):
        att = _attention(score, scale=scale)
        att.self_attend(_x(), causal=True)
        att.self_attend(_x(), need_weights=True)
    fused = score != "additive"
    assert calls == ([0.5, 1.0] if fused else [])


def test_unpack_writes_zeros_at_dropped_positions_and_its_gradient_is_the_kept_rows(monkeypatch):
    """Packing.unpack fills a buffer it did not zero: the dropped rows read 0 whatever the memory held, the kept
    rows hold ``x`` in order, and the gradient reaching ``x`` is the kept rows of the upstream gradient."""
    keep = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]], dtype=torch.bool)  # (B, T), right padding
    rows = keep.reshape(-1).nonzero().squeeze(1)
    packing = Packing(rows, 3, 4)
    assert packing.dropped.tolist() == (~keep).reshape(-1).nonzero().squeeze(1).tolist()
    nan_empty = torch.Tensor.new_empty
    monkeypatch.setattr(
        torch.Tensor, "new_empty", lambda self, *size, **kw: nan_empty(self, *size, **kw).fill_(math.nan)
    )
    x = torch.randn(rows.numel(), 5, requires_grad=True)
    full = packing.unpack(x)  # (B, T, 5)
    assert full.shape == (3, 4, 5) and full[~keep].abs().max() == 0
    torch.testing.assert_close(full[keep], x.detach(), rtol=0, atol=0)
    torch.testing.assert_close(packing.pack(full), x.detach(), rtol=0, atol=0)
    grad = torch.randn(3, 4, 5)
    full.backward(grad)
    torch.testing.assert_close(x.grad, grad[keep], rtol=0, atol=0)
    whole = Packing(torch.arange(12), 3, 4)  # a batch without padding drops nothing
    assert whole.dropped.numel() == 0
    y = torch.randn(12, 5)
    torch.testing.assert_close(whole.unpack(y), y.view(3, 4, 5), rtol=0, atol=0)


def _rope(x: torch.Tensor) -> torch.Tensor:
    """RoPE (Su et al. 2021, eq. 34) as a complex rotation of the pairs (j, j + d/2) by pos * 10000^(-2j/d)."""
    half = x.size(-1) // 2
    angle = torch.arange(x.size(-2), dtype=torch.float64)[:, None] * 10000.0 ** (-2 * torch.arange(half) / (2 * half))
    z = torch.complex(x[..., :half].double(), x[..., half:].double()) * torch.polar(torch.ones_like(angle), angle)
    return torch.cat((z.real, z.imag), -1).to(x.dtype)


def _alibi(t: int) -> torch.Tensor:
    """(3, T, T): ALiBi for 3 heads, -m (i - j) to the left (Press et al. 2022, sec. 3; the slopes of 2 heads,
    2^-4 and 2^-8, then 2^-2 of 4 as in the paper's code), -m 2^(4/3) (j - i) to the right."""
    slopes = torch.tensor([2.0**-4, 2.0**-8, 2.0**-2])[:, None, None]
    i, j = torch.arange(t)[:, None], torch.arange(t)[None, :]
    return torch.where(j <= i, -slopes * (i - j), -slopes * 2 ** (4 / 3) * (j - i))


@pytest.mark.parametrize("positions", list(POSITIONS))
@pytest.mark.parametrize("score", list(SCORES))
def test_every_score_and_position_scheme_is_its_equation(score, positions):
    """softmax(s * score(q, k) + bias + mask) V with heads * d_k != d_model (3 x 6 of 16, d_v 5), written from
    each paper's equation (:func:`tests.model.test_scores._naive`, RoPE, ALiBi), against both paths."""
    from tests.model.test_scores import _naive

    heads, d_k, d_v, (B, T) = 3, 6, 5, (2, 5)
    att = _attention(score, heads=heads, scale="auto", d_k=d_k, d_v=d_v)
    if getattr(att.score, "bandwidth", None) is not None:
        with torch.no_grad():
            att.score.bandwidth.copy_(torch.tensor([0.5, 1.0, 2.0]))
    pos = build_positions(positions, D, d_k, heads, 32)
    if positions not in ("sinusoidal", "learned", "none", "rotary", "alibi"):
        raise AssertionError(f"no reference for positions {positions}; add one when adding a scheme")
    x, pad = _x(), _pad_mask()
    q = att.q_proj(x).view(B, T, heads, d_k).transpose(1, 2)
    k = att.k_proj(x).view(B, T, heads, d_k).transpose(1, 2)
    v = att.v_proj(x).view(B, T, heads, d_v).transpose(1, 2)
    if positions == "rotary":
        q, k = _rope(q), _rope(k)
    scores = _naive(att.score, q, k) * (1 / math.sqrt(d_k) if att.score.paper_scale else 1.0)
    if positions == "alibi":
        scores = scores + _alibi(T)
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    for causal, mask in ((True, None), (False, pad), (True, pad)):
        blocked = (future if causal else torch.zeros(T, T, dtype=torch.bool)) | (
            torch.zeros(B, 1, 1, T, dtype=torch.bool) if mask is None else mask[:, None, None, :]
        )
        weights = torch.softmax(scores.masked_fill(blocked, -math.inf), dim=-1)
        expected = att.out_proj((weights @ v).transpose(1, 2).reshape(B, T, heads * d_v))
        for need_weights in (False, True):
            out, _, w = att.self_attend(
                x, key_padding_mask=mask, causal=causal, positions=pos, need_weights=need_weights
            )
            torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(w, weights, atol=1e-5, rtol=1e-5)
