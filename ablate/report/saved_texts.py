"""The texts a run saves beside its record (``hyps/``, ``refs/``, ``sources/``, one sentence a line),
and the report's one user error, :class:`ReportError`.

Each split is ``<split>.txt``, or ``<split>.txt.gz`` as ``ablate export`` ships it. A file that is
not UTF-8, a torn ``.gz``, or a split saved twice with different content is a :class:`TextError`
naming the file, so the table lists the trial with that reason instead of testing other texts.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

from ablate.errors import AblateError
from ablate.utils.io import read_lines, split_lines


class ReportError(AblateError):
    """A user-facing report mistake (bad source, nothing to tabulate); one actionable line."""


class TextError(ReportError):
    """A saved text (hypotheses, references, sources) that cannot be read as the run wrote it."""


def read_texts(folder: Path) -> dict[str, list[str]]:
    """``<split>.txt`` files, or gzip'd ``<split>.txt.gz`` (as ``ablate export`` ships them), as lines;
    only newlines end a line (a hypothesis may hold other Unicode line separators), so line i is
    always the i-th sentence.

    Raises:
        TextError: a file is not UTF-8 text or a torn ``.gz``, or a split has both a ``.txt`` and a
            ``.txt.gz`` that differ (which is the run's output cannot be told).
    """
    if not folder.is_dir():
        return {}
    texts: dict[str, list[str]] = {}
    names = [entry.name for entry in os.scandir(folder)]  # one listing (a glob per pattern lists it again)
    gzipped, plain = sorted(n for n in names if n.endswith(".txt.gz")), sorted(n for n in names if n.endswith(".txt"))
    for path in [folder / n for n in gzipped + plain]:
        where = f"{folder.name}/{path.name}"
        try:
            if path.name.endswith(".gz"):
                split, lines = (
                    path.name[: -len(".txt.gz")],
                    split_lines(gzip.decompress(path.read_bytes()).decode("utf-8")),
                )
            else:
                split, lines = path.stem, read_lines(path)
        except UnicodeDecodeError as err:
            raise TextError(f"{where} is not UTF-8 text (byte {err.start})") from None
        except (OSError, ValueError, EOFError) as err:  # a torn .gz
            raise TextError(
                f"{where} is unreadable: {str(err).splitlines()[0] if str(err) else type(err).__name__}"
            ) from None
        if split in texts and texts[split] != lines:
            raise TextError(f"{where} and {where}.gz both exist and differ; keep the run's own and remove the other")
        texts[split] = lines
    return texts
