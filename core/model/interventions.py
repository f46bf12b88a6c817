"""Interventions: a forward pass with heads ablated, an attention row edited, or activations patched in from a
second text (TransformerLens's ablation and activation patching, as an option of our own forward pass).

An `Intervention` says what to change; `Intervention.replacements` turns it, with what it needs (the second text's
recording, the heads' mean outputs), into functions keyed by hook name. `Transformer.forward(..., intervene=...)`
passes each hooked tensor through its function: the model computes on from the changed tensor and records it under
its usual name, so the Recording of an intervened pass is like any other and every view shows its result.

  ablate a head, zero:   z_h = 0 at every position, so head h adds nothing: Σ_h' V_h' X A_h' loses its h term (eq. 6)
  ablate a head, mean:   z_h = its mean over a reference set of texts: the head still adds its average output
  force an attention row: A_h[n, :] = e_k (query n reads key k only) or a given row; z_h[n] = Σ_k' A_h[n, k'] v_k'
  patch a head:          z_h = z_h of the second text (at every position, or one)
  patch an MLP:          the MLP's output = the second text's
  patch the stream:      x_n^(m) entering block m = the second text's at position n (hook_resid_pre)
  patch the embedding:   hook_embed = the second text's (its tokens, without their positions)

Heads are named L{layer}H{head} as on the pages ("L1H2"); the command line and the links use the same names.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal, get_args

import torch

from core.model.config import ModelConfig
from core.model.recording import Recording, block_hook

AblationKind = Literal["zero", "mean"]
PatchSite = Literal["head", "mlp", "resid", "embed"]
ABLATIONS: tuple[str, ...] = get_args(AblationKind)
PATCH_SITES: tuple[str, ...] = get_args(PatchSite)
HEAD_NAME = re.compile(r"L(\d{1,3})H(\d{1,3})")
Replacement = Callable[..., torch.Tensor]  # (hooked tensor [B, ...], **what the hook point passes) -> tensor used on


class InterventionError(ValueError):
    """An intervention this model or text cannot take; str() is one clear line."""


@dataclass(frozen=True, order=True)
class Head:
    layer: int
    head: int

    def __str__(self) -> str:
        return f"L{self.layer}H{self.head}"

    @classmethod
    def parse(cls, text: str) -> Head:
        """ "L1H2" -> Head(1, 2); anything else raises InterventionError."""
        found = HEAD_NAME.fullmatch(text.strip().upper()) if len(text) <= 16 else None
        if not found:
            raise InterventionError(f"{text[:16]!r} is not a head: write a layer and a head as L1H2")
        return cls(int(found.group(1)), int(found.group(2)))

    def check(self, cfg: ModelConfig) -> None:
        if not (0 <= self.layer < cfg.n_layers and 0 <= self.head < cfg.n_heads):
            raise InterventionError(f"this model has heads L0H0 to L{cfg.n_layers - 1}H{cfg.n_heads - 1}, "
                                    f"not {self}")


@dataclass(frozen=True)
class Ablation:
    """Head `head`'s output z replaced by zeros, or by its mean over a reference set of texts."""

    head: Head
    kind: AblationKind = "zero"

    def __str__(self) -> str:
        return f"ablate {self.head}" + (" (mean)" if self.kind == "mean" else "")


@dataclass(frozen=True)
class AttentionEdit:
    """Head `head`'s attention row of `query` replaced: by all weight on `key`, or by `row` (weights over every key)."""

    head: Head
    query: int
    key: int | None = None
    row: tuple[float, ...] | None = None

    def __str__(self) -> str:
        target = f"token {self.key}" if self.key is not None else "a given row"
        return f"{self.head}: token {self.query} attends to {target}"


@dataclass(frozen=True)
class Patch:
    """An activation of the second text put in place of this text's: a head's z (`head` set), an MLP's output, the
    residual stream entering block `layer`, or the token embedding; at every position (`position` None) or one."""

    site: PatchSite
    layer: int = 0
    head: int | None = None
    position: int | None = None

    @property
    def hook(self) -> str:
        return {"head": block_hook(self.layer, "attn.hook_z"), "mlp": block_hook(self.layer, "hook_mlp_out"),
                "resid": block_hook(self.layer, "hook_resid_pre"), "embed": "hook_embed"}[self.site]

    def __str__(self) -> str:
        where = {"head": f"{Head(self.layer, self.head or 0)}", "mlp": f"the MLP of L{self.layer}",
                 "resid": f"the stream into L{self.layer}", "embed": "the token embedding"}[self.site]
        return f"patch {where}" + ("" if self.position is None else f" at token {self.position}")


PATCH_NAME = re.compile(r"(?:L(\d{1,3})H(\d{1,3})|(mlp|resid)(\d{1,3})|(embed))(?:@(\d{1,6}))?")
EDIT_NAME = re.compile(r"L(\d{1,3})H(\d{1,3}):(\d{1,6}):(\d{1,6})")


def parse_patch(text: str) -> Patch:
    """ "L0H1" (a head), "mlp2", "resid1", "embed", each with an optional "@position": the command line's and the
    links' names of a patch."""
    found = PATCH_NAME.fullmatch(text.strip()) if len(text) <= 24 else None
    if not found:
        raise InterventionError(f"{text[:24]!r} is not a patch: write L0H1, mlp2, resid1 or embed, "
                                "and @3 for one position")
    layer, head, site, site_layer, embed, position = found.groups()
    position = None if position is None else int(position)
    if layer is not None:
        return Patch("head", int(layer), int(head), position)
    return Patch("embed", position=position) if embed else Patch(site, int(site_layer), position=position)


def parse_edit(text: str) -> AttentionEdit:
    """ "L1H0:5:2": head L1H0's query 5 attends to key 2 only."""
    found = EDIT_NAME.fullmatch(text.strip()) if len(text) <= 32 else None
    if not found:
        raise InterventionError(f"{text[:32]!r} is not an attention edit: write L1H0:5:2 (head, query, key)")
    layer, head, query, key = map(int, found.groups())
    return AttentionEdit(Head(layer, head), query, key)


@dataclass(frozen=True)
class Intervention:
    """What one forward pass changes. Hashable, so a page can cache the pass it gives."""

    ablations: tuple[Ablation, ...] = ()
    edits: tuple[AttentionEdit, ...] = ()
    patches: tuple[Patch, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.ablations or self.edits or self.patches)

    def __str__(self) -> str:
        return " · ".join(str(part) for part in (*self.ablations, *self.edits, *self.patches)) or "none"

    @property
    def needs_means(self) -> bool:
        return any(ablation.kind == "mean" for ablation in self.ablations)

    def check(self, cfg: ModelConfig, n_tokens: int, source: Recording | None = None) -> None:
        """Raise InterventionError with the reason when this model, a text of `n_tokens` tokens and `source` (the
        second text's recording) cannot take it."""
        if cfg.input != "tokens":
            raise InterventionError("interventions are for text models here")
        for ablation in self.ablations:
            ablation.head.check(cfg)
            if ablation.kind not in ABLATIONS:
                raise InterventionError(f"an ablation is {' or '.join(ABLATIONS)}, not {ablation.kind!r}")
        for edit in self.edits:
            _check_edit(edit, cfg, n_tokens)
        for patch in self.patches:
            _check_patch(patch, cfg, n_tokens, source)

    def replacements(self, cfg: ModelConfig, n_tokens: int, source: Recording | None = None,
                     means: Mapping[Head, torch.Tensor] | None = None) -> dict[str, Replacement]:
        """Hook name -> the function the forward pass puts that tensor through. `source`: the second text's
        recording (for patches); `means`: each mean-ablated head's mean z [K] (core.lessons.interventions)."""
        self.check(cfg, n_tokens, source)
        changes: dict[str, list[Replacement]] = {}
        for ablation in self.ablations:
            changes.setdefault(block_hook(ablation.head.layer, "attn.hook_z"), []).append(
                _ablate(ablation, means))
        for edit in self.edits:
            changes.setdefault(block_hook(edit.head.layer, "attn.hook_pattern"), []).append(_edit_row(edit))
        for patch in self.patches:  # patches last: a patched head carries the second text's output, ablated or not
            changes.setdefault(patch.hook, []).append(_patch(patch, source))
        return {name: _chain(functions) for name, functions in changes.items()}


def per_copy(replacements: list[dict[str, Replacement]]) -> dict[str, Replacement]:
    """The replacements of a batch whose copy i (of one text) takes replacements[i], each made for a batch of one:
    many interventions in one forward pass."""
    def replace_in_copies(name: str) -> Replacement:
        def replace(tensor: torch.Tensor, **context: torch.Tensor) -> torch.Tensor:
            return torch.cat([own[name](tensor[i:i + 1], **{k: v[i:i + 1] for k, v in context.items()})
                              if name in own else tensor[i:i + 1] for i, own in enumerate(replacements)])
        return replace
    return {name: replace_in_copies(name) for name in {name for own in replacements for name in own}}


def _check_edit(edit: AttentionEdit, cfg: ModelConfig, n_tokens: int) -> None:
    edit.head.check(cfg)
    if not 0 <= edit.query < n_tokens:
        raise InterventionError(f"token {edit.query} is not in this text (tokens 0 to {n_tokens - 1})")
    if (edit.key is None) == (edit.row is None):
        raise InterventionError("an attention edit names either the key to attend to or a whole row")
    if edit.key is not None and not 0 <= edit.key < n_tokens:
        raise InterventionError(f"key {edit.key} is not in this text (tokens 0 to {n_tokens - 1})")
    if edit.row is not None:
        row = torch.tensor(edit.row, dtype=torch.float64)
        if row.shape != (n_tokens,) or not bool(torch.isfinite(row).all()) or bool((row < 0).any()):
            raise InterventionError(f"an attention row is {n_tokens} weights, none negative")
        if abs(float(row.sum()) - 1) > 1e-6:
            raise InterventionError(f"an attention row's weights sum to 1, not {float(row.sum()):.6g}")


def _check_patch(patch: Patch, cfg: ModelConfig, n_tokens: int, source: Recording | None) -> None:
    if patch.site not in PATCH_SITES:
        raise InterventionError(f"a patch goes into {', '.join(PATCH_SITES)}, not {patch.site!r}")
    if patch.site != "embed" and not 0 <= patch.layer < cfg.n_layers:
        raise InterventionError(f"this model has layers L0 to L{cfg.n_layers - 1}, not L{patch.layer}")
    if patch.site == "head":
        Head(patch.layer, -1 if patch.head is None else patch.head).check(cfg)
    if source is None:
        raise InterventionError("a patch needs a second text to patch from")
    if source.config != cfg:
        raise InterventionError("the second text was run by another model: patch between runs of one model")
    if patch.position is None and source.n_tokens != n_tokens:
        raise InterventionError(f"the second text has {source.n_tokens} tokens and this one {n_tokens}: patching "
                                "every position matches them token by token, so give both texts as many tokens")
    if patch.position is not None and not 0 <= patch.position < min(n_tokens, source.n_tokens):
        raise InterventionError(f"token {patch.position} is not in both texts (they have {n_tokens} and "
                                f"{source.n_tokens} tokens)")


def _chain(functions: list[Replacement]) -> Replacement:
    def replace(tensor: torch.Tensor, **context) -> torch.Tensor:
        for function in functions:
            tensor = function(tensor, **context)
        return tensor
    return replace


def _ablate(ablation: Ablation, means: Mapping[Head, torch.Tensor] | None) -> Replacement:
    head = ablation.head
    if ablation.kind == "mean" and (means is None or head not in means):
        raise InterventionError(f"mean ablation of {head} needs its mean output over reference texts")

    def replace(z: torch.Tensor, **_) -> torch.Tensor:  # z: [B, N, H, K]
        z = z.clone()
        z[:, :, head.head] = 0.0 if ablation.kind == "zero" else means[head].to(z.dtype)
        return z
    return replace


def _edit_row(edit: AttentionEdit) -> Replacement:
    def replace(pattern: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:  # both [B, H, N, S]
        new_row = torch.zeros(pattern.shape[-1], dtype=pattern.dtype)
        if edit.key is not None:
            new_row[edit.key] = 1.0
        else:
            new_row.copy_(torch.tensor(edit.row, dtype=pattern.dtype))
        hidden = torch.isneginf(scores[:, edit.head.head, edit.query]) & (new_row > 0)  # [B, S]
        if bool(hidden.any()):
            keys = ", ".join(str(int(k)) for k in hidden.any(0).nonzero().flatten())
            raise InterventionError(f"the mask hides token {keys} from token {edit.query}: an edited row may "
                                    "only weigh keys the query can see")
        pattern = pattern.clone()
        pattern[:, edit.head.head, edit.query] = new_row
        return pattern
    return replace


def _patch(patch: Patch, source: Recording) -> Replacement:
    donor = source.tensors[patch.hook]  # [N, ...] without batch: z [N, H, K], the rest [N, D]
    positions = slice(None) if patch.position is None else slice(patch.position, patch.position + 1)

    def replace(tensor: torch.Tensor, **_) -> torch.Tensor:
        tensor = tensor.clone()
        if patch.site == "head":
            tensor[:, positions, patch.head] = donor[positions, patch.head]
        else:
            tensor[:, positions] = donor[positions]
        return tensor
    return replace
