"""Byte-level BPE tokenizer for models of broad English: any text is read, nothing is [UNK].

Read with the ``tokenizers`` library, as GPT-2 reads text: NFC normalisation (no lowercasing, so "The" and "the"
are different pieces), digits split one by one (so 2024 is 2 0 2 4 and every number is read alike), then GPT-2's
byte-level pre-tokenizer (a word keeps the space before it: " animal"), and BPE merges learnt from a corpus by
``train_tokenizer``. Every one of the 256 bytes is in the vocabulary, so any string, emoji and accents included,
is some sequence of pieces: ``Encoded.is_unknown`` is always False.

The interface is TextTokenizer's (core/tokenizers/words.py): the same six special tokens at ids 0..5, ``encode``
giving ids, the pieces as typed and the unknown flags, ``decode``, ``id_to_token`` and ``token_to_id``. A piece's
label is its text (" the"; the charts show the space as ␣); a piece holding only part of a character's UTF-8 bytes
(a rare emoji split in two) is shown as those bytes in hex, "<F0 9F>", since no character can stand for it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from pathlib import Path

from tokenizers import AddedToken, Tokenizer, decoders, normalizers, pre_tokenizers
from tokenizers.models import BPE
from tokenizers.trainers import BpeTrainer

from core.tokenizers.words import (
    BOS,
    MASK,
    SPECIAL_TOKENS,
    Encoded,
    surface_pieces,
    without_surrogates,
)

ENGLISH_TOKENIZER_PATH = Path(__file__).resolve().parents[2] / "assets" / "tokenizer-english.json"
# 4096 pieces: the few thousand most frequent words of the corpus stay whole (so attention charts show words), and a
# D = 128 model's embedding and unembedding (2 x 4096 x 128 = 1.05 M weights) stay about the size of its four blocks
# (0.8 M), 2 MB a model in float16. GPT-2's 50,257 would be 13 M weights, sixteen times the rest of the model.
VOCAB_SIZE = 4096
KIND = "byte-level BPE"  # what a model card names as its tokenizer, beside the file


@functools.cache
def byte_alphabet() -> dict[int, str]:
    """GPT-2's map from each byte to the printable character that stands for it in a byte-level piece: printable
    Latin-1 bytes stand for themselves, the other 68 (space, controls, ...) for 256 + k in order (space -> "Ġ")."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    shifted = [b for b in range(256) if b not in printable]
    return {**{b: chr(b) for b in printable}, **{b: chr(256 + k) for k, b in enumerate(shifted)}}


@functools.cache
def _byte_of() -> dict[str, int]:
    return {char: byte for byte, char in byte_alphabet().items()}


def piece_bytes(piece: str) -> bytes:
    """The bytes a byte-level piece stands for ("Ġthe" -> b" the")."""
    return bytes(_byte_of()[char] for char in piece)


def whole_text(piece: str) -> str | None:
    """The text of a byte-level piece (" the"), or None when its bytes are not whole UTF-8 characters."""
    try:
        return piece_bytes(piece).decode("utf-8")
    except UnicodeDecodeError:
        return None


def readable(piece: str) -> str:
    """A byte-level piece as text (" the"), or, when its bytes are not whole characters, as hex ("<F0 9F>")."""
    text = whole_text(piece)
    return text if text is not None else "<" + " ".join(f"{b:02X}" for b in piece_bytes(piece)) + ">"


def new_tokenizer() -> Tokenizer:
    """An untrained byte-level BPE tokenizer with this module's normalisation and pre-tokenization."""
    tokenizer = Tokenizer(BPE())
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


def train_tokenizer(texts: Iterable[str], vocab_size: int = VOCAB_SIZE, path: Path | None = None) -> Tokenizer:
    """Learn BPE merges from `texts` (deterministic for the same texts): the special tokens at ids 0..5, the 256
    bytes, then merges up to `vocab_size` pieces (fewer if the texts hold fewer pairs); saved as JSON at `path`."""
    minimum = len(SPECIAL_TOKENS) + len(byte_alphabet())
    if vocab_size < minimum:
        raise ValueError(f"vocab_size must be at least {minimum} (six special tokens and 256 bytes), got {vocab_size}")
    tokenizer = new_tokenizer()
    # a typed [MASK] takes the space before it, as RoBERTa's does: "the [MASK] is" reads "the", " [MASK]", " is",
    # the mask in the place of the piece " street" that a masked-token model was trained to restore
    specials = [AddedToken(token, lstrip=token == MASK, special=True) for token in SPECIAL_TOKENS]
    trainer = BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                         initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(texts, trainer=trainer)
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        tokenizer.save(str(path))
    return tokenizer


class SubwordTokenizer:
    """A saved byte-level BPE tokenizer with TextTokenizer's interface (ids, pieces as typed, never unknown)."""

    kind = KIND

    def __init__(self, path: Path = ENGLISH_TOKENIZER_PATH) -> None:
        if not Path(path).exists():
            raise FileNotFoundError(f"{path} not found; train one with core.tokenizers.subword.train_tokenizer")
        self.path = Path(path)
        self._tokenizer = Tokenizer.from_file(str(path))
        self.vocab_size: int = self._tokenizer.get_vocab_size()
        ids = [self._tokenizer.token_to_id(token) for token in SPECIAL_TOKENS]
        if ids != list(range(len(SPECIAL_TOKENS))):
            raise ValueError(f"{path}: the special tokens {', '.join(SPECIAL_TOKENS)} must be ids 0..5, got {ids}")
        self.pad_id, self.unk_id, self.bos_id, self.eos_id, self.mask_id, self.sep_id = ids

    def encode(self, text: str, add_bos: bool = True) -> Encoded:
        """Tokenize `text`; prepend [BOS] if `add_bos`. Never truncates, never unknown."""
        typed = without_surrogates(text)
        encoding = self._tokenizer.encode(typed, add_special_tokens=False)
        ids = list(encoding.ids)
        tokens = self._shown(text, ids, encoding.tokens, encoding.offsets)
        if add_bos:
            ids.insert(0, self.bos_id)
            tokens.insert(0, BOS)
        return Encoded(ids, tokens, [False] * len(ids))

    def _shown(self, text: str, ids: Sequence[int], pieces: Sequence[str],
               offsets: Sequence[tuple[int, int]]) -> list[str]:
        """Each piece as typed (its span of `text`, so "The" and "café" typed with a combining accent show as
        typed), except a piece holding part of a character, shown as its bytes in hex (readable). A typed special
        token ("[MASK]") is no byte-level piece: shown as typed."""
        typed = surface_pieces(text, offsets)
        return [shown if i < len(SPECIAL_TOKENS) or whole_text(piece) is not None else readable(piece)
                for i, piece, shown in zip(ids, pieces, typed)]

    def decode(self, ids: Sequence[int]) -> str:
        """The text of the ids (special tokens kept visible): decode(encode(t).ids[1:]) is t, NFC-normalised (a
        typed [MASK] without the space it took)."""
        return self._tokenizer.decode(list(ids), skip_special_tokens=False)

    def id_to_token(self, i: int) -> str:
        """The piece of id `i` as text (" the"), a special token as itself."""
        piece = self._tokenizer.id_to_token(int(i))
        if piece is None:
            raise IndexError(f"token id {i} out of range 0..{self.vocab_size - 1}")
        return piece if piece in SPECIAL_TOKENS else readable(piece)

    def token_to_id(self, s: str) -> int | None:
        """The id of the piece whose text is `s` (" the"), or None when `s` is not one piece."""
        if s in SPECIAL_TOKENS:
            return self._tokenizer.token_to_id(s)
        try:
            raw = s.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate is no piece
            return None
        alphabet = byte_alphabet()
        return self._tokenizer.token_to_id("".join(alphabet[b] for b in raw))

