"""The one safe-output helper: apart from the sources, whole or not at all, never through a link out."""

from __future__ import annotations

import errno
import os

import pytest

from ablate.utils.io import (
    OutputError,
    check_apart,
    output_files,
    output_folder,
    read_inside,
    write_output_text,
)


def test_an_output_that_is_inside_or_contains_a_source_is_refused(tmp_path):
    source = tmp_path / "par" / "sweepA"
    source.mkdir(parents=True)
    for out, word in ((source, "itself"), (tmp_path / "par", "contains"), (source / "base-seed=1", "inside")):
        with pytest.raises(OutputError, match=word):
            check_apart(out, [source])
    check_apart(tmp_path / "results" / "sweepA", [source])  # a sibling is fine


def test_a_link_counts_where_it_leads(tmp_path):
    source = tmp_path / "sweep"
    source.mkdir()
    (tmp_path / "alias").symlink_to(source)
    with pytest.raises(OutputError, match="itself"):
        check_apart(tmp_path / "alias", [source])


def test_read_inside_refuses_a_link_out_of_the_tree_and_copies_one_that_stays(tmp_path):
    root = tmp_path / "sweep"
    (root / "t").mkdir(parents=True)
    secret = tmp_path / "secret.txt"
    secret.write_text("private key")
    (root / "t" / "a.txt").write_text("inside")
    (root / "t" / "out.txt").symlink_to(secret)
    (root / "t" / "in.txt").symlink_to(root / "t" / "a.txt")
    (root / "linked").symlink_to(tmp_path)  # a folder on the way that leads out
    assert read_inside(root / "t" / "in.txt", root) == b"inside"
    for path in (root / "t" / "out.txt", root / "linked" / "secret.txt"):
        with pytest.raises(OutputError, match=f"outside {root}"):
            read_inside(path, root)


def test_output_folder_replaces_the_old_one_only_when_complete(tmp_path):
    out = tmp_path / "results"
    out.mkdir()
    (out / "old.txt").write_text("old")
    with pytest.raises(OutputError, match="--force"):
        with output_folder(out):
            pass
    with output_folder(out, force=True) as tmp:
        (tmp / "new.txt").write_text("new")
        assert not (out / "new.txt").exists()  # not visible until the end
    assert sorted(p.name for p in out.iterdir()) == ["new.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results"]  # no temporary folder left


@pytest.mark.parametrize("fault", [KeyboardInterrupt(), OSError(errno.ENOSPC, "No space left on device")])
def test_ctrl_c_or_a_full_disk_midway_leave_the_old_output(tmp_path, fault):
    out = tmp_path / "results"
    out.mkdir()
    (out / "old.txt").write_text("old")
    expected = KeyboardInterrupt if isinstance(fault, KeyboardInterrupt) else OutputError
    with pytest.raises(expected) as caught:
        with output_folder(out, force=True) as tmp:
            (tmp / "table.md").write_text("half")
            raise fault
    if expected is OutputError:
        assert "no space left" in str(caught.value) and "old one is kept" in str(caught.value)
        assert "\n" not in str(caught.value)
    assert [p.name for p in out.iterdir()] == ["old.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results"]


def test_a_new_output_interrupted_leaves_nothing(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        with output_folder(tmp_path / "new") as tmp:
            (tmp / "table.md").write_text("half")
            raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []


def test_an_output_folder_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "afile").write_text("mine")
    with pytest.raises(OutputError, match="is an existing file"):
        with output_folder(tmp_path / "afile", force=True):
            pass
    assert (tmp_path / "afile").read_text() == "mine"


def test_output_files_move_in_whole_and_keep_the_users_other_files(tmp_path):
    out = tmp_path / "plots"
    out.mkdir()
    (out / "mine.txt").write_text("mine")
    (out / "a.png").write_text("old a")
    with pytest.raises(KeyboardInterrupt):
        with output_files(out) as tmp:
            (tmp / "a.png").write_text("new a")
            raise KeyboardInterrupt
    assert (out / "a.png").read_text() == "old a"
    with output_files(out) as tmp:
        (tmp / "a.png").write_text("new a")
    assert (out / "a.png").read_text() == "new a" and (out / "mine.txt").read_text() == "mine"
    assert sorted(p.name for p in out.iterdir()) == ["a.png", "mine.txt"]


def test_a_full_disk_keeps_the_old_file_never_a_truncated_one(tmp_path, monkeypatch):
    path = tmp_path / "table.md"
    path.write_text("old table")
    real = os.fsync

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OutputError, match="no space left"):
        write_output_text(path, "new table")
    monkeypatch.setattr(os, "fsync", real)
    assert path.read_text() == "old table"
    assert [p.name for p in tmp_path.iterdir()] == ["table.md"]
    with pytest.raises(OutputError, match="inside the source"):
        write_output_text(tmp_path / "sweep" / "t" / "summary.json", "{}", [tmp_path / "sweep"])
