"""The broad-English language model's task (english-lm): read by the byte-level BPE tokenizer, trained on the
generated corpus without its held-out families, left out of `--all` while it is a pilot; and the tokenizer shipped
for it (assets/tokenizer-english.json)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from core.data import english, lexicon
from core.model.config import ConfigError
from core.tokenizers import subword
from core.tokenizers.subword import SubwordTokenizer
from core.tokenizers.words import TextTokenizer
from core.training import english_eval, train
from core.model.checkpoint import ModelCard, load_checkpoint
from core.model.run import text_tokenizer
from core.training.evaluate import evaluate
from core.training.tasks import IGNORE, text_pool
from tests.test_subword_tokenizer import CLASSROOM


def test_the_shipped_tokenizer_reads_the_classroom_sentences_in_words():
    tokenizer = SubwordTokenizer()
    assert tokenizer.vocab_size == subword.VOCAB_SIZE
    for text in CLASSROOM:
        encoded = tokenizer.encode(text)
        assert not any(encoded.is_unknown) and tokenizer.unk_id not in encoded.ids
    # the animal/street sentence's words are whole pieces, so attention can be read word by word
    pieces = tokenizer.encode("The animal didn't cross the street because it was too tired or wide").tokens
    assert pieces[1:] == ["The", " animal", " didn", "'t", " cross", " the", " street", " because", " it", " was",
                          " too", " tired", " or", " wide"]


@pytest.mark.parametrize("name", ["english-lm", "english-long", "english-mlm"])
def test_the_english_presets_read_the_subword_tokenizer_and_are_in_all(name):
    table = train.presets(TextTokenizer().vocab_size)
    preset = table[name]
    assert preset.task == {"english-long": "english-lm"}.get(name, name)
    assert preset.config.vocab_size == subword.VOCAB_SIZE
    assert isinstance(train.tokenizer_for(preset), SubwordTokenizer)
    assert isinstance(train.tokenizer_for(table["lm-rope"]), TextTokenizer)
    assert train.tokenizer_for(table["vit-learned"]) is None
    assert name not in train.NOT_IN_ALL
    small = replace(preset, config=preset.config.replace(vocab_size=300))
    with pytest.raises(ConfigError, match="4096 pieces"):
        train.tokenizer_for(small)


needs_lexicon = pytest.mark.skipif(not (lexicon.WORDNET_DIR / "data.noun").exists(),
                                   reason="Debian's wordnet-base is not installed (.ci/run installs it)")


def test_english_lms_siblings_are_trained_the_same_way_with_another_position_encoding():
    """The same recipe but for the encoding; RoPE and sinusoidal also spread their positions (random strides)."""
    table = train.presets(TextTokenizer().vocab_size)
    base = table["english-lm"]
    for pe in train.ENGLISH_SIBLINGS:
        sibling = table[f"english-{pe}"]
        assert pe != base.config.pos_encoding and sibling.name not in train.NOT_IN_ALL
        strides = {"random_strides": True} if pe in ("rope", "sinusoidal") else {}
        assert sibling.task == base.task and sibling.recipe() == {**base.recipe(), **strides}
        assert sibling.recipe()["stored"] == "float16"  # assets/ under 60 MB
        assert sibling.config == base.config.replace(pos_encoding=pe)


@needs_lexicon
def test_the_english_pool_is_packed_to_the_context_and_trains(tmp_path):
    pytest.importorskip("wordfreq")
    preset = replace(train.presets(TextTokenizer().vocab_size)["english-lm"], steps=6, pool_size=300, warmup=2)
    tokenizer = train.tokenizer_for(preset)
    pool = text_pool(preset.task, preset.pool_size, train.TRAIN_SEED, tokenizer, preset.pack)
    assert all(len(sequence) <= preset.pack for sequence in pool.sequences)
    assert sum(map(len, pool.sequences)) > 0.8 * preset.pack * len(pool)  # packed: most of each context used
    texts = english.generate_texts(50, train.TRAIN_SEED, lexicon.build_lexicon(), english.DEFAULT_HELD_OUT)
    assert tokenizer.decode(pool.sequences[0][1:-1]).startswith(texts[0])  # the corpus, held-out families left out
    path = train.train_preset(preset, tmp_path, progress=False)
    card = train.read_card(path)
    assert card.training["tokenizer"] == "tokenizer-english.json" and card.task == "english-lm"
    assert card.training["loss_curve"][0][1] > 7.0  # ln 4096 = 8.3 at the start
    # and its figures, from the command line: every part with its baselines
    out = tmp_path / "figures.json"
    assert english_eval.main([str(path), "--n", "4", "--pairs", "2", "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    assert set(figures) == {"out_of_template", "in_template", "minimal_pairs"}
    assert set(figures["out_of_template"]) == {*english.DEFAULT_HELD_OUT, "pooled"}
    assert figures["minimal_pairs"]["pooled"]["n"] == 12
    assert all({"accuracy", "always_singular", "always_plural"} <= set(score) for part in figures.values()
               for score in part.values())


@needs_lexicon
def test_the_shipped_tokenizer_is_what_the_corpus_teaches(tmp_path):
    """assets/tokenizer-english.json is rebuilt bit for bit from the corpus (python -m core.data.english
    --tokenizer): the lexicon, the corpus and the BPE merges are all deterministic."""
    pytest.importorskip("wordfreq")
    fresh = english.build_tokenizer(lexicon.build_lexicon(), tmp_path / "tokenizer.json")
    assert fresh.read_text() == subword.ENGLISH_TOKENIZER_PATH.read_text()


@needs_lexicon
def test_the_shipped_reference_texts_are_the_corpus_own(tmp_path):
    """assets/reference-english.json (a mean ablation's reference for the English models, shipped because the app
    has no lexicon packages) is rebuilt bit for bit: python -m core.data.english --reference."""
    pytest.importorskip("wordfreq")
    fresh = english.write_reference_texts(lexicon.build_lexicon(), tmp_path / "reference.json")
    assert fresh.read_text() == english.REFERENCE_PATH.read_text()
    assert english.read_reference_texts()[:3] == english.generate_texts(3, train.TRAIN_SEED, lexicon.build_lexicon(),
                                                                       english.DEFAULT_HELD_OUT)


@needs_lexicon
def test_a_masked_english_model_trains_on_masks_and_is_evaluated_beside_its_baselines(tmp_path):
    pytest.importorskip("wordfreq")
    preset = replace(train.presets(TextTokenizer().vocab_size)["english-mlm"], steps=4, pool_size=200, warmup=2)
    tokenizer = train.tokenizer_for(preset)
    batch = next(train.batches(preset, tokenizer, 0))
    masked = batch.inputs == tokenizer.mask_id
    assert masked.any() and (batch.targets[masked] != IGNORE).all()  # a masked piece is a target
    path = train.train_preset(preset, tmp_path, progress=False)
    model, card = load_checkpoint(path)
    assert isinstance(text_tokenizer(card), SubwordTokenizer)  # the pages read it with its own tokenizer
    metrics = english_eval.evaluate_english(model.eval(), card, n=4, n_pairs=2)
    assert set(metrics["headline"]) == {"agreement_out_of_template", "minimal_pairs", "masked_acc", "it_referent_head"}
    assert 0 < metrics["masked_token_majority"] < 1 and metrics["masked_token_majority_word"]
    found = metrics["it_reference"]
    assert found["n"] == found["chosen_on"] == english_eval.N_IT_SENTENCES
    assert found["always_first"] == found["always_second"] == 0.5
    assert found["accuracy"] == found["per_head"][found["layer"]][found["head"]]


@pytest.mark.parametrize("task", ["english-lm", "english-mlm"])
def test_the_evaluation_of_a_broad_english_model_is_english_evals(monkeypatch, task):
    monkeypatch.setattr(english_eval, "evaluate_english", lambda model, card: {"read by": card.task})
    card = ModelCard("english", task, train.text_config(subword.VOCAB_SIZE), "")
    assert evaluate(None, card, TextTokenizer()) == {"read by": task}
