"""German inflection for the built-in task: articles, present-tense verbs, adjective endings, dative plurals.

Only what the grammar of :mod:`ablate.data.builtin` generates: three cases (nominative,
accusative, dative), three genders and the plural, and the weak, mixed and strong adjective
declensions.
"""

from __future__ import annotations

from typing import Optional

from ablate.data.lexicon import IRREGULAR_PRESENT

DEFINITE = {
    "nom": {"m": "der", "f": "die", "n": "das", "pl": "die"},
    "acc": {"m": "den", "f": "die", "n": "das", "pl": "die"},
    "dat": {"m": "dem", "f": "der", "n": "dem", "pl": "den"},
}
INDEFINITE = {
    "nom": {"m": "ein", "f": "eine", "n": "ein"},
    "acc": {"m": "einen", "f": "eine", "n": "ein"},
    "dat": {"m": "einem", "f": "einer", "n": "einem"},
}


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


def adjective_stem(adjective: str) -> str:
    """``dunkel`` -> ``dunkl``, ``müde`` -> ``müd``: the form endings attach to."""
    if adjective.endswith("el"):
        return adjective[:-2] + "l"
    return adjective[:-1] if adjective.endswith("e") else adjective


def dative_plural(noun: str) -> str:
    """``Kinder`` -> ``Kindern``: the dative plural adds -n unless the plural ends in -n or -s."""
    return noun if noun.endswith(("n", "s")) else noun + "n"
