"""A trained run used from outside: load_from_checkpoint, translate, evaluate,
and what its offline W&B run holds (item 4)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from ablate.config import load_config
from ablate.data import builtin

from tests.helpers.callbacks import SEEN
from tests.helpers.tiny import EVAL_PAIRS, tiny
from tests.helpers.wandb_offline import ended_run, offline_runs, read_run

ROOT = Path(__file__).resolve().parents[2]
SMALL = tiny(
    "train.max_steps=60",
    "train.max_tokens=1024",
    "train.warmup=10",
    "train.lr=5e-3",
    "eval.beam=2",
    "eval.max_len_a=1.0",
    "eval.max_len_b=4",
    "tracking.wandb=offline",
    "tracking.log_checkpoints=true",
    "trainer.enable_progress_bar=false",
    "trainer.callbacks=[{class_path: tests.helpers.callbacks.Recorder, init_args: {tag: t}}]",
    pairs=400,
    eval_pairs=EVAL_PAIRS,
)


def _corpus(folder: Path) -> Path:
    """A small local corpus (train 400, val 40, test 40, extra 30) from the built-in task."""
    folder.mkdir(parents=True)
    for split, kind, n in (
        ("train", "train", 400),
        ("val", "val", 40),
        ("test", "test", 40),
        ("test_extra", "val", 30),
    ):
        pairs = list(builtin.generate(kind, n))[-n:]
        (folder / f"{split}.en").write_text("\n".join(en for en, _ in pairs) + "\n")
        (folder / f"{split}.de").write_text("\n".join(de for _, de in pairs) + "\n")
    return folder


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    from ablate.training.train import train

    tmp = tmp_path_factory.mktemp("inference")
    corpus = _corpus(tmp / "corpus")
    run_dir = tmp / "run"
    SEEN.clear()
    summary = train(load_config(None, [*SMALL, f"data.source={corpus}", f"data.cache_dir={tmp / 'cache'}"]), run_dir)
    assert summary["status"] == "finished"
    return run_dir


def cli_app():
    from ablate import cli

    return cli.app


def _cli(*args: str, input: str | None = None):
    result = CliRunner().invoke(cli_app(), list(args), input=input)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.slow
def test_trainer_options_and_named_callbacks_reach_the_trainer(trained):
    assert SEEN == [{"tag": "t", "progress_bar": False}]


def test_load_from_checkpoint_round_trip(trained):
    from ablate.training.module import TranslationModule

    path = trained / "checkpoints" / "best.ckpt"
    module = TranslationModule.load_from_checkpoint(str(path), map_location="cpu")  # nothing but the path
    saved = torch.load(path, map_location="cpu", weights_only=True)["state_dict"]
    loaded = module.state_dict()
    assert saved.keys() == loaded.keys() and all(torch.equal(saved[k], loaded[k]) for k in saved)
    assert module.cfg.model.d_model == 32 and module.cfg.trainer["enable_progress_bar"] is False
    assert module.hparams["vocab"]["joint"] is True


def test_load_run_reads_the_checkpoint_once(trained, monkeypatch):
    """load_run verified and loaded the checkpoint, then Lightning verified and loaded it again: on a 543 MB
    checkpoint (d_model 512, 6+6 layers, Adam state) 2 of its 5 s. The weights are still the file's."""
    import ablate.training.checkpoints as checkpoints
    from ablate.inference.translate import load_run

    reads: list[str] = []
    for module, name in ((torch, "load"), (checkpoints, "file_sha256"), (checkpoints, "_check_crcs")):
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, _real=real, _name=name, **k: reads.append(_name) or _real(*a, **k))
    run = load_run(trained)
    assert sorted(reads) == ["_check_crcs", "file_sha256", "load"]
    saved = torch.load(trained / "checkpoints" / "best.ckpt", map_location="cpu", weights_only=True)
    loaded = run.module.state_dict()
    assert saved["state_dict"].keys() == loaded.keys()
    assert all(torch.equal(saved["state_dict"][k], loaded[k]) for k in loaded)
    assert not run.module.training and run.module.best_val_bleu == max(h["val/bleu"] for h in run.module.history)


def test_translate_reproduces_the_test_hypotheses(trained):
    config = json.loads((trained / "summary.json").read_text())["config"]
    source = Path(config["data"]["source"]) / "test.en"
    expected = (trained / "hyps" / "test.txt").read_text()
    assert _cli("translate", str(trained), "--input", str(source)) == expected
    assert _cli("translate", str(trained), input=source.read_text()) == expected  # stdin
    greedy = _cli("translate", str(trained), "--beam", "1", "--len-penalty", "0.6", input=source.read_text())
    assert len(greedy.splitlines()) == len(expected.splitlines())


def test_translate_from_python_reads_a_sentence_as_the_command_does(trained):
    """``run.translate([" a man . "])`` (and ``ablate.inference.translate``) segmented the spaces around a sentence
    as subwords of their own, so it translated otherwise than ``ablate translate`` (which strips each line, as
    training reads a corpus), though the Python API says it gives translations as the command does."""
    from ablate.api import TrainResult

    config = json.loads((trained / "summary.json").read_text())["config"]
    lines = (Path(config["data"]["source"]) / "test.en").read_text().splitlines()[:8]
    padded = [f"  {line} \t" for line in lines] + ["   "]
    expected = _cli("translate", str(trained), input="".join(f"{line}\n" for line in padded)).splitlines()
    assert expected == _cli("translate", str(trained), input="".join(f"{line}\n" for line in lines) + "\n").splitlines()
    assert TrainResult(trained, {}).translate(padded) == expected


def test_an_empty_line_translates_to_an_empty_line_as_the_test_decoding_gives_it(trained):
    """An empty input line came out as the model's guess at nothing (fairseq-interactive and OpenNMT keep it empty);
    the test decoding (hyps/) goes through the same ``TranslationModule.translate``, so the two still agree."""
    from ablate.inference.translate import _batch, load_run

    out = _cli("translate", str(trained), input="a man .\n\n   \nthe dog\n").split("\n")
    assert len(out) == 5 and out[1] == out[2] == "" and out[0] and out[3] and out[4] == ""
    run = load_run(trained)
    ids = run.tokenizer.encode_src(["a man .", "", "the dog"])
    assert run.module.translate(_batch(ids, run.module.device), 2)[1] == []


def test_evaluate_reproduces_the_recorded_test_bleu(trained, tmp_path):
    summary = json.loads((trained / "summary.json").read_text())
    out = _cli("evaluate", str(trained), "--split", "test", "--hyps", str(tmp_path / "hyps.txt"))
    assert out.startswith(f"test: BLEU {summary['test/bleu']:.2f}  chrF {summary['test/chrf']:.2f}")
    assert out.endswith(f"  BLEU: {summary['bleu_signature']}  chrF: {summary['chrf_signature']}\n")  # each its own
    assert (tmp_path / "hyps.txt").read_text() == (trained / "hyps" / "test.txt").read_text()
    other = _cli("evaluate", str(trained), "--data", summary["config"]["data"]["source"], "--split", "test_extra")
    assert other.startswith("test_extra: BLEU ") and "(30 sentences)" in other


def test_evaluate_scores_a_split_of_any_name_in_a_folder_of_test_sets_alone(trained, tmp_path):
    """``ablate evaluate RUN --data FOLDER --split newstest2014`` was refused twice over: a folder holding test sets
    alone had "no 'train' split ...; add a train split", and a split not named test* was "no split 'newstest2014'"
    though its files are there. A split named by --split is now read alone, whatever its name."""
    summary = json.loads((trained / "summary.json").read_text())
    corpus, tests = Path(summary["config"]["data"]["source"]), tmp_path / "wmt"
    tests.mkdir()
    for lang in ("en", "de"):
        (tests / f"newstest2014.{lang}").write_bytes((corpus / f"test.{lang}").read_bytes())
    out = _cli("evaluate", str(trained), "--data", str(tests), "--split", "newstest2014")
    assert out.startswith(f"newstest2014: BLEU {summary['test/bleu']:.2f}  chrF {summary['test/chrf']:.2f}")
    result = CliRunner().invoke(cli_app(), ["evaluate", str(trained), "--data", str(tests), "--split", "test"])
    assert result.exit_code == 2 and result.output.startswith("error: no split 'test' in ")


def test_evaluate_reads_a_missing_hub_reference_as_training_does(trained, tmp_path):
    """A hub dataset's null sentence (a missing translation) is an empty line to training, which scores it so; ``ablate
    evaluate --data hf:...`` passed the None on and failed in sacreBLEU with a traceback ("argument of type 'NoneType'
    is not iterable")."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    corpus = Path(json.loads((trained / "summary.json").read_text())["config"]["data"]["source"])
    columns = {lang: (corpus / f"test.{lang}").read_text().splitlines() for lang in ("en", "de")}
    columns["de"][3] = columns["en"][5] = None
    (tmp_path / "hub" / "data").mkdir(parents=True)
    for split in ("train", "validation", "test"):
        pq.write_table(pa.table(columns), tmp_path / "hub" / "data" / f"{split}-00000-of-00001.parquet")
    out = _cli("evaluate", str(trained), "--data", f"hf:{tmp_path / 'hub'}", "--split", "test")
    assert out.startswith("test: BLEU ") and f"({len(columns['en'])} sentences)" in out


def test_bad_inputs_are_one_line(trained, tmp_path):
    from ablate import cli

    for args in (
        ["translate", str(tmp_path)],
        ["translate", str(trained), "--input", str(tmp_path / "no.txt")],
        ["evaluate", str(trained), "--split", "nope"],
    ):
        result = CliRunner().invoke(cli.app, args)
        assert result.exit_code == 2 and "Traceback" not in result.output
        assert result.output.startswith("error: ") and len(result.output.strip().splitlines()) == 1, result.output


def test_offline_run_holds_summary_texts_and_checkpoint(trained):
    run = ended_run(offline_runs(trained)[0])
    summary = json.loads((trained / "summary.json").read_text())
    assert "version" not in run.summary  # the file's layout version; W&B's summary holds the values only
    for key, value in summary.items():
        nested = isinstance(value, (dict, list))  # the history, data, machine, ...: in the run file below
        twin = key.startswith("test/") and "test_test/" + key.partition("/")[2] in summary  # each score once
        if key in ("config", "version") or nested or twin:
            assert key not in run.summary, key
        else:
            assert run.summary[key] == value, key
    assert json.loads(run.files["summary.json"].read_text()) == summary
    texts = next(a for a in run.artifacts if a.type == "hypotheses")
    assert sorted(texts.files) == [
        "hyps/test.txt",
        "hyps/test_extra.txt",
        "hyps/val.txt",
        "refs/test.txt",
        "refs/test_extra.txt",
        "refs/val.txt",
    ]
    for name, local in texts.files.items():
        assert local == trained / name and local.read_text()  # referenced in the run folder itself
    model = next(a for a in run.artifacts if a.type == "model")
    assert "best" in model.aliases
    assert model.files["checkpoints/best.ckpt"] == trained / "checkpoints" / "best.ckpt"
    assert model.files["config.yaml"] == trained / "config.yaml"
    tokenizer = {name for name in model.files if name.startswith("tokenizer/")}
    assert tokenizer == {f"tokenizer/{p.name}" for p in (trained / "tokenizer").iterdir()}


class ArtifactApi:
    """Stands in for ``wandb.Api()``: serves the offline run's model artifact as ``artifact(...).download()`` does."""

    def __init__(self, run):
        self.run, self.asked = run, []

    def artifact(self, name, type=None):
        self.asked.append((name, type))
        model = next(a for a in self.run.artifacts if a.type == "model")
        if name.split("/")[-1] != f"{model.name}:best":
            raise ValueError(f"artifact '{name}' not found")

        class Downloadable:
            def download(self, root):
                import shutil

                for file, local in model.files.items():
                    (Path(root) / file).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(local, Path(root) / file)
                return root

        return Downloadable()


def test_translate_from_the_wandb_model_artifact_alone(trained, tmp_path, monkeypatch):
    import wandb

    run = read_run(offline_runs(trained)[0])
    api = ArtifactApi(run)
    monkeypatch.setattr(wandb, "Api", lambda: api)
    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path / "cache"))
    config = json.loads((trained / "summary.json").read_text())["config"]
    source = (Path(config["data"]["source"]) / "test.en").read_text()
    got = _cli("translate", f"wandb:me/proj/{run.id}", input=source)
    assert got == (trained / "hyps" / "test.txt").read_text()
    assert api.asked == [(f"me/proj/model-{run.id}:best", "model")]
    assert (tmp_path / "cache" / "wandb" / "me" / "proj" / run.id / "tokenizer").is_dir()  # nothing read from trained
    from ablate import cli

    missing = CliRunner().invoke(cli.app, ["translate", "wandb:me/proj/other"], input="a b\n")
    assert missing.exit_code == 2 and "could not download the W&B artifact me/proj/model-other:best" in missing.output
    bad = CliRunner().invoke(cli.app, ["translate", "wandb:me/proj"], input="a b\n")
    assert bad.exit_code == 2 and "use wandb:<entity>/<project>/<run id>" in bad.output


@pytest.mark.parametrize(
    "damage",
    [lambda text: text[: len(text) // 2], lambda text: "not json", lambda text: '{"model": {"type": "BPE"}}'],
    ids=["truncated", "not-json", "wrong-shape"],
)
def test_a_damaged_tokenizer_is_one_line_for_translate_and_attention(trained, tmp_path, damage):
    import shutil

    from ablate import cli

    run = tmp_path / "run"
    shutil.copytree(trained, run, ignore=shutil.ignore_patterns("wandb"))
    joint = run / "tokenizer" / "joint.json"
    joint.write_text(damage(joint.read_text()))
    for args in (["translate", str(run)], ["attention", str(run), "--text", "a", "--out", str(tmp_path / "png")]):
        result = CliRunner().invoke(cli.app, args, input="a b c\n")
        assert result.exit_code == 2, result.output
        assert result.output.startswith(f"error: {joint} is damaged (") and len(result.output.splitlines()) == 1


class _Echo:
    """A module whose translation of a batch is each row's source ids: what reaches the model is visible."""

    device = torch.device("cpu")

    def __init__(self, eos: int, model=None):
        self.eos, self.model = eos, model

    def translate(self, src, beam, len_penalty=None):
        return [[t for t in row if t > self.eos] for row in src.tolist()]

    def detokenize(self, ids):
        return " ".join(map(str, ids))


def test_a_source_past_data_max_len_is_clipped_with_a_warning(caplog):
    from ablate.data.tokenizer import SubwordTokenizer, train_bpe
    from ablate.inference.translate import LoadedRun, translate

    tok = SubwordTokenizer(train_bpe(iter([[src for src, _ in builtin.generate("train", 50)]]), 60))
    short, long = [src for src, _ in builtin.generate("val", 2)], " ".join(s for s, _ in builtin.generate("val", 6))
    max_len = max(len(ids) for ids in tok.encode_src(short))  # the short ones fit, the long one does not
    run = LoadedRun(_Echo(tok.eos_id), tok, load_config(None, [f"data.max_len={max_len}"]), Path("best.ckpt"))
    with caplog.at_level("WARNING", logger="ablate"):
        out = translate(run, [*short, long])
    assert len(out[2].split()) == max_len < len(tok.encode_src([long])[0])
    assert [r.getMessage() for r in caplog.records] == [
        f"1 of 3 sentences longer than data.max_len={max_len} subwords: only their first {max_len} are translated "
        "(as the test sets were)"
    ]


def test_a_source_past_learned_positions_is_clipped_where_they_end_with_a_warning(caplog):
    """A model with model.positions=learned and model.max_positions=N given a source of N subwords or more raised
    "... raise model.max_positions", which a trained model cannot do; it reads its first N - 1 (and EOS) now."""
    from ablate.data.tokenizer import SubwordTokenizer, train_bpe
    from ablate.inference.translate import LoadedRun, translate
    from ablate.model.build import build_model

    tok = SubwordTokenizer(train_bpe(iter([[src for src, _ in builtin.generate("train", 50)]]), 60))
    long = " ".join(s for s, _ in builtin.generate("val", 6))
    cfg = load_config(None, ["model.positions=learned", "model.max_positions=12", "model.d_model=16"])
    model = build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size)
    run = LoadedRun(_Echo(tok.eos_id, model), tok, cfg, Path("best.ckpt"))
    with caplog.at_level("WARNING", logger="ablate"):
        out = translate(run, [long])
    assert len(out[0].split()) == 11 < cfg.data.max_len < len(tok.encode_src([long])[0])
    assert [r.getMessage() for r in caplog.records] == [
        "1 of 1 sentences longer than the 11 subwords this model reads: only their first 11 are translated (its "
        "positions end at model.max_positions=12; split them to translate the rest)"
    ]


def _test_sets(trained: Path, folder: Path, splits: dict[str, tuple[str, str]]) -> Path:
    """A folder of test sets alone: ``name -> (split of the run's corpus, target language)`` copied as
    ``name.en`` and ``name.<language>``."""
    corpus = Path(json.loads((trained / "summary.json").read_text())["config"]["data"]["source"])
    folder.mkdir()
    for name, (split, lang) in splits.items():
        (folder / f"{name}.en").write_bytes((corpus / f"{split}.en").read_bytes())
        (folder / f"{name}.{lang}").write_bytes((corpus / f"{split}.de").read_bytes())
    return folder


def test_evaluate_without_split_scores_the_first_test_set_of_a_folder_of_test_sets(trained, tmp_path, caplog):
    """``ablate evaluate RUN --data FOLDER`` with a folder of test sets and no --split said "no 'train' split ...;
    add a train split", though it needs none: it scores the folder's first test set of the run's pair (as for the
    run's own corpus), and says which others are there, leaving out a test set of another pair without a word."""
    summary = json.loads((trained / "summary.json").read_text())
    tests = _test_sets(trained, tmp_path / "tests", {"test": ("test", "de"), "test_b": ("test_extra", "de")})
    _test_sets(trained, tests / "fr", {})  # a folder inside is no split
    (tests / "test_fr.en").write_text("a\n")
    (tests / "test_fr.fr").write_text("b\n")
    with caplog.at_level("INFO", logger="ablate"):
        out = _cli("evaluate", str(trained), "--data", str(tests)).splitlines()[-1]  # after the note, on stderr
    assert out.startswith(f"test: BLEU {summary['test/bleu']:.2f}  chrF {summary['test/chrf']:.2f}")
    assert [r.getMessage() for r in caplog.records if r.levelname != "DEBUG"] == [
        f"{tests} also holds the en-de test set test_b: --split NAME scores one"
    ]


def test_evaluate_of_a_folder_without_a_test_set_lists_its_splits_for_split(trained, tmp_path):
    tests = _test_sets(trained, tmp_path / "wmt", {"newstest2014": ("test", "de"), "newstest2015": ("test", "de")})
    result = CliRunner().invoke(cli_app(), ["evaluate", str(trained), "--data", str(tests)])
    assert result.exit_code == 2 and len(result.output.splitlines()) == 1, result.output
    assert result.output == (
        f"error: no test set (test*) or validation split of en-de in {tests} (its en-de splits: newstest2014, "
        "newstest2015); pass --split NAME\n"
    )


def test_evaluate_with_split_says_nothing_of_the_test_sets_it_does_not_score(trained, tmp_path, caplog):
    """``--split test_2016_flickr`` in a multilingual Multi30k folder warned "test_2017_mscoco.de[.gz] is missing: ...
    left out" of every test set of other pairs, though it scores none of them."""
    tests = _test_sets(trained, tmp_path / "multi", {"test": ("test", "de"), "test_2017_mscoco": ("test", "fr")})
    with caplog.at_level("INFO", logger="ablate"):
        out = _cli("evaluate", str(trained), "--data", str(tests), "--split", "test")
    assert out.startswith("test: BLEU ")
    assert [r.getMessage() for r in caplog.records if r.levelno >= 20] == []


def test_evaluate_of_a_run_whose_relative_corpus_is_not_here_names_data(trained, tmp_path, monkeypatch):
    """A run trained with ``data.source=../shared/data/multi30k`` and evaluated from another folder said only
    "data.source='../shared/data/multi30k' is not a folder; give 'builtin', ...": not what the user can change."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(trained, run, ignore=shutil.ignore_patterns("wandb"))
    config = run / "config.yaml"
    corpus = json.loads((trained / "summary.json").read_text())["config"]["data"]["source"]
    config.write_text(config.read_text().replace(f"source: {corpus}\n", "source: ../data/multi30k\n"))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli_app(), ["evaluate", str(run)])
    assert result.exit_code == 2 and len(result.output.splitlines()) == 1, result.output
    assert result.output == (
        f"error: the run's corpus ../data/multi30k (its data.source) is relative to where the run trained, and not a "
        f"folder from {tmp_path}; pass --data FOLDER (and --split NAME) to score a corpus from here\n"
    )
    result = CliRunner().invoke(cli_app(), ["evaluate", str(run), "--data", "nope", "--split", "test"])
    assert result.exit_code == 2 and result.output == (
        "error: --data nope is not a folder; give 'builtin', 'hf:<dataset>[:<config>]' or a folder of "
        "{split}.{lang}[.gz] files\n"
    )


def test_evaluate_of_a_run_whose_relative_hub_folder_is_not_here_names_data(trained, tmp_path, monkeypatch):
    """A run trained on ``data.source=hf:hub`` (a hub-layout folder, relative) and evaluated from another folder
    asked the hub for a dataset 'hub' (50 s of retries, then "cannot load hub dataset 'hub' (ConnectionError ...)"),
    or with a warm cache scored whatever the cache held under that name. The run records the folder it read."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(trained, run, ignore=shutil.ignore_patterns("wandb"))
    config = run / "config.yaml"
    corpus = json.loads((trained / "summary.json").read_text())["config"]["data"]["source"]
    config.write_text(config.read_text().replace(f"source: {corpus}\n", "source: hf:hub\n"))
    summary = json.loads((run / "summary.json").read_text())
    where = tmp_path / "elsewhere" / "hub"
    summary["data"]["source"] = {
        "dataset": "hub",
        "config": None,
        "revision": None,
        "commit": None,
        "folder": str(where),
    }
    (run / "summary.json").write_text(json.dumps(summary))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli_app(), ["evaluate", str(run)])
    assert result.exit_code == 2 and result.output == (
        f"error: the run's corpus hf:hub (its data.source) is the folder {where} where the run trained, relative to "
        f"there and not a folder from {tmp_path}; pass --data hf:{where} (and --split NAME) to score it from here\n"
    )


def test_a_checkpoint_asked_for_but_missing_is_replaced_with_a_warning(trained, tmp_path, caplog):
    """``--checkpoint last`` on a run without last.ckpt (a results folder keeps best.ckpt alone) translated and scored
    best.ckpt without a word: numbers of another model than the one asked for."""
    import shutil

    from ablate.inference.translate import load_run

    run = tmp_path / "run"
    shutil.copytree(trained, run, ignore=shutil.ignore_patterns("wandb", "last*.ckpt"))
    with caplog.at_level("WARNING", logger="ablate"):
        loaded = load_run(run, "last")
        assert load_run(run, "best").checkpoint.name == "best.ckpt"
    assert loaded.checkpoint.name == "best.ckpt"
    assert [r.getMessage() for r in caplog.records] == [f"{run}/checkpoints holds no last.ckpt: using best.ckpt"]


def test_evaluate_takes_a_hub_datasets_own_name_of_its_validation_split(trained, tmp_path):
    """``--data hf:... --split validation`` (the hub's name, as ``load_dataset`` lists it) said "no split 'validation'
    ... (have: test, train, val)": training calls it val, and so may the user, but the hub's name is a name of it too."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    corpus = Path(json.loads((trained / "summary.json").read_text())["config"]["data"]["source"])
    (tmp_path / "hub" / "data").mkdir(parents=True)
    for split, ours in (("train", "train"), ("validation", "val"), ("test", "test")):
        columns = {lang: (corpus / f"{ours}.{lang}").read_text().splitlines() for lang in ("en", "de")}
        pq.write_table(pa.table(columns), tmp_path / "hub" / "data" / f"{split}-00000-of-00001.parquet")
    for name in ("validation", "val"):
        out = _cli("evaluate", str(trained), "--data", f"hf:{tmp_path / 'hub'}", "--split", name)
        assert out.startswith("val: BLEU ") and "(40 sentences)" in out, out


def test_evaluate_of_the_runs_validation_split_decodes_as_its_recorded_val_bleu(trained, tmp_path, caplog):
    """``ablate evaluate RUN --split val`` decoded with ``eval.beam`` (2 here), while the recorded val BLEU (and the
    choice of best.ckpt) used ``eval.val_beam`` (1): two numbers called "val BLEU". It decodes as training validated
    now, and says so; ``--beam`` still picks another."""
    summary = json.loads((trained / "summary.json").read_text())
    with caplog.at_level("INFO", logger="ablate"):
        out = _cli("evaluate", str(trained), "--split", "val", "--hyps", str(tmp_path / "hyps.txt")).splitlines()[-1]
    assert out.startswith(f"val: BLEU {summary['val/bleu']:.2f}  chrF {summary['val/chrf']:.2f}")
    assert (tmp_path / "hyps.txt").read_text() == (trained / "hyps" / "val.txt").read_text()
    assert "decoded with eval.val_beam=1" in caplog.text
    _cli("evaluate", str(trained), "--split", "val", "--beam", "2", "--hyps", str(tmp_path / "beam2.txt"))
    assert (tmp_path / "beam2.txt").read_text() != (trained / "hyps" / "val.txt").read_text()


@pytest.mark.parametrize(
    "edit, named",
    [
        (("arch: transformer", "arch: rnn"), "model.arch: transformer in the checkpoint, rnn in config.yaml"),
        (("d_model: 32", "d_model: 64"), "model.d_model: 32 in the checkpoint, 64 in config.yaml"),
        (("heads: 2", "heads: 4"), "model.heads: 2 in the checkpoint, 4 in config.yaml"),
        (
            ("positions: sinusoidal", "positions: none"),
            "model.positions: sinusoidal in the checkpoint, none in config.yaml",
        ),
        (("score: dot", "score: gaussian"), "model.attention.score: dot in the checkpoint, gaussian in config.yaml"),
    ],
    ids=["arch", "d_model", "heads", "positions", "score"],
)
def test_a_checkpoint_of_another_model_names_the_keys_that_differ(trained, tmp_path, edit, named):
    """A config.yaml edited (or a checkpoint copied in from another run) said only "does not fit the model of
    config.yaml (Error(s) in loading state_dict for TranslationModule:)": torch's header, not what differs. Where
    the weights have the same shapes (another model.heads, position scheme or score), it loaded and decoded another
    model without a word (evaluate: BLEU 0.02 for the run's recorded 0.42)."""
    import shutil

    from ablate import cli

    run = tmp_path / "run"
    shutil.copytree(trained, run, ignore=shutil.ignore_patterns("wandb"))
    config = run / "config.yaml"
    assert edit[0] in config.read_text()
    config.write_text(config.read_text().replace(edit[0], edit[1]))
    for args in (["translate", str(run)], ["export-model", str(run), "--out", str(tmp_path / "m.pt")]):
        result = CliRunner().invoke(cli.app, args, input="a b c\n")
        assert result.exit_code == 2 and len(result.output.splitlines()) == 1, result.output
        assert f"does not fit the model of {run}/config.yaml ({named})" in result.output, result.output


def test_a_checkpoints_values_reach_the_unfit_line_without_control_characters(tmp_path):
    """The unfit line quotes the model keys a checkpoint trained with: from a run folder someone else made, a
    value holding ESC (``\\x1b[2J`` clears the screen) reached the terminal raw."""
    from ablate.config import Config
    from ablate.training.checkpoints import unfit

    checkpoint = {"hyper_parameters": {"cfg": {"model": {"norm": "\x1b[2Jpost"}}}}
    message = str(unfit(tmp_path / "best.ckpt", tmp_path, RuntimeError("header\nsize mismatch"), checkpoint, Config()))
    assert "model.norm: ?[2Jpost in the checkpoint, pre in config.yaml" in message and "\x1b" not in message


def test_the_runs_own_corpus_spelt_otherwise_is_still_its_validation_split(trained, monkeypatch):
    """``--data CORPUS/ --split val`` (a trailing slash, or the folder relative to here) decoded with eval.beam, not
    eval.val_beam as the recorded val BLEU was: on a Multi30k run "val: BLEU 1.46" beside a recorded 0.23."""
    summary = json.loads((trained / "summary.json").read_text())
    corpus = Path(summary["config"]["data"]["source"])
    monkeypatch.chdir(corpus.parent)
    for spelt in (f"{corpus}/", corpus.name, f"./{corpus.name}/"):
        out = _cli("evaluate", str(trained), "--data", spelt, "--split", "val").splitlines()[-1]
        assert out.startswith(f"val: BLEU {summary['val/bleu']:.2f}  chrF {summary['val/chrf']:.2f}"), (spelt, out)


class Downloads:
    """A ``wandb.Api()`` whose every artifact downloads as a run folder's config.yaml and tokenizer/."""

    def __init__(self):
        self.asked: list[str] = []

    def artifact(self, name, type=None):
        self.asked.append(name)

        class Downloadable:
            def download(self, root):
                (Path(root) / "tokenizer").mkdir(parents=True)
                (Path(root) / "config.yaml").write_text("seed: 1\n")
                return root

        return Downloadable()


def test_a_wandb_reference_with_a_version_or_alias_downloads_that_artifact(tmp_path, monkeypatch):
    """``wandb:me/proj/r1:v3`` (W&B's own ``name:version`` form) asked W&B for ``model-r1:v3:best`` and failed with
    W&B's message; it asks for ``model-r1:v3``, and a malformed one names the forms."""
    from ablate.config import ConfigError
    from ablate.inference.commands import fetch_run

    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path))
    api = Downloads()
    folders = [fetch_run(f"wandb:me/proj/{run}", api) for run in ("r1", "r1:v3", "r1:latest")]
    assert api.asked == ["me/proj/model-r1:best", "me/proj/model-r1:v3", "me/proj/model-r1:latest"]
    assert folders == [tmp_path / "wandb" / "me" / "proj" / run for run in ("r1", "r1:v3", "r1:latest")]
    for bad in ("r1:", ":v3", "r1:v3:best"):
        with pytest.raises(ConfigError, match=r"use wandb:<entity>/<project>/<run id>\[:<version or alias>\]"):
            fetch_run(f"wandb:me/proj/{bad}", api)
    assert len(api.asked) == 3
