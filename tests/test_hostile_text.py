"""Text that a user or a link supplies is shown as typed, never obeyed (issue 15, finding 3): hostile strings
(a backtick that ends a code span, bold, a link, a remote image, LaTeX, a backslash, HTML, a right-to-left
override, ESC, a newline) are fed through every page, in every URL parameter that takes text, the ?run= id and an
uploaded file's name, and every text the page then shows is checked: markdown that Streamlit renders holds them
only backslash-escaped, and no text anywhere holds a raw control or bidi character."""

from __future__ import annotations

import io
import re
import string
from pathlib import Path

import numpy as np
import pytest
from conftest import PAGES, read_models_from
from PIL import Image
from streamlit.testing.v1 import AppTest
from tiny_models import write_tiny_models, write_tiny_seq2seq
from vision_models import write_tiny_vits

from core.data.images import generate_dataset
from core.serving.visible import is_invisible
from pages.ui.safety import LINK_BREAK, literal

# Every piece carries the marker "zq", so the test finds it in what the page shows however the page cut the text up;
# plain words at both ends keep the page's own punctuation around the text off the marked pieces
PIECES = ("zq`", "**zqbold**", "[zqlink](http://evil.example)", "![zqimg](http://127.0.0.1:9/p)", "$zqmath$",
          "\\zqslash", "<img src=zqhtml>", "&lt;zqentity", "\u202ezqbidi", "\x1b[31mzqesc\nzqline")
HOSTILE = f"the {' '.join(PIECES)} end"  # 63 tokens with [BOS]: the tiny models read 64
SHORT = f"the {' '.join(PIECES[:3] + PIECES[-2:])} end"  # 27: the mask editor takes 32
REORDERED = f"end {' '.join(PIECES[-2:] + PIECES[:3])} the"  # SHORT's tokens in another order
MARKER = "zq"
PUNCTUATION = set(string.punctuation) - set(",;'\"?%@/=")  # what markdown, LaTeX, HTML or Streamlit may obey
# Proto fields Streamlit renders as markdown: element bodies, widget labels and help, radio options and captions
MARKDOWN_FIELDS = {"body", "label", "help", "captions", "text"}
# Proto fields that hold what the user typed into a widget (shown in the box as typed) or a chart's data
TYPED_FIELDS = {"value", "default", "raw_value", "set_value", "spec", "figure", "json", "data", "arrow_data",
                "form_id", "id", "file_uploader_state", "url", "key", "placeholder"}


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory) -> Path:
    return write_tiny_vits(write_tiny_models(tmp_path_factory.mktemp("models")))


@pytest.fixture
def page(models_dir, tmp_path, monkeypatch):
    """page(file, **url params) -> the page after its first run, reading tiny models."""
    read_models_from(monkeypatch, models_dir)
    monkeypatch.setenv("ATTENTION_LAB_SEQ2SEQ_DIR", str(write_tiny_seq2seq(tmp_path / "seq2seq")))
    monkeypatch.setenv("ATTENTION_LAB_USER_DIR", str(tmp_path / "runs"))

    def start(file: str, **params: str) -> AppTest:
        at = AppTest.from_file(str(PAGES / file), default_timeout=90)
        at.query_params.update(params)
        return at.run()
    return start


# ---------------------------------------------------------------------------------------------------------
# What the page shows
# ---------------------------------------------------------------------------------------------------------

def shown_strings(message, field: str = "") -> list[tuple[str, str]]:
    """(field name, text) of every string in an element's proto, nested messages and repeated fields included."""
    found = []
    for descriptor, value in message.ListFields():
        values = value if descriptor.is_repeated else [value]
        for item in values:
            if isinstance(item, str):
                found.append((descriptor.name, item))
            elif hasattr(item, "ListFields"):
                found.extend(shown_strings(item, descriptor.name))
    return found


def elements(node):
    """Every element and block of an AppTest tree, depth first."""
    yield node
    for child in getattr(node, "children", {}).values():
        yield from elements(child)


def page_texts(at: AppTest) -> list[tuple[str, str, str]]:
    """(element type, field, text) of everything the page drew."""
    texts = []
    for node in elements(at._tree):
        proto = getattr(node, "proto", None)
        if proto is not None and hasattr(proto, "ListFields"):
            texts.extend((node.type, name, text) for name, text in shown_strings(proto))
    return texts


def unescaped_markup(text: str) -> list[str]:
    """The pieces of markdown `text` around a marker that markdown, LaTeX or HTML could obey: an ASCII punctuation
    character not escaped by a backslash, or a backslash that escapes nothing (it would vanish or start LaTeX)."""
    problems = []
    for word in text.split():
        if MARKER not in word:
            continue
        i = 0
        while i < len(word):
            if word[i] == "\\":
                if i + 1 >= len(word) or word[i + 1] not in PUNCTUATION:
                    problems.append(word)
                    break
                i += 2
            elif word[i] in PUNCTUATION:
                problems.append(word)
                break
            else:
                i += 1
    return problems


def assert_shown_as_typed(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    texts = page_texts(at)
    assert any(MARKER in text for _, field, text in texts if field not in ("value", "default")), \
        "the hostile text reached nothing but its own box: the test checks nothing"
    for kind, field, text in texts:
        if field in TYPED_FIELDS:
            continue
        raw = sorted({hex(ord(c)) for c in text  # the app's own lines break; literal's LINK_BREAK is meant
                      if is_invisible(c) and c not in ("\n", LINK_BREAK)})
        assert not raw and "\nzqline" not in text, f"{kind}.{field} shows raw control characters: {text!r}"
        if (field in MARKDOWN_FIELDS or kind == "radio" and field == "options") and kind not in ("code", "text"):
            assert not unescaped_markup(text), f"{kind}.{field} renders markup: {unescaped_markup(text)} in {text!r}"


# ---------------------------------------------------------------------------------------------------------
# The helper
# ---------------------------------------------------------------------------------------------------------

def test_literal_escapes_every_markup_character_and_shows_control_characters():
    shown = literal(HOSTILE)
    assert not unescaped_markup(shown)
    assert "\u202e" not in shown and "\x1b" not in shown and "\n" not in shown
    assert "\\\\u202ezqbidi" in shown and "\\\\x1b" in shown and "\\\\nzqline" in shown  # visible, as escapes
    assert literal("a\u202eb\x1b", markdown=False) == "a\\u202eb\\x1b"  # plain: no backslash before letters
    assert literal("the keys are on the table") == "the keys are on the table"  # words stay words


def test_literal_leaves_no_address_that_markdown_would_turn_into_a_link():
    typed = "see https://evil.example/login, HTTP://x.y www.evil.example WWW.x.y and me@evil.example"
    shown = literal(typed)
    assert shown.replace(LINK_BREAK, "").replace("\\", "") == typed  # reads as typed, the joiners show as nothing
    # GFM's autolink literals as Streamlit's markdown finds them in the text (mdast-util-gfm-autolink-literal)
    autolink = re.compile(r"(https?://|www(?=\.))[-.\w]+|[-.\w+]+@[-\w]+(?:\.[-\w]+)+", re.ASCII | re.IGNORECASE)
    assert autolink.search(typed) and not autolink.search(shown.replace("\\", ""))
    assert literal(typed, markdown=False) == typed  # plain text is never linked


def test_the_checker_finds_markup_that_is_not_escaped():  # the page checks below can fail
    assert unescaped_markup("**zqbold**") and unescaped_markup("\\zqslash") and unescaped_markup("$zqmath$")
    assert unescaped_markup("\\*\\*zqbold*") and not unescaped_markup("\\*\\*zqbold\\*\\*")


# ---------------------------------------------------------------------------------------------------------
# Every page
# ---------------------------------------------------------------------------------------------------------

TEXT_PAGES = {  # page -> its URL parameters that take text
    "text_explorer.py": dict(text=HOSTILE),
    "residual_stream.py": dict(text=HOSTILE),
    "token_norm.py": dict(text=HOSTILE),
    "maths.py": dict(text=HOSTILE),
    "masks_lab.py": dict(text=SHORT, prompt=SHORT, cells=" ".join(PIECES)),
    "positions_lab.py": dict(text=HOSTILE, perm_a=SHORT, perm_b=REORDERED),
}


@pytest.mark.parametrize("file, texts", TEXT_PAGES.items(), ids=list(TEXT_PAGES))
def test_a_hostile_text_in_a_link_is_shown_as_typed(page, file, texts):
    at = page(file, model=HOSTILE, notation=HOSTILE, **texts)
    assert_shown_as_typed(at)


@pytest.mark.parametrize("pieces", [slice(0, 3), slice(3, 4), slice(4, 10)])
def test_a_hostile_source_sentence_is_shown_as_typed(page, pieces):
    """The encoder reads 24 tokens: the pieces in three sentences, each read with its unknown words as [UNK]."""
    source = f"the {' '.join(PIECES[pieces])} end"
    at = page("cross_attention.py", source=source, model=HOSTILE)
    assert_shown_as_typed(at)
    assert "zq" in at.warning[0].value  # the words it does not know are named


def test_a_hostile_run_id_in_a_link_is_shown_as_typed(page):
    at = page("live_training.py", run=HOSTILE)
    assert_shown_as_typed(at)
    note = " ".join(info.value for info in at.info)
    assert "evil\\.example" in note and "](http" not in note and "**zqbold**" not in note


def test_a_hostile_file_name_is_shown_as_typed(page):
    at = page("image_lab.py", source="upload")
    buffer = io.BytesIO()
    Image.fromarray(np.asarray(generate_dataset(1, 3)[0][0])).save(buffer, format="PNG")
    at.file_uploader(key="upload").set_value((HOSTILE + ".png", buffer.getvalue(), "image/png")).run()
    assert_shown_as_typed(at)
