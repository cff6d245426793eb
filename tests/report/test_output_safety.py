"""``ablate export`` never deletes or exposes what it reads: an output
that holds or lies in the sweep is refused, links out of the sweep are refused, and a full disk or
Ctrl-C part-way leave the old results folder (or none), never a plausible half."""

from __future__ import annotations

import errno
import json
import shutil

import pytest
from typer.testing import CliRunner

from ablate.report import export
from ablate.report.commands import app

runner = CliRunner()
FAST = ["--no-plots", "--samples", "50"]


@pytest.fixture()
def sweep(variant_sweep, tmp_path):
    """A copy of the stand-in sweep at par/sweepA, with a checkpoint a deleting export would take."""
    src = tmp_path / "par" / "sweepA"
    shutil.copytree(variant_sweep, src)
    (src / "base-s1" / "checkpoints").mkdir()
    (src / "base-s1" / "checkpoints" / "last.ckpt").write_bytes(b"weights")
    return src


def _one_line_error(result, *words):
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output
    for word in words:
        assert word in lines[0], lines[0]


def _files(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize("where", ["parent", "trial"])
def test_an_output_that_holds_or_lies_in_the_sweep_is_refused_and_nothing_is_deleted(sweep, where):
    before = _files(sweep)
    out = sweep.parent if where == "parent" else sweep / "base-s1"
    result = runner.invoke(app, ["export", str(sweep), str(out), "--force", *FAST])
    _one_line_error(result, "contains the source" if where == "parent" else "inside the source")
    assert _files(sweep) == before
    assert (sweep / "base-s1" / "checkpoints" / "last.ckpt").read_bytes() == b"weights"


@pytest.mark.parametrize("link", ["base-s1/refs/test_2016_flickr.txt", "zz/summary.json", "sweep.json"])
def test_a_link_out_of_the_sweep_is_refused_never_copied(sweep, tmp_path, link):
    secret = tmp_path / "secret.txt"
    secret.write_text("-----BEGIN PRIVATE KEY-----\n")
    path = sweep / link
    path.parent.mkdir(exist_ok=True)
    path.unlink(missing_ok=True)
    path.symlink_to(secret)
    out = tmp_path / "results" / "sweepA"
    result = runner.invoke(app, ["export", str(sweep), str(out), *FAST])
    _one_line_error(result, str(path), "outside")
    assert not out.exists() and not any("PRIVATE" in p.read_text(errors="ignore") for p in tmp_path.rglob("*.md"))
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == []


def test_a_file_a_summary_names_as_a_plugin_is_copied_only_if_it_is_the_recorded_code(sweep, tmp_path):
    secret = tmp_path / "id_rsa"
    secret.write_text("-----BEGIN PRIVATE KEY-----\n")
    summary_path = sweep / "base-s1" / "summary.json"
    summary = json.loads(summary_path.read_text())
    planted = {"kind": "file", "name": "id_rsa", "path": str(secret), "sha256": "deadbeef"}
    summary["config"]["plugins"] = [planted]
    summary_path.write_text(json.dumps(summary))
    out = tmp_path / "results"
    assert runner.invoke(app, ["export", str(sweep), str(out), *FAST]).exit_code == 0
    assert not (out / "plugins").exists()
    assert not any("PRIVATE" in p.read_text(errors="ignore") for p in out.rglob("*") if p.is_file())
    assert json.loads((out / "base-s1" / "summary.json").read_text())["config"]["plugins"] == [planted]


def test_a_link_that_stays_inside_the_sweep_is_copied(sweep, tmp_path):
    refs = sweep / "base-s2" / "refs" / "test_2016_flickr.txt"
    refs.unlink()
    refs.symlink_to(sweep / "base-s1" / "refs" / "test_2016_flickr.txt")
    out = tmp_path / "results"
    assert runner.invoke(app, ["export", str(sweep), str(out), *FAST]).exit_code == 0
    assert (out / "base-s2" / "refs" / "test_2016_flickr.txt.gz").is_file()


@pytest.mark.parametrize("fault", ["ctrl-c", "disk full"])
def test_ctrl_c_or_a_full_disk_part_way_keep_the_old_export(sweep, tmp_path, monkeypatch, fault):
    out = tmp_path / "results"
    assert runner.invoke(app, ["export", str(sweep), str(out), *FAST]).exit_code == 0
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}

    def stop(path, data):  # the manifest is written after table.md: midway
        raise KeyboardInterrupt if fault == "ctrl-c" else OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(export, "atomic_write_json", stop)
    result = runner.invoke(app, ["export", str(sweep), str(out), "--force", *FAST])
    if fault == "ctrl-c":
        assert result.exit_code != 0 and isinstance(result.exception, (KeyboardInterrupt, SystemExit))
    else:
        _one_line_error(result, "no space left", "old one is kept")
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["par", "results"]  # no half folder beside it


def test_an_interrupted_first_export_leaves_nothing_and_a_rerun_works(sweep, tmp_path, monkeypatch):
    out = tmp_path / "results"

    def stop(path, data):
        raise KeyboardInterrupt

    monkeypatch.setattr(export, "atomic_write_json", stop)
    runner.invoke(app, ["export", str(sweep), str(out), *FAST])
    assert not out.exists()
    monkeypatch.undo()
    assert runner.invoke(app, ["export", str(sweep), str(out), *FAST]).exit_code == 0  # no --force needed
    assert (out / "manifest.json").is_file()


def test_an_output_that_is_an_existing_file_is_one_line(sweep, tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("mine")
    result = runner.invoke(app, ["export", str(sweep), str(afile), "--force", *FAST])
    _one_line_error(result, "is an existing file")
    assert afile.read_text() == "mine"


def test_table_out_on_a_full_disk_keeps_the_old_file_never_a_0_byte_one(sweep, tmp_path, monkeypatch):
    import os

    out = tmp_path / "table.md"
    out.write_text("old table\n")

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    result = runner.invoke(app, ["table", str(sweep), "--format", "md", "--no-significance", "--out", str(out)])
    _one_line_error(result, "no space left", str(out))
    assert out.read_text() == "old table\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["par", "table.md"]


def test_table_out_with_a_reference_is_one_whole_file(sweep, tmp_path):
    out = tmp_path / "table.md"
    args = ["table", str(sweep), "--format", "md", "--no-significance", "--reference", "vaswani2017-table3"]
    printed = runner.invoke(app, args)
    assert printed.exit_code == 0, printed.output
    assert runner.invoke(app, [*args, "--out", str(out)]).exit_code == 0
    assert out.read_text() == printed.stdout


def test_table_out_over_a_trials_record_is_refused(sweep):
    summary = sweep / "base-s1" / "summary.json"
    before = summary.read_bytes()
    result = runner.invoke(app, ["table", str(sweep), "--format", "md", "--out", str(summary)])
    _one_line_error(result, "inside the source")
    assert summary.read_bytes() == before


def test_plot_into_the_sweep_is_refused_and_ctrl_c_keeps_the_old_figures(sweep, tmp_path, monkeypatch):
    from ablate.report import figures as plots

    _one_line_error(runner.invoke(app, ["plot", str(sweep), "--out", str(sweep / "plots")]), "inside the source")
    assert not (sweep / "plots").exists()
    out = tmp_path / "figs"
    out.mkdir()
    (out / "test_bleu.png").write_bytes(b"old figure")

    def half(sweep, out_dir, *args, **kwargs):
        (out_dir / "test_bleu.png").write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(plots, "plot_all", half)
    runner.invoke(app, ["plot", str(sweep), "--out", str(out), "--no-significance"])
    assert [p.name for p in out.iterdir()] == ["test_bleu.png"]
    assert (out / "test_bleu.png").read_bytes() == b"old figure"


def test_a_trial_summary_nested_deep_is_exported_as_an_unreadable_trial_not_a_recursion_error(sweep, tmp_path):
    """A received sweep whose trial's ``summary.json`` nests deeper than the parser follows: the table lists it
    unreadable, but ``ablate export`` then parsed it again and ended in a RecursionError traceback."""
    (sweep / "zz").mkdir()
    (sweep / "zz" / "summary.json").write_text("[" * 200_000 + "]" * 200_000)
    result = runner.invoke(app, ["export", str(sweep), str(tmp_path / "results"), *FAST])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "results" / "base-s1" / "summary.json").is_file()
