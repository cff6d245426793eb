"""What ``ablate translate`` and ``ablate evaluate`` accept: the training's line rules and sane decoding values.

Sentences are read as training reads a corpus (:func:`ablate.data.local.decode_line`): one per
``\\n``-ended line (a ``\\r\\n`` ending too, never U+2028, U+0085 or a form feed, which
``str.splitlines`` would cut at), a leading byte-order mark dropped, surrounding whitespace
stripped. Unlike a corpus, where a stray byte is one replaced sentence among thousands, text to
translate must be UTF-8: anything else is refused with the line, never translated as garbage.
"""

from __future__ import annotations

import math
from typing import Optional

from ablate.data.local import decode_line
from ablate.errors import AblateError, did_you_mean

CHECKPOINTS = ("best", "last")
"""The checkpoints a run folder holds (``checkpoints/<name>.ckpt``)."""


class InputError(AblateError):
    """Text or an option ``translate`` / ``evaluate`` cannot use; the message names it."""


def read_sentences(raw: bytes, where: str) -> list[str]:
    """The sentences of ``raw`` (the bytes of a file or of stdin, named ``where`` in errors).

    Raises:
        InputError: a line is not UTF-8, naming its number, the byte and its column.
    """
    if not raw:
        return []
    lines = raw.removesuffix(b"\n").split(b"\n")
    out = []
    for number, line in enumerate(lines, 1):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as err:
            raise InputError(
                f"{where} line {number} is not UTF-8 text (byte {line[err.start]:#04x} at column {err.start + 1}); "
                f"save it as UTF-8 (e.g. iconv -f latin1 -t utf-8)"
            ) from None
        text, _ = decode_line(line)
        out.append(text.lstrip("\ufeff") if number == 1 else text)
    return out


def check_decoding(beam: Optional[int], len_penalty: Optional[float]) -> None:
    """``--beam`` at least 1 and a finite, non-negative ``--len-penalty`` (when given).

    Raises:
        InputError: naming the option and its value.
    """
    if beam is not None and beam < 1:
        raise InputError(f"--beam {beam} must be at least 1 (1 is greedy decoding)")
    if len_penalty is not None and not (math.isfinite(len_penalty) and len_penalty >= 0):
        raise InputError(f"--len-penalty {len_penalty} must be a finite number, 0 or more")


def check_checkpoint(name: str) -> str:
    """``name`` when it is one of :data:`CHECKPOINTS`.

    Raises:
        InputError: any other name, with the closest valid one.
    """
    if name not in CHECKPOINTS:
        raise InputError(
            f"--checkpoint {name!r} is not a checkpoint name{did_you_mean(name, CHECKPOINTS, cutoff=0.5)} "
            f"(choose from: {', '.join(CHECKPOINTS)})"
        )
    return name
