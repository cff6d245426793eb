"""The training loss computes logits for non-padding target rows only: its loss and
gradients are those of the full (B, T, V) logits with padding ignored; and AdamW's kernel per device (item 1)."""

from __future__ import annotations

import pytest
import torch

from ablate.config import Config
from ablate.training.module import make_optimizer, sequence_loss, target_rows, token_loss

from tests.helpers.model import PAD, VOCAB, random_batch, tiny_model


def _batch(score: str = "dot", arch: str = "transformer"):
    src, tgt_in = random_batch(batch=3, src_len=7, tgt_len=6)
    tgt_out = torch.cat((tgt_in[:, 1:], torch.full((3, 1), 2)), dim=1)
    for row in range(1, 3):  # ragged targets: row r ends r positions early
        tgt_in[row, 6 - row :] = PAD
        tgt_out[row, 6 - row :] = PAD
    return {
        "src": src,
        "tgt_in": tgt_in,
        "tgt_out": tgt_out,
        "tgt_tokens": int(tgt_out.ne(PAD).sum()),
        "src_padded": True,
    }


@pytest.mark.parametrize("arch", ["transformer", "rnn"])
def test_the_loss_over_non_padding_rows_equals_the_full_loss_and_its_gradients(arch):
    batch = _batch()
    model = tiny_model("additive" if arch == "rnn" else "dot", arch=arch).train()
    loss, ntok = sequence_loss(model, batch, PAD, 0.1)
    loss.backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    logits = model(batch["src"], batch["tgt_in"])  # (B, T, V): the full path
    assert logits.shape == (3, 6, VOCAB)
    full, full_ntok = token_loss(logits, batch["tgt_out"], PAD, 0.1)
    full.backward()
    assert ntok == full_ntok == batch["tgt_tokens"] < batch["tgt_out"].numel()
    torch.testing.assert_close(loss, full, rtol=1e-5, atol=1e-6)
    assert grads.keys() == {name for name, p in model.named_parameters() if p.grad is not None}
    for name, p in model.named_parameters():
        if p.grad is not None:
            torch.testing.assert_close(grads[name], p.grad, rtol=1e-5, atol=1e-6, msg=name)


def test_only_non_padding_rows_reach_the_output_projection():
    batch = _batch()
    model = tiny_model("dot").train()
    seen = []
    model.generator.register_forward_hook(lambda module, args, out: seen.append(args[0].shape))
    sequence_loss(model, batch, PAD, 0.1)
    assert seen == [torch.Size([batch["tgt_tokens"], 16])]


def test_target_rows_with_the_host_count_are_the_non_padding_positions_in_order():
    target = torch.tensor([[5, 6, 0], [7, 0, 0]])
    assert target_rows(target, 0, 3).tolist() == target_rows(target, 0).tolist() == [0, 1, 3]


def test_adamw_takes_fused_on_cpu_and_cuda_and_foreach_where_asked(monkeypatch):
    model = tiny_model("dot")
    cfg = Config()
    opt, _ = make_optimizer(model, cfg)
    assert opt.defaults["fused"] is True and not opt.defaults["foreach"]
    opt, _ = make_optimizer(model, cfg, fused=False)  # under an fp16 gradient scaler
    assert opt.defaults["foreach"] is True and not opt.defaults["fused"]
    # every parameter on a CUDA device -> fused, decided from the devices alone
    cuda = torch.device("cuda")
    monkeypatch.setattr(torch.nn.Parameter, "device", property(lambda self: cuda), raising=False)
    monkeypatch.setattr(torch.optim.AdamW, "__init__", lambda self, groups, **kw: setattr(self, "kw", kw))
    monkeypatch.setattr("ablate.training.module.WarmupDecay", lambda *a, **k: None)
    opt, _ = make_optimizer(model, cfg)
    assert opt.kw.get("fused") is True and "foreach" not in opt.kw
    opt, _ = make_optimizer(model, cfg, fused=False)  # under an fp16 gradient scaler
    assert opt.kw.get("foreach") is True and "fused" not in opt.kw


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_loss_and_its_gradient_are_those_of_torch_cross_entropy(smoothing, dtype):
    """``token_loss`` (one fused backward) equals ``F.cross_entropy`` with ``label_smoothing`` and ``ignore_index``
    (the formulation it replaced): value and logit gradient, padding targets ignored, (B, T, V) and (N, V)."""
    torch.manual_seed(0)
    logits = (torch.randn(4, 5, VOCAB) * 3).to(dtype).requires_grad_()
    target = torch.randint(1, VOCAB, (4, 5))
    target[1, 3:] = PAD
    target[3, 1:] = PAD
    loss, ntok = token_loss(logits, target, PAD, smoothing)
    (loss * 1.7).backward()
    ours = logits.grad.clone()
    logits.grad = None
    flat = logits.reshape(-1, VOCAB).float()
    reference = torch.nn.functional.cross_entropy(
        flat, target.reshape(-1), ignore_index=PAD, label_smoothing=smoothing, reduction="sum"
    ) / int(target.ne(PAD).sum())
    (reference * 1.7).backward()
    assert ntok == int(target.ne(PAD).sum())
    torch.testing.assert_close(loss, reference, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(ours, logits.grad, rtol=1e-5, atol=1e-7)
    assert ours[1, 3:].abs().max() == 0 and ours[3, 1:].abs().max() == 0
    rows = target.reshape(-1).ne(PAD)
    flat_loss, _ = token_loss(logits.reshape(-1, VOCAB)[rows], target.reshape(-1)[rows], PAD, smoothing)
    torch.testing.assert_close(flat_loss, loss)


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_the_loss_written_over_its_logits_equals_torch_cross_entropy(smoothing):
    """``overwrite=True`` (what ``sequence_loss`` and the benchmark's reference pass): the log-softmax over the
    logits' own buffer gives ``F.cross_entropy``'s value and gradient, and the logits hold the log-probabilities."""
    torch.manual_seed(1)
    leaf = (torch.randn(9, VOCAB) * 3).requires_grad_()
    target = torch.randint(1, VOCAB, (9,))
    target[4] = PAD
    logits = leaf * 1.0  # a fresh (N, V) buffer, as a model's output projection gives
    loss, _ = token_loss(logits, target, PAD, smoothing, overwrite=True)
    torch.testing.assert_close(logits, torch.log_softmax(leaf.detach(), -1))
    (loss * 0.6).backward()
    ours = leaf.grad.clone()
    leaf.grad = None
    reference = torch.nn.functional.cross_entropy(
        leaf, target, ignore_index=PAD, label_smoothing=smoothing, reduction="sum"
    ) / int(target.ne(PAD).sum())
    (reference * 0.6).backward()
    torch.testing.assert_close(loss, reference, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(ours, leaf.grad, rtol=1e-5, atol=1e-7)


def test_overwriting_logits_that_another_node_saved_raises_in_backward():
    leaf = torch.randn(6, VOCAB, requires_grad=True)
    logits = leaf.exp()  # exp's backward reads its output
    loss, _ = token_loss(logits, torch.randint(1, VOCAB, (6,)), PAD, 0.1, overwrite=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_only_non_padding_source_positions_reach_the_encoders_position_wise_layers():
    batch = {**_batch(), "src_tokens": int(_batch()["src"].ne(PAD).sum())}
    model = tiny_model("dot").train()
    seen = []
    model.encoder[0].ffn.register_forward_hook(lambda module, args, out: seen.append(args[0].shape))
    sequence_loss(model, batch, PAD, 0.1)
    assert batch["src_tokens"] < batch["src"].numel() and seen == [torch.Size([batch["src_tokens"], 16])]
    seen.clear()
    sequence_loss(model, {**batch, "src_padded": False}, PAD, 0.1)  # the host says: no padding to skip
    assert seen == [batch["src"].shape + (16,)]


def test_a_second_backward_through_the_loss_raises_rather_than_reusing_its_spent_buffer():
    logits = torch.randn(6, VOCAB, requires_grad=True)
    loss, _ = token_loss(logits, torch.randint(1, VOCAB, (6,)), PAD, 0.1)
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_scoring_without_detokenize_says_what_is_missing():
    """A module built without ``detokenize`` cannot score its translations: a ValueError naming it, not a
    ``'NoneType' object is not callable`` after decoding the batch."""
    from ablate.config import load_config
    from ablate.training.module import TranslationModule

    from tests.helpers.tiny import tiny

    module = TranslationModule(tiny_model(), load_config(None, tiny()), vocab={"src": VOCAB, "tgt": VOCAB})
    with pytest.raises(ValueError, match="needs detokenize"):
        module.validation_step({**_batch(), "index": torch.arange(3)}, 0)


def test_test_decoding_runs_no_teacher_forced_pass_and_validation_one():
    """The validation perplexity needs a teacher-forced pass per batch; a test batch only decodes (its loss was
    computed and dropped: a forward pass per test batch, about 8% of decoding 1,000 Multi30k sentences)."""
    from ablate.training.module import TranslationModule

    model = tiny_model("dot")
    module = TranslationModule(model, Config(), detokenize=lambda ids: " ".join(map(str, ids)))
    module.translate = lambda src, beam, len_penalty=None, enc=None: [[5]] * src.size(0)  # type: ignore[method-assign]
    passes = []
    model.register_forward_hook(lambda *args: passes.append(1))
    batch = {**_batch(), "index": torch.arange(3)}
    module.on_test_epoch_start()
    module.test_step(batch, 0)
    assert not passes and len(module._eval[0]) == 3
    module.on_validation_epoch_start()
    module.validation_step(batch, 0)
    assert len(passes) == 1 and module._eval_nll[1] == batch["tgt_tokens"]


@pytest.mark.parametrize("arch,beam", [("transformer", 1), ("transformer", 3), ("rnn", 1), ("rnn", 3)])
def test_validation_encodes_each_batch_once_with_the_loss_and_hypotheses_of_two_passes(arch, beam):
    """Validation's teacher-forced loss (the perplexity) and its decoding start from one encoding of the batch:
    one encoder pass instead of two, and the loss and hypotheses of encoding twice, bit for bit on a CPU."""
    from ablate.training.module import TranslationModule

    model = tiny_model("additive" if arch == "rnn" else "dot", arch=arch, d_model=32, d_ff=64, seed=3)
    module = TranslationModule(model, _with_val_beam(Config(), beam), detokenize=lambda ids: " ".join(map(str, ids)))
    batch = {**_batch(), "index": torch.arange(3)}
    with torch.no_grad():
        loss, ntok = sequence_loss(model, batch, PAD, 0.0)  # the two passes: the loss's own encoding, ...
        hyps = module.translate(batch["src"], beam)  # ... and decoding's
        encodes = []
        model.encode = _counting(model.encode, encodes)  # type: ignore[method-assign]
        module.on_validation_epoch_start()
        module.validation_step(batch, 0)
    assert len(encodes) == 1
    assert module._eval_nll.tolist() == [float(loss) * ntok, ntok]
    assert [text for _, text in module._eval[0]] == [" ".join(map(str, ids)) for ids in hyps]


def _with_val_beam(cfg: Config, beam: int) -> Config:
    import dataclasses

    return dataclasses.replace(cfg, eval=dataclasses.replace(cfg.eval, val_beam=beam))


def _counting(fn, calls: list):
    def counted(*args, **kwargs):
        calls.append(1)
        return fn(*args, **kwargs)

    return counted
