"""Pretrained models a user has (core/model/pretrained.py): tiny GPT-2, BERT, DistilBERT and ViT models built from configs
with random weights, saved as Hugging Face saves them, opened through the app's own path (core.model.registry), and every
recorded array compared with the library's own forward pass to float32 rounding; the toggles that apply to them;
nothing fetched; the shared hook names against TransformerLens 4.3."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from pretrained_models import SAVERS, TINY_IMAGE, VIT_MEAN, VIT_STD, cache_model

from core.model import pretrained, registry
from core.model.run import TextInputError, record_text, text_tokenizer

TEXT = "the keys to the old cabinet are on the table ."
ATOL = 2e-5  # float32 rounding over a 2-layer model


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, str]:
    """family -> the folder a tiny model of it was saved to."""
    root = tmp_path_factory.mktemp("pretrained")
    return {family: str(save(root / family)) for family, save in SAVERS.items()}


def opened(folder: str):
    """The model as the app opens it (the registry's door), and its card."""
    return registry.load_model(pretrained.PREFIX + folder)


def library_run(folder: str, inputs: torch.Tensor):
    library = pretrained.library_model(folder)
    with torch.no_grad():
        if library.config.model_type == "vit":
            mean, std = torch.tensor(VIT_MEAN)[None, :, None, None], torch.tensor(VIT_STD)[None, :, None, None]
            return library(pixel_values=(inputs - mean) / std, output_attentions=True, output_hidden_states=True)
        return library(input_ids=inputs, output_attentions=True, output_hidden_states=True)


def recorded_and_library(folder: str):
    model, card = opened(folder)
    if card.task == "pretrained-image":
        size = TINY_IMAGE["image_size"]
        inputs = torch.rand(1, 3, size, size, generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            recording = model(inputs, record=True).recording
    else:
        recording = record_text(model, TEXT, card=card)
        inputs = torch.tensor([recording.meta["ids"]])
    return model, recording, library_run(folder, inputs)


@pytest.mark.parametrize("family", list(SAVERS))
def test_every_pattern_stream_and_logit_equals_the_librarys_own_forward_pass(folders, family):
    model, rec, out = recorded_and_library(folders[family])
    assert len(out.attentions) == rec.n_layers == 2
    for layer, attention in enumerate(out.attentions):  # output_attentions: [B, H, N, N], row = query
        np.testing.assert_allclose(rec.pattern(layer), attention[0].numpy(), atol=1e-6)
        np.testing.assert_allclose(rec.pattern(layer).sum(-1), 1.0, atol=1e-5)
    hidden = [h[0].numpy() for h in out.hidden_states]  # the stream into each block, then after the last
    ours = [rec["blocks.0.hook_resid_pre"]] + [rec[f"blocks.{layer}.hook_resid_post"] for layer in range(2)]
    if family == "gpt2":  # GPT-2's last hidden state is after its final LayerNorm
        ln = model.ln_final
        ours[-1] = rec["ln_final.hook_normalized"] * ln.weight.detach().numpy() + ln.bias.detach().numpy()
    for mine, theirs in zip(ours, hidden, strict=True):
        np.testing.assert_allclose(mine, theirs, atol=ATOL)
    np.testing.assert_allclose(rec["logits"], out.logits[0].numpy(), atol=ATOL)


def test_a_pretrained_gpt2_keeps_the_residual_stream_a_sum_of_its_parts(folders):
    """Biases and all: the final stream is embed + positions + every sublayer's output."""
    from core.lessons.lens import residual_decomposition

    _, rec, _ = recorded_and_library(folders["gpt2"])
    assert residual_decomposition(rec).max_abs_error < 1e-5


def test_bert_records_its_segment_embedding_and_embedding_norm_as_transformerlens_names_them(folders):
    model, rec, _ = recorded_and_library(folders["bert"])
    total = rec["hook_embed"] + rec["hook_pos_embed"] + rec["hook_token_type_embed"]
    ln = model.ln_embed
    standardised = (total - total.mean(-1, keepdims=True)) / rec["embed_ln.hook_scale"]
    np.testing.assert_allclose(rec["embed_ln.hook_normalized"], standardised, atol=1e-5)
    np.testing.assert_allclose(rec["blocks.0.hook_resid_pre"],
                               standardised * ln.weight.detach().numpy() + ln.bias.detach().numpy(), atol=1e-5)


def test_switching_gpt2s_learned_positions_off_is_the_library_model_without_them(folders):
    """The position-encoding ablation is parameter-free to remove: GPT-2 with pe="none" computes exactly what the
    library computes with its position table zeroed."""
    model, card = opened(folders["gpt2"])
    rec = record_text(model, TEXT, pe="none", card=card)
    assert not rec["hook_pos_embed"].any()
    library = pretrained.library_model(folders["gpt2"])
    with torch.no_grad():
        library.transformer.wpe.weight.zero_()
        out = library(input_ids=torch.tensor([rec.meta["ids"]]), output_attentions=True)
    np.testing.assert_allclose(rec["logits"], out.logits[0].numpy(), atol=ATOL)
    np.testing.assert_allclose(rec.pattern(1), out.attentions[1][0].numpy(), atol=1e-6)


@pytest.mark.parametrize("mask, visible", [("none", lambda i, j: True), ("window", lambda i, j: 0 <= i - j < 3)])
def test_mask_ablations_on_gpt2_hide_exactly_the_keys_they_say(folders, mask, visible):
    from core.model.masks import MaskSpec

    model, card = opened(folders["gpt2"])
    rec = record_text(model, TEXT, mask=MaskSpec(mask, 3, True, 4), card=card)
    n = rec.n_tokens
    allowed = np.array([[visible(i, j) for j in range(n)] for i in range(n)])
    for layer in range(2):
        pattern = rec.pattern(layer)
        assert (pattern[:, ~allowed] == 0).all()
        assert (pattern[:, allowed] > 0).all()
        np.testing.assert_allclose(pattern.sum(-1), 1.0, atol=1e-5)


def test_tokenizers_show_subword_pieces_as_the_model_reads_them(folders):
    gpt2 = text_tokenizer(opened(folders["gpt2"])[1]).encode(TEXT)
    assert gpt2.tokens[0] == "<|endoftext|>" and "".join(gpt2.tokens[1:]) == TEXT  # byte-level pieces, spaces kept
    assert any(piece.startswith(" ") for piece in gpt2.tokens) and not any(gpt2.is_unknown)
    bert = text_tokenizer(opened(folders["bert"])[1]).encode(TEXT + " zebra🦓")
    assert bert.tokens[0] == "[CLS]" and bert.tokens[-1] == "[SEP]"
    assert any(piece.startswith("##") for piece in bert.tokens)  # word pieces shown as such
    assert bert.is_unknown[-2] and bert.tokens[-2] == "[UNK]"


def test_text_past_a_pretrained_models_context_is_refused_with_a_message(folders):
    model, card = opened(folders["gpt2"])
    with pytest.raises(TextInputError, match="context length is 64"):
        record_text(model, "the keys . " * 40, card=card)


def test_a_name_not_in_the_cache_is_never_fetched_and_says_how_to(monkeypatch):
    monkeypatch.delenv(pretrained.ALLOW_DOWNLOADS_ENV, raising=False)
    with pytest.raises(pretrained.PretrainedError, match="hf download openai-community/gpt2") as caught:
        pretrained.card_for("openai-community/gpt2")
    assert pretrained.ALLOW_DOWNLOADS_ENV in str(caught.value)
    for bad in ("../etc", "gpt2; rm -rf", "/no/such/folder"):
        with pytest.raises(pretrained.PretrainedError):
            pretrained.card_for(bad)


def test_cached_models_are_listed_by_repo_id_and_open_by_it(hf_cache):
    cache_model("tiny-org/tiny-gpt2", "gpt2")
    cache_model("tiny-org/tiny-vit", "vit")
    assert set(pretrained.cached_sources()) == {"tiny-org/tiny-gpt2", "tiny-org/tiny-vit"}
    registry._pretrained.clear()  # the list is kept for a minute: read it now
    tasks = {card.name: card.task for card in registry.pretrained_cards()}
    assert tasks["hf:tiny-org/tiny-gpt2"] == "pretrained-lm" and tasks["hf:tiny-org/tiny-vit"] == "pretrained-image"
    _model, card = registry.load_model("hf:tiny-org/tiny-gpt2")
    assert card.config.n_layers == 2 and "'tiny-org/tiny-gpt2'" in card.description


def test_a_checkpoint_without_its_heads_weights_is_refused(tmp_path):
    """A bare BertModel folder has no MLM head: the library would invent one at random; the app says so instead."""
    from transformers import BertConfig, BertModel

    BertModel(BertConfig(vocab_size=50, hidden_size=16, num_attention_heads=2, num_hidden_layers=1,
                         intermediate_size=32)).save_pretrained(tmp_path)
    with pytest.raises(pretrained.PretrainedError, match="lacks weights"):
        pretrained.load(str(tmp_path))


def test_families_and_options_we_would_compute_differently_are_refused():
    from transformers import BertConfig, GPT2Config, LlamaConfig

    with pytest.raises(pretrained.PretrainedError, match="llama"):
        pretrained.model_config(LlamaConfig())
    with pytest.raises(pretrained.PretrainedError, match="relative"):
        pretrained.model_config(BertConfig(position_embedding_type="relative_key"))
    with pytest.raises(pretrained.PretrainedError, match="activation"):
        pretrained.model_config(GPT2Config(activation_function="relu"))


# ---------------------------------------------------------------------------------------------------------
# The names we share with TransformerLens 4.3 mean what it means by them
# ---------------------------------------------------------------------------------------------------------

# Documented in core/model/recording.py: TransformerBridge hooks BERT's whole attention module (so its attention output
# is after the residual sum and TokenNorm), and its hook_embed alias is the embeddings' output after their TokenNorm
BERT_DIFFERENT = {"hook_attn_out": None, "hook_resid_mid": None, "hook_embed": "embed.hook_out",
                  "hook_token_type_embed": "token_type_embed.hook_out"}


def shared_names(rec, cache) -> list[str]:
    return sorted(set(rec.names) & set(cache.keys()))


@pytest.mark.parametrize("family", ["gpt2", "bert"])
def test_every_name_shared_with_transformerlens_means_what_it_means_there(folders, family):
    from transformer_lens.model_bridge import TransformerBridge

    bridge = TransformerBridge.boot_transformers(folders[family], device="cpu")
    model, card = opened(folders[family])
    rec = record_text(model, TEXT, card=card)
    with torch.no_grad():
        _, cache = bridge.run_with_cache(torch.tensor([rec.meta["ids"]]))
    names = shared_names(rec, cache)
    expected = {"hook_embed", "hook_pos_embed", "logits", "blocks.0.attn.hook_pattern", "blocks.0.ln1.hook_scale",
                "blocks.0.ln1.hook_normalized", "blocks.1.mlp.hook_post", "blocks.1.hook_resid_post"}
    assert expected - {"logits"} <= set(names), sorted(set(cache.keys()))
    if family == "bert":
        assert {"embed_ln.hook_normalized", "ln_final.hook_normalized"} <= set(names)
        for ours, theirs in BERT_DIFFERENT.items():  # where the meaning is the same under another name
            if theirs is not None:
                np.testing.assert_allclose(rec[ours], cache[theirs][0].detach().numpy(), atol=1e-6, err_msg=ours)
    for name in names:
        if family == "bert" and name.split(".")[-1] in BERT_DIFFERENT:
            continue
        theirs = cache[name][0].detach().numpy()
        ours = rec[name]
        assert ours.shape == theirs.shape, name
        if name.endswith("hook_attn_scores"):  # masked: -inf here, the dtype's most negative number there
            masked = np.isneginf(ours)
            assert (theirs[masked] < -1e30).all() and not (theirs[~masked] < -1e30).any(), name
            if family == "gpt2":  # TransformerBridge's BERT scores are off (core/model/recording.py): ours are q.k/√K
                np.testing.assert_allclose(ours[~masked], theirs[~masked], atol=1e-5, err_msg=name)
            continue
        np.testing.assert_allclose(ours, theirs, atol=1e-4, err_msg=name)


@pytest.mark.parametrize("family", ["gpt2", "bert"])
def test_the_maths_recomputes_a_pretrained_block_biases_and_all(folders, family):
    """core.lessons.maths, step by step in the paper's layout, with b_Q, b_K, b_V, b_O and the model's own GELU: every step
    equals the recording."""
    from core.lessons.maths import layer_maths

    model, card = opened(folders[family])
    rec = record_text(model, TEXT, card=card)
    for layer in range(2):
        maths = layer_maths(model, rec, layer)
        for head in range(model.cfg.n_heads):
            checked = [step for step in maths.checks(head) if step.recorded is not None]
            assert len(checked) >= 8
            assert maths.max_diff(head) < 1e-4, [(s.title, s.max_diff) for s in checked]


def test_the_command_line_records_a_pretrained_model_and_refuses_an_unknown_one(folders, tmp_path, capsys):
    from core.record import main

    out = tmp_path / "rec.npz"
    assert main(["--model", f"hf:{folders['gpt2']}", "--text", TEXT, "--out", str(out)]) == 0
    assert np.load(out)["blocks.1.attn.hook_pattern"].shape[0] == 4
    assert main(["--model", "hf:nobody/nothing", "--text", TEXT, "--out", str(out)]) == 2
    assert "hf download nobody/nothing" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------------
# A hostile student's folder (issue 36, findings 4 and 7)
# ---------------------------------------------------------------------------------------------------------

def test_every_spelling_of_one_folder_is_one_model_opened_once(folders):
    folder = folders["gpt2"]
    parent, name = folder.rsplit("/", 1)
    spellings = [folder, folder + "/", "/" + folder, f"{parent}/./{name}", f"{parent}/../{parent.rsplit('/', 1)[1]}/{name}"]
    assert {pretrained.card_for(spelling).name for spelling in spellings} == {pretrained.PREFIX + folder}
    assert len({id(pretrained.load(spelling)) for spelling in spellings}) == 1


def test_a_folder_that_cannot_be_opened_gets_one_message_whatever_the_reason(tmp_path, monkeypatch):
    """Missing, a file, empty, hidden, outside the roots, unreadable config: one message, naming no full path, so a
    reply tells nothing of what is on the server."""
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "empty").mkdir()
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "config.json").write_text('{"model_type": "gpt2"}')
    (tmp_path / "not-json").mkdir()
    (tmp_path / "not-json" / "config.json").write_text("{" * 100_000)
    (tmp_path / "llama").mkdir()
    (tmp_path / "llama" / "config.json").write_text('{"model_type": "llama"}')
    messages = set()
    for name in ("missing", "a-file", "empty", ".ssh", "not-json", "llama"):
        with pytest.raises(pretrained.PretrainedError) as caught:
            pretrained.card_for(str(tmp_path / name))
        assert str(tmp_path) not in str(caught.value)
        messages.add(str(caught.value).replace(repr(name), "NAME"))
    monkeypatch.setenv(pretrained.ROOTS_ENV, str(tmp_path / "empty"))
    for outside in ("/etc", "/root/.ssh", "~", str(tmp_path / "llama"), str(tmp_path / "empty") + "/../llama"):
        with pytest.raises(pretrained.PretrainedError) as caught:
            pretrained.card_for(outside)
        assert "/" not in str(caught.value).split("(")[0].replace("/etc", "")  # only the folder's own name
        messages.add(str(caught.value).replace(repr(pretrained.Path(outside).name or outside), "NAME"))
    assert len(messages) == 1, messages


def crafted_gpt2(folder, **sizes):
    """A GPT-2 config.json with the sizes given (nothing else in the folder)."""
    import json

    folder.mkdir()
    config = {"model_type": "gpt2", "n_embd": 32, "n_head": 4, "n_layer": 2, "n_positions": 64, "vocab_size": 300}
    (folder / "config.json").write_text(json.dumps(config | sizes))
    return str(folder)


@pytest.mark.parametrize("sizes, message", [
    ({"n_layer": 10**6}, "n_layers is 1000000; the app opens models with n_layers up to 48"),
    ({"n_embd": 2**20, "n_head": 2**10}, "d_model is 1048576"),
    ({"vocab_size": 10**9}, "vocab_size is 1000000000"),
    ({"n_positions": 10**7}, "max_len is 10000000"),
    ({"n_head": 4096, "n_embd": 4096 * 4}, "d_model"),
    ({"n_embd": 1600, "n_head": 25, "n_layer": 48}, "1,47\\d million weights"),  # GPT-2 XL: past the default
    ({"n_layer": -3}, "n_layers must be at least 1"),
    ({"n_layer": "many"}, "holds no config.json of a model the app can read"),  # the library refuses it
    ({"n_embd": 30, "n_head": 4}, "cannot be opened here"),  # 30 is not a multiple of 4
])
def test_a_config_past_the_limits_is_refused_before_anything_is_built(tmp_path, sizes, message):
    folder = crafted_gpt2(tmp_path / "big-1", **sizes)
    with pytest.raises(pretrained.PretrainedError, match=message):
        pretrained.load(folder)


def test_a_checkpoint_the_library_cannot_read_is_one_message_never_a_traceback(tmp_path, folders):
    """Weights that are not safetensors, a truncated file, a pickle: PretrainedError naming no path."""
    import shutil

    for name, weights in (("garbage", b"\x00" * 100), ("truncated", None), ("pickle", b"\x80\x04K\x01.")):
        folder = tmp_path / name
        shutil.copytree(folders["gpt2"], folder)
        target = folder / "model.safetensors"
        if weights is None:
            target.write_bytes(target.read_bytes()[:200])
        elif name == "pickle":
            target.unlink()
            (folder / "pytorch_model.bin").write_bytes(weights)
        else:
            target.write_bytes(weights)
        with pytest.raises(pretrained.PretrainedError) as caught:
            pretrained.load(str(folder))
        assert str(tmp_path) not in str(caught.value)
