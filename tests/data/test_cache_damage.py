"""A damaged cache entry is rebuilt, and a full disk names the cache folder."""

from __future__ import annotations

import errno

import pytest

from ablate.config import DataConfig
from ablate.data.cache import prepare
from ablate.data.sources import DataError

CFG = DataConfig(builtin_pairs=200, vocab_size=300)


def test_a_truncated_arrow_file_is_detected_and_rebuilt(cache_dir):
    first = prepare(CFG)
    arrow = next((cache_dir / "corpora").glob("*/splits/train/*.arrow"))
    arrow.write_bytes(arrow.read_bytes()[: arrow.stat().st_size // 2])  # torn by a crash or a full disk
    again = prepare(CFG)
    assert again.stats["cached"] is False  # rebuilt, not read
    assert len(again.splits["train"]) == len(first.splits["train"])
    assert prepare(CFG).stats["cached"] is True  # and the rebuilt entry is used from then on
    assert not list((cache_dir / "corpora").glob(".damaged-*"))


def test_an_unreadable_entry_with_intact_sizes_is_rebuilt(cache_dir):
    prepare(CFG)
    meta = next((cache_dir / "corpora").glob("*/meta.json"))
    meta.write_text("x" * len(meta.read_text()))  # same size, garbage content
    assert prepare(CFG).stats["cached"] is False


def test_a_full_disk_names_the_cache_folder(cache_dir, monkeypatch):
    from ablate.data import tokenizer

    def full(self, folder):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tokenizer.SubwordTokenizer, "save", full)
    with pytest.raises(DataError, match=f"no space left to write the data cache in {cache_dir}"):
        prepare(CFG)
    assert not [p for p in (cache_dir / "tokenizers").iterdir()]  # nothing half-written published


def test_a_cached_tokenizer_damaged_in_place_is_rebuilt(cache_dir):
    first = prepare(CFG)
    for path in (cache_dir / "corpora").glob("*/tokenizer/joint.json"):
        path.write_text("x" * len(path.read_text()))  # same size: the manifest cannot tell
    again = prepare(CFG)
    assert again.stats["cached"] is False
    assert again.tokenizer.encode_src(["a b c"]) == first.tokenizer.encode_src(["a b c"])


def test_a_lock_planted_as_a_link_in_a_shared_cache_is_one_line_and_writes_nothing_through_it(tmp_path):
    """A shared cache whose entry lock another user planted as a link to a file of yours: a traceback (filelock's
    ELOOP), or with filelock < 3.20.1 that file overwritten with "pid@host"."""
    from ablate.data.cache import cached_entry

    thesis = tmp_path / "thesis.tex"
    thesis.write_text("my thesis\n")
    (tmp_path / "cache" / "locks").mkdir(parents=True)
    (tmp_path / "cache" / "locks" / "corpora-abc.lock").symlink_to(thesis)
    with pytest.raises(DataError, match=r"corpora-abc.lock is a link, a pipe or a device, not a lock file"):
        cached_entry(tmp_path / "cache", "corpora", "abc", lambda folder: None)
    assert thesis.read_text() == "my thesis\n"
