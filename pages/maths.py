"""The maths, step by step: one layer of a text model (bundled, a saved run, or the user's own pretrained one)
recomputed in the seed paper's notation (seed 001 §2).

X is D×N (tokens across), A_h is N×N normalised over its columns, MHSA = Σ_h V_h X A_h. Every number shown is
recomputed by core/lessons/maths.py from the previous step and the model's weights, and checked against the recording.

URL parameters (all widgets are bound): model, presenter (sidebar); text, layer, head, token, maths_step (the
step on screen, or all of them), predict_top, predict_forms.
"""

from __future__ import annotations

import sys
from pathlib import Path

if str(Path(__file__).resolve().parent.parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import streamlit as st  # noqa: E402

from core.figures.attention import softmax_row_bar  # noqa: E402
from core.figures.maths import matrix_heatmap, token_axis_labels  # noqa: E402
from core.lessons.maths import GLOSSARY, GLOSSARY_COLUMNS, LayerMaths, Step, layer_maths  # noqa: E402
from core.lessons.predictions import closeness  # noqa: E402
from pages.ui.heatmap import head_chart  # noqa: E402
from pages.ui.lessons import predict_then_reveal, show_grade, until_revealed  # noqa: E402
from pages.ui.models import any_text_model_picker, get_model, models_dir  # noqa: E402
from pages.ui.presentation import chart  # noqa: E402
from pages.ui.safety import literal  # noqa: E402
from pages.ui.store import Setting, get_recording  # noqa: E402
from pages.ui.text_input import token_choices, typed_text_recording  # noqa: E402
from pages.ui.widgets import BIND, keep_in_range, layer_head_picker  # noqa: E402

FORMS = ["identical, up to rounding", "close, but not the same", "different"]
FORM_TITLES = {"multi-head sum": "The paper: a sum over the heads",  # step -> title (core's would answer the prompt)
               "concat then project": "Most code: concatenate, then project"}
CLOSE = 0.01  # the two forms "close" up to 1 % of Y's largest entry
STEPS = ("1 · The input X", "2 · Queries and keys", "3 · Scores and softmax", "4 · Mixing the values",
         "5 · All heads", "6 · Residual, TokenNorm, MLP", "Glossary")
ALL_STEPS = "all steps"
HIDDEN = ("mlp hidden", "mlp activation")  # steps whose rows are the MLP's hidden units, not the D features


@st.cache_data(max_entries=32, show_spinner="Recomputing the layer…")
def cached_layer_maths(model_name: str, directory: str, text: str, layer: int) -> LayerMaths:
    model, _ = get_model(model_name, directory)
    return layer_maths(model, get_recording(Setting(model_name), text), layer)


def agreement(step: Step) -> str:
    """A caption saying how closely a recomputed step equals the recorded tensor."""
    if step.hook is None:
        return "Computed here from the steps above (the model records no tensor for it)."
    largest = float(np.abs(step.recorded[np.isfinite(step.recorded)]).max(initial=0.0))
    then = f" {step.recorded_then}" if step.recorded_then else ""
    return (f"Recomputed here; equals the model's `{step.hook}`{then} to **{step.max_diff:.1e}** "
            f"(its entries reach {largest:.3g}).")


def show_step(step: Step, key: str, labels: list[str], token: int, rows: list[str] | None = None,
              row_title: str = "feature d", formula: bool = True) -> None:
    """The formula, the numbers as a heatmap (paper layout, token n outlined) and the check against the recording."""
    if formula:
        st.markdown(f"**{step.title}**")
        st.latex(step.latex)
    shape = "×".join(str(s) for s in step.value.shape)
    chart(matrix_heatmap(step.value, labels, rows, row_title=row_title, highlight=token,
                         title=f"{shape} · n = {labels[token]}"), key=f"chart_{key}", filename=f"maths_{key}")
    st.caption(agreement(step))


def _move_step(offset: int) -> None:
    """Previous / Next: the neighbouring step (the buttons' callback, before the picker is drawn)."""
    current = st.session_state.get("maths_step") or STEPS[0]
    index = STEPS.index(current) if current in STEPS else 0
    st.session_state["maths_step"] = STEPS[min(max(index + offset, 0), len(STEPS) - 1)]


def step_picker() -> str:
    """The step on screen (URL key `maths_step`), one at a time so a class follows it, or all of them; with
    Previous and Next buttons."""
    chosen = st.segmented_control("Step", [*STEPS, ALL_STEPS], key="maths_step", bind=BIND, required=True,
                                  default=STEPS[0], help="One step at a time, or every step on one long page.")
    chosen = chosen if chosen in (*STEPS, ALL_STEPS) else STEPS[0]
    if chosen != ALL_STEPS:
        index = STEPS.index(chosen)
        with st.container(horizontal=True, gap="small"):
            st.button("Previous", key="maths_previous", icon=":material/arrow_back:", on_click=_move_step,
                      args=(-1,), disabled=index == 0)
            st.button("Next", key="maths_next", icon=":material/arrow_forward:", on_click=_move_step, args=(1,),
                      disabled=index == len(STEPS) - 1)
            st.caption(f"Step {index + 1} of {len(STEPS)}")
    return chosen


def summary_frame(maths: LayerMaths, head: int) -> pd.DataFrame:
    """One row per checked step: its name, the tensor it is checked against and the largest difference."""
    rows = [(step.title, step.checked_against or "—", "×".join(map(str, step.value.shape)), step.max_diff)
            for step in maths.checks(head)]
    return pd.DataFrame(rows, columns=["step", "recorded tensor", "shape (paper layout)",
                                       "max |recomputed − recorded|"])


# ---------------------------------------------------------------------------------------------------------
# The page
# ---------------------------------------------------------------------------------------------------------

st.title("The maths, step by step")
st.caption("One head of one layer, computed in the notation of the seed paper (Turner, *An Introduction to "
           "Transformers*, §2) with the live numbers of the sidebar's model on your text. **Paper layout:** X is "
           "D×N, "
           "one column per token; the attention matrix A_h is N×N with A_h[n′, n] the weight query n gives key n′, "
           "so **each column sums to 1** and Y = X A (eq. 2). The other pages' common layout is the transpose.")
_, card = any_text_model_picker()
text, recording = typed_text_recording(card)
cfg = recording.config
tokens, unknown = recording.meta["tokens"], recording.meta["unknown"]
labels = token_axis_labels(tokens, unknown)

col_pickers, col_token = st.columns([2, 1.2])
with col_pickers:
    layer, head = layer_head_picker(cfg.n_layers, cfg.n_heads)
with col_token:
    keep_in_range("token", 0, len(tokens) - 1, "Token")
    choices = token_choices(tokens, unknown)
    token = st.selectbox("Token n (a column)", list(range(len(tokens))), format_func=choices.__getitem__, key="token",
                         bind=BIND, index=len(tokens) - 1,
                         help="The query followed through the layer: its column is outlined in every matrix.")
token = len(tokens) - 1 if token is None else min(int(token), len(tokens) - 1)

maths = cached_layer_maths(card.name, str(models_dir()), text, layer)
this = maths.heads[head]
K, D = this.U_q.shape
st.success(f"Every step below is recomputed here from the step before it and the model's weights, in float64. "
           f"Each one equals what the model itself computed (its recording) to at most "
           f"**{maths.max_diff(head):.1e}**: the difference is float32 rounding.", icon=":material/check_circle:")
with st.expander("Every step against the recording"):
    st.dataframe(summary_frame(maths, head), hide_index=True, key="checks_table",
                 column_config={"max |recomputed − recorded|": st.column_config.NumberColumn(format="%.1e")})

feature_rows = [str(i) for i in range(K)]
on_screen = step_picker()
st.info(f"**Running example:** “{literal(text.strip())}” · layer {layer}, head {head} · following token "
        f"n = {literal(labels[token])}, outlined in every matrix.", icon=":material/route:")


def shows(number: int) -> bool:
    """Whether step `number` (1-based, the glossary last) is on screen: the chosen one, or every one."""
    return on_screen in (ALL_STEPS, STEPS[number - 1])


# --- 1. the input --------------------------------------------------------------------------------------------
if shows(1):
    st.header("1 · The input X")
    st.markdown(f"D = {D} features down, N = {len(tokens)} tokens across. "
                + ("This model is **pre-LN**: attention reads the stream after TokenNorm, each token normalised on its "
                   "own (seed 001 §2.3; TokenNorm is what most code calls LayerNorm). The chart includes γ and β; the "
                   "model records its TokenNorm standardised, before γ and β, so the check applies them to the "
                   "recording first." if maths.pre_norm else
                   "This model is **post-LN**: attention reads the residual stream itself; TokenNorm comes after each "
                   "residual addition."))
    show_step(maths.X, "X", labels, token)

# --- 2. queries and keys -------------------------------------------------------------------------------------
if shows(2):
    st.header("2 · Queries and keys")
    st.markdown(f"Head {head} projects every token with two K×D matrices, U_q and U_k (K = {K}): the queries ask, the "
                "keys answer (eq. 6). Footnote 8's 1/√K is written out here rather than absorbed into U.")
    col_q, col_k = st.columns(2)
    for column, name in ((col_q, "queries"), (col_k, "keys")):
        with column:
            show_step(this.steps[name], name, labels, token, feature_rows, "feature i")
    if "rotated queries" in this.steps:
        st.markdown("This model uses **RoPE**: each pair of features of q_n and k_n is turned by an angle "
                    "proportional to n, so their dot product depends on n − n′ only (seed 003 §7.3).")
        col_q, col_k = st.columns(2)
        for column, name in ((col_q, "rotated queries"), (col_k, "rotated keys")):
            with column:
                show_step(this.steps[name], name.replace(" ", "_"), labels, token, feature_rows, "feature i")

# --- 3. scores and the softmax over columns ------------------------------------------------------------------
if shows(3):
    st.header("3 · Scores, then a softmax down each column")

    def reveal_top(prediction: str | None) -> None:
        column = this.pattern[:, token]
        best = int(np.argmax(column))
        yours = "" if prediction not in labels else f", and **{column[labels.index(prediction)]:.3f}** on your key"
        show_grade(prediction, labels[best], f"column n = {literal(labels[token])} of A_{head} puts its largest "
                                             f"weight, **{column[best]:.3f}**, on key **{literal(labels[best])}**"
                                             f"{yours}")
        chart(softmax_row_bar(column, this.steps["scores"].value[:, token], tokens, best, unknown=unknown,
                              query=token), key="chart_column", filename="maths_column", zoom=False)
        st.caption(f"Column n = {labels[token]} of A_{head} in the paper's layout (the same numbers are row n in the "
                   "common layout the chart's title speaks of): one bar per key n′, × where the mask hides it.")

    visible = [labels[i] for i in np.flatnonzero(np.isfinite(this.steps["scores"].value[:, token]))]
    predict_then_reveal("predict_top", f"Which key n′ will query n = {labels[token]} weight most in head {head} of "
                        f"layer {layer}?", visible, reveal_top, about=f"{card.name}\n{text}")
    if "position bias" in this.steps:
        st.markdown(f"This model adds a **{recording.meta.get('pe')} position bias** to every score.")
        show_step(this.steps["position bias"], "bias", labels, token, labels, "key n′")
    pattern = this.steps["pattern"]
    if until_revealed("predict_top", "The scores S and the attention A of this head (they answer the prediction "
                                     "above)"):
        show_step(this.steps["scores"], "scores", labels, token, labels, "key n′")
        st.caption("Grey cells are −∞: the mask hides key n′ from query n, so exp(−∞) = 0 below.")
        st.markdown(f"**{pattern.title}**")
        st.latex(pattern.latex)
        col_a, col_sums = st.columns([3, 2])
        with col_a:
            head_chart(pattern.value.T, tokens, this.steps["scores"].value.T, unknown=unknown, notation="paper",
                       title=f"A_{head}: column n = query, rows n′ = keys", key="chart_pattern",
                       filename="maths_pattern")
        with col_sums:
            sums = pattern.value.sum(axis=0)
            st.dataframe(pd.DataFrame({"query n": labels, "Σ_n′ A[n′, n]": sums}), hide_index=True,
                         key="sums_table",
                         column_config={"Σ_n′ A[n′, n]": st.column_config.NumberColumn(format="%.7f")})
            st.caption(agreement(pattern))

# --- 4. mixing the values ------------------------------------------------------------------------------------
if shows(4):
    st.header("4 · Mixing: Y_h = V_h X A_h")
    st.latex(r"y_n = \sum_{n'} x_{n'}\, A_{n',n} \quad \text{(eq. 1)}")  # its words below: too wide in the formula
    st.markdown(f"Column n of XA is an average of the columns of X, with the weights of column n of A. Each head "
                f"first maps X to its K = {K} dimensional *values* U_v X, averages them with the weights of "
                f"A_h (left: U_v X A_h), then maps back to D = {D} with U_h. The product V_h = U_h U_v is D×D = "
                f"{D}×{D} but has rank **{this.V_rank}** ≤ K (footnote 13).")
    col_z, col_out = st.columns(2)
    with col_z:
        show_step(this.steps["z"], "z", labels, token, feature_rows, "feature i")
    with col_out:
        show_step(this.steps["head output"], "head_output", labels, token)

# --- 5. multi-head -------------------------------------------------------------------------------------------
if shows(5):
    st.header("5 · All heads: Σ_h V_h X A_h, or concatenate, then project?")
    col_sum, col_concat = st.columns(2)
    for column, (name, title) in zip((col_sum, col_concat), FORM_TITLES.items()):
        with column:
            st.markdown(f"**{title}**")
            st.latex(maths.steps[name].latex)
    st.caption("Below: Y, computed the paper's way and compared with the model's own attention output.")

    def reveal_forms(prediction: str | None) -> None:
        largest = float(np.abs(maths.steps["multi-head sum"].value).max())
        show_grade(prediction, closeness(maths.sum_vs_concat / max(largest, 1e-30), FORMS, CLOSE),
                   f"the two forms differ by at most **{maths.sum_vs_concat:.1e}** (Y's entries reach {largest:.3g})")
        st.markdown("They are the **same sum**, grouped differently: W_O [z_1; …; z_H] = Σ_h U_h z_h, so only "
                    "float64 rounding can separate them.")
        m1, m2, m3 = st.columns(3)
        m1.metric("max |Σ_h V_h X A_h − concat form|", f"{maths.sum_vs_concat:.1e}")
        m2.metric("max |Σ_h V_h X A_h − hook_attn_out|", f"{maths.steps['multi-head sum'].max_diff:.1e}")
        m3.metric("max |concat form − hook_attn_out|", f"{maths.steps['concat then project'].max_diff:.1e}")

    predict_then_reveal("predict_forms", "The paper sums H products V_h X A_h; most code concatenates the heads and "
                        "multiplies by one matrix W_O. On these numbers the two are…", FORMS, reveal_forms)
    show_step(maths.steps["multi-head sum"], "attn_out", labels, token, formula=False)

# --- 6. residual, TokenNorm, MLP -----------------------------------------------------------------------------
if shows(6):
    st.header("6 · Residual, TokenNorm and the MLP")
    st.markdown("Attention's output is *added* to the stream (the residual connection), then the same two-layer MLP "
                f"(width {cfg.d_mlp}) is applied to every token on its own (seed 001 §2.2–2.3, figure 7).")
    tail = [name for name in maths.steps if name not in ("multi-head sum", "concat then project")]
    for left, right in zip(tail[0::2], tail[1::2] + [None]):
        col_left, col_right = st.columns(2)
        for column, name in ((col_left, left), (col_right, right)):
            if name is not None:
                with column:
                    show_step(maths.steps[name], name.replace(" ", "_"), labels, token,
                              row_title="hidden unit j" if name in HIDDEN else "feature d")

# --- glossary ------------------------------------------------------------------------------------------------
if shows(7):
    st.header("Glossary")
    st.caption("The paper's names, the code's (core/model/transformer.py), the recording's hook names and the common ones. "
               "The paper's D×N matrices are the code's N×D tensors transposed.")
    st.table(pd.DataFrame(GLOSSARY, columns=GLOSSARY_COLUMNS).set_index(GLOSSARY_COLUMNS[0]))
