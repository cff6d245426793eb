"""The built-in task: a synthetic English -> German-like language pair, generated in code.

A small, fully deterministic grammar whose translation needs more than word-by-word copying,
so that attention genuinely matters (Bahdanau et al. 2015 motivate attention with exactly such
reorderings):

* **lexicon**: about 40 nouns, 16 adjectives and 27 verbs with their German forms;
* **reordering**: the German verb cluster goes to the end of the clause after a modal or an
  auxiliary (``can see the dog`` -> ``kann den Hund sehen``), the finite verb is final in
  subordinate clauses (``weil der Mann den Hund sieht``), a fronted time adverb or subordinate
  clause inverts subject and verb (V2: ``heute sieht der Mann ...``), English sentence-final
  adverbs move into the German middle field, and ``next to the`` contracts to one word;
* **agreement**: articles and adjective endings follow gender, number and case (nominative,
  accusative, dative; weak, mixed and strong declension), verbs agree with the subject's
  person and number, the perfect picks ``haben`` or ``sein``, dative plurals add ``-n``.

The mapping English -> German is a function (no ambiguity), and German -> English is too (verb
agreement disambiguates ``sie``), so a small model can reach high BLEU. The data never depends
on a run's seed: the generator has its own fixed seeds, and a sentence's split is decided by a
hash of its English text, so ``train`` (first ``n_train`` pairs of one stream), ``val`` and
``test`` are disjoint and ``val``/``test`` do not change with ``n_train``.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import Iterator, Optional

VERSION = 1
"""Bump when the grammar changes: it is part of the cache key."""
SEED = 20240601
LANGS = ("en", "de")
N_EVAL = 500

# noun: English singular, plural; German singular, plural, gender
ANIMATE = [
    ("man", "men", "Mann", "Männer", "m"), ("woman", "women", "Frau", "Frauen", "f"),
    ("child", "children", "Kind", "Kinder", "n"), ("girl", "girls", "Mädchen", "Mädchen", "n"),
    ("dog", "dogs", "Hund", "Hunde", "m"), ("cat", "cats", "Katze", "Katzen", "f"),
    ("horse", "horses", "Pferd", "Pferde", "n"), ("bird", "birds", "Vogel", "Vögel", "m"),
    ("teacher", "teachers", "Lehrer", "Lehrer", "m"), ("friend", "friends", "Freund", "Freunde", "m"),
    ("mother", "mothers", "Mutter", "Mütter", "f"), ("father", "fathers", "Vater", "Väter", "m"),
    ("cook", "cooks", "Koch", "Köche", "m"), ("student", "students", "Studentin", "Studentinnen", "f"),
]
THINGS = [
    ("book", "books", "Buch", "Bücher", "n"), ("ball", "balls", "Ball", "Bälle", "m"),
    ("car", "cars", "Auto", "Autos", "n"), ("apple", "apples", "Apfel", "Äpfel", "m"),
    ("table", "tables", "Tisch", "Tische", "m"), ("door", "doors", "Tür", "Türen", "f"),
    ("house", "houses", "Haus", "Häuser", "n"), ("letter", "letters", "Brief", "Briefe", "m"),
    ("flower", "flowers", "Blume", "Blumen", "f"), ("chair", "chairs", "Stuhl", "Stühle", "m"),
    ("bag", "bags", "Tasche", "Taschen", "f"), ("window", "windows", "Fenster", "Fenster", "n"),
    ("picture", "pictures", "Bild", "Bilder", "n"), ("cup", "cups", "Tasse", "Tassen", "f"),
    ("hat", "hats", "Hut", "Hüte", "m"), ("bicycle", "bicycles", "Fahrrad", "Fahrräder", "n"),
]
PLACES = [
    ("garden", "gardens", "Garten", "Gärten", "m"), ("park", "parks", "Park", "Parks", "m"),
    ("kitchen", "kitchens", "Küche", "Küchen", "f"), ("street", "streets", "Straße", "Straßen", "f"),
    ("school", "schools", "Schule", "Schulen", "f"), ("forest", "forests", "Wald", "Wälder", "m"),
    ("city", "cities", "Stadt", "Städte", "f"), ("river", "rivers", "Fluss", "Flüsse", "m"),
    ("tree", "trees", "Baum", "Bäume", "m"), ("bridge", "bridges", "Brücke", "Brücken", "f"),
]
ADJECTIVES = [
    ("big", "groß"), ("small", "klein"), ("old", "alt"), ("young", "jung"), ("red", "rot"),
    ("green", "grün"), ("blue", "blau"), ("black", "schwarz"), ("white", "weiß"), ("tired", "müde"),
    ("new", "neu"), ("beautiful", "schön"), ("happy", "froh"), ("strange", "seltsam"),
    ("dark", "dunkel"), ("warm", "warm"),
]
# verb: English base, 3sg, participle; German infinitive, participle, auxiliary,
# irregular (du, er) forms or None
TRANSITIVE = [
    ("see", "sees", "seen", "sehen", "gesehen", "haben", ("siehst", "sieht")),
    ("buy", "buys", "bought", "kaufen", "gekauft", "haben", None),
    ("find", "finds", "found", "finden", "gefunden", "haben", None),
    ("carry", "carries", "carried", "tragen", "getragen", "haben", ("trägst", "trägt")),
    ("paint", "paints", "painted", "malen", "gemalt", "haben", None),
    ("read", "reads", "read", "lesen", "gelesen", "haben", ("liest", "liest")),
    ("hold", "holds", "held", "halten", "gehalten", "haben", ("hältst", "hält")),
    ("wash", "washes", "washed", "waschen", "gewaschen", "haben", ("wäschst", "wäscht")),
    ("build", "builds", "built", "bauen", "gebaut", "haben", None),
    ("open", "opens", "opened", "öffnen", "geöffnet", "haben", ("öffnest", "öffnet")),
    ("look for", "looks for", "looked for", "suchen", "gesucht", "haben", None),
    ("write", "writes", "written", "schreiben", "geschrieben", "haben", None),
    ("bring", "brings", "brought", "bringen", "gebracht", "haben", None),
    ("clean", "cleans", "cleaned", "putzen", "geputzt", "haben", None),
]
INTRANSITIVE = [
    ("sleep", "sleeps", "slept", "schlafen", "geschlafen", "haben", ("schläfst", "schläft")),
    ("run", "runs", "run", "laufen", "gelaufen", "sein", ("läufst", "läuft")),
    ("sing", "sings", "sung", "singen", "gesungen", "haben", None),
    ("laugh", "laughs", "laughed", "lachen", "gelacht", "haben", None),
    ("wait", "waits", "waited", "warten", "gewartet", "haben", None),
    ("swim", "swims", "swum", "schwimmen", "geschwommen", "sein", None),
    ("dance", "dances", "danced", "tanzen", "getanzt", "haben", None),
    ("work", "works", "worked", "arbeiten", "gearbeitet", "haben", None),
    ("come", "comes", "come", "kommen", "gekommen", "sein", None),
    ("play", "plays", "played", "spielen", "gespielt", "haben", None),
]
REPORTING = [("say", "says", "sagen"), ("think", "thinks", "denken"), ("know", "knows", "wissen")]
IRREGULAR_PRESENT = {  # ich, du, er, wir, sie(pl)
    "haben": ("habe", "hast", "hat", "haben", "haben"),
    "sein": ("bin", "bist", "ist", "sind", "sind"),
    "können": ("kann", "kannst", "kann", "können", "können"),
    "müssen": ("muss", "musst", "muss", "müssen", "müssen"),
    "wollen": ("will", "willst", "will", "wollen", "wollen"),
    "wissen": ("weiß", "weißt", "weiß", "wissen", "wissen"),
}
MODALS = [("can", "can", "können"), ("must", "must", "müssen"), ("want to", "wants to", "wollen")]
# pronoun: English, German, person index into the (ich, du, er, wir, sie) forms, English 3sg?
PRONOUNS = [("I", "ich", 0, False), ("you", "du", 1, False), ("he", "er", 2, True),
            ("she", "sie", 2, True), ("we", "wir", 3, False), ("they", "sie", 4, False)]
PREPOSITIONS = [("in", "in"), ("with", "mit"), ("behind", "hinter"), ("under", "unter"),
                ("next to", "neben"), ("near", "bei")]
CONTRACTIONS = {("in", "dem"): "im", ("bei", "dem"): "beim"}
MANNER = [("quickly", "schnell"), ("slowly", "langsam"), ("quietly", "leise"),
          ("carefully", "vorsichtig"), ("loudly", "laut")]
TIME = [("today", "heute"), ("now", "jetzt"), ("often", "oft"), ("sometimes", "manchmal"),
        ("later", "später"), ("tomorrow", "morgen")]
SUBORDINATORS = [("because", "weil"), ("although", "obwohl"), ("while", "während"), ("when", "wenn")]

DEFINITE = {"nom": {"m": "der", "f": "die", "n": "das", "pl": "die"},
            "acc": {"m": "den", "f": "die", "n": "das", "pl": "die"},
            "dat": {"m": "dem", "f": "der", "n": "dem", "pl": "den"}}
INDEFINITE = {"nom": {"m": "ein", "f": "eine", "n": "ein"},
              "acc": {"m": "einen", "f": "eine", "n": "ein"},
              "dat": {"m": "einem", "f": "einer", "n": "einem"}}


def present(infinitive: str, person: int, irregular: Optional[tuple[str, str]] = None) -> str:
    """German present tense of ``infinitive`` for person index 0..4 (ich, du, er, wir, sie)."""
    if infinitive in IRREGULAR_PRESENT:
        return IRREGULAR_PRESENT[infinitive][person]
    if person in (3, 4):
        return infinitive
    if person in (1, 2) and irregular:
        return irregular[person - 1]
    stem = infinitive[:-2]
    if person == 0:
        return stem + "e"
    linking = "e" if stem.endswith(("t", "d")) else ""
    if person == 1:
        return stem + linking + ("t" if stem.endswith(("s", "ß", "z", "x")) else "st")
    return stem + linking + "t"


def adjective_ending(case: str, key: str, article: str) -> str:
    """Weak (after der), mixed (after ein) or strong (no article, plural) adjective ending."""
    if article == "def":
        return "e" if key != "pl" and (case == "nom" or (case == "acc" and key != "m")) else "en"
    if article == "indef" and key != "pl":
        if case == "dat" or (case == "acc" and key == "m"):
            return "en"
        return {"m": "er", "f": "e", "n": "es"}[key]
    return "en" if case == "dat" else "e"


def _adjective_stem(adjective: str) -> str:
    """``dunkel`` -> ``dunkl``, ``müde`` -> ``müd``: the form endings attach to."""
    if adjective.endswith("el"):
        return adjective[:-2] + "l"
    return adjective[:-1] if adjective.endswith("e") else adjective


def dative_plural(noun: str) -> str:
    return noun if noun.endswith(("n", "s")) else noun + "n"


@dataclass(frozen=True)
class NounPhrase:
    noun: tuple
    plural: bool
    article: str  # "def" or "indef" (plural indefinite has no article)
    adjective: Optional[tuple]

    def en(self) -> list[str]:
        words = ([self.adjective[0]] if self.adjective else []) + [self.noun[1 if self.plural else 0]]
        if self.article == "def":
            return ["the"] + words
        if self.plural:
            return words
        return ["an" if words[0][0] in "aeio" else "a"] + words

    def de(self, case: str) -> list[str]:
        key = "pl" if self.plural else self.noun[4]
        noun = self.noun[3] if self.plural else self.noun[2]
        if self.plural and case == "dat":
            noun = dative_plural(noun)
        words = []
        if self.article == "def":
            words.append(DEFINITE[case][key])
        elif not self.plural:
            words.append(INDEFINITE[case][key])
        if self.adjective:
            words.append(_adjective_stem(self.adjective[1]) + adjective_ending(case, key, self.article))
        return words + [noun]


@dataclass(frozen=True)
class Clause:
    subject: object  # a NounPhrase or a pronoun tuple
    verb: tuple
    tense: str  # "present", "perfect" or "modal"
    modal: Optional[tuple]
    negated: bool
    obj: Optional[NounPhrase]
    pp: Optional[tuple]  # (preposition, NounPhrase)
    manner: Optional[tuple]
    time: Optional[tuple]

    def _person(self) -> tuple[int, bool]:
        if isinstance(self.subject, NounPhrase):
            return (4, False) if self.subject.plural else (2, True)
        return self.subject[2], self.subject[3]

    def en(self) -> list[str]:
        person, third = self._person()
        subject = self.subject.en() if isinstance(self.subject, NounPhrase) else [self.subject[0]]
        base, s3, participle = self.verb[:3]
        if self.tense == "perfect":
            verbs = ["has" if third else "have"] + (["not"] if self.negated else []) + [participle]
        elif self.tense == "modal":
            modal = self.modal[1] if third else self.modal[0]
            if self.negated and modal.endswith("to"):
                verbs = ["does" if third else "do", "not", self.modal[0], base]
            else:
                verbs = [modal] + (["not"] if self.negated else []) + [base]
        elif self.negated:
            verbs = ["does" if third else "do", "not", base]
        else:
            verbs = [s3 if third else base]
        words = subject + verbs + (self.obj.en() if self.obj else [])
        if self.pp:
            words += [self.pp[0][0]] + self.pp[1].en()
        words += [self.manner[0]] if self.manner else []
        return words + ([self.time[0]] if self.time else [])

    def de_parts(self) -> tuple[list[str], str, list[str], list[str]]:
        """(subject, finite verb, middle field, clause-final verb cluster)."""
        person, _ = self._person()
        subject = self.subject.de("nom") if isinstance(self.subject, NounPhrase) else [self.subject[1]]
        infinitive, participle, auxiliary, irregular = self.verb[3:7]
        if self.tense == "perfect":
            finite, final = present(auxiliary, person), [participle]
        elif self.tense == "modal":
            finite, final = present(self.modal[2], person), [infinitive]
        else:
            finite, final = present(infinitive, person, irregular), []
        middle = [self.time[1]] if self.time else []
        middle += self.obj.de("acc") if self.obj else []
        middle += ["nicht"] if self.negated else []
        middle += [self.manner[1]] if self.manner else []
        if self.pp:
            prep, *noun_phrase = [self.pp[0][1]] + self.pp[1].de("dat")
            contracted = CONTRACTIONS.get((prep, noun_phrase[0]))
            middle += [contracted] + noun_phrase[1:] if contracted else [prep] + noun_phrase
        return subject, finite, middle, final

    def de_main(self, front_time: bool = False) -> list[str]:
        subject, finite, middle, final = self.de_parts()
        if front_time and self.time:
            return [self.time[1], finite] + subject + middle[1:] + final
        return subject + [finite] + middle + final

    def de_inverted(self) -> list[str]:
        """Verb-first order, used after a fronted subordinate clause."""
        subject, finite, middle, final = self.de_parts()
        return [finite] + subject + middle + final

    def de_subordinate(self) -> list[str]:
        subject, finite, middle, final = self.de_parts()
        return subject + middle + final + [finite]


def _noun_phrase(rng: random.Random, nouns: list, adjective_p: float = 0.35) -> NounPhrase:
    plural = rng.random() < 0.3
    article = "def" if rng.random() < 0.6 else "indef"
    adjective = rng.choice(ADJECTIVES) if rng.random() < adjective_p else None
    return NounPhrase(rng.choice(nouns), plural, article, adjective)


def _clause(rng: random.Random, adverbs: bool = True) -> Clause:
    subject = rng.choice(PRONOUNS) if rng.random() < 0.25 else _noun_phrase(rng, ANIMATE)
    transitive = rng.random() < 0.65
    verb = rng.choice(TRANSITIVE if transitive else INTRANSITIVE)
    obj = _noun_phrase(rng, THINGS + ANIMATE) if transitive else None
    tense = rng.choices(["present", "perfect", "modal"], weights=[2, 1, 1])[0]
    modal = rng.choice(MODALS) if tense == "modal" else None
    negated = rng.random() < 0.15 and (obj is None or obj.article == "def")
    pp = None
    if rng.random() < 0.4:
        pp = (rng.choice(PREPOSITIONS), _noun_phrase(rng, PLACES + THINGS, adjective_p=0.2))
    manner = rng.choice(MANNER) if adverbs and rng.random() < 0.15 else None
    time = rng.choice(TIME) if adverbs and rng.random() < 0.2 else None
    return Clause(subject, verb, tense, modal, negated, obj, pp, manner, time)


def _sentence(rng: random.Random) -> tuple[list[str], list[str]]:
    """One pair as word lists (punctuation as separate items)."""
    kind = rng.choices(["simple", "subordinate", "fronted", "reported"], weights=[5, 3, 1, 1])[0]
    if kind == "reported":
        subject = rng.choice(PRONOUNS) if rng.random() < 0.3 else _noun_phrase(rng, ANIMATE)
        third = subject[3] if isinstance(subject, tuple) else not subject.plural
        person = subject[2] if isinstance(subject, tuple) else (2 if third else 4)
        verb = rng.choice(REPORTING)
        inner = _clause(rng, adverbs=False)
        en_subject = subject.en() if isinstance(subject, NounPhrase) else [subject[0]]
        de_subject = subject.de("nom") if isinstance(subject, NounPhrase) else [subject[1]]
        en = en_subject + [verb[1] if third else verb[0], "that"] + inner.en()
        de = de_subject + [present(verb[2], person), ",", "dass"] + inner.de_subordinate()
        return en, de
    main = _clause(rng)
    if kind == "simple":
        front = main.time is not None and rng.random() < 0.4
        en = main.en()
        if front:
            en = [main.time[0]] + en[:-1]
        return en, main.de_main(front_time=front)
    conj = rng.choice(SUBORDINATORS)
    sub = _clause(rng, adverbs=False)
    if kind == "subordinate":
        return main.en() + [conj[0]] + sub.en(), main.de_main() + [",", conj[1]] + sub.de_subordinate()
    return ([conj[0]] + sub.en() + [","] + main.en(),
            [conj[1]] + sub.de_subordinate() + [","] + main.de_inverted())


def _surface(words: list[str]) -> str:
    """Join words, attach punctuation, capitalise the first letter, end with a full stop."""
    text = " ".join(words).replace(" ,", ",") + "."
    return text[0].upper() + text[1:]


def _bucket(english: str) -> int:
    return hashlib.md5(english.encode()).digest()[0] % 10


def _stream(split: str) -> Iterator[tuple[str, str]]:
    """Endless pairs of ``split`` (``train``: bucket >= 2, ``val``: 0, ``test``: 1), 5-20 words."""
    rng = random.Random(f"{SEED}-{split}")
    wanted = {"val": {0}, "test": {1}}.get(split, set(range(2, 10)))
    while True:
        en_text, de_text = (_surface(words) for words in _sentence(rng))
        if not 5 <= len(en_text.split()) <= 20:
            continue
        if _bucket(en_text) in wanted:
            yield en_text, de_text


def generate(split: str, n: int) -> list[tuple[str, str]]:
    """The first ``n`` (English, German) pairs of ``split``; ``val``/``test`` hold distinct pairs."""
    if split not in ("train", "val", "test"):
        raise ValueError(f"builtin split must be train, val or test, not {split!r}")
    pairs, seen = [], set()
    for pair in _stream(split):
        if split != "train":
            if pair[0] in seen:
                continue
            seen.add(pair[0])
        pairs.append(pair)
        if len(pairs) == n:
            return pairs
    raise AssertionError("unreachable")
