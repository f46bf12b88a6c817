"""Teaching one head where "it" points (core/training/referent.py): the teaching sentences say what they claim,
leave the lesson's nouns and the untaught adjectives out, the loss is the recorded pattern's, and training on it
moves the head's weight onto the referent."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from core.lessons import coreference
from core.model.config import ConfigError
from core.tokenizers import subword
from core.tokenizers.subword import SubwordTokenizer
from core.training import train
from core.training.referent import ReferentPool, referent_loss, taught_adjectives, untaught_adjectives
from tests.english_lexicon import LEXICON


@pytest.fixture(scope="module")
def pool() -> ReferentPool:
    return ReferentPool(SubwordTokenizer(), LEXICON, n=60)


def tiny_preset(**changes) -> train.Preset:
    config = train.text_config(subword.VOCAB_SIZE, n_layers=1, d_model=32, n_heads=2, d_mlp=64, max_len=32,
                               mask="none", head="masked_token")
    return train.Preset("tiny-referent", "english-mlm", config, "", steps=60, batch_size=4, learning_rate=3e-3,
                        warmup=5, pool_size=40, **{"referent_head": (0, 1), **changes})


def test_taught_and_untaught_adjectives_split_each_kind():
    for kind in ("animate", "place"):
        taught, untaught = set(taught_adjectives(LEXICON, kind)), set(untaught_adjectives(LEXICON, kind))
        assert taught and untaught and not taught & untaught
        assert taught | untaught == set(LEXICON.adjectives_of(kind))


def test_each_teaching_sentence_points_it_at_the_noun_its_taught_adjective_picks(pool):
    tokenizer = SubwordTokenizer()
    taught = {kind: set(taught_adjectives(LEXICON, kind)) for kind in ("animate", "place")}
    animals = {noun.singular for noun in LEXICON.nouns_of("animal")}
    place_first = 0
    for n, (ids, pronoun, referent) in enumerate(pool.rows):
        text = tokenizer.decode(ids[1:])
        tokens = tokenizer.encode(text).tokens
        assert tokens[pronoun] == " it" and referent < pronoun
        adjective = text.rsplit(" ", 1)[-1].rstrip(".")  # "... too tired."
        meant = "animate" if n % 2 == 0 else "place"
        assert adjective in taught[meant]
        assert (tokens[referent].strip() in animals) == (meant == "animate")
        assert not {" animal", " street"} <= set(tokens)  # never the lesson's pair of nouns
        place_first += tokens[2].strip() not in animals
    assert 0.4 < place_first / len(pool.rows) < 0.6  # half name the place first: order cannot stand in for meaning


def test_the_referent_loss_is_minus_the_log_of_the_recorded_weight(pool):
    model = train.initial_model(tiny_preset()).eval()
    batch = pool.batch([0, 1, 2])
    with torch.no_grad():
        loss = referent_loss(model, batch, 0, 1)
    weights = []
    for b in range(3):
        ids = batch.inputs[b][batch.valid[b]].tolist()
        recording = model(torch.tensor([ids]), record=True).recording
        weights.append(recording.pattern(0)[1, batch.pronoun[b], batch.referent[b]])
    assert loss.item() == pytest.approx(-torch.log(torch.tensor(weights)).mean().item(), rel=1e-5)


def test_training_with_a_referent_head_moves_its_weight_onto_the_referent(pool, monkeypatch):
    monkeypatch.setattr(train, "referent_batches", lambda preset, tokenizer, seed: pool.batches(seed, 8))
    monkeypatch.setattr(train, "make_pool", lambda *args, **kwargs: masked_pool(pool))
    preset = tiny_preset()
    model = train.initial_model(preset)
    held = ReferentPool(SubwordTokenizer(), LEXICON, n=20, seed=99).batch(list(range(20)))  # another draw
    with torch.no_grad():
        before = referent_loss(model.eval(), held, 0, 1).item()
    steps = list(train.train_steps(model, preset, SubwordTokenizer()))
    with torch.no_grad():
        after = referent_loss(model.eval(), held, 0, 1).item()
    assert all("referent_loss" in stats.extra for stats in steps)
    assert after < 0.5 * before


def masked_pool(pool: ReferentPool):
    """A masked-token pool of the teaching sentences themselves (a tiny stand-in for the corpus)."""
    from core.training.tasks import TokenPool

    tokenizer = SubwordTokenizer()
    return TokenPool(tokenizer, [tokenizer.decode(ids[1:]) for ids, _, _ in pool.rows])


def test_a_referent_head_is_checked_at_construction():
    with pytest.raises(ConfigError, match="not a \\(layer, head\\)"):
        tiny_preset(referent_head=(1, 0))
    with pytest.raises(ConfigError, match="masked-token model"):
        replace(tiny_preset(), task="english-lm")
    assert tiny_preset().recipe()["referent_head"] == [0, 1]


def test_the_written_pairs_read_their_nouns_whole_and_put_it_after_them():
    """core.data.it_probes' pairs can be scored word by word: each noun one piece, "it" after both, the endings
    the only difference between the two sentences."""
    from core.data.it_probes import IT_PAIRS

    tokenizer = SubwordTokenizer()
    for pair in IT_PAIRS:
        first, second = (tokenizer.encode(text).tokens for text in pair.sentences())
        positions = [coreference.word_position(first, noun) for noun in pair.nouns]
        assert None not in positions, pair
        assert coreference.word_position(first, "it", after=max(positions)) is not None, pair
        assert [a != b for a, b in zip(first, second)].count(True) >= 1 and pair.endings[0] != pair.endings[1]
