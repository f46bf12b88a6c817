"""The honest evaluation of broad-English models (core/training/english_eval.py) and the minimal pairs it reads
(core/data/minimal_pairs.py), on models whose answers we control: one that knows every right answer scores 1.0, one
that knows every wrong answer 0.0, one that always prefers singular words scores exactly the always-singular
baseline; a real (untrained) Transformer runs through both."""

from __future__ import annotations

import random
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
import torch

from core.data import english, minimal_pairs
from core.data.minimal_pairs import Vocabulary
from core.model.transformer import Transformer
from core.tokenizers.subword import SubwordTokenizer, train_tokenizer
from core.training import english_eval
from core.training.train import text_config
from tests.english_lexicon import LEXICON, NOUNS, VERBS

WORDS = Vocabulary(nouns=(("dog", "dogs"), ("cat", "cats"), ("key", "keys"), ("box", "boxes")),
                   irregular=(("child", "children"), ("mouse", "mice")),
                   verbs=(("chase", "chases", "chased"), ("see", "sees", "saw"), ("run", "runs", "ran")),
                   adjectives=("old", "red", "wide"))
CONSTRUCTIONS = ("pp", "object_relative", "coordination")
SINGULAR_FORMS = ("is", "was", "has", "doesn", "does", *(v.third for v in VERBS))  # "doesn't": " doesn" "'t"


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory) -> SubwordTokenizer:
    """Trained on the corpus and pairs of the small lexicon, so every word and verb form is one piece."""
    texts = english.generate_texts(3000, 0, LEXICON)
    texts += [p.good + " " + p.bad for p in minimal_pairs.minimal_pairs(100, 0, WORDS)]
    path = tmp_path_factory.mktemp("eval") / "tokenizer.json"
    train_tokenizer(texts * 3, vocab_size=800, path=path)
    tok = SubwordTokenizer(path)
    words = [*SINGULAR_FORMS, "are", "were", "have", "don", "do", *(v.base for v in VERBS),
             *(n.singular for n in NOUNS), *(n.plural for n in NOUNS), "I", "mice", "children"]
    split = [w for w in words if tok.token_to_id(" " + w) is None]
    assert not split, f"not one piece each, so the controlled models below would not be: {split}"
    return tok


@dataclass
class KnowingModel:
    """A causal or masked-token model that knows a set of token sequences: given a prefix of one of them (causal),
    or one of them with a [MASK] (masked), it puts a logit of 20 on the token that sequence has there, 0 elsewhere;
    elsewhere all logits are 0. `preferred`: ids given a logit of 20 at every position instead."""

    known: list[list[int]]
    vocab_size: int
    head: str = "next_token"
    mask_id: int = 4
    preferred: tuple[int, ...] = ()

    def __post_init__(self):
        self.cfg = SimpleNamespace(head=self.head)

    def _next(self, prefix: tuple[int, ...]) -> int | None:
        return next((seq[len(prefix)] for seq in self.known if tuple(seq[:len(prefix)]) == prefix
                     and len(seq) > len(prefix)), None)

    def _masked(self, ids: list[int], k: int) -> int | None:
        return next((seq[k] for seq in self.known if len(seq) == len(ids) and all(
            a == b for j, (a, b) in enumerate(zip(seq, ids)) if j != k)), None)

    def __call__(self, inputs: torch.Tensor):
        ids = inputs[0].tolist()
        logits = torch.zeros(1, len(ids), self.vocab_size)
        logits[0, :, list(self.preferred)] = 20.0
        for k in range(len(ids)):
            if self.head == "next_token":
                target = self._next(tuple(ids[:k + 1]))
            else:
                target = self._masked(ids, k) if ids[k] == self.mask_id else None
            if target is not None:
                logits[0, k, target] = 20.0
        return SimpleNamespace(logits=logits)


def _probe_sequences(tok, constructions, right: bool) -> list[list[int]]:
    return [[*tok.encode(p.prefix + (p.correct if right else p.wrong) + p.suffix).ids, tok.eos_id]
            for c in constructions for p in english.agreement_probes(c, 30, english.HELDOUT_SEED, LEXICON)]


@pytest.mark.parametrize("head", ["next_token", "masked_token"])
def test_probes_score_one_for_a_model_that_knows_and_zero_for_one_that_knows_wrong(tokenizer, head):
    for right, expected in ((True, 1.0), (False, 0.0)):
        model = KnowingModel(_probe_sequences(tokenizer, CONSTRUCTIONS, right), tokenizer.vocab_size, head)
        scores = english_eval.probe_agreement(model, tokenizer, LEXICON, CONSTRUCTIONS, n=30)
        assert set(scores) == {*CONSTRUCTIONS, "pooled"}
        assert all(score.accuracy == expected and score.n == 30 for name, score in scores.items() if name != "pooled")
        assert scores["pooled"].n == 90 and scores["pooled"].accuracy == expected


def test_a_model_that_always_says_singular_scores_the_baseline(tokenizer):
    singular = tuple(tokenizer.token_to_id(" " + form) for form in SINGULAR_FORMS)
    model = KnowingModel([], tokenizer.vocab_size, preferred=singular)
    scores = english_eval.probe_agreement(model, tokenizer, LEXICON, CONSTRUCTIONS, n=40)
    for score in scores.values():
        assert score.accuracy == score.always_singular
        assert score.always_singular + score.always_plural == pytest.approx(1.0)
    assert scores["coordination"].always_plural == 1.0 and scores["coordination"].accuracy == 0.0
    assert 0.2 < scores["pp"].always_singular < 0.8


def test_the_minimal_pairs_differ_in_one_word_and_the_good_one_agrees():
    pairs = minimal_pairs.minimal_pairs(50, 0, WORDS)
    assert {p.phenomenon for p in pairs} == set(minimal_pairs.PHENOMENA) and len(pairs) == 50 * 6
    singular_nouns = {s for s, _ in WORDS.nouns + WORDS.irregular}
    for pair in pairs:
        good, bad = pair.good.rstrip(".").split(), pair.bad.rstrip(".").split()
        differ = [(g, b) for g, b in zip(good, bad) if g != b]
        assert len(good) == len(bad) and len(differ) == 1, pair
        if pair.phenomenon.startswith("determiner"):
            assert (good[-1] in singular_nouns) == (good[2] in ("this", "that")) == pair.good_singular, pair
        else:
            head = good[1]
            assert (head in singular_nouns) == pair.good_singular, pair
            assert differ[0][0] in ("is", "chases", "sees", "runs") if pair.good_singular else \
                differ[0][0] in ("are", "chase", "see", "run"), pair
    assert pairs == minimal_pairs.minimal_pairs(50, 0, WORDS)
    with pytest.raises(ValueError, match="unknown phenomenon"):
        minimal_pairs.make_pair("islands", random.Random(0), WORDS)


@pytest.mark.parametrize("head", ["next_token", "masked_token"])
def test_pairs_score_one_and_zero_for_models_that_know(tokenizer, head):
    pairs = minimal_pairs.minimal_pairs(20, 1, WORDS)
    for right, expected in ((True, 1.0), (False, 0.0)):
        known = [[*tokenizer.encode(p.good if right else p.bad).ids, tokenizer.eos_id] for p in pairs]
        scores = english_eval.score_pairs(KnowingModel(known, tokenizer.vocab_size, head), tokenizer, pairs)
        assert scores["pooled"].accuracy == expected and scores["pooled"].n == 120


def test_pairs_baseline_is_what_a_singular_loving_model_scores(tokenizer):
    pairs = minimal_pairs.minimal_pairs(40, 2, WORDS)
    singular_words = [s for s, _ in WORDS.nouns + WORDS.irregular] + ["is"] + [third for _, third, _ in WORDS.verbs]
    model = KnowingModel([], tokenizer.vocab_size,
                         preferred=tuple(tokenizer.token_to_id(" " + w) for w in singular_words))
    scores = english_eval.score_pairs(model, tokenizer, pairs)
    assert all(score.accuracy == score.always_singular for score in scores.values())
    assert 0.3 < scores["pooled"].always_singular < 0.7


def test_a_real_transformer_is_scored_with_its_own_tokenizer(tokenizer):
    torch.manual_seed(0)
    cfg = text_config(tokenizer.vocab_size, d_model=32, n_heads=2, n_layers=1, d_mlp=64, max_len=64)
    for model in (Transformer(cfg).eval(), Transformer(cfg.replace(mask="none", head="masked_token")).eval()):
        probes = english_eval.probe_agreement(model, tokenizer, LEXICON, ("pp",), n=10)
        pairs = english_eval.score_pairs(model, tokenizer, minimal_pairs.minimal_pairs(5, 0, WORDS))
        for score in (*probes.values(), *pairs.values()):
            assert 0.0 <= score.accuracy <= 1.0 and score.n > 0
        assert "pooled" in english_eval.table(pairs)
    ids = [*tokenizer.encode("The dog runs.").ids, tokenizer.eos_id]
    causal = Transformer(cfg).eval()
    whole = english_eval.sentence_log_prob(causal, tokenizer, "The dog runs.")
    assert whole == pytest.approx(english_eval.span_log_prob(causal, ids, 1, len(ids)), abs=1e-4)
    assert whole == pytest.approx(english_eval.span_log_prob(causal, ids, 1, 3)
                                  + english_eval.span_log_prob(causal, ids, 3, len(ids)), abs=1e-4)
    with pytest.raises(ValueError, match="span"):
        english_eval.span_log_prob(causal, ids, 0, 2)


def test_empty_scores_are_refused():
    with pytest.raises(ValueError, match="nothing"):
        english_eval.score_pairs(None, None, [])
