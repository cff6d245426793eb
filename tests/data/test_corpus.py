"""Local-folder corpora: discovery, .gz and plain files, and one-line errors for bad input."""

from __future__ import annotations

import gzip

import pytest

from ablate.data.sources import DataError, LocalFolder, make_source, scan_text

from tests.helpers.corpus import make_folder, read_lines

PAIR = {"train.en": ["a b", "c d"], "train.de": ["A B", "C D"], "valid.en": ["e"], "valid.de": ["E"]}


def test_local_folder_reads_gz_and_plain_files(small_multi30k, multi30k, make_cfg, tmp_path):
    source = make_source(make_cfg(small_multi30k), tmp_path / "cache")
    assert isinstance(source, LocalFolder)
    corpus = source.load(tmp_path / "work")
    assert corpus.val_split == "val" and corpus.test_splits == ["test_2016_flickr"]
    assert {k: len(v) for k, v in corpus.splits.items()} == {"train": 2000, "val": 200, "test_2016_flickr": 200}
    train = corpus.splits["train"]
    assert train[5]["src"] == read_lines(multi30k / "train.en.gz", 6)[5]  # from train.en.gz
    assert train[5]["tgt"] == read_lines(multi30k / "train.de.gz", 6)[5]  # from plain train.de
    assert corpus.undecodable == {"train": 0, "val": 0, "test_2016_flickr": 0}


def test_validation_aliases_and_sorted_test_splits(make_cfg, tmp_path):
    files = dict(
        PAIR,
        **{
            "test_b.en": ["x"],
            "test_b.de": ["X"],
            "test_a.en": ["y"],
            "test_a.de": ["Y"],
            "test_a.fr": ["Z"],
            "notes.txt": ["hello"],
        },
    )
    corpus = make_source(make_cfg(make_folder(tmp_path, files)), tmp_path / "c").load(tmp_path / "w")
    assert corpus.val_split == "valid" and corpus.test_splits == ["test_a", "test_b"]
    assert corpus.splits["test_a"][0] == {"src": "y", "tgt": "Y"}


def test_missing_folder(make_cfg, tmp_path):
    with pytest.raises(DataError, match="is not a folder") as err:
        make_source(make_cfg(tmp_path / "nowhere"), tmp_path)
    assert "\n" not in str(err.value)


def test_a_folder_with_a_revision_is_told_that_folders_take_none(make_cfg, tmp_path):
    """``data.source=<folder>@main`` (the hub's ``@<revision>`` on a folder that exists) said the folder 'is not a
    folder'; it says a local folder takes no revision and names the folder to give."""
    (tmp_path / "corpus").mkdir()
    with pytest.raises(DataError, match=r"a local folder takes no @<revision>; give '.*corpus'$"):
        make_source(make_cfg(f"{tmp_path / 'corpus'}@main"), tmp_path)


def test_missing_train_lists_what_was_found(make_cfg, tmp_path):
    folder = make_folder(tmp_path, {"val.en": ["a"], "val.de": ["b"], "test.en": ["c"], "test.de": ["d"]})
    with pytest.raises(DataError, match=r"no 'train' split .*found: test.de, test.en, val.de, val.en"):
        make_source(make_cfg(folder), tmp_path)


def test_missing_validation_split(make_cfg, tmp_path):
    folder = make_folder(tmp_path, {"train.en": ["a"], "train.de": ["b"]})
    with pytest.raises(DataError, match="no validation split .*val or valid or dev"):
        make_source(make_cfg(folder), tmp_path)


def test_missing_language_file(make_cfg, tmp_path):
    files = dict(PAIR)
    del files["train.de"]
    with pytest.raises(DataError, match=r"missing language file .*train\.de\[\.gz\]"):
        make_source(make_cfg(make_folder(tmp_path, files)), tmp_path)


def test_a_test_set_of_another_pair_in_a_multilingual_folder_is_left_out_with_a_warning(make_cfg, tmp_path, caplog):
    """Multi30k's own folder holds test_2016_flickr.{en,de,fr,cs} but test_2017_mscoco.{en,de,fr}: training en-cs
    there stopped at "missing language file test_2017_mscoco.cs", though that test set is not one of en-cs. A test
    split with one file of the pair is now left out with a warning naming the file it lacks."""
    files = dict(PAIR, **{"test_a.en": ["x"], "test_a.de": ["X"], "test_b.en": ["y"], "test_b.fr": ["Y"]})
    source = make_source(make_cfg(make_folder(tmp_path, files)), tmp_path / "c")
    assert source.test_splits == ["test_a"]
    assert "test_b.de[.gz] is missing: test_b is not a test set of en-de, so it is left out" in caplog.text


def test_misaligned_files_name_both_files_and_counts(make_cfg, tmp_path):
    files = dict(PAIR, **{"train.de": ["A B", "C D", "E F"]})
    source = make_source(make_cfg(make_folder(tmp_path, files)), tmp_path)
    with pytest.raises(DataError) as err:
        source.load(tmp_path / "w")
    message = str(err.value)
    assert "\n" not in message
    assert "train.en has 2 lines" in message and "train.de has 3 lines" in message


def test_empty_corpus(make_cfg, tmp_path):
    files = dict(PAIR, **{"train.en": [], "train.de": []})
    with pytest.raises(DataError, match=r"empty corpus files .*train\.en and .*train\.de"):
        make_source(make_cfg(make_folder(tmp_path, files)), tmp_path).load(tmp_path / "w")


def test_undecodable_bytes_are_replaced_and_counted(make_cfg, tmp_path):
    folder = make_folder(tmp_path, PAIR)
    (folder / "train.en").write_bytes(b"ok line\nbad \xff\xfe line\r\nlast without newline")
    (folder / "train.de").write_bytes(b"gut\nschlecht\nletzte\n")
    corpus = make_source(make_cfg(folder), tmp_path).load(tmp_path / "w")
    assert corpus.undecodable["train"] == 1
    assert corpus.splits["train"]["src"] == ["ok line", "bad \ufffd\ufffd line", "last without newline"]


def test_a_bom_starting_any_line_is_dropped_and_keys_the_cache_anew(make_cfg, tmp_path):
    """Two files saved with a BOM and joined with ``cat`` hold a BOM at the start of a later line: only the first
    line's was dropped, so U+FEFF reached the tokenizer as part of a word ('\\ufeffa'). Every line's is dropped now,
    and the local-folder fingerprint (the tokenizer's and the encoded cache's key) names the reader that does it,
    so a cache built before is not reused."""
    folder = make_folder(tmp_path, PAIR)
    (folder / "train.en").write_bytes("\ufeffa b\n".encode() + "\ufeff c d\n".encode())
    (folder / "train.de").write_bytes("\ufeffA B\n\ufeffC D\n".encode())
    source = make_source(make_cfg(folder), tmp_path)
    train = source.load(tmp_path / "w").splits["train"]
    assert (train["src"], train["tgt"]) == (["a b", "c d"], ["A B", "C D"])
    assert source.fingerprint() != "5e6111ffe17e44aba39e"  # main's key of this folder, whose reader kept the BOM


def test_count_lines_handles_gzip_and_missing_final_newline(tmp_path):
    (tmp_path / "a.gz").write_bytes(gzip.compress(b"x\ny\nz"))
    (tmp_path / "b").write_bytes(b"x\n\n")
    (tmp_path / "c").write_bytes(b"")
    assert [scan_text(tmp_path / n, "train")[0] for n in ("a.gz", "b", "c")] == [3, 2, 0]


def test_unicode_line_separators_do_not_split_lines(make_cfg, tmp_path):
    folder = make_folder(tmp_path, dict(PAIR, **{"train.en": ["one\u2028two", "three"]}))
    corpus = make_source(make_cfg(folder), tmp_path).load(tmp_path / "w")
    assert corpus.splits["train"]["src"] == ["one\u2028two", "three"]


@pytest.mark.parametrize(
    "content, message",
    [
        ("one\ntwo\nthree\n".encode("utf-16"), r"train\.en holds NUL bytes \(line 1\): is it a binary or UTF-16"),
        (b"one\rtwo\rthree\r", r"train\.en ends its lines with CR only"),
    ],
)
def test_one_file_saved_wrongly_is_named_for_its_cause_not_as_misaligned(make_cfg, tmp_path, content, message):
    """One side converted to UTF-16 or old Mac line ends, the other fine: the corpus was called misaligned (4 vs 3
    lines, 1 vs 3), though both files hold 3 sentences."""
    folder = make_folder(tmp_path, PAIR)
    (folder / "train.en").write_bytes(content)
    (folder / "train.de").write_bytes(b"eins\nzwei\ndrei\n")
    with pytest.raises(DataError, match=message):
        make_source(make_cfg(folder), tmp_path).load(tmp_path / "w")


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("train.en", b"a b\rc d\r", r"train\.en ends its lines with CR only"),  # was "longer than data.max_len"
        ("train.en", b"a b\nc\x00d\n", r"train\.en holds NUL bytes \(line 2\)"),  # was kept silently
        (
            "valid.en",
            b"\n  \n",
            r"valid\.en holds only empty lines; a validation or test split needs sentences",
        ),  # accepted silently
    ],
)
def test_text_a_corpus_cannot_hold_is_one_line(make_cfg, tmp_path, name, content, message):
    folder = make_folder(tmp_path, PAIR)
    (folder / name).write_bytes(content)
    (folder / name.replace(".en", ".de")).write_bytes(content.replace(b"\x00", b" "))
    with pytest.raises(DataError, match=message) as err:
        make_source(make_cfg(folder), tmp_path).load(tmp_path / "w")
    assert "\n" not in str(err.value)


def test_a_cr_only_file_beside_a_normal_one_is_named_as_cr_only_not_misaligned(make_cfg, tmp_path):
    """One side saved with old-Mac line ends reads as one line: the error says so, not "has 1 lines" of
    a misaligned corpus (docs/getting-started.md: CR-only line ends are refused in one line)."""
    folder = make_folder(tmp_path, PAIR)
    (folder / "train.de").write_bytes(b"A B\rC D\r")
    with pytest.raises(DataError, match=r"train\.de ends its lines with CR only"):
        make_source(make_cfg(folder), tmp_path).load(tmp_path / "w")
