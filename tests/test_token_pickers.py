"""Every token picker shows tokens as plain text: a widget shows its options as they are, so `<` and `&` must not
arrive HTML-escaped as `&lt;` and `&amp;` (issue 14 §3); the markdown beside them is escaped."""

from __future__ import annotations

import pytest

from conftest import PAGES, ok

TEXT = "the cat < dog & bird > ."


@pytest.mark.parametrize("page, key, view", [
    ("maths.py", "token", None),
    ("token_norm.py", "token", None),
    ("residual_stream.py", "position", None),
    ("text_explorer.py", "qk_query", "One score, step by step"),
    ("text_explorer.py", "qk_key", "One score, step by step"),
    ("text_explorer.py", "lines_token", "Head view"),
])
def test_token_pickers_show_plain_text(app, page, key, view):
    params = {"text": TEXT, **({"view": view} if view else {})}
    at = app(str(PAGES / page), **params)
    ok(at)
    options = at.selectbox(key=key).options
    assert "3: ⟨<⟩?" in options and "5: ⟨&⟩?" in options and "7: ⟨>⟩?" in options, options
    assert not any("&lt;" in option or "&amp;" in option or "&gt;" in option for option in options)
