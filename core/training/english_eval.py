"""Honest evaluation of models of broad English: agreement outside the training templates, and whole-sentence
minimal pairs, each beside its majority baselines.

* Out-of-template probes (`probe_agreement`): sentences of constructions the training corpus was told to hold out
  (core.data.english.generate_texts(held_out=...)), scored at the verb: right when the form that agrees gets more
  probability than the other. A causal model scores the form and the piece after it given the prefix (so "chase"
  is not favoured over "chases", " chase" + "s", for being shorter); a masked-token model scores the form's pieces
  each masked in turn, the rest of the sentence seen (the pseudo-log-likelihood of Salazar et al. 2020).
* Minimal pairs (`score_pairs`, core.data.minimal_pairs): the whole acceptable sentence against the whole
  unacceptable one, by log-probability ([BOS] sentence [EOS], as the BLiMP paper scores GPT-2 by its sentence
  probability), or by pseudo-log-likelihood for a masked-token model.

Beside every accuracy: the majority baselines, always choosing the singular form and always the plural one (what a
model that never read the subject would score). Any model with the Transformer interface (`model(ids).logits`,
`model.cfg.head`) and any tokenizer with TextTokenizer's (`encode(text).ids`, bos/eos/mask ids) can be scored.

    python -m core.training.english_eval /tmp/english-pilot/english-lm.json --json figures.json
"""

from __future__ import annotations

import argparse
import json
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

from core.data import english
from core.data.it_probes import IT_PAIRS
from core.data.lexicon import Lexicon
from core.data.minimal_pairs import MinimalPair, minimal_pairs
from core.lessons import coreference
from core.model.checkpoint import ModelCard, load_checkpoint
from core.model.run import record_text, text_tokenizer
from core.tokenizers.subword import ENGLISH_TOKENIZER_PATH, SubwordTokenizer
from core.training.referent import untaught_adjectives
from core.training.tasks import text_pool

N_PROBES = 200  # per construction


@dataclass(frozen=True)
class Score:
    """An accuracy over n items with the two majority baselines beside it."""

    accuracy: float
    n: int
    always_singular: float  # the accuracy of always choosing the singular form
    always_plural: float

    def to_dict(self) -> dict:
        return asdict(self)


def _score(right: Sequence[bool], singular: Sequence[bool]) -> Score:
    n = len(right)
    if n == 0:
        raise ValueError("nothing to score")
    share = sum(singular) / n
    return Score(sum(right) / n, n, share, 1 - share)


def _masked(model) -> bool:
    return model.cfg.head == "masked_token"


@torch.no_grad()
def _log_probs(model, ids: Sequence[int]) -> torch.Tensor:
    """log-softmax of the model's outputs over a single sequence: [N, vocabulary]."""
    return F.log_softmax(model(torch.tensor([list(ids)])).logits[0].float(), dim=-1)


def span_log_prob(model, ids: Sequence[int], start: int, end: int, mask_id: int | None = None) -> float:
    """log P of the tokens ids[start:end]: a causal model's next-token probabilities, each given the tokens before
    it; a masked-token model's, each masked in turn (mask_id) with every other token seen (pseudo-log-likelihood)."""
    if not 0 < start <= end <= len(ids):
        raise ValueError(f"span {start}:{end} is not inside the {len(ids)} tokens after the first")
    if not _masked(model):
        log_probs = _log_probs(model, ids)  # row k predicts token k + 1
        return float(sum(log_probs[k - 1, ids[k]] for k in range(start, end)))
    if mask_id is None:
        raise ValueError("a masked-token model needs the tokenizer's mask id")
    total = 0.0
    for k in range(start, end):
        masked = [*ids[:k], mask_id, *ids[k + 1:]]
        total += float(_log_probs(model, masked)[k, ids[k]])
    return total


def sentence_log_prob(model, tokenizer, text: str) -> float:
    """log P([BOS] text [EOS]) for a causal model (every token and the end), the pseudo-log-likelihood of the
    text's tokens for a masked-token model."""
    ids = [*tokenizer.encode(text).ids, tokenizer.eos_id]
    return span_log_prob(model, ids, 1, len(ids) - (1 if _masked(model) else 0), tokenizer.mask_id)


def _form_log_prob(model, tokenizer, probe: english.Agreeing, form: str) -> float:
    prefix = tokenizer.encode(probe.prefix).ids
    ids = [*tokenizer.encode(probe.prefix + form + probe.suffix).ids, tokenizer.eos_id]
    if ids[:len(prefix)] != prefix:
        raise ValueError(f"the prefix {probe.prefix!r} is not read the same before {form!r}")
    form_end = len(tokenizer.encode(probe.prefix + form).ids)
    # causal: the form and the piece after it (the word's end); masked: the form's pieces
    end = form_end if _masked(model) else min(form_end + 1, len(ids))
    return span_log_prob(model, ids, len(prefix), end, tokenizer.mask_id)


def probe_right(model, tokenizer, probe: english.Agreeing) -> bool:
    """Whether the model gives the agreeing verb form more probability than the other."""
    return _form_log_prob(model, tokenizer, probe, probe.correct) > _form_log_prob(model, tokenizer, probe, probe.wrong)


def probe_agreement(model, tokenizer, lexicon: Lexicon, constructions: Sequence[str] = english.DEFAULT_HELD_OUT,
                    n: int = N_PROBES, seed: int = english.HELDOUT_SEED) -> dict[str, Score]:
    """Per construction, the agreement accuracy on n probes (english.agreement_probes) with its baselines; "pooled"
    over them all. Pass the constructions the model's corpus held out, to probe it outside its templates."""
    scores, right_all, singular_all = {}, [], []
    for construction in constructions:
        probes = english.agreement_probes(construction, n, seed, lexicon)
        right = [probe_right(model, tokenizer, probe) for probe in probes]
        singular = [not probe.plural for probe in probes]
        scores[construction] = _score(right, singular)
        right_all += right
        singular_all += singular
    scores["pooled"] = _score(right_all, singular_all)
    return scores


def score_pairs(model, tokenizer, pairs: Sequence[MinimalPair]) -> dict[str, Score]:
    """Per phenomenon, how often the acceptable sentence has the higher whole-sentence log-probability, with the
    baselines of always choosing the sentence whose changed word is singular (or plural); "pooled" over all."""
    by_phenomenon: dict[str, tuple[list[bool], list[bool]]] = {}
    for pair in pairs:
        right = sentence_log_prob(model, tokenizer, pair.good) > sentence_log_prob(model, tokenizer, pair.bad)
        rights, singulars = by_phenomenon.setdefault(pair.phenomenon, ([], []))
        rights.append(right)
        singulars.append(pair.good_singular)
    scores = {phenomenon: _score(*lists) for phenomenon, lists in by_phenomenon.items()}
    scores["pooled"] = _score([r for rights, _ in by_phenomenon.values() for r in rights],
                              [s for _, singulars in by_phenomenon.values() for s in singulars])
    return scores


def table(scores: dict[str, Score]) -> str:
    """The scores as a plain-text table (a report, a card's note)."""
    lines = [f"{'':28} {'accuracy':>8} {'n':>5} {'always sg':>9} {'always pl':>9}"]
    lines += [f"{name:28} {s.accuracy:8.3f} {s.n:5d} {s.always_singular:9.3f} {s.always_plural:9.3f}"
              for name, s in scores.items()]
    return "\n".join(lines)


def evaluate_model(model, tokenizer, lexicon: Lexicon, held_out: Sequence[str] = english.DEFAULT_HELD_OUT,
                   n: int = N_PROBES, n_pairs: int = 200) -> dict[str, dict[str, dict]]:
    """Every figure of a broad-English model: agreement on the held-out families (out of template) and on the
    others (in template), and the minimal pairs; each Score as a dict."""
    in_template = [c for c in english.AGREEMENT_CONSTRUCTIONS if c not in held_out]
    figures = {"out_of_template": probe_agreement(model, tokenizer, lexicon, held_out, n),
               "in_template": probe_agreement(model, tokenizer, lexicon, in_template, n),
               "minimal_pairs": score_pairs(model, tokenizer, minimal_pairs(n_pairs))}
    return {part: {name: score.to_dict() for name, score in scores.items()} for part, scores in figures.items()}


N_IT_SENTENCES = 200  # "it" sentences to choose the referent head on, and as many again to score it on
IT_TRIES = 20  # sentences drawn per one kept, at most, before a tokenizer that splits the nouns is given up on


def it_sentences(model, card: ModelCard, lexicon: Lexicon, n: int, seed: int,
                 adjectives: Callable[[Lexicon, str], Sequence[str]] = Lexicon.adjectives_of
                 ) -> tuple[list[coreference.ItAttention], list[int]]:
    """n "it" sentences of the corpus's kind (english.it_sentence, from `seed`, with `adjectives`), half of them
    "it" the animal, half the place, each with the model's attention from "it" to the two nouns, and which noun "it"
    is (0: the animal).
    Sentences where a noun is not one whole piece are passed over (a head's weight on part of a word is not its
    weight on the word), so n counts only those read."""
    rng = random.Random(seed)
    attentions, referents = [], []
    for _ in range(IT_TRIES * n):
        if len(referents) == n:
            break
        refers_to_animal = len(referents) % 2 == 0
        text, animal, place = english.it_sentence(rng, lexicon, refers_to_animal, adjectives)
        try:
            attentions.append(coreference.it_attention(record_text(model, text, card=card),
                                                       (animal, place)))
        except coreference.CoreferenceError:
            continue
        referents.append(0 if refers_to_animal else 1)
    if len(referents) < n:
        raise ValueError(f"only {len(referents)} of {IT_TRIES * n} 'it' sentences had both nouns as whole pieces")
    return attentions, referents


def it_reference(model, card: ModelCard, lexicon: Lexicon, n: int = N_IT_SENTENCES) -> coreference.ReferentHead:
    """The head whose "it" attends most often to its referent: chosen on n sentences, scored on n others."""
    return coreference.referent_head(it_sentences(model, card, lexicon, n, english.HELDOUT_SEED),
                                     it_sentences(model, card, lexicon, n, english.HELDOUT_SEED + 1))


def taught_head_score(model, card: ModelCard, lexicon: Lexicon, n: int = N_IT_SENTENCES) -> dict:
    """How often a taught referent head (the card's training.referent_head, core/training/referent.py) attends more to
    the referent than to the other noun, on n sentences whose adjective it was never taught on (half the animal)."""
    layer, head = card.training["referent_head"]
    attentions, referents = it_sentences(model, card, lexicon, n, english.HELDOUT_SEED + 2, untaught_adjectives)
    right = coreference.referent_right(attentions, referents)[:, layer, head]
    return {"layer": layer, "head": head, "accuracy": float(right.mean()), "n": n,
            "always_first": float(np.mean(np.asarray(referents) == 0)), "adjectives": "untaught"}


def written_pairs_score(model, card: ModelCard, layer: int, head: int) -> dict:
    """One head on the hand-written pairs of core.data.it_probes (other frames and words than the corpus's): how
    often its "it" prefers the referent in a sentence (always the animal: 50 %), and in how many pairs it follows the
    meaning in both sentences (a head that reads one noun both times: none)."""
    right, pairs = [], []
    for pair in IT_PAIRS:
        attentions = [coreference.it_attention(record_text(model, text, card=card), pair.nouns)
                      for text in pair.sentences()]
        right += [attention.preferred(layer, head) == referent for referent, attention in enumerate(attentions)]
        pairs.append(bool(coreference.follows_meaning(*attentions)[layer, head]))
    return {"layer": layer, "head": head, "accuracy": float(np.mean(right)), "n": len(right),
            "always_first": 0.5, "pairs_followed": int(sum(pairs)), "n_pairs": len(pairs)}


def evaluate_english(model, card: ModelCard, n: int = N_PROBES, n_pairs: int = 200) -> dict:
    """A broad-English model's card figures: evaluate_model's, held-out perplexity (a causal model) or masked-token
    accuracy beside its majority baseline (a masked-token model), and the referent head of "it"."""
    from core.data.lexicon import build_lexicon
    from core.training.evaluate import N_HELDOUT, majority_baseline, masked_predictions, next_token_nll

    lexicon, tokenizer = build_lexicon(), text_tokenizer(card)
    metrics: dict = evaluate_model(model, tokenizer, lexicon, n=n, n_pairs=n_pairs)
    heldout = text_pool("english-lm", N_HELDOUT, english.HELDOUT_SEED, tokenizer, model.cfg.max_len)
    if _masked(model):
        predicted, targets = masked_predictions(model, heldout)
        majority, majority_word = majority_baseline(targets, tokenizer)
        metrics.update(masked_token_accuracy=float((predicted == targets).double().mean()),
                       masked_token_majority=majority, masked_token_majority_word=majority_word)
        fit = {"masked_acc": metrics["masked_token_accuracy"]}
    else:
        nll, count = next_token_nll(model, heldout)
        metrics["perplexity"] = math.exp(nll / count)
        fit = {"ppl": metrics["perplexity"]}
    metrics["it_reference"] = it_reference(model, card, lexicon).to_dict()
    if _masked(model):
        metrics["it_reference_written"] = written_pairs_score(model, card, metrics["it_reference"]["layer"],
                                                              metrics["it_reference"]["head"])
    if card.training.get("referent_head"):
        metrics["it_reference_untaught"] = taught_head_score(model, card, lexicon)
    metrics["headline"] = {"agreement_out_of_template": metrics["out_of_template"]["pooled"]["accuracy"],
                           "minimal_pairs": metrics["minimal_pairs"]["pooled"]["accuracy"], **fit,
                           "it_referent_head": metrics["it_reference"]["accuracy"]}
    return metrics


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.training.english_eval", description=__doc__.splitlines()[0])
    parser.add_argument("card", type=Path, help="a trained model's card (NAME.json beside NAME.safetensors)")
    parser.add_argument("--n", type=int, default=N_PROBES, help="probes per construction")
    parser.add_argument("--pairs", type=int, default=200, help="minimal pairs per phenomenon")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--tokenizer", type=Path, help="the tokenizer the model read (default: the one its card "
                        "names, in assets/)")
    args = parser.parse_args(argv)
    from core.data.lexicon import build_lexicon

    model, card = load_checkpoint(args.card)
    model.eval()
    tokenizer = SubwordTokenizer(args.tokenizer or ENGLISH_TOKENIZER_PATH.parent / card.training["tokenizer"])
    figures = evaluate_model(model, tokenizer, build_lexicon(), n=args.n, n_pairs=args.pairs)
    for part, scores in figures.items():
        print(f"\n{part.replace('_', ' ')}\n{table({name: Score(**score) for name, score in scores.items()})}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
