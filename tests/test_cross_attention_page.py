"""The encoder–decoder page under AppTest: a tiny random encoder–decoder (fast), then the bundled one once."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import as_shown, charts, figure, shows
from streamlit.testing.v1 import AppTest
from tiny_models import write_tiny_seq2seq

from core.data import grammar
from core.data.translation import TranslationInputError, read_source
from pages.ui.safety import literal

ROOT = Path(__file__).resolve().parent.parent
PAGE = str(ROOT / "pages" / "cross_attention.py")
OUTSIDE = "mary found the keys near the box ."


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    """Two tiny random encoder–decoders with the real vocabularies; `tiny` has held-out metrics naming L1 H1."""
    return write_tiny_seq2seq(tmp_path_factory.mktemp("seq2seq"))


@pytest.fixture
def app(tiny_dir, monkeypatch):
    def start(directory: Path | None = tiny_dir, **params: str) -> AppTest:
        if directory is None:
            monkeypatch.delenv("ATTENTION_LAB_SEQ2SEQ_DIR", raising=False)
        else:
            monkeypatch.setenv("ATTENTION_LAB_SEQ2SEQ_DIR", str(directory))
        at = AppTest.from_file(PAGE, default_timeout=60)
        for key, value in params.items():
            at.query_params[key] = value
        return reveal_all(at.run())
    return start


def reveal_all(at: AppTest) -> AppTest:
    """Click Reveal on both prompts: the charts and the table that answer them wait for it (test_reveal_prompts.py
    checks that they do); a new sentence asks them afresh."""
    for key in ("predict_free__reveal", "predict_align__reveal"):
        if any(button.key == key for button in at.button):
            at.button(key=key).click().run()
    return at


def spec(at: AppTest, index: int) -> dict:
    return figure(charts(at)[index])


def ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def text(at: AppTest) -> str:
    return " ".join(m.value for m in [*at.markdown, *at.caption, *at.info, *at.success, *at.warning])


def test_page_shows_all_three_attentions_for_both_passes(app):
    at = app()
    ok(at)
    assert len(charts(at)) == 5  # cross ×2, decoder self ×2, encoder
    assert (at.radio(key="dec_layer").value, at.radio(key="dec_head").value) == (1, 1)  # the card's best head
    assert "`dog` `ka` `ke` `child` `-i` `ka` `love` `-ta` `cat` `-i` `old` `du` `chase` `-ta` `.` `[EOS]`" in text(at)
    assert shows(spec(at, 0), "true alignment (from the rules)")
    (steps,) = at.dataframe
    assert list(steps.value["reference"]) == ["dog", "ka", "ke", "child", "-i", "ka", "love", "-ta", "cat", "-i", "old",
                                              "du", "chase", "-ta", ".", "[EOS]"]
    assert list(steps.value.columns[2:]) == ["teacher forcing: predicts", "p (forced)", "free generation: writes",
                                             "p (free)"]
    assert "Tailish puts the verb last. At step 12 the decoder writes `chase`" in text(at)


def test_pickers_change_the_figures(app):
    at = app()
    cross, encoder = spec(at, 0), spec(at, 4)
    at.radio(key="dec_layer").set_value(0).run()
    ok(at)
    assert spec(at, 0) != cross and shows(spec(at, 0), "L0 H1") and shows(spec(at, 2), "L0 H1")
    cross = spec(at, 0)
    at.radio(key="dec_head").set_value(0).run()
    ok(at)
    assert spec(at, 0) != cross
    at.toggle(key="overlay").set_value(False).run()
    ok(at)
    assert not shows(spec(at, 0), "true alignment")
    at.radio(key="enc_layer").set_value(1).run()
    assert spec(at, 4) != encoder and shows(spec(at, 4), "encoder · L1 H0")
    at.radio(key="enc_head").set_value(1).run()
    ok(at)
    assert shows(spec(at, 4), "encoder · L1 H1")
    at.sidebar.radio(key="notation").set_value("paper").run()
    ok(at)
    assert shows(spec(at, 0), "columns sum to 1")
    at.session_state["presenter"] = True  # the toggle itself is app.py's (tests/test_browser_layout.py)
    at.run()
    ok(at)
    at.sidebar.selectbox(key="model").set_value("tiny-b").run()
    ok(at)
    sidebar = " ".join(c.value for c in at.sidebar.caption)
    assert "tiny random" in sidebar and "Held-out" not in sidebar  # tiny-b has no metrics in its card


def test_example_and_held_out_buttons_set_the_sentence(app):
    at = app()
    at.button(key="example_mirrored noun phrases").click().run()
    ok(at)
    assert at.text_input(key="source").value == "the big old key opened my small red box ."
    assert "`key` `old` `big` `ka` `box` `red` `small` `mi` `open` `-ta` `.`" in text(at)
    at.button(key="heldout").click().run()
    ok(at)
    first = at.text_input(key="source").value
    reveal_all(at.button(key="heldout").click().run())
    ok(at)
    assert at.text_input(key="source").value != first and len(charts(at)) == 5


def test_predictions_reveal_the_computed_answers(app):
    at = app()
    at.radio(key="predict_align").set_value("6: chased").run()
    at.button(key="predict_align__reveal").click().run()
    ok(at)
    assert "of step 12's attention on" in text(at) and "By the rules that Tailish word comes from **6: chased**" \
        in text(at)
    at.radio(key="predict_free").set_value("no, it slips somewhere").run()
    at.button(key="predict_free__reveal").click().run()
    ok(at)
    assert f"You said **{literal('no, it slips somewhere')}**; measured: free generation" in text(at)
    assert "of 16** reference words (teacher forcing: " in text(at)


def test_a_sentence_outside_the_grammar_has_free_generation_only(app):
    at = app()
    reveal_all(at.text_input(key="source").set_value(OUTSIDE).run())
    ok(at)
    assert any("not a sentence of the generator's grammar" in i.value for i in at.info)
    assert len(charts(at)) == 3  # cross, decoder self (free only), encoder
    assert not shows(spec(at, 0), "true alignment")
    assert "Tailish starts with the noun. At step 0" in text(at)


def test_a_long_source_is_refused_before_it_is_read(app):  # issue 15: 8 MB took 4.7 s and an 11.5 MB error box
    at = app()
    started = time.perf_counter()
    at.text_input(key="source").set_value("zebra " * 1_400_000).run()
    assert time.perf_counter() - started < 4
    assert not at.exception and len(at.error) == 1
    message = at.error[0].value
    assert "8,400,000 characters" in message and "at most 1,000" in message and len(message) < 300
    with pytest.raises(TranslationInputError, match="characters"):
        read_source("the dog runs . " * 100, 24)  # 1,500 characters
    assert read_source("the dog runs .", 24).words[-1] == "[EOS]"


def test_bad_input_shows_an_error_not_an_exception(app):
    at = app()
    for typed, message in [("", "empty"), ("   ", "empty"), ("the dog runs . " * 8, "at most 24 tokens")]:
        at.text_input(key="source").set_value(typed).run()
        assert not at.exception
        assert at.error and literal(message) in at.error[0].value  # the message quotes the text: shown literally
        assert not charts(at)


def known_words(at: AppTest) -> str:
    """The markdown of the "Words the model knows" expander."""
    expander = next(e for e in at.expander if e.label.startswith("Words the model knows"))
    return " ".join(m.value for m in expander.markdown)


def test_the_page_lists_the_words_it_knows_and_generates_sentences_of_them(app):
    at = app()
    listed = known_words(at)
    for kind, words in grammar.lexicon_by_kind().items():
        assert f"**{kind}**" in listed and all(word in listed for word in words)
    for _ in range(3):  # the generator's sentences are grammatical and use only the listed words
        at.button(key="heldout").click().run()
        ok(at)
        sentence = at.text_input(key="source").value
        assert read_source(sentence, 64).pair is not None
        assert set(sentence.split()) <= set(grammar.lexicon_words())


def test_unknown_words_are_read_as_unk_flagged_as_on_the_explorer_and_shown_literally(app):
    at = reveal_all(app().text_input(key="source").set_value("the old zebra runs .").run())
    ok(at)
    assert at.warning[0].value == ("1 token(s) are not in the model's vocabulary and are read as [UNK] "
                                   "(marked ⟨…⟩?): zebra")  # the text explorer's words (pages/ui/text_input.py)
    assert "**English:** `the` `old` ⟨zebra⟩? `runs`" in text(at)
    assert "(1 of its words is outside the grammar's vocabulary, read as [UNK])" in as_shown(at.info[0].value)
    assert len(charts(at)) == 3  # free generation's cross and decoder attention, the encoder's
    assert figure(charts(at)[0])["layout"]["xaxis"]["ticktext"][2] == "2: ⟨zebra⟩?"
    assert "zebra" not in known_words(at) and "runs" in known_words(at)
    at.text_input(key="source").set_value("the [zebra](javascript:x) **runs** .").run()
    assert not at.exception
    shown = " ".join([at.warning[0].value, at.info[0].value, text(at)])
    assert "zebra" in at.warning[0].value and "javascript" in at.warning[0].value
    assert "[zebra](" not in shown and "**runs" not in shown  # escaped, not obeyed


def test_the_readme_sentence_is_explained_and_its_grammatical_neighbour_translated(app):
    at = reveal_all(app().text_input(key="source").set_value("the keys to the old cabinet are on the table .").run())
    ok(at)
    info = as_shown(at.info[0].value)
    assert "expected an adjective after the copula after 'the keys to the old cabinet are', found 'on'" in info
    assert "*is/are/was/were* with an adjective" in info and "*the keys to the old cabinet are red .*" in info
    at = reveal_all(at.text_input(key="source").set_value("the keys to the old cabinet are red .").run())
    ok(at)
    assert "`key` `-i` `ka` `cabinet` `old` `ka` `to` `red` `es` `.` `[EOS]`" in text(at)


def test_the_url_sets_every_picker(app):
    at = app(source="she sleeps .", dec_layer="L0", dec_head="H0", overlay="false", enc_layer="L1", enc_head="H1",
             notation="paper")
    ok(at)
    assert at.text_input(key="source").value == "she sleeps ."
    assert (at.radio(key="dec_layer").value, at.radio(key="dec_head").value, at.toggle(key="overlay").value,
            at.radio(key="enc_layer").value, at.radio(key="enc_head").value) == (0, 0, False, 1, 1)
    assert "`la` `sleep` `.`" in text(at) and shows(spec(at, 4), "encoder · L1 H1")


def test_without_a_model_the_page_says_how_to_train_one(app, tmp_path):
    at = app(tmp_path)
    assert not at.exception and not charts(at)
    assert "python -m core.training.train_seq2seq" in at.info[0].value


def test_the_bundled_model_translates_the_default_sentence_and_slips_on_mixed_tenses(app):
    at = app(None)
    ok(at)
    assert len(charts(at)) == 5
    assert "measured: free generation writes the reference word for word" in text(at)  # it matches the rules
    reveal_all(at.button(key="example_mixed tenses (never trained on)").click().run())
    ok(at)
    assert "measured: free generation first leaves the reference at step" in text(at)
