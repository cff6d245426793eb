"""A local folder of line-aligned text files, ``{split}.{lang}`` or ``{split}.{lang}.gz``.

This is the Moses/fairseq layout (e.g. ``train.en.gz``, ``val.de``, ``test_2016_flickr.en``).
The folder must hold ``train``, a validation split (``val``, ``valid`` or ``dev``) and may hold
any number of splits whose name starts with ``test``; each split needs one file per language.

Decoding policy: lines are split on ``\\n`` only (never on Unicode line separators, which would
break alignment), decoded as UTF-8 with ``errors='replace'`` (an undecodable byte becomes
U+FFFD), and stripped of surrounding whitespace. The number of lines (either side) that needed a
replacement is counted per split, logged, and reported in ``Corpus.undecodable``.

The content fingerprint is a SHA-256 of each file's bytes, streamed; it is memoised under the
cache root by (path, size, mtime), so a cached run does not re-read GB-sized files.
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import zlib
from pathlib import Path
from typing import BinaryIO, Iterator

import datasets
import pyarrow.compute as pc

from ablate.config import DataConfig
from ablate.data.cache import digest
from ablate.data.corpus import VAL_NAMES, Corpus, arrow_dataset, pick_splits
from ablate.data.errors import DataError
from ablate.utils.io import atomic_write_text

log = logging.getLogger(__name__)

_FEATURES = datasets.Features(
    {
        "src": datasets.Value("string"),
        "tgt": datasets.Value("string"),
        "undecodable": datasets.Value("bool"),
    }
)


def _open(path: Path) -> BinaryIO:
    return gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")


def count_lines(path: Path) -> int:
    """Lines in a (possibly gzipped) file; a last line without ``\\n`` counts."""
    lines, last = 0, b"\n"
    try:
        with _open(path) as f:
            while chunk := f.read(1 << 20):
                lines += chunk.count(b"\n")
                last = chunk[-1:]
    except (OSError, EOFError, zlib.error) as err:
        raise DataError(f"cannot read {path}: {err}; check that the file is intact") from None
    return lines + (last != b"\n")


def check_text(path: Path, split: str) -> None:
    """Refuse what a line-per-sentence text file cannot be: CR-only line ends (read as one long line),
    NUL bytes (a binary or UTF-16 file), and a validation or test split of only empty lines.

    Raises:
        DataError: one line naming the file and what to do.
    """
    newlines = returns = 0
    nul_line: int | None = None
    words = False
    with _open(path) as f:
        while chunk := f.read(1 << 20):
            if nul_line is None and b"\x00" in chunk:
                nul_line = newlines + chunk[: chunk.index(b"\x00")].count(b"\n") + 1
            newlines += chunk.count(b"\n")
            returns += chunk.count(b"\r")
            words = words or bool(chunk.strip())
    if nul_line is not None:
        raise DataError(
            f"{path} holds NUL bytes (line {nul_line}): is it a binary or UTF-16 file? save it as UTF-8 text"
        )
    if returns > 1 and newlines == 0:
        raise DataError(f"{path} ends its lines with CR only (old Mac style); convert them to \\n (tr '\\r' '\\n')")
    if not words and split != "train":
        raise DataError(f"{path} holds only empty lines; a validation or test split needs sentences to score")


def decode_line(raw: bytes) -> tuple[str, bool]:
    """``(text, undecodable)``: UTF-8 with replacement, stripped."""
    try:
        return raw.decode("utf-8").strip(), False
    except UnicodeDecodeError:
        return raw.decode("utf-8", errors="replace").strip(), True


def _rows(src_path: str, tgt_path: str) -> Iterator[dict]:
    with _open(Path(src_path)) as src, _open(Path(tgt_path)) as tgt:
        for i, (a, b) in enumerate(zip(src, tgt)):
            (a, bad_a), (b, bad_b) = decode_line(a), decode_line(b)
            if i == 0:
                a, b = a.lstrip("\ufeff"), b.lstrip("\ufeff")
            yield {"src": a, "tgt": b, "undecodable": bad_a or bad_b}


def file_digest(path: Path, cache_root: Path) -> str:
    """SHA-256 of the file's bytes, memoised under ``cache_root`` by (path, size, mtime)."""
    stat = path.stat()
    memo = cache_root / "filehash" / digest(str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if memo.is_file():
        return memo.read_text().strip()
    sha = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            sha.update(chunk)
    atomic_write_text(memo, sha.hexdigest())
    return sha.hexdigest()


class LocalFolder:
    """``data.source=/path/to/folder``: see the module docstring."""

    def __init__(self, cfg: DataConfig, cache_root: Path):
        self.folder = Path(cfg.source).expanduser()
        self.langs = (cfg.src_lang, cfg.tgt_lang)
        self.cache_root = cache_root
        if not self.folder.is_dir():
            raise DataError(
                f"data.source={cfg.source!r} is not a folder; give 'builtin', 'hf:<dataset>[:<config>]' "
                f"or a folder of {{split}}.{{lang}}[.gz] files"
            )
        self.files = self._discover()

    def _discover(self) -> dict[str, tuple[Path, Path]]:
        """split -> (source file, target file) for train, the validation split and test splits."""
        found: dict[tuple[str, str], Path] = {}
        names = []
        for path in sorted(self.folder.iterdir()):
            name = path.name[:-3] if path.name.endswith(".gz") else path.name
            split, dot, lang = name.rpartition(".")
            if not path.is_file() or not dot or not split:
                continue
            names.append(path.name)
            if lang in self.langs and ((split, lang) not in found or found[(split, lang)].name.endswith(".gz")):
                found[(split, lang)] = path  # an uncompressed copy wins over a .gz one
        pair = "-".join(self.langs)
        listing = ", ".join(names[:12]) + (f", ... ({len(names)} files)" if len(names) > 12 else "") or "no files"
        val, tests = pick_splits({split for split, _ in found}, f"{self.folder} for {pair}", listing)
        files = {}
        for split in ["train", val, *tests]:
            for lang in self.langs:
                if (split, lang) not in found:
                    raise DataError(
                        f"missing language file {self.folder / f'{split}.{lang}'}[.gz] "
                        f"(the '{split}' split needs one file per language: {pair})"
                    )
            files[split] = (found[(split, self.langs[0])], found[(split, self.langs[1])])
        return files

    @property
    def val_split(self) -> str:
        return next(name for name in VAL_NAMES if name in self.files)

    def fingerprint(self) -> str:
        return digest(
            "local",
            self.langs,
            [
                (split, src.name, tgt.name, file_digest(src, self.cache_root), file_digest(tgt, self.cache_root))
                for split, (src, tgt) in sorted(self.files.items())
            ],
        )

    def load(self, workdir: Path) -> Corpus:
        """Check alignment of every split, then stream each split into Arrow files."""
        for split, (src, tgt) in self.files.items():  # all checks before any (slow) conversion
            n_src, n_tgt = count_lines(src), count_lines(tgt)
            if n_src != n_tgt:
                raise DataError(
                    f"misaligned corpus: {src} has {n_src} lines but {tgt} has {n_tgt} lines; "
                    f"the files of a split must have one line per sentence pair"
                )
            if n_src == 0:
                raise DataError(f"empty corpus files {src} and {tgt}; a split needs at least one sentence pair")
            check_text(src, split)
            check_text(tgt, split)
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
        tests = [name for name in self.files if name.startswith("test")]
        return Corpus(splits, self.val_split, sorted(tests), undecodable)
