"""Raw parallel corpora: where the text comes from, before any tokenisation.

Every source turns into the same thing, a :class:`Corpus`: one Arrow ``datasets.Dataset`` per
split with the string columns ``src`` and ``tgt`` (never Python lists of every sentence, so a
WMT-sized corpus stays on disk). Sources are chosen from ``DataConfig.source`` through the
:data:`~ablate.data.sources.SOURCES` registry, and each offers a cheap :meth:`Source.fingerprint` (used as the cache
key, so a cached run never reads the text) and an expensive :meth:`Source.load`.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, Protocol

import datasets

from ablate.config import DataConfig
from ablate.data.errors import DataError

VAL_NAMES = ("val", "valid", "dev", "validation")
"""Accepted names of the validation split, in order of preference."""


@dataclass
class Corpus:
    """Raw text of every split.

    Attributes:
        splits: split name -> Arrow dataset with string columns ``src`` and ``tgt``.
        val_split: name of the validation split.
        test_splits: names of the test splits, sorted.
        undecodable: split -> number of lines (either side) that were not valid UTF-8.
    """

    splits: dict[str, datasets.Dataset]
    val_split: str
    test_splits: list[str]
    undecodable: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("train", self.val_split):
            if len(self.splits[name]) == 0:
                raise DataError(f"the '{name}' split of the corpus is empty; provide at least one sentence pair")


class Source(Protocol):
    """Where a corpus comes from."""

    def fingerprint(self) -> str:
        """A stable identifier of the content (cheap; no full read when it can be avoided)."""

    def load(self, workdir: Path) -> Corpus:
        """Read every split into Arrow datasets whose files live under ``workdir``."""


def pick_splits(found: Iterable[str], where: str, listing: str = "") -> tuple[str, list[str]]:
    """Choose the validation split and the test splits among ``found`` (``train`` must be there).

    Args:
        found: split names present.
        where: the corpus, for messages.
        listing: what was found, for messages (default: the split names).

    Raises:
        DataError: ``train`` or a validation split is missing (the message lists what was found).
    """
    found = sorted(set(found))
    listing = listing or ", ".join(found) or "nothing"
    if "train" not in found:
        raise DataError(f"no 'train' split in {where} (found: {listing}); add a train split")
    val = next((name for name in VAL_NAMES if name in found), None)
    if val is None:
        raise DataError(f"no validation split in {where} (found: {listing}); add one named {' or '.join(VAL_NAMES)}")
    return val, [name for name in found if name.startswith("test")]


def check_langs(cfg: DataConfig) -> None:
    if cfg.src_lang == cfg.tgt_lang:
        raise DataError(f"data.src_lang and data.tgt_lang are both '{cfg.src_lang}'; pick two languages")


TEXT_FEATURES = datasets.Features({"src": datasets.Value("string"), "tgt": datasets.Value("string")})


def arrow_dataset(
    generator: Callable[..., Iterator[dict]],
    gen_kwargs: dict,
    workdir: Path,
    name: str,
    features: datasets.Features = TEXT_FEATURES,
) -> datasets.Dataset:
    """Stream the rows of ``generator(**gen_kwargs)`` into Arrow files under ``workdir/name``.

    ``generator`` must be a module-level function and ``gen_kwargs`` hold plain values (no lists:
    ``datasets`` would treat them as shards), so that ``datasets`` can hash them cheaply.
    """
    with quiet_datasets():
        return datasets.Dataset.from_generator(
            generator, gen_kwargs=gen_kwargs, features=features, cache_dir=str(workdir / name)
        )


@contextlib.contextmanager
def quiet_datasets() -> Iterator[None]:
    """Silence ``datasets`` progress bars and info logs for the duration of a block."""
    bars = datasets.is_progress_bar_enabled()
    level = datasets.logging.get_verbosity()
    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()
    try:
        yield
    finally:
        datasets.logging.set_verbosity(level)
        if bars:
            datasets.enable_progress_bars()
