"""BPE tokenizer: fixed specials, lossless round trip on real text, save/load, separate vocabularies."""

from __future__ import annotations

import datasets
import pytest
import torch

from ablate.data.tokenizer import SubwordTokenizer

from tests.helpers.corpus import read_lines


@pytest.fixture(scope="module")
def m30k_train(multi30k) -> datasets.Dataset:
    return datasets.Dataset.from_dict(
        {"src": read_lines(multi30k / "train.en.gz", 2000), "tgt": read_lines(multi30k / "train.de.gz", 2000)}
    )


@pytest.fixture(scope="module")
def joint(m30k_train) -> SubwordTokenizer:
    return SubwordTokenizer.train(m30k_train, vocab_size=500)


def test_special_ids_and_vocab_size(joint):
    assert (joint.pad_id, joint.bos_id, joint.eos_id, joint.unk_id) == (0, 1, 2, 3)
    assert joint.joint and joint.src_vocab_size == joint.tgt_vocab_size == 500
    ids = joint.encode_src(["A man in a blue shirt."])[0]
    assert ids and min(ids) > 3  # no specials added, no unknowns in seen text


def test_round_trip_on_real_sentences(joint, multi30k):
    """decode(encode(x)) == x on held-out Multi30k sentences (only NFKC-changed text may differ)."""
    for lang, encode, decode in (
        ("en", joint.encode_src, joint.decode_src),
        ("de", joint.encode_tgt, joint.decode_tgt),
    ):
        lines = read_lines(multi30k / f"val.{lang}.gz", 300)
        decoded = [decode(ids) for ids in encode(lines)]
        exact = sum(d == line for d, line in zip(decoded, lines))
        assert exact >= 0.97 * len(lines), [(d, x) for d, x in zip(decoded, lines) if d != x][:3]


def test_decode_stops_at_eos_and_skips_pad_bos(joint):
    ids = joint.encode_tgt(["Ein Hund läuft."])[0]
    row = torch.tensor([1] + ids + [2] + ids + [0, 0])
    assert joint.decode_tgt(row) == "Ein Hund läuft."
    assert joint.decode_tgt([2] + ids) == ""


def test_unknown_characters_become_unk(joint):
    ids = joint.encode_src(["\u4e2d dog"])[0]
    assert joint.unk_id in ids


def test_save_load_gives_identical_ids(joint, tmp_path):
    joint.save(tmp_path / "tok")
    loaded = SubwordTokenizer.load(tmp_path / "tok")
    text = ["Two young, White males are outside near many bushes."]
    assert loaded.encode_src(text) == joint.encode_src(text) and loaded.joint


def test_separate_vocabularies(m30k_train, tmp_path):
    tok = SubwordTokenizer.train(m30k_train, vocab_size=300, joint=False)
    assert not tok.joint and tok.src_vocab_size == tok.tgt_vocab_size == 300
    text = "Mehrere Männer mit Schutzhelmen"
    assert len(tok.encode_tgt([text])[0]) < len(tok.encode_src([text])[0])  # German merges live in tgt
    tok.save(tmp_path / "sep")
    loaded = SubwordTokenizer.load(tmp_path / "sep")
    assert loaded.encode_tgt([text]) == tok.encode_tgt([text]) and not loaded.joint


@pytest.fixture()
def saved(tmp_path):
    """A tiny joint tokenizer saved as a run saves it (``tokenizer/joint.json`` and ``tokenizer.json``)."""
    words = [f"w{i} x{i % 7} y{i % 3}" for i in range(60)]
    tok = SubwordTokenizer.train(datasets.Dataset.from_dict({"src": words, "tgt": words}), vocab_size=60)
    tok.save(tmp_path / "tokenizer")
    return tmp_path / "tokenizer"


@pytest.mark.parametrize(
    "name, damage, expected",
    [
        ("joint.json", lambda text: text[: len(text) // 2], "joint.json is damaged ("),  # truncated
        ("joint.json", lambda text: "not json at all", "joint.json is damaged ("),
        ("joint.json", lambda text: '{"version": "1.0", "model": [1, 2]}', "joint.json is damaged ("),  # wrong shape
        ("joint.json", lambda text: "[]", "joint.json is damaged ("),
        ("tokenizer.json", lambda text: "[1]", "tokenizer.json is damaged ("),
        ("tokenizer.json", lambda text: "{}", "tokenizer.json is damaged (no 'joint' entry)"),
    ],
)
def test_a_damaged_saved_tokenizer_is_one_line_naming_the_file(saved, name, damage, expected):
    from ablate.data.tokenizer import TokenizerError

    path = saved / name
    path.write_text(damage(path.read_text()))
    with pytest.raises(TokenizerError) as err:
        SubwordTokenizer.load(saved)
    assert expected in str(err.value) and str(saved) in str(err.value) and "\n" not in str(err.value)


def test_a_missing_or_foreign_tokenizer_file_is_one_line(saved):
    from tokenizers import Tokenizer, models

    from ablate.data.tokenizer import TokenizerError

    Tokenizer(models.WordLevel({"a": 0, "<unk>": 1}, unk_token="<unk>")).save(str(saved / "joint.json"))
    with pytest.raises(TokenizerError, match="is not an ablate tokenizer"):
        SubwordTokenizer.load(saved)
    (saved / "joint.json").unlink()
    with pytest.raises(TokenizerError, match="joint.json is missing"):
        SubwordTokenizer.load(saved)


def test_saving_into_a_received_run_folder_replaces_its_links_never_writes_through_them(saved, tmp_path):
    """A run folder from someone else whose tokenizer files link out of it (to the user's thesis) is resumed."""
    outside = {name: tmp_path / f"thesis-{name}" for name in ("joint.json", "tokenizer.json")}
    for name, target in outside.items():
        target.write_text("my thesis\n")
        (saved / name).unlink()
        (saved / name).symlink_to(target)
    words = [f"w{i} x{i % 7}" for i in range(40)]
    SubwordTokenizer.train(datasets.Dataset.from_dict({"src": words, "tgt": words}), vocab_size=50).save(saved)
    assert all(target.read_text() == "my thesis\n" for target in outside.values())
    assert not any((saved / name).is_symlink() for name in outside) and SubwordTokenizer.load(saved).joint


def test_a_tokenizer_record_nested_deep_is_damaged_not_a_recursion_error(joint, tmp_path):
    """A received run's ``tokenizer/tokenizer.json`` nested deeper than the parser follows: ``ablate translate`` ended in
    a RecursionError traceback."""
    from ablate.data.tokenizer import TokenizerError

    joint.save(tmp_path)
    (tmp_path / "tokenizer.json").write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(TokenizerError, match="tokenizer.json is damaged .nested more than 100 levels deep."):
        SubwordTokenizer.load(tmp_path)
