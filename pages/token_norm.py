"""TokenNorm: what each normalisation of a bundled text model does to every token of a typed text (seed 001 §2.3).

Per token and layer: the mean and std TokenNorm removes and divides by, γ and β, the vector before and after; and
seed 001's figure 5 (TokenNorm vs BatchNorm) on the actual activations. All numbers come from core/lessons/lens.py.

URL parameters (all widgets are bound): model, notation, presenter (sidebar); text, layer, norm, token, feature,
predict_standardised.
"""

from __future__ import annotations

import sys
from pathlib import Path

if str(Path(__file__).resolve().parent.parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import streamlit as st  # noqa: E402

from core.figures import stream  # noqa: E402
from core.lessons.lens import batchnorm_statistics, token_norm_view, tokennorm_statistics  # noqa: E402
from core.lessons.predictions import standardised  # noqa: E402
from pages.ui.lessons import predict_then_reveal, show_grade, until_revealed  # noqa: E402
from pages.ui.models import any_text_model_picker, get_model, models_dir  # noqa: E402
from pages.ui.presentation import plotly_chart, table_height  # noqa: E402
from pages.ui.safety import literal  # noqa: E402
from pages.ui.store import shared_figure  # noqa: E402
from pages.ui.text_input import token_choices, typed_text_recording  # noqa: E402
from pages.ui.widgets import BIND, keep_in_range, notation_switch  # noqa: E402

PLOT_CONFIG = {"displaylogo": False}
# a class looks at one view together: each figure is drawn once for all of them
token_statistics_chart = shared_figure(stream.token_statistics_chart)
token_norm_bars = shared_figure(stream.token_norm_bars)
norm_axes_figure = shared_figure(stream.norm_axes_figure)
PRE_SITES = {"ln1": "before attention", "ln2": "before the MLP", "ln_final": "after the last block, before the "
                                                                             "unembedding"}
POST_SITES = {"ln1": "after attention + residual", "ln2": "after the MLP + residual"}
STANDARDISED_OPTIONS = ["mean 0 and std 1, for every token", "they still differ from token to token",
                        "mean 0, but the std differs"]


def per_token_frame(view, tokens) -> pd.DataFrame:
    """One row per token: its statistics and the lengths of the vector before and after."""
    return pd.DataFrame({
        "n": np.arange(len(tokens)), "token": tokens,
        "mean": view.mean, "std": view.std,
        "‖before‖": np.linalg.norm(view.before, axis=1), "‖after‖": np.linalg.norm(view.after, axis=1)})


def long_csv(view, tokens, setting_label: str) -> str:
    """Every number shown, one row per (token, feature): before, mean, std, standardised, γ, β, after."""
    n, d = view.before.shape
    frame = pd.DataFrame({
        "site": view.site, "n": np.repeat(np.arange(n), d), "token": np.repeat(np.asarray(tokens, dtype=object), d),
        "feature_d": np.tile(np.arange(d), n), "before": view.before.reshape(-1),
        "mean_n": np.repeat(view.mean, d), "std_n": np.repeat(view.std, d),
        "standardized": view.standardized.reshape(-1), "gamma_d": np.tile(view.gamma, n),
        "beta_d": np.tile(view.beta, n), "after": view.after.reshape(-1)})
    return f"# {setting_label}\n" + frame.to_csv(index=False, float_format="%.6g")


def reveal_standardised(view, prediction: str | None) -> None:
    """The mean and std of every token's standardised vector, as the model computed them (before γ, β), graded
    against std 1 as ε leaves it: √var / √(var + ε)."""
    means, stds = view.standardized.mean(axis=1), view.standardized.std(axis=1)
    with_eps = view.before.std(axis=1) / view.std  # view.std is √(var + ε), what the model divides by
    show_grade(prediction, standardised(means, stds, STANDARDISED_OPTIONS, with_eps),
               f"over the {len(means)} tokens the standardised vectors' means run from **{means.min():.1e}** to "
               f"**{means.max():.1e}** and their standard deviations from **{stds.min():.4f}** to "
               f"**{stds.max():.4f}**")
    st.markdown("TokenNorm takes each token's own mean away and divides by its own standard deviation, so every "
                "token ends with mean 0 and std 1 however large it was before. γ and β then scale and shift each "
                "feature, the same for every token.")
    if with_eps.min() < 0.999:
        st.markdown(f"Here the std falls short of 1 because these vectors are small (std {view.std.min():.3g} to "
                    f"{view.std.max():.3g} before): ε in √(var + ε) is not negligible next to their variance, and "
                    f"√var / √(var + ε) predicts {with_eps.min():.4f} to {with_eps.max():.4f}, as measured.")


# ---------------------------------------------------------------------------------------------------------
# The page
# ---------------------------------------------------------------------------------------------------------

st.title("TokenNorm")
st.caption("Before attention and before the MLP, every token's vector is normalised on its own: its mean over the "
           "D features is removed and it is divided by its standard deviation, then scaled by γ and shifted by β "
           "(seed 001 §2.3, which calls LayerNorm *TokenNorm* for this reason).")
# two lines: on one, the formula was wider than a 1024-pixel window's column in presenter mode
st.latex(r"\begin{gathered} \bar x_{d,n} = \frac{x_{d,n} - \mathrm{mean}(x_n)}{\sqrt{\mathrm{var}(x_n) + \epsilon}}"
         r"\,\gamma_d + \beta_d, \\ \mathrm{mean}(x_n) = \tfrac1D \textstyle\sum_d x_{d,n} \end{gathered}")
cards, card = any_text_model_picker()
notation = notation_switch()
text, recording = typed_text_recording(card)
model, _ = get_model(card.name, str(models_dir()))
cfg = recording.config
tokens, unknown = recording.meta["tokens"], recording.meta["unknown"]
labels = token_choices(tokens, unknown)
pre = cfg.norm == "pre"
sites = PRE_SITES if pre else POST_SITES
if not pre:
    st.info("This model is **post-LN**: TokenNorm is applied *after* each residual addition, "
            "x′ = TokenNorm(x + sublayer(x)), so it normalises the stream itself, and there is no final TokenNorm.",
            icon="ℹ️")

col_site, col_layer, col_token = st.columns([1.4, 1, 1.2])
with col_site:
    which = st.radio("Which TokenNorm", list(sites), captions=list(sites.values()), key="norm", bind=BIND,
                     help="Each block has two; a pre-LN model has one more before the unembedding.")
which = which if which in sites else "ln1"
with col_layer:
    keep_in_range("layer", 0, cfg.n_layers - 1, "Layer")
    layer = st.radio("Layer (block)", list(range(cfg.n_layers)), format_func=lambda i: f"L{i}", key="layer",
                     bind=BIND, horizontal=True, disabled=which == "ln_final",
                     help="ln_final comes after the last block, so the layer does not apply to it.")
layer = 0 if layer is None else min(int(layer), cfg.n_layers - 1)
with col_token:
    keep_in_range("token", 0, len(tokens) - 1, "Token")
    token = st.selectbox("Token", list(range(len(tokens))), format_func=lambda i: labels[i], key="token",
                         bind=BIND, index=min(1, len(tokens) - 1), help="The token shown feature by feature below.")
token = 0 if token is None else min(int(token), len(tokens) - 1)

view = token_norm_view(recording, model, layer, which)
where = "ln_final (after the last block)" if which == "ln_final" else f"layer {layer}, {which}"
st.caption(f"Showing **{where}** of {card.name} on {len(tokens)} tokens (with [BOS]); D = {cfg.d_model} features. "
           f"Recomputing the output from mean, std, γ and β agrees with the recorded one to "
           f"{view.max_abs_error:.1e}.")

predict_then_reveal("predict_standardised", "After TokenNorm (before γ and β), what are the mean and the standard "
                    "deviation of each token's vector?", STANDARDISED_OPTIONS,
                    lambda prediction: reveal_standardised(view, prediction))

# --- every token's statistics -----------------------------------------------------------------------------
st.subheader("What TokenNorm removes from each token")
col_stats, col_table = st.columns([5, 4], gap="large")
with col_stats:
    plotly_chart(token_statistics_chart(view.mean, view.std, tokens, unknown=unknown, selected=token),
                    key="stats_chart", config=PLOT_CONFIG)
with col_table:
    frame = per_token_frame(view, tokens)
    st.dataframe(frame, hide_index=True, key="stats_table", height=table_height(len(frame)),
                 column_config={name: st.column_config.NumberColumn(format="%.4f")
                                for name in ("mean", "std", "‖before‖", "‖after‖")})
    st.caption("The mean and std of each token's vector as TokenNorm receives it; std is √(var + ε), what the "
               "model divides by.")
if not until_revealed("predict_standardised", "Each token's vector after TokenNorm, and figure 5 on these "
                                              "activations"):
    st.stop()

# --- one token, feature by feature ------------------------------------------------------------------------
st.subheader(f"Token {literal(labels[token])} through TokenNorm")
m1, m2, m3, m4 = st.columns(4)
m1.metric("mean(x_n)", f"{view.mean[token]:.4f}")
m2.metric("std(x_n)", f"{view.std[token]:.4f}")
m3.metric("‖x_n‖ before", f"{np.linalg.norm(view.before[token]):.3f}")
m4.metric("‖x̄_n‖ after", f"{np.linalg.norm(view.after[token]):.3f}")
plotly_chart(token_norm_bars(view.before[token], view.standardized[token], view.after[token],
                                float(view.mean[token]), float(view.std[token]), view.gamma, view.beta),
                key="token_chart", config=PLOT_CONFIG)
st.caption("Top: the vector TokenNorm receives, with its mean (solid) and mean ± std (dotted). Middle: centred and "
           "divided by the std (dotted lines at ±1). Bottom: scaled by γ (vermillion dashes) and shifted by β "
           "(black dots), learned per feature and the same for every token.")

# --- figure 5 on these activations ------------------------------------------------------------------------
st.subheader("TokenNorm vs BatchNorm on these activations (seed 001, figure 5)")
keep_in_range("feature", 0, cfg.d_model - 1, "Feature d")
feature = st.number_input("Feature d to outline for BatchNorm", 0, cfg.d_model - 1, 0, key="feature", bind=BIND,
                          width=320, help="BatchNorm computes one mean and std per feature, over the tokens of "
                                          "the batch.")
feature = 0 if feature is None else int(np.clip(feature, 0, cfg.d_model - 1))
token_stats, batch_stats = tokennorm_statistics(view.before), batchnorm_statistics(view.before)
plotly_chart(norm_axes_figure(token_stats.normalized, batch_stats.normalized, token_stats.mean, batch_stats.mean,
                                 tokens, unknown=unknown, selected_token=token, selected_feature=feature,
                                 notation=notation), key="fig5_chart", config=PLOT_CONFIG)
orientation = ("Paper notation: X is D × N, features down the rows and tokens across, as in seed 001."
               if notation == "paper" else "Common notation: X is N × D, one row per token.")
st.caption(f"Both panels start from the same vectors (the input of {where}), before γ and β. **TokenNorm** "
           f"averages over {token_stats.over}: every token ends with mean 0 (outlined: token "
           f"{literal(labels[token])}). **BatchNorm** averages over {batch_stats.over}: every feature ends with mean 0 across the tokens "
           f"(outlined: feature {feature}), so a token's result depends on the other tokens in the batch — and, in a "
           f"causal model, on tokens after it. {orientation} Colours are clipped at ±3.")

setting_label = f"{card.name}, {where}, text: {text!r}"
st.download_button("Download these numbers (.csv)", long_csv(view, tokens, setting_label),
                   file_name=f"tokennorm_{card.name}_{view.site}.csv", mime="text/csv", on_click="ignore",
                   key="download_csv", help="One row per token and feature: before, mean, std, standardised, γ, β, "
                                            "after.")
