"""Small parallel-corpus folders: lines read from (gzipped) Multi30k files, written as plain or ``.gz`` files."""

from __future__ import annotations

import gzip
import itertools
from pathlib import Path


def read_lines(path: Path, n: int) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in itertools.islice(f, n)]


def write_lines(path: Path, lines: list[str]) -> None:
    data = "".join(line + "\n" for line in lines).encode()
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(data))
    else:
        path.write_bytes(data)


def make_folder(tmp_path: Path, files: dict[str, list[str]]) -> Path:
    """A corpus folder holding ``files`` (name -> lines)."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    for name, lines in files.items():
        write_lines(folder / name, lines)
    return folder
