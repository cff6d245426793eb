"""``hf:`` sources, exercised on local folders in the hub's parquet layout (the hub is offline)."""

from __future__ import annotations

from pathlib import Path

import datasets
import huggingface_hub
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ablate.config import EvalConfig, TrainConfig
from ablate.data.datamodule import TranslationDataModule
from ablate.data.sources import DataError, make_source, parse_hub_source

from tests.helpers.corpus import read_lines

HUB_SPLITS = {"train": ("train", 400), "validation": ("val", 60), "test": ("test_2016_flickr", 50)}


def _columns(multi30k: Path, split: str, n: int) -> dict[str, list[str]]:
    return {lang: read_lines(multi30k / f"{split}.{lang}.gz", n) for lang in ("en", "de")}


@pytest.fixture(scope="module")
def per_language_layout(multi30k, tmp_path_factory) -> Path:
    """Like ``bentrevett/multi30k``: data/<split>-00000-of-00001.parquet with columns en, de."""
    folder = tmp_path_factory.mktemp("hub_multi30k")
    (folder / "data").mkdir()
    for hub_name, (split, n) in HUB_SPLITS.items():
        pq.write_table(pa.table(_columns(multi30k, split, n)), folder / "data" / f"{hub_name}-00000-of-00001.parquet")
    return folder


@pytest.fixture(scope="module")
def translation_layout(multi30k, tmp_path_factory) -> Path:
    """Like ``wmt14``: <config>/<split>-00000-of-00001.parquet with a translation {de, en} column."""
    folder = tmp_path_factory.mktemp("hub_wmt")
    (folder / "de-en").mkdir()
    for hub_name, (split, n) in HUB_SPLITS.items():
        cols = _columns(multi30k, split, n)
        rows = [{"de": d, "en": e} for e, d in zip(cols["en"], cols["de"])]
        pq.write_table(pa.table({"translation": rows}), folder / "de-en" / f"{hub_name}-00000-of-00001.parquet")
    return folder


def _module(cfg) -> TranslationDataModule:
    dm = TranslationDataModule(cfg, TrainConfig(max_tokens=1000), EvalConfig(), seed=1)
    dm.setup()
    return dm


def test_per_language_columns(per_language_layout, multi30k, make_cfg):
    dm = _module(make_cfg(f"hf:{per_language_layout}"))
    assert dm.val_split == "val" and dm.test_splits == ["test"]
    assert dm.stats["pairs"] == {"train": 400, "val": 60, "test": 50}
    assert dm.references("val") == read_lines(multi30k / "val.de.gz", 60)
    assert dm.sources("test") == read_lines(multi30k / "test_2016_flickr.en.gz", 50)
    assert not dm.stats["cached"]
    assert _module(make_cfg(f"hf:{per_language_layout}")).stats["cached"]


@pytest.mark.parametrize("src,tgt", [("en", "de"), ("de", "en")])
def test_translation_column_with_config(translation_layout, multi30k, make_cfg, src, tgt):
    dm = _module(make_cfg(f"hf:{translation_layout}:de-en", src_lang=src, tgt_lang=tgt))
    assert dm.references("val") == read_lines(multi30k / f"val.{tgt}.gz", 60)
    assert dm.sources("train")[:3] == read_lines(multi30k / f"train.{src}.gz", 3)
    batch = next(iter(dm.val_dataloader()))
    assert batch["src"].shape[0] == batch["index"].shape[0]


def test_translation_column_without_the_languages(translation_layout, make_cfg, tmp_path):
    source = make_source(make_cfg(f"hf:{translation_layout}:de-en", src_lang="en", tgt_lang="fr"), tmp_path)
    with pytest.raises(DataError, match=r"translation column has languages \['de', 'en'\]"):
        source.load(tmp_path)


def test_unreachable_hub_is_one_actionable_line(monkeypatch, make_cfg, tmp_path):
    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'bentrevett/multi30k' on the Hub (LocalEntryNotFoundError)\nmore")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(DataError) as err:
        make_source(make_cfg("hf:bentrevett/multi30k"), tmp_path).fingerprint()
    message = str(err.value)
    assert "\n" not in message and "hf:/path/to/folder" in message and "bentrevett/multi30k" in message


def test_the_hubs_retry_warnings_stay_off_the_console(monkeypatch, make_cfg, tmp_path):
    """An unreachable hub printed 11 lines of huggingface_hub's "'...' thrown while requesting HEAD" and
    "Retrying in 1s [Retry 1/5]." before the one-line error."""
    import logging

    shown = []

    def offline(*args, **kwargs):
        shown.append(logging.getLogger("huggingface_hub.utils._http").isEnabledFor(logging.WARNING))
        raise ConnectionError("Couldn't reach 'a/b' on the Hub (LocalEntryNotFoundError)")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(DataError, match="cannot load hub dataset 'a/b'") as err:
        make_source(make_cfg("hf:a/b"), tmp_path).fingerprint()
    # a relative folder given from elsewhere is read as a hub name: the error says it is no folder from here either
    assert (
        f"(ConnectionError: Couldn't reach 'a/b' on the Hub (LocalEntryNotFoundError)), nor a folder from {Path.cwd()};"
        in str(err.value)
    )
    assert shown == [False] and logging.getLogger("huggingface_hub").isEnabledFor(logging.WARNING)  # restored


def test_json_lines_at_the_root_as_bentrevett_multi30k_ships_them(multi30k, make_cfg, tmp_path):
    """The hub repository ``bentrevett/multi30k`` holds ``train.jsonl``, ``val.jsonl`` and ``test.jsonl`` with
    ``en`` and ``de`` fields at its root; ``datasets`` maps ``val`` to the validation split. The README's example
    loads through this path with the installed ``datasets`` (the hub itself is offline here)."""
    import json

    for name, (split, n) in {"train": ("train", 40), "val": ("val", 20), "test": ("test_2016_flickr", 10)}.items():
        rows = zip(*_columns(multi30k, split, n).values())
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps({"en": e, "de": d}) + "\n" for e, d in rows))
    dm = _module(make_cfg(f"hf:{tmp_path}"))
    assert dm.val_split == "val" and dm.test_splits == ["test"]
    assert dm.stats["pairs"] == {"train": 40, "val": 20, "test": 10}
    assert dm.references("val") == read_lines(multi30k / "val.de.gz", 20)


def test_hub_folder_without_validation_split(multi30k, make_cfg, tmp_path):
    (tmp_path / "data").mkdir()
    pq.write_table(pa.table(_columns(multi30k, "train", 10)), tmp_path / "data" / "train-00000-of-00001.parquet")
    with pytest.raises(DataError, match="no validation split .*found: train"):
        make_source(make_cfg(f"hf:{tmp_path}"), tmp_path / "cache").fingerprint()


# ---------------------------------------------------------------- revisions, without network


@pytest.mark.parametrize(
    "source,expected",
    [
        ("hf:bentrevett/multi30k", ("bentrevett/multi30k", "", None)),
        ("hf:bentrevett/multi30k@4a3f5c1", ("bentrevett/multi30k", "", "4a3f5c1")),
        ("hf:wmt/wmt14@v1.0:de-en", ("wmt/wmt14", "de-en", "v1.0")),
        ("hf:wmt/wmt14:de-en@refs/convert/parquet", ("wmt/wmt14", "de-en", "refs/convert/parquet")),
    ],
)
def test_a_revision_is_parsed_after_the_dataset_or_its_config(source, expected):
    assert parse_hub_source(source) == expected


@pytest.mark.parametrize(
    "source,message",
    [
        ("hf:bentrevett/multi30k@", "'@' needs a revision after it"),
        ("hf:wmt14@a:de-en@b", "more than one revision"),
        ("hf:wmt14@a@b", "more than one revision"),
        ("hf:@abc", "names no dataset"),
        ("hf:", "names no dataset"),  # not the current folder
        ("hf::de-en", "names no dataset"),
    ],
)
def test_a_malformed_revision_is_one_line(source, message):
    with pytest.raises(DataError, match=message) as err:
        parse_hub_source(source)
    assert "\n" not in str(err.value) and "hf:<dataset>[@<revision>][:<config>]" in str(err.value)


def test_hf_with_no_dataset_names_the_form_it_wants():
    with pytest.raises(
        DataError, match=r"data.source='hf:' names no dataset \(hf:OWNER/NAME, e.g. hf:bentrevett/multi30k\)"
    ):
        parse_hub_source("hf:")


def test_a_local_folder_takes_no_revision(tmp_path):
    folder = tmp_path / "copy@2024"  # an '@' in a folder's name is part of the name
    folder.mkdir()
    assert parse_hub_source(f"hf:{folder}") == (str(folder), "", None)
    with pytest.raises(DataError, match="a revision pins a hub dataset"):
        parse_hub_source(f"hf:{folder}:de-en@abc")


class StandInHub:
    """``huggingface_hub.HfApi`` as far as :func:`ablate.data.sources.served_commit` uses it: the sha a revision resolves to."""

    SHAS = {"4a3f5c1": "4a3f5c1" + "0" * 33, None: "e" * 40, "main": "e" * 40, "other": "b" * 40}
    asked: list[tuple[str, str | None]] = []

    def dataset_info(self, name, revision=None):
        StandInHub.asked.append((name, revision))
        if revision not in self.SHAS:
            raise LookupError(f"{revision} not found")
        return type("Info", (), {"sha": self.SHAS[revision]})()


def test_a_local_folder_with_a_revision_is_refused_in_one_line(per_language_layout):
    with pytest.raises(DataError, match="is a local folder and a revision pins a hub dataset") as err:
        parse_hub_source(f"hf:{per_language_layout}@abc")  # it used to train and record revision 'abc'
    assert "\n" not in str(err.value) and "drop '@abc'" in str(err.value)


def test_the_commit_the_hub_served_is_recorded_beside_the_revision(per_language_layout, monkeypatch, make_cfg):
    real = datasets.load_dataset
    monkeypatch.setattr(
        datasets, "load_dataset", lambda **kw: real(path=str(per_language_layout), cache_dir=kw["cache_dir"])
    )
    monkeypatch.setattr(huggingface_hub, "HfApi", StandInHub)
    StandInHub.asked.clear()
    dm = _module(make_cfg("hf:bentrevett/multi30k@main"))  # a branch: the record says which commit it was
    assert dm.stats["source"]["revision"] == "main" and dm.stats["source"]["commit"] == "e" * 40
    assert StandInHub.asked == [("bentrevett/multi30k", "main")]

    class Offline:
        def dataset_info(self, name, revision=None):
            raise huggingface_hub.errors.OfflineModeIsEnabled("offline")

    monkeypatch.setattr(huggingface_hub, "HfApi", Offline)
    dm = _module(make_cfg("hf:bentrevett/multi30k@main"))  # the hub does not say: unknown, never guessed
    assert dm.stats["source"]["commit"] is None
    local = _module(make_cfg(f"hf:{per_language_layout}"))  # a folder: no hub, no commit
    assert local.stats["source"]["commit"] is None and StandInHub.asked == [("bentrevett/multi30k", "main")]
    assert local.stats["source"]["folder"] == str(per_language_layout.resolve())  # where, for `ablate evaluate`
    assert "folder" not in dm.stats["source"]


def test_the_revision_reaches_load_dataset_and_the_run_record(per_language_layout, monkeypatch, make_cfg, tmp_path):
    calls = []
    real = datasets.load_dataset

    def hub(**kwargs):  # the hub is offline: serve the local copy, as the hub would serve that revision
        calls.append(kwargs)
        return real(path=str(per_language_layout), cache_dir=kwargs["cache_dir"])

    monkeypatch.setattr(datasets, "load_dataset", hub)
    monkeypatch.setattr(huggingface_hub, "HfApi", StandInHub)
    dm = _module(make_cfg("hf:bentrevett/multi30k@4a3f5c1"))
    assert [(c["path"], c["revision"]) for c in calls] == [("bentrevett/multi30k", "4a3f5c1")]
    assert dm.stats["source"] == {
        "dataset": "bentrevett/multi30k",
        "config": None,
        "revision": "4a3f5c1",
        "commit": StandInHub.SHAS["4a3f5c1"],
    }
    assert dm.stats["pairs"]["train"] == 400

    calls.clear()
    unpinned = make_source(make_cfg("hf:bentrevett/multi30k"), tmp_path / "cache")
    pinned = make_source(make_cfg("hf:bentrevett/multi30k@other"), tmp_path / "cache")
    assert unpinned.fingerprint() != pinned.fingerprint()  # another revision, another cache entry
    assert [c.get("revision") for c in calls] == [None, "other"]  # no revision asked: none passed


def test_an_unloadable_revision_names_it(monkeypatch, make_cfg, tmp_path):
    def missing(**kwargs):
        raise FileNotFoundError(f"Revision '{kwargs['revision']}' doesn't exist for dataset 'x/y' on the Hub.")

    monkeypatch.setattr(datasets, "load_dataset", missing)
    with pytest.raises(DataError, match="cannot load hub dataset 'x/y' at revision 'nope'") as err:
        make_source(make_cfg("hf:x/y@nope"), tmp_path).fingerprint()
    assert "\n" not in str(err.value)
