"""The Transformer over every score x scaling x position scheme, and against torch.nn.Transformer."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from torch import nn

from ablate.model.positions import POSITIONS
from ablate.model.scores import SCORES

from tests.helpers.model import WITH_EVERY_WEIGHT

GRID = [(s, sc, p) for s in SCORES for sc in (True, False) for p in POSITIONS]
IDS = [f"{s}-{'scaled' if sc else 'unscaled'}-{p}" for s, sc, p in GRID]


@pytest.mark.parametrize("score,scale,positions", GRID, ids=IDS)
def test_shapes_causality_and_padding(make_model, random_batch, score, scale, positions):
    model = make_model(score, scale, positions)
    src, tgt = random_batch()
    logits = model(src, tgt)
    assert logits.shape == (3, 6, 19) and torch.isfinite(logits).all()

    # causality: changing target token 4 leaves the logits of positions 0..3 unchanged
    changed = tgt.clone()
    changed[:, 4] = (changed[:, 4] + 1 - 3) % 16 + 3
    other = model(src, changed)
    torch.testing.assert_close(other[:, :4], logits[:, :4], atol=1e-5, rtol=1e-5)
    assert not torch.allclose(other[:, 4:], logits[:, 4:])

    # extra right padding on the source changes nothing; on the target, nothing before it
    padded_src = torch.cat((src, torch.zeros(3, 3, dtype=src.dtype)), 1)
    padded_tgt = torch.cat((tgt, torch.zeros(3, 2, dtype=tgt.dtype)), 1)
    torch.testing.assert_close(model(padded_src, padded_tgt)[:, :6], logits, atol=1e-5, rtol=1e-5)
    enc, enc_padded = model.encode(src), model.encode(padded_src)
    torch.testing.assert_close(enc_padded["memory"][0, :7], enc["memory"][0], atol=1e-5, rtol=1e-5)

    # a sentence alone equals the same sentence in a padded batch
    alone = model(src[2:, :5], tgt[2:])
    torch.testing.assert_close(alone, logits[2:], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("score,scale,positions", GRID, ids=IDS)
def test_incremental_decoding_equals_full(make_model, random_batch, score, scale, positions):
    model = make_model(score, scale, positions)
    src, tgt = random_batch()
    enc = model.encode(src)
    full, full_state = model.decode(tgt, enc)
    steps, state = [], None
    for start, end in ((0, 1), (1, 2), (2, 4), (4, 6)):
        logits, state = model.decode(tgt[:, start:end], enc, state)
        steps.append(logits)
    assert state["step"] == full_state["step"] == 6
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)
    # the state returned by a full pass continues like an incremental one
    more = torch.full((3, 1), 5)
    a, _ = model.decode(more, enc, full_state)
    b, _ = model.decode(more, enc, state)
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("score,scale,positions", GRID, ids=IDS)
def test_a_source_without_padding_needs_no_mask(make_model, random_batch, score, scale, positions):
    """``src_padded=False`` (the batch's host flag) drops the padding mask, so SDPA may take its flash kernel;
    the logits are those of the masked path."""
    model = make_model(score, scale, positions)
    src, tgt = random_batch()
    full = src[:1].expand(3, -1).clone()  # three unpadded rows
    full[1:, 0] = 4
    torch.testing.assert_close(model(full, tgt, src_padded=False), model(full, tgt), atol=1e-5, rtol=1e-5)
    assert model.encode(full, padded=False)["src_pad"] is None


@pytest.mark.parametrize("positions", list(POSITIONS))
@pytest.mark.parametrize("score", list(SCORES))
def test_every_parameter_gets_a_gradient(make_model, random_batch, score, positions):
    model = make_model(
        score, True, positions, tie_embeddings=False, attention={"params": WITH_EVERY_WEIGHT.get(score, {})}
    ).train()
    src, tgt = random_batch()
    model(src, tgt).logsumexp(-1).sum().backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert not missing, f"no gradient for {missing}"


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_matches_torch_transformer(make_model, random_batch, norm):
    """dot + no positions + untied embeddings equals torch.nn.Transformer with copied weights."""
    model = make_model(
        "dot", True, "none", norm=norm, tie_embeddings=False, heads=4, d_ff=24, encoder_layers=2, decoder_layers=3
    )
    ref = nn.Transformer(16, 4, 2, 3, 24, dropout=0.0, batch_first=True, norm_first=norm == "pre").eval()

    def copy_attention(dst: nn.MultiheadAttention, src) -> None:
        dst.in_proj_weight.copy_(torch.cat([src.q_proj.weight, src.k_proj.weight, src.v_proj.weight]))
        dst.in_proj_bias.copy_(torch.cat([src.q_proj.bias, src.k_proj.bias, src.v_proj.bias]))
        dst.out_proj.load_state_dict(src.out_proj.state_dict())

    with torch.no_grad():
        for module in model.modules():  # non-trivial norms, so that a mix-up would show
            if isinstance(module, nn.LayerNorm):
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.5, 0.5)
        for dst, src_layer in zip(ref.encoder.layers, model.encoder):
            copy_attention(dst.self_attn, src_layer.self_attn)
            dst.linear1.load_state_dict(src_layer.ffn.inner.state_dict())
            dst.linear2.load_state_dict(src_layer.ffn.outer.state_dict())
            dst.norm1.load_state_dict(src_layer.res_attn.norm.state_dict())
            dst.norm2.load_state_dict(src_layer.res_ffn.norm.state_dict())
        for dst, src_layer in zip(ref.decoder.layers, model.decoder):
            copy_attention(dst.self_attn, src_layer.self_attn)
            copy_attention(dst.multihead_attn, src_layer.cross_attn)
            dst.linear1.load_state_dict(src_layer.ffn.inner.state_dict())
            dst.linear2.load_state_dict(src_layer.ffn.outer.state_dict())
            dst.norm1.load_state_dict(src_layer.res_self.norm.state_dict())
            dst.norm2.load_state_dict(src_layer.res_cross.norm.state_dict())
            dst.norm3.load_state_dict(src_layer.res_ffn.norm.state_dict())
        if norm == "pre":
            ref.encoder.norm.load_state_dict(model.encoder_norm.state_dict())
            ref.decoder.norm.load_state_dict(model.decoder_norm.state_dict())
        else:  # torch always adds final norms; the paper's post-norm stack has none
            ref.encoder.norm, ref.decoder.norm = nn.Identity(), nn.Identity()

    src, tgt = random_batch()
    pad = src.eq(0)
    scale = math.sqrt(16)
    out = ref(
        model.src_embed(src) * scale,
        model.tgt_embed(tgt) * scale,
        tgt_mask=nn.Transformer.generate_square_subsequent_mask(6),
        src_key_padding_mask=pad,
        memory_key_padding_mask=pad,
    )
    torch.testing.assert_close(model(src, tgt), model.generator(out), atol=1e-5, rtol=1e-5)


def test_tied_embeddings(make_model):
    tied = make_model(tie_embeddings=True)
    assert tied.generator.weight is tied.tgt_embed.weight and tied.src_embed is tied.tgt_embed
    assert torch.all(tied.tgt_embed.weight[0] == 0)  # pad row
    untied = make_model(tie_embeddings=False)
    assert untied.generator.weight is not untied.tgt_embed.weight and untied.src_embed is not untied.tgt_embed
    n_tied = sum(p.numel() for p in tied.parameters())
    n_untied = sum(p.numel() for p in untied.parameters())
    assert n_untied - n_tied == 2 * 19 * 16


def test_separate_vocabularies(tiny_config):
    from ablate.model.build import ModelBuildError, build_model

    model = build_model(tiny_config(), 11, 23, pad_id=0, shared_vocab=False)
    assert model.generator.weight is model.tgt_embed.weight and model.src_embed.num_embeddings == 11
    assert model(torch.randint(1, 11, (2, 4)), torch.randint(1, 23, (2, 5))).shape == (2, 5, 23)
    with pytest.raises(ModelBuildError, match="shared_vocab"):
        build_model(tiny_config(), 11, 23)


def test_build_reads_the_config(tiny_config):
    from ablate.model.build import ARCHS, ModelBuildError, build_model

    cfg = tiny_config(
        "additive",
        0.5,
        "rotary",
        layers=2,
        encoder_layers=1,
        decoder_layers=3,
        heads=2,
        d_k=6,
        d_v=5,
        norm="pre",
        attention={"cross_score": "general"},
    )
    model = build_model(cfg, 19, 19)
    assert len(model.encoder) == 1 and len(model.decoder) == 3
    layer = model.decoder[0]
    assert type(layer.self_attn.score).__name__ == "AdditiveScore"
    assert type(layer.cross_attn.score).__name__ == "GeneralScore"
    assert (layer.self_attn.d_k, layer.self_attn.d_v, layer.self_attn.scaling) == (6, 5, 0.5)
    assert isinstance(model.encoder_norm, nn.LayerNorm)
    assert "transformer" in ARCHS
    with pytest.raises(ModelBuildError, match="model.arch='nope' has no builder"):
        build_model(dataclasses.replace(cfg, arch="nope"), 19, 19)


def _transformer_parameters(n_enc, n_dec, d, d_ff, h, d_k, d_v, vocab, copies, score="dot", extra=0):
    """Vaswani et al. (2017) by hand: per attention W_q, W_k (d x h d_k), W_v (d x h d_v), W_o (h d_v x d) with
    biases, plus the score's own weights; feed-forward W_1, W_2 with biases; 2 d per LayerNorm (2 per encoder
    layer, 3 per decoder layer); ``copies`` vocab x d embedding matrices; ``extra`` for what else a variant has."""
    per_score = {"dot": 0, "general": h * d_k * d_k, "additive": 2 * h * d_k * d_k + h * d_k, "gaussian": h}[score]
    attention = 2 * (d * h * d_k + h * d_k) + (d * h * d_v + h * d_v) + (h * d_v * d + d) + per_score
    ffn = d * d_ff + d_ff + d_ff * d + d
    return n_enc * (attention + ffn + 4 * d) + n_dec * (2 * attention + ffn + 6 * d) + copies * vocab * d + extra


@pytest.mark.parametrize(
    "fields, score, copies, extra",
    [
        ({}, "dot", 1, 0),  # tied, joint vocabulary: one matrix
        ({"tie_embeddings": False}, "dot", 3, 0),
        ({"norm": "pre", "heads": 3, "d_k": 6, "d_v": 5}, "additive", 1, 2 * 2 * 16),  # two final LayerNorms
        ({"encoder_layers": 1, "decoder_layers": 3, "heads": 2, "d_k": 4}, "general", 1, 0),
        ({"positions": "learned"}, "gaussian", 1, 2 * 64 * 16),  # one table per side
        ({"positions": "learned", "share_positions": True}, "dot", 1, 64 * 16),
    ],
)
def test_parameter_count_is_the_papers_formula(tiny_config, fields, score, copies, extra):
    from ablate.config import head_dims
    from ablate.model.build import build_model

    cfg = tiny_config(score, True, fields.pop("positions", "sinusoidal"), norm=fields.pop("norm", "post"), **fields)
    cfg = dataclasses.replace(
        cfg, attention=dataclasses.replace(cfg.attention, params=WITH_EVERY_WEIGHT.get(score, {}))
    )
    model = build_model(cfg, 19, 19)
    d_k, d_v = head_dims(cfg)
    n_enc, n_dec = cfg.encoder_layers or cfg.layers, cfg.decoder_layers or cfg.layers
    expected = _transformer_parameters(n_enc, n_dec, 16, 32, cfg.heads, d_k, d_v, 19, copies, score, extra)
    assert sum(p.numel() for p in model.parameters()) == expected


def test_attention_maps(make_model, random_batch):
    model = make_model("additive", True, "alibi")
    src, tgt = random_batch()
    maps = model.attention_maps(src, tgt)
    assert set(maps) == {
        "encoder.0",
        "encoder.1",
        "decoder.0.self",
        "decoder.0.cross",
        "decoder.1.self",
        "decoder.1.cross",
    }
    assert maps["encoder.0"].shape == (3, 4, 7, 7) and maps["decoder.1.cross"].shape == (3, 4, 6, 7)
    torch.testing.assert_close(maps["decoder.0.cross"].sum(-1), torch.ones(3, 4, 6))
    assert torch.all(maps["decoder.0.cross"][2, :, :, 5:] == 0)  # padding gets no attention
    assert torch.all(maps["decoder.0.self"].triu(1) == 0)


def test_dropout_is_active_in_training_only(make_model, random_batch):
    model = make_model(dropout=0.3, attention_dropout=0.2)
    src, tgt = random_batch()
    torch.testing.assert_close(model(src, tgt), model(src, tgt))
    model.train()
    assert not torch.allclose(model(src, tgt), model(src, tgt))


@pytest.mark.parametrize("positions", list(POSITIONS))
@pytest.mark.parametrize("score", list(SCORES))
def test_bf16_autocast_trains_and_decodes(make_model, random_batch, score, positions):
    """Mixed precision (as on a GPU with precision=bf16-mixed): masks and biases follow the query dtype."""
    model = make_model(score, True, positions).train()
    src, tgt = random_batch()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(src, tgt)
        logits.float().logsumexp(-1).sum().backward()
        model.eval()
        enc = model.encode(src)
        step, state = model.decode(tgt[:, :1], enc)
        step, state = model.decode(tgt[:, 1:3], enc, state)
    assert logits.dtype == torch.bfloat16 and torch.isfinite(logits).all() and torch.isfinite(step).all()
    reference = model(src, tgt)[:, 1:3]  # fp32, same weights
    torch.testing.assert_close(step.float(), reference, atol=0.15, rtol=0.05)


def test_alibi_reduces_to_the_papers_causal_bias_in_the_decoder(make_model):
    """Decoder self-attention (keys j <= i) sees Press et al.'s -m_h (i - j); only the encoder sees
    the second slope."""
    from ablate.model.positions import alibi_slopes

    model = make_model("dot", "auto", "alibi")
    bias = model.tgt_positions.bias(5, 5)
    i, j = torch.tril_indices(5, 5)
    torch.testing.assert_close(bias[:, i, j], -alibi_slopes(4)[:, None] * (i - j).float())


@pytest.mark.parametrize("share", [False, True])
def test_learned_positions_are_one_table_per_side_unless_shared(tiny_config, share):
    """fairseq and Gehring et al. (2017) learn encoder and decoder positions separately."""
    from ablate.model.build import build_model

    model = build_model(tiny_config(positions="learned", share_positions=share), 19, 19)
    assert (model.src_positions.weight is model.tgt_positions.weight) == share
    shared = build_model(tiny_config(positions="learned", share_positions=True), 19, 19)
    n = sum(p.numel() for p in model.parameters()) - sum(p.numel() for p in shared.parameters())
    assert n == (0 if share else 64 * 16)  # max_positions x d_model
    names = {name for name, _ in model.named_parameters() if "positions" in name}
    assert names == ({"src_positions.weight"} if share else {"src_positions.weight", "tgt_positions.weight"})
    # the decoder's table is the one the decoder reads: changing it moves decoder outputs only
    src, tgt = torch.randint(3, 19, (2, 5)), torch.randint(3, 19, (2, 4))
    enc = model.encode(src)
    before = model.decode(tgt, enc)[0]
    with torch.no_grad():
        model.tgt_positions.weight.add_(1.0)
    assert torch.allclose(model.encode(src)["memory"], enc["memory"]) != share  # the encoder's moves only if shared
    assert not torch.allclose(model.decode(tgt, model.encode(src))[0], before)


@pytest.mark.parametrize(
    "score,cross", [("dot", None), ("additive", None), ("additive", "dot"), ("gaussian", "additive")]
)
@pytest.mark.parametrize("scale", ["auto", True, False, 0.3])
def test_resolved_scale_is_what_every_attention_uses(tiny_config, score, cross, scale):
    """``resolved_scale(cfg)`` (for the run record) equals ``.scaling`` of the built self/cross attention."""
    from ablate.model.build import build_model, resolved_scale

    cfg = tiny_config(score, scale, attention={"cross_score": cross})
    model = build_model(cfg, 19, 19)
    for layer in model.decoder:
        assert layer.self_attn.scaling == resolved_scale(cfg)
        assert layer.cross_attn.scaling == resolved_scale(cfg, cross=True)
    assert all(layer.self_attn.scaling == resolved_scale(cfg) for layer in model.encoder)
    expected = {"auto": {"dot": 0.5, "gaussian": 0.5, "additive": 1.0}, True: 0.5, False: 1.0, 0.3: 0.3}[scale]
    pick = (lambda name: expected[name]) if scale == "auto" else (lambda name: expected)
    assert resolved_scale(cfg) == pick(score) and resolved_scale(cfg, cross=True) == pick(cross or score)


def test_sdpa_gets_no_mask_for_an_unpadded_batch_and_a_boolean_one_for_padding(make_model, random_batch, monkeypatch):
    """SDPA's flash backend takes no mask, so an unpadded batch of the standard model passes
    none (plain causal self-attention passes ``is_causal``); a padded one passes a boolean mask, not a
    materialised float one. The outputs are those of the explicit masked softmax."""
    import ablate.model.attention as attention_module

    masks = []
    real = attention_module.F.scaled_dot_product_attention

    def spy(*args, **kwargs):
        masks.append((kwargs["attn_mask"], kwargs["is_causal"]))
        return real(*args, **kwargs)

    monkeypatch.setattr(attention_module.F, "scaled_dot_product_attention", spy)
    model = make_model("dot", True, "sinusoidal")
    src, tgt = random_batch()
    full = src[:1].expand(3, -1).clone()
    model(full, tgt, src_padded=False)
    assert len(masks) == 2 * 3 and all(mask is None for mask, _ in masks)  # encoder, self and cross per layer
    assert sum(causal for _, causal in masks) == 2  # the decoder's self-attention
    masks.clear()
    out = model(src, tgt)
    assert {mask.dtype for mask, _ in masks if mask is not None} == {torch.bool}
    assert sum(mask is None for mask, _ in masks) == 2
    torch.testing.assert_close(out, model.decode(tgt, model.encode(src, maps={}), maps={})[0], atol=1e-5, rtol=1e-5)


def _ragged_target(tgt: torch.Tensor) -> torch.Tensor:
    """``tgt`` with right padding: row r ends r positions early."""
    tgt = tgt.clone()
    for row in range(1, tgt.size(0)):
        tgt[row, tgt.size(1) - row :] = 0
    return tgt


@pytest.mark.parametrize("score,scale,positions", GRID, ids=IDS)
def test_packed_rows_give_the_logits_and_gradients_of_the_padded_forward(
    make_model, random_batch, score, scale, positions
):
    """With ``rows`` / ``src_rows`` (the non-padding positions) only those go through the position-wise layers;
    the logits at them and every gradient equal the full padded forward's."""
    model = make_model(score, scale, positions).train()  # no dropout in the tiny model
    src, tgt = random_batch()
    tgt = _ragged_target(tgt)
    rows, src_rows = tgt.reshape(-1).ne(0).nonzero().squeeze(1), src.reshape(-1).ne(0).nonzero().squeeze(1)
    seen = []
    model.encoder[0].ffn.register_forward_hook(lambda module, args, out: seen.append(args[0].shape))
    packed = model(src, tgt, rows=rows, src_rows=src_rows)
    assert seen == [torch.Size([src_rows.numel(), 16])] and packed.shape == (rows.numel(), 19)
    packed.logsumexp(-1).sum().backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    full = model(src, tgt).reshape(-1, 19).index_select(0, rows)
    torch.testing.assert_close(packed, full, atol=1e-5, rtol=1e-5)
    full.logsumexp(-1).sum().backward()
    assert grads.keys() == {name for name, p in model.named_parameters() if p.grad is not None}
    for name, p in model.named_parameters():
        if p.grad is not None:
            torch.testing.assert_close(grads[name], p.grad, atol=1e-5, rtol=1e-4, msg=name)


def test_packed_rows_under_bf16_autocast(make_model, random_batch):
    model = make_model().train()
    src, tgt = random_batch()
    tgt = _ragged_target(tgt)
    rows, src_rows = tgt.reshape(-1).ne(0).nonzero().squeeze(1), src.reshape(-1).ne(0).nonzero().squeeze(1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        packed = model(src, tgt, rows=rows, src_rows=src_rows)
        packed.float().logsumexp(-1).sum().backward()
    full = model(src, tgt).reshape(-1, 19).index_select(0, rows)
    torch.testing.assert_close(packed.float(), full, atol=0.15, rtol=0.05)


def test_dropout_keeps_each_value_with_probability_1_minus_p_and_rescales_it():
    from ablate.model.transformer import Dropout

    drop = Dropout(0.25)
    x = torch.ones(200, 500, requires_grad=True)
    assert drop.eval()(x) is x
    y = drop.train()(x)
    kept = y != 0
    assert abs(kept.float().mean().item() - 0.75) < 0.01
    torch.testing.assert_close(y[kept], torch.full_like(y[kept], 1 / 0.75))
    y.sum().backward()
    torch.testing.assert_close(x.grad, y.detach())  # d/dx of x * mask is the mask
    assert Dropout(0.0).train()(x) is x and not Dropout(1.0).train()(x).any()
    assert repr(drop) == "Dropout(p=0.25)"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_dropout_keeps_values_with_probability_1_minus_p_in_half_precision_too(dtype):
    """A bf16 uniform has 2^-8 steps, so ``rand_like(x) >= 0.1`` kept 89.8 % of a bf16 tensor (13 standard errors
    from 90 % over 4M values), a bias that a CPU run under bf16 autocast had at every dropout site."""
    from ablate.model.transformer import Dropout

    torch.manual_seed(0)
    y = Dropout(0.1).train()(torch.ones(4_000_000, dtype=dtype))
    assert y.dtype == dtype
    assert abs(y.ne(0).float().mean().item() - 0.9) < 5 * (0.9 * 0.1 / 4e6) ** 0.5
