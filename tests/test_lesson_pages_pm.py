"""The two lesson pages, "Position encodings" and "Masks & generation", under AppTest on tiny random models: every
control at least once, the URL read back, the "predict, then reveal" prompts, bad input as a message."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import as_shown, charts, drawn, figure, figures, ok, read_models_from, shows
from streamlit.testing.v1 import AppTest
from tiny_models import tiny_model

from core.figures.attention import plain_token_labels
from core.model.checkpoint import ModelCard, read_card, save_checkpoint
from core.model.registry import card_path
from core.model.run import text_tokenizer, tokenizer
from pages.ui.examples import PERMUTED
from pages.ui.text_input import DEFAULT_TEXT

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parent.parent
POSITIONS = str(ROOT / "pages" / "positions_lab.py")
MASKS = str(ROOT / "pages" / "masks_lab.py")
MODELS = {"lm-rope": dict(pos_encoding="rope"), "lm-learned": dict(pos_encoding="learned"),
          "lm-none": dict(pos_encoding="none"), "lm-alibi": dict(pos_encoding="alibi"),
          "lm-relative": dict(pos_encoding="relative"),
          "mlm-learned": dict(pos_encoding="learned", mask="none", head="masked_token")}


def write_models(directory: Path, names) -> Path:
    for seed, name in enumerate(names):
        model = tiny_model(seed=seed, **MODELS[name])
        task = "grammar-mlm" if name.startswith("mlm") else "grammar-lm"
        save_checkpoint(model, ModelCard(name, task, model.cfg, f"tiny random {name}"), directory)
    return directory


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    return write_models(tmp_path_factory.mktemp("models"), MODELS)


@pytest.fixture
def app(app):
    """The shared fixture with a longer time-out: these pages run many forward passes."""
    return lambda page, **params: app(page, timeout=90, **params)


def specs(at: AppTest) -> list[dict]:
    return figures(at)


def text_of(elements) -> str:
    return " ".join(element.value for element in elements)


def spec(at: AppTest, key: str) -> dict:
    """The figure of the chart drawn under this key."""
    return next(figure(chart) for chart in charts(at) if chart.proto.id.endswith(key))


def reveal(at: AppTest, key: str, answer=None) -> AppTest:
    if answer is not None:
        at.radio(key=key).set_value(answer).run()
    return at.button(key=f"{key}__reveal").click().run()


# ---------------------------------------------------------------------------------------------------------
# Position encodings
# ---------------------------------------------------------------------------------------------------------

def test_positions_page_renders_every_section(app):
    at = app(POSITIONS)
    ok(at)
    assert at.title[0].value == "Position encodings"
    assert len(specs(at)) == 3  # table, biases, biases by offset; the similarity and RoPE pair wait for a reveal
    assert at.radio(key="encoding").options == ["sinusoidal", "rope"]  # lm-rope has no learned table
    assert [b.key for b in at.button] == ["predict_similar__reveal", "predict_length__reveal",
                                          "predict_no_mask__reveal", "predict_causal__reveal",
                                          "predict_extrapolation__reveal"]
    at = reveal(reveal(at, "predict_similar"), "predict_length")
    assert "max |R(nθ)·before − after|" in text_of(at.caption)
    similarity = spec(at, "similarity_chart")["data"][0]  # sinusoidal: all positive, so one sequential scale
    assert similarity["zmin"] > 0 and "Every value here is positive" in text_of(at.caption)
    assert "blue: opposed" not in text_of(at.caption)


def test_positions_tables_follow_encoding_positions_and_reveal_the_neighbours(app):
    at = app(POSITIONS, model="lm-learned")
    assert at.radio(key="encoding").options == ["sinusoidal", "learned", "rope"]
    before = specs(at)[:2]
    at.radio(key="encoding").set_value("learned").run()
    ok(at)
    assert specs(at)[0] != before[0] and "trained position embedding" in text_of(at.caption)
    at.radio(key="encoding").set_value("sinusoidal")
    at.slider(key="positions").set_value(20)
    at.slider(key="similar_to").set_value(5).run()
    ok(at)
    at = reveal(at, "predict_similar", "its neighbours")
    ok(at)
    assert "the positions most like **5** are **4, 6" in text_of(at.markdown) or \
        "the positions most like **5** are **6, 4" in text_of(at.markdown)
    assert len(specs(at)) == 5  # the similarity matrix and its row appear


def test_positions_rope_controls_and_the_length_reveal(app):
    at = app(POSITIONS)
    at = reveal(at, "predict_length", "the same length")
    ok(at)
    assert "**Right.**" in text_of(at.markdown) and "max |R(nθ)·before − after|" in text_of(at.caption)
    before = spec(at, "rope_chart")
    at.selectbox(key="rope_layer").set_value(1)
    at.selectbox(key="rope_head").set_value(1)
    at.slider(key="rope_pair").set_value(3)
    at.radio(key="rope_which").set_value("k").run()
    ok(at)
    assert not drawn(at, "rope_chart")  # another question, hidden again
    at = reveal(at, "predict_length")
    assert spec(at, "rope_chart") != before and shows(spec(at, "rope_chart"), "pair 3")
    at.text_area(key="text").set_value("mary found the key").run()
    ok(at)


def test_positions_empty_text_is_an_error_and_the_other_sections_still_run(app):
    at = app(POSITIONS)
    at.text_area(key="text").set_value("  ").run()
    assert not at.exception
    assert "empty" in at.error[0].value
    assert len(specs(at)) == 3  # the table and the biases (the similarity waits for its reveal)


def test_positions_biases_alibi_and_relative(app):
    at = app(POSITIONS)
    assert at.selectbox(key="bias_layer").disabled and "ALiBi (Press et al.)" in text_of(at.caption)
    at.slider(key="bias_positions").set_value(8).run()
    at.radio(key="bias").set_value("relative").run()
    ok(at)
    caption = "The trained biases of **lm-relative**, layer 0 (the sidebar model, lm-rope, has none)"
    assert caption in text_of(at.caption)
    before = spec(at, "bias_chart")
    at.selectbox(key="bias_layer").set_value(1).run()
    ok(at)
    assert spec(at, "bias_chart") != before


def test_positions_without_a_relative_model_says_so(tmp_path, monkeypatch):
    read_models_from(monkeypatch, write_models(tmp_path, ["lm-rope"]))
    at = AppTest.from_file(POSITIONS, default_timeout=90)
    at.query_params["bias"] = "relative"
    at.run()
    ok(at)
    assert "No bundled model was trained with relative" in text_of(at.info)


def test_positions_permutation_reveals(app):
    at = app(POSITIONS)
    at = reveal(at, "predict_no_mask", "yes, the same")
    ok(at)
    assert "are the same up to permutation" in text_of(at.markdown) and "**Right.**" in text_of(at.markdown)
    grid = spec(at, "permutation_no_mask_chart")
    assert shows(grid, "no mask · no position encoding: same up to permutation") and not shows(grid, "causal")
    at = reveal(at, "predict_causal", "yes, the representations differ")
    ok(at)
    assert "the mask itself leaks position" in text_of(at.markdown)
    grid = spec(at, "permutation_chart")
    assert shows(grid, "causal mask · no position encoding: differs") and shows(grid, "rope: differs")
    assert not shows(grid, "no mask")


def test_positions_permutation_on_a_model_without_an_encoding_and_bad_input(app):
    at = app(POSITIONS, model="lm-none")
    at = reveal(at, "predict_causal")
    ok(at)
    assert shows(spec(at, "permutation_chart"), "sinusoidal (switched on: not trained with it)")
    at.text_input(key="perm_b").set_value(PERMUTED[0]).run()  # text A's order: nothing differs
    ok(at)
    assert not drawn(at, "permutation_chart")  # other texts: asked afresh
    at = reveal(at, "predict_causal")
    assert "these two texts are in the same order" in text_of(at.markdown)
    at.text_input(key="perm_b").set_value("The cat sees a dog.").run()  # "a" for "the": other tokens
    assert not at.exception
    assert "same tokens" in at.error[0].value
    at.text_input(key="perm_a").set_value("").run()
    assert "empty" in at.error[0].value


def test_positions_page_reads_the_url_and_presenter_mode(app):
    at = app(POSITIONS, model="mlm-learned", encoding="learned", positions="16", rope_pair="2", bias_positions="6")
    ok(at)
    assert (at.radio(key="encoding").value, at.slider(key="positions").value, at.slider(key="rope_pair").value,
            at.slider(key="bias_positions").value) == ("learned", 16, 2, 6)
    assert "switched on instead (an ablation)" in text_of(at.info)  # a learned model shows RoPE as an ablation
    at.session_state["presenter"] = True  # the toggle itself is app.py's (tests/test_browser_layout.py)
    at.run()
    ok(at)


# ---------------------------------------------------------------------------------------------------------
# Masks & generation
# ---------------------------------------------------------------------------------------------------------

def mask_grids(at: AppTest) -> list:
    return [element for element in at.main if getattr(element, "type", "") == "vega_lite_chart"]


def test_masks_page_renders_the_editor_and_generation(app):
    at = app(MASKS)
    ok(at)
    assert at.title[0].value == "Masks & generation"
    assert len(mask_grids(at)) == 1
    assert len(specs(at)) == 3  # the model under the mask, attention while generating, the last step's choice
    choice = specs(at)[2]["data"]  # greedy by default: the argmax taken, nothing sampled
    assert len(choice) == 1 and "greedy" in choice[0]["name"] and "sampled from" not in choice[0]["name"]
    assert "0 cells switched from the causal preset" in text_of(at.caption)
    assert [b.key for b in at.button] == ["predict_empty_row__reveal", "predict_incremental__reveal",
                                          "predict_cache__reveal"]


@pytest.fixture(scope="module")
def causal_pattern(models_dir) -> str:
    """The masked-pattern chart of the default page (the causal preset)."""
    with pytest.MonkeyPatch.context() as patch:
        read_models_from(patch, models_dir)
        return specs(AppTest.from_file(MASKS, default_timeout=90).run())[0]


@pytest.mark.parametrize("preset, controls", [
    ("window", dict(width=2)), ("strided", dict(stride=3)), ("block-sparse", dict(width=3)),
    ("random", dict(density=0.5, mask_seed=7)), ("none", {})])
def test_every_preset_runs_the_model_under_its_mask(app, causal_pattern, preset, controls):
    at = app(MASKS, n_new="2")
    at.selectbox(key="preset").set_value(preset).run()
    for key, value in controls.items():  # set together, run once
        (at.slider(key=key) if key == "density" else at.number_input(key=key)).set_value(value)
    at.run()
    ok(at)
    assert specs(at)[0] != causal_pattern
    sees_later = "can now read the token it is meant to predict" in text_of(at.info)
    assert sees_later == (preset == "none")
    if preset in ("window", "block-sparse", "random"):
        at.toggle(key="causal").set_value(False).run()
        ok(at)
        assert "can now read the token it is meant to predict" in text_of(at.info)


def test_switched_cells_change_the_pattern_and_an_empty_row_is_warned(app, causal_pattern):
    at = app(MASKS, cells="3:1", n_new="2")
    ok(at)
    assert specs(at)[0] != causal_pattern and "1 cell switched" in text_of(at.caption)
    at.text_input(key="cells").set_value("1:0 1:1").run()
    ok(at)
    assert f"Query 1 ({DEFAULT_TEXT.split()[0]}) may attend to **no key**" in at.warning[0].value
    assert not drawn(at, "masked_pattern_chart")  # it would answer the prompt
    at = reveal(at, "predict_empty_row", "all zeros")
    assert "gets a row summing to **0**" in text_of(at.markdown) and "**Right.**" in text_of(at.markdown)
    assert "its attention row is all zeros" in at.warning[0].value
    at.text_input(key="cells").set_value("3-1").run()
    assert not at.exception and "'3-1' is not a cell: write query:key" in as_shown(at.error[0].value)
    assert len(specs(at)) == 4  # a bad edit is ignored, the preset still runs (and the reveal empties a row itself)


def test_masks_layer_and_head_choose_the_pattern(app):
    at = app(MASKS, n_new="2")
    at.selectbox(key="layer").set_value(1)
    at.selectbox(key="head").set_value(1).run()
    ok(at)
    assert shows(specs(at)[0], "L1 H1") and not shows(specs(at)[0], "L0 H0")


def test_the_incremental_reveal_follows_the_mask(app):
    at = app(MASKS, n_new="2")
    at = reveal(at, "predict_incremental", "none")
    ok(at)
    assert "**0 of the 11 earlier tokens**" in text_of(at.markdown)
    at.selectbox(key="preset").set_value("none").run()
    ok(at)
    assert "**11 of the 11 earlier tokens**" in text_of(at.markdown)
    assert shows(specs(at)[1], "incremental") or shows(specs(at)[1], "appended")


def test_generation_controls(app):
    at = app(MASKS)
    assert at.slider(key="temperature").disabled
    at.slider(key="n_new").set_value(5).run()
    before = specs(at)[1:]
    at.radio(key="decoding").set_value("sampled").run()  # the sampling controls are disabled until then
    at.slider(key="temperature").set_value(1.5)
    at.number_input(key="top_k").set_value(10)
    at.slider(key="top_p").set_value(0.9)
    at.number_input(key="sample_seed").set_value(3).run()
    ok(at)
    assert not at.slider(key="temperature").disabled
    assert specs(at)[1:] != before and "T = 1.5, top-k 10, top-p 0.9, seed 3" in text_of(at.markdown)
    at.slider(key="step").set_value(2)
    at.radio(key="gen_layer").set_value(1)
    at.radio(key="gen_head").set_value(1).run()
    ok(at)
    assert "**Step 2:**" in text_of(at.markdown) and shows(specs(at)[1], "L1 H1")
    at.slider(key="step").set_value(0).run()
    ok(at)
    assert "Move the step slider" in text_of(at.info) and len(specs(at)) == 2
    at.text_input(key="prompt").set_value("mary found").run()
    ok(at)


def test_the_cache_reveal_shows_the_check(app):
    at = app(MASKS)
    at = reveal(at, "predict_cache", "the same up to rounding")
    ok(at)
    metrics = {m.label: m.value for m in at.metric}
    assert float(metrics["max |Δ logits|"]) < 1e-4 and float(metrics["max |Δ attention weight|"]) < 1e-4
    assert metrics["same greedy tokens"] == "yes"


def test_masks_page_bad_input_and_a_masked_token_model(app):
    at = app(MASKS)
    at.text_area(key="text").set_value("").run()
    assert not at.exception and "empty" in at.error[0].value
    at.text_area(key="text").set_value(" ".join(["the"] * 40)).run()
    assert not at.exception and "the mask editor takes up to 32" in at.error[0].value
    at.text_input(key="prompt").set_value(" ".join(["the"] * 70)).run()
    assert not at.exception and any("context length" in e.value for e in at.error)
    at = app(MASKS, model="mlm-learned")
    ok(at)
    assert "does not generate" in text_of(at.info)


def test_masks_page_reads_the_url(app):
    at = app(MASKS, preset="random", density="0.5", mask_seed="4", causal="false", cells="2:0", decoding="sampled",
             temperature="0.7", top_k="5", step="3", n_new="6")
    ok(at)
    assert (at.selectbox(key="preset").value, at.slider(key="density").value, at.number_input(key="mask_seed").value,
            at.toggle(key="causal").value, at.text_input(key="cells").value) == ("random", 0.5, 4, False, "2:0")
    assert (at.radio(key="decoding").value, at.slider(key="temperature").value, at.number_input(key="top_k").value,
            at.slider(key="step").value) == ("sampled", 0.7, 5, 3)


# ---------------------------------------------------------------------------------------------------------
# Both pages on a model of broad English
# ---------------------------------------------------------------------------------------------------------

def test_both_pages_read_a_text_with_the_models_own_pieces(monkeypatch):
    """A byte-level BPE model reads "the cat" as [BOS] t he ␣cat, where the grammar's tokenizer reads three tokens:
    the mask editor's grid and the permutation test take the sidebar model's own pieces (the grid had the grammar's
    three, and the model refused its 3 × 3 mask)."""
    monkeypatch.delenv("ATTENTION_LAB_MODELS_DIR", raising=False)  # the bundled models: english-lm among them
    tok = text_tokenizer(read_card(card_path("english-lm")))
    pieces = tok.encode("the cat").tokens
    assert len(pieces) != len(tokenizer().encode("the cat").tokens)
    masks = AppTest.from_file(MASKS, default_timeout=90)
    masks.query_params.update(model="english-lm", text="the cat")
    masks.run()
    ok(masks)
    assert spec(masks, "masked_pattern_chart")["labels"] == plain_token_labels(pieces)
    positions = AppTest.from_file(POSITIONS, default_timeout=90)
    positions.query_params["model"] = "english-lm"
    positions = reveal(positions.run(), "predict_no_mask")
    ok(positions)
    grid = spec(positions, "permutation_no_mask_chart")
    shown = [label.split(":", 1)[1] for label in grid["data"][0]["x"]]  # "3:␣cat"
    assert shown == plain_token_labels(tok.encode(positions.text_input(key="perm_b").value).tokens)
