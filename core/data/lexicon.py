"""The words of broad English, by kind and meaning, with their inflections: the Lexicon the English corpus is
generated from (core/data/english.py).

`Lexicon` is plain data, and the generator's tests build a small one by hand. `build_lexicon` makes a real one at
training time, from packages kept by others, and nothing of theirs is copied into this repository:

* which words: the most frequent English words of `wordfreq` (requirements-train.txt);
* which part of speech, meaning and frame: WordNet 3.0 (Debian's `wordnet-base`, read from /usr/share/wordnet), a
  word's part of speech being the one whose senses are most often tagged in WordNet's corpus, its meaning its most
  frequent sense: a noun is a person, an animal, a place (under a road, a body of water, a tract of land, a building
  or a location) or an object; a verb is intransitive ("Somebody ----s") or transitive ("Somebody ----s
  something"/"somebody") by its first sense's sentence frames;
* inflections: `lemminflect` (3rd person singular, past, -ing) and `inflect` (plurals), a noun whose plural is
  its singular ("sheep") left out, since it cannot show agreement.

The two adjective classes that give "it" its referent (animals get tired, streets are wide) and the first names
are our own short lists, below. Imports of the training-time packages are inside the functions that use them.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

NounKind = Literal["person", "animal", "place", "object", "abstract"]
AdjectiveKind = Literal["animate", "place", "any"]  # who an adjective describes: "tired", "wide", anything
Gender = Literal["female", "male"]
NOUN_KINDS: tuple[str, ...] = get_args(NounKind)
ADJECTIVE_KINDS: tuple[str, ...] = get_args(AdjectiveKind)
ANIMATE_KINDS = ("person", "animal")

WORDNET_DIR = Path("/usr/share/wordnet")
TOP_WORDS = 20_000  # how many of wordfreq's most frequent English words are looked at
MIN_ZIPF = 1.0  # an inflected form rarer than this (once in 10^8 words) is taken as not English
MAX_PLURAL_DEFICIT = 2.0  # zipf is log10 of a frequency: a plural 2 below its singular is 1/100 as frequent

# Adjectives whose referent is animate (what gets tired) or a place (what is wide): our own lists, so the corpus's
# "it" sentences resolve as a reader would resolve them. Words that fit both ("old", "dangerous") are in neither.
ANIMATE_ADJECTIVES = ("tired", "hungry", "sleepy", "scared", "afraid", "weak", "lazy", "sick", "exhausted",
                      "frightened", "nervous", "thirsty", "weary", "frail", "timid", "worn out", "slow")
PLACE_ADJECTIVES = ("wide", "busy", "narrow", "crowded", "deep", "icy", "steep", "muddy", "slippery", "flooded",
                    "broad", "congested", "rocky", "treacherous", "long")
NAMES: tuple[tuple[str, Gender], ...] = tuple(
    [(name, "female") for name in ("Sarah", "Mary", "Aisha", "Mei", "Sofia", "Olivia", "Priya", "Fatima", "Emma",
                                   "Lucy", "Hannah", "Yuki", "Amara", "Elena", "Grace", "Chloe", "Zoe", "Nadia",
                                   "Ana", "Leila", "Ruth", "Ingrid", "Maya", "Julia")]
    + [(name, "male") for name in ("John", "David", "Omar", "Wei", "Carlos", "Liam", "Arjun", "Kwame", "Tom",
                                   "James", "Ahmed", "Hiroshi", "Lucas", "Ivan", "Noah", "Ben", "Samuel", "Mateo",
                                   "Kofi", "Daniel", "Peter", "Hugo", "Ravi", "Leo")])
PREPOSITIONS = ("near", "behind", "under", "beside", "next to", "on", "in", "above", "by", "with", "from",
                "across from", "in front of", "inside", "outside", "around", "along", "beyond", "below", "among")


@dataclass(frozen=True)
class Noun:
    singular: str
    plural: str
    kind: NounKind

    @property
    def animate(self) -> bool:
        return self.kind in ANIMATE_KINDS


@dataclass(frozen=True)
class Verb:
    base: str  # "cross": the infinitive and the plural present
    third: str  # "crosses": 3rd person singular present
    past: str  # "crossed"
    ing: str  # "crossing"
    transitive: bool


@dataclass(frozen=True)
class Adjective:
    word: str
    kind: AdjectiveKind


@dataclass(frozen=True)
class Lexicon:
    """Word lists by kind; every noun has its plural, every verb its forms."""

    nouns: tuple[Noun, ...]
    verbs: tuple[Verb, ...]
    adjectives: tuple[Adjective, ...]
    names: tuple[tuple[str, str], ...] = NAMES  # (first name, gender)
    cities: tuple[str, ...] = ()
    prepositions: tuple[str, ...] = PREPOSITIONS
    _by_kind: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        problems = [message for failed, message in (
            (not self.verbs, "a lexicon needs verbs"),
            (not any(v.transitive for v in self.verbs), "a lexicon needs a transitive verb"),
            (not any(not v.transitive for v in self.verbs), "a lexicon needs an intransitive verb"),
            (not self.names, "a lexicon needs names"),
            (not self.prepositions, "a lexicon needs prepositions"),
            *((not self.nouns_of(kind), f"a lexicon needs a noun of kind {kind}") for kind in NOUN_KINDS),
            *((not self.adjectives_of(kind), f"a lexicon needs an adjective of kind {kind}")
              for kind in ADJECTIVE_KINDS),
            *((n.kind not in NOUN_KINDS, f"{n.singular}: noun kind {n.kind!r} is not one of {NOUN_KINDS}")
              for n in self.nouns),
            *((n.singular == n.plural, f"{n.singular}: a noun whose plural is its singular shows no number")
              for n in self.nouns),
        ) if failed]
        if problems:
            raise ValueError(problems[0])

    def nouns_of(self, *kinds: str) -> tuple[Noun, ...]:
        key = ("nouns", kinds)
        if key not in self._by_kind:
            self._by_kind[key] = tuple(n for n in self.nouns if n.kind in kinds)
        return self._by_kind[key]

    def adjectives_of(self, kind: str) -> tuple[str, ...]:
        key = ("adjectives", kind)
        if key not in self._by_kind:
            self._by_kind[key] = tuple(a.word for a in self.adjectives if a.kind == kind)
        return self._by_kind[key]

    def verbs_of(self, transitive: bool) -> tuple[Verb, ...]:
        key = ("verbs", transitive)
        if key not in self._by_kind:
            self._by_kind[key] = tuple(v for v in self.verbs if v.transitive == transitive)
        return self._by_kind[key]

    def size(self) -> dict[str, int]:
        """How many words of each kind (a model card lists them)."""
        return {**{f"nouns ({kind})": len(self.nouns_of(kind)) for kind in NOUN_KINDS},
                "verbs (transitive)": len(self.verbs_of(True)), "verbs (intransitive)": len(self.verbs_of(False)),
                **{f"adjectives ({kind})": len(self.adjectives_of(kind)) for kind in ADJECTIVE_KINDS},
                "names": len(self.names), "cities": len(self.cities), "prepositions": len(self.prepositions)}


# ---------------------------------------------------------------------------------------------------------
# WordNet 3.0's database files (wndb(5WN)): index.POS and data.POS
# ---------------------------------------------------------------------------------------------------------

# lexicographer file numbers (lexnames(5WN))
LEX_PERSON = 18
# a noun whose first sense lies under one of these (the first sense of each word) names a place
PLACE_ANCESTORS = ("road", "body of water", "tract", "building", "bridge", "room")
OFFENSIVE_USAGES = ("obscenity", "ethnic slur", "disparagement", "vulgarism")
UNMARKED_OFFENSIVE = frozenset({"whore", "bitch", "bastard", "slut", "damn", "hell", "crap", "suck", "screw",
                                "prostitute", "nude", "naked", "ghetto", "drunk", "lewd", "sexy", "sexual",
                                "homosexual", "gay", "virgin", "terrorist", "rape", "kill", "murder", "porn",
                                "mistress", "pimp", "stripper", "junkie", "addict", "corpse", "suicide", "rapist",
                                "slave", "nazi", "bomb", "gun", "shotgun", "rifle", "pistol"})
INTRANSITIVE_FRAMES = {2}  # "Somebody ----s"
TRANSITIVE_FRAMES = {8, 9}  # "Somebody ----s something", "Somebody ----s somebody"


@dataclass(frozen=True)
class Synset:
    lexname: int
    words: tuple[str, ...]  # as written in WordNet ("New_York" -> "New York")
    hypernyms: tuple[int, ...]  # offsets of its "@" and "@i" pointers
    usages: tuple[int, ...]  # offsets of its ";u" pointers: the usage its words are marked with (slang, ...)
    frames: frozenset[int]  # verb sentence frames that apply to the whole synset


def _parse_data_line(line: str) -> tuple[int, Synset]:
    fields = line.split(" | ")[0].split()
    offset, lexname, n_words = int(fields[0]), int(fields[1]), int(fields[3], 16)
    words = tuple(fields[4 + 2 * k].replace("_", " ").split("(")[0] for k in range(n_words))
    at = 4 + 2 * n_words
    n_pointers = int(fields[at])
    pointers = [fields[at + 1 + 4 * k: at + 5 + 4 * k] for k in range(n_pointers)]
    hypernyms = tuple(int(p[1]) for p in pointers if p[0] in ("@", "@i"))
    usages = tuple(int(p[1]) for p in pointers if p[0] == ";u" and p[2] == "n")
    rest = fields[at + 1 + 4 * n_pointers:]
    frames = frozenset(int(rest[1 + 3 * k + 1]) for k in range(int(rest[0])) if rest[1 + 3 * k + 2] == "00") \
        if rest else frozenset()
    return offset, Synset(lexname, words, hypernyms, usages, frames)


@functools.cache
def wordnet_synsets(pos: str, directory: Path = WORDNET_DIR) -> dict[int, Synset]:
    """offset -> Synset of one part of speech ("noun", "verb", "adj")."""
    path = directory / f"data.{pos}"
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: install Debian's wordnet-base (apt-get install wordnet-base)")
    with path.open(encoding="utf-8") as lines:
        return dict(_parse_data_line(line) for line in lines if not line.startswith(" "))


@functools.cache
def wordnet_index(pos: str, directory: Path = WORDNET_DIR) -> dict[str, tuple[int, list[int]]]:
    """lemma -> (how many of its senses are tagged in WordNet's corpus, its synset offsets, most frequent first)."""
    index = {}
    with (directory / f"index.{pos}").open(encoding="utf-8") as lines:
        for line in lines:
            if line.startswith(" "):
                continue
            fields = line.split()
            n_synsets, n_pointers = int(fields[2]), int(fields[3])
            tagged = int(fields[5 + n_pointers])
            index[fields[0].replace("_", " ")] = (tagged, [int(o) for o in fields[-n_synsets:]])
    return index


def _ancestors(offset: int, synsets: dict[int, Synset]) -> set[str]:
    """Every word of every hypernym above the synset, up to the top."""
    seen, words, todo = set(), set(), [offset]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        words.update(synsets[current].words)
        todo.extend(synsets[current].hypernyms)
    return words


def parts_of_speech(word: str) -> list[str]:
    """The parts of speech ("noun", "verb", "adj") of `word` whose senses WordNet's corpus tags at least half as
    often as those of its most tagged one ("love": noun 4, verb 3, both); none when no sense is tagged (a word
    WordNet has no evidence for is left out)."""
    counts = {pos: wordnet_index(pos).get(word, (0, []))[0] for pos in ("noun", "verb", "adj")}
    most = max(counts.values())
    return [pos for pos, count in counts.items() if count > 0 and 2 * count >= most]


@functools.cache
def _marked_usages() -> tuple[frozenset[int], frozenset[int]]:
    """The offsets of the offensive usages (obscenity, ...) and of slang."""
    synsets = wordnet_synsets("noun")
    return tuple(frozenset(offset for offset, synset in synsets.items() if set(synset.words) & set(usages))
                 for usages in (OFFENSIVE_USAGES, ("slang",)))


def is_marked(word: str) -> bool:
    """Whether a sense of `word`, in any part of speech, is marked as an obscenity, a slur or disparaging, or its
    first sense as slang (or it is in our own short list of words WordNet leaves unmarked): no such word goes into
    a classroom's corpus. ("cat" has a slang sense, a man, but is first an animal.)"""
    if word in UNMARKED_OFFENSIVE:
        return True
    offensive, slang = _marked_usages()
    for pos in ("noun", "verb", "adj"):
        for rank, offset in enumerate(wordnet_index(pos).get(word, (0, []))[1]):
            usages = set(wordnet_synsets(pos)[offset].usages)
            if usages & offensive or (rank == 0 and usages & slang):
                return True
    return False


def noun_kind(word: str) -> str | None:
    """person, animal, place or object by the word's first noun sense, abstract for any other (an idea, a year, a
    name); None for a proper noun."""
    synsets = wordnet_synsets("noun")
    first = synsets[wordnet_index("noun")[word][1][0]]
    if word not in first.words:  # written with capitals there: a proper noun
        return None
    ancestors = _ancestors(wordnet_index("noun")[word][1][0], synsets)
    if first.lexname == LEX_PERSON or "person" in ancestors:
        return "person"
    if "animal" in ancestors:  # not the feathers and hooves filed with animals
        return "animal"
    if ancestors & set(PLACE_ANCESTORS):
        return "place"
    return "object" if "physical object" in ancestors or "artifact" in ancestors else "abstract"


def is_common_adjective(word: str) -> bool:
    """Whether the word's first adjective sense is written in lower case ("Japanese" is a proper adjective)."""
    return word in wordnet_synsets("adj")[wordnet_index("adj")[word][1][0]].words


def verb_transitivity(word: str) -> bool | None:
    """True (transitive), False (intransitive) or None (neither frame, e.g. "Something ----s") by the frames of
    the verb's first sense; a verb with both counts as transitive."""
    first = wordnet_synsets("verb")[wordnet_index("verb")[word][1][0]]
    if first.frames & TRANSITIVE_FRAMES:
        return True
    return False if first.frames & INTRANSITIVE_FRAMES else None


# ---------------------------------------------------------------------------------------------------------
# The real lexicon
# ---------------------------------------------------------------------------------------------------------

# words of the grammar itself (determiners, quantifiers, numbers, particles): never drawn as nouns, verbs or adjectives
FUNCTION_WORDS = frozenset(  # a hundred words read better unquoted
    "all some any many much more most few fewer less least both each every either neither no none one two three four "  # noqa: SIM905
    "five six seven eight nine ten hundred thousand first second last next other another such same own only very "
    "over under out away up down off back about above below near far here there then now well also just even still "
    "can may might must will would shall should could ought cannot eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety enough like done said "
    "several various certain through across around inside outside behind beyond along among between within".split())
AUXILIARIES = {"be", "have", "do", "will", "would", "can", "could", "shall", "should", "may", "might", "must",
               "get", "let", "say", "go"}  # the grammar's own words, or too idiomatic to draw at random


def _frequent(form: str) -> bool:
    from wordfreq import zipf_frequency

    return zipf_frequency(form, "en") >= MIN_ZIPF


def plural_of(noun: str) -> str | None:
    """The more frequent of the plurals lemminflect and inflect give, or None when one of them is the singular
    itself ("sheep"), or it is not frequent enough to be English, or under 1/100 as frequent as the singular (a
    noun that does not count: "informations")."""
    import inflect
    from lemminflect import getInflection
    from wordfreq import zipf_frequency

    candidates = {getInflection(noun, "NNS")[0], inflect.engine().plural_noun(noun)}
    if noun in candidates:
        return None
    plural = max(sorted(candidates), key=lambda form: zipf_frequency(form, "en"))
    counts = zipf_frequency(plural, "en") >= zipf_frequency(noun, "en") - MAX_PLURAL_DEFICIT
    return plural if plural.isalpha() and _frequent(plural) and counts else None


def verb_forms(lemma: str, transitive: bool) -> Verb | None:
    from lemminflect import getInflection

    forms = [getInflection(lemma, tag) for tag in ("VBZ", "VBD", "VBG")]
    if not all(forms):
        return None
    third, past, ing = (options[0] for options in forms)
    return Verb(lemma, third, past, ing, transitive) if _frequent(third) and _frequent(past) else None


def _words(top: int) -> Iterable[str]:
    from wordfreq import top_n_list

    return (word for word in top_n_list("en", top)
            if word.isalpha() and word.isascii() and len(word) > 2 and word not in FUNCTION_WORDS)


def is_lemma(word: str, upos: str) -> bool:
    """Whether `word` is its own lemma as a NOUN, VERB or ADJ by lemminflect ("higher" is not: it is "high")."""
    from lemminflect import getAllLemmas

    return word in getAllLemmas(word).get(upos, (word,))


def _is_common_word(name: str) -> bool:
    """Whether a name is also a common word, written in lower case in WordNet ("Nice": nice, "Reading": reading),
    which a sentence would read as that word."""
    word = name.lower()
    return any(word in wordnet_synsets(pos)[offset].words
               for pos in ("noun", "verb", "adj") for offset in wordnet_index(pos).get(word, (0, []))[1])


def cities(synsets: dict[int, Synset] | None = None) -> tuple[str, ...]:
    """Names of cities, most frequent first: WordNet's instances of "city" (a capital too), every part of the name
    capitalised (not "American capital"), that wordfreq finds at least 3 times in 10 million words."""
    from wordfreq import zipf_frequency

    synsets = synsets or wordnet_synsets("noun")
    names = {word for s in synsets.values() if s.words[0][:1].isupper() and s.hypernyms
             and "city" in _ancestors(s.hypernyms[0], synsets) for word in s.words
             if all(part[:1].isupper() and part.isalpha() for part in word.split()) and not _is_common_word(word)}
    frequency = {name: zipf_frequency(name, "en") for name in names}
    return tuple(sorted((name for name in names if frequency[name] >= 2.5), key=lambda name: (-frequency[name], name)))


@functools.cache  # a training run's pools and evaluation read the same lexicon
def build_lexicon(top: int = TOP_WORDS) -> Lexicon:
    """The lexicon of the `top` most frequent English words (seconds; wordfreq, lemminflect, inflect and WordNet)."""
    nouns, verbs, adjectives = [], [], []
    special = set(ANIMATE_ADJECTIVES) | set(PLACE_ADJECTIVES)
    first_names = {name.lower() for name, _ in NAMES}
    for word in _words(top):
        if is_marked(word) or word in first_names:  # not "john", a toilet
            continue
        pos = parts_of_speech(word)
        if "noun" in pos and is_lemma(word, "NOUN") and (kind := noun_kind(word)) and (plural := plural_of(word)):
            nouns.append(Noun(word, plural, kind))
        transitive = (verb_transitivity(word) if "verb" in pos and word not in AUXILIARIES and is_lemma(word, "VERB")
                      else None)
        if transitive is not None and (verb := verb_forms(word, transitive)):
            verbs.append(verb)
        if "adj" in pos and word not in special and is_lemma(word, "ADJ") and is_common_adjective(word):
            adjectives.append(Adjective(word, "any"))
    adjectives += [Adjective(word, "animate") for word in ANIMATE_ADJECTIVES]
    adjectives += [Adjective(word, "place") for word in PLACE_ADJECTIVES]
    return Lexicon(tuple(nouns), tuple(verbs), tuple(adjectives), cities=cities())
