"""Interventions (core.model.interventions) and what they measure (core.lessons.interventions): invariants that hold
whatever the weights, on bundled and tiny random models, pre- and post-LN, and a cross-check against TransformerLens."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tiny_models import tiny_model

from core.lessons import interventions as lessons
from core.model.interventions import Ablation, AttentionEdit, Head, Intervention, InterventionError, Patch
from core.model.recording import block_hook
from core.model.registry import load_model
from core.model.run import record_intervened, record_text, text_tokenizer, tokenizer
from core.tokenizers.subword import SubwordTokenizer

TEXT, CONTRAST = "the keys to the old cabinet", "the key to the old cabinet"
CONTRASTS = [CONTRAST, "the keys to the new cabinet", "the boxes to the old cabinet", "the keys to the old table",
             "the dogs to the old cabinet", "a keys to the old cabinet"]


@pytest.fixture(scope="module", params=["lm-rope", "lm-alibi", "lm-relative"])
def bundled(request):
    return load_model(request.param)


def every_head(cfg) -> list[Head]:
    return [Head(layer, head) for layer in range(cfg.n_layers) for head in range(cfg.n_heads)]


def assert_same_recording(a, b):
    assert a.names == b.names
    for name in a.names:
        assert torch.equal(a.tensors[name], b.tensors[name]), name


def test_no_intervention_and_patching_from_the_same_text_change_nothing_bit_for_bit(bundled):
    model, card = bundled
    clean = record_text(model, TEXT, card=card)
    assert_same_recording(clean, record_intervened(model, TEXT, Intervention(), card=card))
    everything = Intervention(patches=(Patch("embed"),) + tuple(
        Patch("head", h.layer, h.head) for h in every_head(model.cfg)) + tuple(
        Patch(site, layer) for layer in range(model.cfg.n_layers) for site in ("mlp", "resid")))
    assert_same_recording(clean, record_intervened(model, TEXT, everything, source=clean, card=card))


def test_patching_every_head_the_mlps_and_the_embedding_from_b_into_a_gives_bs_logits(bundled):
    model, card = bundled
    a, b = record_text(model, TEXT, card=card), record_text(model, CONTRAST, card=card)
    assert not np.allclose(a["logits"], b["logits"], atol=1e-3)
    heads_and_mlps = tuple(Patch("head", h.layer, h.head) for h in every_head(model.cfg)) + tuple(
        Patch("mlp", layer) for layer in range(model.cfg.n_layers))
    patched = record_intervened(model, TEXT, Intervention(patches=(Patch("embed"),) + heads_and_mlps), source=b,
                                card=card)
    np.testing.assert_allclose(patched["logits"], b["logits"], atol=1e-5, rtol=0)
    without_embedding = record_intervened(model, TEXT, Intervention(patches=heads_and_mlps), source=b, card=card)
    assert not np.allclose(without_embedding["logits"], b["logits"], atol=1e-3)  # the embedding is a part too
    stream = record_intervened(model, TEXT, Intervention(patches=(Patch("resid", model.cfg.n_layers - 1),)), source=b,
                               card=card)
    np.testing.assert_allclose(stream["logits"], b["logits"], atol=1e-5, rtol=0)


@pytest.mark.parametrize("changes", [dict(), dict(pos_encoding="rope"), dict(attn_bias=True)])
def test_direct_logit_attributions_add_up_to_the_logit_difference(changes):
    model = tiny_model(**changes)
    recording = record_text(model, TEXT)
    chosen = lessons.candidates(model, recording, tokenizer(), "are", "is")
    attribution = lessons.direct_logit_attribution(model, recording, chosen)
    assert abs(attribution.total - attribution.logit_difference) < 1e-4
    assert attribution.heads.shape == (2, 2) and np.abs(attribution.heads).sum() > 1e-3
    parts = lessons._stream_parts(model, recording, chosen.position)
    final_stream = recording[block_hook(model.cfg.n_layers - 1, "hook_resid_post")][chosen.position]
    np.testing.assert_allclose(sum(parts.values()).numpy(), final_stream, atol=1e-5)  # the parts: the stream, apart


def test_attributions_of_an_ablated_pass_add_up_too_and_the_ablated_head_gives_exactly_nothing():
    model, card = load_model("lm-rope")
    ablated = record_intervened(model, TEXT, Intervention(ablations=(Ablation(Head(2, 1)),)), card=card)
    chosen = lessons.candidates(model, ablated, tokenizer(), "are", "is")
    attribution = lessons.direct_logit_attribution(model, ablated, chosen)
    assert abs(attribution.total - attribution.logit_difference) < 1e-4
    assert attribution.value("L2H1") == 0.0


def test_direct_logit_attribution_is_refused_for_a_post_ln_model():
    model = tiny_model(norm="post")
    recording = record_text(model, TEXT)
    chosen = lessons.candidates(model, recording, tokenizer(), "are", "is")
    with pytest.raises(InterventionError, match="post-LN"):
        lessons.direct_logit_attribution(model, recording, chosen)


def test_zero_ablation_zeroes_the_head_and_changes_only_later_layers(bundled):
    model, card = bundled
    clean = record_text(model, TEXT, card=card)
    ablated = record_intervened(model, TEXT, Intervention(ablations=(Ablation(Head(1, 2)),)), card=card)
    assert ablated.meta["intervention"] == "ablate L1H2"
    assert (ablated[block_hook(1, "attn.hook_z")][:, 2] == 0).all()
    assert np.array_equal(ablated[block_hook(1, "attn.hook_z")][:, [0, 1, 3]], clean[block_hook(1, "attn.hook_z")][:, [0, 1, 3]])
    for layer in range(2):
        assert np.array_equal(ablated.pattern(layer), clean.pattern(layer))
    assert not np.allclose(ablated.pattern(2), clean.pattern(2), atol=1e-6)
    assert not np.allclose(ablated["logits"], clean["logits"], atol=1e-4)


@pytest.mark.parametrize("name", ["lm-rope", "english-long"])
def test_a_mean_ablation_averages_over_texts_in_the_language_the_model_reads(name):
    """The grammar's documents for a model of its words, broad English for a byte-level BPE model: every reference
    text is read whole (no unknown piece), so a head's mean is over typical input, not over [UNK]s."""
    model, card = load_model(name)
    tok = text_tokenizer(card)
    texts = lessons.reference_texts(tok)
    assert len(texts) == 16 and len(set(texts)) == 16
    assert not any(any(tok.encode(text).is_unknown) for text in texts)
    assert (texts[0][0].isupper() and texts[0].endswith(".")) == isinstance(tok, SubwordTokenizer)  # typed English


def test_mean_ablation_puts_the_heads_mean_output_at_every_position():
    model, card = load_model("lm-rope")
    means = lessons.head_means(model, tokenizer(), lessons.reference_texts(tokenizer(), 4))
    alone = [lessons.head_means(model, tokenizer(), [text]) for text in lessons.reference_texts(tokenizer(), 4)]
    counts = [len(tokenizer().encode(text).ids) for text in lessons.reference_texts(tokenizer(), 4)]
    expected = sum(m[Head(0, 3)] * c for m, c in zip(alone, counts, strict=True)) / sum(counts)
    torch.testing.assert_close(means[Head(0, 3)], expected, atol=1e-5, rtol=0)  # padding left out of the mean
    ablated = record_intervened(model, TEXT, Intervention(ablations=(Ablation(Head(0, 3), "mean"),)), means=means,
                                card=card)
    np.testing.assert_array_equal(ablated[block_hook(0, "attn.hook_z")][:, 3],
                                  np.broadcast_to(means[Head(0, 3)].numpy(), (ablated.n_tokens, model.cfg.head_dim)))


def test_a_forced_attention_row_is_exactly_what_was_asked_and_z_follows_it(bundled):
    model, card = bundled
    forced = record_intervened(model, TEXT, Intervention(edits=(AttentionEdit(Head(1, 0), query=5, key=2),)),
                               card=card)
    row = forced.pattern(1)[0, 5]
    assert row[2] == 1.0 and row.sum() == 1.0 and np.count_nonzero(row) == 1
    np.testing.assert_array_equal(forced[block_hook(1, "attn.hook_z")][5, 0], forced[block_hook(1, "attn.hook_v")][2, 0])
    given = (0.5, 0.25, 0.25, 0, 0, 0, 0)
    edited = record_intervened(model, TEXT, Intervention(edits=(AttentionEdit(Head(1, 0), query=6, row=given),)),
                               card=card)
    np.testing.assert_array_equal(edited.pattern(1)[0, 6], np.array(given, dtype=np.float32))
    assert edited.pattern(1)[0, 6].sum() == 1.0
    v = edited[block_hook(1, "attn.hook_v")][:, 0]
    np.testing.assert_allclose(edited[block_hook(1, "attn.hook_z")][6, 0], np.array(given, np.float32) @ v, atol=1e-6)


@pytest.mark.parametrize("intervention, message", [
    (Intervention(edits=(AttentionEdit(Head(0, 0), query=2, key=5),)), "the mask hides token 5 from token 2"),
    (Intervention(edits=(AttentionEdit(Head(0, 0), query=9, key=0),)), "not in this text"),
    (Intervention(edits=(AttentionEdit(Head(0, 0), query=1, row=(0.5, 0.6, 0, 0, 0, 0, 0)),)), "sum to 1"),
    (Intervention(edits=(AttentionEdit(Head(0, 0), query=1, row=(1.0,)),)), "7 weights"),
    (Intervention(ablations=(Ablation(Head(7, 0)),)), "L0H0 to L3H3, not L7H0"),
    (Intervention(ablations=(Ablation(Head(0, 0), "mean"),)), "mean output"),
    (Intervention(patches=(Patch("head", 0, 1),)), "second text"),
])
def test_an_intervention_the_model_cannot_take_is_refused_in_one_clear_line(intervention, message):
    model, card = load_model("lm-rope")
    with pytest.raises(InterventionError, match=message):
        record_intervened(model, TEXT, intervention, card=card)


def test_patching_every_position_needs_texts_of_the_same_length_and_one_position_needs_it_in_both():
    model, card = load_model("lm-rope")
    longer = record_text(model, TEXT + " is", card=card)
    with pytest.raises(InterventionError, match="8 tokens and this one 7"):
        record_intervened(model, TEXT, Intervention(patches=(Patch("head", 0, 1),)), source=longer, card=card)
    one = record_intervened(model, TEXT, Intervention(patches=(Patch("resid", 1, position=2),)), source=longer,
                            card=card)
    np.testing.assert_array_equal(one[block_hook(1, "hook_resid_pre")][2], longer[block_hook(1, "hook_resid_pre")][2])
    with pytest.raises(InterventionError, match="not in both texts"):
        record_intervened(model, TEXT, Intervention(patches=(Patch("resid", 1, position=7),)), source=longer, card=card)


@pytest.mark.parametrize("text", ["L1H2", "l1h2", " L10H0 "])
def test_heads_are_named_as_on_the_pages(text):
    head = Head.parse(text)
    assert str(Head.parse(str(head))) == str(head)


@pytest.mark.parametrize("text", ["", "L1", "H2", "L-1H2", "L1H2x", "x" * 10_000, "L1H2;rm"])
def test_a_bad_head_name_is_refused(text):
    with pytest.raises(InterventionError, match="not a head"):
        Head.parse(text)


@pytest.mark.parametrize("change", lessons.CHANGES)
def test_the_batched_effects_equal_one_intervened_pass_per_head(change, monkeypatch):
    monkeypatch.setattr(lessons, "MAX_BATCH_FLOATS", 7 * 335 * 5)  # batches of 5 copies: the last one is partial
    model, card = load_model("lm-rope")
    clean, source = record_text(model, TEXT, card=card), record_text(model, CONTRAST, card=card)
    chosen = lessons.candidates(model, clean, tokenizer(), "are", "is")
    means = lessons.head_means(model, tokenizer(), lessons.reference_texts(tokenizer(), 4))
    effects = lessons.ablation_effects(model, clean.meta["ids"], chosen, change, means=means, source=source, key=2)
    for head in (Head(0, 1), Head(2, 3), Head(3, 0)):
        one = lessons.intervention_for(head, change, query=chosen.position, key=2)
        alone = record_intervened(model, TEXT, one, source=source, means=means, card=card)
        expected = chosen.difference(alone["logits"]) - chosen.difference(clean["logits"])
        assert abs(effects[head.layer, head.head] - expected) < 1e-4, head


def test_the_lesson_names_the_head_whose_removal_costs_the_target_most():
    effects = np.array([[0.1, -0.2], [-3.0, 0.4]])
    assert lessons.carrying_head(effects) == Head(1, 0)
    assert lessons.strongest(effects, 2) == [(Head(1, 0), -3.0), (Head(0, 1), -0.2)]


def test_candidates_are_single_tokens_and_the_masked_model_predicts_at_its_mask():
    model, card = load_model("mlm-learned")
    recording = record_text(model, "the keys to the cabinet [MASK] on the table .", card=card)
    chosen = lessons.candidates(model, recording, tokenizer(), "are", "is")
    assert chosen.position == 6
    with pytest.raises(InterventionError, match="one token"):
        lessons.candidates(model, recording, tokenizer(), "xylophone", "is")
    with pytest.raises(InterventionError, match="same token"):
        lessons.candidates(model, recording, tokenizer(), "is", "is")
    without = record_text(model, "the keys to the cabinet are on the table .", card=card)
    with pytest.raises(InterventionError, match=r"\[MASK\]"):
        lessons.candidates(model, without, tokenizer(), "are", "is")


def test_a_byte_level_bpe_shows_a_typed_mask_with_its_space_and_the_model_predicts_there():
    tok = SubwordTokenizer()
    tokens = tok.encode("The keys to the old box [MASK] red.").tokens
    assert tokens[7] == " [MASK]"  # lstrip: the mask takes the space before it, as RoBERTa's does
    assert lessons.predicting_position(tiny_model(mask="none", head="masked_token"), tokens, tok) == 7


# ---------------------------------------------------------------------------------------------------------
# The same ablation and patch in TransformerLens
# ---------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def gpt2_folder(tmp_path_factory):
    from pretrained_models import save_gpt2

    return str(save_gpt2(tmp_path_factory.mktemp("gpt2") / "gpt2"))


def test_ablation_and_patching_match_transformerlens_on_a_gpt2_built_from_a_config(gpt2_folder):
    from transformer_lens.model_bridge import TransformerBridge

    from core.model import pretrained, registry

    model, card = registry.load_model(pretrained.PREFIX + gpt2_folder)
    a = record_text(model, TEXT, card=card)
    b = next(recording for recording in (record_text(model, text, card=card) for text in CONTRASTS)
             if recording.n_tokens == a.n_tokens)  # this tiny tokenizer splits words unlike ours
    bridge = TransformerBridge.boot_transformers(gpt2_folder, device="cpu")
    tokens = torch.tensor([a.meta["ids"]])

    def zero_head(z, hook):  # TransformerLens's hook_z: [B, N, H, K], as ours
        z[:, :, 2] = 0.0
        return z

    def patch_head(z, hook):
        z[:, :, 1] = b.tensors[block_hook(0, "attn.hook_z")][None, :, 1]
        return z

    with torch.no_grad():
        theirs_ablated = bridge.run_with_hooks(tokens, fwd_hooks=[("blocks.1.attn.hook_z", zero_head)])[0].numpy()
        theirs_patched = bridge.run_with_hooks(tokens, fwd_hooks=[("blocks.0.attn.hook_z", patch_head)])[0].numpy()
    ours_ablated = record_intervened(model, TEXT, Intervention(ablations=(Ablation(Head(1, 2)),)), card=card)
    ours_patched = record_intervened(model, TEXT, Intervention(patches=(Patch("head", 0, 1),)), source=b, card=card)
    for ours, theirs in ((ours_ablated, theirs_ablated), (ours_patched, theirs_patched)):
        assert not np.allclose(theirs, a["logits"], atol=1e-4)  # the hook took effect there too
        np.testing.assert_allclose(ours["logits"], theirs, atol=1e-5, rtol=0)
    chosen = lessons.Candidates("x", "y", 5, 7, a.n_tokens - 1)
    attribution = lessons.direct_logit_attribution(model, a, chosen)  # with GPT-2's biases
    assert abs(attribution.total - attribution.logit_difference) < 1e-4


# ---------------------------------------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------------------------------------

def test_the_command_line_records_an_ablation_a_patch_and_an_edit(tmp_path, capsys):
    from core.model.recording import Recording
    from core.record import main

    model, card = load_model("lm-rope")
    expected = record_intervened(model, TEXT, Intervention(
        ablations=(Ablation(Head(1, 2), "mean"),), edits=(AttentionEdit(Head(2, 0), 5, 1),),
        patches=(Patch("head", 0, 1), Patch("resid", 2, position=3))),
        source=record_text(model, CONTRAST, card=card), card=card,
        means=lessons.head_means(model, tokenizer(), lessons.reference_texts(tokenizer())))
    assert main(["--model", "lm-rope", "--text", TEXT, "--ablate", "L1H2", "--ablation", "mean", "--attend",
                 "L2H0:5:1", "--patch", "L0H1", "--patch", "resid2@3", "--patch-from", CONTRAST,
                 "--out", str(tmp_path / "r")]) == 0
    assert "ablate L1H2 (mean)" in capsys.readouterr().out
    written = Recording.load_npz(tmp_path / "r.npz")
    assert written.meta["intervention"] == expected.meta["intervention"] and written.meta["source_text"] == CONTRAST
    for name in expected.names:
        np.testing.assert_array_equal(written[name], expected[name], err_msg=name)


@pytest.mark.parametrize("args, message", [
    (["--ablate", "L9H0"], "L0H0 to L3H3, not L9H0"),
    (["--ablate", "head2"], "not a head"),
    (["--patch", "L0H1"], "--patch needs --patch-from"),
    (["--patch", "mlp", "--patch-from", CONTRAST], "not a patch"),
    (["--patch", "L0H1", "--patch-from", TEXT + " is"], "8 tokens and this one 7"),
    (["--attend", "L0H0:2:5"], "the mask hides token 5 from token 2"),
])
def test_a_bad_intervention_on_the_command_line_is_one_clear_line(args, message, tmp_path, capsys):
    from core.record import main

    assert main(["--model", "lm-rope", "--text", TEXT, "--out", str(tmp_path / "r"), *args]) == 2
    error = capsys.readouterr().err.strip()
    assert message in error and len(error.splitlines()) == 1
    assert not (tmp_path / "r.npz").exists()


def test_the_prediction_and_pattern_shift_are_the_passes_own_numbers():
    model, card = load_model("lm-rope")
    clean = record_text(model, TEXT, card=card)
    chosen = lessons.candidates(model, clean, tokenizer(), "are", "is")
    predicted = lessons.prediction(clean["logits"], chosen)
    probabilities = torch.softmax(torch.tensor(clean["logits"][chosen.position], dtype=torch.float64), -1)
    assert predicted.difference == chosen.difference(clean["logits"])
    assert abs(predicted.p_target - float(probabilities[chosen.target_id])) < 1e-12
    assert predicted.likeliest == int(probabilities.argmax())
    ablated = record_intervened(model, TEXT, Intervention(ablations=(Ablation(Head(2, 1)),)), card=card)
    shift = lessons.pattern_shift(clean, ablated)
    assert (shift[:3] == 0).all() and shift[3].max() > 0  # only the layer after the ablated one's moves
    np.testing.assert_array_equal(lessons.attention_on(clean, 6, 2), clean.patterns()[:, :, 6, 2])
