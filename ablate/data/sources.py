"""Corpus sources: where the parallel text comes from, before any tokenisation, and the one error of the data pipeline.

Every source turns into a :class:`Corpus` (one Arrow ``datasets.Dataset`` per split with the string columns ``src``
and ``tgt``, so a WMT-sized corpus stays on disk) and offers a cheap ``fingerprint()`` (the cache key, so a cached
run never reads the text), optionally ``train_fingerprint()`` (the training split's alone: the tokenizer's key, so a
test set added to a corpus does not learn its BPE again) and an expensive ``load(workdir)``. :data:`SOURCES` picks one
from ``data.source``: ``builtin`` (:mod:`ablate.data.builtin`), ``hf:<dataset>[@<revision>][:<config>]``
(:class:`HubDataset`), or else a local folder of line-aligned ``{split}.{lang}[.gz]`` files (:class:`LocalFolder`)."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import logging
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, Protocol

import datasets
import pyarrow.compute as pc
from huggingface_hub.utils import logging as hub_logging

from ablate.config import DataConfig
from ablate.data import builtin
from ablate.errors import AblateError
from ablate.record import VALIDATION_SPLITS
from ablate.registry import register, table
from ablate.utils.io import atomic_write_text, file_sha256


def digest(*parts: object) -> str:
    """A short stable hash of JSON-serialisable parts (the cache key)."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:20]


class DataError(AblateError):
    """A user-facing problem with the corpus or data settings; its message is one actionable line."""


@dataclass
class Corpus:
    """Raw text of every split: ``splits`` (name -> Arrow dataset with string columns ``src``, ``tgt``), the
    validation and (sorted) test split names, and per split the lines that were not valid UTF-8."""

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
        """A stable identifier of the content, cheap (no full read when it can be avoided); an optional
        ``train_fingerprint()`` is the same of the training split alone (else the tokenizer's key is this)."""

    def load(self, workdir: Path) -> Corpus:
        """Read every split into Arrow datasets whose files live under ``workdir``."""


def pick_splits(found: Iterable[str], where: str, listing: str = "") -> tuple[str, list[str]]:
    """The validation split and the test splits among ``found``; DataError (listing what was found,
    ``listing`` or the names) when ``train`` or a validation split is missing."""
    found = sorted(set(found))
    listing = listing or ", ".join(found) or "nothing"
    if "train" not in found:
        raise DataError(f"no 'train' split in {where} (found: {listing}); add a train split")
    val = next((name for name in VALIDATION_SPLITS if name in found), None)
    if val is None:
        raise DataError(
            f"no validation split in {where} (found: {listing}); add one named {' or '.join(VALIDATION_SPLITS)}"
        )
    return val, [name for name in found if name.startswith("test")]


TEXT_FEATURES = datasets.Features({"src": datasets.Value("string"), "tgt": datasets.Value("string")})


def arrow_dataset(
    generator: Callable[..., Iterator[dict]],
    gen_kwargs: dict,
    workdir: Path,
    name: str,
    features: datasets.Features = TEXT_FEATURES,
) -> datasets.Dataset:
    """Stream the rows of ``generator(**gen_kwargs)`` into Arrow files under ``workdir/name``; ``generator``
    at module level and ``gen_kwargs`` plain values (no lists: shards), so ``datasets`` hashes them cheaply."""
    with quiet_datasets():
        return datasets.Dataset.from_generator(
            generator, gen_kwargs=gen_kwargs, features=features, cache_dir=str(workdir / name)
        )


@contextlib.contextmanager
def quiet_datasets() -> Iterator[None]:
    """Silence ``datasets`` progress bars and info logs, and ``huggingface_hub``'s warnings (a retry line per try
    at an unreachable hub), for the duration of a block."""
    bars = datasets.is_progress_bar_enabled()
    level, hub_level = datasets.logging.get_verbosity(), hub_logging.get_verbosity()
    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()
    hub_logging.set_verbosity_error()
    try:
        yield
    finally:
        datasets.logging.set_verbosity(level)
        hub_logging.set_verbosity(hub_level)
        if bars:
            datasets.enable_progress_bars()


log = logging.getLogger(__name__)

_FEATURES = datasets.Features({**TEXT_FEATURES, "undecodable": datasets.Value("bool")})


def _open(path: Path) -> io.BufferedIOBase:
    return gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")


def scan_text(path: Path, split: str) -> tuple[int, str | None]:
    """The lines of a (possibly gzipped) file (a last line without ``\\n`` counts), read once, and what it holds
    that a line-per-sentence file cannot (one line naming the file and what to do), or None: CR-only line ends,
    NUL bytes (a binary or UTF-16 file), or, in a validation or test split, only empty lines."""
    newlines = returns = 0
    nul_line: int | None = None
    words, last = False, b"\n"
    try:
        with _open(path) as f:
            while chunk := f.read(1 << 20):
                if nul_line is None and b"\x00" in chunk:
                    nul_line = newlines + chunk[: chunk.index(b"\x00")].count(b"\n") + 1
                newlines += chunk.count(b"\n")
                returns += chunk.count(b"\r")
                words = words or bool(chunk.strip())
                last = chunk[-1:]
    except (OSError, EOFError, zlib.error) as err:
        raise DataError(f"cannot read {path}: {err}; check that the file is intact") from None
    problem = line_problem(str(path), nul_line, returns, newlines)
    if problem is None and not words and split != "train":
        problem = f"{path} holds only empty lines; a validation or test split needs sentences to score"
    return newlines + (last != b"\n"), problem


def line_problem(where: str, nul_line: int | None, returns: int, newlines: int) -> str | None:
    """Why text (``where``; NUL bytes first at ``nul_line``, ``returns`` CRs, ``newlines`` LFs) cannot be read one
    sentence a line: NUL bytes (a binary or UTF-16 file) or CR-only line ends; None when it can."""
    if nul_line is not None:
        return f"{where} holds NUL bytes (line {nul_line}): is it a binary or UTF-16 file? save it as UTF-8 text"
    if returns > 1 and newlines == 0:
        return f"{where} ends its lines with CR only (old Mac style); convert them to \\n (tr '\\r' '\\n')"
    return None


READER = 2
"""Bump when :func:`decode_line` reads a line differently: it is part of a local folder's fingerprint (2: a BOM
starting any line is dropped, not the first line's alone)."""


def decode_line(raw: bytes) -> tuple[str, bool]:
    """``(text, undecodable)``: UTF-8 with replacement, a leading BOM dropped (any line's: files saved with one and
    joined with ``cat`` hold it mid-file), stripped."""
    try:
        text, bad = raw.decode("utf-8"), False
    except UnicodeDecodeError:
        text, bad = raw.decode("utf-8", errors="replace"), True
    return clean_line(text), bad


def clean_line(text: str) -> str:
    """``text`` as a sentence of a corpus reads: a leading BOM dropped, the spaces around it stripped."""
    return text.strip().removeprefix("\ufeff").strip()


def _rows(src_path: str, tgt_path: str) -> Iterator[dict]:
    with _open(Path(src_path)) as src, _open(Path(tgt_path)) as tgt:
        for raw in zip(src, tgt):
            (a, bad_a), (b, bad_b) = map(decode_line, raw)
            yield {"src": a, "tgt": b, "undecodable": bad_a or bad_b}


def file_digest(path: Path, cache_root: Path) -> str:
    """SHA-256 of the file's bytes, memoised under ``cache_root`` by (path, size, mtime)."""
    stat = path.stat()
    memo = cache_root / "filehash" / digest(str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if memo.is_file():
        return memo.read_text().strip()
    sha = file_sha256(path)
    atomic_write_text(memo, sha)
    return sha


def scan_folder(folder: Path, langs: tuple[str, str]) -> tuple[dict[tuple[str, str], Path], str]:
    """``(split, lang) -> file`` of every ``{split}.{lang}[.gz]`` file of ``folder`` in a language of ``langs`` (an
    uncompressed copy wins over a ``.gz`` one), and a listing of all its ``{split}.{lang}`` files for errors."""
    found: dict[tuple[str, str], Path] = {}
    names = []
    for path in sorted(folder.iterdir()):
        name = path.name[:-3] if path.name.endswith(".gz") else path.name
        split, dot, lang = name.rpartition(".")
        if not path.is_file() or not dot or not split:
            continue
        names.append(path.name)
        if lang in langs and ((split, lang) not in found or found[(split, lang)].name.endswith(".gz")):
            found[(split, lang)] = path
    listing = ", ".join(names[:12]) + (f", ... ({len(names)} files)" if len(names) > 12 else "") or "no files"
    return found, listing


def scored_split(cfg: DataConfig) -> tuple[str, list[str]]:
    """What ``ablate evaluate`` scores of the folder ``cfg.source`` without ``--split``, and the other test sets there:
    its first test set (``test*``) of the language pair, else its validation split. Needs no train split; a test set
    of another pair is not one. DataError listing the folder's splits when it has neither."""
    folder, langs = Path(cfg.source).expanduser(), (cfg.src_lang, cfg.tgt_lang)
    found, listing = scan_folder(folder, langs)
    complete = sorted({split for split, _ in found if all((split, lang) in found for lang in langs)})
    tests = [split for split in complete if split.startswith("test")]
    if tests:
        return tests[0], tests[1:]
    val = next((name for name in VALIDATION_SPLITS if name in complete), None)
    if val is not None:
        return val, []
    pair = "-".join(langs)
    holds = f"its {pair} splits: {', '.join(complete)}" if complete else f"found: {listing}"
    raise DataError(f"no test set (test*) or validation split of {pair} in {folder} ({holds}); pass --split NAME")


class LocalFolder:
    """``data.source=/path/to/folder``: line-aligned ``{split}.{lang}[.gz]`` files (the Moses/fairseq layout).

    The folder holds ``train``, a validation split (``val``, ``valid`` or ``dev``) and any splits named
    ``test*``, one file per language each. Lines are split on ``\\n`` only (never on Unicode line separators,
    which would break alignment), decoded as UTF-8 with ``errors='replace'`` (lines that needed it are counted
    and logged), and stripped. The fingerprint is each file's SHA-256, memoised by (path, size, mtime). ``only``
    names one split to read alone, whatever its name (``ablate evaluate --split``): no other split is needed."""

    def __init__(self, cfg: DataConfig, cache_root: Path, only: str | None = None):
        self.folder = Path(cfg.source).expanduser()
        self.langs = (cfg.src_lang, cfg.tgt_lang)
        self.cache_root = cache_root
        if not self.folder.is_dir():
            head, at, _ = cfg.source.rpartition("@")
            if at and Path(head).expanduser().is_dir():  # a revision is the hub's (hf:<dataset>@<rev>)
                raise DataError(f"data.source={cfg.source!r}: a local folder takes no @<revision>; give {head!r}")
            raise DataError(
                f"data.source={cfg.source!r} is not a folder; give 'builtin', 'hf:<dataset>[:<config>]' "
                f"or a folder of {{split}}.{{lang}}[.gz] files"
            )
        self.files, self.val_split, self.test_splits = self._discover(only)

    def _discover(self, only: str | None = None) -> tuple[dict[str, tuple[Path, Path]], str, list[str]]:
        """split -> (source file, target file) for train, the validation split and test splits (or ``only``); the
        validation split and the test splits."""
        found, listing = scan_folder(self.folder, self.langs)
        pair = "-".join(self.langs)
        splits = {split for split, _ in found}
        if only:  # read alone: the folder's other splits, complete or not, are none of its business
            if only not in splits:
                raise DataError(f"no split '{only}' in {self.folder} for {pair} (found: {listing})")
            return {only: self._pair_files(found, only)}, only, []
        for split in sorted(name for name in splits if name.startswith("test")):
            lacking = [lang for lang in self.langs if (split, lang) not in found]
            if lacking:  # a multilingual folder's test set of another pair (Multi30k's)
                path = self.folder / f"{split}.{lacking[0]}"
                log.warning("%s[.gz] is missing: %s is not a test set of %s, so it is left out", path, split, pair)
                splits.discard(split)
        val, tests = pick_splits(splits, f"{self.folder} for {pair}", listing)
        return {split: self._pair_files(found, split) for split in ["train", val, *tests]}, val, tests

    def _pair_files(self, found: dict[tuple[str, str], Path], split: str) -> tuple[Path, Path]:
        """The source and target file of ``split``; DataError naming the one that is missing."""
        for lang in self.langs:
            if (split, lang) not in found:
                raise DataError(
                    f"missing language file {self.folder / f'{split}.{lang}'}[.gz] "
                    f"(the '{split}' split needs one file per language: {'-'.join(self.langs)})"
                )
        return found[(split, self.langs[0])], found[(split, self.langs[1])]

    def fingerprint(self, splits: list[str] | None = None) -> str:
        """Of every split's files, or of ``splits`` alone."""
        files = [
            (split, src.name, tgt.name, file_digest(src, self.cache_root), file_digest(tgt, self.cache_root))
            for split in splits or sorted(self.files)
            for src, tgt in [self.files[split]]
        ]
        return digest("local", READER, self.langs, files)

    def train_fingerprint(self) -> str:
        """The fingerprint of the ``train`` files alone: what the tokenizer learns from."""
        return self.fingerprint(["train"])

    def load(self, workdir: Path) -> Corpus:
        """Check alignment of every split, then stream each split into Arrow files."""
        splits, undecodable = self.read(workdir)
        return Corpus(splits, self.val_split, self.test_splits, undecodable)

    def read(self, workdir: Path) -> tuple[dict[str, datasets.Dataset], dict[str, int]]:
        """Every split (checked all before any is converted) as Arrow files, and its count of undecodable lines."""
        for split, (src, tgt) in self.files.items():  # all checks before any (slow) conversion
            (n_src, src_problem), (n_tgt, tgt_problem) = scan_text(src, split), scan_text(tgt, split)
            if n_src == n_tgt == 0:
                raise DataError(f"empty corpus files {src} and {tgt}; a split needs at least one sentence pair")
            if src_problem or tgt_problem:  # a UTF-16 or CR-only file also counts its lines wrong: the cause first
                raise DataError(src_problem or tgt_problem)
            if n_src != n_tgt:
                raise DataError(
                    f"misaligned corpus: {src} has {n_src} lines but {tgt} has {n_tgt} lines; "
                    f"the files of a split must have one line per sentence pair"
                )
        splits, undecodable = {}, {}
        for split, (src, tgt) in self.files.items():
            ds = arrow_dataset(_rows, {"src_path": str(src), "tgt_path": str(tgt)}, workdir, split, _FEATURES)
            undecodable[split] = int(pc.sum(ds.data.column("undecodable")).as_py() or 0)
            if undecodable[split]:
                log.warning(
                    "%d lines of %s/%s were not valid UTF-8; bad bytes were replaced by U+FFFD",
                    undecodable[split],
                    src.parent,
                    split,
                )
            splits[split] = ds.remove_columns("undecodable")
        return splits, undecodable


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}".strip(": ")


def canonical_split(name: str) -> str | None:
    """Hub split name -> ours (``validation`` -> ``val``); ``None`` for splits we do not use."""
    if name == "train" or name.startswith("test"):
        return name
    return "val" if name in VALIDATION_SPLITS else None


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
    """``hf:<dataset>[@<revision>][:<config>]`` (or ``...:<config>@<revision>``) -> (dataset, config, revision);
    a local folder takes no revision. Malformed: one-line DataError."""
    spec = source[len("hf:") :]
    name, _, config = spec.partition(":")
    if name and Path(name).expanduser().is_dir():  # Path("") is the current folder
        if "@" in config:
            raise DataError(f"data.source={source!r}: a revision pins a hub dataset; the folder {name} has none")
        return name, config, None
    name, *revisions = name.split("@", 1)
    config, *config_revision = config.split("@", 1)
    revisions += config_revision
    if not name:
        raise DataError(
            f"data.source={source!r} names no dataset (hf:OWNER/NAME, e.g. hf:bentrevett/multi30k); {USAGE}"
        )
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
    """``data.source=hf:<dataset>[@<revision>][:<config>]``: a Hugging Face translation dataset.

    ``@<revision>`` pins a commit (or branch or tag) for ``load_dataset(revision=...)``; the run records the
    dataset, config, revision and the commit the hub served (null when it did not answer). Columns: one per
    language (``bentrevett/multi30k``) or a ``translation`` column of ``{lang: text}`` (``wmt14``). Split names:
    ``validation``/``valid``/``dev`` -> ``val``, ``test*`` kept. ``<dataset>`` may be a local folder in the hub's
    file layout (``data/train-*.parquet``), for where the hub is unreachable. The fingerprint is the loaded
    datasets' own."""

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
                f"cannot load hub dataset '{self.name}'{at} ({_first_line(err)}), nor a folder from {Path.cwd()}; "
                "if the hub is unreachable, "
                f"download it elsewhere and pass its folder (data.source=hf:/path/to/folder) or a folder "
                f"of {{split}}.{{lang}} files (data.source=/path/to/folder)"
            ) from None
        pick_splits([canonical_split(s) or s for s in loaded], f"hub dataset '{self.name}'", ", ".join(loaded))
        splits: dict[str, datasets.Dataset] = {}
        for name, ds in loaded.items():
            if (ours := canonical_split(name)) is not None:
                splits.setdefault(ours, ds)
        self._splits = splits
        if not local:
            self.commit = served_commit(self.name, self.revision)
        return splits

    def fingerprint(self, names: list[str] | None = None) -> str:
        """The loaded splits' own fingerprints (of ``names`` alone, if given)."""
        splits = self._load()
        pinned = [self.revision] if self.revision else []  # unpinned runs keep their cache keys
        names = names or sorted(splits)
        return digest("hf", self.name, self.config, *pinned, self.langs, [(n, splits[n]._fingerprint) for n in names])

    def train_fingerprint(self) -> str:
        """The fingerprint of the ``train`` split alone: what the tokenizer learns from."""
        return self.fingerprint(["train"])

    def provenance(self) -> dict[str, str | None]:
        """What the run records of its data: the dataset, its config, the revision asked for and the commit
        the hub served (``None`` for a local folder, or when the hub did not say); a local folder's absolute path as
        ``folder``, so that ``ablate evaluate`` from elsewhere can say where a relative one was."""
        path = Path(self.name).expanduser()
        folder = {"folder": str(path.resolve())} if self.name and path.is_dir() else {}
        record = {"dataset": self.name, "config": self.config or None, "revision": self.revision}
        return record | {"commit": self.commit} | folder

    def load(self, workdir: Path) -> Corpus:
        splits = {
            name: text_columns(ds, *self.langs, f"hub dataset '{self.name}' split '{name}'")
            for name, ds in self._load().items()
        }
        tests = sorted(name for name in splits if name.startswith("test"))
        return Corpus(splits, "val", tests)


SOURCES: dict[str, type] = table("source")
"""Source kind -> source class, filled by ``@register("source", kind)``. ``data.source`` names a kind by
itself (``builtin``) or as a prefix (``hf:<dataset>``); anything else is a folder (``local``). A new
source is one class with ``(cfg, cache_root)``, ``fingerprint()`` and ``load(workdir)``; an optional
``train_fingerprint()`` keys the tokenizer by the training split alone, and an optional ``provenance()`` dict (the
hub's dataset, config and revision) is recorded as the run's ``data.source``."""


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

    def train_fingerprint(self) -> str:
        """The fingerprint of the training pairs alone (``data.builtin_eval_pairs`` left out)."""
        return digest("builtin", builtin.VERSION, self.sizes["train"], self.swap)

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
    """The :data:`SOURCES` kind of a ``data.source`` value: a kind by itself or before a colon, else a path."""
    prefix = source.partition(":")[0]
    return prefix if prefix in SOURCES and prefix != FALLBACK else FALLBACK


def make_source(cfg: DataConfig, cache_root: Path) -> Source:
    """The :class:`Source` that ``cfg.source`` names (``builtin``, ``hf:...`` or a folder)."""
    if cfg.src_lang == cfg.tgt_lang:
        raise DataError(f"data.src_lang and data.tgt_lang are both '{cfg.src_lang}'; pick two languages")
    return SOURCES[source_kind(cfg.source)](cfg, cache_root)
