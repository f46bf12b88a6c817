"""Word-level tokenizer for the grammar corpus and the algorithmic tasks.

Read with the ``tokenizers`` library: a WordLevel model, NFKC + lowercase
normalisation, and a pre-tokenizer that splits on whitespace and isolates every
punctuation character. Its vocabulary is learnt from the generated corpora
(core/data/vocabulary.py builds ``assets/tokenizer.json``).

Any Unicode string tokenizes without error; pieces outside the vocabulary map to
[UNK]. Nothing is truncated here: the caller checks the model's context length.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer

TOKENIZER_PATH = Path(__file__).resolve().parents[2] / "assets" / "tokenizer.json"

PAD, UNK, BOS, EOS, MASK, SEP = "[PAD]", "[UNK]", "[BOS]", "[EOS]", "[MASK]", "[SEP]"
SPECIAL_TOKENS = (PAD, UNK, BOS, EOS, MASK, SEP)  # ids 0..5 in this order

@dataclass(frozen=True)
class Encoded:
    """Token ids plus, per id, the surface text as typed and whether it is [UNK].

    ``tokens`` come from the offsets into the original string, so "The" stays "The"
    and an unknown word shows as itself; the BOS shows as "[BOS]".
    """

    ids: list[int]
    tokens: list[str]
    is_unknown: list[bool]


def without_surrogates(text: str) -> str:
    """Replace lone surrogates (which Rust strings cannot hold) by U+FFFD, one for
    one, so offsets still index the original ``text``."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)
    return text


def surface_pieces(text: str, offsets: Sequence[tuple[int, int]]) -> list[str]:
    """The typed text of each piece.

    NFKC composes "e" + U+0301 into "é", and the offsets then stop before the
    combining mark; stretch each span over trailing combining marks (up to the next
    piece) so "café" typed with a combining accent is shown whole.
    """
    pieces = []
    for k, (start, end) in enumerate(offsets):
        limit = offsets[k + 1][0] if k + 1 < len(offsets) else len(text)
        while end < limit and unicodedata.combining(text[end]):
            end += 1
        pieces.append(text[start:end])
    return pieces


class TextTokenizer:
    """Thin wrapper over a saved ``tokenizers.Tokenizer`` with the ids the model needs."""

    def __init__(self, path: Path = TOKENIZER_PATH) -> None:
        if not Path(path).exists():
            raise FileNotFoundError(f"{path} not found; run `python -m core.data.vocabulary --build`")
        self._tokenizer = Tokenizer.from_file(str(path))
        self.vocab_size: int = self._tokenizer.get_vocab_size()
        self.pad_id, self.unk_id, self.bos_id, self.eos_id, self.mask_id, self.sep_id = (
            self._required_id(token) for token in SPECIAL_TOKENS
        )

    def _required_id(self, token: str) -> int:
        token_id = self._tokenizer.token_to_id(token)
        if token_id is None:
            raise ValueError(f"tokenizer has no {token} token")
        return token_id

    def encode(self, text: str, add_bos: bool = True) -> Encoded:
        """Tokenize ``text``; prepend [BOS] if ``add_bos``. Never truncates."""
        encoding = self._tokenizer.encode(without_surrogates(text), add_special_tokens=False)
        ids = list(encoding.ids)
        tokens = surface_pieces(text, encoding.offsets)
        if add_bos:
            ids.insert(0, self.bos_id)
            tokens.insert(0, BOS)
        return Encoded(ids, tokens, [i == self.unk_id for i in ids])

    def decode(self, ids: Sequence[int]) -> str:
        """Vocabulary tokens joined by single spaces (special tokens kept visible)."""
        return self._tokenizer.decode(list(ids), skip_special_tokens=False)

    def id_to_token(self, i: int) -> str:
        token = self._tokenizer.id_to_token(i)
        if token is None:
            raise IndexError(f"token id {i} out of range 0..{self.vocab_size - 1}")
        return token

    def token_to_id(self, s: str) -> int | None:
        return self._tokenizer.token_to_id(s)
