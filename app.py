"""Attention Lab: `streamlit run app.py`.

Pages live in pages/, one file each; shared widgets and cached loaders in pages/_common.py.
To add a page, add one line to PAGES below.
"""

import streamlit as st

st.set_page_config(page_title="Attention Lab", page_icon="🔍", layout="wide")

PAGES = [
    st.Page("pages/text_explorer.py", title="Text explorer", icon="🔤", default=True),
    # st.Page("pages/<name>.py", title="...", icon="...", url_path="<name>"),
]

pg = st.navigation(PAGES)
pg.run()
