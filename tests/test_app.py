"""AppTest of the text explorer page (pages/text_explorer.py) on small random-weight models.

The models are built into a temporary folder (ATTENTION_LAB_MODELS_DIR), so the test neither waits for nor
depends on the bundled models' training."""

from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest

from core.checkpoint import ModelCard, save_checkpoint
from core.config import ModelConfig
from core.model import Transformer
from core.record import tokenizer

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
    monkeypatch.setenv("ATTENTION_LAB_MODELS_DIR", str(models))
    at = AppTest.from_file(PAGE, default_timeout=TIMEOUT)
    at.run()
    assert_ok(at)
    return at


def assert_ok(at: AppTest, errors: bool = False) -> None:
    assert not at.exception, [e.value for e in at.exception]
    if not errors:
        assert not at.error, [e.value for e in at.error]
        assert at.get("plotly_chart"), "no chart drawn"


def charts(at: AppTest) -> int:
    return len(at.get("plotly_chart"))


def test_page_renders_head_overview_and_summaries(app):
    assert charts(app) == 2  # the chosen head and the small multiples
    assert app.text_area(key="text").value.startswith("the keys")
    assert app.selectbox(key="model").value == "lm-rope"
    assert len(app.dataframe) == 1 and len(app.dataframe[0].value) == 4  # M=2 x H=2 heads
    assert "12 tokens" in " ".join(m.value for m in app.markdown)


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
    app.selectbox(key="mask").select("window").run()  # no bundled model: falls back to the ablation
    assert_ok(app)
    assert "No bundled model" in " ".join(i.value for i in app.info)


def test_compare_mode_shows_both_settings_and_their_difference(app):
    app.toggle(key="compare").set_value(True).run()
    assert_ok(app)
    assert charts(app) == 2 and app.info  # same setting twice: asks for another
    app.selectbox(key="mask").select("none").run()
    assert_ok(app)
    assert charts(app) == 4  # A, B, B - A, overview


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


@pytest.mark.parametrize("text", ["the dog 🐶 runs 🎉 .", "שלום the cat مرحبا .", "the\x07 dog\x1b[31m runs\u202e ."
                                  "\u200b", "<br> <b>bold</b> & \"quotes\" ."])
def test_emoji_rtl_and_control_characters(app, text):
    app.text_area(key="text").input(text).run()
    assert_ok(app)
    assert app.warning  # unknown tokens are flagged
