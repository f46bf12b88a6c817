"""What a head does, measured by intervening (core.model.interventions) rather than by where it looks.

  effect of a head     Δ = (ℓ_a − ℓ_b) with the head ablated (or patched from a second text) − (ℓ_a − ℓ_b) as run,
                       ℓ_a, ℓ_b the logits of the two candidate tokens at the predicting position
  direct logit attribution (TransformerLens's definition): the final stream of a pre-LN model is a sum of parts,
                       x^(M)_n = embed + positions + Σ_l Σ_h W_O^h z_h + Σ_l b_O + Σ_l MLP_l.
                       With the final TokenNorm's scale σ_n frozen (as this pass computed it), TokenNorm is linear:
                       each part c gives ((c − mean(c)) / σ_n) γ · (g_a − g_b), and the parts, plus the constant
                       β · (g_a − g_b) + b_a − b_b, add up to ℓ_a − ℓ_b (g, b: the unembedding's rows and biases).
                       A part's attribution is what it writes straight into the logits; an effect also counts what
                       it changes downstream, so the two can disagree.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from core.data import english, grammar
from core.model.interventions import (Ablation, AttentionEdit, Head, Intervention, InterventionError, Patch,
                                      per_copy)
from core.model.recording import Recording, block_hook
from core.model.transformer import Transformer
from core.tokenizers.words import MASK, TextTokenizer

CHANGES = ("zero", "mean", "patch", "attend")  # what happens to each head in ablation_effects
MAX_BATCH_FLOATS = 2 ** 25  # one batch of intervened passes holds at most this many floats of logits


@dataclass(frozen=True)
class Candidates:
    """Two candidate tokens at the position that predicts them: the next token after `position` (a next-token model)
    or the token at `position` (a masked-token model, at its mask)."""

    target: str
    other: str
    target_id: int
    other_id: int
    position: int

    def difference(self, logits: np.ndarray | torch.Tensor) -> float:
        """ℓ_target − ℓ_other at the position, from logits [N, vocabulary]."""
        row = logits[self.position]
        return float(row[self.target_id]) - float(row[self.other_id])


def candidate_id(tok, word: str) -> int:
    """The id of `word` as one token of `tok`: as it follows a space (GPT-2 reads " is", not "is"), else as a
    vocabulary entry (ours, BERT's)."""
    word = word.strip()
    if not word or len(word) > 40 or any(c.isspace() for c in word):
        raise InterventionError("a candidate is one word: type it without spaces")
    spaced = tok.encode(" " + word, add_bos=False)
    if len(spaced.ids) == 1 and not spaced.is_unknown[0]:
        return spaced.ids[0]
    found = tok.token_to_id(word)
    if found is not None and found != getattr(tok, "unk_id", None):
        return found
    raise InterventionError(f"{word!r} is not one token this model knows: pick a word it reads whole")


def predicting_position(model: Transformer, tokens: list[str], tok) -> int:
    """Where the model predicts the candidates: the last token (next-token models) or the first mask (a byte-level
    BPE shows a typed mask with the space it took: " [MASK]")."""
    if model.cfg.head == "next_token":
        return len(tokens) - 1
    mask_token = getattr(tok, "mask_token", None) or MASK
    typed = [token.strip() for token in tokens]
    if mask_token not in typed:
        raise InterventionError(f"a masked-token model predicts at a {mask_token}: put one where the candidates go")
    return typed.index(mask_token)


def candidates(model: Transformer, recording: Recording, tok, target: str, other: str) -> Candidates:
    """The two candidates, checked, at the position where this recording's model predicts them."""
    target_id, other_id = candidate_id(tok, target), candidate_id(tok, other)
    if target_id == other_id:
        raise InterventionError("the two candidates are the same token: pick two different words")
    position = predicting_position(model, recording.meta["tokens"], tok)
    return Candidates(target.strip(), other.strip(), target_id, other_id, position)


# ---------------------------------------------------------------------------------------------------------
# Mean ablation's reference
# ---------------------------------------------------------------------------------------------------------

def reference_texts(tok, n: int = english.REFERENCE_COUNT) -> list[str]:
    """The n texts a mean ablation averages over, fixed so re-measurable, in the language the model reads: documents
    of the generated grammar for a model of its words, else texts of the broad-English corpus (shipped: the app has
    no lexicon to generate them)."""
    if isinstance(tok, TextTokenizer):
        return grammar.generate_documents(n, seed=0)
    return english.read_reference_texts()[:n]


@torch.no_grad()
def head_means(model: Transformer, tok, texts: list[str], mask=None, pe: str | None = None) -> dict[Head, torch.Tensor]:
    """Each head's mean output z [K] over every token of `texts` (each cut to the context length), in one padded
    batch: the padding's z is left out of the sums."""
    encoded = [tok.encode(text).ids[:model.cfg.max_len] for text in texts]
    width = max(map(len, encoded))
    ids = torch.tensor([row + [0] * (width - len(row)) for row in encoded])  # [T, N]
    valid = torch.arange(width)[None] < torch.tensor([len(row) for row in encoded])[:, None]  # [T, N]
    totals: dict[int, torch.Tensor] = {}

    def add_up(layer: int):
        def read(z: torch.Tensor, **_) -> torch.Tensor:  # [T, N, H, K], passed on unchanged
            totals[layer] = z[valid].sum(0)  # [H, K]
            return z
        return read

    hooks = {block_hook(layer, "attn.hook_z"): add_up(layer) for layer in range(model.cfg.n_layers)}
    model(ids, mask=mask, pe=pe, valid=valid, intervene=hooks)
    count = int(valid.sum())
    return {Head(layer, head): totals[layer][head] / count for layer in totals for head in range(model.cfg.n_heads)}


# ---------------------------------------------------------------------------------------------------------
# Effects: one intervened pass per head
# ---------------------------------------------------------------------------------------------------------

@torch.no_grad()
def ablation_effects(model: Transformer, ids: list[int], chosen: Candidates, change: str = "zero",
                     means: dict[Head, torch.Tensor] | None = None, source: Recording | None = None,
                     key: int | None = None, mask=None, pe: str | None = None) -> np.ndarray:
    """Δ logit difference [M, H] when each head alone is zeroed, set to its mean (`means`), patched from `source`
    (the second text's recording, as many tokens) at every position, or ("attend") made to read only token `key`
    from the predicting position: intervention_for each head, run as batches of copies of the text, copy i
    changing head i (core.model.interventions.per_copy)."""
    cfg = model.cfg
    heads = [Head(layer, head) for layer in range(cfg.n_layers) for head in range(cfg.n_heads)]
    changed = [intervention_for(head, change, query=chosen.position, key=key).replacements(
        cfg, len(ids), source, means) for head in heads]
    clean = chosen.difference(model(torch.tensor([ids]), mask=mask, pe=pe).logits[0])
    per_batch = max(1, MAX_BATCH_FLOATS // (len(ids) * cfg.vocab_size))
    differences = []
    for first in range(0, len(heads), per_batch):
        batch = changed[first:first + per_batch]
        logits = model(torch.tensor([ids]).expand(len(batch), -1), mask=mask, pe=pe, intervene=per_copy(batch)).logits
        differences += [chosen.difference(copy) for copy in logits]
    return (np.array(differences) - clean).reshape(cfg.n_layers, cfg.n_heads)


def intervention_for(head: Head, change: str, *, query: int | None = None, key: int | None = None) -> Intervention:
    """One head's change, as ablation_effects and the page make it: ablated (zero or mean), patched, or its row of
    `query` attending to `key` only."""
    if change == "attend":
        if key is None:
            raise InterventionError("making a head attend to one token needs that token")
        return Intervention(edits=(AttentionEdit(head, query, key),))
    if change == "patch":
        return Intervention(patches=(Patch("head", head.layer, head.head),))
    if change in ("zero", "mean"):
        return Intervention(ablations=(Ablation(head, change),))
    raise InterventionError(f"a head is changed by {', '.join(CHANGES)}, not {change!r}")


# ---------------------------------------------------------------------------------------------------------
# Direct logit attribution
# ---------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Attribution:
    """Each part of the final stream's direct contribution to ℓ_target − ℓ_other (module docstring)."""

    labels: tuple[str, ...]  # "embed", "pos_embed", "L0H0"…, "L0 attn bias", "L0 MLP"…, "final TokenNorm β + b_U"
    values: np.ndarray  # [parts]
    logit_difference: float  # as the pass computed it
    heads: np.ndarray  # [M, H]: the heads' own values, in layer and head order

    @property
    def total(self) -> float:
        """The sum of the parts: logit_difference up to float32 rounding."""
        return float(self.values.astype(np.float64).sum())

    def value(self, label: str) -> float:
        return float(self.values[self.labels.index(label)])


def attribution_refusal(model: Transformer) -> str | None:
    """Why direct logit attribution is not defined for this model, or None."""
    cfg = model.cfg
    if cfg.input != "tokens" or cfg.head == "classifier":
        return "direct logit attribution is for models that predict tokens"
    if cfg.norm != "pre" or cfg.head_transform:
        return ("this model is post-LN (its final stream is a TokenNorm of the last block's sum, and a BERT head "
                "adds a nonlinear layer): the stream is not a sum of parts that reach the logits, so direct logit "
                "attribution is not defined; ablation effects are")
    return None


@torch.no_grad()
def direct_logit_attribution(model: Transformer, recording: Recording, chosen: Candidates) -> Attribution:
    """Each head's, each MLP's and the embeddings' direct contribution to ℓ_target − ℓ_other at the predicting
    position, through the final TokenNorm with its scale frozen (module docstring)."""
    refusal = attribution_refusal(model)
    if refusal:
        raise InterventionError(refusal)
    cfg, n = model.cfg, chosen.position
    parts = _stream_parts(model, recording, n)
    direction = model.unembed.weight[chosen.target_id] - model.unembed.weight[chosen.other_id]  # g_a − g_b [D]
    scale = recording.tensors["ln_final.hook_scale"][n]  # σ_n, frozen [1]
    gamma, beta = model.ln_final.weight, model.ln_final.bias
    labels = tuple(parts)
    stacked = torch.stack([parts[label] for label in labels])  # [parts, D]
    through_norm = (stacked - stacked.mean(-1, keepdim=True)) / scale * gamma  # TokenNorm, linear once σ is fixed
    constant = beta @ direction + model.unembed.bias[chosen.target_id] - model.unembed.bias[chosen.other_id]
    values = torch.cat([through_norm @ direction, constant[None]]).numpy()
    heads = np.array([values[labels.index(f"{Head(layer, head)}")]
                      for layer in range(cfg.n_layers) for head in range(cfg.n_heads)])
    return Attribution((*labels, "final TokenNorm β + b_U"), values,
                       chosen.difference(recording.tensors["logits"]), heads.reshape(cfg.n_layers, cfg.n_heads))


@torch.no_grad()
def _stream_parts(model: Transformer, recording: Recording, n: int) -> dict[str, torch.Tensor]:
    """The parts whose sum is the final stream at position n, each [D] (recording.tensors, W_O per head)."""
    cfg, tensors = model.cfg, recording.tensors
    parts = {"embed": tensors["hook_embed"][n], "pos_embed": tensors["hook_pos_embed"][n]}
    if "hook_token_type_embed" in tensors:
        parts["token type"] = tensors["hook_token_type_embed"][n]
    for layer, block in enumerate(model.blocks):
        z = tensors[block_hook(layer, "attn.hook_z")][n]  # [H, K]
        w_o = block.attn.W_O.weight.view(cfg.d_model, cfg.n_heads, cfg.head_dim)  # [D, H*K] -> [D, H, K]
        for head in range(cfg.n_heads):
            parts[str(Head(layer, head))] = w_o[:, head] @ z[head]  # W_O^h z_h [D]
        if block.attn.W_O.bias is not None:
            parts[f"L{layer} attn bias"] = block.attn.W_O.bias.detach()
        parts[f"L{layer} MLP"] = tensors[block_hook(layer, "hook_mlp_out")][n]
    return parts


# ---------------------------------------------------------------------------------------------------------
# Looking vs doing, and the lesson's answer
# ---------------------------------------------------------------------------------------------------------

def attention_on(recording: Recording, query: int, key: int) -> np.ndarray:
    """[M, H]: how much each head's query `query` reads key `key` (its pattern's weight)."""
    return np.stack([recording.pattern(layer)[:, query, key] for layer in range(recording.n_layers)])


def pattern_shift(before: Recording, after: Recording) -> np.ndarray:
    """[M, H]: the largest change of any attention weight of each head between two passes over one text."""
    return np.stack([np.abs(after.pattern(layer) - before.pattern(layer)).max(axis=(1, 2))
                     for layer in range(before.n_layers)])


@dataclass(frozen=True)
class Prediction:
    """What one pass predicts at the candidates' position."""

    difference: float  # ℓ_target − ℓ_other
    p_target: float
    p_other: float
    likeliest: int  # the token id with the largest logit


def prediction(logits: np.ndarray, chosen: Candidates) -> Prediction:
    """The candidates' logit difference and probabilities (softmax of the position's logits), and the likeliest
    token, from logits [N, vocabulary]."""
    row = np.asarray(logits[chosen.position], dtype=np.float64)
    probabilities = np.exp(row - row.max())
    probabilities /= probabilities.sum()
    return Prediction(chosen.difference(logits), float(probabilities[chosen.target_id]),
                      float(probabilities[chosen.other_id]), int(row.argmax()))


def carrying_head(effects: np.ndarray) -> Head:
    """The head whose removal lowers ℓ_target − ℓ_other the most: the one that carries what favours the target."""
    layer, head = np.unravel_index(int(np.argmin(effects)), effects.shape)
    return Head(int(layer), int(head))


def strongest(effects: np.ndarray, count: int = 3) -> list[tuple[Head, float]]:
    """The `count` heads with the most negative effects, most negative first."""
    order = np.argsort(effects, axis=None)[:count]
    return [(Head(*map(int, np.unravel_index(i, effects.shape))), float(effects.flat[i])) for i in order]


def graded_head(effects: np.ndarray, prediction: str | None, tolerance: float = 0.1) -> Head:
    """The head a prediction is graded against: the predicted head itself when its effect is within `tolerance` (a
    fraction) of the strongest one's (a near tie is not a wrong answer), else the head with the strongest effect."""
    best = carrying_head(effects)
    try:
        said = Head.parse(prediction) if prediction else None
    except InterventionError:
        return best
    if said is None or not (said.layer < effects.shape[0] and said.head < effects.shape[1]):
        return best
    strongest = effects[best.layer, best.head]
    return said if effects[said.layer, said.head] <= strongest * (1 - tolerance) else best
