"""The mask and position-encoding toggles' choices (no model maths): which settings a model can be run with, and
which bundled model was trained with a choice ("Apply a change as… trained model").
"""

from __future__ import annotations

import streamlit as st

from core.model import registry
from core.model.checkpoint import ModelCard
from core.model.config import MASK_KINDS, PARAMETER_FREE_ENCODINGS, POSITION_ENCODINGS
from pages.ui.store import Setting
from pages.ui.widgets import keep_in_url

OWN = "own"  # the model's own mask / position encoding in the toggles
DRAWN_FOR = "_toggles_model"  # session key: the model whose own mask and encoding the toggles' labels name
MASK_CHOICES = tuple(kind for kind in MASK_KINDS if kind != "padding")  # padding needs a batch, not a toggle
APPLY_LABELS = {  # option (also the URL value) -> caption
    "ablation": "change it in this model",
    "trained model": "switch to the model trained with it",
}


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


def resend_on_model_change(card: ModelCard, *keys: str) -> None:
    """Call before drawing the toggles `keys`, whose "model's own (…)" label names `card`'s mask or encoding. A
    selectbox's value travels to the browser as its label, and Streamlit resends it only when the value changed:
    after a model change it keeps "own", so the browser went on showing the last model's label ("model's own
    (causal)" on mlm-learned) while the page ran the new one. Stating the values again sends the new labels."""
    if st.session_state.get(DRAWN_FOR) != card.name:
        keep_in_url(*keys)
    st.session_state[DRAWN_FOR] = card.name
