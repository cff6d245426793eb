"""From a corpus source to tokenised, length-annotated Arrow splits, built once and cached.

``prepare(cfg)`` is the whole pipeline. The cache entry of a corpus is keyed by the source's
content fingerprint, the tokenizer settings and ``max_len``; it holds the tokenizer and one
``save_to_disk`` dataset per split with columns

* ``src``, ``tgt``: raw text (``tgt`` is the BLEU reference),
* ``src_ids``, ``tgt_ids``: subword ids without specials (int32 lists),
* ``src_len``, ``tgt_len``: their lengths (int32), read by the batch samplers.

Training drops pairs with an empty side or a side longer than ``max_len`` subwords; validation
and test keep every pair (ids longer than ``max_len`` are truncated; the raw text is kept whole)
so that hypotheses cover every sentence exactly once. The tokenizer has its own cache entry
(keyed without ``max_len``), so changing ``max_len`` does not retrain it. A cache hit reads
nothing but the memory-mapped Arrow files.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import datasets
import numpy as np
import pyarrow.compute as pc

from ablate.config import DataConfig
from ablate.data.cache import cache_root, cached_entry, digest, scratch_dir
from ablate.data.corpus import Corpus, Source, quiet_datasets
from ablate.data.errors import DataError
from ablate.data.sources import make_source
from ablate.data.tokenizer import RECIPE, SubwordTokenizer, TokenizerError

log = logging.getLogger(__name__)
VERSION = 1
"""Bump when the encoded layout changes: it is part of the cache key."""
ENCODE_BATCH = 2000
IDS = datasets.Sequence(datasets.Value("int32"))
FEATURES = datasets.Features(
    {
        "src": datasets.Value("string"),
        "tgt": datasets.Value("string"),
        "src_ids": IDS,
        "tgt_ids": IDS,
        "src_len": datasets.Value("int32"),
        "tgt_len": datasets.Value("int32"),
        "clipped": datasets.Value("bool"),
    }
)


@dataclass
class Prepared:
    """The encoded corpus, ready for batching.

    Attributes:
        tokenizer: the subword tokenizer.
        splits: split name -> memory-mapped dataset (columns in the module docstring).
        val_split: name of the validation split.
        test_splits: names of the test splits, sorted.
        stats: pairs per split, dropped/truncated/undecodable counts, vocabulary sizes,
            ``cached`` (this run built nothing), ``tokenizer_cached``, ``seconds``, ``key``.
    """

    tokenizer: SubwordTokenizer
    splits: dict[str, datasets.Dataset]
    val_split: str
    test_splits: list[str]
    stats: dict


class _LazyCorpus:
    """Loads the raw corpus on first use only (a cache hit never does), into a scratch folder."""

    def __init__(self, source: Source, root: Path):
        self.source, self.root = source, root
        self._corpus: Corpus | None = None
        self._dir: Path | None = None

    @property
    def workdir(self) -> Path:
        """Scratch folder of this build (exists once :meth:`get` ran)."""
        assert self._dir is not None, "call get() first"
        return self._dir

    def get(self) -> Corpus:
        if self._corpus is None:
            self._dir = scratch_dir(self.root)
            self._corpus = self.source.load(self._dir)
        return self._corpus

    def cleanup(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)


def _encode(batch: dict, tokenizer: SubwordTokenizer, max_len: int, clip: bool) -> dict:
    src = tokenizer.encode_src([text or "" for text in batch["src"]])
    tgt = tokenizer.encode_tgt([text or "" for text in batch["tgt"]])
    clipped = [len(s) > max_len or len(t) > max_len for s, t in zip(src, tgt)]
    if clip:
        src, tgt = [s[:max_len] for s in src], [t[:max_len] for t in tgt]
    return {
        "src": [text or "" for text in batch["src"]],
        "tgt": [text or "" for text in batch["tgt"]],
        "src_ids": src,
        "tgt_ids": tgt,
        "src_len": [len(s) for s in src],
        "tgt_len": [len(t) for t in tgt],
        "clipped": clipped,
    }


def _column(ds: datasets.Dataset, name: str) -> np.ndarray:
    return ds.data.column(name).to_numpy()


def encode_split(
    ds: datasets.Dataset, tokenizer: SubwordTokenizer, max_len: int, train: bool, scratch: Path, name: str
) -> tuple[datasets.Dataset, dict]:
    """Tokenise one split with a batched ``map``; filter (train) or truncate (eval).

    Returns:
        The encoded dataset and its counts (``dropped_empty``, ``dropped_long`` or ``truncated``).
    """
    with quiet_datasets():
        out = ds.map(
            _encode,
            batched=True,
            batch_size=ENCODE_BATCH,
            features=FEATURES,
            fn_kwargs={"tokenizer": tokenizer, "max_len": max_len, "clip": not train},
            remove_columns=ds.column_names,
            new_fingerprint=digest("encode", name, max_len, str(scratch)),
            cache_file_name=str(scratch / f"{name}-encoded.arrow"),
            desc=f"encoding {name}",
        )
    clipped = int(pc.sum(out.data.column("clipped")).as_py() or 0)
    out = out.remove_columns("clipped")
    if not train:
        return out, {"truncated": clipped}
    src_len, tgt_len = _column(out, "src_len"), _column(out, "tgt_len")
    empty = (src_len == 0) | (tgt_len == 0)
    long = ~empty & ((src_len > max_len) | (tgt_len > max_len))
    if (empty | long).all():
        raise DataError(
            f"all {len(out)} training pairs are empty or longer than data.max_len={max_len} "
            f"subwords; raise data.max_len or check the corpus"
        )
    if (empty | long).any():
        out = out.select(np.flatnonzero(~(empty | long)))
    return out, {"dropped_empty": int(empty.sum()), "dropped_long": int(long.sum())}


def _build(entry: Path, raw: _LazyCorpus, cfg: DataConfig, root: Path, tok_key: str) -> None:
    corpus = raw.get()
    train = corpus.splits["train"]
    learn = lambda d: SubwordTokenizer.train(train, cfg.vocab_size, cfg.joint_vocab).save(d)
    tok_dir, tok_hit = cached_entry(root, "tokenizers", tok_key, learn)
    try:
        tokenizer = SubwordTokenizer.load(tok_dir)
    except TokenizerError as err:  # damaged in place (same sizes, so its manifest still matched): rebuild it
        log.warning("cached tokenizer %s is unreadable (%s); rebuilding it", tok_dir, err)
        tok_dir, tok_hit = cached_entry(root, "tokenizers", tok_key, learn, damaged=tok_dir.stat().st_ino)
        tokenizer = SubwordTokenizer.load(tok_dir)
    tokenizer.save(entry / "tokenizer")
    counts, pairs = {}, {}
    for name, ds in corpus.splits.items():
        encoded, counts[name] = encode_split(ds, tokenizer, cfg.max_len, name == "train", raw.workdir, name)
        with quiet_datasets():
            encoded.save_to_disk(str(entry / "splits" / name))
        pairs[name] = len(encoded)
    stats = {
        "pairs": pairs,
        "dropped": {"empty": counts["train"]["dropped_empty"], "too_long": counts["train"]["dropped_long"]},
        "truncated": {name: c["truncated"] for name, c in counts.items() if name != "train"},
        "undecodable": dict(corpus.undecodable),
        "vocab": {"src": tokenizer.src_vocab_size, "tgt": tokenizer.tgt_vocab_size, "joint": tokenizer.joint},
        "tokenizer_cached": tok_hit,
    }
    meta = {
        "val_split": corpus.val_split,
        "test_splits": corpus.test_splits,
        "splits": list(corpus.splits),
        "stats": stats,
    }
    (entry / "meta.json").write_text(json.dumps(meta, indent=1))


def _load_entry(entry: Path) -> tuple[dict, SubwordTokenizer, dict[str, datasets.Dataset]]:
    """The metadata, tokenizer and splits of a cache entry; every row count checked against the metadata."""
    meta = json.loads((entry / "meta.json").read_text())
    tokenizer = SubwordTokenizer.load(entry / "tokenizer")
    with quiet_datasets():
        splits = {name: datasets.load_from_disk(str(entry / "splits" / name)) for name in meta["splits"]}
    for name, ds in splits.items():
        if len(ds) != meta["stats"]["pairs"][name]:
            raise ValueError(f"split {name} has {len(ds)} rows, expected {meta['stats']['pairs'][name]}")
    return meta, tokenizer, splits


def prepare(cfg: DataConfig) -> Prepared:
    """Load (or build and cache) the tokenizer and the encoded splits that ``cfg`` describes."""
    start = time.perf_counter()
    root = cache_root(cfg.cache_dir)
    source = make_source(cfg, root)
    content = source.fingerprint()
    tok_key = digest("tokenizer", RECIPE, content, cfg.vocab_size, cfg.joint_vocab, cfg.src_lang, cfg.tgt_lang)
    key = digest("encoded", VERSION, tok_key, cfg.max_len)
    raw = _LazyCorpus(source, root)
    try:
        entry, hit = cached_entry(root, "corpora", key, lambda tmp: _build(tmp, raw, cfg, root, tok_key))
        try:
            meta, tokenizer, splits = _load_entry(entry)
        except Exception as err:  # noqa: BLE001 - a damaged entry (torn Arrow file, bad JSON, tokenizer): rebuild it once
            if isinstance(err, DataError) and not isinstance(err, TokenizerError):
                raise
            log.warning("cache entry %s is unreadable (%s); rebuilding it", entry, str(err).splitlines()[0][:200])
            entry, hit = cached_entry(
                root, "corpora", key, lambda tmp: _build(tmp, raw, cfg, root, tok_key), damaged=entry.stat().st_ino
            )
            meta, tokenizer, splits = _load_entry(entry)
    finally:
        raw.cleanup()
    stats = dict(meta["stats"], cached=hit, key=key, seconds=round(time.perf_counter() - start, 3))
    stats["tokenizer_cached"] = hit or stats["tokenizer_cached"]
    provenance = getattr(source, "provenance", None)  # optional: what a source can say of its origin (hf: revision)
    if callable(provenance):
        stats["source"] = provenance()
    dropped = stats["dropped"]
    log.info(
        "data %s: %s; pairs %s; dropped from train: %d empty, %d longer than %d subwords (%.1fs)",
        "cached" if hit else "built",
        cfg.source,
        stats["pairs"],
        dropped["empty"],
        dropped["too_long"],
        cfg.max_len,
        stats["seconds"],
    )
    return Prepared(tokenizer, splits, meta["val_split"], meta["test_splits"], stats)
