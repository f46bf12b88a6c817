"""What does “it” refer to? The classic attention figure, live (issue 34): "The animal didn't cross the street
because it was too tired" against "... too wide". Predict which noun the pronoun attends to in each sentence, then
reveal the pronoun's row of attention in one head, graded against this run. All numbers come from
core/lessons/coreference.py.

URL parameters (all widgets are bound): model, notation, presenter (sidebar); it_first, it_second (the two
sentences), it_nouns (the two candidate nouns), it_layer, it_head, predict_it.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

if str(Path(__file__).resolve().parent.parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import streamlit as st  # noqa: E402

from core.figures.coreference import pronoun_row  # noqa: E402
from core.figures.interventions import head_grid  # noqa: E402
from core.lessons import coreference  # noqa: E402
from core.lessons.coreference import CANDIDATES, CLASSIC, ENDINGS, CoreferenceError, ItAttention  # noqa: E402
from pages.ui.lessons import predict_then_reveal, show_grade, until_revealed  # noqa: E402
from pages.ui.models import model_cards, model_picker  # noqa: E402
from pages.ui.presentation import font_scale  # noqa: E402
from pages.ui.safety import literal, show_input_error  # noqa: E402
from pages.ui.store import Setting, get_recording  # noqa: E402
from pages.ui.widgets import BIND, keep_in_range  # noqa: E402

ENGLISH_TASKS = ("english-mlm", "english-lm")
TAUGHT_MODEL = "english-mlm-it"  # english-mlm with a head taught where "it" points (core/training/referent.py)
UNTAUGHT_MODEL = "english-mlm"
NOUN = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")  # letters, one apostrophe inside: the options show them


def options(first: str, second: str) -> list[str]:
    """The prediction's options: which noun "it" attends to more, in the first sentence, then the second."""
    return [f"{first}, then {second} (it follows the meaning)", f"{first} both times", f"{second} both times",
            f"{second}, then {first}"]


def answer(pair: tuple[ItAttention, ItAttention], layer: int, head: int, choices: list[str]) -> str | None:
    """The option this run makes right (None on an exact tie in either sentence)."""
    picks = tuple(attention.preferred(layer, head) for attention in pair)
    return {(0, 1): choices[0], (0, 0): choices[1], (1, 1): choices[2], (1, 0): choices[3]}.get(picks)


def measured(pair: tuple[ItAttention, ItAttention], layer: int, head: int, nouns: tuple[str, str]) -> str:
    parts = []
    for n, attention in enumerate(pair, start=1):
        first, second = attention.weights[layer, head]
        parts.append(f"sentence {n}: {literal(nouns[0])} {first:.3f}, {literal(nouns[1])} {second:.3f}")
    return f"in L{layer} H{head} the weight of “it” on each noun is " + "; ".join(parts)


st.title("What does “it” refer to?")
cards = model_cards(ENGLISH_TASKS)
if not cards:
    st.info("This lesson needs a model of broad English (english-mlm): train one with `python -m core.train --preset "
            "english-mlm`, then reload the page.", icon="⏳")
    st.stop()
card = model_picker(cards, default=TAUGHT_MODEL if TAUGHT_MODEL in {c.name for c in cards} else UNTAUGHT_MODEL)
st.markdown("In *The animal didn't cross the street because **it** was too tired*, “it” is the animal; end the "
            "sentence *too wide* and it is the street. Only the last word changed. Does the model's attention from "
            "“it” follow the meaning? Each row of A (seed 001 eq. 2.3) says how much one token reads every other: "
            "here, the row of “it”.")
if card.config.mask == "causal":
    st.warning(f"{card.name} is a causal language model: “it” comes before the last word, so its row of attention "
               "cannot see the ending and is the same in both sentences. Pick english-mlm to see a model that reads "
               "the whole sentence.", icon=":material/info:")

first_text = st.text_input("Sentence 1", CLASSIC.format(ENDINGS[0]), key="it_first", bind=BIND)
second_text = st.text_input("Sentence 2", CLASSIC.format(ENDINGS[1]), key="it_second", bind=BIND)
nouns_typed = st.text_input("The two nouns “it” may stand for (the one sentence 1 means first)", " ".join(CANDIDATES),
                            key="it_nouns", bind=BIND)
nouns = tuple(nouns_typed.split())
if len(nouns) != 2 or not all(NOUN.fullmatch(noun) for noun in nouns):
    show_input_error(f"give exactly two nouns, words of letters separated by a space, such as: animal street (not "
                     f"{nouns_typed!r})")
    st.stop()
recordings, pair = [], []
for text in (first_text, second_text):
    recording = get_recording(Setting(card.name), text or "")
    try:
        if isinstance(recording, str):
            raise CoreferenceError(recording)
        pair.append(coreference.it_attention(recording, nouns))
    except CoreferenceError as error:
        show_input_error(str(error))
        st.stop()
    recordings.append(recording)
pair = tuple(pair)

found = card.metrics.get("it_reference")  # the referent head the card's evaluation chose on generated sentences
chosen = (found["layer"], found["head"]) if found else (card.config.n_layers - 1, 0)  # a link's layer and head win
keep_in_range("it_layer", 0, card.config.n_layers - 1, "Layer")
keep_in_range("it_head", 0, card.config.n_heads - 1, "Head")
col_layer, col_head = st.columns(2)
layer = col_layer.radio("Layer", range(card.config.n_layers), index=chosen[0], key="it_layer", bind=BIND,
                        horizontal=True, format_func=lambda i: f"L{i}") or 0
head = col_head.radio("Head", range(card.config.n_heads), index=chosen[1], key="it_head", bind=BIND,
                      horizontal=True, format_func=lambda i: f"H{i}") or 0
if found:  # how often it is right elsewhere would answer the question: told with the answer
    st.caption(f"L{found['layer']} H{found['head']} is this model's *referent head*, chosen on {found['chosen_on']} "
               "generated sentences of this kind; how often it follows the meaning there is shown with the answer.")

choices = options(*nouns)


def reveal(prediction: str | None) -> None:
    show_grade(prediction, answer(pair, layer, head, choices), measured(pair, layer, head, nouns))


predict_then_reveal("predict_it", f"In head L{layer} H{head}, which noun does “it” attend to more in each sentence?",
                    choices, reveal, about=f"{card.name}\n{first_text}\n{second_text}")


def how_the_head_was_found() -> None:
    """The referent head's scores on generated sentences, and, for a taught model, that and how it was taught."""
    if found:
        st.caption(f"L{found['layer']} H{found['head']}, the *referent head*: on {found['chosen_on']} generated "
                   "sentences of this kind (other nouns and adjectives) its “it” attended more to the noun it stands "
                   f"for than any other head's did; on {found['n']} more it did so {found['accuracy']:.0%} of the time "
                   f"(always the animal: {found['always_first']:.0%}).")
    taught, untaught = card.training.get("referent_head"), card.metrics.get("it_reference_untaught")
    if taught:
        score = (f" On {untaught['n']} sentences whose adjective it was never taught on, L{taught[0]} H{taught[1]} "
                 f"followed the meaning {untaught['accuracy']:.0%} of the time (always the animal: "
                 f"{untaught['always_first']:.0%})." if untaught else "")
        written = card.metrics.get("it_reference_written")
        if written and [written["layer"], written["head"]] == list(taught):
            score += (f" Of {written['n_pairs']} pairs written apart from the generator (other frames, nouns and "
                      f"adjectives), it followed the meaning in both sentences of {written['pairs_followed']}.")
        st.info(f"**L{taught[0]} H{taught[1]} was taught.** Besides its masked words, {literal(card.name)} read "
                "generated sentences like these in training, and a second loss pulled this head's weight from "
                "“it” onto the noun it stands for (as LISA, Strubell et al. 2018, teaches a head syntax). It was "
                "never shown “animal” with “street”, nor half the adjectives." + score + " Nothing is written into it: the "
                "weights above are what it computed from this sentence. Trained on masked words alone "
                f"({UNTAUGHT_MODEL}), no head follows the meaning: pick {UNTAUGHT_MODEL} in the sidebar to compare.",
                icon=":material/school:")


if until_revealed("predict_it", "The rows of attention and every head's preference"):
    how_the_head_was_found()
    scale = font_scale()
    columns = st.columns(2)
    for column, n, attention, recording in zip(columns, (1, 2), pair, recordings):
        column.altair_chart(pronoun_row(attention.tokens, attention.row(layer, head, recording), attention.candidates,
                                        f"sentence {n}: the row of “it” in L{layer} H{head}", font_scale=scale),
                            key=f"it_row_{n}")
    st.subheader("Every head: weight on the first noun minus weight on the second")
    st.caption(f"Blue: “it” reads {literal(nouns[0])} more; red: {literal(nouns[1])} more. A head that follows the "
               "meaning is blue for sentence 1 and red for sentence 2.")
    columns = st.columns(2)
    for column, n, attention in zip(columns, (1, 2), pair):
        column.markdown(f"**Sentence {n}**")
        column.altair_chart(head_grid(attention.preference(), "first − second", diverging=True,
                                      chosen=f"L{layer}H{head}", font_scale=scale), key=f"it_heads_{n}")
    following = coreference.follows_meaning(*pair)
    st.markdown(f"{int(following.sum())} of {following.size} heads follow the meaning on these two sentences.")
