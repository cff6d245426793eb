"""The registry of corpus sources, and the built-in synthetic task as a source."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from ablate.config import DataConfig
from ablate.data import builtin
from ablate.data.cache import digest
from ablate.data.corpus import Corpus, Source, arrow_dataset, check_langs
from ablate.data.errors import DataError
from ablate.data.hub import HubDataset
from ablate.data.local import LocalFolder
from ablate.registry import register, table

SOURCES: dict[str, type] = table("source")
"""Source kind -> source class, filled by ``@register("source", kind)``. ``data.source`` names a kind by
itself (``builtin``) or as a prefix (``hf:<dataset>``); anything else is a folder (``local``). A new
source is one class with ``(cfg, cache_root)``, ``fingerprint()`` and ``load(workdir)``; an optional
``provenance()`` dict (the hub's dataset, config and revision) is recorded as the run's ``data.source``."""


def _builtin_rows(split: str, n: int, swap: bool) -> Iterator[dict[str, str]]:
    for en, de in builtin.generate(split, n):
        yield {"src": de, "tgt": en} if swap else {"src": en, "tgt": de}


@register("source", "builtin")
class BuiltinTask:
    """``data.source=builtin``: the synthetic en<->de task of :mod:`ablate.data.builtin`."""

    def __init__(self, cfg: DataConfig, cache_root: Path):
        if {cfg.src_lang, cfg.tgt_lang} != set(builtin.LANGS):
            raise DataError(
                f"the builtin task translates between en and de, not {cfg.src_lang}->{cfg.tgt_lang}; "
                f"set data.src_lang/data.tgt_lang to en and de (either direction) or choose another data.source"
            )
        if cfg.builtin_pairs <= 0:
            raise DataError(f"data.builtin_pairs={cfg.builtin_pairs} must be positive")
        if cfg.builtin_eval_pairs <= 0:
            raise DataError(
                f"data.builtin_eval_pairs={cfg.builtin_eval_pairs} must be positive (the default is {builtin.N_EVAL})"
            )
        n_eval = cfg.builtin_eval_pairs
        self.sizes = {"train": cfg.builtin_pairs, "val": n_eval, "test": n_eval}
        self.swap = cfg.src_lang == "de"

    def fingerprint(self) -> str:
        return digest("builtin", builtin.VERSION, self.sizes, self.swap)

    def load(self, workdir: Path) -> Corpus:
        splits = {
            name: arrow_dataset(_builtin_rows, {"split": name, "n": n, "swap": self.swap}, workdir, name)
            for name, n in self.sizes.items()
        }
        return Corpus(splits, "val", ["test"])


register("source", "hf")(HubDataset)
register("source", "local")(LocalFolder)
FALLBACK = "local"
"""The kind of a ``data.source`` that names no kind: a path."""


def source_kind(source: str) -> str:
    """The :data:`SOURCES` kind of a ``data.source`` value."""
    prefix, colon, _ = source.partition(":")
    if colon and prefix in SOURCES and prefix != FALLBACK:
        return prefix
    return source if source in SOURCES and source != FALLBACK and not colon else FALLBACK


def make_source(cfg: DataConfig, cache_root: Path) -> Source:
    """The :class:`Source` that ``cfg.source`` names (``builtin``, ``hf:...`` or a folder)."""
    check_langs(cfg)
    return SOURCES[source_kind(cfg.source)](cfg, cache_root)
