"""``data.source=hf:<dataset>[@<revision>][:<config>]``: a Hugging Face translation dataset.

``@<revision>`` pins the hub dataset to a commit (or a branch or tag; only a commit sha is a pin),
as ``hf://datasets/<dataset>@<revision>`` does; ``hf:<dataset>:<config>@<revision>`` reads the same.
It reaches ``datasets.load_dataset(revision=...)`` and the run records it (``summary.json``:
``data.source`` as dataset, config and revision), so a rerun reads the same data even after the
dataset's owner changes it. Beside it the record keeps ``commit``, the sha the hub says it served
(a branch or tag resolved; none asked, the default branch's head), or null when the hub did not answer.

Two column layouts are understood: one string column per language (``bentrevett/multi30k``:
``en``, ``de``) and a ``translation`` column of ``{lang: text}`` records (``wmt14`` ``de-en``,
``iwslt2017``). Hub split names are mapped: ``train`` stays, ``validation`` (or ``valid``,
``dev``, ``val``) becomes ``val``, and every split starting with ``test`` keeps its name.

``<dataset>`` may also be a local folder in the hub's file layout (e.g. ``data/train-*.parquet``
or ``<config>/train-*.parquet``), which is how datasets are used where the hub is unreachable; a folder
has no revisions, so ``hf:<folder>@<rev>`` is refused.
Loaded data is cached by ``datasets`` under ``<cache root>/hf``; the content fingerprint is the
loaded datasets' own fingerprints.
"""

from __future__ import annotations

from pathlib import Path

import datasets

from ablate.config import DataConfig
from ablate.data.cache import digest
from ablate.data.corpus import VAL_NAMES, Corpus, pick_splits, quiet_datasets
from ablate.data.errors import DataError


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}".strip(": ")


def canonical_split(name: str) -> str | None:
    """Hub split name -> ours (``validation`` -> ``val``); ``None`` for splits we do not use."""
    if name == "train" or name.startswith("test"):
        return name
    return "val" if name in VAL_NAMES else None


def text_columns(ds: datasets.Dataset, src: str, tgt: str, where: str) -> datasets.Dataset:
    """Reduce ``ds`` to string columns ``src``/``tgt`` (zero-copy column operations)."""
    columns = ds.column_names
    if "translation" in columns:
        flat = ds.select_columns(["translation"]).flatten()
        wanted = [f"translation.{src}", f"translation.{tgt}"]
        if not set(wanted) <= set(flat.column_names):
            have = sorted(c.split(".", 1)[1] for c in flat.column_names)
            raise DataError(
                f"{where}: the translation column has languages {have}, not {src} and {tgt}; "
                f"set data.src_lang/data.tgt_lang"
            )
        return flat.select_columns(wanted).rename_columns({wanted[0]: "src", wanted[1]: "tgt"})
    if src in columns and tgt in columns:
        return ds.select_columns([src, tgt]).rename_columns({src: "src", tgt: "tgt"})
    raise DataError(
        f"{where} has columns {columns}; expected a 'translation' column or one column per language ('{src}', '{tgt}')"
    )


USAGE = "use hf:<dataset>[@<revision>][:<config>]"


def parse_hub_source(source: str) -> tuple[str, str, str | None]:
    """``hf:<dataset>[@<revision>][:<config>]`` -> (dataset, config, revision); one-line :class:`DataError` if malformed.

    The revision may also follow the config (``hf:wmt14:de-en@<sha>``). A local folder takes no
    revision (a folder whose name holds ``@`` is a folder).
    """
    spec = source[len("hf:") :]
    name, _, config = spec.partition(":")
    if Path(name).expanduser().is_dir():
        if "@" in config:
            raise DataError(f"data.source={source!r}: a revision pins a hub dataset; the folder {name} has none")
        return name, config, None
    revisions = []
    if "@" in name:
        name, _, rev = name.partition("@")
        revisions.append(rev)
    if "@" in config:
        config, _, rev = config.partition("@")
        revisions.append(rev)
    if not name:
        raise DataError(f"data.source={source!r} names no dataset; {USAGE}")
    if revisions and Path(name).expanduser().is_dir():  # a folder has no commits: "@abc" would be a pin that never was
        raise DataError(
            f"data.source={source!r}: {name} is a local folder and a revision pins a hub dataset; "
            f"drop '@{revisions[0]}' or name the hub dataset"
        )
    if len(revisions) > 1 or any("@" in r or ":" in r for r in revisions):
        raise DataError(f"data.source={source!r} gives more than one revision; {USAGE}")
    if revisions and not revisions[0]:
        raise DataError(f"data.source={source!r}: '@' needs a revision after it (a commit sha, branch or tag); {USAGE}")
    return name, config, revisions[0] if revisions else None


def served_commit(name: str, revision: str | None) -> str | None:
    """The commit sha the hub serves for ``name`` at ``revision`` (a branch or tag resolved), or None when the hub
    does not answer (offline, unreachable): recorded beside the revision asked for, never in its place."""
    try:
        from huggingface_hub import HfApi

        sha = HfApi().dataset_info(name, revision=revision).sha
    except Exception:  # noqa: BLE001 - the data loaded; a hub that cannot say which commit leaves it unknown
        return None
    return sha if isinstance(sha, str) and sha else None


class HubDataset:
    """See the module docstring."""

    def __init__(self, cfg: DataConfig, cache_root: Path):
        self.name, self.config, self.revision = parse_hub_source(cfg.source)
        self.langs = (cfg.src_lang, cfg.tgt_lang)
        self.cache_root = cache_root
        self._splits: dict[str, datasets.Dataset] | None = None
        self.commit: str | None = None  # the commit the hub served, when it said

    def _load(self) -> dict[str, datasets.Dataset]:
        if self._splits is not None:
            return self._splits
        path = Path(self.name).expanduser()
        local = path.is_dir()
        args = {
            "path": str(path) if local else self.name,
            "name": self.config or None,
            "cache_dir": str(self.cache_root / "hf"),
        }
        if local and self.config and (path / self.config).is_dir():
            args.update(name=None, data_dir=self.config)  # hub layout <config>/<split>-*.parquet
        if self.revision:
            args["revision"] = self.revision
        try:
            with quiet_datasets():
                loaded = datasets.load_dataset(**args)
        except Exception as err:  # noqa: BLE001 - any failure becomes one actionable line
            if local:
                raise DataError(
                    f"cannot load {path} as a dataset folder ({_first_line(err)}); "
                    f"expected hub-layout files such as data/train-*.parquet"
                ) from None
            at = f" at revision '{self.revision}'" if self.revision else ""
            raise DataError(
                f"cannot load hub dataset '{self.name}'{at} ({_first_line(err)}); if the hub is unreachable, "
                f"download it elsewhere and pass its folder (data.source=hf:/path/to/folder) or a folder "
                f"of {{split}}.{{lang}} files (data.source=/path/to/folder)"
            ) from None
        where = f"hub dataset '{self.name}'"
        pick_splits([canonical_split(s) or s for s in loaded], where, ", ".join(loaded))
        splits: dict[str, datasets.Dataset] = {}
        for name, ds in loaded.items():
            ours = canonical_split(name)
            if ours is not None and ours not in splits:
                splits[ours] = ds
        self._splits = splits
        if not local:
            self.commit = served_commit(self.name, self.revision)
        return splits

    def fingerprint(self) -> str:
        splits = self._load()
        pinned = [self.revision] if self.revision else []  # unpinned runs keep their cache keys
        return digest(
            "hf",
            self.name,
            self.config,
            *pinned,
            self.langs,
            sorted((name, ds._fingerprint) for name, ds in splits.items()),
        )

    def provenance(self) -> dict[str, str | None]:
        """What the run records of its data: the dataset, its config, the revision asked for and the commit
        the hub served (``None`` for a local folder, or when the hub did not say)."""
        return {"dataset": self.name, "config": self.config or None, "revision": self.revision, "commit": self.commit}

    def load(self, workdir: Path) -> Corpus:
        splits = {
            name: text_columns(ds, *self.langs, f"hub dataset '{self.name}' split '{name}'")
            for name, ds in self._load().items()
        }
        tests = sorted(name for name in splits if name.startswith("test"))
        return Corpus(splits, "val", tests)
