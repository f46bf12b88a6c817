"""The byte-level BPE tokenizer (core/tokenizers/subword.py): anything a class types is read whole, as typed, with
readable labels, and decodes back to itself."""

from __future__ import annotations

import unicodedata

import pytest
from tokenizers import Tokenizer

from core.figures.attention import token_label
from core.tokenizers.subword import (
    SubwordTokenizer,
    byte_alphabet,
    new_tokenizer,
    readable,
    train_tokenizer,
)
from core.tokenizers.words import BOS, SPECIAL_TOKENS

# what a class types into the explorer: none of these is in the training texts below
CLASSROOM = [
    "The animal didn't cross the street because it was too tired",
    "The animal didn't cross the street because it was too wide",
    "Attention is all you need",
    "The cat sat on the mat.",
    "My name is Sarah and I live in London",
    "I'm 12 years old and my sister is 9!",
    "What's the capital of France?",
    "The quick brown fox jumps over the lazy dog.",
    "She said, \"Hello, world!\"",
    "We can't go outside; it's raining.",
    "Call me at 555-0199 before 5:30 p.m.",
    "The keys to the cabinet are on the table",
    "It costs $3.50 (about £2.80) or 4,000 yen",
    "Dr. Okafor won't arrive until 2024-06-01",
    "Théo and Zoë ate crème brûlée at the café",
    "naïve résumé façade",
    "Ich heiße Jürgen und wohne in München",
    "¿Dónde está la biblioteca?",
    "Москва — столица России",
    "東京は日本の首都です",
    "I love pizza 🍕🍕 and cats 🐈‍⬛!",
    "👍🏽 thumbs up",
    "e = mc²  and  π ≈ 3.14159",
    "x_1 + x_2 >= 10 % of y",
    "    leading and trailing spaces   ",
    "tabs\tand\nnew lines",
    "ALL CAPS SHOUTING",
    "camelCaseWords and snake_case_words",
    "#hashtag @mention https://example.org/a?b=c",
    "She sells seashells by the seashore.",
    "Colorless green ideas sleep furiously",
    "The old man the boats.",
    "Time flies like an arrow; fruit flies like a banana.",
    "Why did the chicken cross the road?",
    "Supercalifragilisticexpialidocious",
    "antidisestablishmentarianism",
    "cafe\u0301 typed with a combining accent",
    "zero\u200bwidth and soft\u00adhyphen",
    "The [MASK] sat on the mat",
    "",
]

TRAINING = [
    "the animal crossed the street .",
    "The dogs were tired , so they slept .",
    "My friend lives in a house near the river .",
    "She didn't know what it was .",
    "We saw 3 birds and 12 cats at 10 o'clock .",
    "\"Hello ,\" said the teacher .",
    "Is the road wide ? No , it isn't .",
] * 20


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory) -> SubwordTokenizer:
    path = tmp_path_factory.mktemp("subword") / "tokenizer.json"
    train_tokenizer(TRAINING, vocab_size=400, path=path)
    return SubwordTokenizer(path)


def test_special_tokens_first_and_every_byte_in_the_vocabulary(tokenizer):
    assert [tokenizer.pad_id, tokenizer.unk_id, tokenizer.bos_id, tokenizer.eos_id, tokenizer.mask_id,
            tokenizer.sep_id] == [0, 1, 2, 3, 4, 5]
    assert [tokenizer.id_to_token(i) for i in range(6)] == list(SPECIAL_TOKENS)
    vocabulary = tokenizer._tokenizer.get_vocab()
    assert set(byte_alphabet().values()) <= set(vocabulary)
    assert 262 < tokenizer.vocab_size <= 400  # merges were learnt, within the size asked for


def test_the_byte_alphabet_is_gpt2s():
    alphabet = byte_alphabet()
    assert len(set(alphabet.values())) == 256
    assert alphabet[ord(" ")] == "Ġ" and alphabet[ord("\n")] == "Ċ" and alphabet[ord("a")] == "a"
    assert readable("Ġthe") == " the" and readable("Ã©") == "é"
    assert readable("ð") == "<F0>"  # the first byte of a four-byte character alone


@pytest.mark.parametrize("text", CLASSROOM)
def test_a_classroom_sentence_is_read_whole_and_decodes_back(tokenizer, text):
    encoded = tokenizer.encode(text)
    assert encoded.ids[0] == tokenizer.bos_id and encoded.tokens[0] == BOS
    assert not any(encoded.is_unknown) and tokenizer.unk_id not in encoded.ids
    assert len(encoded.ids) == len(encoded.tokens) == len(encoded.is_unknown)
    assert tokenizer.decode(encoded.ids[1:]) == unicodedata.normalize("NFC", text).replace(" [MASK]", "[MASK]")


@pytest.mark.parametrize("text", [t for t in CLASSROOM if t.isascii()])
def test_pieces_are_shown_as_typed(tokenizer, text):
    """Capitals, punctuation and contractions stay as typed: the pieces put together are the text."""
    assert "".join(tokenizer.encode(text).tokens[1:]) == text


def test_capitals_digits_and_contractions(tokenizer):
    assert tokenizer.encode("The").ids != tokenizer.encode("the").ids
    assert tokenizer.encode("2024", add_bos=False).tokens == ["2", "0", "2", "4"]  # digits one by one
    pieces = tokenizer.encode("She didn't", add_bos=False).tokens
    assert pieces[0] == "She" and "".join(pieces) == "She didn't" and "'t" in pieces
    # typed, [MASK] is the mask token, as with the word tokenizer (the masked-token pages' examples type it); it
    # takes the space before it, as the piece " cat" it stands for would
    masked = tokenizer.encode("the [MASK] sat", add_bos=False)
    assert masked.tokens[:2] == ["the", " [MASK]"] and masked.ids[1] == tokenizer.mask_id
    assert masked.ids[2:] == tokenizer.encode(" sat", add_bos=False).ids


def test_labels_are_readable(tokenizer):
    """No byte-level "Ġ" on a chart: a space shows as ␣, a piece of a split character as its bytes in hex."""
    labels = [token_label(token) for text in CLASSROOM for token in tokenizer.encode(text).tokens]
    assert not any(char in label for label in labels for char in "ĠĊĉ")
    assert [token_label(t) for t in tokenizer.encode("the animal", add_bos=False).tokens] == ["the", "␣animal"]
    emoji = tokenizer.encode("🍕", add_bos=False)  # never in training: four bytes, four pieces
    assert emoji.tokens == ["<F0>", "<9F>", "<8D>", "<95>"] and tokenizer.decode(emoji.ids) == "🍕"
    assert tokenizer.encode("cafe\u0301", add_bos=False).tokens[-2:] == ["<C3>", "<A9>"]


def test_id_to_token_and_token_to_id_are_inverse(tokenizer):
    for i in range(tokenizer.vocab_size):
        assert tokenizer.token_to_id(tokenizer.id_to_token(i)) in (i, None)  # None: a hex label of bytes
    assert tokenizer.token_to_id(" street") == tokenizer.encode(" street", add_bos=False).ids[0]
    assert tokenizer.token_to_id("no such piece at all") is None
    assert tokenizer.token_to_id("\ud800") is None
    with pytest.raises(IndexError):
        tokenizer.id_to_token(tokenizer.vocab_size)


def test_training_is_deterministic_and_checked(tmp_path):
    first, second = train_tokenizer(TRAINING, vocab_size=300), train_tokenizer(TRAINING, vocab_size=300)
    assert first.get_vocab() == second.get_vocab()
    with pytest.raises(ValueError, match="at least 262"):
        train_tokenizer(TRAINING, vocab_size=100)


def test_a_file_without_the_special_tokens_first_is_refused(tmp_path):
    path = tmp_path / "odd.json"
    odd = new_tokenizer()
    from tokenizers.trainers import BpeTrainer

    odd.train_from_iterator(TRAINING, BpeTrainer(vocab_size=300, special_tokens=["[BOS]", "[PAD]"],
                                                 show_progress=False))
    odd.save(str(path))
    with pytest.raises(ValueError, match="ids 0..5"):
        SubwordTokenizer(path)
    with pytest.raises(FileNotFoundError):
        SubwordTokenizer(tmp_path / "missing.json")
    assert isinstance(Tokenizer.from_file(str(path)), Tokenizer)
