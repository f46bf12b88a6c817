"""Cost of attention: softmax attention vs linear attention (seed 003 §6.2), measured live on this machine, and the
two compared on a text model's real queries, keys and values (bundled, a saved run or the user's own pretrained one).

All numbers come from core/lessons/linear_attention.py: the timings and tensor sizes are measured when the button is pressed
(cached per setting), the comparison is computed on the recording.

URL parameters (all widgets are bound): model, notation, presenter (sidebar); max_n, causal, head_dim (the
measurement); text, layer, head (the comparison); predict_double, predict_same.
"""

from __future__ import annotations

import sys
from pathlib import Path

if str(Path(__file__).resolve().parent.parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pandas as pd  # noqa: E402
import streamlit as st  # noqa: E402

from core.figures.maths import cost_figure, token_agreement_bars  # noqa: E402
from core.lessons.linear_attention import (METHODS, RUN_BUDGET, CostMeasurement, GrowthFit,  # noqa: E402
                                           KernelComparison, compare_on_recording, fitted_slope, measure_cost)
from core.lessons.predictions import closeness, confident_factor  # noqa: E402
from pages.ui.heatmap import head_chart  # noqa: E402
from pages.ui.lessons import predict_then_reveal, show_grade, until_revealed  # noqa: E402
from pages.ui.models import any_text_model_picker  # noqa: E402
from pages.ui.presentation import chart  # noqa: E402
from pages.ui.text_input import typed_text_recording  # noqa: E402
from pages.ui.widgets import BIND, layer_head_picker, notation_switch  # noqa: E402

N_CHOICES = [64, 128, 256, 512, 1024, 2048, 4096]
HEAD_DIMS = [16, 32, 64]
REPEATS = 5
TIME_CAP_S = 20.0  # sizes predicted to take a measurement past this many seconds are skipped, and said so
GROWTH_FACTORS = {"about ×1": 1, "about ×2": 2, "about ×4": 4, "about ×8": 8}  # option -> growth factor
SAME_OPTIONS = ["exactly the same", "close (a few per cent apart)", "clearly different"]
CLOSE = 0.1  # a relative difference up to 10 % counts as "close", beyond it as "clearly different"


@st.cache_data(max_entries=16, show_spinner="Measuring on this machine (one CPU thread)…")
def cached_measurement(max_n: int, head_dim: int, causal: bool) -> CostMeasurement:
    return measure_cost([n for n in N_CHOICES if n <= max_n], head_dim, causal, REPEATS, TIME_CAP_S)


def results_frame(measurement: CostMeasurement) -> pd.DataFrame:
    """One row per N: each method's median time and largest tensor."""
    by_n: dict[int, dict[str, float]] = {}
    for p in measurement.points:
        by_n.setdefault(p.n, {"N": p.n})
        by_n[p.n][f"{p.method} time (ms)"] = p.seconds * 1e3
        by_n[p.n][f"{p.method} largest tensor (MB)"] = p.largest_bytes / 1e6
    return pd.DataFrame(list(by_n.values()))


def growth_words(fit: GrowthFit) -> str:
    """The fitted growth per doubling of N, how sure it is and what it was fitted on."""
    low, high = fit.per_doubling_range
    return (f"**×{fit.per_doubling:.1f}** per doubling of N (95 % interval ×{low:.1f}…×{high:.1f}; slope "
            f"{fit.slope:.2f}, Theil–Sen over all {fit.runs} timed runs at {fit.sizes} sizes)")


def slope_text(measurement: CostMeasurement, method: str) -> str:
    points, fit = measurement.of(method), measurement.time_growth(method)
    if fit is None:
        return f"{method}: too few sizes measured for a slope"
    return (f"{method}: time slope **{fit.slope:.2f}** ({fit.low:.2f}…{fit.high:.2f}), memory slope "
            f"**{fitted_slope(points, 'largest_bytes'):.2f}** (over N = {points[0].n}…{points[-1].n})")


def measurement_section() -> None:
    st.header("Time and memory against N, measured now")
    col_n, col_k, col_causal = st.columns([2, 1, 1])
    with col_n:
        max_n = st.select_slider("Largest N", N_CHOICES, value=2048, key="max_n", bind=BIND,
                                 help="Every N from 64 up to this one is measured (powers of two).")
    with col_k:
        head_dim = st.selectbox("Head size K", HEAD_DIMS, index=1, key="head_dim", bind=BIND,
                                help="The size of each query, key and value vector (one head).")
    with col_causal:
        causal = st.toggle("Causal", value=True, key="causal", bind=BIND,
                           help="Causal: each token sees only itself and earlier tokens (a language model).")
    max_n = int(max_n or 2048)
    head_dim = int(head_dim or 32)
    causal = bool(causal)
    setting = (max_n, head_dim, causal)
    if st.button("Measure on this machine", key="measure", icon=":material/timer:", type="primary"):
        st.session_state["cost_setting"] = setting
    measurement = cached_measurement(*setting) if st.session_state.get("cost_setting") == setting else None

    def reveal_growth(prediction: str | None) -> None:
        fit = None if measurement is None else measurement.time_growth("softmax")
        if fit is None:
            show_grade(prediction, None, "nothing is measured yet for this setting"
                       + ("" if measurement is None else " at two sizes")
                       + ": press **Measure on this machine** above, and your prediction is graded here.")
            return
        answer, confident = confident_factor(fit.per_doubling, *fit.per_doubling_range, GROWTH_FACTORS)
        linear = measurement.time_growth("linear")
        measured = (f"softmax attention's time grew {growth_words(fit)} on this machine (linear attention's: "
                    f"{growth_words(linear) if linear else 'not measured at two sizes'})")
        if confident:
            show_grade(prediction, answer, measured)
        else:  # no verdict: the interval spans more than one option
            show_grade(prediction, None, f"measured: {measured}. Nearest is {answer}, but the interval spans more "
                                         "than one option: **too noisy to grade**; measure again (or at larger N).")
        st.markdown("Softmax attention builds an N×N matrix of scores (seed 003, Algorithm 1): 4× the entries when N "
                    "doubles, so time and memory grow as **N²** (Theorem 9.1) and ×4 is the answer in the limit; at "
                    "small N fixed overheads make it less, at large N the memory traffic can make it more. Linear "
                    "attention never forms an N×N matrix: in the limit it grows as **N**.")
        st.latex(r"\mathrm{softmax}\!\left(\frac{QK^{\top}}{\sqrt{K}}\right)V \ O(N^2 K) \qquad\qquad "
                 r"\frac{\phi(Q)\,\big(\phi(K)^{\top} V\big)}{\phi(Q)\,\phi(K)^{\top}\mathbf 1}\ O(N K^2)")

    predict_then_reveal("predict_double", "When N doubles, by how much does softmax attention's time grow?",
                        list(GROWTH_FACTORS), reveal_growth)
    if measurement is None:
        st.info(f"Press **Measure on this machine** to time both methods for N = 64 … {max_n} (K = {head_dim}, "
                f"{'causal' if causal else 'not causal'}); it takes a few seconds, and sizes whose runs "
                f"would take the total past {TIME_CAP_S:.0f} s are left out.", icon=":material/timer:")
        return
    if not until_revealed("predict_double", "Measured: the chart and the table of times"):
        return
    chart(cost_figure(measurement.points), key="cost_chart", filename="attention_cost")
    st.markdown(" · ".join(slope_text(measurement, method) for method in METHODS))
    if measurement.skipped:
        left_out = "; ".join(f"{m} at N = {', '.join(map(str, ns))}" for m, ns in measurement.skipped.items())
        st.warning(f"Left out to stay under the time cap of {TIME_CAP_S:.0f} s: {left_out}.",
                   icon=":material/timer_off:")
    st.dataframe(results_frame(measurement), hide_index=True, key="cost_table",
                 column_config={name: st.column_config.NumberColumn(format="%.3f")
                                for name in results_frame(measurement).columns if name != "N"})
    st.caption(
        f"Random q, k, v of one head; per point one warm-up run, then the median wall time of up to "
        f"{measurement.repeats} runs (fewer when one run takes over "
        f"{RUN_BUDGET / measurement.repeats:.2g} s), on one CPU thread "
        f"(torch.set_num_threads(1)); {measurement.seconds_spent:.1f} s in all, on a machine other users share, so "
        "expect some noise. **Memory** is the size of the largest tensor any torch operation creates during one "
        "call, seen by watching every operation (torch.overrides.TorchFunctionMode): for softmax attention an N×N "
        "matrix (the scores, or the mask built from an N×N table of offsets); for linear attention the running sums "
        "S_i, N×K×K when causal, or K×K and N×K tensors when not. The process's peak memory would mix in everything "
        "else the server holds. Dashed and dotted grey lines have slope 2 (∝ N²) and 1 (∝ N).")


def comparison_section() -> None:
    st.header("Softmax vs linear attention on this model's real q, k, v")
    st.markdown("Take one head's recorded queries, keys (after RoPE when the model uses it) and values, and run "
                "linear attention on them instead of the softmax the model was trained with.")
    _, card = any_text_model_picker()
    notation = notation_switch()
    text, recording = typed_text_recording(card)
    cfg = recording.config
    layer, head = layer_head_picker(cfg.n_layers, cfg.n_heads)
    comparison = compare_on_recording(recording, layer, head)
    predict_then_reveal("predict_same", "On the same queries, keys and values, linear attention's output is…",
                        SAME_OPTIONS, lambda prediction: reveal_comparison(comparison, recording, notation, prediction),
                        about=f"{card.name}\n{text}\nL{layer} H{head}")


def reveal_comparison(comparison: KernelComparison, recording, notation: str, prediction: str | None) -> None:
    tokens, unknown = recording.meta["tokens"], recording.meta["unknown"]
    show_grade(prediction, closeness(comparison.relative_error, SAME_OPTIONS, CLOSE),
               f"on these {len(tokens)} tokens ‖linear − softmax‖ / ‖softmax‖ = **{comparison.relative_error:.1%}**")
    m1, m2, m3 = st.columns(3)
    m1.metric("‖linear − softmax‖ / ‖softmax‖", f"{comparison.relative_error:.1%}")
    m2.metric("mean cosine per token", f"{comparison.token_cosine.mean():.3f}")
    m3.metric("largest weight difference", f"{comparison.pattern_difference:.3f}")
    soft_bits, linear_bits = comparison.entropies
    spread = "more evenly" if linear_bits > soft_bits else "less evenly"
    st.markdown("Linear attention is a different kernel, φ(q)·φ(k) with φ = elu + 1 instead of "
                "exp(q·k/√K), not an approximation of the softmax, and this model was trained with the softmax. "
                f"Here linear attention spreads each query's weight {spread}: a mean entropy of "
                f"**{linear_bits:.2f} bits** per query against the softmax's **{soft_bits:.2f} bits**.")
    notes = []
    if comparison.position_bias:
        notes.append("this model adds a position bias (ALiBi or relative) to its scores, which linear attention "
                     "has no place for")
    if not comparison.exact_mask:
        notes.append("the model's mask is neither plain causal nor none, and linear attention here is "
                     + ("causal" if comparison.causal else "not masked"))
    if notes:
        st.caption("Also: " + "; ".join(notes) + ".")
    col_soft, col_lin = st.columns(2)
    with col_soft:
        head_chart(comparison.softmax_pattern, tokens, unknown=unknown, notation=notation, masked=comparison.masked,
                   title="softmax (the model's own pattern)", key="softmax_chart", filename="softmax_pattern")
    with col_lin:
        head_chart(comparison.linear_pattern, tokens, unknown=unknown, notation=notation,
                   masked=comparison.linear_masked,
                   title=f"linear attention ({'causal' if comparison.causal else 'no mask'})", key="linear_chart",
                   filename="linear_pattern")
    chart(token_agreement_bars(comparison.token_cosine, tokens, unknown=unknown,
                               title="How far apart the two outputs point, token by token"),
          key="cosine_chart", filename="softmax_vs_linear_cosine", zoom=False)


# ---------------------------------------------------------------------------------------------------------
# The page
# ---------------------------------------------------------------------------------------------------------

st.title("Cost of attention")
st.markdown("Softmax attention compares every query with every key (seed 003, Algorithm 1). Linear attention (seed "
            "003 §6.2) swaps exp(q·k) for a product of features φ(q)·φ(k) and multiplies in the other order. How "
            "does each one's time grow with the number of tokens N? Predict, measure, then reveal.")
st.caption("Common layout here, as in seed 003: Q, K, V are N×K, one row per token; rows of the weights sum to 1.")
measurement_section()
comparison_section()
