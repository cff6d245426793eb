"""``ablate bench``: a quick end-to-end run, and the parts whose correctness the figures rest on."""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
from pathlib import Path

import pytest
import torch
import typer
from torch import nn
from typer.testing import CliRunner

from ablate.bench import BenchOptions
from ablate.bench.processes import write_corpus
from ablate.bench.report import write_json
from ablate.bench.runner import bench, register
from ablate.bench.speed import FixedLength, TorchTransformer
from ablate.bench.timing import interleaved
from ablate.config import ModelConfig
from ablate.model.build import build_model
from ablate.model.decoding import beam_search, greedy
from ablate.utils.commands import typer_app
from ablate.utils.io import OutputError

RATIOS = (
    "dot_scaled_vs_torch",
    "dot_unscaled_vs_scaled",
    "additive_vs_dot",
    "additive_chunked_mem_vs_naive",
    "beam5_cache_speedup",
)
TINY = [
    "--data",
    "builtin",
    "--builtin-pairs",
    "300",
    "--vocab-size",
    "120",
    "--d-model",
    "16",
    "--layers",
    "1",
    "--heads",
    "2",
    "--d-ff",
    "32",
]


@pytest.mark.slow
def test_quick_run_writes_every_ratio(tmp_path: Path, cache_dir: Path):
    app = typer.Typer()
    app.command("noop")(lambda: None)  # a second command keeps `bench` a named sub-command
    register(app)
    out = tmp_path / "bench.json"
    result = CliRunner().invoke(
        app, ["bench", "--quick", *TINY, "--sections", "training,decoding,memory", "--json", str(out)]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    for key in RATIOS:
        value = report["ratios"][key]
        assert value is not None and math.isfinite(value) and value > 0, (key, value)
        assert isinstance(report["targets_met"][key], bool)
    variants = report["training"]["variants"]
    assert {"torch", "dot-scaled", "additive-scaled", "pos-alibi", "rnn-additive"} <= set(variants)
    assert all(row["tokens_per_s"] > 0 for row in variants.values())
    assert report["decoding"]["modes"]["beam5-nocache"]["tokens"] == 4 * 12  # 4 sentences held to 12 tokens
    assert report["meta"]["hardware"]["threads"] == torch.get_num_threads()
    assert report["targets_met"]["startup_first_step_s"] is None  # not measured: no verdict


def test_bad_option_is_one_line(cache_dir: Path):
    app = typer_app()  # what ablate.cli mounts the bench on: user errors end as one line, exit 2
    app.command("noop")(lambda: None)
    register(app)
    result = CliRunner().invoke(app, ["bench", "--sections", "training,speed"])
    assert result.exit_code == 2
    assert "unknown bench section(s) speed" in result.output


def test_json_to_a_folder_or_an_unwritable_path_is_one_line(tmp_path: Path):
    """``--json`` naming a folder, or a path under a file: a traceback once the first section was measured."""
    (tmp_path / "a_file").write_text("x")
    for path, message in ((tmp_path, "is an existing folder"), (tmp_path / "a_file" / "b.json", "was not written")):
        with pytest.raises(OutputError, match=message) as err:
            write_json({"ratios": {}}, path)
        assert "\n" not in str(err.value)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_reference_is_torch_transformer_around_our_embeddings(norm):
    """With copied weights the reference computes exactly our standard model (eval mode)."""
    torch.manual_seed(0)
    cfg = ModelConfig(layers=2, d_model=16, d_ff=24, heads=4, dropout=0.0, norm=norm)
    ours = build_model(cfg, 23, 23, pad_id=0).eval()
    ref = TorchTransformer(23, 16, 4, 2, 24, dropout=0.0, norm_first=norm == "pre").eval()
    assert sum(p.numel() for p in ref.parameters()) == sum(p.numel() for p in ours.parameters())

    def attention(dst: nn.MultiheadAttention, src) -> None:
        dst.in_proj_weight.copy_(torch.cat([src.q_proj.weight, src.k_proj.weight, src.v_proj.weight]))
        dst.in_proj_bias.copy_(torch.cat([src.q_proj.bias, src.k_proj.bias, src.v_proj.bias]))
        dst.out_proj.load_state_dict(src.out_proj.state_dict())

    with torch.no_grad():
        ref.embed.weight.copy_(ours.tgt_embed.weight)
        for dst, src in zip(ref.transformer.encoder.layers, ours.encoder):
            attention(dst.self_attn, src.self_attn)
            dst.linear1.load_state_dict(src.ffn.inner.state_dict())
            dst.linear2.load_state_dict(src.ffn.outer.state_dict())
            dst.norm1.load_state_dict(src.res_attn.norm.state_dict())
            dst.norm2.load_state_dict(src.res_ffn.norm.state_dict())
        for dst, src in zip(ref.transformer.decoder.layers, ours.decoder):
            attention(dst.self_attn, src.self_attn)
            attention(dst.multihead_attn, src.cross_attn)
            dst.linear1.load_state_dict(src.ffn.inner.state_dict())
            dst.linear2.load_state_dict(src.ffn.outer.state_dict())
            for dst_norm, res in zip((dst.norm1, dst.norm2, dst.norm3), (src.res_self, src.res_cross, src.res_ffn)):
                dst_norm.load_state_dict(res.norm.state_dict())
        if norm == "pre":
            ref.transformer.encoder.norm.load_state_dict(ours.encoder_norm.state_dict())
            ref.transformer.decoder.norm.load_state_dict(ours.decoder_norm.state_dict())
    g = torch.Generator().manual_seed(1)
    src_ids, tgt_ids = torch.randint(3, 23, (3, 7), generator=g), torch.randint(3, 23, (3, 5), generator=g)
    src_ids[1, 4:] = 0  # padding
    torch.testing.assert_close(ref(src_ids, tgt_ids), ours(src_ids, tgt_ids), atol=1e-5, rtol=1e-5)


def test_reference_drops_out_where_ours_does():
    ref = TorchTransformer(11, 8, 2, 1, 16, dropout=0.1, attention_dropout=0.0)
    for layer in [*ref.transformer.encoder.layers, *ref.transformer.decoder.layers]:
        assert isinstance(layer.dropout, nn.Identity) and layer.self_attn.dropout == 0.0
        assert layer.dropout1.p == 0.1


class EagerToStop(nn.Module):
    """A model whose favourite token is always EOS (id 2)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model, self.pad_id = model, model.pad_id

    def encode(self, src):
        return self.model.encode(src)

    def decode(self, tgt, enc, state=None):
        logits, state = self.model.decode(tgt, enc, state)
        logits[..., 2] += 100.0
        return logits, state


@pytest.mark.parametrize("use_cache", [True, False])
def test_fixed_length_holds_every_hypothesis_to_the_limit(use_cache: bool):
    torch.manual_seed(0)
    model = EagerToStop(build_model(ModelConfig(layers=1, d_model=16, d_ff=24, heads=2, dropout=0.0), 13, 13).eval())
    src = torch.randint(3, 13, (3, 4))
    assert [len(h) for h in greedy(model, src, 1, 2, 0.0, 6, use_cache=use_cache)] == [0, 0, 0]
    fixed = FixedLength(model, eos=2, penalty=1e4)
    assert [len(h) for h in greedy(fixed, src, 1, 2, 0.0, 6, use_cache=use_cache)] == [6, 6, 6]
    assert [len(h) for h in beam_search(fixed, src, 3, 1, 2, 1.0, 0.0, 6, use_cache=use_cache)] == [6, 6, 6]


def test_write_corpus_grows_train_and_copies_the_rest(tmp_path: Path):
    splits = {"train": (["a b c", "d e"], ["A B C", "D E"]), "val": (["x"], ["X"])}
    write_corpus(tmp_path, splits, 5)
    src = (tmp_path / "train.en").read_text().splitlines()
    tgt = (tmp_path / "train.de").read_text().splitlines()
    assert len(src) == len(tgt) == 5 and len(set(src)) == 5
    assert src[:2] == ["a b c", "d e"] and src[2] == "b1 c a"  # repetition 1: rotated, first word marked
    assert (tmp_path / "val.en").read_text() == "x\n" and (tmp_path / "val.de").read_text() == "X\n"


def test_interleaved_rotates_the_order_and_skips_warmup():
    calls: list[str] = []
    seconds = interleaved({name: (lambda n=name: calls.append(n)) for name in "abc"}, reps=3, warmup=1)
    assert calls == list("abc") + list("abc") + list("bca") + list("cab")
    assert all(len(v) == 3 for v in seconds.values())


def test_command_defaults_are_the_options_defaults():
    """``ablate bench`` with no option runs ``BenchOptions()`` (what scripts/gpu_check builds from): a default
    changed in one place only would make the two benchmarks measure different models."""
    fields = {f.name for f in dataclasses.fields(BenchOptions)} - {"variants", "plugins", "sections"}
    defaults = {name: p.default.default for name, p in inspect.signature(bench).parameters.items() if name in fields}
    assert len(defaults) == 23 and defaults == {name: getattr(BenchOptions(), name) for name in defaults}
