"""The real lexicon (core/data/lexicon.py), built from wordfreq, lemminflect, inflect and WordNet as at training
time, on the 4,000 most frequent words (the corpus uses 20,000)."""

from __future__ import annotations

import pytest

from core.data import lexicon

pytest.importorskip("wordfreq", reason="the training requirements (requirements-train.txt) are not installed")
if not (lexicon.WORDNET_DIR / "data.noun").exists():
    pytest.skip("Debian's wordnet-base is not installed (.ci/run installs it)", allow_module_level=True)


@pytest.fixture(scope="module")
def real() -> lexicon.Lexicon:
    return lexicon.build_lexicon(top=4000)


def test_common_words_get_their_kind_and_forms(real):
    nouns = {noun.singular: noun for noun in real.nouns}
    assert {word: nouns[word].kind for word in ("dog", "horse", "teacher", "doctor", "street", "river", "key", "car")} \
        == {"dog": "animal", "horse": "animal", "teacher": "person", "doctor": "person", "street": "place",
            "river": "place", "key": "object", "car": "object"}
    assert nouns["child"].plural == "children" and nouns["woman"].plural == "women" and nouns["city"].plural == "cities"
    verbs = {verb.base: verb for verb in real.verbs}
    assert (verbs["carry"].third, verbs["carry"].past, verbs["carry"].ing) == ("carries", "carried", "carrying")
    assert verbs["eat"].past == "ate" and verbs["eat"].transitive
    assert not verbs["arrive"].transitive


def test_it_is_broad_and_clean(real):
    size = real.size()
    assert sum(size[f"nouns ({kind})"] for kind in lexicon.NOUN_KINDS) > 1000
    assert size["verbs (transitive)"] + size["verbs (intransitive)"] > 300
    assert size["adjectives (any)"] > 300
    assert all(size[f"nouns ({kind})"] >= 10 for kind in lexicon.NOUN_KINDS)
    words = {n.singular for n in real.nouns} | {v.base for v in real.verbs} | {a.word for a in real.adjectives}
    assert not words & lexicon.FUNCTION_WORDS
    assert not words & lexicon.UNMARKED_OFFENSIVE
    assert all(not lexicon.is_marked(word) for word in words)
    assert lexicon.is_marked("bitch")  # WordNet's own marks are read (a noun marked as disparaging)
    assert all(noun.plural != noun.singular for noun in real.nouns)
    assert "London" in real.cities and "Nice" not in real.cities  # a city that is also a word is left out


def test_the_minimal_pairs_vocabulary_is_drawn_by_rank_from_wordfreq():
    """Not chosen by us: wordfreq's most frequent words that lemminflect reads as one part of speech only."""
    from wordfreq import zipf_frequency

    from core.data.minimal_pairs import N_NOUNS, N_VERBS, vocabulary

    words = vocabulary()
    assert len(words.nouns) == N_NOUNS and len(words.verbs) == N_VERBS and len(words.irregular) >= 20
    frequencies = [zipf_frequency(singular, "en") for singular, _ in words.nouns]
    assert frequencies == sorted(frequencies, reverse=True)  # in rank order, none skipped for taste
    assert ("child", "children") in words.irregular and ("woman", "women") in words.irregular
    assert ("street", "streets") in words.nouns
    assert not {"information", "these", "nothing"} & {singular for singular, _ in words.nouns}
    assert ("know", "knows", "knew") in words.verbs
