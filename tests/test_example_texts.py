"""The example texts the pages open on (pages/ui/examples.py and the explorer's default) read word for word with both
text tokenizers: the grammar's, which knows every word, and the broad-English byte-level BPE, which reads every word
as one whole piece; and each keeps what its lesson needs."""

from __future__ import annotations

import pytest

from core.tokenizers.subword import SubwordTokenizer
from core.tokenizers.words import MASK, TextTokenizer
from pages.ui.examples import AGREEMENT, PERMUTED
from pages.ui.text_input import DEFAULT_TEXT

EXAMPLES = [DEFAULT_TEXT, *PERMUTED, *(text for pair in AGREEMENT.values() for text in pair)]


def words(text: str) -> list[str]:
    """The typed words, the full stop apart: "The cat sees the dog." -> The cat sees the dog ."""
    return text.replace(".", " .").split()


@pytest.mark.parametrize("text", EXAMPLES)
def test_an_example_reads_word_for_word_with_both_tokenizers(text):
    grammar, bpe = TextTokenizer().encode(text), SubwordTokenizer().encode(text)
    assert not any(grammar.is_unknown) and grammar.tokens[1:] == words(text)
    assert [piece.strip() for piece in bpe.tokens[1:]] == words(text)  # no word split into pieces ("t" "he")
    assert all(piece.startswith(" ") for piece in bpe.tokens[2:-1])  # each word after the first as " word"


@pytest.mark.parametrize("head", list(AGREEMENT))
def test_the_contrasting_text_changes_only_the_subjects_number(head):
    text, contrast = AGREEMENT[head]
    assert [(a, b) for a, b in zip(words(text), words(contrast), strict=True) if a != b] == [("keys", "key")]
    assert (MASK in words(text)) == (head == "masked_token")


@pytest.mark.parametrize("tok", [TextTokenizer(), SubwordTokenizer()], ids=["words", "bpe"])
def test_the_permuted_texts_hold_the_same_tokens_in_another_order(tok):
    first, second = (tok.encode(text).ids for text in PERMUTED)
    assert sorted(first) == sorted(second) and first != second
