"""The TokenNorm and residual stream pages under AppTest (tiny random models, so they run in seconds), and the
figure builders they use."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import streamlit as st
from conftest import charts, figure, ok, shows
from streamlit.testing.v1 import AppTest

from core.figures.stream import LENS_FONT, LENS_MIN_FONT, logit_lens_heatmap, norm_axes_figure
from core.lessons.lens import batchnorm_statistics, tokennorm_statistics
from pages.ui.presentation import PRESENTER_SCALE

ROOT = Path(__file__).resolve().parent.parent
TOKEN_NORM = str(ROOT / "pages" / "token_norm.py")
RESIDUAL = str(ROOT / "pages" / "residual_stream.py")
STREAMLIT_ROW_PX = 35  # the height Streamlit draws a dataframe's header and each row


# ---------------------------------------------------------------------------------------------------------
# TokenNorm page
# ---------------------------------------------------------------------------------------------------------

def revealed(at: AppTest) -> AppTest:
    """The page after Reveal: one token through TokenNorm and figure 5 would answer its prompt, so they wait."""
    return at.button(key="predict_standardised__reveal").click().run()


def test_token_norm_page_renders_its_charts(app):
    at = app(TOKEN_NORM)
    ok(at)
    assert len(charts(at)) == 1  # statistics; one token and figure 5 wait for the reveal
    at = revealed(at)
    assert len(charts(at)) == 3
    assert at.radio(key="norm").value == "ln1" and at.radio(key="layer").value == 0
    assert len(at.get("download_button")) == 1
    assert "12 tokens" in " ".join(c.value for c in at.caption)


def test_token_norm_statistics_table_shows_every_row(app, monkeypatch):
    """The table is as tall as its header and rows, so no inner scroll hides the last token (AppTest keeps no
    dataframe height: a spy on st.dataframe reads what the page asked for)."""
    heights = {}
    draw = st.dataframe

    def spy(data, *args, **kwargs):
        heights[kwargs.get("key")] = kwargs.get("height")
        return draw(data, *args, **kwargs)
    monkeypatch.setattr(st, "dataframe", spy)
    at = app(TOKEN_NORM)
    ok(at)
    rows = len(at.dataframe[0].value)
    assert rows == 12 and heights["stats_table"] >= STREAMLIT_ROW_PX * (rows + 1) + 2  # header, rows, border


def test_token_norm_page_follows_layer_site_token_and_notation(app):
    at = revealed(app(TOKEN_NORM))
    before = figure(charts(at)[1])
    at.radio(key="layer").set_value(1).run()
    ok(at)
    assert figure(charts(at)[1]) != before
    at.radio(key="norm").set_value("ln_final").run()
    ok(at)
    assert at.radio(key="layer").disabled and "ln_final" in " ".join(c.value for c in at.caption)
    at.selectbox(key="token").set_value(3).run()
    at.sidebar.radio(key="notation").set_value("paper").run()
    ok(at)
    assert "Paper notation" in " ".join(c.value for c in at.caption)
    at.text_area(key="text").set_value("mary found the key").run()
    ok(at)
    assert "5 tokens" in " ".join(c.value for c in at.caption)


def test_token_norm_page_on_a_post_ln_model_has_no_final_norm(app):
    at = app(TOKEN_NORM, model="post-ln")
    ok(at)
    assert at.radio(key="norm").options == ["ln1", "ln2"]
    assert any("post-LN" in info.value for info in at.info)


def test_token_norm_page_reads_the_url(app):
    at = revealed(app(TOKEN_NORM, layer="L1", norm="ln2", token="2: keys", feature="5"))
    ok(at)
    assert (at.radio(key="layer").value, at.radio(key="norm").value, at.selectbox(key="token").value,
            at.number_input(key="feature").value) == (1, "ln2", 2, 5)
    at = app(TOKEN_NORM, layer="L9", norm="nonsense", token="99: x", feature="999")  # out of range: the nearest
    ok(at)                                                                           # valid one; invalid: default
    notes = [info for info in at.info if "out of range" in info.value]
    at = revealed(at)  # the feature to outline is drawn with figure 5, after Reveal
    notes += [info for info in at.info if "out of range" in info.value]
    ok(at)
    assert (at.radio(key="layer").value, at.radio(key="norm").value, at.selectbox(key="token").value,
            at.number_input(key="feature").value) == (1, "ln1", 11, 31)
    assert len(notes) == 3, [note.value for note in notes]


@pytest.mark.parametrize("page", [TOKEN_NORM, RESIDUAL])
@pytest.mark.parametrize("text", ["", "   \n"])
def test_empty_text_shows_an_error_not_an_exception(app, page, text):
    at = app(page)
    at.text_area(key="text").set_value(text).run()
    assert not at.exception
    assert at.error and "empty" in at.error[0].value
    assert not charts(at)


# ---------------------------------------------------------------------------------------------------------
# Residual stream page
# ---------------------------------------------------------------------------------------------------------

def test_residual_page_renders_and_shows_the_sum_is_exact(app):
    at = app(RESIDUAL)
    ok(at)
    assert len(charts(at)) == 4  # norms, contributions, logit lens, prediction
    difference = next(m for m in at.metric if "Σ parts" in m.label)
    assert float(difference.value) < 1e-4
    assert len(at.get("download_button")) == 2


def test_residual_page_temperature_and_position_change_the_prediction(app):
    at = app(RESIDUAL)
    before = figure(charts(at)[-1])
    at.slider(key="temperature").set_value(0.0).run()
    ok(at)
    after = figure(charts(at)[-1])
    assert after != before and shows(after, "T = 0")
    at.selectbox(key="position").set_value(2).run()
    ok(at)
    assert figure(charts(at)[-1]) != after
    at.text_area(key="text").set_value("mary found the key").run()
    ok(at)
    assert len(charts(at)) == 4


def test_residual_page_reads_the_url(app):
    at = app(RESIDUAL, temperature="0.5", top_k="3", position="2: keys")
    ok(at)
    assert (at.slider(key="temperature").value, at.slider(key="top_k").value,
            at.selectbox(key="position").value) == (0.5, 3, 2)


def test_residual_page_on_post_ln_and_masked_token_models(app):
    at = app(RESIDUAL, model="post-ln")
    ok(at)
    assert any("post-LN" in info.value for info in at.info)
    assert len(charts(at)) == 3  # no decomposition chart
    at = app(RESIDUAL, model="mlm-learned")
    ok(at)
    assert shows(figure(charts(at)[-1]), "masked token")


# ---------------------------------------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------------------------------------

def test_figure_5_view_shows_x_transposed_in_paper_notation():
    x = np.random.default_rng(0).normal(size=(5, 8))
    token, batch = tokennorm_statistics(x), batchnorm_statistics(x)
    tokens = ["[BOS]", "a", "b", "a", "c"]
    common = norm_axes_figure(token.normalized, batch.normalized, token.mean, batch.mean, tokens)
    paper = norm_axes_figure(token.normalized, batch.normalized, token.mean, batch.mean, tokens, notation="paper",
                             selected_token=2)
    assert np.asarray(common.data[0].z).shape == (5, 8) and np.asarray(paper.data[0].z).shape == (8, 5)
    token_box = paper.layout.shapes[0]
    assert (token_box.x0, token_box.x1) == (1.5, 2.5)  # paper: the token is a column
    with pytest.raises(ValueError):
        norm_axes_figure(token.normalized, batch.normalized, token.mean, batch.mean, tokens, notation="rows")


def _lens(n: int, guess: str, points: int = 3, scale: float = 1.0):
    probs = np.random.default_rng(1).random((points, n, 2))
    return logit_lens_heatmap(probs, [[[guess, "b"]] * n] * points, ["w"] * n, [f"p{m}" for m in range(points)],
                              font_scale=scale)


def test_logit_lens_figure_turns_when_the_guesses_do_not_fit_across():
    """Tokens run across while every guess fits its cell in the narrowest chart, in presenter mode's type when it is
    on; otherwise tokens run down the rows (issue 37: "strange" and "doctors" ran together as "strangedoctors")."""
    long = _lens(30, "strange")
    assert np.asarray(long.data[0].z).shape == (30, 3)
    assert len(set(long.data[0].y)) == 30  # repeated tokens stay apart (numbered labels)
    assert np.asarray(_lens(5, "strange").data[0].z).shape == (3, 5)  # five such guesses fit across
    presenter = _lens(5, "strange", scale=PRESENTER_SCALE)
    assert np.asarray(presenter.data[0].z).shape == (5, 3)  # not in presenter mode's larger type
    assert presenter.data[0].text[0][0] == "strange" and presenter.data[0].textfont.size == LENS_FONT
    assert presenter.layout.yaxis.title.text == "position n"  # a short title up the side of a few rows


def test_logit_lens_figure_shrinks_then_cuts_guesses_that_no_layout_fits():
    """Thirteen stream points (GPT-2) share the width: the type gets smaller, then a long guess is cut short; the
    hover still names it whole."""
    fig = _lens(12, "strangers", points=13, scale=PRESENTER_SCALE)
    heat = fig.data[0]
    assert heat.textfont.size == LENS_MIN_FONT and heat.text[0][0].endswith("…")
    assert len(heat.text[0][0]) < len("strangers") and "strangers" in heat.customdata[0][0]
    assert _lens(12, "a", points=13, scale=PRESENTER_SCALE).data[0].textfont.size == LENS_FONT
