"""The encoder–decoder (core/model/seq2seq.py), the English -> Tailish task (core/data/translation.py), its training and
evaluation (core/training/train_seq2seq.py), and the bundled model in assets/seq2seq."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
import torch

from core.data import translation
from core.data.grammar import ADJECTIVES, COPULA_FORMS, NAMES, PAST_VERBS, PLURAL_NOUNS, PREPOSITIONS, SINGULAR_NOUNS
from core.data.translation import (HELDOUT_SEED, TRAIN_SEED, NotInGrammarError, TranslationInputError, generate_pairs,
                                   read_source, translate, vocabularies)
from core.model.config import ConfigError
from core.model.seq2seq import (SEQ2SEQ_DIR, Seq2SeqCard, Seq2SeqConfig, Seq2SeqTransformer, alignment_mass,
                                list_seq2seq_cards, load_seq2seq, run_translation, save_seq2seq)
from core.training.train_seq2seq import PRESETS, evaluate, make_batch, train_steps

TINY = dict(src_vocab_size=40, tgt_vocab_size=30, d_model=32, n_heads=2, n_encoder_layers=2, n_decoder_layers=2,
            d_mlp=48, max_src_len=12, max_tgt_len=10)
BOS, EOS = 2, 3
torch.set_num_threads(1)  # small models: more threads than free cores only slows them


def tiny_model(seed: int = 0, **changes) -> Seq2SeqTransformer:
    """Random weights, perturbed so that attention is far from uniform and γ, β matter."""
    torch.manual_seed(seed)
    model = Seq2SeqTransformer(Seq2SeqConfig(**{**TINY, **changes}))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.3)
    return model.eval()


def ids(n: int, vocab: int, seed: int) -> torch.Tensor:
    return torch.randint(6, vocab, (1, n), generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module")
def recording():
    model = tiny_model()
    return model(ids(7, 40, 1), torch.cat([torch.tensor([[BOS]]), ids(5, 30, 2)], dim=1), record=True).recording


# ---------------------------------------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind, shape", [("encoder", (2, 7, 7)), ("decoder", (2, 6, 6)), ("cross", (2, 6, 7))])
def test_every_attention_has_rows_summing_to_one(recording, kind, shape):
    for layer in range(2):
        pattern = recording.pattern(kind, layer)
        assert pattern.shape == shape
        assert np.allclose(pattern.sum(-1), 1.0, atol=1e-6)
        assert (pattern >= 0).all()


def test_names_follow_transformer_lens_with_the_stack_in_front(recording):
    for name in ("encoder.blocks.0.attn.hook_pattern", "decoder.blocks.1.attn.hook_pattern",
                 "decoder.blocks.0.cross_attn.hook_pattern", "encoder.blocks.1.hook_resid_post",
                 "decoder.blocks.0.hook_resid_cross", "decoder.blocks.0.ln_cross.hook_scale",
                 "encoder.ln_final.hook_normalized",
                 "decoder.hook_embed", "logits"):
        assert name in recording.names
    assert recording["logits"].shape == (6, 30)


def test_decoder_self_attention_is_causal_with_masked_weights_exactly_zero(recording):
    above = np.triu(np.ones((6, 6), dtype=bool), k=1)
    for layer in range(2):
        pattern, scores = recording.pattern("decoder", layer), recording.scores("decoder", layer)
        assert (pattern[:, above] == 0.0).all()
        assert np.isneginf(scores[:, above]).all() and np.isfinite(scores[:, ~above]).all()
        assert (pattern[:, ~above] > 0).all()
    assert (recording.pattern("encoder", 0) > 0).all()  # the encoder sees both ways


def test_cross_attention_is_softmax_of_decoder_queries_against_encoder_keys(recording):
    """Recompute A = softmax(q k^T / sqrt(K)) from the recorded q (decoder) and k (encoder output) and z = A v."""
    prefix = "decoder.blocks.1.cross_attn"
    q, k, v = (torch.from_numpy(recording[f"{prefix}.hook_{x}"]) for x in "qkv")  # [T, H, K], [S, H, K]
    assert q.shape == (6, 2, 16) and k.shape == (7, 2, 16)
    pattern = torch.softmax(torch.einsum("thk,shk->hts", q, k) / math.sqrt(16), dim=-1)
    assert torch.allclose(pattern, torch.from_numpy(recording[f"{prefix}.hook_pattern"]), atol=1e-6)
    z = torch.einsum("hts,shk->thk", pattern, v)
    assert torch.allclose(z, torch.from_numpy(recording[f"{prefix}.hook_z"]), atol=1e-6)


def test_keys_and_values_of_cross_attention_come_from_the_encoder_output():
    """Changing the target leaves the cross-attention keys unchanged; changing the source changes them."""
    model = tiny_model()
    src, tgt = ids(6, 40, 3), torch.cat([torch.tensor([[BOS]]), ids(4, 30, 4)], dim=1)
    base = model(src, tgt, record=True).recording
    other_target = model(src, torch.cat([tgt[:, :1], ids(4, 30, 5)], dim=1), record=True).recording
    other_source = model(ids(6, 40, 6), tgt, record=True).recording
    key = "decoder.blocks.0.cross_attn.hook_k"
    assert np.array_equal(base[key], other_target[key])
    assert not np.allclose(base[key], other_source[key])


def test_decoder_residual_stream_is_the_sum_of_its_three_sublayers(recording):
    p = "decoder.blocks.1"
    total = (recording[f"{p}.hook_resid_pre"] + recording[f"{p}.hook_attn_out"] + recording[f"{p}.hook_cross_attn_out"]
             + recording[f"{p}.hook_mlp_out"])
    assert np.allclose(total, recording[f"{p}.hook_resid_post"], atol=1e-5)
    assert np.array_equal(recording["decoder.blocks.0.hook_resid_post"], recording["decoder.blocks.1.hook_resid_pre"])


def test_the_decoder_has_the_incremental_property():
    """Row t of the logits depends on decoder inputs <= t only: a prefix gives the same rows, and changing a later
    input changes no earlier row (seed 001 §4.1, what greedy generation relies on)."""
    model = tiny_model()
    src, tgt = ids(8, 40, 7), torch.cat([torch.tensor([[BOS]]), ids(7, 30, 8)], dim=1)
    full = model(src, tgt).logits
    for t in range(1, 8):
        assert torch.allclose(model(src, tgt[:, :t]).logits, full[:, :t], atol=1e-5)
    changed = tgt.clone()
    changed[0, 5] = (changed[0, 5] + 1) % 30
    after = model(src, changed).logits
    assert torch.allclose(after[:, :5], full[:, :5], atol=1e-6) and not torch.allclose(after[:, 5:], full[:, 5:])


def test_greedy_generation_is_the_argmax_of_one_pass_over_its_own_output():
    """run_translation records free generation in one pass; by the incremental property it is what each step saw."""
    model = tiny_model(seed=1)
    source = ids(6, 40, 9)[0].tolist()
    run = run_translation(model, source, BOS, EOS)
    assert 1 <= len(run.generated) <= TINY["max_tgt_len"] - 1
    assert run.free["logits"].argmax(-1).tolist() == run.generated
    assert run.forced is None and run.first_divergence is None and all(s.reference is None for s in run.steps())


def test_padding_in_a_batch_changes_nothing():
    """Two sources of unequal length in one padded batch give each one's own logits; padded keys get weight 0."""
    model = tiny_model()
    short, long = ids(4, 40, 10), ids(7, 40, 11)
    tgt = torch.cat([torch.tensor([[BOS]]), ids(3, 30, 12)], dim=1)
    src = torch.cat([torch.cat([short, torch.zeros(1, 3, dtype=torch.long)], dim=1), long])
    valid = torch.tensor([[True] * 4 + [False] * 3, [True] * 7])
    batched = model(src, tgt.expand(2, -1), src_valid=valid).logits
    assert torch.allclose(batched[0], model(short, tgt).logits[0], atol=1e-5)
    assert torch.allclose(batched[1], model(long, tgt).logits[0], atol=1e-5)
    generated = model.generate(src, BOS, EOS, src_valid=valid)
    assert generated == [model.generate(short, BOS, EOS)[0], model.generate(long, BOS, EOS)[0]]


def test_run_translation_compares_teacher_forcing_with_free_generation():
    model = tiny_model(seed=2)
    source = ids(6, 40, 13)[0].tolist()
    free = run_translation(model, source, BOS, EOS).generated
    reference = [*free[:2], (free[2] + 1) % 30 if free[2] != EOS else 7, EOS]  # leaves free generation at step 2
    run = run_translation(model, source, BOS, EOS, reference)
    assert run.generated == free and run.first_divergence == 2
    steps = run.steps()
    assert [s.free_wrong for s in steps[:3]] == [False, False, True]
    assert [s.forced for s in steps[:len(reference)]] == run.forced["logits"].argmax(-1).tolist()
    assert run.forced["logits"].shape == (len(reference), 30)
    assert all(0 < s.forced_p <= 1 for s in steps[:len(reference)])


def test_recording_is_for_one_sentence():
    model = tiny_model()
    with pytest.raises(ValueError, match="batch of one"):
        model(ids(3, 40, 0).expand(2, -1), torch.full((2, 2), BOS), record=True)
    with pytest.raises(ValueError, match="reads 1 to 12"):
        model(ids(13, 40, 0), torch.full((1, 2), BOS))


def test_sinusoidal_positions_have_no_parameters():
    learned, sinusoidal = tiny_model(), tiny_model(pos_encoding="sinusoidal")
    assert learned.n_parameters - sinusoidal.n_parameters == (12 + 10) * 32
    pattern = sinusoidal(ids(5, 40, 0), torch.full((1, 3), BOS), record=True).recording.pattern("cross", 1)
    assert np.allclose(pattern.sum(-1), 1.0, atol=1e-6)


@pytest.mark.parametrize("changes, message", [
    (dict(d_model=30, n_heads=4), "not divisible"),
    (dict(pos_encoding="rope"), "pos_encoding='rope'"),
    (dict(tgt_vocab_size=1), "tgt_vocab_size must be at least 2"),
    (dict(n_decoder_layers=0), "n_decoder_layers must be at least 1"),
    (dict(d_model=33, n_heads=1, pos_encoding="sinusoidal"), "D must be even"),
    (dict(dropout=1.0), "dropout"),
])
def test_config_rejects_what_cannot_be_built(changes, message):
    with pytest.raises(ConfigError, match=message):
        Seq2SeqConfig(**{**TINY, **changes})


def test_config_is_frozen_and_round_trips():
    cfg = Seq2SeqConfig(**TINY)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.d_model = 64
    assert Seq2SeqConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ConfigError, match="unknown config fields: colour"):
        Seq2SeqConfig.from_dict({**cfg.to_dict(), "colour": 1})


def test_save_and_load_give_the_same_model(tmp_path):
    model = tiny_model()
    save_seq2seq(model, Seq2SeqCard("tiny", "translation", model.cfg, "test"), tmp_path)
    (tmp_path / "tokenizer.json").write_text("{}")  # a JSON file without weights is not a card
    assert [card.name for card in list_seq2seq_cards(tmp_path)] == ["tiny"]
    loaded, card = load_seq2seq("tiny", tmp_path)
    src, tgt = ids(5, 40, 0), torch.full((1, 3), BOS)
    assert card.config == model.cfg and torch.equal(loaded(src, tgt).logits, model(src, tgt).logits)
    with pytest.raises(FileNotFoundError):
        load_seq2seq("../tiny", tmp_path)


def test_alignment_mass_reads_the_weight_on_each_aligned_source_token():
    one_hot = np.zeros((2, 3, 4))
    one_hot[0, [0, 1, 2], [2, 0, 3]] = 1.0
    one_hot[1] = 0.25
    assert np.allclose(alignment_mass(one_hot, [2, 0, 3]), [1.0, 0.25])
    assert np.isclose(alignment_mass(one_hot[0], [2, 0, 1]), 2 / 3)


# ---------------------------------------------------------------------------------------------------------
# The translation task
# ---------------------------------------------------------------------------------------------------------

def test_rules_on_worked_examples():
    cases = {
        "the dog that the children love chased two old cats .": "dog ka ke child -i ka love cat -i old du chase -ta .",
        "the big old key opened my small red box .": "key old big ka box red small mi open -ta .",
        "mary is happy .": "mary happy es .",
        "these mice near a wooden table were sad .": "mouse -i ti table wooden un near sad es -ta .",
        "she sleeps .": "la sleep .",
        "a lion that chases the wolves runs .": "lion un ke wolf -i ka chase run .",
    }
    for english, tailish in cases.items():
        assert translate(english.split()).target_text == tailish


def _allowed(word: str) -> set[str]:
    """Independently of the translator: the Tailish tokens an English word may give."""
    if word in PLURAL_NOUNS:
        return {PLURAL_NOUNS[word], "-i"}
    if word in COPULA_FORMS:
        return {"es", "-ta"} if word in ("was", "were") else {"es"}
    if word in translation.VERB_STEMS:
        return {translation.VERB_STEMS[word], "-ta"} if word in PAST_VERBS else {translation.VERB_STEMS[word]}
    if word in SINGULAR_NOUNS or word in ADJECTIVES or word in PREPOSITIONS or word in NAMES or word == ".":
        return {word}
    return {translation.DETERMINERS.get(word) or translation.PRONOUN_WORDS.get(word) or {"that": "ke"}[word]}


def test_alignment_points_every_target_word_at_the_english_word_it_comes_from():
    for pair in generate_pairs(300, TRAIN_SEED):
        assert len(pair.alignment) == len(pair.target)
        for word, s in zip(pair.target, pair.alignment):
            assert word in _allowed(pair.source[s]), (pair.source_text, word, pair.source[s])
        assert sorted(set(pair.alignment)) == list(range(len(pair.source)))  # every English word is translated
        assert pair.target[-1] == "." and pair.alignment[-1] == len(pair.source) - 1


def test_alignment_is_far_from_monotonic():
    pairs = generate_pairs(300, TRAIN_SEED)
    backwards = sum(b < a for pair in pairs for a, b in zip(pair.alignment, pair.alignment[1:]))
    assert backwards / sum(len(p.target) for p in pairs) > 0.2
    for pair in pairs:  # the main verb comes after every word of its object or adjective
        verb_at = pair.alignment.index(pair.main_verb)
        assert all(pair.alignment.index(s) < verb_at for s in range(pair.main_verb + 1, len(pair.source) - 1))


def test_pairs_are_deterministic_and_the_splits_disjoint():
    assert generate_pairs(100, TRAIN_SEED) == generate_pairs(100, TRAIN_SEED)
    train, heldout = generate_pairs(2000, TRAIN_SEED), generate_pairs(200, HELDOUT_SEED)
    assert not {p.source for p in train} & {p.source for p in heldout}
    assert all(translation.is_heldout(p.source) for p in heldout)
    assert not any(translation.is_heldout(p.source) for p in train)
    assert {len(p.source) for p in train} >= set(range(4, 15))  # short and long sentences alike


def test_parse_says_why_a_sentence_is_outside_the_grammar():
    with pytest.raises(NotInGrammarError, match="expected '.' to end the sentence after 'mary found the keys'"):
        translate("mary found the keys near the box .".split())
    with pytest.raises(NotInGrammarError, match="expected a noun after 'the old'"):
        translate("the old runs .".split())
    with pytest.raises(NotInGrammarError, match="one sentence only"):
        translate("the dog runs . the cat runs .".split())


def test_read_source_refuses_what_the_encoder_cannot_read_and_reads_unknown_words_as_unk():
    with pytest.raises(TranslationInputError, match="empty"):
        read_source("  ", 24)
    zebra = read_source("the Zebra runs .", 24)  # as the text explorer reads it: [UNK], flagged, shown as typed
    assert zebra.words == ("the", "[UNK]", "runs", ".", "[EOS]") and zebra.ids[1] == vocabularies().source.unk_id
    assert zebra.shown == ("the", "Zebra", "runs", ".", "[EOS]") and zebra.unknown == (False, True, False, False, False)
    assert zebra.pair is None
    assert zebra.not_in_grammar == "1 of its words is outside the grammar's vocabulary, read as [UNK]"
    symbols = read_source("3 | 3", 24)  # the algorithmic tasks' symbols: the app's tokenizer has them, the encoder not
    assert symbols.words == ("[UNK]",) * 3 + ("[EOS]",) and symbols.not_in_grammar.startswith("3 of its words")
    with pytest.raises(TranslationInputError, match="at most 24 tokens"):
        read_source("the dog runs . " * 6, 24)
    typed = read_source("The dog runs.", 24)
    assert typed.words == ("the", "dog", "runs", ".", "[EOS]") and typed.pair.target_text == "dog ka run ."
    outside = read_source("mary found the keys near the box .", 24)
    assert outside.pair is None and "near" in outside.not_in_grammar and len(outside.ids) == 9


def test_target_tokenizer_is_the_saved_one_and_covers_tailish():
    built = translation.build_target_tokenizer()
    vocab = translation.vocabularies()
    assert json.loads(translation.TARGET_TOKENIZER_PATH.read_text())["model"]["vocab"] == built.get_vocab()
    assert (vocab.target.bos_id, vocab.target.eos_id, vocab.target.pad_id) == (
        vocab.source.bos_id, vocab.source.eos_id, vocab.source.pad_id)
    assert vocab.target.unk_id not in vocab.target_ids(translation.target_words())
    replaced = {*translation.DETERMINERS.values(), *translation.PRONOUN_WORDS.values(), "ke", "es", "-i", "-ta"}
    assert not replaced & translation.source_words()  # new Tailish words are not English words


# ---------------------------------------------------------------------------------------------------------
# Training, evaluation and the bundled model
# ---------------------------------------------------------------------------------------------------------

def test_a_few_steps_of_training_lower_the_loss():
    vocab = translation.vocabularies()
    preset = PRESETS["tiny-test"]
    model = Seq2SeqTransformer(preset.config(vocab))
    losses = [stats.loss for stats in train_steps(model, preset, vocab)]
    assert len(losses) == preset.steps and np.mean(losses[-5:]) < np.mean(losses[:5]) - 0.5
    result = evaluate(model, generate_pairs(20, HELDOUT_SEED), vocab, batch_size=8)
    assert result.alignment.shape == (1, 2) and 0 <= result.chance < 1 and 0 <= result.token_accuracy <= 1


def test_a_trained_model_is_measured_on_its_weights_as_stored(tmp_path, monkeypatch):
    """half_weights (tailish's recipe): the weights are stored in float16, and the card's held-out figures are those
    of the stored (rounded) weights, not of the float32 ones that trained."""
    from safetensors.torch import load_file

    import core.training.train_seq2seq as train_seq2seq

    measured_weights = []
    original_evaluate = train_seq2seq.evaluate
    monkeypatch.setattr(train_seq2seq, "evaluate", lambda model, *a, **k: measured_weights.append(
        [p.detach().clone() for p in model.parameters()]) or original_evaluate(model, *a, **k))
    preset = PRESETS["tiny-test"]
    assert preset.half_weights
    path = train_seq2seq.train_preset(preset, tmp_path, progress=False, n_heldout=40)
    assert len(measured_weights) == 1 and all(torch.equal(p, p.half().float()) for p in measured_weights[0])
    stored = load_file(path.with_suffix(".safetensors"))
    assert all(v.dtype == torch.float16 for v in stored.values() if v.is_floating_point())
    model, card = load_seq2seq(preset.name, tmp_path)
    measured = evaluate(model, generate_pairs(40, HELDOUT_SEED), translation.vocabularies()).to_dict()
    assert card.metrics["heldout"] == json.loads(json.dumps(measured)) and card.training["stored"] == "float16"


def test_make_batch_pads_and_aligns_eos_to_eos():
    vocab = translation.vocabularies()
    pairs = generate_pairs(3, TRAIN_SEED)
    batch = make_batch(pairs, vocab)
    for b, pair in enumerate(pairs):
        n = len(pair.target) + 1
        assert batch.decoder_input[b, 0] == vocab.target.bos_id and batch.targets[b, n - 1] == vocab.target.eos_id
        assert batch.alignments[b][-1] == len(pair.source) == int(batch.src_valid[b].sum()) - 1


def test_the_bundled_model_reaches_its_recorded_held_out_scores():
    cards = list_seq2seq_cards(SEQ2SEQ_DIR)
    assert [card.name for card in cards] == ["tailish"]
    model, card = load_seq2seq("tailish")
    weights = SEQ2SEQ_DIR / "tailish.safetensors"
    assert weights.stat().st_size < 4 * 2 ** 20 and model.n_parameters == card.training["parameters"]
    recorded = card.metrics["heldout"]
    assert recorded["n"] >= 1000 and recorded["exact_match"] > 0.9
    sample = evaluate(model, generate_pairs(100, HELDOUT_SEED), translation.vocabularies())
    slack = 3 * math.sqrt(recorded["exact_match"] * (1 - recorded["exact_match"]) / 100) + 0.01
    assert sample.exact_match >= recorded["exact_match"] - slack
    assert sample.token_accuracy >= recorded["token_accuracy"] - slack
    best = recorded["alignment"]["best"]
    assert sample.alignment[best["layer"], best["head"]] >= best["score"] - 0.05
    assert best["score"] > 3 * recorded["alignment"]["chance"]
