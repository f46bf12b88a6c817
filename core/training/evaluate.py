"""Held-out quality of the bundled models, printed and written as JSON (and into each model's card).

    python -m core.training.evaluate                 # every bundled model
    python -m core.training.evaluate --model lm-rope

Grammar LMs: next-token perplexity beside unigram and bigram baselines, and subject-verb agreement across
an attractor; the masked-token model's accuracy, also by the kind of the masked word. Reversal/sort: exact match
with greedy decoding and the best head's attention to the token it must copy. Copy: accuracy on the second repeat and the best head's induction score. Shapes: accuracy on each
held-out test set (plain, cluttered, drawn, off-centre, empty), on each condition of drawings and photos as a class
makes them (core.data.student_drawings, drawn apart from the training generator), on the image page's drawing
templates, and how much of the CLS token's rollout falls on the object's patches.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

from core.data import algorithmic, grammar, grammar_probes, student_drawings
from core.data.images import CLASSES, TEST_SETS, mask_grid, template_cells
from core.lessons.analysis import best_head, induction_score, mirrored_score, rollout
from core.model.checkpoint import ModelCard, load_checkpoint, read_card, update_metrics
from core.model.patches import images_to_tensor, mask_to_patch_fraction
from core.model.registry import (ASSETS, LOWER_IS_BETTER, MODELS_DIR, card_path, list_cards, quality,
                                 ranked_figures)
from core.model.transformer import Transformer
from core.tokenizers.words import TextTokenizer
from core.training.tasks import IGNORE, ImagePool, TokenPool, text_pool

HELDOUT_SEED = 1
N_HELDOUT = 400


def _batches(n: int, size: int = 64):
    for start in range(0, n, size):
        yield list(range(start, min(n, start + size)))


@torch.no_grad()
def next_token_nll(model: Transformer, pool: TokenPool) -> tuple[float, int]:
    """Summed negative log-likelihood of every target token of the pool, and how many there were."""
    total, count = 0.0, 0
    for indices in _batches(len(pool)):
        batch = pool.next_token_batch(indices)
        logits = model(batch.inputs).logits
        total += F.cross_entropy(logits.flatten(0, 1), batch.targets.flatten(), ignore_index=IGNORE,
                                 reduction="sum").item()
        count += int((batch.targets != IGNORE).sum())
    return total, count


def ngram_perplexities(train: TokenPool, heldout: TokenPool, vocab_size: int) -> dict[str, float]:
    """Add-one unigram and interpolated bigram baselines, fitted on the training split."""
    unigrams, bigrams = Counter(), Counter()
    for sequence in train.sequences:
        unigrams.update(sequence[1:])
        bigrams.update(zip(sequence[:-1], sequence[1:]))
    contexts = Counter()
    for (previous, _), count in bigrams.items():
        contexts[previous] += count
    total = sum(unigrams.values())
    unigram_nll = bigram_nll = 0.0
    n = 0
    for sequence in heldout.sequences:
        for previous, token in zip(sequence[:-1], sequence[1:]):
            p_unigram = (unigrams[token] + 1) / (total + vocab_size)
            p_bigram = bigrams[(previous, token)] / contexts[previous] if contexts[previous] else 0.0
            unigram_nll -= math.log(p_unigram)
            bigram_nll -= math.log(0.9 * p_bigram + 0.1 * p_unigram)
            n += 1
    return {"unigram_perplexity": math.exp(unigram_nll / n), "bigram_perplexity": math.exp(bigram_nll / n)}


@torch.no_grad()
def agreement_accuracy(model: Transformer, tokenizer: TextTokenizer, n: int = N_HELDOUT,
                       examples: list[grammar.AgreementExample] | None = None) -> float:
    """How often the verb form that agrees with the subject gets more probability than the other, read from
    the prefix's last position (causal) or, for a bidirectional model, at a [MASK] in the verb's place of the whole
    sentence, [BOS] prefix [MASK] suffix [EOS], as it was trained to read (Goldberg 2019's probe of BERT). On n
    held-out sentences of the grammar, or on the `examples` given."""
    masked = model.cfg.head == "masked_token"
    correct = 0
    examples = examples if examples is not None else grammar.generate_agreement_examples(n, HELDOUT_SEED)
    for example in examples:
        ids = tokenizer.encode(example.prefix).ids  # [BOS] prefix
        at = len(ids) - 1  # the prefix's last token predicts the verb (causal)
        if masked:
            at = len(ids)
            ids = ids + [tokenizer.mask_id] + tokenizer.encode(example.suffix).ids[1:] + [tokenizer.eos_id]
        logits = model(torch.tensor([ids])).logits[0, at]
        right, wrong = tokenizer.token_to_id(example.correct), tokenizer.token_to_id(example.wrong)
        correct += bool(logits[right] > logits[wrong])
    return correct / len(examples)


def out_of_template_agreement(model: Transformer, tokenizer: TextTokenizer,
                              n: int = N_HELDOUT) -> dict[str, dict[str, float]]:
    """Agreement on constructions the grammar never generates (core.data.grammar_probes), n probes each and
    pooled, each beside its majority baselines (always the singular form, always the plural one)."""
    rows, pooled = {}, []
    for construction in grammar_probes.CONSTRUCTIONS:
        probes = grammar_probes.agreement_probes(construction, n)
        singular = float(np.mean([grammar_probes.is_singular(probe) for probe in probes]))
        rows[construction] = {"accuracy": agreement_accuracy(model, tokenizer, examples=probes), "n": len(probes),
                              "always_singular": singular, "always_plural": 1 - singular}
        pooled.append(rows[construction])
    rows["pooled"] = {key: float(np.mean([row[key] for row in pooled])) for key in pooled[0]}
    rows["pooled"]["n"] = int(sum(row["n"] for row in pooled))
    return rows


@torch.no_grad()
def masked_predictions(model: Transformer, pool: TokenPool) -> tuple[torch.Tensor, torch.Tensor]:
    """The model's guess and the true word at every masked position of the pool (BERT-style masks drawn from the
    held-out seed, the same every time): (predicted ids, target ids), each [M]."""
    generator = torch.Generator().manual_seed(HELDOUT_SEED)
    predicted, targets = [], []
    for indices in _batches(len(pool)):
        batch = pool.masked_token_batch(indices, generator)
        chosen = batch.targets != IGNORE
        predicted.append(model(batch.inputs, valid=batch.valid).logits.argmax(-1)[chosen])
        targets.append(batch.targets[chosen])
    return torch.cat(predicted), torch.cat(targets)


def majority_baseline(targets: torch.Tensor, tokenizer: TextTokenizer) -> tuple[float, str]:
    """What always guessing the most frequent of these target ids scores on them, and that word."""
    majority = int(targets.mode().values)
    return float((targets == majority).double().mean()), tokenizer.id_to_token(majority)


def masked_accuracy_by_kind(predicted: torch.Tensor, targets: torch.Tensor,
                            tokenizer: TextTokenizer) -> dict[str, dict[str, float]]:
    """The masked-token accuracy split by the kind of the masked word (core.data.grammar.lexicon_by_kind): per kind
    its share of the masked words, the model's accuracy on them, chance within the kind (1 / its number of words)
    and the majority baseline (always guessing the kind's most frequent masked word, named: "the" among
    determiners gets far more than chance). The grammar draws adjectives, nouns, names and verbs at random (a
    present-tense verb's number aside), so on those no model beats chance by much: they cap the overall figure,
    whatever the model learned of the structure. predicted, targets: masked_predictions'."""
    kinds = grammar.lexicon_by_kind()
    kind_of = {tokenizer.token_to_id(word): kind for kind, words in kinds.items() for word in words}
    target_kinds = [kind_of.get(int(target)) for target in targets]
    rows = {}
    for kind, words in kinds.items():
        chosen = torch.tensor([target_kind == kind for target_kind in target_kinds], dtype=torch.bool)
        if chosen.any():
            majority, majority_word = majority_baseline(targets[chosen], tokenizer)
            rows[kind] = {"share": float(chosen.double().mean()), "chance": 1 / len(words),
                          "majority": majority, "majority_word": majority_word,
                          "accuracy": float((predicted[chosen] == targets[chosen]).double().mean())}
    return rows


def evaluate_grammar_lm(model: Transformer, tokenizer: TextTokenizer) -> dict:
    heldout = text_pool("grammar-lm", N_HELDOUT, HELDOUT_SEED, tokenizer)
    nll, count = next_token_nll(model, heldout)
    train = text_pool("grammar-lm", 5000, 0, tokenizer)
    metrics = {"perplexity": math.exp(nll / count), **ngram_perplexities(train, heldout, tokenizer.vocab_size),
               "agreement_accuracy": agreement_accuracy(model, tokenizer),
               "out_of_template": out_of_template_agreement(model, tokenizer)}
    metrics["headline"] = {"ppl": metrics["perplexity"], "agreement": metrics["agreement_accuracy"]}
    return metrics


def evaluate_grammar_mlm(model: Transformer, tokenizer: TextTokenizer) -> dict:
    predicted, targets = masked_predictions(model, text_pool("grammar-mlm", N_HELDOUT, HELDOUT_SEED, tokenizer))
    majority, majority_word = majority_baseline(targets, tokenizer)
    metrics = {"masked_token_accuracy": float((predicted == targets).double().mean()),
               "masked_token_majority": majority, "masked_token_majority_word": majority_word,
               "masked_accuracy_by_kind": masked_accuracy_by_kind(predicted, targets, tokenizer),
               "agreement_accuracy": agreement_accuracy(model, tokenizer),
               "out_of_template": out_of_template_agreement(model, tokenizer)}
    metrics["headline"] = {"masked_acc": metrics["masked_token_accuracy"], "agreement": metrics["agreement_accuracy"]}
    return metrics


@torch.no_grad()
def greedy_answer(model: Transformer, ids: list[int], n_tokens: int) -> list[int]:
    """Greedy decoding of n_tokens after ids (full recomputation; sequences here are short)."""
    sequence = list(ids)
    for _ in range(n_tokens):
        sequence.append(int(model(torch.tensor([sequence])).logits[0, -1].argmax()))
    return sequence[len(ids):]


@torch.no_grad()
def evaluate_algorithmic(model: Transformer, tokenizer: TextTokenizer, task: str, n: int = 200) -> dict:
    """Exact match (greedy), per-token accuracy (teacher forced) and the task's best-head attention score."""
    examples = algorithmic.generate(task, n, HELDOUT_SEED)
    exact = token_hits = token_total = 0
    head_scores = []
    score = induction_score if task == "copy" else mirrored_score
    for example in examples:
        ids = tokenizer.encode(example.text).ids
        answer_at = example.answer_start + 1  # [BOS] first
        answer = ids[answer_at:]
        exact += greedy_answer(model, ids[:answer_at], len(answer)) == answer
        output = model(torch.tensor([ids]), record=True)
        predicted = output.logits[0, answer_at - 1:-1].argmax(-1).tolist()
        token_hits += sum(p == t for p, t in zip(predicted, answer))
        token_total += len(answer)
        patterns = output.recording.patterns()  # [M, H, N, N]
        length = example.answer_start - 1
        head_scores.append([[score(head, length) for head in layer] for layer in patterns])
    layer, head, best = best_head(np.mean(head_scores, axis=0))
    score_name = "induction_score" if task == "copy" else "mirrored_attention"
    metrics = {"exact_match": exact / len(examples), "token_accuracy": token_hits / token_total,
               score_name: best, "best_head": [layer, head]}
    if task == "sort":
        metrics.pop(score_name)  # sorting attends by value, not to a fixed position
        metrics.pop("best_head")
    metrics["headline"] = {"exact": metrics["exact_match"], **({score_name: best} if task != "sort" else {})}
    return metrics


@torch.no_grad()
def shapes_accuracy(model: Transformer, pool: ImagePool) -> float:
    return float((model(pool.images).logits.argmax(-1) == torch.as_tensor(pool.labels)).float().mean())


@torch.no_grad()
def templates_correct(model: Transformer) -> float:
    """The fraction of the image page's drawing templates (and its blank grid, "nothing") classified as their class,
    drawn in the page's default colours."""
    drawings = np.stack([mask_grid(template_cells(label)) for label in range(len(CLASSES))])
    predicted = model(images_to_tensor(drawings)).logits.argmax(-1)
    return float((predicted == torch.arange(len(CLASSES))).float().mean())


@torch.no_grad()
def rollout_on_object(model: Transformer, pool: ImagePool) -> tuple[float, float]:
    """How much of the readout's rollout falls on the object's patches, and the share of patches the object covers
    (what attention spread evenly would give), averaged over the images that have an object."""
    output = model(pool.images, record=True)
    on_object, chance = [], []
    offset = int(model.cfg.uses_cls)
    for recording, mask in zip(output.recordings, pool.masks):
        on_patch = mask_to_patch_fraction(mask, model.cfg.patch_size) > 0
        if not on_patch.any():  # "nothing": no object to look at
            continue
        flow = rollout(recording.patterns())[0, offset:]  # from token 0 (CLS, or the first patch) to the patches
        on_object.append(flow[on_patch].sum() / flow.sum())
        chance.append(on_patch.mean())
    return float(np.mean(on_object)), float(np.mean(chance))


@torch.no_grad()
def condition_accuracies(model: Transformer, frame: bool = True) -> tuple[dict[str, float], dict[str, float]]:
    """Accuracy on each condition of core.data.student_drawings (drawings and photos as a class makes them, drawn by
    code apart from the training generator and read through the upload path, framed around the drawing as the page
    does by default or not), and, for the blank pages, the fraction called "nothing" at each strength of the
    brightness ramp (by its strength, as a string)."""
    accuracies, blank = {}, {}
    for name in student_drawings.CONDITIONS:
        images, labels = student_drawings.condition_set(name, frame=frame)
        right = (model(images_to_tensor(images)).logits.argmax(-1) == torch.as_tensor(labels)).numpy()
        accuracies[name] = float(right.mean())
        if name == "blank":
            ramps = student_drawings.blank_ramps()
            blank = {f"{ramp:g}": float(right[ramps == ramp].mean()) for ramp in student_drawings.RAMPS}
    return accuracies, blank


def evaluate_shapes(model: Transformer, n: int = 500) -> dict:
    """Accuracy on each held-out test set (core.data.images.TEST_SETS: the training mix, each kind of image alone,
    shapes off-centre at the extremes of size, empty images), the lowest of them, the drawing templates, where
    the readout's rollout falls, and each condition of a class's drawings and photos (condition_accuracies) with
    the lowest of them: uploads framed as the page frames them by default, and (``*_unframed``) not."""
    sets = {name: shapes_accuracy(model, ImagePool(n, HELDOUT_SEED, name)) for name in TEST_SETS}
    on_object, chance = rollout_on_object(model, ImagePool(n, HELDOUT_SEED, "mix"))
    conditions, blank = condition_accuracies(model)
    unframed, blank_unframed = condition_accuracies(model, frame=False)
    metrics = {"accuracy": sets["mix"], "test_sets": sets, "worst_set": min(sets.values()),
               "conditions": conditions, "worst_condition": min(conditions.values()), "blank_by_ramp": blank,
               "conditions_unframed": unframed, "worst_condition_unframed": min(unframed.values()),
               "blank_by_ramp_unframed": blank_unframed,
               "templates_correct": templates_correct(model),
               "rollout_on_object": on_object, "object_patch_fraction": chance}
    metrics["headline"] = {"worst_set": metrics["worst_set"], "worst_condition": metrics["worst_condition"],
                           "accuracy": sets["mix"], "templates": metrics["templates_correct"],
                           "rollout_on_object": on_object}
    return metrics


def evaluate(model: Transformer, card: ModelCard, tokenizer: TextTokenizer) -> dict:
    if card.task == "grammar-lm":
        return evaluate_grammar_lm(model, tokenizer)
    if card.task == "grammar-mlm":
        return evaluate_grammar_mlm(model, tokenizer)
    if card.task == "shapes":
        return evaluate_shapes(model)
    if card.task.startswith("english"):
        from core.training.english_eval import evaluate_english  # its lexicon needs the training requirements

        return evaluate_english(model, card)
    return evaluate_algorithmic(model, tokenizer, card.task)


SEEDS_DIR = ASSETS / "seeds"  # seeds/seed-K/NAME.json: a bundled model trained again with seed K


def seed_cards(name: str, seeds_dir: Path = SEEDS_DIR) -> dict[int, Path]:
    """The card of each seed a model was trained with (python -m core.train --seeds) whose weights are here, by seed.
    The repository ships the seeds' cards (figures, loss curves) but only the median seed's weights, in models/."""
    return {int(folder.name.removeprefix("seed-")): folder / f"{name}.json"
            for folder in sorted(seeds_dir.glob("seed-*"))
            if (folder / f"{name}.json").exists() and (folder / f"{name}.safetensors").exists()}


def seed_summary(per_seed: dict[int, dict]) -> dict:
    """Each seed's headline figures, and their mean and spread (standard deviation over the seeds) per figure."""
    headlines = {seed: metrics["headline"] for seed, metrics in per_seed.items()}
    keys = [key for key in next(iter(headlines.values())) if all(key in h for h in headlines.values())]
    values = {key: np.array([h[key] for h in headlines.values()], dtype=float) for key in keys}
    return {"seeds": {str(seed): headline for seed, headline in headlines.items()},
            "mean": {key: float(v.mean()) for key, v in values.items()},
            "spread": {key: float(v.std()) for key, v in values.items()}}


def median_seed(per_seed: dict[int, dict]) -> int:
    """The median seed, the model to ship: ranked by the main figure (core.model.registry.ranked_figures' first), a
    tie broken by the next figure, and so on (when every language model seed agrees 100 %, by perplexity; when the vision
    models' worst sets tie, by the worst drawing or photo condition)."""
    keys = ranked_figures(next(iter(per_seed.values()))["headline"])

    def standing(seed: int) -> tuple[float, ...]:
        headline = per_seed[seed]["headline"]
        return tuple(-headline[key] if key in LOWER_IS_BETTER else headline[key] for key in keys)

    ranked = sorted(per_seed, key=standing)
    return ranked[(len(ranked) - 1) // 2]


def evaluate_card(path: Path, tokenizer: TextTokenizer) -> dict:
    """Evaluate the model of one card afresh and write the figures into the card."""
    model, card = load_checkpoint(path)
    metrics = evaluate(model, card, tokenizer)
    update_metrics(path, metrics)
    return metrics


SEED_FIGURES = ("seeds", "mean", "spread", "shipped_seed")  # what train_seeds adds to the shipped model's card


def evaluate_bundled(name: str, tokenizer: TextTokenizer, models_dir: Path = MODELS_DIR,
                     seeds_dir: Path = SEEDS_DIR) -> dict:
    """The shipped model's figures and, when it was trained at several seeds, every seed's and their summary: each
    seed measured again where its weights are here (after python -m core.train --seeds), else as recorded when it was
    trained, so that a summary never drops the seeds whose weights are elsewhere."""
    path = card_path(name, models_dir)
    recorded = read_card(path).metrics
    metrics = {**evaluate_card(path, tokenizer),
               **{key: recorded[key] for key in SEED_FIGURES if key in recorded}}
    seeds = seed_cards(name, seeds_dir)
    if seeds:
        per_seed = {int(seed): {"headline": headline} for seed, headline in recorded.get("seeds", {}).items()}
        per_seed |= {seed: evaluate_card(seed_path, tokenizer) for seed, seed_path in seeds.items()}
        metrics.update(seed_summary(per_seed))
    update_metrics(path, metrics)
    return metrics


def position_gap(results: dict[str, dict]) -> dict | None:
    """How much worse the language model without position encoding is than each one with."""
    if "lm-none" not in results:
        return None
    base = results["lm-none"]
    return {name: {"perplexity_ratio_none_over_this": base["perplexity"] / r["perplexity"],
                   "agreement_gap": r["agreement_accuracy"] - base["agreement_accuracy"]}
            for name, r in results.items() if name.startswith("lm-") and name != "lm-none"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.training.evaluate", description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", default=[], help="a bundled model (repeatable); default all")
    parser.add_argument("--json", type=Path, default=ASSETS / "evaluation.json")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (more than the free cores slows it)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    tokenizer = TextTokenizer()
    names = args.model or [card.name for card in list_cards() if card.name != "tiny-test"]
    results = {}
    for name in names:
        results[name] = evaluate_bundled(name, tokenizer)
        card = read_card(card_path(name))
        print(f"{name:16s} {card.task:12s} {quality(card)}", flush=True)
    gap = position_gap(results)
    if gap:
        results["position_gap"] = gap
        for name, row in gap.items():
            print(f"{name} vs lm-none: lm-none's perplexity is x{row['perplexity_ratio_none_over_this']:.3f} of "
                  f"this one's; agreement {row['agreement_gap']:+.3f} over lm-none")
    if args.model and args.json.exists():  # evaluating some models updates their entries, keeping the rest
        results = {**json.loads(args.json.read_text()), **results}
    args.json.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
