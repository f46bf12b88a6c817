"""The text box and what it says about the text: the model's recording of it, the words it does not know (read as
[UNK]) and the words it does, and token pickers' options.
"""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from core.data.vocabulary import known_words
from core.model.checkpoint import ModelCard
from core.model.recording import Recording
from core.model.run import fitting_start, text_tokenizer
from core.tokenizers.subword import SubwordTokenizer
from pages.ui.models import is_pretrained
from pages.ui.safety import literal, show_input_error
from pages.ui.store import Setting, get_recording, slow_note
from pages.ui.widgets import BIND


def known_words_expander(words_by_kind: dict[str, Sequence[str]], *, expanded: bool = False) -> None:
    """The words a model knows, by kind, in a collapsed expander: what a class may type."""
    total = sum(len(words) for words in words_by_kind.values())
    with st.expander(f"Words the model knows ({total})", icon=":material/dictionary:", expanded=expanded):
        st.markdown("\n".join(f"- **{kind}**: {literal(' '.join(words))}" for kind, words in words_by_kind.items()))


DEFAULT_TEXT = "The keys to the old box are on the chair."


def text_help(card: ModelCard) -> str:
    """The text box's help: what the chosen model reads."""
    if is_pretrained(card) or isinstance(text_tokenizer(card), SubwordTokenizer):
        return ("Any text: the model reads it as its own subword pieces, shown as they are. Press Ctrl+Enter (or click "
                "outside) to run.")
    return ("Lowercase words from the grammar work best; unknown words are shown as ⟨word⟩?. Press Ctrl+Enter (or "
            "click outside) to run.")


def typed_text_recording(card: ModelCard) -> tuple[str, Recording]:
    """The page's text box and the model's own recording of it; on bad input an error box, then the page stops."""
    text = st.text_area("Text", value=DEFAULT_TEXT, key="text", bind=BIND, height=68, help=text_help(card))
    recording = get_recording(Setting(card.name), text or "")
    if isinstance(recording, str):
        show_input_error(recording)
        st.stop()
    unknown_warning(recording.meta["tokens"], recording.meta["unknown"], card)
    slow_note(recording)
    return text, recording


KEEP_START = "Keep the first part that fits"


def offer_fitting_start(text: str, cards: Sequence[ModelCard], key: str = "text") -> None:
    """Under a refusal: when the text was refused only for being too long, a button that puts in the text box
    (session state `key`) the longest start of it, cut at the end of a word, that every model in `cards` reads."""
    starts = [fitting_start(text, card.config.max_len, text_tokenizer(card)) for card in cards]
    if None in starts or min(map(len, starts)) == len(text):  # refused for something else: nothing to cut
        return
    start = min(starts, key=len)
    kept = len(start.split())
    if st.button(KEEP_START, key="keep_start", icon=":material/content_cut:", on_click=st.session_state.__setitem__,
                 args=(key, start), help=f"Keeps the first {kept} of the {len(text.split())} words; the rest of the "
                                         "page stays as it is."):
        st.rerun(scope="app")  # a fragment's button: the text box outside it shows the shorter text


def shown_token(token: str) -> str:
    """A token in markdown as the charts label it (a space as ␣, an invisible character as its escape), escaped as
    typed text: "**" around the BPE's " were" would show its asterisks, and a bare space would vanish."""
    from core.figures.attention import plain_token_labels  # figures import plotly: only if needed

    return literal(plain_token_labels([token])[0])


def token_choices(tokens: list[str], unknown: list[bool]) -> list[str]:
    """"n: token" for every token, as plain text, for a token picker's options: a widget shows text as it is, so
    an escaped label would show as `⟨&lt;⟩` (core.figures.attention.plain_token_labels); markdown gets the escaped
    ones (token_labels)."""
    from core.figures.attention import numbered_labels, plain_token_labels  # figures import plotly: only if needed

    return numbered_labels(plain_token_labels(tokens, unknown))


def warn_unknown(tokens: Sequence[str], unknown: Sequence[bool]) -> bool:
    """The warning naming the tokens a model reads as [UNK] (marked ⟨…⟩? on its charts), if any; whether any
    were."""
    from core.figures.attention import plain_token_labels  # figures import plotly: only pages that draw pay

    if any(unknown):
        words = ", ".join(dict.fromkeys(plain for plain, is_unknown in zip(plain_token_labels(tokens), unknown)
                                        if is_unknown))
        st.warning(f"{sum(unknown)} token(s) are not in the model's vocabulary and are read as [UNK] (marked "
                   f"⟨…⟩?): {literal(words)}", icon=":material/help:")
    return any(unknown)


def unknown_warning(tokens: Sequence[str], unknown: Sequence[bool], card: ModelCard | None = None) -> None:
    """A warning when some tokens are not in the model's vocabulary (emoji, misspellings, words outside the
    grammar), naming them: the model reads them all as one [UNK] token. The words it knows follow, to pick from."""
    if warn_unknown(tokens, unknown):
        known = known_words(text_tokenizer(card))
        if known:  # a subword vocabulary has no word list to pick from
            known_words_expander(known)
