"""Live training's "Your saved runs" panel: the runs this browser saved, each with a Delete button."""

from __future__ import annotations

import streamlit as st

from core.model import registry
from core.training.live.runs import MAX_SAVED_PER_BROWSER, NotOwnerError, delete_saved_run, saved_by
from pages.ui.safety import literal


def my_saved_runs(owner: str) -> None:
    """The runs this browser saved, each with a Delete button (the teacher deletes or shares any with
    `python -m core.training.live.runs`)."""
    mine = [card for card in registry.user_cards() if saved_by(card, owner)]
    if not mine:
        return
    with st.expander(f"Your saved runs ({len(mine)} of at most {MAX_SAVED_PER_BROWSER})", icon=":material/folder:"):
        st.caption("Only this browser's model menus list them, and those of everyone when your teacher shares one.")
        for card in mine:
            name_col, delete_col = st.columns([4, 1], vertical_alignment="center")
            name_col.markdown(f"**{card.name}**{' · shared by your teacher' if card.training.get('shared') else ''}: "
                              f"{literal(card.description)}")
            if delete_col.button("Delete", key=f"tr_delete_{card.name}", icon=":material/delete:"):
                try:
                    delete_saved_run(card.name, owner)
                except (ValueError, NotOwnerError) as error:
                    st.error(f"**Can't delete:** {literal(str(error))}", icon="⚠️")
                    return
                st.rerun()
