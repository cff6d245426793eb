"""The RNN baseline: shapes, causality, padding invariance, incremental decoding, learning."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from ablate.config import AttentionConfig, ModelConfig, RNNConfig
from ablate.model.build import ModelBuildError, build_model
from ablate.model.decoding import beam_search, greedy
from ablate.model.rnn import RNNSeq2Seq
from ablate.model.scores import SCORES

from tests.helpers.model import BOS, EOS, PAD, VOCAB, random_batch

CELLS = ["gru", "lstm"]
# every score with both scalings, plus the no-attention baseline
VARIANTS = [(score, scale) for score in SCORES for scale in (True, False)] + [("none", True)]
IDS = [f"{score}-{'scaled' if scale else 'unscaled'}" for score, scale in VARIANTS]


def batch(size: int = 3, src_len: int = 7, tgt_len: int = 5, seed: int = 1):
    """(src with ragged right padding: row r ends in r pads, tgt_in starting with BOS)."""
    return random_batch(size, src_len, tgt_len, seed)


def rnn_config(
    cell: str = "gru",
    score: str = "additive",
    scale=True,
    hidden: int = 8,
    layers: int = 2,
    d_model: int = 12,
    **fields,
) -> ModelConfig:
    fields.setdefault("dropout", 0.0)
    return ModelConfig(
        arch="rnn",
        d_model=d_model,
        rnn=RNNConfig(cell=cell, hidden=hidden, layers=layers),
        attention=AttentionConfig(score=score, scale=scale),
        **fields,
    )


def make_rnn(cell: str, score: str, scale=True, seed: int = 0, **fields) -> RNNSeq2Seq:
    torch.manual_seed(seed)
    return build_model(rnn_config(cell, score, scale, **fields), VOCAB, VOCAB, pad_id=PAD).eval()


variants = pytest.mark.parametrize("score,scale", VARIANTS, ids=IDS)
cells = pytest.mark.parametrize("cell", CELLS)


@cells
@variants
def test_shapes_and_batch_first_state(cell, score, scale):
    model = make_rnn(cell, score, scale)
    src, tgt = batch(3, src_len=7, tgt_len=5)
    assert model(src, tgt).shape == (3, 5, VOCAB)
    enc = model.encode(src)
    assert enc["hidden"].shape == (3, 2, 8)
    assert ("cell" in enc) == (cell == "lstm")
    assert ("kv" in enc) == (score != "none")
    logits, state = model.decode(tgt, enc)
    assert logits.shape == (3, 5, VOCAB)
    assert all(value.size(0) == 3 for value in state.values())
    assert set(state) == ({"hidden", "cell"} if cell == "lstm" else {"hidden"})


@cells
@variants
def test_incremental_decoding_equals_full(cell, score, scale):
    model = make_rnn(cell, score, scale)
    src, tgt = batch(3, src_len=7, tgt_len=6)
    enc = model.encode(src)
    full, _ = model.decode(tgt, enc)
    steps, state = [], None
    for i in range(tgt.size(1)):
        logits, state = model.decode(tgt[:, i : i + 1], enc, state)
        steps.append(logits)
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)
    # two tokens at once from a mid-sequence state as well
    _, state = model.decode(tgt[:, :3], enc)
    rest, _ = model.decode(tgt[:, 3:], enc, state)
    torch.testing.assert_close(rest, full[:, 3:], atol=1e-5, rtol=1e-5)


@cells
@variants
def test_future_tokens_never_change_earlier_outputs(cell, score, scale):
    model = make_rnn(cell, score, scale)
    src, tgt = batch(3, src_len=7, tgt_len=6)
    before = model(src, tgt)
    changed = tgt.clone()
    changed[:, 4] = (changed[:, 4] + 5) % (VOCAB - 3) + 3
    after = model(src, changed)
    torch.testing.assert_close(after[:, :4], before[:, :4], atol=0, rtol=0)
    assert not torch.allclose(after[:, 4:], before[:, 4:])


@cells
@variants
def test_extra_source_padding_changes_nothing(cell, score, scale):
    model = make_rnn(cell, score, scale)
    src, tgt = batch(3, src_len=7, tgt_len=5)
    padded = torch.cat((src, src.new_full((3, 4), PAD)), dim=1)
    torch.testing.assert_close(model(padded, tgt), model(src, tgt), atol=1e-5, rtol=1e-5)
    # a real token where padding was does change the output of that sentence (the mask is not vacuous)
    filled = src.clone()
    filled[2, -1] = 5
    assert not torch.allclose(model(filled, tgt)[2], model(src, tgt)[2])
    if score != "none":
        short, long = model.attention_maps(src, tgt)["cross"], model.attention_maps(padded, tgt)["cross"]
        assert short.shape == (3, 1, 5, 7)
        torch.testing.assert_close(long[..., :7], short, atol=1e-5, rtol=1e-5)
        assert long[..., 7:].abs().max() == 0
        assert short[2, ..., -2:].abs().max() == 0  # row 2 has two padding positions
        torch.testing.assert_close(short.sum(-1), torch.ones(3, 1, 5))


@cells
@variants
def test_every_parameter_receives_a_gradient(cell, score, scale):
    model = make_rnn(cell, score, scale, dropout=0.1).train()
    src, tgt = batch(3, src_len=7, tgt_len=5)
    model(src, tgt).logsumexp(-1).sum().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


@cells
@pytest.mark.parametrize("score", ["additive", "dot", "none"])
def test_beam_one_equals_greedy_and_cache_matches_recompute(cell, score):
    model = make_rnn(cell, score, seed=3)
    g = torch.Generator().manual_seed(4)
    src = torch.randint(3, VOCAB, (4, 6), generator=g)
    src[1, 4:] = PAD
    src[3, 2:] = PAD
    kwargs = dict(bos=BOS, eos=EOS, max_len_a=1.0, max_len_b=3)
    expected = greedy(model, src, **kwargs)
    assert beam_search(model, src, beam=1, **kwargs) == expected
    assert greedy(model, src, use_cache=False, **kwargs) == expected
    assert beam_search(model, src, beam=3, **kwargs) == beam_search(model, src, beam=3, use_cache=False, **kwargs)


def test_scaling_and_score_are_wired():
    src, tgt = batch()
    scaled, unscaled = make_rnn("gru", "dot", True), make_rnn("gru", "dot", False)
    assert scaled.attention.scaling == pytest.approx(8**-0.5) and unscaled.attention.scaling == 1.0
    assert not torch.allclose(scaled(src, tgt), unscaled(src, tgt))
    assert type(make_rnn("gru", "general").attention.score).__name__ == "GeneralScore"
    cross_cfg = ModelConfig(
        arch="rnn", d_model=12, rnn=RNNConfig(hidden=8), attention=AttentionConfig(score="dot", cross_score="additive")
    )
    cross = build_model(cross_cfg, VOCAB, VOCAB)
    assert type(cross.attention.score).__name__ == "AdditiveScore"  # cross_score overrides for the RNN


def test_build_model_ties_embeddings_and_checks_vocab():
    model = build_model(rnn_config(tie_embeddings=True), VOCAB, VOCAB)
    assert isinstance(model, RNNSeq2Seq)
    assert model.generator.weight is model.tgt_embed.weight and model.src_embed is model.tgt_embed
    untied = build_model(rnn_config(tie_embeddings=False), VOCAB, VOCAB)
    assert untied.generator.weight is not untied.tgt_embed.weight and untied.src_embed is not untied.tgt_embed
    assert build_model(rnn_config(score="none"), VOCAB, VOCAB).attention is None
    separate = build_model(rnn_config(), VOCAB, VOCAB + 5, shared_vocab=False)
    assert separate.src_embed.num_embeddings == VOCAB and separate.generator.out_features == VOCAB + 5
    with pytest.raises(ModelBuildError, match="shared_vocab"):
        build_model(rnn_config(), VOCAB, VOCAB + 5)


PAIRS = [[3, 4, 5], [6, 7, 8, 9], [10, 11], [12, 13, 14, 15, 16], [17, 3, 9], [5, 6], [18, 12, 4, 7], [8, 14, 11]]


@pytest.mark.slow
@pytest.mark.parametrize("cell,score", [("gru", "additive"), ("lstm", "dot"), ("gru", "none")])
def test_overfits_a_tiny_reversal_task(cell, score):
    """A few hundred Adam steps on 8 fixed pairs learn to reverse them exactly (greedy)."""
    torch.manual_seed(0)
    model = build_model(rnn_config(cell, score, hidden=32, layers=1, d_model=32), VOCAB, VOCAB)
    S = max(map(len, PAIRS))
    src = torch.tensor([p + [PAD] * (S - len(p)) for p in PAIRS])
    tgt = torch.tensor([[BOS] + p[::-1] + [EOS] + [PAD] * (S - len(p)) for p in PAIRS])
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(80):
        loss = torch.nn.functional.cross_entropy(model(src, tgt_in).flatten(0, 1), tgt_out.flatten(), ignore_index=PAD)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    assert loss.item() < 0.05
    assert greedy(model, src, BOS, EOS) == [p[::-1] for p in PAIRS]


def test_bahdanau_attention_is_unscaled_by_default():
    """Bahdanau's additive score has no 1/sqrt(d) (eq. 6); the default scale=auto keeps it so at any size."""
    from ablate.model.build import resolved_scale

    cfg = ModelConfig(
        arch="rnn", d_model=12, rnn=RNNConfig(hidden=64, layers=1), attention=AttentionConfig(score="additive")
    )
    model = build_model(cfg, VOCAB, VOCAB)
    assert model.attention.scaling == 1.0 == resolved_scale(cfg)
    dot = dataclasses.replace(cfg, attention=AttentionConfig(score="dot"))
    assert build_model(dot, VOCAB, VOCAB).attention.scaling == resolved_scale(dot) == 1 / 8  # 1/sqrt(64)
    explicit = dataclasses.replace(cfg, attention=AttentionConfig(score="additive", scale=True))
    assert build_model(explicit, VOCAB, VOCAB).attention.scaling == resolved_scale(explicit) == 1 / 8
    assert math.isnan(resolved_scale(dataclasses.replace(cfg, attention=AttentionConfig(score="none"))))


@pytest.mark.parametrize("score", ["additive", "dot"])
def test_a_source_without_padding_needs_no_mask(score):
    model = make_rnn("gru", score)
    src = torch.randint(3, VOCAB, (3, 5), generator=torch.Generator().manual_seed(0))
    tgt = torch.randint(3, VOCAB, (3, 4), generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(model(src, tgt, src_padded=False), model(src, tgt), atol=1e-6, rtol=1e-6)


def _gru_cell(x, h, w_ih, w_hh, b_ih, b_hh):
    """Cho et al. (2014) GRU: r, z gates, candidate n (PyTorch's gate order r, z, n)."""
    ir, iz, i_n = (x @ w_ih.T + b_ih).chunk(3, -1)
    hr, hz, h_n = (h @ w_hh.T + b_hh).chunk(3, -1)
    r, z = torch.sigmoid(ir + hr), torch.sigmoid(iz + hz)
    return (1 - z) * torch.tanh(i_n + r * h_n) + z * h


def _lstm_cell(x, hc, w_ih, w_hh, b_ih, b_hh):
    """Hochreiter & Schmidhuber (1997) LSTM with a forget gate (gate order i, f, g, o): (h, c)."""
    i, f, g, o = (x @ w_ih.T + b_ih + hc[0] @ w_hh.T + b_hh).chunk(4, -1)
    c = torch.sigmoid(f) * hc[1] + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


def _bahdanau_reference(model: RNNSeq2Seq, src, tgt):
    """Teacher-forced logits, one sentence and one step at a time, from Bahdanau et al. (2015): the annotations
    h_j = [fwd_j; bwd_j] of a bidirectional RNN over the unpadded source (sec. 3.2); at step i the alignment
    e_ij = v^T tanh(W s_{i-1} + U h_j) (eq. 6, A.1.2) from the previous top-layer state, weights a_ij = softmax_j
    (eq. 5), the context c_i = sum_j a_ij h_j (through the value and output maps), and s_i = RNN([E y_{i-1}; c_i],
    s_{i-1}) (A.2.2); the module's documented departures are kept: s_0 from both directions' final states and a
    tanh readout of [s_i; c_i; E y_{i-1}] (no c_i without attention). Returns the logits (B, T, V) and the weights
    a_ij (B, 1, T, S)."""
    lstm = model.lstm
    cell = _lstm_cell if lstm else _gru_cell
    att, layers = model.attention, model.encoder.num_layers

    def weights(rnn, layer, suffix=""):
        return [getattr(rnn, f"{n}_l{layer}{suffix}") for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]

    def out(state):
        return state[0] if lstm else state

    zero = torch.zeros(model.encoder.hidden_size)
    start = (zero, zero) if lstm else zero
    sentences, alignments = [], torch.zeros(src.size(0), 1, tgt.size(1), src.size(1))
    for b in range(src.size(0)):
        n = int(src[b].ne(PAD).sum())
        x = model.src_embed(src[b, :n])  # (n, E): no padding reaches the encoder
        finals = []
        for layer in range(layers):
            fwd, bwd = [], [None] * n
            state = start
            for j in range(n):
                state = cell(x[j], state, *weights(model.encoder, layer))
                fwd.append(state)
            state_b = start
            for j in reversed(range(n)):
                state_b = cell(x[j], state_b, *weights(model.encoder, layer, "_reverse"))
                bwd[j] = state_b
            finals.append((state, state_b))  # fwd at the last word, bwd at the first
            x = torch.stack([torch.cat((out(fwd[j]), out(bwd[j]))) for j in range(n)])  # (n, 2H)
        annotations = x
        hidden, cells = model.bridges[0], model.bridges[-1]
        s = [
            torch.tanh(torch.cat((out(f), out(bk))) @ hidden.weight[k] + hidden.bias[k, 0])
            for k, (f, bk) in enumerate(finals)
        ]
        if lstm:
            s = [
                (s[k], torch.cat((f[1], bk[1])) @ cells.weight[k] + cells.bias[k, 0])
                for k, (f, bk) in enumerate(finals)
            ]
        steps = []
        for i in range(tgt.size(1)):
            y = model.tgt_embed(tgt[b, i])  # E y_{i-1}
            context = y.new_zeros(0)  # no attention: the "None" row of Britz et al. (2017), Table 6
            if att is not None:
                keys, values = att.k_proj(annotations), att.v_proj(annotations)  # (n, H)
                query = att.q_proj(out(s[-1]))  # s_{i-1} of the top layer
                if hasattr(att.score, "v"):  # additive: eq. 6
                    e = torch.tanh(query @ att.score.w_q[0] + keys @ att.score.w_k[0]) @ att.score.v[0]
                else:  # dot (Luong et al. 2015, eq. 8)
                    e = keys @ query
                alignments[b, 0, i, :n] = torch.softmax(e * att.scaling, -1)
                context = att.out_proj(alignments[b, 0, i, :n] @ values)
            inp, new = torch.cat((y, context)), []
            for layer in range(layers):
                new.append(cell(inp, s[layer], *weights(model.decoder, layer)))
                inp = out(new[-1])
            s = new
            steps.append(model.generator(torch.tanh(model.readout(torch.cat((out(s[-1]), context, y))))))
        sentences.append(torch.stack(steps))
    return torch.stack(sentences), alignments


@cells
@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("score", ["additive", "dot", "none"])
def test_the_rnn_is_bahdanaus_encoder_decoder(cell, layers, score):
    """The packed bidirectional encoder, bridge, attention and decoder equal a per-sentence, per-step reference
    written from the paper's equations, padding included (row r of the batch ends in r pads)."""
    model = make_rnn(cell, score, layers=layers)
    if model.attention is not None:
        with torch.no_grad():  # sharper alignments than the initialisation's near-uniform ones
            model.attention.q_proj.weight.mul_(4.0)
            model.attention.k_proj.weight.mul_(4.0)
    src, tgt = batch()
    with torch.no_grad():
        logits, alignments = _bahdanau_reference(model, src, tgt)
        torch.testing.assert_close(model(src, tgt), logits, atol=1e-5, rtol=1e-5)
        if model.attention is not None:
            torch.testing.assert_close(model.attention_maps(src, tgt)["cross"], alignments, atol=1e-5, rtol=1e-5)
