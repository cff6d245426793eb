"""The synthetic en-de task: deterministic, disjoint splits, real reordering and agreement."""

from __future__ import annotations

from collections import Counter

import pytest

from ablate.data import builtin
from ablate.data.builtin import IRREGULAR_PRESENT, Clause, Gap, NounPhrase, present
from ablate.data.sources import BuiltinTask, DataError

FINITE = {present(v[3].split("|")[-1], p, v[6]) for v in builtin.TRANSITIVE + builtin.INTRANSITIVE for p in range(5)}
FINITE |= {form for forms in IRREGULAR_PRESENT.values() for form in forms}
FINITE_SUBORDINATE = FINITE | {
    v[3].split("|")[0] + present(v[3].split("|")[1], p, v[6])
    for v in builtin.TRANSITIVE + builtin.INTRANSITIVE
    if "|" in v[3]
    for p in range(5)
}


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
    assert all(5 <= len(e.replace(",", "").split()) <= 45 for e, _ in train + val + test)


def test_sentences_are_long_enough_to_need_attention():
    """Bahdanau et al. (2015, Fig. 2): a fixed-length encoding breaks down beyond ~20 words."""
    lengths = [len(e.split()) for e, _ in builtin.generate("test", 500)]
    assert sum(lengths) / len(lengths) > 12
    assert sum(n > 20 for n in lengths) > 50 and max(lengths) > 30


def test_lexicon_is_large_with_a_long_tail():
    pairs = builtin.generate("train", 8000)
    counts = Counter(w.strip(".,").lower() for _, de in pairs for w in de.split())
    assert len(counts) > 500
    nouns = [n[2] for n in builtin.ANIMATE + builtin.THINGS + builtin.PLACES]
    noun_counts = sorted((counts[n.lower()] for n in nouns), reverse=True)
    assert noun_counts[0] > 20 * noun_counts[-1]  # Zipfian: the head is far more frequent than the tail
    assert sum(n == 1 for n in counts.values()) > 300  # compounds: a long tail of words seen once
    unseen = [
        de for _, de in builtin.generate("test", 500) if any(w.strip(".,").lower() not in counts for w in de.split())
    ]
    assert len(unseen) > 25  # the test set holds words never seen in training, to translate from their parts


def test_compounds_are_one_german_word_with_the_heads_gender():
    kitchen, table = builtin.PLACES[2], builtin.THINGS[4]  # die Küche, der Tisch
    kitchen_table = builtin.compound(kitchen, table)
    assert kitchen_table == ("kitchen table", "kitchen tables", "Küchentisch", "Küchentische", "m")
    assert NounPhrase(kitchen_table, True, "def", None).de("dat") == ["den", "Küchentischen"]
    assert NounPhrase(kitchen_table, False, "indef", None).en() == ["a", "kitchen table"]


def test_relative_clauses_nest():
    pairs = builtin.generate("train", 1000)
    relative = [de for _, de in pairs if any(f", {p} " in de for p in ("der", "die", "das", "den"))]
    assert len(relative) > 300
    assert sum(de.count(",") >= 3 and (" who " in en or " that " in en) for en, de in pairs) > 30


def test_subordinate_clauses_are_verb_final():
    man = NounPhrase(builtin.ANIMATE[0], plural=False, article="def", adjective=None)
    dog = NounPhrase(builtin.ANIMATE[3], plural=False, article="def", adjective=None)
    clause = Clause(man, builtin.TRANSITIVE[0], "present", None, False, dog, None, None, None)
    assert clause.de_subordinate() == ["der", "Mann", "den", "Hund", "sieht"]
    pairs = [p for p in builtin.generate("train", 1500) if " because " in p[0] and "weil" in p[1]]
    assert len(pairs) > 30
    for en, de in pairs:
        clause = de.split("weil ", 1)[1].rstrip(".")
        if "," not in clause:  # the sentence ends with the subordinate clause: its verb is last
            assert clause.split()[-1] in FINITE_SUBORDINATE, (en, de)


def test_modal_sends_infinitive_to_the_clause_end():
    man = NounPhrase(builtin.ANIMATE[0], plural=False, article="def", adjective=None)
    dog = NounPhrase(builtin.ANIMATE[3], plural=False, article="def", adjective=builtin.ADJECTIVES[0])
    see = builtin.TRANSITIVE[0]
    clause = Clause(man, see, "modal", builtin.MODALS[0], False, dog, None, None, None)
    assert clause.en() == ["the", "man", "can", "see", "the", "big", "dog"]
    assert clause.de_main() == ["der", "Mann", "kann", "den", "großen", "Hund", "sehen"]
    perfect = Clause(man, see, "perfect", None, True, dog, None, None, builtin.TIME[0])
    assert builtin._surface(perfect.de_main(front_time=True)) == "Heute hat der Mann den großen Hund nicht gesehen."
    assert perfect.de_subordinate()[-2:] == ["gesehen", "hat"]


def test_separable_prefix_ends_the_main_clause_and_joins_the_verb_in_a_subordinate_one():
    call = next(v for v in builtin.TRANSITIVE if v[0] == "call")
    woman = NounPhrase(builtin.ANIMATE[1], plural=False, article="def", adjective=None)
    friend = NounPhrase(builtin.ANIMATE[8], plural=False, article="indef", adjective=builtin.ADJECTIVES[2])
    clause = Clause(woman, call, "present", None, False, friend, None, None, builtin.TIME[0])
    assert clause.en() == ["the", "woman", "calls", "an", "old", "friend", "today"]
    assert clause.de_main() == ["die", "Frau", "ruft", "heute", "einen", "alten", "Freund", "an"]
    assert clause.de_subordinate()[-1] == "anruft"
    assert Clause(woman, call, "perfect", None, False, friend, None, None, None).de_main()[-1] == "angerufen"


def test_relative_clauses_agree_with_their_antecedent_across_the_clause():
    see, sleep = builtin.TRANSITIVE[0], builtin.INTRANSITIVE[0]
    book = builtin.THINGS[0]  # das Buch (n)
    men = NounPhrase(builtin.ANIMATE[0], plural=True, article="def", adjective=None)
    # subject relative on a plural subject: pronoun "die", both verbs plural
    relative = Clause(
        Gap(True, "pl", True),
        see,
        "present",
        None,
        False,
        NounPhrase(builtin.ANIMATE[3], False, "def", None),
        None,
        None,
        None,
    )
    subject = NounPhrase(builtin.ANIMATE[0], True, "def", None, relative)
    main = Clause(subject, sleep, "present", None, False, None, None, None, None)
    assert builtin._surface(main.en()) == "The men who see the dog sleep."
    assert builtin._surface(main.de_main()) == "Die Männer, die den Hund sehen, schlafen."
    # object relative on a neuter object: pronoun "das" moves to the front of its clause
    relative = Clause(men, see, "perfect", None, False, Gap(False, "n", False), None, None, None)
    obj = NounPhrase(book, False, "def", None, relative)
    main = Clause(("I", "ich", 0, False), builtin.TRANSITIVE[1], "present", None, False, obj, None, None, None)
    assert builtin._surface(main.en()) == "I buy the book that the men have seen."
    assert builtin._surface(main.de_main()) == "Ich kaufe das Buch, das die Männer gesehen haben."


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
    """'can see the dog' -> 'kann den Hund sehen', 'calls the dog' -> 'ruft den Hund an'."""
    infinitives = {v[0]: v[3].replace("|", "") for v in builtin.TRANSITIVE}
    modal_forms = {"kann", "kannst", "können"}
    separated = 0
    for en, de in builtin.generate("train", 600):
        en_words, de_words = en.rstrip(".").split(), de.rstrip(".").replace(",", "").split()
        for i, word in enumerate(en_words[:-1]):
            if word == "can" and en_words[i + 1] in infinitives and infinitives[en_words[i + 1]] in de_words:
                modal = next(j for j, w in enumerate(de_words) if w in modal_forms)
                separated += de_words.index(infinitives[en_words[i + 1]]) - modal > 2
    assert separated > 10
    particles = sum(
        de.rstrip(".").split(",")[0].split()[-1] in {"an", "ab", "ein", "zu", "auf", "mit", "aus", "zurück"}
        for _, de in builtin.generate("train", 2000)
    )
    assert particles > 30


def test_surface_drops_a_relative_clause_comma_before_another_or_the_full_stop():
    assert (
        builtin._surface(["der", "Hund", ",", "der", "schläft", ",", ",", "weil", "x", ","])
        == "Der Hund, der schläft, weil x."
    )
    for _, de in builtin.generate("train", 2000):
        assert ",," not in de and ", ," not in de and not de.endswith(",.")


@pytest.mark.parametrize("src,tgt", [("en", "fr"), ("de", "de"), ("fr", "en")])
def test_builtin_rejects_other_languages(src, tgt, make_cfg):
    with pytest.raises(DataError, match="builtin task translates between en and de"):
        BuiltinTask(make_cfg("builtin", src_lang=src, tgt_lang=tgt), cache_root=None)


def test_builtin_reverse_direction_swaps_sides(make_cfg, tmp_path):
    corpus = BuiltinTask(make_cfg("builtin", src_lang="de", tgt_lang="en", builtin_pairs=20), None).load(tmp_path)
    en, de = builtin.generate("train", 1)[0]
    assert corpus.splits["train"][0] == {"src": de, "tgt": en}


def test_builtin_eval_pairs_sizes_val_and_test_as_prefixes_of_the_default(make_cfg, tmp_path):
    small = BuiltinTask(make_cfg("builtin", builtin_pairs=20, builtin_eval_pairs=7), None)
    corpus = small.load(tmp_path)
    assert len(corpus.splits["val"]) == len(corpus.splits["test"]) == 7
    assert [r["src"] for r in corpus.splits["val"]] == [en for en, _ in builtin.generate("val", 7)]
    assert small.fingerprint() != BuiltinTask(make_cfg("builtin", builtin_pairs=20), None).fingerprint()
    with pytest.raises(DataError, match="builtin_eval_pairs=0 must be positive"):
        BuiltinTask(make_cfg("builtin", builtin_eval_pairs=0), None)
