"""The data cache: crash- and concurrency-safe on-disk entries, and the encoded corpus built into them.

An entry ``<root>/<kind>/<key>`` is built under a per-entry file lock into a temporary directory and
published with one atomic rename, so parallel sweep trials and DDP ranks build it once and share it, and a
crashed builder leaves only a temporary directory. Entries follow the umask (a team cache under
``umask 002`` is group-writable) and list their files and sizes in ``.manifest.json``; one that no longer
matches, or that its reader cannot use, is moved aside and rebuilt, never used.

:func:`prepare` builds the encoded corpus, keyed by the source's fingerprint, the tokenizer's key and
``max_len``: the tokenizer and per split ``src``, ``tgt`` (raw text; ``tgt`` is the BLEU reference),
``src_ids``, ``tgt_ids`` (subwords, no specials) and ``src_len``, ``tgt_len``. Training drops pairs with an
empty side or one longer than ``max_len``; validation and test keep every pair (ids truncated, text whole; a
warning counts the cut ones and those with an empty side) so hypotheses cover every sentence once. The
tokenizer has its own entry, keyed by what it learns from (the training split's fingerprint, where the source
gives one) and its settings, without ``max_len``."""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import datasets
import numpy as np
import pyarrow.compute as pc

from ablate.config import DataConfig
from ablate.data.sources import TEXT_FEATURES, DataError, Source, digest, make_source, quiet_datasets
from ablate.data.tokenizer import RECIPE, SubwordTokenizer, TokenizerError
from ablate.errors import first_line
from ablate.utils.io import HolderLock, cache_root, plain_mode, read_json, replace

MANIFEST = ".manifest.json"
log = logging.getLogger(__name__)


def check_cache_root(root: Path) -> Path:
    """``root`` when the cache can live there (a writable folder, or where one can be made); creates nothing.

    Raises DataError when ``root`` (or a folder on its way) is a file or cannot be written."""
    found = root
    while not found.exists() and found.parent != found:
        found = found.parent
    if not found.is_dir():
        raise _unusable(root, NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR)))
    if not os.access(found, os.W_OK | os.X_OK):
        code = errno.EROFS if os.statvfs(found).f_flag & os.ST_RDONLY else errno.EACCES
        raise _unusable(root, OSError(code, os.strerror(code)))
    return root


def _unusable(root: Path, err: OSError) -> DataError:
    """One line for a cache folder that cannot be used, and how to point it elsewhere."""
    setting = "data.cache_dir, else ABLATE_CACHE, else ~/.cache/ablate"
    if isinstance(err, (FileExistsError, NotADirectoryError)) or err.errno in (errno.EEXIST, errno.ENOTDIR):
        why = "is a file, or lies under one, not a folder"
    elif err.errno == errno.EROFS:
        why = "is on a read-only file system"
    else:
        why = f"cannot be written ({err.strerror or err})"
    return DataError(
        f"the data cache {root} ({setting}) {why}; point ABLATE_CACHE or data.cache_dir at a writable folder"
    )


def cached_entry(
    root: Path, kind: str, key: str, build: Callable[[Path], None], damaged: Optional[int] = None
) -> tuple[Path, bool]:
    """The entry ``root/kind/key`` and whether it existed, built with ``build(tmp_dir)`` if absent or damaged.

    ``damaged``: the inode of an entry its reader could not use, replaced unless another process already did.
    Raises DataError when the disk (or quota) is full, naming the cache folder."""
    final = root / kind / key
    if damaged is None and final.is_dir():
        problem = check_entry(final)
        if problem is None:
            return final, True
        log.warning("cache entry %s is damaged (%s); rebuilding it", final, problem)
        damaged = _inode(final)
    try:
        locks = root / "locks"
        locks.mkdir(parents=True, exist_ok=True)
        with HolderLock(locks / f"{kind}-{key}.lock", wait=True):
            if final.is_dir():
                if _inode(final) != damaged and check_entry(final) is None:
                    return final, True  # another process built (or rebuilt) it while we waited
                _discard(final)
            final.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=final.parent))
            try:
                build(tmp)
                _seal(tmp)
                replace(tmp, final)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
    except OSError as err:
        if err.errno in (errno.ENOSPC, errno.EDQUOT):
            raise DataError(
                f"no space left to write the data cache in {root} ({kind}/{key}): free space there, "
                f"or point ABLATE_CACHE (or data.cache_dir) at a disk with room"
            ) from None
        if err.errno in (errno.ENOTDIR, errno.EEXIST, errno.EROFS, errno.EACCES, errno.EPERM, errno.EINVAL):
            raise _unusable(root, err) from None
        raise
    return final, False


def check_entry(entry: Path) -> Optional[str]:
    """None when ``entry`` holds exactly the files (and sizes) of its manifest, else what is wrong."""
    try:
        manifest = read_json(entry / MANIFEST)
        if not isinstance(manifest, dict):
            return "unreadable manifest"
    except (OSError, ValueError):
        return "no readable manifest"
    for name, size in manifest.items():
        try:
            actual = (entry / name).stat().st_size
        except OSError:
            return f"{name} is missing"
        if actual != size:
            return f"{name} has {actual} bytes, expected {size}"
    return None


def _seal(folder: Path) -> None:
    """Write the manifest of ``folder`` and give it (and its sub-folders) plain folder permissions."""
    files = {}
    for path in sorted(folder.rglob("*")):
        if path.is_dir():
            path.chmod(plain_mode(directory=True))
        elif path.is_file():
            files[str(path.relative_to(folder))] = path.stat().st_size
    (folder / MANIFEST).write_text(json.dumps(files, indent=0))
    folder.chmod(plain_mode(directory=True))  # mkdtemp made it 0700


def _inode(path: Path) -> Optional[int]:
    try:
        return path.stat().st_ino
    except OSError:
        return None


def _discard(entry: Path) -> None:
    """Move a damaged entry aside (one rename, so readers never see it half-deleted), then delete it."""
    aside = entry.with_name(f".damaged-{entry.name}-{uuid.uuid4().hex[:8]}")
    os.rename(entry, aside)
    shutil.rmtree(aside, ignore_errors=True)


VERSION = 1
"""Bump when the encoded layout changes: it is part of the cache key."""
ENCODE_BATCH = 2000
IDS = datasets.Sequence(datasets.Value("int32"))
LENGTH = datasets.Value("int32")
FEATURES = datasets.Features(
    {
        **TEXT_FEATURES,
        "src_ids": IDS,
        "tgt_ids": IDS,
        "src_len": LENGTH,
        "tgt_len": LENGTH,
        "clipped": datasets.Value("bool"),
    }
)


@dataclass
class Prepared:
    """The encoded corpus: tokenizer, splits (memory-mapped, columns in the module docstring), the validation
    and test split names, and ``stats`` (pairs per split, dropped/truncated/undecodable counts, vocabulary sizes,
    ``cached``, ``tokenizer_cached``, ``seconds``, ``key``)."""

    tokenizer: SubwordTokenizer
    splits: dict[str, datasets.Dataset]
    val_split: str
    test_splits: list[str]
    stats: dict


def _encode(batch: dict, tokenizer: SubwordTokenizer, max_len: int, clip: bool) -> dict:
    src_text, tgt_text = ([text or "" for text in batch[side]] for side in ("src", "tgt"))
    src, tgt = tokenizer.encode_src(src_text), tokenizer.encode_tgt(tgt_text)
    clipped = [len(s) > max_len or len(t) > max_len for s, t in zip(src, tgt)]
    if clip:
        src, tgt = [s[:max_len] for s in src], [t[:max_len] for t in tgt]
    return {
        "src": src_text,
        "tgt": tgt_text,
        "src_ids": src,
        "tgt_ids": tgt,
        "src_len": [len(s) for s in src],
        "tgt_len": [len(t) for t in tgt],
        "clipped": clipped,
    }


def lengths(split: datasets.Dataset) -> tuple[np.ndarray, np.ndarray]:
    """Cached ``(src_len, tgt_len)`` subword counts of a split, as numpy arrays."""
    return split.data.column("src_len").to_numpy(), split.data.column("tgt_len").to_numpy()


def encode_split(
    ds: datasets.Dataset, tokenizer: SubwordTokenizer, max_len: int, train: bool, scratch: Path, name: str
) -> tuple[datasets.Dataset, dict]:
    """Tokenise one split with a batched ``map``, then filter (train) or truncate (eval); returns it and its
    counts (``empty`` and ``too_long`` pairs dropped, or ``truncated``)."""
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
    src_len, tgt_len = lengths(out)
    empty = (src_len == 0) | (tgt_len == 0)
    long = ~empty & ((src_len > max_len) | (tgt_len > max_len))
    if (empty | long).all():
        raise DataError(
            f"all {len(out)} training pairs are empty or longer than data.max_len={max_len} "
            f"subwords; raise data.max_len or check the corpus"
        )
    if (empty | long).any():
        out = out.select(np.flatnonzero(~(empty | long)))
    return out, {"empty": int(empty.sum()), "too_long": int(long.sum())}


def _build(entry: Path, source: Source, cfg: DataConfig, root: Path, tok_key: str) -> None:
    """Read the raw corpus (only here: a cache hit never does) in a private scratch folder and encode it."""
    (root / "tmp").mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root / "tmp", ignore_cleanup_errors=True) as scratch:
        workdir = Path(scratch)
        corpus = source.load(workdir)
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
            encoded, counts[name] = encode_split(ds, tokenizer, cfg.max_len, name == "train", workdir, name)
            with quiet_datasets():
                encoded.save_to_disk(str(entry / "splits" / name))
            pairs[name] = len(encoded)
        stats = {
            "pairs": pairs,
            "dropped": counts["train"],
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
    learns = getattr(source, "train_fingerprint", source.fingerprint)()  # a test set added learns no BPE again
    tok_key = digest("tokenizer", RECIPE, learns, cfg.vocab_size, cfg.joint_vocab, cfg.src_lang, cfg.tgt_lang)
    key = digest("encoded", VERSION, tok_key, source.fingerprint(), cfg.max_len)
    build = lambda tmp: _build(tmp, source, cfg, root, tok_key)
    entry, hit = cached_entry(root, "corpora", key, build)
    try:
        meta, tokenizer, splits = _load_entry(entry)
    except Exception as err:  # noqa: BLE001 - a damaged entry (torn Arrow file, bad JSON, tokenizer): rebuild it once
        if isinstance(err, DataError) and not isinstance(err, TokenizerError):
            raise
        log.warning("cache entry %s is unreadable (%s); rebuilding it", entry, first_line(err)[:200])
        entry, hit = cached_entry(root, "corpora", key, build, damaged=entry.stat().st_ino)
        meta, tokenizer, splits = _load_entry(entry)
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
    if cut := [f"{n} of {stats['pairs'][name]} {name}" for name, n in stats["truncated"].items() if n]:
        log.warning(
            "%s pairs have a side longer than data.max_len=%d subwords and are cut to it (a cut source is decoded "
            "and scored against its whole reference); raise data.max_len to keep them whole",
            ", ".join(cut),
            cfg.max_len,
        )
    blank = {name: int((np.minimum(*lengths(ds)) == 0).sum()) for name, ds in splits.items() if name != "train"}
    if empty := [f"{n} of {stats['pairs'][name]} {name}" for name, n in blank.items() if n]:
        log.warning(
            "%s pairs have an empty source or reference; they are kept and scored as sacreBLEU scores them (an empty "
            "source translates to an empty line, an empty reference counts the whole translation against it): "
            "check that the corpus files are aligned",
            ", ".join(empty),
        )
    for got in sorted({stats["vocab"]["src"], stats["vocab"]["tgt"]} - {cfg.vocab_size}):  # BPE stops silently
        why = "fewer: it has no more merges" if got < cfg.vocab_size else "more: its alphabet is larger"
        log.info(  # a status line, not a warning: the default run on the built-in task asks for more than it has
            "data.vocab_size=%d: BPE on this corpus makes %d subwords (specials included), %s; the run trains those "
            "(data.vocab_size=%d asks for exactly them)",
            *(cfg.vocab_size, got, why, got),
        )
    if not meta["test_splits"]:
        log.warning(
            "no test split (test*) in %s: this run is validated on %s but not tested", cfg.source, meta["val_split"]
        )
    return Prepared(tokenizer, splits, meta["val_split"], meta["test_splits"], stats)
