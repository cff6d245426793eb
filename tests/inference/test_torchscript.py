"""``ablate export-model --format torchscript``: the file runs without ablate and decodes as ablate does."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from ablate.config import load_config
from ablate.data import builtin
from ablate.inference.torchscript import FILES, ExportError, check_format, extra_files, script
from ablate.inference.translate import LoadedRun, _batch, load_run, translate
from ablate.model.decoding import greedy

from tests.helpers.tiny import EVAL_PAIRS, MODEL, tiny

TRAIN = (
    "train.max_steps=40",
    "train.max_tokens=1024",
    "train.warmup=10",
    "train.lr=5e-3",
    "eval.beam=1",
    "tracking.wandb=disabled",
)
ARCHS = {
    "transformer": ("model.positions=rotary", "eval.max_len_a=1.2", "eval.max_len_b=3", "data.max_len=12"),
    "rnn": ("model.arch=rnn", "model.rnn.hidden=32", "model.rnn.cell=lstm"),
}

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "getting-started.md"

# Run in a fresh interpreter (-I: no PYTHONPATH, no working directory on sys.path) that cannot import ablate.
BLOCK_ABLATE = r"""
import sys

class NoAblate:
    def find_spec(self, name, path=None, target=None):
        if name == "ablate" or name.startswith("ablate."):
            raise ImportError("ablate is blocked here")

sys.meta_path.insert(0, NoAblate())
"""
STANDALONE = (
    BLOCK_ABLATE
    + r"""
import json
import os
import torch
from tokenizers import Tokenizer

files = dict.fromkeys(["source_tokenizer.json", "target_tokenizer.json", "config.yaml", "export.json"], "")
model = torch.jit.load(sys.argv[1], _extra_files=files)
files = {name: text.decode("utf-8") for name, text in files.items()}  # torch gives the files back as bytes
source = Tokenizer.from_str(files["source_tokenizer.json"])
target = Tokenizer.from_str(files["target_tokenizer.json"])
job = json.loads(sys.stdin.read())
ids = [e.ids for e in source.encode_batch(job["sentences"], add_special_tokens=False)]
hyps = model.translate(ids)
print(json.dumps({
    "ids": ids,
    "hyps": hyps,
    "texts": [target.decode(h, skip_special_tokens=False) for h in hyps],
    "batch": model(torch.tensor(job["batch"])).tolist(),
    "meta": json.loads(files["export.json"]),
    "config": files["config.yaml"],
    "ablate_loaded": any(m == "ablate" or m.startswith("ablate.") for m in sys.modules),
}))
"""
)


@pytest.fixture(scope="module", params=sorted(ARCHS))
def trained(request, tmp_path_factory) -> Path:
    from ablate.training.train import train

    tmp = tmp_path_factory.mktemp(f"export-{request.param}")
    cfg = load_config(
        None, tiny(*TRAIN, *ARCHS[request.param], f"data.cache_dir={tmp / 'cache'}", pairs=300, eval_pairs=EVAL_PAIRS)
    )
    summary = train(cfg, tmp / "run")
    assert summary["status"] == "finished"
    return tmp / "run"


def _sentences() -> list[str]:
    pairs = list(builtin.generate("test", 12))
    long = " ".join(src for src, _ in pairs[:4])  # past data.max_len: clipped as ablate clips it
    return [src for src, _ in pairs] + ["", long]


def _until_eos(row: list[int], eos: int, pad: int) -> list[int]:
    """A row of the exported ``forward``: ids up to EOS, without the padding after a length limit."""
    return [t for t in (row[: row.index(eos)] if eos in row else row) if t != pad]


def _cli(*args: str):
    from ablate import cli

    return CliRunner().invoke(cli.app, list(args))


@pytest.mark.slow
def test_exported_file_runs_without_ablate_and_decodes_as_ablate(trained, tmp_path):
    result = _cli("export-model", str(trained), "--format", "torchscript", "--out", str(tmp_path / "model.pt"))
    assert result.exit_code == 0, result.output
    assert "wrote" in result.output and "greedy" in result.output
    run = load_run(trained)
    sentences = _sentences()
    ids = [s[: run.cfg.data.max_len] for s in run.tokenizer.encode_src(sentences)]
    batch = _batch(ids[:6], torch.device("cpu"))
    job = json.dumps({"sentences": sentences, "batch": batch.tolist()})
    proc = subprocess.run(
        [sys.executable, "-I", "-c", STANDALONE, str(tmp_path / "model.pt")],
        input=job,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout)
    assert got["ablate_loaded"] is False
    assert got["ids"] == run.tokenizer.encode_src(sentences)  # the embedded tokenizer is the run's

    # token ids: the exported loop on ablate's batch tensor = ablate's greedy decoding of it
    e = run.cfg.eval
    ours = greedy(run.module.model, batch, run.tokenizer.bos_id, run.tokenizer.eos_id, e.max_len_a, e.max_len_b)
    assert [_until_eos(row, run.tokenizer.eos_id, run.tokenizer.pad_id) for row in got["batch"]] == ours
    # strings: its translate() of raw ids = `ablate translate --beam 1`, clipping and the empty line included
    assert got["texts"] == translate(run, sentences, beam=1)
    assert sum(len(h) for h in got["hyps"]) > len(sentences)  # a trained model: real output, not all empty
    assert got["meta"]["eos_id"] == run.tokenizer.eos_id and got["meta"]["max_len"] == run.cfg.data.max_len
    assert f"arch: {run.cfg.model.arch}" in got["config"]

    # the getting-started page's loading example, as written, in the same clean interpreter
    (example,) = [b for b in re.findall(r"```python\n(.*?)```", GUIDE.read_text(), flags=re.S) if "torch.jit.load" in b]
    shown = subprocess.run(
        [sys.executable, "-I", "-c", BLOCK_ABLATE + example], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert shown.stdout.strip() == repr(translate(run, ["a man is riding a bike ."], beam=1))


@pytest.mark.slow
def test_export_accepts_a_checkpoint_path_and_keeps_out_of_the_run(trained, tmp_path):
    ckpt = trained / "checkpoints" / "last.ckpt"
    result = _cli("export-model", str(ckpt), "--out", str(tmp_path / "last.pt"))
    assert result.exit_code == 0, result.output
    assert "last.ckpt" in result.output
    files = dict.fromkeys(FILES, "")
    torch.jit.load(str(tmp_path / "last.pt"), _extra_files=files)
    assert json.loads(files["export.json"])["checkpoint"] == "last.ckpt"

    inside = _cli("export-model", str(trained), "--out", str(trained / "model.pt"))
    assert inside.exit_code == 2 and "inside the source" in inside.output
    assert not (trained / "model.pt").exists()


@pytest.mark.parametrize(
    "name, words",
    [
        ("onnx", "ONNX export is not supported"),
        ("CTranslate2", "CTranslate2 export is not supported"),
        ("torchscrip", "did you mean 'torchscript'?"),
    ],
)
def test_formats_ablate_does_not_write_are_one_line_errors(name, words, tmp_path):
    with pytest.raises(ExportError, match=words):
        check_format(name)
    result = _cli("export-model", str(tmp_path), "--format", name, "--out", str(tmp_path / "m.pt"))
    assert result.exit_code == 2
    assert words in result.output and len(result.output.strip().splitlines()) == 1


def test_a_checkpoint_that_is_not_a_run_checkpoint_is_refused(tmp_path):
    stray = tmp_path / "model.ckpt"
    stray.write_bytes(b"")
    result = _cli("export-model", str(stray), "--out", str(tmp_path / "m.pt"))
    assert result.exit_code == 2 and "is not a run's checkpoint" in result.output


def test_a_checkpoint_path_with_another_checkpoint_option_is_refused(tmp_path):
    """``ablate export-model RUN/checkpoints/best.ckpt --checkpoint last`` exported best.ckpt without a word."""
    best = tmp_path / "run" / "checkpoints" / "best.ckpt"
    best.parent.mkdir(parents=True)
    best.write_bytes(b"")
    result = _cli("export-model", str(best), "--checkpoint", "last", "--out", str(tmp_path / "m.pt"))
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert f"--checkpoint last names another checkpoint than {best}" in result.output
    assert not (tmp_path / "m.pt").exists()


# --- every registered variant traces and decodes as ablate does (untrained weights, no run folder) ---


class _Module:
    def __init__(self, model):
        self.model = model


def _untrained(*overrides: str) -> LoadedRun:
    from ablate.data.tokenizer import SubwordTokenizer, train_bpe
    from ablate.model.build import build_model

    cfg = load_config(None, [*MODEL, "data.max_len=16", *overrides])
    tok = SubwordTokenizer(train_bpe(iter([[src for src, _ in builtin.generate("train", 50)]]), 60))
    torch.manual_seed(0)
    model = build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size).eval()
    with torch.no_grad():  # N(0, 1) weights: outputs that vary with the source, the position and the cache
        for weight in model.parameters():
            if weight.dim() > 1:
                weight.normal_()
    return LoadedRun(_Module(model), tok, cfg, Path("best.ckpt"))


VARIANTS = [
    *(f"model.attention.score={s}" for s in ("dot", "additive", "general", "gaussian")),
    *(f"model.positions={p}" for p in ("sinusoidal", "learned", "none", "alibi")),  # rotary: the trained run
    "model.arch=rnn",
    "model.arch=rnn model.attention.score=none",
]


@pytest.mark.slow
@pytest.mark.parametrize("variant", VARIANTS)
def test_every_variant_scripts_and_decodes_as_greedy(variant):
    run = _untrained(*variant.split())
    scripted = script(run)
    tok = run.tokenizer
    ids = tok.encode_src([src for src, _ in builtin.generate("val", 7)])
    batch = _batch([s[:16] for s in ids], torch.device("cpu"))
    ours = greedy(run.module.model, batch, tok.bos_id, tok.eos_id, run.cfg.eval.max_len_a, run.cfg.eval.max_len_b)
    assert scripted.translate([s[:16] for s in ids]) == ours
    assert len({tuple(h) for h in ours}) > 1 and len({t for h in ours for t in h}) >= 5  # not one token repeated


def _past_the_table(positions: str) -> tuple[list[list[int]], list[list[int]]]:
    """Greedy outputs (a*S+b up to 61) of a model with ``positions`` and model.max_positions=20: ablate's, the export's."""
    run = _untrained(f"model.positions={positions}", "model.max_positions=20", "eval.max_len_a=3")
    tok = run.tokenizer
    ids = [s[:16] for s in tok.encode_src([src for src, _ in builtin.generate("val", 7)])]
    ours = greedy(
        run.module.model, _batch(ids, torch.device("cpu")), tok.bos_id, tok.eos_id, 3.0, run.cfg.eval.max_len_b
    )
    return ours, script(run).translate(ids)


def test_the_loaded_file_translates_again_and_again_outside_no_grad(tmp_path):
    """Its weights load requiring grad: the second call of ``translate`` (the usage getting-started shows, no
    ``torch.no_grad()``) raised "a view of a leaf Variable that requires grad is being used in an in-place
    operation" from the traced ReLU."""
    run = _untrained()
    torch.jit.save(script(run), str(tmp_path / "model.pt"))
    model = torch.jit.load(str(tmp_path / "model.pt"))
    ids = [s[:16] for s in run.tokenizer.encode_src([src for src, _ in builtin.generate("val", 3)])]
    first = model.translate(ids)
    assert [model.translate(ids) for _ in range(2)] == [first, first]
    assert model(_batch(ids, torch.device("cpu"))).ne(run.tokenizer.pad_id).any()


def test_the_exported_forward_keeps_an_empty_source_row_empty_as_ablate_translate_does():
    """``model(src)`` decoded a row holding only EOS (an empty line) to a made-up sentence, where ``ablate translate``
    (``TranslationModule.translate``) and the file's own ``translate()`` give an empty one."""
    run = _untrained()
    tok = run.tokenizer
    ids = [s[:16] for s in tok.encode_src([src for src, _ in builtin.generate("val", 2)])]
    batch = _batch([ids[0], [], ids[1]], torch.device("cpu"))
    rows = script(run)(batch).tolist()
    assert rows[1] == [tok.pad_id] * len(rows[1])
    e = run.cfg.eval
    ours = greedy(run.module.model, batch, tok.bos_id, tok.eos_id, e.max_len_a, e.max_len_b)
    assert ours[1] and [_until_eos(row, tok.eos_id, tok.pad_id) for row in rows] == [ours[0], [], ours[2]]


def test_an_output_past_the_learned_positions_stops_there_as_in_greedy():
    ours, exported = _past_the_table("learned")
    assert exported == ours and max(len(h) for h in ours) == 19


def test_a_source_past_the_learned_positions_is_clipped_where_they_end_as_ablate_translate_clips_it():
    """The export clipped sources to data.max_len only: a longer one than learned positions cover crashed it (a
    RuntimeError from the traced encoder); it reads model.max_positions - 1 and says so in export.json."""
    run = _untrained("model.positions=learned", "model.max_positions=12")
    long = [5 + i % 40 for i in range(15)]  # between model.max_positions and data.max_len=16
    batch = _batch([long[:11]], torch.device("cpu"))
    tok, e = run.tokenizer, run.cfg.eval
    assert script(run).translate([long]) == greedy(
        run.module.model, batch, tok.bos_id, tok.eos_id, e.max_len_a, e.max_len_b
    )
    assert json.loads(extra_files(run)["export.json"])["max_len"] == 11


def test_sinusoidal_positions_past_the_table_are_computed_in_the_export_too():
    ours, exported = _past_the_table("sinusoidal")
    assert exported == ours and max(len(h) for h in ours) > 20


class _Branchy(torch.nn.Module):
    """A model whose decoder branches on a tensor's value: tracing keeps one branch, so the export must refuse it."""

    pad_id = 0

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(64, 8)

    def encode(self, src):
        return {"memory": self.embed(src)}

    def decode(self, tgt, enc, state=None):
        logits = (self.embed(tgt) + enc["memory"].mean(1, keepdim=True)) @ self.embed.weight.T
        if float(tgt[0, -1]) == 1:  # data-dependent Python control flow: baked in by the trace
            logits = -logits
        return logits, {"step": (0 if state is None else state["step"]) + tgt.size(1)}


class _Stringy(_Branchy):
    def encode(self, src):
        return {"memory": self.embed(src), "name": "x"}


def test_a_model_the_trace_cannot_follow_is_refused_naming_it():
    run = _untrained()
    run.module.model = _Branchy()
    with pytest.raises(ExportError, match=r"decodes differently from ablate's greedy decoding") as err:
        script(run)
    assert "model.arch=transformer" in str(err.value) and "\n" not in str(err.value)


def test_a_part_that_is_not_tensors_is_named():
    run = _untrained()
    run.module.model = _Stringy()
    with pytest.raises(ExportError, match=r"cannot export the encoder's output\['name'\]: a str"):
        script(run)


def test_the_exported_file_follows_the_umask(tmp_path):
    from ablate.inference.torchscript import export

    old = os.umask(0o022)
    try:
        out = export(_untrained(), tmp_path / "model.pt")
    finally:
        os.umask(old)
    assert out.stat().st_mode & 0o777 == 0o644  # mkstemp alone gave 0600


def test_an_all_nan_checkpoint_is_refused_not_exported(tmp_path):
    from ablate.inference.torchscript import export

    run = _untrained()
    with torch.no_grad():
        for weight in run.module.model.parameters():
            weight.fill_(float("nan"))
    with pytest.raises(ExportError, match=r"best\.ckpt holds NaN or infinite weights \(\d+ tensors") as err:
        export(run, tmp_path / "model.pt")  # was written without a word
    assert "\n" not in str(err.value) and not (tmp_path / "model.pt").exists()


@pytest.mark.parametrize("past", [True, False])
def test_an_id_outside_the_source_vocabulary_is_refused_naming_its_size(past, tmp_path):
    """The loaded file given an id the source tokenizer never makes raised torch's "index out of range in self" from
    deep inside the traced embedding; it says which id and how many the vocabulary holds."""
    run = _untrained()
    torch.jit.save(script(run), str(tmp_path / "model.pt"))
    model = torch.jit.load(str(tmp_path / "model.pt"))
    size = run.tokenizer.src_vocab_size
    bad = size if past else -1
    words = rf"source id {bad} is outside the source vocabulary of {size} ids \(0 to {size - 1}\)"
    with pytest.raises(torch.jit.Error, match=words):
        model.translate([[5, 6], [7, bad]])
    with pytest.raises(torch.jit.Error, match=words):
        model(_batch([[bad, 5]], torch.device("cpu")))
    assert model.translate([[5, size - 1]]) == script(run).translate([[5, size - 1]])
