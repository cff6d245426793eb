"""BLEU (Papineni et al. 2002) as sacreBLEU computes it, with per-sentence sufficient statistics.

Corpus BLEU is a function of summed per-sentence counts (hypothesis and reference lengths,
matching and total n-grams, n = 1..4): :func:`sentence_stats` counts them as sacreBLEU's
``BLEU.sentence_score`` does, and :func:`bleu_from_stats` equals ``BLEU().corpus_score`` on the same
lines for any (weighted) sum of them.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from typing import Any, Callable, Optional

import numpy as np

from ablate.metrics.scorer import Texts, check_aligned

ORDER = 4  # BLEU's maximum n-gram order


def _bleu(tokenize: Optional[str], **kwargs: Any) -> Any:
    """sacreBLEU's BLEU with ``tokenize`` (None: its default, 13a); an unknown name (an old signature's) falls back."""
    from sacrebleu.metrics import BLEU

    if tokenize:
        try:
            return BLEU(tokenize=tokenize, **kwargs)
        except Exception:  # noqa: BLE001 - an unknown tokenizer name in an old signature
            pass
    return BLEU(**kwargs)


@functools.lru_cache(maxsize=16)
def _signature(tokenize: Optional[str]) -> str:
    """sacreBLEU's signature of BLEU with ``tokenize`` (one per process: a table asks for it per trial)."""
    metric = _bleu(tokenize)
    metric.corpus_score(["x"], [["x"]])  # sacreBLEU signs a metric once it has scored
    return str(metric.get_signature())


def sentence_stats(hyps: Texts, refs: Texts, tokenize: Optional[str] = None) -> np.ndarray:
    """sacreBLEU's per-sentence BLEU statistics, shape (n, 2 + 2·4): hypothesis length, reference
    length, matching n-grams (n = 1..4), hypothesis n-grams (n = 1..4).

    The counts ``BLEU.sentence_score`` (and ``corpus_score``) make, from the metric's tokenizer
    (13a, the default, as :func:`tokenize_13a`) and clipped n-gram matches, with each reference
    set's n-grams computed once per process: a table's trials share their references, so its cost
    is the hypotheses' (a test pins equality with ``sentence_score`` on Multi30k).
    """
    check_aligned(hyps, refs)
    split = _splitter(tokenize)
    references = _reference_ngrams(split, refs)
    rows = []
    for tokens, (ref_ngrams, ref_len) in zip(split(hyps), references):
        hyp_len, shifted = len(tokens), [tokens[i:] for i in range(ORDER)]
        row = [hyp_len, ref_len]
        for n, ref_n in enumerate(ref_ngrams, 1):  # clipped matches: only shared n-grams count
            grams = tokens if n == 1 else list(zip(*shifted[:n]))
            unique = set(grams)
            if len(unique) == len(grams):  # each n-gram once: it matches where the reference has it
                row.append(len(ref_n.keys() & unique))
            else:
                row.append(sum([min(c, ref_n[g]) for g, c in Counter(grams).items() if g in ref_n]))
        rows.append(row + [max(hyp_len - n, 0) for n in range(ORDER)])  # L tokens: L - n + 1 n-grams
    return np.array(rows, dtype=np.float64).reshape(len(hyps), 2 + 2 * ORDER)


def _ngrams(tokens: list[str], n: int) -> Counter:
    """The n-grams of one order and their counts (unigrams as strings, longer ones as tuples)."""
    return Counter(tokens if n == 1 else zip(*(tokens[i:] for i in range(n))))


@functools.lru_cache(maxsize=16)
def _splitter(tokenize: Optional[str]) -> Callable[[Texts], list[list[str]]]:
    """Lines -> each line's tokens as sacreBLEU's BLEU with ``tokenize`` scores it: lowercased if the
    metric is, right-stripped, tokenized (13a by :func:`tokens_13a`, any other by sacreBLEU's tokenizer)."""
    metric = _bleu(tokenize)
    lower = (lambda lines: [line.lower() for line in lines]) if metric.lowercase else list
    if metric.tokenizer.signature() == "13a":
        return lambda lines: tokens_13a(lower(lines))
    return lambda lines: [metric.tokenizer(line.rstrip()).split() for line in lower(lines)]


_PUNCTUATION = re.compile(r"([\{-\~\[-\` -\&\(-\+\:-\@\/])")
"""sacreBLEU's first 13a rule (its ``TokenizerRegexp``): these characters become words of their own."""
_SPACED = str.maketrans({chr(c): f" {chr(c)} " for c in range(128) if _PUNCTUATION.fullmatch(chr(c))})
_SPACED_CHARS = tuple(chr(c) for c in _SPACED if chr(c) != " ")
_CONTEXT_RULES = (
    (re.compile(r"([^0-9])([\.,])"), r"\1 \2 ", ".,"),  # period and comma unless preceded by a digit
    (re.compile(r"([\.,])([^0-9])"), r" \1 \2", ".,"),  # ... unless followed by a digit
    (re.compile(r"([0-9])(-)"), r"\1 \2 ", "-"),  # a dash preceded by a digit
)


def tokenize_13a(line: str) -> str:
    """sacreBLEU's ``13a`` tokenizer (mteval-v13a), the same output: its first rule, which spaces out
    single characters, as one ``str.translate``; a context rule runs only on a line holding its
    characters (it matches nothing otherwise)."""
    line = line.replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
    if "&" in line:
        line = line.replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    line = f" {line} ".translate(_SPACED)
    for pattern, replacement, chars in _CONTEXT_RULES:
        if any(c in line for c in chars):
            line = pattern.sub(replacement, line)
    return " ".join(line.split())


_MARKS = ("..", ".,", ",.", ",,")
_MARKS_ALONE = (
    (re.compile(r"\.(?:(?![0-9])|(?<![0-9]\.))"), " . "),
    (re.compile(r",(?:(?![0-9])|(?<![0-9],))"), " , "),
    (re.compile(r"-(?<=[0-9]-)"), " - "),
)
"""13a's context rules where no period or comma touches another: such a mark becomes a word unless
a digit is on both sides (the two rules' matches cannot overlap then), and a dash after a digit
does. Each pattern starts with its mark, so the search skips from mark to mark."""


def tokens_13a(lines: Texts) -> list[list[str]]:
    """``tokenize_13a(line.rstrip()).split()`` of each line, for all lines at once.

    The lines are joined with `` \\n `` (each keeps the spaces 13a pads it with, so no rule matches
    across two lines) and each rule runs once on the joined text. For the lines where no period or
    comma touches another the rules are ``str.replace`` and :data:`_MARKS_ALONE`, with fixed
    replacements (no Python per match); the others get 13a's rules as they are. A line holding a
    newline (which 13a joins) is tokenized alone."""
    if not lines or any("\n" in line for line in lines):
        return [tokenize_13a(line.rstrip()).split() for line in lines]
    text = (" " + " \n ".join(line.rstrip() for line in lines) + " ").replace("<skipped>", "")
    if "&" in text:
        text = text.replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    if not any(pair in text for pair in _MARKS):
        return _marks_alone(text)
    segments = text.split("\n")  # each " line ", padded as 13a pads it
    touching = [i for i, segment in enumerate(segments) if any(pair in segment for pair in _MARKS)]
    tokens = dict(zip(touching, _context_rules("\n".join(segments[i] for i in touching))))
    alone = [i for i in range(len(segments)) if i not in tokens]
    tokens.update(zip(alone, _marks_alone("\n".join(segments[i] for i in alone)) if alone else []))
    return [tokens[i] for i in range(len(segments))]


def _context_rules(text: str) -> list[list[str]]:
    """Each newline-separated line's words by 13a's rules, run on the whole text."""
    text = text.translate(_SPACED)
    for pattern, replacement, _ in _CONTEXT_RULES:
        text = pattern.sub(replacement, text)
    return [segment.split() for segment in text.split("\n")]


def _marks_alone(text: str) -> list[list[str]]:
    """:func:`_context_rules` of a text in which no period or comma touches another: the same words from
    spaces around each single-character word (a space only adds spaces) and :data:`_MARKS_ALONE` (each
    mark's neighbours stay digits or not)."""
    for char in _SPACED_CHARS:
        if char in text:
            text = text.replace(char, f" {char} ")
    for pattern, replacement in _MARKS_ALONE:
        text = pattern.sub(replacement, text)
    return [segment.split() for segment in text.split("\n")]


_REFERENCES: dict[tuple[Any, ...], list[tuple[list[Counter], int]]] = {}
"""(splitter, references) -> each reference's n-gram counts per order and its length (a few sets at most)."""


def _reference_ngrams(split: Callable[[Texts], list[list[str]]], refs: Texts) -> list[tuple[list[Counter], int]]:
    key = (split, tuple(refs))
    if key not in _REFERENCES:
        if len(_REFERENCES) >= 8:
            _REFERENCES.clear()
        tokenized = split(refs)
        _REFERENCES[key] = [([_ngrams(t, n) for n in range(1, ORDER + 1)], len(t)) for t in tokenized]
    return _REFERENCES[key]


def bleu_from_stats(stats: np.ndarray) -> np.ndarray:
    """Corpus BLEU (sacreBLEU's default: ``exp`` smoothing, order 4) from summed statistics.

    Args:
        stats: (..., 10) summed sufficient statistics (see :func:`sentence_stats`).

    Returns:
        (...) BLEU in [0, 100].
    """
    sys_len, ref_len = stats[..., 0], stats[..., 1]
    correct, total = stats[..., 2 : 2 + ORDER], stats[..., 2 + ORDER : 2 + 2 * ORDER]
    with np.errstate(divide="ignore", invalid="ignore"):
        bp = np.where(sys_len < ref_len, np.where(sys_len > 0, np.exp(1 - ref_len / sys_len), 0.0), 1.0)
        # sacreBLEU's 'exp' smoothing: the k-th order without a match gets 1 / (2^k · total)
        misses = np.cumsum(correct == 0, axis=-1)
        precision = np.where(correct > 0, 100.0 * correct / total, 100.0 / (2.0**misses * total))
        log_p = np.log(precision)
    score = bp * np.exp(log_p.sum(axis=-1) / ORDER)
    dead = (total == 0).any(axis=-1) | (correct == 0).all(axis=-1)
    return np.where(dead, 0.0, score)


class Bleu:
    """sacreBLEU BLEU, cased, ``tokenize`` as the runs scored it (None: 13a)."""

    name = "bleu"
    label = "BLEU"
    reads_sources = False
    higher_is_better = True
    decimals = 2

    def __init__(self, tokenize: Optional[str] = None):
        self.tokenize = tokenize

    def signature(self) -> str:
        return _signature(self.tokenize)

    def corpus(self, hyps: Texts, refs: Texts, sources: Optional[Texts] = None) -> float:
        check_aligned(hyps, refs)
        return float(_bleu(self.tokenize).corpus_score(list(hyps), [list(refs)]).score)

    def sentences(self, hyps: Texts, refs: Texts, sources: Optional[Texts] = None) -> list[float]:
        check_aligned(hyps, refs)
        metric = _bleu(self.tokenize, effective_order=True)
        return [float(metric.sentence_score(h, [r]).score) for h, r in zip(hyps, refs)]

    def statistics(self, hyps: Texts, refs: Texts, sources: Optional[Texts] = None) -> np.ndarray:
        return sentence_stats(hyps, refs, self.tokenize)

    def from_statistics(self, stats: np.ndarray) -> np.ndarray:
        return bleu_from_stats(stats)
