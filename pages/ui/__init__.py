"""Shared widgets for the pages, one job a module: models (picking and opening), store (recordings), safety
(escaping, links), text_input, toggles, widgets (sidebar and URL helpers), presentation (presenter mode, charts),
heatmap (the canvas chart), lessons (predict, then reveal), browser (identity). A page imports what it uses, by
name. Nothing model-mathematical lives here: that is core/.
"""

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager

if PagesManager.uses_pages_directory:
    # The first run in a fresh server treats pages/ as Streamlit's old multipage folder and runs a deep-linked
    # page (/residual_stream) by itself, without app.py's st.navigation (that would show "Page not found", or
    # the folder's files as the menu). Rerunning once, with that mode off, lets app.py draw the real menu.
    PagesManager.uses_pages_directory = False
    st.rerun()
