"""Tiny GPT-2, BERT, DistilBERT and ViT checkpoints built from configs with random weights and saved to a folder
the way Hugging Face saves them, with tokenizers trained here on our generated grammar corpus: what a user's
folder holds, without a hub."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from core.data import grammar

SIZES = dict(hidden=32, heads=4, layers=2, mlp=64, positions=64)
TINY_IMAGE = dict(image_size=16, patch_size=4, labels=("circle", "square", "triangle"))
VIT_MEAN, VIT_STD = (0.4, 0.5, 0.6), (0.2, 0.25, 0.3)  # not ViT's default 0.5, so the folding is tested


def _corpus() -> list[str]:
    return grammar.generate_documents(200, seed=7)


def _gpt2_tokenizer():
    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPT2TokenizerFast

    trained = ByteLevelBPETokenizer()
    trained.train_from_iterator(_corpus(), vocab_size=300, special_tokens=["<|endoftext|>"], show_progress=False)
    return GPT2TokenizerFast(tokenizer_object=trained._tokenizer, bos_token="<|endoftext|>",
                             eos_token="<|endoftext|>", unk_token="<|endoftext|>")


def _bert_tokenizer():
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertTokenizerFast

    trained = BertWordPieceTokenizer(lowercase=True)
    trained.train_from_iterator(_corpus(), vocab_size=200, show_progress=False,
                                special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    return BertTokenizerFast(tokenizer_object=trained._tokenizer, unk_token="[UNK]", sep_token="[SEP]",
                             pad_token="[PAD]", cls_token="[CLS]", mask_token="[MASK]")


def save_gpt2(folder: Path, seed: int = 0) -> Path:
    from transformers import GPT2Config, GPT2LMHeadModel

    tokenizer = _gpt2_tokenizer()
    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=len(tokenizer), n_embd=SIZES["hidden"], n_head=SIZES["heads"],
                        n_layer=SIZES["layers"], n_positions=SIZES["positions"], bos_token_id=tokenizer.bos_token_id,
                        eos_token_id=tokenizer.eos_token_id)
    _randomise_norms(GPT2LMHeadModel(config)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def save_bert(folder: Path, seed: int = 0) -> Path:
    from transformers import BertConfig, BertForMaskedLM

    tokenizer = _bert_tokenizer()
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=SIZES["hidden"], num_attention_heads=SIZES["heads"],
                        num_hidden_layers=SIZES["layers"], intermediate_size=SIZES["mlp"],
                        max_position_embeddings=SIZES["positions"], pad_token_id=tokenizer.pad_token_id)
    _randomise_norms(BertForMaskedLM(config)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def save_distilbert(folder: Path, seed: int = 0) -> Path:
    from transformers import DistilBertConfig, DistilBertForMaskedLM

    tokenizer = _bert_tokenizer()
    torch.manual_seed(seed)
    config = DistilBertConfig(vocab_size=len(tokenizer), dim=SIZES["hidden"], n_heads=SIZES["heads"],
                              n_layers=SIZES["layers"], hidden_dim=SIZES["mlp"],
                              max_position_embeddings=SIZES["positions"], pad_token_id=tokenizer.pad_token_id)
    _randomise_norms(DistilBertForMaskedLM(config)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def save_vit(folder: Path, seed: int = 0) -> Path:
    from transformers import ViTConfig, ViTForImageClassification

    torch.manual_seed(seed)
    labels = TINY_IMAGE["labels"]
    config = ViTConfig(hidden_size=SIZES["hidden"], num_attention_heads=SIZES["heads"],
                       num_hidden_layers=SIZES["layers"], intermediate_size=SIZES["mlp"],
                       image_size=TINY_IMAGE["image_size"], patch_size=TINY_IMAGE["patch_size"],
                       id2label=dict(enumerate(labels)), label2id={label: i for i, label in enumerate(labels)})
    _randomise_norms(ViTForImageClassification(config)).save_pretrained(folder)
    size = TINY_IMAGE["image_size"]  # the image processor's file, written as the library writes it
    (folder / "preprocessor_config.json").write_text(json.dumps({
        "image_processor_type": "ViTImageProcessor", "do_resize": True, "size": {"height": size, "width": size},
        "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True, "image_mean": list(VIT_MEAN),
        "image_std": list(VIT_STD)}))
    return folder


SAVERS = {"gpt2": save_gpt2, "bert": save_bert, "distilbert": save_distilbert, "vit": save_vit}


def _randomise_norms(model):
    """A freshly built model has every LayerNorm at γ = 1, β = 0 and zero biases, which would hide a γ, β or bias
    applied in the wrong place: give them random values, as a trained model has."""
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if parameter.dim() == 1:
                parameter.add_(torch.randn_like(parameter) * 0.1)
    return model.eval()


def cache_model(repo_id: str, family: str) -> Path:
    """Save a tiny `family` model into the Hugging Face cache ($HF_HUB_CACHE, tests/conftest.py) as the hub client
    would have downloaded it under `repo_id` (models--org--name/snapshots/<commit>, refs/main); its folder."""
    import os

    repo = Path(os.environ["HF_HUB_CACHE"]) / f"models--{repo_id.replace('/', '--')}"
    commit = "0" * 40
    snapshot = SAVERS[family](repo / "snapshots" / commit)
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(commit)
    return snapshot
