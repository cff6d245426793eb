"""The metric scorers: per-sentence statistics give sacreBLEU's corpus scores back exactly, on real
Multi30k lines and on the edge cases (empty lines, punctuation, a missing n-gram order)."""

from __future__ import annotations

import gzip
import random
import warnings
from pathlib import Path

import numpy as np
import pytest
import sacrebleu

from ablate.metrics import METRIC_SCORERS, MetricError, MetricScorer, SentenceMetric, get_scorer, register_metric
from ablate.metrics.scorers import Bleu, sentence_stats, words

SACREBLEU = {
    "bleu": lambda: sacrebleu.metrics.BLEU(),
    "chrf": lambda: sacrebleu.metrics.CHRF(),
    "chrf++": lambda: sacrebleu.metrics.CHRF(word_order=2),
    "ter": lambda: sacrebleu.metrics.TER(),
}


def _lines(folder: Path, name: str, n: int) -> list[str]:
    with gzip.open(folder / name, "rt", encoding="utf-8") as f:
        return [next(f).rstrip("\n") for _ in range(n)]


def _system(refs: list[str], rate: float, seed: int) -> list[str]:
    """A made-up system: each reference with a share of its words dropped, repeated or swapped."""
    rng, out = random.Random(seed), []
    for ref in refs:
        w = ref.split()
        for i in range(len(w)):
            r = rng.random()
            if r < rate / 3:
                w[i] = ""
            elif r < 2 * rate / 3:
                w[i] = w[i] + " " + w[i]
            elif r < rate and i + 1 < len(w):
                w[i], w[i + 1] = w[i + 1], w[i]
        out.append(" ".join(x for x in w if x))
    return out


@pytest.fixture(scope="module")
def real_lines(multi30k: Path) -> tuple[list[str], list[str]]:
    refs = _lines(multi30k, "test_2016_flickr.de.gz", 300)
    return refs, _system(refs, 0.4, 1)


EDGES = (
    ["", "Ein Hund.", "(hallo) Welt!", "a", "x y z"],
    ["Ein Mann.", "", "(hallo) Welt !", "a", "x y z"],
)


def test_the_registry_holds_the_four_metrics():
    assert list(METRIC_SCORERS)[:4] == ["bleu", "chrf", "chrf++", "ter"]
    for name in METRIC_SCORERS:
        assert isinstance(get_scorer(name), MetricScorer)
    assert get_scorer("ter").higher_is_better is False and get_scorer("chrf++").higher_is_better


@pytest.mark.parametrize("name", list(SACREBLEU))
def test_statistics_reproduce_sacrebleu_on_real_lines(name, real_lines):
    refs, hyps = real_lines
    scorer, reference = get_scorer(name), SACREBLEU[name]()
    stats = scorer.statistics(hyps, refs)
    assert stats.shape[0] == len(refs)
    expected = reference.corpus_score(hyps, [refs]).score
    again = float(scorer.from_statistics(stats.sum(0)))
    if name == "bleu":  # numpy's exp and log against math's: the last bit may differ (BLEU as before)
        assert again == pytest.approx(expected, rel=1e-14)
    else:
        assert again == expected  # bit for bit
    assert scorer.corpus(hyps, refs) == expected
    assert scorer.signature() == str(reference.get_signature())
    # a resample is a weighted sum: the corpus score of the lines it draws
    idx = np.random.default_rng(0).integers(0, len(refs), len(refs))
    weights = np.bincount(idx, minlength=len(refs)).astype(float)
    drawn = reference.corpus_score([hyps[i] for i in idx], [[refs[i] for i in idx]]).score
    assert float(scorer.from_statistics(weights @ stats)) == pytest.approx(drawn, abs=1e-9)


@pytest.mark.parametrize("name", list(SACREBLEU))
def test_statistics_reproduce_sacrebleu_on_edge_cases(name):
    hyps, refs = EDGES
    scorer, reference = get_scorer(name), SACREBLEU[name]()
    assert float(scorer.from_statistics(scorer.statistics(hyps, refs).sum(0))) == pytest.approx(
        reference.corpus_score(hyps, [refs]).score, abs=1e-12
    )
    if name == "bleu":  # sentence BLEU with effective order, as sacreBLEU recommends per sentence
        reference = sacrebleu.metrics.BLEU(effective_order=True)
    sentences = scorer.sentences(hyps, refs)
    assert sentences == pytest.approx([reference.sentence_score(h, [r]).score for h, r in zip(hyps, refs)])


def test_ter_is_an_error_rate():
    ter = get_scorer("ter")
    assert ter.corpus(["a b c"], ["a b c"]) == 0.0
    assert ter.corpus(["x y z"], ["a b c"]) == 100.0


def test_chrf_plus_plus_words_split_punctuation_as_chrf_plus_plus_does():
    assert words("(hallo) Welt! a , x.y") == ["(hallo", ")", "Welt", "!", "a", ",", "x.y"]
    assert words("'Hi") == ["'", "Hi"]


def test_misaligned_texts_are_refused():
    with pytest.raises(ValueError, match="not aligned: 1 hypotheses, 2 references"):
        get_scorer("chrf").statistics(["a"], ["a", "b"])


class Overlap(SentenceMetric):
    """Character-overlap F1 per sentence (multiset of characters, spaces excluded)."""

    name, label, version = "overlap", "charF1", "1"

    def sentences(self, hyps, refs, sources=None):
        from collections import Counter

        out = []
        for h, r in zip(hyps, refs):
            a, b = Counter(h.replace(" ", "")), Counter(r.replace(" ", ""))
            common = sum((a & b).values())
            out.append(0.0 if not common else 200.0 * common / (sum(a.values()) + sum(b.values())))
        return out


@pytest.fixture()
def overlap():
    """``overlap`` registered for one test, and gone after it."""
    register_metric("overlap", Overlap)
    yield
    METRIC_SCORERS.pop("overlap", None)


def test_a_sentence_metric_is_the_mean_of_its_sentences(overlap):
    scorer = get_scorer("overlap")
    hyps, refs = ["abc", "abcd", "xyz"], ["abc", "abce", "abc"]
    assert scorer.sentences(hyps, refs) == [100.0, 75.0, 0.0]
    assert scorer.corpus(hyps, refs) == pytest.approx(175.0 / 3)
    weights = np.array([2.0, 0.0, 1.0])  # a resample drawing sentence 0 twice and 2 once
    assert float(scorer.from_statistics(weights @ scorer.statistics(hyps, refs))) == pytest.approx(200.0 / 3)
    assert scorer.signature() == "overlap|version:1"


def test_register_refuses_a_clash_and_get_names_the_choices():
    with pytest.raises(MetricError, match="metric 'chrf' is already registered"):
        register_metric("chrf", Overlap)
    with pytest.raises(MetricError, match="must be lower-case"):
        register_metric("Overlap", Overlap)
    with pytest.raises(
        MetricError, match=r"unknown metric 'chrff' \(choose from: bleu, chrf, chrf\+\+, ter\); did you mean"
    ):
        get_scorer("chrff")
    assert "overlap" not in METRIC_SCORERS


def test_get_scorer_suggests_the_name_in_another_case():
    """``get_scorer("CHRF")`` listed the choices without a suggestion: difflib compares case-sensitively."""
    with pytest.raises(MetricError, match=r"unknown metric 'CHRF' .*; did you mean 'chrf'\?"):
        get_scorer("CHRF")


@pytest.mark.parametrize(
    ("tokenize", "says"),
    [("nonsense", r"sacreBLEU .* has no such tokenizer \(choose from: none, zh, 13a"), ("13A", "did you mean '13a'")],
)
def test_a_bleu_tokenizer_sacrebleu_lacks_is_one_line_naming_it(tokenize, says):
    """A recorded signature's ``tok:`` that sacreBLEU cannot build fell back to 13a without a word: the table and
    ``ablate score`` reported 13a BLEU under the signature's tokenizer."""
    with pytest.raises(MetricError, match=rf"BLEU's tokenizer '{tokenize}' \(tok:{tokenize}\) .*{says}") as err:
        Bleu(tokenize).signature()
    assert "\n" not in str(err.value)


def test_a_bleu_tokenizer_without_its_package_names_the_install():
    try:
        sacrebleu.metrics.BLEU(tokenize="ja-mecab")
        pytest.skip("sacreBLEU's Japanese tokenizer is installed here")
    except RuntimeError:
        pass
    with pytest.raises(MetricError, match=r"BLEU's tokenizer 'ja-mecab' .*: Japanese .* pip install sacrebleu\[ja\]$"):
        sentence_stats(["a"], ["a"], "ja-mecab")


@pytest.mark.parametrize("tokenize", ["13a", "intl", "none"])
def test_bleu_sentence_statistics_are_sacrebleus_row_by_row(tokenize, real_lines):
    """Each row is what ``BLEU.sentence_score`` counts (lengths, matches, totals), also on a second
    system scored against the same, cached references, and on the edge cases."""
    from ablate.metrics.scorers import ORDER, sentence_stats

    refs, hyps = real_lines
    reference = sacrebleu.metrics.BLEU(tokenize=tokenize, effective_order=True)
    for system, truth in ((hyps, refs), (_system(refs, 0.2, 7), refs), EDGES):
        expected = []
        for h, r in zip(system, truth):
            s = reference.sentence_score(h, [r])
            expected.append([s.sys_len, s.ref_len, *s.counts, *s.totals])
        stats = sentence_stats(system, truth, tokenize)
        assert stats.shape == (len(system), 2 + 2 * ORDER)
        assert stats.tolist() == expected


def test_bleu_statistics_count_repeated_ngrams_as_sacrebleu_does():
    """Random lines over a six-word vocabulary (every n-gram repeats, in the line and in its reference;
    empty and one- to three-word lines; words the references never use): each row is
    ``BLEU.sentence_score``'s counts, two texts against the same (cached) references, and the corpus
    score from the summed rows is ``BLEU.corpus_score``'s."""
    from ablate.metrics.scorers import bleu_from_stats, sentence_stats

    rng = random.Random(11)
    vocabulary = ["a", "b", "c", "a.", "Hund", "-"]

    def line(extra: list[str]) -> str:
        n = rng.choice([0, 1, 2, 3, rng.randint(4, 30)])
        return " ".join(rng.choice(vocabulary + extra) for _ in range(n))

    refs = [line([]) for _ in range(2000)]
    sentence, corpus = sacrebleu.metrics.BLEU(effective_order=True), sacrebleu.metrics.BLEU()
    for _ in range(2):
        hyps = [line(["zz", "Katze"]) for _ in refs]
        stats = sentence_stats(hyps, refs)
        expected = []
        for h, r in zip(hyps, refs):
            s = sentence.sentence_score(h, [r])
            expected.append([s.sys_len, s.ref_len, *s.counts, *s.totals])
        assert stats.tolist() == expected
        assert float(bleu_from_stats(stats.sum(0))) == pytest.approx(corpus.corpus_score(hyps, [refs]).score, rel=1e-14)


def test_bleu_of_empty_hypotheses_is_zero_without_a_numpy_warning():
    """`ablate plot` (BLEU by length) and `ablate export` printed numpy's "invalid value encountered in multiply"
    for a bucket of empty hypotheses: a brevity penalty of 0 times an infinite precision, masked to 0 afterwards."""
    from ablate.metrics.scorers import bleu_from_stats, sentence_stats

    stats = sentence_stats(["", ""], ["a man rides", "a dog"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert bleu_from_stats(stats.sum(0)) == 0.0 and bleu_from_stats(stats).tolist() == [0.0, 0.0]


class _Counting(SentenceMetric):
    """A sentence metric that counts how often it scores (word overlap with the reference)."""

    name = "counting"
    calls = 0

    def sentences(self, hyps, refs, sources=None):
        type(self).calls += 1
        return [len(set(h.split()) & set(r.split())) for h, r in zip(hyps, refs)]


def test_statistics_are_scored_once_per_text_across_processes(tmp_path, monkeypatch):
    """The per-sentence statistics of a text are cached on disk by content: a fresh process (here: an
    emptied in-process cache) reads them back; a changed hypothesis or a moved cache is scored afresh."""
    from ablate import metrics as scorer_module

    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path))
    hyps, refs = ["a man rides", "two dogs"], ["a man rides a bike", "two dogs play"]
    first = scorer_module.statistics(_Counting(), hyps, refs)
    assert _Counting.calls == 1 and len(list((tmp_path / "statistics").glob("*.npy"))) == 1
    scorer_module._CACHE.clear()
    again = scorer_module.statistics(_Counting(), hyps, refs)
    assert _Counting.calls == 1 and np.array_equal(first, again)
    scorer_module._CACHE.clear()
    changed = scorer_module.statistics(_Counting(), ["a man", "two dogs"], refs)
    assert _Counting.calls == 2 and changed[0, 0] == 2


def test_the_13a_tokenizer_is_sacrebleus_on_real_and_random_lines(real_lines):
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    from ablate.metrics.scorers import tokenize_13a, tokens_13a

    rng = random.Random(3)
    alphabet = list(".,-0123456789 aZé&;quotamplgt<>skipped\t/\\{}~[]`^_!\"#$%()*+:=?@'|\u2028\u00a0\x1c")
    randoms = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30))) for _ in range(20000)]
    lines = [
        *real_lines[0],
        *real_lines[1],
        *randoms,
        "a..b",
        "1.,2",
        "3-4",
        "&amp;lt; x",
        "<skipped> y",
        ".<skipped>.",
    ]
    for line in lines:
        assert tokenize_13a(line) == Tokenizer13a()(line), repr(line)
    # all lines at once: lines where marks touch and lines where none does (the fast rules), apart and mixed
    untouched = [line for line in lines if not any(pair in line for pair in ("..", ".,", ",.", ",,"))]
    for batch in (lines, untouched, [*untouched[:50], "a..b", *untouched[50:100]], ["x", "y\nz"], []):
        assert tokens_13a(batch) == [Tokenizer13a()(line.rstrip()).split() for line in batch]


def test_the_statistics_cache_keeps_its_file_names(tmp_path, monkeypatch):
    """The cache file is the sha256 of each text and a newline, a byte 1 after each part: a cache
    written by an older ablate is still read."""
    import hashlib

    from ablate import metrics as scorer_module

    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path))
    scorer_module._CACHE.clear()
    hyps, refs = ["a man rides", "two dogs"], ["a man rides a bike", "two dogs play"]
    scorer_module.statistics(_Counting(), hyps, refs)
    digest = hashlib.sha256()
    for part in ("counting", _Counting().signature(), tuple(hyps), tuple(refs), None):
        for text in part if isinstance(part, tuple) else (part,):
            digest.update(b"\0" if text is None else str(text).encode("utf-8") + b"\n")
        digest.update(b"\1")
    assert [p.name for p in (tmp_path / "statistics").iterdir()] == [f"{digest.hexdigest()}.npy"]


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_sentence_metric_that_gives_a_non_finite_score_is_one_line_naming_the_sentence(bad, tmp_path, monkeypatch):
    """A metric plugin whose score of one sentence was NaN (a 0/0 on an empty hypothesis) made the corpus score NaN:
    ``ablate score RUN --metric NAME`` said "scored 1 of 1 runs" and wrote null into summary.json."""
    from ablate import metrics as scorer_module

    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path))
    monkeypatch.setattr(Overlap, "sentences", lambda self, hyps, refs, sources=None: [50.0, bad])
    with pytest.raises(MetricError) as err:
        scorer_module.statistics(Overlap(), ["a", ""], ["a", "b"])
    assert str(err.value) == f"metric 'overlap' failed: metric overlap gave {bad} for sentence 2; scores must be finite"
    assert not list(tmp_path.rglob("*.npy"))  # nothing cached


class _NeedsSources(SentenceMetric):
    """The COMET example of docs/reports.md in small: it refuses texts without sources, as a learned metric whose
    package is missing fails on import."""

    name, label = "needs-sources", "NS"
    error: Exception = ValueError("needs-sources needs the source sentences (sources/<split>.txt)")

    def sentences(self, hyps, refs, sources=None):
        raise self.error


@pytest.mark.parametrize(
    "error", [ValueError("needs the source sentences (sources/<split>.txt)"), ImportError("No module named 'comet'")]
)
def test_a_metric_that_fails_on_its_texts_is_one_line_naming_it(tmp_path, monkeypatch, error):
    """``ablate score RUN --metric comet`` on a run without sources/ (or without the comet package) ended in a
    traceback of the plugin's ValueError (ImportError): the reports page's own example raises it."""
    from ablate import metrics as scorer_module

    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path))
    monkeypatch.setattr(_NeedsSources, "error", error)
    with pytest.raises(MetricError) as err:
        scorer_module.statistics(_NeedsSources(), ["a man"], ["a man rides"])
    assert str(err.value) == f"metric 'needs-sources' failed: {error}"


class _Unsigned(SentenceMetric):
    """A plugin whose signature reads its package's version, and that package is not installed."""

    name, label = "unsigned", "U"

    def signature(self) -> str:
        raise ImportError("No package metadata was found for unbabel-comet")

    def sentences(self, hyps, refs, sources=None):
        return [1.0] * len(refs)


def test_a_metric_whose_signature_fails_is_one_line_naming_it(tmp_path, monkeypatch):
    """``ablate table --metric NAME`` (or ``ablate score``) of a plugin whose ``signature()`` raised ended in a
    traceback: the signature is asked for before the statistics, outside the one-line handling of their failures."""
    from ablate import metrics as scorer_module

    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path))
    monkeypatch.setitem(METRIC_SCORERS, "unsigned", _Unsigned)
    expected = "metric 'unsigned' failed: No package metadata was found for unbabel-comet"
    with pytest.raises(MetricError) as err:
        get_scorer("unsigned")  # what the commands ask first, so a wrong metric fails before any work
    assert str(err.value) == expected
    with pytest.raises(MetricError) as err:
        scorer_module.statistics(_Unsigned(), ["a man"], ["a man rides"])
    assert str(err.value) == expected
