"""Algorithmic tasks with textbook attention patterns, as space-separated tokens.

Each example is ``input | answer``:

* reversal: "3 1 4 | 4 1 3"  (answer token i attends to input token n-1-i)
* copy:     "3 1 4 | 3 1 4"  (an induction head: find the previous occurrence of
  the current token and copy the token after it)
* sort:     "3 1 4 | 1 3 4"  (attend to the smallest input token not yet emitted)

Symbols are the digits "0".."9" and the letters "k".."t" (20 symbols). Letters
from "k" on avoid "a" (an English determiner in the grammar corpus) so no symbol
is also an English word. Within one example the symbols are distinct, which keeps
the target of every attention head unambiguous (a repeated symbol would give an
induction head two candidates). Sorting follows ``SYMBOLS`` order, which is also
plain string order: digits before letters.

Held-out split: 10% of all possible inputs (by a stable hash) are reserved for
``HELDOUT_SEED``; every other seed draws only from the remaining 90%, so held-out
inputs never appear in training, even for short lengths where collisions between
random draws are likely.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable
from dataclasses import dataclass

SYMBOLS: tuple[str, ...] = tuple("0123456789") + tuple("klmnopqrst")
SEPARATOR = "|"
TASKS = ("reversal", "copy", "sort")
TRAIN_SEED = 0
HELDOUT_SEED = 1
HELDOUT_BUCKETS = 10  # 1 of this many hash buckets is held out
MIN_LENGTH, MAX_LENGTH = 4, 12  # input lengths of the training examples


@dataclass(frozen=True)
class Example:
    """``text`` is "input | answer"; ``answer_start`` is the index, in
    ``text.split()`` (no BOS counted), of the first answer token."""

    text: str
    answer_start: int


def _random_sequence(rng: random.Random, length: int) -> list[str]:
    return rng.sample(SYMBOLS, length)


def _example(sequence: list[str], answer: list[str]) -> Example:
    return Example(" ".join([*sequence, SEPARATOR, *answer]), len(sequence) + 1)


def reversal_example(rng: random.Random, length: int) -> Example:
    """A random sequence of ``length`` distinct symbols followed by its reverse."""
    sequence = _random_sequence(rng, length)
    return _example(sequence, sequence[::-1])


def copy_example(rng: random.Random, length: int) -> Example:
    """A random sequence of ``length`` distinct symbols repeated once."""
    sequence = _random_sequence(rng, length)
    return _example(sequence, sequence)


def sort_example(rng: random.Random, length: int) -> Example:
    """A random sequence of ``length`` distinct symbols followed by it sorted."""
    sequence = _random_sequence(rng, length)
    return _example(sequence, sorted(sequence, key=SYMBOLS.index))


_TASK_FUNCTIONS: dict[str, Callable[[random.Random, int], Example]] = {
    "reversal": reversal_example,
    "copy": copy_example,
    "sort": sort_example,
}


def is_heldout_input(example: Example) -> bool:
    """Whether the example's input falls in the reserved held-out hash bucket."""
    tokens = example.text.split()
    task_input = " ".join(tokens[: example.answer_start - 1])
    return zlib.crc32(task_input.encode()) % HELDOUT_BUCKETS == 0


def generate(
    task: str, n: int, seed: int, min_len: int = MIN_LENGTH, max_len: int = MAX_LENGTH
) -> list[Example]:
    """``n`` examples of ``task`` with input lengths in [min_len, max_len].

    Deterministic given (task, seed). ``HELDOUT_SEED`` draws from the held-out
    partition of inputs, any other seed from the training partition.
    """
    if task not in _TASK_FUNCTIONS:
        raise ValueError(f"unknown task {task!r}; expected one of {TASKS}")
    if not 2 <= min_len <= max_len <= len(SYMBOLS):
        # length 1 is excluded: its 20 inputs might all miss the held-out bucket.
        raise ValueError(f"need 2 <= min_len <= max_len <= {len(SYMBOLS)}")
    make = _TASK_FUNCTIONS[task]
    rng = random.Random(f"{task}-{seed}")
    want_heldout = seed == HELDOUT_SEED
    examples: list[Example] = []
    while len(examples) < n:
        example = make(rng, rng.randint(min_len, max_len))
        if is_heldout_input(example) == want_heldout:
            examples.append(example)
    return examples
