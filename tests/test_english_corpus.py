"""The broad-English generator (core/data/english.py) on a small hand-written Lexicon: every family writes English
whose verbs agree with their subjects, held-out families never appear, "it" sentences follow their adjective."""

from __future__ import annotations

import hashlib
import random
import re

import pytest

from core.data import english
from core.data.lexicon import Lexicon, Noun
from tests.english_lexicon import ADJECTIVES, LEXICON, NOUNS, VERBS

SINGULAR = {n.singular for n in NOUNS}
PLURAL = {n.plural for n in NOUNS}
# the form that agrees with a singular subject -> the plural subject's form
FORMS = {"is": "are", "was": "were", "has": "have", "doesn't": "don't", "does": "do",
         **{v.third: v.base for v in VERBS}}


def nouns_in(text: str) -> list[str]:
    """The nouns of a text, in order (this lexicon's words are all distinct)."""
    return [word for word in re.findall(r"[A-Za-z']+", text) if word in SINGULAR | PLURAL]


def head_noun(probe: english.Agreeing) -> str:
    """The noun the verb agrees with: the first of the subject (after the comma of a preposed modifier or a fronted
    clause)."""
    subject = probe.prefix.split(", ", 1)[1] if probe.construction in ("preposed", "fronted_clause") else probe.prefix
    return nouns_in(subject)[0]


@pytest.mark.parametrize("construction", english.AGREEMENT_CONSTRUCTIONS)
def test_the_verb_agrees_with_the_head_of_its_subject(construction):
    probes = english.agreement_probes(construction, 200, 0, LEXICON)
    for probe in probes:
        correct, wrong = probe.correct.strip(), probe.wrong.strip()
        singular_form, plural_form = (wrong, correct) if probe.plural else (correct, wrong)
        assert FORMS[singular_form] == plural_form, probe
        if construction != "coordination":
            assert (head_noun(probe) in PLURAL) == probe.plural, probe
        assert probe.text == probe.prefix + probe.correct + probe.suffix
        assert probe.text[0].isupper() and probe.text.endswith(".")
    numbers = {probe.plural for probe in probes}
    assert numbers == ({True} if construction == "coordination" else {True, False})


@pytest.mark.parametrize("construction", ["pp", "pp_chain", "preposed", "object_relative", "subject_relative"])
def test_attractors_of_the_other_number_are_common(construction):
    """The noun nearest the verb differs in number from the head in most probes: agreement is not 'copy the last
    noun'."""
    probes = english.agreement_probes(construction, 300, 1, LEXICON)
    # a preposed modifier's noun comes before the head: the attractor is the modifier's last noun (a time has none)
    attractors = [nouns_in(p.prefix.split(", ")[0] if construction == "preposed" else p.prefix)[-1:] for p in probes]
    differs = [(attractor[0] in PLURAL) != p.plural for attractor, p in zip(attractors, probes) if attractor]
    assert len(differs) > 150 and sum(differs) / len(differs) > 0.6


def test_relative_clauses_agree_inside_too():
    for probe in english.agreement_probes("subject_relative", 100, 2, LEXICON):
        _, clause = re.match(r"(.*?) (?:that|who) (.*)", probe.prefix).groups()
        verb = clause.split()[0]  # "that chases the cats": agrees with the head
        assert verb in FORMS if not probe.plural else verb in FORMS.values(), probe
    for probe in english.agreement_probes("object_relative", 100, 3, LEXICON):
        _, clause = re.match(r"(.*?) (?:that|who) (.*)", probe.prefix).groups()
        inner_subject_plural = nouns_in(clause)[0] in PLURAL
        verb = clause.split()[-1]  # "that the cats chase": agrees with the clause's own subject
        assert (verb in FORMS.values()) == inner_subject_plural, probe


def test_a_fronted_clause_agrees_with_its_own_subject_mostly_of_the_other_number():
    probes = english.agreement_probes("fronted_clause", 300, 5, LEXICON)
    differs = []
    for probe in probes:
        clause = probe.prefix.split(", ", 1)[0]
        rest = next(clause[len(s) + 1:] for s in english.SUBORDINATORS if clause.startswith(s + " "))
        clause_subject = nouns_in(rest)[0]
        words = rest.split()
        verb = words[words.index(clause_subject) + 1]  # "the cats are hungry": the word after the noun
        assert verb in FORMS or verb in FORMS.values(), probe
        assert (verb in FORMS.values() and verb not in FORMS) == (clause_subject in PLURAL), probe
        differs.append((clause_subject in PLURAL) != probe.plural)
    assert sum(differs) / len(differs) > 0.6


def test_things_act_only_without_an_object():
    """People and animals take any verb; other things only an intransitive one ("The boxes fall."), so the corpus
    has present-tense verbs after every kind of noun, and no "The box chases the cats"."""
    things = {form for noun in NOUNS if not noun.animate for form in (noun.singular, noun.plural)}
    intransitive = {form for verb in VERBS if not verb.transitive for form in (verb.base, verb.third)}
    transitive = {form for verb in VERBS if verb.transitive for form in (verb.base, verb.third)}
    verbs_after_things = [probe for probe in english.agreement_probes("simple", 600, 6, LEXICON)
                          if head_noun(probe) in things and probe.correct.strip() in intransitive | transitive]
    assert verbs_after_things
    for probe in verbs_after_things:
        assert probe.correct.strip() in intransitive and probe.suffix == ".", probe


def test_coordinated_subjects_are_plural_even_when_both_are_singular():
    probes = english.agreement_probes("coordination", 200, 4, LEXICON)
    both_singular = [p for p in probes if all(noun in SINGULAR for noun in nouns_in(p.prefix))]
    assert both_singular and all(p.plural and p.correct.strip() in FORMS.values() for p in both_singular)


def test_held_out_families_are_never_generated():
    held_out = ("preposed", "pp_chain")
    pairs = english.generate_sentences(3000, 5, LEXICON, held_out)
    assert {family for family, _ in pairs} == set(english.CORPORA["english"]) - set(held_out)
    openers = tuple(f"{word[0].upper()}{word[1:]} " for word in LEXICON.prepositions) + english.TIME_MODIFIERS
    preposed_shape = re.compile(r"^[A-Z][a-z ]*(?: the| a| an| this| my| these| those| some)? [a-z ]+, ")
    for family, text in pairs:
        if family in ("dialogue", "number"):  # "In 2024, ..." and quoted talk open otherwise
            continue
        assert not (text.startswith(openers) and preposed_shape.match(text)), text
    # and without holding them out, they are there
    assert {"preposed", "pp_chain"} <= {family for family, _ in english.generate_sentences(3000, 5, LEXICON)}


def test_texts_are_deterministic_and_options_checked():
    first = english.generate_texts(50, 7, LEXICON)
    assert first == english.generate_texts(50, 7, LEXICON) != english.generate_texts(50, 8, LEXICON)
    assert all(1 <= len(re.findall(r"[.?]", text.replace('."', '"').replace('?"', '"'))) for text in first)
    with pytest.raises(ValueError, match="unknown construction"):
        english.generate_texts(5, 0, LEXICON, held_out=("no_such_family",))
    with pytest.raises(ValueError, match="every construction"):
        english.generate_texts(5, 0, LEXICON, held_out=english.CONSTRUCTIONS)
    with pytest.raises(ValueError, match="no agreement probe"):
        english.agreement_probes("dialogue", 5, 0, LEXICON)


@pytest.mark.parametrize("to_animal", [True, False])
def test_it_sentences_follow_their_adjective(to_animal):
    rng = random.Random(0)
    own = set(LEXICON.adjectives_of("animate" if to_animal else "place"))
    other = set(LEXICON.adjectives_of("place" if to_animal else "animate"))
    for _ in range(50):
        text, animal, place = english.it_sentence(rng, LEXICON, to_animal)
        adjective = text.rstrip(".").split()[-1]
        assert adjective in own and adjective not in other
        assert text.startswith(f"The {animal} ") and f" the {place} " in text and " it " in text
        assert animal in SINGULAR and place in SINGULAR


def test_the_first_corpus_is_drawn_bit_for_bit_as_before_the_referent_family():
    """The shipped English LMs were trained on the "english" corpus: adding a family to another corpus leaves its
    texts exactly as they were (the digest of these texts before "referent_number" existed)."""
    texts = english.generate_texts(300, 0, LEXICON, held_out=english.DEFAULT_HELD_OUT)
    assert hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16] == "04985b1dd1dc0eec"
    assert texts == english.generate_texts(300, 0, LEXICON, english.DEFAULT_HELD_OUT, corpus="english")
    families = {family for family, _ in english.generate_sentences(3000, 5, LEXICON, corpus="english-referents")}
    assert families == set(english.CONSTRUCTIONS) and "referent_number" not in english.CORPORA["english"]
    with pytest.raises(ValueError, match="unknown corpus 'nope'"):
        english.generate_texts(5, 0, LEXICON, corpus="nope")


REFERENT = re.compile(r"^The (\w+) [a-z' ]+ the (\w+) (?:because|since|as) (it|they) (was|were|looked|seemed|had become)"
                      r" too (\w+)\.$")


def test_referent_sentences_agree_with_the_noun_their_adjective_picks():
    """ "The dogs didn't cross the street because it was too wide": the pronoun and a was/were take the number of
    the noun the adjective fits (an animate adjective: the animal; one of places: the place), whatever the other
    noun's number; every combination of numbers and both kinds of verb occur."""
    rng = random.Random(2)
    animate, of_places = set(LEXICON.adjectives_of("animate")), set(LEXICON.adjectives_of("place"))
    seen = set()
    for _ in range(400):
        text = english.sentence(rng, LEXICON, "referent_number")
        animal, place, pronoun, verb, adjective = REFERENT.match(text).groups()
        assert adjective in animate ^ of_places
        referent = animal if adjective in animate else place
        plural = referent in PLURAL
        assert pronoun == ("they" if plural else "it"), text
        assert verb not in ("was", "were") or verb == ("were" if plural else "was"), text
        seen.add((animal in PLURAL, place in PLURAL, adjective in animate, verb in ("was", "were")))
    assert len(seen) == 16


def test_every_family_writes_typed_english():
    rng = random.Random(3)
    for construction in english.CONSTRUCTIONS:
        for _ in range(30):
            text = english.sentence(rng, LEXICON, construction)
            assert text[0].isupper() or text[0] == '"', (construction, text)
            assert text.rstrip('"')[-1] in ".?", (construction, text)
            assert "  " not in text and " ." not in text and " ," not in text
            assert not re.search(r"\ba [aeiou]", text), text  # "an old", never "a old"
    words = " ".join(english.generate_texts(400, 9, LEXICON))
    for sign in ("n't", '"', "?", ",", "Sarah", "London"):
        assert sign in words
    assert re.search(r"\d", words) and re.search(r" (he|she|He|She|it|they|They|I|We|You|you|we) ", words)
    assert english.DESCRIPTIONS.keys() == set(english.CONSTRUCTIONS)


def test_a_lexicon_is_checked():
    with pytest.raises(ValueError, match="plural is its singular"):
        Lexicon((*NOUNS, Noun("sheep", "sheep", "animal")), VERBS, ADJECTIVES)
    with pytest.raises(ValueError, match="kind place"):
        Lexicon(tuple(n for n in NOUNS if n.kind != "place"), VERBS, ADJECTIVES)
    with pytest.raises(ValueError, match="transitive"):
        Lexicon(NOUNS, tuple(v for v in VERBS if not v.transitive), ADJECTIVES)
    assert LEXICON.size()["nouns (animal)"] == 2
