"""Tests for the generated corpora: determinism, grammaticality, task correctness.

Agreement is checked by parsing each sentence with the lexicon alone (an
independent recursive-descent parser below), not by trusting generator metadata.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from core.data import algorithmic, grammar
from core.data.grammar import (ADJECTIVES, NAMES, NEUTRAL_DETERMINERS, PAST_VERBS, PLURAL_DETERMINERS, PLURAL_NOUNS,
                               PLURAL_VERBS, PREPOSITIONS, PRONOUNS, SINGULAR_DETERMINERS, SINGULAR_NOUNS,
                               SINGULAR_VERBS, TRANSITIVE_FORMS)

# ---------------------------------------------------------------------------
# An independent parser for the grammar, driven only by the lexicon.
# ---------------------------------------------------------------------------


def _noun_number(noun: str) -> str:
    if noun in SINGULAR_NOUNS:
        return "sg"
    assert noun in PLURAL_NOUNS, f"expected a noun, got {noun!r}"
    return "pl"


def _check_agreement(verb: str, number: str) -> None:
    if verb in PAST_VERBS:
        return
    assert verb in SINGULAR_VERBS or verb in PLURAL_VERBS, f"expected a verb, got {verb!r}"
    verb_number = "sg" if verb in SINGULAR_VERBS else "pl"
    assert verb_number == number, f"{verb!r} does not agree with a {number} subject"


def _parse_np(words: list[str], i: int) -> tuple[int, str]:
    """Name | pronoun | Det Adj* Noun (with determiner/noun and a/an agreement)."""
    if words[i] in NAMES or words[i] in PRONOUNS:
        return i + 1, "sg"
    det = words[i]
    assert det in NEUTRAL_DETERMINERS + SINGULAR_DETERMINERS + PLURAL_DETERMINERS, det
    if det in ("a", "an"):
        assert (det == "an") == (words[i + 1][0] in "aeiou"), f"{det!r} before {words[i + 1]!r}"
    i += 1
    while words[i] in ADJECTIVES:
        i += 1
    number = _noun_number(words[i])
    if det in SINGULAR_DETERMINERS:
        assert number == "sg", f"{det!r} before plural {words[i]!r}"
    if det in PLURAL_DETERMINERS:
        assert number == "pl", f"{det!r} before singular {words[i]!r}"
    return i + 1, number


def _parse_subject(words: list[str], i: int) -> tuple[int, str]:
    """NP [PP | 'that' V NP | 'that' NP V], checking agreement inside the clause."""
    i, number = _parse_np(words, i)
    if words[i] in PREPOSITIONS:
        i, _ = _parse_np(words, i + 1)
    elif words[i] == "that":
        if words[i + 1] in TRANSITIVE_FORMS:  # subject relative: verb agrees with head
            _check_agreement(words[i + 1], number)
            i, _ = _parse_np(words, i + 2)
        else:  # object relative: verb agrees with the inner noun phrase
            i, inner_number = _parse_np(words, i + 1)
            assert words[i] in TRANSITIVE_FORMS
            _check_agreement(words[i], inner_number)
            i += 1
    return i, number


def parse_sentence(words: list[str]) -> tuple[str, int]:
    """Parse one sentence (ending in '.'), assert it is grammatical and agrees;
    return (subject number, main verb index)."""
    i, number = _parse_subject(words, 0)
    verb_index = i
    verb = words[i]
    _check_agreement(verb, number)
    if verb in {"is", "are", "was", "were"}:
        assert words[i + 1] in ADJECTIVES
        i += 2
    elif verb in TRANSITIVE_FORMS:
        i, _ = _parse_np(words, i + 1)
    else:
        i += 1
    assert words[i:] == ["."], f"trailing words {words[i:]}"
    return number, verb_index


def split_sentences(text: str) -> list[list[str]]:
    words = text.split(" ")
    assert words[-1] == "."
    sentences, current = [], []
    for word in words:
        current.append(word)
        if word == ".":
            sentences.append(current)
            current = []
    return sentences


# ---------------------------------------------------------------------------
# Grammar corpus
# ---------------------------------------------------------------------------


def test_lexicon_categories_are_disjoint() -> None:
    words = grammar.lexicon_words()
    assert len(words) == len(set(words)), [w for w, c in Counter(words).items() if c > 1]
    assert 200 <= len(words) <= 500


def test_documents_are_deterministic_and_seed_dependent() -> None:
    assert grammar.generate_documents(50, seed=3) == grammar.generate_documents(50, seed=3)
    train = grammar.generate_documents(200, grammar.TRAIN_SEED)
    heldout = grammar.generate_documents(200, grammar.HELDOUT_SEED)
    assert train != heldout
    assert not set(train) & set(heldout)


def test_documents_shape() -> None:
    for doc in grammar.generate_documents(300, seed=0):
        assert doc == doc.strip() and "  " not in doc and doc == doc.lower()
        assert 2 <= doc.split().count(".") <= 5
        assert len(doc.split()) <= grammar.MAX_DOCUMENT_WORDS
        assert set(doc.split()) <= set(grammar.lexicon_words())


def test_every_document_sentence_parses_and_agrees() -> None:
    for doc in grammar.generate_documents(500, seed=0):
        for words in split_sentences(doc):
            parse_sentence(words)


def test_generated_sentences_agree_and_structure_matches_parse() -> None:
    rng = random.Random(0)
    numbers = Counter()
    for _ in range(2000):
        sentence = grammar.generate_sentence(rng)
        number, verb_index = parse_sentence(list(sentence.words))
        assert (number, verb_index) == (sentence.subject_number, sentence.verb_index)
        numbers[number] += 1
    assert numbers["sg"] > 500 and numbers["pl"] > 500


def test_parser_rejects_disagreement() -> None:
    """The checker itself must be able to fail."""
    with pytest.raises(AssertionError):
        parse_sentence("the keys to the old cabinet is red .".split())
    with pytest.raises(AssertionError):
        parse_sentence("the dog that the children loves runs .".split())
    with pytest.raises(AssertionError):
        parse_sentence("a old dog runs .".split())
    parse_sentence("the keys to the old cabinet are red .".split())
    parse_sentence("the dog that the children love runs .".split())


def test_pronouns_match_gender_of_an_earlier_name() -> None:
    pronouns_seen = 0
    for doc in grammar.generate_documents(500, seed=0):
        names = {w for w in doc.split() if w in NAMES}
        genders = [NAMES[n] for n in names]
        assert len(genders) == len(set(genders)), f"two names of one gender: {doc}"
        seen: set[str] = set()
        for word in doc.split():
            if word in NAMES:
                seen.add(NAMES[word])
            elif word in PRONOUNS:
                assert PRONOUNS[word] in seen, f"{word!r} has no antecedent: {doc}"
                pronouns_seen += 1
    assert pronouns_seen > 100


def test_documents_repeat_phrases() -> None:
    """Most documents repeat a noun phrase of 3+ words (what an induction head uses)."""
    docs = grammar.generate_documents(300, seed=0)

    def repeats_trigram(doc: str) -> bool:
        words = doc.split()
        trigrams = Counter(zip(words, words[1:], words[2:]))
        return any(c > 1 and "." not in t for t, c in trigrams.items())

    assert sum(map(repeats_trigram, docs)) > 0.5 * len(docs)


def test_agreement_examples() -> None:
    examples = grammar.generate_agreement_examples(500, seed=0)
    assert examples == grammar.generate_agreement_examples(500, seed=0)
    assert examples != grammar.generate_agreement_examples(500, seed=1)
    kinds = Counter()
    for ex in examples:
        words = ex.prefix.split()
        number, verb_index = parse_sentence([*words, ex.correct, *_complement(ex.correct)])
        assert verb_index == len(words)
        whole = [*words, ex.correct, *ex.suffix.split()]  # the sentence the probe was cut from, ending in "."
        assert parse_sentence(whole) == (number, verb_index) and whole[-1] == "."
        assert ex.wrong == (SINGULAR_VERBS.get(ex.correct) or PLURAL_VERBS[ex.correct])
        assert ex.attractor in words[1:]
        assert _noun_number(ex.attractor) != number
        kinds["rc" if "that" in words else "pp"] += 1
    assert kinds["rc"] > 100 and kinds["pp"] > 50


def _complement(verb: str) -> list[str]:
    """A minimal grammatical continuation after a main verb, to parse a probe."""
    if verb in {"is", "are", "was", "were"}:
        return ["red", "."]
    if verb in TRANSITIVE_FORMS:
        return ["the", "dog", "."]
    return ["."]


# ---------------------------------------------------------------------------
# Algorithmic tasks
# ---------------------------------------------------------------------------

_EXPECTED = {
    "reversal": lambda xs: xs[::-1],
    "copy": lambda xs: xs,
    "sort": lambda xs: sorted(xs, key=algorithmic.SYMBOLS.index),
}


@pytest.mark.parametrize("task", algorithmic.TASKS)
def test_algorithmic_answers_are_correct(task: str) -> None:
    lengths = set()
    for ex in algorithmic.generate(task, 300, seed=0, min_len=3, max_len=9):
        tokens = ex.text.split(" ")
        assert tokens[ex.answer_start - 1] == algorithmic.SEPARATOR
        task_input, answer = tokens[: ex.answer_start - 1], tokens[ex.answer_start :]
        assert set(task_input) <= set(algorithmic.SYMBOLS)
        assert len(set(task_input)) == len(task_input)
        assert answer == _EXPECTED[task](task_input)
        lengths.add(len(task_input))
    assert lengths == set(range(3, 10))


@pytest.mark.parametrize("task", algorithmic.TASKS)
def test_algorithmic_splits(task: str) -> None:
    train = algorithmic.generate(task, 500, algorithmic.TRAIN_SEED)
    assert train == algorithmic.generate(task, 500, algorithmic.TRAIN_SEED)
    assert train != algorithmic.generate(task, 500, seed=7)
    heldout = algorithmic.generate(task, 500, algorithmic.HELDOUT_SEED)
    assert not any(map(algorithmic.is_heldout_input, train))
    assert all(map(algorithmic.is_heldout_input, heldout))
    # Short inputs collide often between random draws; the split keeps them apart.
    short_train = algorithmic.generate(task, 2000, algorithmic.TRAIN_SEED, 2, 2)
    short_heldout = algorithmic.generate(task, 200, algorithmic.HELDOUT_SEED, 2, 2)
    train_inputs = {ex.text.split(" | ")[0] for ex in short_train}
    assert not train_inputs & {ex.text.split(" | ")[0] for ex in short_heldout}


def test_generate_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        algorithmic.generate("add", 1, 0)
    with pytest.raises(ValueError):
        algorithmic.generate("copy", 1, 0, min_len=5, max_len=len(algorithmic.SYMBOLS) + 1)


def test_packed_documents_fill_the_context_in_order_and_never_exceed_it():
    from core.data.grammar import generate_documents, pack_documents
    from core.model.run import tokenizer
    from core.training.tasks import text_pool

    tok = tokenizer()
    documents = generate_documents(200, 5)
    texts = pack_documents(documents, 128, tok)
    assert " ".join(texts) == " ".join(documents)  # every document, in order (none is longer than 128 tokens)
    lengths = [len(tok.encode(text).ids) + 1 for text in texts]  # [BOS] ... [EOS]
    assert max(lengths) <= 128 and sum(lengths[:-1]) / (len(lengths) - 1) > 100  # full, not one document each
    pool = text_pool("grammar-lm", 200, 5, tok, pack=128)
    assert max(len(sequence) for sequence in pool.sequences) <= 128
    assert len(pool) == len(texts)
