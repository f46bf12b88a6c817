"""Tests for the word-level tokenizer: vocabulary, round trips, hostile input."""

from __future__ import annotations

import pytest

from core.data import algorithmic, grammar
from core.data.vocabulary import build_tokenizer
from core.tokenizers.words import SPECIAL_TOKENS, TextTokenizer


@pytest.fixture(scope="module")
def tokenizer() -> TextTokenizer:
    return TextTokenizer()


def test_saved_tokenizer_matches_a_fresh_build() -> None:
    """assets/tokenizer.json is up to date with the generators (and building is deterministic)."""
    fresh = build_tokenizer()
    assert fresh.get_vocab() == build_tokenizer().get_vocab()
    assert TextTokenizer()._tokenizer.get_vocab() == fresh.get_vocab()


def test_vocabulary(tokenizer: TextTokenizer) -> None:
    ids = (tokenizer.pad_id, tokenizer.unk_id, tokenizer.bos_id,
           tokenizer.eos_id, tokenizer.mask_id, tokenizer.sep_id)
    assert ids == (0, 1, 2, 3, 4, 5)
    expected = {*SPECIAL_TOKENS, *grammar.lexicon_words(), *algorithmic.SYMBOLS,
                algorithmic.SEPARATOR}
    vocab = {tokenizer.id_to_token(i) for i in range(tokenizer.vocab_size)}
    assert vocab == expected
    assert tokenizer.token_to_id("cat") is not None
    assert tokenizer.token_to_id("zebra") is None


def test_round_trips_generated_corpora(tokenizer: TextTokenizer) -> None:
    texts = grammar.generate_documents(300, grammar.HELDOUT_SEED)
    texts += [ex.prefix for ex in grammar.generate_agreement_examples(100, 0)]
    for task in algorithmic.TASKS:
        texts += [ex.text for ex in algorithmic.generate(task, 100, algorithmic.HELDOUT_SEED)]
    for text in texts:
        encoded = tokenizer.encode(text)
        assert encoded.ids[0] == tokenizer.bos_id
        assert not any(encoded.is_unknown), text
        assert tokenizer.decode(encoded.ids[1:]) == text
        assert encoded.tokens[1:] == text.split(" ")


def test_algorithmic_answer_start_indexes_tokens(tokenizer: TextTokenizer) -> None:
    ex = algorithmic.generate("reversal", 1, 0)[0]
    encoded = tokenizer.encode(ex.text, add_bos=False)
    assert encoded.tokens[ex.answer_start - 1] == algorithmic.SEPARATOR
    assert len(encoded.ids) == len(ex.text.split())


def test_surface_tokens_are_as_typed(tokenizer: TextTokenizer) -> None:
    encoded = tokenizer.encode("The CAT!")
    assert encoded.tokens == ["[BOS]", "The", "CAT", "!"]
    assert encoded.ids[1:3] == [tokenizer.token_to_id("the"), tokenizer.token_to_id("cat")]
    assert encoded.is_unknown == [False, False, False, True]


def test_empty_string(tokenizer: TextTokenizer) -> None:
    assert tokenizer.encode("").ids == [tokenizer.bos_id]
    assert tokenizer.encode("").tokens == ["[BOS]"]
    assert tokenizer.encode("", add_bos=False).ids == []


@pytest.mark.parametrize(
    "text",
    [
        "🙂 the dog 🐕‍🦺!",
        "مرحبا بالعالم the cat",
        "שלום the cat",
        "\x00 the \x1b[31m cat \u200b dog",
        "cafe\u0301 the\u0301 \u0301",
        "ﬁ ½ İstanbul",
        "\ud800",  # lone surrogate
        "the\tcat\r\ndog\u3000runs",
    ],
)
def test_hostile_input_does_not_raise(tokenizer: TextTokenizer, text: str) -> None:
    encoded = tokenizer.encode(text)
    assert len(encoded.ids) == len(encoded.tokens) == len(encoded.is_unknown)
    assert all(0 <= i < tokenizer.vocab_size for i in encoded.ids)
    assert all(piece for piece in encoded.tokens)
    tokenizer.decode(encoded.ids)


def test_unknown_flags(tokenizer: TextTokenizer) -> None:
    encoded = tokenizer.encode("the zebra 🙂 runs שלום", add_bos=False)
    assert encoded.tokens == ["the", "zebra", "🙂", "runs", "שלום"]
    assert encoded.is_unknown == [False, True, True, False, True]
    assert [i == tokenizer.unk_id for i in encoded.ids] == encoded.is_unknown


def test_combining_marks_stay_with_their_word(tokenizer: TextTokenizer) -> None:
    assert tokenizer.encode("cafe\u0301 dog", add_bos=False).tokens == ["cafe\u0301", "dog"]


def test_long_input_is_not_truncated(tokenizer: TextTokenizer) -> None:
    text = "the cat runs . " * 7000  # 105,000 characters
    assert len(tokenizer.encode(text).ids) == 1 + 4 * 7000
    assert len(tokenizer.encode("x" * 100_000).ids) == 2
