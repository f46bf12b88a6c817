"""The two lesson pages under AppTest on tiny random models: "The maths, step by step" (pages/maths.py) and "Cost
of attention" (pages/attention_cost.py). Every control is exercised; the numbers checked are the page's own."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from conftest import charts, figure, figures, ok, shows

ROOT = Path(__file__).resolve().parent.parent
MATHS = str(ROOT / "pages" / "maths.py")
COST = str(ROOT / "pages" / "attention_cost.py")


def text_of(at: AppTest) -> str:
    return " ".join(element.value for kind in ("markdown", "caption", "info", "success", "warning")
                    for element in getattr(at, kind))


def frame(at: AppTest, column: str):
    """The table that has this column (AppTest does not expose a dataframe's key)."""
    return next(df.value for df in at.dataframe if column in df.value.columns)


# ---------------------------------------------------------------------------------------------------------
# The maths, step by step
# ---------------------------------------------------------------------------------------------------------

ALL = {"maths_step": "all steps"}


def test_maths_page_shows_every_step_matching_the_recording(app):
    at = app(MATHS, **ALL)
    ok(at)
    at.button(key="predict_top__reveal").click().run()  # the scores and A answer it: they wait for the reveal
    ok(at)
    assert at.title[0].value == "The maths, step by step"
    assert len(charts(at)) >= 14  # X, Q, K (rotated Q, K: RoPE), S, A, z, V_h X A_h, Y and the MLP's steps
    assert at.radio(key="layer").value == 0 and at.radio(key="head").value == 0
    checks = frame(at, "max |recomputed − recorded|")
    differences = checks["max |recomputed − recorded|"].dropna()
    assert len(differences) >= 12 and (differences < 1e-5).all()
    assert "blocks.0.attn.hook_rot_q" in set(checks["recorded tensor"])  # the tiny lm-rope model rotates q, k
    sums = frame(at, "Σ_n′ A[n′, n]")["Σ_n′ A[n′, n]"]
    assert ((sums - 1).abs() < 1e-9).all()  # every column of A sums to 1
    glossary = at.table[0].value
    assert "TokenNorm" in set(glossary.index) and "LayerNorm" in set(glossary["common name"])
    assert len(at.latex) >= 10
    assert "pre-LN" in text_of(at)


def test_maths_page_says_step_1_is_the_recorded_tokennorm_with_gamma_and_beta(app):
    """The chart of X includes γ and β, while the recorded ln1.hook_normalized is standardised before them: the
    words name the recorded tensor with γ and β applied, which is what the numbers are checked against."""
    at = app(MATHS)
    ok(at)
    captions = [c.value for c in at.caption if c.value.startswith("Recomputed here")]
    assert captions and "equals the model's `blocks.0.ln1.hook_normalized` × γ + β to" in captions[0]
    assert "blocks.0.ln1.hook_normalized × γ + β" in set(frame(at, "recorded tensor")["recorded tensor"])
    assert "before γ and β" in text_of(at)


def test_maths_page_follows_layer_head_and_token(app):
    at = app(MATHS, **ALL)
    before = figures(at)
    at.radio(key="head").set_value(1).run()
    ok(at)
    after_head = figures(at)
    assert after_head[1] != before[1] and after_head[0] == before[0]  # queries change, X does not
    at.radio(key="layer").set_value(1).run()
    ok(at)
    assert figures(at)[0] != after_head[0]
    at.selectbox(key="token").set_value(3).run()
    ok(at)
    x_stream = figures(at)[0]
    assert shows(x_stream, "n = 3: to") and [s["x0"] for s in x_stream["layout"]["shapes"]] == [2.5]  # column 3 outlined
    at.text_area(key="text").set_value("mary found the key").run()
    ok(at)
    assert at.selectbox(key="token").options[-1].startswith("4:")


def test_maths_page_predictions_reveal_the_live_answer(app):
    at = app(MATHS, token="2: keys", **ALL)
    n_charts = len(charts(at))
    at.radio(key="predict_top").set_value(at.radio(key="predict_top").options[0]).run()
    at.button(key="predict_top__reveal").click().run()
    ok(at)
    assert len(charts(at)) == n_charts + 3  # the scores, A, and the column of A as bars
    assert "puts its largest weight" in text_of(at)
    at.radio(key="predict_forms").set_value("identical, up to rounding").run()
    at.button(key="predict_forms__reveal").click().run()
    ok(at)
    assert "You said **identical, up to rounding**; measured: the two forms differ by at most" in text_of(at)
    assert "**Right.**" in text_of(at)
    concat = next(m for m in at.metric if "concat form" in m.label and "Σ" in m.label)
    assert float(concat.value) < 1e-10


def test_maths_page_on_a_post_ln_model_and_in_presenter_mode(app):
    at = app(MATHS, model="post-ln", layer="L1", head="H1", **ALL)
    ok(at)
    assert (at.radio(key="layer").value, at.radio(key="head").value) == (1, 1)
    assert "post-LN" in text_of(at)
    checks = frame(at, "max |recomputed − recorded|")
    assert "Residual, then TokenNorm (post-LN)" in set(checks["step"])
    assert (checks["max |recomputed − recorded|"].dropna() < 1e-5).all()
    at.session_state["presenter"] = True  # the toggle itself is app.py's (tests/test_browser_layout.py)
    at.run()
    ok(at)
    assert figures(at)[0]["layout"]["font"]["size"] == 20


def test_maths_page_goes_one_step_at_a_time_with_the_running_example(app):
    at = app(MATHS, token="2: keys")
    ok(at)
    assert at.get("segmented_control")[0].value == "1 · The input X"
    assert [h.value for h in at.header] == ["1 · The input X"] and len(charts(at)) == 1  # X alone
    assert at.button(key="maths_previous").disabled and not at.button(key="maths_next").disabled
    assert any(i.value.startswith("**Running example:**") and "token n = 2\\: keys" in i.value for i in at.info)
    assert frame(at, "max |recomputed − recorded|") is not None  # the checks stay on every step
    headers = []
    for _ in range(6):
        at.button(key="maths_next").click().run()
        ok(at)
        headers += [h.value for h in at.header]
        assert any(i.value.startswith("**Running example:**") for i in at.info)
    assert headers == ["2 · Queries and keys", "3 · Scores, then a softmax down each column",
                       "4 · Mixing: Y_h = V_h X A_h", "5 · All heads: Σ_h V_h X A_h, or concatenate, then project?",
                       "6 · Residual, TokenNorm and the MLP", "Glossary"]
    assert at.query_params["maths_step"] == "Glossary" and at.button(key="maths_next").disabled
    at.button(key="maths_previous").click().run()
    assert [h.value for h in at.header] == ["6 · Residual, TokenNorm and the MLP"]
    at = app(MATHS, maths_step="3 · Scores and softmax")  # a link opens its step, prediction and all
    ok(at)
    assert [h.value for h in at.header] == ["3 · Scores, then a softmax down each column"]
    assert at.button(key="predict_top__reveal") and not [b for b in at.button if b.key == "predict_forms__reveal"]


@pytest.mark.parametrize("page", [MATHS, COST])
def test_empty_text_shows_an_error_not_an_exception(app, page):
    at = app(page)
    at.text_area(key="text").set_value("  ").run()
    assert not at.exception
    assert at.error and "empty" in at.error[0].value


# ---------------------------------------------------------------------------------------------------------
# Cost of attention
# ---------------------------------------------------------------------------------------------------------

def test_cost_page_measures_on_demand(app):
    at = app(COST, max_n="256")
    ok(at)
    assert at.title[0].value == "Cost of attention"
    assert not any(c.proto.id and "cost_chart" in c.proto.id for c in charts(at))  # nothing measured yet
    at.button(key="predict_double__reveal").click().run()
    assert "Measure on this machine" in text_of(at)  # the reveal asks for a measurement first
    at.toggle(key="causal").set_value(False).run()
    at.selectbox(key="head_dim").set_value(16).run()
    at.button(key="measure").click().run()
    ok(at)
    cost_chart = next(c for c in charts(at) if "cost_chart" in c.proto.id)
    cost = figure(cost_chart)
    assert shows(cost, "slope 2") and cost["layout"]["xaxis"]["type"] == cost["layout"]["yaxis"]["type"] == "log"
    table = frame(at, "softmax time (ms)")
    assert list(table["N"]) == [64, 128, 256]
    assert (table["softmax largest tensor (MB)"] == [4 * n * n / 1e6 for n in (64, 128, 256)]).all()  # N×N floats
    assert (table["linear largest tensor (MB)"] == [4 * n * 16 / 1e6 for n in (64, 128, 256)]).all()  # N×K floats
    assert "grew" in text_of(at) and "time slope" in text_of(at)
    at.select_slider(key="max_n").set_value(128).run()
    ok(at)
    assert not any("cost_chart" in c.proto.id for c in charts(at))  # another setting: measure again


def test_cost_page_compares_softmax_and_linear_on_the_models_head(app):
    at = app(COST, layer="L1", head="H1")
    ok(at)
    assert (at.radio(key="layer").value, at.radio(key="head").value) == (1, 1)
    at.radio(key="predict_same").set_value("clearly different").run()
    at.button(key="predict_same__reveal").click().run()
    ok(at)
    shown = figures(at)
    assert any(shows(f, "softmax (the model's own pattern)") for f in shown)
    assert any(shows(f, "linear attention (causal)") for f in shown)
    relative = next(m for m in at.metric if "‖linear − softmax‖" in m.label)
    assert float(relative.value.rstrip("%")) > 0.1  # they differ
    assert "different kernel" in text_of(at)
    before = figures(at)
    at.radio(key="head").set_value(0).run()
    at.sidebar.radio(key="notation").set_value("paper").run()
    ok(at)
    assert figures(at) != before


def test_cost_page_on_a_bidirectional_model_runs_linear_attention_unmasked(app):
    at = app(COST, model="mlm-learned")
    at.button(key="predict_same__reveal").click().run()
    ok(at)
    assert any(shows(f, "linear attention (no mask)") for f in figures(at))
