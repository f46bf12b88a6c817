"""Picking a model: the sidebar picker (URL key `model`), the cards it lists (bundled, saved runs, the user's
pretrained ones), the "Your own model" box and links that name one, and the cached loader.

Set ATTENTION_LAB_MODELS_DIR to read the model cards from another folder than assets/models (the tests do).
"""

from __future__ import annotations

import os
from pathlib import Path

import streamlit as st

from core.model import pretrained, registry
from core.model.checkpoint import ModelCard
from core.model.transformer import Transformer
from core.training.live.runs import visible_runs
from pages.ui.browser import browser_id
from pages.ui.safety import literal, show_input_error
from pages.ui.widgets import BIND, keep_in_url


def models_dir() -> Path:
    """Where the model cards are read from: $ATTENTION_LAB_MODELS_DIR, else assets/models."""
    override = os.environ.get("ATTENTION_LAB_MODELS_DIR")
    return Path(override) if override else registry.MODELS_DIR


def model_cards(tasks: tuple[str, ...]) -> list[ModelCard]:
    """The cards of the models for these tasks: the bundled ones (models_dir()), then the saved runs
    ($ATTENTION_LAB_USER_DIR, see core/model/registry.py) this browser saved or the teacher shares
    (core.training.live.runs.visible_runs) whose names no bundled model takes. Saved runs come from
    registry.user_cards()'s cache, read again when a run is saved."""
    bundled = registry.list_cards(models_dir())
    taken = {card.name for card in bundled}
    runs = [card for card in visible_runs(registry.user_cards(), browser_id()) if card.name not in taken]
    return [card for card in bundled + runs if card.task in tasks]


def text_cards(pretrained: bool = False) -> list[ModelCard]:
    """The text models' cards, bundled then saved runs; with `pretrained` (the pages that read any recording: text
    explorer, residual stream, TokenNorm), then the user's pretrained GPT-2 and BERT models (core/model/pretrained.py):
    those in the Hugging Face cache, and those this session opened from a folder or by name."""
    cards = model_cards(registry.TEXT_TASKS)
    if not pretrained:
        return cards
    return cards + [card for card in registry.pretrained_cards(tuple(st.session_state.get(OPENED, ())))
                    if card.task in registry.PRETRAINED_TASKS]


def is_pretrained(card: ModelCard) -> bool:
    """A user's pretrained model (core/model/pretrained.py), not one of ours."""
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
        remember_opened(pretrained.source_of(card.name))
        st.session_state[PICK_NEXT] = card.name  # the picker exists already: it takes the name on the rerun
        st.rerun()


def folders_allowed() -> bool:
    """Whether this server opens pretrained models from folders (a shared one sets ATTENTION_LAB_OPEN_FOLDERS=0)."""
    return os.environ.get(OPEN_FOLDERS_ENV, "1") != "0"


def openable_card(source: str) -> ModelCard:
    """The card of a pretrained model named by the sidebar's box or a link (named by its canonical source, one per
    folder), or PretrainedError saying why this server will not open it."""
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
        card = openable_card(source)
    except pretrained.PretrainedError as error:
        st.info(literal(f"The link's model could not be opened: {error}"), icon=":material/link_off:")
        return
    remember_opened(pretrained.source_of(card.name))
    if card.name != linked:  # another spelling of a folder (hf:/a/b/, hf://a/b): the picker holds the real path
        st.session_state[PICK_NEXT] = card.name


OWN_MODEL = "own_model"  # session state: the user's pretrained model last chosen on a page that reads it


def any_text_model_picker() -> tuple[list[ModelCard], ModelCard]:
    """The picker of the pages that read any text recording: bundled models, saved runs and the user's pretrained
    ones, with the "Your own model" box below it. (cards, the chosen card).

    Every page's picker shares the URL key `model`, and one whose options lack the user's own model (a page that
    needs a bundled one, the image or encoder–decoder page) replaces it with its default: the own model is kept
    under OWN_MODEL and chosen again here, until the class picks another model on a page that reads any."""
    open_linked_model()
    cards = text_cards(pretrained=True)
    own = st.session_state.get(OWN_MODEL)
    if own in {card.name for card in cards}:
        st.session_state["model"] = own
    card = model_picker(cards, on_change=_forget_own_model)
    if is_pretrained(card):
        st.session_state[OWN_MODEL] = card.name
    open_pretrained_model()
    return cards, card


def _forget_own_model() -> None:
    """The class picked another model in a picker that lists its own: that choice holds from now on."""
    st.session_state.pop(OWN_MODEL, None)


def bundled_model_picker(why: str) -> ModelCard:
    """The picker of a page that reads only our own models (bundled ones and saved runs). When the class chose its
    own pretrained model on another page, a note under the picker says why this page cannot run it (`why`: the
    words after “because”) and that it stays chosen there (any_text_model_picker picks it again)."""
    card = model_picker(text_cards())
    own = st.session_state.get(OWN_MODEL)
    if own is not None:
        st.sidebar.info(f"**This page needs one of our bundled models** because {why}, so it shows {card.name}. "
                        f"Your model ({literal(pretrained.describe_source(pretrained.source_of(own)))}) stays chosen "
                        "on the pages that read it, such as the Text explorer.", icon=":material/info:")
    return card


def model_label(card: ModelCard) -> str:
    """A model's name in the pickers with its main held-out figure (so a class sees what it compares); saved user
    runs are marked."""
    label = f"{card.name} · your run" if registry.is_user_run(card) else card.name
    main = registry.quality(card, first_only=True)
    return f"{label} ({main})" if main else label


@st.cache_resource(max_entries=16, show_spinner="Loading the model…")
def get_model(name: str, directory: str) -> tuple[Transformer, ModelCard]:
    return registry.load_model(name, Path(directory))


def model_from_link(names: list[str]) -> None:
    """Call before drawing a model picker (URL key `model`) whose labels are more than the names (model_label adds
    the held-out figure): the URL holds the label, so a link that names the model (model=sort), or holds a label
    from before the model was retrained (model=sort (exact match 97%)), would match no option and open the default
    model. The name, the label's first word, is taken here instead."""
    linked = (st.query_params.get("model") or "").split(" (")[0].split(" · ")[0]
    if "model" not in st.session_state and linked in names:
        st.session_state["model"] = linked  # written to the URL, as its label, on the next run (keep_in_url)


TEXT_MODEL_HELP = (
    "A bundled model: lm-<encoding> are language models of a small grammar trained with that position encoding, "
    "english-lm and english-<encoding> of broad English (english-lm: learned positions); "
    "“your run” marks a model saved from the Live training page. In brackets, its main figure on held-out "
    "text: *agreement* is how often a language model prefers the verb that agrees with its subject across "
    "another noun (“the keys to the cabinet **are**”; chance is 50%), *accuracy* how often an image model "
    "names the shape, *exact match* how often a task model gets the whole answer right.")


def pick_model(cards: list[ModelCard], default: str, empty_note: str, help: str, family: str,
               on_change=None) -> ModelCard:
    """The sidebar's model drop-down (URL key `model`) over `cards` of one `family` ("text", "image"), `default`
    first chosen, a model just opened, named by a link or last chosen in this family taken; the chosen card. With
    no card, `empty_note` and the page stops."""
    if not cards:
        st.info(empty_note, icon="⏳")
        st.stop()
    names = [card.name for card in cards]
    by_name = {card.name: card for card in cards}
    index = names.index(default) if default in names else 0
    if st.session_state.get(PICK_NEXT) in names:
        st.session_state["model"] = st.session_state.pop(PICK_NEXT)
    model_from_link(names)
    this_family_model(family, names, lambda name: model_label(by_name[name]))
    keep_in_url("model")
    name = st.sidebar.selectbox("Model", names, index=index, key="model", bind=BIND,
                                format_func=lambda n: model_label(by_name[n]), on_change=on_change, help=help)
    remember_model(family, name)
    return by_name.get(name, cards[index])


CHOSEN = "model_chosen"  # session state: the model last chosen in each family of pickers (text, image, seq2seq)


def this_family_model(family: str, names: list[str], label=str) -> None:
    """Call before drawing a picker (key `model`, options `names` shown as `label(name)`) of one family of models.
    Every page's picker shares the key, so a text model chosen on the explorer would reach the image page's picker
    and its address bar (image_lab?model=lm-rope), and the image model back on the explorer. A value not among
    `names` gives way to this family's last choice, also in the address bar, or to the page's default."""
    if st.session_state.get("model") in names:
        return
    chosen = st.session_state.get(CHOSEN, {}).get(family)
    if chosen in names:
        st.session_state["model"] = chosen
        st.query_params["model"] = label(chosen)  # not bound yet on this page: Streamlit would not write it itself
    else:
        st.session_state.pop("model", None)


def remember_model(family: str, name: str) -> None:
    """The model this family's picker shows now, for this_family_model on the next page of the family."""
    st.session_state.setdefault(CHOSEN, {})[family] = name


def model_picker(cards: list[ModelCard], default: str | None = None, on_change=None) -> ModelCard:
    """The sidebar model picker of text models (pick_model; `default`: registry.DEFAULT_TEXT_MODEL unless given;
    `on_change`: called when the class picks a model in it) and what the chosen one is; stops the page with a note
    when there is no model yet."""
    empty_note = (f"No bundled text model yet: they appear in `{models_dir()}` as training finishes "
                  "(`python -m core.train`). Reload the page then.")
    card = pick_model(cards, default or registry.DEFAULT_TEXT_MODEL, empty_note, TEXT_MODEL_HELP, "text", on_change)
    cfg = card.config
    # the task in words, not bold like a model's name: english-long's task is "english-lm", a model's name too
    st.sidebar.caption(f"Task {literal(card.task)}, position encoding **{cfg.pos_encoding}**: "
                       f"{literal(card.description or card.task)}  \nM={cfg.n_layers} layers · "
                       f"H={cfg.n_heads} heads · D={cfg.d_model} · context {cfg.max_len} tokens · mask {cfg.mask} · "
                       f"encoding {cfg.pos_encoding}  \nHeld-out: {registry.quality(card) or 'not evaluated'}")
    return card
