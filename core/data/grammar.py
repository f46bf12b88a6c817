"""A small English-like corpus generated from a hand-written grammar.

The grammar is built to exercise patterns that attention heads are known to
learn, so the app has something interesting to show:

* subject-verb number agreement across an intervening prepositional phrase or
  relative clause whose noun has the opposite number (an "attractor"):
  "the keys to the old cabinet are red .", "the dog that the children love runs ."
* pronouns ("he" / "she") that refer back to a named person of the same gender;
  a document names at most one person of each gender, so reference is unambiguous;
* determiners and adjectives that agree with / modify a noun;
* noun phrases repeated verbatim inside a document ("the old red key" ... "the old
  red key"), so copying (induction) pays off.

Text is lowercase words and punctuation separated by single spaces. Every word in
the lexicon belongs to exactly one category, so a sentence can be parsed back from
the lexicon alone (tests/test_data.py does this to check agreement).

All randomness goes through an explicit ``random.Random``; nothing touches the
global generator.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

from core.tokenizers.words import TextTokenizer

Number = Literal["sg", "pl"]
Gender = Literal["female", "male"]
Tense = Literal["present", "past"]

TRAIN_SEED = 0
HELDOUT_SEED = 1

MAX_DOCUMENT_WORDS = 60
# Half the documents open with a stand-alone sentence, so a model meets agreement across an attractor at the
# very start of a text too, where the held-out agreement probes sit. (A corpus whose documents all opened with a
# name left those probes unlike anything in training: models scoring 0.41-0.62 there scored 0.95-0.99 on the same
# probes placed after a document.)
OPENING_RATE = 0.5

# ----------------------------------------------------------------------------
# Lexicon
# ----------------------------------------------------------------------------

NEUTRAL_DETERMINERS = ("the", "my", "our", "your")
SINGULAR_DETERMINERS = ("a", "an", "this", "every", "each")
PLURAL_DETERMINERS = ("these", "those", "some", "many", "two", "three")

ADJECTIVES = (
    "old", "new", "big", "small", "red", "blue", "green", "yellow", "happy", "sad",
    "tall", "short", "quiet", "loud", "bright", "dark", "young", "clever", "lazy", "busy",
    "hungry", "tiny", "heavy", "empty", "wooden", "broken", "shiny", "soft", "strange",
    "famous",
)

_NOUN_PAIRS = (
    ("dog", "dogs"), ("cat", "cats"), ("bird", "birds"), ("horse", "horses"),
    ("key", "keys"), ("cabinet", "cabinets"), ("box", "boxes"), ("book", "books"),
    ("table", "tables"), ("chair", "chairs"), ("door", "doors"), ("window", "windows"),
    ("house", "houses"), ("garden", "gardens"), ("tree", "trees"), ("flower", "flowers"),
    ("apple", "apples"), ("cup", "cups"), ("letter", "letters"), ("song", "songs"),
    ("teacher", "teachers"), ("student", "students"), ("doctor", "doctors"),
    ("farmer", "farmers"), ("baker", "bakers"), ("painter", "painters"), ("king", "kings"),
    ("queen", "queens"), ("child", "children"), ("man", "men"), ("woman", "women"),
    ("mouse", "mice"), ("person", "people"), ("friend", "friends"),
    ("neighbor", "neighbors"), ("river", "rivers"), ("boat", "boats"), ("car", "cars"),
    ("bridge", "bridges"), ("lamp", "lamps"), ("clock", "clocks"), ("map", "maps"),
    ("coin", "coins"), ("ball", "balls"), ("hat", "hats"), ("shoe", "shoes"),
    ("bottle", "bottles"), ("basket", "baskets"), ("pencil", "pencils"),
    ("robot", "robots"), ("wolf", "wolves"), ("fox", "foxes"), ("knife", "knives"),
    ("city", "cities"), ("story", "stories"), ("puzzle", "puzzles"), ("lion", "lions"),
    ("rabbit", "rabbits"),
)
SINGULAR_NOUNS: dict[str, str] = dict(_NOUN_PAIRS)
"""Singular noun -> its plural."""
PLURAL_NOUNS: dict[str, str] = {pl: sg for sg, pl in _NOUN_PAIRS}
"""Plural noun -> its singular."""


@dataclass(frozen=True)
class Verb:
    """One verb lemma: present singular / present plural / (number-neutral) past."""

    sg: str
    pl: str
    past: str
    transitive: bool


_INTRANSITIVE = (
    ("runs", "run", "ran"), ("sleeps", "sleep", "slept"), ("sings", "sing", "sang"),
    ("waits", "wait", "waited"), ("smiles", "smile", "smiled"),
    ("laughs", "laugh", "laughed"), ("falls", "fall", "fell"),
    ("shines", "shine", "shone"), ("rests", "rest", "rested"),
    ("works", "work", "worked"), ("wins", "win", "won"), ("moves", "move", "moved"),
    ("jumps", "jump", "jumped"), ("swims", "swim", "swam"),
    ("arrives", "arrive", "arrived"),
)
_TRANSITIVE = (
    ("loves", "love", "loved"), ("sees", "see", "saw"), ("finds", "find", "found"),
    ("likes", "like", "liked"), ("chases", "chase", "chased"), ("helps", "help", "helped"),
    ("follows", "follow", "followed"), ("carries", "carry", "carried"),
    ("holds", "hold", "held"), ("opens", "open", "opened"),
    ("watches", "watch", "watched"), ("visits", "visit", "visited"),
    ("paints", "paint", "painted"), ("remembers", "remember", "remembered"),
    ("needs", "need", "needed"), ("wants", "want", "wanted"), ("hides", "hide", "hid"),
    ("admires", "admire", "admired"), ("fixes", "fix", "fixed"),
    ("brings", "bring", "brought"),
)
INTRANSITIVE_VERBS = tuple(Verb(*forms, transitive=False) for forms in _INTRANSITIVE)
TRANSITIVE_VERBS = tuple(Verb(*forms, transitive=True) for forms in _TRANSITIVE)

SINGULAR_VERBS: dict[str, str] = {
    v.sg: v.pl for v in (*INTRANSITIVE_VERBS, *TRANSITIVE_VERBS)
} | {"is": "are", "was": "were"}
"""Every singular (number-marked) verb form -> its plural counterpart."""
PLURAL_VERBS: dict[str, str] = {pl: sg for sg, pl in SINGULAR_VERBS.items()}
"""Every plural (number-marked) verb form -> its singular counterpart."""
PAST_VERBS = frozenset(v.past for v in (*INTRANSITIVE_VERBS, *TRANSITIVE_VERBS))
"""Past-tense forms, which carry no number (except was/were, which are above)."""
TRANSITIVE_FORMS = frozenset(f for v in TRANSITIVE_VERBS for f in (v.sg, v.pl, v.past))
COPULA_FORMS = frozenset({"is", "are", "was", "were"})

PREPOSITIONS = ("near", "behind", "under", "beside", "with", "on", "in", "above", "from", "to")

NAMES: dict[str, Gender] = {
    **{n: "female" for n in ("mary", "anna", "emma", "sarah", "lucy", "alice",
                             "julia", "nora", "clara", "grace", "eva", "rosa")},
    **{n: "male" for n in ("john", "peter", "david", "tom", "james", "paul",
                           "mark", "leo", "oscar", "hugo", "sam", "max")},
}
PRONOUNS: dict[str, Gender] = {"she": "female", "he": "male"}
RELATIVIZER = "that"
PUNCTUATION = (".",)


def lexicon_by_kind() -> dict[str, tuple[str, ...]]:
    """Every word the grammar can emit, grouped by kind (for a reader: what may be typed), in a fixed order."""
    return {
        "determiners": (*NEUTRAL_DETERMINERS, *SINGULAR_DETERMINERS, *PLURAL_DETERMINERS),
        "adjectives": ADJECTIVES,
        "nouns, singular": tuple(SINGULAR_NOUNS),
        "nouns, plural": tuple(PLURAL_NOUNS),
        "verbs, present singular": tuple(SINGULAR_VERBS),
        "verbs, present plural": tuple(PLURAL_VERBS),
        "verbs, past": tuple(sorted(PAST_VERBS)),
        "prepositions": PREPOSITIONS,
        "names": tuple(NAMES),
        "pronouns": tuple(PRONOUNS),
        "relativizer and full stop": (RELATIVIZER, *PUNCTUATION),
    }


def lexicon_words() -> list[str]:
    """Every word the grammar can emit (no duplicates), in a fixed order."""
    return [word for group in lexicon_by_kind().values() for word in group]


# ----------------------------------------------------------------------------
# Sentences
# ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Sentence:
    """A generated sentence plus the structure a test or evaluation needs.

    ``verb_index`` points at the main verb in ``words``; ``attractor`` is the noun
    of the subject's modifier (PP or relative clause) when its number differs from
    the subject's, else None.
    """

    words: tuple[str, ...]
    subject_number: Number
    verb_index: int
    attractor: str | None

    @property
    def text(self) -> str:
        return " ".join(self.words)

    @property
    def verb(self) -> str:
        return self.words[self.verb_index]


@dataclass(frozen=True)
class Phrase:
    """A noun phrase (or name / pronoun) and its grammatical number."""

    words: tuple[str, ...]
    number: Number
    noun: str


def _opposite(number: Number) -> Number:
    return "pl" if number == "sg" else "sg"


def _random_number(rng: random.Random) -> Number:
    return "sg" if rng.random() < 0.5 else "pl"


def _determiner(rng: random.Random, number: Number, next_word: str) -> str:
    """A determiner compatible with ``number``; "a" becomes "an" before a vowel."""
    options = NEUTRAL_DETERMINERS + (
        ("a", "this", "every", "each") if number == "sg" else PLURAL_DETERMINERS
    )
    det = rng.choice(options + ("the",) * 4)  # keep "the" the most common
    if det == "a" and next_word[0] in "aeiou":
        return "an"
    return det


def noun_phrase(
    rng: random.Random, number: Number, min_adjectives: int = 0, max_adjectives: int = 1
) -> Phrase:
    """Determiner + min..max distinct adjectives + noun."""
    noun = rng.choice(tuple(SINGULAR_NOUNS if number == "sg" else PLURAL_NOUNS))
    adjectives = rng.sample(ADJECTIVES, rng.randint(min_adjectives, max_adjectives))
    det = _determiner(rng, number, (adjectives or [noun])[0])
    return Phrase((det, *adjectives, noun), number, noun)


def name_phrase(name: str) -> Phrase:
    return Phrase((name,), "sg", name)


def _copula_form(number: Number, tense: Tense) -> str:
    """is / are / was / were: unlike other verbs, the copula's past is number-marked."""
    if tense == "past":
        return "was" if number == "sg" else "were"
    return "is" if number == "sg" else "are"


def _verb_form(verb: Verb, number: Number, tense: Tense) -> str:
    if tense == "past":
        return verb.past
    return verb.sg if number == "sg" else verb.pl


def _modifier(
    rng: random.Random, head_number: Number, inner_number: Number, tense: Tense
) -> tuple[tuple[str, ...], str]:
    """A PP or relative clause attached to a subject; returns (words, its noun).

    Three shapes: "near the boxes", "that chases the cats" (subject relative: the
    inner verb agrees with the head), "that the children love" (object relative:
    the inner verb agrees with the inner noun).
    """
    inner = noun_phrase(rng, inner_number)
    shape = rng.choice(("pp", "subject_rc", "object_rc"))
    if shape == "pp":
        return (rng.choice(PREPOSITIONS), *inner.words), inner.noun
    verb = rng.choice(TRANSITIVE_VERBS)
    if shape == "subject_rc":
        return (RELATIVIZER, _verb_form(verb, head_number, tense), *inner.words), inner.noun
    return (RELATIVIZER, *inner.words, _verb_form(verb, inner_number, tense)), inner.noun


def _predicate(
    rng: random.Random, number: Number, tense: Tense, objects: list[Phrase]
) -> tuple[str, ...]:
    """Main verb (always first) plus its complement: an adjective, an object or nothing."""
    kind = rng.choice(("intransitive", "transitive", "transitive", "copula"))
    if kind == "copula":
        return _copula_form(number, tense), rng.choice(ADJECTIVES)
    if kind == "intransitive":
        return (_verb_form(rng.choice(INTRANSITIVE_VERBS), number, tense),)
    obj = rng.choice(objects) if objects else noun_phrase(rng, _random_number(rng))
    return _verb_form(rng.choice(TRANSITIVE_VERBS), number, tense), *obj.words


def build_sentence(
    rng: random.Random,
    subject: Phrase,
    modifier_number: Number | None,
    tense: Tense,
    objects: list[Phrase],
) -> Sentence:
    """Assemble subject [+ modifier whose noun has ``modifier_number``] + predicate + ".".

    ``objects`` are candidate object phrases (e.g. a document's recurring phrases;
    the subject itself is excluded); if none is left a fresh noun phrase is used.
    """
    words = list(subject.words)
    attractor = None
    if modifier_number is not None:
        modifier, noun = _modifier(rng, subject.number, modifier_number, tense)
        words += modifier
        attractor = noun if modifier_number != subject.number else None
    verb_index = len(words)
    words += _predicate(rng, subject.number, tense, [o for o in objects if o != subject])
    words.append(".")
    return Sentence(tuple(words), subject.number, verb_index, attractor)


def generate_sentence(rng: random.Random) -> Sentence:
    """One stand-alone sentence with a noun-phrase subject, often with a modifier."""
    subject = noun_phrase(rng, _random_number(rng))
    modifier_number = _random_number(rng) if rng.random() < 0.7 else None
    tense: Tense = "present" if rng.random() < 0.7 else "past"
    return build_sentence(rng, subject, modifier_number, tense, objects=[])


# ----------------------------------------------------------------------------
# Documents
# ----------------------------------------------------------------------------


def _cast(rng: random.Random) -> tuple[list[str], list[Phrase]]:
    """A document's people (one or two names, never two of the same gender) and
    its two recurring noun phrases (3-4 words, so repeating them is worth copying)."""
    genders: list[Gender] = ["female", "male"]
    rng.shuffle(genders)
    people_genders = genders[: rng.choice((1, 2))]
    people = [rng.choice([n for n, g in NAMES.items() if g == gender]) for gender in people_genders]
    topics = [noun_phrase(rng, _random_number(rng), 1, 2) for _ in range(2)]
    return people, topics


def _subject(
    rng: random.Random, people: list[str], mentioned: list[str], topics: list[Phrase]
) -> Phrase:
    """Pick a later sentence's subject: a pronoun for someone already named, a
    recurring phrase, a name, or a fresh noun phrase."""
    roll = rng.random()
    if roll < 0.3 and mentioned:
        person = rng.choice(mentioned)
        pronoun = next(p for p, g in PRONOUNS.items() if g == NAMES[person])
        return Phrase((pronoun,), "sg", pronoun)
    if roll < 0.7:
        return rng.choice(topics)
    if roll < 0.8:
        return name_phrase(rng.choice(people))
    return noun_phrase(rng, _random_number(rng))


def generate_document_sentences(rng: random.Random, opening: float = 0.0) -> list[Sentence]:
    """2-5 sentences about a small cast; at most MAX_DOCUMENT_WORDS words. The first names the first person,
    or, with probability `opening`, is a stand-alone sentence (generate_sentence: a noun-phrase subject, often
    with a modifier)."""
    people, topics = _cast(rng)
    objects = topics + [name_phrase(p) for p in people[1:]]
    tense: Tense = rng.choice(("present", "past"))
    opens_alone = opening > 0 and rng.random() < opening  # no draw at 0, so the stream is unchanged
    sentences = [generate_sentence(rng) if opens_alone else build_sentence(rng, name_phrase(people[0]), None, tense, topics)]
    for _ in range(rng.randint(1, 4)):
        mentioned = [p for p in people if any(p in s.words for s in sentences)]
        subject = _subject(rng, people, mentioned, topics)
        modifier = _random_number(rng) if len(subject.words) > 1 and rng.random() < 0.5 else None
        sentence = build_sentence(rng, subject, modifier, tense, objects)
        if sum(len(s.words) for s in sentences) + len(sentence.words) > MAX_DOCUMENT_WORDS:
            break
        sentences.append(sentence)
    return sentences


def generate_documents(n: int, seed: int, opening: float = OPENING_RATE) -> list[str]:
    """``n`` documents (each 2-5 sentences), deterministic given ``seed``; `opening`: see
    generate_document_sentences."""
    rng = random.Random(seed)
    return [" ".join(s.text for s in generate_document_sentences(rng, opening)) for _ in range(n)]


# ----------------------------------------------------------------------------
# Agreement evaluation
# ----------------------------------------------------------------------------


@dataclass(frozen=True)
class AgreementExample:
    """A prefix ending right before the main verb, and the two candidate verb forms.

    The subject and verb are separated by a PP or relative clause containing
    ``attractor``, a noun of the opposite number. A model that agrees correctly
    gives ``correct`` a higher probability than ``wrong``.
    """

    prefix: str
    correct: str
    wrong: str
    attractor: str
    suffix: str = ""  # the words after the verb (a bidirectional model reads the whole sentence, the verb masked)


def _flip_verb(verb: str) -> str:
    return SINGULAR_VERBS.get(verb) or PLURAL_VERBS[verb]


def generate_agreement_examples(n: int, seed: int) -> list[AgreementExample]:
    """``n`` agreement probes with an opposite-number attractor, deterministic by seed.

    Tense is present so the main verb is always number-marked (was/were may also
    appear since the copula's past is marked too).
    """
    rng = random.Random(seed)
    examples = []
    while len(examples) < n:
        subject = noun_phrase(rng, _random_number(rng))
        tense: Tense = "present" if rng.random() < 0.8 else "past"
        sentence = build_sentence(rng, subject, _opposite(subject.number), tense, objects=[])
        if sentence.verb not in SINGULAR_VERBS and sentence.verb not in PLURAL_VERBS:
            continue  # a past-tense non-copula verb carries no number
        assert sentence.attractor is not None  # the modifier's number was opposite
        examples.append(
            AgreementExample(
                prefix=" ".join(sentence.words[: sentence.verb_index]),
                correct=sentence.verb,
                wrong=_flip_verb(sentence.verb),
                attractor=sentence.attractor,
                suffix=" ".join(sentence.words[sentence.verb_index + 1:]),
            )
        )
    return examples


def pack_documents(documents: list[str], tokens: int, tokenizer: TextTokenizer) -> list[str]:
    """Consecutive documents joined into texts of at most `tokens` tokens each, [BOS] and [EOS] included
    (a document longer than that alone is left out)."""
    texts, current, length = [], [], 2
    for document in documents:
        size = len(tokenizer.encode(document).ids) - 1  # without its [BOS]
        if length + size > tokens and current:
            texts.append(" ".join(current))
            current, length = [], 2
        if length + size <= tokens:
            current.append(document)
            length += size
    if current:
        texts.append(" ".join(current))
    return texts
