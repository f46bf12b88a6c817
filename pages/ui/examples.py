"""The example texts the lesson pages open on, typed as English: a capital first word and no space before the full
stop. Both of our text tokenizers read them word for word: the grammar's word tokenizer (it lowercases and splits off
the full stop) and the broad-English byte-level BPE, which reads every word here as one piece ("The", " keys", " to",
…, "."). A lowercase "the" first ("t" + "he"), a space before the full stop (a piece of its own) or a word the BPE
splits ("cabin" + "et") would not read cleanly: tests/test_example_texts.py checks each."""

from __future__ import annotations

from core.tokenizers.words import MASK

# A plural subject, a singular noun nearer the verb: "are" follows, not "is". The last word must end a word for the
# BPE: after " box" the English models predict "es" or "ed" (p(are) 0.001); after " student" the verb (0.24).
ATTRACTOR = "The keys near the student"
ATTRACTOR_CONTRAST = "The key near the student"  # the same tokens but the subject's number


def with_masked_verb(subject: str) -> str:
    """The subject, a [MASK] where its verb goes and the rest of a sentence of the grammar (copula + adjective)."""
    return f"{subject} {MASK} red."


AGREEMENT = {  # the model's head -> (text, contrasting text): the candidates follow the last token, or fill the mask
    "next_token": (ATTRACTOR, ATTRACTOR_CONTRAST),
    "masked_token": (with_masked_verb(ATTRACTOR), with_masked_verb(ATTRACTOR_CONTRAST)),
}
PERMUTED = ("The dog sees the cat.", "The cat sees the dog.")  # the same tokens in another order
