"""The floor for tests/benchmarks/bench_browser.py: a Streamlit page with a text box, a mask choice and a small
heatmap, doing no model work. `streamlit run tests/benchmarks/trivial_page.py`."""

import hashlib

import numpy as np
import plotly.graph_objects as go
import streamlit as st

SIZE = 8  # a small heatmap, whatever the text

text = st.text_area("Text", value="the keys to the old cabinet are on the table .", key="text", height=68)
mask = st.selectbox("Mask", ["causal", "none"], key="mask")
seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")
z = np.random.default_rng(seed).random((SIZE, SIZE))
if mask == "causal":
    z = np.where(np.tril(np.ones((SIZE, SIZE), dtype=bool)), z, np.nan)
st.markdown(f"**{len(text.split())} words**, mask {mask}")
st.plotly_chart(go.Figure(go.Heatmap(z=z, zmin=0, zmax=1, colorscale="Blues")), key="chart",
                config={"displaylogo": False})
