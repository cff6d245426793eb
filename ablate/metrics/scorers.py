"""BLEU (Papineni et al. 2002), chrF (Popović 2015), chrF++ (Popović 2017) and TER (Snover et al. 2006),
as sacreBLEU computes them, each with (n, k) per-sentence sufficient statistics whose (weighted) sum
:meth:`from_statistics` turns into sacreBLEU's ``corpus_score`` (what the report resamples).
"""

from __future__ import annotations

import functools
import itertools
import re
import string
from collections import Counter
from typing import Any, Callable, Iterable, Optional, Sequence

import numpy as np

from ablate.errors import AblateError, did_you_mean

Texts = Sequence[str]


class MetricError(AblateError):
    """An unknown metric name or BLEU tokenizer, or a plugin that clashes with a registered one."""


def check_aligned(hyps: Texts, refs: Texts, sources: Optional[Texts] = None) -> None:
    """Equal, non-zero lengths (``sources`` may be None)."""
    if len(hyps) != len(refs) or not refs or (sources is not None and len(sources) != len(refs)):
        also = "" if sources is None else f", {len(sources)} sources"
        raise ValueError(f"texts are not aligned: {len(hyps)} hypotheses, {len(refs)} references{also}")


class SacreBleuScorer:
    """What the scorers of a sacreBLEU metric share; subclasses give :meth:`metric` (a fresh sacreBLEU
    metric object) and their statistics."""

    reads_sources = False  # a scorer without this attribute is assumed to read the sources
    higher_is_better = True
    decimals = 2

    def metric(self, sentence: bool = False) -> Any:
        """The sacreBLEU metric (``sentence``: the one that scores single sentences)."""
        raise NotImplementedError

    def signature(self) -> str:
        return _signed(self.metric())

    def corpus(self, hyps: Texts, refs: Texts, sources: Optional[Texts] = None) -> float:
        check_aligned(hyps, refs)
        return float(self.metric().corpus_score(list(hyps), [list(refs)]).score)

    def sentences(self, hyps: Texts, refs: Texts, sources: Optional[Texts] = None) -> list[float]:
        check_aligned(hyps, refs)
        metric = self.metric(sentence=True)
        return [float(metric.sentence_score(h, [r]).score) for h, r in zip(hyps, refs)]


def _signed(metric: Any) -> str:
    metric.corpus_score(["x"], [["x"]])  # sacreBLEU signs a metric once it has scored
    return str(metric.get_signature())


ORDER = 4  # BLEU's maximum n-gram order


def _bleu(tokenize: Optional[str], **kwargs: Any) -> Any:
    """sacreBLEU's BLEU with ``tokenize`` (None: its default, 13a); :class:`MetricError` naming a tokenizer that
    sacreBLEU lacks or cannot load (a recorded signature's ``tok:``), rather than BLEU under another one."""
    import sacrebleu
    from sacrebleu.metrics import BLEU

    try:
        return BLEU(tokenize=tokenize, **kwargs)
    except KeyError:
        names = BLEU.TOKENIZERS
        why = f"sacreBLEU {sacrebleu.__version__} has no such tokenizer (choose from: {', '.join(names)})"
        why += did_you_mean(str(tokenize), names)
    except (ImportError, RuntimeError) as err:  # its package missing: sacreBLEU says what to install
        why = " ".join(str(err).split())
    raise MetricError(f"BLEU's tokenizer '{tokenize}' (tok:{tokenize}) cannot be used: {why}")


@functools.lru_cache(maxsize=16)
def _signature(tokenize: Optional[str]) -> str:
    """sacreBLEU's signature of BLEU with ``tokenize`` (one per process: a table asks for it per trial)."""
    return _signed(_bleu(tokenize))


def sentence_stats(hyps: Texts, refs: Texts, tokenize: Optional[str] = None) -> np.ndarray:
    """sacreBLEU's per-sentence BLEU statistics, shape (n, 2 + 2·4): hypothesis length, reference
    length, clipped matching n-grams (n = 1..4), hypothesis n-grams (n = 1..4), as ``BLEU.sentence_score``
    counts them (13a by :func:`tokens_13a`). The references' n-grams are counted once per process
    (:class:`_References`); a text's are counted in numpy over all its tokens at once."""
    check_aligned(hyps, refs)
    split = _splitter(tokenize)
    references = _reference_ngrams(split, tuple(refs))
    tokens = split(hyps)
    lengths = np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens))
    flat = itertools.chain.from_iterable(tokens)  # a token the references lack matches nothing: id -1
    ids = np.fromiter(map(references.vocab.get, flat, itertools.repeat(-1)), dtype=np.int64, count=int(lengths.sum()))
    out = np.empty((len(tokens), 2 + 2 * ORDER), dtype=np.float64)
    out[:, 0], out[:, 1] = lengths, references.lengths
    out[:, 2 : 2 + ORDER] = references.matches(ids, lengths)
    out[:, 2 + ORDER :] = np.maximum(lengths[:, None] - np.arange(ORDER), 0)  # L tokens: L - n + 1 n-grams
    return out


class _References:
    """One reference set's n-grams, per order n = 1..4, to clip any text's n-gram counts against.

    Tokens get integer ids (``vocab``). An n-gram of line s is known by its entry in ``pairs[n - 1]``,
    the sorted keys of every (line, n-gram) that line s's reference holds: ``s · V + token id`` for a
    unigram (V: the vocabulary's size), ``entry of its first n-1 tokens · V + id of its last`` above, so
    a key stays below V times the number of entries one order down; ``counts[n - 1]``: how often the
    reference holds it, ``lines[n - 1]``: its line.
    """

    def __init__(self, tokens: list[list[str]]):
        self.vocab = {t: i for i, t in enumerate(dict.fromkeys(itertools.chain.from_iterable(tokens)))}
        self.lengths = np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens))
        ids = np.fromiter(map(self.vocab.__getitem__, itertools.chain.from_iterable(tokens)), dtype=np.int64)
        self.pairs: list[np.ndarray] = []
        self.counts: list[np.ndarray] = []
        self.lines: list[np.ndarray] = []
        for _ in self._entries(ids, self.lengths, build=True):
            pass

    def _entries(self, ids: np.ndarray, lengths: np.ndarray, build: bool = False) -> Iterable[np.ndarray]:
        """Per order n = 1..4, for each token position of a text (token ``ids``, -1 for one the
        references lack; line ``lengths``) the entry in ``pairs[n - 1]`` of the n-gram starting there,
        -1 where it runs past its line or its line's reference lacks it (``build``: the references' own)."""
        total, width = len(ids), max(len(self.vocab), 1)
        line = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
        left: np.ndarray = np.repeat(np.cumsum(lengths), lengths) - np.arange(total, dtype=np.int64)  # to its line end
        entries = np.zeros(total, dtype=np.int64)  # order 0: every position, each line its own
        for n in range(1, ORDER + 1):
            size = max(total - n + 1, 0)
            at = np.flatnonzero(entries[:size] >= 0)  # where the (n-1)-gram is known: the only places to look
            at = at[(left[at] >= n) & (ids[at + n - 1] >= 0)]
            head = line[at] if n == 1 else entries[at]
            keys = head * width + ids[at + n - 1]  # by line, then position: nearly sorted
            if build:
                pairs, counts = np.unique(keys, return_counts=True)
                self.pairs.append(pairs)
                self.counts.append(counts)
                self.lines.append(pairs // width if n == 1 else self.lines[-1][pairs // width])
            table = self.pairs[n - 1]
            entries = np.full(size, -1, dtype=np.int64)
            if len(table) and len(keys):
                where = np.minimum(np.searchsorted(table, keys), len(table) - 1)
                hit = table[where] == keys
                entries[at[hit]] = where[hit]
            yield entries

    def matches(self, ids: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """(lines, 4) clipped matches of a text (:meth:`_entries`' ``ids`` and ``lengths``): per n-gram
        of a line, ``min(count in the line, count in its reference)``, summed over the line's n-grams."""
        out = np.zeros((len(lengths), ORDER), dtype=np.float64)
        for n, entries in enumerate(self._entries(ids, lengths)):
            found = np.bincount(entries[entries >= 0], minlength=len(self.pairs[n]))
            out[:, n] = np.bincount(self.lines[n], np.minimum(found, self.counts[n]), minlength=len(lengths))
        return out


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
    (re.compile(r"([^0-9])([\.,])"), r"\1 \2 "),  # period and comma unless preceded by a digit
    (re.compile(r"([\.,])([^0-9])"), r" \1 \2"),  # ... unless followed by a digit
    (re.compile(r"([0-9])(-)"), r"\1 \2 "),  # a dash preceded by a digit
)


def tokenize_13a(line: str) -> str:
    """sacreBLEU's ``13a`` tokenizer (mteval-v13a), the same output: its first rule, which spaces out
    single characters, as one ``str.translate`` (:func:`_context_rules`)."""
    line = line.replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
    if "&" in line:
        line = line.replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    return " ".join(_context_rules(f" {line} ")[0])


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
    """``tokenize_13a(line.rstrip()).split()`` of each line, each rule run once on the lines joined with
    `` \\n `` (padded, so no rule matches across two): where no period or comma touches another, as
    ``str.replace`` and :data:`_MARKS_ALONE` (no Python per match), elsewhere 13a's rules as they are.
    A line holding a newline (which 13a joins) is tokenized alone."""
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
    for pattern, replacement in _CONTEXT_RULES:
        text = pattern.sub(replacement, text)
    return [segment.split() for segment in text.split("\n")]


def _marks_alone(text: str) -> list[list[str]]:
    """:func:`_context_rules` of a text in which no period or comma touches another, from spaces around
    each single-character word and :data:`_MARKS_ALONE`."""
    for char in _SPACED_CHARS:
        if char in text:
            text = text.replace(char, f" {char} ")
    for pattern, replacement in _MARKS_ALONE:
        text = pattern.sub(replacement, text)
    return [segment.split() for segment in text.split("\n")]


@functools.lru_cache(maxsize=8)
def _reference_ngrams(split: Callable[[Texts], list[list[str]]], refs: tuple[str, ...]) -> _References:
    """The n-grams of ``refs`` as ``split`` tokenizes them (a few reference sets at most)."""
    return _References(split(refs))


def bleu_from_stats(stats: np.ndarray) -> np.ndarray:
    """(..., 10) summed :func:`sentence_stats` -> (...) corpus BLEU in [0, 100] (sacreBLEU's default:
    ``exp`` smoothing, order 4)."""
    sys_len, ref_len = stats[..., 0], stats[..., 1]
    correct, total = stats[..., 2 : 2 + ORDER], stats[..., 2 + ORDER : 2 + 2 * ORDER]
    with np.errstate(divide="ignore", invalid="ignore"):
        bp = np.where(sys_len < ref_len, np.where(sys_len > 0, np.exp(1 - ref_len / sys_len), 0.0), 1.0)
        # sacreBLEU's 'exp' smoothing: the k-th order without a match gets 1 / (2^k · total)
        misses = np.cumsum(correct == 0, axis=-1)
        precision = np.where(correct > 0, 100.0 * correct / total, 100.0 / np.ldexp(total, misses))  # 2^k · total
        log_p = np.log(precision)
        score = bp * np.exp(log_p.sum(axis=-1) / ORDER)  # nan where nothing was hypothesised: ``dead`` below
    dead = (total == 0).any(axis=-1) | (correct == 0).all(axis=-1)
    return np.where(dead, 0.0, score)


class Bleu(SacreBleuScorer):
    """sacreBLEU BLEU, cased, ``tokenize`` as the runs scored it (None: 13a)."""

    name = "bleu"
    label = "BLEU"
    from_statistics = staticmethod(bleu_from_stats)

    def __init__(self, tokenize: Optional[str] = None):
        self.tokenize = tokenize

    def metric(self, sentence: bool = False) -> Any:
        return _bleu(self.tokenize, effective_order=sentence)

    def signature(self) -> str:
        return _signature(self.tokenize)

    def statistics(self, hyps: Texts, refs: Texts, sources: Optional[Texts] = None) -> np.ndarray:
        return sentence_stats(hyps, refs, self.tokenize)


CHAR_ORDER = 6
BETA = 2
PUNCTUATION = frozenset(string.punctuation)


def words(sentence: str) -> list[str]:
    """chrF++'s words: whitespace tokens with one punctuation mark split off the end, else off the
    start (``(hi)`` -> ``(hi``, ``)``; one-character tokens stay whole), as the reference chrF++.py."""
    out: list[str] = []
    for word in sentence.split():
        if len(word) > 1 and word[-1] in PUNCTUATION:
            out += [word[:-1], word[-1]]
        elif len(word) > 1 and word[0] in PUNCTUATION:
            out += [word[0], word[1:]]
        else:
            out.append(word)
    return out


def _chrf_ngrams(sentence: str, word_order: int) -> list[Counter]:
    from sacrebleu.metrics.helpers import extract_all_char_ngrams, extract_word_ngrams

    grams = extract_all_char_ngrams(sentence, CHAR_ORDER, False)
    if word_order:
        tokens = words(sentence)
        grams += [extract_word_ngrams(tokens, n) for n in range(1, word_order + 1)]
    return grams


def chrf_statistics(hyps: Texts, refs: Texts, word_order: int = 0) -> np.ndarray:
    """(n, 3·orders) counts per sentence: ``[hyp n-grams, ref n-grams, matches]`` per order, char
    orders first. A hypothesis's n-grams of an order the reference has none of count 0 (sacreBLEU's rule)."""
    check_aligned(hyps, refs)
    orders = CHAR_ORDER + word_order
    out = np.zeros((len(hyps), 3 * orders), dtype=np.float64)
    for i, (hyp, ref) in enumerate(zip(hyps, refs)):
        for j, (h, r) in enumerate(zip(_chrf_ngrams(hyp, word_order), _chrf_ngrams(ref, word_order))):
            matches = sum(min(count, r[gram]) for gram, count in h.items() if gram in r)
            out[i, 3 * j : 3 * j + 3] = (sum(h.values()) if r else 0, sum(r.values()), matches)
    return out


def chrf_from_stats(stats: np.ndarray, beta: int = BETA) -> np.ndarray:
    """chrF from summed counts (..., 3·orders) -> (...): precision and recall averaged over the
    orders both sides have, then F-beta, in [0, 100] (sacreBLEU's default, no epsilon smoothing)."""
    factor = beta**2
    shape = stats.shape[:-1]
    avg_prec, avg_rec, effective = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        for j in range(stats.shape[-1] // 3):
            n_hyp, n_ref, n_match = stats[..., 3 * j], stats[..., 3 * j + 1], stats[..., 3 * j + 2]
            both = (n_hyp > 0) & (n_ref > 0)
            avg_prec = np.where(both, avg_prec + n_match / n_hyp, avg_prec)
            avg_rec = np.where(both, avg_rec + n_match / n_ref, avg_rec)
            effective = effective + both
        avg_prec = np.where(effective > 0, avg_prec / effective, 0.0)
        avg_rec = np.where(effective > 0, avg_rec / effective, 0.0)
        score = (1 + factor) * avg_prec * avg_rec / (factor * avg_prec + avg_rec)
    return np.where(avg_prec + avg_rec > 0, 100 * score, 0.0)


class Chrf(SacreBleuScorer):
    """sacreBLEU chrF (``word_order`` 0) or chrF++ (2), cased, whitespace excluded."""

    name = "chrf"
    label = "chrF"
    word_order = 0
    from_statistics = staticmethod(chrf_from_stats)

    def metric(self, sentence: bool = False) -> Any:
        from sacrebleu.metrics import CHRF

        return CHRF(word_order=self.word_order)

    def statistics(self, hyps: Texts, refs: Texts, sources: Optional[Texts] = None) -> np.ndarray:
        return chrf_statistics(hyps, refs, self.word_order)


class ChrfPlusPlus(Chrf):
    """chrF++: chrF with word unigrams and bigrams (Popović 2017)."""

    name = "chrf++"
    label = "chrF++"
    word_order = 2


def ter_from_stats(stats: np.ndarray) -> np.ndarray:
    """(..., 2) summed ``(edits, reference words)`` -> (...) TER in percent (sacreBLEU's rule: an
    empty reference costs 100 if the hypothesis is not empty, else 0)."""
    edits, length = stats[..., 0], stats[..., 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(length > 0, edits / length, np.where(edits > 0, 1.0, 0.0))
    return 100 * rate


class Ter(SacreBleuScorer):
    """sacreBLEU TER with its defaults (case-insensitive, no normalisation)."""

    name = "ter"
    label = "TER"
    higher_is_better = False
    from_statistics = staticmethod(ter_from_stats)

    def metric(self, sentence: bool = False) -> Any:
        from sacrebleu.metrics import TER

        return TER()

    def statistics(self, hyps: Texts, refs: Texts, sources: Optional[Texts] = None) -> np.ndarray:
        check_aligned(hyps, refs)
        metric = self.metric()
        out = np.empty((len(hyps), 2), dtype=np.float64)
        for i, (hyp, ref) in enumerate(zip(hyps, refs)):
            s = metric.sentence_score(hyp, [ref])
            out[i] = s.num_edits, s.ref_length
        return out
