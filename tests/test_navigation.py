"""The app's menu (app.py): every page is a file of pages/ whose URL is its file name.

Streamlit resolves a deep link on a fresh server's first run among the files of pages/ (its old multipage mode,
switched off by pages/ui/__init__.py); a url_path other than the file's name would show "Page not found" there."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def pages_in_menu() -> list[tuple[str, str | None]]:
    source = (ROOT / "app.py").read_text()
    entries = re.findall(r'^\s+st\.Page\("pages/(\w+)\.py"[^\n]*', source, flags=re.MULTILINE)
    lines = [line for line in source.splitlines() if line.strip().startswith('st.Page("pages/')]
    return [(stem, (re.search(r'url_path="([^"]+)"', line) or [None, None])[1]) for stem, line in zip(entries, lines)]


def test_every_page_is_a_file_and_its_url_is_its_file_name():
    pages = pages_in_menu()
    assert len(pages) >= 4
    for stem, url in pages:
        assert (ROOT / "pages" / f"{stem}.py").exists(), stem
        assert url is None or url == stem, f"pages/{stem}.py has url_path {url!r}: use {stem!r}"


def test_every_page_leaves_the_old_multipage_mode_through_the_shared_module():
    for stem, _ in pages_in_menu():
        assert "from pages.ui." in (ROOT / "pages" / f"{stem}.py").read_text(), stem


def test_no_forced_full_garbage_collection_after_each_run():
    """Streamlit's default gc.collect(2) after every run took 150-300 ms with torch loaded and held the GIL while the
    run's last messages (the charts) waited to be sent (.streamlit/config.toml, [runner])."""
    import tomllib

    config = tomllib.loads((Path(__file__).resolve().parent.parent / ".streamlit" / "config.toml").read_text())
    assert config["runner"]["postScriptGC"] is False
