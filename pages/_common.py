"""Shared UI for the pages: cached loaders, the sidebar model picker, the notation switch, error display.

Pages import it as `from pages._common import ...`. Every widget here is bound to the URL
(`bind="query-params"`) under a stable key, so a view can be shared as a link. URL parameters used here:
  model     the bundled model (sidebar picker)
  notation  "common" (A is N x N, row = query, rows sum to 1) or "paper" (seed 001: A_{n',n}, columns sum to 1)

Set ATTENTION_LAB_MODELS_DIR to read the model cards from another folder than assets/models (the tests do).
"""

from __future__ import annotations

import functools
import math
import os
import re
import string
import sys
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `streamlit run app.py` puts ROOT first; AppTest of a single page may not
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402
from streamlit.runtime.pages_manager import PagesManager  # noqa: E402
from streamlit.runtime.state.session_state_proxy import get_session_state  # noqa: E402

from core import pretrained, registry  # noqa: E402
from core.allocator import prefault  # noqa: E402
from core.checkpoint import ModelCard  # noqa: E402
from core.config import MASK_KINDS, PARAMETER_FREE_ENCODINGS, POSITION_ENCODINGS, ConfigError  # noqa: E402
from core.lru import ByteLRU  # noqa: E402
from core.masks import MaskSpec  # noqa: E402
from core.model import Transformer  # noqa: E402
from core.predictions import Grade  # noqa: E402
from core.record import TextInputError, record_text, text_tokenizer  # noqa: E402
from core.recording import Recording  # noqa: E402
from core.visible import make_visible  # noqa: E402

if PagesManager.uses_pages_directory:
    # The first run in a fresh server treats pages/ as Streamlit's old multipage folder and runs a deep-linked
    # page (/residual_stream) by itself, without app.py's st.navigation (that would show "Page not found", or
    # the folder's files as the menu). Rerunning once, with that mode off, lets app.py draw the real menu.
    PagesManager.uses_pages_directory = False
    st.rerun()

BIND = "query-params"
OWN = "own"  # the model's own mask / position encoding in the toggles
NOTATION_LABELS = {  # option (also the URL value) -> caption
    "common": "A is N×N, row = query, rows sum to 1",
    "paper": "seed 001: A_{n′,n}, column = query, columns sum to 1",
}
MASK_CHOICES = tuple(kind for kind in MASK_KINDS if kind != "padding")  # padding needs a batch, not a toggle
APPLY_LABELS = {  # option (also the URL value) -> caption
    "ablation": "change it in this model",
    "trained model": "switch to the model trained with it",
}


# ---------------------------------------------------------------------------------------------------------
# Models and recordings
# ---------------------------------------------------------------------------------------------------------

def models_dir() -> Path:
    """Where the model cards are read from: $ATTENTION_LAB_MODELS_DIR, else assets/models."""
    override = os.environ.get("ATTENTION_LAB_MODELS_DIR")
    return Path(override) if override else registry.MODELS_DIR


def model_cards(tasks: tuple[str, ...]) -> list[ModelCard]:
    """The cards of the models for these tasks: the bundled ones (models_dir()), then the user's saved runs
    ($ATTENTION_LAB_USER_DIR, see core/registry.py) whose names no bundled model takes. Saved runs come from
    registry.user_cards()'s cache, read again when a run is saved."""
    bundled = registry.list_cards(models_dir())
    taken = {card.name for card in bundled}
    runs = [card for card in registry.user_cards() if card.name not in taken]
    return [card for card in bundled + runs if card.task in tasks]


def text_cards(pretrained: bool = False) -> list[ModelCard]:
    """The text models' cards, bundled then saved runs; with `pretrained` (the pages that read any recording: text
    explorer, residual stream, TokenNorm), then the user's pretrained GPT-2 and BERT models (core/pretrained.py):
    those in the Hugging Face cache, and those this session opened from a folder or by name."""
    cards = model_cards(registry.TEXT_TASKS)
    if not pretrained:
        return cards
    return cards + [card for card in registry.pretrained_cards(tuple(st.session_state.get(OPENED, ())))
                    if card.task in registry.PRETRAINED_TASKS]


def is_pretrained(card: ModelCard) -> bool:
    """A user's pretrained model (core/pretrained.py), not one of ours."""
    return pretrained.is_pretrained(card.name)


OPENED = "pretrained_opened"  # session state: the pretrained sources this session opened by folder or name
OPEN_FOLDERS_ENV = "ATTENTION_LAB_OPEN_FOLDERS"  # "0": the server's folders cannot be opened from a page


IMAGE_PRETRAINED = ("pretrained-image",)  # the task of a user's pretrained ViT


def open_pretrained_model(tasks: tuple[str, ...] = registry.PRETRAINED_TASKS) -> None:
    """The sidebar's "Your own model" box: how to enable real models, or a field to open one by folder or by name
    (a name in the local Hugging Face cache; downloaded only where the server allows). An opened model of one of
    `tasks` joins this session's picker and is selected."""
    image = tasks == IMAGE_PRETRAINED
    with st.sidebar.expander(f"Your own model ({'ViT' if image else 'GPT-2, BERT'})", icon=":material/folder_open:"):
        if not pretrained.available():
            st.caption("Real pretrained models need the optional `transformers` package: run "
                       f"`{pretrained.INSTALL_HINT}`, then restart the app. Nothing else changes without it.")
            return
        folders = folders_allowed()
        example = "google/vit-base-patch16-224" if image else "gpt2"
        st.caption("Models in this computer's Hugging Face cache are in the picker already. "
                   + (f"Open another by its folder or its cached name (for example {example})." if folders else
                      f"Open another by its cached name (for example {example}); this server opens no folders."))
        with st.form("open_pretrained", border=False):
            source = st.text_input("Folder or name", max_chars=500, placeholder=f"{example} or /path/to/model")
            if not st.form_submit_button("Open", icon=":material/upload:"):
                return
        source = (source or "").strip()
        if not source:
            return
        try:
            card = openable_card(source)
            registry.load_model(card.name)  # read the weights now: a broken checkpoint says so here
        except pretrained.PretrainedError as error:
            show_input_error(str(error))
            return
        if card.task not in tasks:
            show_input_error(f"{pretrained.describe_source(source)} is {'a text' if image else 'an image'} model: open "
                             f"it on the {'Text explorer' if image else 'Image attention'} page")
            return
        remember_opened(source)
        st.session_state[PICK_NEXT] = card.name  # the picker exists already: it takes the name on the rerun
        st.rerun()


def folders_allowed() -> bool:
    """Whether this server opens pretrained models from folders (a shared one sets ATTENTION_LAB_OPEN_FOLDERS=0)."""
    return os.environ.get(OPEN_FOLDERS_ENV, "1") != "0"


def openable_card(source: str) -> ModelCard:
    """The card of a pretrained model named by the sidebar's box or a link, or PretrainedError saying why this
    server will not open it."""
    if pretrained.is_folder(source) and not folders_allowed():
        raise pretrained.PretrainedError("this server opens models by their cached name only, not from its folders")
    return pretrained.card_for(source)


def remember_opened(source: str) -> None:
    """Add a pretrained source to this session's picker (once)."""
    opened = st.session_state.get(OPENED, [])
    if source not in opened:
        st.session_state[OPENED] = [*opened, source]


PICK_NEXT = "model_next"  # session state: a model the picker selects on the next run (one just opened)


def open_linked_model() -> None:
    """A link naming a pretrained model (?model=hf:gpt2, or hf:/a/folder) opens it in this session, as the sidebar's
    box would, if it can be opened here; else a note says why and the page opens its default model."""
    linked = (st.query_params.get("model") or "").split(" (")[0]
    source = pretrained.source_of(linked)
    if not pretrained.is_pretrained(linked) or source in st.session_state.get(OPENED, ()):
        return
    try:
        if not pretrained.available():
            raise pretrained.PretrainedError(f"real models need `{pretrained.INSTALL_HINT}` on this server")
        openable_card(source)
    except pretrained.PretrainedError as error:
        st.info(literal(f"The link's model could not be opened: {error}"), icon=":material/link_off:")
        return
    remember_opened(source)


def any_text_model_picker() -> tuple[list[ModelCard], ModelCard]:
    """The picker of the pages that read any text recording: bundled models, saved runs and the user's pretrained
    ones, with the "Your own model" box below it. (cards, the chosen card)."""
    open_linked_model()
    cards = text_cards(pretrained=True)
    card = model_picker(cards)
    open_pretrained_model()
    return cards, card


def model_label(card: ModelCard) -> str:
    """A model's name in the pickers with its main held-out figure (so a class sees what it compares); saved user
    runs are marked."""
    label = f"{card.name} · your run" if registry.is_user_run(card) else card.name
    main = registry.quality(card, first_only=True)
    return f"{label} ({main})" if main else label


@st.cache_resource(max_entries=16, show_spinner="Loading the model…")
def get_model(name: str, directory: str) -> tuple[Transformer, ModelCard]:
    return registry.load_model(name, Path(directory))


@dataclass(frozen=True)
class Setting:
    """What to run: a bundled model with its own mask and encoding (None) or an ablated one."""

    model: str
    mask: str | None = None  # None: the model's own; else a mask kind
    window: int = 8  # sliding-window width, with mask="window"
    stride: int = 4  # stride, with mask="strided"
    pe: str | None = None  # None: the model's own; else a position encoding

    def normalised(self) -> Setting:
        """Irrelevant parameters set to 0, so equal settings cache and compare equal."""
        return replace(self, window=self.window if self.mask == "window" else 0,
                       stride=self.stride if self.mask == "strided" else 0)

    def describe(self, card: ModelCard | None = None) -> str:
        """"model · mask … · encoding …", each once; "(own)" marks the model's own (known from its card)."""
        parts = [self.model]
        if self.mask is not None:
            parts.append({"window": f"mask window({self.window})", "strided": f"mask strided({self.stride})"}
                         .get(self.mask, f"mask {self.mask}"))
        elif card is not None:
            parts.append(f"mask {card.config.mask} (own)")
        if self.pe is not None:
            parts.append(f"encoding {self.pe}")
        elif card is not None:
            parts.append(f"encoding {card.config.pos_encoding} (own)")
        return " · ".join(parts)


RESULTS_MB = 256  # every session's recordings together: about 1 MB at 64 tokens, 53 MB at 512 (lm-rope-long)


@st.cache_resource
def _results() -> ByteLRU:
    """One store for the process: sessions share recordings, none is copied (see core/lru.py)."""
    return ByteLRU(RESULTS_MB * 2**20)


def shared_result(function):
    """Cache `function`'s results by its (hashable) arguments in the process's ByteLRU: like st.cache_data, but
    a hit hands out the stored object itself instead of unpickling a copy (0.3 s for a 512-token recording).
    What it returns must not be changed by its callers: a Recording's arrays are read-only."""
    @functools.wraps(function)
    def cached(*args):
        return _results().get_or_compute((function.__module__, function.__qualname__, args),
                                         lambda: function(*args))
    return cached


@st.cache_resource
def recorder() -> ThreadPoolExecutor:
    """The one thread that runs the recorded forward passes the store keeps, for every session. Its memory is
    faulted in up front, the store's budget of it (core/allocator.py: at 512 tokens a pass took 200 ms, 150 ms of
    them page faults, while the store was filling; glibc may give some of it back later, see there); sessions'
    scripts run in ever new threads, with other allocator arenas, where pages freed by one are not at hand for the
    next. One thread also runs the passes one at a time, as the one shared core of a small server does anyway."""
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="recorder")
    executor.submit(prefault, RESULTS_MB * 2**20)
    return executor


@shared_result
def _recording(model: str, text: str, mask: str | None, window: int, stride: int, pe: str | None,
               directory: str) -> Recording | str:
    """The recording (computed in the recorder thread), or the one-line message saying why the text or setting
    cannot be run."""
    try:
        transformer, card = get_model(model, directory)
        spec = None
        if mask is not None:
            cfg = transformer.cfg
            spec = MaskSpec(mask, window or cfg.window, cfg.is_causal, stride or cfg.stride)
        return recorder().submit(record_text, transformer, text, mask=spec, pe=pe, card=card).result()
    except (TextInputError, ConfigError, registry.UnknownModelError, ValueError) as error:
        return str(error)  # ValueError: e.g. a length the model refuses


SLOW_SECONDS = 1.0  # a forward pass slower than this is named as the slow part of a change


def slow_note(recording: Recording) -> None:
    """What is slow, when a change costs more than SLOW_SECONDS (a large pretrained model, a long text): the forward
    pass, and whether its recording is too large for the store that keeps recordings between clicks."""
    seconds = recording.meta.get("seconds", 0.0)
    too_big = recording.nbytes > RESULTS_MB * 2 ** 20
    if seconds < SLOW_SECONDS and not too_big:
        return
    cfg = recording.config
    note = (f"Computing this recording took {seconds:.1f} s: the forward pass of {cfg.n_layers} layers × "
            f"{cfg.n_heads} heads (D = {cfg.d_model}) on {recording.n_tokens} tokens is the slow part of every "
            "change; a shorter text is faster.")
    if too_big:
        note += (f" Its {recording.nbytes / 2 ** 20:.0f} MB of recorded arrays are more than the {RESULTS_MB} MB the "
                 "server keeps, so each click computes it again.")
    st.caption(note, help="Every number shown is from this forward pass, recomputed for each change.")


def get_recording(setting: Setting, text: str) -> Recording | str:
    """Cached by (model name, text, mask kind, window, stride, pe): the Recording or an error message."""
    s = setting.normalised()
    return _recording(s.model, text, s.mask, s.window, s.stride, s.pe, str(models_dir()))


INERT = set(",;'\"?%@/=")  # ASCII punctuation that neither markdown, LaTeX, HTML nor Streamlit obeys on one line
MARKUP = re.compile(f"([{re.escape(''.join(sorted(set(string.punctuation) - INERT)))}])")


def literal(text: str, *, markdown: bool = True) -> str:
    """Text a user or a link supplied (or a message quoting it), shown as typed: the one way such text reaches
    st.markdown, captions, alerts, labels and widget options. Control and bidi characters (ESC, a newline, U+202E)
    are written as their escapes (core/visible.py); with `markdown` (text Streamlit renders: markdown, captions,
    alerts, labels, radio options) every ASCII punctuation character that markdown, LaTeX ($), HTML (<, &) or
    Streamlit (:red[…], :material/…:) could obey is backslash-escaped (CommonMark lets a backslash escape each),
    so *, [x](…), `, $x$ and <img> show, never act. markdown=False for what a widget shows as plain text (a
    drop-down's options), where a backslash would show."""
    shown = make_visible(str(text))
    return MARKUP.sub(r"\\\1", shown) if markdown else shown


def _non_finite(value: str) -> bool:
    try:
        return not math.isfinite(float(value))
    except ValueError:
        return False


def drop_non_finite_numbers() -> None:
    """Remove link values such as inf, -inf, nan or 1e309 before any widget is built, with a note naming them.
    Streamlit turns a bound number input's URL value into a number before page code runs, and a value with no
    finite number crashes it (OverflowError in its deserializer); the widget then starts from its default."""
    dropped = sorted(key for key, value in st.query_params.items() if _non_finite(value))
    if dropped:
        # Widgets are seeded from the link's initial values, a copy st.query_params does not change: drop them from
        # both (Streamlit's own call after a page change does the same for another page's parameters).
        with get_session_state().query_params() as params:
            for key in dropped:
                del params[key]
            params.set_initial_query_params_from_current()
        st.info(literal(f"The link's {', '.join(dropped)} held no finite number, so the default is used instead."),
                icon=":material/link_off:")


def show_input_error(message: str) -> None:
    """The reason a text or setting cannot be run, as an error box (the message may quote what was typed, so it
    is shown literally); the text stays in its box to edit."""
    st.error(f"**Can't run this:** {literal(message)}", icon="⚠️")


def known_words_expander(words_by_kind: dict[str, Sequence[str]], *, expanded: bool = False) -> None:
    """The words a model knows, by kind, in a collapsed expander: what a class may type."""
    total = sum(len(words) for words in words_by_kind.values())
    with st.expander(f"Words the model knows ({total})", icon=":material/dictionary:", expanded=expanded):
        st.markdown("\n".join(f"- **{kind}**: {literal(' '.join(words))}" for kind, words in words_by_kind.items()))


DEFAULT_TEXT = "the keys to the old cabinet are on the table ."


def text_help(card: ModelCard) -> str:
    """The text box's help: what the chosen model reads."""
    if is_pretrained(card):
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


def token_choices(tokens: list[str], unknown: list[bool]) -> list[str]:
    """"n: token" for every token, as plain text, for a token picker's options: a widget shows text as it is, so
    an escaped label would show as `⟨&lt;⟩` (core.figures.attention.plain_token_labels); markdown gets the escaped
    ones (token_labels)."""
    from core.figures.attention import numbered_labels, plain_token_labels  # figures import plotly: only if needed

    return numbered_labels(plain_token_labels(tokens, unknown))


def unknown_warning(tokens: Sequence[str], unknown: Sequence[bool], card: ModelCard | None = None) -> None:
    """A warning when some tokens are not in the model's vocabulary (emoji, misspellings, words outside the
    grammar), naming them: the model reads them all as one [UNK] token. The words it knows follow, to pick from."""
    from core.figures.attention import plain_token_labels  # figures import plotly: only pages that draw pay

    if any(unknown):
        words = ", ".join(dict.fromkeys(plain for plain, is_unknown in zip(plain_token_labels(tokens), unknown)
                                        if is_unknown))
        st.warning(f"{sum(unknown)} token(s) are not in the model's vocabulary and are read as [UNK] (marked "
                   f"⟨…⟩?): {literal(words)}", icon=":material/help:")
        known = text_tokenizer(card).known_words()
        if known:  # a subword vocabulary has no word list to pick from
            known_words_expander(known)


# ---------------------------------------------------------------------------------------------------------
# Which browser this is
# ---------------------------------------------------------------------------------------------------------

BROWSER_COOKIE = "attention_lab_browser"
BROWSER_ID = re.compile(r"[0-9a-f]{32}")
BROWSER_DAYS = 180  # how long a browser keeps its id (its runs' ownership and its saved-run quota)


def _sent_cookie() -> str:
    """The browser id cookie the session's first request sent ("" when none, or outside a browser)."""
    try:
        sent = st.context.cookies.get(BROWSER_COOKIE, "")
    except (AttributeError, RuntimeError):
        return ""
    return sent if isinstance(sent, str) else ""


def browser_id() -> str:
    """An id for this browser, the same in all its tabs and after a reload: the one its cookie holds, else a new
    one that a small script stores in the cookie, so the next tab or reload sends it. Owns live runs (one at a time
    per browser) and counts saved runs against the browser's quota. Call it on every run: it sets the cookie on the
    runs of a session that did not send it."""
    sent = _sent_cookie()
    if "browser_id" not in st.session_state:
        st.session_state["browser_id"] = sent if BROWSER_ID.fullmatch(sent) else uuid.uuid4().hex
    current = st.session_state["browser_id"]
    if sent != current:
        st.html(f"<script>document.cookie = '{BROWSER_COOKIE}={current}; path=/; "
                f"max-age={BROWSER_DAYS * 86400}; SameSite=Strict';</script>", unsafe_allow_javascript=True)
    return current


# ---------------------------------------------------------------------------------------------------------
# Choosing models and settings (no model maths: which bundled model matches a choice)
# ---------------------------------------------------------------------------------------------------------

def trained_alternative(cards: list[ModelCard], current: ModelCard, pe: str | None = None,
                        mask: str | None = None) -> ModelCard | None:
    """The bundled model trained with this position encoding and/or mask, closest to `current`
    (same task first, then the same other option); None when no bundled model was trained with it."""
    if pe is None and mask is None:
        return current
    candidates = [card for card in cards
                  if (pe is None or card.config.pos_encoding == pe) and (mask is None or card.config.mask == mask)]
    if not candidates:
        return None

    def closeness(card: ModelCard) -> tuple:
        return (card.task == current.task,
                mask is not None or card.config.mask == current.config.mask,
                pe is not None or card.config.pos_encoding == current.config.pos_encoding,
                card.config.max_len == current.config.max_len,  # lm-rope, not lm-rope-long, for a 128-token model
                card.name == current.name)

    return max(candidates, key=closeness)


def with_quality(card: ModelCard) -> str:
    """A model's name in bold with its held-out figures, for the line that says which model a choice switched to."""
    figures = registry.quality(card)
    return f"**{card.name}** (held-out: {figures})" if figures else f"**{card.name}**"


def chosen_setting(cards: list[ModelCard], card: ModelCard, mask: str | None, pe: str | None, window: int,
                   stride: int, trained: bool) -> tuple[Setting, str | None]:
    """What to run for a mask and/or position encoding chosen on `card` (None: its own), and the one line saying
    so (None when nothing changed). As an ablation: `card` with them. As a trained model: the bundled model
    trained with both; else the one trained with the encoding, the mask applied to it as an ablation (an encoding
    with trained parameters cannot be ablated onto a model that lacks them); else `card` with the mask ablated.
    A mask chosen by name is kept when the model changes, even if it is `card`'s own."""
    pe = None if pe == card.config.pos_encoding else pe
    own_mask = mask == card.config.mask and mask not in ("window", "strided")
    if not trained or pe is None and (mask is None or own_mask):
        return Setting(card.name, None if own_mask else mask, window, stride, pe), None
    both = trained_alternative(cards, card, pe=pe, mask=mask)
    if both is not None:
        return (Setting(both.name, window=both.config.window, stride=both.config.stride),
                f"Showing {with_quality(both)}, the bundled model trained with mask {both.config.mask} and encoding "
                f"{both.config.pos_encoding} (the sidebar model is {card.name}).")
    base = card if pe is None else trained_alternative(cards, card, pe=pe)
    if base is None:  # only from a hand-made link: the toggle offers the encodings some model was trained with
        return (Setting(card.name, mask, window, stride, pe),
                f"No bundled model was trained with encoding {pe}, so it is applied to {card.name} as an ablation.")
    ablated = Setting(base.name, mask, window, stride)  # `both` found none: base was not trained with this mask
    if base.name == card.name:
        return ablated, (f"No bundled model was trained with mask {mask}, so it is applied to {card.name} as an "
                         "ablation.")
    return ablated, (f"Showing {with_quality(base)}, trained with encoding {pe}, with mask {mask} as an ablation: no "
                     f"bundled model was trained with both (the sidebar model is {card.name}).")


def ablation_encodings(card: ModelCard) -> list[str]:
    """Encodings the model can be run with: its own and every parameter-free one."""
    own = card.config.pos_encoding
    return [own] + [pe for pe in PARAMETER_FREE_ENCODINGS if pe != own]


def trained_encodings(cards: list[ModelCard], card: ModelCard) -> list[str]:
    """Encodings some bundled text model was trained with (the current model's first)."""
    available = {c.config.pos_encoding for c in cards}
    own = card.config.pos_encoding
    return [own] + [pe for pe in POSITION_ENCODINGS if pe != own and pe in available]


# ---------------------------------------------------------------------------------------------------------
# Sidebar widgets
# ---------------------------------------------------------------------------------------------------------

def model_from_link(names: list[str]) -> None:
    """Call before drawing a model picker (URL key `model`) whose labels are more than the names (model_label adds
    the held-out figure): the URL holds the label, so a link that names the model (model=sort), or holds a label
    from before the model was retrained (model=sort (exact match 97%)), would match no option and open the default
    model. The name, the label's first word, is taken here instead."""
    linked = (st.query_params.get("model") or "").split(" (")[0].split(" · ")[0]
    if "model" not in st.session_state and linked in names:
        st.session_state["model"] = linked  # written to the URL, as its label, on the next run (keep_in_url)


def model_picker(cards: list[ModelCard], default: str = registry.DEFAULT_TEXT_MODEL) -> ModelCard:
    """The sidebar model picker (URL key `model`); stops the page with a note when there is no model yet."""
    if not cards:
        st.info(f"No bundled text model yet: they appear in `{models_dir()}` as training finishes "
                "(`python -m core.train`). Reload the page then.", icon="⏳")
        st.stop()
    names = [card.name for card in cards]
    by_name = {card.name: card for card in cards}
    index = names.index(default) if default in names else 0
    if st.session_state.get(PICK_NEXT) in names:
        st.session_state["model"] = st.session_state.pop(PICK_NEXT)
    model_from_link(names)
    keep_in_url("model")
    name = st.sidebar.selectbox(
        "Model", names, index=index, key="model", bind=BIND, format_func=lambda n: model_label(by_name[n]),
        help="A bundled model: lm-<encoding> are language models trained with that position encoding; "
             "“your run” marks a model saved from the Live training page. In brackets, its main figure on held-out "
             "text: *agreement* is how often a language model prefers the verb that agrees with its subject across "
             "another noun (“the keys to the cabinet **are**”; chance is 50%), *accuracy* how often an image model "
             "names the shape, *exact match* how often a task model gets the whole answer right.")
    card = by_name.get(name, cards[index])
    cfg = card.config
    st.sidebar.caption(f"**{card.task}**, position encoding **{cfg.pos_encoding}**: {card.description or card.task}  \nM={cfg.n_layers} layers · H={cfg.n_heads} heads · "
                       f"D={cfg.d_model} · context {cfg.max_len} tokens · mask {cfg.mask} · "
                       f"encoding {cfg.pos_encoding}  \nHeld-out: {registry.quality(card) or 'not evaluated'}")
    return card


def notation_switch() -> str:
    """The sidebar notation switch (URL key `notation`): "common" or "paper"."""
    notation = st.sidebar.radio(
        "Notation", list(NOTATION_LABELS), captions=list(NOTATION_LABELS.values()), key="notation", bind=BIND,
        help="The seed paper writes X as D×N (tokens across) and A_{n′,n} normalised over columns; most code "
             "writes X as N×D and A with rows summing to 1. Paper notation shows A transposed.")
    return notation or "common"


def keep_in_url(*keys: str) -> None:
    """Call before drawing these URL-bound widgets: their values are stated again, so that Streamlit writes to the
    URL any it lacks. A run that changes the URL (a click's callback, a replaced value) sends the whole query string
    as its request carried it: a widget changed in the browser while that run was in flight (L2 picked just after a
    click on a cell) is dropped from the URL, though the page still shows it. The next run puts it back."""
    for key in keys:
        if key in st.session_state:
            st.session_state[key] = st.session_state[key]


def keep_in_range(key: str, low: int, high: int, what: str) -> None:
    """Call just before drawing the URL-bound input `key` whose values, low…high, depend on the model or the text
    (a slider, a number input, a picker of layers, heads, tokens, positions): a value out of range, left by
    another model or given by a link, is replaced by the nearest valid one, with a note. Streamlit would raise
    on a slider's stale value ("The value 99 is greater than the max_value 32") and drop a link's silently."""
    resync = f"_{key}__replaced"
    if st.session_state.pop(resync, False) and key in st.session_state:
        # Streamlit leaves a value replaced before its widget (re)appears out of the URL; set again once the widget
        # exists, it is written there
        st.session_state[key] = st.session_state[key]
    if key in st.session_state:
        value = st.session_state[key]
    else:
        found = re.search(r"-?\d+", st.query_params.get(key, ""))  # a link's value: "7", or a label, "L7", "7: dog"
        value = found.group() if found else None
    try:
        value = int(value)
    except (TypeError, ValueError):
        return  # nothing chosen yet (None), or not a number: the widget handles it
    if low <= value <= high:
        return
    st.session_state[key] = min(max(value, low), high)
    st.session_state[resync] = True
    st.info(f"{what} {value} is out of range for this model and text ({low} to {high}): showing "
            f"{st.session_state[key]} instead.", icon=":material/straighten:")


def layer_head_picker(n_layers: int, n_heads: int) -> tuple[int, int]:
    """Two horizontal radios side by side, "L0…" and "H0…" (URL keys `layer`, `head`); the chosen (layer, head),
    kept in range when the model changes under a shared link."""
    col_layer, col_head = st.columns(2)
    with col_layer:
        keep_in_range("layer", 0, n_layers - 1, "Layer")
        layer = st.radio("Layer", list(range(n_layers)), format_func=lambda i: f"L{i}", key="layer", bind=BIND,
                         horizontal=True, help="Which transformer block (the seed paper's m, counted from 0).")
    with col_head:
        keep_in_range("head", 0, n_heads - 1, "Head")
        head = st.radio("Head", list(range(n_heads)), format_func=lambda i: f"H{i}", key="head", bind=BIND,
                        horizontal=True, help="Which of the block's H attention heads.")
    return (0 if layer is None else min(int(layer), n_layers - 1),
            0 if head is None else min(int(head), n_heads - 1))


# ---------------------------------------------------------------------------------------------------------
# Classroom: presenter mode, "predict, then reveal", charts
# ---------------------------------------------------------------------------------------------------------

LAYOUT_CSS = """<style>
/* Columns stack when they would be too narrow to read, at any window width (Streamlit stacks them only below
   640 px): a column holding a chart keeps 22rem, one with a drop-down 12rem, any other 9rem; a row that cannot give them that wraps. */
[data-testid="stColumn"] { min-width: min(100%, 9rem); }
[data-testid="stColumn"]:has([data-testid="stSelectbox"]) { min-width: min(100%, 12rem); }
[data-testid="stColumn"]:has(.js-plotly-plot, .al-heatmap, [data-testid="stVegaLiteChart"]) {
  min-width: min(100%, 22rem); }
/* Labels, metric names and menu entries wrap onto a second line instead of ending in "…". */
[data-testid="stWidgetLabel"] [data-testid="stMarkdownContainer"], [data-testid="stWidgetLabel"] p,
[data-testid="stMetricLabel"] [data-testid="stMarkdownContainer"], [data-testid="stMetricLabel"] p,
[data-testid="stSidebarNavLink"] span { white-space: normal; overflow: visible; text-overflow: clip; }
[data-testid="stMetricValue"] > div { overflow: visible; text-overflow: clip; }
[data-testid="stMetricValue"] { overflow-wrap: anywhere; }
/* Tabs wrap onto a second row rather than scroll out of sight. */
[data-testid="stTabs"] [role="tablist"] { flex-wrap: wrap; }
/* A laptop with the sidebar open: less empty margin beside the page, more room for its charts. */
@media (max-width: 1280px) {
  [data-testid="stMainBlockContainer"] { padding-left: 2rem; padding-right: 2rem; } }
</style>"""
PRESENTER_CSS = """<style>
html { font-size: 21px; }
[data-testid="stMain"] h1 { font-size: 2.6rem; }
[data-testid="stMain"] [data-testid="stMarkdownContainer"] p,
[data-testid="stMain"] [data-testid="stMarkdownContainer"] li { font-size: 1.15rem; line-height: 1.5; }
/* the sidebar's drop-downs are the presenter's, not the class's: at about their usual size their choice fits */
[data-testid="stSidebar"] [data-testid="stSelectbox"] input { font-size: 0.7rem !important; }
</style>"""
PRESENTER_FONT = 20  # chart font size in presenter mode (plotly's default is 12)
PRESENTER_SCALE = PRESENTER_FONT / 12  # every chart's type grows by this in presenter mode
PRESENTER_HEIGHT = 1.3  # and its height by at least this, so that its larger labels do not squeeze the plot


def presenter_mode() -> bool:
    """The presenter-mode toggle (URL key `presenter`), drawn once by app.py at the top of the sidebar for every
    page (a widget of the entrypoint keeps its value from page to page): large type for a projector. Charts drawn
    with `plotly_chart`, `chart` or pages._heatmap grow with it (their colours are colour-blind-safe in either
    mode: Okabe-Ito categories, Blues / Viridis / red-blue scales). Also sets the layout rules every page shares."""
    on = bool(st.sidebar.toggle("Presenter mode", key="presenter", bind=BIND,
                                help="Large type for a projector or a big screen, on every page; the link keeps "
                                     "it on."))
    st.html(LAYOUT_CSS + (PRESENTER_CSS if on else ""))
    return on


def _enlarge_fonts(node, factor: float) -> None:
    """Multiply every explicit font size in a figure's dict (titles, ticks, annotations, texts) by `factor`."""
    if isinstance(node, dict):
        for name, value in node.items():
            if name.endswith("font") and isinstance(value, dict) and isinstance(value.get("size"), (int, float)):
                value["size"] = round(value["size"] * factor)
            _enlarge_fonts(value, factor)
    elif isinstance(node, list):
        for item in node:
            _enlarge_fonts(item, factor)


def presenter_figure(fig):
    """The figure as presenter mode shows it: every text and fixed margin larger by PRESENTER_SCALE, the figure
    taller (its plot keeps at least its height). Outside presenter mode the figure itself."""
    if not st.session_state.get("presenter"):
        return fig
    import plotly.graph_objects as go  # figures import plotly: only pages that draw pay for it

    spec = fig.to_dict()
    _enlarge_fonts(spec, PRESENTER_SCALE)
    layout = spec.setdefault("layout", {})
    layout.setdefault("font", {}).setdefault("size", PRESENTER_FONT)
    layout.setdefault("hoverlabel", {}).setdefault("font", {}).setdefault("size", PRESENTER_FONT)
    margin = layout.get("margin", {})
    for side in "lrtb":  # fixed margins (core/figures sizes them to the labels) grow with the labels' type
        if side in margin:
            margin[side] = round(margin[side] * PRESENTER_SCALE)
    if layout.get("height"):  # taller by at least what the larger margins above and below take
        grown = (margin.get("t", 0) + margin.get("b", 0)) * (1 - 1 / PRESENTER_SCALE)
        layout["height"] = round(max(layout["height"] * PRESENTER_HEIGHT, layout["height"] + grown))
    return go.Figure(spec)


def plotly_chart(fig, where=st, **kwargs):
    """st.plotly_chart (in `where`, a container or placeholder) with presenter mode's larger type."""
    return where.plotly_chart(presenter_figure(fig), **kwargs)


def chart(fig, key: str, filename: str, *, zoom: bool = True, **kwargs):
    """Draw a plotly figure with the app's toolbar (PNG download as `filename`.png) and, in presenter mode,
    large type. Returns what st.plotly_chart returns (the selection, with on_select)."""
    from core.figures.attention import png_config  # figures import plotly: only pages that draw pay for it

    return plotly_chart(fig, key=key, config=png_config(filename, zoom=zoom), **kwargs)


def predict_then_reveal(key: str, question: str, options: list[str] | None, reveal, about: str = "") -> bool:
    """A "predict, then reveal" prompt: the class answers `question` (one of `options`, or free text when None),
    then the Reveal button calls `reveal(prediction)` to draw, in the prompt's box, the graded answer measured on
    this run (see `show_grade`). Returns whether it is revealed: whatever else on the page answers the question is
    drawn only then (`until_revealed`). The prediction is bound to the URL under `key`; the reveal is per session
    (a shared link starts unrevealed) and holds for this question only: when the question changes (another token or
    head named in it, or another text `about` which it is asked), the prompt is hidden again."""
    shown = f"{key}__revealed"  # holds the question that was revealed
    asked = f"{question}\n{about}"
    if st.session_state.get(shown) not in (None, asked):
        del st.session_state[shown]
    with st.container(border=True):
        st.markdown(f":material/psychology_alt: **Predict:** {question}")
        if options is None:
            prediction = st.text_input("Your prediction", key=key, bind=BIND, label_visibility="collapsed",
                                       placeholder="Type your prediction, then reveal")
        else:
            prediction = st.radio("Your prediction", options, index=None, key=key, bind=BIND, horizontal=True,
                                  label_visibility="collapsed")
        # on_click runs before the rerun it starts, so content above the prompt that answers it appears at once
        st.button("Reveal", key=f"{key}__reveal", icon=":material/visibility:", on_click=_reveal, args=(shown, asked))
        if revealed(key):
            reveal(prediction)
    return revealed(key)


def _reveal(shown: str, question: str) -> None:
    st.session_state[shown] = question


def revealed(key: str) -> bool:
    """Whether prompt `key` is revealed (for its current question) in this session."""
    return st.session_state.get(f"{key}__revealed") is not None


def until_revealed(key: str, what: str) -> bool:
    """True once prompt `key` is revealed; before, one line in its place saying that `what` waits for it. Guard
    every chart or text that answers the prompt with it: `if until_revealed(key, "The chart"): chart(...)`."""
    if revealed(key):
        return True
    st.caption(f":material/visibility_off: {what}: shown when you reveal your prediction.")
    return False


def show_grade(prediction: str | None, answer: str | None, measured: str) -> None:
    """The sentence a reveal opens with: the class's prediction, what this run measured (markdown the page wrote)
    and the verdict (core/predictions.py)."""
    st.markdown(Grade(prediction, answer, measured).sentence(literal))
