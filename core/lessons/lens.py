"""Looking inside the residual stream: pure numpy functions of a Recording (and the model's weights). No Streamlit.

Notation (seed 001, common layout, tokens down the rows): x_n^(m) is token n's residual stream after block m,
X^(m) is N x D. In a pre-LN model (seed 001 §2.3, figure 7) every block only *adds* to the stream:

    x_n^(0)   = embed_n + e_n                                  (hook_embed + hook_pos_embed)
    x_n^(m)   = x_n^(m-1) + attn_out_n^(m) + mlp_out_n^(m)     (blocks.{m}.hook_attn_out, hook_mlp_out)

so the final stream is exactly the sum of the embedding, the position embedding and every sublayer's output.
A post-LN model renormalises the stream after every sublayer (x' = TokenNorm(x + MHSA(x))), which divides the
running sum by a token-dependent number and mixes in gamma and beta: there is no such sum.

TokenNorm (seed 001 §2.3, eq. in figure 5's section) normalises each token over its D features:

    x̄_{d,n} = (x_{d,n} - mean(x_n)) / sqrt(var(x_n) + eps) * gamma_d + beta_d

BatchNorm instead normalises each feature d over the batch and the sequence (here a batch of one sequence).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from core.model.recording import Recording, block_hook

NORM_SITES = ("ln1", "ln2", "ln_final")
NORM_EPS = 1e-5


class NotDecomposableError(ValueError):
    """The residual stream of this model is not a plain sum of its parts; str() says why, in one paragraph."""


# ---------------------------------------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------------------------------------

def softmax(logits: np.ndarray, axis: int = -1) -> np.ndarray:
    """softmax(z)_i = exp(z_i - max z) / Σ_j exp(z_j - max z), computed in float64."""
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(axis=axis, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=axis, keepdims=True)


def apply_token_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float = NORM_EPS) -> np.ndarray:
    """TokenNorm of x [..., D] with statistics computed here, on x itself (not the recorded ones):
    (x - mean(x_n)) / sqrt(var(x_n) + eps) * gamma + beta, mean and var over the last axis (float64)."""
    x = np.asarray(x, dtype=np.float64)
    mean = x.mean(-1, keepdims=True)
    scale = np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + eps)
    return (x - mean) / scale * gamma + beta


def is_pre_norm(rec: Recording) -> bool:
    return rec.config.norm == "pre"


def stream_labels(n_layers: int) -> list[str]:
    """Names of the M+1 points of the stream: "embed" (x^(0), into block 0), then "after L0" … "after L{M-1}"."""
    return ["embed"] + [f"after L{layer}" for layer in range(n_layers)]


def residual_stack(rec: Recording) -> np.ndarray:
    """The stream at each of its M+1 points, [M+1, N, D]: x^(0) = blocks.0.hook_resid_pre, then
    x^(m+1) = blocks.{m}.hook_resid_post. (In a post-LN model these are the TokenNorm'd streams.)"""
    points = [rec[block_hook(0, "hook_resid_pre")]]
    points += [rec[block_hook(layer, "hook_resid_post")] for layer in range(rec.n_layers)]
    return np.stack(points).astype(np.float64)


# ---------------------------------------------------------------------------------------------------------
# The residual stream as a sum
# ---------------------------------------------------------------------------------------------------------

@dataclass
class Decomposition:
    """The parts whose sum is the final residual stream, per token.

    parts: ordered name -> [N, D]: "embed", "pos_embed", then "L{m} attn", "L{m} mlp" for each block m.
    stream: the recorded final stream blocks.{M-1}.hook_resid_post [N, D].
    """

    parts: dict[str, np.ndarray]
    stream: np.ndarray

    @property
    def total(self) -> np.ndarray:
        """Σ parts, [N, D]."""
        return np.sum(list(self.parts.values()), axis=0)

    @property
    def max_abs_error(self) -> float:
        """max_{n,d} |Σ parts - stream|: 0 up to float32 rounding."""
        return float(np.abs(self.total - self.stream).max())

    def projections(self) -> dict[str, np.ndarray]:
        """Each part's component along its token's final stream direction, name -> [N]:

            c_i,n · x_n / |x_n|,   and since Σ_i c_i,n = x_n these add up to |x_n| exactly.

        A positive value pushes the stream the way it ends up pointing, a negative one against it."""
        norm = np.linalg.norm(self.stream, axis=-1, keepdims=True)
        direction = self.stream / np.where(norm > 0, norm, 1.0)
        return {name: np.einsum("nd,nd->n", part, direction) for name, part in self.parts.items()}

    def part_norms(self) -> dict[str, np.ndarray]:
        """|c_i,n|, the length of each part per token, name -> [N] (these do not add up: vectors cancel)."""
        return {name: np.linalg.norm(part, axis=-1) for name, part in self.parts.items()}


POST_LN_REASON = ("This model is post-LN: after every attention and MLP sublayer the stream is TokenNorm'd again, "
                  "x′ = TokenNorm(x + sublayer(x)), which divides each token's running sum by its own standard "
                  "deviation and then scales by γ and shifts by β. The final stream is therefore not the sum of "
                  "the sublayer outputs; only a pre-LN model (TokenNorm inside the residual branch, figure 7) "
                  "decomposes exactly.")


def residual_decomposition(rec: Recording) -> Decomposition:
    """The final residual stream of a pre-LN model as the sum of what was written into it, per token:

        x_n^(M) = embed_n + e_n + Σ_{m<M} (attn_out_n^(m) + mlp_out_n^(m))

    (parts in float64). Raises NotDecomposableError for a post-LN model, where no such sum exists."""
    if not is_pre_norm(rec):
        raise NotDecomposableError(POST_LN_REASON)
    if rec.config.embed_norm:  # TokenNorm(embed + e) enters block 0: one part
        parts = {"embed (TokenNorm'd)": rec[block_hook(0, "hook_resid_pre")].astype(np.float64)}
    else:
        parts = {"embed": rec["hook_embed"].astype(np.float64), "pos_embed": rec["hook_pos_embed"].astype(np.float64)}
    for layer in range(rec.n_layers):
        parts[f"L{layer} attn"] = rec[block_hook(layer, "hook_attn_out")].astype(np.float64)
        parts[f"L{layer} mlp"] = rec[block_hook(layer, "hook_mlp_out")].astype(np.float64)
    stream = rec[block_hook(rec.n_layers - 1, "hook_resid_post")].astype(np.float64)
    return Decomposition(parts, stream)


def residual_norms(rec: Recording) -> np.ndarray:
    """‖x_n^(m)‖_2 for each stream point m = 0..M (embed, then after each block) and token n: [M+1, N]."""
    return np.linalg.norm(residual_stack(rec), axis=-1)


# ---------------------------------------------------------------------------------------------------------
# Logit lens and the final prediction
# ---------------------------------------------------------------------------------------------------------

@dataclass
class LogitLens:
    """What the model would predict if the stream stopped at each point.

    labels: the M+1 stream points ("embed", "after L0", …); probs [M+1, N, V];
    top_ids / top_probs [M+1, N, k]: the k likeliest tokens at each point, likeliest first.
    """

    labels: list[str]
    probs: np.ndarray
    top_ids: np.ndarray
    top_probs: np.ndarray

    def prob_of(self, ids: Sequence[int]) -> np.ndarray:
        """p(token ids[n]) at every point for each position n: [M+1, N] (e.g. the model's final guess)."""
        ids = np.asarray(ids)
        return self.probs[:, np.arange(len(ids)), ids]


def lens_logits(rec: Recording, model) -> np.ndarray:
    """The logits the unembedding would read from each stream point, [M+1, N, V] (float64):

        pre-LN:  logits^(m) = W_U · TokenNorm_final(x^(m)) + b_U,  with ln_final's γ, β and its mean and
                 variance *recomputed on x^(m)* (not the recorded ones of the last stream) — the standard
                 logit lens (nostalgebraist 2020);
        post-LN: logits^(m) = W_U · x^(m) + b_U, the stream after each block is already TokenNorm'd.

    A model whose head transforms the stream before the unembedding (BERT's dense + TokenNorm) reads
    transform(x^(m)) at every point, as its own head does.
    """
    stack = residual_stack(rec)
    if model.ln_final is not None:
        ln = model.ln_final
        stack = apply_token_norm(stack, ln.weight.detach().double().numpy(), ln.bias.detach().double().numpy(),
                                 ln.eps)
    if model.cfg.head_transform:
        with torch.no_grad():
            stack = model.transform(torch.from_numpy(stack).float()).double().numpy()
    w_u = model.unembed.weight.detach().double().numpy()  # [V, D]
    b_u = model.unembed.bias.detach().double().numpy()  # [V]
    return stack @ w_u.T + b_u


def logit_lens(rec: Recording, model, top_k: int = 5) -> LogitLens:
    """Per stream point m and token n the top-k tokens of softmax(lens_logits) and their probabilities.
    At the last point this is the model's own prediction (its logits, softmaxed)."""
    probs = softmax(lens_logits(rec, model))
    k = int(min(max(top_k, 1), probs.shape[-1]))
    top_ids = np.argsort(-probs, axis=-1, kind="stable")[..., :k]
    return LogitLens(stream_labels(rec.n_layers), probs, top_ids, np.take_along_axis(probs, top_ids, -1))


def final_prediction(logits_row: np.ndarray, temperature: float = 1.0, top_k: int = 10
                     ) -> tuple[np.ndarray, np.ndarray]:
    """(ids, probabilities) of the top-k of p = softmax(logits / T), likeliest first.

    T = 1 is the model's own distribution; T < 1 sharpens it towards the argmax, T > 1 flattens it towards
    uniform. T = 0 is taken as the limit: probability 1 on the argmax (greedy decoding)."""
    logits = np.asarray(logits_row, dtype=np.float64)
    if temperature < 0:
        raise ValueError(f"temperature must be ≥ 0, got {temperature}")
    if temperature == 0:
        probs = np.zeros_like(logits)
        probs[np.argmax(logits)] = 1.0
    else:
        probs = softmax(logits / temperature)
    k = int(min(max(top_k, 1), probs.shape[-1]))
    ids = np.argsort(-probs, kind="stable")[:k]
    return ids, probs[ids]


# ---------------------------------------------------------------------------------------------------------
# TokenNorm, seen from inside
# ---------------------------------------------------------------------------------------------------------

@dataclass
class TokenNormView:
    """One TokenNorm site on one text.

    before [N, D]: the vector TokenNorm receives; mean, std [N]: its per-token statistics as recorded
    (std = sqrt(var + eps), what the model divides by); standardized [N, D] = (before - mean) / std, the recorded
    hook_normalized; gamma, beta [D]; after [N, D] = standardized * gamma + beta, what the next sublayer reads.
    """

    site: str  # "blocks.{l}.ln1", "blocks.{l}.ln2" or "ln_final"
    before: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    standardized: np.ndarray
    gamma: np.ndarray
    beta: np.ndarray
    after: np.ndarray

    @property
    def max_abs_error(self) -> float:
        """max |(before - mean) / std - standardized|: recomputed from the stream, it agrees with the recording."""
        return float(np.abs((self.before - self.mean[:, None]) / self.std[:, None] - self.standardized).max())


def norm_site(rec: Recording, layer: int, which: str) -> str:
    """The recording prefix of a TokenNorm: "blocks.{layer}.ln1" / ".ln2", or "ln_final" (layer ignored)."""
    if which not in NORM_SITES:
        raise ValueError(f"which must be one of {', '.join(NORM_SITES)}, got {which!r}")
    if which == "ln_final":
        if not is_pre_norm(rec):
            raise ValueError("a post-LN model has no final TokenNorm: its last block's ln2 is the last one")
        return "ln_final"
    if not 0 <= layer < rec.n_layers:
        raise ValueError(f"layer must be in 0..{rec.n_layers - 1}, got {layer}")
    return block_hook(layer, which)


def token_norm_input(rec: Recording, layer: int, which: str) -> np.ndarray:
    """The vector each TokenNorm receives, [N, D], read from the recording:

        pre-LN:  ln1 <- resid_pre,  ln2 <- resid_mid,  ln_final <- resid_post of the last block
        post-LN: ln1 <- resid_pre + attn_out,  ln2 <- resid_mid + mlp_out   (x' = TokenNorm(x + sublayer(x)))
    """
    site = norm_site(rec, layer, which)
    if site == "ln_final":
        return rec[block_hook(rec.n_layers - 1, "hook_resid_post")].astype(np.float64)
    if is_pre_norm(rec):
        return rec[block_hook(layer, "hook_resid_pre" if which == "ln1" else "hook_resid_mid")].astype(np.float64)
    if which == "ln1":
        return (rec[block_hook(layer, "hook_resid_pre")].astype(np.float64)
                + rec[block_hook(layer, "hook_attn_out")])
    return rec[block_hook(layer, "hook_resid_mid")].astype(np.float64) + rec[block_hook(layer, "hook_mlp_out")]


def token_norm_parameters(model, layer: int, which: str) -> tuple[np.ndarray, np.ndarray, float]:
    """(gamma [D], beta [D], eps) of a TokenNorm of the model."""
    module = model.ln_final if which == "ln_final" else getattr(model.blocks[layer], which)
    if module is None:
        raise ValueError("this model has no final TokenNorm (it is post-LN)")
    return module.weight.detach().double().numpy(), module.bias.detach().double().numpy(), module.eps


def token_norm_view(rec: Recording, model, layer: int, which: str) -> TokenNormView:
    """Mean, std, γ, β and each token's vector before and after one TokenNorm (seed 001 §2.3):

        after_{n,d} = (before_{n,d} - mean_n) / std_n * γ_d + β_d,  std_n = sqrt(var_n + eps)

    mean, std and the standardised vectors are the recorded hook_mean, hook_scale and hook_normalized; γ, β come
    from the model's weights."""
    site = norm_site(rec, layer, which)
    before = token_norm_input(rec, layer, which)
    mean = rec[f"{site}.hook_mean"].astype(np.float64)
    std = rec[f"{site}.hook_scale"][:, 0].astype(np.float64)  # [N, 1] -> [N]
    gamma, beta, _ = token_norm_parameters(model, layer, which)
    standardized = rec[f"{site}.hook_normalized"].astype(np.float64)
    return TokenNormView(site, before, mean, std, standardized, gamma, beta, standardized * gamma + beta)


@dataclass
class NormStatistics:
    """How one normalisation treats X [N, D]: the axis it averages over, its statistics, the result.

    axis: the axis of X the mean and variance run over (1 = over the D features of each token,
    0 = over the N tokens of each feature); mean, std: one per kept index ([N] or [D]);
    normalized [N, D] = (X - mean) / std, before any γ, β."""

    name: str
    axis: int
    mean: np.ndarray
    std: np.ndarray
    normalized: np.ndarray

    @property
    def over(self) -> str:
        return "the D features of each token" if self.axis == 1 else "the N tokens (and the batch) of each feature"


def tokennorm_statistics(x: np.ndarray, eps: float = NORM_EPS) -> NormStatistics:
    """TokenNorm (LayerNorm in transformers, seed 001 figure 5 left): per token n,
    mean_n = (1/D) Σ_d x_{n,d},  std_n = sqrt((1/D) Σ_d (x_{n,d} - mean_n)² + eps); each row of the
    result has mean 0 and variance ≈ 1."""
    x = np.asarray(x, dtype=np.float64)
    mean = x.mean(axis=1)
    std = np.sqrt(x.var(axis=1) + eps)
    return NormStatistics("TokenNorm", 1, mean, std, (x - mean[:, None]) / std[:, None])


def batchnorm_statistics(x: np.ndarray, eps: float = NORM_EPS) -> NormStatistics:
    """BatchNorm (seed 001 figure 5 right) on the same activations: per feature d, over the N tokens of the
    sequence (the batch is this one sequence), mean_d = (1/N) Σ_n x_{n,d}, std_d = sqrt((1/N) Σ_n
    (x_{n,d} - mean_d)² + eps); each column of the result has mean 0. Training statistics, no running average."""
    x = np.asarray(x, dtype=np.float64)
    mean = x.mean(axis=0)
    std = np.sqrt(x.var(axis=0) + eps)
    return NormStatistics("BatchNorm", 0, mean, std, (x - mean[None]) / std[None])
