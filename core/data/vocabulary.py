"""The bundled tokenizer's vocabulary: learnt from the generated corpora, and the words it reads by kind.

The vocabulary is the special tokens followed by every word of the grammar lexicon, every algorithmic symbol, "|"
and ".", learnt from the generated training corpora (so ids are ordered by corpus frequency).

Run ``python -m core.data.vocabulary --build`` to (re)write ``assets/tokenizer.json``.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from tokenizers import Tokenizer, normalizers, pre_tokenizers
from tokenizers.models import WordLevel
from tokenizers.trainers import WordLevelTrainer

from core.data import algorithmic, grammar
from core.tokenizers.words import SPECIAL_TOKENS, TOKENIZER_PATH, UNK, TextTokenizer

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


def known_words(tokenizer) -> dict[str, list[str]]:
    """The words in the vocabulary by kind: the grammar's (grammar.lexicon_by_kind) and the algorithmic
    tasks' symbols; only those with an id, so the list is what this tokenizer reads. A pretrained model's subword
    vocabulary reads any text: there is no word list to pick from ({})."""
    if not isinstance(tokenizer, TextTokenizer):
        return {}
    kinds = grammar.lexicon_by_kind() | {
        "symbols of the reversal, copy and sort tasks": (*algorithmic.SYMBOLS, algorithmic.SEPARATOR)}
    known = {kind: [word for word in words if tokenizer.token_to_id(word) is not None] for kind, words in kinds.items()}
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
