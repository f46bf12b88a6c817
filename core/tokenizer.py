"""Word-level tokenizer for the grammar corpus and the algorithmic tasks.

Built with the ``tokenizers`` library: a WordLevel model, NFKC + lowercase
normalisation, and a pre-tokenizer that splits on whitespace and isolates every
punctuation character. The vocabulary is the special tokens followed by every word
of the grammar lexicon, every algorithmic symbol, "|" and ".", learnt from the
generated training corpora (so ids are ordered by corpus frequency).

Any Unicode string tokenizes without error; pieces outside the vocabulary map to
[UNK]. Nothing is truncated here: the caller checks the model's context length.

Run ``python -m core.tokenizer --build`` to (re)write ``assets/tokenizer.json``.
"""

from __future__ import annotations

import argparse
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer, normalizers, pre_tokenizers
from tokenizers.models import WordLevel
from tokenizers.trainers import WordLevelTrainer

from core.data import algorithmic, grammar

TOKENIZER_PATH = Path(__file__).resolve().parent.parent / "assets" / "tokenizer.json"

PAD, UNK, BOS, EOS, MASK, SEP = "[PAD]", "[UNK]", "[BOS]", "[EOS]", "[MASK]", "[SEP]"
SPECIAL_TOKENS = (PAD, UNK, BOS, EOS, MASK, SEP)  # ids 0..5 in this order

TRAINING_DOCUMENTS = 2000
TRAINING_EXAMPLES_PER_TASK = 500


def _training_texts() -> Iterator[str]:
    """Generated training corpora, plus the full lexicon and symbol list so that
    words too rare to appear in the sample still get an id."""
    yield " ".join(grammar.lexicon_words())
    yield " ".join([*algorithmic.SYMBOLS, algorithmic.SEPARATOR])
    # ids are ordered by frequency in this sample and every bundled text model reads them: the sample is the
    # corpus as first generated (documents opening with a name), whatever the models now train on
    yield from grammar.generate_documents(TRAINING_DOCUMENTS, grammar.TRAIN_SEED, opening=0.0)
    for task in algorithmic.TASKS:
        for example in algorithmic.generate(
            task, TRAINING_EXAMPLES_PER_TASK, algorithmic.TRAIN_SEED
        ):
            yield example.text


def build_tokenizer() -> Tokenizer:
    """Train the word-level tokenizer on the generated corpora (deterministic)."""
    tokenizer = Tokenizer(WordLevel(unk_token=UNK))
    tokenizer.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation("isolated")]
    )
    trainer = WordLevelTrainer(special_tokens=list(SPECIAL_TOKENS), show_progress=False)
    tokenizer.train_from_iterator(_training_texts(), trainer=trainer)
    return tokenizer


@dataclass(frozen=True)
class Encoded:
    """Token ids plus, per id, the surface text as typed and whether it is [UNK].

    ``tokens`` come from the offsets into the original string, so "The" stays "The"
    and an unknown word shows as itself; the BOS shows as "[BOS]".
    """

    ids: list[int]
    tokens: list[str]
    is_unknown: list[bool]


def _without_surrogates(text: str) -> str:
    """Replace lone surrogates (which Rust strings cannot hold) by U+FFFD, one for
    one, so offsets still index the original ``text``."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)
    return text


def _surface_pieces(text: str, offsets: Sequence[tuple[int, int]]) -> list[str]:
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
            raise FileNotFoundError(f"{path} not found; run `python -m core.tokenizer --build`")
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
        encoding = self._tokenizer.encode(_without_surrogates(text), add_special_tokens=False)
        ids = list(encoding.ids)
        tokens = _surface_pieces(text, encoding.offsets)
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

    def known_words(self) -> dict[str, list[str]]:
        """The words in the vocabulary by kind: the grammar's (grammar.lexicon_by_kind) and the algorithmic
        tasks' symbols; only those with an id, so the list is what this tokenizer reads."""
        kinds = grammar.lexicon_by_kind() | {
            "symbols of the reversal, copy and sort tasks": (*algorithmic.SYMBOLS, algorithmic.SEPARATOR)}
        known = {kind: [word for word in words if self.token_to_id(word) is not None] for kind, words in kinds.items()}
        return {kind: words for kind, words in known.items() if words}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", action="store_true", help=f"write {TOKENIZER_PATH}")
    args = parser.parse_args()
    if not args.build:
        parser.print_help()
        return
    tokenizer = build_tokenizer()
    TOKENIZER_PATH.parent.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(TOKENIZER_PATH))
    print(f"wrote {TOKENIZER_PATH} ({tokenizer.get_vocab_size()} tokens)")


if __name__ == "__main__":
    main()
