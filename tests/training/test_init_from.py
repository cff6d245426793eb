"""``train.init_from=RUN``: weights only, from a run folder or a checkpoint, refused in
one line when they do not fit; and the way to give a finished run a larger budget."""

from __future__ import annotations

from pathlib import Path

import datasets
import pytest
import torch

from ablate.config import ConfigError, load_config
from ablate.data import builtin
from ablate.data.tokenizer import SubwordTokenizer
from ablate.model.build import build_model
from ablate.training.checkpoints import initialise
from ablate.training.module import TranslationModule
from ablate.training.run_folder import RunRecord, claim_run_dir, prepare_run_dir

from tests.helpers.tiny import EVAL_PAIRS, tiny


def _tokenizer(split: str, n: int) -> SubwordTokenizer:
    pairs = list(builtin.generate(split, n))
    return SubwordTokenizer.train(
        datasets.Dataset.from_dict({"src": [e for e, _ in pairs], "tgt": [d for _, d in pairs]}), 120
    )


@pytest.fixture(scope="module")
def tok() -> SubwordTokenizer:
    return _tokenizer("train", 200)


def _model(cfg, tok):
    return build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size, tok.pad_id, tok.joint)


def _cfg(*overrides: str):
    return load_config(None, tiny("train.max_steps=10", *overrides, eval_pairs=EVAL_PAIRS))


@pytest.fixture(scope="module")
def source_run(tmp_path_factory, tok) -> tuple[Path, dict[str, torch.Tensor]]:
    """A run folder as a finished run leaves it: checkpoints/best.ckpt (Lightning's layout) and tokenizer/."""
    run = tmp_path_factory.mktemp("source")
    cfg = _cfg()
    module = TranslationModule(_model(cfg, tok), cfg, vocab={"src": tok.src_vocab_size, "tgt": tok.tgt_vocab_size})
    checkpoint = {"state_dict": module.state_dict(), "hyper_parameters": dict(module.hparams), "global_step": 7}
    (run / "checkpoints").mkdir()
    torch.save(checkpoint, run / "checkpoints" / "best.ckpt")
    torch.save({**checkpoint, "global_step": 9}, run / "checkpoints" / "last.ckpt")
    tok.save(run / "tokenizer")
    return run, module.model.state_dict()


def test_a_new_run_starts_from_the_weights_of_a_run_folder(source_run, tok):
    run, weights = source_run
    cfg = _cfg(f"train.init_from={run}", "model.dropout=0.3")  # dropout has no weights: it fits
    model = _model(cfg, tok)
    notes: list[str] = []
    record = initialise(model, cfg, tok, echo=notes.append)
    assert record == {"checkpoint": str((run / "checkpoints" / "best.ckpt").resolve()), "step": 7}
    assert all(torch.equal(model.state_dict()[k], v) for k, v in weights.items())
    assert notes == ["train.init_from: model.dropout differ from that run (the weights fit)"]


def test_a_checkpoint_file_is_taken_as_it_is(source_run, tok):
    run, _ = source_run
    cfg = _cfg(f"train.init_from={run / 'checkpoints' / 'last.ckpt'}")
    assert initialise(_model(cfg, tok), cfg, tok, echo=lambda _: None)["step"] == 9


def test_a_model_that_does_not_fit_is_refused_naming_the_keys(source_run, tok):
    run, _ = source_run
    cfg = _cfg(f"train.init_from={run}", "model.d_model=48", "model.d_ff=96")
    with pytest.raises(ConfigError) as err:
        initialise(_model(cfg, tok), cfg, tok)
    message = str(err.value)
    assert "\n" not in message and "its weights do not fit this model (model.d_ff, model.d_model differ)" in message


def test_another_vocabulary_of_the_same_size_is_refused(source_run, tok):
    run, _ = source_run
    other = _tokenizer("test", 500)  # other sentences: other merges, other ids
    assert (other.src_vocab_size, other.tgt_vocab_size) == (tok.src_vocab_size, tok.tgt_vocab_size)
    cfg = _cfg(f"train.init_from={run}")
    with pytest.raises(ConfigError, match="its vocabulary is not this run's"):
        initialise(_model(cfg, other), cfg, other)


@pytest.mark.parametrize("where", ["missing", "empty"])
def test_a_wrong_path_is_one_line(tmp_path, tok, where):
    path = tmp_path / where
    if where == "empty":
        path.mkdir()
    cfg = _cfg(f"train.init_from={path}")
    with pytest.raises(ConfigError, match="train.init_from=.*(neither a run folder|no checkpoints/best.ckpt)"):
        initialise(_model(cfg, tok), cfg, tok)


def test_a_finished_run_given_a_larger_budget_says_how(tmp_path):
    cfg = _cfg()
    claim_run_dir(cfg, tmp_path / "run")
    RunRecord(tmp_path / "run", cfg).write("finished")
    with pytest.raises(ConfigError) as err:
        prepare_run_dir(_cfg("train.max_steps=20"), tmp_path / "run")
    assert f"start a new run from it: --run-dir <new> train.init_from={tmp_path / 'run'}" in str(err.value)
