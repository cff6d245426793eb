"""The contract of a score or position scheme: what ablate's suite runs on each of its own, and a plugin on its.

``tests/model/test_contract.py`` runs :func:`check_score` on every registered score and
:func:`check_positions` on every registered position scheme; a plugin's test file loads the plugin and calls one (as docs/extending.md shows)::

    import ablate.testing
    from ablate.utils.plugins import load

    def test_cosine():
        load(["cosine.py"])
        ablate.testing.check_score("cosine", temperature=5.0)

Each raises ``AssertionError`` naming the invariant that failed, and the config's one-line ``ConfigError`` for a
parameter the component does not take (did-you-mean) or a value of the wrong type. torch is needed (it is a model test).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from ablate.config import AttentionConfig, ModelConfig
from ablate.model.attention import MultiHeadAttention
from ablate.model.build import build_model
from ablate.model.positions import POSITIONS, build_positions
from ablate.model.scores import SCORES, build_score
from ablate.registry import check_params

D, HEADS = 16, 4
DK = D // HEADS
VOCAB = 19

ORDER_BLIND = ("none",)
"""Position schemes that carry no order by design (the bag-of-words baseline): for these
:func:`check_positions` asserts that reversing a source changes nothing."""


def _close(a: torch.Tensor, b: torch.Tensor, what: str) -> None:
    try:
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    except AssertionError as err:
        raise AssertionError(f"{what}: {str(err).splitlines()[0]}") from None


def _x(t: int = 5) -> torch.Tensor:
    return torch.randn(2, t, D, generator=torch.Generator().manual_seed(0))


def check_score(name: str, **params: Any) -> None:
    """Score ``name`` (built with ``params``) keeps the contract of :class:`ablate.model.scores.Score`.

    Checks: (B, H, Tq, Tk) finite scores; ``prepare_keys`` is per position (caches may append);
    ``as_dot``, where given, gives the same softmax; inside :class:`MultiHeadAttention` the fused path
    equals the slow one, masks block the future and padding, and incremental self-attention equals
    full self-attention, for every registered position scheme; and a tiny Transformer with this score
    (sinusoidal positions) translates a source and its reverse differently.
    """
    assert name in SCORES, f"score '{name}' is not registered (registered: {', '.join(SCORES)})"
    cfg = AttentionConfig(score=name, params=check_params("score", name, params, "model.attention.params"))
    torch.manual_seed(0)
    score = build_score(name, DK, HEADS, cfg)
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, HEADS, 5, DK, generator=g), torch.randn(2, HEADS, 7, DK, generator=g)
    keys = score.prepare_keys(k)
    out = score(q, keys)
    assert out.shape == (2, HEADS, 5, 7), f"score '{name}' returned {tuple(out.shape)}, not (B, H, Tq, Tk)"
    assert torch.isfinite(out).all(), f"score '{name}' returned non-finite scores"
    _close(keys[:, :, :3], score.prepare_keys(k[:, :, :3]), f"score '{name}': prepare_keys is not per position")
    form = score.as_dot(q, keys)
    if form is not None:
        q2, k2, bias = form
        via_dot = q2 @ k2.transpose(-1, -2) + (0 if bias is None else bias)
        _close(via_dot.softmax(-1), out.softmax(-1), f"score '{name}': as_dot gives another softmax")
    for positions in POSITIONS:
        _check_attention(build_score(name, DK, HEADS, cfg), build_positions(positions, D, DK, HEADS, 32), name)
    _check_order(ModelConfig(attention=cfg), f"score '{name}'", blind=False)


def check_positions(name: str, **params: Any) -> None:
    """Position scheme ``name`` (built with ``params``) keeps the contract of :class:`~ablate.model.positions.Positions`.

    Checks: each hook applied to a slice at its offset equals that slice of the full result; inside
    :class:`MultiHeadAttention` (dot product) masks hold and incremental equals full; and a tiny
    Transformer with these positions, as built (a learned scheme at its initialisation), translates a
    source and its reverse differently (the same, for the schemes of :data:`ORDER_BLIND`).
    """
    assert name in POSITIONS, f"positions '{name}' is not registered (registered: {', '.join(POSITIONS)})"
    params = check_params("positions", name, params, "model.positions_params")
    torch.manual_seed(0)
    pos = build_positions(name, D, DK, HEADS, 32, params)
    x, heads = torch.randn(2, 9, D), torch.randn(2, HEADS, 9, DK)
    _close(pos.embed(x, 0)[:, 4:7], pos.embed(x[:, 4:7], 4), f"positions '{name}': embed at an offset")
    _close(pos.rotate(heads, 0)[:, :, 4:7], pos.rotate(heads[:, :, 4:7], 4), f"positions '{name}': rotate at an offset")
    full, part = pos.bias(9, 9, 0), pos.bias(3, 9, 4)
    if full is None or part is None:
        assert full is None and part is None, f"positions '{name}': bias is None for some sequences only"
    else:
        assert full.shape == (HEADS, 9, 9), f"positions '{name}': bias has shape {tuple(full.shape)}, not (H, Tq, Tk)"
        _close(full[:, 4:7], part, f"positions '{name}': bias at an offset")
    _check_attention(build_score("dot", DK, HEADS, AttentionConfig()), pos, f"dot with positions '{name}'")
    _check_order(ModelConfig(positions=name, positions_params=params), f"positions '{name}'", name in ORDER_BLIND)


def _check_order(model: ModelConfig, what: str, blind: bool) -> None:
    """A tiny Transformer of ``model``'s components tells a source from its reverse (``blind``: it cannot).

    Without positions the encoder is a bag of words and, with no positions in encoder-decoder
    attention, the decoder cannot tell either; every other scheme must make the difference.
    """
    cfg = dataclasses.replace(model, layers=1, d_model=D, d_ff=2 * D, heads=HEADS, dropout=0.0, max_positions=32)
    torch.manual_seed(0)
    net = build_model(cfg, VOCAB, VOCAB, pad_id=0).eval()
    g = torch.Generator().manual_seed(1)
    src, tgt = torch.randint(3, VOCAB, (1, 7), generator=g), torch.randint(3, VOCAB, (1, 6), generator=g)
    tgt[:, 0] = 1  # BOS
    with torch.no_grad():
        logits = net(torch.cat([src, src.flip(1)]), tgt.expand(2, -1))
    change = (logits[1] - logits[0]).abs().max().item()
    if blind:
        assert change < 1e-5, (
            f"{what}: reversing the source changed the logits by {change:.1e}, but it carries no order"
        )
    else:
        assert change > 1e-2, (
            f"{what}: reversing the source changed the logits by only {change:.1e}; the model is blind to word order"
        )


def _check_attention(score: Any, pos: Any, what: str) -> None:
    att = MultiHeadAttention(D, HEADS, score, scale="auto").eval()
    x, pad = _x(), torch.zeros(2, 5, dtype=torch.bool)
    pad[1, -2:] = True  # the second sequence ends in two pads
    with torch.no_grad():
        for causal, mask in ((True, None), (False, pad)):
            fast, _, _ = att.self_attend(x, key_padding_mask=mask, causal=causal, positions=pos)
            slow, _, w = att.self_attend(x, key_padding_mask=mask, causal=causal, positions=pos, need_weights=True)
            assert w is not None, f"{what}: need_weights=True returned no weights"
            _close(fast, slow, f"{what}: the fused path differs from the slow path")
            _close(w.sum(-1), torch.ones(2, HEADS, 5), f"{what}: attention weights do not sum to 1")
        _, _, w = att.self_attend(x, causal=True, positions=pos, need_weights=True)
        assert w is not None and torch.all(w.triu(1) == 0), f"{what}: a query attends to later positions"
        _, _, w = att.self_attend(x, key_padding_mask=pad, positions=pos, need_weights=True)
        assert w is not None and torch.all(w[1, :, :, -2:] == 0), f"{what}: a query attends to padding"
        x = _x(t=6)
        full, _, _ = att.self_attend(x, causal=True, positions=pos)
        out, cache = [], None
        for chunk in (x[:, :1], x[:, 1:2], x[:, 2:5], x[:, 5:]):
            y, cache, _ = att.self_attend(chunk, cache, causal=True, positions=pos)
            out.append(y)
        _close(torch.cat(out, 1), full, f"{what}: incremental self-attention differs from full")
