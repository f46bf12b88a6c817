"""The pages that read any text recording, on a user's pretrained GPT-2 and BERT (tiny, random, in the tests' own
Hugging Face cache): picked from the cache, opened from a folder, refused with a message when they cannot be, and
the app unchanged without `transformers`."""

from __future__ import annotations

import io

import numpy as np
import pytest
from conftest import PAGES, ROOT, figures, ok, read_models_from
from PIL import Image
from pretrained_models import cache_model, save_bert
from streamlit.testing.v1 import AppTest

import pages.ui.store as store
from core.model import pretrained

GPT2 = "hf:tiny-org/page-gpt2"
BERT = "hf:tiny-org/page-bert"
VIT = "hf:tiny-org/page-vit"


@pytest.fixture(scope="module", autouse=True)
def cached_models(hf_cache):
    cache_model(GPT2.removeprefix("hf:"), "gpt2")
    cache_model(BERT.removeprefix("hf:"), "bert")
    cache_model(VIT.removeprefix("hf:"), "vit")


def markdown(at) -> str:
    return " ".join(element.value for element in at.markdown)


@pytest.mark.parametrize("model", [GPT2, BERT])
@pytest.mark.parametrize("page", ["text_explorer.py", "residual_stream.py", "token_norm.py"])
def test_every_view_page_runs_on_a_cached_pretrained_model(app, page, model):
    at = app(str(PAGES / page), model=model)
    ok(at)
    assert at.selectbox(key="model").value == model
    assert model.removeprefix("hf:") in " ".join(c.value for c in at.sidebar.caption).replace("\\", "")  # says where it came from


def test_the_explorer_shows_a_pretrained_models_own_pieces_and_its_ablations(app):
    at = app(str(PAGES / "text_explorer.py"), model=GPT2)
    assert "with <|endoftext|> first" in markdown(at).replace("\\", "")
    assert at.radio(key="apply").disabled  # no sibling was trained with another mask or encoding
    at.selectbox(key="pe").set_value("none").run()
    ok(at)
    assert "encoding none" in " ".join(c.value for c in at.caption)


def test_a_folder_opened_in_the_sidebar_joins_the_picker_and_is_shown(app, tmp_path):
    folder = save_bert(tmp_path / "my-bert")
    at = app(str(PAGES / "text_explorer.py"))
    at.sidebar.text_input[0].input(str(folder))
    at.sidebar.button[0].click().run()
    ok(at)
    assert at.selectbox(key="model").value == f"hf:{folder}"
    assert "'my-bert'" in " ".join(c.value for c in at.sidebar.caption).replace("\\", "")  # its name, not its path
    assert str(tmp_path) not in " ".join(c.value for c in at.sidebar.caption)
    at.sidebar.text_input[0].input(str(folder))  # opened again: still one entry in the picker
    at.sidebar.button[0].click().run()
    ok(at)
    assert at.selectbox(key="model").options.count(f"hf:{folder}") == 1


@pytest.mark.parametrize("typed, message", [("/no/such/folder", "no folder"),
                                            ("someone/not-cached", "hf download someone/not-cached")])
def test_a_model_that_cannot_be_opened_says_why_and_keeps_the_page(app, typed, message):
    at = app(str(PAGES / "text_explorer.py"))
    at.sidebar.text_input[0].input(typed)
    at.sidebar.button[0].click().run()
    assert not at.exception
    assert message in at.error[0].value.replace("\\", "")
    assert at.selectbox(key="model").value == "lm-rope"


def test_without_transformers_nothing_changes_and_the_sidebar_says_how_to_enable_it(app, monkeypatch):
    monkeypatch.setattr(pretrained, "available", lambda: False)
    at = app(str(PAGES / "text_explorer.py"))
    ok(at)
    assert not any(name.startswith("hf:") for name in at.selectbox(key="model").options)
    assert pretrained.INSTALL_HINT in " ".join(c.value for c in at.sidebar.caption)


@pytest.mark.parametrize("source", ["sample", "draw"])
def test_the_image_page_runs_a_pretrained_vit_with_its_own_labels_at_its_own_size(app, source):
    """Our 32-pixel samples and drawings are fitted to the 16 pixels the tiny ViT reads; its classes are its own."""
    at = app(str(PAGES / "image_lab.py"), model=VIT, source=source)
    ok(at)
    assert at.selectbox(key="model").value == VIT
    bars = next(f for f in figures(at) if f["data"][0].get("orientation") == "h")
    assert set(bars["data"][0]["y"]) == {"circle", "square", "triangle"}
    assert "scaled from 32×32 to the 16×16" in " ".join(c.value for c in at.caption)
    assert at.radio(key="apply").disabled


def test_a_text_model_opened_on_the_image_page_is_sent_to_the_text_pages(app):
    at = app(str(PAGES / "image_lab.py"), model=VIT)
    at.sidebar.text_input[0].input(GPT2.removeprefix("hf:"))
    at.sidebar.button[0].click().run()
    assert "is a text model" in at.error[0].value.replace("\\", "")


@pytest.mark.parametrize("model", [GPT2, BERT])
def test_every_view_of_the_explorer_runs_on_a_pretrained_model(app, model):
    views = ("All heads", "One score, step by step", "Head view", "Rollout", "Head summaries")
    at = app(str(PAGES / "text_explorer.py"), model=model)
    for view in views:
        at.session_state["view"] = view
        at.run()
        ok(at)
    at.toggle(key="compare").set_value(True).run()  # the model's own setting beside an ablation
    at.selectbox(key="mask").set_value("window").run()
    ok(at)


def test_a_link_to_a_pretrained_folder_opens_it_and_a_broken_one_says_why(app, tmp_path):
    folder = save_bert(tmp_path / "linked-bert")
    at = app(str(PAGES / "text_explorer.py"), model=f"hf:{folder}")
    ok(at)
    assert at.selectbox(key="model").value == f"hf:{folder}"
    at = app(str(PAGES / "text_explorer.py"), model="hf:/no/such/folder")
    assert not at.exception
    assert "no folder" in " ".join(i.value for i in at.info).replace("\\", "")
    assert at.selectbox(key="model").value == "lm-rope"


def test_a_server_that_opens_no_folders_refuses_them_from_the_box_and_from_links(app, tmp_path, monkeypatch):
    folder = save_bert(tmp_path / "refused-bert")
    monkeypatch.setenv("ATTENTION_LAB_OPEN_FOLDERS", "0")
    at = app(str(PAGES / "text_explorer.py"))
    assert "this server opens no folders" in " ".join(c.value for c in at.sidebar.caption)
    at.sidebar.text_input[0].input(str(folder))
    at.sidebar.button[0].click().run()
    assert not at.exception and "cached name only" in at.error[0].value
    assert at.selectbox(key="model").value == "lm-rope"
    at = app(str(PAGES / "text_explorer.py"), model=f"hf:{folder}")
    assert not at.exception and "cached name only" in " ".join(i.value for i in at.info)
    assert at.selectbox(key="model").value == "lm-rope"
    at = app(str(PAGES / "text_explorer.py"), model=GPT2)  # a cached name still opens
    ok(at)
    assert at.selectbox(key="model").value == GPT2


def test_a_slow_forward_pass_is_named_as_the_slow_part(app, monkeypatch):
    at = app(str(PAGES / "text_explorer.py"), model=GPT2)
    assert not any("the slow part" in c.value for c in at.caption)  # a tiny model is quick
    monkeypatch.setattr(store, "SLOW_SECONDS", 0.0)
    monkeypatch.setattr(store, "RESULTS_MB", 0)
    at = app(str(PAGES / "text_explorer.py"), model=GPT2, text="the keys to the cabinet")
    note = next(c.value for c in at.caption if "the slow part" in c.value)
    assert "2 layers × 4 heads (D = 32)" in note and "each click computes it again" in note


def test_an_upload_is_decoded_at_the_size_the_pretrained_vit_reads(app):
    photo = np.random.default_rng(1).integers(0, 256, (120, 90, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(photo).save(buffer, format="PNG")
    at = app(str(PAGES / "image_lab.py"), model=VIT, source="upload")
    at.file_uploader(key="upload").set_value(("photo.png", buffer.getvalue(), "image/png")).run()
    ok(at)
    captions = " ".join(c.value for c in at.caption)
    assert "16×16 pixels cut into 16 patches" in captions and "scaled from" not in captions  # decoded at 16


@pytest.mark.parametrize("model", [GPT2, BERT])
def test_the_maths_and_cost_pages_run_your_own_model(app, model):
    """core/lessons/maths.py writes a pretrained model's biases into each formula and checks every step against its
    recording; the cost page's comparison reads any recording's queries, keys and values."""
    at = app(str(PAGES / "maths.py"), model=model, maths_step="all steps")
    ok(at)
    assert at.selectbox(key="model").value == model
    assert "to at most **" in at.success[0].value  # every step checked against the recording
    at = app(str(PAGES / "attention_cost.py"), model=model)
    at.button(key="predict_same__reveal").click().run()
    ok(at)
    assert at.selectbox(key="model").value == model
    assert at.metric[0].label == "‖linear − softmax‖ / ‖softmax‖"


def test_your_own_model_is_kept_while_a_page_that_needs_a_bundled_one_says_why(models_dir, monkeypatch):
    """Every page's picker shares the key `model`: the masks, positions, image and encoder–decoder pages replace a
    model they cannot read with their default. The page says why, and the explorer picks the user's model again."""
    read_models_from(monkeypatch, models_dir)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    at.selectbox(key="model").set_value(GPT2).run()
    for page, reason in (("masks_lab.py", "its mask editor and its generation read the text with our own "
                                          "tokenizers"),
                         ("positions_lab.py", "it compares our models trained alike but for their position encoding")):
        at.switch_page(f"pages/{page}").run()
        assert not at.exception, page
        note = " ".join(i.value for i in at.sidebar.info).replace("\\", "")
        assert "This page needs one of our bundled models** because " + reason in note, note
        assert "'tiny-org/page-gpt2') stays chosen on the pages that read it" in note
        assert at.selectbox(key="model").value == "lm-rope"
        at.switch_page("pages/maths.py").run()  # a page that reads it picks it again
        ok(at)
        assert at.selectbox(key="model").value == GPT2
    at.switch_page("pages/text_explorer.py").run()
    at.selectbox(key="model").set_value("lm-rope").run()  # another model picked where the user's is listed: it holds
    at.switch_page("pages/masks_lab.py").run()
    assert not at.sidebar.info
    at.switch_page("pages/text_explorer.py").run()
    assert at.selectbox(key="model").value == "lm-rope"


@pytest.mark.parametrize("model", [GPT2, BERT])
def test_what_a_head_does_runs_on_a_pretrained_gpt2_and_bert(app, model):
    text = "the keys to the old cabinet" + (" [MASK] on the table ." if model == BERT else "")
    at = app(str(PAGES / "head_effects.py"), model=model, text=text, target="the", other="a", intervene="L1H0")
    ok(at)
    assert "L1H0 set to its mean output" in markdown(at)
    at.button(key="predict_head__reveal").click().run()
    ok(at)
    assert "lowers ℓ(the) − ℓ(a) the most" in markdown(at)
    refusal = " ".join(element.value for element in at.info)
    assert ("post-LN" in refusal) == (model == BERT)  # BERT's final stream is no sum of parts: no attribution


def test_a_link_spelling_a_folder_another_way_opens_the_one_model(app, tmp_path):
    folder = save_bert(tmp_path / "spelled-bert")
    at = app(str(PAGES / "text_explorer.py"), model=f"hf:/{folder}/")
    ok(at)
    assert at.selectbox(key="model").value == f"hf:{folder}"
    assert at.selectbox(key="model").options.count(f"hf:{folder}") == 1


def test_a_folder_named_in_markdown_is_shown_as_typed_never_a_link(app, tmp_path):
    folder = save_bert(tmp_path / "[click](http:evil.example)")
    at = app(str(PAGES / "text_explorer.py"), model=f"hf:{folder}")
    ok(at)
    caption = " ".join(c.value for c in at.sidebar.caption)
    assert r"'\[click\]\(http\:evil\.example\)'" in caption  # every bracket escaped: no link
