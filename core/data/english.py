"""A corpus of broad English generated from a Lexicon (core/data/lexicon.py) by named families of constructions.

Every sentence is written as typed English: capitals, commas, contractions, quotes and digits. Each comes from one
family of CONSTRUCTIONS (a model card lists them), and `generate_texts(..., held_out=...)` leaves named families out,
so that an evaluation can probe constructions a model never read (core/training/english_eval.py). Subject-verb
agreement is right everywhere, across attractors too: is/are, was/were, has/have, does/do, isn't/aren't,
doesn't/don't and the 3rd person -s, with the verb agreeing with the head noun of its subject.

The families whose subject agrees with a verb (AGREEMENT_CONSTRUCTIONS) are written as an `Agreeing`: the text up to
the verb, the verb form that agrees, the one that does not, and the rest. A sentence is prefix + correct + suffix;
an agreement probe is the same parts (agreement_probes), so a probe of a held-out family is exactly what training
would have generated.

The "it" sentences (family "it_reference") give a pronoun its referent by meaning alone: "The dog didn't cross the
street because it was too tired" (it: the dog, an animate adjective) or "... too wide" (it: the street, an adjective
of places); both nouns are singular, so only meaning tells them apart. The corpus "english-referents" adds the
family "referent_number": the same sentences with each noun singular or plural and the pronoun agreeing with its
referent ("The dogs didn't cross the street because it was too wide"), often with a verb that shows no number
("... because they looked too tired"). A masked pronoun, a masked noun's number or a masked adjective there can
only be predicted by finding the referent, which gives a masked-token model a reason to resolve "it".

All randomness goes through an explicit random.Random; nothing touches the global generator.

    python -m core.data.english --sample 20       # the lexicon's size and 20 texts (builds the real lexicon)
    python -m core.data.english --tokenizer       # learn assets/tokenizer-english.json from the corpus
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from core.data.lexicon import Lexicon, Noun, Verb
from core.tokenizers.subword import ENGLISH_TOKENIZER_PATH, VOCAB_SIZE, train_tokenizer

# A Lexicon's lists are most frequent first (build_lexicon keeps wordfreq's order; a hand-written one, as written):
# words are drawn by pick, frequent ones more often, so a corpus's words follow something like their real frequency.

TRAIN_SEED = 0
HELDOUT_SEED = 1

# the families whose sentences have a subject and a verb that agrees with it
AGREEMENT_CONSTRUCTIONS = ("simple", "pp", "pp_chain", "subject_relative", "object_relative", "preposed",
                           "fronted_clause", "name_attractor", "adjective_string", "coordination")
OTHER_CONSTRUCTIONS = ("question", "negation", "pronoun", "dialogue", "number", "it_reference", "everyday")
REFERENT_CONSTRUCTIONS = ("referent_number",)
CONSTRUCTIONS = AGREEMENT_CONSTRUCTIONS + OTHER_CONSTRUCTIONS + REFERENT_CONSTRUCTIONS
# the families a corpus draws from: "english" as its first models were trained (their corpus stays bit for bit)
CORPORA = {"english": AGREEMENT_CONSTRUCTIONS + OTHER_CONSTRUCTIONS, "english-referents": CONSTRUCTIONS}
DESCRIPTIONS = {
    "simple": "a noun phrase and its predicate: The old keys are on the table.",
    "pp": "a subject with one prepositional phrase whose noun may differ in number: The keys near the box are red.",
    "pp_chain": "two or three prepositional phrases in a row: The key to the boxes near the doors is red.",
    "subject_relative": "a subject relative clause: The dog that chases the cats is tired.",
    "object_relative": "an object relative clause: The dog that the cats chase is tired.",
    "preposed": "a modifier before the subject: Near the boxes, the dog is asleep.",
    "fronted_clause": "a clause with its own subject before the main one: When the cats are hungry, the dog sleeps.",
    "name_attractor": "a name inside the subject: The friends of Sarah are here.",
    "adjective_string": "three or four adjectives before the noun: The big old red dogs are here.",
    "coordination": "two subjects joined by 'and' (a plural): The dog and the cat are tired.",
    "question": "yes/no and wh- questions: Are the keys on the table? What does the dog want?",
    "negation": "negated predicates, contracted or not: The dogs don't like the rain. The key isn't here.",
    "pronoun": "a named person, then he or she; I, you, we, they and it as subjects",
    "dialogue": "short exchanges in quotes: \"Where are the keys?\" asked Sarah.",
    "number": "numbers as digits and as words: There are 12 dogs in the garden. Sarah has three cats.",
    "it_reference": "'it' resolved by meaning: The dog didn't cross the street because it was too tired/wide.",
    "everyday": "what a class types about itself: My name is Sarah and I live in London. Hello, how are you?",
    "referent_number": "'it' or 'they' agreeing with the referent the meaning picks: The dogs didn't cross the "
                       "street because it was too wide.",
}
DEFAULT_HELD_OUT = ("pp_chain", "preposed")  # the constructions the issue found models failing on, out of template

ZIPF_SKEW = 2.5  # see pick
SINGULAR_DETERMINERS = ("the", "the", "the", "a", "this", "that", "my", "your", "our", "every")
PLURAL_DETERMINERS = ("the", "the", "the", "these", "those", "some", "many", "my", "your", "our", "all the")
NUMBER_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 7: "seven", 10: "ten", 12: "twelve",
                20: "twenty", 100: "a hundred"}
TIME_MODIFIERS = ("Yesterday", "Today", "This morning", "Last week", "At night", "Every day", "Sometimes",
                  "After lunch", "In the evening", "Before school")
# none is a preposition, so a fronted clause never reads as a preposed PP
SUBORDINATORS = ("When", "While", "Because", "If", "Although", "Whenever", "Even though", "Now that")
SAY_VERBS = ("said", "asked", "replied", "shouted", "whispered", "answered")
IT_VERBS = ("cross", "enter", "reach", "go into", "get to", "walk through")
IT_NEGATIONS = ("didn't", "did not", "couldn't", "could not", "wouldn't", "refused to")
IT_LINKS = ("because it was too", "because it was so", "since it was too", "as it was too")
IT_PLACE_VERBS = ("blocked", "delayed", "confused", "surprised", "held up", "kept back")  # the place first: "The
# street blocked the dog because it was too tired" (core/training/referent.py teaches on these; never the corpus)
REFERENT_CONJUNCTIONS = ("because", "because", "since", "as")
NUMBERLESS_VERBS = ("looked", "seemed", "had become")  # the same after "it" and "they": no number to copy
ANSWERS = ("Yes, I do.", "No, I don't.", "No, I do not.")
GREETINGS = ("Hello", "Hi", "Good morning", "Good evening", "Thank you", "Yes", "No", "Sorry", "Excuse me")
PRONOUN_BE = {"I": "am", "you": "are", "we": "are", "they": "are", "he": "is", "she": "is", "it": "is"}


@dataclass(frozen=True)
class Agreeing:
    """A sentence whose verb agrees with its subject: prefix + correct + suffix; `wrong` the other number's form.
    The forms carry their leading space (" are"), as the verb's first piece does."""

    construction: str
    prefix: str
    correct: str
    wrong: str
    suffix: str
    plural: bool  # the subject's number: True when the correct form is the plural one

    @property
    def text(self) -> str:
        return self.prefix + self.correct + self.suffix


# ---------------------------------------------------------------------------------------------------------
# Pieces: noun phrases, verb forms, predicates
# ---------------------------------------------------------------------------------------------------------

def _article(determiner: str, next_word: str) -> str:
    return "an" if determiner == "a" and next_word[:1].lower() in "aeiou" else determiner


def noun_phrase(rng: random.Random, lex: Lexicon, noun: Noun, plural: bool, adjectives: int | None = None) -> str:
    """"the old key", "some dogs": a determiner of the right number, 0-2 adjectives (or `adjectives`) that suit
    the noun, the noun in its number."""
    count = rng.choice((0, 0, 0, 1, 1, 2)) if adjectives is None else adjectives
    words = [adjective_for(rng, lex, noun) for _ in range(count)]
    words = list(dict.fromkeys(words)) + [noun.plural if plural else noun.singular]
    determiner = rng.choice(PLURAL_DETERMINERS if plural else SINGULAR_DETERMINERS)
    return f"{_article(determiner, words[0])} {' '.join(words)}"


def pick(rng: random.Random, words: Sequence):
    """A word of a list that is most frequent first, frequent ones more often: index ⌊len · u^ZIPF_SKEW⌋ for u
    uniform in [0, 1), so the first tenth of the list is drawn 10^(-1/ZIPF_SKEW) = 40 % of the time."""
    return words[int(len(words) * rng.random() ** ZIPF_SKEW)]


def adjective_for(rng: random.Random, lex: Lexicon, noun: Noun) -> str:
    """An adjective that fits the noun: a general one, or (30 %) for animals and people an animate one ("tired"),
    for places one of places ("wide")."""
    own = {"person": "animate", "animal": "animate", "place": "place"}.get(noun.kind)
    if own and rng.random() < 0.3:
        return rng.choice(lex.adjectives_of(own))
    return pick(rng, lex.adjectives_of("any"))


def _be(plural: bool, past: bool) -> tuple[str, str]:
    """(the form that agrees, the one that does not)."""
    forms = ("was", "were") if past else ("is", "are")
    return (forms[1], forms[0]) if plural else forms


def _present(verb: Verb, plural: bool) -> tuple[str, str]:
    return (verb.base, verb.third) if plural else (verb.third, verb.base)


def predicate(rng: random.Random, lex: Lexicon, subject: Noun, plural: bool) -> tuple[str, str, str]:
    """(correct first word, wrong first word, rest) of a predicate that agrees with a subject of this number and
    suits its kind: people and animals act (verbs), other things only without an object ("The prices rise"),
    anything can be somewhere or be described."""
    kinds = ["be_adjective", "be_place", "has"] + (["verb", "does_not", "was_ing"] * 2 if subject.animate
                                                   else ["intransitive"])
    kind = rng.choice(kinds)
    if kind == "be_adjective":
        correct, wrong = _be(plural, rng.random() < 0.4)
        return correct, wrong, f" {adjective_for(rng, lex, subject)}"
    if kind == "be_place":
        correct, wrong = _be(plural, rng.random() < 0.4)
        return correct, wrong, f" {_prepositional(rng, lex)}"
    if kind == "has":
        correct, wrong = ("have", "has") if plural else ("has", "have")
        return correct, wrong, f" {noun_phrase(rng, lex, pick(rng, lex.nouns_of('object', 'animal')), rng.random() < 0.5)}"
    if kind == "was_ing":
        correct, wrong = _be(plural, True)
        verb = pick(rng, lex.verbs)
        return correct, wrong, f" {verb.ing}{_object(rng, lex, verb)}"
    verb = pick(rng, lex.verbs_of(False) if kind == "intransitive" else lex.verbs)
    if kind == "does_not":
        correct, wrong = ("don't", "doesn't") if plural else ("doesn't", "don't")
        if rng.random() < 0.3:
            correct, wrong = ("do", "does") if plural else ("does", "do")
            return correct, wrong, f" not {verb.base}{_object(rng, lex, verb)}"
        return correct, wrong, f" {verb.base}{_object(rng, lex, verb)}"
    correct, wrong = _present(verb, plural)
    return correct, wrong, _object(rng, lex, verb)


def _object(rng: random.Random, lex: Lexicon, verb: Verb) -> str:
    if not verb.transitive:
        return ""
    noun = pick(rng, lex.nouns)
    return f" {noun_phrase(rng, lex, noun, rng.random() < 0.5)}"


def _prepositional(rng: random.Random, lex: Lexicon, plural: bool | None = None) -> str:
    """"near the boxes": a preposition and a noun phrase (of the given number, else either)."""
    noun = pick(rng, lex.nouns_of("place", "object", "animal", "person", "abstract"))
    number = rng.random() < 0.5 if plural is None else plural
    return f"{rng.choice(lex.prepositions)} {noun_phrase(rng, lex, noun, number)}"


def _mostly_other_number(rng: random.Random, plural: bool) -> bool:
    """The number of a second noun: the other one 70 % of the time (an attractor), else either."""
    return (not plural) if rng.random() < 0.7 else rng.random() < 0.5


def _subject_noun(rng: random.Random, lex: Lexicon) -> Noun:
    """Mostly people and animals (they take every predicate), sometimes places, objects and abstract things."""
    kinds = ("person", "animal") if rng.random() < 0.7 else ("place", "object", "abstract")
    return pick(rng, lex.nouns_of(*kinds))


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _agreeing(construction: str, rng: random.Random, lex: Lexicon, subject: Noun, plural: bool,
              prefix: str) -> Agreeing:
    correct, wrong, rest = predicate(rng, lex, subject, plural)
    return Agreeing(construction, _capital(prefix), f" {correct}", f" {wrong}", f"{rest}.", plural)


# ---------------------------------------------------------------------------------------------------------
# The families with agreement: each gives an Agreeing
# ---------------------------------------------------------------------------------------------------------

def _simple(rng: random.Random, lex: Lexicon) -> Agreeing:
    subject, plural = _subject_noun(rng, lex), rng.random() < 0.5
    return _agreeing("simple", rng, lex, subject, plural, noun_phrase(rng, lex, subject, plural))


def _pp(rng: random.Random, lex: Lexicon, construction: str = "pp", phrases: int = 1) -> Agreeing:
    """The head, then `phrases` prepositional phrases; the first one's noun of the other number half the time more
    often than not (an attractor)."""
    subject, plural = _subject_noun(rng, lex), rng.random() < 0.5
    modifiers = [_prepositional(rng, lex, (not plural) if rng.random() < 0.7 else None) for _ in range(phrases)]
    return _agreeing(construction, rng, lex, subject, plural,
                     " ".join([noun_phrase(rng, lex, subject, plural), *modifiers]))


def _pp_chain(rng: random.Random, lex: Lexicon) -> Agreeing:
    return _pp(rng, lex, "pp_chain", rng.choice((2, 2, 3)))


def _relative(rng: random.Random, lex: Lexicon, construction: str) -> Agreeing:
    """"the dog that chases the cats" (subject relative: its verb agrees with the head) or "the dog that the
    cats chase" (object relative: with the relative clause's own subject), then the head's predicate."""
    subject, plural = pick(rng, lex.nouns_of("person", "animal")), rng.random() < 0.5
    other = pick(rng, lex.nouns_of("person", "animal"))
    other_plural = _mostly_other_number(rng, plural)
    verb = pick(rng, lex.verbs_of(True))
    relativizer = rng.choice(("that", "who")) if subject.kind == "person" else "that"
    if construction == "subject_relative":
        clause = f"{relativizer} {_present(verb, plural)[0]} {noun_phrase(rng, lex, other, other_plural)}"
    else:
        clause = f"{relativizer} {noun_phrase(rng, lex, other, other_plural)} {_present(verb, other_plural)[0]}"
    return _agreeing(construction, rng, lex, subject, plural, f"{noun_phrase(rng, lex, subject, plural)} {clause}")


def _preposed(rng: random.Random, lex: Lexicon) -> Agreeing:
    """A prepositional phrase, a time or a city before the subject: "Near the boxes, the dog ..."."""
    subject, plural = _subject_noun(rng, lex), rng.random() < 0.5
    roll = rng.random()
    if roll < 0.6:
        modifier = _prepositional(rng, lex, not plural if rng.random() < 0.7 else None)
    elif roll < 0.8 or not lex.cities:
        modifier = rng.choice(TIME_MODIFIERS)
    else:
        modifier = f"in {pick(rng, lex.cities)}"
    return _agreeing("preposed", rng, lex, subject, plural,
                     f"{_capital(modifier)}, {noun_phrase(rng, lex, subject, plural)}")


def _fronted_clause(rng: random.Random, lex: Lexicon) -> Agreeing:
    """A subordinate clause with its own subject and agreeing verb, mostly of the other number, then the main
    subject: "When the cats are hungry, the dog ..." (the verb agrees with the noun after the comma)."""
    other, other_plural = _subject_noun(rng, lex), rng.random() < 0.5
    correct, _, rest = predicate(rng, lex, other, other_plural)
    clause = f"{rng.choice(SUBORDINATORS)} {noun_phrase(rng, lex, other, other_plural)} {correct}{rest}"
    subject = _subject_noun(rng, lex)
    plural = _mostly_other_number(rng, other_plural)
    return _agreeing("fronted_clause", rng, lex, subject, plural, f"{clause}, {noun_phrase(rng, lex, subject, plural)}")


def _name_attractor(rng: random.Random, lex: Lexicon) -> Agreeing:
    """A name inside the subject: "the friends of Sarah", "the dog behind Omar" (a name is singular)."""
    subject, plural = _subject_noun(rng, lex), rng.random() < 0.7
    name = rng.choice(lex.names)[0]
    preposition = rng.choice(("of", *lex.prepositions))
    return _agreeing("name_attractor", rng, lex, subject, plural,
                     f"{noun_phrase(rng, lex, subject, plural)} {preposition} {name}")


def _adjective_string(rng: random.Random, lex: Lexicon) -> Agreeing:
    subject, plural = _subject_noun(rng, lex), rng.random() < 0.5
    return _agreeing("adjective_string", rng, lex, subject, plural,
                     noun_phrase(rng, lex, subject, plural, adjectives=rng.choice((3, 4))))


def _coordination(rng: random.Random, lex: Lexicon) -> Agreeing:
    """Two noun phrases joined by "and": plural, whatever the number of the nearer one."""
    first, second = (pick(rng, lex.nouns_of("person", "animal")) for _ in range(2))
    subject = f"{noun_phrase(rng, lex, first, rng.random() < 0.3)} and {noun_phrase(rng, lex, second, rng.random() < 0.3)}"
    return _agreeing("coordination", rng, lex, first, True, subject)


AGREEING: dict[str, Callable[[random.Random, Lexicon], Agreeing]] = {
    "simple": _simple, "pp": _pp, "pp_chain": _pp_chain,
    "subject_relative": lambda rng, lex: _relative(rng, lex, "subject_relative"),
    "object_relative": lambda rng, lex: _relative(rng, lex, "object_relative"),
    "preposed": _preposed, "fronted_clause": _fronted_clause, "name_attractor": _name_attractor,
    "adjective_string": _adjective_string,
    "coordination": _coordination,
}


# ---------------------------------------------------------------------------------------------------------
# The other families: each gives a text
# ---------------------------------------------------------------------------------------------------------

def _question(rng: random.Random, lex: Lexicon) -> str:
    subject, plural = _subject_noun(rng, lex), rng.random() < 0.5
    phrase = noun_phrase(rng, lex, subject, plural, adjectives=rng.choice((0, 0, 1)))
    roll = rng.random()
    if roll < 0.4 or not subject.animate:
        be = _be(plural, rng.random() < 0.3)[0]
        what = rng.choice((adjective_for(rng, lex, subject), _prepositional(rng, lex)))
        return f"{_capital(be)} {phrase} {what}?"
    verb = pick(rng, lex.verbs)
    do = "do" if plural else "does"
    if roll < 0.7:
        return f"{_capital(do)} {phrase} {verb.base}{_object(rng, lex, verb)}?"
    wh = rng.choice(("What", "Why", "Where", "When", "How often"))
    if wh == "What" and verb.transitive:
        return f"What {do} {phrase} {verb.base}?"
    return f"{wh} {do} {phrase} {verb.base}{_object(rng, lex, verb)}?"


def _negation(rng: random.Random, lex: Lexicon) -> str:
    subject, plural = _subject_noun(rng, lex), rng.random() < 0.5
    phrase = _capital(noun_phrase(rng, lex, subject, plural))
    roll = rng.random()
    if roll < 0.35 or not subject.animate:
        be = _be(plural, rng.random() < 0.4)[0]
        negated = rng.choice((f"{be}n't", f"{be} not"))
        return f"{phrase} {negated} {adjective_for(rng, lex, subject)}."
    verb = pick(rng, lex.verbs)
    auxiliary = rng.choice(("don't" if plural else "doesn't", "didn't", "can't", "won't", "couldn't",
                            "do not" if plural else "does not", "never"))
    form = _present(verb, plural)[0] if auxiliary == "never" else verb.base
    return f"{phrase} {auxiliary} {form}{_object(rng, lex, verb)}."


def _pronoun(rng: random.Random, lex: Lexicon) -> str:
    """A named person, then he or she; or I/you/we/they/it with their own forms of "be"."""
    if rng.random() < 0.5:
        name, gender = rng.choice(lex.names)
        pronoun = "she" if gender == "female" else "he"
        verb = pick(rng, lex.verbs)
        first = f"{name} {verb.past}{_object(rng, lex, verb)}."
        adjective = adjective_for(rng, lex, lex.nouns_of("person")[0])
        return f"{first} {_capital(pronoun)} {PRONOUN_BE[pronoun]} {adjective}."
    pronoun = rng.choice(("I", "you", "we", "they"))
    verb = pick(rng, lex.verbs)
    if rng.random() < 0.5:
        contracted = {"I": "I'm", "you": "you're", "we": "we're", "they": "they're"}[pronoun]
        return f"{_capital(contracted)} {verb.ing}{_object(rng, lex, verb)}."
    return f"{_capital(pronoun)} {verb.base}{_object(rng, lex, verb)}."


def _dialogue(rng: random.Random, lex: Lexicon) -> str:
    """Two lines of talk in quotes, each said by a named person."""
    (asker, _), (answerer, _) = rng.sample(lex.names, 2)
    noun, plural = pick(rng, lex.nouns_of("object", "animal")), rng.random() < 0.5
    phrase = noun_phrase(rng, lex, noun, plural, adjectives=0)
    be = _be(plural, False)[0]
    pronoun = "they" if plural else "it"
    question = f"\"Where {be} {phrase}?\" asked {asker}."
    answer = f"\"{_capital(pronoun)} {PRONOUN_BE[pronoun]} {_prepositional(rng, lex)},\" {rng.choice(SAY_VERBS)} {answerer}."
    if rng.random() < 0.3:
        answer = f"{answerer} {rng.choice(('said', 'replied'))}, \"I don't know.\""
    return f"{question} {answer}"


def _number(rng: random.Random, lex: Lexicon) -> str:
    """Counts as digits or words, years and times: "There are 12 dogs in the garden."."""
    noun = pick(rng, lex.nouns_of("animal", "object", "person"))
    count = rng.choice((1, 1, 2, 3, 4, 5, 7, 10, 12, 15, 20, 24, 100, 365))
    shown = NUMBER_WORDS[count] if count in NUMBER_WORDS and rng.random() < 0.5 else str(count)
    phrase = f"{shown} {noun.singular if count == 1 else noun.plural}"
    roll = rng.random()
    if roll < 0.4:
        there = "There is" if count == 1 else "There are"
        return f"{there} {phrase} {_prepositional(rng, lex)}."
    if roll < 0.7:
        name = rng.choice(lex.names)[0]
        return f"{name} has {phrase}."
    year = rng.randint(1900, 2030)
    return f"In {year}, {rng.choice(lex.names)[0]} saw {phrase} at {rng.randint(1, 12)}:{rng.choice(('00', '15', '30', '45'))}."


def _it_reference(rng: random.Random, lex: Lexicon) -> str:
    """"The dog didn't cross the street because it was too tired" (it: the dog) or "... too wide" (it: the
    street): both singular, only the adjective's meaning tells which."""
    return it_sentence(rng, lex, rng.random() < 0.5)[0]


def it_sentence(rng: random.Random, lex: Lexicon, refers_to_animal: bool,
                adjectives: Callable[[Lexicon, str], Sequence[str]] = Lexicon.adjectives_of,
                place_first: bool = False) -> tuple[str, str, str]:
    """An "it" sentence and its two nouns (animal, place): `refers_to_animal` picks an adjective of animates (it:
    the animal) or of places (it: the place), from `adjectives(lex, kind)` (by default all of that kind). With
    `place_first`, the place is named first ("The street blocked the dog because it was too tired"), so that which
    noun "it" is cannot be read off the order of the nouns."""
    animal, place = pick(rng, lex.nouns_of("animal")), pick(rng, lex.nouns_of("place"))
    adjective = rng.choice(adjectives(lex, "animate" if refers_to_animal else "place"))
    if place_first:
        return (f"The {place.singular} {rng.choice(IT_PLACE_VERBS)} the {animal.singular} {rng.choice(IT_LINKS)} "
                f"{adjective}.", animal.singular, place.singular)
    text = (f"The {animal.singular} {rng.choice(IT_NEGATIONS)} {rng.choice(IT_VERBS)} the {place.singular} "
            f"{rng.choice(IT_LINKS)} {adjective}.")
    return text, animal.singular, place.singular


def _referent_number(rng: random.Random, lex: Lexicon) -> str:
    """An "it" sentence whose nouns are each singular or plural, the pronoun (it/they) agreeing with the referent
    the adjective's meaning picks, its verb was/were or one that shows no number."""
    animal, place = pick(rng, lex.nouns_of("animal")), pick(rng, lex.nouns_of("place"))
    animal_plural, place_plural, refers_to_animal = (rng.random() < 0.5 for _ in range(3))
    plural = animal_plural if refers_to_animal else place_plural
    adjective = rng.choice(lex.adjectives_of("animate" if refers_to_animal else "place"))
    verb = _be(plural, past=True)[0] if rng.random() < 0.5 else rng.choice(NUMBERLESS_VERBS)
    return (f"The {animal.plural if animal_plural else animal.singular} {rng.choice(IT_NEGATIONS)} "
            f"{rng.choice(IT_VERBS)} the {place.plural if place_plural else place.singular} "
            f"{rng.choice(REFERENT_CONJUNCTIONS)} {'they' if plural else 'it'} {verb} too {adjective}.")


def _everyday(rng: random.Random, lex: Lexicon) -> str:
    """First and second person, as a class writes about itself: names, homes, likes, greetings."""
    name = rng.choice(lex.names)[0]
    city = pick(rng, lex.cities) if lex.cities else name
    noun = pick(rng, lex.nouns_of("animal", "object", "place", "abstract"))
    verb = pick(rng, lex.verbs_of(True))
    person = rng.choice(("I", "you", "we", "they"))
    frames = (
        f"My name is {name} and I live in {city}.",
        f"{rng.choice(GREETINGS)}, {name}! How are you?",
        f"I'm {rng.randint(5, 17)} years old and I live in {city}.",
        f"What's your name? My name is {name}.",
        f"Where do you live? I live in {city}.",
        f"{_capital(person)} {rng.choice(('like', 'love', 'want', 'need', 'have'))} {noun.plural}.",
        f"Do you {verb.base} the {noun.singular}? {rng.choice(ANSWERS)}",
        f"{_capital(person)} {verb.past} the {noun.singular} {rng.choice(TIME_MODIFIERS).lower()}.",
        f"It's {adjective_for(rng, lex, noun)} today, isn't it?",
    )
    return rng.choice(frames)


OTHERS: dict[str, Callable[[random.Random, Lexicon], str]] = {
    "question": _question, "negation": _negation, "pronoun": _pronoun, "dialogue": _dialogue, "number": _number,
    "it_reference": _it_reference, "everyday": _everyday, "referent_number": _referent_number,
}


# ---------------------------------------------------------------------------------------------------------
# Sentences, texts and probes
# ---------------------------------------------------------------------------------------------------------

def _check(constructions: Sequence[str]) -> None:
    unknown = [c for c in constructions if c not in CONSTRUCTIONS]
    if unknown:
        raise ValueError(f"unknown construction(s) {', '.join(unknown)}; the families are {', '.join(CONSTRUCTIONS)}")


def sentence(rng: random.Random, lex: Lexicon, construction: str) -> str:
    """One sentence of the family."""
    _check([construction])
    return AGREEING[construction](rng, lex).text if construction in AGREEING else OTHERS[construction](rng, lex)


def _corpus_families(corpus: str) -> tuple[str, ...]:
    if corpus not in CORPORA:
        raise ValueError(f"unknown corpus {corpus!r}; the corpora are {', '.join(CORPORA)}")
    return CORPORA[corpus]


def generate_sentences(n: int, seed: int, lex: Lexicon, held_out: Sequence[str] = (),
                       corpus: str = "english") -> list[tuple[str, str]]:
    """n (construction, sentence) pairs, each family drawn uniformly from the corpus's (CORPORA) not held out."""
    _check(held_out)
    families = [c for c in _corpus_families(corpus) if c not in held_out]
    if not families:
        raise ValueError("every construction is held out: nothing is left to generate")
    rng = random.Random(seed)
    return [(family, sentence(rng, lex, family)) for family in (rng.choice(families) for _ in range(n))]


def generate_texts(n: int, seed: int, lex: Lexicon, held_out: Sequence[str] = (),
                   sentences: tuple[int, int] = (1, 4), corpus: str = "english") -> list[str]:
    """n texts of 1-4 sentences (or `sentences`) each, from the corpus's families not held out."""
    lengths = random.Random(f"{seed} lengths")  # its own stream: a str seed is hashed the same in every run
    counts = [lengths.randint(*sentences) for _ in range(n)]
    pool = iter(generate_sentences(sum(counts), seed, lex, held_out, corpus))
    return [" ".join(text for _, text in (next(pool) for _ in range(count))) for count in counts]


def agreement_probes(construction: str, n: int, seed: int, lex: Lexicon) -> list[Agreeing]:
    """n sentences of an agreement family, as probes (the subject's number drawn as the family draws it: about
    half plural, always plural for coordination; a majority baseline reads the split from `plural`)."""
    if construction not in AGREEING:
        raise ValueError(f"{construction!r} has no agreement probe; these do: {', '.join(AGREEMENT_CONSTRUCTIONS)}")
    rng = random.Random(seed)
    return [AGREEING[construction](rng, lex) for _ in range(n)]


# ---------------------------------------------------------------------------------------------------------
# The tokenizer of the broad-English models
# ---------------------------------------------------------------------------------------------------------

TOKENIZER_TEXTS = 50_000  # texts of the training corpus the BPE merges are learnt from


def build_tokenizer(lex: Lexicon, path: Path = ENGLISH_TOKENIZER_PATH, held_out: Sequence[str] = DEFAULT_HELD_OUT,
                    n: int = TOKENIZER_TEXTS) -> Path:
    """Learn the byte-level BPE tokenizer (core/tokenizers/subword.py) from n texts of the training corpus (the
    families a model is trained on, seed TRAIN_SEED) and save it at `path`."""
    train_tokenizer(generate_texts(n, TRAIN_SEED, lex, held_out), VOCAB_SIZE, path)
    return path


# ---------------------------------------------------------------------------------------------------------
# Reference texts: what a mean ablation averages a head's output over (core.lessons.interventions)
# ---------------------------------------------------------------------------------------------------------

REFERENCE_PATH = ENGLISH_TOKENIZER_PATH.with_name("reference-english.json")
REFERENCE_COUNT = 16


def write_reference_texts(lex: Lexicon, path: Path = REFERENCE_PATH) -> Path:
    """Ship the first REFERENCE_COUNT texts of the training corpus (seed TRAIN_SEED, typical of what the
    broad-English models read) at `path`, so the app (which has no lexicon packages) reads them."""
    texts = generate_texts(REFERENCE_COUNT, TRAIN_SEED, lex, DEFAULT_HELD_OUT)
    path.write_text(json.dumps({"texts": texts}, indent=2, ensure_ascii=False) + "\n")
    return path


def read_reference_texts(path: Path = REFERENCE_PATH) -> list[str]:
    """The shipped reference texts (write_reference_texts)."""
    return json.loads(path.read_text())["texts"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.data.english", description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", type=Path, nargs="?", const=ENGLISH_TOKENIZER_PATH,
                        help=f"learn the tokenizer from the corpus and save it (default {ENGLISH_TOKENIZER_PATH})")
    parser.add_argument("--sample", type=int, default=0, help="print this many texts of the corpus")
    parser.add_argument("--reference", action="store_true", help=f"write the mean ablation's reference texts "
                        f"({REFERENCE_PATH.name})")
    args = parser.parse_args(argv)
    from core.data.lexicon import build_lexicon

    lex = build_lexicon()
    print(", ".join(f"{kind}: {count}" for kind, count in lex.size().items()))
    for text in generate_texts(args.sample, TRAIN_SEED, lex):
        print(text)
    if args.tokenizer:
        print(f"wrote {build_tokenizer(lex, args.tokenizer)}")
    if args.reference:
        print(f"wrote {write_reference_texts(lex)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
