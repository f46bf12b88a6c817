"""The command line and the text path: a complete recording a notebook can open, and clear errors."""

from __future__ import annotations

import json
import subprocess
import sys
import unicodedata

import numpy as np
import pytest

from core.model.registry import DEFAULT_TEXT_MODEL, TEXT_TASKS, list_cards, load_model
from core.model.run import TextInputError, record_text, text_tokenizer
from core.record import main
from core.tokenizers.subword import SubwordTokenizer
from core.tokenizers.words import without_surrogates


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "core.record", *args], capture_output=True, text=True, timeout=120)


def test_cli_round_trip(tmp_path):
    out = tmp_path / "rec.npz"
    text = "the keys to the old cabinet are"
    result = run_cli("--text", text, "--out", str(out))
    assert result.returncode == 0, result.stderr
    with np.load(out, allow_pickle=False) as data:
        meta = json.loads(str(data["meta"]))
        model, card = load_model(DEFAULT_TEXT_MODEL)
        encoded = text_tokenizer(card).encode(text)  # read by the model's own tokenizer, [BOS] first
        assert meta["tokens"] == encoded.tokens and meta["ids"] == encoded.ids and meta["tokens"][0] == "[BOS]"
        assert meta["config"] == model.cfg.to_dict() and meta["model"] == DEFAULT_TEXT_MODEL
        n = len(meta["ids"])
        for layer in range(model.cfg.n_layers):
            pattern = data[f"blocks.{layer}.attn.hook_pattern"]
            assert pattern.shape == (model.cfg.n_heads, n, n)
            np.testing.assert_allclose(pattern.sum(-1), 1.0, atol=1e-5)
        assert data["logits"].shape == (n, model.cfg.vocab_size)


def test_cli_mask_and_pe_options(tmp_path):
    out = tmp_path / "rec.npz"
    result = run_cli("--text", "mary found the key", "--mask", "window", "--window", "2", "--pe", "none",
                     "--out", str(out))
    assert result.returncode == 0, result.stderr
    with np.load(out) as data:
        meta = json.loads(str(data["meta"]))
        assert meta["mask"] == "window(2, causal)" and meta["pe"] == "none"
        assert (data["blocks.0.attn.hook_pattern"][:, 4, :3] == 0).all()


def test_cli_lists_every_bundled_model_name_first():
    result = run_cli("--list")
    assert result.returncode == 0
    names = [line.split("\t")[0] for line in result.stdout.splitlines()]
    assert names == [card.name for card in list_cards()] and DEFAULT_TEXT_MODEL in names


@pytest.mark.parametrize("args, message", [
    (["--model", "no-such-model", "--text", "hi", "--out", "x.npz"], "no bundled model"),
    (["--text", "", "--out", "x.npz"], "empty"),
    (["--text", "\x00\x1b \u200b", "--out", "x.npz"], "empty"),
    (["--text", "the cat " * 50_000, "--out", "x.npz"], "shorten"),
    (["--text", "the cat " * 1000, "--out", "x.npz"], "context length"),  # 2,000 tokens or more: past every context
])
def test_cli_errors_are_one_clear_line(args, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(args) == 2
    error = capsys.readouterr().err.strip()
    assert message in error and len(error.splitlines()) == 1 and "Traceback" not in error
    assert not (tmp_path / "x.npz").exists()


ODD_UNICODE = ["the dog 🐶 runs", "مرحبا بالعالم", "שלום the cat", "tab\tand\x07bell", "e\u0301 combining",
               "\ud800 lone surrogate"]


def odd_recording(name: str, text: str):
    """The recording of `text` on the bundled model `name`, checked whole: a token, a flag a token, finite logits."""
    model, card = load_model(name)
    recording = record_text(model, text, card=card)
    assert recording.n_tokens == len(recording.meta["tokens"]) == len(recording.meta["unknown"])
    assert np.isfinite(recording["logits"]).all()
    return recording, text_tokenizer(card)


@pytest.mark.parametrize("text", ODD_UNICODE)
def test_odd_unicode_records_with_unknown_pieces_marked_by_the_grammar_tokenizer(text):
    recording, _ = odd_recording("lm-rope", text)
    assert any(recording.meta["unknown"])


@pytest.mark.parametrize("text", ODD_UNICODE)
def test_odd_unicode_is_read_whole_by_the_default_models_byte_level_pieces(text):
    """The default model's byte-level BPE knows every byte: no piece is unknown, and the pieces decode back to the
    text as the tokenizer reads it (NFC, a lone surrogate as U+FFFD)."""
    recording, tokenizer = odd_recording(DEFAULT_TEXT_MODEL, text)
    assert isinstance(tokenizer, SubwordTokenizer) and not any(recording.meta["unknown"])
    assert tokenizer.decode(recording.meta["ids"][1:]) == unicodedata.normalize("NFC", without_surrogates(text))


def test_empty_text_raises_a_clear_error():
    model, _ = load_model(DEFAULT_TEXT_MODEL)
    with pytest.raises(TextInputError, match="empty"):
        record_text(model, "   ")


def test_quality_names_the_held_out_figures_most_telling_first_with_their_spread():
    from core.model.checkpoint import ModelCard
    from core.model.config import ModelConfig
    from core.model.registry import quality
    card = ModelCard("lm-x", "grammar-lm", ModelConfig(vocab_size=10),
                     metrics={"headline": {"ppl": 17.94, "agreement": 0.9412}, "spread": {"agreement": 0.021}})
    assert quality(card) == "agreement 94% ± 2% · perplexity 17.9"
    assert quality(card, first_only=True) == "agreement 94%"  # a picker's label: the main figure alone
    assert quality(ModelCard("new", "copy", ModelConfig(vocab_size=10))) == ""
    narrow = ModelCard("vit-x", "shapes", ModelConfig(vocab_size=10),
                       metrics={"headline": {"accuracy": 0.981}, "spread": {"accuracy": 0.0031}})
    assert quality(narrow) == "accuracy 98% ± 0.3%"  # a spread under a point is not shown as 0


def test_every_bundled_model_shows_its_held_out_quality():
    from core.model.registry import LESSON_ANSWERS, MODELS_DIR, quality
    for card in list_cards(MODELS_DIR):
        figures = card.metrics["headline"]
        assert quality(card) and all(f"{value:.0%}" in quality(card) for key, value in figures.items()
                                     if key not in ("ppl", *LESSON_ANSWERS)), card.name


def test_the_sidebar_quality_leaves_out_what_a_lesson_asks_the_class_to_predict():
    """The "it" head's score answers *What does “it” refer to?*: the card keeps it, the sidebar does not show it."""
    from core.model.checkpoint import ModelCard
    from core.model.config import ModelConfig
    from core.model.registry import quality
    card = ModelCard("english-x", "english-mlm", ModelConfig(vocab_size=10),
                     metrics={"headline": {"agreement_out_of_template": 0.9, "it_referent_head": 0.975}})
    assert quality(card) == "agreement outside the templates 90%"


def test_the_model_list_is_read_once_and_again_when_a_card_changes(tmp_path, monkeypatch):
    """list_cards keeps the cards it read (every page lists them at every run) while no card file changes."""
    from core.model import registry
    from core.model.checkpoint import ModelCard, read_card
    from core.model.config import ModelConfig

    config = ModelConfig(d_model=8, n_heads=2, n_layers=1, d_mlp=16, max_len=8, vocab_size=10)
    for name in ("a", "b"):
        (tmp_path / f"{name}.json").write_text(json.dumps(ModelCard(name, "reversal", config, "first").to_dict()))
    reads = []
    monkeypatch.setattr(registry, "read_card", lambda path: reads.append(path.name) or read_card(path))
    assert [card.description for card in registry.list_cards(tmp_path)] == ["first", "first"] and len(reads) == 2
    assert [card.name for card in registry.list_cards(tmp_path)] == ["a", "b"] and len(reads) == 2  # kept
    (tmp_path / "b.json").write_text(json.dumps(ModelCard("b", "reversal", config, "second, longer").to_dict()))
    assert [card.description for card in registry.list_cards(tmp_path)] == ["first", "second, longer"]
    (tmp_path / "a.json").unlink()
    assert [card.name for card in registry.list_cards(tmp_path)] == ["b"]


def test_cli_names_the_file_it_wrote(tmp_path):
    result = run_cli("--text", "the cat", "--out", str(tmp_path / "rec"))  # numpy adds .npz
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith(f"to {tmp_path / 'rec.npz'}") and (tmp_path / "rec.npz").exists()


IMAGE_MODEL = next(card.name for card in list_cards() if card.task not in TEXT_TASKS)


@pytest.mark.parametrize("options, message", [
    (["--mask", "window", "--window", str(10**20)], "--window must be between 1"),
    (["--mask", "window", "--window", "0"], "--window must be between 1"),
    (["--mask", "strided", "--stride", "0"], "--stride must be between 1"),  # once silently the model's own
    (["--mask", "window", "--window", "9999"], "context length"),
    (["--model", IMAGE_MODEL, "--pe", "rope"], "not a text model"),
])
def test_cli_refuses_an_option_the_model_cannot_run_with_in_one_line(options, message, tmp_path):
    result = run_cli("--text", "the cat", "--out", str(tmp_path / "x"), *options)
    error = result.stderr.strip()
    assert result.returncode == 2 and error.startswith("error:") and message in error, error
    assert len(error.splitlines()) == 1 and not list(tmp_path.iterdir())
