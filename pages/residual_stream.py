"""The residual stream: how large each token's stream is after every block, what each attention and MLP sublayer
adds to it (shown to add up exactly), what the model would predict if it stopped at each block (the logit lens),
and the final prediction with a temperature. All numbers come from core/lessons/lens.py.

URL parameters (all widgets are bound): model (sidebar); text, position, temperature, top_k.
"""

from __future__ import annotations

import html
import sys
from pathlib import Path

if str(Path(__file__).resolve().parent.parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import streamlit as st  # noqa: E402

from core.figures.stream import (contribution_bars, logit_lens_heatmap, prediction_bars,  # noqa: E402
                                 residual_norm_heatmap)
from core.lessons.lens import (NotDecomposableError, final_prediction, logit_lens, residual_decomposition,  # noqa: E402
                               residual_norms)
from core.model.run import text_tokenizer  # noqa: E402
from pages.ui.models import any_text_model_picker, get_model, models_dir  # noqa: E402
from pages.ui.presentation import font_scale, plotly_chart  # noqa: E402
from pages.ui.text_input import token_choices, typed_text_recording  # noqa: E402
from pages.ui.widgets import BIND, keep_in_range  # noqa: E402

PLOT_CONFIG = {"displaylogo": False}
LENS_K = 5


@st.cache_resource(max_entries=4, show_spinner=False)
def vocabulary(name: str, size: int) -> tuple[str, ...]:
    """The surface string of every token id the unembedding of model `name` scores."""
    tok = text_tokenizer(get_model(name, str(models_dir()))[1])
    return tuple(tok.id_to_token(i) or f"#{i}" for i in range(size))


def per_token_csv(tokens, norms, point_labels, decomposition, lens, vocab, label: str) -> str:
    """One row per token: the stream norm at every point, each part's component along the final stream, and the
    logit lens's top guess and its probability at every point."""
    frame = pd.DataFrame({"n": np.arange(len(tokens)), "token": tokens})
    for m, point in enumerate(point_labels):
        frame[f"norm {point}"] = norms[m]
    if decomposition is not None:
        for name, values in decomposition.projections().items():
            frame[f"along final: {name}"] = values
        frame["sum of parts - stream (max abs)"] = np.abs(decomposition.total - decomposition.stream).max(axis=1)
    for m, point in enumerate(point_labels):
        frame[f"lens {point}: top"] = [vocab[i] for i in lens.top_ids[m, :, 0]]
        frame[f"lens {point}: p"] = lens.top_probs[m, :, 0]
    return f"# {label}\n" + frame.to_csv(index=False, float_format="%.6g")


@st.fragment
def prediction_view(logits: np.ndarray, lens, tokens, unknown, vocab, reads: str, label: str) -> None:
    """Position, temperature and top-k pickers and the resulting distribution. A fragment: moving the slider
    reruns only this part."""
    labels = token_choices(tokens, unknown)
    col_pos, col_t, col_k = st.columns([1.2, 1.4, 1])
    with col_pos:
        keep_in_range("position", 0, len(tokens) - 1, "Position")
        position = st.selectbox("Position", list(range(len(tokens))), index=len(tokens) - 1,
                                format_func=lambda i: labels[i], key="position", bind=BIND,
                                help=f"The model reads the {reads} from this token's final stream.")
    with col_t:
        temperature = st.slider("Temperature T", 0.0, 3.0, 1.0, 0.05, key="temperature", bind=BIND,
                                help="p = softmax(logits / T). T = 1 is the model's own distribution; lower sharpens "
                                     "it (T = 0 always picks the likeliest), higher flattens it.")
    with col_k:
        top_k = st.slider("Top k", 1, 20, 10, key="top_k", bind=BIND)
    position = len(tokens) - 1 if position is None else min(int(position), len(tokens) - 1)
    temperature = 1.0 if temperature is None else float(temperature)
    ids, probs = final_prediction(logits[position], temperature, int(top_k or 10))
    col_bars, col_layers = st.columns([1, 1], gap="large")
    with col_bars:
        plotly_chart(prediction_bars([vocab[i] for i in ids], probs,
                                        title=f"{reads} {'after' if reads == 'next token' else 'at'} "
                                              f"{html.escape(labels[position])}, T = {temperature:g}"),
                        key="prediction_chart", config=PLOT_CONFIG)
    with col_layers:
        trace = pd.DataFrame({"stream at": lens.labels,
                              "top guess": [vocab[i] for i in lens.top_ids[:, position, 0]],
                              "p": lens.top_probs[:, position, 0],
                              f"p({vocab[ids[0]]})": lens.prob_of([ids[0]] * len(tokens))[:, position]})
        st.dataframe(trace, hide_index=True, key="trace_table",
                     column_config={"p": st.column_config.ProgressColumn(min_value=0.0, max_value=1.0, format="%.3f"),
                                    f"p({vocab[ids[0]]})": st.column_config.ProgressColumn(
                                        min_value=0.0, max_value=1.0, format="%.3f")})
        st.caption(f"The logit lens at this position (T = 1): when the final guess '{vocab[ids[0]]}' first becomes "
                   "likely.")
    frame = pd.DataFrame({"rank": np.arange(1, len(ids) + 1), "token": [vocab[i] for i in ids], "probability": probs})
    st.download_button("Download this prediction (.csv)", f"# {label}, position {position}, T={temperature:g}\n"
                       + frame.to_csv(index=False, float_format="%.6g"), file_name="prediction.csv", mime="text/csv",
                       on_click="ignore", key="download_prediction")


# ---------------------------------------------------------------------------------------------------------
# The page
# ---------------------------------------------------------------------------------------------------------

st.title("Residual stream")
st.caption("Each token carries one vector through the model, the residual stream. Every attention and MLP "
           "sublayer reads it (through a TokenNorm) and *adds* its output back (seed 001 §2.3): "
           "x⁽ᵐ⁾ = x⁽ᵐ⁻¹⁾ + res(x⁽ᵐ⁻¹⁾). At the end the unembedding turns it into a guess (§4.1).")
cards, card = any_text_model_picker()
text, recording = typed_text_recording(card)
if recording.config.head == "classifier":
    st.info("This page reads token predictions; a classifier has none.", icon="ℹ️")
    st.stop()
model, _ = get_model(card.name, str(models_dir()))
cfg = recording.config
tokens, unknown = recording.meta["tokens"], recording.meta["unknown"]
vocab = vocabulary(card.name, model.unembed.out_features)
reads = "next token" if cfg.head == "next_token" else "masked token"
label = f"{card.name}, text: {text!r}"

norms = residual_norms(recording)
lens = logit_lens(recording, model, LENS_K)
try:
    decomposition = residual_decomposition(recording)
    why_not = None
except NotDecomposableError as error:
    decomposition, why_not = None, str(error)

# --- norms --------------------------------------------------------------------------------------------------
st.subheader("How large the stream is after each block")
plotly_chart(residual_norm_heatmap(norms, tokens, lens.labels, unknown=unknown), key="norm_chart",
                config=PLOT_CONFIG)
st.caption("‖x_n‖, the length of token n's stream: *embed* is token embedding + position embedding going into "
           "block 0; *after Lm* is the stream leaving block m." + (
               "" if cfg.norm == "pre" else " In this post-LN model each of those is already TokenNorm'd."))

# --- decomposition -------------------------------------------------------------------------------------------
st.subheader("What each sublayer adds")
if decomposition is None:
    st.info(why_not, icon="ℹ️")
else:
    col_chart, col_check = st.columns([4, 1], gap="large")
    with col_check:
        st.metric("max |Σ parts − stream|", f"{decomposition.max_abs_error:.1e}",
                  help="The largest difference, over every token and feature, between the sum of the parts and "
                       f"the recorded final stream blocks.{cfg.n_layers - 1}.hook_resid_post: float rounding only.")
        st.caption(f"{len(decomposition.parts)} parts: the token embedding, the position embedding, and the output "
                   f"of each of the {cfg.n_layers} attention and {cfg.n_layers} MLP sublayers.")
    with col_chart:
        plotly_chart(contribution_bars(decomposition.projections(), np.linalg.norm(decomposition.stream, axis=1),
                                          tokens, unknown=unknown), key="contribution_chart", config=PLOT_CONFIG)
    # three short lines: on one, the formula was wider than a 1024-pixel window's column (presenter mode hid a third)
    st.latex(r"\begin{aligned} x_n^{(M)} &= \mathrm{embed}_n + e_n \\ &\quad + \sum_{m<M}\left(\mathrm{attn}^{(m)}_n"
             r" + \mathrm{mlp}^{(m)}_n\right) \\ \Rightarrow\quad \|x_n^{(M)}\| &= \sum_i c_{i,n}\cdot"
             r"\frac{x_n^{(M)}}{\|x_n^{(M)}\|} \end{aligned}")
    st.caption("Each bar is one part's component along its token's final stream direction; because the parts add "
               "up to the stream exactly, the bars stack to its length (the diamond). A bar below zero points "
               "against where the stream ends up.")

# --- logit lens ----------------------------------------------------------------------------------------------
st.subheader("Logit lens: the guess at each block")
plotly_chart(logit_lens_heatmap(lens.top_probs, [[[vocab[i] for i in row] for row in point] for point in lens.top_ids],
                                tokens, lens.labels, unknown=unknown, reads=reads, font_scale=font_scale()),
             key="lens_chart", config=PLOT_CONFIG)
if cfg.norm == "pre":
    st.caption("Each row puts the stream at that point through the model's final TokenNorm and unembedding, as if the "
               "remaining blocks were skipped. ln_final's γ and β are the trained ones, but its mean and std are "
               "recomputed on that intermediate stream (the standard logit lens). The last row is the model's own "
               f"prediction. Cells show the likeliest {reads}, coloured by its probability; hover for the top "
               f"{LENS_K}.")
else:
    st.caption("Post-LN: the stream after each block is already TokenNorm'd, so each row is the unembedding applied "
               "to it directly (the *embed* row is unnormalised). The last row is the model's own prediction. Hover "
               f"for the top {LENS_K}.")

# --- final prediction ----------------------------------------------------------------------------------------
st.subheader("The final prediction")
prediction_view(recording["logits"], lens, tokens, unknown, vocab, reads, label)

st.download_button("Download the per-token numbers (.csv)",
                   per_token_csv(tokens, norms, lens.labels, decomposition, lens, vocab, label),
                   file_name=f"residual_stream_{card.name}.csv", mime="text/csv", on_click="ignore",
                   key="download_csv", help="Stream norms, each part's component along the final stream, and the "
                                            "logit lens's top guess per token.")
