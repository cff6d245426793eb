"""Subword segmentation: byte-pair encoding (Sennrich et al. 2016) with HF ``tokenizers``.

NFKC normalisation, a Metaspace pre-tokenizer (spaces become ``▁``) then a punctuation split (``Hund.`` and
``Hund`` share ``▁Hund``; no space is invented), and the Metaspace decoder, so ``decode(encode(text)) ==
text`` for NFKC-normal text. One joint vocabulary over both languages by default (``data.joint_vocab``;
shared embeddings need it). Special ids are fixed: pad=0, bos=1, eos=2, unk=3."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import datasets
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from ablate.data.sources import DataError
from ablate.errors import first_line
from ablate.utils.io import atomic_write_text, read_json

SPECIALS = ("<pad>", "<s>", "</s>", "<unk>")
PAD, BOS, EOS, UNK = range(4)
RECIPE = 2
"""Bump when the tokenizer recipe changes: it is part of the cache key."""
BATCH = 1000


def train_bpe(texts: Iterator[list[str]], vocab_size: int, length: int | None = None) -> Tokenizer:
    """Learn a BPE model from batches of sentences (streamed, never all in memory)."""
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [  # "▁word" pieces, then punctuation split off
            pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always"),
            pre_tokenizers.Punctuation(behavior="isolated"),
        ]
    )
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=list(SPECIALS), limit_alphabet=1000, show_progress=False
    )
    tok.train_from_iterator(texts, trainer=trainer, length=length)
    for i, special in enumerate(SPECIALS):
        assert tok.token_to_id(special) == i, f"special {special} has id {tok.token_to_id(special)}"
    return tok


def _batches(ds: datasets.Dataset, columns: Sequence[str]) -> Iterator[list[str]]:
    for batch in ds.select_columns(list(columns)).iter(batch_size=BATCH):
        for column in columns:
            yield [text or "" for text in batch[column]]


class SubwordTokenizer:
    """Source and target BPE segmentation with fixed special ids (``pad_id``, ``bos_id``, ``eos_id``, ``unk_id``);
    ``joint``: one vocabulary for both sides; ``src_vocab_size``, ``tgt_vocab_size`` count the specials."""

    pad_id, bos_id, eos_id, unk_id = PAD, BOS, EOS, UNK

    def __init__(self, src: Tokenizer, tgt: Tokenizer | None = None):
        self._src = src
        self._tgt = tgt if tgt is not None else src
        self.joint = tgt is None or tgt is src
        self.src_vocab_size, self.tgt_vocab_size = src.get_vocab_size(), self._tgt.get_vocab_size()

    @classmethod
    def train(cls, train: datasets.Dataset, vocab_size: int, joint: bool = True) -> SubwordTokenizer:
        """Learn BPE on the ``src``/``tgt`` columns of the training split, streamed in batches."""
        if joint:
            return cls(train_bpe(_batches(train, ["src", "tgt"]), vocab_size, 2 * len(train)))
        return cls(
            train_bpe(_batches(train, ["src"]), vocab_size, len(train)),
            train_bpe(_batches(train, ["tgt"]), vocab_size, len(train)),
        )

    def encode_src(self, texts: list[str]) -> list[list[int]]:
        """Subword ids of each text, without special tokens."""
        return [e.ids for e in self._src.encode_batch(texts, add_special_tokens=False)]

    def encode_tgt(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self._tgt.encode_batch(texts, add_special_tokens=False)]

    @staticmethod
    def _strip(ids: Iterable[int]) -> list[int]:
        """``ids`` up to the first eos, without pad and bos."""
        return [i for i in itertools.takewhile(lambda i: i != EOS, map(int, ids)) if i >= UNK]

    def decode_tgt(self, ids: Iterable[int]) -> str:
        """Detokenized text of ``ids`` (a list or 1-D tensor): stops at eos, drops pad and bos; unknown pieces
        come out as ``<unk>``."""
        return self._tgt.decode(self._strip(ids), skip_special_tokens=False)

    def decode_src(self, ids: Iterable[int]) -> str:
        return self._src.decode(self._strip(ids), skip_special_tokens=False)

    def vocabularies(self) -> list[dict[str, int]]:
        """The token -> id map of each vocabulary: one when joint, else the source's and the target's."""
        return [self._src.get_vocab()] if self.joint else [self._src.get_vocab(), self._tgt.get_vocab()]

    def to_json(self) -> tuple[str, str]:
        """The source and the target tokenizer as HF ``tokenizers`` JSON (the same text twice when joint)."""
        return self._src.to_str(), self._tgt.to_str()

    def save(self, folder: str | Path) -> None:
        """Write the files :meth:`load` reads, each atomically: a link a received run folder holds in its place is
        replaced, never written through."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(folder / ("joint.json" if self.joint else "src.json"), self._src.to_str(pretty=True))
        if not self.joint:
            atomic_write_text(folder / "tgt.json", self._tgt.to_str(pretty=True))
        atomic_write_text(folder / "tokenizer.json", json.dumps({"joint": self.joint, "recipe": RECIPE}))

    @classmethod
    def load(cls, folder: str | Path) -> SubwordTokenizer:
        """The tokenizer :meth:`save` wrote into ``folder``; TokenizerError when a file is missing, truncated, not
        JSON, or JSON of another shape."""
        folder = Path(folder)
        try:
            meta = read_json(folder / "tokenizer.json")
            joint = meta["joint"]
            if not isinstance(joint, bool):
                raise TypeError(f"'joint' is {joint!r}, not true or false")
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise TokenizerError(f"{folder / 'tokenizer.json'} is damaged ({_reason(err)}); {_FIX}") from None
        if joint:
            return cls(_read(folder / "joint.json"))
        return cls(_read(folder / "src.json"), _read(folder / "tgt.json"))


class TokenizerError(DataError):
    """A saved tokenizer that cannot be read back; the message names the file."""


_FIX = "restore the run's tokenizer/ folder from a copy, or train the run again"


def _reason(err: BaseException) -> str:
    return f"no {err} entry" if isinstance(err, KeyError) else first_line(err)[:160]


def _read(path: Path) -> Tokenizer:
    """One saved ``tokenizers`` model; anything it cannot parse (truncated, not JSON, another shape) is one line."""
    if not path.is_file():
        raise TokenizerError(f"{path} is missing; {_FIX}")
    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as err:  # noqa: BLE001 - the Rust parser raises a bare Exception for every kind of damage
        raise TokenizerError(f"{path} is damaged ({_reason(err)}); {_FIX}") from None
    for i, special in enumerate(SPECIALS):
        if tok.token_to_id(special) != i:
            raise TokenizerError(f"{path} is not an ablate tokenizer ({special} is not id {i}); {_FIX}")
    return tok
