"""A generated translation task: English sentences of our grammar into "Tailish", a made-up language.

Tailish puts last what English puts first, so the words of a translation come from all over the source sentence
and the decoder's cross-attention (the alignment) is far from the diagonal:

1. the verb goes last, after its object or adjective (subject-object-verb), in relative clauses too;
2. noun phrases are mirrored: noun, then its adjectives in reverse order, then the determiner:
   "the big old key" -> "key old big ka"; a preposition follows its noun phrase: "near the box" -> "box ka near";
3. a plural noun is its singular plus the suffix token "-i" ("keys" -> "key -i", "children" -> "child -i");
   a past verb is its plain form plus "-ta" ("chased" -> "chase -ta"); the present is unmarked;
4. a few words are replaced: determiners (the -> ka, a/an -> un, ...), the pronouns, "that" -> ke, and the
   copula (is, are, was, were -> es, es -ta). Nouns, adjectives, verbs, prepositions and names keep their stem.

Each Tailish word comes from exactly one English word, recorded in the pair's ``alignment``: the "true"
alignment that the cross-attention is scored against. The translation is defined on the parse of a sentence of
the grammar (core/data/grammar.py), so a typed sentence gets one too when it parses.

Source sentences are drawn from the grammar; the held-out split is a reserved hash bucket of source sentences
(as in core/data/algorithmic.py), so no held-out sentence is ever trained on. Nothing here uses torch.
"""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from tokenizers import Tokenizer, normalizers, pre_tokenizers
from tokenizers.models import WordLevel

from core.data import grammar
from core.data.grammar import (ADJECTIVES, COPULA_FORMS, INTRANSITIVE_VERBS, NAMES, PAST_VERBS, PLURAL_NOUNS,
                               PREPOSITIONS, PRONOUNS, RELATIVIZER, SINGULAR_NOUNS, TRANSITIVE_FORMS, TRANSITIVE_VERBS,
                               Phrase)
from core.tokenizers.words import EOS, SPECIAL_TOKENS, UNK, TextTokenizer

TRAIN_SEED = 0
HELDOUT_SEED = 1
HELDOUT_BUCKETS = 10  # 1 source sentence in this many (by a stable hash) is held out
TARGET_TOKENIZER_PATH = Path(__file__).resolve().parent.parent.parent / "assets" / "seq2seq" / "tailish-tokenizer.json"

# ----------------------------------------------------------------------------------------------------------
# The Tailish lexicon
# ----------------------------------------------------------------------------------------------------------

DETERMINERS = {"the": "ka", "a": "un", "an": "un", "this": "ti", "these": "ti", "those": "tu", "every": "omni",
               "each": "omni", "my": "mi", "our": "nu", "your": "vu", "some": "ali", "many": "multi", "two": "du",
               "three": "tri"}
PRONOUN_WORDS = {"he": "lo", "she": "la"}
RELATIVE = "ke"  # "that"
COPULA = "es"  # is / are / was / were
PLURAL = "-i"  # suffix token after a plural noun
PAST = "-ta"  # suffix token after a past verb
STOP = "."

_VERBS = (*INTRANSITIVE_VERBS, *TRANSITIVE_VERBS)
VERB_STEMS = {form: verb.pl for verb in _VERBS for form in (verb.sg, verb.pl, verb.past)}
"""Every verb form -> its plain form ("runs", "ran" -> "run")."""


def target_words() -> list[str]:
    """Every word Tailish can emit, without duplicates, in a fixed order (the target vocabulary)."""
    words = [*dict.fromkeys(DETERMINERS.values()), *PRONOUN_WORDS.values(), RELATIVE, COPULA, PLURAL, PAST, STOP,
             *SINGULAR_NOUNS, *ADJECTIVES, *dict.fromkeys(VERB_STEMS.values()), *PREPOSITIONS, *NAMES]
    return list(dict.fromkeys(words))


def source_words() -> frozenset[str]:
    """The English words a source sentence may use: the whole grammar lexicon."""
    return frozenset(grammar.lexicon_words())


# ----------------------------------------------------------------------------------------------------------
# Parsing an English sentence of the grammar
# ----------------------------------------------------------------------------------------------------------

class NotInGrammarError(ValueError):
    """Words that are all in the vocabulary but do not form a sentence of the grammar; str() says where."""


@dataclass(frozen=True)
class Span:
    """A noun phrase (or name / pronoun) of the source: the index of each word, determiner first, noun last."""

    indices: tuple[int, ...]


@dataclass(frozen=True)
class Parse:
    """The constituents of "subject [modifier] predicate ." by word index.

    modifier: ("pp", prep, NP) | ("rc", that, verb, NP) (subject or object relative clause: Tailish writes both
    "ke NP verb"); predicate: ("copula", verb, adjective) | ("intransitive", verb) | ("transitive", verb, NP).
    """

    subject: Span
    modifier: tuple | None
    predicate: tuple
    stop: int


class _Reader:
    """Reads the words left to right; every word of the lexicon has one category, so no backtracking is needed."""

    def __init__(self, words: list[str]):
        self.words, self.i = words, 0

    def peek(self) -> str | None:
        return self.words[self.i] if self.i < len(self.words) else None

    def take(self, accepts, wanted: str) -> int:
        word = self.peek()
        if word is None or not accepts(word):
            where = f"after '{' '.join(self.words[:self.i])}'" if self.i else "at the start"
            found = f"'{word}'" if word is not None else "the end of the sentence"
            raise NotInGrammarError(f"expected {wanted} {where}, found {found}")
        self.i += 1
        return self.i - 1

    def noun_phrase(self) -> Span:
        """det adj* noun | name | pronoun."""
        if self.peek() in NAMES or self.peek() in PRONOUNS:
            return Span((self.take(lambda w: True, "a name"),))
        indices = [self.take(DETERMINERS.__contains__, "a noun phrase (a determiner, a name or he/she)")]
        while self.peek() in ADJECTIVES:
            indices.append(self.take(ADJECTIVES.__contains__, "an adjective"))
        indices.append(self.take(lambda w: w in SINGULAR_NOUNS or w in PLURAL_NOUNS, "a noun"))
        return Span(tuple(indices))

    def verb(self, kinds: str) -> int:
        checks = {"transitive": TRANSITIVE_FORMS.__contains__, "any": lambda w: w in VERB_STEMS or w in COPULA_FORMS}
        return self.take(checks[kinds], "a transitive verb" if kinds == "transitive" else "a verb")

    def modifier(self) -> tuple | None:
        if self.peek() in PREPOSITIONS:
            return "pp", self.take(PREPOSITIONS.__contains__, "a preposition"), self.noun_phrase()
        if self.peek() != RELATIVIZER:
            return None
        that = self.take(RELATIVIZER.__eq__, "that")
        if self.peek() in TRANSITIVE_FORMS:  # subject relative: that chases the cats
            verb = self.verb("transitive")
            return "rc", that, verb, self.noun_phrase()
        inner = self.noun_phrase()  # object relative: that the children love
        return "rc", that, self.verb("transitive"), inner

    def predicate(self) -> tuple:
        verb = self.verb("any")
        word = self.words[verb]
        if word in COPULA_FORMS:
            return "copula", verb, self.take(ADJECTIVES.__contains__, "an adjective after the copula")
        if word in TRANSITIVE_FORMS:
            return "transitive", verb, self.noun_phrase()
        return "intransitive", verb


def parse(words: list[str] | tuple[str, ...]) -> Parse:
    """The parse of one sentence "subject [modifier] predicate ."; NotInGrammarError says what does not fit.

    Agreement is not checked: Tailish does not mark number on verbs, so the translation does not depend on it."""
    reader = _Reader(list(words))
    subject = reader.noun_phrase()
    modifier = reader.modifier() if len(subject.indices) > 1 else None
    predicate = reader.predicate()
    stop = reader.take(STOP.__eq__, "'.' to end the sentence")
    if reader.peek() is not None:
        raise NotInGrammarError(f"one sentence only: '{' '.join(words[stop + 1:])}' follows its '.'")
    return Parse(subject, modifier, predicate, stop)


# ----------------------------------------------------------------------------------------------------------
# Translating
# ----------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Pair:
    """An English sentence, its Tailish translation and the alignment: target[t] comes from source[alignment[t]].

    ``main_verb`` is the source index of the sentence's main verb (it moves to the end in Tailish)."""

    source: tuple[str, ...]
    target: tuple[str, ...]
    alignment: tuple[int, ...]
    main_verb: int

    @property
    def source_text(self) -> str:
        return " ".join(self.source)

    @property
    def target_text(self) -> str:
        return " ".join(self.target)


def _noun_phrase(words, span: Span) -> list[tuple[str, int]]:
    """Mirrored: noun (its singular, then -i when plural), adjectives in reverse order, determiner."""
    *modifiers, noun = span.indices
    word = words[noun]
    if word in PRONOUN_WORDS:
        return [(PRONOUN_WORDS[word], noun)]
    if word in PLURAL_NOUNS:
        head = [(PLURAL_NOUNS[word], noun), (PLURAL, noun)]
    else:
        head = [(word, noun)]  # a singular noun or a name
    # modifiers are adjectives (kept) and the determiner (replaced); no word is both
    return head + [(DETERMINERS.get(words[i], words[i]), i) for i in reversed(modifiers)]


def _verb(words, index: int) -> list[tuple[str, int]]:
    """The plain form (es for the copula), then -ta when the verb is past."""
    word = words[index]
    stem = COPULA if word in COPULA_FORMS else VERB_STEMS[word]
    past = word in PAST_VERBS or word in ("was", "were")
    return [(stem, index)] + ([(PAST, index)] if past else [])


def translate(words: list[str] | tuple[str, ...]) -> Pair:
    """The Tailish translation of an English sentence of the grammar, with its alignment (NotInGrammarError if
    the words do not parse)."""
    tree = parse(words)
    out = _noun_phrase(words, tree.subject)
    if tree.modifier is not None and tree.modifier[0] == "pp":
        _, prep, inner = tree.modifier
        out += _noun_phrase(words, inner) + [(words[prep], prep)]
    elif tree.modifier is not None:
        _, that, verb, inner = tree.modifier
        out += [(RELATIVE, that)] + _noun_phrase(words, inner) + _verb(words, verb)
    kind, verb, *rest = tree.predicate
    if kind == "copula":
        out += [(words[rest[0]], rest[0])]
    elif kind == "transitive":
        out += _noun_phrase(words, rest[0])
    out += _verb(words, verb) + [(STOP, tree.stop)]
    target, alignment = zip(*out)
    return Pair(tuple(words), target, alignment, verb)


# ----------------------------------------------------------------------------------------------------------
# Generating pairs
# ----------------------------------------------------------------------------------------------------------

def _subject(rng: random.Random) -> Phrase:
    """A noun phrase with 0-2 adjectives (80%), a name (12%) or a pronoun (8%)."""
    roll = rng.random()
    if roll < 0.12:
        return grammar.name_phrase(rng.choice(tuple(NAMES)))
    if roll < 0.2:
        pronoun = rng.choice(tuple(PRONOUNS))
        return Phrase((pronoun,), "sg", pronoun)
    return grammar.noun_phrase(rng, "sg" if rng.random() < 0.5 else "pl", 0, 2)


def random_sentence(rng: random.Random) -> tuple[str, ...]:
    """One sentence of the grammar (core.data.grammar.build_sentence): a subject, often a prepositional phrase or
    relative clause after a noun-phrase subject, then an intransitive verb, copula + adjective or verb + object."""
    subject = _subject(rng)
    modifier = ("sg" if rng.random() < 0.5 else "pl") if len(subject.words) > 1 and rng.random() < 0.6 else None
    tense = "present" if rng.random() < 0.6 else "past"
    obj = (grammar.name_phrase(rng.choice(tuple(NAMES))) if rng.random() < 0.15
           else grammar.noun_phrase(rng, "sg" if rng.random() < 0.5 else "pl", 0, 2))
    return grammar.build_sentence(rng, subject, modifier, tense, objects=[obj]).words


def is_heldout(words: tuple[str, ...]) -> bool:
    """Whether the source sentence falls in the reserved held-out hash bucket."""
    return zlib.crc32(" ".join(words).encode()) % HELDOUT_BUCKETS == 0


def generate_pairs(n: int, seed: int) -> list[Pair]:
    """``n`` translation pairs, deterministic given ``seed``: HELDOUT_SEED draws only held-out sentences, any other
    seed only training sentences, so the two splits never share a source sentence."""
    rng = random.Random(f"translation-{seed}")
    want_heldout = seed == HELDOUT_SEED
    pairs: list[Pair] = []
    while len(pairs) < n:
        words = random_sentence(rng)
        if is_heldout(words) == want_heldout:
            pairs.append(translate(words))
    return pairs


# ----------------------------------------------------------------------------------------------------------
# Token ids: the app's tokenizer for English, a Tailish tokenizer of our own
# ----------------------------------------------------------------------------------------------------------

def build_target_tokenizer() -> Tokenizer:
    """A word-level tokenizer over the special tokens (the same ids as the app's tokenizer) and the Tailish words;
    split on whitespace only, so the suffix tokens "-i" and "-ta" stay whole."""
    vocab = {token: i for i, token in enumerate([*SPECIAL_TOKENS, *target_words()])}
    tokenizer = Tokenizer(WordLevel(vocab, unk_token=SPECIAL_TOKENS[1]))
    tokenizer.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return tokenizer


MAX_SOURCE_CHARS = 1_000  # far beyond any sentence the encoder can read (24 tokens); refused before tokenizing


class TranslationInputError(ValueError):
    """A typed source sentence the model cannot read; str() is one clear line for the user."""


@dataclass(frozen=True)
class Vocabularies:
    """English (source) and Tailish (target) token ids."""

    source: TextTokenizer
    target: TextTokenizer

    def source_ids(self, words) -> list[int]:
        """The encoder's input: the words, then [EOS] (the end of the source, where [EOS] aligns)."""
        return [self.source.token_to_id(w) for w in words] + [self.source.eos_id]

    def target_ids(self, words) -> list[int]:
        """The decoder's targets: the words, then [EOS]; it reads [BOS] followed by all but the last."""
        return [self.target.token_to_id(w) for w in words] + [self.target.eos_id]

    def encode(self, pair: Pair) -> tuple[list[int], list[int], list[int]]:
        """(source ids, target ids, alignment): target [EOS] aligns to source [EOS]."""
        return self.source_ids(pair.source), self.target_ids(pair.target), [*pair.alignment, len(pair.source)]

    def target_tokens(self, ids) -> list[str]:
        return [self.target.id_to_token(i) for i in ids]


@lru_cache(maxsize=1)
def vocabularies(target_path: Path = TARGET_TOKENIZER_PATH) -> Vocabularies:
    """The app's tokenizer (assets/tokenizer.json) for English and the saved Tailish one."""
    return Vocabularies(TextTokenizer(), TextTokenizer(target_path))


@dataclass(frozen=True)
class SourceSentence:
    """A typed sentence read for the model: the words it reads ([UNK] for a word outside the grammar's, [EOS]
    last), their ids, and the rules' translation, or why there is none (a sentence outside the grammar, which the
    model can still try); `shown`: each token as typed, `unknown`: which ones it reads as [UNK]."""

    words: tuple[str, ...]
    ids: tuple[int, ...]
    pair: Pair | None
    not_in_grammar: str | None
    shown: tuple[str, ...]
    unknown: tuple[bool, ...]


def check_source_length(text: str, max_len: int) -> None:
    """TranslationInputError when the sentence is longer than MAX_SOURCE_CHARS: checked before it is tokenized or
    cached (an 8 MB text took 4.7 s and listed every unknown word)."""
    if len(text or "") > MAX_SOURCE_CHARS:
        raise TranslationInputError(f"the sentence has {len(text):,} characters; the encoder reads at most {max_len} "
                                    f"tokens, so type at most {MAX_SOURCE_CHARS:,} characters")


def read_source(text: str, max_len: int, vocab: Vocabularies | None = None) -> SourceSentence:
    """Tokenize a typed English sentence; TranslationInputError when it is empty, longer than MAX_SOURCE_CHARS (before
    it is tokenized: an 8 MB text took 4.7 s and listed every unknown word) or longer than the encoder's ``max_len``
    tokens (with [EOS]). A word outside the grammar's lexicon is read as [UNK], as the text explorer reads it (also
    the digits and symbols of the algorithmic tasks, which the app's tokenizer knows and the encoder never saw)."""
    vocab = vocab or vocabularies()
    check_source_length(text, max_len)
    encoded = vocab.source.encode(text or "", add_bos=False)
    if not encoded.ids:
        raise TranslationInputError("the sentence is empty: type an English sentence of the grammar, e.g. "
                                    "'the old dog sees two cats .'")
    known = source_words()
    words = [vocab.source.id_to_token(i) for i in encoded.ids]
    unknown = [word not in known for word in words]
    words = [UNK if flag else word for word, flag in zip(words, unknown)]
    if len(words) + 1 > max_len:
        raise TranslationInputError(f"the sentence has {len(words)} words (+ [EOS]) but the encoder reads at most "
                                    f"{max_len} tokens; shorten it")
    if any(unknown):  # `shown` and `unknown` name them
        count = sum(unknown)
        pair, problem = None, (f"{count} of its words {'is' if count == 1 else 'are'} outside the grammar's "
                               "vocabulary, read as [UNK]")
    else:
        try:
            pair, problem = translate(words), None
        except NotInGrammarError as error:
            pair, problem = None, str(error)
    return SourceSentence((*words, EOS), tuple(vocab.source_ids(words)), pair, problem, (*encoded.tokens, EOS),
                          (*unknown, False))
