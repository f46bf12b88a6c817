"""The animal/street lesson's measurements (core/lessons/coreference.py): the pronoun's attention to each candidate
read from the recording, which noun a head prefers, and a referent head chosen on one set and scored on another."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from core.lessons import coreference
from core.lessons.coreference import CoreferenceError, ItAttention
from core.model.config import ModelConfig
from core.model.recording import Recording, block_hook

TOKENS = ["[BOS]", "The", " animal", " didn", "'t", " cross", " the", " street", " because", " it", " was", " too",
          " tired", "."]
ANIMAL, STREET, IT = 2, 7, 9


def recording_with(patterns: np.ndarray, tokens=TOKENS) -> Recording:
    """A recording holding these patterns [M, H, N, N] (rows: queries) and tokens."""
    m, h, n, _ = patterns.shape
    config = ModelConfig(d_model=4 * h, n_heads=h, n_layers=m, d_mlp=16, max_len=32, vocab_size=50)
    tensors = {block_hook(layer, "attn.hook_pattern"): torch.tensor(patterns[layer], dtype=torch.float32)
               for layer in range(m)}
    return Recording(config, tensors, {"tokens": list(tokens)})


def random_patterns(rng: np.random.Generator, m: int = 2, h: int = 3, n: int = len(TOKENS)) -> np.ndarray:
    weights = rng.random((m, h, n, n))
    return weights / weights.sum(-1, keepdims=True)


def test_the_pronouns_weights_are_the_recorded_entries_of_its_row():
    patterns = random_patterns(np.random.default_rng(0))
    found = coreference.it_attention(recording_with(patterns))
    assert (found.pronoun, found.candidates) == (IT, (ANIMAL, STREET))
    np.testing.assert_array_equal(found.weights[..., 0], patterns[:, :, IT, ANIMAL].astype(np.float32))
    np.testing.assert_array_equal(found.weights[..., 1], patterns[:, :, IT, STREET].astype(np.float32))
    np.testing.assert_allclose(found.row(1, 2, recording_with(patterns)).sum(), 1.0, rtol=1e-6)


def test_a_head_prefers_the_noun_its_pronoun_reads_more():
    patterns = np.full((1, 2, len(TOKENS), len(TOKENS)), 1 / len(TOKENS))
    patterns[0, 0, IT, ANIMAL] += 0.05
    patterns[0, 0, IT, STREET] -= 0.05
    found = coreference.it_attention(recording_with(patterns))
    assert found.preferred(0, 0) == 0
    assert found.preferred(0, 1) == -1  # an exact tie is neither


def test_words_are_matched_whole_whatever_their_case_and_space():
    tokens = ["[BOS]", "An", " Animal", " and", " a", " streetcar", " street", " it", " It"]
    patterns = random_patterns(np.random.default_rng(1), n=len(tokens))
    found = coreference.it_attention(recording_with(patterns, tokens))
    assert found.candidates == (2, 6) and found.pronoun == 7  # "streetcar" is not "street"


@pytest.mark.parametrize("tokens, message", [
    (["[BOS]", "The", " cat", " it"], "no token of the sentence is “animal”"),
    (["[BOS]", " it", " animal", " street", "."], "no “it” after"),
])
def test_a_sentence_without_the_words_gets_a_clear_message(tokens, message):
    with pytest.raises(CoreferenceError, match=message):
        coreference.it_attention(recording_with(random_patterns(np.random.default_rng(2), n=len(tokens)), tokens))


def attention_preferring(preference: np.ndarray) -> ItAttention:
    """An ItAttention whose heads' preferences ([M, H], first minus second) are these."""
    weights = np.stack([0.5 + preference / 2, 0.5 - preference / 2], axis=-1)
    return ItAttention(TOKENS, IT, (ANIMAL, STREET), weights)


def test_a_head_follows_the_meaning_when_it_switches_with_the_ending():
    tired = attention_preferring(np.array([[0.2, 0.2, -0.1]]))
    wide = attention_preferring(np.array([[-0.3, 0.1, -0.1]]))
    assert coreference.follows_meaning(tired, wide).tolist() == [[True, False, False]]


def test_the_referent_head_is_chosen_on_one_set_and_scored_on_the_other():
    # head 0 is always right on the choosing set; head 1 always prefers the animal
    choosing_referents = [0, 1, 0, 1]
    choosing = [attention_preferring(np.array([[0.4 if r == 0 else -0.4, 0.3]])) for r in choosing_referents]
    # on the scoring set head 0 is right 3 times in 4
    scoring_referents = [0, 1, 0, 1]
    signs = [0.4, -0.4, 0.4, 0.4]
    scoring = [attention_preferring(np.array([[s, 0.3]])) for s in signs]
    found = coreference.referent_head((choosing, choosing_referents), (scoring, scoring_referents))
    assert (found.layer, found.head) == (0, 0)
    assert found.accuracy == 0.75 and found.n == 4 and found.chosen_on == 4
    assert found.always_first == found.always_second == 0.5
    assert found.per_head == [[0.75, 0.5]]  # a head that always reads the animal scores the baseline
