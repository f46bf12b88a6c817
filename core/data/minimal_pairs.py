"""Agreement minimal pairs in the style of BLiMP (Warstadt et al. 2020), written apart from the training generator.

Each pair is an acceptable sentence and the same sentence with one word's number changed; a language model is
right when it gives the acceptable one more probability as a whole sentence (how the BLiMP paper scores GPT-2).
The phenomena follow BLiMP's agreement paradigms:

    determiner_noun            I saw these dogs.            / I saw these dog.
    determiner_adjective_noun  I saw this big dog.          / I saw this big dogs.
    regular_plural_subject     The dogs arrive.             / The dogs arrives.
    irregular_plural_subject   The women arrive.            / The women arrives.
    relational_noun_distractor The picture of the dogs is new. / The picture of the dogs are new.
    relative_clause_distractor The dog that the cats saw is new. / The dog that the cats saw are new.

The vocabulary is not chosen by us, nor by the training corpus's lexicon (core/data/lexicon.py, WordNet): nouns,
verbs and adjectives are wordfreq's most frequent English words that lemminflect reads as that part of speech only,
taken in order of frequency; a noun only when lemminflect reads its plural back as its plural and the plural is
at least 1/30 as frequent as the singular (a noun that counts). Only this module's few frames and
function words ("I saw", "the", "of the", "that the") are ours, and none of them is a template of english.py.
wordfreq and lemminflect (requirements-train.txt) are imported inside the functions.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass

PHENOMENA = ("determiner_noun", "determiner_adjective_noun", "regular_plural_subject", "irregular_plural_subject",
             "relational_noun_distractor", "relative_clause_distractor")
TOP_WORDS = 20_000  # wordfreq's most frequent words looked at
N_NOUNS, N_VERBS, N_ADJECTIVES = 400, 200, 200  # the most frequent of each kind are drawn from
# a noun counts when its plural is at least 1/30 as frequent as its singular (zipf is log10 of the frequency):
# "dogs" 4.8 against "dog" 4.9, but not "informations" 2.7 against "information" 5.5
MAX_PLURAL_DEFICIT = 1.5
SEED = 2020


@dataclass(frozen=True)
class MinimalPair:
    phenomenon: str
    good: str
    bad: str
    good_singular: bool  # whether the word that differs is singular in the acceptable sentence


@dataclass(frozen=True)
class Vocabulary:
    nouns: tuple[tuple[str, str], ...]  # (singular, plural), regular plurals (-s, -es, -ies)
    irregular: tuple[tuple[str, str], ...]  # (singular, plural), "woman" -> "women"
    verbs: tuple[tuple[str, str, str], ...]  # (base, 3rd person singular, past)
    adjectives: tuple[str, ...]


def _only(word: str, upos: str) -> bool:
    from lemminflect import getAllLemmas

    lemmas = getAllLemmas(word)
    return set(lemmas) == {upos} and word in lemmas[upos]


def _plural_of(word: str) -> str | None:
    """The plural lemminflect gives, when lemminflect reads it back as a plural of this noun ("these" has no
    plural "theses": that is the plural of "thesis")."""
    from lemminflect import getAllLemmas, getInflection

    plural = getInflection(word, "NNS")[0]
    return plural if plural != word and word in getAllLemmas(plural).get("NOUN", ()) else None


def _regular(singular: str, plural: str) -> bool:
    return plural in (singular + "s", singular + "es", singular[:-1] + "ies")


@functools.cache
def vocabulary(top: int = TOP_WORDS) -> Vocabulary:
    """The pairs' words, most frequent first, from wordfreq's ranking and lemminflect's parts of speech."""
    from lemminflect import getInflection
    from wordfreq import top_n_list, zipf_frequency

    words = [w for w in top_n_list("en", top) if w.isalpha() and w.isascii() and len(w) > 2]
    nouns, irregular, verbs, adjectives = [], [], [], []
    for word in words:
        if _only(word, "NOUN"):
            plural = _plural_of(word)
            if plural and zipf_frequency(plural, "en") >= zipf_frequency(word, "en") - MAX_PLURAL_DEFICIT:
                (nouns if _regular(word, plural) else irregular).append((word, plural))
        elif _only(word, "VERB"):
            forms = getInflection(word, "VBZ"), getInflection(word, "VBD")
            if all(forms):
                verbs.append((word, forms[0][0], forms[1][0]))
        elif _only(word, "ADJ"):
            adjectives.append(word)
    return Vocabulary(tuple(nouns[:N_NOUNS]), tuple(irregular), tuple(verbs[:N_VERBS]), tuple(adjectives[:N_ADJECTIVES]))


def _pair(phenomenon: str, good: str, bad: str, good_singular: bool) -> MinimalPair:
    return MinimalPair(phenomenon, good, bad, good_singular)


def make_pair(phenomenon: str, rng: random.Random, words: Vocabulary) -> MinimalPair:
    """One pair of the phenomenon, its acceptable sentence singular or plural at random."""
    singular = rng.random() < 0.5
    noun, other = rng.choice(words.nouns), rng.choice(words.nouns)
    base, third, past = rng.choice(words.verbs)
    adjective = rng.choice(words.adjectives)
    be = ("is", "are") if singular else ("are", "is")
    if phenomenon in ("determiner_noun", "determiner_adjective_noun"):
        determiner = rng.choice(("this", "that") if singular else ("these", "those"))
        good_noun, bad_noun = noun if singular else noun[::-1]
        middle = f" {adjective}" if phenomenon == "determiner_adjective_noun" else ""
        return _pair(phenomenon, f"I {past} {determiner}{middle} {good_noun}.", f"I {past} {determiner}{middle} {bad_noun}.",
                     singular)
    if phenomenon in ("regular_plural_subject", "irregular_plural_subject"):
        subject = rng.choice(words.nouns if phenomenon == "regular_plural_subject" else words.irregular)
        head = subject[0] if singular else subject[1]
        good, bad = (third, base) if singular else (base, third)
        return _pair(phenomenon, f"The {head} {good}.", f"The {head} {bad}.", singular)
    head = noun[0] if singular else noun[1]
    attractor = other[1] if singular else other[0]  # of the other number
    if phenomenon == "relational_noun_distractor":
        start = f"The {head} of the {attractor}"
    elif phenomenon == "relative_clause_distractor":
        start = f"The {head} that the {attractor} {past}"
    else:
        raise ValueError(f"unknown phenomenon {phenomenon!r}; the phenomena are {', '.join(PHENOMENA)}")
    return _pair(phenomenon, f"{start} {be[0]} {adjective}.", f"{start} {be[1]} {adjective}.", singular)


def minimal_pairs(n_per_phenomenon: int = 200, seed: int = SEED, words: Vocabulary | None = None,
                  phenomena: tuple[str, ...] = PHENOMENA) -> list[MinimalPair]:
    """n pairs of each phenomenon (deterministic for a seed)."""
    words = words or vocabulary()
    rng = random.Random(seed)
    return [make_pair(phenomenon, rng, words) for phenomenon in phenomena for _ in range(n_per_phenomenon)]
