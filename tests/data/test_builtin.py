"""The synthetic en-de task: deterministic, disjoint splits, real reordering and agreement."""

from __future__ import annotations

import pytest

from ablate.data import builtin
from ablate.data.builtin import NounPhrase, Clause, present
from ablate.data.errors import DataError
from ablate.data.sources import BuiltinTask

FINITE = {present(v[3], p, v[6]) for v in builtin.TRANSITIVE + builtin.INTRANSITIVE for p in range(5)}
FINITE |= {form for forms in builtin.IRREGULAR_PRESENT.values() for form in forms}


def test_generation_is_deterministic_and_prefix_stable():
    assert builtin.generate("train", 300) == builtin.generate("train", 300)
    assert builtin.generate("train", 100) == builtin.generate("train", 300)[:100]
    assert builtin.generate("val", 50) == builtin.generate("val", 50)


def test_splits_are_disjoint_and_sentence_lengths_bounded():
    train = builtin.generate("train", 2000)
    val, test = builtin.generate("val", 300), builtin.generate("test", 300)
    en = {split: {e for e, _ in pairs} for split, pairs in (("train", train), ("val", val), ("test", test))}
    assert not en["train"] & en["val"] and not en["train"] & en["test"] and not en["val"] & en["test"]
    assert len(en["val"]) == 300  # eval sets hold distinct sentences
    assert all(5 <= len(e.split()) <= 20 for e, _ in train + val + test)


def test_vocabulary_is_modest():
    pairs = builtin.generate("train", 3000)
    for side in (0, 1):
        words = {w.strip(".,").lower() for pair in pairs for w in pair[side].split()}
        assert 100 < len(words) < 700


def test_subordinate_clauses_are_verb_final():
    pairs = [p for p in builtin.generate("train", 1500) if " because " in p[0] and "weil" in p[1]]
    assert len(pairs) > 30
    for en, de in pairs:
        clause = de.split("weil ", 1)[1]
        last = clause.split(",")[0].rstrip(".").split()[-1]
        assert last in FINITE, (en, de)


def test_modal_sends_infinitive_to_the_clause_end():
    man = NounPhrase(builtin.ANIMATE[0], plural=False, article="def", adjective=None)
    dog = NounPhrase(builtin.ANIMATE[4], plural=False, article="def", adjective=builtin.ADJECTIVES[0])
    see = builtin.TRANSITIVE[0]
    clause = Clause(man, see, "modal", builtin.MODALS[0], False, dog, None, None, None)
    assert clause.en() == ["the", "man", "can", "see", "the", "big", "dog"]
    assert clause.de_main() == ["der", "Mann", "kann", "den", "großen", "Hund", "sehen"]
    perfect = Clause(man, see, "perfect", None, True, dog, None, None, builtin.TIME[0])
    assert builtin._surface(perfect.de_main(front_time=True)) == "Heute hat der Mann den großen Hund nicht gesehen."
    assert perfect.de_subordinate()[-2:] == ["gesehen", "hat"]


def test_agreement_follows_gender_number_case():
    cat = builtin.ANIMATE[5]  # die Katze (f)
    house = builtin.THINGS[6]  # das Haus (n)
    assert NounPhrase(cat, False, "indef", builtin.ADJECTIVES[1]).de("acc") == ["eine", "kleine", "Katze"]
    assert NounPhrase(house, False, "indef", builtin.ADJECTIVES[2]).de("nom") == ["ein", "altes", "Haus"]
    assert NounPhrase(house, True, "def", None).de("dat") == ["den", "Häusern"]
    assert NounPhrase(house, True, "indef", builtin.ADJECTIVES[9]).de("acc") == ["müde", "Häuser"]
    assert [present("sehen", p, ("siehst", "sieht")) for p in range(5)] == ["sehe", "siehst", "sieht", "sehen", "sehen"]
    assert present("arbeiten", 2) == "arbeitet" and present("tanzen", 1) == "tanzt"


def test_alignment_is_not_monotonic():
    """'can see the dog' -> 'kann den Hund sehen': words come between the modal and the verb."""
    infinitives = {v[0]: v[3] for v in builtin.TRANSITIVE}
    modal_forms = {"kann", "kannst", "können"}
    separated = 0
    for en, de in builtin.generate("train", 600):
        en_words, de_words = en.rstrip(".").split(), de.rstrip(".").replace(",", "").split()
        for i, word in enumerate(en_words[:-1]):
            if word == "can" and en_words[i + 1] in infinitives and infinitives[en_words[i + 1]] in de_words:
                modal = next(j for j, w in enumerate(de_words) if w in modal_forms)
                separated += de_words.index(infinitives[en_words[i + 1]]) - modal > 2
    assert separated > 10


@pytest.mark.parametrize("src,tgt", [("en", "fr"), ("de", "de"), ("fr", "en")])
def test_builtin_rejects_other_languages(src, tgt, make_cfg):
    with pytest.raises(DataError, match="builtin task translates between en and de"):
        BuiltinTask(make_cfg("builtin", src_lang=src, tgt_lang=tgt), cache_root=None)


def test_builtin_reverse_direction_swaps_sides(make_cfg, tmp_path):
    corpus = BuiltinTask(make_cfg("builtin", src_lang="de", tgt_lang="en", builtin_pairs=20), None).load(tmp_path)
    en, de = builtin.generate("train", 1)[0]
    assert corpus.splits["train"][0] == {"src": de, "tgt": en}
