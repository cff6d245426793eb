"""Use a trained run: translate new text, score any test set (``ablate translate`` / ``evaluate``).

The checks of their input live here, where importing them costs no torch: a bad ``--beam`` or
``--checkpoint`` is refused before the model code loads."""

from __future__ import annotations

import gzip
import math
import zlib
from typing import Optional

from ablate.errors import AblateError, did_you_mean

GZIP_MAGIC = b"\x1f\x8b"
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
CHECKPOINTS = ("best", "last")
"""The checkpoints a run folder holds (``checkpoints/<name>.ckpt``)."""


class InputError(AblateError):
    """Text or an option ``translate`` / ``evaluate`` cannot use; the message names it."""


def read_sentences(raw: bytes, where: str) -> list[str]:
    """The sentences of ``raw`` (a file's or stdin's bytes, named ``where`` in errors), read as training reads a
    corpus (:func:`ablate.data.sources.decode_line`): one per ``\\n``-ended line (``\\r\\n`` too; never U+2028,
    U+0085 or a form feed, which ``str.splitlines`` would cut at), a BOM starting a line dropped, whitespace stripped.
    Unlike a corpus, text to translate must be UTF-8: InputError names the line, the byte and its column; NUL bytes
    (UTF-16) and CR-only line ends are refused as in a corpus (:func:`~ablate.data.sources.line_problem`). Gzipped
    bytes (``test.en.gz``, as a corpus holds them) are read uncompressed."""
    from ablate.data.sources import decode_line, line_problem

    if raw[:2] == GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as err:
            raise InputError(f"{where} is a damaged gzip file ({err}); check that it is intact") from None
    if not raw:
        return []
    lines = raw.removesuffix(b"\n").split(b"\n")
    out = []
    for number, line in enumerate(lines, 1):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as err:
            code = "utf-16" if raw[:2] in UTF16_BOMS else "latin1"
            raise InputError(
                f"{where} line {number} is not UTF-8 text (byte {line[err.start]:#04x} at column {err.start + 1}); "
                f"save it as UTF-8 (e.g. iconv -f {code} -t utf-8)"
            ) from None
        out.append(decode_line(line)[0])
    nul = raw.find(b"\x00")
    if problem := line_problem(
        where, raw[:nul].count(b"\n") + 1 if nul >= 0 else None, raw.count(b"\r"), raw.count(b"\n")
    ):
        raise InputError(problem)
    return out


def check_decoding(beam: Optional[int], len_penalty: Optional[float]) -> None:
    """InputError unless ``--beam`` is a whole number, at least 1, and ``--len-penalty`` finite and non-negative
    (when given; from Python, ``beam=2.5`` would fail deep in the beam search)."""
    if beam is not None and (isinstance(beam, bool) or not isinstance(beam, int)):
        raise InputError(f"--beam {beam} must be a whole number, at least 1 (1 is greedy decoding)")
    if beam is not None and beam < 1:
        raise InputError(f"--beam {beam} must be at least 1 (1 is greedy decoding)")
    if len_penalty is not None and not (math.isfinite(len_penalty) and len_penalty >= 0):
        raise InputError(f"--len-penalty {len_penalty} must be a finite number, 0 or more")


def check_checkpoint(name: str) -> str:
    """``name`` when it is one of :data:`CHECKPOINTS`, else InputError with the closest valid one."""
    if name not in CHECKPOINTS:
        raise InputError(
            f"--checkpoint {name!r} is not a checkpoint name{did_you_mean(name, CHECKPOINTS, cutoff=0.5)} "
            f"(choose from: {', '.join(CHECKPOINTS)})"
        )
    return name
