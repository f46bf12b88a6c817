"""One layer of a recorded forward pass recomputed in the seed paper's notation, step by step (seed 001 §2).

Everything here is in the paper's layout: X is D×N (features down, tokens across) and the attention matrix A_h is
N×N with A_h[n′, n] the weight query n gives key n′, so every *column* sums to 1 and Y = X A (eq. 2). The recording
keeps the common layout (tokens down the rows, rows of the pattern sum to 1); each recorded tensor is transposed
before it is compared.

    X        = TokenNorm(X^(m-1)) (pre-LN) or X^(m-1) (post-LN)          the input attention sees   (§2.3)
    Q_h      = U_{q,h} X,  K_h = U_{k,h} X                                 queries and keys           (eq. 6)
    S_h      = K_hᵀ Q_h / √K (+ position bias; −∞ where masked)            scores                     (eq. 5, fn. 8)
    A_h      = softmax over each column of S_h                             attention                  (eq. 5)
    Y        = Σ_h V_h X A_h,  V_h = U_h U_{v,h}                           multi-head self-attention  (eq. 4, fn. 13)
             = W_O [U_{v,1} X A_1; …; U_{v,H} X A_H]                       concatenate, then project
    then the residual, TokenNorm and the MLP of figure 7 (§2.2–2.3).

Each `Step` recomputes one quantity in float64 from the previous step's numbers and the model's own weights, and
carries the recorded tensor it must equal: `max_diff` is the largest |difference| (float32 rounding, ~1e-7).
The model's own functions do the position encodings (RoPE rotation: core.model.positions.apply_rope with the angles of
Transformer.position_context; ALiBi and relative biases: MultiHeadSelfAttention.position_bias), TokenNorm uses
core.lessons.lens.apply_token_norm, the MLP the model's own activation (core.model.transformer.activate); the mask is read from the
recording (its scores are −∞ where a key is hidden). A pretrained model's attention biases enter each formula.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

import numpy as np
import torch

from core.lessons.lens import apply_token_norm
from core.model.positions import apply_rope
from core.model.recording import Recording, block_hook
from core.model.transformer import Transformer, activate


@dataclass(frozen=True)
class Step:
    """One quantity recomputed in the paper's layout, beside the recorded tensor it must equal (if any)."""

    title: str
    latex: str  # the formula, as the page shows it with st.latex
    value: np.ndarray  # the recomputed numbers, paper layout
    hook: str | None = None  # the recording's name of the tensor it is checked against
    recorded: np.ndarray | None = None  # that tensor, in the same (paper) layout, with `recorded_then` applied
    recorded_then: str = ""  # what was done to the recorded tensor before comparing (TokenNorm: "× γ + β")

    @property
    def checked_against(self) -> str | None:
        """What the recomputed numbers are compared with, in words: the recorded tensor and what was done to it."""
        return None if self.hook is None else f"{self.hook} {self.recorded_then}".strip()

    @property
    def max_diff(self) -> float | None:
        """max |value − recorded| (None when nothing was recorded to compare with)."""
        return None if self.recorded is None else max_abs_difference(self.value, self.recorded)


def max_abs_difference(a: np.ndarray, b: np.ndarray) -> float:
    """The largest |a − b|; entries that are −∞ in both (masked scores) agree, −∞ in only one is an infinite
    difference."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"cannot compare shapes {a.shape} and {b.shape}")
    masked = np.isneginf(a)
    if (masked != np.isneginf(b)).any():
        return math.inf
    return float(np.abs(a[~masked] - b[~masked]).max(initial=0.0))


def column_softmax(scores: np.ndarray) -> np.ndarray:
    """Seed 001 eq. 5 in the paper's layout: A[n′, n] = exp(S[n′, n]) / Σ_n″ exp(S[n″, n]), each column (one
    query n) normalised over the keys n′. Masked scores (−∞) get weight exactly 0; a column that may see no key at
    all is all 0, as the model makes it. The column's largest score is subtracted first (same result, no overflow).
    """
    visible = np.isfinite(scores)
    top = np.where(visible, scores, -np.inf).max(axis=0, keepdims=True)  # [1, N]
    top = np.where(np.isfinite(top), top, 0.0)
    weights = np.where(visible, np.exp(np.where(visible, scores, 0.0) - top), 0.0)  # [N, N]
    total = weights.sum(axis=0, keepdims=True)
    return np.divide(weights, total, out=np.zeros_like(weights), where=total > 0)


# ---------------------------------------------------------------------------------------------------------
# Reading the model and the recording in the paper's layout
# ---------------------------------------------------------------------------------------------------------

def _weight(linear: torch.nn.Module) -> np.ndarray:
    return linear.weight.detach().double().numpy()


def _bias(linear: torch.nn.Module, rows: slice = slice(None)) -> np.ndarray:
    """The layer's bias (its `rows`) as [out, 1], broadcast over the N tokens; 0 for a layer without one (our models'
    attention: a pretrained GPT-2, BERT or ViT has them)."""
    if linear.bias is None:
        return np.zeros((1, 1))
    return linear.bias.detach().double().numpy()[rows, None]


HEAD_FIRST = ("attn.hook_attn_scores", "attn.hook_pattern", "attn.hook_pos_bias")  # [H, N(query), N(key)]


def paper_layout(rec: Recording, name: str, head: int | None = None) -> np.ndarray:
    """A recorded tensor in the paper's layout: [N, F] -> F×N; head h of [N, H, K] (q, k, v, z) -> K×N; head h of
    [H, N(query), N(key)] (scores, pattern, bias) -> N(key n′)×N(query n), so a pattern's columns sum to 1."""
    recorded = np.asarray(rec[name], dtype=np.float64)
    if head is None:
        return recorded.T
    if name.endswith(HEAD_FIRST):
        return recorded[head].T
    return recorded[:, head, :].T


def _lines(*lines: str) -> str:
    """One formula's parts one under the other, centred: joined on one line, some were wider than a 1024-pixel
    window's column, in presenter mode most of all."""
    return r"\begin{gathered}" + r" \\ ".join(lines) + r"\end{gathered}"


def _checked(title: str, latex: str, value: np.ndarray, rec: Recording, name: str, head: int | None = None) -> Step:
    """A Step checked against the recorded tensor `name` (head `head` of it), in the paper's layout."""
    return Step(title, latex, value, name, paper_layout(rec, name, head))


def _rotate(features: np.ndarray, angles: torch.Tensor) -> np.ndarray:
    """RoPE (seed 003 §7.3) on one head's K×N queries or keys, by the model's own apply_rope ([B, N, H, K])."""
    common = torch.from_numpy(features.T.copy())[None, :, None, :]  # [K, N] -> [1, N, 1, K]
    return apply_rope(common, angles)[0, :, 0, :].double().numpy().T  # -> [K, N]


def _token_norm(x: np.ndarray, norm: torch.nn.Module) -> np.ndarray:
    """TokenNorm (seed 001 §2.3) of each column (token) of a D×N matrix, with the model's γ, β and ε."""
    gamma, beta = norm.weight.detach().double().numpy(), norm.bias.detach().double().numpy()
    return apply_token_norm(x.T, gamma, beta, norm.eps).T


def _norm_step(title: str, latex: str, x: np.ndarray, norm: torch.nn.Module, rec: Recording, name: str) -> Step:
    """TokenNorm of x (D×N) checked against the recorded `name` (…hook_normalized, standardised before γ, β as
    in TransformerLens) scaled and shifted by the model's γ, β: what the next sublayer read."""
    gamma, beta = norm.weight.detach().double().numpy(), norm.bias.detach().double().numpy()
    return Step(title, latex, _token_norm(x, norm), name,
                paper_layout(rec, name) * gamma[:, None] + beta[:, None], "× γ + β")  # D×N


@dataclass(frozen=True)
class HeadMaths:
    """Head h of one layer: its weights (K×D, and U_h D×K) and its steps, queries to V_h X A_h."""

    head: int
    U_q: np.ndarray  # [K, D] rows hK..(h+1)K−1 of W_Q
    U_k: np.ndarray  # [K, D] of W_K
    U_v: np.ndarray  # [K, D] of W_V
    U_o: np.ndarray  # [D, K] columns hK..(h+1)K−1 of W_O: the paper's U_h (footnote 13)
    steps: dict[str, Step]

    @property
    def V(self) -> np.ndarray:
        """V_h = U_h U_{v,h}, D×D (footnote 13)."""
        return self.U_o @ self.U_v

    @property
    def V_rank(self) -> int:
        """The rank of V_h: at most K although V_h is D×D, since it factors through the K-dim values."""
        return int(np.linalg.matrix_rank(self.V))

    @property
    def pattern(self) -> np.ndarray:
        """A_h, N×N, columns sum to 1."""
        return self.steps["pattern"].value


@dataclass(frozen=True)
class LayerMaths:
    """One block of a recording recomputed step by step: the input X, every head, then the layer's steps in the
    order the block computes them (multi-head sum, concatenate-then-project, residual, TokenNorm, MLP)."""

    layer: int
    pre_norm: bool
    X: Step  # the input attention sees, D×N (TokenNorm'd for pre-LN, checked against ln1.hook_normalized × γ + β)
    heads: list[HeadMaths]
    steps: dict[str, Step]

    @property
    def sum_vs_concat(self) -> float:
        """max |Σ_h V_h X A_h − W_O concat_h(U_{v,h} X A_h)|: the two forms of eq. 4 agree to rounding."""
        return max_abs_difference(self.steps["multi-head sum"].value, self.steps["concat then project"].value)

    def checks(self, head: int) -> list[Step]:
        """Every step of the layer with head `head`'s steps in their place, in the order they are computed."""
        return [self.X, *self.heads[head].steps.values(), *self.steps.values()]

    def max_diff(self, head: int) -> float:
        """The largest |recomputed − recorded| over every checked step of the layer and head `head`."""
        return max(step.max_diff for step in self.checks(head) if step.max_diff is not None)


# ---------------------------------------------------------------------------------------------------------
# One head: eqs. 4–6
# ---------------------------------------------------------------------------------------------------------

BIAS_LATEX = {  # the bias each encoding adds to head h's scores, paper layout (key n′ down, query n across)
    "alibi": r"B_h[n', n] = -m_h\,|n - n'|\quad (\text{ALiBi: a slope } m_h \text{ per head})",
    "relative": r"B_h[n', n] = w_{h,\,\mathrm{bucket}(n' - n)}\quad (\text{T5: learned, per distance bucket})",
}


def _head_maths(model: Transformer, rec: Recording, layer: int, head: int, X: np.ndarray) -> HeadMaths:
    attn = model.blocks[layer].attn
    size, n = attn.head_dim, X.shape[1]
    rows = slice(head * size, (head + 1) * size)
    U_q, U_k, U_v = _weight(attn.W_Q)[rows], _weight(attn.W_K)[rows], _weight(attn.W_V)[rows]  # [K, D] each
    U_o = _weight(attn.W_O)[:, rows]  # [D, K]
    hook = partial(block_hook, layer)
    steps: dict[str, Step] = {}
    biased = attn.W_Q.bias is not None  # a pretrained model's biases, written into each formula

    def b(name: str) -> str:  # the bias term of projection `name`: nothing for a model without (x_n_{q,h} was an error)
        return rf" + b_{{{name},h}}" if biased else ""

    Q, K = U_q @ X + _bias(attn.W_Q, rows), U_k @ X + _bias(attn.W_K, rows)  # [K, N] each
    steps["queries"] = _checked("Queries", rf"Q_h = U_{{q,h}}\,X{b('q')} \quad (q_{{h,n}} = U_{{q,h}}\,x_n{b('q')},"
                                r"\ \text{eq. 6})", Q, rec, hook("attn.hook_q"), head)
    steps["keys"] = _checked("Keys", rf"K_h = U_{{k,h}}\,X{b('k')} \quad (k_{{h,n}} = U_{{k,h}}\,x_n{b('k')},"
                             r"\ \text{eq. 6})", K, rec, hook("attn.hook_k"), head)
    position = model.position_context(rec.meta.get("pe", model.cfg.pos_encoding), n, "cpu")
    if position.encoding == "rope":  # q and k turned by their positions (seed 003 §7.3, Definition 7.3)
        Q, K = _rotate(Q, position.rope_angles), _rotate(K, position.rope_angles)
        steps["rotated queries"] = _checked(
            "Queries after RoPE", _lines(r"\tilde q_{h,n} = R_n\, q_{h,n},", r"R_n = \mathrm{diag}_i\!\begin{pmatrix}"
            r"\cos n\theta_i & -\sin n\theta_i\\ \sin n\theta_i & \cos n\theta_i\end{pmatrix}"),
            Q, rec, hook("attn.hook_rot_q"), head)
        steps["rotated keys"] = _checked("Keys after RoPE", r"\tilde k_{h,n} = R_n\, k_{h,n}", K, rec,
                                         hook("attn.hook_rot_k"), head)
    scores = K.T @ Q / math.sqrt(size)  # [N(key n′), N(query n)]
    bias = attn.position_bias(position, n)  # the model's ALiBi / relative bias, [H, N(query), N(key)], or None
    if bias is not None:
        bias = bias[head].double().numpy().T  # paper layout: [key n′, query n]
        steps["position bias"] = _checked("Position bias", BIAS_LATEX[position.encoding], bias, rec,
                                          hook("attn.hook_pos_bias"), head)
        scores = scores + bias
    masked = np.isneginf(paper_layout(rec, hook("attn.hook_attn_scores"), head))  # the mask the model applied
    bias_term = " + B_h[n', n]" if bias is not None else ""
    steps["scores"] = _checked(
        "Scores", _lines(r"S_h[n', n] = \frac{k_{h,n'}^{\top} q_{h,n}}{\sqrt{K}}" + bias_term + ",",
                         r"-\infty \text{ where the mask hides } n' \text{ from } n"),
        np.where(masked, -np.inf, scores), rec, hook("attn.hook_attn_scores"), head)
    A = column_softmax(steps["scores"].value)  # [N(key n′), N(query n)]
    steps["pattern"] = _checked(
        "Softmax over each column", _lines(r"[A_h]_{n',n} = \frac{\exp S_h[n', n]}{\sum_{n''} \exp S_h[n'', n]},",
                                           r"\sum_{n'} [A_h]_{n',n} = 1 \quad \text{(eq. 5)}"),
        A, rec, hook("attn.hook_pattern"), head)
    values = U_v @ X + _bias(attn.W_V, rows)  # [K, D] @ [D, N] -> [K, N]
    steps["z"] = _checked("Values, mixed by A", rf"Z_h = (U_{{v,h}}\,X{b('v')})\,A_h", values @ A, rec,
                          hook("attn.hook_z"), head)  # [K, N] @ [N, N]
    steps["head output"] = Step("This head's output", _lines(rf"V_h\,X\,A_h{' + U_h b_{v,h}' if biased else ''},",
                                                           r"V_h = U_h\,U_{v,h}\ (D\times D,\ \text{footnote 13})"),
                                U_o @ values @ A)  # [D, K] @ [K, N] @ [N, N]  (columns of A sum to 1)
    return HeadMaths(head, U_q, U_k, U_v, U_o, steps)


# ---------------------------------------------------------------------------------------------------------
# One layer: eq. 4, residuals, TokenNorm, MLP (figure 7)
# ---------------------------------------------------------------------------------------------------------

def _check_layer(model: Transformer, rec: Recording, layer: int) -> None:
    if rec.config != model.cfg:
        raise ValueError("the recording was made by another model than the one given")
    if not 0 <= layer < rec.n_layers:
        raise ValueError(f"layer must be in 0..{rec.n_layers - 1}, got {layer}")


@torch.no_grad()
def layer_maths(model: Transformer, rec: Recording, layer: int) -> LayerMaths:
    """Block `layer` of the recording recomputed step by step in the paper's layout, every step checked against
    the recording. `model` must be the model that made the recording (in eval mode: no dropout)."""
    _check_layer(model, rec, layer)
    block, pre = model.blocks[layer], model.cfg.norm == "pre"
    hook = partial(block_hook, layer)
    stream = paper_layout(rec, hook("hook_resid_pre"))  # X^(m-1), D×N
    if pre:
        X = _norm_step("TokenNorm before attention",
                       _lines(r"X = \mathrm{TokenNorm}(X^{(m-1)}),",
                              r"\bar x_{d,n} = \frac{x_{d,n} - \mathrm{mean}(x_n)}{\sqrt{\mathrm{var}(x_n) + \epsilon}}"
                              r"\,\gamma_d + \beta_d"),
                       stream, block.ln1, rec, hook("ln1.hook_normalized"))
        x_in = X.recorded  # what the model's attention read
    else:
        X = Step("The input: the stream itself (post-LN)",
                 r"X = X^{(m-1)}\ \ (D\times N:\ \text{features down, tokens across})", stream)
        x_in = stream
    heads = [_head_maths(model, rec, layer, h, x_in) for h in range(model.cfg.n_heads)]
    steps = {
        "multi-head sum": _checked(
            "Multi-head self-attention", r"Y = \sum_{h=1}^{H} V_h\,X\,A_h \quad \text{(eq. 4)}"
            + (r" \;+\; b_O" if block.attn.W_O.bias is not None else ""),
            sum(h.steps["head output"].value for h in heads) + _bias(block.attn.W_O), rec, hook("hook_attn_out")),
        "concat then project": _checked(
            "The same, as concatenate-then-project",
            _lines(r"Y = W_O \begin{bmatrix} U_{v,1} X A_1 \\ \vdots \\ U_{v,H} X A_H \end{bmatrix},",
                   r"W_O = [\,U_1 \cdots U_H\,]"),
            _weight(block.attn.W_O) @ np.concatenate([h.steps["z"].value for h in heads])  # [D, HK] @ [HK, N]
            + _bias(block.attn.W_O), rec, hook("hook_attn_out"))}
    Y = steps["multi-head sum"].value
    if pre:
        mid = stream + Y
        steps["residual 1"] = _checked("Residual", r"X' = X^{(m-1)} + Y", mid, rec, hook("hook_resid_mid"))
        steps["token norm 2"] = _norm_step("TokenNorm before the MLP", r"\bar X' = \mathrm{TokenNorm}(X')",
                                           mid, block.ln2, rec, hook("ln2.hook_normalized"))
        mlp_in = steps["token norm 2"].value
    else:
        mid = mlp_in = _token_norm(stream + Y, block.ln1)
        steps["residual 1"] = _checked("Residual, then TokenNorm (post-LN)",
                                       r"X' = \mathrm{TokenNorm}(X^{(m-1)} + Y)", mid, rec, hook("hook_resid_mid"))
    steps.update(_mlp_steps(block.mlp, rec, layer, mlp_in, r"\bar X'" if pre else "X'"))
    mlp_out = steps["mlp out"].value
    if pre:
        steps["residual 2"] = _checked("Residual", r"X^{(m)} = X' + \mathrm{MLP}(\bar X')", mid + mlp_out, rec,
                                       hook("hook_resid_post"))
    else:
        steps["residual 2"] = _checked("Residual, then TokenNorm (post-LN)",
                                       r"X^{(m)} = \mathrm{TokenNorm}(X' + \mathrm{MLP}(X'))",
                                       _token_norm(mid + mlp_out, block.ln2), rec, hook("hook_resid_post"))
    return LayerMaths(layer, pre, X, heads, steps)


def _mlp_steps(mlp: torch.nn.Module, rec: Recording, layer: int, x: np.ndarray, symbol: str) -> dict[str, Step]:
    """Stage 2 (seed 001 §2.2): the same MLP on every column (token) of x, D×N, written `symbol` in the formulas."""
    hook = partial(block_hook, layer)
    hidden = _weight(mlp.fc_in) @ x + _bias(mlp.fc_in)  # [d_mlp, D] @ [D, N] -> [d_mlp, N]
    active = activate(torch.from_numpy(hidden), mlp.activation).numpy()  # the model's own activation
    return {
        "mlp hidden": _checked("MLP, first layer", rf"H = W_1\,{symbol} + b_1", hidden, rec, hook("mlp.hook_pre")),
        "mlp activation": _checked("GELU", r"G = \mathrm{GELU}(H) = H\,\Phi(H)", active, rec, hook("mlp.hook_post")),
        "mlp out": _checked("MLP, second layer", rf"\mathrm{{MLP}}({symbol}) = W_2\,G + b_2",
                            _weight(mlp.fc_out) @ active + _bias(mlp.fc_out), rec, hook("hook_mlp_out")),
    }


# ---------------------------------------------------------------------------------------------------------
# The glossary: the paper's names, the code's and the common ones
# ---------------------------------------------------------------------------------------------------------

GLOSSARY_COLUMNS = ("paper (seed 001)", "what it is", "code (core/model/transformer.py)", "recording hook", "common name")
GLOSSARY = (
    ("D, N, H, K, M", "features per token, tokens, heads, head size, blocks",
     "d_model, sequence length, n_heads, head_dim, n_layers", "—", "d_model, seq_len, n_heads, d_head (d_k), layers"),
    ("X^(m−1), D×N", "the tokens entering block m, one column each (§1.1)", "x in Block.forward, [B, N, D]",
     "blocks.m.hook_resid_pre", "residual stream (N×D, transposed)"),
    ("TokenNorm", "normalise each token over its D features, then γ_d, β_d (§2.3)",
     "TokenNorm (Block.ln1, Block.ln2, Transformer.ln_final); weight = γ, bias = β",
     "blocks.m.ln1.hook_normalized, hook_mean, hook_scale", "LayerNorm"),
    ("U_{q,h}, U_{k,h} (K×D)", "head h's query and key maps (eq. 6)", "rows hK…(h+1)K−1 of W_Q.weight, W_K.weight",
     "—", "W_Q, W_K (one head's slice)"),
    ("q_{h,n}, k_{h,n}", "queries and keys (eq. 6)", "q, k in MultiHeadSelfAttention.forward",
     "blocks.m.attn.hook_q, hook_k (hook_rot_q, hook_rot_k after RoPE)", "queries Q, keys K"),
    ("k_{h,n′}ᵀ q_{h,n} / √K", "the exponent of eq. 5, scaled as in footnote 8", "scores",
     "blocks.m.attn.hook_attn_scores (transposed)", "attention scores / logits"),
    ("A_h, N×N, columns sum to 1", "head h's attention matrix (eqs. 1, 5)", "pattern, rows sum to 1 (Aᵀ)",
     "blocks.m.attn.hook_pattern (transposed)", "attention weights / pattern"),
    ("U_{v,h} (K×D), U_{v,h} X", "footnote 13: the low-rank factor of V_h", "rows of W_V.weight; v",
     "blocks.m.attn.hook_v", "W_V, the values V"),
    ("U_{v,h} X A_h", "the values averaged by A_h (eq. 2 on the values)", "z",
     "blocks.m.attn.hook_z", "per-head attention output (before W_O)"),
    ("U_h (D×K)", "footnote 13: the other factor of V_h", "columns hK…(h+1)K−1 of W_O.weight", "—",
     "W_O (one head's slice), output projection"),
    ("V_h = U_h U_{v,h} (D×D)", "head h's value-and-output map (eq. 4)", "not stored: W_O slice @ W_V slice", "—",
     "OV circuit W_OV"),
    ("Σ_h V_h X A_h", "multi-head self-attention, MHSA (eq. 4)", "MultiHeadSelfAttention.forward",
     "blocks.m.hook_attn_out", "Concat(head_1…head_H) W_O"),
    ("x + res(x)", "residual connection (§2.3)", "x + attn_out, x + mlp_out in Block.forward",
     "blocks.m.hook_resid_mid, hook_resid_post", "skip connection"),
    ("MLP_θ", "the same perceptron on every token (§2.2)", "MLP: fc_in, GELU, fc_out",
     "blocks.m.mlp.hook_pre, hook_post, blocks.m.hook_mlp_out", "feed-forward network (FFN)"),
    ("e_n", "position embedding added to token n (§3, footnote 19)", "pos_embed / sinusoidal_table",
     "hook_pos_embed", "positional encoding"),
)
