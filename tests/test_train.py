"""Training: the loss falls on a tiny preset, and a saved checkpoint loads back to the same function."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from core.model.checkpoint import load_checkpoint, read_card, write_card
from core.model.config import ConfigError
from core.model.transformer import Transformer
from core.tokenizers.words import TextTokenizer
from core.training import stages
from core.training.tasks import IGNORE
from core.training.train import batches, learning_rate, presets, train_preset, train_steps


@pytest.fixture(autouse=True)
def one_thread():
    """Train on one torch thread, as core/training/train.py's callers do: on a busy 2-core machine two threads contend."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_loss_falls_on_the_tiny_preset():
    tokenizer = TextTokenizer()
    preset = presets(tokenizer.vocab_size)["tiny-test"]
    model = Transformer(preset.config)
    losses = [stats.loss for stats in train_steps(model, preset, tokenizer)]
    assert len(losses) == preset.steps
    assert np.mean(losses[-10:]) < 0.8 * np.mean(losses[:10])
    assert not model.training  # left in eval mode


def test_training_is_reproducible_and_the_checkpoint_round_trips(tmp_path):
    tokenizer = TextTokenizer()
    preset = presets(tokenizer.vocab_size)["tiny-test"]
    first = load_checkpoint(train_preset(preset, tmp_path / "a", progress=False))[0]
    second, card = load_checkpoint(train_preset(preset, tmp_path / "b", progress=False))
    assert card.name == "tiny-test" and card.training["loss_curve"][0][0] == 0
    ids = torch.tensor([tokenizer.encode("3 1 4 | 4 1 3").ids])
    with torch.no_grad():
        torch.testing.assert_close(first(ids).logits, second(ids).logits)


def test_half_weights_are_stored_in_float16_and_computed_in_float32(tmp_path):
    """A preset with half_weights (english-lm's siblings: assets/ under 60 MB) ships its weights rounded to float16,
    half the file; they load into float32 parameters, each the float32 weight rounded, and the card says so."""
    preset = replace(presets(TextTokenizer().vocab_size)["tiny-test"], steps=4)
    full = train_preset(preset, tmp_path / "full", progress=False)
    half = train_preset(replace(preset, half_weights=True), tmp_path / "half", progress=False)
    assert half.with_suffix(".safetensors").stat().st_size < 0.6 * full.with_suffix(".safetensors").stat().st_size
    (model, _), (rounded, card) = load_checkpoint(full), load_checkpoint(half)
    assert card.training["stored"] == "float16" and "stored" not in read_card(full).training
    for (name, weight), (_, loaded) in zip(model.state_dict().items(), rounded.state_dict().items()):
        assert loaded.dtype == weight.dtype and torch.equal(loaded, weight.half().to(weight.dtype)), name


def test_a_pool_made_beforehand_trains_the_same_model(tmp_path):
    """train_preset(pool=...) (a device run draws the pool once for many runs) reads the same batches as the pool
    it would make itself; its device argument moves every batch (a CPU here) and saves the model from the CPU."""
    from core.training.train import make_pool

    tokenizer = TextTokenizer()
    preset = presets(tokenizer.vocab_size)["tiny-test"]
    pool = make_pool(preset.task, preset.pool_size, tokenizer)
    made = load_checkpoint(train_preset(preset, tmp_path / "a", progress=False))[0]
    given = load_checkpoint(train_preset(preset, tmp_path / "b", progress=False, device="cpu", pool=pool))[0]
    for (name, a), (_, b) in zip(made.state_dict().items(), given.state_dict().items()):
        assert torch.equal(a, b), name
    batch = next(batches(preset, tokenizer, 0, pool))
    moved = batch.to("meta")
    fields = ("inputs", "targets", "valid")
    assert [getattr(moved, name) is None for name in fields] == [getattr(batch, name) is None for name in fields]
    assert {getattr(moved, name).device.type for name in fields if getattr(moved, name) is not None} == {"meta"}


def test_warm_up_then_decay():
    preset = presets(40)["lm-rope"]
    rates = [learning_rate(step, preset) for step in range(preset.steps)]
    peak = int(np.argmax(rates))
    assert peak == preset.warmup - 1 and rates[0] < rates[peak] / 10
    assert np.all(np.diff(rates[peak:]) <= 1e-12) and rates[-1] >= preset.learning_rate * 0.1 - 1e-9


def test_the_bundled_recipe_trains_exactly_as_before_the_optimiser_options():
    """The original loop (AdamW, warm-up + cosine, clipping at preset.clip, plain cross-entropy), written out here,
    and train_steps give the same losses and the same weights: the bundled models stay reproducible."""
    tokenizer = TextTokenizer()
    preset = replace(presets(tokenizer.vocab_size)["tiny-test"], steps=12)
    torch.manual_seed(preset.seed)
    original = Transformer(preset.config)
    torch.manual_seed(preset.seed)
    optimizer = torch.optim.AdamW(original.parameters(), lr=preset.learning_rate, weight_decay=preset.weight_decay)
    original.train()
    old_losses = []
    for step, batch in zip(range(preset.steps), batches(preset, tokenizer, preset.seed)):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, preset)
        logits = original(batch.inputs).logits
        loss = F.cross_entropy(logits.flatten(0, 1), batch.targets.flatten(), ignore_index=IGNORE)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(original.parameters(), preset.clip)
        optimizer.step()
        old_losses.append(loss.item())
    torch.manual_seed(preset.seed)
    model = Transformer(preset.config)
    new_losses = [stats.loss for stats in train_steps(model, preset, tokenizer, preset.seed)]
    assert new_losses == old_losses
    for (name, old), new in zip(original.state_dict().items(), model.state_dict().values()):
        assert torch.equal(old, new), name


def test_seeds_are_trained_evaluated_and_the_median_seed_shipped(tmp_path):
    from safetensors.torch import load_file

    from core.model.registry import quality
    from core.training.evaluate import seed_cards
    from core.training.train import train_seeds
    preset = replace(presets(TextTokenizer().vocab_size)["tiny-test"], steps=8, pool_size=100)
    path = train_seeds(preset, [0, 1, 2], tmp_path / "models", tmp_path / "seeds", progress=False)
    card = load_checkpoint(path)[1]
    figures = {int(seed): headline["exact"] for seed, headline in card.metrics["seeds"].items()}
    assert sorted(figures) == [0, 1, 2] == sorted(seed_cards("tiny-test", tmp_path / "seeds"))
    shipped = card.metrics["shipped_seed"]
    assert sorted(figures.values())[1] == figures[shipped]  # the median seed
    assert card.metrics["mean"]["exact"] == pytest.approx(np.mean(list(figures.values())))
    assert card.metrics["spread"]["exact"] == pytest.approx(np.std(list(figures.values())))
    assert card.metrics["headline"]["exact"] == figures[shipped] and "±" in quality(card)
    weights, seed_weights = (load_file(p.with_suffix(".safetensors")) for p in
                             (path, tmp_path / "seeds" / f"seed-{shipped}" / "tiny-test.json"))
    assert all(torch.equal(weights[k], seed_weights[k]) for k in weights)


def test_seeds_already_trained_with_the_same_recipe_are_kept(tmp_path, monkeypatch):
    import core.training.train as train
    preset = replace(presets(TextTokenizer().vocab_size)["tiny-test"], steps=8, pool_size=100)
    train.train_seeds(preset, [0], tmp_path / "models", tmp_path / "seeds", progress=False)
    seed_card = tmp_path / "seeds" / "seed-0" / "tiny-test.json"
    assert train.trained_with(seed_card, preset)
    assert not train.trained_with(seed_card, replace(preset, steps=9))  # another recipe: trained again
    assert not train.trained_with(seed_card, replace(preset, seed=1))
    trained = []
    original = train.train_preset
    monkeypatch.setattr(train, "train_preset", lambda p, *a, **k: trained.append(p.seed) or original(p, *a, **k))
    path = train.train_seeds(preset, [0, 1], tmp_path / "models", tmp_path / "seeds", progress=False)
    assert trained == [1]  # seed 0 was kept, seed 1 added
    assert sorted(load_checkpoint(path)[1].metrics["seeds"]) == ["0", "1"]


def test_evaluation_keeps_the_seed_figures_where_only_the_shipped_weights_are_here(tmp_path):
    from core.training.evaluate import evaluate_bundled, seed_cards
    from core.training.train import train_seeds
    preset = replace(presets(TextTokenizer().vocab_size)["tiny-test"], steps=8, pool_size=100)
    path = train_seeds(preset, [0, 1, 2], tmp_path / "models", tmp_path / "seeds", progress=False)
    trained = load_checkpoint(path)[1].metrics
    for seed in (0, 1, 2):  # the repository ships the seeds' cards, not their weights
        (tmp_path / "seeds" / f"seed-{seed}" / "tiny-test.safetensors").unlink()
    assert seed_cards("tiny-test", tmp_path / "seeds") == {}
    metrics = evaluate_bundled("tiny-test", TextTokenizer(), tmp_path / "models", tmp_path / "seeds")
    for key in ("seeds", "mean", "spread", "shipped_seed"):
        assert metrics[key] == trained[key] == load_checkpoint(path)[1].metrics[key]
    assert metrics["headline"] == trained["headline"]  # the shipped seed, measured again


def test_evaluation_measures_the_seeds_whose_weights_are_here_and_keeps_the_others_figures(tmp_path):
    """Seeds made again in part (their weights here, another seed's not) are measured again; the summary still covers
    every seed, the others' figures as recorded."""
    from core.training.evaluate import evaluate_bundled, seed_cards
    from core.training.train import train_seeds
    preset = replace(presets(TextTokenizer().vocab_size)["tiny-test"], steps=8, pool_size=100)
    path = train_seeds(preset, [0, 1, 2], tmp_path / "models", tmp_path / "seeds", progress=False)
    trained = load_checkpoint(path)[1].metrics
    (tmp_path / "seeds" / "seed-2" / "tiny-test.safetensors").unlink()
    seed_card = tmp_path / "seeds" / "seed-1" / "tiny-test.json"
    card = read_card(seed_card)
    card.metrics = {**card.metrics, "headline": {**card.metrics["headline"], "exact": -1.0}}  # stale: measured again
    write_card(card, seed_card.parent)
    metrics = evaluate_bundled("tiny-test", TextTokenizer(), tmp_path / "models", tmp_path / "seeds")
    assert sorted(seed_cards("tiny-test", tmp_path / "seeds")) == [0, 1]
    assert metrics["seeds"] == trained["seeds"] and metrics["mean"] == pytest.approx(trained["mean"])


def test_runs_in_parallel_train_and_ship_the_same_models_as_one_after_another(tmp_path):
    """--jobs 2: each seed of a preset is a run in a worker process of its own, then the median seed is shipped; the
    weights and figures are those of training the seeds one after another (a run depends on its recipe and seed)."""
    from safetensors.torch import load_file

    import core.training.train as train
    table = presets(TextTokenizer().vocab_size)
    one_after_another = train.train_seeds(table["tiny-test"], [0, 1], tmp_path / "a", tmp_path / "a-seeds",
                                          progress=False)
    assert train.main(["--preset", "tiny-test", "--seeds", "0", "1", "--jobs", "2", "--threads", "1",
                       "--out", str(tmp_path / "b"), "--seeds-dir", str(tmp_path / "b-seeds")]) == 0
    parallel = tmp_path / "b" / "tiny-test.json"
    assert read_card(parallel).metrics == read_card(one_after_another).metrics
    for seed in (0, 1):
        seed_card = tmp_path / "b-seeds" / f"seed-{seed}" / "tiny-test.json"
        assert train.trained_with(seed_card, replace(table["tiny-test"], seed=seed))
    a, b = (load_file(path.with_suffix(".safetensors")) for path in (one_after_another, parallel))
    assert a.keys() == b.keys() and all(torch.equal(a[key], b[key]) for key in a)


def test_train_all_reproduces_each_compared_model_from_its_seeds(monkeypatch, tmp_path):
    """--all trains every bundled preset; the models the toggles compare and english-lm are each the median of three
    seeds, the others one run. Every shipped card was made that way (its seeds are the preset's)."""
    import core.training.train as train
    from core.model.registry import list_cards
    calls = {}
    monkeypatch.setattr(train, "train_seeds", lambda p, seeds, out, **_: calls.setdefault(p.name, tuple(seeds)) and out)
    monkeypatch.setattr(train, "train_preset", lambda p, out, **_: calls.setdefault(p.name, ()) or out)
    assert train.main(["--all", "--out", str(tmp_path)]) == 0
    table = presets(TextTokenizer().vocab_size)
    assert set(calls) == set(table) - set(train.NOT_IN_ALL)
    for name, seeds in calls.items():
        assert seeds == table[name].seeds  # each at its preset's seeds (english-lm at three, issue 34)
        compared = table[name].task in train.COMPARED_TASKS and not table[name].pack
        assert seeds == train.COMPARED_SEEDS or not compared
    assert calls["english-lm"] == train.COMPARED_SEEDS and calls["lm-rope-long"] == ()
    for card in list_cards():
        if card.name in table and table[card.name].seeds and "seeds" in card.metrics:
            assert sorted(map(int, card.metrics["seeds"])) == sorted(table[card.name].seeds)


def test_image_batches_are_turned_by_the_squares_symmetries_only_when_the_recipe_says_so():
    """augment=True: every image of a batch is its pool image under one of the 8 symmetries of the square, all 8
    occur, the labels stay; augment=False: the pool's images as they are. A text preset cannot ask for it."""
    from core.model.config import ConfigError
    from core.training.tasks import ImagePool

    preset = replace(presets(TextTokenizer().vocab_size)["vit-learned"], batch_size=256, augment=False)
    pool = ImagePool(256, 0)
    plain, turned = (next(batches(replace(preset, augment=augment), None, 0, pool)) for augment in (False, True))
    assert torch.equal(plain.targets, turned.targets)
    symmetries = []
    for original, image in zip(plain.inputs, turned.inputs):
        candidates = [original.rot90(k, (-2, -1)) for k in range(4)]
        candidates += [c.transpose(-1, -2) for c in candidates]
        matching = [k for k, c in enumerate(candidates) if torch.equal(c, image)]
        assert matching, "an image that is no symmetry of its pool image"
        symmetries.append(matching[0])
    assert set(symmetries) == set(range(8))
    assert torch.equal(plain.inputs, pool.batch(torch.randint(256, (256,), generator=torch.Generator().manual_seed(0))
                                                .tolist()).inputs)
    assert "augment" not in preset.recipe() and replace(preset, augment=True).recipe()["augment"] is True
    with pytest.raises(ConfigError, match="augment turns images"):
        replace(presets(TextTokenizer().vocab_size)["lm-rope"], augment=True)


def test_a_tie_in_the_main_figure_is_broken_by_the_next():
    """Every language model seed agreed 100 %, so the median seed was always the middle one trained (issue 34): the
    tie now goes to perplexity (lower is better), and the median seed is the median by perplexity."""
    from core.training.evaluate import median_seed
    per_seed = {seed: {"headline": {"agreement": 1.0, "ppl": ppl}} for seed, ppl in ((0, 5.0), (1, 4.0), (2, 6.0))}
    assert median_seed(per_seed) == 0
    per_seed[1]["headline"]["agreement"] = 0.9  # the main figure first: seed 1 is now the worst, whatever its ppl
    assert median_seed(per_seed) == 2  # of the two at 100 %, the one with the higher perplexity


def _small_vit(polish_steps: int = 0, pen_steps: int = 0):
    """A vision transformer's recipe, small enough to train in a test, with a second stage of polish_steps and a
    third of pen_steps."""
    from core.training.train import image_config
    return replace(presets(TextTokenizer().vocab_size)["vit-learned"], config=image_config(d_model=16, d_mlp=32,
                   n_layers=1), steps=4, batch_size=8, pool_size=40, warmup=2, polish_steps=polish_steps,
                   pen_steps=pen_steps)


def test_both_stages_at_once_round_only_the_finished_model(tmp_path, monkeypatch):
    """With half_weights (the ViTs' recipe), the second stage goes on from the first stage's exact float32 weights;
    only the finished model is stored in float16."""
    import core.training.train as train
    from safetensors.torch import load_file
    monkeypatch.setattr(stages, "POLISH_POOL", 40)
    preset = _small_vit(polish_steps=2)
    assert preset.half_weights
    starts = []
    original_trained = train._trained
    monkeypatch.setattr(train, "_trained", lambda model, p, *a: starts.append(
        {k: v.clone() for k, v in model.state_dict().items()}) or original_trained(model, p, *a))
    path = train.train_preset(preset, tmp_path, progress=False)
    first_end = starts[1]  # what the second stage started from
    assert any(not torch.equal(v, v.half().float()) for v in first_end.values() if v.is_floating_point())
    stored = load_file(path.with_suffix(".safetensors"))
    assert all(v.dtype == torch.float16 for v in stored.values() if v.is_floating_point())


def test_a_second_stage_starts_from_the_first_stages_weights_on_its_own_mix(tmp_path, monkeypatch):
    """A preset with polish_steps trains its first stage, then that many steps more from those weights on the
    polish mix at a tenth of the peak rate; a seed trained with the first stage alone gets only the second."""
    import core.training.train as train
    from core.data.images import POLISH_MIX
    monkeypatch.setattr(stages, "POLISH_POOL", 40)
    monkeypatch.setattr(train, "evaluate_card", lambda path, tokenizer: {"headline": {"worst_set": 0.5}})
    first = stages.first_stage(_small_vit(polish_steps=3))
    assert first.polish_steps == 0 and first.recipe() == _small_vit().recipe()
    second = stages.polish_stage(_small_vit(polish_steps=3))
    assert (second.steps, second.schedule, second.later_stage) == (3, "constant", "polish")
    assert second.learning_rate == pytest.approx(first.learning_rate / 10)
    mixes = []
    monkeypatch.setattr(train, "ImagePool", lambda n, seed, mix: mixes.append(mix) or original_pool(n, seed, mix=mix))
    from core.training.tasks import ImagePool as original_pool
    seed_card = train.train_preset(first, tmp_path / f"seed-{first.seed}", progress=False)
    start = load_checkpoint(seed_card)[0].state_dict()
    assert train.trained_with(seed_card, first) and not train.trained_with(seed_card, _small_vit(polish_steps=3))
    trained = []
    monkeypatch.setattr(train, "train_preset", lambda p, *a, **k: trained.append(p) or pytest.fail("retrained"))
    polished = []
    original_trained = train._trained
    monkeypatch.setattr(train, "_trained", lambda model, p, *a: polished.append(
        {k: torch.equal(v, start[k]) for k, v in model.state_dict().items()}) or original_trained(model, p, *a))
    path = train.train_seeds(_small_vit(polish_steps=3), [first.seed], tmp_path / "models", tmp_path,
                             progress=False)
    assert all(polished[0].values()), "the second stage starts from the first stage's weights"
    assert mixes[-1] == POLISH_MIX and mixes[0] != POLISH_MIX
    card = load_checkpoint(path)[1]
    assert card.training["polish_steps"] == 3 and [s for s, _ in card.training["polish_loss_curve"]] == [0, 2]
    assert train.trained_with(seed_card, _small_vit(polish_steps=3))
    assert not train.trained_with(seed_card, first), "a polished seed is not the first stage's any more"
    assert not train.trained_with(seed_card, _small_vit(polish_steps=4))


def test_a_third_stage_goes_on_from_the_second_stages_stored_weights_on_the_pen_mix(tmp_path, monkeypatch):
    """A preset with pen_steps runs its third stage after the second, from the second's weights as stored, on
    PEN_MIX; a seed trained through the second stage gets only the third, and the card says each stage's run."""
    import core.training.train as train
    from core.data.images import PEN_MIX, POLISH_MIX
    from core.training.tasks import ImagePool as original_pool
    monkeypatch.setattr(stages, "POLISH_POOL", 40)
    monkeypatch.setattr(train, "evaluate_card", lambda path, tokenizer: {"headline": {"worst_set": 0.5}})
    full, through_second = _small_vit(polish_steps=2, pen_steps=3), _small_vit(polish_steps=2)
    assert [name for name, _ in stages.stages(full)] == ["first", "polish", "pen"]
    third = stages.pen_stage(full)
    assert (third.steps, third.later_stage, third.learning_rate) == (3, "pen", stages.polish_stage(full).learning_rate)
    seed_dir = tmp_path / f"seed-{full.seed}"
    seed_card = train.train_preset(through_second, seed_dir, progress=False)
    second_end = load_checkpoint(seed_card)[0].state_dict()
    assert train.trained_with(seed_card, through_second) and not train.trained_with(seed_card, full)
    mixes, starts = [], []
    monkeypatch.setattr(train, "ImagePool", lambda n, seed, mix: mixes.append(mix) or original_pool(n, seed, mix=mix))
    monkeypatch.setattr(train, "train_preset", lambda *a, **k: pytest.fail("retrained from the start"))
    original_trained = train._trained
    monkeypatch.setattr(train, "_trained", lambda model, p, *a: starts.append(
        all(torch.equal(v, second_end[k]) for k, v in model.state_dict().items())) or original_trained(model, p, *a))
    train.train_seed(full, full.seed, tmp_path, progress=False)
    assert starts == [True] and mixes == [PEN_MIX] and PEN_MIX != POLISH_MIX, "only the third stage ran"
    card = load_checkpoint(seed_card)[1]
    assert card.training["pen_steps"] == 3 and card.training["polish_steps"] == 2
    assert [step for step, _ in card.training["pen_loss_curve"]] == [0, 2] and "polish_loss_curve" in card.training
    assert train.trained_with(seed_card, full) and not train.trained_with(seed_card, through_second)
    with pytest.raises(ConfigError, match="pen stage goes on from the second"):
        _small_vit(pen_steps=3)


def test_the_corpus_and_the_mask_fraction_are_checked_and_recorded():
    table = presets(TextTokenizer().vocab_size)
    mlm = table["english-mlm"]
    assert mlm.recipe()["corpus"] == "english-referents" and "mask_fraction" not in mlm.recipe()  # BERT's 15 %
    assert replace(mlm, mask_fraction=0.4).recipe()["mask_fraction"] == 0.4
    # the defaults stay out of a recipe, so the cards trained before these options still match it (trained_with)
    assert {"corpus", "mask_fraction"}.isdisjoint(table["english-lm"].recipe())
    for change, message in ((dict(corpus="nope"), "corpus 'nope' is not one of"),
                            (dict(mask_fraction=1.0), "must be in \\(0, 1\\)"),
                            (dict(task="english-lm", mask_fraction=0.4), "mask fraction is a masked-token task's")):
        with pytest.raises(ConfigError, match=message):
            replace(mlm, **change)
    with pytest.raises(ConfigError, match="reads none"):
        replace(table["tiny-test"], corpus="english-referents")


def test_random_strides_spread_the_positions_of_a_language_models_batches():
    """english-rope and english-sinusoidal train on positions that step by 1 or 2 (a fresh draw each batch); the other
    models keep 0..N-1, and the option is refused for an encoding that is not a function of the position."""
    table = presets(TextTokenizer().vocab_size)
    rope = table["english-rope"]
    assert rope.random_strides and rope.recipe()["random_strides"] is True
    assert {name for name, p in table.items() if p.random_strides} == {"english-rope", "english-sinusoidal"}
    assert "random_strides" not in table["english-lm"].recipe()  # so the cards trained before it still match
    tiny = replace(table["lm-rope"], pool_size=50, batch_size=4, random_strides=True)
    stream = batches(tiny, TextTokenizer(), seed=0)
    first, second = next(stream), next(stream)
    for batch in (first, second):
        steps = batch.positions[1:] - batch.positions[:-1]
        assert batch.positions[0] == 0 and len(batch.positions) == batch.inputs.shape[1] and set(steps.tolist()) <= {1, 2}
    assert not torch.equal(first.positions[:8], second.positions[:8])
    assert next(batches(table["lm-rope"], TextTokenizer(), seed=0)).positions is None
    for change in (dict(config=table["english-lm"].config), dict(config=table["english-none"].config),
                   dict(task="english-mlm")):
        with pytest.raises(ConfigError, match="random strides spread a language model's positions"):
            replace(rope, **change)
    for pe in ("alibi", "relative"):
        assert replace(table[f"english-{pe}"], random_strides=True).recipe()["random_strides"] is True


def test_a_masked_batch_hides_the_fraction_it_is_given():
    from core.training.tasks import text_pool

    tokenizer = TextTokenizer()
    pool = text_pool("grammar-mlm", 300, 0, tokenizer)
    indices = list(range(300))
    for fraction in (0.15, 0.4):
        batch = pool.masked_token_batch(indices, torch.Generator().manual_seed(0), fraction)
        words = batch.valid & (batch.targets != IGNORE)
        share = float(words.sum() / (batch.valid.sum() - 2 * len(indices)))  # [BOS] and [EOS] are never hidden
        assert abs(share - fraction) < 0.03


def test_only_image_models_have_later_stages():
    text = presets(TextTokenizer().vocab_size)["tiny-test"]
    for later in ({"polish_steps": 5}, {"polish_steps": 5, "pen_steps": 5}, {"later_stage": "polish"}):
        with pytest.raises(ConfigError, match="later stages polish an image model"):
            replace(text, **later)
    with pytest.raises(ConfigError, match="not one of polish, pen"):
        replace(_small_vit(), later_stage="glaze")


def _started_from_tiny(**changes):
    """tiny-test's recipe under another name, starting from tiny-test's trained model."""
    tiny = presets(TextTokenizer().vocab_size)["tiny-test"]
    return tiny, replace(tiny, name="tiny-next", init_from="tiny-test", steps=5, **changes)


def test_a_preset_with_init_from_starts_from_that_models_weights_with_its_own_mask_and_head(tmp_path):
    """english-mlm starts from english-lm's weights: every weight is copied one to one, and only the mask and the
    head (which have none) change; the card's recipe names the source."""
    import core.training.train as train
    tiny, started = _started_from_tiny()
    masked = replace(started, config=started.config.replace(mask="none", head="masked_token"))
    source = load_checkpoint(train_preset(replace(tiny, steps=5), tmp_path, progress=False))[0].state_dict()
    model = train.initial_model(masked, tmp_path)
    assert model.cfg.head == "masked_token" and not model.cfg.is_causal
    assert model.state_dict().keys() == source.keys()
    assert all(torch.equal(weight, source[name]) for name, weight in model.state_dict().items())
    assert read_card(train_preset(started, tmp_path, progress=False)).training["init_from"] == "tiny-test"
    with pytest.raises(ConfigError, match="train it first"):
        train.initial_model(started, tmp_path / "empty")


def test_every_seed_of_a_started_preset_starts_from_the_shipped_source(tmp_path, monkeypatch):
    """A seed of english-mlm starts from the english-lm that ships (its median seed), not from the same seed of
    english-lm that seeds_dir may hold, so every seed is re-made from the bundle alone; the card names the seed."""
    import core.training.train as train
    tiny, started = _started_from_tiny()
    shipped = train_preset(replace(tiny, steps=5, seed=7), tmp_path / "models", progress=False)
    train_preset(replace(tiny, steps=5, seed=1), tmp_path / "seeds" / "seed-1", progress=False)
    calls, real = [], train.initial_model
    monkeypatch.setattr(train, "initial_model", lambda preset, source: calls.append(source) or real(preset, source))
    train.train_seed(started, 1, tmp_path / "seeds", progress=False, source_dir=tmp_path / "models")
    assert calls == [tmp_path / "models"]
    card = read_card(tmp_path / "seeds" / "seed-1" / "tiny-next.json")
    assert card.training["init_from_seed"] == read_card(shipped).training["seed"] == 7


def test_init_from_is_checked_against_the_table():
    import core.training.train as train
    tiny, started = _started_from_tiny()
    for other, message in ((replace(started, init_from="no-such"), "not a preset"),
                           (replace(started, config=started.config.replace(d_model=48)), "d_model"),):
        with pytest.raises(ConfigError, match=message):
            train.check_init_sources({tiny.name: tiny, other.name: other})
    chained = replace(started, name="tiny-after", init_from="tiny-next")
    with pytest.raises(ConfigError, match="starts from another model itself"):
        train.check_init_sources({tiny.name: tiny, started.name: started, chained.name: chained})


def test_runs_in_parallel_train_a_started_preset_after_its_source(tmp_path):
    """--jobs: a preset that starts from another of the runs waits for it to ship, so it starts from the same weights
    as one after another."""
    from safetensors.torch import load_file

    from core.training.parallel import train_in_parallel
    tiny, started = _started_from_tiny()
    train_preset(tiny, tmp_path / "a", progress=False)
    one_after_another = train_preset(started, tmp_path / "a", progress=False)
    cards = train_in_parallel([(started, ()), (tiny, ())], 2, tmp_path / "b", tmp_path / "seeds")
    assert [card.name for card in cards] == ["tiny-next.json", "tiny-test.json"]
    a, b = (load_file(path.with_suffix(".safetensors")) for path in (one_after_another, cards[0]))
    assert all(torch.equal(a[key], b[key]) for key in a)
