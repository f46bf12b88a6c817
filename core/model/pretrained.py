"""Pretrained models the user has — GPT-2, BERT, DistilBERT and ViT checkpoints from Hugging Face — run as our own
Transformer, so every page and every recording works on them unchanged (one door in: core/model/registry.py).

The checkpoint is read with `transformers` (optional: `pip install -r requirements-hf.txt`; this is the only module
that imports it), then its weights are copied into a Transformer whose config says what the family needs
(biases in attention, GPT-2's tanh GELU, BERT's TokenNorm on the embeddings and its MLM head transform). The forward
pass is then ours, explicit and recorded; tests/test_pretrained.py checks every recorded pattern, stream and logit
against the library's own forward pass (output_attentions, hidden_states) to float32 rounding. (TransformerLens 4.3
wraps the library's own modules instead, its TransformerBridge; copying the weights into ours gives every toggle —
masks, positions off — and every page without a second code path.)

What is folded, exactly (sums the forward pass computes anyway):
- ViT's input normalisation (x - mean) / std per channel into the patch embedding, so the model reads pixels in
  [0, 1] like ours: W ((x - m) / s) + b = (W / s) x + (b - W m / s).
- GPT-2's tied unembedding has no bias: ours is zero.
BERT's token-type embedding of segment A (one text: token_type_ids = 0) is its own recorded vector,
hook_token_type_embed, as in TransformerLens.

Nothing is downloaded unless the user allows it (ALLOW_DOWNLOADS_ENV=1): a name that is not in the local
Hugging Face cache gets a message saying how to fetch it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch

from core.model.checkpoint import ModelCard
from core.model.config import ConfigError, ModelConfig
from core.model.transformer import Transformer
from core.tokenizers.words import Encoded

PREFIX = "hf:"  # a pretrained model's name in the app: "hf:gpt2", "hf:/path/to/folder"
FAMILIES = ("gpt2", "bert", "distilbert", "vit")  # config.json's model_type
TASKS = {"gpt2": "pretrained-lm", "bert": "pretrained-mlm", "distilbert": "pretrained-mlm", "vit": "pretrained-image"}
ALLOW_DOWNLOADS_ENV = "ATTENTION_LAB_ALLOW_DOWNLOADS"  # "1": a name not in the cache may be fetched from the hub
INSTALL_HINT = "pip install -r requirements-hf.txt"


class PretrainedError(ValueError):
    """A pretrained model that cannot be opened; str() is one clear line for the user."""


def available() -> bool:
    """Whether the optional `transformers` package is installed."""
    return importlib.util.find_spec("transformers") is not None


def downloads_allowed() -> bool:
    return os.environ.get(ALLOW_DOWNLOADS_ENV, "") == "1"


def is_pretrained(name: str) -> bool:
    return name.startswith(PREFIX)


def source_of(name: str) -> str:
    """"hf:gpt2" -> "gpt2"."""
    return name[len(PREFIX):]


def _require_transformers() -> None:
    if not available():
        raise PretrainedError(f"real models need the optional `transformers` package: `{INSTALL_HINT}`, "
                              "then restart the app")


# ---------------------------------------------------------------------------------------------------------
# Finding models: the local Hugging Face cache, or a folder
# ---------------------------------------------------------------------------------------------------------

def _read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def hub_cache() -> str:
    """The local Hugging Face cache: $HF_HUB_CACHE as it is now (huggingface_hub reads it once, at import)."""
    from huggingface_hub import constants

    return os.environ.get("HF_HUB_CACHE") or constants.HF_HUB_CACHE


def cached_sources() -> list[str]:
    """The repo ids in the local Hugging Face cache whose config is of a family we read, sorted; [] without
    `transformers` or a cache. Reads each snapshot's config.json only (no weights)."""
    if not available():
        return []
    from huggingface_hub import scan_cache_dir  # installed with transformers

    try:
        repos = scan_cache_dir(hub_cache()).repos
    except Exception:  # noqa: BLE001 - no cache folder yet, or an unreadable one: nothing cached
        return []
    found = []
    for repo in repos:
        if repo.repo_type != "model":
            continue
        for revision in repo.revisions:
            config = _read_json(Path(revision.snapshot_path) / "config.json")
            if config and config.get("model_type") in FAMILIES:
                found.append(repo.repo_id)
                break
    return sorted(found)


REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")  # "gpt2", "google/vit-base-patch16-224"
FETCHED = ["*.json", "*.safetensors", "*.txt", "*.model"]  # what a download takes: configs, weights, vocabularies


def is_folder(source: str) -> bool:
    """A folder is named by its absolute path (or ~/…); anything else is a repo id (never a path relative to the
    server's working directory)."""
    return source.startswith(("/", "~"))


ROOTS_ENV = "ATTENTION_LAB_MODEL_ROOTS"  # the folders (os.pathsep between) under which a model folder may be opened
MAX_CONFIG_BYTES = 1 << 20  # a config.json larger than this is not a model's (GPT-2's is 0.7 KB)


def model_roots() -> list[Path]:
    """Where model folders may be opened: $ATTENTION_LAB_MODEL_ROOTS, else the server user's home and the temporary
    folder (where a downloaded model usually lies); each resolved to its real path."""
    listed = os.environ.get(ROOTS_ENV)
    roots = listed.split(os.pathsep) if listed else [str(Path.home()), tempfile.gettempdir()]
    return [Path(os.path.realpath(os.path.expanduser(root))) for root in roots if root]


def unopenable(source: str) -> PretrainedError:
    """The one message for every folder that cannot be opened (missing, not a folder, unreadable, outside the roots,
    hidden, without a config of a family we read), so that a reply never tells which (issue 36, finding 7: an answer
    that differed for /root/.ssh told that it exists)."""
    return PretrainedError(f"there is no folder {Path(source).name or source!r} the app can open a model from "
                           "(a folder of GPT-2, BERT, DistilBERT or ViT files: config.json and model.safetensors, "
                           "in a folder this server opens models from)")


def canonical_source(source: str) -> str:
    """One spelling per model, so that each is opened and kept once: a folder's real path (symbolic links, "//",
    "..", "~" and a trailing "/" resolved), a repo id as typed. PretrainedError (unopenable) for a folder outside
    model_roots(), or with a hidden part (.ssh, .config): a model folder has no reason to be one."""
    if not is_folder(source):
        return source
    real = Path(os.path.realpath(os.path.expanduser(source)))
    inside = any(real == root or root in real.parents for root in model_roots())
    if not inside or any(part.startswith(".") for part in real.parts):
        raise unopenable(source)
    return str(real)


def _folder_config(source: str, folder: Path) -> dict:
    """The folder's config.json as a dict of one of FAMILIES, else unopenable(source): read by us, size-bounded,
    before the library sees it."""
    config = folder / "config.json"
    try:
        if not config.is_file() or config.stat().st_size > MAX_CONFIG_BYTES:
            raise unopenable(source)
        data = json.loads(config.read_text())
    except (OSError, ValueError, RecursionError):
        raise unopenable(source) from None
    if not isinstance(data, dict) or data.get("model_type") not in FAMILIES:
        raise unopenable(source)
    return data


def folder_of(source: str) -> Path:
    """The folder holding the model's files: the one named (canonical_source), or the repo's snapshot in the local
    Hugging Face cache (fetched first only where downloads are allowed)."""
    _require_transformers()
    if is_folder(source):
        folder = Path(canonical_source(source))
        if not folder.is_dir():
            raise unopenable(source)
        _folder_config(source, folder)
        return folder
    if not REPO_ID.fullmatch(source):
        raise PretrainedError(f"{source!r} is neither a folder (an absolute path) nor a model name such as gpt2")
    from huggingface_hub import snapshot_download  # installed with transformers

    try:
        return Path(snapshot_download(source, cache_dir=hub_cache(), local_files_only=not downloads_allowed(),
                                      allow_patterns=FETCHED))
    except Exception:  # noqa: BLE001 - huggingface_hub raises several kinds for "not there"
        if downloads_allowed():
            raise PretrainedError(f"{source!r} could not be fetched from the Hugging Face hub") from None
        raise PretrainedError(
            f"{source!r} is not in this computer's Hugging Face cache, and the app downloads nothing unless allowed. "
            f"Fetch it once with `hf download {source}` (or `huggingface-cli download {source}`), or start the app "
            f"with {ALLOW_DOWNLOADS_ENV}=1") from None


def _resolve_config(source: str):
    """The transformers config of `source` (a folder, or a repo id in the cache / on the hub if allowed). A config
    the library cannot read (crafted ones raise RecursionError, validation errors…) is one message, never a
    traceback, and quotes no path."""
    from transformers import AutoConfig

    folder = folder_of(source)
    try:
        return AutoConfig.from_pretrained(str(folder), local_files_only=True)
    except Exception:  # noqa: BLE001 - a crafted config.json raises whatever the library's parsing meets
        raise PretrainedError(f"{describe_source(source)} holds no config.json of a model the app can read") from None


# ---------------------------------------------------------------------------------------------------------
# Config: the family's options in our terms
# ---------------------------------------------------------------------------------------------------------

ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh"}


def _activation(name: str, family: str) -> str:
    if name not in ACTIVATIONS:
        raise PretrainedError(f"this {family} model uses the {name!r} activation; the app computes GELU only")
    return ACTIVATIONS[name]


# The largest of each size a model may have here: GPT-2 XL (48 layers, D = 1600, 25 heads), BERT-large (24, 1024,
# 16, D_mlp 4096, 30522 words), multilingual BERT (119547 words) and ViT-huge/14 (32, 1280, 16, 257 patches) fit.
# Checked before anything is built: a config.json with n_layer 10**6 kept a server busy building it (issue 36).
LIMITS = {"n_layers": 48, "d_model": 2048, "n_heads": 64, "d_mlp": 8192, "vocab_size": 262_144, "max_len": 8192,
          "n_classes": 22_000, "image_size": 1024}
MAX_PARAMETERS_ENV = "ATTENTION_LAB_MAX_PARAMETERS"  # the most weights a model opened here may have
MAX_PARAMETERS = 400_000_000  # GPT-2 medium (355 M) and BERT-large (335 M) fit, GPT-2 large (774 M) does not


def parameter_count(cfg: ModelConfig) -> int:
    """About how many weights a model of `cfg` holds: embeddings, each block's four D×D attention maps and two MLP
    maps, the unembedding (biases and norms, under 1%, left out)."""
    embeddings = (cfg.vocab_size + cfg.max_len) * cfg.d_model
    blocks = cfg.n_layers * (4 * cfg.d_model ** 2 + 2 * cfg.d_model * cfg.d_mlp)
    return embeddings + blocks + (cfg.vocab_size + cfg.n_classes) * cfg.d_model


def check_size(cfg: ModelConfig) -> None:
    """PretrainedError naming the first size past LIMITS, or weights past $ATTENTION_LAB_MAX_PARAMETERS."""
    for name, limit in LIMITS.items():
        value = getattr(cfg, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0 or value > limit:
            raise PretrainedError(f"its {name} is {str(value)[:20]}; the app opens models with {name} up to {limit}")
    limit = int(os.environ.get(MAX_PARAMETERS_ENV) or MAX_PARAMETERS)
    if (count := parameter_count(cfg)) > limit:
        raise PretrainedError(f"it has about {count / 1e6:,.0f} million weights; this server opens models of up to "
                              f"{limit / 1e6:,.0f} million ({MAX_PARAMETERS_ENV} sets it)")


def model_config(hf) -> ModelConfig:
    """Our ModelConfig for a transformers config of one of FAMILIES, within LIMITS; PretrainedError for anything
    we would compute differently from the library (so a loaded model is never silently another one), and for a
    config whose values make no model (a string for a size, a negative width)."""
    try:
        cfg = _family_config(hf)
    except PretrainedError:
        raise
    except ConfigError as error:
        raise PretrainedError(str(error)) from None
    except (TypeError, ValueError, AttributeError, ZeroDivisionError, OverflowError):
        raise PretrainedError("its config.json holds values that make no model the app can build") from None
    check_size(cfg)
    return cfg


def _family_config(hf) -> ModelConfig:
    family = hf.model_type
    if family not in FAMILIES:
        raise PretrainedError(f"the app reads GPT-2, BERT, DistilBERT and ViT models; this one is {family!r}")
    if family == "gpt2":
        if hf.scale_attn_by_inverse_layer_idx or hf.reorder_and_upcast_attn or not hf.scale_attn_weights:
            raise PretrainedError("this GPT-2 scales its attention in a way the app does not compute")
        return ModelConfig(d_model=hf.n_embd, n_heads=hf.n_head, n_layers=hf.n_layer, d_mlp=hf.n_inner or 4 * hf.n_embd,
                           max_len=hf.n_positions, vocab_size=hf.vocab_size, pos_encoding="learned", mask="causal",
                           norm="pre", head="next_token", ln_eps=hf.layer_norm_epsilon,
                           activation=_activation(hf.activation_function, family), attn_bias=True)
    if family == "bert":
        if getattr(hf, "position_embedding_type", "absolute") != "absolute":
            raise PretrainedError("this BERT uses relative position embeddings; the app reads absolute ones")
        return ModelConfig(d_model=hf.hidden_size, n_heads=hf.num_attention_heads, n_layers=hf.num_hidden_layers,
                           d_mlp=hf.intermediate_size, max_len=hf.max_position_embeddings, vocab_size=hf.vocab_size,
                           pos_encoding="learned", mask="none", norm="post", head="masked_token",
                           ln_eps=hf.layer_norm_eps, activation=_activation(hf.hidden_act, family), attn_bias=True,
                           segment_embed=hf.type_vocab_size > 0, embed_norm=True, head_transform=True)
    if family == "distilbert":
        return ModelConfig(d_model=hf.dim, n_heads=hf.n_heads, n_layers=hf.n_layers, d_mlp=hf.hidden_dim,
                           max_len=hf.max_position_embeddings, vocab_size=hf.vocab_size, pos_encoding="learned",
                           mask="none", norm="post", head="masked_token", ln_eps=1e-12,  # fixed in DistilBERT's code
                           activation=_activation(hf.activation, family), attn_bias=True, embed_norm=True,
                           head_transform=True)
    n_patches = (hf.image_size // hf.patch_size) ** 2
    return ModelConfig(d_model=hf.hidden_size, n_heads=hf.num_attention_heads, n_layers=hf.num_hidden_layers,
                       d_mlp=hf.intermediate_size, max_len=n_patches + 1, input="patches", image_size=hf.image_size,
                       patch_size=hf.patch_size, channels=hf.num_channels, n_classes=max(len(hf.id2label), 2),
                       pooling="cls", pos_encoding="learned", mask="none", norm="pre", head="classifier",
                       ln_eps=hf.layer_norm_eps, activation=_activation(hf.hidden_act, family), attn_bias=True)


# ---------------------------------------------------------------------------------------------------------
# Weights: the library's names -> ours
# ---------------------------------------------------------------------------------------------------------

def _linear(state: dict, ours: str, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
    state[f"{ours}.weight"] = weight
    if bias is not None:
        state[f"{ours}.bias"] = bias


def _norm(state: dict, ours: str, hf: dict, theirs: str) -> None:
    state[f"{ours}.weight"], state[f"{ours}.bias"] = hf[f"{theirs}.weight"], hf[f"{theirs}.bias"]


def _gpt2_state(hf: dict, cfg: ModelConfig) -> dict:
    """GPT-2's Conv1D layers compute x W + b (W is [in, out]): ours are nn.Linear, x Wᵀ + b, so W is transposed."""
    d = cfg.d_model
    state = {"embed.weight": hf["transformer.wte.weight"], "pos_embed.weight": hf["transformer.wpe.weight"],
             "unembed.weight": hf.get("lm_head.weight", hf["transformer.wte.weight"]),
             "unembed.bias": torch.zeros(cfg.vocab_size)}
    _norm(state, "ln_final", hf, "transformer.ln_f")
    for layer in range(cfg.n_layers):
        theirs, ours = f"transformer.h.{layer}", f"blocks.{layer}"
        qkv, qkv_bias = hf[f"{theirs}.attn.c_attn.weight"], hf[f"{theirs}.attn.c_attn.bias"]  # [D, 3D], [3D]
        for k, name in enumerate(("W_Q", "W_K", "W_V")):
            _linear(state, f"{ours}.attn.{name}", qkv[:, k * d:(k + 1) * d].T, qkv_bias[k * d:(k + 1) * d])
        _linear(state, f"{ours}.attn.W_O", hf[f"{theirs}.attn.c_proj.weight"].T, hf[f"{theirs}.attn.c_proj.bias"])
        _linear(state, f"{ours}.mlp.fc_in", hf[f"{theirs}.mlp.c_fc.weight"].T, hf[f"{theirs}.mlp.c_fc.bias"])
        _linear(state, f"{ours}.mlp.fc_out", hf[f"{theirs}.mlp.c_proj.weight"].T, hf[f"{theirs}.mlp.c_proj.bias"])
        _norm(state, f"{ours}.ln1", hf, f"{theirs}.ln_1")
        _norm(state, f"{ours}.ln2", hf, f"{theirs}.ln_2")
    return state


# per family: (embeddings, layer prefix, attention q k v o, ln1, MLP in, MLP out, ln2, head dense, head norm,
# unembedding weight, unembedding bias)
_ENCODER_NAMES = {
    "bert": ("bert.embeddings", "bert.encoder.layer",
             ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"),
             "attention.output.LayerNorm", "intermediate.dense", "output.dense", "output.LayerNorm",
             "cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm",
             "cls.predictions.decoder.weight", "cls.predictions.bias"),
    "distilbert": ("distilbert.embeddings", "distilbert.transformer.layer",
                   ("attention.q_lin", "attention.k_lin", "attention.v_lin", "attention.out_lin"),
                   "sa_layer_norm", "ffn.lin1", "ffn.lin2", "output_layer_norm",
                   "vocab_transform", "vocab_layer_norm", "vocab_projector.weight", "vocab_projector.bias"),
}


def _encoder_state(hf: dict, cfg: ModelConfig, family: str) -> dict:
    """BERT and DistilBERT: post-LN blocks, a TokenNorm on the embeddings, the MLM head's dense + TokenNorm."""
    embeddings, layers, attention, ln1, fc_in, fc_out, ln2, dense, head_norm, unembed, unembed_bias = (
        _ENCODER_NAMES[family])
    word = hf[f"{embeddings}.word_embeddings.weight"]
    state = {"embed.weight": word, "pos_embed.weight": hf[f"{embeddings}.position_embeddings.weight"],
             "unembed.weight": hf.get(unembed, word), "unembed.bias": hf[unembed_bias]}
    if cfg.segment_embed:  # one text: token_type_ids = 0, segment A, everywhere
        state["token_type_embed"] = hf[f"{embeddings}.token_type_embeddings.weight"][0]
    _norm(state, "ln_embed", hf, f"{embeddings}.LayerNorm")
    _linear(state, "head_dense", hf[f"{dense}.weight"], hf[f"{dense}.bias"])
    _norm(state, "head_ln", hf, head_norm)
    _blocks(state, hf, cfg, layers, attention, ln1, fc_in, fc_out, ln2)
    return state


def _blocks(state: dict, hf: dict, cfg: ModelConfig, layers: str, attention: tuple[str, ...], ln1: str, fc_in: str,
            fc_out: str, ln2: str) -> None:
    """Every block's attention (q, k, v, o), MLP and two TokenNorms, from modules named alike in each layer
    (nn.Linear both sides: no transposes)."""
    for layer in range(cfg.n_layers):
        theirs, ours = f"{layers}.{layer}", f"blocks.{layer}"
        for name, module in zip(("W_Q", "W_K", "W_V", "W_O"), attention):
            _linear(state, f"{ours}.attn.{name}", hf[f"{theirs}.{module}.weight"], hf[f"{theirs}.{module}.bias"])
        _linear(state, f"{ours}.mlp.fc_in", hf[f"{theirs}.{fc_in}.weight"], hf[f"{theirs}.{fc_in}.bias"])
        _linear(state, f"{ours}.mlp.fc_out", hf[f"{theirs}.{fc_out}.weight"], hf[f"{theirs}.{fc_out}.bias"])
        _norm(state, f"{ours}.ln1", hf, f"{theirs}.{ln1}")
        _norm(state, f"{ours}.ln2", hf, f"{theirs}.{ln2}")


# transformers 5 renamed ViT's modules in memory (checkpoints keep the names above): read either
_RENAMED = [(re.compile(pattern), classic) for pattern, classic in (
    (r"^vit\.layers\.", "vit.encoder.layer."), (r"\.attention\.q_proj\.", ".attention.attention.query."),
    (r"\.attention\.k_proj\.", ".attention.attention.key."), (r"\.attention\.v_proj\.", ".attention.attention.value."),
    (r"\.attention\.o_proj\.", ".attention.output.dense."), (r"\.mlp\.fc1\.", ".intermediate.dense."),
    (r"\.mlp\.fc2\.", ".output.dense."))]


def _classic_names(hf: dict) -> dict:
    """The state dict under the names its checkpoint files use, whichever transformers version built it."""
    renamed = {}
    for name, tensor in hf.items():
        for pattern, classic in _RENAMED:
            name = pattern.sub(classic, name)
        renamed[name] = tensor
    return renamed


def _vit_state(hf: dict, cfg: ModelConfig, mean: list[float], std: list[float]) -> dict:
    """ViT: the patch convolution (kernel = stride = p) is our linear map of each patch flattened in (C, p, p)
    order, with the image processor's normalisation folded in (module docstring)."""
    conv = hf["vit.embeddings.patch_embeddings.projection.weight"]  # [D, C, p, p]
    mean_t, std_t = torch.tensor(mean)[None, :, None, None], torch.tensor(std)[None, :, None, None]
    scaled = conv / std_t  # W / s
    state = {"patch_embed.weight": scaled.flatten(1),  # [D, C, p, p] -> [D, C*p*p]
             "patch_embed.bias": hf["vit.embeddings.patch_embeddings.projection.bias"] - (scaled * mean_t).sum((1, 2, 3)),
             "cls_token": hf["vit.embeddings.cls_token"],
             "pos_embed.weight": hf["vit.embeddings.position_embeddings"][0],  # [1, 1+N, D] -> [1+N, D]
             "unembed.weight": hf["classifier.weight"], "unembed.bias": hf["classifier.bias"]}
    _norm(state, "ln_final", hf, "vit.layernorm")
    _blocks(state, hf, cfg, "vit.encoder.layer", ("attention.attention.query", "attention.attention.key",
                                                  "attention.attention.value", "attention.output.dense"),
            "layernorm_before", "intermediate.dense", "output.dense", "layernorm_after")
    return state


def _auto_class(family: str):
    import transformers

    return {"gpt2": transformers.AutoModelForCausalLM, "bert": transformers.AutoModelForMaskedLM,
            "distilbert": transformers.AutoModelForMaskedLM,
            "vit": transformers.AutoModelForImageClassification}[family]


def check_weights_size(folder: Path) -> None:
    """PretrainedError when the folder's weight files hold more than MAX_PARAMETERS float32 weights could (a config
    that claims a small model beside 20 GB of weights)."""
    limit = 4 * int(os.environ.get(MAX_PARAMETERS_ENV) or MAX_PARAMETERS) * 1.1  # float32, plus headers and names
    if sum(path.stat().st_size for path in folder.glob("*.safetensors")) > limit:
        raise PretrainedError(f"its weight files are larger than a model of up to {limit / 4.4e6:,.0f} million "
                              "weights (the most this server opens)")


def library_model(source: str):
    """The checkpoint as the library itself builds it (eager attention, so it can return its patterns), in eval
    mode; PretrainedError when its head's weights are not in the checkpoint (the library would invent them)."""
    hf_config = _resolve_config(source)
    check_weights_size(folder_of(source))
    model, info = _auto_class(hf_config.model_type).from_pretrained(
        str(folder_of(source)), local_files_only=True, attn_implementation="eager", output_loading_info=True,
        use_safetensors=True)  # never a pickle (pytorch_model.bin): unpickling a stranger's file runs its code
    if info.get("missing_keys"):
        raise PretrainedError(f"the checkpoint lacks weights its {hf_config.model_type} head needs "
                              f"({', '.join(sorted(info['missing_keys'])[:3])}…): the app would have to invent them")
    return model.eval()


def _image_statistics(source: str) -> tuple[list[float], list[float]]:
    """The image processor's per-channel mean and std (preprocessor_config.json; ViT's 0.5 where it says none)."""
    processor = _read_json(folder_of(source) / "preprocessor_config.json") or {}
    if not processor.get("do_normalize", True):
        return [0.0] * 3, [1.0] * 3
    return list(processor.get("image_mean", [0.5] * 3)), list(processor.get("image_std", [0.5] * 3))


def convert(library, source: str = "") -> Transformer:
    """Our Transformer holding the library model's weights (eval mode)."""
    cfg = model_config(library.config)
    hf = _classic_names({name: tensor.detach().float() for name, tensor in library.state_dict().items()})
    family = library.config.model_type
    if family == "gpt2":
        state = _gpt2_state(hf, cfg)
    elif family == "vit":
        state = _vit_state(hf, cfg, *_image_statistics(source))
    else:
        state = _encoder_state(hf, cfg, family)
    model = Transformer(cfg)
    model.load_state_dict({name: tensor.contiguous() for name, tensor in state.items()})
    return model.eval()


# ---------------------------------------------------------------------------------------------------------
# Tokenizers: the checkpoint's own, with pieces shown as such
# ---------------------------------------------------------------------------------------------------------

class PretrainedTokenizer:
    """The checkpoint's tokenizer, with TextTokenizer's interface: encode() gives ids, the pieces as the model
    sees them (GPT-2's byte-level " the", BERT's "##ing") and which are unknown. GPT-2 gets its <|endoftext|>
    first (as TransformerLens prepends BOS); BERT its [CLS] … [SEP]."""

    def __init__(self, library_tokenizer, family: str):
        self._tokenizer = library_tokenizer
        self.family = family
        self.vocab_size = len(library_tokenizer)
        # GPT-2's byte-level pieces cover every text: its "unknown" token is <|endoftext|>, never read as unknown
        self.unk_id = None if family == "gpt2" else library_tokenizer.unk_token_id
        self.mask_id = library_tokenizer.mask_token_id
        self.mask_token = library_tokenizer.mask_token

    def encode(self, text: str, add_bos: bool = True) -> Encoded:
        ids = self._tokenizer(text, add_special_tokens=True)["input_ids"]
        bos = self._tokenizer.bos_token_id
        if add_bos and self.family == "gpt2" and bos is not None:
            ids = [bos, *ids]
        return Encoded(list(ids), [self.id_to_token(i) for i in ids], [i == self.unk_id for i in ids])

    def decode(self, ids) -> str:
        return self._tokenizer.decode(list(ids))

    def id_to_token(self, i: int) -> str:
        piece = self._tokenizer.convert_ids_to_tokens(int(i))
        if piece is None:
            raise IndexError(f"token id {i} out of range 0..{self.vocab_size - 1}")
        if self.family == "gpt2" and piece not in self._tokenizer.all_special_tokens:
            return self._tokenizer.convert_tokens_to_string([piece])  # byte-level "Ġthe" -> " the"
        return piece

    def token_to_id(self, s: str) -> int | None:
        i = self._tokenizer.convert_tokens_to_ids(s)
        return None if i is None or i == self.unk_id and s != self._tokenizer.unk_token else i


def library_tokenizer(source: str):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(folder_of(source)), local_files_only=True)
    except (OSError, ValueError):
        raise PretrainedError("the model's tokenizer could not be read") from None


# ---------------------------------------------------------------------------------------------------------
# The door: name -> (model, card, tokenizer)
# ---------------------------------------------------------------------------------------------------------

@dataclass
class Pretrained:
    model: Transformer
    card: ModelCard
    tokenizer: PretrainedTokenizer | None  # None for an image model (its class names: card.training["labels"])


def describe_source(source: str) -> str:
    """What a user sees of where the model came from: a repo id, or a folder's own name (never a full path)."""
    return f"the folder {Path(source).name!r}" if is_folder(source) else repr(source)


def card_for(source: str, hf_config=None) -> ModelCard:
    """The card of a pretrained model, from its config alone (cheap: no weights read), named by its
    canonical_source (so `big-1/`, `//big-1` and a link to big-1 are one model)."""
    source = canonical_source(source)
    hf_config = hf_config or _resolve_config(source)
    try:
        cfg = model_config(hf_config)
    except PretrainedError as error:
        raise PretrainedError(f"{describe_source(source)} cannot be opened here: {error}") from None
    family = hf_config.model_type
    words = {"gpt2": "GPT-2", "bert": "BERT", "distilbert": "DistilBERT", "vit": "ViT"}[family]
    training = {"origin": "hugging face", "family": family}
    if family == "vit":  # the names of its classes, in the order of its outputs
        training["labels"] = [str(hf_config.id2label.get(i, i)) for i in range(cfg.n_classes)]
    return ModelCard(f"{PREFIX}{source}", TASKS[family], cfg,
                     description=f"pretrained {words} from {describe_source(source)}, read from Hugging Face files",
                     training=training)


def load(source: str) -> Pretrained:
    """Open a pretrained model once per process (each spelling of one folder is one model). source: a folder, or a
    repo id in the local cache. Its size is checked from its config before a weight is read (check_size), and a
    checkpoint the library fails to read, however it fails (RuntimeError, RecursionError, a truncated file…), is
    one PretrainedError that quotes no path."""
    return _load(canonical_source(source))


@lru_cache(maxsize=4)
def _load(source: str) -> Pretrained:
    hf_config = _resolve_config(source)
    card = card_for(source, hf_config)
    try:
        library = library_model(source)
        model = convert(library, source)
        tokenizer = (None if hf_config.model_type == "vit" else
                     PretrainedTokenizer(library_tokenizer(source), hf_config.model_type))
    except PretrainedError:
        raise
    except Exception as error:  # noqa: BLE001 - a crafted checkpoint fails wherever the library's reading does
        raise PretrainedError(f"{describe_source(source)} could not be read as a {hf_config.model_type} model "
                              f"({type(error).__name__})") from None
    return Pretrained(model, card, tokenizer)
