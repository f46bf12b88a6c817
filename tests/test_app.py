"""AppTest of the text explorer page (pages/text_explorer.py) on small random-weight models.

The models are built into a temporary folder (ATTENTION_LAB_MODELS_DIR), so the test neither waits for nor
depends on the bundled models' training."""

from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import read_models_from
from streamlit.testing.v1 import AppTest

from core.figures.attention import HEAD_VIEW_TOKENS
from core.model.checkpoint import ModelCard, save_checkpoint
from core.model.config import ModelConfig
from core.model.run import MAX_TEXT_CHARS, encode_text, fitting_start, tokenizer
from core.model.transformer import Transformer
from pages.ui.text_input import DEFAULT_TEXT

ROOT = Path(__file__).resolve().parent.parent
PAGE = str(ROOT / "pages" / "text_explorer.py")
TIMEOUT = 60


def build_models(directory: Path) -> Path:
    """lm-rope (the default), lm-none, lm-sinusoidal and mlm-learned with random weights: M=2, H=2, D=32."""
    vocab = tokenizer().vocab_size
    torch.manual_seed(0)
    base = ModelConfig(d_model=32, n_heads=2, n_layers=2, d_mlp=64, max_len=64, vocab_size=vocab)
    for name, task, changes in (("lm-rope", "grammar-lm", dict(pos_encoding="rope")),
                                ("lm-none", "grammar-lm", dict(pos_encoding="none")),
                                ("lm-sinusoidal", "grammar-lm", dict(pos_encoding="sinusoidal")),
                                ("mlm-learned", "grammar-mlm", dict(pos_encoding="learned", mask="none",
                                                                    head="masked_token"))):
        cfg = base.replace(**changes)
        save_checkpoint(Transformer(cfg), ModelCard(name, task, cfg, f"test model {name}"), directory)
    return directory


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    return build_models(tmp_path_factory.mktemp("models"))


@pytest.fixture
def app(models, monkeypatch) -> AppTest:
    read_models_from(monkeypatch, models)
    at = AppTest.from_file(PAGE, default_timeout=TIMEOUT)
    at.run()
    assert_ok(at)
    return at


def assert_ok(at: AppTest, errors: bool = False) -> None:
    assert not at.exception, [e.value for e in at.exception]
    if not errors:
        assert not at.error, [e.value for e in at.error]
        assert charts(at), "no chart drawn"


def charts(at: AppTest) -> int:
    """Charts on the page: plotly charts and the canvas heatmaps (pages/ui/heatmap.py)."""
    return len(at.get("plotly_chart")) + len(at.get("bidi_component"))


def heatmap_spec(at: AppTest, key: str) -> dict:
    """What the canvas heatmap with this key was sent, unpacked (core.figures.canvas.unpack)."""
    from core.figures.canvas import unpack

    chart = next(c for c in at.get("bidi_component") if c.proto.id.endswith(key))
    assert chart.proto.component_name == "attention_lab.heatmap"
    return unpack(chart.proto.bytes)


# the default tab, "Attention pattern": the chosen head (the other tabs, "All heads" too, are lazy: not drawn)
CHARTS = 1
CHARTS_COMPARED = 3  # A, B and B - A instead of the one head


def open_view(at: AppTest, view: str) -> AppTest:
    """Open one of the page's tabs (URL key `view`) and rerun."""
    at.session_state["view"] = view
    return at.run()


def summary_table(at: AppTest):
    return next(frame for frame in at.dataframe if len(frame.value) == 4 and "entropy (bits)" in frame.value)


def test_page_renders_head_overview_and_summaries(app):
    assert charts(app) == CHARTS
    assert [tab.label for tab in app.tabs] == ["Attention pattern", "All heads", "One score, step by step", "Head view",
                                               "Rollout", "Head summaries"]
    assert app.text_area(key="text").value == DEFAULT_TEXT
    assert app.selectbox(key="model").value == "lm-rope"
    assert not any("entropy (bits)" in frame.value for frame in app.dataframe)  # a closed tab does not run
    open_view(app, "Head summaries")
    assert_ok(app, errors=True)
    assert charts(app) == 0
    assert len(summary_table(app).value) == 4  # M=2 x H=2 heads
    assert "12 tokens" in " ".join(m.value for m in app.markdown)


def test_all_heads_tab_draws_every_head_and_opens_the_one_picked(app):
    open_view(app, "All heads")
    assert_ok(app)
    assert charts(app) == 1
    from pages.ui.store import Setting, get_recording

    spec = heatmap_spec(app, "overview_chart")
    assert spec["tiles"] == {"layers": 2, "heads": 2, "size": 12, "selected": [0, 0]}  # L0 H0, chosen above
    patterns = get_recording(Setting("lm-rope"), app.text_area(key="text").value).patterns()  # [M, H, N, N]
    tiled = patterns.transpose(0, 2, 1, 3).reshape(2 * 12, 2 * 12)  # layers down, heads across
    np.testing.assert_array_equal(spec["arrays"]["weight"], np.rint(tiled * 100))  # whole per cents
    assert spec["labels"][0] == "0: [BOS]" and spec["arrays"]["masked"].shape == (12, 12)
    app.pills(key="open_head").set_value("L1 H1").run()
    assert_ok(app)
    assert app.radio(key="layer").value == 1 and app.radio(key="head").value == 1
    assert app.session_state["view"] == "Attention pattern"
    assert [c.proto.id.endswith("head_chart") for c in app.get("bidi_component")] == [True]
    assert not app.get("plotly_chart")


def test_head_chart_shows_the_recorded_weights_and_scores_exactly(app):
    """The canvas heatmap is sent the recording's own float32 numbers, oriented by the notation, with the masked
    cells those whose score is -inf."""
    from pages.ui.store import Setting, get_recording

    recording = get_recording(Setting("lm-rope"), app.text_area(key="text").value)
    for notation, orient in (("common", lambda m: m), ("paper", np.transpose)):
        app.radio(key="notation").set_value(notation).run()
        app.radio(key="layer").set_value(1).run()
        assert_ok(app)
        spec = heatmap_spec(app, "head_chart")
        pattern, scores = recording.pattern(1)[0], recording.scores(1)[0]
        np.testing.assert_array_equal(spec["arrays"]["weight"], orient(pattern))
        np.testing.assert_array_equal(spec["arrays"]["score"], orient(scores))
        np.testing.assert_array_equal(spec["arrays"]["masked"].astype(bool), orient(np.isneginf(scores)))
        assert spec["arrays"]["masked"].any() and (spec["arrays"]["weight"][spec["arrays"]["masked"] == 1] == 0).all()
        assert spec["row_role"] == ("key" if notation == "paper" else "query")
        assert spec["labels"][0] == "[BOS]" and len(spec["labels"]) == 12
        assert spec["filename"] == f"lm-rope_pattern_L1_H0_{notation}"


def test_head_chart_in_presenter_mode_and_the_title_its_png_carries(app):
    spec = heatmap_spec(app, "head_chart")
    assert spec["font_scale"] == 1 and spec["png_title"] == "Layer 0, head 0 · lm-rope · mask causal (own) · encoding rope (own)"
    app.session_state["presenter"] = True  # the toggle itself is app.py's (tests/test_browser_layout.py)
    app.run()
    assert_ok(app)
    assert heatmap_spec(app, "head_chart")["font_scale"] == pytest.approx(20 / 12)  # as the plotly charts' 20 px


def running_caption(at: AppTest) -> str:
    return next(c.value for c in at.caption if c.value.startswith("Running:"))


def test_running_caption_names_the_mask_and_the_encoding_once(app):
    assert running_caption(app) == "Running: lm-rope · mask causal (own) · encoding rope (own)"
    app.selectbox(key="mask").select("none").run()
    app.selectbox(key="pe").select("sinusoidal").run()
    assert_ok(app)
    caption = running_caption(app)
    assert caption == "Running: lm-rope · mask none · encoding sinusoidal"
    assert caption.count("mask") == caption.count("encoding") == 1


def test_typing_text_updates_the_tokens(app):
    app.text_area(key="text").input("the dog runs .").run()
    assert_ok(app)
    assert "5 tokens" in " ".join(m.value for m in app.markdown)


@pytest.mark.parametrize("kind, extra", [("none", None), ("causal", None), ("window", ("window", 2)),
                                         ("strided", ("stride", 3))])
def test_mask_ablations(app, kind, extra):
    app.selectbox(key="mask").select(kind).run()
    assert_ok(app)
    if extra:
        key, value = extra
        app.number_input(key=key).set_value(value).run()
        assert_ok(app)
        assert f"{kind}({value}" in " ".join(c.value for c in app.caption)


def test_a_toggle_and_back_reuses_the_shared_recording(app):
    """Recordings live in one store for the process (pages/ui/store.py): toggling back finds the very same object,
    nothing pickled or copied."""
    from pages.ui.store import Setting, get_recording

    text = app.text_area(key="text").value
    first = get_recording(Setting("lm-rope"), text)
    app.selectbox(key="mask").select("none").run()
    app.selectbox(key="mask").select("own").run()
    assert_ok(app)
    assert get_recording(Setting("lm-rope"), text) is first


def test_position_encoding_ablation_offers_only_runnable_encodings(app):
    options = app.selectbox(key="pe").options
    assert "learned" not in " ".join(options) and "relative" not in " ".join(options)
    app.selectbox(key="pe").select("none").run()
    assert_ok(app)
    assert "encoding none" in " ".join(c.value for c in app.caption)


def test_trained_model_mode_switches_to_the_bundled_model(app):
    app.radio(key="apply").set_value("trained model").run()
    app.selectbox(key="pe").select("sinusoidal").run()
    assert_ok(app)
    assert "lm-sinusoidal" in " ".join(i.value for i in app.info)
    app.selectbox(key="mask").select("window").run()  # no model trained with both: lm-sinusoidal, window ablated
    assert_ok(app)
    notes = [i.value for i in app.info if i.value.startswith(("Showing", "No bundled"))]
    assert len(notes) == 1 and notes[0].startswith("Showing **lm-sinusoidal**") and "mask window" in notes[0]


def test_compare_mode_shows_both_settings_and_their_difference(app):
    app.toggle(key="compare").set_value(True).run()
    assert_ok(app)
    assert charts(app) == CHARTS and app.info  # same setting twice: asks for another
    app.selectbox(key="mask").select("none").run()
    assert_ok(app)
    assert charts(app) == CHARTS_COMPARED
    a, b, diff = (heatmap_spec(app, key) for key in ("head_chart_a", "head_chart", "diff_chart"))
    assert a["arrays"]["masked"].any() and not b["arrays"]["masked"].any()  # causal against no mask
    assert (diff["arrays"]["diff"] == b["arrays"]["weight"] - a["arrays"]["weight"]).all()
    assert not diff["arrays"]["masked"].any()  # grey only where both hide the key
    assert diff["zmin"] == -diff["zmax"] == -float(abs(diff["arrays"]["diff"]).max())


def test_notation_switch_and_head_choice(app):
    app.radio(key="notation").set_value("paper").run()
    assert_ok(app)
    assert "each column sums to 1" in " ".join(c.value for c in app.caption)
    app.radio(key="layer").set_value(1).run()
    app.radio(key="head").set_value(1).run()
    assert_ok(app)
    assert app.radio(key="layer").value == 1 and app.radio(key="head").value == 1


def test_switching_model_in_the_sidebar(app):
    app.selectbox(key="model").select("mlm-learned").run()
    assert_ok(app)
    assert "mask none" in " ".join(c.value for c in app.caption)


@pytest.mark.parametrize("text, needle", [("", "empty"), ("   \n\t", "empty"), ("the dog " * 12_500, "characters"),
                                          ("the dog runs . " * 40, "context length")])
def test_bad_text_gives_an_error_and_keeps_the_text(app, text, needle):
    app.text_area(key="text").input(text).run()
    assert_ok(app, errors=True)
    assert len(app.error) == 1 and needle in app.error[0].value
    assert app.text_area(key="text").value == text
    assert charts(app) == 0


def test_fitting_start_keeps_the_most_whole_words_that_fit():
    text = "the dog runs . " * 40
    start = fitting_start(text, 64)
    assert text.startswith(start) and len(encode_text(start, 64)[0]) <= 64
    longer = text[:text.index(" ", len(start) + 1)]  # one word more
    assert longer.split() == start.split() + [text.split()[len(start.split())]]
    assert len(tokenizer().encode(longer).ids) > 64
    assert fitting_start("the dog runs .", 64) == "the dog runs ."  # it fits: nothing to cut
    assert fitting_start("", 64) is None and fitting_start("the dog", 1) is None  # empty; not even one word fits
    huge = fitting_start("dog " * 12_500, 100_000)  # past MAX_TEXT_CHARS: the start that the length check allows
    assert huge is not None and len(huge) <= MAX_TEXT_CHARS and huge.endswith("dog")


@pytest.mark.parametrize("text", ["the dog runs . " * 400, "the dog " * 12_500])  # 1,600 words; 100,000 characters
def test_a_text_refused_for_its_length_offers_to_keep_the_first_part_that_fits(app, text):
    app.text_area(key="text").input(text).run()
    assert_ok(app, errors=True)
    assert len(app.error) == 1 and "shorten it" in app.error[0].value
    app.button(key="keep_start").click().run()
    assert_ok(app)
    kept = app.text_area(key="text").value
    assert text.startswith(kept) and len(kept.split()) > 10 and not kept.endswith(" ")
    assert len(encode_text(kept, 64)[0]) <= 64 and app.query_params["text"] == kept  # the link keeps it too


def test_a_text_refused_for_something_else_offers_no_cut(app):
    app.text_area(key="text").input("   ").run()
    assert_ok(app, errors=True)
    assert "empty" in app.error[0].value and not [b for b in app.button if b.key == "keep_start"]


@pytest.mark.parametrize("text", ["the dog 🐶 runs 🎉 .", "שלום the cat مرحبا .", "the\x07 dog\x1b[31m runs\u202e ."
                                  "\u200b", "<br> <b>bold</b> & \"quotes\" ."])
def test_emoji_rtl_and_control_characters(app, text):
    app.text_area(key="text").input(text).run()
    assert_ok(app)
    assert app.warning  # unknown tokens are flagged


def test_unknown_words_are_named_literally_and_the_known_words_listed(app):
    app.text_area(key="text").input("the zebra *runs* [x](y) .").run()
    assert_ok(app)
    warning = app.warning[0].value
    assert ": zebra, " in warning and "\\*" in warning and "*runs*" not in warning and "[x](y)" not in warning
    expander = next(e for e in app.expander if e.label.startswith("Words the model knows"))
    listed = " ".join(m.value for m in expander.markdown)
    assert "**nouns, plural**" in listed and "cabinets" in listed and "zebra" not in listed
    assert "**symbols of the reversal, copy and sort tasks**" in listed
    app.text_area(key="text").input("the dog runs .").run()
    assert not app.warning and not [e for e in app.expander if e.label.startswith("Words the model knows")]


# ---------------------------------------------------------------------------------------------------------
# The score breakdown, the head view, the rollout, PNG export, the download buttons
# ---------------------------------------------------------------------------------------------------------

def chart_spec(at: AppTest, key: str) -> dict:
    """The plotly figure (as JSON) of the chart with this key."""
    import json
    chart = next(c for c in at.get("plotly_chart") if c.proto.id.endswith(key))
    return json.loads(chart.proto.spec)


def markdown_text(at: AppTest) -> str:
    return " ".join(m.value for m in at.markdown)


def test_score_breakdown_shows_the_steps_and_matches_the_recording(app):
    open_view(app, "One score, step by step")
    assert charts(app) == 2  # the products and the softmax row
    assert app.selectbox(key="qk_query").value == 11  # the last token
    text = markdown_text(app)
    assert "rotated" in text  # lm-rope: the scores use the rotated q and k
    for step in ("dot product", "scaling", "position bias", "mask", "softmax"):
        assert step in text
    assert text.count("✓ equal") == 2 and "✗" not in text
    assert "hook_attn_scores" in text and "hook_pattern" in text
    vectors = next(frame for frame in app.dataframe if "q_i k_i" in frame.value)
    assert len(vectors.value) == 16  # K = D / H = 32 / 2
    assert "q_i before RoPE" in vectors.value


def test_score_breakdown_opens_on_the_key_the_head_weighs_most(app):
    """Not on [BOS], whose weight is often 0: on the heaviest key of the query's row, followed as the query and the
    head change, until a key is chosen."""
    from pages.ui.store import Setting, get_recording

    pattern = get_recording(Setting("lm-rope"), app.text_area(key="text").value).pattern

    def heaviest(layer: int, head: int, query: int) -> int:
        return int(np.argmax(pattern(layer)[head][query]))

    open_view(app, "One score, step by step")
    assert app.selectbox(key="qk_key").value == heaviest(0, 0, 11)
    weight = pattern(0)[0][11].max()
    assert f"**{weight:.4f}**" in markdown_text(app)  # the weight the chain ends on: the row's largest
    app.selectbox(key="qk_query").select(5).run()
    assert app.selectbox(key="qk_key").value == heaviest(0, 0, 5)
    app.radio(key="head").set_value(1).run()
    assert app.selectbox(key="qk_key").value == heaviest(0, 1, 5)
    chosen = next(k for k in range(6) if k != heaviest(0, 1, 5) and k != heaviest(1, 1, 5))
    app.selectbox(key="qk_key").select(chosen).run()
    app.radio(key="layer").set_value(1).run()
    assert_ok(app)
    assert app.selectbox(key="qk_key").value == chosen  # chosen: it stays


def test_score_breakdown_follows_query_key_and_head(app):
    open_view(app, "One score, step by step")
    app.selectbox(key="qk_query").select(3).run()
    app.selectbox(key="qk_key").select(7).run()  # after the query: masked by the causal mask
    assert_ok(app)
    text = markdown_text(app)
    assert "**masked**" in text and "−∞" in text and text.count("✓ equal") == 2
    assert "Query **3: to** and key **7: are** in layer 0, head 0" in text
    app.radio(key="layer").set_value(1).run()
    app.radio(key="head").set_value(1).run()
    app.selectbox(key="qk_key").select(2).run()
    assert_ok(app)
    text = markdown_text(app)
    assert "in layer 1, head 1" in text and "allowed" in text and text.count("✓ equal") == 2
    assert chart_spec(app, "qk_row_chart")["data"][0]["marker"]["color"][2] != \
        chart_spec(app, "qk_row_chart")["data"][0]["marker"]["color"][1]  # the chosen key stands out


def test_score_breakdown_without_rope_and_with_alibi(app):
    open_view(app, "One score, step by step")
    app.selectbox(key="pe").select("alibi").run()
    assert_ok(app)
    text = markdown_text(app)
    assert "rotated" not in text.split("q and k are")[1][:40] and "alibi" in text and text.count("✓ equal") == 2
    vectors = next(frame for frame in app.dataframe if "q_i k_i" in frame.value)
    assert "q_i before RoPE" not in vectors.value


def test_head_view_heads_and_token(app):
    open_view(app, "Head view")
    assert app.multiselect(key="lines_heads").value == [0, 1]
    assert [h["name"] for h in heatmap_spec(app, "lines_chart")["heads"]] == ["H0", "H1"]
    app.multiselect(key="lines_heads").set_value([1]).run()
    assert_ok(app)
    assert [h["name"] for h in heatmap_spec(app, "lines_chart")["heads"]] == ["H1"]
    app.selectbox(key="lines_token").select(4).run()
    app.radio(key="lines_layer").set_value(1).run()
    assert_ok(app)
    spec = heatmap_spec(app, "lines_chart")
    assert spec["title"].startswith("layer 1") and spec["marked"] == 4 and set(spec["arrays"]["band"][:, 0]) == {4}
    app.multiselect(key="lines_heads").set_value([]).run()
    assert not app.exception and not app.error and charts(app) == 0
    assert "Pick at least one head" in " ".join(i.value for i in app.info)


def test_head_view_of_a_long_text_draws_a_window_and_says_so(app):
    app.text_area(key="text").input("the dog runs . " * 14).run()  # 57 tokens with [BOS]: past the window
    open_view(app, "Head view")
    assert_ok(app)
    labels = heatmap_spec(app, "lines_chart")["labels"]
    assert len(labels) == 1 + HEAD_VIEW_TOKENS and labels[0].startswith("0:") and labels[1].startswith("1:")
    assert "A window of the text" in " ".join(c.value for c in app.caption)
    app.slider(key="lines_from").set_value(9).run()
    assert_ok(app)
    labels = heatmap_spec(app, "lines_chart")["labels"]
    assert labels[1].startswith("9:") and labels[-1].startswith(f"{8 + HEAD_VIEW_TOKENS}:")
    app.text_area(key="text").input("the dog runs .").run()
    assert_ok(app)
    assert not [s for s in app.slider if s.key == "lines_from"]  # a short text is drawn whole


def test_rollout_rows_sum_to_one_in_both_notations(app):
    open_view(app, "Rollout")
    assert "Each row sums to 1" in " ".join(c.value for c in app.caption)
    assert "from 1.000000 to 1.000000" in " ".join(c.value for c in app.caption)
    app.slider(key="rollout_residual").set_value(0.2).run()
    app.radio(key="notation").set_value("paper").run()
    assert_ok(app)
    assert "Each column sums to 1" in " ".join(c.value for c in app.caption)
    spec = heatmap_spec(app, "rollout_chart")
    assert "columns sum to 1" in spec["x_title"] and spec["row_role"] == "input token"
    np.testing.assert_allclose(spec["arrays"]["rollout"].sum(axis=0), 1, atol=1e-5)  # transposed: columns


def test_every_chart_offers_a_png_download_and_the_buttons_have_full_labels(app):
    import json
    for view in ("All heads", "One score, step by step", "Head view", "Rollout", "Attention pattern"):
        open_view(app, view)
        for chart in app.get("plotly_chart"):
            config = json.loads(chart.proto.config)
            assert config["displayModeBar"] is True and config["toImageButtonOptions"]["format"] == "png"
    assert heatmap_spec(app, "head_chart")["filename"] == "lm-rope_pattern_L0_H0_common"  # its PNG button's file
    assert "Download plot as a PNG" in " ".join(c.value for c in app.caption)
    labels = [button.proto.label for button in app.get("download_button")]
    assert labels == ["⬇ Download the recording (.npz)", "⬇ Download this pattern, L0 H0 (.csv)"]


def test_new_sections_in_compare_mode(app):
    app.toggle(key="compare").set_value(True).run()
    app.selectbox(key="mask").select("none").run()
    assert_ok(app)
    open_view(app, "One score, step by step")
    assert "head 0 of B" in markdown_text(app)
    app.selectbox(key="qk_query").select(2).run()
    app.selectbox(key="qk_key").select(9).run()  # no mask in B: a later key is allowed
    assert_ok(app)
    assert "allowed" in markdown_text(app) and markdown_text(app).count("✓ equal") == 2


def test_trained_alternative_prefers_the_same_task_and_context():
    from pages.ui.toggles import trained_alternative

    base = ModelConfig(d_model=32, n_heads=2, n_layers=2, d_mlp=64, max_len=64, vocab_size=50)
    cards = [ModelCard(name, task, base.replace(**changes), name) for name, task, changes in (
        ("lm-rope-long", "grammar-lm", dict(pos_encoding="rope", max_len=1024)),
        ("lm-rope", "grammar-lm", dict(pos_encoding="rope")),
        ("copy", "copy", dict(pos_encoding="rope")),
        ("lm-none", "grammar-lm", dict(pos_encoding="none")))]
    by_name = {card.name: card for card in cards}
    assert trained_alternative(cards, by_name["lm-none"], pe="rope").name == "lm-rope"
    assert trained_alternative(cards, by_name["lm-rope-long"], pe="none").name == "lm-none"
    assert trained_alternative(cards, by_name["lm-none"], pe="alibi") is None
    assert trained_alternative(cards, by_name["lm-none"]).name == "lm-none"  # no change asked: itself


def test_a_text_past_the_trained_length_is_marked_where_training_ended(tmp_path, monkeypatch):
    """A model trained on texts packed to 32 tokens with a context of 160 (as lm-rope-long: 512 of 1024): past 32
    tokens the page says so and the head's chart has its dashed line before token 32; within 32, neither. A long
    text's token list folds into an expander, a short one is listed above the charts."""
    directory = build_models(tmp_path)
    cfg = ModelConfig(d_model=32, n_heads=2, n_layers=2, d_mlp=64, max_len=160, vocab_size=tokenizer().vocab_size,
                      pos_encoding="rope")
    save_checkpoint(Transformer(cfg), ModelCard("lm-rope-long", "grammar-lm", cfg, "long", training={"pack": 32}),
                    directory)
    read_models_from(monkeypatch, directory)
    at = AppTest.from_file(PAGE, default_timeout=TIMEOUT)
    at.query_params.update(model="lm-rope-long", text="the dog runs . " * 37)  # 149 tokens with [BOS]
    at.run()
    assert_ok(at)
    assert "**149 tokens** (with \\[BOS\\] first), listed under *The tokens*." in [m.value for m in at.markdown]
    (listed,) = [e for e in at.expander if e.label == "The tokens"]
    assert listed.markdown[0].value.startswith("\\[BOS\\] the dog runs")
    (note,) = [box.value for box in at.info if "never saw in training" in box.value]
    assert "texts of 32 tokens" in note and "n = 32 on" in note
    assert heatmap_spec(at, "head_chart")["divider"]["at"] == 32
    at.text_area(key="text").input("the dog runs . " * 5).run()  # 21 tokens: all within training
    assert_ok(at)
    assert any(m.value.startswith("**21 tokens** (with \\[BOS\\] first): \\[BOS\\] the dog") for m in at.markdown)
    assert not [box for box in at.info if "never saw in training" in box.value]
    assert not [e for e in at.expander if e.label == "The tokens"]
    assert "divider" not in heatmap_spec(at, "head_chart")


def test_a_heatmap_message_carries_a_loader_and_the_server_serves_the_chart_code(app):
    """The 20 kB of assets/web/heatmap.js (and its style sheet) travel once by URL, not in every chart's message:
    the message's JS is a loader naming the file's served path and version (the browser tests draw through it)."""
    import hashlib

    from pages.ui.heatmap import ASSET, serve_web

    chart = next(c for c in app.get("bidi_component") if c.proto.id.endswith("head_chart"))
    loader, version = chart.proto.js_content, hashlib.sha256(ASSET.read_bytes()).hexdigest()[:12]
    assert len(loader) < 400 and not chart.proto.css_content
    assert f"/component/{serve_web()}/heatmap.js?v={version}" in loader and "import(" in loader
    assert "const STYLE" in ASSET.read_text() and "export default" in ASSET.read_text()
