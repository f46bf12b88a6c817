"""Attention Lab: `streamlit run app.py`.

Pages live in pages/, one file each; shared widgets and cached loaders in pages/ui/, one job a module.
To add a page, add one line to PAGES below. Its url_path must be the file's name (pages/x.py -> "x"): on a fresh
server's first run Streamlit looks a deep link up among the files of pages/ (see pages/ui/__init__.py).
"""

import threading
from pathlib import Path

import streamlit as st
import torch

from pages.ui.classroom import class_panel
from pages.ui.history import one_entry_per_page, remember_address, restore_shared_params
from pages.ui.presentation import presenter_mode
from pages.ui.safety import drop_non_finite_numbers
from pages.ui.store import recorder
from pages.ui.uploads import install_upload_limits

torch.set_num_threads(1)  # this run's thread: the models are small, and one thread beats two on a shared 2-core machine
# The icon is a file we ship: a Material or emoji icon would be fetched from a font server or CDN on every page.
ICON = Path(__file__).resolve().parent / "assets" / "icon.png"
st.set_page_config(page_title="Attention Lab", page_icon=str(ICON), layout="wide")

PAGES = [
    st.Page("pages/text_explorer.py", title="Text explorer", icon=":material/text_fields:", default=True),
    st.Page("pages/residual_stream.py", title="Residual stream", icon=":material/stacked_line_chart:", url_path="residual_stream"),
    st.Page("pages/token_norm.py", title="TokenNorm", icon=":material/straighten:", url_path="token_norm"),
    st.Page("pages/head_effects.py", title="What does this head do?", icon=":material/science:", url_path="head_effects"),
    st.Page("pages/it_reference.py", title="What does “it” refer to?", icon=":material/link:", url_path="it_reference"),
    st.Page("pages/image_lab.py", title="Image attention", icon=":material/image:", url_path="image_lab"),
    st.Page("pages/maths.py", title="The maths, step by step", icon=":material/function:", url_path="maths"),
    st.Page("pages/attention_cost.py", title="Cost of attention", icon=":material/speed:", url_path="attention_cost"),
    st.Page("pages/positions_lab.py", title="Position encodings", icon=":material/pin:", url_path="positions_lab"),
    st.Page("pages/masks_lab.py", title="Masks & generation", icon=":material/grid_on:", url_path="masks_lab"),
    st.Page("pages/cross_attention.py", title="Encoder–decoder", icon=":material/translate:", url_path="cross_attention"),
    st.Page("pages/live_training.py", title="Live training", icon=":material/model_training:", url_path="live_training"),
    # st.Page("pages/<name>.py", title="...", icon="...", url_path="<name>"),
]



def _start_training_processes() -> None:
    from core.training.live.worker import warm_up  # imported in the background: the first page does not wait

    warm_up()


@st.cache_resource(show_spinner=False)
def training_processes() -> None:
    """Once per server: the fork server that live-training runs come from starts in the background (core/training/live/)."""
    threading.Thread(target=_start_training_processes, name="warm-training", daemon=True).start()


training_processes()
install_upload_limits()  # before any page: Streamlit's upload store, bounded per session (pages/ui/uploads.py)
recorder()  # started with the first page: its thread faults in the recordings' memory while that page loads
pg = st.navigation(PAGES)
restore_shared_params()  # before the page's widgets: Back restores the typed text too
drop_non_finite_numbers()  # before any page builds its widgets: Streamlit itself would crash on inf in a link
one_entry_per_page()  # Back goes to the previous page, not to the same page with less of its state
presenter_mode()  # drawn here, once: the same place on every page, and it stays on from page to page
class_panel(pg.url_path)  # the class session: start, join, follow (pages/ui/classroom.py)
try:
    pg.run()
finally:
    remember_address()  # the address this page leaves, to know it again on Back
