"""Shared UI for the pages: cached loaders, the sidebar model picker, the notation switch, error display.

Pages import it as `from pages._common import ...`. Every widget here is bound to the URL
(`bind="query-params"`) under a stable key, so a view can be shared as a link. URL parameters used here:
  model     the bundled model (sidebar picker)
  notation  "common" (A is N x N, row = query, rows sum to 1) or "paper" (seed 001: A_{n',n}, columns sum to 1)

Set ATTENTION_LAB_MODELS_DIR to read the model cards from another folder than assets/models (the tests do).
"""

from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `streamlit run app.py` puts ROOT first; AppTest of a single page may not
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402
from streamlit.runtime.pages_manager import PagesManager  # noqa: E402

from core import registry  # noqa: E402
from core.checkpoint import ModelCard  # noqa: E402
from core.config import MASK_KINDS, PARAMETER_FREE_ENCODINGS, POSITION_ENCODINGS, ConfigError  # noqa: E402
from core.lru import ByteLRU  # noqa: E402
from core.masks import MaskSpec  # noqa: E402
from core.model import Transformer  # noqa: E402
from core.record import TextInputError, record_text  # noqa: E402
from core.recording import Recording  # noqa: E402

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
    ($ATTENTION_LAB_USER_DIR, see core/registry.py) whose names no bundled model takes. Read each run: models
    appear as training finishes or a run is saved; it is cheap."""
    bundled = registry.list_cards(models_dir())
    taken = {card.name for card in bundled}
    runs = [card for card in registry.user_cards() if card.name not in taken]
    return [card for card in bundled + runs if card.task in tasks]


def text_cards() -> list[ModelCard]:
    """The text models' cards, bundled then saved runs."""
    return model_cards(registry.TEXT_TASKS)


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
        parts = [self.model]
        if self.mask is not None:
            parts.append({"window": f"mask window({self.window})", "strided": f"mask strided({self.stride})"}
                         .get(self.mask, f"mask {self.mask}"))
        elif card is not None:
            parts.append(f"own mask {card.config.mask}")
        if self.pe is not None:
            parts.append(f"position encoding {self.pe}")
        elif card is not None:
            parts.append(f"own encoding {card.config.pos_encoding}")
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


@shared_result
def _recording(model: str, text: str, mask: str | None, window: int, stride: int, pe: str | None,
               directory: str) -> Recording | str:
    """The recording, or the one-line message saying why the text or setting cannot be run."""
    try:
        transformer, card = get_model(model, directory)
        spec = None
        if mask is not None:
            cfg = transformer.cfg
            spec = MaskSpec(mask, window or cfg.window, cfg.is_causal, stride or cfg.stride)
        return record_text(transformer, text, mask=spec, pe=pe, card=card)
    except (TextInputError, ConfigError, registry.UnknownModelError, ValueError) as error:
        return str(error)  # ValueError: e.g. a length the model refuses


def get_recording(setting: Setting, text: str) -> Recording | str:
    """Cached by (model name, text, mask kind, window, stride, pe): the Recording or an error message."""
    s = setting.normalised()
    return _recording(s.model, text, s.mask, s.window, s.stride, s.pe, str(models_dir()))


def show_input_error(message: str) -> None:
    """The reason a text or setting cannot be run, as an error box; the text stays in its box to edit."""
    st.error(f"**Can't run this:** {message}", icon="⚠️")


DEFAULT_TEXT = "the keys to the old cabinet are on the table ."


def typed_text_recording(card: ModelCard) -> tuple[str, Recording]:
    """The page's text box and the model's own recording of it; on bad input an error box, then the page stops."""
    text = st.text_area("Text", value=DEFAULT_TEXT, key="text", bind=BIND, height=68,
                        help="Lowercase words from the grammar work best. Press Ctrl+Enter (or click outside) to run.")
    recording = get_recording(Setting(card.name), text or "")
    if isinstance(recording, str):
        show_input_error(recording)
        st.stop()
    unknown_warning(recording.meta["unknown"])
    return text, recording


def unknown_warning(unknown: list[bool]) -> None:
    """A warning when some tokens are not in the model's vocabulary (a grammar sentence on an algorithmic model,
    emoji, misspellings): the model reads them all as one [UNK] token."""
    if any(unknown):
        st.warning(f"{sum(unknown)} token(s) are not in the model's vocabulary and are read as [UNK] "
                   "(marked ⟨…⟩?).", icon=":material/help:")


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

def model_picker(cards: list[ModelCard], default: str = registry.DEFAULT_TEXT_MODEL) -> ModelCard:
    """The sidebar model picker (URL key `model`); stops the page with a note when there is no model yet."""
    if not cards:
        st.info(f"No bundled text model yet: they appear in `{models_dir()}` as training finishes "
                "(`python -m core.train`). Reload the page then.", icon="⏳")
        st.stop()
    names = [card.name for card in cards]
    by_name = {card.name: card for card in cards}
    index = names.index(default) if default in names else 0
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


def layer_head_picker(n_layers: int, n_heads: int) -> tuple[int, int]:
    """Two horizontal radios side by side, "L0…" and "H0…" (URL keys `layer`, `head`); the chosen (layer, head),
    kept in range when the model changes under a shared link."""
    col_layer, col_head = st.columns(2)
    with col_layer:
        layer = st.radio("Layer", list(range(n_layers)), format_func=lambda i: f"L{i}", key="layer", bind=BIND,
                         horizontal=True, help="Which transformer block (the seed paper's m, counted from 0).")
    with col_head:
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


def predict_then_reveal(key: str, question: str, options: list[str] | None, reveal) -> None:
    """A "predict, then reveal" prompt: the class answers `question` (one of `options`, or free text when None),
    then a button shows the answer: `reveal(prediction)` is called to draw it (the live result). The prediction is
    bound to the URL under `key`; the reveal is per session (a shared link starts unrevealed)."""
    with st.container(border=True):
        st.markdown(f":material/psychology_alt: **Predict:** {question}")
        if options is None:
            prediction = st.text_input("Your prediction", key=key, bind=BIND, label_visibility="collapsed",
                                       placeholder="Type your prediction, then reveal")
        else:
            prediction = st.radio("Your prediction", options, index=None, key=key, bind=BIND, horizontal=True,
                                  label_visibility="collapsed")
        shown = f"{key}__revealed"
        if st.button("Reveal", key=f"{key}__reveal", icon=":material/visibility:"):
            st.session_state[shown] = True  # the click's own rerun draws the answer; it stays shown after
        if st.session_state.get(shown):
            reveal(prediction)
